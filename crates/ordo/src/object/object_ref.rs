//! [`ObjectRef`]: the steps of the header protocol on one object's words — the seqlock read,
//! `try_lock`, `validate`, `install` and `unlock` — and what they report (see the protocol and
//! its invariants in [`crate::object`]).

use ordo_clock::Timestamp;

use super::copy;
use super::{Expect, HEADER_WORDS, Header, LEN_SHIFT, LOCK_BIT, OVP_MASK, UsedBytes, split_word1};
use crate::sync::{AtomicU64, Ordering, fence};

/// What a consistent read of an object saw.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Snapshot {
    /// Word 0 at the time of the read (unlocked unless the lock check was skipped).
    pub header: Header,
    /// Payload length in bytes.
    pub len_bytes: usize,
    /// Old-version pointer (0 = none).
    pub ovp: u64,
}

/// Why an object could not be read consistently.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ReadFail {
    /// Word 0 was locked.
    Locked,
    /// The object's length word does not fit the slot (a corrupt or foreign header).
    BadLength {
        /// The length found.
        len_bytes: usize,
    },
}

/// Why `try_lock` refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LockFail {
    /// Somebody else holds the lock.
    Locked,
    /// The head version is not the one the transaction expects.
    Changed {
        /// The header found.
        found: Header,
    },
}

/// A view of one object's words: header followed by its payload capacity.
#[derive(Clone, Copy)]
pub struct ObjectRef<'a> {
    words: &'a [AtomicU64],
}

impl<'a> ObjectRef<'a> {
    /// Wraps a slot of `HEADER_WORDS + capacity` words.
    ///
    /// # Panics
    /// If the slot is shorter than the header; slots come from the slab layout, never from input.
    #[inline]
    pub fn new(words: &'a [AtomicU64]) -> Self {
        assert!(words.len() >= HEADER_WORDS, "object slot shorter than its header");
        ObjectRef { words }
    }

    /// Payload capacity in bytes.
    #[inline]
    pub fn capacity_bytes(self) -> usize {
        (self.words.len() - HEADER_WORDS) * 8
    }

    /// Word 0, `Acquire`: pairs with the `Release` store in [`ObjectRef::install`] and
    /// [`ObjectRef::unlock`].
    #[inline]
    pub fn header(self) -> Header {
        Header(self.words[0].load(Ordering::Acquire))
    }

    /// Reads the head version consistently into `out` (resized to the payload's words).
    ///
    /// With `check_lock` false a locked header is read anyway — only the
    /// `skip_read_lock_check` shortcut of the negative tests does that.
    #[inline(always)]
    pub fn read(self, out: &mut Vec<u64>, check_lock: bool) -> Result<Snapshot, ReadFail> {
        self.read_view(check_lock, |payload, _len_bytes| copy::load_words(payload, out))
            .map(|(snap, ())| snap)
    }

    /// [`ObjectRef::read`] of only the payload's first `used(word)` bytes, where `word` is
    /// payload word 0 (zero for an empty payload): a node that says how much of it is in use
    /// (a tree node's data end) is read without its unused tail. `out` gets the words covering
    /// those bytes, capped at the payload; the snapshot's length is still the whole payload's.
    ///
    /// `used` runs inside the seqlock check, so it may see a torn word: whatever it answers is
    /// capped and the copy discarded unless the header is unchanged after it.
    #[inline(always)]
    pub fn read_used(
        self,
        out: &mut Vec<u64>,
        check_lock: bool,
        used: UsedBytes,
    ) -> Result<Snapshot, ReadFail> {
        self.read_view(check_lock, |payload, _len_bytes| {
            // Relaxed: ordered by the seqlock fences of read_view, as the copy itself.
            let first = payload.first().map_or(0, |w| w.load(Ordering::Relaxed));
            let words = used(first).div_ceil(8).min(payload.len());
            copy::load_words(&payload[..words], out)
        })
        .map(|(snap, ())| snap)
    }

    /// Runs `f` on the head version's payload words (exactly `ceil(len / 8)` of them, and the
    /// length in bytes) inside the
    /// seqlock check, retrying until it ran on one version; returns that version and `f`'s last
    /// result. `f` may run several times and see a torn payload on all but the last run, so it
    /// must only read — its results from torn runs are discarded.
    #[inline(always)]
    pub fn read_view<R>(
        self,
        check_lock: bool,
        mut f: impl FnMut(&[AtomicU64], usize) -> R,
    ) -> Result<(Snapshot, R), ReadFail> {
        loop {
            // Acquire: pairs with the Release store of word 0 in install()/unlock(), so the
            // payload read below is at least as new as the version named by h1.
            let h1 = Header(self.words[0].load(Ordering::Acquire));
            if check_lock && h1.is_locked() {
                return Err(ReadFail::Locked);
            }
            let w1 = self.words[1].load(Ordering::Relaxed);
            let len_bytes = (w1 >> LEN_SHIFT) as usize;
            let len_words = len_bytes.div_ceil(8);
            let payload = &self.words[HEADER_WORDS..];
            if len_words > payload.len() {
                // Possibly torn: re-check before reporting.
                fence(Ordering::Acquire);
                if self.words[0].load(Ordering::Relaxed) == h1.raw() {
                    return Err(ReadFail::BadLength { len_bytes });
                }
                continue;
            }
            let r = f(&payload[..len_words], len_bytes);
            // Acquire fence: pairs with the Release fence in try_lock(); if any word read above
            // came from a writer holding the lock, the reload below sees the lock or later.
            fence(Ordering::Acquire);
            let h2 = self.words[0].load(Ordering::Relaxed);
            if h2 == h1.raw() {
                return Ok((Snapshot { header: h1, len_bytes, ovp: w1 & OVP_MASK }, r));
            }
            std::hint::spin_loop();
        }
    }

