//! The commit protocol: FaRMv2 Alg. 2, one coordinator for the engine and the cluster.
//!
//! A transaction took its read timestamp `rts` when it began (`now().hi` in strict serializable
//! mode, with reads revalidated when they meet a version that may postdate an earlier read —
//! see "Optimistic read timestamp" in `txn`; `get_ts()` in strict SI; `now().lo` otherwise),
//! read every object at the newest version `<= rts` (aborting on a locked or too-new head), and
//! buffered its writes. Commit then runs, in this order:
//!
//! 1. **Read-only**: nothing buffered → commit is a no-op. Opacity needs no validation: the reads
//!    already form one snapshot (Lemma 4, or the revalidations of the optimistic mode).
//! 2. **Lock** every written object (sorted by owner, then address), requiring the head to be the
//!    version the transaction read, or — for a blind write — not newer than `rts`; allocations
//!    require a free slot. Any failure releases all locks and aborts.
//! 3. **`wts = get_ts()` while holding the locks.** The wait puts `wts` in the past before any lock
//!    is released, so every lock is held at global time `wts` (Lemma 1.2): a reader with
//!    `rts' >= wts` sees the lock or the new version, never the old one.
//! 4. **Validate** (serializable modes only): every object read but not written is unlocked and
//!    still at the version read. Because validation starts after `wts` is in the past, any writer
//!    with `wts' <= wts` that conflicts is seen (Lemma 3, the write invariant).
//! 5. **Log** (`commit_backup`: durability or replication), then **install** the new versions at
//!    `wts` and unlock (`commit_primary`), then **truncate**.
//!
//! Snapshot isolation skips step 4. FaRMv2 §7.3 lists what breaks if steps are reordered or
//! dropped — no wait in step 3, validation overlapping the wait, the wait before step 2 — and
//! `Shortcuts` (feature `shortcuts`) can do exactly that so the negative tests can show the
//! checker catching each one; `log_after_install` swaps the two halves of step 5, which
//! `tests/durable/durable_order.rs` shows losing a value a reader saw.
//!
//! # Participants (FaRMv2 Fig. 3)
//! The coordinator talks to the owners of the objects through a
//! [`Participants`] set. It sorts the write set by owner, then
//! address, so each owner's part is one run, and sends each message to every owner concerned:
//!
//! | step | FaRMv2 message | sent to |
//! |---|---|---|
//! | 2 | LOCK | each owner of written objects, in owner order; it returns a lock token the coordinator holds |
//! | 3 | (`begin_backup`) | each owner of written objects, before `wts` is drawn |
//! | 4 | VALIDATE | each owner of objects read but not written |
//! | 5 | COMMIT-BACKUP | each owner of written objects, which reaches that owner's backups |
//! | 5 | COMMIT-PRIMARY | each owner of written objects, with its token, once **every** backup acknowledged |
//! | 5 | TRUNCATE | each owner of written objects |
//! | — | ABORT | every owner of written objects, with its token if it has one, on a failure before step 5's install |
//!
//! For the embedded engine's single-owner set (`Participants::SINGLE`) the grouping is a constant:
//! one run, one token kept inline, no allocation — the protocol as it was with one participant.
//!
//! # Failures
//! Every step can fail. A failure **before the commit point** (LOCK, VALIDATE, COMMIT-BACKUP)
//! sends ABORT to every owner of written objects — with its token where its LOCK succeeded,
//! without one where it failed or was never sent (a remote owner whose LOCK answer was lost
//! releases what it took; every owner releases its reserved allocation slots) — and returns the
//! failure: nothing is installed and no lock stays held. An ABORT that fails itself is not
//! retried here: the owner is gone, and the cluster's recovery releases its locks.
//!
//! The **commit point** is the last COMMIT-BACKUP acknowledgement. After it the transaction is
//! committed: a failing COMMIT-PRIMARY or TRUNCATE does not stop the others (every other owner
//! installs and unlocks), and the first such failure is returned
//! ([`ParticipantStep::is_after_commit_point`](crate::ParticipantStep::is_after_commit_point)).
//! The failed owner's part may then be partly installed: the cluster's recovery installs it from
//! the backups, which hold the whole transaction. Locally this cannot happen: the local
//! participant's COMMIT-PRIMARY does not fail. Conversely, when a COMMIT-BACKUP fails after
//! another owner's backups acknowledged, those backups hold the record of a transaction that
//! aborted: the coordinator tells them to drop it (`forget_backup`), and should that message be
//! lost, the cluster's recovery must count a transaction as committed only when the backups of
//! every written region hold it (FaRM's recovery vote). The local engine has one backup, the
//! durable log, so it never sees a partial COMMIT-BACKUP.
//!
//! # Invariants
//! * No participant installs (COMMIT-PRIMARY) before every COMMIT-BACKUP succeeded — except
//!   with the `log_after_install` shortcut of the negative tests.
//! * Locks are released on every error path: each lock token is consumed exactly once, by
//!   COMMIT-PRIMARY or ABORT, and an error before the commit point aborts at every owner.
//!
//! # Lemmas kept
//! * **Read invariant**: a version read at `v <= rts` has no successor in `(v, rts]`.
//! * **Write invariant**: no object a committed transaction read or wrote has a version in
//!   `(rts, wts]` (an empty range when an optimistic `rts` is above `wts`).

