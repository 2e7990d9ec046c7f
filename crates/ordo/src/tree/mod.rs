//! # A transactional B+tree of bytes, built from heap objects
//!
//! [`BTree`] maps byte-string keys to byte-string values in lexicographic key order, with
//! point operations and range scans in both directions. As in FaRM, the tree is nothing but
//! ordinary heap objects — fixed-size nodes and out-of-line values — read and written through
//! the caller's [`Tx`]. Every operation is part of the caller's transaction: tree operations, map
//! operations and raw object accesses commit or abort together. Under the default strict
//! serializability with opacity every attempt, even one that will abort, sees one consistent
//! snapshot of the tree, so there are no latches, no node versions or incarnations, and no
//! fence keys to re-check against concurrent splits: a traversal cannot observe a half-done
//! split. The code still never trusts bytes: anything that does not decode (a wrong root address,
//! corruption) is an [`Error::CorruptTree`], never a panic, and every loop has a bound.
//!
//! ## Structure
//!
//! ```text
//!                      root (stable address = the tree's identity)
//!                   +--------------------------------------+
//!    level 2        | c0 | "g" c1 | "p" c2 |               |
//!                   +--------------------------------------+
//!                     /          |            \
//!    level 1    [c0 "c" c1]  [c0 "k" c1]   [c0 "s" c1 "w" c2]
//!                 /    \       /    \         /     |     \
//!    level 0   leaf <-> leaf <-> leaf <-> leaf <-> leaf <-> leaf <-> leaf      (prev/next links)
//!               a b    c e      g h      k m      p r     s u       w z
//!                                               |
//!                                               +--> value object (a value too long to inline)
//! ```
//!
//! Every node is one heap object of the tree's node size ([`NODE_BYTES_DEFAULT`] = 4 KiB; a
//! tree can be created with smaller nodes, mainly so tests reach depth quickly). Leaves hold
//! sorted `(key, value)` entries and links to their neighbours; internal nodes hold child 0 and
//! sorted `(separator, child)` entries. All leaves are at level 0 and a child is exactly one
//! level below its parent, so every leaf is at the same depth.
//!
//! The **root never moves**: when it is over-full its entries move into two new children and it
//! becomes their parent one level up; when an internal root is left with one child, it takes the
//! child's entries (and level) and the child is freed. The handle is therefore a plain `Copy`
//! [`Addr`] that stays valid for the tree's life, and the root object doubles as the tree's
//! descriptor: the node size is its length, from which every limit follows.
//!
//! ## Layout, byte by byte (all integers little-endian; `FORMAT_VERSION` = 1)
//!
//! **Node** (`node_bytes`, 256 B..=32 KiB; all nodes of a tree have the root's size):
//! ```text
//! 0..2    magic "BT"                   2    format version (1)        3   level (0 = leaf, < 32)
//! 4..6    count: entries               6..8 data end: one past the last entry byte
//! 8..16   leaf: previous leaf (0 = first)     internal: child 0 (never 0)
//! 16..24  leaf: next leaf (0 = last)          internal: zero
//! 24..    count slots of 2 bytes: the offset of each entry, in key order
//! ..      the entries, packed in slot order right after the slots, up to the data end
//! ..end   zeros
//! ```
//! An entry's length is the distance to the next slot's offset (or to the data end), and must be
//! exactly what its own header says. The node's **used** bytes are `data end - 24`: slots plus
//! entries; its **capacity** is `node_bytes - 24`.
//!
//! **Leaf entry**:
//! ```text
//! 0..2    key length k (<= key limit)   2   kind: 0 inline, 1 out of line   3   zero
//! 4..8    value length v
//! 8..8+k  key bytes
//! inline:       8+k..8+k+v  value bytes
//! out of line:  8+k..16+k   address of the value object (exactly v >= 1 bytes)
//! ```
//! A pair is inline exactly when `k + v <=` the inline limit ([`INLINE_BYTES_MAX`] = 256 with the
//! default node size) or `v = 0`, so an entry's form is a function of its lengths.
//!
//! **Internal entry**: `0..2` separator length `k`, `2..10` child address, `10..10+k` separator.
//! Child 0 holds the keys below the first separator; the child of entry `i` holds the keys from
//! separator `i` (inclusive) to separator `i+1` (exclusive).
//!
//! ## Limits
//! * **Keys** up to [`KEY_BYTES_MAX`] = 512 bytes with default nodes; the empty key is a valid
//!   key (the smallest). Smaller nodes lower the limit ([`TreeOptions::key_bytes_max`]: 40 bytes
//!   for 256-byte nodes): every entry, slot included, must fit in a quarter of the capacity.
//! * **Values** up to [`VALUE_BYTES_MAX`] (the largest heap object). Longer pairs than the inline
//!   limit keep their value in its own object, so leaves stay dense and an update of a long value
//!   to one of the same length writes only the value object.
//! * Oversized keys and values are refused with [`Error::KeyTooLarge`] /
//!   [`Error::ValueTooLarge`] before anything is written: the tree and the transaction are
//!   unchanged and usable.
//!
//! ## Invariants (each operation keeps them within its transaction; [`BTree::check_invariants`]
//! verifies them all)
//! 1. Every node decodes: magic, version, size, packed slots, exact entry lengths, zero tail.
//! 2. Keys within a node strictly increase. The keys of the subtree of child `i` lie in
//!    `[separator i-1, separator i)`, with the parent's own range at the ends (fence keys are
//!    not stored; they are the separators on the path, checked top-down).
//! 3. A child's level is its parent's minus one; leaves are at level 0, so all leaves have the
//!    same depth.
//! 4. Every non-root node uses at least `capacity / 4` bytes and at most its capacity; an
//!    internal root has at least two children; only a leaf root may be empty.
//! 5. The leaves, in key order, form a doubly linked list: the first has no previous leaf, the
//!    last no next leaf, and `next(a) = b` iff `prev(b) = a`.
//! 6. Each out-of-line value object exists and has the length its entry records; a pair is inline
//!    iff it fits the inline limit; keys respect the tree's key limit. No node is reachable twice.
//!
//! ## Fill bounds
//! Let `C` be the capacity and `E <= C/4` the largest entry with its slot. A node overflows only
//! by one entry (an insert, a longer replacement value, a separator from a child split or a
//! longer separator from a child redistribution), so an over-full list has `C < T <= C + E`
//! bytes and splits into halves of `T/2 ± E/2`: each within `(3C/8, 3C/4]` for a leaf. An
//! internal split moves its middle entry up, and its halves still exceed `T/2 - E > C/4`. A
//! node whose last entry the update just added (a key range growing at its end: an id sequence,
//! TPC-C's orders per district) splits unevenly instead: the right node takes the shortest
//! suffix of at least `C/4` bytes (under `C/4 + E`), the left keeps the rest (over
//! `C - E - C/4 + 1 > C/4`, at most `C`), so the nodes behind the growing end stay about three
//! quarters full rather than half (`appends_fill_nodes_and_random_inserts_split_evenly`). A node
//! below `C/4` is combined with an adjacent sibling (plus, for internal nodes, the separator
//! between them, pulled down): if the total fits one node they **merge** (the right node is
//! freed, the parent loses a separator); otherwise the total exceeds `C` and is divided evenly
//! like a split (**redistribution**; the parent's separator is replaced), leaving both above
//! `C/4`. Separators between leaves are the shortest prefix of the right leaf's first key that
//! is above the left leaf's last key (suffix truncation), which keeps internal nodes wide.
//!
//! ## Rebalancing
//! See `update.rs`: an update changes the leaf's entry list in memory, then settles the path
//! bottom-up — split the over-full, merge or redistribute the under-full, rewrite the parent
//! when its separators changed, stop at the first node that needs nothing more. A plain insert
//! or remove writes one leaf. A leaf split also writes the new leaf, the parent, and the old next
//! leaf (its back link); a merge writes the survivor, frees the right node, and writes the parent
//! and the following leaf's back link.
//!
//! ## Read, then change: the memo
//! A transaction that looks a key up and then changes it (a query, then a reservation) would
//! descend the tree twice. Each attempt keeps a small memo (`crate::txn::memo`) of the leaves its
//! lookups and updates found keys in; an operation on a remembered key reads that leaf alone and
//! uses it if the leaf still holds the key — in the attempt's one snapshot, a leaf of this tree
//! holding the key is the key's leaf. A change that would not stay within the leaf's fill bounds
//! (a split, merge or redistribution needs the path) descends after all, and every such change
//! forgets the tree's memo first, so a leaf emptied into a sibling and freed is never read as a
//! key's home (`tests/indexes/tree_memo.rs` fails without either rule).
//!
//! ## Growing ranges: the worker's hints
//! An insert into a range that grows at its end — an id sequence, TPC-C's orders of a district —
//! goes to the leaf the previous insert went to, in a later transaction, where the memo is gone.
//! Each worker keeps a few such leaves (`crate::txn::hints`) with the keys the path routed to
//! them (the separators around the path, collected by the descent) and the version the leaf got
//! when the inserting transaction committed. An insert, update or removal whose key is in a
//! hinted range reads that leaf alone, and uses it only if it still has exactly that version
//! (or, within the attempt that wrote it, is among its writes): a leaf's key range changes only
//! by a split, merge or redistribution, which writes the leaf (or frees it), so an unchanged
//! version is an unchanged range. A change that stays in the leaf keeps the hint current; one
//! that does not descends, as from the memo, and a split, merge or redistribution drops the
//! attempt's own hints of the tree. A tree whose hints keep failing (keys inserted at random)
//! goes without them for a while. `tests/indexes/tree_hints.rs` fails without each of these rules.
//!
//! ## Scans
//! [`BTree::range`] descends once to the first leaf of the range (the last, backward) and then
//! follows the leaf links, calling a closure per entry until the bound, a limit, or the closure
//! says stop. An inverted range (lower bound above upper bound) is [`Error::InvalidRange`]; equal
//! bounds are a valid range, empty unless both include the key.
//!
//! ## `len` and conflicts
//! There is deliberately no entry counter: one counter written by every insert and remove would
//! make all writers of the tree conflict with each other. [`BTree::len`] instead sums the
//! leaves' entry counts, reading every node; in a read-write transaction it conflicts with any
//! concurrent change to the tree (in a read-only one it is a snapshot and never conflicts).
//! [`BTree::is_empty`] reads only the root.
//!
//! Point operations read the path and write the leaf, so updates of different leaves do not
//! conflict; a split or merge writes the parent too, so it conflicts with every operation that
//! routed through that parent in a transaction still validating — the same cost FaRM's B-tree
//! pays. Under snapshot isolation (no read validation) the structure stays intact because every
//! structural decision writes the objects it depends on (see `update.rs`).
//!
//! ## Errors
//! Bad input ([`Error::KeyTooLarge`], [`Error::ValueTooLarge`], [`Error::InvalidRange`],
//! [`Error::Config`] for bad [`TreeOptions`]) is detected before anything is written. Any other
//! error in the middle of an update (an abort, out of memory, corruption) may leave part of the
//! update buffered in the transaction, which must then be abandoned — [`crate::Ordo::run`] does.

