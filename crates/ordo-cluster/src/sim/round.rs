//! Failover over the simulated etcd and network: `node.rs::reconfigure` and the round's
//! messages ([`SimMembers`]).

use std::collections::BTreeSet;

use ordo_clock::Timestamp;

use super::*;
use crate::failover::{RoundError, RoundMembers};

impl World {
    /// `node.rs::reconfigure`, over the simulated etcd and network (module docs).
    pub(super) fn reconfigure(&self, me: NodeId, removed: BTreeSet<NodeId>) {
        self.reconfigure_attempts(me, removed.clone());
        // `node.rs`: the attempt is recorded, and `reconfiguring` cleared, when it ends.
        let mut st = self.st.borrow_mut();
        let now = st.now;
        let node = &mut st.nodes[idx(me)];
        node.last_attempt = Some((removed, now));
        node.reconfiguring = false;
    }

    fn reconfigure_attempts(&self, me: NodeId, mut removed: BTreeSet<NodeId>) {
        if !self.st.borrow().nodes[idx(me)].alive {
            return;
        }
        let mut carried_cm_change = false;
        self.trace(|| format!("{me} reconfigures removing {removed:?}"));
        let before = self.st.borrow().nodes[idx(me)].config.clone();
        for _attempt in 0..RECONFIGURE_ATTEMPTS {
            let current = self.st.borrow().nodes[idx(me)].config.clone();
            let mut plan = match failover::plan(&current, &removed, me) {
                Ok(plan) => plan,
                Err(e) => {
                    self.trace(|| format!("{me}: no plan: {e}"));
                    return;
                }
            };
            if self.options.retry_keeps_majority && !failover::keeps_majority(&before, &plan.next) {
                self.trace(|| {
                    format!("{me}: no plan: {} keeps no majority of {}", plan.next.seq, before.seq)
                });
                return;
            }
            if self.options.wait_after_removal && plan.cm_changed && !plan.lease_wait {
                let local = self.clock(me).local_reading();
                let recent = self.st.borrow().nodes[idx(me)]
                    .removed_at
                    .is_some_and(|at| local.saturating_sub(at) < 2 * LEASE_NANOS);
                if recent {
                    self.trace(|| format!("{me}: members removed lately: the round waits a lease"));
                    plan.lease_wait = true;
                }
            }
            if carried_cm_change && !self.options.retry_loses_cm_change {
                // As node.rs: the CM change of the failed round still has to happen, and the
                // member removed now may still be serving.
                plan.cm_changed = true;
                plan.lease_wait = true;
            }
            if !self.swap(me, current.seq, &plan.next) {
                self.trace(|| format!("{me}: swap to {} refused", plan.next.seq));
                return;
            }
            if plan.cm_changed {
                // `node.rs::reconfigure`: as a member that acknowledged NEW-CONFIG, the
                // initiator does not resynchronise with the old CM while the round runs.
                let local = self.clock(me).local_reading();
                self.st.borrow_mut().nodes[idx(me)].cm_change_acked = Some(local);
            }
            let members = SimMembers { world: self, me, next: plan.next.clone() };
            let result = failover::run_round(me, self.clock(me), &plan, &members, self.shortcuts);
            let mut st = self.st.borrow_mut();
            if !st.nodes[idx(me)].alive {
                return;
            }
            let local = self.clock(me).local_reading();
            st.adopt(me, &plan.next, local);
            self.trace(|| format!("{me}: round for {}: {result:?}", plan.next.seq));
            if let Ok(outcome) = &result {
                self.trace(|| format!("{me}: enabled at {:?}", outcome.ff));
            }
            match result {
                Ok(outcome) => {
                    let now = st.now;
                    st.failovers.push(FailoverRecord {
                        at_nanos: now,
                        initiator: me,
                        removed: removed.iter().copied().collect(),
                        seq: plan.next.seq,
                        ff_nanos: outcome.ff.map(Timestamp::as_nanos),
                    });
                    let second = matches!(st.fault, Fault::CmTwice | Fault::NewCmPartitioned);
                    if plan.cm_changed && second && !st.second_crash_done {
                        st.second_crash_done = true;
                        let after = st.rng.range(0, SECOND_CRASH_MAX_NANOS);
                        let partitioned = st.fault == Fault::NewCmPartitioned;
                        if st.trace {
                            eprintln!("  the new CM {me} fails {after} ns after enabling");
                        }
                        st.schedule(after, Event::Crash(me, partitioned));
                    }
                    return;
                }
                Err(e) => {
                    st.failed_rounds += 1;
                    carried_cm_change |= plan.cm_changed;
                    removed = BTreeSet::from([e.member]);
                }
            }
        }
    }

