//! `ordo bench cluster-clock`: synchronised-clock uncertainty against sync rate and node count
//! (FaRMv2 Fig. 16 and 17, at our scale).
//!
//! Each cell starts N real nodes in this process — each with its transport server, its lease and
//! clock-sync thread and its own TCP connection to the CM on loopback — under a fixed
//! configuration (no etcd: the clock is what is measured), waits until every clock is enabled,
//! lets the synchronisation settle, then samples for the cell's duration: one sampler thread
//! visits the non-CM nodes in turn, reading `now()` (the interval width U − L) and taking
//! `get_ts()` (the uncertainty wait, timed around the call), with a short pause between samples
//! so that the 2-core machine still runs the sync threads. Cells run in interleaved order
//! (every cell once, then every cell again) `repetitions` times; the report gives the median and
//! the min–max over repetitions.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use ordo_clock::Clock;
use ordo_cluster::config::{ClusterConfig, Member, NodeConfig};
use ordo_cluster::etcd_server::free_port;
use ordo_cluster::node::{ConfigSource, LocalClock, Node};
use serde::Serialize;

use crate::error::BenchError;
pub use crate::report::median_min_max;

/// What to measure.
#[derive(Clone, Debug)]
pub struct ClusterClockConfig {
    /// Node counts (each ≥ 2: a CM and at least one follower).
    pub node_counts: Vec<usize>,
    /// Aggregate sync rates (syncs per second summed over the followers).
    pub sync_rates: Vec<u32>,
    /// Sampling time per cell.
    pub duration: Duration,
    /// Settling time after every clock is enabled.
    pub warmup: Duration,
    /// Repetitions of the whole grid.
    pub repetitions: usize,
    /// Pause between samples.
    pub sample_pause: Duration,
    /// The drift bound ε.
    pub drift_bound_ppm: u64,
    /// Where the cells' secret files go.
    pub dir: PathBuf,
}

/// One measured cell.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterClockRow {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Aggregate sync rate, per second.
    pub sync_rate_per_s: u32,
    /// Repetition index.
    pub repetition: usize,
    /// Mean interval width U − L seen by the followers, ns.
    pub width_mean_nanos: f64,
    /// Largest width seen, ns.
    pub width_max_nanos: u64,
    /// Mean `get_ts` wait, ns.
    pub get_ts_wait_mean_nanos: f64,
    /// Mean sync round trip over the followers, ns.
    pub sync_rtt_mean_nanos: f64,
    /// Syncs completed per second during sampling, summed over followers.
    pub syncs_per_s: f64,
    /// Samples taken.
    pub samples: u64,
}

/// Progress of a run, for a progress bar.
pub struct ClusterClockProgress {
    /// Cells done.
    pub done: usize,
    /// Cells in all.
    pub total: usize,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BenchError + '_ {
    move |source| BenchError::Io { path: path.to_path_buf(), source }
}

fn cluster_err(e: impl std::fmt::Display) -> BenchError {
    BenchError::Cluster(e.to_string())
}

/// Runs the grid (module docs).
pub fn run(
    config: &ClusterClockConfig,
    local: &dyn Fn() -> LocalClock,
    progress: &mut dyn FnMut(ClusterClockProgress),
) -> Result<Vec<ClusterClockRow>, BenchError> {
    if config.node_counts.iter().any(|&n| n < 2) {
        return Err(BenchError::OutOfRange {
            name: "nodes",
            value: format!("{:?}", config.node_counts),
            expected: "at least 2 (a clock master and a follower)",
        });
    }
    if config.sync_rates.contains(&0) {
        return Err(BenchError::OutOfRange {
            name: "sync-rate",
            value: "0".into(),
            expected: "at least 1 per second",
        });
    }
    std::fs::create_dir_all(&config.dir).map_err(io_err(&config.dir))?;
    let secret = config.dir.join("secret");
    std::fs::write(&secret, "cluster-clock-benchmark-secret").map_err(io_err(&secret))?;
    let total = config.repetitions * config.node_counts.len() * config.sync_rates.len();
    let mut rows = Vec::with_capacity(total);
    for repetition in 0..config.repetitions {
        for &nodes in &config.node_counts {
            for &rate in &config.sync_rates {
                rows.push(cell(config, &secret, nodes, rate, repetition, local)?);
                progress(ClusterClockProgress { done: rows.len(), total });
            }
        }
    }
    Ok(rows)
}

