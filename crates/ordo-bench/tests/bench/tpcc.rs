//! TPC-C at tiny scale: the consistency conditions of clause 3.3.2 hold after load and after
//! concurrent runs of both mixes, the check catches a corrupted row for each condition, and bad
//! parameters are typed errors.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

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
