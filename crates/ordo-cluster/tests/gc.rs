//! GC across nodes (FaRMv2 §4.5–4.6, Fig. 9) and distributed read-only transactions: the
//! cluster's oldest active timestamp bounds every member's GC safe point, a snapshot time taken
//! on one node is served by the others, and a read below a node's safe point is refused with a
//! typed error (the GC_local guard).
#![allow(clippy::unwrap_used)] // test code: panics are the failure reports

use std::time::{Duration, Instant};

use ordo::{Addr, Error, Options, Versions};
use ordo_clock::{Clock, Timestamp};
use ordo_cluster::loopback::{Loopback, LoopbackOptions};

/// A multi-version cluster with `n` u64 objects on each primary.
fn cluster(n: usize) -> (Loopback, Vec<Addr>) {
    let mut opts = LoopbackOptions::new(3);
    opts.engine.versions = Versions::Multi;
    let c = Loopback::start(opts).unwrap();
    let mut objects = Vec::new();
    for node in c.nodes() {
        objects.extend(
            node.db()
                .run(|tx| (0..n).map(|i| tx.alloc(&(i as u64))).collect::<Result<Vec<_>, _>>())
                .unwrap(),
        );
    }
    (c, objects)
}

/// Waits until every member's GC safe point passes `ts` (at most 5 s); returns whether it did.
fn wait_gc_past(c: &Loopback, ts: Timestamp) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        if c.nodes().iter().all(|n| n.db().gc_point() > ts) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

#[test]
fn a_snapshot_time_taken_on_one_node_is_served_by_the_others() {
    let (c, objects) = cluster(4);
    // Node 1 takes the snapshot time, holds it, and "ships" it; updates continue after it.
    let pin = c.nodes()[0].db().pin_snapshot().unwrap();
    let rts = pin.ts();
    std::thread::sleep(Duration::from_millis(1));
    for round in 1..=5u64 {
        c.nodes()[0]
            .db()
            .run(|tx| objects.iter().try_for_each(|&a| tx.write(a, &(1000 * round))))
            .unwrap();
    }
    let read = |i: usize| -> Vec<u64> {
        c.nodes()[i]
            .db()
            .read_only_at(rts, |tx| objects.iter().map(|&a| tx.read::<u64>(a)).collect())
            .unwrap()
    };
    let (on2, on3) = (read(1), read(2));
    assert_eq!(on2, on3, "one snapshot, two nodes");
    assert_eq!(
        on2,
        (0..3).flat_map(|_| 0..4u64).collect::<Vec<_>>(),
        "the values at the snapshot time"
    );
    // Held past several OAT rounds, the snapshot is still served.
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(read(2), on2);
    drop(pin);
    assert!(wait_gc_past(&c, rts), "released, the snapshot time is passed by the GC");
    // And now: the newest values everywhere.
    let now: Vec<u64> =
        c.nodes()[2].db().run(|tx| objects.iter().map(|&a| tx.read::<u64>(a)).collect()).unwrap();
    assert!(now.iter().all(|&v| v == 5000));
}

#[test]
fn the_cluster_gc_passes_old_snapshots_and_remote_reads_below_it_are_refused() {
    let (c, objects) = cluster(2);
    let old = c.nodes()[0].db().clock().now().lo();
    c.nodes()[0].db().run(|tx| objects.iter().try_for_each(|&a| tx.write(a, &7u64))).unwrap();
    assert!(wait_gc_past(&c, old), "the members' GC points never passed an unused snapshot time");
    // A client (whose own engine holds no versions) reads remote primaries below their safe
    // point: each refuses with the typed error, which the client reports.
    let client =
        c.client(ordo::Config { versions: Versions::Multi, ..ordo::Config::default() }).unwrap();
    let remote = objects[objects.len() - 1];
    let r = client.read_only_at(old, |tx| tx.read::<u64>(remote));
    assert!(matches!(r, Err(Error::SnapshotTooOld { ts, .. }) if ts == old), "{r:?}");
    // Locally on a member the same snapshot is refused too.
    let r = c.nodes()[1].db().read_only_at(old, |tx| tx.read::<u64>(objects[0]));
    assert!(matches!(r, Err(Error::SnapshotTooOld { .. })), "{r:?}");
}

