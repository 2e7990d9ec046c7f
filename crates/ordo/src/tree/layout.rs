//! Byte layout of the tree's nodes and entries, and the in-memory entry lists that updates build
//! new nodes from.
//!
//! Everything here is a pure function of bytes — no transaction, no heap — so it can be tested on
//! its own. Every decoder checks lengths and offsets before it slices: bytes read from the heap
//! are never trusted to be a node (the caller may have opened a wrong address), and a decoding
//! failure is an [`Error::CorruptTree`], never a panic. The layout is drawn in the module essay of
//! [`super`]; all integers are little-endian.

use std::cmp::Ordering;
use std::ops::Range;

use crate::addr::Addr;
use crate::error::Error;
use crate::le_bytes::{get_u16, get_u32, get_u64};

use super::{
    FORMAT_VERSION, INLINE_BYTES_MAX, KEY_BYTES_MAX, NODE_BYTES_MAX, NODE_BYTES_MIN,
    VALUE_BYTES_MAX,
};

/// Bytes of a node's header.
pub(super) const HEADER_BYTES: usize = 24;
/// Bytes of one slot (the offset of an entry).
pub(super) const SLOT_BYTES: usize = 2;
/// Bytes of a leaf entry's header: key length, kind, zero, value length.
pub(super) const LEAF_ENTRY_HEADER_BYTES: usize = 8;
/// Bytes of an internal entry's header: key length and child address.
pub(super) const INTERNAL_ENTRY_HEADER_BYTES: usize = 10;
/// Bytes a leaf entry spends on an out-of-line value: the value object's address.
const OUT_OF_LINE_BYTES: usize = 8;
/// The most levels a tree may have; a node's level is below it. With every non-root internal
/// node holding at least two children, 2^31 entries would be needed to reach it.
pub(super) const LEVELS_MAX: u8 = 32;

const NODE_MAGIC: u16 = u16::from_le_bytes(*b"BT");
const KIND_INLINE: u8 = 0;
const KIND_OUT_OF_LINE: u8 = 1;

// Slot offsets and the data end are u16.
const _: () = assert!(NODE_BYTES_MAX <= u16::MAX as usize);
const _: () = assert!(NODE_BYTES_MIN > HEADER_BYTES);
// Value lengths are u32.
const _: () = assert!(VALUE_BYTES_MAX <= u32::MAX as usize);
const _: () = assert!(KEY_BYTES_MAX <= u16::MAX as usize);
// The smallest node still takes keys of a useful length, and the default node the full limit.
const _: () = assert!(Geometry::of(NODE_BYTES_MIN).key_max >= 32);
const _: () = assert!(Geometry::of(super::NODE_BYTES_DEFAULT).key_max == KEY_BYTES_MAX);
const _: () = assert!(Geometry::of(super::NODE_BYTES_DEFAULT).inline_max == INLINE_BYTES_MAX);

pub(super) fn corrupt(addr: Addr, reason: &'static str) -> Error {
    Error::CorruptTree { addr, reason }
}

// ---------------------------------------------------------------------------------------------
// Geometry: the limits that follow from the node size.

/// The byte budget of a tree, derived from its node size (the root object's length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Geometry {
    /// Bytes of every node object.
    pub(super) node_bytes: usize,
    /// Bytes for slots and entries: `node_bytes - HEADER_BYTES`.
    pub(super) cap: usize,
    /// A non-root node holding fewer used bytes (slots + entries) underflows: `cap / 4`.
    pub(super) fill_min: usize,
    /// The largest entry including its slot: `cap / 4`. Splits and redistributions leave both
    /// halves above `fill_min` because of it (see the essay, "Fill bounds").
    pub(super) entry_max: usize,
    /// The longest key.
    pub(super) key_max: usize,
    /// A pair is stored inline when `key + value <= inline_max` (or the value is empty).
    pub(super) inline_max: usize,
}

impl Geometry {
    /// The geometry of nodes of `node_bytes` (which the caller checked to be in range).
    pub(super) const fn of(node_bytes: usize) -> Geometry {
        let cap = node_bytes - HEADER_BYTES;
        let entry_max = cap / 4;
        let out_of_line_overhead = SLOT_BYTES + LEAF_ENTRY_HEADER_BYTES + OUT_OF_LINE_BYTES;
        let key_fit = entry_max - out_of_line_overhead;
        let key_max = if key_fit < KEY_BYTES_MAX { key_fit } else { KEY_BYTES_MAX };
        let inline_fit = entry_max - SLOT_BYTES - LEAF_ENTRY_HEADER_BYTES;
        let inline_max = if inline_fit < INLINE_BYTES_MAX { inline_fit } else { INLINE_BYTES_MAX };
        Geometry { node_bytes, cap, fill_min: cap / 4, entry_max, key_max, inline_max }
    }

    /// The geometry of the tree whose root object at `root` is `root_len` bytes long.
    pub(super) fn for_root(root: Addr, root_len: usize) -> Result<Geometry, Error> {
        if !(NODE_BYTES_MIN..=NODE_BYTES_MAX).contains(&root_len) {
            return Err(corrupt(root, "root node has an impossible size"));
        }
        Ok(Geometry::of(root_len))
    }

    /// Whether a pair of these lengths is stored inside its leaf: when it fits the inline
    /// limit, and always for an empty value (there is no empty object to put it in; the entry is
    /// no larger than an out-of-line one).
    #[inline]
    pub(super) fn is_inline(&self, key_len: usize, value_len: usize) -> bool {
        value_len == 0 || key_len + value_len <= self.inline_max
    }

    /// The bytes of the leaf entry of a pair of these lengths (its slot not included): what
    /// [`encode_inline`] or [`encode_out_of_line`] gives.
    #[inline]
    pub(super) fn leaf_entry_bytes(&self, key_len: usize, value_len: usize) -> usize {
        let stored = if self.is_inline(key_len, value_len) { value_len } else { OUT_OF_LINE_BYTES };
        LEAF_ENTRY_HEADER_BYTES + key_len + stored
    }
}

// ---------------------------------------------------------------------------------------------
// Entries.

/// A leaf entry's value: in the leaf, or in its own object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Value<'b> {
    /// The value bytes, inside the leaf.
    Inline(&'b [u8]),
    /// A value object of `len` bytes (never empty).
    OutOfLine {
        /// The value object.
        addr: Addr,
        /// Its length.
        len: usize,
    },
}

/// A decoded leaf entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LeafEntry<'b> {
    pub(super) key: &'b [u8],
    pub(super) value: Value<'b>,
}

