//! Updates: insert and remove, and the splits, merges and redistributions that keep every node
//! within its fill bounds (see the module essay of [`super`], "Fill bounds" and "Rebalancing").
//!
//! An update descends from the root to the key's leaf — routing through each internal node in the
//! worker's read buffer and keeping only its address and the child taken, copying the leaf — and
//! changes the leaf in memory. (A key this attempt found before is looked for in its remembered
//! leaf first, without the path: see [`Route::Memo`].) It then settles the path bottom-up: a node
//! whose new entries fit and are above the minimum fill is written and the update ends there —
//! the common case, which writes the leaf alone (an insert, a replacement or a removal that
//! leaves the leaf within its bounds splices the leaf's copy in place — `splice_packed`, a
//! same-length replacement just overwrites the entry — giving the bytes a rebuild from its entry
//! list would give). An over-full node is split (its parent gains a separator); an under-full
//! one is merged with or refilled from an adjacent sibling under the
//! same parent (its parent loses or changes a separator). Either way the parent's entry list
//! changes and is settled in turn (the parent is read again here, and must still route to the
//! child), up to the root, which splits in place (its entries move to two new children) or
//! collapses (an internal root with one child takes that child's entries), so
//! the root's address never changes.
//!
//! Every node an update changes a decision about is also written by it: the leaf, the siblings
//! it merges or refills, the parent whose separators change, and the neighbouring leaf whose
//! back link a split or merge moves. The internal nodes above are only read, for routing; but
//! anything that changes which keys a leaf holds (a split, merge or redistribution of it) writes
//! that leaf. Two concurrent updates that make conflicting structural decisions therefore write
//! a common object and one aborts — also under snapshot isolation, which does not validate
//! reads. (This relies on the engine never handing a transaction a slot freed after its read
//! timestamp: see `Tx::alloc_bytes`.)

use std::cmp::Ordering;

use ordo_clock::Clock;

use crate::addr::Addr;
use crate::error::Error;
use crate::txn::Tx;
use crate::txn::hints::{Bound, Range};
use crate::txn::memo::key_hash;

use super::layout::{
    EntryList, Geometry, LEVELS_MAX, NodeView, SLOT_BYTES, Value, corrupt, encode_inline,
    encode_internal, encode_out_of_line, entry_key, insert_packed, internal_entry, key_cmp,
    leaf_separator, remove_packed, replace_packed, set_link0, used_bytes,
};
use super::read::{check_key, check_level, parse_node, read_value};
use super::{Edit, KEY_BYTES_MAX, VALUE_BYTES_MAX};

/// An internal node on the path from the root, with the index of the child the path took. Its
/// bytes are not kept: they are read again only when the update reaches it (a split or an
/// underflow below it), which in one transaction gives the same version or aborts.
struct Frame {
    addr: Addr,
    index: usize,
}

/// The leaf at the end of the path, copied (the update changes the copy and writes it back): its
/// payload words, the whole node (zeros after the data end), from [`read_leaf`].
struct Leaf {
    addr: Addr,
    words: Vec<u64>,
    len_bytes: usize,
}

impl Leaf {
    fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len_bytes]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len_bytes]
    }

    /// Buffers the changed copy as the leaf's new value and gives its buffer back to the
    /// transaction.
    fn write<C: Clock>(self, tx: &mut Tx<'_, C>) -> Result<(), Error> {
        let r = tx.write_words(self.addr, &self.words, self.len_bytes);
        tx.recycle(self.words);
        r
    }
}

/// A node's new content, not yet written.
struct Pending {
    addr: Addr,
    level: u8,
    link0: Addr,
    link1: Addr,
    entries: EntryList,
    /// This update added the node's last entry: its key range grows at its end (see
    /// `EntryList::append_split_point`).
    appended: bool,
}

impl Pending {
    fn of(view: &NodeView<'_>) -> Result<Self, Error> {
        let h = &view.header;
        Ok(Pending {
            addr: view.addr,
            level: h.level,
            link0: h.link0,
            link1: h.link1,
            entries: EntryList::from_view(view)?,
            appended: false,
        })
    }
}

/// What settling a non-root node leaves for its parent to do (nothing, when it was written).
enum Change {
    /// Split: the parent must add `(sep, right)` right after the child.
    Split { sep: Vec<u8>, right: Addr },
    /// Below the minimum fill and not written: the parent must merge or refill it.
    Underflow(Pending),
}

fn check_value(value: &[u8]) -> Result<(), Error> {
    if value.len() > VALUE_BYTES_MAX {
        return Err(Error::ValueTooLarge { len_bytes: value.len(), max_bytes: VALUE_BYTES_MAX });
    }
    Ok(())
}

