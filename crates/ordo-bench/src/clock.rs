//! The clock workload: ORDO Fig. 8 — what a timestamp costs, and how many new timestamps each
//! thread can draw, as the thread count grows.
//!
//! # What is measured
//! * **(a) read cost**: nanoseconds per `now()` on each thread while `n` threads read in
//!   parallel. For the ORDO clock this is the counter instruction plus the fixed-point
//!   conversion; for the logical clock an uncontended atomic load (readers share the line); for
//!   the system clock a vDSO `clock_gettime`.
//! * **(b) new-timestamp rate**: `get_ts()` calls per microsecond per thread. For the logical
//!   clock this is the contended `fetch_add` of TL2/OCC/Hekaton (the paper's *A*); for the ORDO
//!   clock ORDO's `new_time`, which waits out the boundary (*O*); for the system clock a wait
//!   for the next distinct `CLOCK_MONOTONIC` value. The ratio ordo/logical per thread count is
//!   the headline of Fig. 8(b).
//!
//! # How
//! Each measurement pins `n` worker threads round-robin to the usable cores, releases them
//! together through a start gate, lets them loop for the configured duration, and stops them with a
//! flag checked every [`STOP_CHECK_OPS`] operations. Each worker times itself, so the result is
//! per-thread work over per-thread time, averaged over the threads. The clock type is resolved
//! once per measurement, so the loop is monomorphic (no enum dispatch per call).
//!
//! Runs are interleaved — for every repetition, every thread count, every metric, each clock in
//! turn (A B C A B C …) — so slow drift of the machine (other tenants, frequency changes) hits
//! every clock alike; the report gives the median and the min–max over repetitions. DESIGN §7:
//! clocks are compared as ratios within one run, never against absolute thresholds.

use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ordo_clock::cores::{self, CoreError};
use ordo_clock::{AnyClock, Clock, ClockDescription, ClockKind};

/// How many operations a worker performs between two looks at the stop flag.
pub const STOP_CHECK_OPS: u64 = 64;

/// The default measurement length per run.
pub const DEFAULT_DURATION: Duration = Duration::from_millis(200);

/// The default number of repetitions of every (threads, metric, clock) run.
pub const DEFAULT_REPETITIONS: usize = 5;

/// The largest thread count accepted (a guard against typos such as `--threads-max 10000`).
pub const THREADS_MAX: usize = 1024;

/// What a run measures.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Nanoseconds per `now()` per thread (Fig. 8a).
    ReadCostNs,
    /// `get_ts()` calls per microsecond per thread (Fig. 8b).
    GetTsPerUsPerThread,
}

impl Metric {
    /// Both metrics, in report order.
    pub const ALL: [Metric; 2] = [Metric::ReadCostNs, Metric::GetTsPerUsPerThread];

    /// A human-readable title.
    pub fn title(self) -> &'static str {
        match self {
            Metric::ReadCostNs => "(a) cost of one now(), ns per call per thread",
            Metric::GetTsPerUsPerThread => "(b) new timestamps: get_ts() per µs per thread",
        }
    }
}

/// The shape of a clock benchmark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockBenchConfig {
    /// The thread counts to measure, in order (e.g. `1..=N`).
    pub thread_counts: Vec<usize>,
    /// The length of one run.
    pub duration: Duration,
    /// How often every run is repeated.
    pub repetitions: usize,
    /// Whether workers are pinned round-robin to the usable cores.
    pub pin_threads: bool,
}

impl ClockBenchConfig {
    /// `1..=threads_max` threads with the default duration and repetitions.
    pub fn up_to(threads_max: usize) -> Self {
        ClockBenchConfig {
            thread_counts: (1..=threads_max).collect(),
            duration: DEFAULT_DURATION,
            repetitions: DEFAULT_REPETITIONS,
            pin_threads: true,
        }
    }
}

