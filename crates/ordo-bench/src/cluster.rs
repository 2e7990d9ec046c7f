//! # Engine workloads on a cluster
//!
//! `ordo bench ycsb --cluster N` and `ordo bench tpcc --cluster N` run the embedded workloads
//! unchanged on an in-process loopback cluster of N nodes ([`ordo_cluster::loopback`]) through
//! one cluster client ([`ordo_cluster::client::Client`]): the workloads are generic over the
//! engine's clock, and the client's engine is an `Ordo<Arc<NodeClock>>` whose every region is
//! remote, so the workload code is the same and every read, lock, validation and commit step is a
//! call to the node owning the object.
//!
//! [`Cluster`] owns the nodes and the client; [`OnCluster`] wraps a workload loaded on
//! [`Cluster::db`] and adds to every run two figures ([`RunStats::metrics`]):
//! * `round_trips_per_commit`: network calls the client issued during the run over the
//!   transactions committed (a fan-out to several backups counts each call; aborted attempts'
//!   calls count too);
//! * `uncertainty_wait_pct`: the time commits spent waiting out write-timestamp uncertainty
//!   (`ordo::Stats::write_wait_ns`) as a percentage of the run's thread time (elapsed × threads).
//!   The wait for a strict read timestamp at `begin` is not counted by the engine and is not in
//!   it.
//!
//! After every run the workload's own check runs through the client, then every pending
//! truncation is sent and the backups drained, and every backup's copy of each region must hold
//! its primary's committed objects (the cluster's replication invariant).
//!
//! Invariants:
//! * **The client closes before the nodes.** Fields drop in declaration order: an [`OnCluster`]
//!   drops its workload (which holds a handle of the client's engine), then the cluster, whose
//!   client drops before its nodes.
//! * **Each region fits its share.** A node is primary of one region and backup of another;
//!   [`ClusterOptions::region_bytes`] must hold a node's share of the data, and the loaders are
//!   the caller's to size (small scales: loading goes through the network, one call per object).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ordo::Ordo;
use ordo_clock::{Clock, ClockDescription, ClockKind};
use ordo_cluster::client::Client;
use ordo_cluster::loopback::{Loopback, LoopbackOptions};
use ordo_cluster::node::NodeClock;

use crate::driver::RunStats;
use crate::error::BenchError;
use crate::harness::Loaded;

/// The engine a cluster workload runs on: the client's.
pub type ClusterDb = Ordo<Arc<NodeClock>>;

/// How long the backups may take to apply every commit before the replication check.
const QUIESCE_TIMEOUT: Duration = Duration::from_secs(10);

/// The most nodes a benchmark cluster may have.
pub const NODES_MAX: usize = 16;

/// A cluster already running (e.g. `ordo cluster up`), reached through its members.
#[derive(Clone, Debug)]
pub struct Running {
    /// The cluster's name.
    pub name: String,
    /// Member addresses (`host:port`) to ask for the configuration.
    pub addrs: Vec<String>,
    /// The cluster's secret file.
    pub secret_file: std::path::PathBuf,
}

/// How the cluster is started.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Nodes (2 to [`NODES_MAX`]).
    pub nodes: usize,
    /// Bytes per region, a multiple of 1 MiB (each node is primary of one region).
    pub region_bytes: usize,
    /// The engine configuration of the nodes and the client (versions, isolation defaults).
    pub engine: ordo::Config,
    /// Durable members (each logs what it backs up, in a temporary directory removed after).
    pub durability: Option<ordo::durable::Mode>,
    /// Use this running cluster instead of starting one (`nodes`, `region_bytes` and
    /// `durability` are then the running cluster's own).
    pub running: Option<Running>,
}

impl ClusterOptions {
    /// `nodes` nodes with regions big enough for `data_bytes` spread evenly over them (twice a
    /// node's share, for slab rounding and indexes, at least 64 MiB).
    pub fn for_data(nodes: usize, data_bytes: u64, engine: ordo::Config) -> Self {
        const MIB: u64 = 1 << 20;
        let share = data_bytes.saturating_mul(2) / nodes.max(1) as u64;
        let region = share.div_ceil(MIB).saturating_mul(MIB).max(64 * MIB);
        ClusterOptions {
            nodes,
            region_bytes: usize::try_from(region).unwrap_or(usize::MAX),
            engine,
            durability: None,
            running: None,
        }
    }
}

/// A loopback cluster (or a running one) and one client connected to it.
pub struct Cluster {
    /// Dropped first: it is connected to the nodes.
    client: Client,
    /// `None` for a running cluster (its nodes are other processes).
    nodes: Option<Loopback>,
    members: usize,
    /// Dropped last: removes the durable members' directory.
    _data: Option<DataDir>,
}

