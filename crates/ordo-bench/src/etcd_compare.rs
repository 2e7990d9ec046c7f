//! `ordo bench etcd-compare`: one optimistic transaction shape against several systems, measured
//! side by side (the Cluster II benchmark: an Ordo cluster against an etcd cluster on the same
//! machine).
//!
//! # The transaction
//! Every system holds `keys` counters, all 0 after [`TxnTarget::load`]. One transaction reads two
//! distinct keys chosen by the caller ([`TxnKeys`]) and writes one of them: the counter of
//! `write` becomes the value it read plus one. It is optimistic: the reads take no locks, and the
//! write commits only if neither key changed since it was read (etcd: a `Txn` comparing both
//! keys' `mod_revision`s; Ordo: its commit protocol's validation). A transaction that loses
//! returns [`TxnOutcome::Conflict`], and the client runs the same keys again as a new
//! transaction (fresh reads) after a random pause whose ceiling doubles with each conflict in a
//! row ([`BACKOFF_MAX`] at most), at most [`RETRY_MAX`] times.
//!
//! # The invariant the check relies on
//! A committed transaction adds exactly one to exactly one counter, and a conflicting one adds
//! nothing. So after any number of runs, the sum of the counters ([`TxnTarget::counters`])
//! equals the commits the driver counted ([`Report::committed_total`], summed over runs since
//! the load). [`check_counters`] compares them: a target that miscounts commits, reports a
//! lost write as committed or writes without validating fails it.
//!
//! # The driver
//! [`run`] starts `clients` clients — tokio tasks on the caller's runtime, or, for a target with a
//! blocking API ([`TxnTarget::txn_blocking`]), a thread each — each with its own RNG seeded
//! from the run's seed and its index (so a run replays from its printed seed and two systems
//! given one seed see the same key streams). Each client runs transactions back to back (a
//! closed loop: one in flight per client) for `warmup + duration`. Only transactions that end
//! inside the measured window `[warmup, warmup + duration)` count towards the rates and the
//! latency histogram; every one counts towards the totals. The latency of a committed
//! transaction is that of its last attempt (the one that committed), from the start of its reads
//! to the commit's answer; conflicts are counted, not timed.
//!
//! # The seam
//! A system under test is one [`TxnTarget`]: `load`, `txn`, `counters`. Methods return boxed
//! futures so that targets of different types share one list (`Arc<dyn TxnTarget>`); the
//! allocation costs tens of nanoseconds per transaction, beneath either system's latency. The
//! etcd target is [`etcd_target::EtcdTarget`]; the Ordo cluster target is
//! [`ordo_target::OrdoTarget`]. A target that counts its network calls
//! ([`TxnTarget::round_trips`]) gets them per commit in its [`Report`].

pub mod etcd_target;
pub mod ordo_target;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::report::median_min_max;
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// How many times one operation is retried after conflicts before the run fails: with uniform
/// keys a transaction conflicts rarely, so reaching this means the target never commits.
pub const RETRY_MAX: u32 = 1_000;

/// The longest pause between two attempts of a transaction ([`RETRY_MAX`]).
pub const BACKOFF_MAX: Duration = Duration::from_millis(1);

/// Pauses shorter than this yield the thread instead of sleeping.
const BACKOFF_SLEEP_MIN: Duration = Duration::from_micros(2);

/// On the runtime, whose timers have 1 ms resolution, shorter pauses yield instead.
const ASYNC_SLEEP_MIN: Duration = Duration::from_millis(1);

/// The largest latency the histogram records, in nanoseconds (larger values are clamped).
const LATENCY_MAX_NANOS: u64 = 60_000_000_000;

/// The keys of one transaction: it reads both and writes `write`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TxnKeys {
    /// The key read and incremented.
    pub write: u64,
    /// The key only read.
    pub read: u64,
}

