//! The remote participant (FaRMv2 Fig. 3 over TCP): [`RemoteOwners`] implements the engine's
//! [`Remote`] seam with calls to the nodes that hold each region, and [`Placement`] is where
//! they are (the region map of the configuration in force).
//!
//! # Messages
//! | step | message | to |
//! |---|---|---|
//! | read | `Read` → `ObjectImage` | the region's primary |
//! | revalidation | `StillNewest` → `Done` | the primary |
//! | allocation | `Reserve` → `Reserved`, `Release` | a primary (near the hint, else the coordinator's own or one by rotation) |
//! | LOCK | `Lock` → `Done` / `Declined` | the primary |
//! | VALIDATE | `Validate` → `Done` / `Declined` | the primary |
//! | COMMIT-BACKUP | `CommitBackup` → `Done` | every backup of the region, concurrently |
//! | COMMIT-PRIMARY | `CommitPrimary`, one-way (the objects stay locked until installed); the attempt's first is a call → `Done` when no other node holds a record of the attempt (see `crate::recovery`) | the primary that took the LOCK |
//! | TRUNCATE | piggybacked on the next `CommitBackup` to that backup, or a one-way `Truncate` within [`TRUNCATE_FLUSH`] (a call, acknowledged, from [`RemoteOwners::flush`]) | every backup |
//! | ABORT | `Abort` → `Done` | the primary |
//!
//! A node that is itself a backup of the region applies COMMIT-BACKUP and TRUNCATE in-process.
//! A call is made on the node's [`PolledPeer`] when no other call holds it — the calling
//! thread writes and polls for the answer itself, the lowest latency — and otherwise on the
//! runtime's connection, whose writer batches the frames of many callers; each waits at most
//! the call timeout. A transport failure is [`ordo::Error::Participant`] naming the owner (the region's
//! node), the region and the step; an engine refusal (an abort, a bad address) comes back as
//! the same error the engine gives locally.
//!
//! # Invariants
//! * An attempt's dependent messages to one node arrive in order: LOCK before its ABORT,
//!   COMMIT-BACKUP before the TRUNCATE that applies it or the discard that drops it. A
//!   TRUNCATE or ABORT is sent only after the answer to the LOCK or COMMIT-BACKUP (the node
//!   has handled it), whichever connection either takes; when that call timed out instead,
//!   its follow-up is sent on the same connection, behind it (`RemoteOwners::late`). A
//!   connection that breaks loses this order, as it loses the frames in it (Cluster III's
//!   recovery releases what they held).
//! * A TRUNCATE is sent only after the COMMIT-PRIMARY of every owner of the transaction was
//!   issued (the coordinator calls `truncate` last).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Duration;

use ordo::remote::{PartWire, ReadAt, ReadEntry, Refusal, Remote, TxKey, WriteKind, WritePart};
use ordo::{Addr, Error, ParticipantFailure, ParticipantStep};
use ordo_clock::Timestamp;

use crate::config::{ClusterConfig, NodeId};
use crate::transport::{PeerPool, PolledPeer, TransportError};
use crate::wire::Body;

/// How long a truncation waits for a `CommitBackup` to ride on before it is sent alone.
pub const TRUNCATE_FLUSH: Duration = Duration::from_millis(2);

/// No node: the primary of a region nobody holds.
const NOBODY: u64 = u64::MAX;

/// Where each region's copies are, from the configuration in force.
#[derive(Debug)]
pub struct Placement {
    /// Per region id, the primary's node id, or [`NOBODY`]. An array of atomics, so routing a
    /// read costs one load.
    primary: Box<[AtomicU64]>,
    /// Per region, its backups.
    backups: RwLock<HashMap<u16, Vec<NodeId>>>,
    /// Per region id, the sequence number of the configuration that last changed its primary
    /// or backups (0: never changed since this placement was made).
    changed_at: Box<[AtomicU64]>,
    seq: AtomicU64,
}

impl Placement {
    /// The placement of `config`.
    pub fn new(config: &ClusterConfig) -> Self {
        let p = Placement {
            primary: (0..=u16::MAX as usize).map(|_| AtomicU64::new(NOBODY)).collect(),
            backups: RwLock::new(HashMap::new()),
            changed_at: (0..=u16::MAX as usize).map(|_| AtomicU64::new(0)).collect(),
            seq: AtomicU64::new(0),
        };
        p.adopt(config);
        p
    }

    /// Adopts the region map of `config` (a newer configuration).
    pub fn adopt(&self, config: &ClusterConfig) {
        self.adopt_holding(config, &[]);
    }

    /// [`Placement::adopt`], but the regions in `held` get no primary here (a promoted backup
    /// that does not serve them yet; see [`Placement::set_primary`]).
    pub fn adopt_holding(&self, config: &ClusterConfig, held: &[u16]) {
        let mut backups = self.backups.write().unwrap_or_else(|e| e.into_inner());
        let first = self.seq.load(Ordering::Acquire) == 0;
        let old: HashMap<u16, (u64, Vec<NodeId>)> = backups
            .drain()
            .map(|(id, b)| (id, (self.primary[id as usize].load(Ordering::Relaxed), b)))
            .collect();
        // Regions that leave the map lose their primary; the others switch in one store each,
        // so a region that keeps its primary is never seen without one.
        for id in old.keys() {
            if !config.regions.iter().any(|r| r.region == u32::from(*id)) {
                self.primary[*id as usize].store(NOBODY, Ordering::Release);
            }
        }
        for r in &config.regions {
            let Ok(id) = u16::try_from(r.region) else { continue };
            let same = old.get(&id).is_some_and(|(p, b)| *p == r.primary && *b == r.backups);
            if !same && !first {
                self.changed_at[id as usize].store(config.seq, Ordering::Release);
            }
            let primary = if held.contains(&id) { NOBODY } else { r.primary };
            self.primary[id as usize].store(primary, Ordering::Release);
            backups.insert(id, r.backups.clone());
        }
        self.seq.store(config.seq, Ordering::Release);
    }

