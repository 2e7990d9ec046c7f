//! `ordo bench synthetic`: SPHT's uniform read/write mixes over private or shared pools, every
//! clock side by side.

use std::time::Duration;

use clap::{Args, ValueEnum};
use ordo_bench::engine::{self, Durability};
use ordo_bench::harness::{Loaded, Plan};
use ordo_bench::synthetic::{self, MIXES, Pool, SyntheticConfig};
use ordo_clock::ClockChoice;

use crate::bench::{
    CommonBenchArgs, EngineArgs, MeasureArgs, measure_on_clocks, open_clocks, with_durability,
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

/// The harness plan of one mix.
pub(crate) fn plan(
    name: &str,
    cfg: &SyntheticConfig,
    thread_counts: Vec<usize>,
    repetitions: usize,
    durability: &Durability,
) -> Result<Plan, CliError> {
    let pool = match cfg.pool {
        Pool::Private => "private",
        Pool::Shared => "shared",
    };
    let plan = Plan {
        workload: "synthetic".into(),
        variant: format!("{name} {pool}"),
        config: serde_json::to_value(cfg)?,
        thread_counts,
        duration: cfg.duration,
        repetitions,
    };
    Ok(with_durability(plan, durability))
}

/// Loads the pools of `cfg` on one clock, durable as `durability` says.
pub(crate) fn load<'a>(
    cfg: &'a SyntheticConfig,
    durability: &'a Durability,
) -> impl Fn(ordo_clock::AnyClock) -> Result<Box<dyn Loaded>, ordo_bench::error::BenchError> + 'a {
    move |clock| {
        engine::load(durability, "synthetic", |base| synthetic::load_with(clock, cfg, base))
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
    let mut plans = Vec::new();
    for name in &args.mixes {
        let cfg = config(name, pool, args.pool_objects, &args.engine, threads_max, duration)?;
        plans.push(plan(name, &cfg, thread_counts.clone(), args.measure.repetitions, &durability)?);
        plans.last_mut().map(|p| p.validate()).transpose()?;
    }
    let mut records = Vec::new();
    for (name, plan) in args.mixes.iter().zip(&plans) {
        let cfg = config(name, pool, args.pool_objects, &args.engine, threads_max, duration)?;
        let clocks = open_clocks(common, &[ClockChoice::Logical, ClockChoice::Ordo])?;
        records.extend(measure_on_clocks(
            common.json,
            args.measure.out.as_deref(),
            plan,
            clocks,
            &load(&cfg, &durability),
        )?);
    }
    if !common.json {
        print!("{}", ordo_bench::harness::summary(&records));
    }
    Ok(())
}