/// Reads the path from the root to `key`'s leaf: routes through each internal node in the read
/// buffer (read up to its data end, `Tx::read_used_with`, no copy kept) and copies the leaf
/// ([`read_leaf_bytes`]). Returns the geometry, the internal nodes (root first) and the leaf. If
/// `bounds`, it also stages the keys the path routes to the leaf in the worker's hints
/// (`Hints::stage`) — the nearest separators on either side — unless one is too long to keep.
fn descend<C: Clock>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    key: &[u8],
    bounds: bool,
) -> Result<(Geometry, Vec<Frame>, Leaf), Error> {
    let mut path = Vec::new();
    let mut addr = root;
    let mut geo: Option<Geometry> = None;
    let mut expect: Option<u8> = None;
    let mut range = bounds.then(Range::default);
    for _ in 0..LEVELS_MAX {
        if expect != Some(0) {
            // An internal node, or the root (level not known yet; a leaf root is read twice).
            let (g, next) = tx.read_used_with(addr, used_bytes, |b, len| {
                let (g, view) = parse_node(addr, b, len, geo, expect)?;
                if view.is_leaf() {
                    return Ok::<_, Error>((g, None));
                }
                let index = view.route(key)?;
                // Child `index` holds the keys from separator `index - 1` to separator `index`:
                // bounds at least as tight as any above.
                if let Some(r) = &mut range {
                    if index > 0 {
                        r.lo = Bound::of(view.key(index - 1)?);
                    }
                    if index < view.count() {
                        r.hi = Bound::of(view.key(index)?);
                    }
                    if (index > 0 && r.lo.is_none()) || (index < view.count() && r.hi.is_none()) {
                        range = None;
                    }
                }
                Ok((g, Some((index, view.child(index)?, view.header.level - 1))))
            })??;
            geo = Some(g);
            if let Some((index, child, level)) = next {
                path.push(Frame { addr, index });
                addr = child;
                expect = Some(level);
                continue;
            }
        }
        let leaf = read_leaf(tx, addr)?;
        let geo = match geo {
            Some(g) => g,
            None => Geometry::for_root(root, leaf.len_bytes)?,
        };
        let view = NodeView::parse(addr, leaf.bytes(), geo.node_bytes)?;
        check_level(&view, expect)?;
        if !view.is_leaf() {
            return Err(corrupt(addr, "a node routed as a leaf is not one"));
        }
        tx.hints().stage(root, addr, range);
        return Ok((geo, path, leaf));
    }
    Err(corrupt(root, "tree is deeper than the level limit"))
}

/// Reads the leaf an update will change, whole: its bytes up to the data end
/// ([`used_bytes`]), then zeros to its length, which is what the rest of a node holds
/// (invariant 1). Saves moving the unused tail of the node through the read; and the words
/// read stay where the read put them ([`Tx::read_used_owned`]), not copied out again.
fn read_leaf<C: Clock>(tx: &mut Tx<'_, C>, addr: Addr) -> Result<Leaf, Error> {
    let (words, len_bytes, _) = tx.read_used_owned(addr, used_bytes)?;
    Ok(Leaf { addr, words, len_bytes })
}

/// Where a key is in the leaf an update descended to: the index of its entry (or where it would
/// go) and, when present, where its value is.
#[derive(Clone)]
struct Slot {
    index: usize,
    existing: Option<Stored>,
}

/// Where a present key's value is.
#[derive(Clone)]
enum Stored {
    /// These bytes of the leaf.
    Inline(std::ops::Range<usize>),
    /// Its own object of `len` bytes.
    OutOfLine { addr: Addr, len: usize },
}

/// How an update reached its leaf.
enum Route {
    /// A descent from the root: the internal nodes on the way (none: the leaf is the root). A
    /// descent that collected the leaf's bounds left them staged in the worker's hints.
    Path(Vec<Frame>),
    /// This attempt's memo (`crate::txn::memo`): the leaf holds the key, but the path to it is
    /// not known, so only a change that stays in the leaf may be made from here
    /// ([`stays_in_leaf`]); anything else descends first ([`with_path`]).
    Memo,
    /// The worker's hints (`crate::txn::hints`): the leaf of the hint at this position of the
    /// worker's table covers its keys, `key` among them, but the path to it is not known (as
    /// [`Route::Memo`]).
    Hint(u8),
}

/// Finds `key`'s leaf and the key in it: in the leaf this attempt last found the key in, when it
/// still holds it, or in a hinted leaf whose keys include it, else by a descent from the root.
/// Every update starts here, so the leaf is searched once per operation.
fn find<C: Clock>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    key: &[u8],
) -> Result<(Geometry, Route, Leaf, Slot), Error> {
    check_key(key, KEY_BYTES_MAX)?;
    let hash = key_hash(key);
    if let Some(addr) = tx.memo().get(root, hash) {
        let leaf = read_leaf(tx, addr)?;
        // Every node has the root's size.
        let geo = Geometry::for_root(root, leaf.len_bytes)?;
        let view = NodeView::parse(addr, leaf.bytes(), geo.node_bytes)?;
        if view.is_leaf() {
            let slot = slot_of(&view, key)?;
            if slot.existing.is_some() {
                let route = if addr == root { Route::Path(Vec::new()) } else { Route::Memo };
                return Ok((geo, route, leaf, slot));
            }
        }
        tx.recycle(leaf.words);
    }
    let hinting = tx.hints().wants(root);
    if hinting && let Some(found) = hinted(tx, root, key)? {
        tx.memo().put(root, hash, found.2.addr);
        return Ok(found);
    }
    // `find_by_descent`'s steps, written out: returned through it, even inlined, the result is
    // copied once more, which cost STAMP vacation 0.4 % more instructions (session 31).
    let (geo, path, leaf) = descend(tx, root, key, hinting)?;
    check_key(key, geo.key_max)?;
    let view = NodeView::parse(leaf.addr, leaf.bytes(), geo.node_bytes)?;
    let slot = slot_of(&view, key)?;
    tx.memo().put(root, hash, leaf.addr);
    Ok((geo, Route::Path(path), leaf, slot))
}