mod layout;
mod read;
mod update;
mod walk;

use std::ops::{Bound, ControlFlow};

use ordo_clock::Clock;

use crate::addr::Addr;
use crate::error::Error;
use crate::heap::OBJECT_BYTES_MAX;
use crate::map::KeyValue;
use crate::txn::Tx;

/// The version of the layout drawn in the module docs, stored in every node.
pub const FORMAT_VERSION: u8 = 1;
/// The node size of [`BTree::create`].
pub const NODE_BYTES_DEFAULT: usize = 4096;
/// The smallest node size a tree may have.
pub const NODE_BYTES_MIN: usize = 256;
/// The largest node size a tree may have (slot offsets are 16-bit).
pub const NODE_BYTES_MAX: usize = 32 * 1024;
/// The longest key of any tree; trees with small nodes have a lower limit
/// ([`TreeOptions::key_bytes_max`]).
pub const KEY_BYTES_MAX: usize = 512;
/// The longest value: the largest heap object.
pub const VALUE_BYTES_MAX: usize = OBJECT_BYTES_MAX;
/// Pairs with `key + value` up to this many bytes (and pairs with an empty value) are stored
/// inside their leaf; smaller nodes lower it so that an entry stays within a quarter of a node.
pub const INLINE_BYTES_MAX: usize = 256;

