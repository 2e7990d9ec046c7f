//! The coordinator over a set of two owners: two local participants splitting the regions of one
//! heap, each wrapped to journal the messages it gets, to check that every address it is handed
//! routes to it, and to fail one step on demand (as a remote owner would: a peer gone, an
//! answer lost after the work was done).

use std::cell::RefCell;

use ordo_clock::{Clock, LogicalClock, Timestamp};

use super::{LocalLocks, LocalParticipant, LocalScratch, Owner, Participant, Participants, ReadAt};
use crate::addr::Addr;
use crate::error::{Abort, Error, ParticipantFailure, ParticipantStep};
use crate::heap::HeapConfig;
use crate::object::Expect;
use crate::txn::Options;
use crate::txn::commit::{CommitInfo, commit};
use crate::txn::set::{ReadEntry, ReadSet, WriteKind, WritePart, WriteSet};
use crate::{Config, Ordo, Versions};

/// What one owner does wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Nothing.
    None,
    /// Fails the step without doing it (the peer is gone).
    Before(ParticipantStep),
    /// Takes its locks, then fails LOCK (the answer was lost); a later ABORT releases them.
    LockAfterLocking,
    /// Installs and unlocks, then fails COMMIT-PRIMARY (the acknowledgement was lost).
    PrimaryAfterInstall,
}

/// A message an owner got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Call {
    owner: Owner,
    step: ParticipantStep,
}

/// One owner: the local participant, restricted to one region.
struct Owned<'a> {
    inner: LocalParticipant<'a>,
    owner: Owner,
    region: u16,
    fault: Fault,
    journal: &'a RefCell<Vec<Call>>,
    /// Locks whose LOCK answer was "lost": the owner releases them at the next ABORT.
    lost: RefCell<Option<LocalLocks>>,
}

impl Owned<'_> {
    fn note(&self, step: ParticipantStep, addrs: impl IntoIterator<Item = Addr>) {
        for addr in addrs {
            assert_eq!(addr.region(), self.region, "{addr} was sent to {:?} at {step}", self.owner);
        }
        self.journal.borrow_mut().push(Call { owner: self.owner, step });
    }

    fn fail(&self, step: ParticipantStep) -> Result<(), Error> {
        if self.fault == Fault::Before(step) {
            return Err(self.failure(step, ParticipantFailure::PeerGone));
        }
        Ok(())
    }

    fn failure(&self, step: ParticipantStep, cause: ParticipantFailure) -> Error {
        Error::Participant { owner: self.owner.0, region: self.region, step, cause }
    }
}

fn addrs<'p>(part: WritePart<'p>) -> impl Iterator<Item = Addr> + 'p {
    part.entries().iter().map(|e| e.addr)
}

impl Participant for Owned<'_> {
    type Locks = LocalLocks;

    fn read(&self, addr: Addr, at: ReadAt, out: &mut Vec<u64>) -> Result<ReadEntry, Error> {
        self.note(ParticipantStep::Read, [addr]);
        self.inner.read(addr, at, out)
    }

    fn still_newest(
        &self,
        read: &ReadEntry,
        rts: Timestamp,
        scratch: &mut Vec<u64>,
    ) -> Result<bool, Error> {
        self.note(ParticipantStep::Read, [read.addr]);
        self.inner.still_newest(read, rts, scratch)
    }

    fn lock(&self, part: WritePart<'_>) -> Result<LocalLocks, Error> {
        self.note(ParticipantStep::Lock, addrs(part));
        self.fail(ParticipantStep::Lock)?;
        let locks = self.inner.lock(part)?;
        if self.fault == Fault::LockAfterLocking {
            *self.lost.borrow_mut() = Some(locks);
            return Err(self.failure(ParticipantStep::Lock, ParticipantFailure::Timeout));
        }
        Ok(locks)
    }

    fn validate(&self, reads: &[ReadEntry], writes: &WriteSet) -> Result<(), Error> {
        self.note(ParticipantStep::Validate, reads.iter().map(|r| r.addr));
        self.fail(ParticipantStep::Validate)?;
        self.inner.validate(reads, writes)
    }

    fn logs(&self) -> bool {
        self.inner.logs()
    }

    fn begin_backup(&self, lower: Timestamp) {
        self.inner.begin_backup(lower);
    }

    fn commit_backup(&self, part: WritePart<'_>, wts: Timestamp) -> Result<(), Error> {
        self.note(ParticipantStep::CommitBackup, addrs(part));
        self.fail(ParticipantStep::CommitBackup)?;
        self.inner.commit_backup(part, wts)
    }

    fn commit_primary(
        &self,
        locks: LocalLocks,
        part: WritePart<'_>,
        wts: Timestamp,
    ) -> Result<(), Error> {
        self.note(ParticipantStep::CommitPrimary, addrs(part));
        self.inner.commit_primary(locks, part, wts)?;
        if self.fault == Fault::PrimaryAfterInstall {
            return Err(self.failure(ParticipantStep::CommitPrimary, ParticipantFailure::Timeout));
        }
        Ok(())
    }

    fn truncate(&self, part: WritePart<'_>, wts: Timestamp) -> Result<(), Error> {
        self.note(ParticipantStep::Truncate, addrs(part));
        self.inner.truncate(part, wts)
    }

    fn abort(&self, locks: Option<LocalLocks>, part: WritePart<'_>) -> Result<(), Error> {
        self.note(ParticipantStep::Abort, addrs(part));
        let lost = self.lost.borrow_mut().take();
        self.inner.abort(locks.or(lost), part)
    }
}

