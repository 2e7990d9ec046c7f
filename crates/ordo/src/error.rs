//! Errors and abort reasons.
//!
//! An [`Abort`] is a conflict: the transaction saw something a concurrent one did and must not
//! commit, but retrying may succeed — `Ordo::run` retries it. An [`Error`] is everything else:
//! misuse (a bad address, a wrong-sized value), exhausted resources, or an abort that was not
//! retried. Both name what failed and where.

use ordo_clock::Timestamp;

use crate::addr::Addr;

mod durable;
pub use durable::DurableError;

/// Why a transaction attempt aborted. Each reason is counted (see [`crate::Stats`]).
#[derive(thiserror::Error, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Abort {
    /// A read found the object locked by a committing transaction (FaRMv2 early abort).
    #[error("object {addr} was locked when read")]
    ReadLocked {
        /// The object.
        addr: Addr,
    },
    /// A read found only a version newer than the read timestamp and no older one to fall back to.
    #[error("object {addr} has version {version:?}, newer than the read timestamp {rts:?}")]
    TooNew {
        /// The object.
        addr: Addr,
        /// The version found.
        version: Timestamp,
        /// The transaction's read timestamp.
        rts: Timestamp,
    },
    /// Commit could not lock an object because another transaction holds it.
    #[error("object {addr} was locked by another transaction at commit")]
    LockBusy {
        /// The object.
        addr: Addr,
    },
    /// Commit found an object to be written changed since it was read (or newer than `rts`).
    #[error("object {addr} changed before it could be locked")]
    WriteConflict {
        /// The object.
        addr: Addr,
    },
    /// Validation found an object read (but not written) changed or locked.
    #[error("validation failed on object {addr}")]
    Validation {
        /// The object.
        addr: Addr,
    },
    /// Old-version memory was exhausted at commit (budget policy `block` after its wait, or
    /// `abort`).
    #[error("old-version memory exhausted while committing object {addr}")]
    VersionMemory {
        /// The object.
        addr: Addr,
    },
    /// The caller asked for the abort (`Tx::abort`, or a closure requesting a retry).
    #[error("aborted by the application")]
    Requested,
}

/// The kinds of [`Abort`], for counters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum AbortKind {
    /// [`Abort::ReadLocked`].
    ReadLocked,
    /// [`Abort::TooNew`].
    TooNew,
    /// [`Abort::LockBusy`].
    LockBusy,
    /// [`Abort::WriteConflict`].
    WriteConflict,
    /// [`Abort::Validation`].
    Validation,
    /// [`Abort::VersionMemory`].
    VersionMemory,
    /// [`Abort::Requested`].
    Requested,
}

impl AbortKind {
    /// Every kind, in counter order.
    pub const ALL: [AbortKind; 7] = [
        AbortKind::ReadLocked,
        AbortKind::TooNew,
        AbortKind::LockBusy,
        AbortKind::WriteConflict,
        AbortKind::Validation,
        AbortKind::VersionMemory,
        AbortKind::Requested,
    ];

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            AbortKind::ReadLocked => "read-locked",
            AbortKind::TooNew => "too-new",
            AbortKind::LockBusy => "lock-busy",
            AbortKind::WriteConflict => "write-conflict",
            AbortKind::Validation => "validation",
            AbortKind::VersionMemory => "version-memory",
            AbortKind::Requested => "requested",
        }
    }
}

impl Abort {
    /// The counter this abort increments.
    pub fn kind(self) -> AbortKind {
        match self {
            Abort::ReadLocked { .. } => AbortKind::ReadLocked,
            Abort::TooNew { .. } => AbortKind::TooNew,
            Abort::LockBusy { .. } => AbortKind::LockBusy,
            Abort::WriteConflict { .. } => AbortKind::WriteConflict,
            Abort::Validation { .. } => AbortKind::Validation,
            Abort::VersionMemory { .. } => AbortKind::VersionMemory,
            Abort::Requested => AbortKind::Requested,
        }
    }
}

