//! # Oplog on the ORDO clock (ORDO §4.4, §6.3; Boyd-Wickizer et al., "OpLog", MIT TR 2014)
//!
//! An update-heavy shared structure made scalable by not updating it: each updater appends the
//! operation, with a timestamp, to **its own log**, and the structure is brought up to date only
//! when someone reads it — the reader collects the logs, sorts the operations by timestamp and
//! applies them under the structure's lock. Updates touch only their own cache lines, so they
//! scale; reads pay for the merge. Linux's reverse map (page → the mappings of that page) is the
//! paper's example: `fork`/`exit`/`mmap` add and remove mappings constantly, and the map is read
//! only when a page is swapped out or migrated. [`Rmap`] is that structure here.
//!
//! Original Oplog stamped operations with the raw per-core hardware counter, trusting the
//! counters to be synchronized. ORDO replaces that with `new_time`, here [`Clock::get_ts`], which
//! waits out the clock's uncertainty (`ORDO_BOUNDARY`) and so returns values that **strictly
//! increase along happens-before** across threads (the `Clock` contract, FaRMv2 Lemma 1).
//!
//! ## Mechanism
//! * **Log** ([`Oplog::log`]): lock the thread's own log (a cache-padded mutex nobody else takes
//!   except a reader collecting), take `ts = clock.get_ts()` *while holding it*, append
//!   `(ts, op)`, unlock. The operation takes effect (is linearized) at its timestamp.
//! * **Synchronize** ([`Oplog::synchronize`], and every [`Oplog::read`]): lock the structure, take
//!   the **cut** `c = clock.get_ts()`, then visit every log in turn, under its lock moving out the
//!   entries with `ts <= c` (a prefix: a log's timestamps increase); sort them by
//!   `(timestamp, thread index)` — a stable sort, so one log's entries keep their order — apply
//!   them, and (for `read`) run the reader's closure on the structure before unlocking it.
//!
//! ## Why this is linearizable
//! Linearize every update at `(ts, thread)`, and every read at its cut `c`, after the updates
//! with `ts <= c` and before those with `ts > c` (reads among themselves by cut).
//! 1. **Real-time order is respected.** If `A` completes before `B` starts, `B`'s `get_ts` began
//!    after `A`'s returned, so `ts_B > ts_A` — whichever of `A`, `B` is an update or a read (a
//!    read's cut is a `get_ts` too). Equal timestamps therefore only occur between overlapping
//!    operations, which may be ordered either way: the thread index breaks those ties, the rule
//!    ORDO §4.4 keeps from Oplog for timestamps it cannot order. (Note the tie is *equality* of
//!    `get_ts` values, not `cmp_time` uncertainty: two `get_ts` values closer than the boundary
//!    can belong to operations ordered in real time, and ordering those by thread would be
//!    wrong; and "uncertain" is not transitive, so it cannot be a sort key.)
//! 2. **A read sees exactly the updates with `ts <= c`.** *None missing:* an update whose entry
//!    was not yet in its log when the reader visited it takes its timestamp after the visit (the
//!    timestamp is taken under the log's lock, and the reader held that lock after taking `c`),
//!    so its `ts > c`. *None extra:* entries above the cut stay in their logs. Applying them now
//!    would be wrong: an update `X` with a timestamp between `c` and a collected `Z`'s could be
//!    logged right after the reader passed `X`'s log yet complete before `Z` began; `Z` would
//!    then be applied (and seen) before `X` although `X` precedes it in real time.
//! 3. **Batches apply in global timestamp order.** Cuts taken under the structure's lock increase
//!    (each `get_ts` starts after the previous reader's returned), and by 2. each batch holds
//!    exactly the entries in `(previous cut, cut]`; within a batch the sort orders them. So the
//!    structure always equals the sequential replay, in `(ts, thread)` order, of every update at
//!    or below the last cut — the model the tests check against.
//!
//! An update that logged with a timestamp is thus linearized at it even though the structure
//! learns of it later; what the paper calls `op_synchronize` is the only place the structure
//! changes.
//!
//! ## Bounds
//! A log holding [`LOG_ENTRIES_MAX`] entries makes its next updater synchronize first (Oplog
//! does the same when a per-core log fills), so memory stays bounded without readers.
//!
//! ## Test-only shortcuts
//! With the `shortcuts` feature, [`OplogShortcuts::raw_timestamps`] stamps updates with the raw
//! clock reading (`now().lo()`, the local counter) instead of `get_ts` — original Oplog on
//! clocks that are *not* synchronized. On a skewed clock an update that follows another in real
//! time can then sort before it. [`OplogShortcuts::uncertain_by_thread`] orders timestamps
//! closer than the boundary by thread instead of by value (point 1 above). `tests/oplog.rs`
//! shows `ordo-check` rejecting the history of each.

mod rmap;

use std::sync::{Mutex, MutexGuard};

