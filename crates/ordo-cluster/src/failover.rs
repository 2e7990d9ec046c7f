//! Failover (FaRMv2 §4.3 and Fig. 6, DESIGN §6): what the next configuration is when members
//! are suspected, and what the reconfiguration round must do with the clocks.
//!
//! # The protocol this module plans
//! A lease expiry ([`crate::lease`]) makes a member suspect a peer. The CM acts on a suspected
//! non-CM; a non-CM acts on a suspected CM and, if it wins, becomes the CM (the clock master).
//! The initiator:
//!
//! 1. computes the next configuration with [`plan`] and installs it in etcd by compare-and-swap
//!    on the sequence number — of several non-CMs racing after the CM died, exactly one wins;
//!    the others adopt what it installed;
//! 2. if the CM changes, disables its own clock and raises FF to its upper bound
//!    ([`ordo_clock::SyncedClock::disable_for_reconfiguration`]);
//! 3. sends NEW-CONFIG to every member of the next configuration; each disables its clock
//!    when the CM changes and answers NEW-CONFIG-ACK with its FF;
//! 4. waits one lease period when [`Plan::lease_wait`] says so: members removed besides the old
//!    CM may still hand out timestamps until their leases run out;
//! 5. raises FF to the maximum of every ack and its own upper bound, sends CONFIG-COMMIT and
//!    ADVANCE (FF) and waits for every ADVANCE-ACK;
//! 6. enables its clock as master at `[FF, FF]`
//!    ([`ordo_clock::SyncedClock::enable_master_at`]); the others are enabled by their first
//!    sync with it, so every timestamp after the failover is above every one before it.
//!
//! # Rules of [`plan`] (FaRM's, checked here and tested)
//! * Only the CM removes non-CMs; a non-CM may initiate only when the CM is among the removed,
//!   and then becomes the CM.
//! * The survivors are a strict majority of the current members (a minority partition never
//!   reconfigures, so two configurations cannot both move on).
//! * Every region keeps at least one replica: a surviving primary stays primary, else its first
//!   surviving backup is promoted; a region whose every replica is removed is
//!   [`FailoverError::RegionLost`] and the change is refused (the cluster blocks, as FaRM does,
//!   rather than silently losing data).
//! * Backups that were removed are dropped from their regions; the regions left with fewer
//!   backups than before are listed in [`Plan::degraded`] (re-replication restores them).
//! * The sequence number grows by exactly one; the result passes [`ClusterConfig::validate`].

use std::collections::BTreeSet;

use crate::config::{ClusterConfig, ConfigError, NodeId, RegionPlacement};

/// Why no next configuration can be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FailoverError {
    /// Nothing to remove.
    #[error("configuration {seq}: no member to remove")]
    NothingRemoved {
        /// The current configuration's sequence number.
        seq: u64,
    },
    /// A node to remove is not a member.
    #[error("configuration {seq}: node {node} is not a member and cannot be removed")]
    NotAMember {
        /// The current configuration's sequence number.
        seq: u64,
        /// The node.
        node: NodeId,
    },
    /// The initiator is not a surviving member.
    #[error("configuration {seq}: node {initiator} cannot initiate a change it does not survive")]
    InitiatorNotSurviving {
        /// The current configuration's sequence number.
        seq: u64,
        /// The initiator.
        initiator: NodeId,
    },
    /// A non-CM tried to remove members while the CM survives.
    #[error("configuration {seq}: only the CM ({cm}) removes members while it is alive, not {initiator}")]
    NotCm {
        /// The current configuration's sequence number.
        seq: u64,
        /// The CM.
        cm: NodeId,
        /// The initiator.
        initiator: NodeId,
    },
    /// The survivors are not a strict majority of the current members.
    #[error("configuration {seq}: {survivors} of {members} members survive, not a majority")]
    NoMajority {
        /// The current configuration's sequence number.
        seq: u64,
        /// Surviving members.
        survivors: usize,
        /// Current members.
        members: usize,
    },
    /// Every replica of a region would be removed.
    #[error("configuration {seq}: region {region} loses every replica ({replicas:?})")]
    RegionLost {
        /// The current configuration's sequence number.
        seq: u64,
        /// The region.
        region: u32,
        /// Its replicas, primary first.
        replicas: Vec<NodeId>,
    },
    /// The result broke an invariant of the configuration (a bug; reported, never used).
    #[error("the planned configuration is invalid: {0}")]
    Invalid(String),
}

