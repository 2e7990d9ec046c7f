//! The engine's side of a cluster (DESIGN §4, FaRMv2 §3–§4): how a database reaches owners in
//! other processes, and how it serves the transactions of coordinators in other processes.
//!
//! The crate knows nothing of sockets. A cluster node (or client) opens its database with
//! [`Ordo::with_remote`](crate::Ordo::with_remote), handing it a [`Remote`]: the network half
//! of the participant seam, implemented by `ordo-cluster`. Every region is then either
//! **local** — this process holds its primary copy, and the coordinator calls into the heap as
//! the embedded engine does — or **remote**, and the step goes through the `Remote`.
//! Replication is the `Remote`'s too: a local primary's COMMIT-BACKUP and TRUNCATE reach the
//! region's backups through it.
//!
//! The other direction is the `serve_*` family on [`Ordo`](crate::Ordo): what a node's network
//! task calls when another coordinator's message arrives. LOCK keeps the locked part and its
//! lock token in a table keyed by [`TxKey`] until COMMIT-PRIMARY or ABORT consumes it;
//! COMMIT-BACKUP keeps the image of a part this node backs up until TRUNCATE applies it
//! ([`crate::heap`]'s `apply_backup`). None of them blocks: a lock that is taken is an abort,
//! as locally.
//!
//! Parts travel as [`PartWire`]: three words per entry (address, kind and length, expectation)
//! and the payload words, checked entry by entry when decoded.
//!
//! # Layering
//! This module holds the cluster's vocabulary — the wire types and the serving tables — and
//! depends on the transaction layer only. [`Remote`] is defined beside the participants that
//! call it (`txn::participant`) and re-exported here; the `serve_*` methods are defined with the
//! handle (`db/serve.rs`), which owns the tables. Neither of those names this module's users.
//!
//! # Invariants
//! * A [`TxKey`] is in the lock table from a successful LOCK until the COMMIT-PRIMARY or ABORT
//!   naming it; its worker (and so its thread slot) is held that long, nothing longer.
//! * A slot reserved for a remote coordinator is released exactly once: by its transaction's
//!   ABORT (through the locked part when LOCK got that far, else through the ABORT's own list),
//!   by COMMIT-PRIMARY of a free, by [`Ordo::serve_release`](crate::Ordo::serve_release), or —
//!   its coordinator dead and the slot never locked — by recovery's query
//!   ([`Ordo::serve_recovery_state`](crate::Ordo::serve_recovery_state)). Only slots reserved
//!   here are released or locked as allocations here.
//! * A backup applies a part only at TRUNCATE, and never over a newer version of an object.
//! * Every record (a `Backed` part) names the regions its transaction writes, so that the cluster's
//!   recovery can tell whether every part of a dead coordinator's transaction survives.
//! * What happened to a transaction here — installed (COMMIT-PRIMARY), applied (TRUNCATE),
//!   aborted (ABORT) or forgotten (discard) — is kept in a bounded ring of [`Evidence`]
//!   ([`EVIDENCE_MAX`] entries) after its lock or record is gone: recovery's vote needs it when
//!   one part of a transaction was already consumed and another was not.
//!
//! # Recovery (Cluster III, FaRMv2 §4.7)
//! After a reconfiguration removes members, the CM asks every survivor for its
//! [`RecoveryState`] about the removed coordinators' transactions
//! ([`Ordo::serve_recovery_state`](crate::Ordo::serve_recovery_state)), decides each one
//! (`ordo_cluster::recovery`), and every survivor carries out the [`Decision`]s
//! ([`Ordo::serve_resolve`](crate::Ordo::serve_resolve)): a commit installs the locked parts at
//! the record's write timestamp and applies the records; an abort releases the locks and drops
//! the records. A backup promoted to primary takes over its region's allocator state with
//! [`Ordo::promote_region`](crate::Ordo::promote_region) once no record of the region is
//! pending there.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use ordo_clock::Timestamp;

use crate::addr::Addr;
use crate::error::{Abort, Error};
use crate::heap::AllocCache;
use crate::object::Expect;
use crate::txn::participant::LocalLocks;
pub use crate::txn::participant::{ReadAt, Remote};
use crate::txn::set::WriteSet;
pub use crate::txn::set::{ReadEntry, WriteKind, WritePart};
use crate::txn::worker::Worker;

