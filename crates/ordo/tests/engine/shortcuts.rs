//! Negative tests (DESIGN §8): remove one protocol step through a test-only switch, script the
//! interleaving that FaRMv2 §7.3 says breaks, and show that `ordo-check` rejects the history.
//! Each scenario also runs with the step in place, where the same script must yield a history
//! the checker accepts — so a failure is the shortcut's doing, not the script's.
#![cfg(feature = "shortcuts")]
#![allow(clippy::unwrap_used, unreachable_pub)] // test code: panics are the failure reports

use crate::common;

use std::sync::atomic::{AtomicU8, Ordering};

use ordo::txn::{CommitStep, Shortcuts};
use ordo::{Addr, Config, Error, Isolation, Options, Ordo, Tx};
use ordo_check::{Recorder, TxnRecorder, Violation, check_opacity, check_serializable};
use ordo_clock::{Clock, LogicalClock, TestClock};

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
        Gate { state: AtomicU8::new(IDLE) }
    }
    /// Called by the committer: announce the pause and wait for `release`.
    fn pause(&self) {
        self.state.store(PAUSED, Ordering::SeqCst);
        wait_until(|| self.state.load(Ordering::SeqCst) == GO);
        self.state.store(IDLE, Ordering::SeqCst);
    }
    fn wait_paused(&self) {
        wait_until(|| self.state.load(Ordering::SeqCst) == PAUSED);
    }
    fn release(&self) {
        self.state.store(GO, Ordering::SeqCst);
    }
}

/// Spins until `cond` holds; a script that went wrong fails instead of hanging the suite.
fn wait_until(cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "scripted interleaving stalled");
        std::thread::yield_now();
    }
}

/// Defines a static [`Gate`] `$gate` and a commit hook `$hook` that pauses at it on `$step`.
/// Each test defines its own: tests run in parallel and must not share a gate.
macro_rules! gate_at {
    ($gate:ident, $hook:ident, $step:expr) => {
        static $gate: Gate = Gate::new();
        fn $hook(step: CommitStep) {
            if step == $step {
                $gate.pause();
            }
        }
    };
}

/// Fails the test unless `verdict` is a violation (`what` names the one that must be caught);
/// prints it. A failure points at the caller.
#[track_caller]
fn assert_caught(verdict: Result<(), Violation>, what: &str) {
    let v = verdict.expect_err(what);
    eprintln!("caught as expected: {v}");
}

/// Reads list `k` in `tx` and records the read.
fn read_recorded<C: Clock>(
    tx: &mut Tx<'_, C>,
    r: &mut TxnRecorder<'_>,
    lists: &[Addr],
    k: usize,
) -> Result<(), Error> {
    let list = read_list(tx, lists[k])?;
    r.read_list(k as u64, &list);
    Ok(())
}

/// Appends `value` to list `k` in `tx` and records the append.
fn append_recorded<C: Clock>(
    tx: &mut Tx<'_, C>,
    r: &mut TxnRecorder<'_>,
    lists: &[Addr],
    k: usize,
    value: u64,
) -> Result<(), Error> {
    append(tx, lists[k], value)?;
    r.append(k as u64, value);
    Ok(())
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
    torn_read_on(&db, &lists, || {}, writer_shortcuts, reader_shortcuts, gate)
}

/// [`torn_read_script`] on a given database; `writer_setup` runs first on the writer's thread.
fn torn_read_on<C: Clock>(
    db: &Ordo<C>,
    lists: &[Addr],
    writer_setup: impl Fn() + Sync,
    writer_shortcuts: Shortcuts,
    reader_shortcuts: Shortcuts,
    gate: &'static Gate,
) -> ordo_check::History {
    let rec = Recorder::new();
    let writer_options = Options { shortcuts: writer_shortcuts, ..Options::default() };
    let reader_options = Options { shortcuts: reader_shortcuts, ..Options::default() };
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            writer_setup();
            let mut r = rec.begin(1);
            let mut tx = db.begin_with(writer_options).unwrap();
            append_recorded(&mut tx, &mut r, lists, 0, 1).unwrap();
            append_recorded(&mut tx, &mut r, lists, 1, 2).unwrap();
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
            read_recorded(&mut tx, &mut r, lists, 1)?;
            tx.commit()
        });
        common::record_end(outcome, r);
    });
    rec.history()
}