/// Why the benchmark cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ClockBenchError {
    /// No thread counts, or a count of 0.
    #[error("thread counts must be at least 1")]
    NoThreads,
    /// A thread count above [`THREADS_MAX`].
    #[error("{threads} threads is more than the {THREADS_MAX} this benchmark accepts")]
    TooManyThreads {
        /// The count asked for.
        threads: usize,
    },
    /// Zero repetitions.
    #[error("repetitions must be at least 1")]
    NoRepetitions,
    /// A zero duration.
    #[error("duration must be positive")]
    ZeroDuration,
    /// No clocks to compare (the crossover mode needs exactly one logical and one ORDO clock).
    #[error("no clocks to measure (the crossover needs exactly the logical and the ORDO clock)")]
    NoClocks,
    /// Crossover work amounts that are missing, above the maximum or not increasing.
    #[error(
        "work per transaction {work_ns:?} ns: give increasing amounts of at most {} ns",
        crate::clock_crossover::WORK_NS_MAX
    )]
    Work {
        /// The amounts given.
        work_ns: Vec<u64>,
    },
    /// The usable cores could not be determined, or pinning failed.
    #[error(transparent)]
    Cores(#[from] CoreError),
    /// A worker thread could not be started.
    #[error("cannot start a benchmark thread: {0}")]
    Spawn(std::io::Error),
    /// A worker thread panicked (a bug).
    #[error("a benchmark thread panicked")]
    WorkerPanicked,
}

/// One run's result.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Sample {
    /// What was measured.
    pub metric: Metric,
    /// Which clock.
    pub clock: ClockKind,
    /// How many threads ran.
    pub threads: usize,
    /// Which repetition (0-based).
    pub repetition: usize,
    /// The per-thread value, averaged over the threads.
    pub value: f64,
    /// Operations completed by all threads together.
    pub ops: u64,
}

/// Median and range of one (metric, clock, threads) cell over the repetitions.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Summary {
    /// What was measured.
    pub metric: Metric,
    /// Which clock.
    pub clock: ClockKind,
    /// How many threads ran.
    pub threads: usize,
    /// Median over the repetitions.
    pub median: f64,
    /// Smallest repetition.
    pub min: f64,
    /// Largest repetition.
    pub max: f64,
    /// Every repetition, in order.
    pub samples: Vec<f64>,
}

/// `get_ts` rate of the ORDO clock over that of the logical clock at one thread count, from
/// the repetitions paired by index (they ran next to each other).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Ratio {
    /// How many threads ran.
    pub threads: usize,
    /// Median of the per-repetition ratios.
    pub median: f64,
    /// Smallest per-repetition ratio.
    pub min: f64,
    /// Largest per-repetition ratio.
    pub max: f64,
}

/// Everything one benchmark run produced.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ClockBenchReport {
    /// The clocks compared.
    pub clocks: Vec<ClockDescription>,
    /// Run length in milliseconds.
    pub duration_ms: u64,
    /// Repetitions per cell.
    pub repetitions: usize,
    /// Every run.
    pub samples: Vec<Sample>,
    /// One per (metric, clock, threads).
    pub summaries: Vec<Summary>,
    /// ORDO over logical `get_ts` rate per thread count (empty unless both clocks ran).
    pub ratios: Vec<Ratio>,
}

/// Progress after each run, for a progress bar.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Runs finished.
    pub done: usize,
    /// Runs in total.
    pub total: usize,
    /// What just finished, e.g. `"rep 2/5, 4 threads, ordo get_ts"`.
    pub label: String,
}

