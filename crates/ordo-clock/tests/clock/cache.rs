//! The calibration cache never trusts a bad file: garbage, another key, fewer runs or a failed
//! consistency check are recomputed with a warning; an unwritable directory is a warning and the
//! calibration is still returned.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use ordo_clock::cache::{CacheKey, load_or_else};
use ordo_clock::cores::usable_cores;
use ordo_clock::{
    CacheWarning, CalibrateOptions, Calibration, CalibrationCache, CalibrationSource, CounterInfo,
    CounterKind, FrequencySource, Invariance, load_or_calibrate,
};

static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

/// A fresh, empty directory under the system temp dir.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "ordo-clock-cache-test-{}-{}-{name}",
        std::process::id(),
        NEXT_DIR.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn options() -> CalibrateOptions {
    let core = usable_cores().unwrap()[0];
    CalibrateOptions { runs: 10, cores: Some(vec![core]), ..CalibrateOptions::default() }
}

/// A cheap, valid one-core calibration (no handshake needed).
fn fake(options: &CalibrateOptions) -> Calibration {
    Calibration {
        counter: CounterInfo {
            kind: CounterKind::Rdtscp,
            invariance: Invariance::CpuidInvariantTsc,
            frequency_hz: 2_000_000_000,
            frequency_source: FrequencySource::Given,
        },
        cpu_model: "test".to_owned(),
        cores: options.cores.clone().unwrap(),
        runs_requested: options.runs,
        offsets: Vec::new(),
        boundary_ticks: 0,
        boundary_nanos: 1,
        offset_nanos_min: None,
        offset_nanos_max: None,
        budget_exhausted: false,
        elapsed_ms: 0,
    }
}

fn run(cache: &CalibrationCache, options: &CalibrateOptions) -> ordo_clock::CalibrationOutcome {
    load_or_else(options, Some(cache), || Ok(fake(options))).unwrap()
}

fn rewrite_json(cache: &CalibrationCache, edit: impl FnOnce(&mut serde_json::Value)) {
    let text = std::fs::read_to_string(cache.path()).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(&mut value);
    std::fs::write(cache.path(), serde_json::to_vec(&value).unwrap()).unwrap();
}

#[test]
fn a_stored_calibration_is_reused() {
    let cache = CalibrationCache::new(temp_dir("reuse"));
    let options = options();
    let first = run(&cache, &options);
    assert_eq!(first.source, CalibrationSource::Measured);
    assert!(first.warnings.is_empty(), "{:?}", first.warnings);
    assert!(cache.path().exists());
    let second = load_or_else(&options, Some(&cache), || panic!("must not recalibrate")).unwrap();
    assert_eq!(second.source, CalibrationSource::Cached);
    assert!(second.warnings.is_empty());
    assert_eq!(second.calibration, first.calibration);
    // No temporary files are left behind.
    let entries: Vec<_> = std::fs::read_dir(cache.dir()).unwrap().collect();
    assert_eq!(entries.len(), 1);
}

#[test]
fn a_garbage_file_is_recomputed_with_a_warning() {
    let cache = CalibrationCache::new(temp_dir("garbage"));
    std::fs::write(cache.path(), b"\x00{not json at all").unwrap();
    let outcome = run(&cache, &options());
    assert_eq!(outcome.source, CalibrationSource::Measured);
    assert!(
        matches!(outcome.warnings[..], [CacheWarning::Corrupt { .. }]),
        "{:?}",
        outcome.warnings
    );
    // The bad file was replaced by a good one.
    assert_eq!(run(&cache, &options()).source, CalibrationSource::Cached);
}

#[test]
fn a_truncated_file_is_recomputed_with_a_warning() {
    let cache = CalibrationCache::new(temp_dir("truncated"));
    run(&cache, &options());
    let text = std::fs::read(cache.path()).unwrap();
    std::fs::write(cache.path(), &text[..text.len() / 2]).unwrap();
    let outcome = run(&cache, &options());
    assert_eq!(outcome.source, CalibrationSource::Measured);
    assert!(matches!(outcome.warnings[..], [CacheWarning::Corrupt { .. }]));
}

