//! `ordo bench ycsb`: YCSB on the embedded engine, every clock side by side (ORDO Fig. 13).
//!
//! Tables are loaded once per clock; runs are interleaved clock by clock (A B A B …) and repeated,
//! and the summary quotes medians with min–max and the ordo/logical ratio per thread count.

use std::time::Duration;

use clap::{Args, ValueEnum};
use ordo::{Isolation, Versions};
use ordo_bench::driver::{RunStats, Spread};
use ordo_bench::ycsb::{self, Operations, YcsbConfig};
use ordo_clock::{ClockChoice, ClockKind};

use crate::bench::{CommonBenchArgs, open_clocks, progress_bar};
use crate::error::CliError;

/// Request mixes.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mix {
    /// Read-only transactions of 2 reads (ORDO Fig. 13).
    Ro2,
    /// YCSB A: 50% reads, 50% updates.
    A,
    /// YCSB B: 95% reads.
    B,
    /// YCSB C: read only.
    C,
    /// YCSB F: 50% read-modify-writes (every update here is one).
    F,
    /// DBx1000's default: 16 requests, 90% reads, Zipf 0.6.
    Dbx,
    /// YCSB D over the B+tree: 95% reads of the latest inserts (Zipf 0.99 over recency), 5%
    /// inserts; one request per transaction.
    D,
    /// YCSB E over the B+tree: 95% scans of 1..=--scan-length-max rows from a Zipf-0.99 start
    /// key, 5% inserts; one request per transaction.
    E,
}

impl Mix {
    /// (requests, read ratio, theta)
    fn preset(self) -> (usize, f64, f64) {
        match self {
            Mix::Ro2 | Mix::C => (2, 1.0, 0.0),
            Mix::A | Mix::F => (2, 0.5, 0.0),
            Mix::B => (2, 0.95, 0.0),
            Mix::Dbx => (16, 0.9, 0.6),
            // YCSB's zipfian constant is 0.99; its transactions are one operation each.
            Mix::D | Mix::E => (1, 0.95, 0.99),
        }
    }

    fn operations(self) -> Operations {
        match self {
            Mix::D => Operations::ReadInsertLatest,
            Mix::E => Operations::ScanInsert,
            _ => Operations::ReadUpdate,
        }
    }
}

/// `ordo bench ycsb` flags.
#[derive(Args, Debug)]
pub(crate) struct YcsbArgs {
    #[command(flatten)]
    pub(crate) common: CommonBenchArgs,
    /// The request mix; the flags below override its parts.
    #[arg(long, value_enum, default_value_t = Mix::Ro2)]
    mix: Mix,
    /// Rows in the table.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Bytes per row.
    #[arg(long, default_value_t = 1000)]
    value_bytes: usize,
    /// Requests per transaction [default: from --mix].
    #[arg(long)]
    requests: Option<usize>,
    /// Fraction of requests that read, 0..=1 [default: from --mix].
    #[arg(long)]
    read_ratio: Option<f64>,
    /// Zipf skew in [0, 1) [default: from --mix].
    #[arg(long)]
    theta: Option<f64>,
    /// Isolation: strict-serializable, serializable, strict-si, si.
    #[arg(long, default_value = "strict-serializable")]
    isolation: String,
    /// Versions: single or multi.
    #[arg(long, default_value = "single")]
    versions: String,
    /// Measurements per (threads, clock) cell, interleaved across clocks.
    #[arg(long, default_value_t = 3)]
    repetitions: usize,
    /// Seed of the key choosers.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The longest scan of --mix e; lengths are uniform in 1..=N.
    #[arg(long, value_name = "N", default_value_t = 100)]
    scan_length_max: usize,
}

/// One measured cell.
#[derive(serde::Serialize)]
struct Line<'a> {
    workload: &'static str,
    config: &'a YcsbConfig,
    clock: ordo_clock::ClockDescription,
    repetition: usize,
    result: &'a RunStats,
    git_revision: &'a str,
    machine: &'a ordo_bench::report::Machine,
}

