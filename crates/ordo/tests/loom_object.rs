//! Loom models of the engine's lock-free cores: the object header protocol and the free bitmap.
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p ordo --test loom_object`.
#![cfg(loom)]
#![allow(clippy::unwrap_used, unreachable_pub)] // test code: panics are the failure reports

use loom::sync::Arc;
use loom::sync::atomic::AtomicU64;
use loom::thread;
use ordo::bitmap::FreeBitmap;
use ordo::object::{Expect, HEADER_WORDS, ObjectRef, ReadFail};
use ordo_clock::Timestamp;

fn slot(payload_words: usize) -> Arc<Vec<AtomicU64>> {
    Arc::new((0..HEADER_WORDS + payload_words).map(|_| AtomicU64::new(0)).collect())
}

fn ts(n: u64) -> Timestamp {
    Timestamp::from_nanos(n)
}

/// A reader racing a writer sees the old version, the new version, or the lock — never a mix.
#[test]
fn read_never_sees_a_torn_version() {
    loom::model(|| {
        let s = slot(2);
        let o = ObjectRef::new(&s);
        o.try_lock(Expect::Free).unwrap();
        o.install(ts(1), true, 16, 0, &[10, 11]);

        let writer = {
            let s = s.clone();
            thread::spawn(move || {
                let o = ObjectRef::new(&s);
                let prev = o.try_lock(Expect::Version(ts(1))).unwrap();
                assert_eq!(prev.ts(), ts(1));
                o.install(ts(2), true, 16, 0, &[20, 21]);
            })
        };
        let mut out = Vec::new();
        match o.read(&mut out, true) {
            Ok(snap) if snap.header.ts() == ts(1) => assert_eq!(out, vec![10, 11]),
            Ok(snap) => {
                assert_eq!(snap.header.ts(), ts(2));
                assert_eq!(out, vec![20, 21]);
            }
            Err(ReadFail::Locked) => {}
            Err(e) => panic!("unexpected {e:?}"),
        }
        writer.join().unwrap();
        assert_eq!(o.read(&mut out, true).unwrap().header.ts(), ts(2));
        assert_eq!(out, vec![20, 21]);
    });
}

/// `read_used` racing a writer that changes how much of the payload is in use (word 0 says
/// how many bytes): the prefix it copies is all of one version, whichever it reports.
#[test]
fn read_used_never_mixes_versions() {
    loom::model(|| {
        let s = slot(3);
        let o = ObjectRef::new(&s);
        o.try_lock(Expect::Free).unwrap();
        o.install(ts(1), true, 24, 0, &[8, 11, 12]);

        let writer = {
            let s = s.clone();
            thread::spawn(move || {
                let o = ObjectRef::new(&s);
                o.try_lock(Expect::Version(ts(1))).unwrap();
                o.install(ts(2), true, 24, 0, &[24, 21, 22]);
            })
        };
        let mut out = Vec::new();
        match o.read_used(&mut out, true, |w| w as usize) {
            Ok(snap) if snap.header.ts() == ts(1) => assert_eq!(out, vec![8]),
            Ok(snap) => {
                assert_eq!(snap.header.ts(), ts(2));
                assert_eq!(out, vec![24, 21, 22]);
            }
            Err(ReadFail::Locked) => {}
            Err(e) => panic!("unexpected {e:?}"),
        }
        writer.join().unwrap();
    });
}

/// Two writers expecting the same version: exactly one locks; validation of the old version
/// fails once the winner installed.
#[test]
fn one_of_two_lockers_wins() {
    loom::model(|| {
        let s = slot(1);
        let o = ObjectRef::new(&s);
        o.try_lock(Expect::Free).unwrap();
        o.install(ts(1), true, 8, 0, &[1]);
        let observed = o.header();
        let spawn = |v: u64| {
            let s = s.clone();
            thread::spawn(move || {
                let o = ObjectRef::new(&s);
                match o.try_lock(Expect::Version(ts(1))) {
                    Ok(_) => {
                        o.install(ts(1 + v), true, 8, 0, &[v]);
                        true
                    }
                    Err(_) => false,
                }
            })
        };
        let a = spawn(2);
        let b = spawn(3);
        let wins = [a.join().unwrap(), b.join().unwrap()];
        assert_eq!(wins.iter().filter(|w| **w).count(), 1);
        assert!(!o.validate(observed));
    });
}

/// An aborted writer restores the version exactly; readers never see its payload.
#[test]
fn unlock_restores_the_version() {
    loom::model(|| {
        let s = slot(1);
        let o = ObjectRef::new(&s);
        o.try_lock(Expect::Free).unwrap();
        o.install(ts(5), true, 8, 0, &[7]);
        let observed = o.header();
        let writer = {
            let s = s.clone();
            thread::spawn(move || {
                let o = ObjectRef::new(&s);
                let prev = o.try_lock(Expect::NotAfter(ts(9))).unwrap();
                o.unlock(prev);
            })
        };
        let mut out = Vec::new();
        if let Ok(snap) = o.read(&mut out, true) {
            assert_eq!(snap.header, observed);
            assert_eq!(out, vec![7]);
        }
        writer.join().unwrap();
        assert!(o.validate(observed));
    });
}

/// Concurrent takes never hand out one slot twice, and a put racing the take that empties a
/// leaf is never hidden by the summary level.
#[test]
fn bitmap_take_put_race() {
    loom::model(|| {
        let b = Arc::new(FreeBitmap::new_all_free(2));
        let first = b.take().unwrap();
        let t = {
            let b = b.clone();
            thread::spawn(move || b.take())
        };
        b.put(first);
        let other = t.join().unwrap();
        let mut got = vec![other];
        got.push(b.take());
        got.push(b.take());
        let taken: Vec<usize> = got.into_iter().flatten().collect();
        assert_eq!(taken.len(), 2, "both slots must be found again: {taken:?}");
        assert_ne!(taken[0], taken[1]);
        assert_eq!(b.take(), None);
    });
}