/// A transaction's part at one owner, as it travels: three words per entry and the payloads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartWire {
    /// Per entry: the address; `kind | len_bytes << 8`; the expectation (`tag << 62 | ts`).
    pub entries: Vec<u64>,
    /// The payloads, each `ceil(len_bytes / 8)` words, in entry order.
    pub words: Vec<u64>,
}

const EXPECT_VERSION: u64 = 0;
const EXPECT_NOT_AFTER: u64 = 1;
const EXPECT_FREE: u64 = 2;

impl PartWire {
    /// Encodes `part`.
    pub fn of(part: WritePart<'_>) -> Self {
        let mut w = PartWire {
            entries: Vec::with_capacity(part.len() * 3),
            words: Vec::with_capacity(part.entries().iter().map(|e| e.len_bytes.div_ceil(8)).sum()),
        };
        for e in part.entries() {
            let kind = match e.kind {
                WriteKind::Update => 0u64,
                WriteKind::Alloc => 1,
                WriteKind::Free => 2,
            };
            let expect = match e.expect {
                Expect::Version(ts) => (EXPECT_VERSION << 62) | ts.as_nanos(),
                Expect::NotAfter(ts) => (EXPECT_NOT_AFTER << 62) | ts.as_nanos(),
                Expect::Free => EXPECT_FREE << 62,
            };
            w.entries.extend([e.addr.to_raw(), kind | ((e.len_bytes as u64) << 8), expect]);
            w.words.extend_from_slice(part.data(e));
        }
        w
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len() / 3
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The region of the first entry (a part is one region's).
    pub fn region(&self) -> Option<u16> {
        self.entries.first().map(|a| Addr::from_raw(*a).region())
    }

    /// The addresses of the allocations.
    pub fn allocs(&self) -> impl Iterator<Item = Addr> + '_ {
        self.entries.chunks_exact(3).filter(|e| e[1] & 0xff == 1).map(|e| Addr::from_raw(e[0]))
    }

    /// Decodes into a write set, checking every entry: its kind and expectation, that its
    /// payload is there, that addresses ascend within one region.
    pub(crate) fn decode(&self, into: &mut WriteSet) -> Result<(), Error> {
        into.clear();
        if !self.entries.len().is_multiple_of(3) {
            return Err(Error::Config(format!(
                "a part of {} words is not whole entries of 3",
                self.entries.len()
            )));
        }
        let mut at = 0usize;
        let mut last: Option<Addr> = None;
        let mut bytes = Vec::new();
        for e in self.entries.chunks_exact(3) {
            let addr = Addr::from_raw(e[0]);
            let bad = |what: &str| Error::Config(format!("part entry {addr:?}: {what}"));
            if last.is_some_and(|l| l >= addr || l.region() != addr.region()) {
                return Err(bad("addresses do not ascend within one region"));
            }
            last = Some(addr);
            let kind = match e[1] & 0xff {
                0 => WriteKind::Update,
                1 => WriteKind::Alloc,
                2 => WriteKind::Free,
                k => return Err(bad(&format!("unknown kind {k}"))),
            };
            let len_bytes = usize::try_from(e[1] >> 8).unwrap_or(usize::MAX);
            if len_bytes == 0 || len_bytes > crate::heap::OBJECT_BYTES_MAX {
                return Err(bad(&format!("length {len_bytes} out of range")));
            }
            let ts = Timestamp::from_nanos(e[2] & crate::object::TS_MASK);
            let expect = match e[2] >> 62 {
                EXPECT_VERSION => Expect::Version(ts),
                EXPECT_NOT_AFTER => Expect::NotAfter(ts),
                EXPECT_FREE => Expect::Free,
                t => return Err(bad(&format!("unknown expectation {t}"))),
            };
            let n = len_bytes.div_ceil(8);
            let Some(data) = self.words.get(at..at + n) else {
                return Err(bad("payload missing"));
            };
            let tail_bits = 8 * (len_bytes % 8);
            if tail_bits != 0 && data[n - 1] >> tail_bits != 0 {
                return Err(bad("payload padding is not zero"));
            }
            at += n;
            bytes.clear();
            for w in data {
                bytes.extend_from_slice(&w.to_le_bytes());
            }
            into.push(addr, kind, &bytes[..len_bytes], expect);
        }
        if at != self.words.len() {
            return Err(Error::Config(format!(
                "a part carries {} payload words beyond its entries",
                self.words.len() - at
            )));
        }
        Ok(())
    }
}

/// A remote coordinator's commit attempt at one region: who coordinates it, its number there,
/// and the region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TxKey {
    /// The coordinator (a node id, or a client's id).
    pub coordinator: u64,
    /// The attempt's number at the coordinator.
    pub tx: u64,
    /// The region of the part.
    pub region: u16,
}

