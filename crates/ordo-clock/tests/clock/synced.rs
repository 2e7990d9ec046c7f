//! The synchronised clock (FaRMv2 Fig. 2) keeps the clock master's time inside every interval it
//! returns, as long as the injected drift stays within ε — and demonstrably not when it does not.
//!
//! The clusters here are three [`SkewedClock`]s over one [`TimeSource`]: a clock master (CM) and
//! two followers, each with its own offset (up to ±1 s), drift and boundary, and readings that
//! lag by up to their boundary (`with_reading_spread`), so a synced clock that forgot to widen a
//! reading by a machine's `B` is caught. The truth is the CM's local true time,
//! `cm.local().reading_at(t)`.
//!
//! Randomised tests take their seed from `ordo_seed` and print it (`ORDO_SEED=…`, again on
//! failure); set `ORDO_SEED` to replay one.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ordo_clock::{
    Clock, ClockDisabled, ClockKind, DEFAULT_START_NANOS, Interval, SkewedClock, SyncError,
    SyncOptions, SyncOutcome, SyncStart, SyncStats, SyncedClock, TimeSource, Timestamp,
};

type Node = SyncedClock<SkewedClock>;

const MICRO: u64 = 1_000;
const MILLI: u64 = 1_000_000;
const SECOND: u64 = 1_000_000_000;

/// SplitMix64: a small, seedable generator (no dependency needed).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi]`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    /// Uniform in `[-magnitude, magnitude]`.
    fn signed(&mut self, magnitude: i64) -> i64 {
        let m = magnitude.unsigned_abs();
        i64::try_from(self.range(0, 2 * m)).unwrap() - magnitude
    }

    fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }
}

fn options(drift_bound_ppm: u64) -> SyncOptions {
    SyncOptions { drift_bound_ppm, ..SyncOptions::default() }
}

/// A CM and two followers over `source`. Offsets within ±1 s, boundaries 100–500 ns, readings
/// spread. One follower runs fast and the other slow relative to the CM (so both the lower and
/// the upper bound are exercised), by `relative_drift_ppm` when `exact`, else by a random amount
/// between half of it and all of it.
fn cluster(
    source: &TimeSource,
    rng: &mut Rng,
    sync: SyncOptions,
    relative_drift_ppm: i64,
    exact: bool,
) -> Vec<Arc<Node>> {
    let cm_drift = rng.signed(100);
    let local = |drift_ppm: i64, rng: &mut Rng| {
        SkewedClock::new(source.clone(), rng.signed(1_000_000_000), drift_ppm, rng.range(100, 500))
            .with_reading_spread(rng.next())
    };
    let mut nodes = vec![Arc::new(SyncedClock::master(local(cm_drift, rng), sync))];
    let first_sign = if rng.percent(50) { 1 } else { -1 };
    for sign in [first_sign, -first_sign] {
        let magnitude = if exact {
            relative_drift_ppm
        } else {
            let m = relative_drift_ppm.unsigned_abs();
            i64::try_from(rng.range(m / 2, m)).unwrap()
        };
        nodes.push(Arc::new(SyncedClock::follower(local(cm_drift + sign * magnitude, rng), sync)));
    }
    nodes
}

/// The CM's time at true time `t`: what every interval must contain.
fn truth(cm: &Node, t: Timestamp) -> Timestamp {
    cm.local().reading_at(t)
}

/// A follower's sync in flight over the simulated network.
enum Rpc {
    Idle { next_at: u64 },
    Request { start: SyncStart, arrives_at: u64 },
    Reply { start: SyncStart, reply: Interval, arrives_at: u64 },
}

impl Rpc {
    fn due_at(&self) -> u64 {
        match self {
            Rpc::Idle { next_at } => *next_at,
            Rpc::Request { arrives_at, .. } | Rpc::Reply { arrives_at, .. } => *arrives_at,
        }
    }
}

/// A virtual-time scenario.
#[derive(Clone, Copy)]
struct Scenario {
    drift_bound_ppm: u64,
    relative_drift_ppm: i64,
    exact_drift: bool,
    /// Local time between syncs: mostly `sync_gap_nanos`, `long_gap_percent` of the time
    /// `long_gap_nanos`.
    sync_gap_nanos: (u64, u64),
    long_gap_percent: u64,
    long_gap_nanos: (u64, u64),
    /// Run until at least this many samples and this much virtual time.
    samples: usize,
    duration_nanos: u64,
}

