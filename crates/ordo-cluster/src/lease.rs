//! Leases (FaRMv2 §4.3, from FaRMv1): failure detection between the CM and every other member.
//!
//! Each non-CM holds a lease at the CM and the CM holds one at each non-CM. A non-CM renews both
//! with a 3-way handshake from its dedicated lease thread (`node`): `LeaseRequest` (the CM renews
//! the non-CM's lease), `LeaseGrant` (the non-CM renews the CM's lease), `LeaseAck` (the CM notes
//! the handshake completed). A renewal is attempted every `period / 4`.
//!
//! [`LeaseTable`] is the bookkeeping, kept apart from the network so it can be tested alone:
//! `renewed(peer, at)` records a renewal, `check(now)` reports every lease whose last renewal is
//! older than one period. The lease thread calls `check` every `period / 4`, so an expired lease
//! is reported at most `period + period / 4 (+ scheduling delay)` after its last renewal —
//! within two periods. Suspicion is only reported here (a `warn`, a counter, the status table);
//! acting on it — a new configuration — is failover's job (Cluster III).
//!
//! # Invariants
//! * A peer is reported once per expiry episode: after `Expired` it is not reported again until
//!   a renewal makes it live and it expires anew.
//! * Times are local monotonic [`Instant`]s; leases never compare clocks across machines.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::config::NodeId;

/// One peer's lease as this node sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseState {
    /// When it was last renewed (or first expected: the end of its grace).
    pub renewed_at: Instant,
    /// When this node last heard from the peer: its last renewal, or when the lease was first
    /// expected (not the end of the grace). The clock fences count from here
    /// ([`LeaseTable::silent_for`]): a grace delays suspicion, never a fence.
    pub heard_at: Instant,
    /// How many renewals were recorded.
    pub renewals: u64,
    /// Whether it is currently reported expired.
    pub expired: bool,
}

/// An expiry found by [`LeaseTable::check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expiry {
    /// The peer whose lease expired.
    pub peer: NodeId,
    /// How long after its last renewal the expiry was detected.
    pub silent_for: Duration,
}

/// The leases one node tracks.
#[derive(Clone, Debug)]
pub struct LeaseTable {
    period: Duration,
    leases: BTreeMap<NodeId, LeaseState>,
    expiries: u64,
}

impl LeaseTable {
    /// An empty table with lease period `period`.
    pub fn new(period: Duration) -> Self {
        LeaseTable { period, leases: BTreeMap::new(), expiries: 0 }
    }

    /// The lease period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Starts tracking `peer` as if renewed at `at` — a time in the future gives a start-up
    /// grace — unless it is tracked already.
    pub fn expect(&mut self, peer: NodeId, at: Instant) {
        let now = Instant::now().min(at);
        self.leases.entry(peer).or_insert(LeaseState {
            renewed_at: at,
            heard_at: now,
            renewals: 0,
            expired: false,
        });
    }

    /// How long `peer` has been silent at `now`, counted from its last renewal or from when its
    /// lease was first expected, whatever grace it was given; `None` for an unknown peer.
    pub fn silent_for(&self, peer: NodeId, now: Instant) -> Option<Duration> {
        self.leases.get(&peer).map(|s| now.saturating_duration_since(s.heard_at))
    }

    /// Stops tracking every peer not in `peers` (a new configuration removed it).
    pub fn retain(&mut self, peers: &[NodeId]) {
        self.leases.retain(|id, _| peers.contains(id));
    }

    /// Records a renewal of `peer`'s lease at `at`.
    pub fn renewed(&mut self, peer: NodeId, at: Instant) {
        let state = self.leases.entry(peer).or_insert(LeaseState {
            renewed_at: at,
            heard_at: at,
            renewals: 0,
            expired: false,
        });
        // The first renewal replaces the start-up grace (which may lie in the future); later
        // ones never move a lease backwards.
        state.renewed_at = if state.renewals == 0 { at } else { state.renewed_at.max(at) };
        state.heard_at = state.heard_at.max(at);
        state.renewals += 1;
        state.expired = false;
    }

