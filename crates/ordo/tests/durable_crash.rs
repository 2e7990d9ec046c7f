//! Crash tests: a child process (this test binary, re-executed with `ORDO_CRASH_CHILD` set) runs
//! bank transfers on a durable database and appends an acknowledgement line for every commit
//! after `run` returned; the parent SIGKILLs it at a random point, recovers, and checks that
//! every acknowledged transfer is present (per-thread counters at least the acknowledged ones,
//! at most one ahead of that or of the previous recovery: a commit cut off before its ack),
//! nothing is half-applied (the bank total
//! is constant), and the next child carries on from the recovered state. Both modes survive a
//! process crash: the page cache keeps everything written with `pwrite`.
#![allow(clippy::unwrap_used, unreachable_pub)]

mod durable_common;

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use durable_common::*;
use ordo::durable::Mode;
use ordo::{Addr, Error};

const ACCOUNTS: usize = 8;
const THREADS: usize = 3;
const START: u64 = 1_000;
const ENV: &str = "ORDO_CRASH_CHILD";
/// Wall-clock budget per mode.
const BUDGET: Duration = Duration::from_secs(4);

fn mode_of(s: &str) -> Mode {
    if s == "sync" { Mode::Sync } else { Mode::Process }
}

/// The child: `ORDO_CRASH_CHILD = dir|mode|addr,addr,...` (accounts then thread counters).
#[test]
fn crash_child() {
    let Ok(spec) = std::env::var(ENV) else { return };
    let parts: Vec<&str> = spec.split('|').collect();
    let dir = Path::new(parts[0]).to_path_buf();
    let mode = mode_of(parts[1]);
    let addrs: Vec<Addr> =
        parts[2].split(',').map(|a| Addr::from_raw(a.parse().unwrap())).collect();
    let (accounts, seqs) = addrs.split_at(ACCOUNTS);
    // The background checkpointer runs often and the log is bounded, so kills also land
    // inside checkpoints and segment deletions.
    let mut cfg = config(&dir, mode, None);
    let d = cfg.durability.as_mut().unwrap();
    d.checkpoint_interval_ms = 20;
    d.log_segments_max = 3;
    let db = open(cfg).unwrap();
    let acks = std::sync::Mutex::new(
        std::fs::OpenOptions::new().append(true).create(true).open(dir.join("acks")).unwrap(),
    );
    std::thread::scope(|s| {
        for (t, &seq) in seqs.iter().enumerate() {
            let (db, acks) = (&db, &acks);
            s.spawn(move || {
                let mut rng = (std::process::id() as u64) << 8 | t as u64;
                loop {
                    rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let a = accounts[(rng >> 33) as usize % ACCOUNTS];
                    let b = accounts[(rng >> 45) as usize % ACCOUNTS];
                    let n = db
                        .run(|tx| {
                            let n: u64 = tx.read(seq)?;
                            let x: u64 = tx.read(a)?;
                            if a != b && x > 0 {
                                let y: u64 = tx.read(b)?;
                                tx.write(a, &(x - 1))?;
                                tx.write(b, &(y + 1))?;
                            }
                            tx.write(seq, &(n + 1))?;
                            Ok::<_, Error>(n + 1)
                        })
                        .unwrap();
                    // One write(2) per acknowledgement, after commit returned.
                    let line = format!("{t} {n}\n");
                    acks.lock().unwrap().write_all(line.as_bytes()).unwrap();
                }
            });
        }
    });
}

fn read_acks(dir: &Path) -> Vec<u64> {
    let mut max = vec![0u64; THREADS];
    let text = std::fs::read_to_string(dir.join("acks")).unwrap_or_default();
    for line in text.lines() {
        let mut it = line.split(' ');
        let (Some(t), Some(n)) = (it.next(), it.next()) else { continue };
        let (Ok(t), Ok(n)) = (t.parse::<usize>(), n.parse::<u64>()) else { continue };
        max[t] = max[t].max(n);
    }
    max
}

fn crash_loop(mode: Mode) {
    // Real files: the child process is killed, and its page cache must survive it.
    let dir = os_temp_dir(&format!("crash-{}", mode.name()));
    let addrs = {
        let db = open(config(&dir, mode, None)).unwrap();
        db.run(|tx| {
            let mut v = Vec::new();
            for _ in 0..ACCOUNTS {
                v.push(tx.alloc(&START)?);
            }
            for _ in 0..THREADS {
                v.push(tx.alloc(&0u64)?);
            }
            Ok::<_, Error>(v)
        })
        .unwrap()
    };
    let spec = format!(
        "{}|{}|{}",
        dir.display(),
        mode.name(),
        addrs.iter().map(|a| a.to_raw().to_string()).collect::<Vec<_>>().join(",")
    );
    let exe = std::env::current_exe().unwrap();
    let started = Instant::now();
    let (mut iterations, mut productive) = (0, 0);
    let mut last_acked = 0;
    // The recovered counters after the previous kill: the next child starts from them.
    let mut prev = vec![0u64; THREADS];
    while started.elapsed() < BUDGET || iterations < 3 {
        let mut child = std::process::Command::new(&exe)
            .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
            .env(ENV, &spec)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        let delay_ms = 30 + rand::random::<u64>() % 150;
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success(), "the child exited by itself: {status:?}");
        iterations += 1;

        let acked = read_acks(&dir);
        let db = open(config(&dir, mode, None)).unwrap();
        let (total, seqs) = db
            .run(|tx| {
                let mut total = 0;
                for a in &addrs[..ACCOUNTS] {
                    total += tx.read::<u64>(*a)?;
                }
                let seqs = addrs[ACCOUNTS..]
                    .iter()
                    .map(|s| tx.read::<u64>(*s))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok::<_, Error>((total, seqs))
            })
            .unwrap();
        let report = db.recovery_report().unwrap().clone();
        drop(db);
        assert_eq!(total, START * ACCOUNTS as u64, "half-applied state after kill {iterations}");
        for t in 0..THREADS {
            assert!(
                seqs[t] >= acked[t],
                "thread {t}: acknowledged {} but recovered {} ({report:?})",
                acked[t],
                seqs[t]
            );
            // At most one commit per child generation is cut off before its acknowledgement.
            let base = acked[t].max(prev[t]);
            assert!(seqs[t] <= base + 1, "thread {t}: {} beyond {base} + 1", seqs[t]);
        }
        prev = seqs;
        let sum: u64 = acked.iter().sum();
        if sum > last_acked {
            productive += 1;
        }
        last_acked = sum;
    }
    eprintln!(
        "{}: {iterations} kills ({productive} after new acknowledgements), {last_acked} transfers acknowledged",
        mode.name()
    );
    assert!(productive >= 2, "the children never committed anything before being killed");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigkill_process_mode() {
    crash_loop(Mode::Process);
}

#[test]
fn sigkill_sync_mode() {
    crash_loop(Mode::Sync);
}
