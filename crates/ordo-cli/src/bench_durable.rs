//! `ordo bench durable`: committed tx/s and commit latency per durability mode (none, process,
//! sync) and thread count on SPHT's synthetic mixes and YCSB-A, the group-commit factor
//! (commits per `fdatasync`), recovery speed, and a raw `pwrite + fdatasync` loop measured in
//! the same run, so sync mode is quoted as a ratio of what the device allows.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use ordo::durable::Mode;
use ordo::{Isolation, Versions};
use ordo_bench::driver::Spread;
use ordo_bench::durable::{self as bench, Workload};
use ordo_bench::synthetic::{MIXES, Pool, SyntheticConfig};
use ordo_bench::ycsb::YcsbConfig;
use ordo_clock::LogicalClock;

use crate::bench::{CommonBenchArgs, progress_bar};
use crate::error::CliError;

/// `ordo bench durable` flags.
#[derive(Args, Debug)]
pub(crate) struct DurableArgs {
    #[command(flatten)]
    pub(crate) common: CommonBenchArgs,
    /// Workloads, comma-separated: a synthetic mix (5r5w, 45r5w, 9r1w, 5r45w) or ycsb-a.
    #[arg(long, value_delimiter = ',', default_values_t = vec!["5r5w".to_owned(), "ycsb-a".to_owned()])]
    workloads: Vec<String>,
    /// Durability modes, comma-separated: none, process, sync; `process+flush` adds SPHT
    /// Alg. 5's flush after commit, so one run compares both (sync mode has no such variant:
    /// its records reach the file with their group-commit round).
    #[arg(long, value_delimiter = ',', default_values_t = vec!["none".to_owned(), "process".to_owned(), "sync".to_owned()])]
    modes: Vec<String>,
    /// Objects per private pool (synthetic) or rows (YCSB).
    #[arg(long, default_value_t = 16_384)]
    objects: usize,
    /// Start writeback of each record after commit (SPHT Alg. 5) in process mode.
    #[arg(long)]
    flush_after_commit: bool,
    /// Leader/follower batching in sync mode: microseconds a round's leader may wait for the
    /// committers the previous round released (at most half the last flush); 0 = off
    /// [default: the database's, 250].
    #[arg(long)]
    group_wait_us: Option<u64>,
    /// Parent directory of the benchmark databases (on the device to measure).
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
    /// Measurements per cell, interleaved across modes.
    #[arg(long, default_value_t = 3)]
    repetitions: usize,
}

/// A measured configuration: the durability mode and whether records are flushed after commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ModeArg {
    mode: Option<Mode>,
    flush_after_commit: bool,
}

impl ModeArg {
    fn name(self) -> &'static str {
        match (self.mode, self.flush_after_commit) {
            (None, _) => "none",
            (Some(Mode::Process), false) => "process",
            (Some(Mode::Process), true) => "process+flush",
            (Some(Mode::Sync), false) => "sync",
            (Some(Mode::Sync), true) => "sync (flush after commit ignored)",
        }
    }
}

fn parse_mode(s: &str, flush_all: bool) -> Result<ModeArg, CliError> {
    let (mode, flush) = match s {
        "none" => (None, false),
        "process" => (Some(Mode::Process), false),
        "sync" => (Some(Mode::Sync), false),
        "process+flush" => (Some(Mode::Process), true),
        "sync+flush" => {
            return Err(CliError::Usage(
                "sync+flush: in sync mode a record reaches the file with its group-commit \
                 round, so there is nothing to flush after commit; use process+flush"
                    .into(),
            ));
        }
        _ => {
            return Err(CliError::Usage(format!(
                "unknown durability {s:?}; expected none, process, sync or process+flush"
            )));
        }
    };
    let flush_after_commit = mode == Some(Mode::Process) && (flush || flush_all);
    Ok(ModeArg { mode, flush_after_commit })
}

fn workload(
    name: &str,
    threads: usize,
    objects: usize,
    duration: Duration,
) -> Result<Workload, CliError> {
    if name == "ycsb-a" {
        return Ok(Workload::Ycsb(YcsbConfig {
            rows: objects as u64,
            value_bytes: 100,
            requests: 16,
            read_ratio: 0.5,
            theta: 0.6,
            threads,
            duration,
            isolation: Isolation::StrictSerializable,
            versions: Versions::Single,
            seed: 42,
            ..YcsbConfig::default()
        }));
    }
    let (_, reads, writes) = *MIXES.iter().find(|m| m.0 == name).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown workload {name:?}; expected 5r5w, 45r5w, 9r1w, 5r45w or ycsb-a"
        ))
    })?;
    Ok(Workload::Synthetic(SyntheticConfig {
        reads,
        writes,
        pool: Pool::Private,
        pool_objects: objects,
        threads,
        duration,
        isolation: Isolation::StrictSerializable,
        versions: Versions::Single,
    }))
}

fn io_err(e: ordo_bench::error::BenchError) -> CliError {
    CliError::Bench(e)
}

