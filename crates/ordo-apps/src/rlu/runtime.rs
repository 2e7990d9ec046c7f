//! The RLU runtime: per-thread state, sections, dereference, lock, commit and synchronize.
//! The protocol and its invariants are stated in the module essay of [`crate::rlu`].

#[cfg(loom)]
use loom::sync::Mutex;
use std::num::NonZeroUsize;
#[cfg(not(loom))]
use std::sync::Mutex;
use std::sync::{Arc, PoisonError};

use crossbeam_utils::CachePadded;
use ordo_clock::{Clock, Interval, TimeOrder, Timestamp};

use crate::sync::{AtomicBool, AtomicU64, Ordering, fence};

/// Write clock of a thread that is not committing: nobody steals.
const WC_INF: u64 = u64::MAX;
/// Write clock of a thread that has started to commit but not yet drawn its clock.
const WC_BLOCK: u64 = u64::MAX - 1;
/// Local clock of a thread that announced a section but has not yet published its reading.
const LOCAL_PENDING: u64 = u64::MAX;
/// Raw value of the null node.
const NIL_RAW: u32 = u32::MAX;

/// The address of an RLU object: an index into the runtime's arena.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct NodeId(u32);

impl NodeId {
    /// The null reference (end of a list).
    pub const NIL: NodeId = NodeId(NIL_RAW);

    /// Whether this is [`NodeId::NIL`].
    pub const fn is_nil(self) -> bool {
        self.0 == NIL_RAW
    }

    fn index(self) -> usize {
        self.0 as usize
    }

    fn to_word(self) -> u64 {
        u64::from(self.0)
    }

    fn from_word(w: u64) -> Self {
        // Only words made by `to_word` are ever stored in a `next` field.
        NodeId(u32::try_from(w).unwrap_or(NIL_RAW))
    }
}

/// The contents of an RLU object: a key, a link and one word for the data structure's use.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct NodeValue {
    /// The key (or any word).
    pub key: u64,
    /// The next object.
    pub next: NodeId,
    /// A free word (the hash set keeps its bucket tag here).
    pub aux: u64,
}

impl NodeValue {
    /// A node with `aux = 0`.
    pub const fn new(key: u64, next: NodeId) -> Self {
        NodeValue { key, next, aux: 0 }
    }
}

/// Errors of the RLU runtime.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RluError {
    /// The object is locked by another writer; the section is aborted and retried by
    /// [`RluThread::section`] (never returned from it).
    #[error("object {0:?} is locked by another writer")]
    Conflict(NodeId),
    /// Every node of the arena is in use.
    #[error("the RLU arena is full ({capacity} nodes)")]
    ArenaFull {
        /// Its capacity.
        capacity: usize,
    },
    /// A section locked more objects than one write log holds.
    #[error("a section locked more than {capacity} objects (the write-log capacity)")]
    LogFull {
        /// Slots per log.
        capacity: usize,
    },
    /// More threads than `max_threads` registered at once.
    #[error("more than {max} RLU threads registered at once")]
    TooManyThreads {
        /// The configured maximum.
        max: usize,
    },
    /// `write` or `free` of an object the section has not locked.
    #[error("object {0:?} was written or freed without being locked first")]
    NotLocked(NodeId),
    /// A node id outside the arena.
    #[error("node {0:?} is outside the arena")]
    BadNode(NodeId),
    /// An option out of range.
    #[error("RLU option {name} = {value} is out of range: {expected}")]
    BadOption {
        /// The option.
        name: &'static str,
        /// Its value.
        value: usize,
        /// What is accepted.
        expected: &'static str,
    },
}

/// Sizes of an RLU runtime.
#[derive(Clone, Debug)]
pub struct RluOptions {
    /// Threads that may hold an [`RluThread`] at once (1..=65534).
    pub max_threads: usize,
    /// Nodes in the arena (1..u32::MAX).
    pub capacity_nodes: usize,
    /// Objects one section may lock (1..=32768). With deferral the deferred sections of a
    /// thread share its log: a section that would overflow it commits them first.
    pub log_capacity: usize,
    /// RLU deferral (RLU §3.7): `Some(n)` lets a thread keep the writes of up to `n` writer
    /// sections locked and unpublished, committing them together with one synchronize (see
    /// the module essay). `None` (the default) commits every writer section at its end.
    pub defer_limit: Option<NonZeroUsize>,
    /// Test-only switches that remove protocol steps.
    #[cfg(feature = "shortcuts")]
    pub shortcuts: RluShortcuts,
}

impl Default for RluOptions {
    fn default() -> Self {
        RluOptions {
            max_threads: 64,
            capacity_nodes: 1 << 16,
            log_capacity: 64,
            defer_limit: None,
            #[cfg(feature = "shortcuts")]
            shortcuts: RluShortcuts::default(),
        }
    }
}

