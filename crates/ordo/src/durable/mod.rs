//! Durability: SPHT's shadow-paged heap, per-thread redo logs and group-commit marker, on files
//! (DESIGN §5; SPHT Alg. 3, 4, 5).
//!
//! * **Storage** ([`io`]): every file operation, and the making of the heap's working copies,
//!   goes through the [`io::Storage`] seam: real files ([`io::RealStorage`], the default), files
//!   in memory ([`io::MemStorage`]), or either under [`io::FaultStorage`] (power loss, errnos).
//! * **Heap**: one file per region (`region-NNNNN.heap`). The working copy is private memory
//!   made from it by the storage ([`io::StorageFile::map_private`]): on real files a
//!   `MAP_PRIVATE` mapping — copy-on-write DRAM pages, SPHT's shadow copy — never written back.
//!   The files change only by replaying log records (at open, see [`recovery`]).
//! * **Logs** (module `log`): the committing thread builds one redo record `{wts, [(addr, image)],
//!   crc32c}` of its whole write set inside `commit_backup`, while it still holds its locks
//!   (FaRMv2 Alg. 2 step 5: the record exists before anything it wrote is visible), and
//!   appends it to its own chunk of a preallocated segment file (process mode) or stages it to
//!   the log stream that the next group-commit round writes with its marker (sync mode). Allocations log the object's first
//!   image and its slab's class word, frees the unallocated image, so recovery rebuilds the
//!   allocator from object headers alone.
//! * **Modes** ([`Mode`]): `Process` — the record reaches the OS page cache (`pwrite`), which
//!   survives a process crash: SPHT-eADR Alg. 4, no flush and no marker; `Sync` — SPHT Alg. 3:
//!   committers wait until a group `fdatasync` round has made every record with a smaller or
//!   equal timestamp durable and the durable marker covers them. `flush_after_commit` starts
//!   writeback of each record once its transaction has installed and unlocked (Alg. 5 line
//!   17's flush after `HTM_COMMIT`, here `sync_file_range(SYNC_FILE_RANGE_WRITE)`, no wait);
//!   process mode only — in sync mode the record reaches the file with its round.
//! * **Recovery** ([`recovery`]): read the checkpoint timestamp C and the marker D, replay the
//!   records with `C < wts <= D` in timestamp order into the heap files (the newest image per
//!   object only), persist C = D, delete the segments, map the files and rebuild the slab
//!   bitmaps from the object headers.
//! * **One writer per directory**: an open holds an exclusive `flock` on the directory itself
//!   (no lock file, so a refused open changes nothing) for as long as the database lives, and
//!   [`inspect`] a shared one; the kernel drops it when the holder dies, so a crash never
//!   leaves a stale lock. A second open gets [`DurableError::Locked`] after a bounded wait
//!   (`LOCK_WAIT`, for a dropped database whose background checkpoint is still finishing).
//!   Without it two processes would append to the same segments and replay over the same heap
//!   files, and `inspect` would map segments while they are written.
//!
//! # Where this differs from DESIGN §5, and why
//! * The marker is a record in the leader's own log chunk, not a separate file: recovery trusts
//!   a marker only inside the valid prefix of its chunk, so the leader's own records and the
//!   marker become durable with one `fdatasync`. A marker file would double the flushes.
//! * Threads' chunks share segment files: `fdatasync` works per file, so per-thread files would
//!   cost one device flush per thread per round and no group commit.
//! * Sync mode has no per-thread logs on disk: committers stage records to one stream, and
//!   each round's leader writes the staged records and its marker with one contiguous
//!   `pwrite` before its flush. A flush of pages scattered over per-thread chunks costs up to
//!   three times a contiguous one (see the `log::stream` module docs); the per-thread `(wts,
//!   persisted)` slots of Alg. 3 remain, as `lower`/`appended`.
//! * Besides the background [`checkpoint`]er, every open folds the logs into the heap files.
//! * Emptied slabs are not reclaimed for other size classes in durable databases (a reclaim
//!   zeroes the slab outside any transaction and would need its own log record).
//! * A recovered database needs a clock that is already past the recovered timestamps
//!   ([`DurableError::ClockBehind`]); [`crate::Ordo::open_durable`] builds it from them.