    /// Locks the object if its head version satisfies `expect`; returns the header it replaced.
    #[inline]
    pub fn try_lock(self, expect: Expect) -> Result<Header, LockFail> {
        let current = Header(self.words[0].load(Ordering::Relaxed));
        if current.is_locked() {
            return Err(LockFail::Locked);
        }
        let acceptable = match expect {
            Expect::Version(ts) => current.is_allocated() && current.ts() == ts,
            Expect::NotAfter(rts) => current.is_allocated() && current.ts() <= rts,
            Expect::Free => !current.is_allocated(),
        };
        if !acceptable {
            return Err(LockFail::Changed { found: current });
        }
        // Acquire: pairs with the Release store that unlocked the previous version, so this
        // writer's wts (drawn later) is ordered after that version's wts.
        match self.words[0].compare_exchange(
            current.raw(),
            current.raw() | LOCK_BIT,
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(_) => {
                // Release fence: pairs with the Acquire fence in read(); orders the LOCK bit before
                // every payload store this holder makes.
                fence(Ordering::Release);
                Ok(current)
            }
            Err(raw) => {
                let found = Header(raw);
                if found.is_locked() {
                    Err(LockFail::Locked)
                } else {
                    Err(LockFail::Changed { found })
                }
            }
        }
    }

    /// Whether the head version is still exactly `observed` and unlocked (FaRMv2 validation).
    #[inline]
    pub fn validate(self, observed: Header) -> bool {
        // Acquire: pairs with install()'s Release store, so a newer version is seen as such.
        self.words[0].load(Ordering::Acquire) == observed.raw()
    }

    /// Installs a new head version and releases the lock.
    ///
    /// The caller holds the lock (acquired by [`ObjectRef::try_lock`]); `payload` holds
    /// `ceil(len_bytes / 8)` words and must fit the slot.
    #[inline]
    pub fn install(
        self,
        wts: Timestamp,
        allocated: bool,
        len_bytes: usize,
        ovp: u64,
        payload: &[u64],
    ) {
        debug_assert!(Header(self.words[0].load(Ordering::Relaxed)).is_locked());
        debug_assert!(wts > Header(self.words[0].load(Ordering::Relaxed)).ts() || !allocated);
        debug_assert!(len_bytes.div_ceil(8) == payload.len());
        debug_assert!(payload.len() <= self.words.len() - HEADER_WORDS);
        debug_assert!(ovp <= OVP_MASK);
        self.words[1].store(((len_bytes as u64) << LEN_SHIFT) | ovp, Ordering::Relaxed);
        copy::store_words(&self.words[HEADER_WORDS..], payload);
        // Release: pairs with the Acquire load of word 0 in read()/header()/validate(); publishes
        // the payload stores above together with the new version, and clears LOCK.
        self.words[0].store(Header::version(wts, allocated).raw(), Ordering::Release);
    }