/// A client's long read-only transaction holds an old snapshot while the objects it has yet to
/// read are overwritten on other nodes. `register` off (the `skip_registration` switch) leaves
/// its read timestamp out of the client's OAT report, so the members' GC passes it.
fn long_reader(register: bool) -> Result<(u64, u64), Error> {
    let (c, objects) = cluster(1);
    let client =
        c.client(ordo::Config { versions: Versions::Multi, ..ordo::Config::default() }).unwrap();
    #[cfg(feature = "shortcuts")]
    let options = Options {
        shortcuts: ordo::txn::Shortcuts { skip_registration: !register, ..Default::default() },
        ..Options::default()
    };
    #[cfg(not(feature = "shortcuts"))]
    let options = {
        assert!(register, "the negative twin needs the shortcuts feature");
        Options::default()
    };
    let (a, b) = (objects[0], objects[2]);
    let mut tx = client.begin_with(options).unwrap();
    let first: u64 = tx.read(a)?;
    let rts = tx.rts();
    for v in 10..20u64 {
        c.nodes()[1].db().run(|t| {
            t.write(a, &v)?;
            t.write(b, &v)
        })?;
    }
    // Long enough for several OAT rounds (the lease period is 200 ms, the bound lags 100 ms)
    // and GC rounds.
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(2_000) {
        if !register && c.nodes().iter().all(|n| n.db().gc_point() > rts) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let second: u64 = tx.read(b)?;
    Ok((first, second))
}

#[test]
fn a_registered_remote_reader_keeps_its_snapshot_across_the_cluster() {
    assert_eq!(long_reader(true).unwrap(), (0, 0));
}

#[cfg(feature = "shortcuts")]
#[test]
fn an_unregistered_reader_is_refused_by_the_gc_local_guard() {
    let r = long_reader(false);
    assert!(matches!(r, Err(Error::SnapshotTooOld { .. })), "{r:?}");
}

/// Fresh transactions never meet the GC_local guard, even on a node whose clock is 20 ms
/// uncertain: they read at `now().lo` of that clock, well behind the CM's time, and the
/// cluster's GC bound is held below what that node reported on its lease requests (a bound from
/// the CM's clock alone refuses these reads at once). The bound's extra lag behind the CM
/// (`GC_BOUND_LAG`) covers coordinators between reports (a client before its first), which this
/// test does not reach.
#[test]
fn fresh_transactions_on_an_uncertain_node_are_not_refused() {
    use std::sync::Arc;
    let truth = ordo_clock::TimeSource::real(1_000_000_000);
    let mut opts = LoopbackOptions::new(3);
    opts.engine.versions = Versions::Multi;
    opts.clocks = vec![
        Arc::new(ordo_clock::SkewedClock::new(truth.clone(), 0, 0, 1_000)),
        Arc::new(ordo_clock::SkewedClock::new(truth.clone(), 0, 0, 20_000_000)),
        Arc::new(ordo_clock::SkewedClock::new(truth, 0, 0, 1_000)),
    ];
    let c = Loopback::start(opts).unwrap();
    let remote = c.node(3).unwrap().db().run(|tx| tx.alloc(&0u64)).unwrap();
    let n1 = c.node(1).unwrap().db();
    let n2 = c.node(2).unwrap().db();
    let started = Instant::now();
    let mut reads = 0;
    while started.elapsed() < Duration::from_millis(1_500) {
        n1.run(|tx| {
            let v: u64 = tx.read(remote)?;
            tx.write(remote, &(v + 1))
        })
        .unwrap();
        let r =
            n2.run_with(Options::isolation(ordo::Isolation::Snapshot), |tx| tx.read::<u64>(remote));
        assert!(r.is_ok(), "a fresh snapshot read on the uncertain node failed: {r:?}");
        reads += 1;
    }
    assert!(reads > 20, "{reads} reads");
    assert!(c.nodes().iter().all(|n| n.db().gc_point() > Timestamp::ZERO), "the GC ran");
}