use crossbeam_utils::CachePadded;
use ordo_clock::{Clock, Timestamp};

pub use rmap::{Mapping, Rmap, RmapOp};

/// Entries a thread's log may hold before its updater synchronizes (applies all logs) first.
pub const LOG_ENTRIES_MAX: usize = 1 << 16;

/// The largest number of per-thread logs.
pub const THREADS_MAX: usize = 1 << 16;

/// A structure an [`Oplog`] keeps up to date: it applies operations in the order given.
pub trait Apply: Send {
    /// One update.
    type Op: Send;
    /// Applies `op`; called in `(timestamp, thread)` order, under the structure's lock.
    fn apply(&mut self, op: Self::Op);
}

/// Why an oplog call failed.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum OplogError {
    /// `Oplog::new` with zero threads, or more than [`THREADS_MAX`].
    #[error("oplog threads = {threads} is out of range: 1..={THREADS_MAX}")]
    Threads {
        /// The value given.
        threads: usize,
    },
    /// A thread index at or above the number of logs.
    #[error("oplog thread index {thread} is out of range: the oplog has {threads} logs")]
    ThreadIndex {
        /// The index given.
        thread: usize,
        /// Logs in the oplog.
        threads: usize,
    },
    /// A thread panicked while holding a lock (inside `Apply::apply` or a reader's closure); the
    /// structure may hold half an operation and is no longer used.
    #[error("oplog {what} lock poisoned by a panic")]
    Poisoned {
        /// Which lock: "log" or "structure".
        what: &'static str,
    },
}

/// Test-only switches that remove a step of the protocol (feature `shortcuts`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OplogShortcuts {
    /// Stamp updates with the raw clock reading `now().lo()` instead of `get_ts` (no wait for
    /// the boundary): original Oplog on unsynchronized counters.
    pub raw_timestamps: bool,
    /// Treat timestamps closer than the clock's boundary (`cmp_time` uncertain) as concurrent
    /// and order them by thread index: consecutive sorted entries at most `boundary_nanos`
    /// apart form a group, each group sorted by thread. The literal reading of ORDO §4.4's
    /// tie rule; wrong, because operations ordered in real time can be that close.
    pub uncertain_by_thread: bool,
}

/// One logged update.
struct Entry<Op> {
    ts: Timestamp,
    op: Op,
}

/// One thread's log, on its own cache lines.
type Log<Op> = CachePadded<Mutex<Vec<Entry<Op>>>>;

/// The structure and the merge buffer, under one lock.
struct Shared<S: Apply> {
    state: S,
    /// Reused between synchronizations: `(timestamp, thread, op)`.
    batch: Vec<(Timestamp, u32, S::Op)>,
    /// Updates applied so far.
    applied: u64,
}

/// Per-thread operation logs merged into a shared structure in timestamp order when it is read.
/// See the [module docs](self).
///
/// ```
/// use ordo_apps::oplog::{Mapping, Oplog, Rmap, RmapOp};
/// use ordo_clock::LogicalClock;
///
/// let rmap = Oplog::new(Rmap::default(), LogicalClock::new(), 2)?;
/// let m = Mapping { space: 7, vaddr: 0x1000 };
/// std::thread::scope(|s| {
///     s.spawn(|| rmap.log(0, RmapOp::Add { page: 42, mapping: m }));
///     s.spawn(|| rmap.log(1, RmapOp::Add { page: 43, mapping: m }));
/// });
/// rmap.log(1, RmapOp::Remove { page: 43, mapping: m })?;
/// assert_eq!(rmap.read(|r| r.mappings(42).len())?, 1);
/// assert_eq!(rmap.read(|r| r.mappings(43).len())?, 0);
/// # Ok::<(), ordo_apps::oplog::OplogError>(())
/// ```
pub struct Oplog<S: Apply, C: Clock> {
    clock: C,
    logs: Box<[Log<S::Op>]>,
    shared: Mutex<Shared<S>>,
    shortcuts: OplogShortcuts,
}

impl<S: Apply, C: Clock> Oplog<S, C> {
    /// An oplog over `state` with `threads` logs (thread indexes `0..threads`).
    pub fn new(state: S, clock: C, threads: usize) -> Result<Self, OplogError> {
        if threads == 0 || threads > THREADS_MAX {
            return Err(OplogError::Threads { threads });
        }
        Ok(Oplog {
            clock,
            logs: (0..threads).map(|_| CachePadded::new(Mutex::new(Vec::new()))).collect(),
            shared: Mutex::new(Shared { state, batch: Vec::new(), applied: 0 }),
            shortcuts: OplogShortcuts::default(),
        })
    }

    /// The oplog with protocol steps removed, for negative tests.
    #[cfg(feature = "shortcuts")]
    pub fn with_shortcuts(mut self, shortcuts: OplogShortcuts) -> Self {
        self.shortcuts = shortcuts;
        self
    }

