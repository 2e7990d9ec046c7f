//! # A transactional hash map of bytes, built from heap objects
//!
//! [`HashMap`] maps byte-string keys to byte-string values. As in FaRM, the map is nothing but
//! ordinary heap objects — a root, directory nodes, buckets and records — read and written through
//! the caller's [`Tx`]. Every operation is therefore part of the caller's transaction: several map
//! operations, on one map or many, and raw object accesses commit or abort together, and the map
//! inherits the transaction's isolation. Under the default strict serializability with opacity,
//! every attempt — even one that will abort — sees one consistent snapshot of the map, so the
//! code needs no incarnation numbers and no defences against half-updated structure. It still
//! never trusts bytes: anything that does not decode (a wrong root address, corruption) is an
//! [`Error::CorruptMap`], never a panic, and every walk has a bound.
//!
//! ## Structure: a hash trie of small nodes (extendible hashing, one node at a time)
//!
//! ```text
//!   root (level 0)        node (level 1)         buckets                 records
//! +--------+---------+   +-----------------+   +-------------------+
//! | header | 64 slots|-->| 64 slots        |-->| hdr | e | e | e … |--> [key ++ value]
//! +--------+---------+   +-----------------+   +-------------------+
//!        slots 8..15 ──────────────────────────> one bucket owning a run of 8 slots
//! ```
//!
//! A 64-bit hash of the key (`map/hash.rs`) is consumed six bits per level, from the top: level
//! `ℓ` uses bits `[6ℓ, 6ℓ+6)` to pick one of a node's 64 slots. A slot names either a child node
//! (one level down) or a bucket. Every bucket has a **depth** `d`: all its keys share their top
//! `d` hash bits. A bucket hanging in a node at level `ℓ` has `6ℓ <= d <= 6ℓ+6` and owns the
//! aligned run of `64 >> (d - 6ℓ)` slots whose indexes share those bits — extendible hashing's
//! "local depth", but inside one 64-slot node rather than a global directory.
//!
//! **Growth** happens one bucket at a time, inside the inserting transaction, when a new entry
//! does not fit its bucket (`split` in `map/ops.rs`): the bucket's entries are divided on hash
//! bit `d`; those with the bit set move to a new bucket, which takes over the upper half of the
//! slot run; both end at depth `d + 1`. If the bucket owned a single slot (`d = 6ℓ+6`) it first
//! moves into a new node one level down, whose 64 slots all name it. A split writes the bucket,
//! allocates one bucket (and maybe one node), and rewrites one directory node — never the whole
//! map. There is no global rehash, no doubling, and no shared size counter, so inserts into
//! different buckets do not conflict. Splits are repeated until the entry fits; a bucket whose
//! entries all share the next bit just splits again. The map never shrinks: removing entries
//! leaves buckets and nodes in place (a later insert reuses the room).
//!
//! Beyond `depth_bits_max` hash bits (60 by default: ten levels; configurable in
//! [`MapOptions`], mainly so tests can force the case) buckets cannot split and grow **overflow
//! chains** instead. With a 64-bit hash this needs more than a bucketful of keys agreeing on 60
//! hash bits, i.e. deliberately colliding keys; the map stays correct, only slower.
//!
//! **Cost of a `get`** (YCSB: one key, a 1 KB value): one read per directory level — the root,
//! plus one 512-byte node for every further six bits of bucket depth — then one bucket read
//! (512 bytes), then at most one record read, only for a pair too long to be inline and only
//! after the 64-bit hash matched. Bucket depth grows like `log2(entries / ~14)`: up to several
//! hundred record entries the root alone is the directory (64 buckets hang from it); a million
//! take three directory reads (the root and two nodes). The directory is read in place, a
//! header and a slot word of each object (`Tx::read_view`); buckets are copied whole, which is
//! why every object is small: small buckets beat large ones.
//!
//! **`len`** sums the per-bucket counts: it walks the whole map (every node and bucket) instead of
//! reading a shared counter that every insert and remove would write — such a counter would make
//! all writers of the map conflict with each other. `is_empty` stops at the first entry found.
//!
//! ## Layout, byte by byte (all integers little-endian; `FORMAT_VERSION` = 1)
//!
//! **Root** (528 bytes; the map's identity: [`HashMap::root`]):
//! ```text
//! 0..4    magic "ORDM"            4    format version (1)      5   depth_bits_max (0..=60)
//! 6..8    zero                    8..16  hash seed
//! 16..528 64 slots, 8 bytes each
//! ```
//! **Directory node** (512 bytes): 64 slots. A **slot** is an object address; bit 0 set means
//! "child node" (addresses are 8-aligned), clear means "bucket"; a null slot is corruption.
//!
//! **Bucket** (512 bytes):
//! ```text
//! 0..8    overflow: address of the next bucket of the chain, 0 = none
//! 8..10   count of entries          10..12  used bytes of the entry area (multiple of 8)
//! 12      depth                     13      format version (1)      14..16  magic "MB"
//! 16..512 entry area: `count` entries packed from offset 16, then zeros
//! ```
//! **Entry** (8-aligned, variable size):
//! ```text
//! 0..8    hash of the key           8..10   key length (<= 1024)    10..14  value length
//! 14      kind: 0 inline, 1 record  15      zero
//! inline: 16..   key bytes, value bytes, zero padding to a multiple of 8   (16..112 bytes)
//! record: 16..24 address of the record object                              (24 bytes)
//! ```
//! **Record**: `key ++ value`, exactly `key length + value length` bytes. A pair is inline when
//! `key + value <= 96` bytes, so a bucket holds at least four entries of any size (20 records,
//! up to 31 tiny pairs).
//!
//! ## Invariants (each operation keeps them within its transaction)
//! 1. Every slot is non-null. A bucket at depth `d` in a node at level `ℓ` owns exactly the aligned
//!    run of `64 >> (d - 6ℓ)` slots with its hash prefix, and appears in no other node.
//! 2. Every key of a bucket, and of its overflow chain, has the bucket's top `d` hash bits.
//! 3. Overflow chains exist only at `d = depth_bits_max`; their buckets share the home bucket's
//!    depth, and only the home bucket of a chain may be empty (removal unlinks emptied ones).
//! 4. A key occurs at most once in its chain; the bucket `count` is the number of entries.
//! 5. A record's length is its entry's key length plus value length.
//!
//! ## Conflicts and isolation
//! A `get` reads the directory path, the bucket and maybe the record. An insert of a new key
//! writes its bucket; replacing a record value of the same length writes only the record, so
//! YCSB updates do not conflict with readers of other keys of the bucket; other replacements and
//! removals write the bucket. A split also writes one directory node: until the map's first
//! buckets have moved below the root, splits write the root, which every operation reads; later
//! the root is read-only. Under snapshot isolation (no read validation) the structure stays
//! intact because every structural decision writes the object it depends on: two inserts into
//! one bucket, or a split racing an insert, both write the bucket and one aborts; inserts into
//! an overflow chain also rewrite the chain's home bucket so that two racing inserts of one key
//! cannot land in different buckets of the chain.
//!
//! ## Errors
//! Keys longer than [`KEY_BYTES_MAX`] and values longer than [`VALUE_BYTES_MAX`] are refused with
//! [`Error::KeyTooLarge`] / [`Error::ValueTooLarge`] before anything is touched: the transaction
//! stays usable and the map unchanged. Empty keys and empty values are allowed. Any other error
//! in the middle of an operation (an abort, out of memory) may leave part of the operation
//! buffered in the transaction, which must then be abandoned — [`crate::Ordo::run`] does so.
//!
//! ## Hash
//! The hash is fixed and seeded by the root's seed (see `map/hash.rs`); it is part of the format,
//! since the map will be persisted and reopened by other processes.