use ordo_clock::{Clock, TimedTs, Timestamp};

use super::options::Options;
use super::participant::{Owner, Participant, Participants};
use super::set::{ReadEntry, ReadSet, WriteEntry, WriteKind, WritePart, WriteSet};
use crate::error::Error;
use crate::object::Expect;

/// What a successful commit did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitInfo {
    /// The read timestamp the transaction ran at.
    pub rts: Timestamp,
    /// The write timestamp its versions carry; `None` for a read-only transaction.
    pub wts: Option<Timestamp>,
    /// Nanoseconds spent waiting out the uncertainty of `wts` (0 when read-only).
    pub write_wait_ns: u64,
}

/// The lock token type of a set's participants.
type Locks<S> = <<S as Participants>::Participant as Participant>::Locks;

/// Runs steps 1–5. On `Err` before the commit point every lock and reservation has been
/// released and nothing is installed; see the module docs for a failure after it.
pub(crate) fn commit<C: Clock, S: Participants>(
    clock: &C,
    set: &S,
    rts: Timestamp,
    options: &Options,
    reads: &ReadSet,
    writes: &mut WriteSet,
) -> Result<CommitInfo, Error> {
    if writes.is_empty() {
        return Ok(CommitInfo { rts, wts: None, write_wait_ns: 0 });
    }
    set_expectations(rts, reads, writes);
    if S::SINGLE {
        writes.sort();
    } else {
        writes.sort_by_key(|e| (set.route(e.addr), e.addr));
    }

    #[cfg(feature = "shortcuts")]
    let shortcuts = options.shortcuts;
    #[cfg(not(feature = "shortcuts"))]
    let shortcuts = Shortcuts::default();

    // Unsafe variant: the wait happens before the locks exist, so they are not held at wts.
    let early_wts = if shortcuts.wait_before_lock { Some(clock.get_ts()) } else { None };

    shortcuts.step(Step::BeforeLock);
    // Each owner's part of the sorted write set (built once; every step walks it).
    let groups = Groups::new(set, writes);
    // LOCK at each owner; the coordinator holds the tokens.
    let mut held = Tokens::new();
    for (owner, part) in groups.clone() {
        match set.get(owner).lock(part) {
            Ok(locks) => held.push(locks),
            Err(e) => return Err(abort(set, writes, &mut held, e)),
        }
    }
    shortcuts.step(Step::Locked);

    let validates = options.isolation.validates_reads() && !shortcuts.skip_validation;
    // Unsafe variant: validation overlapping the wait may miss a writer with wts' <= wts.
    if validates
        && shortcuts.validate_before_wait
        && let Err(e) = validate(set, reads, writes)
    {
        return Err(abort(set, writes, &mut held, e));
    }

    // Durable logs: the marker must not pass a timestamp this commit may still log, so a lower
    // bound of wts is published before wts is drawn. Without a log the clock is read only by
    // the wait itself (`get_ts_timed`; one reading of the ORDO clock is ~30 ns, a tenth of a
    // short transaction's commit).
    let logged_from = groups.clone().any(|(owner, _)| set.get(owner).logs()).then(|| {
        let lower = clock.now().lo();
        for (owner, _) in groups.clone() {
            set.get(owner).begin_backup(lower);
        }
        lower
    });
    let timed = match early_wts {
        Some(ts) => TimedTs { ts, first_lo: ts, last_lo: ts },
        // Unsafe variant: wts is still in the future when the locks are released.
        None if shortcuts.skip_write_wait => {
            let now = clock.now();
            TimedTs { ts: now.hi(), first_lo: now.lo(), last_lo: now.lo() }
        }
        None => clock.get_ts_timed(),
    };
    let wts = timed.ts;
    let write_wait_ns = timed.last_lo.nanos_since(logged_from.unwrap_or(timed.first_lo));
    shortcuts.step(Step::WriteTimestamp);
    // Strict serializable attempts read at an optimistic `rts` that may be ahead of `wts`; their
    // reads are validated at `wts` below (module docs of `txn`).
    debug_assert!(
        wts >= rts || options.isolation == super::Isolation::StrictSerializable,
        "write timestamp {wts:?} before read timestamp {rts:?}"
    );

    if validates
        && !shortcuts.validate_before_wait
        && let Err(e) = validate(set, reads, writes)
    {
        return Err(abort(set, writes, &mut held, e));
    }

    shortcuts.step(Step::Validated);

    // Step 5: COMMIT-BACKUP at every owner first; the last acknowledgement is the commit point.
    // The unsafe variant installs first, so readers may see values not yet in the log (its
    // logging error is returned: the writes are already installed and cannot be aborted).
    let mut acked = 0usize;
    if !S::SINGLE {
        let owners: Vec<Owner> = groups.clone().map(|(owner, _)| owner).collect();
        set.writing(&owners);
    }
    if !shortcuts.log_after_install {
        for (owner, part) in groups.clone() {
            if let Err(e) = set.get(owner).commit_backup(part, wts) {
                // The backups that acknowledged drop the part (several owners only).
                for (owner, part) in groups.clone().take(acked) {
                    set.get(owner).forget_backup(part, wts);
                }
                return Err(abort(set, writes, &mut held, e));
            }
            acked += 1;
        }
    }
    // The commit point: no owner installs before every owner's backups acknowledged.
    debug_assert!(shortcuts.log_after_install || acked == groups.clone().count());
    let _ = acked;
    // Committed: COMMIT-PRIMARY at every owner, whatever another one answers.
    let mut failure = None;
    for (owner, part) in groups.clone() {
        let locks = held.take().expect("LOCK gave a token for every owner");
        if let Err(e) = set.get(owner).commit_primary(locks, part, wts) {
            failure.get_or_insert(e);
        }
    }
    shortcuts.step(Step::Installed);
    if shortcuts.log_after_install {
        for (owner, part) in groups.clone() {
            if let Err(e) = set.get(owner).commit_backup(part, wts) {
                failure.get_or_insert(e);
            }
        }
    }
    for (owner, part) in groups {
        if let Err(e) = set.get(owner).truncate(part, wts) {
            failure.get_or_insert(e);
        }
    }
    writes.clear();
    match failure {
        None => Ok(CommitInfo { rts, wts: Some(wts), write_wait_ns }),
        Some(e) => Err(e),
    }
}

