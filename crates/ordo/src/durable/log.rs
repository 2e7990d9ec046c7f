//! Per-thread redo logs and the group-commit marker (SPHT Alg. 3 and 4 on files).
//!
//! # Process mode: per-thread chunks
//! Each worker slot appends its records to its own **chunk**, a thread-private extent of a
//! preallocated segment file: no shared log, no log lock, one `pwrite` per commit, issued by
//! the committing thread before it unlocks — the page cache survives a process crash
//! (SPHT-eADR Alg. 4). No marker and no flush.
//!
//! # Sync mode: one stream, written by the round
//! On persistent memory a committer's log stores sit in the volatile cache until flushed; on
//! files a `pwrite` lands in the volatile page cache, and only `fdatasync` makes anything
//! durable. Who issues the `pwrite` is therefore free, and it decides what a flush costs: a
//! flush of one contiguous run of pages runs at the speed of a single-record flush, a flush
//! of one page per thread scattered over the segment (the process-mode layout, one chunk per
//! slot) at a third of it on this machine's disk (`docs/results/2026-11-22-s3-scatter-flush.py`).
//! So in sync mode a committer **stages** its finished record — copies it, under a short
//! lock, to the next free bytes of a single log **stream** (its place in a chunk of the stream
//! is reserved at once, so a chunk or segment that cannot be had fails the commit before it
//! installs) — and the round's leader writes everything staged, followed by its marker, with
//! one `pwrite` at the stream's end: each round is one contiguous write followed by one flush.
//! The record exists (staged) before the commit installs, as FaRMv2 step 5 asks; no write it
//! made is reported before a marker covers it, and recovery replays nothing above the marker,
//! so a record staged in memory is worth exactly what a record written but not flushed was.
//!
//! # Records larger than a chunk
//! A record never spans chunks (each chunk is checked on its own). A transaction whose record
//! exceeds `chunk_bytes` is split into **parts** of whole entries (`format::split_record`),
//! each a record naming its index and the part count, all with the transaction's `wts`. In
//! process mode the committer writes them one after another, so a crash between two leaves
//! an incomplete set, which recovery and the checkpointer skip; in sync mode all parts are
//! staged at once, every chunk they need claimed first, so a round writes all or none. Only
//! a single object image larger than a chunk is refused (`RecordTooLarge`).
//!
//! # The marker (sync mode)
//! A committer publishes a lower bound `lower` of its write timestamp in its slot *before*
//! drawing `wts` (FaRMv2's `get_ts`), stages its record under its locks, then stores
//! `appended = wts` and clears `lower`. A round (run by one committer, the leader, under
//! `sync_lock`) computes the marker
//!
//! ```text
//! A: M = max over slots of appended          (records already staged)
//!    fence(SeqCst)                            (pairs with one after publishing lower)
//! B: for every slot: lower;   D = min(M, min(lower) - 1)
//! ```
//!
//! **Claim** (proved in [`crate::marker`], model-checked by `tests/loom_marker.rs`): every
//! record with `wts <= D` was staged before B read its slot, so the runs the leader takes from
//! the stream after B hold it. Hence also: every record staged after the leader took the runs
//! is above `D`, and every record written after a marker `D` in the stream is above `D`.
//!
//! The leader then takes every staged run, appends a marker record `D` to the stream behind
//! them, writes the runs (usually one: the stream's next bytes), and issues **one
//! `fdatasync` per segment with unsynced writes** (usually one). Committers return once the
//! in-memory marker, published after the flush, covers their `wts`.
//!
//! A round may span chunks (and so segments), and the device persists unsynced pages in any
//! order, so the marker can reach the disk before records it covers. Recovery therefore
//! trusts a marker only when (1) it lies inside the valid prefix of its own chunk — which
//! covers the round's records before it in that chunk — and (2) every other chunk the round
//! wrote to, which the marker names as its **frontier** (`(segment, chunk, end)`), has a
//! valid prefix reaching the named end (a chunk of a segment that no longer exists was
//! deleted by a checkpoint, so all its records are at or below C). A record with `wts <= D`
//! was written by this round (before the marker in its chunk, or in a frontier chunk) or by
//! an earlier round whose flush completed. So a trusted marker `D` implies every record at or
//! below `D` is on the disk, and a completed round leaves a trusted marker.
//!
//! `tests/durable/durable_group.rs` scripts the crash states of a round spanning chunks and
//! segments (the marker flushed, a frontier chunk's records not) and fails with the frontier
//! check removed; `tests/durable/durable_power.rs` cuts power at random points with and
//! without random unsynced writes kept.
//!
//! # Batching
//! A waiting committer leads a round when `sync_lock` is free, otherwise it sleeps until a
//! round ends (or `WAIT_SLICE`). Committers that stage while a flush is in flight are
//! covered by the next round together. With `group_wait` (250 us by default) a leader first
//! waits, bounded, for the committers the previous round released (`gather`): closed-loop
//! threads then share every flush instead of alternating between two half-full rounds.
//! A commit that does not wait (`Options::wait_durable = false`) is made durable by the next
//! round: another committer's, or the checkpointer's, which runs one before each checkpoint.
//!
//! # Invariants
//! * The durable marker only grows, and every record with `wts <= marker` is on stable storage.
//! * In sync mode only a round leader (under `sync_lock`) writes to the segments, at the
//!   stream's end; the stream's bytes are written in the order they were staged.
//! * A failed `write` or `fdatasync` of a round poisons the log (no retry: the kernel may have
//!   dropped the pages); every later durable commit fails.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::marker::MarkerSlots;

