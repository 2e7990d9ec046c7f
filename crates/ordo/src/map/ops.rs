//! Single-key operations: locate a key's bucket, get, insert, remove, and the bucket split that
//! makes room. See the module essay of [`super`] for the layout and the invariants kept here.

use std::ops::Range;

use ordo_clock::Clock;

use crate::addr::Addr;
use crate::error::Error;
use crate::txn::Tx;

use super::hash::hash;
use super::layout::{
    BUCKET_HEADER_BYTES, Body, BucketBuf, DEPTH_BITS_LIMIT, Entry, FANOUT, FANOUT_BITS, LEVELS_MAX,
    NODE_BYTES, RootHeader, Slot, bucket_header, bucket_slot, check_record, child_slot, corrupt,
    decode_slot, encode_inline, encode_node, encode_record, entries_from, is_inline, node_bytes,
    root_header_of, slot_index, slot_offset,
};
use super::{KEY_BYTES_MAX, VALUE_BYTES_MAX};

/// The most buckets a walk follows along one overflow chain (collision re-scans included) before
/// calling the chain corrupt: a cycle can only come from corruption, but a walk must end anyway.
pub(super) const CHAIN_BUCKETS_MAX: usize = 1 << 20;
/// The most splits one insert may make: one per hash bit, plus the final placement.
const SPLITS_MAX: usize = DEPTH_BITS_LIMIT as usize + 1;

/// Where a key's bucket hangs in the directory.
#[derive(Clone, Copy, Debug)]
pub(super) struct Located {
    pub(super) header: RootHeader,
    pub(super) hash: u64,
    /// The directory node holding the slot, and its level (0 = the root).
    pub(super) node: Addr,
    pub(super) level: u32,
    /// The key's slot in `node`.
    pub(super) slot: usize,
    /// The chain's first ("home") bucket.
    pub(super) bucket: Addr,
}

pub(super) fn check_key(key: &[u8]) -> Result<(), Error> {
    if key.len() > KEY_BYTES_MAX {
        return Err(Error::KeyTooLarge { len_bytes: key.len(), max_bytes: KEY_BYTES_MAX });
    }
    Ok(())
}

fn check_value(value: &[u8]) -> Result<(), Error> {
    if value.len() > VALUE_BYTES_MAX {
        return Err(Error::ValueTooLarge { len_bytes: value.len(), max_bytes: VALUE_BYTES_MAX });
    }
    Ok(())
}

/// Walks the directory from the root to `key`'s home bucket: one read per level, in place
/// ([`Tx::read_view`]): of the root its two header words and one slot, of a directory node one
/// slot — not the 528- and 512-byte objects.
pub(super) fn locate<C: Clock>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    key: &[u8],
) -> Result<Located, Error> {
    // The header words, the hash and the slot: plain words out of the closure, which may run
    // again on a torn read; a root too short for them reads as zeros and fails the checks.
    let (len, w0, w1, h, raw) = tx.read_view(root, |v| {
        let (w0, w1) = (v.word(0).unwrap_or(0), v.word(1).unwrap_or(0));
        let h = hash(w1, key);
        let raw = v.word(slot_offset(0, slot_index(h, 0)) / 8);
        (v.len(), w0, w1, h, raw)
    })?;
    let header = root_header_of(root, len, w0, w1)?;
    let mut raw = raw.ok_or_else(|| corrupt(root, "root object is truncated"))?;
    let mut node = root;
    let mut level = 0;
    loop {
        match decode_slot(raw) {
            None => return Err(corrupt(node, "directory slot is null")),
            Some(Slot::Bucket(bucket)) => {
                let slot = slot_index(h, level);
                return Ok(Located { header, hash: h, node, level, slot, bucket });
            }
            Some(Slot::Child(child)) => {
                level += 1;
                if level >= LEVELS_MAX {
                    return Err(corrupt(node, "directory is deeper than the level limit"));
                }
                let at = slot_offset(level, slot_index(h, level)) / 8;
                let (len, word) = tx.read_view(child, |v| (v.len(), v.word(at)))?;
                if len != NODE_BYTES {
                    return Err(corrupt(child, "directory node has the wrong size"));
                }
                raw = word.ok_or_else(|| corrupt(child, "directory node is truncated"))?;
                node = child;
            }
        }
    }
}

