//! Multi-versioning with GC by oldest active timestamp: memory is reclaimed under a bounded
//! budget, stale snapshot reads see exactly the state at their timestamp, and a GC that ignores
//! an active transaction is caught by the poison pattern.
#![allow(clippy::unwrap_used, unreachable_pub)] // test code: panics are the failure reports

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use ordo::{Addr, BudgetPolicy, Config, Error, Isolation, Options, Ordo, Versions};
use ordo_clock::{Clock, LogicalClock, SystemClock, Timestamp};
use rand::{Rng, SeedableRng, rngs::SmallRng};

fn mv(blocks: usize, policy: BudgetPolicy, gc_interval_us: u64) -> Config {
    Config {
        versions: Versions::Multi,
        version_blocks_max: blocks,
        version_budget: policy,
        gc_interval_us,
        ..Config::default()
    }
}

/// A bounded budget survives a long update-heavy run with concurrent long scans: blocks are
/// recycled, no history is truncated, and every scan commits a consistent snapshot.
#[test]
fn bounded_budget_survives_update_heavy_run_with_scans() {
    let seed = &ordo_seed::Seed::new("bounded_budget_survives_update_heavy_run_with_scans");
    let db = Ordo::with_clock(mv(6, BudgetPolicy::Block, 200), SystemClock::new()).unwrap();
    let objects: Vec<Addr> =
        db.run(|tx| (0..64).map(|_| tx.alloc(&[0u64; 128])).collect()).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (db, objects, stop) = (&db, &objects, &stop);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed.derive(t));
                for i in 0..15_000u64 {
                    let a = rng.random_range(0..64);
                    let b = (a + rng.random_range(1..64)) % 64;
                    // Transfer-style update: the pair keeps a constant sum in word 0.
                    db.run(|tx| {
                        let mut x: [u64; 128] = tx.read(objects[a])?;
                        let mut y: [u64; 128] = tx.read(objects[b])?;
                        x[0] = x[0].wrapping_sub(i);
                        y[0] = y[0].wrapping_add(i);
                        x[1] = i;
                        tx.write(objects[a], &x)?;
                        tx.write(objects[b], &y)
                    })
                    .unwrap();
                }
                stop.store(true, Ordering::Release);
            });
        }
        let (db, objects, stop) = (&db, &objects, &stop);
        s.spawn(move || {
            let mut scans = 0;
            while !stop.load(Ordering::Acquire) || scans < 20 {
                let sum = db
                    .run_with(Options::isolation(Isolation::StrictSerializable), |tx| {
                        let mut sum = 0u64;
                        for o in objects {
                            let v = tx.read::<[u64; 128]>(*o);
                            if let Err(Error::Aborted(a)) = &v {
                                // MV readers wait for nothing and never find too new a head.
                                assert!(matches!(a, ordo::Abort::ReadLocked { .. }), "{a}");
                            }
                            sum = sum.wrapping_add(v?[0]);
                            std::thread::yield_now(); // a long scan
                        }
                        Ok::<_, Error>(sum)
                    })
                    .unwrap();
                assert_eq!(sum, 0, "scan saw a torn snapshot");
                scans += 1;
            }
        });
    });
    let v = db.version_stats();
    assert!(v.blocks_mapped <= 6, "{v:?}");
    assert!(v.blocks_recycled > 0, "the GC recycled nothing: {v:?}");
    assert_eq!(v.truncations, 0, "{v:?}");
}

/// The truncate policy keeps writers going when memory is exhausted and the GC cannot help.
#[test]
fn truncate_policy_drops_history_instead_of_blocking() {
    let db = Ordo::with_clock(mv(1, BudgetPolicy::Truncate, 0), LogicalClock::new()).unwrap();
    let a = db.run(|tx| tx.alloc(&[0u64; 4096])).unwrap();
    let reader = db.begin().unwrap(); // pins the snapshot: nothing can be recycled
    for i in 0..100u64 {
        db.run(|tx| tx.write(a, &[i; 4096])).unwrap();
    }
    assert!(db.version_stats().truncations > 0);
    drop(reader);
    let abort = Ordo::with_clock(mv(1, BudgetPolicy::Abort, 0), LogicalClock::new()).unwrap();
    let a = abort.run(|tx| tx.alloc(&[0u64; 4096])).unwrap();
    let _pin = abort.begin().unwrap();
    let options = Options { retries_max: 2, ..Options::default() };
    let mut last = Ok(());
    for i in 0..100u64 {
        last = abort.run_with(options, |tx| tx.write(a, &[i; 4096]));
        if last.is_err() {
            break;
        }
    }
    assert!(
        matches!(
            last,
            Err(Error::RetriesExhausted { last: ordo::Abort::VersionMemory { .. }, .. })
        ),
        "{last:?}"
    );
}

#[test]
fn zero_budget_is_a_config_error() {
    assert!(matches!(
        Ordo::with_clock(mv(0, BudgetPolicy::Block, 0), LogicalClock::new()),
        Err(Error::Config(_))
    ));
}

