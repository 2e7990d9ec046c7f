//! # STAMP vacation: a travel reservation system (Minh et al., IISWC'08)
//!
//! A travel agency's database has three resource tables — cars, flights and rooms — mapping an
//! id to a [`Resource`] (`used`, `free`, `total`, `price`), and a customer table mapping an id to
//! the customer's reservations, a list of [`ReservationInfo`] `(kind, id, price paid)` sorted by
//! `(kind, id)`. All four are ordered maps, as in STAMP (red-black trees there, [`BTree`]s of
//! [`NODE_BYTES`]-byte nodes here, keyed by the id in big-endian bytes). Every id
//! `1..=relations` starts in each table.
//!
//! Client tasks, drawn up front by [`Vacation::generate`] with STAMP's parameters, are:
//! * **make reservation** (`user_percent` % of tasks): query the price of `1..=queries_per_task`
//!   random `(kind, id)` pairs among the first `query_percent` % of ids; for each kind, reserve
//!   the most expensive resource found (creating the customer if absent).
//! * **delete customer** (half of the rest): cancel all the customer's reservations and remove
//!   the customer.
//! * **update tables** (the other half): `1..=queries_per_task` random operations, each adding
//!   100 units of a resource at a new price (creating it if absent) or removing 100 units (for a
//!   flight: deleting it, refused while any seat is used). A resource whose total reaches zero
//!   is removed.
//!
//! The parallel version runs each task as one transaction (as STAMP does with `TM_BEGIN` /
//! `TM_END` around a client action), with the tasks split into contiguous chunks, one per
//! thread. The same task code (`perform`) runs on plain `BTreeMap`s for the sequential
//! version and on the engine's trees for the parallel one, through the `Store` trait. A change
//! to a resource (a reservation, a cancellation, an update) is one read-modify-write step,
//! `Store::update_resource`: [`BTree::update`] on the engine, which descends the tree once where
//! a `get` then an `insert` descend twice, and `BTreeMap::entry` in the sequential version, so
//! that both make one lookup. A customer's reservation list is one value, so a make-reservation
//! task reads and writes it once, in one step (`Store::update_customer`: [`BTree::update`], or
//! `BTreeMap::entry`) between its queries and taking the units (STAMP inserts into a list in
//! place; rewriting the whole list after each reservation cost Ordo a quarter of its time, and
//! until session 22 the list was read and written in two descents).
//!
//! ## Timing scope
//! As in STAMP, whose timer brackets only `client_run` (`vacation.c`: the manager is filled
//! before `TIMER_READ(start)` and checked after `TIMER_READ(stop)`), the reported time is the
//! client phase alone ([`Kernel::parallel_timed`], [`Kernel::sequential_timed`]). The parallel
//! version loads the tables before it (in parallel, [`LOAD_BATCH`] inserts per transaction, each
//! thread its own id range) and reads the final state out after it; the sequential one builds
//! its maps before it. Until session 14 both load and read-out were timed too, which the
//! sequential version's `BTreeMap`s do in a fraction of the time the engine's transactional
//! inserts and scans take, so the speedups understated the client phase's
//! (`docs/results/2026-11-25-s14-stamp-*` has both).
//!
//! ## What [`Kernel::verify`] checks
//! The final state depends on the order in which tasks commit, so the parallel state is not
//! compared with the sequential one; instead *both* must satisfy every invariant that any serial
//! execution of the tasks keeps (STAMP's `checkTables`, strengthened):
//! 1. Every resource has `used + free == total`, `total` a positive multiple of 100, a price in
//!    STAMP's set `{50, 60, 70, 80, 90}`, and an id in `1..=relations`.
//! 2. Every resource's `used` equals the number of customer reservations naming it.
//! 3. Every customer's id is in `1..=relations`, its reservation list is strictly sorted by
//!    `(kind, id)` (no duplicates), and each entry names an existing resource and records a price
//!    from the price set (the price paid; later updates may change the resource's price).
//! 4. Resources and customers that no task touches are exactly as loaded: resources with their
//!    initial total, all free, and the initial price; customers present with no reservation.

use std::collections::BTreeMap;
use std::time::Instant;

use ordo::tree::{BTree, Edit, TreeOptions};
use ordo::{Ordo, Tx};
use ordo_clock::Clock;
use rand::{Rng, SeedableRng, rngs::SmallRng};

use super::{Kernel, Size};
use super::{on_threads, out_of_range};
use crate::error::BenchError;

