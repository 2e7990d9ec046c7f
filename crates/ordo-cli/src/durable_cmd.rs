//! `ordo recover DIR` and `ordo inspect DIR`: read-only views of a durable database directory.
//!
//! Both run recovery's scan (`ordo::durable::inspect`), which reads and checks every file and
//! changes nothing: the manifest and its format version, the checkpoint timestamp C, the heap
//! files, every log segment and record, the durable marker D. `recover` reports what opening
//! the database would replay or drop; `inspect` lists the segments as well. A bad directory is
//! one `error:` line naming the file and offset, and exit code 1.

use std::path::PathBuf;

use clap::Args;
use ordo::durable::io::RealStorage;
use ordo::durable::{RecoveryReport, inspect as scan};

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
        "scan_ms": r.duration_ns as f64 / 1e6,
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

/// `ordo recover DIR`.
pub(crate) fn recover(args: &DirArgs) -> Result<(), CliError> {
    let r = scan(&RealStorage, &args.dir)?;
    if args.json {
        println!("{}", summary(&r));
    } else {
        print_summary(&r);
        println!("recovery check       ok ({:.1} ms scan)", r.duration_ns as f64 / 1e6);
    }
    Ok(())
}

/// `ordo inspect DIR`.
pub(crate) fn inspect(args: &DirArgs) -> Result<(), CliError> {
    let r = scan(&RealStorage, &args.dir)?;
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
