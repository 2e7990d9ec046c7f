//! The Oplog reverse-map workload at tiny scale: after concurrent runs the merged map equals the
//! threads' live mappings (the workload's check), timed runs report their rates, and bad
//! parameters are typed errors.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use ordo_bench::error::BenchError;
use ordo_bench::harness::Loaded;
use ordo_bench::oplog::{self, OplogConfig};
use ordo_clock::{LogicalClock, TestClock, ThreadSkew};

fn tiny(threads: usize) -> OplogConfig {
    OplogConfig { pages: 16, live_max: 8, read_ratio: 0.05, threads, ..OplogConfig::default() }
}

#[test]
fn merged_map_equals_the_live_mappings() {
    for (threads, objects) in [(1, 1), (2, 1), (2, 3), (4, 5)] {
        let cfg = OplogConfig { objects, ..tiny(threads) };
        let b = oplog::load(LogicalClock::new(), &cfg).unwrap();
        b.run_counted(threads, 3_000).unwrap();
        b.check().unwrap_or_else(|e| panic!("logical, {threads} threads, {objects} objects: {e}"));
        let (updates, reads) = b.counts();
        assert!(updates > 0 && reads > 0);
        // A skewed clock within its boundary: get_ts waits the skew out.
        let skewed = TestClock::builder()
            .claimed_boundary_nanos(2_000)
            .skew_by_index(|i| ThreadSkew::offset(-((i as i64 * 900) % 2_000)))
            .build();
        let b = oplog::load(skewed, &cfg).unwrap();
        b.run_counted(threads, 1_000).unwrap();
        b.check().unwrap_or_else(|e| panic!("skewed, {threads} threads, {objects} objects: {e}"));
    }
}

#[test]
fn timed_runs_report_update_and_read_rates() {
    let b = oplog::load(LogicalClock::new(), &tiny(2)).unwrap();
    for threads in [1, 2] {
        let r = b.run(threads, Duration::from_millis(50)).unwrap();
        assert!(r.committed > 0 && r.tx_per_s > 0.0);
        let metric = |name: &str| r.metrics.iter().find(|(k, _)| k == name).unwrap().1;
        assert!(metric("updates_per_s") > 0.0 && metric("reads_per_s") > 0.0);
        b.check().unwrap();
    }
}

#[test]
fn bad_parameters_are_rejected() {
    let cases = [
        OplogConfig { threads: 0, ..tiny(1) },
        OplogConfig { pages: 0, ..tiny(1) },
        OplogConfig { live_max: 0, ..tiny(1) },
        OplogConfig { objects: 0, ..tiny(1) },
        OplogConfig { objects: oplog::OBJECTS_MAX + 1, ..tiny(1) },
        OplogConfig { read_ratio: 1.5, ..tiny(1) },
        OplogConfig { read_ratio: f64::NAN, ..tiny(1) },
    ];
    for cfg in cases {
        let err = oplog::load(LogicalClock::new(), &cfg).err().expect("must be rejected");
        assert!(matches!(err, BenchError::ZeroThreads | BenchError::OutOfRange { .. }), "{err}");
    }
    let b = oplog::load(LogicalClock::new(), &tiny(2)).unwrap();
    assert!(matches!(b.run(3, Duration::from_millis(1)), Err(BenchError::OutOfRange { .. })));
    assert!(matches!(b.run(0, Duration::from_millis(1)), Err(BenchError::ZeroThreads)));
    assert!(b.run_counted(3, 1).is_err());
}
