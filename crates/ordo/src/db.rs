//! The embedded database handle: configuration, transactions with retry, statistics.
//!
//! The handle is the top of the engine's layers (see the crate docs): it opens the heap (and
//! the durable layer under it), builds the transaction layer's `Engine` — the state every
//! transaction shares — and owns it, with the configuration and the serving tables of
//! [`crate::remote`], in one `Shared` behind an `Arc`. A transaction borrows only the engine,
//! so nothing below names this module. The `serve_*` family of a cluster member is defined here
//! too, in `db/serve.rs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use ordo_clock::Clock;

mod serve;

use crate::addr::Addr;
use crate::error::{AbortKind, Error};
use crate::gc::GcRound;
use crate::heap::{Heap, HeapConfig};
use crate::mvcc::{BudgetPolicy, VersionArena, VersionStats};
use crate::txn::engine::Engine;
use crate::txn::participant::{LocalParticipant, LocalScratch, Remote};
use crate::txn::worker::{self, SlotHome, Worker};
use crate::txn::{Options, Tx};

/// The most threads that may run transactions on one database at once, by default.
pub const THREADS_MAX_DEFAULT: usize = 256;

/// Whether old versions are kept (FaRMv2 §4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Versions {
    /// Only head versions: a read of an object newer than the read timestamp aborts. Fastest
    /// when transactions are short (FaRMv2 runs TPC-C this way).
    #[default]
    Single,
    /// Old versions are kept, so long read-only transactions and stale snapshots succeed.
    Multi,
}

impl std::str::FromStr for Versions {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "single" => Ok(Versions::Single),
            "multi" => Ok(Versions::Multi),
            _ => {
                Err(Error::Config(format!("unknown versions mode {s:?}; expected single or multi")))
            }
        }
    }
}

/// Microseconds between background GC rounds, by default.
pub const GC_INTERVAL_US_DEFAULT: u64 = 1_000;

/// Old-version blocks (1 MiB each) a database may use, by default (1 GiB).
pub const VERSION_BLOCKS_MAX_DEFAULT: usize = 1024;

/// How a database is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Heap geometry and limits.
    pub heap: HeapConfig,
    /// Single- or multi-version.
    pub versions: Versions,
    /// The most 1 MiB old-version blocks (multi-version mode).
    pub version_blocks_max: usize,
    /// What a commit does when old-version memory is exhausted.
    pub version_budget: BudgetPolicy,
    /// Microseconds between background GC rounds; 0 runs no background thread (call
    /// [`Ordo::collect_garbage`]).
    pub gc_interval_us: u64,
    /// The most threads that may hold a transaction slot at once.
    pub threads_max: usize,
    /// Options used by [`Ordo::run`] and [`Ordo::begin`].
    pub options: Options,
    /// Durability (DESIGN §5): `None` keeps everything in memory.
    pub durability: Option<crate::durable::DurableConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            heap: HeapConfig::default(),
            versions: Versions::default(),
            version_blocks_max: VERSION_BLOCKS_MAX_DEFAULT,
            version_budget: BudgetPolicy::default(),
            gc_interval_us: GC_INTERVAL_US_DEFAULT,
            threads_max: THREADS_MAX_DEFAULT,
            options: Options::default(),
            durability: None,
        }
    }
}

impl Config {
    /// The default configuration, durable in `dir` with `mode`.
    pub fn durable(dir: impl Into<std::path::PathBuf>, mode: crate::durable::Mode) -> Self {
        Config {
            durability: Some(crate::durable::DurableConfig::new(dir, mode)),
            ..Config::default()
        }
    }
}

/// Counters summed over every thread that ran transactions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Committed read-write transactions.
    pub commits: u64,
    /// Committed read-only transactions.
    pub read_only_commits: u64,
    /// Aborted attempts by reason, in [`AbortKind::ALL`] order.
    pub aborts: [u64; AbortKind::ALL.len()],
    /// Total nanoseconds commits spent waiting out write-timestamp uncertainty.
    pub write_wait_ns: u64,
    /// Times a strictly serializable attempt moved its read timestamp forward instead of
    /// aborting on a newer version (see [`crate::Tx`]'s module docs, "Extension").
    pub extensions: u64,
    /// Rereads of an object found locked, before the read succeeded or aborted.
    pub locked_read_waits: u64,
}