    /// The sequence number of the configuration in force here.
    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    /// The sequence number of the configuration that last changed `region`'s primary or
    /// backups (0 when none did since this placement was made): a LOCK routed by an older
    /// configuration is refused (see `crate::rereplicate`).
    pub fn changed_at(&self, region: u16) -> u64 {
        self.changed_at[region as usize].load(Ordering::Acquire)
    }

    /// Sets the primary of `region` here, apart from the configuration: `None` while a
    /// promoted backup still resolves the region's records (the node serves it only after).
    pub fn set_primary(&self, region: u16, node: Option<NodeId>) {
        self.primary[region as usize].store(node.unwrap_or(NOBODY), Ordering::Release);
    }

    /// The primary of `region`.
    #[inline]
    pub fn primary(&self, region: u16) -> Option<NodeId> {
        match self.primary[region as usize].load(Ordering::Acquire) {
            NOBODY => None,
            id => Some(id),
        }
    }

    /// The primary and the backups of `region`, read together: a configuration adopted
    /// meanwhile gives both of its own or both of the old one (`adopt` stores the primaries
    /// under the backups' write lock).
    pub fn replicas(&self, region: u16) -> (Option<NodeId>, Vec<NodeId>) {
        let backups = self.backups.read().unwrap_or_else(|e| e.into_inner());
        (self.primary(region), backups.get(&region).cloned().unwrap_or_default())
    }

    /// The backups of `region`.
    pub fn backups(&self, region: u16) -> Vec<NodeId> {
        self.backups
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&region)
            .cloned()
            .unwrap_or_default()
    }

    /// The regions `node` is primary of, ascending.
    pub fn primaries_of(&self, node: NodeId) -> Vec<u16> {
        (0..=u16::MAX).filter(|&r| self.primary(r) == Some(node)).collect()
    }

    /// Whether `node` is a backup of `region`.
    pub fn is_backup(&self, region: u16, node: NodeId) -> bool {
        self.backups
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&region)
            .is_some_and(|b| b.contains(&node))
    }
}

/// What a node that backs up regions itself offers the remote participant: the in-process
/// COMMIT-BACKUP and TRUNCATE.
pub trait LocalBackup: Send + Sync {
    /// COMMIT-BACKUP here; `regions` are every region the transaction writes.
    fn backup(
        &self,
        key: TxKey,
        part: &PartWire,
        wts: Timestamp,
        regions: &[u16],
    ) -> Result<(), Error>;
    /// TRUNCATE here.
    fn truncate(&self, key: TxKey);
    /// Drops a part backed up here whose transaction aborted.
    fn discard(&self, key: TxKey);
}

/// The remote participant: see the module docs.
pub struct RemoteOwners {
    me: NodeId,
    placement: Arc<Placement>,
    pool: Arc<PeerPool>,
    runtime: tokio::runtime::Handle,
    call_timeout: Duration,
    /// This node's own backup side (a client has none).
    local: OnceLock<Weak<dyn LocalBackup>>,
    /// Truncations waiting to ride on a `CommitBackup`, per backup node.
    truncates: Mutex<HashMap<NodeId, Vec<(u64, u16)>>>,
    /// Held while truncations taken from `truncates` are being sent (periodic or explicit).
    flushing: tokio::sync::Mutex<()>,
    /// Rotates allocations without a hint over the primaries (a client).
    next_home: AtomicU64,
    /// Network round trips issued (one per call; a concurrent fan-out counts each).
    pub round_trips: AtomicU64,
    /// Slots reserved at other nodes and not consumed yet by a LOCK, release or ABORT
    /// (`Remote::take_remote_reservation`).
    reserved: Reservations,
    /// Calls in flight from this process's threads.
    calls_in_progress: AtomicUsize,
    /// Attempts whose LOCK or COMMIT-BACKUP to a node timed out, and on which connection: the
    /// ABORT or discard that follows must travel behind it (see the module docs).
    late: Mutex<HashMap<(NodeId, u64), Via>>,
}

/// Which connection to a node carried a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    /// The polled connection ([`PolledPeer`]).
    Polled,
    /// The runtime's connection ([`crate::transport::Peer`]).
    Runtime,
}

/// How a call is ordered with the other calls of its attempt to the same node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    /// Nothing follows it that depends on its arrival (reads, validation, allocation).
    Free,
    /// LOCK or COMMIT-BACKUP of attempt `tx`: an ABORT or a discard may follow it.
    First(u64),
    /// ABORT of attempt `tx`: it must not overtake the attempt's LOCK.
    Follows(u64),
}

/// The commit attempt this thread is making (a commit runs on one thread from LOCK to
/// TRUNCATE): where each region was locked, the regions it writes (which every COMMIT-BACKUP
/// carries), and the backups each region's COMMIT-BACKUP went to. An attempt's steps stay with
/// the nodes it started with even when a failover changes the placement meanwhile:
/// COMMIT-PRIMARY and ABORT go to the node that took the LOCK; COMMIT-BACKUP of a region whose
/// primary changed since its LOCK fails (the lock died with the old primary: the attempt aborts
/// before its commit point); TRUNCATE and discard go to the backups the COMMIT-BACKUP went to —
/// a backup promoted to primary since holds the record and must hear its fate.
#[derive(Default)]
struct Attempt {
    /// The `RemoteOwners` (by address) and the attempt number.
    id: (usize, u64),
    locked: Vec<(u16, NodeId)>,
    regions: Vec<u16>,
    sent: Vec<(u16, Vec<NodeId>)>,
    /// A COMMIT-PRIMARY of the attempt was acknowledged (see `commit_primary`).
    primary_acked: bool,
}