/// Node size of the four trees. A task reads a handful of rows, and a read copies its whole
/// node: with the default 4 KiB nodes the small preset spent twice the CPU time of 512-byte
/// nodes (`perf stat` task-clock over the timing harness, 11.0 s vs 5.4 s; 256-byte nodes were no
/// better than 512). STAMP's standard input (`--size large`, 1 M ids per table) does not fit
/// the caches, and there the cache miss on each level's node outweighs the copy: 1024-byte
/// nodes (one level fewer) ran its client phase 1.13× / 1.04× faster than 512 at 1 / 2 threads,
/// 2048-byte ones 0.88× / 0.94× of 1024, 256-byte ones 0.85× / 0.87× of 512 (session 19,
/// alternated, `docs/results/2026-11-28-s19-vacation-nodes.txt`); the medium preset is level.
pub const NODE_BYTES: usize = 1024;
/// Inserts per transaction while loading the tables.
pub const LOAD_BATCH: usize = 64;
/// The prices a resource can have: STAMP's `(random % 5) * 10 + 50`.
pub const PRICES: [u64; 5] = [50, 60, 70, 80, 90];
/// Units added or removed by one table update, as in STAMP.
pub const UPDATE_UNITS: u64 = 100;
/// The largest `relations` accepted.
pub const RELATIONS_MAX: u32 = 1 << 24;
/// The largest `tasks` accepted.
pub const TASKS_MAX: u32 = 1 << 26;
/// The largest `queries_per_task` accepted.
pub const QUERIES_MAX: u32 = 1 << 10;

/// Bytes of one encoded [`ReservationInfo`]: kind, id, price.
const INFO_BYTES: usize = 1 + 8 + 8;

/// The generator's parameters (STAMP's `vacation` flags).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct VacationParams {
    /// `-n`: the most queries (or updates) of one task, at least 1.
    pub queries_per_task: u32,
    /// `-q`: the percentage of ids that tasks touch, `1..=100`.
    pub query_percent: u32,
    /// `-u`: the percentage of tasks that make reservations, `0..=100`.
    pub user_percent: u32,
    /// `-r`: ids per table, `1..=RELATIONS_MAX`.
    pub relations: u32,
    /// `-t`: client tasks in all, `1..=TASKS_MAX`.
    pub tasks: u32,
}

impl VacationParams {
    /// The ids tasks draw from: `1..=query_range()` (STAMP rounds `q% × r` to nearest).
    pub fn query_range(&self) -> u64 {
        ((u64::from(self.query_percent) * u64::from(self.relations) + 50) / 100).max(1)
    }
}

/// A resource table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum ResourceKind {
    /// Rental cars.
    Car,
    /// Flight seats.
    Flight,
    /// Hotel rooms.
    Room,
}

impl ResourceKind {
    /// The three kinds, in table order.
    pub const ALL: [ResourceKind; 3] =
        [ResourceKind::Car, ResourceKind::Flight, ResourceKind::Room];

    fn index(self) -> usize {
        self as usize
    }

    fn from_byte(b: u8) -> Option<Self> {
        Self::ALL.get(usize::from(b)).copied()
    }
}

/// One row of a resource table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resource {
    /// Units reserved by customers.
    pub used: u64,
    /// Units still available.
    pub free: u64,
    /// `used + free`.
    pub total: u64,
    /// The current price of a unit.
    pub price: u64,
}

impl Resource {
    fn encode(&self) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (chunk, v) in
            out.chunks_exact_mut(8).zip([self.used, self.free, self.total, self.price])
        {
            chunk.copy_from_slice(&v.to_le_bytes());
        }
        out
    }

    fn decode(kind: ResourceKind, id: u64, bytes: &[u8]) -> Result<Self, BenchError> {
        if bytes.len() != 32 {
            return Err(BenchError::Inconsistent(format!(
                "{kind:?} {id}: a resource value has {} bytes, not 32",
                bytes.len()
            )));
        }
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
            u64::from_le_bytes(w)
        };
        Ok(Resource { used: word(0), free: word(1), total: word(2), price: word(3) })
    }
}

/// One reservation held by a customer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReservationInfo {
    /// The table.
    pub kind: ResourceKind,
    /// The resource id.
    pub id: u64,
    /// The price paid.
    pub price: u64,
}

fn encode_infos(infos: &[ReservationInfo]) -> Vec<u8> {
    let mut out = Vec::with_capacity(infos.len() * INFO_BYTES);
    for i in infos {
        out.push(i.kind as u8);
        out.extend_from_slice(&i.id.to_le_bytes());
        out.extend_from_slice(&i.price.to_le_bytes());
    }
    out
}

