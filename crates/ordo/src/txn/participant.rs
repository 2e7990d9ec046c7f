//! The participant seam: what the coordinator asks of the owner of the objects (DESIGN §4).
//!
//! One coordinator ([`super::commit`]) serves the embedded engine and the cluster. It never touches
//! object memory itself; it asks a [`Participant`]. In one process the participant is the heap
//! ([`LocalParticipant`], direct calls); in `ordo-cluster` it will be an RPC client whose server
//! side calls the same local participant. Durability hooks in through `commit_backup`.

use ordo_clock::Timestamp;

use super::set::{ReadEntry, WriteKind, WriteSet};
use std::cell::RefCell;

use crate::addr::Addr;
use crate::durable::log::Log;
use crate::error::{Abort, Error};
use crate::heap::Heap;
use crate::mvcc::{Cursor, VersionArena};
use crate::object::{Header, LEN_SHIFT, LockFail, ReadFail, Snapshot};

/// The owner of objects, as seen by a transaction coordinator.
pub trait Participant {
    /// Reads the head version of `addr` into `out` (payload words). With `check_lock`, a locked
    /// head is an abort (FaRMv2 early abort).
    fn read(&self, addr: Addr, out: &mut Vec<u64>, check_lock: bool) -> Result<Snapshot, Error>;

    /// Locks every entry of `writes` whose head satisfies its `expect`, recording the replaced
    /// header in `locked`. On failure every lock taken is released and the abort returned.
    fn lock(&self, writes: &mut WriteSet) -> Result<(), Abort>;

    /// Checks that every read object not in `writes` is unlocked and still at the version read.
    fn validate(&self, reads: &[ReadEntry], writes: &WriteSet) -> Result<(), Abort>;

    /// Called before the write timestamp is drawn with a lower bound of it (the clock's
    /// `now().lo`): the durable marker must not pass a timestamp still to be logged.
    #[inline]
    fn begin_backup(&self, _lower: Timestamp) {}

    /// Makes the writes durable or replicated before they are installed (a no-op in memory).
    fn commit_backup(&self, writes: &WriteSet, wts: Timestamp) -> Result<(), Error>;

    /// Installs every write at `wts` and releases the locks; slots of freed objects return to
    /// the allocator.
    fn commit_primary(&self, writes: &mut WriteSet, wts: Timestamp);

    /// Releases every lock held by `writes` and every slot reserved for its allocations.
    fn abort(&self, writes: &mut WriteSet);
}

/// The in-process participant: the heap itself, plus old-version memory in multi-version mode.
pub struct LocalParticipant<'h> {
    heap: &'h Heap,
    versions: Option<(&'h VersionArena, &'h RefCell<Cursor>)>,
    /// The durable log and this thread's slot in it.
    log: Option<(&'h Log, usize)>,
}

impl<'h> LocalParticipant<'h> {
    pub(crate) fn new(
        heap: &'h Heap,
        versions: Option<(&'h VersionArena, &'h RefCell<Cursor>)>,
    ) -> Self {
        LocalParticipant { heap, versions, log: None }
    }

    /// The same participant, logging redo records to `log` as worker slot `slot`.
    pub(crate) fn with_log(mut self, log: Option<&'h Log>, slot: usize) -> Self {
        self.log = log.map(|l| (l, slot));
        self
    }
}

