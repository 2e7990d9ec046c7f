//! `ordo plot RESULTS... -o FIG.svg|png`: figures from the JSON lines of `ordo bench`.
//!
//! Every line written by a harness workload (`--json` or `--out FILE`) is one run: workload,
//! variant, clock, threads and the measured `RunStats`. Lines are grouped into cells
//! (workload, variant, threads, clock) exactly as the summary table groups them, so a figure
//! and a table of the same file agree. Three figures:
//!
//! * `throughput` — one panel per workload variant, committed tx/s against threads, one line
//!   per clock, the median run with a min–max bar (ORDO Fig. 11–14 style);
//! * `ratio` — ordo/logical median throughput per workload variant and thread count, with the
//!   parity line at 1 (the clock comparison the papers argue from);
//! * `aborts` — aborted attempts per attempt, stacked by reason, per cell.
//!
//! `ordo bench stamp --json` lines are read too: each `run` line becomes a cell of
//! `stamp APP` whose value is the run's **speedup** over the median sequential time (ORDO
//! Fig. 15) instead of tx/s, so the ratio figure compares the clocks' speedups; its `summary`
//! lines repeat the runs and are skipped.
//!
//! Lines that are not benchmark records (a calibration report, a clock benchmark line) are an
//! error naming file and line, not silently skipped: a plot of the wrong file should not look
//! like an empty result.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use plotters::coord::Shift;
use plotters::coord::ranged1d::SegmentedCoord;
use plotters::coord::types::{RangedCoordf64, RangedCoordusize};
use plotters::prelude::*;
use plotters::style::FontTransform;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::CliError;
use crate::plot::{Figure, PlotTarget, render};

/// `ordo plot` flags.
#[derive(Args, Debug)]
pub(crate) struct PlotArgs {
    /// Result files: JSON lines from `ordo bench … --json` or `--out`.
    #[arg(value_name = "RESULTS", required = true)]
    results: Vec<PathBuf>,
    /// The figure to write: .svg or .png.
    #[arg(short, long, value_name = "FIG")]
    output: PathBuf,
    /// Which figure.
    #[arg(long, value_enum, default_value_t = Kind::Throughput)]
    kind: Kind,
}

/// The figures.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Throughput against threads, a line per clock, a panel per workload.
    Throughput,
    /// Ordo/logical throughput ratio per workload and thread count.
    Ratio,
    /// Abort rate by reason per cell.
    Aborts,
}

/// One run, as read from a results file.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Run {
    workload: String,
    threads: usize,
    clock: String,
    /// Committed tx/s, or the speedup for a STAMP run (see `unit`).
    tx_per_s: f64,
    unit: Unit,
    committed: u64,
    aborts: Vec<(String, u64)>,
}

/// What a run's value measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    /// Committed transactions per second.
    TxPerS,
    /// Sequential time over parallel time (STAMP).
    Speedup,
}