/// Runs the benchmark over `clocks`. See the module docs.
///
/// # Errors
/// Bad configuration is rejected before any thread starts; then core discovery, pinning and
/// thread start-up failures.
pub fn run(
    config: &ClockBenchConfig,
    clocks: &[AnyClock],
    progress: &mut dyn FnMut(Progress),
) -> Result<ClockBenchReport, ClockBenchError> {
    validate(config, clocks)?;
    let usable = if config.pin_threads { cores::usable_cores()? } else { Vec::new() };
    let total = config.repetitions * config.thread_counts.len() * Metric::ALL.len() * clocks.len();
    let mut samples = Vec::with_capacity(total);
    for repetition in 0..config.repetitions {
        for &threads in &config.thread_counts {
            for metric in Metric::ALL {
                for clock in clocks {
                    let (value, ops) = measure(clock, metric, threads, config.duration, &usable)?;
                    samples.push(Sample {
                        metric,
                        clock: clock.kind(),
                        threads,
                        repetition,
                        value,
                        ops,
                    });
                    progress(Progress {
                        done: samples.len(),
                        total,
                        label: format!(
                            "rep {}/{}, {threads} thr, {} {}",
                            repetition + 1,
                            config.repetitions,
                            clock.kind().name(),
                            match metric {
                                Metric::ReadCostNs => "now",
                                Metric::GetTsPerUsPerThread => "get_ts",
                            }
                        ),
                    });
                }
            }
        }
    }
    let summaries = summarize(&samples, config, clocks);
    let ratios = ratios(&samples, config);
    Ok(ClockBenchReport {
        clocks: clocks.iter().map(AnyClock::describe).collect(),
        duration_ms: u64::try_from(config.duration.as_millis()).unwrap_or(u64::MAX),
        repetitions: config.repetitions,
        samples,
        summaries,
        ratios,
    })
}

fn validate(config: &ClockBenchConfig, clocks: &[AnyClock]) -> Result<(), ClockBenchError> {
    if config.thread_counts.is_empty() || config.thread_counts.contains(&0) {
        return Err(ClockBenchError::NoThreads);
    }
    if let Some(&threads) = config.thread_counts.iter().find(|&&t| t > THREADS_MAX) {
        return Err(ClockBenchError::TooManyThreads { threads });
    }
    if config.repetitions == 0 {
        return Err(ClockBenchError::NoRepetitions);
    }
    if config.duration.is_zero() {
        return Err(ClockBenchError::ZeroDuration);
    }
    if clocks.is_empty() {
        return Err(ClockBenchError::NoClocks);
    }
    Ok(())
}

/// One run; resolves the clock type once so the worker loop is monomorphic.
fn measure(
    clock: &AnyClock,
    metric: Metric,
    threads: usize,
    duration: Duration,
    cores: &[usize],
) -> Result<(f64, u64), ClockBenchError> {
    match clock {
        AnyClock::Logical(c) => measure_with(c, metric, threads, duration, cores),
        AnyClock::Ordo(c) => measure_with(c, metric, threads, duration, cores),
        AnyClock::System(c) => measure_with(c, metric, threads, duration, cores),
        AnyClock::Test(c) => measure_with(c, metric, threads, duration, cores),
    }
}

/// What one worker did.
struct WorkerResult {
    ops: u64,
    elapsed: Duration,
}

fn measure_with<C: Clock>(
    clock: &C,
    metric: Metric,
    threads: usize,
    duration: Duration,
    cores: &[usize],
) -> Result<(f64, u64), ClockBenchError> {
    let results = run_gated(threads, duration, cores, "clock", |core, gate| {
        worker(clock, metric, core, gate)
    });
    let mut value_sum = 0.0;
    let mut ops_total = 0u64;
    for result in results {
        let WorkerResult { ops, elapsed } = result?;
        ops_total += ops;
        let nanos = elapsed.as_nanos().max(1) as f64;
        value_sum += match metric {
            Metric::ReadCostNs => nanos / (ops.max(1) as f64),
            Metric::GetTsPerUsPerThread => ops as f64 / (nanos / 1_000.0),
        };
    }
    Ok((value_sum / threads as f64, ops_total))
}

