//! `ordo bench suite`: the papers' figures at a small scale in a few minutes.
//!
//! Every entry is a harness plan — the same code path as its own `ordo bench` subcommand — run
//! with every clock of `--clock` (default logical and ordo), interleaved and repeated. The
//! clocks are opened once for the whole suite, so every entry sees the same ORDO boundary.
//! The suite prints one summary table at the end (and JSON lines with `--json`), and `--out`
//! collects every run for `ordo plot`.

use std::time::Duration;

use clap::Args;
use ordo_bench::engine::Durability;
use ordo_bench::harness::{self, Plan, Record};
use ordo_bench::hashtable::{HashtableConfig, Impl};
use ordo_bench::oplog::OplogConfig;
use ordo_bench::synthetic::Pool;
use ordo_clock::ClockChoice;

use crate::bench::{
    CommonBenchArgs, EngineArgs, Loader, MeasureArgs, Runs, measure_on_clocks, open_clocks,
};
use crate::bench_ycsb::Mix;
use crate::error::CliError;

/// `ordo bench suite` flags.
#[derive(Args, Debug)]
pub(crate) struct SuiteArgs {
    #[command(flatten)]
    common: CommonBenchArgs,
    #[command(flatten)]
    measure: MeasureArgs,
    #[command(flatten)]
    engine: EngineArgs,
    /// Only the entries whose name contains one of these words (e.g. `ycsb,tpcc`).
    #[arg(long, value_delimiter = ',', value_name = "WORDS")]
    only: Vec<String>,
    /// List the entries and exit.
    #[arg(long)]
    list: bool,
    /// Scale factor for table sizes (1 = the suite's small defaults).
    #[arg(long, default_value_t = 1)]
    scale: u64,
}

/// The durability of the entries that are not on the engine (RLU, Oplog).
static IN_MEMORY: Durability = Durability { mode: None, base_dir: None, huge_pages: None };

/// One entry: a plan and how to load it.
struct Entry<'a> {
    plan: Plan,
    load: Box<Loader<'a>>,
}

/// The suite's entries at `scale`, for the given run length.
fn entries<'a>(
    engine: &'a EngineArgs,
    runs: &Runs<'a>,
    scale: u64,
    duration: Duration,
) -> Result<Vec<Entry<'a>>, CliError> {
    let durability = runs.durability;
    let threads_max = runs.thread_counts.iter().copied().max().unwrap_or(1);
    let mut out = Vec::new();
    // YCSB (ORDO Fig. 13): 100k rows of 1 KB per scale unit.
    for mix in [Mix::Ro2, Mix::A, Mix::B, Mix::Dbx, Mix::D, Mix::E] {
        let mut cfg = crate::bench_ycsb::config(mix, 100_000 * scale, 1000, engine, threads_max);
        cfg.duration = duration;
        let plan = crate::bench_ycsb::plan(mix.name(), &cfg, runs)?;
        out.push(Entry { plan, load: Box::new(crate::bench_ycsb::load(cfg, durability)) });
    }
    // SPHT's synthetic mixes (private pools: no contention) and one shared-pool mix.
    for (name, pool) in [
        ("5r5w", Pool::Private),
        ("45r5w", Pool::Private),
        ("9r1w", Pool::Private),
        ("5r45w", Pool::Private),
        ("5r5w", Pool::Shared),
    ] {
        let cfg = crate::bench_synthetic::config(
            name,
            pool,
            16_384 * scale as usize,
            engine,
            threads_max,
            duration,
        )?;
        let plan = crate::bench_synthetic::plan(name, &cfg, runs)?;
        out.push(Entry { plan, load: Box::new(crate::bench_synthetic::load(cfg, durability)) });
    }
    // TPC-C (ORDO Fig. 14 no-pay, FaRMv2's full mix): as many warehouses as threads, with
    // ITEM, STOCK and CUSTOMER cut to a fifth per scale unit so loading takes seconds.
    for mix in [ordo_bench::tpcc::Mix::NoPay, ordo_bench::tpcc::Mix::Full] {
        let mut cfg = crate::bench_tpcc::config(
            mix,
            u32::try_from(threads_max).unwrap_or(u32::MAX),
            (20_000 * scale).min(u64::from(ordo_bench::tpcc::ITEMS_STANDARD)) as u32,
            (600 * scale).min(u64::from(ordo_bench::tpcc::CUSTOMERS_STANDARD)) as u32,
            engine,
            threads_max,
        );
        cfg.duration = duration;
        let plan = crate::bench_tpcc::plan(&cfg, runs)?;
        out.push(Entry { plan, load: Box::new(crate::bench_tpcc::load(cfg, durability)) });
    }
    // The hash table of ORDO Fig. 11 (1,000 buckets x 100 nodes) on RLU and on transactions.
    // RLU is not on the engine: it runs in memory whatever --durability says (and its records
    // say so).
    for update_percent in [2, 40] {
        for implementation in [Impl::Rlu, Impl::Txn] {
            let cfg = HashtableConfig {
                implementation,
                buckets: 1000,
                nodes_per_bucket: 100,
                update_percent,
                threads: threads_max,
                duration,
                seed: engine.seed,
                rlu_defer: None,
            };
            cfg.validate()?;
            let durability = match implementation {
                Impl::Rlu => &IN_MEMORY,
                Impl::Txn => durability,
            };
            let plan = crate::bench_hashtable::plan(&cfg, &Runs { durability, ..runs.clone() })?;
            out.push(Entry { plan, load: Box::new(crate::bench_hashtable::load(cfg, durability)) });
        }
    }
    // Oplog's reverse map (ORDO §4.4): not on the engine, in memory.
    let cfg =
        OplogConfig { threads: threads_max, duration, seed: engine.seed, ..OplogConfig::default() };
    cfg.validate()?;
    let plan = Runs { durability: &IN_MEMORY, ..runs.clone() }.plan(
        "oplog",
        "rmap".into(),
        &cfg,
        duration,
    )?;
    out.push(Entry {
        plan,
        load: Box::new(move |clock| {
            Ok(Box::new(ordo_bench::oplog::load(clock, &cfg)?)
                as Box<dyn ordo_bench::harness::Loaded>)
        }),
    });
    Ok(out)
}

