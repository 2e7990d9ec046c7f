//! TPC-C at tiny scale: the consistency conditions of clause 3.3.2 hold after load and after
//! concurrent runs of both mixes, the check catches a corrupted row for each condition, and bad
//! parameters are typed errors.
#![allow(clippy::unwrap_used)]

use std::ops::Bound::Unbounded;
use std::ops::ControlFlow;
use std::time::Duration;

use ordo::tree::Direction;
use ordo::{AbortKind, Error, Isolation};
use ordo_bench::error::BenchError;
use ordo_bench::tpcc::{self, Kind, Mix, Tpcc, TpccConfig, schema};
use ordo_clock::{Clock, LogicalClock, SystemClock};

fn tiny() -> TpccConfig {
    TpccConfig {
        warehouses: 2,
        items: 300,
        customers_per_district: 30,
        threads: 2,
        duration: Duration::from_millis(60),
        ..TpccConfig::default()
    }
}

fn assert_consistent<C: Clock>(t: &Tpcc<C>, when: &str) {
    let v = tpcc::violations(t).unwrap();
    assert!(
        v.is_empty(),
        "{when}: {}",
        v.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("; ")
    );
    tpcc::check(t).unwrap();
}

/// Both mixes at 1, 2 and 4 threads on one database, checked after each run.
fn concurrent_runs_stay_consistent<C: Clock>(clock: C) {
    let base = tiny();
    let t = tpcc::load(clock, &base, 2).unwrap();
    assert_consistent(&t, "after load");
    let mut rollbacks = 0;
    let mut new_orders = 0;
    for mix in [Mix::NoPay, Mix::Full] {
        for threads in [1, 2, 4] {
            let cfg = TpccConfig { mix, threads, seed: threads as u64, ..base.clone() };
            let requested_before = t.db.stats().aborts_of(AbortKind::Requested);
            let r = tpcc::run_counted(&t, &cfg, 150).unwrap();
            // The engine counts each rollback as one requested abort, which is what `run`
            // subtracts from its abort figures.
            let requested = t.db.stats().aborts_of(AbortKind::Requested) - requested_before;
            assert_eq!(requested, r.rollbacks);
            let committed: u64 = r.committed_by_kind.iter().sum();
            assert_eq!(committed + r.rollbacks, 150 * threads as u64);
            if mix == Mix::NoPay {
                assert_eq!(r.committed_by_kind[2..], [0, 0, 0], "no-pay runs only two kinds");
            }
            rollbacks += r.rollbacks;
            new_orders += r.committed_by_kind[Kind::NewOrder as usize];
            assert_consistent(&t, &format!("after {} at {threads} threads", mix.name()));
        }
    }
    assert!(new_orders > 0);
    assert!(rollbacks > 0, "1% of NewOrders roll back; {new_orders} committed");
    // A timed run of the full mix, then the check again.
    let cfg = TpccConfig { mix: Mix::Full, threads: 2, ..base };
    let r = tpcc::run(&t, &cfg);
    assert!(r.run.committed > 0 && r.new_orders_per_s > 0.0);
    assert_eq!(r.run.committed, r.committed_by_kind.iter().sum::<u64>());
    assert_eq!(r.failed, 0);
    let requested = r.run.aborts.iter().find(|(k, _)| k == "requested").map_or(0, |(_, n)| *n);
    assert_eq!(requested, 0, "rollbacks are not engine aborts");
    assert_consistent(&t, "after the timed run");
}

#[test]
fn concurrent_runs_stay_consistent_logical_clock() {
    concurrent_runs_stay_consistent(LogicalClock::new());
}

#[test]
fn concurrent_runs_stay_consistent_system_clock() {
    concurrent_runs_stay_consistent(SystemClock::new());
}

#[test]
fn snapshot_isolation_run_stays_consistent() {
    // Conditions 1–4 only involve rows every writer of them also writes, so they hold under SI.
    let cfg =
        TpccConfig { isolation: Isolation::Snapshot, warehouses: 1, mix: Mix::Full, ..tiny() };
    let t = tpcc::load(LogicalClock::new(), &cfg, 1).unwrap();
    tpcc::run_counted(&t, &TpccConfig { threads: 2, ..cfg.clone() }, 200).unwrap();
    assert_consistent(&t, "after an SI run");
}