mod hash;
mod layout;
mod ops;
mod verify;
mod walk;

pub use verify::MapShape;

use ordo_clock::Clock;

use crate::addr::Addr;
use crate::error::Error;
use crate::heap::OBJECT_BYTES_MAX;
use crate::txn::Tx;

/// The version of the layout drawn in the module docs, stored in the root and every bucket.
pub const FORMAT_VERSION: u8 = 1;
/// The longest key, in bytes.
pub const KEY_BYTES_MAX: usize = 1024;
/// The longest value, in bytes: a record holding the longest key and this value is the largest
/// object.
pub const VALUE_BYTES_MAX: usize = OBJECT_BYTES_MAX - KEY_BYTES_MAX;
/// The largest `depth_bits_max` a map can have: ten directory levels of six bits.
pub const DEPTH_BITS_MAX: u8 = layout::DEPTH_BITS_LIMIT;

/// A key and its value, as returned by [`HashMap::entries`].
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// How a map is created. The options are stored in its root and never change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapOptions {
    /// Seed of the key hash.
    pub seed: u64,
    /// Hash bits after which buckets stop splitting and chain instead (`0..=`[`DEPTH_BITS_MAX`]).
    /// Lowering it only makes sense to exercise overflow chains in tests.
    pub depth_bits_max: u8,
}

impl Default for MapOptions {
    fn default() -> Self {
        MapOptions { seed: hash::SEED_DEFAULT, depth_bits_max: DEPTH_BITS_MAX }
    }
}

/// A transactional hash map from byte strings to byte strings; a `Copy` handle naming its root
/// object. See the [module docs](self) for the structure and its costs.
///
/// ```
/// use ordo::{Config, Ordo, map::HashMap};
/// use ordo_clock::LogicalClock;
///
/// let db = Ordo::with_clock(Config::default(), LogicalClock::new())?;
/// let map = db.run(|tx| HashMap::create(tx, 0))?;
/// let counter = db.run(|tx| tx.alloc(&0u64))?;
/// // One transaction: a map insert and a raw object write commit together.
/// db.run(|tx| {
///     map.insert(tx, b"apple", b"red")?;
///     tx.write(counter, &1u64)
/// })?;
/// assert_eq!(db.run(|tx| map.get(tx, b"apple"))?, Some(b"red".to_vec()));
/// assert_eq!(db.run(|tx| map.remove(tx, b"apple"))?, Some(b"red".to_vec()));
/// assert_eq!(db.run(|tx| map.len(tx))?, 0);
/// # Ok::<(), ordo::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HashMap {
    root: Addr,
}