/// [`find`] by a descent from the root alone, collecting the leaf's bounds for a hint.
fn find_by_descent<C: Clock>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    key: &[u8],
) -> Result<(Geometry, Route, Leaf, Slot), Error> {
    let (geo, path, leaf) = descend(tx, root, key, true)?;
    check_key(key, geo.key_max)?;
    let view = NodeView::parse(leaf.addr, leaf.bytes(), geo.node_bytes)?;
    let slot = slot_of(&view, key)?;
    Ok((geo, Route::Path(path), leaf, slot))
}

/// `key`'s leaf from the worker's hints, if one covers `key` and still holds: a hint committed
/// by an earlier attempt must find its leaf at exactly the version it names, and a hint of this
/// attempt (pending) its leaf among this attempt's writes (`crate::txn::hints` says why that
/// leaf then covers the hint's keys). A hint that does not hold is dropped.
fn hinted<C: Clock>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    key: &[u8],
) -> Result<Option<(Geometry, Route, Leaf, Slot)>, Error> {
    let Some(hint) = tx.hints().find(root, key) else {
        return Ok(None);
    };
    let (words, len_bytes, version) = match tx.read_used_owned(hint.leaf, used_bytes) {
        Ok(read) => read,
        Err(e) if e.as_abort().is_some() => return Err(e),
        // Freed since (`NotAllocated`), its slab reused for objects of another size so that the
        // address is no slot any more (`InvalidAddress`), or any other reason the address does
        // not read: the descent finds the leaf (and meets any error that is real).
        Err(_) => {
            tx.hints().drop_found(hint);
            return Ok(None);
        }
    };
    let leaf = Leaf { addr: hint.leaf, words, len_bytes };
    let holds = match (hint.version, version) {
        (Some(hinted), Some(read)) => hinted == read,
        (None, None) => true,
        _ => false,
    };
    if holds {
        let geo = Geometry::for_root(root, leaf.len_bytes)?;
        check_key(key, geo.key_max)?;
        let view = NodeView::parse(leaf.addr, leaf.bytes(), geo.node_bytes)?;
        if view.is_leaf() {
            let slot = slot_of_near(&view, key, hint.next)?;
            tx.hints().held(root);
            let route =
                if leaf.addr == root { Route::Path(Vec::new()) } else { Route::Hint(hint.slot) };
            return Ok(Some((geo, route, leaf, slot)));
        }
    }
    tx.hints().drop_found(hint);
    tx.recycle(leaf.words);
    Ok(None)
}

/// Where `key` is (or would go) in the leaf `view`.
fn slot_of(view: &NodeView<'_>, key: &[u8]) -> Result<Slot, Error> {
    let index = view.lower_bound(key, false)?;
    let entry = match index < view.count() {
        true => Some(view.leaf(index)?).filter(|e| e.key == key),
        false => None,
    };
    let existing = match entry.map(|e| e.value) {
        None => None,
        // An inline value is the tail of its entry.
        Some(Value::Inline(v)) => {
            let end = view.raw_range(index)?.end;
            Some(Stored::Inline(end - v.len()..end))
        }
        Some(Value::OutOfLine { addr, len }) => Some(Stored::OutOfLine { addr, len }),
    };
    Ok(Slot { index, existing })
}

/// [`slot_of`] for a key that most likely goes at entry `next` — where the last write through
/// the hint put the range's newest key, plus one: a range that grows inside its leaf (TPC-C's
/// orders of a district, followed in the leaf by the next district's first ones) grows there.
/// The guess holds when the keys around it bracket `key` strictly (two comparisons instead of
/// a binary search's five or six on a 1 KiB TPC-C leaf); else the search runs.
fn slot_of_near(view: &NodeView<'_>, key: &[u8], next: usize) -> Result<Slot, Error> {
    let count = view.count();
    if next > 0 && next <= count {
        let after_previous = key_cmp(view.key(next - 1)?, key) == Ordering::Less;
        if after_previous && (next == count || key_cmp(key, view.key(next)?) == Ordering::Less) {
            return Ok(Slot { index: next, existing: None });
        }
    }
    slot_of(view, key)
}

/// Whether putting an entry of `entry_bytes` at `slot` (replacing the entry there, if present) —
/// or removing it, for `None` — leaves `leaf` within its fill bounds, so that no other node
/// changes.
fn stays_in_leaf(
    geo: &Geometry,
    leaf: &Leaf,
    slot: &Slot,
    entry_bytes: Option<usize>,
) -> Result<bool, Error> {
    let view = NodeView::parse(leaf.addr, leaf.bytes(), geo.node_bytes)?;
    let old = match slot.existing {
        Some(_) => SLOT_BYTES + view.raw_range(slot.index)?.len(),
        // Removing an absent key changes nothing.
        None if entry_bytes.is_none() => return Ok(true),
        None => 0,
    };
    let used = view.used() - old + entry_bytes.map_or(0, |new| SLOT_BYTES + new);
    Ok(used <= geo.cap && used >= geo.fill_min)
}

/// How the leaf of an update was reached, for hinting it after a change of the leaf alone: a
/// change of a hinted leaf keeps its hint current (`Hints::record_again`), and a leaf a descent
/// staged bounds for is hinted when the change inserted a key (`Hints::record_staged`: a range
/// that grows is likely to grow there again).
enum Reach {
    Descent(Addr),
    /// The tree, and where the hint was in the worker's table.
    Hint(Addr, u8),
}

