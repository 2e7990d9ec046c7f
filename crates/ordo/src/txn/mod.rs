//! Transactions: reads at a read timestamp, buffered writes, and the commit protocol.
//!
//! A [`Tx`] is one attempt. It takes its read timestamp `rts` when it begins and reads every
//! object at the newest version `<= rts`; single-version mode keeps only the head, so a head newer
//! than `rts` aborts the attempt (FaRMv2's early abort), as does a locked head. Every read an
//! attempt makes — committed or not — therefore comes from the one snapshot at `rts`: opacity.
//! Writes, allocations and frees are buffered and applied at commit by [`commit`]'s protocol.
//!
//! Two refinements keep contended attempts alive (measured together on TPC-C at one warehouse,
//! with the warehouse balances already split out, they cut the abort rate from 7–10 % to 3–5 %):
//!
//! * **Extension.** A strictly serializable attempt that meets a head newer than `rts` first
//!   tries to move its snapshot forward: if every read so far is still current, it reads at a
//!   new `rts` (`Tx::extend`, below). At most [`EXTENSIONS_MAX`] times per attempt.
//! * **Waiting out a local lock.** The embedded engine rereads a locked object a few times over
//!   a few microseconds before aborting (`Tx::wait_locked`): a local commit holds its locks
//!   about that long. A cluster aborts at once, as FaRMv2 does.
//!
//! # Optimistic read timestamp (strict serializability)
//!
//! FaRMv2 takes a strict `rts` with `get_ts()`, waiting out the clock's uncertainty (ORDO's
//! boundary, ~100 ns here) before the first read so that `rts` is in the past. A strictly
//! serializable attempt here instead takes `[lo, hi] = now()` without waiting and reads at
//! `rts = hi`, which covers every transaction that finished before it began. Because `rts` may
//! still be ahead of true time, a writer can install a version `<= rts` after this attempt read
//! an older version of the same object. What keeps the reads one consistent snapshot:
//!
//! * A writer that changes an object after this attempt read it took its locks after that read,
//!   so its `wts` — drawn later, and at least true time when drawn — is `> lo`. A version at or
//!   below `recent_from` (initially `lo`) therefore cannot come from a writer that changed
//!   anything read before: its writer held its locks before the first read, so those reads
//!   would have seen them. (With a zero-width clock `lo = hi = rts`, so nothing is ever recent.)
//! * Reading a version `> recent_from` **revalidates every earlier read** (unlocked and still
//!   the newest version at or below `rts`) before the value is used; a change dooms the attempt.
//!   A successful revalidation that started at `now().lo = v` raises `recent_from` to `v` by the
//!   same argument.
//!
//! So every attempt, committed or not, has seen the state at its last revalidation (or at its
//! start), which lies inside its lifetime: opacity and strictness without the wait. A read-only
//! commit stays a no-op; a read-write commit validates at `wts` as before (its `wts` may now be
//! below `rts`, which is harmless: every version it read or overwrites was installed in the past
//! before it locked or drew `wts`, so `wts` is above all of them). The multi-version chain walk
//! is unchanged: a head above `rts` was installed after `rts` passed, so no version in `(v, rts]`
//! can appear behind it. The other modes keep their timestamps: strict SI must not let a blind
//! write slip past a concurrent committer, so it still waits; the non-strict modes read at
//! `now().lo`, already in the past. `Shortcuts::skip_read_revalidation` removes the
//! revalidation, and `tests/engine/shortcuts.rs` shows the checker catching the torn read it allows.
//!
//! # Owners
//!
//! A `Tx` reads (head or old version), and revalidates its reads, through the participant set
//! its database provides (`Engine::participants`, see [`participant`]) — for the embedded
//! engine one local participant owning every region — and commits through [`commit`] over the
//! same set. Allocation is the one exception: it reserves a slot in the local heap directly
//! (the slot's owner releases it if the attempt aborts); placing objects at other owners is
//! the cluster's to add.
//!
//! An operation that aborts marks the attempt *doomed*: every later operation returns the same
//! abort, and `commit` does too, so nothing built on an inconsistent read can be committed.

pub mod commit;
pub(crate) mod engine;
pub(crate) mod hints;
pub(crate) mod memo;
mod options;
pub mod participant;
pub mod set;
mod view;
pub(crate) mod worker;

use bytemuck::Pod;
use ordo_clock::{Clock, Timestamp};

pub use crate::gc::GcRound;
pub use commit::CommitInfo;
pub use options::{BACKOFF_US_MAX, Isolation, Options, RETRIES_MAX_DEFAULT};
#[cfg(feature = "shortcuts")]
pub use options::{CommitStep, Shortcuts};
pub use view::View;

use crate::addr::Addr;
use crate::error::{Abort, Error};
use crate::object::UsedBytes;

use engine::Engine;
use participant::{Participant, Participants, ReadAt};
use set::{ReadEntry, WriteKind, words_as_bytes};
use worker::{Worker, bump};

/// Runs `$body` with `$set` bound to the database's participant set: the embedded engine's
/// single local owner, or — with a [`Remote`](participant::Remote) — the cluster set of commit attempt
/// `$tx`. The body is compiled once per set type, so the embedded path keeps its constant
/// `Participants::SINGLE`; the choice costs one predictable branch.
macro_rules! with_participants {
    ($shared:expr, $local:expr, $slot:expr, $tx:expr, |$set:ident| $body:expr) => {
        match $shared.remote.as_deref() {
            None => {
                let $set = $shared.participants($local, $slot);
                $body
            }
            Some(hook) => {
                let $set = $shared.cluster_participants(hook, $local, $slot, $tx);
                $body
            }
        }
    };
}

