//! `--cluster N` of `ordo bench ycsb` and `ordo bench tpcc`: the workload on an in-process
//! loopback cluster of N nodes through one cluster client (`ordo_bench::cluster`), with the
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

/// `--cluster`.
#[derive(Args, Debug, Clone)]
pub(crate) struct ClusterArgs {
    /// Run on an in-process loopback cluster of N nodes (2..=16; one region each, backed up on
    /// the next node) through a cluster client instead of the embedded engine. Loading goes over
    /// the network: use a small scale.
    #[arg(long, value_name = "N")]
    pub(crate) cluster: Option<usize>,
}

impl ClusterArgs {
    /// The node count, checked, and the flags it cannot go with refused.
    pub(crate) fn nodes(
        &self,
        common: &CommonBenchArgs,
        durability: &Durability,
    ) -> Result<Option<usize>, CliError> {
        let Some(nodes) = self.cluster else { return Ok(None) };
        if !(2..=cluster::NODES_MAX).contains(&nodes) {
            return Err(CliError::Usage(format!(
                "--cluster {nodes}: a cluster has 2 to {} nodes",
                cluster::NODES_MAX
            )));
        }
        if durability.mode.is_some() {
            return Err(CliError::Usage(
                "--cluster runs in memory: its nodes are not durable; use --durability none".into(),
            ));
        }
        if common.clock_given() {
            return Err(CliError::Usage(
                "--cluster runs on the cluster's synchronised clock; --clock does not apply".into(),
            ));
        }
        Ok(Some(nodes))
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
    eprintln!(
        "starting a {}-node loopback cluster ({} MiB regions) and a client ...",
        options.nodes,
        options.region_bytes >> 20
    );
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
    eprintln!("check: the backups of {regions} regions hold their primaries' objects");
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
