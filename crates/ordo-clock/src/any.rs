//! Picking a clock at run time: [`ClockChoice`] (from `--clock logical|ordo|system` or a config
//! file) and [`AnyClock`], one type that dispatches [`Clock`] by `match`.
//!
//! # Mechanism
//! Engines and benchmarks are generic over `C: Clock`, but a command line picks the clock at run
//! time. [`AnyClock`] is a closed enum over this crate's clocks; the `match` in each method is a
//! predictable branch, cheaper than a virtual call and still inlinable. [`AnyClock::open`] builds
//! the chosen clock: the ORDO clock is calibrated (or loaded from the cache), and where the
//! counter is not invariant it falls back to the system clock and says so (DESIGN §1: "say which
//! clock is in use"). [`AnyClock::describe`] gives the facts every report prints.

use std::fmt;
use std::str::FromStr;

use crate::cache::{CalibrationCache, CalibrationOutcome};
use crate::calibrate::{CalibrateError, CalibrateOptions};
use crate::clock::{Clock, ClockKind, TimedTs};
use crate::counter::{CounterKind, FrequencySource, Invariance};
use crate::logical::LogicalClock;
use crate::ordo::{OrdoClock, OrdoDetection};
use crate::system::SystemClock;
use crate::test_clock::TestClock;
use crate::time::{Interval, Timestamp};

/// A clock named on a command line or in a configuration.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClockChoice {
    /// [`LogicalClock`].
    Logical,
    /// [`OrdoClock`] (falls back to the system clock where the counter is not invariant).
    Ordo,
    /// [`SystemClock`].
    System,
}

impl ClockChoice {
    /// Every choice, in the order benchmarks run them (the paper's A, O, then the fallback).
    pub const ALL: [ClockChoice; 3] =
        [ClockChoice::Logical, ClockChoice::Ordo, ClockChoice::System];

    /// The name accepted by [`FromStr`].
    pub fn name(self) -> &'static str {
        match self {
            ClockChoice::Logical => "logical",
            ClockChoice::Ordo => "ordo",
            ClockChoice::System => "system",
        }
    }
}

impl fmt::Display for ClockChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown clock name.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("unknown clock `{name}` (expected one of: logical, ordo, system)")]
pub struct UnknownClock {
    /// The name given.
    pub name: String,
}

impl FromStr for ClockChoice {
    type Err = UnknownClock;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim();
        ClockChoice::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| UnknownClock { name: s.to_owned() })
    }
}

/// Any clock of this crate, chosen at run time.
#[derive(Debug)]
pub enum AnyClock {
    /// The shared atomic counter.
    Logical(LogicalClock),
    /// The invariant counter with the ORDO boundary.
    Ordo(OrdoClock),
    /// `CLOCK_MONOTONIC`.
    System(SystemClock),
    /// A test clock with injected skew.
    Test(TestClock),
}

/// A clock built by [`AnyClock::open`], with how it came about.
#[derive(Debug)]
pub struct OpenedClock {
    /// The clock.
    pub clock: AnyClock,
    /// The calibration behind an ORDO clock (with its cache warnings).
    pub calibration: Option<CalibrationOutcome>,
    /// Why the system clock replaced the requested ORDO clock, if it did.
    pub fallback_reason: Option<String>,
}

/// The facts about a clock that reports print.
#[derive(Clone, PartialEq, Eq, Debug, serde::Serialize)]
pub struct ClockDescription {
    /// Which clock.
    pub kind: ClockKind,
    /// The counter instruction sequence (ORDO clock only).
    pub counter: Option<CounterKind>,
    /// The invariance evidence (ORDO clock only).
    pub invariance: Option<Invariance>,
    /// The counter frequency (ORDO clock only).
    pub frequency_hz: Option<u64>,
    /// Where the frequency came from (ORDO clock only).
    pub frequency_source: Option<FrequencySource>,
    /// The uncertainty width `now()` claims, in nanoseconds.
    pub boundary_nanos: u64,
    /// The same in counter ticks (ORDO clock only).
    pub boundary_ticks: Option<u64>,
}

impl fmt::Display for ClockDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} clock, boundary {} ns", self.kind.name(), self.boundary_nanos)?;
        if let Some(ticks) = self.boundary_ticks {
            write!(f, " ({ticks} ticks)")?;
        }
        if let Some(counter) = self.counter {
            write!(f, "; counter {}", counter.describe())?;
        }
        if let Some(invariance) = self.invariance {
            write!(f, ", {}", invariance.describe())?;
        }
        if let (Some(hz), Some(source)) = (self.frequency_hz, self.frequency_source) {
            write!(f, ", {:.3} MHz ({})", hz as f64 / 1e6, source.describe())?;
        }
        Ok(())
    }
}

