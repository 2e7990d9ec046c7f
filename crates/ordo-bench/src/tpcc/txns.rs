//! The five transactions (clause 2) and a terminal that draws their inputs.
//!
//! Inputs are drawn before a transaction starts, so every retry of an aborted attempt runs the
//! same business transaction. Each transaction is one [`ordo::Ordo::run_with`] call: an engine
//! abort retries, a NewOrder on an unused item returns [`Outcome::RolledBack`] after rolling
//! back everything it did (the engine drops the attempt's buffered writes).

use std::ops::{Bound, ControlFlow};

use ordo::tree::{BTree, Direction};
use ordo::{Addr, Error, Options, Tx};
use ordo_clock::Clock;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::load::now_s;
use super::random::{self, has_original};
use super::schema::{
    self, DISTRICTS, add, add_i, customer, district, get, get_i, get_str, history, item, order,
    order_line, set, set_i, set_str, stock, warehouse, ytd,
};
use super::{Kind, Tpcc, TpccConfig};
use crate::error::BenchError;

/// How a business transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Committed.
    Committed,
    /// A NewOrder rolled back on its unused item number (clause 2.4.2.3).
    RolledBack,
}

/// Why a transaction body stopped early.
#[derive(Debug)]
enum TxnError {
    /// The engine failed or aborted (an abort is retried by `run_with`).
    Engine(Error),
    /// The NewOrder's last item is unused: roll back.
    Rollback,
    /// A row or index entry did not decode, or a row the profile must find is missing.
    Corrupt(String),
}

impl From<Error> for TxnError {
    fn from(e: Error) -> Self {
        TxnError::Engine(e)
    }
}

type TxnResult<T> = Result<T, TxnError>;

/// A terminal: its home warehouse, its input generator and its scratch buffers.
pub struct Terminal {
    rng: SmallRng,
    w: u32,
    row: Vec<u8>,
    addrs: Vec<Addr>,
    ids: Vec<u32>,
    lines: Vec<Line>,
    name: Vec<u8>,
    bytes: Vec<u8>,
}

/// One NewOrder line input: item, supplying warehouse, quantity.
#[derive(Clone, Copy, Debug)]
struct Line {
    item: u32,
    supply_w: u32,
    quantity: u32,
}

/// How Payment and Order-Status find their customer.
#[derive(Clone, Copy, Debug)]
enum CustomerBy {
    Id(u32),
    /// Last-name number in `0..=999`.
    Name(u32),
}

impl Terminal {
    /// The terminal of worker `thread`: home warehouse `thread % warehouses + 1`.
    pub fn new<C: Clock>(tpcc: &Tpcc<C>, cfg: &TpccConfig, thread: usize) -> Self {
        let seed = cfg.seed ^ 0xD1B5_4A32_D192_ED03u64.wrapping_mul(thread as u64 + 1);
        Terminal {
            rng: SmallRng::seed_from_u64(seed),
            w: (thread as u32 % tpcc.cfg.warehouses) + 1,
            row: Vec::with_capacity(customer::BYTES),
            addrs: Vec::new(),
            ids: Vec::new(),
            lines: Vec::with_capacity(15),
            name: Vec::with_capacity(16),
            bytes: Vec::with_capacity(15 * order_line::BYTES),
        }
    }

    /// Draws a transaction of `cfg.mix` and runs it to its end.
    pub fn one<C: Clock>(
        &mut self,
        tpcc: &Tpcc<C>,
        cfg: &TpccConfig,
    ) -> (Kind, Result<Outcome, BenchError>) {
        let kind = Kind::pick(cfg.mix, self.rng.random_range(0..100));
        let result = match kind {
            Kind::NewOrder => self.new_order(tpcc, cfg),
            Kind::Payment => self.payment(tpcc, cfg),
            Kind::OrderStatus => self.order_status(tpcc, cfg),
            Kind::Delivery => self.delivery(tpcc, cfg),
            Kind::StockLevel => self.stock_level(tpcc, cfg),
        };
        let result = match result {
            Ok(()) => Ok(Outcome::Committed),
            Err(TxnError::Rollback) => Ok(Outcome::RolledBack),
            Err(TxnError::Engine(e)) => Err(BenchError::Engine(e)),
            Err(TxnError::Corrupt(what)) => Err(BenchError::Inconsistent(what)),
        };
        (kind, result)
    }

