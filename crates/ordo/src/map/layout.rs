//! Byte layouts of the map's objects: the root, directory nodes, buckets and their entries.
//!
//! Everything here is a pure function of bytes — no transaction, no heap — so it can be tested on
//! its own, and every decoder checks lengths and offsets before it slices: bytes read from the heap
//! are never trusted to be a map (the caller may have opened a wrong address), and a decoding
//! failure is an [`Error::CorruptMap`], never a panic. The layouts are drawn in the module essay
//! of [`super`]; all integers are little-endian.

use crate::addr::Addr;
use crate::error::Error;
use crate::le_bytes::{get_u16, get_u32, get_u64};

use super::{FORMAT_VERSION, KEY_BYTES_MAX};

/// Hash bits consumed by one directory level.
pub(super) const FANOUT_BITS: u32 = 6;
/// Slots per directory node.
pub(super) const FANOUT: usize = 1 << FANOUT_BITS;
/// The most directory levels, root included.
pub(super) const LEVELS_MAX: u32 = 10;
/// The most hash bits a bucket can be split on: beyond it, buckets chain.
pub(super) const DEPTH_BITS_LIMIT: u8 = (FANOUT_BITS * LEVELS_MAX) as u8;

/// Bytes of the root's header in front of its slots.
pub(super) const ROOT_HEADER_BYTES: usize = 16;
/// Bytes of a non-root directory node: its slots only.
pub(super) const NODE_BYTES: usize = FANOUT * 8;
/// Bytes of the root: header and slots.
pub(super) const ROOT_BYTES: usize = ROOT_HEADER_BYTES + NODE_BYTES;
/// Bytes of every bucket.
pub(super) const BUCKET_BYTES: usize = 512;
/// Bytes of a bucket's header.
pub(super) const BUCKET_HEADER_BYTES: usize = 16;
/// Bytes of a bucket available to entries.
pub(super) const ENTRY_AREA_BYTES: usize = BUCKET_BYTES - BUCKET_HEADER_BYTES;
/// Bytes of an entry's header.
pub(super) const ENTRY_HEADER_BYTES: usize = 16;
/// The largest `key + value` stored inside the bucket; longer pairs go to a record object.
pub(super) const INLINE_BYTES_MAX: usize = 96;
/// Bytes of an entry whose pair lives in a record: header and the record's address.
pub(super) const RECORD_ENTRY_BYTES: usize = ENTRY_HEADER_BYTES + 8;

const ROOT_MAGIC: u32 = u32::from_le_bytes(*b"ORDM");
const BUCKET_MAGIC: u16 = u16::from_le_bytes(*b"MB");
const KIND_INLINE: u8 = 0;
const KIND_RECORD: u8 = 1;
/// Bit 0 of a slot: the slot names a child node rather than a bucket (addresses are 8-aligned).
const SLOT_CHILD_BIT: u64 = 1;

const _: () = assert!(FANOUT_BITS * LEVELS_MAX <= 64);
const _: () = assert!(NODE_BYTES == 512, "a node fills its size class exactly");
const _: () = assert!(BUCKET_BYTES.is_multiple_of(8));
const _: () = assert!(ENTRY_AREA_BYTES <= u16::MAX as usize);
const _: () = assert!(KEY_BYTES_MAX <= u16::MAX as usize);
const _: () = assert!(INLINE_BYTES_MAX.is_multiple_of(8));
// Every bucket holds at least four entries of any size, so splitting always makes progress
// towards room for one more.
const _: () = assert!(ENTRY_AREA_BYTES / (ENTRY_HEADER_BYTES + INLINE_BYTES_MAX) >= 4);
const _: () = assert!(RECORD_ENTRY_BYTES <= ENTRY_HEADER_BYTES + INLINE_BYTES_MAX);

pub(super) fn corrupt(addr: Addr, reason: &'static str) -> Error {
    Error::CorruptMap { addr, reason }
}

/// `n` rounded up to a multiple of 8.
#[inline]
const fn pad8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

// ---------------------------------------------------------------------------------------------
// Root and directory nodes.

/// The root's header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RootHeader {
    pub(super) seed: u64,
    pub(super) depth_bits_max: u8,
}