const CONTAINED: Scenario = Scenario {
    drift_bound_ppm: 1_000,
    relative_drift_ppm: 900,
    exact_drift: false,
    sync_gap_nanos: (MILLI, 20 * MILLI),
    long_gap_percent: 20,
    long_gap_nanos: (50 * MILLI, 300 * MILLI),
    samples: 15_000,
    duration_nanos: 3 * SECOND,
};

#[derive(Debug, Default)]
struct Report {
    samples: usize,
    syncs: u64,
    violations: Vec<String>,
    max_width_nanos: u64,
}

/// Samples of a follower taken at the instant its sync finishes.
const SAMPLES_AFTER_SYNC: usize = 8;

/// Runs `scenario`: followers sync at random gaps with random one-way delays (`begin_sync`,
/// `d1`, `master_time`, `d2`, `finish_sync`), interleaved with `now()` samples on all three nodes,
/// each checked against the CM's time.
fn run_virtual(seed: u64, scenario: Scenario) -> Report {
    let mut rng = Rng::new(seed);
    let source = TimeSource::virtual_at(DEFAULT_START_NANOS);
    let nodes = cluster(
        &source,
        &mut rng,
        options(scenario.drift_bound_ppm),
        scenario.relative_drift_ppm,
        scenario.exact_drift,
    );
    let cm = &nodes[0];
    let mut report = Report::default();
    let mut rpcs: Vec<Rpc> = nodes[1..]
        .iter()
        .map(|f| {
            f.sync_with(cm).unwrap();
            Rpc::Idle { next_at: source.now().as_nanos() + rng.range(0, 10 * MILLI) }
        })
        .collect();
    let end_nanos = source.now().as_nanos() + scenario.duration_nanos;
    while report.samples < scenario.samples || source.now().as_nanos() < end_nanos {
        let now = source.now().as_nanos();
        let next_event = rpcs.iter().map(Rpc::due_at).min().unwrap_or(u64::MAX);
        source.advance_to(Timestamp::from_nanos(next_event.min(now + rng.range(1, 500 * MICRO))));
        let now = source.now().as_nanos();
        // Nodes to sample at this instant: 1–3 random ones, plus a burst on each follower that
        // has just finished a sync (the tightest moment, where a forgotten boundary shows).
        let mut to_sample: Vec<usize> =
            (0..rng.range(1, 3)).map(|_| usize::try_from(rng.range(0, 2)).unwrap()).collect();
        for (i, (rpc, follower)) in rpcs.iter_mut().zip(&nodes[1..]).enumerate() {
            if rpc.due_at() > now {
                continue;
            }
            // Mostly 1–100 µs; sometimes a millisecond; often none at all (the CM reads its
            // clock at the very instant of the send or the receive: no slack for a bound that
            // forgets a machine's boundary).
            let delay = |rng: &mut Rng| match rng.next() % 100 {
                0..40 => 0,
                40..50 => rng.range(MICRO, MILLI),
                _ => rng.range(MICRO, 100 * MICRO),
            };
            *rpc = match *rpc {
                Rpc::Idle { .. } => {
                    Rpc::Request { start: follower.begin_sync(), arrives_at: now + delay(&mut rng) }
                }
                Rpc::Request { start, .. } => Rpc::Reply {
                    start,
                    reply: cm.master_time().unwrap(),
                    arrives_at: now + delay(&mut rng),
                },
                Rpc::Reply { start, reply, .. } => {
                    follower.finish_sync(start, reply).unwrap();
                    report.syncs += 1;
                    to_sample.extend([i + 1; SAMPLES_AFTER_SYNC]);
                    let gap = if rng.percent(scenario.long_gap_percent) {
                        scenario.long_gap_nanos
                    } else {
                        scenario.sync_gap_nanos
                    };
                    Rpc::Idle { next_at: now + rng.range(gap.0, gap.1) }
                }
            };
        }
        for index in to_sample {
            let interval = nodes[index].now();
            let truth = truth(cm, source.now());
            report.samples += 1;
            report.max_width_nanos = report.max_width_nanos.max(interval.width_nanos());
            if !interval.contains(truth) {
                report.violations.push(format!(
                    "node {index} at true time {}: {interval:?} misses {truth:?} by {} ns",
                    source.now(),
                    if interval.lo() > truth {
                        interval.lo().nanos_since(truth)
                    } else {
                        truth.nanos_since(interval.hi())
                    }
                ));
            }
        }
    }
    report
}

