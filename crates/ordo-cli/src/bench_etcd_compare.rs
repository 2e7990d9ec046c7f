//! `ordo bench etcd-compare`: the same optimistic transaction (read 2 keys, write 1) against an
//! Ordo cluster and a 3-member etcd cluster on this machine, side by side (the Cluster II
//! benchmark; the workload, driver and check are `ordo_bench::etcd_compare`).
//!
//! The systems are [`SYSTEMS`], run in that order: for each client count, every repetition runs
//! every system once (A B A B …), each repetition with one seed shared by the systems, so both
//! see the same key streams and drift on the machine hits both alike. The table gives per client
//! count and system the median txn/s with its min–max over repetitions, the median p50 and p99
//! and conflicts/s, and a `ratio` line where both systems ran. After the runs every system's
//! counters must sum to the commits counted, or the command fails.
//!
//! The Ordo side is a loopback cluster of `--ordo-nodes` nodes in this process, driven through
//! `--ordo-connections` cluster clients (`ordo_bench::etcd_compare::ordo_target`); the etcd side
//! is `--etcd-members` etcd processes. A system is added by one arm in [`start`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use ordo_bench::error::BenchError;
use ordo_bench::etcd_compare::etcd_target::{self, EtcdTarget};
use ordo_bench::etcd_compare::ordo_target::{Coordinators, OrdoOptions, OrdoTarget};
use ordo_bench::etcd_compare::{self, CompareError, Report, RunConfig, TxnTarget};
use ordo_cluster::etcd_server::EtcdCluster;

use crate::bench::progress_bar;
use crate::error::CliError;

/// A system the benchmark can compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum System {
    /// A 3-node loopback Ordo cluster.
    Ordo,
    /// A 3-member loopback etcd cluster.
    Etcd,
}

/// `--etcd-endpoints`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum EtcdEndpoints {
    /// The member leading at the start.
    Leader,
    /// Every member.
    All,
}

/// Every system, in run order.
const SYSTEMS: [System; 2] = [System::Ordo, System::Etcd];

/// `ordo bench etcd-compare` flags.
#[derive(Args, Debug)]
pub(crate) struct EtcdCompareArgs {
    /// Concurrent clients per run, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 8, 64])]
    clients: Vec<usize>,
    /// Measured time per run: `500ms`, `2s`, `1m`.
    #[arg(long, default_value = "2s", value_parser = crate::bench::parse_duration)]
    duration: Duration,
    /// Unmeasured time before each run's window.
    #[arg(long, default_value = "300ms", value_parser = crate::bench::parse_duration)]
    warmup: Duration,
    /// Runs per client count and system (interleaved across systems).
    #[arg(long, default_value_t = 3)]
    repetitions: usize,
    /// Keys (counters), loaded before measuring; each transaction picks two uniformly.
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    /// Run only this system.
    #[arg(long, value_enum)]
    only: Option<System>,
    /// The seed of the key streams (a run's seed derives from it, the client count and the
    /// repetition).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Nodes of the Ordo cluster (one region each, backed up on the next node).
    #[arg(long, default_value_t = 3)]
    ordo_nodes: usize,
    /// Ordo cluster clients shared by the benchmark's clients (client i uses client i mod N).
    #[arg(long, default_value_t = 1)]
    ordo_connections: usize,
    /// Where Ordo's transactions are coordinated: in cluster clients (as etcd's clients), or
    /// in the nodes' engines (FaRM's deployment; client i runs on node i mod N), or in the
    /// engine of the primary of the object each transaction writes (work shipped to its data).
    #[arg(long, value_enum, default_value_t = OrdoCoordinators::Client)]
    ordo_coordinators: OrdoCoordinators,
    /// Members of the etcd cluster.
    #[arg(long, default_value_t = 3)]
    etcd_members: usize,
    /// etcd client connections shared by the clients (client i uses connection i mod N).
    #[arg(long, default_value_t = 1)]
    etcd_connections: usize,
    /// Which etcd members the connections reach: the leader, or all (balanced; followers
    /// forward to the leader).
    #[arg(long, value_enum, default_value_t = EtcdEndpoints::Leader)]
    etcd_endpoints: EtcdEndpoints,
    /// Where the etcd members keep their data [default: a fresh directory under the system's
    /// temporary directory, removed at the end].
    #[arg(long, value_name = "DIR")]
    etcd_dir: Option<PathBuf>,
    /// Print JSON lines (one per run) instead of the table.
    #[arg(long)]
    json: bool,
    /// Also append the JSON lines to this file.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Where Ordo's transactions run (`--ordo-coordinators`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum OrdoCoordinators {
    /// Cluster clients outside the nodes: every step is a network call.
    Client,
    /// The nodes' own engines (co-located coordinators).
    Nodes,
    /// The engine of the node that is primary of the object a transaction writes.
    Owner,
}

/// How long one request may take before the run fails.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a system keeps its files.
struct Setup {
    dir: PathBuf,
}

fn compare_err(e: CompareError) -> CliError {
    CliError::Bench(BenchError::Compare(e))
}

