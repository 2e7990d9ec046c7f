//! Hand-written histories: the way tests state an anomaly directly.
//!
//! A checker that never fails proves nothing (DESIGN §8), so every anomaly the checkers claim
//! to detect is written out by hand in `tests/` with this builder. Transactions get ids `T1`,
//! `T2`, … in the order [`HistoryBuilder::txn`] is called.
//!
//! # Real time
//!
//! By default each finished transaction occupies the next two events, so a history built
//! without [`TxnBuilder::span`] is *serial*: every transaction completes before the next one
//! is invoked. To make transactions overlap, give explicit spans; the automatic counter then
//! continues after the largest event used so far. Spans are validated by the checkers
//! (`invoke < complete`), not here, so malformed histories can be written too.
//!
//! ```
//! use ordo_check::{check_serializable, check_strict_serializable, HistoryBuilder};
//!
//! let mut b = HistoryBuilder::new();
//! b.txn(0).span(1, 2).append(1, 10).commit();
//! // Invoked after T1 completed, yet it did not see T1's append: serialised before T1.
//! b.txn(1).span(3, 4).read_list(1, &[]).commit();
//! let h = b.build();
//! assert!(check_serializable(&h).is_ok());
//! assert!(check_strict_serializable(&h).is_err());
//! ```

use crate::history::{History, Op, Outcome, Txn, TxnId};

/// Builds a [`History`] by hand.
#[derive(Debug, Default)]
pub struct HistoryBuilder {
    txns: Vec<Txn>,
    next_event: u64,
    next_id: u64,
}

impl HistoryBuilder {
    /// An empty builder; the first transaction is `T1`.
    pub fn new() -> Self {
        Self { txns: Vec::new(), next_event: 1, next_id: 1 }
    }

    /// Starts describing the next transaction, run by `process`.
    pub fn txn(&mut self, process: u32) -> TxnBuilder<'_> {
        let id = TxnId(self.next_id);
        self.next_id += 1;
        TxnBuilder { builder: self, id, process, span: None, ops: Vec::new() }
    }

    /// Adds a fully described attempt as is (its id must not collide with the builder's).
    pub fn push(&mut self, txn: Txn) -> &mut Self {
        self.next_id = self.next_id.max(txn.id.0 + 1);
        let last = txn.complete.unwrap_or(txn.invoke);
        self.next_event = self.next_event.max(last + 1);
        self.txns.push(txn);
        self
    }

    /// The history described so far.
    pub fn build(self) -> History {
        History::from_txns(self.txns)
    }
}

/// One transaction being described; finish it with [`commit`](Self::commit),
/// [`abort`](Self::abort) or [`unknown`](Self::unknown).
#[must_use = "a transaction is added to the history only by commit(), abort() or unknown()"]
#[derive(Debug)]
pub struct TxnBuilder<'a> {
    builder: &'a mut HistoryBuilder,
    id: TxnId,
    process: u32,
    span: Option<(u64, u64)>,
    ops: Vec<Op>,
}

impl TxnBuilder<'_> {
    /// Places the transaction at explicit invocation and completion events.
    pub fn span(mut self, invoke: u64, complete: u64) -> Self {
        self.span = Some((invoke, complete));
        self
    }

    /// Appends `value` to list `key`.
    pub fn append(mut self, key: u64, value: u64) -> Self {
        self.ops.push(Op::Append { key, value });
        self
    }

    /// Reads list `key` and sees `seen`.
    pub fn read_list(mut self, key: u64, seen: &[u64]) -> Self {
        self.ops.push(Op::ReadList { key, seen: seen.to_vec() });
        self
    }

    /// Reads register `key` and sees `seen` (`None`: the initial state).
    pub fn read_register(mut self, key: u64, seen: Option<u64>) -> Self {
        self.ops.push(Op::ReadRegister { key, seen, version: None });
        self
    }

    /// Reads register `key`, seeing `seen` at version `version`.
    pub fn read_register_at(mut self, key: u64, seen: Option<u64>, version: u64) -> Self {
        self.ops.push(Op::ReadRegister { key, seen, version: Some(version) });
        self
    }

    /// Writes `value` to register `key`.
    pub fn write_register(mut self, key: u64, value: u64) -> Self {
        self.ops.push(Op::WriteRegister { key, value, version: None });
        self
    }

    /// Writes `value` to register `key`, installed at version `version`.
    pub fn write_register_at(mut self, key: u64, value: u64, version: u64) -> Self {
        self.ops.push(Op::WriteRegister { key, value, version: Some(version) });
        self
    }

    /// Records the transaction as committed.
    pub fn commit(self) -> TxnId {
        self.finish(Outcome::Committed)
    }

    /// Records the transaction as aborted.
    pub fn abort(self) -> TxnId {
        self.finish(Outcome::Aborted)
    }

    /// Records the transaction with an unknown outcome.
    pub fn unknown(self) -> TxnId {
        self.finish(Outcome::Unknown)
    }

    fn finish(self, outcome: Outcome) -> TxnId {
        let (invoke, complete) = match self.span {
            Some(span) => span,
            None => (self.builder.next_event, self.builder.next_event + 1),
        };
        self.builder.next_event = self.builder.next_event.max(complete.max(invoke) + 1);
        self.builder.txns.push(Txn {
            id: self.id,
            process: self.process,
            invoke,
            complete: Some(complete),
            outcome,
            ops: self.ops,
        });
        self.id
    }
}
