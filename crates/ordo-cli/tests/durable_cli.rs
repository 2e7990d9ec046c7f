//! `ordo inspect`, `ordo recover --dry-run` and `ordo recover` on good and bad durable
//! directories: reports on stdout, one `error:` line and exit 1 for a bad directory (nothing
//! changed), no byte changed by the read-only commands, and a recovered directory that reopens
//! with its data and nothing left to replay.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use ordo::durable::Mode;
use ordo::heap::{HeapConfig, SLAB_BYTES};
use ordo::{Addr, Config, Ordo};
use ordo_clock::LogicalClock;

fn config(dir: &Path) -> Config {
    let mut cfg = Config {
        heap: HeapConfig { region_bytes: 4 * SLAB_BYTES, regions_max: 4, ..Default::default() },
        gc_interval_us: 0,
        ..Config::durable(dir, Mode::Process)
    };
    if let Some(d) = cfg.durability.as_mut() {
        // No background checkpoint: every commit stays in the log until recovery.
        d.checkpoint_interval_ms = 0;
    }
    cfg
}

/// A process-mode database with 50 committed allocations (object `i` holds `i`), closed
/// without a checkpoint: its files are what a `kill -9` after the last commit leaves (process
/// mode's records are in the files; the heap files hold none of them).
fn make_db_with(name: &str) -> (PathBuf, Vec<Addr>) {
    let dir = std::env::temp_dir().join(format!("ordo-cli-durable-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Ordo::open_durable(config(&dir), LogicalClock::starting_at).unwrap();
    let addrs = (0..50u64).map(|i| db.run(|tx| tx.alloc(&i)).unwrap()).collect();
    (dir, addrs)
}

fn make_db(name: &str) -> PathBuf {
    make_db_with(name).0
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())
        })
        .collect();
    v.sort();
    v
}

