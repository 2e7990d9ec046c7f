//! A running node: its network task, its lease and clock-sync thread, and its view of the
//! cluster configuration.
//!
//! # Threads
//! * **Network runtime** (tokio, two worker threads): the transport server. Every request is
//!   answered by [`NodeHandler`] on the connection's task — clock-sync replies, lease grants,
//!   status, and object reads from the node's engine ([`Node::db`], read through its local
//!   participant without a transaction: the stand-in for FaRM's one-sided RDMA reads). It runs
//!   no application code and never blocks.
//! * **Lease thread** (`ordo-lease`, one per node, its own single-threaded runtime and its own
//!   connection to the CM, as FaRM's dedicated high-priority thread): on a non-CM it renews the
//!   leases with the 3-way handshake every `lease / 4` and synchronises the clock at
//!   `sync_rate_per_s / (members − 1)` per second; on every node it checks the leases every
//!   `lease / 4` and samples the clock's interval width into the metrics.
//! * **Configuration watch** (a task on the network runtime, etcd source only): follows the etcd
//!   key, adopts a valid configuration with a higher sequence number, and polls etcd once a
//!   second so that losing it is noticed and reported (`etcd_connected` = 0, a `warn`) while the
//!   node keeps serving under the configuration it has.
//!
//! # Invariants
//! * The sequence number a node works under never decreases.
//! * A non-CM's clock stays disabled until its first successful synchronisation with the CM
//!   (the [`SyncedClock`] follower rule), and is disabled again when its lease with the CM
//!   expires (until a sync succeeds): a member cut off from the CM hands out no time. The CM's
//!   clock is its local clock.
//! * A lease request or sync for another configuration sequence is refused (typed `Error` reply).
//! * The CM changes only through the reconfiguration round (`crate::failover`): with
//!   `failover = true` a configuration from etcd that changes the CM or the region map is
//!   adopted at its CONFIG-COMMIT, not when the watch sees it; a node that stops being CM
//!   becomes a follower of the new one.
//!
//! # Failover (with `failover = true`)
//! The lease thread acts on expiries: the CM on suspected members, a member on a suspected
//! CM. The `ordo-failover` thread plans the next configuration, swaps it into etcd (one of
//! several racing members wins), and runs the round over fresh connections; NEW-CONFIG,
//! CONFIG-COMMIT and ADVANCE are answered by [`NodeHandler`]. A member that fails the round is
//! removed in a further attempt (three at most).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ordo_clock::{Clock, Interval, SyncOptions, SyncedClock};

use crate::auth::Secret;
use crate::config::{ClusterConfig, ConfigError, NodeConfig, NodeId};
use crate::etcd::{Backoff, ConfigStore, EtcdError};
use crate::failover::{self, RoundError, RoundMembers, RoundShortcuts};
use crate::lease::LeaseTable;
use crate::metrics::NodeMetrics;
use crate::owners::{LocalBackup, Placement, RemoteOwners};
use crate::recovery;
use crate::transport::{Handler, Limits, Peer, PeerPool, Server, TransportError};
use crate::wire::Body;
use ordo::remote::{PartWire, ReadAt, ReadEntry, Refusal, TxKey};

/// The nice value of the lease and clock-sync thread (lower runs first).
const LEASE_NICE: i32 = -10;

/// How long after start a node waits for a peer's first lease renewal before suspecting it.
pub const STARTUP_GRACE: Duration = Duration::from_secs(2);

/// The local clock a node synchronises: any [`Clock`] (tests inject skewed ones).
pub type LocalClock = Arc<dyn Clock>;

/// The node's synchronised clock.
pub type NodeClock = SyncedClock<LocalClock>;

/// Error codes carried in `Body::Error` replies.
pub mod codes {
    /// The request needs the CM and this node is not it.
    pub const NOT_CM: u16 = 1;
    /// The request names another configuration sequence number.
    pub const WRONG_CONFIG: u16 = 2;
    /// The sender is not a member of the configuration.
    pub const NOT_A_MEMBER: u16 = 3;
    /// The request is not served by this node.
    pub const UNSUPPORTED: u16 = 4;
    /// The object could not be read.
    pub const READ_FAILED: u16 = 5;
    /// This node does not hold the copy of the region the request needs (primary or backup).
    pub const NOT_OWNER: u16 = 6;
    /// The request is malformed beyond what the wire decoder checks.
    pub const BAD_REQUEST: u16 = 7;
    /// The sender is a client presumed dead: its transactions were recovered, and nothing more
    /// from it is served (it must reconnect under a new id).
    pub const FENCED: u16 = 8;
    /// The CM grants no lease: a majority of its configuration has not asked for one within
    /// half a lease (it may have been replaced while alive).
    pub const NO_QUORUM: u16 = 9;
}

/// What went wrong starting or running a node.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The node's or the cluster's configuration is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// etcd failed.
    #[error(transparent)]
    Etcd(#[from] EtcdError),
    /// The network failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// etcd holds no configuration for the cluster.
    #[error("etcd holds no configuration for cluster {cluster:?} after {waited_ms} ms")]
    NoConfiguration {
        /// The cluster's name.
        cluster: String,
        /// How long the node waited for one.
        waited_ms: u64,
    },
    /// The node's engine could not be created.
    #[error("starting the node's engine: {0}")]
    Engine(String),
    /// An I/O error (runtime, metrics port).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Where a node gets the cluster configuration.
#[derive(Clone, Debug)]
pub enum ConfigSource {
    /// etcd at the node file's endpoints (the normal case).
    Etcd,
    /// A fixed configuration (benchmarks and tests that need no etcd).
    Static(ClusterConfig),
}

/// State shared by the node's threads and tasks.
pub struct NodeShared {
    id: NodeId,
    cluster: String,
    file: NodeConfig,
    clock: Arc<NodeClock>,
    config: RwLock<ClusterConfig>,
    metrics: Arc<NodeMetrics>,
    leases: Mutex<LeaseTable>,
    stopping: AtomicBool,
    /// The node's engine: the primary copies of its home regions and the backup copies of the
    /// regions it backs up; its transactions reach other regions through `owners`.
    db: ordo::Ordo<Arc<NodeClock>>,
    /// Where every region's copies are (the configuration's region map).
    placement: Arc<Placement>,
    /// The remote participant the engine calls.
    owners: Arc<RemoteOwners>,
    /// Its connections to the other members (data, apart from the lease thread's).
    owners_pool: Arc<PeerPool>,
    /// On the CM: the oldest active timestamp each member and client last reported.
    oats: Mutex<std::collections::HashMap<u64, (u64, Instant)>>,
    /// The configuration of a NEW-CONFIG this node acknowledged, until its CONFIG-COMMIT.
    pending: Mutex<Option<ClusterConfig>>,
    /// Where the configuration is swapped (etcd source only; none: no failover).
    store: Option<ConfigStore>,
    /// The network runtime (the failover thread makes its calls on it).
    net: tokio::runtime::Handle,
    secret: Secret,
    limits: Limits,
    /// A reconfiguration this node initiated is running.
    reconfiguring: AtomicBool,
    /// The last reconfiguration this node initiated.
    last_failover: Mutex<Option<FailoverReport>>,
    /// The suspects of the last attempt and when it ended: the same suspects are not tried
    /// again for [`FAILOVER_RETRY`] (a refused plan, such as no majority, stays refused).
    last_attempt: Mutex<Option<(std::collections::BTreeSet<NodeId>, Instant)>>,
    /// Regions this node was promoted to primary of and does not serve yet: records of the
    /// region it held as a backup are still pending (their coordinators' TRUNCATE or discard,
    /// or recovery's decision, resolves them). Lock order: `config`, then this.
    gated: Mutex<std::collections::BTreeSet<u16>>,
    /// `gated` is not empty (a load on the TRUNCATE path instead of a lock).
    any_gated: AtomicBool,
    /// Copies of this node's regions due to new backups (`crate::rereplicate`), for the lease
    /// thread to start.
    copies_due: Mutex<Vec<(u16, NodeId)>>,
    /// The copies this node made, finished or failed.
    copies_done: Mutex<Vec<CopyOutcome>>,
    /// Clients whose transactions recovery decided: nothing more from them is served.
    fenced: Mutex<std::collections::HashSet<u64>>,
    /// `fenced` is not empty (a load per request instead of a lock).
    any_fenced: AtomicBool,
    /// On the CM: clients silent for [`CLIENT_OAT_TTL`], for the lease thread to recover.
    clients_gone: Mutex<Vec<u64>>,
    /// The CM disabled its own clock because a member went silent (`fence_cm`).
    cm_fenced: AtomicBool,
    /// On the CM: per member, the configuration and arrival of its last lease request whose
    /// LeaseAck has not come yet.
    lease_asks: Mutex<std::collections::HashMap<NodeId, (u64, Instant)>>,
    /// When this node acknowledged a NEW-CONFIG that changes the CM, until it adopts a new CM:
    /// its clock was disabled with FF at the acknowledgement, and it must not enable it again
    /// through a sync with the old CM (still alive after a false suspicion), or it would hand
    /// out time above the FF the new CM starts from ([`PREPARED_MAX`] bounds the wait when the
    /// round never completes).
    cm_change_acked: Mutex<Option<Instant>>,
    /// On the CM (failover on): when each member's last lease request arrived, for the quorum
    /// a lease grant needs (`grant_has_quorum`).
    lease_asked: Mutex<std::collections::HashMap<NodeId, Instant>>,
    /// On the CM: a majority asked within half a lease at some point since it became CM; from
    /// then on a grant needs such a majority.
    quorum_seen: AtomicBool,
    /// When this node last adopted a configuration that removed members: a CM-changing round
    /// soon after waits a lease even when it removes only the old CM (`reconfigure`).
    removed_at: Mutex<Option<Instant>>,
}

/// How long, in lease periods, a member that acknowledged a CM-changing NEW-CONFIG refuses to
/// resynchronise with the old CM while waiting for its CONFIG-COMMIT. The new CM cannot enable
/// without this member's ADVANCE-ACK, which follows the CONFIG-COMMIT, so giving up after the
/// round surely ended is safe.
pub const PREPARED_MAX: u32 = 8;

/// A copy of a region to a new backup (re-replication) as it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyOutcome {
    /// The region.
    pub region: u16,
    /// The new backup.
    pub backup: NodeId,
    /// What was copied.
    pub report: crate::rereplicate::CopyReport,
    /// How long it took.
    pub elapsed: Duration,
    /// Why it stopped early, if it did.
    pub error: Option<String>,
}