/// ABORT at every owner of `writes` — with its token where LOCK succeeded (tokens are in owner
/// order, and LOCK stops at the first failure) — then forgets the writes. Returns `cause`.
///
/// Inlined, so a single-owner set's error paths take their one token straight from the
/// coordinator's holder (which then never escapes); several owners go through [`abort_many`].
#[inline(always)]
fn abort<S: Participants>(
    set: &S,
    writes: &mut WriteSet,
    held: &mut Tokens<S>,
    cause: Error,
) -> Error {
    if !S::SINGLE {
        return abort_many(set, writes, held.hand_over(), cause);
    }
    cold();
    for (owner, part) in Groups::new(set, writes) {
        // A failed ABORT leaves the owner's locks to the cluster's recovery (module docs).
        let _ = set.get(owner).abort(held.take(), part);
    }
    writes.clear();
    cause
}

/// [`abort`] for several owners.
#[cold]
#[inline(never)]
fn abort_many<S: Participants>(
    set: &S,
    writes: &mut WriteSet,
    mut held: Tokens<S>,
    cause: Error,
) -> Error {
    for (owner, part) in Groups::new(set, writes) {
        // A failed ABORT leaves the owner's locks to the cluster's recovery (module docs).
        let _ = set.get(owner).abort(held.take(), part);
    }
    debug_assert!(held.take().is_none(), "a lock token was not given back");
    writes.clear();
    cause
}

/// Marks the path that calls it as unlikely.
#[cold]
#[inline(never)]
fn cold() {}

