//! Recovery's replay: backward filtering keeps the newest image of an object even when the log
//! holds an older image of it *after* the newer one in scan order (another thread's chunk), and
//! the checkpointer replays only what it has not replayed yet.
#![allow(clippy::unwrap_used, unreachable_pub)]

use crate::durable_common;

use durable_common::*;
use ordo::durable::Mode;
use ordo::{Addr, Error};

/// Chunk 0 (the main thread's) holds the allocation and the newest write; chunk 1 (another
/// thread's) holds an older write of the same object, so a scan in file order meets the older
/// image last. Recovery must keep the newer one (largest timestamp), in one batch of records.
#[test]
fn newest_image_wins_over_an_older_one_scanned_later() {
    for mode in [Mode::Process, Mode::Sync] {
        let dir = temp_dir("newest");
        let obj: Addr = {
            let db = open(config(&dir, mode, None)).unwrap();
            let obj = db.run(|tx| tx.alloc(&0u64)).unwrap();
            std::thread::scope(|s| {
                s.spawn(|| db.run(|tx| tx.write(obj, &1u64)).unwrap()).join().unwrap();
            });
            db.run(|tx| tx.write(obj, &2u64)).unwrap();
            obj
        };
        let db = open(config(&dir, mode, None)).unwrap();
        let report = db.recovery_report().unwrap().clone();
        assert_eq!(report.records_replayed, 3, "{mode:?} {report:?}");
        assert_eq!(db.run(|tx| tx.read::<u64>(obj)).unwrap(), 2, "{mode:?}: older image applied");
        drop(db);
        remove_dir_all(&dir);
    }
}

/// Many objects, every other one rewritten, so replay's writes are partly adjacent and partly
/// not (coalescing must not join images across gaps), across the replay threads' ranges.
#[test]
fn replay_of_adjacent_and_separated_images() {
    let dir = temp_dir("adjacent");
    let objs: Vec<Addr> = {
        let db = open(config(&dir, Mode::Process, None)).unwrap();
        let mut objs: Vec<Addr> = Vec::new();
        for batch in 0..6u64 {
            let part: Vec<Addr> = db
                .run(|tx| {
                    (batch * 500..(batch + 1) * 500)
                        .map(|i| tx.alloc(&[i, !i]))
                        .collect::<Result<_, Error>>()
                })
                .unwrap();
            objs.extend(part);
        }
        db.checkpoint().unwrap();
        for (i, a) in objs.iter().enumerate().step_by(2) {
            db.run(|tx| tx.write(*a, &[i as u64 + 1_000_000, 7])).unwrap();
        }
        objs
    };
    let db = open(config(&dir, Mode::Process, None)).unwrap();
    let r = db.recovery_report().unwrap().clone();
    assert_eq!(r.records_replayed, 1500, "{r:?}");
    let got: Vec<[u64; 2]> = db
        .run(|tx| objs.iter().map(|a| tx.read::<[u64; 2]>(*a)).collect::<Result<_, Error>>())
        .unwrap();
    for (i, v) in got.iter().enumerate() {
        let want = if i % 2 == 0 { [i as u64 + 1_000_000, 7] } else { [i as u64, !(i as u64)] };
        assert_eq!(*v, want, "object {i}");
    }
    drop(db);
    remove_dir_all(&dir);
}

/// A second checkpoint reads only the records the first did not replay: far fewer bytes than
/// the log holds, and the result is still complete after a reopen.
#[test]
fn checkpoint_reads_only_what_it_has_not_replayed() {
    let dir = temp_dir("incremental");
    let db = open(config(&dir, Mode::Process, None)).unwrap();
    let objs: Vec<Addr> =
        db.run(|tx| (0..40u64).map(|i| tx.alloc(&i)).collect::<Result<_, Error>>()).unwrap();
    let bump = |rounds: u64| {
        for _ in 0..rounds {
            for a in &objs {
                db.run(|tx| {
                    let v: u64 = tx.read(*a)?;
                    tx.write(*a, &(v + 1))
                })
                .unwrap();
            }
        }
    };
    // About 40 * 60 records of ~56 bytes: 134 KB in a few 64 KiB chunks of one segment.
    bump(60);
    let first = db.checkpoint().unwrap().unwrap();
    assert!(first.bytes_read > 100_000 && first.records >= 2400, "{first:?}");
    bump(1);
    let second = db.checkpoint().unwrap().unwrap();
    assert_eq!(second.records, 40, "{second:?}");
    // The 40 new records (~2.3 KB) and nothing the first checkpoint replayed.
    assert!(second.bytes_read < 10_000, "re-read old records: {second:?} after {first:?}");
    drop(db);
    let db = open(config(&dir, Mode::Process, None)).unwrap();
    let values: Vec<u64> =
        db.run(|tx| objs.iter().map(|a| tx.read::<u64>(*a)).collect::<Result<_, Error>>()).unwrap();
    for (i, v) in values.iter().enumerate() {
        assert_eq!(*v, i as u64 + 61, "object {i}");
    }
    drop(db);
    remove_dir_all(&dir);
}

/// A checkpoint that fails writing the heap files must not move the replay offsets: the next
/// checkpoint replays those records again before it deletes their segments.
#[test]
fn failed_checkpoint_keeps_its_records_for_the_next_one() {
    use ordo::durable::io::{FaultOp, FaultRule};
    use std::sync::Arc;
    let dir = temp_dir("failed-ckpt");
    let fs = fault_storage(&dir);
    let db = open(config(&dir, Mode::Process, Some(Arc::new(fs.clone())))).unwrap();
    let objs: Vec<Addr> =
        db.run(|tx| (0..40u64).map(|i| tx.alloc(&i)).collect::<Result<_, Error>>()).unwrap();
    // 6000 records: more than one 4-chunk segment of 64 KiB chunks.
    for _ in 0..150 {
        for a in &objs {
            db.run(|tx| {
                let v: u64 = tx.read(*a)?;
                tx.write(*a, &(v + 1))
            })
            .unwrap();
        }
    }
    fs.inject(FaultRule {
        op: FaultOp::Write,
        name_contains: "region".into(),
        skip: 0,
        times: u32::MAX,
        errno: libc::EIO,
    });
    assert!(db.checkpoint().is_err(), "the heap write fault did not fail the checkpoint");
    fs.clear_rules();
    let r = db.checkpoint().unwrap().unwrap();
    assert!(r.segments_deleted >= 1, "{r:?}");
    assert!(r.records >= 6000, "the second checkpoint skipped records: {r:?}");
    drop(db);
    let db = open(config(&dir, Mode::Process, None)).unwrap();
    let values: Vec<u64> =
        db.run(|tx| objs.iter().map(|a| tx.read::<u64>(*a)).collect::<Result<_, Error>>()).unwrap();
    for (i, v) in values.iter().enumerate() {
        assert_eq!(*v, i as u64 + 150, "object {i}");
    }
    drop(db);
    remove_dir_all(&dir);
}
