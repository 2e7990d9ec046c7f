//! Row layouts and index keys of the nine TPC-C tables.
//!
//! Every row is one heap object of a fixed size. Numbers come first, one little-endian 64-bit
//! word each (so [`ordo::Tx::read_view`] can read a field as [`ordo::txn::View::word`] without
//! copying the row); fixed-width strings follow at byte offsets. Money is in cents (`i64`), tax
//! and discount rates in units of 1/10000, dates in seconds since the Unix epoch, and a null
//! carrier or delivery date is 0 (TPC-C ids start at 1).
//!
//! Index keys are big-endian so that byte order is numeric order: warehouse `u16`, district
//! `u8`, customer and order ids `u32`, order-line number `u8`.

use ordo::Addr;

/// Districts per warehouse (fixed by the standard).
pub const DISTRICTS: u32 = 10;

/// Reads word `i` of a row buffer.
#[inline]
pub fn get(row: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&row[i * 8..i * 8 + 8]);
    u64::from_le_bytes(w)
}

/// Writes word `i` of a row buffer.
#[inline]
pub fn set(row: &mut [u8], i: usize, value: u64) {
    row[i * 8..i * 8 + 8].copy_from_slice(&value.to_le_bytes());
}

/// Adds `delta` to word `i` (wrapping).
#[inline]
pub fn add(row: &mut [u8], i: usize, delta: u64) {
    let v = get(row, i).wrapping_add(delta);
    set(row, i, v);
}

/// Adds signed `delta` to word `i` (money, wrapping).
#[inline]
pub fn add_i(row: &mut [u8], i: usize, delta: i64) {
    let v = get_i(row, i).wrapping_add(delta);
    set_i(row, i, v);
}

/// Reads word `i` as signed money (cents).
#[inline]
pub fn get_i(row: &[u8], i: usize) -> i64 {
    get(row, i) as i64
}

/// Writes signed money (cents) to word `i`.
#[inline]
pub fn set_i(row: &mut [u8], i: usize, value: i64) {
    set(row, i, value as u64);
}

/// Copies `text` into the fixed-width field at `offset` of `width` bytes, zero-padded
/// (truncated if longer).
pub fn set_str(row: &mut [u8], offset: usize, width: usize, text: &[u8]) {
    let n = text.len().min(width);
    row[offset..offset + n].copy_from_slice(&text[..n]);
    row[offset + n..offset + width].fill(0);
}

/// The fixed-width field at `offset`, without its zero padding.
pub fn get_str(row: &[u8], offset: usize, width: usize) -> &[u8] {
    let field = &row[offset..offset + width];
    let end = field.iter().position(|b| *b == 0).unwrap_or(width);
    &field[..end]
}

/// W_YTD and D_YTD, partitioned vertically out of their rows (TPC-C clause 1.6 allows it):
/// one object per warehouse and per district holding the year-to-date balance alone.
///
/// Payment adds to both balances; NewOrder reads the taxes and (in the district) takes the next
/// order number. With the balances in the rows every Payment changed the version of the row a
/// concurrent NewOrder had read, and at one warehouse most aborts were NewOrders failing
/// validation on the warehouse row that Payment had just rewritten. Split, the two transactions
/// share no object in the warehouse or district tables. The object is one cache line (48 bytes
/// plus the 16-byte object header), so balances of different warehouses never share one.
pub mod ytd {
    /// The balance (cents).
    pub const VALUE: usize = 0;
    /// Object size: the slot is one 64-byte cache line.
    pub const BYTES: usize = 48;
}

/// WAREHOUSE: words then strings.
pub mod warehouse {
    /// W_ID.
    pub const ID: usize = 0;
    /// W_TAX (1/10000).
    pub const TAX: usize = 1;
    // Word 2 is unused: W_YTD lives in an object of its own (see [`super::ytd`]).
    /// W_NAME (10 bytes).
    pub const NAME: usize = 24;
    /// Street 1, street 2, city (20 each), state (2), zip (9): 71 bytes.
    pub const ADDRESS: usize = 34;
    /// Row size.
    pub const BYTES: usize = 112;
}

