//! `ordo bench failover --kill non-cm|cm|cm+1`: a local cluster of `ordo node` processes under
//! load, `kill -9` of one or two nodes, the clock-disabled and recovery times, the checks, and
//! the throughput timeline in 1 ms buckets around the kill (FaRMv2 Fig. 18) as a plot. The
//! measurement is `ordo_bench::failover`'s.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use ordo_bench::failover::{self, FailoverConfig, FailoverError, FailoverResult, KillMode};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::CliError;
use crate::plot::{Figure, PlotTarget, render};

/// `ordo bench failover` flags.
#[derive(Args, Debug)]
pub(crate) struct FailoverArgs {
    /// What to kill: non-cm (a member that is not the CM), cm (the CM), cm+1 (the CM and the
    /// member after it, together: f = 2).
    #[arg(long, value_name = "MODE", value_parser = parse_kill)]
    kill: KillMode,
    /// Nodes [default: 3, or 5 for cm+1].
    #[arg(long)]
    nodes: Option<usize>,
    /// Backups per region [default: 1, or 2 for cm+1].
    #[arg(long)]
    backups: Option<usize>,
    /// Lease period in milliseconds (FaRMv2: 10).
    #[arg(long, default_value_t = 10)]
    lease_ms: u32,
    /// Client threads running transfers.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Length of the load, in seconds (warm-up of 0.5 s included).
    #[arg(long, default_value_t = 4.0)]
    secs: f64,
    /// When to kill, in milliseconds from the start of the load.
    #[arg(long, default_value_t = 2000)]
    kill_at_ms: u64,
    /// Accounts per node.
    #[arg(long, default_value_t = 64)]
    accounts: usize,
    /// Clock synchronisations per second, summed over the non-CM nodes.
    #[arg(long, default_value_t = 2000)]
    sync_rate: u32,
    /// Seed of the account choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where to write the summary (`failover-MODE.txt`), the result (`failover-MODE.json`), the
    /// plot (`failover-MODE.svg` unless --plot) and the cluster's node logs (`cluster-MODE/`).
    #[arg(long, value_name = "DIR", default_value = "failover-results")]
    out: PathBuf,
    /// Draw the timeline here (.svg or .png) instead of in --out.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Runs to try: a run in which the cluster reconfigures before the kill (a member missed
    /// its lease under load: a false suspicion) is reported and started again, up to this many.
    #[arg(long, default_value_t = 3)]
    attempts: u32,
    /// Print the result as JSON on stdout instead of the summary.
    #[arg(long)]
    json: bool,
}

fn parse_kill(s: &str) -> Result<KillMode, String> {
    s.parse::<KillMode>().map_err(|e| e.to_string())
}

fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> CliError + '_ {
    move |source| CliError::ResultsFile { path: path.to_path_buf(), action: "write", source }
}

pub(crate) fn run_failover(args: &FailoverArgs) -> Result<(), CliError> {
    if !(args.secs.is_finite() && args.secs > 0.0 && args.secs <= 600.0) {
        return Err(CliError::Usage("--secs must be in (0, 600]".into()));
    }
    std::fs::create_dir_all(&args.out).map_err(io(&args.out))?;
    let mode = args.kill.name().replace('+', "-plus-");
    let plot_path =
        args.plot.clone().unwrap_or_else(|| args.out.join(format!("failover-{mode}.svg")));
    let target = PlotTarget::open(&plot_path)?;
    let (nodes, backups) = args.kill.default_shape();
    let binary = std::env::current_exe()
        .map_err(|e| CliError::Usage(format!("cannot find the ordo binary: {e}")))?;
    let mut false_suspicions = Vec::new();
    let mut attempt = 0;
    let result = loop {
        attempt += 1;
        let dir = args.out.join(format!("cluster-{mode}-{attempt}"));
        if dir.join("cluster.json").exists() {
            // A run that was interrupted left its cluster up.
            let _ = ordo_cluster::local::down(&dir);
        }
        let _ = std::fs::remove_dir_all(&dir);
        let config = FailoverConfig {
            kill: args.kill,
            nodes: args.nodes.unwrap_or(nodes),
            backups: args.backups.unwrap_or(backups),
            lease_ms: args.lease_ms,
            threads: args.threads,
            duration: Duration::from_secs_f64(args.secs),
            kill_at: Duration::from_millis(args.kill_at_ms),
            accounts_per_node: args.accounts,
            dir: std::path::absolute(&dir).unwrap_or(dir),
            binary: binary.clone(),
            sync_rate_per_s: args.sync_rate,
            seed: args.seed,
        };
        match failover::run(&config, &mut |line| eprintln!("{line}")) {
            Ok(r) => break r,
            Err(e @ FailoverError::FalseSuspicion { .. }) if attempt < args.attempts.max(1) => {
                eprintln!("attempt {attempt}: {e}; starting again");
                false_suspicions.push(e.to_string());
            }
            Err(e) => {
                target.abandon();
                return Err(e.into());
            }
        }
    };
    let mut summary = failover::summary(&result);
    for e in &false_suspicions {
        summary.push_str(&format!("  earlier attempt   {e}\n"));
    }
    let txt = args.out.join(format!("failover-{mode}.txt"));
    std::fs::write(&txt, &summary).map_err(io(&txt))?;
    let json = serde_json::to_string(&result)?;
    let jpath = args.out.join(format!("failover-{mode}.json"));
    std::fs::write(&jpath, &json).map_err(io(&jpath))?;
    render(target, (1100, 500), &Timeline(&result))?;
    if args.json {
        println!("{json}");
    } else {
        print!("{summary}");
        println!("  plot              {}", plot_path.display());
        println!("  summary           {}", txt.display());
    }
    Ok(())
}

