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
//! # Configuration changes
//! The client follows the configuration in force (FaRMv2 §4.3): its sync thread asks the CM for
//! the configuration every [`CONFIG_POLL_EVERY`] and adopts one with a higher sequence number
//! (the region map its calls are routed by, the members' addresses, the CM it syncs with).
//! When the connection to the CM breaks (the CM died), or a configuration names another CM, the
//! client disables its clock at once — it hands out no timestamp until it has synchronised with
//! the CM in force, whose clock starts above every timestamp of the old one (FaRMv2's
//! fast-forward), and that first sync drops the old CM's — and, while the CM cannot be reached,
//! asks the other members for the configuration until one names a new CM (every 2 ms, backing
//! off to every 50 ms). Its transactions wait meanwhile: a cluster that never elects a new CM
//! blocks them, as it blocks its members'. An application whose call to an owner failed
//! ([`ordo::Error::Participant`]) can call [`Client::refresh_config`] before retrying.
//!
//! # Invariants
//! * Transactions wait (bounded by the engine's clock rules) until the first synchronisation
//!   with the CM: the clock is disabled until then.
//! * The client's id has bit 63 set: it never equals a member's id, and it is random per
//!   client, so two clients' transactions never share a key at an owner.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ordo_clock::{SyncOptions, SyncedClock, SystemClock};

use crate::auth::Secret;
use crate::config::{ClusterConfig, ConfigError, NodeId};
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
    /// No member answered with a configuration newer than the one in force.
    #[error(
        "cluster {cluster:?}: no configuration newer than seq {seq} after {attempts} attempts: {last}"
    )]
    NoNewConfig {
        /// The cluster.
        cluster: String,
        /// The sequence number in force.
        seq: u64,
        /// Attempts made.
        attempts: u32,
        /// The last failure, or the newest sequence number seen.
        last: String,
    },
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

/// How often the sync thread asks the CM for the configuration in force.
pub const CONFIG_POLL_EVERY: Duration = Duration::from_millis(20);

/// How often the sync thread retries the CM, or asks the members for a new configuration,
/// while it cannot reach the CM.
const CM_RETRY_EVERY: Duration = Duration::from_millis(2);

/// The longest pause between two rounds of asking the members for a new CM.
const CM_ASK_MAX: Duration = Duration::from_millis(50);

/// How long one configuration request to a member may take.
const CONFIG_CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// The configuration in force at a client and where its copies go (module docs).
struct Membership {
    id: u64,
    cluster: String,
    secret: Secret,
    limits: Limits,
    /// The addresses given at connect, asked after the members of the configuration.
    seeds: Vec<String>,
    config: Mutex<ClusterConfig>,
    placement: Arc<Placement>,
    pool: Arc<PeerPool>,
    /// Configurations adopted after the first.
    changes: AtomicU64,
}

