//! Concurrency stress of the engine and its unsafe heap memory: lost updates, torn snapshots
//! (checked in every attempt, aborted ones included) and slot reuse under many threads.
#![allow(clippy::unwrap_used, unreachable_pub)] // test code: panics are the failure reports

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ordo::{Addr, Config, Error, Isolation, Options, Ordo};
use ordo_clock::{Clock, LogicalClock};
use rand::{Rng, SeedableRng, rngs::SmallRng};

const THREADS: usize = 4;

fn counter_never_loses_an_increment<C: Clock>(clock: C) {
    let db = Ordo::with_clock(Config::default(), clock).unwrap();
    let counter = db.run(|tx| tx.alloc(&0u64)).unwrap();
    let per_thread = 2_000u64;
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..per_thread {
                    db.run(|tx| {
                        let v: u64 = tx.read(counter)?;
                        tx.write(counter, &(v + 1))
                    })
                    .unwrap();
                }
            });
        }
    });
    assert_eq!(db.run(|tx| tx.read::<u64>(counter)).unwrap(), THREADS as u64 * per_thread);
    assert_eq!(db.stats().commits, THREADS as u64 * per_thread + 1);
}

#[test]
fn counter_logical() {
    counter_never_loses_an_increment(LogicalClock::new());
}

#[test]
fn counter_system() {
    counter_never_loses_an_increment(ordo_clock::SystemClock::new());
}

/// Transfers between accounts keep the total; every attempt that managed to read all accounts —
/// including attempts that later abort — must see that total (opacity), in every isolation mode.
#[test]
fn every_attempt_sees_a_consistent_snapshot() {
    let seed = &ordo_seed::Seed::new("every_attempt_sees_a_consistent_snapshot");
    for isolation in Isolation::ALL {
        let db = Ordo::with_clock(Config::default(), LogicalClock::new()).unwrap();
        let accounts: Vec<Addr> =
            db.run(|tx| (0..16).map(|_| tx.alloc(&100i64)).collect()).unwrap();
        let total: i64 = 1600;
        let stop = AtomicBool::new(false);
        let options = Options::isolation(isolation);
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (db, accounts, stop) = (&db, &accounts, &stop);
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(seed.derive(t));
                    for _ in 0..10_000 {
                        let (a, b) = (rng.random_range(0..16), rng.random_range(0..16));
                        let amount = rng.random_range(1..20);
                        db.run_with(options, |tx| {
                            let x: i64 = tx.read(accounts[a])?;
                            let y: i64 = tx.read(accounts[b])?;
                            if a != b {
                                tx.write(accounts[a], &(x - amount))?;
                                tx.write(accounts[b], &(y + amount))?;
                            }
                            Ok::<_, Error>(())
                        })
                        .unwrap();
                    }
                    stop.store(true, Ordering::Release);
                });
            }
            for _ in 0..2 {
                let (db, accounts, stop) = (&db, &accounts, &stop);
                s.spawn(move || {
                    let mut audits = 0;
                    while !stop.load(Ordering::Acquire) || audits < 100 {
                        let _ = db.run_with(options, |tx| {
                            let mut sum = 0i64;
                            for (i, a) in accounts.iter().enumerate() {
                                // Half the reads copy, half read in place through a view.
                                sum += if i % 2 == 0 {
                                    tx.read::<i64>(*a)?
                                } else {
                                    tx.read_view(*a, |v| v.word(0).unwrap_or(0) as i64)?
                                };
                                // Widen the window in which a transfer can commit mid-audit.
                                for _ in 0..50 {
                                    std::hint::spin_loop();
                                }
                            }
                            // Checked before commit: aborted attempts must be consistent too.
                            assert_eq!(
                                sum,
                                total,
                                "torn snapshot at rts {:?} ({isolation:?})",
                                tx.rts()
                            );
                            Ok::<_, Error>(())
                        });
                        audits += 1;
                    }
                });
            }
        });
        let sum: i64 = db
            .run(|tx| accounts.iter().map(|a| tx.read::<i64>(*a)).sum::<Result<i64, _>>())
            .unwrap();
        if isolation.validates_reads() {
            assert_eq!(sum, total, "{isolation:?}");
        }
    }
}

