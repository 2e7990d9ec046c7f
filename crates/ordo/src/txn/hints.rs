//! # Where a worker's last appends went: leaf hints that outlive a transaction
//!
//! A key range that grows at its end — an id sequence, TPC-C's orders of a district — sends
//! insert after insert to the same leaf, and every insert descends the tree from the root to
//! find it again. [`Hints`] keeps, per worker, a few leaves with the key range each is known to
//! cover, so that an insert whose key falls in a remembered range reads that leaf alone.
//! (PostgreSQL's B-tree keeps the rightmost leaf of an index for the same reason; this keeps any
//! leaf, with its range, so it serves many growing ranges of one tree at once.)
//!
//! A hint names a structure (a tree's root), a leaf, and the bounds `lo <= key < hi` of the keys
//! routed to it — the separators around the path a descent took, `None` for no bound — and is in
//! one of two states:
//! - **pending**: recorded by the running attempt right after it wrote the leaf (an update that
//!   changed that leaf alone). It is about the attempt's own view of the tree, so the attempt may
//!   use it as it is;
//! - **committed at `v`**: the attempt committed, and the leaf's version is now its write
//!   timestamp `v` ([`Hints::promote`]). Another attempt may use it only after reading the leaf
//!   and seeing exactly version `v`.
//!
//! ## Why a version names a range (the invariant users must keep)
//! A structure may only record a hint for an object whose key range changes *only* by writes to
//! that object. The B+tree keeps this: a split, merge or redistribution writes (or frees) every
//! leaf whose keys move, and changes of internal nodes move separators around without changing
//! which keys reach which leaf. So a leaf at version `v` covers, in any snapshot that sees `v`,
//! the range it covered when `v` was installed — and that is the range the committing attempt
//! read on its path, since its write of the leaf was locked against the version it read (a
//! concurrent split would have aborted it). Every read of the leaf joins the read set, so a
//! change after the read aborts the attempt at validation as any other read would.
//!
//! What else keeps hints honest:
//! - a structure that moves keys between objects calls [`Hints::forget_pending`] for itself
//!   first (pending hints are trusted without a version check, and the range they name may be
//!   about to change); committed hints need nothing — the change writes the leaf, so its version
//!   no longer matches;
//! - an attempt that ends without committing drops its pending hints ([`Hints::drop_pending`]);
//! - a leaf this attempt has written since a hint was committed cannot have its version checked
//!   (a read returns the buffered write), so such a hint is not used (`None` version at use);
//! - a freed leaf reads as not allocated, a slot allocated again gets a newer version, and an
//!   address inside an object of another size (its slab reused) reads as no slot: a hint whose
//!   leaf does not read is dropped, not an error.
//!
//! A hint also keeps where in its leaf the range's next key most likely goes: right after the
//! entry the last write through it put there. A range that grows in the middle of its leaf —
//! TPC-C's orders of a district, followed in the leaf by the next district's first ones — grows
//! at that point, so the key is placed with two comparisons against its would-be neighbours
//! instead of a binary search, and only where those neighbours bracket it.
//!
//! Hints are only a way to skip a descent: a miss, a wrong version or a bound that does not hold
//! falls back to the descent, whose bounds are staged here ([`Hints::stage`]) and recorded if the
//! update then inserts into that leaf alone ([`Hints::record_staged`]). A structure whose hints
//! mostly fail (keys inserted at random) goes without them for a while ([`Hints::wants`]), its
//! descents not collecting bounds either.

use ordo_clock::Timestamp;

use crate::addr::Addr;

/// Hints per worker (at most 256: a position in the table is a `u8`). TPC-C's
/// NewOrder appends to two trees in each of its home warehouse's ten districts (twenty ranges),
/// and inserts at random into a third.
pub(crate) const HINTS: usize = 48;
const _: () = assert!(HINTS <= 256);

/// The longest bound a hint keeps inline; a leaf whose bounds are longer is not hinted.
pub(crate) const BOUND_BYTES_MAX: usize = 30;

/// A key bound kept inline: `len` bytes of `bytes`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bound {
    len: u8,
    bytes: [u8; BOUND_BYTES_MAX],
}

