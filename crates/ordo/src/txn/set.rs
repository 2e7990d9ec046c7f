//! Read and write sets of a transaction, reused across attempts so a transaction allocates
//! nothing once its worker is warm.

use rustc_hash::FxHashMap as HashMap;

use crate::addr::Addr;
use crate::object::{Expect, Header};

/// How far back [`ReadSet::recent`] looks.
const RECENT_READS: usize = 8;

/// Linear lookups are used up to this many entries; a hash index above it. A TPC-C NewOrder
/// writes about 20 objects: at 16 it built an index for each (1.4 % of the mix's instructions);
/// at 24 the mix runs 0.87 % fewer instructions, STAMP vacation's client phase 0.08 % more and
/// its untimed load (64 inserts per transaction) a little more (session 30, callgrind).
const INDEX_THRESHOLD: usize = 24;

/// One object read: the version it was read at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadEntry {
    /// The object.
    pub addr: Addr,
    /// Its header when read (unlocked).
    pub header: Header,
    /// Its payload length when read.
    pub len_bytes: u32,
    /// Whether this transaction buffered a write of the object after reading it (set by the
    /// transaction when it buffers the write). Commit validation skips such a read without
    /// looking the object up in the write set: the transaction locks what it writes, and VALIDATE
    /// passes every object it holds locked (whose version its lock checked). A read built
    /// elsewhere (a frame, a test) is not marked, and is looked up as before.
    pub written: bool,
}

impl ReadEntry {
    /// An unmarked read of `addr` at `header`, `len_bytes` long.
    #[inline]
    pub fn new(addr: Addr, header: Header, len_bytes: u32) -> Self {
        ReadEntry { addr, header, len_bytes, written: false }
    }
}

/// What a write-set entry does to its object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// A new version of an allocated object.
    Update,
    /// The first version of an object allocated by this transaction.
    Alloc,
    /// An unallocated version: the object is freed.
    Free,
}

/// One object to be written at commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteEntry {
    /// The object.
    pub addr: Addr,
    /// What the write does.
    pub kind: WriteKind,
    /// The payload length in bytes.
    pub len_bytes: usize,
    /// What the head version must be when locked; set by the coordinator before locking.
    pub expect: Expect,
    data_start: usize,
}

/// The buffered writes of a transaction: entries plus one arena of payload words.
///
/// [`WriteSet::find`] first asks a 256-bit filter of the addresses pushed (most lookups are
/// reads of objects the transaction has not written: TPC-C NewOrder makes about 40 against a
/// set growing to about 17, and scanning for them was 4 % of its instructions), then scans a
/// short set, uses the hash index of a long one, and binary-searches one sorted by address
/// (`WriteSet::sort`, the embedded engine's lock order, after which only commit validation
/// looks entries up, and only for reads whose version check failed).
#[derive(Debug, Default)]
pub struct WriteSet {
    entries: Vec<WriteEntry>,
    words: Vec<u64>,
    /// Entry of each address: every entry while the set is longer than `INDEX_THRESHOLD` and
    /// not `sorted`, empty otherwise.
    index: HashMap<Addr, usize>,
    /// Entries are in address order (and `index` is empty).
    sorted: bool,
    /// One bit per address pushed since the last `clear` ([`filter_bit`]): an address whose bit
    /// is clear has no entry. Removals leave bits set (a stale bit only costs a search).
    filter: Filter,
}

/// Bits of [`WriteSet::filter`]: 256, so that a set of TPC-C NewOrder's ~20 writes sends about
/// one lookup in thirteen of an address it does not hold to a search (one word sent one in
/// four).
type Filter = [u64; 4];

/// The [`WriteSet::filter`] word and bit of `addr`: the top eight bits of a multiplicative
/// hash, so addresses that differ only in low bits (neighbouring slots) spread over the words.
#[inline]
fn filter_bit(addr: Addr) -> (usize, u64) {
    let h = addr.to_raw().wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56;
    ((h >> 6) as usize, 1 << (h & 63))
}