impl Stats {
    /// Aborts of one kind.
    pub fn aborts_of(&self, kind: AbortKind) -> u64 {
        let i = AbortKind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
        self.aborts[i]
    }
    /// All aborts.
    pub fn aborts_total(&self) -> u64 {
        self.aborts.iter().sum()
    }
}

/// A database's state: the [`Engine`] its transactions share, and what only the handle needs —
/// the configuration it was opened with and what it serves to remote coordinators. Derefs to
/// the engine.
pub(crate) struct Shared<C> {
    pub(crate) engine: Engine<C>,
    pub(crate) config: Config,
    /// What this database serves to remote coordinators, in a cluster.
    pub(crate) serve: crate::remote::ServeState,
}

impl<C> std::ops::Deref for Shared<C> {
    type Target = Engine<C>;
    fn deref(&self) -> &Engine<C> {
        &self.engine
    }
}

impl<C: Clock> SlotHome for Shared<C> {
    fn release_worker(&self, worker: &mut Worker) {
        self.engine.release_worker(worker);
    }
}

static NEXT_DB_ID: AtomicU64 = AtomicU64::new(1);

/// An embedded Ordo database, generic over its clock. Cheap to clone; clones share the database.
///
/// ```
/// use ordo::{Ordo, Config};
/// use ordo_clock::LogicalClock;
///
/// let db = Ordo::with_clock(Config::default(), LogicalClock::new())?;
/// let counter = db.run(|tx| tx.alloc(&0u64))?;
/// let n = db.run(|tx| {
///     let v: u64 = tx.read(counter)?;
///     tx.write(counter, &(v + 1))?;
///     Ok::<_, ordo::Error>(v + 1)
/// })?;
/// assert_eq!(n, 1);
/// # Ok::<(), ordo::Error>(())
/// ```
pub struct Ordo<C: Clock> {
    shared: Arc<Shared<C>>,
}

impl<C: Clock> Clone for Ordo<C> {
    fn clone(&self) -> Self {
        Ordo { shared: self.shared.clone() }
    }
}

impl<C: Clock> Ordo<C> {
    /// Opens an in-memory database whose transactions are ordered by `clock`.
    pub fn with_clock(config: Config, clock: C) -> Result<Self, Error> {
        Self::with_clock_scanned(config, clock, None)
    }

    /// Opens a database that is one member (or a client) of a cluster: regions in `home` are
    /// this process's primaries, and allocation opens only them; every other region is reached
    /// through `remote` (see [`crate::remote`]). A client passes no home regions.
    ///
    /// With `config.durability`, the member logs every part it backs up (COMMIT-BACKUP) to its
    /// durable log before acknowledging it, as FaRM's backups do; a primary does not log (its
    /// backups hold the transaction). Reopening the directory recovers the regions it backed
    /// up; rejoining a cluster from it is recovery's (Cluster III).
    pub fn with_remote(
        config: Config,
        clock: C,
        remote: Arc<dyn Remote>,
        home: Vec<u16>,
    ) -> Result<Self, Error> {
        if let Some(d) = &config.durability {
            crate::durable::mark_member(d)?;
        }
        let db = Self::with_parts(config, clock, None, Some(remote))?;
        db.shared.heap.set_home_regions(home);
        // No GC until the cluster's OAT says how far it may go (FaRMv2 Fig. 9).
        db.shared.gc.set_bound(ordo_clock::Timestamp::ZERO);
        Ok(db)
    }

    /// [`Ordo::with_clock`], reusing a scan of the durable directory made just before.
    fn with_clock_scanned(
        config: Config,
        clock: C,
        scanned: Option<crate::durable::recovery::Scan>,
    ) -> Result<Self, Error> {
        Self::with_parts(config, clock, scanned, None)
    }

