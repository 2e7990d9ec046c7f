//! The initial database of clause 4.3.3, scaled by [`TpccConfig`].
//!
//! Loading is split into jobs — a range of items, a range of one warehouse's stock, a warehouse
//! row, or one district with its customers, history and orders — each with its own random
//! generator seeded from the configuration's seed and the job's number, so the database is the
//! same whatever the number of loading threads. Jobs commit in batches of rows.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use ordo::map::HashMap;
use ordo::tree::{BTree, TreeOptions};
use ordo::{Addr, Config, Error, Ordo, Tx};
use ordo_clock::Clock;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::random::{self, NuRand};
use super::schema::{
    self, DISTRICTS, customer, district, history, item, order, order_line, set, set_i, set_str,
    stock, warehouse, ytd,
};
use super::{Tpcc, TpccConfig};
use crate::error::BenchError;

/// Rows per loading transaction (items, stock, customers).
const ROW_BATCH: u32 = 64;
/// Orders (with their lines) per loading transaction.
const ORDER_BATCH: u32 = 16;
/// Node size of the trees that grow during a run. Smaller than the engine's default: every
/// insert rewrites its leaf, and a read copies the whole node.
pub const TREE_NODE_BYTES: usize = 1024;

/// One unit of loading work.
#[derive(Clone, Copy, Debug)]
enum Job {
    Items { lo: u32, hi: u32 },
    Stock { w: u32, lo: u32, hi: u32 },
    Warehouse { w: u32 },
    District { w: u32, d: u32 },
}

/// Addresses produced by a job.
enum Loaded {
    Items(u32, Vec<Addr>),
    Stock(u32, u32, Vec<Addr>),
    /// Warehouse, row, W_YTD.
    Warehouse(u32, Addr, Addr),
    /// Warehouse, district, row, D_YTD, customers.
    District(u32, u32, Addr, Addr, Vec<Addr>),
}

/// The indexes every job writes to.
#[derive(Clone, Copy)]
struct Indexes {
    customer_by_name: BTree,
    orders: HashMap,
    orders_by_customer: BTree,
    new_orders: BTree,
    order_lines: BTree,
}

/// Creates a database on `clock` and loads the initial TPC-C population with `load_threads`
/// threads. Rejects a bad configuration before creating anything.
pub fn load<C: Clock>(
    clock: C,
    cfg: &TpccConfig,
    load_threads: usize,
) -> Result<Tpcc<C>, BenchError> {
    load_with(clock, cfg, load_threads, Config::default())
}

/// [`load`] on a database opened with `base` (its `versions` replaced by the workload's), e.g.
/// a durable one (see [`crate::engine`]).
pub fn load_with<C: Clock>(
    clock: C,
    cfg: &TpccConfig,
    load_threads: usize,
    base: Config,
) -> Result<Tpcc<C>, BenchError> {
    cfg.validate()?;
    let config = Config { versions: cfg.versions, ..base };
    let db = Ordo::with_clock(config, clock)?;
    load_on(db, cfg, load_threads)
}

