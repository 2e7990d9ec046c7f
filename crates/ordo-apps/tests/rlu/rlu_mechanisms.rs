//! Removal tests of two RLU safety mechanisms, each a deterministic script that passes with
//! the mechanism and fails with it switched off by a test-only shortcut (feature `shortcuts`):
//!
//! * the **header re-check after a stolen copy** (`RluShortcuts::skip_steal_recheck`): a
//!   reader that decided to steal a copy re-reads the object's header after copying. The
//!   script pauses a stealing reader between its decision and the copy; meanwhile the writer
//!   writes back, its handle is dropped and the thread id is reused by a new handle, which
//!   starts on the same log and locks another object into the same slot. Without the re-check
//!   the reader returns the other object's uncommitted value.
//! * **delayed frees** (`RluShortcuts::skip_delayed_free`): a node freed by a writer is
//!   recycled only after synchronize. Two scripts: a reader holding a link to a node while the
//!   writer that unlinks it allocates in the same section; and a deferring writer that removes a
//!   key in one section and inserts another in the next, while the removal is still invisible.
//!   With immediate frees the reader meets the node's next life.
#![cfg(feature = "shortcuts")]
#![allow(clippy::unwrap_used, unreachable_pub)] // test code: panics are the failure reports

use crate::common::{GO, IDLE, PAUSED, pause, wait_until};

use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use ordo_apps::rlu::hashset::RluHashSet;
use ordo_apps::rlu::{NodeId, NodeValue, Rlu, RluOptions, RluShortcuts, RluStep};
use ordo_clock::{LogicalClock, Reference, TestClock, Timestamp};

/// The scripts share the statics below: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

mod steal_recheck {
    use super::*;

    const B: u64 = 100;
    static WAIT_UNTIL: AtomicU64 = AtomicU64::new(0);
    static WRITEBACK: AtomicU8 = AtomicU8::new(IDLE);
    static STEALING: AtomicU8 = AtomicU8::new(IDLE);
    static NEW_OWNER: AtomicU8 = AtomicU8::new(IDLE);
    static FIRST_WRITEBACK: AtomicBool = AtomicBool::new(true);

    fn hook(step: RluStep) {
        match step {
            RluStep::ClockDrawn { wait_until, .. } => {
                WAIT_UNTIL.store(wait_until.as_nanos(), Ordering::SeqCst);
            }
            // Only the first writer pauses (the new owner of its thread id commits later).
            RluStep::BeforeWriteback if FIRST_WRITEBACK.swap(false, Ordering::SeqCst) => {
                pause(&WRITEBACK)
            }
            RluStep::Stealing => pause(&STEALING),
            RluStep::BeforeWriteback => {}
            RluStep::ClockRead | RluStep::ReaderBlocked => {}
        }
    }

