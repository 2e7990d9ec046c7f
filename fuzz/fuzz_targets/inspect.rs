//! `ordo inspect`'s code path (`ordo::durable::inspect`, recovery's scan of a whole directory)
//! on a real database directory with one file changed: a report, or a typed error naming a
//! file of the directory (and, for a corrupt one, an offset inside it), never a panic.
//!
//! Two template directories (process and sync mode, a few dozen commits, the sync one with a
//! checkpoint) are made once per process. Input: `mode u8 | file u8 | op u8 | at u32 LE |
//! payload`; `file` picks one of the template's files (heap files excluded: inspect reads only
//! their length), `op & 7`:
//!
//! * 0: the file's bytes become the payload;
//! * 1: the payload is XORed into the file at `at` (mod its length);
//! * 2: the file is cut to `at` (mod its length + 1);
//! * 3: the payload is written over the file at `at` (mod its length);
//! * 4: a file `log-0000000N.seg` (N = `at & 3`) with the payload is added;
//! * 5: the file is removed;
//!
//! and `op & 0x80` then recomputes a checksum where the change landed: the segment header's
//! or small file's (bytes 0..32) below 4096, else the record of the first chunk that starts
//! at or before `at` — so mutations reach the checks behind the checksums.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use ordo::durable::format::{self, SEGMENT_HEADER_BYTES};
use ordo::durable::io::RealStorage;
use ordo::durable::{DurableConfig, DurableError, Mode};
use ordo::heap::{HeapConfig, SLAB_BYTES};
use ordo::{Config, Ordo};
use ordo_clock::LogicalClock;

struct Template {
    files: Vec<(String, Vec<u8>)>,
    heaps: Vec<(String, u64)>,
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ordo-fuzz-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

fn make_template(mode: Mode) -> Template {
    let dir = scratch(&format!("template-{}", mode.name()));
    let mut d = DurableConfig::new(&dir, mode);
    d.chunk_bytes = 16 << 10;
    d.chunks_per_segment = 2;
    d.checkpoint_interval_ms = 0;
    d.log_segments_max = 0;
    d.preallocate_segments = false;
    let cfg = Config {
        heap: HeapConfig { region_bytes: 4 * SLAB_BYTES, regions_max: 4 },
        gc_interval_us: 0,
        threads_max: 4,
        durability: Some(d),
        ..Config::default()
    };
    let db = Ordo::open_durable(cfg, LogicalClock::starting_at).expect("open the template");
    let addrs: Vec<_> =
        (0..40u64).map(|i| db.run(|tx| tx.alloc(&[i; 3])).expect("commit")).collect();
    for (i, a) in addrs.iter().enumerate().take(20) {
        db.run(|tx| tx.write(*a, &[i as u64 + 100; 3])).expect("commit");
    }
    if mode == Mode::Sync {
        db.checkpoint().expect("checkpoint");
        for a in &addrs[20..] {
            db.run(|tx| tx.write(*a, &[7u64; 3])).expect("commit");
        }
    }
    drop(db);
    let mut t = Template { files: Vec::new(), heaps: Vec::new() };
    for e in std::fs::read_dir(&dir).expect("list the template") {
        let e = e.expect("list the template");
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".heap") {
            t.heaps.push((name, e.metadata().expect("stat").len()));
        } else {
            t.files.push((name, std::fs::read(e.path()).expect("read the template")));
        }
    }
    t.files.sort();
    let _ = std::fs::remove_dir_all(&dir);
    t
}

fn template(mode: Mode) -> &'static Template {
    static PROCESS: OnceLock<Template> = OnceLock::new();
    static SYNC: OnceLock<Template> = OnceLock::new();
    let cell = if mode == Mode::Process { &PROCESS } else { &SYNC };
    cell.get_or_init(|| make_template(mode))
}

fn reseal(name: &str, b: &mut [u8], at: usize) {
    if at < SEGMENT_HEADER_BYTES as usize || !name.ends_with(".seg") {
        if b.len() >= 36 {
            let crc = crc32c::crc32c(&b[0..32]);
            b[32..36].copy_from_slice(&crc.to_le_bytes());
        }
        return;
    }
    // The record of the first chunk that starts at or before `at`.
    let chunk = SEGMENT_HEADER_BYTES as usize;
    let mut pos = chunk;
    let mut start = None;
    while pos <= at && pos < b.len() {
        match format::view_record(&b[pos..]) {
            Ok(r) => {
                start = Some(pos);
                pos += r.len_bytes();
            }
            Err(_) => {
                start = Some(pos);
                break;
            }
        }
    }
    let Some(s) = start else { return };
    if s + 8 > b.len() {
        return;
    }
    let len = u32::from_le_bytes([b[s + 4], b[s + 5], b[s + 6], b[s + 7]]) as usize;
    if len >= 8 && s + len <= b.len() {
        let crc = crc32c::crc32c(&b[s + 4..s + len]);
        b[s..s + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

fn check(dir: &Path, r: Result<ordo::durable::RecoveryReport, DurableError>) {
    let Err(e) = r else { return };
    match &e {
        DurableError::BadFile { path, offset, .. } => {
            assert!(path.starts_with(dir), "{e}");
            let len = std::fs::metadata(path).map_or(0, |m| m.len());
            assert!(*offset <= len, "offset beyond the file: {e}");
        }
        DurableError::FormatVersion { path, .. }
        | DurableError::HeapFile { path, .. }
        | DurableError::Io { path, .. } => assert!(path.starts_with(dir), "{e}"),
        DurableError::NoDatabase { dir: d } => assert_eq!(d, dir),
        other => panic!("not an error about the directory's files: {other}"),
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 7 {
        return;
    }
    let mode = if data[0] & 1 == 0 { Mode::Process } else { Mode::Sync };
    let t = template(mode);
    let at = u32::from_le_bytes([data[3], data[4], data[5], data[6]]) as usize;
    let (op, payload) = (data[2], &data[7..]);
    let mut files = t.files.clone();
    let i = data[1] as usize % files.len();
    let n = files[i].1.len();
    let mut touched = at;
    let mut resealed = i;
    match op & 7 {
        0 => files[i].1 = payload.to_vec(),
        1 if n > 0 => {
            touched = at % n;
            for (k, x) in payload.iter().enumerate() {
                files[i].1[(touched + k) % n] ^= x;
            }
        }
        2 => files[i].1.truncate(at % (n + 1)),
        3 if n > 0 => {
            touched = at % n;
            let end = (touched + payload.len()).min(n);
            files[i].1[touched..end].copy_from_slice(&payload[..end - touched]);
        }
        4 => {
            let added = format!("log-{:08}.seg", at & 3);
            files.retain(|(f, _)| *f != added);
            files.push((added, payload.to_vec()));
            resealed = files.len() - 1;
        }
        5 => {
            files.remove(i);
        }
        _ => {}
    }
    if op & 0x80 != 0 && op & 7 != 5 {
        let (name, b) = &mut files[resealed];
        reseal(name, b, touched);
    }
    let dir = scratch("case");
    for (name, len) in &t.heaps {
        std::fs::File::create(dir.join(name))
            .and_then(|f| f.set_len(*len))
            .expect("create a heap file");
    }
    for (name, b) in &files {
        std::fs::write(dir.join(name), b).expect("write a file");
    }
    check(&dir, ordo::durable::inspect(&RealStorage, &dir));
});
