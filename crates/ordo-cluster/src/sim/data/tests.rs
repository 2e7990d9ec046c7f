//! The data-path simulation's tests: many seeds pass every check, a seed replays exactly, and
//! each mechanism left out makes some named seed fail.

use std::time::Instant;

use super::*;
use crate::sim::tests::env_u64;

/// Seeds of the suite's run (`ORDO_SIM_SEEDS` overrides).
const SUITE_SEEDS: u64 = 1_000;

/// The options of `seed`, with the switch `ORDO_SIM_SKIP` names left out
/// (`vote`, `primary-check`, `gate`, `primary-ack`).
fn options(seed: u64, skip: &str) -> DataSimOptions {
    let mut o = DataSimOptions::from_seed(seed);
    match skip {
        "" => {}
        "vote" => o.vote_aborts_undecided = true,
        "primary-check" => o.skip_primary_check = true,
        "gate" => o.promote_before_resolved = true,
        "primary-ack" => o.commit_primary_one_way = true,
        other => {
            panic!("ORDO_SIM_SKIP={other}: expected vote, primary-check, gate or primary-ack")
        }
    }
    o
}

/// What the runs of a batch did, for the summary line.
#[derive(Default)]
struct Totals {
    runs: u64,
    crashes: u64,
    failovers: u64,
    restarts: u64,
    committed: u64,
    decided_commit: u64,
    decided_abort: u64,
    extensions: u64,
}

