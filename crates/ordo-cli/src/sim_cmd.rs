//! `ordo sim`: the cluster's deterministic simulations (issue 17) from the command line.
//!
//! * `ordo sim clock` — the clock-and-failover layer against a perfect store
//!   (`ordo_cluster::sim`): leases, failover rounds, fast-forward, under message loss, delay,
//!   partitions and crashes.
//! * `ordo sim data` — the data path (`ordo_cluster::sim::data`): real engines on durable
//!   simulated storage, crashes mid-commit, recovery, promotion, re-replication and restarts.
//!
//! Seeds `--seed`, `--seed + 1`, … are run (`--seeds` of them, on `--threads` threads); every
//! history is checked for strict serializability, each failing seed is printed with the command
//! that replays it, and the command fails if any seed did. `--skip` leaves a safety mechanism
//! out, to watch the checks catch it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use clap::{Args, Subcommand};
use ordo_cluster::failover::RoundShortcuts;
use ordo_cluster::sim::data::{self, DataSimOptions};
use ordo_cluster::sim::{self, SimOptions};

use crate::error::CliError;

/// `ordo sim`.
#[derive(Args, Debug)]
pub(crate) struct SimArgs {
    #[command(subcommand)]
    which: Which,
}

#[derive(Subcommand, Debug)]
enum Which {
    /// The clock-and-failover layer (leases, failover rounds, fast-forward).
    Clock(SeedArgs),
    /// The data path (real engines, durable storage, recovery, promotion, re-replication).
    Data(SeedArgs),
}

#[derive(Args, Debug)]
struct SeedArgs {
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// How many seeds, from `--seed` on.
    #[arg(long, default_value_t = 1000)]
    seeds: u64,
    /// Threads running seeds.
    #[arg(long, default_value_t = 2)]
    threads: u64,
    /// A mechanism to leave out: `lease` or `advance` (clock); `vote`, `primary-check`,
    /// `gate` or `primary-ack` (data).
    #[arg(long)]
    skip: Option<String>,
    /// Print what each run did (data: every message; best with `--seeds 1`).
    #[arg(long)]
    trace: bool,
}

pub(crate) fn run(args: &SimArgs) -> Result<(), CliError> {
    match &args.which {
        Which::Clock(a) => {
            let shortcuts = match a.skip.as_deref() {
                None => RoundShortcuts::default(),
                Some("lease") => RoundShortcuts { skip_lease_wait: true, skip_advance: false },
                Some("advance") => RoundShortcuts { skip_lease_wait: false, skip_advance: true },
                Some(other) => {
                    return Err(CliError::Usage(format!(
                        "--skip {other}: the clock simulation leaves out `lease` or `advance`"
                    )));
                }
            };
            let options = SimOptions { shortcuts, trace: a.trace, ..SimOptions::default() };
            seeds("clock", a, |seed| {
                let run = sim::simulate(seed, options);
                let line = format!(
                    "{} members, {:?}: {} committed, {} failovers",
                    run.members,
                    run.fault,
                    run.committed(),
                    run.failovers.len()
                );
                (line, run.check().err().map(|e| e.to_string()))
            })
        }
        Which::Data(a) => {
            let skip = a.skip.clone().unwrap_or_default();
            if !["", "vote", "primary-check", "gate", "primary-ack"].contains(&skip.as_str()) {
                return Err(CliError::Usage(format!(
                    "--skip {skip}: the data simulation leaves out `vote`, `primary-check`, \
                     `gate` or `primary-ack`"
                )));
            }
            seeds("data", a, |seed| {
                let mut o = DataSimOptions::from_seed(seed);
                o.vote_aborts_undecided = skip == "vote";
                o.skip_primary_check = skip == "primary-check";
                o.promote_before_resolved = skip == "gate";
                o.commit_primary_one_way = skip == "primary-ack";
                o.trace = a.trace;
                let run = data::run(o);
                let mut line = format!(
                    "{} members, {} crashes: {} attempts, {} committed, recovery decided {} \
                     commits and {} aborts",
                    run.options.nodes,
                    run.options.crashes,
                    run.history.len(),
                    run.committed,
                    run.decided.0,
                    run.decided.1
                );
                if a.trace {
                    for e in &run.events {
                        line.push_str("\n  ");
                        line.push_str(e);
                    }
                }
                (line, run.check().err().map(|e| e.to_string()))
            })
        }
    }
}

/// Runs the seeds of `a` with `one` (a summary line, and the failure if any), printing each
/// failure as it is found.
fn seeds(
    which: &str,
    a: &SeedArgs,
    one: impl Fn(u64) -> (String, Option<String>) + Sync,
) -> Result<(), CliError> {
    let started = Instant::now();
    let failed = AtomicU64::new(0);
    let threads = a.threads.clamp(1, 64);
    let verbose = a.seeds == 1 || a.trace;
    let skip = a.skip.as_ref().map(|s| format!(" --skip {s}")).unwrap_or_default();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (one, failed, skip) = (&one, &failed, &skip);
            s.spawn(move || {
                for i in (t..a.seeds).step_by(threads as usize) {
                    let seed = a.seed.wrapping_add(i);
                    // A panic (an engine invariant broken, e.g. with a mechanism left out) is
                    // a failed seed, not the end of the run.
                    let (line, failure) =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| one(seed)))
                            .unwrap_or_else(|p| {
                                let what = p
                                    .downcast_ref::<String>()
                                    .cloned()
                                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                                    .unwrap_or_default();
                                (String::from("panicked"), Some(format!("panicked: {what}")))
                            });
                    if verbose {
                        println!("seed {seed}: {line}");
                    }
                    if let Some(f) = failure {
                        failed.fetch_add(1, Ordering::Relaxed);
                        println!(
                            "seed {seed} FAILED: {f}\n  replay: ordo sim {which} --seed {seed} \
                             --seeds 1{skip} --trace"
                        );
                    }
                }
            });
        }
    });
    let failed = failed.into_inner();
    println!(
        "ordo sim {which}: {} seeds from {} in {:.1} s, {failed} failed",
        a.seeds,
        a.seed,
        started.elapsed().as_secs_f64()
    );
    if failed > 0 {
        return Err(CliError::SimFailed { failed, seeds: a.seeds });
    }
    Ok(())
}
