//! What a check reports when a history is not allowed, in words a person can act on.
//!
//! Each [`Violation`] names the anomaly (Adya's G0, G1a, G1b, G1c, G-single, G2, Elle's
//! G-nonadjacent, a `-realtime` suffix when real-time order is needed to close the cycle),
//! shows the evidence (the reads, the writers, the cycle step by step with the key behind each
//! dependency) and prints every involved transaction with all its operations, so a failing
//! engine test explains itself without a debugger. Violations are `serde` so a test can dump
//! one next to the failing history.
//!
//! # Anomalies, from the most to the least specific
//!
//! | name | evidence |
//! |---|---|
//! | G1a aborted read | a value written by an aborted attempt was read |
//! | G1b intermediate read | a value was read that its writer later overwrote (or a list missed the writer's later appends) |
//! | G0 write cycle | a cycle of `ww` edges |
//! | G1c circular information flow | a cycle of `ww` and `wr` edges |
//! | G-single | a cycle with exactly one `rw` edge (read skew, lost update) |
//! | G-nonadjacent | a cycle with `rw` edges, no two of them adjacent (long fork); SI forbids it |
//! | G2 | any other cycle: two adjacent `rw` edges (write skew); SI allows it |
//!
//! Besides these, a history can break the workload's own rules (garbage reads of values no one
//! wrote, duplicate writes, list reads that are not prefixes of one another, contradictory
//! version tags) or be malformed; those are reported as what they are.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::graph::EdgeKind;
use crate::history::{Txn, TxnId};

/// Which object model an operation belongs to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Model {
    /// A list-append key.
    List,
    /// A read-write register key.
    Register,
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Model::List => "list",
            Model::Register => "register",
        })
    }
}

/// The cycle anomalies of Adya and Elle.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Anomaly {
    /// Write cycle: only `ww` edges (plus `rt` when real-time).
    G0,
    /// Circular information flow: `ww` and `wr` edges, at least one `wr`.
    G1c,
    /// Exactly one anti-dependency (`rw`) edge: read skew, lost update.
    GSingle,
    /// Two or more `rw` edges, none adjacent to another: long fork.
    GNonadjacent,
    /// Two or more `rw` edges, some adjacent: write skew.
    G2,
}

impl Anomaly {
    /// The anomaly's short name, as in the literature.
    pub fn name(self) -> &'static str {
        match self {
            Anomaly::G0 => "G0",
            Anomaly::G1c => "G1c",
            Anomaly::GSingle => "G-single",
            Anomaly::GNonadjacent => "G-nonadjacent",
            Anomaly::G2 => "G2",
        }
    }

    fn explanation(self) -> &'static str {
        match self {
            Anomaly::G0 => {
                "write cycle: the transactions' writes to different keys were installed in contradicting orders"
            }
            Anomaly::G1c => {
                "circular information flow: each transaction (transitively) saw or overwrote the writes of the next"
            }
            Anomaly::GSingle => {
                "a dependency cycle with exactly one anti-dependency (read skew, lost update): some transaction missed a write it should have seen"
            }
            Anomaly::GNonadjacent => {
                "a dependency cycle whose anti-dependencies are never adjacent (long fork): no snapshot order explains it, so even snapshot isolation forbids it"
            }
            Anomaly::G2 => {
                "an anti-dependency cycle (write skew): allowed by snapshot isolation, forbidden by serializability"
            }
        }
    }
}

/// One step of a reported cycle: `from -kind(key)-> to`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CycleStep {
    /// The transaction ordered first.
    pub from: TxnId,
    /// Why.
    pub kind: EdgeKind,
    /// The key behind a dependency edge; `None` for a real-time edge.
    pub key: Option<u64>,
    /// The transaction ordered second.
    pub to: TxnId,
}

/// A dependency cycle: no serial order can contain it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cycle {
    /// The most specific anomaly the cycle is an instance of.
    pub anomaly: Anomaly,
    /// Whether the cycle uses a real-time edge.
    pub realtime: bool,
    /// The steps, each starting where the previous one ended; the last ends at the first.
    pub steps: Vec<CycleStep>,
    /// The transactions on the cycle, in the order they are first visited.
    pub txns: Vec<Txn>,
}

impl Cycle {
    /// The anomaly's name with `-realtime` appended when real-time order closes the cycle,
    /// e.g. `G-single-realtime`.
    pub fn name(&self) -> String {
        if self.realtime {
            format!("{}-realtime", self.anomaly.name())
        } else {
            self.anomaly.name().to_owned()
        }
    }

    /// Number of `rw` edges on the cycle.
    pub fn anti_dependencies(&self) -> usize {
        self.steps.iter().filter(|s| s.kind == EdgeKind::Rw).count()
    }
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name(), self.anomaly.explanation())?;
        if self.realtime {
            f.write_str("; the cycle closes only through real-time order: a transaction that completed before another was invoked is serialised after it")?;
        }
        f.write_str("\n  cycle: ")?;
        if let Some(first) = self.steps.first() {
            write!(f, "{}", first.from)?;
        }
        for step in &self.steps {
            match step.key {
                Some(key) => write!(f, " -{}(key {key})-> {}", step.kind, step.to)?,
                None => write!(f, " -{}-> {}", step.kind, step.to)?,
            }
        }
        for txn in &self.txns {
            write!(f, "\n  {txn}")?;
        }
        Ok(())
    }
}

