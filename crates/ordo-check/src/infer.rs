//! From a history to a dependency graph: which transactions take part, what each one read
//! from outside itself, and the anomalies visible in single reads.
//!
//! # Roles
//!
//! A check looks at a history in one of two [`Scope`]s. Under [`Scope::Committed`]
//! (serializability, SI) the graph's nodes are the committed transactions plus the attempts of
//! unknown outcome whose writes somebody observed — a write that was read was installed, so
//! its writer committed (Elle does the same with `:info` operations). Under
//! [`Scope::Attempts`] (opacity) every other attempt joins as a *read-only* node: its reads
//! constrain it like any reader's, but its writes were never installed, so it gets no `ww`
//! edges and no outgoing `wr` edges. Every attempt therefore has a [`Role`].
//!
//! # External reads
//!
//! A transaction's reads of its own writes say nothing about other transactions; they are
//! checked for internal consistency here and then dropped. What is left of a read is its
//! *external* part: for a list, the read minus the transaction's own appends at its end; for
//! a register, a read with no earlier write of the key by the same transaction. Internal
//! consistency also demands that two external reads of one key in one transaction agree (all
//! checked models read from a single snapshot).
//!
//! # Single-read anomalies, checked before any graph is built
//!
//! For every external read by a node of the graph: each value must have a writer (else a
//! garbage read), that writer must not have aborted (G1a), and the read must not show an
//! intermediate state of its writer (G1b). Once these hold, every value a node read was
//! written by another node, which the version-order inference (`list.rs`, `register.rs`)
//! relies on.

use rustc_hash::FxHashMap;

use crate::graph::Graph;
use crate::history::{History, Op, Outcome, Txn};
use crate::violation::{Model, Violation};
use crate::{list, realtime, register};

/// Which attempts a check looks at.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Committed transactions (and unknown ones whose writes were observed).
    Committed,
    /// Every attempt; those not committed take part with their reads only.
    Attempts,
}

/// How an attempt takes part in a check.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// Not part of the graph.
    Excluded,
    /// Its reads count, its writes were never installed.
    ReadOnly,
    /// Its reads and its writes count.
    Full,
}

/// The external part of one list read.
#[derive(Debug)]
pub(crate) struct ListRead<'h> {
    pub(crate) txn: usize,
    pub(crate) key: u64,
    pub(crate) prefix: &'h [u64],
}

/// One external register read.
#[derive(Debug)]
pub(crate) struct RegisterRead {
    pub(crate) txn: usize,
    pub(crate) key: u64,
    pub(crate) seen: Option<u64>,
    pub(crate) version: Option<u64>,
}

/// Who wrote one value.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Writer {
    pub(crate) txn: usize,
    /// Whether it is the writer's last write to the key.
    pub(crate) is_final: bool,
    /// The writer's next write (append) to the same key, if any.
    pub(crate) next: Option<u64>,
    /// The writer's previous write (append) to the same key, if any.
    pub(crate) prev: Option<u64>,
    /// For a register: the version tag of the write.
    pub(crate) version: Option<u64>,
}

/// Every write of the history, by `(key, value)`.
#[derive(Debug, Default)]
pub(crate) struct Writes {
    pub(crate) list: FxHashMap<(u64, u64), Writer>,
    pub(crate) register: FxHashMap<(u64, u64), Writer>,
}

/// Everything the version-order inference works from.
#[derive(Debug)]
pub(crate) struct Facts<'h> {
    pub(crate) txns: &'h [Txn],
    pub(crate) roles: Vec<Role>,
    pub(crate) writes: Writes,
    /// External list reads by graph nodes, in history order.
    pub(crate) list_reads: Vec<ListRead<'h>>,
    /// External register reads by graph nodes, in history order.
    pub(crate) register_reads: Vec<RegisterRead>,
}

impl Facts<'_> {
    /// A copy of attempt `i` for a report.
    pub(crate) fn violation_txn(&self, i: usize) -> Box<Txn> {
        Box::new(self.txns[i].clone())
    }
}

/// Builds the dependency graph (with real-time edges if `realtime`), or reports the first
/// anomaly found on the way.
pub(crate) fn infer(h: &History, scope: Scope, realtime: bool) -> Result<Graph, Violation> {
    let txns = h.txns();
    validate(txns)?;
    let writes = index_writes(txns)?;
    let mut scans: Vec<Scan<'_>> =
        txns.iter().enumerate().map(|(i, t)| scan(i, t, &writes)).collect();
    let roles = assign_roles(txns, scope, &scans, &writes);

    let mut list_reads = Vec::new();
    let mut register_reads = Vec::new();
    for (i, s) in scans.iter_mut().enumerate() {
        if roles[i] == Role::Excluded {
            continue;
        }
        if let Some(reason) = s.internal.take() {
            return Err(Violation::Internal { txn: Box::new(txns[i].clone()), reason });
        }
        list_reads.append(&mut s.lists);
        register_reads.append(&mut s.registers);
    }
    let facts = Facts { txns, roles, writes, list_reads, register_reads };
    check_reads(&facts)?;

    let mut graph = Graph::new(txns.len());
    list::infer(&facts, &mut graph)?;
    register::infer(&facts, &mut graph)?;
    if realtime {
        realtime::infer(txns, &facts.roles, &mut graph);
    }
    graph.seal();
    Ok(graph)
}

