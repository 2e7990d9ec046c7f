//! [`MemStorage`]: a file system in memory.
//!
//! A namespace (a sorted map from normalized path to directory or file) under one mutex, and
//! per file an inode: a length and its bytes as sparse 4 KiB pages under a reader-writer lock,
//! so concurrent log writers of different files do not wait on each other and a region file
//! costs memory only for the pages written. A handle holds its inode, so it keeps working
//! across a rename of its path and after a removal, as an open descriptor does.
//!
//! What it models, and what it leaves to [`super::FaultStorage`]: every completed write is
//! visible at once to every handle, and survives the "process" — the database being dropped and
//! opened again on a clone of the same storage — as the page cache survives a process crash.
//! Durability (what a power loss keeps) is not modelled here: `sync_data` and `sync_dir` only
//! check their argument. [`super::FaultStorage`] over a `MemStorage` adds it, with the same
//! before-image undo it applies to real files.
//!
//! Directory locks are a table of holders per directory (shared or one exclusive), released
//! when the [`super::DirLock`] is dropped, so two databases opened on the same storage and
//! directory conflict as two processes would.
//!
//! # Invariants
//! * Every byte of a stored page at or past the file's length is zero (shrinking zeroes the
//!   cut part of the last page and drops the pages past it), so growing a file shows zeros.
//! * A path in the namespace is normalized (its components; `.` and trailing separators
//!   dropped) and its parent is a directory in the namespace, or the root.
//! * Errors carry the errno a Linux file system would give (`ENOENT`, `EISDIR`, `ENOTDIR`,
//!   `EBADF` for a write through a read-only handle, `EWOULDBLOCK` for a held lock).

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use super::{DirLock, FileBytes, Held, PrivateMemory, Storage, StorageFile};

/// Bytes per page of a simulated file.
const PAGE_BYTES: usize = 4096;

/// A file system in memory, shared by its clones (see the module docs).
///
/// # Example
/// ```
/// use std::sync::Arc;
/// use ordo::durable::io::{MemStorage, Storage};
/// use ordo::durable::{DurableConfig, Mode};
///
/// let storage = MemStorage::new();
/// let config = DurableConfig::new("/db", Mode::Sync).with_storage(Arc::new(storage.clone()));
/// # let _ = config;
/// storage.create_dir_all("/db".as_ref())?;
/// let f = storage.create("/db/a".as_ref())?;
/// f.write_at(b"hello", 0)?;
/// assert_eq!(storage.read("/db/a".as_ref())?, b"hello");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct MemStorage {
    fs: Arc<Mutex<Namespace>>,
}

#[derive(Debug, Default)]
struct Namespace {
    entries: BTreeMap<PathBuf, Entry>,
    /// The last inode number given out.
    last_id: u64,
    /// Lock holders per directory.
    locks: HashMap<PathBuf, Holders>,
}

#[derive(Debug, Clone)]
enum Entry {
    Dir,
    File(Arc<Inode>),
}

#[derive(Debug, Default, Clone, Copy)]
struct Holders {
    shared: usize,
    exclusive: bool,
}

#[derive(Debug)]
struct Inode {
    id: u64,
    data: RwLock<Pages>,
}

#[derive(Debug, Default)]
struct Pages {
    len_bytes: u64,
    /// Page index to its bytes; a missing page reads as zeros.
    pages: BTreeMap<u64, Box<[u8; PAGE_BYTES]>>,
}

