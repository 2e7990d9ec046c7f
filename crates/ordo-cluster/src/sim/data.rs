//! Deterministic simulation of the cluster's **data path** (issue 17, DESIGN §6, §8): real
//! engines, real commits, real recovery and promotion, durable members on the storage seam's
//! simulated backend — one seed, one run, one history, checked for strict serializability.
//!
//! [`super`] simulates the clock-and-failover layer against a perfect store; this module is
//! its other half: the store is the real thing, and the clocks are simple.
//!
//! # What runs for real
//! Every member is an [`Ordo`] opened with [`Ordo::with_remote`], durable on a
//! [`FaultStorage`] over a [`MemStorage`] (`Mode::Sync`: a backup logs every COMMIT-BACKUP
//! before acknowledging it). Transactions run the engine's coordinator (`txn::commit`: LOCK,
//! VALIDATE, COMMIT-BACKUP, COMMIT-PRIMARY, TRUNCATE, ABORT) and the members serve them with
//! the `serve_*` family. After a crash the survivors run the failover plan
//! ([`failover::plan`]), the recovery vote ([`recovery::decide`] on every survivor's
//! [`Ordo::serve_recovery_state`], carried out by [`Ordo::serve_resolve`]), the promotion of
//! backups ([`Ordo::promote_region`], gated until no record of the region is pending) and
//! re-replication ([`rereplicate::plan`], [`rereplicate::copy_region`] into
//! [`Ordo::serve_replica`]). A crashed member's storage is frozen at the crash and then loses
//! power: unsynced writes are dropped, kept, or torn by sector ([`FaultStorage::power_loss_torn`]),
//! and the member is reopened from what is left, which must hold every part it acknowledged.
//!
//! # What is the simulation's own
//! * **The network** is [`SimRemote`], the engine's [`Remote`] seam, routing as `owners.rs` does:
//!   reads, LOCK, VALIDATE and ABORT to the region's primary (COMMIT-PRIMARY and ABORT to the
//!   node that took the LOCK), COMMIT-BACKUP to every backup of the region (aborting before
//!   the commit point when the primary changed since the LOCK), TRUNCATE and discards to the
//!   backups the COMMIT-BACKUP went to. Calls are delivered in the caller's thread; COMMIT-PRIMARY,
//!   TRUNCATE and discards are one-way and wait in a FIFO queue (per-link order, as TCP keeps
//!   it) until the scheduler delivers them. A message from or to a crashed member is lost.
//! * **Concurrency** without threads: before a call is delivered, and again before its answer
//!   returns, the scheduler may run another client's transaction to its end (nested, at most
//!   [`NEST_MAX`] deep), deliver queued one-way messages, crash a member, or run the failover —
//!   so transactions overlap at every message, and a failover can strike between any two steps
//!   of a live coordinator's commit. Everything runs on one thread, so a seed replays exactly.
//! * **Clocks**: one true time, advanced by every clock reading ([`SimClock`]); each member
//!   reads it with its own offset within the boundary, so every interval contains the true
//!   time (the clock layer's own failures are [`super`]'s subject).
//! * **Membership** changes are adopted by every member at once, as if each NEW-CONFIG round
//!   were instantaneous ([`super`] simulates the rounds).
//! * **The workload**: clients on live members read one to three keys and write new unique
//!   tags to one or two of them, or (one in four) move a pointer: read it and the cell it names,
//!   allocate a new cell near a random key (a remote RESERVE when that region is elsewhere),
//!   repoint, free the old cell (`Work`). A slot handed out twice shows as one register
//!   reading another's tag.
//!
//! # What is checked
//! Every attempt is recorded in an `ordo-check` history (invocation before the engine begins,
//! outcome after it returns; an attempt whose coordinator crashed, or that failed with a
//! participant error, is `Unknown`), and a final transaction reads every key. The history
//! must be strictly serializable: an acknowledged write lost in a failover is a later read of
//! an older value, a cycle through a real-time edge. After the run, with every queued message
//! delivered, each region's primary and backups must hold the same objects (digests), no live
//! member may hold a slot reserved for a coordinator (recovery gives back the dead ones'), and
//! a restarted member must hold every part it acknowledged.
//!
//! The negative switches in [`DataSimOptions`] leave out one mechanism each; the tests name a
//! seed at which the checks then fail.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use ordo::durable::io::{FaultStorage, MemStorage, Storage};
use ordo::remote::{PartWire, ReadAt, ReadEntry, Remote, TxKey, WriteKind, WritePart};
use ordo::{Addr, Error, Ordo, ParticipantFailure, ParticipantStep};
use ordo_check::{History, Recorder};
use ordo_clock::{Clock, ClockKind, Interval, Timestamp};

use super::SimRng;
use crate::config::{ClusterConfig, Member, NodeId};
use crate::owners::Reservations;
use crate::{failover, recovery, rereplicate};

/// How deep transactions nest inside one another's messages.
pub const NEST_MAX: u32 = 2;
/// Keys per region at the start.
const KEYS_PER_REGION: usize = 2;
/// Attempts a top-level transaction makes before it gives up.
const ATTEMPTS_MAX: u32 = 12;
/// Nanoseconds each clock reading moves true time.
const TICK_NANOS: u64 = 37;
/// The clocks' boundary: every member's offset is within it.
const BOUNDARY_NANOS: u64 = 2_000;
/// How often the copier may find a lock before it gives up.
const COPY_POLLS_MAX: u32 = 50;
/// Bytes per region.
const REGION_BYTES: usize = 1 << 20;

/// A member's clock: the simulation's true time read with a fixed offset, as the interval
/// `[c − boundary, c + boundary]` around the reading `c`, which contains the true time. Every
/// reading moves the true time by a tick, so waiting out uncertainty ends.
#[derive(Debug)]
pub struct SimClock {
    time: Arc<AtomicU64>,
    offset_nanos: i64,
}

impl Clock for SimClock {
    fn now(&self) -> Interval {
        // Relaxed: one thread runs the simulation.
        let t = self.time.fetch_add(TICK_NANOS, Ordering::Relaxed) + TICK_NANOS;
        let c = t.saturating_add_signed(self.offset_nanos);
        Interval::new(
            Timestamp::from_nanos(c.saturating_sub(BOUNDARY_NANOS)),
            Timestamp::from_nanos(c.saturating_add(BOUNDARY_NANOS)),
        )
    }

    fn boundary_nanos(&self) -> u64 {
        2 * BOUNDARY_NANOS
    }

    fn kind(&self) -> ClockKind {
        ClockKind::Test
    }
}

/// A member's database.
pub type SimDb = Ordo<SimClock>;

