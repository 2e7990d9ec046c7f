//! The cluster's background: clock syncs, leases and their checks, and the faults.

use std::collections::BTreeSet;

use ordo_clock::{Interval, SyncStart};

use super::*;

impl World {
    pub(super) fn sync_tick(&self, id: NodeId) {
        let mut st = self.st.borrow_mut();
        if !st.nodes[idx(id)].alive {
            return;
        }
        let next = st.rng.range(SYNC_PERIOD_NANOS / 2, SYNC_PERIOD_NANOS * 3 / 2);
        st.schedule(next, Event::SyncTick(id));
        let cm = st.nodes[idx(id)].config.cm;
        if cm == id {
            return;
        }
        // `node.rs::sync_once`: a member prepared for a new CM (`cm_change_acked`) starts no sync
        // with the old one for up to `PREPARED_MAX` leases. (A sync already in flight when the
        // NEW-CONFIG arrived is stale: `disable_for_reconfiguration` moved the generation.)
        if !self.options.resync_while_prepared {
            let local = self.clock(id).local_reading();
            let node = &mut st.nodes[idx(id)];
            if let Some(at) = node.cm_change_acked {
                if local.saturating_sub(at) < PREPARED_MAX_NANOS {
                    // The skipped request's randomness is drawn all the same, so that a run in
                    // which the skip changes nothing (the old CM is gone) stays the same run.
                    let _ = st.send(id, cm);
                    return;
                }
                node.cm_change_acked = None;
            }
        }
        let start = self.clock(id).begin_sync();
        // A slow path delays the request before the CM reads its clock: the upper bound of
        // every sync of this member is wide.
        let slow = st.nodes[idx(id)].slow_sync_nanos;
        if let Some(delay) = st.send(id, cm) {
            st.schedule(delay + slow, Event::SyncRequest { from: id, to: cm, start });
        }
    }

    pub(super) fn sync_request(&self, from: NodeId, to: NodeId, start: SyncStart) {
        let mut st = self.st.borrow_mut();
        let node = &st.nodes[idx(to)];
        if !node.alive || node.config.cm != to || node.config.member(from).is_none() {
            return;
        }
        // A sync does not renew a lease (`node.rs`: only lease requests and grants do).
        let Some(cm) = self.clock(to).master_time() else { return };
        if let Some(delay) = st.send(to, from) {
            st.schedule(delay, Event::SyncReply { from: to, to: from, start, cm });
        }
    }

    pub(super) fn sync_reply(&self, from: NodeId, to: NodeId, start: SyncStart, cm: Interval) {
        let st = self.st.borrow_mut();
        let node = &st.nodes[idx(to)];
        if !node.alive || node.config.cm != from {
            return;
        }
        // A successful sync enables the clock again; it does not renew the CM's lease.
        let _ = self.clock(to).finish_sync(start, cm);
    }

    pub(super) fn lease_tick(&self, id: NodeId) {
        let mut st = self.st.borrow_mut();
        if !st.nodes[idx(id)].alive {
            return;
        }
        st.schedule(LEASE_CHECK_NANOS, Event::LeaseTick(id));
        let cm = st.nodes[idx(id)].config.cm;
        // `lease_loop` renews only on a node whose clock is not the master (a new CM between
        // enabling its clock and adopting its configuration renews no more with the old one).
        if cm == id || self.clock(id).is_master() {
            return;
        }
        // `lease_loop`: a member that suspects the CM renews no more with it, so that its
        // renewals cannot end the CM's fence while it is removing the CM.
        let suspected = st.nodes[idx(id)].leases.get(&cm).is_some_and(|l| l.expired);
        if suspected && !self.options.renew_while_suspecting {
            return;
        }
        // With quorum grants: a member prepared for a new CM (it acknowledged a NEW-CONFIG that
        // changes the CM) renews no more with the old one, so the old CM's quorum counts only
        // members that have not moved on.
        if self.options.quorum_grants && st.nodes[idx(id)].cm_change_acked.is_some() {
            return;
        }
        // `lease_loop` awaits the renewal before it goes on: no second one meanwhile.
        if self.options.await_renewals && st.nodes[idx(id)].renewing.is_some() {
            return;
        }
        let sent_local = self.clock(id).local_reading();
        let seq = st.nodes[idx(id)].config.seq;
        if self.options.await_renewals {
            st.nodes[idx(id)].renewing = Some(sent_local);
            st.schedule(RENEW_TIMEOUT_NANOS, Event::RenewTimeout { node: id, sent_local });
        }
        if let Some(delay) = st.send_lease(id, cm) {
            st.schedule(delay, Event::LeaseRequest { from: id, to: cm, seq, sent_local });
        }
    }

