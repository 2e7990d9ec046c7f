//! YCSB D and E over the transactional B+tree ([`ordo::tree::BTree`]).
//!
//! Keys are `u64`s stored big-endian, so the tree's byte order is the numeric order; a row is
//! `value_bytes` long with the key (little-endian) in bytes 0..8, the inserting worker's tag in
//! 8..16 (0 for loaded rows) and filler. The table is loaded with keys `0..rows`.
//!
//! **Inserts** take fresh keys from a shared counter (`next`, YCSB's
//! `transactioninsertkeysequence`), taken when the transaction is planned, so a retried attempt
//! inserts the same key. A key is **acknowledged** once its inserting transaction committed, and
//! `limit` — YCSB's `AcknowledgedCounterGenerator::lastValue` plus one — is the length of the
//! longest prefix of keys that are all acknowledged. Reads and scans only choose keys below
//! `limit`, observed before their transaction starts, so every key they choose is committed.
//!
//! * **D** (`ReadInsertLatest`): a read chooses `limit - 1 - z` where `z` is Zipf over
//!   `0..limit` (YCSB's `SkewedLatestGenerator`): the most recent inserts are the hottest. The
//!   Zipf generator is widened incrementally as `limit` grows ([`Zipf::grow_to`]).
//! * **E** (`ScanInsert`): a scan starts at a Zipf-chosen key in `0..limit` and visits
//!   `1..=scan_length_max` (uniform) rows in key order.
//!
//! ## What every committed read and scan checks, during the run
//! The transaction started after `limit` was observed as `L`, and every key below `L` committed
//! before that, so strict serializability (real-time order) demands that it sees all of them:
//! * a read finds its key, holding a row with that key;
//! * a scan returns strictly increasing keys starting at its start key, with no key below `L`
//!   missing between two returned keys, and stops short of its length only past `L`; each row
//!   holds its key.
//!
//! Keys at or above `L` may or may not be visible (their inserts were concurrent). A violation
//! is counted and the first one kept; [`check`] (and a counted run) fail on any. After the runs,
//! [`check`] also verifies that the tree holds exactly the keys `0..next` (every insert
//! committed), each row naming its key, and the tree's structural invariants.
//!
//! If a transaction fails with an engine error (not an abort: those are retried), its insert
//! keys are never acknowledged and `limit` stops growing; the error is recorded as a violation.

use std::collections::BTreeSet;
use std::ops::{Bound, ControlFlow};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use ordo::tree::{BTree, Direction};
use ordo::{Error, Options, Ordo};
use ordo_clock::Clock;
use rand::{Rng, SeedableRng, rngs::SmallRng};

use super::{LOAD_BATCH, Operations, YcsbConfig};
use crate::driver::{RunStats, run_timed};
use crate::error::BenchError;
use crate::zipf::Zipf;

/// Rows visited per transaction by [`check`] and [`rows`].
const CHECK_BATCH: usize = 4096;

/// The B+tree index of a D or E table, its insert counters and the violations seen so far.
pub(super) struct TreeIndex {
    tree: BTree,
    /// The next key an insert takes.
    next: AtomicU64,
    /// Every key below this is acknowledged (committed).
    limit: AtomicU64,
    /// Acknowledged keys at or above `limit`; only touched under the lock, which also
    /// serializes the stores to `limit`.
    pending: Mutex<BTreeSet<u64>>,
    violations: AtomicU64,
    first_violation: Mutex<Option<String>>,
}

impl TreeIndex {
    /// The acknowledged-prefix length.
    #[inline]
    fn limit(&self) -> u64 {
        // Acquire: pairs with the Release in `acknowledge`, so the keys below were acknowledged
        // (their transactions returned) before this load.
        self.limit.load(Ordering::Acquire)
    }

