//! A sequence lock over a few `u64` words, made of atomics only: the publication channel of the
//! synchronised clock's state ([`crate::SyncedClock`]).
//!
//! # Mechanism
//! One writer at a time (the caller serialises writers, the synced clock with a `Mutex`) and any
//! number of lock-free readers. The sequence number `seq` is even while no write is in progress.
//!
//! ```text
//! write:  s = seq (even)          read:  s1 = seq            (Acquire)   odd? retry
//!         seq = s + 1  (Relaxed)         words              (Relaxed)
//!         fence(Release)                 fence(Acquire)
//!         words = new  (Relaxed)         s2 = seq            (Relaxed)   s1 != s2? retry
//!         seq = s + 2  (Release)
//! ```
//!
//! Every word is an atomic, so a torn read is a *stale* read, never undefined behaviour, and no
//! `unsafe` is needed. Why a validated read is one write's words (Boehm, "Can seqlocks get along
//! with programming language memory models?", MSPC'12; crossbeam's `SeqLock` is the same shape):
//!
//! * The Acquire load of `s1` reads the Release store of `s + 2` of some write `k` (or the
//!   initial value), so every word store of write `k` happens-before the word loads: no word is
//!   older than write `k`.
//! * If some word load reads a store of a later write `k + 1`, that store follows write `k + 1`'s
//!   `fence(Release)`, and the reader's `fence(Acquire)` follows the load, so the fences
//!   synchronise: write `k + 1`'s odd store of `seq` happens-before the load of `s2`, which
//!   therefore sees it (or later) and differs from `s1` — the read is retried.
//!
//! # Invariants
//! * `seq` is even between writes and increases by exactly 2 per write.
//! * A value returned by [`SeqLock::read`] is exactly the array passed to one call of
//!   [`SeqLock::write`] (or the initial one) — checked by the torn-read test below.

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering, fence};

/// Spins a reader makes on an odd or changed sequence before it yields its core (a writer
/// preempted in the middle of a write would otherwise be spun on for a whole time slice).
const READ_SPINS_BEFORE_YIELD: u32 = 128;

/// `N` words published together.
#[derive(Debug)]
pub(crate) struct SeqLock<const N: usize> {
    seq: AtomicU64,
    words: [AtomicU64; N],
}

impl<const N: usize> SeqLock<N> {
    /// A lock holding `initial`.
    pub(crate) fn new(initial: [u64; N]) -> Self {
        SeqLock { seq: AtomicU64::new(0), words: initial.map(AtomicU64::new) }
    }

    /// Publishes `values`. Callers must serialise writers: two concurrent writers would let a
    /// reader validate a mix of both.
    pub(crate) fn write(&self, values: [u64; N]) {
        // Relaxed: only writers store `seq`, and the caller's mutex orders this writer after the
        // previous one, so this load sees the previous write's final (even) value.
        let seq = self.seq.load(Ordering::Relaxed);
        debug_assert_eq!(seq % 2, 0, "seqlock write while another write is in progress");
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // Release fence: pairs with the fence(Acquire) in try_read(): a reader whose word load
        // sees any store below also sees the odd `seq` stored above, and retries.
        fence(Ordering::Release);
        for (word, value) in self.words.iter().zip(values) {
            // Relaxed: ordered by the fence above and the Release store of `seq` below.
            word.store(value, Ordering::Relaxed);
        }
        // Release: pairs with the Acquire load of `s1` in try_read(): a reader that sees this
        // even value sees every word stored above.
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// One attempt to read: `None` when a write was in progress or completed during the read.
    #[inline]
    pub(crate) fn try_read(&self) -> Option<[u64; N]> {
        // Acquire: pairs with the final Release store of `seq` in write().
        let s1 = self.seq.load(Ordering::Acquire);
        if s1 % 2 == 1 {
            return None;
        }
        // Relaxed: validated by the fence and the second load of `seq` below.
        let values = std::array::from_fn(|i| self.words[i].load(Ordering::Relaxed));
        // Acquire fence: pairs with the fence(Release) in write() (see the module docs).
        fence(Ordering::Acquire);
        // Relaxed: ordered after the word loads by the fence above.
        let s2 = self.seq.load(Ordering::Relaxed);
        (s1 == s2).then_some(values)
    }

    /// The words of one complete write; retries (spinning, then yielding) while a write races.
    #[inline]
    pub(crate) fn read(&self) -> [u64; N] {
        let mut spins = 0u32;
        loop {
            if let Some(values) = self.try_read() {
                return values;
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(READ_SPINS_BEFORE_YIELD) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64};

    #[test]
    fn readers_never_see_a_mix_of_two_writes() {
        // Bounded by reads, not time: the writer runs until the readers have read enough while
        // it was writing. 32 words span several cache lines, so that without the validation a
        // reader does see halves of two writes (one line is copied at once and hides tearing).
        const READS: u64 = 500_000;
        const WRITES: u64 = 500_000;
        const READERS: u64 = 1;
        const N: usize = 32;
        let lock = SeqLock::<N>::new([0; N]);
        let (ready, reads) = (AtomicU64::new(0), AtomicU64::new(0));
        let done = AtomicBool::new(false);
        let (torn, written) = std::thread::scope(|s| {
            let readers: Vec<_> = (0..READERS)
                .map(|_| {
                    s.spawn(|| {
                        let (mut torn, mut last) = (0u64, 0u64);
                        // Relaxed: a start signal and counters, no data.
                        ready.fetch_add(1, Ordering::Relaxed);
                        while !done.load(Ordering::Relaxed) {
                            let words = lock.read();
                            torn += u64::from(words.iter().any(|&w| w != words[0]));
                            // Reads of one reader never go back in write order.
                            assert!(words[0] >= last, "{} after {last}", words[0]);
                            last = words[0];
                            reads.fetch_add(1, Ordering::Relaxed);
                        }
                        torn
                    })
                })
                .collect();
            // Relaxed: see above.
            while ready.load(Ordering::Relaxed) < READERS {
                std::thread::yield_now();
            }
            let mut k = 0u64;
            while reads.load(Ordering::Relaxed) < READS || k < WRITES {
                k += 1;
                lock.write([k; N]);
            }
            done.store(true, Ordering::Relaxed);
            (readers.into_iter().map(|r| r.join().unwrap_or(u64::MAX)).sum::<u64>(), k)
        });
        assert_eq!(torn, 0);
        assert_eq!(lock.read(), [written; N]);
    }
}