impl RluOptions {
    fn validate(&self) -> Result<(), RluError> {
        let check = |name, value: usize, lo: usize, hi: usize, expected| {
            if value < lo || value > hi {
                Err(RluError::BadOption { name, value, expected })
            } else {
                Ok(())
            }
        };
        check("max_threads", self.max_threads, 1, 65_534, "1..=65534")?;
        check("capacity_nodes", self.capacity_nodes, 1, (u32::MAX - 1) as usize, "1..u32::MAX")?;
        check("log_capacity", self.log_capacity, 1, 32_768, "1..=32768")
    }
}

/// Protocol steps a negative test can remove (feature `shortcuts`; never outside tests).
#[cfg(feature = "shortcuts")]
#[derive(Clone, Copy, Debug, Default)]
pub struct RluShortcuts {
    /// Commit with `new_time(w + B)` instead of `new_time(w + 2B)`: without ORDO's extra
    /// boundary (see the module essay, fact 2).
    pub skip_extra_boundary: bool,
    /// Do not announce a commit with the `BLOCK` write clock before reading the clock (see the
    /// module essay, fact 1): a reader may then see one object of the commit as not committing
    /// and steal another.
    pub skip_block: bool,
    /// Return a stolen copy without re-reading the object's header afterwards (see the
    /// module essay, "Objects and memory"): a copy slot reused meanwhile is then returned.
    pub skip_steal_recheck: bool,
    /// Recycle a freed node at once (at [`Section::free`]) instead of after the synchronize
    /// of a later commit: a reader still holding the node then sees its next life.
    pub skip_delayed_free: bool,
    /// With deferral: a writer that finds an object locked by another thread does not ask
    /// that thread to commit its deferred writes (it only retries).
    pub skip_sync_request: bool,
    /// With deferral: never commit because the defer limit is reached (only on a request,
    /// [`RluThread::flush`] or drop).
    pub skip_defer_limit: bool,
    /// Called at each commit step, so a test can script an interleaving.
    pub hook: Option<fn(RluStep)>,
}

/// The commit steps at which [`RluShortcuts::hook`] is called.
#[cfg(feature = "shortcuts")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RluStep {
    /// The writer has read its write clock and is about to publish it.
    ClockRead,
    /// A reader met an object of a commit whose write clock is not yet published and waits.
    ReaderBlocked,
    /// The write clock is drawn and published; the wait until global time passes
    /// `wait_until` comes next.
    ClockDrawn {
        /// The write clock.
        write_clock: Timestamp,
        /// The commit proceeds once the writer's own reading is past this.
        wait_until: Timestamp,
    },
    /// Synchronize is over; write-back comes next.
    BeforeWriteback,
    /// A reader decided to steal another thread's copy and is about to read it.
    Stealing,
}

/// Counters of one thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RluStats {
    /// Sections that ended (read-only or committed).
    pub sections: u64,
    /// Writer sections whose writes were published (with deferral, several per write-back).
    pub commits: u64,
    /// Commits proper: one synchronize and one write-back each (equal to `commits` without
    /// deferral).
    pub write_backs: u64,
    /// Write-backs of deferred writes that another thread asked for (a lock conflict).
    pub sync_requests: u64,
    /// Section attempts aborted on a write-write conflict.
    pub aborts: u64,
    /// Dereferences that returned another writer's copy.
    pub steals: u64,
}

/// An arena node: three data words and the header.
struct Node {
    key: AtomicU64,
    next: AtomicU64,
    aux: AtomicU64,
    /// 0 = unlocked; else owner+1 (16 bits) | log (1 bit) | slot (15 bits) | section (32 bits).
    header: AtomicU64,
}

/// A copy in a write log.
struct CopySlot {
    key: AtomicU64,
    next: AtomicU64,
    aux: AtomicU64,
}

impl Node {
    fn new() -> Self {
        Node {
            key: AtomicU64::new(0),
            next: AtomicU64::new(u64::from(NIL_RAW)),
            aux: AtomicU64::new(0),
            header: AtomicU64::new(0),
        }
    }
}

impl CopySlot {
    fn new() -> Self {
        CopySlot { key: AtomicU64::new(0), next: AtomicU64::new(0), aux: AtomicU64::new(0) }
    }
}

/// The part of a thread's state other threads read.
struct Shared {
    run_cnt: AtomicU64,
    local_clock: AtomicU64,
    write_clock: AtomicU64,
    /// Set by a writer that found an object locked by this thread's deferred writes: commit
    /// them at the next section boundary (RLU's sync request).
    sync_request: AtomicBool,
    /// The section number the next handle of this thread id starts at: section numbers are
    /// never reused by one id, so a header never names a section of an earlier handle.
    next_seq: AtomicU64,
    /// Two logs of `log_capacity` slots each.
    logs: Box<[CopySlot]>,
}

