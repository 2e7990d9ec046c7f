//! # STAMP kernels on Ordo transactions (ORDO §6.6, Fig. 15)
//!
//! Each kernel of the STAMP suite (Minh et al., IISWC'08) is a [`Kernel`]: its inputs are made by
//! a generator driven by the original generators' parameters ([`Size::Small`], [`Size::Medium`]
//! and [`Size::Large`] presets), it has a plain sequential version (no transactions) that defines
//! the expected result, and a parallel version whose shared state lives in the engine and is
//! changed only inside Ordo transactions. A run reports the parallel version's speedup over the
//! sequential one and fails unless [`Kernel::verify`] accepts the parallel output against the
//! sequential output.
//!
//! Kernels whose result depends on the interleaving (vacation, labyrinth) verify invariants
//! that every serial order satisfies instead of equality; each kernel's module says which.
//!
//! # The runner
//! [`run_kernel`] generates one input, then for every repetition times the sequential version
//! once and the parallel version once per (thread count, clock), each on a fresh database
//! (in memory, or durable in a fresh directory per `RunConfig::durability`, see
//! [`crate::engine`]), clocks interleaved (A B A B …) so drift of a loaded machine hits every
//! clock alike. Every parallel output is checked with [`Kernel::verify`] against the first
//! sequential output; a failed check fails the run. The [`StampReport`] gives, per cell, the
//! median and min–max parallel time, the speedup (median sequential time / median parallel
//! time), commits and aborts by reason from [`Ordo::stats`], and the ordo/logical ratio of
//! speedups. [`run_app`] dispatches on [`App`] with one `match`.
//!
//! What is timed is the whole [`Kernel::parallel`] call, which includes putting the kernel's
//! shared state into the fresh database (a few thousand objects at most for the kernels here);
//! STAMP starts its timer after that set-up. The sequential version builds its plain structures
//! inside its timed call too, so both sides pay for their set-up.

use std::fmt::{Debug, Write as _};
use std::str::FromStr;
use std::time::Instant;

use ordo::{AbortKind, Addr, Config, Ordo};
use ordo_clock::Clock;

use crate::driver::Spread;
use crate::error::BenchError;

pub mod genome;
pub mod intruder;
pub mod kmeans;
pub mod labyrinth;
pub mod ssca2;
pub mod vacation;

/// Input size preset, after the STAMP README's recommended inputs: "small" and "medium" (scaled
/// where a kernel notes it, so that the medium input runs in seconds here), and "large", the
/// README's standard non-simulator inputs unscaled (seconds to minutes sequentially).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Size {
    /// Seconds-scale inputs for tests and the suite.
    Small,
    /// The larger preset.
    Medium,
    /// STAMP's standard inputs (the README's `++` runs), as the papers report them.
    Large,
}

/// One STAMP kernel.
pub trait Kernel {
    /// The kernel's name as `ordo bench stamp --app NAME` spells it.
    const NAME: &'static str;
    /// Generator parameters (the original generator's flags).
    type Params: Clone + Debug + serde::Serialize + Send + Sync;
    /// A generated input, shared read-only by the workers.
    type Input: Send + Sync;
    /// What a run produces, comparable between the sequential and the parallel versions.
    type Output: Debug + Send;

