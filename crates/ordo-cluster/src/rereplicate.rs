//! Re-replication (FaRM §5.4, DESIGN §6): a region that lost a backup in a failover gets a new
//! one, and its primary copies the region to it in the background, paced.
//!
//! # The protocol
//! 1. After a failover's round and recovery, the CM plans ([`plan`]): every region with fewer
//!    backups than the cluster's replication degree (the most backups any region has) gets the
//!    least-loaded members that hold no replica of it yet. The change is installed like any
//!    other: compare-and-swap in etcd, NEW-CONFIG / CONFIG-COMMIT (the CM does not change, so
//!    the clocks are not touched).
//! 2. From the moment a member adopts it, its coordinators send every COMMIT-BACKUP of the
//!    region to the new backup too.
//! 3. The primary, on adopting it, starts a copier ([`copy_region`]): it lists the region's
//!    allocated objects and sends their images to the new backup in batches
//!    ([`BATCH_OBJECTS`] objects, one batch per [`PACE`]), each read as a reader would (a
//!    locked object — a commit in flight — is read again once unlocked). The backup applies
//!    an image as it applies a TRUNCATE: never over a newer version.
//!
//! # Why no committed write is missed
//! A write reaches the new backup either by its COMMIT-BACKUP (its coordinator used the new
//! placement) or by the copy (the object was installed before the copier read it). What could
//! slip between is a transaction whose coordinator still used the old placement, locked after
//! the copier read the object, and sent its COMMIT-BACKUP to the old backups only. The primary
//! refuses such a LOCK: every LOCK carries the coordinator's configuration, and a LOCK older
//! than the last change of its region's replicas is refused (`Placement::changed_at`; the
//! coordinator retries with the new placement). A transaction that locked before the change
//! holds its lock while the copier reaches its objects: the copier waits for the install.

use std::collections::BTreeMap;
use std::time::Duration;

use ordo_clock::Timestamp;

use crate::config::{ClusterConfig, NodeId};
use crate::failover::Plan;

/// Objects per batch the copier sends.
pub const BATCH_OBJECTS: usize = 256;

/// The copier's pace: one batch per this long at most.
pub const PACE: Duration = Duration::from_micros(500);

/// How long the copier waits for a locked object before reading it again.
pub const LOCKED_RETRY: Duration = Duration::from_micros(200);

/// The next configuration restoring every degraded region's backups, if any is degraded and a
/// member can take a copy (module docs). The sequence number grows by one; the CM stays.
pub fn plan(current: &ClusterConfig) -> Option<Plan> {
    let degree = current.regions.iter().map(|r| r.backups.len()).max().unwrap_or(0);
    let mut load: BTreeMap<NodeId, usize> = current.members.iter().map(|m| (m.id, 0)).collect();
    for r in &current.regions {
        for id in std::iter::once(r.primary).chain(r.backups.iter().copied()) {
            *load.entry(id).or_default() += 1;
        }
    }
    let mut next = current.clone();
    let mut degraded = Vec::new();
    for r in &mut next.regions {
        let mut added = false;
        while r.backups.len() < degree {
            let candidate = load
                .iter()
                .filter(|(id, _)| **id != r.primary && !r.backups.contains(id))
                .min_by_key(|(id, n)| (**n, **id))
                .map(|(id, _)| *id);
            let Some(id) = candidate else { break };
            r.backups.push(id);
            *load.entry(id).or_default() += 1;
            added = true;
        }
        if added {
            degraded.push(r.region);
        }
    }
    if degraded.is_empty() {
        return None;
    }
    next.seq = current.seq + 1;
    next.validate().ok()?;
    Some(Plan { next, cm_changed: false, lease_wait: false, promoted: Vec::new(), degraded })
}

/// The backups `me` must copy its regions to after adopting `after` over `before`: per region
/// it is primary of in both, the backups `after` adds.
pub fn copies_due(me: NodeId, before: &ClusterConfig, after: &ClusterConfig) -> Vec<(u16, NodeId)> {
    let mut due = Vec::new();
    for r in after.regions.iter().filter(|r| r.primary == me) {
        let Some(old) = before.regions.iter().find(|o| o.region == r.region) else { continue };
        if old.primary != me {
            continue; // promoted here: its old backups hold it; new ones come by a later plan
        }
        let Ok(region) = u16::try_from(r.region) else { continue };
        for &b in r.backups.iter().filter(|b| !old.backups.contains(b)) {
            due.push((region, b));
        }
    }
    due
}

/// One object image as the copier sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// The object's address.
    pub addr: ordo::Addr,
    /// Its version.
    pub version: Timestamp,
    /// Its length.
    pub len_bytes: u32,
    /// Its payload words.
    pub words: Vec<u64>,
}

/// A REPLICATE batch that does not decode.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed REPLICATE batch at word {at}: {reason}")]
pub struct ImageDecodeError {
    /// Where.
    pub at: usize,
    /// What is wrong.
    pub reason: String,
}

/// Flattens images: per image its address, version, length, then its payload words.
pub fn encode_images(images: &[Image]) -> Vec<u64> {
    let mut out = Vec::new();
    for i in images {
        out.extend([i.addr.to_raw(), i.version.as_nanos(), u64::from(i.len_bytes)]);
        out.extend_from_slice(&i.words);
    }
    out
}