    fn with_parts(
        config: Config,
        clock: C,
        scanned: Option<crate::durable::recovery::Scan>,
        remote: Option<Arc<dyn Remote>>,
    ) -> Result<Self, Error> {
        if config.threads_max == 0 {
            return Err(Error::Config("threads_max must be at least 1".into()));
        }
        if config.versions == Versions::Multi && config.version_blocks_max == 0 {
            return Err(Error::Config(
                "version_blocks_max = 0 leaves multi-version mode no old-version memory".into(),
            ));
        }
        if config.options.retries_max == 0 {
            return Err(Error::Config("options.retries_max must be at least 1".into()));
        }
        let threads_max = config.threads_max;
        let (heap, durable) = match &config.durability {
            None => (Heap::new(config.heap)?, None),
            Some(d) => {
                config.heap.check()?;
                let (durable, files, regions) =
                    crate::durable::open(d, config.heap.region_bytes, threads_max, scanned)?;
                // A cluster member's clock is disabled until its first sync with the CM, which
                // needs the node running: the check is recovery's when a member rejoins
                // (Cluster III), not this open's.
                let now = if remote.is_some() { u64::MAX } else { clock.now().lo().as_nanos() };
                if now < durable.report.recovered_ts {
                    return Err(crate::durable::DurableError::ClockBehind {
                        recovered: durable.report.recovered_ts,
                        now,
                    }
                    .into());
                }
                (Heap::durable(config.heap, files, regions)?, Some(durable))
            }
        };
        let versions = match config.versions {
            Versions::Single => None,
            Versions::Multi => Some(VersionArena::new(
                config.version_blocks_max,
                config.version_budget,
                config.heap.huge_pages,
            )),
        };
        let id = NEXT_DB_ID.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new_cyclic(|weak: &Weak<Shared<C>>| Shared {
            engine: Engine::new(
                id,
                clock,
                heap,
                versions,
                durable,
                remote,
                threads_max,
                weak.clone() as Weak<dyn SlotHome>,
            ),
            config,
            serve: Default::default(),
        });
        if shared.config.gc_interval_us > 0 {
            spawn_gc(Arc::downgrade(&shared))?;
        }
        if let Some(d) = &shared.config.durability
            && d.checkpoint_interval_ms > 0
        {
            spawn_checkpointer(Arc::downgrade(&shared), d.checkpoint_interval_ms)?;
        }
        Ok(Ordo { shared })
    }

    /// Opens a durable database (`config.durability` must be set), building its clock from the
    /// newest recovered timestamp: the clock must start past it (for [`ordo_clock::LogicalClock`],
    /// `LogicalClock::starting_at(ts)`).
    pub fn open_durable(
        config: Config,
        make_clock: impl FnOnce(ordo_clock::Timestamp) -> C,
    ) -> Result<Self, Error> {
        let Some(d) = &config.durability else {
            return Err(Error::Config("open_durable needs config.durability".into()));
        };
        let (ts, scanned) = match crate::durable::prescan(
            &*d.storage,
            &d.dir,
            d.replay_threads.max(1),
            d.segment_bytes_max,
            true,
            true,
        ) {
            Ok(scan) => (scan.report().recovered_ts, Some(scan)),
            Err(crate::durable::DurableError::NoDatabase { .. }) => (0, None),
            Err(e) => return Err(e.into()),
        };
        Self::with_clock_scanned(config, make_clock(ordo_clock::Timestamp::from_nanos(ts)), scanned)
    }

    /// The shared state (the crate's unit tests, the serving side of `crate::remote`).
    pub(crate) fn shared(&self) -> &Shared<C> {
        &self.shared
    }

    /// What recovery found when this durable database was opened (`None` in memory).
    pub fn recovery_report(&self) -> Option<&crate::durable::RecoveryReport> {
        self.shared.durable.as_ref().map(|d| &d.report)
    }

    /// Durable-log counters (`None` in memory).
    pub fn durable_stats(&self) -> Option<crate::durable::DurableStats> {
        self.shared.durable.as_ref().map(|d| d.stats())
    }