    /// A fresh key for an insert.
    #[inline]
    fn take_key(&self) -> u64 {
        // Relaxed: only uniqueness matters; readers use `limit`, not `next`.
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Marks `key` as committed and advances `limit` over the acknowledged prefix.
    fn acknowledge(&self, key: u64) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.insert(key);
        // Relaxed: `limit` is only stored under this lock, so this reads the last store.
        let mut limit = self.limit.load(Ordering::Relaxed);
        while pending.remove(&limit) {
            limit += 1;
        }
        // Release: pairs with the Acquire in `limit()`.
        self.limit.store(limit, Ordering::Release);
    }

    fn violation(&self, what: String) {
        // Relaxed: a statistic, read after the workers joined.
        if self.violations.fetch_add(1, Ordering::Relaxed) == 0 {
            *self.first_violation.lock().unwrap_or_else(|e| e.into_inner()) = Some(what);
        }
    }

    fn violations(&self) -> Result<(), BenchError> {
        // Relaxed: read after the workers joined (the join orders it).
        let n = self.violations.load(Ordering::Relaxed);
        if n == 0 {
            return Ok(());
        }
        let first = self.first_violation.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Err(BenchError::Inconsistent(format!(
            "{n} violations in reads and scans, the first: {}",
            first.unwrap_or_default()
        )))
    }
}

/// What counted runs committed: every inserted row, and how many reads and scans committed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counted {
    /// `(key, row)` of every committed insert, in no particular order.
    pub inserted: Vec<(u64, Vec<u8>)>,
    /// Committed reads.
    pub reads: u64,
    /// Committed scans.
    pub scans: u64,
    /// Rows returned by committed scans.
    pub scanned_rows: u64,
}

/// One request of a planned transaction.
#[derive(Clone, Copy, Debug)]
enum Request {
    Read(u64),
    /// Start key and length.
    Scan(u64, usize),
    Insert(u64),
}

/// A worker's key chooser and buffers.
struct Worker {
    rng: SmallRng,
    zipf: Zipf,
    tag: u64,
    plan: Vec<Request>,
    row: Vec<u8>,
}

impl Worker {
    fn new(zipf: &Zipf, cfg: &YcsbConfig, thread: usize, salt: u64) -> Self {
        Worker {
            rng: SmallRng::seed_from_u64(cfg.seed ^ ((thread as u64 + 1) * 0x9E37_79B9) ^ salt),
            zipf: zipf.clone(),
            tag: thread as u64 + 1,
            plan: Vec::new(),
            row: vec![0u8; cfg.value_bytes],
        }
    }
}

fn key_bytes(key: u64) -> [u8; 8] {
    key.to_be_bytes()
}

fn row_key(row: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(row.get(..8)?.try_into().ok()?))
}

fn fill_row(row: &mut [u8], key: u64, tag: u64) {
    row[..8].copy_from_slice(&key.to_le_bytes());
    row[8..16].copy_from_slice(&tag.to_le_bytes());
}

/// Creates the tree and loads keys `0..rows` in key order, `LOAD_BATCH` per transaction.
pub(super) fn load<C: Clock>(db: &Ordo<C>, cfg: &YcsbConfig) -> Result<TreeIndex, BenchError> {
    let tree = db.run(|tx| BTree::create(tx))?;
    let mut row = vec![0u8; cfg.value_bytes];
    let mut k = 0;
    while k < cfg.rows {
        let end = (k + LOAD_BATCH).min(cfg.rows);
        db.run(|tx| {
            for key in k..end {
                fill_row(&mut row, key, 0);
                tree.insert(tx, &key_bytes(key), &row)?;
            }
            Ok::<_, Error>(())
        })?;
        k = end;
    }
    Ok(TreeIndex {
        tree,
        next: AtomicU64::new(cfg.rows),
        limit: AtomicU64::new(cfg.rows),
        pending: Mutex::new(BTreeSet::new()),
        violations: AtomicU64::new(0),
        first_violation: Mutex::new(None),
    })
}

