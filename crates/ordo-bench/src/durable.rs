//! The durable commit benchmark (SPHT's evaluation on files): committed tx/s and commit latency
//! per durability mode, the group-commit factor (commits per `fdatasync`), recovery speed, and
//! the raw `pwrite + fdatasync` loop that bounds a synced commit on one thread.
//!
//! Every database lives in a fresh directory under the given parent and is removed afterwards.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ordo::durable::{DurableConfig, Mode};
use ordo::{Config, Ordo};
use ordo_clock::{Clock, Timestamp};

use crate::driver::RunStats;
use crate::error::BenchError;
use crate::synthetic::{self, SyntheticConfig};
use crate::ycsb::{self, YcsbConfig};

/// Which workload a durable run executes.
#[derive(Clone, Debug)]
pub enum Workload {
    /// One of SPHT's synthetic mixes.
    Synthetic(SyntheticConfig),
    /// A YCSB mix.
    Ycsb(YcsbConfig),
}

impl Workload {
    fn threads(&self) -> usize {
        match self {
            Workload::Synthetic(c) => c.threads,
            Workload::Ycsb(c) => c.threads,
        }
    }
}

/// One measured run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DurableRun {
    /// `none`, `process` or `sync`.
    pub mode: &'static str,
    /// The engine's run statistics (tx/s, latency percentiles).
    pub stats: RunStats,
    /// Log `fdatasync` calls during the run.
    pub fsyncs: u64,
    /// Committed read-write transactions per `fdatasync` (the group-commit factor).
    pub commits_per_fsync: f64,
    /// Log bytes written per committed transaction.
    pub log_bytes_per_commit: f64,
}

/// A fresh directory under `parent`.
pub fn fresh_dir(parent: &Path, name: &str) -> Result<PathBuf, BenchError> {
    let dir = parent.join(format!("ordo-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|source| BenchError::Io { path: dir.clone(), source })?;
    Ok(dir)
}

/// Durability settings a run varies besides the mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Knobs {
    /// [`DurableConfig::flush_after_commit`] (SPHT Alg. 5).
    pub flush_after_commit: bool,
    /// [`DurableConfig::group_wait_us`] (leader/follower batching); `None`: the default.
    pub group_wait_us: Option<u64>,
}

/// The database configuration of a run: in memory for `None`.
pub fn config(dir: &Path, mode: Option<Mode>, knobs: Knobs) -> Config {
    Config {
        durability: mode.map(|m| {
            let d = DurableConfig::new(dir, m);
            DurableConfig {
                flush_after_commit: knobs.flush_after_commit,
                group_wait_us: knobs.group_wait_us.unwrap_or(d.group_wait_us),
                chunks_per_segment: 64,
                ..d
            }
        }),
        ..Config::default()
    }
}

/// Loads and runs `workload` on a database in `dir` with `mode`, returning the measurement; the
/// database is closed (and its directory left for [`recovery_speed`]) when this returns.
pub fn run<C: Clock>(
    clock: C,
    workload: &Workload,
    dir: &Path,
    mode: Option<Mode>,
    knobs: Knobs,
) -> Result<DurableRun, BenchError> {
    let base = config(dir, mode, knobs);
    let (stats, before, after) = match workload {
        Workload::Synthetic(cfg) => {
            let t = synthetic::load_with(clock, cfg, base)?;
            let before = t.db.durable_stats().unwrap_or_default();
            let stats = synthetic::run(&t, cfg);
            (stats, before, t.db.durable_stats().unwrap_or_default())
        }
        Workload::Ycsb(cfg) => {
            let t = ycsb::load_with(clock, cfg, cfg.threads.max(1), base)?;
            let before = t.db.durable_stats().unwrap_or_default();
            let stats = ycsb::run(&t, cfg);
            (stats, before, t.db.durable_stats().unwrap_or_default())
        }
    };
    let _ = workload.threads();
    let fsyncs = after.fsyncs - before.fsyncs;
    let commits = stats.committed.max(1) as f64;
    Ok(DurableRun {
        mode: mode.map_or("none", Mode::name),
        commits_per_fsync: if fsyncs == 0 { 0.0 } else { stats.committed as f64 / fsyncs as f64 },
        log_bytes_per_commit: (after.bytes - before.bytes) as f64 / commits,
        fsyncs,
        stats,
    })
}

/// Recovery speed of one directory.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RecoverySpeed {
    /// Transaction records found.
    pub records: u64,
    /// Bytes of valid log.
    pub log_bytes: u64,
    /// Seconds of the read-only scan (read every segment, check every record).
    pub scan_s: f64,
    /// Seconds of the full recovery at open (scan, replay, heap sync, checkpoint).
    pub recover_s: f64,
    /// Scanned log per second, MB.
    pub scan_mb_per_s: f64,
    /// Recovered log per second, MB.
    pub recover_mb_per_s: f64,
    /// Records recovered per second.
    pub records_per_s: f64,
    /// CPU seconds (all threads, user + system) of the scan; `None` without `/proc/self/stat`.
    pub scan_cpu_s: Option<f64>,
    /// CPU seconds of the open; barely changes when other processes compete for the cores.
    pub recover_cpu_s: Option<f64>,
    /// The open's recovery report: phase times (scan, filter, write, sync, cleanup) in ns.
    pub phases_ns: [u64; 5],
}