pub mod checkpoint;
pub mod format;
pub mod io;
pub(crate) mod log;
// The marker's bound is the engine's own; the loom build makes it public (`lib.rs`) for its
// model, `tests/loom_marker.rs`.
#[allow(unreachable_pub)]
pub(crate) mod marker;
pub mod recovery;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use checkpoint::CheckpointReport;
pub use log::MarkerShortcuts;
pub use recovery::{RecoveryReport, SegmentInfo, TornTail};

pub use crate::error::DurableError;
use crate::error::Error;
use crate::heap::RegionFiles;
use crate::heap::memory::RegionMemory;
use io::{RealStorage, Storage};

/// How durable commits are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Records reach the OS with `pwrite`: a process crash loses nothing acknowledged; power
    /// loss may lose the last transactions (a suffix in timestamp order).
    Process,
    /// Group `fdatasync` plus the durable marker: nothing acknowledged is lost on power loss.
    Sync,
}

impl Mode {
    /// The name used on command lines.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Process => "process",
            Mode::Sync => "sync",
        }
    }
}

/// Bytes per log chunk, by default.
pub const CHUNK_BYTES_DEFAULT: u32 = 1 << 20;
/// Chunks per segment file, by default.
pub const CHUNKS_PER_SEGMENT_DEFAULT: u32 = 16;
/// The longest segment file an open (and [`inspect`], [`recover`]) accepts, by default: 4 GiB.
pub const SEGMENT_BYTES_MAX_DEFAULT: u64 = 1 << 32;

/// Microseconds a group-commit leader may wait for followers, by default (at most half the
/// last flush in any case).
pub const GROUP_WAIT_US_DEFAULT: u64 = 250;

/// Milliseconds between background checkpoints, by default.
pub const CHECKPOINT_INTERVAL_MS_DEFAULT: u64 = 1_000;
/// Segment files before commits wait for the checkpointer, by default.
pub const LOG_SEGMENTS_MAX_DEFAULT: usize = 8;
/// Default [`DurableConfig::log_full_wait_ms`].
pub const LOG_FULL_WAIT_MS_DEFAULT: u64 = 1_000;

/// Where and how a database is made durable.
#[derive(Clone, Debug)]
pub struct DurableConfig {
    /// The database directory.
    pub dir: PathBuf,
    /// Process or sync durability.
    pub mode: Mode,
    /// Bytes per log chunk. A transaction's record larger than this is written as several
    /// part records; a single object image must fit in one (with 56 bytes of headers), which
    /// the default (1 MiB) does for the largest object (`heap::OBJECT_BYTES_MAX`, 256 KiB).
    pub chunk_bytes: u32,
    /// Chunks per preallocated segment file.
    pub chunks_per_segment: u32,
    /// The longest segment file accepted: a segment of `4096 + chunk_bytes *
    /// chunks_per_segment` bytes must fit, and at open a segment file longer than this is
    /// refused ([`DurableError::BadFile`] naming it) before it is mapped — a sparse file set
    /// to many GiB would otherwise be mapped and scanned whole. [`inspect`] and [`recover`]
    /// use [`SEGMENT_BYTES_MAX_DEFAULT`].
    pub segment_bytes_max: u64,
    /// Process mode: start writeback of every transaction record after its commit installed
    /// (SPHT Alg. 5's flush after commit; a `sync_file_range` hint, never waited for). Off by
    /// default: `ordo bench durable --modes process,process+flush` measures both. Sync mode
    /// ignores it: a record reaches the file with its round, just before the round's flush.
    pub flush_after_commit: bool,
    /// Leader/follower batching (sync mode): microseconds a round's leader may wait for the
    /// committers the previous round released to append again, at most half the last flush;
    /// 0 = no wait. See the "Batching" section of the `log::round` module.
    pub group_wait_us: u64,
    /// Milliseconds between background checkpoints; 0 runs none (call
    /// [`crate::Ordo::checkpoint`]).
    pub checkpoint_interval_ms: u64,
    /// Threads checking the log segments at open and replaying images at open and in
    /// checkpoints (disjoint address ranges).
    pub replay_threads: usize,
    /// The most segment files before a commit that needs a new one waits (bounded, counted)
    /// for a checkpoint to delete one; 0 = unbounded.
    pub log_segments_max: usize,
    /// The longest, in milliseconds, a commit waits for a checkpoint when the log is full
    /// (`log_segments_max` segments exist); past it the commit goes on and the log grows, rather
    /// than deadlock on an idle thread's open chunk. Default [`LOG_FULL_WAIT_MS_DEFAULT`].
    pub log_full_wait_ms: u64,
    /// Create the next log segment in a background thread before it is needed (on by
    /// default): creating one flushes `chunk_bytes * chunks_per_segment` of zeros, which would
    /// otherwise stall the committers that need it. Off, segments are created on demand
    /// (tests that count segment files turn it off).
    pub preallocate_segments: bool,
    /// The storage seam: [`io::RealStorage`] (the default), [`io::MemStorage`] (files in
    /// memory: tests of logic, simulations), or an [`io::FaultStorage`] on top of either
    /// (power loss and injected errors).
    pub storage: Arc<dyn Storage>,
    /// Test-only switches that break the marker (negative tests).
    #[cfg(feature = "shortcuts")]
    pub shortcuts: MarkerShortcuts,
}

