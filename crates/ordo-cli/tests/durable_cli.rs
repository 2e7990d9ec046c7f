//! `ordo inspect` and `ordo recover` on good and bad durable directories: reports on stdout,
//! one `error:` line and exit 1 for a bad directory, and nothing changed either way.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use ordo::durable::Mode;
use ordo::heap::{HeapConfig, SLAB_BYTES};
use ordo::{Config, Ordo};
use ordo_clock::LogicalClock;

fn make_db(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ordo-cli-durable-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = Config {
        heap: HeapConfig { region_bytes: 4 * SLAB_BYTES, regions_max: 4 },
        gc_interval_us: 0,
        ..Config::durable(&dir, Mode::Process)
    };
    let db = Ordo::open_durable(cfg, LogicalClock::starting_at).unwrap();
    for i in 0..50u64 {
        db.run(|tx| tx.alloc(&i)).unwrap();
    }
    dir
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
    let (code, out, _) = ordo(&["recover", d, "--json"]);
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
    for cmd in ["recover", "inspect"] {
        let (code, out, err) = ordo(&[cmd, dir.to_str().unwrap()]);
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
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&empty);
}
