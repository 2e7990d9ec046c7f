//! TPC-C on the embedded engine (ORDO Fig. 14; FaRMv2 §5.1, Fig. 12).
//!
//! Two mixes: [`Mix::NoPay`] — NewOrder 50%, Payment 50%, as DBx1000's TPC-C and ORDO Fig. 14 —
//! and [`Mix::Full`], the standard's five transactions at 45/43/4/4/4 (NewOrder, Payment,
//! Order-Status, Delivery, Stock-Level), whose figure of merit is committed NewOrders per second
//! (FaRMv2 §5.1). Transactions follow the profiles of clause 2 of the TPC-C standard: NewOrder
//! with 1% of orders rolled back on an unused item number, Payment 60% by last name and 15% to a
//! remote warehouse, Delivery of the ten districts of a warehouse in one transaction. Each
//! worker thread is a terminal bound to home warehouse `thread % warehouses + 1`.
//!
//! ## Storage
//! Every row is one heap object with a fixed binary layout ([`schema`]). Indexes:
//!
//! | table | index | kind |
//! |---|---|---|
//! | WAREHOUSE, DISTRICT, CUSTOMER, ITEM, STOCK | primary key | `Vec<Addr>` built at load time |
//! | CUSTOMER | (w, d, last, first, c) → row | [`ordo::tree::BTree`] (read-only after load) |
//! | ORDER | (w, d, o) → row | [`ordo::map::HashMap`] |
//! | ORDER | (w, d, c, o) → row | [`ordo::tree::BTree`] |
//! | NEW-ORDER | (w, d, o) → nothing | [`ordo::tree::BTree`]; the tree entry *is* the row |
//! | ORDER-LINE | (w, d, o) → the order's rows, stored together | [`ordo::tree::BTree`] |
//! | HISTORY | none (insert only) | — |
//!
//! The five tables with a fixed set of rows have load-time vectors, as in DBx1000 (and
//! [`crate::ycsb`]): their keys are dense, rows are never inserted or deleted, and row addresses
//! never change, so a vector indexed by the key is exact and needs no concurrency control. Every
//! table that grows is indexed transactionally, so inserts, deletes and lookups commit or abort
//! with the rest of the transaction.
//!
//! ORDER-LINE rows are clustered by their order: one tree entry per order whose value is its 5–15
//! line rows, whole and in line-number order ([`schema::order_line::rows`]), kept by the tree in
//! one out-of-line value object. Every access of the profiles goes through whole orders — a
//! NewOrder inserts its lines together, Delivery updates (OL_DELIVERY_D) and Order-Status reads
//! the lines of one order, Stock-Level those of a range of 20 orders — so clustering changes where
//! the rows lie, not what is read or written: every row keeps all its columns and every update the
//! profiles make is made. (TPC-C specifies tables, rows and columns, and leaves the physical
//! clustering of records to the implementation.)
//! A NewOrder then allocates one object for its lines instead of one per line, and commits 9 fewer
//! objects on average; until session 14 each line was its own object, listed by address in the
//! tree value (`docs/results/2026-11-25-s14-*` compares the two).
//!
//! ## Accounting
//! A NewOrder rolled back on its unused item is a *user* abort: it is counted in
//! [`TpccRun::rollbacks`], not in committed transactions, and removed from the engine's
//! `requested` abort count so that the abort rate shows only concurrency-control aborts.
//! Throughput counts committed transactions; [`TpccRun::new_orders_per_s`] counts committed
//! NewOrders.
//!
//! ## Consistency
//! [`check()`] verifies the standard's consistency conditions 1–4 (clause 3.3.2) after load and
//! after every run.

pub mod check;
pub mod load;
pub mod random;
pub mod schema;
pub mod txns;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ordo::map::HashMap;
use ordo::tree::BTree;
use ordo::{Addr, Isolation, Ordo, Versions};
use ordo_clock::Clock;

use crate::driver::{RunStats, run_limited};
use crate::error::BenchError;

pub use check::{Violation, check, violations};
pub use load::{load, load_on, load_with};