thread_local! {
    static ATTEMPT: std::cell::RefCell<Attempt> = std::cell::RefCell::new(Attempt::default());
}

/// Runs `f` on this thread's record of attempt `id`, starting a fresh record when the thread's
/// last attempt was another one.
fn with_attempt<T>(id: (usize, u64), f: impl FnOnce(&mut Attempt) -> T) -> T {
    ATTEMPT.with(|a| {
        let mut a = a.borrow_mut();
        if a.id != id {
            *a = Attempt { id, ..Attempt::default() };
        }
        f(&mut a)
    })
}

/// Timed-out attempts remembered at most (see `RemoteOwners::late`).
const LATE_MAX: usize = 4096;

/// Counts a call in flight while it lives.
struct InProgress<'a>(&'a AtomicUsize);

impl Drop for InProgress<'_> {
    fn drop(&mut self) {
        // Relaxed: a heuristic count.
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RemoteOwners {
    /// The remote participant of node (or client) `me`, calling through `pool` on `runtime`.
    pub fn new(
        me: NodeId,
        placement: Arc<Placement>,
        pool: Arc<PeerPool>,
        runtime: tokio::runtime::Handle,
        call_timeout: Duration,
    ) -> Arc<Self> {
        let owners = Arc::new(RemoteOwners {
            me,
            placement,
            pool,
            runtime,
            call_timeout,
            local: OnceLock::new(),
            truncates: Mutex::new(HashMap::new()),
            flushing: tokio::sync::Mutex::new(()),
            next_home: AtomicU64::new(0),
            round_trips: AtomicU64::new(0),
            reserved: Reservations::default(),
            calls_in_progress: AtomicUsize::new(0),
            late: Mutex::new(HashMap::new()),
        });
        let weak = Arc::downgrade(&owners);
        owners.runtime.spawn(flush_truncates(weak));
        owners
    }

    /// Sets this node's own backup side (once).
    pub fn set_local(&self, local: Weak<dyn LocalBackup>) {
        let _ = self.local.set(local);
    }

    /// The placement in force.
    pub fn placement(&self) -> &Arc<Placement> {
        &self.placement
    }

    fn local(&self) -> Option<Arc<dyn LocalBackup>> {
        self.local.get().and_then(Weak::upgrade)
    }

    fn attempt_id(&self, tx: u64) -> (usize, u64) {
        (std::ptr::from_ref(self) as usize, tx)
    }

    /// The regions attempt `tx` writes (as `Remote::writing` gave them), else `region` alone.
    fn regions_written(&self, tx: u64, region: u16) -> Vec<u16> {
        with_attempt(self.attempt_id(tx), |a| {
            if a.regions.contains(&region) { a.regions.clone() } else { vec![region] }
        })
    }

    /// Notes that attempt `tx`'s COMMIT-BACKUP of `region` went to `backups`.
    fn note_sent(&self, tx: u64, region: u16, backups: &[NodeId]) {
        with_attempt(self.attempt_id(tx), |a| {
            a.sent.retain(|(r, _)| *r != region);
            a.sent.push((region, backups.to_vec()));
        });
    }

    /// The backups attempt `tx`'s COMMIT-BACKUP of `region` went to, else the region's
    /// backups in the placement in force.
    fn backups_sent(&self, tx: u64, region: u16) -> Vec<NodeId> {
        let sent = with_attempt(self.attempt_id(tx), |a| {
            a.sent.iter().find(|(r, _)| *r == region).map(|(_, b)| b.clone())
        });
        sent.unwrap_or_else(|| self.placement.backups(region))
    }

    /// Notes that attempt `tx` sent its LOCK of `region` to `node`.
    fn note_locked(&self, tx: u64, region: u16, node: NodeId) {
        with_attempt(self.attempt_id(tx), |a| {
            a.locked.retain(|(r, _)| *r != region);
            a.locked.push((region, node));
        });
    }

    /// The node attempt `tx` sent its LOCK of `region` to, if it sent one.
    fn locked_at(&self, tx: u64, region: u16) -> Option<NodeId> {
        with_attempt(self.attempt_id(tx), |a| {
            a.locked.iter().find(|(r, _)| *r == region).map(|(_, n)| *n)
        })
    }

    /// Sends every waiting truncation now and waits until each backup has applied them (a
    /// client closing; tests checking the replication invariant). Waits for a periodic flush
    /// in progress first, so nothing taken from the list is still on its way when it returns.
    pub fn flush(&self) {
        let (pool, timeout) = (self.pool.clone(), self.call_timeout);
        self.block_on(async {
            let _flushing = self.flushing.lock().await;
            let waiting: Vec<(NodeId, Vec<(u64, u16)>)> = lock(&self.truncates).drain().collect();
            for (node, truncate) in waiting {
                if truncate.is_empty() {
                    continue;
                }
                let reply = async {
                    pool.get(node)
                        .await?
                        .call_timeout(Body::Truncate { truncate, discard: Vec::new() }, timeout)
                        .await
                }
                .await;
                if let Err(e) = reply {
                    tracing::warn!(peer = node, error = %e, "truncations not delivered");
                }
            }
        });
    }

    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        match tokio::runtime::Handle::try_current() {
            // Called from a runtime thread (an async caller): give the thread up while waiting.
            Ok(_) => tokio::task::block_in_place(|| self.runtime.block_on(f)),
            Err(_) => self.runtime.block_on(f),
        }
    }

    /// The polled connection to `node` (connecting on the runtime if there is none).
    fn polled(&self, node: NodeId) -> Result<Arc<PolledPeer>, TransportError> {
        match self.pool.ready_polled(node) {
            Some(conn) => Ok(conn),
            None => self.block_on(self.pool.get_polled(node)),
        }
    }

    /// Runs `f`, which blocks on the network, telling the runtime first if this is one of its
    /// threads.
    fn blocking<T>(f: impl FnOnce() -> T) -> T {
        match tokio::runtime::Handle::try_current() {
            Ok(_) => tokio::task::block_in_place(f),
            Err(_) => f(),
        }
    }

    /// Remembers that attempt `tx`'s call to `node` timed out on connection `via`.
    fn late_insert(&self, node: NodeId, tx: u64, via: Via) {
        let mut late = lock(&self.late);
        if late.len() >= LATE_MAX {
            // Bounded: an attempt whose follow-up never came (its coordinator gave up).
            late.clear();
        }
        late.insert((node, tx), via);
    }

    /// The connection on which attempt `tx`'s earlier call to `node` timed out, if one did.
    fn late_remove(&self, node: NodeId, tx: u64) -> Option<Via> {
        let mut late = lock(&self.late);
        if late.is_empty() {
            return None;
        }
        late.remove(&(node, tx))
    }

    /// One call to `node`, mapped to the engine's errors for `step` at `region`.
    fn call(
        &self,
        node: NodeId,
        region: u16,
        step: ParticipantStep,
        body: Body,
        order: Order,
    ) -> Result<Body, Error> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let timeout = self.call_timeout;
        // Poll only while this is the process's one call in flight (1 client): with company,
        // polling would take the core of the threads that answer.
        // Relaxed: a heuristic count.
        let others = self.calls_in_progress.fetch_add(1, Ordering::Relaxed);
        let _in_progress = InProgress(&self.calls_in_progress);
        let after = match order {
            Order::Follows(tx) => self.late_remove(node, tx),
            _ => None,
        };
        let mut via = Via::Polled;
        let reply = self.polled(node).and_then(|conn| {
            let claim = match after {
                // The call this one follows timed out on the polled connection: this one
                // waits its turn there, behind it.
                Some(Via::Polled) => conn.claim_waiting(),
                Some(Via::Runtime) => None,
                None => conn.claim(),
            };
            match claim {
                Some(claim) => Self::blocking(|| claim.call(body, timeout, others == 0)),
                // Another call is in flight on the polled connection: the runtime's connection.
                None => {
                    via = Via::Runtime;
                    self.block_on(async move {
                        self.pool.get(node).await?.call_timeout(body, timeout).await
                    })
                }
            }
        });
        if let (Order::First(tx), Err(TransportError::Timeout { .. })) = (order, &reply) {
            self.late_insert(node, tx, via);
        }
        let fail = |cause| Error::Participant { owner: region, region, step, cause };
        match reply {
            Ok(Body::Declined { code, addr, a, b, message }) => {
                match (Refusal { code, addr, a, b }).into_error() {
                    Some(e) => Err(e),
                    None => {
                        tracing::warn!(peer = node, region, step = step.name(), %message, "owner refused");
                        Err(fail(ParticipantFailure::Refused))
                    }
                }
            }
            Ok(Body::Error { code, message }) => {
                tracing::warn!(peer = node, region, step = step.name(), code, %message, "owner error");
                Err(fail(if code == crate::node::codes::NOT_OWNER {
                    ParticipantFailure::NotOwner
                } else {
                    ParticipantFailure::Refused
                }))
            }
            Ok(other) => Ok(other),
            Err(TransportError::Timeout { .. }) => Err(fail(ParticipantFailure::Timeout)),
            Err(e) => {
                tracing::debug!(peer = node, region, step = step.name(), error = %e, "call failed");
                Err(fail(match e {
                    TransportError::Wire { .. } => ParticipantFailure::Protocol,
                    _ => ParticipantFailure::PeerGone,
                }))
            }
        }
    }

    /// Tells `nodes` (backups of `region`) to drop the part of attempt `tx`, without waiting;
    /// with `local`, this node drops its own copy too.
    fn discard_at(&self, tx: u64, region: u16, nodes: &[NodeId], local: bool) {
        if local
            && (nodes.contains(&self.me) || self.placement.is_backup(region, self.me))
            && let Some(l) = self.local()
        {
            l.discard(TxKey { coordinator: self.me, tx, region });
        }
        for &node in nodes.iter().filter(|&&n| n != self.me) {
            let body = Body::Truncate { truncate: Vec::new(), discard: vec![(tx, region)] };
            if self.late_remove(node, tx) == Some(Via::Polled) {
                // Behind the COMMIT-BACKUP that timed out on the polled connection.
                let sent = self.polled(node).and_then(|conn| match conn.claim_waiting() {
                    Some(claim) => Self::blocking(|| claim.send(body)),
                    None => Err(TransportError::UnknownPeer { peer: node }),
                });
                if let Err(e) = sent {
                    tracing::debug!(peer = node, error = %e, "discard not delivered");
                }
                continue;
            }
            let pool = self.pool.clone();
            self.runtime.spawn(async move {
                if let Err(e) = pool.send(node, body).await {
                    tracing::debug!(peer = node, error = %e, "discard not delivered");
                }
            });
        }
    }

    fn primary(&self, region: u16, step: ParticipantStep) -> Result<NodeId, Error> {
        self.placement.primary(region).ok_or(Error::Participant {
            owner: region,
            region,
            step,
            cause: ParticipantFailure::NotOwner,
        })
    }

    fn expect_done(reply: Body, region: u16, step: ParticipantStep) -> Result<bool, Error> {
        match reply {
            Body::Done { flag } => Ok(flag),
            other => Err(Self::unexpected(other, region, step)),
        }
    }

    fn unexpected(reply: Body, region: u16, step: ParticipantStep) -> Error {
        tracing::warn!(region, step = step.name(), reply = reply.name(), "unexpected reply");
        Error::Participant { owner: region, region, step, cause: ParticipantFailure::Protocol }
    }
}