#[test]
fn reading_locked_objects_breaks_opacity() {
    gate_at!(GATE, hook, CommitStep::WriteTimestamp);
    let writer = Shortcuts { hook: Some(hook), ..Shortcuts::default() };
    let skip = Shortcuts { skip_read_lock_check: true, ..Shortcuts::default() };

    let h = torn_read_script(writer, skip, &GATE);
    assert_caught(check_opacity(&h), "a read of a locked object must be caught");

    let h = torn_read_script(writer, Shortcuts::default(), &GATE);
    check_opacity(&h).expect("with the lock check the reader aborts instead");
}

#[test]
fn waiting_before_locking_breaks_opacity() {
    gate_at!(GATE, hook, CommitStep::BeforeLock);
    let unsafe_writer =
        Shortcuts { hook: Some(hook), wait_before_lock: true, ..Shortcuts::default() };
    let h = torn_read_script(unsafe_writer, Shortcuts::default(), &GATE);
    assert_caught(check_opacity(&h), "a write timestamp drawn before locking must be caught");

    let safe_writer = Shortcuts { hook: Some(hook), ..Shortcuts::default() };
    let h = torn_read_script(safe_writer, Shortcuts::default(), &GATE);
    check_opacity(&h).expect("locking first keeps the snapshot consistent");
}

/// The optimistic strict read timestamp (`txn` module docs, "Optimistic read timestamp"): the
/// reader's `rts` is `now().hi`, ahead of true time. A writer whose clock lags by the whole
/// (truthful) boundary locks after the reader's first read and still draws a `wts` below the
/// reader's `rts`, so the reader's second read returns the new version. Revalidating the first
/// read then dooms the reader; without it the reader sees list 1 appended and list 0 not.
#[test]
fn skipping_read_revalidation_breaks_opacity() {
    gate_at!(GATE, hook, CommitStep::BeforeLock);
    const BOUNDARY_NS: u64 = 200_000_000;
    let run = |reader: Shortcuts| {
        let clock = TestClock::new(BOUNDARY_NS);
        let db = Ordo::with_clock(Config::default(), clock.clone()).unwrap();
        let lists = common::make_lists(&db, 2);
        let writer = Shortcuts { hook: Some(hook), ..Shortcuts::default() };
        let lag = || clock.set_thread_skew(-(BOUNDARY_NS as i64), 0);
        torn_read_on(&db, &lists, lag, writer, reader, &GATE)
    };
    let h = run(Shortcuts { skip_read_revalidation: true, ..Shortcuts::default() });
    assert_caught(check_opacity(&h), "a read past an unvalidated earlier read must be caught");
    let h = run(Shortcuts::default());
    check_opacity(&h).expect("revalidation dooms the reader instead");
}

/// Write skew: two transactions read both lists and each appends to a different one.
fn write_skew(shortcuts: Shortcuts) -> ordo_check::History {
    let (db, lists) = db();
    let rec = Recorder::new();
    let options = Options { shortcuts, ..Options::isolation(Isolation::StrictSerializable) };
    let mut r1 = rec.begin(1);
    let mut r2 = rec.begin(2);
    let mut t1 = db.begin_with(options).unwrap();
    let mut t2 = db.begin_with(options).unwrap();
    for (t, r) in [(&mut t1, &mut r1), (&mut t2, &mut r2)] {
        for k in 0..lists.len() {
            read_recorded(t, r, &lists, k).unwrap();
        }
    }
    append_recorded(&mut t1, &mut r1, &lists, 0, 10).unwrap();
    append_recorded(&mut t2, &mut r2, &lists, 1, 20).unwrap();
    for (t, r) in [(t1, r1), (t2, r2)] {
        common::record_end(t.commit(), r);
    }
    common::final_read(&db, &lists, &rec);
    rec.history()
}

