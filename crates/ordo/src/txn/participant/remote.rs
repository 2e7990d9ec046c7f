//! The network half of the participant seam: [`Remote`], what a cluster node or client gives
//! its database so that commits reach owners in other processes.
//!
//! The trait is defined here, beside the participants that call it ([`super::cluster`]), and
//! re-exported as `ordo::remote::Remote` with the rest of the cluster's vocabulary: the
//! serving side in `crate::remote` sits above the transaction layer and the database handle,
//! so the transaction layer must not name it.

use ordo_clock::Timestamp;

use super::ReadAt;
use crate::addr::Addr;
use crate::error::Error;
use crate::txn::set::{ReadEntry, WritePart};

/// The network half of the participant seam, implemented by a cluster node or client. Methods
/// are called on application threads and block until the owner answers (or fails: a typed
/// [`Error::Participant`]). `tx` numbers a commit attempt uniquely within this process; an
/// implementation makes it unique in the cluster (for example with its node id).
pub trait Remote: Send + Sync + 'static {
    /// Whether this process holds the primary copy of `region`.
    fn is_local_primary(&self, region: u16) -> bool;

    /// Reads the newest version of `addr` at or below `at.rts` at its primary.
    fn read(&self, addr: Addr, at: ReadAt, out: &mut Vec<u64>) -> Result<ReadEntry, Error>;

    /// Whether `read` is still the newest version at or below `rts` (see
    /// [`Participant::still_newest`](super::Participant::still_newest)).
    fn still_newest(&self, read: &ReadEntry, rts: Timestamp) -> Result<bool, Error>;

    /// Reserves a slot for an object of `len_bytes` at a remote primary — in `near`'s region
    /// when given (co-location), else where the implementation places it. Returns the address
    /// and the version the slot holds (a free at a time the caller must check).
    fn reserve(&self, near: Option<Addr>, len_bytes: usize) -> Result<(Addr, Timestamp), Error>;

    /// Gives back a slot [`Remote::reserve`] reserved, before the transaction committed.
    fn release(&self, addr: Addr) -> Result<(), Error>;

    /// Whether `addr` is a slot [`Remote::reserve`] reserved at another process and no LOCK,
    /// release or ABORT has consumed yet; forgets it. A failover can promote this process to
    /// the primary of that slot's region meanwhile: the slot is then not a reservation of this
    /// heap (its free-slot state was rebuilt from the headers), and an abort must not give it
    /// back here — it could be another attempt's by now (found by the data-path simulation).
    fn take_remote_reservation(&self, _addr: Addr) -> bool {
        false
    }

    /// Whether `addr` is a slot reserved at another process and not consumed yet, without
    /// forgetting it: this process, promoted to its region's primary since, must not LOCK it as
    /// an allocation of its own heap.
    fn is_reserved_elsewhere(&self, _addr: Addr) -> bool {
        false
    }

    /// LOCK of a remote primary's `part` (one region).
    fn lock(&self, tx: u64, part: WritePart<'_>) -> Result<(), Error>;

    /// VALIDATE of reads owned by one remote primary.
    fn validate(&self, reads: &[ReadEntry]) -> Result<(), Error>;

    /// Attempt `tx` writes `regions` (ascending): called once before its COMMIT-BACKUPs, on the
    /// thread that makes them, so that each record can carry the list (cluster recovery).
    fn writing(&self, _tx: u64, _regions: &[u16]) {}

    /// COMMIT-BACKUP: sends `part` (one region) to every backup of its region and waits for
    /// their acknowledgements. Called for local and remote primaries alike.
    fn commit_backup(&self, tx: u64, part: WritePart<'_>, wts: Timestamp) -> Result<(), Error>;

    /// The transaction aborted after `part`'s COMMIT-BACKUP was acknowledged: its region's
    /// backups drop the part (best effort, see
    /// [`Participant::forget_backup`](super::Participant::forget_backup)).
    fn forget_backup(&self, tx: u64, part: WritePart<'_>);

    /// COMMIT-PRIMARY at a remote primary: installs the part LOCK locked.
    fn commit_primary(&self, tx: u64, region: u16, wts: Timestamp) -> Result<(), Error>;

    /// TRUNCATE: the backups of `region` may apply the transaction's part. May be deferred and
    /// piggybacked on later messages.
    fn truncate(&self, tx: u64, region: u16, wts: Timestamp) -> Result<(), Error>;

    /// ABORT at a remote primary: releases what LOCK took (if it got there) and the slots
    /// reserved for `part`'s allocations.
    fn abort(&self, tx: u64, part: WritePart<'_>) -> Result<(), Error>;
}
