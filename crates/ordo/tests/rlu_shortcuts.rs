//! Negative test of RLU^ORDO (ORDO §4.1, Fig. 7 line 30): commit without the extra
//! `ORDO_BOUNDARY` on a test clock whose skew stays **within** its claimed boundary, with a
//! scripted interleaving on a manual reference time, and `ordo-check` rejects the history.
//! The same script with the boundary in place yields a history the checker accepts.
//!
//! The script (B = claimed boundary, `w` = the writer's write clock):
//! 1. The writer inserts key 5 and commits; it publishes `w` and waits until its reading is
//!    past `wait_until` (`w + 2B` with the boundary, `w + B` without).
//! 2. The test sets the reference time to `wait_until + 1`: the minimum that lets the writer
//!    through. The writer synchronizes (nobody is active) and pauses before writing back.
//! 3. Reader R1 (skew 0) runs `contains(5)` to completion, then reader R2 (skew −B, allowed by
//!    the clock's contract) runs `contains(5)`.
//! 4. The writer is released and completes.
//!
//! Without the boundary R1 reads `w + B + 1`, certainly after `w`: it steals the new bucket and
//! sees 5. R2 reads `w + 1`, not certainly after `w`: it reads the original, without 5 — after
//! R1 saw it, in real time. With the boundary both read later than `w + B` and steal.
#![cfg(feature = "shortcuts")]
#![allow(clippy::unwrap_used, unreachable_pub)] // test code: panics are the failure reports

mod set_common;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ordo::rlu::hashset::RluHashSet;
use ordo::rlu::{RluOptions, RluShortcuts, RluStep};
use ordo_clock::{Reference, TestClock, Timestamp};

use set_common::{Kind, SetHistory};

const B: u64 = 100;
const START: u64 = 1_000_000;
const KEY: u64 = 5;
const WRITER_TAG: u64 = 77;

const IDLE: u8 = 0;
const PAUSED: u8 = 1;
const GO: u8 = 2;

/// The writer's wait target, published by the hook (0 = not yet).
static WAIT_UNTIL: AtomicU64 = AtomicU64::new(0);
static GATE: AtomicU8 = AtomicU8::new(IDLE);
/// The two scenarios share the statics: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn wait_until(cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "scripted interleaving stalled");
        std::thread::yield_now();
    }
}

fn hook(step: RluStep) {
    match step {
        RluStep::ClockDrawn { wait_until, .. } => {
            WAIT_UNTIL.store(wait_until.as_nanos(), Ordering::SeqCst);
        }
        RluStep::BeforeWriteback => {
            GATE.store(PAUSED, Ordering::SeqCst);
            wait_until(|| GATE.load(Ordering::SeqCst) == GO);
            GATE.store(IDLE, Ordering::SeqCst);
        }
    }
}

/// Runs the script; returns the history's verdict and what R1 and R2 saw.
fn script(skip_extra_boundary: bool) -> (Result<usize, String>, bool, bool) {
    let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    WAIT_UNTIL.store(0, Ordering::SeqCst);
    GATE.store(IDLE, Ordering::SeqCst);
    let clock = TestClock::builder()
        .claimed_boundary_nanos(B)
        .reference(Reference::Manual { start_nanos: START })
        .build();
    let options = RluOptions {
        capacity_nodes: 64,
        max_threads: 4,
        shortcuts: RluShortcuts { skip_extra_boundary, hook: Some(hook) },
        ..RluOptions::default()
    };
    let set = RluHashSet::new(clock.clone(), 1, options).unwrap();
    let hist = SetHistory::default();
    let (mut r1_saw, mut r2_saw) = (false, false);
    std::thread::scope(|s| {
        let (set, hist, clock) = (&set, &hist, &clock);
        let writer = s.spawn(move || {
            clock.set_thread_skew(0, 0);
            let mut h = set.handle().unwrap();
            hist.record(0, 0, KEY, Kind::Insert, WRITER_TAG, || {
                let r = h.insert_tagged(KEY, WRITER_TAG).unwrap();
                (r.result, r.tag_seen)
            });
        });
        // 2. Release the writer from new_time at the earliest instant it allows.
        wait_until(|| WAIT_UNTIL.load(Ordering::SeqCst) != 0);
        let target = WAIT_UNTIL.load(Ordering::SeqCst);
        clock.set_reference(Timestamp::from_nanos(target + 1));
        wait_until(|| GATE.load(Ordering::SeqCst) == PAUSED);
        // 3. Two readers, one after the other.
        let reader = |process: u32, offset: i64| {
            s.spawn(move || {
                clock.set_thread_skew(offset, 0);
                let mut h = set.handle().unwrap();
                let mut saw = false;
                hist.record(process, 0, KEY, Kind::Contains, 0, || {
                    let r = h.contains_tagged(KEY).unwrap();
                    saw = r.result;
                    (r.result, r.tag_seen)
                });
                saw
            })
            .join()
            .unwrap()
        };
        r1_saw = reader(1, 0);
        r2_saw = reader(2, -(B as i64));
        // 4. Let the writer finish.
        GATE.store(GO, Ordering::SeqCst);
        writer.join().unwrap();
    });
    (hist.check(), r1_saw, r2_saw)
}

#[test]
fn without_extra_boundary_a_later_reader_misses_an_insert_an_earlier_one_saw() {
    let (verdict, r1, r2) = script(true);
    assert!(r1, "R1 should have stolen the writer's copy");
    assert!(!r2, "R2 should have read the original");
    let err = verdict.expect_err("the checker must reject the history");
    eprintln!("{err}");
    assert!(err.starts_with("ordo-check"), "rejected by the wrong check: {err}");
}

#[test]
fn with_extra_boundary_the_same_script_is_linearizable() {
    let (verdict, r1, r2) = script(false);
    assert!(r1 && r2, "both readers start after the commit point and must steal");
    assert_eq!(verdict, Ok(3));
}
