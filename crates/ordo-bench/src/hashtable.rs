//! The hash-table benchmark of ORDO Fig. 11 (from the RLU paper): a set of `u64` keys in
//! `buckets` sorted linked lists, loaded with `buckets × nodes_per_bucket` keys drawn from a
//! range twice that size; each operation picks a uniform key in the range and is an update
//! (half inserts, half removes) with probability `update_percent`, else a lookup.
//!
//! Two implementations with the same structure run side by side:
//! * `rlu` — [`ordo_apps::rlu::hashset::RluHashSet`], RLU on the clock (logical = the original
//!   RLU, ORDO = RLU^ORDO);
//! * `txn` — [`ordo_apps::hashset::TxnHashSet`], every operation an Ordo transaction.
//!
//! The post-run [`check`](Loaded::check) reads every key in one snapshot and compares the size
//! with the model: the loaded size plus the successful inserts minus the successful removes
//! counted by the workers, and checks that every key is in range and appears once.

use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ordo::{Config, Ordo, Stats};
use ordo_apps::hashset::TxnHashSet;
use ordo_apps::rlu::RluOptions;
use ordo_apps::rlu::hashset::{RluHashSet, RluSetHandle};
use ordo_clock::Clock;

use crate::driver::{RunStats, Tally, run_timed, run_timed_then};
use crate::error::BenchError;
use crate::harness::Loaded;

/// Which implementation of the set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Impl {
    /// Read-log-update.
    Rlu,
    /// Ordo transactions.
    Txn,
}

impl Impl {
    /// The lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Impl::Rlu => "rlu",
            Impl::Txn => "txn",
        }
    }
}

/// Parameters of a hash-table run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HashtableConfig {
    /// The implementation.
    #[serde(rename = "impl")]
    pub implementation: Impl,
    /// Buckets (lists).
    pub buckets: usize,
    /// Keys per bucket after loading (the key range is twice the loaded size).
    pub nodes_per_bucket: usize,
    /// Percentage of operations that update (0..=100), half inserts and half removes.
    pub update_percent: u32,
    /// Worker threads (the largest count that will be measured on a loaded table).
    pub threads: usize,
    /// Measured duration.
    #[serde(serialize_with = "crate::report::duration_ms")]
    pub duration: Duration,
    /// Seed of the load and of the workers' choices.
    pub seed: u64,
    /// RLU deferral: commit after this many writer sections (`None`: every section commits;
    /// ignored by `txn`). See `ordo_apps::rlu`'s essay.
    pub rlu_defer: Option<NonZeroUsize>,
}

/// Thread counts beyond this are refused (the RLU runtime is sized for them).
pub const THREADS_MAX: usize = 1024;

impl HashtableConfig {
    /// The key range: twice the loaded size.
    pub fn key_range(&self) -> u64 {
        2 * (self.buckets as u64) * (self.nodes_per_bucket as u64)
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.threads == 0 {
            return Err(BenchError::ZeroThreads);
        }
        let range =
            |name, value: String, expected| Err(BenchError::OutOfRange { name, value, expected });
        if self.threads > THREADS_MAX {
            return range("threads", self.threads.to_string(), "at most 1024");
        }
        if self.buckets == 0 {
            return range("buckets", "0".into(), "at least 1");
        }
        if self.nodes_per_bucket == 0 {
            return range("nodes-per-bucket", "0".into(), "at least 1");
        }
        if self.update_percent > 100 {
            return range("update-percent", self.update_percent.to_string(), "0..=100");
        }
        if self.key_range() > 1 << 30 {
            return range(
                "buckets x nodes-per-bucket",
                (self.key_range() / 2).to_string(),
                "at most 2^29 keys",
            );
        }
        Ok(())
    }
}

enum Table<C: Clock> {
    Rlu { set: RluHashSet<C>, handles: Vec<Mutex<RluSetHandle<C>>> },
    Txn { db: Ordo<C>, set: TxnHashSet },
}

/// A loaded table.
pub struct HashtableBench<C: Clock> {
    table: Table<C>,
    cfg: HashtableConfig,
    loaded: u64,
    inserted: Tally,
    removed: Tally,
    /// Runs so far.
    runs: AtomicU64,
}

/// SplitMix64: advance the counter `x` by the golden gamma and mix it (full period 2^64).
fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    mix(*x)
}

/// The SplitMix64 finaliser: a bijection of `u64` that scrambles every bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Creates the table and inserts `buckets × nodes_per_bucket` distinct random keys.
pub fn load<C: Clock>(clock: C, cfg: &HashtableConfig) -> Result<HashtableBench<C>, BenchError> {
    load_with(clock, cfg, Config::default())
}

