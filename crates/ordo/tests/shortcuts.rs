//! Negative tests (DESIGN §8): remove one protocol step through a test-only switch, script the
//! interleaving that FaRMv2 §7.3 says breaks, and show that `ordo-check` rejects the history.
//! Each scenario also runs with the step in place, where the same script must yield a history
//! the checker accepts — so a failure is the shortcut's doing, not the script's.
#![cfg(feature = "shortcuts")]

mod common;

use std::sync::atomic::{AtomicU8, Ordering};

use ordo::txn::{CommitStep, Shortcuts};
use ordo::{Addr, Config, Error, Isolation, Options, Ordo};
use ordo_check::{Recorder, check_opacity, check_serializable};
use ordo_clock::LogicalClock;

use common::{append, read_list};

/// A two-party handshake between a committer paused inside its hook and the test thread.
struct Gate {
    state: AtomicU8,
}

const IDLE: u8 = 0;
const PAUSED: u8 = 1;
const GO: u8 = 2;

impl Gate {
    const fn new() -> Self {
        Gate {
            state: AtomicU8::new(IDLE),
        }
    }
    /// Called by the committer: announce the pause and wait for `release`.
    fn pause(&self) {
        self.state.store(PAUSED, Ordering::SeqCst);
        while self.state.load(Ordering::SeqCst) != GO {
            std::thread::yield_now();
        }
        self.state.store(IDLE, Ordering::SeqCst);
    }
    fn wait_paused(&self) {
        while self.state.load(Ordering::SeqCst) != PAUSED {
            std::thread::yield_now();
        }
    }
    fn release(&self) {
        self.state.store(GO, Ordering::SeqCst);
    }
}

fn db() -> (Ordo<LogicalClock>, Vec<Addr>) {
    let db = Ordo::with_clock(Config::default(), LogicalClock::new()).unwrap();
    let lists = common::make_lists(&db, 2);
    (db, lists)
}

/// The writer appends 1 to list 0 and 2 to list 1 in one transaction, pausing at `pause_at`
/// (through `hook`); meanwhile the reader reads list 0, lets the writer finish, then reads
/// list 1 — the torn-read script. Returns the recorded history.
fn torn_read_script(
    writer_shortcuts: Shortcuts,
    reader_shortcuts: Shortcuts,
    gate: &'static Gate,
) -> ordo_check::History {
    let (db, lists) = db();
    let rec = Recorder::new();
    let writer_options = Options {
        shortcuts: writer_shortcuts,
        ..Options::default()
    };
    let reader_options = Options {
        shortcuts: reader_shortcuts,
        ..Options::default()
    };
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut r = rec.begin(1);
            let mut tx = db.begin_with(writer_options).unwrap();
            append(&mut tx, lists[0], 1).unwrap();
            append(&mut tx, lists[1], 2).unwrap();
            r.append(0, 1);
            r.append(1, 2);
            match tx.commit() {
                Ok(_) => r.commit(),
                Err(_) => r.abort(),
            }
        });
        gate.wait_paused();
        let mut r = rec.begin(2);
        let mut tx = db.begin_with(reader_options).unwrap();
        let first = read_list(&mut tx, lists[0]);
        gate.release();
        writer.join().unwrap();
        let outcome = first.and_then(|l0| {
            r.read_list(0, &l0);
            let l1 = read_list(&mut tx, lists[1])?;
            r.read_list(1, &l1);
            tx.commit()
        });
        match outcome {
            Ok(_) => r.commit(),
            Err(Error::Aborted(_)) => r.abort(),
            Err(e) => panic!("{e}"),
        }
    });
    rec.history()
}

#[test]
fn reading_locked_objects_breaks_opacity() {
    static GATE: Gate = Gate::new();
    fn hook(step: CommitStep) {
        if step == CommitStep::WriteTimestamp {
            GATE.pause();
        }
    }
    let writer = Shortcuts {
        hook: Some(hook),
        ..Shortcuts::default()
    };
    let skip = Shortcuts {
        skip_read_lock_check: true,
        ..Shortcuts::default()
    };

    let h = torn_read_script(writer, skip, &GATE);
    let v = check_opacity(&h).expect_err("a read of a locked object must be caught");
    eprintln!("caught as expected: {v}");

    let h = torn_read_script(writer, Shortcuts::default(), &GATE);
    check_opacity(&h).expect("with the lock check the reader aborts instead");
}

#[test]
fn waiting_before_locking_breaks_opacity() {
    static GATE: Gate = Gate::new();
    fn hook(step: CommitStep) {
        if step == CommitStep::BeforeLock {
            GATE.pause();
        }
    }
    let unsafe_writer = Shortcuts {
        hook: Some(hook),
        wait_before_lock: true,
        ..Shortcuts::default()
    };
    let h = torn_read_script(unsafe_writer, Shortcuts::default(), &GATE);
    let v = check_opacity(&h).expect_err("a write timestamp drawn before locking must be caught");
    eprintln!("caught as expected: {v}");

    let safe_writer = Shortcuts {
        hook: Some(hook),
        ..Shortcuts::default()
    };
    let h = torn_read_script(safe_writer, Shortcuts::default(), &GATE);
    check_opacity(&h).expect("locking first keeps the snapshot consistent");
}

/// Write skew: two transactions read both lists and each appends to a different one.
fn write_skew(shortcuts: Shortcuts) -> ordo_check::History {
    let (db, lists) = db();
    let rec = Recorder::new();
    let options = Options {
        shortcuts,
        ..Options::isolation(Isolation::StrictSerializable)
    };
    let mut r1 = rec.begin(1);
    let mut r2 = rec.begin(2);
    let mut t1 = db.begin_with(options).unwrap();
    let mut t2 = db.begin_with(options).unwrap();
    for (t, r) in [(&mut t1, &mut r1), (&mut t2, &mut r2)] {
        for k in 0..2 {
            let l = read_list(t, lists[k]).unwrap();
            r.read_list(k as u64, &l);
        }
    }
    append(&mut t1, lists[0], 10).unwrap();
    r1.append(0, 10);
    append(&mut t2, lists[1], 20).unwrap();
    r2.append(1, 20);
    for (t, r) in [(t1, r1), (t2, r2)] {
        match t.commit() {
            Ok(_) => r.commit(),
            Err(Error::Aborted(_)) => r.abort(),
            Err(e) => panic!("{e}"),
        }
    }
    common::final_read(&db, &lists, &rec);
    rec.history()
}

#[test]
fn skipping_validation_breaks_serializability() {
    let h = write_skew(Shortcuts {
        skip_validation: true,
        ..Shortcuts::default()
    });
    let v = check_serializable(&h).expect_err("write skew must be caught");
    eprintln!("caught as expected: {v}");
    let h = write_skew(Shortcuts::default());
    check_serializable(&h).expect("validation aborts one of the two");
}