/// A timed run told to stop each terminal after N transactions runs exactly N per terminal
/// (rollbacks included) and ends when they are done, long before its duration cap; one
/// without the limit runs until the duration.
#[test]
fn timed_run_with_a_transaction_limit_runs_exactly_that_many() {
    let cfg = TpccConfig { warehouses: 1, ..tiny() };
    let t = tpcc::load(LogicalClock::new(), &cfg, 1).unwrap();
    let capped = TpccConfig {
        threads: 2,
        duration: Duration::from_secs(60),
        txns_per_thread: Some(120),
        ..cfg.clone()
    };
    let started = std::time::Instant::now();
    let r = tpcc::run(&t, &capped);
    assert!(started.elapsed() < Duration::from_secs(30), "the limit did not end the run");
    assert_eq!(r.failed, 0, "{:?}", r.first_failure);
    assert_eq!(r.run.committed + r.rollbacks, 240);
    assert_eq!(r.committed_by_kind.iter().sum::<u64>(), r.run.committed);
    let timed = TpccConfig { threads: 1, duration: Duration::from_millis(100), ..cfg };
    let started = std::time::Instant::now();
    tpcc::run(&t, &timed);
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert_consistent(&t, "after the counted runs");
}

/// The bytes of the object at `a`, read in a transaction of its own.
fn read_row<C: Clock>(t: &Tpcc<C>, a: ordo::Addr) -> Vec<u8> {
    t.db.run(|tx| tx.read_with(a, |b| b.to_vec())).unwrap()
}

/// Each `(id, address)` with the row's bytes now, to compare with after a run.
fn rows_of<C: Clock, I>(
    t: &Tpcc<C>,
    ids: impl Iterator<Item = (I, ordo::Addr)>,
) -> Vec<(I, ordo::Addr, Vec<u8>)> {
    ids.map(|(id, a)| (id, a, read_row(t, a))).collect()
}