/// [`load`] with the transactional table on a database opened with `base`, e.g. a durable one
/// (see [`crate::engine`]). RLU does not run on the engine: a durable `base` is refused for it.
pub fn load_with<C: Clock>(
    clock: C,
    cfg: &HashtableConfig,
    base: Config,
) -> Result<HashtableBench<C>, BenchError> {
    cfg.validate()?;
    if let (Impl::Rlu, Some(d)) = (cfg.implementation, &base.durability) {
        return Err(BenchError::NotOnEngine {
            workload: "the RLU hash table",
            mode: d.mode.name(),
        });
    }
    let target = cfg.key_range() / 2;
    let mut seed = cfg.seed ^ 0x5EED;
    let mut next_key = move || splitmix(&mut seed) % (2 * target);
    let mut loaded = 0u64;
    let table = match cfg.implementation {
        Impl::Rlu => {
            // Every key of the range, the heads, and per-thread free lists (up to 8192 nodes
            // each before they spill to the shared list).
            let capacity = (cfg.key_range() as usize) + cfg.buckets + (cfg.threads + 1) * 8_192;
            let options = RluOptions {
                max_threads: cfg.threads + 2,
                capacity_nodes: capacity,
                defer_limit: cfg.rlu_defer,
                ..RluOptions::default()
            };
            let set = RluHashSet::new(clock, cfg.buckets, options)?;
            {
                let mut h = set.handle()?;
                while loaded < target {
                    loaded += u64::from(h.insert(next_key())?);
                }
            }
            let handles =
                (0..cfg.threads).map(|_| set.handle().map(Mutex::new)).collect::<Result<_, _>>()?;
            Table::Rlu { set, handles }
        }
        Impl::Txn => {
            let db = Ordo::with_clock(base, clock)?;
            let set = TxnHashSet::create(&db, cfg.buckets)?;
            while loaded < target {
                let batch: Vec<u64> = (0..256.min(target - loaded)).map(|_| next_key()).collect();
                loaded += db.run(|tx| {
                    let mut n = 0;
                    for &k in &batch {
                        n += u64::from(set.insert_in(tx, k)?);
                    }
                    Ok::<_, ordo::Error>(n)
                })?;
            }
            Table::Txn { db, set }
        }
    };
    Ok(HashtableBench {
        table,
        cfg: cfg.clone(),
        loaded,
        inserted: Tally::new(cfg.threads),
        removed: Tally::new(cfg.threads),
        runs: AtomicU64::new(0),
    })
}

/// What one operation does.
#[derive(Clone, Copy)]
enum Op {
    Contains,
    Insert,
    Remove,
}

impl<C: Clock> HashtableBench<C> {
    /// The next operation of a worker whose generator state is `state` (the driver gives every
    /// thread a distinct start, the same in every run): a SplitMix64 step, keyed through a
    /// bijection by `salt` — the seed and the run number — so the sequence keeps its full
    /// period and every run draws new operations instead of replaying the last run's.
    fn pick(&self, state: &mut u64, salt: u64) -> (Op, u64) {
        let r = mix(splitmix(state) ^ salt);
        let key = (r >> 8) % self.cfg.key_range();
        let op = if (r % 100) as u32 >= self.cfg.update_percent {
            Op::Contains
        } else if r & (1 << 7) == 0 {
            Op::Insert
        } else {
            Op::Remove
        };
        (op, key)
    }

    fn tally(&self, thread: usize, op: Op, changed: bool) {
        match (op, changed) {
            (Op::Insert, true) => self.inserted.add(thread, 1),
            (Op::Remove, true) => self.removed.add(thread, 1),
            _ => {}
        }
    }

    /// Runs the timed workload on `threads` threads.
    pub fn run(&self, threads: usize, duration: Duration) -> Result<RunStats, BenchError> {
        HashtableConfig { threads, duration, ..self.cfg.clone() }.validate()?;
        // Relaxed: only makes each run's operations different.
        let run_number = self.runs.fetch_add(1, Ordering::Relaxed);
        let salt = mix(self.cfg.seed) ^ mix(run_number.wrapping_add(0x1234_5678));
        match &self.table {
            Table::Txn { db, set } => Ok(run_timed(
                threads,
                duration,
                db.stats(),
                || db.stats(),
                |t, state| {
                    let (op, key) = self.pick(state, salt);
                    let r = match op {
                        Op::Contains => set.contains(db, key),
                        Op::Insert => set.insert(db, key),
                        Op::Remove => set.remove(db, key),
                    };
                    if let Ok(changed) = r {
                        self.tally(t, op, changed);
                    }
                },
            )),
            Table::Rlu { handles, .. } => {
                if threads > handles.len() {
                    return Err(BenchError::OutOfRange {
                        name: "threads",
                        value: threads.to_string(),
                        expected: "at most the thread count the table was loaded for",
                    });
                }
                let stats = || {
                    handles.iter().fold([0u64; 5], |acc, h| {
                        let s = h.lock().map(|h| h.stats()).unwrap_or_default();
                        [
                            acc[0] + s.commits,
                            acc[1] + s.aborts,
                            acc[2] + s.steals,
                            acc[3] + s.write_backs,
                            acc[4] + s.sync_requests,
                        ]
                    })
                };
                let before = stats();
                let mut r = run_timed_then(
                    threads,
                    duration,
                    Stats::default(),
                    Stats::default,
                    |t, state| {
                        let (op, key) = self.pick(state, salt);
                        let Ok(mut h) = handles[t].lock() else { return };
                        let r = match op {
                            Op::Contains => h.contains(key),
                            Op::Insert => h.insert(key),
                            Op::Remove => h.remove(key),
                        };
                        drop(h);
                        if let Ok(changed) = r {
                            self.tally(t, op, changed);
                        }
                    },
                    // A worker that stops publishes its deferred updates: the others may be
                    // retrying on its locks, and it no longer answers their sync requests.
                    |t| {
                        if let Ok(mut h) = handles[t].lock() {
                            h.flush();
                        }
                    },
                );
                let after = stats();
                let d: Vec<u64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
                let aborts = d[1];
                r.aborts = vec![("rlu-conflict".to_owned(), aborts)];
                r.abort_rate = aborts as f64 / (aborts + r.committed).max(1) as f64;
                r.metrics.push(("rlu_commits".to_owned(), d[0] as f64));
                r.metrics.push(("rlu_steals".to_owned(), d[2] as f64));
                r.metrics.push(("rlu_write_backs".to_owned(), d[3] as f64));
                r.metrics.push(("rlu_sync_requests".to_owned(), d[4] as f64));
                Ok(r)
            }
        }
    }

