//! The I/O seam: every file operation durability performs goes through [`Storage`].
//!
//! [`RealStorage`] calls the operating system. [`FaultStorage`] wraps it for tests and can
//! * simulate **power loss** ([`FaultStorage::power_loss`]): every write to a file that no
//!   completed `sync_data` of that file covers is undone, every file creation, rename or removal
//!   that no completed `sync_dir` of its directory covers is undone, and the storage is frozen
//!   (every later operation fails with `EIO`), in the spirit of RocksDB's `FaultInjectionTestFS`;
//! * inject `ENOSPC`, `EIO` or any errno on chosen operations ([`FaultRule`]).
//!
//! Undo is by before-images, per inode (so it follows renames): a write first saves the bytes it
//! overwrites (and the file's length the first time), `sync_data` forgets them. A file opened
//! read-only is undone through a descriptor kept by the first writable handle that changed it. Renames over an existing file and removals keep the
//! old file under a hidden name until the directory is synced, so they can be undone as well.
//! The heap's `MAP_PRIVATE` mappings read the real files, so after `power_loss` a reopened
//! database sees exactly what a machine would find after the crash.

use std::collections::HashMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

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
    /// The underlying OS file, for memory mapping.
    fn os_file(&self) -> &File;
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
    /// Names of the entries of a directory.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Makes creations, renames and removals in `dir` durable (`fsync` of the directory).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Locks the existing directory `dir` until the guard is dropped: `exclusive` for the one
    /// process that opens the database, shared for readers (`ordo inspect`). A conflicting
    /// holder gives [`io::ErrorKind::WouldBlock`] at once. Nothing is written to `dir`.
    fn lock_dir(&self, dir: &Path, exclusive: bool) -> io::Result<DirLock>;
}

/// A held lock on a database directory ([`Storage::lock_dir`]); released when dropped, or when
/// the process dies.
#[derive(Debug)]
pub struct DirLock {
    /// The directory, open read-only, holding a `flock` (none for a simulated storage).
    _dir: Option<File>,
}

/// The operating system's files.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealStorage;

#[derive(Debug)]
struct RealFile(File);

impl StorageFile for RealFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn set_len(&self, len_bytes: u64) -> io::Result<()> {
        self.0.set_len(len_bytes)
    }
    fn len_bytes(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    #[cfg(target_os = "linux")]
    fn start_writeback(&self, offset: u64, len_bytes: u64) {
        use std::os::fd::AsRawFd;
        // SAFETY: sync_file_range only reads its scalar arguments; the descriptor is owned by
        // `self.0` and open for the duration of the call. Errors are ignored (a hint).
        unsafe {
            libc::sync_file_range(
                self.0.as_raw_fd(),
                offset as libc::off64_t,
                len_bytes as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            );
        }
    }
    fn os_file(&self) -> &File {
        &self.0
    }
}