/// The transaction mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mix {
    /// NewOrder 50%, Payment 50% (ORDO Fig. 14, DBx1000).
    NoPay,
    /// NewOrder 45%, Payment 43%, Order-Status 4%, Delivery 4%, Stock-Level 4%.
    Full,
}

impl Mix {
    /// The name on command lines.
    pub fn name(self) -> &'static str {
        match self {
            Mix::NoPay => "no-pay",
            Mix::Full => "full",
        }
    }
}

/// The five transaction kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Kind {
    /// NewOrder.
    NewOrder,
    /// Payment.
    Payment,
    /// Order-Status (read-only).
    OrderStatus,
    /// Delivery.
    Delivery,
    /// Stock-Level (read-only).
    StockLevel,
}

impl Kind {
    /// Every kind, in counter order.
    pub const ALL: [Kind; 5] =
        [Kind::NewOrder, Kind::Payment, Kind::OrderStatus, Kind::Delivery, Kind::StockLevel];

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::NewOrder => "new-order",
            Kind::Payment => "payment",
            Kind::OrderStatus => "order-status",
            Kind::Delivery => "delivery",
            Kind::StockLevel => "stock-level",
        }
    }

    /// Draws a kind of `mix` from a uniform `roll` in `0..100`.
    pub fn pick(mix: Mix, roll: u32) -> Kind {
        match mix {
            Mix::NoPay if roll < 50 => Kind::NewOrder,
            Mix::NoPay => Kind::Payment,
            Mix::Full => match roll {
                0..45 => Kind::NewOrder,
                45..88 => Kind::Payment,
                88..92 => Kind::OrderStatus,
                92..96 => Kind::Delivery,
                _ => Kind::StockLevel,
            },
        }
    }
}

/// Parameters of a TPC-C database and run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TpccConfig {
    /// Warehouses (at least 1).
    pub warehouses: u32,
    /// Rows of ITEM, and of STOCK per warehouse (100000 in the standard).
    pub items: u32,
    /// Customers per district (3000 in the standard); also the initial orders per district.
    pub customers_per_district: u32,
    /// The transaction mix.
    pub mix: Mix,
    /// Worker threads (terminals).
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
    /// Seed of the loader and the terminals' input generators.
    pub seed: u64,
    /// Stop each terminal after this many transactions (the duration then caps the run): a run
    /// of exactly these transactions, whose instruction counts compare between builds.
    pub txns_per_thread: Option<u64>,
    /// Fresh heap memory to fault in before loading ([`ordo::Ordo::pretouch_heap`]); 0 leaves
    /// it to the background prefaulter.
    pub pretouch_bytes: u64,
}

impl Default for TpccConfig {
    fn default() -> Self {
        TpccConfig {
            warehouses: 1,
            items: ITEMS_STANDARD,
            customers_per_district: CUSTOMERS_STANDARD,
            mix: Mix::NoPay,
            threads: 1,
            duration: Duration::from_secs(2),
            isolation: Isolation::StrictSerializable,
            versions: Versions::Single,
            seed: 1,
            txns_per_thread: None,
            pretouch_bytes: 0,
        }
    }
}

/// ITEM rows in the standard.
pub const ITEMS_STANDARD: u32 = 100_000;
/// Customers per district in the standard.
pub const CUSTOMERS_STANDARD: u32 = 3_000;
/// The most warehouses (keys hold a 16-bit warehouse id).
pub const WAREHOUSES_MAX: u32 = u16::MAX as u32;
/// The most items or customers per district a configuration may ask for.
pub const ROWS_MAX: u32 = 10_000_000;