impl Bound {
    /// The bound `key`, if it fits.
    #[inline]
    pub(crate) fn of(key: &[u8]) -> Option<Self> {
        let mut b = Bound::default();
        b.bytes.get_mut(..key.len())?.copy_from_slice(key);
        b.len = key.len() as u8;
        Some(b)
    }

    #[inline]
    fn key(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// The keys a leaf is known to cover: `lo <= key < hi`, `None` for no bound on that side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Range {
    pub(crate) lo: Option<Bound>,
    pub(crate) hi: Option<Bound>,
}

impl Range {
    /// Whether `key` is in the range.
    #[inline]
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        self.lo.is_none_or(|lo| lo.key() <= key) && self.hi.is_none_or(|hi| key < hi.key())
    }
}

/// An entry index as a hint keeps it (a node holds far fewer than 2^16 entries; a larger one,
/// which no valid node gives, becomes a guess that fails its check).
#[inline]
fn guess(next: usize) -> u16 {
    u16::try_from(next).unwrap_or(u16::MAX)
}

/// One hint (its structure is kept apart, in [`Hints::structures`]).
#[derive(Clone, Copy, Default)]
struct Hint {
    leaf: Addr,
    range: Range,
    /// `None`: pending (written by the running attempt); else the leaf's committed version.
    version: Option<Timestamp>,
    /// Where in the leaf the next key of the range most likely goes: right after the entry the
    /// last write through this hint put there (a range that grows, grows there). A guess,
    /// checked against the keys around it before it is used ([`Found::next`]).
    next: u16,
}

/// A hint found for a key: its leaf and the version the leaf must have
/// (`None`: pending, usable as it is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) slot: u8,
    pub(crate) leaf: Addr,
    pub(crate) version: Option<Timestamp>,
    /// The entry index the next key of the range most likely takes (a guess: see `Hint`).
    pub(crate) next: usize,
}

/// Structures whose hints are tracked for usefulness ([`Hints::wants`]), replaced round-robin.
const TRACKED: usize = 8;
/// Lookups over which a structure's hits are counted.
const WINDOW: u32 = 64;
/// Operations a structure goes without hints after a window with fewer than one hit in four
/// lookups (then it is tried again).
const COLD_OPS: u32 = 4096;

/// How useful hints have been for one structure lately.
#[derive(Clone, Copy, Default)]
struct Usefulness {
    structure: Addr,
    lookups: u32,
    hits: u32,
    /// Operations left without hints.
    cold: u32,
}

