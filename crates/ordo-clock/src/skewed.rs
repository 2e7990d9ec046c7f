//! The skewed clock: one machine's local clock, with a known offset and drift from a true time
//! that tests (and the cluster simulator and benchmarks) can compute exactly (DESIGN §8: tests
//! inject skewed clocks through the clock seam).
//!
//! # Mechanism
//! A [`TimeSource`] gives the **true time** `t`, shared by every clock of one simulated cluster:
//! * [`TimeSource::real`]: `CLOCK_MONOTONIC` (through [`Instant`]) since the source was made,
//!   plus a start value;
//! * [`TimeSource::virtual_at`]: a shared `Arc<AtomicU64>` moved only by
//!   [`TimeSource::advance`] — deterministic, for simulations.
//!
//! A [`SkewedClock`] is one machine. Its **local true time** (the most advanced core of that
//! machine, in ORDO's terms) at true time `t` is
//!
//! ```text
//! local(t) = t + ⌊t · drift_ppm / 10^6⌋ + offset_nanos          (saturating at 0 and u64::MAX)
//! ```
//!
//! and a reading is `c = local(t) − lag`, returned as the interval `[c, c + boundary]`. The lag is
//! 0 by default; [`SkewedClock::with_reading_spread`] makes it a pseudo-random value in
//! `[0, boundary]` per reading, the way a reading on a core that trails the most advanced one by
//! up to the ORDO boundary lags. With the spread on, a consumer that does not widen the readings
//! by the boundary is caught by tests; without it, `lo` is exact.
//!
//! [`SkewedClock::reading_at`] gives `local(t)` for any `t`, so a test holding the true time can
//! compute the truth a clock must contain: for a synchronised cluster, the clock master's local
//! true time `cm.reading_at(t)`.
//!
//! # Invariants
//! * Every interval contains `local(t)` for the true time `t` read during the call.
//! * `local` is non-decreasing in `t` (drift is at least [`crate::DRIFT_PPM_MIN`]), and two
//!   clocks' relative rate is `(1 + d_a) / (1 + d_b)`.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::clock::{Clock, ClockKind, TimedTs, get_ts_timed_by_waiting};
use crate::test_clock::DRIFT_PPM_MIN;
use crate::time::{Interval, Timestamp};

/// Parts per million.
const PPM: i128 = 1_000_000;

/// The source of true time shared by the clocks of one simulated cluster. Cheap to clone (clones
/// share the time).
#[derive(Clone, Debug)]
pub enum TimeSource {
    /// `CLOCK_MONOTONIC` since `epoch`, plus `start_nanos`.
    Real {
        /// When the source was made.
        epoch: Instant,
        /// The true time at `epoch`.
        start_nanos: u64,
    },
    /// Virtual time, moved only by [`TimeSource::advance`] and [`TimeSource::advance_to`].
    Virtual(Arc<AtomicU64>),
}

impl TimeSource {
    /// Real time, starting at `start_nanos` now.
    pub fn real(start_nanos: u64) -> Self {
        TimeSource::Real { epoch: Instant::now(), start_nanos }
    }

    /// Virtual time, frozen at `start_nanos` until advanced.
    pub fn virtual_at(start_nanos: u64) -> Self {
        TimeSource::Virtual(Arc::new(AtomicU64::new(start_nanos)))
    }

    /// The true time now.
    #[inline]
    pub fn now(&self) -> Timestamp {
        Timestamp::from_nanos(match self {
            TimeSource::Real { epoch, start_nanos } => {
                let elapsed = u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
                start_nanos.saturating_add(elapsed)
            }
            // Acquire: pairs with the AcqRel updates in advance()/advance_to(), so a thread that
            // sees a time also sees what the advancing thread did before moving it.
            TimeSource::Virtual(now) => now.load(Ordering::Acquire),
        })
    }

    /// Moves virtual time `nanos` forward (saturating); no effect on real time.
    pub fn advance(&self, nanos: u64) {
        if let TimeSource::Virtual(now) = self {
            // AcqRel: updates form one total order that readers Acquire (see now()).
            let _ = now.fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(nanos))
            });
        }
    }

    /// Moves virtual time forward to `ts` (never backwards); no effect on real time.
    pub fn advance_to(&self, ts: Timestamp) {
        if let TimeSource::Virtual(now) = self {
            // AcqRel: see advance().
            now.fetch_max(ts.as_nanos(), Ordering::AcqRel);
        }
    }

    /// Whether this is virtual time.
    pub fn is_virtual(&self) -> bool {
        matches!(self, TimeSource::Virtual(_))
    }
}

/// Per-reading lags drawn from a counter hashed with a seed.
struct Spread {
    seed: u64,
    reads: AtomicU64,
}

/// One machine's local clock: offset and drift from a shared true time, readings `[c, c + B]`.
pub struct SkewedClock {
    source: TimeSource,
    offset_nanos: i64,
    drift_ppm: i64,
    boundary_nanos: u64,
    spread: Option<Spread>,
}