impl HashMap {
    /// Creates an empty map with default [`MapOptions`], sized for about `capacity_hint`
    /// entries (the directory is built up to 2^16 buckets; beyond, the map grows by splitting).
    /// The map exists once `tx` commits.
    pub fn create<C: Clock>(tx: &mut Tx<'_, C>, capacity_hint: usize) -> Result<Self, Error> {
        Self::create_with(tx, capacity_hint, MapOptions::default())
    }

    /// [`HashMap::create`] with explicit options; [`Error::Config`] if they are out of range.
    pub fn create_with<C: Clock>(
        tx: &mut Tx<'_, C>,
        capacity_hint: usize,
        options: MapOptions,
    ) -> Result<Self, Error> {
        Ok(HashMap { root: walk::create(tx, capacity_hint, options)? })
    }

    /// The map whose root object is `root`. Nothing is read here: operations on an address that
    /// is not a map root fail with [`Error::CorruptMap`] (or the engine's address errors).
    pub fn open(root: Addr) -> Self {
        HashMap { root }
    }

    /// The root object's address, to store and [`HashMap::open`] later.
    pub fn root(&self) -> Addr {
        self.root
    }

    /// The value of `key`, copied out.
    ///
    /// # Conflicts
    /// Reads the directory path, the key's bucket and, for a long pair, its record.
    pub fn get<C: Clock>(&self, tx: &mut Tx<'_, C>, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        ops::get_with(tx, self.root, key, <[u8]>::to_vec)
    }

    /// Runs `f` on the value of `key` in place, without copying it out.
    pub fn get_with<C: Clock, R>(
        &self,
        tx: &mut Tx<'_, C>,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, Error> {
        ops::get_with(tx, self.root, key, f)
    }

    /// Whether `key` is present.
    pub fn contains_key<C: Clock>(&self, tx: &mut Tx<'_, C>, key: &[u8]) -> Result<bool, Error> {
        Ok(ops::get_with(tx, self.root, key, |_| ())?.is_some())
    }

    /// Sets `key` to `value`; returns the value it replaced.
    ///
    /// # Conflicts
    /// Writes the key's bucket — or only its record, when a long value is replaced by one of the
    /// same length — and, when the bucket is full, splits it (writing one directory node too).
    pub fn insert<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        key: &[u8],
        value: &[u8],
    ) -> Result<Option<Vec<u8>>, Error> {
        ops::insert(tx, self.root, key, value)
    }

    /// Removes `key`; returns its value.
    pub fn remove<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, Error> {
        ops::remove(tx, self.root, key)
    }

    /// The number of entries.
    ///
    /// # Conflicts
    /// Reads every directory node and bucket (there is deliberately no shared counter), so in a
    /// read-write transaction it conflicts with every concurrent change to the map.
    pub fn len<C: Clock>(&self, tx: &mut Tx<'_, C>) -> Result<usize, Error> {
        walk::len(tx, self.root)
    }

    /// Whether the map has no entries; reads buckets until it finds one that is not empty.
    pub fn is_empty<C: Clock>(&self, tx: &mut Tx<'_, C>) -> Result<bool, Error> {
        walk::is_empty(tx, self.root)
    }

    /// Calls `f(key, value)` for every entry, in hash order (stable for a given content and
    /// seed, unrelated to key order). Reads the whole map, like [`HashMap::len`].
    pub fn for_each<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), Error> {
        walk::for_each(tx, self.root, f)
    }

    /// Every `(key, value)` pair, in hash order.
    pub fn entries<C: Clock>(&self, tx: &mut Tx<'_, C>) -> Result<Vec<KeyValue>, Error> {
        let mut out = Vec::new();
        walk::for_each(tx, self.root, |k, v| out.push((k.to_vec(), v.to_vec())))?;
        Ok(out)
    }

    /// Checks every invariant of the [module docs](self) — slot runs, depths, hash prefixes,
    /// counts, record lengths, unique keys, chains only at the depth limit — and returns the
    /// map's shape; [`Error::CorruptMap`] names the first object that breaks one. Reads the whole
    /// map and every record.
    pub fn verify<C: Clock>(&self, tx: &mut Tx<'_, C>) -> Result<MapShape, Error> {
        verify::verify(tx, self.root)
    }

    /// Frees every object of the map, root included, when `tx` commits; the handle must not be
    /// used afterwards. One transaction writes the whole map, so destroy large maps when idle.
    pub fn destroy<C: Clock>(self, tx: &mut Tx<'_, C>) -> Result<(), Error> {
        walk::destroy(tx, self.root)
    }
}
