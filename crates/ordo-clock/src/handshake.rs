//! The calibration handshake: a ping-pong over one cache line that measures the one-way
//! counter offset between two cores in both directions (ORDO Fig. 4).
//!
//! # Mechanism
//! Two threads, pinned to cores `a` and `b`, share a [`Mailbox`]: one cache-padded line holding
//! a message number `turn` and a counter `stamp`. The *initiator* (on `a`) sends the odd
//! messages, the *responder* (on `b`) the even ones. To send message `m` a side reads its counter
//! `t`, stores `stamp = t` (Relaxed) and then `turn = m` (Release). To receive it the other side
//! spins until `turn == m` (Acquire), reads its own counter `r` at once, then loads `stamp` and
//! records the one-way delta `δ = r − t`: the physical offset between the two counters plus the
//! latency of the message (ORDO §3.2.1, Fig. 5). It keeps the minimum over all its receptions
//! (Fig. 4 lines 18–19) and immediately sends the next message, so the two directions alternate:
//! `a→b, b→a, a→b, …`. This replaces the paper's barrier with the message order itself.
//!
//! The initiator decides how many rounds to run (`rounds_max`, cut short by its `keep_going`
//! callback, which the calibration uses for its time budget) and ends the session by storing
//! `turn = STOP`. Either side that waits too long (its `stalled` callback says so) or fails
//! before starting raises `abort`, which the peer checks every [`STALL_CHECK_SPINS`] spins, so
//! neither thread can be left spinning forever.
//!
//! # Invariants
//! * `turn` only grows, by one per message, until `STOP`; only the side whose turn it is writes
//!   `stamp` or `turn` (the other side is spinning), so the stamp a receiver loads is the one the
//!   sender stored for that very message.
//! * The receiver's counter read follows its Acquire load of `turn`; the sender's counter read
//!   precedes its Release store. With the read ordering of [`crate::counter`] this makes `r` a
//!   reading taken strictly after `t` in real time, so `δ` over-estimates the physical offset
//!   by the one-way latency and never under-estimates it (ORDO §3.2.2, Lemma).
//! * Every message number in `1..=2·rounds` is received exactly once by the side it is
//!   addressed to. `tests/loom_calibration.rs` checks these properties under every interleaving.
//!
//! The atomics come through the crate's `sync` module so that loom can replace them.

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicBool, AtomicU64, Ordering, spin_loop};

/// The `turn` value that ends a session.
const STOP: u64 = u64::MAX;

/// A waiting side checks `abort` and its `stalled` callback once per this many spins.
#[cfg(not(loom))]
pub const STALL_CHECK_SPINS: u32 = 1 << 10;
/// A waiting side checks `abort` and its `stalled` callback once per this many spins (every
/// spin under loom, where each spin is a branch of the model).
#[cfg(loom)]
pub const STALL_CHECK_SPINS: u32 = 1;

/// Why a side gave up.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum HandshakeError {
    /// This side's `stalled` callback said it had waited too long; it raised `abort`.
    #[error("the peer did not answer in time")]
    Stalled,
    /// The peer raised `abort`.
    #[error("the peer aborted the handshake")]
    PeerAborted,
    /// The protocol was violated (a message out of order); a bug.
    #[error("handshake protocol violated: expected message {expected}, saw {seen}")]
    Protocol {
        /// The message number this side waited for.
        expected: u64,
        /// The `turn` it saw.
        seen: u64,
    },
}

/// What one side measured: the minimum one-way delta of the messages it received.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SideOutcome {
    /// `min(receiver reading − sender stamp)` over the received messages, in ticks; `None` when
    /// nothing was received.
    pub min_delta_ticks: Option<i64>,
    /// How many messages this side received.
    pub received: u64,
}

/// One received message, as seen by its receiver.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Reception {
    /// The message number (odd: initiator to responder; even: the answer).
    pub message: u64,
    /// The sender's counter stamp carried by the message.
    pub stamp: u64,
    /// The receiver's counter reading right after it saw the message.
    pub reading: u64,
}

struct Line {
    turn: AtomicU64,
    stamp: AtomicU64,
    abort: AtomicBool,
}

/// The shared cache line of one handshake session between two threads.
pub struct Mailbox {
    line: CachePadded<Line>,
}

impl Default for Mailbox {
    fn default() -> Self {
        Self::new()
    }
}

enum Received {
    Message,
    Stop,
}