/// One run's parameters. [`DataSimOptions::from_seed`] draws a run; the `bool` switches leave
/// out one safety mechanism each (negative tests), and are off by default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataSimOptions {
    /// The seed.
    pub seed: u64,
    /// Members (3 or 4); each is the primary of one region and the backup of the next.
    pub nodes: usize,
    /// Top-level transactions.
    pub txns: usize,
    /// Members that crash (at most 1 with three members, 2 with four).
    pub crashes: usize,
    /// Recovery aborts every transaction without evidence of commit (leaves out the vote's
    /// rule 3: commit when every written region holds a record).
    pub vote_aborts_undecided: bool,
    /// A COMMIT-BACKUP goes out even when the region's primary changed since the LOCK.
    pub skip_primary_check: bool,
    /// A promoted backup serves its region at once, with records still pending.
    pub promote_before_resolved: bool,
    /// Every COMMIT-PRIMARY is one-way, also from a coordinator whose transaction has no record
    /// at another node.
    pub commit_primary_one_way: bool,
    /// Every message and transaction outcome goes into the events.
    pub trace: bool,
}

impl DataSimOptions {
    /// The run of `seed`: its size and faults drawn from it.
    pub fn from_seed(seed: u64) -> Self {
        let mut rng = SimRng::new(seed ^ 0x0da7_a5e1_d000_0000);
        let nodes = 3 + rng.range(0, 1) as usize;
        let crashes = if nodes == 4 { rng.range(0, 2) } else { rng.range(0, 1) } as usize;
        DataSimOptions {
            seed,
            nodes,
            txns: 24 + rng.range(0, 24) as usize,
            crashes: if rng.range(0, 7) == 0 { 0 } else { crashes.max(1) },
            vote_aborts_undecided: false,
            skip_primary_check: false,
            promote_before_resolved: false,
            commit_primary_one_way: false,
            trace: false,
        }
    }
}

/// What a run found wrong.
#[derive(Debug, thiserror::Error)]
pub enum DataSimFailure {
    /// The checker rejected the history.
    #[error("seed {seed}: the history is not strictly serializable: {violation}")]
    Checker {
        /// The seed.
        seed: u64,
        /// What the checker found.
        violation: String,
    },
    /// A region's copies differ once every message was delivered.
    #[error("seed {seed}: region {region}: {what}")]
    Replicas {
        /// The seed.
        seed: u64,
        /// The region.
        region: u16,
        /// Which copies differ.
        what: String,
    },
    /// A member still holds slots reserved for coordinators once every transaction is done.
    #[error("seed {seed}: node {node} still holds {held} slots reserved for coordinators")]
    Reserved {
        /// The seed.
        seed: u64,
        /// The member.
        node: NodeId,
        /// How many.
        held: usize,
    },
    /// A restarted member lost a part it acknowledged, or could not be reopened.
    #[error("seed {seed}: node {node} after its restart: {what}")]
    Restart {
        /// The seed.
        seed: u64,
        /// The member.
        node: NodeId,
        /// What was lost or failed.
        what: String,
    },
    /// The simulation could not carry on (a plan refused, a database did not open).
    #[error("seed {seed}: {what}")]
    Setup {
        /// The seed.
        seed: u64,
        /// What failed.
        what: String,
    },
}

/// A finished run.
#[derive(Debug)]
pub struct DataSimRun {
    /// The options it ran with.
    pub options: DataSimOptions,
    /// Every attempt.
    pub history: History,
    /// What happened, one line per event (crashes, failovers, promotions, copies, restarts).
    pub events: Vec<String>,
    /// Attempts that committed.
    pub committed: usize,
    /// Recovery decisions carried out (commits, aborts).
    pub decided: (usize, usize),
    /// Read timestamps moved forward by the members' coordinators (`ordo::Stats::extensions`;
    /// members that crashed took theirs with them).
    pub extensions: u64,
    /// The first failure of the checks that do not need the checker.
    pub failure: Option<DataSimFailure>,
}

impl DataSimRun {
    /// Every check: the structural ones, then the checker.
    ///
    /// # Errors
    /// The first check that failed.
    pub fn check(self) -> Result<(), DataSimFailure> {
        if let Some(f) = self.failure {
            return Err(f);
        }
        ordo_check::check_strict_serializable(&self.history).map_err(|v| DataSimFailure::Checker {
            seed: self.options.seed,
            violation: v.to_string(),
        })
    }
}

/// The registers of the pointers, numbered apart from the keys.
const POINTER_KEY_BASE: u64 = 1_000;
/// Pointers per member at the start.
const POINTERS_PER_REGION: usize = 1;

/// What one client transaction does.
#[derive(Clone, Debug)]
enum Work {
    /// Reads `reads` keys and writes new tags to the first `writes` of them.
    Registers { reads: Vec<usize>, writes: usize },
    /// Moves pointer `pointer` to a new cell allocated near key `near`, freeing the old one.
    Move { pointer: usize, near: usize },
}

/// What a node must be of a message's region to serve it (`NodeHandler`'s checks).
#[derive(Clone, Copy, Debug)]
enum Role {
    Primary,
    Backup,
    Any,
}

/// A one-way message waiting in the network.
#[derive(Clone, Copy, Debug)]
enum OneWay {
    CommitPrimary { key: TxKey, wts: Timestamp },
    Truncate { key: TxKey },
    Discard { key: TxKey },
}

/// A member.
struct SimNode {
    id: NodeId,
    /// The database; replaced when the member restarts.
    db: Mutex<Option<SimDb>>,
    /// The storage of the current incarnation.
    storage: Mutex<Arc<FaultStorage>>,
    /// The files, across incarnations.
    disk: Arc<dyn Storage>,
    remote: Arc<SimRemote>,
}

/// The simulation's mutable state; never held across a call into a database.
#[derive(Debug)]
struct State {
    rng: SimRng,
    config: ClusterConfig,
    /// Routing: per region, the primary that serves it (`None` while its promotion is gated).
    primary: BTreeMap<u16, Option<NodeId>>,
    /// Promoted regions not served yet.
    gated: Vec<(u16, NodeId)>,
    alive: BTreeSet<NodeId>,
    /// Crashed, and no failover has removed them yet.
    crashed: BTreeSet<NodeId>,
    /// Crashed and removed, to be restarted from their storage.
    to_restart: Vec<NodeId>,
    queue: VecDeque<(NodeId, NodeId, OneWay)>,
    /// Messages sent so far.
    steps: u64,
    /// The message at which each crash strikes, and whom (`None`: the sender).
    crash_at: VecDeque<(u64, Option<NodeId>)>,
    depth: u32,
    /// Parts each member acknowledged: (member, address, version) of every written object.
    acked: Vec<(NodeId, Addr, Timestamp)>,
    next_tag: u64,
    events: Vec<String>,
    decided: (usize, usize),
    failure: Option<DataSimFailure>,
}