/// Plans, runs (with retries) and checks one transaction; returns the committed plan.
fn one_transaction<C: Clock>(
    db: &Ordo<C>,
    index: &TreeIndex,
    cfg: &YcsbConfig,
    w: &mut Worker,
    counted: Option<&mut Counted>,
) {
    let limit = index.limit();
    w.zipf.grow_to(limit);
    w.plan.clear();
    let mut writes = false;
    for _ in 0..cfg.requests {
        let request = if w.rng.random_bool(cfg.read_ratio) {
            let z = w.zipf.sample(&mut w.rng).min(limit - 1);
            match cfg.operations {
                Operations::ScanInsert => {
                    Request::Scan(z, w.rng.random_range(1..=cfg.scan_length_max))
                }
                _ => Request::Read(limit - 1 - z),
            }
        } else {
            writes = true;
            Request::Insert(index.take_key())
        };
        w.plan.push(request);
    }
    let options = Options { will_write: writes, ..Options::isolation(cfg.isolation) };
    let (tree, plan, row, tag) = (index.tree, &w.plan, &mut w.row, w.tag);
    // The first violation this attempt saw, and the rows its scans returned.
    let result = db.run_with(options, |tx| {
        let mut seen: Option<String> = None;
        let mut scanned = 0u64;
        for &request in plan {
            match request {
                Request::Read(key) => match tree.get_with(tx, &key_bytes(key), row_key)? {
                    Some(Some(k)) if k == key => {}
                    found => {
                        seen.get_or_insert_with(|| {
                            format!("read of key {key} (below limit {limit}) found {found:?}")
                        });
                    }
                },
                Request::Scan(start, len) => {
                    let mut expect = start;
                    let n = tree.range(
                        tx,
                        Bound::Included(&key_bytes(start)),
                        Bound::Unbounded,
                        Direction::Forward,
                        Some(len),
                        |k, v| {
                            let key = k.try_into().map(u64::from_be_bytes).ok();
                            let problem = match key {
                                None => {
                                    Some(format!("scan from {start} met a {}-byte key", k.len()))
                                }
                                Some(key) if key < expect => {
                                    Some(format!("scan from {start}: key {key} after {expect}"))
                                }
                                Some(key) if key > expect && expect < limit => Some(format!(
                                    "scan from {start}: gap {expect}..{key} below limit {limit}"
                                )),
                                Some(key) if row_key(v) != Some(key) => {
                                    Some(format!("scan from {start}: key {key} holds another row"))
                                }
                                Some(key) => {
                                    expect = key + 1;
                                    None
                                }
                            };
                            match problem {
                                Some(p) => {
                                    seen.get_or_insert(p);
                                    ControlFlow::Break(())
                                }
                                None => ControlFlow::Continue(()),
                            }
                        },
                    )?;
                    if n < len && expect < limit && seen.is_none() {
                        seen = Some(format!(
                            "scan from {start} of {len} rows stopped after {n} at {expect}, \
                             below limit {limit}"
                        ));
                    }
                    scanned += n as u64;
                }
                Request::Insert(key) => {
                    fill_row(row, key, tag);
                    if let Some(old) = tree.insert(tx, &key_bytes(key), row)? {
                        seen.get_or_insert_with(|| {
                            format!("insert of fresh key {key} replaced {:?}", row_key(&old))
                        });
                    }
                }
            }
        }
        Ok::<_, Error>((seen, scanned))
    });
    match result {
        Ok((seen, scanned)) => {
            if let Some(what) = seen {
                index.violation(what);
            }
            for &request in plan {
                if let Request::Insert(key) = request {
                    index.acknowledge(key);
                }
            }
            if let Some(c) = counted {
                for &request in plan {
                    match request {
                        Request::Read(_) => c.reads += 1,
                        Request::Scan(..) => c.scans += 1,
                        Request::Insert(key) => {
                            fill_row(row, key, tag);
                            c.inserted.push((key, row.clone()));
                        }
                    }
                }
                c.scanned_rows += scanned;
            }
        }
        Err(e) => index.violation(format!("transaction failed: {e}")),
    }
}

