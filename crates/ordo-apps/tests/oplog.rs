//! `ordo_apps::oplog`: linearizability under concurrency (checked by `ordo-check`, each operation a
//! one-operation transaction, so strict serializability is linearizability), the reverse map
//! against a sequential replay of the logged operations in `(timestamp, thread)` order, reads
//! against the replay up to their cut, and bad input.
//!
//! Clocks: the logical clock, and a `TestClock` whose threads are skewed by up to its claimed
//! boundary (the skew ORDO's boundary allows), where `get_ts` must wait the skew out.
#![allow(clippy::unwrap_used)] // test code: panics are the failure reports

use std::collections::BTreeMap;
use std::sync::Mutex;

use ordo_apps::oplog::{Apply, Mapping, Oplog, OplogError, Rmap, RmapOp};
use ordo_check::{Recorder, check_strict_serializable};
use ordo_clock::{Clock, LogicalClock, TestClock, ThreadSkew, Timestamp};
use rand::{Rng, SeedableRng, rngs::SmallRng};

/// Claimed boundary of the skewed test clock.
const BOUNDARY_NANOS: u64 = 2_000;

/// Threads skewed by 0, -700, -1400, -100, ... ns: all within `[-B, 0]`, so the clock keeps its
/// contract while raw readings of different threads disagree by up to 1.4 µs.
fn skewed_clock() -> TestClock {
    TestClock::builder()
        .claimed_boundary_nanos(BOUNDARY_NANOS)
        .skew_by_index(|i| ThreadSkew::offset(-((i as i64 * 700) % BOUNDARY_NANOS as i64)))
        .build()
}

/// Keys → append-only lists: every read names the order its appends were applied in, which is
/// what `ordo-check`'s list-append inference needs.
#[derive(Default)]
struct Lists(BTreeMap<u64, Vec<u64>>);

#[derive(Clone, Copy, Debug)]
struct Append {
    key: u64,
    value: u64,
}

impl Apply for Lists {
    type Op = Append;
    fn apply(&mut self, op: Append) {
        self.0.entry(op.key).or_default().push(op.value);
    }
}

/// `threads` threads append unique values to 3 keys and read whole lists, each operation
/// recorded as a one-operation transaction; returns the recorder.
fn run_lists<C: Clock>(clock: C, threads: usize, ops_per_thread: u64) -> Recorder {
    let seed = &ordo_seed::Seed::new("run_lists");
    let log = Oplog::new(Lists::default(), clock, threads).unwrap();
    let rec = Recorder::new();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (log, rec) = (&log, &rec);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed.derive(t as u64 + 11));
                for i in 0..ops_per_thread {
                    let key = rng.random_range(0..3u64);
                    let mut tx = rec.begin(t as u32);
                    if rng.random_bool(0.7) {
                        let value = (t as u64) << 32 | (i + 1);
                        log.log(t, Append { key, value }).unwrap();
                        tx.append(key, value);
                    } else {
                        let seen =
                            log.read(|l| l.0.get(&key).cloned().unwrap_or_default()).unwrap();
                        tx.read_list(key, &seen);
                    }
                    tx.commit();
                }
            });
        }
    });
    // A final read of every key fixes the version order of every append.
    for key in 0..3 {
        let mut tx = rec.begin(threads as u32);
        let seen = log.read(|l| l.0.get(&key).cloned().unwrap_or_default()).unwrap();
        tx.read_list(key, &seen);
        tx.commit();
    }
    rec
}

#[test]
fn linearizable_with_the_logical_clock() {
    for threads in [1, 2, 4] {
        let h = run_lists(LogicalClock::new(), threads, 1_500).history();
        check_strict_serializable(&h).unwrap_or_else(|v| panic!("{threads} threads: {v}"));
    }
}

