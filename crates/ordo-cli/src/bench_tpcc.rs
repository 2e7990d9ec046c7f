//! `ordo bench tpcc`: TPC-C on the embedded engine, every clock side by side (ORDO Fig. 14 with
//! `--mix no-pay`; FaRMv2 §5.1's full mix with `--mix full`, whose figure of merit is the
//! `new_orders_per_s` metric of every run).
//!
//! The database is loaded once per clock; the harness interleaves clocks, repeats, checks the
//! TPC-C consistency conditions 1–4 after every run and prints the summary. With `--cluster N`
//! the database is loaded once on a loopback cluster and run through a cluster client instead
//! (`crate::bench_cluster`; small scales: loading goes over the network).

use std::time::Duration;

use clap::{Args, ValueEnum};
use ordo_bench::engine::{self, Durability};
use ordo_bench::harness::Plan;
use ordo_bench::tpcc::{self, TpccConfig};
use ordo_clock::AnyClock;

use crate::bench::{
    CommonBenchArgs, EngineArgs, LOGICAL_AND_ORDO, Loading, MeasureArgs, Runs, measure_plan,
};
use crate::bench_cluster::{ClusterArgs, LOAD_THREADS, cluster_plan, measure_on_cluster};
use crate::error::CliError;

/// Transaction mixes.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mix {
    /// NewOrder 50%, Payment 50% (ORDO Fig. 14, DBx1000).
    NoPay,
    /// The standard mix: NewOrder 45%, Payment 43%, Order-Status, Delivery, Stock-Level 4% each.
    Full,
}

impl Mix {
    fn workload(self) -> tpcc::Mix {
        match self {
            Mix::NoPay => tpcc::Mix::NoPay,
            Mix::Full => tpcc::Mix::Full,
        }
    }
}

/// `ordo bench tpcc` flags.
#[derive(Args, Debug)]
pub(crate) struct TpccArgs {
    #[command(flatten)]
    pub(crate) common: CommonBenchArgs,
    #[command(flatten)]
    pub(crate) measure: MeasureArgs,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
    #[command(flatten)]
    pub(crate) cluster: ClusterArgs,
    /// The transaction mix.
    #[arg(long, value_enum, default_value_t = Mix::NoPay)]
    mix: Mix,
    /// Warehouses (ORDO Fig. 14 and DBx1000 usually run as many as threads).
    #[arg(long, default_value_t = 1)]
    warehouses: u32,
    /// ITEM rows, and STOCK rows per warehouse.
    #[arg(long, default_value_t = tpcc::ITEMS_STANDARD)]
    items: u32,
    /// Customers (and initial orders) per district.
    #[arg(long, default_value_t = tpcc::CUSTOMERS_STANDARD)]
    customers: u32,
    /// Fault in this many MiB of fresh heap memory before loading (`Ordo::pretouch_heap`, as
    /// the JVM's AlwaysPreTouch), so the timed run takes no page faults on fresh memory. Worth
    /// it where first touching memory is slow (a VM whose host backs memory lazily); the load
    /// and a 2 s run of 2 warehouses use about 1.5 GiB. 0: off.
    #[arg(long, default_value_t = 0, value_name = "MIB")]
    pretouch_mb: u64,
    /// Stop each terminal after N transactions instead of at the end of --duration (which then
    /// caps the run): one thread and one --seed run exactly the same transactions, so two
    /// builds' instruction counts (callgrind) compare exactly.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    txns: Option<u64>,
}

/// The TPC-C configuration of the flags, for `threads_max` threads at most.
pub(crate) fn config(
    mix: tpcc::Mix,
    warehouses: u32,
    items: u32,
    customers: u32,
    engine: &EngineArgs,
    threads_max: usize,
) -> TpccConfig {
    TpccConfig {
        warehouses,
        items,
        customers_per_district: customers,
        mix,
        threads: threads_max,
        duration: Duration::from_secs(2),
        isolation: engine.isolation,
        versions: engine.versions,
        seed: engine.seed,
        txns_per_thread: None,
        pretouch_bytes: 0,
    }
}

/// The harness plan of a TPC-C configuration; the variant names the mix and warehouses.
pub(crate) fn plan(cfg: &TpccConfig, runs: &Runs<'_>) -> Result<Plan, CliError> {
    for &t in &runs.thread_counts {
        TpccConfig { threads: t, ..cfg.clone() }.validate()?;
    }
    runs.plan("tpcc", format!("{} {}w", cfg.mix.name(), cfg.warehouses), cfg, cfg.duration)
}

/// Loads the TPC-C database of `cfg` on one clock, durable as `durability` says.
pub(crate) fn load(cfg: TpccConfig, durability: &Durability) -> impl Fn(AnyClock) -> Loading + '_ {
    move |clock| engine::load(durability, "tpcc", |base| tpcc::load_with(clock, &cfg, 2, base))
}

pub(crate) fn run_tpcc(args: &TpccArgs) -> Result<(), CliError> {
    let common = &args.common;
    let thread_counts = common.thread_counts()?;
    let threads_max = thread_counts.iter().copied().max().unwrap_or(1);
    let mut cfg = config(
        args.mix.workload(),
        args.warehouses,
        args.items,
        args.customers,
        &args.engine,
        threads_max,
    );
    cfg.duration = common.duration().unwrap_or(cfg.duration);
    cfg.pretouch_bytes = args.pretouch_mb << 20;
    cfg.txns_per_thread = args.txns;
    let durability = args.engine.durability.durability()?;
    let runs =
        Runs { thread_counts, repetitions: args.measure.repetitions, durability: &durability };
    let plan = plan(&cfg, &runs)?;
    if let Some(target) = args.cluster.target(common, &durability)? {
        let engine = ordo::Config { versions: cfg.versions, ..ordo::Config::default() };
        let options = target.options(data_bytes(&cfg), engine);
        let plan = cluster_plan(plan, target.nodes());
        measure_on_cluster(common, &args.measure, &plan, &options, |db| {
            tpcc::load_on(db, &cfg, LOAD_THREADS)
        })?;
        return Ok(());
    }
    measure_plan(common, &args.measure, &plan, &LOGICAL_AND_ORDO, &load(cfg, &durability))?;
    Ok(())
}

/// A rough upper estimate of the loaded database's bytes (rows with headers, indexes, and the
/// orders a few seconds of NewOrders add), to size a cluster's regions.
fn data_bytes(cfg: &TpccConfig) -> u64 {
    let (w, items, cpd) =
        (u64::from(cfg.warehouses), u64::from(cfg.items), u64::from(cfg.customers_per_district));
    let districts = w * u64::from(tpcc::schema::DISTRICTS);
    // ITEM ~100 B; STOCK ~320 B; per customer: the row (~700 B), its initial order with ~10
    // lines and the index entries (~1.3 KB).
    items * 128 + w * items * 384 + districts * cpd * 2_048 + (64 << 20)
}
