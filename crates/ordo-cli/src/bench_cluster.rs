//! `--cluster N` of `ordo bench ycsb` and `ordo bench tpcc`: the workload on an in-process
//! loopback cluster of N nodes (or a running one: `--cluster-dir DIR`, `--cluster-addr
//! ADDR,...`) through one cluster client (`ordo_bench::cluster`), with the
//! harness's summary and checks plus two lines per cell: network round trips per commit and the
//! share of thread time spent waiting out write-timestamp uncertainty.
//!
//! The cluster's nodes keep their regions in memory, and the clock is the cluster's
//! synchronised one, so `--durability` other than `none` and `--clock` are refused with it.
//! Loading goes through the client, one network call per object allocated: run small scales.

use std::time::Instant;

use clap::Args;
use ordo_bench::cluster::{self, Cluster, ClusterDb, ClusterOptions, OnCluster};
use ordo_bench::engine::Durability;
use ordo_bench::error::BenchError;
use ordo_bench::harness::{self, Instance, Loaded, Plan, Record};

use crate::bench::{CommonBenchArgs, MeasureArgs, measure_instances};
use crate::error::CliError;

/// Threads that load a workload through the cluster client (loading waits on the network, so
/// more threads than cores help).
pub(crate) const LOAD_THREADS: usize = 8;

/// `--cluster`, `--cluster-dir` and `--cluster-addr`.
#[derive(Args, Debug, Clone)]
pub(crate) struct ClusterArgs {
    /// Run on an in-process loopback cluster of N nodes (2..=16; one region each, backed up on
    /// the next node) through a cluster client instead of the embedded engine. Loading goes over
    /// the network: use a small scale. With `--durability sync|process` the members are durable
    /// (each logs what it backs up, in a temporary directory).
    #[arg(long, value_name = "N", conflicts_with = "cluster_dir")]
    pub(crate) cluster: Option<usize>,
    /// Run on the running cluster of `ordo cluster up --dir DIR` (its `cluster.json`: name,
    /// member addresses, secret) through a cluster client.
    #[arg(long, value_name = "DIR", conflicts_with = "cluster_addr")]
    pub(crate) cluster_dir: Option<std::path::PathBuf>,
    /// Run on a running cluster reached at these member addresses (`host:port,...`; any one
    /// that answers gives the configuration), with `--cluster-name` and `--secret-file`.
    #[arg(long, value_name = "ADDR,...", value_delimiter = ',', conflicts_with = "cluster")]
    pub(crate) cluster_addr: Option<Vec<String>>,
    /// The running cluster's name (with `--cluster-addr`).
    #[arg(long, value_name = "NAME", default_value = "dev", requires = "cluster_addr")]
    pub(crate) cluster_name: String,
    /// The running cluster's secret file (with `--cluster-addr`).
    #[arg(long, value_name = "FILE", requires = "cluster_addr")]
    pub(crate) secret_file: Option<std::path::PathBuf>,
}

/// Where a cluster run goes.
pub(crate) enum ClusterTarget {
    /// A loopback cluster of this many nodes, durable in this mode.
    Loopback(usize, Option<ordo::durable::Mode>),
    /// A running cluster.
    Running(cluster::Running),
}

impl ClusterTarget {
    /// The options of a run on this target, for `data_bytes` of data.
    pub(crate) fn options(&self, data_bytes: u64, engine: ordo::Config) -> ClusterOptions {
        match self {
            ClusterTarget::Loopback(nodes, durability) => ClusterOptions {
                durability: *durability,
                ..ClusterOptions::for_data(*nodes, data_bytes, engine)
            },
            ClusterTarget::Running(r) => ClusterOptions {
                running: Some(r.clone()),
                ..ClusterOptions::for_data(r.addrs.len(), data_bytes, engine)
            },
        }
    }

    /// Nodes, as the plan's variant names them.
    pub(crate) fn nodes(&self) -> usize {
        match self {
            ClusterTarget::Loopback(nodes, _) => *nodes,
            ClusterTarget::Running(r) => r.addrs.len(),
        }
    }
}