/// How long a failover attempt for the same suspects waits after the last one.
pub const FAILOVER_RETRY: Duration = Duration::from_secs(1);

/// What a reconfiguration this node initiated did (FaRMv2 Table 1's figures).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailoverReport {
    /// The configuration installed.
    pub seq: u64,
    /// The members removed.
    pub removed: Vec<NodeId>,
    /// The CM changed (clocks were fast-forwarded).
    pub cm_changed: bool,
    /// How long this node's clock was disabled (zero when the CM did not change).
    pub clock_disabled: Duration,
    /// From the decision to reconfigure to the end of the round.
    pub total: Duration,
    /// Transactions of the removed members that recovery committed.
    pub recovered_commits: usize,
    /// Transactions of the removed members that recovery aborted.
    pub recovered_aborts: usize,
    /// How long recovery took (query, vote, decisions), after the round.
    pub recovery: Duration,
}

impl LocalBackup for NodeShared {
    fn backup(
        &self,
        key: TxKey,
        part: &PartWire,
        wts: ordo_clock::Timestamp,
        regions: &[u16],
    ) -> Result<(), ordo::Error> {
        self.db.serve_backup(key, part, wts, regions)
    }

    fn truncate(&self, key: TxKey) {
        if let Err(e) = self.db.serve_truncate(key) {
            tracing::error!(node = self.id, ?key, error = %e, "applying a backed-up part failed");
        }
    }

    fn discard(&self, key: TxKey) {
        self.db.serve_discard(key);
    }
}

