//! Log segment files: preallocated files of `chunks` chunks of `chunk_bytes` each, shared by
//! the chunks of all threads (process mode) or of the stream (sync mode).
//!
//! A segment is created ahead of need by the preallocation thread ([`SegmentMaker`]), joins
//! the log in sequence order when its first chunk is claimed, and is deleted by the
//! checkpointer once every chunk is claimed and sealed and its records are all at or below
//! the checkpoint. With `segments_max` set, a commit that would claim a chunk beyond the bound
//! waits (bounded) for the checkpointer first.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::durable::format::{SEGMENT_HEADER_BYTES, SegmentHeader, segment_file};
use crate::durable::io::{Storage, StorageFile};
use crate::durable::{DurableError, Mode};

use super::{Log, LogStats, WAIT_SLICE, lock};

/// Bytes of zeros written per call when preallocating a segment.
const ZERO_FILL_BYTES: usize = 1 << 20;

/// A log segment file shared by the chunks of all threads.
#[derive(Debug)]
pub(crate) struct Segment {
    pub(super) path: PathBuf,
    pub(super) file: Arc<dyn StorageFile>,
    pub(super) header: SegmentHeader,
    next_chunk: AtomicU32,
    /// Appends so far; `synced` is the count the last completed sync covered.
    pub(super) dirty: AtomicU64,
    synced: AtomicU64,
    /// Chunks whose writer moved on (no more appends): with every chunk claimed and sealed,
    /// the segment is deleted once the checkpoint passes `max_ts`.
    sealed: AtomicU32,
    /// The largest timestamp of a record in the segment.
    pub(super) max_ts: AtomicU64,
}

impl Segment {
    /// One of its chunks gets no more records (the checkpointer deletes the segment once all
    /// are sealed and below the checkpoint).
    pub(super) fn seal(&self) {
        // AcqRel: pairs with the Acquire load in `delete_below`.
        let before = self.sealed.fetch_add(1, Ordering::AcqRel);
        // Chunk accounting: sealed <= claimed <= chunks. Relaxed: the sealing thread claimed
        // the chunk itself (or under the stream lock it holds).
        let claimed = self.next_chunk.load(Ordering::Relaxed).min(self.header.chunks);
        debug_assert!(before < claimed, "a chunk is sealed once, after it was claimed");
    }

    pub(super) fn sync(&self, stats: &LogStats) -> Result<(), DurableError> {
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

/// Creates segment files, and keeps one created ahead of need.
///
/// Creating a segment writes and flushes `chunks * chunk_bytes` of zeros (about 20 ms for
/// 16 MiB here). In sync mode the stream claims chunks under its lock, so a segment created
/// inline would stall every committer for that long; the preallocation thread creates the
/// next segment (the **spare**) as soon as the previous spare is taken. The `spare` lock is
/// held for every creation, so sequence numbers are handed out in the order segments join
/// the log. A spare that is never used holds no records; recovery deletes it with the rest.
#[derive(Debug)]
pub(super) struct SegmentMaker {
    pub(super) storage: Arc<dyn Storage>,
    pub(super) dir: PathBuf,
    pub(super) mode: Mode,
    pub(super) chunk_bytes: u32,
    pub(super) chunks_per_segment: u32,
    pub(super) next_seq: AtomicU64,
    pub(super) spare: Mutex<Option<Arc<Segment>>>,
    pub(super) wanted: Mutex<Wanted>,
    pub(super) wanted_cv: Condvar,
    pub(super) preallocating: bool,
}

/// What the preallocation thread is asked to do.
#[derive(Debug, Default)]
pub(super) struct Wanted {
    pub(super) spare: bool,
    pub(super) stop: bool,
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
    pub(super) fn preallocate_loop(&self) {
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

impl Log {
    /// A fresh chunk for one slot.
    pub(super) fn claim_chunk(&self) -> Result<(Arc<Segment>, u32), DurableError> {
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
    pub(super) fn log_full(&self) -> bool {
        if self.segments_max == 0 {
            return false;
        }
        let segs = lock(&self.segments);
        segs.len() >= self.segments_max
            && segs.last().is_none_or(|s| s.next_chunk.load(Ordering::Acquire) >= s.header.chunks)
    }

    /// Bounded log: before claiming a chunk in a new segment while `segments_max` segments
    /// exist, wait (up to `full_wait`, counted) for the checkpointer to delete one.
    /// Past the bound the commit goes on rather than deadlock on an idle thread's open chunk.
    pub(super) fn wait_for_room(&self) {
        let full = || self.log_full();
        if !full() {
            return;
        }
        self.stats.log_full_waits.fetch_add(1, Ordering::Relaxed);
        let deadline = std::time::Instant::now() + self.full_wait;
        let mut g = lock(&self.room.0);
        while full() && std::time::Instant::now() < deadline {
            g = match self.room.1.wait_timeout(g, WAIT_SLICE * 5) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
    }
}
