//! [`LocalParticipant`]: the participant of the regions in this process — the heap itself, its
//! old-version memory in multi-version mode, and the durable log as its backup.
//!
//! Its lock token ([`LocalLocks`]) lists, per locked entry, the header the lock replaced and the
//! old-version pointer of the copy of the replaced head. The token's vector is the worker's
//! ([`LocalScratch`]): `lock` takes it, `commit_primary` and `abort` give it back, so a warm
//! worker commits without allocating.

use std::cell::{Cell, RefCell};

use ordo_clock::Timestamp;

use super::{Participant, ReadAt};
use crate::addr::Addr;
use crate::durable::log::Log;
use crate::error::{Abort, Error};
use crate::heap::Heap;
use crate::mvcc::{Cursor, Recycled, VersionArena};
use crate::object::{Header, LEN_SHIFT, LockFail, ReadFail, UsedBytes};
use crate::txn::set::{ReadEntry, WriteKind, WritePart, WriteSet};
use crate::txn::view::View;

/// What the lock of one entry replaced.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held {
    /// The unlocked header the lock replaced: restored by an abort.
    previous: Header,
    /// The OVP of the copy of the replaced head (multi-version mode; 0 = none): the installed
    /// head points at it.
    ovp: u64,
}

/// The per-thread state of the local participant, kept in the worker across transactions.
#[derive(Default)]
pub(crate) struct LocalScratch {
    /// The worker's old-version block and bump pointer.
    pub(crate) cursor: RefCell<Cursor>,
    /// The vector of the next lock token, empty while a token holds it.
    held: Cell<Vec<Held>>,
}

/// The lock token of a [`LocalParticipant`]: per entry of the locked part, in order, the header
/// the lock replaced and the old-version pointer of the copy of the replaced head.
#[derive(Debug)]
#[must_use = "locks are released only by commit_primary or abort"]
pub struct LocalLocks {
    held: Vec<Held>,
}

/// The in-process participant: the heap itself, plus old-version memory in multi-version mode
/// and the durable log in a durable database.
///
/// Building one costs a few address computations (it is built for every read): it holds
/// references only, and the read path's cold branches take the pieces they need by value, so the
/// fast path never materialises it.
#[derive(Clone, Copy)]
pub struct LocalParticipant<'h> {
    heap: &'h Heap,
    /// Old-version memory (multi-version mode), resolved where it is used.
    versions: &'h Option<VersionArena>,
    /// The worker's old-version cursor and lock-token vector.
    scratch: &'h LocalScratch,
    /// The durable log and this thread's slot in it.
    log: Option<(&'h Log, usize)>,
}

impl<'h> LocalParticipant<'h> {
    /// The participant of `heap`, keeping old versions in `versions` (multi-version mode), with
    /// the worker state `scratch`.
    #[inline]
    pub(crate) fn new(
        heap: &'h Heap,
        versions: &'h Option<VersionArena>,
        scratch: &'h LocalScratch,
    ) -> Self {
        LocalParticipant { heap, versions, scratch, log: None }
    }

    /// Old-version memory and the worker's cursor in it (multi-version mode).
    #[inline]
    fn arena(&self) -> Option<(&'h VersionArena, &'h RefCell<Cursor>)> {
        self.versions.as_ref().map(|arena| (arena, &self.scratch.cursor))
    }

    /// The same participant, logging redo records to `log` as worker slot `slot`.
    #[inline]
    pub(crate) fn with_log(mut self, log: Option<&'h Log>, slot: usize) -> Self {
        self.log = log.map(|l| (l, slot));
        self
    }