/// A directory removed when dropped.
struct DataDir(std::path::PathBuf);

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Cluster {
    /// Starts the nodes and connects the client.
    ///
    /// # Errors
    /// [`BenchError::OutOfRange`] for a node count out of range or regions over 16 GiB;
    /// [`BenchError::Cluster`] when a node does not start or the client does not connect.
    pub fn start(options: &ClusterOptions) -> Result<Self, BenchError> {
        if !(2..=NODES_MAX).contains(&options.nodes) {
            return Err(BenchError::OutOfRange {
                name: "cluster nodes",
                value: options.nodes.to_string(),
                expected: "2..=16",
            });
        }
        if options.region_bytes > 16 << 30 {
            return Err(BenchError::OutOfRange {
                name: "cluster region bytes",
                value: options.region_bytes.to_string(),
                expected: "at most 16 GiB per node: run a smaller scale",
            });
        }
        if let Some(r) = &options.running {
            let mut cfg = ordo_cluster::client::ClientConfig::new(
                &r.name,
                r.addrs.clone(),
                r.secret_file.clone(),
            );
            cfg.engine = options.engine.clone();
            let client = Client::connect(cfg).map_err(|e| BenchError::Cluster(e.to_string()))?;
            let members = r.addrs.len();
            return Ok(Cluster { client, nodes: None, members, _data: None });
        }
        let mut loopback = LoopbackOptions::new(options.nodes);
        loopback.engine = options.engine.clone();
        loopback.engine.heap.region_bytes = options.region_bytes;
        let data = options.durability.map(|mode| {
            let dir = std::env::temp_dir().join(format!(
                "ordo-bench-cluster-{}-{:x}",
                std::process::id(),
                rand::random::<u64>()
            ));
            loopback.durability = Some((dir.clone(), mode));
            DataDir(dir)
        });
        let nodes = Loopback::start(loopback).map_err(|e| BenchError::Cluster(e.to_string()))?;
        let client =
            nodes.client(options.engine.clone()).map_err(|e| BenchError::Cluster(e.to_string()))?;
        let members = nodes.nodes().len();
        Ok(Cluster { client, nodes: Some(nodes), members, _data: data })
    }

    /// A handle of the client's engine (transactions through it run on the cluster).
    pub fn db(&self) -> ClusterDb {
        self.client.db().clone()
    }

    /// Network calls the client issued so far.
    pub fn round_trips(&self) -> u64 {
        self.client.owners().round_trips.load(Ordering::Relaxed)
    }

    /// Nodes in the cluster.
    pub fn nodes(&self) -> usize {
        self.members
    }

    /// The client's clock for reports: a synchronised clock whose boundary is its uncertainty
    /// width now.
    pub fn clock(&self) -> ClockDescription {
        let now = self.client.db().clock().now();
        ClockDescription {
            kind: ClockKind::Synced,
            counter: None,
            invariance: None,
            frequency_hz: None,
            frequency_source: None,
            boundary_nanos: now.hi().as_nanos().saturating_sub(now.lo().as_nanos()),
            boundary_ticks: None,
        }
    }

    /// Sends every pending truncation, waits until the backups applied every commit, and checks
    /// that each backup holds its primary's committed objects. Returns the regions checked (0
    /// for a running cluster, whose nodes' memory this process cannot see).
    ///
    /// # Errors
    /// [`BenchError::Inconsistent`] when the backups do not drain or a copy differs.
    pub fn check_replication(&self) -> Result<usize, BenchError> {
        self.client.owners().flush();
        let Some(nodes) = &self.nodes else { return Ok(0) };
        if !nodes.quiesce(QUIESCE_TIMEOUT) {
            return Err(BenchError::Inconsistent(format!(
                "replication: backups still held unapplied commits after {} ms",
                QUIESCE_TIMEOUT.as_millis()
            )));
        }
        nodes.check_replication().map_err(|e| BenchError::Inconsistent(format!("replication: {e}")))
    }
}

/// A workload loaded on a [`Cluster`] (module docs: the figures it adds and the checks).
pub struct OnCluster<L> {
    /// Dropped first: it holds a handle of the client's engine.
    loaded: L,
    db: ClusterDb,
    cluster: Cluster,
}

impl<L: Loaded> OnCluster<L> {
    /// Wraps `loaded`, which was loaded on `cluster.db()`.
    pub fn new(loaded: L, cluster: Cluster) -> Self {
        OnCluster { loaded, db: cluster.db(), cluster }
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }
}

impl<L: Loaded> Loaded for OnCluster<L> {
    fn run(&self, threads: usize, duration: Duration) -> Result<RunStats, BenchError> {
        let (calls_before, stats_before) = (self.cluster.round_trips(), self.db.stats());
        let mut stats = self.loaded.run(threads, duration)?;
        let calls = self.cluster.round_trips().saturating_sub(calls_before);
        let wait_ns = self.db.stats().write_wait_ns.saturating_sub(stats_before.write_wait_ns);
        let thread_ns = stats.elapsed_s * 1e9 * threads as f64;
        stats
            .metrics
            .push(("round_trips_per_commit".into(), calls as f64 / stats.committed.max(1) as f64));
        stats
            .metrics
            .push(("uncertainty_wait_pct".into(), 100.0 * wait_ns as f64 / thread_ns.max(1.0)));
        Ok(stats)
    }

    fn check(&self) -> Result<(), BenchError> {
        self.loaded.check()?;
        self.cluster.check_replication().map(drop)
    }
}

/// The cluster figures of a run (`round_trips_per_commit`, `uncertainty_wait_pct`), if it ran on
/// a cluster.
pub fn figures(stats: &RunStats) -> Option<(f64, f64)> {
    let get = |name: &str| stats.metrics.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
    Some((get("round_trips_per_commit")?, get("uncertainty_wait_pct")?))
}