/// Decodes and checks the root's header.
pub(super) fn root_header(addr: Addr, b: &[u8]) -> Result<RootHeader, Error> {
    // A root of the right length holds both words; any other fails the length check first.
    let word = |at| get_u64(b, at).unwrap_or(0);
    root_header_of(addr, b.len(), word(0), word(8))
}

/// [`root_header`] of a root object of `len` bytes whose first two payload words are `w0` and
/// `w1` (read in place: `map::ops::locate`).
pub(super) fn root_header_of(
    addr: Addr,
    len: usize,
    w0: u64,
    w1: u64,
) -> Result<RootHeader, Error> {
    if len != ROOT_BYTES {
        return Err(corrupt(addr, "root object has the wrong size"));
    }
    let b = w0.to_le_bytes();
    if u32::from_le_bytes([b[0], b[1], b[2], b[3]]) != ROOT_MAGIC {
        return Err(corrupt(addr, "root object lacks the map magic"));
    }
    if b[4] != FORMAT_VERSION {
        return Err(corrupt(addr, "root object has an unknown format version"));
    }
    let depth_bits_max = b[5];
    if depth_bits_max > DEPTH_BITS_LIMIT {
        return Err(corrupt(addr, "root object has an impossible depth limit"));
    }
    Ok(RootHeader { seed: w1, depth_bits_max })
}

/// A root object holding `header` and `slots`.
pub(super) fn encode_root(header: RootHeader, slots: &[u64; FANOUT]) -> Vec<u8> {
    let mut b = Vec::with_capacity(ROOT_BYTES);
    b.extend_from_slice(&ROOT_MAGIC.to_le_bytes());
    b.push(FORMAT_VERSION);
    b.push(header.depth_bits_max);
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&header.seed.to_le_bytes());
    for s in slots {
        b.extend_from_slice(&s.to_le_bytes());
    }
    debug_assert_eq!(b.len(), ROOT_BYTES);
    b
}

/// A non-root directory node holding `slots`.
pub(super) fn encode_node(slots: &[u64; FANOUT]) -> Vec<u8> {
    let mut b = Vec::with_capacity(NODE_BYTES);
    for s in slots {
        b.extend_from_slice(&s.to_le_bytes());
    }
    b
}

/// The size a directory node at `level` must have.
#[inline]
pub(super) fn node_bytes(level: u32) -> usize {
    if level == 0 { ROOT_BYTES } else { NODE_BYTES }
}

/// The byte offset of slot `slot` in a node at `level`.
#[inline]
pub(super) fn slot_offset(level: u32, slot: usize) -> usize {
    debug_assert!(slot < FANOUT);
    if level == 0 { ROOT_HEADER_BYTES + slot * 8 } else { slot * 8 }
}

/// The slot a hash takes at `level`: the hash's bits `[6·level, 6·level + 6)` from the top.
#[inline]
pub(super) fn slot_index(hash: u64, level: u32) -> usize {
    debug_assert!(level < LEVELS_MAX);
    ((hash << (FANOUT_BITS * level)) >> (64 - FANOUT_BITS)) as usize
}

/// Bit `depth` of a hash counted from the top (bit 0 is the most significant).
#[inline]
pub(super) fn hash_bit(hash: u64, depth: u32) -> bool {
    debug_assert!(depth < 64);
    (hash >> (63 - depth)) & 1 == 1
}

/// What a directory slot names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Slot {
    Bucket(Addr),
    Child(Addr),
}

/// Decodes a slot word; `None` for the impossible null slot.
#[inline]
pub(super) fn decode_slot(raw: u64) -> Option<Slot> {
    let addr = Addr::from_raw(raw & !SLOT_CHILD_BIT);
    if addr.is_null() {
        None
    } else if raw & SLOT_CHILD_BIT != 0 {
        Some(Slot::Child(addr))
    } else {
        Some(Slot::Bucket(addr))
    }
}

/// The slot word naming bucket `addr`.
#[inline]
pub(super) fn bucket_slot(addr: Addr) -> u64 {
    debug_assert!(addr.to_raw() & SLOT_CHILD_BIT == 0, "object addresses are 8-aligned");
    addr.to_raw()
}