/// Payment's effect on the CUSTOMER rows (clause 2.5.2.2), row by row: after a run, every
/// customer's balance fell by exactly what its year-to-date payment rose, its payment count rose
/// by the payments it received (all of them: the Payments committed); a good-credit customer's C_DATA is unchanged, and a bad-credit
/// one paid at least once has C_DATA starting with the newest payment's
/// "C_ID C_D_ID C_W_ID D_ID W_ID" entry and still holding its old data (truncated to 500 bytes).
/// The other columns are unchanged.
#[test]
fn payments_change_exactly_the_customer_columns_they_should() {
    use schema::customer;
    let cfg = TpccConfig { warehouses: 2, ..tiny() };
    let t = tpcc::load(LogicalClock::new(), &cfg, 2).unwrap();
    let tr = &t;
    let ids = (1..=cfg.warehouses).flat_map(|w| {
        (1..=schema::DISTRICTS).flat_map(move |d| {
            (1..=cfg.customers_per_district).map(move |c| (c, tr.customer_addr(w, d, c).unwrap()))
        })
    });
    let before = rows_of(&t, ids);
    let run = TpccConfig { threads: 2, seed: 5, ..cfg.clone() };
    let r = tpcc::run_counted(&t, &run, 400).unwrap();
    let (mut paid, mut bad_credit_paid, mut payments_all) = (0, 0, 0);
    for (c, a, old) in before {
        let new = read_row(&t, a);
        assert_eq!(new.len(), customer::BYTES);
        let money = |row: &[u8], i| schema::get(row, i) as i64;
        let payments =
            schema::get(&new, customer::PAYMENT_CNT) - schema::get(&old, customer::PAYMENT_CNT);
        let ytd = money(&new, customer::YTD_PAYMENT) - money(&old, customer::YTD_PAYMENT);
        let balance = money(&new, customer::BALANCE) - money(&old, customer::BALANCE);
        assert_eq!(balance, -ytd, "customer {c}: balance and YTD payment disagree");
        // H_AMOUNT is 1.00 to 5,000.00 (clause 2.5.1.3), in cents.
        let (least, most) = (100 * payments as i64, 500_000 * payments as i64);
        assert!((least..=most).contains(&ytd), "customer {c}: {payments} payments of {ytd}");
        let data = |row: &[u8]| row[customer::DATA..customer::DATA + customer::DATA_BYTES].to_vec();
        let bad = schema::get_str(&new, customer::CREDIT, 2) == b"BC";
        if payments > 0 {
            paid += 1;
        }
        payments_all += payments;
        if bad && payments > 0 {
            bad_credit_paid += 1;
            let (id, d, w) = (
                schema::get(&new, customer::ID),
                schema::get(&new, customer::D_ID),
                schema::get(&new, customer::W_ID),
            );
            let text = String::from_utf8_lossy(&data(&new)).into_owned();
            let prefix = format!("{id} {d} {w} ");
            assert!(text.starts_with(&prefix), "customer {c}: C_DATA {text:?}");
            let old_data = schema::get_str(&old, customer::DATA, customer::DATA_BYTES);
            let kept = &old_data[..old_data.len().min(100)];
            assert!(
                data(&new).windows(kept.len()).any(|x| x == kept),
                "customer {c}: old C_DATA lost"
            );
        } else {
            assert_eq!(data(&new), data(&old), "customer {c}: C_DATA changed");
        }
        // Every other column as loaded.
        let mut masked = [new.clone(), old.clone()];
        for row in &mut masked {
            for i in [customer::BALANCE, customer::YTD_PAYMENT, customer::PAYMENT_CNT] {
                schema::set(row, i, 0);
            }
            row[customer::DATA..customer::DATA + customer::DATA_BYTES].fill(0);
            // Delivery (not in this mix) would change these; NewOrder and Payment do not.
        }
        assert_eq!(masked[0], masked[1], "customer {c}: another column changed");
    }
    assert_eq!(payments_all, r.committed_by_kind[Kind::Payment as usize], "payment counts");
    assert!(paid > 50, "only {paid} customers paid");
    assert!(bad_credit_paid > 0, "no bad-credit customer paid");
}

/// NewOrder's effect on the STOCK rows (clause 2.4.2.2), row by row: after a run, each row's
/// S_ORDER_CNT rose by the order lines of the new orders supplied from it, S_YTD by their
/// quantities, S_REMOTE_CNT by those of another warehouse's orders; S_QUANTITY stays in
/// 10..=100; every other column is unchanged.
#[test]
fn new_orders_change_exactly_the_stock_columns_they_should() {
    use schema::{order_line, stock};
    use std::collections::HashMap;
    let cfg = TpccConfig { warehouses: 2, ..tiny() };
    let t = tpcc::load(LogicalClock::new(), &cfg, 2).unwrap();
    let tr = &t;
    let ids = (1..=cfg.warehouses)
        .flat_map(|w| (1..=cfg.items).map(move |i| ((w, i), tr.stock_addr(w, i).unwrap())));
    let before = rows_of(&t, ids);
    let run = TpccConfig { threads: 2, seed: 9, ..cfg.clone() };
    let r = tpcc::run_counted(&t, &run, 400).unwrap();
    assert!(r.committed_by_kind[Kind::NewOrder as usize] > 100);
    // (count, quantity, remote) per (supply warehouse, item), from the new orders' lines (the
    // loaded orders are 1..=customers_per_district).
    let mut want: HashMap<(u64, u64), (u64, u64, u64)> = HashMap::new();
    t.db.run(|tx| {
        t.order_lines().range(tx, Unbounded, Unbounded, Direction::Forward, None, |_, v| {
            for line in schema::order_line::rows(v).unwrap() {
                let get = |i| schema::get(line, i);
                if get(order_line::O_ID) <= u64::from(cfg.customers_per_district) {
                    continue;
                }
                let e =
                    want.entry((get(order_line::SUPPLY_W_ID), get(order_line::I_ID))).or_default();
                e.0 += 1;
                e.1 += get(order_line::QUANTITY);
                e.2 += u64::from(get(order_line::SUPPLY_W_ID) != get(order_line::W_ID));
            }
            ControlFlow::Continue(())
        })
    })
    .unwrap();
    let lines: u64 = want.values().map(|e| e.0).sum();
    assert!(lines > 500, "only {lines} new order lines");
    for ((w, i), a, old) in before {
        let new = read_row(&t, a);
        let delta = |f| schema::get(&new, f).wrapping_sub(schema::get(&old, f));
        let (count, quantity, remote) =
            want.get(&(u64::from(w), u64::from(i))).copied().unwrap_or_default();
        assert_eq!(delta(stock::ORDER_CNT), count, "stock ({w}, {i}): S_ORDER_CNT");
        assert_eq!(delta(stock::YTD), quantity, "stock ({w}, {i}): S_YTD");
        assert_eq!(delta(stock::REMOTE_CNT), remote, "stock ({w}, {i}): S_REMOTE_CNT");
        let q = schema::get(&new, stock::QUANTITY);
        assert!((10..=100).contains(&q), "stock ({w}, {i}): S_QUANTITY {q}");
        let mut masked = [new.clone(), old.clone()];
        for row in &mut masked {
            for f in [stock::QUANTITY, stock::YTD, stock::ORDER_CNT, stock::REMOTE_CNT] {
                schema::set(row, f, 0);
            }
        }
        assert_eq!(masked[0], masked[1], "stock ({w}, {i}): another column changed");
    }
}

