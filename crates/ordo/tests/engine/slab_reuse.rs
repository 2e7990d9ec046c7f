//! Slab reuse (FaRMv2 §4.8): an empty slab takes another size class only after the GC safe point
//! passes the time it became empty; an allocation during the wait, or a transaction still able to
//! read the old objects, keeps it.
#![allow(clippy::unwrap_used, unreachable_pub)] // test code: panics are the failure reports

use ordo::heap::{HeapConfig, SLAB_BYTES};
use ordo::{Addr, Config, Error, Ordo};
use ordo_clock::LogicalClock;
use rand::{Rng, SeedableRng, rngs::SmallRng};

/// A heap of `slabs` slabs and a manual GC.
fn tiny(slabs: usize) -> Ordo<LogicalClock> {
    let heap =
        HeapConfig { region_bytes: slabs * SLAB_BYTES, regions_max: 1, ..Default::default() };
    Ordo::with_clock(Config { heap, gc_interval_us: 0, ..Config::default() }, LogicalClock::new())
        .unwrap()
}

/// Fills both slabs with large objects and frees them all.
fn fill_and_free(db: &Ordo<LogicalClock>) -> Vec<Addr> {
    let mut big = Vec::new();
    loop {
        match db.run(|tx| tx.alloc_bytes(&[1u8; 200_000])) {
            Ok(a) => big.push(a),
            Err(Error::OutOfMemory { .. }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(big.len() >= 2);
    for a in &big {
        db.run(|tx| tx.free(*a)).unwrap();
    }
    big
}

fn small_alloc(db: &Ordo<LogicalClock>) -> Result<Addr, Error> {
    db.run(|tx| tx.alloc(&7u64))
}

#[test]
fn empty_slabs_take_another_class_after_the_safe_point_passes() {
    let db = tiny(2);
    fill_and_free(&db);
    // Both slabs are empty but not yet reclaimed: a new class finds no slab.
    assert!(matches!(small_alloc(&db), Err(Error::OutOfMemory { .. })));
    db.collect_garbage();
    let round = db.collect_garbage();
    assert!(round.slabs_reclaimed >= 1, "{round:?}");
    let a = small_alloc(&db).unwrap();
    assert_eq!(db.run(|tx| tx.read::<u64>(a)).unwrap(), 7);
    assert!(db.slabs_reclaimed() >= 1);
}

#[test]
fn an_allocation_during_the_wait_keeps_the_slab() {
    let db = tiny(1);
    let big = fill_and_free(&db);
    // Allocate again in the emptied slab before the GC passes its last free.
    let again = db.run(|tx| tx.alloc_bytes(&[2u8; 200_000])).unwrap();
    assert!(big.contains(&again));
    db.collect_garbage();
    assert_eq!(db.collect_garbage().slabs_reclaimed, 0);
    assert!(matches!(small_alloc(&db), Err(Error::OutOfMemory { .. })));
    assert_eq!(db.run(|tx| tx.read_bytes(again)).unwrap(), vec![2u8; 200_000]);
    // Once it is empty again and the safe point passes, it is reused.
    db.run(|tx| tx.free(again)).unwrap();
    db.collect_garbage();
    db.collect_garbage();
    small_alloc(&db).unwrap();
}

#[test]
fn an_active_reader_keeps_the_slab() {
    let db = tiny(1);
    let reader = db.begin().unwrap(); // older than every free below
    fill_and_free(&db);
    for _ in 0..3 {
        assert_eq!(db.collect_garbage().slabs_reclaimed, 0);
    }
    drop(reader);
    db.collect_garbage();
    db.collect_garbage();
    small_alloc(&db).unwrap();
}

/// Threads cycle through size bands that cannot all fit at once, with the background GC
/// reclaiming slabs between them; stamped objects must never share memory.
#[test]
fn reuse_under_concurrency_never_shares_slots() {
    let seed = &ordo_seed::Seed::new("reuse_under_concurrency_never_shares_slots");
    let heap = HeapConfig { region_bytes: 48 * SLAB_BYTES, regions_max: 1, ..Default::default() };
    let db = Ordo::with_clock(
        Config { heap, gc_interval_us: 100, ..Config::default() },
        LogicalClock::new(),
    )
    .unwrap();
    let bands: [(usize, usize); 4] = [(8, 64), (2_000, 6_000), (100, 400), (30_000, 60_000)];
    std::thread::scope(|s| {
        for t in 0..3u64 {
            let db = &db;
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed.derive(t));
                for round in 0..12 {
                    let (lo, hi) = bands[(round + t as usize) % bands.len()];
                    let mut live: Vec<(Addr, Vec<u8>)> = Vec::new();
                    for i in 0..40u64 {
                        let len = rng.random_range(lo..hi);
                        let stamp: Vec<u8> =
                            (0..len).map(|j| (t as u8) ^ (i as u8) ^ (j as u8)).collect();
                        let deadline =
                            std::time::Instant::now() + std::time::Duration::from_secs(20);
                        let a = loop {
                            match db.run(|tx| tx.alloc_bytes(&stamp)) {
                                Ok(a) => break a,
                                // Slabs freed by other bands come back once the GC passes.
                                Err(Error::OutOfMemory { .. }) => {
                                    assert!(
                                        std::time::Instant::now() < deadline,
                                        "no slab came back"
                                    );
                                    std::thread::sleep(std::time::Duration::from_millis(1))
                                }
                                Err(e) => panic!("{e}"),
                            }
                        };
                        live.push((a, stamp));
                    }
                    for (a, stamp) in &live {
                        assert_eq!(&db.run(|tx| tx.read_bytes(*a)).unwrap(), stamp);
                    }
                    for (a, _) in live {
                        db.run(|tx| tx.free(a)).unwrap();
                    }
                }
            });
        }
    });
    assert!(db.slabs_reclaimed() > 0, "the bands should have forced slab reuse");
}