/// Gives up the buffered writes of a transaction that never reached commit (or whose commit
/// already ended): releases the slots reserved for its allocations at their owners.
#[inline(never)]
pub(crate) fn discard<S: Participants>(set: &S, writes: &mut WriteSet) {
    if writes.is_empty() {
        return;
    }
    if !S::SINGLE {
        writes.sort_by_key(|e| (set.route(e.addr), e.addr));
    }
    for (owner, part) in Groups::new(set, writes) {
        let _ = set.get(owner).abort(None, part);
    }
    writes.clear();
}

/// VALIDATE at each owner of the objects read but not written.
#[inline]
fn validate<S: Participants>(set: &S, reads: &ReadSet, writes: &WriteSet) -> Result<(), Error> {
    let reads = reads.entries();
    if S::SINGLE {
        return match reads.first() {
            Some(r) => set.owner_of(r.addr).validate(reads, writes),
            None => Ok(()),
        };
    }
    validate_by_owner(set, reads, writes)
}

/// [`validate`] for a set of several owners: groups the reads by owner first.
#[cold]
fn validate_by_owner<S: Participants>(
    set: &S,
    reads: &[ReadEntry],
    writes: &WriteSet,
) -> Result<(), Error> {
    let mut owned: Vec<ReadEntry> =
        reads.iter().filter(|r| !r.written && writes.find(r.addr).is_none()).copied().collect();
    owned.sort_by_key(|r| set.route(r.addr));
    for run in owned.chunk_by(|a, b| set.route(a.addr) == set.route(b.addr)) {
        set.owner_of(run[0].addr).validate(run, writes)?;
    }
    Ok(())
}

/// The owners' parts of a write set sorted by (owner, address): one run per owner, in order.
/// For a single-owner set it is the whole set, once — an `Option` the optimiser unrolls.
struct Groups<'a, S> {
    set: &'a S,
    writes: &'a WriteSet,
    start: usize,
    /// The single owner's part, until taken (`Participants::SINGLE`).
    single: Option<(Owner, WritePart<'a>)>,
}

impl<'a, S: Participants> Groups<'a, S> {
    #[inline]
    fn new(set: &'a S, writes: &'a WriteSet) -> Self {
        let single = match writes.entries().first() {
            Some(e) if S::SINGLE => Some((set.route(e.addr), writes.part(0..writes.len()))),
            _ => None,
        };
        Groups { set, writes, start: 0, single }
    }
}

impl<S> Clone for Groups<'_, S> {
    #[inline]
    fn clone(&self) -> Self {
        Groups { set: self.set, writes: self.writes, start: self.start, single: self.single }
    }
}

impl<'a, S: Participants> Iterator for Groups<'a, S> {
    type Item = (Owner, WritePart<'a>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if S::SINGLE {
            return self.single.take();
        }
        let entries: &[WriteEntry] = self.writes.entries();
        let first = entries.get(self.start)?;
        let owner = self.set.route(first.addr);
        let rest = &entries[self.start..];
        let end = self.start
            + rest.iter().position(|e| self.set.route(e.addr) != owner).unwrap_or(rest.len());
        let part = self.writes.part(self.start..end);
        self.start = end;
        Some((owner, part))
    }
}

/// The lock tokens the coordinator holds, in owner order. The first is kept inline, and a
/// single-owner set (`Participants::SINGLE`) never touches the rest: its commit allocates
/// nothing and keeps its one token in registers.
struct Tokens<S: Participants> {
    first: Option<Locks<S>>,
    rest: Vec<Locks<S>>,
}

impl<S: Participants> Default for Tokens<S> {
    #[inline]
    fn default() -> Self {
        Tokens::new()
    }
}

impl<S: Participants> Tokens<S> {
    #[inline]
    fn new() -> Self {
        Tokens { first: None, rest: Vec::new() }
    }

    /// Adds the token of the next owner (owner order).
    #[inline]
    fn push(&mut self, token: Locks<S>) {
        if S::SINGLE || (self.first.is_none() && self.rest.is_empty()) {
            debug_assert!(self.first.is_none(), "a single-owner set locks once");
            self.first = Some(token);
        } else {
            self.rest.push(token);
        }
    }

    /// Moves every token into a new holder, field by field, for `abort` (so the coordinator's
    /// holder is never passed by address and can live in registers).
    #[inline(always)]
    fn hand_over(&mut self) -> Self {
        Tokens { first: self.first.take(), rest: std::mem::take(&mut self.rest) }
    }

