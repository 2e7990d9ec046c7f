//! The dependency graph and the graph algorithms the checks need: Tarjan's strongly
//! connected components and breadth-first searches for short cycles and paths.
//!
//! # Shape
//!
//! Nodes are indices into [`History::txns`](crate::History::txns); a transaction left out of
//! a check simply has no edges. Edges carry a kind (Adya's `ww`, `wr`, `rw`, plus `rt` for
//! real-time order) and, for dependencies, the key that caused them, so a reported cycle can
//! say *why* each step exists. Self-edges are never stored (a transaction does not depend on
//! itself) and an edge `(from, to, kind)` is stored once, with the first key that produced it.
//!
//! # Searching
//!
//! Every check asks one question of one *view* of the graph: is there a cycle using only
//! certain edge kinds, possibly with a constraint on its `rw` edges? A view is materialised as
//! a compressed adjacency array ([`Csr`]) whose arcs point back at the graph edges they came
//! from. Some views have more nodes than the graph: the view for "no two adjacent `rw` edges"
//! has two copies of each transaction, one entered by a non-`rw` edge and one entered by an
//! `rw` edge (see [`Csr::nonadjacent_rw`]). A cycle exists in a view iff one of its strongly
//! connected components has two or more nodes (no view has self-loops); [`tarjan`] finds the
//! components in linear time without recursion, so 10⁵-transaction histories cannot overflow
//! the stack, and [`shortest_cycle_through`] then extracts a short witness by BFS inside one
//! component.

use std::collections::VecDeque;
use std::fmt;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// Why one transaction must be ordered before another.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// Write-write: the target installed the next version after the source's (of one key).
    Ww,
    /// Write-read: the target read a version the source wrote.
    Wr,
    /// Read-write (anti-dependency): the source read a version the target overwrote.
    Rw,
    /// Real time: the source completed before the target was invoked.
    Rt,
}

impl EdgeKind {
    const fn bit(self) -> u8 {
        match self {
            EdgeKind::Ww => 1,
            EdgeKind::Wr => 2,
            EdgeKind::Rw => 4,
            EdgeKind::Rt => 8,
        }
    }
}

impl fmt::Display for EdgeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EdgeKind::Ww => "ww",
            EdgeKind::Wr => "wr",
            EdgeKind::Rw => "rw",
            EdgeKind::Rt => "rt",
        })
    }
}

/// A set of edge kinds: which edges a view of the graph uses.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Kinds(u8);

impl Kinds {
    pub(crate) const WW: Kinds = Kinds(EdgeKind::Ww.bit());
    pub(crate) const WR: Kinds = Kinds(EdgeKind::Wr.bit());
    pub(crate) const RW: Kinds = Kinds(EdgeKind::Rw.bit());
    pub(crate) const RT: Kinds = Kinds(EdgeKind::Rt.bit());
    pub(crate) const NONE: Kinds = Kinds(0);

    pub(crate) const fn with(self, other: Kinds) -> Kinds {
        Kinds(self.0 | other.0)
    }

    pub(crate) const fn without(self, other: Kinds) -> Kinds {
        Kinds(self.0 & !other.0)
    }

    pub(crate) const fn contains(self, kind: EdgeKind) -> bool {
        self.0 & kind.bit() != 0
    }
}

/// One stored edge.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Edge {
    pub(crate) to: usize,
    pub(crate) kind: EdgeKind,
    /// The key that caused a dependency edge; `None` for real-time edges.
    pub(crate) key: Option<u64>,
}

/// Names one stored edge: the `index`-th edge out of node `from`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct EdgeRef {
    pub(crate) from: usize,
    pub(crate) index: usize,
}

/// The dependency graph over the attempts of one history.
///
/// Edges are pushed as inferred, duplicates included, and deduplicated once by
/// [`Graph::seal`]: sorting each node's short edge list is cheaper than probing a set of
/// millions of edges on every insertion.
#[derive(Debug)]
pub(crate) struct Graph {
    adj: Vec<Vec<Edge>>,
}

impl Graph {
    pub(crate) fn new(nodes: usize) -> Self {
        Self { adj: vec![Vec::new(); nodes] }
    }

    pub(crate) fn len(&self) -> usize {
        self.adj.len()
    }

    /// Adds `from -kind-> to` unless it is a self-edge.
    pub(crate) fn add(&mut self, from: usize, to: usize, kind: EdgeKind, key: Option<u64>) {
        debug_assert!(from < self.adj.len());
        debug_assert!(to < self.adj.len());
        if from == to {
            return;
        }
        self.adj[from].push(Edge { to, kind, key });
    }

    /// Keeps one edge per `(from, to, kind)`, the first one added (so its key is the first
    /// that caused the edge). Call once, after the last [`add`](Self::add).
    pub(crate) fn seal(&mut self) {
        for edges in &mut self.adj {
            // Stable: among equal (to, kind) the first added stays first.
            edges.sort_by_key(|e| (e.to, e.kind));
            edges.dedup_by_key(|e| (e.to, e.kind));
            edges.shrink_to_fit();
        }
    }

