//! # Failover under load (FaRMv2 §5.5, Table 1 and Fig. 18)
//!
//! `ordo bench failover --kill non-cm|cm|cm+1` starts a local cluster of real `ordo node`
//! processes on loopback with failover on ([`ordo_cluster::local::up`]), runs small
//! read-write transactions against it from client threads, `kill -9`s one node (a non-CM, the
//! CM) or two (the CM and the member after it, on 5 nodes with 2 backups per region so that
//! `f = 2`), keeps the load on for the rest of the run, and reports what it saw.
//!
//! # Workload
//! Accounts spread over every region (each is `[balance, tag]`); a transaction moves one unit
//! between two random accounts: it reads both and writes both, each write carrying a value
//! unique to the attempt (the tag), so every write is a read-modify-write of a register and
//! the checker recovers every version order. Every attempt is recorded for `ordo-check`:
//! committed (with its commit timestamp as the version tag of its writes), aborted (a conflict,
//! or a participant failure before the commit point reached in a read), or unknown (any failure
//! of the commit itself: a participant gone at LOCK, COMMIT-BACKUP or later may leave the
//! transaction committed or not). After a failure naming an owner the thread asks the client
//! to adopt the configuration in force ([`ordo_cluster::client::Client::refresh_config`],
//! bounded, shared by the threads).
//!
//! # Measurements
//! * **Timeline**: commits per 1 ms bucket relative to the kill instant.
//! * **Baseline**: the median, over the non-overlapping [`WINDOW_MS`] windows of the pre-kill
//!   period (after the warm-up), of their mean commits per ms.
//! * **Recovery time**: from the kill to the first instant `t` after the dip (the first window
//!   whose mean is under [`THRESHOLD`] × baseline) such that the window starting at `t` and the
//!   [`HOLD_MS`] ms starting at `t` both average at least [`THRESHOLD`] × baseline
//!   ([`recovery_ms`]). No dip: 0.
//! * **Detection / new configuration**: a monitor thread keeps a connection to every survivor
//!   and asks its status every millisecond: the first instant a survivor works under a newer
//!   configuration, the instant every survivor does, and (CM kills) the instant every
//!   survivor's clock is enabled again.
//! * **Clock-disabled time**: the initiator's own figure (`failover_clock_disabled_us` in its
//!   status metrics, `ordo_cluster::node::FailoverReport::clock_disabled`).
//! * **Checks**: the history is checked for strict serializability; after the run every
//!   account is read through a live member and (a) every acknowledged write must be in the
//!   chain of versions that ends at the final value (no acknowledged transaction lost), (b) the
//!   balances must sum to their initial total; the largest commit timestamp acknowledged before
//!   the kill must be below every commit timestamp of a transaction begun after every survivor
//!   adopted the new configuration.
//!
//! Nothing is hidden: a failed check is reported in [`FailoverResult::problems`], and the run
//! still returns its figures.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ordo::{Addr, Error, Options};
use ordo_check::Recorder;
use ordo_cluster::auth::Secret;
use ordo_cluster::client::{Client, ClientConfig, ClientError};
use ordo_cluster::config::{ClusterConfig, NodeId};
use ordo_cluster::local::{self, ClusterState, LocalError, UpOptions};
use ordo_cluster::transport::{Limits, Peer};
use ordo_cluster::wire::Body;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use serde::Serialize;

/// Width of the smoothing window, in 1 ms buckets.
pub const WINDOW_MS: usize = 10;
/// How long throughput must hold at the threshold to count as recovered, in ms.
pub const HOLD_MS: usize = 50;
/// Full throughput: this fraction of the pre-kill baseline.
pub const THRESHOLD: f64 = 0.9;
/// Load before the measured pre-kill period (connections, caches, the first syncs).
pub const WARMUP: Duration = Duration::from_millis(500);

/// Which node(s) to kill.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum KillMode {
    /// A member that is not the CM (the last member).
    NonCm,
    /// The CM (clock master).
    Cm,
    /// The CM and the member after it, together.
    CmPlusOne,
}

impl KillMode {
    /// The flag's spelling.
    pub fn name(self) -> &'static str {
        match self {
            KillMode::NonCm => "non-cm",
            KillMode::Cm => "cm",
            KillMode::CmPlusOne => "cm+1",
        }
    }

    /// Nodes and backups per region by default: 3 and 1, or 5 and 2 for `cm+1` (f = 2).
    pub fn default_shape(self) -> (usize, usize) {
        match self {
            KillMode::CmPlusOne => (5, 2),
            _ => (3, 1),
        }
    }

    /// The nodes to kill in `config`.
    pub fn targets(self, config: &ClusterConfig) -> Vec<NodeId> {
        let ids: Vec<NodeId> = config.members.iter().map(|m| m.id).collect();
        match self {
            KillMode::NonCm => {
                ids.iter().rev().copied().filter(|&i| i != config.cm).take(1).collect()
            }
            KillMode::Cm => vec![config.cm],
            KillMode::CmPlusOne => {
                let at = ids.iter().position(|&i| i == config.cm).unwrap_or(0);
                let next = ids.get((at + 1) % ids.len().max(1)).copied();
                std::iter::once(config.cm).chain(next.filter(|&n| n != config.cm)).collect()
            }
        }
    }
}

impl std::str::FromStr for KillMode {
    type Err = FailoverError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "non-cm" => Ok(KillMode::NonCm),
            "cm" => Ok(KillMode::Cm),
            "cm+1" => Ok(KillMode::CmPlusOne),
            other => {
                Err(FailoverError::Usage(format!("--kill {other:?}: expected non-cm, cm or cm+1")))
            }
        }
    }
}

impl std::fmt::Display for KillMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What went wrong running the benchmark (a failed check is not an error: see
/// [`FailoverResult::problems`]).
#[derive(Debug, thiserror::Error)]
pub enum FailoverError {
    /// Parameters that cannot work.
    #[error("{0}")]
    Usage(String),
    /// The local cluster could not be started or stopped.
    #[error(transparent)]
    Local(#[from] LocalError),
    /// The client could not connect.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// Loading the accounts failed.
    #[error("loading the accounts: {0}")]
    Load(Error),
    /// A node to kill has no recorded process.
    #[error("node {0} has no recorded process id in cluster.json")]
    NoPid(NodeId),
    /// The cluster reconfigured before the kill: a member missed its lease under load (a
    /// false suspicion), so the lease is too short for this machine.
    #[error(
        "the cluster reconfigured (seq {seq}) before the kill, {at_ms} ms into the run: a false \
         suspicion with a {lease_ms} ms lease on this machine (see the node logs in {dir})"
    )]
    FalseSuspicion {
        /// The configuration it reached.
        seq: u64,
        /// When it was noticed, ms from the start of the load (0: while loading).
        at_ms: u64,
        /// The lease.
        lease_ms: u32,
        /// The cluster directory.
        dir: PathBuf,
    },
    /// The kill itself failed.
    #[error("kill -9 of node {node} (pid {pid}): {reason}")]
    Kill {
        /// The node.
        node: NodeId,
        /// Its process.
        pid: u32,
        /// The OS error.
        reason: String,
    },
}

