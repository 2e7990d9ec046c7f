//! SPHT's synthetic read/write mixes (SPHT-eADR §4): each transaction reads `reads` and
//! increments `writes` uniformly random 8-byte objects, either in a private pool per thread (no
//! contention: the cost of the protocol itself) or in one shared pool.
//!
//! Every write adds 1 to its object, so after a run the objects must sum to the number of
//! committed writes — the sequential-replay check [`check`] performs.

use std::time::Duration;

use ordo::{Addr, Config, Error, Isolation, Options, Ordo, Versions};
use ordo_clock::Clock;
use rand::{Rng, SeedableRng, rngs::SmallRng};

use crate::driver::{RunStats, Tally, run_timed};
use crate::error::BenchError;
use crate::harness::Loaded;

/// Where a transaction's objects come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pool {
    /// Each thread has its own objects.
    Private,
    /// All threads share one pool.
    Shared,
}

/// The mixes of the SPHT papers: (name, reads, writes) per transaction.
pub const MIXES: [(&str, usize, usize); 4] =
    [("5r5w", 5, 5), ("45r5w", 45, 5), ("9r1w", 9, 1), ("5r45w", 5, 45)];

/// Parameters of a synthetic run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SyntheticConfig {
    /// Objects read per transaction.
    pub reads: usize,
    /// Objects incremented per transaction.
    pub writes: usize,
    /// Private or shared pool.
    pub pool: Pool,
    /// Objects per pool.
    pub pool_objects: usize,
    /// Worker threads.
    pub threads: usize,
    /// Measured duration.
    #[serde(serialize_with = "crate::report::duration_ms")]
    pub duration: Duration,
    /// Isolation.
    #[serde(serialize_with = "crate::report::display")]
    pub isolation: Isolation,
    /// Single- or multi-version.
    #[serde(serialize_with = "crate::report::debug")]
    pub versions: Versions,
}

impl SyntheticConfig {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.threads == 0 {
            return Err(BenchError::ZeroThreads);
        }
        if self.reads + self.writes == 0 || self.reads + self.writes > 1024 {
            return Err(BenchError::OutOfRange {
                name: "reads + writes",
                value: (self.reads + self.writes).to_string(),
                expected: "1..=1024",
            });
        }
        if self.pool_objects < self.writes.max(1) {
            return Err(BenchError::OutOfRange {
                name: "pool-objects",
                value: self.pool_objects.to_string(),
                expected: "at least the writes per transaction",
            });
        }
        Ok(())
    }
}

/// The loaded pools.
pub struct SyntheticTable<C: Clock> {
    /// The database.
    pub db: Ordo<C>,
    pools: Vec<Vec<Addr>>,
    /// The configuration it was loaded with (threads and duration are set per run).
    cfg: SyntheticConfig,
    /// Committed increments, counted per thread by every run.
    writes: Tally,
}

/// Creates the database and its pools (one per thread, or one shared).
pub fn load<C: Clock>(clock: C, cfg: &SyntheticConfig) -> Result<SyntheticTable<C>, BenchError> {
    load_with(clock, cfg, Config::default())
}

/// [`load`] on a database opened with `base` (its `versions` replaced by the mix's), e.g. a
/// durable one.
pub fn load_with<C: Clock>(
    clock: C,
    cfg: &SyntheticConfig,
    base: Config,
) -> Result<SyntheticTable<C>, BenchError> {
    cfg.validate()?;
    let db = Ordo::with_clock(Config { versions: cfg.versions, ..base }, clock)?;
    let pool_count = match cfg.pool {
        Pool::Private => cfg.threads,
        Pool::Shared => 1,
    };
    let mut pools = Vec::with_capacity(pool_count);
    for _ in 0..pool_count {
        let mut pool = Vec::with_capacity(cfg.pool_objects);
        while pool.len() < cfg.pool_objects {
            let n = (cfg.pool_objects - pool.len()).min(256);
            pool.extend(
                db.run(|tx| (0..n).map(|_| tx.alloc(&0u64)).collect::<Result<Vec<_>, _>>())?,
            );
        }
        pools.push(pool);
    }
    Ok(SyntheticTable { db, pools, cfg: cfg.clone(), writes: Tally::new(cfg.threads) })
}