    pub(crate) fn edges(&self, from: usize) -> &[Edge] {
        &self.adj[from]
    }

    pub(crate) fn edge(&self, r: EdgeRef) -> Edge {
        self.adj[r.from][r.index]
    }

    /// Number of stored edges of one kind (tests and diagnostics).
    #[cfg(test)]
    pub(crate) fn count(&self, kind: EdgeKind) -> usize {
        self.adj.iter().flatten().filter(|e| e.kind == kind).count()
    }
}

/// A view of the graph as a compressed adjacency array.
#[derive(Debug)]
pub(crate) struct Csr {
    /// Arcs out of view node `v` are `first[v]..first[v + 1]`.
    first: Vec<usize>,
    to: Vec<usize>,
    /// The graph edge each arc stands for.
    label: Vec<EdgeRef>,
    /// The graph node each view node stands for.
    node: Vec<usize>,
}

impl Csr {
    /// The subgraph of edges whose kind is in `kinds`.
    pub(crate) fn filtered(g: &Graph, kinds: Kinds) -> Self {
        let mut csr = Csr::with_nodes(g.len());
        for v in 0..g.len() {
            for (index, e) in g.edges(v).iter().enumerate() {
                if kinds.contains(e.kind) {
                    csr.to.push(e.to);
                    csr.label.push(EdgeRef { from: v, index });
                }
            }
            csr.first.push(csr.to.len());
            csr.node.push(v);
        }
        csr
    }

    /// The view whose cycles are exactly the closed walks over `kinds ∪ {rw}` in which no two
    /// `rw` edges are adjacent (cyclically). View node `2v` is "`v`, entered by a non-`rw`
    /// edge", `2v + 1` is "`v`, entered by an `rw` edge"; a non-`rw` edge leads from both copies
    /// of its source to the first copy of its target, an `rw` edge only from the first copy of
    /// its source to the second copy of its target.
    pub(crate) fn nonadjacent_rw(g: &Graph, kinds: Kinds) -> Self {
        let kinds = kinds.without(Kinds::RW);
        let mut csr = Csr::with_nodes(2 * g.len());
        for v in 0..g.len() {
            for entered_by_rw in [false, true] {
                for (index, e) in g.edges(v).iter().enumerate() {
                    let target = if e.kind == EdgeKind::Rw {
                        if entered_by_rw {
                            continue;
                        }
                        2 * e.to + 1
                    } else if kinds.contains(e.kind) {
                        2 * e.to
                    } else {
                        continue;
                    };
                    csr.to.push(target);
                    csr.label.push(EdgeRef { from: v, index });
                }
                csr.first.push(csr.to.len());
                csr.node.push(v);
            }
        }
        csr
    }

    fn with_nodes(n: usize) -> Self {
        let mut first = Vec::with_capacity(n + 1);
        first.push(0);
        Csr { first, to: Vec::new(), label: Vec::new(), node: Vec::with_capacity(n) }
    }

    pub(crate) fn len(&self) -> usize {
        self.node.len()
    }

    fn arcs(&self, v: usize) -> std::ops::Range<usize> {
        self.first[v]..self.first[v + 1]
    }
}

/// Strongly connected components: `comp[v]` for every view node, and each component's size.
#[derive(Debug)]
pub(crate) struct Components {
    pub(crate) comp: Vec<usize>,
    pub(crate) size: Vec<usize>,
}

impl Components {
    /// The first view node (in index order) that lies on a cycle.
    pub(crate) fn first_cyclic(&self) -> Option<usize> {
        (0..self.comp.len()).find(|&v| self.size[self.comp[v]] > 1)
    }
}

/// Tarjan's algorithm, iterative.
pub(crate) fn tarjan(g: &Csr) -> Components {
    const UNSEEN: usize = usize::MAX;
    let n = g.len();
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut comp = vec![UNSEEN; n];
    let mut size: Vec<usize> = Vec::new();
    let mut next_index = 0;
    // (node, next arc to look at)
    let mut calls: Vec<(usize, usize)> = Vec::new();

    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root] = true;
        calls.push((root, g.first[root]));

        while let Some(&mut (v, ref mut arc)) = calls.last_mut() {
            if *arc < g.first[v + 1] {
                let w = g.to[*arc];
                *arc += 1;
                if index[w] == UNSEEN {
                    index[w] = next_index;
                    low[w] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    calls.push((w, g.first[w]));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let id = size.len();
                let mut members = 0;
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    comp[w] = id;
                    members += 1;
                    if w == v {
                        break;
                    }
                }
                size.push(members);
            }
        }
    }
    debug_assert!(comp.iter().all(|&c| c != UNSEEN));
    Components { comp, size }
}

/// The graph edges of a shortest cycle through view node `start` that stays inside `start`'s
/// component, or `None` if there is none.
pub(crate) fn shortest_cycle_through(
    g: &Csr,
    comps: &Components,
    start: usize,
) -> Option<Vec<EdgeRef>> {
    let c = comps.comp[start];
    let mut unlimited = usize::MAX;
    bfs(g, start, |w| comps.comp[w] == c, |w| w == start, &mut unlimited)
}

