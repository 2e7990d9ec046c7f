//! The worker's leaf hints (`txn::hints`): an insert whose key falls in the range of a leaf
//! this worker's earlier attempts appended to reads that leaf alone instead of descending. These
//! tests change the hinted leaf in every way that matters — split or merged away by another
//! thread after the hint was committed, split by the same attempt, a hint of an attempt that
//! aborted, a key just outside the hinted range — and check the tree's invariants and contents
//! against a `BTreeMap`. Each fails without the rule it names.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::tree_common;

use ordo::Versions;
use ordo::tree::{BTree, Edit, TreeOptions};
use ordo_clock::LogicalClock;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use tree_common::{Model, assert_same, db};

fn key(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

fn val(i: u32) -> Vec<u8> {
    u64::from(i).to_le_bytes().to_vec()
}

/// A tree of 256-byte nodes holding `key(0..n)` (several leaves, depth 2 or more).
fn filled(versions: Versions, n: u32) -> (ordo::Ordo<LogicalClock>, BTree, Model) {
    let db = db(versions);
    let tree = db.run(|tx| BTree::create_with(tx, TreeOptions::with_node_bytes(256))).unwrap();
    db.run(|tx| {
        for i in 0..n {
            tree.insert(tx, &key(i), &val(i))?;
        }
        Ok::<_, ordo::Error>(())
    })
    .unwrap();
    let model: Model = (0..n).map(|i| (key(i), val(i))).collect();
    let stats = db.run(|tx| tree.check_invariants(tx)).unwrap();
    assert!(stats.depth >= 2 && stats.leaves >= 8, "{stats:?}");
    (db, tree, model)
}

fn insert(db: &ordo::Ordo<LogicalClock>, tree: BTree, model: &mut Model, keys: &[u32]) {
    db.run(|tx| {
        for &i in keys {
            tree.insert(tx, &key(i), &val(i))?;
        }
        Ok::<_, ordo::Error>(())
    })
    .unwrap();
    for &i in keys {
        model.insert(key(i), val(i));
    }
}

fn check(db: &ordo::Ordo<LogicalClock>, tree: BTree, model: &Model) {
    db.run(|tx| tree.check_invariants(tx)).unwrap();
    db.run(|tx| assert_same(tx, tree, model)).unwrap();
}

/// Another thread (another worker) appends until the hinted last leaf splits: the hint names
/// the leaf's version before the split, so the next append descends. Without the version check
/// it goes into the left half (`check_invariants`: a key above its leaf's range).
fn split_by_another_worker(versions: Versions) {
    let (db, tree, mut model) = filled(versions, 200);
    insert(&db, tree, &mut model, &[200]);
    std::thread::scope(|s| {
        s.spawn(|| insert(&db, tree, &mut Model::new(), &(201..260).collect::<Vec<_>>()));
    });
    model.extend((201..260).map(|i| (key(i), val(i))));
    insert(&db, tree, &mut model, &[1000, 1001]);
    check(&db, tree, &model);
}

#[test]
fn a_hinted_leaf_split_by_another_worker_is_not_used_single_version() {
    split_by_another_worker(Versions::Single);
}

#[test]
fn a_hinted_leaf_split_by_another_worker_is_not_used_multi_version() {
    split_by_another_worker(Versions::Multi);
}

/// Another thread removes the hinted leaf's keys and those before it, so that it merges into its
/// left sibling and is freed: the next append reads it as not allocated and descends (without
/// that, the insert fails with `NotAllocated`).
#[test]
fn a_hinted_leaf_merged_away_by_another_worker_is_not_used() {
    let (db, tree, mut model) = filled(Versions::Single, 200);
    insert(&db, tree, &mut model, &[200]);
    std::thread::scope(|s| {
        s.spawn(|| {
            db.run(|tx| {
                for i in 120..=200 {
                    tree.remove(tx, &key(i))?;
                }
                Ok::<_, ordo::Error>(())
            })
            .unwrap()
        });
    });
    for i in 120..=200 {
        model.remove(&key(i));
    }
    insert(&db, tree, &mut model, &[1000, 150]);
    check(&db, tree, &model);
}

/// One attempt appends through its own (pending) hint until the leaf splits: the split forgets
/// the attempt's hints of the tree (`settle_path`), so the appends after it descend to the new
/// last leaf. Without that, they go into the left half.
#[test]
fn a_split_in_the_same_attempt_forgets_its_hints() {
    let (db, tree, mut model) = filled(Versions::Single, 200);
    insert(&db, tree, &mut model, &(200..300).collect::<Vec<_>>());
    check(&db, tree, &model);
}

/// A hint recorded by an attempt that then aborted is dropped with it. Here another worker
/// splits the leaf afterwards, and the next attempt writes the leaf through its memo (a `get`,
/// then an `update`) before appending: a stale pending hint would then look like the attempt's
/// own, and the append would go into the left half.
#[test]
fn an_aborted_attempt_leaves_no_hint() {
    let (db, tree, mut model) = filled(Versions::Single, 200);
    let mut tx = db.begin().unwrap();
    tree.insert(&mut tx, &key(200), &val(200)).unwrap();
    tx.abort();
    std::thread::scope(|s| {
        s.spawn(|| insert(&db, tree, &mut Model::new(), &(201..260).collect::<Vec<_>>()));
    });
    model.extend((201..260).map(|i| (key(i), val(i))));
    db.run(|tx| {
        assert_eq!(tree.get(tx, &key(199))?, Some(val(199)));
        tree.update(tx, &key(199), |_| Edit::Set(val(7)))?;
        tree.insert(tx, &key(1000), &val(1000))?;
        Ok::<_, ordo::Error>(())
    })
    .unwrap();
    model.insert(key(199), val(7));
    model.insert(key(1000), val(1000));
    check(&db, tree, &model);
}

/// Keys just outside a hinted leaf's range — above its upper separator, below its lower one —
/// go where a descent sends them (without the bounds check, into the hinted leaf).
#[test]
fn keys_outside_the_hinted_range_descend() {
    let db = db(Versions::Single);
    let tree = db.run(|tx| BTree::create_with(tx, TreeOptions::with_node_bytes(256))).unwrap();
    let two = |d: u8, i: u32| format!("{}{i:06}", d as char).into_bytes();
    let mut model = Model::new();
    db.run(|tx| {
        for i in 0..100 {
            for d in [b'a', b'b'] {
                tree.insert(tx, &two(d, i), &val(i))?;
            }
        }
        Ok::<_, ordo::Error>(())
    })
    .unwrap();
    for i in 0..100 {
        for d in [b'a', b'b'] {
            model.insert(two(d, i), val(i));
        }
    }
    // Appends to the end of the "a" keys hint their leaf, which ends where the "b" keys begin.
    for (d, i) in [(b'a', 100), (b'a', 101), (b'b', 5), (b'a', 102), (b'a', 50), (b'a', 103)] {
        let mut k = two(d, i);
        if i < 100 {
            // Between two loaded keys, outside the hinted leaf.
            k.push(b'x');
        }
        db.run(|tx| tree.insert(tx, &k, &val(i))).unwrap();
        model.insert(k, val(i));
        db.run(|tx| tree.check_invariants(tx)).unwrap();
    }
    check(&db, tree, &model);
}

/// Two threads append to interleaved growing ranges (ten "districts" each, shared), while a
/// third inserts and removes random keys of the same ranges, splitting and merging the leaves
/// the appenders have hinted. Every committed change must be there and the tree intact.
/// Randomized: rerun with the printed `ORDO_SEED`.
#[test]
fn concurrent_appends_and_restructuring_keep_the_tree_intact() {
    let seed = ordo_seed::Seed::new("concurrent_appends_and_restructuring_keep_the_tree_intact");
    for versions in [Versions::Single, Versions::Multi] {
        let db = db(versions);
        let tree = db.run(|tx| BTree::create_with(tx, TreeOptions::with_node_bytes(256))).unwrap();
        let k = |d: u32, i: u32| format!("d{d:02}/{i:06}").into_bytes();
        let models: Vec<Model> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3u64)
                .map(|t| {
                    let (db, k) = (&db, &k);
                    let mut rng = SmallRng::seed_from_u64(seed.derive(t));
                    s.spawn(move || {
                        // What this thread committed: key -> Some(value) or None (removed).
                        let mut mine = std::collections::BTreeMap::new();
                        let mut next = [0u32; 10];
                        for n in 0..600u32 {
                            let d = rng.random_range(0..10u32);
                            let changes: Vec<(Vec<u8>, Option<Vec<u8>>)> = if t < 2 {
                                // Appenders: ids t, t + 2, t + 4, ... of district d.
                                let i = next[d as usize] * 2 + t as u32;
                                next[d as usize] += 1;
                                vec![(k(d, i), Some(val(n)))]
                            } else {
                                // Random keys between the appenders' ids ("…/000012r").
                                (0..rng.random_range(1..6))
                                    .map(|_| {
                                        let mut key = k(d, rng.random_range(0..150u32));
                                        key.push(b'r');
                                        (key, rng.random_bool(0.6).then(|| val(n)))
                                    })
                                    .collect()
                            };
                            let committed = db.run(|tx| {
                                for (key, v) in &changes {
                                    match v {
                                        Some(v) => tree.insert(tx, key, v).map(drop)?,
                                        None => tree.remove(tx, key).map(drop)?,
                                    }
                                }
                                Ok::<_, ordo::Error>(())
                            });
                            committed.unwrap();
                            for (key, v) in changes {
                                mine.insert(key, v);
                            }
                        }
                        mine
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap().into_iter().filter_map(|(k, v)| Some((k, v?))).collect())
                .collect()
        });
        // The threads' keys are disjoint (even ids, odd ids, ids with an 'r'): the union is the
        // tree.
        let model: Model = models.into_iter().flatten().collect();
        check(&db, tree, &model);
    }
}
