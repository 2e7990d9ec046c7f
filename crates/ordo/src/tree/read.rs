//! Reads: point lookups and range scans in either direction. Neither writes anything, so in a
//! read-only transaction they are a consistent snapshot at the read timestamp and never validate.
//!
//! A lookup reads one node per level into the read buffer, only up to the node's data end
//! (`Tx::read_used_with` with [`used_bytes`]: the zeros after it are never searched), and, for
//! a value stored out of line, its value object — or only the leaf, when this attempt found the
//! key there before (the memo, see the essay of [`super`]). A scan descends once to its
//! starting leaf — reading internal nodes only, down to the parent of that leaf — and then
//! follows the leaf links (`next` forward, `prev` backward). The walk along the links is the
//! only loop in the tree whose length the level limit does not bound, so it checks that keys
//! strictly advance from leaf to leaf: a cycle of links, which only corruption can produce,
//! ends in [`Error::CorruptTree`] instead of looping.

use std::ops::{Bound, ControlFlow};

use ordo_clock::Clock;

use crate::addr::Addr;
use crate::error::Error;
use crate::txn::Tx;
use crate::txn::memo::key_hash;

use super::layout::{Geometry, LEVELS_MAX, NodeView, Value, corrupt, used_bytes};
use super::{Direction, KEY_BYTES_MAX};

/// Refuses a key longer than `max` bytes.
pub(super) fn check_key(key: &[u8], max: usize) -> Result<(), Error> {
    if key.len() > max {
        return Err(Error::KeyTooLarge { len_bytes: key.len(), max_bytes: max });
    }
    Ok(())
}

/// Checks that a node reached from a parent sits one level below it.
pub(super) fn check_level(view: &NodeView<'_>, expect: Option<u8>) -> Result<(), Error> {
    match expect {
        Some(level) if view.header.level != level => {
            Err(corrupt(view.addr, "child level is not one below its parent's"))
        }
        _ => Ok(()),
    }
}

/// Parses the node at `addr`, an object of `len_bytes`, from its first bytes `b` (at least up
/// to its data end: [`Tx::read_used_with`] with [`used_bytes`]) — the root's geometry comes
/// from its length when `geo` is not known yet — and checks it sits at level `expect`.
pub(super) fn parse_node(
    addr: Addr,
    b: &[u8],
    len_bytes: usize,
    geo: Option<Geometry>,
    expect: Option<u8>,
) -> Result<(Geometry, NodeView<'_>), Error> {
    let g = match geo {
        Some(g) => g,
        None => Geometry::for_root(addr, len_bytes)?,
    };
    let view = NodeView::parse_used(addr, b, len_bytes, g.node_bytes)?;
    check_level(&view, expect)?;
    Ok((g, view))
}

/// Reads an out-of-line value object, checking its length against its leaf entry.
pub(super) fn read_value<C: Clock>(
    tx: &mut Tx<'_, C>,
    addr: Addr,
    len: usize,
) -> Result<Vec<u8>, Error> {
    with_value(tx, addr, len, <[u8]>::to_vec)
}

fn with_value<C: Clock, R>(
    tx: &mut Tx<'_, C>,
    addr: Addr,
    len: usize,
    f: impl FnOnce(&[u8]) -> R,
) -> Result<R, Error> {
    tx.read_with(addr, |b| {
        if b.len() == len {
            Ok(f(b))
        } else {
            Err(corrupt(addr, "value object length does not match its leaf entry"))
        }
    })?
}

/// What one step of a lookup found.
enum Step<R> {
    /// An internal node: go to this child, which must be at this level.
    Child(Addr, u8),
    /// The key with an inline value; `f` ran on it.
    Hit(R),
    /// The key with an out-of-line value.
    OutOfLine(Addr, usize),
    /// The key is absent.
    Miss,
}