/// Reads every results file; the first unreadable file or malformed line is the error.
pub(crate) fn read_runs(paths: &[PathBuf]) -> Result<Vec<Run>, CliError> {
    let mut runs = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path).map_err(|source| CliError::ResultsFile {
            path: path.clone(),
            action: "read",
            source,
        })?;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let run = parse_line(line).map_err(|detail| CliError::ResultsFormat {
                path: path.clone(),
                line: i + 1,
                detail,
            })?;
            runs.extend(run);
        }
    }
    if runs.is_empty() {
        return Err(CliError::Usage(format!(
            "no benchmark records in {}",
            paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(runs)
}

/// One run of a line, or `None` for a line that only summarises other lines.
fn parse_line(line: &str) -> Result<Option<Run>, String> {
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let field = |path: &[&str]| {
        let mut at = &v;
        for key in path {
            at = at.get(key).ok_or_else(|| format!("no field {}", path.join(".")))?;
        }
        Ok::<_, String>(at)
    };
    let text = |path: &[&str]| {
        field(path)?.as_str().map(str::to_owned).ok_or_else(|| format!("{} is not text", path[0]))
    };
    let number = |path: &[&str]| {
        field(path)?.as_f64().ok_or_else(|| format!("{} is not a number", path.join(".")))
    };
    let workload = text(&["workload"])?;
    if workload == "stamp" {
        return parse_stamp(&v);
    }
    let variant = text(&["variant"]).unwrap_or_default();
    let aborts = parse_aborts(field(&["result", "aborts"])?)?;
    let threads = parse_threads(number(&["threads"])?)?;
    Ok(Some(Run {
        workload: if variant.is_empty() { workload } else { format!("{workload} {variant}") },
        threads,
        clock: text(&["clock", "kind"])?,
        tx_per_s: number(&["result", "tx_per_s"])?,
        unit: Unit::TxPerS,
        committed: number(&["result", "committed"])? as u64,
        aborts,
    }))
}

/// A line of `ordo bench stamp --json`: a `run` is one parallel run, its value the speedup
/// over the median of the line's sequential times.
fn parse_stamp(v: &serde_json::Value) -> Result<Option<Run>, String> {
    let get = |path: &[&str]| {
        path.iter()
            .try_fold(v, |at, key| at.get(key))
            .ok_or_else(|| format!("no field {}", path.join(".")))
    };
    let text = |path: &[&str]| {
        get(path)?
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("{} is not text", path.join(".")))
    };
    let number = |path: &[&str]| {
        get(path)?.as_f64().ok_or_else(|| format!("{} is not a number", path.join(".")))
    };
    match text(&["record"])?.as_str() {
        "summary" => return Ok(None),
        "run" => {}
        other => return Err(format!("unknown stamp record {other:?}")),
    }
    let sequential: Vec<f64> = get(&["sequential_s"])?
        .as_array()
        .ok_or("sequential_s is not a list")?
        .iter()
        .map(|t| t.as_f64().filter(|t| *t > 0.0).ok_or("sequential_s holds a non-positive time"))
        .collect::<Result<_, _>>()?;
    if sequential.is_empty() {
        return Err("sequential_s is empty".into());
    }
    let elapsed_s = number(&["result", "elapsed_s"])?;
    if elapsed_s <= 0.0 || !elapsed_s.is_finite() {
        return Err(format!("result.elapsed_s = {elapsed_s} is not a positive time"));
    }
    let committed = number(&["result", "commits"])? + number(&["result", "read_only_commits"])?;
    Ok(Some(Run {
        workload: format!("stamp {}", text(&["app"])?),
        threads: parse_threads(number(&["result", "threads"])?)?,
        clock: text(&["result", "clock"])?,
        tx_per_s: ordo_bench::driver::Spread::of(&sequential).median / elapsed_s,
        unit: Unit::Speedup,
        committed: committed as u64,
        aborts: parse_aborts(get(&["result", "aborts"])?)?,
    }))
}

fn parse_threads(threads: f64) -> Result<usize, String> {
    if threads < 1.0 || threads.fract() != 0.0 {
        return Err(format!("threads = {threads} is not a positive whole number"));
    }
    Ok(threads as usize)
}

fn parse_aborts(aborts: &serde_json::Value) -> Result<Vec<(String, u64)>, String> {
    aborts
        .as_array()
        .ok_or("result.aborts is not a list")?
        .iter()
        .map(|pair| {
            let name = pair.get(0).and_then(|n| n.as_str()).ok_or("abort reason without name")?;
            let n = pair.get(1).and_then(|n| n.as_u64()).ok_or("abort count is not a number")?;
            Ok((name.to_owned(), n))
        })
        .collect::<Result<Vec<_>, &str>>()
        .map_err(str::to_owned)
}

/// Runs `ordo plot`.
pub(crate) fn run(args: &PlotArgs) -> Result<(), CliError> {
    let target = PlotTarget::open(&args.output)?;
    let runs = match read_runs(&args.results) {
        Ok(runs) => runs,
        Err(e) => {
            target.abandon();
            return Err(e);
        }
    };
    let figure = Results { runs: &runs, kind: args.kind };
    render(target, figure.size(), &figure)?;
    eprintln!("wrote {}", args.output.display());
    Ok(())
}

/// The median, min and max throughput and the summed aborts of one cell.
#[derive(Clone, Debug, Default)]
struct CellSummary {
    median: f64,
    min: f64,
    max: f64,
    attempts: u64,
    aborts: BTreeMap<String, u64>,
}

type CellKey = (String, usize, String);

fn summarise(runs: &[Run]) -> (Vec<String>, Vec<String>, BTreeMap<CellKey, CellSummary>) {
    let mut workloads: Vec<String> = Vec::new();
    let mut clocks: Vec<String> = Vec::new();
    let mut groups: BTreeMap<CellKey, Vec<&Run>> = BTreeMap::new();
    for r in runs {
        if !workloads.contains(&r.workload) {
            workloads.push(r.workload.clone());
        }
        if !clocks.contains(&r.clock) {
            clocks.push(r.clock.clone());
        }
        groups.entry((r.workload.clone(), r.threads, r.clock.clone())).or_default().push(r);
    }
    let cells = groups
        .into_iter()
        .map(|(key, rs)| {
            let tps: Vec<f64> = rs.iter().map(|r| r.tx_per_s).collect();
            let s = ordo_bench::driver::Spread::of(&tps);
            let mut aborts = BTreeMap::new();
            let mut attempts = 0;
            for r in &rs {
                attempts += r.committed;
                for (name, n) in &r.aborts {
                    *aborts.entry(name.clone()).or_insert(0) += n;
                    attempts += n;
                }
            }
            (key, CellSummary { median: s.median, min: s.min, max: s.max, attempts, aborts })
        })
        .collect();
    (workloads, clocks, cells)
}

/// A figure of some runs.
struct Results<'a> {
    runs: &'a [Run],
    kind: Kind,
}

/// Line and bar colours, one per clock or abort reason.
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

impl Results<'_> {
    fn size(&self) -> (u32, u32) {
        let (workloads, _, _) = summarise(self.runs);
        match self.kind {
            Kind::Throughput => {
                let rows = workloads.len().div_ceil(3).max(1) as u32;
                let cols = workloads.len().clamp(1, 3) as u32;
                (420 * cols, 320 * rows)
            }
            Kind::Ratio | Kind::Aborts => {
                let labels = self.bar_labels();
                let chars_max = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
                let width = (BAR_PX * labels.len() as u32 + 150).max(1100);
                (width, 500 + label_area_px(chars_max))
            }
        }
    }

    /// The bar labels of a ratio or aborts figure, in bar order.
    fn bar_labels(&self) -> Vec<String> {
        let (workloads, _, cells) = summarise(self.runs);
        match self.kind {
            Kind::Throughput => Vec::new(),
            Kind::Ratio => ratio_bars(&workloads, &cells).into_iter().map(|b| b.0).collect(),
            Kind::Aborts => abort_entries(&cells).1.into_iter().map(|e| e.0).collect(),
        }
    }
}

