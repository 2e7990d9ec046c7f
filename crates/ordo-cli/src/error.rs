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
    /// A durable database directory is bad or unreadable.
    #[error(transparent)]
    Durable(#[from] ordo::durable::DurableError),
    /// A flag combination that cannot work.
    #[error("{0}")]
    Usage(String),
}
