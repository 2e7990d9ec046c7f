//! The embedded API: typed errors on bad input, user errors passed through, retry bounds,
//! and allocation/free visibility.
#![allow(clippy::unwrap_used, unreachable_pub)] // test code: panics are the failure reports

use ordo::{Abort, Addr, Config, Error, Isolation, Options, Ordo, Versions};
use ordo_clock::{Clock, LogicalClock};

fn db() -> Ordo<LogicalClock> {
    Ordo::with_clock(Config::default(), LogicalClock::new()).unwrap()
}

#[test]
fn bad_sizes_are_typed_errors() {
    let db = db();
    let mut tx = db.begin().unwrap();
    assert_eq!(tx.alloc_bytes(&[]), Err(Error::ZeroSize));
    let big = vec![0u8; ordo::heap::OBJECT_BYTES_MAX + 1];
    assert!(matches!(tx.alloc_bytes(&big), Err(Error::TooLarge { .. })));
    let a = tx.alloc(&7u64).unwrap();
    assert!(matches!(tx.write(a, &1u32), Err(Error::WrongSize { len_bytes: 8, got_bytes: 4, .. })));
    assert!(matches!(tx.read::<u32>(a), Err(Error::WrongSize { .. })));
    tx.commit().unwrap();
    db.run(|tx| {
        assert!(matches!(tx.write_bytes(a, &[1, 2, 3]), Err(Error::WrongSize { .. })));
        assert!(matches!(tx.read::<[u64; 2]>(a), Err(Error::WrongSize { .. })));
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(db.run(|tx| tx.read::<u64>(a)).unwrap(), 7);
}

#[test]
fn bad_addresses_are_typed_errors() {
    let db = db();
    let a = db.run(|tx| tx.alloc(&1u64)).unwrap();
    let mut tx = db.begin().unwrap();
    for bad in
        [Addr::NULL, Addr::from_raw(a.to_raw() + 8), Addr::new(999, 64), Addr::from_raw(u64::MAX)]
    {
        assert_eq!(tx.read::<u64>(bad), Err(Error::InvalidAddress { addr: bad }), "{bad}");
        assert_eq!(tx.write(bad, &1u64), Err(Error::InvalidAddress { addr: bad }));
        assert_eq!(tx.free(bad), Err(Error::InvalidAddress { addr: bad }));
    }
    drop(tx);

    // A slot reserved by an aborted allocation was never allocated.
    let mut tx = db.begin().unwrap();
    let never = tx.alloc(&5u64).unwrap();
    tx.abort();
    assert_eq!(db.run(|tx| tx.read::<u64>(never)), Err(Error::NotAllocated { addr: never }));

    // A freed object reads as not allocated, and cannot be freed or written again.
    db.run(|tx| tx.free(a)).unwrap();
    assert_eq!(db.run(|tx| tx.read::<u64>(a)), Err(Error::NotAllocated { addr: a }));
    assert_eq!(db.run(|tx| tx.free(a)), Err(Error::NotAllocated { addr: a }));
    assert_eq!(db.run(|tx| tx.write(a, &2u64)), Err(Error::NotAllocated { addr: a }));
}

#[test]
fn writes_are_visible_only_after_commit_and_read_your_writes() {
    let db = db();
    let a = db.run(|tx| tx.alloc(&1u64)).unwrap();
    let mut t1 = db.begin().unwrap();
    t1.write(a, &2u64).unwrap();
    assert_eq!(t1.read::<u64>(a).unwrap(), 2);
    assert_eq!(db.run(|tx| tx.read::<u64>(a)).unwrap(), 1);
    let info = t1.commit().unwrap();
    assert!(info.wts.unwrap() > info.rts);
    assert_eq!(db.run(|tx| tx.read::<u64>(a)).unwrap(), 2);

    // Alloc then free in one transaction leaves nothing behind.
    let mut tx = db.begin().unwrap();
    let b = tx.alloc(&3u64).unwrap();
    tx.free(b).unwrap();
    assert_eq!(tx.read::<u64>(b), Err(Error::NotAllocated { addr: b }));
    assert!(tx.commit().unwrap().wts.is_none(), "nothing left to write");
}

#[derive(Debug, PartialEq)]
enum AppError {
    Db(Error),
    Overdrawn,
}
impl From<Error> for AppError {
    fn from(e: Error) -> Self {
        AppError::Db(e)
    }
}

/// Read-your-writes across the write set's index threshold: a transaction that grows its write
/// set past the threshold, frees allocations to fall back under it, and grows again must still
/// find every write it buffered. (The index was once left stale when the set shrank, and the
/// writes buffered meanwhile read back as the committed values.)
#[test]
fn read_your_writes_after_the_write_set_shrinks_and_grows() {
    let db = db();
    let (x, y) = db.run(|tx| Ok::<_, Error>((tx.alloc(&1u64)?, tx.alloc(&1u64)?))).unwrap();
    db.run(|tx| {
        let fresh: Vec<Addr> = (0..17u64).map(|i| tx.alloc(&i)).collect::<Result<_, _>>()?;
        tx.free(fresh[0])?;
        tx.free(fresh[1])?;
        tx.write(x, &2u64)?;
        tx.write(y, &2u64)?;
        assert_eq!(tx.read::<u64>(x)?, 2, "a write buffered under the threshold reads back");
        assert_eq!(tx.read::<u64>(y)?, 2);
        assert_eq!(tx.read::<u64>(fresh[2])?, 2);
        tx.write(x, &3u64)?;
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(
        db.run(|tx| Ok::<_, Error>((tx.read::<u64>(x)?, tx.read::<u64>(y)?))).unwrap(),
        (3, 2)
    );
}

#[test]
fn user_errors_pass_through_and_roll_back() {
    let db = db();
    let a = db.run(|tx| tx.alloc(&10u64)).unwrap();
    let r: Result<(), AppError> = db.run(|tx| {
        tx.write(a, &0u64)?;
        Err(AppError::Overdrawn)
    });
    assert_eq!(r, Err(AppError::Overdrawn));
    assert_eq!(db.run(|tx| tx.read::<u64>(a)).unwrap(), 10);
}

#[test]
fn retries_are_bounded_and_report_the_last_abort() {
    let db = db();
    let a = db.run(|tx| tx.alloc(&0u64)).unwrap();
    // A reader at an old snapshot that writes is doomed once a newer version exists.
    let mut attempts = 0;
    let options = Options { retries_max: 3, ..Options::isolation(Isolation::Serializable) };
    let r: Result<(), Error> = db.run_with(options, |tx| {
        attempts += 1;
        let v: u64 = tx.read(a)?;
        // A concurrent commit between our read and our commit.
        db.run(|t2| t2.write(a, &(v + 100)))?;
        tx.write(a, &(v + 1))
    });
    assert_eq!(attempts, 3);
    // The lock finds the object changed since it was read.
    assert!(
        matches!(
            r,
            Err(Error::RetriesExhausted { attempts: 3, last: Abort::WriteConflict { .. } })
        ),
        "{r:?}"
    );
    let s = db.stats();
    assert_eq!(s.aborts_of(ordo::AbortKind::WriteConflict), 3);
    assert_eq!(s.commits, 1 + 3);
}

#[test]
fn doomed_attempts_stay_doomed() {
    let db = db();
    let a = db.run(|tx| tx.alloc(&0u64)).unwrap();
    let mut old = db.begin_with(Options::isolation(Isolation::Serializable)).unwrap();
    db.run(|tx| tx.write(a, &1u64)).unwrap();
    db.run(|tx| tx.write(a, &2u64)).unwrap();
    let mut fresh = db.begin().unwrap();
    assert_eq!(fresh.read::<u64>(a).unwrap(), 2);
    // `old` began before both writes; reading the head aborts, and every later call repeats it.
    let e = old.read::<u64>(a).unwrap_err();
    assert!(matches!(e, Error::Aborted(Abort::TooNew { .. })));
    assert_eq!(old.alloc(&1u8), Err(e.clone()));
    assert_eq!(old.commit(), Err(e));
}

#[test]
fn bad_config_is_rejected() {
    let mut c = Config::default();
    c.heap.region_bytes = 12345;
    assert!(matches!(Ordo::with_clock(c, LogicalClock::new()), Err(Error::Config(_))));
    let c = Config { threads_max: 0, ..Config::default() };
    assert!(matches!(Ordo::with_clock(c, LogicalClock::new()), Err(Error::Config(_))));
}

#[test]
fn read_view_reads_in_place_buffered_and_old_versions() {
    let config = Config { versions: ordo::Versions::Multi, ..Config::default() };
    let db = Ordo::with_clock(config, LogicalClock::new()).unwrap();
    let a = db.run(|tx| tx.alloc(&[1u64, 2, 3])).unwrap();
    let mut old = db.begin().unwrap();
    assert_eq!(old.read_view(a, |v| (v.len(), v.word(1))).unwrap(), (24, Some(2)));
    db.run(|tx| tx.write(a, &[10u64, 20, 30])).unwrap();
    // The old snapshot reads the old version through a copy.
    assert_eq!(old.read_view(a, |v| v.word(2)).unwrap(), Some(3));
    let mut tx = db.begin().unwrap();
    assert_eq!(tx.read_view(a, |v| v.word(2)).unwrap(), Some(30));
    tx.write(a, &[7u64, 8, 9]).unwrap();
    let mut field = [0u8; 8];
    assert_eq!(tx.read_view(a, |v| v.copy_to(8, &mut field)).unwrap(), Some(()));
    assert_eq!(u64::from_le_bytes(field), 8);
    assert_eq!(tx.read_view(a, |v| v.copy_to(20, &mut [0u8; 8])).unwrap(), None, "past the end");
    tx.free(a).unwrap();
    assert_eq!(tx.read_view(a, |v| v.len()), Err(Error::NotAllocated { addr: a }));
}

#[test]
fn prefetch_is_only_a_hint() {
    let db = db();
    let (a, b) = db.run(|tx| Ok::<_, Error>((tx.alloc(&[1u64; 32])?, tx.alloc(&0u64)?))).unwrap();
    let mut tx = db.begin().unwrap();
    tx.write(b, &1u64).unwrap();
    // Any address: an object, the null address, one inside an object, one in no region.
    for addr in [a, Addr::NULL, Addr::from_raw(a.to_raw() + 8), Addr::new(u16::MAX, 64)] {
        tx.prefetch(addr);
        // The same hint between transactions.
        db.prefetch(addr);
    }
    // Nothing was read into the transaction: a write to `a` does not fail its validation.
    db.run(|w| w.write(a, &[2u64; 32])).unwrap();
    tx.commit().unwrap();
    assert_eq!(db.run(|tx| tx.read::<[u64; 32]>(a)).unwrap(), [2; 32]);
}

/// `update_words` changes the value the transaction sees — its own buffered write or the
/// committed one — in place, keeps the object's length (padding past an odd length is
/// ignored), and refuses what `write_bytes` refuses.
#[test]
fn update_words_changes_objects_in_place() {
    let db = db();
    let (a, odd) = db
        .run(|tx| Ok::<_, Error>((tx.alloc(&[1u64, 2, 3])?, tx.alloc_bytes(&[1, 2, 3, 4, 5])?)))
        .unwrap();
    let seen = db
        .run(|tx| {
            let seen = tx.update_words(a, |w| {
                let before = w.to_vec();
                w[1] += 40;
                before
            })?;
            // Its own write, read back and updated again.
            assert_eq!(tx.read::<[u64; 3]>(a)?, [1, 42, 3]);
            tx.update_words(a, |w| w[2] = 7)?;
            tx.update_words(odd, |w| {
                assert_eq!(w, [u64::from_le_bytes([1, 2, 3, 4, 5, 0, 0, 0])]);
                w[0] = u64::MAX; // bytes past the length are dropped
            })?;
            Ok::<_, Error>(seen)
        })
        .unwrap();
    assert_eq!(seen, vec![1, 2, 3]);
    assert_eq!(db.run(|tx| tx.read::<[u64; 3]>(a)).unwrap(), [1, 42, 7]);
    assert_eq!(db.run(|tx| tx.read_bytes(odd)).unwrap(), vec![0xff; 5]);
    db.run(|tx| {
        tx.update_words(odd, |w| assert_eq!(w, [0xff_ff_ff_ff_ff]))?;
        Ok::<_, Error>(())
    })
    .unwrap();
    // `update_words_len` gives the length in bytes, read from the heap and from the
    // transaction's own write alike.
    let lens = db
        .run(|tx| {
            let first = tx.update_words_len(odd, |w, len| (w.len(), len))?;
            let again = tx.update_words_len(odd, |w, len| (w.len(), len))?;
            let words = tx.update_words_len(a, |w, len| (w.len(), len))?;
            Ok::<_, Error>([first, again, words])
        })
        .unwrap();
    assert_eq!(lens, [(1, 5), (1, 5), (3, 24)]);

    // Refusals: a freed object, a read-only transaction, a bad address.
    db.run(|tx| {
        tx.free(odd)?;
        assert_eq!(tx.update_words(odd, |_| ()), Err(Error::NotAllocated { addr: odd }));
        assert_eq!(
            tx.update_words(Addr::NULL, |_| ()),
            Err(Error::InvalidAddress { addr: Addr::NULL })
        );
        Ok::<_, Error>(())
    })
    .unwrap();
    // A stale snapshot is read-only (multi-version mode keeps the version it reads).
    let mv = Ordo::with_clock(
        Config { versions: Versions::Multi, ..Config::default() },
        LogicalClock::new(),
    )
    .unwrap();
    let b = mv.run(|tx| tx.alloc(&1u64)).unwrap();
    let now = mv.clock().now().lo();
    let r = mv.read_only_at(now, |tx| tx.update_words(b, |_| ()));
    assert_eq!(r, Err(Error::ReadOnly { addr: b }));
}

/// The read behind `update_words` is checked at commit: a write committed between it and the
/// commit aborts the updating transaction (no lost update), even when that write's timestamp
/// is at or below the updater's optimistic read timestamp — here the updater's thread runs
/// 40 ms ahead within a claimed 50 ms uncertainty, so its `rts` is past the other writer's
/// `wts`. Without the read in the read set the commit would lock with `NotAfter(rts)`, which
/// that version passes, and install `1 + 1` over the other writer's `100`.
#[test]
fn update_words_aborts_on_a_concurrent_write() {
    let clock = ordo_clock::TestClock::new(50_000_000);
    let db = Ordo::with_clock(Config::default(), clock.clone()).unwrap();
    let a = db.run(|tx| tx.alloc(&1u64)).unwrap();
    clock.set_thread_skew(40_000_000, 0);
    let mut tx = db.begin().unwrap();
    tx.update_words(a, |w| w[0] += 1).unwrap();
    let wts = std::thread::scope(|s| {
        s.spawn(|| {
            let mut other = db.begin().unwrap();
            other.write(a, &100u64).unwrap();
            other.commit().unwrap().wts.unwrap()
        })
        .join()
        .unwrap()
    });
    assert!(
        wts <= tx.rts(),
        "the set-up needs the other write at or below rts: {wts:?} {:?}",
        tx.rts()
    );
    assert!(matches!(tx.commit(), Err(Error::Aborted(_))), "the update overwrote a newer value");
    assert_eq!(db.run(|tx| tx.read::<u64>(a)).unwrap(), 100);
}

/// Concurrent increments through `update_words` lose none (`run` retries the aborted ones).
#[test]
fn update_words_increments_from_threads_all_count() {
    let db = db();
    let a = db.run(|tx| tx.alloc(&[0u64; 4])).unwrap();
    let per_thread = 2_000u64;
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..per_thread {
                    db.run(|tx| tx.update_words(a, |w| w.iter_mut().for_each(|x| *x += 1)))
                        .unwrap();
                }
            });
        }
    });
    assert_eq!(db.run(|tx| tx.read::<[u64; 4]>(a)).unwrap(), [4 * per_thread; 4]);
}