    /// Every key, read in one snapshot (RLU) or in bucket batches after the run (txn).
    pub fn keys(&self) -> Result<Vec<u64>, BenchError> {
        match &self.table {
            Table::Rlu { set, .. } => Ok(set.handle()?.keys()?),
            Table::Txn { db, set } => Ok(set.keys(db)?),
        }
    }

    /// Checks the table against the model (see the module docs).
    pub fn check(&self) -> Result<(), BenchError> {
        let keys = self.keys()?;
        let expected = (self.loaded + self.inserted.total()).checked_sub(self.removed.total());
        if expected != Some(keys.len() as u64) {
            return Err(BenchError::Inconsistent(format!(
                "{} hash table holds {} keys; loaded {} + inserted {} - removed {} = {:?}",
                self.cfg.implementation.name(),
                keys.len(),
                self.loaded,
                self.inserted.total(),
                self.removed.total(),
                expected
            )));
        }
        if let Some(w) = keys.windows(2).find(|w| w[0] >= w[1]) {
            return Err(BenchError::Inconsistent(format!("key {} appears twice", w[1])));
        }
        if let Some(k) = keys.last().filter(|&&k| k >= self.cfg.key_range()) {
            return Err(BenchError::Inconsistent(format!("key {k} is outside the key range")));
        }
        Ok(())
    }
}

impl<C: Clock> Loaded for HashtableBench<C> {
    fn run(&self, threads: usize, duration: Duration) -> Result<RunStats, BenchError> {
        HashtableBench::run(self, threads, duration)
    }

    fn check(&self) -> Result<(), BenchError> {
        HashtableBench::check(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_clock::LogicalClock;

    fn cfg(implementation: Impl) -> HashtableConfig {
        HashtableConfig {
            implementation,
            buckets: 8,
            nodes_per_bucket: 10,
            update_percent: 40,
            threads: 2,
            duration: Duration::from_millis(30),
            seed: 3,
            rlu_defer: None,
        }
    }

    #[test]
    fn both_impls_run_and_pass_the_check_which_notices_a_miscount() {
        for implementation in [Impl::Rlu, Impl::Txn] {
            let b = load(LogicalClock::new(), &cfg(implementation)).unwrap();
            assert_eq!(b.keys().unwrap().len(), 80);
            let r = b.run(2, Duration::from_millis(30)).unwrap();
            assert!(r.committed > 0);
            b.check().unwrap();
            b.inserted.add(0, 1);
            assert!(matches!(b.check(), Err(BenchError::Inconsistent(_))));
        }
    }

    #[test]
    fn deferred_rlu_runs_and_passes_the_check() {
        let c = HashtableConfig { rlu_defer: NonZeroUsize::new(8), ..cfg(Impl::Rlu) };
        let b = load(LogicalClock::new(), &c).unwrap();
        for threads in [2, 1, 2] {
            let r = b.run(threads, Duration::from_millis(30)).unwrap();
            assert!(r.committed > 0);
            b.check().unwrap();
        }
    }

    #[test]
    fn bad_parameters_are_refused() {
        let bad = |f: fn(&mut HashtableConfig)| {
            let mut c = cfg(Impl::Rlu);
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert!(matches!(bad(|c| c.threads = 0), BenchError::ZeroThreads));
        assert!(matches!(bad(|c| c.buckets = 0), BenchError::OutOfRange { name: "buckets", .. }));
        assert!(matches!(
            bad(|c| c.update_percent = 101),
            BenchError::OutOfRange { name: "update-percent", .. }
        ));
        assert!(matches!(
            bad(|c| c.nodes_per_bucket = 0),
            BenchError::OutOfRange { name: "nodes-per-bucket", .. }
        ));
        let b = load(LogicalClock::new(), &cfg(Impl::Rlu)).unwrap();
        assert!(b.run(3, Duration::from_millis(1)).is_err(), "more threads than loaded for");
    }
}