impl WriteSet {
    /// Forgets everything (keeps the allocations).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.words.clear();
        self.index.clear();
        self.sorted = false;
        self.filter = [0; 4];
    }

    /// Whether nothing is to be written.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entries.
    pub fn entries(&self) -> &[WriteEntry] {
        &self.entries
    }

    /// The entries, mutably (the coordinator sets `expect`).
    pub(crate) fn entries_mut(&mut self) -> &mut [WriteEntry] {
        &mut self.entries
    }

    /// The entries `range` (of the sorted set) as one participant's part.
    #[inline]
    pub(crate) fn part(&self, range: std::ops::Range<usize>) -> WritePart<'_> {
        debug_assert!(range.start <= range.end);
        debug_assert!(range.end <= self.entries.len());
        WritePart { set: self, start: range.start as u32, end: range.end as u32 }
    }

    /// The payload words of `entry`.
    pub fn data(&self, entry: &WriteEntry) -> &[u64] {
        &self.words[entry.data_start..entry.data_start + entry.len_bytes.div_ceil(8)]
    }

    /// The position of `addr`'s entry.
    #[inline]
    pub fn find(&self, addr: Addr) -> Option<usize> {
        let (word, bit) = filter_bit(addr);
        if self.filter[word] & bit == 0 {
            None
        } else if self.sorted {
            self.entries.binary_search_by_key(&addr, |e| e.addr).ok()
        } else if self.entries.len() <= INDEX_THRESHOLD {
            self.entries.iter().position(|e| e.addr == addr)
        } else {
            self.index.get(&addr).copied()
        }
    }

    /// Adds an entry for `addr` (not yet present) with `bytes` as its payload.
    pub(crate) fn push(&mut self, addr: Addr, kind: WriteKind, bytes: &[u8], expect: Expect) {
        debug_assert!(self.find(addr).is_none());
        // Back to unsorted lookups, the new entry last; a sorted set's index is empty, so it is
        // built below if the set is long.
        self.sorted = false;
        let data_start = self.words.len();
        push_bytes(&mut self.words, bytes);
        self.entries.push(WriteEntry { addr, kind, len_bytes: bytes.len(), expect, data_start });
        self.index_last();
        let (word, bit) = filter_bit(addr);
        self.filter[word] |= bit;
    }

    /// Indexes the entry just pushed once the set is long (building the index when it is new).
    fn index_last(&mut self) {
        let last = self.entries.len() - 1;
        if self.entries.len() > INDEX_THRESHOLD {
            if self.index.is_empty() {
                self.index.extend(self.entries.iter().enumerate().map(|(i, e)| (e.addr, i)));
            } else {
                self.index.insert(self.entries[last].addr, last);
            }
        }
    }

    /// Adds an entry for `addr` (not yet present) whose payload is `words` (`len_bytes` long,
    /// the last word's bytes past it zero, as [`push_bytes`] leaves them); returns its position.
    pub(crate) fn push_words(
        &mut self,
        addr: Addr,
        kind: WriteKind,
        words: &[u64],
        len_bytes: usize,
        expect: Expect,
    ) -> usize {
        debug_assert!(self.find(addr).is_none());
        debug_assert_eq!(words.len(), len_bytes.div_ceil(8));
        self.sorted = false;
        let data_start = self.words.len();
        self.words.extend_from_slice(words);
        self.entries.push(WriteEntry { addr, kind, len_bytes, expect, data_start });
        self.index_last();
        let (word, bit) = filter_bit(addr);
        self.filter[word] |= bit;
        self.entries.len() - 1
    }

    /// The payload words of entry `i`, to change in place (the caller keeps the bytes past
    /// `len_bytes` zero).
    pub(crate) fn data_mut(&mut self, i: usize) -> &mut [u64] {
        let e = self.entries[i];
        &mut self.words[e.data_start..e.data_start + e.len_bytes.div_ceil(8)]
    }

    /// Replaces the payload of entry `i` with `bytes` (same length).
    pub(crate) fn overwrite(&mut self, i: usize, bytes: &[u8]) {
        let e = self.entries[i];
        debug_assert_eq!(e.len_bytes, bytes.len());
        let dst = &mut self.words[e.data_start..e.data_start + e.len_bytes.div_ceil(8)];
        // As `push_bytes`: whole words by exact-size copies, which the compiler turns into one
        // copy (a variable-length copy per word cost ~28 instructions a word: 6 % of vacation's
        // instructions, which rewrites 1 KiB leaves), then the last one zero-padded.
        let chunks = bytes.chunks_exact(8);
        let rest = chunks.remainder();
        for (w, c) in dst.iter_mut().zip(chunks) {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            *w = u64::from_le_bytes(b);
        }
        if let (false, Some(last)) = (rest.is_empty(), dst.last_mut()) {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            *last = u64::from_le_bytes(b);
        }
    }

    /// Turns entry `i` into a free.
    pub(crate) fn mark_free(&mut self, i: usize) {
        self.entries[i].kind = WriteKind::Free;
    }

    /// Removes entry `i` (an allocation freed in the same transaction).
    pub(crate) fn remove(&mut self, i: usize) {
        if self.sorted {
            self.entries.remove(i);
            return;
        }
        let removed = self.entries.swap_remove(i);
        if self.entries.len() <= INDEX_THRESHOLD {
            // Short again: scans from now on, and a set that grows past the threshold again
            // rebuilds the index from all its entries (a stale index kept here would miss the
            // entries pushed while it was not maintained).
            self.index.clear();
        } else {
            self.index.remove(&removed.addr);
            if let Some(moved) = self.entries.get(i) {
                self.index.insert(moved.addr, i);
            }
        }
    }

    /// Sorts entries by address (the lock order); lookups then binary-search.
    pub(crate) fn sort(&mut self) {
        self.entries.sort_unstable_by_key(|e| e.addr);
        self.index.clear();
        self.sorted = true;
    }

    /// Rebuilds the hash index from the entries, or empties it for a short set.
    fn rebuild_index(&mut self) {
        self.index.clear();
        if self.entries.len() > INDEX_THRESHOLD {
            self.index.extend(self.entries.iter().enumerate().map(|(i, e)| (e.addr, i)));
        }
    }

    /// Sorts entries by `key` (unique per entry: it must order the addresses too) and rebuilds
    /// the index. The coordinator sorts by owner, then address, so each owner's part is one run.
    #[inline]
    pub(crate) fn sort_by_key<K: Ord>(&mut self, key: impl FnMut(&WriteEntry) -> K) {
        self.entries.sort_unstable_by_key(key);
        self.sorted = false;
        self.rebuild_index();
    }
}

