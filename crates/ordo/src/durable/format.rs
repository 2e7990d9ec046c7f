//! The on-disk format of a durable database directory.
//!
//! ```text
//! DIR/MANIFEST           64 B   magic "ORDOMANI" | version u32 | 0 u32 | region_bytes u64
//!                               | regions u64 | crc32c u32 of bytes 0..32
//! DIR/CHECKPOINT         64 B   magic "ORDOCKPT" | version u32 | 0 u32 | C u64 | H u64
//!                               | crc32c u32 of bytes 0..32 (H: no heap image is newer)
//! DIR/region-NNNNN.heap         the persistent image of region NNNNN (region_bytes, sparse)
//! DIR/log-SSSSSSSS.seg          a log segment: a 4 KiB header, then `chunks` chunks
//! ```
//!
//! Segment header: magic "ORDOLOG\0" | version u32 | chunk_bytes u32 | seq u64 | chunks u32 |
//! mode u32 (1 = process: every valid record counts; 2 = sync: records count up to the marker) |
//! crc32c u32 of bytes 0..32. A chunk has one writer for its whole life — a thread in process
//! mode, the group-commit stream in sync mode (whose records are in staging order, not quite
//! timestamp order) — and holds its records back to back from its start; the zero bytes after
//! the last record end it.
//!
//! Record (8-byte aligned):
//! ```text
//! 0  crc32c u32 of bytes 4..len     4  len u32 (whole record, multiple of 8)
//! 8  kind u32 (1 = transaction, 2 = marker)   12 entries u32
//! 16 wts u64 (transaction) or D (marker)
//! 24 entries: addr u64 | len u32 | 0 u32 | len bytes of image, zero-padded to 8
//! ```
//! A marker's entries are its frontier: addr = a segment's seq, image = chunk u64 | end u64,
//! the byte offset inside that chunk its records must reach for the marker to be trusted.
//! An entry's image is copied verbatim to `addr` at replay: an object image is its 16-byte
//! header (`ALLOC | wts`, `len << 40`, no old-version pointer) and payload; an allocation also
//! carries its slab's header word so recovery knows the slab's size class.
//!
//! Small metadata files (MANIFEST, CHECKPOINT) are replaced atomically: temp file, `fdatasync`,
//! rename, `fsync` of the directory.

use std::path::{Path, PathBuf};

use super::DurableError;
use super::io::Storage;

/// The format version this build reads and writes.
///
/// * 1 — markers were written after the flush of the records they cover.
/// * 2 — a marker is written before the round's one flush and names its frontier (the chunk
///   ends it covers); recovery trusts it only where the frontier holds. A version-1 reader
///   would trust such a marker blindly, so version 2 directories are refused by it.
/// * 3 — a transaction record too large for one chunk is written as **parts**
///   ([`KIND_TX_PART`]), each naming its index and the number of parts; recovery and the
///   checkpointer apply a transaction's parts only when all are present. Version 2 files hold
///   no parts and are read as they are; a version-2 reader refuses version 3 files (it would
///   apply half a transaction).
pub const FORMAT_VERSION: u32 = 3;
/// The oldest format version this build reads.
pub const FORMAT_VERSION_OLDEST_READ: u32 = 2;
/// Bytes of a segment header (chunks start after it).
pub const SEGMENT_HEADER_BYTES: u64 = 4096;
/// Bytes of a record header.
pub const RECORD_HEADER_BYTES: usize = 24;
/// Bytes of an entry header.
pub const ENTRY_HEADER_BYTES: usize = 16;
/// Record kind: a transaction's writes.
pub const KIND_TX: u32 = 1;
/// Record kind: a durable marker.
pub const KIND_MARKER: u32 = 2;
/// Record kind: one part of a transaction's writes too large for one chunk. Its first entry is
/// the **part tag** (address [`PART_TAG_ADDR`], image `index u64 | count u64`), the others are
/// writes; the parts of one transaction share its `wts`.
pub const KIND_TX_PART: u32 = 3;
/// The address field of a part tag entry (no heap address is this large).
pub const PART_TAG_ADDR: u64 = u64::MAX;
/// Bytes a part record spends on its header and part tag.
pub const PART_OVERHEAD_BYTES: usize = RECORD_HEADER_BYTES + ENTRY_HEADER_BYTES + 16;

