//! `ordo bench scan-update`: long scans against single-row updates in single-version mode and
//! in each multi-version budget policy (FaRMv2 Fig. 15).

use std::time::Duration;

use clap::Args;
use ordo_bench::driver::Spread;
use ordo_bench::engine::Durability;
use ordo_bench::scan_update::{self, ScanUpdateConfig, ScanUpdateResult, VersionMode};
use ordo_clock::ClockChoice;

use crate::bench::{CommonBenchArgs, DurabilityArgs, open_clocks, progress_bar};
use crate::error::CliError;

/// `ordo bench scan-update` flags.
#[derive(Args, Debug)]
pub(crate) struct ScanArgs {
    #[command(flatten)]
    pub(crate) common: CommonBenchArgs,
    /// Rows in the table.
    #[arg(long, default_value_t = 200_000)]
    rows: u64,
    /// Scan lengths, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec![1u64, 10, 100, 1_000, 10_000, 100_000])]
    lengths: Vec<u64>,
    /// Version modes, comma-separated: single, block, abort, truncate.
    #[arg(long, value_delimiter = ',', default_values_t = VersionMode::ALL.map(|m| m.name().to_owned()).to_vec())]
    modes: Vec<String>,
    /// Old-version budget in 1 MiB blocks.
    #[arg(long, default_value_t = 64)]
    budget_blocks: usize,
    /// Attempts a scan makes before it counts as failed.
    #[arg(long, default_value_t = 100)]
    scan_attempts_max: u32,
    /// Measurements per cell, interleaved across modes.
    #[arg(long, default_value_t = 1)]
    repetitions: usize,
    #[command(flatten)]
    durability: DurabilityArgs,
}

#[derive(serde::Serialize)]
struct Line<'a> {
    workload: &'static str,
    config: &'a ScanUpdateConfig,
    durability: &'a Durability,
    clock: &'a ordo_clock::ClockDescription,
    repetition: usize,
    result: &'a ScanUpdateResult,
    git_revision: &'a str,
    machine: &'a ordo_bench::report::Machine,
}

pub(crate) fn run_scan(args: &ScanArgs) -> Result<(), CliError> {
    let common = &args.common;
    let modes = args.modes.iter().map(|m| m.parse()).collect::<Result<Vec<VersionMode>, _>>()?;
    if args.repetitions == 0 {
        return Err(CliError::Usage("--repetitions must be at least 1".into()));
    }
    let threads = common.thread_counts()?.into_iter().max().unwrap_or(1);
    let duration = common.duration().unwrap_or(Duration::from_secs(1));
    let mut configs = Vec::new();
    for &length in &args.lengths {
        for &mode in &modes {
            let cfg = ScanUpdateConfig {
                rows: args.rows,
                length,
                mode,
                budget_blocks: args.budget_blocks,
                threads,
                duration,
                scan_attempts_max: args.scan_attempts_max,
            };
            cfg.validate()?;
            configs.push(cfg);
        }
    }
    let durability = args.durability.durability()?;
    let machine = ordo_bench::report::Machine::read();
    let revision = ordo_bench::report::git_revision();
    let clocks = open_clocks(common, &[ClockChoice::Ordo])?;
    let bar = progress_bar(clocks.len() * configs.len() * args.repetitions);
    println!(
        "scan-update: {} rows, {threads} threads, {} ms per run, budget {} MiB, scans give up after {} attempts, durability {}",
        args.rows,
        duration.as_millis(),
        args.budget_blocks,
        args.scan_attempts_max,
        durability.name()
    );
    println!(
        "{:>8} {:>7} {:>9} {:>16} {:>14} {:>13} {:>12}",
        "clock", "length", "mode", "keys scanned/s", "updates/s", "scans failed", "truncations"
    );
    for clock in clocks {
        let description = clock.describe();
        let clock = std::sync::Arc::new(clock);
        let mut cells: Vec<(ScanUpdateConfig, Vec<ScanUpdateResult>)> =
            configs.iter().map(|c| (c.clone(), Vec::new())).collect();
        for rep in 0..args.repetitions {
            for (cfg, results) in cells.iter_mut() {
                bar.set_message(format!("length {} {}", cfg.length, cfg.mode.name()));
                let (base, dir) = durability.config(ordo::Config::default(), "scan-update")?;
                let table = scan_update::load_with(clock.clone(), cfg, base)?;
                let r = scan_update::run(&table, cfg);
                // The database closes before its directory is removed.
                drop(table);
                drop(dir);
                if common.json {
                    let line = Line {
                        workload: "scan-update",
                        config: cfg,
                        durability: &durability,
                        clock: &description,
                        repetition: rep,
                        result: &r,
                        git_revision: &revision,
                        machine: &machine,
                    };
                    println!("{}", serde_json::to_string(&line)?);
                }
                results.push(r);
                bar.inc(1);
            }
        }
        if !common.json {
            bar.suspend(|| {
                for (cfg, results) in &cells {
                    let keys = Spread::of(
                        &results.iter().map(|r| r.keys_scanned_per_s).collect::<Vec<_>>(),
                    );
                    let upd =
                        Spread::of(&results.iter().map(|r| r.updates_per_s).collect::<Vec<_>>());
                    let scans: u64 = results.iter().map(|r| r.scans).sum();
                    let failed: u64 = results.iter().map(|r| r.scans_failed).sum();
                    let trunc: u64 = results.iter().map(|r| r.truncations).sum();
                    println!(
                        "{:>8} {:>7} {:>9} {:>16.0} {:>14.0} {:>12.1}% {:>12}",
                        description.kind.name(),
                        cfg.length,
                        cfg.mode.name(),
                        keys.median,
                        upd.median,
                        100.0 * failed as f64 / (scans + failed).max(1) as f64,
                        trunc
                    );
                }
            });
        }
    }
    bar.finish_and_clear();
    Ok(())
}