/// How to run.
#[derive(Clone, Debug)]
pub struct FailoverConfig {
    /// What to kill.
    pub kill: KillMode,
    /// Nodes.
    pub nodes: usize,
    /// Backups per region.
    pub backups: usize,
    /// Lease period.
    pub lease_ms: u32,
    /// Client threads.
    pub threads: usize,
    /// The whole load period (warm-up included).
    pub duration: Duration,
    /// When to kill, from the start of the load.
    pub kill_at: Duration,
    /// Accounts per node.
    pub accounts_per_node: usize,
    /// The cluster directory (node files and logs stay there).
    pub dir: PathBuf,
    /// The `ordo` binary that runs `node`.
    pub binary: PathBuf,
    /// Aggregate clock syncs per second of the nodes.
    pub sync_rate_per_s: u32,
    /// Seed of the account choices.
    pub seed: u64,
}

impl FailoverConfig {
    /// Checks the parameters.
    ///
    /// # Errors
    /// [`FailoverError::Usage`] naming what cannot work.
    pub fn validate(&self) -> Result<(), FailoverError> {
        let killed = if self.kill == KillMode::CmPlusOne { 2 } else { 1 };
        if self.nodes < 2 || self.nodes > 9 {
            return Err(FailoverError::Usage(format!("--nodes {}: 2 to 9", self.nodes)));
        }
        if 2 * (self.nodes - killed) <= self.nodes {
            return Err(FailoverError::Usage(format!(
                "--kill {} on {} nodes leaves no majority; use at least {} nodes",
                self.kill,
                self.nodes,
                2 * killed + 1
            )));
        }
        if self.backups < killed || self.backups >= self.nodes {
            return Err(FailoverError::Usage(format!(
                "--kill {} needs at least {killed} backups per region (and fewer than the nodes); got {}",
                self.kill, self.backups
            )));
        }
        if self.threads == 0 || self.accounts_per_node < 2 {
            return Err(FailoverError::Usage("threads ≥ 1 and accounts per node ≥ 2".into()));
        }
        if self.kill_at < WARMUP + Duration::from_millis(100) || self.kill_at >= self.duration {
            return Err(FailoverError::Usage(format!(
                "--kill-at-ms {} must be at least {} ms and before the end of the run ({} ms)",
                self.kill_at.as_millis(),
                (WARMUP + Duration::from_millis(100)).as_millis(),
                self.duration.as_millis()
            )));
        }
        Ok(())
    }
}

/// One instant relative to the kill, in ms (negative before it).
pub type RelMs = f64;

/// What a run saw.
#[derive(Clone, Debug, Serialize)]
pub struct FailoverResult {
    /// The kill mode.
    pub kill: KillMode,
    /// Nodes, backups per region, lease, client threads.
    pub nodes: usize,
    /// Backups per region.
    pub backups: usize,
    /// Lease period in ms.
    pub lease_ms: u32,
    /// Client threads.
    pub threads: usize,
    /// The nodes killed, and which was the CM.
    pub killed: Vec<NodeId>,
    /// The CM before the kill.
    pub cm_before: NodeId,
    /// The CM after (0 when no survivor answered).
    pub cm_after: NodeId,
    /// Configuration sequence numbers before and after.
    pub seq_before: u64,
    /// The newest sequence number a survivor reported at the end.
    pub seq_after: u64,
    /// First bucket of [`FailoverResult::buckets`], in ms relative to the kill.
    pub first_bucket_ms: i64,
    /// Commits per 1 ms bucket.
    pub buckets: Vec<u32>,
    /// Baseline, commits per ms (module docs).
    pub baseline_per_ms: f64,
    /// Fraction of the pre-kill windows under the threshold (the noise the criterion faces).
    pub prekill_windows_below: f64,
    /// Recovery time in ms (module docs); `None`: not within the run.
    pub recovery_ms: Option<f64>,
    /// First instant a survivor worked under a newer configuration.
    pub new_config_first_ms: Option<RelMs>,
    /// Instant every survivor did.
    pub new_config_all_ms: Option<RelMs>,
    /// Instant every survivor's clock was enabled again after being seen disabled.
    pub clock_reenabled_ms: Option<RelMs>,
    /// Per survivor whose clock was seen disabled by the failover: when (ms from the kill) the
    /// monitor first saw it disabled, and for how long (ms; `None`: still disabled at the end).
    /// Polled about every millisecond, so each figure is within a poll round of the truth.
    pub clocks_seen_disabled: Vec<(NodeId, RelMs, Option<f64>)>,
    /// Other episodes of a survivor's clock seen disabled, before the kill or after the
    /// failover's (a CM fencing itself for a moment when a member's renewal is late).
    pub other_disabled_episodes: usize,
    /// The initiator's clock-disabled time, ms (its `FailoverReport`), and who it was.
    pub clock_disabled_ms: Option<f64>,
    /// The initiator of the reconfiguration.
    pub initiator: Option<NodeId>,
    /// The initiator's time from its decision to the end of its round, ms.
    pub round_total_ms: Option<f64>,
    /// Longest run of 1 ms buckets without a commit after the kill, ms.
    pub longest_gap_ms: usize,
    /// Attempts recorded, committed, aborted, unknown.
    pub attempts: usize,
    /// Committed (acknowledged) transactions.
    pub committed: usize,
    /// Aborted attempts.
    pub aborted: usize,
    /// Attempts whose outcome is unknown.
    pub unknown: usize,
    /// Participant failures seen by the client threads, by step.
    pub participant_failures: Vec<(String, u64)>,
    /// Client threads still inside a transaction [`GRACE`] after the end (abandoned).
    pub stuck_threads: usize,
    /// Time the client threads spent waiting for a disabled client clock, ms (summed).
    pub clock_wait_ms: f64,
    /// Configurations the client adopted.
    pub client_config_changes: u64,
    /// The checker's verdict (`ok` or the violation).
    pub checker: String,
    /// Acknowledged writes missing from the final state.
    pub lost_acknowledged: usize,
    /// Whether the balances sum to their initial total.
    pub sum_conserved: bool,
    /// The final sum and the initial one.
    pub sum: (i64, i64),
    /// Largest commit timestamp acknowledged before the kill, ns.
    pub max_wts_before_ns: Option<u64>,
    /// Smallest commit timestamp of a transaction begun after every survivor adopted the new
    /// configuration, ns.
    pub min_wts_after_ns: Option<u64>,
    /// Whether the final read succeeded (if not, the lost-write and sum checks did not run).
    pub final_read: String,
    /// Every failed check, in words.
    pub problems: Vec<String>,
    /// The cluster directory (node logs).
    pub dir: PathBuf,
}