fn read_flags(at: ReadAt) -> u8 {
    u8::from(at.check_lock) | (u8::from(at.old_versions) << 1)
}

/// The slots a process reserved at other nodes and no LOCK, release or ABORT consumed yet
/// (`Remote::take_remote_reservation`): kept by every `Remote` implementation (this one and the
/// data-path simulation's). Asked about every allocation a local LOCK takes, so an empty set —
/// the usual case — answers without its mutex.
#[derive(Debug, Default)]
pub(crate) struct Reservations {
    held: Mutex<std::collections::HashSet<Addr>>,
    /// `held.len()`, written under the mutex. Relaxed reads suffice: a reservation is asked
    /// about by the thread of the attempt that made it.
    count: AtomicUsize,
}

impl Reservations {
    /// A reservation was made.
    pub(crate) fn insert(&self, addr: Addr) {
        let mut held = lock(&self.held);
        held.insert(addr);
        self.count.store(held.len(), Ordering::Relaxed);
    }

    /// Forgets `addr`; whether it was held.
    pub(crate) fn take(&self, addr: Addr) -> bool {
        if self.count.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let mut held = lock(&self.held);
        let was = held.remove(&addr);
        self.count.store(held.len(), Ordering::Relaxed);
        was
    }

    /// Whether `addr` is held.
    pub(crate) fn holds(&self, addr: Addr) -> bool {
        self.count.load(Ordering::Relaxed) > 0 && lock(&self.held).contains(&addr)
    }