/// Why a participant (the owner of some regions, DESIGN §4) could not do a step of a transaction.
/// The embedded engine's one local participant never fails this way; `ordo-cluster` maps its
/// network and configuration errors here.
#[derive(thiserror::Error, Clone, Copy, PartialEq, Eq, Debug)]
pub enum ParticipantFailure {
    /// The owner is gone: its node failed, or its connection closed.
    #[error("the owner is gone")]
    PeerGone,
    /// The owner did not answer in time (it may still act on the request).
    #[error("the owner did not answer in time")]
    Timeout,
    /// The owner no longer owns the region (the configuration changed under the transaction).
    #[error("the owner no longer owns the region")]
    NotOwner,
    /// The owner's answer did not decode or broke the protocol.
    #[error("the owner's answer broke the protocol")]
    Protocol,
    /// The owner refused the request with an error that has no typed form here (its message
    /// is in the owner's and the caller's logs).
    #[error("the owner refused the request")]
    Refused,
}

/// The step of a transaction a participant failed at (the messages of FaRMv2 Fig. 3).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ParticipantStep {
    /// A read during execution, or the revalidation of one.
    Read,
    /// LOCK: locking the written objects.
    Lock,
    /// VALIDATE: re-checking the objects read but not written.
    Validate,
    /// COMMIT-BACKUP: logging or replicating the writes before any is installed.
    CommitBackup,
    /// COMMIT-PRIMARY: installing the writes and unlocking.
    CommitPrimary,
    /// TRUNCATE: letting the backups apply the writes.
    Truncate,
    /// ABORT: releasing the locks of a transaction that does not commit.
    Abort,
}

impl ParticipantStep {
    /// Whether a failure at this step comes after the commit point: every COMMIT-BACKUP was
    /// acknowledged, so the transaction is committed even though this participant's part of it
    /// may not be installed yet (the cluster's recovery installs it from the backups).
    pub fn is_after_commit_point(self) -> bool {
        matches!(self, ParticipantStep::CommitPrimary | ParticipantStep::Truncate)
    }

    /// A short name for messages.
    pub fn name(self) -> &'static str {
        match self {
            ParticipantStep::Read => "read",
            ParticipantStep::Lock => "lock",
            ParticipantStep::Validate => "validate",
            ParticipantStep::CommitBackup => "commit-backup",
            ParticipantStep::CommitPrimary => "commit-primary",
            ParticipantStep::Truncate => "truncate",
            ParticipantStep::Abort => "abort",
        }
    }
}

