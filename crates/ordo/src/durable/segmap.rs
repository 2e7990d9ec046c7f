//! Read-only mappings of log segments for recovery's scan: the records are checked and replayed
//! straight from the page cache, without copying the log into buffers.
//!
//! Invariant: a segment is mapped only while no one writes or truncates it. Recovery maps the
//! segments of a directory before this process has opened its log, and one process opens a
//! database directory at a time (the same rule the heap files' mappings rely on).

use std::fs::File;
use std::io;

/// A whole segment file mapped read-only.
#[derive(Debug)]
pub(crate) struct SegmentBytes {
    map: memmap2::Mmap,
}

impl SegmentBytes {
    /// Maps the first `len_bytes` of `file` (the caller checked the file is that long), with
    /// its pages populated up front so the scan takes no page faults.
    pub(crate) fn map(file: &File, len_bytes: usize) -> io::Result<Self> {
        // SAFETY: memmap2 requires that the file is neither truncated nor written while mapped
        // (see the module invariant): during recovery no log of this directory is open in this
        // or another process, and the mapping is dropped before the segments are deleted.
        let map = unsafe { memmap2::MmapOptions::new().len(len_bytes).populate().map(file)? };
        Ok(SegmentBytes { map })
    }

    /// The mapped bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.map
    }
}
