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
    // The node's metrics (status and Prometheus) count its transactions and calls.
    let get = |name: &str| {
        n2.metrics().snapshot().into_iter().find(|(n, _)| n == name).map_or(-1.0, |(_, v)| v)
    };
    let started = std::time::Instant::now();
    while get("txn_commits_count") < 2.0 && started.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(get("txn_commits_count") >= 2.0);
    assert!(get("txn_round_trips_count") >= 3.0);
    assert_eq!(get("txn_backed_parts"), 0.0);
}

/// Bank transfers over 3 nodes with a fixed total, checked by concurrent read-only
/// transactions on other nodes while transfers run (strict serializable and snapshot audits).
#[test]
fn bank_total_holds_under_concurrent_audits() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    const PER_NODE: usize = 8;
    const START: u64 = 1_000;
    // Old versions let the long audits commit while transfers run.
    let mut opts = LoopbackOptions::new(3);
    opts.engine.versions = ordo::Versions::Multi;
    let cluster = Loopback::start(opts).unwrap();
    let mut accounts = Vec::new();
    for n in cluster.nodes() {
        accounts.extend(
            n.db()
                .run(|tx| (0..PER_NODE).map(|_| tx.alloc(&START)).collect::<Result<Vec<_>, _>>())
                .unwrap(),
        );
    }
    let total = START * accounts.len() as u64;
    let client = cluster.client(ordo::Config::default()).unwrap();
    let stop = AtomicBool::new(false);
    let (transfers, audits) = (AtomicU64::new(0), AtomicU64::new(0));
    // The transfer streams (xorshift, so never zero) come from one replayable seed.
    let seed = ordo_seed::Seed::new("bank_total_holds_under_concurrent_audits");
    let (seed_client, seed_node) = (seed.derive(0) | 1, seed.derive(1) | 1);
    let transfer = |db: &ordo::Ordo<std::sync::Arc<ordo_cluster::node::NodeClock>>, seed: u64| {
        let mut x = seed;
        while !stop.load(Ordering::Relaxed) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (from, to) = ((x % 24) as usize, ((x >> 20) % 24) as usize);
            if from == to {
                continue;
            }
            let amount = (x >> 40) % 50;
            db.run(|tx| {
                let a: u64 = tx.read(accounts[from])?;
                let b: u64 = tx.read(accounts[to])?;
                if a >= amount {
                    tx.write(accounts[from], &(a - amount))?;
                    tx.write(accounts[to], &(b + amount))?;
                }
                Ok::<_, ordo::Error>(())
            })
            .unwrap();
            transfers.fetch_add(1, Ordering::Relaxed);
        }
    };
    std::thread::scope(|s| {
        let accounts = &accounts;
        let (transfer, client, cluster) = (&transfer, &client, &cluster);
        s.spawn(move || transfer(client, seed_client));
        s.spawn(move || transfer(cluster.nodes()[0].db(), seed_node));
        for (i, n) in cluster.nodes()[1..].iter().enumerate() {
            let (audits, stop) = (&audits, &stop);
            s.spawn(move || {
                let isolation = if i == 0 {
                    ordo::Isolation::StrictSerializable
                } else {
                    ordo::Isolation::Snapshot
                };
                while !stop.load(Ordering::Relaxed) {
                    let sum: u64 = n
                        .db()
                        .run_with(ordo::Options::isolation(isolation), |tx| {
                            accounts.iter().map(|&a| tx.read::<u64>(a)).sum::<Result<u64, _>>()
                        })
                        .unwrap();
                    assert_eq!(sum, total, "audit on node {} saw a torn total", n.id());
                    audits.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(Duration::from_millis(1_500));
        stop.store(true, Ordering::Relaxed);
    });
    let (t, a) = (transfers.load(Ordering::Relaxed), audits.load(Ordering::Relaxed));
    eprintln!("bank: {t} transfers, {a} audits");
    assert!(t > 50 && a >= 5, "too little happened: {t} transfers, {a} audits");
    let sum: u64 = client
        .run(|tx| accounts.iter().map(|&x| tx.read::<u64>(x)).sum::<Result<u64, _>>())
        .unwrap();
    assert_eq!(sum, total);
    client.owners().flush();
    assert!(cluster.quiesce(Duration::from_secs(5)));
    assert_eq!(cluster.check_replication().unwrap(), 3);
}

/// A backup dies while transactions run: commits writing its regions fail at COMMIT-BACKUP with
/// a typed error before the commit point (nothing installed, no lock left), the rest go on, and
/// every value read afterwards is one a committed transaction wrote.
#[test]
fn a_backup_dying_mid_run_gives_typed_errors_and_loses_nothing() {
    let mut cluster = Loopback::start(LoopbackOptions::new(3)).unwrap();
    // Region 1 (node 1) is backed up by node 2; region 2 (node 2) by node 3.
    let n1 = cluster.node(1).unwrap().db().clone();
    let a = n1.run(|tx| tx.alloc(&0u64)).unwrap();
    let b = cluster.node(2).unwrap().db().run(|tx| tx.alloc(&0u64)).unwrap();
    let committed = std::sync::Mutex::new(std::collections::BTreeSet::from([(a, 0u64), (b, 0u64)]));
    let errors = std::sync::atomic::AtomicU64::new(0);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let (committed, errors, stop, n1) = (&committed, &errors, &stop, &n1);
        s.spawn(move || {
            let mut v = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                v += 1;
                // Writes region 1 (backup node 2) and reads region 2.
                match n1.run(|tx| {
                    let _: u64 = tx.read(b)?;
                    tx.write(a, &v)
                }) {
                    Ok(()) => {
                        committed.lock().unwrap().insert((a, v));
                    }
                    Err(ordo::Error::Participant { step, .. }) => {
                        assert!(!step.is_after_commit_point(), "{step:?}");
                        errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    Err(e) => panic!("untyped failure: {e}"),
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(cluster.stop(2));
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    assert!(
        errors.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "the dead backup was never needed"
    );
    // Node 1's object holds a committed value and is not locked.
    let now: u64 = n1.run(|tx| tx.read(a)).unwrap();
    assert!(committed.lock().unwrap().contains(&(a, now)), "value {now} was never committed");
    // Region 1 cannot commit without its backup: a typed error, nothing installed.
    let r = n1.run(|tx| tx.write(a, &u64::MAX));
    assert!(
        matches!(
            r,
            Err(ordo::Error::Participant { step: ordo::ParticipantStep::CommitBackup, .. })
        ),
        "{r:?}"
    );
    assert_eq!(n1.run(|tx| tx.read::<u64>(a)).unwrap(), now);
    // Region 3 (node 3, backed up by node 1) still commits.
    let c = cluster.node(3).unwrap().db().run(|tx| tx.alloc(&5u64)).unwrap();
    assert_eq!(n1.run(|tx| tx.read::<u64>(c)).unwrap(), 5);
}

/// A transaction body over the cluster's engines.
type Body<'a> = dyn FnMut(
        &mut ordo::Tx<'_, std::sync::Arc<ordo_cluster::node::NodeClock>>,
    ) -> Result<(), ordo::Error>
    + 'a;

/// The engine's `HashMap` and `BTree` over the cluster: built by a client (their nodes spread
/// over every primary), read and changed from inside nodes, checked against a `BTreeMap`.
#[test]
fn hash_map_and_btree_work_over_the_cluster() {
    use ordo::map::HashMap;
    use ordo::tree::BTree;
    use std::collections::BTreeMap;
    let cluster = Loopback::start(LoopbackOptions::new(3)).unwrap();
    let client = cluster.client(ordo::Config::default()).unwrap();
    let (map, tree) = client
        .run(|tx| Ok::<_, ordo::Error>((HashMap::create(tx, 64)?, BTree::create(tx)?)))
        .unwrap();
    let mut model = BTreeMap::new();
    for i in 0..300u32 {
        let (k, v) = (format!("key-{:05}", i * 7 % 1000).into_bytes(), i.to_le_bytes().to_vec());
        // Alternate coordinators: the client and each node's engine.
        let run = |f: &mut Body<'_>| match i % 4 {
            0 => client.run(|tx| f(tx)),
            n => cluster.nodes()[n as usize - 1].db().run(|tx| f(tx)),
        };
        run(&mut |tx| {
            map.insert(tx, &k, &v)?;
            tree.insert(tx, &k, &v)?;
            Ok(())
        })
        .unwrap();
        model.insert(k, v);
    }
    let all = |tx: &mut ordo::Tx<'_, std::sync::Arc<ordo_cluster::node::NodeClock>>| {
        use std::ops::Bound::Unbounded;
        tree.range_entries(tx, Unbounded, Unbounded, ordo::tree::Direction::Forward, None)
    };
    let n2 = cluster.nodes()[1].db();
    let from_map: BTreeMap<Vec<u8>, Vec<u8>> =
        n2.run(|tx| map.entries(tx)).unwrap().into_iter().collect();
    assert_eq!(from_map, model);
    let from_tree: BTreeMap<Vec<u8>, Vec<u8>> =
        cluster.nodes()[2].db().run(all).unwrap().into_iter().collect();
    assert_eq!(from_tree, model);
    n2.run(|tx| map.verify(tx)).unwrap();
    client.owners().flush();
    assert!(cluster.quiesce(Duration::from_secs(5)));
    assert_eq!(cluster.check_replication().unwrap(), 3);
}

/// A transaction writing two regions whose second backup is dead: the first region's backup
/// acknowledged COMMIT-BACKUP, then the second failed. The transaction aborts (typed error,
/// nothing installed) and the first backup drops the part it holds, so no backup keeps the
/// record of an aborted transaction.
#[test]
fn backups_drop_the_part_of_a_transaction_that_aborted_after_commit_backup() {
    let mut cluster = Loopback::start(LoopbackOptions::new(3)).unwrap();
    let n1 = cluster.node(1).unwrap().db().clone();
    let a = n1.run(|tx| tx.alloc(&1u64)).unwrap(); // region 1: backup node 2
    let b = cluster.node(2).unwrap().db().run(|tx| tx.alloc(&2u64)).unwrap(); // backup node 3
    assert!(cluster.node(1).unwrap().placement().is_backup(b.region(), 3));
    assert!(cluster.stop(3));
    let r = n1.run(|tx| {
        tx.write(a, &10u64)?;
        tx.write(b, &20u64)
    });
    match r {
        Err(ordo::Error::Participant { step, region, .. }) => {
            assert_eq!((step, region), (ordo::ParticipantStep::CommitBackup, b.region()));
        }
        other => panic!("expected a COMMIT-BACKUP failure, got {other:?}"),
    }
    let n2 = cluster.node(2).unwrap();
    let started = std::time::Instant::now();
    while n2.db().serve_stats().backed > 0 && started.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(n2.db().serve_stats().backed, 0, "node 2 kept the aborted transaction's part");
    assert_eq!(
        n1.run(|tx| Ok::<_, ordo::Error>((tx.read::<u64>(a)?, tx.read::<u64>(b)?))).unwrap(),
        (1, 2)
    );
    assert!(cluster.quiesce(Duration::from_secs(2)));
    cluster.check_replication().unwrap();
}

/// A co-located coordinator whose transaction touches only its own primaries sends one message
/// per commit over the network — COMMIT-BACKUP (TRUNCATE rides on a later one); a transaction
/// reading and writing a remote primary adds READ and LOCK round trips (COMMIT-PRIMARY is sent
/// one-way).
#[test]
fn local_primaries_cost_one_round_trip_per_commit() {
    use std::sync::atomic::Ordering::Relaxed;
    let cluster = Loopback::start(LoopbackOptions::new(3)).unwrap();
    let n1 = cluster.node(1).unwrap();
    let a = n1.db().run(|tx| tx.alloc(&0u64)).unwrap();
    let remote = cluster.node(2).unwrap().db().run(|tx| tx.alloc(&0u64)).unwrap();
    let trips = || n1.owners().round_trips.load(Relaxed);
    let before = trips();
    for i in 1..=20u64 {
        n1.db()
            .run(|tx| {
                let v: u64 = tx.read(a)?;
                tx.write(a, &(v + i))
            })
            .unwrap();
    }
    assert_eq!(trips() - before, 20, "one COMMIT-BACKUP per local commit");
    let before = trips();
    n1.db()
        .run(|tx| {
            let v: u64 = tx.read(remote)?;
            tx.write(remote, &(v + 1))
        })
        .unwrap();
    // READ, LOCK, COMMIT-BACKUP (to the region's backup); COMMIT-PRIMARY is one-way.
    assert_eq!(trips() - before, 3);
}

/// Malformed and misdirected participant messages from an authenticated peer get typed refusals
/// (never a panic, never a change), and the node keeps serving.
#[test]
fn malformed_and_misdirected_messages_are_refused() {
    use ordo_cluster::auth::Secret;
    use ordo_cluster::node::codes;
    use ordo_cluster::transport::{Limits, Peer};
    use ordo_cluster::wire::Body;
    let cluster = Loopback::start(LoopbackOptions::new(3)).unwrap();
    let n1 = cluster.node(1).unwrap();
    let a = n1.db().run(|tx| tx.alloc(&5u64)).unwrap();
    let secret = Secret::from_file(&cluster.secret_file()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let peer = rt
        .block_on(Peer::connect(n1.local_addr(), 99, "loopback", secret, Limits::default()))
        .unwrap();
    let call = |body: Body| rt.block_on(peer.call(body)).unwrap();
    let region = a.region();
    let other = cluster.node(2).unwrap().placement().primaries_of(2)[0];
    let error_code = |b: &Body| match b {
        Body::Error { code, .. } => Some(*code),
        _ => None,
    };
    let declined = |b: &Body| matches!(b, Body::Declined { .. });
    // Entries that are not whole, an unknown kind, a payload that is missing.
    for entries in
        [vec![a.to_raw(), 8 << 8], vec![a.to_raw(), 7 | (8 << 8), 0], vec![a.to_raw(), 8 << 8, 0]]
    {
        let r = call(Body::Lock { tx: 1, region, seq: 0, entries, words: vec![] });
        assert!(declined(&r), "{r:?}");
    }
    // A part naming another region than the message.
    let r = call(Body::Lock {
        tx: 2,
        region,
        seq: 0,
        entries: vec![ordo::Addr::new(other, 64).to_raw(), 8 << 8, 0],
        words: vec![1],
    });
    assert!(declined(&r), "{r:?}");
    // Requests for a region this node is not the primary (or backup) of.
    let r = call(Body::Lock { tx: 3, region: other, seq: 0, entries: vec![], words: vec![] });
    assert_eq!(error_code(&r), Some(codes::NOT_OWNER));
    let r = call(Body::Read {
        addr: ordo::Addr::new(other, 64).to_raw(),
        rts: u64::MAX >> 2,
        flags: 1,
    });
    assert_eq!(error_code(&r), Some(codes::NOT_OWNER));
    let r = call(Body::CommitBackup {
        tx: 4,
        region,
        wts: 1,
        entries: vec![],
        words: vec![],
        truncate: vec![],
        regions: vec![region],
    });
    assert_eq!(error_code(&r), Some(codes::NOT_OWNER), "node 1 is not region {region}'s backup");
    let r = call(Body::Validate { reads: vec![a.to_raw(), 0] });
    assert_eq!(error_code(&r), Some(codes::BAD_REQUEST));
    // An address that is not an object, a read of it, a release of an allocated object.
    let r = call(Body::Read { addr: a.to_raw() + 8, rts: u64::MAX >> 2, flags: 1 });
    assert!(declined(&r), "{r:?}");
    let r = call(Body::Release { addr: a.to_raw() });
    assert!(declined(&r), "{r:?}");
    // COMMIT-PRIMARY and ABORT of nothing locked; truncations of nothing backed up.
    rt.block_on(peer.send(Body::CommitPrimary { tx: 77, region, wts: 9 })).unwrap();
    let r = call(Body::Abort { tx: 78, region, allocs: vec![a.to_raw()] });
    assert_eq!(r, Body::Done { flag: true });
    let r = call(Body::Truncate {
        truncate: vec![(1, region), (2, other)],
        discard: vec![(3, region)],
    });
    assert_eq!(r, Body::Done { flag: true });
    // Nothing changed, nothing is held, and the node still serves transactions.
    assert_eq!(n1.db().serve_stats(), ordo::remote::ServeStats::default());
    assert_eq!(n1.db().run(|tx| tx.read::<u64>(a)).unwrap(), 5);
    let client = cluster.client(ordo::Config::default()).unwrap();
    client.run(|tx| tx.write(a, &6u64)).unwrap();
    assert_eq!(client.run(|tx| tx.read::<u64>(a)).unwrap(), 6);
}

/// A client with the wrong secret, or only unreachable or malformed member addresses, gets a
/// typed error naming what it tried; the cluster is unaffected.
#[test]
fn a_client_that_cannot_connect_gets_a_typed_error() {
    use ordo_cluster::client::{Client, ClientError};
    let cluster = Loopback::start(LoopbackOptions::new(3)).unwrap();
    let dir = std::env::temp_dir().join(format!("ordo-client-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wrong = dir.join("wrong-secret");
    std::fs::write(&wrong, "not-the-cluster-secret-0123456789").unwrap();
    let mut cfg = cluster.client_config(ordo::Config::default());
    cfg.secret_file = wrong;
    cfg.connect_timeout = Duration::from_secs(2);
    match Client::connect(cfg) {
        Err(ClientError::NoMember { tried, .. }) => assert_eq!(tried, cluster.addrs()),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a client with the wrong secret connected"),
    }
    let mut cfg = cluster.client_config(ordo::Config::default());
    cfg.nodes = vec![
        "not-an-address".into(),
        format!("127.0.0.1:{}", ordo_cluster::etcd_server::free_port().unwrap()),
    ];
    let e = Client::connect(cfg).err().expect("no member is reachable");
    assert!(matches!(e, ClientError::NoMember { .. }), "{e}");
    assert!(e.to_string().contains("127.0.0.1"), "{e}");
    let mut cfg = cluster.client_config(ordo::Config::default());
    cfg.secret_file = dir.join("missing");
    assert!(matches!(Client::connect(cfg), Err(ClientError::Config(_))));
    // The cluster still serves a good client.
    let client = cluster.client(ordo::Config::default()).unwrap();
    let a = client.run(|tx| tx.alloc(&1u64)).unwrap();
    assert_eq!(client.run(|tx| tx.read::<u64>(a)).unwrap(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}