/// Two owners: the first owns one region, the second every other.
struct Split<'a> {
    owners: [Owned<'a>; 2],
}

impl<'a> Participants for Split<'a> {
    type Participant = Owned<'a>;

    fn route(&self, addr: Addr) -> Owner {
        Owner(u16::from(addr.region() != self.owners[0].region))
    }

    fn get(&self, owner: Owner) -> &Owned<'a> {
        &self.owners[owner.0 as usize]
    }
}

/// A database whose regions hold one slab each, with two objects in each of two regions:
/// `w0`, `r0` (u64) and `w1`, `r1` ([u64; 8]).
struct Fixture {
    db: Ordo<LogicalClock>,
    w0: Addr,
    r0: Addr,
    w1: Addr,
    r1: Addr,
}

const BEFORE: (u64, [u64; 8]) = (1, [3; 8]);
const AFTER: (u64, [u64; 8]) = (10, [30; 8]);

fn fixture(versions: Versions) -> Fixture {
    let config = Config {
        heap: HeapConfig { region_bytes: 1 << 20, regions_max: 64, ..Default::default() },
        versions,
        gc_interval_us: 0,
        ..Config::default()
    };
    let db = Ordo::with_clock(config, LogicalClock::new()).unwrap();
    // One slab per region and one size class per slab: the two sizes land in two regions.
    let (w0, r0) = db.run(|tx| Ok::<_, Error>((tx.alloc(&BEFORE.0)?, tx.alloc(&2u64)?))).unwrap();
    let (w1, r1) =
        db.run(|tx| Ok::<_, Error>((tx.alloc(&BEFORE.1)?, tx.alloc(&[4u64; 8])?))).unwrap();
    assert_eq!(w0.region(), r0.region());
    assert_eq!(w1.region(), r1.region());
    assert_ne!(w0.region(), w1.region());
    Fixture { db, w0, r0, w1, r1 }
}

impl Fixture {
    /// Reads all four objects and writes `AFTER` to `w0` and `w1` through the coordinator over
    /// the two-owner set whose owners misbehave as `faults` say. Returns the outcome and the
    /// messages the owners got during commit.
    fn commit(&self, faults: [Fault; 2]) -> (Result<CommitInfo, Error>, Vec<Call>) {
        let shared = self.db.shared();
        let scratch = LocalScratch::default();
        let journal = RefCell::new(Vec::new());
        let owned = |owner: u16, region: u16| Owned {
            inner: LocalParticipant::new(&shared.heap, &shared.versions, &scratch),
            owner: Owner(owner),
            region,
            fault: faults[owner as usize],
            journal: &journal,
            lost: RefCell::new(None),
        };
        let set = Split { owners: [owned(0, self.w0.region()), owned(1, self.w1.region())] };
        let rts = shared.clock.now().hi();
        let at = ReadAt { rts, check_lock: true, old_versions: true };
        let mut reads = ReadSet::default();
        let mut out = Vec::new();
        for addr in [self.w1, self.r0, self.w0, self.r1] {
            reads.push(set.owner_of(addr).read(addr, at, &mut out).unwrap());
        }
        journal.borrow_mut().clear();
        let mut writes = WriteSet::default();
        // Owner 1's write first: the coordinator must group by owner.
        let expect = Expect::NotAfter(rts);
        writes.push(self.w1, WriteKind::Update, bytemuck::bytes_of(&AFTER.1), expect);
        writes.push(self.w0, WriteKind::Update, bytemuck::bytes_of(&AFTER.0), expect);
        let outcome = commit(&shared.clock, &set, rts, &Options::default(), &reads, &mut writes);
        assert!(writes.is_empty(), "the coordinator forgets the writes either way");
        drop(set);
        (outcome, journal.into_inner())
    }