impl NodeShared {
    fn config(&self) -> ClusterConfig {
        self.config.read().map(|c| c.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    fn seq(&self) -> u64 {
        self.config.read().map(|c| c.seq).unwrap_or_else(|p| p.into_inner().seq)
    }

    fn is_cm(&self) -> bool {
        self.clock.is_master()
    }

    fn leases(&self) -> std::sync::MutexGuard<'_, LeaseTable> {
        self.leases.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adopts `next` if its sequence number is higher; returns whether it did.
    fn adopt(&self, next: ClusterConfig) -> bool {
        let mut guard = self.config.write().unwrap_or_else(|p| p.into_inner());
        if next.seq <= guard.seq {
            return false;
        }
        if next.member(self.id).is_none() {
            tracing::warn!(
                node = self.id,
                seq = next.seq,
                "this node was removed from the configuration"
            );
        }
        let cm_changed = next.cm != guard.cm;
        if guard.members.iter().any(|m| next.member(m.id).is_none()) {
            *self.removed_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        }
        if cm_changed && next.cm == self.id {
            // A new reign: the quorum of lease grants starts over (`grant_has_quorum`).
            self.lease_asked.lock().unwrap_or_else(|p| p.into_inner()).clear();
            self.quorum_seen.store(false, Ordering::Release);
        }
        if cm_changed {
            tracing::info!(
                node = self.id,
                old_cm = guard.cm,
                new_cm = next.cm,
                seq = next.seq,
                "the configuration names a new CM"
            );
            if guard.cm == self.id && next.cm != self.id {
                // No longer the clock master: stop handing out time until synced with the new one.
                self.clock.become_follower();
            }
            *self.cm_change_acked.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
        tracing::info!(node = self.id, seq = next.seq, "adopted cluster configuration");
        self.metrics.config_seq.store(next.seq, Ordering::Relaxed);
        // Regions this node becomes primary of: a backup promoted by a failover. It serves them
        // once the records it holds of them are resolved (`ungate`).
        let due = crate::rereplicate::copies_due(self.id, &guard, &next);
        if !due.is_empty() {
            self.copies_due.lock().unwrap_or_else(|p| p.into_inner()).extend(due);
        }
        let promoted: Vec<u16> = next
            .regions
            .iter()
            .filter(|r| r.primary == self.id)
            .filter(|r| guard.regions.iter().any(|o| o.region == r.region && o.primary != self.id))
            .filter_map(|r| u16::try_from(r.region).ok())
            .collect();
        {
            let mut gated = self.gated.lock().unwrap_or_else(|p| p.into_inner());
            gated.extend(promoted.iter().copied());
            gated.retain(|&r| {
                next.regions.iter().any(|p| p.region == u32::from(r) && p.primary == self.id)
            });
            // Gated regions are never routed here, not even for the moment between the two.
            let held: Vec<u16> = gated.iter().copied().collect();
            self.placement.adopt_holding(&next, &held);
            self.any_gated.store(!gated.is_empty(), Ordering::Release);
            if !promoted.is_empty() {
                tracing::warn!(node = self.id, seq = next.seq, regions = ?promoted,
                    "promoted to primary; serving once the records held are resolved");
            }
        }
        for m in &next.members {
            if let Ok(addr) = m.addr.parse::<SocketAddr>() {
                self.owners_pool.set_addr(m.id, addr);
            }
        }
        let peers: Vec<NodeId> =
            next.members.iter().map(|m| m.id).filter(|&p| p != self.id).collect();
        let (cm, me) = (next.cm, self.id);
        let non_cms: Vec<NodeId> = next.non_cms().map(|m| m.id).collect();
        *guard = next;
        drop(guard);
        let mut leases = self.leases();
        leases.retain(&peers);
        if cm_changed {
            // The new lease partners get a grace period to connect and renew.
            let grace = Instant::now() + self.file.lease() * 4;
            if cm == me {
                for id in non_cms {
                    leases.expect(id, grace);
                }
            } else {
                leases.retain(&[cm]);
                leases.expect(cm, grace);
            }
        }
        true
    }
}

impl NodeShared {
    /// Starts serving the promoted regions whose records are all resolved: rebuilds their
    /// allocator state and routes them here (see `gated`).
    fn ungate(&self) {
        if !self.any_gated.load(Ordering::Acquire) {
            return;
        }
        // Held throughout (lock order: config, then gated), so no adopt moves a region between
        // the check and the routing below.
        let config = self.config.read().unwrap_or_else(|p| p.into_inner());
        let mut gated = self.gated.lock().unwrap_or_else(|p| p.into_inner());
        let ff = self.clock.fast_forward_point();
        let since = match self.clock.try_now(Duration::ZERO) {
            Ok(now) => now.hi().max(ff),
            Err(_) => ff,
        };
        gated.retain(|&region| {
            if !config.regions.iter().any(|p| p.region == u32::from(region) && p.primary == self.id)
            {
                return false;
            }
            if self.db.serve_pending_in(region) > 0 {
                return true;
            }
            match self.db.promote_region(region, since) {
                Ok(()) => {
                    self.placement.set_primary(region, Some(self.id));
                    tracing::warn!(node = self.id, region, "serving promoted region");
                    false
                }
                Err(e) => {
                    tracing::error!(node = self.id, region, error = %e, "cannot promote region");
                    true
                }
            }
        });
        self.any_gated.store(!gated.is_empty(), Ordering::Release);
    }

    /// Regions promoted here and not served yet.
    pub(crate) fn gated(&self) -> Vec<u16> {
        self.gated.lock().unwrap_or_else(|p| p.into_inner()).iter().copied().collect()
    }
}

impl NodeShared {
    /// A configuration seen in etcd. Without failover it is adopted; with failover the
    /// reconfiguration round adopts it (CONFIG-COMMIT), after NEW-CONFIG prepared the clocks,
    /// so the watch only adopts a configuration that leaves the CM and the region map as they
    /// are (membership changes of other kinds, made by hand).
    fn adopt_watched(&self, next: ClusterConfig) {
        if self.file.failover {
            let current = self.config();
            if next.seq > current.seq && (next.cm != current.cm || next.regions != current.regions)
            {
                tracing::debug!(
                    node = self.id,
                    seq = next.seq,
                    "configuration seen in etcd; waiting for its CONFIG-COMMIT"
                );
                return;
            }
        }
        self.adopt(next);
    }
}

/// Serves requests on the network task (no application code, never blocks).
pub struct NodeHandler {
    shared: Arc<NodeShared>,
}

fn error_reply(code: u16, message: String) -> Body {
    Body::Error { code, message }
}

impl Handler for NodeHandler {
    fn request(&self, from: u64, body: Body) -> Body {
        let s = &self.shared;
        if s.is_fenced(from) {
            return error_reply(codes::FENCED, format!("client {from} was presumed dead"));
        }
        match body {
            Body::Ping { payload } => Body::Pong { payload },
            Body::ClockSyncRequest => {
                if !s.is_cm() {
                    return error_reply(codes::NOT_CM, format!("node {} is not the CM", s.id));
                }
                s.metrics.syncs_served.fetch_add(1, Ordering::Relaxed);
                Body::ClockSyncReply {
                    master_time: s
                        .clock
                        .master_time()
                        .map(|i| (i.lo().as_nanos(), i.hi().as_nanos())),
                }
            }
            Body::LeaseRequest { config_seq, lease_ms, oat } => {
                if !s.is_cm() {
                    return error_reply(codes::NOT_CM, format!("node {} is not the CM", s.id));
                }
                let seq = s.seq();
                if config_seq != seq {
                    return error_reply(
                        codes::WRONG_CONFIG,
                        format!("lease for configuration {config_seq}; this node is at {seq}"),
                    );
                }
                if s.config().member(from).is_none() {
                    return error_reply(
                        codes::NOT_A_MEMBER,
                        format!("node {from} is not a member"),
                    );
                }
                if s.file.failover && !s.grant_has_quorum(from, Instant::now()) {
                    return error_reply(
                        codes::NO_QUORUM,
                        format!("CM {} has not heard from a majority for half a lease", s.id),
                    );
                }
                // The member's lease is renewed when its LeaseAck shows the grant reached it
                // (counted from this request's arrival): a member whose grants are lost may
                // suspect this CM, and this CM must then fence itself (`fence_cm`) rather than
                // count it as heard from (found by the simulation, lost grants).
                s.lease_asks
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(from, (config_seq, Instant::now()));
                s.report_oat(from, oat);
                s.metrics.lease_renewals.fetch_add(1, Ordering::Relaxed);
                Body::LeaseGrant {
                    config_seq,
                    lease_ms: lease_ms.min(s.file.lease_ms),
                    gc: s.cluster_oat().as_nanos(),
                }
            }
            Body::ReadObject { addr } => {
                // FaRM's one-sided RDMA read: the head as it is (the reader validates it),
                // served here without a transaction.
                let mut words = Vec::new();
                let addr = ordo::Addr::from_raw(addr);
                match s.db.read_version(addr, ordo_clock::Timestamp::MAX, &mut words) {
                    Ok(entry) => Body::ObjectImage {
                        header: entry.header.raw(),
                        len_bytes: entry.len_bytes,
                        words,
                    },
                    Err(e) => error_reply(codes::READ_FAILED, format!("reading {addr:?}: {e}")),
                }
            }
            Body::Read { addr, rts, flags } => {
                let addr = ordo::Addr::from_raw(addr);
                if let Some(e) = s.not_primary(addr.region()) {
                    return e;
                }
                let at = ReadAt {
                    rts: ordo_clock::Timestamp::from_nanos(rts),
                    check_lock: flags & 1 != 0,
                    old_versions: flags & 2 != 0,
                };
                let mut words = Vec::new();
                match s.db.serve_read(addr, at, &mut words) {
                    Ok(entry) => Body::ObjectImage {
                        header: entry.header.raw(),
                        len_bytes: entry.len_bytes,
                        words,
                    },
                    Err(e) => declined(&e),
                }
            }
            Body::StillNewest { addr, header, len_bytes, rts } => {
                let addr = ordo::Addr::from_raw(addr);
                if let Some(e) = s.not_primary(addr.region()) {
                    return e;
                }
                let read = ReadEntry::new(addr, ordo::object::Header::from_raw(header), len_bytes);
                match s.db.serve_still_newest(&read, ordo_clock::Timestamp::from_nanos(rts)) {
                    Ok(flag) => Body::Done { flag },
                    Err(e) => declined(&e),
                }
            }
            Body::Reserve { len_bytes } => match s.db.serve_reserve(from, len_bytes as usize) {
                Ok((addr, version)) => {
                    Body::Reserved { addr: addr.to_raw(), version: version.as_nanos() }
                }
                Err(e) => declined(&e),
            },
            Body::Release { addr } => {
                let addr = ordo::Addr::from_raw(addr);
                if let Some(e) = s.not_primary(addr.region()) {
                    return e;
                }
                done(s.db.serve_release(addr))
            }
            Body::Lock { tx, region, seq, entries, words } => {
                if let Some(e) = s.not_primary(region) {
                    return e;
                }
                let changed = s.placement.changed_at(region);
                if seq < changed {
                    return error_reply(
                        codes::WRONG_CONFIG,
                        format!(
                            "LOCK routed by configuration {seq}; region {region} changed at {changed}"
                        ),
                    );
                }
                let key = TxKey { coordinator: from, tx, region };
                done(s.db.serve_lock(key, &PartWire { entries, words }))
            }
            Body::Validate { reads } => {
                if reads.len() % 3 != 0 {
                    return error_reply(codes::BAD_REQUEST, "VALIDATE of partial reads".into());
                }
                let reads: Vec<ReadEntry> = reads
                    .chunks_exact(3)
                    .map(|r| {
                        ReadEntry::new(
                            ordo::Addr::from_raw(r[0]),
                            ordo::object::Header::from_raw(r[1]),
                            u32::try_from(r[2]).unwrap_or(u32::MAX),
                        )
                    })
                    .collect();
                if let Some(e) = reads.iter().find_map(|r| s.not_primary(r.addr.region())) {
                    return e;
                }
                done(s.db.serve_validate(&reads))
            }
            Body::CommitBackup { tx, region, wts, entries, words, truncate, regions } => {
                s.truncate_all(from, &truncate, &[]);
                if !s.placement.is_backup(region, s.id) {
                    return error_reply(
                        codes::NOT_OWNER,
                        format!("node {} is not a backup of region {region}", s.id),
                    );
                }
                let key = TxKey { coordinator: from, tx, region };
                let part = PartWire { entries, words };
                let wts = ordo_clock::Timestamp::from_nanos(wts);
                if s.db.config().durability.is_some() {
                    // A durable backup waits for its log (the group flush): hand this network
                    // thread's other connections to another thread meanwhile.
                    done(tokio::task::block_in_place(|| {
                        s.db.serve_backup(key, &part, wts, &regions)
                    }))
                } else {
                    done(s.db.serve_backup(key, &part, wts, &regions))
                }
            }
            Body::CommitPrimary { tx, region, wts } => {
                if let Some(e) = s.not_primary(region) {
                    return e;
                }
                let key = TxKey { coordinator: from, tx, region };
                done(s.db.serve_commit_primary(key, ordo_clock::Timestamp::from_nanos(wts)))
            }
            Body::Abort { tx, region, allocs } => {
                if let Some(e) = s.not_primary(region) {
                    return e;
                }
                let key = TxKey { coordinator: from, tx, region };
                let allocs: Vec<ordo::Addr> =
                    allocs.into_iter().map(ordo::Addr::from_raw).collect();
                done(s.db.serve_abort(key, &allocs))
            }
            Body::Truncate { truncate, discard } => {
                s.truncate_all(from, &truncate, &discard);
                Body::Done { flag: true }
            }
            Body::NewConfig { seq, json } => {
                let next = match ClusterConfig::from_json(json.as_bytes()) {
                    Ok(next) if next.seq == seq => next,
                    Ok(next) => {
                        return error_reply(
                            codes::BAD_REQUEST,
                            format!("NEW-CONFIG {seq} carries configuration {}", next.seq),
                        );
                    }
                    Err(e) => return error_reply(codes::BAD_REQUEST, format!("NEW-CONFIG: {e}")),
                };
                let current = s.config();
                if seq <= current.seq {
                    return error_reply(
                        codes::WRONG_CONFIG,
                        format!("NEW-CONFIG {seq}; this node is at {}", current.seq),
                    );
                }
                if next.member(s.id).is_none() {
                    return error_reply(
                        codes::NOT_A_MEMBER,
                        format!("node {} is not in {seq}", s.id),
                    );
                }
                if next.cm != from {
                    return error_reply(
                        codes::BAD_REQUEST,
                        format!("NEW-CONFIG {seq} from {from}, but it names CM {}", next.cm),
                    );
                }
                let cm_changes = next.cm != current.cm;
                let ff = failover::on_new_config(&s.clock, cm_changes);
                if cm_changes {
                    *s.cm_change_acked.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(Instant::now());
                }
                *s.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some(next);
                Body::NewConfigAck { seq, ff: ff.as_nanos() }
            }
            Body::ConfigCommit { seq } => {
                let next = {
                    let mut pending = s.pending.lock().unwrap_or_else(|p| p.into_inner());
                    match pending.take() {
                        Some(next) if next.seq == seq && next.cm == from => next,
                        other => {
                            *pending = other;
                            return error_reply(
                                codes::WRONG_CONFIG,
                                format!("CONFIG-COMMIT {seq} from {from} without its NEW-CONFIG"),
                            );
                        }
                    }
                };
                s.adopt(next);
                Body::Done { flag: true }
            }
            Body::Advance { seq, ff } => {
                let config = s.config();
                if config.seq != seq || config.cm != from {
                    return error_reply(
                        codes::WRONG_CONFIG,
                        format!("ADVANCE {seq} from {from}; this node is at {}", config.seq),
                    );
                }
                failover::on_advance(&s.clock, ordo_clock::Timestamp::from_nanos(ff));
                Body::Done { flag: true }
            }
            Body::Replicate { region, images } => {
                if !s.placement.is_backup(region, s.id) || s.placement.primary(region) != Some(from)
                {
                    return error_reply(
                        codes::NOT_OWNER,
                        format!(
                            "REPLICATE of region {region} from {from}, not its primary to a backup"
                        ),
                    );
                }
                let images = match crate::rereplicate::decode_images(&images) {
                    Ok(images) => images,
                    Err(e) => return error_reply(codes::BAD_REQUEST, e.to_string()),
                };
                if let Some(i) = images.iter().find(|i| i.addr.region() != region) {
                    return error_reply(
                        codes::BAD_REQUEST,
                        format!("REPLICATE of region {region} carries {:?}", i.addr),
                    );
                }
                for i in &images {
                    let applied =
                        s.db.serve_replica(i.addr, i.version, i.len_bytes as usize, &i.words);
                    if let Err(e) = applied {
                        return declined(&e);
                    }
                }
                Body::Done { flag: true }
            }
            Body::RecoverQuery { seq, coordinators } => {
                if let Some(e) = s.not_from_cm(from, seq, "RECOVER-QUERY") {
                    return e;
                }
                // A client's state is final once nothing more from it is served.
                s.fence(coordinators.iter().copied().filter(|&c| s.config().member(c).is_none()));
                let (records, locks, evidence) =
                    recovery::encode_state(&s.db.serve_recovery_state(&coordinators));
                Body::RecoverState { records, locks, evidence }
            }
            Body::RecoverDecide { seq, decisions } => {
                if let Some(e) = s.not_from_cm(from, seq, "RECOVER-DECIDE") {
                    return e;
                }
                match recovery::decode_decisions(&decisions) {
                    Ok(decisions) => {
                        s.resolve(&decisions);
                        Body::Done { flag: true }
                    }
                    Err(e) => error_reply(codes::BAD_REQUEST, e.to_string()),
                }
            }
            Body::ConfigRequest => Body::ConfigReply {
                json: String::from_utf8_lossy(&s.config().to_json()).into_owned(),
            },
            Body::StatusRequest => Body::StatusReply {
                node_id: s.id,
                config_seq: s.seq(),
                role: if s.is_cm() { "cm".into() } else { "member".into() },
                clock_enabled: s.clock.is_enabled(),
                metrics: s.metrics.snapshot(),
            },
            other => error_reply(codes::UNSUPPORTED, format!("{} is not served", other.name())),
        }
    }

    // One-way messages: `Truncate` applies (or drops) backed-up parts, `CommitPrimary` installs
    // a locked part, `OatReport` feeds the CM's OAT, and `LeaseAck`, the lease handshake's
    // third leg, renews the member's lease at the CM (from its request's arrival). Anything
    // else is dropped.
    fn one_way(&self, from: u64, body: Body) {
        let s = &self.shared;
        if s.is_fenced(from) {
            return;
        }
        match body {
            Body::Truncate { truncate, discard } => s.truncate_all(from, &truncate, &discard),
            Body::CommitPrimary { tx, region, wts } => {
                let key = TxKey { coordinator: from, tx, region };
                let installed = match s.not_primary(region) {
                    Some(_) => Err(ordo::Error::Config(format!(
                        "COMMIT-PRIMARY for region {region}, whose primary is not node {}",
                        s.id
                    ))),
                    None => s.db.serve_commit_primary(key, ordo_clock::Timestamp::from_nanos(wts)),
                };
                if let Err(e) = installed {
                    tracing::error!(node = s.id, ?key, error = %e, "COMMIT-PRIMARY failed");
                }
            }
            Body::OatReport { oat } if s.is_cm() => s.report_oat(from, oat),
            Body::LeaseAck { config_seq } if s.is_cm() => {
                let asked = s.lease_asks.lock().unwrap_or_else(|p| p.into_inner()).remove(&from);
                if let Some((seq, at)) = asked.filter(|(seq, _)| *seq == config_seq)
                    && seq == s.seq()
                {
                    s.leases().renewed(from, at);
                }
            }
            _ => {}
        }
    }
}

/// The engine's refusal as a reply.
fn declined(e: &ordo::Error) -> Body {
    let r = Refusal::of(e);
    Body::Declined { code: r.code, addr: r.addr, a: r.a, b: r.b, message: e.to_string() }
}

/// `Done` or the refusal.
fn done(r: Result<(), ordo::Error>) -> Body {
    match r {
        Ok(()) => Body::Done { flag: true },
        Err(e) => declined(&e),
    }
}

/// How long a client's OAT report counts: a client silent for longer is gone, and stops
/// holding the cluster's GC back.
pub const CLIENT_OAT_TTL: Duration = Duration::from_secs(2);

/// How far the cluster's GC bound stays behind the CM's clock at least (see
/// `NodeShared::cluster_oat`): more than any coordinator's clock uncertainty.
pub const GC_BOUND_LAG: Duration = Duration::from_millis(100);

fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl NodeShared {
    /// Notes `from`'s oldest active timestamp (CM; FaRMv2 Fig. 9).
    fn report_oat(&self, from: u64, oat: u64) {
        let mut oats = self.oats.lock().unwrap_or_else(|p| p.into_inner());
        oats.insert(from, (oat, Instant::now()));
    }

    /// The cluster's oldest active timestamp as this CM knows it: the minimum of its own and of
    /// what every member (zero until it reported) and every live client last reported, held at
    /// least [`GC_BOUND_LAG`] behind the CM's clock. It bounds every member's GC safe point, the
    /// CM's own included.
    ///
    /// The lag covers what a report cannot: a transaction that begins after its coordinator's
    /// last report (or at a client that has not reported yet) reads at `now().lo` of its own
    /// clock, which may be behind the CM's by that clock's uncertainty. Any coordinator whose
    /// uncertainty stays below the lag reads above the bound, so no fresh transaction meets
    /// the GC_local guard.
    fn cluster_oat(&self) -> ordo_clock::Timestamp {
        // Never waits on the clock: the lease thread calls this, also while the CM's clock is
        // disabled (`fence_cm`). Without a reading the bound is 0 (no GC), which is safe.
        let oat = match self.clock.try_now(Duration::ZERO) {
            Ok(now) => self
                .db
                .oldest_active_at(now.lo())
                .as_nanos()
                .min(now.lo().as_nanos().saturating_sub(duration_nanos(GC_BOUND_LAG))),
            Err(_) => 0,
        };
        let mut oat = oat;
        let config = self.config();
        let mut oats = self.oats.lock().unwrap_or_else(|p| p.into_inner());
        for m in config.non_cms() {
            oat = oat.min(oats.get(&m.id).map_or(0, |(o, _)| *o));
        }
        let mut gone = Vec::new();
        oats.retain(|id, (_, at)| {
            let keep = config.member(*id).is_some() || at.elapsed() < CLIENT_OAT_TTL;
            // Client ids have bit 63 set; a member that was removed is not a client gone.
            if !keep && *id >> 63 == 1 {
                gone.push(*id);
            }
            keep
        });
        if !gone.is_empty() {
            tracing::warn!(node = self.id, clients = ?gone, "clients silent: presumed dead");
            self.clients_gone.lock().unwrap_or_else(|p| p.into_inner()).extend(gone);
        }
        for (id, (o, _)) in oats.iter() {
            if config.member(*id).is_none() {
                oat = oat.min(*o);
            }
        }
        drop(oats);
        let oat = ordo_clock::Timestamp::from_nanos(oat);
        self.db.set_gc_bound(oat);
        oat
    }

    /// `None` if `from` is the CM of configuration `seq`, this node's; else the error reply.
    fn not_from_cm(&self, from: u64, seq: u64, step: &str) -> Option<Body> {
        let config = self.config();
        (config.seq != seq || config.cm != from).then(|| {
            error_reply(
                codes::WRONG_CONFIG,
                format!(
                    "{step} {seq} from {from}; this node is at {} with CM {}",
                    config.seq, config.cm
                ),
            )
        })
    }

    /// Whether `from` is a fenced client.
    fn is_fenced(&self, from: u64) -> bool {
        self.any_fenced.load(Ordering::Acquire)
            && self.fenced.lock().unwrap_or_else(|p| p.into_inner()).contains(&from)
    }

    /// Serves nothing more from `clients` (recovery decides their transactions).
    fn fence(&self, clients: impl Iterator<Item = u64>) {
        let mut fenced = self.fenced.lock().unwrap_or_else(|p| p.into_inner());
        fenced.extend(clients);
        self.any_fenced.store(!fenced.is_empty(), Ordering::Release);
    }

    /// Carries out recovery's decisions here, then serves the promoted regions they cleared.
    fn resolve(&self, decisions: &[ordo::remote::Decision]) -> ordo::remote::Resolved {
        let done = self.db.serve_resolve(decisions);
        for (key, e) in &done.errors {
            tracing::error!(node = self.id, ?key, error = %e, "recovery could not resolve a part");
        }
        if done.installed + done.released + done.applied + done.dropped > 0 {
            tracing::warn!(
                node = self.id,
                installed = done.installed,
                released = done.released,
                applied = done.applied,
                dropped = done.dropped,
                "recovered transactions"
            );
        }
        self.ungate();
        done
    }

    /// `None` if this node is `region`'s primary, else the `NOT_OWNER` reply.
    /// Whether the CM may grant `from` a lease now: once a majority of its configuration
    /// (itself and `from` included) has asked within half a lease since it became CM, only
    /// while such a majority has. A CM replaced while alive, still hearing a removed member,
    /// so stops renewing that member's lease — the new CM's lease wait assumes it runs out
    /// (found by the simulation: `crate::sim`'s `quorum_grants`). A two-member configuration
    /// never refuses: the requester and the CM are its majority.
    fn grant_has_quorum(&self, from: NodeId, now: Instant) -> bool {
        let config = self.config();
        let window = self.file.lease() / 2;
        let mut asked = self.lease_asked.lock().unwrap_or_else(|p| p.into_inner());
        asked.insert(from, now);
        asked.retain(|id, _| config.member(*id).is_some());
        let heard = 1 + config
            .non_cms()
            .filter(|m| {
                asked.get(&m.id).is_some_and(|&at| now.saturating_duration_since(at) <= window)
            })
            .count();
        if heard * 2 > config.members.len() {
            self.quorum_seen.store(true, Ordering::Release);
            true
        } else {
            !self.quorum_seen.load(Ordering::Acquire)
        }
    }

    fn not_primary(&self, region: u16) -> Option<Body> {
        (self.placement.primary(region) != Some(self.id)).then(|| {
            error_reply(
                codes::NOT_OWNER,
                format!("node {} is not the primary of region {region}", self.id),
            )
        })
    }

    /// Applies the backed-up parts of `coordinator`'s transactions `truncate` and drops those
    /// of `discard`.
    fn truncate_all(&self, coordinator: u64, truncate: &[(u64, u16)], discard: &[(u64, u16)]) {
        for &(tx, region) in truncate {
            LocalBackup::truncate(self, TxKey { coordinator, tx, region });
        }
        for &(tx, region) in discard {
            LocalBackup::discard(self, TxKey { coordinator, tx, region });
        }
        self.ungate();
    }
}

/// A running node.
pub struct Node {
    shared: Arc<NodeShared>,
    runtime: Option<tokio::runtime::Runtime>,
    server: Option<Server>,
    local_addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    lease_thread: Option<JoinHandle<()>>,
}

impl Node {
    /// Starts a node: reads the cluster configuration (etcd: retrying with back-off up to the
    /// file's `etcd_start_timeout_ms`), checks that this node is a member, binds its port, starts
    /// the lease thread, and returns once serving.
    pub fn start(
        file: NodeConfig,
        source: ConfigSource,
        local: LocalClock,
    ) -> Result<Node, NodeError> {
        let engine = file.engine();
        Self::start_with(file, source, local, engine)
    }

    /// [`Node::start`] with an engine configuration of the caller's (tests: isolation options,
    /// small regions).
    pub fn start_with(
        file: NodeConfig,
        source: ConfigSource,
        local: LocalClock,
        engine: ordo::Config,
    ) -> Result<Node, NodeError> {
        let secret = Secret::from_file(&file.secret_file).map_err(|e| ConfigError::Secret {
            path: file.secret_file.clone(),
            reason: e.to_string(),
        })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(file.network_threads.max(1))
            .thread_name("ordo-net")
            .enable_all()
            .build()
            .map_err(|source| NodeError::Io {
                what: "starting the network runtime".into(),
                source,
            })?;

        let (config, store) = runtime.block_on(initial_config(&file, &source))?;
        config.require_member(file.id)?;
        let options = SyncOptions {
            drift_bound_ppm: file.drift_bound_ppm,
            drift_alarm_ppm: file.drift_alarm_ppm,
            ..SyncOptions::default()
        };
        let clock = if config.cm == file.id {
            SyncedClock::master(local, options)
        } else {
            SyncedClock::follower(local, options)
        };
        let metrics = Arc::new(NodeMetrics::default());
        metrics.config_seq.store(config.seq, Ordering::Relaxed);
        metrics.etcd_connected.store(u64::from(store.is_some()), Ordering::Relaxed);
        let mut leases = LeaseTable::new(file.lease());
        // A grace period before the first renewal is due: peers start, connect and
        // authenticate first.
        let now = Instant::now() + STARTUP_GRACE;
        if config.cm == file.id {
            for m in config.non_cms() {
                leases.expect(m.id, now);
            }
        } else {
            leases.expect(config.cm, now);
        }
        let clock = Arc::new(clock);
        let limits = Limits::default();
        let placement = Arc::new(Placement::new(&config));
        let owners_pool = Arc::new(PeerPool::new(file.id, &file.cluster, secret.clone(), limits));
        for m in &config.members {
            if let Ok(addr) = m.addr.parse::<SocketAddr>() {
                owners_pool.set_addr(m.id, addr);
            }
        }
        let owners = RemoteOwners::new(
            file.id,
            placement.clone(),
            owners_pool.clone(),
            runtime.handle().clone(),
            limits.call_timeout,
        );
        let home = placement.primaries_of(file.id);
        let db = ordo::Ordo::with_remote(engine, clock.clone(), owners.clone(), home)
            .map_err(|e| NodeError::Engine(e.to_string()))?;
        let shared = Arc::new(NodeShared {
            id: file.id,
            cluster: file.cluster.clone(),
            file: file.clone(),
            db,
            placement,
            owners: owners.clone(),
            owners_pool,
            oats: Mutex::new(std::collections::HashMap::new()),
            clock,
            config: RwLock::new(config),
            metrics,
            leases: Mutex::new(leases),
            stopping: AtomicBool::new(false),
            pending: Mutex::new(None),
            store: store.clone(),
            net: runtime.handle().clone(),
            secret: secret.clone(),
            limits,
            reconfiguring: AtomicBool::new(false),
            last_failover: Mutex::new(None),
            last_attempt: Mutex::new(None),
            gated: Mutex::new(std::collections::BTreeSet::new()),
            any_gated: AtomicBool::new(false),
            copies_due: Mutex::new(Vec::new()),
            copies_done: Mutex::new(Vec::new()),
            fenced: Mutex::new(std::collections::HashSet::new()),
            any_fenced: AtomicBool::new(false),
            clients_gone: Mutex::new(Vec::new()),
            cm_fenced: AtomicBool::new(false),
            cm_change_acked: Mutex::new(None),
            lease_asks: Mutex::new(std::collections::HashMap::new()),
            lease_asked: Mutex::new(std::collections::HashMap::new()),
            quorum_seen: AtomicBool::new(false),
            removed_at: Mutex::new(None),
        });
        let weak: std::sync::Weak<dyn LocalBackup> = Arc::downgrade(&shared) as _;
        owners.set_local(weak);

        let handler = Arc::new(NodeHandler { shared: shared.clone() });
        let listen: SocketAddr = file.listen.parse().map_err(|_| ConfigError::Field {
            path: "node configuration".into(),
            field: "listen",
            reason: format!("{:?} is not ip:port", file.listen),
        })?;
        let server = runtime.block_on(Server::bind(
            listen,
            file.id,
            &file.cluster,
            secret.clone(),
            limits,
            handler,
        ))?;
        let local_addr = server.local_addr();

        let metrics_addr = match &file.metrics_listen {
            None => None,
            Some(addr) => {
                let listener = runtime
                    .block_on(tokio::net::TcpListener::bind(addr.as_str()))
                    .map_err(|source| NodeError::Io {
                        what: format!("binding metrics port {addr}"),
                        source,
                    })?;
                let bound = listener.local_addr().ok();
                runtime.spawn(crate::metrics::serve_http(
                    listener,
                    file.id,
                    shared.metrics.clone(),
                ));
                bound
            }
        };

        if let Some(store) = store {
            runtime.spawn(watch_config(shared.clone(), store));
        }

        let lease_shared = shared.clone();
        let lease_thread = std::thread::Builder::new()
            .name("ordo-lease".into())
            .spawn(move || lease_thread(lease_shared, secret, limits))
            .map_err(|source| NodeError::Io { what: "starting the lease thread".into(), source })?;
        tracing::info!(node = file.id, %local_addr, cm = shared.config().cm, "node serving");
        Ok(Node {
            shared,
            runtime: Some(runtime),
            server: Some(server),
            local_addr,
            metrics_addr,
            lease_thread: Some(lease_thread),
        })
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.shared.id
    }

    /// The address peers reach it at.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The metrics endpoint, when configured.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The node's synchronised clock.
    pub fn clock(&self) -> &Arc<NodeClock> {
        &self.shared.clock
    }

    /// The node's engine (the objects it holds). Its transactions wait while the clock is
    /// disabled (before the first sync).
    pub fn db(&self) -> &ordo::Ordo<Arc<NodeClock>> {
        &self.shared.db
    }

    /// The remote participant the node's engine uses (round trips, pending truncations).
    pub fn owners(&self) -> &Arc<RemoteOwners> {
        &self.shared.owners
    }

    /// Where every region's copies are.
    pub fn placement(&self) -> &Arc<Placement> {
        &self.shared.placement
    }

    /// The node's metrics.
    pub fn metrics(&self) -> &Arc<NodeMetrics> {
        &self.shared.metrics
    }

    /// The configuration in force.
    pub fn config(&self) -> ClusterConfig {
        self.shared.config()
    }

    /// Peers whose lease this node currently reports expired.
    pub fn suspects(&self) -> Vec<NodeId> {
        self.shared.leases().suspects()
    }

    /// The last reconfiguration this node initiated, if any.
    /// Regions this node was promoted to primary of and does not serve yet (records of them
    /// it held as a backup are still being resolved).
    pub fn gated_regions(&self) -> Vec<u16> {
        self.shared.gated()
    }

    /// The copies of this node's regions to new backups (re-replication) that ended.
    pub fn copies(&self) -> Vec<CopyOutcome> {
        self.shared.copies_done.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The last reconfiguration this node initiated.
    pub fn last_failover(&self) -> Option<FailoverReport> {
        self.shared.last_failover.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The lease table (for tests and the status table).
    pub fn leases(&self) -> LeaseTable {
        self.shared.leases().clone()
    }

    /// Stops the lease thread and the server; in-flight requests are dropped.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.shared.stopping.store(true, Ordering::Release);
        if let Some(t) = self.lease_thread.take() {
            let _ = t.join();
        }
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_millis(500));
        }
        tracing::info!(node = self.shared.id, cluster = %self.shared.cluster, "node stopped");
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn initial_config(
    file: &NodeConfig,
    source: &ConfigSource,
) -> Result<(ClusterConfig, Option<ConfigStore>), NodeError> {
    match source {
        ConfigSource::Static(config) => {
            config.validate()?;
            Ok((config.clone(), None))
        }
        ConfigSource::Etcd => {
            let start_timeout = Duration::from_millis(file.etcd_start_timeout_ms);
            let store = ConfigStore::connect(
                &file.etcd,
                &file.cluster,
                Duration::from_secs(2),
                start_timeout,
            )
            .await?;
            let started = Instant::now();
            let mut backoff = Backoff::default();
            loop {
                match store.get().await {
                    Ok(Some(config)) => return Ok((config, Some(store))),
                    Ok(None) if started.elapsed() >= start_timeout => {
                        return Err(NodeError::NoConfiguration {
                            cluster: file.cluster.clone(),
                            waited_ms: u64::try_from(started.elapsed().as_millis())
                                .unwrap_or(u64::MAX),
                        });
                    }
                    Ok(None) => {
                        tracing::info!(cluster = %file.cluster, "waiting for a cluster configuration in etcd")
                    }
                    Err(e @ EtcdError::Config(_)) => return Err(e.into()),
                    Err(e) if started.elapsed() >= start_timeout => return Err(e.into()),
                    Err(e) => {
                        tracing::warn!(error = %e, "reading the cluster configuration; retrying")
                    }
                }
                tokio::time::sleep(backoff.step()).await;
            }
        }
    }
}

/// Follows the configuration in etcd; reports etcd lost and found.
async fn watch_config(shared: Arc<NodeShared>, store: ConfigStore) {
    let mut backoff = Backoff::default();
    let mut watch: Option<etcd_client::WatchStream> = None;
    let mut poll = tokio::time::interval(Duration::from_secs(1));
    let mut connected = true;
    loop {
        if shared.stopping.load(Ordering::Acquire) {
            return;
        }
        let set_connected = |up: bool, connected: &mut bool, why: Option<&EtcdError>| {
            if up != *connected {
                *connected = up;
                if up {
                    tracing::info!(node = shared.id, "etcd reachable again");
                } else {
                    tracing::warn!(node = shared.id, seq = shared.seq(), error = ?why.map(ToString::to_string),
                        "etcd lost; serving under the current configuration");
                }
            }
            shared.metrics.etcd_connected.store(u64::from(up), Ordering::Relaxed);
        };
        if watch.is_none() {
            match store.watch().await {
                Ok(w) => watch = Some(w),
                Err(e) => {
                    set_connected(false, &mut connected, Some(&e));
                    tokio::time::sleep(backoff.step()).await;
                    continue;
                }
            }
        }
        let Some(stream) = watch.as_mut() else { continue };
        tokio::select! {
            message = stream.message() => match message {
                Ok(Some(resp)) => {
                    for event in resp.events() {
                        if let Some(kv) = event.kv() {
                            match ClusterConfig::from_json(kv.value()) {
                                Ok(config) => { shared.adopt_watched(config); }
                                Err(e) => tracing::warn!(error = %e, "ignoring an invalid configuration in etcd"),
                            }
                        }
                    }
                }
                Ok(None) | Err(_) => {
                    watch = None;
                }
            },
            _ = poll.tick() => match store.get().await {
                Ok(Some(config)) => {
                    set_connected(true, &mut connected, None);
                    backoff = Backoff::default();
                    shared.adopt_watched(config);
                }
                Ok(None) => set_connected(true, &mut connected, None),
                Err(e) => {
                    set_connected(false, &mut connected, Some(&e));
                    watch = None;
                }
            },
        }
    }
}

/// The dedicated lease and clock-sync thread (module docs).
fn lease_thread(shared: Arc<NodeShared>, secret: Secret, limits: Limits) {
    // FaRM runs leases and clock sync on a high-priority thread: a stalled renewal is a false
    // suspicion and a late sync reply widens the clock. Raising this thread's priority needs
    // CAP_SYS_NICE; without it the thread runs at normal priority (reported once).
    if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), LEASE_NICE)
    {
        tracing::info!(node = shared.id, error = %e, "the lease thread keeps normal priority");
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the lease thread's runtime");
            return;
        }
    };
    runtime.block_on(lease_loop(shared, secret, limits));
}

async fn lease_loop(shared: Arc<NodeShared>, secret: Secret, limits: Limits) {
    let period = shared.file.lease();
    let tick = (period / 4).max(Duration::from_micros(100));
    let mut cm_peer: Option<Peer> = None;
    let mut backoff = Backoff::default();
    let mut next_connect = Instant::now();
    let mut next_sync = Instant::now();
    let mut next_renew = Instant::now();
    let mut next_check = Instant::now();
    let mut last_cm = shared.config().cm;
    // Renewals and syncs are awaited in this loop, before its lease checks and fences: a CM
    // that stops answering must not hold them back for more than half a period.
    let call_timeout = (period / 2).max(Duration::from_millis(2));
    while !shared.stopping.load(Ordering::Acquire) {
        let config = shared.config();
        let is_cm = shared.is_cm();
        let followers = config.members.len().saturating_sub(1).max(1) as f64;
        let sync_every =
            Duration::from_secs_f64(followers / f64::from(shared.file.sync_rate_per_s.max(1)));

        let mut wake = next_check;
        if !is_cm {
            wake = wake.min(next_sync).min(next_renew);
        }
        let now = Instant::now();
        if wake > now {
            let wait = wake - now;
            if wait < Duration::from_millis(2) {
                // tokio's timers tick in milliseconds, too coarse for sync rates of thousands
                // per second. This thread runs nothing else while it waits (the connection's
                // tasks have no work between calls), so a short blocking sleep is harmless.
                std::thread::sleep(wait);
            } else {
                // Bounded so a shutdown is noticed promptly.
                tokio::time::sleep(wait.min(Duration::from_millis(50))).await;
            }
            continue;
        }

        if cm_peer.as_ref().is_some_and(|p| is_cm || p.remote_id() != config.cm) {
            // A new CM (failover): renew and sync with it from now on.
            cm_peer = None;
        }
        if config.cm != last_cm {
            // Connect to a new CM at once, not after the back-off of failed attempts to reach
            // the old one: this node's clock stays disabled until it syncs with the new CM.
            last_cm = config.cm;
            next_connect = Instant::now();
            backoff = Backoff::default();
        }
        if !is_cm && cm_peer.as_ref().is_none_or(Peer::is_closed) && Instant::now() >= next_connect
        {
            cm_peer = None;
            let cm_addr = config.member(config.cm).and_then(|m| m.addr.parse::<SocketAddr>().ok());
            if let Some(addr) = cm_addr {
                match Peer::connect(addr, shared.id, &shared.cluster, secret.clone(), limits).await
                {
                    Ok(peer) => {
                        backoff = Backoff::default();
                        cm_peer = Some(peer);
                    }
                    Err(e) => {
                        // A refused handshake (wrong secret or cluster) is worth a warning.
                        if matches!(e, TransportError::Refused { .. } | TransportError::Auth { .. })
                        {
                            tracing::warn!(node = shared.id, error = %e, "the CM refused this node");
                        } else {
                            tracing::debug!(error = %e, "connecting to the CM");
                        }
                        next_connect = Instant::now() + backoff.step();
                    }
                }
            }
        }

        if let (false, Some(peer)) = (is_cm, cm_peer.clone()) {
            let now = Instant::now();
            if now >= next_sync {
                next_sync = now + sync_every;
                sync_once(&shared, &peer, call_timeout).await;
            }
            let now = Instant::now();
            // A member that suspects the CM (failover on) renews no more with it: its renewals
            // would end the CM's fence while the member is removing it.
            let suspected =
                shared.file.failover && shared.leases().get(config.cm).is_some_and(|l| l.expired);
            // Nor does a member prepared for a new CM (`cm_change_acked`): the old CM's quorum
            // of lease requests (`grant_has_quorum`) counts only members that have not moved on.
            let prepared = shared
                .cm_change_acked
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_some_and(|at| at.elapsed() < shared.file.lease() * PREPARED_MAX);
            if now >= next_renew && !suspected && !prepared {
                next_renew = now + tick;
                renew_once(&shared, &peer, config.seq, config.cm, call_timeout).await;
            }
        } else if !is_cm {
            let now = Instant::now();
            next_sync = next_sync.max(now + tick);
            next_renew = next_renew.max(now + tick);
        }

        let now = Instant::now();
        if now >= next_check {
            next_check = now + tick;
            check_leases(&shared, now);
            sample_clock(&shared);
            sample_engine(&shared);
            if is_cm {
                // The CM's own GC bound (members get theirs with their lease grants).
                shared.cluster_oat();
            }
        }
    }
}

/// One clock synchronisation of `clock` with the CM on `peer` (FaRMv2 Fig. 2).
pub(crate) async fn sync_clock(
    clock: &NodeClock,
    peer: &Peer,
    timeout: Duration,
) -> Result<ordo_clock::SyncOutcome, String> {
    let start = clock.begin_sync();
    match peer.call_timeout(Body::ClockSyncRequest, timeout).await {
        Ok(Body::ClockSyncReply { master_time: Some((lo, hi)) }) => {
            let cm = Interval::new(
                ordo_clock::Timestamp::from_nanos(lo),
                ordo_clock::Timestamp::from_nanos(hi),
            );
            clock.finish_sync(start, cm).map_err(|e| format!("sync rejected: {e}"))
        }
        Ok(other) => Err(format!("refused: {}", other.name())),
        Err(e) => Err(e.to_string()),
    }
}

async fn sync_once(shared: &NodeShared, peer: &Peer, timeout: Duration) {
    {
        let mut acked = shared.cm_change_acked.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = *acked {
            if at.elapsed() < shared.file.lease() * PREPARED_MAX {
                return; // prepared for a new CM: no time from the old one (`cm_change_acked`)
            }
            *acked = None;
        }
    }
    match sync_clock(&shared.clock, peer, timeout).await {
        Ok(outcome) => {
            shared.metrics.sample_sync(outcome.rtt_nanos);
            if outcome.enabled_now {
                tracing::info!(
                    node = shared.id,
                    rtt_ns = outcome.rtt_nanos,
                    "clock enabled by the first sync"
                );
            }
        }
        Err(e) => {
            shared.metrics.sync_failures.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(node = shared.id, error = %e, "clock sync failed");
        }
    }
}

async fn renew_once(shared: &NodeShared, peer: &Peer, seq: u64, cm: NodeId, timeout: Duration) {
    let sent = Instant::now();
    let lease_ms = shared.file.lease_ms;
    // Never waits on a disabled clock (the lease must go on); 0 holds the cluster's GC back.
    let oat = match shared.clock.try_now(Duration::ZERO) {
        Ok(now) => shared.db.oldest_active_at(now.lo()).as_nanos(),
        Err(_) => 0,
    };
    match peer.call_timeout(Body::LeaseRequest { config_seq: seq, lease_ms, oat }, timeout).await {
        Ok(Body::LeaseGrant { config_seq, gc, .. }) if config_seq == seq => {
            // FaRMv2 Fig. 9: the CM's view of the cluster's OAT bounds this node's GC.
            shared.db.set_gc_bound(ordo_clock::Timestamp::from_nanos(gc));
            // The CM's lease here counts from when the request was sent (conservative).
            shared.leases().renewed(cm, sent);
            shared.metrics.lease_renewals.fetch_add(1, Ordering::Relaxed);
            let _ = peer.send(Body::LeaseAck { config_seq }).await;
        }
        Ok(other) => tracing::debug!(reply = other.name(), "lease renewal refused"),
        Err(e) => tracing::debug!(error = %e, "lease renewal failed"),
    }
}

fn check_leases(shared: &Arc<NodeShared>, now: Instant) {
    shared.ungate();
    start_copies(shared);
    recover_clients(shared);
    let (expired, suspects) = {
        let mut leases = shared.leases();
        let expired = leases.check(now);
        (expired, leases.suspects().len())
    };
    let cm = shared.config().cm;
    for e in &expired {
        tracing::warn!(
            node = shared.id,
            peer = e.peer,
            silent_ms = e.silent_for.as_millis() as u64,
            "lease expired: peer suspected (failover acts on this in a later step)"
        );
        if e.peer == cm && !shared.is_cm() {
            // A member that lost its lease with the CM hands out no more time (FaRMv2 §4.3):
            // a new CM waits one lease period for exactly this before it fast-forwards. The
            // next successful sync with the CM enables the clock again.
            let ff = shared.clock.disable_for_reconfiguration();
            tracing::warn!(
                node = shared.id,
                cm,
                ff = ff.as_nanos(),
                "clock disabled: the lease with the CM expired"
            );
        }
    }
    fence_cm(shared, now);
    fence_member(shared, now);
    shared.metrics.lease_expiries.fetch_add(expired.len() as u64, Ordering::Relaxed);
    shared.metrics.suspects.store(suspects as u64, Ordering::Relaxed);
    if shared.file.failover && shared.store.is_some() {
        let suspects = shared.leases().suspects();
        // The CM acts on suspected members; a member acts on a suspected CM only.
        let removed: std::collections::BTreeSet<NodeId> =
            suspects.into_iter().filter(|&p| shared.is_cm() || p == cm).collect();
        let recently = shared
            .last_attempt
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|(tried, at)| *tried == removed && at.elapsed() < FAILOVER_RETRY);
        if !removed.is_empty() && !recently && !shared.reconfiguring.swap(true, Ordering::AcqRel) {
            let shared2 = shared.clone();
            let spawned =
                std::thread::Builder::new().name("ordo-failover".into()).spawn(move || {
                    reconfigure(&shared2, removed.clone());
                    *shared2.last_attempt.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some((removed, Instant::now()));
                    shared2.reconfiguring.store(false, Ordering::Release);
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start the failover thread");
                shared.reconfiguring.store(false, Ordering::Release);
            }
        }
    }
}

/// The CM's side of the leases (failover on): a CM that has not heard a lease request from
/// some member for half a lease period disables its clock, and enables it again — at its own
/// time, through FF — once every member renews again (or the failover it starts removed the
/// silent one). A member suspects the CM only a full period after its last renewal, so a CM
/// cut off from any member stops handing out time before that member can start a failover
/// that makes another node CM: no lease wait is needed when only the CM is removed.
fn fence_cm(shared: &NodeShared, now: Instant) {
    if !shared.file.failover || !shared.is_cm() {
        return;
    }
    let config = shared.config();
    let limit = shared.file.lease() / 2;
    let silent: Vec<NodeId> = {
        // Silence counts from the last renewal or, for a member that never renewed since this
        // node became CM, from then: the grace that delays suspicion does not delay the fence.
        let leases = shared.leases();
        config
            .non_cms()
            .filter(|m| leases.silent_for(m.id, now).is_some_and(|d| d > limit))
            .map(|m| m.id)
            .collect()
    };
    let fenced = shared.cm_fenced.load(Ordering::Acquire);
    if !silent.is_empty() && !fenced {
        let ff = shared.clock.disable_for_reconfiguration();
        shared.cm_fenced.store(true, Ordering::Release);
        tracing::warn!(node = shared.id, silent = ?silent, ff = ff.as_nanos(),
            "CM clock disabled: members silent for half a lease");
    } else if silent.is_empty() && fenced && !shared.reconfiguring.load(Ordering::Acquire) {
        let ff = shared.clock.enable_master_at(shared.clock.disable_for_reconfiguration());
        shared.cm_fenced.store(false, Ordering::Release);
        tracing::warn!(node = shared.id, ff = ff.as_nanos(), "CM clock enabled again");
    }
}

/// A member's side (failover on): its clock is disabled once it has not renewed its lease with
/// the CM for a full period — counted from its last renewal or, if it never renewed with this
/// CM, from when it adopted it. The grace a new CM gets before it is *suspected* does not delay
/// this: a member that adopted a CM which died before granting it a lease stops handing out
/// time within a period, as the next failover's lease wait assumes.
fn fence_member(shared: &NodeShared, now: Instant) {
    if !shared.file.failover || shared.is_cm() || !shared.clock.is_enabled() {
        return;
    }
    let cm = shared.config().cm;
    let silent = shared.leases().silent_for(cm, now);
    if silent.is_some_and(|d| d > shared.file.lease()) {
        let ff = shared.clock.disable_for_reconfiguration();
        tracing::warn!(node = shared.id, cm, silent = ?silent, ff = ff.as_nanos(),
            "clock disabled: no lease renewed with the CM for a period");
    }
}

/// The reconfiguration round's messages over TCP, one connection per member.
struct NetMembers<'a> {
    shared: &'a NodeShared,
    next: ClusterConfig,
    peers: Mutex<std::collections::HashMap<NodeId, Peer>>,
}

