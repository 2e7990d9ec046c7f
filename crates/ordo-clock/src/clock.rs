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
