//! Plots: the calibration heatmap of ORDO Fig. 9 (one cell per ordered core pair, coloured by
//! the measured one-way offset), as SVG or PNG chosen by the file extension.

use std::path::{Path, PathBuf};

use ordo_clock::Calibration;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::CliError;

/// Pixel size of the heatmap.
const SIZE: (u32, u32) = (900, 760);
/// Above this many cores the cells are too small for their numbers.
const LABELLED_CELLS_CORES_MAX: usize = 16;
/// Anchors of the colour scale (viridis), low to high.
const SCALE: [(u8, u8, u8); 5] =
    [(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)];

/// The image formats we write.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum PlotFormat {
    Svg,
    Png,
}

/// A plot file checked up front: a known extension and a path we can create.
#[derive(Debug)]
pub(crate) struct PlotTarget {
    path: PathBuf,
    format: PlotFormat,
    created: bool,
}

impl PlotTarget {
    /// Checks the extension and that the file can be written (creating it, but not truncating
    /// an existing file yet).
    pub(crate) fn open(path: &Path) -> Result<Self, CliError> {
        let extension = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        let format = match extension.as_deref() {
            Some("svg") => PlotFormat::Svg,
            Some("png") => PlotFormat::Png,
            _ => return Err(CliError::PlotFormat { path: path.to_owned() }),
        };
        let existed = path.exists();
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|source| CliError::PlotFile { path: path.to_owned(), source })?;
        Ok(PlotTarget { path: path.to_owned(), format, created: !existed })
    }

    /// Removes the file if [`PlotTarget::open`] created it (the command failed before drawing).
    pub(crate) fn abandon(self) {
        if self.created {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Something drawable on any plotters backend.
pub(crate) trait Figure {
    /// Draws the figure on `root`.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// Draws `figure` into `target` at `size` pixels, in the target's format.
pub(crate) fn render(
    target: PlotTarget,
    size: (u32, u32),
    figure: &impl Figure,
) -> Result<(), CliError> {
    let drawn = match target.format {
        PlotFormat::Svg => {
            let root = SVGBackend::new(&target.path, size).into_drawing_area();
            figure.draw(&root).and_then(|()| root.present().map_err(|e| e.to_string()))
        }
        PlotFormat::Png => {
            let root = BitMapBackend::new(&target.path, size).into_drawing_area();
            figure.draw(&root).and_then(|()| root.present().map_err(|e| e.to_string()))
        }
    };
    drawn.map_err(|detail| CliError::PlotDraw { path: target.path.clone(), detail })
}

/// The calibration heatmap as a [`Figure`].
struct Heatmap<'a>(&'a Calibration);

impl Figure for Heatmap<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        draw(root, self.0)
    }
}

/// Draws the offset heatmap of `calibration` into `target`.
pub(crate) fn calibration_heatmap(
    calibration: &Calibration,
    target: PlotTarget,
) -> Result<(), CliError> {
    render(target, SIZE, &Heatmap(calibration))
}

/// The colour of `value` on the scale from `lo` to `hi`.
fn colour(value: f64, lo: f64, hi: f64) -> RGBColor {
    let t = if hi > lo { ((value - lo) / (hi - lo)).clamp(0.0, 1.0) } else { 0.5 };
    let scaled = t * (SCALE.len() - 1) as f64;
    let i = (scaled.floor() as usize).min(SCALE.len() - 2);
    let f = scaled - i as f64;
    let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * f).round() as u8;
    let (a, b) = (SCALE[i], SCALE[i + 1]);
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    calibration: &Calibration,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let cores = &calibration.cores;
    let n = cores.len();
    let matrix = calibration.matrix_nanos();
    let values: Vec<f64> = matrix.iter().flatten().flatten().map(|&v| v as f64).collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if values.is_empty() { (0.0, 0.0) } else { (lo, hi) };

    let (main, bar) = root.split_horizontally(SIZE.0 - 130);
    let title = format!(
        "ORDO clock offsets, ns (B = {} ns, {} runs/pair)",
        calibration.boundary_nanos, calibration.runs_requested
    );
    let n_i32 = i32::try_from(n).map_err(|e| e.to_string())?;
    // Rows top to bottom like the printed matrix: a reversed y range puts row 0 on top
    // (plotters' matshow example).
    let mut chart = ChartBuilder::on(&main)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0..n_i32, n_i32..0)
        .map_err(err)?;
    let (width_px, height_px) = chart.plotting_area().dim_in_pixel();
    let cells_px = u32::try_from(n.max(1)).map_err(|e| e.to_string())?;
    let x_offset = i32::try_from(width_px / cells_px / 2).unwrap_or(0);
    let y_offset = i32::try_from(height_px / cells_px / 2).unwrap_or(0);
    let label = |v: &i32| {
        usize::try_from(*v)
            .ok()
            .and_then(|i| cores.get(i))
            .map_or_else(String::new, ToString::to_string)
    };
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels((n + 1).min(33))
        .y_labels((n + 1).min(33))
        .x_label_offset(x_offset)
        .y_label_offset(y_offset)
        .x_label_formatter(&label)
        .y_label_formatter(&label)
        .x_desc("to (receiving core)")
        .y_desc("from (stamping core)")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    let mut cells = Vec::with_capacity(n * n);
    for (i, row) in matrix.iter().enumerate() {
        for (j, cell) in row.iter().enumerate() {
            let (x, y) = (j as i32, i as i32);
            let fill = cell.map_or(RGBColor(220, 220, 220), |v| colour(v as f64, lo, hi));
            cells.push(Rectangle::new([(x, y), (x + 1, y + 1)], fill.filled()));
        }
    }
    chart.draw_series(cells).map_err(err)?;
    if n <= LABELLED_CELLS_CORES_MAX {
        let centre = |x: i32, y: i32| {
            let a = chart.backend_coord(&(x, y));
            let b = chart.backend_coord(&(x + 1, y + 1));
            ((a.0 + b.0) / 2, (a.1 + b.1) / 2)
        };
        let anchor = Pos::new(HPos::Center, VPos::Center);
        for (i, row) in matrix.iter().enumerate() {
            for (j, cell) in row.iter().enumerate() {
                let Some(v) = *cell else { continue };
                let t = if hi > lo { (v as f64 - lo) / (hi - lo) } else { 0.5 };
                let ink = if t > 0.6 { BLACK } else { WHITE };
                let style = ("sans-serif", 16).into_font().color(&ink).pos(anchor);
                root.draw(&Text::new(v.to_string(), centre(j as i32, i as i32), style))
                    .map_err(err)?;
            }
        }
    }
    draw_scale(&bar, lo, hi).map_err(err)
}