/// The slot word naming child node `addr`.
#[inline]
pub(super) fn child_slot(addr: Addr) -> u64 {
    debug_assert!(addr.to_raw() & SLOT_CHILD_BIT == 0, "object addresses are 8-aligned");
    addr.to_raw() | SLOT_CHILD_BIT
}

/// Every slot of a node at `level`.
pub(super) fn node_slots(addr: Addr, level: u32, b: &[u8]) -> Result<[u64; FANOUT], Error> {
    if b.len() != node_bytes(level) {
        return Err(corrupt(addr, "directory node has the wrong size"));
    }
    let mut slots = [0u64; FANOUT];
    for (s, out) in slots.iter_mut().enumerate() {
        *out = get_u64(b, slot_offset(level, s))
            .ok_or_else(|| corrupt(addr, "directory node is truncated"))?;
    }
    Ok(slots)
}

// ---------------------------------------------------------------------------------------------
// Entries.

/// Where an entry's key and value are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Body {
    /// In the bucket, right after the entry header: key bytes, then value bytes.
    Inline,
    /// In a record object: key bytes, then value bytes.
    Record(Addr),
}

/// One decoded entry of a bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    /// Byte offset of the entry in its bucket.
    pub(super) offset: usize,
    /// Bytes the entry occupies.
    pub(super) size: usize,
    pub(super) hash: u64,
    pub(super) key_len: usize,
    pub(super) val_len: usize,
    pub(super) body: Body,
}

impl Entry {
    /// The inline key (empty for a record entry).
    #[inline]
    pub(super) fn inline_key<'b>(&self, bucket: &'b [u8]) -> &'b [u8] {
        match self.body {
            Body::Inline => {
                let start = self.offset + ENTRY_HEADER_BYTES;
                bucket.get(start..start + self.key_len).unwrap_or(&[])
            }
            Body::Record(_) => &[],
        }
    }

    /// The inline value (empty for a record entry).
    #[inline]
    pub(super) fn inline_value<'b>(&self, bucket: &'b [u8]) -> &'b [u8] {
        match self.body {
            Body::Inline => {
                let start = self.offset + ENTRY_HEADER_BYTES + self.key_len;
                bucket.get(start..start + self.val_len).unwrap_or(&[])
            }
            Body::Record(_) => &[],
        }
    }

    /// The raw bytes of the entry, to move it to another bucket unchanged.
    #[inline]
    pub(super) fn raw<'b>(&self, bucket: &'b [u8]) -> &'b [u8] {
        bucket.get(self.offset..self.offset + self.size).unwrap_or(&[])
    }
}

/// Whether a pair of these lengths is stored inline.
#[inline]
pub(super) fn is_inline(key_len: usize, val_len: usize) -> bool {
    key_len + val_len <= INLINE_BYTES_MAX
}

fn entry_header(hash: u64, key_len: usize, val_len: usize, kind: u8, out: &mut Vec<u8>) {
    debug_assert!(key_len <= KEY_BYTES_MAX);
    out.extend_from_slice(&hash.to_le_bytes());
    out.extend_from_slice(&(key_len as u16).to_le_bytes());
    out.extend_from_slice(&(val_len as u32).to_le_bytes());
    out.push(kind);
    out.push(0);
}

/// An inline entry; `key + value` must be at most [`INLINE_BYTES_MAX`].
pub(super) fn encode_inline(hash: u64, key: &[u8], value: &[u8]) -> Vec<u8> {
    debug_assert!(is_inline(key.len(), value.len()));
    let body = key.len() + value.len();
    let mut out = Vec::with_capacity(ENTRY_HEADER_BYTES + pad8(body));
    entry_header(hash, key.len(), value.len(), KIND_INLINE, &mut out);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    out.resize(ENTRY_HEADER_BYTES + pad8(body), 0);
    out
}

/// An entry whose pair lives in the record object `record`.
pub(super) fn encode_record(hash: u64, key_len: usize, val_len: usize, record: Addr) -> Vec<u8> {
    let mut out = Vec::with_capacity(RECORD_ENTRY_BYTES);
    entry_header(hash, key_len, val_len, KIND_RECORD, &mut out);
    out.extend_from_slice(&record.to_raw().to_le_bytes());
    out
}