/// One transaction attempt. Created by [`crate::Ordo::begin`] or inside [`crate::Ordo::run`].
///
/// Committing or aborting consumes the transaction, so using it afterwards does not compile:
///
/// ```compile_fail
/// # use ordo::{Ordo, Config}; use ordo_clock::LogicalClock;
/// let db = Ordo::with_clock(Config::default(), LogicalClock::new()).unwrap();
/// let mut tx = db.begin().unwrap();
/// let a = tx.alloc(&1u64).unwrap();
/// tx.commit().unwrap();
/// tx.read::<u64>(a); // error: use of moved value
/// ```
pub struct Tx<'db, C: Clock> {
    shared: &'db Engine<C>,
    worker: Option<Box<Worker>>,
    rts: Timestamp,
    /// Reading a version at or after this time revalidates the earlier reads (see the module
    /// docs); `Timestamp::MAX` when `rts` was in the past when the attempt began.
    recent_from: Timestamp,
    options: Options,
    /// Whether reads may walk to old versions ([`ReadAt::old_versions`]); it depends on the
    /// write set being empty, so every change of the write set refreshes it.
    old_versions: bool,
    doomed: Option<Abort>,
    /// Whether the outcome has been counted in the thread's statistics.
    counted: bool,
    /// A stale snapshot read: writes are refused.
    read_only: bool,
    /// How many times this attempt has moved `rts` forward ([`Tx::extend`]).
    extensions: u8,
    /// Where this attempt's tree operations found their keys ([`memo`]).
    memo: memo::Memo,
}

/// How many times a read of a locked object reads again ([`Tx::wait_locked`]), and the spin-loop
/// hints between tries: 32 × 4 pauses, about 4 µs where a pause takes 34 ns (measured on this
/// project's Xeon VM; older cores pause for far less), which covers a local commit's lock hold
/// and costs less than an abort and retry.
const LOCKED_READ_WAITS: u32 = 32;
const LOCKED_READ_PAUSES: u32 = 4;

/// The most times one attempt moves its read timestamp forward instead of aborting on a head
/// newer than it: each move revalidates the whole read set, so an attempt that keeps meeting new
/// versions (a hot object rewritten faster than it reads) gives up and backs off instead.
pub const EXTENSIONS_MAX: u8 = 4;

/// The longest `read_only_at` waits for a snapshot time to pass.
pub const SNAPSHOT_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(1);

impl<'db, C: Clock> Tx<'db, C> {
    pub(crate) fn begin(shared: &'db Engine<C>, options: Options) -> Result<Self, Error> {
        let mut worker = shared.worker()?;
        worker.reads.clear();
        worker.writes.clear();
        let (rts, recent_from) = match options.isolation {
            Isolation::StrictSerializable => {
                let now = shared.clock.now();
                (now.hi(), now.lo())
            }
            Isolation::StrictSnapshot => (shared.clock.read_ts(), Timestamp::MAX),
            Isolation::Serializable | Isolation::Snapshot => {
                (shared.clock.now().lo(), Timestamp::MAX)
            }
        };
        let rts = Self::register(shared, &worker, &options, rts);
        Ok(Tx {
            shared,
            worker: Some(worker),
            rts,
            recent_from,
            old_versions: Self::old_versions(&options, true),
            options,
            doomed: None,
            counted: false,
            read_only: false,
            extensions: 0,
            memo: memo::Memo::default(),
        })
    }

    /// Publishes `rts` in the thread's slot, then raises it to the GC safe point if it is
    /// behind (see `crate::gc` for why this order cannot be missed by a GC round).
    #[inline]
    fn register(
        shared: &Engine<C>,
        worker: &Worker,
        options: &Options,
        rts: Timestamp,
    ) -> Timestamp {
        #[cfg(feature = "shortcuts")]
        if options.shortcuts.skip_registration {
            return rts;
        }
        let _ = options;
        // SeqCst: store-then-load against the GC's publish-then-scan (Dekker, crate::gc).
        shared
            .slot(worker.slot)
            .active_rts
            .store(rts.as_nanos(), std::sync::atomic::Ordering::SeqCst);
        rts.max(shared.gc.point())
    }

    /// Begins a read-only transaction at the stale snapshot `ts` (FaRMv2 §4.6).
    pub(crate) fn begin_at(
        shared: &'db Engine<C>,
        options: Options,
        ts: Timestamp,
    ) -> Result<Self, Error> {
        // A snapshot at `ts <= now().lo` is safe: any writer still to draw a timestamp will draw
        // one above the true time, which is at least `now().lo`, and any writer that drew one
        // at or below `ts` holds its locks until it is installed.
        let now_lo = shared.clock.now().lo();
        if ts > now_lo {
            // Not yet reached: wait (bounded) until it is.
            let deadline = std::time::Instant::now() + SNAPSHOT_WAIT_MAX;
            while shared.clock.now().lo() < ts {
                if std::time::Instant::now() > deadline {
                    return Err(Error::SnapshotInFuture { ts, now_lo: shared.clock.now().lo() });
                }
                std::hint::spin_loop();
            }
        }
        let mut worker = shared.worker()?;
        worker.reads.clear();
        worker.writes.clear();
        let slot = shared.slot(worker.slot);
        // SeqCst: as in register().
        slot.active_rts.store(ts.as_nanos(), std::sync::atomic::Ordering::SeqCst);
        let gc_point = shared.gc.point();
        if ts < gc_point {
            slot.active_rts.store(worker::IDLE, std::sync::atomic::Ordering::Release);
            worker::put_cached(worker);
            return Err(Error::SnapshotTooOld { ts, gc_point });
        }
        Ok(Tx {
            shared,
            worker: Some(worker),
            rts: ts,
            recent_from: Timestamp::MAX,
            old_versions: Self::old_versions(&options, true),
            options,
            doomed: None,
            counted: false,
            read_only: true,
            extensions: 0,
            memo: memo::Memo::default(),
        })
    }

    /// This attempt's memo of where keys were found (see [`memo`]).
    pub(crate) fn memo(&mut self) -> &mut memo::Memo {
        &mut self.memo
    }

    /// The worker's leaf hints, which outlive this attempt (see [`hints`]).
    pub(crate) fn hints(&mut self) -> &mut hints::Hints {
        &mut self.w().hints
    }