/// Scans, then opens (recovers) the database in `dir` and times both.
pub fn recovery_speed<C: Clock>(
    dir: &Path,
    mode: Mode,
    make_clock: impl FnOnce(Timestamp) -> C,
) -> Result<RecoverySpeed, BenchError> {
    let cpu = crate::tpcc::process_cpu_s;
    let c0 = cpu();
    let t0 = Instant::now();
    let scan = ordo::durable::inspect(&ordo::durable::io::RealStorage, dir)
        .map_err(|e| BenchError::Engine(e.into()))?;
    let scan_s = t0.elapsed().as_secs_f64();
    let c1 = cpu();
    let t1 = Instant::now();
    let db = Ordo::open_durable(config(dir, Some(mode), Knobs::default()), make_clock)?;
    let recover_s = t1.elapsed().as_secs_f64();
    let c2 = cpu();
    let report = db.recovery_report().cloned().unwrap_or_default();
    drop(db);
    let mb = report.log_bytes as f64 / 1e6;
    Ok(RecoverySpeed {
        records: scan.records,
        log_bytes: scan.log_bytes,
        scan_s,
        recover_s,
        scan_mb_per_s: scan.log_bytes as f64 / 1e6 / scan_s.max(1e-9),
        recover_mb_per_s: mb / recover_s.max(1e-9),
        records_per_s: report.records as f64 / recover_s.max(1e-9),
        scan_cpu_s: c0.zip(c1).map(|(a, b)| b - a),
        recover_cpu_s: c1.zip(c2).map(|(a, b)| b - a),
        phases_ns: [
            report.scan_ns,
            report.filter_ns,
            report.write_ns,
            report.sync_ns,
            report.cleanup_ns,
        ],
    })
}

/// The raw baseline: `pwrite` of `record_bytes` at increasing offsets of a preallocated file,
/// each followed by `fdatasync`, for `duration`. Returns operations per second.
pub fn raw_fsync_rate(
    dir: &Path,
    record_bytes: usize,
    duration: Duration,
) -> Result<f64, BenchError> {
    let path = dir.join("raw-fdatasync.bin");
    let err = |source| BenchError::Io { path: path.clone(), source };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(err)?;
    let file_bytes = 64u64 << 20;
    let zeros = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < file_bytes {
        f.write_all_at(&zeros, at).map_err(err)?;
        at += zeros.len() as u64;
    }
    f.sync_all().map_err(err)?;
    let record = vec![0xA5u8; record_bytes];
    let (mut ops, mut offset) = (0u64, 0u64);
    let start = Instant::now();
    while start.elapsed() < duration {
        f.write_all_at(&record, offset).map_err(err)?;
        f.sync_data().map_err(err)?;
        offset = (offset + record_bytes as u64) % (file_bytes - record_bytes as u64);
        ops += 1;
    }
    let rate = ops as f64 / start.elapsed().as_secs_f64();
    drop(f);
    let _ = std::fs::remove_file(&path);
    Ok(rate)
}

