//! The logical clock: one shared, cache-padded atomic counter.
//!
//! This is the baseline ORDO replaces (TL2's global version clock). `now()` is the exact reading
//! `[c, c]`; `get_ts()` is `fetch_add(1) + 1`, which makes every timestamp unique and strictly
//! increasing in the counter's modification order — at the price of one contended cache line.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::clock::{Clock, ClockKind, TimedTs};
use crate::time::{Interval, Timestamp};

/// A shared atomic counter clock.
#[derive(Debug, Default)]
pub struct LogicalClock {
    counter: CachePadded<AtomicU64>,
}

impl LogicalClock {
    /// A counter starting at 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// A counter starting at `start` (used when recovering a database stamped by this clock).
    pub fn starting_at(start: Timestamp) -> Self {
        LogicalClock { counter: CachePadded::new(AtomicU64::new(start.as_nanos())) }
    }

    /// Moves the counter forward to at least `ts` (fast-forward after recovery).
    pub fn advance_to(&self, ts: Timestamp) {
        // AcqRel: pairs with the Acquire loads in now()/read_ts() of other threads.
        self.counter.fetch_max(ts.as_nanos(), Ordering::AcqRel);
    }
}

impl Clock for LogicalClock {
    #[inline]
    fn now(&self) -> Interval {
        // Acquire: pairs with the AcqRel fetch_add in get_ts(), so a reader that sees a value also
        // sees everything its producer did before drawing it.
        Interval::exact(Timestamp::from_nanos(self.counter.load(Ordering::Acquire)))
    }

    #[inline]
    fn get_ts(&self) -> Timestamp {
        // AcqRel: the increment is a total order point; pairs with the Acquire loads above.
        Timestamp::from_nanos(self.counter.fetch_add(1, Ordering::AcqRel) + 1)
    }

    /// No wait: the increment is the only reading.
    #[inline]
    fn get_ts_timed(&self) -> TimedTs {
        let ts = self.get_ts();
        TimedTs { ts, first_lo: ts, last_lo: ts }
    }

    #[inline]
    fn read_ts(&self) -> Timestamp {
        self.now().lo()
    }

    fn boundary_nanos(&self) -> u64 {
        0
    }

    fn kind(&self) -> ClockKind {
        ClockKind::Logical
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_ts_is_strictly_increasing_and_read_ts_sees_it() {
        let c = LogicalClock::new();
        let a = c.get_ts();
        let b = c.get_ts();
        assert!(b > a);
        assert!(c.read_ts() >= b);
        c.advance_to(Timestamp::from_nanos(100));
        assert!(c.get_ts() > Timestamp::from_nanos(100));
    }
}