/// An error as it travels between processes: a code and up to three words. Aborts and the
/// engine's input errors round-trip; anything else becomes a message only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// What kind of error (see [`Refusal::of`]).
    pub code: u16,
    /// The address it concerns (0 when none).
    pub addr: u64,
    /// Further fields, by code.
    pub a: u64,
    /// Further fields, by code.
    pub b: u64,
}

impl Refusal {
    /// The code of an error that has no other encoding (its message travels alongside).
    pub const OTHER: u16 = 0xffff;

    /// Encodes `e`; errors that do not round-trip get [`Refusal::OTHER`].
    pub fn of(e: &Error) -> Refusal {
        let r = |code: u16, addr: Addr, a: u64, b: u64| Refusal { code, addr: addr.to_raw(), a, b };
        match *e {
            Error::Aborted(a) => match a {
                Abort::ReadLocked { addr } => r(1, addr, 0, 0),
                Abort::TooNew { addr, version, rts } => {
                    r(2, addr, version.as_nanos(), rts.as_nanos())
                }
                Abort::LockBusy { addr } => r(3, addr, 0, 0),
                Abort::WriteConflict { addr } => r(4, addr, 0, 0),
                Abort::Validation { addr } => r(5, addr, 0, 0),
                Abort::VersionMemory { addr } => r(6, addr, 0, 0),
                Abort::Requested => r(7, Addr::NULL, 0, 0),
            },
            Error::InvalidAddress { addr } => r(20, addr, 0, 0),
            Error::NotAllocated { addr } => r(21, addr, 0, 0),
            Error::VersionRecycled { addr } => r(22, addr, 0, 0),
            Error::CorruptObject { addr, len_bytes } => r(23, addr, len_bytes as u64, 0),
            Error::SnapshotTooOld { ts, gc_point } => {
                r(24, Addr::NULL, ts.as_nanos(), gc_point.as_nanos())
            }
            Error::OutOfMemory { regions, region_bytes } => {
                r(25, Addr::NULL, regions as u64, region_bytes as u64)
            }
            Error::TooLarge { len_bytes, max_bytes } => {
                r(26, Addr::NULL, len_bytes as u64, max_bytes as u64)
            }
            Error::ZeroSize => r(27, Addr::NULL, 0, 0),
            _ => r(Self::OTHER, Addr::NULL, 0, 0),
        }
    }

    /// Decodes; `None` for [`Refusal::OTHER`] and unknown codes.
    pub fn into_error(self) -> Option<Error> {
        let addr = Addr::from_raw(self.addr);
        let ts = Timestamp::from_nanos;
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        Some(match self.code {
            1 => Abort::ReadLocked { addr }.into(),
            2 => Abort::TooNew { addr, version: ts(self.a), rts: ts(self.b) }.into(),
            3 => Abort::LockBusy { addr }.into(),
            4 => Abort::WriteConflict { addr }.into(),
            5 => Abort::Validation { addr }.into(),
            6 => Abort::VersionMemory { addr }.into(),
            7 => Abort::Requested.into(),
            20 => Error::InvalidAddress { addr },
            21 => Error::NotAllocated { addr },
            22 => Error::VersionRecycled { addr },
            23 => Error::CorruptObject { addr, len_bytes: size(self.a) },
            24 => Error::SnapshotTooOld { ts: ts(self.a), gc_point: ts(self.b) },
            25 => Error::OutOfMemory { regions: size(self.a), region_bytes: size(self.b) },
            26 => Error::TooLarge { len_bytes: size(self.a), max_bytes: size(self.b) },
            27 => Error::ZeroSize,
            _ => return None,
        })
    }
}

/// A part locked for a remote coordinator: its write set, the lock token, and the worker whose
/// scratch the token uses.
pub(crate) struct Locked {
    pub(crate) writes: WriteSet,
    pub(crate) locks: LocalLocks,
    pub(crate) worker: Box<Worker>,
}

/// A part this node backs up, waiting for TRUNCATE.
pub(crate) struct Backed {
    pub(crate) wts: Timestamp,
    pub(crate) part: WriteSet,
    /// Every region the transaction writes (this part's included), ascending.
    pub(crate) regions: Vec<u16>,
}