impl PartialEq for DurableConfig {
    fn eq(&self, o: &Self) -> bool {
        self.dir == o.dir
            && self.mode == o.mode
            && self.chunk_bytes == o.chunk_bytes
            && self.chunks_per_segment == o.chunks_per_segment
            && self.segment_bytes_max == o.segment_bytes_max
            && self.flush_after_commit == o.flush_after_commit
            && self.group_wait_us == o.group_wait_us
            && self.checkpoint_interval_ms == o.checkpoint_interval_ms
            && self.replay_threads == o.replay_threads
            && self.log_segments_max == o.log_segments_max
            && self.log_full_wait_ms == o.log_full_wait_ms
            && self.preallocate_segments == o.preallocate_segments
            && Arc::ptr_eq(&self.storage, &o.storage)
    }
}
impl Eq for DurableConfig {}

impl DurableConfig {
    /// Durability in `dir` with `mode`, real files and default sizes.
    pub fn new(dir: impl Into<PathBuf>, mode: Mode) -> Self {
        DurableConfig {
            dir: dir.into(),
            mode,
            chunk_bytes: CHUNK_BYTES_DEFAULT,
            chunks_per_segment: CHUNKS_PER_SEGMENT_DEFAULT,
            segment_bytes_max: SEGMENT_BYTES_MAX_DEFAULT,
            flush_after_commit: false,
            group_wait_us: GROUP_WAIT_US_DEFAULT,
            checkpoint_interval_ms: CHECKPOINT_INTERVAL_MS_DEFAULT,
            replay_threads: 2,
            log_segments_max: LOG_SEGMENTS_MAX_DEFAULT,
            log_full_wait_ms: LOG_FULL_WAIT_MS_DEFAULT,
            preallocate_segments: true,
            storage: Arc::new(RealStorage),
            #[cfg(feature = "shortcuts")]
            shortcuts: MarkerShortcuts::default(),
        }
    }

    /// The same, over another storage: [`io::MemStorage`] keeps the database in memory (it
    /// outlives the database: open it again on a clone of the same storage to find it as a
    /// restarted process would), [`io::FaultStorage`] adds power loss and injected errors.
    ///
    /// # Example
    /// ```
    /// use std::sync::Arc;
    /// use ordo::durable::io::MemStorage;
    /// use ordo::durable::{DurableConfig, Mode};
    /// use ordo::{Config, Ordo};
    ///
    /// let storage = MemStorage::new();
    /// let config = || Config {
    ///     durability: Some(
    ///         DurableConfig::new("/db", Mode::Sync).with_storage(Arc::new(storage.clone())),
    ///     ),
    ///     ..Config::default()
    /// };
    /// let db = Ordo::open_durable(config(), ordo_clock::LogicalClock::starting_at)?;
    /// let a = db.run(|tx| tx.alloc(&7u64))?;
    /// drop(db);
    /// let db = Ordo::open_durable(config(), ordo_clock::LogicalClock::starting_at)?;
    /// assert_eq!(db.run(|tx| tx.read::<u64>(a))?, 7);
    /// # Ok::<(), ordo::Error>(())
    /// ```
    pub fn with_storage(mut self, storage: Arc<dyn Storage>) -> Self {
        self.storage = storage;
        self
    }

