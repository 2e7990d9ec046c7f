//! Power loss through the fault-injecting storage: every write not covered by a completed
//! `fdatasync` is dropped. In `sync` mode nothing acknowledged may be lost and the bank total
//! stays constant; in `process` mode the test documents what is lost (everything since the last
//! open: that mode never flushes). The negative variants (feature `shortcuts`) remove the marker
//! wait, or let the marker pass a committer still drawing its timestamp, and the same checks
//! must catch the loss.
//!
//! A device may also tear an unsynced write, persisting some of its 512-byte sectors and not
//! others (`FaultStorage::power_loss_torn`): sync mode must survive that too.
//!
//! The random choices (each thread's transfers, which unsynced writes a device kept) come from
//! one `ordo_seed` seed per test, printed as `ORDO_SEED=<n>`. `ORDO_TRIALS=<n>` runs `n`
//! power losses in the two trial tests (`scripts/soak.sh`) instead of their defaults.
#![allow(clippy::unwrap_used, unreachable_pub)]

use crate::durable_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use durable_common::*;
use ordo::durable::Mode;
use ordo::durable::io::{FaultOp, FaultRule};
use ordo::{Addr, Config, Error};

const ACCOUNTS: usize = 8;
const THREADS: usize = 3;
const START: u64 = 1_000;

/// Words of the ballast object.
const BALLAST_WORDS: usize = 256;

struct Bank {
    accounts: Vec<Addr>,
    /// Per thread: a counter object incremented by each of its transfers.
    seqs: Vec<Addr>,
    /// A 2 KiB object a ballast thread rewrites whole, `n` in every word (see
    /// [`ballast`]): its records span several sectors, for a torn power loss to cut.
    ballast: Addr,
}

fn setup(db: &Db) -> Bank {
    db.run(|tx| {
        let accounts = (0..ACCOUNTS).map(|_| tx.alloc(&START)).collect::<Result<Vec<_>, _>>()?;
        let seqs = (0..THREADS).map(|_| tx.alloc(&0u64)).collect::<Result<Vec<_>, _>>()?;
        let ballast = tx.alloc_bytes(&[0u8; BALLAST_WORDS * 8])?;
        Ok::<_, Error>(Bank { accounts, seqs, ballast })
    })
    .unwrap()
}

/// Rewrites the ballast object with `n` in every word, `n` = 1, 2, ... until `stop` or an
/// I/O error; returns the last acknowledged `n`.
fn ballast(db: &Db, bank: &Bank, stop: &AtomicBool) -> u64 {
    let mut acked = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let n = acked + 1;
        let words: Vec<u8> = (0..BALLAST_WORDS).flat_map(|_| n.to_le_bytes()).collect();
        match db.run(|tx| tx.write_bytes(bank.ballast, &words)) {
            Ok(()) => acked = n,
            Err(Error::Durable(_)) => break,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    acked
}

/// The recovered ballast: one value in every word (a record replayed whole or not at all).
fn recovered_ballast(cfg: Config, bank: &Bank) -> u64 {
    let db = open(cfg).unwrap();
    let b = db.run(|tx| tx.read_bytes(bank.ballast)).unwrap();
    let words: Vec<u64> =
        b.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().unwrap())).collect();
    assert!(words.iter().all(|&w| w == words[0]), "a torn ballast was replayed: {words:?}");
    words[0]
}