/// Decodes a leaf entry occupying exactly `raw`.
pub(super) fn leaf_entry(addr: Addr, raw: &[u8]) -> Result<LeafEntry<'_>, Error> {
    let bad = |reason| corrupt(addr, reason);
    let key_len = usize::from(get_u16(raw, 0).ok_or_else(|| bad("leaf entry is truncated"))?);
    let kind = raw.get(2).copied().ok_or_else(|| bad("leaf entry is truncated"))?;
    let value_len = get_u32(raw, 4).ok_or_else(|| bad("leaf entry is truncated"))? as usize;
    let key_end = LEAF_ENTRY_HEADER_BYTES + key_len;
    let key =
        raw.get(LEAF_ENTRY_HEADER_BYTES..key_end).ok_or_else(|| bad("leaf key is truncated"))?;
    let value = match kind {
        KIND_INLINE => {
            if raw.len() != key_end + value_len {
                return Err(bad("inline leaf entry has the wrong length"));
            }
            Value::Inline(&raw[key_end..])
        }
        KIND_OUT_OF_LINE => {
            if raw.len() != key_end + OUT_OF_LINE_BYTES {
                return Err(bad("out-of-line leaf entry has the wrong length"));
            }
            let value = Addr::from_raw(get_u64(raw, key_end).ok_or_else(|| bad("truncated"))?);
            if value.is_null() || value_len == 0 {
                return Err(bad("out-of-line leaf entry names no value object"));
            }
            Value::OutOfLine { addr: value, len: value_len }
        }
        _ => return Err(bad("leaf entry has an unknown kind")),
    };
    Ok(LeafEntry { key, value })
}

fn leaf_header(key_len: usize, kind: u8, value_len: usize, out: &mut Vec<u8>) {
    debug_assert!(key_len <= KEY_BYTES_MAX);
    debug_assert!(value_len <= VALUE_BYTES_MAX);
    out.extend_from_slice(&(key_len as u16).to_le_bytes());
    out.push(kind);
    out.push(0);
    out.extend_from_slice(&(value_len as u32).to_le_bytes());
}

/// A leaf entry holding its value inline.
pub(super) fn encode_inline(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(LEAF_ENTRY_HEADER_BYTES + key.len() + value.len());
    leaf_header(key.len(), KIND_INLINE, value.len(), &mut out);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    out
}

/// A leaf entry whose `value_len`-byte value lives in the object `value`.
pub(super) fn encode_out_of_line(key: &[u8], value_len: usize, value: Addr) -> Vec<u8> {
    let mut out = Vec::with_capacity(LEAF_ENTRY_HEADER_BYTES + key.len() + OUT_OF_LINE_BYTES);
    leaf_header(key.len(), KIND_OUT_OF_LINE, value_len, &mut out);
    out.extend_from_slice(key);
    out.extend_from_slice(&value.to_raw().to_le_bytes());
    out
}

/// Decodes an internal entry occupying exactly `raw`: a separator key and the child holding the
/// keys from it (inclusive) up to the next separator (exclusive).
pub(super) fn internal_entry(addr: Addr, raw: &[u8]) -> Result<(&[u8], Addr), Error> {
    let bad = |reason| corrupt(addr, reason);
    let key_len = usize::from(get_u16(raw, 0).ok_or_else(|| bad("internal entry is truncated"))?);
    let child = Addr::from_raw(get_u64(raw, 2).ok_or_else(|| bad("internal entry is truncated"))?);
    if raw.len() != INTERNAL_ENTRY_HEADER_BYTES + key_len {
        return Err(bad("internal entry has the wrong length"));
    }
    if child.is_null() {
        return Err(bad("internal entry names the null child"));
    }
    Ok((&raw[INTERNAL_ENTRY_HEADER_BYTES..], child))
}

/// An internal entry: separator `key`, then `child`.
pub(super) fn encode_internal(key: &[u8], child: Addr) -> Vec<u8> {
    debug_assert!(key.len() <= KEY_BYTES_MAX);
    let mut out = Vec::with_capacity(INTERNAL_ENTRY_HEADER_BYTES + key.len());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&child.to_raw().to_le_bytes());
    out.extend_from_slice(key);
    out
}

/// The key of an entry of a node at `level` (leaf entries at level 0, internal above).
pub(super) fn entry_key(addr: Addr, level: u8, raw: &[u8]) -> Result<&[u8], Error> {
    if level == 0 { Ok(leaf_entry(addr, raw)?.key) } else { Ok(internal_entry(addr, raw)?.0) }
}

/// The shortest key `s` with `left < s <= right` (suffix truncation of separators): the prefix
/// of `right` one byte longer than the common prefix. `None` unless `left < right`.
pub(super) fn shortest_separator<'r>(left: &[u8], right: &'r [u8]) -> Option<&'r [u8]> {
    if left >= right {
        return None;
    }
    let common = left.iter().zip(right).take_while(|(a, b)| a == b).count();
    right.get(..common + 1)
}

/// The separator a leaf split puts in the parent: [`shortest_separator`], lengthened to the
/// first 8 bytes of `right` where it is shorter (and `right` is not). [`key_cmp`] compares keys
/// of 8 bytes or more by their first 8 as one word, anything shorter byte-wise through
/// `memcmp`: a truncated separator sent every probe of an internal node down the slow path,
/// though the keys it separates are long enough for the fast one. Still a prefix of `right`,
/// so still `left < s <= right`.
pub(super) fn leaf_separator<'r>(left: &[u8], right: &'r [u8]) -> Option<&'r [u8]> {
    let s = shortest_separator(left, right)?;
    right.get(..s.len().max(right.len().min(8)))
}

// ---------------------------------------------------------------------------------------------
// Nodes.

/// A node's header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Header {
    /// 0 for a leaf; a child's level is one less than its parent's.
    pub(super) level: u8,
    /// Entries.
    pub(super) count: usize,
    /// One past the last entry byte.
    pub(super) data_end: usize,
    /// Leaf: the previous leaf (null for the first). Internal: child 0.
    pub(super) link0: Addr,
    /// Leaf: the next leaf (null for the last). Internal: zero.
    pub(super) link1: Addr,
}

/// How many bytes of a node a read needs, from its first word ([`crate::object::UsedBytes`]):
/// up to the data end (bytes 6..8), and the whole header however small that says it is, so
/// that a node that is not one fails to parse as it would when read whole. The rest of a
/// node is zeros (invariant 1), which lookups never look at.
///
/// Rounded up to whole 64-byte blocks, the bulk copy's step: a copy ending mid-block finishes
/// word by word, which cost more than the bytes it saved (measured in session 26: 0.92-0.97x
/// the whole-node read per lookup exact, 1.01-1.10x block-rounded).
pub(super) fn used_bytes(word0: u64) -> usize {
    ((word0 >> 48) as usize).max(HEADER_BYTES).next_multiple_of(USED_BLOCK_BYTES)
}

/// The granularity of [`used_bytes`].
const USED_BLOCK_BYTES: usize = 64;

/// A checked view of a node's bytes; entries are decoded on access.
#[derive(Clone, Copy, Debug)]
pub(super) struct NodeView<'b> {
    pub(super) addr: Addr,
    b: &'b [u8],
    pub(super) header: Header,
}

impl<'b> NodeView<'b> {
    /// Checks the header of node `addr` of a tree with nodes of `node_bytes`.
    pub(super) fn parse(addr: Addr, b: &'b [u8], node_bytes: usize) -> Result<Self, Error> {
        Self::parse_used(addr, b, b.len(), node_bytes)
    }