/// The simulated cluster.
struct World {
    options: DataSimOptions,
    nodes: Vec<SimNode>,
    st: Mutex<State>,
    recorder: Recorder,
    keys: Mutex<Vec<Addr>>,
    /// Objects holding the address of a cell (see [`Work::Move`]).
    pointers: Mutex<Vec<Addr>>,
    /// The true time.
    time: Arc<AtomicU64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn gone(region: u16, step: ParticipantStep) -> Error {
    Error::Participant { owner: region, region, step, cause: ParticipantFailure::PeerGone }
}

fn not_owner(region: u16, step: ParticipantStep) -> Error {
    Error::Participant { owner: region, region, step, cause: ParticipantFailure::NotOwner }
}

/// Runs one seed.
pub fn run(options: DataSimOptions) -> DataSimRun {
    let world = match World::build(options.clone()) {
        Ok(w) => w,
        Err(what) => {
            return DataSimRun {
                failure: Some(DataSimFailure::Setup { seed: options.seed, what }),
                options,
                history: History::default(),
                events: Vec::new(),
                committed: 0,
                decided: (0, 0),
                extensions: 0,
            };
        }
    };
    world.drive();
    let history = world.recorder.history();
    let st = lock(&world.st);
    let committed =
        history.txns().iter().filter(|t| t.outcome == ordo_check::Outcome::Committed).count();
    let extensions =
        world.nodes.iter().filter_map(|n| lock(&n.db).as_ref().map(|db| db.stats().extensions));
    let run = DataSimRun {
        options,
        history,
        events: st.events.clone(),
        committed,
        decided: st.decided,
        extensions: extensions.sum(),
        failure: None,
    };
    drop(st);
    let failure = lock(&world.st).failure.take();
    // Break the cycle world → node → remote → world (the remotes hold weak references, the
    // databases hold the remotes).
    for n in &world.nodes {
        lock(&n.db).take();
    }
    DataSimRun { failure, ..run }
}

impl World {
    fn build(options: DataSimOptions) -> Result<Arc<World>, String> {
        let members: Vec<Member> = (1..=options.nodes as u64)
            .map(|id| Member { id, addr: format!("127.0.0.1:{}", 7000 + id) })
            .collect();
        let config = ClusterConfig::initial(members, 1);
        let mut rng = SimRng::new(options.seed);
        let time = Arc::new(AtomicU64::new(1_000_000_000));
        let mut crash_at = VecDeque::new();
        let mut at = 0;
        for _ in 0..options.crashes {
            at += 40 + rng.range(0, 160);
            let whom =
                if rng.range(0, 1) == 0 { None } else { Some(rng.range(1, options.nodes as u64)) };
            crash_at.push_back((at, whom));
        }
        let world = Arc::new_cyclic(|weak: &Weak<World>| {
            let nodes = config
                .members
                .iter()
                .map(|m| {
                    let disk: Arc<dyn Storage> = Arc::new(MemStorage::new());
                    SimNode {
                        id: m.id,
                        db: Mutex::new(None),
                        storage: Mutex::new(Arc::new(FaultStorage::over(disk.clone()))),
                        disk,
                        remote: Arc::new(SimRemote {
                            me: m.id,
                            world: weak.clone(),
                            attempts: Mutex::new(HashMap::new()),
                            reserved: Reservations::default(),
                        }),
                    }
                })
                .collect();
            let primary =
                config.regions.iter().map(|p| (p.region as u16, Some(p.primary))).collect();
            World {
                nodes,
                st: Mutex::new(State {
                    alive: config.members.iter().map(|m| m.id).collect(),
                    rng: SimRng::new(options.seed.wrapping_mul(0x2545_f491_4f6c_dd1d)),
                    config: config.clone(),
                    primary,
                    gated: Vec::new(),
                    crashed: BTreeSet::new(),
                    to_restart: Vec::new(),
                    queue: VecDeque::new(),
                    steps: 0,
                    crash_at,
                    depth: 0,
                    acked: Vec::new(),
                    next_tag: 1,
                    events: Vec::new(),
                    decided: (0, 0),
                    failure: None,
                }),
                options,
                recorder: Recorder::new(),
                keys: Mutex::new(Vec::new()),
                pointers: Mutex::new(Vec::new()),
                time: time.clone(),
            }
        });
        for (i, n) in world.nodes.iter().enumerate() {
            let offset = rng.range(0, 2 * BOUNDARY_NANOS) as i64 - BOUNDARY_NANOS as i64;
            let clock = SimClock { time: time.clone(), offset_nanos: offset };
            let home = vec![config.regions[i].region as u16];
            let storage = lock(&n.storage).clone();
            let db = Ordo::with_remote(
                engine_config(n.id, storage),
                clock,
                n.remote.clone() as Arc<dyn Remote>,
                home,
            )
            .map_err(|e| format!("opening node {}: {e}", n.id))?;
            *lock(&n.db) = Some(db);
        }
        // The keys: each member allocates its own in its home region, with nothing nested and
        // no crash (the steps count from the end of the setup).
        lock(&world.st).depth = NEST_MAX;
        let mut keys = Vec::new();
        let mut pointers = Vec::new();
        for n in &world.nodes {
            let db = world.db(n.id).ok_or("no database")?;
            for _ in 0..KEYS_PER_REGION {
                let addr = db
                    .run(|tx| tx.alloc(&0u64))
                    .map_err(|e| format!("allocating a key at node {}: {e}", n.id))?;
                keys.push(addr);
            }
            for _ in 0..POINTERS_PER_REGION {
                let addr = db
                    .run(|tx| {
                        let cell = tx.alloc(&0u64)?;
                        tx.alloc(&cell.to_raw())
                    })
                    .map_err(|e| format!("allocating a pointer at node {}: {e}", n.id))?;
                pointers.push(addr);
            }
        }
        world.flush();
        *lock(&world.keys) = keys;
        *lock(&world.pointers) = pointers;
        {
            let mut st = lock(&world.st);
            st.depth = 0;
            st.steps = 0;
        }
        Ok(world)
    }

    fn db(&self, node: NodeId) -> Option<SimDb> {
        let n = self.nodes.iter().find(|n| n.id == node)?;
        lock(&n.db).clone()
    }

    fn alive(&self, node: NodeId) -> bool {
        lock(&self.st).alive.contains(&node)
    }

    fn event(&self, line: String) {
        lock(&self.st).events.push(line);
    }

    fn trace(&self, line: impl FnOnce() -> String) {
        if self.options.trace {
            let mut st = lock(&self.st);
            let line = format!("step {} depth {}: {}", st.steps, st.depth, line());
            st.events.push(line);
        }
    }

