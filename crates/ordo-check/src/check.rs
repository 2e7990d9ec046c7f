//! The checks: one consistency model each, as a scope, a set of edges and a cycle rule.
//!
//! | check | nodes | edges | forbidden cycles |
//! |---|---|---|---|
//! | [`check_serializable`] | committed | `ww wr rw` | any |
//! | [`check_strict_serializable`] | committed | `ww wr rw rt` | any |
//! | [`check_opacity`] | every attempt (uncommitted ones read-only) | `ww wr rw rt` | any |
//! | [`check_snapshot_isolation`] | committed | `ww wr rw` | those without two adjacent `rw` |
//! | [`check_strict_snapshot_isolation`] | committed | `ww wr rw rt` | those without two adjacent `rw` |
//!
//! Every check first rejects what single reads show (garbage, G1a, G1b, internal
//! inconsistency, incompatible list orders, contradictory version tags; see `infer.rs`), then
//! decides on cycles in linear time, and only when there is a violation spends more effort to
//! report its most specific form (`search.rs`): first without real-time edges, then with them,
//! so a `-realtime` anomaly is reported only when real time is needed to close the cycle.
//!
//! Opacity (FaRMv2 §3) is strict serializability of every attempt: an aborted attempt must
//! also have read one consistent snapshot taken inside its real-time span. Its reads are kept,
//! its writes dropped, and G1a applies to it as to a committed reader.

use crate::graph::Kinds;
use crate::history::History;
use crate::infer::{Scope, infer};
use crate::search::{any_cycle, describe, nonadjacent_cycle, single_rw_cycle};
use crate::violation::Violation;

/// A consistency model a history can be checked against; see [`check`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Consistency {
    /// [`check_serializable`].
    Serializable,
    /// [`check_strict_serializable`].
    StrictSerializable,
    /// [`check_opacity`].
    Opacity,
    /// [`check_snapshot_isolation`].
    SnapshotIsolation,
    /// [`check_strict_snapshot_isolation`].
    StrictSnapshotIsolation,
}

/// Checks `h` against `model`.
pub fn check(h: &History, model: Consistency) -> Result<(), Violation> {
    match model {
        Consistency::Serializable => check_serializable(h),
        Consistency::StrictSerializable => check_strict_serializable(h),
        Consistency::Opacity => check_opacity(h),
        Consistency::SnapshotIsolation => check_snapshot_isolation(h),
        Consistency::StrictSnapshotIsolation => check_strict_snapshot_isolation(h),
    }
}

/// Serializability: the committed transactions (and unknown ones whose writes were read) have
/// an equivalent serial order. Real time is ignored.
///
/// # Detects
///
/// G1a, G1b, garbage reads, internal inconsistency, incompatible list orders, and any
/// dependency cycle: G0, G1c, G-single, G-nonadjacent, G2.
pub fn check_serializable(h: &History) -> Result<(), Violation> {
    run(h, Scope::Committed, false, Rule::NoCycle)
}

/// Strict serializability: a serial order of the committed transactions that also respects
/// real time (a transaction that completed before another was invoked comes first).
///
/// # Detects
///
/// Everything [`check_serializable`] does, plus the same cycles closed through real-time
/// order (reported with a `-realtime` suffix, e.g. a stale read: `G-single-realtime`).
pub fn check_strict_serializable(h: &History) -> Result<(), Violation> {
    run(h, Scope::Committed, true, Rule::NoCycle)
}

/// Opacity: strict serializability in which every attempt, committed or not, takes part; an
/// aborted attempt counts as a read-only transaction that must have seen one consistent
/// snapshot at a point inside its real-time span.
///
/// # Detects
///
/// Everything [`check_strict_serializable`] does, for aborted attempts too: an aborted
/// attempt that read an aborted (G1a) or intermediate (G1b) value, or saw a torn snapshot
/// (part of a transaction's writes but not the rest: a cycle through the attempt).
pub fn check_opacity(h: &History) -> Result<(), Violation> {
    run(h, Scope::Attempts, true, Rule::NoCycle)
}

/// Snapshot isolation (Adya's PL-SI as characterised by Cerone and Gotsman): every committed
/// transaction read one snapshot and no two concurrent transactions wrote the same key.
/// Write skew (G2 with adjacent anti-dependencies) is allowed.
///
/// # Detects
///
/// G1a, G1b, garbage reads, internal inconsistency, incompatible list orders, G0, G1c,
/// G-single (read skew, lost update) and G-nonadjacent (long fork).
pub fn check_snapshot_isolation(h: &History) -> Result<(), Violation> {
    run(h, Scope::Committed, false, Rule::AdjacentAntiDependencies)
}

/// Strict (strong) snapshot isolation: snapshot isolation whose snapshots are taken no
/// earlier than the transaction's invocation, so a transaction sees every transaction that
/// completed before it was invoked.
///
/// # Detects
///
/// Everything [`check_snapshot_isolation`] does, plus the same cycles closed through
/// real-time order (e.g. a stale snapshot: `G-single-realtime`).
pub fn check_strict_snapshot_isolation(h: &History) -> Result<(), Violation> {
    run(h, Scope::Committed, true, Rule::AdjacentAntiDependencies)
}

/// Which cycles a model forbids.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Rule {
    /// Every cycle (serializability).
    NoCycle,
    /// Every cycle in which no two `rw` edges are adjacent (snapshot isolation).
    AdjacentAntiDependencies,
}

fn run(h: &History, scope: Scope, realtime: bool, rule: Rule) -> Result<(), Violation> {
    let graph = infer(h, scope, realtime)?;
    let g = &graph;
    let extra = if realtime { Kinds::RT } else { Kinds::NONE };
    let dependencies = Kinds::WW.with(Kinds::WR).with(extra);

    // The verdict, in linear time.
    let witness = match rule {
        Rule::NoCycle => any_cycle(g, dependencies.with(Kinds::RW)),
        Rule::AdjacentAntiDependencies => nonadjacent_cycle(g, dependencies),
    };
    let Some(witness) = witness else {
        return Ok(());
    };

    // The most specific report: without real time first, then with it.
    let stages: &[Kinds] = if realtime { &[Kinds::NONE, Kinds::RT] } else { &[Kinds::NONE] };
    for &rt in stages {
        let found = any_cycle(g, Kinds::WW.with(rt))
            .or_else(|| any_cycle(g, Kinds::WW.with(Kinds::WR).with(rt)))
            .or_else(|| single_rw_cycle(g, Kinds::WW.with(Kinds::WR).with(rt)))
            .or_else(|| nonadjacent_cycle(g, Kinds::WW.with(Kinds::WR).with(rt)))
            .or_else(|| match rule {
                Rule::NoCycle => any_cycle(g, Kinds::WW.with(Kinds::WR).with(Kinds::RW).with(rt)),
                Rule::AdjacentAntiDependencies => None,
            });
        if let Some(walk) = found {
            return Err(Violation::Cycle(describe(g, h.txns(), &walk)));
        }
    }
    Err(Violation::Cycle(describe(g, h.txns(), &witness)))
}
