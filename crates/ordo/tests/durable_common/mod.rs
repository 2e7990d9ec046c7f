//! Helpers shared by the durability tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use ordo::durable::io::{FaultStorage, MemStorage, RealStorage, Storage};
use ordo::durable::{DurableConfig, Mode};
use ordo::heap::{HeapConfig, SLAB_BYTES};
use ordo::{Config, Ordo};
use ordo_clock::LogicalClock;

pub(crate) type Db = Ordo<LogicalClock>;

/// Where a test's database lives. Tests of logic run in memory ([`MemStorage`]: no disk, no
/// `fdatasync` latency); tests of the OS path (real files, `flock`, `mmap`, and child processes
/// killed with `SIGKILL`) on real files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    Mem,
    Os,
}

/// Every in-memory directory lives under this root, in one [`MemStorage`] shared by the
/// binary's tests (each in its own directory), so helpers find a directory's storage by path.
const MEM_ROOT: &str = "/ordo-mem";

/// The in-memory storage of this test binary.
pub(crate) fn mem() -> &'static MemStorage {
    static MEM: OnceLock<MemStorage> = OnceLock::new();
    MEM.get_or_init(MemStorage::new)
}

/// The storage `dir` lives on (by its path: see [`MEM_ROOT`]).
pub(crate) fn storage_of(dir: &Path) -> Arc<dyn Storage> {
    if dir.starts_with(MEM_ROOT) { Arc::new(mem().clone()) } else { Arc::new(RealStorage) }
}

/// A fault-injecting storage over the storage `dir` lives on.
pub(crate) fn fault_storage(dir: &Path) -> FaultStorage {
    FaultStorage::over(storage_of(dir))
}

/// A fresh empty directory in memory.
pub(crate) fn temp_dir(name: &str) -> PathBuf {
    temp_dir_on(Backend::Mem, name)
}

/// A fresh empty directory on real files, under the target's temp area.
pub(crate) fn os_temp_dir(name: &str) -> PathBuf {
    temp_dir_on(Backend::Os, name)
}

/// A fresh empty directory on `backend`.
pub(crate) fn temp_dir_on(backend: Backend, name: &str) -> PathBuf {
    let leaf = format!("ordo-durable-{}-{name}-{}", std::process::id(), rand::random::<u32>());
    match backend {
        Backend::Mem => {
            let dir = Path::new(MEM_ROOT).join(leaf);
            mem().create_dir_all(&dir).unwrap();
            dir
        }
        Backend::Os => {
            let dir = std::env::temp_dir().join(leaf);
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            dir
        }
    }
}

/// Removes `dir` and its files, wherever it lives.
pub(crate) fn remove_dir_all(dir: &Path) {
    if dir.starts_with(MEM_ROOT) {
        let _ = mem().remove_dir_all(dir);
    } else {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The whole contents of the file at `path`, wherever it lives.
pub(crate) fn read_file(path: &Path) -> Vec<u8> {
    let f = storage_of(path).open(path, false).unwrap();
    let mut bytes = vec![0; f.len_bytes().unwrap() as usize];
    f.read_at(&mut bytes, 0).unwrap();
    bytes
}

/// Overwrites the file at `path` (which exists) with `bytes`, in place.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) {
    let f = storage_of(path).open(path, true).unwrap();
    f.set_len(bytes.len() as u64).unwrap();
    f.write_at(bytes, 0).unwrap();
}

/// Cuts or grows the file at `path` to `len_bytes`.
pub(crate) fn set_file_len(path: &Path, len_bytes: u64) {
    storage_of(path).open(path, true).unwrap().set_len(len_bytes).unwrap();
}

/// Removes the file at `path`.
pub(crate) fn remove_file(path: &Path) {
    storage_of(path).remove(path).unwrap();
}

/// A small durable configuration: 4-slab regions, 64 KiB chunks, 4 chunks per segment.
pub(crate) fn config(dir: &Path, mode: Mode, storage: Option<Arc<dyn Storage>>) -> Config {
    let mut d = DurableConfig::new(dir, mode);
    d.chunk_bytes = 64 << 10;
    d.chunks_per_segment = 4;
    // Deterministic by default: tests that want the background checkpointer turn it on.
    d.checkpoint_interval_ms = 0;
    d.log_segments_max = 0;
    // Segment files appear only when a commit needs one (tests count them).
    d.preallocate_segments = false;
    d.storage = storage.unwrap_or_else(|| storage_of(dir));
    Config {
        heap: HeapConfig { region_bytes: 4 * SLAB_BYTES, regions_max: 8, ..Default::default() },
        gc_interval_us: 0,
        threads_max: 16,
        durability: Some(d),
        ..Config::default()
    }
}

pub(crate) fn open(cfg: Config) -> Result<Db, ordo::Error> {
    Ordo::open_durable(cfg, LogicalClock::starting_at)
}

/// Every file of `dir` with its bytes.
pub(crate) fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let storage = storage_of(dir);
    storage.list(dir).unwrap().into_iter().map(|n| (n.clone(), read_file(&dir.join(n)))).collect()
}

/// The log segment files of `dir`, sorted.
pub(crate) fn segments(dir: &Path) -> Vec<PathBuf> {
    let storage = storage_of(dir);
    let mut v: Vec<PathBuf> = storage
        .list(dir)
        .unwrap()
        .into_iter()
        .map(|n| dir.join(n))
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    v.sort();
    v
}