impl Participant for LocalParticipant<'_> {
    #[inline]
    fn read(&self, addr: Addr, out: &mut Vec<u64>, check_lock: bool) -> Result<Snapshot, Error> {
        match self.heap.object(addr)?.read(out, check_lock) {
            Ok(s) => Ok(s),
            Err(ReadFail::Locked) => Err(Abort::ReadLocked { addr }.into()),
            Err(ReadFail::BadLength { len_bytes }) => Err(Error::CorruptObject { addr, len_bytes }),
        }
    }

    fn lock(&self, writes: &mut WriteSet) -> Result<(), Abort> {
        let mut failure = None;
        for e in writes.entries_mut() {
            debug_assert!(e.locked.is_none());
            let Ok(obj) = self.heap.object(e.addr) else {
                // Addresses were checked when the write was buffered; slab layouts never change
                // while a transaction can hold them, so this is a conflict at worst.
                failure = Some(Abort::WriteConflict { addr: e.addr });
                break;
            };
            match obj.try_lock(e.expect) {
                Ok(previous) => {
                    e.locked = Some(previous);
                    // Multi-version: keep the replaced head for older readers. A slot that never
                    // held a version has nothing to keep. Exhausted memory truncates the history
                    // (FaRMv2 §5.3 "truncate"): older readers of this object will abort.
                    e.old_version = match self.versions {
                        Some((arena, cursor)) if previous.raw() != 0 => {
                            match arena.copy_head(cursor, obj, previous) {
                                Ok(ovp) => ovp,
                                Err(()) => {
                                    failure = Some(Abort::VersionMemory { addr: e.addr });
                                    break;
                                }
                            }
                        }
                        _ => 0,
                    };
                }
                Err(LockFail::Locked) => {
                    failure = Some(Abort::LockBusy { addr: e.addr });
                    break;
                }
                Err(LockFail::Changed { .. }) => {
                    failure = Some(Abort::WriteConflict { addr: e.addr });
                    break;
                }
            }
        }
        match failure {
            None => Ok(()),
            Some(abort) => {
                self.unlock_all(writes);
                Err(abort)
            }
        }
    }

    fn validate(&self, reads: &[ReadEntry], writes: &WriteSet) -> Result<(), Abort> {
        for r in reads {
            if writes.find(r.addr).is_some() {
                continue; // checked by the lock's `expect`
            }
            let unchanged = self.heap.object(r.addr).map(|o| o.validate(r.header)).unwrap_or(false);
            if !unchanged {
                return Err(Abort::Validation { addr: r.addr });
            }
        }
        Ok(())
    }

    #[inline]
    fn begin_backup(&self, lower: Timestamp) {
        // Both modes: the sync marker and the process-mode checkpoint bound must not pass a
        // timestamp this commit may still log.
        if let Some((log, slot)) = self.log {
            log.publish_lower(slot, lower.as_nanos());
        }
    }

    #[inline]
    fn commit_backup(&self, writes: &WriteSet, wts: Timestamp) -> Result<(), Error> {
        let Some((log, slot)) = self.log else {
            return Ok(());
        };
        let heap = self.heap;
        log.append_tx(slot, wts.as_nanos(), |rec| {
            for e in writes.entries() {
                let allocated = e.kind != WriteKind::Free;
                if e.kind == WriteKind::Alloc {
                    if let Some((slab, word)) = heap.slab_word(e.addr) {
                        rec.entry_words(slab.to_raw(), [word]);
                    }
                }
                let w0 = Header::version(wts, allocated).raw();
                let w1 = (e.len_bytes as u64) << LEN_SHIFT;
                let data = writes.data(e);
                rec.entry_words(e.addr.to_raw(), [w0, w1].into_iter().chain(data.iter().copied()));
            }
        })?;
        Ok(())
    }

    fn commit_primary(&self, writes: &mut WriteSet, wts: Timestamp) {
        for i in 0..writes.len() {
            let e = writes.entries()[i];
            let obj = self.heap.object(e.addr).expect("locked objects have valid addresses");
            debug_assert!(e.locked.is_some(), "installing an unlocked object");
            if e.old_version != 0 {
                if let Some((arena, _)) = self.versions {
                    arena.note_commit(e.old_version, wts);
                }
            }
            match e.kind {
                WriteKind::Update | WriteKind::Alloc => {
                    obj.install(wts, true, e.len_bytes, e.old_version, writes.data(&e));
                }
                WriteKind::Free => {
                    obj.install(wts, false, e.len_bytes, e.old_version, writes.data(&e));
                    self.heap.release(e.addr, Some(wts));
                }
            }
            writes.entries_mut()[i].locked = None;
        }
        if let Some((arena, cursor)) = self.versions {
            arena.finish_commit(cursor);
        }
    }

    fn abort(&self, writes: &mut WriteSet) {
        if let Some((log, slot)) = self.log {
            log.clear_lower(slot);
        }
        self.unlock_all(writes);
        if let Some((arena, cursor)) = self.versions {
            arena.finish_commit(cursor);
        }
        for e in writes.entries() {
            if e.kind == WriteKind::Alloc {
                self.heap.release(e.addr, None);
            }
        }
        writes.clear();
    }
}

impl LocalParticipant<'_> {
    fn unlock_all(&self, writes: &mut WriteSet) {
        for e in writes.entries_mut() {
            if let Some(previous) = e.locked.take() {
                if let Ok(obj) = self.heap.object(e.addr) {
                    obj.unlock(previous);
                }
            }
        }
    }
}