#[test]
fn linearizable_with_a_clock_skewed_within_its_boundary() {
    for threads in [2, 4] {
        let h = run_lists(skewed_clock(), threads, 1_000).history();
        check_strict_serializable(&h).unwrap_or_else(|v| panic!("{threads} threads: {v}"));
    }
}

/// Every logged reverse-map update with its timestamp and thread, and every read's cut and
/// snapshot: the final map must equal the replay of all updates in `(timestamp, thread)` order
/// (stable within a thread), and each read the replay of the updates up to its cut.
fn rmap_matches_replay<C: Clock>(clock: C, threads: usize, ops_per_thread: usize) {
    let seed = &ordo_seed::Seed::new("rmap_matches_replay");
    type Snapshot = BTreeMap<u64, std::collections::BTreeSet<Mapping>>;
    let oplog = Oplog::new(Rmap::default(), clock, threads).unwrap();
    let logged = Mutex::new(Vec::<(Timestamp, usize, usize, RmapOp)>::new());
    let reads = Mutex::new(Vec::<(Timestamp, Snapshot)>::new());
    std::thread::scope(|s| {
        for t in 0..threads {
            let (oplog, logged, reads) = (&oplog, &logged, &reads);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed.derive(t as u64 + 3));
                let mut mine = Vec::new();
                for i in 0..ops_per_thread {
                    // Few pages and mappings shared by all threads: adds and removes of the
                    // same mapping race, so the order of application shows.
                    let page = rng.random_range(0..4u64);
                    let mapping = Mapping { space: rng.random_range(0..3), vaddr: 0x1000 };
                    let op = if rng.random_bool(0.5) {
                        RmapOp::Add { page, mapping }
                    } else {
                        RmapOp::Remove { page, mapping }
                    };
                    let ts = oplog.log(t, op).unwrap();
                    mine.push((ts, t, i, op));
                    if i % 50 == 0 {
                        let read = oplog.read_at(Rmap::snapshot).unwrap();
                        reads.lock().unwrap().push(read);
                    }
                }
                logged.lock().unwrap().extend(mine);
            });
        }
    });
    let final_map = oplog.into_inner().unwrap().snapshot();
    let mut ops = logged.into_inner().unwrap();
    ops.sort_by_key(|(ts, t, i, _)| (*ts, *t, *i));
    let replay = |up_to: Option<Timestamp>| {
        let mut m = Rmap::default();
        for (ts, _, _, op) in &ops {
            if up_to.is_none_or(|c| *ts <= c) {
                m.apply(*op);
            }
        }
        m.snapshot()
    };
    assert_eq!(final_map, replay(None), "{threads} threads: final map");
    let reads = reads.into_inner().unwrap();
    assert!(!reads.is_empty());
    for (cut, seen) in &reads {
        assert_eq!(*seen, replay(Some(*cut)), "{threads} threads: read at cut {cut:?}");
    }
}

#[test]
fn rmap_matches_the_sequential_replay() {
    for threads in [1, 2, 4] {
        rmap_matches_replay(LogicalClock::new(), threads, 2_000);
        rmap_matches_replay(skewed_clock(), threads, 1_000);
    }
}

#[test]
fn a_full_log_synchronizes_itself() {
    let oplog = Oplog::new(Rmap::default(), LogicalClock::new(), 1).unwrap();
    let m = Mapping { space: 1, vaddr: 0 };
    for page in 0..(ordo_apps::oplog::LOG_ENTRIES_MAX as u64 + 10) {
        oplog.log(0, RmapOp::Add { page, mapping: m }).unwrap();
    }
    assert_eq!(oplog.applied().unwrap(), ordo_apps::oplog::LOG_ENTRIES_MAX as u64);
    assert_eq!(oplog.read(Rmap::pages).unwrap(), ordo_apps::oplog::LOG_ENTRIES_MAX + 10);
}