/// Runs `work` on `threads` threads named `ordo-bench-{name}-{i}`, thread `i` given core
/// `cores[i mod len]` to pin itself to (`None` when `cores` is empty) and the gate: the threads
/// are released together once all are ready and stopped after `duration`. Returns each
/// thread's result, then a spawn failure if one stopped the start.
pub(crate) fn run_gated<R: Send>(
    threads: usize,
    duration: Duration,
    cores: &[usize],
    name: &str,
    work: impl Fn(Option<usize>, &StartGate) -> Result<R, ClockBenchError> + Sync,
) -> Vec<Result<R, ClockBenchError>> {
    let gate = StartGate::default();
    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        let mut spawn_error = None;
        for i in 0..threads {
            let core = (!cores.is_empty()).then(|| cores[i % cores.len()]);
            let (gate, work) = (&gate, &work);
            let spawned = std::thread::Builder::new()
                .name(format!("ordo-bench-{name}-{i}"))
                .spawn_scoped(scope, move || work(core, gate));
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    spawn_error = Some(ClockBenchError::Spawn(e));
                    break;
                }
            }
        }
        if spawn_error.is_none() {
            gate.wait_ready(threads);
            gate.open();
            std::thread::sleep(duration);
        } else {
            gate.open();
        }
        gate.stop();
        let mut results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(ClockBenchError::WorkerPanicked)))
            .collect();
        results.extend(spawn_error.map(Err));
        results
    })
}

/// Starts the workers of one run together and stops them.
#[derive(Default)]
pub(crate) struct StartGate {
    ready: AtomicUsize,
    go: AtomicBool,
    stop: AtomicBool,
}

impl StartGate {
    /// A worker is pinned and waiting.
    pub(crate) fn arrive(&self) {
        // Release: pairs with the Acquire load in wait_ready(); nothing else is published.
        self.ready.fetch_add(1, Ordering::Release);
    }

    /// The coordinator waits until `n` workers have arrived (yielding: the workers may need
    /// this core).
    pub(crate) fn wait_ready(&self, n: usize) {
        // Acquire: pairs with arrive().
        while self.ready.load(Ordering::Acquire) < n {
            std::thread::yield_now();
        }
    }

    pub(crate) fn open(&self) {
        // Release: pairs with the Acquire load in wait_open().
        self.go.store(true, Ordering::Release);
    }

    pub(crate) fn wait_open(&self) {
        // Acquire: pairs with open().
        while !self.go.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
    }

    pub(crate) fn stop(&self) {
        // Relaxed: the flag carries no data; results come back through join().
        self.stop.store(true, Ordering::Relaxed);
    }

    pub(crate) fn stopped(&self) -> bool {
        // Relaxed: see stop().
        self.stop.load(Ordering::Relaxed)
    }
}

fn worker<C: Clock>(
    clock: &C,
    metric: Metric,
    core: Option<usize>,
    gate: &StartGate,
) -> Result<WorkerResult, ClockBenchError> {
    let pinned = core.map(cores::pin_current_thread).transpose();
    gate.arrive();
    gate.wait_open();
    pinned?;
    let began = Instant::now();
    let mut ops = 0u64;
    // At least one batch, so a worker the scheduler started late still has a rate.
    loop {
        match metric {
            Metric::ReadCostNs => {
                for _ in 0..STOP_CHECK_OPS {
                    black_box(clock.now());
                }
            }
            Metric::GetTsPerUsPerThread => {
                for _ in 0..STOP_CHECK_OPS {
                    black_box(clock.get_ts());
                }
            }
        }
        ops += STOP_CHECK_OPS;
        if gate.stopped() {
            break;
        }
    }
    Ok(WorkerResult { ops, elapsed: began.elapsed() })
}

/// Median, min and max of `values` (which must not be empty).
pub(crate) fn stats(values: &[f64]) -> (f64, f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    let min = sorted.first().copied().unwrap_or(f64::NAN);
    let max = sorted.last().copied().unwrap_or(f64::NAN);
    (median, min, max)
}

fn cell(samples: &[Sample], metric: Metric, clock: ClockKind, threads: usize) -> Vec<f64> {
    let mut cell: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.metric == metric && s.clock == clock && s.threads == threads)
        .collect();
    cell.sort_by_key(|s| s.repetition);
    cell.into_iter().map(|s| s.value).collect()
}

fn summarize(samples: &[Sample], config: &ClockBenchConfig, clocks: &[AnyClock]) -> Vec<Summary> {
    let mut out = Vec::new();
    for metric in Metric::ALL {
        for &threads in &config.thread_counts {
            for clock in clocks {
                let values = cell(samples, metric, clock.kind(), threads);
                let (median, min, max) = stats(&values);
                out.push(Summary {
                    metric,
                    clock: clock.kind(),
                    threads,
                    median,
                    min,
                    max,
                    samples: values,
                });
            }
        }
    }
    out
}

