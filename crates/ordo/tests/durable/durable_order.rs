//! The redo record is written before the transaction's writes are installed (FaRMv2 Alg. 2
//! step 5, `commit_backup` before `commit_primary`): a crash after a reader saw a value always
//! finds that value's record in the log.
//!
//! Scripted with the commit hook: the writer pauses right after its install (its new value is
//! visible), a reader reads the value, the process "crashes" (the storage is frozen: what was
//! written survives, as after a process crash in `process` mode; nothing later), and recovery
//! must return the value the reader saw. The negative variant (`log_after_install`, feature
//! `shortcuts`) swaps the record and the install, and the same check must catch it.
#![cfg(feature = "shortcuts")]
#![allow(clippy::unwrap_used, unreachable_pub)]

use crate::durable_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use durable_common::*;
use ordo::Options;
use ordo::durable::Mode;
use ordo::txn::{CommitStep, Shortcuts};

/// 0: running; 1: the writer has installed and is paused; 2: released.
static GATE: AtomicU8 = AtomicU8::new(0);

fn pause_after_install(step: CommitStep) {
    if step == CommitStep::Installed {
        GATE.store(1, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(30);
        while GATE.load(Ordering::SeqCst) != 2 && Instant::now() < deadline {
            std::thread::yield_now();
        }
    }
}

/// Returns (the value the reader saw, the value recovered after the crash).
fn scenario(log_after_install: bool) -> (u64, u64) {
    GATE.store(0, Ordering::SeqCst);
    let dir = temp_dir("order");
    let fs = fault_storage(&dir);
    let x = {
        let db = open(config(&dir, Mode::Process, None)).unwrap();
        db.run(|tx| tx.alloc(&0u64)).unwrap()
    };
    let db = open(config(&dir, Mode::Process, Some(Arc::new(fs.clone())))).unwrap();
    let seen = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let o = Options {
                shortcuts: Shortcuts {
                    hook: Some(pause_after_install),
                    log_after_install,
                    ..Shortcuts::default()
                },
                retries_max: 1,
                ..Options::default()
            };
            // With the broken order the record's write fails after the crash.
            let _ = db.run_with(o, |tx| tx.write(x, &7u64));
        });
        while GATE.load(Ordering::SeqCst) != 1 {
            std::thread::yield_now();
        }
        let seen = db.run(|tx| tx.read::<u64>(x)).unwrap();
        // The process crashes here: every write so far survives, nothing later happens.
        fs.freeze();
        GATE.store(2, Ordering::SeqCst);
        writer.join().unwrap();
        seen
    });
    drop(db);
    let db = open(config(&dir, Mode::Process, None)).unwrap();
    let recovered = db.run(|tx| tx.read::<u64>(x)).unwrap();
    remove_dir_all(&dir);
    (seen, recovered)
}

#[test]
fn a_value_a_reader_saw_survives_a_crash() {
    let (seen, recovered) = scenario(false);
    assert_eq!(seen, 7, "the reader did not see the installed value");
    assert_eq!(recovered, seen, "a value a reader saw was lost by the crash");
}

#[test]
fn logging_after_install_is_caught() {
    let (seen, recovered) = scenario(true);
    assert_eq!(seen, 7, "the reader did not see the installed value");
    assert_ne!(
        recovered, seen,
        "the broken order was not caught: the record was in the log before the crash"
    );
}