use super::format::{KIND_MARKER, RecordBuf, SEGMENT_HEADER_BYTES, SegmentHeader, segment_file};
use super::io::{Storage, StorageFile};
use super::{DurableError, Mode};

/// Bytes of a marker record naming `frontier` chunks.
fn marker_len(frontier: usize) -> usize {
    super::format::RECORD_HEADER_BYTES + frontier * (super::format::ENTRY_HEADER_BYTES + 16)
}

/// Bytes of zeros written per call when preallocating a segment.
const ZERO_FILL_BYTES: usize = 1 << 20;
/// The longest a waiter sleeps before checking the marker again.
const WAIT_SLICE: Duration = Duration::from_micros(200);
/// The longest a commit waits for the checkpointer when the log is full.
pub(crate) const LOG_FULL_WAIT_MAX: Duration = Duration::from_secs(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A log segment file shared by the chunks of all threads.
#[derive(Debug)]
pub(crate) struct Segment {
    path: PathBuf,
    file: Arc<dyn StorageFile>,
    header: SegmentHeader,
    next_chunk: AtomicU32,
    /// Appends so far; `synced` is the count the last completed sync covered.
    dirty: AtomicU64,
    synced: AtomicU64,
    /// Chunks whose writer moved on (no more appends): with every chunk claimed and sealed,
    /// the segment is deleted once the checkpoint passes `max_ts`.
    sealed: AtomicU32,
    /// The largest timestamp of a record in the segment.
    max_ts: AtomicU64,
}

impl Segment {
    /// One of its chunks gets no more records (the checkpointer deletes the segment once all
    /// are sealed and below the checkpoint).
    fn seal(&self) {
        // AcqRel: pairs with the Acquire load in `delete_below`.
        let before = self.sealed.fetch_add(1, Ordering::AcqRel);
        // Chunk accounting: sealed <= claimed <= chunks. Relaxed: the sealing thread claimed
        // the chunk itself (or under the stream lock it holds).
        let claimed = self.next_chunk.load(Ordering::Relaxed).min(self.header.chunks);
        debug_assert!(before < claimed, "a chunk is sealed once, after it was claimed");
    }

    fn sync(&self, stats: &LogStats) -> Result<(), DurableError> {
        // Acquire: pairs with the Release increment after each append's pwrite.
        let d = self.dirty.load(Ordering::Acquire);
        let synced = self.synced.load(Ordering::Acquire);
        debug_assert!(synced <= d, "a sync covers only appends made before it");
        if d == synced {
            return Ok(());
        }
        self.file.sync_data().map_err(|source| DurableError::Io {
            op: "fdatasync",
            path: self.path.clone(),
            source,
        })?;
        stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.synced.fetch_max(d, Ordering::AcqRel);
        Ok(())
    }
}

#[derive(Debug, Default)]
struct ChunkWriter {
    chunk: SlotChunk,
    /// The record being built.
    buf: RecordBuf,
    /// The parts of a record too large for a chunk (reused).
    parts: Vec<Vec<u8>>,
}

/// A process-mode slot's chunk.
#[derive(Debug, Default)]
struct SlotChunk {
    at: Option<(Arc<Segment>, u32)>,
    /// Next free byte inside the chunk.
    pos: u32,
    /// The last transaction record (segment, offset, length) awaiting its writeback hint
    /// (`flush_after_commit`).
    hint: Option<(Arc<Segment>, u64, u64)>,
}

/// Where a round's bytes end in a chunk other than its marker's: a marker names these (its
/// frontier), and recovery trusts the marker only when every named chunk's valid prefix
/// reaches its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ChunkEnd {
    seq: u64,
    chunk: u32,
    end_bytes: u32,
}

/// Staged bytes of the sync-mode stream inside one chunk, not yet written.
#[derive(Debug)]
struct Run {
    seg: Arc<Segment>,
    chunk: u32,
    /// Offset of the run's first byte inside the chunk.
    start_bytes: u32,
    bytes: Vec<u8>,
    records: u64,
}

impl Run {
    fn end(&self) -> ChunkEnd {
        debug_assert!(
            self.start_bytes as usize + self.bytes.len() <= self.seg.header.chunk_bytes as usize,
            "a run lies inside its chunk"
        );
        ChunkEnd {
            seq: self.seg.header.seq,
            chunk: self.chunk,
            end_bytes: self.start_bytes + self.bytes.len() as u32,
        }
    }
}

/// The sync-mode log stream (module docs, "Sync mode"): where the next staged byte goes, and
/// what is staged but not yet written.
#[derive(Debug, Default)]
struct Stream {
    at: Option<(Arc<Segment>, u32)>,
    /// Next free byte inside the current chunk.
    pos: u32,
    /// Staged runs in stream order; a run never spans chunks.
    runs: Vec<Run>,
    /// Emptied run buffers, for reuse.
    spare: Vec<Vec<u8>>,
    /// The round's marker record.
    marker: RecordBuf,
}

