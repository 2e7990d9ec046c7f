//! The durable format's decoders on arbitrary and on mutated bytes (issue #16 item 4): the
//! segment header, the log record (transactions, parts, markers and their frontiers), the
//! manifest and the checkpoint file, segment file names, and `ordo inspect`'s code path
//! ([`ordo::durable::inspect`]) on database directories with a mutated or foreign file.
//!
//! Each decoder must refuse bad bytes with a typed error — [`DurableError::BadFile`] naming
//! the file and an offset inside the bytes it was given, or [`DurableError::FormatVersion`]
//! naming the file — never panic, and never allocate more than a bound proportional to its
//! input: this binary's global allocator records the largest single allocation (per case,
//! with the tests serialized by [`ONE_AT_A_TIME`]).
//!
//! Mutations are the classes a disk or a bug produces: bit flips, truncation, splices of one
//! part of the bytes over another, length and count fields set huge, and — since a checksum
//! stops almost every one of those at the first check — the same field mutations **resealed**
//! (checksum recomputed), which reach the checks behind the checksum.
//!
//! The same decoders are `cargo fuzz` targets for longer runs (`fuzz/` at the repository
//! root). Every proptest prints its seed (`ORDO_SEED=`) for replay.
#![allow(clippy::unwrap_used)] // test code: panics are the failure reports

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use ordo::durable::format::{
    self, Checkpoint, ENTRY_HEADER_BYTES, KIND_MARKER, KIND_TX, KIND_TX_PART, Manifest, NotRecord,
    RECORD_HEADER_BYTES, RecordBuf, SEGMENT_HEADER_BYTES, SegmentHeader,
};
use ordo::durable::io::RealStorage;
use ordo::durable::{DurableConfig, DurableError, Mode};
use ordo::heap::{HeapConfig, SLAB_BYTES};
use ordo::{Config, Ordo};
use ordo_clock::LogicalClock;
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Largest allocation

#[global_allocator]
static ALLOCATOR: ordo_testalloc::Largest = ordo_testalloc::Largest;

/// Serializes the tests of this binary, so the largest allocation seen during a case is that
/// case's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serialized() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

use ordo_testalloc::measured;

/// What a decoder of `input_bytes` may allocate at once: a fixed amount (error messages,
/// paths) plus a few bytes per input byte.
fn allocation_bound(input_bytes: usize) -> usize {
    64 * 1024 + 8 * input_bytes
}

// ---------------------------------------------------------------------------------------------
// Mutations

/// One change to a byte string.
#[derive(Clone, Debug)]
enum Mutation {
    /// XOR one byte (a bit flip or several).
    Flip { at: usize, mask: u8 },
    /// Keep only the first bytes.
    Truncate { len: usize },
    /// Copy `len` bytes from `from` over `to`.
    Splice { from: usize, to: usize, len: usize },
    /// Set a little-endian u32 (a length, count or kind field) to `value`.
    SetU32 { at: usize, value: u32 },
    /// Set a little-endian u64 (an address, timestamp or sequence field) to `value`.
    SetU64 { at: usize, value: u64 },
    /// Append bytes.
    Extend { bytes: Vec<u8> },
}

fn field_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(u32::MAX),
        Just(u32::MAX - 7),
        Just(1u32 << 31),
        Just(16u32),
        Just(24u32),
        Just(4096u32),
        (0u32..64).prop_map(|w| w * 8),
        any::<u32>(),
    ]
}

fn field_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(u64::MAX),
        Just(u64::MAX - 1),
        Just(1u64 << 48),
        Just(u64::from(u16::MAX) + 1),
        (0u64..8),
        any::<u64>(),
    ]
}

/// A mutation; offsets are drawn near `hot` (where the interesting fields are) or anywhere
/// below `span`, and wrapped to the input's length when applied.
fn mutation(hot: &'static [usize], span: usize) -> impl Strategy<Value = Mutation> {
    let at = prop_oneof![
        3 => (proptest::sample::select(hot), 0usize..40).prop_map(|(h, d)| h + d),
        1 => 0..span.max(1),
    ]
    .boxed();
    prop_oneof![
        4 => (at.clone(), 1u8..=255).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        2 => (0..span + 1).prop_map(|len| Mutation::Truncate { len }),
        2 => (0..span.max(1), at.clone(), 1usize..64)
            .prop_map(|(from, to, len)| Mutation::Splice { from, to, len }),
        4 => (at.clone(), field_u32()).prop_map(|(at, value)| Mutation::SetU32 { at, value }),
        2 => (at, field_u64()).prop_map(|(at, value)| Mutation::SetU64 { at, value }),
        1 => proptest::collection::vec(any::<u8>(), 1..64).prop_map(|bytes| Mutation::Extend { bytes }),
    ]
}