impl TpccConfig {
    /// Checks every parameter; returns the first that is out of range.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad =
            |name, value: String, expected| Err(BenchError::OutOfRange { name, value, expected });
        if self.threads == 0 {
            return Err(BenchError::ZeroThreads);
        }
        if self.warehouses == 0 || self.warehouses > WAREHOUSES_MAX {
            return bad("warehouses", self.warehouses.to_string(), "1..=65535");
        }
        if self.items == 0 || self.items > ROWS_MAX {
            return bad("items", self.items.to_string(), "1..=10000000");
        }
        if self.customers_per_district == 0 || self.customers_per_district > ROWS_MAX {
            return bad(
                "customers-per-district",
                self.customers_per_district.to_string(),
                "1..=10000000",
            );
        }
        Ok(())
    }

    /// Orders per district at load (one per customer, clause 4.3.3.1).
    pub fn initial_orders(&self) -> u32 {
        self.customers_per_district
    }

    /// Of those, the newest ones still undelivered (900 of 3000 in the standard).
    pub fn initial_new_orders(&self) -> u32 {
        self.customers_per_district * 3 / 10
    }

    /// Distinct last names used (1000 in the standard; fewer when there are fewer customers).
    pub fn last_names(&self) -> u32 {
        self.customers_per_district.min(1000)
    }
}

/// A loaded database: the engine, the index handles and the load-time row vectors.
pub struct Tpcc<C: Clock> {
    /// The database.
    pub db: Ordo<C>,
    /// The configuration it was loaded with (threads, duration, mix and isolation may be
    /// changed per run through [`run`]'s argument).
    pub cfg: TpccConfig,
    pub(crate) warehouses: Vec<Addr>,
    pub(crate) warehouse_ytd: Vec<Addr>,
    pub(crate) districts: Vec<Addr>,
    pub(crate) district_ytd: Vec<Addr>,
    pub(crate) customers: Vec<Addr>,
    pub(crate) items: Vec<Addr>,
    pub(crate) stock: Vec<Addr>,
    pub(crate) customer_by_name: BTree,
    pub(crate) orders: HashMap,
    pub(crate) orders_by_customer: BTree,
    pub(crate) new_orders: BTree,
    pub(crate) order_lines: BTree,
    pub(crate) nurand: random::NuRand,
}

impl<C: Clock> Tpcc<C> {
    /// The WAREHOUSE row of `w` (1-based).
    pub fn warehouse_addr(&self, w: u32) -> Option<Addr> {
        self.warehouses.get((w as usize).checked_sub(1)?).copied()
    }

    /// The DISTRICT row of (`w`, `d`).
    pub fn district_addr(&self, w: u32, d: u32) -> Option<Addr> {
        self.districts.get(self.district_index(w, d)?).copied()
    }

    /// The W_YTD object of warehouse `w` ([`schema::ytd`]).
    pub fn warehouse_ytd_addr(&self, w: u32) -> Option<Addr> {
        self.warehouse_ytd.get((w as usize).checked_sub(1)?).copied()
    }

    /// The D_YTD object of (`w`, `d`) ([`schema::ytd`]).
    pub fn district_ytd_addr(&self, w: u32, d: u32) -> Option<Addr> {
        self.district_ytd.get(self.district_index(w, d)?).copied()
    }

    /// The CUSTOMER row of (`w`, `d`, `c`).
    pub fn customer_addr(&self, w: u32, d: u32, c: u32) -> Option<Addr> {
        let cpd = self.cfg.customers_per_district as usize;
        if c == 0 || c as usize > cpd {
            return None;
        }
        let district = self.district_index(w, d)?;
        self.customers.get(district * cpd + c as usize - 1).copied()
    }

    /// The STOCK row of item `i` in warehouse `w`.
    pub fn stock_addr(&self, w: u32, i: u32) -> Option<Addr> {
        let items = self.cfg.items as usize;
        if i == 0 || i as usize > items {
            return None;
        }
        self.stock.get((w as usize).checked_sub(1)? * items + i as usize - 1).copied()
    }

    /// The ITEM row of `i`; `None` for an unused item number.
    pub fn item_addr(&self, i: u32) -> Option<Addr> {
        self.items.get((i as usize).checked_sub(1)?).copied()
    }

    /// The NEW-ORDER tree (key [`schema::order_key`], empty value).
    pub fn new_orders(&self) -> BTree {
        self.new_orders
    }

    /// The ORDER-LINE tree (key [`schema::order_key`], value the order's line rows, see
    /// [`schema::order_line::rows`]).
    pub fn order_lines(&self) -> BTree {
        self.order_lines
    }

    /// The ORDER hash index (key [`schema::order_key`], value the row address).
    pub fn orders(&self) -> HashMap {
        self.orders
    }

