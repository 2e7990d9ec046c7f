//! `ordo bench <workload>`: one subcommand per workload, with the common flags of DESIGN §7.
//!
//! Every workload takes [`CommonBenchArgs`] (`--threads`, `--duration-ms`, `--json`, `--clock`,
//! and the calibration cache flags) plus its own; those on the engine take [`EngineArgs`]
//! (`--isolation`, `--versions`, `--seed`, and [`DurabilityArgs`]: `--durability`,
//! `--durability-dir`, `--huge-pages`, which open every database through
//! `ordo_bench::engine`). Workloads add a variant to [`BenchCommand`] and a function next to
//! [`run_clock`]; the measurement logic lives in `ordo-bench`, the CLI only builds clocks, shows
//! progress and prints.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ordo::{Isolation, Versions};
use ordo_bench::clock::{self as clock_bench, ClockBenchConfig};
use ordo_bench::engine::Durability;
use ordo_bench::error::BenchError;
use ordo_bench::harness::{self, Instance, Loaded, Plan, Record};
use ordo_clock::calibrate::DEFAULT_RUNS;
use ordo_clock::cores::{parse_core_list, usable_cores};
use ordo_clock::{AnyClock, CalibrateOptions, Clock, ClockChoice, ClockKind};

use crate::clock_setup::{CacheArgs, warn};
use crate::error::CliError;

/// `ordo bench` flags: the workload to run.
#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    workload: BenchCommand,
}

/// The benchmark workloads.
#[derive(Subcommand, Debug)]
pub(crate) enum BenchCommand {
    /// Timestamp cost and new-timestamp rate per clock vs. thread count (ORDO Fig. 8).
    Clock(ClockArgs),
    /// YCSB on the embedded engine, logical vs ORDO clock (ORDO Fig. 13).
    Ycsb(crate::bench_ycsb::YcsbArgs),
    /// Long scans against single-row updates, single- vs multi-version (FaRMv2 Fig. 15).
    ScanUpdate(crate::bench_scan::ScanArgs),
    /// SPHT's synthetic read/write mixes over private or shared pools.
    Synthetic(crate::bench_synthetic::SyntheticArgs),
    /// TPC-C on the embedded engine: NewOrder+Payment or the full mix (ORDO Fig. 14, FaRMv2 §5.1).
    Tpcc(crate::bench_tpcc::TpccArgs),
    /// Hash table of sorted lists, RLU vs transactions, 2% and 40% updates (ORDO Fig. 11).
    Hashtable(crate::bench_hashtable::HashtableArgs),
    /// The Oplog reverse map: per-thread logs merged at reads, logical vs ORDO (ORDO §6.3).
    Oplog(crate::bench_oplog::OplogArgs),
    /// The papers' figures at a small scale in a few minutes, one summary, results for `ordo plot`.
    Suite(crate::bench_suite::SuiteArgs),
    /// STAMP kernels: speedup over sequential, logical vs ORDO clock (ORDO Fig. 15).
    Stamp(crate::bench_stamp::StampArgs),
    /// Durable commit rate, latency and group commit per durability mode; recovery speed.
    Durable(crate::bench_durable::DurableArgs),
    /// Recovery speed of one large generated log: scan and full open, MB/s and records/s.
    Recovery(crate::bench_recovery::RecoveryArgs),
    /// Synchronised-clock uncertainty and get_ts wait vs sync rate and node count (FaRMv2 Fig. 16/17).
    ClusterClock(crate::bench_cluster_clock::ClusterClockArgs),
    /// The same optimistic transaction on an Ordo cluster and a 3-member etcd cluster (Cluster II).
    EtcdCompare(crate::bench_etcd_compare::EtcdCompareArgs),
    /// kill -9 of a non-CM, the CM, or the CM and one more under load: clock-disabled and
    /// recovery times, checks, throughput timeline (FaRMv2 Table 1, Fig. 18).
    Failover(crate::bench_failover::FailoverArgs),
}

