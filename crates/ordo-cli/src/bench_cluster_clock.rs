//! `ordo bench cluster-clock`: U − L and the mean `get_ts` wait against sync rate and node count
//! (FaRMv2 Fig. 16/17 at our scale), as a table, JSON lines and a plot.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use ordo_bench::cluster_clock::{self, ClusterClockConfig, ClusterClockRow, median_min_max};
use ordo_clock::{AnyClock, CalibrateOptions, ClockChoice};
use ordo_cluster::node::LocalClock;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::bench::progress_bar;
use crate::clock_setup::CacheArgs;
use crate::error::CliError;
use crate::plot::{Figure, PlotTarget, render};

/// `ordo bench cluster-clock` flags.
#[derive(Args, Debug)]
pub(crate) struct ClusterClockArgs {
    /// Node counts, comma-separated (each at least 2).
    #[arg(long, value_delimiter = ',', default_values_t = [2usize, 3, 5])]
    nodes: Vec<usize>,
    /// Aggregate sync rates per second, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [100u32, 1_000, 10_000, 50_000])]
    sync_rates: Vec<u32>,
    /// Sampling time per cell, in milliseconds.
    #[arg(long, default_value_t = 500)]
    duration_ms: u64,
    /// Repetitions of the whole grid (interleaved).
    #[arg(long, default_value_t = 3)]
    repetitions: usize,
    /// The drift bound ε in ppm.
    #[arg(long, default_value_t = 1_000)]
    drift_bound_ppm: u64,
    /// The local clock each node synchronises: system or ordo.
    #[arg(long, default_value = "system")]
    clock: ClockChoice,
    /// Draw the figure here (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Print JSON lines (one per measured cell and repetition) instead of the table.
    #[arg(long)]
    json: bool,
    /// Also append the JSON lines to this file.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    cache: CacheArgs,
}

pub(crate) fn run_cluster_clock(args: &ClusterClockArgs) -> Result<(), CliError> {
    let target = args.plot.as_deref().map(PlotTarget::open).transpose()?;
    let local: Box<dyn Fn() -> LocalClock> = match args.clock {
        ClockChoice::System => Box::new(cluster_clock::system_local),
        ClockChoice::Ordo => {
            let cache = args.cache.cache();
            let opened =
                AnyClock::open(ClockChoice::Ordo, &CalibrateOptions::default(), cache.as_ref())?;
            if let Some(reason) = &opened.fallback_reason {
                eprintln!("warning: using the system clock: {reason}");
            }
            let clock = Arc::new(opened.clock);
            Box::new(move || clock.clone() as LocalClock)
        }
        ClockChoice::Logical => {
            return Err(CliError::Usage(
                "a logical clock cannot be synchronised; use --clock system or ordo".into(),
            ));
        }
    };
    let dir = std::env::temp_dir().join(format!("ordo-cluster-clock-{}", std::process::id()));
    let config = ClusterClockConfig {
        node_counts: args.nodes.clone(),
        sync_rates: args.sync_rates.clone(),
        duration: Duration::from_millis(args.duration_ms),
        warmup: Duration::from_millis(200),
        repetitions: args.repetitions.max(1),
        sample_pause: Duration::from_micros(50),
        drift_bound_ppm: args.drift_bound_ppm,
        dir: dir.clone(),
    };
    let bar = progress_bar(config.repetitions * config.node_counts.len() * config.sync_rates.len());
    let result = cluster_clock::run(&config, &*local, &mut |p| {
        bar.set_position(u64::try_from(p.done).unwrap_or(u64::MAX));
    });
    bar.finish_and_clear();
    let _ = std::fs::remove_dir_all(&dir);
    let rows = match result {
        Ok(rows) => rows,
        Err(e) => {
            if let Some(t) = target {
                t.abandon();
            }
            return Err(e.into());
        }
    };
    let lines: Vec<String> = rows
        .iter()
        .map(|r| {
            serde_json::json!({ "workload": "cluster-clock", "clock": args.clock.name(),
                "drift_bound_ppm": args.drift_bound_ppm, "result": r })
            .to_string()
        })
        .collect();
    crate::bench::emit(&lines, args.out.as_deref(), args.json, || cluster_clock::table(&rows))?;
    if let (Some(target), Some(path)) = (target, &args.plot) {
        render(target, (1100, 450), &ClockFigure(&rows))?;
        eprintln!("plot: {}", path.display());
    }
    Ok(())
}

/// Two panels: U − L and `get_ts` wait (µs, median over repetitions) against sync rate (log
/// scale), one line per node count.
struct ClockFigure<'a>(&'a [ClusterClockRow]);

impl ClockFigure<'_> {
    fn series(&self, f: &dyn Fn(&ClusterClockRow) -> f64) -> Vec<(usize, Vec<(f64, f64)>)> {
        let mut nodes: Vec<usize> = self.0.iter().map(|r| r.nodes).collect();
        nodes.sort_unstable();
        nodes.dedup();
        let mut rates: Vec<u32> = self.0.iter().map(|r| r.sync_rate_per_s).collect();
        rates.sort_unstable();
        rates.dedup();
        nodes
            .into_iter()
            .map(|n| {
                let points = rates
                    .iter()
                    .map(|&rate| {
                        let mut v: Vec<f64> = self
                            .0
                            .iter()
                            .filter(|r| r.nodes == n && r.sync_rate_per_s == rate)
                            .map(f)
                            .collect();
                        (f64::from(rate), median_min_max(&mut v).0)
                    })
                    .collect();
                (n, points)
            })
            .collect()
    }
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    series: &[(usize, Vec<(f64, f64)>)],
) -> Result<(), String> {
    let xs = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.0));
    let x_min = xs.clone().fold(f64::INFINITY, f64::min).max(1.0);
    let x_max = xs.fold(0.0, f64::max).max(x_min * 10.0);
    let y_max = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.1)).fold(0.0, f64::max);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((x_min * 0.8..x_max * 1.25).log_scale(), 0.0..(y_max * 1.15).max(1.0))
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("aggregate syncs per second")
        .y_desc("µs")
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (nodes, points)) in series.iter().enumerate() {
        let colour = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(points.iter().copied(), colour.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(format!("{nodes} nodes"))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(2)));
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|e| e.to_string())
}

impl Figure for ClockFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (left, right) = root.split_horizontally(550);
        panel(&left, "uncertainty U − L (mean)", &self.series(&|r| r.width_mean_nanos / 1e3))?;
        panel(
            &right,
            "get_ts uncertainty wait (mean)",
            &self.series(&|r| r.get_ts_wait_mean_nanos / 1e3),
        )
    }
}
