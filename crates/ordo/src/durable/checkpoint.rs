//! The checkpointer: replays durable log records into the heap files while the database runs
//! (DESIGN §5 "checkpointer", SPHT's log replayer), so logs can be deleted and recovery stays
//! short.
//!
//! One checkpoint, up to `X` = the durable marker (sync mode) or the appended bound (process
//! mode: every record at or below it is in the OS; see the log module):
//! 1. read, in every claimed chunk of the live segments, only the records after the chunk's
//!    **replay offset** (the end of the chunk's prefix of records at or below the last
//!    checkpoint, kept per chunk) and collect those with `C < wts <= X`. A chunk is read in
//!    blocks until its first zero or bad record (a record being appended fails its checksum:
//!    it is above X). The offset moves past a record only when every record before it in the
//!    chunk is at or below X (records of a chunk are nearly in timestamp order — a
//!    slot's in process mode, the stream's in staging order in sync mode — and a later record
//!    at or below X is replayed even behind one above X), and only once
//!    the checkpoint is persisted;
//! 2. **backward filtering**: only the newest image of each address is kept (images are whole
//!    objects, so older ones are dead);
//! 3. write the images to the heap files with `pwrite`, the address space split in disjoint
//!    ranges across `replay_threads` threads, then `fdatasync` the heap files;
//! 4. persist `C = X` atomically (the file's second timestamp `H = X` was persisted before
//!    step 3, so an interrupted checkpoint still tells recovery how new the heap may be), and
//!    delete every segment all of whose chunks are sealed and
//!    whose records are all at or below `C`.
//!
//! The heap files are the working copy's `MAP_PRIVATE` backing. A page the working copy has
//! already written is private and does not see the `pwrite`; a page it has not written shows
//! the file, and the file only ever receives the newest committed image of an object whose
//! writer locked it (its header page is private) before logging — so a reader sees either the
//! lock or the same bytes the install writes.
//!
//! Each step is idempotent and C is persisted only after the heap files are synced, so a crash
//! anywhere leaves recovery with C' <= the images on disk and the records above C' in the logs.

use std::collections::HashMap;
use std::path::Path;

use rustc_hash::FxHashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::format::{self, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES};
use super::io::{Storage, StorageFile};
use super::log::Log;
use super::recovery;
use super::{DurableError, Mode};
use crate::addr::Addr;

/// What one checkpoint did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointReport {
    /// The checkpoint timestamp after it.
    pub checkpoint_ts: u64,
    /// Records replayed.
    pub records: u64,
    /// Object images written after backward filtering.
    pub images: u64,
    /// Segment files deleted.
    pub segments_deleted: usize,
    /// Bytes of log read (only what earlier checkpoints had not replayed).
    pub bytes_read: u64,
}

/// The checkpointer's state (one checkpoint at a time).
#[derive(Debug)]
pub(crate) struct Checkpointer {
    c: AtomicU64,
    heap_max: AtomicU64,
    lock: Mutex<()>,
    /// Replay offset per `(segment seq, chunk)`: every record before it is at or below C.
    offsets: Mutex<HashMap<(u64, u32), u32>>,
    pub(crate) replay_threads: usize,
    pub(crate) runs: AtomicU64,
    pub(crate) errors: AtomicU64,
}