impl Stream {
    /// Seals the current chunk and continues in `next`.
    fn move_to(&mut self, next: Option<(Arc<Segment>, u32)>) {
        if let Some((old, _)) = self.at.take() {
            old.seal();
        }
        self.at = next;
        self.pos = 0;
    }

    fn fits(&self, len: usize, chunk_bytes: u32) -> bool {
        self.at.is_some() && self.pos as usize + len <= chunk_bytes as usize
    }

    /// Appends `bytes` (one record, already known to fit) at the stream's end. The caller
    /// has given the stream a chunk (`stage` claims every chunk it needs before pushing).
    fn push(&mut self, bytes: &[u8], ts: u64) {
        debug_assert!(self.fits(bytes.len(), u32::MAX), "pushed without a chunk");
        let Some((seg, chunk)) = &self.at else {
            return;
        };
        seg.max_ts.fetch_max(ts, Ordering::AcqRel);
        let extends = self.runs.last().is_some_and(|r| {
            Arc::ptr_eq(&r.seg, seg)
                && r.chunk == *chunk
                && r.start_bytes as usize + r.bytes.len() == self.pos as usize
        });
        if !extends {
            let run = Run {
                seg: seg.clone(),
                chunk: *chunk,
                start_bytes: self.pos,
                bytes: self.spare.pop().unwrap_or_default(),
                records: 0,
            };
            self.runs.push(run);
        }
        if let Some(run) = self.runs.last_mut() {
            run.bytes.extend_from_slice(bytes);
            run.records += 1;
        }
        self.pos += bytes.len() as u32;
    }
}

/// A worker slot's log state.
#[derive(Debug)]
pub(crate) struct SlotLog {
    /// The `appended` value a completed sync covered (written under `sync_lock`).
    covered: AtomicU64,
    /// The number of the completed round that last covered new records of this slot (released
    /// its committer).
    released: AtomicU64,
    /// Process mode: the slot's chunk. Sync mode: only its record buffer.
    writer: Mutex<ChunkWriter>,
}

impl Default for SlotLog {
    fn default() -> Self {
        SlotLog {
            covered: AtomicU64::new(0),
            released: AtomicU64::new(0),
            writer: Mutex::new(ChunkWriter::default()),
        }
    }
}

/// Counters of the log.
#[derive(Debug, Default)]
pub(crate) struct LogStats {
    pub(crate) fsyncs: AtomicU64,
    pub(crate) rounds: AtomicU64,
    pub(crate) records: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) log_full_waits: AtomicU64,
}

/// Test-only switches that break the marker, for the negative tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarkerShortcuts {
    /// Committers return without waiting for the marker to cover them.
    pub skip_marker_wait: bool,
    /// The marker ignores committers that drew (or are drawing) a timestamp but have not
    /// appended yet.
    pub ignore_pending: bool,
}

/// Creates segment files, and keeps one created ahead of need.
///
/// Creating a segment writes and flushes `chunks * chunk_bytes` of zeros (about 20 ms for
/// 16 MiB here). In sync mode the stream claims chunks under its lock, so a segment created
/// inline would stall every committer for that long; the preallocation thread creates the
/// next segment (the **spare**) as soon as the previous spare is taken. The `spare` lock is
/// held for every creation, so sequence numbers are handed out in the order segments join
/// the log. A spare that is never used holds no records; recovery deletes it with the rest.
#[derive(Debug)]
struct SegmentMaker {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    mode: Mode,
    chunk_bytes: u32,
    chunks_per_segment: u32,
    next_seq: AtomicU64,
    spare: Mutex<Option<Arc<Segment>>>,
    wanted: Mutex<Wanted>,
    wanted_cv: Condvar,
    preallocating: bool,
}

/// What the preallocation thread is asked to do.
#[derive(Debug, Default)]
struct Wanted {
    spare: bool,
    stop: bool,
}

impl SegmentMaker {
    /// Creates, preallocates and syncs a new segment file.
    fn create(&self) -> Result<Arc<Segment>, DurableError> {
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let header = SegmentHeader {
            seq,
            chunk_bytes: self.chunk_bytes,
            chunks: self.chunks_per_segment,
            marked: self.mode == Mode::Sync,
        };
        let path = segment_file(&self.dir, seq);
        // Built under a temporary name and renamed when complete: a crash in between leaves
        // a `.tmp` file recovery ignores, never a half-written segment.
        let mut tmp_name = path.clone().into_os_string();
        tmp_name.push(".tmp");
        let tmp = PathBuf::from(tmp_name);
        let err = |op| {
            let path = path.clone();
            move |source| DurableError::Io { op, path, source }
        };
        let file = self.storage.create(&tmp).map_err(err("create"))?;
        let fill = || -> Result<(), DurableError> {
            file.write_at(&header.encode(), 0).map_err(err("write"))?;
            // Zero-fill rather than fallocate: overwriting written blocks lets fdatasync skip the
            // extent-conversion metadata that unwritten extents would need.
            let zeros = vec![0u8; ZERO_FILL_BYTES];
            let mut at = SEGMENT_HEADER_BYTES;
            while at < header.file_bytes() {
                let n = (header.file_bytes() - at).min(ZERO_FILL_BYTES as u64) as usize;
                file.write_at(&zeros[..n], at).map_err(err("preallocate"))?;
                at += n as u64;
            }
            file.sync_data().map_err(err("fdatasync"))?;
            Ok(())
        };
        if let Err(e) = fill() {
            // Best effort: a full disk should not keep the half-written file.
            let _ = self.storage.remove(&tmp);
            return Err(e);
        }
        self.storage.rename(&tmp, &path).map_err(err("rename"))?;
        self.storage.sync_dir(&self.dir).map_err(err("fsync directory"))?;
        let seg = Arc::new(Segment {
            path,
            file,
            header,
            next_chunk: AtomicU32::new(0),
            dirty: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            sealed: AtomicU32::new(0),
            max_ts: AtomicU64::new(0),
        });
        Ok(seg)
    }

