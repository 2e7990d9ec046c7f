//! RLU deferral (RLU §3.7; `RluOptions::defer_limit`): a writer keeps the writes of several
//! sections locked and unpublished and commits them together.
//!
//! * Histories of the hash set with deferral on, checked by `ordo-check` on the logical clock,
//!   a skewed test clock and the ORDO clock. A deferred update takes effect for other threads
//!   at the commit that publishes it, so every operation of a thread that has deferred writes
//!   is recorded as completing once they are published (its invocation is stamped as usual).
//! * The triggers of a deferred commit, each deterministic: another writer's conflict (sync
//!   request), the defer limit, a full log or a section that needs its own deferred lock, an
//!   explicit flush and dropping the handle — and, with the test-only shortcuts, the sync
//!   request and the defer limit removed: the conflicting writer then starves and the
//!   updates stay invisible.
#![allow(clippy::unwrap_used, unreachable_pub)] // test code: panics are the failure reports

use crate::common::on_every_clock;
use crate::set_common;

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ordo_apps::rlu::hashset::RluHashSet;
use ordo_apps::rlu::{NodeId, NodeValue, Rlu, RluOptions, RluStats};
use ordo_clock::{Clock, LogicalClock};
use rand::{Rng, SeedableRng, rngs::SmallRng};

use set_common::{BUCKETS, SetHistory, pick, rlu_tagged};

fn deferring(capacity_nodes: usize, max_threads: usize, limit: usize) -> RluOptions {
    RluOptions {
        capacity_nodes,
        max_threads,
        defer_limit: NonZeroUsize::new(limit),
        ..RluOptions::default()
    }
}

