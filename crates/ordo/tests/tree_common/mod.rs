//! Shared helpers of the `tree_*` tests: key and value generators, bounds, and the model of a
//! range scan over a `BTreeMap`.
#![allow(dead_code)]
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::collections::BTreeMap;
use std::ops::{Bound, ControlFlow};

use ordo::tree::{BTree, Direction};
use ordo::{Config, Error, Ordo, Tx, Versions};
use ordo_clock::{Clock, LogicalClock};
use rand::Rng;

pub(crate) type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A database with the logical clock, single- or multi-version.
pub(crate) fn db(versions: Versions) -> Ordo<LogicalClock> {
    Ordo::with_clock(Config { versions, ..Config::default() }, LogicalClock::new()).unwrap()
}

/// A pool of `n` distinct keys of lengths `0..=max_len` over a small alphabet (long shared
/// prefixes, bytes 0x00 and 0xFF at the edges of the order), the empty key included.
pub(crate) fn key_pool(rng: &mut impl Rng, n: usize, max_len: usize) -> Vec<Vec<u8>> {
    const ALPHABET: [u8; 5] = [0x00, b'a', b'b', b'c', 0xFF];
    let mut set = std::collections::BTreeSet::new();
    set.insert(Vec::new());
    while set.len() < n {
        let len = match rng.random_range(0..10) {
            0..4 => rng.random_range(1..=4.min(max_len)),
            4..8 => rng.random_range(1..=12.min(max_len)),
            _ => rng.random_range(1..=max_len),
        };
        set.insert((0..len).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())]).collect());
    }
    let mut keys: Vec<Vec<u8>> = set.into_iter().collect();
    // Shuffle so that insertion order is not key order.
    for i in (1..keys.len()).rev() {
        keys.swap(i, rng.random_range(0..=i));
    }
    keys
}

/// A random value of up to `max_len` bytes: mostly short (inline), some long (out of line), a
/// few of fixed lengths so that same-length replacements of out-of-line values happen.
pub(crate) fn value(rng: &mut impl Rng, max_len: usize) -> Vec<u8> {
    let len = match rng.random_range(0..10) {
        0 => 0,
        1..5 => rng.random_range(1..16),
        5..7 => 100,
        _ => rng.random_range(16..=max_len),
    }
    .min(max_len);
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

/// A random bound over the keys of `pool` (or a key not in it).
pub(crate) fn bound(rng: &mut impl Rng, pool: &[Vec<u8>]) -> Bound<Vec<u8>> {
    let k = if rng.random_bool(0.8) {
        pool[rng.random_range(0..pool.len())].clone()
    } else {
        let mut k = pool[rng.random_range(0..pool.len())].clone();
        k.push(b'b');
        k
    };
    match rng.random_range(0..5) {
        0 => Bound::Unbounded,
        1 | 2 => Bound::Included(k),
        _ => Bound::Excluded(k),
    }
}

pub(crate) fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Whether the bounds are inverted (the tree's `InvalidRange`).
pub(crate) fn inverted(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    match (lo, hi) {
        (Bound::Included(l) | Bound::Excluded(l), Bound::Included(h) | Bound::Excluded(h)) => l > h,
        _ => false,
    }
}

fn in_range(k: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    let above_lo = match lo {
        Bound::Included(l) => k >= l.as_slice(),
        Bound::Excluded(l) => k > l.as_slice(),
        Bound::Unbounded => true,
    };
    let below_hi = match hi {
        Bound::Included(h) => k <= h.as_slice(),
        Bound::Excluded(h) => k < h.as_slice(),
        Bound::Unbounded => true,
    };
    above_lo && below_hi
}

/// The model's answer to a range scan.
pub(crate) fn model_range(
    model: &Model,
    lo: &Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
    direction: Direction,
    limit: Option<usize>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let hits = model.iter().filter(|(k, _)| in_range(k, lo, hi));
    let all: Vec<_> = match direction {
        Direction::Forward => hits.map(|(k, v)| (k.clone(), v.clone())).collect(),
        Direction::Backward => hits.rev().map(|(k, v)| (k.clone(), v.clone())).collect(),
    };
    all.into_iter().take(limit.unwrap_or(usize::MAX)).collect()
}

/// Runs one random range scan on `tree` and compares it with `model`. Returns the entries seen.
pub(crate) fn check_random_range<C: Clock>(
    tx: &mut Tx<'_, C>,
    tree: BTree,
    model: &Model,
    pool: &[Vec<u8>],
    rng: &mut impl Rng,
) -> Result<usize, Error> {
    let (lo, hi) = (bound(rng, pool), bound(rng, pool));
    let direction = if rng.random_bool(0.5) { Direction::Forward } else { Direction::Backward };
    let limit = match rng.random_range(0..4) {
        0 => Some(rng.random_range(0..4)),
        1 => Some(rng.random_range(0..40)),
        _ => None,
    };
    // Sometimes the closure stops the scan itself instead of the limit.
    let stop_after = if rng.random_bool(0.2) { Some(rng.random_range(1..10)) } else { None };
    let mut got = Vec::new();
    let r = tree.range(tx, as_ref(&lo), as_ref(&hi), direction, limit, |k, v| {
        got.push((k.to_vec(), v.to_vec()));
        if stop_after.is_some_and(|n| got.len() >= n) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    if inverted(&lo, &hi) {
        assert_eq!(r, Err(Error::InvalidRange), "{lo:?}..{hi:?}");
        assert!(got.is_empty());
        return Ok(0);
    }
    let visited = r?;
    let limit = match (limit, stop_after) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let want = model_range(model, &lo, &hi, direction, limit);
    assert_eq!(visited, got.len());
    assert_eq!(got, want, "range {lo:?}..{hi:?} {direction:?} limit {limit:?}");
    Ok(visited)
}

/// Compares the whole tree with `model`, both directions, plus `len`, `first`, `last`.
pub(crate) fn assert_same<C: Clock>(
    tx: &mut Tx<'_, C>,
    tree: BTree,
    model: &Model,
) -> Result<(), Error> {
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(tree.entries(tx)?, want);
    let all = Bound::Unbounded;
    let mut back = tree.range_entries(tx, all, all, Direction::Backward, None)?;
    back.reverse();
    assert_eq!(back, want);
    assert_eq!(tree.len(tx)?, model.len());
    assert_eq!(tree.is_empty(tx)?, model.is_empty());
    assert_eq!(tree.first(tx)?, want.first().cloned());
    assert_eq!(tree.last(tx)?, want.last().cloned());
    Ok(())
}