/// Flags every workload takes.
#[derive(Args, Debug, Clone)]
pub(crate) struct CommonBenchArgs {
    /// Thread counts to run: `4`, a list `1,2,4` or a range `1-8`.
    #[arg(long, value_name = "LIST", value_parser = parse_threads)]
    threads: Option<ThreadCounts>,
    /// Length of one measurement: `500ms`, `2s`, `1m`, or a number of milliseconds.
    #[arg(long = "duration", visible_alias = "duration-ms", value_name = "TIME", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Print JSON lines on stdout instead of tables.
    #[arg(long)]
    pub(crate) json: bool,
    /// Clock(s) to use, comma-separated: logical, ordo, system [default: per workload].
    #[arg(long, value_name = "CLOCK", value_delimiter = ',')]
    clock: Vec<ClockChoice>,
    /// Ping-pong rounds per core pair when the ORDO clock must be calibrated.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_RUNS)]
    calibration_runs: u64,
    #[command(flatten)]
    cache: CacheArgs,
}

impl CommonBenchArgs {
    /// The thread counts of `--threads` [default: 1 and every count up to the usable cores].
    pub(crate) fn thread_counts(&self) -> Result<Vec<usize>, CliError> {
        match &self.threads {
            Some(list) => Ok(list.0.clone()),
            None => Ok((1..=usable_cores()?.len().max(1)).collect()),
        }
    }

    /// `--duration-ms`, if given.
    pub(crate) fn duration(&self) -> Option<Duration> {
        self.duration
    }

    /// Whether `--clock` was given.
    pub(crate) fn clock_given(&self) -> bool {
        !self.clock.is_empty()
    }
}

/// Flags of the workloads measured through [`harness`].
#[derive(Args, Debug, Clone)]
pub(crate) struct MeasureArgs {
    /// Runs per (threads, clock) cell, interleaved across clocks.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub(crate) repetitions: usize,
    /// Also append every run as a JSON line to FILE (input of `ordo plot`).
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
}

/// Engine flags of the workloads that run transactions.
#[derive(Args, Debug, Clone)]
pub(crate) struct EngineArgs {
    /// Isolation: strict-serializable, serializable, strict-si, si.
    #[arg(long, value_name = "MODE", default_value = "strict-serializable", value_parser = parse_isolation)]
    pub(crate) isolation: Isolation,
    /// Versions: single or multi.
    #[arg(long, value_name = "MODE", default_value = "single", value_parser = parse_versions)]
    pub(crate) versions: Versions,
    /// Seed of the workload's random choices.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    #[command(flatten)]
    pub(crate) durability: DurabilityArgs,
}

/// Durability and heap-memory flags of every workload on the engine (part of [`EngineArgs`];
/// flattened on their own into the engine workloads that take no isolation or versions flags).
#[derive(Args, Debug, Clone)]
pub(crate) struct DurabilityArgs {
    /// Durability of the benchmark database: none (in memory), process (every commit's redo
    /// record reaches the OS, surviving a process crash) or sync (group fdatasync: surviving
    /// power loss).
    #[arg(long, value_enum, value_name = "MODE", default_value_t = DurabilityArg::None)]
    durability: DurabilityArg,
    /// Existing directory in which every loaded database gets a fresh subdirectory, removed
    /// afterwards [default: the system temporary directory, $TMPDIR or /tmp].
    #[arg(long, value_name = "DIR")]
    durability_dir: Option<PathBuf>,
    /// Whether the in-memory heap asks for transparent huge pages: on or off [default: the
    /// engine's, on]. They pay on large read-mostly heaps and cost on a VM when the heap grows
    /// fast (see `ordo::heap::HeapConfig::huge_pages`); durable heaps ignore this.
    #[arg(long, value_name = "ON|OFF", value_parser = parse_on_off)]
    huge_pages: Option<bool>,
}

/// `--durability` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum DurabilityArg {
    /// In memory.
    None,
    /// Redo records reach the OS page cache (SPHT-eADR).
    Process,
    /// Group fdatasync and the durable marker (SPHT).
    Sync,
}

