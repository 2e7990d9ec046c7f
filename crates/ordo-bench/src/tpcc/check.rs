//! The consistency conditions 1–4 of TPC-C clause 3.3.2, checked after load and after runs.
//!
//! 1. W_YTD = sum(D_YTD) over the warehouse's districts.
//! 2. D_NEXT_O_ID − 1 = max(O_ID) = max(NO_O_ID) for each district.
//! 3. max(NO_O_ID) − min(NO_O_ID) + 1 = the number of NEW-ORDER rows, for each district.
//! 4. sum(O_OL_CNT) = the number of ORDER-LINE rows, for each district.
//!
//! ORDER rows are enumerated through the ORDER-by-customer tree (every order is in it), each
//! row read for O_ID and O_OL_CNT (and its warehouse and district checked); NEW-ORDER rows are
//! the entries of their tree in the district's key range; ORDER-LINE rows are the rows listed
//! by the ORDER-LINE entries of the district, each read to check that it holds the warehouse,
//! district, order and line number its place in the index says (a row that does not is
//! reported under condition 4, as is an ORDER row in the wrong district under condition 2). Each warehouse
//! (condition 1) and each district (conditions 2–4) is read in one transaction, so the check
//! sees consistent snapshots even while transactions run — though it is meant for a quiet
//! database. When a district has no NEW-ORDER rows (all delivered), condition 2 compares only
//! D_NEXT_O_ID and max(O_ID), and condition 3 holds trivially.

use std::ops::{Bound, ControlFlow};

use ordo::tree::Direction;
use ordo::{Addr, Error};
use ordo_clock::Clock;

use super::Tpcc;
use super::schema::{self, DISTRICTS, district, get, get_i, order, order_line, ytd};
use crate::error::BenchError;

