//! Where the ORDO clock wins: the clock draws of an engine transaction plus a chosen amount of
//! other work, per clock, per thread count — and the crossover, the work per transaction below
//! which the ORDO clock gives more transactions per second than the logical clock.
//!
//! # Why
//! `ordo bench clock` (Fig. 8) draws timestamps back to back: there the logical clock's shared
//! counter is as contended as it can be, and ORDO wins from a few threads on. An engine
//! transaction draws a handful of timestamps between reads, writes and validation, so the
//! counter's cache line has time to settle between draws; on short transactions the shared
//! counter still costs, on long ones it does not. This mode measures that trade directly.
//!
//! # One transaction
//! The draws of a strictly serializable read-write commit (`txn::commit`, FaRMv2 Alg. 2):
//! `now()` for the read timestamp at begin, then `work_ns` of private work (a dependent
//! multiply-add chain on the thread's own stack: no shared line, so it neither helps nor
//! hinders either clock), then `now()` where the write wait starts, `get_ts()` for the write timestamp and
//! `now()` where the wait ends. For the logical clock the three `now()` are loads of the shared
//! counter and `get_ts()` is its `fetch_add`; for ORDO all four are reads of the core's own
//! counter, and `get_ts()` waits out the boundary.
//!
//! # How
//! The work is calibrated once (nanoseconds per iteration of the chain, on one thread); each
//! cell (`work_ns`, threads, clock) pins `threads` workers round-robin to the usable cores,
//! starts them together and counts transactions for the configured duration. Runs interleave
//! every clock for every cell of every repetition (A B A B), and the ratio ordo/logical is taken
//! per repetition from runs that ran next to each other; the table gives medians and min–max.
//! The **crossover** at a thread count is the largest work whose median ratio is ≥ 1 while every
//! smaller work's is too (`None` when the logical clock already wins with no work at all; the
//! largest work measured when ORDO wins everywhere, reported as "≥").

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use ordo_clock::cores;
use ordo_clock::{AnyClock, Clock, ClockDescription, ClockKind};

use crate::clock::{ClockBenchError, StartGate, format_cell, run_gated, stats};

/// Work amounts measured unless told otherwise, in nanoseconds per transaction.
pub const WORK_NS_DEFAULT: [u64; 9] = [0, 25, 50, 100, 200, 400, 800, 1_600, 3_200];

/// The most work per transaction accepted (a guard against typos).
pub const WORK_NS_MAX: u64 = 1_000_000;

/// Transactions between two looks at the stop flag.
const STOP_CHECK_TXNS: u64 = 16;

/// The shape of a crossover run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrossoverConfig {
    /// Thread counts, in order.
    pub thread_counts: Vec<usize>,
    /// Work per transaction, nanoseconds, in increasing order.
    pub work_ns: Vec<u64>,
    /// Length of one run.
    pub duration: Duration,
    /// Repetitions of every cell.
    pub repetitions: usize,
    /// Whether workers are pinned round-robin to the usable cores.
    pub pin_threads: bool,
}

/// One run: transactions per microsecond over all threads.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CrossoverSample {
    /// Which clock.
    pub clock: ClockKind,
    /// Threads that ran.
    pub threads: usize,
    /// Work per transaction, nanoseconds.
    pub work_ns: u64,
    /// Which repetition (0-based).
    pub repetition: usize,
    /// Transactions per microsecond, all threads together.
    pub txn_per_us: f64,
}

/// One (threads, work) cell: both clocks' medians and their ratio.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CrossoverCell {
    /// Threads that ran.
    pub threads: usize,
    /// Work per transaction, nanoseconds.
    pub work_ns: u64,
    /// Logical clock, transactions per µs: median, min, max.
    pub logical: (f64, f64, f64),
    /// ORDO clock, transactions per µs: median, min, max.
    pub ordo: (f64, f64, f64),
    /// ORDO over logical, per repetition: median, min, max.
    pub ratio: (f64, f64, f64),
}