/// Starts `system` and returns its target (the one place a system is added).
async fn start(
    system: System,
    args: &EtcdCompareArgs,
    setup: &Setup,
) -> Result<Arc<dyn TxnTarget>, CliError> {
    match system {
        System::Ordo => {
            let options = OrdoOptions {
                nodes: args.ordo_nodes,
                connections: args.ordo_connections,
                coordinators: match args.ordo_coordinators {
                    OrdoCoordinators::Client => Coordinators::Client,
                    OrdoCoordinators::Nodes => Coordinators::Nodes,
                    OrdoCoordinators::Owner => Coordinators::Owner,
                },
                ..OrdoOptions::default()
            };
            let target = tokio::task::spawn_blocking(move || OrdoTarget::start(options))
                .await
                .map_err(|e| compare_err(CompareError::Task(e.to_string())))?
                .map_err(compare_err)?;
            Ok(Arc::new(target))
        }
        System::Etcd => {
            let dir = setup.dir.join("etcd");
            let members = args.etcd_members;
            let cluster = tokio::task::spawn_blocking(move || EtcdCluster::start(&dir, members))
                .await
                .map_err(|e| compare_err(CompareError::Task(e.to_string())))?
                .map_err(|e| compare_err(e.into()))?;
            let endpoints = match args.etcd_endpoints {
                EtcdEndpoints::Leader => etcd_target::Endpoints::Leader,
                EtcdEndpoints::All => etcd_target::Endpoints::All,
            };
            let target = EtcdTarget::with_cluster(
                cluster,
                args.etcd_connections,
                endpoints,
                REQUEST_TIMEOUT,
            )
            .await
            .map_err(compare_err)?;
            Ok(Arc::new(target))
        }
    }
}

/// The seed of one run: every system gets the same one for a (clients, repetition).
fn run_seed(seed: u64, clients: usize, repetition: usize) -> u64 {
    seed ^ (clients as u64).rotate_left(32)
        ^ (repetition as u64).wrapping_mul(0xA076_1D64_78BD_642F)
}

pub(crate) fn run_etcd_compare(args: &EtcdCompareArgs) -> Result<(), CliError> {
    if args.clients.is_empty() || args.clients.contains(&0) {
        return Err(CliError::Usage("--clients: each count must be at least 1".into()));
    }
    if args.keys < 2 {
        return Err(CliError::Usage("--keys must be at least 2".into()));
    }
    let (dir, remove_dir) = match &args.etcd_dir {
        Some(dir) => (dir.clone(), false),
        None => {
            (std::env::temp_dir().join(format!("ordo-etcd-compare-{}", std::process::id())), true)
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Usage(format!("starting a runtime: {e}")))?;
    let result = runtime.block_on(measure(args, &Setup { dir: dir.clone() }));
    // The targets (and the etcd members they own) are dropped inside `measure`.
    drop(runtime);
    if remove_dir {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let reports = result?;
    let lines: Vec<String> = reports
        .iter()
        .map(|r| {
            serde_json::json!({ "workload": "etcd-compare", "keys": args.keys,
                "ordo_nodes": args.ordo_nodes, "ordo_connections": args.ordo_connections,
                "ordo_coordinators": format!("{:?}", args.ordo_coordinators).to_lowercase(),
                "etcd_members": args.etcd_members, "etcd_connections": args.etcd_connections,
                "etcd_endpoints": format!("{:?}", args.etcd_endpoints).to_lowercase(),
                "result": r })
            .to_string()
        })
        .collect();
    crate::bench::emit(&lines, args.out.as_deref(), args.json, || etcd_compare::table(&reports))
}

/// Starts the systems, loads them, runs the interleaved grid and checks every system's counters.
/// Returns every run, in run order.
async fn measure(args: &EtcdCompareArgs, setup: &Setup) -> Result<Vec<Report>, CliError> {
    let mut targets: Vec<Arc<dyn TxnTarget>> = Vec::new();
    for system in SYSTEMS.into_iter().filter(|s| args.only.is_none_or(|only| only == *s)) {
        let target = start(system, args, setup).await?;
        eprintln!("{}", target.describe());
        target.load(args.keys).await.map_err(compare_err)?;
        targets.push(target);
    }
    let repetitions = args.repetitions.max(1);
    let bar = progress_bar(args.clients.len() * repetitions * targets.len());
    let mut reports = Vec::new();
    let mut committed = vec![0u64; targets.len()];
    for &clients in &args.clients {
        for repetition in 0..repetitions {
            for (i, target) in targets.iter().enumerate() {
                bar.set_message(format!("{} × {clients}", target.name()));
                let config = RunConfig {
                    clients,
                    duration: args.duration,
                    warmup: args.warmup,
                    keys: args.keys,
                    seed: run_seed(args.seed, clients, repetition),
                };
                let report = etcd_compare::run(Arc::clone(target), &config).await;
                let report = report.map_err(|e| {
                    bar.abandon();
                    compare_err(e)
                })?;
                committed[i] += report.committed_total;
                reports.push(report);
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    for (target, &committed) in targets.iter().zip(&committed) {
        etcd_compare::check_counters(&**target, args.keys, committed).await.map_err(compare_err)?;
        eprintln!("check: {} counters sum to the {committed} commits counted", target.name());
    }
    Ok(reports)
}