/// How a tree is created. The node size is the root object's length and never changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeOptions {
    /// Bytes of every node object, in `NODE_BYTES_MIN..=NODE_BYTES_MAX`.
    pub node_bytes: usize,
}

impl Default for TreeOptions {
    fn default() -> Self {
        TreeOptions { node_bytes: NODE_BYTES_DEFAULT }
    }
}

impl TreeOptions {
    /// Options with nodes of `node_bytes`.
    pub fn with_node_bytes(node_bytes: usize) -> Self {
        TreeOptions { node_bytes }
    }

    fn check(&self) -> Result<(), Error> {
        if (NODE_BYTES_MIN..=NODE_BYTES_MAX).contains(&self.node_bytes) {
            Ok(())
        } else {
            Err(Error::Config(format!(
                "tree node_bytes = {} is outside {NODE_BYTES_MIN}..={NODE_BYTES_MAX}",
                self.node_bytes
            )))
        }
    }

    /// The longest key a tree with these options takes ([`KEY_BYTES_MAX`] for default nodes).
    /// Returns 0 for options outside the valid range.
    pub fn key_bytes_max(&self) -> usize {
        match self.check() {
            Ok(()) => layout::Geometry::of(self.node_bytes).key_max,
            Err(_) => 0,
        }
    }

