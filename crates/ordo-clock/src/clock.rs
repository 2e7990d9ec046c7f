//! The [`Clock`] trait: the one clock seam of Ordo.
//!
//! Every component that needs time takes a `Clock`; tests inject skew and drift through
//! `TestClock` instead of mocking anything inside the engine (STYLE: one clock seam).
//!
//! # Contract
//! An implementation must guarantee, for every call of [`Clock::now`] returning `[lo, hi]`, that
//! the true global time lay inside `[lo, hi]` at some instant during the call. From that alone the
//! provided [`Clock::get_ts`] (FaRMv2 `GET_TS`, ORDO `new_time`) gets its two lemmas
//! (FaRMv2 Lemma 1): the returned `U` was the global time at some instant during the call, and it
//! is in the past when the call returns. Consequently `get_ts` values strictly increase along
//! happens-before: if one thread's `get_ts` returns `t` and publishes it, any `get_ts` that starts
//! after observing the publication returns a value `> t`.

use crate::time::{Interval, Timestamp};

/// Which kind of clock is in use; printed by every benchmark and by `ordo calibrate`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClockKind {
    /// A shared atomic counter (the contended baseline of TL2/OCC/Hekaton).
    Logical,
    /// The invariant hardware counter with the calibrated ORDO boundary.
    Ordo,
    /// `CLOCK_MONOTONIC`, the fallback where the counter is not invariant.
    System,
    /// A test clock with injected per-thread skew and drift.
    Test,
    /// A cluster clock synchronised to a clock master (FaRMv2 Fig. 2).
    Synced,
}

impl ClockKind {
    /// The lower-case name used on command lines and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            ClockKind::Logical => "logical",
            ClockKind::Ordo => "ordo",
            ClockKind::System => "system",
            ClockKind::Test => "test",
            ClockKind::Synced => "synced",
        }
    }
}

/// What [`Clock::get_ts_timed`] returns: the timestamp and the bounds of the wait for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedTs {
    /// The timestamp, as [`Clock::get_ts`] gives it.
    pub ts: Timestamp,
    /// `now().lo` of the first reading taken for it.
    pub first_lo: Timestamp,
    /// `now().lo` of the last reading taken for it (`ts` is below it when the clock waits).
    pub last_lo: Timestamp,
}

/// A source of global time with explicit uncertainty. See the module docs for the contract.
pub trait Clock: Send + Sync + 'static {
    /// The current global time as an interval; never waits.
    fn now(&self) -> Interval;

    /// A timestamp `U` that was the global time at some instant of this call and is in the past
    /// when it returns: `[L, U] = now()`, then wait until `now().lo > U` (ORDO `new_time`).
    ///
    /// Values strictly increase along happens-before across threads. They are not unique.
    #[inline]
    fn get_ts(&self) -> Timestamp {
        let upper = self.now().hi();
        while self.now().lo() <= upper {
            std::hint::spin_loop();
        }
        upper
    }

    /// [`Clock::get_ts`], also returning the `lo` of a reading before it and of one after it,
    /// so that a caller can time the wait (the commit's `write_wait_ns`). This default takes
    /// those two readings around `get_ts`; clocks whose `get_ts` is the default wait override it
    /// with [`get_ts_timed_by_waiting`], which times the wait by its own readings (one reading
    /// of the ORDO clock is ~30 ns, a tenth of a short transaction's commit).
    #[inline]
    fn get_ts_timed(&self) -> TimedTs {
        let first_lo = self.now().lo();
        let ts = self.get_ts();
        TimedTs { ts, first_lo, last_lo: self.now().lo() }
    }

    /// A timestamp usable as a strict read timestamp: at least every timestamp returned by a
    /// `get_ts` that happens-before this call, and at most the global time at some instant of
    /// this call. Unlike [`Clock::get_ts`] it need not be larger than earlier values, which lets
    /// the logical clock read its counter without incrementing it (as TL2 does).
    #[inline]
    fn read_ts(&self) -> Timestamp {
        self.get_ts()
    }

    /// The width of the uncertainty window this clock claims, in nanoseconds (ORDO_BOUNDARY).
    fn boundary_nanos(&self) -> u64;

    /// Which kind of clock this is.
    fn kind(&self) -> ClockKind;
}

/// The default [`Clock::get_ts`] wait, timed by its own first and last readings: for clocks
/// whose `get_ts` is that default, as their [`Clock::get_ts_timed`].
#[inline]
pub fn get_ts_timed_by_waiting<C: Clock + ?Sized>(clock: &C) -> TimedTs {
    let first = clock.now();
    let upper = first.hi();
    loop {
        let lo = clock.now().lo();
        if lo > upper {
            return TimedTs { ts: upper, first_lo: first.lo(), last_lo: lo };
        }
        std::hint::spin_loop();
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    #[inline]
    fn now(&self) -> Interval {
        (**self).now()
    }
    #[inline]
    fn get_ts(&self) -> Timestamp {
        (**self).get_ts()
    }
    #[inline]
    fn get_ts_timed(&self) -> TimedTs {
        (**self).get_ts_timed()
    }
    #[inline]
    fn read_ts(&self) -> Timestamp {
        (**self).read_ts()
    }
    fn boundary_nanos(&self) -> u64 {
        (**self).boundary_nanos()
    }
    fn kind(&self) -> ClockKind {
        (**self).kind()
    }
}