impl Checkpointer {
    pub(crate) fn new(c: u64, replay_threads: usize) -> Self {
        Checkpointer {
            c: AtomicU64::new(c),
            heap_max: AtomicU64::new(c),
            lock: Mutex::new(()),
            offsets: Mutex::new(HashMap::new()),
            replay_threads: replay_threads.max(1),
            runs: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    /// The current checkpoint timestamp.
    pub(crate) fn ts(&self) -> u64 {
        self.c.load(Ordering::Acquire)
    }

    fn heap_max_ts(&self) -> u64 {
        self.heap_max.load(Ordering::Acquire)
    }

    /// Runs one checkpoint (see the module docs).
    pub(crate) fn run(
        &self,
        log: &Log,
        storage: &dyn Storage,
        dir: &Path,
    ) -> Result<CheckpointReport, DurableError> {
        let _one = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let result = self.run_locked(log, storage, dir);
        self.runs.fetch_add(1, Ordering::Relaxed);
        if result.is_err() {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    fn run_locked(
        &self,
        log: &Log,
        storage: &dyn Storage,
        dir: &Path,
    ) -> Result<CheckpointReport, DurableError> {
        let x = match log.mode() {
            Mode::Sync => {
                // Commits that did not wait for the marker become durable here at the latest.
                log.round_once()?;
                log.marker()
            }
            Mode::Process => log.appended_bound(),
        };
        let c = self.ts();
        let mut report = CheckpointReport { checkpoint_ts: c, ..CheckpointReport::default() };
        if x > c {
            let segments = log.segments_claimed();
            let mut offsets = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
            // Forget the chunks of deleted segments.
            offsets.retain(|(seq, _), _| segments.iter().any(|s| s.2.seq == *seq));
            // 1. Read each claimed chunk from its replay offset on.
            let mut tails = Vec::new();
            for (path, file, header, claimed) in &segments {
                for ch in 0..*claimed {
                    let from = offsets.get(&(header.seq, ch)).copied().unwrap_or(0);
                    debug_assert!(from <= header.chunk_bytes, "a replay offset lies in its chunk");
                    let chunk_at =
                        SEGMENT_HEADER_BYTES + u64::from(ch) * u64::from(header.chunk_bytes);
                    let tail = read_records(&**file, path, chunk_at, from, header.chunk_bytes)?;
                    report.bytes_read += tail.len() as u64;
                    tails.push(((header.seq, ch), from, tail));
                }
            }
            // 2. Newest image per address among C < wts <= X; the new replay offsets.
            let mut newest: FxHashMap<u64, (u64, &[u8])> = FxHashMap::default();
            let mut parts: FxHashMap<u64, (u64, Vec<format::RecordView<'_>>)> =
                FxHashMap::default();
            let mut advanced = Vec::new();
            for (key, from, tail) in &tails {
                let mut pos = 0;
                let mut prefix = true;
                while let Ok(r) = format::view_record(&tail[pos..]) {
                    pos += r.len_bytes();
                    let replayed = !r.is_tx() || r.ts <= x;
                    if replayed && prefix {
                        advanced.push((*key, *from + pos as u32));
                    }
                    prefix &= replayed;
                    if !r.is_tx() || r.ts <= c || r.ts > x {
                        continue;
                    }
                    report.records += 1;
                    if let Some((_, count)) = r.part() {
                        // Applied below once all its parts are known to be here.
                        parts.entry(r.ts).or_insert((count, Vec::new())).1.push(r);
                        continue;
                    }
                    for (addr, image) in r.writes() {
                        let e = newest.entry(addr).or_insert((0, image));
                        if r.ts >= e.0 {
                            *e = (r.ts, image);
                        }
                    }
                }
            }
            // A transaction logged in parts: every part with `wts <= X` was written before X
            // was computed, so a set with parts missing is a failed commit's (process mode),
            // never applied.
            for (ts, (count, set)) in &parts {
                if set.len() as u64 != *count {
                    continue;
                }
                for r in set {
                    for (addr, image) in r.writes() {
                        let e = newest.entry(addr).or_insert((0, image));
                        if *ts >= e.0 {
                            *e = (*ts, image);
                        }
                    }
                }
            }
            // Announce the newest version the heap files may hold before writing any.
            format::write_checkpoint(
                storage,
                dir,
                format::Checkpoint { ts: c, heap_max_ts: x.max(self.heap_max_ts()) },
            )?;
            // 3. Write the images: disjoint address ranges per replay thread.
            let mut images: Vec<(u64, &[u8])> =
                newest.into_iter().map(|(a, (_, i))| (a, i)).collect();
            images.sort_unstable_by_key(|(a, _)| *a);
            debug_assert!(
                images.windows(2).all(|w| w[0].0 < w[1].0),
                "backward filtering leaves one image per address"
            );
            report.images = images.len() as u64;
            let mut regions: Vec<u16> =
                images.iter().map(|(a, _)| Addr::from_raw(*a).region()).collect();
            regions.dedup();
            let mut files = FxHashMap::default();
            for r in &regions {
                let path = format::region_file(dir, *r);
                let f = storage.open(&path, true).map_err(|source| DurableError::Io {
                    op: "open",
                    path: path.clone(),
                    source,
                })?;
                files.insert(*r, (path, f));
            }
            let per = images.len().div_ceil(self.replay_threads).max(1);
            std::thread::scope(|s| {
                let handles: Vec<_> = images
                    .chunks(per)
                    .map(|part| {
                        let files = &files;
                        s.spawn(move || recovery::write_images(files, part))
                    })
                    .collect();
                handles
                    .into_iter()
                    .try_for_each(|h| h.join().unwrap_or(Err(DurableError::Poisoned)))
            })?;
            for (path, f) in files.values() {
                f.sync_data().map_err(|source| DurableError::Io {
                    op: "fdatasync",
                    path: path.clone(),
                    source,
                })?;
            }
            // 4. Persist C.
            format::write_checkpoint(
                storage,
                dir,
                format::Checkpoint { ts: x, heap_max_ts: x.max(self.heap_max_ts()) },
            )?;
            self.heap_max.fetch_max(x, Ordering::AcqRel);
            // Checkpoints run one at a time (under `lock`), and this one found X above C.
            debug_assert!(self.ts() < x, "the checkpoint timestamp only grows");
            debug_assert!(self.heap_max_ts() >= x, "no heap image is newer than H");
            // Release: pairs with ts()'s Acquire.
            self.c.store(x, Ordering::Release);
            report.checkpoint_ts = x;
            // Every record before the new offsets is at or below the persisted C.
            for (key, at) in advanced {
                let before = offsets.insert(key, at);
                debug_assert!(before.is_none_or(|b| b <= at), "replay offsets only move forward");
            }
        }
        report.segments_deleted = log.delete_below(self.ts())?;
        Ok(report)
    }
}

/// Bytes read per call while following a chunk's records.
const READ_BLOCK_BYTES: u32 = 64 << 10;

/// Reads the records of the chunk at `chunk_at` of `file` from byte `from` of the chunk on,
/// in blocks, up to its first zero or bad record; returns the bytes of those records.
fn read_records(
    file: &dyn StorageFile,
    path: &Path,
    chunk_at: u64,
    from: u32,
    chunk_bytes: u32,
) -> Result<Vec<u8>, DurableError> {
    let room = (chunk_bytes - from.min(chunk_bytes)) as usize;
    let mut buf: Vec<u8> = Vec::new();
    let mut parsed = 0usize;
    loop {
        // How many bytes the record at `parsed` needs in the buffer.
        let avail = buf.len() - parsed;
        let need = if avail >= RECORD_HEADER_BYTES {
            let len = format::get_u32(&buf[parsed..], 4) as usize;
            if len > avail && parsed + len <= room { len } else { 0 }
        } else if buf.len() < room {
            RECORD_HEADER_BYTES
        } else {
            0
        };
        if need > 0 {
            let have = buf.len();
            let want = (parsed + need).max(have + READ_BLOCK_BYTES as usize).min(room);
            buf.resize(want, 0);
            file.read_at(&mut buf[have..], chunk_at + u64::from(from) + have as u64).map_err(
                |source| DurableError::Io { op: "read", path: path.to_path_buf(), source },
            )?;
            continue;
        }
        match format::view_record(&buf[parsed..]) {
            Ok(r) => parsed += r.len_bytes(),
            Err(_) => {
                buf.truncate(parsed);
                debug_assert!(buf.len() <= room, "a chunk's records end inside it");
                return Ok(buf);
            }
        }
    }
}