impl DurabilityArgs {
    /// The durability of the flags, its base directory checked (it must exist and take a new
    /// directory) so a bad `--durability-dir` fails before anything is calibrated or loaded.
    pub(crate) fn durability(&self) -> Result<Durability, CliError> {
        let mode = match self.durability {
            DurabilityArg::None => None,
            DurabilityArg::Process => Some(ordo::durable::Mode::Process),
            DurabilityArg::Sync => Some(ordo::durable::Mode::Sync),
        };
        if mode.is_none() && self.durability_dir.is_some() {
            return Err(CliError::Usage(
                "--durability-dir needs --durability process or sync".into(),
            ));
        }
        let durability =
            Durability { mode, base_dir: self.durability_dir.clone(), huge_pages: self.huge_pages };
        durability.check()?;
        Ok(durability)
    }
}

fn parse_on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("expected on or off, not {text:?}")),
    }
}

fn parse_isolation(text: &str) -> Result<Isolation, String> {
    text.parse().map_err(|e: ordo::Error| e.to_string())
}

fn parse_versions(text: &str) -> Result<Versions, String> {
    text.parse().map_err(|e: ordo::Error| e.to_string())
}

/// `plan` run with `durability`: recorded in its JSON configuration (`durability`,
/// `durability_dir`) and, when durable, appended to its variant (`a` becomes `a sync`) so that
/// durable and in-memory runs are separate lines of a summary or a plot.
pub(crate) fn with_durability(mut plan: Plan, durability: &Durability) -> Plan {
    durability.record_in(&mut plan.config);
    if durability.mode.is_some() {
        plan.variant = format!("{} {}", plan.variant, durability.name());
    }
    plan
}

/// What every plan of one `ordo bench` invocation shares: its thread counts, repetitions and
/// durability. A workload names only what differs ([`Runs::plan`]).
#[derive(Clone, Debug)]
pub(crate) struct Runs<'a> {
    /// `--threads`.
    pub(crate) thread_counts: Vec<usize>,
    /// `--repetitions`.
    pub(crate) repetitions: usize,
    /// `--durability` and `--durability-dir`.
    pub(crate) durability: &'a Durability,
}

impl Runs<'_> {
    /// The plan of `workload`'s `variant` with configuration `config` (recorded in every JSON
    /// line) and runs of `duration`, made durable as [`with_durability`] says.
    pub(crate) fn plan(
        &self,
        workload: &str,
        variant: String,
        config: &impl serde::Serialize,
        duration: Duration,
    ) -> Result<Plan, CliError> {
        let plan = Plan {
            workload: workload.into(),
            variant,
            config: serde_json::to_value(config)?,
            thread_counts: self.thread_counts.clone(),
            duration,
            repetitions: self.repetitions,
        };
        Ok(with_durability(plan, self.durability))
    }
}

/// The clocks the engine workloads compare unless `--clock` says otherwise.
pub(crate) const LOGICAL_AND_ORDO: [ClockChoice; 2] = [ClockChoice::Logical, ClockChoice::Ordo];

/// Loads a workload on one clock.
pub(crate) type Loader<'a> = dyn Fn(AnyClock) -> Loading + 'a;

/// What a [`Loader`] returns.
pub(crate) type Loading = Result<Box<dyn Loaded>, BenchError>;

/// Opens the clocks of `--clock` (or `default_clocks`), loads the workload once per clock and
/// measures `plan` through the harness: progress on stderr, JSON lines on stdout with `--json`
/// (and appended to `--out`), else the summary table.
pub(crate) fn measure_plan(
    common: &CommonBenchArgs,
    measure: &MeasureArgs,
    plan: &Plan,
    default_clocks: &[ClockChoice],
    load: &Loader<'_>,
) -> Result<Vec<Record>, CliError> {
    measure_plans(common, measure, &[(plan.clone(), load)], default_clocks)
}

/// [`measure_plan`] for several plans, each with its loader, one after the other: all are
/// validated before the first is measured, each is loaded on freshly opened clocks, and one
/// summary covers them all.
pub(crate) fn measure_plans(
    common: &CommonBenchArgs,
    measure: &MeasureArgs,
    plans: &[(Plan, impl Fn(AnyClock) -> Loading)],
    default_clocks: &[ClockChoice],
) -> Result<Vec<Record>, CliError> {
    for (plan, _) in plans {
        plan.validate()?;
    }
    let mut records = Vec::new();
    for (plan, load) in plans {
        let clocks = open_clocks(common, default_clocks)?;
        records.extend(measure_on_clocks(common.json, measure.out.as_deref(), plan, clocks, load)?);
    }
    if !common.json {
        print!("{}", harness::summary(&records));
    }
    Ok(records)
}