/// Decodes the entry at `offset`, which must end at or before `end`.
fn entry_at(addr: Addr, b: &[u8], offset: usize, end: usize) -> Result<Entry, Error> {
    let bad = |reason| corrupt(addr, reason);
    if offset + ENTRY_HEADER_BYTES > end {
        return Err(bad("bucket entry header runs past the used area"));
    }
    let hash = get_u64(b, offset).ok_or_else(|| bad("bucket is truncated"))?;
    let key_len = usize::from(get_u16(b, offset + 8).ok_or_else(|| bad("bucket is truncated"))?);
    let val_len = get_u32(b, offset + 10).ok_or_else(|| bad("bucket is truncated"))? as usize;
    if key_len > KEY_BYTES_MAX {
        return Err(bad("bucket entry has an over-long key"));
    }
    let kind = b.get(offset + 14).copied().ok_or_else(|| bad("bucket is truncated"))?;
    let (size, body) = match kind {
        KIND_INLINE => {
            if !is_inline(key_len, val_len) {
                return Err(bad("inline bucket entry is too long"));
            }
            (ENTRY_HEADER_BYTES + pad8(key_len + val_len), Body::Inline)
        }
        KIND_RECORD => {
            let raw = get_u64(b, offset + ENTRY_HEADER_BYTES)
                .ok_or_else(|| bad("bucket entry runs past the bucket"))?;
            if raw == 0 {
                return Err(bad("bucket entry names the null record"));
            }
            (RECORD_ENTRY_BYTES, Body::Record(Addr::from_raw(raw)))
        }
        _ => return Err(bad("bucket entry has an unknown kind")),
    };
    if offset + size > end {
        return Err(bad("bucket entry runs past the used area"));
    }
    Ok(Entry { offset, size, hash, key_len, val_len, body })
}

/// Checks that a record object's length matches its entry.
pub(super) fn check_record(
    addr: Addr,
    b: &[u8],
    key_len: usize,
    val_len: usize,
) -> Result<(), Error> {
    if b.len() == key_len + val_len {
        Ok(())
    } else {
        Err(corrupt(addr, "record length does not match its bucket entry"))
    }
}

// ---------------------------------------------------------------------------------------------
// Buckets.

/// A bucket's header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct BucketHeader {
    pub(super) overflow: Addr,
    pub(super) count: usize,
    pub(super) used_bytes: usize,
    pub(super) depth: u8,
}

/// Decodes and checks a bucket's header.
pub(super) fn bucket_header(addr: Addr, b: &[u8]) -> Result<BucketHeader, Error> {
    let bad = |reason| corrupt(addr, reason);
    if b.len() != BUCKET_BYTES {
        return Err(bad("bucket has the wrong size"));
    }
    if get_u16(b, 14) != Some(BUCKET_MAGIC) {
        return Err(bad("bucket lacks the bucket magic"));
    }
    if b[13] != FORMAT_VERSION {
        return Err(bad("bucket has an unknown format version"));
    }
    let overflow = Addr::from_raw(get_u64(b, 0).ok_or_else(|| bad("bucket is truncated"))?);
    let count = usize::from(get_u16(b, 8).ok_or_else(|| bad("bucket is truncated"))?);
    let used_bytes = usize::from(get_u16(b, 10).ok_or_else(|| bad("bucket is truncated"))?);
    if used_bytes > ENTRY_AREA_BYTES || used_bytes % 8 != 0 {
        return Err(bad("bucket has an impossible used length"));
    }
    let depth = b[12];
    if depth > DEPTH_BITS_LIMIT {
        return Err(bad("bucket has an impossible depth"));
    }
    Ok(BucketHeader { overflow, count, used_bytes, depth })
}

/// The entries of a bucket whose header is `header`, from byte `start` (an entry boundary).
pub(super) fn entries_from<'b>(
    addr: Addr,
    b: &'b [u8],
    header: &BucketHeader,
    start: usize,
) -> Entries<'b> {
    Entries { addr, b, pos: start, end: BUCKET_HEADER_BYTES + header.used_bytes, failed: false }
}