/// Buffers `leaf`, changed alone, and hints it as [`Reach`] says (`inserted`: the change added a
/// key).
fn write_alone<C: Clock>(
    tx: &mut Tx<'_, C>,
    leaf: Leaf,
    reach: Option<Reach>,
    inserted: bool,
    next: usize,
) -> Result<(), Error> {
    let addr = leaf.addr;
    leaf.write(tx)?;
    match reach {
        Some(Reach::Hint(root, slot)) => tx.hints().record_again(root, addr, slot, next),
        Some(Reach::Descent(root)) if inserted => tx.hints().record_staged(root, addr, next),
        _ => {}
    }
    Ok(())
}

/// The path to the leaf for a change by `entry_bytes` (as [`stays_in_leaf`]): a leaf the memo
/// or a hint gave is kept when the change stays in it; otherwise the tree is descended (and its
/// memo forgotten: the change is about to move keys between nodes).
#[allow(clippy::type_complexity)]
fn with_path<C: Clock>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    key: &[u8],
    found: (Geometry, Route, Leaf, Slot),
    entry_bytes: Option<usize>,
) -> Result<(Geometry, Vec<Frame>, Leaf, Slot, Option<Reach>), Error> {
    let (geo, route, leaf, slot) = found;
    let hint = match route {
        Route::Path(path) => return Ok((geo, path, leaf, slot, Some(Reach::Descent(root)))),
        Route::Memo => None,
        Route::Hint(slot) => Some(Reach::Hint(root, slot)),
    };
    if stays_in_leaf(&geo, &leaf, &slot, entry_bytes)? {
        // Not the root, and the change stays in the leaf: `set_at` / `remove_at` write the leaf
        // alone. (Should a splice fall back to a rebuild, the empty path settles the leaf as a
        // root, which for a leaf within its bounds writes it alone too.)
        return Ok((geo, Vec::new(), leaf, slot, hint));
    }
    tx.memo().forget(root);
    tx.recycle(leaf.words);
    match find_by_descent(tx, root, key)? {
        (geo, Route::Path(path), leaf, slot) => {
            Ok((geo, path, leaf, slot, Some(Reach::Descent(root))))
        }
        (_, _, leaf, _) => Err(corrupt(leaf.addr, "a descent did not give a path")),
    }
}

/// Runs `f` on the value at `slot` of `leaf` (`None`: absent), reading a long value's object.
fn with_old<C: Clock, R>(
    tx: &mut Tx<'_, C>,
    leaf: &Leaf,
    slot: &Slot,
    f: impl FnOnce(Option<&[u8]>) -> R,
) -> Result<R, Error> {
    match &slot.existing {
        None => Ok(f(None)),
        Some(Stored::Inline(range)) => match leaf.bytes().get(range.clone()) {
            Some(v) => Ok(f(Some(v))),
            None => Err(corrupt(leaf.addr, "inline value lies outside its leaf")),
        },
        Some(Stored::OutOfLine { addr, len }) => Ok(f(Some(&read_value(tx, *addr, *len)?))),
    }
}

/// Sets `key` to `value`; returns the value replaced.
pub(super) fn insert<C: Clock>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    key: &[u8],
    value: &[u8],
) -> Result<Option<Vec<u8>>, Error> {
    check_key(key, KEY_BYTES_MAX)?;
    check_value(value)?;
    let found = find(tx, root, key)?;
    let old = with_old(tx, &found.2, &found.3, |v| v.map(<[u8]>::to_vec))?;
    let entry = found.0.leaf_entry_bytes(key.len(), value.len());
    let (geo, path, leaf, slot, reach) = with_path(tx, root, key, found, Some(entry))?;
    set_at(tx, &geo, path, leaf, slot, reach, key, value)?;
    Ok(old)
}

/// Sets `key`, found at `slot` of `leaf` (reached by `path`), to `value`.
#[allow(clippy::too_many_arguments)]
fn set_at<C: Clock>(
    tx: &mut Tx<'_, C>,
    geo: &Geometry,
    path: Vec<Frame>,
    leaf: Leaf,
    slot: Slot,
    reach: Option<Reach>,
    key: &[u8],
    value: &[u8],
) -> Result<(), Error> {
    let inline = geo.is_inline(key.len(), value.len());
    if let Some(Stored::OutOfLine { addr, len }) = slot.existing {
        if !inline && value.len() == len {
            // Same size: only the value object changes, so readers of other keys of the leaf
            // do not conflict with this update.
            return tx.write_bytes(addr, value);
        }
        tx.free(addr)?;
    }
    let entry = if inline {
        encode_inline(key, value)
    } else {
        encode_out_of_line(key, value.len(), tx.alloc_bytes(value)?)
    };
    // The common case: an insert or replacement that leaves the leaf within its fill bounds
    // changes the leaf alone, so the entry is spliced into the copy as it is (the bytes a
    // rebuild would give). A replacement of the same length (a counter, a fixed-size record)
    // keeps the leaf's layout: its new bytes just overwrite the old ones.
    let i = slot.index;
    let replaced = slot.existing.is_some();
    let view = NodeView::parse(leaf.addr, leaf.bytes(), geo.node_bytes)?;
    let at = if replaced { Some(view.raw_range(i)?) } else { None };
    let used = match &at {
        Some(at) => view.used() + entry.len() - at.len(),
        None => view.used() + SLOT_BYTES + entry.len(),
    };
    let mut leaf = leaf;
    if let Some(at) = at
        && at.len() == entry.len()
    {
        leaf.bytes_mut()[at].copy_from_slice(&entry);
        return write_alone(tx, leaf, reach, false, i + 1);
    }
    if used <= geo.cap && (path.is_empty() || used >= geo.fill_min) {
        let addr = leaf.addr;
        let spliced = if replaced {
            replace_packed(addr, leaf.bytes_mut(), geo.node_bytes, i, &entry)?
        } else {
            insert_packed(addr, leaf.bytes_mut(), geo.node_bytes, i, &entry)?
        };
        if spliced {
            return write_alone(tx, leaf, reach, !replaced, i + 1);
        }
    }
    rebuild_leaf(tx, geo, path, leaf, i, &entry, replaced)
}

