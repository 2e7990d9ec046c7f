//! # Benchmark databases: in memory, or durable in a scratch directory
//!
//! Every engine workload (`ycsb`, `synthetic`, `tpcc`, `hashtable --impl txn`, `scan-update`,
//! `stamp`) can run on a durable database (DESIGN §5, `ordo::durable`): [`Durability`] says
//! which mode and under which directory, and this module is the one place that turns it into
//! an engine configuration.
//!
//! Invariants:
//! * **One fresh directory per database.** [`Durability::scratch`] creates a new directory
//!   (`ordo-bench-NAME-PID-N`) with `create_dir`, never reusing one, so a benchmark never
//!   recovers an earlier run's log and the clock it is given is always ahead of the (empty)
//!   database: opening with the caller's clock is what [`ordo::Ordo::open_durable`] would do.
//! * **The directory outlives the database.** A [`ScratchDir`] removes its directory when
//!   dropped; whoever holds the database holds the guard too and drops the database first
//!   ([`Scratched`] declares the loaded workload before the guard, and fields drop in
//!   declaration order).
//! * **The base directory is not created.** A missing or unwritable `--durability-dir` is a
//!   mistake to report ([`BenchError::DurabilityDir`]), not to paper over; [`Durability::check`]
//!   finds it before anything is loaded.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ordo::durable::{DurableConfig, Mode};
use ordo::{Config, Ordo};
use ordo_clock::Clock;

use crate::driver::RunStats;
use crate::error::BenchError;
use crate::harness::Loaded;

/// How benchmark databases are made durable, and which pages an in-memory heap asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Durability {
    /// `None` keeps the database in memory.
    pub mode: Option<Mode>,
    /// Where each database gets its fresh directory; `None` is the system temporary
    /// directory (`$TMPDIR`, else `/tmp`).
    pub base_dir: Option<PathBuf>,
    /// Sets [`ordo::heap::HeapConfig::huge_pages`]; `None` leaves the engine's default.
    pub huge_pages: Option<bool>,
}

/// Bytes per log chunk of benchmark databases. Loaders write big transactions (TPC-C creates
/// its ORDER hash index in one, about 7 MB per warehouse at the standard scale); 16 MiB
/// chunks log most of them as one record rather than in parts.
pub const LOG_CHUNK_BYTES: u32 = 16 << 20;

/// Chunks per log segment of benchmark databases: 64 MiB segments, as `ordo bench durable`.
pub const LOG_CHUNKS_PER_SEGMENT: u32 = 4;

/// Attempts to find an unused scratch directory name before giving up.
const SCRATCH_ATTEMPTS_MAX: u32 = 64;

/// Scratch directories made by this process so far (part of their names).
static SCRATCH_COUNT: AtomicU64 = AtomicU64::new(0);

impl Durability {
    /// In memory.
    pub fn none() -> Self {
        Durability::default()
    }

    /// Durable with `mode` under the system temporary directory.
    pub fn with_mode(mode: Mode) -> Self {
        Durability { mode: Some(mode), ..Durability::default() }
    }

    /// `none`, `process` or `sync`.
    pub fn name(&self) -> &'static str {
        self.mode.map_or("none", Mode::name)
    }

    /// The directory the scratch directories are made in.
    pub fn base_dir(&self) -> PathBuf {
        self.base_dir.clone().unwrap_or_else(std::env::temp_dir)
    }

    /// Checks that a scratch directory can be made under the base directory (by making and
    /// removing one); in memory there is nothing to check.
    pub fn check(&self) -> Result<(), BenchError> {
        self.scratch("check").map(drop)
    }

    /// A fresh directory for one database, or `None` in memory.
    pub fn scratch(&self, name: &str) -> Result<Option<ScratchDir>, BenchError> {
        if self.mode.is_none() {
            return Ok(None);
        }
        let base = self.base_dir();
        let err = |source| BenchError::DurabilityDir { dir: base.clone(), source };
        let meta = std::fs::metadata(&base).map_err(err)?;
        if !meta.is_dir() {
            return Err(err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "not a directory",
            )));
        }
        for _ in 0..SCRATCH_ATTEMPTS_MAX {
            let n = SCRATCH_COUNT.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("ordo-bench-{name}-{}-{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Some(ScratchDir { path })),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(err(e)),
            }
        }
        Err(err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("{SCRATCH_ATTEMPTS_MAX} scratch directory names in a row are taken"),
        )))
    }

    /// `base` made durable in a fresh scratch directory (returned: keep it until the database
    /// is dropped), or `base` unchanged in memory. The log has [`LOG_CHUNK_BYTES`] chunks,
    /// [`LOG_CHUNKS_PER_SEGMENT`] to a segment; the checkpoint settings are the engine's
    /// defaults.
    pub fn config(
        &self,
        mut base: Config,
        name: &str,
    ) -> Result<(Config, Option<ScratchDir>), BenchError> {
        if let Some(huge_pages) = self.huge_pages {
            base.heap.huge_pages = huge_pages;
        }
        match (self.mode, self.scratch(name)?) {
            (Some(mode), Some(dir)) => {
                let durability = Some(DurableConfig {
                    chunk_bytes: LOG_CHUNK_BYTES,
                    chunks_per_segment: LOG_CHUNKS_PER_SEGMENT,
                    ..DurableConfig::new(dir.path(), mode)
                });
                Ok((Config { durability, ..base }, Some(dir)))
            }
            _ => Ok((base, None)),
        }
    }

    /// The JSON of the durability, recorded with every result: `"none"`, `"process"`, `"sync"`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::Value::from(self.name())
    }

    /// Records the durability in a workload's JSON configuration (an object): the mode under
    /// `durability`, the base directory under `durability_dir` when durable, and
    /// `huge_pages` when set.
    pub fn record_in(&self, config: &mut serde_json::Value) {
        if let Some(object) = config.as_object_mut() {
            object.insert("durability".into(), self.json());
            if let Some(huge_pages) = self.huge_pages {
                object.insert("huge_pages".into(), serde_json::Value::from(huge_pages));
            }
            if self.mode.is_some() {
                object.insert(
                    "durability_dir".into(),
                    serde_json::Value::from(self.base_dir().display().to_string()),
                );
            }
        }
    }
}

