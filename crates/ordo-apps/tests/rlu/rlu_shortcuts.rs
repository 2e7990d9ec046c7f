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

use crate::common::{GO, IDLE, PAUSED, pause, wait_until};
use crate::set_common;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use ordo_apps::rlu::hashset::RluHashSet;
use ordo_apps::rlu::{RluOptions, RluShortcuts, RluStep};
use ordo_clock::{Reference, TestClock, Timestamp};

use set_common::{Kind, SetHistory};

const B: u64 = 100;
const START: u64 = 1_000_000;
const KEY: u64 = 5;
const WRITER_TAG: u64 = 77;

/// The writer's wait target, published by the hook (0 = not yet).
static WAIT_UNTIL: AtomicU64 = AtomicU64::new(0);
static GATE: AtomicU8 = AtomicU8::new(IDLE);
/// The two scenarios share the statics: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn hook(step: RluStep) {
    match step {
        RluStep::ClockDrawn { wait_until, .. } => {
            WAIT_UNTIL.store(wait_until.as_nanos(), Ordering::SeqCst);
        }
        RluStep::BeforeWriteback => pause(&GATE),
        RluStep::ClockRead | RluStep::ReaderBlocked | RluStep::Stealing => {}
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
        shortcuts: RluShortcuts {
            skip_extra_boundary,
            hook: Some(hook),
            ..RluShortcuts::default()
        },
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

/// Fact 1 of the essay: a commit announces itself with the `BLOCK` write clock before it reads
/// the clock, so a reader that starts while the writer is between reading and publishing its
/// write clock waits instead of reading one object as "not committing" and stealing the next.
///
/// The script: a writer moves both objects `a` and `b` from 1 to 2 and is paused after reading
/// its write clock `w`, before publishing it (a preemption there is all it takes). The reference
/// time moves 10 B on; a reader (skew 0, so certainly after `w`) reads `a`, stops at its
/// midpoint, and reads `b`. The writer is released once the reader either reached its midpoint
/// (it read `a` without waiting) or reported that it waits on `BLOCK`; the writer then pauses
/// before write-back, and the reader finishes.
mod block {
    use super::*;
    use ordo_apps::rlu::{NodeId, NodeValue, Rlu};
    use ordo_check::{Recorder, check_serializable};

    static WRITER: AtomicU8 = AtomicU8::new(IDLE);
    static WRITEBACK: AtomicU8 = AtomicU8::new(IDLE);
    static READER_BLOCKED: AtomicU8 = AtomicU8::new(0);
    static READER_MID: AtomicU8 = AtomicU8::new(IDLE);

    fn hook(step: RluStep) {
        match step {
            RluStep::ClockRead => pause(&WRITER),
            RluStep::BeforeWriteback => pause(&WRITEBACK),
            RluStep::ReaderBlocked => READER_BLOCKED.store(1, Ordering::SeqCst),
            RluStep::ClockDrawn { .. } | RluStep::Stealing => {}
        }
    }

    /// Returns the history's verdict and what the reader saw.
    fn script(skip_block: bool) -> (Result<(), String>, (u64, u64)) {
        let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for g in [&WRITER, &WRITEBACK, &READER_BLOCKED, &READER_MID] {
            g.store(IDLE, Ordering::SeqCst);
        }
        let clock = TestClock::builder()
            .claimed_boundary_nanos(B)
            .reference(Reference::Manual { start_nanos: START })
            .build();
        let options = RluOptions {
            capacity_nodes: 4,
            max_threads: 4,
            shortcuts: RluShortcuts { skip_block, hook: Some(hook), ..RluShortcuts::default() },
            ..RluOptions::default()
        };
        let rlu = Rlu::new(clock.clone(), options).unwrap();
        let (a, b) = {
            let mut t = rlu.thread().unwrap();
            (
                t.alloc_unshared(NodeValue::new(1, NodeId::NIL)).unwrap(),
                t.alloc_unshared(NodeValue::new(1, NodeId::NIL)).unwrap(),
            )
        };
        let rec = Recorder::new();
        let mut init = rec.begin(0);
        init.write_register(0, 1);
        init.write_register(1, 1);
        init.commit();
        let mut seen = (0, 0);
        std::thread::scope(|s| {
            let (rlu, rec, clock) = (&rlu, &rec, &clock);
            let writer = s.spawn(move || {
                clock.set_thread_skew(0, 0);
                let mut t = rlu.thread().unwrap();
                let mut r = rec.begin(1);
                let old = t
                    .section(|s| {
                        let old = (s.deref(a)?.key, s.deref(b)?.key);
                        s.try_lock(a)?;
                        s.try_lock(b)?;
                        s.write(a, NodeValue::new(old.0 + 1, NodeId::NIL))?;
                        s.write(b, NodeValue::new(old.1 + 1, NodeId::NIL))?;
                        Ok(old)
                    })
                    .unwrap();
                assert_eq!(old, (1, 1));
                r.read_register(0, Some(1));
                r.read_register(1, Some(1));
                r.write_register(0, 2);
                r.write_register(1, 2);
                r.commit();
            });
            wait_until(|| WRITER.load(Ordering::SeqCst) == PAUSED);
            clock.advance(10 * B);
            let reader = s.spawn(move || {
                clock.set_thread_skew(0, 0);
                let mut t = rlu.thread().unwrap();
                let mut r = rec.begin(2);
                let (x, y) = t
                    .section(|s| {
                        let x = s.deref(a)?.key;
                        pause(&READER_MID);
                        Ok((x, s.deref(b)?.key))
                    })
                    .unwrap();
                r.read_register(0, Some(x));
                r.read_register(1, Some(y));
                r.commit();
                (x, y)
            });
            wait_until(|| {
                READER_MID.load(Ordering::SeqCst) == PAUSED
                    || READER_BLOCKED.load(Ordering::SeqCst) == 1
            });
            WRITER.store(GO, Ordering::SeqCst);
            wait_until(|| WRITEBACK.load(Ordering::SeqCst) == PAUSED);
            wait_until(|| READER_MID.load(Ordering::SeqCst) == PAUSED);
            READER_MID.store(GO, Ordering::SeqCst);
            seen = reader.join().unwrap();
            WRITEBACK.store(GO, Ordering::SeqCst);
            writer.join().unwrap();
        });
        let verdict = check_serializable(&rec.history()).map_err(|v| v.to_string());
        (verdict, seen)
    }

    #[test]
    fn without_block_a_reader_mixes_the_old_and_the_new_snapshot() {
        let (verdict, seen) = script(true);
        assert_eq!(seen, (1, 2), "the reader should read a's original, then steal b");
        let err = verdict.expect_err("the checker must reject the torn read");
        eprintln!("{err}");
    }

    #[test]
    fn with_block_the_same_script_reads_one_snapshot() {
        let (verdict, seen) = script(false);
        assert_eq!(seen, (2, 2), "the reader waits for the write clock, then steals both");
        assert_eq!(verdict, Ok(()));
    }
}