impl NetMembers<'_> {
    fn call(&self, member: NodeId, step: &'static str, body: Body) -> Result<Body, RoundError> {
        let s = self.shared;
        let fail = |reason: String| RoundError { seq: self.next.seq, member, step, reason };
        let timeout = s.file.lease().max(Duration::from_millis(200));
        let addr = self
            .next
            .member(member)
            .and_then(|m| m.addr.parse::<SocketAddr>().ok())
            .ok_or_else(|| fail("no address".into()))?;
        let cached = self.peers.lock().unwrap_or_else(|p| p.into_inner()).get(&member).cloned();
        let peer = match cached.filter(|p| !p.is_closed()) {
            Some(peer) => peer,
            None => {
                let peer = s
                    .net
                    .block_on(async {
                        tokio::time::timeout(
                            timeout,
                            Peer::connect(addr, s.id, &s.cluster, s.secret.clone(), s.limits),
                        )
                        .await
                    })
                    .map_err(|_| fail("connect timed out".into()))?
                    .map_err(|e| fail(e.to_string()))?;
                self.peers.lock().unwrap_or_else(|p| p.into_inner()).insert(member, peer.clone());
                peer
            }
        };
        match s.net.block_on(peer.call_timeout(body, timeout)) {
            Ok(Body::Error { code, message }) => Err(fail(format!("error {code}: {message}"))),
            Ok(reply) => Ok(reply),
            Err(e) => Err(fail(e.to_string())),
        }
    }
}

