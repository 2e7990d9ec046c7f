//! Page-aligned memory the heap lives in and file bytes recovery reads: the only module that
//! calls `mmap`.
//!
//! Two types, one per use, so that each keeps one invariant:
//!
//! * [`PrivateMemory`] — writable memory private to this process, page aligned, zero where
//!   nothing was put: an anonymous mapping (the in-memory heap, and a simulated file's copy) or
//!   a `MAP_PRIVATE` mapping of a real file (the durable heap's working copy, SPHT's shadow
//!   paging: stores change private copy-on-write pages, never the file). Once built it is only
//!   reached through a raw pointer that `heap::memory` turns into `&[AtomicU64]`; no `&mut` to
//!   it exists after construction.
//! * [`FileBytes`] — a file's bytes for reading: a read-only, pre-populated mapping of a real
//!   file, or an owned copy (a simulated file).
//!
//! A storage backend ([`crate::durable::io::StorageFile`]) makes both; everything above the
//! seam sees only these types, so the heap and recovery run unchanged over real files and over
//! memory. The OS variants are exactly the mappings made before the seam existed: the heap
//! reads through the same pointer into the same pages, with no copy and no indirection.

use std::fs::File;
use std::io;

/// Writable, page-aligned memory private to this process (see the module docs).
///
/// Stores through it never reach a file; later writes to the file it was made from are not
/// promised to show through (a copy never shows them; the OS mapping shows them only on pages
/// this process has not written, and the engine relies on neither).
#[derive(Debug)]
pub struct PrivateMemory {
    map: memmap2::MmapMut,
}

impl PrivateMemory {
    /// `len_bytes` of zeros (an anonymous mapping: pages cost nothing until touched), advised
    /// for transparent huge pages when `huge_pages` is set (`MADV_HUGEPAGE`; advice only: where
    /// THP is off it changes nothing). See [`crate::heap::HeapConfig::huge_pages`] for when
    /// huge pages pay.
    pub fn zeroed(len_bytes: usize, huge_pages: bool) -> io::Result<Self> {
        let map = memmap2::MmapOptions::new().len(len_bytes).map_anon()?;
        #[cfg(target_os = "linux")]
        if huge_pages {
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = huge_pages;
        Ok(PrivateMemory { map })
    }

    /// `len_bytes` of zeros with `fill(memory)` run once on them before they are shared: how a
    /// simulated backend copies a file's bytes in (base pages: a simulation, not a fast path).
    pub fn filled(len_bytes: usize, fill: impl FnOnce(&mut [u8])) -> io::Result<Self> {
        let mut mem = Self::zeroed(len_bytes, false)?;
        fill(&mut mem.map[..]);
        Ok(mem)
    }

    /// A copy-on-write (`MAP_PRIVATE`) mapping of the first `len_bytes` of `file`.
    ///
    /// The caller must keep the file at least `len_bytes` long while the memory lives (access
    /// past the end of a file raises `SIGBUS`); see the SAFETY note inside.
    pub(crate) fn map_file(file: &File, len_bytes: usize) -> io::Result<Self> {
        // SAFETY: memmap2 requires that the file is not truncated while mapped (access past
        // the end would fault). The only callers map heap files, which are created at their
        // full size and never shrunk, in a directory one process opens at a time (its
        // `flock`). A private mapping is never written back, so other writers of the file (the
        // checkpointer's `pwrite`s) cannot be corrupted by it.
        let map = unsafe { memmap2::MmapOptions::new().len(len_bytes).map_copy(file)? };
        Ok(PrivateMemory { map })
    }

    /// The memory's length.
    pub fn len_bytes(&self) -> usize {
        self.map.len()
    }

    /// Faults in `len_bytes` from `offset_bytes` as if written, without writing
    /// (`MADV_POPULATE_WRITE`, Linux 5.14+): the contents stay what they were, and a later first
    /// store there takes no page fault. Advice only: elsewhere, or on an older kernel, an error
    /// the caller may ignore. Safe with concurrent stores to the same pages (the kernel
    /// serializes the faults; nothing is written).
    pub(crate) fn populate_write(&self, offset_bytes: usize, len_bytes: usize) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            self.map.advise_range(memmap2::Advice::PopulateWrite, offset_bytes, len_bytes)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (offset_bytes, len_bytes);
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
    }

    /// The first byte; page aligned. Valid for [`PrivateMemory::len_bytes`] bytes while `self`
    /// lives, and never moved.
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.map.as_ptr()
    }
}

/// A file's bytes for reading (see the module docs).
#[derive(Debug)]
pub struct FileBytes {
    inner: Bytes,
}

#[derive(Debug)]
enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl FileBytes {
    /// Bytes already read (a simulated file's copy).
    pub fn owned(bytes: Vec<u8>) -> Self {
        FileBytes { inner: Bytes::Owned(bytes) }
    }

    /// The first `len_bytes` of `file` mapped read-only, with the pages populated up front so a
    /// scan takes no page faults.
    ///
    /// The caller must keep the file unwritten and at least `len_bytes` long while the bytes
    /// live; see the SAFETY note inside.
    pub(crate) fn map_file(file: &File, len_bytes: usize) -> io::Result<Self> {
        // SAFETY: memmap2 requires that the file is neither truncated nor written while mapped.
        // The only callers map log segments during recovery's scan: the caller checked the file
        // is `len_bytes` long, no log of the directory is open in this or another process (the
        // directory's lock), and the mapping is dropped before the segments are deleted.
        let map = unsafe { memmap2::MmapOptions::new().len(len_bytes).populate().map(file)? };
        Ok(FileBytes { inner: Bytes::Mapped(map) })
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        match &self.inner {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}