    fn other_warehouse(&mut self, warehouses: u32) -> u32 {
        let o = self.rng.random_range(1..warehouses);
        if o >= self.w { o + 1 } else { o }
    }

    fn customer_input<C: Clock>(&mut self, tpcc: &Tpcc<C>) -> CustomerBy {
        if self.rng.random_range(1..=100) <= 60 {
            let names = tpcc.cfg.last_names();
            let a = random::scaled_a(255, names, 1000);
            CustomerBy::Name(random::nurand(&mut self.rng, a, tpcc.nurand.c_last_run, 0, names - 1))
        } else {
            CustomerBy::Id(self.customer_id(tpcc))
        }
    }

    fn customer_id<C: Clock>(&mut self, tpcc: &Tpcc<C>) -> u32 {
        let cpd = tpcc.cfg.customers_per_district;
        let a = random::scaled_a(1023, cpd, super::CUSTOMERS_STANDARD);
        random::nurand(&mut self.rng, a, tpcc.nurand.c_id, 1, cpd)
    }

    /// NewOrder (clause 2.4).
    fn new_order<C: Clock>(&mut self, tpcc: &Tpcc<C>, cfg: &TpccConfig) -> TxnResult<()> {
        let warehouses = tpcc.cfg.warehouses;
        let items = tpcc.cfg.items;
        let w = self.w;
        let d = self.rng.random_range(1..=DISTRICTS);
        let c = self.customer_id(tpcc);
        let ol_cnt = self.rng.random_range(5..=15u32);
        let rollback = self.rng.random_range(1..=100) == 1;
        let a_item = random::scaled_a(8191, items, super::ITEMS_STANDARD);
        self.lines.clear();
        for n in 0..ol_cnt {
            let item = if rollback && n == ol_cnt - 1 {
                items + 1
            } else {
                random::nurand(&mut self.rng, a_item, tpcc.nurand.c_item, 1, items)
            };
            let supply_w = if warehouses > 1 && self.rng.random_range(1..=100) == 1 {
                self.other_warehouse(warehouses)
            } else {
                w
            };
            let quantity = self.rng.random_range(1..=10);
            self.lines.push(Line { item, supply_w, quantity });
        }
        let all_local = self.lines.iter().all(|l| l.supply_w == w);
        let (wa, da, ca) =
            match (tpcc.warehouse_addr(w), tpcc.district_addr(w, d), tpcc.customer_addr(w, d, c)) {
                (Some(wa), Some(da), Some(ca)) => (wa, da, ca),
                _ => return Err(TxnError::Corrupt(format!("no row for w {w} d {d} c {c}"))),
            };
        let options = Options { will_write: true, ..Options::isolation(cfg.isolation) };
        let Terminal { lines, bytes, .. } = self;
        let now = now_s();
        tpcc.db.run_with(options, |tx| {
            bytes.clear();
            // The ITEM and STOCK rows are known now and read last: start their cache misses
            // here, so they overlap with each other and with the work in between.
            for line in lines.iter() {
                for a in [tpcc.item_addr(line.item), tpcc.stock_addr(line.supply_w, line.item)] {
                    a.into_iter().for_each(|a| tx.prefetch(a));
                }
            }
            let w_tax = tx.read_view(wa, |v| v.word(warehouse::TAX))?.unwrap_or(0);
            // D_NEXT_O_ID taken where the transaction buffers the row.
            let (o, d_tax) = tx
                .update_words_len(da, |r, len| {
                    (len == district::BYTES).then(|| {
                        let o = r[district::NEXT_O_ID] as u32;
                        r[district::NEXT_O_ID] = u64::from(o) + 1;
                        (o, r[district::TAX])
                    })
                })?
                .ok_or_else(|| corrupt("district", da))?;
            // Two fields of the 704-byte row, read in place.
            let (discount, _credit_bc) = tx
                .read_view(ca, |v| {
                    let credit = v.word(customer::CREDIT / 8)?.to_le_bytes();
                    let at = customer::CREDIT % 8;
                    (v.len() == customer::BYTES)
                        .then(|| (v.word(customer::DISCOUNT), &credit[at..at + 2] == b"BC"))
                        .and_then(|(d, bc)| Some((d?, bc)))
                })?
                .ok_or_else(|| corrupt("customer", ca))?;

            let mut orow = [0u8; order::BYTES];
            for (field, v) in [(order::ID, o), (order::D_ID, d), (order::W_ID, w), (order::C_ID, c)]
            {
                set(&mut orow, field, u64::from(v));
            }
            set(&mut orow, order::ENTRY_D, now);
            set(&mut orow, order::OL_CNT, u64::from(ol_cnt));
            set(&mut orow, order::ALL_LOCAL, u64::from(all_local));
            let oa = tx.alloc_bytes(&orow)?;
            let value = schema::addr_value(oa);
            let okey = schema::order_key(w, d, o);
            tpcc.orders.insert(tx, &okey, &value)?;
            tpcc.orders_by_customer.insert(
                tx,
                &schema::order_by_customer_key(w, d, c, o),
                &value,
            )?;
            tpcc.new_orders.insert(tx, &okey, &[])?;

            let mut total: i64 = 0;
            for (n, line) in lines.iter().enumerate() {
                let Some(ia) = tpcc.item_addr(line.item) else {
                    return Err(TxnError::Rollback);
                };
                // I_PRICE and I_DATA, read in place.
                let (price, item_original) = tx
                    .read_view(ia, |v| {
                        if v.len() != item::BYTES {
                            return None;
                        }
                        // I_DATA is word-aligned: copy its 7 words.
                        let mut data = [0u8; 56];
                        for (k, chunk) in data.chunks_exact_mut(8).enumerate() {
                            chunk.copy_from_slice(&v.word(item::DATA / 8 + k)?.to_le_bytes());
                        }
                        let data = &data[..item::DATA_BYTES];
                        Some((v.word(item::PRICE)? as i64, has_original(data)))
                    })?
                    .ok_or_else(|| corrupt("item", ia))?;
                let sa = tpcc
                    .stock_addr(line.supply_w, line.item)
                    .ok_or_else(|| TxnError::Corrupt(format!("no stock row {}", line.item)))?;
                // The STOCK row changed where the transaction buffers it (no copy out and
                // back); S_DIST_xx and S_DATA read from it.
                let qty = u64::from(line.quantity);
                let remote = line.supply_w != w;
                let dist_at = stock::DIST + (d as usize - 1) * stock::DIST_BYTES;
                let (dist, stock_original) = tx
                    .update_words_len(sa, |s, len| {
                        if len != stock::BYTES {
                            return None;
                        }
                        let q = s[stock::QUANTITY];
                        s[stock::QUANTITY] = if q >= qty + 10 { q - qty } else { q + 91 - qty };
                        s[stock::YTD] = s[stock::YTD].wrapping_add(qty);
                        s[stock::ORDER_CNT] = s[stock::ORDER_CNT].wrapping_add(1);
                        if remote {
                            s[stock::REMOTE_CNT] = s[stock::REMOTE_CNT].wrapping_add(1);
                        }
                        let dist: [u8; stock::DIST_BYTES] = word_bytes(s, dist_at)?;
                        let data: [u8; 56] = word_bytes(s, stock::DATA)?;
                        Some((dist, has_original(&data[..stock::DATA_BYTES])))
                    })?
                    .ok_or_else(|| corrupt("stock", sa))?;
                let _brand_generic = item_original && stock_original;
                // The line row, appended to the order's lines (stored together, `schema`).
                let at = bytes.len();
                bytes.resize(at + order_line::BYTES, 0);
                let lrow = &mut bytes[at..];
                lrow[order_line::DIST_INFO..order_line::DIST_INFO + 24].copy_from_slice(&dist);
                let amount = i64::from(line.quantity) * price;
                total += amount;
                let number = n as u32 + 1;
                for (field, v) in [
                    (order_line::O_ID, o),
                    (order_line::D_ID, d),
                    (order_line::W_ID, w),
                    (order_line::NUMBER, number),
                    (order_line::I_ID, line.item),
                    (order_line::SUPPLY_W_ID, line.supply_w),
                    (order_line::QUANTITY, line.quantity),
                ] {
                    set(lrow, field, u64::from(v));
                }
                set_i(lrow, order_line::AMOUNT, amount);
            }
            tpcc.order_lines.insert(tx, &okey, bytes)?;
            // The total the terminal would display (clause 2.4.3.3), in cents.
            let total = total * (10_000 - discount as i64) / 10_000
                * (10_000 + (w_tax + d_tax) as i64)
                / 10_000;
            std::hint::black_box(total);
            Ok(())
        })
    }