fn header(owner: usize, log: usize, slot: usize, seq: u32) -> u64 {
    ((owner as u64 + 1) << 48) | ((log as u64) << 47) | ((slot as u64) << 32) | u64::from(seq)
}

/// Index of the copy a header names in its owner's `logs`.
fn header_copy_index(h: u64, log_capacity: usize) -> usize {
    (((h >> 47) & 1) as usize) * log_capacity + ((h >> 32) & 0x7FFF) as usize
}

/// The slot a header names (the index of the lock in its owner's `locked`).
fn header_slot(h: u64) -> usize {
    ((h >> 32) & 0x7FFF) as usize
}

fn header_owner(h: u64) -> usize {
    ((h >> 48) as usize).wrapping_sub(1)
}

/// Spin politely: on 2 cores a spinning thread must let the one it waits for run.
#[inline]
fn backoff(spins: &mut u32) {
    #[cfg(loom)]
    {
        let _ = spins;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        *spins += 1;
        if (*spins).is_multiple_of(64) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The RLU runtime: the arena, the clock and every thread's shared state.
pub struct Rlu<C: Clock> {
    clock: C,
    boundary_nanos: u64,
    options: RluOptions,
    threads: Box<[CachePadded<Shared>]>,
    /// One more than the highest thread id ever handed out (synchronize scans below it).
    high_water: AtomicU64,
    free_tids: Mutex<Vec<usize>>,
    arena: Box<[Node]>,
    bump: AtomicU64,
    spill: Mutex<Vec<u32>>,
}

impl<C: Clock> std::fmt::Debug for Rlu<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rlu")
            .field("clock", &self.clock.kind())
            .field("boundary_nanos", &self.boundary_nanos)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<C: Clock> Rlu<C> {
    /// A runtime on `clock` with the given sizes.
    pub fn new(clock: C, options: RluOptions) -> Result<Arc<Self>, RluError> {
        options.validate()?;
        let threads = (0..options.max_threads)
            .map(|_| {
                CachePadded::new(Shared {
                    run_cnt: AtomicU64::new(0),
                    local_clock: AtomicU64::new(LOCAL_PENDING),
                    write_clock: AtomicU64::new(WC_INF),
                    sync_request: AtomicBool::new(false),
                    next_seq: AtomicU64::new(0),
                    logs: (0..2 * options.log_capacity).map(|_| CopySlot::new()).collect(),
                })
            })
            .collect();
        let arena = (0..options.capacity_nodes).map(|_| Node::new()).collect();
        Ok(Arc::new(Rlu {
            boundary_nanos: clock.boundary_nanos(),
            clock,
            options,
            threads,
            high_water: AtomicU64::new(0),
            free_tids: Mutex::new(Vec::new()),
            arena,
            bump: AtomicU64::new(0),
            spill: Mutex::new(Vec::new()),
        }))
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The options.
    pub fn options(&self) -> &RluOptions {
        &self.options
    }

    /// Registers the calling thread: a handle for running sections.
    pub fn thread(self: &Arc<Self>) -> Result<RluThread<C>, RluError> {
        let reused = self.free_tids.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let tid = match reused {
            Some(t) => t,
            None => {
                // SeqCst: precedes the thread's first announcement fence, so a committer whose
                // snapshot fence comes later scans this id (fence-to-fence ordering).
                let t = self.high_water.fetch_add(1, Ordering::SeqCst) as usize;
                if t >= self.options.max_threads {
                    self.high_water.fetch_sub(1, Ordering::SeqCst);
                    return Err(RluError::TooManyThreads { max: self.options.max_threads });
                }
                t
            }
        };
        let run = self.threads[tid].run_cnt.load(Ordering::Acquire);
        // Relaxed: the id was handed over through the `free_tids` mutex.
        let seq = self.threads[tid].next_seq.load(Ordering::Relaxed) as u32;
        Ok(RluThread {
            rlu: Arc::clone(self),
            tid,
            run,
            local: Timestamp::ZERO,
            log: 0,
            seq,
            locked: Vec::new(),
            section_mark: 0,
            deferred: 0,
            flush_needed: false,
            allocated: Vec::new(),
            freed: Vec::new(),
            freed_mark: 0,
            pending_free: Vec::new(),
            free_list: Vec::new(),
            snapshot: Vec::new(),
            stats: RluStats::default(),
        })
    }

    /// Nodes handed out by the bump allocator so far (a high-water mark of the arena).
    pub fn nodes_touched(&self) -> usize {
        (self.bump.load(Ordering::Relaxed) as usize).min(self.options.capacity_nodes)
    }

    fn node(&self, id: NodeId) -> Result<&Node, RluError> {
        self.arena.get(id.index()).ok_or(RluError::BadNode(id))
    }

    /// `cmp_time(reading(a), reading(b)) == After`, both read as `[t, t + B]`.
    fn certainly_after(&self, a: u64, b: u64) -> bool {
        let ia = Interval::with_width(Timestamp::from_nanos(a), self.boundary_nanos);
        let ib = Interval::with_width(Timestamp::from_nanos(b), self.boundary_nanos);
        ia.cmp_time(ib) == TimeOrder::After
    }

    /// Reads a node's original fields.
    fn read_original(node: &Node) -> NodeValue {
        // Acquire: pairs with the Release header store after write-back in `commit`.
        NodeValue {
            key: node.key.load(Ordering::Acquire),
            next: NodeId::from_word(node.next.load(Ordering::Acquire)),
            aux: node.aux.load(Ordering::Acquire),
        }
    }

    fn read_copy(slot: &CopySlot) -> NodeValue {
        // Acquire: pairs with the SeqCst write-clock store that published the copy.
        NodeValue {
            key: slot.key.load(Ordering::Acquire),
            next: NodeId::from_word(slot.next.load(Ordering::Acquire)),
            aux: slot.aux.load(Ordering::Acquire),
        }
    }
}

/// One thread's handle: runs sections. Dropping it commits its deferred writes, waits for a
/// grace period and returns its freed nodes and its thread id.
pub struct RluThread<C: Clock> {
    rlu: Arc<Rlu<C>>,
    tid: usize,
    /// This thread's run count (odd while in a section).
    run: u64,
    /// The local clock of the current section.
    local: Timestamp,
    /// Which log (0 or 1) this section copies into.
    log: usize,
    /// Section number, part of every header this thread writes.
    seq: u32,
    /// (node, slot) locked and not yet written back: by the deferred sections, then by this
    /// one from `section_mark` on (the slot is the index in this vector).
    locked: Vec<(NodeId, usize)>,
    /// Locks of the deferred sections: `locked[..section_mark]`.
    section_mark: usize,
    /// Writer sections ended but not yet committed (deferral).
    deferred: usize,
    /// This thread needs its deferred writes committed before the next attempt (it met its
    /// own deferred lock, or its log is full).
    flush_needed: bool,
    /// Nodes allocated in this section (returned on abort).
    allocated: Vec<NodeId>,
    /// Nodes freed by the deferred sections and this one (recycled after the next
    /// synchronize but one).
    freed: Vec<NodeId>,
    /// Frees of the deferred sections: `freed[..freed_mark]`.
    freed_mark: usize,
    /// Nodes freed by the last commit, waiting for one more synchronize.
    pending_free: Vec<NodeId>,
    free_list: Vec<u32>,
    snapshot: Vec<u64>,
    stats: RluStats,
}

impl<C: Clock> std::fmt::Debug for RluThread<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RluThread").field("tid", &self.tid).field("stats", &self.stats).finish()
    }
}

/// An RLU section in progress (reader or writer), given to the closure of
/// [`RluThread::section`].
pub struct Section<'t, C: Clock> {
    thread: &'t mut RluThread<C>,
}