    fn district_index(&self, w: u32, d: u32) -> Option<usize> {
        if d == 0 || d > schema::DISTRICTS || w == 0 || w > self.cfg.warehouses {
            return None;
        }
        Some((w as usize - 1) * schema::DISTRICTS as usize + d as usize - 1)
    }
}

/// What one timed TPC-C run measured.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct TpccRun {
    /// Engine-level figures; `committed` and `tx_per_s` count committed transactions only, and
    /// the `requested` aborts exclude the NewOrder rollbacks.
    pub run: RunStats,
    /// Committed transactions per kind, in [`Kind::ALL`] order.
    pub committed_by_kind: [u64; 5],
    /// Committed NewOrders per second.
    pub new_orders_per_s: f64,
    /// NewOrders rolled back on an unused item (user aborts, clause 2.4.2.3).
    pub rollbacks: u64,
    /// Transactions that failed with an engine error (e.g. retries exhausted); zero normally.
    pub failed: u64,
    /// The first such failure.
    pub first_failure: Option<String>,
    /// CPU time the whole process used during the run (all threads, GC included) per committed
    /// transaction, in microseconds; `None` where `/proc/self/stat` cannot be read. Unlike
    /// tx/s it barely changes when other processes compete for the cores.
    pub cpu_us_per_tx: Option<f64>,
}

/// CPU seconds (user + system) the process has used, from `/proc/self/stat` (Linux), whose
/// counters are in USER_HZ = 100 ticks per second on every Linux architecture.
pub(crate) fn process_cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let mut fields = rest.split_ascii_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

impl TpccRun {
    /// The engine-level figures with the TPC-C ones as [`RunStats::metrics`]:
    /// `new_orders_per_s` and `rollbacks`.
    pub fn into_run_stats(self) -> RunStats {
        let mut stats = self.run;
        stats.metrics.push(("new_orders_per_s".into(), self.new_orders_per_s));
        stats.metrics.push(("rollbacks".into(), self.rollbacks as f64));
        if let Some(cpu) = self.cpu_us_per_tx {
            stats.metrics.push(("cpu_us_per_tx".into(), cpu));
        }
        stats
    }
}

impl<C: Clock> crate::harness::Loaded for Tpcc<C> {
    /// A timed run of the loaded mix; an error if any transaction failed (the measurement would
    /// not be of TPC-C).
    fn run(&self, threads: usize, duration: Duration) -> Result<RunStats, BenchError> {
        let cfg = TpccConfig { threads, duration, ..self.cfg.clone() };
        cfg.validate()?;
        let r = run(self, &cfg);
        if r.failed > 0 {
            return Err(BenchError::Inconsistent(format!(
                "{} TPC-C transactions failed; the first: {}",
                r.failed,
                r.first_failure.as_deref().unwrap_or("?")
            )));
        }
        Ok(r.into_run_stats())
    }

    fn check(&self) -> Result<(), BenchError> {
        check(self)
    }
}

/// Counters of one terminal, padded to its own cache lines.
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct TerminalCounters {
    committed: [AtomicU64; 5],
    rollbacks: AtomicU64,
    failed: AtomicU64,
}