/// Runs the timed workload.
pub(super) fn run<C: Clock>(
    db: &Ordo<C>,
    index: &TreeIndex,
    zipf: &Zipf,
    cfg: &YcsbConfig,
) -> RunStats {
    let before = db.stats();
    run_timed(
        cfg.threads,
        cfg.duration,
        before,
        || db.stats(),
        |thread, _state| {
            thread_local! {
                static WORKER: std::cell::RefCell<Option<Worker>> =
                    const { std::cell::RefCell::new(None) };
            }
            WORKER.with(|w| {
                let mut w = w.borrow_mut();
                let w = w.get_or_insert_with(|| Worker::new(zipf, cfg, thread, 0));
                one_transaction(db, index, cfg, w, None);
            });
        },
    )
}

/// Runs `txns_per_thread` transactions per thread and returns what committed.
pub(super) fn run_counted<C: Clock>(
    db: &Ordo<C>,
    index: &TreeIndex,
    zipf: &Zipf,
    cfg: &YcsbConfig,
    txns_per_thread: u64,
) -> Result<Counted, BenchError> {
    let all = Mutex::new(Counted::default());
    crate::driver::run_counted_threads(cfg.threads, |t| {
        let mut w = Worker::new(zipf, cfg, t, 7);
        let mut mine = Counted::default();
        for _ in 0..txns_per_thread {
            one_transaction(db, index, cfg, &mut w, Some(&mut mine));
        }
        let mut all = all.lock().unwrap_or_else(|e| e.into_inner());
        all.inserted.extend(mine.inserted);
        all.reads += mine.reads;
        all.scans += mine.scans;
        all.scanned_rows += mine.scanned_rows;
        Ok(0)
    })?;
    index.violations()?;
    Ok(all.into_inner().unwrap_or_else(|e| e.into_inner()))
}

/// Calls `f(key, row)` on every row of the tree in key order, `CHECK_BATCH` rows per transaction.
fn for_each_row<C: Clock>(
    db: &Ordo<C>,
    index: &TreeIndex,
    mut f: impl FnMut(u64, Vec<u8>) -> Result<(), BenchError>,
) -> Result<(), BenchError> {
    let mut from: Option<[u8; 8]> = None;
    loop {
        let lo = match &from {
            Some(k) => Bound::Excluded(&k[..]),
            None => Bound::Unbounded,
        };
        let batch = db.run(|tx| {
            index.tree.range_entries(
                tx,
                lo,
                Bound::Unbounded,
                Direction::Forward,
                Some(CHECK_BATCH),
            )
        })?;
        if batch.is_empty() {
            return Ok(());
        }
        for (k, v) in batch {
            let key: [u8; 8] = k.as_slice().try_into().map_err(|_| {
                BenchError::Inconsistent(format!("a {}-byte key in the YCSB tree", k.len()))
            })?;
            from = Some(key);
            f(u64::from_be_bytes(key), v)?;
        }
    }
}

/// Every `(key, row)` of the tree in key order.
pub(super) fn rows<C: Clock>(
    db: &Ordo<C>,
    index: &TreeIndex,
) -> Result<Vec<(u64, Vec<u8>)>, BenchError> {
    let mut out = Vec::new();
    for_each_row(db, index, |k, v| {
        out.push((k, v));
        Ok(())
    })?;
    Ok(out)
}

/// The checks described in the module docs, after the runs.
pub(super) fn check<C: Clock>(db: &Ordo<C>, index: &TreeIndex) -> Result<(), BenchError> {
    index.violations()?;
    // Relaxed: read after the workers joined.
    let next = index.next.load(Ordering::Relaxed);
    if index.limit() != next {
        return Err(BenchError::Inconsistent(format!(
            "{} inserts taken but only keys below {} acknowledged",
            next,
            index.limit()
        )));
    }
    db.run(|tx| index.tree.check_invariants(tx))?;
    let mut expect = 0u64;
    for_each_row(db, index, |key, row| {
        if key != expect || row_key(&row) != Some(key) {
            return Err(BenchError::Inconsistent(format!(
                "expected key {expect}, found key {key} holding key {:?}",
                row_key(&row)
            )));
        }
        expect += 1;
        Ok(())
    })?;
    if expect != next {
        return Err(BenchError::Inconsistent(format!(
            "the tree holds keys 0..{expect}, but keys 0..{next} were loaded or inserted"
        )));
    }
    Ok(())
}
