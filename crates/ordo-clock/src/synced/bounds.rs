//! The bound arithmetic of FaRMv2 Fig. 2 on `u64` nanoseconds: `LB` rounded down, `UB` rounded
//! up, saturating instead of overflowing, the `e·ε/10^6` products exact (`u128` when `u64` would
//! overflow). See the parent module for where the formulas come from.
//!
//! # Invariants
//! * `lower_bound` is the exact rational `cm_lo + (t_lo − recv_hi)(1 − ε)` rounded down and
//!   `upper_bound` is `cm_hi + (t_hi − send_lo)(1 + ε)` rounded up, wherever the result fits in
//!   `u64` (outside it they saturate at 0 or `u64::MAX`) — checked against `i128` below.
//! * Two lower bounds at the same `T` differ by a constant independent of `T` (±1 ns of
//!   rounding); likewise two upper bounds. That is what makes Fig. 2's one comparison final.

/// Parts per million.
const PPM: u64 = 1_000_000;

/// `⌈e · ppm / 10^6⌉`, exact.
#[inline]
fn drift_ceil_nanos(elapsed_nanos: u64, ppm: u64) -> u64 {
    match elapsed_nanos.checked_mul(ppm) {
        Some(product) => product.div_ceil(PPM),
        None => {
            let product = u128::from(elapsed_nanos) * u128::from(ppm);
            u64::try_from(product.div_ceil(u128::from(PPM))).unwrap_or(u64::MAX)
        }
    }
}

/// `⌊e · ppm / 10^6⌋`, exact.
#[inline]
fn drift_floor_nanos(elapsed_nanos: u64, ppm: u64) -> u64 {
    match elapsed_nanos.checked_mul(ppm) {
        Some(product) => product / PPM,
        None => {
            let product = u128::from(elapsed_nanos) * u128::from(ppm);
            u64::try_from(product / u128::from(PPM)).unwrap_or(u64::MAX)
        }
    }
}

/// `LB(S, T) = cm_lo + (t_lo − recv_hi)(1 − ε)`, rounded down, saturating at 0.
#[inline]
pub(super) fn lower_bound(cm_lo: u64, recv_hi: u64, t_lo: u64, eps_ppm: u64) -> u64 {
    if t_lo >= recv_hi {
        // ⌊e(1 − ε)⌋ = e − ⌈eε⌉.
        let elapsed = t_lo - recv_hi;
        cm_lo.saturating_add(elapsed.saturating_sub(drift_ceil_nanos(elapsed, eps_ppm)))
    } else {
        // A reading on a core that trails recv's core: −⌈e(1 − ε)⌉ = −(e − ⌊eε⌋).
        let before = recv_hi - t_lo;
        cm_lo.saturating_sub(before.saturating_sub(drift_floor_nanos(before, eps_ppm)))
    }
}

/// `UB(S, T) = cm_hi + (t_hi − send_lo)(1 + ε)`, rounded up, saturating at `u64::MAX`.
#[inline]
pub(super) fn upper_bound(cm_hi: u64, send_lo: u64, t_hi: u64, eps_ppm: u64) -> u64 {
    if t_hi >= send_lo {
        // ⌈e(1 + ε)⌉ = e + ⌈eε⌉.
        let elapsed = t_hi - send_lo;
        cm_hi.saturating_add(elapsed.saturating_add(drift_ceil_nanos(elapsed, eps_ppm)))
    } else {
        // Only for a T read before send (not by now()): ⌈−e(1 + ε)⌉ = −(e + ⌊eε⌋).
        let before = send_lo - t_hi;
        cm_hi.saturating_sub(before.saturating_add(drift_floor_nanos(before, eps_ppm)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_follow_fig_2_with_outward_rounding() {
        // 1 s after recv at ε = 1000 ppm: the lower bound gains 0.999 s, the upper 1.001 s.
        assert_eq!(lower_bound(5_000, 1_000, 1_000_001_000, 1_000), 5_000 + 999_000_000);
        assert_eq!(upper_bound(5_000, 1_000, 1_000_001_000, 1_000), 5_000 + 1_001_000_000);
        // 1 ns: the lower bound rounds down (0.999 → 0), the upper up (1.001 → 2).
        assert_eq!(lower_bound(5_000, 1_000, 1_001, 1_000), 5_000);
        assert_eq!(upper_bound(5_000, 1_000, 1_001, 1_000), 5_002);
        // A reading 1000 ns "before" recv (another core): −⌈999⌉.
        assert_eq!(lower_bound(5_000, 2_000, 1_000, 1_000), 5_000 - 999);
        assert_eq!(upper_bound(5_000, 2_000, 1_000, 1_000), 5_000 - 1_000 - 1);
        // Saturation instead of overflow.
        assert_eq!(lower_bound(10, 1_000_000, 0, 1_000), 0);
        assert_eq!(upper_bound(u64::MAX - 5, 0, u64::MAX, 1_000), u64::MAX);
        assert_eq!(drift_ceil_nanos(u64::MAX, 1_000), u64::MAX / 1_000 + 1);
        assert_eq!(drift_floor_nanos(u64::MAX, 1_000), u64::MAX / 1_000);
    }

    #[test]
    fn differences_of_bounds_do_not_depend_on_t() {
        // The Fig. 2 comparison at T_now decides for every later T.
        let eps = 1_000;
        for t in [10_000u64, 1_000_000, 1_000_000_000, 10_000_000_000] {
            let a = lower_bound(7_000, 2_000, t, eps);
            let b = lower_bound(7_500, 2_600, t, eps);
            assert!((i128::from(a) - i128::from(b) - (-500 + 599)).abs() <= 1, "t={t}");
        }
    }

    #[test]
    fn bounds_are_the_exact_rationals_rounded_outwards() {
        let mut x = 0x1234_5678_9ABC_DEF0u64;
        let mut next = |limit: u64| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (x >> 11) % limit
        };
        for _ in 0..100_000 {
            let (cm, anchor, t) = (next(1 << 50), next(1 << 50), next(1 << 50));
            let eps = next(DRIFT_PPM_TEST_MAX);
            let ppm = i128::from(PPM);
            let scaled_lower = (i128::from(t) - i128::from(anchor)) * (ppm - i128::from(eps));
            let lower = i128::from(cm) + scaled_lower.div_euclid(ppm);
            let scaled_upper = (i128::from(t) - i128::from(anchor)) * (ppm + i128::from(eps));
            let upper = i128::from(cm) - (-scaled_upper).div_euclid(ppm);
            assert_eq!(
                i128::from(lower_bound(cm, anchor, t, eps)),
                lower.max(0),
                "{cm} {anchor} {t} {eps}"
            );
            assert_eq!(
                i128::from(upper_bound(cm, anchor, t, eps)),
                upper.max(0),
                "{cm} {anchor} {t} {eps}"
            );
        }
    }

    /// Drift bounds tried by the property test (the clock accepts up to 50%).
    const DRIFT_PPM_TEST_MAX: u64 = 500_001;
}
