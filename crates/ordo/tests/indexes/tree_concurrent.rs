//! Concurrency: writer threads run random inserts and removes on one tree in explicit
//! `begin`/`commit` loops and record every committed transaction's operations, results and write
//! timestamp; replaying them on a `BTreeMap` in timestamp order must reproduce every result and
//! the final tree (strict serializability, ordered by `wts`). Meanwhile reader threads scan the
//! tree in both directions inside transactions and check a cross-key invariant — keys `p/i/a`
//! and `p/i/b` are only ever inserted and removed together, with one value — in every attempt
//! whose scan completed, including attempts that then abort (they also write a private object,
//! so validation can fail after the scan): opacity means even those saw one snapshot.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::tree_common;

use std::collections::BTreeMap;
use std::ops::{Bound, ControlFlow};
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use ordo::tree::{BTree, Direction, TreeOptions};
use ordo::{Config, Error, Isolation, Options, Ordo, Versions};
use ordo_clock::LogicalClock;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use tree_common::Model;

const WRITERS: usize = 3;
const READERS: usize = 2;
const TXS_PER_WRITER: usize = 3000;
const SINGLE_KEYS: u32 = 120;
const PAIR_KEYS: u32 = 40;
/// Attempts one planned transaction may take before the test gives up.
const ATTEMPTS_MAX: usize = 100_000;

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
}

#[derive(Debug)]
struct Committed {
    /// Where the transaction serializes: `(wts, 0)` for a writer, `(rts, 1)` for one that turned
    /// out read-only (only removes of absent keys) — it saw every write with `wts <= rts`.
    order: (u64, u8),
    ops: Vec<Op>,
    results: Vec<Option<Vec<u8>>>,
}

fn single(i: u32) -> Vec<u8> {
    format!("s/{i:04}").into_bytes()
}

fn pair(i: u32, side: char) -> Vec<u8> {
    format!("p/{i:03}/{side}").into_bytes()
}

/// One transaction's operations: single-key changes and pair changes.
fn plan(rng: &mut SmallRng) -> Vec<Op> {
    let mut ops = Vec::new();
    for _ in 0..rng.random_range(1..4) {
        let len =
            if rng.random_bool(0.3) { rng.random_range(40..90) } else { rng.random_range(0..12) };
        let v: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        match rng.random_range(0..4) {
            0 => ops.push(Op::Insert(single(rng.random_range(0..SINGLE_KEYS)), v)),
            1 => ops.push(Op::Remove(single(rng.random_range(0..SINGLE_KEYS)))),
            2 => {
                let i = rng.random_range(0..PAIR_KEYS);
                ops.push(Op::Insert(pair(i, 'a'), v.clone()));
                ops.push(Op::Insert(pair(i, 'b'), v));
            }
            _ => {
                let i = rng.random_range(0..PAIR_KEYS);
                ops.push(Op::Remove(pair(i, 'a')));
                ops.push(Op::Remove(pair(i, 'b')));
            }
        }
    }
    ops
}

/// Checks a scan's view of the pair keys: ordered, and every `a` with its `b` and one value.
fn assert_pairs(entries: &[(Vec<u8>, Vec<u8>)], direction: Direction) {
    let mut sorted = entries.to_vec();
    if direction == Direction::Backward {
        sorted.reverse();
    }
    assert!(sorted.windows(2).all(|w| w[0].0 < w[1].0), "scan out of order");
    let pairs: BTreeMap<&[u8], &[u8]> = sorted
        .iter()
        .filter(|(k, _)| k.starts_with(b"p/"))
        .map(|(k, v)| (&k[..], &v[..]))
        .collect();
    for (k, v) in &pairs {
        let (stem, side) = k.split_at(k.len() - 1);
        let other = [stem, if side == b"a" { b"b" } else { b"a" }].concat();
        assert_eq!(pairs.get(&other[..]), Some(v), "torn pair at {:?}", String::from_utf8_lossy(k));
    }
}

struct Outcome {
    committed: Vec<Committed>,
    scans_checked: usize,
    aborted_after_check: usize,
}

