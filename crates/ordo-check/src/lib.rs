//! # ordo-check — histories and checkers
//!
//! Records transaction histories from concurrent tests and checks them for strict
//! serializability, opacity and snapshot isolation by searching for cycles in dependency
//! graphs, the approach of Elle (Kingsbury & Alvaro, VLDB 2020) over Adya's anomalies. This
//! crate knows nothing about the engine: tests record what the engine returned and ask
//! whether any execution of the claimed model could have returned it.
//!
//! ## The approach
//!
//! 1. **Record** every attempt with a [`Recorder`] (or write a history by hand with a
//!    [`HistoryBuilder`]): its operations, its outcome, and two stamps from one global event
//!    counter bracketing it in real time.
//! 2. **Recover dependencies.** The workloads write unique values, so each value read names
//!    its writer (`wr`). For list-append keys the longest read gives the version order (`ww`)
//!    and hence which writes a read missed (`rw`); for registers the version order comes from
//!    the engine's version tags when given and from read-then-write within a transaction
//!    otherwise — never guessed. Real-time order adds `rt` edges, linear in number.
//! 3. **Search for cycles** with Tarjan's algorithm: a model is violated iff the graph it
//!    restricts has a forbidden cycle (any cycle for serializability; one with no two adjacent
//!    anti-dependencies for snapshot isolation). The report names the most specific anomaly
//!    and prints the cycle with every transaction's operations.
//!
//! ```
//! use ordo_check::{check_snapshot_isolation, check_serializable, HistoryBuilder};
//!
//! // Write skew: both read x and y empty, each appends to a different one.
//! let mut b = HistoryBuilder::new();
//! b.txn(0).span(1, 4).read_list(1, &[]).read_list(2, &[]).append(1, 1).commit();
//! b.txn(1).span(2, 3).read_list(1, &[]).read_list(2, &[]).append(2, 1).commit();
//! b.txn(2).read_list(1, &[1]).read_list(2, &[1]).commit();
//! let h = b.build();
//! assert!(check_snapshot_isolation(&h).is_ok());
//! let v = check_serializable(&h).unwrap_err();
//! assert_eq!(v.name(), "G2");
//! ```
//!
//! ## Invariants and soundness
//!
//! Every edge follows from the history and the checked model's own axioms, so a reported
//! violation is real (no false alarms), given the workload's rules: unique values per key and
//! stamps that bracket the engine's work. Where the version order is unknown (blind register
//! writes without version tags) edges are missing and anomalies may go unseen; the register
//! module says exactly which.
//!
//! ## Map
//!
//! `history` (the data), `builder` (by hand), `recorder` (from threads), `infer` (roles,
//! external reads, single-read anomalies), `list` and `register` (version orders),
//! `realtime` (the `rt` sweep), `graph` (SCCs and BFS), `search` (cycle searches and naming),
//! `check` (the public checks), `violation` (the reports).
//!
//! The integer-keyed maps of the hot paths (inference, version orders, BFS parents) are
//! `rustc_hash`'s `FxHashMap`/`FxHashSet`: the input is a test's own history, so SipHash's
//! resistance to chosen keys buys nothing at several times the cost. No result depends on
//! their iteration order (what is read out of them is sorted first).
//!
//! ## Cost
//!
//! Linear in the size of the history for a passing check (plus a sort of the events and of
//! each node's edges): inference touches each read element a constant number of times, the
//! real-time sweep adds `O(n · clients)` edges, and the verdict is one Tarjan pass. In release
//! mode 2·10⁴ attempts check in under 0.1 s and 10⁵ in about half a second on one core.
//! Only a failing check spends more, to name the most specific anomaly.
#![forbid(unsafe_code)]

mod builder;
mod check;
mod graph;
mod history;
mod infer;
mod list;
mod realtime;
mod recorder;
mod register;
mod search;
mod violation;

pub use builder::{HistoryBuilder, TxnBuilder};
pub use check::{
    Consistency, check, check_opacity, check_serializable, check_snapshot_isolation,
    check_strict_serializable, check_strict_snapshot_isolation,
};
pub use graph::EdgeKind;
pub use history::{History, Op, Outcome, Txn, TxnId};
pub use recorder::{Recorder, TxnRecorder};
pub use violation::{Anomaly, Cycle, CycleStep, Model, Violation};
