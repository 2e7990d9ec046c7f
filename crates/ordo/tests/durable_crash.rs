//! Crash tests: a child process (this test binary, re-executed as `durable_crash crash-child
//! SPEC`) runs bank transfers on a durable database and appends an acknowledgement line for
//! every commit after `run` returned; the parent SIGKILLs it at a random point, recovers, and
//! checks that every acknowledged transfer is present (per-thread counters at least the
//! acknowledged ones, at most one ahead of that or of the previous recovery: a commit cut off
//! before its ack), nothing is half-applied (the bank total is constant), and the next child
//! carries on from the recovered state. Both modes survive a
//! process crash: the page cache keeps everything written with `pwrite`.
//!
//! The binary has its own `main` (`harness = false` in `Cargo.toml`), so the child is not a
//! test: running the binary runs the two crash loops (a name filter, `--exact`, `--skip` and
//! `--list` work as with libtest), and only the explicit `crash-child` argument, which the
//! parent passes, makes a child — which runs until it is killed and fails if it ever returns.
//!
//! Randomness comes from one `ordo_seed` seed per loop (printed as `ORDO_SEED=<n>`): the kill
//! delays and each child's choice of accounts. `ORDO_SEED=<n>` replays those choices; where the
//! kills land in the children's work also depends on scheduling, which no seed fixes.
//! `ORDO_TRIALS=<n>` runs exactly `n` kills per mode instead of the time budget
//! (`scripts/soak.sh`).
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
/// The argument that makes this binary a crash child.
const CHILD_ARG: &str = "crash-child";
/// Kills per mode instead of the time budget.
const TRIALS_ENV: &str = "ORDO_TRIALS";
/// Wall-clock budget per mode.
const BUDGET: Duration = Duration::from_secs(4);

fn mode_of(s: &str) -> Mode {
    if s == "sync" { Mode::Sync } else { Mode::Process }
}

/// The child: `SPEC = dir|mode|seed|addr,addr,...` (accounts then thread counters). Runs
/// transfers until killed.
fn crash_child(spec: &str) {
    let parts: Vec<&str> = spec.split('|').collect();
    let dir = Path::new(parts[0]).to_path_buf();
    let mode = mode_of(parts[1]);
    let seed: u64 = parts[2].parse().unwrap();
    let addrs: Vec<Addr> =
        parts[3].split(',').map(|a| Addr::from_raw(a.parse().unwrap())).collect();
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
                let mut rng = seed ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
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
    let seed = ordo_seed::Seed::new(&format!("sigkill_{}_mode", mode.name()));
    let trials: Option<u64> = std::env::var(TRIALS_ENV).ok().map(|t| {
        t.parse().unwrap_or_else(|_| panic!("{TRIALS_ENV}={t:?} is not a number of trials"))
    });
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
    let addr_list = addrs.iter().map(|a| a.to_raw().to_string()).collect::<Vec<_>>().join(",");
    let exe = std::env::current_exe().unwrap();
    let started = Instant::now();
    let (mut iterations, mut productive) = (0, 0);
    let mut last_acked = 0;
    // The recovered counters after the previous kill: the next child starts from them.
    let mut prev = vec![0u64; THREADS];
    // The largest acknowledgement per thread over every generation so far.
    let mut acked_max = vec![0u64; THREADS];
    loop {
        let more = match trials {
            Some(n) => iterations < n,
            None => started.elapsed() < BUDGET || iterations < 3,
        };
        if !more {
            break;
        }
        let iteration_seed = seed.derive(iterations);
        let spec = format!("{}|{}|{iteration_seed}|{addr_list}", dir.display(), mode.name());
        let mut child = std::process::Command::new(&exe)
            .args([CHILD_ARG, &spec])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        let delay_ms = 30 + (iteration_seed >> 16) % 150;
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success(), "the child exited by itself: {status:?}");
        iterations += 1;

        // This generation's acknowledgements, folded into every earlier one's; then the file
        // starts empty for the next child (read whole each time, it made trial n cost O(n)).
        let mut acked = read_acks(&dir);
        for (a, m) in acked.iter_mut().zip(&acked_max) {
            *a = (*a).max(*m);
        }
        acked_max.clone_from(&acked);
        std::fs::File::create(dir.join("acks")).unwrap();
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
    // (`ORDO_TRIALS=1` makes one kill: then one productive kill is all there can be.)
    assert!(
        productive >= iterations.min(2),
        "the children never committed anything before being killed"
    );
    // The line `scripts/soak.sh` reads: every kill is a trial; each acknowledged transfer was
    // checked after every later kill.
    println!(
        "soak sigkill {}: {iterations} passed, 0 failed; {last_acked} acknowledged transactions \
         checked ({productive} kills after new acknowledgements)",
        mode.name()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The tests of this binary.
const TESTS: [(&str, fn()); 2] = [
    ("sigkill_process_mode", || crash_loop(Mode::Process)),
    ("sigkill_sync_mode", || crash_loop(Mode::Sync)),
];

/// libtest's command line, as far as this binary needs it.
#[derive(Default)]
struct Args {
    filters: Vec<String>,
    skip: Vec<String>,
    exact: bool,
    list: bool,
    ignored: bool,
}

impl Args {
    fn parse(args: &[String]) -> Args {
        let mut a = Args::default();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--exact" => a.exact = true,
                "--list" => a.list = true,
                "--ignored" => a.ignored = true,
                "--skip" => a.skip.extend(it.next().cloned()),
                // Options with a value that this binary does not use.
                "--format" | "--color" | "--test-threads" | "--logfile" | "-Z" => {
                    it.next();
                }
                s if s.starts_with('-') => {}
                s => a.filters.push(s.to_string()),
            }
        }
        a
    }

    fn selects(&self, name: &str) -> bool {
        let hit = |f: &String| if self.exact { name == f } else { name.contains(f.as_str()) };
        !self.ignored
            && (self.filters.is_empty() || self.filters.iter().any(hit))
            && !self.skip.iter().any(|s| name.contains(s.as_str()))
    }
}

fn main() -> std::process::ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some(CHILD_ARG) {
        match argv.get(1) {
            Some(spec) => crash_child(spec),
            None => eprintln!("usage: durable_crash {CHILD_ARG} SPEC"),
        }
        // A child runs until it is killed: returning is a failure the parent sees.
        return std::process::ExitCode::FAILURE;
    }
    let args = Args::parse(&argv);
    let selected: Vec<_> = TESTS.iter().filter(|(name, _)| args.selects(name)).collect();
    if args.list {
        for (name, _) in &selected {
            println!("{name}: test");
        }
        return std::process::ExitCode::SUCCESS;
    }
    println!("\nrunning {} tests", selected.len());
    let mut failed = Vec::new();
    for (name, test) in &selected {
        let ok = std::panic::catch_unwind(test).is_ok();
        println!("test {name} ... {}", if ok { "ok" } else { "FAILED" });
        if !ok {
            failed.push(*name);
        }
    }
    let verdict = if failed.is_empty() { "ok" } else { "FAILED" };
    println!(
        "\ntest result: {verdict}. {} passed; {} failed; 0 ignored; 0 measured; {} filtered out\n",
        selected.len() - failed.len(),
        failed.len(),
        TESTS.len() - selected.len()
    );
    if failed.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(101)
    }
}
