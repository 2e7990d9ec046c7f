//! `etcd-compare` against a real 3-member etcd cluster on loopback (started on free ports,
//! stopped at the end): the counters written add up to the commits the driver counted (and a
//! target that miscounts is caught), and the cluster keeps serving with its leader killed.
#![allow(clippy::unwrap_used)] // test set-up: a failure is the test failing

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use ordo_bench::etcd_compare::etcd_target::{self, Endpoints, EtcdTarget};
use ordo_bench::etcd_compare::{
    self, CompareError, RunConfig, TargetFuture, TxnKeys, TxnOutcome, TxnTarget,
};
use ordo_cluster::etcd_server::EtcdCluster;

const TIMEOUT: Duration = Duration::from_secs(5);

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ordo-etcd-compare-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn config(clients: usize, keys: u64, seed: u64) -> RunConfig {
    RunConfig {
        clients,
        duration: Duration::from_millis(300),
        warmup: Duration::from_millis(50),
        keys,
        seed,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_written_add_up_to_the_commits_counted() {
    let dir = temp_dir("sum");
    let cluster = EtcdCluster::start(&dir, 3).unwrap();
    assert_eq!(cluster.endpoints().len(), 3);
    // Two connections for four clients: both mappings of clients to connections are used.
    let target =
        Arc::new(EtcdTarget::with_cluster(cluster, 2, Endpoints::All, TIMEOUT).await.unwrap());
    target.load(100).await.unwrap();
    etcd_compare::check_counters(&*target, 100, 0).await.unwrap();
    let mut committed = 0;
    for seed in [1, 2] {
        let report = etcd_compare::run(target.clone(), &config(4, 100, seed)).await.unwrap();
        println!("{report:?}");
        assert!(report.committed > 0, "{report:?}");
        assert!(report.committed <= report.committed_total);
        assert!(report.p50_us > 0.0 && report.p50_us <= report.p99_us, "{report:?}");
        committed += report.committed_total;
        // After every run, not only at the end: a run's tail is counted in its own total.
        etcd_compare::check_counters(&*target, 100, committed).await.unwrap();
    }
    // Loading again resets the counters.
    target.load(100).await.unwrap();
    etcd_compare::check_counters(&*target, 100, 0).await.unwrap();
    drop(target);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The negative twin: a target that reports its conflicts as commits overcounts, and the check
/// says so.
struct ConflictsReportedAsCommits {
    inner: EtcdTarget,
    conflicts: AtomicU64,
}

impl TxnTarget for ConflictsReportedAsCommits {
    fn name(&self) -> &'static str {
        "miscounting"
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn load(&self, keys: u64) -> TargetFuture<'_, ()> {
        self.inner.load(keys)
    }
    fn txn(&self, client: usize, keys: TxnKeys) -> TargetFuture<'_, TxnOutcome> {
        Box::pin(async move {
            let outcome = self.inner.txn(client, keys).await?;
            if outcome == TxnOutcome::Conflict {
                self.conflicts.fetch_add(1, Relaxed);
            }
            Ok(TxnOutcome::Committed)
        })
    }
    fn counters(&self, keys: u64) -> TargetFuture<'_, Vec<u64>> {
        self.inner.counters(keys)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_miscounts_fails_the_check() {
    let dir = temp_dir("miscount");
    let cluster = EtcdCluster::start(&dir, 3).unwrap();
    let inner = EtcdTarget::with_cluster(cluster, 1, Endpoints::Leader, TIMEOUT).await.unwrap();
    let target = Arc::new(ConflictsReportedAsCommits { inner, conflicts: AtomicU64::new(0) });
    // Four clients on two keys: every transaction touches both, so conflicts are certain.
    target.load(2).await.unwrap();
    let report = etcd_compare::run(target.clone(), &config(4, 2, 3)).await.unwrap();
    assert!(target.conflicts.load(Relaxed) > 0, "no conflicts on two keys: {report:?}");
    let check = etcd_compare::check_counters(&*target, 2, report.committed_total).await;
    assert!(
        matches!(check, Err(CompareError::Inconsistent { sum, committed, .. }) if sum < committed),
        "{check:?}"
    );
    drop(target);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_one_member_of_three_leaves_the_cluster_serving() {
    let dir = temp_dir("kill");
    let mut cluster = EtcdCluster::start(&dir, 3).unwrap();
    let target = Arc::new(EtcdTarget::connect(&cluster.endpoints(), 1, TIMEOUT).await.unwrap());
    target.load(20).await.unwrap();
    let before = etcd_compare::run(target.clone(), &config(2, 20, 4)).await.unwrap();

    // Kill the leader: the harder case, the survivors must elect a new one.
    let killed = etcd_target::leader(&cluster.endpoints(), TIMEOUT).await.unwrap();
    cluster.stop_member(killed);
    assert!(cluster.members()[killed].pid().is_none());
    let others: Vec<usize> = (0..3).filter(|&i| i != killed).collect();
    assert!(others.iter().all(|&i| cluster.members()[i].pid().is_some()));

    // A client balanced over all three endpoints keeps sending some requests to the dead one
    // (etcd-client's tonic channel reconnects and fails them with `Unavailable`), so a client of
    // the degraded cluster connects to the survivors. Their reads come back once they have a
    // leader, and show what was committed before the kill.
    let survivors: Vec<String> = others.iter().map(|&i| cluster.endpoints()[i].clone()).collect();
    let started = Instant::now();
    let (target, counters) = loop {
        let attempt = async {
            let target = EtcdTarget::connect(&survivors, 1, TIMEOUT).await?;
            let counters = target.counters(20).await?;
            Ok::<_, CompareError>((Arc::new(target), counters))
        };
        match attempt.await {
            Ok(ready) => break ready,
            Err(e) => {
                assert!(started.elapsed() < Duration::from_secs(20), "not serving: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(counters.iter().sum::<u64>(), before.committed_total);

    // And it commits transactions again, all of them counted.
    let after = etcd_compare::run(target.clone(), &config(2, 20, 5)).await.unwrap();
    assert!(after.committed > 0, "{after:?}");
    etcd_compare::check_counters(&*target, 20, before.committed_total + after.committed_total)
        .await
        .unwrap();
    drop(target);
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The Ordo side under every coordinator placement: the counters add up to the commits
/// counted, every backup equals its primary, and shipping each transaction to its written
/// object's primary saves network calls over round-robin nodes (it fails if the routing picks
/// the wrong node: then the write's read and LOCK cross the network again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordo_counters_add_up_under_every_coordinator_placement() {
    use ordo_bench::etcd_compare::ordo_target::{Coordinators, OrdoOptions, OrdoTarget};
    let mut per_commit = Vec::new();
    for coordinators in [Coordinators::Client, Coordinators::Nodes, Coordinators::Owner] {
        let options = OrdoOptions { coordinators, region_bytes: 4 << 20, ..OrdoOptions::default() };
        let target =
            tokio::task::spawn_blocking(move || OrdoTarget::start(options)).await.unwrap().unwrap();
        let target = Arc::new(target);
        target.load(300).await.unwrap();
        let report = etcd_compare::run(target.clone(), &config(4, 300, 7)).await.unwrap();
        println!("{coordinators:?}: {report:?}");
        assert!(report.committed > 0, "{coordinators:?}: {report:?}");
        etcd_compare::check_counters(&*target, 300, report.committed_total).await.unwrap();
        per_commit.push(report.round_trips_per_commit.unwrap());
    }
    let (client, nodes, owner) = (per_commit[0], per_commit[1], per_commit[2]);
    assert!(owner < nodes && nodes < client, "calls per commit: {per_commit:?}");
    // The written object's read and LOCK are local: what remains is the other read (remote
    // 2/3 of the time), its validation, and COMMIT-BACKUP (about 2.3 calls, plus retries).
    assert!(owner < 2.9, "calls per commit at the owner: {owner}");
}