// Records and entries keep the 8-byte alignment of everything after them; chunks start on a
// page after the header page.
const _: () = assert!(RECORD_HEADER_BYTES.is_multiple_of(8));
const _: () = assert!(ENTRY_HEADER_BYTES.is_multiple_of(8));
const _: () = assert!(SEGMENT_HEADER_BYTES.is_multiple_of(4096));
const _: () = assert!(PART_OVERHEAD_BYTES.is_multiple_of(8));

const MANIFEST_MAGIC: &[u8; 8] = b"ORDOMANI";
const CHECKPOINT_MAGIC: &[u8; 8] = b"ORDOCKPT";
const SEGMENT_MAGIC: &[u8; 8] = b"ORDOLOG\0";

/// The manifest's file name.
pub const MANIFEST: &str = "MANIFEST";
/// The checkpoint timestamp's file name.
pub const CHECKPOINT: &str = "CHECKPOINT";
/// Present (empty) in a cluster member's directory: the member holds only the region ids it is
/// primary or backup of, so region files below the manifest's count may be absent. Without it a
/// missing region file is an error (a deleted heap file).
pub const MEMBER: &str = "MEMBER";

/// The heap file of a region.
pub fn region_file(dir: &Path, region: u16) -> PathBuf {
    dir.join(format!("region-{region:05}.heap"))
}

/// The file of log segment `seq`.
pub fn segment_file(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("log-{seq:08}.seg"))
}

/// The sequence number of a segment file name, if it is one: exactly the name
/// [`segment_file`] gives that number. Another spelling of a number (`log-5.seg`, `log-+5.seg`)
/// is not a segment, or recovery would open a file that is not there, or one segment twice.
pub fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("log-")?.strip_suffix(".seg")?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let seq: u64 = digits.parse().ok()?;
    (format!("{seq:08}") == digits).then_some(seq)
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
/// Reads a little-endian u32 (the caller checked the bounds).
pub fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}
/// Reads a little-endian u64 (the caller checked the bounds).
pub fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// The most regions a manifest may name: region ids are `u16` ([`crate::Addr`]) and the heap
/// allows at most `u16::MAX` of them.
pub const MANIFEST_REGIONS_MAX: u64 = u16::MAX as u64;
/// The largest region a manifest may name: offsets inside a region have 48 bits
/// ([`crate::Addr`]).
pub const MANIFEST_REGION_BYTES_MAX: u64 = 1 << 48;

/// What the manifest records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// Bytes per region.
    pub region_bytes: u64,
    /// Regions created (each has a heap file).
    pub regions: u64,
}

/// A log segment's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Sequence number (also in the file name).
    pub seq: u64,
    /// Bytes per chunk.
    pub chunk_bytes: u32,
    /// Number of chunks.
    pub chunks: u32,
    /// Whether records count only up to the marker (sync mode).
    pub marked: bool,
}

impl SegmentHeader {
    /// The file's full length.
    pub fn file_bytes(&self) -> u64 {
        SEGMENT_HEADER_BYTES + self.chunk_bytes as u64 * self.chunks as u64
    }

    /// Encodes the header page.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; SEGMENT_HEADER_BYTES as usize];
        b[0..8].copy_from_slice(SEGMENT_MAGIC);
        put_u32(&mut b, 8, FORMAT_VERSION);
        put_u32(&mut b, 12, self.chunk_bytes);
        put_u64(&mut b, 16, self.seq);
        put_u32(&mut b, 24, self.chunks);
        put_u32(&mut b, 28, if self.marked { 2 } else { 1 });
        let crc = crc32c::crc32c(&b[0..32]);
        put_u32(&mut b, 32, crc);
        b
    }

    /// Decodes a header page read from `path`; an error names the offset of the field at
    /// fault.
    pub fn decode(path: &Path, b: &[u8]) -> Result<Self, DurableError> {
        let bad = |offset: u64, reason: &str| DurableError::BadFile {
            path: path.to_path_buf(),
            offset,
            reason: reason.into(),
        };
        if b.len() < 36 || &b[0..8] != SEGMENT_MAGIC {
            return Err(bad(0, "not a log segment (bad magic or shorter than its header)"));
        }
        check_version(path, get_u32(b, 8))?;
        if crc32c::crc32c(&b[0..32]) != get_u32(b, 32) {
            return Err(bad(32, "segment header checksum mismatch"));
        }
        let mode = get_u32(b, 28);
        let h = SegmentHeader {
            seq: get_u64(b, 16),
            chunk_bytes: get_u32(b, 12),
            chunks: get_u32(b, 24),
            marked: mode == 2,
        };
        if h.chunk_bytes < 4096 || !h.chunk_bytes.is_multiple_of(8) {
            return Err(bad(12, "segment header has an impossible chunk size"));
        }
        if h.chunks == 0 {
            return Err(bad(24, "segment header names no chunks"));
        }
        if mode != 1 && mode != 2 {
            return Err(bad(28, "segment header has an unknown durability mode"));
        }
        Ok(h)
    }
}

