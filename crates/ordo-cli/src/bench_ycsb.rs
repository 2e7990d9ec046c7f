//! `ordo bench ycsb`: YCSB on the embedded engine, every clock side by side (ORDO Fig. 13).
//!
//! Tables are loaded once per clock; runs are interleaved clock by clock (A B A B …) and repeated,
//! and the summary quotes medians with min–max and the ordo/logical ratio per thread count.
//! With `--cluster N` the table is loaded once on a loopback cluster and run through a cluster
//! client instead (`crate::bench_cluster`).

use std::time::Duration;

use clap::{Args, ValueEnum};
use ordo_bench::engine::{self, Durability};
use ordo_bench::harness::Plan;
use ordo_bench::ycsb::{self, Operations, YcsbConfig};
use ordo_clock::AnyClock;

use crate::bench::{
    CommonBenchArgs, EngineArgs, LOGICAL_AND_ORDO, Loading, MeasureArgs, Runs, measure_plan,
};
use crate::bench_cluster::{ClusterArgs, LOAD_THREADS, cluster_plan, measure_on_cluster};
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
    /// The name `--mix` spells.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mix::Ro2 => "ro2",
            Mix::A => "a",
            Mix::B => "b",
            Mix::C => "c",
            Mix::F => "f",
            Mix::Dbx => "dbx",
            Mix::D => "d",
            Mix::E => "e",
        }
    }

    /// (requests, read ratio, theta)
    pub(crate) fn preset(self) -> (usize, f64, f64) {
        match self {
            Mix::Ro2 | Mix::C => (2, 1.0, 0.0),
            Mix::A | Mix::F => (2, 0.5, 0.0),
            Mix::B => (2, 0.95, 0.0),
            Mix::Dbx => (16, 0.9, 0.6),
            // YCSB's zipfian constant is 0.99; its transactions are one operation each.
            Mix::D | Mix::E => (1, 0.95, 0.99),
        }
    }

    /// What the requests do: D and E insert and so run over the B+tree.
    pub(crate) fn operations(self) -> Operations {
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
    #[command(flatten)]
    pub(crate) measure: MeasureArgs,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
    #[command(flatten)]
    pub(crate) cluster: ClusterArgs,
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
    /// The longest scan of --mix e; scan lengths are uniform in 1..=N.
    #[arg(long, value_name = "N", default_value_t = 100)]
    scan_length_max: usize,
}

/// The YCSB configuration of `mix` with the engine flags, for `threads` threads at most.
pub(crate) fn config(
    mix: Mix,
    rows: u64,
    value_bytes: usize,
    engine: &EngineArgs,
    threads_max: usize,
) -> YcsbConfig {
    let (requests, read_ratio, theta) = mix.preset();
    YcsbConfig {
        rows,
        value_bytes,
        requests,
        read_ratio,
        theta,
        threads: threads_max,
        duration: Duration::from_secs(2),
        isolation: engine.isolation,
        versions: engine.versions,
        seed: engine.seed,
        operations: mix.operations(),
        scan_length_max: 100,
    }
}

/// The harness plan of a YCSB configuration; `variant` names the mix.
pub(crate) fn plan(variant: &str, cfg: &YcsbConfig, runs: &Runs<'_>) -> Result<Plan, CliError> {
    for &t in &runs.thread_counts {
        YcsbConfig { threads: t, ..cfg.clone() }.validate()?;
    }
    runs.plan("ycsb", variant.into(), cfg, cfg.duration)
}

/// Loads the YCSB table of `cfg` on one clock, durable as `durability` says.
pub(crate) fn load(cfg: YcsbConfig, durability: &Durability) -> impl Fn(AnyClock) -> Loading + '_ {
    move |clock| engine::load(durability, "ycsb", |base| ycsb::load_with(clock, &cfg, 2, base))
}

pub(crate) fn run_ycsb(args: &YcsbArgs) -> Result<(), CliError> {
    let common = &args.common;
    let thread_counts = common.thread_counts()?;
    let threads_max = thread_counts.iter().copied().max().unwrap_or(1);
    let mut cfg = config(args.mix, args.rows, args.value_bytes, &args.engine, threads_max);
    cfg.requests = args.requests.unwrap_or(cfg.requests);
    cfg.read_ratio = args.read_ratio.unwrap_or(cfg.read_ratio);
    cfg.theta = args.theta.unwrap_or(cfg.theta);
    cfg.scan_length_max = args.scan_length_max;
    cfg.duration = common.duration().unwrap_or(cfg.duration);
    let durability = args.engine.durability.durability()?;
    let runs =
        Runs { thread_counts, repetitions: args.measure.repetitions, durability: &durability };
    let plan = plan(args.mix.name(), &cfg, &runs)?;
    if let Some(target) = args.cluster.target(common, &durability)? {
        // Each row is one object with a 16-byte header.
        let data_bytes = cfg.rows.saturating_mul(cfg.value_bytes as u64 + 16);
        let engine = ordo::Config { versions: cfg.versions, ..ordo::Config::default() };
        let options = target.options(data_bytes, engine);
        let plan = cluster_plan(plan, target.nodes());
        measure_on_cluster(common, &args.measure, &plan, &options, |db| {
            ycsb::load_on(db, &cfg, LOAD_THREADS)
        })?;
        return Ok(());
    }
    measure_plan(common, &args.measure, &plan, &LOGICAL_AND_ORDO, &load(cfg, &durability))?;
    Ok(())
}
