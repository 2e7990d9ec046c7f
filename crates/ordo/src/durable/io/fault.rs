//! [`FaultStorage`]: power loss and injected errors, on top of any [`Storage`].
//!
//! * **Power loss** ([`FaultStorage::power_loss`]): every write to a file that no completed
//!   `sync_data` of that file covers is undone, every file creation, rename or removal that no
//!   completed `sync_dir` of its directory covers is undone, and the storage is frozen (every
//!   later operation fails with `EIO`), in the spirit of RocksDB's `FaultInjectionTestFS`.
//!   Variants keep some unsynced writes whole ([`FaultStorage::power_loss_keeping`] and the
//!   scripted ones), or **tear** them ([`FaultStorage::power_loss_torn`]): a device persists
//!   512-byte sectors, not writes, so an unsynced write may survive as a prefix of its sectors
//!   or as any subset of them.
//! * **Errors**: `ENOSPC`, `EIO` or any errno on chosen operations ([`FaultRule`]).
//!
//! Undo is by before-images, per file ([`StorageFile::file_id`], so it follows renames): a
//! write first saves the bytes it overwrites (and the file's length the first time),
//! `sync_data` forgets them. A file opened read-only is undone through the first writable
//! handle that changed it. Renames over an existing file and removals keep the old
//! file under a hidden name until the directory is synced, so they can be undone as well.
//!
//! Everything, the undo included, goes through the inner storage's own trait methods, so the
//! same faults apply to real files ([`FaultStorage::new`]) and to a
//! [`super::MemStorage`] ([`FaultStorage::over`]). Mappings are delegated unchanged: the heap's
//! region memory reads the inner files, so after a power loss a reopened database sees exactly
//! what a machine would find after the crash.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{DirLock, FileBytes, PrivateMemory, RealStorage, Storage, StorageFile};

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

/// The sector a device writes atomically: a torn write keeps or loses whole sectors (by file
/// offset, 512-byte aligned).
pub const SECTOR_BYTES: u64 = 512;

/// One unsynced change of a file's bytes, with what it overwrote.
#[derive(Debug)]
struct Before {
    /// Where the change starts.
    offset: u64,
    /// Bytes the change covers (a write's length; for a truncation, the bytes it cut).
    len: u64,
    /// The bytes overwritten: the first `old.len()` of the range (a write past the end of
    /// the file overwrote nothing there: the rest was a hole, zeros).
    old: Vec<u8>,
    /// A `write_at` (tearable), rather than a truncation (metadata: kept or lost whole).
    write: bool,
}

#[derive(Debug)]
struct Undo {
    /// The file (a handle of the inner storage: undo follows the file through renames).
    file: Arc<dyn StorageFile>,
    /// Length before the first unsynced change.
    len_bytes: u64,
    /// Unsynced changes, oldest first.
    writes: Vec<Before>,
    /// When the file was first changed since its last sync (a count): torn power losses
    /// visit files in this order, the same on every backend.
    order: u64,
    /// The path the file was opened under when it was first changed (a temporary name for
    /// files renamed into place later).
    path: PathBuf,
}

#[derive(Debug, Default)]
struct FaultState {
    frozen: bool,
    rules: Vec<FaultRule>,
    /// Unsynced changes per file (by [`StorageFile::file_id`]).
    undo: HashMap<u64, Undo>,
    meta: Vec<MetaOp>,
    kept_seq: u64,
    undo_seq: u64,
    syncs: u64,
}

/// A [`Storage`] on top of another (real files by default) that can lose unsynced data and
/// inject errors (tests and simulations; see the module docs).
#[derive(Debug, Clone)]
pub struct FaultStorage {
    state: Arc<Mutex<FaultState>>,
    inner: Arc<dyn Storage>,
}

impl Default for FaultStorage {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Debug)]
struct FaultFile {
    inner: Arc<dyn StorageFile>,
    /// The path it was opened under (for rule matching).
    path: PathBuf,
    ino: u64,
    state: Arc<Mutex<FaultState>>,
}