pub(crate) fn run_durable(args: &DurableArgs) -> Result<(), CliError> {
    let common = &args.common;
    if args.repetitions == 0 {
        return Err(CliError::Usage("--repetitions must be at least 1".into()));
    }
    let modes = args
        .modes
        .iter()
        .map(|m| parse_mode(m, args.flush_after_commit))
        .collect::<Result<Vec<_>, _>>()?;
    let thread_counts = common.thread_counts()?;
    let duration = common.duration().unwrap_or(Duration::from_millis(1000));
    let root = bench::fresh_dir(&args.dir, "durable").map_err(io_err)?;

    // The raw device bound, measured in this run (interleaved before and after).
    let raw_a = bench::raw_fsync_rate(&root, 128, duration).map_err(io_err)?;
    println!(
        "durable: {} ms per run, {} repetitions, logical clock; tx/s median [min-max], p50/p99 commit latency in us",
        duration.as_millis(),
        args.repetitions
    );
    println!("raw pwrite(128 B)+fdatasync: {raw_a:.0} ops/s");
    let bar =
        progress_bar(args.workloads.len() * thread_counts.len() * modes.len() * args.repetitions);
    let mut recovery_dir = None;
    for name in &args.workloads {
        for &threads in &thread_counts {
            let w = workload(name, threads, args.objects, duration)?;
            let mut runs: Vec<Vec<bench::DurableRun>> = vec![Vec::new(); modes.len()];
            // The device's rate drifts (other tenants): the raw loop runs right before every
            // sync run of the cell and the ratio is taken between the two medians.
            let mut raw_runs = Vec::new();
            for rep in 0..args.repetitions {
                for (i, arg) in modes.iter().enumerate() {
                    let mode = &arg.mode;
                    if *mode == Some(Mode::Sync) {
                        let raw =
                            bench::raw_fsync_rate(&root, 128, duration / 2).map_err(io_err)?;
                        raw_runs.push(raw);
                    }
                    let dir = root.join(format!("{name}-{threads}-{i}-{rep}"));
                    let _ = std::fs::remove_dir_all(&dir);
                    let r = bench::run(
                        LogicalClock::new(),
                        &w,
                        &dir,
                        *mode,
                        bench::Knobs {
                            flush_after_commit: arg.flush_after_commit,
                            group_wait_us: args.group_wait_us,
                        },
                    )
                    .map_err(io_err)?;
                    if common.json {
                        println!(
                            "{}",
                            serde_json::json!({
                                "workload": "durable", "mix": name, "threads": threads,
                                "result": &r, "raw_fdatasync_per_s": raw_a,
                                "flush_after_commit": arg.flush_after_commit,
                                "group_wait_us": args.group_wait_us,
                                "git_revision": ordo_bench::report::git_revision(),
                                "machine": ordo_bench::report::Machine::read(),
                            })
                        );
                    }
                    if *mode == Some(Mode::Process) && recovery_dir.is_none() {
                        recovery_dir = Some(dir.clone());
                    } else {
                        let _ = std::fs::remove_dir_all(&dir);
                    }
                    runs[i].push(r);
                    bar.inc(1);
                }
            }
            for (i, arg) in modes.iter().enumerate() {
                let mode = &arg.mode;
                let tx: Vec<f64> = runs[i].iter().map(|r| r.stats.tx_per_s).collect();
                let s = Spread::of(&tx);
                let mid = &runs[i][runs[i].len() / 2];
                let group = if *mode == Some(Mode::Sync) {
                    let f: Vec<f64> = runs[i].iter().map(|r| r.commits_per_fsync).collect();
                    let raw = Spread::of(&raw_runs);
                    format!(
                        "  {:.2} commits/fdatasync  raw {:.0} [{:.0}-{:.0}]/s  sync/raw {:.2}",
                        Spread::of(&f).median,
                        raw.median,
                        raw.min,
                        raw.max,
                        s.median / raw.median.max(1e-9)
                    )
                } else {
                    String::new()
                };
                bar.suspend(|| {
                    println!(
                        "{name:>6} {threads:>2} threads {:>13}: {:>9.0} [{:.0}-{:.0}] tx/s  p50 {:.1} p99 {:.1} us  {:.0} B/commit{group}",
                        arg.name(),
                        s.median,
                        s.min,
                        s.max,
                        mid.stats.latency.p50_ns as f64 / 1e3,
                        mid.stats.latency.p99_ns as f64 / 1e3,
                        mid.log_bytes_per_commit,
                    )
                });
            }
        }
    }
    bar.finish_and_clear();
    let raw_b = bench::raw_fsync_rate(&root, 128, duration).map_err(io_err)?;
    println!("raw pwrite(128 B)+fdatasync again: {raw_b:.0} ops/s");
    if let Some(dir) = recovery_dir {
        let r = bench::recovery_speed(&dir, Mode::Process, LogicalClock::starting_at)
            .map_err(io_err)?;
        println!(
            "recovery of {} records / {:.1} MB of log: scan {:.0} MB/s; open (scan+replay+sync) {:.0} MB/s, {:.0} records/s",
            r.records,
            r.log_bytes as f64 / 1e6,
            r.scan_mb_per_s,
            r.recover_mb_per_s,
            r.records_per_s
        );
        if common.json {
            println!("{}", serde_json::json!({ "workload": "durable-recovery", "result": &r }));
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}
