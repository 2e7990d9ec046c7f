//! The serving side of a cluster: the `serve_*` family on [`Ordo`], what a node's network task
//! calls when another coordinator's message arrives (DESIGN §4; see [`crate::remote`] for the
//! protocol, the lock and backup tables and their invariants).
//!
//! These methods live with the handle they are defined on, above `crate::remote`, which holds
//! the cluster's vocabulary ([`PartWire`], [`TxKey`], [`Refusal`](crate::remote::Refusal)) and
//! the serving state ([`ServeState`]) the handle owns: so `remote` depends on the transaction
//! layer only, and the handle on both.

use ordo_clock::{Clock, Timestamp};

use super::Ordo;
use crate::addr::Addr;
use crate::error::{Abort, Error};
#[cfg(doc)]
use crate::remote::ServeState;
use crate::remote::{
    Backed, Decision, Evidence, Locked, PartWire, ReadAt, ReadEntry, Record, RecoveryState,
    Resolved, Seen, ServeStats, TxKey, WriteKind, lock,
};
use crate::txn::participant::{LocalParticipant, Participant};
use crate::txn::set::WriteSet;
use crate::txn::worker::Worker;

impl<C: Clock> Ordo<C> {
    fn serve_worker(&self) -> Result<Box<Worker>, Error> {
        let serve = &self.shared().serve;
        if let Some(w) = lock(&serve.workers).pop() {
            return Ok(w);
        }
        self.shared().new_worker()
    }

    fn serve_worker_done(&self, w: Box<Worker>) {
        lock(&self.shared().serve.workers).push(w);
    }

    /// Serves a remote READ at this node's primary copy.
    ///
    /// A read that may walk old versions is registered at `at.rts` in a thread slot while it
    /// runs (so this node's GC keeps what it reads) and is refused with
    /// [`Error::SnapshotTooOld`] when `at.rts` is below this node's GC safe point (the
    /// GC_local guard of FaRMv2 §4.6: versions below it may be gone).
    pub fn serve_read(
        &self,
        addr: Addr,
        at: ReadAt,
        out: &mut Vec<u64>,
    ) -> Result<ReadEntry, Error> {
        let s = self.shared();
        if at.old_versions
            && let Some(&since) = lock(&s.serve.promoted).get(&addr.region())
            && at.rts < since
        {
            // The backup copy this primary was promoted from kept no old versions.
            return Err(Error::SnapshotTooOld { ts: at.rts, gc_point: since });
        }
        let scratch = crate::txn::participant::LocalScratch::default();
        let owner = LocalParticipant::new(&s.heap, &s.versions, &scratch);
        if !at.old_versions || s.versions.is_none() {
            return owner.read(addr, at, out);
        }
        let worker = self.serve_worker()?;
        let slot = s.slot(worker.slot);
        // SeqCst: registration before the safe-point check (Dekker, crate::gc).
        slot.active_rts.store(at.rts.as_nanos(), std::sync::atomic::Ordering::SeqCst);
        let gc_point = s.gc.point();
        let read = if at.rts < gc_point {
            Err(Error::SnapshotTooOld { ts: at.rts, gc_point })
        } else {
            owner.read(addr, at, out)
        };
        // Release: pairs with the GC's Acquire scan; the slot is idle again.
        slot.active_rts.store(crate::txn::worker::IDLE, std::sync::atomic::Ordering::Release);
        self.serve_worker_done(worker);
        read
    }

    /// Serves a remote revalidation (see [`Participant::still_newest`]).
    pub fn serve_still_newest(&self, read: &ReadEntry, rts: Timestamp) -> Result<bool, Error> {
        let s = self.shared();
        let scratch = crate::txn::participant::LocalScratch::default();
        let mut words = Vec::new();
        LocalParticipant::new(&s.heap, &s.versions, &scratch).still_newest(read, rts, &mut words)
    }

    /// Serves `coordinator`'s remote reservation of a slot for `len_bytes` in this node's home
    /// regions. Returns the address and the version the slot holds.
    pub fn serve_reserve(
        &self,
        coordinator: u64,
        len_bytes: usize,
    ) -> Result<(Addr, Timestamp), Error> {
        let s = self.shared();
        let addr = s.heap.reserve(&mut lock(&s.serve.alloc), len_bytes)?;
        lock(&s.serve.reserved).insert(addr, coordinator);
        let version = s.heap.object(addr).map_or(Timestamp::ZERO, |o| o.header().ts());
        Ok((addr, version))
    }