/// Rebuilds `leaf` with `entry` inserted as entry `i` (or replacing it) and settles the path.
fn rebuild_leaf<C: Clock>(
    tx: &mut Tx<'_, C>,
    geo: &Geometry,
    path: Vec<Frame>,
    leaf: Leaf,
    i: usize,
    entry: &[u8],
    replace: bool,
) -> Result<(), Error> {
    let view = NodeView::parse(leaf.addr, leaf.bytes(), geo.node_bytes)?;
    let mut node = Pending::of(&view)?;
    tx.recycle(leaf.words);
    if replace {
        node.entries.replace(i, entry);
    } else {
        node.entries.insert(i, entry);
        node.appended = i + 1 == node.entries.count();
    }
    settle_path(tx, geo, path, node)
}

/// Removes `key`; returns its value.
pub(super) fn remove<C: Clock>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    key: &[u8],
) -> Result<Option<Vec<u8>>, Error> {
    let found = find(tx, root, key)?;
    let old = with_old(tx, &found.2, &found.3, |v| v.map(<[u8]>::to_vec))?;
    let (geo, path, leaf, slot, reach) = with_path(tx, root, key, found, None)?;
    remove_at(tx, &geo, path, leaf, slot, reach)?;
    Ok(old)
}

/// Removes the key found at `slot` of `leaf` (reached by `path`); nothing if it is absent.
fn remove_at<C: Clock>(
    tx: &mut Tx<'_, C>,
    geo: &Geometry,
    path: Vec<Frame>,
    leaf: Leaf,
    slot: Slot,
    reach: Option<Reach>,
) -> Result<(), Error> {
    let Some(existing) = &slot.existing else {
        tx.recycle(leaf.words);
        return Ok(());
    };
    if let Stored::OutOfLine { addr, .. } = *existing {
        tx.free(addr)?;
    }
    // A leaf left within its fill bounds (or the root) changes alone: the entry is removed from
    // the copy in place (`remove_packed`, the bytes a rebuild would give).
    let i = slot.index;
    let view = NodeView::parse(leaf.addr, leaf.bytes(), geo.node_bytes)?;
    let used = view.used() - SLOT_BYTES - view.raw_range(i)?.len();
    let mut leaf = leaf;
    let addr = leaf.addr;
    if (path.is_empty() || used >= geo.fill_min)
        && remove_packed(addr, leaf.bytes_mut(), geo.node_bytes, i)?
    {
        return write_alone(tx, leaf, reach, false, i);
    }
    let view = NodeView::parse(addr, leaf.bytes(), geo.node_bytes)?;
    let mut node = Pending::of(&view)?;
    tx.recycle(leaf.words);
    node.entries.remove(i);
    settle_path(tx, geo, path, node)
}

/// Reads `key`'s value, asks `f` what to do with it, and does it, descending once.
pub(super) fn update<C: Clock>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    key: &[u8],
    f: impl FnOnce(Option<&[u8]>) -> Edit,
) -> Result<(), Error> {
    let found = find(tx, root, key)?;
    match with_old(tx, &found.2, &found.3, f)? {
        Edit::Keep => {
            tx.recycle(found.2.words);
            Ok(())
        }
        Edit::Set(value) => {
            check_value(&value)?;
            let entry = found.0.leaf_entry_bytes(key.len(), value.len());
            let (geo, path, leaf, slot, reach) = with_path(tx, root, key, found, Some(entry))?;
            set_at(tx, &geo, path, leaf, slot, reach, key, &value)
        }
        Edit::Remove => {
            let (geo, path, leaf, slot, reach) = with_path(tx, root, key, found, None)?;
            remove_at(tx, &geo, path, leaf, slot, reach)
        }
    }
}

/// Settles `node` (the leaf) and, as far as its changes reach, its ancestors on `path`.
fn settle_path<C: Clock>(
    tx: &mut Tx<'_, C>,
    geo: &Geometry,
    mut path: Vec<Frame>,
    mut node: Pending,
) -> Result<(), Error> {
    // Keys may move between nodes from here on: positions remembered for this tree go, and so
    // do the hints of this attempt (its committed hints name versions this change replaces).
    let root = path.first().map_or(node.addr, |frame| frame.addr);
    tx.memo().forget(root);
    tx.hints().forget_pending(root);
    loop {
        let Some(parent) = path.pop() else {
            return settle_root(tx, geo, node);
        };
        let child = node.addr;
        let Some(change) = settle(tx, geo, node)? else {
            return Ok(());
        };
        let bytes = tx.read_bytes(parent.addr)?;
        let view = NodeView::parse(parent.addr, &bytes, geo.node_bytes)?;
        if view.is_leaf() || view.child(parent.index)? != child {
            return Err(corrupt(parent.addr, "a parent read again no longer routes to its child"));
        }
        let mut up = Pending::of(&view)?;
        match change {
            Change::Split { sep, right } => {
                up.entries.insert(parent.index, &encode_internal(&sep, right));
                up.appended = parent.index + 1 == up.entries.count();
            }
            Change::Underflow(child) => rebalance(tx, geo, &mut up, parent.index, child)?,
        }
        node = up;
    }
}