impl serde::Serialize for Durability {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A directory removed (with everything in it) when dropped.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    /// Removes the directory. A background checkpoint that still held the database when it was
    /// dropped may create a file during the removal, so a failed removal is retried a few
    /// times; what remains after that is left (it is under a temporary directory).
    fn drop(&mut self) {
        for _ in 0..3 {
            match std::fs::remove_dir_all(&self.path) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }
}

/// Opens a database on `clock` with `config` made durable by `durability` (the one way every
/// benchmark that opens its own database per run does it). Returns the scratch directory to
/// keep until the database is dropped.
pub fn open<C: Clock>(
    config: Config,
    clock: C,
    durability: &Durability,
    name: &str,
) -> Result<(Ordo<C>, Option<ScratchDir>), BenchError> {
    let (config, dir) = durability.config(config, name)?;
    // A fresh directory recovers nothing, so any clock is ahead of it.
    let db = if config.durability.is_some() {
        Ordo::open_durable(config, |_recovered| clock)?
    } else {
        Ordo::with_clock(config, clock)?
    };
    Ok((db, dir))
}

/// A loaded workload together with the scratch directory of its database.
pub struct Scratched<L> {
    /// The workload (dropped first: it holds the database).
    loaded: L,
    /// The database's directory, removed after the database is closed.
    _dir: Option<ScratchDir>,
}

impl<L: Loaded> Loaded for Scratched<L> {
    fn run(&self, threads: usize, duration: Duration) -> Result<RunStats, BenchError> {
        self.loaded.run(threads, duration)
    }

    fn check(&self) -> Result<(), BenchError> {
        self.loaded.check()
    }
}

/// Loads a workload whose loader takes a base [`Config`] (`ycsb::load_with`,
/// `tpcc::load_with`, …) on a database made durable by `durability`, and keeps the scratch
/// directory with it. This is how the CLI and the suite load every engine workload.
pub fn load<L: Loaded + 'static>(
    durability: &Durability,
    name: &str,
    load: impl FnOnce(Config) -> Result<L, BenchError>,
) -> Result<Box<dyn Loaded>, BenchError> {
    let (config, dir) = durability.config(Config::default(), name)?;
    let loaded = load(config)?;
    Ok(Box::new(Scratched { loaded, _dir: dir }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_dirs_are_fresh_and_removed_on_drop() {
        let d = Durability::with_mode(Mode::Process);
        let a = d.scratch("t").unwrap().unwrap();
        let b = d.scratch("t").unwrap().unwrap();
        assert_ne!(a.path(), b.path());
        std::fs::write(a.path().join("file"), b"x").unwrap();
        let path = a.path().to_owned();
        drop(a);
        assert!(!path.exists());
        assert!(b.path().is_dir());
    }

    #[test]
    fn in_memory_needs_no_directory() {
        let d = Durability { base_dir: Some("/nonexistent/ordo".into()), ..Durability::default() };
        assert!(d.check().is_ok());
        let (config, dir) = d.config(Config::default(), "t").unwrap();
        assert!(config.durability.is_none());
        assert!(dir.is_none());
    }

    #[test]
    fn huge_pages_reach_the_heap_config_only_when_set() {
        let engine_default = Config::default().heap.huge_pages;
        let (config, _) = Durability::none().config(Config::default(), "t").unwrap();
        assert_eq!(config.heap.huge_pages, engine_default);
        for set in [false, true] {
            let d = Durability { huge_pages: Some(set), ..Durability::default() };
            let (config, _) = d.config(Config::default(), "t").unwrap();
            assert_eq!(config.heap.huge_pages, set);
            let mut json = serde_json::json!({});
            d.record_in(&mut json);
            assert_eq!(json["huge_pages"], serde_json::Value::from(set));
        }
    }

    #[test]
    fn a_missing_or_non_directory_base_is_refused() {
        let missing = Durability {
            mode: Some(Mode::Sync),
            base_dir: Some("/nonexistent/ordo-bench-base".into()),
            huge_pages: None,
        };
        assert!(matches!(missing.check(), Err(BenchError::DurabilityDir { .. })));
        let file = std::env::temp_dir().join(format!("ordo-engine-file-{}", std::process::id()));
        std::fs::write(&file, b"x").unwrap();
        let not_dir =
            Durability { mode: Some(Mode::Sync), base_dir: Some(file.clone()), huge_pages: None };
        let e = not_dir.check().unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
        std::fs::remove_file(&file).unwrap();
    }

    #[test]
    fn open_makes_a_durable_database_in_its_scratch_dir() {
        let d = Durability::with_mode(Mode::Process);
        let (db, dir) =
            open(Config::default(), ordo_clock::LogicalClock::new(), &d, "open").unwrap();
        let dir = dir.unwrap();
        assert!(db.durable_stats().is_some());
        let a = db.run(|tx| tx.alloc(&7u64)).unwrap();
        assert_eq!(db.run(|tx| tx.read::<u64>(a)).unwrap(), 7);
        assert!(std::fs::read_dir(dir.path()).unwrap().count() > 0, "no files in {dir:?}");
        drop(db);
        let path = dir.path().to_owned();
        drop(dir);
        assert!(!path.exists());
    }
}