    /// The top level: transactions one after another, failovers, copies and restarts between
    /// them, then a final read of every key.
    fn drive(&self) {
        for _ in 0..self.options.txns {
            let coordinator = self.pick_live();
            let Some(coordinator) = coordinator else { break };
            self.transaction(coordinator, ATTEMPTS_MAX);
            self.between();
        }
        self.flush();
        self.between();
        self.flush();
        if let Some(node) = self.pick_live() {
            self.final_read(node);
        }
        self.flush();
        self.check_replicas();
        self.check_reservations();
    }

    /// Once every transaction is done, no live member holds a slot reserved for a remote
    /// coordinator: live ones locked or released theirs, and recovery gave back the dead ones'.
    fn check_reservations(&self) {
        let alive = lock(&self.st).alive.clone();
        for &n in &alive {
            let Some(db) = self.db(n) else { continue };
            let held = db.serve_stats().reserved;
            if held > 0 {
                lock(&self.st).failure.get_or_insert(DataSimFailure::Reserved {
                    seed: self.options.seed,
                    node: n,
                    held,
                });
            }
        }
    }

    /// Between top-level transactions: the failover when a member crashed, then copies to new
    /// backups, then restarts of removed members.
    fn between(&self) {
        if !lock(&self.st).crashed.is_empty() {
            self.failover();
        }
        self.ungate();
        let plan = {
            let st = lock(&self.st);
            if st.gated.is_empty() { rereplicate::plan(&st.config) } else { None }
        };
        if let Some(plan) = plan {
            // The copier reads past locks only once they are released: the queued
            // COMMIT-PRIMARYs release them.
            self.flush();
            self.rereplicate(plan);
        }
        let restart: Vec<NodeId> = std::mem::take(&mut lock(&self.st).to_restart);
        for node in restart {
            self.restart(node);
        }
    }

    fn pick_live(&self) -> Option<NodeId> {
        let mut st = lock(&self.st);
        let live: Vec<NodeId> =
            st.config.members.iter().map(|m| m.id).filter(|id| st.alive.contains(id)).collect();
        if live.is_empty() {
            return None;
        }
        let i = st.rng.range(0, live.len() as u64 - 1) as usize;
        Some(live[i])
    }

    /// One client transaction at `node`, retried on aborts up to `attempts` times. One in four
    /// moves a pointer ([`Work::Move`]); the others read one to three keys and, two times in
    /// three, write new values to one or two of them.
    fn transaction(&self, node: NodeId, attempts: u32) {
        let keys = lock(&self.keys).clone();
        let pointers = lock(&self.pointers).clone();
        if keys.is_empty() {
            return;
        }
        let work = {
            let mut st = lock(&self.st);
            if !pointers.is_empty() && st.rng.range(0, 3) == 0 {
                let pointer = st.rng.range(0, pointers.len() as u64 - 1) as usize;
                let near = st.rng.range(0, keys.len() as u64 - 1) as usize;
                Work::Move { pointer, near }
            } else {
                let mut pool: Vec<usize> = (0..keys.len()).collect();
                let count = st.rng.range(1, 3) as usize;
                let mut reads = Vec::new();
                for _ in 0..count.min(pool.len()) {
                    let i = st.rng.range(0, pool.len() as u64 - 1) as usize;
                    reads.push(pool.remove(i));
                }
                let writes = if st.rng.range(0, 2) == 0 {
                    0
                } else {
                    st.rng.range(1, reads.len().min(2) as u64) as usize
                };
                Work::Registers { reads, writes }
            }
        };
        for _ in 0..attempts {
            let Some(db) = self.db(node) else { return };
            if !self.alive(node) {
                return;
            }
            let mut rec = self.recorder.begin(node as u32);
            let id = rec.id();
            self.trace(|| format!("node {node} begins {id:?}: {work:?}"));
            // A transaction that will write says so: it then reads heads only (no old versions,
            // which it could never commit), so a newer head makes it extend its read timestamp
            // through the remote participants or abort.
            let will_write = !matches!(work, Work::Registers { writes: 0, .. });
            let options = ordo::Options { will_write, ..ordo::Options::default() };
            let mut tx = match db.begin_with(options) {
                Ok(tx) => tx,
                Err(_) => {
                    rec.abort();
                    return;
                }
            };
            if let Err(_e) = self.body(&work, &mut tx, &mut rec, &keys, &pointers) {
                drop(tx);
                // Nothing was installed: reads and buffered writes only.
                if self.alive(node) {
                    rec.abort()
                } else {
                    rec.unknown()
                }
                self.deliver(usize::MAX);
                continue;
            }
            let committed = tx.commit();
            self.trace(|| {
                let r = committed.as_ref().map(|i| i.wts).map_err(ToString::to_string);
                format!("node {node}: {id:?} commit: {r:?}")
            });
            match committed {
                Ok(info) if self.alive(node) => {
                    match info.wts {
                        Some(wts) => rec.commit_at(wts.as_nanos()),
                        None => rec.commit(),
                    }
                    return;
                }
                Ok(_) => {
                    rec.unknown();
                    return;
                }
                Err(Error::Aborted(_)) if self.alive(node) => {
                    rec.abort();
                    self.deliver(usize::MAX);
                }
                Err(_) => {
                    // A participant failed: before the commit point the attempt aborted, after
                    // it committed; either way the client cannot tell.
                    rec.unknown();
                    if !self.alive(node) {
                        return;
                    }
                    self.deliver(usize::MAX);
                }
            }
        }
    }

    /// A fresh tag: every value written anywhere is unique.
    fn tag(&self) -> u64 {
        let mut st = lock(&self.st);
        st.next_tag += 1;
        st.next_tag
    }

    /// The operations of one attempt, recorded as they return.
    fn body(
        &self,
        work: &Work,
        tx: &mut ordo::Tx<'_, SimClock>,
        rec: &mut ordo_check::TxnRecorder<'_>,
        keys: &[Addr],
        pointers: &[Addr],
    ) -> Result<(), Error> {
        match work {
            Work::Registers { reads, writes } => {
                for &k in reads {
                    let v = tx.read::<u64>(keys[k])?;
                    rec.read_register(k as u64, (v != 0).then_some(v));
                }
                for &k in reads.iter().take(*writes) {
                    let tag = self.tag();
                    tx.write(keys[k], &tag)?;
                    rec.write_register(k as u64, tag);
                }
            }
            Work::Move { pointer, near } => {
                // The pointer's value is the address of a cell holding the register's tag:
                // a new cell replaces it and the old one is freed, so a slot handed out twice
                // (a promoted region's rebuilt free-slot state, a reservation of a dead
                // coordinator) shows as one register reading another's tag.
                let cell = Addr::from_raw(tx.read::<u64>(pointers[*pointer])?);
                let old = tx.read::<u64>(cell)?;
                rec.read_register(POINTER_KEY_BASE + *pointer as u64, (old != 0).then_some(old));
                let tag = self.tag();
                let fresh = tx.alloc_near(keys[*near], &tag)?;
                tx.write(pointers[*pointer], &fresh.to_raw())?;
                tx.free(cell)?;
                rec.write_register(POINTER_KEY_BASE + *pointer as u64, tag);
            }
        }
        Ok(())
    }

