//! Randomised concurrent histories on a 3-node loopback cluster, checked by `ordo-check`: every
//! isolation mode × single and multi-version, node clocks given injected offset and drift.
//! Coordinators are a client and every node's co-located engine; the lists live on all three
//! primaries, so most transactions are distributed. Aborted attempts are recorded and checked
//! too (opacity). After each run the replication invariant is checked. Each test takes its seed
//! from `ordo_seed` (printed as `ORDO_SEED=<n>`; set it to replay the same random choices).
#![allow(clippy::unwrap_used, dead_code)] // test code: panics are the failure reports

#[path = "../../ordo/tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

use ordo::{Addr, Config, Isolation, Options, Versions};
use ordo_check::Recorder;
use ordo_clock::{SkewedClock, TimeSource};
use ordo_cluster::loopback::{Loopback, LoopbackOptions};
use ordo_cluster::node::LocalClock;

/// Transactions each coordinator runs to commit.
const TXNS: usize = 100;
/// Lists per primary.
const LISTS_PER_NODE: usize = 2;

/// Node clocks over one true time: the CM exact, the others off by milliseconds and drifting by
/// hundreds of ppm (inside the 1000 ppm bound), each reading claiming a few µs of uncertainty.
pub fn skewed_clocks() -> Vec<LocalClock> {
    let truth = TimeSource::real(1_000_000_000);
    vec![
        Arc::new(SkewedClock::new(truth.clone(), 0, 0, 1_000)),
        Arc::new(SkewedClock::new(truth.clone(), 3_000_000, 300, 2_000)),
        Arc::new(SkewedClock::new(truth, -5_000_000, -250, 4_000)),
    ]
}

/// Starts the cluster and makes the lists: `LISTS_PER_NODE` on each primary.
pub fn cluster(versions: Versions) -> (Loopback, Vec<Addr>) {
    let mut opts = LoopbackOptions::new(3);
    opts.engine.versions = versions;
    opts.clocks = skewed_clocks();
    let cluster = Loopback::start(opts).unwrap();
    let mut lists = Vec::new();
    for n in cluster.nodes() {
        lists.extend(common::make_lists(n.db(), LISTS_PER_NODE));
    }
    (cluster, lists)
}

fn check_mode(versions: Versions, isolation: Isolation, seed: u64) {
    eprintln!("history: {isolation:?} {versions:?} stream seed {seed}");
    let (cluster, lists) = cluster(versions);
    let regions: std::collections::BTreeSet<u16> = lists.iter().map(|a| a.region()).collect();
    assert_eq!(regions.len(), 3, "lists on every primary");
    let client = cluster.client(Config { versions, ..Config::default() }).unwrap();
    let rec = Recorder::new();
    let options = Options::isolation(isolation);
    std::thread::scope(|s| {
        let (rec, lists) = (&rec, &lists);
        s.spawn(move || common::run_random_as(&client, lists, rec, 0..2, TXNS, options, seed));
        for (i, n) in cluster.nodes().iter().enumerate() {
            let p = 10 + i as u32;
            let seed = seed ^ (p as u64);
            s.spawn(move || {
                common::run_random_as(n.db(), lists, rec, p..p + 1, TXNS, options, seed)
            });
        }
    });
    common::final_read(cluster.nodes()[1].db(), &lists, &rec);
    let h = rec.history();
    let verdict = common::check_isolation(isolation, &h);
    if let Err(v) = verdict {
        panic!("{isolation:?}, {versions:?}, seed {seed}: {v}");
    }
    assert_eq!(h.committed(), 5 * TXNS + 1, "every planned transaction committed");
    assert!(h.len() > h.committed(), "no attempt aborted: the run lost its power");
    if !cluster.quiesce(Duration::from_secs(3)) {
        for n in cluster.nodes() {
            eprintln!("node {}: {:?}", n.id(), n.db().serve_stats());
        }
        panic!("backups did not drain");
    }
    assert_eq!(cluster.check_replication().unwrap(), 3);
}

#[test]
fn strict_serializable_histories_are_opaque() {
    let seed = ordo_seed::Seed::new("strict_serializable_histories_are_opaque");
    for versions in [Versions::Single, Versions::Multi] {
        check_mode(versions, Isolation::StrictSerializable, seed.derive(versions as u64));
    }
}

#[test]
fn serializable_histories_are_serializable() {
    let seed = ordo_seed::Seed::new("serializable_histories_are_serializable");
    for versions in [Versions::Single, Versions::Multi] {
        check_mode(versions, Isolation::Serializable, seed.derive(versions as u64));
    }
}

#[test]
fn snapshot_histories_are_snapshot_isolated() {
    let seed = ordo_seed::Seed::new("snapshot_histories_are_snapshot_isolated");
    for versions in [Versions::Single, Versions::Multi] {
        check_mode(versions, Isolation::StrictSnapshot, seed.derive(versions as u64));
        check_mode(versions, Isolation::Snapshot, seed.derive(10 + versions as u64));
    }
}
