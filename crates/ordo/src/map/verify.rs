//! A full structural check of a map: every invariant of the module essay, re-derived from the
//! bytes. Tests run it after random operation sequences; tools can run it as an `fsck`.

use std::collections::HashSet;

use ordo_clock::Clock;

use crate::addr::Addr;
use crate::error::Error;
use crate::txn::Tx;

use super::hash::hash;
use super::layout::{
    Body, BucketBuf, FANOUT, FANOUT_BITS, LEVELS_MAX, RootHeader, Slot, check_record, corrupt,
    decode_slot, is_inline, node_slots, root_header,
};
use super::ops::CHAIN_BUCKETS_MAX;

/// What [`super::HashMap::verify`] found: the map's shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapShape {
    /// Entries.
    pub entries: usize,
    /// Directory nodes, the root included.
    pub nodes: usize,
    /// Home buckets (one per chain).
    pub buckets: usize,
    /// Overflow buckets, beyond the home buckets.
    pub overflow_buckets: usize,
    /// Entries whose pair lives in a record object.
    pub records: usize,
    /// The deepest bucket's depth, in hash bits.
    pub depth_max: u8,
    /// The deepest directory level in use (0 = only the root).
    pub level_max: u32,
}

struct Verifier {
    header: RootHeader,
    shape: MapShape,
    seen: HashSet<Addr>,
}

pub(super) fn verify<C: Clock>(tx: &mut Tx<'_, C>, root: Addr) -> Result<MapShape, Error> {
    let header = tx.read_with(root, |b| root_header(root, b))??;
    let mut v = Verifier { header, shape: MapShape::default(), seen: HashSet::new() };
    v.node(tx, root, 0, 0)?;
    Ok(v.shape)
}

impl Verifier {
    /// Checks `node` at `level`, reached by hash prefix `path` (`6 * level` bits).
    fn node<C: Clock>(
        &mut self,
        tx: &mut Tx<'_, C>,
        node: Addr,
        level: u32,
        path: u64,
    ) -> Result<(), Error> {
        if !self.seen.insert(node) {
            return Err(corrupt(node, "directory node is reachable twice"));
        }
        self.shape.nodes += 1;
        self.shape.level_max = self.shape.level_max.max(level);
        let slots = tx.read_with(node, |b| node_slots(node, level, b))??;
        let mut s = 0;
        while s < FANOUT {
            let prefix = (path << FANOUT_BITS) | s as u64;
            match decode_slot(slots[s]) {
                None => return Err(corrupt(node, "directory slot is null")),
                Some(Slot::Child(child)) => {
                    if level + 1 >= LEVELS_MAX {
                        return Err(corrupt(node, "directory is deeper than the level limit"));
                    }
                    self.node(tx, child, level + 1, prefix)?;
                    s += 1;
                }
                Some(Slot::Bucket(bucket)) => {
                    let depth = self.chain(tx, bucket, level, prefix)?;
                    let local = u32::from(depth) - FANOUT_BITS * level;
                    let width = FANOUT >> local;
                    if s % width != 0 || slots[s..s + width].iter().any(|r| *r != slots[s]) {
                        return Err(corrupt(node, "bucket does not own an aligned run of slots"));
                    }
                    s += width;
                }
            }
        }
        Ok(())
    }

    /// Checks the chain at `head`, hanging at `level` with slot prefix `prefix`
    /// (`6 * (level + 1)` bits); returns its depth.
    fn chain<C: Clock>(
        &mut self,
        tx: &mut Tx<'_, C>,
        head: Addr,
        level: u32,
        prefix: u64,
    ) -> Result<u8, Error> {
        let mut keys = HashSet::new();
        let mut addr = head;
        let mut depth = None;
        for i in 0..CHAIN_BUCKETS_MAX {
            if !self.seen.insert(addr) {
                return Err(corrupt(addr, "bucket is reachable twice"));
            }
            let buf = BucketBuf::parse(addr, tx.read_bytes(addr)?)?;
            let d = buf.header().depth;
            let home_depth = *depth.get_or_insert(d);
            let base = FANOUT_BITS * level;
            if u32::from(d) < base || u32::from(d) > base + FANOUT_BITS {
                return Err(corrupt(addr, "bucket depth does not match its directory level"));
            }
            if d != home_depth {
                return Err(corrupt(addr, "overflow bucket depth differs from its home's"));
            }
            if i == 0 {
                self.shape.buckets += 1;
            } else {
                self.shape.overflow_buckets += 1;
                if buf.header().used_bytes == 0 {
                    return Err(corrupt(addr, "overflow bucket is empty"));
                }
            }
            self.shape.depth_max = self.shape.depth_max.max(d);
            // The bucket's keys share the top `d` bits of the slot prefix.
            let slot_bits = FANOUT_BITS * (level + 1);
            let want = prefix >> (slot_bits - u32::from(d));
            let mut count = 0;
            for e in buf.entries() {
                let e = e?;
                count += 1;
                let key = match e.body {
                    Body::Inline => e.inline_key(buf.bytes()).to_vec(),
                    Body::Record(record) => {
                        self.shape.records += 1;
                        tx.read_with(record, |b| {
                            check_record(record, b, e.key_len, e.val_len)?;
                            Ok::<_, Error>(b[..e.key_len].to_vec())
                        })??
                    }
                };
                if (e.body == Body::Inline) != is_inline(e.key_len, e.val_len) {
                    return Err(corrupt(addr, "entry kind does not follow the inline rule"));
                }
                if hash(self.header.seed, &key) != e.hash {
                    return Err(corrupt(addr, "entry hash does not match its key"));
                }
                if d > 0 && e.hash >> (64 - u32::from(d)) != want {
                    return Err(corrupt(addr, "entry hash does not match the bucket's prefix"));
                }
                if !keys.insert(key) {
                    return Err(corrupt(addr, "key occurs twice in one chain"));
                }
            }
            if count != buf.header().count {
                return Err(corrupt(addr, "bucket count does not match its entries"));
            }
            self.shape.entries += count;
            addr = buf.header().overflow;
            if addr.is_null() {
                return Ok(home_depth);
            }
            if d < self.header.depth_bits_max {
                return Err(corrupt(addr, "overflow chain below the depth limit"));
            }
        }
        Err(corrupt(head, "overflow chain is longer than the chain limit"))
    }
}