    /// The longest `key + value` stored inline ([`INLINE_BYTES_MAX`] for default nodes).
    /// Returns 0 for options outside the valid range.
    pub fn inline_bytes_max(&self) -> usize {
        match self.check() {
            Ok(()) => layout::Geometry::of(self.node_bytes).inline_max,
            Err(_) => 0,
        }
    }
}

/// The order of a range scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Ascending keys, following `next` links.
    Forward,
    /// Descending keys, following `prev` links.
    Backward,
}

/// The shape of a tree, as measured by [`BTree::check_invariants`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeStats {
    /// Levels, leaves included (1 for a tree that is a single leaf).
    pub depth: usize,
    /// Internal nodes, the root included when it is one.
    pub internal_nodes: usize,
    /// Leaves.
    pub leaves: usize,
    /// Entries (key–value pairs).
    pub entries: usize,
    /// Values stored in their own object.
    pub out_of_line_values: usize,
    /// Slot and entry bytes used over all nodes (fill = `bytes_used / (nodes × capacity)`).
    pub bytes_used: usize,
    /// Bytes of each node.
    pub node_bytes: usize,
}

impl TreeStats {
    /// All nodes.
    pub fn nodes(&self) -> usize {
        self.internal_nodes + self.leaves
    }

    /// Average fill of the nodes' capacity, in `0.0..=1.0`.
    pub fn fill(&self) -> f64 {
        let capacity = self.nodes() * self.node_bytes.saturating_sub(layout::HEADER_BYTES);
        if capacity == 0 { 0.0 } else { self.bytes_used as f64 / capacity as f64 }
    }
}

/// What [`BTree::update`] does with a key, decided from its current value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Leave the key as it is (absent or with its value); nothing is written.
    Keep,
    /// Set the key to this value, inserting it if absent.
    Set(Vec<u8>),
    /// Remove the key (nothing, if it is absent).
    Remove,
}

/// A transactional B+tree from byte strings to byte strings in lexicographic key order; a `Copy`
/// handle naming its root node, whose address never changes. See the [module docs](self) for the
/// structure, layout and costs.
///
/// ```
/// use std::ops::{Bound, ControlFlow};
/// use ordo::{Config, Ordo, tree::{BTree, Direction}};
/// use ordo_clock::LogicalClock;
///
/// let db = Ordo::with_clock(Config::default(), LogicalClock::new())?;
/// let tree = db.run(|tx| BTree::create(tx))?;
/// db.run(|tx| {
///     for (k, v) in [("apple", "red"), ("banana", "yellow"), ("cherry", "dark red")] {
///         tree.insert(tx, k.as_bytes(), v.as_bytes())?;
///     }
///     Ok::<_, ordo::Error>(())
/// })?;
/// assert_eq!(db.run(|tx| tree.get(tx, b"banana"))?, Some(b"yellow".to_vec()));
/// // Keys from "b" on, in descending order.
/// let mut keys = Vec::new();
/// db.run(|tx| {
///     keys.clear();
///     tree.range(tx, Bound::Included(b"b"), Bound::Unbounded, Direction::Backward, None, |k, _| {
///         keys.push(k.to_vec());
///         ControlFlow::Continue(())
///     })
/// })?;
/// assert_eq!(keys, [b"cherry".to_vec(), b"banana".to_vec()]);
/// assert_eq!(db.run(|tx| tree.remove(tx, b"apple"))?, Some(b"red".to_vec()));
/// assert_eq!(db.run(|tx| tree.len(tx))?, 2);
/// # Ok::<(), ordo::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BTree {
    root: Addr,
}

