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
//! * `OrdoClock` — the invariant counter with the calibrated boundary;
//! * `SystemClock` — `CLOCK_MONOTONIC`, used when the counter is not invariant;
//! * `TestClock` — per-thread skew and drift injected by tests.
//!
//! `get_ts` is FaRMv2's `GET_TS` and ORDO's `new_time`; `Interval::cmp_time` is ORDO's
//! `cmp_time` with its *uncertain* answer.

mod clock;
mod logical;
mod time;

pub use clock::{Clock, ClockKind};
pub use logical::LogicalClock;
pub use time::{Interval, TimeOrder, Timestamp};