fn decode_infos(customer: u64, bytes: &[u8]) -> Result<Vec<ReservationInfo>, BenchError> {
    let bad = || {
        BenchError::Inconsistent(format!(
            "customer {customer}: a value of {} bytes is not a list of {INFO_BYTES}-byte reservations",
            bytes.len()
        ))
    };
    if !bytes.len().is_multiple_of(INFO_BYTES) {
        return Err(bad());
    }
    bytes
        .chunks_exact(INFO_BYTES)
        .map(|c| {
            let kind = ResourceKind::from_byte(c[0]).ok_or_else(bad)?;
            let mut id = [0u8; 8];
            id.copy_from_slice(&c[1..9]);
            let mut price = [0u8; 8];
            price.copy_from_slice(&c[9..17]);
            Ok(ReservationInfo {
                kind,
                id: u64::from_le_bytes(id),
                price: u64::from_le_bytes(price),
            })
        })
        .collect()
}

/// One operation of an update-tables task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateOp {
    /// Add [`UPDATE_UNITS`] units at this price (creating the resource if absent).
    Add {
        /// The new price.
        price: u64,
    },
    /// Remove [`UPDATE_UNITS`] units (a flight: delete it if no seat is used).
    Delete,
}

/// A client task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Task {
    /// Query prices and reserve the most expensive resource of each kind found.
    Reserve {
        /// Who reserves.
        customer: u64,
        /// The `(kind, id)` pairs queried.
        queries: Vec<(ResourceKind, u64)>,
    },
    /// Cancel every reservation of a customer and remove it.
    DeleteCustomer {
        /// Who.
        customer: u64,
    },
    /// Add or remove resource units.
    UpdateTables {
        /// `(kind, id, operation)`, applied in order.
        updates: Vec<(ResourceKind, u64, UpdateOp)>,
    },
}

/// A generated input: the initial tables and the tasks.
#[derive(Clone, Debug)]
pub struct VacationInput {
    /// The parameters it was generated from.
    pub params: VacationParams,
    /// Per kind, `(total, price)` of ids `1..=relations` (index `id - 1`).
    pub initial: [Vec<(u64, u64)>; 3],
    /// The client tasks, in generation order.
    pub tasks: Vec<Task>,
}

/// The database's content after a run.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct VacationState {
    /// Per kind (in [`ResourceKind::ALL`] order), id → resource.
    pub resources: [BTreeMap<u64, Resource>; 3],
    /// Customer id → reservations sorted by `(kind, id)`.
    pub customers: BTreeMap<u64, Vec<ReservationInfo>>,
    /// Inconsistencies a task met while running (a customer holding a reservation its resource
    /// does not count). The parallel version returns them as errors instead; from a consistent
    /// start no serial run meets any.
    pub problems: Vec<String>,
}

/// Where the task code reads and writes: plain maps or the engine inside a transaction.
trait Store {
    fn resource(&mut self, kind: ResourceKind, id: u64) -> Result<Option<Resource>, BenchError>;
    /// Reads a resource and replaces or removes it as `f` says, in one step (one tree descent):
    /// `f` gets the resource (`None`: absent) and returns [`Change::Keep`], or what to write.
    fn update_resource(
        &mut self,
        kind: ResourceKind,
        id: u64,
        f: impl FnOnce(Option<Resource>) -> Change,
    ) -> Result<(), BenchError>;
    fn customer(&mut self, id: u64) -> Result<Option<Vec<ReservationInfo>>, BenchError>;
    /// Reads a customer's reservations and lets `f` change them in one step (one tree
    /// descent): `f` gets the list (empty for an absent customer) and whether the customer
    /// exists, and returns whether to write the list back (creating the customer if absent).
    fn update_customer(
        &mut self,
        id: u64,
        f: impl FnOnce(&mut Vec<ReservationInfo>, bool) -> bool,
    ) -> Result<(), BenchError>;
    /// Removes a customer.
    fn remove_customer(&mut self, id: u64) -> Result<(), BenchError>;
}

/// What [`Store::update_resource`] does with a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    /// Nothing.
    Keep,
    /// Write this resource (creating it if absent).
    Set(Resource),
    /// Remove it.
    Remove,
}

impl Store for VacationState {
    fn resource(&mut self, kind: ResourceKind, id: u64) -> Result<Option<Resource>, BenchError> {
        Ok(self.resources[kind.index()].get(&id).copied())
    }