/// The colour bar: the scale from `lo` (bottom) to `hi` (top) with both ends labelled.
fn draw_scale<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lo: f64,
    hi: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    const STEPS: i32 = 100;
    let (top, bottom, left, right) = (80, SIZE.1 as i32 - 80, 20, 50);
    let height = bottom - top;
    for s in 0..STEPS {
        let y0 = bottom - height * (s + 1) / STEPS;
        let y1 = bottom - height * s / STEPS;
        let v = lo + (hi - lo) * (f64::from(s) + 0.5) / f64::from(STEPS);
        area.draw(&Rectangle::new([(left, y0), (right, y1)], colour(v, lo, hi).filled()))?;
    }
    let style = ("sans-serif", 14).into_font().color(&BLACK);
    area.draw(&Text::new(format!("{hi:.0} ns"), (left, top - 20), style.clone()))?;
    area.draw(&Text::new(format!("{lo:.0} ns"), (left, bottom + 8), style))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_runs_from_first_to_last_anchor() {
        let (a, b) = (SCALE[0], SCALE[SCALE.len() - 1]);
        assert_eq!(colour(0.0, 0.0, 10.0), RGBColor(a.0, a.1, a.2));
        assert_eq!(colour(10.0, 0.0, 10.0), RGBColor(b.0, b.1, b.2));
        assert_eq!(colour(99.0, 0.0, 10.0), RGBColor(b.0, b.1, b.2));
        let _ = colour(5.0, 5.0, 5.0);
    }

    /// A synthetic calibration of `n` cores with offsets growing with the core distance.
    fn synthetic(n: usize) -> Calibration {
        use ordo_clock::{CounterInfo, CounterKind, FrequencySource, Invariance, PairOffset};
        let mut offsets = Vec::new();
        for from in 0..n {
            for to in 0..n {
                if from != to {
                    let d = (from as i64 - to as i64).abs() * 10 + if from < to { 70 } else { 60 };
                    offsets.push(PairOffset {
                        from,
                        to,
                        min_delta_ticks: 2 * d,
                        min_delta_nanos: d,
                        runs: 100,
                    });
                }
            }
        }
        let max = offsets.iter().map(|p| p.min_delta_ticks).max().unwrap_or(0);
        Calibration {
            counter: CounterInfo {
                kind: CounterKind::Rdtscp,
                invariance: Invariance::CpuidInvariantTsc,
                frequency_hz: 2_000_000_000,
                frequency_source: FrequencySource::Given,
            },
            cpu_model: "synthetic".to_owned(),
            cores: (0..n).collect(),
            runs_requested: 100,
            boundary_ticks: max as u64,
            boundary_nanos: max as u64 / 2 + 1,
            offset_nanos_min: offsets.iter().map(|p| p.min_delta_nanos).min(),
            offset_nanos_max: offsets.iter().map(|p| p.min_delta_nanos).max(),
            offsets,
            budget_exhausted: false,
            elapsed_ms: 0,
        }
    }

    #[test]
    fn heatmaps_of_various_sizes_are_drawn() {
        for n in [1, 2, 5, 24] {
            let c = synthetic(n);
            c.validate().unwrap();
            let path =
                std::env::temp_dir().join(format!("ordo-plot-test-{}-{n}.svg", std::process::id()));
            calibration_heatmap(&c, PlotTarget::open(&path).unwrap()).unwrap();
            let svg = std::fs::read_to_string(&path).unwrap();
            assert!(svg.contains("<svg"), "n={n}");
            assert!(svg.matches("<rect").count() >= n * n, "n={n}");
            std::fs::remove_file(&path).unwrap();
        }
    }

    #[test]
    fn unknown_extensions_are_refused_before_anything_is_written() {
        let path = std::env::temp_dir().join(format!("ordo-plot-test-{}.jpg", std::process::id()));
        assert!(matches!(PlotTarget::open(&path), Err(CliError::PlotFormat { .. })));
        assert!(!path.exists());
    }
}
