//! Recording histories from concurrent test threads.
//!
//! A [`Recorder`] is shared by reference (or `Arc`) among the threads of a test. Each thread
//! wraps every transaction *attempt* in a [`TxnRecorder`]: [`Recorder::begin`] before the engine
//! starts the attempt, one call per operation as the engine returns it, and
//! [`TxnRecorder::commit`] / [`abort`](TxnRecorder::abort) / [`unknown`](TxnRecorder::unknown)
//! after the engine reported the outcome.
//!
//! # Real time
//!
//! Invocation and completion are stamped from one global `SeqCst` event counter. The counter
//! is the witness of real-time order: if `A`'s completion event is smaller than `B`'s
//! invocation event, then `A`'s stamp happened before `B`'s in the single total order of
//! `SeqCst` operations, so the engine had finished `A` before it started `B`. The stamps are
//! conservative only if they bracket the engine's work: `begin` must be called *before* the
//! engine takes its read timestamp, and the outcome recorded *after* the engine returned. A
//! stamp taken the other way round would let the checker demand an order the engine never
//! promised (a false alarm), never hide a real violation.
//!
//! # Concurrency
//!
//! Operations are buffered inside the `TxnRecorder`, which belongs to one thread; the shared
//! state is the event counter, the id counter and a mutex taken once per finished attempt.
//! A `TxnRecorder` dropped without an outcome (a panic, an early `?` return) is recorded as
//! [`Outcome::Unknown`], which is the truth: the test does not know whether it committed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::history::{History, Op, Outcome, Txn, TxnId};

/// Collects transaction attempts from many threads into one [`History`]. `Sync`.
#[derive(Debug)]
pub struct Recorder {
    /// The global event counter: invocation and completion stamps.
    events: AtomicU64,
    /// Next transaction id.
    ids: AtomicU64,
    /// Finished attempts, in completion order.
    finished: Mutex<Vec<Txn>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self { events: AtomicU64::new(1), ids: AtomicU64::new(1), finished: Mutex::new(Vec::new()) }
    }

    /// Starts recording an attempt run by `process`, stamping its invocation now.
    ///
    /// Call it before the engine begins the attempt (see the module docs on real time).
    pub fn begin(&self, process: u32) -> TxnRecorder<'_> {
        // Relaxed: ids only name transactions, they order nothing.
        let id = TxnId(self.ids.fetch_add(1, Ordering::Relaxed));
        // SeqCst: the event counter is the real-time order; every stamp must sit in the one
        // total order of SeqCst operations (pairs with the stamp in `finish`).
        let invoke = self.events.fetch_add(1, Ordering::SeqCst);
        TxnRecorder {
            recorder: self,
            txn: Some(Txn {
                id,
                process,
                invoke,
                complete: None,
                outcome: Outcome::Unknown,
                ops: Vec::new(),
            }),
        }
    }

    /// A snapshot of every attempt finished so far (attempts still running are left out).
    pub fn history(&self) -> History {
        let finished = self.finished.lock().unwrap_or_else(PoisonError::into_inner);
        History::from_txns(finished.clone())
    }

    /// Number of attempts finished so far.
    pub fn len(&self) -> usize {
        self.finished.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether no attempt has finished yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn finish(&self, mut txn: Txn, outcome: Outcome) {
        // SeqCst: see `begin`.
        let complete = self.events.fetch_add(1, Ordering::SeqCst);
        txn.complete = Some(complete);
        txn.outcome = outcome;
        self.finished.lock().unwrap_or_else(PoisonError::into_inner).push(txn);
    }
}

/// One attempt being recorded; owned by the thread running it.
#[derive(Debug)]
#[must_use = "record the outcome with commit(), abort() or unknown(); a dropped attempt counts as unknown"]
pub struct TxnRecorder<'a> {
    recorder: &'a Recorder,
    /// `None` once the outcome has been recorded.
    txn: Option<Txn>,
}

impl TxnRecorder<'_> {
    /// The id this attempt will carry in the history.
    pub fn id(&self) -> TxnId {
        self.txn.as_ref().map_or(TxnId(0), |t| t.id)
    }

    /// Records a read of list `key` that returned `seen`.
    pub fn read_list(&mut self, key: u64, seen: &[u64]) {
        self.push(Op::ReadList { key, seen: seen.to_vec() });
    }

    /// Records an append of `value` to list `key`.
    pub fn append(&mut self, key: u64, value: u64) {
        self.push(Op::Append { key, value });
    }

    /// Records a read of register `key` that returned `seen` (`None`: never written).
    pub fn read_register(&mut self, key: u64, seen: Option<u64>) {
        self.push(Op::ReadRegister { key, seen, version: None });
    }

    /// Records a read of register `key` that returned `seen` from the version with timestamp
    /// `version`. Version tags let the checker recover the register's version order.
    pub fn read_register_at(&mut self, key: u64, seen: Option<u64>, version: u64) {
        self.push(Op::ReadRegister { key, seen, version: Some(version) });
    }

    /// Records a write of `value` to register `key`.
    pub fn write_register(&mut self, key: u64, value: u64) {
        self.push(Op::WriteRegister { key, value, version: None });
    }

    /// Records a write of `value` to register `key` installed at version `version`.
    pub fn write_register_at(&mut self, key: u64, value: u64, version: u64) {
        self.push(Op::WriteRegister { key, value, version: Some(version) });
    }

    /// Records that the engine committed the attempt.
    pub fn commit(mut self) {
        if let Some(txn) = self.txn.take() {
            self.recorder.finish(txn, Outcome::Committed);
        }
    }

    /// Records that the engine committed the attempt with commit timestamp `version`: every
    /// register write not yet tagged is tagged with it (the engine installs all of a
    /// transaction's versions at its commit timestamp).
    pub fn commit_at(mut self, version: u64) {
        if let Some(mut txn) = self.txn.take() {
            for op in &mut txn.ops {
                if let Op::WriteRegister { version: v @ None, .. } = op {
                    *v = Some(version);
                }
            }
            self.recorder.finish(txn, Outcome::Committed);
        }
    }

    /// Records that the attempt aborted. Its reads are still checked by
    /// [`check_opacity`](crate::check_opacity).
    pub fn abort(mut self) {
        if let Some(txn) = self.txn.take() {
            self.recorder.finish(txn, Outcome::Aborted);
        }
    }

    /// Records that the outcome is unknown (the attempt may or may not have committed).
    pub fn unknown(mut self) {
        if let Some(txn) = self.txn.take() {
            self.recorder.finish(txn, Outcome::Unknown);
        }
    }

    fn push(&mut self, op: Op) {
        if let Some(txn) = self.txn.as_mut() {
            txn.ops.push(op);
        }
    }
}

impl Drop for TxnRecorder<'_> {
    fn drop(&mut self) {
        if let Some(txn) = self.txn.take() {
            self.recorder.finish(txn, Outcome::Unknown);
        }
    }
}
