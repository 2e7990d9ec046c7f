//! # The measurement harness every workload shares
//!
//! A workload is loaded once per clock into something that implements [`Loaded`]; the harness
//! then measures every (thread count, clock) cell `repetitions` times, **interleaving the
//! clocks** (A B A B …) so that a noisy neighbour hurts every clock alike, runs the workload's
//! consistency [`check`](Loaded::check) after every run, and turns each run into one
//! [`Record`] — the JSON line that `ordo plot` and later analyses read. [`summary`] prints the
//! table a performance engineer expects: committed tx/s as median with min–max, abort rate and
//! its biggest reasons, p50/p99/p999 latency, time spent waiting out uncertainty, and the
//! ordo/logical ratio per thread count.
//!
//! The CLI, the suite and the tests drive workloads only through this module, so a workload is
//! added once and appears everywhere.

use std::collections::BTreeMap;
use std::time::Duration;

use ordo_clock::{ClockDescription, ClockKind};

use crate::driver::{RunStats, Spread};
use crate::error::BenchError;
use crate::report::Machine;

/// A workload loaded on one clock, ready to be measured.
pub trait Loaded: Send + Sync {
    /// One timed run on `threads` threads for about `duration`.
    fn run(&self, threads: usize, duration: Duration) -> Result<RunStats, BenchError>;
    /// Checks the database against the workload's model or invariants; called after every run.
    fn check(&self) -> Result<(), BenchError>;
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The workload's name (`ycsb`, `tpcc`, …).
    pub workload: String,
    /// The variant within it (`a`, `ro2`, `no-pay`, `5r5w` …); together with `workload` it
    /// names one line of a plot.
    pub variant: String,
    /// The workload's full configuration, recorded in every JSON line.
    pub config: serde_json::Value,
    /// Thread counts, measured in this order.
    pub thread_counts: Vec<usize>,
    /// Length of one run.
    pub duration: Duration,
    /// Runs per (threads, clock) cell.
    pub repetitions: usize,
}

impl Plan {
    /// Checks the plan's own parameters.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.thread_counts.is_empty() || self.thread_counts.contains(&0) {
            return Err(BenchError::ZeroThreads);
        }
        if self.repetitions == 0 {
            return Err(BenchError::OutOfRange {
                name: "repetitions",
                value: "0".into(),
                expected: "at least 1",
            });
        }
        if self.duration.is_zero() {
            return Err(BenchError::OutOfRange {
                name: "duration",
                value: "0 ms".into(),
                expected: "at least 1 ms",
            });
        }
        Ok(())
    }
}

/// One workload instance on one clock.
pub struct Instance {
    /// The clock it runs on.
    pub clock: ClockDescription,
    /// The loaded workload.
    pub loaded: Box<dyn Loaded>,
}

/// One measured run: the JSON line of `ordo bench … --json` and of result files.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Record {
    /// Workload name.
    pub workload: String,
    /// Variant within the workload.
    pub variant: String,
    /// The workload's configuration.
    pub config: serde_json::Value,
    /// The clock and its boundary.
    pub clock: ClockDescription,
    /// Threads of this run.
    pub threads: usize,
    /// Which repetition of its cell (from 0).
    pub repetition: usize,
    /// What was measured.
    pub result: RunStats,
    /// The git revision of the build.
    pub git_revision: String,
    /// Facts about the machine.
    pub machine: Machine,
}

/// Where a plan's measurement is, for progress bars.
#[derive(Clone, Copy, Debug)]
pub struct Progress<'a> {
    /// Runs finished.
    pub done: usize,
    /// Runs in the plan.
    pub total: usize,
    /// The run about to start (or just finished, when `done == total`).
    pub threads: usize,
    /// Its clock.
    pub clock: ClockKind,
    /// Its repetition.
    pub repetition: usize,
    /// The record just made, if any.
    pub record: Option<&'a Record>,
}