    /// Reads every key in one transaction, retrying until it commits (bounded).
    fn final_read(&self, node: NodeId) {
        let keys = lock(&self.keys).clone();
        let pointers = lock(&self.pointers).clone();
        for _ in 0..64 {
            let Some(db) = self.db(node) else { return };
            let mut rec = self.recorder.begin(u32::MAX);
            let Ok(mut tx) = db.begin() else {
                rec.abort();
                return;
            };
            let mut ok = true;
            for (k, &addr) in keys.iter().enumerate() {
                match tx.read::<u64>(addr) {
                    Ok(v) => rec.read_register(k as u64, (v != 0).then_some(v)),
                    Err(_) => {
                        ok = false;
                        break;
                    }
                }
            }
            for (p, &addr) in pointers.iter().enumerate() {
                if !ok {
                    break;
                }
                let read = tx.read::<u64>(addr).and_then(|c| tx.read::<u64>(Addr::from_raw(c)));
                match read {
                    Ok(v) => rec.read_register(POINTER_KEY_BASE + p as u64, (v != 0).then_some(v)),
                    Err(_) => ok = false,
                }
            }
            if ok && tx.commit().is_ok() {
                rec.commit();
                return;
            }
            rec.abort();
            self.flush();
            self.between();
        }
        self.event("the final read never committed".into());
    }

    /// The scheduler, at a message from `from`: maybe a crash, a nested transaction, queued
    /// messages delivered, the failover.
    fn interleave(&self, from: NodeId) {
        let (crash, nest, deliver, failover) = {
            let mut st = lock(&self.st);
            st.steps += 1;
            let crash = match st.crash_at.front() {
                Some(&(at, whom)) if st.steps >= at => {
                    st.crash_at.pop_front();
                    Some(whom.unwrap_or(from))
                }
                _ => None,
            };
            let nest = st.depth < NEST_MAX && st.rng.range(0, 3) == 0;
            let deliver = if st.rng.range(0, 3) == 0 { st.rng.range(1, 3) as usize } else { 0 };
            let failover = !st.crashed.is_empty() && st.rng.range(0, 2) == 0;
            (crash, nest, deliver, failover)
        };
        if let Some(node) = crash {
            self.crash(node);
        }
        if deliver > 0 {
            self.deliver(deliver);
        }
        if failover {
            self.failover();
        }
        self.ungate();
        if nest && let Some(node) = self.pick_live() {
            lock(&self.st).depth += 1;
            self.transaction(node, 1);
            lock(&self.st).depth -= 1;
        }
    }

    /// A call from `from` to `to`: the scheduler runs, the call is delivered if both are alive,
    /// the scheduler runs again, and the answer returns if both still are.
    fn call<T>(
        &self,
        from: NodeId,
        to: NodeId,
        (region, step, role): (u16, ParticipantStep, Role),
        f: impl FnOnce(&SimDb) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.interleave(from);
        if !self.alive(from) || !self.alive(to) {
            self.trace(|| format!("{from} -> {to}: {step:?} of region {region} lost"));
            return Err(gone(region, step));
        }
        if !self.holds(to, region, role) {
            self.trace(|| format!("{from} -> {to}: {step:?} of region {region}: not {role:?}"));
            return Err(not_owner(region, step));
        }
        let db = self.db(to).ok_or_else(|| gone(region, step))?;
        let answer = f(&db);
        self.trace(|| {
            let ok = answer.as_ref().map(drop).map_err(ToString::to_string);
            format!("{from} -> {to}: {step:?} of region {region}: {ok:?}")
        });
        self.interleave(from);
        if !self.alive(from) || !self.alive(to) {
            return Err(gone(region, step));
        }
        answer
    }

    /// Whether `node` serves `region` in `role` now, as `NodeHandler` checks before it serves
    /// a message (`not_primary`, `is_backup`).
    fn holds(&self, node: NodeId, region: u16, role: Role) -> bool {
        let st = lock(&self.st);
        match role {
            Role::Any => true,
            Role::Primary => st.primary.get(&region).copied().flatten() == Some(node),
            Role::Backup => st
                .config
                .regions
                .iter()
                .any(|p| p.region == u32::from(region) && p.backups.contains(&node)),
        }
    }

    /// Queues a one-way message.
    fn send(&self, from: NodeId, to: NodeId, msg: OneWay) {
        self.interleave(from);
        lock(&self.st).queue.push_back((from, to, msg));
    }

    /// Delivers up to `count` queued one-way messages, oldest first. A message whose sender or
    /// receiver crashed is lost.
    fn deliver(&self, count: usize) {
        for _ in 0..count {
            let Some((from, to, msg)) = lock(&self.st).queue.pop_front() else { return };
            if !self.alive(from) || !self.alive(to) {
                continue;
            }
            let Some(db) = self.db(to) else { continue };
            self.trace(|| format!("{from} -> {to}: delivered {msg:?}"));
            match msg {
                OneWay::CommitPrimary { key, wts } => {
                    // Refused by a node that is not the primary (`NodeHandler`); a primary that
                    // no longer holds the lock (recovery released it) ignores it.
                    if self.holds(to, key.region, Role::Primary) {
                        let _ = db.serve_commit_primary(key, wts);
                    }
                }
                OneWay::Truncate { key } => {
                    let _ = db.serve_truncate(key);
                }
                OneWay::Discard { key } => {
                    db.serve_discard(key);
                }
            }
        }
    }

    /// Delivers every queued message.
    fn flush(&self) {
        self.deliver(usize::MAX);
    }

    /// `node` crashes: it sends and receives nothing more, and its storage stops.
    fn crash(&self, node: NodeId) {
        let mut st = lock(&self.st);
        if !st.alive.contains(&node) || st.alive.len() <= 1 {
            return;
        }
        // Never more crashes than the cluster survives: one member of each region must live.
        let after: BTreeSet<NodeId> = st.alive.iter().copied().filter(|&n| n != node).collect();
        let survives = st
            .config
            .regions
            .iter()
            .all(|p| after.contains(&p.primary) || p.backups.iter().any(|b| after.contains(b)));
        if !survives || !st.crashed.is_empty() {
            return;
        }
        st.alive.remove(&node);
        st.crashed.insert(node);
        let line = format!("step {}: node {node} crashes", st.steps);
        st.events.push(line);
        drop(st);
        if let Some(n) = self.nodes.iter().find(|n| n.id == node) {
            lock(&n.storage).freeze();
        }
    }