/// Many threads allocate objects of random sizes, stamp them, free some, and re-read others:
/// no two live objects share memory and no freed slot is read as live.
#[test]
fn heap_slots_are_never_shared() {
    let seed = &ordo_seed::Seed::new("heap_slots_are_never_shared");
    let db = Arc::new(Ordo::with_clock(Config::default(), LogicalClock::new()).unwrap());
    std::thread::scope(|s| {
        for t in 0..THREADS as u64 {
            let db = db.clone();
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed.derive(100 + t));
                let mut live: Vec<(Addr, Vec<u8>)> = Vec::new();
                for i in 0..4_000u64 {
                    match rng.random_range(0..10) {
                        0..=4 => {
                            let len = rng.random_range(1..600);
                            let stamp: Vec<u8> = (0..len)
                                .map(|j| (t as u8) ^ (i as u8).wrapping_add(j as u8))
                                .collect();
                            let a = db.run(|tx| tx.alloc_bytes(&stamp)).unwrap();
                            live.push((a, stamp));
                        }
                        5..=6 if !live.is_empty() => {
                            let (a, _) = live.swap_remove(rng.random_range(0..live.len()));
                            db.run(|tx| tx.free(a)).unwrap();
                            assert_eq!(
                                db.run(|tx| tx.read_bytes(a)),
                                Err(Error::NotAllocated { addr: a })
                            );
                        }
                        _ if !live.is_empty() => {
                            let (a, stamp) = &live[rng.random_range(0..live.len())];
                            assert_eq!(&db.run(|tx| tx.read_bytes(*a)).unwrap(), stamp);
                        }
                        _ => {}
                    }
                }
                for (a, stamp) in &live {
                    assert_eq!(&db.run(|tx| tx.read_bytes(*a)).unwrap(), stamp);
                }
            });
        }
    });
}

/// Objects copied in 64-byte blocks (the payload copy's fast path, `object/copy.rs`) and word
/// by word (the tail) are never seen torn: writers rewrite every word of two objects — 512 words
/// (64 blocks: a long copy, so writes overlap it) and 13 (one block and five words) — with one
/// value per commit for a while, while readers,
/// in every attempt (aborted ones included), check that all words they got are equal and that
/// the value never goes backwards. A copy that read the wrong words, or outside the seqlock's
/// header checks, shows a mix of two commits.
#[test]
fn large_objects_are_never_read_torn() {
    const WORDS: [usize; 2] = [512, 13];
    const RUN: std::time::Duration = std::time::Duration::from_millis(400);
    let db = Ordo::with_clock(Config::default(), LogicalClock::new()).unwrap();
    let objects: Vec<Addr> =
        db.run(|tx| WORDS.iter().map(|&n| tx.alloc_bytes(&vec![0u8; n * 8])).collect()).unwrap();
    let done = AtomicBool::new(false);
    let words_of = |b: &[u8]| -> Vec<u64> {
        b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()
    };
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut last = [0u64; 2];
                let mut reads = 0u64;
                while !done.load(Ordering::Relaxed) || reads < 100 {
                    let _ = db.run(|tx| {
                        for (k, &a) in objects.iter().enumerate() {
                            let w = tx.read_with(a, words_of)?;
                            assert!(w.iter().all(|&x| x == w[0]), "torn read of {a:?}: {w:?}");
                            assert!(w[0] >= last[k], "went back from {} to {}", last[k], w[0]);
                            last[k] = w[0];
                        }
                        Ok::<_, Error>(())
                    });
                    reads += 1;
                }
            });
        }
        let writer = |stride: u64, first: u64| {
            let (db, objects) = (&db, &objects);
            move || {
                let start = std::time::Instant::now();
                let mut commits = 0u64;
                while start.elapsed() < RUN {
                    let v = first + commits * stride;
                    commits += 1;
                    db.run(|tx| {
                        for (&a, &n) in objects.iter().zip(&WORDS) {
                            // Read first, so concurrent writers conflict and values only grow.
                            let old = tx.read_with(a, words_of)?[0];
                            let value = old.max(v) + 1;
                            let bytes: Vec<u8> = (0..n).flat_map(|_| value.to_le_bytes()).collect();
                            tx.write_bytes(a, &bytes)?;
                        }
                        Ok::<_, Error>(())
                    })
                    .unwrap();
                }
                commits
            }
        };
        let writers = [s.spawn(writer(2, 0)), s.spawn(writer(2, 1))];
        let commits: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
        done.store(true, Ordering::Relaxed);
        let last = db.run(|tx| tx.read_with(objects[0], words_of)).unwrap();
        assert!(last[0] >= commits, "every commit raised the value: {} < {commits}", last[0]);
    });
}
