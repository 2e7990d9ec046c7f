//! The durable marker's bound (SPHT Alg. 3's per-thread `(wts, persisted)` slots, on files):
//! which write timestamps are certainly logged. The durable log (`durable::log`, its rounds in
//! `log::round`) keeps one [`MarkerSlot`] per worker and computes its marker with
//! [`MarkerSlots::bound`]; this module holds only the atomics and their orderings, so that
//! `tests/loom_marker.rs` model-checks the code the log runs.
//!
//! # Protocol
//! A committer, per commit: [`MarkerSlots::publish_lower`] a lower bound `lower` of its write
//! timestamp, *then* draws `wts` (the clock's `get_ts`), logs its record, then
//! [`MarkerSlots::appended`] (`appended = max(appended, wts)`, `lower = IDLE`) — or
//! [`MarkerSlots::clear_lower`] when it aborts. The bound is
//!
//! ```text
//! A: M = max over slots of appended
//!    fence(SeqCst)
//! B: for every slot: lower;   D = min(M, min(lower) - 1)
//! ```
//!
//! **Claim**: every record with `wts <= D` was logged before B read its slot. Otherwise its
//! committer either still held `lower <= wts` at B (so `D < wts`), or B read an older value
//! of its `lower`. In the second case B's fence precedes the committer's fence in the SeqCst
//! order (else B would see `lower`), while the record counted in M happens-before B's fence
//! (release/acquire on `appended`); the committer's `get_ts`, after its own fence, is then
//! ordered after that record's `get_ts`, so `wts > M >= D`. Drawing a timestamp need not
//! synchronize anything for this: the ORDO clock reads a hardware counter.
//!
//! The two fences make this a Dekker pattern. `tests/loom_marker.rs` checks it with a clock
//! that synchronizes nothing (a `Relaxed` counter) and fails with either fence removed. The
//! earlier form — a `SeqCst` store of `lower` and `SeqCst` loads in B, no fences — fails
//! there too: the record counted in M reaches B only through release/acquire, which the
//! language's model does not order with plain `SeqCst` accesses (x86's locked store happened
//! to make it work; loom does not model `SeqCst` accesses, only `SeqCst` fences).

use crate::sync::{AtomicU64, Ordering, fence};
use crossbeam_utils::CachePadded;

/// `lower` of a slot with no commit between drawing its timestamp and logging.
pub const IDLE: u64 = u64::MAX;

/// One worker's slot.
#[derive(Debug)]
pub struct MarkerSlot {
    lower: AtomicU64,
    appended: AtomicU64,
}

impl Default for MarkerSlot {
    fn default() -> Self {
        MarkerSlot { lower: AtomicU64::new(IDLE), appended: AtomicU64::new(0) }
    }
}

/// The slots of all workers.
#[derive(Debug)]
pub struct MarkerSlots {
    slots: Box<[CachePadded<MarkerSlot>]>,
}

impl MarkerSlots {
    /// `n` idle slots.
    pub fn new(n: usize) -> Self {
        MarkerSlots { slots: (0..n).map(|_| CachePadded::new(MarkerSlot::default())).collect() }
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Before drawing the write timestamp: the bound stays below `lower` until
    /// [`MarkerSlots::appended`] or [`MarkerSlots::clear_lower`].
    #[inline]
    pub fn publish_lower(&self, slot: usize, lower: u64) {
        debug_assert!(lower != IDLE, "IDLE is not a bound: the slot would look idle");
        self.slots[slot].lower.store(lower, Ordering::Relaxed);
        // SeqCst: pairs with the fence in `bound` (the Dekker pair of the module docs): the
        // store is visible to a bound whose fence comes later, or this commit's get_ts comes
        // after every record that bound counted.
        fence(Ordering::SeqCst);
    }

    /// The commit logged nothing (it aborted, or logging failed).
    #[inline]
    pub fn clear_lower(&self, slot: usize) {
        // Release: pairs with the Acquire load in `bound`.
        self.slots[slot].lower.store(IDLE, Ordering::Release);
    }

    /// The commit's record with `wts` is logged.
    #[inline]
    pub fn appended(&self, slot: usize, wts: u64) {
        debug_assert!(wts != IDLE, "a write timestamp is below IDLE");
        let s = &self.slots[slot];
        // Release: pairs with the Acquire loads in `bound` and `appended_of`: the logged
        // record is visible with the value.
        s.appended.fetch_max(wts, Ordering::Release);
        // Release: the append above is visible with the cleared bound.
        s.lower.store(IDLE, Ordering::Release);
    }

    /// The largest timestamp slot `slot` has logged.
    #[inline]
    pub fn appended_of(&self, slot: usize) -> u64 {
        // Acquire: pairs with the Release fetch_max in `appended`.
        self.slots[slot].appended.load(Ordering::Acquire)
    }

    /// The largest timestamp any slot has logged.
    pub fn max_appended(&self) -> u64 {
        (0..self.len()).map(|i| self.appended_of(i)).max().unwrap_or(0)
    }

    /// The bound D of the module docs: every record with `wts <= D` is logged. `seen`, when
    /// given (one entry per slot), receives each slot's `appended` as read after the fence.
    /// `ignore_pending` (negative tests only) skips the `lower` bounds.
    pub fn bound(&self, ignore_pending: bool, mut seen: Option<&mut [u64]>) -> u64 {
        debug_assert!(
            seen.as_ref().is_none_or(|s| s.len() == self.len()),
            "`seen` has one entry per slot"
        );
        // A.
        let m = self.max_appended();
        // SeqCst: pairs with the fence in `publish_lower`.
        fence(Ordering::SeqCst);
        // B.
        let mut d = m;
        for (i, s) in self.slots.iter().enumerate() {
            // Acquire: pairs with the Release stores of `clear_lower` and `appended`.
            let l = s.lower.load(Ordering::Acquire);
            if l != IDLE && !ignore_pending {
                d = d.min(l.saturating_sub(1));
            }
            if let Some(seen) = seen.as_deref_mut() {
                seen[i] = s.appended.load(Ordering::Acquire);
            }
        }
        debug_assert!(d <= m, "the bound never passes what was appended");
        d
    }
}
