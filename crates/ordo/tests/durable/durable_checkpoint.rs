//! The checkpointer: after a checkpoint, more commits and a power loss, recovery is correct,
//! replays only what the checkpoint did not cover, and the segments wholly below the checkpoint
//! were deleted. A bounded log makes commits wait for the checkpointer (counted).
#![allow(clippy::unwrap_used, unreachable_pub)]

use crate::durable_common;

use std::sync::Arc;

use durable_common::*;
use ordo::durable::Mode;
use ordo::{Addr, Error};

fn bump_all(db: &Db, objs: &[Addr], rounds: u64) {
    for _ in 0..rounds {
        for a in objs {
            db.run(|tx| {
                let v: u64 = tx.read(*a)?;
                tx.write(*a, &(v + 1))
            })
            .unwrap();
        }
    }
}

#[test]
fn checkpoint_then_commits_then_power_loss_recovers_everything() {
    // Power loss over real files too: the reopened heap maps what the undo left in them.
    let runs = [Backend::Mem, Backend::Os].map(|b| [(b, Mode::Sync), (b, Mode::Process)]);
    for (backend, mode) in runs.into_iter().flatten() {
        let dir = temp_dir_on(backend, "ckpt");
        let fs = fault_storage(&dir);
        let db = open(config(&dir, mode, Some(Arc::new(fs.clone())))).unwrap();
        let objs: Vec<Addr> = db
            .run(|tx| (0..40).map(|i| tx.alloc(&(i as u64))).collect::<Result<_, Error>>())
            .unwrap();
        bump_all(&db, &objs, 150); // 6000 records: several 64 KiB chunks, more than one segment
        let segs_before = segments(&dir).len();
        assert!(segs_before >= 2, "{segs_before} segments");
        let r = db.checkpoint().unwrap().unwrap();
        assert!(r.checkpoint_ts > 0 && r.images >= 40, "{r:?}");
        assert!(r.segments_deleted >= 1, "nothing deleted: {r:?}");
        assert_eq!(segments(&dir).len(), segs_before - r.segments_deleted);
        assert!(r.images < r.records, "backward filtering kept {} of {}", r.images, r.records);
        bump_all(&db, &objs, 5);
        let stats = db.durable_stats().unwrap();
        fs.freeze();
        drop(db);
        fs.power_loss().unwrap();
        let db = open(config(&dir, mode, None)).unwrap();
        let report = db.recovery_report().unwrap().clone();
        eprintln!("{backend:?} {mode:?} {report:?} {stats:?}");
        let values: Vec<u64> = db
            .run(|tx| objs.iter().map(|a| tx.read::<u64>(*a)).collect::<Result<_, Error>>())
            .unwrap();
        match mode {
            Mode::Sync => {
                // Everything acknowledged survives; only the post-checkpoint records replay.
                for (i, v) in values.iter().enumerate() {
                    assert_eq!(*v, i as u64 + 155, "{backend:?} object {i}");
                }
                assert_eq!(report.checkpoint_ts, stats.checkpoint_ts);
                assert!(report.records_replayed <= 5 * 40 + 1, "{report:?}");
            }
            Mode::Process => {
                // The checkpoint synced the heap files: its state survives the power loss; the
                // unflushed log after it does not.
                for (i, v) in values.iter().enumerate() {
                    assert_eq!(*v, i as u64 + 150, "{backend:?} object {i}");
                }
            }
        }
        remove_dir_all(&dir);
    }
}

/// Without a checkpointer a full log cannot drain: each commit that needs a new segment waits
/// `log_full_wait_ms`, then goes on (the log grows past its bound rather than deadlock).
#[test]
fn a_full_log_waits_at_most_the_configured_bound() {
    let dir = temp_dir("full-wait");
    let mut cfg = config(&dir, Mode::Process, None);
    let d = cfg.durability.as_mut().unwrap();
    d.checkpoint_interval_ms = 0;
    // One 16 KiB chunk per segment: the 4,000 commits below fill about 16 segments.
    d.chunk_bytes = 16 << 10;
    d.chunks_per_segment = 1;
    d.log_segments_max = 2;
    d.log_full_wait_ms = 30;
    let db = open(cfg).unwrap();
    let objs: Vec<Addr> =
        db.run(|tx| (0..40).map(|i| tx.alloc(&(i as u64))).collect::<Result<_, Error>>()).unwrap();
    let started = std::time::Instant::now();
    bump_all(&db, &objs, 100);
    let elapsed = started.elapsed();
    let s = db.durable_stats().unwrap();
    assert!(s.log_full_waits >= 3, "the log filled too rarely to tell: {s:?}");
    // Each wait lasts its whole bound (nothing deletes a segment): 30 ms, not the default 1 s.
    let per_wait = elapsed / u32::try_from(s.log_full_waits).unwrap();
    assert!(per_wait < std::time::Duration::from_millis(300), "{per_wait:?} per wait: {s:?}");
    assert!(per_wait >= std::time::Duration::from_millis(25), "{per_wait:?} per wait: {s:?}");
    assert!(segments(&dir).len() > 2, "the log did not grow past its bound");
    drop(db);
    let db = open(config(&dir, Mode::Process, None)).unwrap();
    let values: Vec<u64> =
        db.run(|tx| objs.iter().map(|a| tx.read::<u64>(*a)).collect::<Result<_, Error>>()).unwrap();
    for (i, v) in values.iter().enumerate() {
        assert_eq!(*v, i as u64 + 100, "object {i}");
    }
    remove_dir_all(&dir);
}

#[test]
fn bounded_log_waits_for_the_background_checkpointer() {
    let dir = temp_dir("bounded");
    let mut cfg = config(&dir, Mode::Process, None);
    let d = cfg.durability.as_mut().unwrap();
    d.checkpoint_interval_ms = 30;
    d.log_segments_max = 2;
    let db = open(cfg).unwrap();
    let objs: Vec<Addr> =
        db.run(|tx| (0..40).map(|i| tx.alloc(&(i as u64))).collect::<Result<_, Error>>()).unwrap();
    bump_all(&db, &objs, 250);
    // The checkpoint that released a waiting commit deleted its segments before it counted
    // itself: on a fast storage the commits can finish in between. Wait for the count (bounded).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut s = db.durable_stats().unwrap();
    while s.checkpoints == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
        s = db.durable_stats().unwrap();
    }
    assert!(s.checkpoints > 0 && s.checkpoint_errors == 0, "{s:?}");
    assert!(s.log_full_waits > 0, "the log never filled: {s:?}");
    assert!(segments(&dir).len() <= 3, "{} segments", segments(&dir).len());
    drop(db);
    let db = open(config(&dir, Mode::Process, None)).unwrap();
    let values: Vec<u64> =
        db.run(|tx| objs.iter().map(|a| tx.read::<u64>(*a)).collect::<Result<_, Error>>()).unwrap();
    for (i, v) in values.iter().enumerate() {
        assert_eq!(*v, i as u64 + 250, "object {i}");
    }
    remove_dir_all(&dir);
}