/// A planned reconfiguration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The next configuration (sequence number one higher).
    pub next: ClusterConfig,
    /// The CM changes: clocks are disabled and fast-forwarded (FaRMv2 Fig. 6).
    pub cm_changed: bool,
    /// The new CM waits one lease period after the acks: members other than the old CM were
    /// removed and may still hand out timestamps until their leases expire. (When only the old
    /// CM is removed its lease has already expired — that is why it was suspected.)
    pub lease_wait: bool,
    /// Regions whose primary was removed, with the backup promoted to primary.
    pub promoted: Vec<(u32, NodeId)>,
    /// Regions left with fewer backups than before, for re-replication.
    pub degraded: Vec<u32>,
}

/// The next configuration after removing `removed`, initiated by `initiator` (module docs).
///
/// # Errors
/// [`FailoverError`] naming the rule the change would break.
pub fn plan(
    current: &ClusterConfig,
    removed: &BTreeSet<NodeId>,
    initiator: NodeId,
) -> Result<Plan, FailoverError> {
    let seq = current.seq;
    if removed.is_empty() {
        return Err(FailoverError::NothingRemoved { seq });
    }
    if let Some(&node) = removed.iter().find(|&&n| current.member(n).is_none()) {
        return Err(FailoverError::NotAMember { seq, node });
    }
    if current.member(initiator).is_none() || removed.contains(&initiator) {
        return Err(FailoverError::InitiatorNotSurviving { seq, initiator });
    }
    let cm_removed = removed.contains(&current.cm);
    if !cm_removed && initiator != current.cm {
        return Err(FailoverError::NotCm { seq, cm: current.cm, initiator });
    }
    let members: Vec<_> =
        current.members.iter().filter(|m| !removed.contains(&m.id)).cloned().collect();
    if members.len() * 2 <= current.members.len() {
        return Err(FailoverError::NoMajority {
            seq,
            survivors: members.len(),
            members: current.members.len(),
        });
    }
    let mut promoted = Vec::new();
    let mut degraded = Vec::new();
    let mut regions = Vec::with_capacity(current.regions.len());
    for r in &current.regions {
        let mut replicas = std::iter::once(r.primary)
            .chain(r.backups.iter().copied())
            .filter(|n| !removed.contains(n));
        let Some(primary) = replicas.next() else {
            let replicas = std::iter::once(r.primary).chain(r.backups.iter().copied()).collect();
            return Err(FailoverError::RegionLost { seq, region: r.region, replicas });
        };
        let backups: Vec<NodeId> = replicas.collect();
        if primary != r.primary {
            promoted.push((r.region, primary));
        }
        if backups.len() < r.backups.len() {
            degraded.push(r.region);
        }
        regions.push(RegionPlacement { region: r.region, primary, backups });
    }
    let cm = if cm_removed { initiator } else { current.cm };
    let next = ClusterConfig { seq: seq + 1, members, cm, regions };
    next.validate().map_err(|e: ConfigError| FailoverError::Invalid(e.to_string()))?;
    let lease_wait = cm_removed && removed.len() > 1;
    Ok(Plan { next, cm_changed: cm_removed, lease_wait, promoted, degraded })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Member;

    fn cluster(n: u64, backups: usize) -> ClusterConfig {
        let members =
            (1..=n).map(|id| Member { id, addr: format!("127.0.0.1:{}", 7000 + id) }).collect();
        ClusterConfig::initial(members, backups)
    }

    fn set(ids: &[NodeId]) -> BTreeSet<NodeId> {
        ids.iter().copied().collect()
    }

    #[test]
    fn removing_a_non_cm_promotes_its_backups_and_keeps_the_clock() {
        let current = cluster(3, 1);
        let plan = plan(&current, &set(&[2]), 1).unwrap();
        assert_eq!(plan.next.seq, current.seq + 1);
        assert_eq!(plan.next.cm, 1);
        assert!(!plan.cm_changed && !plan.lease_wait);
        assert_eq!(plan.next.members.iter().map(|m| m.id).collect::<Vec<_>>(), vec![1, 3]);
        // Region 2 (primary 2, backup 3) is promoted to 3; region 1 lost its backup 2.
        assert_eq!(plan.promoted, vec![(2, 3)]);
        assert_eq!(plan.degraded, vec![1, 2]);
        let r2 = plan.next.regions.iter().find(|r| r.region == 2).unwrap();
        assert_eq!((r2.primary, r2.backups.clone()), (3, vec![]));
    }

    #[test]
    fn a_non_cm_that_removes_the_cm_becomes_cm_without_a_lease_wait() {
        let current = cluster(3, 1);
        let plan = plan(&current, &set(&[1]), 3).unwrap();
        assert_eq!(plan.next.cm, 3);
        assert!(plan.cm_changed, "clocks are fast-forwarded");
        assert!(!plan.lease_wait, "only the old CM was removed: its lease has expired already");
        assert_eq!(plan.promoted, vec![(1, 2)]);
    }

    #[test]
    fn removing_the_cm_and_another_waits_out_the_lease() {
        let current = cluster(5, 2);
        let plan = plan(&current, &set(&[1, 2]), 4).unwrap();
        assert!(plan.cm_changed && plan.lease_wait);
        assert_eq!(plan.next.cm, 4);
        // Region 1 (1; 2, 3) goes to 3; region 2 (2; 3, 4) to 3 with backup 4.
        assert_eq!(plan.promoted, vec![(1, 3), (2, 3)]);
        let r2 = plan.next.regions.iter().find(|r| r.region == 2).unwrap();
        assert_eq!((r2.primary, r2.backups.clone()), (3, vec![4]));
    }

    #[test]
    fn refusals_name_the_rule() {
        let current = cluster(3, 1);
        assert_eq!(
            plan(&current, &set(&[]), 1),
            Err(FailoverError::NothingRemoved { seq: 1 })
        );
        assert_eq!(
            plan(&current, &set(&[9]), 1),
            Err(FailoverError::NotAMember { seq: 1, node: 9 })
        );
        assert_eq!(
            plan(&current, &set(&[2]), 2),
            Err(FailoverError::InitiatorNotSurviving { seq: 1, initiator: 2 })
        );
        assert_eq!(
            plan(&current, &set(&[3]), 2),
            Err(FailoverError::NotCm { seq: 1, cm: 1, initiator: 2 })
        );
        // Two of three gone: no majority (and with f = 1 a region would be lost too).
        assert_eq!(
            plan(&current, &set(&[2, 3]), 1),
            Err(FailoverError::NoMajority { seq: 1, survivors: 1, members: 3 })
        );
        // Five members, f = 1: removing 2 and 3 leaves a majority but region 2 (2; 3) is lost.
        let five = cluster(5, 1);
        assert_eq!(
            plan(&five, &set(&[2, 3]), 1),
            Err(FailoverError::RegionLost { seq: 1, region: 2, replicas: vec![2, 3] })
        );
    }

    #[test]
    fn every_plan_keeps_the_configuration_valid_and_every_region_placed() {
        // Every single and double removal from five members with f = 2, by every survivor.
        let current = cluster(5, 2);
        for a in 1..=5u64 {
            for b in a..=5u64 {
                let removed = set(&[a, b]);
                for initiator in (1..=5u64).filter(|i| !removed.contains(i)) {
                    match plan(&current, &removed, initiator) {
                        Ok(p) => {
                            p.next.validate().unwrap();
                            assert_eq!(p.next.regions.len(), current.regions.len());
                            for r in &p.next.regions {
                                assert!(!removed.contains(&r.primary));
                                assert!(r.backups.iter().all(|n| !removed.contains(n)));
                            }
                            assert_eq!(p.cm_changed, removed.contains(&1));
                        }
                        Err(FailoverError::NotCm { .. }) => {
                            assert!(!removed.contains(&1) && initiator != 1);
                        }
                        Err(e) => panic!("{removed:?} by {initiator}: {e}"),
                    }
                }
            }
        }
    }
}