impl Membership {
    fn config(&self) -> ClusterConfig {
        self.config.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn seq(&self) -> u64 {
        self.config.lock().unwrap_or_else(|p| p.into_inner()).seq
    }

    /// Adopts `next` when it is newer; returns whether it did.
    fn adopt(&self, next: ClusterConfig) -> bool {
        let mut guard = self.config.lock().unwrap_or_else(|p| p.into_inner());
        if next.seq <= guard.seq {
            return false;
        }
        for m in &next.members {
            if let Ok(addr) = m.addr.parse::<SocketAddr>() {
                self.pool.set_addr(m.id, addr);
            }
        }
        self.placement.adopt(&next);
        tracing::info!(
            client = self.id,
            seq = next.seq,
            cm = next.cm,
            "client adopted a configuration"
        );
        *guard = next;
        self.changes.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Asks the members of the configuration in force (then the seeds) for theirs, skipping
    /// `skip`; returns the newest answer.
    async fn fetch(&self, skip: Option<NodeId>) -> Result<ClusterConfig, String> {
        let current = self.config();
        let mut addrs: Vec<String> =
            current.members.iter().filter(|m| Some(m.id) != skip).map(|m| m.addr.clone()).collect();
        for s in &self.seeds {
            if !addrs.contains(s)
                && current.members.iter().all(|m| &m.addr != s || Some(m.id) != skip)
            {
                addrs.push(s.clone());
            }
        }
        let limits = Limits {
            handshake_timeout: CONFIG_CALL_TIMEOUT,
            call_timeout: CONFIG_CALL_TIMEOUT,
            ..self.limits
        };
        let mut best: Option<ClusterConfig> = None;
        let mut last = String::from("no member address");
        for addr in addrs {
            match ask_config(&addr, self.id, &self.cluster, &self.secret, limits).await {
                Ok(c) => {
                    if best.as_ref().is_none_or(|b| c.seq > b.seq) {
                        best = Some(c);
                    }
                    // A newer configuration than ours is what we came for.
                    if best.as_ref().is_some_and(|b| b.seq > current.seq) {
                        break;
                    }
                }
                Err(e) => last = e,
            }
        }
        best.ok_or(last)
    }
}

/// Asks the member at `addr` for its configuration.
async fn ask_config(
    addr: &str,
    id: u64,
    cluster: &str,
    secret: &Secret,
    limits: Limits,
) -> Result<ClusterConfig, String> {
    let sock = addr.parse::<SocketAddr>().map_err(|_| format!("{addr:?} is not ip:port"))?;
    let reply = async {
        let peer = Peer::connect(sock, id, cluster, secret.clone(), limits).await?;
        let r = peer.call(Body::ConfigRequest).await;
        peer.close();
        r
    }
    .await;
    match reply {
        Ok(Body::ConfigReply { json }) => {
            ClusterConfig::from_json(json.as_bytes()).map_err(|e| format!("{addr}: {e}"))
        }
        Ok(other) => Err(format!("{addr}: unexpected reply {}", other.name())),
        Err(e) => Err(format!("{addr}: {e}")),
    }
}

/// A connected client (see the module docs). Dereferences to its engine.
pub struct Client {
    id: u64,
    db: ClientDb,
    owners: Arc<RemoteOwners>,
    membership: Arc<Membership>,
    handle: tokio::runtime::Handle,
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
        let first_cm = config.cm;
        let membership = Arc::new(Membership {
            id,
            cluster: cfg.cluster.clone(),
            secret: secret.clone(),
            limits,
            seeds: cfg.nodes.clone(),
            config: Mutex::new(config.clone()),
            placement: placement.clone(),
            pool: pool.clone(),
            changes: AtomicU64::new(0),
        });
        let sync_thread = {
            let (clock, stopping) = (clock.clone(), stopping.clone());
            let link = membership.clone();
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
                    cm: first_cm,
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
        let handle = runtime.handle().clone();
        Ok(Client {
            id,
            db,
            owners,
            membership,
            handle,
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

    /// The configuration the client routes by.
    pub fn config(&self) -> ClusterConfig {
        self.membership.config()
    }

    /// How many configurations the client adopted after the one it connected with.
    pub fn config_changes(&self) -> u64 {
        self.membership.changes.load(Ordering::Relaxed)
    }

    /// Asks the live members for the configuration in force and adopts it when it is newer
    /// than the client's (module docs), up to `attempts` times `pause` apart until one is.
    /// Returns the sequence number in force afterwards. Call it from an ordinary thread, not
    /// from inside a runtime.
    ///
    /// # Errors
    /// [`ClientError::NoNewConfig`] when no attempt found a newer configuration (the
    /// configuration in force is kept: the failure that prompted the call may be transient).
    pub fn refresh_config(&self, attempts: u32, pause: Duration) -> Result<u64, ClientError> {
        let seq = self.membership.seq();
        let mut last = String::new();
        for attempt in 0..attempts.max(1) {
            if attempt > 0 {
                std::thread::sleep(pause);
            }
            match self.handle.block_on(self.membership.fetch(None)) {
                Ok(c) if c.seq > seq => {
                    let new = c.seq;
                    self.membership.adopt(c);
                    return Ok(new);
                }
                Ok(c) => last = format!("newest seen: seq {}", c.seq),
                Err(e) => last = e,
            }
            if self.membership.seq() > seq {
                // The sync thread adopted one meanwhile.
                return Ok(self.membership.seq());
            }
        }
        Err(ClientError::NoNewConfig {
            cluster: self.membership.cluster.clone(),
            seq,
            attempts: attempts.max(1),
            last,
        })
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
        match ask_config(addr, id, &cfg.cluster, secret, limits).await {
            Ok(config) => return Ok(config),
            Err(e) => last = e,
        }
    }
    Err(ClientError::NoMember { cluster: cfg.cluster.clone(), tried: cfg.nodes.clone(), last })
}

/// Synchronises `clock` with the CM `rate` times a second until `stopping`, reports the
/// engine's oldest active timestamp to the CM every [`OAT_REPORT_EVERY`] (FaRMv2 Fig. 9: the
/// cluster's GC must not pass a client's running transactions), and follows configuration
/// changes (module docs): the configuration is asked of the CM every [`CONFIG_POLL_EVERY`];
/// when the CM's connection breaks or cannot be made, the clock is disabled and the members are
/// asked for a configuration naming another CM.
///
/// The thread has its own connection to the CM on its own single-threaded runtime, as a node's
/// lease thread does: a connection of the client's pool would only make progress while this
/// thread is inside its runtime, stalling transactions' calls to the CM between syncs.
fn sync_loop(
    clock: &NodeClock,
    link: &Membership,
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
    // The CM the peer is connected to.
    let mut peer: Option<(NodeId, Peer)> = None;
    let mut next_connect = Instant::now();
    let mut next_report = Instant::now();
    let mut next_poll = Instant::now() + CONFIG_POLL_EVERY;
    let mut next_ask_members = Instant::now();
    let mut lost_cm = false;
    let mut ask_every = CM_RETRY_EVERY;
    while !stopping.load(Ordering::Acquire) {
        let next = Instant::now() + every;
        let config = link.config();
        let cm = config.cm;
        let stale = match &peer {
            Some((id, p)) => *id != cm || p.is_closed(),
            None => true,
        };
        if stale {
            if let Some((id, p)) = peer.take() {
                // The CM's connection broke, or the configuration names another CM: no
                // timestamps until synchronised with the CM in force, and that first sync
                // drops every sync with the old one (`SyncedClock::finish_sync`).
                clock.disable();
                if id == cm {
                    lost_cm = true;
                }
                tracing::info!(client = link.id, old = id, cm, "left the CM; clock disabled");
                p.close();
            }
            if Instant::now() >= next_connect {
                let addr = config.member(cm).and_then(|m| m.addr.parse::<SocketAddr>().ok());
                let connected = match addr {
                    Some(addr) => {
                        let connect = Peer::connect(
                            addr,
                            link.id,
                            &link.cluster,
                            link.secret.clone(),
                            link.limits,
                        );
                        match rt.block_on(connect) {
                            Ok(p) => Some(p),
                            Err(e) => {
                                tracing::debug!(cm, error = %e, "client cannot reach the CM");
                                None
                            }
                        }
                    }
                    None => None,
                };
                match connected {
                    Some(p) => {
                        peer = Some((cm, p));
                        lost_cm = false;
                        ask_every = CM_RETRY_EVERY;
                    }
                    None => {
                        if clock.is_enabled() {
                            // The CM cannot be reached: no timestamps until synchronised again.
                            clock.disable();
                        }
                        lost_cm = true;
                        next_connect = Instant::now() + CM_RETRY_EVERY;
                    }
                }
            }
        }
        if lost_cm && Instant::now() >= next_ask_members {
            // Ask the others whether a new configuration names another CM.
            next_ask_members = Instant::now() + ask_every;
            // Every 2 ms at first, backing off to every 50 ms while no member names another CM.
            ask_every = (ask_every * 2).min(CM_ASK_MAX);
            if let Ok(c) = rt.block_on(link.fetch(Some(cm)))
                && link.adopt(c)
            {
                next_connect = Instant::now();
                ask_every = CM_RETRY_EVERY;
            }
        }
        if let Some((_, p)) = &peer {
            rt.block_on(async {
                if let Err(e) = sync_clock(clock, p, timeout).await {
                    tracing::debug!(error = %e, "client clock sync failed");
                }
                // `oldest_active` reads the clock, which blocks while it is disabled; only this
                // thread disables it, so checking first cannot race with a disable.
                let due = Instant::now() >= next_report && clock.is_enabled();
                if let Some(db) = engine.get().filter(|_| due) {
                    next_report = Instant::now() + OAT_REPORT_EVERY;
                    let oat = db.oldest_active().as_nanos();
                    let _ = p.send(Body::OatReport { oat }).await;
                }
                if Instant::now() >= next_poll {
                    next_poll = Instant::now() + CONFIG_POLL_EVERY;
                    if let Ok(Body::ConfigReply { json }) =
                        p.call_timeout(Body::ConfigRequest, timeout).await
                        && let Ok(c) = ClusterConfig::from_json(json.as_bytes())
                    {
                        link.adopt(c);
                    }
                }
            });
        }
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
    }
    if let Some((_, p)) = peer {
        p.close();
    }
}