    /// Returns what the reader saw of `n` (committed values: 1, then 2) and what the new owner
    /// of the thread id wrote into `m` (77, never committed to `n`).
    fn script(skip_steal_recheck: bool) -> u64 {
        let _serial = serial();
        WAIT_UNTIL.store(0, Ordering::SeqCst);
        FIRST_WRITEBACK.store(true, Ordering::SeqCst);
        for g in [&WRITEBACK, &STEALING, &NEW_OWNER] {
            g.store(IDLE, Ordering::SeqCst);
        }
        let clock = TestClock::builder()
            .claimed_boundary_nanos(B)
            .reference(Reference::Manual { start_nanos: 1_000_000 })
            .build();
        let options = RluOptions {
            capacity_nodes: 4,
            max_threads: 4,
            shortcuts: RluShortcuts {
                skip_steal_recheck,
                hook: Some(hook),
                ..RluShortcuts::default()
            },
            ..RluOptions::default()
        };
        let rlu = Rlu::new(clock.clone(), options).unwrap();
        let (n, m) = {
            let mut t = rlu.thread().unwrap();
            (
                t.alloc_unshared(NodeValue::new(1, NodeId::NIL)).unwrap(),
                t.alloc_unshared(NodeValue::new(50, NodeId::NIL)).unwrap(),
            )
        };
        let (rlu, clock) = (&rlu, &clock);
        std::thread::scope(|s| {
            // 1. The writer sets n = 2 and pauses before write-back (its write clock w is
            //    published; its copy of n is in slot 0 of log 0).
            let writer = s.spawn(move || {
                let mut t = rlu.thread().unwrap();
                let tid = t.id();
                t.section(|s| {
                    s.try_lock(n)?;
                    s.write(n, NodeValue::new(2, NodeId::NIL))
                })
                .unwrap();
                tid
            });
            wait_until(|| WAIT_UNTIL.load(Ordering::SeqCst) != 0);
            clock.set_reference(Timestamp::from_nanos(WAIT_UNTIL.load(Ordering::SeqCst) + 1));
            wait_until(|| WRITEBACK.load(Ordering::SeqCst) == PAUSED);
            // 2. A reader starts after w + B: it decides to steal n's copy and pauses.
            let reader = s.spawn(move || {
                let mut t = rlu.thread().unwrap();
                t.section(|s| Ok(s.deref(n)?.key)).unwrap()
            });
            wait_until(|| STEALING.load(Ordering::SeqCst) == PAUSED);
            // 3. The writer writes back and its handle is dropped; a new handle takes the same
            //    thread id, starts on log 0 and locks m into slot 0 (writing 77), and stays in
            //    its section.
            WRITEBACK.store(GO, Ordering::SeqCst);
            let writer_tid = writer.join().unwrap();
            let new_owner = s.spawn(move || {
                let mut t = rlu.thread().unwrap();
                assert_eq!(t.id(), writer_tid, "the thread id should be reused");
                t.section(|s| {
                    s.try_lock(m)?;
                    s.write(m, NodeValue::new(77, NodeId::NIL))?;
                    pause(&NEW_OWNER);
                    Ok(())
                })
                .unwrap();
            });
            wait_until(|| NEW_OWNER.load(Ordering::SeqCst) == PAUSED);
            // 4. The reader reads the copy slot.
            STEALING.store(GO, Ordering::SeqCst);
            // With the re-check the reader retries and meets no lock on n: no second pause.
            let seen = reader.join().unwrap();
            // Let the new owner commit: through its new_time wait once it drew its clock.
            WAIT_UNTIL.store(0, Ordering::SeqCst);
            NEW_OWNER.store(GO, Ordering::SeqCst);
            wait_until(|| WAIT_UNTIL.load(Ordering::SeqCst) != 0);
            clock.set_reference(Timestamp::from_nanos(WAIT_UNTIL.load(Ordering::SeqCst) + 1));
            new_owner.join().unwrap();
            seen
        })
    }

    #[test]
    fn with_the_recheck_a_reader_never_returns_a_reused_copy_slot() {
        assert_eq!(script(false), 2);
    }

    #[test]
    fn without_the_recheck_a_reader_returns_another_objects_uncommitted_copy() {
        assert_eq!(script(true), 77);
    }
}

mod delayed_free {
    use super::*;

    static READER: AtomicU8 = AtomicU8::new(IDLE);
    static COMMITTING: AtomicU8 = AtomicU8::new(IDLE);

    fn hook(step: RluStep) {
        if let RluStep::ClockDrawn { .. } = step {
            COMMITTING.store(PAUSED, Ordering::SeqCst);
        }
    }

