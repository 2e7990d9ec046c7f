//! The system clock: `CLOCK_MONOTONIC`, the fallback where the counter is not invariant.
//!
//! # Mechanism
//! The kernel keeps `CLOCK_MONOTONIC` consistent across cores (it refuses an unstable TSC as a
//! clock source and falls back to HPET or ACPI PM), so a reading on any core is the global time
//! up to the clock's own resolution: `now()` is the zero-width interval `[t, t]`. `get_ts` is the
//! trait default, which here means "wait until the reading strictly advances" — one
//! nanosecond-resolution tick on Linux, tens of nanoseconds through the vDSO.
//!
//! DESIGN §1: the engine says which clock it uses; this one is chosen when
//! [`crate::Counter::probe`] reports a counter that is not invariant, or by `--clock system`.
//!
//! # Invariants
//! * `now().lo() == now().hi()`: the width is 0 (`boundary_nanos() == 0`).
//! * Readings never decrease along happens-before, on any core (the kernel's guarantee for
//!   `CLOCK_MONOTONIC`).
//!
//! This module also holds the one `clock_gettime` call of the crate, used by the frequency
//! measurement of [`crate::counter`] with `CLOCK_MONOTONIC_RAW`.

use crate::clock::{Clock, ClockKind, TimedTs, get_ts_timed_by_waiting};
use crate::time::{Interval, Timestamp};

/// `CLOCK_MONOTONIC`.
pub(crate) const CLOCK_MONOTONIC_ID: libc::clockid_t = libc::CLOCK_MONOTONIC;
/// `CLOCK_MONOTONIC_RAW`: not slewed by NTP, the reference for counter frequency measurement.
pub(crate) const CLOCK_MONOTONIC_RAW_ID: libc::clockid_t = libc::CLOCK_MONOTONIC_RAW;

/// Reads `clock` in nanoseconds.
///
/// `clock_gettime` fails only for an invalid clock id; the two ids above are valid on every
/// Linux, so a failure is a bug caught by the debug assertion (release builds return the zeroed
/// reading).
#[inline]
pub(crate) fn clock_nanos(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a live, writable timespec owned by this frame; clock_gettime writes exactly
    // one timespec through the pointer and keeps no reference to it.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    debug_assert_eq!(rc, 0, "clock_gettime({clock}) failed");
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// `CLOCK_MONOTONIC` as a [`Clock`] of width 0.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl SystemClock {
    /// The system clock.
    pub fn new() -> Self {
        SystemClock
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Interval {
        Interval::exact(Timestamp::from_nanos(clock_nanos(CLOCK_MONOTONIC_ID)))
    }

    /// `get_ts` is the default wait: time it by its own readings.
    #[inline]
    fn get_ts_timed(&self) -> TimedTs {
        get_ts_timed_by_waiting(self)
    }

    fn boundary_nanos(&self) -> u64 {
        0
    }

    fn kind(&self) -> ClockKind {
        ClockKind::System
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_are_exact_and_get_ts_advances() {
        let c = SystemClock::new();
        let a = c.now();
        assert_eq!(a.width_nanos(), 0);
        let t1 = c.get_ts();
        let t2 = c.get_ts();
        assert!(t2 > t1);
        assert!(c.now().lo() > t2);
        assert_eq!(c.kind(), ClockKind::System);
    }
}