impl Storage for RealStorage {
    fn lock_dir(&self, dir: &Path, exclusive: bool) -> io::Result<DirLock> {
        // `flock` on the directory itself: no lock file to create, so a read-only reader leaves
        // the directory unchanged, and the kernel drops the lock when its holder dies.
        use std::os::fd::AsRawFd;
        let f = File::open(dir)?;
        let op = if exclusive { libc::LOCK_EX } else { libc::LOCK_SH };
        // SAFETY: flock only reads its scalar arguments; the descriptor is owned by `f`, open for
        // the duration of the call (and of the lock, which `DirLock` keeps with it).
        // (`File::try_lock` does the same but needs Rust 1.89; the MSRV is 1.85.)
        let rc = unsafe { libc::flock(f.as_raw_fd(), op | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(DirLock { _dir: Some(f) });
        }
        // EWOULDBLOCK is EAGAIN on Linux: io::ErrorKind::WouldBlock.
        Err(io::Error::last_os_error())
    }
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let f = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
        Ok(Arc::new(RealFile(f)))
    }
    fn open(&self, path: &Path, writable: bool) -> io::Result<Arc<dyn StorageFile>> {
        let f = OpenOptions::new().read(true).write(writable).open(path)?;
        Ok(Arc::new(RealFile(f)))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for e in std::fs::read_dir(dir)? {
            names.push(e?.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }
}

/// An operation [`FaultStorage`] can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOp {
    /// `StorageFile::write_at`.
    Write,
    /// `StorageFile::sync_data`.
    Sync,
    /// `StorageFile::set_len`.
    SetLen,
    /// `Storage::create`.
    Create,
    /// `Storage::rename`.
    Rename,
    /// `StorageFile::read_at`.
    Read,
}

/// Fail the `skip + 1`-th and later matching operations (up to `times`) with `errno`.
#[derive(Clone, Debug)]
pub struct FaultRule {
    /// The operation.
    pub op: FaultOp,
    /// Only paths whose file name contains this.
    pub name_contains: String,
    /// Matching operations let through first.
    pub skip: u32,
    /// How many matching operations fail after that (`u32::MAX`: all).
    pub times: u32,
    /// The error, e.g. `libc::ENOSPC` or `libc::EIO`.
    pub errno: i32,
}

#[derive(Debug)]
enum MetaOp {
    Created(PathBuf),
    Renamed { from: PathBuf, to: PathBuf, replaced: Option<PathBuf> },
    Removed { path: PathBuf, kept: PathBuf },
}

#[derive(Debug)]
struct Undo {
    /// The file (a duplicate descriptor: undo follows the inode through renames).
    file: File,
    /// Length before the first unsynced change.
    len_bytes: u64,
    /// Before-images of unsynced writes, oldest first.
    writes: Vec<(u64, Vec<u8>)>,
    /// The path the file was opened under when it was first changed (a temporary name for
    /// files renamed into place later).
    path: PathBuf,
}

#[derive(Debug, Default)]
struct FaultState {
    frozen: bool,
    rules: Vec<FaultRule>,
    /// Unsynced changes per inode.
    undo: HashMap<u64, Undo>,
    meta: Vec<MetaOp>,
    kept_seq: u64,
    syncs: u64,
}

/// A [`Storage`] over real files that can lose unsynced data and inject errors (tests).
#[derive(Debug, Clone, Default)]
pub struct FaultStorage {
    state: Arc<Mutex<FaultState>>,
}

#[derive(Debug)]
struct FaultFile {
    inner: RealFile,
    /// The path it was opened under (for rule matching).
    path: PathBuf,
    ino: u64,
    state: Arc<Mutex<FaultState>>,
}

impl FaultFile {
    fn new(inner: File, path: &Path, state: Arc<Mutex<FaultState>>) -> io::Result<Self> {
        use std::os::unix::fs::MetadataExt;
        let ino = inner.metadata()?.ino();
        Ok(FaultFile { inner: RealFile(inner), path: path.to_path_buf(), ino, state })
    }

    fn undo_entry<'s>(&self, st: &'s mut FaultState) -> io::Result<&'s mut Undo> {
        match st.undo.entry(self.ino) {
            std::collections::hash_map::Entry::Occupied(e) => Ok(e.into_mut()),
            std::collections::hash_map::Entry::Vacant(e) => Ok(e.insert(Undo {
                path: self.path.clone(),
                file: self.inner.0.try_clone()?,
                len_bytes: self.inner.len_bytes()?,
                writes: Vec::new(),
            })),
        }
    }
}

fn lock(m: &Mutex<FaultState>) -> MutexGuard<'_, FaultState> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl FaultState {
    fn check(&mut self, op: FaultOp, path: &Path) -> io::Result<()> {
        if self.frozen {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        for r in &mut self.rules {
            if r.op == op && name.contains(&r.name_contains) {
                if r.skip > 0 {
                    r.skip -= 1;
                } else if r.times > 0 {
                    if r.times != u32::MAX {
                        r.times -= 1;
                    }
                    return Err(io::Error::from_raw_os_error(r.errno));
                }
            }
        }
        Ok(())
    }
}

impl FaultStorage {
    /// A fault-free storage that tracks unsynced state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an error-injection rule.
    pub fn inject(&self, rule: FaultRule) {
        lock(&self.state).rules.push(rule);
    }

    /// Removes every rule.
    pub fn clear_rules(&self) {
        lock(&self.state).rules.clear();
    }

    /// Completed `sync_data` calls so far.
    pub fn syncs(&self) -> u64 {
        lock(&self.state).syncs
    }