impl std::fmt::Display for ParticipantStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything an Ordo operation can fail with.
#[derive(thiserror::Error, Clone, PartialEq, Eq, Debug)]
pub enum Error {
    /// A durable database's files failed or are bad (see [`DurableError`]).
    #[error("durability: {0}")]
    Durable(std::sync::Arc<DurableError>),
    /// The transaction attempt conflicted; `Ordo::run` retries these.
    #[error("transaction aborted: {0}")]
    Aborted(#[from] Abort),
    /// A participant owning objects of the transaction failed (a peer gone, a timeout). Before
    /// the commit point ([`ParticipantStep::is_after_commit_point`] false) nothing was
    /// installed and every lock was released; after it the transaction is committed, but its
    /// writes at `owner` may not be installed yet. Not retried by `Ordo::run`.
    #[error("participant {owner} (region {region}) failed at {step}: {cause}")]
    Participant {
        /// The owner that failed, as numbered by the participant set's routing.
        owner: u16,
        /// A region of the transaction's objects that this owner serves.
        region: u16,
        /// The step it failed at.
        step: ParticipantStep,
        /// Why.
        cause: ParticipantFailure,
    },
    /// Every retry of `Ordo::run` aborted.
    #[error("transaction gave up after {attempts} attempts; last abort: {last}")]
    RetriesExhausted {
        /// Attempts made.
        attempts: u32,
        /// The reason of the last abort.
        last: Abort,
    },
    /// The address does not name an object slot of this heap.
    #[error("address {addr} is not an object slot of this heap")]
    InvalidAddress {
        /// The address.
        addr: Addr,
    },
    /// The address names a slot that holds no object at the transaction's snapshot.
    #[error("object {addr} is not allocated (freed, or never allocated)")]
    NotAllocated {
        /// The address.
        addr: Addr,
    },
    /// An allocation of zero bytes.
    #[error("cannot allocate an object of zero bytes")]
    ZeroSize,
    /// An allocation above the largest object size.
    #[error("object of {len_bytes} bytes exceeds the largest object size of {max_bytes} bytes")]
    TooLarge {
        /// Requested size.
        len_bytes: usize,
        /// The limit.
        max_bytes: usize,
    },
    /// A value whose size differs from the object's.
    #[error("value of {got_bytes} bytes for object {addr} of {len_bytes} bytes")]
    WrongSize {
        /// The object.
        addr: Addr,
        /// The object's size.
        len_bytes: usize,
        /// The value's size.
        got_bytes: usize,
    },
    /// The heap has no free slab and may not grow.
    #[error("out of memory: all {regions} regions of {region_bytes} bytes are in use")]
    OutOfMemory {
        /// Regions in use.
        regions: usize,
        /// Bytes per region.
        region_bytes: usize,
    },
    /// Mapping memory for a new region failed.
    #[error("mapping region {region} ({bytes} bytes) failed: {reason}")]
    RegionMap {
        /// The region id.
        region: u16,
        /// Its size.
        bytes: usize,
        /// The OS error.
        reason: String,
    },
    /// An object header holds a length that cannot be right (memory corruption).
    #[error("object {addr} has a corrupt length of {len_bytes} bytes")]
    CorruptObject {
        /// The object.
        addr: Addr,
        /// The length found.
        len_bytes: usize,
    },
    /// The configuration is not usable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A stale snapshot read below the GC safe point: its old versions may be gone.
    #[error("snapshot at {ts:?} is older than the GC safe point {gc_point:?}")]
    SnapshotTooOld {
        /// The requested snapshot.
        ts: Timestamp,
        /// The safe point.
        gc_point: Timestamp,
    },
    /// A stale snapshot read at a time that is not yet in the past.
    #[error("snapshot at {ts:?} is in the future (clock reads {now_lo:?})")]
    SnapshotInFuture {
        /// The requested snapshot.
        ts: Timestamp,
        /// The clock's lower bound when the request gave up waiting.
        now_lo: Timestamp,
    },
    /// A write, allocation or free inside a read-only transaction.
    #[error("cannot modify object {addr} in a read-only transaction")]
    ReadOnly {
        /// The object.
        addr: Addr,
    },
    /// A read reached recycled old-version memory: the GC passed a snapshot still in use. Never
    /// happens unless the GC protocol is broken; the poison pattern makes it detectable.
    #[error("old version of object {addr} was recycled while still readable")]
    VersionRecycled {
        /// The object.
        addr: Addr,
    },
    /// A map key longer than [`crate::map::KEY_BYTES_MAX`].
    #[error("map key of {len_bytes} bytes exceeds the limit of {max_bytes} bytes")]
    KeyTooLarge {
        /// The key's length.
        len_bytes: usize,
        /// The limit.
        max_bytes: usize,
    },
    /// A map value longer than [`crate::map::VALUE_BYTES_MAX`].
    #[error("map value of {len_bytes} bytes exceeds the limit of {max_bytes} bytes")]
    ValueTooLarge {
        /// The value's length.
        len_bytes: usize,
        /// The limit.
        max_bytes: usize,
    },
    /// An object of a transactional map whose bytes do not decode as the map's layout (a wrong
    /// root address, or corruption). Opacity rules out torn structure, so this is never a race.
    #[error("map object {addr} is corrupt: {reason}")]
    CorruptMap {
        /// The object that failed to decode.
        addr: Addr,
        /// What was wrong with it.
        reason: &'static str,
    },
    /// A node or value object of a B+tree whose bytes do not decode as the tree's layout or break
    /// one of its invariants (a wrong root address, or corruption). Opacity rules out torn
    /// structure, so this is never a race.
    #[error("tree object {addr} is corrupt: {reason}")]
    CorruptTree {
        /// The object that failed to decode or check.
        addr: Addr,
        /// What was wrong with it.
        reason: &'static str,
    },
    /// A range scan whose lower bound lies above its upper bound.
    #[error("invalid range: the lower bound is above the upper bound")]
    InvalidRange,
    /// A table of this name already exists in the catalog.
    #[error("table {name:?} already exists")]
    TableExists {
        /// The table's name.
        name: String,
    },
    /// An operation the table's kind does not offer (a range scan of a hash table).
    #[error("{op} is not supported by {kind} tables")]
    WrongTableKind {
        /// The operation.
        op: &'static str,
        /// The table's kind.
        kind: &'static str,
    },
    /// A catalog entry that does not decode (a wrong catalog address, or corruption).
    #[error("catalog entry {name:?} is corrupt: {reason}")]
    CorruptCatalog {
        /// The table's name.
        name: String,
        /// What was wrong with it.
        reason: &'static str,
    },
}

impl Error {
    /// The abort inside, if this error is a retryable conflict.
    pub fn as_abort(&self) -> Option<Abort> {
        match self {
            Error::Aborted(a) => Some(*a),
            _ => None,
        }
    }
}
