//! Bank transfers with a concurrent auditor: what serializable transactions buy you.
//!
//! ```text
//! cargo run --example bank -- [MILLISECONDS]     # default 2000
//! ```
//!
//! Several teller threads move money between random accounts, each transfer one transaction
//! that reads two balances and writes both back. An auditor thread meanwhile sums every balance
//! in read-only transactions, over and over, and checks that the total never changes: money is
//! neither created nor lost, and no audit sees half a transfer, although it reads the accounts
//! one by one while the tellers write them.
//!
//! What to copy from it:
//! * [`Ordo::run`] runs a closure as one transaction and retries it when it conflicts with
//!   another; the closure must therefore only touch the database (and local variables), since it
//!   may run more than once. Its `Ok` value is returned once the transaction committed.
//! * A transaction that only reads commits as a read-only transaction. With
//!   [`Versions::Multi`] the database keeps old versions, so a long audit reads a consistent
//!   snapshot instead of aborting whenever a teller overwrites an account it has not read yet.
//! * A business rule (no overdraft) is an ordinary early return: nothing is written.
//!
//! The clock here is [`SystemClock`] (`CLOCK_MONOTONIC`); `ordo calibrate` and
//! `ordo_clock::OrdoClock` give the hardware-time clock the engine is built for.
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ordo::{Addr, Config, Error, Ordo, Versions};
use ordo_clock::SystemClock;

const ACCOUNTS: usize = 64;
const TELLERS: usize = 3;
const OPENING_BALANCE: u64 = 1_000;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let run_ms: u64 = match std::env::args().nth(1) {
        Some(a) => a.parse().map_err(|e| format!("MILLISECONDS {a:?}: {e}"))?,
        None => 2_000,
    };
    let config = Config { versions: Versions::Multi, ..Config::default() };
    let db = Ordo::with_clock(config, SystemClock::new())?;

    // Open the accounts in one transaction: an account is an object holding a u64.
    let accounts: Vec<Addr> = db.run(|tx| {
        (0..ACCOUNTS).map(|_| tx.alloc(&OPENING_BALANCE)).collect::<Result<_, Error>>()
    })?;
    let expected = OPENING_BALANCE * ACCOUNTS as u64;

    let stop = AtomicBool::new(false);
    let (transfers, refused, audits) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let started = Instant::now();
    std::thread::scope(|s| -> Result<(), String> {
        let tellers: Vec<_> = (0..TELLERS)
            .map(|t| {
                let (db, accounts, stop) = (&db, &accounts, &stop);
                let (transfers, refused) = (&transfers, &refused);
                s.spawn(move || -> Result<(), Error> {
                    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ t as u64);
                    while !stop.load(Ordering::Relaxed) {
                        let from = accounts[rng.below(ACCOUNTS)];
                        let to = accounts[rng.below(ACCOUNTS)];
                        let amount = 1 + rng.below(200) as u64;
                        let done = db.run(|tx| {
                            let a: u64 = tx.read(from)?;
                            if from == to || a < amount {
                                return Ok(false); // refused: nothing written
                            }
                            let b: u64 = tx.read(to)?;
                            tx.write(from, &(a - amount))?;
                            tx.write(to, &(b + amount))?;
                            Ok::<_, Error>(true)
                        })?;
                        let counter = if done { transfers } else { refused };
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        let auditor = s.spawn(|| -> Result<(), String> {
            while !stop.load(Ordering::Relaxed) {
                let total = db
                    .run(|tx| accounts.iter().map(|a| tx.read::<u64>(*a)).sum::<Result<u64, _>>())
                    .map_err(|e| e.to_string())?;
                if total != expected {
                    return Err(format!("audit found {total}, expected {expected}"));
                }
                audits.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        });
        std::thread::sleep(Duration::from_millis(run_ms));
        stop.store(true, Ordering::Relaxed);
        for t in tellers {
            t.join().map_err(|_| "a teller panicked")?.map_err(|e| e.to_string())?;
        }
        auditor
            .join()
            .map_err(|_| "the auditor panicked")?
            .map_err(|e| format!("AUDIT FAILED: {e}"))
    })?;

    let total = db.run(|tx| accounts.iter().map(|a| tx.read::<u64>(*a)).sum::<Result<u64, _>>())?;
    let stats = db.stats();
    println!(
        "{} transfers ({} refused for lack of funds) by {TELLERS} tellers in {:.1} s",
        transfers.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    println!(
        "{} audits, every one summed {ACCOUNTS} accounts to {expected}; final total {total}",
        audits.load(Ordering::Relaxed)
    );
    println!(
        "{} read-write and {} read-only commits (audits, refused transfers), {} aborted attempts (retried by run)",
        stats.commits,
        stats.read_only_commits,
        stats.aborts_total()
    );
    if total != expected {
        return Err(format!("final total {total}, expected {expected}").into());
    }
    Ok(())
}

/// A tiny xorshift generator: the example needs no dependency for its random choices.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}
