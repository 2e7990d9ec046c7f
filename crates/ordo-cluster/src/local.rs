//! A local development cluster: `ordo cluster up | status | down`.
//!
//! [`up`] prepares a directory — a fresh cluster secret (`secret`, mode 0600), one node file per
//! node (`node-N.toml`), an etcd member when none is named (`etcd/`) — writes the first
//! configuration into etcd, starts `ordo node --config node-N.toml` for each node on free
//! loopback ports (own process group, output in `node-N.log`), waits until every node answers
//! and has its clock enabled, and records everything in `cluster.json`. [`status`] asks each node
//! for its status over the authenticated transport (as tool id 0); [`down`] stops the nodes and
//! the etcd member it started (SIGTERM, then SIGKILL after a grace period).
//!
//! Nothing here is needed by a production deployment, which writes its own node files and runs
//! `ordo node` under its supervisor.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::auth::Secret;
use crate::config::{ClusterConfig, ConfigError, Member, NodeConfig, NodeId};
use crate::etcd::{ConfigStore, EtcdError};
use crate::etcd_server::{EtcdServer, EtcdServerError, free_port};
use crate::transport::{Limits, Peer, TransportError};
use crate::wire::Body;

/// What went wrong managing a local cluster.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// A file in the cluster directory.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// `cluster.json` is missing or invalid.
    #[error("{path} is not a cluster state file: {message}")]
    State {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The directory already holds a running cluster.
    #[error(
        "{dir} already holds a cluster (cluster.json); run `ordo cluster down --dir {dir}` first"
    )]
    Exists {
        /// The directory.
        dir: PathBuf,
    },
    /// etcd could not be started.
    #[error(transparent)]
    EtcdServer(#[from] EtcdServerError),
    /// etcd refused.
    #[error(transparent)]
    Etcd(#[from] EtcdError),
    /// A configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A node process could not be started.
    #[error("starting node {id} ({binary}): {source}")]
    Spawn {
        /// The node.
        id: NodeId,
        /// The binary.
        binary: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Nodes did not become ready.
    #[error("nodes {waiting:?} not ready after {waited_ms} ms (see node-N.log in {dir})")]
    NotReady {
        /// The nodes still not ready.
        waiting: Vec<NodeId>,
        /// How long we waited.
        waited_ms: u64,
        /// The cluster directory.
        dir: PathBuf,
    },
    /// The async runtime could not start.
    #[error("starting a runtime: {0}")]
    Runtime(std::io::Error),
}

/// One node of a local cluster, as recorded in `cluster.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeEntry {
    /// The node's id.
    pub id: NodeId,
    /// Its transport address.
    pub addr: String,
    /// Its metrics endpoint.
    pub metrics_addr: Option<String>,
    /// Its process id.
    pub pid: Option<u32>,
    /// Its node file.
    pub config: PathBuf,
    /// Its log file.
    pub log: PathBuf,
}

/// `cluster.json`: what `status` and `down` need.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClusterState {
    /// The cluster's name.
    pub cluster: String,
    /// etcd endpoints.
    pub etcd: Vec<String>,
    /// The etcd member started by `up`, if any.
    pub etcd_pid: Option<u32>,
    /// The secret file.
    pub secret_file: PathBuf,
    /// The nodes.
    pub nodes: Vec<NodeEntry>,
}

/// Options of [`up`].
#[derive(Clone, Debug)]
pub struct UpOptions {
    /// How many nodes.
    pub nodes: usize,
    /// The cluster directory.
    pub dir: PathBuf,
    /// etcd endpoints; `None` starts a member in `dir/etcd`.
    pub etcd: Option<Vec<String>>,
    /// The cluster's name.
    pub cluster: String,
    /// Backups per region.
    pub backups: usize,
    /// Lease period.
    pub lease_ms: u32,
    /// Aggregate clock syncs per second.
    pub sync_rate_per_s: u32,
    /// Whether each node serves Prometheus metrics on a free port.
    pub metrics: bool,
    /// Whether the nodes fail over on a lease expiry (the node file's `failover`).
    pub failover: bool,
    /// The `ordo` binary that runs `node`.
    pub binary: PathBuf,
    /// How long to wait for the nodes.
    pub ready_timeout: Duration,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LocalError + '_ {
    move |source| LocalError::Io { path: path.to_path_buf(), source }
}

fn state_path(dir: &Path) -> PathBuf {
    dir.join("cluster.json")
}

/// Reads `dir/cluster.json`.
pub fn load_state(dir: &Path) -> Result<ClusterState, LocalError> {
    let path = state_path(dir);
    let text = std::fs::read(&path).map_err(io(&path))?;
    serde_json::from_slice(&text)
        .map_err(|e| LocalError::State { path: path.clone(), message: e.to_string() })
}

fn runtime() -> Result<tokio::runtime::Runtime, LocalError> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(LocalError::Runtime)
}

