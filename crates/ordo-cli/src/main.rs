//! The `ordo` command: calibrate the ORDO clock, run benchmarks, run cluster nodes.
//!
//! `main` only parses the command line and maps errors to exit codes; each subcommand lives in
//! its own module. Bad input and failures print one `error:` line on stderr and exit with 1;
//! problems that do not stop the command (an unusable calibration cache) print a `warning:` line
//! and continue. Usage errors are clap's (exit 2).
#![forbid(unsafe_code)]

/// mimalloc rather than the system allocator: transactions allocate and free small buffers
/// (read and write sets, decoded values) at a high rate, on many threads.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bench;
mod bench_cluster;
mod bench_cluster_clock;
mod bench_durable;
mod bench_etcd_compare;
mod bench_failover;
mod bench_hashtable;
mod bench_oplog;
mod bench_recovery;
mod bench_scan;
mod bench_stamp;
mod bench_suite;
mod bench_synthetic;
mod bench_tpcc;
mod bench_ycsb;
mod calibrate;
mod clock_setup;
mod cluster_cmd;
mod durable_cmd;
mod error;
mod plot;
mod plot_results;
mod sim_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Ordo: transactions ordered by hardware time.
#[derive(Parser, Debug)]
#[command(name = "ordo", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Measure ORDO_BOUNDARY: the largest counter offset between any two cores (ORDO Fig. 4).
    Calibrate(calibrate::CalibrateArgs),
    /// Run a benchmark workload.
    Bench(Box<bench::BenchArgs>),
    /// Draw figures from benchmark results (JSON lines of `ordo bench --json` or `--out`).
    Plot(plot_results::PlotArgs),
    /// Recover a durable database directory: replay its log into the heap files, as opening it
    /// does (`--dry-run`: only report what that would do).
    Recover(durable_cmd::RecoverArgs),
    /// Print a durable database directory: regions, timestamps, segments, records (read-only).
    Inspect(durable_cmd::DirArgs),
    /// Run one cluster node (FaRMv2 over TCP) from its configuration file.
    Node(cluster_cmd::NodeArgs),
    /// A local development cluster: up, status, down.
    Cluster(cluster_cmd::ClusterArgs),
    /// Run the cluster's deterministic simulations over many seeds, checking every history.
    Sim(sim_cmd::SimArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Calibrate(args) => calibrate::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Plot(args) => plot_results::run(&args),
        Command::Recover(args) => durable_cmd::recover(&args),
        Command::Inspect(args) => durable_cmd::inspect(&args),
        Command::Node(args) => cluster_cmd::node(&args),
        Command::Cluster(args) => cluster_cmd::cluster(&args),
        Command::Sim(args) => sim_cmd::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