/// `Ordo::read_latest` reads the newest committed version of one object outside any
/// transaction: not a transaction's buffered write, not a freed object, typed errors for bad
/// addresses, and a view that may read only parts of the payload.
#[test]
fn read_latest_reads_committed_versions_only() {
    let db = db();
    let a = db.run(|tx| tx.alloc(&[1u64, 2, 3])).unwrap();
    assert_eq!(
        db.read_latest(a, |v| (v.len(), v.word(0), v.word(2))).unwrap(),
        (24, Some(1), Some(3))
    );
    let mut tx = db.begin().unwrap();
    tx.write(a, &[7u64, 8, 9]).unwrap();
    assert_eq!(
        db.read_latest(a, |v| v.word(0)).unwrap(),
        Some(1),
        "a buffered write is not committed"
    );
    tx.commit().unwrap();
    assert_eq!(db.read_latest(a, |v| v.word(0)).unwrap(), Some(7));
    db.run(|tx| tx.free(a)).unwrap();
    assert_eq!(db.read_latest(a, |v| v.len()), Err(Error::NotAllocated { addr: a }));
    assert!(db.read_latest(Addr::NULL, |v| v.len()).is_err());
    assert!(db.read_latest(Addr::new(u16::MAX, 64), |v| v.len()).is_err());
}

