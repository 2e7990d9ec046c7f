//! The configuration in a real etcd (started on free loopback ports, stopped at the end):
//! create, compare-and-swap on the sequence number, watch, invalid documents, etcd down.
#![allow(clippy::unwrap_used)] // test set-up: a failure is the test failing

use std::time::Duration;

use ordo_cluster::config::{ClusterConfig, Member};
use ordo_cluster::etcd::{ConfigStore, EtcdError};
use ordo_cluster::etcd_server::{EtcdServer, free_port};

fn members(n: u64) -> Vec<Member> {
    (1..=n).map(|id| Member { id, addr: format!("127.0.0.1:{}", 7100 + id) }).collect()
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ordo-etcd-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_changes_only_by_compare_and_swap_on_its_sequence_number() {
    let dir = temp_dir("cas");
    let etcd = EtcdServer::start(&dir).unwrap();
    let endpoints = vec![etcd.endpoint().to_string()];
    let store =
        ConfigStore::connect(&endpoints, "t1", Duration::from_secs(2), Duration::from_secs(5))
            .await
            .unwrap();
    assert_eq!(store.get().await.unwrap(), None);

    let first = ClusterConfig::initial(members(3), 1);
    store.create(&first).await.unwrap();
    assert_eq!(store.get().await.unwrap(), Some(first.clone()));
    // A second create loses.
    assert!(matches!(
        store.create(&first).await,
        Err(EtcdError::Conflict { expected: 0, found: Some(1) })
    ));

    let mut watch = store.watch().await.unwrap();

    // The next configuration must carry seq + 1, and swaps based on a stale seq lose.
    let mut second = first.clone();
    second.seq = 2;
    second.members.pop();
    second.regions.retain(|r| r.primary != 3 && !r.backups.contains(&3));
    let mut skipping = second.clone();
    skipping.seq = 3;
    assert!(matches!(store.swap(1, &skipping).await, Err(EtcdError::BadSeq { want: 2, got: 3 })));
    store.swap(1, &second).await.unwrap();
    assert!(matches!(
        store.swap(1, &second).await,
        Err(EtcdError::Conflict { expected: 1, found: Some(2) })
    ));
    assert_eq!(store.get().await.unwrap(), Some(second.clone()));

    // An invalid configuration (a region on an unknown node) is never written.
    let mut bad = second.clone();
    bad.seq = 3;
    bad.regions[0].backups = vec![42];
    assert!(matches!(store.swap(2, &bad).await, Err(EtcdError::Config(_))));
    assert_eq!(store.get().await.unwrap().map(|c| c.seq), Some(2));

    // The watcher saw the swap.
    let seen = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let resp = watch.message().await.unwrap().unwrap();
            for event in resp.events() {
                if let Some(kv) = event.kv() {
                    return ClusterConfig::from_json(kv.value()).unwrap();
                }
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(seen, second);
    store.delete_all().await.unwrap();
    drop(etcd);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_down_at_start_is_a_clear_error_after_retrying() {
    let port = free_port().unwrap();
    let started = std::time::Instant::now();
    let result = ConfigStore::connect(
        &[format!("127.0.0.1:{port}")],
        "t2",
        Duration::from_millis(200),
        Duration::from_millis(800),
    )
    .await;
    let Err(EtcdError::Unreachable { attempts, .. }) = result else {
        panic!("expected Unreachable, got {:?}", result.map(|_| ()));
    };
    assert!(attempts >= 2, "it retried ({attempts} attempts)");
    assert!(started.elapsed() < Duration::from_secs(5));
    let message = EtcdError::Unreachable {
        endpoints: vec!["http://x".into()],
        attempts,
        waited_ms: 800,
        last: "refused".into(),
    }
    .to_string();
    assert!(message.contains("unreachable") && message.contains("http://x"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_document_in_etcd_is_refused_with_its_reason() {
    let dir = temp_dir("garbage");
    let etcd = EtcdServer::start(&dir).unwrap();
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await.unwrap();
    client.put("/ordo/t3/config", "{\"seq\": 9, \"members\": []}", None).await.unwrap();
    let store = ConfigStore::connect(
        &[etcd.endpoint().to_string()],
        "t3",
        Duration::from_secs(2),
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    let err = store.get().await.unwrap_err();
    assert!(matches!(err, EtcdError::Config(_)), "{err}");
    assert!(
        err.to_string().contains("seq Some(9)") || err.to_string().contains("no members"),
        "{err}"
    );
    drop(etcd);
    std::fs::remove_dir_all(&dir).unwrap();
}
