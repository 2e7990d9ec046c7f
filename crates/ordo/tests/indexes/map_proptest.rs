//! Property: any sequence of map transactions — each a list of inserts, removes, gets, `len` and
//! iterations, then committed, aborted or dropped — leaves the map equal to a `BTreeMap` that
//! applied only the committed ones, and every operation returns what the model returns.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common::End;
use crate::map_common;

use map_common::{Model, assert_same, db, key};
use ordo::Versions;
use ordo::map::{HashMap, MapOptions};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
    Get(Vec<u8>),
    Len,
    Entries,
}

fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => (0u32..48).prop_map(key),
        1 => proptest::collection::vec(any::<u8>(), 0..12),
    ]
}

/// Values described by a length and a fill byte (cheap to generate and to shrink), with lengths
/// on both sides of the inline limit and in records — often repeated exactly, so that values are
/// replaced by others of the same length (the in-place record update).
fn value_strategy() -> impl Strategy<Value = Vec<u8>> {
    let len = prop_oneof![
        0usize..24,
        70usize..120,
        120usize..3000,
        prop::sample::select(vec![0usize, 8, 90, 200, 1000]),
    ];
    (len, any::<u8>()).prop_map(|(len, fill)| vec![fill; len])
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (key_strategy(), value_strategy()).prop_map(|(k, v)| Op::Insert(k, v)),
        3 => key_strategy().prop_map(Op::Remove),
        3 => key_strategy().prop_map(Op::Get),
        1 => Just(Op::Len),
        1 => Just(Op::Entries),
    ]
}

fn tx_strategy() -> impl Strategy<Value = (Vec<Op>, End)> {
    let end = prop_oneof![6 => Just(End::Commit), 1 => Just(End::Abort), 1 => Just(End::Drop)];
    (proptest::collection::vec(op_strategy(), 0..24), end)
}

proptest! {
    #![proptest_config(ordo_seed::proptest_config("map_matches_btreemap", 48))]

    #[test]
    fn map_matches_btreemap(
        depth_bits_max in prop_oneof![Just(0u8), Just(1), Just(7), Just(60)],
        capacity_hint in prop_oneof![Just(0usize), Just(100), Just(3000)],
        multi in any::<bool>(),
        txs in proptest::collection::vec(tx_strategy(), 1..16),
    ) {
        let db = db(if multi { Versions::Multi } else { Versions::Single });
        let options = MapOptions { depth_bits_max, ..MapOptions::default() };
        let map = db.run(|tx| HashMap::create_with(tx, capacity_hint, options)).unwrap();
        let mut model = Model::new();
        for (ops, end) in txs {
            let mut tx = db.begin().unwrap();
            let mut pending = model.clone();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        prop_assert_eq!(map.insert(&mut tx, &k, &v).unwrap(), pending.insert(k, v));
                    }
                    Op::Remove(k) => {
                        prop_assert_eq!(map.remove(&mut tx, &k).unwrap(), pending.remove(&k));
                    }
                    Op::Get(k) => {
                        prop_assert_eq!(map.get(&mut tx, &k).unwrap(), pending.get(&k).cloned());
                    }
                    Op::Len => prop_assert_eq!(map.len(&mut tx).unwrap(), pending.len()),
                    Op::Entries => {
                        let mut got = map.entries(&mut tx).unwrap();
                        got.sort();
                        let want: Vec<_> = pending.clone().into_iter().collect();
                        prop_assert_eq!(got, want);
                    }
                }
            }
            end.apply(tx, &mut model, pending);
        }
        db.run(|tx| assert_same(tx, map, &model)).unwrap();
    }
}
