//! Timestamps and intervals: the one notion of time every part of Ordo speaks.
//!
//! A [`Timestamp`] is a point on the global timeline in nanoseconds. Nobody can read the global
//! timeline exactly; a clock reading is an [`Interval`] `[lo, hi]` that is guaranteed to contain
//! the true global time at some instant during the read (DESIGN §1, FaRMv2 §3.1). Two readings are
//! ordered only when their intervals do not overlap; overlapping intervals compare as
//! [`TimeOrder::Uncertain`] — ORDO's `cmp_time` returning 0.
//!
//! # Invariants
//! * `Interval::lo <= Interval::hi` (checked in [`Interval::new`]).
//! * Timestamps are *not* identifiers: two threads may draw the same value (DESIGN §4 point 7).

use std::fmt;

/// A point on the global timeline, in nanoseconds since an arbitrary per-clock epoch.
///
/// Deliberately not a bare `u64`: arithmetic is limited to what the protocols need, and the
/// raw value is reached only through [`Timestamp::as_nanos`].
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The beginning of time: older than every timestamp any clock returns.
    pub const ZERO: Timestamp = Timestamp(0);
    /// The largest representable timestamp.
    pub const MAX: Timestamp = Timestamp(u64::MAX);

    /// A timestamp `ns` nanoseconds after the epoch.
    #[inline]
    pub const fn from_nanos(ns: u64) -> Self {
        Timestamp(ns)
    }

    /// Nanoseconds since the epoch.
    #[inline]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// This timestamp moved `ns` nanoseconds later, saturating at [`Timestamp::MAX`].
    #[inline]
    pub const fn saturating_add_nanos(self, ns: u64) -> Self {
        Timestamp(self.0.saturating_add(ns))
    }

    /// This timestamp moved `ns` nanoseconds earlier, saturating at [`Timestamp::ZERO`].
    #[inline]
    pub const fn saturating_sub_nanos(self, ns: u64) -> Self {
        Timestamp(self.0.saturating_sub(ns))
    }

    /// Nanoseconds from `earlier` to `self`, or 0 when `earlier` is not earlier.
    #[inline]
    pub const fn nanos_since(self, earlier: Timestamp) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// The next representable timestamp.
    #[inline]
    pub const fn next(self) -> Self {
        Timestamp(self.0.saturating_add(1))
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ns", self.0)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A clock reading: the true global time lay inside `[lo, hi]` at some instant of the read.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, serde::Serialize, serde::Deserialize)]
pub struct Interval {
    lo: Timestamp,
    hi: Timestamp,
}

/// The answer of a three-way comparison under uncertainty (ORDO `cmp_time`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum TimeOrder {
    /// The left reading certainly happened before the right one.
    Before,
    /// The readings overlap: no order can be claimed.
    Uncertain,
    /// The left reading certainly happened after the right one.
    After,
}

impl Interval {
    /// The interval `[lo, hi]`.
    ///
    /// # Panics
    /// In debug builds, when `lo > hi`; release builds swap nothing and trust the caller, since
    /// every clock in this crate constructs intervals from `lo` plus a width.
    #[inline]
    pub fn new(lo: Timestamp, hi: Timestamp) -> Self {
        debug_assert!(lo <= hi, "interval lower bound {lo:?} above upper bound {hi:?}");
        Interval { lo, hi }
    }

    /// The interval `[lo, lo + width_ns]`.
    #[inline]
    pub const fn with_width(lo: Timestamp, width_ns: u64) -> Self {
        Interval { lo, hi: lo.saturating_add_nanos(width_ns) }
    }

    /// A zero-width interval: an exact reading (logical clock, or a clock without uncertainty).
    #[inline]
    pub const fn exact(ts: Timestamp) -> Self {
        Interval { lo: ts, hi: ts }
    }

    /// The earliest the true time can have been.
    #[inline]
    pub const fn lo(self) -> Timestamp {
        self.lo
    }

    /// The latest the true time can have been.
    #[inline]
    pub const fn hi(self) -> Timestamp {
        self.hi
    }

    /// `hi - lo` in nanoseconds: the uncertainty of the reading.
    #[inline]
    pub const fn width_nanos(self) -> u64 {
        self.hi.0 - self.lo.0
    }

    /// Whether `ts` lies inside the interval (bounds included).
    #[inline]
    pub fn contains(self, ts: Timestamp) -> bool {
        self.lo <= ts && ts <= self.hi
    }

    /// ORDO `cmp_time` on readings: `Before` when `self` ends before `other` starts, `After` when
    /// it starts after `other` ends, `Uncertain` when they overlap.
    #[inline]
    pub fn cmp_time(self, other: Interval) -> TimeOrder {
        if self.hi < other.lo {
            TimeOrder::Before
        } else if self.lo > other.hi {
            TimeOrder::After
        } else {
            TimeOrder::Uncertain
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(lo: u64, hi: u64) -> Interval {
        Interval::new(Timestamp::from_nanos(lo), Timestamp::from_nanos(hi))
    }

    #[test]
    fn cmp_is_uncertain_exactly_on_overlap() {
        let b = 10;
        for t1 in 0..40u64 {
            for t2 in 0..40u64 {
                let a = Interval::with_width(Timestamp::from_nanos(t1), b);
                let c = Interval::with_width(Timestamp::from_nanos(t2), b);
                let expected = if t1 + b < t2 {
                    TimeOrder::Before
                } else if t2 + b < t1 {
                    TimeOrder::After
                } else {
                    TimeOrder::Uncertain
                };
                assert_eq!(a.cmp_time(c), expected, "t1={t1} t2={t2}");
            }
        }
    }

    #[test]
    fn interval_accessors() {
        let i = iv(5, 9);
        assert_eq!(i.width_nanos(), 4);
        assert!(i.contains(Timestamp::from_nanos(5)));
        assert!(i.contains(Timestamp::from_nanos(9)));
        assert!(!i.contains(Timestamp::from_nanos(10)));
        assert_eq!(Interval::exact(Timestamp::from_nanos(3)).width_nanos(), 0);
    }
}