    /// [`Participant::read`], on the pieces it needs (see the type's docs). Always inlined: it
    /// is the read path of `Tx::read`, and a call would return its `Result` through memory.
    #[inline(always)]
    fn read_in(
        heap: &Heap,
        versions: &Option<VersionArena>,
        addr: Addr,
        at: ReadAt,
        out: &mut Vec<u64>,
        used: Option<UsedBytes>,
    ) -> Result<ReadEntry, Error> {
        let obj = heap.object(addr)?;
        let head = match used {
            None => obj.read(out, at.check_lock),
            Some(used) => obj.read_used(out, at.check_lock, used),
        };
        let head = match head {
            Ok(s) => s,
            Err(ReadFail::Locked) => return Err(Abort::ReadLocked { addr }.into()),
            Err(ReadFail::BadLength { len_bytes }) => {
                return Err(Error::CorruptObject { addr, len_bytes });
            }
        };
        if head.header.ts() <= at.rts {
            return Ok(ReadEntry::new(addr, head.header, head.len_bytes as u32));
        }
        Self::read_old(versions, addr, head.header, head.ovp, at.rts, at.old_versions, out)
    }

    /// The head of `addr` (header `head`, old-version pointer `ovp`) is newer than `rts`: the
    /// newest old version at or below it (multi-version mode, `old_versions`), else the abort.
    /// Scalar arguments, so the hot caller keeps them in registers until this cold call.
    #[cold]
    #[inline(never)]
    fn read_old(
        versions: &Option<VersionArena>,
        addr: Addr,
        head: Header,
        ovp: u64,
        rts: Timestamp,
        old_versions: bool,
        out: &mut Vec<u64>,
    ) -> Result<ReadEntry, Error> {
        let too_new = Abort::TooNew { addr, version: head.ts(), rts };
        match versions {
            Some(arena) if old_versions => match arena.find(ovp, rts, out) {
                Ok(Some(old)) => Ok(ReadEntry::new(addr, old.header, old.len_bytes as u32)),
                Ok(None) => Err(too_new.into()),
                Err(Recycled) => Err(Error::VersionRecycled { addr }),
            },
            _ => Err(too_new.into()),
        }
    }

    /// [`Participant::read_view`] of a head newer than the snapshot: an old version
    /// (multi-version mode), copied and viewed, or an abort. Out of line, so the in-place path
    /// stays small enough to inline whole.
    #[cold]
    #[inline(never)]
    fn read_view_old<R>(
        heap: &Heap,
        versions: &Option<VersionArena>,
        addr: Addr,
        at: ReadAt,
        out: &mut Vec<u64>,
        mut f: impl FnMut(View<'_>) -> R,
    ) -> Result<(ReadEntry, R), Error> {
        let entry = Self::read_in(heap, versions, addr, at, out, None)?;
        let r = f(View::owned(out, entry.len_bytes as usize));
        Ok((entry, r))
    }

    /// Hands the token's vector back for the next lock.
    #[inline]
    fn give_back(&self, mut held: Vec<Held>) {
        held.clear();
        self.scratch.held.set(held);
    }

    /// Unlocks the first `held.len()` entries of `part`, restoring the headers they replaced.
    fn unlock(&self, part: WritePart<'_>, held: &[Held]) {
        debug_assert!(held.len() <= part.len());
        for (e, h) in part.entries().iter().zip(held) {
            if let Ok(obj) = self.heap.object(e.addr) {
                obj.unlock(h.previous);
            }
        }
    }
}

impl Participant for LocalParticipant<'_> {
    type Locks = LocalLocks;

    // Always inlined: it is `Tx::read`'s path, and with a cluster set in the same crate the
    // compiler would otherwise share one out-of-line copy between the two (measured: +9 %
    // instructions per YCSB ro2 transaction).
    #[inline(always)]
    fn read(&self, addr: Addr, at: ReadAt, out: &mut Vec<u64>) -> Result<ReadEntry, Error> {
        Self::read_in(self.heap, self.versions, addr, at, out, None)
    }

    // Always inlined, as `read`.
    #[inline(always)]
    fn read_used(
        &self,
        addr: Addr,
        at: ReadAt,
        out: &mut Vec<u64>,
        used: UsedBytes,
    ) -> Result<ReadEntry, Error> {
        Self::read_in(self.heap, self.versions, addr, at, out, Some(used))
    }

