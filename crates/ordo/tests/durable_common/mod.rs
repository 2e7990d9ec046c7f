//! Helpers shared by the durability tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ordo::durable::io::Storage;
use ordo::durable::{DurableConfig, Mode};
use ordo::heap::{HeapConfig, SLAB_BYTES};
use ordo::{Config, Ordo};
use ordo_clock::LogicalClock;

pub(crate) type Db = Ordo<LogicalClock>;

/// A fresh empty directory under the target's temp area.
pub(crate) fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "ordo-durable-{}-{name}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
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
    if let Some(s) = storage {
        d.storage = s;
    }
    Config {
        heap: HeapConfig { region_bytes: 4 * SLAB_BYTES, regions_max: 8 },
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
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())
        })
        .collect()
}

pub(crate) fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    v.sort();
    v
}