impl Mailbox {
    /// A fresh mailbox: no message sent yet.
    pub fn new() -> Self {
        Mailbox {
            line: CachePadded::new(Line {
                turn: AtomicU64::new(0),
                stamp: AtomicU64::new(0),
                abort: AtomicBool::new(false),
            }),
        }
    }

    /// Makes the peer give up (for a side that cannot start, e.g. because pinning failed).
    pub fn abort(&self) {
        // Relaxed: abort carries no data; the peer only needs to see the flag eventually.
        self.line.abort.store(true, Ordering::Relaxed);
    }

    /// Runs the initiator side: up to `rounds_max` rounds of "send an odd message, receive the
    /// even answer", then `STOP`. Before every round after the first, `keep_going(rounds_done)`
    /// may end the session early. `ticks` reads this core's counter; `stalled` is polled while
    /// waiting (see [`STALL_CHECK_SPINS`]). Returns the minimum delta of the answers, that is
    /// the responder→initiator direction.
    pub fn run_initiator(
        &self,
        rounds_max: u64,
        ticks: impl FnMut() -> u64,
        keep_going: impl FnMut(u64) -> bool,
        stalled: impl FnMut() -> bool,
    ) -> Result<SideOutcome, HandshakeError> {
        self.run_initiator_observed(rounds_max, ticks, keep_going, stalled, |_| {})
    }