fn cell(
    config: &ClusterClockConfig,
    secret: &Path,
    nodes: usize,
    rate: u32,
    repetition: usize,
    local: &dyn Fn() -> LocalClock,
) -> Result<ClusterClockRow, BenchError> {
    let mut files = Vec::new();
    let mut members = Vec::new();
    for i in 0..nodes {
        let id = u64::try_from(i + 1).unwrap_or(u64::MAX);
        let port = free_port().map_err(io_err(&config.dir))?;
        let addr = format!("127.0.0.1:{port}");
        let mut file = NodeConfig::new(id, "bench", &addr, vec!["unused:1".into()], secret.into());
        file.sync_rate_per_s = rate;
        file.drift_bound_ppm = config.drift_bound_ppm;
        // Long leases: this measures the clock, not failure detection.
        file.lease_ms = 1_000;
        members.push(Member { id, addr });
        files.push(file);
    }
    let cluster = ClusterConfig::initial(members, 0);
    let mut running = Vec::new();
    for file in files {
        running.push(
            Node::start(file, ConfigSource::Static(cluster.clone()), local())
                .map_err(cluster_err)?,
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while running.iter().any(|n| !n.clock().is_enabled()) {
        if Instant::now() > deadline {
            return Err(BenchError::Cluster(format!(
                "clocks not enabled within 10 s ({nodes} nodes, {rate} syncs/s)"
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(config.warmup);

    let followers: Vec<&Node> = running.iter().skip(1).collect();
    let syncs_before: u64 = followers.iter().map(|n| n.metrics().syncs.load(Relaxed)).sum();
    let (mut width_sum, mut width_max, mut wait_sum, mut samples) = (0u128, 0u64, 0u128, 0u64);
    let started = Instant::now();
    let mut i = 0usize;
    while started.elapsed() < config.duration {
        let clock = followers[i % followers.len()].clock();
        i += 1;
        let width = clock.now().width_nanos();
        let t0 = Instant::now();
        let _ = clock.get_ts();
        let waited = t0.elapsed();
        width_sum += u128::from(width);
        width_max = width_max.max(width);
        wait_sum += waited.as_nanos();
        samples += 1;
        std::thread::sleep(config.sample_pause);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let syncs_after: u64 = followers.iter().map(|n| n.metrics().syncs.load(Relaxed)).sum();
    let rtt_mean = followers
        .iter()
        .map(|n| {
            let m = n.metrics();
            m.sync_rtt_sum_nanos.load(Relaxed) as f64 / m.syncs.load(Relaxed).max(1) as f64
        })
        .sum::<f64>()
        / followers.len() as f64;
    drop(followers);
    for node in running {
        node.shutdown();
    }
    let n = samples.max(1) as f64;
    Ok(ClusterClockRow {
        nodes,
        sync_rate_per_s: rate,
        repetition,
        width_mean_nanos: width_sum as f64 / n,
        width_max_nanos: width_max,
        get_ts_wait_mean_nanos: wait_sum as f64 / n,
        sync_rtt_mean_nanos: rtt_mean,
        syncs_per_s: syncs_after.saturating_sub(syncs_before) as f64 / elapsed.max(1e-9),
        samples,
    })
}

/// The summary table: one line per (nodes, sync rate), medians with min–max.
pub fn table(rows: &[ClusterClockRow]) -> String {
    let mut cells: Vec<(usize, u32)> = rows.iter().map(|r| (r.nodes, r.sync_rate_per_s)).collect();
    cells.sort_unstable();
    cells.dedup();
    let mut out = format!(
        "{:>5} {:>10} {:>26} {:>26} {:>12} {:>10}\n",
        "nodes",
        "syncs/s",
        "U-L us median [min-max]",
        "get_ts wait us [min-max]",
        "rtt us",
        "syncs/s got"
    );
    for (nodes, rate) in cells {
        let of = |f: &dyn Fn(&ClusterClockRow) -> f64| {
            let mut v: Vec<f64> = rows
                .iter()
                .filter(|r| r.nodes == nodes && r.sync_rate_per_s == rate)
                .map(f)
                .collect();
            median_min_max(&mut v)
        };
        let w = of(&|r| r.width_mean_nanos / 1e3);
        let g = of(&|r| r.get_ts_wait_mean_nanos / 1e3);
        let rtt = of(&|r| r.sync_rtt_mean_nanos / 1e3);
        let got = of(&|r| r.syncs_per_s);
        out.push_str(&format!(
            "{nodes:>5} {rate:>10} {:>26} {:>26} {:>12.1} {:>10.0}\n",
            format!("{:.1} [{:.1}-{:.1}]", w.0, w.1, w.2),
            format!("{:.1} [{:.1}-{:.1}]", g.0, g.1, g.2),
            rtt.0,
            got.0,
        ));
    }
    out
}

/// The default local clock: `CLOCK_MONOTONIC`.
pub fn system_local() -> LocalClock {
    Arc::new(ordo_clock::SystemClock::new())
}
