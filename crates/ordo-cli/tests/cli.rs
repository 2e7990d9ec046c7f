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