/// Loads a fresh one-warehouse database for a corruption test.
fn fresh() -> Tpcc<LogicalClock> {
    let cfg = TpccConfig { warehouses: 1, ..tiny() };
    tpcc::load(LogicalClock::new(), &cfg, 1).unwrap()
}

fn expect_violation(t: &Tpcc<LogicalClock>, condition: u8, district: Option<u32>) {
    let v = tpcc::violations(t).unwrap();
    assert!(
        v.iter().any(|v| v.condition == condition && v.warehouse == 1 && v.district == district),
        "expected condition {condition} at district {district:?}, got {v:?}"
    );
    let err = tpcc::check(t).unwrap_err();
    assert!(matches!(err, BenchError::Inconsistent(_)), "{err}");
    assert!(err.to_string().contains(&format!("condition {condition}")), "{err}");
}

/// Adds `delta` to word `field` of the row at `addr`.
fn bump_word<C: Clock>(t: &Tpcc<C>, addr: ordo::Addr, field: usize, delta: u64) {
    t.db.run(|tx| {
        let mut row = tx.read_bytes(addr)?;
        schema::add(&mut row, field, delta);
        tx.write_bytes(addr, &row)
    })
    .unwrap();
}

#[test]
fn corrupted_district_ytd_fails_condition_1() {
    let t = fresh();
    bump_word(&t, t.district_ytd_addr(1, 4).unwrap(), schema::ytd::VALUE, 1);
    expect_violation(&t, 1, None);
}

#[test]
fn corrupted_next_order_id_fails_condition_2() {
    let t = fresh();
    bump_word(&t, t.district_addr(1, 7).unwrap(), schema::district::NEXT_O_ID, 1);
    expect_violation(&t, 2, Some(7));
}

#[test]
fn missing_new_order_row_fails_condition_3() {
    let t = fresh();
    // Remove a NEW-ORDER row from the middle of district 2's range (not the newest one, which
    // would fail condition 2 instead).
    let cfg = &t.cfg;
    let o = cfg.initial_orders() - cfg.initial_new_orders() / 2;
    let removed = t.db.run(|tx| t.new_orders().remove(tx, &schema::order_key(1, 2, o))).unwrap();
    assert!(removed.is_some());
    expect_violation(&t, 3, Some(2));
}

