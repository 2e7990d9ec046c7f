//! The RLU runtime and the two hash sets (RLU and transactional): model tests against
//! `BTreeSet`, and concurrent histories checked for linearizability with `ordo-check` on the
//! logical clock, a skewed test clock (skew within its boundary) and the ORDO clock.
#![allow(clippy::unwrap_used, unreachable_pub)] // test code: panics are the failure reports

use crate::common::on_every_clock;
use crate::set_common;

use std::collections::BTreeSet;
use std::sync::Arc;

use ordo::{Config, Ordo};
use ordo_apps::hashset::TxnHashSet;
use ordo_apps::rlu::hashset::RluHashSet;
use ordo_apps::rlu::{NodeId, NodeValue, Rlu, RluError, RluOptions};
use ordo_clock::{Clock, LogicalClock};
use rand::{Rng, SeedableRng, rngs::SmallRng};

use set_common::{BUCKETS, Kind, SetHistory, pick, rlu_tagged};

fn options(capacity_nodes: usize, max_threads: usize) -> RluOptions {
    RluOptions { capacity_nodes, max_threads, ..RluOptions::default() }
}

#[test]
fn rlu_set_matches_btreeset_single_thread() {
    let seed = &ordo_seed::Seed::new("rlu_set_matches_btreeset_single_thread");
    let set = RluHashSet::new(LogicalClock::new(), 7, options(1_000, 4)).unwrap();
    let mut h = set.handle().unwrap();
    let mut model = BTreeSet::new();
    let mut rng = SmallRng::seed_from_u64(seed.derive(1));
    for _ in 0..5_000 {
        let k = rng.random_range(0..200u64);
        match rng.random_range(0..3) {
            0 => assert_eq!(h.contains(k).unwrap(), model.contains(&k), "contains {k}"),
            1 => assert_eq!(h.insert(k).unwrap(), model.insert(k), "insert {k}"),
            _ => assert_eq!(h.remove(k).unwrap(), model.remove(&k), "remove {k}"),
        }
    }
    assert_eq!(h.keys().unwrap(), model.iter().copied().collect::<Vec<_>>());
}

#[test]
fn txn_set_matches_btreeset_single_thread() {
    let seed = &ordo_seed::Seed::new("txn_set_matches_btreeset_single_thread");
    let db = Ordo::with_clock(Config::default(), LogicalClock::new()).unwrap();
    let set = TxnHashSet::create(&db, 7).unwrap();
    let mut model = BTreeSet::new();
    let mut rng = SmallRng::seed_from_u64(seed.derive(2));
    for _ in 0..3_000 {
        let k = rng.random_range(0..200u64);
        match rng.random_range(0..3) {
            0 => assert_eq!(set.contains(&db, k).unwrap(), model.contains(&k), "contains {k}"),
            1 => assert_eq!(set.insert(&db, k).unwrap(), model.insert(k), "insert {k}"),
            _ => assert_eq!(set.remove(&db, k).unwrap(), model.remove(&k), "remove {k}"),
        }
    }
    assert_eq!(set.keys(&db).unwrap(), model.iter().copied().collect::<Vec<_>>());
}

#[test]
fn bad_sizes_are_typed_errors() {
    assert!(matches!(
        RluHashSet::new(LogicalClock::new(), 0, RluOptions::default()),
        Err(RluError::BadOption { name: "buckets", .. })
    ));
    assert!(matches!(
        Rlu::new(LogicalClock::new(), options(0, 1)),
        Err(RluError::BadOption { name: "capacity_nodes", .. })
    ));
    let rlu = Rlu::new(LogicalClock::new(), options(2, 1)).unwrap();
    let mut t = rlu.thread().unwrap();
    assert!(matches!(rlu.thread(), Err(RluError::TooManyThreads { max: 1 })));
    let a = t.alloc_unshared(NodeValue::new(1, NodeId::NIL)).unwrap();
    t.alloc_unshared(NodeValue::new(2, NodeId::NIL)).unwrap();
    assert_eq!(
        t.alloc_unshared(NodeValue::new(3, NodeId::NIL)),
        Err(RluError::ArenaFull { capacity: 2 })
    );
    assert_eq!(
        t.section(|s| s.write(a, NodeValue::new(9, NodeId::NIL))),
        Err(RluError::NotLocked(a))
    );
    let db = Ordo::with_clock(Config::default(), LogicalClock::new()).unwrap();
    assert!(TxnHashSet::create(&db, 0).is_err());
}

/// Removed nodes are recycled after grace periods: a small arena survives many more inserts
/// than it has nodes, from several threads.
#[test]
fn freed_nodes_are_recycled() {
    let set = RluHashSet::new(LogicalClock::new(), 4, options(4 + 64 * 3, 4)).unwrap();
    std::thread::scope(|s| {
        for t in 0..3u64 {
            let set = &set;
            s.spawn(move || {
                let mut h = set.handle().unwrap();
                for i in 0..2_000u64 {
                    let k = t * 1_000 + i % 16;
                    assert!(h.insert(k).unwrap());
                    assert!(h.remove(k).unwrap());
                }
            });
        }
    });
    assert!(set.handle().unwrap().keys().unwrap().is_empty());
}