    fn update_resource(
        &mut self,
        kind: ResourceKind,
        id: u64,
        f: impl FnOnce(Option<Resource>) -> Change,
    ) -> Result<(), BenchError> {
        // One lookup, as the engine's tree descends once.
        use std::collections::btree_map::Entry;
        match self.resources[kind.index()].entry(id) {
            Entry::Vacant(slot) => {
                if let Change::Set(r) = f(None) {
                    slot.insert(r);
                }
            }
            Entry::Occupied(mut slot) => match f(Some(*slot.get())) {
                Change::Keep => {}
                Change::Set(r) => *slot.get_mut() = r,
                Change::Remove => drop(slot.remove()),
            },
        }
        Ok(())
    }

    fn customer(&mut self, id: u64) -> Result<Option<Vec<ReservationInfo>>, BenchError> {
        Ok(self.customers.get(&id).cloned())
    }

    fn update_customer(
        &mut self,
        id: u64,
        f: impl FnOnce(&mut Vec<ReservationInfo>, bool) -> bool,
    ) -> Result<(), BenchError> {
        // One lookup, as the engine's tree descends once.
        use std::collections::btree_map::Entry;
        match self.customers.entry(id) {
            Entry::Vacant(slot) => {
                let mut infos = Vec::new();
                if f(&mut infos, false) {
                    slot.insert(infos);
                }
            }
            Entry::Occupied(mut slot) => {
                // The list is changed in place; what `f` returns does not matter here.
                f(slot.get_mut(), true);
            }
        }
        Ok(())
    }

    fn remove_customer(&mut self, id: u64) -> Result<(), BenchError> {
        self.customers.remove(&id);
        Ok(())
    }
}

/// The four trees of the parallel version.
#[derive(Clone, Copy, Debug)]
struct Tables {
    resources: [BTree; 3],
    customers: BTree,
}

/// [`Store`] over the engine's trees, inside one transaction.
struct TxStore<'a, 'b, C: Clock> {
    tx: &'a mut Tx<'b, C>,
    tables: Tables,
}

impl<C: Clock> Store for TxStore<'_, '_, C> {
    fn resource(&mut self, kind: ResourceKind, id: u64) -> Result<Option<Resource>, BenchError> {
        let tree = self.tables.resources[kind.index()];
        // Decoded in place: no copy of the value.
        tree.get_with(self.tx, &id.to_be_bytes(), |v| Resource::decode(kind, id, v))?.transpose()
    }

    fn update_resource(
        &mut self,
        kind: ResourceKind,
        id: u64,
        f: impl FnOnce(Option<Resource>) -> Change,
    ) -> Result<(), BenchError> {
        let tree = self.tables.resources[kind.index()];
        let mut bad = None;
        tree.update(self.tx, &id.to_be_bytes(), |old| {
            let old = match old.map(|v| Resource::decode(kind, id, v)).transpose() {
                Ok(old) => old,
                Err(e) => {
                    bad = Some(e);
                    return Edit::Keep;
                }
            };
            match f(old) {
                Change::Keep => Edit::Keep,
                Change::Set(r) => Edit::Set(r.encode().to_vec()),
                Change::Remove => Edit::Remove,
            }
        })?;
        bad.map_or(Ok(()), Err)
    }

    fn customer(&mut self, id: u64) -> Result<Option<Vec<ReservationInfo>>, BenchError> {
        match self.tables.customers.get(self.tx, &id.to_be_bytes())? {
            Some(v) => Ok(Some(decode_infos(id, &v)?)),
            None => Ok(None),
        }
    }

    fn update_customer(
        &mut self,
        id: u64,
        f: impl FnOnce(&mut Vec<ReservationInfo>, bool) -> bool,
    ) -> Result<(), BenchError> {
        let mut bad = None;
        self.tables.customers.update(self.tx, &id.to_be_bytes(), |old| {
            let mut infos = match old.map(|v| decode_infos(id, v)).transpose() {
                Ok(infos) => infos,
                Err(e) => {
                    bad = Some(e);
                    return Edit::Keep;
                }
            };
            let exists = infos.is_some();
            let list = infos.get_or_insert_with(Vec::new);
            if f(list, exists) { Edit::Set(encode_infos(list)) } else { Edit::Keep }
        })?;
        bad.map_or(Ok(()), Err)
    }

    fn remove_customer(&mut self, id: u64) -> Result<(), BenchError> {
        self.tables.customers.remove(self.tx, &id.to_be_bytes())?;
        Ok(())
    }
}

