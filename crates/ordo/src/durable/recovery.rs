//! Recovery: fold the logs into the heap files (DESIGN §5 "Recovery").
//!
//! `scan` reads everything and changes nothing: the manifest, the checkpoint timestamp C, every
//! segment (header, then each chunk's records up to its first zero or bad record), and computes
//! the marker D — the largest marker record found in a valid chunk prefix of a sync-mode
//! segment whose frontier holds (every chunk it names has a valid prefix reaching the named
//! end, or its segment was deleted by a checkpoint; see the module docs of `log::round`);
//! records of process-mode segments count whole (their page cache survived). A bad
//! record is a **torn tail** (dropped, reported) when, in a sync-mode segment, its timestamp
//! field is above D (or 0: the sector holding it was never written) and every valid record
//! after it in its chunk is above D too, at most one of them a marker — the device may
//! persist an unflushed write's sectors in any order, so a torn record can have intact
//! neighbours after it, but only from the last round, which alone can be unflushed; in a
//! process-mode segment, when nothing valid follows it. Otherwise it is an error
//! naming the file and offset: every record at or below D was flushed before D was, and the
//! flushed part of a chunk is a prefix of it, so a bad one there is corruption, never a crash
//! artefact. A segment shorter than its header says, or longer than the maximum segment size,
//! is an error too.
//!
//! The scan maps every segment read-only (no copy of the log on real files; see
//! [`StorageFile::map_read`]) and checks the
//! segments on `threads` threads at once (segments are independent; results are merged in
//! segment order, so the error reported for a bad directory does not depend on timing). Each
//! record is checked with one crc32c call over its bytes and decoded in place, without
//! allocating.
//!
//! A transaction too large for one chunk is logged as parts (format 3) that share its `wts`;
//! it counts only when every part is found. A part set above C with parts missing is dropped
//! and counted (`parts_dropped`): a process-mode crash or a failed write between two parts,
//! whose commit never returned — or, in a sync-mode segment, lies above D. Missing parts at
//! or below D are corruption, an error like a bad record there.
//!
//! `apply` then replays the records with `C < wts <= D` into the heap files. Replay is
//! **backward filtered**: images are absolute, so only the newest image of each address
//! matters (the largest `wts`; within one record the later entry); it is written once. The
//! address space is split into interleaved 64 KiB ranges, one set per replay thread. While it
//! checks a record, the scan files each entry (address, timestamp, where its image lies) under
//! the thread owning the address, so replay does not read the log again; once the marker is
//! known, each thread keeps the newest image of its own addresses among the records that
//! count and writes them in address order, the images of a dense span in one `pwrite` (the
//! gaps read back from the file). Then the heap files are synced, C := D is persisted, and the
//! segments are deleted. Each step is idempotent, so a crash during `apply` is recovered by
//! running it again. Every check happens in `scan`, before the first write: a directory that
//! fails to open is left as it was.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rustc_hash::FxHashMap;

use super::DurableError;
use super::format::{self, KIND_MARKER, Manifest, NotRecord, SEGMENT_HEADER_BYTES, SegmentHeader};
use super::io::FileBytes;
use super::io::{Storage, StorageFile};
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
    /// Transactions those records hold (a large transaction is logged as several part
    /// records).
    pub transactions_replayed: u64,
    /// Valid records above D, dropped (never acknowledged in sync mode).
    pub records_beyond_marker: u64,
    /// Parts of transactions whose other parts are missing (a process-mode crash between a
    /// large transaction's part writes, or a failed write): dropped, never half-applied.
    pub parts_dropped: u64,
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
    /// Of which: mapping and checking the files (the scan).
    pub scan_ns: u64,
    /// Of which: backward filtering (newest image per address).
    pub filter_ns: u64,
    /// Of which: writing the images to the heap files.
    pub write_ns: u64,
    /// Of which: `fdatasync` of the heap files and persisting the checkpoint.
    pub sync_ns: u64,
    /// Of which: deleting the segments (unmapping included).
    pub cleanup_ns: u64,
}

struct Seg {
    path: PathBuf,
    header: SegmentHeader,
    bytes: FileBytes,
}

