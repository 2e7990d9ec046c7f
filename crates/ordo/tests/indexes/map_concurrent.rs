//! Concurrent map transactions checked against a sequential replay.
//!
//! Threads run explicit `begin`/`commit` loops of random inserts, removes and gets on one map
//! that starts with a single bucket, so it grows by splits while they race. Every committed
//! transaction is recorded with its outcomes and its commit timestamp: `wts` for a read-write
//! transaction, `rts` for a read-only one (which sees exactly the writes with `wts <= rts`).
//! Replaying the transactions in that order on a `BTreeMap` must reproduce every outcome and
//! the final contents — strict serializability of the map's operations. The logical clock gives
//! unique write timestamps; if a clock ever produced ties, those transactions touched disjoint
//! objects, hence disjoint keys, and any order between them replays the same.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::map_common;

use std::collections::BTreeMap;

use map_common::{Model, assert_same, db, key, value};
use ordo::map::{HashMap, MapOptions};
use ordo::{Error, Isolation, Options, Ordo, Tx, Versions};
use ordo_clock::{Clock, LogicalClock, Timestamp};
use rand::{Rng, SeedableRng, rngs::SmallRng};

/// Attempts one transaction may take before the test calls it a livelock.
const ATTEMPTS_MAX: u32 = 100_000;

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
    Get(Vec<u8>),
    Len,
    Entries,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Value(Option<Vec<u8>>),
    Len(usize),
    Entries(Vec<(Vec<u8>, Vec<u8>)>),
}

struct Committed {
    ts: Timestamp,
    read_only: bool,
    thread: usize,
    seq: usize,
    ops: Vec<Op>,
    outcomes: Vec<Outcome>,
}

/// Runs `ops` in `tx`. With `yield_between`, the thread yields before each operation, so that
/// transactions interleave even when the machine has fewer free cores than threads.
fn run_ops<C: Clock>(
    tx: &mut Tx<'_, C>,
    map: HashMap,
    ops: &[Op],
    yield_between: bool,
) -> Result<Vec<Outcome>, Error> {
    ops.iter()
        .map(|op| {
            if yield_between {
                std::thread::yield_now();
            }
            Ok(match op {
                Op::Insert(k, v) => Outcome::Value(map.insert(tx, k, v)?),
                Op::Remove(k) => Outcome::Value(map.remove(tx, k)?),
                Op::Get(k) => Outcome::Value(map.get(tx, k)?),
                Op::Len => Outcome::Len(map.len(tx)?),
                Op::Entries => {
                    let mut e = map.entries(tx)?;
                    e.sort();
                    Outcome::Entries(e)
                }
            })
        })
        .collect()
}

fn apply(model: &mut Model, op: &Op) -> Outcome {
    match op {
        Op::Insert(k, v) => Outcome::Value(model.insert(k.clone(), v.clone())),
        Op::Remove(k) => Outcome::Value(model.remove(k)),
        Op::Get(k) => Outcome::Value(model.get(k).cloned()),
        Op::Len => Outcome::Len(model.len()),
        Op::Entries => {
            Outcome::Entries(model.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        }
    }
}

/// Random operations of one transaction: usually 1–3 writes and reads; one in ten transactions
/// only reads, sometimes the whole map.
fn random_ops(rng: &mut SmallRng, keys: u32, writes_only: bool) -> Vec<Op> {
    if !writes_only && rng.random_range(0..10) == 0 {
        let mut ops: Vec<Op> =
            (0..rng.random_range(1..4)).map(|_| Op::Get(key(rng.random_range(0..keys)))).collect();
        match rng.random_range(0..3) {
            0 => ops.push(Op::Len),
            1 => ops.push(Op::Entries),
            _ => {}
        }
        return ops;
    }
    (0..rng.random_range(1..4))
        .map(|_| {
            let k = key(rng.random_range(0..keys));
            match rng.random_range(0..100) {
                0..50 => Op::Insert(k, value(rng)),
                50..80 => Op::Remove(k),
                _ if writes_only => Op::Remove(k),
                _ => Op::Get(k),
            }
        })
        .collect()
}

/// Runs `txs` transactions on one thread, its choices drawn from `seed`; returns the committed
/// ones.
fn worker(
    db: &Ordo<LogicalClock>,
    options: Options,
    map: HashMap,
    (thread, seed): (usize, u64),
    txs: usize,
    keys: u32,
) -> Vec<Committed> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let writes_only = !options.isolation.validates_reads();
    let mut committed = Vec::new();
    for seq in 0..txs {
        let ops = random_ops(&mut rng, keys, writes_only);
        let mut attempts = 0;
        loop {
            attempts += 1;
            assert!(attempts < ATTEMPTS_MAX, "thread {thread} tx {seq} livelocked");
            let mut tx = db.begin_with(options).unwrap();
            let yield_between = rng.random_range(0..4) == 0;
            let outcome = match run_ops(&mut tx, map, &ops, yield_between) {
                Ok(outcomes) => tx.commit().map(|info| (info, outcomes)),
                Err(e) => Err(e),
            };
            match outcome {
                Ok((info, outcomes)) => {
                    committed.push(Committed {
                        ts: info.wts.unwrap_or(info.rts),
                        read_only: info.wts.is_none(),
                        thread,
                        seq,
                        ops,
                        outcomes,
                    });
                    break;
                }
                Err(Error::Aborted(_)) => {
                    for _ in 0..rng.random_range(0..(64u32 << attempts.min(8))) {
                        std::hint::spin_loop();
                    }
                    std::thread::yield_now();
                }
                Err(e) => panic!("thread {thread} tx {seq}: {e}"),
            }
        }
    }
    committed
}