/// How many [`Evidence`] entries a node keeps (the oldest are dropped first). Recovery needs
/// the evidence of transactions whose coordinator died mid-commit: those of the last lease
/// period or so, far fewer than this at any throughput the network allows.
pub const EVIDENCE_MAX: usize = 1 << 16;

/// What a node saw happen to one transaction's part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Seen {
    /// A primary installed it (COMMIT-PRIMARY): the transaction committed.
    Installed,
    /// A backup applied it (TRUNCATE): the transaction committed.
    Applied,
    /// A primary released it on ABORT: the coordinator aborted.
    Aborted,
    /// A backup dropped it (discard): the coordinator aborted after COMMIT-BACKUP.
    Forgotten,
}

impl Seen {
    /// Whether this proves the transaction committed (else it proves it aborted).
    pub fn is_commit(self) -> bool {
        matches!(self, Seen::Installed | Seen::Applied)
    }

    /// The wire code.
    pub fn code(self) -> u64 {
        match self {
            Seen::Installed => 0,
            Seen::Applied => 1,
            Seen::Aborted => 2,
            Seen::Forgotten => 3,
        }
    }

    /// From the wire code.
    pub fn from_code(code: u64) -> Option<Seen> {
        Some(match code {
            0 => Seen::Installed,
            1 => Seen::Applied,
            2 => Seen::Aborted,
            3 => Seen::Forgotten,
            _ => return None,
        })
    }
}

/// One transaction's fate as a node saw it (see [`Seen`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Evidence {
    /// The coordinator.
    pub coordinator: u64,
    /// The attempt's number there.
    pub tx: u64,
    /// What happened.
    pub seen: Seen,
    /// The write timestamp (zero for an abort).
    pub wts: Timestamp,
}

/// A record (COMMIT-BACKUP) held here and not applied yet, as recovery sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The transaction's part.
    pub key: TxKey,
    /// Its write timestamp.
    pub wts: Timestamp,
    /// Every region the transaction writes.
    pub regions: Vec<u16>,
}

/// What one survivor holds of some coordinators' transactions (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryState {
    /// Records backed up here and not applied.
    pub records: Vec<Record>,
    /// Parts locked here (this node is their region's primary).
    pub locks: Vec<TxKey>,
    /// What happened here to their transactions.
    pub evidence: Vec<Evidence>,
}

/// Recovery's verdict on one transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decision {
    /// The coordinator.
    pub coordinator: u64,
    /// The attempt's number there.
    pub tx: u64,
    /// `Some(wts)`: committed at `wts`; `None`: aborted.
    pub commit: Option<Timestamp>,
}

/// What [`Ordo::serve_resolve`](crate::Ordo::serve_resolve) did here.
#[derive(Debug, Default)]
pub struct Resolved {
    /// Locked parts installed.
    pub installed: usize,
    /// Locked parts released.
    pub released: usize,
    /// Records applied.
    pub applied: usize,
    /// Records dropped.
    pub dropped: usize,
    /// Steps that failed, with the part and the error (for the caller to log).
    pub errors: Vec<(TxKey, Error)>,
}

/// The bounded ring of [`Evidence`].
#[derive(Default)]
pub(crate) struct EvidenceRing(VecDeque<Evidence>);