/// A valid transaction record's place.
#[derive(Clone, Copy)]
struct Found {
    ts: u64,
    marked: bool,
    /// `(index, count)` of a part record.
    part: Option<(u64, u64)>,
    /// Segment index and byte offset (for errors).
    seg: usize,
    offset: u64,
}

/// A bad record, judged once the marker is known.
struct BadRecord {
    seg: usize,
    offset: usize,
    ts_field: u64,
    reason: &'static str,
    /// The valid records that follow it in its chunk: see [`valid_after`] and the rule in
    /// [`scan`].
    after: After,
}

/// What [`valid_after`] found after a bad record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct After {
    /// The smallest timestamp among the valid records (`None`: there is none).
    min_ts: Option<u64>,
    /// How many of them are markers.
    markers: u32,
}

/// An entry of a valid transaction record, as the scan found it: replay filters these without
/// reading the log again.
#[derive(Clone, Copy)]
struct Span {
    addr: u64,
    ts: u64,
    /// The image's offset in its segment.
    offset: u64,
    len: u32,
}

/// Where the newest image of an address lies.
#[derive(Clone, Copy)]
struct Image {
    ts: u64,
    offset: u64,
    seg: u32,
    len: u32,
}

/// What the scan of one segment found.
struct SegScan {
    /// Per replay thread, the entries of its addresses (when gathered for replay).
    spans: Vec<Vec<Span>>,
    info: SegmentInfo,
    records: Vec<Found>,
    /// Markers of a marked segment: value and frontier.
    markers: Vec<(u64, Option<Frontier>)>,
    /// Each chunk's valid prefix, by (segment seq, chunk).
    valid_end: Vec<((u64, u64), u64)>,
    bad: Vec<BadRecord>,
    log_bytes: u64,
}