impl TxnKeys {
    /// Two distinct keys uniform in `0..keys` (`keys` ≥ 2).
    pub fn uniform(rng: &mut impl Rng, keys: u64) -> Self {
        debug_assert!(keys >= 2, "two distinct keys need at least two keys");
        let write = rng.random_range(0..keys);
        // Uniform over the other keys-1 keys.
        let mut read = rng.random_range(0..keys - 1);
        if read >= write {
            read += 1;
        }
        debug_assert_ne!(write, read);
        TxnKeys { write, read }
    }
}

/// How one transaction ended.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnOutcome {
    /// It committed: the written counter went up by one.
    Committed,
    /// Validation failed (a key changed since it was read); nothing was written.
    Conflict,
}

/// What went wrong in a comparison run.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// An etcd cluster could not be started.
    #[error(transparent)]
    EtcdServer(#[from] ordo_cluster::etcd_server::EtcdServerError),
    /// An etcd request failed.
    #[error("etcd {op}: {source}")]
    Etcd {
        /// The operation (`connect`, `read`, `commit`, `load`, `counters`).
        op: &'static str,
        /// The client's error.
        source: etcd_client::Error,
    },
    /// A request got no answer in time.
    #[error("{target} {op}: no answer within {after_ms} ms")]
    Timeout {
        /// The system.
        target: &'static str,
        /// The operation.
        op: &'static str,
        /// The limit.
        after_ms: u64,
    },
    /// No member says it leads.
    #[error("etcd: no member of {endpoints:?} says it leads")]
    NoLeader {
        /// The members asked.
        endpoints: Vec<String>,
    },
    /// A key is missing or does not hold a counter.
    #[error("{target}: key {key} holds {found}, not a counter")]
    Corrupt {
        /// The system.
        target: &'static str,
        /// The key.
        key: u64,
        /// What it holds (`nothing` when missing).
        found: String,
    },
    /// One operation conflicted [`RETRY_MAX`] times in a row.
    #[error("{target}: keys {keys:?} conflicted {RETRY_MAX} times in a row")]
    TooManyConflicts {
        /// The system.
        target: &'static str,
        /// The keys.
        keys: TxnKeys,
    },
    /// A parameter out of range.
    #[error("{name} = {value}: {expected}")]
    OutOfRange {
        /// The parameter.
        name: &'static str,
        /// What was given.
        value: u64,
        /// What is accepted.
        expected: &'static str,
    },
    /// The Ordo cluster could not be started or a client could not connect.
    #[error("ordo cluster: {0}")]
    Cluster(Box<ordo_cluster::loopback::LoopbackError>),
    /// An Ordo operation failed with something other than an abort.
    #[error("ordo {op}: {source}")]
    Ordo {
        /// The operation (`load`, `txn`, `counters`).
        op: &'static str,
        /// The engine's error.
        source: ordo::Error,
    },
    /// A backup's copy of a region differs from its primary's, or the backups did not drain.
    #[error("ordo replication: {0}")]
    Replication(String),
    /// A client task panicked or was cancelled.
    #[error("client task: {0}")]
    Task(String),
    /// Merging latency histograms failed.
    #[error("latency histogram: {0}")]
    Histogram(String),
    /// The counters do not add up to the commits counted ([`check_counters`]).
    #[error("{target}: counters sum to {sum}, but {committed} commits were counted")]
    Inconsistent {
        /// The system.
        target: &'static str,
        /// The sum of the counters.
        sum: u64,
        /// The commits counted.
        committed: u64,
    },
}

/// A boxed future a [`TxnTarget`] method returns.
pub type TargetFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, CompareError>> + Send + 'a>>;

/// One system under test (module docs: the transaction and the counters).
pub trait TxnTarget: Send + Sync {
    /// Its short name in tables and JSON (`etcd`, `ordo`).
    fn name(&self) -> &'static str;

    /// How it is set up, for the report (members, connections, where its data lives).
    fn describe(&self) -> String;

    /// Creates (or resets) counters `0..keys`, all 0. Runs before measuring.
    fn load(&self, keys: u64) -> TargetFuture<'_, ()>;