/// Concurrent writers keep both words of an object equal and increasing; `read_latest` must
/// never see them differ (a torn version — it reads under the seqlock and waits out a commit
/// installing while locked) nor go backwards (it is linearizable for the object).
#[test]
fn read_latest_is_one_version_and_never_goes_back() {
    let db = db();
    let a = db.run(|tx| tx.alloc(&[0u64; 16])).unwrap();
    let (started, done) =
        (std::sync::atomic::AtomicBool::new(false), std::sync::atomic::AtomicBool::new(false));
    let per_thread = 20_000u64;
    let reads = std::thread::scope(|s| {
        let writers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    // Start once the reader runs, so that reads and writes overlap even when the
                    // test harness keeps the cores busy.
                    while !started.load(std::sync::atomic::Ordering::Acquire) {
                        std::thread::yield_now();
                    }
                    for _ in 0..per_thread {
                        db.run(|tx| tx.update_words(a, |w| w.iter_mut().for_each(|x| *x += 1)))
                            .unwrap();
                    }
                })
            })
            .collect();
        let reader = s.spawn(|| {
            let (mut last, mut reads) = (0u64, 0u64);
            started.store(true, std::sync::atomic::Ordering::Release);
            while !done.load(std::sync::atomic::Ordering::Relaxed) || reads < 1000 {
                let words: Vec<u64> =
                    db.read_latest(a, |v| (0..16).map(|i| v.word(i).unwrap()).collect()).unwrap();
                assert!(words.iter().all(|&w| w == words[0]), "a torn version: {words:?}");
                assert!(words[0] >= last, "went back from {last} to {}", words[0]);
                last = words[0];
                reads += 1;
            }
            reads
        });
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        reader.join().unwrap()
    });
    assert!(reads >= 1000);
    assert_eq!(db.read_latest(a, |v| v.word(15)).unwrap(), Some(2 * per_thread));
}

