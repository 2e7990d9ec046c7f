//! `ordo bench oplog`: the Oplog reverse map (ORDO §6.3) with updates stamped by each clock,
//! runs interleaved clock by clock through the harness.

use std::time::Duration;

use clap::Args;
use ordo_bench::harness::{Loaded, Plan};
use ordo_bench::oplog::{self, OplogConfig};
use ordo_clock::ClockChoice;

use crate::bench::{CommonBenchArgs, MeasureArgs, measure_plan};
use crate::error::CliError;

/// `ordo bench oplog` flags.
#[derive(Args, Debug)]
pub(crate) struct OplogArgs {
    #[command(flatten)]
    pub(crate) common: CommonBenchArgs,
    #[command(flatten)]
    pub(crate) measure: MeasureArgs,
    /// Physical pages mappings are drawn from.
    #[arg(long, default_value_t = 4096)]
    pages: u64,
    /// Live mappings per thread before it unmaps its oldest.
    #[arg(long, default_value_t = 64)]
    live_max: usize,
    /// Fraction of operations that read (and so merge) the reverse map, 0..=1.
    #[arg(long, default_value_t = 0.01)]
    read_ratio: f64,
    /// Objects the pages are split into, each a reverse map with its own per-thread logs
    /// (OpLog's per-object logs); 1 is one map for every page, whose every read merges every
    /// update.
    #[arg(long, default_value_t = oplog::OBJECTS_DEFAULT)]
    objects: usize,
    /// Seed of the workers' choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub(crate) fn run_oplog(args: &OplogArgs) -> Result<(), CliError> {
    let common = &args.common;
    let thread_counts = common.thread_counts()?;
    let cfg = OplogConfig {
        pages: args.pages,
        live_max: args.live_max,
        read_ratio: args.read_ratio,
        objects: args.objects,
        threads: thread_counts.iter().copied().max().unwrap_or(1),
        duration: common.duration().unwrap_or(Duration::from_secs(1)),
        seed: args.seed,
    };
    cfg.validate()?;
    let plan = Plan {
        workload: "oplog".into(),
        variant: "rmap".into(),
        config: serde_json::to_value(&cfg)?,
        thread_counts,
        duration: cfg.duration,
        repetitions: args.measure.repetitions,
    };
    let load = |clock| Ok(Box::new(oplog::load(clock, &cfg)?) as Box<dyn Loaded>);
    measure_plan(common, &args.measure, &plan, &[ClockChoice::Logical, ClockChoice::Ordo], &load)?;
    Ok(())
}
