//! Recovery: fold the logs into the heap files (DESIGN §5 "Recovery").
//!
//! `scan` reads everything and changes nothing: the manifest, the checkpoint timestamp C, every
//! segment (header, then each chunk's records up to its first zero or bad record), and computes
//! the marker D — the largest marker record found in a valid chunk prefix of a sync-mode
//! segment whose frontier holds (every chunk it names has a valid prefix reaching the named
//! end, or its segment was deleted by a checkpoint; see the module docs of `log`); records of
//! process-mode segments count whole (their page cache survived). A bad
//! record is a **torn tail** (dropped, reported) when nothing valid follows it in its chunk and,
//! in a sync-mode segment, its timestamp field is above D; otherwise it is an error naming the
//! file and offset: every record at or below D was flushed before D was, so a bad one there is
//! corruption, never a crash artefact. A segment shorter than its header says is an error too.
//!
//! `apply` then replays the records with `C < wts <= D` into the heap files. Replay is
//! **backward filtered**: images are absolute, so only the newest image of each address
//! matters; it is written once. Then the heap files are synced, C := D is persisted, and the
//! segments are deleted. Each step is idempotent, so a crash during `apply` is recovered by
//! running it again. Every check happens in `scan`, before the first write: a directory that
//! fails to open is left as it was.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::DurableError;
use super::format::{
    self, KIND_MARKER, KIND_TX, Manifest, NotRecord, SEGMENT_HEADER_BYTES, SegmentHeader,
};
use super::io::Storage;
use crate::addr::Addr;

/// A record dropped because it was torn (beyond the marker).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// The segment file.
    pub path: PathBuf,
    /// Byte offset of the torn record.
    pub offset: u64,
    /// What was wrong with it.
    pub reason: String,
}

/// One segment file as found by a scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    /// The file.
    pub path: PathBuf,
    /// Its sequence number.
    pub seq: u64,
    /// Written in sync mode (records count up to the marker).
    pub marked: bool,
    /// Chunks holding at least one record.
    pub chunks_used: u32,
    /// Chunks in the file.
    pub chunks: u32,
    /// Valid transaction records.
    pub records: u64,
    /// Valid marker records.
    pub markers: u64,
}

/// What recovery found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Regions (heap files).
    pub regions: u64,
    /// Bytes per region.
    pub region_bytes: u64,
    /// The checkpoint timestamp C before recovery.
    pub checkpoint_ts: u64,
    /// The durable marker D (largest replayable timestamp).
    pub marker_ts: u64,
    /// Segment files found.
    pub segments: usize,
    /// Valid transaction records found.
    pub records: u64,
    /// Records with `C < wts <= D`, replayed (or to replay).
    pub records_replayed: u64,
    /// Valid records above D, dropped (never acknowledged in sync mode).
    pub records_beyond_marker: u64,
    /// Object images written to the heap files after backward filtering.
    pub images_written: u64,
    /// Bytes of log scanned (valid records).
    pub log_bytes: u64,
    /// Torn records dropped.
    pub torn: Vec<TornTail>,
    /// The segment files, in sequence order.
    pub segment_files: Vec<SegmentInfo>,
    /// The newest timestamp in the recovered heap: the clock must be past it.
    pub recovered_ts: u64,
    /// Nanoseconds spent scanning and replaying.
    pub duration_ns: u64,
}

struct Seg {
    path: PathBuf,
    header: SegmentHeader,
    bytes: Vec<u8>,
}

/// A valid record's place.
#[derive(Clone, Copy)]
struct Found {
    ts: u64,
    seg: usize,
    offset: usize,
    marked: bool,
}

/// Everything [`scan`] read.
pub(crate) struct Scan {
    pub(crate) manifest: Manifest,
    segs: Vec<Seg>,
    records: Vec<Found>,
    report: RecoveryReport,
    started: Instant,
}

