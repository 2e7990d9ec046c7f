//! Per-thread redo logs and the group-commit marker (SPHT Alg. 3 and 4 on files).
//!
//! The log writes transaction records (`append_tx`) to preallocated segment files, in one of
//! two layouts, and in sync mode makes them durable in group-commit rounds:
//!
//! * [`segment`] — the segment files: creation ahead of need (the preallocation thread,
//!   stopped when the log is dropped), claiming chunks, the bound on live segments, and
//!   deletion below the checkpoint.
//! * [`chunk`] — process mode: each worker slot writes its records to its own chunk; records
//!   larger than a chunk are split into parts.
//! * [`stream`] — sync mode: committers stage their records to one log stream, written by the
//!   rounds.
//! * [`round`] — sync mode: the durable marker and the group-commit round (leader, batching,
//!   flush); the marker's bound itself is [`crate::durable::marker`].
//!
//! This module holds the [`Log`] and its per-slot state, and the append path shared by both
//! modes.
//!
//! # Invariants
//! * The durable marker only grows, and every record with `wts <= marker` is on stable storage.
//! * In sync mode only a round leader (under `sync_lock`) writes to the segments, at the
//!   stream's end; the stream's bytes are written in the order they were staged.
//! * A failed `write` or `fdatasync` of a round poisons the log (no retry: the kernel may have
//!   dropped the pages); every later durable commit fails.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::durable::marker::MarkerSlots;

use super::format::RecordBuf;
use super::io::Storage;
use super::{DurableError, Mode};

mod chunk;
mod round;
mod segment;
mod stream;

use chunk::ChunkWriter;
use segment::{Segment, SegmentMaker, Wanted};
use stream::Stream;

/// The longest a waiter sleeps before checking the marker again.
const WAIT_SLICE: Duration = Duration::from_micros(200);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
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
    /// Per slot: the lower bound and the last logged timestamp (`crate::durable::marker`).
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
    /// The longest a commit waits for room in a full log.
    full_wait: Duration,
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
    pub(crate) full_wait: Duration,
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
            full_wait: s.full_wait,
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
        // (`crate::durable::marker`), and a recovered marker below the clock: no record is
        // logged at or below it. (The negative tests' `ignore_pending` breaks exactly this.)
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
}
