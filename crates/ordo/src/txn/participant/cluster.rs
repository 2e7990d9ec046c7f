//! The participant set of a database in a cluster: per region, the local participant (this
//! process holds the primary) or the [`Remote`] (another process does), with replication to the
//! region's backups through the `Remote` either way (FaRMv2 Fig. 3).
//!
//! Owners are regions: each region is one replica group, so the coordinator's grouping by owner
//! sends one LOCK, one COMMIT-BACKUP (to every backup of the region) and one COMMIT-PRIMARY per
//! region written. When every primary a transaction writes is local, only COMMIT-BACKUP and
//! TRUNCATE leave the process.

use ordo_clock::Timestamp;

use super::{LocalLocks, LocalParticipant, Owner, Participant, Participants, ReadAt, Remote};
use crate::addr::Addr;
use crate::error::Error;
use crate::object::UsedBytes;
use crate::txn::set::{ReadEntry, WriteKind, WritePart, WriteSet};
use crate::txn::view::View;

/// One owner of a cluster set: the local primary of a region, or a remote one.
pub enum ClusterParticipant<'a> {
    /// This process holds the primary; replication goes through `remote`.
    Local {
        /// The heap's participant.
        local: LocalParticipant<'a>,
        /// The network half, for the backups.
        remote: &'a dyn Remote,
        /// The commit attempt's number.
        tx: u64,
    },
    /// Another process holds the primary.
    Remote {
        /// The network half.
        remote: &'a dyn Remote,
        /// The commit attempt's number.
        tx: u64,
        /// The heap's participant, for a lock token it issued (see [`ClusterLocks`]).
        local: LocalParticipant<'a>,
    },
}

/// The lock token of a [`ClusterParticipant`]: the local token, or a remote owner's (which keeps
/// its token itself, keyed by the attempt).
///
/// Whether a region's primary is local is read from the placement at every step, and a failover
/// can change it between an attempt's LOCK and its COMMIT-PRIMARY or ABORT (a backup promoted
/// here meanwhile). The token, not the placement at that later step, says who holds the locks:
/// COMMIT-PRIMARY and ABORT follow it (found by the data-path simulation, `ordo_cluster::sim::data`,
/// as an `unreachable!` reached).
#[derive(Debug)]
#[must_use = "locks are released only by commit_primary or abort"]
pub enum ClusterLocks {
    /// A local primary's token.
    Local(LocalLocks),
    /// A remote primary holds the locks.
    Remote,
}

fn region_of(part: WritePart<'_>) -> u16 {
    part.entries().first().map_or(0, |e| e.addr.region())
}

