//! `ordo bench stamp`: STAMP kernels on Ordo, the logical vs the ORDO clock (ORDO §6.6,
//! Fig. 15).
//!
//! For one application and size: the sequential version is timed, then the parallel version
//! for every thread count and clock on a fresh database each run, clocks interleaved and
//! repeated; every parallel output is verified against the sequential one. The summary gives
//! the sequential time, the parallel time per (threads, clock) as median [min–max], the speedup
//! (sequential / parallel), the abort rate and aborts by reason, and the ordo/logical ratio.

use std::sync::Arc;

use clap::{Args, ValueEnum};
use ordo_bench::stamp::{self, App, ParallelRun, RunConfig, Size};
use ordo_clock::{AnyClock, Clock, ClockChoice};

use crate::bench::{CommonBenchArgs, DurabilityArgs, open_clocks, progress_bar};
use crate::error::CliError;

/// The STAMP applications.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AppArg {
    /// K-means clustering.
    Kmeans,
    /// SSCA2 kernel 1 (graph construction).
    Ssca2,
    /// Travel reservations.
    Vacation,
    /// Network intrusion detection.
    Intruder,
    /// Gene sequencing.
    Genome,
    /// Maze routing.
    Labyrinth,
}

impl AppArg {
    fn app(self) -> App {
        match self {
            AppArg::Kmeans => App::Kmeans,
            AppArg::Ssca2 => App::Ssca2,
            AppArg::Vacation => App::Vacation,
            AppArg::Intruder => App::Intruder,
            AppArg::Genome => App::Genome,
            AppArg::Labyrinth => App::Labyrinth,
        }
    }
}

/// Input presets.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SizeArg {
    /// STAMP's small inputs.
    Small,
    /// STAMP's medium inputs (scaled where a kernel says so).
    Medium,
    /// STAMP's standard inputs (seconds to minutes sequentially).
    Large,
}

/// `ordo bench stamp` flags.
#[derive(Args, Debug)]
pub(crate) struct StampArgs {
    #[command(flatten)]
    pub(crate) common: CommonBenchArgs,
    /// The application.
    #[arg(long, value_enum)]
    app: AppArg,
    /// The input preset.
    #[arg(long, value_enum, default_value_t = SizeArg::Small)]
    size: SizeArg,
    /// Override a generator parameter, `NAME=VALUE` (repeatable; e.g. `s=14` for ssca2,
    /// `x=64` for labyrinth, `m=40` for kmeans, `n=16384` for intruder; vacation and genome take
    /// none; an unknown name lists the kernel's names).
    #[arg(long = "param", value_name = "NAME=VALUE", value_parser = parse_param)]
    params: Vec<(String, String)>,
    /// Measurements per (threads, clock) cell, interleaved across clocks.
    #[arg(long, default_value_t = 3)]
    repetitions: usize,
    /// Seed of the input generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also append every run and cell as a JSON line to FILE (input of `ordo plot`, which
    /// draws STAMP runs as speedups).
    #[arg(long, value_name = "FILE")]
    out: Option<std::path::PathBuf>,
    #[command(flatten)]
    durability: DurabilityArgs,
}

fn parse_param(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("expected NAME=VALUE, got {text:?}")),
    }
}

pub(crate) fn run_stamp(args: &StampArgs) -> Result<(), CliError> {
    let common = &args.common;
    if common.duration().is_some() {
        eprintln!(
            "note: --duration-ms does not apply to STAMP (each run does a fixed amount of work)"
        );
    }
    let app = args.app.app();
    let size = match args.size {
        SizeArg::Small => Size::Small,
        SizeArg::Medium => Size::Medium,
        SizeArg::Large => Size::Large,
    };
    let config = RunConfig {
        thread_counts: common.thread_counts()?,
        repetitions: args.repetitions,
        seed: args.seed,
        durability: args.durability.durability()?,
    };
    // Parameters and the kernel's availability are checked before any clock is calibrated.
    let params = stamp::app_params(app, size, &args.params)?;
    let clocks: Vec<(String, Arc<AnyClock>)> =
        open_clocks(common, &[ClockChoice::Logical, ClockChoice::Ordo])?
            .into_iter()
            .map(|c| (c.kind().name().to_owned(), Arc::new(c)))
            .collect();
    let bar = progress_bar(1);
    let report = stamp::run_app(app, size, &args.params, &config, &clocks, &mut |p| {
        bar.set_length(u64::try_from(p.total).unwrap_or(u64::MAX));
        bar.set_position(u64::try_from(p.done).unwrap_or(u64::MAX));
        bar.set_message(format!("{} {}", app.name(), p.label));
    });
    bar.finish_and_clear();
    let report = report?;
    // The output file is opened before printing anything, so a bad path fails cleanly.
    let mut out_file = match &args.out {
        Some(path) => Some((
            path,
            std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|source| {
                CliError::ResultsFile { path: path.clone(), action: "open", source }
            })?,
        )),
        None => None,
    };
    if common.json || out_file.is_some() {
        let lines = json_lines(app, size, &params, &config, &clocks, &report)?;
        if common.json {
            for line in &lines {
                println!("{line}");
            }
        }
        if let Some((path, file)) = &mut out_file {
            use std::io::Write;
            let mut text = lines.join("\n");
            text.push('\n');
            file.write_all(text.as_bytes()).map_err(|source| CliError::ResultsFile {
                path: (*path).clone(),
                action: "append to",
                source,
            })?;
        }
    }
    if !common.json {
        print!("{}", report.table());
    }
    Ok(())
}

/// One JSON line per parallel run (`"record": "run"`) and per cell (`"record": "summary"`).
fn json_lines(
    app: App,
    size: Size,
    params: &serde_json::Value,
    config: &RunConfig,
    clocks: &[(String, Arc<AnyClock>)],
    report: &stamp::StampReport,
) -> Result<Vec<String>, CliError> {
    let machine = ordo_bench::report::Machine::read();
    let revision = ordo_bench::report::git_revision();
    let describe = |name: &str| clocks.iter().find(|(n, _)| n == name).map(|(_, c)| c.describe());
    let sequential = report.sequential();
    let mut lines = Vec::new();
    for run in &report.runs {
        let ParallelRun { clock, .. } = run;
        lines.push(serde_json::to_string(&serde_json::json!({
            "workload": "stamp", "record": "run", "app": app, "size": size,
            "params": params, "config": config, "clock": describe(clock),
            "sequential_s": &report.sequential_s, "result": run,
            "git_revision": &revision, "machine": &machine,
        }))?);
    }
    for cell in report.cells() {
        lines.push(serde_json::to_string(&serde_json::json!({
            "workload": "stamp", "record": "summary", "app": app, "size": size,
            "params": params, "config": config, "clock": describe(&cell.clock),
            "sequential_s": sequential, "cell": &cell,
            "ordo_logical_ratio": report.ordo_logical_ratio(cell.threads),
            "git_revision": &revision, "machine": &machine,
        }))?);
    }
    Ok(lines)
}
