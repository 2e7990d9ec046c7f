//! Cycle searches, from the most specific anomaly to the least (Elle §4.4).
//!
//! Deciding whether a model is violated is linear: serializability asks whether the graph
//! over `ww ∪ wr ∪ rw` (plus `rt` for strictness) has a cycle; snapshot isolation asks whether
//! it has a cycle in which no two `rw` edges are adjacent — the characterisation of SI by
//! Cerone and Gotsman, and what Elle checks as G0, G1c, G-single and G-nonadjacent. That
//! second question is again plain cycle detection, on the two-copies view of
//! [`Csr::nonadjacent_rw`].
//!
//! Why closed walks suffice for SI: give every transaction its snapshot time `s` and commit
//! time `c > s`. Under SI a `ww`, `wr` or (strict) `rt` edge `A → B` implies `c_A ≤ s_B`, and
//! an `rw` edge `A → B` implies `s_A < c_B`. A non-`rw` edge thus raises `c`; a non-`rw` edge
//! followed by an `rw` edge raises it too (`c_A ≤ s_B < c_C`). A closed walk with no two
//! adjacent `rw` edges splits into such steps and would raise `c` all the way round to where it
//! started — impossible. So such a walk (not only a simple cycle) is a proof of violation.
//!
//! Once a violation is known, the search looks for the most specific witness to report:
//! `ww` only (G0), then `ww ∪ wr` (G1c), then exactly one `rw` edge (G-single), then
//! non-adjacent `rw` edges (G-nonadjacent), then anything (G2). The G-single search is the
//! one that is not linear — it asks, for each `rw` edge `a → b`, whether `b` reaches `a`
//! without `rw` edges — so it first tries edges whose ends share a component of the
//! `rw`-free graph (always a hit), then the others whose topological positions allow it,
//! closest first, searching only between the two positions and under a fixed work budget
//! ([`SINGLE_RW_VISITS_MAX`]). Running out of budget only makes the report less specific; the
//! verdict was already decided.

use crate::graph::{
    Csr, EdgeKind, EdgeRef, Graph, Kinds, shortest_cycle_through, shortest_path, tarjan, view_node,
};
use crate::history::Txn;
use crate::violation::{Anomaly, Cycle, CycleStep};

/// Arc visits the G-single search may spend on `rw` edges whose ends are not already in one
/// component of the `rw`-free graph.
pub(crate) const SINGLE_RW_VISITS_MAX: usize = 20_000_000;

/// A cycle as the graph edges it follows, in order.
pub(crate) type Walk = Vec<EdgeRef>;

/// A shortest-found cycle using only edges of `kinds`.
pub(crate) fn any_cycle(g: &Graph, kinds: Kinds) -> Option<Walk> {
    let csr = Csr::filtered(g, kinds);
    let comps = tarjan(&csr);
    let start = comps.first_cyclic()?;
    shortest_cycle_through(&csr, &comps, start)
}

/// A closed walk over `kinds ∪ {rw}` in which no two `rw` edges are adjacent.
pub(crate) fn nonadjacent_cycle(g: &Graph, kinds: Kinds) -> Option<Walk> {
    let csr = Csr::nonadjacent_rw(g, kinds);
    let comps = tarjan(&csr);
    let start = comps.first_cyclic()?;
    debug_assert!(view_node(&csr, start) < g.len());
    shortest_cycle_through(&csr, &comps, start)
}