/// What one scan of a bucket found.
enum Probe<R> {
    /// An inline entry matched; `f` ran on its value.
    Hit(R),
    /// A record entry's hash matched; its key is in the record. `next` is where to resume.
    Record { record: Addr, val_len: usize, next: usize },
    /// No match here; the next bucket of the chain (or null).
    Miss(Addr),
}

/// Finds `key` and gives `f` its value in place: the directory reads, one bucket read per chain
/// bucket (one, below the depth limit) and at most one record read (two only on a full 64-bit
/// hash collision).
pub(super) fn get_with<C: Clock, R>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    key: &[u8],
    f: impl FnOnce(&[u8]) -> R,
) -> Result<Option<R>, Error> {
    check_key(key)?;
    let loc = locate(tx, root, key)?;
    let h = loc.hash;
    let mut f = Some(f);
    let mut bucket = loc.bucket;
    let mut start = BUCKET_HEADER_BYTES;
    for _ in 0..CHAIN_BUCKETS_MAX {
        let probe = tx.read_with(bucket, |b| {
            let header = bucket_header(bucket, b)?;
            for e in entries_from(bucket, b, &header, start) {
                let e = e?;
                if e.hash != h || e.key_len != key.len() {
                    continue;
                }
                match e.body {
                    Body::Inline if e.inline_key(b) == key => {
                        return Ok(match f.take() {
                            Some(f) => Probe::Hit(f(e.inline_value(b))),
                            None => Probe::Miss(Addr::NULL),
                        });
                    }
                    Body::Inline => {}
                    Body::Record(record) => {
                        let next = e.offset + e.size;
                        return Ok(Probe::Record { record, val_len: e.val_len, next });
                    }
                }
            }
            Ok::<_, Error>(Probe::Miss(header.overflow))
        })??;
        match probe {
            Probe::Hit(r) => return Ok(Some(r)),
            Probe::Record { record, val_len, next } => {
                let hit = tx.read_with(record, |b| {
                    check_record(record, b, key.len(), val_len)?;
                    let (k, v) = b.split_at(key.len());
                    Ok::<_, Error>(if k == key { f.take().map(|f| f(v)) } else { None })
                })??;
                if hit.is_some() {
                    return Ok(hit);
                }
                start = next;
            }
            Probe::Miss(next) if next.is_null() => return Ok(None),
            Probe::Miss(next) => {
                bucket = next;
                start = BUCKET_HEADER_BYTES;
            }
        }
    }
    Err(corrupt(loc.bucket, "overflow chain is longer than the chain limit"))
}

/// A key's entry found in a loaded chain.
struct Found {
    /// Position of its bucket in [`Chain::buckets`].
    index: usize,
    entry: Entry,
    old_value: Vec<u8>,
}

/// A chain read into memory, up to the bucket holding the key searched for (or whole).
struct Chain {
    /// Never empty: the home bucket comes first.
    buckets: Vec<BucketBuf>,
    found: Option<Found>,
}

impl Chain {
    fn home(&self) -> Result<&BucketBuf, Error> {
        self.buckets.first().ok_or_else(|| corrupt(Addr::NULL, "empty chain"))
    }
}

/// Reads the chain starting at `head`, stopping at `key`'s entry if `key` is given.
fn load_chain<C: Clock>(
    tx: &mut Tx<'_, C>,
    head: Addr,
    h: u64,
    key: Option<&[u8]>,
) -> Result<Chain, Error> {
    let mut buckets = Vec::new();
    let mut addr = head;
    for _ in 0..CHAIN_BUCKETS_MAX {
        let buf = BucketBuf::parse(addr, tx.read_bytes(addr)?)?;
        if let Some(key) = key
            && let Some((entry, old_value)) = find_in(tx, &buf, h, key)?
        {
            buckets.push(buf);
            let index = buckets.len() - 1;
            return Ok(Chain { buckets, found: Some(Found { index, entry, old_value }) });
        }
        let next = buf.header().overflow;
        buckets.push(buf);
        if next.is_null() {
            return Ok(Chain { buckets, found: None });
        }
        addr = next;
    }
    Err(corrupt(head, "overflow chain is longer than the chain limit"))
}

