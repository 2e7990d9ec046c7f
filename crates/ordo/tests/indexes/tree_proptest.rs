//! Property test: any sequence of operations, grouped into transactions that commit or abort,
//! leaves the tree equal to a `BTreeMap` given the committed operations, with every invariant
//! holding after every transaction. Small nodes and a small key space make splits, merges,
//! redistributions and root changes frequent; proptest shrinks a failure to a minimal sequence.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::tree_common;

use std::ops::Bound;

use ordo::Versions;
use ordo::tree::{BTree, Direction, Edit, TreeOptions};
use proptest::prelude::*;
use tree_common::{Model, as_ref, db, inverted, model_range};

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
    Get(Vec<u8>),
    /// `BTree::update` with the edit `edit_of(mode, old, suffix)`.
    Update(Vec<u8>, u8, Vec<u8>),
    Range(Bound<Vec<u8>>, Bound<Vec<u8>>, bool, Option<usize>),
}

/// Keys from a small alphabet, so that operations hit the same keys and share prefixes.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::collection::vec(prop::sample::select(vec![0u8, b'a', b'b', 0xFF]), 0..6),
        1 => prop::collection::vec(prop::sample::select(vec![b'a', b'b']), 20..40),
    ]
}

fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
    prop_oneof![
        1 => Just(Bound::Unbounded),
        2 => key().prop_map(Bound::Included),
        2 => key().prop_map(Bound::Excluded),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (key(), prop::collection::vec(any::<u8>(), 0..80)).prop_map(|(k, v)| Op::Insert(k, v)),
        3 => key().prop_map(Op::Remove),
        1 => key().prop_map(Op::Get),
        3 => (key(), 0u8..4, prop::collection::vec(any::<u8>(), 0..60))
            .prop_map(|(k, mode, suffix)| Op::Update(k, mode, suffix)),
        1 => (bound(), bound(), any::<bool>(), prop::option::of(0usize..6))
            .prop_map(|(lo, hi, fwd, limit)| Op::Range(lo, hi, fwd, limit)),
    ]
}

/// The edit an `Op::Update` makes from the old value: keep, remove, or set the old value (empty
/// if absent) with `suffix` appended — growing values cross the inline limit into value objects
/// — or `suffix` alone, which may shrink them back.
fn edit_of(mode: u8, old: Option<&[u8]>, suffix: &[u8]) -> Edit {
    match mode {
        0 => Edit::Keep,
        1 => Edit::Remove,
        2 => Edit::Set([old.unwrap_or_default(), suffix].concat()),
        _ => Edit::Set(suffix.to_vec()),
    }
}

/// Transactions: their operations and whether they commit.
fn txs() -> impl Strategy<Value = Vec<(Vec<Op>, bool)>> {
    prop::collection::vec((prop::collection::vec(op(), 1..12), prop::bool::weighted(0.85)), 1..40)
}

proptest! {
    #![proptest_config(ordo_seed::proptest_config("tree_matches_btreemap", 256))]

    #[test]
    fn tree_matches_btreemap(txs in txs()) {
        let db = db(Versions::Single);
        let tree = db.run(|tx| BTree::create_with(tx, TreeOptions::with_node_bytes(256))).unwrap();
        let mut model = Model::new();
        for (ops, commit) in txs {
            let mut tx = db.begin().unwrap();
            let mut pending = model.clone();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        let old = tree.insert(&mut tx, &k, &v).unwrap();
                        prop_assert_eq!(old, pending.insert(k, v));
                    }
                    Op::Remove(k) => {
                        prop_assert_eq!(tree.remove(&mut tx, &k).unwrap(), pending.remove(&k));
                    }
                    Op::Get(k) => {
                        prop_assert_eq!(tree.get(&mut tx, &k).unwrap(), pending.get(&k).cloned());
                    }
                    Op::Update(k, mode, suffix) => {
                        let mut seen = None;
                        tree.update(&mut tx, &k, |old| {
                            seen = Some(old.map(<[u8]>::to_vec));
                            edit_of(mode, old, &suffix)
                        })
                        .unwrap();
                        prop_assert_eq!(seen, Some(pending.get(&k).cloned()), "f saw the value");
                        match edit_of(mode, pending.get(&k).map(Vec::as_slice), &suffix) {
                            Edit::Keep => {}
                            Edit::Remove => drop(pending.remove(&k)),
                            Edit::Set(v) => drop(pending.insert(k, v)),
                        }
                    }
                    Op::Range(lo, hi, forward, limit) => {
                        let dir = if forward { Direction::Forward } else { Direction::Backward };
                        let got = tree.range_entries(&mut tx, as_ref(&lo), as_ref(&hi), dir, limit);
                        if inverted(&lo, &hi) {
                            prop_assert_eq!(got, Err(ordo::Error::InvalidRange));
                        } else {
                            let want = model_range(&pending, &lo, &hi, dir, limit);
                            prop_assert_eq!(got.unwrap(), want);
                        }
                    }
                }
            }
            if commit {
                tx.commit().unwrap();
                model = pending;
            } else {
                tx.abort();
            }
            let stats = db.run(|tx| tree.check_invariants(tx)).unwrap();
            prop_assert_eq!(stats.entries, model.len());
        }
        let want: Vec<_> = model.into_iter().collect();
        prop_assert_eq!(db.run(|tx| tree.entries(tx)).unwrap(), want);
    }
}
