//! `ordo node` and `ordo cluster up | status | down`: running nodes and a local cluster.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use ordo_clock::{AnyClock, CalibrateOptions, ClockChoice, SystemClock};
use ordo_cluster::config::{LocalClockChoice, NodeConfig};
use ordo_cluster::local::{self, UpOptions};
use ordo_cluster::node::{ConfigSource, LocalClock, Node};

use crate::clock_setup::CacheArgs;
use crate::error::CliError;

/// `ordo node` flags.
#[derive(Args, Debug)]
pub(crate) struct NodeArgs {
    /// The node's configuration file (TOML; see `ordo_cluster::config::NodeConfig`).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    #[command(flatten)]
    cache: CacheArgs,
}

/// `ordo cluster` subcommands.
#[derive(Args, Debug)]
pub(crate) struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Subcommand, Debug)]
enum ClusterCommand {
    /// Start a local development cluster: an etcd member (unless --etcd) and N nodes on
    /// loopback ports; prints the endpoints and a status table.
    Up(UpArgs),
    /// One line per node of a local cluster: role, configuration, clock, leases, etcd.
    Status(DirArgs),
    /// Stop the nodes and the etcd member of a local cluster.
    Down(DirArgs),
}

#[derive(Args, Debug)]
struct UpArgs {
    /// How many nodes.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=64))]
    nodes: u64,
    /// The cluster directory (node files, logs, secret, etcd data, cluster.json).
    #[arg(long, value_name = "DIR", default_value = "ordo-cluster")]
    dir: PathBuf,
    /// Use this etcd (comma-separated endpoints) instead of starting one.
    #[arg(long, value_name = "ENDPOINTS", value_delimiter = ',')]
    etcd: Option<Vec<String>>,
    /// The cluster's name.
    #[arg(long, default_value = "dev")]
    name: String,
    /// Backups per region.
    #[arg(long, default_value_t = 1)]
    backups: usize,
    /// Lease period in milliseconds (FaRM: 10 ms on dedicated cores).
    #[arg(long, default_value_t = 50)]
    lease_ms: u32,
    /// Clock synchronisations per second, summed over the non-CM nodes.
    #[arg(long, default_value_t = 2000)]
    sync_rate: u32,
    /// Serve Prometheus metrics from each node on a free port.
    #[arg(long)]
    metrics: bool,
    /// Fail over on a lease expiry: remove a dead member, move the CM (clock fast-forward).
    /// Experimental: transactions in flight at a failure are not recovered yet.
    #[arg(long)]
    failover: bool,
}

#[derive(Args, Debug)]
struct DirArgs {
    /// The cluster directory given to `ordo cluster up`.
    #[arg(long, value_name = "DIR", default_value = "ordo-cluster")]
    dir: PathBuf,
    /// Print JSON instead of a table (status only).
    #[arg(long)]
    json: bool,
}

/// Sends `tracing` output to stderr (level from `ORDO_LOG`, default `info`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ORDO_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

/// `ordo node --config FILE`: runs one node until SIGTERM or SIGINT.
pub(crate) fn node(args: &NodeArgs) -> Result<(), CliError> {
    init_logging();
    let file = NodeConfig::load(&args.config).map_err(ordo_cluster::node::NodeError::from)?;
    let local: LocalClock = match file.clock {
        LocalClockChoice::System => Arc::new(SystemClock::new()),
        LocalClockChoice::Ordo => {
            let cache = args.cache.cache();
            let opened =
                AnyClock::open(ClockChoice::Ordo, &CalibrateOptions::default(), cache.as_ref())?;
            if let Some(reason) = &opened.fallback_reason {
                eprintln!("warning: using the system clock: {reason}");
            }
            Arc::new(opened.clock)
        }
    };
    let node = Node::start(file, ConfigSource::Etcd, local)?;
    eprintln!("node {} serving on {}", node.id(), node.local_addr());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Usage(format!("starting a runtime: {e}")))?;
    runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) =
            (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
        else {
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    });
    eprintln!("node {} stopping", node.id());
    node.shutdown();
    Ok(())
}

/// `ordo cluster …`.
pub(crate) fn cluster(args: &ClusterArgs) -> Result<(), CliError> {
    match &args.command {
        ClusterCommand::Up(up) => cluster_up(up),
        ClusterCommand::Status(dir) => cluster_status(dir),
        ClusterCommand::Down(dir) => {
            let report = local::down(&dir.dir)?;
            println!(
                "stopped {} processes, killed {}, {} already gone; {} is free",
                report.stopped.len(),
                report.killed.len(),
                report.gone.len(),
                dir.dir.display()
            );
            Ok(())
        }
    }
}

fn cluster_up(args: &UpArgs) -> Result<(), CliError> {
    let binary = std::env::current_exe()
        .map_err(|e| CliError::Usage(format!("cannot find the ordo binary: {e}")))?;
    let options = UpOptions {
        nodes: usize::try_from(args.nodes).unwrap_or(usize::MAX),
        dir: args.dir.clone(),
        etcd: args.etcd.clone(),
        cluster: args.name.clone(),
        backups: args.backups,
        lease_ms: args.lease_ms,
        sync_rate_per_s: args.sync_rate,
        metrics: args.metrics,
        failover: args.failover,
        binary,
        ready_timeout: Duration::from_secs(30),
    };
    let state = local::up(&options)?;
    println!("cluster {:?} is up in {}", state.cluster, args.dir.display());
    println!("etcd: {}", state.etcd.join(","));
    for n in &state.nodes {
        let metrics = n
            .metrics_addr
            .as_deref()
            .map(|m| format!("  metrics http://{m}/metrics"))
            .unwrap_or_default();
        println!(
            "node {}: {}{metrics}  (pid {}, log {})",
            n.id,
            n.addr,
            n.pid.unwrap_or(0),
            n.log.display()
        );
    }
    println!();
    let (_, rows) = local::status(&args.dir)?;
    print!("{}", local::status_table(&rows));
    println!("\nstop it with: ordo cluster down --dir {}", args.dir.display());
    Ok(())
}

fn cluster_status(args: &DirArgs) -> Result<(), CliError> {
    let (state, rows) = local::status(&args.dir)?;
    if args.json {
        for r in &rows {
            let value = match &r.reply {
                Ok(s) => serde_json::json!({
                    "node": r.id, "addr": r.addr, "role": s.role, "config_seq": s.config_seq,
                    "clock_enabled": s.clock_enabled,
                    "metrics": s.metrics.iter().map(|(k, v)| (k.clone(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
                }),
                Err(e) => serde_json::json!({ "node": r.id, "addr": r.addr, "error": e }),
            };
            println!("{value}");
        }
    } else {
        println!("cluster {:?}, etcd {}", state.cluster, state.etcd.join(","));
        print!("{}", local::status_table(&rows));
    }
    if rows.iter().any(|r| r.reply.is_err()) {
        return Err(CliError::Usage("some nodes did not answer".into()));
    }
    Ok(())
}
