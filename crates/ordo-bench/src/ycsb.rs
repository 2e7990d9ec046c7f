//! YCSB on the embedded engine (ORDO Fig. 13; DBx1000's YCSB).
//!
//! A table of `rows` rows of `value_bytes` each (1 KB by default, as 10 fields × 100 bytes).
//! Each transaction makes `requests` requests on Zipf-chosen rows; each request is a read with
//! probability `read_ratio`, else an update (read-modify-write of the row). As in DBx1000, rows
//! are found through an index that is not part of concurrency control — here a `Vec<Addr>` built
//! at load time — so the hot path is one index lookup and one seqlock-checked read per request:
//! a read fetches one 8-byte field in place ([`ordo::Tx::read_view`]), an update copies the row,
//! changes a field and writes the row back.
//!
//! Row layout: bytes 0..8 the key, 8..16 an update counter (incremented by every committed
//! update, which is what [`check`] verifies), then filler.
//!
//! YCSB D and E ([`Operations::ReadInsertLatest`], [`Operations::ScanInsert`]) insert rows and
//! scan ranges, which a static index cannot do: they run over the transactional B+tree instead
//! (see the `tree` submodule's docs).

use std::time::Duration;

use ordo::{Addr, Config, Error, Isolation, Options, Ordo, Versions};
use ordo_clock::Clock;
use rand::{SeedableRng, rngs::SmallRng};

use crate::driver::{RunStats, Tally, run_timed};
use crate::error::BenchError;
use crate::harness::Loaded;
use crate::zipf::Zipf;

mod tree;

pub use tree::Counted;

/// Rows loaded per loading transaction.
const LOAD_BATCH: u64 = 64;

/// What the requests of a transaction do, and so which index the table has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operations {
    /// Reads and read-modify-writes of existing rows through a static index (YCSB A, B, C, F,
    /// DBx1000's mix): `read_ratio` of the requests read.
    ReadUpdate,
    /// YCSB D over the B+tree: `read_ratio` of the requests read a row chosen by the "latest"
    /// distribution (Zipf over recency), the rest insert a fresh row.
    ReadInsertLatest,
    /// YCSB E over the B+tree: `read_ratio` of the requests scan `1..=scan_length_max` rows from
    /// a Zipf-chosen start key, the rest insert a fresh row.
    ScanInsert,
}

/// Parameters of a YCSB run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct YcsbConfig {
    /// Rows in the table.
    pub rows: u64,
    /// Bytes per row (at least 16).
    pub value_bytes: usize,
    /// Requests per transaction.
    pub requests: usize,
    /// Fraction of requests that are reads, in `[0, 1]`.
    pub read_ratio: f64,
    /// Zipf skew in `[0, 1)`; 0 is uniform.
    pub theta: f64,
    /// Worker threads.
    pub threads: usize,
    /// Measured duration.
    #[serde(serialize_with = "crate::report::duration_ms")]
    pub duration: Duration,
    /// Isolation of every transaction.
    #[serde(serialize_with = "crate::report::display")]
    pub isolation: Isolation,
    /// Single- or multi-version.
    #[serde(serialize_with = "crate::report::debug")]
    pub versions: Versions,
    /// Seed of the key choosers.
    pub seed: u64,
    /// What the requests do (and so which index the table has).
    pub operations: Operations,
    /// The longest scan of [`Operations::ScanInsert`] (YCSB's `maxscanlength`); scan lengths are
    /// uniform in `1..=scan_length_max`.
    pub scan_length_max: usize,
}

impl Default for YcsbConfig {
    fn default() -> Self {
        YcsbConfig {
            rows: 1_000_000,
            value_bytes: 1000,
            requests: 2,
            read_ratio: 1.0,
            theta: 0.0,
            threads: 1,
            duration: Duration::from_secs(2),
            isolation: Isolation::StrictSerializable,
            versions: Versions::Single,
            seed: 1,
            operations: Operations::ReadUpdate,
            scan_length_max: 100,
        }
    }
}

