//! `ordo bench hashtable`: the hash table of ORDO Fig. 11 — RLU and Ordo transactions side by
//! side, each on the logical and the ORDO clock, at 2% and 40% updates by default.

use std::num::NonZeroUsize;
use std::time::Duration;

use clap::{Args, ValueEnum};
use ordo_bench::engine::{self, Durability};
use ordo_bench::harness::Plan;
use ordo_bench::hashtable::{self, HashtableConfig, Impl};
use ordo_clock::AnyClock;

use crate::bench::{
    CommonBenchArgs, DurabilityArgs, LOGICAL_AND_ORDO, Loading, MeasureArgs, Runs, measure_plans,
};
use crate::error::CliError;

/// Implementations.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ImplArg {
    /// Read-log-update (RLU on the logical clock, RLU^ORDO on the ORDO clock).
    Rlu,
    /// Ordo transactions.
    Txn,
}

/// `ordo bench hashtable` flags.
#[derive(Args, Debug)]
pub(crate) struct HashtableArgs {
    #[command(flatten)]
    pub(crate) common: CommonBenchArgs,
    #[command(flatten)]
    pub(crate) measure: MeasureArgs,
    /// Implementations, comma-separated.
    #[arg(long = "impl", value_enum, value_delimiter = ',', default_values_t = [ImplArg::Rlu, ImplArg::Txn])]
    implementations: Vec<ImplArg>,
    /// Buckets (sorted linked lists).
    #[arg(long, default_value_t = 1_000)]
    buckets: usize,
    /// Keys per bucket after loading; keys are drawn from twice that range.
    #[arg(long, default_value_t = 100)]
    nodes_per_bucket: usize,
    /// Update percentages to run, comma-separated (half inserts, half removes).
    #[arg(long, value_delimiter = ',', default_values_t = [2u32, 40])]
    update_percent: Vec<u32>,
    /// Seed of the load and of the operations.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Durability of the transactional table (`--impl txn` only: RLU is not on the engine).
    #[command(flatten)]
    durability: DurabilityArgs,
    /// RLU deferral: a thread commits its writes after this many writer sections (or when
    /// another writer needs one of its objects); off when absent. Applies to `--impl rlu`.
    #[arg(long, value_name = "N")]
    rlu_defer: Option<NonZeroUsize>,
}

pub(crate) fn run_hashtable(args: &HashtableArgs) -> Result<(), CliError> {
    let common = &args.common;
    let thread_counts = common.thread_counts()?;
    let threads_max = thread_counts.iter().copied().max().unwrap_or(1);
    let duration = common.duration().unwrap_or(Duration::from_secs(1));
    let durability = args.durability.durability()?;
    if durability.mode.is_some() && args.implementations.contains(&ImplArg::Rlu) {
        return Err(CliError::Usage(format!(
            "--durability {}: the RLU hash table (--impl rlu, part of the default) does not run \
             on the Ordo engine and cannot be durable; use --impl txn or --durability none",
            durability.name()
        )));
    }
    let runs =
        Runs { thread_counts, repetitions: args.measure.repetitions, durability: &durability };
    let mut plans = Vec::new();
    for &update_percent in &args.update_percent {
        for &imp in &args.implementations {
            let implementation = match imp {
                ImplArg::Rlu => Impl::Rlu,
                ImplArg::Txn => Impl::Txn,
            };
            let cfg = HashtableConfig {
                implementation,
                buckets: args.buckets,
                nodes_per_bucket: args.nodes_per_bucket,
                update_percent,
                threads: threads_max,
                duration,
                seed: args.seed,
                rlu_defer: args.rlu_defer,
            };
            cfg.validate()?;
            let plan = plan(&cfg, &runs)?;
            plan.validate()?;
            plans.push((plan, load(cfg, &durability)));
        }
    }
    measure_plans(common, &args.measure, &plans, &LOGICAL_AND_ORDO)?;
    Ok(())
}

/// The harness plan of one hash table configuration; the variant names the implementation
/// (and the RLU deferral, when on) and the update percentage.
pub(crate) fn plan(cfg: &HashtableConfig, runs: &Runs<'_>) -> Result<Plan, CliError> {
    let variant = match (cfg.implementation, cfg.rlu_defer) {
        (Impl::Rlu, Some(n)) => format!("rlu defer {n} {}%", cfg.update_percent),
        (implementation, _) => format!("{} {}%", implementation.name(), cfg.update_percent),
    };
    runs.plan("hashtable", variant, cfg, cfg.duration)
}

/// Loads the hash table of `cfg` on one clock, durable as `durability` says.
pub(crate) fn load(
    cfg: HashtableConfig,
    durability: &Durability,
) -> impl Fn(AnyClock) -> Loading + '_ {
    move |clock| {
        engine::load(durability, "hashtable", |base| hashtable::load_with(clock, &cfg, base))
    }
}
