//! [`RealStorage`]: the operating system's files, and the mappings the heap and recovery read
//! them through (`MAP_PRIVATE` for a region's working copy, read-only for a log segment).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::{DirLock, FileBytes, Held, PrivateMemory, Storage, StorageFile};

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
    fn file_id(&self) -> io::Result<u64> {
        use std::os::unix::fs::MetadataExt;
        Ok(self.0.metadata()?.ino())
    }
    fn map_private(&self, len_bytes: usize) -> io::Result<PrivateMemory> {
        PrivateMemory::map_file(&self.0, len_bytes)
    }
    fn map_read(&self, len_bytes: usize) -> io::Result<FileBytes> {
        FileBytes::map_file(&self.0, len_bytes)
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
            return Ok(DirLock { _held: Held::Os { _dir: f } });
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
