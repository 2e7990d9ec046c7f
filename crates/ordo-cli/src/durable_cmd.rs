//! `ordo recover DIR` and `ordo inspect DIR`: recover a durable database directory, or look
//! at one without changing it.
//!
//! `recover` does what opening the database does to its files, without opening it
//! (`ordo::durable::recover`, the same scan and replay): it replays the log records with
//! `C < wts <= D` into the heap files, persists C := D, deletes the segments, and prints what it
//! did. `recover --dry-run` and `inspect` run only recovery's scan (`ordo::durable::inspect`),
//! which reads and checks every file and changes nothing: the manifest and its format version,
//! the checkpoint timestamp C, the heap files, every log segment and record, the durable marker
//! D. `--dry-run` reports what recovery would replay or drop; `inspect` lists the segments as
//! well. A bad directory (missing, no manifest, corrupt, open in another process) is one
//! `error:` line naming the file and offset or the reason, and exit code 1; recovery checks
//! everything before its first write, so a bad directory is left as it was.

use std::path::{Path, PathBuf};

use clap::Args;
use ordo::durable::io::RealStorage;
use ordo::durable::{RecoveryReport, inspect as scan, recover as replay};

use crate::error::CliError;

/// The directory argument.
#[derive(Args, Debug)]
pub(crate) struct DirArgs {
    /// The database directory.
    dir: PathBuf,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

fn summary(r: &RecoveryReport) -> serde_json::Value {
    serde_json::json!({
        "regions": r.regions,
        "region_bytes": r.region_bytes,
        "checkpoint_ts": r.checkpoint_ts,
        "marker_ts": r.marker_ts,
        "segments": r.segments,
        "records": r.records,
        "records_to_replay": r.records_replayed,
        "records_beyond_marker": r.records_beyond_marker,
        "parts_dropped": r.parts_dropped,
        "log_bytes": r.log_bytes,
        "torn_tails": r.torn.iter().map(|t| serde_json::json!({
            "path": t.path.display().to_string(), "offset": t.offset, "reason": t.reason,
        })).collect::<Vec<_>>(),
        "transactions_to_replay": r.transactions_replayed,
        "scan_ms": ms(r.duration_ns),
    })
}

fn print_summary(r: &RecoveryReport) {
    println!("regions              {} x {} bytes", r.regions, r.region_bytes);
    println!("checkpoint ts (C)    {}", r.checkpoint_ts);
    println!("durable marker (D)   {}", r.marker_ts);
    println!("segments             {}", r.segments);
    println!("records              {} ({} bytes of log)", r.records, r.log_bytes);
    println!("records to replay    {} (C < wts <= D)", r.records_replayed);
    println!("beyond the marker    {} (dropped: never acknowledged)", r.records_beyond_marker);
    if r.parts_dropped > 0 {
        println!(
            "incomplete parts     {} (dropped: their transaction never committed)",
            r.parts_dropped
        );
    }
    println!("torn tails           {}", r.torn.len());
    for t in &r.torn {
        println!("  {} at offset {}: {}", t.path.display(), t.offset, t.reason);
    }
}

/// The arguments of `ordo recover`.
#[derive(Args, Debug)]
pub(crate) struct RecoverArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// Only report what recovery would do; change nothing.
    #[arg(long)]
    dry_run: bool,
}

/// `ordo recover DIR [--dry-run]`.
pub(crate) fn recover(args: &RecoverArgs) -> Result<(), CliError> {
    let dir = &args.dir;
    if args.dry_run {
        let r = scan(&RealStorage, existing(&dir.dir)?)?;
        if dir.json {
            println!("{}", summary(&r));
        } else {
            print_summary(&r);
            println!("recovery check       ok ({:.1} ms scan, nothing changed)", ms(r.duration_ns));
        }
        return Ok(());
    }
    let r = replay(&RealStorage, existing(&dir.dir)?)?;
    if dir.json {
        let mut v = summary(&r);
        v["dry_run"] = false.into();
        v["records_replayed"] = r.records_replayed.into();
        v["transactions_replayed"] = r.transactions_replayed.into();
        v["images_written"] = r.images_written.into();
        v["segments_deleted"] = r.segments.into();
        v["recovered_ts"] = r.recovered_ts.into();
        v["recover_ms"] = ms(r.duration_ns).into();
        v["write_ms"] = ms(r.write_ns).into();
        v["sync_ms"] = ms(r.sync_ns).into();
        println!("{v}");
        return Ok(());
    }
    println!("regions              {} x {} bytes", r.regions, r.region_bytes);
    println!("checkpoint ts (C)    {} -> {}", r.checkpoint_ts, r.checkpoint_ts.max(r.marker_ts));
    println!(
        "replayed             {} records, {} transactions ({} bytes of log)",
        r.records_replayed, r.transactions_replayed, r.log_bytes
    );
    println!("images written       {} (newest per object)", r.images_written);
    println!(
        "dropped              {} beyond the marker, {} incomplete parts, {} torn tails",
        r.records_beyond_marker,
        r.parts_dropped,
        r.torn.len()
    );
    for t in &r.torn {
        println!("  {} at offset {}: {}", t.path.display(), t.offset, t.reason);
    }
    println!("segments deleted     {}", r.segments);
    println!(
        "recovered            ok in {:.1} ms (scan {:.1}, write {:.1}, sync {:.1}, cleanup {:.1})",
        ms(r.duration_ns),
        ms(r.scan_ns),
        ms(r.write_ns),
        ms(r.sync_ns),
        ms(r.cleanup_ns)
    );
    Ok(())
}

/// [`CliError::NoDirectory`] unless `dir` is a directory (the library would say "no MANIFEST").
fn existing(dir: &Path) -> Result<&Path, CliError> {
    if dir.is_dir() { Ok(dir) } else { Err(CliError::NoDirectory { path: dir.to_path_buf() }) }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// `ordo inspect DIR`.
pub(crate) fn inspect(args: &DirArgs) -> Result<(), CliError> {
    let r = scan(&RealStorage, existing(&args.dir)?)?;
    if args.json {
        let mut v = summary(&r);
        v["segment_files"] = r
            .segment_files
            .iter()
            .map(|s| {
                serde_json::json!({
                    "path": s.path.display().to_string(), "seq": s.seq,
                    "mode": if s.marked { "sync" } else { "process" },
                    "chunks_used": s.chunks_used, "chunks": s.chunks,
                    "records": s.records, "markers": s.markers,
                })
            })
            .collect();
        println!("{v}");
        return Ok(());
    }
    print_summary(&r);
    println!("segment files:");
    println!(
        "  {:>8}  {:>7}  {:>11}  {:>9}  {:>7}  file",
        "seq", "mode", "chunks", "records", "markers"
    );
    for s in &r.segment_files {
        println!(
            "  {:>8}  {:>7}  {:>5}/{:<5}  {:>9}  {:>7}  {}",
            s.seq,
            if s.marked { "sync" } else { "process" },
            s.chunks_used,
            s.chunks,
            s.records,
            s.markers,
            s.path.display()
        );
    }
    Ok(())
}
