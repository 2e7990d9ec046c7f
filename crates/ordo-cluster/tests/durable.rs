//! Durable members: every backup logs COMMIT-BACKUP to its durable log (sync mode) before
//! acknowledging it, so a member's files hold the regions it backs up. After a run the nodes
//! stop and each node's directory is reopened on its own: every region it backed up comes back
//! equal to the primary's committed objects at the end of the run. The same run on the
//! members' files in memory ([`MemStorage`], the logic) and on real files.
#![allow(clippy::unwrap_used)] // test code: panics are the failure reports

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ordo::durable::io::{MemStorage, Storage};
use ordo::durable::{DurableConfig, Mode};
use ordo::{Config, Ordo, Versions};
use ordo_clock::SystemClock;
use ordo_cluster::loopback::{Loopback, LoopbackOptions};

#[test]
fn each_backup_recovers_the_regions_it_backs_up_from_its_own_log() {
    let root = std::env::temp_dir().join(format!("ordo-durable-members-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    backups_recover(root.clone(), None);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn each_backup_recovers_the_regions_it_backs_up_from_its_own_log_in_memory() {
    let mem = MemStorage::new();
    backups_recover(PathBuf::from("/members"), Some(Arc::new(mem.clone())));
    assert!(!mem.list(std::path::Path::new("/members/node-1")).unwrap().is_empty());
}

/// The run: members' directories under `root`, on `storage` (`None`: real files).
fn backups_recover(root: PathBuf, storage: Option<Arc<dyn Storage>>) {
    let mut opts = LoopbackOptions::new(3);
    opts.durability = Some((root.clone(), Mode::Sync));
    opts.durable_storage = storage.clone();
    let region_bytes = opts.engine.heap.region_bytes;
    let cluster = Loopback::start(opts).unwrap();
    let client = cluster.client(Config::default()).unwrap();
    let accounts: Vec<ordo::Addr> =
        (0..12u64).map(|i| client.run(|tx| tx.alloc(&(100 + i))).unwrap()).collect();
    for i in 0..200u64 {
        let (a, b) = (accounts[(i % 12) as usize], accounts[((i * 7 + 3) % 12) as usize]);
        let db = if i % 2 == 0 { client.db() } else { cluster.nodes()[(i % 3) as usize].db() };
        db.run(|tx| {
            let x: u64 = tx.read(a)?;
            let y: u64 = tx.read(b)?;
            tx.write(a, &(x + y % 7))?;
            if a != b {
                tx.write(b, &(y + 1))?;
            }
            Ok::<_, ordo::Error>(())
        })
        .unwrap();
    }
    // One object freed, one allocated in its place.
    client.run(|tx| tx.free(accounts[0])).unwrap();
    client.run(|tx| tx.alloc(&7u64)).unwrap();
    client.owners().flush();
    drop(client);
    assert!(cluster.quiesce(Duration::from_secs(5)));
    cluster.check_replication().unwrap();
    // What each node must recover: the primaries' digests of the regions it backs up.
    let mut expected: BTreeMap<u64, Vec<(u16, Option<u64>)>> = BTreeMap::new();
    for r in &cluster.config().regions {
        let region = u16::try_from(r.region).unwrap();
        let primary = cluster.node(r.primary).unwrap().db().region_digest(region);
        assert!(primary.is_some_and(|d| d != 0), "region {region} holds objects");
        for &b in &r.backups {
            expected.entry(b).or_default().push((region, primary));
        }
    }
    drop(cluster);
    for (node, regions) in expected {
        let mut config = Config { versions: Versions::Single, ..Config::default() };
        config.heap.region_bytes = region_bytes;
        config.gc_interval_us = 0;
        let mut d = DurableConfig::new(root.join(format!("node-{node}")), Mode::Sync);
        if let Some(s) = &storage {
            d = d.with_storage(s.clone());
        }
        config.durability = Some(d);
        let db = Ordo::open_durable(config, |_| SystemClock::new()).unwrap();
        let report = db.recovery_report().unwrap();
        eprintln!("node {node}: {report:?}");
        for (region, digest) in regions {
            assert_eq!(db.region_digest(region), digest, "node {node}, region {region}");
        }
    }
}