impl YcsbConfig {
    /// Checks every parameter; returns the first that is out of range.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad =
            |name, value: String, expected| Err(BenchError::OutOfRange { name, value, expected });
        if self.threads == 0 {
            return Err(BenchError::ZeroThreads);
        }
        if self.rows == 0 {
            return bad("rows", self.rows.to_string(), "at least 1");
        }
        if self.value_bytes < 16 || self.value_bytes > ordo::heap::OBJECT_BYTES_MAX {
            return bad("value-bytes", self.value_bytes.to_string(), "16..=262144");
        }
        if self.requests == 0 || self.requests > 1024 {
            return bad("requests", self.requests.to_string(), "1..=1024");
        }
        if !(0.0..=1.0).contains(&self.read_ratio) {
            return bad("read-ratio", self.read_ratio.to_string(), "0..=1");
        }
        if self.scan_length_max == 0 || self.scan_length_max > 100_000 {
            return bad("scan-length-max", self.scan_length_max.to_string(), "1..=100000");
        }
        if self.operations != Operations::ReadUpdate
            && self.value_bytes > ordo::tree::VALUE_BYTES_MAX
        {
            return bad("value-bytes", self.value_bytes.to_string(), "a B+tree value");
        }
        Zipf::new(2, self.theta)?;
        Ok(())
    }
}

/// A loaded table: the database and the index from key to row address (a static `Vec` for
/// [`Operations::ReadUpdate`], else a B+tree).
pub struct YcsbTable<C: Clock> {
    /// The database.
    pub db: Ordo<C>,
    rows: Vec<Addr>,
    zipf: Zipf,
    tree: Option<tree::TreeIndex>,
    /// The configuration it was loaded with (threads and duration are set per run).
    cfg: YcsbConfig,
    /// Committed updates, counted per thread by every run.
    updates: Tally,
}

/// Creates a database on `clock` and loads the table with `load_threads` threads.
pub fn load<C: Clock>(
    clock: C,
    cfg: &YcsbConfig,
    load_threads: usize,
) -> Result<YcsbTable<C>, BenchError> {
    load_with(clock, cfg, load_threads, Config::default())
}

/// [`load`] on a database opened with `base` (its `versions` replaced by the workload's), e.g.
/// a durable one.
pub fn load_with<C: Clock>(
    clock: C,
    cfg: &YcsbConfig,
    load_threads: usize,
    base: Config,
) -> Result<YcsbTable<C>, BenchError> {
    cfg.validate()?;
    let config = Config { versions: cfg.versions, ..base };
    let db = Ordo::with_clock(config, clock)?;
    load_on(db, cfg, load_threads)
}

/// [`load`] on an open database `db` (e.g. a cluster client's engine, see [`crate::cluster`]),
/// whose versions mode should be the workload's.
pub fn load_on<C: Clock>(
    db: Ordo<C>,
    cfg: &YcsbConfig,
    load_threads: usize,
) -> Result<YcsbTable<C>, BenchError> {
    cfg.validate()?;
    if cfg.operations != Operations::ReadUpdate {
        let index = tree::load(&db, cfg)?;
        let zipf = Zipf::new(cfg.rows, cfg.theta)?;
        let (cfg, updates) = (cfg.clone(), Tally::new(cfg.threads));
        return Ok(YcsbTable { db, rows: Vec::new(), zipf, tree: Some(index), cfg, updates });
    }
    let load_threads = load_threads.max(1);
    let chunks: Vec<Result<Vec<Addr>, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..load_threads as u64)
            .map(|t| {
                let db = &db;
                s.spawn(move || {
                    let per = cfg.rows.div_ceil(load_threads as u64);
                    let (lo, hi) = (t * per, ((t + 1) * per).min(cfg.rows));
                    let mut out = Vec::with_capacity(hi.saturating_sub(lo) as usize);
                    let mut row = vec![0u8; cfg.value_bytes];
                    let mut k = lo;
                    while k < hi {
                        let end = (k + LOAD_BATCH).min(hi);
                        let batch = db.run(|tx| {
                            (k..end)
                                .map(|key| {
                                    row[..8].copy_from_slice(&key.to_le_bytes());
                                    tx.alloc_bytes(&row)
                                })
                                .collect::<Result<Vec<_>, _>>()
                        })?;
                        out.extend(batch);
                        k = end;
                    }
                    Ok(out)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(Error::Config("loader panicked".into()))))
            .collect()
    });
    let mut rows = Vec::with_capacity(cfg.rows as usize);
    for c in chunks {
        rows.extend(c?);
    }
    let zipf = Zipf::new(cfg.rows, cfg.theta)?;
    let (cfg, updates) = (cfg.clone(), Tally::new(cfg.threads));
    Ok(YcsbTable { db, rows, zipf, tree: None, cfg, updates })
}