/// The entries of a write set one participant owns: a run of the sorted set, with access to
/// their payloads. The coordinator hands each participant its part (see [`super::commit`]).
///
/// Two words (the set and the run's bounds), so a call passes it in registers.
#[derive(Clone, Copy, Debug)]
pub struct WritePart<'a> {
    set: &'a WriteSet,
    start: u32,
    end: u32,
}

const _: () = assert!(std::mem::size_of::<WritePart<'static>>() == 16);

impl<'a> WritePart<'a> {
    /// The entries, sorted by address.
    #[inline]
    pub fn entries(&self) -> &'a [WriteEntry] {
        let entries: &'a [WriteEntry] = &self.set.entries;
        entries.get(self.start as usize..self.end as usize).unwrap_or(&[])
    }

    /// The payload words of `entry` (an entry of this part).
    #[inline]
    pub fn data(&self, entry: &WriteEntry) -> &'a [u64] {
        self.set.data(entry)
    }

    /// Number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// Whether the part is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// Appends `bytes` as little-endian words, zero-padding the last one.
pub(crate) fn push_bytes(words: &mut Vec<u64>, bytes: &[u8]) {
    let chunks = bytes.chunks_exact(8);
    let rest = chunks.remainder();
    // One reservation, then an exact-length extend the compiler turns into a copy (a push per
    // word checked the capacity each time: 4 % of TPC-C NewOrder, which writes 1 KiB leaves).
    words.reserve(bytes.len().div_ceil(8));
    words.extend(chunks.map(|c| {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        u64::from_le_bytes(b)
    }));
    if !rest.is_empty() {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        words.push(u64::from_le_bytes(b));
    }
}

/// The bytes of `words`, truncated to `len_bytes`.
pub(crate) fn words_as_bytes(words: &[u64], len_bytes: usize) -> &[u8] {
    &bytemuck::cast_slice::<u64, u8>(words)[..len_bytes]
}

/// The read set: reads in order.
#[derive(Debug, Default)]
pub struct ReadSet {
    entries: Vec<ReadEntry>,
}

impl ReadSet {
    /// Forgets everything.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
    /// The reads.
    pub fn entries(&self) -> &[ReadEntry] {
        &self.entries
    }
    pub(crate) fn push(&mut self, e: ReadEntry) {
        self.entries.push(e);
    }
    /// The most recent read of `addr` among the last `RECENT_READS` reads, and its position:
    /// cheap enough for every write, and it covers the common read-modify-write.
    pub(crate) fn recent(&self, addr: Addr) -> Option<(usize, ReadEntry)> {
        let n = self.entries.len();
        let back = self.entries.iter().rev().take(RECENT_READS).position(|e| e.addr == addr)?;
        Some((n - 1 - back, self.entries[n - 1 - back]))
    }
    /// Marks read `i` as one of an object the transaction now writes ([`ReadEntry::written`]).
    /// Call it only once the write is buffered: commit validation then skips the read.
    pub(crate) fn mark_written(&mut self, i: usize) {
        self.entries[i].written = true;
    }
    /// The position of the newest read.
    pub(crate) fn last(&self) -> Option<usize> {
        self.entries.len().checked_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_clock::Timestamp;

    /// One step of the write-set model test.
    #[derive(Clone, Debug)]
    enum Op {
        Push(u64),
        PushWords(u64),
        Remove(usize),
        Sort,
        SortReversed,
        Clear,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (1u64..48).prop_map(Op::Push),
            2 => (1u64..48).prop_map(Op::PushWords),
            2 => any::<usize>().prop_map(Op::Remove),
            1 => Just(Op::Sort),
            1 => Just(Op::SortReversed),
            1 => Just(Op::Clear),
        ]
    }