    /// Freezes the storage (every later operation fails with `EIO`) without undoing anything:
    /// the process "stops" here. Call [`FaultStorage::power_loss`] afterwards to drop unsynced
    /// state, or not, to model a process crash where the page cache survives.
    pub fn freeze(&self) {
        lock(&self.state).frozen = true;
    }

    /// Simulates power loss: freezes, then undoes every write, creation, rename and removal not
    /// covered by a completed sync. Returns the number of writes undone.
    pub fn power_loss(&self) -> io::Result<usize> {
        self.power_loss_keeping(0)
    }

    /// Power loss where the device had already written some unsynced data: each unsynced
    /// write is kept with probability 1/2 (drawn from `seed`; 0 keeps none, as
    /// [`FaultStorage::power_loss`]). Real devices persist unsynced pages in any order, so
    /// recovery must cope with any subset. Returns the number of writes undone.
    pub fn power_loss_keeping(&self, seed: u64) -> io::Result<usize> {
        let mut rng = seed;
        self.power_loss_with(move |_, _| {
            if seed == 0 {
                return false;
            }
            // SplitMix64.
            rng = rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = rng;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) & 1 == 1
        })
    }

    /// Power loss where the device had already written every unsynced write to the files
    /// `keep` accepts (by the path the file was first changed under) and none to the others:
    /// a scripted reordering for tests that need one exact crash state.
    pub fn power_loss_keeping_files(&self, keep: impl Fn(&Path) -> bool) -> io::Result<usize> {
        self.power_loss_with(|p, _| keep(p))
    }

    /// Power loss where the device had already written exactly the unsynced writes `keep`
    /// accepts, by path and byte offset (the offset the write started at): a scripted
    /// reordering inside one file.
    pub fn power_loss_keeping_writes(
        &self,
        keep: impl Fn(&Path, u64) -> bool,
    ) -> io::Result<usize> {
        self.power_loss_with(keep)
    }

    fn power_loss_with(&self, mut keep: impl FnMut(&Path, u64) -> bool) -> io::Result<usize> {
        let mut st = lock(&self.state);
        st.frozen = true;
        let mut undone = 0;
        let undo = std::mem::take(&mut st.undo);
        for (_, u) in undo {
            let grown = u.file.metadata()?.len() > u.len_bytes;
            let mut kept_any_growth = false;
            for (offset, old) in u.writes.iter().rev() {
                if keep(&u.path, *offset) {
                    kept_any_growth |= grown;
                    continue;
                }
                u.file.write_all_at(old, *offset)?;
                undone += 1;
            }
            if !kept_any_growth {
                u.file.set_len(u.len_bytes)?;
            }
        }
        let meta = std::mem::take(&mut st.meta);
        for op in meta.into_iter().rev() {
            match op {
                MetaOp::Created(p) => {
                    let _ = std::fs::remove_file(&p);
                }
                MetaOp::Renamed { from, to, replaced } => {
                    let _ = std::fs::rename(&to, &from);
                    if let Some(kept) = replaced {
                        std::fs::rename(&kept, &to)?;
                    }
                }
                MetaOp::Removed { path, kept } => std::fs::rename(&kept, &path)?,
            }
        }
        Ok(undone)
    }

    fn keep_name(st: &mut FaultState, path: &Path) -> PathBuf {
        st.kept_seq += 1;
        let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(format!(".fault-kept-{}", st.kept_seq));
        path.with_file_name(name)
    }
}