    /// Replaces the head version by `wts` unless the head is already at `wts` or newer: a
    /// backup applying a committed write (Cluster II). Returns whether it installed.
    ///
    /// The check and the install are one step: the head is locked by a CAS from exactly the
    /// header that was checked (as `try_lock` does), so a concurrent reader retries instead of
    /// seeing a torn image, and of two concurrent overwrites of one object — TRUNCATEs of two
    /// transactions that wrote it, served on two threads — the older can neither install over
    /// the newer nor interleave its words with it. A header that is never allocated (raw 0)
    /// takes any version. On a backup copy the lock is only ever held by another overwrite,
    /// for the length of one copy, so a locked head is waited for.
    #[cfg(not(loom))] // used by the heap, which the loom build leaves out
    #[inline]
    pub(crate) fn overwrite_if_newer(
        self,
        wts: Timestamp,
        allocated: bool,
        len_bytes: usize,
        payload: &[u64],
    ) -> bool {
        let mut spins = 0u32;
        loop {
            let current = Header(self.words[0].load(Ordering::Relaxed));
            if current.is_locked() {
                spins += 1;
                if spins.is_multiple_of(64) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
            if current.raw() != 0 && current.ts() >= wts {
                return false; // a newer version arrived first
            }
            // Acquire: as try_lock's CAS; pairs with the Release store of the overwrite (or
            // install) that wrote `current`, so this one is ordered after it.
            if self.words[0]
                .compare_exchange(
                    current.raw(),
                    current.raw() | LOCK_BIT,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                // Release fence: pairs with the Acquire fence in read_view(), as in try_lock().
                fence(Ordering::Release);
                self.install(wts, allocated, len_bytes, 0, payload);
                return true;
            }
        }
    }

    /// The length of the head version; meaningful while the caller holds the lock.
    #[inline]
    pub fn head_len_bytes(self) -> usize {
        let (len, _) = split_word1(self.words[1].load(Ordering::Relaxed));
        len.min(self.capacity_bytes())
    }

    /// Copies the head version into `dst` (header `head` without LOCK, word 1, payload). The
    /// caller holds the lock, so the head cannot change underneath.
    pub fn copy_locked_head(self, head: Header, dst: &[AtomicU64]) {
        debug_assert!(Header(self.words[0].load(Ordering::Relaxed)).is_locked());
        debug_assert!(!head.is_locked());
        dst[0].store(head.raw(), Ordering::Relaxed);
        for (d, s) in dst[1..].iter().zip(&self.words[1..]) {
            d.store(s.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    /// Releases the lock without changing anything (the transaction aborted).
    #[inline]
    pub fn unlock(self, previous: Header) {
        debug_assert!(!previous.is_locked());
        // Release: pairs with the Acquire loads of word 0; nothing was written, so this only
        // makes the unchanged version visible as unlocked again.
        self.words[0].store(previous.raw(), Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn slot(words: usize) -> Vec<AtomicU64> {
        (0..words).map(|_| AtomicU64::new(0)).collect()
    }

    #[test]
    fn lock_install_read_roundtrip() {
        let s = slot(HEADER_WORDS + 4);
        let o = ObjectRef::new(&s);
        let mut out = Vec::new();
        assert!(!o.header().is_allocated());
        let prev = o.try_lock(Expect::Free).unwrap();
        o.install(Timestamp::from_nanos(5), true, 12, 0, &[1, 2]);
        assert!(prev.ts() == Timestamp::ZERO);
        let snap = o.read(&mut out, true).unwrap();
        assert_eq!(snap.header.ts(), Timestamp::from_nanos(5));
        assert_eq!(snap.len_bytes, 12);
        assert_eq!(out, vec![1, 2]);
        assert!(o.validate(snap.header));
        assert_eq!(o.try_lock(Expect::Free), Err(LockFail::Changed { found: snap.header }));
        assert_eq!(
            o.try_lock(Expect::Version(Timestamp::from_nanos(4))),
            Err(LockFail::Changed { found: snap.header })
        );
        let h = o.try_lock(Expect::Version(Timestamp::from_nanos(5))).unwrap();
        assert!(!o.validate(snap.header));
        assert_eq!(o.read(&mut out, true), Err(ReadFail::Locked));
        assert_eq!(o.try_lock(Expect::NotAfter(Timestamp::from_nanos(9))), Err(LockFail::Locked));
        o.unlock(h);
        assert!(o.validate(snap.header));
    }

    /// `read_used` copies the words covering the bytes its function names from word 0, capped
    /// at the payload, and reports the whole length.
    #[test]
    fn read_used_copies_the_used_prefix() {
        let s = slot(HEADER_WORDS + 4);
        let o = ObjectRef::new(&s);
        o.try_lock(Expect::Free).unwrap();
        o.install(Timestamp::from_nanos(5), true, 30, 0, &[9, 2, 3, 4]);
        let mut out = vec![7; 10];
        // Word 0 is 9: bytes 0..9 are two words.
        let snap = o.read_used(&mut out, true, |w| w as usize).unwrap();
        assert_eq!((snap.len_bytes, &out[..]), (30, &[9, 2][..]));
        assert_eq!(o.read_used(&mut out, true, |_| 0).unwrap().len_bytes, 30);
        assert!(out.is_empty());
        o.read_used(&mut out, true, |_| usize::MAX).unwrap();
        assert_eq!(out, vec![9, 2, 3, 4], "capped at the payload's words");
        // The head as `read` sees it.
        let h = o.try_lock(Expect::Version(Timestamp::from_nanos(5))).unwrap();
        assert_eq!(o.read_used(&mut out, true, |_| 8), Err(ReadFail::Locked));
        o.unlock(h);

        let empty = slot(HEADER_WORDS);
        let o = ObjectRef::new(&empty);
        o.try_lock(Expect::Free).unwrap();
        o.install(Timestamp::from_nanos(6), true, 0, 0, &[]);
        let snap = o.read_used(&mut out, true, |w| usize::try_from(w).unwrap() + 100).unwrap();
        assert_eq!((snap.len_bytes, out.len()), (0, 0));
    }
}