    /// How many reads this attempt has recorded (a test's view of how much a lookup read).
    #[cfg(test)]
    pub(crate) fn reads_len(&mut self) -> usize {
        self.w().reads.entries().len()
    }

    fn w(&mut self) -> &mut Worker {
        self.worker.as_mut().expect("a live transaction holds its worker")
    }

    /// The read timestamp: every read sees the newest version at or before it. A strictly
    /// serializable attempt may move it forward when a read meets a newer version and every
    /// earlier read is still current (see the module docs), so it can grow between reads.
    pub fn rts(&self) -> Timestamp {
        self.rts
    }

    /// The options this attempt runs with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The abort that doomed this attempt, if one did.
    pub fn doomed(&self) -> Option<Abort> {
        self.doomed
    }

    fn doom(&mut self, abort: Abort) -> Error {
        if self.doomed.is_none() {
            self.doomed = Some(abort);
        }
        Error::Aborted(abort)
    }

    fn check_live(&self) -> Result<(), Error> {
        match self.doomed {
            Some(a) => Err(Error::Aborted(a)),
            None => Ok(()),
        }
    }

    /// How this attempt looks for the version to read: at `rts`, checking the lock, and walking
    /// old versions unless `old_versions` says no.
    #[inline]
    fn read_at(&self) -> ReadAt {
        #[cfg(feature = "shortcuts")]
        let check_lock = !self.options.shortcuts.skip_read_lock_check;
        #[cfg(not(feature = "shortcuts"))]
        let check_lock = true;
        ReadAt { rts: self.rts, check_lock, old_versions: self.old_versions }
    }

    /// Whether an attempt with `options` may read old versions: not when it will write (or has
    /// written: `writes_empty` is false) and validates, so could never commit an old read
    /// (eager validation, FaRMv2 §4.4).
    #[inline]
    fn old_versions(options: &Options, writes_empty: bool) -> bool {
        !(options.isolation.validates_reads() && (options.will_write || !writes_empty))
    }

    /// Reads `addr` at `rts` into the worker's scratch buffer (or finds it in the write set) and
    /// gives `f` its bytes.
    fn with_bytes<R>(&mut self, addr: Addr, f: impl FnOnce(&[u8]) -> R) -> Result<R, Error> {
        self.with_words(addr, |words, len_bytes| f(words_as_bytes(words, len_bytes)))
    }

    /// [`Tx::with_bytes`] on payload words and the length in bytes.
    fn with_words<R>(
        &mut self,
        addr: Addr,
        f: impl FnOnce(&[u64], usize) -> R,
    ) -> Result<R, Error> {
        self.with_words_used(addr, None, f)
    }

    /// Reads `addr` as [`Tx::read_with`] does, but a version read from the heap may come with
    /// only its first `used(word 0)` bytes ([`crate::object::ObjectRef::read_used`]): `f` gets
    /// the bytes read (all of them from the write set or an old version) and the object's
    /// length. For objects that say how much of them is in use, such as the tree's nodes.
    pub(crate) fn read_used_with<R>(
        &mut self,
        addr: Addr,
        used: UsedBytes,
        f: impl FnOnce(&[u8], usize) -> R,
    ) -> Result<R, Error> {
        self.with_words_used(addr, Some(used), |words, len_bytes| {
            f(words_as_bytes(words, len_bytes.min(words.len() * 8)), len_bytes)
        })
    }

    /// Reads `addr` as [`Tx::read_used_with`] does, into a buffer the caller keeps: returns the
    /// payload words — the bytes read, then zeros to the object's length (`len.div_ceil(8)`
    /// words) — and the length in bytes. A version read from the heap is not copied out: the
    /// buffer is the worker's read buffer itself, whose place the worker's spare takes (one this
    /// transaction wrote is copied from the write set). For an object the caller changes and
    /// writes back whole, such as the leaf an update splices ([`Tx::write_words`]); give the
    /// buffer back with [`Tx::recycle`] when done, so that the next one allocates nothing.
    /// The third value is the version read: its timestamp, or `None` for this transaction's own
    /// write.
    ///
    /// # Isolation
    /// As [`Tx::read`]. The zeros stand for the unread tail, which `used` promises is zero.
    pub(crate) fn read_used_owned(
        &mut self,
        addr: Addr,
        used: UsedBytes,
    ) -> Result<(Vec<u64>, usize, Option<Timestamp>), Error> {
        self.check_live()?;
        let at = self.read_at();
        if let Some((_, e)) = self.own_write(addr)? {
            let w = self.w();
            let mut buf = std::mem::take(&mut w.spare);
            buf.clear();
            buf.extend_from_slice(w.writes.data(&e));
            return Ok((buf, e.len_bytes, None));
        }
        let entry = self.read_through_owner(addr, at, Some(used))?;
        self.record_read(entry)?;
        let len_bytes = entry.len_bytes as usize;
        let w = self.w();
        let spare = std::mem::take(&mut w.spare);
        let mut buf = std::mem::replace(&mut w.scratch, spare);
        // The read stopped at the used bytes (never past the length): zeros for the rest.
        buf.resize(len_bytes.div_ceil(8), 0);
        Ok((buf, len_bytes, Some(entry.header.ts())))
    }

    /// Takes back a buffer [`Tx::read_used_owned`] handed out, as the worker's spare read
    /// buffer (the larger of the two is kept).
    pub(crate) fn recycle(&mut self, buf: Vec<u64>) {
        if let Some(w) = self.worker.as_mut()
            && buf.capacity() > w.spare.capacity()
        {
            w.spare = buf;
        }
    }

    /// [`Tx::with_words`], reading only the bytes `used` says are in use when it is given; the
    /// words `f` gets may then stop short of the length.
    #[inline(always)]
    fn with_words_used<R>(
        &mut self,
        addr: Addr,
        used: Option<UsedBytes>,
        f: impl FnOnce(&[u64], usize) -> R,
    ) -> Result<R, Error> {
        self.check_live()?;
        let at = self.read_at();
        if let Some((_, e)) = self.own_write(addr)? {
            return Ok(f(self.w().writes.data(&e), e.len_bytes));
        }
        let entry = self.read_through_owner(addr, at, used)?;
        self.record_read(entry)?;
        Ok(f(&self.w().scratch, entry.len_bytes as usize))
    }