/// What [`generate_log`] wrote.
#[derive(Clone, Debug, serde::Serialize)]
pub struct GeneratedLog {
    /// Transactions committed after the objects were allocated.
    pub transactions: u64,
    /// Bytes of log records written (all of them, allocation included).
    pub log_bytes: u64,
    /// Seconds the generation took.
    pub seconds: f64,
}

/// Fills the fresh directory `dir` with a process-mode durable database of `objects` objects of
/// `object_bytes` bytes and then commits transactions writing `writes_per_tx` random objects
/// each, on `threads` threads, until about `log_bytes` of log were written. No checkpointer
/// runs and the log is unbounded, so recovery must replay all of it.
pub fn generate_log(
    dir: &Path,
    log_bytes: u64,
    objects: usize,
    object_bytes: usize,
    writes_per_tx: usize,
    threads: usize,
) -> Result<GeneratedLog, BenchError> {
    use rand::{Rng, SeedableRng};
    if threads == 0 {
        return Err(BenchError::ZeroThreads);
    }
    if objects == 0 || object_bytes == 0 || writes_per_tx == 0 {
        return Err(BenchError::OutOfRange {
            name: "objects, object bytes, writes per transaction",
            value: format!("{objects}, {object_bytes}, {writes_per_tx}"),
            expected: "each at least 1",
        });
    }
    let started = Instant::now();
    let config = Config {
        threads_max: threads.max(1) + 1,
        durability: Some(DurableConfig {
            chunks_per_segment: 64,
            checkpoint_interval_ms: 0,
            log_segments_max: 0,
            ..DurableConfig::new(dir, Mode::Process)
        }),
        ..Config::default()
    };
    let db = Ordo::open_durable(config, ordo_clock::LogicalClock::starting_at)?;
    let payload = vec![0x5Au8; object_bytes];
    let mut addrs = Vec::with_capacity(objects);
    for batch in (0..objects).collect::<Vec<_>>().chunks(256) {
        let a: Vec<ordo::Addr> = db.run(|tx| {
            batch.iter().map(|_| tx.alloc_bytes(&payload)).collect::<Result<_, ordo::Error>>()
        })?;
        addrs.extend(a);
    }
    let bytes_of = |db: &Ordo<ordo_clock::LogicalClock>| db.durable_stats().map_or(0, |s| s.bytes);
    let transactions = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| -> Result<(), BenchError> {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (db, addrs, transactions) = (&db, &addrs, &transactions);
                s.spawn(move || -> Result<(), BenchError> {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5EED + t as u64);
                    let mut value = vec![0u8; object_bytes];
                    let mut n = 0u64;
                    loop {
                        if n.is_multiple_of(1024) && bytes_of(db) >= log_bytes {
                            break;
                        }
                        let picks: Vec<ordo::Addr> = (0..writes_per_tx)
                            .map(|_| addrs[rng.random_range(0..addrs.len())])
                            .collect();
                        value[..8.min(object_bytes)]
                            .copy_from_slice(&n.to_le_bytes()[..8.min(object_bytes)]);
                        db.run(|tx| {
                            for a in &picks {
                                tx.write_bytes(*a, &value)?;
                            }
                            Ok::<_, ordo::Error>(())
                        })?;
                        n += 1;
                    }
                    transactions.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| BenchError::ZeroThreads)??;
        }
        Ok(())
    })?;
    let log_bytes = bytes_of(&db);
    drop(db);
    Ok(GeneratedLog {
        transactions: transactions.into_inner(),
        log_bytes,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Copies the files of `from` (a closed database directory) into the fresh directory `to`.
pub fn copy_dir(from: &Path, to: &Path) -> Result<(), BenchError> {
    let _ = std::fs::remove_dir_all(to);
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| BenchError::Io { path, source }
    };
    std::fs::create_dir_all(to).map_err(err(to))?;
    for e in std::fs::read_dir(from).map_err(err(from))? {
        let e = e.map_err(err(from))?;
        std::fs::copy(e.path(), to.join(e.file_name())).map_err(err(&e.path()))?;
    }
    Ok(())
}