/// Finds `key` and runs `f` on its value in place.
pub(super) fn get_with<C: Clock, R>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    key: &[u8],
    f: impl FnOnce(&[u8]) -> R,
) -> Result<Option<R>, Error> {
    check_key(key, KEY_BYTES_MAX)?;
    let mut f = Some(f);
    let hash = key_hash(key);
    if let Some(leaf) = tx.memo().get(root, hash) {
        // This attempt found the key in `leaf` before: if the leaf still holds it, it is the
        // key's home (`crate::txn::memo`), and the descent is skipped.
        let step = tx.read_used_with(leaf, used_bytes, |b, len| {
            // Every node has the root's size.
            let g = Geometry::for_root(root, len)?;
            let view = NodeView::parse_used(leaf, b, len, g.node_bytes)?;
            Ok::<_, Error>(match view.is_leaf() {
                true => leaf_step(&view, key, &mut f)?,
                false => Step::Miss,
            })
        })??;
        match step {
            Step::Hit(r) => return Ok(r),
            Step::OutOfLine(value, len) => {
                let Some(f) = f.take() else { return Ok(None) };
                return with_value(tx, value, len, f).map(Some);
            }
            // Gone from that leaf (removed, or a hash collision): descend.
            Step::Miss | Step::Child(..) => {}
        }
    }
    let mut addr = root;
    let mut geo: Option<Geometry> = None;
    let mut expect: Option<u8> = None;
    for _ in 0..LEVELS_MAX {
        let (g, step) = tx.read_used_with(addr, used_bytes, |b, len| {
            let g = match geo {
                Some(g) => g,
                None => Geometry::for_root(addr, len)?,
            };
            check_key(key, g.key_max)?;
            let view = NodeView::parse_used(addr, b, len, g.node_bytes)?;
            check_level(&view, expect)?;
            if !view.is_leaf() {
                let child = view.child(view.route(key)?)?;
                return Ok::<_, Error>((g, Step::Child(child, view.header.level - 1)));
            }
            Ok((g, leaf_step(&view, key, &mut f)?))
        })??;
        geo = Some(g);
        if matches!(step, Step::Hit(_) | Step::OutOfLine(..)) {
            tx.memo().put(root, hash, addr);
        }
        match step {
            Step::Child(child, level) => {
                addr = child;
                expect = Some(level);
            }
            Step::Hit(r) => return Ok(r),
            Step::Miss => return Ok(None),
            Step::OutOfLine(value, len) => {
                let Some(f) = f.take() else { return Ok(None) };
                return with_value(tx, value, len, f).map(Some);
            }
        }
    }
    Err(corrupt(root, "tree is deeper than the level limit"))
}

/// Looks `key` up in the leaf `view`, running `f` on an inline value.
fn leaf_step<R>(
    view: &NodeView<'_>,
    key: &[u8],
    f: &mut Option<impl FnOnce(&[u8]) -> R>,
) -> Result<Step<Option<R>>, Error> {
    let i = view.lower_bound(key, false)?;
    if i == view.count() {
        return Ok(Step::Miss);
    }
    let e = view.leaf(i)?;
    if e.key != key {
        return Ok(Step::Miss);
    }
    Ok(match e.value {
        Value::Inline(v) => Step::Hit(f.take().map(|f| f(v))),
        Value::OutOfLine { addr, len } => Step::OutOfLine(addr, len),
    })
}

/// Where a descent heads.
#[derive(Clone, Copy)]
enum Edge<'k> {
    /// The leaf whose key range holds this key.
    Key(&'k [u8]),
    /// The first leaf.
    First,
    /// The last leaf.
    Last,
}

/// Descends to the leaf at `edge`, reading internal nodes only. Returns the tree's geometry and
/// the leaf's address (the root itself when it is a leaf).
fn descend_to_leaf<C: Clock>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    edge: Edge<'_>,
) -> Result<(Geometry, Addr), Error> {
    let mut addr = root;
    let mut geo: Option<Geometry> = None;
    let mut expect: Option<u8> = None;
    for _ in 0..LEVELS_MAX {
        let (g, child) = tx.read_used_with(addr, used_bytes, |b, len| {
            let (g, view) = parse_node(addr, b, len, geo, expect)?;
            if view.is_leaf() {
                return Ok::<_, Error>((g, None));
            }
            let i = match edge {
                Edge::Key(k) => view.route(k)?,
                Edge::First => 0,
                Edge::Last => view.count(),
            };
            Ok((g, Some((view.child(i)?, view.header.level - 1))))
        })??;
        geo = Some(g);
        match child {
            None => return Ok((g, addr)),
            // The scan reads the leaf itself; don't read it twice.
            Some((leaf, 0)) => return Ok((g, leaf)),
            Some((child, level)) => {
                addr = child;
                expect = Some(level);
            }
        }
    }
    Err(corrupt(root, "tree is deeper than the level limit"))
}