impl AnyClock {
    /// Builds the chosen clock. For [`ClockChoice::Ordo`] this calibrates (or loads `cache`);
    /// where the counter is not invariant the result is the system clock, with
    /// [`OpenedClock::fallback_reason`] saying why.
    ///
    /// # Errors
    /// Calibration errors (bad options, pinning, handshake failures).
    pub fn open(
        choice: ClockChoice,
        options: &CalibrateOptions,
        cache: Option<&CalibrationCache>,
    ) -> Result<OpenedClock, CalibrateError> {
        let simple = |clock| OpenedClock { clock, calibration: None, fallback_reason: None };
        Ok(match choice {
            ClockChoice::Logical => simple(AnyClock::Logical(LogicalClock::new())),
            ClockChoice::System => simple(AnyClock::System(SystemClock::new())),
            ClockChoice::Ordo => match OrdoClock::detect(options, cache)? {
                OrdoDetection::Ordo { clock, outcome } => OpenedClock {
                    clock: AnyClock::Ordo(clock),
                    calibration: Some(*outcome),
                    fallback_reason: None,
                },
                OrdoDetection::UseSystemClock { reason } => OpenedClock {
                    clock: AnyClock::System(SystemClock::new()),
                    calibration: None,
                    fallback_reason: Some(reason),
                },
            },
        })
    }

    /// Kind, counter, frequency source and boundary, for reports.
    pub fn describe(&self) -> ClockDescription {
        let plain = |kind, boundary_nanos| ClockDescription {
            kind,
            counter: None,
            invariance: None,
            frequency_hz: None,
            frequency_source: None,
            boundary_nanos,
            boundary_ticks: None,
        };
        match self {
            AnyClock::Ordo(clock) => {
                let info = clock.counter().info();
                ClockDescription {
                    kind: ClockKind::Ordo,
                    counter: Some(info.kind),
                    invariance: Some(info.invariance),
                    frequency_hz: Some(info.frequency_hz),
                    frequency_source: Some(info.frequency_source),
                    boundary_nanos: clock.boundary_nanos(),
                    boundary_ticks: Some(clock.boundary_ticks()),
                }
            }
            other => plain(other.kind(), other.boundary_nanos()),
        }
    }
}

impl Clock for AnyClock {
    #[inline]
    fn now(&self) -> Interval {
        match self {
            AnyClock::Logical(c) => c.now(),
            AnyClock::Ordo(c) => c.now(),
            AnyClock::System(c) => c.now(),
            AnyClock::Test(c) => c.now(),
        }
    }

    #[inline]
    fn get_ts(&self) -> Timestamp {
        match self {
            AnyClock::Logical(c) => c.get_ts(),
            AnyClock::Ordo(c) => c.get_ts(),
            AnyClock::System(c) => c.get_ts(),
            AnyClock::Test(c) => c.get_ts(),
        }
    }

    #[inline]
    fn get_ts_timed(&self) -> TimedTs {
        match self {
            AnyClock::Logical(c) => c.get_ts_timed(),
            AnyClock::Ordo(c) => c.get_ts_timed(),
            AnyClock::System(c) => c.get_ts_timed(),
            AnyClock::Test(c) => c.get_ts_timed(),
        }
    }

    #[inline]
    fn read_ts(&self) -> Timestamp {
        match self {
            AnyClock::Logical(c) => c.read_ts(),
            AnyClock::Ordo(c) => c.read_ts(),
            AnyClock::System(c) => c.read_ts(),
            AnyClock::Test(c) => c.read_ts(),
        }
    }

    fn boundary_nanos(&self) -> u64 {
        match self {
            AnyClock::Logical(c) => c.boundary_nanos(),
            AnyClock::Ordo(c) => c.boundary_nanos(),
            AnyClock::System(c) => c.boundary_nanos(),
            AnyClock::Test(c) => c.boundary_nanos(),
        }
    }

    fn kind(&self) -> ClockKind {
        match self {
            AnyClock::Logical(c) => c.kind(),
            AnyClock::Ordo(c) => c.kind(),
            AnyClock::System(c) => c.kind(),
            AnyClock::Test(c) => c.kind(),
        }
    }
}

impl From<LogicalClock> for AnyClock {
    fn from(c: LogicalClock) -> Self {
        AnyClock::Logical(c)
    }
}

impl From<OrdoClock> for AnyClock {
    fn from(c: OrdoClock) -> Self {
        AnyClock::Ordo(c)
    }
}

impl From<SystemClock> for AnyClock {
    fn from(c: SystemClock) -> Self {
        AnyClock::System(c)
    }
}

impl From<TestClock> for AnyClock {
    fn from(c: TestClock) -> Self {
        AnyClock::Test(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_and_unknown_names_say_what_is_expected() {
        assert_eq!("ordo".parse::<ClockChoice>().unwrap(), ClockChoice::Ordo);
        assert_eq!(" Logical ".parse::<ClockChoice>().unwrap(), ClockChoice::Logical);
        assert_eq!("system".parse::<ClockChoice>().unwrap(), ClockChoice::System);
        let err = "rdtsc".parse::<ClockChoice>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown clock `rdtsc` (expected one of: logical, ordo, system)"
        );
        for c in ClockChoice::ALL {
            assert_eq!(c.to_string().parse::<ClockChoice>().unwrap(), c);
        }
    }

    #[test]
    fn any_clock_dispatches_and_describes() {
        let opened =
            AnyClock::open(ClockChoice::Logical, &CalibrateOptions::default(), None).unwrap();
        let c = opened.clock;
        assert_eq!(c.kind(), ClockKind::Logical);
        assert_eq!(c.get_ts(), Timestamp::from_nanos(1));
        assert_eq!(c.describe().boundary_nanos, 0);
        let t = AnyClock::from(TestClock::new(42));
        assert_eq!(t.boundary_nanos(), 42);
        assert_eq!(t.describe().to_string(), "test clock, boundary 42 ns");
    }
}