fn write<C: Clock>(tx: &mut Tx<'_, C>, geo: &Geometry, node: &Pending) -> Result<(), Error> {
    let n = node.entries.count();
    let bytes = node.entries.encode(0..n, geo.node_bytes, node.level, node.link0, node.link1);
    tx.write_bytes(node.addr, &bytes)
}

/// Settles a non-root node: writes it if it fits and is full enough (`None`: the parent is
/// unchanged), splits it if it is over-full, and hands it to its parent if it is under-full.
fn settle<C: Clock>(
    tx: &mut Tx<'_, C>,
    geo: &Geometry,
    node: Pending,
) -> Result<Option<Change>, Error> {
    let used = node.entries.used();
    if used > geo.cap {
        let (sep, right) = split(tx, geo, &node)?;
        Ok(Some(Change::Split { sep, right }))
    } else if used < geo.fill_min {
        Ok(Some(Change::Underflow(node)))
    } else {
        write(tx, geo, &node)?;
        Ok(None)
    }
}

/// How an entry list divides into two nodes: left gets `..m`; right gets `right_from..` and, for
/// an internal node, `right_child0` as its child 0; `sep` goes to the parent.
struct Division {
    m: usize,
    right_from: usize,
    right_child0: Addr,
    sep: Vec<u8>,
}

/// Chooses where `entries` of a node at `level` divide (see the essay, "Fill bounds"): evenly,
/// or for a node whose last entry was just `appended`, with the right node just above the
/// minimum fill. Checks that both halves fit a node.
fn divide(
    geo: &Geometry,
    addr: Addr,
    level: u8,
    entries: &EntryList,
    appended: bool,
) -> Result<Division, Error> {
    let n = entries.count();
    let append_at = || {
        let m = entries.append_split_point(geo.fill_min, level > 0)?;
        (entries.used_of(0..m) <= geo.cap).then_some(m)
    };
    let division = if level == 0 {
        if n < 2 {
            return Err(corrupt(addr, "an over-full leaf has fewer than two entries"));
        }
        let m = appended.then(append_at).flatten().unwrap_or_else(|| entries.leaf_split_point());
        let left = entry_key(addr, 0, entries.get(m - 1))?;
        let right = entry_key(addr, 0, entries.get(m))?;
        let sep = leaf_separator(left, right)
            .ok_or_else(|| corrupt(addr, "leaf keys are not in order"))?
            .to_vec();
        Division { m, right_from: m, right_child0: Addr::NULL, sep }
    } else {
        if n < 3 {
            return Err(corrupt(addr, "an over-full internal node has fewer than three entries"));
        }
        let m =
            appended.then(append_at).flatten().unwrap_or_else(|| entries.internal_split_point());
        let (sep, child) = internal_entry(addr, entries.get(m))?;
        Division { m, right_from: m + 1, right_child0: child, sep: sep.to_vec() }
    };
    if entries.used_of(0..division.m) > geo.cap || entries.used_of(division.right_from..n) > geo.cap
    {
        return Err(corrupt(addr, "entries do not fit two nodes"));
    }
    Ok(division)
}

/// Splits an over-full non-root node: the left half stays at its address, the right half moves
/// to a new node. Returns the separator and the new node.
fn split<C: Clock>(
    tx: &mut Tx<'_, C>,
    geo: &Geometry,
    node: &Pending,
) -> Result<(Vec<u8>, Addr), Error> {
    let d = divide(geo, node.addr, node.level, &node.entries, node.appended)?;
    let (n, nb, level) = (node.entries.count(), geo.node_bytes, node.level);
    if level == 0 {
        let right_bytes = node.entries.encode(d.m..n, nb, 0, node.addr, node.link1);
        let right = tx.alloc_bytes(&right_bytes)?;
        tx.write_bytes(node.addr, &node.entries.encode(0..d.m, nb, 0, node.link0, right))?;
        if !node.link1.is_null() {
            set_prev(tx, geo, node.link1, right)?;
        }
        Ok((d.sep, right))
    } else {
        let right_bytes =
            node.entries.encode(d.right_from..n, nb, level, d.right_child0, Addr::NULL);
        let right = tx.alloc_bytes(&right_bytes)?;
        tx.write_bytes(node.addr, &node.entries.encode(0..d.m, nb, level, node.link0, Addr::NULL))?;
        Ok((d.sep, right))
    }
}

/// Points leaf `leaf`'s previous-leaf link at `prev`.
fn set_prev<C: Clock>(
    tx: &mut Tx<'_, C>,
    geo: &Geometry,
    leaf: Addr,
    prev: Addr,
) -> Result<(), Error> {
    let mut bytes = tx.read_bytes(leaf)?;
    if !NodeView::parse(leaf, &bytes, geo.node_bytes)?.is_leaf() {
        return Err(corrupt(leaf, "a leaf link names an internal node"));
    }
    set_link0(&mut bytes, prev);
    tx.write_bytes(leaf, &bytes)
}

