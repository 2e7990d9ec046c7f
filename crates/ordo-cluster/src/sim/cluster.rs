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
        // A request renews the member's lease at the CM.
        let local = self.clock(to).local_reading();
        if let Some(lease) = st.nodes[idx(to)].member_leases.get_mut(&from) {
            *lease = (local.max(lease.0), false);
        }
        let Some(cm) = self.clock(to).master_time() else { return };
        if let Some(delay) = st.send(to, from) {
            st.schedule(delay, Event::SyncReply { from: to, to: from, start, cm });
        }
    }

    pub(super) fn sync_reply(&self, from: NodeId, to: NodeId, start: SyncStart, cm: Interval) {
        let mut st = self.st.borrow_mut();
        let node = &mut st.nodes[idx(to)];
        if !node.alive || node.config.cm != from {
            return;
        }
        if self.clock(to).finish_sync(start, cm).is_ok() {
            // A successful sync renews the CM lease, counted from the request's send time.
            let sent = start.send().lo().as_nanos();
            if sent > node.cm_lease_renewed {
                node.cm_lease_renewed = sent;
                node.cm_lease_expired = false;
            }
        }
    }

    pub(super) fn lease_tick(&self, id: NodeId) {
        let mut st = self.st.borrow_mut();
        if !st.nodes[idx(id)].alive {
            return;
        }
        st.schedule(LEASE_CHECK_NANOS, Event::LeaseTick(id));
        let cm = st.nodes[idx(id)].config.cm;
        if cm == id {
            return;
        }
        let sent_local = self.clock(id).local_reading();
        if let Some(delay) = st.send_lease(id, cm) {
            st.schedule(delay, Event::LeaseRequest { from: id, to: cm, sent_local });
        }
    }

    pub(super) fn lease_request(&self, from: NodeId, to: NodeId, sent_local: u64) {
        let mut st = self.st.borrow_mut();
        let node = &st.nodes[idx(to)];
        if !node.alive || node.config.cm != to || node.config.member(from).is_none() {
            return;
        }
        let local = self.clock(to).local_reading();
        if let Some(lease) = st.nodes[idx(to)].member_leases.get_mut(&from) {
            *lease = (local.max(lease.0), false);
        }
        if let Some(delay) = st.send_lease(to, from) {
            st.schedule(delay, Event::LeaseGrant { from: to, to: from, sent_local });
        }
    }

    pub(super) fn lease_grant(&self, from: NodeId, to: NodeId, sent_local: u64) {
        let mut st = self.st.borrow_mut();
        let node = &mut st.nodes[idx(to)];
        if !node.alive || node.config.cm != from {
            return;
        }
        if sent_local > node.cm_lease_renewed {
            node.cm_lease_renewed = sent_local;
            node.cm_lease_expired = false;
        }
    }

    /// `node.rs::check_leases`: a non-CM whose CM lease expired disables its clock and suspects
    /// the CM; the CM suspects members whose leases expired.
    pub(super) fn lease_check(&self, id: NodeId) {
        let mut st = self.st.borrow_mut();
        if !st.nodes[idx(id)].alive {
            return;
        }
        // The lease thread is sometimes scheduled late, by up to another check interval
        // (`node.rs`'s lease wait of 1.5 periods allows for exactly this).
        let late =
            if st.rng.chance_ppm(LATE_CHECK_PPM) { st.rng.range(0, LEASE_CHECK_NANOS) } else { 0 };
        st.schedule(LEASE_CHECK_NANOS + late, Event::LeaseCheck(id));
        let local = self.clock(id).local_reading();
        let now = st.now;
        let node = &mut st.nodes[idx(id)];
        let cm = node.config.cm;
        let mut suspects = BTreeSet::new();
        if cm == id {
            for (&member, lease) in &mut node.member_leases {
                if local.saturating_sub(lease.0) > LEASE_NANOS {
                    lease.1 = true;
                }
                if lease.1 {
                    suspects.insert(member);
                }
            }
        } else {
            if !node.cm_lease_expired && local.saturating_sub(node.cm_lease_renewed) > LEASE_NANOS {
                node.cm_lease_expired = true;
                self.clock(id).disable_for_reconfiguration();
                self.trace(|| format!("{id}: CM lease expired, clock disabled"));
            }
            if node.cm_lease_expired {
                suspects.insert(cm);
            }
        }
        if suspects.is_empty() {
            return;
        }
        let recently = node.last_attempt.as_ref().is_some_and(|(tried, at)| {
            *tried == suspects && now.saturating_sub(*at) < FAILOVER_RETRY_NANOS
        });
        if !recently && !st.pending.iter().any(|(n, _)| *n == id) {
            st.pending.push((id, suspects));
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
            Fault::Cm | Fault::CmTwice => st.fail(cm, false),
            Fault::CmPlusOne { partitioned } => {
                let victim = pick(&mut st);
                st.fail(cm, false);
                st.fail(victim, partitioned);
            }
            Fault::CmPartitioned => st.fail(cm, true),
        }
    }

    pub(super) fn crash(&self, id: NodeId) {
        self.st.borrow_mut().fail(id, false);
    }
}