    /// Forgets every allocation of `part` (consumed by its LOCK or ABORT).
    pub(crate) fn consume(&self, part: &WritePart<'_>) {
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut held = lock(&self.held);
        for e in part.entries().iter().filter(|e| e.kind == WriteKind::Alloc) {
            held.remove(&e.addr);
        }
        self.count.store(held.len(), Ordering::Relaxed);
    }
}

impl Remote for RemoteOwners {
    #[inline]
    fn is_local_primary(&self, region: u16) -> bool {
        self.placement.primary(region) == Some(self.me)
    }

    fn read(&self, addr: Addr, at: ReadAt, out: &mut Vec<u64>) -> Result<ReadEntry, Error> {
        let region = addr.region();
        let step = ParticipantStep::Read;
        let node = self.primary(region, step)?;
        let body =
            Body::Read { addr: addr.to_raw(), rts: at.rts.as_nanos(), flags: read_flags(at) };
        match self.call(node, region, step, body, Order::Free)? {
            Body::ObjectImage { header, len_bytes, words } => {
                if words.len() != (len_bytes as usize).div_ceil(8) {
                    return Err(Error::Participant {
                        owner: region,
                        region,
                        step,
                        cause: ParticipantFailure::Protocol,
                    });
                }
                out.clear();
                out.extend_from_slice(&words);
                Ok(ReadEntry::new(addr, ordo::object::Header::from_raw(header), len_bytes))
            }
            other => Err(Self::unexpected(other, region, step)),
        }
    }

    fn still_newest(&self, read: &ReadEntry, rts: Timestamp) -> Result<bool, Error> {
        let region = read.addr.region();
        let step = ParticipantStep::Read;
        let node = self.primary(region, step)?;
        let body = Body::StillNewest {
            addr: read.addr.to_raw(),
            header: read.header.raw(),
            len_bytes: read.len_bytes,
            rts: rts.as_nanos(),
        };
        Self::expect_done(self.call(node, region, step, body, Order::Free)?, region, step)
    }

    fn reserve(&self, near: Option<Addr>, len_bytes: usize) -> Result<(Addr, Timestamp), Error> {
        let step = ParticipantStep::Lock;
        let region = match near {
            Some(a) => a.region(),
            None => {
                let mut homes: Vec<u16> =
                    (0..=u16::MAX).filter(|&r| self.placement.primary(r).is_some()).collect();
                homes.sort_unstable();
                if homes.is_empty() {
                    return Err(Error::OutOfMemory { regions: 0, region_bytes: 0 });
                }
                let i = self.next_home.fetch_add(1, Ordering::Relaxed) as usize % homes.len();
                homes[i]
            }
        };
        let node = self.primary(region, step)?;
        let len = u32::try_from(len_bytes)
            .map_err(|_| Error::TooLarge { len_bytes, max_bytes: ordo::heap::OBJECT_BYTES_MAX })?;
        match self.call(node, region, step, Body::Reserve { len_bytes: len }, Order::Free)? {
            Body::Reserved { addr, version } => {
                let addr = Addr::from_raw(addr);
                self.reserved.insert(addr);
                Ok((addr, Timestamp::from_nanos(version)))
            }
            other => Err(Self::unexpected(other, region, step)),
        }
    }

    fn take_remote_reservation(&self, addr: Addr) -> bool {
        self.reserved.take(addr)
    }

    fn is_reserved_elsewhere(&self, addr: Addr) -> bool {
        self.reserved.holds(addr)
    }

    fn release(&self, addr: Addr) -> Result<(), Error> {
        let region = addr.region();
        let step = ParticipantStep::Abort;
        let node = self.primary(region, step)?;
        self.reserved.take(addr);
        let body = Body::Release { addr: addr.to_raw() };
        let reply = self.call(node, region, step, body, Order::Free)?;
        Self::expect_done(reply, region, step).map(drop)
    }