/// The first 8 bytes of `key`, zero-padded, as a big-endian number: `a <= b` implies
/// `prefix(a) <= prefix(b)`, so a key whose prefix is outside a range's prefixes is outside the
/// range, without comparing bytes.
#[inline]
fn prefix(key: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    let n = key.len().min(8);
    w[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(w)
}

/// A worker's hints (see the module docs), replaced least recently used first. The lookup scans
/// the structures and the bounds' prefixes (plain arrays), and compares keys only where both
/// prefixes admit the key.
pub(crate) struct Hints {
    /// Each hint's structure; [`Addr::NULL`] marks a free entry.
    structures: [Addr; HINTS],
    /// Prefixes of each hint's bounds: 0 and `u64::MAX` for no bound.
    lo_prefixes: [u64; HINTS],
    hi_prefixes: [u64; HINTS],
    /// When each hint was last recorded or used, for replacement (0: free).
    used: [u64; HINTS],
    entries: [Hint; HINTS],
    clock: u64,
    pending: bool,
    tracked: [Usefulness; TRACKED],
    next_tracked: usize,
    /// The bounds the last descent collected: structure, leaf, range ([`Hints::stage`]).
    staged: Option<(Addr, Addr, Range)>,
}

impl Default for Hints {
    fn default() -> Self {
        Hints {
            structures: [Addr::NULL; HINTS],
            lo_prefixes: [0; HINTS],
            hi_prefixes: [0; HINTS],
            used: [0; HINTS],
            entries: [Hint::default(); HINTS],
            clock: 0,
            pending: false,
            tracked: [Usefulness::default(); TRACKED],
            next_tracked: 0,
            staged: None,
        }
    }
}

impl Hints {
    /// Whether an operation on `structure` should look for a hint and record one: not while
    /// hints of the structure have been failing (keys inserted at random find the hinted
    /// leaves changed or miss them): after a window of [`WINDOW`] lookups with under a quarter
    /// of them holding, the structure goes [`COLD_OPS`] operations without (and its descents
    /// without collecting the bounds a hint needs), then tries again.
    #[inline]
    pub(crate) fn wants(&mut self, structure: Addr) -> bool {
        let t = self.tracking(structure);
        if t.lookups >= WINDOW {
            if t.hits * 4 < t.lookups {
                t.cold = COLD_OPS;
            }
            t.lookups = 0;
            t.hits = 0;
        }
        if t.cold > 0 {
            t.cold -= 1;
            return false;
        }
        true
    }

    /// A hint of `structure` held: its leaf was used.
    #[inline]
    pub(crate) fn held(&mut self, structure: Addr) {
        let t = self.tracking(structure);
        t.hits += 1;
    }

    #[inline]
    fn tracking(&mut self, structure: Addr) -> &mut Usefulness {
        let i = match self.tracked.iter().position(|t| t.structure == structure) {
            Some(i) => i,
            None => {
                let i = self.next_tracked;
                self.next_tracked = (i + 1) % TRACKED;
                self.tracked[i] = Usefulness { structure, ..Usefulness::default() };
                i
            }
        };
        &mut self.tracked[i]
    }

    /// A hint of `structure` whose range holds `key`.
    #[inline]
    pub(crate) fn find(&mut self, structure: Addr, key: &[u8]) -> Option<Found> {
        if structure == Addr::NULL {
            return None;
        }
        self.tracking(structure).lookups += 1;
        let p = prefix(key);
        let slot = (0..HINTS).find(|&i| {
            self.structures[i] == structure
                && self.lo_prefixes[i] <= p
                && p <= self.hi_prefixes[i]
                && self.entries[i].range.contains(key)
        })?;
        self.clock += 1;
        self.used[slot] = self.clock;
        let h = &self.entries[slot];
        Some(Found {
            slot: slot as u8,
            leaf: h.leaf,
            version: h.version,
            next: usize::from(h.next),
        })
    }

    fn clear(&mut self, slot: usize) {
        self.structures[slot] = Addr::NULL;
        self.used[slot] = 0;
        self.entries[slot] = Hint::default();
    }

    /// Drops the hint [`Hints::find`] gave as `found` (it did not hold).
    #[inline]
    pub(crate) fn drop_found(&mut self, found: Found) {
        let slot = usize::from(found.slot);
        if self.entries.get(slot).is_some_and(|h| h.leaf == found.leaf) {
            self.clear(slot);
        }
    }

    /// Records that the running attempt wrote `leaf` of `structure` again, through the hint
    /// [`Hints::find`] gave at position `slot`: the hint is pending again (unless it was replaced
    /// meanwhile), and the range's next key is guessed to go at entry `next`.
    #[inline]
    pub(crate) fn record_again(&mut self, structure: Addr, leaf: Addr, slot: u8, next: usize) {
        let at = usize::from(slot);
        let same = |i: usize| self.structures[i] == structure && self.entries[i].leaf == leaf;
        let i = if at < HINTS && same(at) { Some(at) } else { (0..HINTS).find(|&i| same(i)) };
        if let Some(i) = i {
            self.entries[i].version = None;
            self.entries[i].next = guess(next);
            self.pending = true;
        }
    }

    /// Keeps the bounds a descent found for `leaf` of `structure` (`None`: it collected none),
    /// for [`Hints::record_staged`]: the last descent's only.
    #[inline]
    pub(crate) fn stage(&mut self, structure: Addr, leaf: Addr, range: Option<Range>) {
        self.staged = range.map(|range| (structure, leaf, range));
    }

    /// Records that the running attempt wrote `leaf` of `structure`, whose bounds the last
    /// descent staged (nothing if it staged none for this leaf); the range's next key is guessed
    /// to go at entry `next`.
    #[inline]
    pub(crate) fn record_staged(&mut self, structure: Addr, leaf: Addr, next: usize) {
        if let Some((s, l, range)) = self.staged.take()
            && s == structure
            && l == leaf
            && let Some(slot) = self.record(structure, leaf, range)
        {
            self.entries[slot].next = guess(next);
        }
    }

    /// Records that the running attempt wrote `leaf` of `structure`, which covers `range` (a
    /// pending hint, replacing any other hint of the leaf, with no guess of where the next key
    /// goes); returns the hint's position.
    #[inline]
    pub(crate) fn record(&mut self, structure: Addr, leaf: Addr, range: Range) -> Option<usize> {
        if structure == Addr::NULL {
            return None;
        }
        self.clock += 1;
        let hint = Hint { leaf, range, version: None, next: 0 };
        let same =
            (0..HINTS).find(|&i| self.structures[i] == structure && self.entries[i].leaf == leaf);
        // A free entry has `used` 0, so it goes first.
        let slot = same.unwrap_or_else(|| {
            self.used.iter().enumerate().min_by_key(|&(_, &u)| u).map_or(0, |(i, _)| i)
        });
        self.used[slot] = self.clock;
        self.structures[slot] = structure;
        self.lo_prefixes[slot] = range.lo.map_or(0, |b| prefix(b.key()));
        self.hi_prefixes[slot] = range.hi.map_or(u64::MAX, |b| prefix(b.key()));
        self.entries[slot] = hint;
        self.pending = true;
        Some(slot)
    }

    /// Forgets the running attempt's hints of `structure`: it is about to move keys between
    /// its objects.
    #[inline]
    pub(crate) fn forget_pending(&mut self, structure: Addr) {
        if !self.pending {
            return;
        }
        for i in 0..HINTS {
            if self.structures[i] == structure && self.entries[i].version.is_none() {
                self.clear(i);
            }
        }
    }

    /// The attempt committed at `wts`: every leaf it hinted now has that version.
    #[inline]
    pub(crate) fn promote(&mut self, wts: Timestamp) {
        if !std::mem::take(&mut self.pending) {
            return;
        }
        for i in 0..HINTS {
            if self.structures[i] != Addr::NULL && self.entries[i].version.is_none() {
                self.entries[i].version = Some(wts);
            }
        }
    }

    /// The attempt ended without committing: its pending hints go.
    #[inline]
    pub(crate) fn drop_pending(&mut self) {
        self.staged = None;
        if !std::mem::take(&mut self.pending) {
            return;
        }
        for i in 0..HINTS {
            if self.structures[i] != Addr::NULL && self.entries[i].version.is_none() {
                self.clear(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(n: u64) -> Addr {
        Addr::new(0, n * 64)
    }

    fn range(lo: Option<&[u8]>, hi: Option<&[u8]>) -> Range {
        Range { lo: lo.map(|k| Bound::of(k).unwrap()), hi: hi.map(|k| Bound::of(k).unwrap()) }
    }

    #[test]
    fn ranges_hold_their_lower_bound_and_not_their_upper() {
        let r = range(Some(b"b"), Some(b"d"));
        assert!(!r.contains(b"a"));
        assert!(!r.contains(b""));
        assert!(r.contains(b"b"));
        assert!(r.contains(b"c\xff\xff"));
        assert!(!r.contains(b"d"));
        assert!(!r.contains(b"da"));
        assert!(range(None, None).contains(b""));
        assert!(range(None, Some(b"b")).contains(b""));
        assert!(!range(Some(b"b"), None).contains(b"a"));
        assert!(range(Some(b"b"), None).contains(b"zzz"));
        assert!(Bound::of(&[7; BOUND_BYTES_MAX]).is_some());
        assert!(Bound::of(&[7; BOUND_BYTES_MAX + 1]).is_none());
    }

    #[test]
    fn pending_hints_are_promoted_on_commit_and_dropped_otherwise() {
        let mut h = Hints::default();
        h.record(a(1), a(10), range(Some(b"b"), Some(b"d")));
        let f = h.find(a(1), b"c").unwrap();
        assert_eq!((f.leaf, f.version), (a(10), None));
        assert_eq!(h.find(a(2), b"c"), None, "another structure");
        assert_eq!(h.find(a(1), b"d"), None, "outside the range");
        h.promote(Timestamp::from_nanos(77));
        assert_eq!(h.find(a(1), b"c").unwrap().version, Some(Timestamp::from_nanos(77)));
        // A new pending hint of another leaf, then an abort: only the pending one goes.
        h.record(a(1), a(11), range(Some(b"d"), None));
        assert!(h.find(a(1), b"e").is_some());
        h.drop_pending();
        assert_eq!(h.find(a(1), b"e"), None);
        assert_eq!(h.find(a(1), b"c").unwrap().version, Some(Timestamp::from_nanos(77)));
        // Recording the leaf again replaces its hint; forgetting a structure drops only its
        // pending hints.
        h.record(a(1), a(10), range(Some(b"a"), Some(b"c")));
        h.record(a(2), a(20), range(None, None));
        assert_eq!(h.find(a(1), b"c"), None);
        h.forget_pending(a(1));
        assert_eq!(h.find(a(1), b"b"), None);
        assert!(h.find(a(2), b"b").is_some());
        let f = h.find(a(2), b"b").unwrap();
        h.drop_found(f);
        assert_eq!(h.find(a(2), b"b"), None);
    }

    #[test]
    fn the_least_recently_used_hint_is_replaced() {
        let mut h = Hints::default();
        let key = |i: u64| i.to_be_bytes();
        for i in 0..HINTS as u64 {
            h.record(a(1), a(100 + i), range(Some(&key(i)), Some(&key(i + 1))));
        }
        h.promote(Timestamp::from_nanos(5));
        // Use every hint but the third, then record one more: the third goes.
        for i in (0..HINTS as u64).filter(|&i| i != 2) {
            assert_eq!(h.find(a(1), &key(i)).unwrap().leaf, a(100 + i));
        }
        h.record(a(1), a(999), range(Some(&key(1000)), None));
        assert_eq!(h.find(a(1), &key(2)), None);
        for i in (0..HINTS as u64).filter(|&i| i != 2) {
            assert_eq!(h.find(a(1), &key(i)).unwrap().leaf, a(100 + i));
        }
        assert_eq!(h.find(a(1), &key(5000)).unwrap().leaf, a(999));
    }

    #[test]
    fn a_structure_whose_hints_fail_goes_without_for_a_while() {
        let mut h = Hints::default();
        let (random, growing) = (a(1), a(2));
        h.record(growing, a(20), range(None, None));
        // A window of lookups: the growing structure's hints hold, the other's never do.
        for _ in 0..WINDOW {
            assert!(h.wants(random) && h.find(random, b"k").is_none());
            assert!(h.wants(growing) && h.find(growing, b"k").is_some());
            h.held(growing);
        }
        assert!(!h.wants(random), "a quarter of the lookups did not hold");
        assert!(h.wants(growing));
        for _ in 1..COLD_OPS {
            assert!(!h.wants(random));
        }
        assert!(h.wants(random), "tried again after COLD_OPS operations");
        // A window with exactly a quarter holding keeps it.
        for i in 0..WINDOW {
            assert!(h.wants(random));
            h.find(random, b"k");
            if i % 4 == 0 {
                h.held(random);
            }
        }
        assert!(h.wants(random));
    }

    #[test]
    fn staged_bounds_are_recorded_for_their_own_leaf_only() {
        let mut h = Hints::default();
        let r = range(Some(b"b"), Some(b"d"));
        h.stage(a(1), a(10), Some(r));
        h.record_staged(a(1), a(11), 0);
        assert_eq!(h.find(a(1), b"c"), None, "bounds of another leaf");
        h.stage(a(1), a(10), Some(r));
        h.record_staged(a(2), a(10), 0);
        assert_eq!(h.find(a(2), b"c"), None, "bounds of another structure");
        h.stage(a(1), a(10), Some(r));
        h.stage(a(1), a(10), None);
        h.record_staged(a(1), a(10), 0);
        assert_eq!(h.find(a(1), b"c"), None, "a later descent collected none");
        h.stage(a(1), a(10), Some(r));
        h.record_staged(a(1), a(10), 0);
        assert_eq!(h.find(a(1), b"c").map(|f| f.leaf), Some(a(10)));
        // Staged bounds are used once, and an attempt's end drops them.
        h.drop_pending();
        h.stage(a(1), a(12), Some(range(Some(b"x"), None)));
        h.drop_pending();
        h.record_staged(a(1), a(12), 0);
        assert_eq!(h.find(a(1), b"y"), None);
    }
}
