//! The `ordo` binary end to end: bad input gives one clear `error:` line (or clap's usage
//! error) and a non-zero exit; small runs of the harness commands print their summary and write
//! results that `ordo plot` draws.

#![allow(clippy::unwrap_used)] // test helpers outside `#[test]` functions

use std::path::PathBuf;
use std::process::{Command, Output};

fn ordo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ordo")).args(args).output().expect("ordo runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ordo-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[track_caller]
fn refused(args: &[&str], expected: &str) {
    let o = ordo(args);
    assert!(!o.status.success(), "{args:?} succeeded");
    let e = stderr(&o);
    assert!(e.contains(expected), "{args:?}: stderr {e:?} lacks {expected:?}");
}

#[test]
fn bad_input_is_refused_with_a_clear_message() {
    refused(&["bench", "no-such-workload"], "unrecognized subcommand 'no-such-workload'");
    refused(&["bench", "ycsb", "--threads", "0"], "thread counts must be at least 1");
    refused(&["bench", "ycsb", "--duration", "0s"], "between 1 ms and 24 h");
    refused(&["bench", "ycsb", "--rows", "100", "--theta", "1.0"], "theta");
    refused(&["bench", "ycsb", "--rows", "100", "--theta=-0.1"], "theta");
    refused(&["bench", "ycsb", "--rows", "100", "--repetitions", "0"], "repetitions");
    refused(&["bench", "ycsb", "--isolation", "bogus"], "isolation");
    refused(&["bench", "synthetic", "--mixes", "7r7w"], "unknown mix \"7r7w\"");
    refused(&["bench", "suite", "--only", "nothing-matches"], "matches no suite entry");
    refused(
        &["plot", "/nonexistent/results.jsonl", "-o", "/tmp/x.svg"],
        "cannot read results file",
    );
    let dir = scratch("bad-plot");
    let garbage = dir.join("garbage.jsonl");
    std::fs::write(&garbage, "not json\n").unwrap();
    let fig = dir.join("fig.svg");
    refused(&["plot", garbage.to_str().unwrap(), "-o", fig.to_str().unwrap()], "garbage.jsonl:1");
    assert!(!fig.exists(), "a failed plot leaves no file behind");
    refused(&["plot", garbage.to_str().unwrap(), "-o", "fig.gif"], "unknown extension");
}

#[test]
fn a_small_run_is_summarised_recorded_and_plotted() {
    let dir = scratch("run");
    let results = dir.join("r.jsonl");
    let o = ordo(&[
        "bench",
        "ycsb",
        "--mix",
        "a",
        "--rows",
        "2000",
        "--threads",
        "1,2",
        "--duration-ms",
        "50",
        "--repetitions",
        "2",
        "--clock",
        "logical,system",
        "--out",
        results.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("ycsb a") && table.contains("logical") && table.contains("system"));
    let lines = std::fs::read_to_string(&results).unwrap();
    assert_eq!(lines.lines().count(), 2 * 2 * 2, "threads x repetitions x clocks");
    for line in lines.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["workload"], "ycsb");
        assert!(v["result"]["committed"].as_u64().unwrap() > 0);
        assert!(v["git_revision"].is_string() && v["machine"]["cpus"].is_u64());
    }
    for kind in ["throughput", "aborts"] {
        let fig = dir.join(format!("{kind}.svg"));
        let o =
            ordo(&["plot", results.to_str().unwrap(), "-o", fig.to_str().unwrap(), "--kind", kind]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(std::fs::metadata(&fig).unwrap().len() > 1000);
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn tpcc_refuses_bad_scale_and_reports_new_orders() {
    refused(&["bench", "tpcc", "--warehouses", "0"], "warehouses = 0 is out of range");
    refused(&["bench", "tpcc", "--items", "0"], "items = 0 is out of range");
    refused(&["bench", "tpcc", "--mix", "bogus"], "invalid value 'bogus'");
    let o = ordo(&[
        "bench",
        "tpcc",
        "--mix",
        "full",
        "--warehouses",
        "2",
        "--items",
        "200",
        "--customers",
        "30",
        "--threads",
        "1,2",
        "--duration",
        "50ms",
        "--repetitions",
        "1",
        "--clock",
        "logical,system",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.lines().count(), 2 * 2, "threads x clocks");
    for line in out.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["workload"], "tpcc");
        assert_eq!(v["variant"], "full 2w");
        assert!(v["result"]["committed"].as_u64().unwrap() > 0);
        let metrics = v["result"]["metrics"].as_array().unwrap();
        assert!(metrics.iter().any(|m| m[0] == "new_orders_per_s" && m[1].as_f64().unwrap() > 0.0));
    }
}

#[test]
fn hashtable_refuses_bad_input_and_runs_both_implementations() {
    refused(&["bench", "hashtable", "--buckets", "0"], "buckets = 0 is out of range");
    refused(&["bench", "hashtable", "--nodes-per-bucket", "0"], "nodes-per-bucket = 0");
    refused(&["bench", "hashtable", "--update-percent", "101"], "update-percent = 101");
    refused(&["bench", "hashtable", "--threads", "0"], "thread counts must be at least 1");
    refused(&["bench", "hashtable", "--impl", "bogus"], "invalid value 'bogus'");
    let o = ordo(&[
        "bench",
        "hashtable",
        "--buckets",
        "4",
        "--nodes-per-bucket",
        "5",
        "--threads",
        "1",
        "--duration-ms",
        "20",
        "--repetitions",
        "1",
        "--clock",
        "logical",
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for row in ["hashtable rlu 2%", "hashtable txn 2%", "hashtable rlu 40%", "hashtable txn 40%"] {
        assert!(out.contains(row), "summary lacks {row:?}: {out}");
    }
}

#[test]
fn hashtable_rlu_deferral_runs_and_refuses_zero() {
    refused(&["bench", "hashtable", "--rlu-defer", "0"], "invalid value '0'");
    let o = ordo(&[
        "bench",
        "hashtable",
        "--impl",
        "rlu",
        "--rlu-defer",
        "4",
        "--buckets",
        "4",
        "--nodes-per-bucket",
        "5",
        "--threads",
        "1,2",
        "--duration-ms",
        "20",
        "--repetitions",
        "1",
        "--clock",
        "logical",
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for row in ["hashtable rlu defer 4 2%", "hashtable rlu defer 4 40%"] {
        assert!(out.contains(row), "summary lacks {row:?}: {out}");
    }
}