/// Everything [`scan`] read.
pub(crate) struct Scan {
    pub(crate) manifest: Manifest,
    segs: Vec<Seg>,
    report: RecoveryReport,
    started: Instant,
    /// Per segment, per replay thread, the entries of its records ([`SegScan::spans`]).
    spans: Vec<Vec<Vec<Span>>>,
    /// Timestamps of transactions with missing parts: not replayed.
    incomplete: rustc_hash::FxHashSet<u64>,
    /// The directory lock taken before the scan ([`super::prescan`]); an open keeps it.
    pub(crate) lock: Option<super::io::DirLock>,
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

/// Runs `f` on items `0..n` on up to `threads` threads (items handed out one at a time) and
/// returns the results in item order.
fn parallel_map<T: Send>(n: usize, threads: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = threads.clamp(1, n.max(1));
    if threads == 1 {
        return (0..n).map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut out: Vec<(usize, T)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        // Relaxed: the counter only hands out distinct items.
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            return mine;
                        }
                        mine.push((i, f(i)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    out.sort_unstable_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, t)| t).collect()
}

/// Reads and checks a directory on up to `threads` threads; changes nothing. See the module
/// docs.
/// `replay`: also gather every entry for [`apply`], split by replay thread. A segment file
/// longer than `segment_bytes_max` is refused before it is mapped.
pub(crate) fn scan(
    storage: &dyn Storage,
    dir: &Path,
    threads: usize,
    segment_bytes_max: u64,
    replay: bool,
) -> Result<Scan, DurableError> {
    let started = Instant::now();
    let manifest = Manifest::read(storage, dir)?;
    let ckpt = format::read_checkpoint(storage, dir)?;
    let checkpoint = ckpt.ts;
    let names = storage.list(dir).map_err(io("list", dir))?;
    let member = names.iter().any(|n| n == format::MEMBER);
    for id in 0..manifest.regions {
        let path = format::region_file(dir, id as u16);
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if member && name.is_some_and(|n| !names.contains(&n)) {
            continue; // a region this member never held
        }
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
        if len > segment_bytes_max {
            // Never mapped: a sparse file set to many GiB costs nothing on disk, but mapping
            // and scanning it whole would (address space, a page fault per chunk, a few words
            // per chunk). Every segment this configuration writes fits.
            return Err(DurableError::BadFile {
                path,
                offset: segment_bytes_max,
                reason: format!(
                    "segment of {len} bytes is longer than the maximum segment size \
                     ({segment_bytes_max} bytes, `segment_bytes_max`)"
                ),
            });
        }
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
        let bytes = f.map_read(header.file_bytes() as usize).map_err(io("mmap", &path))?;
        segs.push(Seg { path, header, bytes });
    }

    let parts = if replay { threads.max(1) } else { 0 };
    let scans =
        parallel_map(segs.len(), threads, |si| scan_segment(&manifest, si, &segs[si], parts));
    let mut spans = Vec::new();
    let mut records = Vec::new();
    // Markers (value, frontier entries) and each chunk's valid prefix, by (segment seq, chunk).
    let mut markers: Vec<(u64, Option<Frontier>)> = Vec::new();
    let mut valid_end: std::collections::HashMap<(u64, u64), u64> = Default::default();
    let mut bad = Vec::new();
    let mut report = RecoveryReport {
        regions: manifest.regions,
        region_bytes: manifest.region_bytes,
        checkpoint_ts: checkpoint,
        segments: segs.len(),
        ..RecoveryReport::default()
    };
    for s in scans {
        let s = s?;
        spans.push(s.spans);
        records.extend(s.records);
        markers.extend(s.markers);
        valid_end.extend(s.valid_end);
        bad.extend(s.bad);
        report.log_bytes += s.log_bytes;
        report.segment_files.push(s.info);
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
    // Records at or below C are in the heap files; a checkpoint may have deleted the segment
    // holding the newest marker, so C counts as a marker too.
    let marker = marker.max(checkpoint);
    // Transactions logged in parts count only whole. A part set above C with parts missing
    // is the trace of a process-mode crash (or failed write) between its parts, or lies
    // above the marker; at or below the marker every record was flushed, so a missing part
    // there is corruption.
    let mut part_sets: FxHashMap<u64, (u64, u64, Found)> = FxHashMap::default();
    for r in records.iter().filter(|r| r.ts > checkpoint) {
        if let Some((_, count)) = r.part {
            part_sets.entry(r.ts).or_insert((count, 0, *r)).1 += 1;
        }
    }
    let mut incomplete = rustc_hash::FxHashSet::default();
    for (ts, (count, seen, first)) in part_sets {
        if seen == count {
            continue;
        }
        if first.marked && ts <= marker {
            return Err(DurableError::BadFile {
                path: segs[first.seg].path.clone(),
                offset: first.offset,
                reason: format!(
                    "transaction {ts} has {seen} of its {count} parts at or below the durable \
                     marker {marker}"
                ),
            });
        }
        report.parts_dropped += seen;
        incomplete.insert(ts);
    }
    let process_max = records
        .iter()
        .filter(|r| !r.marked && !incomplete.contains(&r.ts))
        .map(|r| r.ts)
        .max()
        .unwrap_or(0);
    let d = marker.max(process_max);
    for b in bad {
        let seg = &segs[b.seg];
        // A zero timestamp field is a header the device wrote only in part: the sector
        // holding the word still has the zeros the segment was created with (no record has
        // timestamp 0), so it says nothing about where the record stood.
        let below_marker = seg.header.marked && b.ts_field != 0 && b.ts_field <= marker;
        // A valid record after a bad one is a torn tail's neighbour when both lie in the
        // unflushed part of the chunk: the device persisted some of its sectors and not others.
        // The flushed part of a chunk is a prefix of it, and only the last round's writes can
        // be unflushed (a round flushes before the next one writes; a failed flush stops the
        // log). So the bad record was flushed — corruption — when a valid record after it is
        // at or below the marker (every such record was flushed), or when two markers follow
        // it (the first one's round completed its flush before the second's round wrote). A
        // process-mode segment has no marker: any valid record after a bad one is an error.
        let followed = b.after.min_ts.is_some_and(|ts| !seg.header.marked || ts <= marker)
            || (seg.header.marked && b.after.markers >= 2);
        if followed || below_marker {
            let reason = if below_marker {
                format!("bad record at or below the durable marker {marker}: {}", b.reason)
            } else if seg.header.marked {
                format!(
                    "bad record followed by a valid record at or below the durable marker \
                     {marker}: {}",
                    b.reason
                )
            } else {
                format!("bad record followed by a valid record: {}", b.reason)
            };
            return Err(DurableError::BadFile {
                path: seg.path.clone(),
                offset: b.offset as u64,
                reason,
            });
        }
        report.torn.push(TornTail {
            path: seg.path.clone(),
            offset: b.offset as u64,
            reason: b.reason.to_string(),
        });
    }
    report.records = records.len() as u64;
    report.marker_ts = d;
    for r in records.iter().filter(|r| !incomplete.contains(&r.ts)) {
        let eligible = if r.marked { r.ts <= marker } else { true };
        if !eligible {
            report.records_beyond_marker += 1;
        } else if r.ts > checkpoint {
            report.records_replayed += 1;
            if r.part.is_none_or(|(index, _)| index == 0) {
                report.transactions_replayed += 1;
            }
        }
    }
    debug_assert!(
        report.records_replayed + report.records_beyond_marker + report.parts_dropped
            <= report.records,
        "each valid record is replayed, beyond the marker, dropped, or at or below C"
    );
    debug_assert!(report.transactions_replayed <= report.records_replayed, "a part is a record");
    // An interrupted checkpoint may have left heap images up to H.
    report.recovered_ts = d.max(ckpt.heap_max_ts);
    report.scan_ns = started.elapsed().as_nanos() as u64;
    Ok(Scan { manifest, segs, report, started, spans, incomplete, lock: None })
}

/// Checks every chunk of one segment: its records, its markers, its bad records.
/// `parts > 0`: also gather the entries, split among `parts` replay threads.
fn scan_segment(
    manifest: &Manifest,
    si: usize,
    seg: &Seg,
    parts: usize,
) -> Result<SegScan, DurableError> {
    let cb = seg.header.chunk_bytes as usize;
    let bytes = seg.bytes.bytes();
    let mut out = SegScan {
        spans: (0..parts).map(|_| Vec::new()).collect(),
        info: SegmentInfo {
            path: seg.path.clone(),
            seq: seg.header.seq,
            marked: seg.header.marked,
            chunks_used: 0,
            chunks: seg.header.chunks,
            records: 0,
            markers: 0,
        },
        records: Vec::new(),
        markers: Vec::new(),
        valid_end: Vec::new(),
        bad: Vec::new(),
        log_bytes: 0,
    };
    for c in 0..seg.header.chunks as usize {
        let start = SEGMENT_HEADER_BYTES as usize + c * cb;
        let chunk = &bytes[start..start + cb];
        if chunk[..8] != [0u8; 8] {
            out.info.chunks_used += 1;
        }
        let mut pos = 0;
        while pos < cb {
            match format::view_record(&chunk[pos..]) {
                Ok(r) => {
                    if r.kind == KIND_MARKER {
                        out.info.markers += 1;
                        if seg.header.marked {
                            out.markers.push((r.ts, frontier(&r)));
                        }
                    } else {
                        debug_assert!(r.is_tx());
                        check_entries(manifest, &seg.path, (start + pos) as u64, &r)?;
                        out.info.records += 1;
                        out.records.push(Found {
                            ts: r.ts,
                            marked: seg.header.marked,
                            part: r.part(),
                            seg: si,
                            offset: (start + pos) as u64,
                        });
                        out.log_bytes += r.len_bytes() as u64;
                        if parts > 0 {
                            for (addr, image) in r.writes() {
                                let offset = image.as_ptr() as usize - bytes.as_ptr() as usize;
                                out.spans[part_of(addr, parts)].push(Span {
                                    addr,
                                    ts: r.ts,
                                    offset: offset as u64,
                                    len: image.len() as u32,
                                });
                            }
                        }
                    }
                    pos += r.len_bytes();
                }
                Err(NotRecord::End) => break,
                Err(NotRecord::Bad { ts_field, reason }) => {
                    let after = valid_after(&chunk[pos..]);
                    out.bad.push(BadRecord {
                        seg: si,
                        offset: start + pos,
                        ts_field,
                        reason,
                        after,
                    });
                    break;
                }
            }
        }
        debug_assert!(pos <= cb, "a chunk's valid prefix ends inside it");
        out.valid_end.push(((seg.header.seq, c as u64), pos as u64));
    }
    Ok(out)
}

/// A marker's frontier: `(segment seq, chunk, end offset in the chunk)` per named chunk.
type Frontier = Vec<(u64, u64, u64)>;

/// A marker record's frontier: `(segment seq, chunk, end offset in the chunk)` per entry;
/// `None` (never trusted) when an entry is not 16 bytes.
fn frontier(r: &format::RecordView<'_>) -> Option<Frontier> {
    r.entries()
        .map(|(seq, image)| {
            (image.len() == 16).then(|| (seq, format::get_u64(image, 0), format::get_u64(image, 8)))
        })
        .collect()
}

/// The valid records that start at an 8-byte boundary after the first 24 bytes of `b` (the
/// bytes from a bad record on): their smallest timestamp and how many are markers.
fn valid_after(b: &[u8]) -> After {
    valid_after_counting(b).0
}

/// Bytes [`valid_after`] may hand to [`format::view_record`] whole (each a candidate whose
/// checksum already matched) per byte of its input, before it gives up and answers "followed
/// by timestamp 0".
const VALID_AFTER_FULL_CHECKS_PER_BYTE: u64 = 4;

/// [`valid_after`], and the work it did: bytes checksummed or checked, plus one per candidate
/// position (tests bound it).
///
/// Linear in `b.len()`: checking every candidate by checksumming the rest of its claimed
/// length, as a plain loop over [`format::view_record`] would, is quadratic on crafted input
/// (every 8-byte word a header claiming a record to the end of the chunk). Instead one pass
/// computes the crc32c of every 4-byte prefix of `b`; the checksum of a candidate's bytes
/// `b[s..e]` is then `crc(b[..e]) ^ shift(crc(b[..s]), e - s)` (crc32c is linear: `shift`
/// appends `e - s` zero bytes to a CRC state, `O(log(e - s))` multiplications in GF(2)).
/// Only a candidate whose checksum matches is decoded whole; if crafted input makes such
/// candidates add up to more than [`VALID_AFTER_FULL_CHECKS_PER_BYTE`] times `b.len()` bytes,
/// the answer is "followed by timestamp 0" — the conservative one: recovery then refuses the
/// file with an error instead of dropping it as a torn tail.
fn valid_after_counting(b: &[u8]) -> (After, u64) {
    use format::{RECORD_HEADER_BYTES, get_u32};
    let words = b.len() / 4;
    // prefix[k] = crc32c(b[..4k]).
    let mut prefix = Vec::with_capacity(words + 1);
    let mut crc = 0u32;
    prefix.push(crc);
    for w in b[..words * 4].chunks_exact(4) {
        crc = crc32c::crc32c_append(crc, w);
        prefix.push(crc);
    }
    let mut work = b.len() as u64;
    let mut full_budget = VALID_AFTER_FULL_CHECKS_PER_BYTE * b.len() as u64;
    let zeros = ZerosOperator::new();
    let mut found = After::default();
    for at in (24..b.len()).step_by(8) {
        let r = &b[at..];
        if r.len() < RECORD_HEADER_BYTES {
            break;
        }
        work += 1;
        let len = get_u32(r, 4) as usize;
        if (len == 0 && get_u32(r, 0) == 0)
            || len < RECORD_HEADER_BYTES
            || !len.is_multiple_of(8)
            || len > r.len()
        {
            continue; // `view_record` refuses it without a checksum
        }
        // The checksum covers b[at + 4..at + len]; `at` and `len` are multiples of 8.
        let (s, e) = (at + 4, at + len);
        let sum = prefix[e / 4] ^ zeros.shift(prefix[s / 4], (e - s) as u64);
        if sum != get_u32(r, 0) {
            continue;
        }
        work += len as u64;
        match full_budget.checked_sub(len as u64) {
            Some(left) => full_budget = left,
            None => return (After { min_ts: Some(0), ..found }, work),
        }
        if let Ok(v) = format::view_record(r) {
            found.min_ts = Some(found.min_ts.map_or(v.ts, |f| f.min(v.ts)));
            found.markers += u32::from(v.kind == KIND_MARKER);
        }
    }
    (found, work)
}

/// Appending zero bytes to a crc32c state: multiplication by `x^(8n)` modulo the (reflected)
/// Castagnoli polynomial, as zlib's `crc32_combine` does.
struct ZerosOperator {
    /// `x^(2^k)` mod P, for k in 0..67 (`shift` of a `u64` count of bytes reaches k = 66).
    x2n: [u32; 67],
}

impl ZerosOperator {
    /// The reflected CRC-32C polynomial.
    const POLY: u32 = 0x82F6_3B78;

    fn new() -> Self {
        let mut x2n = [0u32; 67];
        let mut p = 1u32 << 30; // x^1
        for slot in &mut x2n {
            *slot = p;
            p = Self::mult(p, p);
        }
        ZerosOperator { x2n }
    }

    /// `a * b` modulo P (reflected: bit 31 is x^0).
    fn mult(a: u32, mut b: u32) -> u32 {
        let mut p = 0u32;
        let mut m = 1u32 << 31;
        while m != 0 {
            if a & m != 0 {
                p ^= b;
            }
            m >>= 1;
            b = if b & 1 != 0 { (b >> 1) ^ Self::POLY } else { b >> 1 };
        }
        p
    }

    /// The crc32c state `crc` after `n` more zero bytes: `crc32c(a ++ [0; n])` from
    /// `crc32c(a)` equals `shift(crc32c(a), n) ^ crc32c([0; n])`; here only the first term,
    /// so that `crc32c(a ++ b) == shift(crc32c(a), b.len()) ^ crc32c(b)`.
    fn shift(&self, crc: u32, n: u64) -> u32 {
        // x^(8n) mod P, by the bits of n (x^(8 * 2^i) = x2n[i + 3]).
        let mut op = 1u32 << 31; // x^0
        let (mut n, mut k) = (n, 3usize);
        while n != 0 {
            if n & 1 != 0 {
                op = Self::mult(self.x2n[k], op);
            }
            n >>= 1;
            k += 1;
        }
        Self::mult(op, crc)
    }
}

fn check_entries(
    m: &Manifest,
    path: &Path,
    offset: u64,
    r: &format::RecordView<'_>,
) -> Result<(), DurableError> {
    for (addr, image) in r.writes() {
        let a = Addr::from_raw(addr);
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

/// The replay thread (of `parts`) that owns `addr`: interleaved 64 KiB address ranges.
#[inline]
fn part_of(addr: u64, parts: usize) -> usize {
    ((addr >> 16) % parts as u64) as usize
}

/// Bytes gathered before one coalesced `pwrite`.
const WRITE_BATCH_BYTES: usize = 1 << 20;

/// Replays a scan into the heap files, persists the checkpoint and deletes the segments.
/// Returns the report and the first unused segment number.
pub(crate) fn apply(
    storage: &dyn Storage,
    dir: &Path,
    scan: Scan,
) -> Result<(RecoveryReport, u64), DurableError> {
    let Scan { segs, mut report, started, spans, incomplete, .. } = scan;
    let checkpoint = report.checkpoint_ts;
    let marker = report.marker_ts;
    debug_assert!(marker >= checkpoint, "C counts as a marker: D >= C");
    let next_seq = segs.last().map_or(0, |s| s.header.seq + 1);
    let phase = Instant::now();
    // Backward filtering, one address range set per thread: the newest image per address
    // among the entries of the records that count (`C < wts`, and `wts <= D` with markers).
    let parts = spans.first().map_or(1, |s| s.len().max(1));
    let images: Vec<Vec<(u64, &[u8])>> = parallel_map(parts, parts, |p| {
        let mut newest: FxHashMap<u64, Image> = FxHashMap::default();
        for (si, seg_spans) in spans.iter().enumerate() {
            let marked = segs[si].header.marked;
            for s in seg_spans.get(p).map_or(&[][..], |v| &v[..]) {
                if s.ts <= checkpoint || (marked && s.ts > marker) || incomplete.contains(&s.ts) {
                    continue;
                }
                let image = Image { ts: s.ts, offset: s.offset, seg: si as u32, len: s.len };
                let e = newest.entry(s.addr).or_insert(image);
                // `>=`: within one record the later entry wins, as if applied in order.
                if image.ts >= e.ts {
                    *e = image;
                }
            }
        }
        let mut mine: Vec<(u64, &[u8])> = newest
            .into_iter()
            .filter_map(|(a, i)| {
                let at = i.offset as usize;
                segs[i.seg as usize].bytes.bytes().get(at..at + i.len as usize).map(|b| (a, b))
            })
            .collect();
        mine.sort_unstable_by_key(|(a, _)| *a);
        debug_assert!(mine.windows(2).all(|w| w[0].0 < w[1].0), "one image per address");
        mine
    });
    report.images_written = images.iter().map(|v| v.len() as u64).sum();
    report.filter_ns = phase.elapsed().as_nanos() as u64;
    let phase = Instant::now();
    let mut regions: Vec<u16> =
        images.iter().flatten().map(|(a, _)| Addr::from_raw(*a).region()).collect();
    regions.sort_unstable();
    regions.dedup();
    let mut files = FxHashMap::default();
    for r in regions {
        let path = format::region_file(dir, r);
        let f = storage.open(&path, true).map_err(io("open", &path))?;
        files.insert(r, (path, f));
    }
    let written = parallel_map(parts, parts, |p| write_images(&files, &images[p]));
    written.into_iter().collect::<Result<(), _>>()?;
    report.write_ns = phase.elapsed().as_nanos() as u64;
    let phase = Instant::now();
    for (path, f) in files.values() {
        f.sync_data().map_err(io("fdatasync", path))?;
    }
    if marker > checkpoint {
        let c = format::Checkpoint { ts: marker, heap_max_ts: report.recovered_ts };
        format::write_checkpoint(storage, dir, c)?;
    }
    report.sync_ns = phase.elapsed().as_nanos() as u64;
    let phase = Instant::now();
    let paths: Vec<PathBuf> = segs.iter().map(|s| s.path.clone()).collect();
    // Unmap before deleting (see `crate::mapping`: `FileBytes::map_file`).
    drop(segs);
    for path in &paths {
        storage.remove(path).map_err(io("remove", path))?;
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
    if !paths.is_empty() || leftovers > 0 {
        storage.sync_dir(dir).map_err(io("fsync directory", dir))?;
    }
    report.cleanup_ns = phase.elapsed().as_nanos() as u64;
    report.duration_ns = started.elapsed().as_nanos() as u64;
    Ok((report, next_seq))
}

/// Bytes of heap file between two images up to which they are written with one `pwrite`.
const WRITE_GAP_MAX_BYTES: u64 = 4096;

/// Writes images sorted by address. Images of a region closer than [`WRITE_GAP_MAX_BYTES`]
/// go out in one `pwrite` of up to [`WRITE_BATCH_BYTES`]: the span is read from the file first,
/// so the gaps are written back unchanged (no one else writes a heap file meanwhile: recovery
/// runs before the heap is mapped, and checkpoints run one at a time).
pub(crate) fn write_images(
    files: &FxHashMap<u16, (PathBuf, Arc<dyn StorageFile>)>,
    images: &[(u64, &[u8])],
) -> Result<(), DurableError> {
    let mut buf: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < images.len() {
        let first = Addr::from_raw(images[i].0);
        let (region, start) = (first.region(), first.offset());
        let mut end = start + images[i].1.len() as u64;
        let mut payload = images[i].1.len();
        let mut j = i + 1;
        while let Some((addr, image)) = images.get(j) {
            let a = Addr::from_raw(*addr);
            let e = a.offset() + image.len() as u64;
            if a.region() != region
                || a.offset() > end + WRITE_GAP_MAX_BYTES
                || e - start > WRITE_BATCH_BYTES as u64
            {
                break;
            }
            end = end.max(e);
            payload += image.len();
            j += 1;
        }
        let Some((path, f)) = files.get(&region) else {
            i = j;
            continue;
        };
        buf.clear();
        buf.resize((end - start) as usize, 0);
        if payload < buf.len() {
            f.read_at(&mut buf, start).map_err(io("read", path))?;
        }
        for (addr, image) in &images[i..j] {
            let at = (Addr::from_raw(*addr).offset() - start) as usize;
            buf[at..at + image.len()].copy_from_slice(image);
        }
        f.write_at(&buf, start).map_err(io("write", path))?;
        i = j;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeros_operator_matches_crc32c_combine_and_ranges() {
        let z = ZerosOperator::new();
        let b: Vec<u8> =
            (0..5000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for &(s, e) in &[(0, 0), (0, 8), (4, 100), (12, 4096), (300, 5000), (4996, 5000)] {
            let (a, rest) = (crc32c::crc32c(&b[..s]), crc32c::crc32c(&b[..e]));
            assert_eq!(z.shift(a, (e - s) as u64), crc32c::crc32c_combine(a, 0, e - s));
            assert_eq!(rest ^ z.shift(a, (e - s) as u64), crc32c::crc32c(&b[s..e]), "{s}..{e}");
        }
    }

    /// A record of `len` bytes (a transaction with one entry), encoded by hand.
    fn record(len: usize, ts: u64) -> Vec<u8> {
        let mut r = vec![0u8; len];
        r[4..8].copy_from_slice(&(len as u32).to_le_bytes());
        r[8..12].copy_from_slice(&format::KIND_TX.to_le_bytes());
        r[12..16].copy_from_slice(&1u32.to_le_bytes());
        r[16..24].copy_from_slice(&ts.to_le_bytes());
        r[32..36].copy_from_slice(&((len - 40) as u32).to_le_bytes());
        let crc = crc32c::crc32c(&r[4..]);
        r[..4].copy_from_slice(&crc.to_le_bytes());
        assert!(format::view_record(&r).is_ok());
        r
    }

    #[test]
    fn valid_after_finds_a_record_at_any_aligned_offset_and_nothing_in_garbage() {
        for at in [24usize, 32, 48, 1000, 4000] {
            let mut b = vec![0xA5u8; 4096 + 64];
            b[at..at + 64].copy_from_slice(&record(64, 9));
            assert_eq!(valid_after(&b).min_ts, Some(9), "record at {at}");
            // A second one: the smallest timestamp counts.
            b[at + 64..at + 128].copy_from_slice(&record(64, 5));
            assert_eq!(valid_after(&b).min_ts, Some(5), "records at {at}");
            b[at + 64..at + 128].copy_from_slice(&record(64, 12));
            assert_eq!(valid_after(&b), After { min_ts: Some(9), markers: 0 }, "records at {at}");
            // One bit off: no longer valid.
            b[at + 64 + 40] ^= 1;
            b[at + 40] ^= 1;
            assert_eq!(valid_after(&b), After::default(), "corrupted records at {at}");
        }
        // Before offset 24 does not count; zeros are the end of a chunk, never a record.
        let mut b = vec![0u8; 4096];
        b[..64].copy_from_slice(&record(64, 9));
        assert_eq!(valid_after(&b), After::default());
        assert_eq!(valid_after(&[]), After::default());
        assert_eq!(valid_after(&[1u8; 30]), After::default());
    }

    /// Crafted input that made the old loop (checksum the rest of each candidate's claimed
    /// length) quadratic: every 8-byte word claims a record reaching the end of the input.
    /// 1 MiB of it cost that loop ~2^36 bytes of crc32c; the linear scan does a few bytes of
    /// work per byte.
    #[test]
    fn valid_after_is_linear_on_records_claiming_the_whole_chunk() {
        let n = 1usize << 20;
        let mut b = vec![0u8; n];
        for at in (0..n).step_by(8) {
            let len = (n - at) as u32 & !7;
            b[at..at + 4].copy_from_slice(&0xDEAD_BEEFu32.to_le_bytes());
            b[at + 4..at + 8].copy_from_slice(&len.to_le_bytes());
        }
        let started = Instant::now();
        let (found, work) = valid_after_counting(&b);
        assert_eq!(found, After::default());
        assert!(work <= 2 * n as u64, "{work} units of work for {n} bytes: not linear");
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}", started.elapsed());
        // Every candidate's checksum matching (crafted the other way round) is bounded too.
        let mut b = vec![0u8; 1 << 14];
        let m = b.len();
        // Headers every 16 bytes (a header's kind and count words are the next 8-byte
        // position's checksum and length: count 0 makes that one no candidate).
        for at in (0..m).step_by(16).rev() {
            let len = (m - at) as u32;
            b[at + 4..at + 8].copy_from_slice(&len.to_le_bytes());
            b[at + 8..at + 12].copy_from_slice(&7u32.to_le_bytes()); // an unknown kind
            let crc = crc32c::crc32c(&b[at + 4..]);
            b[at..at + 4].copy_from_slice(&crc.to_le_bytes());
        }
        let (found, work) = valid_after_counting(&b);
        assert_eq!(found.min_ts, Some(0), "an exhausted budget answers \"followed by 0\"");
        assert!(work <= (2 + VALID_AFTER_FULL_CHECKS_PER_BYTE) * m as u64, "{work} for {m} bytes");
    }
}