impl Pages {
    /// Copies `buf.len()` bytes at `offset` (inside the file) into `buf`.
    fn read(&self, buf: &mut [u8], offset: u64) {
        debug_assert!(buf.is_empty() || offset + buf.len() as u64 <= self.len_bytes);
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let (page, in_page) = (at / PAGE_BYTES as u64, (at % PAGE_BYTES as u64) as usize);
            let n = (PAGE_BYTES - in_page).min(buf.len() - done);
            match self.pages.get(&page) {
                Some(p) => buf[done..done + n].copy_from_slice(&p[in_page..in_page + n]),
                None => buf[done..done + n].fill(0),
            }
            done += n;
        }
    }

    fn write(&mut self, buf: &[u8], offset: u64) {
        // An empty write changes nothing, not even the length (as the OS backend's
        // `write_all_at`, which then makes no system call).
        if buf.is_empty() {
            return;
        }
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let (page, in_page) = (at / PAGE_BYTES as u64, (at % PAGE_BYTES as u64) as usize);
            let n = (PAGE_BYTES - in_page).min(buf.len() - done);
            let p = self.pages.entry(page).or_insert_with(|| Box::new([0; PAGE_BYTES]));
            p[in_page..in_page + n].copy_from_slice(&buf[done..done + n]);
            done += n;
        }
        self.len_bytes = self.len_bytes.max(offset + buf.len() as u64);
        debug_assert!(self.zero_past_end(), "bytes past the end of a file");
    }

    fn set_len(&mut self, len_bytes: u64) {
        if len_bytes < self.len_bytes {
            // Keep the invariant: nothing but zeros at or past the length.
            let first_gone = len_bytes.div_ceil(PAGE_BYTES as u64);
            drop(self.pages.split_off(&first_gone));
            let in_page = (len_bytes % PAGE_BYTES as u64) as usize;
            if in_page != 0
                && let Some(p) = self.pages.get_mut(&(len_bytes / PAGE_BYTES as u64))
            {
                p[in_page..].fill(0);
            }
        }
        self.len_bytes = len_bytes;
        debug_assert!(self.zero_past_end(), "bytes past the end of a file");
    }

    /// The module invariant: no page past the length, and zeros after it in the last page.
    fn zero_past_end(&self) -> bool {
        let first_gone = self.len_bytes.div_ceil(PAGE_BYTES as u64);
        let in_page = (self.len_bytes % PAGE_BYTES as u64) as usize;
        let last = self.len_bytes / PAGE_BYTES as u64;
        self.pages.range(first_gone..).next().is_none()
            && (in_page == 0
                || self.pages.get(&last).is_none_or(|p| p[in_page..].iter().all(|&b| b == 0)))
    }

    /// Copies the first `out.len()` bytes (inside the file) into `out`, which is zero already.
    fn copy_into_zeroed(&self, out: &mut [u8]) {
        debug_assert!(out.len() as u64 <= self.len_bytes);
        for (&page, p) in &self.pages {
            let start = page as usize * PAGE_BYTES;
            if start >= out.len() {
                break;
            }
            let n = PAGE_BYTES.min(out.len() - start);
            out[start..start + n].copy_from_slice(&p[..n]);
        }
    }
}

fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

fn past_end(len_bytes: usize, file_bytes: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("{len_bytes} bytes asked of a file of {file_bytes} bytes"),
    )
}

/// A path as the namespace keys it.
fn normalize(path: &Path) -> PathBuf {
    path.components().filter(|c| !matches!(c, std::path::Component::CurDir)).collect()
}

fn lock_ns(m: &Mutex<Namespace>) -> MutexGuard<'_, Namespace> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Namespace {
    fn is_dir(&self, path: &Path) -> bool {
        match path.parent() {
            None => true, // the root
            Some(_) if path.as_os_str().is_empty() => true,
            Some(_) => matches!(self.entries.get(path), Some(Entry::Dir)),
        }
    }

    /// Checks that the parent of `path` is a directory.
    fn parent_is_dir(&self, path: &Path) -> io::Result<()> {
        let parent = path.parent().unwrap_or(Path::new(""));
        if self.is_dir(parent) {
            Ok(())
        } else if self.entries.contains_key(parent) {
            Err(errno(libc::ENOTDIR))
        } else {
            Err(errno(libc::ENOENT))
        }
    }

    fn file(&self, path: &Path) -> io::Result<Arc<Inode>> {
        match self.entries.get(path) {
            Some(Entry::File(inode)) => Ok(inode.clone()),
            Some(Entry::Dir) => Err(errno(libc::EISDIR)),
            None => Err(errno(libc::ENOENT)),
        }
    }
}