/// Fixes the under-full child `index` of `parent` (whose entries change here) by merging it
/// with an adjacent sibling when both fit one node, or else redistributing their entries
/// evenly. The left one of the pair keeps its address; a merge frees the right one.
fn rebalance<C: Clock>(
    tx: &mut Tx<'_, C>,
    geo: &Geometry,
    parent: &mut Pending,
    index: usize,
    child: Pending,
) -> Result<(), Error> {
    if parent.entries.count() == 0 {
        return Err(corrupt(parent.addr, "an under-full node has no sibling"));
    }
    // The pair is (index - 1, index), or (0, 1) for the first child; the separator between
    // them is the parent's entry `right - 1`, and names the right one.
    let right_index = index.max(1);
    let (sep, right_addr) = {
        let (k, c) = internal_entry(parent.addr, parent.entries.get(right_index - 1))?;
        (k.to_vec(), c)
    };
    let sibling_addr = if index == 0 {
        right_addr
    } else if index == 1 {
        parent.link0
    } else {
        internal_entry(parent.addr, parent.entries.get(index - 2))?.1
    };
    let bytes = tx.read_bytes(sibling_addr)?;
    let view = NodeView::parse(sibling_addr, &bytes, geo.node_bytes)?;
    check_level(&view, Some(child.level))?;
    let sibling = Pending::of(&view)?;
    let (left, right) = if index == 0 { (child, sibling) } else { (sibling, child) };
    if right.addr != right_addr {
        return Err(corrupt(parent.addr, "a separator names the wrong child"));
    }
    let level = left.level;
    let mut all = EntryList::default();
    all.extend_from(&left.entries, 0..left.entries.count());
    if level > 0 {
        // The separator comes down between the two halves, over the right node's child 0.
        all.push(&encode_internal(&sep, right.link0));
    }
    all.extend_from(&right.entries, 0..right.entries.count());
    let n = all.count();
    let nb = geo.node_bytes;
    if all.used() <= geo.cap {
        let link1 = if level == 0 { right.link1 } else { Addr::NULL };
        let merged = Pending {
            addr: left.addr,
            level,
            link0: left.link0,
            link1,
            entries: all,
            appended: false,
        };
        write(tx, geo, &merged)?;
        if level == 0 && !right.link1.is_null() {
            set_prev(tx, geo, right.link1, left.addr)?;
        }
        tx.free(right.addr)?;
        parent.entries.remove(right_index - 1);
        return Ok(());
    }
    let d = divide(geo, left.addr, level, &all, false)?;
    let (right_link0, right_link1) =
        if level == 0 { (right.link0, right.link1) } else { (d.right_child0, Addr::NULL) };
    tx.write_bytes(left.addr, &all.encode(0..d.m, nb, level, left.link0, left.link1))?;
    tx.write_bytes(right.addr, &all.encode(d.right_from..n, nb, level, right_link0, right_link1))?;
    parent.entries.replace(right_index - 1, &encode_internal(&d.sep, right.addr));
    Ok(())
}

/// Settles the root: splits it in place when over-full (its entries move to two new children
/// and it becomes their parent, one level up), collapses it while it is an internal node with a
/// single child (it takes the child's entries and level; the child is freed), and writes it.
fn settle_root<C: Clock>(tx: &mut Tx<'_, C>, geo: &Geometry, node: Pending) -> Result<(), Error> {
    let nb = geo.node_bytes;
    if node.entries.used() > geo.cap {
        let level = node.level;
        if level + 1 >= LEVELS_MAX {
            return Err(corrupt(node.addr, "tree is at the level limit"));
        }
        let d = divide(geo, node.addr, level, &node.entries, false)?;
        let n = node.entries.count();
        let (left, right) = if level == 0 {
            let left =
                tx.alloc_bytes(&node.entries.encode(0..d.m, nb, 0, Addr::NULL, Addr::NULL))?;
            let right = tx.alloc_bytes(&node.entries.encode(d.m..n, nb, 0, left, Addr::NULL))?;
            tx.write_bytes(left, &node.entries.encode(0..d.m, nb, 0, Addr::NULL, right))?;
            (left, right)
        } else {
            let left =
                tx.alloc_bytes(&node.entries.encode(0..d.m, nb, level, node.link0, Addr::NULL))?;
            let right_bytes =
                node.entries.encode(d.right_from..n, nb, level, d.right_child0, Addr::NULL);
            (left, tx.alloc_bytes(&right_bytes)?)
        };
        let mut entries = EntryList::default();
        entries.push(&encode_internal(&d.sep, right));
        let root = Pending {
            addr: node.addr,
            level: level + 1,
            link0: left,
            link1: Addr::NULL,
            entries,
            appended: false,
        };
        return write(tx, geo, &root);
    }
    let mut node = node;
    for _ in 0..LEVELS_MAX {
        if node.level == 0 || node.entries.count() > 0 {
            return write(tx, geo, &node);
        }
        let child = node.link0;
        let bytes = tx.read_bytes(child)?;
        let view = NodeView::parse(child, &bytes, nb)?;
        check_level(&view, Some(node.level - 1))?;
        if view.is_leaf() && !(view.header.link0.is_null() && view.header.link1.is_null()) {
            return Err(corrupt(child, "the only leaf has sibling links"));
        }
        let taken = Pending::of(&view)?;
        node = Pending { addr: node.addr, ..taken };
        tx.free(child)?;
    }
    Err(corrupt(node.addr, "tree is deeper than the level limit"))
}

#[cfg(test)]
mod tests {
    use ordo_clock::LogicalClock;

    use super::*;
    use crate::tree::{BTree, TreeOptions};
    use crate::{Config, Ordo};

    fn key(i: u32) -> Vec<u8> {
        format!("k{i:04}").into_bytes()
    }