    /// Serves a release of a slot reserved by [`Ordo::serve_reserve`] whose transaction did not
    /// commit it. An address that is not a slot reserved here and unallocated is refused: a
    /// release repeated, or of a slot reserved at this region's old primary before a failover
    /// promoted this node (found by the data-path simulation, where it freed a slot twice).
    pub fn serve_release(&self, addr: Addr) -> Result<(), Error> {
        let s = self.shared();
        let obj = s.heap.object(addr)?;
        if obj.header().is_allocated() || obj.header().is_locked() {
            return Err(Error::NotAllocated { addr });
        }
        if lock(&s.serve.reserved).remove(&addr).is_none() {
            return Err(Error::NotAllocated { addr });
        }
        s.heap.release(addr, None);
        Ok(())
    }

    /// Serves LOCK: locks `part` for `key` and keeps the token until COMMIT-PRIMARY or ABORT.
    pub fn serve_lock(&self, key: TxKey, part: &PartWire) -> Result<(), Error> {
        if part.region() != Some(key.region) {
            return Err(Error::Config(format!("LOCK for region {} names another", key.region)));
        }
        let s = self.shared();
        if lock(&s.serve.locked).contains_key(&key) {
            return Err(Error::Config(format!("{key:?} is already locked")));
        }
        let mut writes = WriteSet::default();
        part.decode(&mut writes)?;
        // An allocation must be of a slot reserved here (see `ServeState::reserved`).
        let allocs: Vec<Addr> = writes
            .entries()
            .iter()
            .filter(|e| e.kind == WriteKind::Alloc)
            .map(|e| e.addr)
            .collect();
        if !allocs.is_empty() {
            let reserved = lock(&s.serve.reserved);
            if let Some(&addr) = allocs.iter().find(|a| !reserved.contains_key(a)) {
                return Err(Error::Aborted(Abort::WriteConflict { addr }));
            }
        }
        let worker = self.serve_worker()?;
        let result = {
            let p = LocalParticipant::new(&s.heap, &s.versions, &worker.local);
            p.lock(writes.part(0..writes.len()))
        };
        match result {
            Ok(locks) => {
                // The locked part owns its slots now: ABORT gives them back, COMMIT-PRIMARY
                // allocates them.
                if !allocs.is_empty() {
                    let mut reserved = lock(&s.serve.reserved);
                    for a in &allocs {
                        reserved.remove(a);
                    }
                }
                lock(&s.serve.locked).insert(key, Locked { writes, locks, worker });
                Ok(())
            }
            Err(e) => {
                self.serve_worker_done(worker);
                Err(e)
            }
        }
    }

    /// Serves VALIDATE of reads this node owns.
    pub fn serve_validate(&self, reads: &[ReadEntry]) -> Result<(), Error> {
        let s = self.shared();
        let scratch = crate::txn::participant::LocalScratch::default();
        LocalParticipant::new(&s.heap, &s.versions, &scratch).validate(reads, &WriteSet::default())
    }

    /// Serves COMMIT-PRIMARY: installs the part locked for `key` at `wts` and unlocks it.
    pub fn serve_commit_primary(&self, key: TxKey, wts: Timestamp) -> Result<(), Error> {
        let s = self.shared();
        let Some(Locked { writes, locks, worker }) = lock(&s.serve.locked).remove(&key) else {
            return Err(Error::Config(format!("COMMIT-PRIMARY of {key:?}, which holds no locks")));
        };
        let result = {
            let p = LocalParticipant::new(&s.heap, &s.versions, &worker.local);
            p.commit_primary(locks, writes.part(0..writes.len()), wts)
        };
        self.serve_worker_done(worker);
        self.saw(key, Seen::Installed, wts);
        result
    }

    /// Notes what happened to `key`'s transaction here (recovery's evidence).
    fn saw(&self, key: TxKey, seen: Seen, wts: Timestamp) {
        lock(&self.shared().serve.evidence).push(Evidence {
            coordinator: key.coordinator,
            tx: key.tx,
            seen,
            wts,
        });
    }

    /// Serves ABORT: releases the locks held for `key` (if LOCK got there) and the reserved
    /// slots of the part's allocations — from the locked part, or else from `allocs`.
    pub fn serve_abort(&self, key: TxKey, allocs: &[Addr]) -> Result<(), Error> {
        let s = self.shared();
        let held = lock(&s.serve.locked).remove(&key);
        self.saw(key, Seen::Aborted, Timestamp::ZERO);
        match held {
            Some(Locked { writes, locks, worker }) => {
                let result = {
                    let p = LocalParticipant::new(&s.heap, &s.versions, &worker.local);
                    p.abort(Some(locks), writes.part(0..writes.len()))
                };
                self.serve_worker_done(worker);
                result
            }
            None => {
                for &addr in allocs {
                    if addr.region() == key.region {
                        // A slot already allocated or not ours is refused, not released.
                        let _ = self.serve_release(addr);
                    }
                }
                Ok(())
            }
        }
    }