fn io_err(path: &Path, op: &'static str) -> impl FnOnce(std::io::Error) -> DurableError {
    let path = path.to_path_buf();
    move |source| DurableError::Io { op, path, source }
}

/// Replaces `dir/name` with `bytes` atomically (temp, fdatasync, rename, fsync dir).
pub fn write_atomic(
    storage: &dyn Storage,
    dir: &Path,
    name: &str,
    bytes: &[u8],
) -> Result<(), DurableError> {
    let tmp = dir.join(format!("{name}.tmp"));
    let f = storage.create(&tmp).map_err(io_err(&tmp, "create"))?;
    f.write_at(bytes, 0).map_err(io_err(&tmp, "write"))?;
    f.sync_data().map_err(io_err(&tmp, "fdatasync"))?;
    drop(f);
    let path = dir.join(name);
    storage.rename(&tmp, &path).map_err(io_err(&path, "rename"))?;
    storage.sync_dir(dir).map_err(io_err(dir, "fsync directory"))
}

fn read_small(storage: &dyn Storage, path: &Path) -> Result<Vec<u8>, DurableError> {
    let f = storage.open(path, false).map_err(io_err(path, "open"))?;
    let len = f.len_bytes().map_err(io_err(path, "stat"))?.min(4096) as usize;
    let mut b = vec![0u8; len];
    f.read_at(&mut b, 0).map_err(io_err(path, "read"))?;
    Ok(b)
}

/// A file of `version` is readable: [`FORMAT_VERSION_OLDEST_READ`] up to [`FORMAT_VERSION`].
fn check_version(path: &Path, version: u32) -> Result<(), DurableError> {
    if (FORMAT_VERSION_OLDEST_READ..=FORMAT_VERSION).contains(&version) {
        return Ok(());
    }
    Err(DurableError::FormatVersion {
        path: path.to_path_buf(),
        found: version,
        supported: FORMAT_VERSION,
    })
}

fn check_small(path: &Path, b: &[u8], magic: &[u8; 8], crc_at: usize) -> Result<(), DurableError> {
    let bad = |offset: usize, reason: &str| DurableError::BadFile {
        path: path.to_path_buf(),
        offset: offset as u64,
        reason: reason.into(),
    };
    if b.len() < crc_at + 4 || &b[0..8] != magic {
        return Err(bad(0, "bad magic or short file"));
    }
    check_version(path, get_u32(b, 8))?;
    if crc32c::crc32c(&b[0..crc_at]) != get_u32(b, crc_at) {
        return Err(bad(crc_at, "checksum mismatch"));
    }
    Ok(())
}

