//! Durable databases: reopen round trips, allocation state rebuilt from headers, per-mode
//! behaviour, and bad directories giving typed errors without changing anything.
#![allow(clippy::unwrap_used, unreachable_pub)]

use crate::durable_common;

use durable_common::*;
use ordo::durable::format::FORMAT_VERSION;
use ordo::durable::io::{FaultOp, FaultRule, FaultStorage};
use ordo::durable::{DurableError, Mode};
use ordo::{Addr, Error};
use std::sync::Arc;

fn populate(db: &Db, n: u64) -> Vec<Addr> {
    let addrs: Vec<Addr> = (0..n).map(|i| db.run(|tx| tx.alloc(&(i * 10))).unwrap()).collect();
    for (i, a) in addrs.iter().enumerate() {
        if i % 3 == 0 {
            db.run(|tx| {
                let v: u64 = tx.read(*a)?;
                tx.write(*a, &(v + 1))
            })
            .unwrap();
        }
    }
    for a in addrs.iter().skip(1).step_by(5) {
        db.run(|tx| tx.free(*a)).unwrap();
    }
    addrs
}

fn expected(i: usize) -> Option<u64> {
    if i % 5 == 1 {
        return None;
    }
    Some(i as u64 * 10 + u64::from(i.is_multiple_of(3)))
}

fn check(db: &Db, addrs: &[Addr]) {
    for (i, a) in addrs.iter().enumerate() {
        match expected(i) {
            Some(v) => assert_eq!(db.run(|tx| tx.read::<u64>(*a)).unwrap(), v, "object {i}"),
            None => {
                let r = db.run(|tx| tx.read::<u64>(*a));
                assert!(matches!(r, Err(Error::NotAllocated { .. })), "object {i}: {r:?}");
            }
        }
    }
}

/// On both backends: in memory for the logic, on real files for the OS path (the heap files'
/// `MAP_PRIVATE` mappings, the segments' read-only ones).
#[test]
fn reopen_replays_both_modes_and_rebuilds_allocation() {
    let runs = [Backend::Mem, Backend::Os].map(|b| [(b, Mode::Process), (b, Mode::Sync)]);
    for (backend, mode) in runs.into_iter().flatten() {
        let dir = temp_dir_on(backend, "reopen");
        let addrs = {
            let db = open(config(&dir, mode, None)).unwrap();
            let addrs = populate(&db, 300);
            check(&db, &addrs);
            addrs
        };
        let db = open(config(&dir, mode, None)).unwrap();
        let report = db.recovery_report().unwrap().clone();
        assert!(report.records_replayed >= 300, "{report:?}");
        assert!(report.torn.is_empty());
        check(&db, &addrs);
        // New allocations never land on live objects; freed slots may be reused.
        let live: std::collections::HashSet<Addr> = addrs
            .iter()
            .enumerate()
            .filter(|(i, _)| expected(*i).is_some())
            .map(|(_, a)| *a)
            .collect();
        for k in 0..200u64 {
            let a = db.run(|tx| tx.alloc(&(7_000 + k))).unwrap();
            assert!(!live.contains(&a), "allocation {a} reused a live object");
        }
        for (i, a) in addrs.iter().enumerate() {
            if let Some(v) = expected(i) {
                assert_eq!(db.run(|tx| tx.read::<u64>(*a)).unwrap(), v, "object {i}");
            }
        }
        drop(db);
        let db = open(config(&dir, mode, None)).unwrap();
        for (i, a) in addrs.iter().enumerate() {
            if let Some(v) = expected(i) {
                assert_eq!(db.run(|tx| tx.read::<u64>(*a)).unwrap(), v, "object {i}");
            }
        }
        drop(db);
        // Another open without commits in between: the heap files alone (logs folded) hold
        // everything.
        let db = open(config(&dir, mode, None)).unwrap();
        drop(db);
        assert!(segments(&dir).is_empty());
        let db = open(config(&dir, mode, None)).unwrap();
        assert_eq!(db.recovery_report().unwrap().records, 0);
        for (i, a) in addrs.iter().enumerate() {
            if let Some(v) = expected(i) {
                assert_eq!(db.run(|tx| tx.read::<u64>(*a)).unwrap(), v, "object {i}");
            }
        }
        remove_dir_all(&dir);
    }
}