/// Runs `ordo bench suite`.
pub(crate) fn run_suite(args: &SuiteArgs) -> Result<(), CliError> {
    let common = &args.common;
    if args.scale == 0 {
        return Err(CliError::Usage("--scale must be at least 1".into()));
    }
    let thread_counts = common.thread_counts()?;
    let duration = common.duration().unwrap_or(Duration::from_millis(500));
    let durability = args.engine.durability.durability()?;
    let runs =
        Runs { thread_counts, repetitions: args.measure.repetitions, durability: &durability };
    let all = entries(&args.engine, &runs, args.scale, duration)?;
    let chosen: Vec<Entry<'_>> = all
        .into_iter()
        .filter(|e| {
            let name = format!("{} {}", e.plan.workload, e.plan.variant);
            args.only.is_empty() || args.only.iter().any(|w| name.contains(w.as_str()))
        })
        .collect();
    if chosen.is_empty() {
        return Err(CliError::Usage(format!(
            "--only {} matches no suite entry (see --list)",
            args.only.join(",")
        )));
    }
    if args.list {
        for e in &chosen {
            println!("{} {}", e.plan.workload, e.plan.variant);
        }
        return Ok(());
    }
    for e in &chosen {
        e.plan.validate()?;
    }
    let mut records: Vec<Record> = Vec::new();
    let started = std::time::Instant::now();
    for (i, e) in chosen.iter().enumerate() {
        eprintln!(
            "[{}/{}] {} {} ({:.0} s so far)",
            i + 1,
            chosen.len(),
            e.plan.workload,
            e.plan.variant,
            started.elapsed().as_secs_f64()
        );
        // Fresh clocks per entry (a logical clock is per database); the ORDO boundary comes
        // from the calibration cache, so every entry uses the same one.
        let clocks = open_clocks(common, &[ClockChoice::Logical, ClockChoice::Ordo])?;
        records.extend(measure_on_clocks(
            common.json,
            args.measure.out.as_deref(),
            &e.plan,
            clocks,
            &e.load,
        )?);
    }
    if !common.json {
        print!("{}", harness::summary(&records));
        println!("suite took {:.0} s", started.elapsed().as_secs_f64());
        if let Some(out) = &args.measure.out {
            println!(
                "results in {}; draw them with `ordo plot {} -o FIG.svg`",
                out.display(),
                out.display()
            );
        }
    }
    Ok(())
}