impl FaultFile {
    fn new(
        inner: Arc<dyn StorageFile>,
        path: &Path,
        state: Arc<Mutex<FaultState>>,
    ) -> io::Result<Self> {
        let ino = inner.file_id()?;
        Ok(FaultFile { inner, path: path.to_path_buf(), ino, state })
    }

    fn undo_entry<'s>(&self, st: &'s mut FaultState) -> io::Result<&'s mut Undo> {
        let order = st.undo_seq;
        match st.undo.entry(self.ino) {
            std::collections::hash_map::Entry::Occupied(e) => Ok(e.into_mut()),
            std::collections::hash_map::Entry::Vacant(e) => {
                let undo = e.insert(Undo {
                    path: self.path.clone(),
                    file: self.inner.clone(),
                    len_bytes: self.inner.len_bytes()?,
                    writes: Vec::new(),
                    order,
                });
                st.undo_seq += 1;
                Ok(undo)
            }
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
    /// A fault-free storage over real files ([`RealStorage`]) that tracks unsynced state.
    pub fn new() -> Self {
        Self::over(Arc::new(RealStorage))
    }

    /// A fault-free storage over `inner` (a [`super::MemStorage`], say) that tracks unsynced
    /// state. `inner` must not be changed but through this storage while it tracks anything.
    pub fn over(inner: Arc<dyn Storage>) -> Self {
        FaultStorage { state: Arc::default(), inner }
    }

    /// The storage below.
    pub fn inner(&self) -> &Arc<dyn Storage> {
        &self.inner
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

    /// Power loss where the device had persisted **sectors**, not writes: each unsynced write
    /// (newest first, drawn from `seed`) is kept whole, lost whole, kept as a prefix of its
    /// 512-byte sectors ([`SECTOR_BYTES`], by file offset), or kept as a random subset of
    /// them — one in four each. A lost sector gets back what the write overwrote (zeros where
    /// it extended the file). Truncations are metadata, kept or lost whole. A file that grew
    /// keeps its new length or, as often, ends after its last kept sector (never before its
    /// synced length); with nothing kept it gets its synced length back. Creations, renames
    /// and removals are undone as by [`FaultStorage::power_loss`]. Returns the number of
    /// writes undone wholly or in part.
    ///
    /// Sync mode must survive it: every acknowledged record was flushed, so only records
    /// beyond the durable marker can be torn, and their checksums reveal them.
    pub fn power_loss_torn(&self, seed: u64) -> io::Result<usize> {
        let mut rng = seed;
        let mut next = move || {
            rng = rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = rng;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let mut st = lock(&self.state);
        st.frozen = true;
        let mut undone = 0;
        let mut undo: Vec<Undo> = std::mem::take(&mut st.undo).into_values().collect();
        // The map's order is random per process: files in the order they were first changed,
        // so a seed replays (and gives the same files on every backend).
        undo.sort_by_key(|u| u.order);
        for u in undo {
            let len_now = u.file.len_bytes()?;
            let grown = len_now > u.len_bytes;
            let (mut kept_any, mut kept_end) = (false, 0u64);
            // Byte ranges a newer write's kept sectors settled: an older write lost there
            // must not put its before-image over them.
            let mut settled: Vec<(u64, u64)> = Vec::new();
            for b in u.writes.iter().rev() {
                let end = b.offset + b.len;
                let first = b.offset / SECTOR_BYTES;
                let sectors = end.div_ceil(SECTOR_BYTES).saturating_sub(first).max(1);
                let choice = if b.write { next() % 4 } else { next() % 2 };
                let prefix = next() % sectors;
                let kept = |i: u64, bits: u64| match choice {
                    0 => true,
                    1 => false,
                    2 => i < prefix,
                    // One random bit per sector (a fresh word every 64 sectors).
                    _ => bits >> (i % 64) & 1 == 1,
                };
                let mut bits = next();
                let mut lost_any = false;
                for i in 0..sectors {
                    if i > 0 && i % 64 == 0 {
                        bits = next();
                    }
                    let from = ((first + i) * SECTOR_BYTES).max(b.offset);
                    let to = ((first + i + 1) * SECTOR_BYTES).min(end);
                    if kept(i, bits) {
                        kept_any = true;
                        if b.write {
                            kept_end = kept_end.max(to);
                        }
                        match settled.last_mut() {
                            Some(last) if last.1 == from => last.1 = to,
                            _ => settled.push((from, to)),
                        }
                        continue;
                    }
                    lost_any = true;
                    for (f, t) in unsettled(&settled, from, to) {
                        restore(&*u.file, b, f, t)?;
                    }
                }
                undone += usize::from(lost_any);
            }
            if !kept_any {
                u.file.set_len(u.len_bytes)?;
            } else if grown && next() % 2 == 0 {
                u.file.set_len(kept_end.clamp(u.len_bytes, len_now))?;
            }
        }
        self.undo_meta(&mut st)?;
        Ok(undone)
    }

    fn power_loss_with(&self, mut keep: impl FnMut(&Path, u64) -> bool) -> io::Result<usize> {
        let mut st = lock(&self.state);
        st.frozen = true;
        let mut undone = 0;
        let undo = std::mem::take(&mut st.undo);
        for (_, u) in undo {
            let grown = u.file.len_bytes()? > u.len_bytes;
            let mut kept_any_growth = false;
            // Whole writes: one keep-or-undo per write that overwrote something (a write
            // wholly past the end goes with the file's length below).
            for b in u.writes.iter().rev().filter(|b| !b.write || !b.old.is_empty()) {
                if keep(&u.path, b.offset) {
                    kept_any_growth |= grown;
                    continue;
                }
                u.file.write_at(&b.old, b.offset)?;
                undone += 1;
            }
            if !kept_any_growth {
                u.file.set_len(u.len_bytes)?;
            }
        }
        self.undo_meta(&mut st)?;
        Ok(undone)
    }

    /// Undoes the creations, renames and removals no directory sync covered.
    fn undo_meta(&self, st: &mut FaultState) -> io::Result<()> {
        let meta = std::mem::take(&mut st.meta);
        for op in meta.into_iter().rev() {
            match op {
                MetaOp::Created(p) => {
                    let _ = self.inner.remove(&p);
                }
                MetaOp::Renamed { from, to, replaced } => {
                    let _ = self.inner.rename(&to, &from);
                    if let Some(kept) = replaced {
                        self.inner.rename(&kept, &to)?;
                    }
                }
                MetaOp::Removed { path, kept } => self.inner.rename(&kept, &path)?,
            }
        }
        Ok(())
    }

    /// Whether `path` names an existing file or directory of the inner storage.
    fn exists(&self, path: &Path) -> io::Result<bool> {
        match self.inner.open(path, false) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            // A directory (the in-memory backend does not open those).
            Err(e) if e.raw_os_error() == Some(libc::EISDIR) => Ok(true),
            Err(e) => Err(e),
        }
    }

    fn keep_name(st: &mut FaultState, path: &Path) -> PathBuf {
        st.kept_seq += 1;
        let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(format!(".fault-kept-{}", st.kept_seq));
        path.with_file_name(name)
    }
}

/// The parts of `from..to` that no range of `settled` covers.
fn unsettled(settled: &[(u64, u64)], from: u64, to: u64) -> Vec<(u64, u64)> {
    let mut parts = vec![(from, to)];
    for &(s, e) in settled {
        parts = parts
            .into_iter()
            .flat_map(|(f, t)| {
                if e <= f || t <= s {
                    vec![(f, t)]
                } else {
                    [(f, s.max(f)), (e.min(t), t)].into_iter().filter(|(a, b)| a < b).collect()
                }
            })
            .collect();
    }
    parts
}

/// Puts back what change `b` overwrote in `from..to` (inside its range): its before-image,
/// zeros where it extended the file (up to the file's present end).
fn restore(file: &dyn StorageFile, b: &Before, from: u64, to: u64) -> io::Result<()> {
    let old_end = b.offset + b.old.len() as u64;
    if from < old_end {
        let upto = to.min(old_end);
        let at = (from - b.offset) as usize;
        file.write_at(&b.old[at..at + (upto - from) as usize], from)?;
    }
    let zeros_from = from.max(old_end);
    let zeros_to = to.min(file.len_bytes()?);
    if zeros_from < zeros_to {
        file.write_at(&vec![0u8; (zeros_to - zeros_from) as usize], zeros_from)?;
    }
    Ok(())
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
        let mut old = vec![0u8; end.saturating_sub(offset) as usize];
        if !old.is_empty() {
            self.inner.read_at(&mut old, offset)?;
        }
        let undo = self.undo_entry(&mut st)?;
        undo.writes.push(Before { offset, len: buf.len() as u64, old, write: true });
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
            let len = tail.len() as u64;
            undo.writes.push(Before { offset: len_bytes, len, old: tail, write: false });
        }
        self.inner.set_len(len_bytes)
    }
    fn len_bytes(&self) -> io::Result<u64> {
        self.inner.len_bytes()
    }
    fn start_writeback(&self, offset: u64, len_bytes: u64) {
        self.inner.start_writeback(offset, len_bytes)
    }
    fn file_id(&self) -> io::Result<u64> {
        Ok(self.ino)
    }
    fn map_private(&self, len_bytes: usize) -> io::Result<PrivateMemory> {
        self.inner.map_private(len_bytes)
    }
    fn map_read(&self, len_bytes: usize) -> io::Result<FileBytes> {
        self.inner.map_read(len_bytes)
    }
}