impl RoundMembers for NetMembers<'_> {
    fn new_config(
        &self,
        member: NodeId,
        next: &ClusterConfig,
        _cm_changed: bool,
    ) -> Result<ordo_clock::Timestamp, RoundError> {
        let json = String::from_utf8_lossy(&next.to_json()).into_owned();
        match self.call(member, "NEW-CONFIG", Body::NewConfig { seq: next.seq, json })? {
            Body::NewConfigAck { seq, ff } if seq == next.seq => {
                Ok(ordo_clock::Timestamp::from_nanos(ff))
            }
            other => Err(RoundError {
                seq: next.seq,
                member,
                step: "NEW-CONFIG",
                reason: format!("answered {}", other.name()),
            }),
        }
    }

    fn config_commit(&self, member: NodeId, seq: u64) -> Result<(), RoundError> {
        self.call(member, "CONFIG-COMMIT", Body::ConfigCommit { seq }).map(drop)
    }

    fn advance(
        &self,
        member: NodeId,
        seq: u64,
        ff: ordo_clock::Timestamp,
    ) -> Result<(), RoundError> {
        self.call(member, "ADVANCE", Body::Advance { seq, ff: ff.as_nanos() }).map(drop)
    }

    fn wait_lease(&self) {
        // A removed member notices its expired lease within a period and a check interval
        // (`lease`); half a period more covers the scheduling of its lease thread.
        std::thread::sleep(self.shared.file.lease() * 3 / 2);
    }
}

