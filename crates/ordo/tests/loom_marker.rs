//! Loom model of the durable marker's bound (`ordo::durable::marker`): with committers drawing
//! timestamps from a logical clock while a leader computes the bound, every timestamp at or
//! below the bound was logged before the leader looked — in every interleaving loom explores.
//! The negative model ignores the committers' lower bounds and must find a violation; with
//! either fence of `ordo::durable::marker` removed the positive model fails too (checked by
//! hand).
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p ordo --test loom_marker`.
#![cfg(loom)]
#![allow(clippy::unwrap_used, unreachable_pub)] // test code: panics are the failure reports

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;
use ordo::durable::marker::MarkerSlots;

/// Two committers (one commit each) against one leader computing the bound once. `logged[i]`
/// stands for committer `i`'s record in the stream (0: not there yet).
fn model(ignore_pending: bool) {
    let mut builder = loom::model::Builder::new();
    // Every interleaving with up to 3 preemptions: the violating schedules need 2.
    builder.preemption_bound = Some(3);
    builder.check(move || {
        let clock = Arc::new(AtomicU64::new(0));
        let slots = Arc::new(MarkerSlots::new(2));
        let logged = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let committers: Vec<_> = (0..2)
            .map(|slot| {
                let (clock, slots, logged) = (clock.clone(), slots.clone(), logged.clone());
                thread::spawn(move || {
                    // The commit protocol's order: lower bound, get_ts, log, appended.
                    // Relaxed: like the ORDO clock (a hardware counter), drawing a timestamp
                    // synchronizes nothing; only its order matters.
                    let lower = clock.load(Ordering::Relaxed);
                    slots.publish_lower(slot, lower);
                    let wts = clock.fetch_add(1, Ordering::Relaxed) + 1;
                    logged[slot].store(wts, Ordering::Release);
                    slots.appended(slot, wts);
                    wts
                })
            })
            .collect();
        // The leader: the bound, then what it would take from the stream.
        let d = slots.bound(ignore_pending, None);
        let taken: Vec<u64> = logged.iter().map(|l| l.load(Ordering::Acquire)).collect();
        for c in committers {
            let wts = c.join().unwrap();
            assert!(
                wts > d || taken.contains(&wts),
                "timestamp {wts} <= bound {d} was not logged when the bound was computed"
            );
        }
    });
}

#[test]
fn every_timestamp_below_the_bound_is_logged() {
    model(false);
}

#[test]
#[should_panic(expected = "was not logged")]
fn ignoring_pending_committers_is_caught() {
    model(true);
}