// ---------------------------------------------------------------------------------------------
// The timeline arithmetic (unit-tested).

/// Counts events at `times_us` (µs relative to the kill) into 1 ms buckets from `from_ms`
/// (inclusive) to `to_ms` (exclusive); events outside are dropped.
pub fn bucket_counts(times_us: &[i64], from_ms: i64, to_ms: i64) -> Vec<u32> {
    let len = usize::try_from(to_ms.saturating_sub(from_ms)).unwrap_or(0);
    let mut buckets = vec![0u32; len];
    for &t in times_us {
        let ms = t.div_euclid(1000);
        if ms >= from_ms
            && ms < to_ms
            && let Ok(i) = usize::try_from(ms - from_ms)
        {
            buckets[i] = buckets[i].saturating_add(1);
        }
    }
    buckets
}

/// Mean of `b[at..at + len]` (0 when it runs past the end).
fn mean(b: &[u32], at: usize, len: usize) -> Option<f64> {
    let s = b.get(at..at + len)?;
    Some(s.iter().map(|&x| f64::from(x)).sum::<f64>() / len.max(1) as f64)
}

/// The baseline (module docs): the median of the non-overlapping `window`-bucket means of
/// `pre`; 0 when `pre` is shorter than a window.
pub fn baseline(pre: &[u32], window: usize) -> f64 {
    let mut means: Vec<f64> = pre
        .chunks_exact(window.max(1))
        .map(|c| c.iter().map(|&x| f64::from(x)).sum::<f64>() / c.len() as f64)
        .collect();
    if means.is_empty() {
        return 0.0;
    }
    means.sort_by(f64::total_cmp);
    let n = means.len();
    if n % 2 == 1 { means[n / 2] } else { (means[n / 2 - 1] + means[n / 2]) / 2.0 }
}

/// The fraction of the non-overlapping `window`-bucket means of `pre` under `level`.
pub fn fraction_below(pre: &[u32], window: usize, level: f64) -> f64 {
    let chunks: Vec<f64> = pre
        .chunks_exact(window.max(1))
        .map(|c| c.iter().map(|&x| f64::from(x)).sum::<f64>() / c.len() as f64)
        .collect();
    if chunks.is_empty() {
        return 0.0;
    }
    chunks.iter().filter(|&&m| m < level).count() as f64 / chunks.len() as f64
}

/// The recovery time in ms (module docs): `post[i]` counts commits in `[i, i+1)` ms after the
/// kill. `Some(0)` when no window dips under `threshold × baseline`; `None` when throughput
/// does not come back (or the run ends too soon after the dip to tell).
pub fn recovery_ms(
    post: &[u32],
    baseline: f64,
    threshold: f64,
    window: usize,
    hold: usize,
) -> Option<usize> {
    let level = threshold * baseline;
    let window = window.max(1);
    let hold = hold.max(window);
    let dip = (0..post.len())
        .map_while(|t| mean(post, t, window).map(|m| (t, m)))
        .find(|&(_, m)| m < level);
    let Some((dip, _)) = dip else { return Some(0) };
    (dip + 1..post.len()).find(|&t| {
        mean(post, t, window).is_some_and(|m| m >= level)
            && mean(post, t, hold).is_some_and(|m| m >= level)
    })
}

/// The longest run of empty buckets in `b`.
pub fn longest_gap(b: &[u32]) -> usize {
    let (mut best, mut run) = (0, 0);
    for &x in b {
        if x == 0 {
            run += 1;
            best = best.max(run);
        } else {
            run = 0;
        }
    }
    best
}

/// One write of an account by an attempt that committed or may have.
#[derive(Clone, Copy, Debug)]
pub struct Write {
    /// The account.
    pub key: u64,
    /// The tag it read (0: the initial value).
    pub prev: u64,
    /// The tag it wrote.
    pub tag: u64,
    /// Acknowledged (the commit returned `Ok`).
    pub acked: bool,
}

/// Acknowledged writes not in the chain of versions ending at `finals` (key → final tag): the
/// chain is followed backwards through `writes` (each tag names its writer, which names the tag
/// it read) down to the initial value.
pub fn lost_acknowledged(writes: &[Write], finals: &HashMap<u64, u64>) -> Vec<Write> {
    let by_tag: HashMap<(u64, u64), u64> =
        writes.iter().map(|w| ((w.key, w.tag), w.prev)).collect();
    let mut chain: HashSet<(u64, u64)> = HashSet::new();
    for (&key, &last) in finals {
        let mut tag = last;
        let mut steps = 0usize;
        while tag != 0 && steps <= writes.len() && chain.insert((key, tag)) {
            steps += 1;
            match by_tag.get(&(key, tag)) {
                Some(&prev) => tag = prev,
                None => break,
            }
        }
    }
    writes.iter().filter(|w| w.acked && !chain.contains(&(w.key, w.tag))).copied().collect()
}

// ---------------------------------------------------------------------------------------------
// The monitor.

/// What the monitor saw, as instants.
#[derive(Default, Debug)]
struct Seen {
    first_new: Option<Instant>,
    all_new: Option<Instant>,
    /// Per survivor, every episode of its clock seen disabled: the first poll that found it
    /// disabled and the first after it that found it enabled again. Episodes before the kill
    /// (a CM fencing itself for a moment under load) are kept apart from the failover's.
    disabled: HashMap<NodeId, Vec<(Instant, Option<Instant>)>>,
}

impl Seen {
    /// Per survivor, the first episode still running at `kill` or starting after it, and how
    /// many other episodes there were.
    fn failover_episodes(&self, kill: Instant) -> Vec<(NodeId, (Instant, Option<Instant>), usize)> {
        let mut out: Vec<_> = self
            .disabled
            .iter()
            .filter_map(|(&id, episodes)| {
                let e = episodes.iter().find(|(_, on)| on.is_none_or(|on| on > kill))?;
                Some((id, *e, episodes.len() - 1))
            })
            .collect();
        out.sort_by_key(|e| e.0);
        out
    }
}