impl EvidenceRing {
    pub(crate) fn push(&mut self, e: Evidence) {
        if self.0.len() >= EVIDENCE_MAX {
            self.0.pop_front();
        }
        self.0.push_back(e);
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Evidence> {
        self.0.iter()
    }
}

/// The serving state of a database in a cluster (see the module docs).
#[derive(Default)]
pub(crate) struct ServeState {
    pub(crate) locked: Mutex<HashMap<TxKey, Locked>>,
    pub(crate) backed: Mutex<HashMap<TxKey, Backed>>,
    /// Idle workers for serving (each holds a thread slot and participant scratch).
    #[allow(clippy::vec_box)]
    pub(crate) workers: Mutex<Vec<Box<Worker>>>,
    pub(crate) alloc: Mutex<AllocCache>,
    /// Slots reserved here for remote coordinators (the value: which) and not yet consumed by
    /// their LOCK or given back: only these may be released or locked as allocations (a slot
    /// reserved at a region's old primary is not one of this node's, even once it is the
    /// primary), and recovery gives back those of dead coordinators.
    pub(crate) reserved: Mutex<HashMap<Addr, u64>>,
    /// What happened to recent transactions here (recovery's evidence).
    pub(crate) evidence: Mutex<EvidenceRing>,
    /// Regions this node was promoted to primary of, and when: reads of older versions there
    /// are refused (the backup copy kept none).
    pub(crate) promoted: Mutex<HashMap<u16, Timestamp>>,
    /// Backup applies that failed (a bad image): counted, logged by the caller.
    pub(crate) apply_errors: std::sync::atomic::AtomicU64,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counters of the serving side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServeStats {
    /// Parts locked for remote coordinators, not yet committed or aborted.
    pub locked: usize,
    /// Parts backed up, waiting for truncation.
    pub backed: usize,
    /// Backup applies that failed.
    pub apply_errors: u64,
    /// Slots reserved for remote coordinators and not yet locked or given back.
    pub reserved: usize,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ordo_clock::{Clock, LogicalClock};

    use super::*;
    use crate::db::{Config, Ordo};

    /// A `Remote` for one process that holds region 1's primary: it records what the
    /// coordinator sends to the backups, and owns nothing else.
    #[derive(Default)]
    struct Recording {
        backed: Mutex<Vec<(u64, PartWire, Timestamp)>>,
        truncated: Mutex<Vec<u64>>,
    }

    fn refuse() -> Error {
        Error::Config("no remote owner in this test".into())
    }

    impl Remote for Recording {
        fn is_local_primary(&self, region: u16) -> bool {
            region == 1
        }
        fn read(&self, _: Addr, _: ReadAt, _: &mut Vec<u64>) -> Result<ReadEntry, Error> {
            Err(refuse())
        }
        fn still_newest(&self, _: &ReadEntry, _: Timestamp) -> Result<bool, Error> {
            Err(refuse())
        }
        fn reserve(&self, _: Option<Addr>, _: usize) -> Result<(Addr, Timestamp), Error> {
            Err(refuse())
        }
        fn release(&self, _: Addr) -> Result<(), Error> {
            Err(refuse())
        }
        fn lock(&self, _: u64, _: WritePart<'_>) -> Result<(), Error> {
            Err(refuse())
        }
        fn validate(&self, _: &[ReadEntry]) -> Result<(), Error> {
            Err(refuse())
        }
        fn commit_backup(&self, tx: u64, part: WritePart<'_>, wts: Timestamp) -> Result<(), Error> {
            lock(&self.backed).push((tx, PartWire::of(part), wts));
            Ok(())
        }
        fn forget_backup(&self, _: u64, _: WritePart<'_>) {}
        fn commit_primary(&self, _: u64, _: u16, _: Timestamp) -> Result<(), Error> {
            Err(refuse())
        }
        fn truncate(&self, tx: u64, _: u16, _: Timestamp) -> Result<(), Error> {
            lock(&self.truncated).push(tx);
            Ok(())
        }
        fn abort(&self, _: u64, _: WritePart<'_>) -> Result<(), Error> {
            Err(refuse())
        }
    }

    fn small() -> Config {
        let mut c = Config::default();
        c.heap.region_bytes = 2 << 20;
        c.gc_interval_us = 0;
        c
    }

    fn member(home: Vec<u16>) -> (Ordo<LogicalClock>, Arc<Recording>) {
        let r = Arc::new(Recording::default());
        let db = Ordo::with_remote(small(), LogicalClock::new(), r.clone(), home).unwrap();
        (db, r)
    }

    fn key(tx: u64) -> TxKey {
        TxKey { coordinator: 9, tx, region: 1 }
    }

    #[test]
    fn a_backup_equals_its_primary_after_truncation_only() {
        let (primary, rec) = member(vec![1]);
        let (backup, _) = member(vec![]);
        let a = primary.run(|tx| tx.alloc(&1u64)).unwrap();
        let b = primary.run(|tx| tx.alloc_bytes(&[5u8; 300])).unwrap();
        assert_eq!((a.region(), b.region()), (1, 1), "allocation opens home regions only");
        primary.run(|tx| tx.write(a, &2u64)).unwrap();
        primary.run(|tx| tx.free(b)).unwrap();
        let c = primary.run(|tx| tx.alloc(&3u64)).unwrap();
        let backed = std::mem::take(&mut *lock(&rec.backed));
        assert_eq!(backed.len(), 5);
        assert_eq!(*lock(&rec.truncated), backed.iter().map(|b| b.0).collect::<Vec<_>>());
        for (tx, part, wts) in &backed {
            backup.serve_backup(key(*tx), part, *wts, &[1]).unwrap();
        }
        assert_ne!(primary.region_digest(1), backup.region_digest(1).or(Some(0)));
        assert_eq!(backup.serve_stats().backed, 5);
        // Truncations out of order: the newest version of `a` arrives first and stays.
        for (tx, ..) in backed.iter().rev() {
            assert!(backup.serve_truncate(key(*tx)).unwrap());
        }
        assert!(!backup.serve_truncate(key(backed[0].0)).unwrap(), "a repeated truncation");
        assert_eq!(primary.region_digest(1), backup.region_digest(1));
        assert!(primary.region_digest(1).is_some());
        // The backup holds the committed values (read through its own heap).
        let mut out = Vec::new();
        assert_eq!(backup.serve_read(a, at(u64::MAX), &mut out).map(|_| out[0]).unwrap(), 2);
        assert_eq!(backup.serve_read(c, at(u64::MAX), &mut out).map(|_| out[0]).unwrap(), 3);
    }

    /// Two TRUNCATEs of the same objects, served on two threads at once (two coordinators'
    /// commits of consecutive versions): the newer versions stay, whole. The check "not over a
    /// newer version" and the install were once two steps, and the older truncation could
    /// install over the newer one between them, or mix its words into it (a cluster history
    /// run hit it in CI). Each part writes many objects, so that the two applies overlap.
    #[test]
    fn concurrent_truncations_of_one_object_keep_the_newer_version() {
        const ROUNDS: usize = 60;
        const OBJECTS: usize = 48;
        const BYTES: usize = 2000;
        let (primary, rec) = member(vec![1]);
        let (backup, _) = member(vec![]);
        let objects: Vec<Addr> = (0..OBJECTS)
            .map(|_| primary.run(|tx| tx.alloc_bytes(&[0u8; BYTES])).unwrap())
            .collect();
        for v in 1..=2 * ROUNDS {
            primary
                .run(|tx| objects.iter().try_for_each(|&o| tx.write_bytes(o, &[v as u8; BYTES])))
                .unwrap();
        }
        let backed = std::mem::take(&mut *lock(&rec.backed));
        assert_eq!(backed.len(), OBJECTS + 2 * ROUNDS);
        for (tx, part, wts) in &backed {
            backup.serve_backup(key(*tx), part, *wts, &[1]).unwrap();
        }
        for (tx, ..) in &backed[..OBJECTS] {
            backup.serve_truncate(key(*tx)).unwrap();
        }
        let barrier = std::sync::Barrier::new(2);
        let mut out = Vec::new();
        for r in 0..ROUNDS {
            let (older, newer) = (&backed[OBJECTS + 2 * r], &backed[OBJECTS + 2 * r + 1]);
            std::thread::scope(|s| {
                for (tx, ..) in [older, newer] {
                    let (backup, barrier) = (&backup, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        backup.serve_truncate(key(*tx)).unwrap()
                    });
                }
            });
            for &o in &objects {
                let read = backup.serve_read(o, at(u64::MAX), &mut out).unwrap();
                assert_eq!(read.header.ts(), newer.2, "round {r}, {o:?}: the older version won");
                let bytes: Vec<u8> = out.iter().flat_map(|w| w.to_le_bytes()).take(BYTES).collect();
                assert_eq!(bytes, vec![(2 * r + 2) as u8; BYTES], "round {r}, {o:?}: mixed");
            }
        }
        assert_eq!(primary.region_digest(1), backup.region_digest(1));
    }

    fn at(rts: u64) -> ReadAt {
        ReadAt { rts: Timestamp::from_nanos(rts), check_lock: true, old_versions: false }
    }

    #[test]
    fn a_digest_sees_a_changed_payload() {
        let (primary, rec) = member(vec![1]);
        let (backup, _) = member(vec![]);
        let a = primary.run(|tx| tx.alloc(&1u64)).unwrap();
        let (tx, mut part, wts) = lock(&rec.backed).pop().unwrap();
        part.words[0] = 99; // a backup applying a different value
        backup.serve_backup(key(tx), &part, wts, &[1]).unwrap();
        backup.serve_truncate(key(tx)).unwrap();
        assert_ne!(primary.region_digest(1), backup.region_digest(1), "{a:?}");
    }

    #[test]
    fn malformed_parts_are_refused_and_change_nothing() {
        let (db, _) = member(vec![1]);
        let good = |addr: u64| PartWire { entries: vec![addr, 8 << 8, 0], words: vec![1] };
        let a = Addr::new(1, 64).to_raw();
        let bad = [
            PartWire { entries: vec![a, 8 << 8], words: vec![1] },
            PartWire { entries: vec![a, 3 | (8 << 8), 0], words: vec![1] },
            PartWire { entries: vec![a, 0, 0], words: vec![] },
            PartWire { entries: vec![a, 1 << 40, 0], words: vec![1] },
            PartWire { entries: vec![a, 8 << 8, 3 << 62], words: vec![1] },
            PartWire { entries: vec![a, 16 << 8, 0], words: vec![1] },
            PartWire { entries: vec![a, 8 << 8, 0], words: vec![1, 2] },
            PartWire { entries: vec![a, 3 << 8, 0], words: vec![1 << 40] },
            PartWire { entries: [good(a).entries, good(a).entries].concat(), words: vec![1, 1] },
            PartWire {
                entries: [good(a).entries, good(Addr::new(2, 64).to_raw()).entries].concat(),
                words: vec![1, 1],
            },
        ];
        for (i, p) in bad.iter().enumerate() {
            assert!(db.serve_lock(key(i as u64), p).is_err(), "part {i} accepted: {p:?}");
            assert!(
                db.serve_backup(key(i as u64), p, Timestamp::from_nanos(5), &[1]).is_err(),
                "{i}"
            );
        }
        assert_eq!(db.serve_stats(), ServeStats::default());
        // A part for another region than its key names is refused too.
        let other = TxKey { region: 2, ..key(1) };
        assert!(db.serve_lock(other, &good(a)).is_err());
        // COMMIT-PRIMARY of a key that holds no locks.
        assert!(db.serve_commit_primary(key(1), Timestamp::from_nanos(9)).is_err());
    }

    #[test]
    fn lock_commit_and_abort_serve_remote_coordinators() {
        let (db, _) = member(vec![1]);
        let a = db.run(|tx| tx.alloc(&1u64)).unwrap();
        let head = db.serve_read(a, at(u64::MAX), &mut Vec::new()).unwrap();
        let expect = (EXPECT_VERSION << 62) | head.header.ts().as_nanos();
        let part = PartWire { entries: vec![a.to_raw(), 8 << 8, expect], words: vec![42] };
        db.serve_lock(key(1), &part).unwrap();
        assert!(db.serve_lock(key(1), &part).is_err(), "one key locks once");
        // A second coordinator finds the object locked: an abort it retries.
        let r = db.serve_lock(key(2), &part);
        assert!(matches!(r, Err(Error::Aborted(Abort::LockBusy { .. }))), "{r:?}");
        let r = db.serve_read(a, at(u64::MAX), &mut Vec::new());
        assert!(matches!(r, Err(Error::Aborted(Abort::ReadLocked { .. }))), "{r:?}");
        db.serve_commit_primary(key(1), db.clock().get_ts()).unwrap();
        let mut out = Vec::new();
        db.serve_read(a, at(u64::MAX), &mut out).unwrap();
        assert_eq!(out, vec![42]);
        // An abort releases the locks; a reserved slot is released once, and only in its region.
        let head = db.serve_read(a, at(u64::MAX), &mut Vec::new()).unwrap();
        let expect = (EXPECT_VERSION << 62) | head.header.ts().as_nanos();
        let part = PartWire { entries: vec![a.to_raw(), 8 << 8, expect], words: vec![7] };
        db.serve_lock(key(3), &part).unwrap();
        db.serve_abort(key(3), &[]).unwrap();
        assert_eq!(db.serve_stats().locked, 0);
        db.serve_read(a, at(u64::MAX), &mut out).unwrap();
        assert_eq!(out, vec![42]);
        let (slot, _) = db.serve_reserve(7, 8).unwrap();
        assert!(db.serve_release(a).is_err(), "an allocated object is not a reservation");
        db.serve_abort(key(4), &[slot, Addr::new(2, 64)]).unwrap();
        assert_eq!(db.serve_reserve(7, 8).unwrap().0, slot, "the released slot is reused");
        // Only a slot reserved here is released or locked as an allocation here: a repeated
        // release, or one of a slot reserved at a region's old primary, is refused rather than
        // freeing a slot twice (or another attempt's).
        db.serve_release(slot).unwrap();
        assert!(matches!(db.serve_release(slot), Err(Error::NotAllocated { .. })));
        // Kind 1 (an allocation) of 8 bytes, expecting a free slot.
        let alloc = |slot: Addr| PartWire {
            entries: vec![slot.to_raw(), 1 | (8 << 8), EXPECT_FREE << 62],
            words: vec![5],
        };
        let r = db.serve_lock(key(5), &alloc(slot));
        assert!(matches!(r, Err(Error::Aborted(Abort::WriteConflict { .. }))), "{r:?}");
        let (slot, _) = db.serve_reserve(7, 8).unwrap();
        db.serve_lock(key(6), &alloc(slot)).unwrap();
        db.serve_abort(key(6), &[]).unwrap();
        assert!(
            db.serve_release(slot).is_err(),
            "the locked part owned it, and ABORT gave it back"
        );
        // Recovery's query gives back what a dead coordinator reserved and never locked.
        let (slot, _) = db.serve_reserve(9, 8).unwrap();
        db.serve_reserve(7, 8).unwrap();
        assert_eq!(db.serve_stats().reserved, 2);
        db.serve_recovery_state(&[9]);
        assert_eq!(db.serve_stats().reserved, 1, "coordinator 7's stays");
        assert_eq!(db.serve_reserve(7, 8).unwrap().0, slot, "the orphaned slot is free again");
    }

    #[test]
    fn refusals_round_trip() {
        let a = Addr::new(3, 128);
        let t = Timestamp::from_nanos;
        let errors = [
            Error::Aborted(Abort::ReadLocked { addr: a }),
            Error::Aborted(Abort::TooNew { addr: a, version: t(9), rts: t(5) }),
            Error::Aborted(Abort::LockBusy { addr: a }),
            Error::Aborted(Abort::WriteConflict { addr: a }),
            Error::Aborted(Abort::Validation { addr: a }),
            Error::Aborted(Abort::VersionMemory { addr: a }),
            Error::Aborted(Abort::Requested),
            Error::InvalidAddress { addr: a },
            Error::NotAllocated { addr: a },
            Error::VersionRecycled { addr: a },
            Error::CorruptObject { addr: a, len_bytes: 12 },
            Error::SnapshotTooOld { ts: t(3), gc_point: t(8) },
            Error::OutOfMemory { regions: 4, region_bytes: 1 << 20 },
            Error::TooLarge { len_bytes: 1 << 20, max_bytes: 1 << 18 },
            Error::ZeroSize,
        ];
        for e in errors {
            assert_eq!(Refusal::of(&e).into_error(), Some(e.clone()), "{e}");
        }
        let other = Refusal::of(&Error::Config("x".into()));
        assert_eq!(other.code, Refusal::OTHER);
        assert_eq!(other.into_error(), None);
        assert_eq!(Refusal { code: 999, addr: 0, a: 0, b: 0 }.into_error(), None);
    }
}

#[cfg(test)]
mod decode_props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ordo_seed::proptest_config("arbitrary_parts_decode_or_are_refused", 256))]

        /// Any words decode to a part or a typed error, never a panic; a part that decodes
        /// encodes back to the same words.
        #[test]
        fn arbitrary_parts_decode_or_are_refused(
            entries in prop::collection::vec(any::<u64>(), 0..24),
            words in prop::collection::vec(any::<u64>(), 0..24),
        ) {
            let wire = PartWire { entries, words };
            let mut set = WriteSet::default();
            if wire.decode(&mut set).is_ok() {
                prop_assert_eq!(PartWire::of(set.part(0..set.len())), wire);
            }
        }

        /// Well-formed parts (ascending addresses in one region) always decode and round-trip.
        #[test]
        fn well_formed_parts_round_trip(
            lens in prop::collection::vec(1usize..200, 1..8),
            region in 1u16..100,
            kind in 0u64..3,
        ) {
            let mut wire = PartWire::default();
            for (i, len) in lens.iter().enumerate() {
                let addr = Addr::new(region, 64 + 4096 * i as u64);
                wire.entries.extend([addr.to_raw(), kind | ((*len as u64) << 8), (1 << 62) | 77]);
                wire.words.extend((0..len.div_ceil(8)).map(|w| w as u64));
            }
            let mut set = WriteSet::default();
            prop_assert!(wire.decode(&mut set).is_ok());
            prop_assert_eq!(PartWire::of(set.part(0..set.len())), wire);
        }
    }
}
