//! YCSB at tiny scale: contents against the model, bad parameters rejected.
#![allow(clippy::unwrap_used)]

use ordo::Isolation;
use ordo_bench::error::BenchError;
use ordo_bench::ycsb::{self, YcsbConfig};
use ordo_clock::LogicalClock;

fn tiny() -> YcsbConfig {
    YcsbConfig {
        rows: 200,
        value_bytes: 100,
        requests: 4,
        read_ratio: 0.5,
        threads: 2,
        ..YcsbConfig::default()
    }
}

#[test]
fn update_counters_match_committed_updates() {
    for (theta, isolation) in [(0.0, Isolation::StrictSerializable), (0.9, Isolation::Snapshot)] {
        let cfg = YcsbConfig { theta, isolation, ..tiny() };
        let table = ycsb::load(LogicalClock::new(), &cfg, 2).unwrap();
        ycsb::check(&table, 0).unwrap();
        let updates = ycsb::run_counted(&table, &cfg, 2_000).unwrap();
        assert!(updates > 0);
        ycsb::check(&table, updates).unwrap();
        assert!(ycsb::check(&table, updates + 1).is_err(), "the check must be able to fail");
    }
}

#[test]
fn timed_run_reports_throughput() {
    let cfg = YcsbConfig { duration: std::time::Duration::from_millis(100), ..tiny() };
    let table = ycsb::load(LogicalClock::new(), &cfg, 1).unwrap();
    let r = ycsb::run(&table, &cfg);
    assert!(r.committed > 0 && r.tx_per_s > 0.0);
    assert!(r.latency.p50_ns <= r.latency.p99_ns);
}

#[test]
fn bad_parameters_are_rejected() {
    let cases = [
        YcsbConfig { threads: 0, ..tiny() },
        YcsbConfig { theta: 1.0, ..tiny() },
        YcsbConfig { theta: -0.5, ..tiny() },
        YcsbConfig { rows: 0, ..tiny() },
        YcsbConfig { read_ratio: 1.5, ..tiny() },
        YcsbConfig { value_bytes: 8, ..tiny() },
        YcsbConfig { requests: 0, ..tiny() },
    ];
    for cfg in cases {
        let err = ycsb::load(LogicalClock::new(), &cfg, 1).err().expect("must be rejected");
        assert!(
            matches!(
                err,
                BenchError::ZeroThreads | BenchError::OutOfRange { .. } | BenchError::Theta(_)
            ),
            "{err}"
        );
    }
}

#[test]
fn scan_update_runs_in_every_mode_and_rejects_bad_input() {
    use ordo_bench::scan_update::{self, ScanUpdateConfig, VersionMode};
    for mode in VersionMode::ALL {
        let cfg = ScanUpdateConfig {
            rows: 500,
            length: 100,
            mode,
            budget_blocks: 4,
            threads: 2,
            duration: std::time::Duration::from_millis(100),
            scan_attempts_max: 50,
        };
        let table = scan_update::load(LogicalClock::new(), &cfg).unwrap();
        let r = scan_update::run(&table, &cfg);
        assert!(r.updates_per_s > 0.0, "{mode:?}");
    }
    let bad = ScanUpdateConfig {
        rows: 10,
        length: 11,
        mode: VersionMode::Single,
        budget_blocks: 1,
        threads: 1,
        duration: std::time::Duration::from_millis(1),
        scan_attempts_max: 1,
    };
    assert!(scan_update::load(LogicalClock::new(), &bad).is_err());
    assert!(
        scan_update::load(
            LogicalClock::new(),
            &ScanUpdateConfig { length: 5, threads: 0, ..bad.clone() }
        )
        .is_err()
    );
    assert!(
        scan_update::load(
            LogicalClock::new(),
            &ScanUpdateConfig { length: 5, mode: VersionMode::Block, budget_blocks: 0, ..bad }
        )
        .is_err()
    );
}

