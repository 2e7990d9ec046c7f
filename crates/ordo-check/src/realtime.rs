//! Real-time edges, without the quadratic blow-up (Elle §5.1's sweep).
//!
//! `A -rt-> B` holds iff `A` completed before `B` was invoked. Adding every such pair is
//! quadratic; the checks only need the *transitive closure* to be right, so it suffices to
//! link each transaction to the transactions that completed most recently before its
//! invocation. A sweep over the events in time order keeps that set, the **frontier**:
//!
//! * at `B`'s invocation, add `A -rt-> B` for every `A` in the frontier;
//! * at `B`'s completion, drop from the frontier every `A` that completed before `B`'s
//!   invocation (each reaches everything later through `B`), then add `B`.
//!
//! Invariant: every transaction that completed before the current event is either in the
//! frontier or has an `rt` path to a member that completed after it. Hence any `A` that
//! completed before `B`'s invocation reaches `B`. Conversely the members of the frontier
//! overlap pairwise (none completed before another was invoked), so they share an instant at
//! which they all ran: with sequential clients the frontier holds at most one transaction per
//! client, and the sweep adds `O(n · clients)` edges in `O(n log n + n · clients)` time.
//!
//! Events with equal numbers (possible in hand-written histories) are not ordered:
//! invocations at an instant are processed before completions at that instant. Attempts of
//! unknown outcome never complete in real time (they may take effect arbitrarily late), so
//! they receive edges but never enter the frontier.

use crate::graph::{EdgeKind, Graph};
use crate::history::Txn;
use crate::infer::Role;

/// Adds `rt` edges among the nodes of the graph (attempts whose role is not excluded).
pub(crate) fn infer(txns: &[Txn], roles: &[Role], g: &mut Graph) {
    // (event, 0 = invocation / 1 = completion, txn): sorting puts invocations first on ties.
    let mut events: Vec<(u64, u8, usize)> = Vec::with_capacity(2 * txns.len());
    for (i, t) in txns.iter().enumerate() {
        if roles[i] == Role::Excluded {
            continue;
        }
        events.push((t.invoke, 0, i));
        if let Some(c) = t.real_time_completion() {
            events.push((c, 1, i));
        }
    }
    events.sort_unstable();

    let mut frontier: Vec<usize> = Vec::new();
    for (_, kind, b) in events {
        if kind == 0 {
            for &a in &frontier {
                g.add(a, b, EdgeKind::Rt, None);
            }
        } else {
            let invoked = txns[b].invoke;
            frontier.retain(|&a| txns[a].real_time_completion().is_none_or(|c| c >= invoked));
            frontier.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Op, Outcome, TxnId};

    fn txn(id: u64, invoke: u64, complete: u64) -> Txn {
        Txn {
            id: TxnId(id),
            process: 0,
            invoke,
            complete: Some(complete),
            outcome: Outcome::Committed,
            ops: Vec::<Op>::new(),
        }
    }

    /// Reachability over `rt` edges must equal the real-time relation exactly.
    #[test]
    fn sweep_preserves_the_real_time_order() {
        // A mix of overlapping and disjoint spans.
        let txns = vec![
            txn(0, 1, 4),
            txn(1, 2, 3),
            txn(2, 5, 9),
            txn(3, 6, 7),
            txn(4, 8, 12),
            txn(5, 10, 11),
            txn(6, 13, 14),
            txn(7, 3, 15),
        ];
        let roles = vec![Role::Full; txns.len()];
        let mut g = Graph::new(txns.len());
        infer(&txns, &roles, &mut g);
        let n = txns.len();
        for a in 0..n {
            let mut reach = vec![false; n];
            let mut stack = vec![a];
            while let Some(v) = stack.pop() {
                for e in g.edges(v) {
                    if !reach[e.to] {
                        reach[e.to] = true;
                        stack.push(e.to);
                    }
                }
            }
            for b in 0..n {
                let precedes = txns[a].complete.is_some_and(|c| c < txns[b].invoke);
                assert_eq!(reach[b], precedes, "T{a} -> T{b}");
            }
        }
        assert!(g.count(EdgeKind::Rt) < n * n / 2);
    }
}
