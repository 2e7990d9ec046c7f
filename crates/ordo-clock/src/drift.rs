//! The drift monitor of the synchronised clock: the rate of the local clock relative to the clock
//! master, estimated from pairs of synchronisations (FaRMv2 §4.1: "FaRMv2 continuously monitors
//! the clock rate of each non-CM relative to the CM. If this exceeds 200 ppm (5x more
//! conservative than the bound we require for correctness), it is reported").
//!
//! # Mechanism
//! Every successful sync gives one sample: the CM read its clock at some instant that the local
//! clock places in `[send.lo, recv.hi]` and the CM places in `[cm.lo, cm.hi]`. The sample is the
//! two midpoints, each with its half-width as its error. Two samples `a`, `b` give
//!
//! ```text
//! ΔL = mid_local(b) − mid_local(a)      ΔCM = mid_cm(b) − mid_cm(a)
//! rate_ppm  = (ΔL − ΔCM) · 10^6 / ΔL    (positive: the local clock runs fast)
//! error_ppm = (half_local(a) + half_local(b) + half_cm(a) + half_cm(b)) · 10^6 / ΔL
//! ```
//!
//! The monitor keeps an *anchor* sample. A new sample forms a pair with it only when it is at
//! least `spacing` later in local time **and** the pair's `error_ppm` is at most `error_max_ppm`;
//! otherwise the anchor stays and the window keeps growing, which shrinks the error (it falls as
//! `1/ΔL`). A usable pair becomes the current estimate and the new sample the next anchor.
//!
//! # Invariants
//! * An estimate is off from the true average rate over its window by at most its `error_ppm`
//!   (≤ `error_max_ppm`), up to second-order terms in the rate.
//! * So with `error_max_ppm ≤ alarm_ppm / 2` the alarm never fires for a clock whose drift is
//!   below `alarm_ppm / 2` and always fires for one above `1.5 · alarm_ppm`.
//! * Samples from different configurations (different clock masters) are never paired:
//!   [`DriftMonitor::reset`] drops the anchor when the clock is re-enabled.

use crate::time::Interval;

/// Parts per million.
const PPM: u64 = 1_000_000;

/// One sync as the drift monitor sees it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct DriftSample {
    local_mid_nanos: u64,
    local_half_nanos: u64,
    cm_mid_nanos: u64,
    cm_half_nanos: u64,
}

impl DriftSample {
    /// The sample of a sync that sent at `send`, received `cm` and received it at `recv`.
    pub(crate) fn new(send: Interval, cm: Interval, recv: Interval) -> Self {
        let local_span = recv.hi().nanos_since(send.lo());
        let cm_span = cm.width_nanos();
        DriftSample {
            local_mid_nanos: send.lo().as_nanos().saturating_add(local_span / 2),
            local_half_nanos: local_span.div_ceil(2),
            cm_mid_nanos: cm.lo().as_nanos().saturating_add(cm_span / 2),
            cm_half_nanos: cm_span.div_ceil(2),
        }
    }
}

/// One rate estimate.
#[derive(Clone, Copy, PartialEq, Eq, Debug, serde::Serialize)]
pub struct DriftEstimate {
    /// The local clock's rate relative to the clock master, in ppm; positive: it runs fast.
    pub rate_ppm: i64,
    /// The bound on the estimate's error, in ppm.
    pub error_ppm: u64,
    /// The local time between the two samples, in nanoseconds.
    pub window_nanos: u64,
}

/// The monitor's settings and state (owned by the synced clock's writer, behind its mutex).
#[derive(Debug)]
pub(crate) struct DriftMonitor {
    spacing_nanos: u64,
    error_max_ppm: u64,
    alarm_ppm: u64,
    anchor: Option<DriftSample>,
    latest: Option<DriftEstimate>,
    estimates: u64,
    alarm: bool,
    alarms: u64,
}

/// What the monitor reports in the clock's statistics.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct DriftReport {
    pub(crate) latest: Option<DriftEstimate>,
    pub(crate) estimates: u64,
    pub(crate) alarm: bool,
    pub(crate) alarms: u64,
}

impl DriftMonitor {
    pub(crate) fn new(spacing_nanos: u64, error_max_ppm: u64, alarm_ppm: u64) -> Self {
        DriftMonitor {
            spacing_nanos,
            error_max_ppm,
            alarm_ppm,
            anchor: None,
            latest: None,
            estimates: 0,
            alarm: false,
            alarms: 0,
        }
    }

    /// Forgets the anchor: the next sample starts a new window (a new configuration).
    pub(crate) fn reset(&mut self) {
        self.anchor = None;
    }

