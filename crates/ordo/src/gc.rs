//! Garbage collection by oldest active timestamp (FaRMv2 §4.5–4.6, Fig. 9).
//!
//! Every transaction registers its read timestamp in its thread's slot while it runs. A GC round
//! computes `OAT = min(now().lo, active rts)`; the **GC safe point** is the OAT of the *previous*
//! round — one propagation round behind, as in FaRMv2 Fig. 9 — and only moves forward. Old-version
//! blocks whose GC time is below the safe point (and below every rts registered right now) are
//! recycled, and so are empty slabs whose last free is below it (FaRMv2 §4.8: they may then take
//! another size class); a stale snapshot read at `ts` is admitted only when `ts >= safe point`.
//!
//! # Why registration cannot be missed
//! A round *publishes* the new safe point (`SeqCst` store), then *scans* the slots (`SeqCst`
//! loads) and frees only below `min(safe point, scanned rts)`. A transaction *stores* its rts
//! (`SeqCst`), then *loads* the safe point (`SeqCst`) and raises its rts to it if it is behind.
//! In the single total order of `SeqCst` operations either the scan sees the store — the round
//! keeps what the transaction may read — or the transaction's load sees the published point and
//! its snapshot starts there, above everything the round frees (Dekker's pattern). Raising an rts
//! to the safe point is sound: the point was below `now().lo` of an earlier reading, so it is in
//! the past, and it is above the rts the transaction had.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use ordo_clock::Timestamp;

/// The GC's shared state.
#[derive(Debug)]
pub(crate) struct GcState {
    /// The safe point, in ns; only increases.
    point: AtomicU64,
    /// An upper bound the safe point must stay at or below, in ns: the cluster's oldest active
    /// timestamp (FaRMv2 Fig. 9), set by `ordo-cluster`; `u64::MAX` in the embedded engine.
    bound: AtomicU64,
    /// The OAT computed by the previous round: the next round's safe point.
    pending: AtomicU64,
    rounds: AtomicU64,
    /// Rounds are serialised (background thread and explicit calls).
    round: Mutex<()>,
}

/// What one round did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcRound {
    /// The safe point after the round.
    pub safe_point: Timestamp,
    /// The oldest active timestamp it saw, which becomes the next round's safe point.
    pub oldest_active: Timestamp,
    /// Old-version blocks recycled.
    pub blocks_recycled: usize,
    /// Empty slabs reclaimed for reuse with any size class.
    pub slabs_reclaimed: usize,
}

impl Default for GcState {
    fn default() -> Self {
        GcState {
            point: AtomicU64::new(0),
            bound: AtomicU64::new(u64::MAX),
            pending: AtomicU64::new(0),
            rounds: AtomicU64::new(0),
            round: Mutex::new(()),
        }
    }
}

impl GcState {
    /// Bounds the safe point by `ts` from now on (it never moves back: a bound below the
    /// current point holds it where it is). Monotonic in the cluster, where `ts` is a past OAT.
    pub(crate) fn set_bound(&self, ts: Timestamp) {
        // Relaxed: read by the next round under its mutex; a round that misses it uses the
        // previous bound, which was lower.
        self.bound.store(ts.as_nanos(), Ordering::Relaxed);
    }

    /// The current safe point. `SeqCst`: pairs with the store in `round` (Dekker, module docs).
    #[inline]
    pub(crate) fn point(&self) -> Timestamp {
        Timestamp::from_nanos(self.point.load(Ordering::SeqCst))
    }

    /// Rounds completed.
    pub(crate) fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }

    /// Runs one round. `min_active` scans the slots; `now_lo` reads the clock; `recycle` frees
    /// memory below a timestamp and returns how many old-version blocks and slabs it freed.
    pub(crate) fn round(
        &self,
        min_active: impl Fn() -> Option<Timestamp>,
        now_lo: impl Fn() -> Timestamp,
        recycle: impl Fn(Timestamp) -> (usize, usize),
    ) -> GcRound {
        let _serial = self.round.lock().unwrap_or_else(|e| e.into_inner());
        // SeqCst: published before the scan below (Dekker, module docs). In a cluster the
        // point also stays at or below the cluster's OAT (the bound).
        let next = self.pending.load(Ordering::Relaxed).min(self.bound.load(Ordering::Relaxed));
        self.point.fetch_max(next, Ordering::SeqCst);
        let point = self.point();
        let active = min_active();
        let free_below = active.map_or(point, |a| a.min(point));
        let (blocks_recycled, slabs_reclaimed) = recycle(free_below);
        let oldest_active = active.map_or(now_lo(), |a| a.min(now_lo()));
        self.pending.fetch_max(oldest_active.as_nanos(), Ordering::Relaxed);
        self.rounds.fetch_add(1, Ordering::Relaxed);
        GcRound { safe_point: point, oldest_active, blocks_recycled, slabs_reclaimed }
    }
}