    /// The parameters of a preset.
    fn params(size: Size) -> Self::Params;
    /// Checks every parameter; the error names the first one out of range.
    fn validate(params: &Self::Params) -> Result<(), BenchError>;
    /// Generates the input deterministically from `seed`.
    fn generate(params: &Self::Params, seed: u64) -> Result<Self::Input, BenchError>;
    /// The sequential version: plain data structures, no transactions.
    fn sequential(input: &Self::Input) -> Self::Output;
    /// The parallel version on `threads` threads; every access to shared state is inside a
    /// transaction of `db`.
    fn parallel<C: Clock + Send + Sync + 'static>(
        db: &Ordo<C>,
        input: &Self::Input,
        threads: usize,
    ) -> Result<Self::Output, BenchError>;
    /// [`Kernel::sequential`] and the seconds of the region STAMP's timer brackets in its
    /// sequential build. By default the whole call; a kernel whose STAMP original builds its
    /// data structures before starting the timer (vacation, labyrinth, intruder) leaves that
    /// part out.
    fn sequential_timed(input: &Self::Input) -> (Self::Output, f64) {
        let start = Instant::now();
        let out = Self::sequential(input);
        (out, start.elapsed().as_secs_f64())
    }
    /// [`Kernel::parallel`] and the seconds of the region STAMP's timer brackets, as
    /// [`Kernel::sequential_timed`].
    fn parallel_timed<C: Clock + Send + Sync + 'static>(
        db: &Ordo<C>,
        input: &Self::Input,
        threads: usize,
    ) -> Result<(Self::Output, f64), BenchError> {
        let start = Instant::now();
        let out = Self::parallel(db, input, threads)?;
        Ok((out, start.elapsed().as_secs_f64()))
    }
    /// Accepts the parallel output when it is what the sequential version computes (or, for
    /// order-dependent kernels, satisfies the invariants every serial order satisfies);
    /// otherwise [`BenchError::Inconsistent`] says what differs.
    fn verify(
        input: &Self::Input,
        sequential: &Self::Output,
        parallel: &Self::Output,
    ) -> Result<(), BenchError>;

    /// Overrides one parameter from `--param NAME=VALUE` (the original generator's flag
    /// letter or a long name, as the kernel documents). Kernels without overrides refuse all.
    fn set_param(params: &mut Self::Params, name: &str, value: &str) -> Result<(), BenchError> {
        let _ = (params, value);
        Err(BenchError::BadParameter {
            app: Self::NAME,
            name: name.to_owned(),
            detail: "this kernel takes no parameter overrides".to_owned(),
        })
    }
}

/// The STAMP applications, as `--app` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum App {
    /// K-means clustering ([`kmeans`]).
    Kmeans,
    /// SSCA2 kernel 1, graph construction ([`ssca2`]).
    Ssca2,
    /// Travel reservations.
    Vacation,
    /// Network intrusion detection.
    Intruder,
    /// Gene sequencing.
    Genome,
    /// Maze routing ([`labyrinth`]).
    Labyrinth,
}

impl App {
    /// Every application, in the STAMP paper's order of this suite.
    pub const ALL: [App; 6] =
        [App::Kmeans, App::Ssca2, App::Vacation, App::Intruder, App::Genome, App::Labyrinth];

    /// The name `--app` takes.
    pub fn name(self) -> &'static str {
        match self {
            App::Kmeans => "kmeans",
            App::Ssca2 => "ssca2",
            App::Vacation => "vacation",
            App::Intruder => "intruder",
            App::Genome => "genome",
            App::Labyrinth => "labyrinth",
        }
    }
}

impl FromStr for App {
    type Err = BenchError;
    fn from_str(s: &str) -> Result<Self, BenchError> {
        App::ALL.into_iter().find(|a| a.name() == s).ok_or(BenchError::OutOfRange {
            name: "app",
            value: s.to_owned(),
            expected: "kmeans, ssca2, vacation, intruder, genome or labyrinth",
        })
    }
}

/// How [`run_kernel`] measures.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RunConfig {
    /// Thread counts of the parallel version.
    pub thread_counts: Vec<usize>,
    /// Measurements per cell (and of the sequential version).
    pub repetitions: usize,
    /// The generator's seed.
    pub seed: u64,
    /// Durability of every run's database (in memory by default).
    pub durability: crate::engine::Durability,
}

impl RunConfig {
    fn validate(&self) -> Result<(), BenchError> {
        if self.thread_counts.is_empty() || self.thread_counts.contains(&0) {
            return Err(BenchError::ZeroThreads);
        }
        if let Some(t) = self.thread_counts.iter().find(|t| **t > THREADS_MAX) {
            return Err(BenchError::OutOfRange {
                name: "threads",
                value: t.to_string(),
                expected: "1..=256",
            });
        }
        if self.repetitions == 0 {
            return Err(BenchError::OutOfRange {
                name: "repetitions",
                value: "0".to_owned(),
                expected: "at least 1",
            });
        }
        Ok(())
    }
}