    /// Takes the token of the next owner (owner order); `None` when every token was taken.
    #[inline]
    fn take(&mut self) -> Option<Locks<S>> {
        if S::SINGLE {
            return self.first.take();
        }
        match self.first.take() {
            Some(token) => Some(token),
            None if self.rest.is_empty() => None,
            None => Some(self.rest.remove(0)),
        }
    }
}

/// Step 2's requirement per written object: the version it was first read at, else not newer
/// than `rts`; an allocation's slot must be free. One pass over the reads in order, each looked
/// up in the write set, whose address filter answers the reads of unwritten objects at once
/// (TPC-C NewOrder: about 45 reads, 17 writes; looking each write up among the reads was 2.6 %
/// of its instructions).
fn set_expectations(rts: Timestamp, reads: &ReadSet, writes: &mut WriteSet) {
    for e in writes.entries_mut() {
        e.expect = match e.kind {
            WriteKind::Alloc => Expect::Free,
            WriteKind::Update | WriteKind::Free => Expect::NotAfter(rts),
        };
    }
    for r in reads.entries() {
        if let Some(i) = writes.find(r.addr) {
            let e = &mut writes.entries_mut()[i];
            // The first read of the object sets it; an allocation is never read from the heap.
            if e.kind != WriteKind::Alloc && matches!(e.expect, Expect::NotAfter(_)) {
                e.expect = Expect::Version(r.header.ts());
            }
        }
    }
}

/// Without the `shortcuts` feature every switch is a constant `false` the optimiser removes.
#[cfg(not(feature = "shortcuts"))]
#[derive(Clone, Copy, Default)]
struct Shortcuts {
    skip_write_wait: bool,
    validate_before_wait: bool,
    wait_before_lock: bool,
    skip_validation: bool,
    log_after_install: bool,
}

#[cfg(not(feature = "shortcuts"))]
#[derive(Clone, Copy)]
enum Step {
    BeforeLock,
    Locked,
    WriteTimestamp,
    Validated,
    Installed,
}

#[cfg(not(feature = "shortcuts"))]
impl Shortcuts {
    #[inline(always)]
    fn step(&self, _step: Step) {}
}

#[cfg(feature = "shortcuts")]
use super::options::CommitStep as Step;

#[cfg(feature = "shortcuts")]
impl super::options::Shortcuts {
    fn step(&self, step: Step) {
        if let Some(hook) = self.hook {
            hook(step);
        }
    }
}

#[cfg(test)]
mod expectation_tests {
    use super::*;
    use crate::addr::Addr;
    use crate::object::Header;

    /// Each written object expects the version of its *first* read (a later read of another
    /// version does not replace it), an unread one a head not newer than `rts`, an allocation a
    /// free slot; on both sides of the write set's index threshold.
    #[test]
    fn writes_expect_their_first_read() {
        let rts = Timestamp::from_nanos(1_000);
        let version = |ts: u64| Header::version(Timestamp::from_nanos(ts), true);
        for writes_n in [3u64, 40] {
            let mut reads = ReadSet::default();
            let mut writes = WriteSet::default();
            let addr = |k: u64| Addr::new(0, 64 * (k + 1));
            for k in 0..writes_n {
                let kind = if k % 5 == 4 { WriteKind::Alloc } else { WriteKind::Update };
                writes.push(addr(k), kind, &[0; 8], Expect::NotAfter(Timestamp::ZERO));
            }
            for k in 0..2 * writes_n {
                // Objects 0, 2, 4, … (and unwritten ones past the writes) are read, twice.
                if k % 2 == 0 {
                    let header = version(10 + k);
                    reads.push(ReadEntry::new(addr(k), header, 8));
                }
            }
            for k in (0..writes_n).step_by(2) {
                reads.push(ReadEntry::new(addr(k), version(500 + k), 8));
            }
            set_expectations(rts, &reads, &mut writes);
            for k in 0..writes_n {
                let e = writes.entries()[writes.find(addr(k)).unwrap()];
                let want = match (k % 5 == 4, k % 2 == 0) {
                    (true, _) => Expect::Free,
                    (false, true) => Expect::Version(Timestamp::from_nanos(10 + k)),
                    (false, false) => Expect::NotAfter(rts),
                };
                assert_eq!(e.expect, want, "object {k} of {writes_n}");
            }
        }
    }
}