    pub(crate) fn check(&self) -> Result<(), Error> {
        if self.chunk_bytes < 4096 || !self.chunk_bytes.is_multiple_of(4096) {
            return Err(Error::Config(format!(
                "durability chunk_bytes = {} is not a positive multiple of 4096",
                self.chunk_bytes
            )));
        }
        if self.chunks_per_segment == 0 {
            return Err(Error::Config("durability chunks_per_segment must be at least 1".into()));
        }
        let segment_bytes =
            format::SEGMENT_HEADER_BYTES + self.chunk_bytes as u64 * self.chunks_per_segment as u64;
        if segment_bytes > self.segment_bytes_max {
            return Err(Error::Config(format!(
                "durability segments of {segment_bytes} bytes ({} chunks of {} bytes and the \
                 header) exceed segment_bytes_max = {}",
                self.chunks_per_segment, self.chunk_bytes, self.segment_bytes_max
            )));
        }
        Ok(())
    }
}

/// Heap files: creates one per new region and keeps the manifest's region count.
pub(crate) struct HeapFiles {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    manifest: Mutex<format::Manifest>,
}

impl RegionFiles for HeapFiles {
    fn create_region(&self, id: u16, bytes: usize) -> Result<RegionMemory, Error> {
        let path = format::region_file(&self.dir, id);
        let err = |op| {
            let path = path.clone();
            move |source| Error::Durable(Arc::new(DurableError::Io { op, path, source }))
        };
        let f = self.storage.create(&path).map_err(err("create"))?;
        f.set_len(bytes as u64).map_err(err("set_len"))?;
        f.sync_data().map_err(err("fdatasync"))?;
        self.storage.sync_dir(&self.dir).map_err(err("fsync directory"))?;
        let mut m = self.manifest.lock().unwrap_or_else(|e| e.into_inner());
        let next = format::Manifest { regions: m.regions.max(id as u64 + 1), ..*m };
        next.write(&*self.storage, &self.dir).map_err(|e| Error::Durable(Arc::new(e)))?;
        *m = next;
        f.map_private(bytes).map(RegionMemory::new).map_err(err("mmap"))
    }
}

/// What [`open`] gives: the log and recovery state, the heap files, and the mapped regions by
/// id (`None` for an id a cluster member never held).
pub(crate) type Opened = (Durable, Arc<HeapFiles>, Vec<Option<RegionMemory>>);

/// Marks `config.dir` as a cluster member's (see [`format::MEMBER`]), creating it if needed.
pub(crate) fn mark_member(config: &DurableConfig) -> Result<(), Error> {
    let wrap = |op, path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Durable(Arc::new(DurableError::Io { op, path, source }))
    };
    let dir = &config.dir;
    config.storage.create_dir_all(dir).map_err(wrap("create directory", dir))?;
    let path = dir.join(format::MEMBER);
    let exists =
        config.storage.list(dir).map_err(wrap("list", dir))?.iter().any(|n| n == format::MEMBER);
    if !exists {
        config.storage.create(&path).map_err(wrap("create", &path))?;
        config.storage.sync_dir(dir).map_err(wrap("fsync directory", dir))?;
    }
    Ok(())
}

/// A durable database's runtime state.
pub(crate) struct Durable {
    pub(crate) log: log::Log,
    pub(crate) report: RecoveryReport,
    pub(crate) checkpointer: checkpoint::Checkpointer,
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    /// The exclusive directory lock, held while the database is open.
    _lock: io::DirLock,
}

impl Durable {
    /// Runs one checkpoint now.
    pub(crate) fn checkpoint(&self) -> Result<CheckpointReport, DurableError> {
        self.checkpointer.run(&self.log, &*self.storage, &self.dir)
    }
}

impl Drop for Durable {
    /// A clean close: in sync mode, one last round makes every logged commit durable (those
    /// that did not wait for the marker included). Errors are ignored: nothing acknowledged
    /// depends on this round.
    fn drop(&mut self) {
        let _ = self.log.sync_appended();
    }
}