impl<C: Clock> SyntheticTable<C> {
    fn pool(&self, thread: usize) -> &[Addr] {
        &self.pools[thread % self.pools.len()]
    }

    /// One transaction of the mix on `thread`'s pool; returns the writes it committed.
    fn transaction(
        &self,
        cfg: &SyntheticConfig,
        thread: usize,
        rng: &mut SmallRng,
    ) -> Result<u64, Error> {
        let pool = self.pool(thread);
        let mut picks: Vec<(usize, bool)> = Vec::with_capacity(cfg.reads + cfg.writes);
        for k in 0..cfg.reads + cfg.writes {
            picks.push((rng.random_range(0..pool.len()), k >= cfg.reads));
        }
        let options = Options { will_write: cfg.writes > 0, ..Options::isolation(cfg.isolation) };
        self.db.run_with(options, |tx| {
            let mut sink = 0u64;
            for &(i, write) in &picks {
                let v: u64 = tx.read(pool[i])?;
                if write {
                    tx.write(pool[i], &(v + 1))?;
                } else {
                    sink = sink.wrapping_add(v);
                }
            }
            std::hint::black_box(sink);
            Ok::<_, Error>(cfg.writes as u64)
        })
    }
}

/// Runs the timed mix.
pub fn run<C: Clock>(table: &SyntheticTable<C>, cfg: &SyntheticConfig) -> RunStats {
    run_timed(
        cfg.threads,
        cfg.duration,
        table.db.stats(),
        || table.db.stats(),
        |t, state| {
            *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut rng = SmallRng::seed_from_u64(*state ^ t as u64);
            if let Ok(n) = table.transaction(cfg, t, &mut rng) {
                table.writes.add(t, n);
            }
        },
    )
}

/// Runs `txns` transactions per thread (untimed) and returns the writes committed.
pub fn run_counted<C: Clock>(
    table: &SyntheticTable<C>,
    cfg: &SyntheticConfig,
    txns: usize,
) -> Result<u64, BenchError> {
    Ok(crate::driver::run_counted_threads(cfg.threads, |t| {
        let mut rng = SmallRng::seed_from_u64(t as u64 + 1);
        let mut writes = 0;
        for _ in 0..txns {
            writes += table.transaction(cfg, t, &mut rng)?;
        }
        table.writes.add(t, writes);
        Ok(writes)
    })?)
}

/// Checks that the objects sum to `expected_writes` — a replay of the committed increments.
pub fn check<C: Clock>(table: &SyntheticTable<C>, expected_writes: u64) -> Result<(), BenchError> {
    let mut sum = 0u64;
    for pool in &table.pools {
        for chunk in pool.chunks(256) {
            sum += table
                .db
                .run(|tx| chunk.iter().map(|a| tx.read::<u64>(*a)).sum::<Result<u64, Error>>())?;
        }
    }
    if sum != expected_writes {
        return Err(BenchError::Inconsistent(format!(
            "objects sum to {sum}, but {expected_writes} increments committed"
        )));
    }
    Ok(())
}

impl<C: Clock> Loaded for SyntheticTable<C> {
    /// Private pools were made for the thread count of the load; a run with more threads
    /// shares pools modulo that count, so load with the largest count you will measure.
    fn run(&self, threads: usize, duration: Duration) -> Result<RunStats, BenchError> {
        let cfg = SyntheticConfig { threads, duration, ..self.cfg.clone() };
        cfg.validate()?;
        Ok(run(self, &cfg))
    }

    fn check(&self) -> Result<(), BenchError> {
        check(self, self.writes.total())
    }
}
