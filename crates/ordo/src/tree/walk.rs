//! Whole-tree operations: creating a tree, counting entries, the invariant check, and
//! destroying a tree. Each walk reads every node (and the check every value object), so inside
//! a read-write transaction it conflicts with any concurrent change to the tree; in a read-only
//! transaction it is a consistent snapshot and never validates. Walks go top-down, child levels
//! strictly decreasing, so the level limit bounds them even on corrupt bytes.

use std::collections::HashSet;

use ordo_clock::Clock;

use crate::addr::Addr;
use crate::error::Error;
use crate::txn::Tx;

use super::layout::{EntryList, Geometry, NodeView, Value, corrupt};
use super::read::check_level;
use super::{TreeOptions, TreeStats, VALUE_BYTES_MAX};

/// Allocates a new tree: an empty leaf root.
pub(super) fn create<C: Clock>(tx: &mut Tx<'_, C>, options: TreeOptions) -> Result<Addr, Error> {
    options.check()?;
    let root = EntryList::default().encode(0..0, options.node_bytes, 0, Addr::NULL, Addr::NULL);
    tx.alloc_bytes(&root)
}

/// The geometry of the tree at `root`, from the root's length.
fn geometry<C: Clock>(tx: &mut Tx<'_, C>, root: Addr) -> Result<Geometry, Error> {
    let len = tx.read_with(root, <[u8]>::len)?;
    Geometry::for_root(root, len)
}

/// What a visit of one node found, for the walks that need no more.
struct Visit {
    /// Entries, for a leaf (0 for an internal node).
    leaf_count: usize,
    /// Children, for an internal node.
    children: Vec<Addr>,
    /// Value objects of a leaf's entries, when asked for.
    out_of_line: Vec<Addr>,
}

/// Reads `addr`, checks its level, and lists its children or its leaf entries.
fn visit<C: Clock>(
    tx: &mut Tx<'_, C>,
    geo: &Geometry,
    addr: Addr,
    expect: Option<u8>,
    want_values: bool,
) -> Result<(u8, Visit), Error> {
    tx.read_with(addr, |b| {
        let view = NodeView::parse(addr, b, geo.node_bytes)?;
        check_level(&view, expect)?;
        let mut v = Visit { leaf_count: 0, children: Vec::new(), out_of_line: Vec::new() };
        if view.is_leaf() {
            v.leaf_count = view.count();
            if want_values {
                for i in 0..view.count() {
                    if let Value::OutOfLine { addr, .. } = view.leaf(i)?.value {
                        v.out_of_line.push(addr);
                    }
                }
            }
        } else {
            for i in 0..=view.count() {
                v.children.push(view.child(i)?);
            }
        }
        Ok((view.header.level, v))
    })?
}

/// Calls `f` on every node, top-down, depth first.
fn for_each_node<C: Clock>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    want_values: bool,
    mut f: impl FnMut(&mut Tx<'_, C>, Addr, &Visit) -> Result<(), Error>,
) -> Result<(), Error> {
    let geo = geometry(tx, root)?;
    let mut stack = vec![(root, None)];
    while let Some((addr, expect)) = stack.pop() {
        let (level, v) = visit(tx, &geo, addr, expect, want_values)?;
        f(tx, addr, &v)?;
        if level > 0 {
            stack.extend(v.children.iter().rev().map(|c| (*c, Some(level - 1))));
        }
    }
    Ok(())
}

/// The number of entries: the sum of the leaves' counts.
pub(super) fn len<C: Clock>(tx: &mut Tx<'_, C>, root: Addr) -> Result<usize, Error> {
    let mut total = 0usize;
    for_each_node(tx, root, false, |_, _, v| {
        total += v.leaf_count;
        Ok(())
    })?;
    Ok(total)
}

/// Whether the tree is empty: only a leaf root can be (every other leaf is above the minimum
/// fill), so this reads the root alone.
pub(super) fn is_empty<C: Clock>(tx: &mut Tx<'_, C>, root: Addr) -> Result<bool, Error> {
    let geo = geometry(tx, root)?;
    tx.read_with(root, |b| {
        let view = NodeView::parse(root, b, geo.node_bytes)?;
        Ok(view.is_leaf() && view.count() == 0)
    })?
}

/// Frees every node and value object, root included.
pub(super) fn destroy<C: Clock>(tx: &mut Tx<'_, C>, root: Addr) -> Result<(), Error> {
    let mut objects = Vec::new();
    for_each_node(tx, root, true, |_, addr, v| {
        objects.push(addr);
        objects.extend_from_slice(&v.out_of_line);
        Ok(())
    })?;
    for addr in objects {
        tx.free(addr)?;
    }
    Ok(())
}