impl TerminalCounters {
    pub(crate) fn record(&self, kind: Kind, outcome: &Result<txns::Outcome, BenchError>) {
        // Relaxed: each counter has one writer (its terminal) and is read after the threads join.
        let counter = match outcome {
            Ok(txns::Outcome::Committed) => &self.committed[kind as usize],
            Ok(txns::Outcome::RolledBack) => &self.rollbacks,
            Err(_) => &self.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs the timed workload `cfg` (its mix, threads, duration, isolation and seed) on a loaded
/// database. The database's shape (warehouses, items, customers) is the loaded one.
pub fn run<C: Clock>(tpcc: &Tpcc<C>, cfg: &TpccConfig) -> TpccRun {
    let counters: Vec<TerminalCounters> =
        (0..cfg.threads).map(|_| TerminalCounters::default()).collect();
    let first_failure: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let before = tpcc.db.stats();
    let cpu_before = process_cpu_s();
    let mut stats = run_limited(
        cfg.threads,
        cfg.duration,
        cfg.txns_per_thread,
        before,
        || tpcc.db.stats(),
        |thread, _state| {
            thread_local! {
                static TERMINAL: std::cell::RefCell<Option<txns::Terminal>> =
                    const { std::cell::RefCell::new(None) };
            }
            TERMINAL.with(|t| {
                let mut t = t.borrow_mut();
                let terminal = t.get_or_insert_with(|| txns::Terminal::new(tpcc, cfg, thread));
                let (kind, outcome) = terminal.one(tpcc, cfg);
                counters[thread].record(kind, &outcome);
                if let Err(e) = outcome {
                    let mut first = first_failure.lock().unwrap_or_else(|p| p.into_inner());
                    first.get_or_insert_with(|| format!("{}: {e}", kind.name()));
                }
            });
        },
        |_| {},
    );
    let sum = |f: &dyn Fn(&TerminalCounters) -> &AtomicU64| -> u64 {
        counters.iter().map(|c| f(c).load(Ordering::Relaxed)).sum()
    };
    let mut committed_by_kind = [0u64; 5];
    for (k, slot) in committed_by_kind.iter_mut().enumerate() {
        *slot = sum(&|c| &c.committed[k]);
    }
    let cpu_s = match (cpu_before, process_cpu_s()) {
        (Some(b), Some(a)) => Some(a - b),
        _ => None,
    };
    let rollbacks = sum(&|c| &c.rollbacks);
    let failed = sum(&|c| &c.failed);
    let committed: u64 = committed_by_kind.iter().sum();
    stats.committed = committed;
    let elapsed = stats.elapsed_s.max(1e-9);
    stats.tx_per_s = committed as f64 / elapsed;
    for (name, n) in &mut stats.aborts {
        if name.as_str() == ordo::AbortKind::Requested.name() {
            *n = n.saturating_sub(rollbacks);
        }
    }
    let aborted: u64 = stats.aborts.iter().map(|(_, n)| n).sum();
    stats.abort_rate = aborted as f64 / (aborted + committed).max(1) as f64;
    TpccRun {
        new_orders_per_s: committed_by_kind[Kind::NewOrder as usize] as f64 / elapsed,
        run: stats,
        committed_by_kind,
        rollbacks,
        failed,
        first_failure: first_failure.into_inner().unwrap_or_else(|p| p.into_inner()),
        cpu_us_per_tx: cpu_s.map(|s| s * 1e6 / committed.max(1) as f64),
    }
}

/// What [`run_counted`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CountedRun {
    /// Committed transactions per kind, in [`Kind::ALL`] order.
    pub committed_by_kind: [u64; 5],
    /// NewOrders rolled back on an unused item.
    pub rollbacks: u64,
}

/// Runs `txns_per_thread` transactions of `cfg.mix` on each of `cfg.threads` threads (no timer;
/// for tests). The first engine error is returned.
pub fn run_counted<C: Clock>(
    tpcc: &Tpcc<C>,
    cfg: &TpccConfig,
    txns_per_thread: u64,
) -> Result<CountedRun, BenchError> {
    cfg.validate()?;
    let counters: Vec<TerminalCounters> =
        (0..cfg.threads).map(|_| TerminalCounters::default()).collect();
    let first_error: std::sync::Mutex<Option<BenchError>> = std::sync::Mutex::new(None);
    crate::driver::run_counted_threads(cfg.threads, |thread| {
        let mut terminal = txns::Terminal::new(tpcc, cfg, thread);
        for _ in 0..txns_per_thread {
            let (kind, outcome) = terminal.one(tpcc, cfg);
            counters[thread].record(kind, &outcome);
            if let Err(e) = outcome {
                first_error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                break;
            }
        }
        Ok(0)
    })?;
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let mut out = CountedRun::default();
    for c in &counters {
        for (k, slot) in out.committed_by_kind.iter_mut().enumerate() {
            *slot += c.committed[k].load(Ordering::Relaxed);
        }
        out.rollbacks += c.rollbacks.load(Ordering::Relaxed);
    }
    Ok(out)
}