    /// No object is locked.
    fn assert_unlocked(&self, case: &str) {
        for addr in [self.w0, self.r0, self.w1, self.r1] {
            let header = self.db.shared().heap.object(addr).unwrap().header();
            assert!(!header.is_locked(), "{case}: {addr} is still locked");
        }
    }

    /// The values of `w0` and `w1`.
    fn values(&self) -> (u64, [u64; 8]) {
        self.db
            .run(|tx| Ok::<_, Error>((tx.read::<u64>(self.w0)?, tx.read::<[u64; 8]>(self.w1)?)))
            .unwrap()
    }
}

fn steps_of(journal: &[Call], step: ParticipantStep) -> Vec<Owner> {
    journal.iter().filter(|c| c.step == step).map(|c| c.owner).collect()
}

fn both() -> Vec<Owner> {
    vec![Owner(0), Owner(1)]
}

/// (a) Each owner gets its own part of every message (the wrapper panics on an address of the
/// other's region), and the writes land at both. Fails if the coordinator sends the whole write
/// set to one participant, or skips an owner.
#[test]
fn a_commit_spanning_two_owners_installs_at_both() {
    for versions in [Versions::Single, Versions::Multi] {
        let fx = fixture(versions);
        let (outcome, journal) = fx.commit([Fault::None; 2]);
        let info = outcome.unwrap();
        assert!(info.wts.is_some());
        for step in [
            ParticipantStep::Lock,
            ParticipantStep::Validate,
            ParticipantStep::CommitBackup,
            ParticipantStep::CommitPrimary,
            ParticipantStep::Truncate,
        ] {
            assert_eq!(steps_of(&journal, step), both(), "{versions:?} {step}: {journal:?}");
        }
        assert!(steps_of(&journal, ParticipantStep::Abort).is_empty(), "{journal:?}");
        fx.assert_unlocked("after commit");
        assert_eq!(fx.values(), AFTER, "{versions:?}");
    }
}

/// (b) A failure at LOCK, VALIDATE or COMMIT-BACKUP of either owner aborts at both: no lock
/// stays held anywhere (the other owner's, and a lost LOCK's at the failing owner) and nothing
/// is installed. Fails if the coordinator releases only the failing owner's locks, only the
/// locks of owners with a token, or installs anything.
#[test]
fn a_failure_before_the_commit_point_releases_every_lock_and_installs_nothing() {
    let fx = fixture(Versions::Single);
    for owner in [0u16, 1] {
        for fault in [
            Fault::Before(ParticipantStep::Lock),
            Fault::LockAfterLocking,
            Fault::Before(ParticipantStep::Validate),
            Fault::Before(ParticipantStep::CommitBackup),
        ] {
            let case = format!("owner {owner} {fault:?}");
            let mut faults = [Fault::None; 2];
            faults[owner as usize] = fault;
            let (outcome, journal) = fx.commit(faults);
            let step = match outcome {
                Err(Error::Participant { owner: o, region, step, .. }) => {
                    assert_eq!(o, owner, "{case}");
                    assert_eq!(region, [fx.w0, fx.w1][owner as usize].region(), "{case}");
                    step
                }
                other => panic!("{case}: {other:?}"),
            };
            assert!(!step.is_after_commit_point(), "{case}");
            assert_eq!(steps_of(&journal, ParticipantStep::Abort), both(), "{case}: {journal:?}");
            assert!(steps_of(&journal, ParticipantStep::CommitPrimary).is_empty(), "{case}");
            fx.assert_unlocked(&case);
            assert_eq!(fx.values(), BEFORE, "{case}");
        }
    }
    // The control: the same fixture still commits.
    assert!(fx.commit([Fault::None; 2]).0.is_ok());
    assert_eq!(fx.values(), AFTER);
}