/// Why a history is not allowed by the checked consistency model.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Violation {
    /// The history itself is ill-formed (duplicate ids, a completion before an invocation).
    #[error("malformed history: {reason}")]
    Malformed {
        /// What is wrong.
        reason: String,
    },
    /// Two writes of one value to one key: the workload broke the unique-values rule, so
    /// dependencies cannot be recovered.
    #[error(
        "duplicate write: value {value} of {model} key {key} is written twice (the workload must write unique values)\n  {first}\n  {second}"
    )]
    DuplicateWrite {
        /// The object model.
        model: Model,
        /// The key.
        key: u64,
        /// The value written twice.
        value: u64,
        /// The first writer.
        first: Box<Txn>,
        /// The second writer (may be the same transaction).
        second: Box<Txn>,
    },
    /// A transaction contradicts itself: a read that misses its own earlier write, sees a
    /// write it makes only later, or two reads of one key that differ with no write between.
    #[error("internal inconsistency: {reason}\n  {txn}")]
    Internal {
        /// The transaction.
        txn: Box<Txn>,
        /// What it contradicts.
        reason: String,
    },
    /// A read returned a value that no transaction ever wrote.
    #[error(
        "garbage read: {model} key {key} returned {value}, which no transaction wrote\n  {reader}"
    )]
    GarbageRead {
        /// The object model.
        model: Model,
        /// The key.
        key: u64,
        /// The value nobody wrote.
        value: u64,
        /// The reader.
        reader: Box<Txn>,
    },
    /// G1a: a read returned a value written by an aborted attempt.
    #[error(
        "G1a (aborted read): {model} key {key} returned {value}, written by an attempt that aborted\n  reader: {reader}\n  writer: {writer}"
    )]
    AbortedRead {
        /// The object model.
        model: Model,
        /// The key.
        key: u64,
        /// The aborted value.
        value: u64,
        /// The reader.
        reader: Box<Txn>,
        /// The aborted writer.
        writer: Box<Txn>,
    },
    /// G1b: a read showed a writer's effects on a key half applied: a register value its
    /// writer later overwrote, or a list with some of a transaction's appends but not all.
    #[error(
        "G1b (intermediate read): {model} key {key} shows {value} but not {other}, which the same transaction also wrote to the key: the read saw that transaction half applied\n  reader: {reader}\n  writer: {writer}"
    )]
    IntermediateRead {
        /// The object model.
        model: Model,
        /// The key.
        key: u64,
        /// The value the read showed.
        value: u64,
        /// The writer's other write to the key that the read did not show.
        other: u64,
        /// The reader.
        reader: Box<Txn>,
        /// The writer.
        writer: Box<Txn>,
    },
    /// A list read returned the same element twice.
    #[error(
        "duplicate elements: list key {key} was read as {seen:?}, with a repeated element\n  {reader}"
    )]
    DuplicateElements {
        /// The key.
        key: u64,
        /// What the read returned.
        seen: Vec<u64>,
        /// The reader.
        reader: Box<Txn>,
    },
    /// Two reads of one list are not prefixes of one another: no single append order
    /// explains both.
    #[error(
        "incompatible order: list key {key} was read as {first_seen:?} and as {second_seen:?}; neither is a prefix of the other\n  {first}\n  {second}"
    )]
    IncompatibleOrder {
        /// The key.
        key: u64,
        /// One read's external state.
        first_seen: Vec<u64>,
        /// Its reader.
        first: Box<Txn>,
        /// The other read's external state.
        second_seen: Vec<u64>,
        /// Its reader.
        second: Box<Txn>,
    },
    /// One register version carries two different version tags.
    #[error(
        "version mismatch: value {value} of register key {key} is tagged with version {first} and with version {second}\n  writer: {writer}"
    )]
    VersionMismatch {
        /// The key.
        key: u64,
        /// The value.
        value: u64,
        /// One tag.
        first: u64,
        /// The other tag.
        second: u64,
        /// The writer.
        writer: Box<Txn>,
    },
    /// Two versions of one register carry the same version tag; versions of one object must
    /// strictly increase.
    #[error(
        "duplicate version: two versions of register key {key} carry version tag {version}\n  {first}\n  {second}"
    )]
    DuplicateVersion {
        /// The key.
        key: u64,
        /// The shared tag.
        version: u64,
        /// One writer.
        first: Box<Txn>,
        /// The other writer.
        second: Box<Txn>,
    },
    /// A dependency cycle among the checked transactions.
    #[error("{0}")]
    Cycle(Cycle),
}

impl Violation {
    /// A short name for the anomaly: `G0`, `G1a`, `G1b`, `G1c`, `G-single`, `G-nonadjacent`,
    /// `G2` (each cycle name with `-realtime` when real time closes it), `internal`,
    /// `garbage-read`, `duplicate-write`, `duplicate-elements`, `incompatible-order`,
    /// `version-mismatch`, `duplicate-version`, `malformed`.
    pub fn name(&self) -> String {
        match self {
            Violation::Malformed { .. } => "malformed".to_owned(),
            Violation::DuplicateWrite { .. } => "duplicate-write".to_owned(),
            Violation::Internal { .. } => "internal".to_owned(),
            Violation::GarbageRead { .. } => "garbage-read".to_owned(),
            Violation::AbortedRead { .. } => "G1a".to_owned(),
            Violation::IntermediateRead { .. } => "G1b".to_owned(),
            Violation::DuplicateElements { .. } => "duplicate-elements".to_owned(),
            Violation::IncompatibleOrder { .. } => "incompatible-order".to_owned(),
            Violation::VersionMismatch { .. } => "version-mismatch".to_owned(),
            Violation::DuplicateVersion { .. } => "duplicate-version".to_owned(),
            Violation::Cycle(c) => c.name(),
        }
    }

    /// The cycle, if the violation is one.
    pub fn cycle(&self) -> Option<&Cycle> {
        match self {
            Violation::Cycle(c) => Some(c),
            _ => None,
        }
    }
}