/// Opens (creating if needed) the directory of `config`: recovers, then returns the runtime
/// state, the heap-file backing and the mapped regions.
/// `scanned` is a scan of the directory made just before (by
/// [`crate::Ordo::open_durable`], to build the clock), so the log is read once.
pub(crate) fn open(
    config: &DurableConfig,
    region_bytes: usize,
    threads: usize,
    scanned: Option<recovery::Scan>,
) -> Result<Opened, Error> {
    config.check()?;
    let wrap = |e: DurableError| Error::Durable(Arc::new(e));
    let storage = config.storage.clone();
    let dir = &config.dir;
    storage.create_dir_all(dir).map_err(|source| {
        wrap(DurableError::Io { op: "create directory", path: dir.clone(), source })
    })?;
    // A scan handed in holds the exclusive lock already; otherwise take it before reading.
    let (scanned, lock) = match scanned {
        Some(mut scan) => {
            let lock = match scan.lock.take() {
                Some(lock) => lock,
                None => lock_dir(&*storage, dir, true).map_err(wrap)?,
            };
            (Some(scan), lock)
        }
        None => (None, lock_dir(&*storage, dir, true).map_err(wrap)?),
    };
    let names = storage
        .list(dir)
        .map_err(|source| wrap(DurableError::Io { op: "list", path: dir.clone(), source }))?;
    if !names.iter().any(|n| n == format::MANIFEST) {
        if names.iter().any(|n| format::parse_segment_name(n).is_some() || n.ends_with(".heap")) {
            return Err(wrap(DurableError::NoDatabase { dir: dir.clone() }));
        }
        let m = format::Manifest { region_bytes: region_bytes as u64, regions: 0 };
        m.write(&*storage, dir).map_err(wrap)?;
    }
    let scan = match scanned {
        Some(scan) => scan,
        None => {
            recovery::scan(&*storage, dir, config.replay_threads, config.segment_bytes_max, true)
                .map_err(wrap)?
        }
    };
    if scan.manifest.region_bytes != region_bytes as u64 {
        return Err(wrap(DurableError::RegionSize {
            dir: dir.clone(),
            found: scan.manifest.region_bytes,
            configured: region_bytes as u64,
        }));
    }
    let (report, next_seq) = recovery::apply(&*storage, dir, scan).map_err(wrap)?;
    let mut regions = Vec::new();
    let present: std::collections::HashSet<String> = storage
        .list(dir)
        .map_err(|source| wrap(DurableError::Io { op: "list", path: dir.clone(), source }))?
        .into_iter()
        .collect();
    for id in 0..report.regions {
        let path = format::region_file(dir, id as u16);
        // A cluster member holds only some region ids (its primaries and backups): an id it
        // never created has no file. (The embedded engine creates ids in order: it has all.)
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if present.contains(format::MEMBER) && name.is_some_and(|n| !present.contains(&n)) {
            regions.push(None);
            continue;
        }
        let f = storage.open(&path, false).map_err(|source| {
            wrap(DurableError::HeapFile { path: path.clone(), reason: source.to_string() })
        })?;
        let mem = f
            .map_private(region_bytes)
            .map(RegionMemory::new)
            .map_err(|source| wrap(DurableError::Io { op: "mmap", path: path.clone(), source }))?;
        regions.push(Some(mem));
    }
    let manifest = format::Manifest { region_bytes: region_bytes as u64, regions: report.regions };
    let files = Arc::new(HeapFiles {
        storage: storage.clone(),
        dir: dir.clone(),
        manifest: Mutex::new(manifest),
    });
    let settings = log::LogSettings {
        mode: config.mode,
        chunk_bytes: config.chunk_bytes,
        chunks_per_segment: config.chunks_per_segment,
        flush_after_commit: config.flush_after_commit,
        group_wait: std::time::Duration::from_micros(config.group_wait_us),
        segments_max: config.log_segments_max,
        full_wait: std::time::Duration::from_millis(config.log_full_wait_ms),
        preallocate: config.preallocate_segments,
        #[cfg(feature = "shortcuts")]
        shortcuts: config.shortcuts,
        #[cfg(not(feature = "shortcuts"))]
        shortcuts: MarkerShortcuts::default(),
    };
    let marker = report.recovered_ts;
    let log = log::Log::new(storage.clone(), dir, threads, next_seq, marker, settings);
    let checkpointer = checkpoint::Checkpointer::new(report.recovered_ts, config.replay_threads);
    Ok((
        Durable { log, report, checkpointer, storage, dir: dir.clone(), _lock: lock },
        files,
        regions,
    ))
}

/// Reads what recovery of `dir` would do, without changing anything (for `ordo recover` and
/// `ordo inspect`). [`DurableError::Locked`] while the database is open elsewhere: its logs are
/// being written.
pub fn inspect(storage: &dyn Storage, dir: &Path) -> Result<RecoveryReport, DurableError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok(prescan(storage, dir, threads, SEGMENT_BYTES_MAX_DEFAULT, false, false)?.report())
}