/// `key`'s entry in one bucket and its value.
fn find_in<C: Clock>(
    tx: &mut Tx<'_, C>,
    buf: &BucketBuf,
    h: u64,
    key: &[u8],
) -> Result<Option<(Entry, Vec<u8>)>, Error> {
    for e in buf.entries() {
        let e = e?;
        if e.hash != h || e.key_len != key.len() {
            continue;
        }
        match e.body {
            Body::Inline => {
                if e.inline_key(buf.bytes()) == key {
                    return Ok(Some((e, e.inline_value(buf.bytes()).to_vec())));
                }
            }
            Body::Record(record) => {
                let value = tx.read_with(record, |b| {
                    check_record(record, b, e.key_len, e.val_len)?;
                    let (k, v) = b.split_at(e.key_len);
                    Ok::<_, Error>((k == key).then(|| v.to_vec()))
                })??;
                if let Some(value) = value {
                    return Ok(Some((e, value)));
                }
            }
        }
    }
    Ok(None)
}

/// Encodes the entry for a pair, allocating its record if it is not stored inline.
fn make_entry<C: Clock>(
    tx: &mut Tx<'_, C>,
    h: u64,
    key: &[u8],
    value: &[u8],
) -> Result<Vec<u8>, Error> {
    if is_inline(key.len(), value.len()) {
        return Ok(encode_inline(h, key, value));
    }
    let record = tx.alloc_bytes(&pair(key, value))?;
    Ok(encode_record(h, key.len(), value.len(), record))
}

fn pair(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut pair = Vec::with_capacity(key.len() + value.len());
    pair.extend_from_slice(key);
    pair.extend_from_slice(value);
    pair
}

/// Inserts or replaces; returns the value replaced.
pub(super) fn insert<C: Clock>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    key: &[u8],
    value: &[u8],
) -> Result<Option<Vec<u8>>, Error> {
    check_key(key)?;
    check_value(value)?;
    let loc = locate(tx, root, key)?;
    let mut chain = load_chain(tx, loc.bucket, loc.hash, Some(key))?;
    let Some(found) = chain.found.take() else {
        let entry = make_entry(tx, loc.hash, key, value)?;
        if !append_in_chain(tx, &mut chain, &entry)? {
            place(tx, root, key, &entry)?;
        }
        return Ok(None);
    };
    let old = found.entry;
    // Same-sized record: only the record changes, so concurrent readers of the bucket (other
    // keys) do not conflict with this update.
    if let Body::Record(record) = old.body
        && !is_inline(key.len(), value.len())
        && value.len() == old.val_len
    {
        tx.write_bytes(record, &pair(key, value))?;
        return Ok(Some(found.old_value));
    }
    let entry = make_entry(tx, loc.hash, key, value)?;
    let buf = chain
        .buckets
        .get_mut(found.index)
        .ok_or_else(|| corrupt(loc.bucket, "lost the found bucket"))?;
    buf.remove(&old);
    if let Body::Record(record) = old.body {
        tx.free(record)?;
    }
    let fits = buf.room() >= entry.len();
    if fits {
        buf.append(&entry);
    }
    // A bucket that held the old entry is not empty after the removal unless the new entry fits,
    // so no overflow bucket is left empty here.
    tx.write_bytes(buf.addr(), buf.bytes())?;
    if !fits {
        place(tx, root, key, &entry)?;
    }
    Ok(Some(found.old_value))
}

/// Appends `entry` to the first bucket of `chain` with room. A bucket other than the home one is
/// only used at the depth limit; the home bucket is then rewritten unchanged, so that two inserts
/// racing into one chain always write a common object and conflict even under snapshot isolation
/// (which does not validate reads): otherwise both could add the same key to different buckets.
fn append_in_chain<C: Clock>(
    tx: &mut Tx<'_, C>,
    chain: &mut Chain,
    entry: &[u8],
) -> Result<bool, Error> {
    let Some(index) = chain.buckets.iter().position(|b| b.room() >= entry.len()) else {
        return Ok(false);
    };
    let buf = &mut chain.buckets[index];
    buf.append(entry);
    tx.write_bytes(buf.addr(), buf.bytes())?;
    if index > 0 {
        let home = chain.home()?;
        tx.write_bytes(home.addr(), home.bytes())?;
    }
    Ok(true)
}

