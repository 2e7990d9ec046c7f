//! The sync-mode log stream holds records in staging order, which is not timestamp order: a
//! committer that drew its timestamp first may stage last. The checkpointer, replaying up to
//! the marker X, must replay a record at or below X that lies behind one above X in the same
//! chunk, and must not move the chunk's replay offset past the one above X (a later
//! checkpoint replays it). Scripted with the commit hook and the logical clock:
//!
//! * B draws `n+1` and pauses before staging; A draws `n+2` and stages (not waiting);
//!   C publishes its lower bound `n+2`, draws `n+3` and pauses; B stages. Stream: A, B.
//! * A checkpoint's round computes the marker `min(n+2, lower(C) - 1) = n+1`: X = n+1, so A
//!   (above X) precedes B (at X) in the chunk.
//! * C is released and commits; a second checkpoint replays A and C. After a reopen all three
//!   writes are there.
//!
//! Also: a commit that does not wait for the marker becomes durable at the next checkpoint.
#![cfg(feature = "shortcuts")]
#![allow(clippy::unwrap_used, unreachable_pub)]

use crate::durable_common;

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use durable_common::*;
use ordo::durable::Mode;
use ordo::txn::{CommitStep, Shortcuts};
use ordo::{Error, Options};

thread_local! {
    /// The gate this thread's commits pause at (after drawing the write timestamp, before
    /// staging the record): 0 running, 1 paused, 2 released.
    static GATE: Cell<Option<&'static AtomicU8>> = const { Cell::new(None) };
}
static GATE_B: AtomicU8 = AtomicU8::new(0);
static GATE_C: AtomicU8 = AtomicU8::new(0);

fn pause_before_staging(step: CommitStep) {
    if step != CommitStep::Validated {
        return;
    }
    if let Some(g) = GATE.with(Cell::get) {
        g.store(1, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(30);
        while g.load(Ordering::SeqCst) != 2 && Instant::now() < deadline {
            std::thread::yield_now();
        }
    }
}

fn wait_paused(g: &AtomicU8) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while g.load(Ordering::SeqCst) != 1 {
        assert!(Instant::now() < deadline, "the committer never reached its gate");
        std::thread::yield_now();
    }
}

fn options(hooked: bool, wait_durable: bool) -> Options {
    let hook = if hooked { Some(pause_before_staging as fn(CommitStep)) } else { None };
    Options {
        wait_durable,
        shortcuts: Shortcuts { hook, ..Shortcuts::default() },
        ..Options::default()
    }
}

#[test]
fn the_checkpointer_replays_a_record_behind_a_newer_one_in_its_chunk() {
    let dir = temp_dir("stream-order");
    let (a, b, c) = {
        let db = open(config(&dir, Mode::Sync, None)).unwrap();
        db.run(|tx| Ok::<_, Error>((tx.alloc(&0u64)?, tx.alloc(&0u64)?, tx.alloc(&0u64)?))).unwrap()
    };
    let db = open(config(&dir, Mode::Sync, None)).unwrap();
    let first = std::thread::scope(|s| {
        let db = &db;
        let tb = s.spawn(move || {
            GATE.with(|g| g.set(Some(&GATE_B)));
            db.run_with(options(true, false), |tx| tx.write(b, &1u64)).unwrap();
        });
        wait_paused(&GATE_B);
        db.run_with(options(false, false), |tx| tx.write(a, &1u64)).unwrap();
        let tc = s.spawn(move || {
            GATE.with(|g| g.set(Some(&GATE_C)));
            db.run_with(options(true, true), |tx| tx.write(c, &1u64)).unwrap();
        });
        wait_paused(&GATE_C);
        GATE_B.store(2, Ordering::SeqCst);
        tb.join().unwrap();
        // X = n+1 while C is paused: A (n+2) is above it, B (n+1) at it, A first.
        let first = db.checkpoint().unwrap().unwrap();
        GATE_C.store(2, Ordering::SeqCst);
        tc.join().unwrap();
        first
    });
    assert_eq!(first.records, 1, "the first checkpoint replays B only: {first:?}");
    let second = db.checkpoint().unwrap().unwrap();
    assert_eq!(second.records, 2, "the second replays A and C: {second:?}");
    drop(db);
    let db = open(config(&dir, Mode::Sync, None)).unwrap();
    let got = db
        .run(|tx| Ok::<_, Error>((tx.read::<u64>(a)?, tx.read::<u64>(b)?, tx.read::<u64>(c)?)))
        .unwrap();
    drop(db);
    remove_dir_all(&dir);
    assert_eq!(got, (1, 1, 1), "a checkpoint lost a record of the out-of-order chunk");
}

#[test]
fn a_commit_that_did_not_wait_is_durable_after_the_next_checkpoint() {
    let dir = temp_dir("stream-nowait");
    let a = {
        let db = open(config(&dir, Mode::Sync, None)).unwrap();
        db.run(|tx| tx.alloc(&0u64)).unwrap()
    };
    let fs = fault_storage(&dir);
    let db = open(config(&dir, Mode::Sync, Some(Arc::new(fs.clone())))).unwrap();
    db.run_with(options(false, false), |tx| tx.write(a, &5u64)).unwrap();
    db.checkpoint().unwrap();
    // Power loss right after: only what was flushed survives.
    fs.freeze();
    drop(db);
    fs.power_loss().unwrap();
    let db = open(config(&dir, Mode::Sync, None)).unwrap();
    let got = db.run(|tx| tx.read::<u64>(a)).unwrap();
    drop(db);
    remove_dir_all(&dir);
    assert_eq!(got, 5, "the checkpoint did not make the staged commit durable");
}