#[test]
fn intervals_contain_the_masters_time_when_drift_is_within_the_bound() {
    let guard =
        ordo_seed::Seed::new("intervals_contain_the_masters_time_when_drift_is_within_the_bound");
    let seed = guard.value();
    let started = Instant::now();
    let report = run_virtual(seed, CONTAINED);
    assert!(report.samples >= 10_000);
    assert!(report.syncs >= 50, "{report:?}");
    assert!(
        report.violations.is_empty(),
        "ORDO_SEED={seed}: {} of {} samples miss the CM's time, e.g. {:?}",
        report.violations.len(),
        report.samples,
        &report.violations[..report.violations.len().min(5)]
    );
    println!(
        "{} samples, {} syncs, widest interval {} ns, {:?}",
        report.samples,
        report.syncs,
        report.max_width_nanos,
        started.elapsed()
    );
}

#[test]
fn intervals_miss_the_masters_time_when_drift_exceeds_the_bound() {
    let guard =
        ordo_seed::Seed::new("intervals_miss_the_masters_time_when_drift_exceeds_the_bound");
    let seed = guard.value();
    // Sparse syncs, followers 900 ppm off the CM, ε = 100 ppm: the drift the bounds allow for
    // falls behind the real one by 800 ppm, ~0.2 ms after 300 ms without a sync.
    let sparse = Scenario {
        drift_bound_ppm: 100,
        relative_drift_ppm: 900,
        exact_drift: true,
        sync_gap_nanos: (300 * MILLI, 800 * MILLI),
        long_gap_percent: 0,
        ..CONTAINED
    };
    let report = run_virtual(seed, sparse);
    println!("{} of {} samples miss the CM's time", report.violations.len(), report.samples);
    assert!(
        !report.violations.is_empty(),
        "ORDO_SEED={seed}: ε below the injected drift must break containment ({report:?})"
    );
    // Control: the same scenario with ε above the drift holds.
    let control = run_virtual(seed, Scenario { drift_bound_ppm: 1_000, ..sparse });
    assert!(control.violations.is_empty(), "ORDO_SEED={seed}: {:?}", &control.violations[..1]);
}

/// A follower's sync thread: syncs with `cm` by direct call until `stop`, with small random
/// sleeps inside and between the RPCs.
fn sync_loop(follower: &Node, cm: &Node, stop: &AtomicBool, seed: u64) {
    let mut rng = Rng::new(seed);
    // Relaxed: only ends the loop.
    while !stop.load(Ordering::Relaxed) {
        let start = follower.begin_sync();
        if rng.percent(25) {
            std::thread::sleep(Duration::from_micros(rng.range(0, 50)));
        }
        let reply = cm.master_time().unwrap();
        if rng.percent(25) {
            std::thread::sleep(Duration::from_micros(rng.range(0, 50)));
        }
        follower.finish_sync(start, reply).unwrap();
        std::thread::sleep(Duration::from_micros(rng.range(100, 2_000)));
    }
}