fn run(
    versions: Versions,
    isolation: Isolation,
    seed: &ordo_seed::Seed,
) -> (Ordo<LogicalClock>, BTree, Outcome) {
    let options = Options { isolation, ..Options::default() };
    let config = Config { versions, options, ..Config::default() };
    let db = Ordo::with_clock(config, LogicalClock::new()).unwrap();
    let tree = db.run(|tx| BTree::create_with(tx, TreeOptions::with_node_bytes(256))).unwrap();
    let done = AtomicBool::new(false);
    let start = Barrier::new(WRITERS + READERS);
    let scans_checked = AtomicUsize::new(0);
    let aborted_after_check = AtomicUsize::new(0);
    let committed = std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (db, start) = (db.clone(), &start);
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(seed.derive(w as u64));
                    let mut log = Vec::new();
                    start.wait();
                    for _ in 0..TXS_PER_WRITER {
                        let ops = plan(&mut rng);
                        log.push(commit_ops(&db, tree, ops, &mut rng));
                    }
                    log
                })
            })
            .collect();
        for r in 0..READERS {
            let (db, done, start) = (db.clone(), &done, &start);
            let (scans_checked, aborted_after_check) = (&scans_checked, &aborted_after_check);
            s.spawn(move || {
                let marker = db.run(|tx| tx.alloc(&0u64)).unwrap();
                let mut n = 0u64;
                start.wait();
                while !done.load(Ordering::Relaxed) {
                    n += 1;
                    let direction =
                        if n.is_multiple_of(2) { Direction::Forward } else { Direction::Backward };
                    let mut tx = db.begin().unwrap();
                    let mut seen = Vec::new();
                    // Every third scan covers the whole tree, the others the pair keys only.
                    let (lo, hi): (Bound<&[u8]>, Bound<&[u8]>) = if n.is_multiple_of(3) {
                        (Bound::Unbounded, Bound::Unbounded)
                    } else {
                        (Bound::Included(b"p/"), Bound::Excluded(b"p0"))
                    };
                    let scan = tree.range(&mut tx, lo, hi, direction, None, |k, v| {
                        seen.push((k.to_vec(), v.to_vec()));
                        if seen.len() % 16 == 0 {
                            std::thread::yield_now();
                        }
                        ControlFlow::Continue(())
                    });
                    match scan {
                        Ok(count) => {
                            assert_eq!(count, seen.len());
                            assert_pairs(&seen, direction);
                            scans_checked.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Error::Aborted(_)) => continue,
                        Err(e) => panic!("reader {r}: {e}"),
                    }
                    let wrote = tx.write(marker, &n);
                    match wrote.and_then(|()| tx.commit().map(|_| ())) {
                        Ok(()) => {}
                        Err(Error::Aborted(_)) => {
                            aborted_after_check.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("reader {r}: {e}"),
                    }
                }
            });
        }
        // Stop the readers before a writer's panic propagates, or the scope would wait forever.
        let joined: Vec<_> = writers.into_iter().map(|h| h.join()).collect();
        done.store(true, Ordering::Relaxed);
        joined.into_iter().flat_map(|r| r.unwrap()).collect::<Vec<Committed>>()
    });
    let outcome = Outcome {
        committed,
        scans_checked: scans_checked.into_inner(),
        aborted_after_check: aborted_after_check.into_inner(),
    };
    (db, tree, outcome)
}

/// Runs `ops` in one transaction until it commits; returns what it did.
fn commit_ops(db: &Ordo<LogicalClock>, tree: BTree, ops: Vec<Op>, rng: &mut SmallRng) -> Committed {
    for _ in 0..ATTEMPTS_MAX {
        let mut tx = db.begin().unwrap();
        let mut results = Vec::new();
        let mut aborted = false;
        for op in &ops {
            // With two cores, yielding inside the transaction is what makes attempts overlap.
            if rng.random_bool(0.3) {
                std::thread::yield_now();
            }
            let r = match op {
                Op::Insert(k, v) => tree.insert(&mut tx, k, v),
                Op::Remove(k) => tree.remove(&mut tx, k),
            };
            match r {
                Ok(r) => results.push(r),
                Err(Error::Aborted(_)) => {
                    aborted = true;
                    break;
                }
                Err(e) => panic!("writer: {e}"),
            }
        }
        if aborted {
            continue;
        }
        match tx.commit() {
            Ok(info) => {
                let order = match info.wts {
                    Some(wts) => (wts.as_nanos(), 0),
                    None => (info.rts.as_nanos(), 1),
                };
                return Committed { order, ops, results };
            }
            Err(Error::Aborted(_)) => continue,
            Err(e) => panic!("writer commit: {e}"),
        }
    }
    panic!("a writer transaction did not commit in {ATTEMPTS_MAX} attempts");
}

/// Replays the committed transactions in write-timestamp order, checking every result, and
/// returns the final model.
fn replay(mut committed: Vec<Committed>) -> Model {
    committed.sort_by_key(|c| c.order);
    let mut model = Model::new();
    for c in &committed {
        for (op, got) in c.ops.iter().zip(&c.results) {
            let want = match op {
                Op::Insert(k, v) => model.insert(k.clone(), v.clone()),
                Op::Remove(k) => model.remove(k),
            };
            assert_eq!(got, &want, "{op:?} at {:?}", c.order);
        }
    }
    model
}

fn check_serializable(versions: Versions, seed: &ordo_seed::Seed) {
    let (db, tree, outcome) = run(versions, Isolation::StrictSerializable, seed);
    assert_eq!(outcome.committed.len(), WRITERS * TXS_PER_WRITER);
    let model = replay(outcome.committed);
    let want: Vec<_> = model.into_iter().collect();
    assert_eq!(db.run(|tx| tree.entries(tx)).unwrap(), want);
    let stats = db.run(|tx| tree.check_invariants(tx)).unwrap();
    assert_eq!(stats.entries, want.len());
    assert!(outcome.scans_checked > 0);
    eprintln!(
        "{versions:?}: depth {} leaves {}, {} scans checked, {} of them aborted afterwards; {:?}",
        stats.depth,
        stats.leaves,
        outcome.scans_checked,
        outcome.aborted_after_check,
        db.stats()
    );
}