    /// The compare-and-swap in etcd: a round trip; refused when etcd is down then or the
    /// sequence number moved.
    pub(super) fn swap(&self, me: NodeId, seq: u64, next: &ClusterConfig) -> bool {
        let (there, back) = {
            let mut st = self.st.borrow_mut();
            let there = st.send_etcd(me);
            let back = st.send_etcd(me);
            (there, back)
        };
        let start = self.now();
        let Some(there) = there else {
            self.pump_until(start + ROUND_TIMEOUT_NANOS);
            self.st.borrow_mut().refused_swaps += 1;
            return false;
        };
        self.pump_until(start + there);
        let (swapped, down, at) = {
            let mut st = self.st.borrow_mut();
            let now = st.now;
            let down = st.etcd_down.is_some_and(|(from, to)| (from..to).contains(&now));
            let ok = !down && st.etcd.seq == seq;
            if ok {
                st.etcd = next.clone();
            }
            (ok, down, st.etcd.seq)
        };
        self.trace(|| {
            let why = if swapped {
                "swapped"
            } else if down {
                "etcd down"
            } else {
                "seq moved"
            };
            format!("{me}: etcd {why}, at {at}")
        });
        let answered = back.is_some() && self.st.borrow().nodes[idx(me)].alive;
        match back {
            Some(back) => self.pump_until(start + there + back),
            None => self.pump_until(start + ROUND_TIMEOUT_NANOS),
        }
        // A lost answer to a swap that happened: the initiator does not know it won; the
        // configuration stands in etcd and nobody runs its round (the cluster waits for a
        // later attempt, which fails on the sequence number). Counted as refused.
        if !(swapped && answered) {
            self.st.borrow_mut().refused_swaps += 1;
        }
        swapped && answered
    }
}

/// The round's messages over the simulated network: each call sends, pumps the simulation
/// until the message arrives, acts on the member, and pumps again until the answer is back;
/// a lost message or answer fails after a timeout (1 ms).
pub struct SimMembers<'a> {
    world: &'a World,
    me: NodeId,
    next: ClusterConfig,
}

impl std::fmt::Debug for SimMembers<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimMembers").field("me", &self.me).field("seq", &self.next.seq).finish()
    }
}

impl SimMembers<'_> {
    /// One request and its answer; `act` runs on the member when the request arrives.
    fn call<T>(
        &self,
        member: NodeId,
        step: &'static str,
        act: impl FnOnce(&World, &mut State) -> T,
    ) -> Result<T, RoundError> {
        let world = self.world;
        let start = world.now();
        let fail = |reason: &str| {
            world.pump_until(start + ROUND_TIMEOUT_NANOS);
            Err(RoundError { seq: self.next.seq, member, step, reason: reason.into() })
        };
        let there = world.st.borrow_mut().send(self.me, member);
        let Some(there) = there else { return fail("request lost") };
        world.pump_until(start + there);
        let answer = {
            let mut st = world.st.borrow_mut();
            if !st.nodes[idx(member)].alive || st.nodes[idx(member)].partitioned {
                None
            } else {
                let value = act(world, &mut st);
                Some((value, st.send(member, self.me)))
            }
        };
        let Some((value, back)) = answer else { return fail("member down") };
        let Some(back) = back else { return fail("answer lost") };
        world.pump_until(start + there + back);
        if !world.st.borrow().nodes[idx(self.me)].alive {
            return fail("initiator crashed");
        }
        Ok(value)
    }
}

impl RoundMembers for SimMembers<'_> {
    fn new_config(
        &self,
        member: NodeId,
        next: &ClusterConfig,
        _cm_changed: bool,
    ) -> Result<ordo_clock::Timestamp, RoundError> {
        debug_assert_eq!(next.seq, self.next.seq);
        self.call(member, "NEW-CONFIG", |world, st| {
            // `node.rs`'s NEW-CONFIG handler: the member compares the CM with its own
            // configuration's (not the plan's `cm_changed`: after a failed CM-changing round
            // a member that adopted it already names the initiator CM), and if it changes
            // starts no sync with the old CM until it adopts a new one (`cm_change_acked`).
            let cm_changes = next.cm != st.nodes[idx(member)].config.cm;
            let ff = failover::on_new_config(world.clock(member), cm_changes);
            if cm_changes {
                let local = world.clock(member).local_reading();
                st.nodes[idx(member)].cm_change_acked = Some(local);
            }
            ff
        })
    }

    fn config_commit(&self, member: NodeId, seq: u64) -> Result<(), RoundError> {
        debug_assert_eq!(seq, self.next.seq);
        let next = &self.next;
        self.call(member, "CONFIG-COMMIT", |world, st| {
            let local = world.clock(member).local_reading();
            st.adopt(member, next, local);
        })
    }

    fn advance(&self, member: NodeId, _seq: u64, ff: Timestamp) -> Result<(), RoundError> {
        self.call(member, "ADVANCE", |world, _| failover::on_advance(world.clock(member), ff))
    }

    fn wait_lease(&self) {
        // `node.rs`: 1.5 lease periods of the initiator's local clock.
        let world = self.world;
        let local = LEASE_NANOS * 3 / 2;
        let drift = world.drifts_ppm[idx(self.me)];
        let rate = 1_000_000i128 + i128::from(drift);
        let nanos = (i128::from(local) * 1_000_000 + rate - 1) / rate.max(1);
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX);
        world.pump_until(world.now() + nanos);
    }
}