/// The crossover at one thread count (module docs).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Crossover {
    /// Threads that ran.
    pub threads: usize,
    /// The largest work (ns) up to which ORDO's median ratio stays ≥ 1; `None` when it loses
    /// at the smallest work measured.
    pub ordo_wins_up_to_ns: Option<u64>,
    /// Whether ORDO won at every work measured (the crossover lies beyond the largest).
    pub beyond_largest: bool,
}

/// Everything a crossover run produced.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CrossoverReport {
    /// The two clocks.
    pub clocks: Vec<ClockDescription>,
    /// Calibrated cost of one work iteration, nanoseconds.
    pub ns_per_iteration: f64,
    /// Run length, milliseconds.
    pub duration_ms: u64,
    /// Repetitions per cell.
    pub repetitions: usize,
    /// Every run.
    pub samples: Vec<CrossoverSample>,
    /// One per (threads, work).
    pub cells: Vec<CrossoverCell>,
    /// One per thread count.
    pub crossovers: Vec<Crossover>,
}

/// Runs the crossover measurement over a logical and an ORDO clock.
///
/// # Errors
/// Bad configuration (no threads, a work amount above [`WORK_NS_MAX`], work not increasing,
/// not exactly one logical and one ORDO clock) before any thread starts; then core discovery,
/// pinning and thread start-up failures.
pub fn run(
    config: &CrossoverConfig,
    clocks: &[AnyClock],
) -> Result<CrossoverReport, ClockBenchError> {
    validate(config, clocks)?;
    let usable = if config.pin_threads { cores::usable_cores()? } else { Vec::new() };
    let ns_per_iteration = calibrate();
    let mut samples = Vec::new();
    for repetition in 0..config.repetitions {
        for &threads in &config.thread_counts {
            for &work_ns in &config.work_ns {
                let iterations = (work_ns as f64 / ns_per_iteration).round() as u64;
                for clock in clocks {
                    let txn_per_us = measure(clock, threads, iterations, config.duration, &usable)?;
                    samples.push(CrossoverSample {
                        clock: clock.kind(),
                        threads,
                        work_ns,
                        repetition,
                        txn_per_us,
                    });
                }
            }
        }
    }
    let cells = cells(&samples, config);
    let crossovers = config.thread_counts.iter().map(|&t| crossover(&cells, t)).collect();
    Ok(CrossoverReport {
        clocks: clocks.iter().map(AnyClock::describe).collect(),
        ns_per_iteration,
        duration_ms: u64::try_from(config.duration.as_millis()).unwrap_or(u64::MAX),
        repetitions: config.repetitions,
        samples,
        cells,
        crossovers,
    })
}

fn validate(config: &CrossoverConfig, clocks: &[AnyClock]) -> Result<(), ClockBenchError> {
    if config.thread_counts.is_empty() || config.thread_counts.contains(&0) {
        return Err(ClockBenchError::NoThreads);
    }
    if let Some(&threads) = config.thread_counts.iter().find(|&&t| t > crate::clock::THREADS_MAX) {
        return Err(ClockBenchError::TooManyThreads { threads });
    }
    if config.repetitions == 0 {
        return Err(ClockBenchError::NoRepetitions);
    }
    if config.duration.is_zero() {
        return Err(ClockBenchError::ZeroDuration);
    }
    if config.work_ns.is_empty()
        || config.work_ns.iter().any(|&w| w > WORK_NS_MAX)
        || config.work_ns.windows(2).any(|w| w[0] >= w[1])
    {
        return Err(ClockBenchError::Work { work_ns: config.work_ns.clone() });
    }
    let has = |kind| clocks.iter().filter(|c| c.kind() == kind).count() == 1;
    if clocks.len() != 2 || !has(ClockKind::Logical) || !has(ClockKind::Ordo) {
        return Err(ClockBenchError::NoClocks);
    }
    Ok(())
}

