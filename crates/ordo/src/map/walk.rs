//! Whole-map operations: building a new map, and walks over every bucket (`len`, iteration,
//! `destroy`). A walk reads every directory node and every bucket, so inside a read-write
//! transaction it conflicts with any concurrent change to the map; in a read-only transaction it
//! is a consistent snapshot at the read timestamp and never validates.

use std::collections::HashSet;

use ordo_clock::Clock;

use crate::addr::Addr;
use crate::error::Error;
use crate::txn::Tx;

use super::MapOptions;
use super::layout::{
    Body, BucketBuf, BucketHeader, DEPTH_BITS_LIMIT, FANOUT, FANOUT_BITS, LEVELS_MAX, RootHeader,
    Slot, bucket_header, bucket_slot, check_record, child_slot, corrupt, decode_slot, encode_node,
    encode_root, node_slots, root_header,
};
use super::ops::CHAIN_BUCKETS_MAX;

/// Entries per bucket assumed when sizing a new map from its capacity hint (a bucket holds 20
/// record entries or ~12 small inline ones; splits leave buckets about 70% full).
const HINT_ENTRIES_PER_BUCKET: usize = 8;
/// The deepest directory a capacity hint builds up front: 2^16 buckets (32 MiB).
const CREATE_DEPTH_MAX: u8 = 16;

/// Allocates a new map's root, directory and buckets; returns the root.
pub(super) fn create<C: Clock>(
    tx: &mut Tx<'_, C>,
    capacity_hint: usize,
    options: MapOptions,
) -> Result<Addr, Error> {
    if options.depth_bits_max > DEPTH_BITS_LIMIT {
        return Err(Error::Config(format!(
            "map depth_bits_max = {} exceeds {DEPTH_BITS_LIMIT}",
            options.depth_bits_max
        )));
    }
    let depth = initial_depth(capacity_hint).min(options.depth_bits_max);
    let slots = build(tx, 0, depth)?;
    let header = RootHeader { seed: options.seed, depth_bits_max: options.depth_bits_max };
    tx.alloc_bytes(&encode_root(header, &slots))
}

/// The bucket depth that gives about `capacity_hint / HINT_ENTRIES_PER_BUCKET` buckets.
fn initial_depth(capacity_hint: usize) -> u8 {
    let buckets = capacity_hint.div_ceil(HINT_ENTRIES_PER_BUCKET).max(1);
    let depth = buckets.checked_next_power_of_two().map_or(usize::BITS, |p| p.trailing_zeros());
    depth.min(u32::from(CREATE_DEPTH_MAX)) as u8
}

/// The slots of a node at `level` of a complete directory whose buckets all have `depth`.
fn build<C: Clock>(tx: &mut Tx<'_, C>, level: u32, depth: u8) -> Result<[u64; FANOUT], Error> {
    let mut slots = [0u64; FANOUT];
    let base = FANOUT_BITS * level;
    let depth = u32::from(depth);
    debug_assert!(depth >= base);
    if depth <= base + FANOUT_BITS {
        let width = FANOUT >> (depth - base);
        for run in slots.chunks_mut(width) {
            let bucket = tx.alloc_bytes(BucketBuf::empty(depth as u8).bytes())?;
            run.fill(bucket_slot(bucket));
        }
    } else {
        for slot in &mut slots {
            let child = build(tx, level + 1, depth as u8)?;
            *slot = child_slot(tx.alloc_bytes(&encode_node(&child))?);
        }
    }
    Ok(slots)
}

/// Every directory node and every chain's home bucket, in hash order.
#[derive(Default)]
struct Tree {
    nodes: Vec<Addr>,
    heads: Vec<Addr>,
    /// The nodes visited: a node reachable twice (only possible in a corrupt map) would make
    /// the walk exponential, so it is refused.
    seen: HashSet<Addr>,
}

fn tree<C: Clock>(tx: &mut Tx<'_, C>, root: Addr) -> Result<Tree, Error> {
    let mut tree = Tree::default();
    visit(tx, root, 0, &mut tree)?;
    Ok(tree)
}