    /// [`NodeView::parse`] of the first bytes `b` of a node object of `len_bytes`, as
    /// [`used_bytes`] reads them: `b` must reach the data end. A view reads nothing past it.
    pub(super) fn parse_used(
        addr: Addr,
        b: &'b [u8],
        len_bytes: usize,
        node_bytes: usize,
    ) -> Result<Self, Error> {
        let bad = |reason| corrupt(addr, reason);
        if len_bytes != node_bytes || b.len() > len_bytes {
            return Err(bad("node has the wrong size"));
        }
        if get_u16(b, 0) != Some(NODE_MAGIC) {
            return Err(bad("node lacks the tree magic"));
        }
        if b.get(2) != Some(&FORMAT_VERSION) {
            return Err(bad("node has an unknown format version"));
        }
        let level = b.get(3).copied().ok_or_else(|| bad("node is truncated"))?;
        if level >= LEVELS_MAX {
            return Err(bad("node has an impossible level"));
        }
        let count = usize::from(get_u16(b, 4).ok_or_else(|| bad("node is truncated"))?);
        let data_end = usize::from(get_u16(b, 6).ok_or_else(|| bad("node is truncated"))?);
        let link0 = Addr::from_raw(get_u64(b, 8).ok_or_else(|| bad("node is truncated"))?);
        let link1 = Addr::from_raw(get_u64(b, 16).ok_or_else(|| bad("node is truncated"))?);
        let slots_end = HEADER_BYTES + SLOT_BYTES * count;
        if slots_end > data_end || data_end > len_bytes {
            return Err(bad("node has an impossible count or data end"));
        }
        if data_end > b.len() {
            return Err(bad("node was read short of its data end"));
        }
        if level > 0 && (link0.is_null() || !link1.is_null()) {
            return Err(bad("internal node has a bad child 0 or a next link"));
        }
        Ok(NodeView { addr, b, header: Header { level, count, data_end, link0, link1 } })
    }

    pub(super) fn is_leaf(&self) -> bool {
        self.header.level == 0
    }

    pub(super) fn count(&self) -> usize {
        self.header.count
    }

    /// Slot and entry bytes in use.
    pub(super) fn used(&self) -> usize {
        self.header.data_end - HEADER_BYTES
    }

    fn slot(&self, i: usize) -> Result<usize, Error> {
        get_u16(self.b, HEADER_BYTES + SLOT_BYTES * i)
            .map(usize::from)
            .ok_or_else(|| corrupt(self.addr, "node slot is truncated"))
    }