    fn lock(&self, tx: u64, part: WritePart<'_>) -> Result<(), Error> {
        let wire = PartWire::of(part);
        let region = wire.region().unwrap_or(0);
        let step = ParticipantStep::Lock;
        let node = self.primary(region, step)?;
        let seq = self.placement.seq();
        self.note_locked(tx, region, node);
        let body = Body::Lock { tx, region, seq, entries: wire.entries, words: wire.words };
        Self::expect_done(self.call(node, region, step, body, Order::First(tx))?, region, step)?;
        self.reserved.consume(&part);
        Ok(())
    }

    fn validate(&self, reads: &[ReadEntry]) -> Result<(), Error> {
        let Some(first) = reads.first() else { return Ok(()) };
        let region = first.addr.region();
        let step = ParticipantStep::Validate;
        let node = self.primary(region, step)?;
        // The coordinator groups reads by region; the owner node may hold several regions, but
        // each call carries one region's reads.
        let words = reads
            .iter()
            .flat_map(|r| [r.addr.to_raw(), r.header.raw(), u64::from(r.len_bytes)])
            .collect();
        Self::expect_done(
            self.call(node, region, step, Body::Validate { reads: words }, Order::Free)?,
            region,
            step,
        )
        .map(drop)
    }

    fn commit_backup(&self, tx: u64, part: WritePart<'_>, wts: Timestamp) -> Result<(), Error> {
        let wire = PartWire::of(part);
        let region = wire.region().unwrap_or(0);
        let step = ParticipantStep::CommitBackup;
        let (primary, backups) = self.placement.replicas(region);
        if let Some(locked) = self.locked_at(tx, region)
            && primary != Some(locked)
        {
            // A failover moved the region since its LOCK: the lock died with the old
            // primary, and the new one never held it. Abort before the commit point.
            tracing::debug!(region, tx, locked, ?primary, "primary changed since LOCK");
            return Err(Error::Participant {
                owner: region,
                region,
                step,
                cause: ParticipantFailure::NotOwner,
            });
        }
        let regions = self.regions_written(tx, region);
        self.note_sent(tx, region, &backups);
        let mut remote = Vec::with_capacity(backups.len());
        for node in backups {
            if node == self.me {
                let Some(local) = self.local() else {
                    return Err(Error::Participant {
                        owner: region,
                        region,
                        step,
                        cause: ParticipantFailure::PeerGone,
                    });
                };
                local.backup(TxKey { coordinator: self.me, tx, region }, &wire, wts, &regions)?;
            } else {
                remote.push(node);
            }
        }
        if remote.is_empty() {
            return Ok(());
        }
        // Every backup concurrently: the commit waits for the slowest, not for the sum.
        let calls: Vec<_> = remote
            .iter()
            .map(|&node| {
                let truncate = lock(&self.truncates).remove(&node).unwrap_or_default();
                let body = Body::CommitBackup {
                    tx,
                    region,
                    wts: wts.as_nanos(),
                    entries: wire.entries.clone(),
                    words: wire.words.clone(),
                    truncate,
                    regions: regions.clone(),
                };
                (node, body)
            })
            .collect();
        if calls.len() == 1 {
            let (node, body) = calls.into_iter().next().expect("one call");
            let reply = self.call(node, region, step, body, Order::First(tx))?;
            return Self::expect_done(reply, region, step).map(drop);
        }
        self.round_trips.fetch_add(calls.len() as u64, Ordering::Relaxed);
        let pool = self.pool.clone();
        let timeout = self.call_timeout;
        let replies = self.block_on(async move {
            let mut set = tokio::task::JoinSet::new();
            for (node, body) in calls {
                let pool = pool.clone();
                set.spawn(async move {
                    let r = async { pool.get(node).await?.call_timeout(body, timeout).await }.await;
                    (node, r)
                });
            }
            let mut out = Vec::new();
            while let Some(r) = set.join_next().await {
                if let Ok(r) = r {
                    out.push(r);
                }
            }
            out
        });
        let fail = |cause| Error::Participant { owner: region, region, step, cause };
        let mut failure =
            (replies.len() != remote.len()).then(|| fail(ParticipantFailure::PeerGone));
        let mut acked = Vec::new();
        for (node, reply) in replies {
            match reply {
                Ok(Body::Done { .. }) => acked.push(node),
                Ok(other) => {
                    tracing::warn!(
                        peer = node,
                        region,
                        reply = other.name(),
                        "COMMIT-BACKUP not acknowledged"
                    );
                    failure.get_or_insert(fail(ParticipantFailure::Refused));
                }
                Err(TransportError::Timeout { .. }) => {
                    self.late_insert(node, tx, Via::Runtime);
                    failure.get_or_insert(fail(ParticipantFailure::Timeout));
                }
                Err(_) => {
                    failure.get_or_insert(fail(ParticipantFailure::PeerGone));
                }
            }
        }
        match failure {
            None => Ok(()),
            Some(e) => {
                // The backups that acknowledged drop the part; so does this node, if it is one.
                self.discard_at(tx, region, &acked, true);
                Err(e)
            }
        }
    }

    fn writing(&self, tx: u64, regions: &[u16]) {
        with_attempt(self.attempt_id(tx), |a| {
            a.regions.clear();
            a.regions.extend_from_slice(regions);
        });
    }

    fn forget_backup(&self, tx: u64, part: WritePart<'_>) {
        let Some(first) = part.entries().first() else { return };
        let region = first.addr.region();
        let backups = self.backups_sent(tx, region);
        self.discard_at(tx, region, &backups, true);
    }

