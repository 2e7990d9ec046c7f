//! The participant seam: what a transaction asks of the owners of its objects (DESIGN §4,
//! FaRMv2 §4.2 Fig. 3).
//!
//! One coordinator ([`super::commit`]) serves the embedded engine and the cluster. It never
//! touches object memory itself: it asks the **owner** of each object — a [`Participant`] — and
//! finds the owner through a [`Participants`] set, which routes an address (by its region) to an
//! [`Owner`] and the owner to its participant. A participant stands for the replica group of
//! the regions it owns: the *primary* steps (read, LOCK, VALIDATE, COMMIT-PRIMARY) act on the
//! head versions, [`Participant::commit_backup`] reaches the group's backups (for the embedded
//! engine: the durable log), and [`Participant::truncate`] lets them apply the writes.
//!
//! * The embedded engine's set is [`One`] [`LocalParticipant`] for every region: direct calls
//!   into the heap. `One::SINGLE` is a constant `true`, so the coordinator's grouping of the
//!   write set by owner compiles away and the commit is the single-owner protocol it always was.
//! * `ordo-cluster` provides a set whose `get` returns, per owner, either the node's own local
//!   participant or an RPC client whose server side calls the remote node's local participant.
//!
//! # Execution: reads through the seam
//! [`Participant::read`] returns the newest version of an object at or below a read timestamp —
//! the head, or in multi-version mode FaRMv2's "find the snapshot version" walk of the
//! old-version chain — and [`Participant::still_newest`] answers the optimistic-`rts`
//! revalidation ("is this read still the newest version at or below `rts`?", see `Tx`).
//! [`Participant::read_view`] lets a local participant hand out the head in place; its default
//! copies the version and views the copy.
//!
//! # Commit: the steps, and what a participant promises
//! * **LOCK** ([`Participant::lock`]) locks every entry of the participant's part of the write
//!   set (one run of the sorted set, [`WritePart`]) and returns a **lock token**
//!   ([`Participant::Locks`]) that the coordinator holds: what unlocking or installing needs
//!   (the replaced headers, the copies of the old heads). Participants never write into the
//!   coordinator's write set. A `lock` that fails has released every lock it took — or, for a
//!   remote owner whose answer was lost, will release them when it gets the `abort` the
//!   coordinator then sends it without a token.
//! * **VALIDATE** ([`Participant::validate`]) checks the reads it owns that are not written.
//! * **COMMIT-BACKUP** ([`Participant::commit_backup`]) makes the part durable or replicated.
//!   [`Participant::begin_backup`] comes before the write timestamp is drawn, with a lower
//!   bound of it (the durable marker must not pass a timestamp still to be logged).
//! * **COMMIT-PRIMARY** ([`Participant::commit_primary`]) consumes the token: installs the part
//!   at `wts` and unlocks it.
//! * **TRUNCATE** ([`Participant::truncate`]) ends the transaction at the owner and its backups.
//! * **ABORT** ([`Participant::abort`]) consumes the token, if any, and releases its locks and
//!   the slots reserved for the part's allocations.
//!
//! Every step can fail with an [`Error`]; a remote owner's failure is
//! [`Error::Participant`] naming the owner, a region and the
//! [`ParticipantStep`](crate::ParticipantStep). The coordinator keeps the invariants stated in
//! [`super::commit`]: no participant installs before every backup acknowledged, and on every
//! error before that point every participant is told to abort, so no lock is left held.

pub mod cluster;
mod local;
mod remote;
#[cfg(test)]
mod tests;

use ordo_clock::Timestamp;

pub use local::{LocalLocks, LocalParticipant};
pub(crate) use local::{LocalScratch, redo_record};
pub use remote::Remote;

use super::set::{ReadEntry, WritePart, WriteSet};
use super::view::View;
use crate::addr::Addr;
use crate::error::Error;
use crate::object::UsedBytes;

/// One owner of regions in a participant set, as numbered by the set's routing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Owner(pub u16);

impl Owner {
    /// The owner of every region in a single-owner set.
    pub const LOCAL: Owner = Owner(0);
}

/// How a read looks for the version at a read timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadAt {
    /// The read timestamp: the read returns the newest version at or below it.
    pub rts: Timestamp,
    /// A locked head aborts the read (FaRMv2 early abort). Only the `skip_read_lock_check`
    /// shortcut of the negative tests turns this off.
    pub check_lock: bool,
    /// A head newer than `rts` may be read past, down the old-version chain (multi-version
    /// mode). Off when the transaction could not commit such a read anyway (eager validation,
    /// FaRMv2 §4.4) and when only the current length is wanted.
    pub old_versions: bool,
}

/// The owner of objects, as seen by a transaction (its reads and its coordinator).
pub trait Participant {
    /// What [`Participant::lock`] hands the coordinator: everything unlocking or installing the
    /// locked part needs. Consumed by [`Participant::commit_primary`] or [`Participant::abort`].
    type Locks;

    /// Reads the newest version of `addr` at or below `at.rts` into `out` (payload words) and
    /// returns it as the read-set entry to record. A locked head (with `at.check_lock`), or no
    /// version old enough, is an abort.
    fn read(&self, addr: Addr, at: ReadAt, out: &mut Vec<u64>) -> Result<ReadEntry, Error>;

    /// [`Participant::read`] that may copy only the first `used(word 0)` bytes of the head
    /// version into `out` (`ObjectRef::read_used`); the entry's length is
    /// still the object's. By default, and for old versions, the whole version is copied.
    #[inline]
    fn read_used(
        &self,
        addr: Addr,
        at: ReadAt,
        out: &mut Vec<u64>,
        _used: UsedBytes,
    ) -> Result<ReadEntry, Error> {
        self.read(addr, at, out)
    }