    /// Payment (clause 2.5).
    fn payment<C: Clock>(&mut self, tpcc: &Tpcc<C>, cfg: &TpccConfig) -> TxnResult<()> {
        let warehouses = tpcc.cfg.warehouses;
        let w = self.w;
        let d = self.rng.random_range(1..=DISTRICTS);
        let (c_w, c_d) = if warehouses == 1 || self.rng.random_range(1..=100) <= 85 {
            (w, d)
        } else {
            (self.other_warehouse(warehouses), self.rng.random_range(1..=DISTRICTS))
        };
        let by = self.customer_input(tpcc);
        let amount: i64 = self.rng.random_range(100..=500_000);
        let (wa, da, w_ytd, d_ytd) = match (
            tpcc.warehouse_addr(w),
            tpcc.district_addr(w, d),
            tpcc.warehouse_ytd_addr(w),
            tpcc.district_ytd_addr(w, d),
        ) {
            (Some(wa), Some(da), Some(wy), Some(dy)) => (wa, da, wy, dy),
            _ => return Err(TxnError::Corrupt(format!("no row for w {w} d {d}"))),
        };
        if let CustomerBy::Name(n) = by {
            random::last_name(n, &mut self.name);
        }
        let options = Options { will_write: true, ..Options::isolation(cfg.isolation) };
        let Terminal { row, addrs, name, .. } = self;
        let now = now_s();
        // A customer chosen by number is known now: start its cache misses (the whole row is
        // read and written) before the warehouse and district.
        let known = match by {
            CustomerBy::Id(c) => tpcc.customer_addr(c_w, c_d, c),
            CustomerBy::Name(_) => None,
        };
        tpcc.db.run_with(options, |tx| {
            known.into_iter().chain([w_ytd, d_ytd]).for_each(|a| tx.prefetch(a));
            // The names, from rows no transaction of the mix writes.
            tx.read_with(wa, |b| copy(row, b))?;
            check_len(row, warehouse::BYTES, wa)?;
            let mut h_data = [0u8; 24];
            let w_name = get_str(row, warehouse::NAME, 10);
            h_data[..w_name.len()].copy_from_slice(w_name);
            let mut at = w_name.len();
            h_data[at..at + 4].copy_from_slice(b"    ");
            at += 4;
            tx.read_with(da, |b| copy(row, b))?;
            check_len(row, district::BYTES, da)?;
            let d_name = get_str(row, district::NAME, 10);
            h_data[at..at + d_name.len()].copy_from_slice(d_name);

            let ca = find_customer(tpcc, tx, c_w, c_d, by, name, addrs)?;
            // The balance fields changed where the transaction buffers the row.
            let (c, bad_credit) = tx
                .update_words_len(ca, |r, len| {
                    if len != customer::BYTES {
                        return None;
                    }
                    let money = |v: u64, delta: i64| (v as i64).wrapping_add(delta) as u64;
                    r[customer::BALANCE] = money(r[customer::BALANCE], -amount);
                    r[customer::YTD_PAYMENT] = money(r[customer::YTD_PAYMENT], amount);
                    r[customer::PAYMENT_CNT] = r[customer::PAYMENT_CNT].wrapping_add(1);
                    let credit = r[customer::CREDIT / 8].to_le_bytes();
                    let at = customer::CREDIT % 8;
                    Some((r[customer::ID] as u32, &credit[at..at + 2] == b"BC"))
                })?
                .ok_or_else(|| corrupt("customer", ca))?;
            if bad_credit {
                // C_DATA = "C_ID C_D_ID C_W_ID D_ID W_ID H_AMOUNT | " ++ old C_DATA, truncated;
                // the field is not word-aligned, so the row is edited as bytes.
                tx.update_words(ca, |r| {
                    row.clear();
                    row.extend(r.iter().flat_map(|w| w.to_le_bytes()));
                    let old = get_str(row, customer::DATA, customer::DATA_BYTES).to_vec();
                    let mut data =
                        format!("{c} {c_d} {c_w} {d} {w} {}.{:02} | ", amount / 100, amount % 100)
                            .into_bytes();
                    data.extend_from_slice(&old);
                    set_str(row, customer::DATA, customer::DATA_BYTES, &data);
                    for (w, chunk) in r.iter_mut().zip(row.chunks_exact(8)) {
                        *w = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
                    }
                })?;
            }

            let mut h = [0u8; history::BYTES];
            for (field, v) in [
                (history::C_ID, c),
                (history::C_D_ID, c_d),
                (history::C_W_ID, c_w),
                (history::D_ID, d),
                (history::W_ID, w),
            ] {
                set(&mut h, field, u64::from(v));
            }
            set(&mut h, history::DATE, now);
            set_i(&mut h, history::AMOUNT, amount);
            h[history::DATA..history::DATA + 24].copy_from_slice(&h_data);
            tx.alloc_bytes(&h)?;

            // W_YTD and D_YTD last: every Payment of the warehouse writes W_YTD, so the shorter
            // the time between reading it and locking it at commit, the fewer Payments abort.
            // (The order of a transaction's steps is not observable: it commits as a whole.)
            for ytd_addr in [w_ytd, d_ytd] {
                add_ytd(tx, ytd_addr, amount)?;
            }
            Ok(())
        })
    }