#[test]
fn bad_input_is_a_typed_error() {
    assert_eq!(
        Oplog::new(Rmap::default(), LogicalClock::new(), 0).err(),
        Some(OplogError::Threads { threads: 0 })
    );
    assert!(
        Oplog::new(Rmap::default(), LogicalClock::new(), ordo_apps::oplog::THREADS_MAX + 1)
            .is_err()
    );
    let oplog = Oplog::new(Rmap::default(), LogicalClock::new(), 2).unwrap();
    let op = RmapOp::Add { page: 1, mapping: Mapping { space: 1, vaddr: 0 } };
    assert_eq!(oplog.log(2, op), Err(OplogError::ThreadIndex { thread: 2, threads: 2 }));
    assert_eq!(oplog.read(Rmap::len).unwrap(), 0, "a rejected update is not logged");
    assert_eq!(
        OplogError::ThreadIndex { thread: 2, threads: 2 }.to_string(),
        "oplog thread index 2 is out of range: the oplog has 2 logs"
    );
}

/// The negative tests. Thread X (counter exact) appends 1, then — after X returned — thread Y
/// (counter lagging by 800 ns, within the 1000 ns boundary) appends 2; a read must show [1, 2].
/// * `raw_timestamps` (original Oplog's unsynchronized counter readings instead of `get_ts`):
///   Y's reading is below X's, so 2 sorts first.
/// * `uncertain_by_thread` (ORDO §4.4's tie rule applied to `cmp_time`-uncertain timestamps):
///   with `get_ts`, Y's timestamp is above X's but by less than the boundary, and Y's lower
///   thread index puts 2 first.
///
/// The checker rejects both histories; with neither shortcut the same script passes.
#[cfg(feature = "shortcuts")]
#[test]
fn merging_without_respecting_the_boundary_breaks_real_time_order() {
    use ordo_apps::oplog::OplogShortcuts;
    use ordo_clock::Reference;

    let none = OplogShortcuts::default();
    let raw = OplogShortcuts { raw_timestamps: true, ..none };
    let by_thread = OplogShortcuts { uncertain_by_thread: true, ..none };
    for shortcuts in [none, raw, by_thread] {
        // A deterministic reference: every reading advances it by 1 ns.
        let clock = TestClock::builder()
            .claimed_boundary_nanos(1_000)
            .reference(Reference::Stepped { start_nanos: 1_000_000, step_nanos: 1 })
            .build();
        let oplog =
            Oplog::new(Lists::default(), clock.clone(), 2).unwrap().with_shortcuts(shortcuts);
        let rec = Recorder::new();
        let mut stamps = Vec::new();
        for (thread, offset_nanos, value) in [(1usize, 0i64, 1u64), (0, -800, 2)] {
            std::thread::scope(|s| {
                let h = s.spawn(|| {
                    clock.set_thread_skew(offset_nanos, 0);
                    let mut tx = rec.begin(thread as u32);
                    let ts = oplog.log(thread, Append { key: 1, value }).unwrap();
                    tx.append(1, value);
                    tx.commit();
                    ts
                });
                stamps.push(h.join().unwrap());
            });
        }
        let mut tx = rec.begin(2);
        let seen = oplog.read(|l| l.0.get(&1).cloned().unwrap_or_default()).unwrap();
        tx.read_list(1, &seen);
        tx.commit();
        let verdict = check_strict_serializable(&rec.history());
        if shortcuts == none {
            assert!(stamps[1] > stamps[0], "get_ts orders them: {stamps:?}");
            assert_eq!(seen, [1, 2]);
            verdict.unwrap();
        } else {
            if shortcuts == by_thread {
                let gap = stamps[1].nanos_since(stamps[0]);
                assert!(gap > 0 && gap <= 1_000, "ordered, but within the boundary: {gap} ns");
            }
            assert_eq!(seen, [2, 1], "{shortcuts:?}: the later append sorts first");
            assert!(verdict.is_err(), "{shortcuts:?}: the checker must reject the history");
        }
    }
}