impl Scan {
    /// The report of a scan without replay.
    pub(crate) fn report(&self) -> RecoveryReport {
        let mut r = self.report.clone();
        r.duration_ns = self.started.elapsed().as_nanos() as u64;
        r
    }
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> DurableError {
    let path = path.to_path_buf();
    move |source| DurableError::Io { op, path, source }
}

/// Reads and checks a directory; changes nothing. See the module docs.
pub(crate) fn scan(storage: &dyn Storage, dir: &Path) -> Result<Scan, DurableError> {
    let started = Instant::now();
    let manifest = Manifest::read(storage, dir)?;
    let ckpt = format::read_checkpoint(storage, dir)?;
    let checkpoint = ckpt.ts;
    let names = storage.list(dir).map_err(io("list", dir))?;
    for id in 0..manifest.regions {
        let path = format::region_file(dir, id as u16);
        let f = storage
            .open(&path, false)
            .map_err(|e| DurableError::HeapFile { path: path.clone(), reason: e.to_string() })?;
        let len = f.len_bytes().map_err(io("stat", &path))?;
        if len != manifest.region_bytes {
            return Err(DurableError::HeapFile {
                path,
                reason: format!("{len} bytes, expected {}", manifest.region_bytes),
            });
        }
    }
    let mut seqs: Vec<u64> = names.iter().filter_map(|n| format::parse_segment_name(n)).collect();
    seqs.sort_unstable();
    let mut segs = Vec::new();
    for seq in seqs {
        let path = format::segment_file(dir, seq);
        let f = storage.open(&path, false).map_err(io("open", &path))?;
        let len = f.len_bytes().map_err(io("stat", &path))?;
        let mut head = vec![0u8; SEGMENT_HEADER_BYTES.min(len) as usize];
        f.read_at(&mut head, 0).map_err(io("read", &path))?;
        let header = SegmentHeader::decode(&path, &head)?;
        if len < header.file_bytes() {
            return Err(DurableError::BadFile {
                path,
                offset: len,
                reason: format!(
                    "segment truncated: {len} bytes, its header says {}",
                    header.file_bytes()
                ),
            });
        }
        // Read only the chunks that hold records (a zero first word means unused): segments
        // are preallocated, and most of the last one is usually empty.
        let mut bytes = vec![0u8; header.file_bytes() as usize];
        bytes[..head.len()].copy_from_slice(&head);
        let cb = header.chunk_bytes as usize;
        for c in 0..header.chunks as usize {
            let start = SEGMENT_HEADER_BYTES as usize + c * cb;
            let first = &mut bytes[start..start + 8];
            f.read_at(first, start as u64).map_err(io("read", &path))?;
            if first.iter().any(|b| *b != 0) {
                f.read_at(&mut bytes[start..start + cb], start as u64)
                    .map_err(io("read", &path))?;
            }
        }
        segs.push(Seg { path, header, bytes });
    }

    let mut records = Vec::new();
    // Markers (value, frontier entries) and each chunk's valid prefix, by (segment seq, chunk).
    let mut markers: Vec<(u64, Option<Frontier>)> = Vec::new();
    let mut valid_end: HashMap<(u64, u64), u64> = HashMap::new();
    // Bad records, judged once the marker is known: (seg, offset, ts field, reason, followed).
    let mut bad = Vec::new();
    let mut report = RecoveryReport {
        regions: manifest.regions,
        region_bytes: manifest.region_bytes,
        checkpoint_ts: checkpoint,
        segments: segs.len(),
        ..RecoveryReport::default()
    };
    for (si, seg) in segs.iter().enumerate() {
        let cb = seg.header.chunk_bytes as usize;
        let mut info = SegmentInfo {
            path: seg.path.clone(),
            seq: seg.header.seq,
            marked: seg.header.marked,
            chunks_used: 0,
            chunks: seg.header.chunks,
            records: 0,
            markers: 0,
        };
        for c in 0..seg.header.chunks as usize {
            let start = SEGMENT_HEADER_BYTES as usize + c * cb;
            let chunk = &seg.bytes[start..start + cb];
            if chunk[..8] != [0u8; 8] {
                info.chunks_used += 1;
            }
            let mut pos = 0;
            while pos < cb {
                match format::decode_record(&chunk[pos..]) {
                    Ok(r) => {
                        if r.kind == KIND_MARKER {
                            info.markers += 1;
                            if seg.header.marked {
                                markers.push((r.ts, frontier(&r)));
                            }
                        } else {
                            debug_assert_eq!(r.kind, KIND_TX);
                            check_entries(&manifest, &seg.path, (start + pos) as u64, &r)?;
                            info.records += 1;
                            records.push(Found {
                                ts: r.ts,
                                seg: si,
                                offset: start + pos,
                                marked: seg.header.marked,
                            });
                            report.log_bytes += r.len_bytes as u64;
                        }
                        pos += r.len_bytes;
                    }
                    Err(NotRecord::End) => break,
                    Err(NotRecord::Bad { ts_field, reason }) => {
                        let followed = valid_after(&chunk[pos..]);
                        bad.push((si, start + pos, ts_field, reason, followed));
                        break;
                    }
                }
            }
            valid_end.insert((seg.header.seq, c as u64), pos as u64);
        }
        report.segment_files.push(info);
    }
    let live: std::collections::HashSet<u64> = segs.iter().map(|s| s.header.seq).collect();
    let holds = |&(seq, chunk, end): &(u64, u64, u64)| {
        !live.contains(&seq) || valid_end.get(&(seq, chunk)).is_some_and(|v| *v >= end)
    };
    let marker = markers
        .iter()
        .filter(|(_, f)| f.as_ref().is_some_and(|f| f.iter().all(holds)))
        .map(|(ts, _)| *ts)
        .max()
        .unwrap_or(0);
    let process_max = records.iter().filter(|r| !r.marked).map(|r| r.ts).max().unwrap_or(0);
    // Records at or below C are in the heap files; a checkpoint may have deleted the segment
    // holding the newest marker, so C counts as a marker too.
    let marker = marker.max(checkpoint);
    let d = marker.max(process_max);
    for (si, offset, ts_field, reason, followed) in bad {
        let seg = &segs[si];
        let below_marker = seg.header.marked && ts_field <= marker;
        if followed || below_marker {
            return Err(DurableError::BadFile {
                path: seg.path.clone(),
                offset: offset as u64,
                reason: format!("bad record at or below the durable marker {marker}: {reason}"),
            });
        }
        report.torn.push(TornTail {
            path: seg.path.clone(),
            offset: offset as u64,
            reason: reason.to_string(),
        });
    }
    records.sort_by_key(|r| r.ts);
    report.records = records.len() as u64;
    report.marker_ts = d;
    for r in &records {
        let eligible = if r.marked { r.ts <= marker } else { true };
        if !eligible {
            report.records_beyond_marker += 1;
        } else if r.ts > checkpoint {
            report.records_replayed += 1;
        }
    }
    // An interrupted checkpoint may have left heap images up to H.
    report.recovered_ts = d.max(ckpt.heap_max_ts);
    Ok(Scan { manifest, segs, records, report, started })
}

/// A marker's frontier: `(segment seq, chunk, end offset in the chunk)` per named chunk.
type Frontier = Vec<(u64, u64, u64)>;

/// A marker record's frontier: `(segment seq, chunk, end offset in the chunk)` per entry;
/// `None` (never trusted) when an entry is not 16 bytes.
fn frontier(r: &format::RecordRef<'_>) -> Option<Frontier> {
    r.entries
        .iter()
        .map(|(seq, image)| {
            (image.len() == 16)
                .then(|| (*seq, format::get_u64(image, 0), format::get_u64(image, 8)))
        })
        .collect()
}

/// Whether some valid record starts at an 8-byte boundary after the first 24 bytes of `b`.
fn valid_after(b: &[u8]) -> bool {
    (24..b.len()).step_by(8).any(|at| format::decode_record(&b[at..]).is_ok())
}

fn check_entries(
    m: &Manifest,
    path: &Path,
    offset: u64,
    r: &format::RecordRef<'_>,
) -> Result<(), DurableError> {
    for (addr, image) in &r.entries {
        let a = Addr::from_raw(*addr);
        if a.region() as u64 >= m.regions || a.offset() + image.len() as u64 > m.region_bytes {
            return Err(DurableError::BadFile {
                path: path.to_path_buf(),
                offset,
                reason: format!("record writes {} bytes at {a}, outside the heap", image.len()),
            });
        }
    }
    Ok(())
}

/// Replays a scan into the heap files, persists the checkpoint and deletes the segments.
/// Returns the report and the first unused segment number.
pub(crate) fn apply(
    storage: &dyn Storage,
    dir: &Path,
    scan: Scan,
) -> Result<(RecoveryReport, u64), DurableError> {
    let Scan { manifest, segs, records, mut report, started, .. } = scan;
    let checkpoint = report.checkpoint_ts;
    let marker = report.marker_ts;
    let next_seq = segs.last().map_or(0, |s| s.header.seq + 1);
    // Backward filtering: newest image per address, newest record first.
    let mut newest: HashMap<u64, &[u8]> = HashMap::new();
    for r in records.iter().rev() {
        let eligible = if r.marked { r.ts <= marker } else { true };
        if !eligible || r.ts <= checkpoint {
            continue;
        }
        let seg = &segs[r.seg];
        let rec =
            format::decode_record(&seg.bytes[r.offset..]).map_err(|_| DurableError::BadFile {
                path: seg.path.clone(),
                offset: r.offset as u64,
                reason: "record changed between scan and replay".into(),
            })?;
        for (addr, image) in rec.entries {
            newest.entry(addr).or_insert(image);
        }
    }
    let mut images: Vec<(u64, &[u8])> = newest.into_iter().collect();
    images.sort_unstable_by_key(|(a, _)| *a);
    report.images_written = images.len() as u64;
    if !images.is_empty() {
        let mut files = HashMap::new();
        for (addr, image) in &images {
            let a = Addr::from_raw(*addr);
            let f = match files.entry(a.region()) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let path = format::region_file(dir, a.region());
                    let f = storage.open(&path, true).map_err(io("open", &path))?;
                    e.insert((path, f))
                }
            };
            f.1.write_at(image, a.offset()).map_err(io("write", &f.0))?;
        }
        for (path, f) in files.values() {
            f.sync_data().map_err(io("fdatasync", path))?;
        }
    }
    if marker > checkpoint {
        let c = format::Checkpoint { ts: marker, heap_max_ts: report.recovered_ts };
        format::write_checkpoint(storage, dir, c)?;
    }
    for s in &segs {
        storage.remove(&s.path).map_err(io("remove", &s.path))?;
    }
    // Leftovers of segment or metadata files a crash interrupted before their rename.
    let mut leftovers = 0;
    for name in storage.list(dir).map_err(io("list", dir))? {
        if name.ends_with(".tmp") {
            let path = dir.join(&name);
            storage.remove(&path).map_err(io("remove", &path))?;
            leftovers += 1;
        }
    }
    if !segs.is_empty() || leftovers > 0 {
        storage.sync_dir(dir).map_err(io("fsync directory", dir))?;
    }
    let _ = manifest;
    report.duration_ns = started.elapsed().as_nanos() as u64;
    Ok((report, next_seq))
}