/// The most threads a kernel run accepts (the engine's default slot count).
pub const THREADS_MAX: usize = ordo::THREADS_MAX_DEFAULT;

/// One timed run of the parallel version.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ParallelRun {
    /// The clock's name (`logical`, `ordo`, `system`, …).
    pub clock: String,
    /// Threads.
    pub threads: usize,
    /// Repetition (0-based).
    pub repetition: usize,
    /// Wall-clock time of [`Kernel::parallel`], in seconds.
    pub elapsed_s: f64,
    /// Committed read-write transactions.
    pub commits: u64,
    /// Committed read-only transactions.
    pub read_only_commits: u64,
    /// Aborted attempts by reason (names of [`AbortKind`]).
    pub aborts: Vec<(String, u64)>,
    /// Aborted attempts per attempt.
    pub abort_rate: f64,
}

/// Everything one [`run_kernel`] measured.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct StampReport {
    /// The kernel.
    pub app: &'static str,
    /// Its generator parameters.
    pub params: serde_json::Value,
    /// The measurement shape.
    pub config: RunConfig,
    /// Times of the sequential version, one per repetition, in seconds.
    pub sequential_s: Vec<f64>,
    /// Every parallel run, in the order run.
    pub runs: Vec<ParallelRun>,
}

/// One (threads, clock) cell of a report.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Cell {
    /// Threads.
    pub threads: usize,
    /// Clock name.
    pub clock: String,
    /// Parallel time over the repetitions, in seconds.
    pub parallel_s: Spread,
    /// Median sequential time / median parallel time.
    pub speedup: f64,
    /// Median abort rate.
    pub abort_rate: f64,
    /// Median commits (read-write and read-only).
    pub commits: f64,
    /// Aborts by reason, summed over the repetitions.
    pub aborts: Vec<(String, u64)>,
}

impl StampReport {
    /// The sequential time over the repetitions.
    pub fn sequential(&self) -> Spread {
        Spread::of(&self.sequential_s)
    }

    /// One cell per (threads, clock), in run order.
    pub fn cells(&self) -> Vec<Cell> {
        let mut keys: Vec<(usize, String)> = Vec::new();
        for r in &self.runs {
            if !keys.iter().any(|(t, c)| *t == r.threads && *c == r.clock) {
                keys.push((r.threads, r.clock.clone()));
            }
        }
        let sequential = self.sequential().median;
        keys.into_iter()
            .map(|(threads, clock)| {
                let runs: Vec<&ParallelRun> =
                    self.runs.iter().filter(|r| r.threads == threads && r.clock == clock).collect();
                let times: Vec<f64> = runs.iter().map(|r| r.elapsed_s).collect();
                let parallel_s = Spread::of(&times);
                let rates: Vec<f64> = runs.iter().map(|r| r.abort_rate).collect();
                let commits: Vec<f64> =
                    runs.iter().map(|r| (r.commits + r.read_only_commits) as f64).collect();
                let mut aborts: Vec<(String, u64)> =
                    AbortKind::ALL.iter().map(|k| (k.name().to_owned(), 0)).collect();
                for r in &runs {
                    for (name, n) in &r.aborts {
                        if let Some(slot) = aborts.iter_mut().find(|(k, _)| k == name) {
                            slot.1 += n;
                        }
                    }
                }
                Cell {
                    threads,
                    clock,
                    speedup: sequential / parallel_s.median.max(1e-12),
                    parallel_s,
                    abort_rate: Spread::of(&rates).median,
                    commits: Spread::of(&commits).median,
                    aborts,
                }
            })
            .collect()
    }