    /// This transaction's own write of `addr`, if it has one: its position and entry, whose
    /// payload a read sees instead of the heap's and a write replaces; a freed object is there
    /// neither to read nor to write.
    #[inline(always)]
    fn own_write(&mut self, addr: Addr) -> Result<Option<(usize, set::WriteEntry)>, Error> {
        let w = self.w();
        let Some(i) = w.writes.find(addr) else { return Ok(None) };
        let e = w.writes.entries()[i];
        if e.kind == WriteKind::Free {
            return Err(Error::NotAllocated { addr });
        }
        Ok(Some((i, e)))
    }

    /// Reads `addr` at `at` through its owner into the worker's scratch buffer; a failure goes
    /// through [`Tx::read_failed`]. Always inlined: it is the read path.
    #[inline(always)]
    fn read_through_owner(
        &mut self,
        addr: Addr,
        mut at: ReadAt,
        used: Option<UsedBytes>,
    ) -> Result<ReadEntry, Error> {
        let mut waits = 0;
        loop {
            let shared = self.shared;
            let w = self.worker.as_mut().expect("a live transaction holds its worker");
            let read = with_participants!(shared, &w.local, w.slot, 0, |set| {
                let owner = set.owner_of(addr);
                match used {
                    None => owner.read(addr, at, &mut w.scratch),
                    Some(used) => owner.read_used(addr, at, &mut w.scratch, used),
                }
            });
            match read {
                Ok(entry) => return Ok(entry),
                Err(Error::Aborted(Abort::TooNew { .. })) if self.extend()? => at = self.read_at(),
                Err(Error::Aborted(Abort::ReadLocked { .. })) if self.wait_locked(&mut waits) => {}
                Err(e) => return Err(self.read_failed(e)),
            }
        }
    }

    /// A read found the object locked by a committing transaction. A commit holds its locks for
    /// a microsecond or so on one machine, so the embedded engine waits a little (`waits`
    /// counts this read's tries) and reads again — the object is then usually unlocked at a
    /// version newer than `rts`, which [`Tx::extend`] may accept — instead of aborting at once
    /// (FaRMv2's early abort). Returns whether to read again. A cluster's locks are held for
    /// network round trips, so there the read aborts at once, as before.
    #[cold]
    #[inline(never)]
    fn wait_locked(&self, waits: &mut u32) -> bool {
        if self.shared.remote.is_some() || *waits >= LOCKED_READ_WAITS {
            return false;
        }
        *waits += 1;
        if let Some(w) = self.worker.as_ref() {
            bump(&self.shared.slot(w.slot).locked_read_waits, 1);
        }
        for _ in 0..LOCKED_READ_PAUSES {
            std::hint::spin_loop();
        }
        true
    }

    /// A read found only a version newer than `rts`. Instead of aborting, a strictly
    /// serializable attempt moves its snapshot forward (read-timestamp extension, as in LSA and
    /// TinySTM): it takes `[lo, hi] = now()`, checks that every read so far is still the newest
    /// version at `hi`, and reads at `rts = hi` from then on, with `recent_from` raised to `lo`.
    ///
    /// This is a revalidation ([`Tx::check_reads`]) at a later `rts`, and the argument of the
    /// module docs carries over: the reads so far were all unchanged from when they were made
    /// until they were checked, which is after `lo` was taken, so they are the state at that
    /// instant, inside the attempt's lifetime; later reads either come from writers that held
    /// their locks before it (versions `<= lo`, which the checks would have seen) or trigger a
    /// revalidation of their own (versions `> recent_from`). Without the check, a version read
    /// before another transaction's commit and one read after it could both be used: a torn
    /// snapshot (`Shortcuts::skip_extension_check`; `tests/engine/extension.rs`).
    ///
    /// Returns whether `rts` moved (then the read is retried); `Ok(false)` when this attempt may
    /// not extend (another isolation, a stale snapshot, [`EXTENSIONS_MAX`] reached), so the
    /// read's abort stands; a read found changed dooms the attempt with `Validation`.
    #[cold]
    #[inline(never)]
    fn extend(&mut self) -> Result<bool, Error> {
        if self.read_only
            || self.options.isolation != Isolation::StrictSerializable
            || self.extensions >= EXTENSIONS_MAX
        {
            return Ok(false);
        }
        self.extensions += 1;
        let now = self.shared.clock.now();
        if now.hi() <= self.rts {
            return Ok(false);
        }
        #[cfg(feature = "shortcuts")]
        let check = !self.options.shortcuts.skip_extension_check;
        #[cfg(not(feature = "shortcuts"))]
        let check = true;
        if check {
            self.check_reads_at(now.hi(), now.lo(), false)?;
        }
        self.rts = now.hi();
        self.recent_from = self.recent_from.max(now.lo());
        if let Some(w) = self.worker.as_ref() {
            bump(&self.shared.slot(w.slot).extensions, 1);
        }
        Ok(true)
    }

    /// A write was buffered: the write set is not empty.
    #[inline]
    fn written(&mut self) {
        self.old_versions = Self::old_versions(&self.options, false);
    }

    /// A buffered write was dropped: the write set may be empty again.
    fn unwritten(&mut self) {
        let writes_empty = self.w().writes.is_empty();
        self.old_versions = Self::old_versions(&self.options, writes_empty);
    }

    /// A read failed: an abort dooms the attempt.
    fn read_failed(&mut self, e: Error) -> Error {
        match e {
            Error::Aborted(a) => self.doom(a),
            other => other,
        }
    }