impl Participant for ClusterParticipant<'_> {
    type Locks = ClusterLocks;

    #[inline]
    fn read(&self, addr: Addr, at: ReadAt, out: &mut Vec<u64>) -> Result<ReadEntry, Error> {
        match self {
            Self::Local { local, .. } => local.read(addr, at, out),
            Self::Remote { remote, .. } => remote.read(addr, at, out),
        }
    }

    #[inline]
    fn read_used(
        &self,
        addr: Addr,
        at: ReadAt,
        out: &mut Vec<u64>,
        used: UsedBytes,
    ) -> Result<ReadEntry, Error> {
        match self {
            Self::Local { local, .. } => local.read_used(addr, at, out, used),
            Self::Remote { remote, .. } => remote.read(addr, at, out),
        }
    }

    #[inline]
    fn read_view<R>(
        &self,
        addr: Addr,
        at: ReadAt,
        out: &mut Vec<u64>,
        f: impl FnMut(View<'_>) -> R,
    ) -> Result<(ReadEntry, R), Error> {
        match self {
            Self::Local { local, .. } => local.read_view(addr, at, out, f),
            Self::Remote { remote, .. } => super::view_copy(remote.read(addr, at, out)?, out, f),
        }
    }

    fn still_newest(
        &self,
        read: &ReadEntry,
        rts: Timestamp,
        scratch: &mut Vec<u64>,
    ) -> Result<bool, Error> {
        match self {
            Self::Local { local, .. } => local.still_newest(read, rts, scratch),
            Self::Remote { remote, .. } => remote.still_newest(read, rts),
        }
    }

    fn lock(&self, part: WritePart<'_>) -> Result<ClusterLocks, Error> {
        match self {
            Self::Local { local, remote, .. } => {
                // A slot reserved at the region's old primary is not free in this heap's
                // accounting: allocating it here would hand it out twice.
                let elsewhere = part
                    .entries()
                    .iter()
                    .find(|e| e.kind == WriteKind::Alloc && remote.is_reserved_elsewhere(e.addr));
                if let Some(e) = elsewhere {
                    return Err(Error::Aborted(crate::error::Abort::WriteConflict {
                        addr: e.addr,
                    }));
                }
                local.lock(part).map(ClusterLocks::Local)
            }
            Self::Remote { remote, tx, .. } => {
                remote.lock(*tx, part).map(|()| ClusterLocks::Remote)
            }
        }
    }

    fn validate(&self, reads: &[ReadEntry], writes: &WriteSet) -> Result<(), Error> {
        match self {
            Self::Local { local, .. } => local.validate(reads, writes),
            Self::Remote { remote, .. } => {
                // The coordinator hands a set of several owners only reads it does not write;
                // filter anyway, so the remote never validates a locked object of ours.
                if reads.iter().any(|r| writes.find(r.addr).is_some()) {
                    let own: Vec<ReadEntry> =
                        reads.iter().filter(|r| writes.find(r.addr).is_none()).copied().collect();
                    return remote.validate(&own);
                }
                remote.validate(reads)
            }
        }
    }

    #[inline]
    fn logs(&self) -> bool {
        matches!(self, Self::Local { local, .. } if local.logs())
    }

    #[inline]
    fn begin_backup(&self, lower: Timestamp) {
        if let Self::Local { local, .. } = self {
            local.begin_backup(lower);
        }
    }

    fn commit_backup(&self, part: WritePart<'_>, wts: Timestamp) -> Result<(), Error> {
        match self {
            Self::Local { local, remote, tx } => {
                local.commit_backup(part, wts)?;
                remote.commit_backup(*tx, part, wts)
            }
            Self::Remote { remote, tx, .. } => remote.commit_backup(*tx, part, wts),
        }
    }

    fn forget_backup(&self, part: WritePart<'_>, wts: Timestamp) {
        match self {
            Self::Local { local, remote, tx } => {
                local.forget_backup(part, wts);
                remote.forget_backup(*tx, part);
            }
            Self::Remote { remote, tx, .. } => remote.forget_backup(*tx, part),
        }
    }

    fn commit_primary(
        &self,
        locks: ClusterLocks,
        part: WritePart<'_>,
        wts: Timestamp,
    ) -> Result<(), Error> {
        let (Self::Local { local, remote, tx } | Self::Remote { local, remote, tx }) = self;
        match locks {
            ClusterLocks::Local(locks) => local.commit_primary(locks, part, wts),
            ClusterLocks::Remote => remote.commit_primary(*tx, region_of(part), wts),
        }
    }

    fn truncate(&self, part: WritePart<'_>, wts: Timestamp) -> Result<(), Error> {
        match self {
            Self::Local { local, remote, tx } => {
                local.truncate(part, wts)?;
                remote.truncate(*tx, region_of(part), wts)
            }
            Self::Remote { remote, tx, .. } => remote.truncate(*tx, region_of(part), wts),
        }
    }

    fn abort(&self, locks: Option<ClusterLocks>, part: WritePart<'_>) -> Result<(), Error> {
        // The token, when there is one, says who holds the locks (see `ClusterLocks`).
        match (self, locks) {
            (
                Self::Local { local, .. } | Self::Remote { local, .. },
                Some(ClusterLocks::Local(l)),
            ) => local.abort(Some(l), part),
            (
                Self::Local { remote, tx, .. } | Self::Remote { remote, tx, .. },
                Some(ClusterLocks::Remote),
            ) => remote.abort(*tx, part),
            (Self::Local { local, remote, .. }, None) => {
                // A slot reserved at the region's old primary is not this heap's to give back.
                local.abort_releasing(None, part, |a| !remote.take_remote_reservation(a))
            }
            (Self::Remote { remote, tx, .. }, None) => remote.abort(*tx, part),
        }
    }
}

/// The participant set of a database with a [`Remote`]: owners are regions (see the module
/// docs).
pub struct ClusterSet<'a> {
    local: ClusterParticipant<'a>,
    remote: ClusterParticipant<'a>,
    hook: &'a dyn Remote,
}

impl<'a> ClusterSet<'a> {
    /// The set of commit attempt `tx`, whose local participant is `local`.
    #[inline]
    pub(crate) fn new(local: LocalParticipant<'a>, hook: &'a dyn Remote, tx: u64) -> Self {
        ClusterSet {
            local: ClusterParticipant::Local { local, remote: hook, tx },
            remote: ClusterParticipant::Remote { remote: hook, tx, local },
            hook,
        }
    }
}

impl<'a> Participants for ClusterSet<'a> {
    type Participant = ClusterParticipant<'a>;

    #[inline]
    fn route(&self, addr: Addr) -> Owner {
        Owner(addr.region())
    }

    #[inline]
    fn get(&self, owner: Owner) -> &ClusterParticipant<'a> {
        if self.hook.is_local_primary(owner.0) { &self.local } else { &self.remote }
    }

    fn writing(&self, owners: &[Owner]) {
        let regions: Vec<u16> = owners.iter().map(|o| o.0).collect();
        let tx = match &self.remote {
            ClusterParticipant::Remote { tx, .. } | ClusterParticipant::Local { tx, .. } => *tx,
        };
        self.hook.writing(tx, &regions);
    }
}