    /// The failover of the crashed members: plan, recovery vote, gated promotion.
    fn failover(&self) {
        let (before, removed, initiator) = {
            let st = lock(&self.st);
            if st.crashed.is_empty() {
                return;
            }
            let Some(&initiator) = st.alive.iter().next() else { return };
            (st.config.clone(), st.crashed.clone(), initiator)
        };
        let plan = match failover::plan(&before, &removed, initiator) {
            Ok(plan) => plan,
            Err(e) => {
                let mut st = lock(&self.st);
                st.failure.get_or_insert(DataSimFailure::Setup {
                    seed: self.options.seed,
                    what: format!("failover plan refused: {e}"),
                });
                st.crashed.clear();
                return;
            }
        };
        let survivors: Vec<NodeId> = plan.next.members.iter().map(|m| m.id).collect();
        {
            let mut st = lock(&self.st);
            for &(region, node) in &plan.promoted {
                st.primary.insert(region as u16, None);
                st.gated.push((region as u16, node));
            }
            st.config = plan.next.clone();
            st.crashed.clear();
            st.to_restart.extend(removed.iter().copied());
            let line = format!(
                "step {}: failover to seq {} removes {removed:?}, promotes {:?}",
                st.steps, plan.next.seq, plan.promoted
            );
            st.events.push(line);
        }
        // Recovery: every survivor's state about the removed coordinators, one vote, carried
        // out everywhere.
        let coordinators: Vec<u64> = removed.iter().copied().collect();
        let states: Vec<_> = survivors
            .iter()
            .filter_map(|&n| self.db(n))
            .map(|db| db.serve_recovery_state(&coordinators))
            .collect();
        let mut decisions = recovery::decide(&before, &coordinators, &states);
        if self.options.vote_aborts_undecided {
            // Left out: rule 3. Only evidence of a commit commits.
            let evidence: BTreeSet<(u64, u64)> = states
                .iter()
                .flat_map(|s| s.evidence.iter())
                .filter(|e| {
                    matches!(e.seen, ordo::remote::Seen::Installed | ordo::remote::Seen::Applied)
                })
                .map(|e| (e.coordinator, e.tx))
                .collect();
            for d in &mut decisions {
                if !evidence.contains(&(d.coordinator, d.tx)) {
                    d.commit = None;
                }
            }
        }
        let commits = decisions.iter().filter(|d| d.commit.is_some()).count();
        {
            let mut st = lock(&self.st);
            st.decided.0 += commits;
            st.decided.1 += decisions.len() - commits;
            let line = format!(
                "recovery decides {} transactions: {commits} commit, {} abort",
                decisions.len(),
                decisions.len() - commits
            );
            st.events.push(line);
        }
        for &n in &survivors {
            if let Some(db) = self.db(n) {
                let resolved = db.serve_resolve(&decisions);
                if let Some((key, e)) = resolved.errors.first() {
                    let mut st = lock(&self.st);
                    st.failure.get_or_insert(DataSimFailure::Setup {
                        seed: self.options.seed,
                        what: format!("node {n} could not carry out the decision of {key:?}: {e}"),
                    });
                }
            }
        }
        self.ungate();
    }

    /// Serves the promoted regions whose records are all resolved.
    fn ungate(&self) {
        let gated = lock(&self.st).gated.clone();
        for (region, node) in gated {
            let Some(db) = self.db(node) else { continue };
            if !self.options.promote_before_resolved && db.serve_pending_in(region) > 0 {
                continue;
            }
            let since = db.clock().now().hi();
            if let Err(e) = db.promote_region(region, since) {
                let mut st = lock(&self.st);
                st.failure.get_or_insert(DataSimFailure::Setup {
                    seed: self.options.seed,
                    what: format!("node {node} cannot promote region {region}: {e}"),
                });
            }
            let mut st = lock(&self.st);
            st.gated.retain(|&(r, _)| r != region);
            st.primary.insert(region, Some(node));
            let line = format!("step {}: node {node} serves promoted region {region}", st.steps);
            st.events.push(line);
        }
    }

    /// Re-replication: the new configuration, then the primary's copy to the new backup.
    fn rereplicate(&self, plan: failover::Plan) {
        let copies = {
            let mut st = lock(&self.st);
            let before = std::mem::replace(&mut st.config, plan.next.clone());
            let line =
                format!("re-replication to seq {}: regions {:?}", plan.next.seq, plan.degraded);
            st.events.push(line);
            rereplicate_copies(&before, &plan.next)
        };
        for (region, primary, backup) in copies {
            let (Some(from), Some(to)) = (self.db(primary), self.db(backup)) else { continue };
            let send = |images: Vec<rereplicate::Image>| -> Result<(), Error> {
                for i in &images {
                    to.serve_replica(i.addr, i.version, i.len_bytes as usize, &i.words)?;
                }
                Ok(())
            };
            // A lock nobody releases would keep the copier waiting: give up after a while
            // (the replica check then reports the region).
            let polls = std::cell::Cell::new(0u32);
            let stop = || {
                polls.set(polls.get() + 1);
                polls.get() > COPY_POLLS_MAX
            };
            if let Err(e) = rereplicate::copy_region(&from, region, send, stop) {
                let mut st = lock(&self.st);
                st.failure.get_or_insert(DataSimFailure::Setup {
                    seed: self.options.seed,
                    what: format!("copying region {region} to node {backup}: {e}"),
                });
            }
        }
    }

    /// Restarts a crashed member from its storage after a power loss, and checks that it
    /// holds every part it acknowledged. It does not rejoin (a restarted member's rejoin is
    /// not built).
    fn restart(&self, node: NodeId) {
        let Some(n) = self.nodes.iter().find(|n| n.id == node) else { return };
        let seed = lock(&self.st).rng.next_u64();
        let old = lock(&n.storage).clone();
        lock(&n.db).take();
        let mode = seed % 3;
        let undone = match mode {
            0 => old.power_loss(),
            1 => old.power_loss_keeping(seed | 1),
            _ => old.power_loss_torn(seed),
        };
        let fresh = Arc::new(FaultStorage::over(n.disk.clone()));
        *lock(&n.storage) = fresh.clone();
        let clock = SimClock { time: self.time.clone(), offset_nanos: 0 };
        let opened = Ordo::with_remote(
            engine_config(node, fresh),
            clock,
            n.remote.clone() as Arc<dyn Remote>,
            Vec::new(),
        );
        let what = match (&undone, opened) {
            (Err(e), _) => Some(format!("power loss failed: {e}")),
            (_, Err(e)) => Some(format!("reopening failed: {e}")),
            (Ok(undone), Ok(db)) => {
                let acked: Vec<(Addr, Timestamp)> = lock(&self.st)
                    .acked
                    .iter()
                    .filter(|a| a.0 == node)
                    .map(|a| (a.1, a.2))
                    .collect();
                let mut words = Vec::new();
                let lost = acked.iter().find_map(|&(addr, wts)| {
                    match db.read_version(addr, Timestamp::MAX, &mut words) {
                        Ok(e) if e.header.ts() >= wts => None,
                        Ok(e) => Some((addr, wts, format!("version {:?}", e.header.ts()))),
                        Err(e) => Some((addr, wts, e.to_string())),
                    }
                });
                self.event(format!(
                    "node {node} restarts after a power loss (mode {mode}, {undone} writes undone): \
                     {} acknowledged parts checked",
                    acked.len()
                ));
                lost.map(|(addr, wts, found)| {
                    format!(
                        "the part of {addr:?} at {wts:?} it acknowledged is lost (mode {mode}): \
                         {found}"
                    )
                })
            }
        };
        if let Some(what) = what {
            lock(&self.st).failure.get_or_insert(DataSimFailure::Restart {
                seed: self.options.seed,
                node,
                what,
            });
        }
    }