    /// Records a version read: it joins the read set, revalidating the earlier reads if it may
    /// postdate them (module docs), and must be allocated.
    #[inline]
    fn record_read(&mut self, entry: ReadEntry) -> Result<(), Error> {
        self.w().reads.push(entry);
        if entry.header.ts() > self.recent_from {
            // A value read with it is discarded if the earlier reads changed: it may come from a
            // torn snapshot.
            self.revalidate()?;
        }
        if !entry.header.is_allocated() {
            return Err(Error::NotAllocated { addr: entry.addr });
        }
        Ok(())
    }

    /// The last read returned a version that may postdate an earlier read: checks that every
    /// earlier read is still the head, unlocked, then raises `recent_from` (module docs).
    #[cold]
    #[inline(never)]
    fn revalidate(&mut self) -> Result<(), Error> {
        self.check_reads(true)
    }

    /// Checks the reads (all but the newest when `skip_newest`) as [`Tx::revalidate`] does.
    fn check_reads(&mut self, skip_newest: bool) -> Result<(), Error> {
        #[cfg(feature = "shortcuts")]
        if self.options.shortcuts.skip_read_revalidation {
            return Ok(());
        }
        // Taken before the checks: a writer with a smaller wts held its locks by then.
        let started = self.shared.clock.now().lo();
        self.check_reads_at(self.rts, started, skip_newest)
    }

    /// Checks that every read (all but the newest when `skip_newest`) is unlocked and still the
    /// newest version at or below `rts`, then raises `recent_from` to `started`:
    /// a clock reading (`lo`) taken before the checks began.
    fn check_reads_at(
        &mut self,
        rts: Timestamp,
        started: Timestamp,
        skip_newest: bool,
    ) -> Result<(), Error> {
        let shared = self.shared;
        let w = self.worker.as_ref().expect("a live transaction holds its worker");
        let changed = with_participants!(shared, &w.local, w.slot, 0, |set| {
            let reads = w.reads.entries();
            let earlier = match reads.split_last() {
                Some((_, earlier)) if skip_newest => earlier,
                _ => reads,
            };
            let mut scratch = Vec::new();
            let mut changed = None;
            for r in earlier {
                if !set.owner_of(r.addr).still_newest(r, rts, &mut scratch)? {
                    changed = Some(r.addr);
                    break;
                }
            }
            changed
        });
        if let Some(addr) = changed {
            return Err(self.doom(Abort::Validation { addr }));
        }
        self.recent_from = self.recent_from.max(started);
        Ok(())
    }

    /// Reads a plain-data value. The object's size must be `size_of::<T>()`.
    ///
    /// # Isolation
    /// Sees the newest version committed at or before [`Tx::rts`]; a locked or newer head aborts.
    pub fn read<T: Pod>(&mut self, addr: Addr) -> Result<T, Error> {
        let want = std::mem::size_of::<T>();
        self.with_bytes(addr, |b| {
            if b.len() == want {
                Ok(bytemuck::pod_read_unaligned(b))
            } else {
                Err(Error::WrongSize { addr, len_bytes: b.len(), got_bytes: want })
            }
        })?
    }