    /// `node.rs`'s LeaseRequest handler: the CM of configuration `seq` records the renewal at
    /// the request's arrival, and grants it. A node whose clock is not the master refuses
    /// (`NOT_CM`), whatever its configuration says: an initiator whose CM-changing round failed
    /// grants no leases until a round enables its clock.
    pub(super) fn lease_request(&self, from: NodeId, to: NodeId, seq: u64, sent_local: u64) {
        let mut st = self.st.borrow_mut();
        let node = &st.nodes[idx(to)];
        if !node.alive
            || !self.clock(to).is_master()
            || (!self.clock(to).is_enabled() && self.options.fenced_cm_refuses)
            || node.config.cm != to
            || node.config.seq != seq
            || node.config.member(from).is_none()
        {
            return;
        }
        let local = self.clock(to).local_reading();
        if self.options.quorum_grants {
            let node = &mut st.nodes[idx(to)];
            node.asked.insert(from, local);
            let heard = 1 + node
                .config
                .non_cms()
                .filter(|m| node.asked.get(&m.id).is_some_and(|&at| local - at <= CM_FENCE_NANOS))
                .count();
            if heard * 2 > node.config.members.len() {
                node.quorum_seen = true;
            } else if node.quorum_seen {
                self.trace(|| format!("{to}: no quorum, lease of {from} refused"));
                return;
            }
        }
        if !self.options.ack_renewals {
            st.nodes[idx(to)]
                .leases
                .entry(from)
                .or_insert(SimLease::expect(local, local))
                .renew(local);
        }
        if let Some(delay) = st.send_lease(to, from) {
            let grant = Event::LeaseGrant { from: to, to: from, sent_local, arrived_local: local };
            st.schedule(delay, grant);
        }
    }

    /// `node.rs`'s LeaseAck handler: the CM renews the member's lease, counted from its
    /// request's arrival, once the member shows the grant reached it.
    pub(super) fn lease_ack(&self, from: NodeId, to: NodeId, seq: u64, arrived_local: u64) {
        let mut st = self.st.borrow_mut();
        let node = &st.nodes[idx(to)];
        if !node.alive
            || !self.clock(to).is_master()
            || node.config.cm != to
            || node.config.seq != seq
            || node.config.member(from).is_none()
        {
            return;
        }
        let local = self.clock(to).local_reading();
        st.nodes[idx(to)]
            .leases
            .entry(from)
            .or_insert(SimLease::expect(local, local))
            .renew(arrived_local);
    }

    pub(super) fn lease_grant(
        &self,
        from: NodeId,
        to: NodeId,
        sent_local: u64,
        arrived_local: u64,
    ) {
        let mut st = self.st.borrow_mut();
        let node = &mut st.nodes[idx(to)];
        if !node.alive {
            return;
        }
        let mut deferred = false;
        if self.options.await_renewals {
            // `call_timeout`: a grant after the timeout answers a call nobody waits for.
            if node.renewing != Some(sent_local) {
                self.trace(|| format!("{to}: a grant from {from} after its call timed out"));
                return;
            }
            node.renewing = None;
            deferred = std::mem::take(&mut node.check_deferred);
        }
        if node.config.cm == from {
            // `renew_once`: the CM's lease counts from when the request was sent.
            let lease = node.leases.entry(from).or_insert(SimLease::expect(sent_local, sent_local));
            if lease.expired {
                self.trace(|| format!("{to}: a grant from {from} arrives after its lease expired"));
            }
            lease.renew(sent_local);
            // `renew_once`: the LeaseAck follows the grant.
            let seq = node.config.seq;
            if self.options.ack_renewals
                && let Some(delay) = st.send_lease(to, from)
            {
                st.schedule(delay, Event::LeaseAck { from: to, to: from, seq, arrived_local });
            }
        }
        drop(st);
        if deferred {
            self.lease_check(to);
        }
    }

