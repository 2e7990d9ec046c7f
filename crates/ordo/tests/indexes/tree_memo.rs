//! The per-attempt memo of where keys were found (`txn::memo`): an operation on a key that the
//! same transaction found before reads the remembered leaf instead of descending. These tests
//! make that leaf wrong in every way one transaction can — merged away and freed, split, too
//! full or too empty for the change to stay in it — and check the answers against a
//! `BTreeMap` and the tree's invariants. Each fails without the safety check it names.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::tree_common;

use ordo::Versions;
use ordo::tree::{BTree, Edit, TreeOptions};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use tree_common::{Model, assert_same, db};

fn key(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

/// A tree of 256-byte nodes holding `key(0..n)` with 8-byte values (several leaves, depth 2+).
fn filled(n: u32) -> (ordo::Ordo<ordo_clock::LogicalClock>, BTree, Model) {
    let db = db(Versions::Single);
    let tree = db.run(|tx| BTree::create_with(tx, TreeOptions::with_node_bytes(256))).unwrap();
    let mut model = Model::new();
    db.run(|tx| {
        for i in 0..n {
            tree.insert(tx, &key(i), &u64::from(i).to_le_bytes())?;
        }
        Ok::<_, ordo::Error>(())
    })
    .unwrap();
    for i in 0..n {
        model.insert(key(i), u64::from(i).to_le_bytes().to_vec());
    }
    let stats = db.run(|tx| tree.check_invariants(tx)).unwrap();
    assert!(stats.depth >= 2 && stats.leaves >= 8, "{stats:?}");
    (db, tree, model)
}

/// The leaf a key was found in is merged into its left sibling and freed (`settle_path` forgets
/// the tree's memo; without it the next lookup reads the freed leaf and fails with
/// `NotAllocated`).
#[test]
fn a_remembered_leaf_that_merges_away_is_not_read() {
    let (db, tree, mut model) = filled(120);
    let last = 119;
    let mut tx = db.begin().unwrap();
    // Remember the last key's leaf, then empty the tree below it key by key, reading and
    // updating the last key after every removal: its leaf merges into the one before it
    // (and that one into the next, ...).
    assert_eq!(tree.get(&mut tx, &key(last)).unwrap(), model.get(&key(last)).cloned());
    for i in (0..last).rev() {
        assert_eq!(tree.remove(&mut tx, &key(i)).unwrap(), model.remove(&key(i)));
        assert_eq!(tree.get(&mut tx, &key(last)).unwrap(), model.get(&key(last)).cloned());
        let v = (u64::from(i) * 7).to_le_bytes().to_vec();
        tree.update(&mut tx, &key(last), |_| Edit::Set(v.clone())).unwrap();
        model.insert(key(last), v);
    }
    tx.commit().unwrap();
    db.run(|tx| tree.check_invariants(tx)).unwrap();
    db.run(|tx| assert_same(tx, tree, &model)).unwrap();
}

/// A change through a remembered leaf that does not fit it (a longer value) must split it
/// through its real path; one that leaves it under-full must merge or refill it. Without
/// `stays_in_leaf`, the leaf is settled as if it were the root: split in place into a subtree
/// one level too deep, or left under-full (`check_invariants` fails).
#[test]
fn a_change_that_leaves_the_remembered_leaf_descends() {
    let (db, tree, mut model) = filled(200);
    for i in [3u32, 77, 150, 199] {
        let mut tx = db.begin().unwrap();
        assert!(tree.get(&mut tx, &key(i)).unwrap().is_some());
        // 40-byte inline values: a few of them overflow a 256-byte leaf.
        for j in i.saturating_sub(3)..=i {
            let v = vec![j as u8; 40];
            tree.update(&mut tx, &key(j), |_| Edit::Set(v.clone())).unwrap();
            model.insert(key(j), v);
            assert!(tree.get(&mut tx, &key(j)).unwrap().is_some());
        }
        tx.commit().unwrap();
        db.run(|tx| tree.check_invariants(tx)).unwrap();
    }
    // Shrink them back and remove their neighbours: under-full leaves reached through the memo.
    for i in [3u32, 77, 150, 199] {
        let mut tx = db.begin().unwrap();
        for j in i.saturating_sub(3)..=i {
            assert!(tree.get(&mut tx, &key(j)).unwrap().is_some());
            tree.update(&mut tx, &key(j), |_| Edit::Set(vec![1])).unwrap();
            model.insert(key(j), vec![1]);
        }
        for j in i.saturating_sub(12)..i {
            assert!(tree.get(&mut tx, &key(j)).unwrap().is_some() == model.contains_key(&key(j)));
            tree.update(&mut tx, &key(j), |_| Edit::Remove).unwrap();
            model.remove(&key(j));
        }
        tx.commit().unwrap();
        db.run(|tx| tree.check_invariants(tx)).unwrap();
    }
    db.run(|tx| assert_same(tx, tree, &model)).unwrap();
}

/// Long transactions over a few hot keys, each key read before it is changed (the memo's
/// pattern), with inserts and removes of cold keys around them to move the hot keys between
/// leaves; the tree must equal the model, with every invariant, after every transaction.
#[test]
fn reads_then_changes_of_hot_keys_match_the_model() {
    let seed = ordo_seed::Seed::new("reads_then_changes_of_hot_keys_match_the_model");
    let mut rng = SmallRng::seed_from_u64(seed.derive(1));
    for versions in [Versions::Single, Versions::Multi] {
        let db = db(versions);
        let tree = db.run(|tx| BTree::create_with(tx, TreeOptions::with_node_bytes(256))).unwrap();
        let mut model = Model::new();
        for round in 0..300 {
            let mut tx = db.begin().unwrap();
            let mut pending = model.clone();
            for _ in 0..rng.random_range(1..40) {
                let hot = key(rng.random_range(0..12) * 50);
                let cold = key(rng.random_range(0..600));
                match rng.random_range(0..10) {
                    0..3 => {
                        let v = vec![rng.random(); rng.random_range(0..60)];
                        assert_eq!(
                            tree.insert(&mut tx, &cold, &v).unwrap(),
                            pending.insert(cold, v)
                        );
                    }
                    3..5 => assert_eq!(tree.remove(&mut tx, &cold).unwrap(), pending.remove(&cold)),
                    _ => {
                        assert_eq!(tree.get(&mut tx, &hot).unwrap(), pending.get(&hot).cloned());
                        let edit = match rng.random_range(0..4) {
                            0 => Edit::Remove,
                            1 => Edit::Keep,
                            _ => Edit::Set(vec![rng.random(); rng.random_range(0..70)]),
                        };
                        match &edit {
                            Edit::Remove => drop(pending.remove(&hot)),
                            Edit::Keep => {}
                            Edit::Set(v) => drop(pending.insert(hot.clone(), v.clone())),
                        }
                        tree.update(&mut tx, &hot, |_| edit).unwrap();
                        assert_eq!(tree.get(&mut tx, &hot).unwrap(), pending.get(&hot).cloned());
                    }
                }
            }
            if rng.random_bool(0.9) {
                tx.commit().unwrap();
                model = pending;
            } else {
                tx.abort();
            }
            let stats = db.run(|tx| tree.check_invariants(tx)).unwrap();
            assert_eq!(stats.entries, model.len(), "round {round} ({versions:?})");
        }
        db.run(|tx| assert_same(tx, tree, &model)).unwrap();
    }
}
