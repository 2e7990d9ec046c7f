//! `ordo calibrate`: measure (or load from the cache) ORDO_BOUNDARY and print it with the
//! per-pair offset matrix (ORDO Fig. 4, Table 1, Fig. 9).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use ordo_clock::calibrate::{DEFAULT_RUNS, DEFAULT_TIME_BUDGET};
use ordo_clock::cores::{format_core_list, parse_core_list};
use ordo_clock::{
    CacheWarning, CalibrateOptions, Calibration, CalibrationOutcome, CalibrationSource,
    load_or_calibrate,
};

use crate::clock_setup::{CacheArgs, warn};
use crate::error::CliError;
use crate::plot::{PlotTarget, calibration_heatmap};

/// `ordo calibrate` flags.
#[derive(Args, Debug)]
pub(crate) struct CalibrateArgs {
    /// Ping-pong rounds per core pair; each round samples both directions.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_RUNS)]
    runs: u64,
    /// The cores to calibrate, e.g. `0,1` or `0-3,6` [default: every online, allowed core].
    #[arg(long, value_name = "LIST", value_parser = parse_cores)]
    cores: Option<CoreList>,
    /// A bound on the measurement in milliseconds; sessions are shortened (never below 100
    /// rounds), pairs are never skipped.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_TIME_BUDGET.as_millis() as u64)]
    budget_ms: u64,
    #[command(flatten)]
    cache: CacheArgs,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Also draw the offset matrix as a heatmap (ORDO Fig. 9): FILE.svg or FILE.png.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

/// A parsed `--cores` list (a newtype so clap treats it as one value).
#[derive(Clone, Debug)]
struct CoreList(Vec<usize>);

fn parse_cores(text: &str) -> Result<CoreList, String> {
    parse_core_list(text).map(CoreList).map_err(|e| e.to_string())
}

/// Runs `ordo calibrate`.
pub(crate) fn run(args: &CalibrateArgs) -> Result<(), CliError> {
    // Check the plot path before measuring, so a typo does not cost a calibration.
    let plot = args.plot.as_deref().map(PlotTarget::open).transpose()?;
    let options = CalibrateOptions {
        runs: args.runs,
        cores: args.cores.as_ref().map(|c| c.0.clone()),
        time_budget: Duration::from_millis(args.budget_ms),
        ..CalibrateOptions::default()
    };
    let cache = args.cache.cache();
    let outcome = match load_or_calibrate(&options, cache.as_ref()) {
        Ok(outcome) => outcome,
        Err(e) => {
            if let Some(plot) = plot {
                plot.abandon();
            }
            return Err(e.into());
        }
    };
    for warning in &outcome.warnings {
        warn(warning);
    }
    if let Some(plot) = plot {
        calibration_heatmap(&outcome.calibration, plot)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&json_report(&outcome))?);
    } else {
        print!("{}", text_report(&outcome));
        if let Some(path) = &args.plot {
            println!("heatmap written to {}", path.display());
        }
    }
    Ok(())
}

fn json_report(outcome: &CalibrationOutcome) -> serde_json::Value {
    let c = &outcome.calibration;
    serde_json::json!({
        "source": outcome.source,
        "cache_path": outcome.cache_path,
        "warnings": outcome.warnings.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "boundary_ticks": c.boundary_ticks,
        "boundary_ns": c.boundary_nanos,
        "offset_min_ns": c.offset_nanos_min,
        "offset_max_ns": c.offset_nanos_max,
        "calibration": c,
    })
}

fn text_report(outcome: &CalibrationOutcome) -> String {
    let c = &outcome.calibration;
    let mut out = String::new();
    let stored = !outcome.warnings.iter().any(|w| matches!(w, CacheWarning::Unwritable { .. }));
    let source = match (outcome.source, &outcome.cache_path) {
        (CalibrationSource::Cached, Some(path)) => {
            format!("loaded from {}; pass --no-cache to re-measure", path.display())
        }
        (CalibrationSource::Cached, None) => "loaded from the cache".to_owned(),
        (CalibrationSource::Measured, Some(path)) if stored => {
            format!("measured in {} ms, cached in {}", c.elapsed_ms, path.display())
        }
        (CalibrationSource::Measured, _) => {
            format!("measured in {} ms, not cached", c.elapsed_ms)
        }
    };
    let _ = writeln!(out, "ORDO calibration: {source}");
    let _ = writeln!(out, "  cpu           {}", c.cpu_model);
    let _ =
        writeln!(out, "  cores         {} ({} cores)", format_core_list(&c.cores), c.cores.len());
    let _ = writeln!(out, "  counter       {}", c.counter.kind.describe());
    let _ = writeln!(out, "  invariance    {}", c.counter.invariance.describe());
    let _ = writeln!(
        out,
        "  frequency     {:.3} MHz ({})",
        c.counter.frequency_hz as f64 / 1e6,
        c.counter.frequency_source.describe()
    );
    let runs_done = c.runs_min().map_or_else(|| "-".to_owned(), |r| r.to_string());
    let _ = writeln!(
        out,
        "  runs per pair {} requested, at least {runs_done} done{}",
        c.runs_requested,
        if c.budget_exhausted { " (time budget reached)" } else { "" }
    );
    let _ = writeln!(
        out,
        "  boundary B    {} ticks = {} ns  (ORDO_BOUNDARY)",
        c.boundary_ticks, c.boundary_nanos
    );
    match (c.min_offset(), c.max_offset()) {
        (Some(min), Some(max)) => {
            let _ = writeln!(
                out,
                "  offsets       min {} ns ({} -> {}), max {} ns ({} -> {})  (ORDO Table 1)",
                min.min_delta_nanos, min.from, min.to, max.min_delta_nanos, max.from, max.to
            );
        }
        _ => {
            let _ = writeln!(out, "  offsets       none (a single core has no pairs)");
        }
    }
    if !c.counter.invariance.is_invariant() {
        let _ = writeln!(
            out,
            "  NOTE: the counter is not invariant; Ordo will use the system clock instead"
        );
    }
    if c.cores.len() >= 2 {
        out.push('\n');
        out.push_str(&matrix_table(c));
    }
    out
}

/// The offset matrix as an aligned table: row = stamping core, column = receiving core.
fn matrix_table(c: &Calibration) -> String {
    let matrix = c.matrix_nanos();
    let cells: Vec<Vec<String>> = matrix
        .iter()
        .map(|row| {
            row.iter().map(|cell| cell.map_or_else(|| "-".to_owned(), |v| v.to_string())).collect()
        })
        .collect();
    let width = cells
        .iter()
        .flatten()
        .map(String::len)
        .chain(c.cores.iter().map(|core| core.to_string().len()))
        .max()
        .unwrap_or(1)
        .max(3);
    let mut out = String::new();
    let _ = writeln!(out, "one-way offsets δ(from -> to) in ns, minimum over runs (ORDO Fig. 9)");
    let _ = write!(out, "{:>9}", "from\\to");
    for core in &c.cores {
        let _ = write!(out, " {core:>width$}");
    }
    out.push('\n');
    for (core, row) in c.cores.iter().zip(&cells) {
        let _ = write!(out, "{core:>9}");
        for cell in row {
            let _ = write!(out, " {cell:>width$}");
        }
        out.push('\n');
    }
    out
}