    /// Serves COMMIT-BACKUP: keeps `part` (one region this node backs up) until TRUNCATE.
    /// `regions` are every region the transaction writes (recovery's vote needs them); the
    /// part's own must be among them.
    pub fn serve_backup(
        &self,
        key: TxKey,
        part: &PartWire,
        wts: Timestamp,
        regions: &[u16],
    ) -> Result<(), Error> {
        if !regions.contains(&key.region) {
            return Err(Error::Config(format!(
                "COMMIT-BACKUP of region {} lists the transaction's regions {regions:?} without it",
                key.region
            )));
        }
        if part.region() != Some(key.region) {
            return Err(Error::Config(format!(
                "COMMIT-BACKUP for region {} names another",
                key.region
            )));
        }
        let mut writes = WriteSet::default();
        part.decode(&mut writes)?;
        if let Some(d) = &self.shared().durable {
            self.shared().heap.ensure_region(key.region)?;
            self.log_backup(&d.log, &writes, wts)?;
        }
        let mut regions = regions.to_vec();
        regions.sort_unstable();
        regions.dedup();
        lock(&self.shared().serve.backed).insert(key, Backed { wts, part: writes, regions });
        Ok(())
    }

    /// Logs a backed-up part durably before COMMIT-BACKUP is acknowledged. The record carries
    /// a timestamp of this node's clock drawn as a local commit draws its write timestamp
    /// (lower bound published first, then `get_ts`), not the transaction's `wts`: parts arrive
    /// here in any order of `wts` but in commit order per object, and the log's marker and
    /// checkpointer need records in the order of their timestamps. The images inside carry
    /// `wts`. In `sync` mode this waits until the marker covers the record.
    ///
    /// Every object's slab header word goes with it, not only an allocation's: this node may
    /// hold the slab's header from a copy it never logged (re-replication), and an object whose
    /// slab has no header is not an object when the log is replayed after a restart (found by
    /// the data-path simulation, `ordo_cluster::sim::data`).
    fn log_backup(
        &self,
        log: &crate::durable::log::Log,
        writes: &WriteSet,
        wts: Timestamp,
    ) -> Result<(), Error> {
        let s = self.shared();
        let worker = self.serve_worker()?;
        let slot = worker.slot;
        log.publish_lower(slot, s.clock.now().lo().as_nanos());
        let ts = s.clock.get_ts();
        let part = writes.part(0..writes.len());
        let result = log
            .append_tx(slot, ts.as_nanos(), |rec| {
                crate::txn::participant::redo_record(rec, part, wts, |e| {
                    crate::heap::Heap::implied_slab_word(e.addr, e.len_bytes)
                });
            })
            .and_then(|()| log.wait_durable(Some(slot), ts.as_nanos()));
        self.serve_worker_done(worker);
        result.map_err(Error::from)
    }

    /// Serves TRUNCATE: applies the part backed up for `key`, if any (a repeated or unknown
    /// truncation is a no-op). Returns whether a part was applied.
    pub fn serve_truncate(&self, key: TxKey) -> Result<bool, Error> {
        let s = self.shared();
        let Some(Backed { wts, part, .. }) = lock(&s.serve.backed).remove(&key) else {
            return Ok(false);
        };
        self.saw(key, Seen::Applied, wts);
        for e in part.entries() {
            let applied = s.heap.apply_backup(
                e.addr,
                e.kind == WriteKind::Alloc,
                e.kind != WriteKind::Free,
                wts,
                e.len_bytes,
                part.data(e),
            );
            if let Err(err) = applied {
                s.serve.apply_errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Err(err);
            }
        }
        Ok(true)
    }

    /// Drops the part backed up for `key` without applying it (its transaction aborted).
    /// Returns whether there was one.
    pub fn serve_discard(&self, key: TxKey) -> bool {
        self.saw(key, Seen::Forgotten, Timestamp::ZERO);
        lock(&self.shared().serve.backed).remove(&key).is_some()
    }