impl Manifest {
    /// Encodes the manifest.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        b[0..8].copy_from_slice(MANIFEST_MAGIC);
        put_u32(&mut b, 8, FORMAT_VERSION);
        put_u64(&mut b, 16, self.region_bytes);
        put_u64(&mut b, 24, self.regions);
        let crc = crc32c::crc32c(&b[0..32]);
        put_u32(&mut b, 32, crc);
        b
    }

    /// Reads `dir/MANIFEST`.
    pub fn read(storage: &dyn Storage, dir: &Path) -> Result<Self, DurableError> {
        let path = dir.join(MANIFEST);
        Manifest::decode(&path, &read_small(storage, &path)?)
    }

    /// Decodes the manifest bytes read from `path`: magic, version, checksum, and a geometry
    /// the address format can hold (a region count beyond the `u16` region ids would make
    /// recovery open region files under wrapped ids).
    pub fn decode(path: &Path, b: &[u8]) -> Result<Self, DurableError> {
        check_small(path, b, MANIFEST_MAGIC, 32)?;
        let m = Manifest { region_bytes: get_u64(b, 16), regions: get_u64(b, 24) };
        let bad = |offset: u64, reason: String| DurableError::BadFile {
            path: path.to_path_buf(),
            offset,
            reason,
        };
        if m.region_bytes > MANIFEST_REGION_BYTES_MAX {
            return Err(bad(16, format!("region size {} beyond 2^48 bytes", m.region_bytes)));
        }
        if m.regions > MANIFEST_REGIONS_MAX {
            return Err(bad(24, format!("{} regions, beyond {MANIFEST_REGIONS_MAX}", m.regions)));
        }
        Ok(m)
    }

    /// Replaces `dir/MANIFEST` atomically.
    pub fn write(&self, storage: &dyn Storage, dir: &Path) -> Result<(), DurableError> {
        write_atomic(storage, dir, MANIFEST, &self.encode())
    }
}

/// The checkpoint file's two timestamps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// C: every record at or below it is in the heap files.
    pub ts: u64,
    /// H: no heap image is newer (set before a checkpoint writes images, so an interrupted
    /// checkpoint cannot leave versions the recovered clock does not know about).
    pub heap_max_ts: u64,
}

/// Reads the checkpoint file of `dir` (zeros when no checkpoint was written yet).
pub fn read_checkpoint(storage: &dyn Storage, dir: &Path) -> Result<Checkpoint, DurableError> {
    let path = dir.join(CHECKPOINT);
    let names = storage.list(dir).map_err(io_err(dir, "list"))?;
    if !names.iter().any(|n| n == CHECKPOINT) {
        return Ok(Checkpoint::default());
    }
    Checkpoint::decode(&path, &read_small(storage, &path)?)
}

impl Checkpoint {
    /// Decodes the checkpoint bytes read from `path`.
    pub fn decode(path: &Path, b: &[u8]) -> Result<Self, DurableError> {
        check_small(path, b, CHECKPOINT_MAGIC, 32)?;
        Ok(Checkpoint { ts: get_u64(b, 16), heap_max_ts: get_u64(b, 24) })
    }
}

/// Replaces the checkpoint file atomically.
pub fn write_checkpoint(
    storage: &dyn Storage,
    dir: &Path,
    c: Checkpoint,
) -> Result<(), DurableError> {
    // H is announced before a checkpoint writes images up to its new C, and never lowered.
    debug_assert!(c.heap_max_ts >= c.ts, "no heap image is older than the checkpoint says");
    let mut b = vec![0u8; 64];
    b[0..8].copy_from_slice(CHECKPOINT_MAGIC);
    put_u32(&mut b, 8, FORMAT_VERSION);
    put_u64(&mut b, 16, c.ts);
    put_u64(&mut b, 24, c.heap_max_ts);
    let crc = crc32c::crc32c(&b[0..32]);
    put_u32(&mut b, 32, crc);
    write_atomic(storage, dir, CHECKPOINT, &b)
}

/// Builds one record in a reusable buffer.
#[derive(Debug, Default)]
pub struct RecordBuf {
    buf: Vec<u8>,
    entries: u32,
}

impl RecordBuf {
    /// Starts a record of `kind` stamped `ts`.
    pub fn begin(&mut self, kind: u32, ts: u64) {
        self.buf.clear();
        self.buf.resize(RECORD_HEADER_BYTES, 0);
        put_u32(&mut self.buf, 8, kind);
        put_u64(&mut self.buf, 16, ts);
        self.entries = 0;
    }

    /// Adds an entry whose image is `words` (little-endian u64s).
    pub fn entry_words(&mut self, addr: u64, words: impl IntoIterator<Item = u64>) {
        let at = self.buf.len();
        self.buf.extend_from_slice(&addr.to_le_bytes());
        self.buf.extend_from_slice(&[0u8; 8]);
        let start = self.buf.len();
        for w in words {
            self.buf.extend_from_slice(&w.to_le_bytes());
        }
        let len = (self.buf.len() - start) as u32;
        put_u32(&mut self.buf, at + 8, len);
        self.entries += 1;
    }