impl BTree {
    /// Creates an empty tree with default nodes (4 KiB). It exists once `tx` commits.
    pub fn create<C: Clock>(tx: &mut Tx<'_, C>) -> Result<Self, Error> {
        Self::create_with(tx, TreeOptions::default())
    }

    /// [`BTree::create`] with explicit options; [`Error::Config`] if they are out of range.
    pub fn create_with<C: Clock>(tx: &mut Tx<'_, C>, options: TreeOptions) -> Result<Self, Error> {
        Ok(BTree { root: walk::create(tx, options)? })
    }

    /// The tree whose root node is `root`. Nothing is read here: operations on an address that is
    /// not a tree root fail with [`Error::CorruptTree`] (or the engine's address errors).
    pub fn open(root: Addr) -> Self {
        BTree { root }
    }

    /// The root node's address, to store and [`BTree::open`] later.
    pub fn root(&self) -> Addr {
        self.root
    }

    /// The value of `key`, copied out.
    ///
    /// # Conflicts
    /// Reads one node per level and, for a long value, its value object.
    pub fn get<C: Clock>(&self, tx: &mut Tx<'_, C>, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        read::get_with(tx, self.root, key, <[u8]>::to_vec)
    }

    /// Runs `f` on the value of `key` in place, without copying it out.
    pub fn get_with<C: Clock, R>(
        &self,
        tx: &mut Tx<'_, C>,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, Error> {
        read::get_with(tx, self.root, key, f)
    }

    /// Whether `key` is present.
    pub fn contains_key<C: Clock>(&self, tx: &mut Tx<'_, C>, key: &[u8]) -> Result<bool, Error> {
        Ok(read::get_with(tx, self.root, key, |_| ())?.is_some())
    }

