//! `ordo bench hashtable`: the hash table of ORDO Fig. 11 — RLU and Ordo transactions side by
//! side, each on the logical and the ORDO clock, at 2% and 40% updates by default.

use std::num::NonZeroUsize;
use std::time::Duration;

use clap::{Args, ValueEnum};
use ordo_bench::engine;
use ordo_bench::harness::Plan;
use ordo_bench::hashtable::{self, HashtableConfig, Impl};
use ordo_clock::ClockChoice;

use crate::bench::{
    CommonBenchArgs, DurabilityArgs, MeasureArgs, measure_on_clocks, open_clocks, with_durability,
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
            let plan = with_durability(
                Plan {
                    workload: "hashtable".into(),
                    variant: match (implementation, args.rlu_defer) {
                        (Impl::Rlu, Some(n)) => format!("rlu defer {n} {update_percent}%"),
                        _ => format!("{} {}%", implementation.name(), update_percent),
                    },
                    config: serde_json::to_value(&cfg)?,
                    thread_counts: thread_counts.clone(),
                    duration,
                    repetitions: args.measure.repetitions,
                },
                &durability,
            );
            plan.validate()?;
            plans.push((cfg, plan));
        }
    }
    let mut records = Vec::new();
    for (cfg, plan) in &plans {
        let clocks = open_clocks(common, &[ClockChoice::Logical, ClockChoice::Ordo])?;
        let load = |clock| {
            engine::load(&durability, "hashtable", |base| hashtable::load_with(clock, cfg, base))
        };
        records.extend(measure_on_clocks(
            common.json,
            args.measure.out.as_deref(),
            plan,
            clocks,
            &load,
        )?);
    }
    if !common.json {
        print!("{}", ordo_bench::harness::summary(&records));
    }
    Ok(())
}