fn validate(txns: &[Txn]) -> Result<(), Violation> {
    let mut ids = FxHashMap::with_capacity_and_hasher(txns.len(), Default::default());
    for t in txns {
        if ids.insert(t.id, ()).is_some() {
            return Err(Violation::Malformed {
                reason: format!("transaction id {} is used twice", t.id),
            });
        }
        match (t.outcome, t.complete) {
            (Outcome::Committed | Outcome::Aborted, None) => {
                return Err(Violation::Malformed {
                    reason: format!("{} is {} but has no completion event", t.id, t.outcome),
                });
            }
            (_, Some(c)) if c <= t.invoke => {
                return Err(Violation::Malformed {
                    reason: format!(
                        "{} completes at event {c}, not after its invocation at event {}",
                        t.id, t.invoke
                    ),
                });
            }
            _ => {}
        }
    }
    Ok(())
}

fn index_writes(txns: &[Txn]) -> Result<Writes, Violation> {
    let mut writes = Writes::default();
    for (i, t) in txns.iter().enumerate() {
        let mut last_append: FxHashMap<u64, u64> = FxHashMap::default();
        let mut last_write: FxHashMap<u64, u64> = FxHashMap::default();
        for op in &t.ops {
            let (model, map, last, key, value, version) = match *op {
                Op::Append { key, value } => {
                    (Model::List, &mut writes.list, &mut last_append, key, value, None)
                }
                Op::WriteRegister { key, value, version } => {
                    (Model::Register, &mut writes.register, &mut last_write, key, value, version)
                }
                Op::ReadList { .. } | Op::ReadRegister { .. } => continue,
            };
            if let Some(first) = map.get(&(key, value)) {
                return Err(Violation::DuplicateWrite {
                    model,
                    key,
                    value,
                    first: Box::new(txns[first.txn].clone()),
                    second: Box::new(t.clone()),
                });
            }
            map.insert(
                (key, value),
                Writer { txn: i, is_final: true, next: None, prev: None, version },
            );
            if let Some(previous) = last.insert(key, value) {
                if let Some(w) = map.get_mut(&(key, previous)) {
                    w.is_final = false;
                    w.next = Some(value);
                }
                if let Some(w) = map.get_mut(&(key, value)) {
                    w.prev = Some(previous);
                }
            }
        }
    }
    Ok(writes)
}

/// Keeps the first internal inconsistency of a transaction.
fn note(s: &mut Scan<'_>, reason: String) {
    if s.internal.is_none() {
        s.internal = Some(reason);
    }
}

/// One transaction's external reads and its first internal inconsistency, if any.
#[derive(Debug, Default)]
struct Scan<'h> {
    lists: Vec<ListRead<'h>>,
    registers: Vec<RegisterRead>,
    internal: Option<String>,
}

fn scan<'h>(i: usize, t: &'h Txn, writes: &Writes) -> Scan<'h> {
    let mut s = Scan::default();
    let mut own_appends: FxHashMap<u64, Vec<u64>> = FxHashMap::default();
    let mut own_write: FxHashMap<u64, u64> = FxHashMap::default();
    let mut first_list: FxHashMap<u64, &'h [u64]> = FxHashMap::default();
    let mut first_register: FxHashMap<u64, Option<u64>> = FxHashMap::default();
    for op in &t.ops {
        match op {
            Op::Append { key, value } => own_appends.entry(*key).or_default().push(*value),
            Op::WriteRegister { key, value, .. } => {
                own_write.insert(*key, *value);
            }
            Op::ReadList { key, seen } => {
                let own = own_appends.get(key).map_or(&[][..], Vec::as_slice);
                if !seen.ends_with(own) {
                    note(
                        &mut s,
                        format!(
                            "read(list {key}) = {seen:?} does not end with the transaction's own appends {own:?}"
                        ),
                    );
                    continue;
                }
                let prefix = &seen[..seen.len() - own.len()];
                let appends_key =
                    t.ops.iter().any(|op| matches!(op, Op::Append { key: k, .. } if k == key));
                if let Some(e) = prefix.iter().find(|&&e| {
                    appends_key && writes.list.get(&(*key, e)).is_some_and(|w| w.txn == i)
                }) {
                    note(
                        &mut s,
                        format!(
                            "read(list {key}) = {seen:?} contains {e}, which the transaction appends only later"
                        ),
                    );
                    continue;
                }
                match first_list.get(key) {
                    Some(&first) if first != prefix => note(
                        &mut s,
                        format!(
                            "two reads of list {key} saw different states, {first:?} and {prefix:?} (a transaction reads one snapshot)"
                        ),
                    ),
                    Some(_) => {}
                    None => {
                        first_list.insert(*key, prefix);
                    }
                }
                s.lists.push(ListRead { txn: i, key: *key, prefix });
            }
            Op::ReadRegister { key, seen, version } => {
                if let Some(&own) = own_write.get(key) {
                    if *seen != Some(own) {
                        note(
                            &mut s,
                            format!(
                                "read(reg {key}) = {seen:?} after the transaction itself wrote {own}"
                            ),
                        );
                    }
                    continue;
                }
                if let Some(v) = seen
                    && writes.register.get(&(*key, *v)).is_some_and(|w| w.txn == i)
                {
                    note(
                        &mut s,
                        format!("read(reg {key}) = {v}, which the transaction writes only later"),
                    );
                    continue;
                }
                match first_register.get(key) {
                    Some(first) if first != seen => note(
                        &mut s,
                        format!(
                            "two reads of register {key} saw different values, {first:?} and {seen:?} (a transaction reads one snapshot)"
                        ),
                    ),
                    Some(_) => {}
                    None => {
                        first_register.insert(*key, *seen);
                    }
                }
                s.registers.push(RegisterRead {
                    txn: i,
                    key: *key,
                    seen: *seen,
                    version: *version,
                });
            }
        }
    }
    s
}