    /// The awaited renewal sent at `sent_local` timed out ([`SimOptions::await_renewals`]): the
    /// lease thread goes on, with the lease check that fell due meanwhile.
    pub(super) fn renew_timeout(&self, id: NodeId, sent_local: u64) {
        let mut st = self.st.borrow_mut();
        let node = &mut st.nodes[idx(id)];
        if node.renewing != Some(sent_local) {
            return;
        }
        node.renewing = None;
        let deferred = std::mem::take(&mut node.check_deferred);
        drop(st);
        if deferred {
            self.lease_check(id);
        }
    }

    /// `node.rs::check_leases`: leases not renewed for a period expire (once per episode); a
    /// non-CM whose CM lease expired disables its clock and suspects the CM; the CM suspects
    /// members whose leases expired, and fences itself (`fence_cm`).
    pub(super) fn lease_check(&self, id: NodeId) {
        let mut st = self.st.borrow_mut();
        if !st.nodes[idx(id)].alive {
            return;
        }
        // `lease_loop` checks after the renewal it awaits returned (or timed out).
        if self.options.await_renewals && st.nodes[idx(id)].renewing.is_some() {
            st.nodes[idx(id)].check_deferred = true;
            return;
        }
        // The lease thread is sometimes scheduled late, by up to another check interval
        // (`node.rs`'s lease wait of 1.5 periods allows for exactly this).
        let late_max = self.options.late_check_max_nanos.unwrap_or(LEASE_CHECK_NANOS);
        let late = if st.rng.chance_ppm(LATE_CHECK_PPM) { st.rng.range(0, late_max) } else { 0 };
        st.schedule(LEASE_CHECK_NANOS + late, Event::LeaseCheck(id));
        let local = self.clock(id).local_reading();
        let now = st.now;
        let node = &mut st.nodes[idx(id)];
        let cm = node.config.cm;
        for (&peer, lease) in &mut node.leases {
            if !lease.expired && local.saturating_sub(lease.renewed) > LEASE_NANOS {
                lease.expired = true;
                if peer == cm && cm != id {
                    self.clock(id).disable_for_reconfiguration();
                    self.trace(|| format!("{id}: CM lease expired, clock disabled"));
                }
            }
        }
        // `node.rs` gates both fences on `is_cm()`, the clock's master flag, not on the
        // configuration: an initiator whose CM-changing round failed has adopted a
        // configuration that names it CM, but its clock is no master until a round enables it,
        // and it fences nothing meanwhile.
        if self.clock(id).is_master() && !self.options.no_cm_fence {
            self.fence_cm(id, node, local);
        }
        if !self.options.fence_counts_grace {
            self.fence_member(id, node, local);
        }
        let suspects: BTreeSet<NodeId> = node
            .leases
            .iter()
            .filter(|&(&p, l)| l.expired && (cm == id || p == cm))
            .map(|(&p, _)| p)
            .collect();
        if suspects.is_empty() {
            return;
        }
        let recently = node.last_attempt.as_ref().is_some_and(|(tried, at)| {
            *tried == suspects && now.saturating_sub(*at) < FAILOVER_RETRY_NANOS
        });
        if !recently && !node.reconfiguring {
            node.reconfiguring = true;
            st.pending.push((id, suspects));
        }
    }

