//! The sync-mode log stream: records staged in stream order, written by the rounds.
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

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::durable::DurableError;
use crate::durable::format::RecordBuf;

use super::segment::Segment;
use super::{Log, lock};

/// Where a round's bytes end in a chunk other than its marker's: a marker names these (its
/// frontier), and recovery trusts the marker only when every named chunk's valid prefix
/// reaches its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ChunkEnd {
    pub(super) seq: u64,
    pub(super) chunk: u32,
    pub(super) end_bytes: u32,
}

/// Staged bytes of the sync-mode stream inside one chunk, not yet written.
#[derive(Debug)]
pub(super) struct Run {
    pub(super) seg: Arc<Segment>,
    pub(super) chunk: u32,
    /// Offset of the run's first byte inside the chunk.
    pub(super) start_bytes: u32,
    pub(super) bytes: Vec<u8>,
    pub(super) records: u64,
}

impl Run {
    pub(super) fn end(&self) -> ChunkEnd {
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
pub(super) struct Stream {
    pub(super) at: Option<(Arc<Segment>, u32)>,
    /// Next free byte inside the current chunk.
    pos: u32,
    /// Staged runs in stream order; a run never spans chunks.
    pub(super) runs: Vec<Run>,
    /// Emptied run buffers, for reuse.
    pub(super) spare: Vec<Vec<u8>>,
    /// The round's marker record.
    pub(super) marker: RecordBuf,
}

impl Stream {
    /// Seals the current chunk and continues in `next`.
    pub(super) fn move_to(&mut self, next: Option<(Arc<Segment>, u32)>) {
        if let Some((old, _)) = self.at.take() {
            old.seal();
        }
        self.at = next;
        self.pos = 0;
    }

    pub(super) fn fits(&self, len: usize, chunk_bytes: u32) -> bool {
        self.at.is_some() && self.pos as usize + len <= chunk_bytes as usize
    }

    /// Appends `bytes` (one record, already known to fit) at the stream's end. The caller
    /// has given the stream a chunk (`stage` claims every chunk it needs before pushing).
    pub(super) fn push(&mut self, bytes: &[u8], ts: u64) {
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

impl Log {
    /// Sync mode: stages finished records (one, or the parts of one transaction) at the
    /// stream's end (module docs, "Sync mode"), moving the stream to new chunks where they do
    /// not fit. Every chunk they need is claimed before the first is staged, so a failure
    /// (no segment can be created) stages nothing: a round never writes half a transaction.
    pub(super) fn stage(&self, records: &[&[u8]], ts: u64) -> Result<(), DurableError> {
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
    pub(super) fn next_stream_chunk(&self, st: &mut Stream) -> Result<(), DurableError> {
        st.move_to(Some(self.claim_chunk()?));
        Ok(())
    }
}