fn assign_roles(txns: &[Txn], scope: Scope, scans: &[Scan<'_>], writes: &Writes) -> Vec<Role> {
    // An attempt whose writes were observed by a reader of this scope took effect. Only
    // attempts of unknown outcome need the answer.
    let counts_as_reader =
        |r: usize| scope == Scope::Attempts || txns[r].outcome != Outcome::Aborted;
    let any_unknown = txns.iter().any(|t| t.outcome == Outcome::Unknown);
    let mut observed = vec![false; txns.len()];
    for (r, s) in scans.iter().enumerate() {
        if !any_unknown || !counts_as_reader(r) {
            continue;
        }
        for read in &s.lists {
            for e in read.prefix {
                if let Some(w) = writes.list.get(&(read.key, *e)) {
                    observed[w.txn] |= w.txn != r;
                }
            }
        }
        for read in &s.registers {
            if let Some(v) = read.seen
                && let Some(w) = writes.register.get(&(read.key, v))
            {
                observed[w.txn] |= w.txn != r;
            }
        }
    }
    txns.iter()
        .zip(observed)
        .map(|(t, observed)| match (t.outcome, observed, scope) {
            (Outcome::Committed, _, _) | (Outcome::Unknown, true, _) => Role::Full,
            (_, _, Scope::Attempts) => Role::ReadOnly,
            (_, _, Scope::Committed) => Role::Excluded,
        })
        .collect()
}

/// Garbage reads, G1a and G1b, for every external read by a graph node.
fn check_reads(f: &Facts<'_>) -> Result<(), Violation> {
    for read in &f.list_reads {
        for (pos, &value) in read.prefix.iter().enumerate() {
            let Some(w) = f.writes.list.get(&(read.key, value)) else {
                return Err(Violation::GarbageRead {
                    model: Model::List,
                    key: read.key,
                    value,
                    reader: f.violation_txn(read.txn),
                });
            };
            if f.txns[w.txn].outcome == Outcome::Aborted {
                return Err(Violation::AbortedRead {
                    model: Model::List,
                    key: read.key,
                    value,
                    reader: f.violation_txn(read.txn),
                    writer: f.violation_txn(w.txn),
                });
            }
            // A list shows all of a writer's appends to the key or none of them (they were
            // installed together); neighbours normally sit next to each other, so look further
            // only when they do not.
            let neighbours = [(w.prev, pos.checked_sub(1)), (w.next, Some(pos + 1))];
            for (other, at) in neighbours {
                let Some(other) = other else { continue };
                let adjacent = at.and_then(|at| read.prefix.get(at)) == Some(&other);
                if !adjacent && !read.prefix.contains(&other) {
                    return Err(Violation::IntermediateRead {
                        model: Model::List,
                        key: read.key,
                        value,
                        other,
                        reader: f.violation_txn(read.txn),
                        writer: f.violation_txn(w.txn),
                    });
                }
            }
        }
    }
    for read in &f.register_reads {
        let Some(value) = read.seen else { continue };
        let Some(w) = f.writes.register.get(&(read.key, value)) else {
            return Err(Violation::GarbageRead {
                model: Model::Register,
                key: read.key,
                value,
                reader: f.violation_txn(read.txn),
            });
        };
        if f.txns[w.txn].outcome == Outcome::Aborted {
            return Err(Violation::AbortedRead {
                model: Model::Register,
                key: read.key,
                value,
                reader: f.violation_txn(read.txn),
                writer: f.violation_txn(w.txn),
            });
        }
        if let Some(other) = w.next {
            return Err(Violation::IntermediateRead {
                model: Model::Register,
                key: read.key,
                value,
                other,
                reader: f.violation_txn(read.txn),
                writer: f.violation_txn(w.txn),
            });
        }
    }
    Ok(())
}