#[test]
fn sync_mode_groups_and_counts_flushes() {
    let dir = temp_dir("sync-stats");
    let db = open(config(&dir, Mode::Sync, None)).unwrap();
    let a = db.run(|tx| tx.alloc(&0u64)).unwrap();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let db = db.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    db.run(|tx| {
                        let v: u64 = tx.read(a)?;
                        tx.write(a, &(v + 1))
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = db.durable_stats().unwrap();
    assert!(s.marker_ts > 0);
    // Per round at most one flush per segment with other threads' records, then the marker's.
    assert!(s.fsyncs >= 1 && s.fsyncs <= (s.segments as u64 + 1) * s.rounds, "{s:?}");
    drop(db);
    let db = open(config(&dir, Mode::Sync, None)).unwrap();
    assert_eq!(db.run(|tx| tx.read::<u64>(a)).unwrap(), 200);
    remove_dir_all(&dir);
}

/// Writes a database with several segments and returns its directory (logs not yet folded).
fn crashed_db(mode: Mode) -> (std::path::PathBuf, Vec<Addr>) {
    let dir = temp_dir("bad");
    let db = open(config(&dir, mode, None)).unwrap();
    let addrs = populate(&db, 100);
    drop(db);
    assert!(!segments(&dir).is_empty());
    (dir, addrs)
}

fn assert_open_fails_unchanged(
    dir: &std::path::Path,
    mode: Mode,
    what: impl Fn(&DurableError) -> bool,
) {
    let before = snapshot(dir);
    match open(config(dir, mode, None)) {
        Err(Error::Durable(e)) => assert!(what(&e), "unexpected error {e}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("open succeeded"),
    }
    assert_eq!(before, snapshot(dir), "a failed open changed the directory");
}

#[test]
fn flipped_byte_below_marker_is_an_error_naming_file_and_offset() {
    let (dir, _) = crashed_db(Mode::Sync);
    let seg = &segments(&dir)[0];
    let mut bytes = read_file(seg);
    // Flip a byte inside the first record of the first chunk (its payload).
    bytes[4096 + 40] ^= 0x01;
    write_file(seg, &bytes);
    assert_open_fails_unchanged(
        &dir,
        Mode::Sync,
        |e| matches!(e, DurableError::BadFile { path, offset: 4096, .. } if path == seg),
    );
    remove_dir_all(&dir);
}

#[test]
fn truncated_segment_is_an_error() {
    let (dir, _) = crashed_db(Mode::Process);
    let seg = &segments(&dir)[0];
    set_file_len(seg, 10_000);
    assert_open_fails_unchanged(
        &dir,
        Mode::Process,
        |e| matches!(e, DurableError::BadFile { path, offset: 10_000, .. } if path == seg),
    );
    remove_dir_all(&dir);
}

#[test]
fn missing_heap_file_is_an_error() {
    let (dir, _) = crashed_db(Mode::Process);
    remove_file(&dir.join("region-00000.heap"));
    assert_open_fails_unchanged(&dir, Mode::Process, |e| {
        matches!(e, DurableError::HeapFile { .. })
    });
    remove_dir_all(&dir);
}

#[test]
fn incompatible_format_version_is_a_typed_error() {
    let (dir, _) = crashed_db(Mode::Process);
    let path = dir.join("MANIFEST");
    let mut b = read_file(&path);
    b[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    write_file(&path, &b);
    assert_open_fails_unchanged(
        &dir,
        Mode::Process,
        |e| matches!(e, DurableError::FormatVersion { found, .. } if *found == FORMAT_VERSION + 1),
    );
    remove_dir_all(&dir);
}

#[test]
fn torn_tail_beyond_marker_is_dropped_and_reported() {
    let (dir, addrs) = crashed_db(Mode::Process);
    // Append garbage after the last record of chunk 0: a torn write.
    let seg = &segments(&dir)[0];
    let mut bytes = read_file(seg);
    let chunk = &bytes[4096..4096 + (64 << 10)];
    let mut pos = 0;
    while let Ok(r) = ordo::durable::format::decode_record(&chunk[pos..]) {
        pos += r.len_bytes;
    }
    assert!(pos > 0);
    bytes[4096 + pos..4096 + pos + 16].copy_from_slice(&[0xAB; 16]);
    write_file(seg, &bytes);
    let db = open(config(&dir, Mode::Process, None)).unwrap();
    let report = db.recovery_report().unwrap();
    assert_eq!(report.torn.len(), 1, "{report:?}");
    assert_eq!(report.torn[0].offset, 4096 + pos as u64);
    check(&db, &addrs);
    remove_dir_all(&dir);
}

/// Every later write to a log segment file (creating one included) fails with `ENOSPC`.
fn fail_segment_writes(fs: &FaultStorage) {
    fs.inject(FaultRule {
        op: FaultOp::Write,
        name_contains: ".seg".into(),
        skip: 0,
        times: u32::MAX,
        errno: libc::ENOSPC,
    });
}

/// The commit failed with a typed error naming the full disk and a segment file.
#[track_caller]
fn assert_no_space<T: std::fmt::Debug>(r: Result<T, Error>) {
    match r {
        Err(Error::Durable(e)) => {
            let s = e.to_string();
            assert!(s.contains("No space left") && s.contains(".seg"), "{s}");
        }
        other => panic!("expected ENOSPC, got {other:?}"),
    }
}

/// A full disk shows when a new log segment is preallocated (writes into a preallocated
/// segment overwrite allocated blocks). That happens while the commit holds its locks and
/// before it installs, in both modes: the commit fails with a typed error naming the file,
/// nothing changes, and the database goes on once space is back.
#[test]
fn a_full_disk_while_preallocating_a_segment_aborts_the_commit_and_loses_nothing() {
    for mode in [Mode::Sync, Mode::Process] {
        let dir = temp_dir("enospc-create");
        let fs = fault_storage(&dir);
        let make = |storage: Option<Arc<dyn ordo::durable::io::Storage>>| {
            let mut c = config(&dir, mode, storage);
            let d = c.durability.as_mut().unwrap();
            d.chunk_bytes = 4096;
            d.chunks_per_segment = 1;
            c
        };
        let a = {
            let db = open(config(&dir, mode, None)).unwrap();
            db.run(|tx| tx.alloc_bytes(&[5u8; 3000])).unwrap()
        };
        let db = open(make(Some(Arc::new(fs.clone())))).unwrap();
        // The first 3 KB record takes the first segment's only chunk; the second needs a new
        // segment, whose preallocation fails.
        db.run(|tx| tx.write_bytes(a, &[6u8; 3000])).unwrap();
        fail_segment_writes(&fs);
        assert_no_space(db.run(|tx| tx.write_bytes(a, &[7u8; 3000])));
        // Aborted before installing: the object kept its value.
        assert_eq!(db.run(|tx| tx.read_bytes(a)).unwrap()[0], 6, "{mode:?}");
        // Space is back: the database goes on.
        fs.clear_rules();
        db.run(|tx| tx.write_bytes(a, &[8u8; 3000])).unwrap();
        drop(db);
        let db = open(make(None)).unwrap();
        assert_eq!(db.run(|tx| tx.read_bytes(a)).unwrap()[0], 8, "{mode:?}");
        drop(db);
        remove_dir_all(&dir);
    }
}

/// A write error inside an existing segment (an I/O error, or `ENOSPC` on a copy-on-write file
/// system) fails a sync-mode round after its commits installed: the error names the file, the
/// log is poisoned (no later durable commit succeeds, so nothing depending on the lost round
/// is acknowledged), and reopening recovers exactly what was acknowledged.
#[test]
fn a_failed_log_write_poisons_the_log_and_loses_nothing_acknowledged() {
    let dir = temp_dir("enospc-write");
    let fs = fault_storage(&dir);
    let db = open(config(&dir, Mode::Sync, Some(Arc::new(fs.clone())))).unwrap();
    let a = db.run(|tx| tx.alloc(&5u64)).unwrap();
    fail_segment_writes(&fs);
    assert_no_space(db.run(|tx| {
        let v: u64 = tx.read(a)?;
        tx.write(a, &(v + 1))
    }));
    fs.clear_rules();
    // Poisoned: reading the undurable value, or committing anything, fails.
    match db.run(|tx| tx.write(a, &9u64)) {
        Err(Error::Durable(e)) => assert!(matches!(*e, DurableError::Poisoned), "{e}"),
        other => panic!("expected a poisoned log, got {other:?}"),
    }
    drop(db);
    let db = open(config(&dir, Mode::Sync, None)).unwrap();
    assert_eq!(db.run(|tx| tx.read::<u64>(a)).unwrap(), 5);
    drop(db);
    remove_dir_all(&dir);
}

#[test]
fn clock_behind_the_recovered_state_is_refused() {
    let (dir, _) = crashed_db(Mode::Process);
    let cfg = config(&dir, Mode::Process, None);
    match ordo::Ordo::with_clock(cfg, ordo_clock::LogicalClock::new()) {
        Err(Error::Durable(e)) => assert!(matches!(*e, DurableError::ClockBehind { .. })),
        other => panic!("expected ClockBehind, got {:?}", other.err()),
    }
    remove_dir_all(&dir);
}

/// On real files (`flock` on the directory) and in memory (the storage's lock table).
#[test]
fn a_directory_is_opened_by_one_database_at_a_time() {
    for backend in [Backend::Os, Backend::Mem] {
        one_database_at_a_time(backend);
    }
}

fn one_database_at_a_time(backend: Backend) {
    let dir = temp_dir_on(backend, "lock");
    let db = open(config(&dir, Mode::Process, None)).unwrap();
    let a = db.run(|tx| tx.alloc(&7u64)).unwrap();
    // A second writer would append to the same segments and replay over the same heap files.
    let before = snapshot(&dir);
    match open(config(&dir, Mode::Process, None)) {
        Err(Error::Durable(e)) => assert!(matches!(*e, DurableError::Locked { .. }), "{e}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a second database opened the directory"),
    }
    assert_eq!(before, snapshot(&dir), "the refused open changed the directory");
    // A reader would map segments that are being written.
    let r = ordo::durable::inspect(&*storage_of(&dir), &dir);
    assert!(matches!(r, Err(DurableError::Locked { .. })), "{r:?}");
    drop(db);
    // Released with the database: readers and the next writer get in.
    ordo::durable::inspect(&*storage_of(&dir), &dir).unwrap();
    let db = open(config(&dir, Mode::Process, None)).unwrap();
    assert_eq!(db.run(|tx| tx.read::<u64>(a)).unwrap(), 7, "{backend:?}");
    drop(db);
    remove_dir_all(&dir);
}

/// The preallocation thread keeps one segment ready beyond the one in use: the next chunk
/// claim takes it instead of creating (and flushing) a segment while committers wait. An
/// unused spare is removed when the database closes, and one left by a crash holds no records
/// and is deleted by recovery.
#[test]
fn a_spare_segment_is_created_ahead_and_an_unused_one_is_harmless() {
    let dir = temp_dir("spare");
    let fs = fault_storage(&dir);
    let make = |storage: Option<Arc<dyn ordo::durable::io::Storage>>| {
        let mut c = config(&dir, Mode::Sync, storage);
        let d = c.durability.as_mut().unwrap();
        d.chunk_bytes = 4096;
        d.chunks_per_segment = 1;
        d.preallocate_segments = true;
        c
    };
    let wait_for = |n: usize| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while segments(&dir).len() < n && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        segments(&dir)
    };
    let db = open(make(None)).unwrap();
    let a = db.run(|tx| tx.alloc_bytes(&[1u8; 3000])).unwrap();
    // The first segment is created by the commit, the spare right after by the thread.
    let segs = wait_for(2);
    assert_eq!(segs.len(), 2, "no spare segment was created: {segs:?}");
    // The next record needs a new chunk: it takes the spare, and another spare follows.
    db.run(|tx| tx.write_bytes(a, &[2u8; 3000])).unwrap();
    let segs = wait_for(3);
    assert_eq!(segs.len(), 3, "{segs:?}");
    drop(db);
    assert_eq!(segments(&dir).len(), 2, "the unused spare was not removed at close");
    // A crash leaves the spare behind (the storage seam does not lock the directory, so the
    // leaked database does not hold it): recovery deletes it with the rest.
    let db = open(make(Some(Arc::new(fs.clone())))).unwrap();
    db.run(|tx| tx.write_bytes(a, &[3u8; 3000])).unwrap();
    let segs = wait_for(2);
    assert_eq!(segs.len(), 2, "{segs:?}");
    std::mem::forget(db);
    let db = open(make(None)).unwrap();
    assert_eq!(db.run(|tx| tx.read_bytes(a)).unwrap()[0], 3);
    drop(db);
    remove_dir_all(&dir);
}