impl StorageFile for FaultFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        lock(&self.state).check(FaultOp::Read, &self.path)?;
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut st = lock(&self.state);
        st.check(FaultOp::Write, &self.path)?;
        let len_bytes = self.inner.len_bytes()?;
        let end = (offset + buf.len() as u64).min(len_bytes);
        let old = if end > offset {
            let mut old = vec![0u8; (end - offset) as usize];
            self.inner.read_at(&mut old, offset)?;
            Some(old)
        } else {
            None
        };
        let undo = self.undo_entry(&mut st)?;
        if let Some(old) = old {
            undo.writes.push((offset, old));
        }
        self.inner.write_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        let mut st = lock(&self.state);
        st.check(FaultOp::Sync, &self.path)?;
        self.inner.sync_data()?;
        st.undo.remove(&self.ino);
        st.syncs += 1;
        Ok(())
    }
    fn set_len(&self, len_bytes: u64) -> io::Result<()> {
        let mut st = lock(&self.state);
        st.check(FaultOp::SetLen, &self.path)?;
        let old = self.inner.len_bytes()?;
        let tail = if len_bytes < old {
            let mut tail = vec![0u8; (old - len_bytes) as usize];
            self.inner.read_at(&mut tail, len_bytes)?;
            Some(tail)
        } else {
            None
        };
        let undo = self.undo_entry(&mut st)?;
        if let Some(tail) = tail {
            undo.writes.push((len_bytes, tail));
        }
        self.inner.set_len(len_bytes)
    }
    fn len_bytes(&self) -> io::Result<u64> {
        self.inner.len_bytes()
    }
    fn start_writeback(&self, offset: u64, len_bytes: u64) {
        self.inner.start_writeback(offset, len_bytes)
    }
    fn os_file(&self) -> &File {
        self.inner.os_file()
    }
}

impl Storage for FaultStorage {
    /// No lock: a test "crashes" a database by freezing its storage and opens the directory
    /// again in the same process, as a restarted process would after the holder died.
    fn lock_dir(&self, _dir: &Path, _exclusive: bool) -> io::Result<DirLock> {
        Ok(DirLock { _dir: None })
    }
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let mut st = lock(&self.state);
        st.check(FaultOp::Create, path)?;
        let existed = path.exists();
        if existed {
            // Truncating an existing file is an unsynced change of its contents.
            let old = std::fs::read(path)?;
            let f = FaultFile::new(
                OpenOptions::new().read(true).write(true).open(path)?,
                path,
                self.state.clone(),
            )?;
            let undo = f.undo_entry(&mut st)?;
            undo.writes.push((0, old));
        }
        let f = RealStorage.create(path)?;
        drop(f);
        let f = FaultFile::new(
            OpenOptions::new().read(true).write(true).open(path)?,
            path,
            self.state.clone(),
        )?;
        if !existed {
            st.meta.push(MetaOp::Created(path.to_path_buf()));
            f.undo_entry(&mut st)?;
        }
        Ok(Arc::new(f))
    }
    fn open(&self, path: &Path, writable: bool) -> io::Result<Arc<dyn StorageFile>> {
        if lock(&self.state).frozen {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        let inner = OpenOptions::new().read(true).write(writable).open(path)?;
        Ok(Arc::new(FaultFile::new(inner, path, self.state.clone())?))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = lock(&self.state);
        st.check(FaultOp::Rename, from)?;
        let replaced = if to.exists() {
            let kept = Self::keep_name(&mut st, to);
            std::fs::rename(to, &kept)?;
            Some(kept)
        } else {
            None
        };
        std::fs::rename(from, to)?;
        st.meta.push(MetaOp::Renamed { from: from.to_path_buf(), to: to.to_path_buf(), replaced });
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut st = lock(&self.state);
        if st.frozen {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        let kept = Self::keep_name(&mut st, path);
        std::fs::rename(path, &kept)?;
        st.meta.push(MetaOp::Removed { path: path.to_path_buf(), kept });
        Ok(())
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        if lock(&self.state).frozen {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        let names = RealStorage.list(dir)?;
        Ok(names.into_iter().filter(|n| !n.contains(".fault-kept-")).collect())
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = lock(&self.state);
        st.check(FaultOp::Sync, dir)?;
        RealStorage.sync_dir(dir)?;
        let in_dir = |p: &Path| p.parent() == Some(dir);
        let meta = std::mem::take(&mut st.meta);
        for op in meta {
            match op {
                MetaOp::Created(p) if in_dir(&p) => {}
                MetaOp::Renamed { to, replaced, .. } if in_dir(&to) => {
                    if let Some(kept) = replaced {
                        let _ = std::fs::remove_file(kept);
                    }
                }
                MetaOp::Removed { path, kept } if in_dir(&path) => {
                    let _ = std::fs::remove_file(kept);
                }
                other => st.meta.push(other),
            }
        }
        Ok(())
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        if lock(&self.state).frozen {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        RealStorage.create_dir_all(dir)
    }
}