    /// With every message delivered and every record resolved, each region's primary and
    /// backups hold the same objects.
    fn check_replicas(&self) {
        let (config, alive, pending) = {
            let st = lock(&self.st);
            (st.config.clone(), st.alive.clone(), !st.gated.is_empty())
        };
        if pending {
            return;
        }
        for p in &config.regions {
            let region = p.region as u16;
            let Some(primary) = self.db(p.primary).filter(|_| alive.contains(&p.primary)) else {
                continue;
            };
            let want = primary.region_digest(region);
            for &b in &p.backups {
                let Some(db) = self.db(b).filter(|_| alive.contains(&b)) else { continue };
                let pending = db.serve_pending_in(region);
                let got = db.region_digest(region);
                if got != want && pending == 0 {
                    let mut st = lock(&self.st);
                    st.failure.get_or_insert(DataSimFailure::Replicas {
                        seed: self.options.seed,
                        region,
                        what: format!(
                            "primary {} digest {want:?}, backup {b} digest {got:?}",
                            p.primary
                        ),
                    });
                }
            }
        }
    }
}

/// The copies a re-replication starts: (region, primary, new backup).
fn rereplicate_copies(before: &ClusterConfig, after: &ClusterConfig) -> Vec<(u16, NodeId, NodeId)> {
    let mut out = Vec::new();
    for p in &after.regions {
        let old = before.regions.iter().find(|q| q.region == p.region);
        for &b in &p.backups {
            if old.is_none_or(|q| !q.backups.contains(&b)) {
                out.push((p.region as u16, p.primary, b));
            }
        }
    }
    out
}

/// A member's engine: durable in sync mode on `storage`, with no background threads.
fn engine_config(node: NodeId, storage: Arc<FaultStorage>) -> ordo::Config {
    let mut durable = ordo::durable::DurableConfig::new(
        PathBuf::from(format!("/node-{node}")),
        ordo::durable::Mode::Sync,
    );
    durable.storage = storage;
    durable.group_wait_us = 0;
    durable.checkpoint_interval_ms = 0;
    durable.preallocate_segments = false;
    durable.replay_threads = 1;
    ordo::Config {
        heap: ordo::heap::HeapConfig {
            region_bytes: REGION_BYTES,
            regions_max: 16,
            ..Default::default()
        },
        versions: ordo::Versions::Multi,
        gc_interval_us: 0,
        threads_max: 64,
        durability: Some(durable),
        ..ordo::Config::default()
    }
}

/// The per-attempt routing a coordinator keeps (`owners.rs`'s `Attempt`).
#[derive(Debug, Default)]
struct Attempt {
    /// Per region, the node that took the LOCK.
    locked_at: BTreeMap<u16, NodeId>,
    /// Per region, the backups the COMMIT-BACKUP went to.
    sent: BTreeMap<u16, Vec<NodeId>>,
    /// Every region the attempt writes.
    regions: Vec<u16>,
    /// A COMMIT-PRIMARY was acknowledged.
    primary_acked: bool,
}

/// A member's [`Remote`]: the simulated network.
pub struct SimRemote {
    me: NodeId,
    world: Weak<World>,
    attempts: Mutex<HashMap<u64, Attempt>>,
    /// Slots reserved at other members and not consumed yet.
    reserved: Reservations,
}

impl std::fmt::Debug for SimRemote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimRemote").field("me", &self.me).finish_non_exhaustive()
    }
}

impl SimRemote {
    fn world(&self, region: u16, step: ParticipantStep) -> Result<Arc<World>, Error> {
        self.world.upgrade().ok_or_else(|| gone(region, step))
    }

    fn primary(w: &World, region: u16, step: ParticipantStep) -> Result<NodeId, Error> {
        lock(&w.st).primary.get(&region).copied().flatten().ok_or_else(|| not_owner(region, step))
    }

    fn key(&self, tx: u64, region: u16) -> TxKey {
        TxKey { coordinator: self.me, tx, region }
    }

    fn locked_at(&self, tx: u64, region: u16) -> Option<NodeId> {
        lock(&self.attempts).get(&tx).and_then(|a| a.locked_at.get(&region).copied())
    }

    fn sent(&self, tx: u64, region: u16) -> Vec<NodeId> {
        lock(&self.attempts).get(&tx).and_then(|a| a.sent.get(&region).cloned()).unwrap_or_default()
    }

    fn region_of(part: &WritePart<'_>) -> u16 {
        part.entries().first().map_or(0, |e| e.addr.region())
    }
}

impl Remote for SimRemote {
    fn is_local_primary(&self, region: u16) -> bool {
        self.world
            .upgrade()
            .is_some_and(|w| lock(&w.st).primary.get(&region).copied().flatten() == Some(self.me))
    }

    fn read(&self, addr: Addr, at: ReadAt, out: &mut Vec<u64>) -> Result<ReadEntry, Error> {
        let region = addr.region();
        let step = ParticipantStep::Read;
        let w = self.world(region, step)?;
        let to = Self::primary(&w, region, step)?;
        w.call(self.me, to, (region, step, Role::Primary), |db| db.serve_read(addr, at, out))
    }

    fn still_newest(&self, read: &ReadEntry, rts: Timestamp) -> Result<bool, Error> {
        let region = read.addr.region();
        let step = ParticipantStep::Read;
        let w = self.world(region, step)?;
        let to = Self::primary(&w, region, step)?;
        w.call(self.me, to, (region, step, Role::Primary), |db| db.serve_still_newest(read, rts))
    }