    /// Sent one-way: the transaction is committed (every backup acknowledged), and the
    /// primary keeps the objects locked until it installs them, so a reader that comes first
    /// aborts and retries rather than seeing the old version. The coordinator does not wait for
    /// the install; a primary that cannot install logs it (its recovery is Cluster III's).
    ///
    /// Except once per attempt when no other node holds a record of it — this node is the
    /// only backup of every region it writes, or they all lost their backups — so that the
    /// records alone cannot prove the commit after this node's crash. Then the first
    /// COMMIT-PRIMARY is a call, and the commit is reported only after a primary installed:
    /// its evidence commits the transaction in recovery (`crate::recovery`'s module docs).
    fn commit_primary(&self, tx: u64, region: u16, wts: Timestamp) -> Result<(), Error> {
        let step = ParticipantStep::CommitPrimary;
        let node = match self.locked_at(tx, region) {
            Some(node) => node,
            None => self.primary(region, step)?,
        };
        let body = Body::CommitPrimary { tx, region, wts: wts.as_nanos() };
        let must_ack = with_attempt(self.attempt_id(tx), |a| {
            let recorded_elsewhere =
                a.sent.iter().any(|(_, backups)| backups.iter().any(|&b| b != self.me));
            !a.primary_acked && !recorded_elsewhere
        });
        if must_ack {
            let reply = self.call(node, region, step, body, Order::Follows(tx))?;
            Self::expect_done(reply, region, step)?;
            with_attempt(self.attempt_id(tx), |a| a.primary_acked = true);
            return Ok(());
        }
        let sent = self.polled(node).and_then(|conn| match conn.claim() {
            Some(claim) => Self::blocking(|| claim.send(body)),
            None => self.block_on(async move { self.pool.get(node).await?.send(body).await }),
        });
        sent.map_err(|e| {
            tracing::warn!(peer = node, region, error = %e, "COMMIT-PRIMARY not sent");
            Error::Participant { owner: region, region, step, cause: ParticipantFailure::PeerGone }
        })
    }

    fn truncate(&self, tx: u64, region: u16, _wts: Timestamp) -> Result<(), Error> {
        for node in self.backups_sent(tx, region) {
            if node == self.me {
                if let Some(local) = self.local() {
                    local.truncate(TxKey { coordinator: self.me, tx, region });
                }
            } else {
                lock(&self.truncates).entry(node).or_default().push((tx, region));
            }
        }
        Ok(())
    }

    fn abort(&self, tx: u64, part: WritePart<'_>) -> Result<(), Error> {
        let Some(first) = part.entries().first() else { return Ok(()) };
        let region = first.addr.region();
        let step = ParticipantStep::Abort;
        let node = match self.locked_at(tx, region) {
            Some(node) => node,
            None => self.primary(region, step)?,
        };
        let allocs: Vec<u64> = part
            .entries()
            .iter()
            .filter(|e| e.kind == WriteKind::Alloc)
            .map(|e| e.addr.to_raw())
            .collect();
        self.reserved.consume(&part);
        let body = Body::Abort { tx, region, allocs };
        Self::expect_done(self.call(node, region, step, body, Order::Follows(tx))?, region, step)
            .map(drop)
    }
}

