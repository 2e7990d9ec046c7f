//! The storage seam: every file operation durability performs, and the heap's mapping of its
//! region files, go through [`Storage`] and [`StorageFile`] (redb's `StorageBackend` is the
//! model).
//!
//! # Backends
//! * [`RealStorage`] — the operating system's files. The heap's working copy of a region file
//!   is a `MAP_PRIVATE` mapping of it and recovery reads log segments through read-only
//!   mappings, exactly as before there was a seam: nothing is copied, and the heap reads its
//!   words through the mapping's pointer (`crate::mapping`), so the seam costs the hot path
//!   nothing.
//! * [`MemStorage`] — a file system in memory, for tests that check logic rather than the OS
//!   path, and for simulations. It is shared by cloning: drop a database and open it again on
//!   a clone of the same storage (a simulated process restart) and it finds every file as the
//!   last process left it, the page cache included; with [`FaultStorage`] on top, a power loss
//!   leaves only what was synced.
//! * [`FaultStorage`] — on top of either: simulates **power loss**
//!   ([`FaultStorage::power_loss`] and variants that keep a chosen subset of unsynced writes)
//!   and injects errnos on chosen operations ([`FaultRule`]). It changes the files below only
//!   through that storage's own trait methods, so it behaves the same over both.
//!
//! # Where the heap's memory comes from
//! [`StorageFile::map_private`] gives a region's working copy as [`PrivateMemory`]: writes to
//! it stay in this process and never reach the file (the file changes only through
//! [`StorageFile::write_at`], by log replay); whether later writes to the file show through
//! is left open, and the engine depends on neither (a page it never wrote holds what the file
//! held, and a checkpoint only writes images the heap already holds). The OS backend maps the
//! file `MAP_PRIVATE`; the in-memory one fills an anonymous mapping with a copy of the file's
//! bytes. [`StorageFile::map_read`] gives a segment's bytes for recovery's scan the same way
//! (a read-only mapping, or a copy).
//!
//! # Invariants every backend keeps
//! * `read_at` fills the whole buffer or fails (`UnexpectedEof` past the end).
//! * `write_at` past the end grows the file; the gap reads as zeros, as does growth by
//!   `set_len`.
//! * Bytes are visible to every handle of the file as soon as the write returns (the page
//!   cache); `sync_data` and `sync_dir` only decide what a power loss keeps, which only
//!   [`FaultStorage`] simulates.
//! * [`StorageFile::file_id`] names the file, not the path: it follows renames (the undo log
//!   of [`FaultStorage`] relies on it).
//! * A mapping ([`StorageFile::map_private`], [`StorageFile::map_read`]) is of bytes the file
//!   has: asking for more than its length is a caller bug (the OS would raise `SIGBUS` on
//!   touching them; the in-memory backend refuses with `UnexpectedEof`).

mod fault;
mod mem;
mod os;

use std::fmt::Debug;
use std::io;
use std::path::Path;
use std::sync::Arc;

pub use crate::mapping::{FileBytes, PrivateMemory};
pub use fault::{FaultOp, FaultRule, FaultStorage, SECTOR_BYTES};
pub use mem::MemStorage;
pub use os::RealStorage;

/// An open file of a [`Storage`].
pub trait StorageFile: Send + Sync + Debug {
    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset` (`pwrite`).
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every completed write durable (`fdatasync`).
    fn sync_data(&self) -> io::Result<()>;
    /// Sets the file's length (grows with zeros).
    fn set_len(&self, len_bytes: u64) -> io::Result<()>;
    /// The file's length.
    fn len_bytes(&self) -> io::Result<u64>;
    /// Starts writeback of a range without waiting (SPHT Alg. 5's flush hint); may do nothing.
    fn start_writeback(&self, _offset: u64, _len_bytes: u64) {}
    /// A number that identifies the file itself (its inode) among the storage's files for as
    /// long as it exists, whatever it is renamed to.
    fn file_id(&self) -> io::Result<u64>;
    /// The first `len_bytes` (at most the file's length) as memory private to this process: the
    /// heap's working copy of a region file. See the module docs.
    fn map_private(&self, len_bytes: usize) -> io::Result<PrivateMemory>;
    /// The first `len_bytes` (at most the file's length) for reading, while nothing writes or
    /// truncates the file: recovery's view of a log segment.
    fn map_read(&self, len_bytes: usize) -> io::Result<FileBytes>;
}

/// The file system operations durability needs.
pub trait Storage: Send + Sync + Debug {
    /// Creates (or truncates) a file for reading and writing.
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>>;
    /// Opens an existing file, writable or read-only.
    fn open(&self, path: &Path, writable: bool) -> io::Result<Arc<dyn StorageFile>>;
    /// Renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Names of the entries of a directory, sorted.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Makes creations, renames and removals in `dir` durable (`fsync` of the directory).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Locks the existing directory `dir` until the guard is dropped: `exclusive` for the one
    /// process that opens the database, shared for readers (`ordo inspect`). A conflicting
    /// holder gives [`io::ErrorKind::WouldBlock`] at once, a missing directory
    /// [`io::ErrorKind::NotFound`]. Nothing is written to `dir`.
    fn lock_dir(&self, dir: &Path, exclusive: bool) -> io::Result<DirLock>;
}

/// A held lock on a database directory ([`Storage::lock_dir`]); released when dropped, or when
/// the process dies.
#[derive(Debug)]
pub struct DirLock {
    _held: Held,
}

#[derive(Debug)]
enum Held {
    /// No lock (a storage that does not lock, [`FaultStorage`]).
    Nothing,
    /// The directory, open read-only, holding a `flock`.
    Os { _dir: std::fs::File },
    /// A lock in a [`MemStorage`]'s table, released by its `Drop`.
    Mem { _lock: mem::MemLock },
}

impl DirLock {
    /// A guard that holds nothing.
    pub(crate) fn nothing() -> Self {
        DirLock { _held: Held::Nothing }
    }
}

#[cfg(test)]
mod tests;