impl<C: Clock> RluThread<C> {
    /// This thread's id.
    pub fn id(&self) -> usize {
        self.tid
    }

    /// The runtime.
    pub fn rlu(&self) -> &Arc<Rlu<C>> {
        &self.rlu
    }

    /// Counters so far.
    pub fn stats(&self) -> RluStats {
        self.stats
    }

    /// Runs `body` as an RLU section: a consistent snapshot for reads, and atomic, isolated
    /// writes committed at its end. A write-write conflict aborts the attempt and reruns `body`;
    /// any other error aborts and is returned.
    pub fn section<R>(
        &mut self,
        mut body: impl FnMut(&mut Section<'_, C>) -> Result<R, RluError>,
    ) -> Result<R, RluError> {
        let mut spins = 0u32;
        loop {
            self.sync_checkpoint();
            self.reader_lock();
            let out = body(&mut Section { thread: self });
            match out {
                Ok(r) => {
                    self.reader_unlock();
                    return Ok(r);
                }
                Err(RluError::Conflict(_)) if self.flush_needed => {
                    // Not a conflict with another thread: this thread's own deferred writes
                    // must be committed first (the checkpoint above does it).
                    self.abort();
                }
                Err(RluError::Conflict(_)) => {
                    self.abort();
                    self.stats.aborts += 1;
                    for _ in 0..16 {
                        backoff(&mut spins);
                    }
                }
                Err(e) => {
                    self.abort();
                    return Err(e);
                }
            }
        }
    }

    fn me(&self) -> &Shared {
        &self.rlu.threads[self.tid]
    }

    /// Writer sections that ended but whose writes are not yet published (deferral; always 0
    /// without it). Other threads see these writes only after the commit that publishes them.
    pub fn deferred_sections(&self) -> usize {
        self.deferred
    }

    /// Commits the deferred writes now (one synchronize and write-back); nothing to do when
    /// none are pending. Call it before a thread goes idle: until it commits, its deferred
    /// locks make conflicting writers retry, and it honours their requests only at its own
    /// section boundaries.
    pub fn flush(&mut self) {
        if self.deferred > 0 {
            self.commit();
        }
        self.flush_needed = false;
    }

    /// RLU's sync checkpoint, outside any section: commit the deferred writes when another
    /// thread asked for them or this thread needs them out of its log.
    fn sync_checkpoint(&mut self) {
        let me = &self.rlu.threads[self.tid];
        // Relaxed: a request is a hint; the requester retries (and asks again) until the lock
        // it wants is released, which is published by the Release header stores of `commit`.
        let requested =
            self.rlu.options.defer_limit.is_some() && me.sync_request.load(Ordering::Relaxed);
        if requested {
            me.sync_request.store(false, Ordering::Relaxed);
        }
        if self.deferred > 0 && (requested || self.flush_needed) {
            if requested {
                self.stats.sync_requests += 1;
            }
            self.commit();
        }
        self.flush_needed = false;
    }

    /// Asks thread `owner`, whose lock this thread ran into, to commit its deferred writes.
    fn request_sync(&self, owner: usize) {
        if self.rlu.options.defer_limit.is_none() {
            return;
        }
        #[cfg(feature = "shortcuts")]
        if self.rlu.options.shortcuts.skip_sync_request {
            return;
        }
        if let Some(other) = self.rlu.threads.get(owner) {
            // Relaxed: see `sync_checkpoint`. Load first: no cache-line write when already set.
            if !other.sync_request.load(Ordering::Relaxed) {
                other.sync_request.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Fig. 7 `rlu_reader_lock`.
    fn reader_lock(&mut self) {
        let me = &self.rlu.threads[self.tid];
        // Relaxed: published by the Release run-count store below; a committer that sees the
        // new run count sees PENDING or the new reading, never the previous section's clock.
        me.local_clock.store(LOCAL_PENDING, Ordering::Relaxed);
        self.run += 1;
        // Release: pairs with the Acquire/SeqCst run-count loads in `synchronize`.
        me.run_cnt.store(self.run, Ordering::Release);
        // SeqCst fence (F_r): orders the announcement before the clock reading (essay, fact 2).
        fence(Ordering::SeqCst);
        let r = self.rlu.clock.now().lo();
        self.local = r;
        // SeqCst: pairs with the loads of `synchronize`.
        me.local_clock.store(r.as_nanos(), Ordering::SeqCst);
        // SeqCst fence (F_r2): every later load of a write clock comes after it (essay, fact 1).
        fence(Ordering::SeqCst);
    }

    /// Fig. 7 `rlu_reader_unlock`: leave the section, then commit if anything was locked.
    fn reader_unlock(&mut self) {
        self.run += 1;
        // Release: every read of the section happens before a committer sees it quiescent.
        self.me().run_cnt.store(self.run, Ordering::Release);
        self.stats.sections += 1;
        if self.locked.len() == self.section_mark {
            // A read-only section may still have allocated (and not linked) nodes: return them.
            let allocated = std::mem::take(&mut self.allocated);
            self.free_list.extend(allocated.iter().map(|n| n.0));
            self.freed.truncate(self.freed_mark);
            // RLU's checkpoint at the end of a reader section: answer a request promptly.
            self.sync_checkpoint();
            return;
        }
        // A writer section: its allocations are now linked from its copies.
        self.allocated.clear();
        self.deferred += 1;
        self.section_mark = self.locked.len();
        self.freed_mark = self.freed.len();
        let Some(limit) = self.rlu.options.defer_limit else {
            self.commit();
            return;
        };
        #[cfg(feature = "shortcuts")]
        let limit_reached =
            self.deferred >= limit.get() && !self.rlu.options.shortcuts.skip_defer_limit;
        #[cfg(not(feature = "shortcuts"))]
        let limit_reached = self.deferred >= limit.get();
        if limit_reached {
            self.commit();
        } else {
            self.sync_checkpoint();
        }
    }

    /// Ends an aborted section: unlock its own locks without write-back (the deferred
    /// sections keep theirs); nothing was published.
    fn abort(&mut self) {
        for (node, _) in self.locked.drain(self.section_mark..) {
            if let Ok(n) = self.rlu.node(node) {
                // Release: pairs with the Acquire header loads of readers and lockers.
                n.header.store(0, Ordering::Release);
            }
        }
        let allocated = std::mem::take(&mut self.allocated);
        self.free_list.extend(allocated.iter().map(|n| n.0));
        self.freed.truncate(self.freed_mark);
        self.seq = self.seq.wrapping_add(1);
        self.run += 1;
        // Release: as in `reader_unlock`.
        self.me().run_cnt.store(self.run, Ordering::Release);
    }

    /// Fig. 7 `rlu_commit_write_log` (RLU's `rlu_sync_and_writeback` with deferral): commits
    /// the writes of every deferred section and of the one that just ended, outside any
    /// section.
    fn commit(&mut self) {
        let rlu = Arc::clone(&self.rlu);
        let me = &rlu.threads[self.tid];
        let b = rlu.boundary_nanos;
        #[cfg(feature = "shortcuts")]
        let shortcuts = rlu.options.shortcuts;
        #[cfg(feature = "shortcuts")]
        let margin = if shortcuts.skip_extra_boundary { b } else { b.saturating_mul(2) };
        #[cfg(not(feature = "shortcuts"))]
        let margin = b.saturating_mul(2);

        #[cfg(feature = "shortcuts")]
        let block = !shortcuts.skip_block;
        #[cfg(not(feature = "shortcuts"))]
        let block = true;
        if block {
            // SeqCst: readers fenced after the next fence see BLOCK (essay, fact 1).
            me.write_clock.store(WC_BLOCK, Ordering::SeqCst);
        }
        fence(Ordering::SeqCst);
        let w = rlu.clock.now().lo().as_nanos();
        #[cfg(feature = "shortcuts")]
        if let Some(hook) = shortcuts.hook {
            hook(RluStep::ClockRead);
        }
        // SeqCst: publishes the copies (written before) to stealing readers.
        me.write_clock.store(w, Ordering::SeqCst);
        // new_time(w + 2B): wait until global time is past w + 2B. A clock with a boundary runs
        // by itself: spin until our own reading is past the target (ORDO `new_time`). An exact
        // clock (the logical counter) must be advanced: `get_ts` until it returns more than
        // the target (one `fetch_add`, as in the original RLU).
        let target = w.saturating_add(margin);
        #[cfg(feature = "shortcuts")]
        if let Some(hook) = shortcuts.hook {
            hook(RluStep::ClockDrawn {
                write_clock: Timestamp::from_nanos(w),
                wait_until: Timestamp::from_nanos(target),
            });
        }
        let mut spins = 0u32;
        if b == 0 {
            while rlu.clock.get_ts().as_nanos() <= target {}
        } else {
            while rlu.clock.now().lo().as_nanos() <= target {
                backoff(&mut spins);
            }
        }
        self.synchronize(w);
        #[cfg(feature = "shortcuts")]
        if let Some(hook) = shortcuts.hook {
            hook(RluStep::BeforeWriteback);
        }
        for &(node, slot) in &self.locked {
            let (Ok(n), Some(c)) =
                (rlu.node(node), me.logs.get(self.log * rlu.options.log_capacity + slot))
            else {
                continue;
            };
            // Relaxed: published by the Release header store below.
            n.key.store(c.key.load(Ordering::Relaxed), Ordering::Relaxed);
            n.next.store(c.next.load(Ordering::Relaxed), Ordering::Relaxed);
            n.aux.store(c.aux.load(Ordering::Relaxed), Ordering::Relaxed);
            // Release: pairs with the Acquire header loads in `deref` and `try_lock`.
            n.header.store(0, Ordering::Release);
        }
        self.locked.clear();
        self.section_mark = 0;
        // Release: pairs with the Acquire write-clock loads of readers.
        me.write_clock.store(WC_INF, Ordering::Release);
        self.log ^= 1;
        self.seq = self.seq.wrapping_add(1);
        self.allocated.clear();
        // Nodes freed by the previous commit have now seen one more synchronize.
        let ready = std::mem::replace(&mut self.pending_free, std::mem::take(&mut self.freed));
        self.freed_mark = 0;
        self.free_list.extend(ready.iter().map(|n| n.0));
        self.spill_if_large();
        self.stats.commits += self.deferred as u64;
        self.stats.write_backs += 1;
        self.deferred = 0;
    }

    /// Fig. 7 `rlu_synchronize`: wait for readers active at the snapshot that did not start
    /// certainly after `w`.
    fn synchronize(&mut self, w: u64) {
        let rlu = Arc::clone(&self.rlu);
        // SeqCst (with the fence): the snapshot comes after the wait for new_time.
        fence(Ordering::SeqCst);
        let n = (rlu.high_water.load(Ordering::SeqCst) as usize).min(rlu.threads.len());
        self.snapshot.clear();
        self.snapshot.extend(rlu.threads[..n].iter().map(|t| t.run_cnt.load(Ordering::SeqCst)));
        for (t, &snap) in self.snapshot.iter().enumerate() {
            if t == self.tid || snap % 2 == 0 {
                continue;
            }
            let other = &rlu.threads[t];
            let mut spins = 0u32;
            loop {
                // Acquire: pairs with the Release run-count stores of reader_unlock.
                if other.run_cnt.load(Ordering::Acquire) != snap {
                    break;
                }
                let l = other.local_clock.load(Ordering::SeqCst);
                if l != LOCAL_PENDING && rlu.certainly_after(l, w) {
                    break;
                }
                backoff(&mut spins);
            }
        }
    }

    /// A full grace period: waits for every section active now to end.
    fn quiesce(&mut self) {
        let rlu = Arc::clone(&self.rlu);
        fence(Ordering::SeqCst);
        let n = (rlu.high_water.load(Ordering::SeqCst) as usize).min(rlu.threads.len());
        for t in 0..n {
            if t == self.tid {
                continue;
            }
            let other = &rlu.threads[t];
            let snap = other.run_cnt.load(Ordering::SeqCst);
            let mut spins = 0u32;
            while snap % 2 == 1 && other.run_cnt.load(Ordering::Acquire) == snap {
                backoff(&mut spins);
            }
        }
    }

    fn spill_if_large(&mut self) {
        if self.free_list.len() > 8192 {
            let half = self.free_list.split_off(4096);
            self.rlu.spill.lock().unwrap_or_else(PoisonError::into_inner).extend(half);
        }
    }

    fn take_free_node(&mut self) -> Result<NodeId, RluError> {
        if let Some(i) = self.free_list.pop() {
            return Ok(NodeId(i));
        }
        let cap = self.rlu.options.capacity_nodes;
        // Relaxed: the counter only hands out distinct indices.
        let i = self.rlu.bump.fetch_add(1, Ordering::Relaxed) as usize;
        if i < cap {
            return Ok(NodeId(i as u32));
        }
        let mut spill = self.rlu.spill.lock().unwrap_or_else(PoisonError::into_inner);
        let keep = spill.len().saturating_sub(1024);
        self.free_list.extend(spill.drain(keep..));
        drop(spill);
        self.free_list.pop().map(NodeId).ok_or(RluError::ArenaFull { capacity: cap })
    }

    /// Allocates a node outside any section (to build the initial structure before sharing).
    pub fn alloc_unshared(&mut self, value: NodeValue) -> Result<NodeId, RluError> {
        let id = self.take_free_node()?;
        let n = self.rlu.node(id)?;
        store_fields(n, value);
        Ok(id)
    }
}

fn store_fields(n: &Node, v: NodeValue) {
    // Release: a reader that reaches the node through a published link sees its fields.
    n.key.store(v.key, Ordering::Release);
    n.next.store(v.next.to_word(), Ordering::Release);
    n.aux.store(v.aux, Ordering::Release);
    // Release: as above.
    n.header.store(0, Ordering::Release);
}

impl<C: Clock> Drop for RluThread<C> {
    fn drop(&mut self) {
        // Deferred writes are committed: their locks must not outlive the handle.
        self.flush();
        // Freed nodes may still be read by sections that started before the last commit.
        if !self.pending_free.is_empty() || !self.freed.is_empty() {
            self.quiesce();
        }
        let mut spill = self.rlu.spill.lock().unwrap_or_else(PoisonError::into_inner);
        spill.extend(self.pending_free.drain(..).map(|n| n.0));
        spill.extend(self.freed.drain(..).map(|n| n.0));
        spill.append(&mut self.free_list);
        drop(spill);
        // Relaxed: the id is handed over through the `free_tids` mutex.
        self.me().next_seq.store(u64::from(self.seq.wrapping_add(1)), Ordering::Relaxed);
        self.rlu.free_tids.lock().unwrap_or_else(PoisonError::into_inner).push(self.tid);
    }
}

impl<C: Clock> Section<'_, C> {
    /// The local clock of this section.
    pub fn local_clock(&self) -> Timestamp {
        self.thread.local
    }

    /// Fig. 7 `rlu_dereference`: the value of `id` in this section's snapshot.
    pub fn deref(&mut self, id: NodeId) -> Result<NodeValue, RluError> {
        let t = &mut *self.thread;
        let rlu = &*t.rlu;
        let node = rlu.node(id)?;
        let cap = rlu.options.log_capacity;
        let mut spins = 0u32;
        loop {
            // Acquire: pairs with the lock CAS (AcqRel) and the unlocking Release stores.
            let h = node.header.load(Ordering::Acquire);
            if h == 0 {
                return Ok(Rlu::<C>::read_original(node));
            }
            let owner = header_owner(h);
            let Some(other) = rlu.threads.get(owner) else {
                return Err(RluError::BadNode(id));
            };
            if owner == t.tid {
                let c = other.logs.get(header_copy_index(h, cap)).ok_or(RluError::BadNode(id))?;
                return Ok(Rlu::<C>::read_copy(c));
            }
            // Acquire: pairs with the SeqCst publication of the write clock in `commit`.
            let wc = other.write_clock.load(Ordering::Acquire);
            if wc == WC_BLOCK {
                #[cfg(feature = "shortcuts")]
                if spins == 0
                    && let Some(hook) = rlu.options.shortcuts.hook
                {
                    hook(super::RluStep::ReaderBlocked);
                }
                backoff(&mut spins);
                continue;
            }
            if wc == WC_INF || !rlu.certainly_after(t.local.as_nanos(), wc) {
                // Not committing, or committing but not certainly before us: the original.
                // The owner's synchronize waits for this section before writing back.
                if node.header.load(Ordering::Acquire) == h {
                    return Ok(Rlu::<C>::read_original(node));
                }
                continue;
            }
            // Steal: read the copy, then check the lock is still this section's (the header
            // carries the section number, so an equal header means the same lock).
            #[cfg(feature = "shortcuts")]
            if let Some(hook) = rlu.options.shortcuts.hook {
                hook(super::RluStep::Stealing);
            }
            let c = other.logs.get(header_copy_index(h, cap)).ok_or(RluError::BadNode(id))?;
            let v = Rlu::<C>::read_copy(c);
            #[cfg(feature = "shortcuts")]
            if rlu.options.shortcuts.skip_steal_recheck {
                t.stats.steals += 1;
                return Ok(v);
            }
            // Acquire: orders the copy reads before the re-check.
            if node.header.load(Ordering::Acquire) == h {
                t.stats.steals += 1;
                return Ok(v);
            }
        }
    }

    /// Locks `id` for writing: copies it into this thread's log. Fails with
    /// [`RluError::Conflict`] when another writer holds it (the section is then retried).
    pub fn try_lock(&mut self, id: NodeId) -> Result<(), RluError> {
        let t = &mut *self.thread;
        let rlu = Arc::clone(&t.rlu);
        let node = rlu.node(id)?;
        let h = node.header.load(Ordering::Acquire);
        let cap = rlu.options.log_capacity;
        if h != 0 {
            if header_owner(h) != t.tid {
                t.request_sync(header_owner(h));
                return Err(RluError::Conflict(id));
            }
            if header_slot(h) >= t.section_mark {
                return Ok(());
            }
            // Locked by a deferred section of this thread, whose copy is not this section's
            // to change (an abort could not undo it): commit the deferred writes and retry,
            // as RLU does.
            t.flush_needed = true;
            return Err(RluError::Conflict(id));
        }
        let slot = t.locked.len();
        if slot >= cap {
            if t.section_mark > 0 {
                // The deferred sections fill the log: commit them and retry.
                t.flush_needed = true;
                return Err(RluError::Conflict(id));
            }
            return Err(RluError::LogFull { capacity: cap });
        }
        let mine = header(t.tid, t.log, slot, t.seq);
        // AcqRel: the Acquire side sees the last write-back; the Release side publishes the lock.
        if let Err(now) = node.header.compare_exchange(0, mine, Ordering::AcqRel, Ordering::Acquire)
        {
            t.request_sync(header_owner(now));
            return Err(RluError::Conflict(id));
        }
        let v = Rlu::<C>::read_original(node);
        let me = &rlu.threads[t.tid];
        let c = &me.logs[t.log * cap + slot];
        // Relaxed: published by the SeqCst write-clock store at commit.
        c.key.store(v.key, Ordering::Relaxed);
        c.next.store(v.next.to_word(), Ordering::Relaxed);
        c.aux.store(v.aux, Ordering::Relaxed);
        t.locked.push((id, slot));
        Ok(())
    }

    /// Sets the copy of an object this section locked.
    pub fn write(&mut self, id: NodeId, value: NodeValue) -> Result<(), RluError> {
        let t = &mut *self.thread;
        let Some(&(_, slot)) = t.locked[t.section_mark..].iter().find(|(n, _)| *n == id) else {
            return Err(RluError::NotLocked(id));
        };
        let c = &t.rlu.threads[t.tid].logs[t.log * t.rlu.options.log_capacity + slot];
        // Relaxed: published by the SeqCst write-clock store at commit.
        c.key.store(value.key, Ordering::Relaxed);
        c.next.store(value.next.to_word(), Ordering::Relaxed);
        c.aux.store(value.aux, Ordering::Relaxed);
        Ok(())
    }

    /// A new node holding `value`; others see it once a committed link points to it.
    pub fn alloc(&mut self, value: NodeValue) -> Result<NodeId, RluError> {
        let id = self.thread.take_free_node()?;
        store_fields(self.thread.rlu.node(id)?, value);
        self.thread.allocated.push(id);
        Ok(id)
    }

    /// Frees a node this section locked and unlinked; it is recycled after the commit that
    /// publishes the unlinking and one more commit of this thread (each with its synchronize),
    /// or a grace period when the handle is dropped.
    pub fn free(&mut self, id: NodeId) -> Result<(), RluError> {
        let t = &mut *self.thread;
        if !t.locked[t.section_mark..].iter().any(|(n, _)| *n == id) {
            return Err(RluError::NotLocked(id));
        }
        #[cfg(feature = "shortcuts")]
        if t.rlu.options.shortcuts.skip_delayed_free {
            t.free_list.push(id.0);
            return Ok(());
        }
        t.freed.push(id);
        Ok(())
    }
}