/// Commits per 1 ms bucket against ms from the kill, with the kill, the new configuration and
/// the clocks' re-enable marked (FaRMv2 Fig. 18).
struct Timeline<'a>(&'a FailoverResult);

/// How much of the timeline to draw around the kill, ms.
const BEFORE_MS: i64 = 100;
const AFTER_MS: i64 = 400;

impl Figure for Timeline<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let r = self.0;
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let points: Vec<(i64, u32)> = r
            .buckets
            .iter()
            .enumerate()
            .map(|(i, &c)| (r.first_bucket_ms + i as i64, c))
            .filter(|&(t, _)| (-BEFORE_MS..AFTER_MS).contains(&t))
            .collect();
        let y_max = points.iter().map(|p| p.1).max().unwrap_or(1).max(1);
        let title = format!(
            "kill {} ({} nodes, lease {} ms): clock disabled {}, recovery {}",
            r.kill,
            r.nodes,
            r.lease_ms,
            r.clock_disabled_ms.map_or_else(|| "—".into(), |v| format!("{v:.1} ms")),
            r.recovery_ms.map_or_else(|| "not within the run".into(), |v| format!("{v:.0} ms")),
        );
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(-BEFORE_MS..AFTER_MS, 0u32..(y_max + y_max / 5 + 1))
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("ms relative to the kill")
            .y_desc("commits per ms")
            .draw()
            .map_err(|e| e.to_string())?;
        let blue = RGBColor(31, 119, 180);
        chart
            .draw_series(LineSeries::new(points.iter().copied(), blue.stroke_width(1)))
            .map_err(|e| e.to_string())?
            .label("commits per 1 ms bucket")
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], blue.stroke_width(2)));
        let top = y_max + y_max / 5;
        let mut mark = |at: f64, colour: RGBColor, label: String| -> Result<(), String> {
            let x = at.round() as i64;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    [(x, 0u32), (x, top)],
                    colour.stroke_width(2),
                )))
                .map_err(|e| e.to_string())?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(2))
                });
            Ok(())
        };
        mark(0.0, RGBColor(214, 39, 40), "kill -9".into())?;
        if let Some(t) = r.new_config_all_ms {
            mark(
                t,
                RGBColor(44, 160, 44),
                format!("new configuration at every survivor ({t:.1} ms)"),
            )?;
        }
        if let Some(t) = r.clock_reenabled_ms {
            mark(t, RGBColor(255, 127, 14), format!("clocks re-enabled ({t:.1} ms)"))?;
        }
        if let Some(t) = r.recovery_ms {
            mark(t, RGBColor(148, 103, 189), format!("full throughput ({t:.0} ms)"))?;
        }
        let base = r.baseline_per_ms;
        let grey = RGBColor(120, 120, 120);
        chart
            .draw_series(std::iter::once(PathElement::new(
                [(-BEFORE_MS, base.round() as u32), (AFTER_MS, base.round() as u32)],
                grey.stroke_width(1),
            )))
            .map_err(|e| e.to_string())?
            .label(format!("pre-kill baseline {base:.1}/ms"))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], grey.stroke_width(1)));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.85))
            .draw()
            .map_err(|e| e.to_string())
    }
}
