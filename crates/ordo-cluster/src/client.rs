//! The cluster client: the embedded engine's API over a running cluster.
//!
//! ```no_run
//! use ordo_cluster::client::{Client, ClientConfig};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let cfg = ClientConfig::new("demo", vec!["127.0.0.1:7401".into()], "secret".into());
//! let c = Client::connect(cfg)?;
//! let a = c.run(|tx| tx.alloc(&7u64))?;
//! let v = c.run(|tx| tx.read::<u64>(a))?;
//! assert_eq!(v, 7);
//! # Ok(()) }
//! ```
//!
//! A [`Client`] is a coordinator without regions (FaRM runs coordinators on every machine; this
//! one runs in the application's process). It asks a member for the configuration, keeps a
//! follower [`SyncedClock`] synchronised with the CM from its own thread, and opens an engine
//! with [`ordo::Ordo::with_remote`] whose every region is remote: `run`, `begin`,
//! `read_only_at`, isolation options, `HashMap` and `BTree` work as they do embedded (the client
//! dereferences to its [`ordo::Ordo`]). Errors are the engine's, plus
//! [`ordo::Error::Participant`] when an owner fails, and [`ClientError`] when connecting.
//!
//! # Blocking
//! Like the embedded engine, the client is a blocking API: every remote step waits on the
//! calling thread. Use it from ordinary threads, or from async code through
//! `tokio::task::spawn_blocking`; calling it on a tokio worker thread of a current-thread
//! runtime, or connecting or dropping it inside any runtime, panics in tokio.
//!
//! # Invariants
//! * Transactions wait (bounded by the engine's clock rules) until the first synchronisation
//!   with the CM: the clock is disabled until then.
//! * The client's id has bit 63 set: it never equals a member's id, and it is random per
//!   client, so two clients' transactions never share a key at an owner.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ordo_clock::{SyncOptions, SyncedClock, SystemClock};

use crate::auth::Secret;
use crate::config::{ClusterConfig, ConfigError};
use crate::node::{LocalClock, NodeClock, sync_clock};
use crate::owners::{Placement, RemoteOwners};
use crate::transport::{Limits, Peer, PeerPool};
use crate::wire::Body;

/// How a client reaches a cluster.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The cluster's name.
    pub cluster: String,
    /// Members to ask for the configuration (`host:port`), tried in order.
    pub nodes: Vec<String>,
    /// The file holding the cluster secret.
    pub secret_file: PathBuf,
    /// The engine's configuration: transaction options (isolation, retries), threads.
    pub engine: ordo::Config,
    /// Clock synchronisations with the CM per second.
    pub sync_rate_per_s: u32,
    /// The drift bound ε in parts per million.
    pub drift_bound_ppm: u64,
    /// How long connecting (configuration and first clock sync) may take.
    pub connect_timeout: Duration,
    /// How long one call to an owner waits.
    pub call_timeout: Duration,
    /// Threads of the client's network runtime (default 2; 1 suits a machine shared with the
    /// nodes).
    pub network_threads: usize,
}

impl ClientConfig {
    /// Defaults for everything but the cluster, its members and the secret.
    pub fn new(cluster: &str, nodes: Vec<String>, secret_file: PathBuf) -> Self {
        ClientConfig {
            cluster: cluster.to_string(),
            nodes,
            secret_file,
            engine: ordo::Config::default(),
            sync_rate_per_s: 1_000,
            drift_bound_ppm: 1_000,
            connect_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(5),
            network_threads: 2,
        }
    }
}