    /// Order-Status (clause 2.6), read-only.
    fn order_status<C: Clock>(&mut self, tpcc: &Tpcc<C>, cfg: &TpccConfig) -> TxnResult<()> {
        let w = self.w;
        let d = self.rng.random_range(1..=DISTRICTS);
        let by = self.customer_input(tpcc);
        if let CustomerBy::Name(n) = by {
            random::last_name(n, &mut self.name);
        }
        let options = Options::isolation(cfg.isolation);
        let Terminal { addrs, name, .. } = self;
        tpcc.db.run_with(options, |tx| {
            let ca = find_customer(tpcc, tx, w, d, by, name, addrs)?;
            let (c, balance) = tx
                .read_with(ca, |b| {
                    (b.len() == customer::BYTES)
                        .then(|| (get(b, customer::ID) as u32, get_i(b, customer::BALANCE)))
                })?
                .ok_or_else(|| corrupt("customer", ca))?;
            std::hint::black_box(balance);
            let lo = schema::order_by_customer_key(w, d, c, 0);
            let hi = schema::order_by_customer_key(w, d, c, u32::MAX);
            collect(tpcc.orders_by_customer, tx, &lo, &hi, Direction::Backward, Some(1), addrs)?;
            let Some(&oa) = addrs.first() else {
                // A customer without orders (possible on scaled-down databases): nothing to show.
                return Ok(());
            };
            let o = tx.read_view(oa, |v| v.word(order::ID))?.ok_or_else(|| corrupt("order", oa))?;
            let o = o as u32;
            order_lines(tpcc, tx, w, d, o, |rows| {
                // What the terminal displays of each line (clause 2.6.3.4).
                for r in rows {
                    std::hint::black_box(
                        [
                            order_line::I_ID,
                            order_line::SUPPLY_W_ID,
                            order_line::QUANTITY,
                            order_line::AMOUNT,
                            order_line::DELIVERY_D,
                        ]
                        .map(|field| get(r, field)),
                    );
                }
            })?;
            Ok(())
        })
    }

