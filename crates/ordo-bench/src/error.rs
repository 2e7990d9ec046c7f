//! Benchmark errors: bad parameters are reported before anything runs.

/// Why a benchmark could not run.
#[derive(thiserror::Error, Debug)]
pub enum BenchError {
    /// `--threads 0`.
    #[error("threads must be at least 1")]
    ZeroThreads,
    /// A parameter outside its range.
    #[error("{name} = {value} is out of range: {expected}")]
    OutOfRange {
        /// The parameter.
        name: &'static str,
        /// What was given.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// A Zipf skew outside `[0, 1)`.
    #[error(transparent)]
    Theta(#[from] crate::zipf::ThetaOutOfRange),
    /// A cluster benchmark could not start or run its nodes.
    #[error("cluster: {0}")]
    Cluster(String),
    /// `etcd-compare` failed: a system could not start, a request failed, or its counters do
    /// not add up to the commits counted.
    #[error(transparent)]
    Compare(#[from] crate::etcd_compare::CompareError),
    /// The engine failed.
    #[error("engine error: {0}")]
    Engine(#[from] ordo::Error),
    /// A benchmark file (durable database directory, baseline file) could not be used.
    #[error("benchmark file {path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The base directory of durable benchmark databases (`--durability-dir`) is missing, not a
    /// directory, or a database directory cannot be made in it.
    #[error("durability directory {path}: cannot make a database directory in it: {source}", path = dir.display())]
    DurabilityDir {
        /// The base directory.
        dir: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Durability was asked of a workload that does not run on the engine.
    #[error(
        "--durability {mode}: {workload} does not run on the Ordo engine and cannot be durable; use --durability none"
    )]
    NotOnEngine {
        /// The workload (e.g. `the RLU hash table`).
        workload: &'static str,
        /// The durability asked for.
        mode: &'static str,
    },
    /// The RLU runtime failed.
    #[error("RLU runtime error: {0}")]
    Rlu(#[from] ordo_apps::rlu::RluError),
    /// An oplog refused an operation.
    #[error("oplog error: {0}")]
    Oplog(#[from] ordo_apps::oplog::OplogError),
    /// A result check after the run failed: the workload's model and the database disagree.
    #[error("consistency check failed: {0}")]
    Inconsistent(String),
    /// A `--param NAME=VALUE` override the kernel does not know or cannot parse.
    #[error("{app}: bad parameter {name:?}: {detail}")]
    BadParameter {
        /// The kernel.
        app: &'static str,
        /// The parameter as given.
        name: String,
        /// What is wrong, and what is accepted.
        detail: String,
    },
}