/// Horizontal pixels per bar of a ratio or aborts figure (at least), so rotated labels of
/// neighbouring bars do not overlap.
const BAR_PX: u32 = 16;

/// Point size of the bar labels.
const BAR_LABEL_PT: u32 = 12;

/// Pixels below the axis for rotated labels of up to `chars` characters: 0.55 em per
/// character (more than sans-serif's average, about 0.5) plus the tick and a margin, so the longest
/// label ends inside the figure.
fn label_area_px(chars: usize) -> u32 {
    (chars as f64 * 0.55 * f64::from(BAR_LABEL_PT)).ceil() as u32 + 20
}

/// Writes `labels[i]` under bar `i`, rotated to read downwards and starting just below the
/// axis. Plotters' own rotated tick labels are centred on the tick (the anchor is placed
/// before the rotation), so long labels ran up into the bars and off the figure; anchoring
/// the text at its start keeps every label whole below the axis.
fn draw_bar_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &ChartContext<'_, DB, Cartesian2d<SegmentedCoord<RangedCoordusize>, RangedCoordf64>>,
    labels: &[String],
) -> Result<(), String> {
    let style = ("sans-serif", BAR_LABEL_PT)
        .into_font()
        .transform(FontTransform::Rotate90)
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, label) in labels.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(SegmentValue::CenterOf(i), 0.0));
        root.draw_text(label, &style, (x, y + 8)).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The ordo/logical bars: (label, threads, ratio) per workload variant and thread count
/// measured with both clocks.
fn ratio_bars(
    workloads: &[String],
    cells: &BTreeMap<CellKey, CellSummary>,
) -> Vec<(String, usize, f64)> {
    let mut bars = Vec::new();
    for w in workloads {
        let threads: Vec<usize> = {
            let mut t: Vec<usize> =
                cells.keys().filter(|(name, _, _)| name == w).map(|(_, t, _)| *t).collect();
            t.dedup();
            t
        };
        for t in threads {
            let get = |c: &str| cells.get(&(w.clone(), t, c.to_owned())).map(|s| s.median);
            if let (Some(o), Some(l)) = (get("ordo"), get("logical")) {
                bars.push((format!("{w} @{t}"), t, o / l.max(1e-9)));
            }
        }
    }
    bars
}