/// Runs `count` seeds derived from the test's `ORDO_SEED`, on two threads; panics naming every
/// failing seed with the command that replays it.
fn run_seeds(test: &str, count: u64) {
    let base = ordo_seed::Seed::new(test);
    let started = Instant::now();
    let results: Vec<(Vec<String>, Totals)> = crate::sim::on_two_threads(count, |share| {
        let mut failures = Vec::new();
        let mut t = Totals::default();
        for i in share {
            let seed = base.derive(i);
            let replay = format!(
                "  replay: ORDO_SIM_SEED={seed} cargo test -p ordo-cluster --lib \
                     sim::data::tests::replay_one_seed -- --nocapture"
            );
            let ran = std::panic::catch_unwind(|| run(DataSimOptions::from_seed(seed)));
            let run = match ran {
                Ok(run) => run,
                Err(p) => {
                    let what = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    failures.push(format!("seed {seed} panicked: {what}\n{replay}"));
                    continue;
                }
            };
            t.runs += 1;
            let has = |what: &str| run.events.iter().filter(|e| e.contains(what)).count();
            t.crashes += has("crashes") as u64;
            t.failovers += has("failover to") as u64;
            t.restarts += has("restarts after") as u64;
            t.committed += run.committed as u64;
            t.decided_commit += run.decided.0 as u64;
            t.decided_abort += run.decided.1 as u64;
            t.extensions += run.extensions;
            if let Err(e) = run.check() {
                failures.push(format!("{e}\n{replay}"));
            }
        }
        (failures, t)
    });
    let mut failures = Vec::new();
    let mut t = Totals::default();
    for (f, r) in results {
        failures.extend(f);
        t.runs += r.runs;
        t.crashes += r.crashes;
        t.failovers += r.failovers;
        t.restarts += r.restarts;
        t.committed += r.committed;
        t.decided_commit += r.decided_commit;
        t.decided_abort += r.decided_abort;
        t.extensions += r.extensions;
    }
    eprintln!(
        "{test}: {count} seeds in {:.2?}: {} crashes, {} failovers, {} restarts checked, {} \
         committed attempts, recovery decided {} commits and {} aborts, {} read timestamps \
         extended",
        started.elapsed(),
        t.crashes,
        t.failovers,
        t.restarts,
        t.committed,
        t.decided_commit,
        t.decided_abort,
        t.extensions
    );
    assert!(
        failures.is_empty(),
        "{} of {count} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The runs exercise what they are for.
    assert!(t.failovers * 10 >= t.runs * 7, "only {} failovers in {} runs", t.failovers, t.runs);
    assert_eq!(t.failovers, t.crashes, "every crash is failed over");
    assert_eq!(t.restarts, t.crashes, "every crashed member restarts");
    if count >= 200 {
        assert!(t.decided_commit > 0 && t.decided_abort > 0, "recovery decided both ways");
        assert!(t.extensions > 0, "no transaction extended its read timestamp");
    }
}

#[test]
fn a_thousand_data_seeds_pass_every_check() {
    let count = env_u64("ORDO_SIM_SEEDS").unwrap_or(SUITE_SEEDS);
    run_seeds("a_thousand_data_seeds_pass_every_check", count);
}

/// `scripts/sim-long.sh data`: `ORDO_SIM_SEEDS` seeds (20,000 by default).
#[test]
#[ignore = "long run: scripts/sim-long.sh data"]
fn many_data_seeds_pass_every_check() {
    let count = env_u64("ORDO_SIM_SEEDS").unwrap_or(20_000);
    run_seeds("many_data_seeds_pass_every_check", count);
}

/// Reruns one seed: `ORDO_SIM_SEED=<n>` (decimal or `0x` hex), printing its events;
/// `ORDO_SIM_SKIP=vote|primary-check|gate|primary-ack` leaves a mechanism out.
#[test]
fn replay_one_seed() {
    let seed = env_u64("ORDO_SIM_SEED").unwrap_or(1);
    let skip = std::env::var("ORDO_SIM_SKIP").unwrap_or_default();
    let mut o = options(seed, &skip);
    o.trace = std::env::var_os("ORDO_SIM_TRACE").is_some();
    let run = run(o);
    for e in &run.events {
        println!("{e}");
    }
    println!(
        "{:?}: {} attempts, {} committed, recovery decided {:?} (commit, abort)",
        run.options,
        run.history.len(),
        run.committed,
        run.decided
    );
    run.check().unwrap();
}

/// Runs `seed` with `skip` left out; a panic (an engine invariant broken by the missing
/// mechanism) counts as a failure.
fn check_seed(seed: u64, skip: &str) -> Result<(), String> {
    match std::panic::catch_unwind(|| run(options(seed, skip)).check()) {
        Ok(checked) => checked.map_err(|e| e.to_string()),
        Err(p) => Err(format!(
            "seed {seed} panicked: {}",
            p.downcast_ref::<String>().map_or("(no message)", String::as_str)
        )),
    }
}

/// The first seed in `0..limit` that fails with `skip` left out, if any.
fn first_failing(skip: &str, limit: u64) -> Option<(u64, String)> {
    (0..limit).find_map(|seed| check_seed(seed, skip).err().map(|e| (seed, e)))
}

/// Searches the first failing seeds for each switch (`ORDO_SIM_SEEDS` seeds, 3,000 by default).
#[test]
#[ignore = "search: prints the first seed each switch fails"]
fn search_failing_seeds() {
    let limit = env_u64("ORDO_SIM_SEEDS").unwrap_or(3_000);
    for skip in ["vote", "primary-check", "gate", "primary-ack"] {
        println!("{skip}: {:?}", first_failing(skip, limit));
    }
}

#[test]
fn a_seed_replays_exactly() {
    for seed in [1, 5, 12] {
        let a = run(DataSimOptions::from_seed(seed));
        let b = run(DataSimOptions::from_seed(seed));
        assert_eq!(a.events, b.events, "seed {seed}");
        let strip = |h: &History| -> Vec<String> {
            h.txns()
                .iter()
                .map(|t| format!("{:?} {:?} {:?}", t.process, t.ops, t.outcome))
                .collect()
        };
        assert_eq!(strip(&a.history), strip(&b.history), "seed {seed}");
    }
}

/// The first seed in `0..3,000` at which each mechanism, left out, fails a check
/// (`search_failing_seeds`); each passes with it.
const SKIP_VOTE_SEED: u64 = 13;
const SKIP_PRIMARY_CHECK_SEED: u64 = 106;
const SKIP_GATE_SEED: u64 = 73;
const SKIP_PRIMARY_ACK_SEED: u64 = 35;

fn fails_only_without(skip: &str, seed: u64) {
    check_seed(seed, "").unwrap_or_else(|e| panic!("seed {seed} with every mechanism: {e}"));
    let without = check_seed(seed, skip);
    assert!(without.is_err(), "seed {seed} passes with {skip} left out");
    eprintln!("{skip} left out: {}", without.unwrap_err());
}

/// Recovery's rule 3 (commit when every written region still holds a record) left out: a
/// transaction whose coordinator died after its commit point is aborted by recovery, and a
/// write its client saw commit is lost.
#[test]
fn the_vote_must_commit_what_every_region_recorded() {
    fails_only_without("vote", SKIP_VOTE_SEED);
}

/// COMMIT-BACKUP sent although the region's primary changed since the LOCK: the commit point
/// passes while the lock died with the old primary, and the new primary serves the old value.
#[test]
fn a_commit_backup_must_follow_its_lock() {
    fails_only_without("primary-check", SKIP_PRIMARY_CHECK_SEED);
}

/// A promoted backup serving before its pending records are resolved serves values a live
/// coordinator's committed transaction has already replaced.
#[test]
fn a_promoted_region_must_wait_for_its_records() {
    fails_only_without("gate", SKIP_GATE_SEED);
}

/// A coordinator whose records alone may not prove its commit reporting it before one
/// COMMIT-PRIMARY was acknowledged: its crash loses the commit.
#[test]
fn a_commit_must_survive_its_coordinator() {
    fails_only_without("primary-ack", SKIP_PRIMARY_ACK_SEED);
}

/// Seeds that failed before an engine fix and pass with it (each fails if its fix is undone):
/// * 2380047482965254377 restarts a member that got a region by re-replication and acknowledged
///   a part of it, which it reads back only since every object's slab header word is logged
///   with it (`ordo::db::serve`'s `log_backup`);
/// * 711787199071695661 promotes a region to its coordinator between the LOCK and the
///   COMMIT-PRIMARY of one of its attempts, which reached the engine's `unreachable!` until
///   COMMIT-PRIMARY and ABORT followed the lock token (`ClusterLocks`);
/// * 110 aborts an attempt whose slot was reserved at a region's old primary after a failover
///   promoted the region elsewhere (or to the coordinator itself): the abort freed a slot of
///   the promoted heap twice (a panic in a destructor: the process aborts) until only slots
///   reserved at a node are released or locked there (`ServeState::reserved`,
///   `Remote::take_remote_reservation`);
/// * 8273307264710631084 loses a coordinator between a RESERVE and its LOCK: the slot stays
///   reserved at the survivor unless recovery's query gives it back (`serve_recovery_state`).
#[test]
fn seeds_that_found_engine_bugs_pass() {
    for seed in [2_380_047_482_965_254_377, 711_787_199_071_695_661, 110, 8_273_307_264_710_631_084]
    {
        run(DataSimOptions::from_seed(seed)).check().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}