    /// A list `head -> x(5)` and a node `other`. A reader reads `head`, pauses holding the link
    /// to `x`; a writer, in one section, unlinks and frees `x`, then allocates a node (key 9)
    /// and links it behind `other`. Once the writer commits (and waits for the reader), the
    /// reader reads `x`. Returns the key it saw.
    fn same_section_script(skip_delayed_free: bool) -> u64 {
        let _serial = serial();
        READER.store(IDLE, Ordering::SeqCst);
        COMMITTING.store(IDLE, Ordering::SeqCst);
        let options = RluOptions {
            capacity_nodes: 8,
            max_threads: 4,
            shortcuts: RluShortcuts {
                skip_delayed_free,
                hook: Some(hook),
                ..RluShortcuts::default()
            },
            ..RluOptions::default()
        };
        let rlu = Rlu::new(LogicalClock::new(), options).unwrap();
        let (head, x, other) = {
            let mut t = rlu.thread().unwrap();
            let x = t.alloc_unshared(NodeValue::new(5, NodeId::NIL)).unwrap();
            let head = t.alloc_unshared(NodeValue::new(0, x)).unwrap();
            let other = t.alloc_unshared(NodeValue::new(0, NodeId::NIL)).unwrap();
            (head, x, other)
        };
        let rlu = &rlu;
        std::thread::scope(|s| {
            let reader = s.spawn(move || {
                let mut t = rlu.thread().unwrap();
                t.section(|s| {
                    let next = s.deref(head)?.next;
                    assert_eq!(next, x);
                    pause(&READER);
                    Ok(s.deref(next)?.key)
                })
                .unwrap()
            });
            wait_until(|| READER.load(Ordering::SeqCst) == PAUSED);
            let writer = s.spawn(move || {
                let mut t = rlu.thread().unwrap();
                t.section(|s| {
                    let hv = s.deref(head)?;
                    let xv = s.deref(x)?;
                    s.try_lock(head)?;
                    s.try_lock(x)?;
                    s.write(head, NodeValue { next: xv.next, ..hv })?;
                    s.free(x)?;
                    let fresh = s.alloc(NodeValue::new(9, NodeId::NIL))?;
                    let ov = s.deref(other)?;
                    s.try_lock(other)?;
                    s.write(other, NodeValue { next: fresh, ..ov })
                })
                .unwrap();
            });
            // The writer has drawn its write clock; its synchronize waits for the reader.
            wait_until(|| COMMITTING.load(Ordering::SeqCst) == PAUSED);
            READER.store(GO, Ordering::SeqCst);
            let seen = reader.join().unwrap();
            writer.join().unwrap();
            seen
        })
    }

    #[test]
    fn with_delayed_frees_a_reader_holding_a_freed_node_reads_it_intact() {
        assert_eq!(same_section_script(false), 5);
    }

    #[test]
    fn with_immediate_frees_a_reader_holding_a_freed_node_sees_its_next_life() {
        assert_eq!(same_section_script(true), 9);
    }

    /// With deferral (limit 8): a writer removes key 2 from bucket 0, then inserts key 3 into
    /// bucket 1 in the next section; both stay deferred. Another thread asks for key 2, which
    /// must still be there: the removal is not published. Returns its answer.
    fn deferred_script(skip_delayed_free: bool) -> bool {
        let _serial = serial();
        let options = RluOptions {
            capacity_nodes: 16,
            max_threads: 4,
            defer_limit: NonZeroUsize::new(8),
            shortcuts: RluShortcuts { skip_delayed_free, ..RluShortcuts::default() },
            ..RluOptions::default()
        };
        let set = RluHashSet::new(LogicalClock::new(), 2, options).unwrap();
        assert!(set.handle().unwrap().insert(2).unwrap());
        let mut writer = set.handle().unwrap();
        assert!(writer.remove(2).unwrap());
        assert!(writer.insert(3).unwrap());
        assert_eq!(writer.deferred_sections(), 2);
        let mut reader = set.handle().unwrap();
        let seen = reader.contains(2).unwrap();
        if skip_delayed_free {
            // Keep the writer's corrupt deferred state from being written back.
            std::mem::forget(writer);
        } else {
            drop(writer);
            assert!(!reader.contains(2).unwrap() && reader.contains(3).unwrap());
        }
        seen
    }

    #[test]
    fn with_delayed_frees_a_deferred_removal_stays_invisible() {
        assert!(deferred_script(false));
    }

    #[test]
    fn with_immediate_frees_a_deferred_removal_corrupts_what_others_read() {
        assert!(!deferred_script(true));
    }
}