/// Decodes [`encode_images`]'s words, checking that every payload is whole.
pub fn decode_images(words: &[u64]) -> Result<Vec<Image>, ImageDecodeError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < words.len() {
        let (addr, version, len) = match words.get(at..at + 3) {
            Some(&[addr, version, len]) => (addr, version, len),
            _ => {
                return Err(ImageDecodeError {
                    at,
                    reason: "an image header needs 3 words".into(),
                });
            }
        };
        let len_bytes = u32::try_from(len)
            .ok()
            .filter(|&l| l > 0 && l as usize <= ordo::heap::OBJECT_BYTES_MAX)
            .ok_or_else(|| ImageDecodeError { at, reason: format!("length {len} out of range") })?;
        let n = (len_bytes as usize).div_ceil(8);
        let Some(payload) = words.get(at + 3..at + 3 + n) else {
            return Err(ImageDecodeError { at, reason: format!("payload of {n} words missing") });
        };
        out.push(Image {
            addr: ordo::Addr::from_raw(addr),
            version: Timestamp::from_nanos(version),
            len_bytes,
            words: payload.to_vec(),
        });
        at += 3 + n;
    }
    Ok(out)
}

/// What [`copy_region`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Objects sent.
    pub objects: usize,
    /// Batches sent.
    pub batches: usize,
    /// Reads that met a lock and were made again.
    pub locked_retries: usize,
}

/// Copies `region` of `db` to a new backup through `send` (one batch of images per call),
/// paced (module docs). Objects freed meanwhile are skipped (their free reaches the backup by
/// COMMIT-BACKUP). `stop` is polled between batches.
///
/// # Errors
/// The first error `send` returns; the copy stops there.
pub fn copy_region<C: ordo_clock::Clock, E>(
    db: &ordo::Ordo<C>,
    region: u16,
    mut send: impl FnMut(Vec<Image>) -> Result<(), E>,
    stop: impl Fn() -> bool,
) -> Result<CopyReport, E> {
    let mut report = CopyReport::default();
    let mut batch = Vec::with_capacity(BATCH_OBJECTS);
    let mut words = Vec::new();
    for addr in db.region_objects(region) {
        let entry = loop {
            match db.read_version(addr, Timestamp::MAX, &mut words) {
                Ok(entry) => break Some(entry),
                Err(ordo::Error::Aborted(_)) => {
                    // Locked: a commit is installing it; its new version is what to copy.
                    report.locked_retries += 1;
                    std::thread::sleep(LOCKED_RETRY);
                    if stop() {
                        return Ok(report);
                    }
                }
                Err(_) => break None, // freed or reclaimed meanwhile
            }
        };
        let Some(entry) = entry else { continue };
        if !entry.header.is_allocated() {
            continue;
        }
        batch.push(Image {
            addr,
            version: entry.header.ts(),
            len_bytes: entry.len_bytes,
            words: words.clone(),
        });
        if batch.len() == BATCH_OBJECTS {
            report.objects += batch.len();
            report.batches += 1;
            send(std::mem::take(&mut batch))?;
            std::thread::sleep(PACE);
            if stop() {
                return Ok(report);
            }
        }
    }
    if !batch.is_empty() {
        report.objects += batch.len();
        report.batches += 1;
        send(batch)?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Member;

    fn members(n: u64) -> Vec<Member> {
        (1..=n).map(|id| Member { id, addr: format!("127.0.0.1:{}", 7000 + id) }).collect()
    }

    #[test]
    fn a_degraded_region_gets_the_least_loaded_member_that_holds_no_copy() {
        let mut c = ClusterConfig::initial(members(4), 1);
        // Node 4 removed: region 3 lost its backup, region 4 was promoted to node 1.
        c.members.retain(|m| m.id != 4);
        c.regions[2].backups.clear();
        c.regions[3].primary = 1;
        c.regions[3].backups.clear();
        let p = plan(&c).expect("degraded");
        assert_eq!(p.next.seq, c.seq + 1);
        assert_eq!(p.degraded, vec![3, 4]);
        let backups = |r: usize| p.next.regions[r].backups.clone();
        // Loads: every survivor holds 2 replicas. Region 3 (primary 3) takes node 1 (the
        // lower id of the tie); then region 4 (primary 1) takes node 2 (2 replicas, against
        // node 3's 3 now).
        assert_eq!((backups(2), backups(3)), (vec![1], vec![2]));
        assert!(!p.cm_changed && !p.lease_wait);
        p.next.validate().unwrap();
        assert!(plan(&p.next).is_none(), "nothing left to restore");
    }

    #[test]
    fn no_plan_without_a_member_to_take_the_copy() {
        let mut c = ClusterConfig::initial(members(2), 1);
        c.members.retain(|m| m.id != 2);
        c.regions.retain(|r| r.primary == 1);
        c.regions[0].backups.clear();
        assert!(plan(&c).is_none());
    }

    #[test]
    fn copies_are_due_at_primaries_for_the_backups_added() {
        let before = ClusterConfig::initial(members(3), 1);
        let mut after = before.clone();
        after.seq += 1;
        after.regions[0].backups.push(3);
        assert_eq!(copies_due(1, &before, &after), vec![(1, 3)]);
        assert!(copies_due(2, &before, &after).is_empty());
    }

    #[test]
    fn images_round_trip_and_malformed_batches_are_errors() {
        let images = vec![
            Image {
                addr: ordo::Addr::new(1, 64),
                version: Timestamp::from_nanos(5),
                len_bytes: 12,
                words: vec![1, 2],
            },
            Image {
                addr: ordo::Addr::new(1, 128),
                version: Timestamp::from_nanos(6),
                len_bytes: 8,
                words: vec![3],
            },
        ];
        let words = encode_images(&images);
        assert_eq!(decode_images(&words).unwrap(), images);
        assert!(decode_images(&words[..4]).is_err());
        assert!(decode_images(&words[..2]).is_err());
        assert!(decode_images(&[64, 5, 0]).is_err());
    }
}