/// `iterations` steps of a dependent multiply-add chain. Each step passes through
/// `black_box`, so the compiler can neither fold the chain nor vectorize it; what that costs
/// (a store and load on the thread's own stack) touches no shared line.
#[inline(always)]
fn work(iterations: u64) {
    let mut x = black_box(0x9E37_79B9_7F4A_7C15u64);
    for _ in 0..iterations {
        x = black_box(x.wrapping_mul(0x5851_F42D_4C95_7F2D).wrapping_add(1));
    }
    black_box(x);
}

/// Nanoseconds per work iteration on this thread: the best of a few timed batches.
fn calibrate() -> f64 {
    const BATCH: u64 = 1 << 20;
    work(BATCH); // warm up
    (0..5)
        .map(|_| {
            let began = Instant::now();
            work(BATCH);
            began.elapsed().as_nanos() as f64 / BATCH as f64
        })
        .fold(f64::INFINITY, f64::min)
        .max(1e-3)
}

/// One run; resolves the clock type once so the worker loop is monomorphic.
fn measure(
    clock: &AnyClock,
    threads: usize,
    iterations: u64,
    duration: Duration,
    cores: &[usize],
) -> Result<f64, ClockBenchError> {
    match clock {
        AnyClock::Logical(c) => measure_with(c, threads, iterations, duration, cores),
        AnyClock::Ordo(c) => measure_with(c, threads, iterations, duration, cores),
        AnyClock::System(c) => measure_with(c, threads, iterations, duration, cores),
        AnyClock::Test(c) => measure_with(c, threads, iterations, duration, cores),
    }
}

fn measure_with<C: Clock>(
    clock: &C,
    threads: usize,
    iterations: u64,
    duration: Duration,
    cores: &[usize],
) -> Result<f64, ClockBenchError> {
    let results = run_gated(threads, duration, cores, "crossover", |core, gate| {
        worker(clock, iterations, core, gate)
    });
    let mut per_us = 0.0;
    for result in results {
        let (txns, elapsed) = result?;
        per_us += txns as f64 / (elapsed.as_nanos().max(1) as f64 / 1_000.0);
    }
    Ok(per_us)
}

/// Transactions of the module docs' shape until stopped: (count, time taken).
fn worker<C: Clock>(
    clock: &C,
    iterations: u64,
    core: Option<usize>,
    gate: &StartGate,
) -> Result<(u64, Duration), ClockBenchError> {
    let pinned = core.map(cores::pin_current_thread).transpose();
    gate.arrive();
    gate.wait_open();
    pinned?;
    let began = Instant::now();
    let mut txns = 0u64;
    // At least one batch, so a worker the scheduler started late still has a rate.
    loop {
        for _ in 0..STOP_CHECK_TXNS {
            black_box(clock.now().hi()); // rts at begin
            work(iterations);
            black_box(clock.now().lo()); // the write wait starts
            black_box(clock.get_ts()); // wts
            black_box(clock.now().lo()); // the write wait ends
        }
        txns += STOP_CHECK_TXNS;
        if gate.stopped() {
            break;
        }
    }
    Ok((txns, began.elapsed()))
}

fn values(samples: &[CrossoverSample], clock: ClockKind, threads: usize, work: u64) -> Vec<f64> {
    let mut cell: Vec<&CrossoverSample> = samples
        .iter()
        .filter(|s| s.clock == clock && s.threads == threads && s.work_ns == work)
        .collect();
    cell.sort_by_key(|s| s.repetition);
    cell.into_iter().map(|s| s.txn_per_us).collect()
}

fn cells(samples: &[CrossoverSample], config: &CrossoverConfig) -> Vec<CrossoverCell> {
    let mut out = Vec::new();
    for &threads in &config.thread_counts {
        for &work_ns in &config.work_ns {
            let logical = values(samples, ClockKind::Logical, threads, work_ns);
            let ordo = values(samples, ClockKind::Ordo, threads, work_ns);
            let ratios: Vec<f64> = ordo.iter().zip(&logical).map(|(o, l)| o / l).collect();
            out.push(CrossoverCell {
                threads,
                work_ns,
                logical: stats(&logical),
                ordo: stats(&ordo),
                ratio: stats(&ratios),
            });
        }
    }
    out
}