    /// Adds an entry whose image is `image` (a multiple of 8 bytes, as every image in a
    /// record is).
    pub fn entry_bytes(&mut self, addr: u64, image: &[u8]) {
        debug_assert_eq!(image.len() % 8, 0, "an image is whole words");
        self.buf.extend_from_slice(&addr.to_le_bytes());
        self.buf.extend_from_slice(&(image.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(&[0u8; 4]);
        self.buf.extend_from_slice(image);
        self.entries += 1;
    }

    /// Seals the record (length and checksum) and returns its bytes.
    pub fn finish(&mut self) -> &[u8] {
        debug_assert!(self.buf.len() >= RECORD_HEADER_BYTES, "finish after begin");
        debug_assert!(self.buf.len().is_multiple_of(8), "a record is whole words");
        debug_assert!(self.buf.len() <= u32::MAX as usize, "a record's length fits its field");
        let len = self.buf.len() as u32;
        put_u32(&mut self.buf, 4, len);
        put_u32(&mut self.buf, 12, self.entries);
        let crc = crc32c::crc32c(&self.buf[4..]);
        put_u32(&mut self.buf, 0, crc);
        &self.buf
    }
}

/// One decoded record, borrowing its chunk's bytes.
#[derive(Debug)]
pub struct RecordRef<'a> {
    /// [`KIND_TX`] or [`KIND_MARKER`].
    pub kind: u32,
    /// The write timestamp, or the marker value.
    pub ts: u64,
    /// `(addr, image)` pairs.
    pub entries: Vec<(u64, &'a [u8])>,
    /// Bytes the record occupies.
    pub len_bytes: usize,
}

/// Why the bytes at a position are not a record.
#[derive(Debug, PartialEq, Eq)]
pub enum NotRecord {
    /// Zero length: the end of the chunk's records.
    End,
    /// A torn or corrupt record; `ts_field` is what its timestamp field holds (untrusted).
    Bad {
        /// The raw timestamp field.
        ts_field: u64,
        /// What is wrong.
        reason: &'static str,
    },
}

/// A checked record, borrowing its chunk's bytes; its entries are decoded on demand
/// ([`RecordView::entries`]) without allocating.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    /// [`KIND_TX`] or [`KIND_MARKER`].
    pub kind: u32,
    /// The write timestamp, or the marker value.
    pub ts: u64,
    /// Number of entries.
    pub count: u32,
    /// The record's bytes (`len_bytes` of them).
    bytes: &'a [u8],
}

impl<'a> RecordView<'a> {
    /// Bytes the record occupies.
    pub fn len_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The `(addr, image)` entries, in record order (a part's tag included).
    pub fn entries(&self) -> Entries<'a> {
        Entries { bytes: self.bytes, at: RECORD_HEADER_BYTES }
    }

    /// A record of transaction writes: a whole transaction or one part of one.
    pub fn is_tx(&self) -> bool {
        self.kind == KIND_TX || self.kind == KIND_TX_PART
    }

    /// `(index, count)` of a part record ([`KIND_TX_PART`]).
    pub fn part(&self) -> Option<(u64, u64)> {
        if self.kind != KIND_TX_PART {
            return None;
        }
        // A record `view_record` accepted has a 16-byte tag; `view_checked_record` of other
        // bytes may not (then this is `None`, never an out-of-bounds read).
        let (_, tag) = self.entries().next()?;
        if tag.len() != 16 {
            return None;
        }
        Some((get_u64(tag, 0), get_u64(tag, 8)))
    }

    /// The writes: the entries without a part's tag.
    pub fn writes(&self) -> Entries<'a> {
        let mut e = self.entries();
        if self.kind == KIND_TX_PART {
            e.next();
        }
        e
    }
}

