//! `ordo bench recovery`: recovery speed of one large log. Generates (once) a process-mode
//! database whose log holds about `--log-mb` MB of records with no checkpoint, so all of it must
//! be replayed, then per repetition copies it to a work directory and times the read-only scan
//! and the full open (scan, replay, heap sync, checkpoint, slab rebuild). The generated
//! directory is kept, so two builds can be compared on the same log (interleave the runs).

use std::path::PathBuf;

use clap::Args;
use ordo::durable::Mode;
use ordo_bench::durable as bench;
use ordo_clock::LogicalClock;

use crate::error::CliError;

/// `ordo bench recovery` flags.
#[derive(Args, Debug)]
pub(crate) struct RecoveryArgs {
    /// The generated database (created when it holds none, reused otherwise; on the device to
    /// measure).
    #[arg(long, default_value = "/tmp/ordo-recovery-log")]
    log_dir: PathBuf,
    /// MB of log to generate.
    #[arg(long, default_value_t = 1024)]
    log_mb: u64,
    /// Objects in the database.
    #[arg(long, default_value_t = 200_000)]
    objects: usize,
    /// Bytes per object.
    #[arg(long, default_value_t = 100)]
    object_bytes: usize,
    /// Objects written per transaction.
    #[arg(long, default_value_t = 4)]
    writes: usize,
    /// Threads generating the log.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Measurements.
    #[arg(long, default_value_t = 3)]
    repetitions: usize,
    /// Print JSON lines.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run_recovery(args: &RecoveryArgs) -> Result<(), CliError> {
    if args.repetitions == 0 {
        return Err(CliError::Usage("--repetitions must be at least 1".into()));
    }
    if !args.log_dir.join(ordo::durable::format::MANIFEST).exists() {
        let g = bench::generate_log(
            &args.log_dir,
            args.log_mb * 1_000_000,
            args.objects,
            args.object_bytes,
            args.writes,
            args.threads,
        )
        .map_err(CliError::Bench)?;
        println!(
            "generated {} transactions, {:.1} MB of log in {:.1} s into {}",
            g.transactions,
            g.log_bytes as f64 / 1e6,
            g.seconds,
            args.log_dir.display()
        );
    }
    let mut work = args.log_dir.clone().into_os_string();
    work.push("-work");
    let work = PathBuf::from(work);
    for rep in 0..args.repetitions {
        bench::copy_dir(&args.log_dir, &work).map_err(CliError::Bench)?;
        let r = bench::recovery_speed(&work, Mode::Process, LogicalClock::starting_at)
            .map_err(CliError::Bench)?;
        if args.json {
            println!(
                "{}",
                serde_json::json!({
                    "workload": "recovery", "repetition": rep, "result": &r,
                    "git_revision": ordo_bench::report::git_revision(),
                })
            );
        } else {
            println!(
                "rep {rep}: {} records, {:.1} MB of log: scan {:.3} s = {:.0} MB/s; open {:.3} s = {:.0} MB/s, {:.0} records/s; CPU s: scan {:.2} open {:.2}; open phases ms: scan {:.0} filter {:.0} write {:.0} sync {:.0} cleanup {:.0}",
                r.records,
                r.log_bytes as f64 / 1e6,
                r.scan_s,
                r.scan_mb_per_s,
                r.recover_s,
                r.recover_mb_per_s,
                r.records_per_s,
                r.scan_cpu_s.unwrap_or(f64::NAN),
                r.recover_cpu_s.unwrap_or(f64::NAN),
                r.phases_ns[0] as f64 / 1e6,
                r.phases_ns[1] as f64 / 1e6,
                r.phases_ns[2] as f64 / 1e6,
                r.phases_ns[3] as f64 / 1e6,
                r.phases_ns[4] as f64 / 1e6,
            );
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}