/// Starts a local cluster (module docs) and returns its state.
pub fn up(options: &UpOptions) -> Result<ClusterState, LocalError> {
    let dir = options.dir.as_path();
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    if state_path(dir).exists() {
        return Err(LocalError::Exists { dir: dir.to_path_buf() });
    }
    let secret_file = dir.join("secret");
    write_secret(&secret_file)?;

    let mut started_etcd = None;
    let etcd = match &options.etcd {
        Some(endpoints) => endpoints.clone(),
        None => {
            let server = EtcdServer::start(&dir.join("etcd"))?;
            let endpoint = server.endpoint().to_string();
            started_etcd = Some(server);
            vec![endpoint]
        }
    };

    let mut nodes = Vec::new();
    let mut members = Vec::new();
    for i in 0..options.nodes {
        let id = NodeId::try_from(i + 1).unwrap_or(NodeId::MAX);
        let port = free_port().map_err(io(dir))?;
        let addr = format!("127.0.0.1:{port}");
        let mut file =
            NodeConfig::new(id, &options.cluster, &addr, etcd.clone(), PathBuf::from("secret"));
        file.lease_ms = options.lease_ms;
        file.sync_rate_per_s = options.sync_rate_per_s;
        file.failover = options.failover;
        if options.metrics {
            file.metrics_listen = Some(format!("127.0.0.1:{}", free_port().map_err(io(dir))?));
        }
        let config = dir.join(format!("node-{id}.toml"));
        std::fs::write(&config, file.to_toml()).map_err(io(&config))?;
        members.push(Member { id, addr: addr.clone() });
        nodes.push(NodeEntry {
            id,
            addr,
            metrics_addr: file.metrics_listen.clone(),
            pid: None,
            config,
            log: dir.join(format!("node-{id}.log")),
        });
    }
    let config = ClusterConfig::initial(members, options.backups);
    let rt = runtime()?;
    rt.block_on(async {
        let store = ConfigStore::connect(
            &etcd,
            &options.cluster,
            Duration::from_secs(2),
            Duration::from_secs(10),
        )
        .await?;
        // A leftover configuration of a cluster with this name (an earlier `up` against the
        // same etcd) is replaced: this directory's secret and ports are new.
        store.delete_all().await?;
        store.create(&config).await
    })?;

    for node in &mut nodes {
        let log = std::fs::File::create(&node.log).map_err(io(&node.log))?;
        let log_err = log.try_clone().map_err(io(&node.log))?;
        let mut command = Command::new(&options.binary);
        command
            .arg("node")
            .arg("--config")
            .arg(&node.config)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        {
            use std::os::unix::process::CommandExt;
            command.process_group(0);
        }
        let child = command.spawn().map_err(|source| LocalError::Spawn {
            id: node.id,
            binary: options.binary.clone(),
            source,
        })?;
        node.pid = Some(child.id());
    }
    let state = ClusterState {
        cluster: options.cluster.clone(),
        etcd,
        etcd_pid: started_etcd.and_then(EtcdServer::detach),
        secret_file,
        nodes,
    };
    let path = state_path(dir);
    let text = serde_json::to_vec_pretty(&state)
        .map_err(|e| LocalError::State { path: path.clone(), message: e.to_string() })?;
    std::fs::write(&path, text).map_err(io(&path))?;

    let started = Instant::now();
    loop {
        let rows = status_of(&state)?;
        let waiting: Vec<NodeId> = rows
            .iter()
            .filter(|r| !r.reply.as_ref().is_ok_and(|s| s.clock_enabled))
            .map(|r| r.id)
            .collect();
        if waiting.is_empty() {
            return Ok(state);
        }
        if started.elapsed() > options.ready_timeout {
            return Err(LocalError::NotReady {
                waiting,
                waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                dir: dir.to_path_buf(),
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn write_secret(path: &Path) -> Result<(), LocalError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let bytes: [u8; 32] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io(path))?;
    f.write_all(hex.as_bytes()).map_err(io(path))
}

/// A node's answer to a status request.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeStatus {
    /// The configuration sequence number it works under.
    pub config_seq: u64,
    /// "cm" or "member".
    pub role: String,
    /// Whether its clock is enabled.
    pub clock_enabled: bool,
    /// Its metrics.
    pub metrics: Vec<(String, f64)>,
}

impl NodeStatus {
    /// A metric by name (0 when absent).
    pub fn metric(&self, name: &str) -> f64 {
        self.metrics.iter().find(|(n, _)| n == name).map_or(0.0, |(_, v)| *v)
    }
}

/// One row of `ordo cluster status`.
#[derive(Clone, Debug)]
pub struct StatusRow {
    /// The node.
    pub id: NodeId,
    /// Its address.
    pub addr: String,
    /// Its answer, or why there was none.
    pub reply: Result<NodeStatus, String>,
}

/// Asks one node for its status (as tool id 0).
pub async fn query_status(
    addr: SocketAddr,
    cluster: &str,
    secret: Secret,
    timeout: Duration,
) -> Result<NodeStatus, TransportError> {
    let limits = Limits { handshake_timeout: timeout, call_timeout: timeout, ..Limits::default() };
    let peer = Peer::connect(addr, crate::auth::TOOL_NODE_ID, cluster, secret, limits).await?;
    let reply = peer.call_timeout(Body::StatusRequest, timeout).await;
    peer.close();
    match reply? {
        Body::StatusReply { config_seq, role, clock_enabled, metrics, .. } => {
            Ok(NodeStatus { config_seq, role, clock_enabled, metrics })
        }
        other => Err(TransportError::Unexpected {
            addr,
            expected: "StatusReply",
            found: other.name().to_string(),
        }),
    }
}

fn status_of(state: &ClusterState) -> Result<Vec<StatusRow>, LocalError> {
    let secret = Secret::from_file(&state.secret_file).map_err(|e| ConfigError::Secret {
        path: state.secret_file.clone(),
        reason: e.to_string(),
    })?;
    let rt = runtime()?;
    Ok(rt.block_on(async {
        let mut rows = Vec::new();
        for n in &state.nodes {
            let reply = match n.addr.parse::<SocketAddr>() {
                Ok(addr) => {
                    query_status(addr, &state.cluster, secret.clone(), Duration::from_secs(1))
                        .await
                        .map_err(|e| e.to_string())
                }
                Err(_) => Err(format!("{:?} is not ip:port", n.addr)),
            };
            rows.push(StatusRow { id: n.id, addr: n.addr.clone(), reply });
        }
        rows
    }))
}

/// Every node's status (module docs).
pub fn status(dir: &Path) -> Result<(ClusterState, Vec<StatusRow>), LocalError> {
    let state = load_state(dir)?;
    let rows = status_of(&state)?;
    Ok((state, rows))
}

/// The status rows as a table (one line per node).
pub fn status_table(rows: &[StatusRow]) -> String {
    let mut out = format!(
        "{:>4}  {:<21} {:<6} {:>4} {:<7} {:>10} {:>10} {:>10} {:>9} {:>8} {:>5}\n",
        "node",
        "addr",
        "role",
        "seq",
        "clock",
        "U-L us",
        "rtt us",
        "wait us",
        "renewals",
        "expired",
        "etcd"
    );
    for r in rows {
        match &r.reply {
            Ok(s) => out.push_str(&format!(
                "{:>4}  {:<21} {:<6} {:>4} {:<7} {:>10.1} {:>10.1} {:>10.2} {:>9} {:>8} {:>5}\n",
                r.id,
                r.addr,
                s.role,
                s.config_seq,
                if s.clock_enabled { "enabled" } else { "off" },
                s.metric("clock_interval_width_nanos") / 1e3,
                s.metric("sync_rtt_mean_nanos") / 1e3,
                s.metric("clock_get_ts_wait_mean_nanos") / 1e3,
                s.metric("lease_renewals"),
                s.metric("lease_expiries"),
                if s.metric("etcd_connected") > 0.0 { "up" } else { "LOST" },
            )),
            Err(e) => out.push_str(&format!("{:>4}  {:<21} unreachable: {e}\n", r.id, r.addr)),
        }
    }
    out
}

/// What [`down`] did.
#[derive(Clone, Debug, Default)]
pub struct DownReport {
    /// Processes stopped by SIGTERM.
    pub stopped: Vec<u32>,
    /// Processes that needed SIGKILL.
    pub killed: Vec<u32>,
    /// Recorded processes that were not running.
    pub gone: Vec<u32>,
}

fn alive(pid: u32) -> bool {
    // A zombie (exited, not yet reaped by its parent) counts as gone.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn signal(pid: u32, sig: rustix::process::Signal) {
    let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else {
        return;
    };
    let _ = rustix::process::kill_process(pid, sig);
}

/// Stops the nodes and the etcd member of `dir`'s cluster and removes `cluster.json`.
pub fn down(dir: &Path) -> Result<DownReport, LocalError> {
    let state = load_state(dir)?;
    let mut report = DownReport::default();
    let pids: Vec<u32> = state.nodes.iter().filter_map(|n| n.pid).chain(state.etcd_pid).collect();
    let mut running = Vec::new();
    for &pid in &pids {
        if alive(pid) {
            signal(pid, rustix::process::Signal::TERM);
            running.push(pid);
        } else {
            report.gone.push(pid);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && running.iter().any(|&p| alive(p)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    for pid in running {
        if alive(pid) {
            signal(pid, rustix::process::Signal::KILL);
            report.killed.push(pid);
        } else {
            report.stopped.push(pid);
        }
    }
    let path = state_path(dir);
    std::fs::remove_file(&path).map_err(io(&path))?;
    Ok(report)
}
