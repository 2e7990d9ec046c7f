//! Stale snapshot reads: a reader keeps reading one old, consistent state while writers move on.
//!
//! ```text
//! cargo run --example snapshot -- [MILLISECONDS]     # default 1000
//! ```
//!
//! Writer threads keep incrementing a row of counters, all of them in each transaction, so in
//! every committed state the counters are equal. The reader pins a snapshot
//! ([`Ordo::pin_snapshot`]) and then, while the writers continue, reads the whole row again and
//! again at the pinned time with [`Ordo::read_only_at`]: every read returns the very same
//! values, all equal, however far the writers have got meanwhile — which a fresh read shows.
//! After the pin is dropped, garbage collection may recycle the old versions: a read at that
//! time is then refused with [`Error::SnapshotTooOld`] rather than answered wrongly.
//!
//! What to copy from it:
//! * Stale reads need [`Versions::Multi`]: old versions are kept for readers behind the head.
//! * A snapshot is just a timestamp. [`SnapshotPin`] holds it against garbage collection for as
//!   long as it lives; without a pin, a timestamp stays readable only until the GC safe point
//!   passes it. The timestamp can be shipped to other threads (or cluster nodes) to read the
//!   same snapshot there.
//! * Reading at an old time walks back over every version written since, so a pinned snapshot
//!   costs more the longer it is held under writes (and keeps their memory): hold it briefly.
//! * `read_only_at` refuses writes ([`Error::ReadOnly`]) and retries on conflict like `run`.
//!
//! [`SnapshotPin`]: ordo::SnapshotPin
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ordo::{Addr, Config, Error, Ordo, Versions};
use ordo_clock::SystemClock;

const COUNTERS: usize = 16;
const WRITERS: usize = 2;
/// A writer's pause between transactions.
const WRITE_PAUSE: Duration = Duration::from_micros(200);

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn read_row(
    db: &Ordo<SystemClock>,
    row: &[Addr],
    ts: Option<ordo_clock::Timestamp>,
) -> Result<Vec<u64>, Error> {
    let read =
        |tx: &mut ordo::Tx<'_, SystemClock>| row.iter().map(|a| tx.read::<u64>(*a)).collect();
    match ts {
        Some(ts) => db.read_only_at(ts, read),
        None => db.run(read),
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let run_ms: u64 = match std::env::args().nth(1) {
        Some(a) => a.parse().map_err(|e| format!("MILLISECONDS {a:?}: {e}"))?,
        None => 1_000,
    };
    // Background GC every millisecond: old versions go as soon as no one needs them.
    let config = Config { versions: Versions::Multi, gc_interval_us: 1_000, ..Config::default() };
    let db = Ordo::with_clock(config, SystemClock::new())?;
    let row: Vec<Addr> =
        db.run(|tx| (0..COUNTERS).map(|_| tx.alloc(&0u64)).collect::<Result<_, Error>>())?;
    let bump = |db: &Ordo<SystemClock>| {
        db.run(|tx| {
            for a in &row {
                let v: u64 = tx.read(*a)?;
                tx.write(*a, &(v + 1))?;
            }
            Ok::<_, Error>(())
        })
    };
    for _ in 0..100 {
        bump(&db)?;
    }

    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let (pinned_ts, pinned_row, reads, last_fresh) = std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|_| {
                let (db, stop, bump) = (&db, &stop, &bump);
                s.spawn(move || -> Result<(), Error> {
                    while !stop.load(Ordering::Relaxed) {
                        bump(db)?;
                        // Paced: every write keeps an old version alive behind the pin, and a
                        // read at the pinned time walks back over them.
                        std::thread::sleep(WRITE_PAUSE);
                    }
                    Ok(())
                })
            })
            .collect();
        let result = (|| -> Result<_, String> {
            // The reader: pin a snapshot, then read it again and again while the writers run.
            let pin = db.pin_snapshot().map_err(|e| e.to_string())?;
            let first = read_row(&db, &row, Some(pin.ts())).map_err(|e| e.to_string())?;
            if first.iter().any(|v| *v != first[0]) {
                return Err(format!("torn snapshot: {first:?}"));
            }
            println!("pinned snapshot at {:?}: every counter = {}", pin.ts(), first[0]);
            let mut reads = 0u64;
            let mut fresh = first.clone();
            while started.elapsed() < Duration::from_millis(run_ms) {
                let again = read_row(&db, &row, Some(pin.ts())).map_err(|e| e.to_string())?;
                if again != first {
                    return Err(format!("the pinned snapshot changed: {first:?} then {again:?}"));
                }
                reads += 1;
                fresh = read_row(&db, &row, None).map_err(|e| e.to_string())?;
                if fresh.iter().any(|v| *v != fresh[0]) {
                    return Err(format!("torn fresh read: {fresh:?}"));
                }
            }
            Ok((pin.ts(), first[0], reads, fresh[0]))
        })();
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().map_err(|_| "a writer panicked".to_string())?.map_err(|e| e.to_string())?;
        }
        result
    })?;
    println!(
        "{reads} reads of the pinned snapshot in {:.1} s all saw {pinned_row}; meanwhile the \
         writers moved every counter to {last_fresh} (a fresh read)",
        started.elapsed().as_secs_f64()
    );

    // The pin is gone: once the GC safe point passes the old time, reading there is refused.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        bump(&db)?;
        db.collect_garbage();
        match read_row(&db, &row, Some(pinned_ts)) {
            Err(Error::SnapshotTooOld { ts, gc_point }) => {
                println!(
                    "after the pin was dropped: a read at {ts:?} is refused (SnapshotTooOld, GC \
                     safe point {gc_point:?}), never answered from recycled versions"
                );
                break;
            }
            Ok(v) if v[0] == pinned_row => {}
            Ok(v) => return Err(format!("the old snapshot read {v:?}, not {pinned_row}").into()),
            Err(e) => return Err(e.into()),
        }
        if Instant::now() > deadline {
            return Err("the GC safe point never passed the old snapshot".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}
