//! Nodes on a real network (loopback) with a real etcd: synchronised clocks over TCP with injected
//! offset and drift, leases and their expiry, etcd lost while running, and the bad inputs of a
//! node's start (etcd down, unknown node, wrong secret, garbage on the port).
//!
//! One machine can read `CLOCK_MONOTONIC` from every node, so it is the truth: each node's local
//! clock is a `SkewedClock` over it with its own offset and drift, and the cluster's time is the
//! CM's local clock at true time `t`. Every interval a node returns must contain it.
#![allow(clippy::unwrap_used, dead_code)] // test set-up: a failure is the test failing

#[path = "../../ordo/tests/common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ordo_clock::{Clock, SkewedClock, TimeSource, Timestamp};
use ordo_cluster::auth::Secret;
use ordo_cluster::config::{ClusterConfig, Member, NodeConfig};
use ordo_cluster::etcd::ConfigStore;
use ordo_cluster::etcd_server::{EtcdServer, free_port};
use ordo_cluster::node::{ConfigSource, LocalClock, Node, NodeError, codes};
use ordo_cluster::transport::{Limits, Peer};
use ordo_cluster::wire::Body;

struct Fixture {
    dir: PathBuf,
    etcd: EtcdServer,
}

impl Fixture {
    fn new(name: &str) -> Fixture {
        let dir = std::env::temp_dir().join(format!("ordo-node-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("secret"), "node-test-secret-0123456789").unwrap();
        std::fs::write(dir.join("wrong-secret"), "another-secret-0123456789").unwrap();
        let etcd = EtcdServer::start(&dir.join("etcd")).unwrap();
        Fixture { dir, etcd }
    }

    fn endpoints(&self) -> Vec<String> {
        vec![self.etcd.endpoint().to_string()]
    }

    /// Writes a configuration of `n` members on free ports; returns their node files.
    fn cluster(&self, name: &str, n: u64, lease_ms: u32) -> (ClusterConfig, Vec<NodeConfig>) {
        let mut files = Vec::new();
        let mut members = Vec::new();
        for id in 1..=n {
            let addr = format!("127.0.0.1:{}", free_port().unwrap());
            let mut f = NodeConfig::new(id, name, &addr, self.endpoints(), self.dir.join("secret"));
            f.lease_ms = lease_ms;
            f.sync_rate_per_s = 1_000;
            f.etcd_start_timeout_ms = 5_000;
            members.push(Member { id, addr });
            files.push(f);
        }
        let config = ClusterConfig::initial(members, 1);
        rt().block_on(async {
            let store = ConfigStore::connect(
                &self.endpoints(),
                name,
                Duration::from_secs(2),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
            store.create(&config).await.unwrap();
        });
        (config, files)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.etcd.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn wait_for(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ready() {
        assert!(started.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Skews within ε = 1000 ppm of each other: offsets up to ±0.5 s, drifts up to ±400 ppm.
const SKEWS: [(i64, i64); 3] = [(0, 150), (-500_000_000, -250), (320_000_000, 400)];

fn skewed(source: &TimeSource, i: usize) -> Arc<SkewedClock> {
    let (offset, drift) = SKEWS[i];
    Arc::new(SkewedClock::new(source.clone(), offset, drift, 300).with_reading_spread(i as u64 + 1))
}

/// Runs 3 nodes with skewed clocks under drift bound `epsilon_ppm` and `sync_rate` syncs per
/// second for `sample_for`, checking every interval against the CM's time; returns the nodes,
/// the number of intervals checked and how many missed.
fn sample_cluster(
    fx: &Fixture,
    name: &str,
    epsilon_ppm: u64,
    sync_rate: u32,
    sample_for: Duration,
) -> (Vec<Node>, u64, u64) {
    let (_, mut files) = fx.cluster(name, 3, 50);
    for f in &mut files {
        f.drift_bound_ppm = epsilon_ppm;
        f.sync_rate_per_s = sync_rate;
    }
    let source = TimeSource::real(1_000_000_000_000);
    let clocks: Vec<Arc<SkewedClock>> = (0..3).map(|i| skewed(&source, i)).collect();
    let nodes: Vec<Node> = files
        .into_iter()
        .zip(&clocks)
        .map(|(f, c)| Node::start(f, ConfigSource::Etcd, c.clone() as LocalClock).unwrap())
        .collect();
    wait_for("every clock enabled", Duration::from_secs(10), || {
        nodes.iter().all(|n| n.clock().is_enabled())
    });
    let cm = clocks[0].clone();
    let truth = |t: Timestamp| cm.reading_at(t);
    let (mut checked, mut missed) = (0u64, 0u64);
    let mut widths = Vec::new();
    let deadline = Instant::now() + sample_for;
    while Instant::now() < deadline {
        for node in &nodes {
            let before = truth(source.now());
            let interval = node.clock().now();
            let after = truth(source.now());
            // The CM's time at some instant of the call lies in [lo, hi].
            if !(interval.hi() >= before && interval.lo() <= after) {
                missed += 1;
            }
            widths.push(interval.width_nanos());
            checked += 1;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    widths.sort_unstable();
    eprintln!(
        "ε = {epsilon_ppm} ppm, {sync_rate} syncs/s: {checked} intervals checked, {missed} missed; \
         median width {} ns",
        widths[widths.len() / 2]
    );
    (nodes, checked, missed)
}

#[test]
fn three_nodes_synchronise_over_tcp_and_every_interval_contains_the_cms_time() {
    let fx = Fixture::new("sync");
    let (nodes, checked, missed) =
        sample_cluster(&fx, "sync", 1_000, 1_000, Duration::from_millis(600));
    assert!(checked >= 3_000, "only {checked} samples");
    assert_eq!(missed, 0, "{missed} of {checked} intervals missed the CM's time");
    // get_ts strictly increases across nodes along happens-before.
    let mut last = Timestamp::ZERO;
    for i in 0..300 {
        let t = nodes[i % 3].clock().get_ts();
        assert!(t > last, "get_ts {t:?} after {last:?}");
        last = t;
    }
    // The network task serves object reads from the node's engine (FaRM's one-sided reads).
    let addr = nodes[1].db().run(|tx| tx.alloc(&0xfeed_u64)).unwrap();
    let secret = Secret::from_file(&fx.dir.join("secret")).unwrap();
    let (image, refused) = rt().block_on(async {
        let limits = Limits::default();
        let peer = Peer::connect(nodes[1].local_addr(), 0, "sync", secret, limits).await.unwrap();
        let image = peer.call(Body::ReadObject { addr: addr.to_raw() }).await.unwrap();
        let refused = peer.call(Body::ReadObject { addr: 12_345 }).await.unwrap();
        (image, refused)
    });
    let Body::ObjectImage { len_bytes: 8, words, header } = image else { panic!("{image:?}") };
    assert_eq!(words, vec![0xfeed]);
    assert_ne!(header & !(1 << 63), 0, "the header carries the version");
    assert!(matches!(refused, Body::Error { code: codes::READ_FAILED, .. }), "{refused:?}");

    // Metrics reach the status reply: syncs and lease renewals happened on the followers.
    for n in &nodes[1..] {
        let m = n.metrics().snapshot();
        let get = |k: &str| m.iter().find(|(n, _)| n == k).map_or(0.0, |(_, v)| *v);
        assert!(get("sync_count") > 10.0, "node {} synced {}", n.id(), get("sync_count"));
        assert!(get("lease_renewals") > 2.0, "node {} renewed {}", n.id(), get("lease_renewals"));
    }
}

/// The negative twin: with ε (1 ppm) below the injected relative drift (250–400 ppm) and
/// syncs 250 ms apart, the drift outgrows the round trip and intervals miss the CM's time.
#[test]
fn with_epsilon_below_the_drift_intervals_miss_the_cms_time() {
    let fx = Fixture::new("negative");
    let (_, checked, missed) = sample_cluster(&fx, "negative", 1, 8, Duration::from_millis(700));
    assert!(
        missed > 0,
        "no interval of {checked} missed: the drift bound is not what protects them"
    );
}

#[test]
fn an_unrenewed_lease_is_reported_within_two_periods_and_etcd_loss_is_survived() {
    let mut fx = Fixture::new("lease");
    let lease = Duration::from_millis(200);
    let (_, mut files) = fx.cluster("lease", 3, 200);
    files[1].metrics_listen = Some("127.0.0.1:0".into());
    let local: LocalClock = Arc::new(ordo_clock::SystemClock::new());
    let mut nodes: Vec<Node> = files
        .into_iter()
        .map(|f| Node::start(f, ConfigSource::Etcd, local.clone()).unwrap())
        .collect();
    wait_for("every clock enabled", Duration::from_secs(10), || {
        nodes.iter().all(|n| n.clock().is_enabled())
    });
    wait_for("leases renewed", Duration::from_secs(5), || {
        nodes[0].leases().get(3).is_some_and(|s| s.renewals > 2)
    });
    assert!(nodes[0].suspects().is_empty());

    // Node 2 serves its metrics as Prometheus text, and nothing else.
    let metrics = nodes[1].metrics_addr().unwrap();
    let page = http_get(metrics, "/metrics");
    assert!(page.starts_with("HTTP/1.0 200"), "{page}");
    for name in [
        "ordo_sync_count{node=\"2\"}",
        "ordo_clock_interval_width_nanos{node=\"2\"}",
        "ordo_lease_renewals{node=\"2\"}",
        "ordo_sync_rtt_mean_nanos{node=\"2\"}",
    ] {
        assert!(page.contains(name), "{name} missing from {page}");
    }
    assert!(http_get(metrics, "/").starts_with("HTTP/1.0 404"));

    // Node 3 stops renewing: the CM reports it, within two periods of its last renewal.
    let stopped = nodes.pop().unwrap();
    stopped.shutdown();
    wait_for("node 3 suspected", lease * 10, || nodes[0].suspects().contains(&3));
    let detected = Instant::now();
    let last_renewal = nodes[0].leases().get(3).unwrap().renewed_at;
    let silent = detected - last_renewal;
    assert!(silent <= lease * 2, "detected {silent:?} after the last renewal (lease {lease:?})");
    assert!(nodes[0].suspects() == vec![3], "only node 3 is suspected: {:?}", nodes[0].suspects());
    assert!(nodes[1].suspects().is_empty(), "node 2 still holds the CM's lease");

    // etcd dies: the nodes keep serving under their configuration and report it.
    fx.etcd.stop();
    wait_for("etcd reported lost", Duration::from_secs(10), || {
        nodes
            .iter()
            .all(|n| n.metrics().etcd_connected.load(std::sync::atomic::Ordering::Relaxed) == 0)
    });
    let syncs = nodes[1].metrics().syncs.load(std::sync::atomic::Ordering::Relaxed);
    wait_for("syncs continue without etcd", Duration::from_secs(5), || {
        nodes[1].metrics().syncs.load(std::sync::atomic::Ordering::Relaxed) > syncs + 5
    });
    assert!(nodes[1].clock().is_enabled());
    assert_eq!(nodes[1].config().seq, 1);
    assert!(nodes[1].suspects().is_empty(), "the CM's lease is still renewed");

    // The CM stops: node 2 suspects it within two periods and stops handing out time — the
    // fence a new CM's lease wait relies on (FaRMv2 §4.3).
    let cm = nodes.remove(0);
    cm.shutdown();
    let stopped_at = Instant::now();
    wait_for("the CM suspected", lease * 10, || nodes[0].suspects().contains(&1));
    wait_for("node 2's clock disabled", lease * 2, || !nodes[0].clock().is_enabled());
    assert!(
        stopped_at.elapsed() <= lease * 3,
        "fenced {:?} after the CM stopped",
        stopped_at.elapsed()
    );
    assert!(nodes[0].clock().try_get_ts(Duration::from_millis(50)).is_err());
    assert!(nodes[0].clock().fast_forward_point() > ordo_clock::Timestamp::ZERO);
}

#[test]
fn bad_starts_are_typed_errors() {
    let fx = Fixture::new("bad");
    let (config, files) = fx.cluster("bad", 2, 50);
    let local: LocalClock = Arc::new(ordo_clock::SystemClock::new());

    // etcd down at start: retries with back-off, then a clear error.
    let mut down = files[0].clone();
    down.etcd = vec![format!("127.0.0.1:{}", free_port().unwrap())];
    down.etcd_start_timeout_ms = 600;
    let err = Node::start(down, ConfigSource::Etcd, local.clone()).err().unwrap();
    assert!(matches!(err, NodeError::Etcd(_)), "{err}");
    assert!(err.to_string().contains("unreachable"), "{err}");

    // A node the configuration does not name.
    let mut stranger = files[0].clone();
    stranger.id = 9;
    let err = Node::start(stranger, ConfigSource::Etcd, local.clone()).err().unwrap();
    assert!(err.to_string().contains("node 9 is not a member"), "{err}");

    // A static configuration naming an unknown node.
    let mut bad = config.clone();
    bad.regions[0].backups = vec![7];
    let err =
        Node::start(files[0].clone(), ConfigSource::Static(bad), local.clone()).err().unwrap();
    assert!(err.to_string().contains("names node 7"), "{err}");

    // A follower with the wrong secret is refused by the CM: its clock never enables.
    let cm = Node::start(files[0].clone(), ConfigSource::Etcd, local.clone()).unwrap();
    let mut wrong = files[1].clone();
    wrong.secret_file = fx.dir.join("wrong-secret");
    let follower = Node::start(wrong, ConfigSource::Etcd, local.clone()).unwrap();
    let err = follower.clock().try_get_ts(Duration::from_millis(600)).unwrap_err();
    assert!(err.to_string().contains("disabled"), "{err}");
    assert!(cm.metrics().syncs_served.load(std::sync::atomic::Ordering::Relaxed) == 0);

    // Garbage on the CM's port closes that connection only; the CM keeps serving.
    garbage(cm.local_addr());
    follower.shutdown();
    let good = Node::start(files[1].clone(), ConfigSource::Etcd, local).unwrap();
    wait_for("the good follower enabled", Duration::from_secs(10), || good.clock().is_enabled());
}

fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes()).unwrap();
    let mut page = String::new();
    s.read_to_string(&mut page).unwrap();
    page
}

fn garbage(addr: std::net::SocketAddr) {
    use std::io::Write;
    for bytes in [&b"GET / HTTP/1.1\r\n\r\n"[..], &[0xff; 64][..], &[0, 0, 0, 0xff, 1, 2][..]] {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        let _ = s.write_all(bytes);
    }
}

/// Starts `n` nodes with failover on and waits until every clock is enabled.
fn failover_cluster(fx: &mut Fixture, name: &str, n: u64, lease_ms: u32) -> Vec<Node> {
    let (_, files) = fx.cluster(name, n, lease_ms);
    // Every member's local clock is a second behind the CM's: a new CM that did not
    // fast-forward would hand out timestamps a second in the past.
    let source = ordo_clock::TimeSource::real(ordo_clock::DEFAULT_START_NANOS);
    let nodes: Vec<Node> = files
        .into_iter()
        .map(|mut f| {
            f.failover = true;
            let offset = if f.id == 1 { 0 } else { -1_000_000_000 };
            let local: LocalClock =
                Arc::new(ordo_clock::SkewedClock::new(source.clone(), offset, 0, 1_000));
            Node::start(f, ConfigSource::Etcd, local).unwrap()
        })
        .collect();
    wait_for("every clock enabled", Duration::from_secs(10), || {
        nodes.iter().all(|n| n.clock().is_enabled())
    });
    nodes
}

/// FaRMv2 §4.3 on real nodes over TCP and etcd: the CM stops; a member suspects it, wins the
/// compare-and-swap, runs NEW-CONFIG / CONFIG-COMMIT / ADVANCE and becomes the clock master;
/// the other member syncs with it. Every timestamp after the failover is above every one
/// before it, and the clock-disabled time is reported.
#[test]
fn the_cm_fails_over_to_a_member_and_time_moves_forward() {
    let mut fx = Fixture::new("cm-failover");
    let lease = Duration::from_millis(100);
    let mut nodes = failover_cluster(&mut fx, "cm-failover", 3, 100);
    let before = nodes.iter().map(|n| n.clock().get_ts()).max().unwrap();
    let cm = nodes.remove(0);
    cm.shutdown();
    wait_for("a new CM at seq 2", lease * 50, || {
        nodes.iter().all(|n| n.config().seq >= 2) && nodes.iter().any(|n| n.clock().is_master())
    });
    wait_for("both clocks enabled and the round reported", lease * 50, || {
        nodes.iter().all(|n| n.clock().is_enabled())
            && nodes.iter().any(|n| n.last_failover().is_some())
    });
    let config = nodes[0].config();
    assert!(config.member(1).is_none() && config.cm != 1, "{config:?}");
    let new_cm = nodes.iter().find(|n| n.id() == config.cm).unwrap();
    let report = new_cm.last_failover().expect("the new CM ran the round");
    assert!(report.cm_changed && report.removed == vec![1], "{report:?}");
    assert!(report.clock_disabled > Duration::ZERO);
    eprintln!(
        "CM failover: clock disabled {:?} on the new CM, {:?} from suspicion to the end of the round",
        report.clock_disabled, report.total
    );
    for n in &nodes {
        let ts = n.clock().get_ts();
        assert!(ts > before, "node {}: {ts:?} after the failover, {before:?} before", n.id());
        assert!(n.clock().fast_forward_point() > before);
    }
    // Every region of the old CM was promoted to a survivor.
    assert!(config.regions.iter().all(|r| r.primary != 1 && !r.backups.contains(&1)));
}

/// The CM removes a member that stops: the CM stays, so no clock is disabled.
#[test]
fn the_cm_removes_a_stopped_member_without_touching_the_clocks() {
    let mut fx = Fixture::new("member-failover");
    let lease = Duration::from_millis(100);
    let mut nodes = failover_cluster(&mut fx, "member-failover", 3, 100);
    let disables = nodes[1].clock().stats().disables;
    nodes.pop().unwrap().shutdown();
    wait_for("node 3 removed", lease * 50, || {
        nodes.iter().all(|n| n.config().seq >= 2 && n.config().member(3).is_none())
            && nodes[0].last_failover().is_some()
    });
    let report = nodes[0].last_failover().expect("the CM ran the round");
    assert!(!report.cm_changed && report.clock_disabled == Duration::ZERO, "{report:?}");
    assert_eq!(nodes[0].config().cm, 1);
    assert_eq!(nodes[1].clock().stats().disables, disables, "node 2's clock stayed enabled");
    // The CM stopped handing out time while node 3 was silent (`fence_cm`), and hands it out
    // again once node 3 is removed.
    wait_for("every clock enabled", lease * 10, || nodes.iter().all(|n| n.clock().is_enabled()));
}

/// A CM cut off from a member stops handing out time within a lease period — before that
/// member could suspect it and make another node CM — and hands it out again, at its own time,
/// once the member is back. A member's view: its lease with the CM expires only after a full
/// period.
#[test]
fn a_cm_that_loses_a_member_fences_its_clock_before_the_member_could_suspect_it() {
    let mut fx = Fixture::new("cm-fence");
    let lease = Duration::from_millis(100);
    let mut nodes = failover_cluster(&mut fx, "cm-fence", 3, 100);
    let before = nodes[0].clock().get_ts();
    let stopped = Instant::now();
    nodes.pop().unwrap().shutdown();
    wait_for("the CM's clock disabled", lease * 10, || !nodes[0].clock().is_enabled());
    let fenced_after = stopped.elapsed();
    eprintln!("CM fenced {fenced_after:?} after a member stopped (lease {lease:?})");
    assert!(fenced_after < lease, "a member could have suspected the CM first");
    let t = Instant::now();
    wait_for("node 3 removed and the CM's clock enabled again", lease * 50, || {
        if t.elapsed() > lease * 40 {
            eprintln!(
                "seq {} members {:?} enabled {} report {:?} suspects {:?}",
                nodes[0].config().seq,
                nodes[0].config().members.iter().map(|m| m.id).collect::<Vec<_>>(),
                nodes[0].clock().is_enabled(),
                nodes[0].last_failover(),
                nodes[0].suspects()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        nodes[0].config().member(3).is_none() && nodes[0].clock().is_enabled()
    });
    assert!(nodes[0].clock().get_ts() > before);
}

/// A one-entry part writing the `u64` `value` at `addr`, for a hand-made coordinator: the entry
/// (address, update of 8 bytes, "not newer than `rts`") and its payload word.
fn update_part(addr: ordo::Addr, value: u64, rts: Timestamp) -> (Vec<u64>, Vec<u64>) {
    (vec![addr.to_raw(), 8 << 8, (1 << 62) | rts.as_nanos()], vec![value])
}

/// A coordinator made by hand over the wire, speaking as node (or client) `id`: its LOCK and
/// COMMIT-BACKUP messages carry one-entry parts writing `u64`s, read at `rts` and written at
/// `wts`, for transactions writing regions 1 and 3.
struct HandCoordinator {
    rt: tokio::runtime::Runtime,
    id: u64,
    cluster: &'static str,
    secret: Secret,
    rts: Timestamp,
    wts: Timestamp,
    seq: u64,
}

impl HandCoordinator {
    fn new(fx: &Fixture, cluster: &'static str, id: u64, clock_of: &Node) -> Self {
        HandCoordinator {
            rt: rt(),
            id,
            cluster,
            secret: Secret::from_file(&fx.dir.join("secret")).unwrap(),
            rts: clock_of.clock().get_ts(),
            wts: clock_of.clock().get_ts(),
            seq: clock_of.config().seq,
        }
    }

    fn connect(&self, n: &Node) -> Peer {
        let connect = Peer::connect(
            n.local_addr(),
            self.id,
            self.cluster,
            self.secret.clone(),
            Limits::default(),
        );
        self.rt.block_on(connect).unwrap()
    }

    fn done(&self, peer: &Peer, body: Body) {
        let r = self.rt.block_on(peer.call(body)).unwrap();
        assert!(matches!(r, Body::Done { flag: true }), "{r:?}");
    }

    fn lock(&self, peer: &Peer, tx: u64, a: ordo::Addr, v: u64) {
        let (entries, words) = update_part(a, v, self.rts);
        self.done(peer, Body::Lock { tx, region: a.region(), seq: self.seq, entries, words });
    }

    fn backup(&self, peer: &Peer, tx: u64, a: ordo::Addr, v: u64) {
        let (entries, words) = update_part(a, v, self.rts);
        let body = Body::CommitBackup {
            tx,
            region: a.region(),
            wts: self.wts.as_nanos(),
            entries,
            words,
            truncate: vec![],
            regions: vec![1, 3],
        };
        self.done(peer, body);
    }
}

/// FaRMv2 §4.7 on real nodes: a coordinator dies mid-commit, leaving a lock at a surviving
/// primary and records at backups, one of them the backup that is promoted to its region's
/// primary. The CM removes it and recovery decides each transaction: every part recorded →
/// committed (installed at the primary, applied at the backups); a region without its record →
/// aborted (the lock released, the other record dropped); one part already applied → committed,
/// though another region's record is missing: the evidence counts. The promoted region is served
/// once its records are resolved, with its allocator rebuilt.
#[test]
fn a_dead_coordinators_transactions_are_committed_or_aborted_by_the_survivors() {
    let mut fx = Fixture::new("recovery");
    let lease = Duration::from_millis(100);
    let mut nodes = failover_cluster(&mut fx, "recovery", 3, 100);
    // Regions: 1 (primary 1, backup 2), 2 (primary 2, backup 3), 3 (primary 3, backup 1).
    let xs: Vec<ordo::Addr> =
        (0..3).map(|i| nodes[0].db().run(|tx| tx.alloc(&(10 + i as u64))).unwrap()).collect();
    let ys: Vec<ordo::Addr> =
        (0..4).map(|i| nodes[2].db().run(|tx| tx.alloc(&(20 + i as u64))).unwrap()).collect();
    assert!(xs.iter().all(|a| a.region() == 1) && ys.iter().all(|a| a.region() == 3));
    nodes[2].owners().flush(); // node 1 holds ys as region 3's backup

    // A coordinator speaking as node 3 (the secret is the cluster's), and one as node 2, which
    // stays alive.
    let dead = HandCoordinator::new(&fx, "recovery", 3, &nodes[0]);
    let live = HandCoordinator::new(&fx, "recovery", 2, &nodes[0]);
    let (to1, to2, live_to1) =
        (dead.connect(&nodes[0]), dead.connect(&nodes[1]), live.connect(&nodes[0]));
    let rts = dead.rts;
    let (lock, backup) = (
        |p: &Peer, tx, a, v| dead.lock(p, tx, a, v),
        |p: &Peer, tx, a, v| dead.backup(p, tx, a, v),
    );
    let done = |p: &Peer, body| dead.done(p, body);
    const T1: u64 = 1 << 40;
    const T2: u64 = T1 + 1;
    const T3: u64 = T1 + 2;
    // T1: locked at region 1's primary, recorded at both regions' backups: committed.
    lock(&to1, T1, xs[0], 111);
    backup(&to2, T1, xs[0], 111);
    backup(&to1, T1, ys[0], 333);
    // T2: region 1's record never sent: it never reached its commit point.
    lock(&to1, T2, xs[1], 222);
    backup(&to1, T2, ys[1], 444);
    // T3: region 3's part already applied (TRUNCATE), region 1's still recorded and locked.
    lock(&to1, T3, xs[2], 555);
    backup(&to2, T3, xs[2], 555);
    backup(&to1, T3, ys[2], 666);
    done(&to1, Body::Truncate { truncate: vec![(T3, 3)], discard: vec![] });
    drop((to1, to2));
    // T4, by live node 2: committed, its TRUNCATE to region 3's backup (node 1) not sent yet.
    const T4: u64 = T1 + 3;
    live.backup(&live_to1, T4, ys[3], 777);

    nodes.pop().unwrap().shutdown();
    wait_for("node 3 removed and its transactions recovered", lease * 50, || {
        nodes.iter().all(|n| n.config().seq >= 2) && nodes[0].last_failover().is_some()
    });
    // Node 1 is region 3's primary now, but serves it only once T4's record is resolved: a
    // read there now would miss T4's write.
    let refused = nodes[1].db().run(|tx| tx.read::<u64>(ys[3]));
    assert!(refused.is_err(), "region 3 served before its records were resolved: {refused:?}");
    assert_eq!(nodes[0].gated_regions(), vec![3]);
    live.done(&live_to1, Body::Truncate { truncate: vec![(T4, 3)], discard: vec![] });
    wait_for("region 3 served", Duration::from_secs(5), || nodes[0].gated_regions().is_empty());
    let report = nodes[0].last_failover().unwrap();
    eprintln!("recovery: {report:?}");
    assert_eq!((report.recovered_commits, report.recovered_aborts), (2, 1), "{report:?}");
    let config = nodes[0].config();
    assert_eq!(config.regions.iter().find(|r| r.region == 3).unwrap().primary, 1);

    let read = |a: ordo::Addr| nodes[1].db().run(|tx| tx.read::<u64>(a)).unwrap();
    assert_eq!((read(xs[0]), read(ys[0])), (111, 333), "T1 committed");
    assert_eq!((read(xs[1]), read(ys[1])), (11, 21), "T2 aborted");
    assert_eq!((read(xs[2]), read(ys[2])), (555, 666), "T3 committed");
    assert_eq!(read(ys[3]), 777, "T4 applied at the promoted primary");
    // The backup copy kept no old versions: a read of region 3 below the promotion is refused
    // with a typed reason, not answered from a version that was never there.
    let old = Body::Read { addr: ys[0].to_raw(), rts: rts.as_nanos(), flags: 2 };
    match live.rt.block_on(live_to1.call(old)).unwrap() {
        Body::Declined { code, .. } => {
            let e = ordo::remote::Refusal { code, addr: 0, a: 0, b: 0 }.into_error();
            assert!(matches!(e, Some(ordo::Error::SnapshotTooOld { .. })), "{e:?}");
        }
        other => panic!("an old-version read below the promotion was answered: {other:?}"),
    }
    let stats = nodes[0].db().serve_stats();
    assert_eq!((stats.locked, stats.backed), (0, 0), "{stats:?}");
    assert_eq!(nodes[1].db().serve_stats().backed, 0);
    // T2's lock is gone: its object takes writes; the promoted region takes writes and
    // allocations (its free slots rebuilt from the backup copy).
    nodes[1].db().run(|tx| tx.write(xs[1], &12u64)).unwrap();
    nodes[1].db().run(|tx| tx.write(ys[1], &22u64)).unwrap();
    let fresh = nodes[1].db().run(|tx| tx.alloc_near(ys[0], &7u64)).unwrap();
    assert_eq!(fresh.region(), 3);
    assert!(!ys.contains(&fresh), "a slot in use was handed out again");
    assert_eq!((read(xs[1]), read(ys[1]), read(fresh)), (12, 22, 7));
    // Region 1's backup (node 2) holds what its primary holds.
    nodes[1].owners().flush();
    nodes[0].owners().flush();
    wait_for("region 1 replicated", Duration::from_secs(5), || {
        nodes[0].db().region_digest(1) == nodes[1].db().region_digest(1)
    });
}

/// Re-replication (FaRM §5.4): node 3 stops, leaving region 2 without its backup and region 3
/// promoted to node 1 without one. The CM gives each a new backup; the primaries copy the
/// regions while a writer keeps updating them, and every copy ends equal to its primary.
/// A LOCK routed by the configuration before the change is refused (the copy's fence).
#[test]
fn regions_that_lost_a_backup_are_copied_to_a_new_one_under_writes() {
    let mut fx = Fixture::new("rereplicate");
    let lease = Duration::from_millis(100);
    let mut nodes = failover_cluster(&mut fx, "rereplicate", 3, 100);
    let in2: Vec<ordo::Addr> =
        (0..600u64).map(|i| nodes[1].db().run(|tx| tx.alloc(&i)).unwrap()).collect();
    let in3: Vec<ordo::Addr> =
        (0..300u64).map(|i| nodes[2].db().run(|tx| tx.alloc(&i)).unwrap()).collect();
    assert!(in2.iter().all(|a| a.region() == 2) && in3.iter().all(|a| a.region() == 3));
    nodes[2].owners().flush();
    nodes.pop().unwrap().shutdown();

    let stop = std::sync::atomic::AtomicBool::new(false);
    /// Stops the writer however the scope ends (a failed wait must not leave it running).
    struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    std::thread::scope(|scope| {
        let _stop = Stop(&stop);
        let writer = scope.spawn(|| {
            let mut writes = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (a, b) = (in2[writes as usize % in2.len()], in3[writes as usize % in3.len()]);
                // Refusals while the configuration changes are retried by the next round.
                if nodes[0].db().run(|tx| tx.write(a, &(1_000 + writes))).is_ok()
                    && nodes[0].db().run(|tx| tx.write(b, &(2_000 + writes))).is_ok()
                {
                    writes += 1;
                }
            }
            writes
        });
        let waited = Instant::now();
        wait_for("both regions copied to their new backups", lease * 100, || {
            let config = nodes[0].config();
            if waited.elapsed() > lease * 50 {
                eprintln!(
                    "still waiting: seq {} regions {:?} copies {:?} / {:?} gated {:?}",
                    config.seq,
                    config.regions,
                    nodes[0].copies(),
                    nodes[1].copies(),
                    nodes[0].gated_regions()
                );
                std::thread::sleep(Duration::from_millis(500));
            }
            let backed =
                |r: u32| config.regions.iter().any(|p| p.region == r && p.backups.len() == 1);
            backed(2)
                && backed(3)
                && nodes[1].copies().iter().any(|c| c.region == 2)
                && nodes[0].copies().iter().any(|c| c.region == 3)
        });
        std::thread::sleep(lease);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let writes = writer.join().unwrap();
        eprintln!("writer committed {writes} pairs during the failover and the copies");
    });
    let config = nodes[0].config();
    assert_eq!(config.seq, 3, "{config:?}");
    let r = |id: u32| config.regions.iter().find(|p| p.region == id).unwrap().clone();
    assert_eq!((r(2).primary, r(2).backups.clone()), (2, vec![1]));
    assert_eq!((r(3).primary, r(3).backups.clone()), (1, vec![2]));
    for (node, copy) in [(&nodes[1], 2u16), (&nodes[0], 3u16)] {
        let c = node.copies().into_iter().find(|c| c.region == copy).unwrap();
        eprintln!("region {copy}: {c:?}");
        assert!(c.error.is_none(), "{c:?}");
        assert!(c.report.objects >= 300, "{c:?}");
    }
    for n in &nodes {
        n.owners().flush();
    }
    wait_for("every copy equal to its primary", Duration::from_secs(5), || {
        nodes[0].db().region_digest(2) == nodes[1].db().region_digest(2)
            && nodes[0].db().region_digest(3) == nodes[1].db().region_digest(3)
    });

    // A coordinator still routing by configuration 2 is refused at LOCK.
    let secret = Secret::from_file(&fx.dir.join("secret")).unwrap();
    let rt = rt();
    let peer = rt
        .block_on(Peer::connect(
            nodes[1].local_addr(),
            99,
            "rereplicate",
            secret,
            Limits::default(),
        ))
        .unwrap();
    let (entries, words) = update_part(in2[0], 5, nodes[1].clock().get_ts());
    let lock =
        |seq| Body::Lock { tx: 1, region: 2, seq, entries: entries.clone(), words: words.clone() };
    let r = rt.block_on(peer.call(lock(2))).unwrap();
    assert!(matches!(r, Body::Error { code: codes::WRONG_CONFIG, .. }), "{r:?}");
    let r = rt.block_on(peer.call(lock(3))).unwrap();
    assert!(matches!(r, Body::Done { flag: true }), "{r:?}");
    let r = rt.block_on(peer.call(Body::Abort { tx: 1, region: 2, allocs: vec![] })).unwrap();
    assert!(matches!(r, Body::Done { flag: true }), "{r:?}");
}

/// One recorded attempt of `ops` on `db` for the failover test: aborts and participant
/// failures before the commit point are aborts (nothing installed, every lock released); a
/// participant failure after it is a commit (every backup holds the transaction).
fn attempt_through_failover<C: Clock>(
    db: &ordo::Ordo<C>,
    keys: &[ordo::Addr],
    rec: &ordo_check::Recorder,
    process: u32,
    ops: &[common::Op],
    next_value: &mut u64,
) -> bool {
    let gone = |e: &ordo::Error| match e {
        ordo::Error::Aborted(_) => true,
        ordo::Error::Participant { step, .. } => !step.is_after_commit_point(),
        _ => false,
    };
    let mut r = rec.begin(process);
    let Ok(mut tx) = db.begin_with(ordo::Options::isolation(ordo::Isolation::StrictSerializable))
    else {
        r.abort(); // the clock is disabled during the CM's failover
        return false;
    };
    for op in ops {
        let done = match *op {
            common::Op::Read(k) => {
                common::read_list(&mut tx, keys[k]).map(|l| r.read_list(k as u64, &l))
            }
            common::Op::Append(k) => {
                *next_value += 1;
                let v = (u64::from(process) << 40) | *next_value;
                common::append(&mut tx, keys[k], v).map(|appended| {
                    if appended {
                        r.append(k as u64, v);
                    }
                })
            }
        };
        match done {
            Ok(()) => {}
            Err(e) if gone(&e) => {
                drop(tx);
                r.abort();
                return false;
            }
            Err(e) => panic!("process {process}: unexpected error {e}"),
        }
    }
    match tx.commit() {
        Ok(_) => {
            r.commit();
            true
        }
        Err(e) if gone(&e) => {
            r.abort();
            false
        }
        Err(e @ ordo::Error::Participant { .. }) => {
            eprintln!("process {process}: committed, one owner not reached: {e}");
            r.commit();
            true
        }
        Err(e) => panic!("process {process}: unexpected commit error {e}"),
    }
}

/// FaRMv2 §4.3–§4.7 under load on real nodes: coordinators on the two other nodes run random
/// strict-serializable transactions over lists on every region while node `victim` (1 is the
/// CM; each node is the primary of one region and the backup of another) stops. Its region is
/// promoted, recovery and re-replication run (and, for the CM, the clocks fail over), and the
/// coordinators carry on. The whole history (aborted attempts included) passes the opacity
/// checker — no acknowledged write lost, no read back in time, timestamps after the failover
/// above those before — and every region's backup ends equal to its primary.
fn transactions_through_the_failure_of(name: &str, victim: u64) {
    use rand::{Rng, SeedableRng};
    let seed = ordo_seed::Seed::new(name);
    let mut fx = Fixture::new(name);
    let lease = Duration::from_millis(100);
    let mut nodes = failover_cluster(&mut fx, name, 3, 100);
    let mut lists = Vec::new();
    for n in &nodes {
        lists.extend(common::make_lists(n.db(), 2));
    }
    for n in &nodes {
        n.owners().flush();
    }
    let rec = ordo_check::Recorder::new();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let committed = std::sync::atomic::AtomicU64::new(0);
    let i = nodes.iter().position(|n| n.id() == victim).unwrap();
    let doomed = std::sync::Mutex::new(Some(nodes.remove(i)));
    std::thread::scope(|s| {
        for (p, node) in [(1u32, &nodes[0]), (2, &nodes[0]), (3, &nodes[1])] {
            let (rec, lists, stop, committed) = (&rec, &lists, &stop, &committed);
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed.derive(u64::from(p)));
            s.spawn(move || {
                let mut next_value = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let ops: Vec<common::Op> = (0..rng.random_range(1..=3))
                        .map(|_| {
                            let k = rng.random_range(0..lists.len());
                            if rng.random_bool(0.5) {
                                common::Op::Read(k)
                            } else {
                                common::Op::Append(k)
                            }
                        })
                        .collect();
                    if attempt_through_failover(node.db(), lists, rec, p, &ops, &mut next_value) {
                        committed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    } else {
                        std::thread::sleep(Duration::from_micros(rng.random_range(0..500)));
                    }
                }
            });
        }
        std::thread::sleep(lease * 3);
        let before = committed.load(std::sync::atomic::Ordering::Relaxed);
        doomed.lock().unwrap().take().unwrap().shutdown();
        wait_for("every region served again with a backup", lease * 100, || {
            nodes.iter().all(|n| {
                let c = n.config();
                c.seq >= 3
                    && c.member(victim).is_none()
                    && n.gated_regions().is_empty()
                    && c.regions.iter().all(|r| r.backups.len() == 1)
                    && n.clock().is_enabled()
            })
        });
        let at_failover = committed.load(std::sync::atomic::Ordering::Relaxed);
        std::thread::sleep(lease * 5);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let after = committed.load(std::sync::atomic::Ordering::Relaxed) - at_failover;
        eprintln!(
            "{name}: {before} commits before the stop, {} during the failover, {after} after",
            at_failover - before
        );
        assert!(after > 0, "no commit after the failover");
    });
    let mut v = 0;
    let all: Vec<common::Op> = (0..lists.len()).map(common::Op::Read).collect();
    wait_for("a final read", Duration::from_secs(5), || {
        attempt_through_failover(nodes[1].db(), &lists, &rec, 999, &all, &mut v)
    });
    let h = rec.history();
    if let Err(v) = ordo_check::check_opacity(&h) {
        panic!("{name}, seed {seed:?}: {v}");
    }
    for n in &nodes {
        n.owners().flush();
    }
    let regions: Vec<u16> = nodes[0].config().regions.iter().map(|r| r.region as u16).collect();
    wait_for("every backup equal to its primary", Duration::from_secs(5), || {
        regions.iter().all(|&r| nodes[0].db().region_digest(r) == nodes[1].db().region_digest(r))
    });
}

#[test]
fn transactions_through_a_member_failure_are_opaque_and_lose_nothing() {
    transactions_through_the_failure_of("member-under-load", 3);
}

#[test]
fn transactions_through_the_cms_failure_are_opaque_and_lose_nothing() {
    transactions_through_the_failure_of("cm-under-load", 1);
}

/// Holds a committer that reached `at` until `go` is set (at most 20 s), setting `reached`
/// first: the body of the commit hooks below (a hook is a plain `fn`, so each has its flags).
#[cfg(feature = "shortcuts")]
fn pause_at(
    step: ordo::txn::CommitStep,
    at: ordo::txn::CommitStep,
    reached: &std::sync::atomic::AtomicBool,
    go: &std::sync::atomic::AtomicBool,
) {
    use std::sync::atomic::Ordering::SeqCst;
    if step == at {
        reached.store(true, SeqCst);
        let started = Instant::now();
        while !go.load(SeqCst) && started.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Set by [`pause_after_install`] when its commit has installed.
#[cfg(feature = "shortcuts")]
static INSTALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Lets [`pause_after_install`]'s commit go on to TRUNCATE.
#[cfg(feature = "shortcuts")]
static RELEASE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A commit hook that holds the committer between COMMIT-PRIMARY and TRUNCATE until
/// [`RELEASE`].
#[cfg(feature = "shortcuts")]
fn pause_after_install(step: ordo::txn::CommitStep) {
    pause_at(step, ordo::txn::CommitStep::Installed, &INSTALLED, &RELEASE);
}

/// A coordinator that committed before a failover truncates after it: its TRUNCATE must reach
/// the backup its COMMIT-BACKUP went to, though that backup is now the region's primary (and no
/// longer in the region's backups). The promoted node serves the region only once it applied
/// the record: a read there returns the committed value.
#[cfg(feature = "shortcuts")]
#[test]
fn a_truncation_reaches_the_backup_promoted_since_its_commit_backup() {
    use std::sync::atomic::Ordering::SeqCst;
    let mut fx = Fixture::new("late-truncate");
    let lease = Duration::from_millis(100);
    let mut nodes = failover_cluster(&mut fx, "late-truncate", 3, 100);
    let y = nodes[2].db().run(|tx| tx.alloc(&1u64)).unwrap();
    assert_eq!(y.region(), 3);
    nodes[2].owners().flush();
    let third = nodes.pop().unwrap();
    std::thread::scope(|s| {
        let coordinator = &nodes[1];
        let committer = s.spawn(move || {
            let shortcuts =
                ordo::txn::Shortcuts { hook: Some(pause_after_install), ..Default::default() };
            let mut tx =
                coordinator.db().begin_with(ordo::Options { shortcuts, ..Default::default() })?;
            tx.write(y, &99u64)?;
            tx.commit()
        });
        wait_for("the commit installed", Duration::from_secs(10), || INSTALLED.load(SeqCst));
        third.shutdown();
        wait_for("region 3 promoted to node 1", lease * 50, || {
            nodes.iter().all(|n| n.config().regions.iter().any(|r| r.region == 3 && r.primary == 1))
        });
        assert_eq!(nodes[0].gated_regions(), vec![3], "the record is pending at node 1");
        RELEASE.store(true, SeqCst);
        committer.join().unwrap().unwrap();
    });
    wait_for("region 3 served", Duration::from_secs(5), || nodes[0].gated_regions().is_empty());
    assert_eq!(nodes[1].db().run(|tx| tx.read::<u64>(y)).unwrap(), 99);
}

/// A client — a coordinator that no failover removes — dies mid-commit: after
/// `CLIENT_OAT_TTL` without a report the CM presumes it dead, every member fences it, and
/// recovery decides its transactions as a removed member's (one committed, one aborted), so no
/// lock of it stays held. Nothing more from it is served.
#[test]
fn a_dead_clients_transactions_are_recovered_and_the_client_fenced() {
    let mut fx = Fixture::new("dead-client");
    let nodes = failover_cluster(&mut fx, "dead-client", 3, 100);
    let xs: Vec<ordo::Addr> =
        (0..2).map(|i| nodes[0].db().run(|tx| tx.alloc(&(10 + i as u64))).unwrap()).collect();
    let y = nodes[2].db().run(|tx| tx.alloc(&20u64)).unwrap();
    nodes[2].owners().flush();
    const CLIENT: u64 = (1 << 63) | 4242;
    let client = HandCoordinator::new(&fx, "dead-client", CLIENT, &nodes[0]);
    let (to1, to2, to3) =
        (client.connect(&nodes[0]), client.connect(&nodes[1]), client.connect(&nodes[2]));
    client.rt.block_on(to1.send(Body::OatReport { oat: 1 })).unwrap();
    let lock = |p: &Peer, tx, a, v| client.lock(p, tx, a, v);
    let backup = |p: &Peer, tx, a, v| client.backup(p, tx, a, v);
    // Tx 1: every part recorded (committed). Tx 2: locked only (aborted).
    lock(&to1, 1, xs[0], 111);
    lock(&to3, 1, y, 333);
    backup(&to2, 1, xs[0], 111);
    backup(&to1, 1, y, 333);
    lock(&to1, 2, xs[1], 222);
    wait_for("the client's transactions resolved", Duration::from_secs(10), || {
        nodes.iter().all(|n| {
            let s = n.db().serve_stats();
            s.locked == 0 && s.backed == 0
        })
    });
    let read = |a: ordo::Addr| nodes[1].db().run(|tx| tx.read::<u64>(a)).unwrap();
    assert_eq!((read(xs[0]), read(y), read(xs[1])), (111, 333, 11));
    let r = client.rt.block_on(to2.call(Body::Ping { payload: 1 })).unwrap();
    assert!(matches!(r, Body::Error { code: codes::FENCED, .. }), "{r:?}");
}

/// Set by [`pause_when_locked`] when its commit holds its locks.
#[cfg(feature = "shortcuts")]
static LOCKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Lets [`pause_when_locked`]'s commit go on.
#[cfg(feature = "shortcuts")]
static GO_ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A commit hook that holds the committer after LOCK until [`GO_ON`].
#[cfg(feature = "shortcuts")]
fn pause_when_locked(step: ordo::txn::CommitStep) {
    pause_at(step, ordo::txn::CommitStep::Locked, &LOCKED, &GO_ON);
}

/// A coordinator locks at a region's primary, the primary dies and its backup is promoted, and
/// only then does the coordinator go on to COMMIT-BACKUP, routed by the new placement. Its lock
/// died with the old primary and the new one never held it: the attempt must abort before its
/// commit point, not acknowledge a write that no primary installs (found by `ordo bench
/// failover`: a lost update under a CM kill).
#[cfg(feature = "shortcuts")]
#[test]
fn a_commit_whose_primary_changed_since_its_lock_aborts() {
    use std::sync::atomic::Ordering::SeqCst;
    let mut fx = Fixture::new("moved-lock");
    let lease = Duration::from_millis(100);
    let mut nodes = failover_cluster(&mut fx, "moved-lock", 3, 100);
    let y = nodes[2].db().run(|tx| tx.alloc(&1u64)).unwrap();
    nodes[2].owners().flush();
    let third = nodes.pop().unwrap();
    let outcome = std::thread::scope(|s| {
        let coordinator = &nodes[1];
        let committer = s.spawn(move || {
            let shortcuts =
                ordo::txn::Shortcuts { hook: Some(pause_when_locked), ..Default::default() };
            let mut tx =
                coordinator.db().begin_with(ordo::Options { shortcuts, ..Default::default() })?;
            tx.write(y, &99u64)?;
            tx.commit()
        });
        wait_for("the commit locked", Duration::from_secs(10), || LOCKED.load(SeqCst));
        third.shutdown();
        wait_for("region 3 promoted and served", lease * 50, || {
            nodes.iter().all(|n| n.config().regions.iter().any(|r| r.region == 3 && r.primary == 1))
                && nodes[0].gated_regions().is_empty()
        });
        GO_ON.store(true, SeqCst);
        committer.join().unwrap()
    });
    let value = nodes[1].db().run(|tx| tx.read::<u64>(y)).unwrap();
    match outcome {
        Err(ordo::Error::Participant { step, .. }) if !step.is_after_commit_point() => {
            assert_eq!(value, 1, "an aborted write is visible");
        }
        other => panic!("the commit returned {other:?}; the value is {value}"),
    }
}