    /// Reports leases not renewed within one period of `now`, once per expiry episode.
    pub fn check(&mut self, now: Instant) -> Vec<Expiry> {
        let mut found = Vec::new();
        for (&peer, state) in &mut self.leases {
            let silent_for = now.saturating_duration_since(state.renewed_at);
            if !state.expired && silent_for > self.period {
                state.expired = true;
                found.push(Expiry { peer, silent_for });
            }
        }
        self.expiries += found.len() as u64;
        found
    }

    /// The state of `peer`'s lease.
    pub fn get(&self, peer: NodeId) -> Option<LeaseState> {
        self.leases.get(&peer).copied()
    }

    /// Every tracked peer whose lease is currently expired.
    pub fn suspects(&self) -> Vec<NodeId> {
        self.leases.iter().filter(|(_, s)| s.expired).map(|(&p, _)| p).collect()
    }

    /// Renewals recorded, summed over peers.
    pub fn renewals(&self) -> u64 {
        self.leases.values().map(|s| s.renewals).sum()
    }

    /// Expiries reported so far.
    pub fn expiries(&self) -> u64 {
        self.expiries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unrenewed_lease_is_reported_once_and_a_renewal_clears_it() {
        let t0 = Instant::now();
        let period = Duration::from_millis(10);
        let mut table = LeaseTable::new(period);
        table.expect(2, t0);
        table.renewed(3, t0);
        assert!(table.check(t0 + period).is_empty(), "exactly one period is not yet expired");
        let found = table.check(t0 + period + Duration::from_millis(1));
        assert_eq!(found.iter().map(|e| e.peer).collect::<Vec<_>>(), vec![2, 3]);
        assert!(table.check(t0 + period * 3).is_empty(), "reported once per episode");
        assert_eq!(table.suspects(), vec![2, 3]);
        table.renewed(2, t0 + period * 3);
        assert_eq!(table.suspects(), vec![3]);
        assert_eq!(table.check(t0 + period * 5).len(), 1);
        assert_eq!(table.expiries(), 3);
        assert_eq!(table.renewals(), 2);
    }

    #[test]
    fn the_first_renewal_ends_the_start_up_grace() {
        let t0 = Instant::now();
        let period = Duration::from_millis(10);
        let mut table = LeaseTable::new(period);
        table.expect(2, t0 + Duration::from_secs(2));
        assert!(table.check(t0 + Duration::from_secs(1)).is_empty(), "grace");
        table.renewed(2, t0);
        assert_eq!(table.check(t0 + period * 2).len(), 1, "the grace ended at the first renewal");
    }

    #[test]
    fn a_grace_delays_suspicion_but_not_the_silence_fences_count() {
        let t0 = Instant::now();
        let period = Duration::from_millis(10);
        let mut table = LeaseTable::new(period);
        table.expect(2, t0 + period * 4);
        let later = Instant::now() + period * 2;
        assert!(table.check(later).is_empty(), "in its grace");
        assert!(table.silent_for(2, later).unwrap() >= period * 2, "silent since expected");
        table.renewed(2, later);
        assert_eq!(table.silent_for(2, later), Some(Duration::ZERO));
        assert_eq!(table.silent_for(3, later), None);
    }

    #[test]
    fn a_late_renewal_never_moves_a_lease_backwards() {
        let t0 = Instant::now();
        let mut table = LeaseTable::new(Duration::from_millis(10));
        table.renewed(2, t0 + Duration::from_millis(5));
        table.renewed(2, t0);
        assert_eq!(table.get(2).map(|s| s.renewed_at), Some(t0 + Duration::from_millis(5)));
        table.retain(&[]);
        assert!(table.get(2).is_none());
    }
}