pub(crate) fn run_ycsb(args: &YcsbArgs) -> Result<(), CliError> {
    let common = &args.common;
    let (requests, read_ratio, theta) = args.mix.preset();
    let isolation: Isolation =
        args.isolation.parse().map_err(|e: ordo::Error| CliError::Usage(e.to_string()))?;
    let versions: Versions =
        args.versions.parse().map_err(|e: ordo::Error| CliError::Usage(e.to_string()))?;
    if args.repetitions == 0 {
        return Err(CliError::Usage("--repetitions must be at least 1".into()));
    }
    let thread_counts = common.thread_counts()?;
    let base = YcsbConfig {
        rows: args.rows,
        value_bytes: args.value_bytes,
        requests: args.requests.unwrap_or(requests),
        read_ratio: args.read_ratio.unwrap_or(read_ratio),
        theta: args.theta.unwrap_or(theta),
        threads: thread_counts.iter().copied().max().unwrap_or(1),
        duration: common.duration().unwrap_or(Duration::from_secs(2)),
        isolation,
        versions,
        seed: args.seed,
        operations: args.mix.operations(),
        scan_length_max: args.scan_length_max,
    };
    for &t in &thread_counts {
        YcsbConfig { threads: t, ..base.clone() }.validate()?;
    }
    let clocks = open_clocks(common, &[ClockChoice::Logical, ClockChoice::Ordo])?;
    let machine = ordo_bench::report::Machine::read();
    let revision = ordo_bench::report::git_revision();
    eprintln!(
        "loading {} rows of {} bytes per clock{} ...",
        base.rows,
        base.value_bytes,
        if base.operations == Operations::ReadUpdate { "" } else { " into a B+tree" }
    );
    let mut tables = Vec::new();
    for clock in clocks {
        let description = clock.describe();
        let table = ycsb::load(clock, &base, 2)?;
        tables.push((description, table));
    }
    let bar = progress_bar(thread_counts.len() * args.repetitions * tables.len());
    let mut results: Vec<(usize, ClockKind, Vec<RunStats>)> = Vec::new();
    for &threads in &thread_counts {
        let cfg = YcsbConfig { threads, ..base.clone() };
        for (d, _) in &tables {
            results.push((threads, d.kind, Vec::new()));
        }
        for rep in 0..args.repetitions {
            for (d, table) in &tables {
                bar.set_message(format!(
                    "{} threads, {} clock, run {}",
                    threads,
                    d.kind.name(),
                    rep + 1
                ));
                let r = ycsb::run(table, &cfg);
                if common.json {
                    let line = Line {
                        workload: "ycsb",
                        config: &cfg,
                        clock: d.clone(),
                        repetition: rep,
                        result: &r,
                        git_revision: &revision,
                        machine: &machine,
                    };
                    println!("{}", serde_json::to_string(&line)?);
                }
                if let Some(slot) =
                    results.iter_mut().find(|(t, k, _)| *t == threads && *k == d.kind)
                {
                    slot.2.push(r);
                }
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    if base.operations != Operations::ReadUpdate {
        // D and E check every committed read and scan during the runs; this reports the
        // violations (if any) and verifies every insert landed.
        eprintln!("checking the trees ...");
        for (_, table) in &tables {
            ycsb::check(table, 0)?;
        }
    }
    if !common.json {
        print_summary(&base, &tables.iter().map(|(d, _)| d.clone()).collect::<Vec<_>>(), &results);
    }
    Ok(())
}

fn print_summary(
    cfg: &YcsbConfig,
    clocks: &[ordo_clock::ClockDescription],
    results: &[(usize, ClockKind, Vec<RunStats>)],
) {
    println!(
        "YCSB{}: {} rows x {} B, {} requests/tx, read ratio {}, theta {}, {}, {:?} versions, {} ms per run",
        match cfg.operations {
            Operations::ReadUpdate => String::new(),
            Operations::ReadInsertLatest => " D (reads of the latest, inserts)".to_owned(),
            Operations::ScanInsert =>
                format!(" E (scans of 1..={} rows, inserts)", cfg.scan_length_max),
        },
        cfg.rows,
        cfg.value_bytes,
        cfg.requests,
        cfg.read_ratio,
        cfg.theta,
        cfg.isolation.name(),
        cfg.versions,
        cfg.duration.as_millis()
    );
    for c in clocks {
        println!("  clock: {c}");
    }
    println!(
        "{:>7} {:>8} {:>14} {:>23} {:>8} {:>9} {:>9} {:>9} {:>10}",
        "threads",
        "clock",
        "tx/s (median)",
        "min - max",
        "aborts",
        "p50 ns",
        "p99 ns",
        "p999 ns",
        "wait ns/c"
    );
    for (threads, kind, runs) in results {
        let tps: Vec<f64> = runs.iter().map(|r| r.tx_per_s).collect();
        let s = Spread::of(&tps);
        let mid = runs
            .iter()
            .min_by(|a, b| (a.tx_per_s - s.median).abs().total_cmp(&(b.tx_per_s - s.median).abs()));
        let Some(m) = mid else { continue };
        println!(
            "{:>7} {:>8} {:>14.0} {:>11.0} - {:<9.0} {:>7.2}% {:>9} {:>9} {:>9} {:>10.0}",
            threads,
            kind.name(),
            s.median,
            s.min,
            s.max,
            m.abort_rate * 100.0,
            m.latency.p50_ns,
            m.latency.p99_ns,
            m.latency.p999_ns,
            m.write_wait_ns_per_commit
        );
    }
    // Ratio ordo / logical per thread count.
    let median = |t: usize, k: ClockKind| {
        results.iter().find(|(th, kk, _)| *th == t && *kk == k).map(|(_, _, runs)| {
            Spread::of(&runs.iter().map(|r| r.tx_per_s).collect::<Vec<_>>()).median
        })
    };
    let mut threads: Vec<usize> = results.iter().map(|(t, _, _)| *t).collect();
    threads.dedup();
    for t in threads {
        if let (Some(o), Some(l)) = (median(t, ClockKind::Ordo), median(t, ClockKind::Logical)) {
            println!("ratio ordo/logical at {t} threads: {:.2}", o / l.max(1e-9));
        }
    }
}