/// Iterator over a bucket's entries; yields one error and stops if the bytes do not decode.
pub(super) struct Entries<'b> {
    addr: Addr,
    b: &'b [u8],
    pos: usize,
    end: usize,
    failed: bool,
}

impl Iterator for Entries<'_> {
    type Item = Result<Entry, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.end {
            return None;
        }
        match entry_at(self.addr, self.b, self.pos, self.end) {
            Ok(e) => {
                self.pos += e.size;
                Some(Ok(e))
            }
            Err(err) => {
                self.failed = true;
                Some(Err(err))
            }
        }
    }
}

/// A bucket read into memory for modification: its bytes, checked, and its decoded header.
#[derive(Clone, Debug)]
pub(super) struct BucketBuf {
    addr: Addr,
    bytes: Vec<u8>,
    header: BucketHeader,
}

impl BucketBuf {
    /// An empty bucket at `depth` (not yet in the heap; `Addr::NULL` until allocated).
    pub(super) fn empty(depth: u8) -> Self {
        let mut bytes = vec![0u8; BUCKET_BYTES];
        bytes[12] = depth;
        bytes[13] = FORMAT_VERSION;
        bytes[14..16].copy_from_slice(&BUCKET_MAGIC.to_le_bytes());
        let header = BucketHeader { overflow: Addr::NULL, count: 0, used_bytes: 0, depth };
        BucketBuf { addr: Addr::NULL, bytes, header }
    }

    /// Checks `bytes` read from bucket `addr`.
    pub(super) fn parse(addr: Addr, bytes: Vec<u8>) -> Result<Self, Error> {
        let header = bucket_header(addr, &bytes)?;
        Ok(BucketBuf { addr, bytes, header })
    }

    pub(super) fn addr(&self) -> Addr {
        self.addr
    }

    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub(super) fn header(&self) -> &BucketHeader {
        &self.header
    }

    /// Free bytes in the entry area.
    pub(super) fn room(&self) -> usize {
        ENTRY_AREA_BYTES - self.header.used_bytes
    }