impl fmt::Debug for SkewedClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkewedClock")
            .field("source", &self.source)
            .field("offset_nanos", &self.offset_nanos)
            .field("drift_ppm", &self.drift_ppm)
            .field("boundary_nanos", &self.boundary_nanos)
            .field("spread", &self.spread.is_some())
            .finish()
    }
}

impl SkewedClock {
    /// A clock over `source` that is `offset_nanos` ahead and runs `drift_ppm` fast (negative:
    /// behind, slow), claiming `boundary_nanos`. Drift below [`crate::DRIFT_PPM_MIN`] is raised
    /// to it.
    pub fn new(source: TimeSource, offset_nanos: i64, drift_ppm: i64, boundary_nanos: u64) -> Self {
        SkewedClock {
            source,
            offset_nanos,
            drift_ppm: drift_ppm.max(DRIFT_PPM_MIN),
            boundary_nanos,
            spread: None,
        }
    }

    /// Makes each reading lag the local true time by a pseudo-random amount in
    /// `[0, boundary_nanos]`, drawn from `seed` and a count of readings (deterministic when one
    /// thread reads).
    pub fn with_reading_spread(mut self, seed: u64) -> Self {
        self.spread = Some(Spread { seed, reads: AtomicU64::new(0) });
        self
    }

    /// The true-time source.
    pub fn source(&self) -> &TimeSource {
        &self.source
    }

    /// The true time now (not this clock's reading).
    pub fn true_now(&self) -> Timestamp {
        self.source.now()
    }

    /// The offset, in nanoseconds.
    pub fn offset_nanos(&self) -> i64 {
        self.offset_nanos
    }

    /// The drift, in ppm of true time.
    pub fn drift_ppm(&self) -> i64 {
        self.drift_ppm
    }

    /// This machine's local true time at true time `true_time`: `t·(1 + drift/10^6) + offset`.
    pub fn reading_at(&self, true_time: Timestamp) -> Timestamp {
        let t = i128::from(true_time.as_nanos());
        let local =
            t + (t * i128::from(self.drift_ppm)).div_euclid(PPM) + i128::from(self.offset_nanos);
        Timestamp::from_nanos(u64::try_from(local.max(0)).unwrap_or(u64::MAX))
    }

    /// One reading together with the true time it was computed from.
    pub fn read_with_truth(&self) -> (Interval, Timestamp) {
        let truth = self.source.now();
        let local = self.reading_at(truth);
        let reading = local.saturating_sub_nanos(self.lag_nanos());
        (Interval::with_width(reading, self.boundary_nanos), truth)
    }

    fn lag_nanos(&self) -> u64 {
        let Some(spread) = &self.spread else { return 0 };
        // Relaxed: the count only needs to differ between readings.
        let n = spread.reads.fetch_add(1, Ordering::Relaxed);
        let hash = splitmix64(spread.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        match self.boundary_nanos.checked_add(1) {
            Some(choices) => hash % choices,
            None => hash,
        }
    }
}

/// SplitMix64's output function: a well-mixed hash of one word.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Clock for SkewedClock {
    #[inline]
    fn now(&self) -> Interval {
        self.read_with_truth().0
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
        ClockKind::Test
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_follow_offset_and_drift_of_the_true_time() {
        let source = TimeSource::virtual_at(1_000_000_000);
        let c = SkewedClock::new(source.clone(), -500, 1_000, 100);
        // 1 s · 1.001 − 500 ns.
        assert_eq!(c.now(), Interval::with_width(Timestamp::from_nanos(1_000_999_500), 100));
        source.advance(1_000_000);
        assert_eq!(c.now().lo().as_nanos(), 1_002_000_500);
        assert_eq!(c.reading_at(Timestamp::from_nanos(0)).as_nanos(), 0, "saturates at 0");
        let slow = SkewedClock::new(source.clone(), 0, -1_000, 0);
        assert_eq!(slow.reading_at(Timestamp::from_nanos(1_000_001)).as_nanos(), 999_000);
        source.advance_to(Timestamp::from_nanos(5));
        assert_eq!(source.now().as_nanos(), 1_001_000_000, "never backwards");
    }

    #[test]
    fn spread_readings_lag_by_at_most_the_boundary_and_do_lag() {
        let source = TimeSource::virtual_at(1_000_000);
        let c = SkewedClock::new(source, 0, 0, 64).with_reading_spread(7);
        let mut lags = std::collections::BTreeSet::new();
        for _ in 0..1_000 {
            let (iv, truth) = c.read_with_truth();
            assert!(iv.contains(truth));
            lags.insert(truth.nanos_since(iv.lo()));
        }
        assert!(lags.len() > 32, "{lags:?}");
    }

    #[test]
    fn real_time_advances() {
        let c = SkewedClock::new(TimeSource::real(1_000), 0, 0, 0);
        let a = c.now().lo();
        std::thread::sleep(std::time::Duration::from_millis(1));
        assert!(c.now().lo().nanos_since(a) >= 1_000_000);
    }
}