/// Runs transfers on `THREADS` threads until `stop` or an I/O error; returns the acknowledged
/// sequence number per thread.
fn transfers(db: &Db, bank: &Bank, stop: &AtomicBool, seed: u64) -> Vec<u64> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let db = db.clone();
                let (accounts, seq) = (bank.accounts.clone(), bank.seqs[t]);
                s.spawn(move || {
                    let mut acked = 0;
                    let mut rng = seed ^ (t as u64 * 7919 + 1);
                    while !stop.load(Ordering::Relaxed) {
                        rng =
                            rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let a = accounts[(rng >> 33) as usize % ACCOUNTS];
                        let b = accounts[(rng >> 45) as usize % ACCOUNTS];
                        let r = db.run(|tx| {
                            let n: u64 = tx.read(seq)?;
                            let x: u64 = tx.read(a)?;
                            if a != b && x > 0 {
                                let y: u64 = tx.read(b)?;
                                tx.write(a, &(x - 1))?;
                                tx.write(b, &(y + 1))?;
                            }
                            tx.write(seq, &(n + 1))?;
                            Ok::<_, Error>(n + 1)
                        });
                        match r {
                            Ok(n) => acked = n,
                            Err(Error::Durable(_)) => break,
                            Err(e) => panic!("unexpected {e}"),
                        }
                    }
                    acked
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Recovered bank: (total, per-thread sequence numbers, torn records recovery dropped).
fn recovered(cfg: Config, bank: &Bank) -> (u64, Vec<u64>, usize) {
    let db = open(cfg).unwrap();
    let torn = db.recovery_report().map_or(0, |r| r.torn.len());
    let (total, seqs) = db
        .run(|tx| {
            let mut total = 0;
            for a in &bank.accounts {
                total += tx.read::<u64>(*a)?;
            }
            let seqs =
                bank.seqs.iter().map(|s| tx.read::<u64>(*s)).collect::<Result<Vec<_>, _>>()?;
            Ok::<_, Error>((total, seqs))
        })
        .unwrap();
    (total, seqs, torn)
}

/// One power-loss run on `backend`: returns (acknowledged, recovered) sequence numbers;
/// asserts the total.
fn power_loss_run(
    backend: Backend,
    mode: Mode,
    run_ms: u64,
    tweak: impl Fn(&mut Config),
) -> (Vec<u64>, Vec<u64>) {
    power_loss_run_keeping(backend, mode, run_ms, 0, 0, tweak)
}

/// What the device had written of the unsynced data when the power went.
#[derive(Clone, Copy, Debug)]
enum Loss {
    /// Each unsynced write whole with probability 1/2 (drawn from the seed; 0 keeps none):
    /// `FaultStorage::power_loss_keeping`.
    Keeping(u64),
    /// Unsynced writes torn at sector granularity (drawn from the seed):
    /// `FaultStorage::power_loss_torn`.
    Torn(u64),
    /// As `Torn`, after every log segment flush past the first `skip` failed (`EIO`): the
    /// records of the failing round are written but never flushed, so the tear finds a whole
    /// round to cut (a freeze alone mostly lands between rounds); a ballast thread's 2 KiB
    /// records make the rounds span several sectors.
    TornAfterFailedFlushes { seed: u64, skip: u32 },
}

/// As [`power_loss_run`], keeping a random half of the unsynced writes (`seed` != 0), the
/// threads' transfers drawn from `transfer_seed`.
fn power_loss_run_keeping(
    backend: Backend,
    mode: Mode,
    run_ms: u64,
    seed: u64,
    transfer_seed: u64,
    tweak: impl Fn(&mut Config),
) -> (Vec<u64>, Vec<u64>) {
    let run = power_loss_run_with(backend, mode, run_ms, Loss::Keeping(seed), transfer_seed, tweak);
    (run.acked, run.seqs)
}

/// What one power-loss run acknowledged and recovered.
struct Run {
    /// The last acknowledged sequence number per thread.
    acked: Vec<u64>,
    /// The recovered sequence number per thread.
    seqs: Vec<u64>,
    /// Torn records recovery found and dropped.
    torn: usize,
    /// With a ballast thread: (acknowledged, recovered) ballast values.
    ballast: Option<(u64, u64)>,
}

/// As [`power_loss_run`], the power loss as `loss` says, the threads' transfers drawn from
/// `transfer_seed`.
fn power_loss_run_with(
    backend: Backend,
    mode: Mode,
    run_ms: u64,
    loss: Loss,
    transfer_seed: u64,
    tweak: impl Fn(&mut Config),
) -> Run {
    let tweak = |c: &mut Config| {
        // The checkpointer runs during the measured part: its heap-file writes and segment
        // deletions are subject to the power loss too.
        let d = c.durability.as_mut().unwrap();
        d.checkpoint_interval_ms = 10;
        d.log_segments_max = 3;
        // After the power loss the checkpointer cannot delete a segment: a committer that finds
        // the log full waits this long, then goes on and sees the stop flag (the default, 1 s,
        // made each process-mode trial last a second).
        d.log_full_wait_ms = 20;
        tweak(c);
    };
    let dir = temp_dir_on(backend, "power");
    let fs = fault_storage(&dir);
    let db = open(config(&dir, mode, Some(Arc::new(fs.clone())))).unwrap();
    let bank = setup(&db);
    // Make the setup durable before the measured part: reopen folds it into the heap files.
    drop(db);
    let mut cfg = config(&dir, mode, Some(Arc::new(fs.clone())));
    tweak(&mut cfg);
    let db = open(cfg).unwrap();
    if let Loss::TornAfterFailedFlushes { skip, .. } = loss {
        fs.inject(FaultRule {
            op: FaultOp::Sync,
            name_contains: ".seg".into(),
            skip,
            times: u32::MAX,
            errno: libc::EIO,
        });
    }
    let stop = AtomicBool::new(false);
    let with_ballast = matches!(loss, Loss::TornAfterFailedFlushes { .. });
    let (acked, ballast_acked) = std::thread::scope(|s| {
        let h = s.spawn(|| transfers(&db, &bank, &stop, transfer_seed));
        let b = with_ballast.then(|| s.spawn(|| ballast(&db, &bank, &stop)));
        std::thread::sleep(Duration::from_millis(run_ms));
        fs.freeze();
        stop.store(true, Ordering::Relaxed);
        (h.join().unwrap(), b.map(|b| b.join().unwrap()))
    });
    drop(db);
    match loss {
        Loss::Keeping(seed) => fs.power_loss_keeping(seed).unwrap(),
        Loss::Torn(seed) | Loss::TornAfterFailedFlushes { seed, .. } => {
            fs.power_loss_torn(seed).unwrap()
        }
    };
    let (total, seqs, torn) = recovered(config(&dir, mode, None), &bank);
    assert_eq!(total, START * ACCOUNTS as u64, "money created or destroyed: half-applied state");
    let ballast = ballast_acked.map(|a| (a, recovered_ballast(config(&dir, mode, None), &bank)));
    remove_dir_all(&dir);
    Run { acked, seqs, torn, ballast }
}

fn lost(acked: &[u64], seqs: &[u64]) -> u64 {
    acked.iter().zip(seqs).map(|(a, s)| a.saturating_sub(*s)).sum()
}

/// Trials of a trial test: `ORDO_TRIALS` or `default`.
fn trials(default: u64) -> u64 {
    match std::env::var("ORDO_TRIALS") {
        Ok(t) => t.parse().unwrap_or_else(|_| panic!("ORDO_TRIALS={t:?} is not a number")),
        Err(_) => default,
    }
}

#[test]
fn sync_mode_loses_nothing_acknowledged() {
    let started = Instant::now();
    let mut commits = 0;
    // In memory for the logic, once on real files (flushes with a device's latency).
    for (backend, run_ms) in [(Backend::Mem, 30), (Backend::Mem, 80), (Backend::Os, 150)] {
        let (acked, seqs) = power_loss_run(backend, Mode::Sync, run_ms, |_| {});
        let lost = lost(&acked, &seqs);
        assert_eq!(lost, 0, "{backend:?}: acknowledged {acked:?}, recovered {seqs:?}");
        // A recovered sequence number is at most one ahead (a commit cut off before its ack).
        for (a, s) in acked.iter().zip(&seqs) {
            assert!(s <= &(a + 1), "recovered {s} beyond acknowledged {a} + 1");
        }
        commits += acked.iter().sum::<u64>();
    }
    assert!(commits > 0, "no transaction committed");
    eprintln!("sync: {commits} acknowledged, none lost ({:?})", started.elapsed());
}

#[test]
fn sync_mode_survives_devices_that_wrote_some_unsynced_data() {
    // Unsynced writes reach the disk in any order: a marker written after other threads'
    // records must never be trusted unless those records were flushed first.
    // One chunk per segment: every thread's log is its own file, so the leader's flush of
    // its own segment covers nothing of the others'.
    let seed = ordo_seed::Seed::new("sync_mode_survives_devices_that_wrote_some_unsynced_data");
    let trials = trials(6);
    let mut acknowledged = 0;
    for trial in 0..trials {
        // Trial 0 keeps none of the unsynced writes, the others a random half.
        let keep = if trial == 0 { 0 } else { seed.derive(trial) | 1 };
        let (acked, seqs) = power_loss_run_keeping(
            Backend::Mem,
            Mode::Sync,
            40,
            keep,
            seed.derive((trial + 1) << 32),
            |c| {
                let d = c.durability.as_mut().unwrap();
                d.chunks_per_segment = 1;
                d.log_segments_max = 0;
            },
        );
        assert_eq!(
            lost(&acked, &seqs),
            0,
            "trial {trial} (keep seed {keep}): acknowledged {acked:?}, got {seqs:?}"
        );
        acknowledged += acked.iter().sum::<u64>();
    }
    // The line `scripts/soak.sh` reads.
    println!(
        "soak power-loss sync: {trials} passed, 0 failed; {acknowledged} acknowledged \
         transactions checked, none lost"
    );
}

#[test]
fn sync_mode_survives_torn_unsynced_writes() {
    // A device persists sectors, not writes: an unsynced record or marker may survive as a
    // prefix of its sectors, or with some sectors and not others (between them the zeros of
    // the preallocated segment). Only what lies beyond the durable marker can be torn; the
    // records' checksums must reveal every torn one, and nothing acknowledged may be lost.
    // Half the trials with one chunk per segment (every thread's log its own file), half with
    // the default layout (threads sharing segments, so a tear crosses other records too); in
    // alternate pairs, the log's flushes start failing after a while, so that whole rounds
    // are written and never flushed when the power goes.
    let seed = ordo_seed::Seed::new("sync_mode_survives_torn_unsynced_writes");
    let trials = trials(8);
    let (mut acknowledged, mut torn) = (0, 0);
    for trial in 0..trials {
        let tear = seed.derive(trial);
        let loss = if trial % 4 < 2 {
            Loss::Torn(tear)
        } else {
            let skip = (seed.derive(trial + (1 << 40)) % 400) as u32;
            Loss::TornAfterFailedFlushes { seed: tear, skip }
        };
        let Run { acked, seqs, torn: torn_here, ballast } = power_loss_run_with(
            Backend::Mem,
            Mode::Sync,
            40,
            loss,
            seed.derive((trial + 1) << 32),
            |c| {
                if trial % 2 == 0 {
                    let d = c.durability.as_mut().unwrap();
                    d.chunks_per_segment = 1;
                    d.log_segments_max = 0;
                }
            },
        );
        assert_eq!(
            lost(&acked, &seqs),
            0,
            "trial {trial} ({loss:?}): acknowledged {acked:?}, got {seqs:?}"
        );
        for (a, s) in acked.iter().zip(&seqs) {
            assert!(s <= &(a + 1), "trial {trial}: recovered {s} beyond acknowledged {a} + 1");
        }
        if let Some((a, got)) = ballast {
            assert!(a <= got && got <= a + 1, "trial {trial} ({loss:?}): ballast {a}, got {got}");
            acknowledged += a;
        }
        acknowledged += acked.iter().sum::<u64>();
        torn += torn_here;
    }
    println!(
        "soak power-loss torn: {trials} passed, 0 failed; {acknowledged} acknowledged \
         transactions checked, none lost; {torn} torn records dropped"
    );
}

#[test]
fn process_mode_documents_power_loss() {
    // Process mode never flushes the log: a power loss drops every commit after the last
    // checkpoint (the checkpointer syncs the heap files), yet recovery yields a consistent
    // prefix (the total is checked in the run; each counter is at most one past its ack).
    let seed = ordo_seed::Seed::new("process_mode_documents_power_loss");
    let trials = trials(1);
    let (mut acknowledged, mut lost_total) = (0, 0);
    for trial in 0..trials {
        // Process mode promises nothing unsynced: the device keeps none of it (seed 0).
        let (acked, seqs) =
            power_loss_run_keeping(Backend::Mem, Mode::Process, 80, 0, seed.derive(trial), |_| {});
        for (a, s) in acked.iter().zip(&seqs) {
            assert!(s <= &(a + 1), "trial {trial}: recovered {s} beyond acknowledged {a} + 1");
        }
        let lost = lost(&acked, &seqs);
        eprintln!("process: acknowledged {acked:?}, recovered {seqs:?}, lost {lost}");
        acknowledged += acked.iter().sum::<u64>();
        lost_total += lost;
    }
    println!(
        "soak power-loss process: {trials} passed, 0 failed; {acknowledged} acknowledged \
         transactions checked for consistency ({lost_total} lost to power loss, as documented)"
    );
}

#[cfg(feature = "shortcuts")]
mod negative {
    use super::*;
    use ordo::Options;
    use ordo::txn::{CommitStep, Shortcuts};
    use std::sync::atomic::AtomicU8;

    #[test]
    fn skipping_the_marker_wait_loses_acknowledged_commits() {
        for backend in [Backend::Mem, Backend::Os] {
            let (acked, seqs) = power_loss_run(backend, Mode::Sync, 60, |c| {
                c.durability.as_mut().unwrap().shortcuts.skip_marker_wait = true;
            });
            let lost = lost(&acked, &seqs);
            eprintln!("{backend:?}: broken variant lost {lost}");
            assert!(lost > 0, "{backend:?}: not caught: acked {acked:?}, got {seqs:?}");
        }
    }

    /// 0: running; 1: the paused committer has drawn its timestamp; 2: released.
    static GATE: AtomicU8 = AtomicU8::new(0);

    fn pause_after_wts(step: CommitStep) {
        if step == CommitStep::WriteTimestamp {
            GATE.store(1, Ordering::SeqCst);
            let deadline = Instant::now() + Duration::from_secs(30);
            while GATE.load(Ordering::SeqCst) != 2 && Instant::now() < deadline {
                std::thread::yield_now();
            }
        }
    }

    /// T1 draws its timestamp and pauses before logging; T2 commits a later timestamp. A
    /// correct marker cannot pass T1, so T2 waits; the broken one marks T2 durable, then T1
    /// appends below the marker and is acknowledged without a flush.
    fn pending_scenario(ignore_pending: bool) -> (bool, bool, u64, u64) {
        GATE.store(0, Ordering::SeqCst);
        let dir = temp_dir("pending");
        let fs = fault_storage(&dir);
        let make = |storage: Option<Arc<dyn ordo::durable::io::Storage>>| {
            let mut c = config(&dir, Mode::Sync, storage);
            c.durability.as_mut().unwrap().shortcuts.ignore_pending = ignore_pending;
            c
        };
        let (x, y) = {
            let db = open(make(Some(Arc::new(fs.clone())))).unwrap();
            db.run(|tx| Ok::<_, Error>((tx.alloc(&0u64)?, tx.alloc(&0u64)?))).unwrap()
        };
        let db = open(make(Some(Arc::new(fs.clone())))).unwrap();
        let (t1_acked, t2_acked) = std::thread::scope(|s| {
            let t1 = s.spawn(|| {
                let o = Options {
                    shortcuts: Shortcuts { hook: Some(pause_after_wts), ..Shortcuts::default() },
                    ..Options::default()
                };
                db.run_with(o, |tx| {
                    let v: u64 = tx.read(x)?;
                    tx.write(x, &(v + 1))
                })
                .is_ok()
            });
            while GATE.load(Ordering::SeqCst) != 1 {
                std::thread::yield_now();
            }
            let t2 = s.spawn(|| {
                db.run(|tx| {
                    let v: u64 = tx.read(y)?;
                    tx.write(y, &(v + 1))
                })
                .is_ok()
            });
            // T2 either finishes (broken) or waits for T1 (correct); then T1 goes on.
            std::thread::sleep(Duration::from_millis(100));
            GATE.store(2, Ordering::SeqCst);
            (t1.join().unwrap(), t2.join().unwrap())
        });
        fs.freeze();
        drop(db);
        fs.power_loss().unwrap();
        let db = open(make(None)).unwrap();
        let (vx, vy) =
            db.run(|tx| Ok::<_, Error>((tx.read::<u64>(x)?, tx.read::<u64>(y)?))).unwrap();
        remove_dir_all(&dir);
        (t1_acked, t2_acked, vx, vy)
    }

    #[test]
    fn marker_passing_a_pending_timestamp_is_caught() {
        let (t1, t2, vx, vy) = pending_scenario(false);
        assert!(t1 && t2);
        assert_eq!((vx, vy), (1, 1), "correct marker lost an acknowledged commit");
        let (t1, t2, vx, vy) = pending_scenario(true);
        assert!(t1 && t2);
        assert_eq!(vy, 1);
        assert_eq!(vx, 0, "the broken marker was not caught: T1 survived without a flush");
    }

    /// Process mode: the checkpointer's bound must also stay below a committer that drew its
    /// timestamp but has not logged yet, or recovery skips that committer's record as
    /// "already checkpointed" and loses it (checked with the lower-bound publication removed).
    static GATE2: AtomicU8 = AtomicU8::new(0);

    fn pause_after_wts_2(step: CommitStep) {
        if step == CommitStep::WriteTimestamp {
            GATE2.store(1, Ordering::SeqCst);
            let deadline = Instant::now() + Duration::from_secs(30);
            while GATE2.load(Ordering::SeqCst) != 2 && Instant::now() < deadline {
                std::thread::yield_now();
            }
        }
    }

    #[test]
    fn checkpoint_never_passes_a_pending_timestamp() {
        let dir = temp_dir("ckpt-pending");
        let fs = fault_storage(&dir);
        let make = |s: Option<Arc<dyn ordo::durable::io::Storage>>| config(&dir, Mode::Process, s);
        let (x, y) = {
            let db = open(make(None)).unwrap();
            db.run(|tx| Ok::<_, Error>((tx.alloc(&0u64)?, tx.alloc(&0u64)?))).unwrap()
        };
        let db = open(make(Some(Arc::new(fs.clone())))).unwrap();
        std::thread::scope(|s| {
            let t1 = s.spawn(|| {
                let o = Options {
                    shortcuts: Shortcuts { hook: Some(pause_after_wts_2), ..Shortcuts::default() },
                    ..Options::default()
                };
                db.run_with(o, |tx| {
                    let v: u64 = tx.read(x)?;
                    tx.write(x, &(v + 1))
                })
                .unwrap();
            });
            while GATE2.load(Ordering::SeqCst) != 1 {
                std::thread::yield_now();
            }
            db.run(|tx| {
                let v: u64 = tx.read(y)?;
                tx.write(y, &(v + 1))
            })
            .unwrap();
            db.checkpoint().unwrap();
            GATE2.store(2, Ordering::SeqCst);
            t1.join().unwrap();
        });
        // A process crash: the page cache (every pwrite) survives, nothing more runs.
        fs.freeze();
        drop(db);
        let db = open(make(None)).unwrap();
        let (vx, vy) =
            db.run(|tx| Ok::<_, Error>((tx.read::<u64>(x)?, tx.read::<u64>(y)?))).unwrap();
        assert_eq!((vx, vy), (1, 1), "an acknowledged commit was skipped by recovery");
        remove_dir_all(&dir);
    }
}

/// Regression tests for what the torn power loss found: recovery refused to open a sync-mode
/// directory after a crash that tore an unflushed record, in two ways. Each scripts the crash
/// state by hand in the first chunk of a sync-mode log, right after its valid prefix (the
/// flushed records and markers of acknowledged commits), and fails with the old rule.
mod torn_records {
    use super::*;
    use ordo::durable::format::{self, KIND_TX, RecordBuf, SEGMENT_HEADER_BYTES};

    /// A directory with acknowledged commits (x = 7) whose log is left in place, the path
    /// of its segment holding records, and the end of the valid prefix of its first chunk.
    fn logged() -> (std::path::PathBuf, Addr, std::path::PathBuf, usize) {
        let dir = temp_dir("torn-records");
        let fs = fault_storage(&dir);
        let db = open(config(&dir, Mode::Sync, Some(Arc::new(fs.clone())))).unwrap();
        let x = db.run(|tx| tx.alloc(&0u64)).unwrap();
        for v in 1..=7u64 {
            db.run(|tx| tx.write(x, &v)).unwrap();
        }
        // A crash (nothing unflushed: every commit waited for its flush); the log stays.
        fs.freeze();
        drop(db);
        let seg = segments(&dir).into_iter().last().unwrap();
        let chunk = &read_file(&seg)[SEGMENT_HEADER_BYTES as usize..];
        let mut end = 0;
        while let Ok(r) = format::view_record(&chunk[end..]) {
            end += r.len_bytes();
        }
        assert!(end > 0, "the chunk holds the commits");
        (dir, x, seg, end)
    }

    /// A transaction record writing `value` to `x` at `ts`, 600 bytes long (it spans a
    /// sector boundary wherever it starts).
    fn record(x: Addr, ts: u64, value: u64) -> Vec<u8> {
        let mut r = RecordBuf::default();
        r.begin(KIND_TX, ts);
        r.entry_bytes(x.to_raw(), &value.to_le_bytes());
        r.entry_bytes(x.to_raw(), &[value as u8; 552]);
        r.entry_bytes(x.to_raw(), &value.to_le_bytes());
        r.finish().to_vec()
    }

    /// Writes `bytes` at `at` of the first chunk of `seg`.
    fn put(seg: &std::path::Path, at: usize, bytes: &[u8]) {
        let mut b = read_file(seg);
        let at = SEGMENT_HEADER_BYTES as usize + at;
        b[at..at + bytes.len()].copy_from_slice(bytes);
        write_file(seg, &b);
    }

    fn reopen(dir: &std::path::Path) -> Result<Db, ordo::Error> {
        open(config(dir, Mode::Sync, None))
    }

    /// Far above any marker of these runs.
    const ABOVE: u64 = 1 << 60;

    #[test]
    fn a_torn_header_whose_timestamp_sector_was_lost_is_a_torn_tail() {
        // The record's first 16 bytes (checksum, length, kind, count) reached the disk; the
        // sector holding its timestamp did not and still reads zeros. The old rule read
        // timestamp 0 as "at or below the marker" and refused the directory.
        let (dir, x, seg, end) = logged();
        let mut r = record(x, ABOVE, 99);
        r[16..].fill(0);
        put(&seg, end, &r);
        let db = reopen(&dir).unwrap();
        let report = db.recovery_report().unwrap();
        assert_eq!(report.torn.len(), 1, "{report:?}");
        assert_eq!(db.run(|tx| tx.read::<u64>(x)).unwrap(), 7);
        drop(db);
        remove_dir_all(&dir);
    }

    #[test]
    fn a_torn_record_followed_by_unflushed_records_is_a_torn_tail() {
        // The device persisted the round's sectors out of order: a sector inside the first
        // record is lost (zeros), the record after it survived whole. Both lie above the
        // marker, so neither was flushed: the old rule ("a valid record follows: corruption")
        // refused the directory.
        let (dir, x, seg, end) = logged();
        let mut torn = record(x, ABOVE, 99);
        torn[300..400].fill(0);
        let next = record(x, ABOVE + 1, 98);
        put(&seg, end, &[torn.clone(), next].concat());
        let db = reopen(&dir).unwrap();
        let report = db.recovery_report().unwrap();
        assert_eq!(report.torn.len(), 1, "{report:?}");
        assert_eq!(db.run(|tx| tx.read::<u64>(x)).unwrap(), 7, "nothing above the marker");
        drop(db);
        remove_dir_all(&dir);
    }

    #[test]
    fn a_bad_record_followed_by_one_at_or_below_the_marker_is_still_corruption() {
        // What the rule still refuses: a valid record at or below the marker after a bad one
        // means the bad one was flushed — corruption, never a crash artefact.
        let (dir, x, seg, end) = logged();
        let mut bad = record(x, ABOVE, 99);
        bad[300..400].fill(0);
        let flushed = record(x, 1, 98);
        put(&seg, end, &[bad, flushed].concat());
        match reopen(&dir) {
            Err(ordo::Error::Durable(e)) => match &*e {
                ordo::durable::DurableError::BadFile { path, reason, .. } => {
                    assert_eq!(path, &seg, "{reason}");
                    assert!(reason.contains("followed by a valid record"), "{reason}");
                }
                e => panic!("unexpected {e}"),
            },
            Err(e) => panic!("unexpected {e}"),
            Ok(_) => panic!("corruption below the marker was dropped as a torn tail"),
        }
        // And a bad record whose timestamp field is at or below the marker.
        let (dir2, x, seg, end) = logged();
        let mut bad = record(x, 1, 99);
        bad[300..400].fill(0);
        put(&seg, end, &bad);
        assert!(reopen(&dir2).is_err(), "a bad record at or below the marker was dropped");
        remove_dir_all(&dir);
        remove_dir_all(&dir2);
    }
}