/// What went wrong connecting a client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The secret or a member address is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No member answered with a configuration.
    #[error("no member of cluster {cluster:?} gave its configuration (tried {tried:?}): {last}")]
    NoMember {
        /// The cluster.
        cluster: String,
        /// The addresses tried.
        tried: Vec<String>,
        /// The last failure.
        last: String,
    },
    /// The clock did not synchronise with the CM in time.
    #[error("no clock synchronisation with the CM (node {cm}) within {waited_ms} ms")]
    NoClockSync {
        /// The CM.
        cm: u64,
        /// How long the client waited.
        waited_ms: u64,
    },
    /// The engine could not be opened.
    #[error(transparent)]
    Engine(#[from] ordo::Error),
    /// A runtime or thread could not be started.
    #[error("{what}: {source}")]
    Io {
        /// What was being started.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
}

/// A client's engine.
type ClientDb = ordo::Ordo<Arc<NodeClock>>;

/// How often a client reports its oldest active timestamp to the CM.
pub const OAT_REPORT_EVERY: Duration = Duration::from_millis(5);

/// A connected client (see the module docs). Dereferences to its engine.
pub struct Client {
    id: u64,
    db: ClientDb,
    owners: Arc<RemoteOwners>,
    stopping: Arc<AtomicBool>,
    sync_thread: Option<JoinHandle<()>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::ops::Deref for Client {
    type Target = ordo::Ordo<Arc<NodeClock>>;
    fn deref(&self) -> &Self::Target {
        &self.db
    }
}

impl Client {
    /// Connects: fetches the configuration from a member, synchronises the clock with the CM,
    /// and opens the engine.
    pub fn connect(cfg: ClientConfig) -> Result<Client, ClientError> {
        let secret = Secret::from_file(&cfg.secret_file).map_err(|e| ConfigError::Secret {
            path: cfg.secret_file.clone(),
            reason: e.to_string(),
        })?;
        let id = (1u64 << 63) | (rand::random::<u64>() >> 1);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.network_threads.max(1))
            .thread_name("ordo-client")
            .enable_all()
            .build()
            .map_err(|source| ClientError::Io { what: "starting the client runtime", source })?;
        let limits = Limits { call_timeout: cfg.call_timeout, ..Limits::default() };
        let config = runtime.block_on(fetch_config(&cfg, id, &secret, limits))?;
        let placement = Arc::new(Placement::new(&config));
        let pool = Arc::new(PeerPool::new(id, &cfg.cluster, secret.clone(), limits));
        for m in &config.members {
            if let Ok(addr) = m.addr.parse::<SocketAddr>() {
                pool.set_addr(m.id, addr);
            }
        }
        let local: LocalClock = Arc::new(SystemClock::new());
        let options =
            SyncOptions { drift_bound_ppm: cfg.drift_bound_ppm, ..SyncOptions::default() };
        let clock = Arc::new(SyncedClock::follower(local, options));
        let stopping = Arc::new(AtomicBool::new(false));
        let engine: Arc<OnceLock<ClientDb>> = Arc::new(OnceLock::new());
        let sync_thread = {
            let (clock, stopping) = (clock.clone(), stopping.clone());
            let link = CmLink {
                id,
                cm: config.cm,
                addr: config.member(config.cm).and_then(|m| m.addr.parse().ok()),
                cluster: cfg.cluster.clone(),
                secret: secret.clone(),
                limits,
            };
            let rate = cfg.sync_rate_per_s.max(1);
            let timeout = cfg.call_timeout.min(Duration::from_millis(100));
            let engine = engine.clone();
            std::thread::Builder::new()
                .name("ordo-client-sync".into())
                .spawn(move || sync_loop(&clock, &link, rate, timeout, &stopping, &engine))
                .map_err(|source| ClientError::Io { what: "starting the sync thread", source })?
        };
        let started = Instant::now();
        while !clock.is_enabled() {
            if started.elapsed() > cfg.connect_timeout {
                stopping.store(true, Ordering::Release);
                let _ = sync_thread.join();
                return Err(ClientError::NoClockSync {
                    cm: config.cm,
                    waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let owners =
            RemoteOwners::new(id, placement, pool, runtime.handle().clone(), cfg.call_timeout);
        let db = ordo::Ordo::with_remote(cfg.engine, clock, owners.clone(), Vec::new())?;
        let _ = engine.set(db.clone());
        tracing::info!(client = id, cluster = %cfg.cluster, seq = config.seq, "client connected");
        Ok(Client {
            id,
            db,
            owners,
            stopping,
            sync_thread: Some(sync_thread),
            runtime: Some(runtime),
        })
    }

    /// The client's id (bit 63 set).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The engine.
    pub fn db(&self) -> &ordo::Ordo<Arc<NodeClock>> {
        &self.db
    }

    /// The remote participant (round trips, pending truncations).
    pub fn owners(&self) -> &Arc<RemoteOwners> {
        &self.owners
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.owners.flush();
        self.stopping.store(true, Ordering::Release);
        if let Some(t) = self.sync_thread.take() {
            let _ = t.join();
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_millis(200));
        }
    }
}

/// Asks the members in turn for the configuration.
async fn fetch_config(
    cfg: &ClientConfig,
    id: u64,
    secret: &Secret,
    limits: Limits,
) -> Result<ClusterConfig, ClientError> {
    let mut last = String::from("no member address given");
    for addr in &cfg.nodes {
        let Ok(sock) = addr.parse::<SocketAddr>() else {
            last = format!("{addr:?} is not ip:port");
            continue;
        };
        let reply = async {
            let peer = Peer::connect(sock, id, &cfg.cluster, secret.clone(), limits).await?;
            let r = peer.call(Body::ConfigRequest).await;
            peer.close();
            r
        }
        .await;
        match reply {
            Ok(Body::ConfigReply { json }) => match ClusterConfig::from_json(json.as_bytes()) {
                Ok(config) => return Ok(config),
                Err(e) => last = format!("{addr}: {e}"),
            },
            Ok(other) => last = format!("{addr}: unexpected reply {}", other.name()),
            Err(e) => last = format!("{addr}: {e}"),
        }
    }
    Err(ClientError::NoMember { cluster: cfg.cluster.clone(), tried: cfg.nodes.clone(), last })
}

/// Where and how the client's sync thread reaches the CM.
struct CmLink {
    id: u64,
    cm: u64,
    addr: Option<SocketAddr>,
    cluster: String,
    secret: Secret,
    limits: Limits,
}

/// Synchronises `clock` with the CM `rate` times a second until `stopping`, and reports the
/// engine's oldest active timestamp to the CM every [`OAT_REPORT_EVERY`] (FaRMv2 Fig. 9: the
/// cluster's GC must not pass a client's running transactions).
///
/// The thread has its own connection to the CM on its own single-threaded runtime, as a node's
/// lease thread does: a connection of the client's pool would only make progress while this
/// thread is inside its runtime, stalling transactions' calls to the CM between syncs.
fn sync_loop(
    clock: &NodeClock,
    link: &CmLink,
    rate: u32,
    timeout: Duration,
    stopping: &AtomicBool,
    engine: &OnceLock<ClientDb>,
) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        tracing::error!("cannot start the client's sync runtime");
        return;
    };
    let every = Duration::from_secs_f64(1.0 / f64::from(rate));
    let mut peer: Option<Peer> = None;
    let mut backoff = crate::etcd::Backoff::default();
    let mut next_connect = Instant::now();
    let mut next_report = Instant::now();
    while !stopping.load(Ordering::Acquire) {
        let next = Instant::now() + every;
        if peer.as_ref().is_none_or(Peer::is_closed) && Instant::now() >= next_connect {
            peer = None;
            if let Some(addr) = link.addr {
                let connect =
                    Peer::connect(addr, link.id, &link.cluster, link.secret.clone(), link.limits);
                match rt.block_on(connect) {
                    Ok(p) => {
                        backoff = crate::etcd::Backoff::default();
                        peer = Some(p);
                    }
                    Err(e) => {
                        tracing::debug!(cm = link.cm, error = %e, "client cannot reach the CM");
                        next_connect = Instant::now() + backoff.step();
                    }
                }
            }
        }
        if let Some(p) = &peer {
            rt.block_on(async {
                if let Err(e) = sync_clock(clock, p, timeout).await {
                    tracing::debug!(error = %e, "client clock sync failed");
                }
                if let Some(db) = engine.get().filter(|_| Instant::now() >= next_report) {
                    next_report = Instant::now() + OAT_REPORT_EVERY;
                    let oat = db.oldest_active().as_nanos();
                    let _ = p.send(Body::OatReport { oat }).await;
                }
            });
        }
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
    }
    if let Some(p) = peer {
        p.close();
    }
}
