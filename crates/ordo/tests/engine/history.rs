//! Randomised concurrent histories, checked by `ordo-check`: every isolation mode × the logical,
//! system and skewed test clocks × single and multi-version × contended and uncontended key
//! sets. Aborted attempts are
//! recorded and checked too (opacity). Each test takes its seed from `ordo_seed` (printed as
//! `ORDO_SEED=<n>`; set it to replay the same random choices).
#![allow(clippy::unwrap_used, unreachable_pub)] // test code: panics are the failure reports

use crate::common;

use ordo::{Config, Isolation, Options, Ordo, Versions};
use ordo_check::{Recorder, check_opacity};
use ordo_clock::{Clock, LogicalClock, SystemClock, TestClock, ThreadSkew};

const THREADS: u32 = 4;
const TXNS: usize = 500;

/// Runs one configuration; returns the number of aborted attempts.
fn check_mode<C: Clock>(
    clock: C,
    versions: Versions,
    keys: usize,
    isolation: Isolation,
    seed: u64,
) -> usize {
    let db = Ordo::with_clock(Config { versions, ..Config::default() }, clock).unwrap();
    let lists = common::make_lists(&db, keys);
    let rec = Recorder::new();
    common::run_random(&db, &lists, &rec, THREADS, TXNS, Options::isolation(isolation), seed);
    common::final_read(&db, &lists, &rec);
    let h = rec.history();
    let aborted = h.len() - h.committed();
    let verdict = common::check_isolation(isolation, &h);
    if let Err(v) = verdict {
        panic!("{isolation:?}, {versions:?}, {keys} keys, stream seed {seed}: {v}");
    }
    let planned = THREADS as usize * TXNS + 1;
    assert_eq!(
        h.committed(),
        planned,
        "every planned transaction committed ({isolation:?}, {versions:?}, {keys} keys)"
    );
    aborted
}

fn all_modes<C: Clock>(test: &str, make: impl Fn() -> C) {
    let seed = ordo_seed::Seed::new(test);
    let mut contended_aborts = 0;
    for (i, isolation) in Isolation::ALL.into_iter().enumerate() {
        for versions in [Versions::Single, Versions::Multi] {
            for keys in [3, 40] {
                let stream = i as u64 * 100 + keys as u64 + versions as u64;
                let aborted = check_mode(make(), versions, keys, isolation, seed.derive(stream));
                if keys == 3 {
                    contended_aborts += aborted;
                }
            }
        }
    }
    // The histories are only evidence if attempts really raced.
    assert!(contended_aborts > 0, "contended runs aborted no attempt: the test lost its power");
}

#[test]
fn logical_clock_histories_are_accepted() {
    all_modes("logical_clock_histories_are_accepted", LogicalClock::new);
}

#[test]
fn system_clock_histories_are_accepted() {
    all_modes("system_clock_histories_are_accepted", SystemClock::new);
}

/// Threads skewed up to the claimed boundary behind the reference: a truthful, but very uncertain
/// clock. Commit waits are long (tens of µs), which widens every race window.
#[test]
fn skewed_test_clock_histories_are_accepted() {
    all_modes("skewed_test_clock_histories_are_accepted", || {
        TestClock::builder()
            .claimed_boundary_nanos(40_000)
            .skew_by_index(|i| ThreadSkew::offset(-((i as i64 * 13_000) % 40_000)))
            .build()
    });
}

/// Long read-only scans over every list race short updates. In multi-version mode the scans read
/// old versions and commit; in single-version mode they abort — but every attempt, committed or
/// not, must have seen one snapshot (opacity), which the checker verifies either way.
#[test]
fn long_scans_racing_updates_are_opaque_in_both_version_modes() {
    let seed = ordo_seed::Seed::new("long_scans_racing_updates_are_opaque_in_both_version_modes");
    for versions in [Versions::Multi, Versions::Single] {
        let db =
            Ordo::with_clock(Config { versions, ..Config::default() }, SystemClock::new()).unwrap();
        let lists = common::make_lists(&db, 24);
        let rec = Recorder::new();
        let scan_ops: Vec<common::Op> = (0..lists.len()).map(common::Op::Read).collect();
        let mut committed_scans = 0;
        std::thread::scope(|s| {
            let (db, lists, rec) = (&db, &lists, &rec);
            let seed = seed.derive(versions as u64);
            s.spawn(move || {
                common::run_random(db, lists, rec, 2, 300, Options::default(), seed);
            });
            let mut v = 0;
            // A scan still aborts when it meets a locked head, so each one is retried (every
            // attempt recorded) with back-off until it commits, a bounded number of times.
            for _ in 0..60 {
                for attempt in 0..2_000u32 {
                    if common::attempt(db, lists, rec, 900, Options::default(), &scan_ops, &mut v) {
                        committed_scans += 1;
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_micros(1 << attempt.min(10)));
                }
            }
        });
        let h = rec.history();
        if let Err(v) = check_opacity(&h) {
            panic!("{versions:?}: {v}");
        }
        if versions == Versions::Multi {
            assert!(committed_scans > 0, "multi-version scans should commit");
        }
    }
}

/// Strict serializable attempts read at an optimistic `rts = now().hi` (see `txn`'s "Optimistic
/// read timestamp"). With a wide boundary and half the threads lagging by all of it, writers
/// routinely draw write timestamps below concurrent readers' `rts` after those readers began,
/// so the revalidation of earlier reads is exercised on most contended reads.
#[test]
fn lagging_writers_under_a_wide_boundary_keep_strict_histories_opaque() {
    const BOUNDARY_NS: i64 = 200_000;
    let seed =
        ordo_seed::Seed::new("lagging_writers_under_a_wide_boundary_keep_strict_histories_opaque");
    for versions in [Versions::Single, Versions::Multi] {
        for keys in [3, 40] {
            let clock = TestClock::builder()
                .claimed_boundary_nanos(BOUNDARY_NS as u64)
                .skew_by_index(|i| ThreadSkew::offset(if i % 2 == 1 { -BOUNDARY_NS } else { 0 }))
                .build();
            let stream = seed.derive(versions as u64 * 100 + keys as u64);
            check_mode(clock, versions, keys, Isolation::StrictSerializable, stream);
        }
    }
}