#[test]
fn a_stale_key_is_recomputed_with_a_warning() {
    let options = options();
    for (field, value) in [
        ("boot_id", serde_json::json!("00000000-0000-0000-0000-000000000000")),
        ("cpu_model", serde_json::json!("Some Other CPU")),
        ("cores", serde_json::json!([0, 1, 2, 3, 4, 5, 6, 7, 8])),
    ] {
        let cache = CalibrationCache::new(temp_dir("stale"));
        run(&cache, &options);
        rewrite_json(&cache, |v| v["key"][field] = value.clone());
        let outcome = run(&cache, &options);
        assert_eq!(outcome.source, CalibrationSource::Measured, "{field}");
        assert!(
            matches!(outcome.warnings[..], [CacheWarning::Stale { .. }]),
            "{field}: {:?}",
            outcome.warnings
        );
        assert!(outcome.warnings[0].to_string().contains("stale"));
    }
}

#[test]
fn another_format_version_is_stale() {
    let cache = CalibrationCache::new(temp_dir("version"));
    run(&cache, &options());
    // Another version with another shape: stale, not corrupt.
    rewrite_json(&cache, |v| {
        v["format_version"] = serde_json::json!(999);
        v["calibration"] = serde_json::json!({ "something": "else" });
    });
    let outcome = run(&cache, &options());
    assert!(matches!(outcome.warnings[..], [CacheWarning::Stale { .. }]), "{:?}", outcome.warnings);
}

#[test]
fn a_calibration_with_fewer_runs_than_requested_is_stale() {
    let cache = CalibrationCache::new(temp_dir("runs"));
    run(&cache, &options());
    let more = CalibrateOptions { runs: 1_000, ..options() };
    let outcome = run(&cache, &more);
    assert_eq!(outcome.source, CalibrationSource::Measured);
    assert!(matches!(outcome.warnings[..], [CacheWarning::Stale { .. }]));
    // Fewer runs than cached is fine.
    assert_eq!(run(&cache, &options()).source, CalibrationSource::Cached);
}

#[test]
fn an_inconsistent_calibration_is_not_trusted() {
    let cache = CalibrationCache::new(temp_dir("inconsistent"));
    run(&cache, &options());
    rewrite_json(&cache, |v| v["calibration"]["counter"]["frequency_hz"] = serde_json::json!(0));
    let outcome = run(&cache, &options());
    assert_eq!(outcome.source, CalibrationSource::Measured);
    assert!(matches!(outcome.warnings[..], [CacheWarning::Corrupt { .. }]));
}

#[test]
fn an_unwritable_directory_is_a_warning_and_the_calibration_is_returned() {
    // A directory below a regular file cannot be created, even by root.
    let base = temp_dir("unwritable");
    let file = base.join("not-a-directory");
    std::fs::write(&file, b"x").unwrap();
    let cache = CalibrationCache::new(file.join("ordo"));
    let outcome = run(&cache, &options());
    assert_eq!(outcome.source, CalibrationSource::Measured);
    assert_eq!(outcome.calibration, fake(&options()));
    assert!(
        matches!(outcome.warnings[..], [CacheWarning::Unwritable { .. }]),
        "{:?}",
        outcome.warnings
    );
}

#[test]
fn the_real_calibration_goes_through_the_cache() {
    let cache = CalibrationCache::new(temp_dir("real"));
    let options = CalibrateOptions { runs: 20, ..CalibrateOptions::default() };
    let first = load_or_calibrate(&options, Some(&cache)).unwrap();
    assert_eq!(first.source, CalibrationSource::Measured);
    assert!(first.warnings.is_empty(), "{:?}", first.warnings);
    let key = CacheKey::current(&first.calibration.cores).unwrap();
    assert_eq!(cache.load(&key, 20).unwrap().unwrap(), first.calibration);
    let second = load_or_calibrate(&options, Some(&cache)).unwrap();
    assert_eq!(second.source, CalibrationSource::Cached);
}

#[test]
fn zero_runs_is_an_error_even_with_a_cache() {
    let cache = CalibrationCache::new(temp_dir("zero"));
    let options = CalibrateOptions { runs: 0, ..options() };
    assert!(load_or_calibrate(&options, Some(&cache)).is_err());
}