fn ratios(samples: &[Sample], config: &ClockBenchConfig) -> Vec<Ratio> {
    let metric = Metric::GetTsPerUsPerThread;
    config
        .thread_counts
        .iter()
        .filter_map(|&threads| {
            let ordo = cell(samples, metric, ClockKind::Ordo, threads);
            let logical = cell(samples, metric, ClockKind::Logical, threads);
            if ordo.is_empty() || ordo.len() != logical.len() {
                return None;
            }
            let per_rep: Vec<f64> = ordo.iter().zip(&logical).map(|(o, l)| o / l).collect();
            let (median, min, max) = stats(&per_rep);
            Some(Ratio { threads, median, min, max })
        })
        .collect()
}

impl ClockBenchReport {
    /// The summary at one cell, if it was measured.
    pub fn summary(&self, metric: Metric, clock: ClockKind, threads: usize) -> Option<&Summary> {
        self.summaries
            .iter()
            .find(|s| s.metric == metric && s.clock == clock && s.threads == threads)
    }

    /// JSON lines: one per clock description, per summary and per ratio, each tagged with
    /// `"workload": "clock"` and a `"record"` kind.
    pub fn json_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let mut push = |record: &str, value: serde_json::Value| {
            let mut object = serde_json::json!({ "workload": "clock", "record": record });
            if let (Some(target), serde_json::Value::Object(fields)) =
                (object.as_object_mut(), value)
            {
                target.extend(fields);
            }
            lines.push(object.to_string());
        };
        for clock in &self.clocks {
            push("clock", serde_json::to_value(clock).unwrap_or_default());
        }
        for summary in &self.summaries {
            let mut value = serde_json::to_value(summary).unwrap_or_default();
            if let Some(fields) = value.as_object_mut() {
                fields.insert("duration_ms".to_owned(), self.duration_ms.into());
                fields.insert("repetitions".to_owned(), self.repetitions.into());
            }
            push("summary", value);
        }
        for ratio in &self.ratios {
            let mut value = serde_json::to_value(ratio).unwrap_or_default();
            if let Some(fields) = value.as_object_mut() {
                fields.insert("metric".to_owned(), "ordo_over_logical_get_ts_rate".into());
            }
            push("ratio", value);
        }
        lines
    }

    /// The summary tables: one per metric, a column per clock, plus the ordo/logical ratio.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let kinds: Vec<ClockKind> = self.clocks.iter().map(|c| c.kind).collect();
        let mut threads: Vec<usize> = self.summaries.iter().map(|s| s.threads).collect();
        threads.dedup();
        threads.sort_unstable();
        threads.dedup();
        let _ = writeln!(
            out,
            "ORDO Fig. 8: {} repetitions of {} ms per cell, interleaved; median [min-max]",
            self.repetitions, self.duration_ms
        );
        for clock in &self.clocks {
            let _ = writeln!(out, "  {clock}");
        }
        for metric in Metric::ALL {
            let _ = writeln!(out, "\n{}", metric.title());
            let _ = write!(out, "{:>7}", "threads");
            for kind in &kinds {
                let _ = write!(out, "  {:>24}", kind.name());
            }
            if metric == Metric::GetTsPerUsPerThread && !self.ratios.is_empty() {
                let _ = write!(out, "  {:>24}", "ordo/logical");
            }
            out.push('\n');
            for &t in &threads {
                let _ = write!(out, "{t:>7}");
                for &kind in &kinds {
                    let text = self
                        .summary(metric, kind, t)
                        .map_or_else(|| "-".to_owned(), |s| format_cell(s.median, s.min, s.max));
                    let _ = write!(out, "  {text:>24}");
                }
                if metric == Metric::GetTsPerUsPerThread
                    && let Some(r) = self.ratios.iter().find(|r| r.threads == t)
                {
                    let _ = write!(out, "  {:>24}", format_cell(r.median, r.min, r.max));
                }
                out.push('\n');
            }
        }
        out
    }
}