impl ClusterArgs {
    /// The cluster target, checked, and the flags it cannot go with refused.
    pub(crate) fn target(
        &self,
        common: &CommonBenchArgs,
        durability: &Durability,
    ) -> Result<Option<ClusterTarget>, CliError> {
        let running = self.cluster_dir.is_some() || self.cluster_addr.is_some();
        if (self.cluster.is_some() || running) && common.clock_given() {
            return Err(CliError::Usage(
                "a cluster run uses the cluster's synchronised clock; --clock does not apply"
                    .into(),
            ));
        }
        if running && durability.mode.is_some() {
            return Err(CliError::Usage(
                "a running cluster's node files decide durability; use --durability none".into(),
            ));
        }
        if let Some(addrs) = &self.cluster_addr {
            let addrs: Vec<String> =
                addrs.iter().map(|a| a.trim().to_string()).filter(|a| !a.is_empty()).collect();
            if addrs.is_empty() {
                return Err(CliError::Usage("--cluster-addr: no address given".into()));
            }
            let Some(secret_file) = self.secret_file.clone() else {
                return Err(CliError::Usage(
                    "--cluster-addr needs --secret-file (the cluster's secret)".into(),
                ));
            };
            return Ok(Some(ClusterTarget::Running(cluster::Running {
                name: self.cluster_name.clone(),
                addrs,
                secret_file,
            })));
        }
        if let Some(dir) = &self.cluster_dir {
            let state = ordo_cluster::local::load_state(dir)
                .map_err(|e| CliError::Usage(format!("--cluster-dir {}: {e}", dir.display())))?;
            return Ok(Some(ClusterTarget::Running(cluster::Running {
                name: state.cluster,
                addrs: state.nodes.iter().map(|n| n.addr.clone()).collect(),
                secret_file: state.secret_file,
            })));
        }
        let Some(nodes) = self.cluster else { return Ok(None) };
        if !(2..=cluster::NODES_MAX).contains(&nodes) {
            return Err(CliError::Usage(format!(
                "--cluster {nodes}: a cluster has 2 to {} nodes",
                cluster::NODES_MAX
            )));
        }
        Ok(Some(ClusterTarget::Loopback(nodes, durability.mode)))
    }
}

/// `plan` marked as a cluster run: `cluster_nodes` in its configuration and `clusterN` appended
/// to its variant (so cluster and embedded runs are separate lines of a summary or plot).
pub(crate) fn cluster_plan(mut plan: Plan, nodes: usize) -> Plan {
    if let Some(config) = plan.config.as_object_mut() {
        config.insert("cluster_nodes".into(), serde_json::Value::from(nodes));
    }
    plan.variant = format!("{} cluster{nodes}", plan.variant);
    plan
}

/// Starts the cluster of `options`, loads the workload with `load` on the client's engine,
/// measures `plan` on it and prints the summary (unless `--json`) and the cluster lines.
pub(crate) fn measure_on_cluster<L: Loaded + 'static>(
    common: &CommonBenchArgs,
    measure: &MeasureArgs,
    plan: &Plan,
    options: &ClusterOptions,
    load: impl FnOnce(ClusterDb) -> Result<L, BenchError>,
) -> Result<Vec<Record>, CliError> {
    plan.validate()?;
    match &options.running {
        Some(r) => eprintln!("connecting to cluster {:?} at {} ...", r.name, r.addrs.join(",")),
        None => eprintln!(
            "starting a {}-node loopback cluster ({} MiB regions{}) and a client ...",
            options.nodes,
            options.region_bytes >> 20,
            match options.durability {
                Some(m) => format!(", durable members: {}", m.name()),
                None => String::new(),
            }
        ),
    }
    let cluster = Cluster::start(options)?;
    eprintln!("loading {} {} through the client ...", plan.workload, plan.variant);
    let started = Instant::now();
    let calls_before = cluster.round_trips();
    let loaded = load(cluster.db())?;
    eprintln!(
        "loaded in {:.1} s ({} network calls)",
        started.elapsed().as_secs_f64(),
        cluster.round_trips().saturating_sub(calls_before)
    );
    let regions = cluster.check_replication()?;
    if options.running.is_none() {
        eprintln!("check: the backups of {regions} regions hold their primaries' objects");
    } else {
        eprintln!("check: replication not checked (the nodes are other processes)");
    }
    let clock = cluster.clock();
    let nodes = cluster.nodes();
    let instances = [Instance { clock, loaded: Box::new(OnCluster::new(loaded, cluster)) }];
    let records = measure_instances(common.json, measure.out.as_deref(), plan, &instances)?;
    drop(instances);
    if !common.json {
        print!("{}", harness::summary(&records));
        print!("{}", cluster_lines(&records, nodes));
    }
    Ok(records)
}

/// Per cell, the median round trips per commit and uncertainty-wait share over its runs.
fn cluster_lines(records: &[Record], nodes: usize) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for cell in harness::cells(records) {
        let figures: Vec<(f64, f64)> =
            cell.runs.iter().filter_map(|r| cluster::figures(r)).collect();
        if figures.is_empty() {
            continue;
        }
        let median = |f: fn(&(f64, f64)) -> f64| {
            ordo_bench::driver::Spread::of(&figures.iter().map(f).collect::<Vec<_>>()).median
        };
        let _ = writeln!(
            out,
            "cluster ({nodes} nodes, 1 client) {} {} at {} threads: {:.2} network round trips per \
             commit, uncertainty wait {:.2}% of thread time",
            cell.name.0,
            cell.name.1,
            cell.threads,
            median(|f| f.0),
            median(|f| f.1)
        );
    }
    out
}