    /// [`Mailbox::run_initiator`], calling `observe` with every [`Reception`] (for models and
    /// diagnostics).
    pub fn run_initiator_observed(
        &self,
        rounds_max: u64,
        mut ticks: impl FnMut() -> u64,
        mut keep_going: impl FnMut(u64) -> bool,
        mut stalled: impl FnMut() -> bool,
        mut observe: impl FnMut(Reception),
    ) -> Result<SideOutcome, HandshakeError> {
        debug_assert!(rounds_max < STOP / 2);
        let mut outcome = SideOutcome { min_delta_ticks: None, received: 0 };
        let mut result = Ok(());
        for round in 0..rounds_max {
            if round > 0 && !keep_going(round) {
                break;
            }
            self.send(2 * round + 1, &mut ticks);
            let answer = 2 * round + 2;
            match self.wait_for(answer, &mut stalled) {
                Ok(Received::Message) => {
                    self.record(answer, &mut outcome, &mut ticks, &mut observe)
                }
                Ok(Received::Stop) => {
                    result = Err(HandshakeError::Protocol { expected: answer, seen: STOP });
                    break;
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        // Release: pairs with the Acquire load of `turn` in the responder's wait_for().
        self.line.turn.store(STOP, Ordering::Release);
        result.map(|()| outcome)
    }

    /// Runs the responder side: receive each odd message, answer with the next even one, until
    /// `STOP`. Returns the minimum delta of the received messages, that is the
    /// initiator→responder direction.
    pub fn run_responder(
        &self,
        ticks: impl FnMut() -> u64,
        stalled: impl FnMut() -> bool,
    ) -> Result<SideOutcome, HandshakeError> {
        self.run_responder_observed(ticks, stalled, |_| {})
    }

    /// [`Mailbox::run_responder`], calling `observe` with every [`Reception`].
    pub fn run_responder_observed(
        &self,
        mut ticks: impl FnMut() -> u64,
        mut stalled: impl FnMut() -> bool,
        mut observe: impl FnMut(Reception),
    ) -> Result<SideOutcome, HandshakeError> {
        let mut outcome = SideOutcome { min_delta_ticks: None, received: 0 };
        let mut expected = 1;
        loop {
            match self.wait_for(expected, &mut stalled)? {
                Received::Stop => return Ok(outcome),
                Received::Message => {
                    self.record(expected, &mut outcome, &mut ticks, &mut observe);
                }
            }
            self.send(expected + 1, &mut ticks);
            expected += 2;
        }
    }

    /// Sends message `m`: counter reading first, then the stamp, then the turn.
    #[inline]
    fn send(&self, m: u64, ticks: &mut impl FnMut() -> u64) {
        let stamp = ticks();
        // Relaxed: published by the Release store of `turn` just below.
        self.line.stamp.store(stamp, Ordering::Relaxed);
        // Release: pairs with the Acquire load in the receiver's wait_for(); makes `stamp`, and
        // the counter reading before it, visible first.
        self.line.turn.store(m, Ordering::Release);
    }

    /// Reads this core's counter right after a reception and records the delta.
    #[inline]
    fn record(
        &self,
        message: u64,
        outcome: &mut SideOutcome,
        ticks: &mut impl FnMut() -> u64,
        observe: &mut impl FnMut(Reception),
    ) {
        let now = ticks();
        // Relaxed: ordered after the Acquire load of `turn` that saw this message, which
        // synchronises with the sender's Release store made after its stamp store.
        let stamp = self.line.stamp.load(Ordering::Relaxed);
        let delta = now.wrapping_sub(stamp) as i64;
        outcome.min_delta_ticks = Some(outcome.min_delta_ticks.map_or(delta, |m| m.min(delta)));
        outcome.received += 1;
        observe(Reception { message, stamp, reading: now });
    }

    /// Spins until `turn` is `m` or `STOP`, checking `abort` and `stalled` every
    /// [`STALL_CHECK_SPINS`] spins.
    #[inline]
    fn wait_for(
        &self,
        m: u64,
        stalled: &mut impl FnMut() -> bool,
    ) -> Result<Received, HandshakeError> {
        let mut spins: u32 = 0;
        loop {
            // Acquire: pairs with the Release store of `turn` in send() (or of STOP).
            let seen = self.line.turn.load(Ordering::Acquire);
            if seen == m {
                return Ok(Received::Message);
            }
            if seen == STOP {
                return Ok(Received::Stop);
            }
            if seen > m {
                return Err(HandshakeError::Protocol { expected: m, seen });
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(STALL_CHECK_SPINS) {
                // Relaxed: see abort().
                if self.line.abort.load(Ordering::Relaxed) {
                    return Err(HandshakeError::PeerAborted);
                }
                if stalled() {
                    self.abort();
                    return Err(HandshakeError::Stalled);
                }
            }
            spin_loop();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::AtomicU64 as StdAtomicU64;
    use std::sync::atomic::Ordering as StdOrdering;

    use super::*;

    /// A fake counter: one shared "true time" that advances on every reading, seen through a
    /// per-core offset.
    fn fake_ticks(time: &StdAtomicU64, offset: u64) -> impl FnMut() -> u64 + '_ {
        move || time.fetch_add(1, StdOrdering::SeqCst) + 1 + offset
    }

    #[test]
    fn deltas_bound_the_injected_offset_from_both_sides() {
        let time = StdAtomicU64::new(1_000_000);
        let mailbox = Mailbox::new();
        let (a_offset, b_offset) = (0u64, 500u64);
        let (init, resp) = std::thread::scope(|s| {
            let resp = s.spawn(|| mailbox.run_responder(fake_ticks(&time, b_offset), || false));
            let init = mailbox.run_initiator(200, fake_ticks(&time, a_offset), |_| true, || false);
            (init, resp.join().unwrap())
        });
        let (init, resp) = (init.unwrap(), resp.unwrap());
        assert_eq!(init.received, 200);
        assert_eq!(resp.received, 200);
        // a→b: b is 500 ahead, so δ_ab > 500; b→a: δ_ba > -500. max(δ_ab, δ_ba) >= 500.
        let ab = resp.min_delta_ticks.unwrap();
        let ba = init.min_delta_ticks.unwrap();
        assert!(ab > 500, "{ab}");
        assert!(ba > -500, "{ba}");
        assert!(ab.max(ba) >= 500);
    }

    #[test]
    fn keep_going_ends_the_session_and_stop_reaches_the_responder() {
        let time = StdAtomicU64::new(1);
        let mailbox = Mailbox::new();
        let (init, resp) = std::thread::scope(|s| {
            let resp = s.spawn(|| mailbox.run_responder(fake_ticks(&time, 0), || false));
            let init = mailbox.run_initiator(1_000, fake_ticks(&time, 0), |r| r < 3, || false);
            (init, resp.join().unwrap())
        });
        assert_eq!(init.unwrap().received, 3);
        assert_eq!(resp.unwrap().received, 3);
    }

    #[test]
    fn an_aborted_peer_releases_the_waiter() {
        let time = StdAtomicU64::new(1);
        let mailbox = Mailbox::new();
        mailbox.abort();
        let resp = mailbox.run_responder(fake_ticks(&time, 0), || false);
        assert_eq!(resp, Err(HandshakeError::PeerAborted));
        let mailbox = Mailbox::new();
        let init = mailbox.run_initiator(5, fake_ticks(&time, 0), |_| true, || true);
        assert_eq!(init, Err(HandshakeError::Stalled));
    }
}