    /// The ORDO clock's speedup over the logical clock's at `threads` (their median parallel
    /// times' ratio, logical / ordo), when both ran.
    pub fn ordo_logical_ratio(&self, threads: usize) -> Option<f64> {
        let cells = self.cells();
        let time = |name: &str| {
            cells.iter().find(|c| c.threads == threads && c.clock == name).map(|c| c.parallel_s)
        };
        Some(time("logical")?.median / time("ordo")?.median.max(1e-12))
    }

    /// A plain-text summary table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let seq = self.sequential();
        let _ = writeln!(
            out,
            "{} {}: sequential {:.4} s [{:.4}-{:.4}], {} repetitions, durability {}",
            self.app,
            self.params,
            seq.median,
            seq.min,
            seq.max,
            self.config.repetitions,
            self.config.durability.name()
        );
        let _ = writeln!(
            out,
            "{:>7} {:>8} {:>28} {:>8} {:>7} {:>10}  aborts by reason",
            "threads", "clock", "parallel s median [min-max]", "speedup", "abort%", "commits"
        );
        for c in self.cells() {
            let reasons: Vec<String> =
                c.aborts.iter().filter(|(_, n)| *n > 0).map(|(k, n)| format!("{k}={n}")).collect();
            let _ = writeln!(
                out,
                "{:>7} {:>8} {:>10.4} [{:.4}-{:.4}] {:>8.2} {:>7.2} {:>10.0}  {}",
                c.threads,
                c.clock,
                c.parallel_s.median,
                c.parallel_s.min,
                c.parallel_s.max,
                c.speedup,
                100.0 * c.abort_rate,
                c.commits,
                if reasons.is_empty() { "-".to_owned() } else { reasons.join(" ") }
            );
        }
        for &t in &self.config.thread_counts {
            if let Some(r) = self.ordo_logical_ratio(t) {
                let _ = writeln!(out, "{t} threads: ordo/logical speedup ratio {r:.3}");
            }
        }
        out
    }
}

/// Where a run is, for progress bars.
#[derive(Clone, Copy, Debug)]
pub struct Progress<'a> {
    /// Steps done.
    pub done: usize,
    /// Steps in all.
    pub total: usize,
    /// What runs next.
    pub label: &'a str,
}

/// Runs kernel `K` with `params`: generate, time the sequential version, then time and verify
/// the parallel version for every (thread count, clock), repeated and interleaved. `clocks`
/// pairs a name (used for the ordo/logical ratio) with a clock; each run gets a fresh database
/// on a clone of it.
pub fn run_kernel<K: Kernel, C: Clock + Clone + Send + Sync + 'static>(
    params: &K::Params,
    config: &RunConfig,
    clocks: &[(String, C)],
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<StampReport, BenchError> {
    K::validate(params)?;
    config.validate()?;
    if clocks.is_empty() {
        return Err(BenchError::OutOfRange {
            name: "clock",
            value: "none".to_owned(),
            expected: "at least one clock",
        });
    }
    let total = config.repetitions * (1 + config.thread_counts.len() * clocks.len());
    let mut done = 0;
    progress(Progress { done, total, label: "generating" });
    let input = K::generate(params, config.seed)?;
    let mut expected: Option<K::Output> = None;
    let mut report = StampReport {
        app: K::NAME,
        params: serde_json::to_value(params).unwrap_or(serde_json::Value::Null),
        config: config.clone(),
        sequential_s: Vec::new(),
        runs: Vec::new(),
    };
    for repetition in 0..config.repetitions {
        progress(Progress { done, total, label: "sequential" });
        let (out, sequential_s) = K::sequential_timed(&input);
        report.sequential_s.push(sequential_s);
        done += 1;
        let expected = expected.get_or_insert(out);
        for &threads in &config.thread_counts {
            for (name, clock) in clocks {
                let label = format!("{threads} threads, {name}");
                progress(Progress { done, total, label: &label });
                let (db, dir) = crate::engine::open(
                    Config::default(),
                    clock.clone(),
                    &config.durability,
                    K::NAME,
                )?;
                let (out, elapsed_s) = K::parallel_timed(&db, &input, threads)?;
                K::verify(&input, expected, &out)?;
                let stats = db.stats();
                let aborts: Vec<(String, u64)> = AbortKind::ALL
                    .iter()
                    .map(|k| (k.name().to_owned(), stats.aborts_of(*k)))
                    .collect();
                let aborted = stats.aborts_total();
                let attempts = aborted + stats.commits + stats.read_only_commits;
                report.runs.push(ParallelRun {
                    clock: name.clone(),
                    threads,
                    repetition,
                    elapsed_s,
                    commits: stats.commits,
                    read_only_commits: stats.read_only_commits,
                    aborts,
                    abort_rate: aborted as f64 / attempts.max(1) as f64,
                });
                // The database closes before its directory is removed.
                drop(db);
                drop(dir);
                done += 1;
            }
        }
    }
    progress(Progress { done, total, label: "done" });
    Ok(report)
}