/// Failover on this node (module `failover`): plan, swap in etcd, run the round, adopt, then
/// recover the removed members' transactions (module `recovery`). A member that fails the
/// round is removed too, in a new attempt (at most three).
fn reconfigure(shared: &NodeShared, mut removed: std::collections::BTreeSet<NodeId>) {
    let Some(store) = shared.store.as_ref() else { return };
    let started = Instant::now();
    let before = shared.config();
    // A failed round that changed the CM leaves this node CM in the swapped configuration with
    // its clock disabled: the next attempt must still fast-forward and enable it, and wait a
    // lease, since the member it removes now may still be serving.
    let mut cm_change_pending = false;
    for _attempt in 0..3 {
        let current = shared.config();
        let mut plan = match failover::plan(&current, &removed, shared.id) {
            Ok(plan) => plan,
            Err(e) => {
                tracing::error!(node = shared.id, error = %e, "cannot reconfigure");
                return;
            }
        };
        if cm_change_pending {
            plan.cm_changed = true;
            plan.lease_wait = true;
        }
        if !failover::keeps_majority(&before, &plan.next) {
            tracing::error!(
                node = shared.id,
                seq = plan.next.seq,
                before = before.seq,
                "cannot reconfigure: the retry keeps no majority of the configuration it started from"
            );
            return;
        }
        if plan.cm_changed && !plan.lease_wait {
            // A member that an earlier round removed while it was alive may still hold a lease
            // from the old CM: wait it out too (found by the simulation: `wait_after_removal`).
            let removed_at = *shared.removed_at.lock().unwrap_or_else(|p| p.into_inner());
            if removed_at.is_some_and(|at| at.elapsed() < shared.file.lease() * 2) {
                plan.lease_wait = true;
            }
        }
        if let Err(e) = shared.net.block_on(store.swap(current.seq, &plan.next)) {
            // Another member won the race (or etcd is unreachable): its NEW-CONFIG follows.
            tracing::warn!(node = shared.id, error = %e, "configuration swap refused");
            return;
        }
        tracing::warn!(node = shared.id, seq = plan.next.seq, removed = ?removed,
            cm_changed = plan.cm_changed, "reconfiguring");
        let members = NetMembers {
            shared,
            next: plan.next.clone(),
            peers: Mutex::new(std::collections::HashMap::new()),
        };
        let round_started = Instant::now();
        if plan.cm_changed {
            // As a member that acknowledged NEW-CONFIG: no resynchronising with the old CM
            // while this round runs (`cm_change_acked`).
            *shared.cm_change_acked.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(Instant::now());
        }
        match failover::run_round(
            shared.id,
            &shared.clock,
            &plan,
            &members,
            RoundShortcuts::default(),
        ) {
            Ok(outcome) => {
                let clock_disabled =
                    if plan.cm_changed { round_started.elapsed() } else { Duration::ZERO };
                shared.adopt(plan.next.clone());
                tracing::warn!(node = shared.id, seq = plan.next.seq, ff = ?outcome.ff,
                    clock_disabled_us = clock_disabled.as_micros() as u64, "reconfigured");
                let total = started.elapsed();
                let m = &shared.metrics;
                m.failover_clock_disabled_us.store(
                    u64::try_from(clock_disabled.as_micros()).unwrap_or(u64::MAX),
                    Ordering::Relaxed,
                );
                m.failover_total_us
                    .store(u64::try_from(total.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
                m.failover_seq.store(plan.next.seq, Ordering::Relaxed);
                let recovery_started = Instant::now();
                let dead = recovery::removed(&before, &plan.next);
                let (commits, aborts) = recover(shared, &members, &before, &dead);
                *shared.last_failover.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(FailoverReport {
                        seq: plan.next.seq,
                        removed: dead,
                        cm_changed: plan.cm_changed,
                        clock_disabled,
                        total,
                        recovered_commits: commits,
                        recovered_aborts: aborts,
                        recovery: recovery_started.elapsed(),
                    });
                rereplicate(shared);
                return;
            }
            Err(e) => {
                tracing::warn!(node = shared.id, error = %e, "reconfiguration round failed");
                // The swapped configuration stands in etcd; plan again from it without the
                // member that failed.
                cm_change_pending |= plan.cm_changed;
                shared.adopt(plan.next.clone());
                removed = std::collections::BTreeSet::from([e.member]);
            }
        }
    }
}

/// On the CM: recovers the transactions of clients silent for [`CLIENT_OAT_TTL`] (module
/// `recovery`), in a thread, unless a reconfiguration is running (they wait for the next tick).
/// Every member fences such a client when queried, so its state is final when voted on.
fn recover_clients(shared: &Arc<NodeShared>) {
    if !shared.is_cm() || shared.store.is_none() || !shared.file.failover {
        return;
    }
    let gone: Vec<u64> =
        std::mem::take(&mut *shared.clients_gone.lock().unwrap_or_else(|p| p.into_inner()));
    if gone.is_empty() {
        return;
    }
    if shared.reconfiguring.swap(true, Ordering::AcqRel) {
        shared.clients_gone.lock().unwrap_or_else(|p| p.into_inner()).extend(gone);
        return;
    }
    let s = shared.clone();
    let spawned = std::thread::Builder::new().name("ordo-recover-clients".into()).spawn(move || {
        let config = s.config();
        s.fence(gone.iter().copied());
        let members = NetMembers {
            shared: &s,
            next: config.clone(),
            peers: Mutex::new(std::collections::HashMap::new()),
        };
        let (commits, aborts) = recover(&s, &members, &config, &gone);
        tracing::warn!(node = s.id, clients = ?gone, commits, aborts, "recovered dead clients' transactions");
        s.reconfiguring.store(false, Ordering::Release);
    });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start client recovery");
        shared.reconfiguring.store(false, Ordering::Release);
    }
}

/// How many times the CM tries recovery's query and decisions before leaving it to the next
/// failover (a survivor that does not answer is suspected in turn).
const RECOVERY_ATTEMPTS: usize = 3;

/// Recovery of the transactions of `dead` (module `recovery`), run by the CM after the round
/// that removed them: RECOVER-QUERY to every member (this node answers itself), the vote,
/// RECOVER-DECIDE to every member. Returns the transactions committed and aborted. Repeating
/// it is harmless: a member that carried out a decision holds evidence of it, and the vote
/// decides the same again.
fn recover(
    shared: &NodeShared,
    members: &NetMembers<'_>,
    before: &ClusterConfig,
    dead: &[NodeId],
) -> (usize, usize) {
    if dead.is_empty() {
        return (0, 0);
    }
    let seq = members.next.seq;
    let ids: Vec<NodeId> = members.next.members.iter().map(|m| m.id).collect();
    for attempt in 1..=RECOVERY_ATTEMPTS {
        let mut states = Vec::with_capacity(ids.len());
        let mut failed = None;
        for &id in &ids {
            if id == shared.id {
                states.push(shared.db.serve_recovery_state(dead));
                continue;
            }
            let body = Body::RecoverQuery { seq, coordinators: dead.to_vec() };
            let state = match members.call(id, "RECOVER-QUERY", body) {
                Ok(Body::RecoverState { records, locks, evidence }) => {
                    recovery::decode_state(&records, &locks, &evidence)
                        .map_err(|e| format!("node {id}: {e}"))
                }
                Ok(other) => Err(format!("node {id} answered {}", other.name())),
                Err(e) => Err(e.to_string()),
            };
            match state {
                Ok(state) => states.push(state),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failed {
            tracing::warn!(node = shared.id, attempt, error = %e, "recovery query failed");
            continue;
        }
        let decisions = recovery::decide(before, dead, &states);
        let commits = decisions.iter().filter(|d| d.commit.is_some()).count();
        let words = recovery::encode_decisions(&decisions);
        let mut delivered = true;
        for &id in &ids {
            if id == shared.id {
                shared.resolve(&decisions);
                continue;
            }
            let body = Body::RecoverDecide { seq, decisions: words.clone() };
            if let Err(e) = members.call(id, "RECOVER-DECIDE", body) {
                tracing::warn!(node = shared.id, attempt, error = %e, "recovery decision not delivered");
                delivered = false;
            }
        }
        tracing::warn!(node = shared.id, seq, dead = ?dead, committed = commits,
            aborted = decisions.len() - commits, "recovery decided");
        if delivered {
            return (commits, decisions.len() - commits);
        }
    }
    tracing::error!(node = shared.id, seq, "recovery incomplete; the next failover retries it");
    (0, 0)
}

/// How many times a copier sends one batch before giving up (10 ms apart).
const COPY_ATTEMPTS: usize = 100;

/// Starts a copier thread for each copy due (`crate::rereplicate`).
fn start_copies(shared: &Arc<NodeShared>) {
    let due: Vec<(u16, NodeId)> =
        std::mem::take(&mut *shared.copies_due.lock().unwrap_or_else(|p| p.into_inner()));
    for (region, backup) in due {
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("ordo-rereplicate".into())
            .spawn(move || copy_to(&s, region, backup));
        if let Err(e) = spawned {
            tracing::error!(node = shared.id, region, backup, error = %e, "cannot start a copier");
        }
    }
}

/// Copies `region` to its new backup `backup`, paced; stops when the node stops or the region
/// is no longer this node's with that backup.
fn copy_to(shared: &NodeShared, region: u16, backup: NodeId) {
    let started = Instant::now();
    let timeout = shared.file.lease().max(Duration::from_millis(500));
    // A region promoted here is copied once served: its pending records are part of it.
    while shared.gated().contains(&region) && !shared.stopping.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let stop = || {
        shared.stopping.load(Ordering::Acquire)
            || shared.placement.primary(region) != Some(shared.id)
            || !shared.placement.is_backup(region, backup)
    };
    let send = |images: Vec<crate::rereplicate::Image>| -> Result<(), String> {
        let images = crate::rereplicate::encode_images(&images);
        // The backup may adopt the configuration a little after this node: a refusal is
        // retried for a while.
        let mut last = String::new();
        for _ in 0..COPY_ATTEMPTS {
            let body = Body::Replicate { region, images: images.clone() };
            let reply = shared.net.block_on(async {
                shared.owners_pool.get(backup).await?.call_timeout(body, timeout).await
            });
            match reply {
                Ok(Body::Done { .. }) => return Ok(()),
                Ok(other) => last = format!("node {backup} answered {other:?}"),
                Err(e) => last = e.to_string(),
            }
            if stop() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(last)
    };
    let (report, error) = match crate::rereplicate::copy_region(&shared.db, region, send, stop) {
        Ok(report) => (report, None),
        Err(e) => (crate::rereplicate::CopyReport::default(), Some(e)),
    };
    let elapsed = started.elapsed();
    match &error {
        None => tracing::warn!(
            node = shared.id,
            region,
            backup,
            objects = report.objects,
            elapsed_ms = elapsed.as_millis() as u64,
            "region copied to its new backup"
        ),
        Some(e) => {
            tracing::error!(node = shared.id, region, backup, error = %e, "region copy failed")
        }
    }
    shared.copies_done.lock().unwrap_or_else(|p| p.into_inner()).push(CopyOutcome {
        region,
        backup,
        report,
        elapsed,
        error,
    });
}

/// Re-replication's configuration change (`crate::rereplicate::plan`), made by the CM after
/// a failover: swap in etcd, NEW-CONFIG / CONFIG-COMMIT, adopt. The primaries then copy.
fn rereplicate(shared: &NodeShared) {
    let Some(store) = shared.store.as_ref() else { return };
    if !shared.is_cm() {
        return;
    }
    let current = shared.config();
    let Some(plan) = crate::rereplicate::plan(&current) else { return };
    if let Err(e) = shared.net.block_on(store.swap(current.seq, &plan.next)) {
        tracing::warn!(node = shared.id, error = %e, "re-replication swap refused");
        return;
    }
    let members = NetMembers {
        shared,
        next: plan.next.clone(),
        peers: Mutex::new(std::collections::HashMap::new()),
    };
    match failover::run_round(shared.id, &shared.clock, &plan, &members, RoundShortcuts::default())
    {
        Ok(_) => {
            shared.adopt(plan.next.clone());
            tracing::warn!(node = shared.id, seq = plan.next.seq, regions = ?plan.degraded,
                "new backups for degraded regions");
        }
        Err(e) => {
            // The configuration stands in etcd; members that missed it follow the watch.
            shared.adopt(plan.next.clone());
            tracing::warn!(node = shared.id, error = %e, "re-replication round failed");
        }
    }
}

/// Samples the engine's transaction and serving counters into the metrics.
fn sample_engine(shared: &NodeShared) {
    let m = &shared.metrics;
    let stats = shared.db.stats();
    let serve = shared.db.serve_stats();
    m.txn_commits.store(stats.commits + stats.read_only_commits, Ordering::Relaxed);
    m.txn_aborts.store(stats.aborts_total(), Ordering::Relaxed);
    m.txn_round_trips.store(shared.owners.round_trips.load(Ordering::Relaxed), Ordering::Relaxed);
    m.txn_locked_parts.store(serve.locked as u64, Ordering::Relaxed);
    m.txn_backed_parts.store(serve.backed as u64, Ordering::Relaxed);
    m.txn_backup_apply_failures.store(serve.apply_errors, Ordering::Relaxed);
    if let Ok(now) = shared.clock.try_now(Duration::ZERO) {
        let lag = now.lo().nanos_since(shared.db.gc_point());
        m.gc_lag_nanos.store(lag, Ordering::Relaxed);
    }
}

fn sample_clock(shared: &NodeShared) {
    let m = &shared.metrics;
    let enabled = shared.clock.is_enabled();
    m.clock_enabled.store(u64::from(enabled), Ordering::Relaxed);
    if enabled && let Ok(i) = shared.clock.try_now(Duration::ZERO) {
        m.sample_width(i.width_nanos());
    }
    let stats = shared.clock.stats();
    m.get_ts_calls.store(stats.get_ts_waits, Ordering::Relaxed);
    m.get_ts_wait_sum_nanos.store(stats.get_ts_wait_nanos, Ordering::Relaxed);
    m.set_drift_ppm(stats.drift_estimate_ppm.unwrap_or(0));
    let before = m.drift_alarms.swap(stats.drift_alarms, Ordering::Relaxed);
    if stats.drift_alarms > before {
        // FaRMv2 §4.1: a rate this far from the CM's is reported (removing the node is
        // failover's decision).
        tracing::warn!(node = shared.id, drift_ppm = ?stats.drift_estimate_ppm,
            alarm_ppm = shared.file.drift_alarm_ppm,
            "clock drift relative to the CM exceeds the alarm threshold");
    }
}