    proptest::proptest! {
        #![proptest_config(ordo_seed::proptest_config("write_set_finds_what_a_model_holds", 256))]

        /// Any mix of pushes, removals, sorts and clears (across the index threshold, sorted by
        /// address or by another key) leaves `find` giving each address's entry and its
        /// payload, as a `BTreeMap` of the same writes does (so the filter in front of the
        /// search never hides an entry).
        #[test]
        fn write_set_finds_what_a_model_holds(ops in proptest::collection::vec(op(), 1..120)) {
            let mut ws = WriteSet::default();
            let mut model = std::collections::BTreeMap::new();
            let e = Expect::NotAfter(Timestamp::ZERO);
            for op in ops {
                match op {
                    Op::Push(k) => {
                        let addr = Addr::new(0, k * 64);
                        // An address already written keeps its entry (as `Tx` overwrites it).
                        if model.insert(addr, k).is_none() {
                            ws.push(addr, WriteKind::Update, &k.to_le_bytes()[..3], e);
                        }
                    }
                    Op::PushWords(k) => {
                        let addr = Addr::new(0, k * 64);
                        if model.insert(addr, k).is_none() {
                            let i = ws.push_words(addr, WriteKind::Update, &[k & 0xff_ffff], 3, e);
                            proptest::prop_assert_eq!(ws.entries()[i].addr, addr);
                            proptest::prop_assert_eq!(ws.data_mut(i), &mut [k & 0xff_ffff]);
                        }
                    }
                    Op::Remove(i) if !ws.is_empty() => {
                        let addr = ws.entries()[i % ws.len()].addr;
                        ws.remove(i % ws.len());
                        model.remove(&addr);
                    }
                    Op::Remove(_) => {}
                    Op::Sort => ws.sort(),
                    Op::SortReversed => ws.sort_by_key(|e| std::cmp::Reverse(e.addr)),
                    Op::Clear => {
                        ws.clear();
                        model.clear();
                    }
                }
                proptest::prop_assert_eq!(ws.len(), model.len());
                for k in 0..49u64 {
                    let addr = Addr::new(0, k * 64);
                    let found = ws.find(addr).map(|i| {
                        let entry = ws.entries()[i];
                        (entry.addr, words_as_bytes(ws.data(&entry), 3).to_vec())
                    });
                    let want = model.get(&addr).map(|k| (addr, k.to_le_bytes()[..3].to_vec()));
                    proptest::prop_assert_eq!(found, want);
                }
            }
        }
    }

    /// An overwrite leaves exactly the words a push of the same bytes gives — the last word's
    /// bytes past the length zero — for lengths around the word size, over a payload of ones.
    #[test]
    fn overwrite_gives_the_words_of_a_push() {
        let e = Expect::NotAfter(Timestamp::ZERO);
        for len in 0..=25usize {
            let new: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(29) ^ 0x5A).collect();
            let mut ws = WriteSet::default();
            ws.push(Addr::new(0, 64), WriteKind::Update, &vec![0xFF; len], e);
            ws.overwrite(0, &new);
            let mut want = Vec::new();
            push_bytes(&mut want, &new);
            assert_eq!(ws.data(&ws.entries()[0]), &want[..], "{len} bytes");
        }
    }

    #[test]
    fn write_set_find_overwrite_remove_across_index_threshold() {
        let mut ws = WriteSet::default();
        let e = Expect::NotAfter(Timestamp::ZERO);
        for i in 1..=40u64 {
            ws.push(Addr::new(0, i * 64), WriteKind::Update, &i.to_le_bytes()[..5], e);
        }
        for i in 1..=40u64 {
            let k = ws.find(Addr::new(0, i * 64)).unwrap();
            assert_eq!(words_as_bytes(ws.data(&ws.entries()[k]), 5), &i.to_le_bytes()[..5]);
        }
        let k = ws.find(Addr::new(0, 64)).unwrap();
        ws.overwrite(k, &[9, 9, 9, 9, 9]);
        assert_eq!(words_as_bytes(ws.data(&ws.entries()[k]), 5), &[9; 5]);
        ws.remove(k);
        assert!(ws.find(Addr::new(0, 64)).is_none());
        assert!(ws.find(Addr::new(0, 40 * 64)).is_some());
        ws.sort();
        assert!(ws.entries().windows(2).all(|w| w[0].addr < w[1].addr));
        assert_eq!(ws.find(Addr::new(0, 2 * 64)), Some(0));
    }
}
