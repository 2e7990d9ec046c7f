//! Distributed transactions on a 3-node loopback cluster (Cluster II): commits spanning
//! regions on several primaries, from a client and from inside a node; replication to the
//! backups; typed errors when an owner is gone.
#![allow(clippy::unwrap_used)] // test set-up: a failure is the test failing

use std::time::Duration;

use ordo::Addr;
use ordo_cluster::loopback::{Loopback, LoopbackOptions};

#[test]
fn client_commits_across_primaries_and_backups_follow() {
    let cluster = Loopback::start(LoopbackOptions::new(3)).unwrap();
    let client = cluster.client(ordo::Config::default()).unwrap();
    // Three objects, one per primary (the client rotates allocation over the regions).
    let addrs: Vec<Addr> =
        (0..3).map(|i| client.run(|tx| tx.alloc(&(100u64 + i))).unwrap()).collect();
    let mut regions: Vec<u16> = addrs.iter().map(|a| a.region()).collect();
    regions.sort_unstable();
    regions.dedup();
    assert_eq!(regions.len(), 3, "allocations spread over the primaries: {addrs:?}");
    // Move 10 from each to the next, in one transaction touching all three primaries.
    client
        .run(|tx| {
            let v: Vec<u64> = addrs.iter().map(|&a| tx.read::<u64>(a)).collect::<Result<_, _>>()?;
            for i in 0..3 {
                tx.write(addrs[i], &(v[i] - 10 + 10))?;
            }
            tx.write(addrs[0], &(v[0] + 5))?;
            tx.write(addrs[1], &(v[1] - 5))?;
            Ok::<_, ordo::Error>(())
        })
        .unwrap();
    let v: Vec<u64> = client
        .run(|tx| addrs.iter().map(|&a| tx.read::<u64>(a)).collect::<Result<_, _>>())
        .unwrap();
    assert_eq!(v, vec![105, 96, 102]);
    // A node's own transactions see the same values (co-located coordinator).
    let n2 = &cluster.nodes()[1];
    let seen: Vec<u64> = n2
        .db()
        .run(|tx| addrs.iter().map(|&a| tx.read::<u64>(a)).collect::<Result<_, _>>())
        .unwrap();
    assert_eq!(seen, v);
    n2.db().run(|tx| tx.write(addrs[2], &7u64)).unwrap();
    assert_eq!(client.run(|tx| tx.read::<u64>(addrs[2])).unwrap(), 7);
    client.owners().flush();
    assert!(cluster.quiesce(Duration::from_secs(5)));
    assert_eq!(cluster.check_replication().unwrap(), 3);
}