    /// What this node holds of the transactions of `coordinators` (recovery's query, see
    /// [`crate::remote`]): the records not applied, the parts locked, and the evidence. The
    /// slots they reserved here and never locked are given back (they are dead or fenced:
    /// nothing more from them arrives).
    pub fn serve_recovery_state(&self, coordinators: &[u64]) -> RecoveryState {
        let s = &self.shared().serve;
        let ours = |c: u64| coordinators.contains(&c);
        // Slots they reserved here and never locked: nothing more from them arrives (they are
        // dead, or fenced), so no LOCK or release will; give them back.
        let orphans: Vec<Addr> = {
            let mut reserved = lock(&s.reserved);
            let orphans = reserved.iter().filter(|(_, c)| ours(**c)).map(|(a, _)| *a).collect();
            reserved.retain(|_, c| !ours(*c));
            orphans
        };
        for addr in orphans {
            self.shared().heap.release(addr, None);
        }
        let mut records: Vec<Record> = lock(&s.backed)
            .iter()
            .filter(|(k, _)| ours(k.coordinator))
            .map(|(k, b)| Record { key: *k, wts: b.wts, regions: b.regions.clone() })
            .collect();
        records.sort_by_key(|r| (r.key.coordinator, r.key.tx, r.key.region));
        let mut locks: Vec<TxKey> =
            lock(&s.locked).keys().filter(|k| ours(k.coordinator)).copied().collect();
        locks.sort_by_key(|k| (k.coordinator, k.tx, k.region));
        let evidence = lock(&s.evidence).iter().filter(|e| ours(e.coordinator)).copied().collect();
        RecoveryState { records, locks, evidence }
    }

    /// Carries out recovery's decisions here: for each, the parts locked here are installed
    /// at the decided write timestamp (commit) or released (abort), and the records held here
    /// are applied (commit) or dropped (abort). Every decision is carried out even when one
    /// fails; the failures are returned in [`Resolved::errors`].
    pub fn serve_resolve(&self, decisions: &[Decision]) -> Resolved {
        let s = &self.shared().serve;
        let mut done = Resolved::default();
        for d in decisions {
            let of = |k: &TxKey| k.coordinator == d.coordinator && k.tx == d.tx;
            let locked: Vec<TxKey> = lock(&s.locked).keys().filter(|k| of(k)).copied().collect();
            for key in locked {
                let r = match d.commit {
                    Some(wts) => self.serve_commit_primary(key, wts).map(|()| done.installed += 1),
                    None => self.serve_abort(key, &[]).map(|()| done.released += 1),
                };
                if let Err(e) = r {
                    done.errors.push((key, e));
                }
            }
            let backed: Vec<TxKey> = lock(&s.backed).keys().filter(|k| of(k)).copied().collect();
            for key in backed {
                match d.commit {
                    Some(_) => match self.serve_truncate(key) {
                        Ok(true) => done.applied += 1,
                        Ok(false) => {}
                        Err(e) => done.errors.push((key, e)),
                    },
                    None => {
                        if self.serve_discard(key) {
                            done.dropped += 1;
                        }
                    }
                }
            }
        }
        done
    }

    /// Records held here for `region` and not applied yet (a promoted backup serves its region
    /// only once none is left).
    pub fn serve_pending_in(&self, region: u16) -> usize {
        lock(&self.shared().serve.backed).keys().filter(|k| k.region == region).count()
    }

    /// Makes this node the primary of `region`, whose backup copy it held (FaRMv2 §4.7's
    /// promotion): the allocator's free-slot state is rebuilt from the objects' headers, the
    /// region becomes a home region (allocation may use it), and reads of versions older than
    /// `since` are refused with [`Error::SnapshotTooOld`] (the backup kept no old versions).
    /// Call it once no record of the region is pending ([`Ordo::serve_pending_in`]).
    pub fn promote_region(&self, region: u16, since: Timestamp) -> Result<(), Error> {
        let s = self.shared();
        s.heap.promote_region(region)?;
        lock(&s.serve.promoted).insert(region, since);
        Ok(())
    }

    /// The allocated objects of `region` here, ascending: what a primary copies to a new
    /// backup (re-replication). A scan as of now; see [`Ordo::read_version`] for each image.
    pub fn region_objects(&self, region: u16) -> Vec<Addr> {
        self.shared().heap.allocated_in(region)
    }

    /// Serves one object image a primary copies to this new backup of its region
    /// (re-replication): applied as a backup applies a TRUNCATE — never over a newer version,
    /// so a commit that reached this backup first wins.
    pub fn serve_replica(
        &self,
        addr: Addr,
        version: Timestamp,
        len_bytes: usize,
        payload: &[u64],
    ) -> Result<(), Error> {
        self.shared().heap.apply_backup(addr, false, true, version, len_bytes, payload)
    }

    /// Counters of the serving side.
    pub fn serve_stats(&self) -> ServeStats {
        let s = &self.shared().serve;
        ServeStats {
            locked: lock(&s.locked).len(),
            backed: lock(&s.backed).len(),
            apply_errors: s.apply_errors.load(std::sync::atomic::Ordering::Relaxed),
            reserved: lock(&s.reserved).len(),
        }
    }

    /// A digest of region `region`'s committed objects here (see the replication invariant in
    /// `ordo-cluster`); `None` when this process holds no copy of it.
    pub fn region_digest(&self, region: u16) -> Option<u64> {
        self.shared().heap.region_digest(region)
    }
}