#[test]
fn skipping_validation_breaks_serializability() {
    let h = write_skew(Shortcuts { skip_validation: true, ..Shortcuts::default() });
    assert_caught(check_serializable(&h), "write skew must be caught");
    let h = write_skew(Shortcuts::default());
    check_serializable(&h).expect("validation aborts one of the two");
}

// ---------------------------------------------------------------------------------------------
// Multi-version counterexamples of FaRMv2 §7.3. They need a clock with real uncertainty, so they
// run on a scripted clock: the test says what `now()` returns, and `get_ts` "waits" by moving the
// interval past the returned timestamp (running an optional action first: what other machines do
// while this one waits). Every interval the script sets contains a plausible true time.

mod script {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};

    use ordo_clock::{Clock, ClockKind, Interval, Timestamp};

    type Action = Box<dyn FnOnce() + Send>;

    #[derive(Default)]
    pub struct ScriptClock {
        lo: AtomicU64,
        hi: AtomicU64,
        /// A time known to have passed: the end of the latest wait.
        floor: AtomicU64,
        during_wait: Mutex<Option<Action>>,
    }

    impl ScriptClock {
        /// Sets the reading to `[lo, hi]`; if a wait already moved true time past `hi`, the
        /// reading becomes `[floor, floor]` instead, so the script never lies about time.
        pub fn set(&self, lo: u64, hi: u64) {
            let floor = self.floor.load(Ordering::SeqCst);
            let (lo, hi) = if hi < floor { (floor, floor) } else { (lo, hi) };
            self.lo.store(lo, Ordering::SeqCst);
            self.hi.store(hi, Ordering::SeqCst);
        }
        /// Runs `action` inside the next `get_ts`, before its wait completes.
        pub fn during_next_wait(&self, action: impl FnOnce() + Send + 'static) {
            *self.during_wait.lock().unwrap() = Some(Box::new(action));
        }
    }

    impl Clock for ScriptClock {
        fn now(&self) -> Interval {
            Interval::new(
                Timestamp::from_nanos(self.lo.load(Ordering::SeqCst)),
                Timestamp::from_nanos(self.hi.load(Ordering::SeqCst)),
            )
        }
        fn get_ts(&self) -> Timestamp {
            let upper = self.hi.load(Ordering::SeqCst);
            let action = self.during_wait.lock().unwrap().take();
            if let Some(action) = action {
                action();
            }
            if self.lo.load(Ordering::SeqCst) <= upper {
                self.lo.store(upper + 1, Ordering::SeqCst);
                self.hi.store(upper + 1, Ordering::SeqCst);
            }
            self.floor.fetch_max(upper + 1, Ordering::SeqCst);
            Timestamp::from_nanos(upper)
        }
        fn boundary_nanos(&self) -> u64 {
            0
        }
        fn kind(&self) -> ClockKind {
            ClockKind::Test
        }
    }
}

type ScriptDb = Ordo<std::sync::Arc<script::ScriptClock>>;

fn mv_db() -> (std::sync::Arc<script::ScriptClock>, ScriptDb, Vec<Addr>) {
    let clock = std::sync::Arc::new(script::ScriptClock::default());
    clock.set(1, 1);
    let config = Config { versions: ordo::Versions::Multi, ..Config::default() };
    let db = Ordo::with_clock(config, clock.clone()).unwrap();
    let lists = common::make_lists(&db, 2); // A = lists[0], B = lists[1], both at version 2
    (clock, db, lists)
}