/// DISTRICT.
pub mod district {
    /// D_ID.
    pub const ID: usize = 0;
    /// D_W_ID.
    pub const W_ID: usize = 1;
    /// D_TAX (1/10000).
    pub const TAX: usize = 2;
    // Word 3 is unused: D_YTD lives in an object of its own (see [`super::ytd`]).
    /// D_NEXT_O_ID.
    pub const NEXT_O_ID: usize = 4;
    /// D_NAME (10 bytes).
    pub const NAME: usize = 40;
    /// Street 1, street 2, city, state, zip.
    pub const ADDRESS: usize = 50;
    /// Row size.
    pub const BYTES: usize = 128;
}

/// CUSTOMER.
pub mod customer {
    /// C_ID.
    pub const ID: usize = 0;
    /// C_D_ID.
    pub const D_ID: usize = 1;
    /// C_W_ID.
    pub const W_ID: usize = 2;
    /// C_SINCE.
    pub const SINCE: usize = 3;
    /// C_CREDIT_LIM (cents).
    pub const CREDIT_LIM: usize = 4;
    /// C_DISCOUNT (1/10000).
    pub const DISCOUNT: usize = 5;
    /// C_BALANCE (cents, signed).
    pub const BALANCE: usize = 6;
    /// C_YTD_PAYMENT (cents).
    pub const YTD_PAYMENT: usize = 7;
    /// C_PAYMENT_CNT.
    pub const PAYMENT_CNT: usize = 8;
    /// C_DELIVERY_CNT.
    pub const DELIVERY_CNT: usize = 9;
    /// C_FIRST (16 bytes).
    pub const FIRST: usize = 80;
    /// C_MIDDLE (2 bytes).
    pub const MIDDLE: usize = 96;
    /// C_LAST (16 bytes).
    pub const LAST: usize = 98;
    /// C_CREDIT (2 bytes: "GC" or "BC").
    pub const CREDIT: usize = 114;
    /// C_PHONE (16 bytes).
    pub const PHONE: usize = 116;
    /// Street 1, street 2, city, state, zip (71 bytes).
    pub const ADDRESS: usize = 132;
    /// C_DATA (500 bytes).
    pub const DATA: usize = 203;
    /// Width of C_DATA.
    pub const DATA_BYTES: usize = 500;
    /// Row size.
    pub const BYTES: usize = 704;
}

/// HISTORY (no key: rows are only inserted).
pub mod history {
    /// H_C_ID.
    pub const C_ID: usize = 0;
    /// H_C_D_ID.
    pub const C_D_ID: usize = 1;
    /// H_C_W_ID.
    pub const C_W_ID: usize = 2;
    /// H_D_ID.
    pub const D_ID: usize = 3;
    /// H_W_ID.
    pub const W_ID: usize = 4;
    /// H_DATE.
    pub const DATE: usize = 5;
    /// H_AMOUNT (cents).
    pub const AMOUNT: usize = 6;
    /// H_DATA (24 bytes).
    pub const DATA: usize = 56;
    /// Row size.
    pub const BYTES: usize = 80;
}

/// ORDER.
pub mod order {
    /// O_ID.
    pub const ID: usize = 0;
    /// O_D_ID.
    pub const D_ID: usize = 1;
    /// O_W_ID.
    pub const W_ID: usize = 2;
    /// O_C_ID.
    pub const C_ID: usize = 3;
    /// O_ENTRY_D.
    pub const ENTRY_D: usize = 4;
    /// O_CARRIER_ID (0 = null).
    pub const CARRIER_ID: usize = 5;
    /// O_OL_CNT.
    pub const OL_CNT: usize = 6;
    /// O_ALL_LOCAL.
    pub const ALL_LOCAL: usize = 7;
    /// Row size.
    pub const BYTES: usize = 64;
}