/// The abort reasons seen, and per cell its label and abort rate (%) per reason.
fn abort_entries(cells: &BTreeMap<CellKey, CellSummary>) -> (Vec<String>, Vec<(String, Vec<f64>)>) {
    let mut reasons: Vec<String> = Vec::new();
    for c in cells.values() {
        for (name, n) in &c.aborts {
            if *n > 0 && !reasons.contains(name) {
                reasons.push(name.clone());
            }
        }
    }
    let entries = cells
        .iter()
        .map(|((w, t, c), s)| {
            let rates = reasons
                .iter()
                .map(|r| {
                    s.aborts.get(r).copied().unwrap_or(0) as f64 / s.attempts.max(1) as f64 * 100.0
                })
                .collect();
            (format!("{w} @{t} {c}"), rates)
        })
        .collect();
    (reasons, entries)
}

impl Figure for Results<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (workloads, clocks, cells) = summarise(self.runs);
        match self.kind {
            Kind::Throughput => {
                let speedups: Vec<&str> = self
                    .runs
                    .iter()
                    .filter(|r| r.unit == Unit::Speedup)
                    .map(|r| r.workload.as_str())
                    .collect();
                draw_throughput(root, &workloads, &speedups, &clocks, &cells)
            }
            Kind::Ratio => draw_ratio(root, &workloads, &cells),
            Kind::Aborts => draw_aborts(root, &cells),
        }
    }
}

fn draw_throughput<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    workloads: &[String],
    speedups: &[&str],
    clocks: &[String],
    cells: &BTreeMap<CellKey, CellSummary>,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let cols = workloads.len().clamp(1, 3);
    let rows = workloads.len().div_ceil(3).max(1);
    let panels = root.split_evenly((rows, cols));
    for (w, panel) in workloads.iter().zip(panels.iter()) {
        let mine: Vec<(&CellKey, &CellSummary)> =
            cells.iter().filter(|((name, _, _), _)| name == w).collect();
        let threads_max = mine.iter().map(|((_, t, _), _)| *t).max().unwrap_or(1);
        // Throughput panels are in M tx/s; STAMP panels give the speedup as it is.
        let (scale, y_desc) =
            if speedups.contains(&w.as_str()) { (1.0, "speedup") } else { (1e6, "M tx/s") };
        let y_max = mine.iter().map(|(_, c)| c.max).fold(0.0f64, f64::max) / scale * 1.15;
        let mut chart = ChartBuilder::on(panel)
            .caption(w, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d(0.5f64..threads_max as f64 + 0.5, 0.0f64..y_max.max(1e-6))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("threads")
            .y_desc(y_desc)
            .x_labels(threads_max.min(16))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .map_err(err)?;
        for (ci, clock) in clocks.iter().enumerate() {
            let points: Vec<(f64, &CellSummary)> = mine
                .iter()
                .filter(|((_, _, c), _)| c == clock)
                .map(|((_, t, _), s)| (*t as f64, *s))
                .collect();
            if points.is_empty() {
                continue;
            }
            let style = colour(ci);
            chart
                .draw_series(LineSeries::new(
                    points.iter().map(|(t, s)| (*t, s.median / scale)),
                    style,
                ))
                .map_err(err)?
                .label(clock.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
            chart
                .draw_series(points.iter().map(|(t, s)| {
                    let [min, median, max] = [s.min, s.median, s.max].map(|v| v / scale);
                    ErrorBar::new_vertical(*t, min, median, max, style, 6)
                }))
                .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

fn draw_ratio<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    workloads: &[String],
    cells: &BTreeMap<CellKey, CellSummary>,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let bars = ratio_bars(workloads, cells);
    if bars.is_empty() {
        return Err("no cell was measured with both the logical and the ordo clock".into());
    }
    let y_max = bars.iter().map(|b| b.2).fold(1.0f64, f64::max) * 1.15;
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let n = bars.len();
    let chars_max = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let mut chart = ChartBuilder::on(root)
        .caption("ordo / logical clock: median tx/s (STAMP: speedup)", ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(label_area_px(chars_max))
        .y_label_area_size(50)
        .build_cartesian_2d((0..n).into_segmented(), 0.0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc("ratio")
        .x_labels(n)
        .x_label_formatter(&|_| String::new())
        .draw()
        .map_err(err)?;
    draw_bar_labels(root, &chart, &labels)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, t, r))| {
            let style = colour(*t).filled();
            Rectangle::new([(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), *r)], style)
        }))
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(
            [(SegmentValue::Exact(0), 1.0), (SegmentValue::Exact(n), 1.0)],
            BLACK.stroke_width(1),
        ))
        .map_err(err)?;
    Ok(())
}