/// Adds `node` (at `level`) and everything below it to `tree`. Recursion depth is bounded by
/// [`LEVELS_MAX`].
fn visit<C: Clock>(
    tx: &mut Tx<'_, C>,
    node: Addr,
    level: u32,
    tree: &mut Tree,
) -> Result<(), Error> {
    let slots = tx.read_with(node, |b| {
        if level == 0 {
            root_header(node, b)?;
        }
        node_slots(node, level, b)
    })??;
    if !tree.seen.insert(node) {
        return Err(corrupt(node, "directory node is reachable twice"));
    }
    tree.nodes.push(node);
    let mut previous = 0;
    for raw in slots {
        // A bucket owns a run of adjacent slots: visit it once.
        if raw == previous {
            continue;
        }
        previous = raw;
        match decode_slot(raw) {
            None => return Err(corrupt(node, "directory slot is null")),
            Some(Slot::Bucket(bucket)) => tree.heads.push(bucket),
            Some(Slot::Child(child)) => {
                if level + 1 >= LEVELS_MAX {
                    return Err(corrupt(node, "directory is deeper than the level limit"));
                }
                visit(tx, child, level + 1, tree)?;
            }
        }
    }
    Ok(())
}

/// Calls `f` with each bucket of the chain starting at `head`, in order.
fn for_each_bucket<C: Clock>(
    tx: &mut Tx<'_, C>,
    head: Addr,
    mut f: impl FnMut(&mut Tx<'_, C>, &BucketBuf) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut addr = head;
    for _ in 0..CHAIN_BUCKETS_MAX {
        let buf = BucketBuf::parse(addr, tx.read_bytes(addr)?)?;
        f(tx, &buf)?;
        addr = buf.header().overflow;
        if addr.is_null() {
            return Ok(());
        }
    }
    Err(corrupt(head, "overflow chain is longer than the chain limit"))
}

/// Calls `f` with the header of each bucket of the chain at `head` (reading headers only, no
/// copy); stops early, returning `false`, when `f` does.
fn chain_headers<C: Clock>(
    tx: &mut Tx<'_, C>,
    head: Addr,
    mut f: impl FnMut(&BucketHeader) -> bool,
) -> Result<bool, Error> {
    let mut addr = head;
    for _ in 0..CHAIN_BUCKETS_MAX {
        let header = tx.read_with(addr, |b| bucket_header(addr, b))??;
        if !f(&header) {
            return Ok(false);
        }
        addr = header.overflow;
        if addr.is_null() {
            return Ok(true);
        }
    }
    Err(corrupt(head, "overflow chain is longer than the chain limit"))
}

/// The number of entries: the sum of the buckets' counts.
pub(super) fn len<C: Clock>(tx: &mut Tx<'_, C>, root: Addr) -> Result<usize, Error> {
    let tree = tree(tx, root)?;
    let mut total = 0usize;
    for head in tree.heads {
        chain_headers(tx, head, |h| {
            total += h.count;
            true
        })?;
    }
    Ok(total)
}

/// Whether no bucket holds an entry; stops at the first that does. (Overflow buckets are never
/// empty, but a home bucket may be while its chain is not.)
pub(super) fn is_empty<C: Clock>(tx: &mut Tx<'_, C>, root: Addr) -> Result<bool, Error> {
    let tree = tree(tx, root)?;
    for head in tree.heads {
        if !chain_headers(tx, head, |h| h.used_bytes == 0)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Calls `f(key, value)` for every entry, in hash order.
pub(super) fn for_each<C: Clock>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    mut f: impl FnMut(&[u8], &[u8]),
) -> Result<(), Error> {
    let tree = tree(tx, root)?;
    for head in tree.heads {
        for_each_bucket(tx, head, |tx, buf| {
            for e in buf.entries() {
                let e = e?;
                match e.body {
                    Body::Inline => f(e.inline_key(buf.bytes()), e.inline_value(buf.bytes())),
                    Body::Record(record) => tx.read_with(record, |b| {
                        check_record(record, b, e.key_len, e.val_len)?;
                        let (k, v) = b.split_at(e.key_len);
                        f(k, v);
                        Ok::<_, Error>(())
                    })??,
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Frees every object of the map: records, buckets, directory nodes and the root.
pub(super) fn destroy<C: Clock>(tx: &mut Tx<'_, C>, root: Addr) -> Result<(), Error> {
    let tree = tree(tx, root)?;
    for head in tree.heads {
        for_each_bucket(tx, head, |tx, buf| {
            for e in buf.entries() {
                if let Body::Record(record) = e?.body {
                    tx.free(record)?;
                }
            }
            tx.free(buf.addr())
        })?;
    }
    for node in tree.nodes {
        tx.free(node)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_hints_size_the_directory() {
        assert_eq!(initial_depth(0), 0);
        assert_eq!(initial_depth(8), 0);
        assert_eq!(initial_depth(9), 1);
        assert_eq!(initial_depth(1000), 7);
        assert_eq!(initial_depth(usize::MAX), CREATE_DEPTH_MAX);
    }
}