fn apply(b: &mut Vec<u8>, m: &Mutation) {
    let n = b.len();
    match m {
        Mutation::Flip { at, mask } if n > 0 => b[at % n] ^= mask,
        Mutation::Truncate { len } => b.truncate(*len),
        Mutation::Splice { from, to, len } if n > 0 => {
            let (from, to) = (from % n, to % n);
            let len = (*len).min(n - from).min(n - to);
            b.copy_within(from..from + len, to);
        }
        Mutation::SetU32 { at, value } if n >= 4 => {
            let at = (at % (n - 3)) & !3;
            b[at..at + 4].copy_from_slice(&value.to_le_bytes());
        }
        Mutation::SetU64 { at, value } if n >= 8 => {
            let at = (at % (n - 7)) & !7;
            b[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        Mutation::Extend { bytes } => b.extend_from_slice(bytes),
        _ => {}
    }
}

/// Recomputes a 64-byte metadata file's or a segment header's checksum (bytes 0..32 at 32).
fn reseal_header(b: &mut [u8]) {
    if b.len() >= 36 {
        let crc = crc32c::crc32c(&b[0..32]);
        b[32..36].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Recomputes the checksum of the record at `at` over its (possibly mutated) length, where
/// that length lies inside `b`.
fn reseal_record(b: &mut [u8], at: usize) {
    if at + RECORD_HEADER_BYTES > b.len() {
        return;
    }
    let len = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap()) as usize;
    if len >= 8 && at + len <= b.len() {
        let crc = crc32c::crc32c(&b[at + 4..at + len]);
        b[at..at + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

// ---------------------------------------------------------------------------------------------
// Checks on what a decoder returned

/// A decoder's error names `path` and, for a corrupt file, an offset inside its `len` bytes.
fn assert_names(e: &DurableError, path: &Path, len: usize) {
    match e {
        DurableError::BadFile { path: p, offset, reason } => {
            assert_eq!(p, path, "the error names the file: {e}");
            assert!(*offset <= len as u64, "offset {offset} beyond the {len} bytes: {e}");
            assert!(!reason.is_empty());
        }
        DurableError::FormatVersion { path: p, .. } => assert_eq!(p, path, "{e}"),
        other => panic!("not a decoding error: {other}"),
    }
}

/// Follows the records of `chunk` as recovery does and checks each one's structure; returns
/// how many were valid.
fn walk_records(chunk: &[u8]) -> usize {
    let mut pos = 0;
    let mut n = 0;
    while pos < chunk.len() {
        match format::view_record(&chunk[pos..]) {
            Ok(r) => {
                check_view(&chunk[pos..], &r);
                let d = format::decode_record(&chunk[pos..]).unwrap();
                assert_eq!((d.kind, d.ts, d.len_bytes), (r.kind, r.ts, r.len_bytes()));
                assert_eq!(d.entries.len(), r.count as usize);
                pos += r.len_bytes();
                n += 1;
            }
            Err(NotRecord::End) => break,
            Err(NotRecord::Bad { reason, .. }) => {
                assert!(!reason.is_empty());
                assert!(format::decode_record(&chunk[pos..]).is_err());
                break;
            }
        }
    }
    n
}

/// A record `view_record` accepted is what its header says, its entries inside it.
fn check_view(b: &[u8], r: &format::RecordView<'_>) {
    let len = r.len_bytes();
    assert!(len >= RECORD_HEADER_BYTES && len.is_multiple_of(8) && len <= b.len());
    assert!(matches!(r.kind, KIND_TX | KIND_MARKER | KIND_TX_PART));
    let mut bytes = RECORD_HEADER_BYTES;
    let mut count = 0;
    for (_, image) in r.entries() {
        assert_eq!(image.len() % 8, 0);
        bytes += ENTRY_HEADER_BYTES + image.len();
        count += 1;
    }
    assert_eq!((bytes, count), (len, r.count as usize), "entries fill the record exactly");
    match r.part() {
        Some((index, count)) => {
            assert_eq!(r.kind, KIND_TX_PART);
            assert!(index < count && count >= 2);
            assert_eq!(r.writes().count(), r.count as usize - 1);
        }
        None => assert_ne!(r.kind, KIND_TX_PART, "a part record has a tag"),
    }
    // Marker frontiers: entries of 16 bytes decode as `(chunk, end)` without panicking.
    if r.kind == KIND_MARKER {
        for (_, image) in r.entries().filter(|(_, i)| i.len() == 16) {
            let _ = (format::get_u64(image, 0), format::get_u64(image, 8));
        }
    }
}

/// `view_checked_record` on bytes `view_record` did not accept: wrong entries, never
/// out-of-bounds ones, and no panic from its accessors.
fn poke_unchecked(b: &[u8]) {
    for at in (0..b.len()).step_by(8) {
        let v = format::view_checked_record(&b[at..]);
        assert!(v.len_bytes() <= b.len() - at);
        let _ = v.part();
        let _ = v.entries().take(1024).count();
        let _ = v.writes().take(1024).count();
    }
}

// ---------------------------------------------------------------------------------------------
// Valid encodings

fn segment_header() -> impl Strategy<Value = SegmentHeader> {
    (any::<u64>(), 512u32..(1 << 20), 1u32..64, any::<bool>()).prop_map(
        |(seq, words, chunks, marked)| SegmentHeader {
            seq,
            chunk_bytes: words * 8,
            chunks,
            marked,
        },
    )
}

/// One record: a transaction of `entries` images, or a marker with a frontier.
#[derive(Clone, Debug)]
enum Rec {
    Tx { ts: u64, entries: Vec<(u64, Vec<u64>)> },
    Marker { ts: u64, frontier: Vec<(u64, u64, u64)> },
}

fn rec() -> impl Strategy<Value = Rec> {
    let image = proptest::collection::vec(any::<u64>(), 0..12);
    let addr =
        prop_oneof![any::<u64>(), (0u64..4, 0u64..(4 << 20)).prop_map(|(r, o)| (r << 48) | o)];
    prop_oneof![
        3 => (any::<u64>(), proptest::collection::vec((addr, image), 0..6))
            .prop_map(|(ts, entries)| Rec::Tx { ts, entries }),
        1 => (any::<u64>(), proptest::collection::vec((0u64..8, 0u64..4, 0u64..(1 << 16)), 0..4))
            .prop_map(|(ts, frontier)| Rec::Marker { ts, frontier }),
    ]
}

/// The bytes of a chunk holding `recs` back to back (a transaction larger than `part_bytes`
/// split into parts, as the log does), then `zeros` zero bytes; returns each record's offset.
fn chunk(recs: &[Rec], part_bytes: usize, zeros: usize) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::new();
    let mut at = Vec::new();
    let mut buf = RecordBuf::default();
    for r in recs {
        let bytes: Vec<Vec<u8>> = match r {
            Rec::Tx { ts, entries } => {
                buf.begin(KIND_TX, *ts);
                for (addr, words) in entries {
                    buf.entry_words(*addr, words.iter().copied());
                }
                let whole = buf.finish().to_vec();
                let mut parts = Vec::new();
                if whole.len() > part_bytes
                    && format::split_record(&whole, part_bytes, &mut parts).is_ok()
                    && parts.len() >= 2
                {
                    parts
                } else {
                    vec![whole]
                }
            }
            Rec::Marker { ts, frontier } => {
                buf.begin(KIND_MARKER, *ts);
                for (seq, chunk, end) in frontier {
                    buf.entry_words(*seq, [*chunk, *end]);
                }
                vec![buf.finish().to_vec()]
            }
        };
        for b in bytes {
            at.push(out.len());
            out.extend_from_slice(&b);
        }
    }
    out.resize(out.len() + zeros, 0);
    (out, at)
}

// ---------------------------------------------------------------------------------------------
// Segment headers

const HEADER_FIELDS: &[usize] = &[0, 8, 12, 16, 24, 28, 32];

proptest! {
    #![proptest_config(ordo_seed::proptest_config("segment_header_arbitrary_bytes", 3000))]

    #[test]
    fn segment_header_arbitrary_bytes(b in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _one = serialized();
        let path = Path::new("/d/log-00000001.seg");
        let mut b = b;
        // Half the cases start with the magic and a readable version, to get past the first
        // check.
        if b.len() >= 12 && b[0] & 1 == 0 {
            b[0..8].copy_from_slice(b"ORDOLOG\0");
            b[8..12].copy_from_slice(&format::FORMAT_VERSION.to_le_bytes());
            if b[1] & 1 == 0 {
                reseal_header(&mut b);
            }
        }
        let (r, largest) = measured(|| SegmentHeader::decode(path, &b));
        prop_assert!(largest <= allocation_bound(b.len()), "allocated {largest} bytes");
        match r {
            Ok(h) => {
                prop_assert!(h.chunk_bytes >= 4096 && h.chunk_bytes % 8 == 0 && h.chunks > 0);
            }
            Err(e) => assert_names(&e, path, b.len()),
        }
    }
}

proptest! {
    #![proptest_config(ordo_seed::proptest_config("segment_header_mutated", 3000))]

    #[test]
    fn segment_header_mutated(
        h in segment_header(),
        ms in proptest::collection::vec(mutation(HEADER_FIELDS, 64), 0..4),
        reseal in any::<bool>(),
    ) {
        let _one = serialized();
        let path = Path::new("/d/log-00000001.seg");
        let mut b = h.encode();
        prop_assert_eq!(SegmentHeader::decode(path, &b).unwrap(), h, "round trip");
        for m in &ms {
            apply(&mut b, m);
        }
        if reseal {
            reseal_header(&mut b);
        }
        let (r, largest) = measured(|| SegmentHeader::decode(path, &b));
        prop_assert!(largest <= allocation_bound(b.len()), "allocated {largest} bytes");
        match r {
            Ok(d) => prop_assert!(d.file_bytes() >= SEGMENT_HEADER_BYTES + 4096),
            Err(e) => assert_names(&e, path, b.len()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Records

proptest! {
    #![proptest_config(ordo_seed::proptest_config("records_arbitrary_bytes", 3000))]

    #[test]
    fn records_arbitrary_bytes(
        b in proptest::collection::vec(any::<u8>(), 0..400),
        len_at in 0usize..48,
        kind in 0u32..5,
    ) {
        let _one = serialized();
        let mut b = b;
        // Most random bytes fail the length check; give some a plausible header and a valid
        // checksum so the entry checks run on random entries.
        if b.len() >= RECORD_HEADER_BYTES + 8 && kind > 0 {
            let len = ((len_at * 8).max(RECORD_HEADER_BYTES)).min(b.len() & !7) as u32;
            b[4..8].copy_from_slice(&len.to_le_bytes());
            b[8..12].copy_from_slice(&kind.to_le_bytes());
            let count = u32::from(b[16]) % 5;
            b[12..16].copy_from_slice(&count.to_le_bytes());
            reseal_record(&mut b, 0);
        }
        let (n, largest) = measured(|| {
            poke_unchecked(&b);
            walk_records(&b)
        });
        prop_assert!(largest <= allocation_bound(b.len()), "allocated {largest} bytes");
        prop_assert!(n <= b.len() / RECORD_HEADER_BYTES);
    }
}

proptest! {
    #![proptest_config(ordo_seed::proptest_config("records_mutated", 5000))]

    #[test]
    fn records_mutated(
        recs in proptest::collection::vec(rec(), 1..5),
        part_bytes in 96usize..400,
        zeros in 0usize..64,
        ms in proptest::collection::vec(mutation(&[0, 4, 8, 12, 16, 24, 32, 40, 48], 512), 1..4),
        reseal in any::<bool>(),
        which in any::<proptest::sample::Index>(),
    ) {
        let _one = serialized();
        let (mut b, at) = chunk(&recs, part_bytes, zeros);
        // Unmutated, every record reads back.
        prop_assert_eq!(walk_records(&b), at.len());
        // Mutations land relative to one record (the offsets are near its fields).
        let r = at[which.index(at.len())];
        let mut tail = b.split_off(r);
        for m in &ms {
            apply(&mut tail, m);
        }
        if reseal {
            reseal_record(&mut tail, 0);
        }
        b.extend_from_slice(&tail);
        let (n, largest) = measured(|| {
            poke_unchecked(&b);
            walk_records(&b)
        });
        prop_assert!(largest <= allocation_bound(b.len()), "allocated {largest} bytes");
        prop_assert!(n <= b.len() / RECORD_HEADER_BYTES);
    }
}

// ---------------------------------------------------------------------------------------------
// Manifest and checkpoint files

proptest! {
    #![proptest_config(ordo_seed::proptest_config("metadata_files_mutated", 3000))]

    #[test]
    fn metadata_files_mutated(
        region_bytes in field_u64(),
        regions in field_u64(),
        ts in any::<u64>(),
        ms in proptest::collection::vec(mutation(&[0, 8, 16, 24, 32], 64), 0..4),
        reseal in any::<bool>(),
        arbitrary in proptest::option::weighted(0.2, proptest::collection::vec(any::<u8>(), 0..80)),
    ) {
        let _one = serialized();
        let dir = Path::new("/d");
        let m = Manifest { region_bytes, regions };
        let valid = region_bytes <= format::MANIFEST_REGION_BYTES_MAX
            && regions <= format::MANIFEST_REGIONS_MAX;
        let path = dir.join(format::MANIFEST);
        let decoded = Manifest::decode(&path, &m.encode());
        prop_assert_eq!(decoded.is_ok(), valid, "{:?}", decoded);
        // The checkpoint file as `write_checkpoint` lays it out.
        let c = Checkpoint { ts, heap_max_ts: ts.saturating_add(region_bytes % 1000) };
        let mut ck = m.encode();
        ck[0..8].copy_from_slice(b"ORDOCKPT");
        ck[16..24].copy_from_slice(&c.ts.to_le_bytes());
        ck[24..32].copy_from_slice(&c.heap_max_ts.to_le_bytes());
        reseal_header(&mut ck);
        let ck_path = dir.join(format::CHECKPOINT);
        prop_assert_eq!(Checkpoint::decode(&ck_path, &ck).unwrap(), c, "round trip");
        for (path, mut b) in [(path, m.encode()), (ck_path, ck)] {
            if let Some(a) = &arbitrary {
                b = a.clone();
            }
            for mu in &ms {
                apply(&mut b, mu);
            }
            if reseal {
                reseal_header(&mut b);
            }
            let (r, largest) = measured(|| {
                (Manifest::decode(&path, &b).map(|_| ()), Checkpoint::decode(&path, &b).map(|_| ()))
            });
            prop_assert!(largest <= allocation_bound(b.len()), "allocated {largest} bytes");
            for e in [r.0.err(), r.1.err()].into_iter().flatten() {
                assert_names(&e, &path, b.len());
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Segment file names

proptest! {
    #![proptest_config(ordo_seed::proptest_config("segment_names", 2000))]

    #[test]
    fn segment_names(
        name in prop_oneof![
            "log-[0-9+ -]{0,22}\\.seg",
            ".{0,30}",
            any::<u64>().prop_map(|s| format!("log-{s:08}.seg")),
        ],
    ) {
        // A name is a segment's exactly when it is the name `segment_file` gives its number.
        if let Some(seq) = format::parse_segment_name(&name) {
            let canonical = format::segment_file(Path::new("/d"), seq);
            prop_assert_eq!(canonical.file_name().unwrap().to_str().unwrap(), name.as_str());
        }
    }
}

#[test]
fn other_spellings_of_a_segment_number_are_not_segments() {
    assert_eq!(format::parse_segment_name("log-00000005.seg"), Some(5));
    assert_eq!(format::parse_segment_name("log-123456789.seg"), Some(123_456_789));
    for name in ["log-5.seg", "log-+0000005.seg", "log-000000005.seg", "log- 0000005.seg"] {
        assert_eq!(format::parse_segment_name(name), None, "{name}");
    }
}

#[test]
fn a_manifest_beyond_the_address_format_is_refused_with_its_offset() {
    let path = Path::new("/d/MANIFEST");
    let too_many = Manifest { region_bytes: 4 << 20, regions: 1 << 20 };
    let e = Manifest::decode(path, &too_many.encode()).unwrap_err();
    assert!(matches!(e, DurableError::BadFile { offset: 24, .. }), "{e}");
    let too_large = Manifest { region_bytes: u64::MAX, regions: 1 };
    let e = Manifest::decode(path, &too_large.encode()).unwrap_err();
    assert!(matches!(e, DurableError::BadFile { offset: 16, .. }), "{e}");
}

// ---------------------------------------------------------------------------------------------
// `ordo inspect` on mutated directories

/// A database directory's files: name and bytes, heap files by length only (inspect reads
/// only their length; they are recreated sparse).
struct Template {
    files: Vec<(String, Vec<u8>)>,
    heaps: Vec<(String, u64)>,
}

fn template(mode: Mode) -> &'static Template {
    static PROCESS: OnceLock<Template> = OnceLock::new();
    static SYNC: OnceLock<Template> = OnceLock::new();
    let cell = if mode == Mode::Process { &PROCESS } else { &SYNC };
    cell.get_or_init(|| {
        let dir = temp_dir(&format!("template-{}", mode.name()));
        let mut d = DurableConfig::new(&dir, mode);
        d.chunk_bytes = 16 << 10;
        d.chunks_per_segment = 2;
        d.checkpoint_interval_ms = 0;
        d.log_segments_max = 0;
        d.preallocate_segments = false;
        let cfg = Config {
            heap: HeapConfig { region_bytes: 4 * SLAB_BYTES, regions_max: 4, ..Default::default() },
            gc_interval_us: 0,
            threads_max: 4,
            durability: Some(d),
            ..Config::default()
        };
        let db = Ordo::open_durable(cfg, LogicalClock::starting_at).unwrap();
        let addrs: Vec<_> = (0..40u64).map(|i| db.run(|tx| tx.alloc(&[i; 3])).unwrap()).collect();
        for (i, a) in addrs.iter().enumerate().take(20) {
            db.run(|tx| tx.write(*a, &[i as u64 + 100; 3])).unwrap();
        }
        // Checkpoint half way in sync mode, so the directory has a CHECKPOINT file too.
        if mode == Mode::Sync {
            db.checkpoint().unwrap();
            for a in &addrs[20..] {
                db.run(|tx| tx.write(*a, &[7u64; 3])).unwrap();
            }
        }
        drop(db);
        let mut t = Template { files: Vec::new(), heaps: Vec::new() };
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".heap") {
                t.heaps.push((name, e.metadata().unwrap().len()));
            } else {
                t.files.push((name, std::fs::read(e.path()).unwrap()));
            }
        }
        t.files.sort();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(t.files.iter().any(|(n, _)| n.ends_with(".seg")), "the template has a log");
        t
    })
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ordo-decode-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What happens to a directory before `inspect` reads it.
#[derive(Clone, Debug)]
enum DirChange {
    /// Mutate the `file`th file (mod the count): in a segment with `record`, relative to the
    /// start of its first chunk's `record`th record (mod the count; [`LAST`]: the last one),
    /// otherwise relative to the file's start; then recompute that record's or the header's
    /// checksum when `reseal`.
    Mutate { file: usize, record: Option<usize>, ms: Vec<Mutation>, reseal: bool },
    /// Replace the `file`th file's bytes.
    Replace { file: usize, bytes: Vec<u8> },
    /// Remove the `file`th file.
    Remove { file: usize },
    /// Add a file named like a segment (or another file of the format).
    Add { name: String, bytes: Vec<u8> },
}

/// The last record of a chunk ([`DirChange::Mutate`]): a torn tail when it goes bad.
const LAST: usize = usize::MAX;

const DIR_HOT: &[usize] = &[0, 4, 8, 12, 16, 24, 28, 32, 40, 48, 64];

fn dir_change() -> impl Strategy<Value = DirChange> {
    prop_oneof![
        6 => (
            0usize..8,
            proptest::option::weighted(0.7, prop_oneof![Just(LAST), 0usize..64]),
            proptest::collection::vec(mutation(DIR_HOT, 40_000), 1..4),
            any::<bool>(),
        )
            .prop_map(|(file, record, ms, reseal)| DirChange::Mutate { file, record, ms, reseal }),
        1 => (0usize..8, proptest::collection::vec(any::<u8>(), 0..300))
            .prop_map(|(file, bytes)| DirChange::Replace { file, bytes }),
        1 => (0usize..8).prop_map(|file| DirChange::Remove { file }),
        1 => (
            prop_oneof![
                (0u64..4).prop_map(|s| format!("log-{s:08}.seg")),
                Just("CHECKPOINT".to_string()),
                Just("MEMBER".to_string()),
                Just("x.tmp".to_string()),
            ],
            proptest::collection::vec(any::<u8>(), 0..300),
        )
            .prop_map(|(name, bytes)| DirChange::Add { name, bytes }),
    ]
}

fn materialize(t: &Template, dir: &Path, change: &DirChange) -> usize {
    for (name, len) in &t.heaps {
        std::fs::File::create(dir.join(name)).unwrap().set_len(*len).unwrap();
    }
    let mut files = t.files.clone();
    let n = files.len();
    match change {
        DirChange::Mutate { file, record, ms, reseal } => {
            let (name, b) = &mut files[file % n];
            let chunk = SEGMENT_HEADER_BYTES as usize;
            let starts = if name.ends_with(".seg") && b.len() > chunk {
                record_starts(&b[chunk..])
            } else {
                Vec::new()
            };
            let at = match record {
                Some(k) if !starts.is_empty() => chunk + starts[(*k).min(starts.len() - 1)],
                _ => 0,
            };
            let mut tail = b.split_off(at);
            for m in ms {
                apply(&mut tail, m);
            }
            if *reseal {
                if at == 0 { reseal_header(&mut tail) } else { reseal_record(&mut tail, 0) }
            }
            b.extend_from_slice(&tail);
        }
        DirChange::Replace { file, bytes } => files[file % n].1 = bytes.clone(),
        DirChange::Remove { file } => {
            files.remove(file % n);
        }
        DirChange::Add { name, bytes } => {
            files.retain(|(n, _)| n != name);
            files.push((name.clone(), bytes.clone()));
        }
    }
    for (name, b) in &files {
        std::fs::write(dir.join(name), b).unwrap();
    }
    files.iter().map(|(_, b)| b.len()).sum()
}

/// The offsets of the valid records at the start of `chunk`.
fn record_starts(chunk: &[u8]) -> Vec<usize> {
    let mut at = Vec::new();
    let mut pos = 0;
    while let Ok(r) = format::view_record(&chunk[pos..]) {
        at.push(pos);
        pos += r.len_bytes();
    }
    at
}

fn inspect_case(mode: Mode, change: &DirChange) -> Result<(), TestCaseError> {
    let t = template(mode);
    let dir = temp_dir(&format!("case-{}", mode.name()));
    let bytes = materialize(t, &dir, change);
    let (r, largest) = measured(|| ordo::durable::inspect(&RealStorage, &dir));
    match &r {
        Ok(report) => prop_assert!(report.segments <= 8),
        Err(e) => {
            let named = match e {
                DurableError::BadFile { path, .. }
                | DurableError::FormatVersion { path, .. }
                | DurableError::HeapFile { path, .. }
                | DurableError::Io { path, .. } => path.starts_with(&dir),
                DurableError::NoDatabase { dir: d } => d == &dir,
                _ => false,
            };
            prop_assert!(named, "the error names a file of the directory: {e}");
            if let DurableError::BadFile { path, offset, .. } = e {
                let len = std::fs::metadata(path).map_or(0, |m| m.len());
                prop_assert!(*offset <= len, "offset {offset} beyond {len} bytes: {e}");
            }
        }
    }
    // The scan gathers a few words per record: proportional to the log, never to a field.
    prop_assert!(largest <= (1 << 20) + 8 * bytes, "allocated {largest} bytes for {bytes}");
    std::fs::remove_dir_all(&dir).unwrap();
    Ok(())
}

proptest! {
    #![proptest_config(ordo_seed::proptest_config("inspect_mutated_directory", 1000))]

    #[test]
    fn inspect_mutated_directory(sync in any::<bool>(), change in dir_change()) {
        let _one = serialized();
        inspect_case(if sync { Mode::Sync } else { Mode::Process }, &change)?;
    }
}

#[test]
fn inspect_reads_the_unmutated_templates() {
    let _one = serialized();
    for mode in [Mode::Process, Mode::Sync] {
        let t = template(mode);
        let dir = temp_dir(&format!("clean-{}", mode.name()));
        let unchanged = DirChange::Mutate { file: 0, record: None, ms: Vec::new(), reseal: false };
        materialize(t, &dir, &unchanged);
        let r = ordo::durable::inspect(&RealStorage, &dir).unwrap();
        assert!(r.records > 0 && r.torn.is_empty(), "{mode:?}: {r:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A sparse segment file many GiB long — its header resealed to claim that many chunks, or
/// left as it was — is refused before it is mapped: `BadFile` naming the file, for `inspect`
/// (the default maximum) and for an open (its configured `segment_bytes_max`). Before the
/// bound, the scan mapped the 8 GiB whole and walked its half a million chunks.
#[test]
fn a_sparse_huge_segment_is_refused_before_it_is_mapped() {
    let _one = serialized();
    let t = template(Mode::Sync);
    let huge: u64 = 8 << 30;
    for reseal in [true, false] {
        let dir = temp_dir(&format!("huge-{reseal}"));
        let unchanged = DirChange::Mutate { file: 0, record: None, ms: Vec::new(), reseal: false };
        materialize(t, &dir, &unchanged);
        let (name, _) = t.files.iter().find(|(n, _)| n.ends_with(".seg")).unwrap();
        let path = dir.join(name);
        let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        if reseal {
            let mut head = vec![0u8; 36];
            std::os::unix::fs::FileExt::read_exact_at(&f, &mut head, 0).unwrap();
            let h = SegmentHeader::decode(&path, &head).unwrap();
            let chunks = ((huge - SEGMENT_HEADER_BYTES) / h.chunk_bytes as u64) as u32;
            let h = SegmentHeader { chunks, ..h };
            assert!(h.file_bytes() > ordo::durable::SEGMENT_BYTES_MAX_DEFAULT);
            std::os::unix::fs::FileExt::write_all_at(&f, &h.encode(), 0).unwrap();
            f.set_len(h.file_bytes()).unwrap();
        } else {
            f.set_len(huge).unwrap();
        }
        drop(f);
        let started = std::time::Instant::now();
        let (r, largest) = measured(|| ordo::durable::inspect(&RealStorage, &dir));
        match r {
            Err(DurableError::BadFile { path: p, reason, .. }) => {
                assert_eq!(p, path, "{reason}");
                assert!(reason.contains("maximum segment size"), "{reason}");
            }
            other => panic!("reseal {reseal}: a {huge}-byte segment was accepted: {other:?}"),
        }
        assert!(largest < 1 << 20, "allocated {largest} bytes");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        // An open refuses it with its own maximum as well (here a smaller one).
        let mut d = DurableConfig::new(&dir, Mode::Sync);
        d.chunk_bytes = 16 << 10;
        d.chunks_per_segment = 2;
        d.segment_bytes_max = 1 << 20;
        let cfg = Config {
            heap: HeapConfig { region_bytes: 4 * SLAB_BYTES, regions_max: 4, ..Default::default() },
            durability: Some(d),
            ..Config::default()
        };
        match Ordo::open_durable(cfg, LogicalClock::starting_at) {
            Err(ordo::Error::Durable(e)) => match &*e {
                DurableError::BadFile { path: p, reason, .. } => assert_eq!(p, &path, "{reason}"),
                e => panic!("reseal {reseal}: unexpected error {e}"),
            },
            Err(e) => panic!("reseal {reseal}: unexpected error {e}"),
            Ok(_) => panic!("reseal {reseal}: opened over a {huge}-byte segment"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn segments_longer_than_their_maximum_are_a_configuration_error() {
    let dir = temp_dir("segment-max-config");
    let mut d = DurableConfig::new(&dir, Mode::Sync);
    d.segment_bytes_max = d.chunk_bytes as u64 * d.chunks_per_segment as u64; // no room for the header
    let cfg = Config { durability: Some(d), ..Config::default() };
    match Ordo::open_durable(cfg, LogicalClock::starting_at) {
        Err(ordo::Error::Config(reason)) => {
            assert!(reason.contains("segment_bytes_max"), "{reason}")
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("opened with segments longer than segment_bytes_max"),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
