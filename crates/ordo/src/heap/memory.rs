//! Region memory: a zero-filled mapping viewed as a slice of `AtomicU64`.
//!
//! This is the only place the heap turns raw memory into typed words. Every access after that is
//! an atomic load or store, so concurrent readers and writers never race in the language's sense.
//! Anonymous mappings are the in-memory heap; the durable heap (DESIGN §5) will map a region file
//! `MAP_PRIVATE` here and the rest of the heap will not notice.

use std::io;
use std::sync::atomic::AtomicU64;

/// The memory of one region.
pub(crate) struct RegionMemory {
    /// Keeps the mapping alive; never dereferenced mutably after construction.
    _map: memmap2::MmapMut,
    words: *const AtomicU64,
    len_words: usize,
}

// SAFETY: the mapping is only ever accessed through `&[AtomicU64]`, which is Sync; the raw pointer
// is just a cached view of memory owned by `_map`, which lives as long as `self`.
unsafe impl Send for RegionMemory {}
// SAFETY: as above — shared access is atomic-only.
unsafe impl Sync for RegionMemory {}

impl RegionMemory {
    /// A zero-filled anonymous mapping of `bytes` (a multiple of 8).
    pub(crate) fn anonymous(bytes: usize) -> io::Result<Self> {
        debug_assert!(bytes % 8 == 0);
        let map = memmap2::MmapOptions::new().len(bytes).map_anon()?;
        // Transparent huge pages: random object accesses over gigabytes of heap otherwise pay a
        // TLB miss (a page walk) each. Advice only; where THP is off this changes nothing.
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        let words = map.as_ptr().cast::<AtomicU64>();
        debug_assert!(words.is_aligned(), "mappings are page aligned");
        Ok(RegionMemory { _map: map, words, len_words: bytes / 8 })
    }

    /// A copy-on-write (`MAP_PRIVATE`) mapping of the first `bytes` of `file`: the durable
    /// heap's working copy (SPHT's shadow copy). Stores change private DRAM pages only; the file
    /// changes only through its own writes, never through this mapping.
    pub(crate) fn private_file(file: &std::fs::File, bytes: usize) -> io::Result<Self> {
        debug_assert!(bytes % 8 == 0);
        // SAFETY: memmap2 requires that the file is not truncated while mapped (access past
        // the end would fault). Heap files are created at their full size and never shrunk by
        // this process; their owner directory is the database's, which one process opens at a
        // time. A private mapping is never written back, so other writers of the file (the
        // recovery replay happens before mapping) cannot be corrupted by it.
        let map = unsafe { memmap2::MmapOptions::new().len(bytes).map_copy(file)? };
        let words = map.as_ptr().cast::<AtomicU64>();
        debug_assert!(words.is_aligned(), "mappings are page aligned");
        Ok(RegionMemory { _map: map, words, len_words: bytes / 8 })
    }

    /// The region's words.
    #[inline]
    pub(crate) fn words(&self) -> &[AtomicU64] {
        // SAFETY: `words` points at `len_words * 8` bytes of mapped, page-aligned memory owned by
        // `_map` and alive for `&self`'s lifetime. `AtomicU64` has the size and alignment of
        // `u64` on every platform with 64-bit atomics, and every bit pattern (zero fill included)
        // is a valid value. No `&mut` to the mapping exists after construction, and all accesses
        // through the returned slice are atomic, so no data race is possible.
        unsafe { std::slice::from_raw_parts(self.words, self.len_words) }
    }
}