    /// Delivery (clause 2.7): the ten districts of the home warehouse in one transaction.
    fn delivery<C: Clock>(&mut self, tpcc: &Tpcc<C>, cfg: &TpccConfig) -> TxnResult<()> {
        let w = self.w;
        let carrier: u64 = self.rng.random_range(1..=10);
        let options = Options { will_write: true, ..Options::isolation(cfg.isolation) };
        let Terminal { row, .. } = self;
        let now = now_s();
        tpcc.db.run_with(options, |tx| {
            for d in 1..=DISTRICTS {
                // The oldest undelivered order of the district.
                let lo = schema::order_key(w, d, 0);
                let hi = schema::order_key(w, d, u32::MAX);
                let mut oldest = None;
                tpcc.new_orders.range(
                    tx,
                    Bound::Included(&lo),
                    Bound::Included(&hi),
                    Direction::Forward,
                    Some(1),
                    |k, _| {
                        oldest = schema::order_of_key(k);
                        ControlFlow::Break(())
                    },
                )?;
                let Some(o) = oldest else { continue };
                let okey = schema::order_key(w, d, o);
                tpcc.new_orders.remove(tx, &okey)?;
                let oa =
                    tpcc.orders.get_with(tx, &okey, schema::value_addr)?.flatten().ok_or_else(
                        || TxnError::Corrupt(format!("order ({w}, {d}, {o}) not indexed")),
                    )?;
                tx.read_with(oa, |b| copy(row, b))?;
                check_len(row, order::BYTES, oa)?;
                let c = get(row, order::C_ID) as u32;
                set(row, order::CARRIER_ID, carrier);
                tx.write_bytes(oa, row)?;
                order_lines(tpcc, tx, w, d, o, |rows| {
                    row.clear();
                    rows.for_each(|r| row.extend_from_slice(r));
                })?;
                let mut sum = 0i64;
                for r in row.chunks_exact_mut(order_line::BYTES) {
                    sum += get_i(r, order_line::AMOUNT);
                    set(r, order_line::DELIVERY_D, now);
                }
                // Same length: the tree writes only the lines' value object.
                tpcc.order_lines.insert(tx, &okey, row)?;
                let ca = tpcc.customer_addr(w, d, c).ok_or_else(|| {
                    TxnError::Corrupt(format!("order ({w}, {d}, {o}) has customer {c}"))
                })?;
                tx.read_with(ca, |b| copy(row, b))?;
                check_len(row, customer::BYTES, ca)?;
                add_i(row, customer::BALANCE, sum);
                add(row, customer::DELIVERY_CNT, 1);
                tx.write_bytes(ca, row)?;
            }
            Ok(())
        })
    }