impl Storage for FaultStorage {
    /// No lock: a test "crashes" a database by freezing its storage and opens the directory
    /// again in the same process, as a restarted process would after the holder died.
    fn lock_dir(&self, _dir: &Path, _exclusive: bool) -> io::Result<DirLock> {
        Ok(DirLock::nothing())
    }
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let mut st = lock(&self.state);
        st.check(FaultOp::Create, path)?;
        let existed = self.exists(path)?;
        if existed {
            // Truncating an existing file is an unsynced change of its contents.
            let f = FaultFile::new(self.inner.open(path, true)?, path, self.state.clone())?;
            let mut old = vec![0u8; f.inner.len_bytes()? as usize];
            f.inner.read_at(&mut old, 0)?;
            let undo = f.undo_entry(&mut st)?;
            let len = old.len() as u64;
            undo.writes.push(Before { offset: 0, len, old, write: false });
        }
        let f = FaultFile::new(self.inner.create(path)?, path, self.state.clone())?;
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
        let inner = self.inner.open(path, writable)?;
        Ok(Arc::new(FaultFile::new(inner, path, self.state.clone())?))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = lock(&self.state);
        st.check(FaultOp::Rename, from)?;
        let replaced = if self.exists(to)? {
            let kept = Self::keep_name(&mut st, to);
            self.inner.rename(to, &kept)?;
            Some(kept)
        } else {
            None
        };
        self.inner.rename(from, to)?;
        st.meta.push(MetaOp::Renamed { from: from.to_path_buf(), to: to.to_path_buf(), replaced });
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut st = lock(&self.state);
        if st.frozen {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        let kept = Self::keep_name(&mut st, path);
        self.inner.rename(path, &kept)?;
        st.meta.push(MetaOp::Removed { path: path.to_path_buf(), kept });
        Ok(())
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        if lock(&self.state).frozen {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        let names = self.inner.list(dir)?;
        Ok(names.into_iter().filter(|n| !n.contains(".fault-kept-")).collect())
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = lock(&self.state);
        st.check(FaultOp::Sync, dir)?;
        self.inner.sync_dir(dir)?;
        let in_dir = |p: &Path| p.parent() == Some(dir);
        let meta = std::mem::take(&mut st.meta);
        for op in meta {
            match op {
                MetaOp::Created(p) if in_dir(&p) => {}
                MetaOp::Renamed { to, replaced, .. } if in_dir(&to) => {
                    if let Some(kept) = replaced {
                        let _ = self.inner.remove(&kept);
                    }
                }
                MetaOp::Removed { path, kept } if in_dir(&path) => {
                    let _ = self.inner.remove(&kept);
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
        self.inner.create_dir_all(dir)
    }
}