    /// [`Participant::read`], giving `f` a view of the version. `f` may run more than once, on
    /// torn data whose result is discarded, so it must only read. By default the version is
    /// copied into `out` and viewed there; a local participant may view it in place.
    #[inline]
    fn read_view<R>(
        &self,
        addr: Addr,
        at: ReadAt,
        out: &mut Vec<u64>,
        f: impl FnMut(View<'_>) -> R,
    ) -> Result<(ReadEntry, R), Error> {
        view_copy(self.read(addr, at, out)?, out, f)
    }

    /// Whether `read` is still the newest version of its object at or below `rts`, unlocked:
    /// the revalidation of an optimistic read timestamp. `scratch` is working memory.
    fn still_newest(
        &self,
        read: &ReadEntry,
        rts: Timestamp,
        scratch: &mut Vec<u64>,
    ) -> Result<bool, Error>;

    /// LOCK: locks every entry of `part` whose head satisfies its `expect` and returns the token.
    /// On failure nothing of `part` stays locked (see the module docs for a lost answer).
    fn lock(&self, part: WritePart<'_>) -> Result<Self::Locks, Error>;

    /// VALIDATE: checks that every entry of `reads` (all owned here) whose object `writes` does
    /// not hold is unlocked and still at the version read.
    fn validate(&self, reads: &[ReadEntry], writes: &WriteSet) -> Result<(), Error>;

    /// Whether this owner keeps a durable log, so that the coordinator must read the clock for
    /// [`Participant::begin_backup`] before drawing the write timestamp (without one it skips
    /// that reading).
    #[inline]
    fn logs(&self) -> bool {
        false
    }

    /// Called after LOCK and before the write timestamp is drawn, with a lower bound of it (the
    /// clock's `now().lo`), when [`Participant::logs`]: the durable marker must not pass a
    /// timestamp still to be logged.
    #[inline]
    fn begin_backup(&self, _lower: Timestamp) {}

    /// COMMIT-BACKUP: makes `part` durable or replicated at `wts` before anything is installed.
    fn commit_backup(&self, part: WritePart<'_>, wts: Timestamp) -> Result<(), Error>;

    /// The transaction aborts after this owner's COMMIT-BACKUP succeeded (another owner's
    /// failed): the backups drop `part` instead of applying it. Best effort — a backup that
    /// misses it holds the part until the cluster's recovery decides (module docs of
    /// [`super::commit`]). The embedded engine's log needs nothing: a record whose transaction
    /// did not commit is never covered by a commit the reader waits for.
    #[inline]
    fn forget_backup(&self, _part: WritePart<'_>, _wts: Timestamp) {}

    /// COMMIT-PRIMARY: installs every entry of `part` at `wts` and unlocks it; slots of freed
    /// objects return to the allocator. An error may leave the part partly installed (a remote
    /// owner; the cluster's recovery finishes it from the backups).
    fn commit_primary(
        &self,
        locks: Self::Locks,
        part: WritePart<'_>,
        wts: Timestamp,
    ) -> Result<(), Error>;

    /// TRUNCATE: the transaction is over at this owner; its backups may apply `part`.
    #[inline]
    fn truncate(&self, _part: WritePart<'_>, _wts: Timestamp) -> Result<(), Error> {
        Ok(())
    }

    /// ABORT: releases the locks of `locks` (when this owner's LOCK succeeded) or whatever a
    /// failed LOCK left behind, and every slot reserved for `part`'s allocations.
    fn abort(&self, locks: Option<Self::Locks>, part: WritePart<'_>) -> Result<(), Error>;
}

/// [`Participant::read_view`] by copy: `f` views the version `read` copied into `out`.
#[inline]
pub(crate) fn view_copy<R>(
    entry: ReadEntry,
    out: &[u64],
    mut f: impl FnMut(View<'_>) -> R,
) -> Result<(ReadEntry, R), Error> {
    let r = f(View::owned(out, entry.len_bytes as usize));
    Ok((entry, r))
}

/// The owners of a transaction's objects: routing by region, one participant per owner.
pub trait Participants {
    /// The participant type (for a cluster: an enum of local and remote participants).
    type Participant: Participant;

    /// Whether every address routes to one owner. A constant, so the coordinator's grouping of
    /// the write and read sets by owner compiles away for the embedded engine.
    const SINGLE: bool = false;

    /// The owner of `addr`'s region.
    fn route(&self, addr: Addr) -> Owner;

    /// The participant of `owner` (an owner `route` returned).
    fn get(&self, owner: Owner) -> &Self::Participant;

    /// The participant owning `addr`.
    #[inline]
    fn owner_of(&self, addr: Addr) -> &Self::Participant {
        self.get(self.route(addr))
    }

    /// Tells the set which owners the transaction writes, before its COMMIT-BACKUPs: a
    /// cluster's records carry the list, so that recovery can tell whether every part of a
    /// transaction survives a failure. Nothing by default.
    #[inline]
    fn writing(&self, _owners: &[Owner]) {}
}

/// A set of one participant owning every region: the embedded engine's.
#[derive(Debug)]
pub struct One<P>(pub P);

impl<P: Participant> Participants for One<P> {
    type Participant = P;

    const SINGLE: bool = true;

    #[inline(always)]
    fn route(&self, _addr: Addr) -> Owner {
        Owner::LOCAL
    }

    #[inline(always)]
    fn get(&self, _owner: Owner) -> &P {
        &self.0
    }
}
