//! A loom model of the calibration handshake (`ordo_clock::handshake`, ORDO Fig. 4).
//!
//! The real protocol runs unchanged: its atomics come through the crate's `sync` shim, which
//! `--cfg loom` switches to loom's. Hardware counters do not exist under loom, so each side's
//! counter is a fake that reads one shared "true time" (a SeqCst `fetch_add`, so its order is
//! consistent with happens-before) and records what it returned. Under every interleaving the
//! model checks:
//! * every message is received exactly once, in order, by the side it is addressed to;
//! * the stamp a receiver loads is exactly the reading its peer took to send *that* message
//!   (never a stale or its own stamp);
//! * the receiver's reading is later in true time than that stamp — so a measured delta is the
//!   offset plus a positive latency, never less (ORDO §3.2.2);
//! * the session terminates (the model would report a deadlock or livelock otherwise).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p ordo-clock --test 'loom*'`.
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering};

use ordo_clock::handshake::{Mailbox, Reception};

/// Rounds per session: two rounds exercise the reuse of the line by both directions.
const ROUNDS: u64 = 2;

/// A fake counter: readings of the shared true time, recorded.
fn fake_counter(time: &AtomicU64, produced: &mut Vec<u64>) -> u64 {
    let reading = time.fetch_add(1, Ordering::SeqCst) + 1;
    produced.push(reading);
    reading
}

#[test]
fn handshake_delivers_each_stamp_once_and_after_it_was_taken() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(|| {
        let mailbox = Arc::new(Mailbox::new());
        let time = Arc::new(AtomicU64::new(0));

        let responder = {
            let (mailbox, time) = (mailbox.clone(), time.clone());
            loom::thread::spawn(move || {
                let mut produced = Vec::new();
                let mut seen = Vec::new();
                let outcome = mailbox
                    .run_responder_observed(
                        || fake_counter(&time, &mut produced),
                        || false,
                        |r| seen.push(r),
                    )
                    .unwrap();
                (outcome, produced, seen)
            })
        };
        let mut produced = Vec::new();
        let mut seen: Vec<Reception> = Vec::new();
        let init = mailbox
            .run_initiator_observed(
                ROUNDS,
                || fake_counter(&time, &mut produced),
                |_| true,
                || false,
                |r| seen.push(r),
            )
            .unwrap();
        let (resp, resp_produced, resp_seen) = responder.join().unwrap();

        assert_eq!(init.received, ROUNDS);
        assert_eq!(resp.received, ROUNDS);
        // Initiator readings: send 1, receive 2, send 3, receive 4, ...
        // Responder readings: receive 1, send 2, receive 3, send 4, ...
        assert_eq!(produced.len() as u64, 2 * ROUNDS);
        assert_eq!(resp_produced.len() as u64, 2 * ROUNDS);
        for (k, r) in resp_seen.iter().enumerate() {
            assert_eq!(r.message, 2 * k as u64 + 1);
            assert_eq!(r.stamp, produced[2 * k], "responder got a stale stamp");
            assert_eq!(r.reading, resp_produced[2 * k]);
            assert!(r.reading > r.stamp, "reading not after the stamp");
        }
        for (k, r) in seen.iter().enumerate() {
            assert_eq!(r.message, 2 * k as u64 + 2);
            assert_eq!(r.stamp, resp_produced[2 * k + 1], "initiator got a stale stamp");
            assert_eq!(r.reading, produced[2 * k + 1]);
            assert!(r.reading > r.stamp, "reading not after the stamp");
        }
        assert!(init.min_delta_ticks.is_some_and(|d| d > 0));
        assert!(resp.min_delta_ticks.is_some_and(|d| d > 0));
    });
}

/// A side that cannot start (pinning failed) aborts; the peer gives up instead of spinning.
#[test]
fn an_aborting_peer_releases_the_other_side() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(|| {
        let mailbox = Arc::new(Mailbox::new());
        let responder = {
            let mailbox = mailbox.clone();
            loom::thread::spawn(move || mailbox.abort())
        };
        let time = AtomicU64::new(0);
        let mut produced = Vec::new();
        let result = mailbox.run_initiator(
            ROUNDS,
            || fake_counter(&time, &mut produced),
            |_| true,
            || false,
        );
        assert!(result.is_err());
        responder.join().unwrap();
    });
}