/// Splits the finished transaction record `rec`, longer than `max_bytes`, into part records
/// of at most `max_bytes` each, whole entries per part, in entry order (appended to `out`).
/// `Err` carries the size of an entry that does not fit a part by itself.
pub fn split_record(rec: &[u8], max_bytes: usize, out: &mut Vec<Vec<u8>>) -> Result<(), usize> {
    let v = view_checked_record(rec);
    let room = max_bytes.saturating_sub(PART_OVERHEAD_BYTES);
    // Part boundaries first: the count goes into every part's tag.
    let mut sizes = Vec::new();
    let mut used = 0usize;
    for (_, image) in v.entries() {
        let e = ENTRY_HEADER_BYTES + image.len();
        if e > room {
            return Err(e);
        }
        if used + e > room || sizes.is_empty() {
            sizes.push(0usize);
            used = 0;
        }
        used += e;
        if let Some(n) = sizes.last_mut() {
            *n += 1;
        }
    }
    let count = sizes.len() as u64;
    debug_assert!(count >= 2 || rec.len() <= max_bytes, "a record longer than a part splits");
    let mut entries = v.entries();
    let mut buf = RecordBuf::default();
    for (index, n) in sizes.into_iter().enumerate() {
        buf.begin(KIND_TX_PART, v.ts);
        buf.entry_words(PART_TAG_ADDR, [index as u64, count]);
        for (addr, image) in entries.by_ref().take(n) {
            buf.entry_bytes(addr, image);
        }
        let part = buf.finish();
        debug_assert!(part.len() <= max_bytes, "a part fits where the record did not");
        out.push(part.to_vec());
    }
    debug_assert!(entries.next().is_none(), "the parts hold every entry");
    Ok(())
}

/// The entries of a checked record ([`RecordView::entries`]).
#[derive(Clone, Debug)]
pub struct Entries<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Entries<'a> {
    type Item = (u64, &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        // The record was checked by `view_record`: entry headers and images lie inside it.
        let b = self.bytes;
        if self.at + ENTRY_HEADER_BYTES > b.len() {
            return None;
        }
        let addr = get_u64(b, self.at);
        let start = self.at + ENTRY_HEADER_BYTES;
        let end = start + get_u32(b, self.at + 8) as usize;
        self.at = end;
        b.get(start..end).map(|image| (addr, image))
    }
}

/// Checks the record at the start of `b` (length, checksum in one call over the record, kind,
/// entry structure) without allocating.
#[inline]
pub fn view_record(b: &[u8]) -> Result<RecordView<'_>, NotRecord> {
    if b.len() < RECORD_HEADER_BYTES {
        return Err(NotRecord::End);
    }
    let len = get_u32(b, 4) as usize;
    let ts = get_u64(b, 16);
    if len == 0 && get_u32(b, 0) == 0 {
        return Err(NotRecord::End);
    }
    let bad = |reason| Err(NotRecord::Bad { ts_field: ts, reason });
    if len < RECORD_HEADER_BYTES || !len.is_multiple_of(8) || len > b.len() {
        return bad("impossible record length");
    }
    if crc32c::crc32c(&b[4..len]) != get_u32(b, 0) {
        return bad("checksum mismatch");
    }
    let kind = get_u32(b, 8);
    let count = get_u32(b, 12);
    if kind != KIND_TX && kind != KIND_MARKER && kind != KIND_TX_PART {
        return bad("unknown record kind");
    }
    let mut at = RECORD_HEADER_BYTES;
    for _ in 0..count {
        if at + ENTRY_HEADER_BYTES > len {
            return bad("entry header past the record's end");
        }
        let elen = get_u32(b, at + 8) as usize;
        let start = at + ENTRY_HEADER_BYTES;
        if !elen.is_multiple_of(8) || start + elen > len {
            return bad("entry past the record's end");
        }
        at = start + elen;
    }
    if at != len {
        return bad("record length does not match its entries");
    }
    if kind == KIND_TX_PART {
        // The tag: the first entry, 16 bytes at the part tag address, index < count, 2+ parts.
        let h = RECORD_HEADER_BYTES;
        let tagged = count >= 1
            && get_u64(b, h) == PART_TAG_ADDR
            && get_u32(b, h + 8) == 16
            && get_u64(b, h + ENTRY_HEADER_BYTES) < get_u64(b, h + ENTRY_HEADER_BYTES + 8)
            && get_u64(b, h + ENTRY_HEADER_BYTES + 8) >= 2;
        if !tagged {
            return bad("transaction part without a valid part tag");
        }
    }
    Ok(RecordView { kind, ts, count, bytes: &b[..len] })
}

