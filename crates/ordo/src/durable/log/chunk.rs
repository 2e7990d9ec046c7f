//! Process-mode chunks: each worker slot's own extent of a segment.
//!
//! # Process mode: per-thread chunks
//! Each worker slot appends its records to its own **chunk**, a thread-private extent of a
//! preallocated segment file: no shared log, no log lock, one `pwrite` per commit, issued by
//! the committing thread before it unlocks — the page cache survives a process crash
//! (SPHT-eADR Alg. 4). No marker and no flush.
//!
//! # Records larger than a chunk
//! A record never spans chunks (each chunk is checked on its own). A transaction whose record
//! exceeds `chunk_bytes` is split into **parts** of whole entries (`format::split_record`),
//! each a record naming its index and the part count, all with the transaction's `wts`. In
//! process mode the committer writes them one after another, so a crash between two leaves
//! an incomplete set, which recovery and the checkpointer skip; in sync mode all parts are
//! staged at once, every chunk they need claimed first, so a round writes all or none. Only
//! a single object image larger than a chunk is refused (`RecordTooLarge`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::durable::DurableError;
use crate::durable::format::{self, RecordBuf, SEGMENT_HEADER_BYTES};

use super::segment::Segment;
use super::{Log, lock};

#[derive(Debug, Default)]
pub(super) struct ChunkWriter {
    pub(super) chunk: SlotChunk,
    /// The record being built.
    pub(super) buf: RecordBuf,
    /// The parts of a record too large for a chunk (reused).
    pub(super) parts: Vec<Vec<u8>>,
}

/// A process-mode slot's chunk.
#[derive(Debug, Default)]
pub(super) struct SlotChunk {
    at: Option<(Arc<Segment>, u32)>,
    /// Next free byte inside the chunk.
    pos: u32,
    /// The last transaction record (segment, offset, length) awaiting its writeback hint
    /// (`flush_after_commit`).
    hint: Option<(Arc<Segment>, u64, u64)>,
}

impl Log {
    /// Process mode: writes one finished record to the slot's chunk.
    pub(super) fn write_record(&self, w: &mut SlotChunk, bytes: &[u8]) -> Result<(), DurableError> {
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
        seg.max_ts.fetch_max(format::get_u64(bytes, 16), Ordering::AcqRel);
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

    pub(super) fn check_size(&self, record_len: usize) -> Result<(), DurableError> {
        if record_len > self.chunk_bytes as usize {
            return Err(DurableError::RecordTooLarge {
                len_bytes: record_len,
                chunk_bytes: self.chunk_bytes as usize,
            });
        }
        Ok(())
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
}