    /// The number of logs.
    pub fn threads(&self) -> usize {
        self.logs.len()
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Logs `op` in thread `thread`'s log and returns its timestamp, where it is linearized.
    /// Each thread should use its own index (sharing one is correct, but contends).
    ///
    /// # Cost
    /// One uncontended lock of the thread's own cache line and one `get_ts` (which waits out the
    /// clock's boundary). Every [`LOG_ENTRIES_MAX`] entries, a synchronization.
    pub fn log(&self, thread: usize, op: S::Op) -> Result<Timestamp, OplogError> {
        let log = self
            .logs
            .get(thread)
            .ok_or(OplogError::ThreadIndex { thread, threads: self.logs.len() })?;
        let mut entries = lock(log, "log")?;
        if entries.len() >= LOG_ENTRIES_MAX {
            drop(entries);
            self.synchronize()?;
            entries = lock(log, "log")?;
        }
        // The timestamp is taken under the log's lock: a reader that visits this log after
        // taking its cut either sees this entry or ordered its visit before this `get_ts`, which
        // then returns more than the cut (module docs, point 2).
        let ts =
            if self.shortcuts.raw_timestamps { self.clock.now().lo() } else { self.clock.get_ts() };
        entries.push(Entry { ts, op });
        Ok(ts)
    }

    /// Applies every logged update with a timestamp up to a fresh cut, in `(timestamp, thread)`
    /// order, and returns the cut.
    pub fn synchronize(&self) -> Result<Timestamp, OplogError> {
        let mut shared = lock(&self.shared, "structure")?;
        self.merge(&mut shared)
    }

    /// Synchronizes and runs `f` on the up-to-date structure, under its lock; `f` sees exactly
    /// the updates with timestamps up to the cut (see the module docs).
    pub fn read<R>(&self, f: impl FnOnce(&S) -> R) -> Result<R, OplogError> {
        let mut shared = lock(&self.shared, "structure")?;
        self.merge(&mut shared)?;
        Ok(f(&shared.state))
    }

    /// [`Oplog::read`], also returning the cut the reader is linearized at.
    pub fn read_at<R>(&self, f: impl FnOnce(&S) -> R) -> Result<(Timestamp, R), OplogError> {
        let mut shared = lock(&self.shared, "structure")?;
        let cut = self.merge(&mut shared)?;
        Ok((cut, f(&shared.state)))
    }

    /// Updates applied to the structure so far.
    pub fn applied(&self) -> Result<u64, OplogError> {
        Ok(lock(&self.shared, "structure")?.applied)
    }

    /// Applies every update still logged and returns the structure.
    pub fn into_inner(self) -> Result<S, OplogError> {
        self.synchronize()?;
        let shared =
            self.shared.into_inner().map_err(|_| OplogError::Poisoned { what: "structure" })?;
        Ok(shared.state)
    }

    /// Collects the entries up to a fresh cut and applies them; the caller holds the structure.
    fn merge(&self, shared: &mut Shared<S>) -> Result<Timestamp, OplogError> {
        // The cut is taken under the structure's lock, so successive cuts increase.
        let cut = self.clock.get_ts();
        let Shared { state, batch, applied } = shared;
        batch.clear();
        for (thread, log) in self.logs.iter().enumerate() {
            let mut entries = lock(log, "log")?;
            // A log's timestamps never decrease (get_ts increases along program order), so the
            // entries at or below the cut are a prefix.
            let n = entries.iter().position(|e| e.ts > cut).unwrap_or(entries.len());
            // `thread < THREADS_MAX`, which fits in u32.
            let t = thread as u32;
            batch.extend(entries.drain(..n).map(|e| (e.ts, t, e.op)));
        }
        // Stable: entries of one log with equal timestamps keep their log order.
        batch.sort_by_key(|(ts, thread, _)| (*ts, *thread));
        if self.shortcuts.uncertain_by_thread {
            group_uncertain_by_thread(batch, self.clock.boundary_nanos());
        }
        *applied += batch.len() as u64;
        for (_, _, op) in batch.drain(..) {
            state.apply(op);
        }
        Ok(cut)
    }
}

/// The `uncertain_by_thread` shortcut: within each run of sorted entries whose neighbours are at
/// most `boundary_nanos` apart, order by thread (stable).
fn group_uncertain_by_thread<Op>(batch: &mut [(Timestamp, u32, Op)], boundary_nanos: u64) {
    let mut start = 0;
    while start < batch.len() {
        let mut end = start + 1;
        while end < batch.len() && batch[end].0.nanos_since(batch[end - 1].0) <= boundary_nanos {
            end += 1;
        }
        batch[start..end].sort_by_key(|(_, thread, _)| *thread);
        start = end;
    }
}

fn lock<'a, T>(m: &'a Mutex<T>, what: &'static str) -> Result<MutexGuard<'a, T>, OplogError> {
    m.lock().map_err(|_| OplogError::Poisoned { what })
}