/// `r` with `delta` units added (or removed) and, if given, the new price: the change STAMP's
/// `manager_add*` makes, or `None` when it does not apply (fewer than `-delta` units free). A
/// resource left with no unit is removed.
fn adjusted(mut r: Resource, delta: i64, price: Option<u64>) -> Option<Change> {
    let free = r.free.checked_add_signed(delta)?;
    r.free = free;
    r.total = r.used + free;
    if r.total == 0 {
        return Some(Change::Remove);
    }
    if let Some(price) = price {
        r.price = price;
    }
    Some(Change::Set(r))
}

/// STAMP's `manager_add*`: `delta` units at `price` (`None`: keep the price). Returns whether it
/// applied.
fn add_resource<S: Store>(
    s: &mut S,
    kind: ResourceKind,
    id: u64,
    delta: i64,
    price: Option<u64>,
) -> Result<bool, BenchError> {
    let mut applied = false;
    s.update_resource(kind, id, |r| {
        let change = match (r, price) {
            (None, Some(price)) if delta >= 1 => {
                let n = delta.unsigned_abs();
                Some(Change::Set(Resource { used: 0, free: n, total: n, price }))
            }
            (None, _) => None,
            (Some(r), _) => adjusted(r, delta, price),
        };
        applied = change.is_some();
        change.unwrap_or(Change::Keep)
    })?;
    Ok(applied)
}

/// STAMP's `manager_reserve` on a customer's side: adds a reservation of `(kind, id)` at
/// `price` to `infos` unless nothing is free or the customer already holds it. Returns whether
/// it was added (the caller then takes the unit from the resource).
fn reserve_info(
    infos: &mut Vec<ReservationInfo>,
    kind: ResourceKind,
    id: u64,
    price: u64,
    free: u64,
) -> bool {
    match infos.binary_search_by_key(&(kind, id), |i| (i.kind, i.id)) {
        Err(pos) if free > 0 => {
            infos.insert(pos, ReservationInfo { kind, id, price });
            true
        }
        _ => false,
    }
}