    /// Runs one transaction of the shape on `keys` for client `client` (an index below the run's
    /// client count; a target may use it to pick the client's connection).
    ///
    /// # Conflicts
    /// `Ok(Conflict)` when validation failed and nothing was written; `Err` for anything else
    /// (the run stops).
    fn txn(&self, client: usize, keys: TxnKeys) -> TargetFuture<'_, TxnOutcome>;

    /// The counters `0..keys`, in key order (read after the clients stopped).
    fn counters(&self, keys: u64) -> TargetFuture<'_, Vec<u64>>;

    /// Network calls its clients made so far, if it counts them ([`Report::round_trips_per_commit`]).
    fn round_trips(&self) -> Option<u64> {
        None
    }

    /// [`TxnTarget::txn`] as a blocking call, for a target whose API is synchronous: each
    /// client then runs on a thread of its own for the whole run (as an application using
    /// that API would), instead of hopping to a pool thread and back for every transaction.
    fn txn_blocking(&self) -> Option<BlockingTxn> {
        None
    }
}

/// A blocking transaction of a target ([`TxnTarget::txn_blocking`]).
pub type BlockingTxn =
    Arc<dyn Fn(usize, TxnKeys) -> Result<TxnOutcome, CompareError> + Send + Sync>;

/// One run's parameters.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Concurrent clients (each one transaction in flight).
    pub clients: usize,
    /// The measured window.
    pub duration: Duration,
    /// Time run but not measured before the window.
    pub warmup: Duration,
    /// Keys `0..keys` (loaded already).
    pub keys: u64,
    /// The seed of the clients' key streams.
    pub seed: u64,
}

/// One run's result.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The system.
    pub target: String,
    /// Concurrent clients.
    pub clients: usize,
    /// The seed the run replays from.
    pub seed: u64,
    /// The measured window, seconds.
    pub window_s: f64,
    /// Commits ending inside the window.
    pub committed: u64,
    /// Conflicts ending inside the window.
    pub conflicts: u64,
    /// Commits over the whole run (warm-up and the last in-flight ones included): what the
    /// counters gained.
    pub committed_total: u64,
    /// Conflicts over the whole run.
    pub conflicts_total: u64,
    /// Commits per second in the window.
    pub txn_per_s: f64,
    /// Conflicts per second in the window.
    pub conflicts_per_s: f64,
    /// Median latency of the window's commits, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Mean, µs.
    pub mean_us: f64,
    /// Largest, µs.
    pub max_us: f64,
    /// Network calls per commit over the whole run (conflicting attempts' calls included), for
    /// a target that counts them.
    pub round_trips_per_commit: Option<f64>,
}

/// What one client counted.
struct Tally {
    committed: u64,
    conflicts: u64,
    committed_total: u64,
    conflicts_total: u64,
    latency_nanos: Histogram<u64>,
}

fn histogram() -> Result<Histogram<u64>, CompareError> {
    Histogram::new_with_bounds(1, LATENCY_MAX_NANOS, 3)
        .map_err(|e| CompareError::Histogram(e.to_string()))
}

