//! `get_ts` values strictly increase along happens-before, across threads, for every clock
//! (the FaRMv2 Lemma 1 consequence stated in `clock.rs`) — and the same check **fails** for a
//! test clock whose threads are skewed by more than the boundary it claims (DESIGN §8: a checker
//! that never fails proves nothing).
//!
//! Two checks:
//! * `ping_pong`: thread A takes `get_ts`, publishes it with a Release store; thread B
//!   Acquire-loads it, takes its own `get_ts`, which must be larger, and publishes it back; and
//!   so on, strictly alternating.
//! * `concurrent_max`: 2–4 threads each Acquire-load the largest published timestamp, take
//!   `get_ts`, require it to be larger, and publish with `fetch_max` (AcqRel).
//!
//! No timing thresholds: the positive checks hold however slowly threads run; the negative check
//! uses a stepped reference, which advances only when a clock is read, so it does not depend on
//! scheduling either.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::sync::atomic::{AtomicU64, Ordering};

use ordo_clock::{
    CalibrateOptions, Clock, LogicalClock, OrdoClock, OrdoDetection, Reference, SystemClock,
    TestClock, ThreadSkew, Timestamp,
};

const PING_PONG_ROUNDS: u64 = 2_000;
const CONCURRENT_ITERATIONS: u64 = 5_000;
/// Spins before a waiting thread yields its core (the machine may have fewer cores than threads).
const SPINS_BEFORE_YIELD: u32 = 256;

/// One pair of timestamps that break the property: `later` was drawn after `earlier` was seen.
#[derive(Debug, Clone, Copy)]
struct Violation {
    earlier: Timestamp,
    later: Timestamp,
}

fn wait_until(mut ready: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !ready() {
        spins += 1;
        if spins.is_multiple_of(SPINS_BEFORE_YIELD) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Strictly alternating A/B hand-off of timestamps. `setup(i)` runs first on thread `i`.
fn ping_pong<C: Clock>(clock: &C, rounds: u64, setup: impl Fn(usize) + Sync) -> Vec<Violation> {
    let turn = AtomicU64::new(0);
    let value = AtomicU64::new(0);
    let per_thread: Vec<Vec<Violation>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u64)
            .map(|i| {
                let (turn, value, setup) = (&turn, &value, &setup);
                s.spawn(move || {
                    setup(i as usize);
                    let mut violations = Vec::new();
                    for round in 0..rounds {
                        let my_turn = 2 * round + i;
                        // Acquire: pairs with the peer's Release store of `turn` below.
                        wait_until(|| turn.load(Ordering::Acquire) == my_turn);
                        // Relaxed: ordered by the Acquire load above.
                        let seen = Timestamp::from_nanos(value.load(Ordering::Relaxed));
                        let ts = clock.get_ts();
                        if ts <= seen {
                            violations.push(Violation { earlier: seen, later: ts });
                        }
                        value.store(ts.as_nanos(), Ordering::Relaxed);
                        // Release: publishes `value` (and the get_ts before it) to the peer.
                        turn.store(my_turn + 1, Ordering::Release);
                    }
                    violations
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    per_thread.into_iter().flatten().collect()
}

/// `threads` threads racing: every get_ts must exceed the largest timestamp seen before it.
fn concurrent_max<C: Clock>(
    clock: &C,
    threads: usize,
    iterations: u64,
    setup: impl Fn(usize) + Sync,
) -> Vec<Violation> {
    let published = AtomicU64::new(0);
    let per_thread: Vec<Vec<Violation>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (published, setup) = (&published, &setup);
                s.spawn(move || {
                    setup(i);
                    let mut violations = Vec::new();
                    for _ in 0..iterations {
                        // Acquire: pairs with the AcqRel fetch_max of whichever thread published.
                        let seen = Timestamp::from_nanos(published.load(Ordering::Acquire));
                        let ts = clock.get_ts();
                        if ts <= seen {
                            violations.push(Violation { earlier: seen, later: ts });
                        }
                        // AcqRel: publishes ts (and the get_ts before it); RMWs extend the
                        // release sequence so the max seen synchronises with its producer.
                        published.fetch_max(ts.as_nanos(), Ordering::AcqRel);
                    }
                    violations
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    per_thread.into_iter().flatten().collect()
}

fn check_clock<C: Clock>(clock: &C, setup: impl Fn(usize) + Sync + Copy) {
    let v = ping_pong(clock, PING_PONG_ROUNDS, setup);
    assert!(v.is_empty(), "{:?}: ping-pong violations, first {:?}", clock.kind(), v[0]);
    for threads in 2..=4 {
        let v = concurrent_max(clock, threads, CONCURRENT_ITERATIONS, setup);
        assert!(v.is_empty(), "{:?} x{threads}: violations, first {:?}", clock.kind(), v[0]);
    }
}

#[test]
fn logical_clock_timestamps_increase_along_happens_before() {
    check_clock(&LogicalClock::new(), |_| {});
}

#[test]
fn system_clock_timestamps_increase_along_happens_before() {
    check_clock(&SystemClock::new(), |_| {});
}

#[test]
fn ordo_clock_timestamps_increase_along_happens_before() {
    let options = CalibrateOptions { runs: 50, ..CalibrateOptions::default() };
    match OrdoClock::detect(&options, None).unwrap() {
        OrdoDetection::Ordo { clock, .. } => check_clock(&clock, |_| {}),
        OrdoDetection::UseSystemClock { reason } => eprintln!("skipped: {reason}"),
    }
}

#[test]
fn correctly_skewed_test_clock_timestamps_increase_along_happens_before() {
    const B: u64 = 2_000;
    // Offsets spread over the whole permitted range [-B, 0], both ends included.
    let offsets = [0, -(B as i64), -(B as i64) / 2, -1];
    let real = TestClock::new(B);
    check_clock(&real, |i| real.set_thread_skew(offsets[i % offsets.len()], 0));
    let stepped = TestClock::builder()
        .claimed_boundary_nanos(B)
        .reference(Reference::Stepped { start_nanos: 1_000_000_000, step_nanos: 97 })
        .skew_by_index(move |i| ThreadSkew::offset(offsets[i % offsets.len()]))
        .build();
    check_clock(&stepped, |_| {});
}

/// The negative test: thread A runs 5 ms ahead while the clock claims a 0.1 ms boundary. A's
/// `get_ts` returns a time ~5 ms in B's future, so B's next `get_ts` is smaller although it
/// happens after — the property must fail, and the check must see it.
#[test]
fn test_clock_skewed_beyond_its_claimed_boundary_breaks_happens_before() {
    const CLAIMED_B: u64 = 100_000; // 0.1 ms
    const A_AHEAD: i64 = 5_000_000; // 5 ms
    let clock = TestClock::builder()
        .claimed_boundary_nanos(CLAIMED_B)
        .reference(Reference::Stepped { start_nanos: 1_000_000_000, step_nanos: 1_000 })
        .build();
    let setup = |i: usize| clock.set_thread_skew(if i == 0 { A_AHEAD } else { 0 }, 0);
    let violations = ping_pong(&clock, 4, setup);
    // Every hand-off from A (thread 0) to B (thread 1) violates: 4 rounds, 4 violations.
    assert_eq!(violations.len(), 4, "{violations:?}");
    for v in &violations {
        assert!(v.earlier.nanos_since(v.later) > 4_000_000, "{v:?}");
    }
}