/// One failed consistency condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The condition's number in clause 3.3.2 (1–4).
    pub condition: u8,
    /// The warehouse.
    pub warehouse: u32,
    /// The district, for conditions 2–4.
    pub district: Option<u32>,
    /// The values that disagree.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TPC-C consistency condition {} fails at warehouse {}",
            self.condition, self.warehouse
        )?;
        if let Some(d) = self.district {
            write!(f, ", district {d}")?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// Checks conditions 1–4; the first violation is a [`BenchError::Inconsistent`] naming the
/// condition, warehouse and district.
pub fn check<C: Clock>(tpcc: &Tpcc<C>) -> Result<(), BenchError> {
    match violations(tpcc)?.into_iter().next() {
        Some(v) => Err(BenchError::Inconsistent(v.to_string())),
        None => Ok(()),
    }
}

/// Every violation of conditions 1–4, warehouse by warehouse (empty when consistent). Errors
/// only when the database cannot be read.
pub fn violations<C: Clock>(tpcc: &Tpcc<C>) -> Result<Vec<Violation>, BenchError> {
    let mut out = Vec::new();
    for w in 1..=tpcc.cfg.warehouses {
        condition_1(tpcc, w, &mut out)?;
        for d in 1..=DISTRICTS {
            district_conditions(tpcc, w, d, &mut out)?;
        }
    }
    Ok(out)
}

fn missing(what: &str, w: u32, d: u32) -> BenchError {
    BenchError::Inconsistent(format!("no {what} row for warehouse {w}, district {d}"))
}

fn condition_1<C: Clock>(
    tpcc: &Tpcc<C>,
    w: u32,
    out: &mut Vec<Violation>,
) -> Result<(), BenchError> {
    let wa = tpcc.warehouse_ytd_addr(w).ok_or_else(|| missing("warehouse", w, 0))?;
    let mut das = Vec::new();
    for d in 1..=DISTRICTS {
        das.push(tpcc.district_ytd_addr(w, d).ok_or_else(|| missing("district", w, d))?);
    }
    let (w_ytd, d_ytd) = tpcc.db.run(|tx| {
        let w_ytd = tx.read_with(wa, |b| get_i(b, ytd::VALUE))?;
        let mut sum = 0i64;
        for &da in &das {
            sum += tx.read_with(da, |b| get_i(b, ytd::VALUE))?;
        }
        Ok::<_, Error>((w_ytd, sum))
    })?;
    if w_ytd != d_ytd {
        out.push(Violation {
            condition: 1,
            warehouse: w,
            district: None,
            detail: format!("W_YTD = {w_ytd} cents but the districts' D_YTD sum to {d_ytd}"),
        });
    }
    Ok(())
}

/// What one district's snapshot holds.
#[derive(Default)]
struct DistrictSnapshot {
    next_o_id: u64,
    orders: u64,
    max_o_id: u64,
    ol_cnt_sum: u64,
    /// (min, max, count) of NEW-ORDER ids.
    new_orders: Option<(u64, u64, u64)>,
    order_lines: u64,
    misplaced: Option<String>,
    bad_line: Option<String>,
}

fn district_conditions<C: Clock>(
    tpcc: &Tpcc<C>,
    w: u32,
    d: u32,
    out: &mut Vec<Violation>,
) -> Result<(), BenchError> {
    let da = tpcc.district_addr(w, d).ok_or_else(|| missing("district", w, d))?;
    let s = tpcc.db.run(|tx| {
        let mut s = DistrictSnapshot {
            next_o_id: tx.read_with(da, |b| get(b, district::NEXT_O_ID))?,
            ..DistrictSnapshot::default()
        };
        let mut order_addrs: Vec<Addr> = Vec::new();
        let (lo, hi) = (
            schema::order_by_customer_key(w, d, 0, 0),
            schema::order_by_customer_key(w, d, u32::MAX, u32::MAX),
        );
        tpcc.orders_by_customer.range(
            tx,
            Bound::Included(&lo),
            Bound::Included(&hi),
            Direction::Forward,
            None,
            |_, v| {
                order_addrs.push(schema::value_addr(v).unwrap_or(Addr::NULL));
                ControlFlow::Continue(())
            },
        )?;
        for &oa in &order_addrs {
            if oa.is_null() {
                s.misplaced.get_or_insert_with(|| "an ORDER index value is not an address".into());
                continue;
            }
            let (o, ow, od, cnt) = tx.read_with(oa, |b| {
                (get(b, order::ID), get(b, order::W_ID), get(b, order::D_ID), get(b, order::OL_CNT))
            })?;
            if (ow, od) != (u64::from(w), u64::from(d)) {
                s.misplaced
                    .get_or_insert_with(|| format!("order {o} of ({ow}, {od}) is indexed here"));
            }
            s.orders += 1;
            s.max_o_id = s.max_o_id.max(o);
            s.ol_cnt_sum += cnt;
        }
        let (lo, hi) = (schema::order_key(w, d, 0), schema::order_key(w, d, u32::MAX));
        let mut no: Option<(u64, u64, u64)> = None;
        tpcc.new_orders.range(
            tx,
            Bound::Included(&lo),
            Bound::Included(&hi),
            Direction::Forward,
            None,
            |k, _| {
                let o = schema::order_of_key(k).unwrap_or(0);
                let o = u64::from(o);
                no = Some(match no {
                    None => (o, o, 1),
                    Some((min, max, n)) => (min.min(o), max.max(o), n + 1),
                });
                ControlFlow::Continue(())
            },
        )?;
        s.new_orders = no;
        let (lo, hi) = (schema::order_key(w, d, 0), schema::order_key(w, d, u32::MAX));
        // (order id, its line rows) for every ORDER-LINE entry of the district.
        let mut lines: Vec<(u32, Vec<u8>)> = Vec::new();
        let mut bad_value = false;
        tpcc.order_lines.range(
            tx,
            Bound::Included(&lo),
            Bound::Included(&hi),
            Direction::Forward,
            None,
            |k, v| {
                let o = schema::order_of_key(k).unwrap_or(0);
                bad_value |= order_line::rows(v).is_none();
                lines.push((o, v.to_vec()));
                ControlFlow::Continue(())
            },
        )?;
        if bad_value {
            s.bad_line
                .get_or_insert_with(|| "an ORDER-LINE value is not one or more whole rows".into());
        }
        for (o, value) in &lines {
            for (n, r) in value.chunks_exact(order_line::BYTES).enumerate() {
                let fields =
                    [order_line::W_ID, order_line::D_ID, order_line::O_ID, order_line::NUMBER]
                        .map(|field| get(r, field));
                let want = [u64::from(w), u64::from(d), u64::from(*o), n as u64 + 1];
                if fields != want {
                    s.bad_line.get_or_insert_with(|| {
                        format!("line {} of order {o} holds (w, d, o, number) = {fields:?}", n + 1)
                    });
                }
                s.order_lines += 1;
            }
        }
        Ok::<_, Error>(s)
    })?;
    let mut fail = |condition, detail: String| {
        out.push(Violation { condition, warehouse: w, district: Some(d), detail });
    };
    if let Some(m) = &s.misplaced {
        fail(2, m.clone());
    }
    let last = s.next_o_id.wrapping_sub(1);
    match s.new_orders {
        Some((_, no_max, _)) if last != s.max_o_id || last != no_max => fail(
            2,
            format!(
                "D_NEXT_O_ID - 1 = {last}, max(O_ID) = {}, max(NO_O_ID) = {no_max}",
                s.max_o_id
            ),
        ),
        None if last != s.max_o_id => fail(
            2,
            format!("D_NEXT_O_ID - 1 = {last}, max(O_ID) = {} (no NEW-ORDER rows)", s.max_o_id),
        ),
        _ => {}
    }
    if let Some((min, max, n)) = s.new_orders
        && max - min + 1 != n
    {
        fail(
            3,
            format!("max(NO_O_ID) - min(NO_O_ID) + 1 = {} but {n} NEW-ORDER rows", max - min + 1),
        );
    }
    if let Some(m) = &s.bad_line {
        fail(4, m.clone());
    }
    if s.ol_cnt_sum != s.order_lines {
        fail(
            4,
            format!(
                "sum(O_OL_CNT) over {} orders = {} but {} ORDER-LINE rows",
                s.orders, s.ol_cnt_sum, s.order_lines
            ),
        );
    }
    Ok(())
}