/// A writer moving a value between two objects; readers must see the sum unchanged (RLU's
/// consistent snapshot across objects).
fn snapshot_stress<C: Clock>(clock: C) {
    let rlu = Rlu::new(clock, options(16, 4)).unwrap();
    let (a, b) = {
        let mut t = rlu.thread().unwrap();
        (
            t.alloc_unshared(NodeValue::new(1_000, NodeId::NIL)).unwrap(),
            t.alloc_unshared(NodeValue::new(0, NodeId::NIL)).unwrap(),
        )
    };
    let rlu = &rlu;
    std::thread::scope(|s| {
        for w in 0..2u64 {
            s.spawn(move || {
                let mut t = rlu.thread().unwrap();
                for i in 0..300u64 {
                    let amount = (i + w) % 7;
                    t.section(|s| {
                        let (va, vb) = (s.deref(a)?, s.deref(b)?);
                        s.try_lock(a)?;
                        s.try_lock(b)?;
                        s.write(a, NodeValue { key: va.key - amount.min(va.key), ..va })?;
                        s.write(b, NodeValue { key: vb.key + amount.min(va.key), ..vb })
                    })
                    .unwrap();
                }
            });
        }
        s.spawn(move || {
            let mut t = rlu.thread().unwrap();
            for _ in 0..2_000 {
                let sum = t.section(|s| Ok(s.deref(a)?.key + s.deref(b)?.key)).unwrap();
                assert_eq!(sum, 1_000, "a reader saw a torn snapshot");
            }
        });
    });
}

on_every_clock!(snapshots_are_consistent_logical, snapshots_are_consistent_skewed_test_clock, snapshots_are_consistent_ordo => snapshot_stress());

fn rlu_linearizable<C: Clock>(clock: C, threads: u32, ops: u64) {
    let seed = &ordo_seed::Seed::new("rlu_linearizable");
    let set = RluHashSet::new(clock, BUCKETS as usize, options(256, 8)).unwrap();
    let hist = SetHistory::default();
    std::thread::scope(|s| {
        for p in 0..threads {
            let (set, hist) = (&set, &hist);
            s.spawn(move || {
                let mut h = set.handle().unwrap();
                let mut rng = SmallRng::seed_from_u64(seed.derive(u64::from(p) + 10));
                for i in 1..=ops {
                    let (k, kind) = pick(&mut rng);
                    let tag = (u64::from(p) + 1) << 32 | i;
                    hist.record(p, k % BUCKETS, k, kind, tag, || rlu_tagged(&mut h, kind, k, tag));
                }
            });
        }
    });
    let n = hist.check().unwrap();
    assert_eq!(n as u64, u64::from(threads) * ops);
}

fn txn_linearizable<C: Clock>(clock: C, threads: u32, ops: u64) {
    let seed = &ordo_seed::Seed::new("txn_linearizable");
    let db = Ordo::with_clock(Config::default(), clock).unwrap();
    let set = TxnHashSet::create(&db, BUCKETS as usize).unwrap();
    let hist = SetHistory::default();
    std::thread::scope(|s| {
        for p in 0..threads {
            let (set, hist, db) = (&set, &hist, &db);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed.derive(u64::from(p) + 20));
                for i in 1..=ops {
                    let (k, kind) = pick(&mut rng);
                    let tag = (u64::from(p) + 1) << 32 | i;
                    hist.record(p, k % BUCKETS, k, kind, tag, || {
                        let r = match kind {
                            Kind::Contains => set.contains_tagged(db, k),
                            Kind::Insert => set.insert_tagged(db, k, tag),
                            Kind::Remove => set.remove_tagged(db, k, tag),
                        }
                        .unwrap();
                        (r.result, r.tag_seen)
                    });
                }
            });
        }
    });
    let n = hist.check().unwrap();
    assert_eq!(n as u64, u64::from(threads) * ops);
}

on_every_clock!(rlu_set_is_linearizable_logical, rlu_set_is_linearizable_skewed_test_clock, rlu_set_is_linearizable_ordo => rlu_linearizable(4, 400));

on_every_clock!(txn_set_is_linearizable_logical, txn_set_is_linearizable_skewed_test_clock, txn_set_is_linearizable_ordo => txn_linearizable(4, 250));

/// The set shared through an `Arc` as the benchmark does, many threads, then the final size
/// equals the initial size plus successful inserts minus successful removes.
#[test]
fn concurrent_counts_add_up() {
    let seed = &ordo_seed::Seed::new("concurrent_counts_add_up");
    let set = Arc::new(RluHashSet::new(LogicalClock::new(), 16, options(2_000, 8)).unwrap());
    let totals: Vec<i64> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4u64)
            .map(|t| {
                let set = Arc::clone(&set);
                s.spawn(move || {
                    let mut h = set.handle().unwrap();
                    let mut rng = SmallRng::seed_from_u64(seed.derive(t));
                    let mut net = 0i64;
                    for _ in 0..2_000 {
                        let k = rng.random_range(0..400u64);
                        if rng.random_bool(0.5) {
                            net += i64::from(h.insert(k).unwrap());
                        } else {
                            net -= i64::from(h.remove(k).unwrap());
                        }
                    }
                    net
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let keys = set.handle().unwrap().keys().unwrap();
    assert_eq!(keys.len() as i64, totals.iter().sum::<i64>());
    assert!(keys.windows(2).all(|w| w[0] < w[1]));
}

/// Writers incrementing one object: conflicts abort and retry, no increment is lost.
#[test]
fn conflicting_writers_lose_no_update() {
    let rlu = Rlu::new(LogicalClock::new(), options(4, 4)).unwrap();
    let a = rlu.thread().unwrap().alloc_unshared(NodeValue::new(0, NodeId::NIL)).unwrap();
    std::thread::scope(|s| {
        for _ in 0..3 {
            let rlu = &rlu;
            s.spawn(move || {
                let mut t = rlu.thread().unwrap();
                for _ in 0..1_000 {
                    t.section(|s| {
                        let v = s.deref(a)?;
                        s.try_lock(a)?;
                        s.write(a, NodeValue::new(v.key + 1, NodeId::NIL))
                    })
                    .unwrap();
                }
            });
        }
    });
    let mut t = rlu.thread().unwrap();
    assert_eq!(t.section(|s| s.deref(a)).unwrap().key, 3_000);
}