    /// Runs one checkpoint now: replays the durable log into the heap files, persists the
    /// checkpoint timestamp and deletes segments wholly below it (see
    /// [`crate::durable::checkpoint`]). `Ok(None)` for an in-memory database.
    pub fn checkpoint(&self) -> Result<Option<crate::durable::CheckpointReport>, Error> {
        match &self.shared.durable {
            Some(d) => Ok(Some(d.checkpoint()?)),
            None => Ok(None),
        }
    }

    /// The clock ordering this database's transactions.
    pub fn clock(&self) -> &C {
        &self.shared.clock
    }

    /// The configuration it was opened with.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// Begins a transaction with the database's default options.
    ///
    /// # Isolation
    /// Strictly serializable and opaque by default: every read sees the snapshot at the read
    /// timestamp, committed or not (see [`crate::txn`]).
    pub fn begin(&self) -> Result<Tx<'_, C>, Error> {
        self.begin_with(self.shared.config.options)
    }

    /// Begins a transaction with `options`.
    pub fn begin_with(&self, options: Options) -> Result<Tx<'_, C>, Error> {
        Tx::begin(&self.shared.engine, options)
    }

    /// Runs `f` in a transaction and commits it, retrying on conflict with bounded exponential
    /// back-off. Returns what `f` returned.
    ///
    /// # Conflicts
    /// Once an operation inside `f` returned [`Error::Aborted`], the attempt is doomed: whatever
    /// `f` then returns, it is rolled back and `f` runs again, up to `options.retries_max`
    /// attempts, after which [`Error::RetriesExhausted`] is returned. Any other error returned by
    /// `f` rolls the attempt back and is returned untouched.
    pub fn run<R, E, F>(&self, f: F) -> Result<R, E>
    where
        F: FnMut(&mut Tx<'_, C>) -> Result<R, E>,
        E: From<Error>,
    {
        self.run_with(self.shared.config.options, f)
    }

    /// [`Ordo::run`] with explicit options.
    pub fn run_with<R, E, F>(&self, options: Options, f: F) -> Result<R, E>
    where
        F: FnMut(&mut Tx<'_, C>) -> Result<R, E>,
        E: From<Error>,
    {
        self.retry(options.retries_max, || self.begin_with(options), f)
    }

    /// The retry loop of [`Ordo::run_with`] and [`Ordo::read_only_at`]: begin an attempt, run
    /// `f`, commit; on an abort back off and go again, up to `retries_max` attempts.
    fn retry<'a, R, E, F>(
        &'a self,
        retries_max: u32,
        mut begin: impl FnMut() -> Result<Tx<'a, C>, Error>,
        mut f: F,
    ) -> Result<R, E>
    where
        F: FnMut(&mut Tx<'_, C>) -> Result<R, E>,
        E: From<Error>,
    {
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let mut tx = begin()?;
            let last = match f(&mut tx) {
                Ok(value) => match tx.commit() {
                    Ok(_) => return Ok(value),
                    Err(Error::Aborted(abort)) => abort,
                    Err(e) => return Err(e.into()),
                },
                Err(user) => match tx.doomed() {
                    Some(abort) => {
                        drop(tx);
                        abort
                    }
                    None => {
                        tx.abort();
                        return Err(user);
                    }
                },
            };
            if attempt >= retries_max {
                return Err(Error::RetriesExhausted { attempts: attempt, last }.into());
            }
            self.backoff(attempt);
        }
    }

    fn backoff(&self, attempt: u32) {
        let ceiling_ns =
            (1u64 << attempt.min(20)).saturating_mul(50).min(crate::txn::BACKOFF_US_MAX * 1000);
        let jitter = worker::take_cached(self.shared.id).map(|mut w| {
            let r = w.next_random();
            worker::put_cached(w);
            r
        });
        let pause_ns = jitter.unwrap_or(ceiling_ns) % ceiling_ns.max(1);
        if pause_ns < 2_000 {
            let until = std::time::Instant::now() + std::time::Duration::from_nanos(pause_ns);
            while std::time::Instant::now() < until {
                std::hint::spin_loop();
            }
        } else {
            std::thread::yield_now();
            std::thread::sleep(std::time::Duration::from_nanos(pause_ns));
        }
    }

    /// Faults in at least `bytes` of fresh heap memory now, so that the first stores to it
    /// later — when transactions allocate — take no page fault (as the JVM's `AlwaysPreTouch`).
    /// Returns the fresh bytes ready. Regions are created ahead of need for it, so this counts
    /// against [`crate::heap::HeapConfig::regions_max`] (`OutOfMemory` past it).
    ///
    /// Without it a background thread faults fresh slabs in a few ahead of the allocator. That
    /// is enough where zeroing a page is cheap, but on a VM whose host backs guest memory lazily
    /// a first touch cost 470 MB/s here (20 GB/s once backed), and an insert-heavy workload
    /// kept that thread busy a quarter of the time, competing with the transactions. Call it
    /// before the work: allocation waits while it runs.
    pub fn pretouch_heap(&self, bytes: usize) -> Result<usize, Error> {
        self.shared.heap.pretouch(bytes)
    }

    /// Asks the CPU to start loading the object at `addr` into its caches, ahead of the
    /// transaction that will read it: a loop of small transactions over objects scattered in a
    /// large heap (one per item of a batch) can name the object of the transaction a few items
    /// ahead, so that its cache miss overlaps with the work in between instead of stalling the
    /// transaction that reads it. See [`Tx::prefetch`] for the same hint inside a transaction.
    ///
    /// # Isolation
    /// None: a hint. It reads nothing into any transaction, cannot fail, and does nothing for an
    /// address this process's heap does not hold.
    #[inline]
    pub fn prefetch(&self, addr: Addr) {
        self.shared.heap.prefetch(addr);
    }

    /// Counters summed over all threads.
    pub fn stats(&self) -> Stats {
        let mut s = Stats::default();
        for slot in self.shared.slots.iter() {
            s.commits += slot.commits.load(Ordering::Relaxed);
            s.read_only_commits += slot.read_only_commits.load(Ordering::Relaxed);
            s.write_wait_ns += slot.write_wait_ns.load(Ordering::Relaxed);
            s.extensions += slot.extensions.load(Ordering::Relaxed);
            s.locked_read_waits += slot.locked_read_waits.load(Ordering::Relaxed);
            for (acc, c) in s.aborts.iter_mut().zip(&slot.aborts) {
                *acc += c.load(Ordering::Relaxed);
            }
        }
        s
    }

    /// Old-version memory counters (all zero in single-version mode).
    pub fn version_stats(&self) -> VersionStats {
        self.shared.versions.as_ref().map(|v| v.stats()).unwrap_or_default()
    }

    /// The GC safe point: stale snapshot reads below it are refused.
    pub fn gc_point(&self) -> ordo_clock::Timestamp {
        self.shared.gc.point()
    }

    /// GC rounds completed (background and explicit).
    pub fn gc_rounds(&self) -> u64 {
        self.shared.gc.rounds()
    }

    /// The oldest active timestamp here now: the smallest read timestamp of a running
    /// transaction (or one being served), else `now().lo`. A cluster node reports it to the CM.
    pub fn oldest_active(&self) -> ordo_clock::Timestamp {
        self.oldest_active_at(self.shared.clock.now().lo())
    }

    /// [`Ordo::oldest_active`] with the current time given by the caller: never reads the
    /// clock, so a caller whose clock may be disabled (a cluster node's lease thread) reads it
    /// without waiting and passes what it got.
    pub fn oldest_active_at(&self, now: ordo_clock::Timestamp) -> ordo_clock::Timestamp {
        self.shared.min_active().map_or(now, |a| a.min(now))
    }

    /// Bounds this database's GC safe point by `ts` (FaRMv2 Fig. 9): in a cluster, the oldest
    /// active timestamp of every member and client, so no member recycles a version a remote
    /// reader may still need. A database opened with [`Ordo::with_remote`] starts bounded at
    /// zero (no GC) until its node sets a bound.
    pub fn set_gc_bound(&self, ts: ordo_clock::Timestamp) {
        self.shared.gc.set_bound(ts);
    }

    /// Runs one GC round now and says what it did ([`GcRound`]).
    pub fn collect_garbage(&self) -> GcRound {
        self.shared.gc_round()
    }

    /// Runs `f` in a read-only transaction at the stale snapshot `ts`, retrying on conflict.
    ///
    /// # Isolation
    /// `f` sees exactly the state committed at or before `ts`. Several threads may read the same
    /// snapshot. In single-version mode most stale reads abort; use multi-version mode.
    ///
    /// # Errors
    /// [`Error::SnapshotTooOld`] when `ts` is below the GC safe point; [`Error::SnapshotInFuture`]
    /// when `ts` does not pass within `SNAPSHOT_WAIT_MAX`; [`Error::ReadOnly`] for writes.
    pub fn read_only_at<R, E, F>(&self, ts: ordo_clock::Timestamp, f: F) -> Result<R, E>
    where
        F: FnMut(&mut Tx<'_, C>) -> Result<R, E>,
        E: From<Error>,
    {
        let options = self.shared.config.options;
        self.retry(options.retries_max, || Tx::begin_at(&self.shared.engine, options, ts), f)
    }

    /// Takes a snapshot time (`now().lo`, raised to the GC safe point) and holds it: until the
    /// pin is dropped, this database's GC keeps every version a read at that time needs — and
    /// in a cluster, so does every member's (the pin is part of this process's oldest active
    /// timestamp). Ship [`SnapshotPin::ts`] to other nodes and read there with
    /// [`Ordo::read_only_at`]: one snapshot, read anywhere (FaRMv2 §4.6).
    pub fn pin_snapshot(&self) -> Result<SnapshotPin<'_, C>, Error> {
        let worker = self.shared.new_worker()?;
        let ts = self.shared.clock.now().lo();
        let slot = self.shared.slot(worker.slot);
        // SeqCst: registration before the safe-point load (Dekker, crate::gc).
        slot.active_rts.store(ts.as_nanos(), Ordering::SeqCst);
        let ts = ts.max(self.shared.gc.point());
        slot.active_rts.store(ts.as_nanos(), Ordering::SeqCst);
        Ok(SnapshotPin { shared: &self.shared, worker: Some(worker), ts })
    }

    /// Empty slabs reclaimed for reuse so far.
    pub fn slabs_reclaimed(&self) -> u64 {
        self.shared.heap.slabs_reclaimed()
    }

    /// Regions the heap has mapped so far.
    pub fn regions_in_use(&self) -> usize {
        self.shared.heap.region_count()
    }

    /// Reads the newest committed version of the object at `addr` outside any transaction: `f`
    /// gets a [`View`](crate::txn::View) of its payload. The read is one version of that one object
    /// (the seqlock read every transactional read makes, waiting out a commit that holds the
    /// object's lock) and nothing more: it joins no read set, is never validated, and two calls
    /// may see states that no single snapshot holds. It is for copies and hints that something
    /// transactional checks later — STAMP labyrinth's private copy of the grid, whose claim
    /// transaction re-reads every cell it takes — at a fraction of a transactional read's cost.
    ///
    /// # Isolation
    /// Linearizable for the one object: a commit unlocks its objects only after its write
    /// timestamp has passed (commit step 3, `txn::commit`), so a read that returns a version
    /// follows that version's commit, and a read that starts after a commit returned sees it or
    /// a newer one. `f` may run more than once, on a torn payload whose result is discarded, so
    /// it must only read through the view.
    ///
    /// # Errors
    /// The heap's address errors for an address this process does not hold (in a cluster, an
    /// object another member owns is read in a transaction); [`Error::NotAllocated`] for a free
    /// slot; [`Error::CorruptObject`] for a length that does not fit the slot; and
    /// [`Abort::ReadLocked`](crate::Abort::ReadLocked) when a commit holds the lock for longer
    /// than [`READ_LATEST_WAIT`].
    pub fn read_latest<R>(
        &self,
        addr: Addr,
        mut f: impl FnMut(crate::txn::View<'_>) -> R,
    ) -> Result<R, Error> {
        use crate::object::ReadFail;
        let obj = self.shared.heap.object(addr)?;
        let mut deadline = None;
        let mut spins = 0u32;
        loop {
            match obj.read_view(true, |words, len| f(crate::txn::View::shared(words, len))) {
                Ok((snap, r)) if snap.header.is_allocated() => return Ok(r),
                Ok(_) => return Err(Error::NotAllocated { addr }),
                Err(ReadFail::BadLength { len_bytes }) => {
                    return Err(Error::CorruptObject { addr, len_bytes });
                }
                Err(ReadFail::Locked) => {
                    // A local commit holds its locks for about a microsecond: spin a little,
                    // then yield until the deadline (a cluster commit's take round trips).
                    spins += 1;
                    if spins < 64 {
                        std::hint::spin_loop();
                        continue;
                    }
                    let now = std::time::Instant::now();
                    if *deadline.get_or_insert(now + READ_LATEST_WAIT) < now {
                        return Err(crate::Abort::ReadLocked { addr }.into());
                    }
                    std::thread::yield_now();
                }
            }
        }
    }

    /// Reads the newest version of `addr` at or below `rts` outside any transaction, copying its
    /// payload words into `out`: what an owner's network task serves for a remote read (FaRM's
    /// one-sided RDMA read; the reader validates it as its own). Goes through the local
    /// participant, so it walks old versions in multi-version mode; a locked head, or no version
    /// old enough, is an abort.
    pub fn read_version(
        &self,
        addr: crate::Addr,
        rts: ordo_clock::Timestamp,
        out: &mut Vec<u64>,
    ) -> Result<crate::txn::set::ReadEntry, Error> {
        use crate::txn::participant::{Participant, ReadAt};
        let scratch = LocalScratch::default();
        let owner = LocalParticipant::new(&self.shared.heap, &self.shared.versions, &scratch);
        owner.read(addr, ReadAt { rts, check_lock: true, old_versions: true }, out)
    }
}

/// The longest [`Ordo::read_latest`] waits for a commit to release an object's lock.
pub const READ_LATEST_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// Starts the background GC thread; it stops when the database is dropped.
fn spawn_gc<C: Clock>(shared: Weak<Shared<C>>) -> Result<(), Error> {
    let interval = match shared.upgrade() {
        Some(s) => std::time::Duration::from_micros(s.config.gc_interval_us),
        None => return Ok(()),
    };
    std::thread::Builder::new()
        .name("ordo-gc".into())
        .spawn(move || {
            loop {
                std::thread::sleep(interval);
                match shared.upgrade() {
                    Some(s) => {
                        s.gc_round();
                    }
                    None => return,
                }
            }
        })
        .map(|_| ())
        .map_err(|e| Error::Config(format!("cannot start the GC thread: {e}")))
}

/// Starts the background checkpointer; it stops when the database is dropped. Failures are
/// counted in [`crate::durable::DurableStats::checkpoint_errors`] and retried next interval.
fn spawn_checkpointer<C: Clock>(shared: Weak<Shared<C>>, interval_ms: u64) -> Result<(), Error> {
    let interval = std::time::Duration::from_millis(interval_ms);
    std::thread::Builder::new()
        .name("ordo-checkpoint".into())
        .spawn(move || {
            loop {
                std::thread::sleep(interval);
                match shared.upgrade() {
                    Some(s) => {
                        if let Some(d) = &s.durable {
                            let _ = d.checkpoint();
                        }
                    }
                    None => return,
                }
            }
        })
        .map(|_| ())
        .map_err(|e| Error::Config(format!("cannot start the checkpoint thread: {e}")))
}

/// A snapshot time held against garbage collection ([`Ordo::pin_snapshot`]).
pub struct SnapshotPin<'db, C: Clock> {
    shared: &'db Shared<C>,
    worker: Option<Box<Worker>>,
    ts: ordo_clock::Timestamp,
}

impl<C: Clock> SnapshotPin<'_, C> {
    /// The snapshot time.
    pub fn ts(&self) -> ordo_clock::Timestamp {
        self.ts
    }
}

impl<C: Clock> Drop for SnapshotPin<'_, C> {
    fn drop(&mut self) {
        if let Some(w) = self.worker.take() {
            // Release: pairs with the GC's scan; the slot is idle again.
            self.shared.slot(w.slot).active_rts.store(worker::IDLE, Ordering::Release);
            drop(w);
        }
    }
}
