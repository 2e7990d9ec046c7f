//! Old versions (FaRMv2 §4.4–4.5): copies of head versions, kept so that transactions with an
//! older read timestamp can still read a consistent snapshot.
//!
//! When a committing transaction locks an object in multi-version mode it copies the head version
//! (header, length, payload) into old-version memory and, at install, points the new head's
//! old-version pointer (OVP) at the copy. Each object's versions thus form a list in decreasing
//! timestamp order. A reader whose `rts` is older than the head walks the list to the newest
//! version `<= rts`; if the list ends first the read aborts (the history was truncated or never
//! existed).
//!
//! Old-version memory comes in 1 MiB **blocks** (FaRMv2 §4.5). A worker owns one active block and
//! bump-allocates copies in it: one comparison and one addition. Each block records its **GC
//! time**, the largest write timestamp of the transactions whose copies it holds (the moment
//! those copies stopped being heads). A block whose GC time is below the GC safe point can be
//! recycled whole, since every reader with `rts >= GC` stops at a newer version before reaching
//! it. Recycling arrives with the GC (next issue); until then blocks live as long as the database,
//! bounded by `blocks_max`, after which the *truncate* policy applies: the new head gets no old
//! version and older readers of that object abort.
//!
//! # Layout of a copy
//! ```text
//! word 0: header of the copied version (ALLOC | ts; never LOCK)
//! word 1: 63..40 payload length in bytes | 39..0 OVP of the next older copy (0 = end)
//! word 2.. payload
//! ```
//! An OVP is `block << 17 | word offset`; block ids start at 1 so that 0 means "none".
//!
//! # Invariants
//! * A copy is written completely before the `Release` store that installs the head pointing at
//!   it; readers reach it only through that head (or an older copy), so they see it complete.
//! * Copies are immutable until their block is recycled.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use ordo_clock::Timestamp;

use crate::heap::memory::RegionMemory;
use crate::object::{HEADER_WORDS, Header, ObjectRef};

/// Words in one old-version block (1 MiB).
pub(crate) const BLOCK_WORDS: usize = 1 << 17;
const OFFSET_BITS: u32 = 17;
/// The largest block id an OVP can name.
const BLOCK_ID_MAX: usize = (1 << (40 - OFFSET_BITS)) - 1;

const _: () = assert!(BLOCK_WORDS == 1 << OFFSET_BITS);
/// The largest object (header + 256 KiB) fits a block.
const _: () = assert!(HEADER_WORDS + crate::heap::OBJECT_BYTES_MAX / 8 <= BLOCK_WORDS);

struct Block {
    memory: RegionMemory,
    /// Largest write timestamp whose copies this block holds (its GC time).
    gc_ts: AtomicU64,
}

/// A worker's active block and bump pointer.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Cursor {
    block: u32,
    next_word: u32,
}

/// All old-version memory of a database.
pub(crate) struct VersionArena {
    blocks: Box<[OnceLock<Block>]>,
    next_block: Mutex<usize>,
}

/// A copy found by [`VersionArena::find`].
pub(crate) struct OldVersion {
    pub(crate) header: Header,
    pub(crate) len_bytes: usize,
}

impl VersionArena {
    /// An arena of at most `blocks_max` blocks.
    pub(crate) fn new(blocks_max: usize) -> Self {
        let blocks_max = blocks_max.min(BLOCK_ID_MAX);
        VersionArena {
            blocks: (0..=blocks_max).map(|_| OnceLock::new()).collect(),
            next_block: Mutex::new(1),
        }
    }

    fn block(&self, id: u32) -> Option<&Block> {
        self.blocks.get(id as usize)?.get()
    }

    /// Blocks created so far.
    pub(crate) fn blocks_in_use(&self) -> usize {
        *self.next_block.lock().unwrap_or_else(|e| e.into_inner()) - 1
    }

    fn new_block(&self) -> Option<u32> {
        let mut next = self.next_block.lock().unwrap_or_else(|e| e.into_inner());
        let id = *next;
        if id >= self.blocks.len() {
            return None;
        }
        let memory = RegionMemory::anonymous(BLOCK_WORDS * 8).ok()?;
        if self.blocks[id].set(Block { memory, gc_ts: AtomicU64::new(0) }).is_err() {
            return None;
        }
        *next += 1;
        Some(id as u32)
    }

    /// Copies the locked head of `obj` (whose unlocked header was `head`) into the worker's block.
    /// Returns the copy's OVP, or `None` when old-version memory is exhausted.
    pub(crate) fn copy_head(
        &self,
        cursor: &Cell<Cursor>,
        obj: ObjectRef<'_>,
        head: Header,
    ) -> Option<u64> {
        let words = HEADER_WORDS + obj.head_len_bytes().div_ceil(8);
        let mut c = cursor.get();
        if c.block == 0 || c.next_word as usize + words > BLOCK_WORDS {
            c = Cursor { block: self.new_block()?, next_word: 0 };
        }
        let block = self.block(c.block)?;
        let start = c.next_word as usize;
        let dst = &block.memory.words()[start..start + words];
        obj.copy_locked_head(head, dst);
        cursor.set(Cursor { block: c.block, next_word: (start + words) as u32 });
        Some(((c.block as u64) << OFFSET_BITS) | start as u64)
    }

    /// Raises the GC time of the block holding `ovp` to `wts` (its copy stopped being a head).
    pub(crate) fn note_commit(&self, ovp: u64, wts: Timestamp) {
        if let Some(b) = self.block((ovp >> OFFSET_BITS) as u32) {
            // Relaxed: read only by the GC after a propagation round (issue 4), which orders it.
            b.gc_ts.fetch_max(wts.as_nanos(), Ordering::Relaxed);
        }
    }

    /// Walks the list starting at `ovp` to the newest copy with timestamp `<= rts`, copying its
    /// payload into `out`. `None` when the list ends first.
    pub(crate) fn find(
        &self,
        mut ovp: u64,
        rts: Timestamp,
        out: &mut Vec<u64>,
    ) -> Option<OldVersion> {
        while ovp != 0 {
            let block = self.block((ovp >> OFFSET_BITS) as u32)?;
            let start = (ovp & (BLOCK_WORDS as u64 - 1)) as usize;
            let words = block.memory.words();
            // Relaxed loads: copies are immutable and were published by the Release store of a
            // head this reader acquired (see the module invariants).
            let header = Header::from_raw(words.get(start)?.load(Ordering::Relaxed));
            let w1 = words.get(start + 1)?.load(Ordering::Relaxed);
            let (len_bytes, next) = crate::object::split_word1(w1);
            if header.ts() <= rts {
                let payload = words
                    .get(start + HEADER_WORDS..start + HEADER_WORDS + len_bytes.div_ceil(8))?;
                out.clear();
                out.extend(payload.iter().map(|w| w.load(Ordering::Relaxed)));
                return Some(OldVersion { header, len_bytes });
            }
            ovp = next;
        }
        None
    }
}