fn record<C: ordo_clock::Clock>(
    rec: &Recorder,
    process: u32,
    db: &Ordo<C>,
    options: Options,
    body: impl FnOnce(&mut Tx<'_, C>, &mut TxnRecorder<'_>) -> Result<(), Error>,
) {
    let mut r = rec.begin(process);
    let mut tx = db.begin_with(options).unwrap();
    match body(&mut tx, &mut r).and_then(|()| tx.commit().map(|_| ())) {
        Ok(()) => r.commit(),
        Err(Error::Aborted(_)) => r.abort(),
        Err(e) => panic!("{e}"),
    }
}

fn read_both<C: ordo_clock::Clock>(
    lists: &[Addr],
) -> impl FnOnce(&mut Tx<'_, C>, &mut TxnRecorder<'_>) -> Result<(), Error> + '_ {
    move |tx, r| (0..lists.len()).try_for_each(|k| read_recorded(tx, r, lists, k))
}

/// FaRMv2 §7.3 verbatim: T1 (high uncertainty) does A <- B + 1 and unlocks while its write
/// timestamp 9 is still in the future; T2 writes B at 7; T3 reads at 8 and sees B@7 but the old A.
fn no_write_wait(skip: bool) -> ordo_check::History {
    let (clock, db, lists) = mv_db();
    let rec = Recorder::new();
    let t1 = Options {
        shortcuts: Shortcuts { skip_write_wait: skip, ..Shortcuts::default() },
        ..Options::default()
    };
    clock.set(3, 3);
    record(&rec, 1, &db, t1, |tx, r| {
        read_recorded(tx, r, &lists, 1)?;
        append_recorded(tx, r, &lists, 0, 1)?;
        clock.set(4, 9); // T1's machine is very uncertain when it commits
        Ok(())
    });
    clock.set(6, 6);
    record(&rec, 2, &db, Options::default(), |tx, r| append_recorded(tx, r, &lists, 1, 2));
    clock.set(8, 8);
    record(&rec, 3, &db, Options::default(), read_both(&lists));
    clock.set(20, 20);
    record(&rec, 4, &db, Options::default(), read_both(&lists));
    rec.history()
}

#[test]
fn skipping_the_write_wait_breaks_serializability_with_old_versions() {
    let h = no_write_wait(true);
    assert_caught(check_serializable(&h), "FaRMv2 §7.3 counterexample must be caught");
    check_opacity(&no_write_wait(false)).expect("with the wait, T2 and T3 start after 9");
}

/// Validation overlapping the wait: T1 validates B, then waits out wts = 9; while it waits T2
/// commits B@7. A non-strict reader at 8 then sees B@7 with the old A, although T1 (which read
/// the old B) committed A@9.
fn validation_during_wait(early: bool) -> ordo_check::History {
    let (clock, db, lists) = mv_db();
    let db2 = db.clone();
    let lists2 = lists.clone();
    let rec = std::sync::Arc::new(Recorder::new());
    let rec2 = rec.clone();
    let clock2 = clock.clone();
    let t1 = Options {
        shortcuts: Shortcuts { validate_before_wait: early, ..Shortcuts::default() },
        ..Options::default()
    };
    clock.set(3, 3);
    record(&rec, 1, &db, t1, |tx, r| {
        read_recorded(tx, r, &lists, 1)?;
        append_recorded(tx, r, &lists, 0, 1)?;
        clock.set(4, 9);
        clock.during_next_wait(move || {
            clock2.set(6, 6);
            record(&rec2, 2, &db2, Options::default(), |tx, r| {
                append_recorded(tx, r, &lists2, 1, 2)
            });
        });
        Ok(())
    });
    clock.set(8, 12);
    record(&rec, 3, &db, Options::isolation(Isolation::Serializable), read_both(&lists));
    clock.set(20, 20);
    record(&rec, 4, &db, Options::default(), read_both(&lists));
    rec.history()
}

#[test]
fn validating_during_the_wait_breaks_serializability_with_old_versions() {
    let h = validation_during_wait(true);
    assert_caught(check_serializable(&h), "validation before the wait must be caught");
    check_serializable(&validation_during_wait(false))
        .expect("validating after the wait aborts T1");
}
