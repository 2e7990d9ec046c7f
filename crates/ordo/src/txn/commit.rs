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
//! 2. **Lock** every written object (sorted by address), requiring the head to be the version the
//!    transaction read, or — for a blind write — not newer than `rts`; allocations require a free
//!    slot. Any failure releases all locks and aborts.
//! 3. **`wts = get_ts()` while holding the locks.** The wait puts `wts` in the past before any lock
//!    is released, so every lock is held at global time `wts` (Lemma 1.2): a reader with
//!    `rts' >= wts` sees the lock or the new version, never the old one.
//! 4. **Validate** (serializable modes only): every object read but not written is unlocked and
//!    still at the version read. Because validation starts after `wts` is in the past, any writer
//!    with `wts' <= wts` that conflicts is seen (Lemma 3, the write invariant).
//! 5. **Log** (`commit_backup`: durability or replication), then **install** the new versions at
//!    `wts` and unlock (`commit_primary`).
//!
//! Snapshot isolation skips step 4. FaRMv2 §7.3 lists what breaks if steps are reordered or
//! dropped — no wait in step 3, validation overlapping the wait, the wait before step 2 — and
//! `Shortcuts` (feature `shortcuts`) can do exactly that so the negative tests can show the
//! checker catching each one; `log_after_install` swaps the two halves of step 5, which
//! `tests/durable/durable_order.rs` shows losing a value a reader saw.
//!
//! # Lemmas kept
//! * **Read invariant**: a version read at `v <= rts` has no successor in `(v, rts]`.
//! * **Write invariant**: no object a committed transaction read or wrote has a version in
//!   `(rts, wts]` (an empty range when an optimistic `rts` is above `wts`).

use ordo_clock::{Clock, Timestamp};

use super::options::Options;
use super::participant::Participant;
use super::set::{ReadSet, WriteKind, WriteSet};
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

/// Runs steps 1–5. On `Err` every lock and reservation has been released.
pub(crate) fn commit<C: Clock, P: Participant>(
    clock: &C,
    participant: &P,
    rts: Timestamp,
    options: &Options,
    reads: &ReadSet,
    writes: &mut WriteSet,
) -> Result<CommitInfo, Error> {
    if writes.is_empty() {
        return Ok(CommitInfo { rts, wts: None, write_wait_ns: 0 });
    }
    set_expectations(rts, reads, writes);
    writes.sort();

    #[cfg(feature = "shortcuts")]
    let shortcuts = options.shortcuts;
    #[cfg(not(feature = "shortcuts"))]
    let shortcuts = Shortcuts::default();

    // Unsafe variant: the wait happens before the locks exist, so they are not held at wts.
    let early_wts = if shortcuts.wait_before_lock { Some(clock.get_ts()) } else { None };

    shortcuts.step(Step::BeforeLock);
    if let Err(abort) = participant.lock(writes) {
        participant.abort(writes);
        return Err(abort.into());
    }
    shortcuts.step(Step::Locked);

    let validates = options.isolation.validates_reads() && !shortcuts.skip_validation;
    // Unsafe variant: validation overlapping the wait may miss a writer with wts' <= wts.
    if validates && shortcuts.validate_before_wait {
        if let Err(abort) = participant.validate(reads.entries(), writes) {
            participant.abort(writes);
            return Err(abort.into());
        }
    }

    let wait_start = clock.now().lo();
    // Durable logs: the marker must not pass a timestamp this commit may still log.
    participant.begin_backup(wait_start);
    let wts = match early_wts {
        Some(ts) => ts,
        // Unsafe variant: wts is still in the future when the locks are released.
        None if shortcuts.skip_write_wait => clock.now().hi(),
        None => clock.get_ts(),
    };
    let write_wait_ns = clock.now().lo().nanos_since(wait_start);
    shortcuts.step(Step::WriteTimestamp);
    // Strict serializable attempts read at an optimistic `rts` that may be ahead of `wts`; their
    // reads are validated at `wts` below (module docs of `txn`).
    debug_assert!(
        wts >= rts || options.isolation == super::Isolation::StrictSerializable,
        "write timestamp {wts:?} before read timestamp {rts:?}"
    );

    if validates && !shortcuts.validate_before_wait {
        if let Err(abort) = participant.validate(reads.entries(), writes) {
            participant.abort(writes);
            return Err(abort.into());
        }
    }

    shortcuts.step(Step::Validated);

    // Step 5: the redo record first, then install and unlock. The unsafe variant swaps them,
    // so readers may see values not yet in the log (its logging error is returned as is: the
    // writes are already installed and cannot be aborted).
    if !shortcuts.log_after_install {
        if let Err(e) = participant.commit_backup(writes, wts) {
            participant.abort(writes);
            return Err(e);
        }
    }
    participant.commit_primary(writes, wts);
    shortcuts.step(Step::Installed);
    if shortcuts.log_after_install {
        participant.commit_backup(writes, wts)?;
    }
    writes.clear();
    Ok(CommitInfo { rts, wts: Some(wts), write_wait_ns })
}

/// Step 2's requirement per written object: the version read, else not newer than `rts`.
fn set_expectations(rts: Timestamp, reads: &ReadSet, writes: &mut WriteSet) {
    let lookup = reads.lookup();
    for e in writes.entries_mut() {
        e.expect = match e.kind {
            WriteKind::Alloc => Expect::Free,
            WriteKind::Update | WriteKind::Free => match lookup.get(e.addr) {
                Some(h) => Expect::Version(h.ts()),
                None => Expect::NotAfter(rts),
            },
        };
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