/// A worker thread's key chooser, row buffer and request plan.
type ThreadState = (SmallRng, Vec<u8>, Vec<(u64, bool)>);

/// Runs the timed workload on a loaded table.
///
/// The table decides what runs: a table loaded for D or E runs its operations over the B+tree,
/// and `cfg.operations` is not consulted again.
pub fn run<C: Clock>(table: &YcsbTable<C>, cfg: &YcsbConfig) -> RunStats {
    if let Some(index) = &table.tree {
        return tree::run(&table.db, index, &table.zipf, cfg);
    }
    let before = table.db.stats();
    let writes_possible = cfg.read_ratio < 1.0;
    run_timed(
        cfg.threads,
        cfg.duration,
        before,
        || table.db.stats(),
        |thread, state| {
            thread_local! {
                static STATE: std::cell::RefCell<Option<ThreadState>> =
                    const { std::cell::RefCell::new(None) };
            }
            STATE.with(|st| {
                let mut st = st.borrow_mut();
                let (rng, buf, plan) = st.get_or_insert_with(|| {
                    (
                        // The driver's state differs per thread and per run.
                        SmallRng::seed_from_u64(cfg.seed ^ *state ^ (thread as u64 + 1)),
                        Vec::new(),
                        Vec::new(),
                    )
                });
                if let Ok(n @ 1..) = one_transaction(table, cfg, writes_possible, rng, buf, plan) {
                    table.updates.add(thread, n);
                }
            });
        },
    )
}

fn one_transaction<C: Clock>(
    table: &YcsbTable<C>,
    cfg: &YcsbConfig,
    writes_possible: bool,
    rng: &mut SmallRng,
    buf: &mut Vec<u8>,
    plan: &mut Vec<(u64, bool)>,
) -> Result<u64, Error> {
    use rand::Rng;
    plan.clear();
    for _ in 0..cfg.requests {
        let key = table.zipf.sample(rng);
        let read = !writes_possible || rng.random_bool(cfg.read_ratio);
        plan.push((key, read));
    }
    execute(table, cfg, plan, buf)
}

/// Runs one planned transaction to commit (with retries); returns its number of updates.
fn execute<C: Clock>(
    table: &YcsbTable<C>,
    cfg: &YcsbConfig,
    plan: &[(u64, bool)],
    buf: &mut Vec<u8>,
) -> Result<u64, Error> {
    let writes = plan.iter().any(|(_, read)| !read);
    let options = Options { will_write: writes, ..Options::isolation(cfg.isolation) };
    table.db.run_with(options, |tx| {
        let mut updates = 0u64;
        for &(key, read) in plan {
            let addr = table.rows[key as usize];
            if read {
                // Read one field in place, as DBx1000's YCSB reads one field of the row.
                std::hint::black_box(tx.read_view(addr, |v| v.word(1))?);
            } else {
                tx.read_with(addr, |b| {
                    buf.clear();
                    buf.extend_from_slice(b);
                })?;
                let counter = u64::from_le_bytes(buf[8..16].try_into().unwrap_or([0; 8]));
                buf[8..16].copy_from_slice(&(counter + 1).to_le_bytes());
                tx.write_bytes(addr, buf)?;
                updates += 1;
            }
        }
        Ok::<_, Error>(updates)
    })
}