/// One client task (STAMP `client_run`'s body between `TM_BEGIN` and `TM_END`).
fn perform<S: Store>(s: &mut S, task: &Task) -> Result<(), BenchError> {
    match task {
        Task::Reserve { customer, queries } => {
            // The most expensive resource queried of each kind: (price, id, units free).
            let mut best: [Option<(u64, u64, u64)>; 3] = [None; 3];
            for &(kind, id) in queries {
                if let Some(r) = s.resource(kind, id)? {
                    let slot = &mut best[kind.index()];
                    if slot.is_none_or(|(price, _, _)| r.price > price) {
                        *slot = Some((r.price, id, r.free));
                    }
                }
            }
            if best.iter().all(Option::is_none) {
                return Ok(());
            }
            // STAMP adds a missing customer, then reserves each kind for it: a unit is taken
            // when one is free and the customer does not hold the resource yet. The query
            // above read each chosen resource in this transaction, and nothing has written it
            // since, so its `free` decides: the customer's list is read and written in one
            // step (one tree descent, `Store::update_customer`), then the units are taken —
            // one transaction, so the same state as STAMP's order.
            let mut taken = [None; 3];
            s.update_customer(*customer, |infos, exists| {
                let mut changed = !exists;
                for (kind, slot) in ResourceKind::ALL.into_iter().zip(&mut taken) {
                    if let Some((price, id, free)) = best[kind.index()]
                        && reserve_info(infos, kind, id, price, free)
                    {
                        *slot = Some(id);
                        changed = true;
                    }
                }
                changed
            })?;
            for (kind, id) in ResourceKind::ALL.into_iter().zip(taken) {
                let Some(id) = id else { continue };
                let mut took = false;
                s.update_resource(kind, id, |r| match r {
                    Some(mut r) if r.free > 0 => {
                        took = true;
                        r.used += 1;
                        r.free -= 1;
                        Change::Set(r)
                    }
                    _ => Change::Keep,
                })?;
                if !took {
                    return Err(BenchError::Inconsistent(format!(
                        "{kind:?} {id} had a unit free when queried and none when reserved \
                         in the same transaction"
                    )));
                }
            }
        }
        Task::DeleteCustomer { customer } => {
            if let Some(infos) = s.customer(*customer)? {
                for info in &infos {
                    let mut held = false;
                    s.update_resource(info.kind, info.id, |r| match r {
                        Some(mut r) if r.used > 0 => {
                            held = true;
                            r.used -= 1;
                            r.free += 1;
                            Change::Set(r)
                        }
                        _ => Change::Keep,
                    })?;
                    if !held {
                        return Err(BenchError::Inconsistent(format!(
                            "customer {customer} holds {:?} {}, which has no unit in use",
                            info.kind, info.id
                        )));
                    }
                }
                s.remove_customer(*customer)?;
            }
        }
        Task::UpdateTables { updates } => {
            let units = UPDATE_UNITS as i64;
            for &(kind, id, op) in updates {
                match (op, kind) {
                    (UpdateOp::Add { price }, _) => {
                        add_resource(s, kind, id, units, Some(price))?;
                    }
                    (UpdateOp::Delete, ResourceKind::Flight) => {
                        // Only a flight with no seat in use is deleted, all its seats at once.
                        s.update_resource(kind, id, |r| match r {
                            Some(r) if r.used == 0 => {
                                adjusted(r, -(r.total as i64), None).unwrap_or(Change::Keep)
                            }
                            _ => Change::Keep,
                        })?;
                    }
                    (UpdateOp::Delete, _) => {
                        add_resource(s, kind, id, -units, None)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// The STAMP vacation kernel.
#[derive(Clone, Copy, Debug, Default)]
pub struct Vacation;

/// The `t`-th of `parts` contiguous chunks of `0..len`.
fn chunk(len: usize, parts: usize, t: usize) -> std::ops::Range<usize> {
    (len * t / parts)..(len * (t + 1) / parts)
}

impl Kernel for Vacation {
    const NAME: &'static str = "vacation";
    type Params = VacationParams;
    type Input = VacationInput;
    type Output = VacationState;

    /// "vacation-low"-like small (`-n2 -q90 -u98 -r16384`) and "vacation-high"-like medium
    /// (`-n4 -q60 -u90 -r32768`), each with `-t = 4 × r` as STAMP's non-simulator inputs have;
    /// large is the standard "vacation-high" `-n4 -q60 -u90 -r1048576 -t4194304`.
    fn params(size: Size) -> VacationParams {
        match size {
            Size::Small => VacationParams {
                queries_per_task: 2,
                query_percent: 90,
                user_percent: 98,
                relations: 16_384,
                tasks: 65_536,
            },
            Size::Medium => VacationParams {
                queries_per_task: 4,
                query_percent: 60,
                user_percent: 90,
                relations: 32_768,
                tasks: 131_072,
            },
            Size::Large => VacationParams {
                queries_per_task: 4,
                query_percent: 60,
                user_percent: 90,
                relations: 1_048_576,
                tasks: 4_194_304,
            },
        }
    }

    fn validate(p: &VacationParams) -> Result<(), BenchError> {
        if !(1..=QUERIES_MAX).contains(&p.queries_per_task) {
            return Err(out_of_range("queries_per_task", p.queries_per_task, "1..=1024"));
        }
        if !(1..=100).contains(&p.query_percent) {
            return Err(out_of_range("query_percent", p.query_percent, "1..=100"));
        }
        if p.user_percent > 100 {
            return Err(out_of_range("user_percent", p.user_percent, "0..=100"));
        }
        if !(1..=RELATIONS_MAX).contains(&p.relations) {
            return Err(out_of_range("relations", p.relations, "1..=16777216"));
        }
        if !(1..=TASKS_MAX).contains(&p.tasks) {
            return Err(out_of_range("tasks", p.tasks, "1..=67108864"));
        }
        Ok(())
    }

    fn generate(p: &VacationParams, seed: u64) -> Result<VacationInput, BenchError> {
        Self::validate(p)?;
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut draw = |n: u64| rng.random_range(0..n);
        let initial = std::array::from_fn(|_| {
            (0..p.relations)
                .map(|_| ((draw(5) + 1) * UPDATE_UNITS, PRICES[draw(5) as usize]))
                .collect()
        });
        let range = p.query_range();
        let n = u64::from(p.queries_per_task);
        let kind = |d: u64| ResourceKind::ALL[d as usize];
        let tasks = (0..p.tasks)
            .map(|_| {
                let r = draw(100);
                if r < u64::from(p.user_percent) {
                    let count = draw(n) + 1;
                    let customer = draw(range) + 1;
                    let queries = (0..count).map(|_| (kind(draw(3)), draw(range) + 1)).collect();
                    Task::Reserve { customer, queries }
                } else if r & 1 == 1 {
                    Task::DeleteCustomer { customer: draw(range) + 1 }
                } else {
                    let count = draw(n) + 1;
                    let updates = (0..count)
                        .map(|_| {
                            let k = kind(draw(3));
                            let id = draw(range) + 1;
                            let op = if draw(2) == 1 {
                                UpdateOp::Add { price: PRICES[draw(5) as usize] }
                            } else {
                                UpdateOp::Delete
                            };
                            (k, id, op)
                        })
                        .collect();
                    Task::UpdateTables { updates }
                }
            })
            .collect();
        Ok(VacationInput { params: p.clone(), initial, tasks })
    }

    fn sequential(input: &VacationInput) -> VacationState {
        Self::sequential_timed(input).0
    }

    fn sequential_timed(input: &VacationInput) -> (VacationState, f64) {
        let mut state = initial_state(input);
        let start = Instant::now();
        for task in &input.tasks {
            if let Err(e) = perform(&mut state, task) {
                state.problems.push(e.to_string());
            }
        }
        (state, start.elapsed().as_secs_f64())
    }

    fn parallel<C: Clock + Send + Sync + 'static>(
        db: &Ordo<C>,
        input: &VacationInput,
        threads: usize,
    ) -> Result<VacationState, BenchError> {
        Ok(Self::parallel_timed(db, input, threads)?.0)
    }

    fn parallel_timed<C: Clock + Send + Sync + 'static>(
        db: &Ordo<C>,
        input: &VacationInput,
        threads: usize,
    ) -> Result<(VacationState, f64), BenchError> {
        if threads == 0 {
            return Err(BenchError::ZeroThreads);
        }
        let nodes = TreeOptions::with_node_bytes(NODE_BYTES);
        let tables = db.run(|tx| {
            let mut tree = || BTree::create_with(tx, nodes);
            Ok::<_, ordo::Error>(Tables {
                resources: [tree()?, tree()?, tree()?],
                customers: tree()?,
            })
        })?;
        let relations = input.params.relations as usize;
        // Load: each thread its own id range, LOAD_BATCH inserts per transaction.
        on_threads(threads, |t| {
            let ids: Vec<usize> = chunk(relations, threads, t).collect();
            for batch in ids.chunks(LOAD_BATCH) {
                db.run(|tx| {
                    for &i in batch {
                        let key = (i as u64 + 1).to_be_bytes();
                        for kind in ResourceKind::ALL {
                            let (total, price) = input.initial[kind.index()][i];
                            let r = Resource { used: 0, free: total, total, price };
                            tables.resources[kind.index()].insert(tx, &key, &r.encode())?;
                        }
                        tables.customers.insert(tx, &key, &[])?;
                    }
                    Ok::<_, ordo::Error>(())
                })?;
            }
            Ok(())
        })?;
        // Clients: each thread a contiguous chunk of the tasks, one transaction per task. The
        // timed region, as STAMP's.
        let start = Instant::now();
        on_threads(threads, |t| {
            for task in &input.tasks[chunk(input.tasks.len(), threads, t)] {
                db.run(|tx| perform(&mut TxStore { tx, tables }, task))?;
            }
            Ok(())
        })?;
        let elapsed_s = start.elapsed().as_secs_f64();
        Ok((read_state(db, tables)?, elapsed_s))
    }

    fn verify(
        input: &VacationInput,
        sequential: &VacationState,
        parallel: &VacationState,
    ) -> Result<(), BenchError> {
        check_state("sequential", input, sequential)?;
        check_state("parallel", input, parallel)
    }
}

fn initial_state(input: &VacationInput) -> VacationState {
    let mut state = VacationState::default();
    for kind in ResourceKind::ALL {
        state.resources[kind.index()] = input.initial[kind.index()]
            .iter()
            .enumerate()
            .map(|(i, &(total, price))| {
                (i as u64 + 1, Resource { used: 0, free: total, total, price })
            })
            .collect();
    }
    state.customers = (1..=u64::from(input.params.relations)).map(|id| (id, Vec::new())).collect();
    state
}

fn id_of(key: &[u8]) -> Result<u64, BenchError> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| {
        BenchError::Inconsistent(format!("a table key has {} bytes, not 8", key.len()))
    })?;
    Ok(u64::from_be_bytes(bytes))
}

/// Reads the four trees out in one read-only transaction.
fn read_state<C: Clock>(db: &Ordo<C>, tables: Tables) -> Result<VacationState, BenchError> {
    db.run(|tx| {
        let mut state = VacationState::default();
        for kind in ResourceKind::ALL {
            for (k, v) in tables.resources[kind.index()].entries(tx)? {
                let id = id_of(&k)?;
                state.resources[kind.index()].insert(id, Resource::decode(kind, id, &v)?);
            }
        }
        for (k, v) in tables.customers.entries(tx)? {
            let id = id_of(&k)?;
            state.customers.insert(id, decode_infos(id, &v)?);
        }
        Ok(state)
    })
}

/// Checks the invariants listed in the module docs; the error names the run (`label`), the
/// table and the id.
fn check_state(
    label: &str,
    input: &VacationInput,
    state: &VacationState,
) -> Result<(), BenchError> {
    let fail = |what: String| Err(BenchError::Inconsistent(format!("vacation ({label}): {what}")));
    if let Some(p) = state.problems.first() {
        return fail(format!("a task failed: {p}"));
    }
    let relations = u64::from(input.params.relations);
    // Per kind and id (`1..=relations`, index 0 unused): reservations held by customers. Dense
    // vectors, not maps: the large input has 3 M resources and 4 M tasks, and with maps and an
    // eagerly formatted label per row this check took longer than the timed run.
    let dense = || vec![0u64; input.params.relations as usize + 1];
    let mut held: [Vec<u64>; 3] = [dense(), dense(), dense()];
    for (&customer, infos) in &state.customers {
        if !(1..=relations).contains(&customer) {
            return fail(format!("customer id {customer} is outside 1..={relations}"));
        }
        for pair in infos.windows(2) {
            if (pair[0].kind, pair[0].id) >= (pair[1].kind, pair[1].id) {
                return fail(format!("customer {customer}: reservations not strictly sorted"));
            }
        }
        for info in infos {
            if !PRICES.contains(&info.price) {
                return fail(format!(
                    "customer {customer}: {:?} {} recorded at price {}",
                    info.kind, info.id, info.price
                ));
            }
            if !state.resources[info.kind.index()].contains_key(&info.id) {
                return fail(format!(
                    "customer {customer} holds {:?} {}, which does not exist",
                    info.kind, info.id
                ));
            }
            if !(1..=relations).contains(&info.id) {
                return fail(format!(
                    "customer {customer} holds {:?} {}, outside 1..={relations}",
                    info.kind, info.id
                ));
            }
            held[info.kind.index()][info.id as usize] += 1;
        }
    }
    for kind in ResourceKind::ALL {
        for (&id, r) in &state.resources[kind.index()] {
            let at = format_args!("{kind:?} {id}");
            if !(1..=relations).contains(&id) {
                return fail(format!("{at}: id outside 1..={relations}"));
            }
            if r.used.checked_add(r.free) != Some(r.total) {
                return fail(format!(
                    "{at}: used {} + free {} != total {}",
                    r.used, r.free, r.total
                ));
            }
            if r.total == 0 || r.total % UPDATE_UNITS != 0 {
                return fail(format!("{at}: total {} is not a positive multiple of 100", r.total));
            }
            if !PRICES.contains(&r.price) {
                return fail(format!("{at}: price {}", r.price));
            }
            // In range: checked above.
            let by_customers = held[kind.index()][id as usize];
            if r.used != by_customers {
                return fail(format!(
                    "{at}: used {} but customers hold {by_customers} reservations",
                    r.used
                ));
            }
        }
    }
    // Untouched rows are as loaded. (Generated ids are in `1..=relations`; one that is not
    // marks nothing, and the rows it names are then checked as untouched.)
    let flags = || vec![false; input.params.relations as usize + 1];
    let mut touched: [Vec<bool>; 3] = [flags(), flags(), flags()];
    let mut touched_customers = flags();
    let touch = |flags: &mut Vec<bool>, id: u64| {
        if (1..=relations).contains(&id) {
            flags[id as usize] = true;
        }
    };
    for task in &input.tasks {
        match task {
            Task::Reserve { customer, queries } => {
                touch(&mut touched_customers, *customer);
                for &(kind, id) in queries {
                    touch(&mut touched[kind.index()], id);
                }
            }
            Task::DeleteCustomer { customer } => touch(&mut touched_customers, *customer),
            Task::UpdateTables { updates } => {
                for &(kind, id, _) in updates {
                    touch(&mut touched[kind.index()], id);
                }
            }
        }
    }
    for kind in ResourceKind::ALL {
        for (i, &(total, price)) in input.initial[kind.index()].iter().enumerate() {
            let id = i as u64 + 1;
            if touched[kind.index()].get(i + 1).copied().unwrap_or(false) {
                continue;
            }
            let want = Resource { used: 0, free: total, total, price };
            let got = state.resources[kind.index()].get(&id);
            if got != Some(&want) {
                return fail(format!("{kind:?} {id}: no task touches it, yet it is {got:?}"));
            }
        }
    }
    for id in 1..=relations {
        if !touched_customers[id as usize] && state.customers.get(&id).is_none_or(|c| !c.is_empty())
        {
            return fail(format!("customer {id}: no task touches it, yet it is not as loaded"));
        }
    }
    Ok(())
}