/// Sends waiting truncations every [`TRUNCATE_FLUSH`] (those no `CommitBackup` took along).
async fn flush_truncates(owners: Weak<RemoteOwners>) {
    let mut tick = tokio::time::interval(TRUNCATE_FLUSH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(o) = owners.upgrade() else { return };
        let _flushing = o.flushing.lock().await;
        let waiting: Vec<(NodeId, Vec<(u64, u16)>)> = lock(&o.truncates).drain().collect();
        for (node, truncate) in waiting {
            if !truncate.is_empty() {
                let _ = o.pool.send(node, Body::Truncate { truncate, discard: Vec::new() }).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::auth::Secret;
    use crate::config::Member;
    use crate::transport::{Handler, Limits, Server};

    const NODE: NodeId = 7;
    const ME: NodeId = 3;
    const TX: u64 = 41;
    /// How long the node takes over the LOCK of attempt `TX`: past the caller's timeout.
    const SLOW_LOCK: Duration = Duration::from_millis(400);
    const CALL_TIMEOUT: Duration = Duration::from_millis(100);

    /// Records when each LOCK starts and ends and each ABORT arrives.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<&'static str>>);

    impl Handler for Recorder {
        fn request(&self, _from: u64, body: Body) -> Body {
            match body {
                Body::Lock { .. } => {
                    lock(&self.0).push("lock starts");
                    // As a durable node's slow step does: the worker's other connections move
                    // to another thread meanwhile, so an overtaking ABORT would be served.
                    tokio::task::block_in_place(|| std::thread::sleep(SLOW_LOCK));
                    lock(&self.0).push("lock ends");
                }
                Body::Abort { .. } => lock(&self.0).push("abort"),
                _ => {}
            }
            Body::Done { flag: true }
        }
    }

    fn lock_body() -> Body {
        Body::Lock { tx: TX, region: 1, seq: 1, entries: Vec::new(), words: Vec::new() }
    }

    fn abort_body() -> Body {
        Body::Abort { tx: TX, region: 1, allocs: Vec::new() }
    }

    /// A node serving `Recorder` on its own 2-thread runtime (two connections served at once),
    /// and a `RemoteOwners` of node `ME` calling it.
    /// The node's runtime and the caller's, apart: the node's LOCK handler blocks one of its
    /// workers, and the caller's timeouts must not wait on it.
    struct Runtimes {
        _node: tokio::runtime::Runtime,
        _caller: tokio::runtime::Runtime,
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    }

    fn setup() -> (Runtimes, Server, Arc<Recorder>, Arc<RemoteOwners>) {
        let recorder = Arc::new(Recorder::default());
        let (runtimes, server, owners) = setup_with(recorder.clone());
        (runtimes, server, recorder, owners)
    }

    fn setup_with<H: Handler + 'static>(handler: Arc<H>) -> (Runtimes, Server, Arc<RemoteOwners>) {
        let (node_rt, caller_rt) = (runtime(), runtime());
        let secret = Secret::from_bytes(*b"0123456789abcdef0123456789abcdef").unwrap();
        let limits = Limits { call_timeout: CALL_TIMEOUT, ..Limits::default() };
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let server = node_rt
            .block_on(Server::bind(any, NODE, "c", secret.clone(), limits, handler))
            .unwrap();
        let addr = server.local_addr();
        let members = vec![Member { id: NODE, addr: addr.to_string() }];
        let placement = Arc::new(Placement::new(&ClusterConfig::initial(members, 0)));
        let pool = Arc::new(PeerPool::new(ME, "c", secret, limits));
        pool.set_addr(NODE, addr);
        // Both connections open before the test (so neither waits on the blocked worker).
        caller_rt.block_on(pool.get(NODE)).unwrap();
        caller_rt.block_on(pool.get_polled(NODE)).unwrap();
        let handle = caller_rt.handle().clone();
        let owners = RemoteOwners::new(ME, placement, pool, handle, CALL_TIMEOUT);
        (Runtimes { _node: node_rt, _caller: caller_rt }, server, owners)
    }

    /// Refuses every COMMIT-PRIMARY, counting them: a caller sees the refusal only when it
    /// waits for the answer.
    #[derive(Default)]
    struct RefusesInstall(AtomicUsize);

    impl Handler for RefusesInstall {
        fn request(&self, _from: u64, body: Body) -> Body {
            if let Body::CommitPrimary { .. } = body {
                self.0.fetch_add(1, Ordering::SeqCst);
                return Body::Error { code: 1, message: "refused".into() };
            }
            Body::Done { flag: true }
        }

        fn one_way(&self, _from: u64, body: Body) {
            if let Body::CommitPrimary { .. } = body {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// The first COMMIT-PRIMARY of an attempt whose records alone may not prove its commit is
    /// a call (the commit waits for one install, see `crate::recovery`); otherwise one-way.
    #[test]
    fn commit_primary_waits_for_an_install_when_the_records_may_not_prove_the_commit() {
        let handler = Arc::new(RefusesInstall::default());
        let (_rt, _server, owners) = setup_with(handler.clone());
        let wts = Timestamp::from_nanos(5);
        // This node holds the only record (it is the only backup of the region written).
        owners.note_sent(TX, 2, &[ME]);
        assert!(owners.commit_primary(TX, 1, wts).is_err(), "waited, and saw the refusal");
        // No record anywhere (the regions lost their backups).
        owners.note_sent(TX + 1, 1, &[]);
        assert!(owners.commit_primary(TX + 1, 1, wts).is_err());
        // A record at another node too: one-way, the refusal unseen (recovery commits from
        // that record, counting the lock of the region only this node backed up).
        owners.note_sent(TX + 2, 2, &[ME]);
        owners.note_sent(TX + 2, 1, &[NODE]);
        assert!(owners.commit_primary(TX + 2, 1, wts).is_ok());
        let deadline = Instant::now() + Duration::from_secs(5);
        while handler.0.load(Ordering::SeqCst) < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(handler.0.load(Ordering::SeqCst), 3);
    }

    /// Holds the polled connection to `NODE` from another thread for `hold`.
    fn hold_polled(owners: &Arc<RemoteOwners>, hold: Duration) -> std::thread::JoinHandle<()> {
        let conn = owners.polled(NODE).unwrap();
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let holder = std::thread::spawn(move || {
            let _claim = conn.claim_waiting().unwrap();
            held_tx.send(()).unwrap();
            std::thread::sleep(hold);
        });
        held_rx.recv().unwrap();
        holder
    }

    fn step() -> ParticipantStep {
        ParticipantStep::Lock
    }

    /// After the LOCK timed out, the ABORT must reach the node after the LOCK's handling.
    fn assert_abort_after_lock(recorder: &Recorder) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while lock(&recorder.0).len() < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(*lock(&recorder.0), ["lock starts", "lock ends", "abort"]);
    }

    #[test]
    fn abort_follows_a_lock_that_timed_out_on_the_polled_connection() {
        let (_rt, _server, recorder, owners) = setup();
        let got = owners.call(NODE, 1, step(), lock_body(), Order::First(TX));
        assert!(matches!(got, Err(Error::Participant { .. })), "{got:?}");
        // Another thread holds the polled connection when the ABORT goes: it must wait for
        // it rather than take the runtime's connection and overtake the LOCK.
        let holder = hold_polled(&owners, Duration::from_millis(50));
        // (It may time out too, queued behind the slow LOCK; what matters is where it lands.)
        let _ = owners.call(NODE, 1, ParticipantStep::Abort, abort_body(), Order::Follows(TX));
        holder.join().unwrap();
        assert_abort_after_lock(&recorder);
    }

    #[test]
    fn abort_follows_a_lock_that_timed_out_on_the_runtime_connection() {
        let (_rt, _server, recorder, owners) = setup();
        // The polled connection is busy: the LOCK takes the runtime's, and times out.
        let holder = hold_polled(&owners, CALL_TIMEOUT * 2);
        let got = owners.call(NODE, 1, step(), lock_body(), Order::First(TX));
        assert!(matches!(got, Err(Error::Participant { .. })), "{got:?}");
        holder.join().unwrap();
        // The polled connection is free now; the ABORT must still take the runtime's.
        // (It may time out too, queued behind the slow LOCK; what matters is where it lands.)
        let _ = owners.call(NODE, 1, ParticipantStep::Abort, abort_body(), Order::Follows(TX));
        assert_abort_after_lock(&recorder);
    }
}