    /// The next segment of the log: the spare if one is ready (or being created), else a new
    /// one created here; then asks for the next spare.
    fn next(&self) -> Result<Arc<Segment>, DurableError> {
        let mut spare = lock(&self.spare);
        let seg = match spare.take() {
            Some(seg) => seg,
            None => self.create()?,
        };
        drop(spare);
        if self.preallocating {
            lock(&self.wanted).spare = true;
            self.wanted_cv.notify_one();
        }
        Ok(seg)
    }

    /// The preallocation thread: creates a spare whenever one is wanted, until told to stop.
    /// A failure (a full disk) is left for the inline creation to meet and report.
    fn preallocate_loop(&self) {
        loop {
            let mut w = lock(&self.wanted);
            while !w.spare && !w.stop {
                w = match self.wanted_cv.wait(w) {
                    Ok(w) => w,
                    Err(e) => e.into_inner(),
                };
            }
            if w.stop {
                return;
            }
            w.spare = false;
            drop(w);
            let mut spare = lock(&self.spare);
            if spare.is_none() {
                *spare = self.create().ok();
            }
        }
    }

    /// Stops the preallocation thread (joined by the caller) and removes an unused spare.
    fn stop(&self) {
        lock(&self.wanted).stop = true;
        self.wanted_cv.notify_one();
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        self.maker.stop();
        if let Some(t) = self.preallocator.take() {
            let _ = t.join();
        }
        if let Some(seg) = lock(&self.maker.spare).take() {
            // Best effort: recovery deletes an unused spare anyway.
            let _ = self.storage.remove(&seg.path);
        }
    }
}

/// All threads' logs of one database.
#[derive(Debug)]
pub(crate) struct Log {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    mode: Mode,
    chunk_bytes: u32,
    flush_after_commit: bool,
    group_wait: Duration,
    pub(crate) shortcuts: MarkerShortcuts,
    segments: Mutex<Vec<Arc<Segment>>>,
    maker: Arc<SegmentMaker>,
    /// The preallocation thread, if any (see [`SegmentMaker`]).
    preallocator: Option<std::thread::JoinHandle<()>>,
    slots: Box<[CachePadded<SlotLog>]>,
    /// Per slot: the lower bound and the last logged timestamp (`crate::marker`).
    marks: MarkerSlots,
    /// Sync mode: the stream all records are staged to.
    stream: Mutex<Stream>,
    marker: AtomicU64,
    sync_lock: Mutex<Vec<u64>>,
    /// Rounds that advanced the marker (written under `sync_lock`).
    completed: AtomicU64,
    /// Nanoseconds the last round's flush took.
    flush_ns: AtomicU64,
    /// A leader is gathering: appenders wake it (see [`Log::gather`]).
    gathering: AtomicBool,
    gather_wake: (Mutex<()>, Condvar),
    wake: (Mutex<()>, Condvar),
    /// Signalled when the checkpointer deletes segments.
    room: (Mutex<()>, Condvar),
    segments_max: usize,
    poisoned: AtomicBool,
    pub(crate) stats: LogStats,
}

/// Settings of a [`Log`].
pub(crate) struct LogSettings {
    pub(crate) mode: Mode,
    pub(crate) chunk_bytes: u32,
    pub(crate) chunks_per_segment: u32,
    pub(crate) flush_after_commit: bool,
    pub(crate) group_wait: Duration,
    pub(crate) segments_max: usize,
    pub(crate) preallocate: bool,
    pub(crate) shortcuts: MarkerShortcuts,
}

impl Log {
    pub(crate) fn new(
        storage: Arc<dyn Storage>,
        dir: &Path,
        threads: usize,
        first_seq: u64,
        marker: u64,
        s: LogSettings,
    ) -> Self {
        let maker = Arc::new(SegmentMaker {
            storage: storage.clone(),
            dir: dir.to_path_buf(),
            mode: s.mode,
            chunk_bytes: s.chunk_bytes,
            chunks_per_segment: s.chunks_per_segment,
            next_seq: AtomicU64::new(first_seq),
            spare: Mutex::new(None),
            wanted: Mutex::new(Wanted::default()),
            wanted_cv: Condvar::new(),
            preallocating: s.preallocate,
        });
        // Without a thread the log still works: every segment is then created inline.
        let preallocator = if s.preallocate {
            let m = maker.clone();
            std::thread::Builder::new()
                .name("ordo-log-prealloc".into())
                .spawn(move || m.preallocate_loop())
                .ok()
        } else {
            None
        };
        Log {
            storage,
            dir: dir.to_path_buf(),
            mode: s.mode,
            chunk_bytes: s.chunk_bytes,
            flush_after_commit: s.flush_after_commit,
            group_wait: s.group_wait,
            shortcuts: s.shortcuts,
            segments: Mutex::new(Vec::new()),
            maker,
            preallocator,
            slots: (0..threads).map(|_| CachePadded::new(SlotLog::default())).collect(),
            marks: MarkerSlots::new(threads),
            stream: Mutex::new(Stream::default()),
            marker: AtomicU64::new(marker),
            sync_lock: Mutex::new(vec![0; threads]),
            completed: AtomicU64::new(0),
            flush_ns: AtomicU64::new(0),
            gathering: AtomicBool::new(false),
            gather_wake: (Mutex::new(()), Condvar::new()),
            wake: (Mutex::new(()), Condvar::new()),
            room: (Mutex::new(()), Condvar::new()),
            segments_max: s.segments_max,
            poisoned: AtomicBool::new(false),
            stats: LogStats::default(),
        }
    }