/// Threads run tagged set operations with deferral (limit 4); returns the summed counters.
fn deferred_linearizable<C: Clock>(clock: C, threads: u32, ops: u64) -> RluStats {
    let seed = &ordo_seed::Seed::new("deferred_linearizable");
    let set = RluHashSet::new(clock, BUCKETS as usize, deferring(256, 8, 4)).unwrap();
    let hist = SetHistory::default();
    let stats: Vec<RluStats> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|p| {
                let (set, hist) = (&set, &hist);
                s.spawn(move || {
                    let mut h = set.handle().unwrap();
                    let mut rng = SmallRng::seed_from_u64(seed.derive(u64::from(p) + 30));
                    let mut pending = Vec::new();
                    for i in 1..=ops {
                        let (k, kind) = pick(&mut rng);
                        let tag = (u64::from(p) + 1) << 32 | i;
                        pending.push(hist.run(p, k % BUCKETS, k, kind, tag, || {
                            rlu_tagged(&mut h, kind, k, tag)
                        }));
                        // Everything this thread did so far is published: it has completed.
                        if h.deferred_sections() == 0 {
                            pending.drain(..).for_each(|op| op.complete());
                        }
                    }
                    h.flush();
                    pending.drain(..).for_each(|op| op.complete());
                    h.stats()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let n = hist.check().unwrap();
    assert_eq!(n as u64, u64::from(threads) * ops);
    let total = stats.iter().fold(RluStats::default(), |a, s| RluStats {
        commits: a.commits + s.commits,
        write_backs: a.write_backs + s.write_backs,
        sync_requests: a.sync_requests + s.sync_requests,
        ..a
    });
    assert!(
        total.write_backs < total.commits,
        "no commit was deferred (the test does not exercise deferral): {total:?}"
    );
    eprintln!("{total:?}");
    total
}

on_every_clock!(
    deferred_set_is_linearizable_logical,
    deferred_set_is_linearizable_skewed_test_clock,
    deferred_set_is_linearizable_ordo => deferred_linearizable(4, 400)
);

/// One thread against a model, with a 4-slot log and a defer limit larger than the log holds:
/// deferred commits forced by a full log and by a section that needs its own deferred lock
/// (every remove of a key inserted in a deferred section does) keep the set exact. Another
/// handle, after each flush, sees the same set.
#[test]
fn deferred_set_matches_btreeset_with_a_small_log() {
    let seed = &ordo_seed::Seed::new("deferred_set_matches_btreeset_with_a_small_log");
    let options = RluOptions { log_capacity: 4, ..deferring(1_000, 4, 100) };
    let set = RluHashSet::new(LogicalClock::new(), 5, options).unwrap();
    let mut h = set.handle().unwrap();
    let mut model = BTreeSet::new();
    let mut rng = SmallRng::seed_from_u64(seed.derive(5));
    for i in 0..3_000 {
        let k = rng.random_range(0..60u64);
        match rng.random_range(0..3) {
            0 => assert_eq!(h.contains(k).unwrap(), model.contains(&k), "contains {k}"),
            1 => assert_eq!(h.insert(k).unwrap(), model.insert(k), "insert {k}"),
            _ => assert_eq!(h.remove(k).unwrap(), model.remove(&k), "remove {k}"),
        }
        if i % 500 == 0 {
            h.flush();
            let theirs = set.handle().unwrap().keys().unwrap();
            assert_eq!(theirs, model.iter().copied().collect::<Vec<_>>());
        }
    }
    assert_eq!(h.keys().unwrap(), model.iter().copied().collect::<Vec<_>>());
    let s = h.stats();
    assert!(s.write_backs > 0 && s.write_backs < s.commits, "{s:?}");
    drop(h);
    assert_eq!(set.handle().unwrap().keys().unwrap(), model.iter().copied().collect::<Vec<_>>());
}

/// Reads `a`, `b`, `c` in one section from a fresh handle.
fn observe<C: Clock>(rlu: &std::sync::Arc<Rlu<C>>, ids: &[NodeId]) -> Vec<u64> {
    let mut t = rlu.thread().unwrap();
    t.section(|s| ids.iter().map(|&id| Ok(s.deref(id)?.key)).collect()).unwrap()
}

fn increment<C: Clock>(t: &mut ordo_apps::rlu::RluThread<C>, id: NodeId) {
    t.section(|s| {
        let v = s.deref(id)?;
        s.try_lock(id)?;
        s.write(id, NodeValue::new(v.key + 1, NodeId::NIL))
    })
    .unwrap();
}

/// Three counters, each incremented once by a thread with defer limit 3: the first two
/// increments stay invisible to another thread (and the owner sees its own), the third commits
/// all three at once with one write-back.
fn defer_limit_script(options: RluOptions) -> (Vec<Vec<u64>>, RluStats) {
    let rlu = Rlu::new(LogicalClock::new(), options).unwrap();
    let ids: Vec<NodeId> = {
        let mut t = rlu.thread().unwrap();
        (0..3).map(|_| t.alloc_unshared(NodeValue::new(0, NodeId::NIL)).unwrap()).collect()
    };
    let mut owner = rlu.thread().unwrap();
    let mut seen = Vec::new();
    for (i, &id) in ids.iter().enumerate() {
        increment(&mut owner, id);
        let own = owner.section(|s| Ok(s.deref(id)?.key)).unwrap();
        assert_eq!(own, 1, "the owner sees its own deferred write");
        eprintln!("after increment {i}: {} deferred", owner.deferred_sections());
        seen.push(observe(&rlu, &ids));
    }
    let stats = owner.stats();
    drop(owner);
    seen.push(observe(&rlu, &ids));
    (seen, stats)
}

#[test]
fn the_defer_limit_commits_the_deferred_sections_together() {
    let (seen, stats) = defer_limit_script(deferring(8, 4, 3));
    assert_eq!(seen, [vec![0, 0, 0], vec![0, 0, 0], vec![1, 1, 1], vec![1, 1, 1]]);
    assert_eq!((stats.commits, stats.write_backs), (3, 1));
}

#[test]
fn without_deferral_every_writer_section_commits() {
    let (seen, stats) = defer_limit_script(RluOptions {
        capacity_nodes: 8,
        max_threads: 4,
        ..RluOptions::default()
    });
    assert_eq!(seen, [vec![1, 0, 0], vec![1, 1, 0], vec![1, 1, 1], vec![1, 1, 1]]);
    assert_eq!((stats.commits, stats.write_backs), (3, 3));
}

/// Removal test of the defer-limit commit: without it the three increments stay invisible
/// until the handle is dropped.
#[cfg(feature = "shortcuts")]
#[test]
fn without_the_defer_limit_commit_updates_stay_invisible() {
    use ordo_apps::rlu::RluShortcuts;
    let options = RluOptions {
        shortcuts: RluShortcuts { skip_defer_limit: true, ..RluShortcuts::default() },
        ..deferring(8, 4, 3)
    };
    let (seen, stats) = defer_limit_script(options);
    assert_eq!(seen, [vec![0, 0, 0], vec![0, 0, 0], vec![0, 0, 0], vec![1, 1, 1]]);
    assert_eq!((stats.commits, stats.write_backs), (0, 0));
}

/// The owner defers an increment of `a` (limit 8) and then runs only read-only sections; a
/// second writer increments `a`. Returns whether the second writer got through within
/// `patience`, what a third thread saw of `a` while the owner's write was deferred, the final
/// value and the owner's counters.
fn conflict_script(options: RluOptions, patience: Duration) -> (bool, u64, u64, RluStats) {
    let rlu = Rlu::new(LogicalClock::new(), options).unwrap();
    let (a, b) = {
        let mut t = rlu.thread().unwrap();
        (
            t.alloc_unshared(NodeValue::new(0, NodeId::NIL)).unwrap(),
            t.alloc_unshared(NodeValue::new(0, NodeId::NIL)).unwrap(),
        )
    };
    let deferred = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let give_up = AtomicBool::new(false);
    let (rlu, deferred, stop, give_up) = (&rlu, &deferred, &stop, &give_up);
    std::thread::scope(|s| {
        let owner = s.spawn(move || {
            let mut t = rlu.thread().unwrap();
            increment(&mut t, a);
            assert_eq!(t.deferred_sections(), 1);
            deferred.store(true, Ordering::SeqCst);
            while !stop.load(Ordering::SeqCst) {
                t.section(|s| s.deref(b)).unwrap();
            }
            t.stats()
        });
        while !deferred.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let seen_while_deferred = observe(rlu, &[a])[0];
        let writer = s.spawn(move || {
            let mut t = rlu.thread().unwrap();
            t.section(|s| {
                if give_up.load(Ordering::SeqCst) {
                    return Ok(false);
                }
                let v = s.deref(a)?;
                s.try_lock(a)?;
                s.write(a, NodeValue::new(v.key + 1, NodeId::NIL))?;
                Ok(true)
            })
            .unwrap()
        });
        let deadline = Instant::now() + patience;
        while !writer.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        give_up.store(true, Ordering::SeqCst);
        let got_through = writer.join().unwrap();
        stop.store(true, Ordering::SeqCst);
        let owner_stats = owner.join().unwrap();
        let last = observe(rlu, &[a])[0];
        (got_through, seen_while_deferred, last, owner_stats)
    })
}

#[test]
fn a_conflicting_writer_makes_the_deferred_owner_commit() {
    let (through, while_deferred, last, owner) =
        conflict_script(deferring(4, 4, 8), Duration::from_secs(20));
    assert_eq!(while_deferred, 0, "a deferred write was visible before its commit");
    assert!(through, "the conflicting writer did not get through in 20 s");
    assert_eq!(last, 2);
    assert_eq!(owner.sync_requests, 1, "{owner:?}");
}

/// Removal test of the sync request: the owner never commits (it runs only read-only sections
/// and stays under its defer limit), so the conflicting writer retries until it gives up.
#[cfg(feature = "shortcuts")]
#[test]
fn without_the_sync_request_a_conflicting_writer_starves() {
    use ordo_apps::rlu::RluShortcuts;
    let options = RluOptions {
        shortcuts: RluShortcuts { skip_sync_request: true, ..RluShortcuts::default() },
        ..deferring(4, 4, 8)
    };
    let (through, while_deferred, last, owner) =
        conflict_script(options, Duration::from_millis(300));
    assert_eq!(while_deferred, 0);
    assert!(!through, "the writer got through without a sync request");
    assert_eq!(owner.sync_requests, 0);
    // The owner's handle was dropped, which committed its increment.
    assert_eq!(last, 1);
}

/// Two deferring writers that each hold what the other wants: both requests are honoured at
/// the next attempt, nobody deadlocks, and no increment is lost.
#[test]
fn crossed_deferred_writers_lose_no_update() {
    let rlu = Rlu::new(LogicalClock::new(), deferring(4, 4, 8)).unwrap();
    let (a, b) = {
        let mut t = rlu.thread().unwrap();
        (
            t.alloc_unshared(NodeValue::new(0, NodeId::NIL)).unwrap(),
            t.alloc_unshared(NodeValue::new(0, NodeId::NIL)).unwrap(),
        )
    };
    std::thread::scope(|s| {
        for first in [a, b] {
            let rlu = &rlu;
            let second = if first == a { b } else { a };
            s.spawn(move || {
                let mut t = rlu.thread().unwrap();
                for _ in 0..500 {
                    increment(&mut t, first);
                    increment(&mut t, second);
                }
            });
        }
    });
    assert_eq!(observe(&rlu, &[a, b]), [1_000, 1_000]);
}