    /// Stock-Level (clause 2.8), read-only.
    fn stock_level<C: Clock>(&mut self, tpcc: &Tpcc<C>, cfg: &TpccConfig) -> TxnResult<()> {
        let w = self.w;
        let d = self.rng.random_range(1..=DISTRICTS);
        let threshold: u64 = self.rng.random_range(10..=20);
        let da = tpcc
            .district_addr(w, d)
            .ok_or_else(|| TxnError::Corrupt(format!("no district ({w}, {d})")))?;
        let options = Options::isolation(cfg.isolation);
        let Terminal { ids, .. } = self;
        tpcc.db.run_with(options, |tx| {
            let next = tx
                .read_view(da, |v| v.word(district::NEXT_O_ID))?
                .ok_or_else(|| corrupt("district", da))?;
            let next = next as u32;
            let lo = schema::order_key(w, d, next.saturating_sub(20));
            let hi = schema::order_key(w, d, next);
            ids.clear();
            let mut bad = false;
            tpcc.order_lines.range(
                tx,
                Bound::Included(&lo),
                Bound::Excluded(&hi),
                Direction::Forward,
                None,
                |_, v| match order_line::rows(v) {
                    Some(rows) => {
                        ids.extend(rows.map(|r| get(r, order_line::I_ID) as u32));
                        ControlFlow::Continue(())
                    }
                    None => {
                        bad = true;
                        ControlFlow::Break(())
                    }
                },
            )?;
            if bad {
                return Err(TxnError::Corrupt("an ORDER-LINE value is not whole rows".into()));
            }
            ids.sort_unstable();
            ids.dedup();
            let mut low = 0u32;
            for &i in ids.iter() {
                let sa = tpcc
                    .stock_addr(w, i)
                    .ok_or_else(|| TxnError::Corrupt(format!("order line has item {i}")))?;
                let q = tx
                    .read_view(sa, |v| v.word(stock::QUANTITY))?
                    .ok_or_else(|| corrupt("stock", sa))?;
                if q < threshold {
                    low += 1;
                }
            }
            std::hint::black_box(low);
            Ok(())
        })
    }
}

/// The `N` bytes at byte `at` (a multiple of 8) of a row given as little-endian words, as
/// [`Tx::update_words`] gives it; `None` past the row's end.
fn word_bytes<const N: usize>(words: &[u64], at: usize) -> Option<[u8; N]> {
    debug_assert!(at.is_multiple_of(8) && N.is_multiple_of(8));
    let mut out = [0u8; N];
    let src = words.get(at / 8..at / 8 + N / 8)?;
    for (chunk, w) in out.chunks_exact_mut(8).zip(src) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    Some(out)
}