    /// Feeds one sample; returns the estimate it completes, if any.
    pub(crate) fn observe(&mut self, sample: DriftSample) -> Option<DriftEstimate> {
        let Some(anchor) = self.anchor else {
            self.anchor = Some(sample);
            return None;
        };
        // A sync that finished out of order (older than the anchor) pairs with nothing.
        let local_delta = sample.local_mid_nanos.checked_sub(anchor.local_mid_nanos)?;
        if local_delta < self.spacing_nanos.max(1) {
            return None;
        }
        let error_nanos = anchor
            .local_half_nanos
            .saturating_add(sample.local_half_nanos)
            .saturating_add(anchor.cm_half_nanos)
            .saturating_add(sample.cm_half_nanos);
        let error_ppm = ppm_of(error_nanos, local_delta);
        if error_ppm > self.error_max_ppm {
            return None;
        }
        let cm_delta = i128::from(sample.cm_mid_nanos) - i128::from(anchor.cm_mid_nanos);
        let fast_nanos = i128::from(local_delta) - cm_delta;
        // |fast_nanos| < 2^65 and PPM < 2^20: the product fits in i128.
        let rate = fast_nanos * i128::from(PPM) / i128::from(local_delta);
        let rate_ppm = i64::try_from(rate).unwrap_or(if rate < 0 { i64::MIN } else { i64::MAX });
        let estimate = DriftEstimate { rate_ppm, error_ppm, window_nanos: local_delta };
        self.anchor = Some(sample);
        self.latest = Some(estimate);
        self.estimates = self.estimates.saturating_add(1);
        self.alarm = rate_ppm.unsigned_abs() > self.alarm_ppm;
        if self.alarm {
            self.alarms = self.alarms.saturating_add(1);
        }
        Some(estimate)
    }

    pub(crate) fn report(&self) -> DriftReport {
        DriftReport {
            latest: self.latest,
            estimates: self.estimates,
            alarm: self.alarm,
            alarms: self.alarms,
        }
    }
}

/// `ceil(part · 10^6 / whole)` for `whole > 0`, saturating.
fn ppm_of(part: u64, whole: u64) -> u64 {
    let ppm = (u128::from(part) * u128::from(PPM)).div_ceil(u128::from(whole.max(1)));
    u64::try_from(ppm).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;

    fn iv(lo: u64, hi: u64) -> Interval {
        Interval::new(Timestamp::from_nanos(lo), Timestamp::from_nanos(hi))
    }

    /// A sync at local time `local` whose CM reading is `cm`, both exact up to `half` ns.
    fn sample(local: u64, cm: u64, half: u64) -> DriftSample {
        DriftSample::new(iv(local - half, local - half), iv(cm, cm), iv(local + half, local + half))
    }

    #[test]
    fn estimates_the_rate_from_pairs_spaced_far_enough() {
        let mut m = DriftMonitor::new(100_000_000, 100, 200);
        assert_eq!(m.observe(sample(1_000_000_000, 5_000_000_000, 1_000)), None);
        // 50 ms later: too close.
        assert_eq!(m.observe(sample(1_050_000_000, 5_049_985_000, 1_000)), None);
        // 200 ms local for 199.9 ms at the CM: the local clock runs 500 ppm fast.
        let e = m.observe(sample(1_200_000_000, 5_199_900_000, 1_000)).unwrap();
        assert_eq!(e.rate_ppm, 500);
        assert_eq!(e.window_nanos, 200_000_000);
        assert_eq!(e.error_ppm, 10); // 2 µs of half-widths over 200 ms
        assert!(m.report().alarm);
        // The next window, 10 ppm slow: the alarm clears, the count stays.
        let e = m.observe(sample(1_400_000_000, 5_399_902_000, 1_000)).unwrap();
        assert_eq!(e.rate_ppm, -10);
        let r = m.report();
        assert_eq!((r.alarm, r.alarms, r.estimates), (false, 1, 2));
    }

    #[test]
    fn an_imprecise_pair_waits_for_a_longer_window() {
        let mut m = DriftMonitor::new(100_000_000, 100, 200);
        m.observe(sample(1_000_000_000, 1_000_000_000, 10_000));
        // 20 µs of error over 100 ms is 200 ppm: not precise enough yet.
        assert_eq!(m.observe(sample(1_100_000_000, 1_100_000_000, 10_000)), None);
        // Over 1 s it is 20 ppm.
        let e = m.observe(sample(2_000_000_000, 2_000_000_000, 10_000)).unwrap();
        assert_eq!((e.rate_ppm, e.error_ppm), (0, 20));
    }

    #[test]
    fn reset_starts_a_new_window() {
        let mut m = DriftMonitor::new(100, 1_000_000, 200);
        m.observe(sample(1_000, 1_000, 0));
        m.reset();
        assert_eq!(m.observe(sample(10_000, 1_000_000, 0)), None);
        assert_eq!(m.observe(sample(20_000, 1_010_000, 0)).unwrap().rate_ppm, 0);
    }
}