/// ORDER-LINE.
pub mod order_line {
    /// OL_O_ID.
    pub const O_ID: usize = 0;
    /// OL_D_ID.
    pub const D_ID: usize = 1;
    /// OL_W_ID.
    pub const W_ID: usize = 2;
    /// OL_NUMBER.
    pub const NUMBER: usize = 3;
    /// OL_I_ID.
    pub const I_ID: usize = 4;
    /// OL_SUPPLY_W_ID.
    pub const SUPPLY_W_ID: usize = 5;
    /// OL_DELIVERY_D (0 = null).
    pub const DELIVERY_D: usize = 6;
    /// OL_QUANTITY.
    pub const QUANTITY: usize = 7;
    /// OL_AMOUNT (cents).
    pub const AMOUNT: usize = 8;
    /// OL_DIST_INFO (24 bytes).
    pub const DIST_INFO: usize = 72;
    /// Row size.
    pub const BYTES: usize = 96;

    /// The rows of an ORDER-LINE value (an order's lines, stored together in line-number
    /// order; see the module docs of [`crate::tpcc`]); `None` unless the value is one or more
    /// whole rows.
    pub fn rows(value: &[u8]) -> Option<std::slice::ChunksExact<'_, u8>> {
        (!value.is_empty() && value.len().is_multiple_of(BYTES)).then(|| value.chunks_exact(BYTES))
    }
}

/// ITEM (read-only).
pub mod item {
    /// I_ID.
    pub const ID: usize = 0;
    /// I_IM_ID.
    pub const IM_ID: usize = 1;
    /// I_PRICE (cents).
    pub const PRICE: usize = 2;
    /// I_NAME (24 bytes).
    pub const NAME: usize = 24;
    /// I_DATA (50 bytes).
    pub const DATA: usize = 48;
    /// Width of I_DATA.
    pub const DATA_BYTES: usize = 50;
    /// Row size.
    pub const BYTES: usize = 104;
}

/// STOCK.
pub mod stock {
    /// S_I_ID.
    pub const I_ID: usize = 0;
    /// S_W_ID.
    pub const W_ID: usize = 1;
    /// S_QUANTITY.
    pub const QUANTITY: usize = 2;
    /// S_YTD.
    pub const YTD: usize = 3;
    /// S_ORDER_CNT.
    pub const ORDER_CNT: usize = 4;
    /// S_REMOTE_CNT.
    pub const REMOTE_CNT: usize = 5;
    /// S_DIST_01 .. S_DIST_10 (24 bytes each).
    pub const DIST: usize = 48;
    /// Width of one S_DIST_xx.
    pub const DIST_BYTES: usize = 24;
    /// S_DATA (50 bytes).
    pub const DATA: usize = 288;
    /// Width of S_DATA.
    pub const DATA_BYTES: usize = 50;
    /// Row size.
    pub const BYTES: usize = 344;
}

/// Width of the name fields in the customer-by-name key.
pub const NAME_KEY_BYTES: usize = 16;

/// Key of NEW-ORDER, ORDER-LINE and of the ORDER hash index: (w, d, o), 8 bytes, so that a
/// B+tree probe compares it as one word (a 7-byte key went to `memcmp`: TPC-C ran 1.4 % more
/// instructions per transaction with it).
pub fn order_key(w: u32, d: u32, o: u32) -> [u8; 8] {
    let mut k = [0u8; 8];
    k[..2].copy_from_slice(&(w as u16).to_be_bytes());
    k[2..4].copy_from_slice(&(d as u16).to_be_bytes());
    k[4..].copy_from_slice(&o.to_be_bytes());
    k
}

/// The order number of an [`order_key`]; `None` for a key of another length.
pub fn order_of_key(k: &[u8]) -> Option<u32> {
    let k: &[u8; 8] = k.try_into().ok()?;
    Some(u32::from_be_bytes([k[4], k[5], k[6], k[7]]))
}