/// The record at the start of `b`, which [`view_record`] already accepted (its bytes have not
/// changed since): header fields only, no checksum. On bytes that are not such a record it
/// returns wrong entries, never out-of-bounds ones.
pub fn view_checked_record(b: &[u8]) -> RecordView<'_> {
    if b.len() < RECORD_HEADER_BYTES {
        return RecordView { kind: 0, ts: 0, count: 0, bytes: &[] };
    }
    let len = (get_u32(b, 4) as usize).clamp(RECORD_HEADER_BYTES, b.len());
    RecordView { kind: get_u32(b, 8), ts: get_u64(b, 16), count: get_u32(b, 12), bytes: &b[..len] }
}

/// Decodes the record at the start of `b`, its entries collected.
pub fn decode_record(b: &[u8]) -> Result<RecordRef<'_>, NotRecord> {
    let v = view_record(b)?;
    Ok(RecordRef {
        kind: v.kind,
        ts: v.ts,
        entries: v.entries().collect(),
        len_bytes: v.len_bytes(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_splits_into_tagged_parts_of_whole_entries() {
        let mut r = RecordBuf::default();
        r.begin(KIND_TX, 77);
        for i in 0..10u64 {
            r.entry_words(0x1000 * (i + 1), (0..20).map(|w| w * i));
        }
        let whole = r.finish().to_vec();
        let mut parts = Vec::new();
        split_record(&whole, 600, &mut parts).unwrap();
        // 176-byte entries, 544 bytes of room per part: 3 entries per part, 4 parts.
        assert_eq!(parts.len(), 4);
        let mut writes = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            assert!(p.len() <= 600);
            let v = view_record(p).unwrap();
            assert_eq!((v.kind, v.ts, v.part()), (KIND_TX_PART, 77, Some((i as u64, 4))));
            writes.extend(v.writes().map(|(a, img)| (a, img.to_vec())));
        }
        let original: Vec<(u64, Vec<u8>)> =
            view_record(&whole).unwrap().writes().map(|(a, img)| (a, img.to_vec())).collect();
        assert_eq!(writes, original, "the parts hold every entry once, in order");
        // An entry larger than a part is refused with its size.
        assert_eq!(split_record(&whole, 200, &mut Vec::new()), Err(ENTRY_HEADER_BYTES + 160));
    }

    #[test]
    fn a_part_without_a_valid_tag_is_not_a_record() {
        let mut r = RecordBuf::default();
        r.begin(KIND_TX_PART, 5);
        r.entry_words(0x1000, [1u64, 2]); // no tag
        assert!(matches!(view_record(r.finish()), Err(NotRecord::Bad { .. })));
        r.begin(KIND_TX_PART, 5);
        r.entry_words(PART_TAG_ADDR, [3u64, 3]); // index not below count
        assert!(matches!(view_record(r.finish()), Err(NotRecord::Bad { .. })));
    }

    #[test]
    fn versions_two_and_three_are_read_others_refused() {
        let p = Path::new("x");
        assert!(check_version(p, 2).is_ok() && check_version(p, FORMAT_VERSION).is_ok());
        assert!(matches!(check_version(p, 1), Err(DurableError::FormatVersion { found: 1, .. })));
        assert!(check_version(p, FORMAT_VERSION + 1).is_err());
    }

    #[test]
    fn records_round_trip_and_detect_flips() {
        let mut r = RecordBuf::default();
        r.begin(KIND_TX, 42);
        r.entry_words(0x1000, [1u64, 2, 3]);
        r.entry_words(0x2000, [9u64]);
        let bytes = r.finish().to_vec();
        let d = decode_record(&bytes).unwrap();
        assert_eq!(d.ts, 42);
        assert_eq!(d.entries.len(), 2);
        assert_eq!(d.entries[1].0, 0x2000);
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(decode_record(&b).is_err(), "flip at {i} undetected");
        }
        assert_eq!(decode_record(&[0u8; 64]).unwrap_err(), NotRecord::End);
    }
}