    /// Sets `key` to `value`; returns the value it replaced.
    ///
    /// # Conflicts
    /// Reads the path and writes the key's leaf — or only the value object, when a long value
    /// is replaced by one of the same length. A split writes the new node, the parent (and so
    /// on up while parents split) and the following leaf's back link.
    pub fn insert<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        key: &[u8],
        value: &[u8],
    ) -> Result<Option<Vec<u8>>, Error> {
        update::insert(tx, self.root, key, value)
    }

    /// Reads `key`'s value (`None`: absent), passes it to `f`, and does what `f` returns:
    /// [`Edit::Keep`] writes nothing, [`Edit::Set`] sets the key (inserting it if absent), and
    /// [`Edit::Remove`] removes it. A read-modify-write of one key that descends the tree once,
    /// where [`BTree::get`] then [`BTree::insert`] descends twice.
    ///
    /// ```
    /// use ordo::{Config, Ordo, tree::{BTree, Edit}};
    /// use ordo_clock::LogicalClock;
    ///
    /// let db = Ordo::with_clock(Config::default(), LogicalClock::new())?;
    /// let tree = db.run(|tx| BTree::create(tx))?;
    /// // A counter: created at 1, then incremented.
    /// for _ in 0..3 {
    ///     db.run(|tx| tree.update(tx, b"hits", |old| {
    ///         let n = old.map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap_or_default()));
    ///         Edit::Set((n + 1).to_le_bytes().to_vec())
    ///     }))?;
    /// }
    /// assert_eq!(db.run(|tx| tree.get(tx, b"hits"))?, Some(3u64.to_le_bytes().to_vec()));
    /// # Ok::<(), ordo::Error>(())
    /// ```
    ///
    /// # Conflicts
    /// As [`BTree::insert`] or [`BTree::remove`] for what `f` returns; [`Edit::Keep`] reads the
    /// path, the leaf and a long value's object, and writes nothing.
    pub fn update<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        key: &[u8],
        f: impl FnOnce(Option<&[u8]>) -> Edit,
    ) -> Result<(), Error> {
        update::update(tx, self.root, key, f)
    }

    /// Removes `key`; returns its value.
    ///
    /// # Conflicts
    /// Reads the path and writes the key's leaf (nothing, if the key is absent). A leaf left
    /// below a quarter full is merged with or refilled from a sibling: both are written, with
    /// the parent and possibly a neighbouring leaf's back link.
    pub fn remove<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, Error> {
        update::remove(tx, self.root, key)
    }

    /// Calls `f(key, value)` on the entries with keys between `lo` and `hi`, in ascending
    /// (`Forward`) or descending (`Backward`) order, until `f` returns
    /// [`ControlFlow::Break`] or `limit` entries were visited. Returns how many entries `f` was
    /// called with.
    ///
    /// Bounds may be longer than the key limit. [`Error::InvalidRange`] when `lo`'s key is
    /// above `hi`'s; equal keys are valid (an empty range unless both bounds are `Included`).
    ///
    /// # Conflicts
    /// Reads the path to the first leaf, every leaf it visits and the value objects of long
    /// values. In a read-write transaction it conflicts with changes to those leaves.
    pub fn range<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        direction: Direction,
        limit: Option<usize>,
        f: impl FnMut(&[u8], &[u8]) -> ControlFlow<()>,
    ) -> Result<usize, Error> {
        read::range(tx, self.root, lo, hi, direction, limit, f)
    }

    /// [`BTree::range`], collecting the `(key, value)` pairs.
    pub fn range_entries<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        direction: Direction,
        limit: Option<usize>,
    ) -> Result<Vec<KeyValue>, Error> {
        let mut out = Vec::new();
        read::range(tx, self.root, lo, hi, direction, limit, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            ControlFlow::Continue(())
        })?;
        Ok(out)
    }

    /// Every `(key, value)` pair in key order.
    pub fn entries<C: Clock>(&self, tx: &mut Tx<'_, C>) -> Result<Vec<KeyValue>, Error> {
        self.range_entries(tx, Bound::Unbounded, Bound::Unbounded, Direction::Forward, None)
    }

    /// The entry with the smallest key.
    pub fn first<C: Clock>(&self, tx: &mut Tx<'_, C>) -> Result<Option<KeyValue>, Error> {
        let all = Bound::Unbounded;
        Ok(self.range_entries(tx, all, all, Direction::Forward, Some(1))?.pop())
    }

    /// The entry with the largest key.
    pub fn last<C: Clock>(&self, tx: &mut Tx<'_, C>) -> Result<Option<KeyValue>, Error> {
        let all = Bound::Unbounded;
        Ok(self.range_entries(tx, all, all, Direction::Backward, Some(1))?.pop())
    }

    /// The number of entries.
    ///
    /// # Conflicts
    /// Reads every node (there is deliberately no shared counter; see the module docs), so in a
    /// read-write transaction it conflicts with every concurrent change to the tree.
    pub fn len<C: Clock>(&self, tx: &mut Tx<'_, C>) -> Result<usize, Error> {
        walk::len(tx, self.root)
    }

    /// Whether the tree has no entries; reads the root only.
    pub fn is_empty<C: Clock>(&self, tx: &mut Tx<'_, C>) -> Result<bool, Error> {
        walk::is_empty(tx, self.root)
    }

    /// Verifies every invariant listed in the module docs — node decoding, key order, separator
    /// ranges (fence keys), fill bounds, uniform leaf depth, sibling links, value objects — and
    /// returns the tree's shape. A violation is an [`Error::CorruptTree`] naming the node.
    /// Reads the whole tree and every value object.
    pub fn check_invariants<C: Clock>(&self, tx: &mut Tx<'_, C>) -> Result<TreeStats, Error> {
        walk::check(tx, self.root)
    }

    /// Frees every object of the tree, root included, when `tx` commits; the handle must not be
    /// used afterwards. One transaction writes the whole tree, so destroy large trees when idle.
    pub fn destroy<C: Clock>(self, tx: &mut Tx<'_, C>) -> Result<(), Error> {
        walk::destroy(tx, self.root)
    }
}