    /// Views the head in place when it is old enough (one cache line for one field of a large
    /// object); otherwise reads the old version into `out` and views that.
    // Always inlined, as `read`.
    #[inline(always)]
    fn read_view<R>(
        &self,
        addr: Addr,
        at: ReadAt,
        out: &mut Vec<u64>,
        mut f: impl FnMut(View<'_>) -> R,
    ) -> Result<(ReadEntry, R), Error> {
        let obj = self.heap.object(addr)?;
        let (snap, r) = match obj.read_view(at.check_lock, |p, len| f(View::shared(p, len))) {
            Ok(v) => v,
            Err(ReadFail::Locked) => return Err(Abort::ReadLocked { addr }.into()),
            Err(ReadFail::BadLength { len_bytes }) => {
                return Err(Error::CorruptObject { addr, len_bytes });
            }
        };
        if snap.header.ts() > at.rts {
            return Self::read_view_old(self.heap, self.versions, addr, at, out, f);
        }
        Ok((ReadEntry::new(addr, snap.header, snap.len_bytes as u32), r))
    }

    #[inline]
    fn still_newest(
        &self,
        read: &ReadEntry,
        rts: Timestamp,
        scratch: &mut Vec<u64>,
    ) -> Result<bool, Error> {
        let Ok(obj) = self.heap.object(read.addr) else { return Ok(false) };
        if obj.validate(read.header) {
            return Ok(true);
        }
        // Multi-version: a head above `rts` (installed after `rts` passed) may sit over the
        // very version read, which then is still the newest at or below `rts`.
        let Some(arena) = self.versions else { return Ok(false) };
        let Ok(head) = obj.read(scratch, true) else { return Ok(false) };
        Ok(head.header.ts() > rts
            && matches!(arena.find(head.ovp, rts, scratch),
                        Ok(Some(old)) if old.header == read.header))
    }

    fn lock(&self, part: WritePart<'_>) -> Result<LocalLocks, Error> {
        let mut held = self.scratch.held.take();
        debug_assert!(held.is_empty(), "a lock token's vector was not given back");
        held.reserve(part.len());
        let mut failure = None;
        for e in part.entries() {
            let Ok(obj) = self.heap.object(e.addr) else {
                // Addresses were checked when the write was buffered; slab layouts never change
                // while a transaction can hold them, so this is a conflict at worst.
                failure = Some(Abort::WriteConflict { addr: e.addr });
                break;
            };
            match obj.try_lock(e.expect) {
                Ok(previous) => {
                    held.push(Held { previous, ovp: 0 });
                    // Multi-version: keep the replaced head for older readers. A slot that never
                    // held a version has nothing to keep. Exhausted memory truncates the history
                    // (FaRMv2 §5.3 "truncate"): older readers of this object will abort.
                    if let Some((arena, cursor)) = self.arena()
                        && previous.raw() != 0
                    {
                        match arena.copy_head(cursor, obj, previous) {
                            Ok(ovp) => {
                                if let Some(h) = held.last_mut() {
                                    h.ovp = ovp;
                                }
                            }
                            Err(()) => {
                                failure = Some(Abort::VersionMemory { addr: e.addr });
                                break;
                            }
                        }
                    }
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
            None => {
                debug_assert_eq!(held.len(), part.len());
                Ok(LocalLocks { held })
            }
            Some(abort) => {
                self.unlock(part, &held);
                self.give_back(held);
                Err(abort.into())
            }
        }
    }

    fn validate(&self, reads: &[ReadEntry], writes: &WriteSet) -> Result<(), Error> {
        for r in reads {
            if r.written {
                // Written, so locked by this transaction: passes, as below (found in `writes`).
                continue;
            }
            let unchanged = self.heap.object(r.addr).map(|o| o.validate(r.header)).unwrap_or(false);
            // An object this transaction writes is locked by it, so its check fails here; the
            // lock's `expect` checked its version. Looked up only then: most reads are of
            // objects not written, and pass the check.
            if !unchanged && writes.find(r.addr).is_none() {
                return Err(Abort::Validation { addr: r.addr }.into());
            }
        }
        Ok(())
    }

    #[inline]
    fn logs(&self) -> bool {
        self.log.is_some()
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
    fn commit_backup(&self, part: WritePart<'_>, wts: Timestamp) -> Result<(), Error> {
        let Some((log, slot)) = self.log else {
            return Ok(());
        };
        let heap = self.heap;
        log.append_tx(slot, wts.as_nanos(), |rec| {
            redo_record(rec, part, wts, |e| {
                if e.kind == WriteKind::Alloc { heap.slab_word(e.addr) } else { None }
            });
        })?;
        Ok(())
    }

    fn commit_primary(
        &self,
        locks: LocalLocks,
        part: WritePart<'_>,
        wts: Timestamp,
    ) -> Result<(), Error> {
        debug_assert_eq!(locks.held.len(), part.len(), "a token for another part");
        for (e, h) in part.entries().iter().zip(&locks.held) {
            let obj = self.heap.object(e.addr).expect("locked objects have valid addresses");
            if h.ovp != 0
                && let Some((arena, _)) = self.arena()
            {
                arena.note_commit(h.ovp, wts);
            }
            let data = part.data(e);
            match e.kind {
                WriteKind::Update | WriteKind::Alloc => {
                    obj.install(wts, true, e.len_bytes, h.ovp, data);
                }
                WriteKind::Free => {
                    obj.install(wts, false, e.len_bytes, h.ovp, data);
                    self.heap.release(e.addr, Some(wts));
                }
            }
        }
        if let Some((arena, cursor)) = self.arena() {
            arena.finish_commit(cursor);
        }
        self.give_back(locks.held);
        Ok(())
    }

    fn abort(&self, locks: Option<LocalLocks>, part: WritePart<'_>) -> Result<(), Error> {
        self.abort_releasing(locks, part, |_| true)
    }
}

impl LocalParticipant<'_> {
    /// [`Participant::abort`], giving back only the reserved slots `mine` accepts (the cluster
    /// participant leaves out slots reserved at another primary, see
    /// [`crate::remote::Remote::take_remote_reservation`]).
    pub(crate) fn abort_releasing(
        &self,
        locks: Option<LocalLocks>,
        part: WritePart<'_>,
        mine: impl Fn(Addr) -> bool,
    ) -> Result<(), Error> {
        if let Some(locks) = locks {
            // Only a participant whose LOCK succeeded can have published a lower bound.
            if let Some((log, slot)) = self.log {
                log.clear_lower(slot);
            }
            self.unlock(part, &locks.held);
            self.give_back(locks.held);
        }
        if let Some((arena, cursor)) = self.arena() {
            arena.finish_commit(cursor);
        }
        for e in part.entries() {
            if e.kind == WriteKind::Alloc && mine(e.addr) {
                self.heap.release(e.addr, None);
            }
        }
        Ok(())
    }
}

/// Fills a redo record with `part` installed at `wts`: each object's whole image (header words
/// and payload), preceded by its slab's header word where `slab_word` gives one (the local
/// engine: for an allocation; a backup: for every object, see `db/serve.rs`'s `log_backup`),
/// so that recovery knows the slab's class.
pub(crate) fn redo_record(
    rec: &mut crate::durable::format::RecordBuf,
    part: WritePart<'_>,
    wts: Timestamp,
    slab_word: impl Fn(&crate::txn::set::WriteEntry) -> Option<(Addr, u64)>,
) {
    for e in part.entries() {
        let allocated = e.kind != WriteKind::Free;
        if allocated && let Some((slab, word)) = slab_word(e) {
            rec.entry_words(slab.to_raw(), [word]);
        }
        let w0 = Header::version(wts, allocated).raw();
        let w1 = (e.len_bytes as u64) << LEN_SHIFT;
        let data = part.data(e);
        rec.entry_words(e.addr.to_raw(), [w0, w1].into_iter().chain(data.iter().copied()));
    }
}