/// A transaction that writes some of the objects it read still validates the others. Commit
/// validation skips the reads a transaction marked as written (it locks those objects); the
/// mark must land on the written object's read, for both ways of writing after a read: a
/// read-modify-write in place (`update_words`: its own read, the newest) and a write after an
/// earlier read (`write`: the most recent read of that object, not the newest read).
#[test]
fn writing_some_reads_still_validates_the_others() {
    type Step = fn(&mut ordo::Tx<'_, LogicalClock>, Addr, Addr);
    for versions in [Versions::Single, Versions::Multi] {
        let db = Ordo::with_clock(Config { versions, ..Config::default() }, LogicalClock::new())
            .unwrap();
        let (a, b) = db.run(|tx| Ok::<_, Error>((tx.alloc(&1u64)?, tx.alloc(&2u64)?))).unwrap();
        let steps: [(&str, Step); 2] = [
            ("update_words after reading b", |tx, a, b| {
                tx.read::<u64>(b).unwrap();
                tx.update_words(a, |w| w[0] += 10).unwrap();
            }),
            ("write after reading a then b", |tx, a, b| {
                let v = tx.read::<u64>(a).unwrap();
                tx.read::<u64>(b).unwrap();
                tx.write(a, &(v + 10)).unwrap();
            }),
        ];
        for (name, step) in steps {
            let before = db.run(|tx| tx.read::<u64>(a)).unwrap();
            let mut t1 = db.begin().unwrap();
            step(&mut t1, a, b);
            db.run(|tx| tx.update_words(b, |w| w[0] += 1)).unwrap();
            assert_eq!(
                t1.commit().map(|_| ()),
                Err(Error::Aborted(Abort::Validation { addr: b })),
                "{versions:?}, {name}: b changed under a transaction that read it"
            );
            assert_eq!(db.run(|tx| tx.read::<u64>(a)).unwrap(), before, "{name}");
            // Without the concurrent write the same steps commit: the written read passes.
            let mut t1 = db.begin().unwrap();
            step(&mut t1, a, b);
            t1.commit().unwrap();
            assert_eq!(db.run(|tx| tx.read::<u64>(a)).unwrap(), before + 10, "{name}");
        }
    }
}
