//! What the RLU test modules share: the clocks every concurrent test runs on, and the gates
//! with which the scripted tests pause a thread inside an RLU step.
#![allow(dead_code, unreachable_pub)] // shared by the modules of one test binary

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use ordo_clock::{TestClock, ThreadSkew};

/// A clock whose threads lag the reference by up to its whole boundary (0, -B/2, -B, ...).
pub fn skewed_clock() -> TestClock {
    TestClock::builder()
        .claimed_boundary_nanos(2_000)
        .skew_by_index(|i| ThreadSkew::offset(-((i as i64 % 3) * 1_000)))
        .build()
}

/// The ORDO clock with a generous 20 µs boundary (far above any invariant counter's skew), or
/// `None` where the counter is not invariant.
pub fn ordo_clock() -> Option<ordo_clock::OrdoClock> {
    let counter = ordo_clock::Counter::detect().ok()?;
    ordo_clock::OrdoClock::with_boundary_nanos(counter, 20_000).ok()
}

/// Three tests, named `$logical`, `$skewed` and `$ordo`, each calling `$f(clock, $args…)`: on
/// the logical clock, on [`skewed_clock`] and on [`ordo_clock`] (where the counter is
/// invariant; elsewhere the ORDO test passes without running).
macro_rules! on_every_clock {
    ($logical:ident, $skewed:ident, $ordo:ident => $f:ident($($arg:expr),* $(,)?)) => {
        #[test]
        fn $logical() {
            $f(ordo_clock::LogicalClock::new(), $($arg),*);
        }

        #[test]
        fn $skewed() {
            $f($crate::common::skewed_clock(), $($arg),*);
        }

        #[test]
        fn $ordo() {
            if let Some(c) = $crate::common::ordo_clock() {
                $f(c, $($arg),*);
            }
        }
    };
}
pub(crate) use on_every_clock;

/// A gate at rest.
pub const IDLE: u8 = 0;
/// A gate whose thread has stopped at it.
pub const PAUSED: u8 = 1;
/// A gate whose thread may go on.
pub const GO: u8 = 2;

/// Spins until `cond` holds; fails the test after 30 s (a scripted interleaving that stalled).
pub fn wait_until(cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "scripted interleaving stalled");
        std::thread::yield_now();
    }
}

/// Stops the calling thread at `gate` ([`PAUSED`]) until the test sets it to [`GO`], then
/// leaves it [`IDLE`].
pub fn pause(gate: &AtomicU8) {
    gate.store(PAUSED, Ordering::SeqCst);
    wait_until(|| gate.load(Ordering::SeqCst) == GO);
    gate.store(IDLE, Ordering::SeqCst);
}