/// Recovers `dir` without opening a database: replays the log records with `C < wts <= D`
/// into the heap files, persists C := D and deletes the segments, exactly as an open does
/// (the same scan and [`recovery`]'s `apply`), then lets go of the directory. Afterwards
/// [`inspect`] finds nothing to replay. [`DurableError::NoDatabase`] for a directory without a
/// manifest, [`DurableError::Locked`] while the database is open elsewhere; every check runs
/// before the first write, so a directory that fails is left as it was.
pub fn recover(storage: &dyn Storage, dir: &Path) -> Result<RecoveryReport, DurableError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let scan = prescan(storage, dir, threads, SEGMENT_BYTES_MAX_DEFAULT, true, true)?;
    // Held until the files are replayed: no open may map them meanwhile.
    let (report, _next_seq) = recovery::apply(storage, dir, scan)?;
    Ok(report)
}

/// How long an open waits for a directory lock held by this process's last database: the lock
/// is released when the database is dropped, which a background checkpoint in flight may delay
/// by the length of that checkpoint. Another process's lock is reported after the same wait.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Takes the lock of the existing directory `dir` (see [`Storage::lock_dir`]), waiting at most
/// `LOCK_WAIT` for a holder to let go.
fn lock_dir(
    storage: &dyn Storage,
    dir: &Path,
    exclusive: bool,
) -> Result<io::DirLock, DurableError> {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match storage.lock_dir(dir, exclusive) {
            Ok(lock) => return Ok(lock),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() >= deadline {
                    return Err(DurableError::Locked { dir: dir.to_path_buf() });
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(DurableError::NoDatabase { dir: dir.to_path_buf() });
            }
            Err(source) => {
                return Err(DurableError::Io { op: "lock", path: dir.to_path_buf(), source });
            }
        }
    }
}

/// The scan of `dir` on `threads` threads (`replay`: gathering what replay needs; segment
/// files longer than `segment_bytes_max` refused), or [`DurableError::NoDatabase`].
pub(crate) fn prescan(
    storage: &dyn Storage,
    dir: &Path,
    threads: usize,
    segment_bytes_max: u64,
    replay: bool,
    exclusive: bool,
) -> Result<recovery::Scan, DurableError> {
    // A missing directory is `NoDatabase` (from the lock, or from the listing below where a
    // storage does not lock).
    let lock = Some(lock_dir(storage, dir, exclusive)?);
    let names = storage.list(dir).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            DurableError::NoDatabase { dir: dir.to_path_buf() }
        } else {
            DurableError::Io { op: "list", path: dir.to_path_buf(), source }
        }
    })?;
    if !names.iter().any(|n| n == format::MANIFEST) {
        return Err(DurableError::NoDatabase { dir: dir.to_path_buf() });
    }
    let mut scan = recovery::scan(storage, dir, threads, segment_bytes_max, replay)?;
    scan.lock = lock;
    Ok(scan)
}

/// Counters of a durable database's log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DurableStats {
    /// `fdatasync` calls on log segments.
    pub fsyncs: u64,
    /// Marker rounds run.
    pub rounds: u64,
    /// Records written (transactions and markers).
    pub records: u64,
    /// Bytes of records written.
    pub bytes: u64,
    /// The in-memory durable marker.
    pub marker_ts: u64,
    /// Live segment files.
    pub segments: usize,
    /// Commits that found the log full and waited for the checkpointer.
    pub log_full_waits: u64,
    /// The checkpoint timestamp C.
    pub checkpoint_ts: u64,
    /// Checkpoints run (background and explicit), and how many failed.
    pub checkpoints: u64,
    /// Failed checkpoints.
    pub checkpoint_errors: u64,
}

impl Durable {
    pub(crate) fn stats(&self) -> DurableStats {
        use std::sync::atomic::Ordering::Relaxed;
        let l = &self.log;
        DurableStats {
            fsyncs: l.stats.fsyncs.load(Relaxed),
            rounds: l.stats.rounds.load(Relaxed),
            records: l.stats.records.load(Relaxed),
            bytes: l.stats.bytes.load(Relaxed),
            marker_ts: l.marker(),
            segments: l.segment_count(),
            log_full_waits: l.stats.log_full_waits.load(Relaxed),
            checkpoint_ts: self.checkpointer.ts(),
            checkpoints: self.checkpointer.runs.load(Relaxed),
            checkpoint_errors: self.checkpointer.errors.load(Relaxed),
        }
    }
}