/// (c) No owner installs before every COMMIT-BACKUP was acknowledged: a failure at the second
/// owner's COMMIT-BACKUP must find no COMMIT-PRIMARY sent to the first. Fails if the
/// coordinator sends COMMIT-PRIMARY to an owner as soon as its own backups acknowledged.
#[test]
fn a_failed_commit_backup_prevents_every_commit_primary() {
    let fx = fixture(Versions::Single);
    for owner in [1u16, 0] {
        let mut faults = [Fault::None; 2];
        faults[owner as usize] = Fault::Before(ParticipantStep::CommitBackup);
        let (outcome, journal) = fx.commit(faults);
        assert!(
            matches!(outcome, Err(Error::Participant { step: ParticipantStep::CommitBackup, .. })),
            "{outcome:?}"
        );
        assert!(
            steps_of(&journal, ParticipantStep::CommitPrimary).is_empty(),
            "owner {owner}'s COMMIT-BACKUP failed, yet an owner installed: {journal:?}"
        );
        assert_eq!(fx.values(), BEFORE, "owner {owner}");
        fx.assert_unlocked("after a failed COMMIT-BACKUP");
    }
}

/// After the commit point a failure is returned, but the transaction is committed: the other
/// owner still installs and unlocks. Fails if the coordinator stops at the first failing
/// COMMIT-PRIMARY (the other owner's objects stay locked, unwritten).
#[test]
fn a_failure_after_the_commit_point_is_returned_and_the_other_owner_installs() {
    for owner in [0u16, 1] {
        let fx = fixture(Versions::Single);
        let mut faults = [Fault::None; 2];
        faults[owner as usize] = Fault::PrimaryAfterInstall;
        let (outcome, journal) = fx.commit(faults);
        match outcome {
            Err(Error::Participant {
                owner: o, step, cause: ParticipantFailure::Timeout, ..
            }) => {
                assert_eq!(o, owner);
                assert!(step.is_after_commit_point());
            }
            other => panic!("owner {owner}: {other:?}"),
        }
        assert_eq!(steps_of(&journal, ParticipantStep::CommitPrimary), both(), "{journal:?}");
        assert_eq!(steps_of(&journal, ParticipantStep::Truncate), both(), "{journal:?}");
        fx.assert_unlocked("after a failed COMMIT-PRIMARY");
        assert_eq!(fx.values(), AFTER, "owner {owner}");
    }
}

/// Reads of old versions and their revalidation are the owner's: in multi-version mode a read
/// below the head walks the chain, and `still_newest` recognises the old version as the newest
/// at its `rts` until a version at or below that `rts` appears. Fails if the participant reads
/// only heads, or revalidates against the head only.
#[test]
fn old_versions_and_revalidation_go_through_the_owner() {
    let fx = fixture(Versions::Multi);
    let shared = fx.db.shared();
    let scratch = LocalScratch::default();
    let local = LocalParticipant::new(&shared.heap, &shared.versions, &scratch);
    let rts = shared.clock.now().hi();
    let mut out = Vec::new();
    fx.db.run(|tx| tx.write(fx.w0, &AFTER.0)).unwrap();

    let at = ReadAt { rts, check_lock: true, old_versions: true };
    let old = local.read(fx.w0, at, &mut out).unwrap();
    assert!(old.header.ts() <= rts);
    assert_eq!(out, vec![BEFORE.0]);
    assert!(local.still_newest(&old, rts, &mut out).unwrap(), "the old version is newest at rts");
    let later = shared.clock.now().hi();
    assert!(!local.still_newest(&old, later, &mut out).unwrap(), "a newer version is at or below");

    let head_only = ReadAt { old_versions: false, ..at };
    assert!(matches!(
        local.read(fx.w0, head_only, &mut out),
        Err(Error::Aborted(Abort::TooNew { .. }))
    ));
}