/// Checks a scan's bounds: [`Error::InvalidRange`] when the lower bound's key is above the upper
/// bound's. Equal keys are a valid range, empty unless both bounds include the key.
pub(super) fn check_range(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<(), Error> {
    match (lo, hi) {
        (Bound::Included(l) | Bound::Excluded(l), Bound::Included(h) | Bound::Excluded(h))
            if l > h =>
        {
            Err(Error::InvalidRange)
        }
        _ => Ok(()),
    }
}

fn below_lo(key: &[u8], lo: Bound<&[u8]>) -> bool {
    match lo {
        Bound::Included(l) => key < l,
        Bound::Excluded(l) => key <= l,
        Bound::Unbounded => false,
    }
}

fn above_hi(key: &[u8], hi: Bound<&[u8]>) -> bool {
    match hi {
        Bound::Included(h) => key > h,
        Bound::Excluded(h) => key >= h,
        Bound::Unbounded => false,
    }
}

/// Calls `f` on the entries with keys between `lo` and `hi`, in `direction` order, until `f`
/// breaks or `limit` entries were visited. Returns how many entries `f` was called with.
pub(super) fn range<C: Clock>(
    tx: &mut Tx<'_, C>,
    root: Addr,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    direction: Direction,
    limit: Option<usize>,
    mut f: impl FnMut(&[u8], &[u8]) -> ControlFlow<()>,
) -> Result<usize, Error> {
    check_range(lo, hi)?;
    let limit = limit.unwrap_or(usize::MAX);
    if limit == 0 {
        return Ok(0);
    }
    let forward = direction == Direction::Forward;
    let edge = match (forward, lo, hi) {
        (true, Bound::Included(k) | Bound::Excluded(k), _) => Edge::Key(k),
        (true, Bound::Unbounded, _) => Edge::First,
        (false, _, Bound::Included(k) | Bound::Excluded(k)) => Edge::Key(k),
        (false, _, Bound::Unbounded) => Edge::Last,
    };
    let (geo, mut leaf) = descend_to_leaf(tx, root, edge)?;
    let mut buf = Vec::with_capacity(geo.node_bytes);
    // The last key of the previous leaf (forward) or its first (backward).
    let mut previous_edge: Option<Vec<u8>> = None;
    let mut visited = 0usize;
    loop {
        buf.clear();
        let len = tx.read_used_with(leaf, used_bytes, |b, len| {
            buf.extend_from_slice(b);
            len
        })?;
        let view = NodeView::parse_used(leaf, &buf, len, geo.node_bytes)?;
        if !view.is_leaf() {
            return Err(corrupt(leaf, "a leaf link names an internal node"));
        }
        let n = view.count();
        if n == 0 {
            if leaf == root {
                return Ok(0);
            }
            return Err(corrupt(leaf, "a non-root leaf is empty"));
        }
        let (first, last) = (view.key(0)?, view.key(n - 1)?);
        let advanced = match &previous_edge {
            None => first <= last,
            Some(p) if forward => first <= last && first > p.as_slice(),
            Some(p) => first <= last && last < p.as_slice(),
        };
        if !advanced {
            return Err(corrupt(leaf, "leaf links do not follow key order"));
        }
        let first_leaf = previous_edge.is_none();
        // The entries `start..end` of this leaf may be in range; later leaves start at an end.
        let start = match lo {
            Bound::Included(k) if forward && first_leaf => view.lower_bound(k, false)?,
            Bound::Excluded(k) if forward && first_leaf => view.lower_bound(k, true)?,
            _ => 0,
        };
        let end = match hi {
            Bound::Included(k) if !forward && first_leaf => view.lower_bound(k, true)?,
            Bound::Excluded(k) if !forward && first_leaf => view.lower_bound(k, false)?,
            _ => n,
        };
        for j in 0..end.saturating_sub(start) {
            let i = if forward { start + j } else { end - 1 - j };
            let e = view.leaf(i)?;
            if (forward && above_hi(e.key, hi)) || (!forward && below_lo(e.key, lo)) {
                return Ok(visited);
            }
            let flow = match e.value {
                Value::Inline(v) => f(e.key, v),
                Value::OutOfLine { addr, len } => with_value(tx, addr, len, |v| f(e.key, v))?,
            };
            visited += 1;
            if flow.is_break() || visited >= limit {
                return Ok(visited);
            }
        }
        previous_edge = Some(if forward { last } else { first }.to_vec());
        let next = if forward { view.header.link1 } else { view.header.link0 };
        if next.is_null() {
            return Ok(visited);
        }
        leaf = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_checks() {
        use Bound::{Excluded as X, Included as I, Unbounded as U};
        let (a, b): (&[u8], &[u8]) = (b"a", b"b");
        assert!(check_range(I(a), I(b)).is_ok());
        assert!(check_range(X(a), X(a)).is_ok());
        assert!(check_range(U, X(a)).is_ok());
        assert_eq!(check_range(I(b), I(a)), Err(Error::InvalidRange));
        assert_eq!(check_range(X(b), U).map(|()| 1), Ok(1));
        assert_eq!(check_range(X(b), X(a)), Err(Error::InvalidRange));
        assert!(below_lo(a, X(a)) && !below_lo(a, I(a)) && !below_lo(a, U));
        assert!(above_hi(b, X(b)) && !above_hi(b, I(b)) && !above_hi(b, U));
    }
}