/// [`measure_plan`] on clocks already opened; prints JSON lines but no summary.
pub(crate) fn measure_on_clocks(
    json: bool,
    out: Option<&Path>,
    plan: &Plan,
    clocks: Vec<AnyClock>,
    load: &Loader<'_>,
) -> Result<Vec<Record>, CliError> {
    plan.validate()?;
    let mut instances = Vec::with_capacity(clocks.len());
    for clock in clocks {
        let description = clock.describe();
        eprintln!(
            "loading {} {} on the {} clock ...",
            plan.workload,
            plan.variant,
            description.kind.name()
        );
        instances.push(Instance { clock: description, loaded: load(clock)? });
    }
    measure_instances(json, out, plan, &instances)
}

/// Measures `plan` on loaded `instances` through the harness: progress on stderr, JSON lines on
/// stdout with `json` (and appended to `out`); prints no summary.
pub(crate) fn measure_instances(
    json: bool,
    out: Option<&Path>,
    plan: &Plan,
    instances: &[Instance],
) -> Result<Vec<Record>, CliError> {
    plan.validate()?;
    let mut file = match out {
        Some(path) => Some((
            std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|source| {
                CliError::ResultsFile { path: path.to_owned(), action: "open", source }
            })?,
            path,
        )),
        None => None,
    };
    let total = plan.thread_counts.len() * plan.repetitions * instances.len();
    let bar = progress_bar(total);
    let mut write_error = None;
    let result = harness::measure(plan, instances, &mut |p| {
        bar.set_position(u64::try_from(p.done).unwrap_or(u64::MAX));
        let Some(record) = p.record else {
            bar.set_message(format!(
                "{} {}: {} threads, {} clock, run {}",
                plan.workload,
                plan.variant,
                p.threads,
                p.clock.name(),
                p.repetition + 1
            ));
            return;
        };
        let line = match serde_json::to_string(record) {
            Ok(line) => line,
            Err(e) => {
                write_error.get_or_insert(CliError::Json(e));
                return;
            }
        };
        if json {
            bar.suspend(|| println!("{line}"));
        }
        if let Some((f, path)) = &mut file
            && let Err(source) = writeln!(f, "{line}")
        {
            write_error.get_or_insert(CliError::ResultsFile {
                path: path.to_path_buf(),
                action: "append to",
                source,
            });
        }
    });
    bar.finish_and_clear();
    let records = result?;
    match write_error {
        Some(e) => Err(e),
        None => Ok(records),
    }
}

/// Parses `--duration`: a number with an optional unit `ms`, `s` or `m` (milliseconds when
/// bare). Zero is refused: a zero-length run measures nothing.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, unit_ms) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60e3)
    } else {
        (t, 1.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 500ms, 2s, 1m)"))?;
    let ms = value * unit_ms;
    if !ms.is_finite() || !(1.0..=86_400_000.0).contains(&ms) {
        return Err(format!("{text:?} is out of range: between 1 ms and 24 h"));
    }
    Ok(Duration::from_secs_f64(ms / 1e3))
}

/// A parsed `--threads` value (a newtype so clap treats it as one value).
#[derive(Clone, Debug)]
struct ThreadCounts(Vec<usize>);

fn parse_threads(text: &str) -> Result<ThreadCounts, String> {
    // The core-list syntax (`1,2,4`, `1-8`) fits thread counts too.
    let counts = parse_core_list(text).map_err(|e| e.to_string().replace("core", "thread"))?;
    if counts.contains(&0) {
        return Err("thread counts must be at least 1".to_owned());
    }
    Ok(ThreadCounts(counts))
}