/// Measures `plan` on every instance, interleaving clocks, checking after every run.
pub fn measure(
    plan: &Plan,
    instances: &[Instance],
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Vec<Record>, BenchError> {
    plan.validate()?;
    let machine = Machine::read();
    let revision = crate::report::git_revision();
    let total = plan.thread_counts.len() * plan.repetitions * instances.len();
    let mut records = Vec::with_capacity(total);
    for &threads in &plan.thread_counts {
        for repetition in 0..plan.repetitions {
            for instance in instances {
                let at = |record| Progress {
                    done: records.len(),
                    total,
                    threads,
                    clock: instance.clock.kind,
                    repetition,
                    record,
                };
                progress(at(None));
                let result = instance.loaded.run(threads, plan.duration)?;
                instance.loaded.check()?;
                let record = Record {
                    workload: plan.workload.clone(),
                    variant: plan.variant.clone(),
                    config: plan.config.clone(),
                    clock: instance.clock.clone(),
                    threads,
                    repetition,
                    result,
                    git_revision: revision.clone(),
                    machine: machine.clone(),
                };
                records.push(record);
                let last = records.last();
                progress(Progress {
                    done: records.len(),
                    total,
                    threads,
                    clock: instance.clock.kind,
                    repetition,
                    record: last,
                });
            }
        }
    }
    Ok(records)
}

/// The runs of one (workload, variant, threads, clock) cell.
#[derive(Debug)]
pub struct Cell<'a> {
    /// Workload and variant.
    pub name: (String, String),
    /// Threads.
    pub threads: usize,
    /// Clock.
    pub clock: ClockKind,
    /// Its runs.
    pub runs: Vec<&'a RunStats>,
}

impl Cell<'_> {
    /// Committed tx/s over the runs.
    pub fn throughput(&self) -> Spread {
        Spread::of(&self.runs.iter().map(|r| r.tx_per_s).collect::<Vec<_>>())
    }

    /// The run closest to the median throughput (its latencies and aborts are quoted).
    pub fn median_run(&self) -> Option<&RunStats> {
        let m = self.throughput().median;
        self.runs
            .iter()
            .min_by(|a, b| (a.tx_per_s - m).abs().total_cmp(&(b.tx_per_s - m).abs()))
            .copied()
    }
}

/// Groups records into cells, in first-seen order.
pub fn cells(records: &[Record]) -> Vec<Cell<'_>> {
    let mut out: Vec<Cell<'_>> = Vec::new();
    for r in records {
        let name = (r.workload.clone(), r.variant.clone());
        match out
            .iter_mut()
            .find(|c| c.name == name && c.threads == r.threads && c.clock == r.clock.kind)
        {
            Some(cell) => cell.runs.push(&r.result),
            None => out.push(Cell {
                name,
                threads: r.threads,
                clock: r.clock.kind,
                runs: vec![&r.result],
            }),
        }
    }
    out
}

/// The summary table of some records: one row per cell, then ordo/logical ratios.
pub fn summary(records: &[Record]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let cells = cells(records);
    let mut clocks_seen: Vec<&ClockDescription> = Vec::new();
    for r in records {
        if !clocks_seen.contains(&&r.clock) {
            clocks_seen.push(&r.clock);
        }
    }
    for c in clocks_seen {
        let _ = writeln!(s, "clock: {c}");
    }
    let _ = writeln!(
        s,
        "{:<22} {:>3} {:>8} {:>12} {:>25} {:>7} {:>8} {:>8} {:>9} {:>8}  abort reasons",
        "workload",
        "thr",
        "clock",
        "tx/s median",
        "min - max",
        "aborts",
        "p50 us",
        "p99 us",
        "p999 us",
        "wait ns"
    );
    for cell in &cells {
        let Some(m) = cell.median_run() else { continue };
        let t = cell.throughput();
        let mut reasons: Vec<&(String, u64)> = m.aborts.iter().filter(|(_, n)| *n > 0).collect();
        reasons.sort_by_key(|r| std::cmp::Reverse(r.1));
        let reasons: Vec<String> =
            reasons.iter().take(3).map(|(name, n)| format!("{name} {n}")).collect();
        let extra: Vec<String> = m.metrics.iter().map(|(k, v)| format!("{k} {v:.0}")).collect();
        let _ = writeln!(
            s,
            "{:<22} {:>3} {:>8} {:>12.0} {:>12.0} - {:<10.0} {:>6.2}% {:>8.1} {:>8.1} {:>9.1} {:>8.0}  {}{}{}",
            format!("{} {}", cell.name.0, cell.name.1),
            cell.threads,
            cell.clock.name(),
            t.median,
            t.min,
            t.max,
            m.abort_rate * 100.0,
            m.latency.p50_ns as f64 / 1e3,
            m.latency.p99_ns as f64 / 1e3,
            m.latency.p999_ns as f64 / 1e3,
            m.write_wait_ns_per_commit,
            reasons.join(", "),
            if extra.is_empty() { "" } else { "; " },
            extra.join(", "),
        );
    }
    for (name, threads, ratio) in ratios(records) {
        let _ = writeln!(
            s,
            "ratio ordo/logical {} {} at {threads} threads: {ratio:.2}",
            name.0, name.1
        );
    }
    s
}