/// Polls the survivors' status every millisecond until `stop` (module docs).
fn monitor(
    state: &ClusterState,
    secret: &Secret,
    survivors: &[NodeId],
    seq_before: u64,
    stop: &AtomicBool,
    newest: &AtomicU64,
) -> Seen {
    let mut seen = Seen::default();
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return seen;
    };
    let limits = Limits {
        handshake_timeout: Duration::from_secs(1),
        call_timeout: Duration::from_secs(1),
        ..Limits::default()
    };
    let mut peers: Vec<(NodeId, Option<Peer>)> = Vec::new();
    for n in state.nodes.iter().filter(|n| survivors.contains(&n.id)) {
        let peer = n.addr.parse::<SocketAddr>().ok().and_then(|addr| {
            rt.block_on(Peer::connect(
                addr,
                ordo_cluster::auth::TOOL_NODE_ID,
                &state.cluster,
                secret.clone(),
                limits,
            ))
            .ok()
        });
        peers.push((n.id, peer));
    }
    let mut newer: HashSet<NodeId> = HashSet::new();
    while !stop.load(Ordering::Acquire) {
        let round = Instant::now();
        for (id, peer) in &peers {
            let Some(p) = peer else {
                continue;
            };
            let reply =
                rt.block_on(p.call_timeout(Body::StatusRequest, Duration::from_millis(500)));
            let Ok(Body::StatusReply { config_seq, clock_enabled, .. }) = reply else {
                continue;
            };
            let now = Instant::now();
            newest.fetch_max(config_seq, Ordering::AcqRel);
            if config_seq > seq_before && newer.insert(*id) {
                seen.first_new.get_or_insert(now);
                if newer.len() == peers.len() {
                    seen.all_new = Some(now);
                }
            }
            let episodes = seen.disabled.entry(*id).or_default();
            let open = episodes.last().is_some_and(|e| e.1.is_none());
            if !clock_enabled && !open {
                episodes.push((now, None));
            } else if clock_enabled
                && open
                && let Some(e) = episodes.last_mut()
            {
                e.1 = Some(now);
            }
        }
        let spent = round.elapsed();
        if spent < Duration::from_millis(1) {
            std::thread::sleep(Duration::from_millis(1) - spent);
        }
    }
    for (_, p) in peers.into_iter() {
        if let Some(p) = p {
            p.close();
        }
    }
    seen
}

// ---------------------------------------------------------------------------------------------
// The load.

/// One thread's account of its attempts.
#[derive(Default)]
struct ThreadLog {
    /// Commit instants (acknowledged), with their commit timestamp and invocation instant.
    commits: Vec<(Instant, Instant, u64)>,
    writes: Vec<Write>,
    aborted: usize,
    unknown: usize,
    failures: HashMap<&'static str, u64>,
    /// Steps of [`CLOCK_STEP`] spent waiting for a disabled clock.
    clock_waits: u64,
}

impl ThreadLog {
    /// Moves `other`'s records into `self`.
    fn absorb(&mut self, other: &mut ThreadLog) {
        self.commits.append(&mut other.commits);
        self.writes.append(&mut other.writes);
        self.aborted += std::mem::take(&mut other.aborted);
        self.unknown += std::mem::take(&mut other.unknown);
        self.clock_waits += std::mem::take(&mut other.clock_waits);
        for (k, v) in other.failures.drain() {
            *self.failures.entry(k).or_default() += v;
        }
    }
}

/// How long a client thread waits for a disabled clock before looking at the stop flag again.
const CLOCK_STEP: Duration = Duration::from_millis(5);
/// How long after the end of the load the client threads have to finish their attempts before they
/// are reported stuck and abandoned.
pub const GRACE: Duration = Duration::from_secs(3);

/// The client threads' shared state.
struct Load {
    client: Arc<Client>,
    accounts: Vec<Addr>,
    rec: Arc<Recorder>,
    stop: AtomicBool,
    /// Nanoseconds since `t0` of the last configuration refresh (rate limit).
    last_refresh: AtomicU64,
    t0: Instant,
}

/// Key of an account in the history.
fn key_of(a: Addr) -> u64 {
    a.to_raw()
}