/// Checks the table after a run: every row still holds its key, and the update counters add up
/// to `expected_updates` (the committed updates the caller counted).
///
/// For a D or E table `expected_updates` is unused (they update nothing); instead every key taken
/// by an insert must be present with its row, the tree's invariants must hold, and no read or
/// scan during any run may have seen a violation (see the module docs of the tree workloads).
pub fn check<C: Clock>(table: &YcsbTable<C>, expected_updates: u64) -> Result<(), BenchError> {
    if let Some(index) = &table.tree {
        return tree::check(&table.db, index);
    }
    let mut total = 0u64;
    for (key, addr) in table.rows.iter().enumerate() {
        let (k, c) = table.db.run(|tx| {
            tx.read_with(*addr, |b| {
                let k = u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8]));
                let c = u64::from_le_bytes(b[8..16].try_into().unwrap_or([0; 8]));
                (k, c)
            })
        })?;
        if k != key as u64 {
            return Err(BenchError::Inconsistent(format!("row {key} holds key {k}")));
        }
        total += c;
    }
    if total != expected_updates {
        return Err(BenchError::Inconsistent(format!(
            "update counters sum to {total}, but {expected_updates} updates committed"
        )));
    }
    Ok(())
}

/// Runs `txns_per_thread` transactions on each of `cfg.threads` threads (no timer) and returns
/// the number of committed updates, for [`check`]. For D and E tables, the number of committed
/// inserts (see [`run_counted_tree`] for the inserts themselves).
pub fn run_counted<C: Clock>(
    table: &YcsbTable<C>,
    cfg: &YcsbConfig,
    txns_per_thread: u64,
) -> Result<u64, BenchError> {
    if table.tree.is_some() {
        return Ok(run_counted_tree(table, cfg, txns_per_thread)?.inserted.len() as u64);
    }
    Ok(crate::driver::run_counted_threads(cfg.threads, |t| {
        let mut rng = SmallRng::seed_from_u64(cfg.seed ^ (t as u64 + 7));
        let (mut buf, mut plan) = (Vec::new(), Vec::new());
        let mut updates = 0;
        for _ in 0..txns_per_thread {
            updates += one_transaction(table, cfg, true, &mut rng, &mut buf, &mut plan)?;
        }
        table.updates.add(t, updates);
        Ok(updates)
    })?)
}

/// For a D or E table: runs `txns_per_thread` transactions on each of `cfg.threads` threads and
/// returns what the workers committed (every insert's key and row), for a model check.
/// [`BenchError::OutOfRange`] on a table loaded for A, B, C or F.
pub fn run_counted_tree<C: Clock>(
    table: &YcsbTable<C>,
    cfg: &YcsbConfig,
    txns_per_thread: u64,
) -> Result<Counted, BenchError> {
    match &table.tree {
        Some(index) => tree::run_counted(&table.db, index, &table.zipf, cfg, txns_per_thread),
        None => Err(BenchError::OutOfRange {
            name: "operations",
            value: "read-update".into(),
            expected: "a table loaded for YCSB D or E",
        }),
    }
}

/// For a D or E table: every `(key, row)` of the tree in key order (for a model check).
pub fn tree_rows<C: Clock>(table: &YcsbTable<C>) -> Result<Vec<(u64, Vec<u8>)>, BenchError> {
    match &table.tree {
        Some(index) => tree::rows(&table.db, index),
        None => Ok(Vec::new()),
    }
}

impl<C: Clock> Loaded for YcsbTable<C> {
    fn run(&self, threads: usize, duration: Duration) -> Result<RunStats, BenchError> {
        let cfg = YcsbConfig { threads, duration, ..self.cfg.clone() };
        cfg.validate()?;
        Ok(run(self, &cfg))
    }

    fn check(&self) -> Result<(), BenchError> {
        check(self, self.updates.total())
    }
}