    /// The bytes of entry `i`: from its slot to the next slot (or the data end).
    pub(super) fn raw(&self, i: usize) -> Result<&'b [u8], Error> {
        let range = self.raw_range(i)?;
        self.b.get(range).ok_or_else(|| corrupt(self.addr, "node slot is out of bounds"))
    }

    /// Where entry `i`'s bytes lie in the node ([`NodeView::raw`]).
    pub(super) fn raw_range(&self, i: usize) -> Result<std::ops::Range<usize>, Error> {
        let h = &self.header;
        if i >= h.count {
            return Err(corrupt(self.addr, "entry index past the node's count"));
        }
        let start = self.slot(i)?;
        let end = if i + 1 < h.count { self.slot(i + 1)? } else { h.data_end };
        if start < HEADER_BYTES + SLOT_BYTES * h.count || start > end || end > h.data_end {
            return Err(corrupt(self.addr, "node slot points outside the entry area"));
        }
        Ok(start..end)
    }

    /// The key of entry `i`.
    pub(super) fn key(&self, i: usize) -> Result<&'b [u8], Error> {
        entry_key(self.addr, self.header.level, self.raw(i)?)
    }

    /// Leaf entry `i`.
    pub(super) fn leaf(&self, i: usize) -> Result<LeafEntry<'b>, Error> {
        leaf_entry(self.addr, self.raw(i)?)
    }

    /// Child `i` of an internal node (`0..=count`).
    pub(super) fn child(&self, i: usize) -> Result<Addr, Error> {
        if i == 0 {
            Ok(self.header.link0)
        } else {
            Ok(internal_entry(self.addr, self.raw(i - 1)?)?.1)
        }
    }

    /// The first entry index whose key is `>= key` (`strict`: `> key`), by binary search (one
    /// comparison per probe, [`key_cmp`]). A probe reads the entry's key only, bounds-checked
    /// (the rest of the entry is decoded, and checked, when the entry is used:
    /// [`NodeView::leaf`], [`NodeView::child`]).
    pub(super) fn lower_bound(&self, key: &[u8], strict: bool) -> Result<usize, Error> {
        let h = &self.header;
        let (mut lo, mut hi) = (0, h.count);
        // The slot array, bounds-checked once (`parse` checked it ends by the data end).
        let slots_end = HEADER_BYTES + SLOT_BYTES * h.count;
        let slots = self.b.get(HEADER_BYTES..slots_end);
        let slots = slots.ok_or_else(|| corrupt(self.addr, "node slot is truncated"))?;
        let slot = |j: usize| {
            slots.get(2 * j..2 * j + 2).map(|s| usize::from(u16::from_le_bytes([s[0], s[1]])))
        };
        let at = if h.level == 0 { LEAF_ENTRY_HEADER_BYTES } else { INTERNAL_ENTRY_HEADER_BYTES };
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            // Entry `mid`'s key, checked: the entry lies between the slot
            // array and the data end, and its key inside it.
            let start = slot(mid);
            let end = if mid + 1 < h.count { slot(mid + 1) } else { Some(h.data_end) };
            let k = start.zip(end).and_then(|(start, end)| {
                let len = usize::from(get_u16(self.b, start)?);
                let key_end = start + at + len;
                (start >= slots_end && key_end <= end && end <= h.data_end)
                    .then(|| self.b.get(start + at..key_end))
                    .flatten()
            });
            let k = k.ok_or_else(|| corrupt(self.addr, "entry key is truncated"))?;
            match key_cmp(k, key) {
                Ordering::Less => lo = mid + 1,
                Ordering::Equal if strict => lo = mid + 1,
                _ => hi = mid,
            }
        }
        Ok(lo)
    }

    /// The child of an internal node that covers `key`: the number of separators `<= key`.
    pub(super) fn route(&self, key: &[u8]) -> Result<usize, Error> {
        self.lower_bound(key, true)
    }

    /// Checks what [`NodeView::parse`] does not need for lookups: slots packed in order from the
    /// end of the slot array, every entry decoding, and zeros after the data end.
    pub(super) fn check_packed(&self) -> Result<(), Error> {
        let mut expect = HEADER_BYTES + SLOT_BYTES * self.header.count;
        for i in 0..self.header.count {
            if self.slot(i)? != expect {
                return Err(corrupt(self.addr, "node entries are not packed in slot order"));
            }
            let raw = self.raw(i)?;
            entry_key(self.addr, self.header.level, raw)?;
            expect += raw.len();
        }
        if expect != self.header.data_end {
            return Err(corrupt(self.addr, "node data end does not follow its last entry"));
        }
        if self.b.get(expect..).is_some_and(|tail| tail.iter().any(|&x| x != 0)) {
            return Err(corrupt(self.addr, "node has bytes after its data end"));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Entry lists: the content of a node being rebuilt.

/// The entries of a node under modification, in order, as encoded bytes; may temporarily hold
/// more than a node does (an overflow about to be split, or two siblings about to be merged or
/// redistributed). New entries are appended to one buffer and referenced by span, so inserting
/// or removing moves spans, not bytes.
#[derive(Clone, Debug, Default)]
pub(super) struct EntryList {
    data: Vec<u8>,
    spans: Vec<Range<usize>>,
    /// Sum over entries of slot + entry bytes.
    used: usize,
}

impl EntryList {
    /// The entries of `view`, copied.
    pub(super) fn from_view(view: &NodeView<'_>) -> Result<Self, Error> {
        let mut list = EntryList::default();
        list.extend_from_view(view)?;
        Ok(list)
    }

    /// Appends the entries of `view`.
    pub(super) fn extend_from_view(&mut self, view: &NodeView<'_>) -> Result<(), Error> {
        self.spans.reserve(view.count() + 1);
        // Entries take less than the node; the slack holds the entry an update usually adds,
        // so the buffer is allocated once instead of regrown entry by entry.
        self.data.reserve(view.b.len() + view.b.len() / 4);
        for i in 0..view.count() {
            self.push(view.raw(i)?);
        }
        Ok(())
    }

    /// Appends the entries `range` of `other`.
    pub(super) fn extend_from(&mut self, other: &EntryList, range: Range<usize>) {
        for i in range {
            self.push(other.get(i));
        }
    }

    fn stash(&mut self, raw: &[u8]) -> Range<usize> {
        let start = self.data.len();
        self.data.extend_from_slice(raw);
        start..self.data.len()
    }

    pub(super) fn push(&mut self, raw: &[u8]) {
        let span = self.stash(raw);
        self.used += SLOT_BYTES + raw.len();
        self.spans.push(span);
    }

    /// Inserts `raw` as entry `i` (`i <= count`).
    pub(super) fn insert(&mut self, i: usize, raw: &[u8]) {
        let span = self.stash(raw);
        self.used += SLOT_BYTES + raw.len();
        self.spans.insert(i.min(self.spans.len()), span);
    }

    /// Replaces entry `i` (`i < count`).
    pub(super) fn replace(&mut self, i: usize, raw: &[u8]) {
        let span = self.stash(raw);
        if let Some(old) = self.spans.get_mut(i) {
            self.used = self.used - old.len() + raw.len();
            *old = span;
        }
    }

    /// Removes entry `i` (`i < count`).
    pub(super) fn remove(&mut self, i: usize) {
        if i < self.spans.len() {
            let old = self.spans.remove(i);
            self.used -= SLOT_BYTES + old.len();
        }
    }

    pub(super) fn count(&self) -> usize {
        self.spans.len()
    }

    /// Slot and entry bytes the entries would use in one node.
    pub(super) fn used(&self) -> usize {
        self.used
    }

    /// Entry `i`'s bytes (empty past the end; callers index within `count`).
    pub(super) fn get(&self, i: usize) -> &[u8] {
        self.spans.get(i).and_then(|s| self.data.get(s.clone())).unwrap_or(&[])
    }

    /// Slot and entry bytes of the entries `range`.
    pub(super) fn used_of(&self, range: Range<usize>) -> usize {
        self.spans.get(range).map_or(0, |s| s.iter().map(|r| SLOT_BYTES + r.len()).sum())
    }

    /// Where to split an over-full leaf list in two: the index `m` (`1..count`) of the first
    /// entry of the right half that minimises the larger half.
    pub(super) fn leaf_split_point(&self) -> usize {
        let total = self.used;
        let mut left = 0;
        let mut best = (usize::MAX, 1);
        for m in 1..self.spans.len() {
            left += SLOT_BYTES + self.spans[m - 1].len();
            let worst = left.max(total - left);
            if worst < best.0 {
                best = (worst, m);
            }
        }
        best.1
    }

    /// Where to split an over-full list whose last entry was just added — a key range growing
    /// at its end (TPC-C's orders per district, a log, an id sequence): the largest `m` that
    /// leaves the right part (`m..`, or `m+1..` of an internal list, whose entry `m` moves up)
    /// at least `fill_min` bytes, so the left node keeps nearly all the entries and the right
    /// one takes the appends to come. An even split would leave every node behind the growing
    /// end half empty: twice the nodes, and a split every half node of appends instead of
    /// every three quarters. `None` when no `m` leaves both parts non-empty and the right part
    /// full enough (then the list splits evenly).
    pub(super) fn append_split_point(&self, fill_min: usize, internal: bool) -> Option<usize> {
        let n = self.spans.len();
        let last = if internal { n.checked_sub(2)? } else { n.checked_sub(1)? };
        let mut right = 0;
        for m in (1..=last).rev() {
            right += SLOT_BYTES + self.spans[if internal { m + 1 } else { m }].len();
            if right >= fill_min {
                return Some(m);
            }
        }
        None
    }

    /// Where to split an over-full internal list: the index `m` (`1..count-1`) of the entry
    /// that moves up to the parent, leaving `..m` on the left and `m+1..` on the right, both
    /// non-empty, minimising the larger half.
    pub(super) fn internal_split_point(&self) -> usize {
        let total = self.used;
        let mut left = 0;
        let mut best = (usize::MAX, 1);
        let n = self.spans.len();
        for m in 1..n.saturating_sub(1) {
            left += SLOT_BYTES + self.spans[m - 1].len();
            let right = total - left - (SLOT_BYTES + self.spans[m].len());
            let worst = left.max(right);
            if worst < best.0 {
                best = (worst, m);
            }
        }
        best.1
    }

    /// Encodes entries `range` as a node of `node_bytes` at `level` with the given links.
    /// The entries must fit (the caller checked [`EntryList::used_of`] against the capacity).
    pub(super) fn encode(
        &self,
        range: Range<usize>,
        node_bytes: usize,
        level: u8,
        link0: Addr,
        link1: Addr,
    ) -> Vec<u8> {
        let spans = self.spans.get(range).unwrap_or(&[]);
        let mut b = vec![0u8; node_bytes];
        let slots_end = HEADER_BYTES + SLOT_BYTES * spans.len();
        let mut at = slots_end;
        for (i, span) in spans.iter().enumerate() {
            let raw = self.data.get(span.clone()).unwrap_or(&[]);
            let end = at + raw.len();
            debug_assert!(end <= node_bytes, "entries overflow the node");
            if end > node_bytes {
                break;
            }
            let slot = HEADER_BYTES + SLOT_BYTES * i;
            b[slot..slot + SLOT_BYTES].copy_from_slice(&(at as u16).to_le_bytes());
            b[at..end].copy_from_slice(raw);
            at = end;
        }
        b[0..2].copy_from_slice(&NODE_MAGIC.to_le_bytes());
        b[2] = FORMAT_VERSION;
        b[3] = level;
        b[4..6].copy_from_slice(&(spans.len() as u16).to_le_bytes());
        b[6..8].copy_from_slice(&(at as u16).to_le_bytes());
        b[8..16].copy_from_slice(&link0.to_raw().to_le_bytes());
        b[16..24].copy_from_slice(&link1.to_raw().to_le_bytes());
        b
    }
}

/// Lexicographic byte-string order, as `a.cmp(b)`: when both keys have 8 bytes or more, their
/// first 8 bytes are compared as one big-endian word first (ids, the usual key, are 8 bytes;
/// a binary-search probe then costs a few instructions instead of a `memcmp` call), the rest as
/// slices.
#[inline]
pub(super) fn key_cmp(a: &[u8], b: &[u8]) -> Ordering {
    match (a.first_chunk::<8>(), b.first_chunk::<8>()) {
        (Some(wa), Some(wb)) => {
            u64::from_be_bytes(*wa).cmp(&u64::from_be_bytes(*wb)).then_with(|| a[8..].cmp(&b[8..]))
        }
        _ => a.cmp(b),
    }
}

/// Inserts `raw` as entry `i` of node `addr` in its bytes `b`, in place: the bytes become
/// exactly what [`EntryList::from_view`], [`EntryList::insert`] and [`EntryList::encode`] (same
/// level and links) would build, without building the list. It reads every entry as
/// `from_view` does, so a node it refuses with an error is one `from_view` refuses with the same
/// error.
///
/// Returns `Ok(false)` and leaves `b` as it was when this does not apply: the node's entries are
/// not packed in slot order from the end of the slot array up to the data end (a rebuild would
/// repack them), `i` is past the count, or the result would not fit the node.
pub(super) fn insert_packed(
    addr: Addr,
    b: &mut [u8],
    node_bytes: usize,
    i: usize,
    raw: &[u8],
) -> Result<bool, Error> {
    splice_packed(addr, b, node_bytes, i, false, Some(raw))
}

/// Replaces entry `i` with `raw` in place, as [`insert_packed`] inserts (the bytes of
/// [`EntryList::replace`] and a rebuild; `Ok(false)` and `b` unchanged where that does not
/// apply, `i` not an entry included).
pub(super) fn replace_packed(
    addr: Addr,
    b: &mut [u8],
    node_bytes: usize,
    i: usize,
    raw: &[u8],
) -> Result<bool, Error> {
    splice_packed(addr, b, node_bytes, i, true, Some(raw))
}

/// Removes entry `i` in place, as [`insert_packed`] inserts (the bytes of
/// [`EntryList::remove`] and a rebuild).
pub(super) fn remove_packed(
    addr: Addr,
    b: &mut [u8],
    node_bytes: usize,
    i: usize,
) -> Result<bool, Error> {
    splice_packed(addr, b, node_bytes, i, true, None)
}

/// Replaces entries `i..i + removed` (`removed`: 0 or 1) of a packed node with `raw` (none or
/// one entry), moving what follows and rewriting the slots: [`insert_packed`],
/// [`replace_packed`] and [`remove_packed`].
fn splice_packed(
    addr: Addr,
    b: &mut [u8],
    node_bytes: usize,
    i: usize,
    removed: bool,
    raw: Option<&[u8]>,
) -> Result<bool, Error> {
    let view = NodeView::parse(addr, b, node_bytes)?;
    let (count, data_end) = (view.header.count, view.header.data_end);
    let slots_end = HEADER_BYTES + SLOT_BYTES * count;
    // Entry j runs from slot j to slot j + 1 (the last to the data end), so the node is packed
    // when the first entry starts right after the slots (or, empty, the data end is there);
    // every slot is checked as `NodeView::raw_range` would: inside the entry area, in order.
    // Without an early exit, and comparing neighbours rather than carrying the previous slot,
    // the check has no loop-carried dependency and compiles to vector compares (it was a third
    // of this function's instructions on TPC-C's inserts).
    let slot_bytes = b.get(HEADER_BYTES..slots_end).unwrap_or(&[]);
    let slot = |pair: &[u8]| u16::from_le_bytes([pair[0], pair[1]]);
    let mut bad = false;
    for pair in slot_bytes.windows(2 * SLOT_BYTES).step_by(SLOT_BYTES) {
        bad |= slot(&pair[SLOT_BYTES..]) < slot(pair);
    }
    if let (Some(first), Some(last)) = (slot_bytes.first_chunk::<2>(), slot_bytes.last_chunk::<2>())
    {
        bad |= usize::from(slot(first)) < slots_end || usize::from(slot(last)) > data_end;
    }
    if bad {
        return Err(corrupt(addr, "node slot points outside the entry area"));
    }
    let packed = match count {
        0 => data_end == slots_end,
        _ => view.slot(0)? == slots_end,
    };
    let (gone, added) = (usize::from(removed), usize::from(raw.is_some()));
    let raw = raw.unwrap_or(&[]);
    if !packed || i + gone > count {
        return Ok(false);
    }
    // Entries ..i stay in order before the change, entries i + gone.. after it.
    let at = if i < count { view.slot(i)? } else { data_end };
    let at_end = if i + gone < count { view.slot(i + gone)? } else { data_end };
    let new_count = count - gone + added;
    let new_slots_end = HEADER_BYTES + SLOT_BYTES * new_count;
    let new_at = new_slots_end + (at - slots_end);
    let new_after = new_at + raw.len();
    let end = new_after + (data_end - at_end);
    if end > node_bytes || end > usize::from(u16::MAX) {
        return Ok(false);
    }
    debug_assert!((slots_end..=at_end).contains(&at) && at_end <= data_end);
    let slot_at = |j: usize| HEADER_BYTES + SLOT_BYTES * j;
    // Adds `delta` (modulo 2^16: every result fits, `end` does) to the slots `range` of `b`.
    let shift = |b: &mut [u8], range: std::ops::Range<usize>, delta: usize| {
        for pair in b[slot_at(range.start)..slot_at(range.end)].chunks_exact_mut(SLOT_BYTES) {
            let v = u16::from_le_bytes([pair[0], pair[1]]).wrapping_add(delta as u16);
            pair.copy_from_slice(&v.to_le_bytes());
        }
    };
    // The new slots: entries ..i move by `new_at - at`, entries i + gone.. move to index
    // `j - gone + added` and by `new_after - at_end` (both differences taken modulo 2^16).
    let rewrite_slots = |b: &mut [u8]| {
        b.copy_within(slot_at(i + gone)..slot_at(count), slot_at(i + added));
        shift(b, i + added..new_count, new_after.wrapping_sub(at_end));
        if added == 1 {
            b[slot_at(i)..slot_at(i + 1)].copy_from_slice(&(new_at as u16).to_le_bytes());
        }
        shift(b, 0..i, new_at.wrapping_sub(at));
    };
    if new_count < count {
        // The slot array shrinks into the first entry's bytes: rewrite it before they move.
        rewrite_slots(b);
    }
    // Move the bytes after the change first when they move up, last when they move down, so
    // that neither run overwrites the other before it is moved.
    if new_after > at_end {
        b.copy_within(at_end..data_end, new_after);
    }
    b.copy_within(slots_end..at, new_slots_end);
    if new_after <= at_end {
        b.copy_within(at_end..data_end, new_after);
    }
    b[new_at..new_after].copy_from_slice(raw);
    if new_count >= count {
        // The slot array grows into bytes that have moved away.
        rewrite_slots(b);
    }
    b[4..6].copy_from_slice(&(new_count as u16).to_le_bytes());
    b[6..8].copy_from_slice(&(end as u16).to_le_bytes());
    // A rebuilt node is zero after its data end.
    b[end..].fill(0);
    Ok(true)
}

/// Rewrites the `link0` field (a leaf's previous-leaf link) of encoded node bytes.
pub(super) fn set_link0(b: &mut [u8], link0: Addr) {
    if let Some(field) = b.get_mut(8..16) {
        field.copy_from_slice(&link0.to_raw().to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: usize = 512;

    fn leaf_of(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut list = EntryList::default();
        for (k, v) in pairs {
            list.push(&encode_inline(k, v));
        }
        list.encode(0..list.count(), N, 0, Addr::new(0, 64), Addr::NULL)
    }

    #[test]
    fn geometry_limits() {
        let g = Geometry::of(4096);
        assert_eq!(g.cap, 4072);
        assert_eq!(g.fill_min, 1018);
        assert_eq!(g.key_max, KEY_BYTES_MAX);
        assert_eq!(g.inline_max, INLINE_BYTES_MAX);
        let small = Geometry::of(NODE_BYTES_MIN);
        assert_eq!(small.cap, 232);
        assert_eq!(small.key_max, 58 - 18);
        assert_eq!(small.inline_max, 48);
        for g in [g, small, Geometry::of(NODE_BYTES_MAX)] {
            assert!(SLOT_BYTES + LEAF_ENTRY_HEADER_BYTES + g.inline_max <= g.entry_max);
            assert!(SLOT_BYTES + LEAF_ENTRY_HEADER_BYTES + g.key_max + 8 <= g.entry_max);
            assert!(SLOT_BYTES + INTERNAL_ENTRY_HEADER_BYTES + g.key_max <= g.entry_max);
        }
        assert!(Geometry::for_root(Addr::NULL, NODE_BYTES_MIN - 1).is_err());
        assert!(Geometry::for_root(Addr::NULL, NODE_BYTES_MAX + 1).is_err());
    }

    #[test]
    fn leaf_roundtrip_and_search() {
        let b = leaf_of(&[(b"a", b"1"), (b"c", b""), (b"e", b"555")]);
        let v = NodeView::parse(Addr::new(0, 64), &b, N).unwrap();
        v.check_packed().unwrap();
        assert!(v.is_leaf());
        assert_eq!(v.count(), 3);
        assert_eq!(v.key(1).unwrap(), b"c");
        assert_eq!(v.leaf(2).unwrap().value, Value::Inline(b"555"));
        assert_eq!(v.lower_bound(b"c", false).unwrap(), 1);
        assert_eq!(v.lower_bound(b"c", true).unwrap(), 2);
        assert_eq!(v.lower_bound(b"", false).unwrap(), 0);
        assert_eq!(v.lower_bound(b"z", false).unwrap(), 3);
        assert_eq!(v.header.link0, Addr::new(0, 64));
        let e = encode_out_of_line(b"key", 1000, Addr::new(1, 128));
        assert_eq!(
            leaf_entry(Addr::NULL, &e).unwrap().value,
            Value::OutOfLine { addr: Addr::new(1, 128), len: 1000 }
        );
    }

    #[test]
    fn internal_roundtrip_and_route() {
        let mut list = EntryList::default();
        list.push(&encode_internal(b"d", Addr::new(0, 200)));
        list.push(&encode_internal(b"m", Addr::new(0, 300)));
        let b = list.encode(0..2, N, 1, Addr::new(0, 100), Addr::NULL);
        let v = NodeView::parse(Addr::NULL, &b, N).unwrap();
        v.check_packed().unwrap();
        assert_eq!(v.route(b"a").unwrap(), 0);
        assert_eq!(v.route(b"d").unwrap(), 1);
        assert_eq!(v.route(b"l").unwrap(), 1);
        assert_eq!(v.route(b"m").unwrap(), 2);
        assert_eq!(v.child(0).unwrap(), Addr::new(0, 100));
        assert_eq!(v.child(2).unwrap(), Addr::new(0, 300));
        assert!(v.child(3).is_err());
    }

    #[test]
    fn entry_list_edits_and_split_points() {
        let mut list = EntryList::default();
        for i in 0..10u8 {
            list.push(&encode_inline(&[i], &[i; 20]));
        }
        let one = SLOT_BYTES + LEAF_ENTRY_HEADER_BYTES + 21;
        assert_eq!(list.used(), 10 * one);
        assert_eq!(list.leaf_split_point(), 5);
        assert_eq!(list.internal_split_point(), 4);
        // Appends: the right part is the shortest suffix of at least `fill_min` bytes (for an
        // internal list, after the entry that moves up); none when it would take everything.
        assert_eq!(list.append_split_point(one, false), Some(9));
        assert_eq!(list.append_split_point(one + 1, false), Some(8));
        assert_eq!(list.append_split_point(3 * one, true), Some(6));
        assert_eq!(list.append_split_point(9 * one, false), Some(1));
        assert_eq!(list.append_split_point(9 * one + 1, false), None);
        assert_eq!(list.append_split_point(8 * one + 1, true), None);
        assert_eq!(EntryList::default().append_split_point(0, true), None);
        list.remove(0);
        list.insert(9, &encode_inline(b"zz", b""));
        list.replace(0, &encode_inline(&[1], b"x"));
        assert_eq!(list.count(), 10);
        assert_eq!(list.used(), 8 * one + (SLOT_BYTES + 8 + 2) + (SLOT_BYTES + 8 + 2));
        assert_eq!(list.used_of(0..10), list.used());
        let b = list.encode(0..10, N, 0, Addr::NULL, Addr::NULL);
        let v = NodeView::parse(Addr::NULL, &b, N).unwrap();
        v.check_packed().unwrap();
        assert_eq!(v.used(), list.used());
        assert_eq!(v.leaf(0).unwrap().value, Value::Inline(b"x"));
        assert_eq!(v.key(9).unwrap(), b"zz");
    }

    /// What an update without `insert_packed` builds: the entry list, the insert, the encode.
    fn rebuilt(b: &[u8], i: usize, raw: &[u8]) -> Result<Vec<u8>, Error> {
        let v = NodeView::parse(Addr::NULL, b, N)?;
        let mut list = EntryList::from_view(&v)?;
        list.insert(i, raw);
        let h = v.header;
        Ok(list.encode(0..list.count(), N, h.level, h.link0, h.link1))
    }

    #[test]
    fn insert_packed_gives_the_rebuilt_bytes() {
        let mut checked = 0;
        for n in 0..12u8 {
            let keys: Vec<Vec<u8>> =
                (0..n).map(|k| vec![b'a' + 2 * k; 1 + k as usize % 3]).collect();
            let pairs: Vec<(&[u8], &[u8])> =
                keys.iter().map(|k| (&k[..], &b"value-bytes"[..k.len() * 3])).collect();
            let node = leaf_of(&pairs);
            for i in 0..=usize::from(n) {
                for raw in [encode_inline(b"k", b""), encode_inline(b"key", &[7; 40])] {
                    let mut b = node.clone();
                    let want = rebuilt(&node, i, &raw).unwrap();
                    if insert_packed(Addr::NULL, &mut b, N, i, &raw).unwrap() {
                        assert_eq!(b, want, "{n} entries, at {i}");
                        NodeView::parse(Addr::NULL, &b, N).unwrap().check_packed().unwrap();
                        checked += 1;
                    } else {
                        assert_eq!(b, node, "refused, but changed");
                        let used = NodeView::parse(Addr::NULL, &node, N).unwrap().used();
                        assert!(HEADER_BYTES + used + SLOT_BYTES + raw.len() > N);
                    }
                }
            }
        }
        assert!(checked > 100, "{checked}");
        // Past the count: refused, unchanged.
        let node = leaf_of(&[(b"a", b"1")]);
        let mut b = node.clone();
        assert!(!insert_packed(Addr::NULL, &mut b, N, 2, &encode_inline(b"z", b"")).unwrap());
        assert_eq!(b, node);
    }

    /// `lower_bound` against `partition_point` on sorted keys: keys of 0 to 12 bytes over a
    /// three-letter alphabet (so that many share their first 8 bytes, or are prefixes of each
    /// other), every node size from 1 to 24 entries, leaf and internal layouts, probes present
    /// and absent, strict and not.
    #[test]
    fn lower_bound_matches_partition_point() {
        use rand::{Rng, SeedableRng, rngs::SmallRng};
        let seed = ordo_seed::Seed::new("lower_bound_matches_partition_point");
        let mut rng = SmallRng::seed_from_u64(seed.derive(0));
        let key = |rng: &mut SmallRng| -> Vec<u8> {
            let len = rng.random_range(0..=12);
            (0..len).map(|_| [0u8, 1, 0xff][rng.random_range(0..3)]).collect()
        };
        for round in 0..400 {
            let count = 1 + round % 24;
            let mut keys: Vec<Vec<u8>> = (0..count).map(|_| key(&mut rng)).collect();
            keys.sort();
            keys.dedup();
            let internal = round % 2 == 1;
            let node = if internal {
                let mut list = EntryList::default();
                for (i, k) in keys.iter().enumerate() {
                    list.push(&encode_internal(k, Addr::new(0, 64 * (i as u64 + 2))));
                }
                list.encode(0..list.count(), N, 1, Addr::new(0, 64), Addr::NULL)
            } else {
                let pairs: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (&k[..], &b""[..])).collect();
                leaf_of(&pairs)
            };
            let v = NodeView::parse(Addr::NULL, &node, N).unwrap();
            let mut probes: Vec<Vec<u8>> = (0..20).map(|_| key(&mut rng)).collect();
            probes.extend(keys.iter().cloned());
            for p in &probes {
                for strict in [false, true] {
                    let want = keys.partition_point(|k| k < p || (strict && k == p));
                    let got = v.lower_bound(p, strict).unwrap();
                    assert_eq!(got, want, "{p:?} strict {strict} in {keys:?}");
                }
            }
        }
    }

    /// A probe checks the key it compares: one whose length runs past its entry, or an entry
    /// that starts before the entry area, is corrupt, not a key. Without the checks the first
    /// case compares the next entry's bytes and the second the slots.
    #[test]
    fn lower_bound_refuses_keys_outside_their_entries() {
        let node = leaf_of(&[(b"a", b"1"), (b"bb", b"22"), (b"ccc", b"")]);
        let at = NodeView::parse(Addr::NULL, &node, N).unwrap().raw_range(1).unwrap().start;
        assert_eq!(
            NodeView::parse(Addr::NULL, &node, N).unwrap().lower_bound(b"bb", false).unwrap(),
            1
        );
        let mut long = node.clone();
        long[at..at + 2].copy_from_slice(&9u16.to_le_bytes());
        // Slot 1 points at the (zero) next-leaf link: a zero-length key there, were it taken.
        let mut inside = node.clone();
        inside[HEADER_BYTES + 2..HEADER_BYTES + 4].copy_from_slice(&16u16.to_le_bytes());
        for b in [long, inside] {
            let v = NodeView::parse(Addr::NULL, &b, N).unwrap();
            for strict in [false, true] {
                let r = v.lower_bound(b"bb", strict);
                assert!(matches!(r, Err(Error::CorruptTree { .. })), "{r:?}");
            }
        }
    }

    /// `key_cmp` is `[u8]::cmp` on keys around the 8-byte word boundary: shorter, equal and
    /// longer, with differences before, at and after byte 8, and prefixes.
    #[test]
    fn key_cmp_is_slice_order() {
        let mut keys: Vec<Vec<u8>> = vec![Vec::new()];
        for len in [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 15, 16, 17, 24, 25] {
            for fill in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut k = vec![fill; len];
                keys.push(k.clone());
                for at in [0, len / 2, len - 1] {
                    k[at] = k[at].wrapping_add(1);
                    keys.push(k.clone());
                }
            }
        }
        for a in &keys {
            for b in &keys {
                assert_eq!(key_cmp(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(ordo_seed::proptest_config("key_cmp_orders_as_slices", 2048))]

        /// `key_cmp` is `[u8]::cmp` on random keys of 0 to 40 bytes drawn from three byte
        /// values (0 among them), so most pairs share long prefixes and differ only in length
        /// or late, on either side of the 8-byte word it compares first.
        #[test]
        fn key_cmp_orders_as_slices(
            a in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0xff]), 0..40),
            b in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0xff]), 0..40),
        ) {
            proptest::prop_assert_eq!(key_cmp(&a, &b), a.cmp(&b));
            let longer = [b.as_slice(), &[0]].concat();
            proptest::prop_assert_eq!(key_cmp(&b, &longer), Ordering::Less);
            proptest::prop_assert_eq!(key_cmp(&a, &a), Ordering::Equal);
        }
    }

    /// [`replace_packed`] and [`remove_packed`] give the bytes of a rebuild with
    /// [`EntryList::replace`] / [`EntryList::remove`], for every position, shorter, equal and
    /// longer replacements, and leave a node they refuse unchanged.
    #[test]
    fn replace_and_remove_packed_give_the_rebuilt_bytes() {
        let edited = |b: &[u8], i: usize, raw: Option<&[u8]>| {
            let v = NodeView::parse(Addr::NULL, b, N).unwrap();
            let mut list = EntryList::from_view(&v).unwrap();
            match raw {
                Some(raw) => list.replace(i, raw),
                None => list.remove(i),
            }
            let h = v.header;
            list.encode(0..list.count(), N, h.level, h.link0, h.link1)
        };
        let mut checked = 0;
        for n in 1..12u8 {
            let keys: Vec<Vec<u8>> =
                (0..n).map(|k| vec![b'a' + 2 * k; 1 + k as usize % 3]).collect();
            let pairs: Vec<(&[u8], &[u8])> =
                keys.iter().map(|k| (&k[..], &b"value-bytes"[..k.len() * 3])).collect();
            let node = leaf_of(&pairs);
            for (i, key) in keys.iter().enumerate() {
                for value in [&b""[..], b"v", b"value-bytes", &[9; 40]] {
                    let raw = encode_inline(key, value);
                    let mut b = node.clone();
                    if replace_packed(Addr::NULL, &mut b, N, i, &raw).unwrap() {
                        assert_eq!(b, edited(&node, i, Some(&raw)), "{n} entries, at {i}");
                        NodeView::parse(Addr::NULL, &b, N).unwrap().check_packed().unwrap();
                        checked += 1;
                    } else {
                        assert_eq!(b, node, "refused, but changed");
                    }
                }
                let mut b = node.clone();
                assert!(remove_packed(Addr::NULL, &mut b, N, i).unwrap());
                assert_eq!(b, edited(&node, i, None), "{n} entries, removing {i}");
                NodeView::parse(Addr::NULL, &b, N).unwrap().check_packed().unwrap();
                checked += 1;
            }
        }
        assert!(checked > 200, "{checked}");
        // Past the count: refused, unchanged.
        let node = leaf_of(&[(b"a", b"1")]);
        let mut b = node.clone();
        assert!(!replace_packed(Addr::NULL, &mut b, N, 1, &encode_inline(b"z", b"")).unwrap());
        assert!(!remove_packed(Addr::NULL, &mut b, N, 1).unwrap());
        assert_eq!(b, node);
    }

    /// A node whose entries are not packed from the slot array (a gap a rebuild would close) is
    /// refused and left alone; a corrupt node fails as `from_view` fails; and wherever it
    /// inserts, the bytes are the rebuilt ones. Without the packing check the gap case fails.
    #[test]
    fn insert_packed_refuses_what_a_rebuild_would_change() {
        let node = leaf_of(&[(b"a", b"1"), (b"bb", b"22"), (b"ccc", b"")]);
        let raw = encode_inline(b"b", b"x");
        // Move every entry 4 bytes on: slots, data end and bytes.
        let mut gap = node.clone();
        let v = NodeView::parse(Addr::NULL, &node, N).unwrap();
        let (slots_end, end) = (HEADER_BYTES + SLOT_BYTES * v.count(), v.header.data_end);
        gap.copy_within(slots_end..end, slots_end + 4);
        gap[slots_end..slots_end + 4].fill(0);
        for j in 0..v.count() {
            let at = HEADER_BYTES + SLOT_BYTES * j;
            let s = u16::from_le_bytes([gap[at], gap[at + 1]]) + 4;
            gap[at..at + 2].copy_from_slice(&s.to_le_bytes());
        }
        gap[6..8].copy_from_slice(&((end + 4) as u16).to_le_bytes());
        assert!(NodeView::parse(Addr::NULL, &gap, N).is_ok());
        let mut b = gap.clone();
        assert!(!insert_packed(Addr::NULL, &mut b, N, 1, &raw).unwrap());
        assert_eq!(b, gap);
        // Every single-byte change of the used part and a little after it.
        for at in 0..end + 8 {
            for x in [0u8, 1, 2, 24, 30, 0x7F, 0xFF, node[at].wrapping_add(1)] {
                let mut bad = node.clone();
                bad[at] = x;
                for i in 0..=3 {
                    let mut b = bad.clone();
                    match (insert_packed(Addr::NULL, &mut b, N, i, &raw), rebuilt(&bad, i, &raw)) {
                        (Ok(true), Ok(want)) => assert_eq!(b, want, "byte {at} = {x}, at {i}"),
                        (Ok(false), _) => assert_eq!(b, bad),
                        (Err(e), Err(f)) => assert_eq!(e, f),
                        (got, want) => panic!("byte {at} = {x}, at {i}: {got:?} vs {want:?}"),
                    }
                }
            }
        }
    }

    /// A leaf separator is a prefix of the right key, between the two keys, and at least 8 bytes
    /// long where the right key is: every pair of keys over a small alphabet (lengths 0 to 11,
    /// so that prefixes, shared first words and short keys all occur).
    #[test]
    fn leaf_separators_are_between_and_a_word_long() {
        let mut keys: Vec<Vec<u8>> = vec![Vec::new()];
        for len in 1..=11usize {
            for fill in [0u8, 1, 0xff] {
                let mut k = vec![1u8; len];
                k[len - 1] = fill;
                keys.push(k.clone());
                k[len / 2] = fill;
                keys.push(k);
            }
        }
        let mut checked = 0;
        for l in &keys {
            for r in &keys {
                let Some(s) = leaf_separator(l, r) else {
                    assert!(l >= r, "{l:?} < {r:?} has a separator");
                    continue;
                };
                assert!(&l[..] < s && s <= &r[..], "{s:?} between {l:?} and {r:?}");
                assert!(r.starts_with(s));
                assert!(s.len() >= r.len().min(8), "{s:?} for {r:?}");
                assert!(s.len() <= shortest_separator(l, r).unwrap().len().max(8));
                checked += 1;
            }
        }
        assert!(checked > 1000, "{checked}");
    }

    #[test]
    fn separators_are_short_and_between() {
        assert_eq!(shortest_separator(b"abc", b"abd"), Some(&b"abd"[..]));
        assert_eq!(shortest_separator(b"ab", b"abzzz"), Some(&b"abz"[..]));
        assert_eq!(shortest_separator(b"a", b"zebra"), Some(&b"z"[..]));
        assert_eq!(shortest_separator(b"", b"q"), Some(&b"q"[..]));
        assert_eq!(shortest_separator(b"q", b"q"), None);
        assert_eq!(shortest_separator(b"r", b"q"), None);
        for (l, r) in [(&b"apple"[..], &b"apricot"[..]), (b"x", b"x\0"), (b"\xff", b"\xff\xff")] {
            let s = shortest_separator(l, r).unwrap();
            assert!(l < s && s <= r);
        }
    }

    /// A node read up to its data end (`used_bytes` of its first word) parses and searches as
    /// the whole node does; bytes short of the data end, or a wrong object length, do not
    /// parse.
    #[test]
    fn a_node_read_to_its_data_end_is_the_whole_node() {
        let node = leaf_of(&[(b"a", b"1"), (b"bb", b"22"), (b"ccc", b"333")]);
        let word0 = u64::from_le_bytes(node[..8].try_into().unwrap());
        let used = used_bytes(word0);
        let whole = NodeView::parse(Addr::NULL, &node, N).unwrap();
        assert_eq!(used, whole.header.data_end.next_multiple_of(64));
        let data_end = whole.header.data_end;
        let prefix = &node[..data_end.div_ceil(8) * 8];
        let part = NodeView::parse_used(Addr::NULL, prefix, N, N).unwrap();
        for key in [&b""[..], b"a", b"b", b"bb", b"c", b"ccc", b"d"] {
            assert_eq!(
                part.lower_bound(key, false).unwrap(),
                whole.lower_bound(key, false).unwrap()
            );
        }
        for i in 0..3 {
            assert_eq!(part.leaf(i).unwrap(), whole.leaf(i).unwrap());
        }
        assert!(NodeView::parse_used(Addr::NULL, &node[..data_end - 1], N, N).is_err());
        assert!(NodeView::parse_used(Addr::NULL, prefix, N - 8, N).is_err());
        assert!(NodeView::parse_used(Addr::NULL, &node, N - 8, N).is_err());
        // However small the data end, the header is read: a node that is not one fails as it
        // would whole.
        assert_eq!(used_bytes(0), 64);
        assert!(used_bytes(u64::MAX) >= usize::from(u16::MAX));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let good = leaf_of(&[(b"a", b"1"), (b"bb", b"22")]);
        for i in 0..good.len().min(64) {
            for x in [0u8, 1, 0x7F, 0xFF] {
                let mut bad = good.clone();
                bad[i] = x;
                if let Ok(v) = NodeView::parse(Addr::NULL, &bad, N) {
                    let _ = v.check_packed();
                    for j in 0..v.count() + 1 {
                        let _ = (v.key(j), v.leaf(j), v.child(j));
                    }
                    let _ = v.lower_bound(b"b", false);
                    if let Some(list) =
                        EntryList::from_view(&v).ok().filter(|l| l.used() <= N - HEADER_BYTES)
                    {
                        let _ = list.encode(0..list.count(), N, 0, Addr::NULL, Addr::NULL);
                    }
                }
            }
        }
        assert!(NodeView::parse(Addr::NULL, &good[..100], N).is_err());
        assert!(NodeView::parse(Addr::NULL, &[0; N], N).is_err());
        assert!(leaf_entry(Addr::NULL, &[5, 0, 0, 0, 0, 0, 0, 0, 1]).is_err());
        assert!(internal_entry(Addr::NULL, &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, b'a']).is_err());
    }
}
