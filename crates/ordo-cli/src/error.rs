//! The errors of the `ordo` command: each becomes one `error:` line and exit code 1.

use std::path::PathBuf;

/// Why a subcommand failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Calibration failed (bad runs or cores, pinning, handshake).
    #[error(transparent)]
    Calibrate(#[from] ordo_clock::CalibrateError),
    /// The clock benchmark failed.
    #[error(transparent)]
    ClockBench(#[from] ordo_bench::clock::ClockBenchError),
    /// Core discovery failed.
    #[error(transparent)]
    Cores(#[from] ordo_clock::cores::CoreError),
    /// The plot file has an extension we cannot write.
    #[error("cannot plot to {}: unknown extension (use .svg or .png)", path.display())]
    PlotFormat {
        /// The path given.
        path: PathBuf,
    },
    /// The plot file cannot be created.
    #[error("cannot write plot file {}: {source}", path.display())]
    PlotFile {
        /// The path given.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Drawing the plot failed.
    #[error("cannot draw plot {}: {detail}", path.display())]
    PlotDraw {
        /// The path given.
        path: PathBuf,
        /// The drawing backend's message.
        detail: String,
    },
    /// JSON output could not be produced.
    #[error("cannot encode JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A workload could not run (bad parameters, engine failure, failed result check).
    #[error(transparent)]
    Bench(#[from] ordo_bench::error::BenchError),
    /// A results file (`--out`, `ordo plot` input) cannot be used.
    #[error("cannot {action} results file {}: {source}", path.display())]
    ResultsFile {
        /// The file.
        path: PathBuf,
        /// What was being done: "open", "read", "append to".
        action: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A results file holds a line that is not a benchmark record.
    #[error("{}:{line}: not a benchmark record: {detail}", path.display())]
    ResultsFormat {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it.
        detail: String,
    },
    /// A durable database directory given on the command line does not exist.
    #[error("{} does not exist or is not a directory", path.display())]
    NoDirectory {
        /// The path given.
        path: PathBuf,
    },
    /// A durable database directory is bad or unreadable.
    #[error(transparent)]
    Durable(#[from] ordo::durable::DurableError),
    /// A cluster node failed to start or run.
    #[error(transparent)]
    Node(#[from] ordo_cluster::node::NodeError),
    /// A local cluster could not be managed.
    #[error(transparent)]
    LocalCluster(#[from] ordo_cluster::local::LocalError),
    /// `ordo bench failover` could not run (its failed checks are reported, not errors).
    #[error("bench failover: {0}")]
    Failover(#[from] ordo_bench::failover::FailoverError),
    /// A flag combination that cannot work.
    #[error("{0}")]
    Usage(String),
    /// `ordo sim`: seeds failed their checks (each printed above).
    #[error("{failed} of {seeds} seeds failed their checks")]
    SimFailed {
        /// Seeds that failed.
        failed: u64,
        /// Seeds run.
        seeds: u64,
    },
}