fn ordo(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ordo")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn inspect_and_recover_report_without_changing_anything() {
    let dir = make_db("good");
    let before = files(&dir);
    let d = dir.to_str().unwrap();
    let (code, out, err) = ordo(&["inspect", d]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("records              50"), "{out}");
    assert!(out.contains("log-00000000.seg"), "{out}");
    let (code, out, _) = ordo(&["recover", "--dry-run", d, "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["records_to_replay"], 50);
    assert_eq!(v["regions"], 1);
    assert_eq!(before, files(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_directories_give_one_error_line_and_exit_1() {
    let dir = make_db("bad");
    let seg = dir.join("log-00000000.seg");
    let mut b = std::fs::read(&seg).unwrap();
    // A flipped byte in the first record, with valid records after it: corruption, not a tail.
    b[4096 + 30] ^= 0xFF;
    std::fs::write(&seg, &b).unwrap();
    let before = files(&dir);
    for cmd in [&["recover"][..], &["recover", "--dry-run"], &["inspect"]] {
        let (code, out, err) = ordo(&[cmd, &[dir.to_str().unwrap()]].concat());
        assert_eq!(code, 1, "{out}{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("error: "), "{err}");
        assert!(err.contains("log-00000000.seg") && err.contains("offset 4096"), "{err}");
    }
    assert_eq!(before, files(&dir));
    let empty = std::env::temp_dir().join(format!("ordo-cli-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let (code, _, err) = ordo(&["recover", empty.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("no MANIFEST"), "{err}");
    assert!(std::fs::read_dir(&empty).unwrap().next().is_none(), "recover created files");
    let missing = empty.join("missing");
    for cmd in [&["recover"][..], &["recover", "--dry-run"], &["inspect"]] {
        let (code, _, err) = ordo(&[cmd, &[missing.to_str().unwrap()]].concat());
        assert_eq!(code, 1, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("missing does not exist"), "{err}");
    }
    assert!(!missing.exists());
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&empty);
}

/// `ordo inspect` and `ordo recover --dry-run` on files a disk or a bug could leave (random
/// bytes, truncation, fields valid under their checksum but impossible, a foreign file with a
/// segment-like name): one `error:` line naming the file and offset, exit 1, no panic, nothing
/// changed — or, for the foreign file, a report that ignores it. The decoders' randomized
/// tests are `crates/ordo/tests/durable_decode.rs`; this checks the binary around them.
#[test]
fn inspect_of_corrupt_files_names_the_file_and_offset() {
    use ordo::durable::format::{Manifest, SegmentHeader};
    let header = |chunks: u32, chunk_bytes: u32| {
        SegmentHeader { seq: 0, chunk_bytes, chunks, marked: false }.encode()
    };
    let junk: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    enum Change {
        /// The file's bytes become these.
        Write(Vec<u8>),
        /// The segment's header page becomes this one, its records kept.
        Header(Vec<u8>),
        /// The file is cut to this length.
        Truncate(u64),
    }
    let manifest = |region_bytes, regions| Manifest { region_bytes, regions }.encode();
    let seg = "log-00000000.seg";
    // (file, change, what the error must say; None: no error)
    let cases: Vec<(&str, Change, Option<&str>)> = vec![
        ("MANIFEST", Change::Write(manifest(4 << 20, 1 << 20)), Some("offset 24")),
        ("MANIFEST", Change::Write(manifest(u64::MAX, 1)), Some("offset 16")),
        ("MANIFEST", Change::Write(junk[..64].to_vec()), Some("offset 0")),
        (seg, Change::Write(junk.clone()), Some("offset 0")),
        (seg, Change::Truncate(5000), Some("offset 5000")),
        (seg, Change::Header(header(u32::MAX, 0xFFFF_FFF8)), Some("segment truncated")),
        (seg, Change::Header(header(1, 4095)), Some("offset 12")),
        ("CHECKPOINT", Change::Write(junk[..64].to_vec()), Some("offset 0")),
        ("log-5.seg", Change::Write(junk.clone()), None),
    ];
    for (i, (name, change, expect)) in cases.into_iter().enumerate() {
        let dir = make_db(&format!("corrupt-{i}"));
        let path = dir.join(name);
        match change {
            Change::Write(bytes) => std::fs::write(&path, bytes).unwrap(),
            Change::Header(page) => {
                let mut b = std::fs::read(&path).unwrap();
                b[..page.len()].copy_from_slice(&page);
                std::fs::write(&path, b).unwrap();
            }
            Change::Truncate(len) => {
                std::fs::File::options().write(true).open(&path).unwrap().set_len(len).unwrap()
            }
        }
        let before = files(&dir);
        for cmd in [&["inspect"][..], &["recover", "--dry-run"]] {
            let (code, out, err) = ordo(&[cmd, &[dir.to_str().unwrap()]].concat());
            assert!(!err.contains("panicked"), "{name}: {err}");
            match expect {
                Some(what) => {
                    assert_eq!(code, 1, "{name}: {out}{err}");
                    assert_eq!(err.lines().count(), 1, "{name}: {err}");
                    assert!(err.starts_with("error: "), "{name}: {err}");
                    assert!(err.contains(name) && err.contains(what), "{name}: {err}");
                }
                None => assert_eq!(code, 0, "{name}: {out}{err}"),
            }
        }
        assert_eq!(before, files(&dir), "{name}: a read-only command changed the directory");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The hash of every file's name and bytes in `dir`.
fn hash_dir(dir: &Path) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    files(dir).hash(&mut h);
    h.finish()
}

#[test]
fn recover_replays_the_log_and_the_directory_reopens_with_nothing_to_replay() {
    let (dir, addrs) = make_db_with("recover");
    let d = dir.to_str().unwrap();
    let before = hash_dir(&dir);
    let (code, out, err) = ordo(&["recover", "--dry-run", d, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["records_to_replay"], 50);
    assert_eq!(before, hash_dir(&dir), "--dry-run changed the directory");

    let (code, out, err) = ordo(&["recover", d]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("replayed             50 records, 50 transactions"), "{out}");
    assert!(out.contains("segments deleted     1"), "{out}");
    assert!(out.contains("recovered            ok in"), "{out}");
    assert_ne!(before, hash_dir(&dir), "recover changed nothing");
    let names: Vec<String> = files(&dir).into_iter().map(|(n, _)| n).collect();
    assert!(!names.iter().any(|n| n.ends_with(".seg")), "{names:?}");

    // Nothing left: a dry run, a second recovery and an open all find an empty log.
    let (code, out, err) = ordo(&["recover", "--dry-run", d, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["records_to_replay"], 0);
    assert_eq!(v["segments"], 0);
    let (code, out, err) = ordo(&["inspect", d]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("records to replay    0"), "{out}");
    let (code, out, err) = ordo(&["recover", d, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["records_replayed"], 0);

    let db = Ordo::open_durable(config(&dir), LogicalClock::starting_at).unwrap();
    assert_eq!(db.recovery_report().unwrap().records_replayed, 0);
    for (i, a) in addrs.iter().enumerate() {
        assert_eq!(db.run(|tx| tx.read::<u64>(*a)).unwrap(), i as u64);
    }
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn recover_refuses_a_directory_open_in_another_process() {
    let dir = make_db("locked");
    let db = Ordo::open_durable(config(&dir), LogicalClock::starting_at).unwrap();
    let before = hash_dir(&dir);
    for cmd in [&["recover"][..], &["recover", "--dry-run"], &["inspect"]] {
        let (code, out, err) = ordo(&[cmd, &[dir.to_str().unwrap()]].concat());
        assert_eq!(code, 1, "{out}{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("is in use by another open database"), "{err}");
    }
    assert_eq!(before, hash_dir(&dir));
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}
