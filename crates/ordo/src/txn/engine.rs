//! What every transaction of one database shares: the clock, the heap and its old versions,
//! the GC state, the durable log, the remote hook of a cluster, and the thread slots.
//!
//! [`Engine`] is the part of a database that [`Tx`](super::Tx) works on. It sits in `txn`, not
//! in the database handle above it, so that the modules depend only downward: the handle
//! (`crate::db`) builds an `Engine`, wraps it with its configuration and the serving state of
//! `crate::remote`, and hands `&Engine` to every transaction it begins; nothing here names the
//! handle. Its methods are the ones a transaction (or the GC, or a server) needs: a worker and
//! its slot, the participant set, and the oldest active read timestamp.
//!
//! # Invariants
//! * A slot index is held by at most one [`Worker`] at a time: it is popped from `free_slots`
//!   by [`Engine::new_worker`] and pushed back only by [`Engine::release_worker`] (through the
//!   worker's [`SlotHome`] when it is dropped).
//! * A slot's `active_rts` is [`worker::IDLE`] whenever no transaction or pin runs in it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use crossbeam_utils::CachePadded;
use ordo_clock::Clock;

use super::participant::cluster::ClusterSet;
use super::participant::{LocalParticipant, LocalScratch, One, Participants, Remote};
use super::worker::{self, SlotHome, ThreadSlot, Worker};
use crate::error::Error;
use crate::gc::{GcRound, GcState};
use crate::heap::Heap;
use crate::mvcc::VersionArena;

/// The state every transaction of one database shares (see the module docs).
pub(crate) struct Engine<C> {
    /// Names the database in the thread-local worker cache.
    pub(crate) id: u64,
    pub(crate) clock: C,
    pub(crate) heap: Heap,
    pub(crate) versions: Option<VersionArena>,
    pub(crate) gc: GcState,
    pub(crate) durable: Option<crate::durable::Durable>,
    /// The network half of the participant seam, in a cluster (see `crate::remote`).
    pub(crate) remote: Option<Arc<dyn Remote>>,
    pub(crate) slots: Box<[CachePadded<ThreadSlot>]>,
    pub(crate) free_slots: Mutex<Vec<usize>>,
    /// Where this database's workers give their slots back: the handle that owns this engine.
    pub(crate) weak_self: Weak<dyn SlotHome>,
}

impl<C: Clock> Engine<C> {
    /// An engine with `threads_max` idle slots; `weak_self` is the handle owning it (made
    /// with `Arc::new_cyclic`), whose [`SlotHome`] forwards to [`Engine::release_worker`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: u64,
        clock: C,
        heap: Heap,
        versions: Option<VersionArena>,
        durable: Option<crate::durable::Durable>,
        remote: Option<Arc<dyn Remote>>,
        threads_max: usize,
        weak_self: Weak<dyn SlotHome>,
    ) -> Self {
        Engine {
            id,
            clock,
            heap,
            versions,
            gc: GcState::default(),
            durable,
            remote,
            slots: (0..threads_max).map(|_| CachePadded::new(ThreadSlot::default())).collect(),
            free_slots: Mutex::new((0..threads_max).rev().collect()),
            weak_self,
        }
    }

    /// Gives `worker`'s slot back: idle again, its commit count kept for the next worker, its
    /// allocation cache and old-version cursor returned.
    pub(crate) fn release_worker(&self, worker: &mut Worker) {
        self.slots[worker.slot].active_rts.store(worker::IDLE, Ordering::Release);
        // Relaxed: read by the slot's next worker after the free-list mutex hands it over.
        self.slots[worker.slot].tx_seq.store(worker.tx_seq, Ordering::Relaxed);
        self.heap.abandon(&mut worker.alloc);
        if let Some(v) = &self.versions {
            v.retire(&worker.local.cursor);
        }
        self.free_slots.lock().unwrap_or_else(|e| e.into_inner()).push(worker.slot);
    }

    pub(crate) fn slot(&self, index: usize) -> &ThreadSlot {
        &self.slots[index]
    }

    /// The participants of this database's transactions, for the worker whose participant
    /// state is `local` and whose slot is `slot`: one local participant owning every region —
    /// the heap, its old versions, and the durable log as its backup. A cluster node provides
    /// its own set here, routing the regions other nodes own to remote participants.
    #[inline]
    pub(crate) fn participants<'a>(
        &'a self,
        local: &'a LocalScratch,
        slot: usize,
    ) -> impl Participants + 'a {
        let log = self.durable.as_ref().map(|d| &d.log);
        One(LocalParticipant::new(&self.heap, &self.versions, local).with_log(log, slot))
    }

    /// The participants of a database with a [`Remote`]: per region the local participant or
    /// the remote, for commit attempt `tx`.
    #[inline]
    pub(crate) fn cluster_participants<'a>(
        &'a self,
        hook: &'a dyn Remote,
        local: &'a LocalScratch,
        slot: usize,
        tx: u64,
    ) -> ClusterSet<'a> {
        // A primary does not log: its backups do (`crate::remote`).
        let local = LocalParticipant::new(&self.heap, &self.versions, local).with_log(None, slot);
        ClusterSet::new(local, hook, tx)
    }

    /// This thread's worker: cached, or new with a fresh slot.
    pub(crate) fn worker(&self) -> Result<Box<Worker>, Error> {
        if let Some(w) = worker::take_cached(self.id) {
            return Ok(w);
        }
        self.new_worker()
    }

    /// A new worker with a fresh slot (not from the thread's cache).
    pub(crate) fn new_worker(&self) -> Result<Box<Worker>, Error> {
        let slot =
            self.free_slots.lock().unwrap_or_else(|e| e.into_inner()).pop().ok_or_else(|| {
                Error::Config(format!(
                    "more than threads_max = {} threads are running transactions",
                    self.slots.len()
                ))
            })?;
        Ok(Box::new(Worker {
            db_id: self.id,
            slot,
            home: self.weak_self.clone(),
            alloc: Default::default(),
            reads: Default::default(),
            writes: Default::default(),
            scratch: Vec::new(),
            spare: Vec::new(),
            local: Default::default(),
            rng: 0x9E37_79B9_7F4A_7C15 ^ ((slot as u64 + 1) << 17),
            // Relaxed: the free-list mutex ordered the previous worker's store before this.
            tx_seq: self.slots[slot].tx_seq.load(Ordering::Relaxed),
            hints: Default::default(),
        }))
    }

    /// The smallest read timestamp registered in a slot, if any.
    pub(crate) fn min_active(&self) -> Option<ordo_clock::Timestamp> {
        self.slots
            .iter()
            // SeqCst: the scan half of the Dekker pattern in crate::gc.
            .map(|s| s.active_rts.load(Ordering::SeqCst))
            .filter(|&v| v != worker::IDLE)
            .min()
            .map(ordo_clock::Timestamp::from_nanos)
    }

    /// One GC round over this database's slots and old-version memory.
    pub(crate) fn gc_round(&self) -> GcRound {
        self.gc.round(
            || self.min_active(),
            || self.clock.now().lo(),
            |below| {
                let blocks = self.versions.as_ref().map_or(0, |v| v.collect(below));
                (blocks, self.heap.reclaim_slabs(below))
            },
        )
    }
}