    fn reserve(&self, near: Option<Addr>, len_bytes: usize) -> Result<(Addr, Timestamp), Error> {
        let step = ParticipantStep::Lock;
        let w = self.world(0, step)?;
        let region = match near {
            Some(a) => a.region(),
            None => {
                let mut st = lock(&w.st);
                let served: Vec<u16> =
                    st.primary.iter().filter(|(_, p)| p.is_some()).map(|(&r, _)| r).collect();
                if served.is_empty() {
                    return Err(not_owner(0, step));
                }
                served[st.rng.range(0, served.len() as u64 - 1) as usize]
            }
        };
        let to = Self::primary(&w, region, step)?;
        let got = w.call(self.me, to, (region, step, Role::Any), |db| {
            db.serve_reserve(self.me, len_bytes)
        });
        if let Ok((addr, _)) = &got {
            self.reserved.insert(*addr);
        }
        got
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
        let w = self.world(region, step)?;
        let to = Self::primary(&w, region, step)?;
        self.reserved.take(addr);
        w.call(self.me, to, (region, step, Role::Primary), |db| db.serve_release(addr))
    }

    fn lock(&self, tx: u64, part: WritePart<'_>) -> Result<(), Error> {
        let wire = PartWire::of(part);
        let region = wire.region().unwrap_or(0);
        let step = ParticipantStep::Lock;
        let w = self.world(region, step)?;
        let to = Self::primary(&w, region, step)?;
        lock(&self.attempts).entry(tx).or_default().locked_at.insert(region, to);
        let key = self.key(tx, region);
        let locked =
            w.call(self.me, to, (region, step, Role::Primary), |db| db.serve_lock(key, &wire));
        if locked.is_ok() {
            self.reserved.consume(&part);
        }
        locked
    }

    fn validate(&self, reads: &[ReadEntry]) -> Result<(), Error> {
        let Some(first) = reads.first() else { return Ok(()) };
        let region = first.addr.region();
        let step = ParticipantStep::Validate;
        let w = self.world(region, step)?;
        let to = Self::primary(&w, region, step)?;
        w.call(self.me, to, (region, step, Role::Primary), |db| db.serve_validate(reads))
    }

    fn writing(&self, tx: u64, regions: &[u16]) {
        lock(&self.attempts).entry(tx).or_default().regions = regions.to_vec();
    }

    fn commit_backup(&self, tx: u64, part: WritePart<'_>, wts: Timestamp) -> Result<(), Error> {
        let wire = PartWire::of(part);
        let region = wire.region().unwrap_or(0);
        let step = ParticipantStep::CommitBackup;
        let w = self.world(region, step)?;
        let (primary, backups) = {
            let st = lock(&w.st);
            let primary = st.primary.get(&region).copied().flatten();
            let backups = st
                .config
                .regions
                .iter()
                .find(|p| p.region == u32::from(region))
                .map(|p| p.backups.clone())
                .unwrap_or_default();
            (primary, backups)
        };
        if !w.options.skip_primary_check
            && let Some(locked) = self.locked_at(tx, region)
            && primary != Some(locked)
        {
            return Err(not_owner(region, step));
        }
        let regions = {
            let mut a = lock(&self.attempts);
            let a = a.entry(tx).or_default();
            a.sent.insert(region, backups.clone());
            if a.regions.is_empty() { vec![region] } else { a.regions.clone() }
        };
        let key = self.key(tx, region);
        let mut acked = Vec::new();
        for b in backups {
            let r = if b == self.me {
                match w.db(b) {
                    Some(db) => db.serve_backup(key, &wire, wts, &regions),
                    None => Err(gone(region, step)),
                }
            } else {
                w.call(self.me, b, (region, step, Role::Backup), |db| {
                    db.serve_backup(key, &wire, wts, &regions)
                })
            };
            match r {
                Ok(()) => {
                    let mut st = lock(&w.st);
                    for e in part.entries() {
                        if e.kind != WriteKind::Free {
                            st.acked.push((b, e.addr, wts));
                        }
                    }
                    acked.push(b);
                }
                Err(e) => {
                    for a in acked {
                        w.send(self.me, a, OneWay::Discard { key });
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn forget_backup(&self, tx: u64, part: WritePart<'_>) {
        let region = Self::region_of(&part);
        let Ok(w) = self.world(region, ParticipantStep::Abort) else { return };
        let key = self.key(tx, region);
        for b in self.sent(tx, region) {
            w.send(self.me, b, OneWay::Discard { key });
        }
    }

    fn commit_primary(&self, tx: u64, region: u16, wts: Timestamp) -> Result<(), Error> {
        let step = ParticipantStep::CommitPrimary;
        let w = self.world(region, step)?;
        let to = match self.locked_at(tx, region) {
            Some(n) => n,
            None => Self::primary(&w, region, step)?,
        };
        if !w.alive(self.me) {
            return Err(gone(region, step));
        }
        let key = self.key(tx, region);
        let must_ack = !w.options.commit_primary_one_way
            && lock(&self.attempts).get(&tx).is_some_and(|a| {
                let recorded_elsewhere =
                    a.sent.values().any(|backups| backups.iter().any(|&b| b != self.me));
                !a.primary_acked && !recorded_elsewhere
            });
        if must_ack {
            w.call(self.me, to, (region, step, Role::Primary), |db| {
                db.serve_commit_primary(key, wts)
            })?;
            lock(&self.attempts).entry(tx).or_default().primary_acked = true;
            return Ok(());
        }
        w.send(self.me, to, OneWay::CommitPrimary { key, wts });
        Ok(())
    }

    fn truncate(&self, tx: u64, region: u16, _wts: Timestamp) -> Result<(), Error> {
        let step = ParticipantStep::Truncate;
        let w = self.world(region, step)?;
        let key = self.key(tx, region);
        for b in self.sent(tx, region) {
            if b == self.me {
                if let Some(db) = w.db(b) {
                    db.serve_truncate(key)?;
                }
            } else {
                w.send(self.me, b, OneWay::Truncate { key });
            }
        }
        Ok(())
    }

    fn abort(&self, tx: u64, part: WritePart<'_>) -> Result<(), Error> {
        let region = Self::region_of(&part);
        if part.entries().is_empty() {
            return Ok(());
        }
        let step = ParticipantStep::Abort;
        let w = self.world(region, step)?;
        let to = match self.locked_at(tx, region) {
            Some(n) => n,
            None => Self::primary(&w, region, step)?,
        };
        let allocs: Vec<Addr> =
            part.entries().iter().filter(|e| e.kind == WriteKind::Alloc).map(|e| e.addr).collect();
        self.reserved.consume(&part);
        let key = self.key(tx, region);
        w.call(self.me, to, (region, step, Role::Primary), |db| db.serve_abort(key, &allocs))
    }
}

#[cfg(test)]
mod tests;