fn draw_aborts<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    cells: &BTreeMap<CellKey, CellSummary>,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let (reasons, entries) = abort_entries(cells);
    let n = entries.len();
    let y_max = entries.iter().map(|(_, r)| r.iter().sum::<f64>()).fold(0.0f64, f64::max) * 1.15;
    let labels: Vec<String> = entries.iter().map(|e| e.0.clone()).collect();
    let chars_max = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let mut chart = ChartBuilder::on(root)
        .caption("aborted attempts per attempt, by reason", ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(label_area_px(chars_max))
        .y_label_area_size(50)
        .build_cartesian_2d((0..n).into_segmented(), 0.0f64..y_max.max(1.0))
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc("% of attempts")
        .x_labels(n)
        .x_label_formatter(&|_| String::new())
        .draw()
        .map_err(err)?;
    draw_bar_labels(root, &chart, &labels)?;
    for (ri, reason) in reasons.iter().enumerate() {
        let style = colour(ri);
        chart
            .draw_series(entries.iter().enumerate().map(|(i, (_, rates))| {
                let below: f64 = rates[..ri].iter().sum();
                Rectangle::new(
                    [
                        (SegmentValue::Exact(i), below),
                        (SegmentValue::Exact(i + 1), below + rates[ri]),
                    ],
                    style.filled(),
                )
            }))
            .map_err(err)?
            .label(reason.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], style.filled()));
    }
    if !reasons.is_empty() {
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn line(workload: &str, threads: usize, clock: &str, tps: f64) -> String {
        serde_json::json!({
            "workload": workload, "variant": "v", "threads": threads,
            "clock": {"kind": clock},
            "result": {"tx_per_s": tps, "committed": 100, "aborts": [["lock-busy", 5], ["validation", 1]]}
        })
        .to_string()
    }

    fn results_file(dir: &Path, lines: &[String]) -> PathBuf {
        let path = dir.join("r.jsonl");
        std::fs::write(&path, lines.join("\n")).unwrap();
        path
    }

    #[test]
    fn every_kind_is_drawn_in_both_formats() {
        let dir = std::env::temp_dir().join(format!("ordo-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut lines = Vec::new();
        for w in ["ycsb", "tpcc"] {
            for t in 1..=2 {
                for (c, f) in [("logical", 1.0), ("ordo", 0.8)] {
                    for rep in 0..3 {
                        lines.push(line(w, t, c, f * 1e6 * t as f64 + rep as f64));
                    }
                }
            }
        }
        let input = results_file(&dir, &lines);
        for kind in [Kind::Throughput, Kind::Ratio, Kind::Aborts] {
            for ext in ["svg", "png"] {
                let output = dir.join(format!("{kind:?}.{ext}"));
                run(&PlotArgs { results: vec![input.clone()], output: output.clone(), kind })
                    .unwrap();
                assert!(std::fs::metadata(&output).unwrap().len() > 1000, "{kind:?} {ext}");
            }
        }
        let runs = read_runs(&[input]).unwrap();
        let (_, _, cells) = summarise(&runs);
        let c = &cells[&("ycsb v".to_owned(), 2, "ordo".to_owned())];
        assert_eq!(c.median, 1.6e6 + 1.0);
        assert_eq!(c.attempts, 3 * 106);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// The value of attribute `name` in an SVG tag.
    fn attr<'a>(tag: &'a str, name: &str) -> &'a str {
        let start = tag.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        &tag[start..start + tag[start..].find('"').unwrap()]
    }

    #[test]
    fn long_bar_labels_start_below_the_axis_and_end_inside_the_figure() {
        let dir = std::env::temp_dir().join(format!("ordo-plot-labels-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let long = "synthetic-workload-with-a-long-name 5r45w private sync";
        let mut lines = Vec::new();
        for w in ["ycsb", long] {
            for (c, f) in [("logical", 1.0), ("ordo", 0.8)] {
                lines.push(line(w, 2, c, f * 1e6));
            }
        }
        let input = results_file(&dir, &lines);
        for kind in [Kind::Ratio, Kind::Aborts] {
            let output = dir.join(format!("{kind:?}.svg"));
            run(&PlotArgs { results: vec![input.clone()], output: output.clone(), kind }).unwrap();
            let svg = std::fs::read_to_string(&output).unwrap();
            let height: f64 = attr(&svg[svg.find("<svg").unwrap()..], "height").parse().unwrap();
            let mut labels = 0;
            for piece in svg.split("<text").skip(1) {
                let (tag, rest) = piece.split_once('>').unwrap();
                let text = &rest[..rest.find("</text>").unwrap()];
                if !tag.contains("rotate(90,") {
                    continue;
                }
                labels += 1;
                // Anchored at its start, the label runs down from just below the axis ...
                assert_eq!(attr(tag, "text-anchor"), "start", "{kind:?}: {text}");
                // ... and ends inside the figure (at most 0.55 em per character).
                let y: f64 = attr(tag, "y").parse().unwrap();
                let size: f64 = attr(tag, "font-size").parse().unwrap();
                let end = y + 0.55 * size * text.chars().count() as f64;
                assert!(end <= height, "{kind:?}: {text:?} ends at {end} of {height}");
            }
            assert!(labels >= 2, "{kind:?}: {labels} bar labels");
            assert!(svg.contains(long), "{kind:?}: the long label is missing");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn stamp_runs_are_speedups_and_summaries_are_skipped() {
        let dir = std::env::temp_dir().join(format!("ordo-plot-stamp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let run_line = |clock: &str, threads: usize, elapsed_s: f64| {
            serde_json::json!({
                "workload": "stamp", "record": "run", "app": "kmeans",
                "sequential_s": [1.0, 3.0, 2.0],
                "result": {"clock": clock, "threads": threads, "repetition": 0,
                    "elapsed_s": elapsed_s, "commits": 90, "read_only_commits": 10,
                    "aborts": [["validation", 25]], "abort_rate": 0.2}
            })
            .to_string()
        };
        let summary = r#"{"workload": "stamp", "record": "summary", "app": "kmeans"}"#;
        let input = results_file(
            &dir,
            &[run_line("logical", 2, 4.0), summary.into(), run_line("ordo", 2, 5.0)],
        );
        let runs = read_runs(std::slice::from_ref(&input)).unwrap();
        assert_eq!(runs.len(), 2);
        let (_, _, cells) = summarise(&runs);
        let ordo = &cells[&("stamp kmeans".to_owned(), 2, "ordo".to_owned())];
        assert_eq!(ordo.median, 2.0 / 5.0, "speedup over the median sequential time");
        assert_eq!(ordo.attempts, 125);
        for kind in [Kind::Throughput, Kind::Ratio] {
            let output = dir.join(format!("stamp-{kind:?}.svg"));
            run(&PlotArgs { results: vec![input.clone()], output: output.clone(), kind }).unwrap();
            let svg = std::fs::read_to_string(&output).unwrap();
            assert!(svg.contains("stamp kmeans"), "{kind:?}");
        }
        let bad = results_file(&dir, &[run_line("ordo", 2, 0.0)]);
        let e = read_runs(&[bad]).unwrap_err().to_string();
        assert!(e.contains(":1:") && e.contains("elapsed_s"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn bad_results_files_are_named_with_their_line() {
        let dir = std::env::temp_dir().join(format!("ordo-plot-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.jsonl");
        let e = read_runs(&[missing]).unwrap_err().to_string();
        assert!(e.contains("cannot read results file") && e.contains("missing.jsonl"), "{e}");
        let garbage = results_file(&dir, &[line("ycsb", 1, "ordo", 1.0), "{not json".into()]);
        let e = read_runs(&[garbage]).unwrap_err().to_string();
        assert!(e.contains("r.jsonl:2: not a benchmark record"), "{e}");
        let wrong = results_file(&dir, &[r#"{"boundary_nanos": 103}"#.into()]);
        let e = read_runs(&[wrong]).unwrap_err().to_string();
        assert!(e.contains(":1:") && e.contains("no field workload"), "{e}");
        let empty = results_file(&dir, &[String::new()]);
        assert!(read_runs(&[empty]).unwrap_err().to_string().contains("no benchmark records"));
        // A ratio figure needs both clocks.
        let one_clock = results_file(&dir, &[line("ycsb", 1, "ordo", 1.0)]);
        let out = dir.join("ratio.svg");
        let e = run(&PlotArgs { results: vec![one_clock], output: out.clone(), kind: Kind::Ratio })
            .unwrap_err()
            .to_string();
        assert!(e.contains("both the logical and the ordo clock"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