/// The parameters of `app` at `size` with `overrides` (`NAME=VALUE`) applied, as JSON.
pub fn app_params(
    app: App,
    size: Size,
    overrides: &[(String, String)],
) -> Result<serde_json::Value, BenchError> {
    fn with<K: Kernel>(
        size: Size,
        overrides: &[(String, String)],
    ) -> Result<serde_json::Value, BenchError> {
        let p = kernel_params::<K>(size, overrides)?;
        Ok(serde_json::to_value(&p).unwrap_or(serde_json::Value::Null))
    }
    match app {
        App::Kmeans => with::<kmeans::Kmeans>(size, overrides),
        App::Ssca2 => with::<ssca2::Ssca2>(size, overrides),
        App::Labyrinth => with::<labyrinth::Labyrinth>(size, overrides),
        App::Vacation => with::<vacation::Vacation>(size, overrides),
        App::Intruder => with::<intruder::Intruder>(size, overrides),
        App::Genome => with::<genome::Genome>(size, overrides),
    }
}

/// `K`'s preset for `size` with `overrides` applied and validated.
pub fn kernel_params<K: Kernel>(
    size: Size,
    overrides: &[(String, String)],
) -> Result<K::Params, BenchError> {
    let mut params = K::params(size);
    for (name, value) in overrides {
        K::set_param(&mut params, name, value)?;
    }
    K::validate(&params)?;
    Ok(params)
}

/// Runs `app` at `size` with `overrides`: [`run_kernel`] for the kernel `app` names.
pub fn run_app<C: Clock + Clone + Send + Sync + 'static>(
    app: App,
    size: Size,
    overrides: &[(String, String)],
    config: &RunConfig,
    clocks: &[(String, C)],
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<StampReport, BenchError> {
    fn go<K: Kernel, C: Clock + Clone + Send + Sync + 'static>(
        size: Size,
        overrides: &[(String, String)],
        config: &RunConfig,
        clocks: &[(String, C)],
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<StampReport, BenchError> {
        let params = kernel_params::<K>(size, overrides)?;
        run_kernel::<K, C>(&params, config, clocks, progress)
    }
    match app {
        App::Kmeans => go::<kmeans::Kmeans, C>(size, overrides, config, clocks, progress),
        App::Ssca2 => go::<ssca2::Ssca2, C>(size, overrides, config, clocks, progress),
        App::Labyrinth => go::<labyrinth::Labyrinth, C>(size, overrides, config, clocks, progress),
        App::Vacation => go::<vacation::Vacation, C>(size, overrides, config, clocks, progress),
        App::Intruder => go::<intruder::Intruder, C>(size, overrides, config, clocks, progress),
        App::Genome => go::<genome::Genome, C>(size, overrides, config, clocks, progress),
    }
}

