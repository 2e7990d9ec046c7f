//! Region memory: page-aligned memory viewed as a slice of `AtomicU64`.
//!
//! This is the only place the heap turns raw memory into typed words. Every access after that is
//! an atomic load or store, so concurrent readers and writers never race in the language's sense.
//! The memory itself is a [`PrivateMemory`] (`crate::mapping`): anonymous zeros for the
//! in-memory heap, or what the durable heap's storage backend made of a region file
//! (`StorageFile::map_private`: a `MAP_PRIVATE` mapping of a real file, or a private copy of a
//! simulated one). The rest of the heap does not know which: it reads through the pointer
//! cached here.

use std::io;
use std::sync::atomic::AtomicU64;

use crate::mapping::PrivateMemory;

/// The memory of one region.
pub(crate) struct RegionMemory {
    /// Keeps the memory alive; never accessed mutably after construction.
    mem: PrivateMemory,
    words: *const AtomicU64,
    len_words: usize,
}

// SAFETY: the memory is only ever accessed through `&[AtomicU64]`, which is Sync (and advised
// through `mem`, which writes nothing); the raw pointer is just a cached view of memory owned by
// `mem`, which lives as long as `self`.
unsafe impl Send for RegionMemory {}
// SAFETY: as above — shared access is atomic-only.
unsafe impl Sync for RegionMemory {}

impl RegionMemory {
    /// A zero-filled anonymous mapping of `bytes` (a multiple of 8), advised for transparent
    /// huge pages when `huge_pages` is set.
    pub(crate) fn anonymous(bytes: usize, huge_pages: bool) -> io::Result<Self> {
        Ok(Self::new(PrivateMemory::zeroed(bytes, huge_pages)?))
    }

    /// The words of `mem` (its length a multiple of 8): a durable region's working copy, made
    /// by its storage backend.
    pub(crate) fn new(mem: PrivateMemory) -> Self {
        let bytes = mem.len_bytes();
        debug_assert!(bytes.is_multiple_of(8));
        let words = mem.as_ptr().cast::<AtomicU64>();
        debug_assert!(words.is_aligned(), "private memory is page aligned");
        RegionMemory { mem, words, len_words: bytes / 8 }
    }

    /// Faults in `len_bytes` from `offset_bytes` ahead of their first store, leaving their
    /// contents as they are (see [`PrivateMemory::populate_write`]); errors are ignored (the
    /// pages then fault on first use, as without this).
    pub(crate) fn prefault(&self, offset_bytes: usize, len_bytes: usize) {
        let _ = self.mem.populate_write(offset_bytes, len_bytes);
    }

    /// The region's words.
    #[inline]
    pub(crate) fn words(&self) -> &[AtomicU64] {
        // SAFETY: `words` points at `len_words * 8` bytes of page-aligned memory owned by `mem`
        // (it never moves them) and alive for `&self`'s lifetime. `AtomicU64` has the size and
        // alignment of `u64` on every platform with 64-bit atomics, and every bit pattern (zero
        // fill included) is a valid value. No `&mut` to the memory exists after construction,
        // and all accesses through the returned slice are atomic, so no data race is possible.
        unsafe { std::slice::from_raw_parts(self.words, self.len_words) }
    }

    /// Asks the CPU to start loading `words` (a slice of this region's words) into its caches,
    /// so that a read of them soon after finds them there. Only a hint: nothing is read that the
    /// program can observe, nothing faults, and it does nothing off x86-64 or under Miri.
    #[inline]
    pub(crate) fn prefetch(words: &[AtomicU64]) {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            /// Bytes per cache line.
            const LINE_BYTES: usize = 64;
            let Some(bytes) = words.len().checked_mul(8).filter(|&b| b > 0) else { return };
            // Every line the words touch: from the line holding the first word, as many lines
            // as the words' bytes span from that line's start (a plain counted loop: an
            // iterator chain here cost more than the prefetches themselves).
            let first = words.as_ptr().cast::<i8>();
            let skew = first.addr() % LINE_BYTES;
            let lines = (skew + bytes).div_ceil(LINE_BYTES);
            let line0 = first.wrapping_sub(skew);
            for k in 0..lines {
                // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has (it is in the
                // target's baseline features). A prefetch is a hint: it does not fault, reads
                // nothing into the program and writes nothing, so the pointer (computed with
                // wrapping arithmetic, to the start of a line the words touch) is never
                // dereferenced.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(line0.wrapping_add(k * LINE_BYTES)) };
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        let _ = words;
    }
}
