//! Per-thread state: the registered thread slot (active read timestamp and counters) and the
//! reusable buffers of a transaction.
//!
//! A thread running transactions on a database gets a [`Worker`] the first time and keeps it in a
//! thread-local cache, so beginning a transaction costs a short scan of that cache and no
//! allocation. Nested transactions on one thread simply get a second worker. When the thread exits
//! (or the database is dropped) the worker gives its slot back.
//!
//! Each slot is cache-padded and written only by its owner thread, so the hot path writes no
//! shared cache line; readers of the counters (`Ordo::stats`) and, later, the GC (the oldest
//! active timestamp) only read them.

use std::cell::RefCell;
use std::sync::Weak;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::AbortKind;
use crate::heap::AllocCache;
use crate::txn::set::{ReadSet, WriteSet};

/// `active_rts` value of a slot with no transaction running.
pub(crate) const IDLE: u64 = u64::MAX;

/// A registered thread's shared state.
#[derive(Debug)]
pub(crate) struct ThreadSlot {
    /// The read timestamp of the running transaction, or [`IDLE`].
    pub(crate) active_rts: AtomicU64,
    pub(crate) commits: AtomicU64,
    pub(crate) read_only_commits: AtomicU64,
    pub(crate) aborts: [AtomicU64; AbortKind::ALL.len()],
    pub(crate) write_wait_ns: AtomicU64,
    /// Read timestamps moved forward (`Tx::extend`).
    pub(crate) extensions: AtomicU64,
    /// Rereads of a locked object (`Tx::wait_locked`).
    pub(crate) locked_read_waits: AtomicU64,
    /// The commit-attempt count of the slot's last worker, so the next one continues it and an
    /// attempt's `(slot, count)` name stays unique for the database's life.
    pub(crate) tx_seq: AtomicU64,
}

impl Default for ThreadSlot {
    fn default() -> Self {
        ThreadSlot {
            active_rts: AtomicU64::new(IDLE),
            commits: AtomicU64::new(0),
            read_only_commits: AtomicU64::new(0),
            aborts: std::array::from_fn(|_| AtomicU64::new(0)),
            write_wait_ns: AtomicU64::new(0),
            extensions: AtomicU64::new(0),
            locked_read_waits: AtomicU64::new(0),
            tx_seq: AtomicU64::new(0),
        }
    }
}

/// Adds `n` to a counter only its owner thread writes: a load and a store, no locked RMW.
#[inline]
pub(crate) fn bump(counter: &AtomicU64, n: u64) {
    // Relaxed: statistics only; single writer, readers tolerate staleness.
    counter.store(counter.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// Where workers return their slots.
pub(crate) trait SlotHome: Send + Sync {
    fn release_worker(&self, worker: &mut Worker);
}

/// A thread's transaction state for one database.
pub(crate) struct Worker {
    pub(crate) db_id: u64,
    pub(crate) slot: usize,
    pub(crate) home: Weak<dyn SlotHome>,
    pub(crate) alloc: AllocCache,
    pub(crate) reads: ReadSet,
    pub(crate) writes: WriteSet,
    pub(crate) scratch: Vec<u64>,
    /// A second read buffer: [`crate::txn::Tx::read_used_owned`] hands `scratch` out and puts
    /// this in its place, and [`crate::txn::Tx::recycle`] brings a buffer back here, so a
    /// copied-out object costs neither a copy nor an allocation once the worker is warm.
    pub(crate) spare: Vec<u64>,
    /// The local participant's per-thread state (old-version cursor, lock-token vector).
    pub(crate) local: crate::txn::participant::LocalScratch,
    pub(crate) rng: u64,
    /// Commit attempts made by this worker: with the slot, names an attempt to remote owners.
    pub(crate) tx_seq: u64,
    /// Leaves this worker's recent attempts appended to, with their key ranges
    /// ([`crate::txn::hints`]).
    pub(crate) hints: crate::txn::hints::Hints,
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(home) = self.home.upgrade() {
            home.release_worker(self);
        }
    }
}

impl Worker {
    /// A pseudo-random number (xorshift64*), for back-off jitter.
    pub(crate) fn next_random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

thread_local! {
    // Boxed on purpose: a worker moves between this cache and a `Tx` on every transaction, and
    // the box keeps that move a pointer copy.
    #[allow(clippy::vec_box)]
    static WORKERS: RefCell<Vec<Box<Worker>>> = const { RefCell::new(Vec::new()) };
}

/// Takes this thread's cached worker for `db_id`, if any.
pub(crate) fn take_cached(db_id: u64) -> Option<Box<Worker>> {
    WORKERS
        .try_with(|w| {
            let mut w = w.borrow_mut();
            let i = w.iter().position(|x| x.db_id == db_id)?;
            Some(w.swap_remove(i))
        })
        .ok()
        .flatten()
}

/// Puts a worker back in this thread's cache (dropping workers of databases that are gone).
pub(crate) fn put_cached(worker: Box<Worker>) {
    let mut worker = Some(worker);
    let _ = WORKERS.try_with(|w| {
        let mut w = w.borrow_mut();
        w.retain(|x| x.home.strong_count() > 0);
        if let Some(worker) = worker.take()
            && !w.iter().any(|x| x.db_id == worker.db_id)
        {
            w.push(worker);
        }
    });
    // A worker not cached (nested transaction, or the thread is exiting) is dropped here and
    // returns its slot.
    drop(worker);
}