/// An open handle of a [`MemStorage`] file.
#[derive(Debug)]
struct MemFile {
    inode: Arc<Inode>,
    writable: bool,
}

impl MemFile {
    fn pages(&self) -> std::sync::RwLockReadGuard<'_, Pages> {
        self.inode.data.read().unwrap_or_else(|e| e.into_inner())
    }

    fn pages_mut(&self) -> io::Result<std::sync::RwLockWriteGuard<'_, Pages>> {
        if !self.writable {
            return Err(errno(libc::EBADF));
        }
        Ok(self.inode.data.write().unwrap_or_else(|e| e.into_inner()))
    }
}

impl StorageFile for MemFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let pages = self.pages();
        // An empty read succeeds anywhere, past the end too, as the OS backend's `read_exact_at`.
        if !buf.is_empty() && offset.saturating_add(buf.len() as u64) > pages.len_bytes {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "failed to fill whole buffer",
            ));
        }
        pages.read(buf, offset);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.pages_mut()?.write(buf, offset);
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
    fn set_len(&self, len_bytes: u64) -> io::Result<()> {
        self.pages_mut()?.set_len(len_bytes);
        Ok(())
    }
    fn len_bytes(&self) -> io::Result<u64> {
        Ok(self.pages().len_bytes)
    }
    fn file_id(&self) -> io::Result<u64> {
        Ok(self.inode.id)
    }
    fn map_private(&self, len_bytes: usize) -> io::Result<PrivateMemory> {
        let pages = self.pages();
        if len_bytes as u64 > pages.len_bytes {
            return Err(past_end(len_bytes, pages.len_bytes));
        }
        PrivateMemory::filled(len_bytes, |out| pages.copy_into_zeroed(out))
    }
    fn map_read(&self, len_bytes: usize) -> io::Result<FileBytes> {
        let pages = self.pages();
        if len_bytes as u64 > pages.len_bytes {
            return Err(past_end(len_bytes, pages.len_bytes));
        }
        let mut bytes = vec![0; len_bytes];
        pages.copy_into_zeroed(&mut bytes);
        Ok(FileBytes::owned(bytes))
    }
}

/// A directory lock held in a [`MemStorage`]; released on drop.
#[derive(Debug)]
pub(super) struct MemLock {
    fs: Arc<Mutex<Namespace>>,
    dir: PathBuf,
    exclusive: bool,
}

impl Drop for MemLock {
    fn drop(&mut self) {
        let mut ns = lock_ns(&self.fs);
        if let Some(h) = ns.locks.get_mut(&self.dir) {
            if self.exclusive {
                debug_assert!(h.exclusive);
                h.exclusive = false;
            } else {
                debug_assert!(h.shared > 0);
                h.shared -= 1;
            }
            if !h.exclusive && h.shared == 0 {
                ns.locks.remove(&self.dir);
            }
        }
    }
}

impl MemStorage {
    /// An empty file system (only the root directory).
    pub fn new() -> Self {
        Self::default()
    }

    /// The whole contents of the file at `path`.
    pub fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let f = self.open(path, false)?;
        let mut bytes = vec![0; f.len_bytes()? as usize];
        f.read_at(&mut bytes, 0)?;
        Ok(bytes)
    }

    /// Replaces the contents of the file at `path` (created if missing) with `bytes`.
    pub fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let f = self.create(path)?;
        f.write_at(bytes, 0)
    }

    /// Removes `dir` and everything under it (the tests' clean-up; locks held under it stay
    /// until their guards drop).
    pub fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        let dir = normalize(dir);
        let mut ns = lock_ns(&self.fs);
        if !ns.entries.contains_key(&dir) {
            return Err(errno(libc::ENOENT));
        }
        let under: Vec<PathBuf> = ns
            .entries
            .range::<Path, _>((Bound::Included(dir.as_path()), Bound::Unbounded))
            .map(|(p, _)| p)
            .take_while(|p| p.starts_with(&dir))
            .cloned()
            .collect();
        for p in under {
            ns.entries.remove(&p);
        }
        Ok(())
    }

    /// Bytes held in file pages, over all files (what the storage costs in memory).
    pub fn page_bytes(&self) -> u64 {
        let ns = lock_ns(&self.fs);
        let mut total = 0;
        for e in ns.entries.values() {
            if let Entry::File(inode) = e {
                let pages = inode.data.read().unwrap_or_else(|e| e.into_inner());
                total += (pages.pages.len() * PAGE_BYTES) as u64;
            }
        }
        total
    }
}