    pub(super) fn entries(&self) -> Entries<'_> {
        entries_from(self.addr, &self.bytes, &self.header, BUCKET_HEADER_BYTES)
    }

    fn store_header(&mut self) {
        let h = self.header;
        self.bytes[0..8].copy_from_slice(&h.overflow.to_raw().to_le_bytes());
        self.bytes[8..10].copy_from_slice(&(h.count as u16).to_le_bytes());
        self.bytes[10..12].copy_from_slice(&(h.used_bytes as u16).to_le_bytes());
        self.bytes[12] = h.depth;
    }

    /// Appends an encoded entry; the caller checked [`BucketBuf::room`].
    pub(super) fn append(&mut self, entry: &[u8]) {
        debug_assert!(entry.len() <= self.room());
        debug_assert!(entry.len().is_multiple_of(8));
        let at = BUCKET_HEADER_BYTES + self.header.used_bytes;
        self.bytes[at..at + entry.len()].copy_from_slice(entry);
        self.header.used_bytes += entry.len();
        self.header.count += 1;
        self.store_header();
    }

    /// Removes `entry` (decoded from this bucket), closing the gap.
    pub(super) fn remove(&mut self, entry: &Entry) {
        let end = BUCKET_HEADER_BYTES + self.header.used_bytes;
        debug_assert!(entry.offset >= BUCKET_HEADER_BYTES);
        debug_assert!(entry.offset + entry.size <= end);
        self.bytes.copy_within(entry.offset + entry.size..end, entry.offset);
        self.bytes[end - entry.size..end].fill(0);
        self.header.used_bytes -= entry.size;
        self.header.count = self.header.count.saturating_sub(1);
        self.store_header();
    }

    pub(super) fn set_overflow(&mut self, overflow: Addr) {
        self.header.overflow = overflow;
        self.store_header();
    }

    /// Splits this bucket on hash bit `depth`: entries with the bit clear stay (first result),
    /// the others move (second); both come out at `depth + 1`.
    pub(super) fn split(&self, depth: u8) -> Result<(BucketBuf, BucketBuf), Error> {
        let mut low = BucketBuf::empty(depth + 1);
        low.addr = self.addr;
        let mut high = BucketBuf::empty(depth + 1);
        for e in self.entries() {
            let e = e?;
            let side = if hash_bit(e.hash, u32::from(depth)) { &mut high } else { &mut low };
            side.append(e.raw(&self.bytes));
        }
        Ok((low, high))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_append_remove_split_roundtrip() {
        let mut b = BucketBuf::empty(3);
        let mut hashes = Vec::new();
        for i in 0..8u64 {
            let h = i.rotate_right(4 + 1); // bit 4 from the top alternates with i's low bit
            hashes.push(h);
            let key = vec![i as u8; i as usize];
            if i % 3 == 0 {
                b.append(&encode_record(h, key.len(), 200, Addr::new(0, 64 * (i + 1))));
            } else {
                b.append(&encode_inline(h, &key, b"value"));
            }
        }
        let parsed = BucketBuf::parse(Addr::new(0, 64), b.bytes().to_vec()).unwrap();
        let entries: Vec<Entry> = parsed.entries().map(Result::unwrap).collect();
        assert_eq!(entries.len(), 8);
        assert_eq!(parsed.header().count, 8);
        for (i, e) in entries.iter().enumerate() {
            assert_eq!(e.hash, hashes[i]);
            if let Body::Inline = e.body {
                assert_eq!(e.inline_key(parsed.bytes()), &vec![i as u8; i][..]);
                assert_eq!(e.inline_value(parsed.bytes()), b"value");
            }
        }
        let mut removed = parsed.clone();
        removed.remove(&entries[2]);
        let left: Vec<u64> = removed.entries().map(|e| e.unwrap().hash).collect();
        assert_eq!(left.len(), 7);
        assert!(!left.contains(&hashes[2]));
        assert_eq!(removed.room(), parsed.room() + entries[2].size);

        let (low, high) = parsed.split(4).unwrap();
        assert_eq!(low.header().depth, 5);
        assert_eq!(low.header().count + high.header().count, 8);
        assert!(low.entries().all(|e| !hash_bit(e.unwrap().hash, 4)));
        assert!(high.entries().all(|e| hash_bit(e.unwrap().hash, 4)));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let a = Addr::new(0, 64);
        let mut b = BucketBuf::empty(0);
        b.append(&encode_inline(1, b"k", b"v"));
        let good = b.bytes().to_vec();
        // Every single-byte corruption of the header and first entry decodes or errs cleanly.
        for i in 0..40 {
            for v in [0u8, 1, 0x7F, 0xFF] {
                let mut bad = good.clone();
                bad[i] = v;
                if let Ok(p) = BucketBuf::parse(a, bad) {
                    for e in p.entries().map_while(Result::ok) {
                        let _ = (e.inline_key(p.bytes()), e.inline_value(p.bytes()));
                    }
                }
            }
        }
        assert!(BucketBuf::parse(a, vec![0; 10]).is_err());
        assert!(root_header(a, &[0; ROOT_BYTES]).is_err());
        assert!(node_slots(a, 1, &[0; 8]).is_err());
    }

    #[test]
    fn slots_and_bits() {
        let h = 0b101010_000001_u64 << 52;
        assert_eq!(slot_index(h, 0), 0b101010);
        assert_eq!(slot_index(h, 1), 0b000001);
        assert!(hash_bit(h, 0));
        assert!(!hash_bit(h, 1));
        assert!(hash_bit(h, 11));
        let a = Addr::new(3, 4096);
        assert_eq!(decode_slot(bucket_slot(a)), Some(Slot::Bucket(a)));
        assert_eq!(decode_slot(child_slot(a)), Some(Slot::Child(a)));
        assert_eq!(decode_slot(0), None);
        assert_eq!(decode_slot(1), None);
        let header = RootHeader { seed: 9, depth_bits_max: 12 };
        let root = encode_root(header, &[bucket_slot(a); FANOUT]);
        assert_eq!(root_header(a, &root).unwrap(), header);
        assert_eq!(node_slots(a, 0, &root).unwrap(), [bucket_slot(a); FANOUT]);
    }
}