    /// A tree of 256-byte nodes holding `key(0..200)`, each with value `[1; 8]` (depth 3).
    fn filled() -> (Ordo<LogicalClock>, BTree) {
        let db = Ordo::with_clock(Config::default(), LogicalClock::new()).unwrap();
        let tree = db.run(|tx| BTree::create_with(tx, TreeOptions::with_node_bytes(256))).unwrap();
        db.run(|tx| (0..200).try_for_each(|i| tree.insert(tx, &key(i), &[1; 8]).map(drop)))
            .unwrap();
        (db, tree)
    }

    /// A hint's guess of where the next key goes is used only where the keys around it bracket
    /// the key strictly: for every guess (in range or not) and every probe (present, absent,
    /// before, between and after the keys), the slot is the binary search's. Without either
    /// bracket check a guess puts keys out of order or inserts a present key twice.
    #[test]
    fn a_guessed_position_is_used_only_where_the_keys_around_it_bracket_the_key() {
        let mut list = EntryList::default();
        let keys: [&[u8]; 4] = [b"b", b"d", b"f", b"h"];
        for k in keys {
            list.push(&encode_inline(k, b"v"));
        }
        let node = list.encode(0..list.count(), 256, 0, Addr::new(0, 64), Addr::NULL);
        let view = NodeView::parse(Addr::NULL, &node, 256).unwrap();
        let probes: [&[u8]; 11] =
            [b"", b"a", b"b", b"c", b"d", b"dd", b"e", b"f", b"g", b"h", b"i"];
        let mut guessed = 0;
        for probe in probes {
            let want = slot_of(&view, probe).unwrap();
            for next in 0..keys.len() + 3 {
                let got = slot_of_near(&view, probe, next).unwrap();
                assert_eq!(
                    (got.index, got.existing.is_some()),
                    (want.index, want.existing.is_some()),
                    "{probe:?} guessed at {next}"
                );
                guessed += usize::from(next == want.index && want.existing.is_none());
            }
        }
        assert!(guessed >= 5, "{guessed}");
    }

    /// A memo entry that names the wrong leaf (what a 64-bit hash collision would give) is not
    /// used: the leaf must hold the key. Without the check in `find`, the update below would
    /// write `a` into `b`'s leaf, out of key order (`check_invariants` fails).
    #[test]
    fn a_memo_entry_naming_the_wrong_leaf_is_not_used() {
        let (db, tree) = filled();
        let (a, b) = (key(3), key(190));
        let mut tx = db.begin().unwrap();
        assert!(tree.get(&mut tx, &b).unwrap().is_some());
        let root = tree.root();
        let leaf_b = tx.memo().get(root, key_hash(&b)).unwrap();
        tx.memo().put(root, key_hash(&a), leaf_b);
        assert_eq!(tree.get(&mut tx, &a).unwrap(), Some(vec![1; 8]));
        tx.memo().put(root, key_hash(&a), leaf_b);
        tree.update(&mut tx, &a, |_| Edit::Set(vec![2; 8])).unwrap();
        tx.commit().unwrap();
        db.run(|tx| tree.check_invariants(tx)).unwrap();
        assert_eq!(db.run(|tx| tree.get(tx, &a)).unwrap(), Some(vec![2; 8]));
    }

    /// Appends to a growing range skip the descent: after an append committed, the next one in
    /// a new transaction reads the hinted leaf alone (`hinted`), where an insert elsewhere reads
    /// the whole path. (A test of the hint being used; the tests in `tests/indexes/tree_hints.rs`
    /// check that it is not used when it must not be.)
    #[test]
    fn an_append_after_a_committed_append_reads_only_its_leaf() {
        let (db, tree) = filled();
        let depth = db.run(|tx| tree.check_invariants(tx)).unwrap().depth;
        assert!(depth >= 3, "depth {depth}");
        db.run(|tx| tree.insert(tx, &key(200), &[2; 8])).unwrap();
        let mut tx = db.begin().unwrap();
        tree.insert(&mut tx, &key(201), &[3; 8]).unwrap();
        assert_eq!(tx.reads_len(), 1, "the append read the hinted leaf alone");
        let mut other = key(50);
        other.push(b'x');
        tree.insert(&mut tx, &other, &[4; 8]).unwrap();
        assert_eq!(tx.reads_len(), 1 + depth, "an insert elsewhere descended");
        // The same attempt appends again through its own (pending) hint.
        tree.insert(&mut tx, &key(202), &[5; 8]).unwrap();
        assert_eq!(tx.reads_len(), 1 + depth);
        tx.commit().unwrap();
        db.run(|tx| tree.check_invariants(tx)).unwrap();
    }

    /// A hint naming an address that reads as no object any more — its slab taken over by
    /// objects of another size, so that the address falls inside one (`InvalidAddress`) — is
    /// dropped and the insert descends (without that, the insert fails with the read's error).
    #[test]
    fn a_hint_naming_no_object_slot_is_not_used() {
        let (db, tree) = filled();
        let root = tree.root();
        let mut tx = db.begin().unwrap();
        assert!(tree.get(&mut tx, &key(199)).unwrap().is_some());
        let leaf = tx.memo().get(root, key_hash(&key(199))).unwrap();
        let inside = Addr::from_raw(leaf.to_raw() + 8);
        let everything = Range::default();
        tx.hints().record(root, inside, everything);
        tx.hints().promote(ordo_clock::Timestamp::from_nanos(1));
        tree.insert(&mut tx, &key(200), &[2; 8]).unwrap();
        tx.commit().unwrap();
        db.run(|tx| tree.check_invariants(tx)).unwrap();
        assert_eq!(db.run(|tx| tree.get(tx, &key(200))).unwrap(), Some(vec![2; 8]));
    }
}