/// `ordo bench clock` flags.
#[derive(Args, Debug)]
pub(crate) struct ClockArgs {
    #[command(flatten)]
    common: CommonBenchArgs,
    /// Measure 1..=N threads [default: the number of usable cores]; `--threads` overrides.
    #[arg(long, value_name = "N")]
    threads_max: Option<usize>,
    /// How often every (threads, metric, clock) cell is measured.
    #[arg(long, value_name = "R", default_value_t = clock_bench::DEFAULT_REPETITIONS)]
    repetitions: usize,
    /// Do not pin worker threads to cores.
    #[arg(long)]
    no_pin: bool,
    /// Instead of Fig. 8, measure where the ORDO clock wins: an engine transaction's clock
    /// draws plus work per transaction, logical against ORDO, and the crossover per thread
    /// count (the work below which ORDO gives more transactions per second).
    #[arg(long)]
    crossover: bool,
    /// Work per transaction in nanoseconds for `--crossover`, increasing
    /// [default: 0,25,50,100,200,400,800,1600,3200].
    #[arg(long, value_name = "NS,...", value_delimiter = ',', requires = "crossover")]
    work_ns: Vec<u64>,
}

/// Runs `ordo bench <workload>`.
pub(crate) fn run(args: &BenchArgs) -> Result<(), CliError> {
    match &args.workload {
        BenchCommand::Clock(clock) => run_clock(clock),
        BenchCommand::Ycsb(ycsb) => crate::bench_ycsb::run_ycsb(ycsb),
        BenchCommand::ScanUpdate(scan) => crate::bench_scan::run_scan(scan),
        BenchCommand::Synthetic(s) => crate::bench_synthetic::run_synthetic(s),
        BenchCommand::Tpcc(t) => crate::bench_tpcc::run_tpcc(t),
        BenchCommand::Hashtable(h) => crate::bench_hashtable::run_hashtable(h),
        BenchCommand::Oplog(o) => crate::bench_oplog::run_oplog(o),
        BenchCommand::Suite(s) => crate::bench_suite::run_suite(s),
        BenchCommand::Stamp(s) => crate::bench_stamp::run_stamp(s),
        BenchCommand::Durable(d) => crate::bench_durable::run_durable(d),
        BenchCommand::Recovery(r) => crate::bench_recovery::run_recovery(r),
        BenchCommand::ClusterClock(c) => crate::bench_cluster_clock::run_cluster_clock(c),
        BenchCommand::EtcdCompare(e) => crate::bench_etcd_compare::run_etcd_compare(e),
        BenchCommand::Failover(f) => crate::bench_failover::run_failover(f),
    }
}

/// Builds the clocks named by `--clock` (or `default`), printing cache warnings and fallbacks.
/// An ORDO clock that falls back to the system clock is dropped when the system clock is
/// already in the list.
pub(crate) fn open_clocks(
    common: &CommonBenchArgs,
    default: &[ClockChoice],
) -> Result<Vec<AnyClock>, CliError> {
    let mut choices = if common.clock.is_empty() { default.to_vec() } else { common.clock.clone() };
    let mut seen = Vec::new();
    choices.retain(|c| {
        let fresh = !seen.contains(c);
        seen.push(*c);
        fresh
    });
    let cache = common.cache.cache();
    let options = CalibrateOptions { runs: common.calibration_runs, ..CalibrateOptions::default() };
    let mut clocks: Vec<AnyClock> = Vec::with_capacity(choices.len());
    for choice in choices {
        let opened = AnyClock::open(choice, &options, cache.as_ref())?;
        for warning in opened.calibration.iter().flat_map(|c| &c.warnings) {
            warn(warning);
        }
        if let Some(reason) = &opened.fallback_reason {
            eprintln!("warning: --clock ordo: {reason}; using the system clock");
        }
        if clocks.iter().any(|c| c.kind() == opened.clock.kind()) {
            continue;
        }
        clocks.push(opened.clock);
    }
    Ok(clocks)
}

