//! A two-level atomic free bitmap: one bit per object slot (1 = free) and a summary word level
//! with one bit per leaf word that may hold a free bit (FaRM's hierarchical bitmap).
//!
//! The owning thread allocates; any thread frees. Both sides use atomic read-modify-writes, so
//! the bitmap is correct even when two threads allocate from one slab (ownership only keeps that
//! rare), and an allocation costs a summary scan plus two RMWs.
//!
//! # Invariants
//! * A slot is handed out by [`FreeBitmap::take`] at most once until [`FreeBitmap::put`] returns it:
//!   `take` clears the leaf bit with `fetch_and` and succeeds only if the bit was set.
//! * A summary bit may be set while its leaf is empty (a hint), but a leaf with a free bit always
//!   has its summary bit set once `put` returns: `put` sets the leaf bit, then the summary bit; a
//!   `take` that empties a leaf clears the summary bit, then re-checks the leaf and restores the
//!   summary bit if a concurrent `put` slipped in.

use crate::sync::{AtomicU64, Ordering};

/// A free bitmap over `len` slots.
#[derive(Debug)]
pub struct FreeBitmap {
    leaves: Box<[AtomicU64]>,
    summary: Box<[AtomicU64]>,
    len: usize,
}

impl FreeBitmap {
    /// A bitmap of `len` slots, all free (the heap builds its bitmaps with
    /// [`FreeBitmap::new_all_taken`] and [`FreeBitmap::reset_all_free`]; this one is the tests').
    #[cfg(any(test, loom))]
    pub fn new_all_free(len: usize) -> Self {
        let leaf_count = len.div_ceil(64);
        let leaves: Box<[AtomicU64]> = (0..leaf_count)
            .map(|i| {
                let bits_here = (len - i * 64).min(64);
                AtomicU64::new(if bits_here == 64 { u64::MAX } else { (1u64 << bits_here) - 1 })
            })
            .collect();
        let summary_count = leaf_count.div_ceil(64);
        let summary: Box<[AtomicU64]> = (0..summary_count)
            .map(|i| {
                let bits_here = (leaf_count - i * 64).min(64);
                AtomicU64::new(if bits_here == 64 { u64::MAX } else { (1u64 << bits_here) - 1 })
            })
            .collect();
        FreeBitmap { leaves, summary, len }
    }

    /// A bitmap of `len` slots, none free (recovery marks the free ones with `put`).
    pub fn new_all_taken(len: usize) -> Self {
        let leaf_count = len.div_ceil(64);
        FreeBitmap {
            leaves: (0..leaf_count).map(|_| AtomicU64::new(0)).collect(),
            summary: (0..leaf_count.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            len,
        }
    }

    /// Makes the first `len` slots free and every other slot taken (the slab got a new size
    /// class). The caller must have the bitmap to itself: nobody takes or puts meanwhile.
    ///
    /// # Panics
    /// If `len` exceeds the capacity the bitmap was built with.
    pub fn reset_all_free(&self, len: usize) {
        assert!(len <= self.leaves.len() * 64, "{len} slots exceed the bitmap's capacity");
        for (i, leaf) in self.leaves.iter().enumerate() {
            let bits = len.saturating_sub(i * 64).min(64);
            let v = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
            leaf.store(v, Ordering::Relaxed);
        }
        let used_leaves = len.div_ceil(64);
        for (i, s) in self.summary.iter().enumerate() {
            let bits = used_leaves.saturating_sub(i * 64).min(64);
            let v = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
            // Release on the last store: pairs with the Acquire of the slab's class, published
            // after this reset.
            s.store(v, Ordering::Release);
        }
    }

    /// Takes a free slot, or `None` when every slot is taken.
    pub fn take(&self) -> Option<usize> {
        for (si, s) in self.summary.iter().enumerate() {
            let mut sbits = s.load(Ordering::Relaxed);
            while sbits != 0 {
                let li = si * 64 + sbits.trailing_zeros() as usize;
                let leaf = &self.leaves[li];
                let mut lbits = leaf.load(Ordering::Relaxed);
                while lbits != 0 {
                    let bit = lbits.trailing_zeros();
                    let mask = 1u64 << bit;
                    // Acquire: pairs with the Release fetch_or in put(), so whatever the freeing
                    // thread did to the slot happens-before this allocation.
                    let before = leaf.fetch_and(!mask, Ordering::Acquire);
                    if before & mask != 0 {
                        if before == mask {
                            self.clear_summary(si, li);
                        }
                        return Some(li * 64 + bit as usize);
                    }
                    lbits = before & !mask;
                }
                // The leaf was empty: drop the stale hint and move on.
                self.clear_summary(si, li);
                sbits &= !(1u64 << (li % 64));
            }
        }
        None
    }

    fn clear_summary(&self, si: usize, li: usize) {
        let sbit = 1u64 << (li % 64);
        self.summary[si].fetch_and(!sbit, Ordering::AcqRel);
        // Re-check: a put() that set a leaf bit before we cleared the summary bit must not be
        // hidden. AcqRel above and Acquire here pair with put()'s Release RMWs.
        if self.leaves[li].load(Ordering::Acquire) != 0 {
            self.summary[si].fetch_or(sbit, Ordering::AcqRel);
        }
    }

    /// Returns slot `index` to the free set.
    ///
    /// # Panics
    /// If `index` is out of range or the slot is already free: both are engine bugs, never input.
    pub fn put(&self, index: usize) {
        assert!(index < self.len, "slot {index} out of range {}", self.len);
        let li = index / 64;
        let mask = 1u64 << (index % 64);
        // Release: pairs with the Acquire fetch_and in take().
        let before = self.leaves[li].fetch_or(mask, Ordering::Release);
        assert!(before & mask == 0, "slot {index} freed twice");
        self.summary[li / 64].fetch_or(1u64 << (li % 64), Ordering::AcqRel);
    }

    /// Whether slot `index` is currently free (the tests' check).
    #[cfg(any(test, loom))]
    pub fn is_free(&self, index: usize) -> bool {
        index < self.len
            && self.leaves[index / 64].load(Ordering::Acquire) & (1u64 << (index % 64)) != 0
    }

    /// Number of free slots (a racy count, exact when quiescent).
    pub fn count_free(&self) -> usize {
        self.leaves.iter().map(|l| l.load(Ordering::Relaxed).count_ones() as usize).sum()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn takes_every_slot_once_then_none() {
        for len in [1, 63, 64, 65, 64 * 64, 64 * 64 + 3, 5000] {
            let b = FreeBitmap::new_all_free(len);
            let mut seen = BTreeSet::new();
            while let Some(i) = b.take() {
                assert!(seen.insert(i), "slot {i} handed out twice");
            }
            assert_eq!(seen.len(), len);
            assert_eq!(b.count_free(), 0);
            b.put(len / 2);
            assert_eq!(b.take(), Some(len / 2));
        }
    }

    #[test]
    fn concurrent_take_and_put_never_duplicate() {
        let b = std::sync::Arc::new(FreeBitmap::new_all_free(4096));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    for round in 0..20_000 {
                        if round % 3 == 2 {
                            if let Some(i) = mine.pop() {
                                b.put(i);
                            }
                        } else if let Some(i) = b.take() {
                            mine.push(i);
                        }
                    }
                    mine
                })
            })
            .collect();
        let mut all = BTreeSet::new();
        for t in threads {
            for i in t.join().unwrap() {
                assert!(all.insert(i), "slot {i} held by two threads");
                assert!(!b.is_free(i));
            }
        }
        assert_eq!(all.len() + b.count_free(), 4096);
    }
}