/// A line row of order (1, 9, `o`) numbered `n`.
fn line_row(o: u32, n: u32) -> Vec<u8> {
    let mut row = vec![0u8; schema::order_line::BYTES];
    schema::set(&mut row, schema::order_line::W_ID, 1);
    schema::set(&mut row, schema::order_line::D_ID, 9);
    schema::set(&mut row, schema::order_line::O_ID, o.into());
    schema::set(&mut row, schema::order_line::NUMBER, n.into());
    row
}

#[test]
fn extra_order_line_fails_condition_4() {
    let t = fresh();
    // Order 1 of district 9 gains one more line: a well-formed row, but not counted in
    // O_OL_CNT.
    let key = schema::order_key(1, 9, 1);
    t.db.run(|tx| {
        let mut value = t.order_lines().get(tx, &key)?.unwrap();
        let n = (value.len() / schema::order_line::BYTES) as u32 + 1;
        value.extend_from_slice(&line_row(1, n));
        t.order_lines().insert(tx, &key, &value)
    })
    .unwrap();
    expect_violation(&t, 4, Some(9));
}

#[test]
fn misplaced_order_line_fails_condition_4() {
    let t = fresh();
    // The first line of order 2 is replaced by a row claiming to be line 1 of order 3: the
    // count still matches, the row does not.
    let key = schema::order_key(1, 9, 2);
    t.db.run(|tx| {
        let mut value = t.order_lines().get(tx, &key)?.unwrap();
        value[..schema::order_line::BYTES].copy_from_slice(&line_row(3, 1));
        t.order_lines().insert(tx, &key, &value)
    })
    .unwrap();
    expect_violation(&t, 4, Some(9));
}

#[test]
fn truncated_order_line_value_fails_condition_4() {
    let t = fresh();
    // Order 3's lines lose the last 8 bytes of their last row: not whole rows any more.
    let key = schema::order_key(1, 9, 3);
    t.db.run(|tx| {
        let mut value = t.order_lines().get(tx, &key)?.unwrap();
        value.truncate(value.len() - 8);
        t.order_lines().insert(tx, &key, &value)
    })
    .unwrap();
    expect_violation(&t, 4, Some(9));
}

#[test]
fn zero_warehouses_and_bad_parameters_are_typed_errors() {
    let zero = TpccConfig { warehouses: 0, ..tiny() };
    match tpcc::load(LogicalClock::new(), &zero, 1) {
        Err(BenchError::OutOfRange { name: "warehouses", .. }) => {}
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("zero warehouses must be rejected"),
    }
    for (cfg, name) in [
        (TpccConfig { items: 0, ..tiny() }, Some("items")),
        (TpccConfig { customers_per_district: 0, ..tiny() }, Some("customers-per-district")),
        (TpccConfig { warehouses: 70_000, ..tiny() }, Some("warehouses")),
        (TpccConfig { threads: 0, ..tiny() }, None),
    ] {
        match (cfg.validate(), name) {
            (Err(BenchError::OutOfRange { name: got, .. }), Some(want)) => assert_eq!(got, want),
            (Err(BenchError::ZeroThreads), None) => {}
            (other, _) => panic!("{cfg:?} gave {other:?}"),
        }
    }
}

#[test]
fn loaded_population_has_the_scaled_shape() {
    let t = fresh();
    let cfg = t.cfg.clone();
    let (no, orders, lines) =
        t.db.run(|tx| {
            let orders = t.order_lines().entries(tx)?;
            let lines =
                orders.iter().map(|(_, v)| v.len() / schema::order_line::BYTES).sum::<usize>();
            Ok::<_, Error>((t.new_orders().len(tx)?, orders.len(), lines))
        })
        .unwrap();
    assert_eq!(no, (10 * cfg.initial_new_orders()) as usize);
    let per_district = cfg.initial_orders() as usize;
    assert_eq!(orders, 10 * per_district);
    assert!((5 * 10 * per_district..=15 * 10 * per_district).contains(&lines), "{lines}");
    assert!(t.item_addr(cfg.items + 1).is_none(), "the rollback item id is unused");
}