/// A cycle over `kinds ∪ {rw}` with exactly one `rw` edge, if one is found within the budget.
pub(crate) fn single_rw_cycle(g: &Graph, kinds: Kinds) -> Option<Walk> {
    let base = kinds.without(Kinds::RW);
    let full = Csr::filtered(g, base.with(Kinds::RW));
    let full_comps = tarjan(&full);
    let free = Csr::filtered(g, base);
    let free_comps = tarjan(&free);

    // `rw` edges on some cycle of the full view.
    let candidates: Vec<(EdgeRef, usize)> = (0..g.len())
        .flat_map(|a| {
            g.edges(a).iter().enumerate().map(move |(index, e)| (EdgeRef { from: a, index }, *e))
        })
        .filter(|(r, e)| e.kind == EdgeKind::Rw && full_comps.comp[r.from] == full_comps.comp[e.to])
        .map(|(r, e)| (r, e.to))
        .collect();

    let close = |rw: EdgeRef, path: Walk| {
        let mut walk = Vec::with_capacity(path.len() + 1);
        walk.push(rw);
        walk.extend(path);
        walk
    };
    // Ends in one rw-free component: a path back exists inside that component.
    for &(rw, b) in &candidates {
        let c = free_comps.comp[rw.from];
        if free_comps.comp[b] == c {
            let mut unlimited = usize::MAX;
            let path =
                shortest_path(&free, b, rw.from, |v| free_comps.comp[v] == c, &mut unlimited);
            debug_assert!(path.is_some());
            if let Some(path) = path {
                return Some(close(rw, path));
            }
        }
    }
    // Others: `b` must reach `a` through distinct rw-free components. Tarjan numbers
    // components in reverse topological order (an edge between components goes from a larger
    // number to a smaller one), so `b` can reach `a` only if its number is not smaller, and
    // only through components numbered between the two. Closest pairs first: they are the
    // cheapest searches and give the shortest cycles.
    let mut remote: Vec<(usize, EdgeRef, usize)> = candidates
        .iter()
        .map(|&(rw, b)| (free_comps.comp[b], free_comps.comp[rw.from], rw, b))
        .filter(|&(cb, ca, _, _)| cb > ca)
        .map(|(cb, ca, rw, b)| (cb - ca, rw, b))
        .collect();
    remote.sort_by_key(|&(gap, rw, _)| (gap, rw.from, rw.index));
    let mut budget = SINGLE_RW_VISITS_MAX;
    for (_, rw, b) in remote {
        let (ca, cb) = (free_comps.comp[rw.from], free_comps.comp[b]);
        let within = |v: usize| (ca..=cb).contains(&free_comps.comp[v]);
        if let Some(path) = shortest_path(&free, b, rw.from, within, &mut budget) {
            return Some(close(rw, path));
        }
        if budget == 0 {
            break;
        }
    }
    None
}

/// Names a walk's anomaly and prints its steps and transactions.
///
/// The walk is rotated to start at its smallest transaction, so a cycle reads the same however
/// it was found.
pub(crate) fn describe(g: &Graph, txns: &[Txn], walk: &[EdgeRef]) -> Cycle {
    let start = (0..walk.len()).min_by_key(|&i| walk[i].from).unwrap_or(0);
    let walk: Vec<EdgeRef> = walk[start..].iter().chain(&walk[..start]).copied().collect();
    let steps: Vec<CycleStep> = walk
        .iter()
        .map(|&r| {
            let e = g.edge(r);
            CycleStep { from: txns[r.from].id, kind: e.kind, key: e.key, to: txns[e.to].id }
        })
        .collect();
    let kinds: Vec<EdgeKind> = steps.iter().map(|s| s.kind).collect();
    let realtime = kinds.contains(&EdgeKind::Rt);
    let rw = kinds.iter().filter(|&&k| k == EdgeKind::Rw).count();
    let adjacent_rw = (0..kinds.len())
        .any(|i| kinds[i] == EdgeKind::Rw && kinds[(i + 1) % kinds.len()] == EdgeKind::Rw);
    let anomaly = match rw {
        0 if kinds.contains(&EdgeKind::Wr) => Anomaly::G1c,
        0 => Anomaly::G0,
        1 => Anomaly::GSingle,
        _ if adjacent_rw => Anomaly::G2,
        _ => Anomaly::GNonadjacent,
    };
    let mut members: Vec<usize> = Vec::with_capacity(walk.len());
    for r in &walk {
        if !members.contains(&r.from) {
            members.push(r.from);
        }
    }
    Cycle { anomaly, realtime, steps, txns: members.into_iter().map(|i| txns[i].clone()).collect() }
}
