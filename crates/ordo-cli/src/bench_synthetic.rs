//! `ordo bench synthetic`: SPHT's uniform read/write mixes over private or shared pools, every
//! clock side by side.

use std::time::Duration;

use clap::{Args, ValueEnum};
use ordo_bench::engine::{self, Durability};
use ordo_bench::harness::Plan;
use ordo_bench::synthetic::{self, MIXES, Pool, SyntheticConfig};
use ordo_clock::AnyClock;

use crate::bench::{
    CommonBenchArgs, EngineArgs, LOGICAL_AND_ORDO, Loading, MeasureArgs, Runs, measure_plans,
};
use crate::error::CliError;

/// Pools.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PoolArg {
    /// One pool per thread: no contention.
    Private,
    /// One pool for all threads.
    Shared,
}

/// `ordo bench synthetic` flags.
#[derive(Args, Debug)]
pub(crate) struct SyntheticArgs {
    #[command(flatten)]
    pub(crate) common: CommonBenchArgs,
    #[command(flatten)]
    pub(crate) measure: MeasureArgs,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
    /// Mixes to run, comma-separated: 5r5w, 45r5w, 9r1w, 5r45w.
    #[arg(long, value_delimiter = ',', default_values_t = MIXES.map(|m| m.0.to_owned()).to_vec())]
    mixes: Vec<String>,
    /// Private or shared pools.
    #[arg(long, value_enum, default_value_t = PoolArg::Private)]
    pool: PoolArg,
    /// Objects per pool.
    #[arg(long, default_value_t = 65_536)]
    pool_objects: usize,
}

/// The configuration of mix `name`, or a usage error naming the known mixes.
pub(crate) fn config(
    name: &str,
    pool: Pool,
    pool_objects: usize,
    engine: &EngineArgs,
    threads_max: usize,
    duration: Duration,
) -> Result<SyntheticConfig, CliError> {
    let (_, reads, writes) = MIXES.iter().find(|m| m.0 == name).copied().ok_or_else(|| {
        CliError::Usage(format!("unknown mix {name:?}; expected 5r5w, 45r5w, 9r1w or 5r45w"))
    })?;
    let cfg = SyntheticConfig {
        reads,
        writes,
        pool,
        pool_objects,
        threads: threads_max,
        duration,
        isolation: engine.isolation,
        versions: engine.versions,
    };
    cfg.validate()?;
    Ok(cfg)
}

/// The harness plan of one mix; the variant names the mix and the pool.
pub(crate) fn plan(name: &str, cfg: &SyntheticConfig, runs: &Runs<'_>) -> Result<Plan, CliError> {
    let pool = match cfg.pool {
        Pool::Private => "private",
        Pool::Shared => "shared",
    };
    runs.plan("synthetic", format!("{name} {pool}"), cfg, cfg.duration)
}

/// Loads the pools of `cfg` on one clock, durable as `durability` says.
pub(crate) fn load(
    cfg: SyntheticConfig,
    durability: &Durability,
) -> impl Fn(AnyClock) -> Loading + '_ {
    move |clock| {
        engine::load(durability, "synthetic", |base| synthetic::load_with(clock, &cfg, base))
    }
}

pub(crate) fn run_synthetic(args: &SyntheticArgs) -> Result<(), CliError> {
    let common = &args.common;
    let pool = match args.pool {
        PoolArg::Private => Pool::Private,
        PoolArg::Shared => Pool::Shared,
    };
    let thread_counts = common.thread_counts()?;
    let threads_max = thread_counts.iter().copied().max().unwrap_or(1);
    let duration = common.duration().unwrap_or(Duration::from_secs(1));
    let durability = args.engine.durability.durability()?;
    let runs =
        Runs { thread_counts, repetitions: args.measure.repetitions, durability: &durability };
    let mut plans = Vec::new();
    for name in &args.mixes {
        let cfg = config(name, pool, args.pool_objects, &args.engine, threads_max, duration)?;
        let plan = plan(name, &cfg, &runs)?;
        plan.validate()?;
        plans.push((plan, load(cfg, &durability)));
    }
    measure_plans(common, &args.measure, &plans, &LOGICAL_AND_ORDO)?;
    Ok(())
}