/// Key of the ORDER-by-customer tree: (w, d, c, o).
pub fn order_by_customer_key(w: u32, d: u32, c: u32, o: u32) -> [u8; 11] {
    let mut k = [0u8; 11];
    k[..2].copy_from_slice(&(w as u16).to_be_bytes());
    k[2] = d as u8;
    k[3..7].copy_from_slice(&c.to_be_bytes());
    k[7..].copy_from_slice(&o.to_be_bytes());
    k
}

/// Key of the customer-by-last-name tree: (w, d, last, first, c), names zero-padded to
/// [`NAME_KEY_BYTES`], so that one (w, d, last) prefix lists its customers by first name.
pub fn customer_name_key(w: u32, d: u32, last: &[u8], first: &[u8], c: u32) -> [u8; 39] {
    let mut k = [0u8; 39];
    k[..19].copy_from_slice(&customer_name_prefix(w, d, last));
    let n = first.len().min(NAME_KEY_BYTES);
    k[19..19 + n].copy_from_slice(&first[..n]);
    k[35..].copy_from_slice(&c.to_be_bytes());
    k
}

/// The first 19 bytes of [`customer_name_key`]: (w, d, last).
fn customer_name_prefix(w: u32, d: u32, last: &[u8]) -> [u8; 19] {
    let mut k = [0u8; 19];
    k[..2].copy_from_slice(&(w as u16).to_be_bytes());
    k[2] = d as u8;
    let n = last.len().min(NAME_KEY_BYTES);
    k[3..3 + n].copy_from_slice(&last[..n]);
    k
}

/// Inclusive bounds of every customer-by-name key with this (w, d, last).
pub fn customer_name_range(w: u32, d: u32, last: &[u8]) -> ([u8; 39], [u8; 39]) {
    let prefix = customer_name_prefix(w, d, last);
    let mut lo = [0u8; 39];
    lo[..19].copy_from_slice(&prefix);
    let mut hi = [0xFFu8; 39];
    hi[..19].copy_from_slice(&prefix);
    (lo, hi)
}

/// An address as an index value.
pub fn addr_value(a: Addr) -> [u8; 8] {
    a.to_raw().to_le_bytes()
}

/// An index value as an address (`None` if it is not 8 bytes).
pub fn value_addr(v: &[u8]) -> Option<Addr> {
    let b: [u8; 8] = v.try_into().ok()?;
    Some(Addr::from_raw(u64::from_le_bytes(b)))
}

// Every field fits its row (checked at compile time).
const _: () = {
    assert!(warehouse::ADDRESS + 71 <= warehouse::BYTES);
    assert!(district::ADDRESS + 71 <= district::BYTES);
    assert!(customer::DATA + customer::DATA_BYTES <= customer::BYTES);
    assert!(customer::ADDRESS + 71 == customer::DATA);
    assert!(item::DATA + item::DATA_BYTES <= item::BYTES);
    assert!(item::DATA.is_multiple_of(8) && item::DATA_BYTES <= 56);
    assert!(stock::DIST + 10 * stock::DIST_BYTES == stock::DATA);
    assert!(stock::DATA + stock::DATA_BYTES <= stock::BYTES);
    assert!(order_line::DIST_INFO + 24 <= order_line::BYTES);
    assert!(history::DATA + 24 <= history::BYTES);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_numerically() {
        assert!(order_key(1, 2, 255) < order_key(1, 2, 256));
        assert!(order_key(1, 10, 1) > order_key(1, 9, 70_000));
        assert!(order_key(2, 1, 1) > order_key(1, 10, u32::MAX));
        assert_eq!(order_of_key(&order_key(3, 7, 70_001)), Some(70_001));
        assert_eq!(order_of_key(&order_key(3, 7, 1)[..7]), None);
        let (lo, hi) = customer_name_range(1, 3, b"BARBAR");
        let k = customer_name_key(1, 3, b"BARBAR", b"ZZZZZZZZZZZZZZZZ", 3000);
        assert!(lo <= k && k <= hi);
        let other = customer_name_key(1, 3, b"BARBARBAR", b"A", 1);
        assert!(!(lo <= other && other <= hi));
    }
}