/// The graph edges of a shortest path from view node `from` to view node `to` through view
/// nodes accepted by `allowed`, spending at most `budget` arc visits (decremented).
pub(crate) fn shortest_path(
    g: &Csr,
    from: usize,
    to: usize,
    allowed: impl Fn(usize) -> bool,
    budget: &mut usize,
) -> Option<Vec<EdgeRef>> {
    if from == to {
        return Some(Vec::new());
    }
    bfs(g, from, allowed, |w| w == to, budget)
}

/// BFS from `start` over allowed nodes until an arc reaches a node accepted by `goal`; returns
/// the arcs' graph edges from `start` to that node.
fn bfs(
    g: &Csr,
    start: usize,
    allowed: impl Fn(usize) -> bool,
    goal: impl Fn(usize) -> bool,
    budget: &mut usize,
) -> Option<Vec<EdgeRef>> {
    // parent[w] = (arc into w, its source); present iff w was reached. A map, not a vector,
    // so a search costs what it visits, not the size of the view.
    let mut parent: FxHashMap<usize, (usize, usize)> = FxHashMap::default();
    let mut queue = VecDeque::new();
    queue.push_back(start);
    while let Some(v) = queue.pop_front() {
        for arc in g.arcs(v) {
            if *budget == 0 {
                return None;
            }
            *budget -= 1;
            let w = g.to[arc];
            if goal(w) {
                let mut path = vec![g.label[arc]];
                let mut u = v;
                while u != start {
                    let (into, source) = parent[&u];
                    path.push(g.label[into]);
                    u = source;
                }
                path.reverse();
                return Some(path);
            }
            if w != start && allowed(w) && !parent.contains_key(&w) {
                parent.insert(w, (arc, v));
                queue.push_back(w);
            }
        }
    }
    None
}

/// The graph node a view node stands for.
pub(crate) fn view_node(g: &Csr, v: usize) -> usize {
    g.node[v]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(n: usize, kind: EdgeKind) -> Graph {
        let mut g = Graph::new(n);
        for v in 0..n {
            g.add(v, (v + 1) % n, kind, Some(v as u64));
        }
        g
    }

    #[test]
    fn tarjan_finds_a_ring_and_bfs_walks_it() {
        let g = ring(5, EdgeKind::Ww);
        let csr = Csr::filtered(&g, Kinds::WW);
        let comps = tarjan(&csr);
        let start = comps.first_cyclic().expect("a ring is cyclic");
        let cycle = shortest_cycle_through(&csr, &comps, start).expect("cycle");
        assert_eq!(cycle.len(), 5);
        assert!(tarjan(&Csr::filtered(&g, Kinds::WR)).first_cyclic().is_none());
    }

    #[test]
    fn dag_has_no_cycle_and_deep_chains_do_not_overflow() {
        let mut g = Graph::new(200_000);
        for v in 0..199_999 {
            g.add(v, v + 1, EdgeKind::Wr, None);
        }
        assert!(tarjan(&Csr::filtered(&g, Kinds::WR)).first_cyclic().is_none());
        g.add(199_999, 0, EdgeKind::Ww, None);
        let all = Kinds::WR.with(Kinds::WW);
        assert!(tarjan(&Csr::filtered(&g, all)).first_cyclic().is_some());
    }

    #[test]
    fn duplicate_and_self_edges_are_dropped() {
        let mut g = Graph::new(2);
        g.add(0, 1, EdgeKind::Rw, Some(1));
        g.add(0, 1, EdgeKind::Rw, Some(2));
        g.add(1, 1, EdgeKind::Ww, Some(1));
        g.seal();
        assert_eq!(g.edges(0)[0].key, Some(1));
        assert_eq!(g.count(EdgeKind::Rw), 1);
        assert_eq!(g.count(EdgeKind::Ww), 0);
    }

    #[test]
    fn nonadjacent_view_separates_write_skew_from_long_fork() {
        // Write skew: 0 -rw-> 1 -rw-> 0 (adjacent anti-dependencies): no cycle in the view.
        let mut skew = Graph::new(2);
        skew.add(0, 1, EdgeKind::Rw, Some(1));
        skew.add(1, 0, EdgeKind::Rw, Some(2));
        let all = Kinds::WW.with(Kinds::WR);
        assert!(tarjan(&Csr::nonadjacent_rw(&skew, all)).first_cyclic().is_none());
        // Long fork: 0 -rw-> 1 -wr-> 2 -rw-> 3 -wr-> 0: a cycle in the view.
        let mut fork = Graph::new(4);
        fork.add(0, 1, EdgeKind::Rw, Some(1));
        fork.add(1, 2, EdgeKind::Wr, Some(2));
        fork.add(2, 3, EdgeKind::Rw, Some(3));
        fork.add(3, 0, EdgeKind::Wr, Some(4));
        let csr = Csr::nonadjacent_rw(&fork, all);
        let comps = tarjan(&csr);
        let start = comps.first_cyclic().expect("long fork is a nonadjacent cycle");
        let cycle = shortest_cycle_through(&csr, &comps, start).expect("cycle");
        assert_eq!(cycle.len(), 4);
    }
}