/// The seed of client `client` in a run seeded `seed` (distinct streams per client).
fn client_seed(seed: u64, client: usize) -> u64 {
    seed ^ (client as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Runs `config.clients` clients against `target` (module docs) on the current tokio runtime.
///
/// # Errors
/// The first error a client met (the others run to the end of the window first);
/// [`CompareError::OutOfRange`] for no clients or fewer than two keys.
pub async fn run(target: Arc<dyn TxnTarget>, config: &RunConfig) -> Result<Report, CompareError> {
    if config.clients == 0 {
        return Err(CompareError::OutOfRange { name: "clients", value: 0, expected: "at least 1" });
    }
    if config.keys < 2 {
        return Err(CompareError::OutOfRange {
            name: "keys",
            value: config.keys,
            expected: "at least 2 (a transaction reads two distinct keys)",
        });
    }
    let round_trips_before = target.round_trips();
    let started = Instant::now();
    let window_from = started + config.warmup;
    let window_to = window_from + config.duration;
    let tasks: Vec<_> = (0..config.clients)
        .map(|client| {
            let target = Arc::clone(&target);
            let (keys, seed) = (config.keys, client_seed(config.seed, client));
            let window = (window_from, window_to);
            match target.txn_blocking() {
                Some(txn) => tokio::task::spawn_blocking(move || {
                    let mut tally = ClientState::new(target.name(), keys, seed, window)?;
                    while let Some(txn_keys) = tally.next_keys() {
                        let mut in_row = 0;
                        loop {
                            let begun = Instant::now();
                            let outcome = txn(client, txn_keys)?;
                            if tally.record(txn_keys, outcome, begun, &mut in_row)? {
                                break;
                            }
                            let pause = tally.backoff(in_row);
                            if pause >= BACKOFF_SLEEP_MIN {
                                std::thread::sleep(pause);
                            } else {
                                std::thread::yield_now();
                            }
                        }
                    }
                    Ok(tally.tally)
                }),
                None => tokio::spawn(async move {
                    let mut tally = ClientState::new(target.name(), keys, seed, window)?;
                    while let Some(txn_keys) = tally.next_keys() {
                        let mut in_row = 0;
                        loop {
                            let begun = Instant::now();
                            let outcome = target.txn(client, txn_keys).await?;
                            if tally.record(txn_keys, outcome, begun, &mut in_row)? {
                                break;
                            }
                            let pause = tally.backoff(in_row);
                            if pause >= ASYNC_SLEEP_MIN {
                                tokio::time::sleep(pause).await;
                            } else {
                                tokio::task::yield_now().await;
                            }
                        }
                    }
                    Ok(tally.tally)
                }),
            }
        })
        .collect();
    let mut latency_nanos = histogram()?;
    let mut report = Report {
        target: target.name().to_string(),
        clients: config.clients,
        seed: config.seed,
        window_s: config.duration.as_secs_f64(),
        committed: 0,
        conflicts: 0,
        committed_total: 0,
        conflicts_total: 0,
        txn_per_s: 0.0,
        conflicts_per_s: 0.0,
        p50_us: 0.0,
        p99_us: 0.0,
        mean_us: 0.0,
        max_us: 0.0,
        round_trips_per_commit: None,
    };
    let mut first_error = None;
    for task in tasks {
        let tally = match task.await {
            Ok(Ok(tally)) => tally,
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
                continue;
            }
            Err(e) => {
                first_error.get_or_insert(CompareError::Task(e.to_string()));
                continue;
            }
        };
        report.committed += tally.committed;
        report.conflicts += tally.conflicts;
        report.committed_total += tally.committed_total;
        report.conflicts_total += tally.conflicts_total;
        latency_nanos
            .add(&tally.latency_nanos)
            .map_err(|e| CompareError::Histogram(e.to_string()))?;
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    debug_assert_eq!(latency_nanos.len(), report.committed);
    debug_assert!(report.committed <= report.committed_total);
    let window_s = config.duration.as_secs_f64();
    report.txn_per_s = report.committed as f64 / window_s;
    report.conflicts_per_s = report.conflicts as f64 / window_s;
    let us = |nanos: u64| nanos as f64 / 1e3;
    report.p50_us = us(latency_nanos.value_at_quantile(0.50));
    report.p99_us = us(latency_nanos.value_at_quantile(0.99));
    report.mean_us = latency_nanos.mean() / 1e3;
    report.max_us = us(latency_nanos.max());
    if let (Some(before), Some(after)) = (round_trips_before, target.round_trips()) {
        report.round_trips_per_commit =
            Some(after.saturating_sub(before) as f64 / report.committed_total.max(1) as f64);
    }
    Ok(report)
}

/// One client's key stream and counts: transactions back to back until the window closes.
struct ClientState {
    target: &'static str,
    rng: SmallRng,
    keys: u64,
    window: (Instant, Instant),
    tally: Tally,
}

impl ClientState {
    fn new(
        target: &'static str,
        keys: u64,
        seed: u64,
        window: (Instant, Instant),
    ) -> Result<Self, CompareError> {
        let tally = Tally {
            committed: 0,
            conflicts: 0,
            committed_total: 0,
            conflicts_total: 0,
            latency_nanos: histogram()?,
        };
        Ok(Self { target, rng: SmallRng::seed_from_u64(seed), keys, window, tally })
    }

    /// The pause before retrying after `in_row` conflicts in a row: random, below a ceiling
    /// that doubles with each conflict from 100 ns up to [`BACKOFF_MAX`] (as `Ordo::run`
    /// backs off; without it, retries of a transaction that met a lock can keep the lock's
    /// holder off the cores).
    fn backoff(&mut self, in_row: u32) -> Duration {
        let ceiling_nanos = (100u64 << in_row.min(20)).min(BACKOFF_MAX.as_nanos() as u64);
        Duration::from_nanos(self.rng.random_range(0..=ceiling_nanos))
    }

    /// The keys of the next transaction; `None` once the window has closed.
    fn next_keys(&mut self) -> Option<TxnKeys> {
        (Instant::now() < self.window.1).then(|| TxnKeys::uniform(&mut self.rng, self.keys))
    }

    /// Counts an attempt on `keys` begun at `begun` and ending now; `Ok(true)` once it
    /// committed. A conflict is retried as a fresh transaction, at most [`RETRY_MAX`] times in
    /// a row (`in_row` counts them).
    fn record(
        &mut self,
        keys: TxnKeys,
        outcome: TxnOutcome,
        begun: Instant,
        in_row: &mut u32,
    ) -> Result<bool, CompareError> {
        let ended = Instant::now();
        let in_window = ended >= self.window.0 && ended < self.window.1;
        let tally = &mut self.tally;
        match outcome {
            TxnOutcome::Committed => {
                tally.committed_total += 1;
                if in_window {
                    tally.committed += 1;
                    let nanos = u64::try_from((ended - begun).as_nanos()).unwrap_or(u64::MAX);
                    tally.latency_nanos.saturating_record(nanos.max(1));
                }
                Ok(true)
            }
            TxnOutcome::Conflict => {
                tally.conflicts_total += 1;
                if in_window {
                    tally.conflicts += 1;
                }
                *in_row += 1;
                if *in_row >= RETRY_MAX {
                    return Err(CompareError::TooManyConflicts { target: self.target, keys });
                }
                Ok(false)
            }
        }
    }
}

/// Checks the invariant of the module docs: the counters `0..keys` sum to `committed` (the
/// commits counted since the load, over every run).
///
/// # Errors
/// [`CompareError::Inconsistent`] when they differ; the target's own errors reading them.
pub async fn check_counters(
    target: &dyn TxnTarget,
    keys: u64,
    committed: u64,
) -> Result<(), CompareError> {
    let counters = target.counters(keys).await?;
    let sum = counters.iter().sum::<u64>();
    if sum != committed {
        return Err(CompareError::Inconsistent { target: target.name(), sum, committed });
    }
    Ok(())
}

/// The system the ratio line divides by.
pub const BASELINE: &str = "etcd";

/// The summary table: per client count, one line per system (txn/s median [min–max] over
/// repetitions, median p50 and p99, median conflicts/s) and, when the client count has the
/// baseline and another system, a `ratio` line (the other's median txn/s over the baseline's,
/// and the baseline's p50 over the other's). `calls/txn` is the median network calls per commit
/// of a target that counts them.
pub fn table(reports: &[Report]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>7}  {:<6} {:>26}  {:>9}  {:>9}  {:>11}  {:>4}  {:>9}",
        "clients",
        "system",
        "txn/s median [min–max]",
        "p50 µs",
        "p99 µs",
        "conflicts/s",
        "runs",
        "calls/txn"
    );
    let mut client_counts: Vec<usize> = reports.iter().map(|r| r.clients).collect();
    client_counts.sort_unstable();
    client_counts.dedup();
    for clients in client_counts {
        // In run order (the order of the target list).
        let mut systems: Vec<&str> = Vec::new();
        for r in reports.iter().filter(|r| r.clients == clients) {
            if !systems.contains(&r.target.as_str()) {
                systems.push(&r.target);
            }
        }
        let mut medians = Vec::new();
        for system in systems {
            let runs: Vec<&Report> =
                reports.iter().filter(|r| r.clients == clients && r.target == system).collect();
            let collect =
                |f: &dyn Fn(&Report) -> f64| runs.iter().map(|r| f(r)).collect::<Vec<_>>();
            let (rate, rate_min, rate_max) = median_min_max(&mut collect(&|r| r.txn_per_s));
            let (p50, ..) = median_min_max(&mut collect(&|r| r.p50_us));
            let (p99, ..) = median_min_max(&mut collect(&|r| r.p99_us));
            let (conflicts, ..) = median_min_max(&mut collect(&|r| r.conflicts_per_s));
            let mut calls: Vec<f64> =
                runs.iter().filter_map(|r| r.round_trips_per_commit).collect();
            let calls = if calls.is_empty() {
                "-".to_string()
            } else {
                format!("{:.2}", median_min_max(&mut calls).0)
            };
            let _ = writeln!(
                out,
                "{clients:>7}  {system:<6} {:>26}  {p50:>9.0}  {p99:>9.0}  {conflicts:>11.1}  {:>4}  {calls:>9}",
                format!("{rate:.0} [{rate_min:.0}–{rate_max:.0}]"),
                runs.len()
            );
            medians.push((system, rate, p50));
        }
        if let Some(&(_, base_rate, base_p50)) = medians.iter().find(|m| m.0 == BASELINE) {
            for &(system, rate, p50) in medians.iter().filter(|m| m.0 != BASELINE) {
                let _ = writeln!(
                    out,
                    "{clients:>7}  ratio  {system}/{BASELINE}: txn/s ×{:.1}, p50 ×{:.1} lower",
                    rate / base_rate,
                    base_p50 / p50
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_keys_are_distinct_and_in_range() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut seen = [0u32; 3];
        for _ in 0..3_000 {
            let k = TxnKeys::uniform(&mut rng, 3);
            assert_ne!(k.write, k.read);
            assert!(k.write < 3);
            assert!(k.read < 3);
            seen[usize::try_from(k.read).unwrap()] += 1;
        }
        assert!(seen.iter().all(|&n| n > 800), "reads not uniform: {seen:?}");
    }

    #[test]
    fn the_table_has_a_ratio_line_only_with_the_baseline_and_another_system() {
        let report = |target: &str, rate: f64, p50: f64| Report {
            target: target.into(),
            clients: 64,
            seed: 1,
            window_s: 1.0,
            committed: 0,
            conflicts: 0,
            committed_total: 0,
            conflicts_total: 0,
            txn_per_s: rate,
            conflicts_per_s: 0.0,
            p50_us: p50,
            p99_us: p50,
            mean_us: p50,
            max_us: p50,
            round_trips_per_commit: None,
        };
        let alone = table(&[report("etcd", 1000.0, 1600.0), report("etcd", 1200.0, 1500.0)]);
        assert!(alone.contains("1100 [1000–1200]"), "{alone}");
        assert!(!alone.contains("ratio"), "{alone}");
        let both = table(&[report("ordo", 30000.0, 160.0), report("etcd", 1000.0, 1600.0)]);
        assert!(both.contains("ratio  ordo/etcd: txn/s ×30.0, p50 ×10.0 lower"), "{both}");
    }
}