/// YCSB D and E at tiny scale on 1, 2 and 4 threads: the workers check every committed read and
/// scan during the run (a read of an acknowledged key finds it; a scan has no gaps among the
/// acknowledged keys below its start's limit), and afterwards the tree equals the model rebuilt
/// from the loaded rows plus every insert the workers reported as committed.
#[test]
fn d_and_e_trees_match_the_model_of_committed_inserts() {
    use std::collections::BTreeMap;
    use ycsb::Operations;
    for operations in [Operations::ReadInsertLatest, Operations::ScanInsert] {
        for threads in [1, 2, 4] {
            let cfg = YcsbConfig {
                rows: 300,
                value_bytes: 40,
                requests: 2,
                read_ratio: 0.8,
                theta: 0.9,
                threads,
                operations,
                scan_length_max: 40,
                ..YcsbConfig::default()
            };
            let table = ycsb::load(LogicalClock::new(), &cfg, 1).unwrap();
            let mut model: BTreeMap<u64, Vec<u8>> =
                ycsb::tree_rows(&table).unwrap().into_iter().collect();
            assert_eq!(model.len(), 300);
            assert!(model.keys().copied().eq(0..300));
            let counted = ycsb::run_counted_tree(&table, &cfg, 400 / threads as u64)
                .unwrap_or_else(|e| panic!("{operations:?}, {threads} threads: {e}"));
            assert!(!counted.inserted.is_empty(), "{operations:?} {threads}");
            if operations == Operations::ScanInsert {
                assert!(counted.scans > 0 && counted.scanned_rows > counted.scans);
            } else {
                assert!(counted.reads > 0);
            }
            for (key, row) in &counted.inserted {
                assert!(model.insert(*key, row.clone()).is_none(), "key {key} inserted twice");
            }
            let tree: BTreeMap<u64, Vec<u8>> =
                ycsb::tree_rows(&table).unwrap().into_iter().collect();
            assert_eq!(tree, model, "{operations:?} {threads} threads");
            ycsb::check(&table, 0).unwrap();
        }
    }
}

#[test]
fn d_and_e_timed_runs_report_throughput_and_stay_consistent() {
    for operations in [ycsb::Operations::ReadInsertLatest, ycsb::Operations::ScanInsert] {
        let cfg = YcsbConfig {
            operations,
            duration: std::time::Duration::from_millis(100),
            requests: 1,
            read_ratio: 0.95,
            theta: 0.99,
            ..tiny()
        };
        let table = ycsb::load(LogicalClock::new(), &cfg, 1).unwrap();
        let r = ycsb::run(&table, &cfg);
        assert!(r.committed > 0 && r.tx_per_s > 0.0);
        ycsb::check(&table, 0).unwrap_or_else(|e| panic!("{operations:?}: {e}"));
    }
}

#[test]
fn d_and_e_bad_parameters_are_rejected() {
    for operations in [ycsb::Operations::ReadInsertLatest, ycsb::Operations::ScanInsert] {
        let d = YcsbConfig { operations, ..tiny() };
        let cases = [
            YcsbConfig { threads: 0, ..d.clone() },
            YcsbConfig { theta: 1.0, ..d.clone() },
            YcsbConfig { theta: f64::NAN, ..d.clone() },
            YcsbConfig { scan_length_max: 0, ..d.clone() },
            YcsbConfig { rows: 0, ..d.clone() },
        ];
        for cfg in cases {
            let err = ycsb::load(LogicalClock::new(), &cfg, 1).err().expect("must be rejected");
            assert!(
                matches!(
                    err,
                    BenchError::ZeroThreads | BenchError::OutOfRange { .. } | BenchError::Theta(_)
                ),
                "{err}"
            );
        }
    }
    // A table loaded for A..F has no tree to run D or E on.
    let table = ycsb::load(LogicalClock::new(), &tiny(), 1).unwrap();
    assert!(ycsb::run_counted_tree(&table, &tiny(), 1).is_err());
}