/// Parses the value of parameter `name` of kernel `app`.
pub(crate) fn parse_value<T: FromStr>(
    app: &'static str,
    name: &str,
    value: &str,
) -> Result<T, BenchError>
where
    T::Err: std::fmt::Display,
{
    value.parse().map_err(|e: T::Err| BenchError::BadParameter {
        app,
        name: name.to_owned(),
        detail: format!("cannot parse {value:?}: {e}"),
    })
}

/// An unknown parameter of kernel `app`; `known` lists the accepted names.
pub(crate) fn unknown_param(app: &'static str, name: &str, known: &str) -> BenchError {
    BenchError::BadParameter {
        app,
        name: name.to_owned(),
        detail: format!("unknown parameter; this kernel takes {known}"),
    }
}

/// Checks that `value` of parameter `name` lies in `range`.
pub(crate) fn check_range<T: PartialOrd + ToString>(
    name: &'static str,
    value: T,
    range: std::ops::RangeInclusive<T>,
    expected: &'static str,
) -> Result<(), BenchError> {
    if range.contains(&value) {
        Ok(())
    } else {
        Err(BenchError::OutOfRange { name, value: value.to_string(), expected })
    }
}

/// Checks a thread count of [`Kernel::parallel`].
pub(crate) fn check_threads(threads: usize) -> Result<(), BenchError> {
    if threads == 0 {
        return Err(BenchError::ZeroThreads);
    }
    check_range("threads", threads, 1..=THREADS_MAX, "1..=256")
}

/// A parameter out of range, for the kernels' `validate`.
pub(crate) fn out_of_range(name: &'static str, value: u32, expected: &'static str) -> BenchError {
    BenchError::OutOfRange { name, value: value.to_string(), expected }
}

/// Runs `body(thread)` on `threads` scoped threads and returns their results in thread order;
/// the first error (or a panicked thread) is returned instead.
pub(crate) fn on_threads<T: Send>(
    threads: usize,
    body: impl Fn(usize) -> Result<T, BenchError> + Sync,
) -> Result<Vec<T>, BenchError> {
    let results: Vec<Result<T, BenchError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let body = &body;
                s.spawn(move || body(t))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(BenchError::Inconsistent("a STAMP worker thread panicked".to_owned()))
                })
            })
            .collect()
    });
    results.into_iter().collect()
}

/// The contiguous share `[start, end)` of `0..n` that thread `t` of `threads` owns (STAMP's
/// `createPartition`).
pub(crate) fn partition(n: usize, t: usize, threads: usize) -> std::ops::Range<usize> {
    let per = n.div_ceil(threads.max(1));
    let start = (t * per).min(n);
    start..((t + 1) * per).min(n)
}

/// Encodes 64-bit words as an object payload.
pub(crate) fn words_to_bytes(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Decodes an object payload into 64-bit words (a trailing partial word is ignored).
pub(crate) fn bytes_to_words(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect()
}

/// Objects [`alloc_objects`] allocates per transaction.
const ALLOC_PER_TX: usize = 256;

/// Allocates one object per payload, [`ALLOC_PER_TX`] per transaction, and returns their
/// addresses in order. Payloads are taken a batch at a time, so a caller can pass a lazy
/// iterator (or the same payload repeated) without building them all first.
pub(crate) fn alloc_objects<C: Clock, P: AsRef<[u8]>>(
    db: &Ordo<C>,
    payloads: impl ExactSizeIterator<Item = P>,
) -> Result<Vec<Addr>, BenchError> {
    let mut addrs = Vec::with_capacity(payloads.len());
    let mut payloads = payloads.peekable();
    let mut batch: Vec<P> = Vec::with_capacity(ALLOC_PER_TX);
    while payloads.peek().is_some() {
        batch.clear();
        batch.extend(payloads.by_ref().take(ALLOC_PER_TX));
        // A retried attempt allocates the whole batch again; only the committed one counts.
        addrs.extend(db.run(|tx| {
            batch
                .iter()
                .map(|p| tx.alloc_bytes(p.as_ref()))
                .collect::<Result<Vec<_>, ordo::Error>>()
        })?);
    }
    Ok(addrs)
}