    /// Reads parts of an object in place, without copying it: `f` gets a [`View`] of the payload
    /// and reads what it needs (a field of a large row costs one cache line instead of the row).
    ///
    /// # Isolation
    /// As [`Tx::read`]. `f` may run more than once — on a torn payload, whose result is
    /// discarded — so it must only read through the view.
    pub fn read_view<R>(
        &mut self,
        addr: Addr,
        mut f: impl FnMut(View<'_>) -> R,
    ) -> Result<R, Error> {
        self.check_live()?;
        if self.w().writes.find(addr).is_some() {
            return self.with_words(addr, |w, len| f(View::owned(w, len)));
        }
        let mut waits = 0;
        let (entry, r) = loop {
            let (shared, at) = (self.shared, self.read_at());
            let w = self.worker.as_mut().expect("a live transaction holds its worker");
            let read = with_participants!(shared, &w.local, w.slot, 0, |set| set
                .owner_of(addr)
                .read_view(addr, at, &mut w.scratch, &mut f));
            match read {
                Ok(read) => break read,
                Err(Error::Aborted(Abort::TooNew { .. })) if self.extend()? => {}
                Err(Error::Aborted(Abort::ReadLocked { .. })) if self.wait_locked(&mut waits) => {}
                Err(e) => return Err(self.read_failed(e)),
            }
        };
        self.record_read(entry)?;
        Ok(r)
    }

    /// Asks the CPU to start loading the object at `addr` into its caches, so that a read of it
    /// later in this transaction waits less for memory: a transaction that knows which rows it
    /// will read (TPC-C NewOrder knows its items and stock rows up front) overlaps their cache
    /// misses instead of taking them one after another.
    ///
    /// # Isolation
    /// None: a hint. It reads nothing into the transaction (no read set entry, no validation),
    /// cannot fail, and does nothing for an address this process's heap does not hold (an
    /// object of another node, or no object).
    #[inline]
    pub fn prefetch(&self, addr: Addr) {
        self.shared.heap.prefetch(addr);
    }

    /// Reads an object's bytes into a new vector.
    pub fn read_bytes(&mut self, addr: Addr) -> Result<Vec<u8>, Error> {
        self.with_bytes(addr, |b| b.to_vec())
    }

    /// Reads an object's bytes and passes them to `f` without copying them out.
    pub fn read_with<R>(&mut self, addr: Addr, f: impl FnOnce(&[u8]) -> R) -> Result<R, Error> {
        self.with_bytes(addr, f)
    }

    /// Buffers a new value of a plain-data type for `addr`; the size must match the object's.
    pub fn write<T: Pod>(&mut self, addr: Addr, value: &T) -> Result<(), Error> {
        self.write_bytes(addr, bytemuck::bytes_of(value))
    }

    /// Buffers new bytes for `addr`; the length must match the object's.
    pub fn write_bytes(&mut self, addr: Addr, bytes: &[u8]) -> Result<(), Error> {
        self.buffer_write(addr, bytes.len(), |writes, at| match at {
            Ok(i) => writes.overwrite(i, bytes),
            Err(expect) => writes.push(addr, WriteKind::Update, bytes, expect),
        })
    }

    /// [`Tx::write_bytes`] of a payload given as words: `len_bytes` long, the bytes of the last
    /// word past it zero (as [`Tx::read_used_owned`] gives them). Copies the words as they are.
    pub(crate) fn write_words(
        &mut self,
        addr: Addr,
        words: &[u64],
        len_bytes: usize,
    ) -> Result<(), Error> {
        if words.len() != len_bytes.div_ceil(8) {
            return Err(Error::WrongSize {
                addr,
                len_bytes: words.len() * 8,
                got_bytes: len_bytes,
            });
        }
        debug_assert!(
            len_bytes.is_multiple_of(8) || words[words.len() - 1] >> (8 * (len_bytes % 8)) == 0
        );
        self.buffer_write(addr, len_bytes, |writes, at| match at {
            Ok(i) => writes.data_mut(i).copy_from_slice(words),
            Err(expect) => {
                writes.push_words(addr, WriteKind::Update, words, len_bytes, expect);
            }
        })
    }

    /// Buffers a write of `len_bytes_new` to `addr`: checks it, then has `fill` overwrite the
    /// payload of `addr`'s entry (`Ok(position)`) or push a new update entry with the
    /// expectation given (`Err(expect)`: a head at or below `rts`).
    #[inline(always)]
    fn buffer_write(
        &mut self,
        addr: Addr,
        len_bytes_new: usize,
        fill: impl FnOnce(&mut set::WriteSet, Result<usize, crate::object::Expect>),
    ) -> Result<(), Error> {
        self.check_live()?;
        if self.read_only {
            return Err(Error::ReadOnly { addr });
        }
        if let Some((i, e)) = self.own_write(addr)? {
            if e.len_bytes != len_bytes_new {
                return Err(Error::WrongSize {
                    addr,
                    len_bytes: e.len_bytes,
                    got_bytes: len_bytes_new,
                });
            }
            fill(&mut self.w().writes, Ok(i));
            return Ok(());
        }
        // A read-modify-write already knows the length; a blind write looks it up.
        let recent = self.w().reads.recent(addr);
        let len_bytes = match recent {
            Some((_, r)) if r.header.is_allocated() => r.len_bytes as usize,
            Some(_) => return Err(Error::NotAllocated { addr }),
            None => self.peek_len(addr)?,
        };
        if len_bytes != len_bytes_new {
            return Err(Error::WrongSize { addr, len_bytes, got_bytes: len_bytes_new });
        }
        let expect = crate::object::Expect::NotAfter(self.rts);
        let w = self.w();
        fill(&mut w.writes, Err(expect));
        if let Some((i, _)) = recent {
            w.reads.mark_written(i);
        }
        self.written();
        Ok(())
    }

    /// Changes an object in place: `f` gets its payload as little-endian words (the last one
    /// zero-padded past the object's length) and may change them; the result is buffered as
    /// this transaction's new value of `addr`, as [`Tx::read_with`] then [`Tx::write_bytes`]
    /// would, without copying the payload out and back. Returns what `f` returns.
    ///
    /// `f` runs once, on the value this transaction sees: its own buffered write, or the
    /// version read at `rts`, which joins the read set (so a concurrent write to `addr` aborts
    /// this transaction at validation, as after any read-modify-write). Bytes `f` sets past the
    /// object's length are ignored. The object's length does not change.
    ///
    /// # Isolation
    /// As [`Tx::read`] for the read, as [`Tx::write_bytes`] for the write.
    pub fn update_words<R>(
        &mut self,
        addr: Addr,
        f: impl FnOnce(&mut [u64]) -> R,
    ) -> Result<R, Error> {
        self.update_words_len(addr, |words, _| f(words))
    }

    /// [`Tx::update_words`], and `f` also gets the object's length in bytes (which its words
    /// round up), to check that `addr` holds what the caller expects before changing it.
    pub fn update_words_len<R>(
        &mut self,
        addr: Addr,
        f: impl FnOnce(&mut [u64], usize) -> R,
    ) -> Result<R, Error> {
        self.check_live()?;
        if self.read_only {
            return Err(Error::ReadOnly { addr });
        }
        let (i, len_bytes) = match self.own_write(addr)? {
            Some((i, e)) => (i, e.len_bytes),
            None => {
                let at = self.read_at();
                let entry = self.read_through_owner(addr, at, None)?;
                self.record_read(entry)?;
                let rts = self.rts;
                let len_bytes = entry.len_bytes as usize;
                let w = self.w();
                let words = &w.scratch[..len_bytes.div_ceil(8)];
                let expect = crate::object::Expect::NotAfter(rts);
                let i = w.writes.push_words(addr, WriteKind::Update, words, len_bytes, expect);
                if let Some(last) = w.reads.last() {
                    w.reads.mark_written(last); // the read just recorded
                }
                self.written();
                (i, len_bytes)
            }
        };
        let words = self.w().writes.data_mut(i);
        let r = f(words, len_bytes);
        if let (Some(last), tail @ 1..) = (words.last_mut(), len_bytes % 8) {
            *last &= u64::MAX >> (64 - 8 * tail);
        }
        Ok(r)
    }

    /// The length of an allocated object at `rts`, without adding it to the read set (a blind
    /// write's lock checks the version instead).
    fn peek_len(&mut self, addr: Addr) -> Result<usize, Error> {
        // The head only: a blind write's lock requires a head at or below `rts`.
        let at = ReadAt { rts: self.rts, check_lock: false, old_versions: false };
        let entry = self.read_through_owner(addr, at, None)?;
        if !entry.header.is_allocated() {
            return Err(Error::NotAllocated { addr });
        }
        Ok(entry.len_bytes as usize)
    }

    /// Allocates an object holding `value`. It becomes visible to others when this commits.
    pub fn alloc<T: Pod>(&mut self, value: &T) -> Result<Addr, Error> {
        self.alloc_bytes(bytemuck::bytes_of(value))
    }

    /// Allocates an object holding `bytes` (1 byte to [`crate::heap::OBJECT_BYTES_MAX`]).
    pub fn alloc_bytes(&mut self, bytes: &[u8]) -> Result<Addr, Error> {
        self.alloc_bytes_near(None, bytes)
    }

    /// Allocates an object holding `value` next to the object at `near`: in a cluster, in the
    /// same region (so at the same primary, and a transaction touching both talks to one
    /// owner); in the embedded engine the hint changes nothing.
    pub fn alloc_near<T: Pod>(&mut self, near: Addr, value: &T) -> Result<Addr, Error> {
        self.alloc_bytes_near(Some(near), bytemuck::bytes_of(value))
    }

    /// Reserves a slot for `len_bytes`: in the local heap, or — in a cluster, when this process
    /// holds no primary or `near` is remote — at a remote primary. Returns it and its version.
    fn reserve(
        &mut self,
        near: Option<Addr>,
        len_bytes: usize,
    ) -> Result<(Addr, Timestamp), Error> {
        let shared = self.shared;
        if let Some(remote) = shared.remote.as_deref() {
            let local = match near {
                Some(a) if !a.is_null() => remote.is_local_primary(a.region()),
                _ => shared.heap.has_home_regions(),
            };
            if !local {
                return remote.reserve(near.filter(|a| !a.is_null()), len_bytes);
            }
        }
        let w = self.w();
        let addr = shared.heap.reserve(&mut w.alloc, len_bytes)?;
        let version = shared.heap.object(addr).ok().map_or(Timestamp::ZERO, |o| o.header().ts());
        Ok((addr, version))
    }

    /// Gives back a slot reserved by [`Tx::reserve`] that will not be committed.
    fn release_reserved(&self, addr: Addr) {
        match self.shared.remote.as_deref() {
            Some(remote) if !remote.is_local_primary(addr.region()) => {
                // A lost release leaves the slot reserved until the owner's recovery.
                let _ = remote.release(addr);
            }
            // Reserved at the region's old primary, before this process was promoted: not a
            // reservation of this heap.
            Some(remote) if remote.take_remote_reservation(addr) => {}
            _ => self.shared.heap.release(addr, None),
        }
    }

    fn alloc_bytes_near(&mut self, near: Option<Addr>, bytes: &[u8]) -> Result<Addr, Error> {
        self.check_live()?;
        if self.read_only {
            return Err(Error::ReadOnly { addr: Addr::NULL });
        }
        let rts = self.rts;
        let (addr, version) = self.reserve(near, bytes.len())?;
        let w = self.w();
        // A slot freed after `rts` still holds a live object in this attempt's snapshot, which
        // the attempt may have read or written, or reach later through a pointer it read.
        // Allocating it would alias that object with the new one in the attempt's own view (the
        // write set shadows the snapshot), and a read of it would escape validation (written
        // objects are not validated). The attempt is doomed instead; a retry's snapshot is past
        // the free. (Fresh and reclaimed slots have a zero header.)
        // With an optimistic `rts` a free at or below it may still postdate an earlier read (or
        // a blind write) of this slot's object: a free after `recent_from` revalidates the reads,
        // and a slot this attempt already writes is refused.
        let refused = if version > rts || w.writes.find(addr).is_some() {
            Some(Error::Aborted(Abort::TooNew { addr, version, rts }))
        } else if version > self.recent_from {
            self.check_reads(false).err()
        } else {
            None
        };
        if let Some(e) = refused {
            self.release_reserved(addr);
            return Err(match e {
                Error::Aborted(a) => self.doom(a),
                other => other,
            });
        }
        self.w().writes.push(addr, WriteKind::Alloc, bytes, crate::object::Expect::Free);
        self.written();
        Ok(addr)
    }

    /// Frees the object at `addr` when this commits.
    pub fn free(&mut self, addr: Addr) -> Result<(), Error> {
        self.check_live()?;
        if self.read_only {
            return Err(Error::ReadOnly { addr });
        }
        if let Some(i) = self.w().writes.find(addr) {
            match self.w().writes.entries()[i].kind {
                WriteKind::Free => return Err(Error::NotAllocated { addr }),
                WriteKind::Alloc => {
                    self.w().writes.remove(i);
                    self.unwritten();
                    self.release_reserved(addr);
                }
                WriteKind::Update => self.w().writes.mark_free(i),
            }
            return Ok(());
        }
        let len_bytes = self.peek_len(addr)?;
        let rts = self.rts;
        // The freed version carries a zeroed payload of the object's length.
        let zeros = vec![0u8; len_bytes];
        self.w().writes.push(addr, WriteKind::Free, &zeros, crate::object::Expect::NotAfter(rts));
        self.written();
        Ok(())
    }

    /// Commits: see [`commit`] for the protocol.
    ///
    /// # Conflicts
    /// Returns [`Error::Aborted`] when the attempt was doomed by an earlier operation or when
    /// locking or validation fails; nothing was installed then.
    ///
    /// # Durability
    /// In a durable database the redo record is written before the new versions become
    /// visible. In `sync` mode `commit` returns once the durable marker covers the write
    /// timestamp (for a read-only transaction: the newest version it read), unless
    /// `options.wait_durable` is off. An I/O error is returned as [`Error::Durable`]; the
    /// versions may then be installed in memory without being durable, and the database
    /// refuses further durable commits (reopen it).
    pub fn commit(mut self) -> Result<CommitInfo, Error> {
        if let Some(a) = self.doomed {
            return Err(Error::Aborted(a));
        }
        let shared = self.shared;
        let rts = self.rts;
        let options = self.options;
        let w = self.worker.as_mut().expect("a live transaction holds its worker");
        let Worker { reads, writes, local, slot: slot_index, tx_seq, .. } = &mut **w;
        let slot_index = *slot_index;
        // In a cluster the backups make a commit durable (`crate::remote`); the local log
        // holds only what this node backs up.
        let log = shared.durable.as_ref().filter(|_| shared.remote.is_none()).map(|d| &d.log);
        // The attempt's number for remote owners, drawn only in a cluster.
        let mut attempt = || {
            *tx_seq = tx_seq.wrapping_add(1);
            ((slot_index as u64) << 40) | (*tx_seq & ((1 << 40) - 1))
        };
        let mut outcome = with_participants!(shared, local, slot_index, attempt(), |set| {
            commit::commit(&shared.clock, &set, rts, &options, reads, writes)
        });
        if let (Some(log), Ok(info)) = (log, &outcome) {
            if info.wts.is_some() {
                // Installed and unlocked: the writeback hint of SPHT Alg. 5 (flag-gated).
                log.after_commit(slot_index);
            }
            // # Durability: wait for the marker to cover the commit, or, for a read-only
            // transaction, the newest version it read (it must not report undurable data).
            let ts = match info.wts {
                Some(wts) => wts.as_nanos(),
                None => reads.entries().iter().map(|r| r.header.ts().as_nanos()).max().unwrap_or(0),
            };
            if options.wait_durable
                && !log.shortcuts.skip_marker_wait
                && let Err(e) = log.wait_durable(Some(slot_index), ts)
            {
                outcome = Err(e.into());
            }
        }
        if let Ok(CommitInfo { wts: Some(wts), .. }) = &outcome {
            // The leaves this attempt hinted now have version `wts` (pending hints of an
            // attempt that did not commit are dropped with the transaction).
            w.hints.promote(*wts);
        }
        let slot = shared.slot(w.slot);
        match &outcome {
            Ok(info) if info.wts.is_some() => {
                bump(&slot.commits, 1);
                bump(&slot.write_wait_ns, info.write_wait_ns);
            }
            Ok(_) => bump(&slot.read_only_commits, 1),
            Err(e) => {
                if let Some(a) = e.as_abort() {
                    bump(&slot.aborts[a.kind() as usize], 1);
                }
            }
        }
        self.counted = true;
        outcome
    }

    /// Abandons the attempt: buffered writes are dropped and reserved slots released. Dropping
    /// an uncommitted transaction does the same.
    pub fn abort(mut self) {
        if self.doomed.is_none() {
            self.doomed = Some(Abort::Requested);
        }
    }
}

impl<C: Clock> Drop for Tx<'_, C> {
    fn drop(&mut self) {
        let Some(mut w) = self.worker.take() else {
            return;
        };
        {
            if !w.writes.is_empty() {
                let shared = self.shared;
                with_participants!(shared, &w.local, w.slot, 0, |set| commit::discard(
                    &set,
                    &mut w.writes
                ));
            }
        }
        let slot = self.shared.slot(w.slot);
        if !self.counted {
            let reason = self.doomed.unwrap_or(Abort::Requested);
            bump(&slot.aborts[reason.kind() as usize], 1);
        }
        // Release: pairs with the GC's Acquire scan; the slot is idle again.
        slot.active_rts.store(worker::IDLE, std::sync::atomic::Ordering::Release);
        w.reads.clear();
        // Pending hints are about writes that were not committed (`hints`).
        w.hints.drop_pending();
        worker::put_cached(w);
    }
}