    /// `node.rs::fence_cm`: a CM that has not had a lease request from some current member for
    /// half a lease period disables its clock; once no member is silent and no reconfiguration
    /// runs on it, it enables the clock again at its own bound.
    ///
    /// Silence counts from the member's last renewal or, for a member that never renewed since
    /// this node became CM, from then (`LeaseTable::silent_for`): the grace delays suspicion,
    /// not the fence. With [`SimOptions::fence_counts_grace`] it counts from the end of the
    /// grace, as `node.rs` did before.
    fn fence_cm(&self, id: NodeId, node: &mut NodeState, local: u64) {
        let counts_grace = self.options.fence_counts_grace;
        let silent: Vec<NodeId> = node
            .config
            .non_cms()
            .filter(|m| {
                node.leases
                    .get(&m.id)
                    .is_some_and(|l| l.silent_for(local, counts_grace) > CM_FENCE_NANOS)
            })
            .map(|m| m.id)
            .collect();
        let clock = self.clock(id);
        if !silent.is_empty() && !node.cm_fenced {
            let ff = clock.disable_for_reconfiguration();
            node.cm_fenced = true;
            self.trace(|| format!("{id}: CM fenced, {silent:?} silent, FF {ff:?}"));
        } else if silent.is_empty() && node.cm_fenced && !node.reconfiguring {
            let ff = clock.enable_master_at(clock.disable_for_reconfiguration());
            node.cm_fenced = false;
            self.trace(|| format!("{id}: CM enabled again at {ff:?}"));
        }
    }

    /// `node.rs::fence_member`: a member (its clock not the master) whose clock is enabled and
    /// which has not renewed its lease with the CM for a full period — counted from its last
    /// renewal or, if it never renewed with this CM, from when it adopted it — disables its
    /// clock; the next successful sync enables it again. The grace before the CM is *suspected*
    /// does not delay this.
    fn fence_member(&self, id: NodeId, node: &NodeState, local: u64) {
        let clock = self.clock(id);
        if clock.is_master() || !clock.is_enabled() {
            return;
        }
        let cm = node.config.cm;
        let silent = node.leases.get(&cm).map(|l| l.silent_for(local, false));
        if silent.is_some_and(|d| d > LEASE_NANOS) {
            let ff = clock.disable_for_reconfiguration();
            self.trace(|| {
                format!("{id}: no lease with CM {cm} for {silent:?} ns, clock disabled, FF {ff:?}")
            });
        }
    }

    // ---- faults ----

    pub(super) fn strike(&self) {
        let unsynced: Vec<NodeId> = (1..=self.members as u64)
            .filter(|&id| !self.clock(id).is_master() && self.clock(id).stats().syncs == 0)
            .collect();
        if !unsynced.is_empty() && !self.strike_before_sync {
            // A survivor without any sync state knows no bound on the CM's time (module docs,
            // "A failover before the first sync"): wait until every member synced once.
            self.trace(|| format!("fault waits: {unsynced:?} never synced"));
            self.st.borrow_mut().schedule(MILLI, Event::Strike);
            return;
        }
        self.trace(|| format!("fault {:?} strikes", self.st.borrow().fault));
        let mut st = self.st.borrow_mut();
        let cm = st.etcd.cm;
        let others: Vec<NodeId> =
            st.etcd.members.iter().map(|m| m.id).filter(|&id| id != cm).collect();
        let pick = |st: &mut State| {
            let i = usize::try_from(st.rng.range(0, others.len() as u64 - 1)).unwrap_or(0);
            others[i]
        };
        let fault = st.fault;
        match fault {
            Fault::Nothing => {}
            Fault::NonCm { partitioned } => {
                let victim = pick(&mut st);
                st.fail(victim, partitioned);
            }
            Fault::Cm | Fault::CmTwice | Fault::NewCmPartitioned => st.fail(cm, false),
            Fault::CmPlusOne { partitioned } => {
                let victim = pick(&mut st);
                st.fail(cm, false);
                st.fail(victim, partitioned);
            }
            Fault::CmPartitioned => st.fail(cm, true),
        }
    }

    pub(super) fn crash(&self, id: NodeId, partitioned: bool) {
        self.st.borrow_mut().fail(id, partitioned);
    }
}