/// A workload and its variant.
pub type Name = (String, String);

/// `(workload and variant, threads, ordo median / logical median)` for every cell pair that
/// has both clocks.
pub fn ratios(records: &[Record]) -> Vec<(Name, usize, f64)> {
    let cells = cells(records);
    type Medians = BTreeMap<(Name, usize), (Option<f64>, Option<f64>)>;
    let mut medians = Medians::new();
    let mut order = Vec::new();
    for c in &cells {
        let key = (c.name.clone(), c.threads);
        let e = medians.entry(key.clone()).or_insert_with(|| {
            order.push(key.clone());
            (None, None)
        });
        match c.clock {
            ClockKind::Logical => e.0 = Some(c.throughput().median),
            ClockKind::Ordo => e.1 = Some(c.throughput().median),
            _ => {}
        }
    }
    order
        .into_iter()
        .filter_map(|key| match medians.get(&key) {
            Some((Some(l), Some(o))) => Some((key.0, key.1, o / l.max(1e-9))),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use ordo_clock::{AnyClock, LogicalClock};

    struct Fake {
        runs: AtomicU64,
        fail_check_at: u64,
    }

    impl Loaded for Fake {
        fn run(&self, threads: usize, _: Duration) -> Result<RunStats, BenchError> {
            let n = self.runs.fetch_add(1, Ordering::Relaxed) + 1;
            Ok(RunStats { threads, tx_per_s: n as f64 * 100.0, ..RunStats::default() })
        }
        fn check(&self) -> Result<(), BenchError> {
            if self.runs.load(Ordering::Relaxed) == self.fail_check_at {
                return Err(BenchError::Inconsistent("fake".into()));
            }
            Ok(())
        }
    }

    fn plan() -> Plan {
        Plan {
            workload: "fake".into(),
            variant: "v".into(),
            config: serde_json::json!({"k": 1}),
            thread_counts: vec![1, 2],
            duration: Duration::from_millis(1),
            repetitions: 3,
        }
    }

    fn instance(kind: ClockKind, fail_check_at: u64) -> Instance {
        let mut clock = AnyClock::Logical(LogicalClock::new()).describe();
        clock.kind = kind;
        Instance { clock, loaded: Box::new(Fake { runs: AtomicU64::new(0), fail_check_at }) }
    }

    #[test]
    fn clocks_are_interleaved_and_every_run_is_checked() {
        let instances = [instance(ClockKind::Logical, 0), instance(ClockKind::Ordo, 0)];
        let mut seen = Vec::new();
        let records = measure(&plan(), &instances, &mut |p| {
            if p.record.is_none() {
                seen.push((p.threads, p.clock));
            }
        })
        .unwrap();
        assert_eq!(records.len(), 12);
        let expected: Vec<_> = [1, 2]
            .iter()
            .flat_map(|&t| {
                (0..3).flat_map(move |_| [(t, ClockKind::Logical), (t, ClockKind::Ordo)])
            })
            .collect();
        assert_eq!(seen, expected);
        // Both fakes count runs alike, so every ratio is 1.
        for (_, _, r) in ratios(&records) {
            assert!((r - 1.0).abs() < 1e-9);
        }
        let table = summary(&records);
        assert!(table.contains("ratio ordo/logical fake v at 2 threads: 1.00"), "{table}");
    }

    #[test]
    fn a_failed_check_stops_the_plan() {
        let instances = [instance(ClockKind::Logical, 2)];
        let err = measure(&plan(), &instances, &mut |_| {}).unwrap_err();
        assert!(matches!(err, BenchError::Inconsistent(_)));
    }

    #[test]
    fn bad_plans_are_refused() {
        let instances = [instance(ClockKind::Logical, 0)];
        for bad in [
            Plan { thread_counts: vec![0], ..plan() },
            Plan { thread_counts: vec![], ..plan() },
            Plan { repetitions: 0, ..plan() },
            Plan { duration: Duration::ZERO, ..plan() },
        ] {
            assert!(measure(&bad, &instances, &mut |_| {}).is_err());
        }
    }
}
