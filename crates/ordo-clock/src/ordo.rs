//! The ORDO clock: the invariant counter plus the calibrated boundary (ORDO §3, Fig. 3;
//! DESIGN §1).
//!
//! # Mechanism
//! Define global time as the clock of the most advanced core. If every pair of cores differs by
//! at most `B` (the calibrated `ORDO_BOUNDARY`), a reading `c` on any core lies at most `B` behind
//! global time, so `now() = [c, c + B]` contains the global time at the instant of the reading —
//! exactly the [`Clock`] contract. The rest follows from the trait:
//!
//! * `get_ts` is the trait default, which is ORDO's `new_time`: take `U = c + B`, spin until a
//!   fresh reading has `lo > U`. At that point *every* core's counter has passed `U`, so any
//!   reading taken after the return — on any core, by any thread that learnt of `U` — is `> U`.
//! * `cmp_time` is [`crate::Interval::cmp_time`]: two readings are ordered only if their
//!   intervals do not overlap, i.e. their counters differ by more than `B`.
//!
//! A reading is self-contained (counter value, fixed `B`), so thread migration between the
//! reading and its use is harmless (ORDO §7).
//!
//! # Invariants
//! * The counter is invariant ([`crate::Invariance::is_invariant`]); a non-invariant one is
//!   refused with [`OrdoError::NotInvariant`] and callers use [`crate::SystemClock`].
//! * `boundary_nanos` is at least `boundary_ticks` converted with rounding up (see
//!   [`mod@crate::calibrate`] for why it errs large).

use crate::cache::{CalibrationCache, CalibrationOutcome, load_or_calibrate};
use crate::calibrate::{CalibrateError, CalibrateOptions, Calibration, ROUNDING_SLACK_NANOS};
use crate::clock::{Clock, ClockKind, TimedTs, get_ts_timed_by_waiting};
use crate::counter::{Counter, CounterError, Invariance};
use crate::time::{Interval, Timestamp};

/// Why an ORDO clock cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum OrdoError {
    /// The counter is not invariant: use the system clock.
    #[error("the hardware counter is not invariant; use the system clock")]
    NotInvariant,
    /// The counter could not be read or described.
    #[error(transparent)]
    Counter(#[from] CounterError),
    /// The calibration fails its own consistency checks.
    #[error("inconsistent calibration: {0}")]
    BadCalibration(String),
}

/// The invariant hardware counter with the ORDO boundary.
#[derive(Clone, Copy, Debug)]
pub struct OrdoClock {
    counter: Counter,
    boundary_ticks: u64,
    boundary_nanos: u64,
}

/// What [`OrdoClock::detect`] found.
#[derive(Debug)]
pub enum OrdoDetection {
    /// The counter is invariant and calibrated.
    Ordo {
        /// The clock.
        clock: OrdoClock,
        /// Its calibration, where it came from, and cache warnings (boxed: it is large).
        outcome: Box<CalibrationOutcome>,
    },
    /// The ORDO clock cannot be used here; use [`crate::SystemClock`].
    UseSystemClock {
        /// Why, in words.
        reason: String,
    },
}

impl OrdoClock {
    /// The clock a calibration describes. The counter kind is re-detected and must match.
    pub fn from_calibration(calibration: &Calibration) -> Result<Self, OrdoError> {
        calibration.validate().map_err(OrdoError::BadCalibration)?;
        let counter = Counter::from_info(&calibration.counter)?;
        Self::new(counter, calibration.boundary_ticks, calibration.boundary_nanos)
    }

    /// A clock with an explicit boundary in ticks (converted up, plus the rounding slack).
    pub fn with_boundary_ticks(counter: Counter, boundary_ticks: u64) -> Result<Self, OrdoError> {
        let nanos = counter
            .conversion()
            .ticks_to_nanos_ceil(boundary_ticks)
            .saturating_add(ROUNDING_SLACK_NANOS);
        Self::new(counter, boundary_ticks, nanos)
    }