    /// The in-memory durable marker: every record at or below it is on stable storage.
    pub(crate) fn marker(&self) -> u64 {
        // Acquire: pairs with the Release fetch_max after the round's flush.
        self.marker.load(Ordering::Acquire)
    }

    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    fn check_poison(&self) -> Result<(), DurableError> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(DurableError::Poisoned);
        }
        Ok(())
    }

    fn poison<T>(&self, e: DurableError) -> Result<T, DurableError> {
        self.poisoned.store(true, Ordering::Release);
        Err(e)
    }

    /// Step before `get_ts`: publish a lower bound of the coming write timestamp (the marker
    /// and the process-mode checkpoint bound stay below it until the record is appended).
    #[inline]
    pub(crate) fn publish_lower(&self, slot: usize, lower: u64) {
        self.marks.publish_lower(slot, lower);
    }

    /// The commit published a lower bound but will not append (it aborted).
    #[inline]
    pub(crate) fn clear_lower(&self, slot: usize) {
        self.marks.clear_lower(slot);
    }

    /// A fresh chunk for one slot.
    fn claim_chunk(&self) -> Result<(Arc<Segment>, u32), DurableError> {
        let mut segs = lock(&self.segments);
        if let Some(seg) = segs.last() {
            let i = seg.next_chunk.fetch_add(1, Ordering::Relaxed);
            if i < seg.header.chunks {
                return Ok((seg.clone(), i));
            }
        }
        let seg = self.maker.next()?;
        debug_assert!(
            segs.last().is_none_or(|last| last.header.seq < seg.header.seq),
            "segments join the log in sequence order"
        );
        seg.next_chunk.store(1, Ordering::Relaxed);
        segs.push(seg.clone());
        Ok((seg, 0))
    }

    /// Process mode: writes one finished record to the slot's chunk.
    fn write_record(&self, w: &mut SlotChunk, bytes: &[u8]) -> Result<(), DurableError> {
        let record_len = bytes.len();
        self.check_size(record_len)?;
        let fits = w.at.is_some() && w.pos as usize + record_len <= self.chunk_bytes as usize;
        if !fits {
            // Seal first: the checkpointer may be waiting for this chunk to delete its segment.
            if let Some((old, _)) = w.at.take() {
                old.seal();
            }
            self.wait_for_room();
            w.at = Some(self.claim_chunk()?);
            w.pos = 0;
        }
        let (seg, chunk) = w.at.clone().ok_or(DurableError::Poisoned)?;
        let offset = SEGMENT_HEADER_BYTES + chunk as u64 * self.chunk_bytes as u64 + w.pos as u64;
        seg.max_ts.fetch_max(super::format::get_u64(bytes, 16), Ordering::AcqRel);
        if let Err(source) = seg.file.write_at(bytes, offset) {
            // Nothing after this position can be trusted: start a new chunk next time.
            w.at = None;
            seg.seal();
            return Err(DurableError::Io { op: "write", path: seg.path.clone(), source });
        }
        if self.flush_after_commit {
            w.hint = Some((seg.clone(), offset, record_len as u64));
        }
        w.pos += record_len as u32;
        debug_assert!(w.pos <= self.chunk_bytes, "a record never spans chunks");
        self.stats.records.fetch_add(1, Ordering::Relaxed);
        self.stats.bytes.fetch_add(record_len as u64, Ordering::Relaxed);
        // Release: pairs with the Acquire load in Segment::sync (the pwrite is done).
        seg.dirty.fetch_add(1, Ordering::Release);
        Ok(())
    }

    fn check_size(&self, record_len: usize) -> Result<(), DurableError> {
        if record_len > self.chunk_bytes as usize {
            return Err(DurableError::RecordTooLarge {
                len_bytes: record_len,
                chunk_bytes: self.chunk_bytes as usize,
            });
        }
        Ok(())
    }

    /// Sync mode: stages finished records (one, or the parts of one transaction) at the
    /// stream's end (module docs, "Sync mode"), moving the stream to new chunks where they do
    /// not fit. Every chunk they need is claimed before the first is staged, so a failure
    /// (no segment can be created) stages nothing: a round never writes half a transaction.
    fn stage(&self, records: &[&[u8]], ts: u64) -> Result<(), DurableError> {
        for r in records {
            self.check_size(r.len())?;
        }
        let cb = self.chunk_bytes as usize;
        let mut waited = false;
        loop {
            let mut st = lock(&self.stream);
            let mut pos = if st.at.is_some() { st.pos as usize } else { cb };
            let mut fresh_needed = 0;
            for r in records {
                if pos + r.len() > cb {
                    fresh_needed += 1;
                    pos = 0;
                }
                pos += r.len();
            }
            if fresh_needed > 0 && !waited && self.log_full() {
                // Wait for the checkpointer without blocking the stream (a round needs it to
                // advance the marker the checkpointer waits for).
                drop(st);
                self.wait_for_room();
                waited = true;
                continue;
            }
            let mut fresh = Vec::with_capacity(fresh_needed);
            for _ in 0..fresh_needed {
                match self.claim_chunk() {
                    Ok(c) => fresh.push(c),
                    Err(e) => {
                        // Unused: sealed at once, so their segment can still be deleted.
                        for (seg, _) in fresh {
                            seg.seal();
                        }
                        return Err(e);
                    }
                }
            }
            let mut fresh = fresh.into_iter();
            for r in records {
                if !st.fits(r.len(), self.chunk_bytes) {
                    st.move_to(fresh.next());
                }
                debug_assert!(st.fits(r.len(), self.chunk_bytes), "a staged record fits its chunk");
                st.push(r, ts);
            }
            debug_assert!(fresh.next().is_none(), "every chunk claimed for the records is used");
            return Ok(());
        }
    }

    /// Seals the stream's chunk and moves the stream to a fresh one. The staged runs of the
    /// old chunk stay staged: the checkpointer does not delete their segment, whose `max_ts`
    /// is above the marker until a round has written them.
    fn next_stream_chunk(&self, st: &mut Stream) -> Result<(), DurableError> {
        st.move_to(Some(self.claim_chunk()?));
        Ok(())
    }

    /// Appends a transaction record built by `fill` (which adds the entries) for `wts`: in
    /// process mode written to the slot's chunk, in sync mode staged to the stream.
    pub(crate) fn append_tx(
        &self,
        slot: usize,
        wts: u64,
        fill: impl FnOnce(&mut RecordBuf),
    ) -> Result<(), DurableError> {
        self.check_poison()?;
        // The marker stays below a published `lower <= wts` until this record is appended
        // (`crate::marker`), and a recovered marker below the clock: no record is logged at or
        // below it. (The negative tests' `ignore_pending` breaks exactly this.)
        debug_assert!(
            self.shortcuts.ignore_pending || wts > self.marker(),
            "a record is logged above the durable marker"
        );
        let s = &self.slots[slot];
        let mut w = lock(&s.writer);
        w.buf.begin(super::format::KIND_TX, wts);
        fill(&mut w.buf);
        let ChunkWriter { chunk, buf, parts } = &mut *w;
        let rec = buf.finish();
        let result = if rec.len() <= self.chunk_bytes as usize {
            match self.mode {
                Mode::Sync => self.stage(&[rec], wts),
                Mode::Process => self.write_record(chunk, rec),
            }
        } else {
            // Too large for a chunk: parts of whole entries (format version 3). In process
            // mode a crash between two parts leaves an incomplete set, which recovery and
            // the checkpointer skip; in sync mode all parts are staged at once.
            parts.clear();
            match super::format::split_record(rec, self.chunk_bytes as usize, parts) {
                Err(entry_bytes) => Err(DurableError::RecordTooLarge {
                    len_bytes: entry_bytes + super::format::PART_OVERHEAD_BYTES,
                    chunk_bytes: self.chunk_bytes as usize,
                }),
                Ok(()) => {
                    let records: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
                    match self.mode {
                        Mode::Sync => self.stage(&records, wts),
                        Mode::Process => {
                            records.iter().try_for_each(|p| self.write_record(chunk, p))
                        }
                    }
                }
            }
        };
        drop(w);
        match result {
            Ok(()) => self.marks.appended(slot, wts),
            Err(_) => self.marks.clear_lower(slot),
        }
        // SeqCst: pairs with gather's SeqCst store of `gathering`. A missed wake-up would only
        // cost the leader its bounded wait.
        if self.gathering.load(Ordering::SeqCst) {
            drop(lock(&self.gather_wake.0));
            self.gather_wake.1.notify_one();
        }
        result
    }

    /// SPHT Alg. 5 line 17, after the commit installed its writes and unlocked: start writeback
    /// of the slot's last record without waiting (`sync_file_range`), so the next group flush
    /// (sync mode) or the kernel (process mode) finds less to write. A no-op unless
    /// `flush_after_commit`.
    pub(crate) fn after_commit(&self, slot: usize) {
        if !self.flush_after_commit {
            return;
        }
        let hint = lock(&self.slots[slot].writer).chunk.hint.take();
        if let Some((seg, offset, len_bytes)) = hint {
            seg.file.start_writeback(offset, len_bytes);
        }
    }

    /// Waits until the marker covers `ts` (sync mode), leading rounds when nobody else does;
    /// `slot` is the waiting committer's (`None`: not a committer, its rounds do not gather).
    pub(crate) fn wait_durable(&self, slot: Option<usize>, ts: u64) -> Result<(), DurableError> {
        if self.mode != Mode::Sync {
            return Ok(());
        }
        loop {
            self.check_poison()?;
            if self.marker() >= ts {
                return Ok(());
            }
            if let Ok(mut scratch) = self.sync_lock.try_lock() {
                if let Some(me) = slot {
                    self.gather(me);
                }
                let progressed = self.round(&mut scratch);
                drop(scratch);
                drop(lock(&self.wake.0));
                self.wake.1.notify_all();
                if !progressed? {
                    // A committer between its timestamp and its append holds the marker back.
                    std::thread::yield_now();
                }
                continue;
            }
            let g = lock(&self.wake.0);
            if self.marker() >= ts {
                return Ok(());
            }
            let _ = self.wake.1.wait_timeout(g, WAIT_SLICE);
        }
    }

    /// Leader/follower batching: before a round, the leader waits (blocked, woken by each
    /// append, at most half the last flush and `group_wait`) until every other committer the
    /// previous round released has appended its next record. Closed-loop committers then share
    /// every flush instead of alternating between two half-full rounds; a committer that stops
    /// committing costs one bounded wait, once. Only a heuristic: correctness does not depend
    /// on it.
    fn gather(&self, me: usize) {
        let k = self.completed.load(Ordering::Relaxed);
        let budget =
            Duration::from_nanos(self.flush_ns.load(Ordering::Relaxed) / 2).min(self.group_wait);
        if k == 0 || budget.is_zero() {
            return;
        }
        let missing = || {
            self.slots.iter().enumerate().any(|(i, s)| {
                i != me
                    && s.released.load(Ordering::Relaxed) == k
                    && self.marks.appended_of(i) <= s.covered.load(Ordering::Relaxed)
            })
        };
        if !missing() {
            return;
        }
        let deadline = Instant::now() + budget;
        // SeqCst: pairs with append_tx's SeqCst load.
        self.gathering.store(true, Ordering::SeqCst);
        let mut g = lock(&self.gather_wake.0);
        while missing() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            g = match self.gather_wake.1.wait_timeout(g, deadline - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        drop(g);
        self.gathering.store(false, Ordering::Relaxed);
    }

    /// One round: see the module docs. Returns whether the marker advanced.
    fn round(&self, seen: &mut [u64]) -> Result<bool, DurableError> {
        self.stats.rounds.fetch_add(1, Ordering::Relaxed);
        // A and B (`crate::marker`).
        let d = self.marks.bound(self.shortcuts.ignore_pending, Some(seen));
        if d <= self.marker() {
            return Ok(false);
        }
        // C. Take every staged run (all records with wts <= D among them, by the claim) and
        // put the marker behind them, naming the other chunks the round writes to.
        let runs = {
            let mut st = lock(&self.stream);
            let mut touched: Vec<ChunkEnd> = Vec::new();
            for r in &st.runs {
                let e = r.end();
                match touched.last_mut() {
                    Some(t) if (t.seq, t.chunk) == (e.seq, e.chunk) => *t = e,
                    _ => touched.push(e),
                }
            }
            let current = st.at.as_ref().map(|(seg, chunk)| (seg.header.seq, *chunk));
            let here = touched.iter().filter(|t| Some((t.seq, t.chunk)) != current).count();
            if !st.fits(marker_len(here), self.chunk_bytes) {
                if let Err(e) = self.next_stream_chunk(&mut st) {
                    return self.poison(e);
                }
            }
            let current = st.at.as_ref().map(|(seg, chunk)| (seg.header.seq, *chunk));
            let mut m = std::mem::take(&mut st.marker);
            m.begin(KIND_MARKER, d);
            for f in touched.iter().filter(|t| Some((t.seq, t.chunk)) != current) {
                m.entry_words(f.seq, [u64::from(f.chunk), u64::from(f.end_bytes)]);
            }
            let rec = m.finish();
            debug_assert!(
                st.fits(rec.len(), self.chunk_bytes),
                "the round's marker fits its chunk"
            );
            st.push(rec, d);
            st.marker = m;
            std::mem::take(&mut st.runs)
        };
        // D. Write the runs in stream order: usually one `pwrite` of the records and the marker.
        let mut written = Ok(());
        for r in &runs {
            if written.is_err() {
                break;
            }
            let offset = SEGMENT_HEADER_BYTES
                + u64::from(r.chunk) * u64::from(self.chunk_bytes)
                + u64::from(r.start_bytes);
            written = r.seg.file.write_at(&r.bytes, offset).map_err(|source| DurableError::Io {
                op: "write",
                path: r.seg.path.clone(),
                source,
            });
            self.stats.records.fetch_add(r.records, Ordering::Relaxed);
            self.stats.bytes.fetch_add(r.bytes.len() as u64, Ordering::Relaxed);
            // Release: pairs with the Acquire load in Segment::sync (the pwrite is done).
            r.seg.dirty.fetch_add(1, Ordering::Release);
        }
        {
            let mut st = lock(&self.stream);
            for mut r in runs {
                r.bytes.clear();
                st.spare.push(r.bytes);
            }
        }
        if let Err(e) = written {
            return self.poison(e);
        }
        // E. One fdatasync per segment with unsynced appends: usually a single one, covering
        // every thread's records and the marker at once.
        let segs: Vec<Arc<Segment>> = lock(&self.segments).clone();
        let flush_start = Instant::now();
        for seg in &segs {
            if let Err(e) = seg.sync(&self.stats) {
                return self.poison(e);
            }
        }
        self.flush_ns.store(flush_start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        let k = self.completed.load(Ordering::Relaxed) + 1;
        self.completed.store(k, Ordering::Relaxed);
        for (i, s) in self.slots.iter().enumerate() {
            if seen[i] > s.covered.load(Ordering::Relaxed) {
                s.released.store(k, Ordering::Relaxed);
            }
            s.covered.store(seen[i], Ordering::Relaxed);
        }
        // Rounds run one at a time (under `sync_lock`), and this one found `d` above it.
        debug_assert!(self.marker() < d, "the durable marker only grows");
        // Release: pairs with marker()'s Acquire; waiters see a flushed marker only.
        self.marker.fetch_max(d, Ordering::Release);
        Ok(true)
    }

    /// Sync mode: runs one round unless a leader is running one, so that commits which did
    /// not wait become durable (the checkpointer, before each checkpoint). Never waits for a
    /// committer that holds the marker back.
    pub(crate) fn round_once(&self) -> Result<(), DurableError> {
        if self.mode != Mode::Sync {
            return Ok(());
        }
        self.check_poison()?;
        if let Ok(mut scratch) = self.sync_lock.try_lock() {
            let r = self.round(&mut scratch);
            drop(scratch);
            drop(lock(&self.wake.0));
            self.wake.1.notify_all();
            r?;
        }
        Ok(())
    }

    /// Makes every record staged so far durable (sync mode; a no-op otherwise), waiting for
    /// committers in flight: at close.
    pub(crate) fn sync_appended(&self) -> Result<(), DurableError> {
        self.wait_durable(None, self.marks.max_appended())
    }

    /// Live segment files (for inspection and checkpointing).
    pub(crate) fn segment_count(&self) -> usize {
        lock(&self.segments).len()
    }

    /// The live segments, oldest first, each with its number of claimed chunks (the others
    /// hold no records), for the checkpointer.
    pub(crate) fn segments_claimed(
        &self,
    ) -> Vec<(PathBuf, Arc<dyn StorageFile>, SegmentHeader, u32)> {
        lock(&self.segments)
            .iter()
            .map(|s| {
                // Relaxed: claims happen under the `segments` lock held here.
                let claimed = s.next_chunk.load(Ordering::Relaxed).min(s.header.chunks);
                (s.path.clone(), s.file.clone(), s.header, claimed)
            })
            .collect()
    }

    /// A timestamp X such that every record with `wts <= X` has been written to its segment:
    /// the marker's A/B computation without the flush (see the module docs).
    pub(crate) fn appended_bound(&self) -> u64 {
        self.marks.bound(false, None)
    }

    /// Deletes every segment whose chunks are all claimed and sealed and whose records are all
    /// at or below the checkpoint `c`. Returns how many were deleted.
    pub(crate) fn delete_below(&self, c: u64) -> Result<usize, DurableError> {
        let mut segs = lock(&self.segments);
        let mut deleted = 0;
        let mut failure = None;
        segs.retain(|seg| {
            let done = failure.is_none()
                && seg.next_chunk.load(Ordering::Acquire) >= seg.header.chunks
                && seg.sealed.load(Ordering::Acquire) >= seg.header.chunks
                && seg.max_ts.load(Ordering::Acquire) <= c;
            if !done {
                return true;
            }
            match self.storage.remove(&seg.path) {
                Ok(()) => {
                    deleted += 1;
                    false
                }
                Err(source) => {
                    failure =
                        Some(DurableError::Io { op: "remove", path: seg.path.clone(), source });
                    true
                }
            }
        });
        drop(segs);
        if let Some(e) = failure {
            return Err(e);
        }
        if deleted > 0 {
            self.storage.sync_dir(&self.dir).map_err(|source| DurableError::Io {
                op: "fsync directory",
                path: self.dir.clone(),
                source,
            })?;
            drop(lock(&self.room.0));
            self.room.1.notify_all();
        }
        Ok(deleted)
    }

    /// Claiming a chunk would create a segment beyond `segments_max`.
    fn log_full(&self) -> bool {
        if self.segments_max == 0 {
            return false;
        }
        let segs = lock(&self.segments);
        segs.len() >= self.segments_max
            && segs.last().is_none_or(|s| s.next_chunk.load(Ordering::Acquire) >= s.header.chunks)
    }

    /// Bounded log: before claiming a chunk in a new segment while `segments_max` segments
    /// exist, wait (up to `LOG_FULL_WAIT_MAX`, counted) for the checkpointer to delete one.
    /// Past the bound the commit goes on rather than deadlock on an idle thread's open chunk.
    fn wait_for_room(&self) {
        let full = || self.log_full();
        if !full() {
            return;
        }
        self.stats.log_full_waits.fetch_add(1, Ordering::Relaxed);
        let deadline = std::time::Instant::now() + LOG_FULL_WAIT_MAX;
        let mut g = lock(&self.room.0);
        while full() && std::time::Instant::now() < deadline {
            g = match self.room.1.wait_timeout(g, WAIT_SLICE * 5) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
    }
}
