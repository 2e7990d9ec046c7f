//! The checkpointer: replays durable log records into the heap files while the database runs
//! (DESIGN §5 "checkpointer", SPHT's log replayer), so logs can be deleted and recovery stays
//! short.
//!
//! One checkpoint, up to `X` = the durable marker (sync mode) or the appended bound (process
//! mode: every record at or below it is in the OS; see the log module):
//! 1. read the live segments and collect the records with `C < wts <= X`;
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
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::format::{self, KIND_TX, SEGMENT_HEADER_BYTES};
use super::io::Storage;
use super::log::Log;
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
}

/// The checkpointer's state (one checkpoint at a time).
#[derive(Debug)]
pub(crate) struct Checkpointer {
    c: AtomicU64,
    heap_max: AtomicU64,
    lock: Mutex<()>,
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
            Mode::Sync => log.marker(),
            Mode::Process => log.appended_bound(),
        };
        let c = self.ts();
        let mut report = CheckpointReport { checkpoint_ts: c, ..CheckpointReport::default() };
        if x > c {
            // 1–2. Read the segments; newest image per address among C < wts <= X.
            let mut bufs = Vec::new();
            for (path, file, header) in log.segments() {
                let mut b = vec![0u8; header.file_bytes() as usize];
                file.read_at(&mut b, 0).map_err(|source| DurableError::Io {
                    op: "read",
                    path: path.clone(),
                    source,
                })?;
                bufs.push((header, b));
            }
            let mut newest: HashMap<u64, (u64, &[u8])> = HashMap::new();
            for (header, b) in &bufs {
                let cb = header.chunk_bytes as usize;
                for ch in 0..header.chunks as usize {
                    let start = SEGMENT_HEADER_BYTES as usize + ch * cb;
                    let chunk = &b[start..start + cb];
                    let mut pos = 0;
                    // A record being written concurrently fails its checksum: it is above X.
                    while let Ok(r) = format::decode_record(&chunk[pos..]) {
                        pos += r.len_bytes;
                        if r.kind != KIND_TX || r.ts <= c || r.ts > x {
                            continue;
                        }
                        report.records += 1;
                        for (addr, image) in r.entries {
                            let e = newest.entry(addr).or_insert((0, image));
                            if r.ts >= e.0 {
                                *e = (r.ts, image);
                            }
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
            report.images = images.len() as u64;
            let mut regions: Vec<u16> =
                images.iter().map(|(a, _)| Addr::from_raw(*a).region()).collect();
            regions.dedup();
            let mut files = HashMap::new();
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
                        s.spawn(move || -> Result<(), DurableError> {
                            for (addr, image) in part {
                                let a = Addr::from_raw(*addr);
                                let Some((path, f)) = files.get(&a.region()) else { continue };
                                f.write_at(image, a.offset()).map_err(|source| {
                                    DurableError::Io { op: "write", path: path.clone(), source }
                                })?;
                            }
                            Ok(())
                        })
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
            // Release: pairs with ts()'s Acquire.
            self.c.store(x, Ordering::Release);
            report.checkpoint_ts = x;
        }
        report.segments_deleted = log.delete_below(self.ts())?;
        Ok(report)
    }
}