/// [`load`] on an open database `db` (e.g. a cluster client's engine, see [`crate::cluster`]),
/// whose versions mode should be the workload's.
pub fn load_on<C: Clock>(
    db: Ordo<C>,
    cfg: &TpccConfig,
    load_threads: usize,
) -> Result<Tpcc<C>, BenchError> {
    cfg.validate()?;
    if cfg.pretouch_bytes > 0 {
        db.pretouch_heap(usize::try_from(cfg.pretouch_bytes).unwrap_or(usize::MAX))?;
    }
    let mut seed_rng = SmallRng::seed_from_u64(cfg.seed);
    let nurand = NuRand::new(&mut seed_rng);
    let orders_total = cfg.warehouses as usize * DISTRICTS as usize * cfg.initial_orders() as usize;
    let node = TreeOptions::with_node_bytes(TREE_NODE_BYTES);
    // A presized map is written in the one transaction that creates it (several MB): a
    // durable database logs it in parts.
    let orders_hint = orders_total * 2;
    let ix = db.run(|tx| {
        Ok::<_, Error>(Indexes {
            customer_by_name: BTree::create_with(tx, node)?,
            orders: HashMap::create(tx, orders_hint)?,
            orders_by_customer: BTree::create_with(tx, node)?,
            new_orders: BTree::create_with(tx, node)?,
            order_lines: BTree::create_with(tx, node)?,
        })
    })?;

    let mut jobs = Vec::new();
    let item_chunk = 4096;
    for lo in (1..=cfg.items).step_by(item_chunk) {
        jobs.push(Job::Items { lo, hi: (lo + item_chunk as u32 - 1).min(cfg.items) });
    }
    for w in 1..=cfg.warehouses {
        jobs.push(Job::Warehouse { w });
        for lo in (1..=cfg.items).step_by(item_chunk) {
            jobs.push(Job::Stock { w, lo, hi: (lo + item_chunk as u32 - 1).min(cfg.items) });
        }
        for d in 1..=DISTRICTS {
            jobs.push(Job::District { w, d });
        }
    }
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Loaded>> = Mutex::new(Vec::new());
    let first_error: Mutex<Option<Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..load_threads.max(1) {
            s.spawn(|| {
                loop {
                    // Relaxed: the counter only hands out job numbers; results go through locks.
                    let j = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(j) else { break };
                    let seed = cfg.seed ^ (j as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    let mut rng = SmallRng::seed_from_u64(seed);
                    match run_job(&db, cfg, &ix, &nurand, *job, &mut rng) {
                        Ok(loaded) => done.lock().unwrap_or_else(|e| e.into_inner()).push(loaded),
                        Err(e) => {
                            first_error.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
                            break;
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e.into());
    }
    let w_n = cfg.warehouses as usize;
    let items_n = cfg.items as usize;
    let cpd = cfg.customers_per_district as usize;
    let mut warehouses = vec![Addr::NULL; w_n];
    let mut warehouse_ytd = vec![Addr::NULL; w_n];
    let mut districts = vec![Addr::NULL; w_n * DISTRICTS as usize];
    let mut district_ytd = vec![Addr::NULL; w_n * DISTRICTS as usize];
    let mut customers = vec![Addr::NULL; w_n * DISTRICTS as usize * cpd];
    let mut items = vec![Addr::NULL; items_n];
    let mut stock = vec![Addr::NULL; w_n * items_n];
    for loaded in done.into_inner().unwrap_or_else(|e| e.into_inner()) {
        match loaded {
            Loaded::Items(lo, addrs) => {
                let at = lo as usize - 1;
                items[at..at + addrs.len()].copy_from_slice(&addrs);
            }
            Loaded::Stock(w, lo, addrs) => {
                let at = (w as usize - 1) * items_n + lo as usize - 1;
                stock[at..at + addrs.len()].copy_from_slice(&addrs);
            }
            Loaded::Warehouse(w, a, ytd) => {
                warehouses[w as usize - 1] = a;
                warehouse_ytd[w as usize - 1] = ytd;
            }
            Loaded::District(w, d, a, ytd, cs) => {
                let i = (w as usize - 1) * DISTRICTS as usize + d as usize - 1;
                districts[i] = a;
                district_ytd[i] = ytd;
                customers[i * cpd..(i + 1) * cpd].copy_from_slice(&cs);
            }
        }
    }
    let all = warehouses.iter().chain(&warehouse_ytd).chain(&districts).chain(&district_ytd);
    let all = all.chain(&customers).chain(&items).chain(&stock);
    if all.clone().any(|a| a.is_null()) {
        return Err(BenchError::Inconsistent("loading left a row without an address".into()));
    }
    Ok(Tpcc {
        db,
        cfg: cfg.clone(),
        warehouses,
        warehouse_ytd,
        districts,
        district_ytd,
        customers,
        items,
        stock,
        customer_by_name: ix.customer_by_name,
        orders: ix.orders,
        orders_by_customer: ix.orders_by_customer,
        new_orders: ix.new_orders,
        order_lines: ix.order_lines,
        nurand,
    })
}

/// Seconds since the Unix epoch (dates in rows).
pub(crate) fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn run_job<C: Clock>(
    db: &Ordo<C>,
    cfg: &TpccConfig,
    ix: &Indexes,
    nurand: &NuRand,
    job: Job,
    rng: &mut SmallRng,
) -> Result<Loaded, Error> {
    match job {
        Job::Items { lo, hi } => {
            let addrs = batches(db, rng, lo, hi, ROW_BATCH, |tx, r, i| {
                let mut row = [0u8; item::BYTES];
                let mut s = Vec::new();
                set(&mut row, item::ID, u64::from(i));
                set(&mut row, item::IM_ID, r.random_range(1..=10_000));
                set(&mut row, item::PRICE, r.random_range(100..=10_000));
                random::astring(r, 14, 24, &mut s);
                set_str(&mut row, item::NAME, 24, &s);
                random::data_with_original(r, &mut s);
                set_str(&mut row, item::DATA, item::DATA_BYTES, &s);
                tx.alloc_bytes(&row)
            })?;
            Ok(Loaded::Items(lo, addrs))
        }
        Job::Stock { w, lo, hi } => {
            let addrs = batches(db, rng, lo, hi, ROW_BATCH, |tx, r, i| {
                let mut row = [0u8; stock::BYTES];
                let mut s = Vec::new();
                set(&mut row, stock::I_ID, u64::from(i));
                set(&mut row, stock::W_ID, u64::from(w));
                set(&mut row, stock::QUANTITY, r.random_range(10..=100));
                for k in 0..10 {
                    random::astring(r, 24, 24, &mut s);
                    set_str(&mut row, stock::DIST + k * stock::DIST_BYTES, stock::DIST_BYTES, &s);
                }
                random::data_with_original(r, &mut s);
                set_str(&mut row, stock::DATA, stock::DATA_BYTES, &s);
                tx.alloc_bytes(&row)
            })?;
            Ok(Loaded::Stock(w, lo, addrs))
        }
        Job::Warehouse { w } => {
            let (addr, ytd_addr) = db.run(|tx| {
                let mut r = rng.clone();
                let mut row = [0u8; warehouse::BYTES];
                set(&mut row, warehouse::ID, u64::from(w));
                set(&mut row, warehouse::TAX, r.random_range(0..=2000));
                let mut s = Vec::new();
                random::astring(&mut r, 6, 10, &mut s);
                set_str(&mut row, warehouse::NAME, 10, &s);
                address(&mut r, &mut row, warehouse::ADDRESS);
                Ok::<_, Error>((tx.alloc_bytes(&row)?, alloc_ytd(tx, 30_000_000)?))
            })?;
            Ok(Loaded::Warehouse(w, addr, ytd_addr))
        }
        Job::District { w, d } => load_district(db, cfg, ix, nurand, w, d, rng),
    }
}

/// Street 1, street 2, city (10..20 letters each), state (2), zip (9) at `offset`.
fn address(rng: &mut SmallRng, row: &mut [u8], offset: usize) {
    let mut s = Vec::new();
    for k in 0..3 {
        random::astring(rng, 10, 20, &mut s);
        set_str(row, offset + 20 * k, 20, &s);
    }
    random::astring(rng, 2, 2, &mut s);
    set_str(row, offset + 60, 2, &s);
    random::zip(rng, &mut s);
    set_str(row, offset + 62, 9, &s);
}

/// Runs `make(tx, rng, i)` for `i` in `lo..=hi`, `batch` per transaction; returns the
/// addresses in order.
fn batches<C: Clock>(
    db: &Ordo<C>,
    rng: &mut SmallRng,
    lo: u32,
    hi: u32,
    batch: u32,
    mut make: impl FnMut(&mut Tx<'_, C>, &mut SmallRng, u32) -> Result<Addr, Error>,
) -> Result<Vec<Addr>, Error> {
    let mut out = Vec::with_capacity((hi + 1 - lo) as usize);
    let mut i = lo;
    while i <= hi {
        let end = (i + batch - 1).min(hi);
        let (addrs, r) = db.run(|tx| {
            let mut r = rng.clone();
            let addrs = (i..=end).map(|k| make(tx, &mut r, k)).collect::<Result<Vec<_>, _>>()?;
            Ok::<_, Error>((addrs, r))
        })?;
        *rng = r;
        out.extend(addrs);
        i = end + 1;
    }
    Ok(out)
}

/// One district: its row, customers (with name-index entries and one history row each) and
/// initial orders with their lines and new-order entries.
fn load_district<C: Clock>(
    db: &Ordo<C>,
    cfg: &TpccConfig,
    ix: &Indexes,
    nurand: &NuRand,
    w: u32,
    d: u32,
    rng: &mut SmallRng,
) -> Result<Loaded, Error> {
    let orders = cfg.initial_orders();
    let delivered = orders - cfg.initial_new_orders();
    let cpd = cfg.customers_per_district;
    let now = now_s();
    let (district_addr, ytd_addr) = db.run(|tx| {
        let mut r = rng.clone();
        let mut row = [0u8; district::BYTES];
        set(&mut row, district::ID, u64::from(d));
        set(&mut row, district::W_ID, u64::from(w));
        set(&mut row, district::TAX, r.random_range(0..=2000));
        set(&mut row, district::NEXT_O_ID, u64::from(orders) + 1);
        let mut s = Vec::new();
        random::astring(&mut r, 6, 10, &mut s);
        set_str(&mut row, district::NAME, 10, &s);
        address(&mut r, &mut row, district::ADDRESS);
        Ok::<_, Error>((tx.alloc_bytes(&row)?, alloc_ytd(tx, 3_000_000)?))
    })?;
    let a_last = random::scaled_a(255, cfg.last_names(), 1000);
    let customers = batches(db, rng, 1, cpd, ROW_BATCH, |tx, r, c| {
        let mut row = vec![0u8; customer::BYTES];
        let mut s = Vec::new();
        set(&mut row, customer::ID, u64::from(c));
        set(&mut row, customer::D_ID, u64::from(d));
        set(&mut row, customer::W_ID, u64::from(w));
        set(&mut row, customer::SINCE, now);
        set_i(&mut row, customer::CREDIT_LIM, 5_000_000);
        set(&mut row, customer::DISCOUNT, r.random_range(0..=5000));
        set_i(&mut row, customer::BALANCE, -1000);
        set_i(&mut row, customer::YTD_PAYMENT, 1000);
        set(&mut row, customer::PAYMENT_CNT, 1);
        let name_n = if c <= 1000 {
            c - 1
        } else {
            random::nurand(r, a_last, nurand.c_last_load, 0, cfg.last_names() - 1)
        };
        let mut last = Vec::new();
        random::last_name(name_n, &mut last);
        set_str(&mut row, customer::LAST, 16, &last);
        set_str(&mut row, customer::MIDDLE, 2, b"OE");
        let mut first = Vec::new();
        random::astring(r, 8, 16, &mut first);
        set_str(&mut row, customer::FIRST, 16, &first);
        let credit: &[u8] = if r.random_range(0..10) == 0 { b"BC" } else { b"GC" };
        set_str(&mut row, customer::CREDIT, 2, credit);
        random::nstring(r, 16, &mut s);
        set_str(&mut row, customer::PHONE, 16, &s);
        address(r, &mut row, customer::ADDRESS);
        random::astring(r, 300, 500, &mut s);
        set_str(&mut row, customer::DATA, customer::DATA_BYTES, &s);
        let addr = tx.alloc_bytes(&row)?;
        let key = schema::customer_name_key(w, d, &last, &first, c);
        ix.customer_by_name.insert(tx, &key, &schema::addr_value(addr))?;
        let mut h = [0u8; history::BYTES];
        for (field, v) in [
            (history::C_ID, c),
            (history::C_D_ID, d),
            (history::C_W_ID, w),
            (history::D_ID, d),
            (history::W_ID, w),
        ] {
            set(&mut h, field, u64::from(v));
        }
        set(&mut h, history::DATE, now);
        set_i(&mut h, history::AMOUNT, 1000);
        random::astring(r, 12, 24, &mut s);
        set_str(&mut h, history::DATA, 24, &s);
        tx.alloc_bytes(&h)?;
        Ok(addr)
    })?;
    // O_C_ID is a random permutation of the customer ids.
    let mut permutation: Vec<u32> = (1..=cpd).collect();
    permutation.shuffle(rng);
    let mut o = 1;
    while o <= orders {
        let end = (o + ORDER_BATCH - 1).min(orders);
        let r = db.run(|tx| {
            let mut r = rng.clone();
            for o in o..=end {
                let c = permutation[(o - 1) as usize % permutation.len()];
                let ol_cnt: u32 = r.random_range(5..=15);
                let is_new = o > delivered;
                let mut row = [0u8; order::BYTES];
                for (field, v) in [(order::ID, o), (order::D_ID, d), (order::W_ID, w)] {
                    set(&mut row, field, u64::from(v));
                }
                set(&mut row, order::C_ID, u64::from(c));
                set(&mut row, order::ENTRY_D, now);
                let carrier = if is_new { 0 } else { r.random_range(1..=10) };
                set(&mut row, order::CARRIER_ID, carrier);
                set(&mut row, order::OL_CNT, u64::from(ol_cnt));
                set(&mut row, order::ALL_LOCAL, 1);
                let addr = tx.alloc_bytes(&row)?;
                let value = schema::addr_value(addr);
                ix.orders.insert(tx, &schema::order_key(w, d, o), &value)?;
                ix.orders_by_customer.insert(
                    tx,
                    &schema::order_by_customer_key(w, d, c, o),
                    &value,
                )?;
                if is_new {
                    ix.new_orders.insert(tx, &schema::order_key(w, d, o), &[])?;
                }
                let mut s = Vec::new();
                // The order's lines, stored together (`schema::order_line::rows`).
                let mut lines = Vec::with_capacity(15 * order_line::BYTES);
                for n in 1..=ol_cnt {
                    let mut line = [0u8; order_line::BYTES];
                    for (field, v) in [
                        (order_line::O_ID, o),
                        (order_line::D_ID, d),
                        (order_line::W_ID, w),
                        (order_line::NUMBER, n),
                        (order_line::SUPPLY_W_ID, w),
                        (order_line::QUANTITY, 5),
                    ] {
                        set(&mut line, field, u64::from(v));
                    }
                    set(&mut line, order_line::I_ID, r.random_range(1..=cfg.items).into());
                    set(&mut line, order_line::DELIVERY_D, if is_new { 0 } else { now });
                    let amount = if is_new { r.random_range(1..=999_999) } else { 0 };
                    set_i(&mut line, order_line::AMOUNT, amount);
                    random::astring(&mut r, 24, 24, &mut s);
                    set_str(&mut line, order_line::DIST_INFO, 24, &s);
                    lines.extend_from_slice(&line);
                }
                ix.order_lines.insert(tx, &schema::order_key(w, d, o), &lines)?;
            }
            Ok::<_, Error>(r)
        })?;
        *rng = r;
        o = end + 1;
    }
    Ok(Loaded::District(w, d, district_addr, ytd_addr, customers))
}

/// A W_YTD or D_YTD object holding `cents` (see [`ytd`]).
fn alloc_ytd<C: Clock>(tx: &mut Tx<'_, C>, cents: i64) -> Result<Addr, Error> {
    let mut obj = [0u8; ytd::BYTES];
    set_i(&mut obj, ytd::VALUE, cents);
    tx.alloc_bytes(&obj)
}