#[test]
fn writers_replay_in_wts_order_and_readers_see_snapshots_single_version() {
    let seed = ordo_seed::Seed::new(
        "writers_replay_in_wts_order_and_readers_see_snapshots_single_version",
    );
    check_serializable(Versions::Single, &seed);
}

#[test]
fn writers_replay_in_wts_order_and_readers_see_snapshots_multi_version() {
    let seed =
        ordo_seed::Seed::new("writers_replay_in_wts_order_and_readers_see_snapshots_multi_version");
    check_serializable(Versions::Multi, &seed);
}

#[test]
fn snapshot_isolation_keeps_the_structure_intact() {
    // Reads are not validated under SI, so results need not replay serially; but every
    // structural decision writes what it depends on, so the tree stays well-formed and pairs
    // (written together) stay whole.
    let seed = ordo_seed::Seed::new("snapshot_isolation_keeps_the_structure_intact");
    let (db, tree, outcome) = run(Versions::Multi, Isolation::StrictSnapshot, &seed);
    assert_eq!(outcome.committed.len(), WRITERS * TXS_PER_WRITER);
    db.run(|tx| tree.check_invariants(tx)).unwrap();
    let all = db.run(|tx| tree.entries(tx)).unwrap();
    assert_pairs(&all, Direction::Forward);
}

#[test]
fn allocation_never_reuses_a_slot_freed_after_the_snapshot() {
    // The engine regression the SI run above found: a slot freed after an attempt's read
    // timestamp holds, in that attempt's snapshot, a live object; handing it to the attempt's
    // allocation aliased the two in its own view (the write set shadows the snapshot). Now the
    // attempt aborts, and its retry (a later snapshot) may use the slot.
    let db = tree_common::db(Versions::Multi);
    let v = db.run(|tx| tx.alloc_bytes(&[1u8; 40])).unwrap();
    let mut t1 = db.begin().unwrap();
    assert_eq!(t1.read_bytes(v).unwrap(), vec![1u8; 40]);
    // A second transaction on this thread (another worker) frees the object and commits; the
    // slot goes back to the slab that `t1`'s worker allocates from.
    let mut t2 = db.begin().unwrap();
    t2.free(v).unwrap();
    t2.commit().unwrap();
    let mut got = Vec::new();
    for _ in 0..64 {
        match t1.alloc_bytes(&[2u8; 40]) {
            Ok(a) => got.push(a),
            Err(Error::Aborted(ordo::Abort::TooNew { addr, .. })) => {
                assert_eq!(addr, v);
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(!got.contains(&v), "the snapshot's object and a new one share {v}");
    // Whatever the allocator order, the snapshot still reads the old object.
    if t1.doomed().is_none() {
        assert_eq!(t1.read_bytes(v).unwrap(), vec![1u8; 40]);
    }
    drop(t1);
    // A fresh attempt may take the slot.
    let fresh =
        db.run(|tx| (0..64).map(|_| tx.alloc_bytes(&[3u8; 40])).collect::<Result<Vec<_>, _>>());
    assert!(fresh.unwrap().contains(&v));
}

/// `BTree::update` is one read-modify-write: concurrent increments of a few counters through it
/// (each transaction bumps two of them) lose none, while filler keys keep the tree deep enough
/// for splits to run beside them.
#[test]
fn update_increments_are_not_lost() {
    const THREADS: usize = 3;
    const TXS: usize = 3000;
    const COUNTERS: usize = 4;
    let db = Ordo::with_clock(Config::default(), LogicalClock::new()).unwrap();
    let tree = db.run(|tx| BTree::create_with(tx, TreeOptions::with_node_bytes(256))).unwrap();
    let counter = |c: usize| format!("c/{c}").into_bytes();
    let bump = |old: Option<&[u8]>| {
        let n = old.map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
        ordo::tree::Edit::Set((n + 1).to_le_bytes().to_vec())
    };
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (db, tree) = (&db, tree);
            s.spawn(move || {
                for i in 0..TXS {
                    db.run(|tx| {
                        tree.update(tx, &counter((t + i) % COUNTERS), bump)?;
                        tree.insert(tx, format!("f/{t}/{i:05}").as_bytes(), &[7u8; 24])?;
                        tree.update(tx, &counter((t + i + 1) % COUNTERS), bump)
                    })
                    .unwrap();
                }
            });
        }
    });
    let total: u64 = db
        .run(|tx| {
            let mut sum = 0;
            for c in 0..COUNTERS {
                let v = tree.get(tx, &counter(c))?.unwrap();
                sum += u64::from_le_bytes(v.as_slice().try_into().unwrap());
            }
            tree.check_invariants(tx)?;
            Ok::<_, Error>(sum)
        })
        .unwrap();
    assert_eq!(total, (2 * THREADS * TXS) as u64, "increments lost");
}