/// Places an encoded entry for `key` (absent from the map), splitting its bucket until there is
/// room or, at the depth limit, chaining a new overflow bucket.
fn place<C: Clock>(tx: &mut Tx<'_, C>, root: Addr, key: &[u8], entry: &[u8]) -> Result<(), Error> {
    for _ in 0..SPLITS_MAX {
        let loc = locate(tx, root, key)?;
        let mut chain = load_chain(tx, loc.bucket, loc.hash, None)?;
        if append_in_chain(tx, &mut chain, entry)? {
            return Ok(());
        }
        let home = chain.home()?;
        if home.header().depth < loc.header.depth_bits_max {
            split(tx, &loc, home)?;
            continue;
        }
        let mut extra = BucketBuf::empty(home.header().depth);
        extra.append(entry);
        let extra_addr = tx.alloc_bytes(extra.bytes())?;
        let home_addr = home.addr();
        let last = chain.buckets.last_mut().ok_or_else(|| corrupt(loc.bucket, "empty chain"))?;
        last.set_overflow(extra_addr);
        tx.write_bytes(last.addr(), last.bytes())?;
        if last.addr() != home_addr {
            let home = chain.home()?;
            tx.write_bytes(home.addr(), home.bytes())?;
        }
        return Ok(());
    }
    Err(corrupt(root, "no room for an entry after splitting to the depth limit"))
}

/// Splits the home bucket at `loc` on its next hash bit (see the module essay, "Growth").
fn split<C: Clock>(tx: &mut Tx<'_, C>, loc: &Located, home: &BucketBuf) -> Result<(), Error> {
    let depth = home.header().depth;
    if !home.header().overflow.is_null() {
        return Err(corrupt(loc.bucket, "bucket below the depth limit has an overflow chain"));
    }
    let mut node = loc.node;
    let mut level = loc.level;
    let mut slot = loc.slot;
    let mut local = u32::from(depth)
        .checked_sub(FANOUT_BITS * level)
        .filter(|l| *l <= FANOUT_BITS)
        .ok_or_else(|| corrupt(loc.bucket, "bucket depth does not match its directory level"))?;
    if local == FANOUT_BITS {
        // The bucket owns one slot: it moves into a node of its own, one level down, first.
        debug_assert!(level + 1 < LEVELS_MAX, "depth < depth_bits_max <= 6 * LEVELS_MAX");
        let child = tx.alloc_bytes(&encode_node(&[bucket_slot(loc.bucket); FANOUT]))?;
        set_slots(tx, node, level, slot..slot + 1, child_slot(child))?;
        node = child;
        level += 1;
        local = 0;
        slot = slot_index(loc.hash, level);
    }
    // The bucket owns the aligned run of `width` slots around `slot`; the upper half of the run
    // is the half whose next hash bit is 1.
    let width = FANOUT >> local;
    let first = slot & !(width - 1);
    let (low, high) = home.split(depth)?;
    tx.write_bytes(loc.bucket, low.bytes())?;
    let high_addr = tx.alloc_bytes(high.bytes())?;
    set_slots(tx, node, level, first + width / 2..first + width, bucket_slot(high_addr))
}

/// Sets `slots` of the directory node `node` (at `level`) to `raw`.
fn set_slots<C: Clock>(
    tx: &mut Tx<'_, C>,
    node: Addr,
    level: u32,
    slots: Range<usize>,
    raw: u64,
) -> Result<(), Error> {
    let mut b = tx.read_bytes(node)?;
    if b.len() != node_bytes(level) {
        return Err(corrupt(node, "directory node has the wrong size"));
    }
    for s in slots {
        let at = slot_offset(level, s);
        b[at..at + 8].copy_from_slice(&raw.to_le_bytes());
    }
    tx.write_bytes(node, &b)
}

/// Removes `key`; returns its value.
pub(super) fn remove<C: Clock>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    key: &[u8],
) -> Result<Option<Vec<u8>>, Error> {
    check_key(key)?;
    let loc = locate(tx, root, key)?;
    let mut chain = load_chain(tx, loc.bucket, loc.hash, Some(key))?;
    let Some(found) = chain.found.take() else {
        return Ok(None);
    };
    let index = found.index;
    let buf =
        chain.buckets.get_mut(index).ok_or_else(|| corrupt(loc.bucket, "lost the found bucket"))?;
    buf.remove(&found.entry);
    if let Body::Record(record) = found.entry.body {
        tx.free(record)?;
    }
    if index > 0 && buf.header().used_bytes == 0 {
        // An emptied overflow bucket is unlinked and freed (invariant: only the home bucket of a
        // chain may be empty).
        let (emptied, next) = (buf.addr(), buf.header().overflow);
        let prev = &mut chain.buckets[index - 1];
        prev.set_overflow(next);
        tx.write_bytes(prev.addr(), prev.bytes())?;
        tx.free(emptied)?;
    } else {
        tx.write_bytes(buf.addr(), buf.bytes())?;
    }
    Ok(Some(found.old_value))
}
