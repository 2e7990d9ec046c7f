//! What a history is: transactions, their operations, their outcome and their real-time span.
//!
//! A history is the raw material of every check. It records *attempts*, not only committed
//! transactions: an engine retries a conflicting transaction, and each try is a [`Txn`] of its
//! own with [`Outcome::Aborted`], because opacity (FaRMv2 §3) demands that aborted attempts too
//! saw a consistent snapshot.
//!
//! # Workloads
//!
//! Two object models share one history, in separate key spaces (list key 1 and register key 1
//! are different objects):
//!
//! * **list-append** — [`Op::Append`] adds a value at the end of a list, [`Op::ReadList`]
//!   returns the whole list. Because every read returns the full order of the appends it saw,
//!   the version order of a list is visible in its longest read (Elle, §4).
//! * **read-write register** — [`Op::WriteRegister`] overwrites, [`Op::ReadRegister`] returns
//!   the current value, `None` for the initial state. A register read says which version it
//!   saw but not what came before it, so its version order can be recovered only in part,
//!   unless the engine reports it through the optional `version` tags (the commit timestamp
//!   it installed a version with, or the timestamp of the version a read returned).
//!
//! # Invariants the checkers rely on
//!
//! * Values written to one key are unique across the whole history (the workload's job: use a
//!   global counter). A duplicate is reported, never guessed around.
//! * `invoke` and `complete` come from one totally ordered event counter. `A` precedes `B` in
//!   real time iff `A.complete < B.invoke`. An attempt whose outcome is [`Outcome::Unknown`]
//!   never precedes anything (it may still take effect later).
//! * Transaction ids are unique within a history; they name transactions in reports only.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The name of a transaction attempt within one history, printed as `T12`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TxnId(pub u64);

impl fmt::Display for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "T{}", self.0)
    }
}

/// One operation of a transaction, in program order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// A read of a list-append key that returned the whole list, oldest append first.
    ReadList {
        /// The list key.
        key: u64,
        /// The elements the read returned, in list order.
        seen: Vec<u64>,
    },
    /// An append of a unique value at the end of a list.
    Append {
        /// The list key.
        key: u64,
        /// The appended value, unique per key across the history.
        value: u64,
    },
    /// A read of a register; `seen == None` is the initial (never written) state.
    ReadRegister {
        /// The register key.
        key: u64,
        /// The value read, `None` for the initial state.
        seen: Option<u64>,
        /// The version (timestamp) of the value read, when the engine reports it.
        version: Option<u64>,
    },
    /// A blind write of a unique value to a register.
    WriteRegister {
        /// The register key.
        key: u64,
        /// The value written, unique per key across the history.
        value: u64,
        /// The version (commit timestamp) this write was installed with, when known.
        version: Option<u64>,
    },
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::ReadList { key, seen } => write!(f, "read(list {key}) = {seen:?}"),
            Op::Append { key, value } => write!(f, "append(list {key}, {value})"),
            Op::ReadRegister { key, seen, version } => {
                match seen {
                    Some(v) => write!(f, "read(reg {key}) = {v}")?,
                    None => write!(f, "read(reg {key}) = nil")?,
                }
                match version {
                    Some(ts) => write!(f, " @{ts}"),
                    None => Ok(()),
                }
            }
            Op::WriteRegister { key, value, version } => {
                write!(f, "write(reg {key}, {value})")?;
                match version {
                    Some(ts) => write!(f, " @{ts}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// How an attempt ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The engine acknowledged the commit.
    Committed,
    /// The attempt aborted; none of its writes may ever be visible.
    Aborted,
    /// The attempt may or may not have committed (a crash, a lost reply). The checkers treat
    /// it as committed if anybody observed one of its writes, and otherwise leave it out.
    Unknown,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Committed => "committed",
            Outcome::Aborted => "aborted",
            Outcome::Unknown => "unknown",
        })
    }
}

/// One transaction attempt: who ran it, when, what it did and how it ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Txn {
    /// Unique name within the history.
    pub id: TxnId,
    /// The client (thread) that ran it; reports only.
    pub process: u32,
    /// Event number taken before the attempt started.
    pub invoke: u64,
    /// Event number taken after the outcome was known (for an abort: when it was recorded).
    /// `None` only for [`Outcome::Unknown`].
    pub complete: Option<u64>,
    /// How the attempt ended.
    pub outcome: Outcome,
    /// Operations in program order.
    pub ops: Vec<Op>,
}

impl Txn {
    /// The completion event if this attempt can precede others in real time: committed and
    /// aborted attempts do, an unknown one never does (it may take effect arbitrarily late).
    pub fn real_time_completion(&self) -> Option<u64> {
        match self.outcome {
            Outcome::Committed | Outcome::Aborted => self.complete,
            Outcome::Unknown => None,
        }
    }
}

impl fmt::Display for Txn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (process {}, {}, events {}..",
            self.id, self.process, self.outcome, self.invoke
        )?;
        match self.complete {
            Some(c) => write!(f, "{c}):")?,
            None => f.write_str("?):")?,
        }
        if self.ops.is_empty() {
            return f.write_str(" (no operations)");
        }
        for (i, op) in self.ops.iter().enumerate() {
            f.write_str(if i == 0 { " " } else { "; " })?;
            write!(f, "{op}")?;
        }
        Ok(())
    }
}

/// A recorded or hand-written history: every attempt, in id order.
///
/// Build one with a [`crate::Recorder`] from concurrent test threads, with a
/// [`crate::HistoryBuilder`] by hand, or deserialise a dumped one (it is `serde`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    txns: Vec<Txn>,
}

impl History {
    /// A history of these attempts, sorted by id.
    pub fn from_txns(mut txns: Vec<Txn>) -> Self {
        txns.sort_by_key(|t| t.id);
        Self { txns }
    }

    /// A builder for hand-written histories; see [`crate::HistoryBuilder`].
    pub fn builder() -> crate::HistoryBuilder {
        crate::HistoryBuilder::new()
    }

    /// All attempts.
    pub fn txns(&self) -> &[Txn] {
        &self.txns
    }

    /// Mutable access, for tests that corrupt a history on purpose.
    pub fn txns_mut(&mut self) -> &mut Vec<Txn> {
        &mut self.txns
    }

    /// The attempt named `id`, if any.
    pub fn get(&self, id: TxnId) -> Option<&Txn> {
        self.txns.iter().find(|t| t.id == id)
    }

    /// Number of attempts.
    pub fn len(&self) -> usize {
        self.txns.len()
    }

    /// Whether no attempt was recorded.
    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    /// Number of committed attempts.
    pub fn committed(&self) -> usize {
        self.txns.iter().filter(|t| t.outcome == Outcome::Committed).count()
    }
}
