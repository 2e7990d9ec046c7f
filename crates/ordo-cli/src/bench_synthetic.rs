//! `ordo bench synthetic`: SPHT's uniform read/write mixes over private or shared pools, every
//! clock side by side.

use std::time::Duration;

use clap::{Args, ValueEnum};
use ordo::{Isolation, Versions};
use ordo_bench::driver::Spread;
use ordo_bench::synthetic::{self, MIXES, Pool, SyntheticConfig};
use ordo_clock::ClockChoice;

use crate::bench::{CommonBenchArgs, open_clocks, progress_bar};
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
    /// Mixes to run, comma-separated: 5r5w, 45r5w, 9r1w, 5r45w.
    #[arg(long, value_delimiter = ',', default_values_t = MIXES.map(|m| m.0.to_owned()).to_vec())]
    mixes: Vec<String>,
    /// Private or shared pools.
    #[arg(long, value_enum, default_value_t = PoolArg::Private)]
    pool: PoolArg,
    /// Objects per pool.
    #[arg(long, default_value_t = 65_536)]
    pool_objects: usize,
    /// Isolation: strict-serializable, serializable, strict-si, si.
    #[arg(long, default_value = "strict-serializable")]
    isolation: String,
    /// Versions: single or multi.
    #[arg(long, default_value = "single")]
    versions: String,
    /// Measurements per cell, interleaved across clocks.
    #[arg(long, default_value_t = 3)]
    repetitions: usize,
}

pub(crate) fn run_synthetic(args: &SyntheticArgs) -> Result<(), CliError> {
    let common = &args.common;
    let isolation: Isolation =
        args.isolation.parse().map_err(|e: ordo::Error| CliError::Usage(e.to_string()))?;
    let versions: Versions =
        args.versions.parse().map_err(|e: ordo::Error| CliError::Usage(e.to_string()))?;
    if args.repetitions == 0 {
        return Err(CliError::Usage("--repetitions must be at least 1".into()));
    }
    let mut mixes = Vec::new();
    for name in &args.mixes {
        let m = MIXES.iter().find(|m| m.0 == name).ok_or_else(|| {
            CliError::Usage(format!("unknown mix {name:?}; expected 5r5w, 45r5w, 9r1w or 5r45w"))
        })?;
        mixes.push(*m);
    }
    let pool = match args.pool {
        PoolArg::Private => Pool::Private,
        PoolArg::Shared => Pool::Shared,
    };
    let thread_counts = common.thread_counts()?;
    let duration = common.duration().unwrap_or(Duration::from_secs(1));
    let clocks: Vec<_> = open_clocks(common, &[ClockChoice::Logical, ClockChoice::Ordo])?
        .into_iter()
        .map(std::sync::Arc::new)
        .collect();
    let bar = progress_bar(mixes.len() * thread_counts.len() * args.repetitions * clocks.len());
    println!(
        "synthetic: {:?} pools of {} objects, {}, {}, {} ms per run; tx/s median [min-max]",
        pool,
        args.pool_objects,
        isolation.name(),
        args.versions,
        duration.as_millis()
    );
    for (name, reads, writes) in mixes {
        for &threads in &thread_counts {
            let cfg = SyntheticConfig {
                reads,
                writes,
                pool,
                pool_objects: args.pool_objects,
                threads,
                duration,
                isolation,
                versions,
            };
            let tables = clocks
                .iter()
                .map(|c| synthetic::load(c.clone(), &cfg))
                .collect::<Result<Vec<_>, _>>()?;
            let mut runs: Vec<Vec<f64>> = vec![Vec::new(); tables.len()];
            for _ in 0..args.repetitions {
                for (i, t) in tables.iter().enumerate() {
                    let r = synthetic::run(t, &cfg);
                    if common.json {
                        println!(
                            "{}",
                            serde_json::json!({
                                "workload": "synthetic", "mix": name, "config": &cfg,
                                "clock": clocks[i].describe(), "result": &r,
                                "git_revision": ordo_bench::report::git_revision(),
                                "machine": ordo_bench::report::Machine::read(),
                            })
                        );
                    }
                    runs[i].push(r.tx_per_s);
                    bar.inc(1);
                }
            }
            let line: Vec<String> = clocks
                .iter()
                .zip(&runs)
                .map(|(c, r)| {
                    let s = Spread::of(r);
                    format!(
                        "{} {:.0} [{:.0}-{:.0}]",
                        c.describe().kind.name(),
                        s.median,
                        s.min,
                        s.max
                    )
                })
                .collect();
            let ratio = if runs.len() == 2 {
                format!(
                    "  ordo/logical {:.2}",
                    Spread::of(&runs[1]).median / Spread::of(&runs[0]).median.max(1e-9)
                )
            } else {
                String::new()
            };
            bar.suspend(|| println!("{name:>6} {threads} threads: {}{ratio}", line.join("  ")));
        }
    }
    bar.finish_and_clear();
    Ok(())
}