impl Storage for MemStorage {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let path = normalize(path);
        let mut ns = lock_ns(&self.fs);
        ns.parent_is_dir(&path)?;
        let inode = match ns.entries.get(&path) {
            Some(Entry::Dir) => return Err(errno(libc::EISDIR)),
            Some(Entry::File(inode)) => {
                inode.data.write().unwrap_or_else(|e| e.into_inner()).set_len(0);
                inode.clone()
            }
            None => {
                ns.last_id += 1;
                let inode = Arc::new(Inode { id: ns.last_id, data: RwLock::default() });
                ns.entries.insert(path, Entry::File(inode.clone()));
                inode
            }
        };
        Ok(Arc::new(MemFile { inode, writable: true }))
    }
    fn open(&self, path: &Path, writable: bool) -> io::Result<Arc<dyn StorageFile>> {
        let inode = lock_ns(&self.fs).file(&normalize(path))?;
        Ok(Arc::new(MemFile { inode, writable }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (normalize(from), normalize(to));
        let mut ns = lock_ns(&self.fs);
        let inode = ns.file(&from)?;
        ns.parent_is_dir(&to)?;
        if let Some(Entry::Dir) = ns.entries.get(&to) {
            return Err(errno(libc::EISDIR));
        }
        ns.entries.remove(&from);
        ns.entries.insert(to, Entry::File(inode));
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let path = normalize(path);
        let mut ns = lock_ns(&self.fs);
        ns.file(&path)?;
        ns.entries.remove(&path);
        Ok(())
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let dir = normalize(dir);
        let ns = lock_ns(&self.fs);
        if !ns.is_dir(&dir) {
            return Err(errno(if ns.entries.contains_key(&dir) {
                libc::ENOTDIR
            } else {
                libc::ENOENT
            }));
        }
        // Descendants of `dir` sort right after it (paths compare by components).
        let names = ns
            .entries
            .range::<Path, _>((Bound::Excluded(dir.as_path()), Bound::Unbounded))
            .map(|(p, _)| p)
            .take_while(|p| p.starts_with(&dir))
            .filter(|p| p.parent() == Some(dir.as_path()))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        Ok(names)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let dir = normalize(dir);
        let ns = lock_ns(&self.fs);
        if ns.is_dir(&dir) { Ok(()) } else { Err(errno(libc::ENOENT)) }
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let dir = normalize(dir);
        let mut ns = lock_ns(&self.fs);
        for a in dir.ancestors().collect::<Vec<_>>().into_iter().rev() {
            if ns.is_dir(a) {
                continue;
            }
            if ns.entries.contains_key(a) {
                return Err(errno(libc::ENOTDIR));
            }
            ns.entries.insert(a.to_path_buf(), Entry::Dir);
        }
        Ok(())
    }
    fn lock_dir(&self, dir: &Path, exclusive: bool) -> io::Result<DirLock> {
        let dir = normalize(dir);
        let mut ns = lock_ns(&self.fs);
        if !ns.is_dir(&dir) {
            return Err(errno(if ns.entries.contains_key(&dir) {
                libc::ENOTDIR
            } else {
                libc::ENOENT
            }));
        }
        let h = ns.locks.entry(dir.clone()).or_default();
        if h.exclusive || (exclusive && h.shared > 0) {
            return Err(errno(libc::EWOULDBLOCK));
        }
        if exclusive {
            h.exclusive = true;
        } else {
            h.shared += 1;
        }
        let lock = MemLock { fs: self.fs.clone(), dir, exclusive };
        Ok(DirLock { _held: Held::Mem { _lock: lock } })
    }
}
