//! The calibration handshake under stress, and its input errors.
//!
//! Sanity only — no timing thresholds: whatever the machine's load, the boundary must dominate
//! every pairwise offset, every ordered pair must be measured exactly once, and bad input must be
//! a typed error before any thread starts.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::time::Duration;

use ordo_clock::calibrate::{CalibrateError, tournament};
use ordo_clock::cores::usable_cores;
use ordo_clock::{CalibrateOptions, Calibration, calibrate};

fn check_sane(c: &Calibration) {
    c.validate().unwrap();
    let n = c.cores.len();
    assert_eq!(c.offsets.len(), n * (n - 1));
    for p in &c.offsets {
        assert!(p.runs >= 1);
        assert!(i128::from(c.boundary_ticks) >= i128::from(p.min_delta_ticks), "{p:?}");
        assert!(i128::from(c.boundary_nanos) >= i128::from(p.min_delta_nanos), "{p:?}");
        // Symmetric in shape: the reverse direction was measured too.
        assert!(c.offset(p.to, p.from).is_some());
    }
    let matrix = c.matrix_nanos();
    assert_eq!(matrix.len(), n);
    for (i, row) in matrix.iter().enumerate() {
        assert_eq!(row.len(), n);
        for (j, cell) in row.iter().enumerate() {
            assert_eq!(cell.is_none(), i == j);
        }
    }
    if n >= 2 {
        let min = c.min_offset().unwrap().min_delta_ticks;
        let max = c.max_offset().unwrap().min_delta_ticks;
        assert!(min <= max);
        assert_eq!(c.boundary_ticks, u64::try_from(max.max(0)).unwrap());
        assert_eq!(c.offset_nanos_min, Some(c.min_offset().unwrap().min_delta_nanos));
        assert_eq!(c.offset_nanos_max, Some(c.max_offset().unwrap().min_delta_nanos));
    }
}

#[test]
fn repeated_small_calibrations_are_sane() {
    for runs in [1, 5, 50] {
        for parallel in [true, false] {
            let c = calibrate(&CalibrateOptions { runs, parallel, ..CalibrateOptions::default() })
                .unwrap();
            check_sane(&c);
            assert_eq!(c.runs_requested, runs);
            assert!(c.offsets.iter().all(|p| p.runs == runs), "runs={runs}");
        }
    }
}

#[test]
fn a_tiny_time_budget_still_measures_every_pair() {
    let c = calibrate(&CalibrateOptions {
        runs: 1_000_000,
        time_budget: Duration::ZERO,
        ..CalibrateOptions::default()
    })
    .unwrap();
    check_sane(&c);
    if c.cores.len() >= 2 {
        assert!(c.budget_exhausted);
        assert!(c.runs_min().unwrap() >= ordo_clock::calibrate::RUNS_MIN);
    }
}

#[test]
fn one_core_has_no_pairs_and_a_zero_tick_boundary() {
    let core = usable_cores().unwrap()[0];
    let c = calibrate(&CalibrateOptions {
        runs: 10,
        cores: Some(vec![core, core]),
        ..Default::default()
    })
    .unwrap();
    check_sane(&c);
    assert_eq!(c.cores, vec![core]);
    assert!(c.offsets.is_empty());
    assert_eq!(c.boundary_ticks, 0);
}

#[test]
fn the_calibration_round_trips_through_json() {
    let c = calibrate(&CalibrateOptions { runs: 10, ..Default::default() }).unwrap();
    let json = serde_json::to_string(&c).unwrap();
    let back: Calibration = serde_json::from_str(&json).unwrap();
    assert_eq!(back, c);
}

#[test]
fn the_schedule_for_this_machine_covers_every_pair() {
    let cores = usable_cores().unwrap();
    let pairs: usize = tournament(&cores).iter().map(Vec::len).sum();
    assert_eq!(pairs, cores.len() * (cores.len() - 1) / 2);
}

#[test]
fn zero_runs_is_an_error() {
    let err = calibrate(&CalibrateOptions { runs: 0, ..Default::default() }).unwrap_err();
    assert!(matches!(err, CalibrateError::RunsZero), "{err}");
    assert_eq!(err.to_string(), "runs must be at least 1");
}

#[test]
fn an_offline_core_is_an_error() {
    let err =
        calibrate(&CalibrateOptions { runs: 1, cores: Some(vec![0, 1000]), ..Default::default() })
            .unwrap_err();
    assert!(matches!(err, CalibrateError::CoreOffline { core: 1000, .. }), "{err}");
    assert!(err.to_string().starts_with("core 1000 is not online"), "{err}");
}

#[test]
fn an_empty_core_list_is_an_error() {
    let err = calibrate(&CalibrateOptions { runs: 1, cores: Some(vec![]), ..Default::default() })
        .unwrap_err();
    assert!(matches!(err, CalibrateError::NoCores), "{err}");
}