    /// A clock with an explicit boundary in nanoseconds (for experiments such as ORDO §6.7, or a
    /// boundary known from elsewhere).
    pub fn with_boundary_nanos(counter: Counter, boundary_nanos: u64) -> Result<Self, OrdoError> {
        let ticks = counter.conversion().nanos_to_ticks_ceil(boundary_nanos);
        Self::new(counter, ticks, boundary_nanos)
    }

    fn new(counter: Counter, boundary_ticks: u64, boundary_nanos: u64) -> Result<Self, OrdoError> {
        if !counter.info().invariance.is_invariant() {
            return Err(OrdoError::NotInvariant);
        }
        Ok(OrdoClock { counter, boundary_ticks, boundary_nanos })
    }

    /// The ORDO clock of this machine if its counter is invariant: calibrated, or loaded from
    /// `cache` (see [`crate::cache::load_or_calibrate`]). Otherwise tells the caller to use the
    /// system clock, and why.
    ///
    /// # Errors
    /// Calibration errors (bad options, pinning, handshake failures).
    pub fn detect(
        options: &CalibrateOptions,
        cache: Option<&CalibrationCache>,
    ) -> Result<OrdoDetection, CalibrateError> {
        let probe = match Counter::probe() {
            Ok(probe) => probe,
            Err(e) => {
                return Ok(OrdoDetection::UseSystemClock { reason: e.to_string() });
            }
        };
        if probe.invariance == Invariance::NotInvariant {
            return Ok(OrdoDetection::UseSystemClock {
                reason: "the hardware counter is not invariant (no CPUID invariant-TSC bit, \
                         no constant_tsc + nonstop_tsc)"
                    .to_owned(),
            });
        }
        let outcome = load_or_calibrate(options, cache)?;
        match OrdoClock::from_calibration(&outcome.calibration) {
            Ok(clock) => Ok(OrdoDetection::Ordo { clock, outcome: Box::new(outcome) }),
            Err(e) => Ok(OrdoDetection::UseSystemClock { reason: e.to_string() }),
        }
    }

    /// The counter this clock reads.
    pub fn counter(&self) -> &Counter {
        &self.counter
    }

    /// The boundary in counter ticks.
    pub fn boundary_ticks(&self) -> u64 {
        self.boundary_ticks
    }
}

impl Clock for OrdoClock {
    #[inline]
    fn now(&self) -> Interval {
        Interval::with_width(Timestamp::from_nanos(self.counter.read_nanos()), self.boundary_nanos)
    }

    /// `get_ts` is the default wait: time it by its own readings.
    #[inline]
    fn get_ts_timed(&self) -> TimedTs {
        get_ts_timed_by_waiting(self)
    }

    fn boundary_nanos(&self) -> u64 {
        self.boundary_nanos
    }

    fn kind(&self) -> ClockKind {
        ClockKind::Ordo
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(boundary_nanos: u64) -> Option<OrdoClock> {
        let counter = Counter::with_frequency(2_000_000_000).ok()?;
        OrdoClock::with_boundary_nanos(counter, boundary_nanos).ok()
    }

    #[test]
    fn intervals_have_the_boundary_as_width_and_get_ts_waits_past_it() {
        let Some(c) = clock(500) else { return };
        assert_eq!(c.now().width_nanos(), 500);
        assert_eq!(c.boundary_ticks(), 1_000);
        let t = c.get_ts();
        assert!(c.now().lo() > t);
        assert!(c.get_ts() > t);
        assert_eq!(c.kind(), ClockKind::Ordo);
    }

    #[test]
    fn boundary_ticks_convert_up() {
        let Ok(counter) = Counter::with_frequency(3_000_000_000) else {
            return;
        };
        let Ok(c) = OrdoClock::with_boundary_ticks(counter, 301) else {
            return;
        };
        assert_eq!(c.boundary_nanos(), 101 + ROUNDING_SLACK_NANOS);
    }
}
