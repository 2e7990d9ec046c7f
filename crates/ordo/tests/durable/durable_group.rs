//! The one-write, one-flush group commit: a round writes the staged records and its marker
//! *before* flushing, and a round can span chunks (and segments), so the marker may reach the
//! disk while records it covers do not. Recovery must then distrust the marker: its frontier
//! names the other chunk, whose valid prefix falls short. Both tests script that crash
//! deterministically — across two segments (the round's flush of the other segment fails),
//! and across two chunks of one segment (the device wrote the marker's page, not the other) —
//! and fail with the frontier check removed.
#![allow(clippy::unwrap_used, unreachable_pub)]

use crate::durable_common;

use std::path::Path;
use std::sync::Arc;

use durable_common::*;
use ordo::durable::Mode;
use ordo::durable::format::SEGMENT_HEADER_BYTES;
use ordo::durable::io::{FaultOp, FaultRule, Storage};
use ordo::{Addr, Config, Error, Options};

/// 4 KiB chunks, `chunks_per_segment` of them per segment.
fn small_chunks(dir: &Path, storage: Option<Arc<dyn Storage>>, chunks_per_segment: u32) -> Config {
    let mut c = config(dir, Mode::Sync, storage);
    let d = c.durability.as_mut().unwrap();
    d.chunks_per_segment = chunks_per_segment;
    d.chunk_bytes = 4096;
    c
}

/// Allocates a 4000-byte object `a` and a counter `b` (with the default chunk size: the
/// allocation record is larger than a small chunk).
fn two_objects(dir: &Path) -> (Addr, Addr) {
    let db = open(config(dir, Mode::Sync, None)).unwrap();
    db.run(|tx| Ok::<_, Error>((tx.alloc_bytes(&[0u8; 4000])?, tx.alloc(&0u64)?))).unwrap()
}

/// One round covering two records: X writes a = [1; 4000] without waiting (its record, about
/// 4056 bytes, fills the stream's chunk), then L writes b = a[0] + 10 and waits: L's record
/// and the round's marker go to the next chunk. `before_l` runs between the two (to inject a
/// fault); returns L's commit result.
fn round_across_chunks(
    db: &Db,
    a: Addr,
    b: Addr,
    before_l: impl FnOnce(),
) -> Result<(), ordo::Error> {
    let no_wait = Options { wait_durable: false, ..Options::default() };
    db.run_with(no_wait, |tx| tx.write_bytes(a, &[1u8; 4000])).unwrap();
    before_l();
    db.run(|tx| {
        let v = tx.read_bytes(a)?[0];
        tx.write(b, &(u64::from(v) + 10))
    })
}

/// Either the round is lost (a = 0, b = 0: the acknowledged state) or both records survive;
/// b = 11 with a = 0 would be L's record replayed without the X record it read.
fn check_recovered(dir: &Path, cfg: Config, a: Addr, b: Addr) {
    let db = open(cfg).unwrap();
    let (va, vb) = db.run(|tx| Ok::<_, Error>((tx.read_bytes(a)?[0], tx.read::<u64>(b)?))).unwrap();
    drop(db);
    remove_dir_all(dir);
    assert!(
        (va, vb) == (0, 0) || (va, vb) == (1, 11),
        "recovered a[0] = {va}, b = {vb}: a marker was trusted without the records it covers"
    );
}

#[test]
fn marker_flushed_before_the_records_of_another_segment_is_not_trusted() {
    let dir = temp_dir("group-segments");
    let (a, b) = two_objects(&dir);
    let fs = fault_storage(&dir);
    // One chunk per segment: the round writes two files, and a crash can fall between their
    // flushes.
    let db = open(small_chunks(&dir, Some(Arc::new(fs.clone())), 1)).unwrap();
    let mut first = String::new();
    let r = round_across_chunks(&db, a, b, || {
        let segs = segments(&dir);
        assert_eq!(segs.len(), 1, "X's record claimed the stream's first segment: {segs:?}");
        first = segs[0].file_name().unwrap().to_string_lossy().into_owned();
        // The flush of X's segment fails; L's segment (its record and the marker) is
        // written, whether or not its flush ran.
        fs.inject(FaultRule {
            op: FaultOp::Sync,
            name_contains: first.clone(),
            skip: 0,
            times: u32::MAX,
            errno: libc::EIO,
        });
    });
    assert!(matches!(r, Err(Error::Durable(_))), "the failed flush was not reported: {r:?}");
    assert_eq!(segments(&dir).len(), 2, "L's record and the marker opened a second segment");
    fs.freeze();
    drop(db);
    fs.power_loss_keeping_files(|p| !p.to_string_lossy().contains(&first)).unwrap();
    check_recovered(&dir, small_chunks(&dir, None, 1), a, b);
}

#[test]
fn marker_written_before_the_records_of_another_chunk_is_not_trusted() {
    let dir = temp_dir("group-chunks");
    let (a, b) = two_objects(&dir);
    let fs = fault_storage(&dir);
    // Two chunks per segment: the round writes both chunks of one file, flushed once.
    let db = open(small_chunks(&dir, Some(Arc::new(fs.clone())), 2)).unwrap();
    let r = round_across_chunks(&db, a, b, || {
        // The round's flush fails: nothing of it is synced.
        fs.inject(FaultRule {
            op: FaultOp::Sync,
            name_contains: ".seg".into(),
            skip: 0,
            times: u32::MAX,
            errno: libc::EIO,
        });
    });
    assert!(matches!(r, Err(Error::Durable(_))), "the failed flush was not reported: {r:?}");
    assert_eq!(segments(&dir).len(), 1, "both chunks are in one segment");
    fs.freeze();
    drop(db);
    // The device had written the second chunk's page (L's record and the marker), not the
    // first chunk's (X's record).
    let second_chunk = SEGMENT_HEADER_BYTES + 4096;
    fs.power_loss_keeping_writes(|_, offset| offset >= second_chunk).unwrap();
    check_recovered(&dir, small_chunks(&dir, None, 2), a, b);
}
