//! A durable key-value store that survives `kill -9`.
//!
//! ```text
//! cargo run --example durable_kv -- put DIR KEY VALUE
//! cargo run --example durable_kv -- get DIR KEY
//! cargo run --example durable_kv -- demo [DIR] [KILLS]      # default: a temporary dir, 3 kills
//! ```
//!
//! `put` and `get` open (creating if needed) a durable database in `DIR`, holding one
//! transactional [`HashMap`] of byte strings, and set or print one key. `demo` shows what
//! "durable" promises: it starts this same program as a child writer (`writer DIR FIRST`),
//! which puts `key-N = value-N` for N = FIRST, FIRST+1, ... and prints `N` on its stdout once
//! each put has returned (an acknowledgement); the parent kills the child with `SIGKILL` at a
//! random moment, reopens the directory and checks that every acknowledged key is there with
//! its value. Then it starts the next writer on the recovered database, `KILLS` times.
//!
//! What to copy from it:
//! * [`Ordo::open_durable`] opens or creates the directory, replaying its log first (the
//!   recovery report says what was replayed). The clock must start past every timestamp the
//!   database holds; `LogicalClock::starting_at` is given that timestamp.
//! * [`Mode::Sync`]: a commit returns once its log record and the durable marker have been
//!   flushed with `fdatasync` (group commit), so acknowledged writes survive power loss too.
//!   [`Mode::Process`] returns once the record is in the OS page cache: it survives `kill -9`
//!   but not power loss, and commits are much faster.
//! * Ordo has no named roots. The map's root object address is what you keep: here it is
//!   written to `DIR/kv-root` (atomically, with a rename) right after the map is created; a
//!   crash between the two leaves an empty unreachable map behind and nothing else.
//! * One process at a time: a second open of the same directory gets `DurableError::Locked`.
#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ordo::durable::Mode;
use ordo::map::HashMap;
use ordo::{Addr, Config, Error, Ordo};
use ordo_clock::LogicalClock;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;
type Db = Ordo<LogicalClock>;

const ROOT_FILE: &str = "kv-root";
const USAGE: &str = "usage: durable_kv put DIR KEY VALUE | get DIR KEY | demo [DIR] [KILLS]";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    match (arg(0), arg(1), arg(2), arg(3)) {
        (Some("put"), Some(dir), Some(key), Some(value)) => {
            let (db, map) = open(Path::new(dir))?;
            let old = db.run(|tx| map.insert(tx, key.as_bytes(), value.as_bytes()))?;
            match old {
                Some(old) => println!("{key} = {value} (was {})", String::from_utf8_lossy(&old)),
                None => println!("{key} = {value} (new)"),
            }
        }
        (Some("get"), Some(dir), Some(key), None) => {
            let (db, map) = open(Path::new(dir))?;
            match db.run(|tx| map.get(tx, key.as_bytes()))? {
                Some(v) => println!("{}", String::from_utf8_lossy(&v)),
                None => return Err(format!("{key}: not found").into()),
            }
        }
        (Some("writer"), Some(dir), Some(first), None) => writer(Path::new(dir), first.parse()?)?,
        (Some("demo"), dir, kills, None) => {
            let kills = kills.map(str::parse).transpose()?.unwrap_or(3);
            match dir {
                Some(dir) => demo(Path::new(dir), kills)?,
                None => {
                    let dir =
                        std::env::temp_dir().join(format!("ordo-kv-demo-{}", std::process::id()));
                    let result = demo(&dir, kills);
                    let _ = std::fs::remove_dir_all(&dir);
                    result?
                }
            }
        }
        _ => return Err(USAGE.into()),
    }
    Ok(())
}

/// Opens the database in `dir` and its map, creating both if needed.
fn open(dir: &Path) -> Result<(Db, HashMap)> {
    let db = Ordo::open_durable(Config::durable(dir, Mode::Sync), LogicalClock::starting_at)?;
    let root_path = dir.join(ROOT_FILE);
    let map = match std::fs::read_to_string(&root_path) {
        Ok(text) => HashMap::open(Addr::from_raw(text.trim().parse()?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let map = db.run(|tx| HashMap::create(tx, 1024))?;
            // The map is durable once `run` returned; now make its address durable too.
            let tmp = dir.join(format!("{ROOT_FILE}.new"));
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(map.root().to_raw().to_string().as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &root_path)?;
            std::fs::File::open(dir)?.sync_all()?;
            map
        }
        Err(e) => return Err(e.into()),
    };
    Ok((db, map))
}

/// The child of `demo`: puts `key-N` from `first` on, acknowledging each on stdout, until killed.
fn writer(dir: &Path, first: u64) -> Result<()> {
    let (db, map) = open(dir)?;
    let mut out = std::io::stdout().lock();
    for n in first.. {
        let (key, value) = (format!("key-{n}"), format!("value-{n}"));
        db.run(|tx| map.insert(tx, key.as_bytes(), value.as_bytes()).map(|_| ()))?;
        // The acknowledgement: written only after the commit returned.
        writeln!(out, "{n}")?;
        out.flush()?;
    }
    Ok(())
}

/// Kills a writer `kills` times and checks every acknowledged put after each kill.
fn demo(dir: &Path, kills: u32) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let exe = std::env::current_exe()?;
    let mut acked: Vec<u64> = Vec::new();
    let mut seed = SystemTime::now().duration_since(UNIX_EPOCH)?.subsec_nanos() as u64 | 1;
    for round in 1..=kills {
        let first = acked.last().map_or(0, |n| n + 1);
        let mut child = Command::new(&exe)
            .args(["writer", &dir.display().to_string(), &first.to_string()])
            .stdout(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        let reader = std::thread::spawn(move || -> Vec<u64> {
            BufReader::new(stdout).lines().map_while(|l| l.ok()?.parse().ok()).collect()
        });
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_millis(200 + seed % 300);
        std::thread::sleep(delay);
        child.kill()?; // SIGKILL: no destructor, no flush, no clean close
        let status = child.wait()?;
        if status.success() {
            return Err(format!("the writer exited by itself ({status})").into());
        }
        let new = reader.join().map_err(|_| "the reader thread panicked")?;
        acked.extend(&new);

        let (db, map) = open(dir)?;
        let replayed = db.recovery_report().map_or(0, |r| r.records_replayed);
        let missing: Vec<u64> = db.run(|tx| {
            let mut missing = Vec::new();
            for n in &acked {
                let want = format!("value-{n}");
                if map.get(tx, format!("key-{n}").as_bytes())?.as_deref() != Some(want.as_bytes()) {
                    missing.push(*n);
                }
            }
            Ok::<_, Error>(missing)
        })?;
        println!(
            "kill {round}: killed the writer after {} ms and {} acknowledged puts; reopened \
             ({replayed} log records replayed): all {} acknowledged puts present",
            delay.as_millis(),
            new.len(),
            acked.len() - missing.len()
        );
        if !missing.is_empty() {
            return Err(format!(
                "LOST {} acknowledged puts, e.g. key-{}",
                missing.len(),
                missing[0]
            )
            .into());
        }
    }
    println!("{} acknowledged puts survived {kills} kill -9s in {}", acked.len(), dir.display());
    Ok(())
}