/// Copies `src` into the reusable buffer `dst`.
fn copy(dst: &mut Vec<u8>, src: &[u8]) {
    dst.clear();
    dst.extend_from_slice(src);
}

fn corrupt(what: &str, addr: Addr) -> TxnError {
    TxnError::Corrupt(format!("{what} row {addr} has the wrong size"))
}

/// Adds `amount` cents to the W_YTD or D_YTD object at `addr`.
fn add_ytd<C: Clock>(tx: &mut Tx<'_, C>, addr: Addr, amount: i64) -> TxnResult<()> {
    let mut obj = [0u8; ytd::BYTES];
    let sized = tx.read_with(addr, |b| (b.len() == ytd::BYTES).then(|| obj.copy_from_slice(b)))?;
    sized.ok_or_else(|| corrupt("year-to-date", addr))?;
    add_i(&mut obj, ytd::VALUE, amount);
    tx.write_bytes(addr, &obj)?;
    Ok(())
}

fn check_len(row: &[u8], want: usize, addr: Addr) -> TxnResult<()> {
    if row.len() == want {
        Ok(())
    } else {
        Err(TxnError::Corrupt(format!("row {addr} is {} bytes, expected {want}", row.len())))
    }
}

/// Collects the row addresses stored as values of the entries of `tree` between `lo` and `hi`
/// (inclusive) into `out`.
fn collect<C: Clock>(
    tree: BTree,
    tx: &mut Tx<'_, C>,
    lo: &[u8],
    hi: &[u8],
    direction: Direction,
    limit: Option<usize>,
    out: &mut Vec<Addr>,
) -> TxnResult<()> {
    out.clear();
    let mut bad = false;
    tree.range(tx, Bound::Included(lo), Bound::Included(hi), direction, limit, |_, v| {
        match schema::value_addr(v) {
            Some(a) => {
                out.push(a);
                ControlFlow::Continue(())
            }
            None => {
                bad = true;
                ControlFlow::Break(())
            }
        }
    })?;
    if bad { Err(TxnError::Corrupt("index value is not an address".into())) } else { Ok(()) }
}

/// Runs `f` on the line rows of order (`w`, `d`, `o`), read in place.
fn order_lines<C: Clock, R>(
    tpcc: &Tpcc<C>,
    tx: &mut Tx<'_, C>,
    w: u32,
    d: u32,
    o: u32,
    f: impl FnOnce(std::slice::ChunksExact<'_, u8>) -> R,
) -> TxnResult<R> {
    match tpcc
        .order_lines
        .get_with(tx, &schema::order_key(w, d, o), |v| order_line::rows(v).map(f))?
    {
        Some(Some(r)) => Ok(r),
        Some(None) => Err(TxnError::Corrupt(format!("order ({w}, {d}, {o}) has a bad line list"))),
        None => Err(TxnError::Corrupt(format!("order ({w}, {d}, {o}) has no lines"))),
    }
}

/// The customer of a Payment or Order-Status: by id, or the one at position ⌈n/2⌉ of the `n`
/// customers with the last name, sorted by first name (clause 2.5.2.2).
fn find_customer<C: Clock>(
    tpcc: &Tpcc<C>,
    tx: &mut Tx<'_, C>,
    w: u32,
    d: u32,
    by: CustomerBy,
    name: &[u8],
    addrs: &mut Vec<Addr>,
) -> TxnResult<Addr> {
    match by {
        CustomerBy::Id(c) => tpcc
            .customer_addr(w, d, c)
            .ok_or_else(|| TxnError::Corrupt(format!("no customer ({w}, {d}, {c})"))),
        CustomerBy::Name(_) => {
            let (lo, hi) = schema::customer_name_range(w, d, name);
            collect(tpcc.customer_by_name, tx, &lo, &hi, Direction::Forward, None, addrs)?;
            if addrs.is_empty() {
                return Err(TxnError::Corrupt(format!(
                    "no customer in ({w}, {d}) is named {}",
                    String::from_utf8_lossy(name)
                )));
            }
            Ok(addrs[(addrs.len() - 1) / 2])
        }
    }
}