#[test]
fn intervals_contain_the_masters_time_in_real_time_across_threads() {
    const RUN: Duration = Duration::from_millis(300);
    let guard =
        ordo_seed::Seed::new("intervals_contain_the_masters_time_in_real_time_across_threads");
    let seed = guard.value();
    let mut rng = Rng::new(seed);
    let source = TimeSource::real(DEFAULT_START_NANOS);
    let nodes = cluster(&source, &mut rng, options(1_000), 900, false);
    let cm = &nodes[0];
    let stop = AtomicBool::new(false);
    let violations = Mutex::new(Vec::new());
    let samples = AtomicU64::new(0);
    std::thread::scope(|s| {
        for (i, follower) in nodes[1..].iter().enumerate() {
            let stop = &stop;
            let sync_seed = seed ^ (i as u64 + 1);
            s.spawn(move || sync_loop(follower, cm, stop, sync_seed));
        }
        let workers: Vec<_> = (0..2u64)
            .map(|w| {
                let (nodes, violations, samples, source) = (&nodes, &violations, &samples, &source);
                let mut rng = Rng::new(seed ^ (w << 32));
                s.spawn(move || {
                    let started = Instant::now();
                    let mut n = 0u64;
                    while started.elapsed() < RUN {
                        let index = usize::try_from(rng.range(0, 2)).unwrap();
                        let before = source.now();
                        let interval = nodes[index].now();
                        let after = source.now();
                        // The CM's time at some instant of the call lies in the interval.
                        let (lo, hi) = (truth(cm, before), truth(cm, after));
                        if interval.hi() < lo || interval.lo() > hi {
                            violations.lock().unwrap().push(format!(
                                "node {index}: {interval:?} vs CM time in [{lo:?}, {hi:?}]"
                            ));
                        }
                        n += 1;
                    }
                    // Relaxed: read after the scope joins this thread.
                    samples.fetch_add(n, Ordering::Relaxed);
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    let violations = violations.into_inner().unwrap();
    let samples = samples.load(Ordering::Relaxed);
    assert!(samples >= 1_000, "{samples}");
    assert!(
        violations.is_empty(),
        "ORDO_SEED={seed}: {} of {samples} samples miss, e.g. {:?}",
        violations.len(),
        &violations[..violations.len().min(5)]
    );
    for follower in &nodes[1..] {
        let stats = follower.stats();
        assert!(stats.syncs >= 10, "{stats:?}");
        assert_eq!(stats.inverted_readings, 0);
        println!("{stats:?}");
    }
}

#[test]
fn get_ts_increases_along_happens_before_across_nodes() {
    const ROUNDS: u64 = 300;
    let guard = ordo_seed::Seed::new("get_ts_increases_along_happens_before_across_nodes");
    let seed = guard.value();
    let mut rng = Rng::new(seed);
    let source = TimeSource::real(DEFAULT_START_NANOS);
    let nodes = cluster(&source, &mut rng, options(1_000), 900, false);
    let cm = &nodes[0];
    let stop = AtomicBool::new(false);
    let turn = AtomicU64::new(0);
    let value = AtomicU64::new(0);
    let violations = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for (i, follower) in nodes[1..].iter().enumerate() {
            let stop = &stop;
            let sync_seed = seed ^ (i as u64 + 1);
            s.spawn(move || sync_loop(follower, cm, stop, sync_seed));
        }
        let players: Vec<_> = (0..2u64)
            .map(|i| {
                let (nodes, turn, value, violations) = (&nodes, &turn, &value, &violations);
                s.spawn(move || {
                    for round in 0..ROUNDS {
                        let my_turn = 2 * round + i;
                        // Acquire: pairs with the other player's Release store of `turn`.
                        while turn.load(Ordering::Acquire) != my_turn {
                            std::thread::yield_now();
                        }
                        // Relaxed: ordered by the Acquire load above.
                        let seen = value.load(Ordering::Relaxed);
                        // Rotate over the nodes so every pair of nodes hands a timestamp over.
                        let node = usize::try_from((my_turn) % 3).unwrap();
                        let ts = nodes[node].get_ts();
                        if ts.as_nanos() <= seen {
                            violations.lock().unwrap().push((round, node, seen, ts));
                        }
                        value.store(ts.as_nanos(), Ordering::Relaxed);
                        // Release: publishes `value` (and the get_ts before it).
                        turn.store(my_turn + 1, Ordering::Release);
                    }
                })
            })
            .collect();
        for player in players {
            player.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    let violations = violations.into_inner().unwrap();
    assert!(violations.is_empty(), "ORDO_SEED={seed}: {violations:?}");
    let waits: u64 = nodes.iter().map(|n| n.stats().get_ts_waits).sum();
    assert_eq!(waits, 2 * ROUNDS);
}

#[test]
fn a_follower_is_disabled_until_its_first_sync() {
    let source = TimeSource::virtual_at(DEFAULT_START_NANOS);
    let cm = SyncedClock::master(SkewedClock::new(source.clone(), 0, 0, 100), options(1_000));
    let follower = SyncedClock::follower(
        SkewedClock::new(source.clone(), 5 * MILLI as i64, 0, 100),
        options(1_000),
    );
    assert!(!follower.is_enabled());
    assert_eq!(follower.master_time(), None);
    assert_eq!(follower.kind(), ClockKind::Synced);

    let started = Instant::now();
    let ClockDisabled { waited } = follower.try_now(Duration::from_millis(10)).unwrap_err();
    assert!(waited >= Duration::from_millis(10));
    assert!(started.elapsed() >= Duration::from_millis(10));
    assert!(follower.try_get_ts(Duration::from_millis(10)).is_err());

    let returned = AtomicBool::new(false);
    let interval = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let interval = follower.now();
            returned.store(true, Ordering::Release);
            interval
        });
        std::thread::sleep(Duration::from_millis(30));
        // Acquire: pairs with the Release store above.
        assert!(!returned.load(Ordering::Acquire), "now() returned from a disabled clock");
        let outcome = follower.sync_with(&cm).unwrap();
        assert!(outcome.enabled_now && outcome.improved_lower && outcome.improved_upper);
        reader.join().unwrap()
    });
    assert!(follower.is_enabled());
    assert!(interval.contains(truth(&cm, source.now())), "{interval:?}");
    assert!(follower.try_now(Duration::ZERO).is_ok());
}

#[test]
fn disable_refuses_syncs_in_flight_and_the_next_sync_starts_afresh() {
    let source = TimeSource::virtual_at(DEFAULT_START_NANOS);
    let cm = SyncedClock::master(SkewedClock::new(source.clone(), 0, 0, 100), options(1_000));
    let follower =
        SyncedClock::follower(SkewedClock::new(source.clone(), -7, 0, 100), options(1_000));
    // The master's time is its local clock.
    assert_eq!(cm.now(), cm.local().now());
    assert_eq!(cm.master_time(), Some(cm.local().now()));

    follower.sync_with(&cm).unwrap();
    let tight = follower.now().width_nanos();
    let in_flight = follower.begin_sync();
    follower.disable();
    assert!(!follower.is_enabled());
    assert!(follower.try_now(Duration::from_millis(1)).is_err());
    assert_eq!(follower.finish_sync(in_flight, cm.master_time().unwrap()), Err(SyncError::Stale));
    assert!(!follower.is_enabled(), "a stale sync must not enable the clock");

    // A slow sync after the disable: the tight state from before is gone.
    let start = follower.begin_sync();
    source.advance(MILLI);
    let reply = cm.master_time().unwrap();
    source.advance(MILLI);
    let outcome = follower.finish_sync(start, reply).unwrap();
    assert!(outcome.enabled_now);
    assert_eq!(outcome.rtt_nanos, 2 * MILLI);
    assert!(follower.now().width_nanos() >= 2 * MILLI, "{tight} then {:?}", follower.now());

    let other = SyncedClock::follower(SkewedClock::new(source.clone(), 0, 0, 100), options(1_000));
    assert_eq!(other.finish_sync(follower.begin_sync(), reply), Err(SyncError::ForeignStart));
    assert_eq!(cm.finish_sync(cm.begin_sync(), reply), Err(SyncError::Master));

    cm.disable();
    assert_eq!(cm.master_time(), None);
    assert_eq!(follower.sync_with(&cm), Err(SyncError::MasterUnavailable));
    assert!(cm.try_get_ts(Duration::from_millis(1)).is_err());
    let stats = follower.stats();
    assert_eq!((stats.disables, stats.rejected_syncs, stats.syncs), (1, 1, 2));
}

/// One sync of `follower` with `cm` whose request takes `d1` and reply `d2` of true time.
fn sync_with_delays(
    follower: &Node,
    cm: &Node,
    source: &TimeSource,
    d1: u64,
    d2: u64,
) -> SyncOutcome {
    let start = follower.begin_sync();
    source.advance(d1);
    let reply = cm.master_time().unwrap();
    source.advance(d2);
    follower.finish_sync(start, reply).unwrap()
}

#[test]
fn the_best_lower_and_upper_syncs_are_kept_separately() {
    let source = TimeSource::virtual_at(DEFAULT_START_NANOS);
    let opts = options(1_000);
    let cm = SyncedClock::master(SkewedClock::new(source.clone(), 300, 40, 200), opts);
    // Twins: identical local clocks (no spread), so equal state gives equal readings.
    let local = || SkewedClock::new(source.clone(), -123_456, -250, 300);
    let (a, b) = (SyncedClock::follower(local(), opts), SyncedClock::follower(local(), opts));
    let (start_a, start_b) = (a.begin_sync(), b.begin_sync());
    source.advance(MICRO);
    let reply = cm.master_time().unwrap();
    source.advance(MICRO);
    a.finish_sync(start_a, reply).unwrap();
    b.finish_sync(start_b, reply).unwrap();
    source.advance(10 * MILLI);

    // A slow sync (1 ms each way) improves neither bound and changes no reading.
    let slow = sync_with_delays(&a, &cm, &source, MILLI, MILLI);
    assert!(!slow.improved_lower && !slow.improved_upper, "{slow:?}");
    assert_eq!(a.now(), b.now());

    // A fast request with a slow reply pins the CM's time from above only: only S_upper moves.
    let asymmetric = sync_with_delays(&a, &cm, &source, MICRO, 2 * MILLI);
    assert!(!asymmetric.improved_lower && asymmetric.improved_upper, "{asymmetric:?}");
    let (now_a, now_b) = (a.now(), b.now());
    assert_eq!(now_a.lo(), now_b.lo());
    assert!(now_a.hi() < now_b.hi(), "{now_a:?} vs {now_b:?}");
    assert!(now_a.contains(truth(&cm, source.now())));

    // A fast sync improves both.
    let fast = sync_with_delays(&a, &cm, &source, MICRO, MICRO);
    assert!(fast.improved_lower && fast.improved_upper, "{fast:?}");
    let stats = a.stats();
    assert_eq!((stats.lower_improvements, stats.upper_improvements), (2, 3));
    // 2 µs of true time on a clock 250 ppm slow.
    assert!(matches!(stats.min_rtt_nanos, Some(1_999..=2_000)), "{stats:?}");
}

#[test]
fn width_grows_with_local_time_at_rate_two_epsilon() {
    let source = TimeSource::virtual_at(DEFAULT_START_NANOS);
    let opts = options(1_000);
    let cm = SyncedClock::master(SkewedClock::new(source.clone(), 0, 0, 200), opts);
    let follower = SyncedClock::follower(SkewedClock::new(source.clone(), 999, 300, 300), opts);
    sync_with_delays(&follower, &cm, &source, MICRO, MICRO);
    let (before, local_before) = (follower.now(), follower.local().now());
    source.advance(SECOND);
    let (after, local_after) = (follower.now(), follower.local().now());
    let elapsed = local_after.lo().nanos_since(local_before.lo());
    assert_eq!(elapsed, SECOND + 300 * MICRO, "the local clock runs 300 ppm fast");
    // Each bound moves by the local elapsed time ∓ ε of it (to the nanosecond of rounding).
    let lo_moved = after.lo().nanos_since(before.lo());
    let hi_moved = after.hi().nanos_since(before.hi());
    assert!(lo_moved.abs_diff(elapsed - elapsed / 1_000) <= 1, "{lo_moved}");
    assert!(hi_moved.abs_diff(elapsed + elapsed / 1_000) <= 1, "{hi_moved}");
    let growth = after.width_nanos() - before.width_nanos();
    assert!(growth.abs_diff(2 * elapsed / 1_000) <= 2, "{growth}");
    assert!(after.contains(truth(&cm, source.now())));
}

/// A follower drifting `drift_ppm` from the CM, synced every 10 ms for 4 s of virtual time with
/// 20 µs each way: a pair needs ≥ 0.4 s between its samples to be within 100 ppm of error.
fn drift_run(drift_ppm: i64) -> SyncStats {
    let source = TimeSource::virtual_at(DEFAULT_START_NANOS);
    let opts = SyncOptions::default();
    let cm = SyncedClock::master(SkewedClock::new(source.clone(), 0, 0, 200), opts);
    let follower = SyncedClock::follower(SkewedClock::new(source.clone(), 0, drift_ppm, 200), opts);
    for _ in 0..400 {
        sync_with_delays(&follower, &cm, &source, 20 * MICRO, 20 * MICRO);
        source.advance(10 * MILLI);
    }
    follower.stats()
}

#[test]
fn the_drift_monitor_alarms_above_the_threshold_only() {
    for (drift_ppm, alarm) in [(500, true), (-500, true), (50, false), (-50, false), (0, false)] {
        let stats = drift_run(drift_ppm);
        assert!(stats.drift_estimates >= 5, "{stats:?}");
        assert!(stats.drift_error_ppm.unwrap() <= SyncOptions::default().drift_error_max_ppm);
        let estimate = stats.drift_estimate_ppm.unwrap();
        let error = stats.drift_error_ppm.unwrap();
        assert!(estimate.abs_diff(drift_ppm) <= error, "{drift_ppm}: {stats:?}");
        assert_eq!(stats.drift_alarm, alarm, "{drift_ppm}: {stats:?}");
        assert_eq!(stats.drift_alarms > 0, alarm, "{drift_ppm}: {stats:?}");
    }
}

/// Clock-master failover (FaRMv2 §4.3, Fig. 6) on three clocks whose local clocks disagree by up
/// to a second: the old CM hands out timestamps and dies; the survivors disable their clocks
/// and report FF (NEW-CONFIG-ACK), the new CM waits out the lease, takes the maximum
/// (ADVANCE) and enables itself at `[FF, FF]`; the other follower syncs with it. Every
/// timestamp after the failover is above every timestamp before it — even though the new
/// CM's local clock is a second behind the old one's, which without the fast-forward would
/// hand out timestamps far in the past.
#[test]
fn failover_fast_forwards_the_new_master_past_every_earlier_timestamp() {
    let source = TimeSource::virtual_at(DEFAULT_START_NANOS);
    let old_cm = SyncedClock::master(SkewedClock::new(source.clone(), 0, 0, 100), options(1_000));
    // The new CM's local clock is a second behind the old CM's; the other is 0.4 s ahead.
    let next_cm = SyncedClock::follower(
        SkewedClock::new(source.clone(), -(SECOND as i64), 0, 100),
        options(1_000),
    );
    let other = SyncedClock::follower(
        SkewedClock::new(source.clone(), (4 * SECOND / 10) as i64, 0, 100),
        options(1_000),
    );
    next_cm.sync_with(&old_cm).unwrap();
    other.sync_with(&old_cm).unwrap();
    // The time source is virtual and does not move by itself, so `get_ts` (which waits for
    // time to pass its upper bound) would never return: what it returns is the upper bound of
    // the reading it starts with, `now().hi()`.
    let mut before = Vec::new();
    for _ in 0..10 {
        source.advance(MILLI);
        before.push(old_cm.now().hi());
        before.push(next_cm.now().hi());
        before.push(other.now().hi());
    }
    let last_before = *before.iter().max().unwrap();

    // NEW-CONFIG: both survivors disable and report FF.
    let ff_next = next_cm.disable_for_reconfiguration();
    let ff_other = other.disable_for_reconfiguration();
    assert!(!next_cm.is_enabled() && !other.is_enabled());
    assert!(ff_next >= last_before && ff_other >= last_before, "FF must cover handed-out times");
    // The old CM keeps handing out timestamps until its lease expires (it has not heard).
    source.advance(MILLI);
    let late = old_cm.now().hi();
    // The lease-expiry wait, then ADVANCE with the maximum and the new CM's own bound.
    source.advance(10 * MILLI);
    let ff = next_cm.enable_master_at(ff_next.max(ff_other));
    other.advance(ff);
    assert!(next_cm.is_master() && next_cm.is_enabled());
    assert_eq!(other.fast_forward_point(), ff);
    assert_eq!(next_cm.now().lo(), ff, "the new master reads [FF, FF + B] when enabled");
    assert!(late < ff, "a timestamp the old CM gave out during the lease wait is below FF");
    other.sync_with(&next_cm).unwrap();
    for _ in 0..10 {
        source.advance(MILLI);
        for ts in [next_cm.now().hi(), other.now().hi()] {
            assert!(ts > last_before && ts > late, "{ts:?} after failover, {last_before:?} before");
        }
    }
    let stats = next_cm.stats();
    assert!(stats.master && stats.enables_at_ff == 1 && stats.ff_nanos == ff.as_nanos());

    // Without the fast-forward the new master would read its own local clock: a second back.
    let naive = SyncedClock::master(
        SkewedClock::new(source.clone(), -(SECOND as i64), 0, 100),
        options(1_000),
    );
    assert!(naive.now().hi() < last_before, "the test's clocks must make the fast-forward matter");

    // A master named follower by a later configuration stops handing out time until it syncs.
    next_cm.become_follower();
    assert!(!next_cm.is_master() && !next_cm.is_enabled());
    assert!(next_cm.fast_forward_point() >= ff);
    assert_eq!(next_cm.master_time(), None);
}