/// Stale snapshot reads: below the safe point is a typed error; at or above it, the state is
/// exactly the committed history replayed up to that timestamp.
#[test]
fn stale_snapshots_match_the_replayed_history() {
    let seed = &ordo_seed::Seed::new("stale_snapshots_match_the_replayed_history");
    let db = Ordo::with_clock(mv(64, BudgetPolicy::Block, 0), LogicalClock::new()).unwrap();
    let objects: Vec<Addr> = db.run(|tx| (0..8).map(|_| tx.alloc(&0u64)).collect()).unwrap();
    let log: Mutex<Vec<(Timestamp, usize, u64)>> = Mutex::new(Vec::new());
    let start = db.clock().now().lo();
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (db, objects, log) = (&db, &objects, &log);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed.derive(t + 10));
                for i in 0..2_000u64 {
                    let k = rng.random_range(0..objects.len());
                    let v = (t << 32) | i;
                    let mut tx = db.begin().unwrap();
                    if tx.write(objects[k], &v).is_err() {
                        continue;
                    }
                    if let Ok(info) = tx.commit() {
                        log.lock().unwrap().push((info.wts.unwrap(), k, v));
                    }
                }
            });
        }
    });
    let end = db.clock().now().lo();
    let mut log = log.into_inner().unwrap();
    log.sort();
    let replay = |ts: Timestamp| {
        let mut state = BTreeMap::new();
        for (wts, k, v) in &log {
            if *wts <= ts {
                state.insert(*k, *v);
            }
        }
        state
    };
    let mut rng = SmallRng::seed_from_u64(seed.derive(99));
    for _ in 0..200 {
        let ts = Timestamp::from_nanos(rng.random_range(start.as_nanos()..=end.as_nanos()));
        let seen: Vec<u64> =
            db.read_only_at(ts, |tx| objects.iter().map(|o| tx.read::<u64>(*o)).collect()).unwrap();
        let expected = replay(ts);
        for (k, v) in seen.iter().enumerate() {
            assert_eq!(*v, expected.get(&k).copied().unwrap_or(0), "object {k} at {ts:?}");
        }
    }
    // Writes are refused in a snapshot.
    let r = db.read_only_at(end, |tx| tx.write(objects[0], &1u64));
    assert_eq!(r, Err(Error::ReadOnly { addr: objects[0] }));
    // Advance the safe point past `start`; a snapshot below it is refused.
    db.collect_garbage();
    db.collect_garbage();
    let gc = db.gc_point();
    assert!(gc > start, "safe point {gc:?} did not pass {start:?}");
    let r = db.read_only_at(start, |tx| tx.read::<u64>(objects[0]));
    assert_eq!(r, Err(Error::SnapshotTooOld { ts: start, gc_point: gc }));
    assert!(db.read_only_at(gc, |tx| tx.read::<u64>(objects[0])).is_ok());
}

/// Fills old-version blocks with history of `a` while `reader` holds an old snapshot, then
/// runs two GC rounds and reads `a` from that snapshot.
fn recycle_under_reader(register: bool) -> Result<Vec<u8>, Error> {
    let db = Ordo::with_clock(mv(64, BudgetPolicy::Block, 0), LogicalClock::new()).unwrap();
    let a = db.run(|tx| tx.alloc_bytes(&[7u8; 65536])).unwrap();
    #[cfg(feature = "shortcuts")]
    let options = Options {
        shortcuts: ordo::txn::Shortcuts { skip_registration: !register, ..Default::default() },
        ..Options::default()
    };
    #[cfg(not(feature = "shortcuts"))]
    let options = {
        assert!(register, "the negative test needs the shortcuts feature");
        Options::default()
    };
    let mut reader = db.begin_with(options).unwrap();
    // 64 KiB copies: 15 per block; 100 updates retire several blocks.
    for i in 0..100u64 {
        db.run(|tx| tx.write_bytes(a, &[i as u8; 65536])).unwrap();
    }
    // Retire the updater's active block too (its worker lives in this thread's cache).
    let other =
        std::thread::scope(|s| s.spawn(|| db.run(|tx| tx.write_bytes(a, &[200u8; 65536]))).join());
    other.unwrap().unwrap();
    db.collect_garbage();
    let round = db.collect_garbage();
    if register {
        assert_eq!(round.blocks_recycled, 0, "blocks needed by the reader were recycled");
    }
    reader.read_bytes(a)
}

#[test]
fn registered_readers_keep_their_versions() {
    assert_eq!(recycle_under_reader(true).unwrap(), vec![7u8; 65536]);
}

#[cfg(feature = "shortcuts")]
#[test]
fn a_gc_that_ignores_a_reader_is_caught_by_the_poison() {
    let r = recycle_under_reader(false);
    assert!(matches!(r, Err(Error::VersionRecycled { .. })), "{:?}", r.map(|v| v[0]));
}
