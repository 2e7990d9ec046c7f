//! Shared helpers of the `map_*` tests: key and value generators and a model comparison.
#![allow(dead_code)]
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::collections::BTreeMap;

use ordo::map::{HashMap, KEY_BYTES_MAX};
use ordo::{Config, Error, Ordo, Tx, Versions};
use ordo_clock::{Clock, LogicalClock};
use rand::Rng;

pub(crate) type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Key lengths, cycling with the key id: around the inline limit (96 bytes with the value), up
/// to the longest key.
const KEY_LENS: [usize; 10] = [1, 4, 8, 16, 30, 60, 95, 97, 300, KEY_BYTES_MAX];

/// Key number `id`: the empty key for 0, else the decimal digits of `id` padded with dots to a
/// length chosen by `id` (injective: the digits are the longest digit prefix).
pub(crate) fn key(id: u32) -> Vec<u8> {
    if id == 0 {
        return Vec::new();
    }
    let mut k = id.to_string().into_bytes();
    let len = KEY_LENS[(id as usize * 7) % KEY_LENS.len()];
    if k.len() < len {
        k.resize(len, b'.');
    }
    k
}

/// Key `id` but always short (for tests that need many keys quickly).
pub(crate) fn short_key(id: u32) -> Vec<u8> {
    format!("k{id}").into_bytes()
}

/// A random value: mostly small, some across the inline limit, some in records, a few large;
/// one in five has one of a few fixed lengths, so that values get replaced by others of the
/// same length (the in-place record update).
pub(crate) fn value(rng: &mut impl Rng) -> Vec<u8> {
    const FIXED_LENS: [usize; 4] = [8, 90, 200, 1000];
    let len = match rng.random_range(0..100) {
        0..5 => 0,
        5..25 => FIXED_LENS[rng.random_range(0..FIXED_LENS.len())],
        25..45 => rng.random_range(1..24),
        45..70 => rng.random_range(60..110),
        70..90 => rng.random_range(110..1100),
        90..99 => rng.random_range(1100..5000),
        _ => rng.random_range(20_000..70_000),
    };
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

/// A database with the logical clock, single- or multi-version.
pub(crate) fn db(versions: Versions) -> Ordo<LogicalClock> {
    Ordo::with_clock(Config { versions, ..Config::default() }, LogicalClock::new()).unwrap()
}

/// Asserts that `map` holds exactly `model`, through every read path, and that its structure
/// verifies.
pub(crate) fn assert_same<C: Clock>(
    tx: &mut Tx<'_, C>,
    map: HashMap,
    model: &Model,
) -> Result<(), Error> {
    let mut entries = map.entries(tx)?;
    entries.sort();
    let expected: Vec<(Vec<u8>, Vec<u8>)> =
        model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(entries.len(), expected.len(), "entry count");
    assert!(entries == expected, "map entries differ from the model");
    assert_eq!(map.len(tx)?, model.len());
    assert_eq!(map.is_empty(tx)?, model.is_empty());
    let shape = map.verify(tx)?;
    assert_eq!(shape.entries, model.len());
    for (k, v) in model {
        assert_eq!(map.get(tx, k)?.as_ref(), Some(v));
    }
    Ok(())
}