pub(crate) fn format_cell(median: f64, min: f64, max: f64) -> String {
    format!("{} [{}-{}]", short(median), short(min), short(max))
}

/// Three significant digits, without an exponent for the ranges this benchmark produces.
fn short(x: f64) -> String {
    let magnitude = x.abs();
    if magnitude >= 100.0 {
        format!("{x:.0}")
    } else if magnitude >= 10.0 {
        format!("{x:.1}")
    } else if magnitude >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

#[cfg(test)]
mod tests {
    use ordo_clock::{LogicalClock, SystemClock, TestClock};

    use super::*;

    fn tiny(threads: usize) -> ClockBenchConfig {
        ClockBenchConfig {
            thread_counts: (1..=threads).collect(),
            duration: Duration::from_millis(5),
            repetitions: 3,
            pin_threads: true,
        }
    }

    #[test]
    fn a_small_run_fills_every_cell_in_order() {
        let clocks = [
            AnyClock::Logical(LogicalClock::new()),
            AnyClock::Test(TestClock::new(1_000)),
            AnyClock::System(SystemClock::new()),
        ];
        let mut seen = Vec::new();
        let report = run(&tiny(2), &clocks, &mut |p| seen.push(p.done)).unwrap();
        assert_eq!(seen, (1..=3 * 2 * 2 * 3).collect::<Vec<_>>());
        assert_eq!(report.summaries.len(), 2 * 2 * 3);
        for s in &report.summaries {
            assert_eq!(s.samples.len(), 3);
            assert!(s.min <= s.median && s.median <= s.max, "{s:?}");
            assert!(s.min > 0.0, "{s:?}");
        }
        // Interleaving: consecutive samples cycle through the clocks.
        let kinds: Vec<ClockKind> = report.samples.iter().take(3).map(|s| s.clock).collect();
        assert_eq!(kinds, [ClockKind::Logical, ClockKind::Test, ClockKind::System]);
        assert!(report.ratios.is_empty(), "no ordo clock, no ratio");
        let table = report.table();
        assert!(table.contains("(b) new timestamps"), "{table}");
        let lines = report.json_lines();
        assert_eq!(lines.len(), 3 + 12);
        for line in lines {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            assert_eq!(v["workload"], "clock");
        }
    }

    #[test]
    fn bad_configurations_are_rejected() {
        let clocks = [AnyClock::Logical(LogicalClock::new())];
        let mut ignore = |_| {};
        let bad = |f: fn(&mut ClockBenchConfig)| {
            let mut c = tiny(1);
            f(&mut c);
            c
        };
        assert!(matches!(
            run(&bad(|c| c.thread_counts = vec![]), &clocks, &mut ignore),
            Err(ClockBenchError::NoThreads)
        ));
        assert!(matches!(
            run(&bad(|c| c.thread_counts = vec![0]), &clocks, &mut ignore),
            Err(ClockBenchError::NoThreads)
        ));
        assert!(matches!(
            run(&bad(|c| c.thread_counts = vec![THREADS_MAX + 1]), &clocks, &mut ignore),
            Err(ClockBenchError::TooManyThreads { .. })
        ));
        assert!(matches!(
            run(&bad(|c| c.repetitions = 0), &clocks, &mut ignore),
            Err(ClockBenchError::NoRepetitions)
        ));
        assert!(matches!(
            run(&bad(|c| c.duration = Duration::ZERO), &clocks, &mut ignore),
            Err(ClockBenchError::ZeroDuration)
        ));
        assert!(matches!(run(&tiny(1), &[], &mut ignore), Err(ClockBenchError::NoClocks)));
    }

    #[test]
    fn stats_are_median_min_max() {
        assert_eq!(stats(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(stats(&[4.0, 1.0, 2.0, 3.0]), (2.5, 1.0, 4.0));
        assert_eq!(short(1234.5), "1234");
        assert_eq!(short(0.1234), "0.123");
    }
}