#[cfg(test)]
mod tests {
    use ordo_clock::LogicalClock;

    use crate::{Addr, Config, Error, Ordo};

    /// Bytes in use: the first word says how many (as a tree node's data end does).
    fn first_word(w: u64) -> usize {
        w as usize
    }

    /// `read_used_owned` hands out the bytes in use, then zeros to the object's length — not
    /// whatever an earlier, longer read left in the worker's buffers (it hands out the read
    /// buffer itself, so without the zeroing the tail would be the previous object's bytes) —
    /// and the transaction's own write whole; `write_words` buffers words as `write_bytes`
    /// would, and refuses a length the object does not have.
    #[test]
    fn read_used_owned_gives_the_used_bytes_then_zeros() {
        let db = Ordo::with_clock(Config::default(), LogicalClock::new()).unwrap();
        let mut obj = [0xEEu8; 64];
        obj[..8].copy_from_slice(&9u64.to_le_bytes());
        let (ones, a) = db
            .run(|tx| Ok::<_, Error>((tx.alloc_bytes(&[0xFF; 64])?, tx.alloc_bytes(&obj)?)))
            .unwrap();
        let mut tx = db.begin().unwrap();
        let mut want = [0u64; 8];
        want[0] = 9;
        want[1] = u64::from_le_bytes([0xEE; 8]);
        for _ in 0..3 {
            // Both buffers (scratch and spare) hold the all-ones object at some point.
            assert_eq!(tx.read_bytes(ones).unwrap(), vec![0xFF; 64]);
            let (words, len, _) = tx.read_used_owned(a, first_word).unwrap();
            assert_eq!((&words[..], len), (&want[..], 64));
            tx.recycle(words);
        }
        // Its own write: all of it.
        let mut changed = [0u64; 8];
        changed[0] = 9;
        changed[7] = 7;
        tx.write_words(a, &changed, 64).unwrap();
        let (words, _, _) = tx.read_used_owned(a, first_word).unwrap();
        assert_eq!(words, changed.to_vec());
        assert!(matches!(tx.write_words(a, &changed[..7], 56), Err(Error::WrongSize { .. })));
        assert!(matches!(tx.write_words(a, &changed, 60), Err(Error::WrongSize { .. })));
        assert_eq!(
            tx.read_used_owned(Addr::NULL, first_word),
            Err(Error::InvalidAddress { addr: Addr::NULL })
        );
        tx.commit().unwrap();
        let mut got = [0u8; 64];
        got[..8].copy_from_slice(&9u64.to_le_bytes());
        got[56..].copy_from_slice(&7u64.to_le_bytes());
        assert_eq!(db.run(|tx| tx.read_bytes(a)).unwrap(), got.to_vec());
    }
}