/// State of the invariant check.
struct Check {
    geo: Geometry,
    root: Addr,
    stats: TreeStats,
    seen: HashSet<Addr>,
    /// Every leaf in key order: its address, previous and next links.
    leaves: Vec<(Addr, Addr, Addr)>,
}

/// Verifies every invariant of the module essay; see [`super::BTree::check_invariants`].
pub(super) fn check<C: Clock>(tx: &mut Tx<'_, C>, root: Addr) -> Result<TreeStats, Error> {
    let geo = geometry(tx, root)?;
    let stats = TreeStats { node_bytes: geo.node_bytes, ..TreeStats::default() };
    let mut c = Check { geo, root, stats, seen: HashSet::new(), leaves: Vec::new() };
    let level = check_node(tx, &mut c, root, None, None, None)?;
    c.stats.depth = usize::from(level) + 1;
    let (Some(first), Some(last)) = (c.leaves.first(), c.leaves.last()) else {
        return Err(corrupt(root, "tree has no leaf"));
    };
    if !first.1.is_null() {
        return Err(corrupt(first.0, "first leaf has a previous link"));
    }
    if !last.2.is_null() {
        return Err(corrupt(last.0, "last leaf has a next link"));
    }
    for pair in c.leaves.windows(2) {
        let ((a, _, a_next), (b, b_prev, _)) = (pair[0], pair[1]);
        if a_next != b {
            return Err(corrupt(a, "next link does not name the following leaf"));
        }
        if b_prev != a {
            return Err(corrupt(b, "previous link does not name the preceding leaf"));
        }
    }
    Ok(c.stats)
}

/// Checks the node at `addr`, whose keys must lie in `[lo, hi)`, and its subtree. Returns its
/// level. Recursion depth is bounded by the level limit: levels strictly decrease.
fn check_node<C: Clock>(
    tx: &mut Tx<'_, C>,
    c: &mut Check,
    addr: Addr,
    expect: Option<u8>,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
) -> Result<u8, Error> {
    if !c.seen.insert(addr) {
        return Err(corrupt(addr, "node is reachable twice"));
    }
    let is_root = addr == c.root;
    let geo = c.geo;
    let bytes = tx.read_bytes(addr)?;
    let view = NodeView::parse(addr, &bytes, geo.node_bytes)?;
    view.check_packed()?;
    check_level(&view, expect)?;
    let h = view.header;
    if !is_root && view.used() < geo.fill_min {
        return Err(corrupt(addr, "node is below the minimum fill"));
    }
    c.stats.bytes_used += view.used();
    let mut previous: Option<&[u8]> = None;
    for i in 0..h.count {
        let k = view.key(i)?;
        if k.len() > geo.key_max {
            return Err(corrupt(addr, "key is longer than the tree's limit"));
        }
        if previous.is_some_and(|p| p >= k) {
            return Err(corrupt(addr, "keys are not strictly increasing"));
        }
        if lo.is_some_and(|lo| k < lo) || hi.is_some_and(|hi| k >= hi) {
            return Err(corrupt(addr, "key lies outside the range its parent gives the node"));
        }
        previous = Some(k);
    }
    if view.is_leaf() {
        c.stats.leaves += 1;
        c.stats.entries += h.count;
        if is_root && !(h.link0.is_null() && h.link1.is_null()) {
            return Err(corrupt(addr, "leaf root has sibling links"));
        }
        c.leaves.push((addr, h.link0, h.link1));
        for i in 0..h.count {
            let e = view.leaf(i)?;
            match e.value {
                Value::Inline(v) => {
                    if !geo.is_inline(e.key.len(), v.len()) {
                        return Err(corrupt(addr, "an inline pair exceeds the inline limit"));
                    }
                }
                Value::OutOfLine { addr: value, len } => {
                    if geo.is_inline(e.key.len(), len) || len > VALUE_BYTES_MAX {
                        return Err(corrupt(addr, "an out-of-line value has an inline size"));
                    }
                    if tx.read_with(value, <[u8]>::len)? != len {
                        return Err(corrupt(value, "value object length does not match its entry"));
                    }
                    c.stats.out_of_line_values += 1;
                }
            }
        }
        return Ok(0);
    }
    c.stats.internal_nodes += 1;
    if h.count == 0 {
        return Err(corrupt(addr, "internal node has a single child"));
    }
    for i in 0..=h.count {
        let child_lo = if i == 0 { lo } else { Some(view.key(i - 1)?) };
        let child_hi = if i == h.count { hi } else { Some(view.key(i)?) };
        check_node(tx, c, view.child(i)?, Some(h.level - 1), child_lo, child_hi)?;
    }
    Ok(h.level)
}