/// The crossover at `threads` from the cells (module docs).
pub fn crossover(cells: &[CrossoverCell], threads: usize) -> Crossover {
    let mut wins_up_to = None;
    let mut beyond_largest = true;
    for cell in cells.iter().filter(|c| c.threads == threads) {
        if cell.ratio.0 >= 1.0 {
            wins_up_to = Some(cell.work_ns);
        } else {
            beyond_largest = false;
            break;
        }
    }
    Crossover { threads, ordo_wins_up_to_ns: wins_up_to, beyond_largest }
}

impl CrossoverReport {
    /// JSON lines, one per cell and one per crossover, tagged `"workload": "clock-crossover"`.
    pub fn json_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let tag = |record: &str, value: serde_json::Value| {
            let mut object = serde_json::json!({ "workload": "clock-crossover", "record": record });
            if let (Some(target), serde_json::Value::Object(fields)) =
                (object.as_object_mut(), value)
            {
                target.extend(fields);
            }
            object.to_string()
        };
        for cell in &self.cells {
            lines.push(tag("cell", serde_json::to_value(cell).unwrap_or_default()));
        }
        for c in &self.crossovers {
            lines.push(tag("crossover", serde_json::to_value(c).unwrap_or_default()));
        }
        lines
    }

    /// The table: per thread count, per work amount, both clocks' rates and the ratio; then the
    /// crossover per thread count.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Clock crossover: an engine transaction's draws (now, work, now, get_ts, now); {} \
             repetitions of {} ms per cell, interleaved; median [min-max]; work calibrated at \
             {:.2} ns per iteration",
            self.repetitions, self.duration_ms, self.ns_per_iteration
        );
        for clock in &self.clocks {
            let _ = writeln!(out, "  {clock}");
        }
        let _ = writeln!(
            out,
            "\n{:>7} {:>8}  {:>24}  {:>24}  {:>24}",
            "threads", "work ns", "logical txn/us", "ordo txn/us", "ordo/logical"
        );
        for c in &self.cells {
            let _ = writeln!(
                out,
                "{:>7} {:>8}  {:>24}  {:>24}  {:>24}",
                c.threads,
                c.work_ns,
                format_cell(c.logical.0, c.logical.1, c.logical.2),
                format_cell(c.ordo.0, c.ordo.1, c.ordo.2),
                format_cell(c.ratio.0, c.ratio.1, c.ratio.2),
            );
        }
        out.push('\n');
        for c in &self.crossovers {
            let text = match (c.ordo_wins_up_to_ns, c.beyond_largest) {
                (None, _) => "the logical clock wins at every work measured".to_owned(),
                (Some(ns), true) => format!("ORDO wins at every work measured (>= {ns} ns)"),
                (Some(ns), false) => format!("ORDO wins up to {ns} ns of work per transaction"),
            };
            let _ = writeln!(out, "crossover at {:>3} threads: {text}", c.threads);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_clock::{Counter, LogicalClock, OrdoClock};

    fn clocks() -> Option<[AnyClock; 2]> {
        // A counter of the machine's own kind, with a made-up frequency and boundary: enough
        // to run the loop (the figures mean nothing here).
        let counter = Counter::with_frequency(2_000_000_000).ok()?;
        let ordo = OrdoClock::with_boundary_nanos(counter, 50).ok()?;
        Some([AnyClock::Logical(LogicalClock::new()), AnyClock::Ordo(ordo)])
    }

    fn tiny() -> CrossoverConfig {
        CrossoverConfig {
            thread_counts: vec![1, 2],
            work_ns: vec![0, 100],
            duration: Duration::from_millis(5),
            repetitions: 2,
            pin_threads: true,
        }
    }

    #[test]
    fn a_small_run_fills_every_cell_interleaved() {
        let Some(clocks) = clocks() else {
            eprintln!("skipped: this machine has no invariant counter");
            return;
        };
        let report = run(&tiny(), &clocks).unwrap();
        assert_eq!(report.samples.len(), 2 * 2 * 2 * 2);
        // A B A B: consecutive samples alternate the clocks.
        let kinds: Vec<ClockKind> = report.samples.iter().take(4).map(|s| s.clock).collect();
        assert_eq!(
            kinds,
            [ClockKind::Logical, ClockKind::Ordo, ClockKind::Logical, ClockKind::Ordo]
        );
        assert_eq!(report.cells.len(), 4);
        for c in &report.cells {
            assert!(c.logical.1 > 0.0 && c.ordo.1 > 0.0, "{c:?}");
            assert!(c.ratio.1 <= c.ratio.0 && c.ratio.0 <= c.ratio.2, "{c:?}");
        }
        assert_eq!(report.crossovers.len(), 2);
        let table = report.table();
        assert!(table.contains("crossover at   2 threads"), "{table}");
        assert_eq!(report.json_lines().len(), 4 + 2);
    }

    #[test]
    fn more_work_means_fewer_transactions() {
        let Some(clocks) = clocks() else { return };
        let config = CrossoverConfig {
            thread_counts: vec![1],
            work_ns: vec![0, 20_000],
            duration: Duration::from_millis(20),
            repetitions: 1,
            pin_threads: false,
        };
        let report = run(&config, &clocks).unwrap();
        let (none, lots) = (&report.cells[0], &report.cells[1]);
        // 20 µs of work caps a thread at 0.05 transactions per µs; the draws alone do far more.
        assert!(lots.logical.0 < 0.06 && lots.ordo.0 < 0.06, "{lots:?}");
        assert!(none.logical.0 > 4.0 * lots.logical.0, "{none:?} {lots:?}");
    }

    fn cell(work_ns: u64, ratio: f64) -> CrossoverCell {
        CrossoverCell {
            threads: 4,
            work_ns,
            logical: (1.0, 1.0, 1.0),
            ordo: (ratio, ratio, ratio),
            ratio: (ratio, ratio, ratio),
        }
    }

    #[test]
    fn the_crossover_is_the_last_work_of_the_winning_prefix() {
        let wins_then_loses = [cell(0, 1.5), cell(100, 1.1), cell(200, 0.9), cell(400, 1.2)];
        assert_eq!(
            crossover(&wins_then_loses, 4),
            Crossover { threads: 4, ordo_wins_up_to_ns: Some(100), beyond_largest: false }
        );
        let loses = [cell(0, 0.8), cell(100, 1.1)];
        assert_eq!(crossover(&loses, 4).ordo_wins_up_to_ns, None);
        let wins = [cell(0, 1.3), cell(100, 1.0)];
        assert_eq!(
            crossover(&wins, 4),
            Crossover { threads: 4, ordo_wins_up_to_ns: Some(100), beyond_largest: true }
        );
    }

    #[test]
    fn bad_configurations_are_rejected() {
        let Some(clocks) = clocks() else { return };
        let bad = |f: fn(&mut CrossoverConfig)| {
            let mut c = tiny();
            f(&mut c);
            run(&c, &clocks).err()
        };
        assert!(matches!(bad(|c| c.thread_counts.clear()), Some(ClockBenchError::NoThreads)));
        assert!(matches!(bad(|c| c.work_ns.clear()), Some(ClockBenchError::Work { .. })));
        assert!(matches!(bad(|c| c.work_ns = vec![100, 50]), Some(ClockBenchError::Work { .. })));
        assert!(matches!(
            bad(|c| c.work_ns = vec![WORK_NS_MAX + 1]),
            Some(ClockBenchError::Work { .. })
        ));
        assert!(matches!(bad(|c| c.repetitions = 0), Some(ClockBenchError::NoRepetitions)));
        let logical_only = [AnyClock::Logical(LogicalClock::new())];
        assert!(matches!(run(&tiny(), &logical_only), Err(ClockBenchError::NoClocks)));
    }
}
