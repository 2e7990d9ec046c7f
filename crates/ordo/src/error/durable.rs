//! [`DurableError`]: what went wrong with a durable database's files.
//!
//! It lives here, under [`crate::error`] and beside [`Error`] rather than in `crate::durable`,
//! so that [`Error::Durable`] can hold it without the error module depending on the durable
//! layer above it (which returns [`Error`] everywhere). Users name it `ordo::durable::DurableError`
//! (re-exported there); it depends on nothing in this crate but [`Error`].

use std::path::PathBuf;
use std::sync::Arc;

use super::Error;

/// What went wrong with a durable database's files.
#[derive(thiserror::Error, Debug)]
pub enum DurableError {
    /// An operating-system call failed.
    #[error("{op} of {path} failed: {source}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file was written by an incompatible format version.
    #[error("{path} has format version {found}; this build reads version {supported}")]
    FormatVersion {
        /// The file.
        path: PathBuf,
        /// Its version.
        found: u32,
        /// The version this build supports.
        supported: u32,
    },
    /// A file is corrupt at an offset (a bad record at or below the marker, a bad header, ...).
    #[error("{path} is corrupt at offset {offset}: {reason}")]
    BadFile {
        /// The file.
        path: PathBuf,
        /// Byte offset of the problem.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A heap file named by the manifest is missing or has the wrong size.
    #[error("heap file {path} is missing or has the wrong size: {reason}")]
    HeapFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Another process (or another open database of this one) holds the directory: a database
    /// directory has one writer, and readers only while it has none.
    #[error("{dir} is in use by another open database (its directory lock is held)")]
    Locked {
        /// The directory.
        dir: PathBuf,
    },
    /// The directory holds no database (no manifest) and creation was not asked for.
    #[error("{dir} holds no Ordo database (no MANIFEST)")]
    NoDatabase {
        /// The directory.
        dir: PathBuf,
    },
    /// The configured region size differs from the database's.
    #[error("the database in {dir} has {found} bytes per region, the configuration {configured}")]
    RegionSize {
        /// The directory.
        dir: PathBuf,
        /// The database's region size.
        found: u64,
        /// The configured region size.
        configured: u64,
    },
    /// An object image of a transaction does not fit in a log chunk (larger records are
    /// split into parts; one image is not).
    #[error("redo record of {len_bytes} bytes exceeds the log chunk of {chunk_bytes} bytes")]
    RecordTooLarge {
        /// The record's size.
        len_bytes: usize,
        /// The chunk size.
        chunk_bytes: usize,
    },
    /// An earlier `fdatasync` failed; the log accepts no more durable commits.
    #[error("the log is poisoned by an earlier failed flush; reopen the database")]
    Poisoned,
    /// The clock is not past the newest recovered timestamp.
    #[error("the clock reads {now} but the database holds versions up to {recovered}")]
    ClockBehind {
        /// The newest recovered timestamp (ns).
        recovered: u64,
        /// The clock's `now().lo` (ns).
        now: u64,
    },
}

impl PartialEq for DurableError {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}
impl Eq for DurableError {}

impl From<DurableError> for Error {
    fn from(e: DurableError) -> Self {
        Error::Durable(Arc::new(e))
    }
}