impl Load {
    /// After a participant failure: at most one refresh every 5 ms across the threads.
    fn after_failure(&self) {
        let now = u64::try_from(self.t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let last = self.last_refresh.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= 5_000_000
            && self
                .last_refresh
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let _ = self.client.refresh_config(3, Duration::from_millis(2));
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Runs attempts until `stop`, moving each finished attempt's account into `shared`: a
    /// thread that gets stuck inside an attempt has reported every earlier one.
    fn run(&self, process: u32, seed: u64, shared: &Mutex<ThreadLog>) {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut counter: u64 = 0;
        let mut log = ThreadLog::default();
        while !self.stop.load(Ordering::Acquire) {
            self.attempt(&mut log, &mut rng, &mut counter, process);
            let mut out = shared.lock().unwrap_or_else(|p| p.into_inner());
            out.absorb(&mut log);
        }
    }

    /// One attempt (module docs).
    fn attempt(&self, log: &mut ThreadLog, rng: &mut SmallRng, counter: &mut u64, process: u32) {
        let n = self.accounts.len();
        {
            let i = rng.random_range(0..n);
            let mut j = rng.random_range(0..n - 1);
            if j >= i {
                j += 1;
            }
            let (a, b) = (self.accounts[i], self.accounts[j]);
            // A disabled clock blocks `begin` until it is enabled again: wait for it here, in
            // bounded steps, so that the thread still sees `stop`.
            if self.client.clock().try_now(CLOCK_STEP).is_err() {
                log.clock_waits += 1;
                return;
            }
            *counter += 1;
            let tag = (u64::from(process) + 1) << 40 | *counter;
            let mut r = self.rec.begin(process);
            let invoked = Instant::now();
            let mut tx = match self.client.begin_with(Options::default()) {
                Ok(tx) => tx,
                Err(_) => {
                    r.abort();
                    *log.failures.entry("begin").or_default() += 1;
                    std::thread::sleep(Duration::from_millis(1));
                    return;
                }
            };
            let read = |tx: &mut ordo::Tx<'_, _>, at: Addr| tx.read::<[u64; 2]>(at);
            let ra = read(&mut tx, a);
            let rb = ra.as_ref().ok().map(|_| read(&mut tx, b));
            let (va, vb) = match (ra, rb) {
                (Ok(va), Some(Ok(vb))) => (va, vb),
                (Err(e), _) | (_, Some(Err(e))) => {
                    drop(tx);
                    r.abort();
                    self.note(log, &e, false);
                    return;
                }
                (Ok(_), None) => unreachable!("b is read when a was"),
            };
            r.read_register(key_of(a), (va[1] != 0).then_some(va[1]));
            r.read_register(key_of(b), (vb[1] != 0).then_some(vb[1]));
            let wa = [va[0].wrapping_sub(1), tag];
            let wb = [vb[0].wrapping_add(1), tag];
            if let Err(e) = tx.write(a, &wa).and_then(|()| tx.write(b, &wb)) {
                drop(tx);
                r.abort();
                self.note(log, &e, false);
                return;
            }
            r.write_register(key_of(a), tag);
            r.write_register(key_of(b), tag);
            let writes = [
                Write { key: key_of(a), prev: va[1], tag, acked: false },
                Write { key: key_of(b), prev: vb[1], tag, acked: false },
            ];
            match tx.commit() {
                Ok(info) => {
                    let wts = info.wts.map_or(0, |t| t.as_nanos());
                    r.commit_at(wts);
                    log.commits.push((Instant::now(), invoked, wts));
                    log.writes.extend(writes.iter().map(|w| Write { acked: true, ..*w }));
                }
                Err(Error::Aborted(_)) => r.abort(),
                Err(e) => {
                    r.unknown();
                    log.unknown += 1;
                    log.writes.extend(writes);
                    self.note(log, &e, true);
                }
            }
        }
    }

    fn note(&self, log: &mut ThreadLog, e: &Error, in_commit: bool) {
        if !in_commit {
            log.aborted += 1;
        }
        let what = match e {
            Error::Aborted(_) => return,
            Error::Participant { step, .. } => step.name(),
            _ => "other",
        };
        *log.failures.entry(what).or_default() += 1;
        self.after_failure();
    }
}

/// Sends SIGKILL to `pid`.
fn kill9(node: NodeId, pid: u32) -> Result<(), FailoverError> {
    let p = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw);
    let Some(p) = p else {
        return Err(FailoverError::Kill { node, pid, reason: "not a process id".into() });
    };
    rustix::process::kill_process(p, rustix::process::Signal::KILL)
        .map_err(|e| FailoverError::Kill { node, pid, reason: e.to_string() })
}

/// Stops the cluster when dropped.
struct Up(PathBuf);

impl Drop for Up {
    fn drop(&mut self) {
        if let Err(e) = local::down(&self.0) {
            eprintln!("stopping the cluster in {}: {e}", self.0.display());
        }
    }
}

fn rel_ms(t: Instant, kill: Instant) -> RelMs {
    if t >= kill {
        t.duration_since(kill).as_secs_f64() * 1e3
    } else {
        -(kill.duration_since(t).as_secs_f64() * 1e3)
    }
}

/// Runs the benchmark (module docs). `progress` gets one line per phase.
///
/// # Errors
/// [`FailoverError`] when the cluster, the client or the load cannot start, or the kill fails.
/// Failed checks are in the result's `problems`.
pub fn run(
    cfg: &FailoverConfig,
    progress: &mut dyn FnMut(&str),
) -> Result<FailoverResult, FailoverError> {
    cfg.validate()?;
    let up = UpOptions {
        nodes: cfg.nodes,
        dir: cfg.dir.clone(),
        etcd: None,
        cluster: "failover".into(),
        backups: cfg.backups,
        lease_ms: cfg.lease_ms,
        sync_rate_per_s: cfg.sync_rate_per_s,
        metrics: false,
        failover: true,
        binary: cfg.binary.clone(),
        ready_timeout: Duration::from_secs(30),
    };
    progress(&format!(
        "starting {} nodes ({} backups per region, lease {} ms) in {}",
        cfg.nodes,
        cfg.backups,
        cfg.lease_ms,
        cfg.dir.display()
    ));
    let state = match local::up(&up) {
        Ok(s) => s,
        Err(e) => {
            // `up` may have started some processes before failing.
            if cfg.dir.join("cluster.json").exists() {
                let _ = local::down(&cfg.dir);
            }
            return Err(e.into());
        }
    };
    let _down = Up(cfg.dir.clone());
    let secret = Secret::from_file(&state.secret_file).map_err(|e| {
        FailoverError::Usage(format!("secret {}: {e}", state.secret_file.display()))
    })?;
    let addrs: Vec<String> = state.nodes.iter().map(|n| n.addr.clone()).collect();
    let mut ccfg = ClientConfig::new(&state.cluster, addrs, state.secret_file.clone());
    ccfg.call_timeout = Duration::from_secs(1);
    ccfg.network_threads = 1;
    let client = Arc::new(Client::connect(ccfg)?);
    let config = client.config();
    let targets = cfg.kill.targets(&config);
    let survivors: Vec<NodeId> =
        config.members.iter().map(|m| m.id).filter(|id| !targets.contains(id)).collect();

    // Accounts: one transaction each, so allocation rotates over the primaries.
    let total = cfg.accounts_per_node * cfg.nodes;
    let mut accounts = Vec::with_capacity(total);
    const INITIAL: u64 = 1_000;
    for _ in 0..total {
        match client.run(|tx| tx.alloc(&[INITIAL, 0u64])) {
            Ok(a) => accounts.push(a),
            Err(e) => {
                let _ = client.refresh_config(1, Duration::ZERO);
                let seq = client.config().seq;
                if seq > config.seq {
                    return Err(FailoverError::FalseSuspicion {
                        seq,
                        at_ms: 0,
                        lease_ms: cfg.lease_ms,
                        dir: cfg.dir.clone(),
                    });
                }
                return Err(FailoverError::Load(e));
            }
        }
    }
    let mut per_region: HashMap<u16, usize> = HashMap::new();
    for a in &accounts {
        *per_region.entry(a.region()).or_default() += 1;
    }
    let mut regions: Vec<_> = per_region.into_iter().collect();
    regions.sort_unstable();
    progress(&format!(
        "{total} accounts over regions {regions:?}; CM node {}, killing {targets:?} at {} ms",
        config.cm,
        cfg.kill_at.as_millis()
    ));

    let rec = Arc::new(Recorder::new());
    let stop_monitor = AtomicBool::new(false);
    let t0 = Instant::now();
    let load = Arc::new(Load {
        client: client.clone(),
        accounts: accounts.clone(),
        rec: rec.clone(),
        stop: AtomicBool::new(false),
        last_refresh: AtomicU64::new(0),
        t0,
    });
    let kill_instant: Mutex<Option<Instant>> = Mutex::new(None);
    let newest = AtomicU64::new(config.seq);
    // Detached: a thread stuck in the engine (a clock that never comes back) is abandoned
    // after the grace period rather than hanging the benchmark.
    let mut workers = Vec::with_capacity(cfg.threads);
    let mut logs: Vec<Arc<Mutex<ThreadLog>>> = Vec::with_capacity(cfg.threads);
    for p in 0..cfg.threads {
        let mine = load.clone();
        let out = Arc::new(Mutex::new(ThreadLog::default()));
        logs.push(out.clone());
        let seed = cfg.seed ^ ((p as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let process = u32::try_from(p).unwrap_or(u32::MAX);
        let spawned = std::thread::Builder::new()
            .name(format!("failover-load-{p}"))
            .spawn(move || mine.run(process, seed, &out));
        match spawned {
            Ok(h) => workers.push(h),
            Err(e) => {
                load.stop.store(true, Ordering::Release);
                return Err(FailoverError::Usage(format!("starting a client thread: {e}")));
            }
        }
    }
    let (logs, stuck, seen, kill_result) = std::thread::scope(|s| {
        let mon = {
            let (state, secret, survivors, stop_monitor, newest) =
                (&state, &secret, &survivors, &stop_monitor, &newest);
            s.spawn(move || monitor(state, secret, survivors, config.seq, stop_monitor, newest))
        };
        let mut kill_result = Ok(());
        // Watch for a false suspicion until the kill.
        while t0.elapsed() < cfg.kill_at {
            let seq = newest.load(Ordering::Acquire).max(client.config().seq);
            if seq > config.seq {
                kill_result = Err(FailoverError::FalseSuspicion {
                    seq,
                    at_ms: u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX),
                    lease_ms: cfg.lease_ms,
                    dir: cfg.dir.clone(),
                });
                break;
            }
            std::thread::sleep(
                cfg.kill_at.saturating_sub(t0.elapsed()).min(Duration::from_millis(5)),
            );
        }
        let now = Instant::now();
        let targets: &[NodeId] = if kill_result.is_ok() { &targets } else { &[] };
        for &node in targets {
            let pid = state.nodes.iter().find(|n| n.id == node).and_then(|n| n.pid);
            let r = match pid {
                Some(pid) => kill9(node, pid),
                None => Err(FailoverError::NoPid(node)),
            };
            if let Err(e) = r {
                kill_result = Err(e);
            }
        }
        *kill_instant.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
        if kill_result.is_ok() {
            std::thread::sleep(cfg.duration.saturating_sub(t0.elapsed()));
        }
        load.stop.store(true, Ordering::Release);
        let end = Instant::now() + GRACE;
        while Instant::now() < end && workers.iter().any(|w| !w.is_finished()) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let (done, stuck): (Vec<_>, Vec<_>) = workers.into_iter().partition(|w| w.is_finished());
        for w in done {
            let _ = w.join();
        }
        let logs: Vec<ThreadLog> = logs
            .iter()
            .map(|l| std::mem::take(&mut *l.lock().unwrap_or_else(|p| p.into_inner())))
            .collect();
        stop_monitor.store(true, Ordering::Release);
        let seen = mon.join().unwrap_or_default();
        (logs, stuck.len(), seen, kill_result)
    });
    kill_result?;
    let kill = kill_instant.lock().unwrap_or_else(|p| p.into_inner()).unwrap_or(t0);
    progress("load stopped; reading the final state");

    // The final read, through the client (which follows the configuration), recorded.
    let mut final_read = String::from("ok");
    let mut finals: HashMap<u64, u64> = HashMap::new();
    let mut sum: i64 = 0;
    let mut read_ok = false;
    for attempt in 0..10 {
        if client.clock().try_now(Duration::from_secs(1)).is_err() {
            final_read = format!("attempt {}: the client's clock is disabled", attempt + 1);
            continue;
        }
        let mut r = rec.begin(u32::MAX);
        let got = client.run(|tx| {
            accounts
                .iter()
                .map(|&a| tx.read::<[u64; 2]>(a).map(|v| (a, v)))
                .collect::<Result<Vec<_>, _>>()
        });
        match got {
            Ok(values) => {
                finals.clear();
                sum = 0;
                for (a, v) in values {
                    r.read_register(key_of(a), (v[1] != 0).then_some(v[1]));
                    finals.insert(key_of(a), v[1]);
                    sum = sum.wrapping_add(v[0] as i64);
                }
                r.commit();
                read_ok = true;
                break;
            }
            Err(e) => {
                r.abort();
                final_read = format!("attempt {}: {e}", attempt + 1);
                let _ = client.refresh_config(3, Duration::from_millis(20));
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    if read_ok {
        final_read = "ok".into();
    }

    // Figures.
    let mut problems = Vec::new();
    let mut commit_us: Vec<i64> = Vec::new();
    let mut writes = Vec::new();
    let (mut aborted, mut unknown, mut clock_waits) = (0, 0, 0u64);
    let mut failures: HashMap<&'static str, u64> = HashMap::new();
    let mut max_before: Option<u64> = None;
    let mut min_after: Option<u64> = None;
    let adopted = seen.all_new;
    for log in &logs {
        for &(done, invoked, wts) in &log.commits {
            let us = (rel_ms(done, kill) * 1e3).round() as i64;
            commit_us.push(us);
            if done < kill && wts != 0 {
                max_before = Some(max_before.map_or(wts, |m| m.max(wts)));
            }
            if adopted.is_some_and(|at| invoked > at) && wts != 0 {
                min_after = Some(min_after.map_or(wts, |m| m.min(wts)));
            }
        }
        writes.extend_from_slice(&log.writes);
        aborted += log.aborted;
        unknown += log.unknown;
        clock_waits += log.clock_waits;
        for (k, v) in &log.failures {
            *failures.entry(k).or_default() += v;
        }
    }
    let from_ms = -i64::try_from((cfg.kill_at - WARMUP).as_millis()).unwrap_or(0);
    let to_ms = i64::try_from(cfg.duration.saturating_sub(cfg.kill_at).as_millis()).unwrap_or(0);
    let buckets = bucket_counts(&commit_us, from_ms, to_ms);
    let split = usize::try_from(-from_ms).unwrap_or(0).min(buckets.len());
    let (pre, post) = buckets.split_at(split);
    let base = baseline(pre, WINDOW_MS);
    let recovery =
        if base > 0.0 { recovery_ms(post, base, THRESHOLD, WINDOW_MS, HOLD_MS) } else { None };
    if base <= 0.0 {
        problems.push("no commit before the kill: no baseline, no recovery time".into());
    } else if recovery.is_none() {
        problems.push(format!(
            "throughput did not come back to {:.0}% of the baseline ({base:.2}/ms) within the run",
            THRESHOLD * 100.0
        ));
    }
    let failover_episodes = seen.failover_episodes(kill);
    let all_enabled_again =
        !failover_episodes.is_empty() && failover_episodes.iter().all(|e| e.1.1.is_some());
    if cfg.kill != KillMode::NonCm && !all_enabled_again {
        problems.push(
            "the survivors' clocks were not all enabled again by the end of the run (no working clock master)"
                .into(),
        );
    }
    if seen.all_new.is_none() {
        problems.push("not every survivor adopted a new configuration during the run".into());
    }
    let h = rec.history();
    let checker = match ordo_check::check_strict_serializable(&h) {
        Ok(()) => "ok (strict serializable)".to_string(),
        Err(v) => {
            problems.push("the checker rejected the history".into());
            format!("REJECTED: {v}")
        }
    };
    let lost = if read_ok { lost_acknowledged(&writes, &finals) } else { Vec::new() };
    if !lost.is_empty() {
        problems.push(format!(
            "{} acknowledged writes are not in the final state (e.g. account {:#x} tag {:#x})",
            lost.len(),
            lost[0].key,
            lost[0].tag
        ));
    }
    let initial = (INITIAL as i64).wrapping_mul(total as i64);
    let conserved = read_ok && sum == initial;
    if read_ok && !conserved {
        problems.push(format!("balances sum to {sum}, not {initial}"));
    }
    if stuck > 0 {
        problems.push(format!(
            "{stuck} of {} client threads were still inside a transaction {} s after the end (abandoned)",
            cfg.threads,
            GRACE.as_secs()
        ));
    }
    if !read_ok {
        problems.push(format!("the final read failed: {final_read}"));
    }
    if let (Some(b), Some(a)) = (max_before, min_after)
        && b >= a
    {
        problems.push(format!(
            "timestamps not increasing across the failover: {b} ns before the kill ≥ {a} ns after"
        ));
    }

    // The survivors' own account of the round.
    let statuses = local::status(&cfg.dir).map(|(_, rows)| rows).unwrap_or_default();
    let mut initiator = None;
    let mut clock_disabled_ms = None;
    let mut round_total_ms = None;
    let (mut cm_after, mut seq_after) = (0, config.seq);
    for row in &statuses {
        let Ok(st) = &row.reply else { continue };
        seq_after = seq_after.max(st.config_seq);
        if st.role == "cm" {
            cm_after = row.id;
        }
        let fseq = st.metric("failover_seq");
        if fseq > 0.0 && (initiator.is_none() || fseq as u64 == st.config_seq) {
            initiator = Some(row.id);
            clock_disabled_ms = Some(st.metric("failover_clock_disabled_us") / 1e3);
            round_total_ms = Some(st.metric("failover_total_us") / 1e3);
        }
    }
    let mut failures: Vec<(String, u64)> =
        failures.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    failures.sort();
    let committed = commit_us.len();
    let episodes = failover_episodes;
    let clocks_seen_disabled: Vec<(NodeId, RelMs, Option<f64>)> = episodes
        .iter()
        .map(|&(id, (off, on), _)| {
            (id, rel_ms(off, kill), on.map(|on| on.duration_since(off).as_secs_f64() * 1e3))
        })
        .collect();
    let other_disabled_episodes: usize = episodes.iter().map(|e| e.2).sum();
    let reenabled = if episodes.is_empty() || episodes.iter().any(|e| e.1.1.is_none()) {
        None
    } else {
        episodes.iter().filter_map(|e| e.1.1).max()
    };
    Ok(FailoverResult {
        kill: cfg.kill,
        nodes: cfg.nodes,
        backups: cfg.backups,
        lease_ms: cfg.lease_ms,
        threads: cfg.threads,
        killed: targets,
        cm_before: config.cm,
        cm_after,
        seq_before: config.seq,
        seq_after,
        first_bucket_ms: from_ms,
        longest_gap_ms: longest_gap(post),
        buckets: buckets.clone(),
        baseline_per_ms: base,
        prekill_windows_below: fraction_below(pre, WINDOW_MS, THRESHOLD * base),
        recovery_ms: recovery.map(|r| r as f64),
        new_config_first_ms: seen.first_new.map(|t| rel_ms(t, kill)),
        new_config_all_ms: seen.all_new.map(|t| rel_ms(t, kill)),
        clock_reenabled_ms: reenabled.map(|t| rel_ms(t, kill)),
        clocks_seen_disabled,
        other_disabled_episodes,
        clock_disabled_ms,
        initiator,
        round_total_ms,
        attempts: h.len(),
        committed,
        aborted,
        unknown,
        participant_failures: failures,
        client_config_changes: client.config_changes(),
        stuck_threads: stuck,
        clock_wait_ms: clock_waits as f64 * CLOCK_STEP.as_secs_f64() * 1e3,
        checker,
        lost_acknowledged: lost.len(),
        sum_conserved: conserved,
        sum: (sum, initial),
        max_wts_before_ns: max_before,
        min_wts_after_ns: min_after,
        final_read,
        problems,
        dir: cfg.dir.clone(),
    })
}

/// The result in words, one figure a line.
pub fn summary(r: &FailoverResult) -> String {
    let ms = |v: Option<f64>| v.map_or_else(|| "—".to_string(), |v| format!("{v:.1} ms"));
    let mut s = String::new();
    s.push_str(&format!(
        "failover: kill {} (nodes {:?}) of {} nodes, {} backups/region, lease {} ms, {} client threads\n",
        r.kill, r.killed, r.nodes, r.backups, r.lease_ms, r.threads
    ));
    s.push_str(&format!(
        "  configuration     seq {} (CM {}) -> seq {} (CM {}); reconfigured by node {}\n",
        r.seq_before,
        r.cm_before,
        r.seq_after,
        r.cm_after,
        r.initiator.map_or_else(|| "?".into(), |n| n.to_string())
    ));
    s.push_str(&format!(
        "  clock disabled    {} (initiator's FailoverReport of its last round; 0 when that round kept the CM){}\n",
        ms(r.clock_disabled_ms),
        if r.kill != KillMode::NonCm && r.clock_reenabled_ms.is_none() {
            " — but the survivors' clocks never came back (below)"
        } else {
            ""
        }
    ));
    s.push_str(&format!(
        "  initiator's round {} (decision to end of round)\n",
        ms(r.round_total_ms)
    ));
    for (id, at, len) in &r.clocks_seen_disabled {
        s.push_str(&format!(
            "  clock of node {id}   seen disabled from {at:.1} ms for {} (status polled every ~1 ms)\n",
            ms(*len)
        ));
    }
    if r.other_disabled_episodes > 0 {
        s.push_str(&format!(
            "  other episodes    {} short one(s) of a survivor's clock disabled apart from the failover (a CM fencing itself while a member's renewal was late)\n",
            r.other_disabled_episodes
        ));
    }
    s.push_str(&format!(
        "  detection         new configuration at the first survivor {}, at every survivor {} after the kill\n",
        ms(r.new_config_first_ms),
        ms(r.new_config_all_ms)
    ));
    if r.kill != KillMode::NonCm {
        s.push_str(&format!(
            "  clocks re-enabled {} after the kill (every survivor)\n",
            ms(r.clock_reenabled_ms)
        ));
    }
    s.push_str(&format!(
        "  recovery time     {} (back to ≥{:.0}% of the pre-kill baseline {:.2} commits/ms: {} ms windows, held {} ms; {:.0}% of pre-kill windows were under it)\n",
        ms(r.recovery_ms),
        THRESHOLD * 100.0,
        r.baseline_per_ms,
        WINDOW_MS,
        HOLD_MS,
        r.prekill_windows_below * 100.0
    ));
    s.push_str(&format!("  longest 0-commit gap after the kill: {} ms\n", r.longest_gap_ms));
    s.push_str(&format!(
        "  attempts {}: committed {}, aborted {}, unknown {}; participant failures {:?}; client adopted {} configuration(s)\n",
        r.attempts, r.committed, r.aborted, r.unknown, r.participant_failures, r.client_config_changes
    ));
    s.push_str(&format!(
        "  client threads    {} stuck; {:.0} ms (summed) waiting for a disabled client clock\n",
        r.stuck_threads, r.clock_wait_ms
    ));
    s.push_str(&format!("  checker           {}\n", r.checker));
    if r.final_read == "ok" {
        s.push_str(&format!(
            "  final read        ok; lost acknowledged writes {}; balances {} (sum {} of {})\n",
            r.lost_acknowledged,
            if r.sum_conserved { "conserved" } else { "NOT conserved" },
            r.sum.0,
            r.sum.1
        ));
    } else {
        s.push_str(&format!(
            "  final read        FAILED ({}): lost writes and balances not checked\n",
            r.final_read
        ));
    }
    s.push_str(&format!(
        "  timestamps        max acknowledged before the kill {:?} ns < min after the new configuration {:?} ns: {}\n",
        r.max_wts_before_ns,
        r.min_wts_after_ns,
        match (r.max_wts_before_ns, r.min_wts_after_ns) {
            (Some(b), Some(a)) if b < a => "yes",
            (Some(_), Some(_)) => "NO",
            _ => "not measured",
        }
    ));
    if r.problems.is_empty() {
        s.push_str("  problems          none\n");
    } else {
        for p in &r.problems {
            s.push_str(&format!("  PROBLEM           {p}\n"));
        }
    }
    s.push_str(&format!("  node logs         {}\n", r.dir.display()));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_fall_into_their_millisecond() {
        let b = bucket_counts(&[-1500, -1, 0, 999, 1000, 2500, 9999, -3001], -2, 3);
        // buckets: [-2,-1) [-1,0) [0,1) [1,2) [2,3)
        assert_eq!(b, vec![1, 1, 2, 1, 1]);
        assert!(bucket_counts(&[5], 3, 3).is_empty());
    }

    #[test]
    fn the_baseline_is_the_median_window_mean() {
        let mut pre = vec![10u32; 30];
        pre.extend(vec![0u32; 10]); // one bad window
        pre.extend(vec![20u32; 5]); // a partial window is ignored
        assert_eq!(baseline(&pre, 10), 10.0);
        assert_eq!(baseline(&[1, 2, 3], 10), 0.0);
        assert_eq!(fraction_below(&pre, 10, 9.0), 0.25);
    }

    #[test]
    fn recovery_is_the_end_of_the_dip_when_throughput_holds() {
        // 20 ms full, 30 ms nothing, then full again.
        let mut post = vec![10u32; 20];
        post.extend(vec![0u32; 30]);
        post.extend(vec![10u32; 100]);
        // The dip starts with the window at 12 (mean 8 < 9). The window at 49 holds one empty
        // bucket and nine full ones: 9.0 per ms, exactly 90%, so it is the first at the level.
        assert_eq!(recovery_ms(&post, 10.0, 0.9, 10, 50), Some(49));
        assert_eq!(recovery_ms(&post, 10.0, 0.95, 10, 50), Some(50));
    }

    #[test]
    fn a_brief_return_does_not_count_until_it_holds() {
        let mut post = vec![0u32; 10];
        post.extend(vec![10u32; 15]); // back briefly
        post.extend(vec![2u32; 40]); // down again
        post.extend(vec![10u32; 80]);
        // The window at 10 is back at the level, but the 50 ms from it average 5.2; the first
        // window that holds starts at 64 (one bucket of 2, nine of 10: 9.2 per ms).
        let r = recovery_ms(&post, 10.0, 0.9, 10, 50).unwrap();
        assert_eq!(r, 64);
    }

    #[test]
    fn no_dip_is_zero_and_no_return_is_none() {
        assert_eq!(recovery_ms(&[10u32; 100], 10.0, 0.9, 10, 50), Some(0));
        let mut post = vec![0u32; 50];
        post.extend(vec![10u32; 20]); // too short to hold 50 ms
        assert_eq!(recovery_ms(&post, 10.0, 0.9, 10, 50), None);
    }

    #[test]
    fn gaps_are_counted() {
        assert_eq!(longest_gap(&[1, 0, 0, 2, 0, 0, 0, 1]), 3);
        assert_eq!(longest_gap(&[]), 0);
    }

    #[test]
    fn lost_writes_are_those_off_the_final_chain() {
        let w = |key, prev, tag, acked| Write { key, prev, tag, acked };
        let writes = vec![
            w(1, 0, 10, true),
            w(1, 10, 11, true),
            w(1, 11, 12, false), // unknown, and it made it
            w(1, 12, 13, true),  // acknowledged, lost: the final value is 12
            w(2, 0, 20, false),  // unknown, lost: fine
        ];
        let finals = HashMap::from([(1, 12), (2, 0)]);
        let lost = lost_acknowledged(&writes, &finals);
        assert_eq!(lost.len(), 1);
        assert_eq!(lost[0].tag, 13);
        let finals = HashMap::from([(1, 13), (2, 20)]);
        assert!(lost_acknowledged(&writes, &finals).is_empty());
    }

    #[test]
    fn targets_follow_the_configuration() {
        use ordo_cluster::config::Member;
        let members: Vec<Member> =
            (1..=5).map(|id| Member { id, addr: format!("127.0.0.1:{}", 7000 + id) }).collect();
        let mut c = ClusterConfig::initial(members, 2);
        assert_eq!(KillMode::NonCm.targets(&c), vec![5]);
        assert_eq!(KillMode::Cm.targets(&c), vec![1]);
        assert_eq!(KillMode::CmPlusOne.targets(&c), vec![1, 2]);
        c.cm = 5;
        assert_eq!(KillMode::NonCm.targets(&c), vec![4]);
        assert_eq!(KillMode::CmPlusOne.targets(&c), vec![5, 1]);
        assert_eq!("cm+1".parse::<KillMode>().unwrap(), KillMode::CmPlusOne);
        assert!("cm+2".parse::<KillMode>().is_err());
    }

    #[test]
    fn shapes_without_a_majority_or_backups_are_refused() {
        let cfg = FailoverConfig {
            kill: KillMode::CmPlusOne,
            nodes: 3,
            backups: 2,
            lease_ms: 10,
            threads: 2,
            duration: Duration::from_secs(3),
            kill_at: Duration::from_secs(1),
            accounts_per_node: 8,
            dir: PathBuf::from("x"),
            binary: PathBuf::from("ordo"),
            sync_rate_per_s: 2000,
            seed: 1,
        };
        assert!(matches!(cfg.validate(), Err(FailoverError::Usage(_))));
        let ok = FailoverConfig { nodes: 5, ..cfg.clone() };
        ok.validate().unwrap();
        let few = FailoverConfig { nodes: 5, backups: 1, ..cfg };
        assert!(few.validate().is_err());
    }
}