/// Runs `threads` workers and returns every committed transaction in timestamp order.
fn race(
    db: &Ordo<LogicalClock>,
    options: Options,
    map: HashMap,
    threads: usize,
    txs: usize,
    keys: u32,
) -> Vec<Committed> {
    let seed = &ordo_seed::Seed::new("race");
    let start = std::sync::Barrier::new(threads);
    let mut all: Vec<Committed> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let start = &start;
                let thread_seed = seed.derive(t as u64);
                s.spawn(move || {
                    start.wait();
                    worker(db, options, map, (t, thread_seed), txs, keys)
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    // A read-only transaction at `rts` comes after every write at `wts <= rts`.
    all.sort_by_key(|c| (c.ts, c.read_only, c.thread, c.seq));
    all
}

fn check_serial(
    versions: Versions,
    map_options: MapOptions,
    threads: usize,
    txs: usize,
    keys: u32,
) {
    let db = db(versions);
    let map = db.run(|tx| HashMap::create_with(tx, 0, map_options)).unwrap();
    let committed = race(&db, Options::default(), map, threads, txs, keys);
    assert_eq!(committed.len(), threads * txs);
    let mut model: Model = BTreeMap::new();
    for c in &committed {
        for (op, got) in c.ops.iter().zip(&c.outcomes) {
            let want = apply(&mut model, op);
            assert!(
                *got == want,
                "thread {} tx {} (ts {:?}, read-only {}): {op:?} returned {got:?}, replay says {want:?}",
                c.thread,
                c.seq,
                c.ts,
                c.read_only
            );
        }
    }
    db.run(|tx| assert_same(tx, map, &model)).unwrap();
    let shape = db.run(|tx| map.verify(tx)).unwrap();
    assert!(shape.buckets > 4, "the map grew while racing: {shape:?}");
    let stats = db.stats();
    assert!(stats.aborts_total() > 0, "the threads did conflict: {stats:?}");
}

#[test]
fn concurrent_ops_replay_in_commit_order() {
    check_serial(Versions::Single, MapOptions::default(), 4, 600, 800);
}

#[test]
fn concurrent_ops_replay_in_commit_order_multi_version() {
    check_serial(Versions::Multi, MapOptions::default(), 3, 400, 300);
}

#[test]
fn concurrent_ops_on_overflow_chains() {
    let options = MapOptions { depth_bits_max: 3, ..MapOptions::default() };
    check_serial(Versions::Single, options, 3, 200, 200);
}

#[test]
fn snapshot_isolation_keeps_the_structure_intact() {
    // SI validates no reads, so outcomes need not replay; the structure must still verify —
    // including racing inserts into overflow chains — and every read path must agree.
    for depth_bits_max in [3, 60] {
        let db = db(Versions::Single);
        let options = MapOptions { depth_bits_max, ..MapOptions::default() };
        let map = db.run(|tx| HashMap::create_with(tx, 0, options)).unwrap();
        let si = Options::isolation(Isolation::Snapshot);
        race(&db, si, map, 3, 200, 150);
        let mut tx = db.begin().unwrap();
        let shape = map.verify(&mut tx).unwrap();
        let mut model = Model::new();
        map.for_each(&mut tx, |k, v| {
            assert!(model.insert(k.to_vec(), v.to_vec()).is_none(), "duplicate key");
        })
        .unwrap();
        assert_eq!(shape.entries, model.len());
        assert_same(&mut tx, map, &model).unwrap();
    }
}
