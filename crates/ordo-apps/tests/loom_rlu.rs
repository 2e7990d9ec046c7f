//! Loom models of the RLU core: the header / copy / write-clock protocol between a reader and
//! a committing writer, and lock conflicts between writers. The clock is a loom-modelled
//! counter (the logical clock), so loom explores every interleaving of the memory operations.
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p ordo-apps --test loom_rlu`.
#![cfg(loom)]
#![allow(clippy::unwrap_used, unreachable_pub)] // test code: panics are the failure reports

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;
use ordo_apps::rlu::{NodeId, NodeValue, Rlu, RluOptions};
use ordo_clock::{Clock, ClockKind, Interval, Timestamp};

/// The logical clock on a loom atomic.
struct LoomClock(AtomicU64);

impl Clock for LoomClock {
    fn now(&self) -> Interval {
        Interval::exact(Timestamp::from_nanos(self.0.load(Ordering::Acquire)))
    }
    fn get_ts(&self) -> Timestamp {
        Timestamp::from_nanos(self.0.fetch_add(1, Ordering::AcqRel) + 1)
    }
    fn read_ts(&self) -> Timestamp {
        self.now().lo()
    }
    fn boundary_nanos(&self) -> u64 {
        0
    }
    fn kind(&self) -> ClockKind {
        ClockKind::Logical
    }
}

fn options() -> RluOptions {
    RluOptions { capacity_nodes: 2, max_threads: 2, log_capacity: 2, ..RluOptions::default() }
}

fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b
}

/// A writer updates two objects in one section; a concurrent reader sees both old or both new
/// (it steals both copies or neither, and the writer does not write back under it).
#[test]
fn reader_sees_both_or_neither_update() {
    builder().check(|| {
        let rlu = Rlu::new(LoomClock(AtomicU64::new(0)), options()).unwrap();
        let (a, b) = {
            let mut t = rlu.thread().unwrap();
            (
                t.alloc_unshared(NodeValue::new(1, NodeId::NIL)).unwrap(),
                t.alloc_unshared(NodeValue::new(1, NodeId::NIL)).unwrap(),
            )
        };
        let writer = {
            let rlu = rlu.clone();
            thread::spawn(move || {
                let mut t = rlu.thread().unwrap();
                t.section(|s| {
                    s.try_lock(a)?;
                    s.try_lock(b)?;
                    s.write(a, NodeValue::new(2, NodeId::NIL))?;
                    s.write(b, NodeValue::new(2, NodeId::NIL))
                })
                .unwrap();
            })
        };
        let mut t = rlu.thread().unwrap();
        let (ka, kb) = t.section(|s| Ok((s.deref(a)?.key, s.deref(b)?.key))).unwrap();
        assert_eq!(ka, kb, "torn snapshot");
        drop(t);
        writer.join().unwrap();
        let mut t = rlu.thread().unwrap();
        assert_eq!(t.section(|s| Ok((s.deref(a)?.key, s.deref(b)?.key))).unwrap(), (2, 2));
    });
}

/// Two writers increment the same object: the lock lets one through at a time, the loser
/// retries, and no increment is lost.
#[test]
fn conflicting_writers_lose_no_update() {
    builder().check(|| {
        let rlu = Rlu::new(LoomClock(AtomicU64::new(0)), options()).unwrap();
        let a = rlu.thread().unwrap().alloc_unshared(NodeValue::new(0, NodeId::NIL)).unwrap();
        let inc = move |rlu: &std::sync::Arc<Rlu<LoomClock>>| {
            let mut t = rlu.thread().unwrap();
            t.section(|s| {
                let v = s.deref(a)?;
                s.try_lock(a)?;
                s.write(a, NodeValue::new(v.key + 1, NodeId::NIL))
            })
            .unwrap();
        };
        let other = {
            let rlu = rlu.clone();
            thread::spawn(move || inc(&rlu))
        };
        inc(&rlu);
        other.join().unwrap();
        let mut t = rlu.thread().unwrap();
        assert_eq!(t.section(|s| s.deref(a)).unwrap().key, 2);
    });
}

/// Deferral (limit 2): one thread increments `a` and keeps the write deferred until its handle
/// is dropped; the other increments `a` too. When it meets the deferred lock it asks for a
/// sync and retries; no interleaving deadlocks or loses an increment.
#[test]
fn deferred_writer_and_conflicting_writer_lose_no_update() {
    builder().check(|| {
        let options = RluOptions { defer_limit: std::num::NonZeroUsize::new(2), ..options() };
        let rlu = Rlu::new(LoomClock(AtomicU64::new(0)), options).unwrap();
        let a = rlu.thread().unwrap().alloc_unshared(NodeValue::new(0, NodeId::NIL)).unwrap();
        let inc = move |t: &mut ordo_apps::rlu::RluThread<LoomClock>| {
            t.section(|s| {
                let v = s.deref(a)?;
                s.try_lock(a)?;
                s.write(a, NodeValue::new(v.key + 1, NodeId::NIL))
            })
            .unwrap();
        };
        let other = {
            let rlu = rlu.clone();
            thread::spawn(move || {
                let mut t = rlu.thread().unwrap();
                inc(&mut t);
            })
        };
        let mut t = rlu.thread().unwrap();
        inc(&mut t);
        drop(t);
        other.join().unwrap();
        let mut t = rlu.thread().unwrap();
        assert_eq!(t.section(|s| s.deref(a)).unwrap().key, 2);
    });
}