/// Appends `lines` (JSON records) to the results file `path` (`--out`).
pub(crate) fn append_lines(path: &Path, lines: &[String]) -> Result<(), CliError> {
    let mut file =
        std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|source| {
            CliError::ResultsFile { path: path.to_path_buf(), action: "open", source }
        })?;
    for line in lines {
        writeln!(file, "{line}").map_err(|source| CliError::ResultsFile {
            path: path.to_path_buf(),
            action: "append to",
            source,
        })?;
    }
    Ok(())
}

/// A benchmark's output: `lines` (JSON records) appended to `out` if given, then printed with
/// `--json`, or else the `table` printed.
pub(crate) fn emit(
    lines: &[String],
    out: Option<&Path>,
    json: bool,
    table: impl FnOnce() -> String,
) -> Result<(), CliError> {
    if let Some(path) = out {
        append_lines(path, lines)?;
    }
    if json {
        for line in lines {
            println!("{line}");
        }
    } else {
        print!("{}", table());
    }
    Ok(())
}

pub(crate) fn progress_bar(total: usize) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(
        Some(u64::try_from(total).unwrap_or(u64::MAX)),
        ProgressDrawTarget::stderr(),
    );
    if let Ok(style) =
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// `ordo bench clock`: ORDO Fig. 8.
fn run_clock(args: &ClockArgs) -> Result<(), CliError> {
    let common = &args.common;
    let thread_counts = match (&common.threads, args.threads_max) {
        (Some(list), _) => list.0.clone(),
        (None, Some(0)) => return Err(CliError::Usage("--threads-max must be at least 1".into())),
        (None, Some(n)) => (1..=n).collect(),
        (None, None) => (1..=usable_cores()?.len().max(1)).collect(),
    };
    if args.crossover {
        return run_clock_crossover(args, thread_counts);
    }
    let config = ClockBenchConfig {
        thread_counts,
        duration: common.duration.unwrap_or(clock_bench::DEFAULT_DURATION),
        repetitions: args.repetitions,
        pin_threads: !args.no_pin,
    };
    let clocks = open_clocks(common, &ClockChoice::ALL)?;
    if clocks.iter().all(|c| c.kind() != ClockKind::Ordo) {
        eprintln!("note: no ORDO clock in this run, so no ordo/logical ratio");
    }
    let bar = progress_bar(
        config.repetitions
            * config.thread_counts.len()
            * clock_bench::Metric::ALL.len()
            * clocks.len(),
    );
    let report = clock_bench::run(&config, &clocks, &mut |p| {
        bar.set_position(u64::try_from(p.done).unwrap_or(u64::MAX));
        bar.set_message(p.label);
    });
    bar.finish_and_clear();
    let report = report?;
    if common.json {
        for line in report.json_lines() {
            println!("{line}");
        }
    } else {
        print!("{}", report.table());
    }
    Ok(())
}

/// `ordo bench clock --crossover`: where the ORDO clock wins (module docs of
/// `ordo_bench::clock_crossover`).
fn run_clock_crossover(args: &ClockArgs, thread_counts: Vec<usize>) -> Result<(), CliError> {
    use ordo_bench::clock_crossover::{self as crossover, CrossoverConfig};
    let common = &args.common;
    let config = CrossoverConfig {
        thread_counts,
        work_ns: if args.work_ns.is_empty() {
            crossover::WORK_NS_DEFAULT.to_vec()
        } else {
            args.work_ns.clone()
        },
        duration: common.duration.unwrap_or(clock_bench::DEFAULT_DURATION),
        repetitions: args.repetitions,
        pin_threads: !args.no_pin,
    };
    let clocks = open_clocks(common, &LOGICAL_AND_ORDO)?;
    let report = crossover::run(&config, &clocks)?;
    if common.json {
        for line in report.json_lines() {
            println!("{line}");
        }
    } else {
        print!("{}", report.table());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_refuse_nonsense() {
        assert_eq!(parse_duration("500"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        for bad in ["0", "0s", "-1s", "abc", "2h", "", "1e400"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_command_line_definition_is_consistent() {
        // Duplicate flags across flattened argument groups panic at run time; catch them here.
        use clap::CommandFactory;
        #[derive(clap::Parser)]
        struct Probe {
            #[command(subcommand)]
            bench: BenchCommand,
        }
        Probe::command().debug_assert();
    }
}
