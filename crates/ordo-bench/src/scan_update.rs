//! Scans racing updates (FaRMv2 Fig. 15): read-only scans of `length` consecutive rows against
//! single-row updates, with as many keys updated as keys scanned (50:50). Single-version mode
//! makes long scans abort whenever a row they still have to read is updated; multi-version mode
//! lets them read old versions, at the price of old-version memory, whose budget policy
//! (block / abort / truncate, FaRMv2 §5.3) decides what writers do when it runs out.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ordo::{Addr, BudgetPolicy, Config, Error, Isolation, Options, Ordo, Versions};
use ordo_clock::Clock;
use rand::{Rng, SeedableRng, rngs::SmallRng};

use crate::driver::{RunStats, run_timed};
use crate::error::BenchError;

/// How versions are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VersionMode {
    /// Single-version.
    Single,
    /// Multi-version, writers wait for memory.
    Block,
    /// Multi-version, writers abort when memory is out.
    Abort,
    /// Multi-version, histories are truncated when memory is out.
    Truncate,
}

impl VersionMode {
    /// Every mode.
    pub const ALL: [VersionMode; 4] =
        [VersionMode::Single, VersionMode::Block, VersionMode::Abort, VersionMode::Truncate];

    /// The name used on command lines.
    pub fn name(self) -> &'static str {
        match self {
            VersionMode::Single => "single",
            VersionMode::Block => "block",
            VersionMode::Abort => "abort",
            VersionMode::Truncate => "truncate",
        }
    }

    fn config(self, blocks: usize, base: Config) -> Config {
        let (versions, version_budget) = match self {
            VersionMode::Single => (Versions::Single, BudgetPolicy::default()),
            VersionMode::Block => (Versions::Multi, BudgetPolicy::Block),
            VersionMode::Abort => (Versions::Multi, BudgetPolicy::Abort),
            VersionMode::Truncate => (Versions::Multi, BudgetPolicy::Truncate),
        };
        Config { versions, version_budget, version_blocks_max: blocks, ..base }
    }
}

impl std::str::FromStr for VersionMode {
    type Err = BenchError;
    fn from_str(s: &str) -> Result<Self, BenchError> {
        VersionMode::ALL.into_iter().find(|m| m.name() == s).ok_or(BenchError::OutOfRange {
            name: "modes",
            value: s.to_owned(),
            expected: "single, block, abort or truncate",
        })
    }
}

/// Parameters of one scan-update run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ScanUpdateConfig {
    /// Rows in the table.
    pub rows: u64,
    /// Rows per scan.
    pub length: u64,
    /// Version mode.
    pub mode: VersionMode,
    /// Old-version budget in 1 MiB blocks (multi-version modes).
    pub budget_blocks: usize,
    /// Threads.
    pub threads: usize,
    /// Measured duration.
    #[serde(serialize_with = "crate::report::duration_ms")]
    pub duration: Duration,
    /// Attempts a scan makes before it gives up.
    pub scan_attempts_max: u32,
}

impl ScanUpdateConfig {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.threads == 0 {
            return Err(BenchError::ZeroThreads);
        }
        if self.length == 0 || self.length > self.rows {
            return Err(BenchError::OutOfRange {
                name: "length",
                value: self.length.to_string(),
                expected: "1..=rows",
            });
        }
        if self.mode != VersionMode::Single && self.budget_blocks == 0 {
            return Err(BenchError::OutOfRange {
                name: "budget-blocks",
                value: "0".into(),
                expected: "at least 1",
            });
        }
        Ok(())
    }
}

/// What one run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ScanUpdateResult {
    /// Transactions (scans and updates) and latencies.
    pub run: RunStats,
    /// Scans that committed.
    pub scans: u64,
    /// Scans that gave up after `scan_attempts_max` attempts.
    pub scans_failed: u64,
    /// Rows read by committed scans per second.
    pub keys_scanned_per_s: f64,
    /// Updates committed per second.
    pub updates_per_s: f64,
    /// Histories truncated for lack of old-version memory.
    pub truncations: u64,
}

/// A loaded table.
pub struct ScanTable<C: Clock> {
    db: Ordo<C>,
    rows: Vec<Addr>,
}

/// Loads `cfg.rows` rows of one u64 each.
pub fn load<C: Clock>(clock: C, cfg: &ScanUpdateConfig) -> Result<ScanTable<C>, BenchError> {
    load_with(clock, cfg, Config::default())
}

/// [`load`] on a database opened with `base` (its version settings replaced by the mode's),
/// e.g. a durable one (see [`crate::engine`]).
pub fn load_with<C: Clock>(
    clock: C,
    cfg: &ScanUpdateConfig,
    base: Config,
) -> Result<ScanTable<C>, BenchError> {
    cfg.validate()?;
    let db = Ordo::with_clock(cfg.mode.config(cfg.budget_blocks, base), clock)?;
    let mut rows = Vec::with_capacity(cfg.rows as usize);
    let mut k = 0;
    while k < cfg.rows {
        let end = (k + 256).min(cfg.rows);
        rows.extend(db.run(|tx| (k..end).map(|_| tx.alloc(&0u64)).collect::<Result<Vec<_>, _>>())?);
        k = end;
    }
    Ok(ScanTable { db, rows })
}

/// Runs scans and updates mixed so that as many keys are updated as scanned.
pub fn run<C: Clock>(table: &ScanTable<C>, cfg: &ScanUpdateConfig) -> ScanUpdateResult {
    let scans = AtomicU64::new(0);
    let failed = AtomicU64::new(0);
    let updates = AtomicU64::new(0);
    let truncations_before = table.db.version_stats().truncations;
    let p_scan = 1.0 / (1.0 + cfg.length as f64);
    let run = run_timed(
        cfg.threads,
        cfg.duration,
        table.db.stats(),
        || table.db.stats(),
        |t, state| {
            *state = state.wrapping_add(1);
            let mut rng = SmallRng::seed_from_u64(*state ^ ((t as u64) << 40));
            if rng.random_bool(p_scan) {
                let start = rng.random_range(0..=(cfg.rows - cfg.length)) as usize;
                let options = Options {
                    retries_max: cfg.scan_attempts_max,
                    ..Options::isolation(Isolation::StrictSerializable)
                };
                let r = table.db.run_with(options, |tx| {
                    let mut sum = 0u64;
                    for a in &table.rows[start..start + cfg.length as usize] {
                        sum = sum.wrapping_add(tx.read_view(*a, |v| v.word(0).unwrap_or(0))?);
                    }
                    Ok::<_, Error>(sum)
                });
                match r {
                    Ok(_) => scans.fetch_add(1, Ordering::Relaxed),
                    Err(_) => failed.fetch_add(1, Ordering::Relaxed),
                };
            } else {
                let a = table.rows[rng.random_range(0..table.rows.len())];
                let options = Options { will_write: true, ..Options::default() };
                if table
                    .db
                    .run_with(options, |tx| {
                        let v: u64 = tx.read(a)?;
                        tx.write(a, &(v + 1))
                    })
                    .is_ok()
                {
                    updates.fetch_add(1, Ordering::Relaxed);
                }
            }
        },
    );
    let secs = run.elapsed_s.max(1e-9);
    let scans = scans.into_inner();
    let updates = updates.into_inner();
    ScanUpdateResult {
        keys_scanned_per_s: (scans * cfg.length) as f64 / secs,
        updates_per_s: updates as f64 / secs,
        scans,
        scans_failed: failed.into_inner(),
        truncations: table.db.version_stats().truncations - truncations_before,
        run,
    }
}
