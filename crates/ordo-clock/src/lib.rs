//! # ordo-clock — time for Ordo
//!
//! ORDO (EuroSys'18) observes that the invariant hardware counters of modern CPUs tick at a
//! constant rate on every core but are not exactly synchronised: a reading on one core may be
//! behind the most advanced core by up to a machine-specific `ORDO_BOUNDARY`. Exposing that
//! boundary turns the counters into a global clock: a reading `c` means "global time is in
//! `[c, c + B]`". This crate provides that notion of time as an [`Interval`], the [`Clock`] trait
//! every other crate uses, and its implementations:
//!
//! * [`LogicalClock`] — the contended atomic counter baseline;
//! * [`OrdoClock`] — the invariant counter ([`counter`]) with the calibrated boundary
//!   ([`mod@calibrate`], cached by [`cache`]);
//! * [`SystemClock`] — `CLOCK_MONOTONIC`, used when the counter is not invariant;
//! * [`TestClock`] — per-thread skew and drift injected by tests;
//! * [`SyncedClock`] — FaRMv2's cluster clock: a local clock synchronised to a clock master
//!   ([`mod@synced`]), with [`SkewedClock`] as the per-machine local clock of simulations;
//! * [`AnyClock`] — any of them, chosen at run time from a [`ClockChoice`].
//!
//! `get_ts` is FaRMv2's `GET_TS` and ORDO's `new_time`; `Interval::cmp_time` is ORDO's
//! `cmp_time` with its *uncertain* answer.
//!
//! ```
//! use ordo_clock::{Clock, LogicalClock, TestClock};
//!
//! let logical = LogicalClock::new();
//! assert!(logical.get_ts() < logical.get_ts());
//!
//! let test = TestClock::new(1_000); // claims a 1 µs boundary
//! let reading = test.now();
//! assert_eq!(reading.width_nanos(), 1_000);
//! ```

mod any;
pub mod cache;
pub mod calibrate;
mod clock;
pub mod cores;
pub mod counter;
mod drift;
pub mod handshake;
mod logical;
mod ordo;
mod seqlock;
mod skewed;
mod sync;
pub mod synced;
mod system;
mod test_clock;
mod time;

pub use any::{AnyClock, ClockChoice, ClockDescription, OpenedClock, UnknownClock};
pub use cache::{
    CacheWarning, CalibrationCache, CalibrationOutcome, CalibrationSource, load_or_calibrate,
};
pub use calibrate::{CalibrateError, CalibrateOptions, Calibration, PairOffset, calibrate};
pub use clock::{Clock, ClockKind, TimedTs, get_ts_timed_by_waiting};
pub use counter::{Counter, CounterError, CounterInfo, CounterKind, FrequencySource, Invariance};
pub use drift::DriftEstimate;
pub use logical::LogicalClock;
pub use ordo::{OrdoClock, OrdoDetection, OrdoError};
pub use skewed::{SkewedClock, TimeSource};
pub use synced::{
    ClockDisabled, DRIFT_BOUND_PPM_MAX, SyncError, SyncOptions, SyncOutcome, SyncStart, SyncStats,
    SyncedClock,
};
pub use system::SystemClock;
pub use test_clock::{
    DEFAULT_START_NANOS, DRIFT_PPM_MIN, Reference, TestClock, TestClockBuilder, ThreadSkew,
};
pub use time::{Interval, TimeOrder, Timestamp};
