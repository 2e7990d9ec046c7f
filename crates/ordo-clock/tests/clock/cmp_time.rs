//! ORDO `cmp_time` on clock readings: *uncertain* exactly when the two readings' counters are
//! within the boundary of each other, ordered otherwise (ORDO Fig. 3 lines 4–9).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use ordo_clock::{
    CalibrateOptions, Clock, Interval, OrdoClock, OrdoDetection, Reference, TestClock, TimeOrder,
    Timestamp,
};

/// Readings of one thread with skews `a` and `b` at the same (frozen) reference time: the
/// counters differ by `a - b`, the boundary is `B`, so the answer is uncertain iff
/// `|a - b| <= B`.
#[test]
fn readings_are_uncertain_exactly_inside_the_window() {
    const B: u64 = 50;
    let clock = TestClock::builder()
        .claimed_boundary_nanos(B)
        .reference(Reference::Manual { start_nanos: 1_000_000 })
        .build();
    for a in -120i64..=120 {
        for b in -120i64..=120 {
            clock.set_thread_skew(a, 0);
            let ra = clock.now();
            clock.set_thread_skew(b, 0);
            let rb = clock.now();
            let expected = if a + (B as i64) < b {
                TimeOrder::Before
            } else if b + (B as i64) < a {
                TimeOrder::After
            } else {
                TimeOrder::Uncertain
            };
            assert_eq!(ra.cmp_time(rb), expected, "a={a} b={b}");
            // Antisymmetry: swapping the arguments swaps Before and After.
            let swapped = match expected {
                TimeOrder::Before => TimeOrder::After,
                TimeOrder::After => TimeOrder::Before,
                TimeOrder::Uncertain => TimeOrder::Uncertain,
            };
            assert_eq!(rb.cmp_time(ra), swapped, "a={a} b={b}");
        }
    }
}

/// The window's edges, on raw intervals: distance B is still uncertain, B + 1 is ordered.
#[test]
fn the_window_edges_are_inclusive() {
    for b in [0u64, 1, 7, 1_000] {
        let at = |t: u64| Interval::with_width(Timestamp::from_nanos(t), b);
        let base = 10_000;
        assert_eq!(at(base).cmp_time(at(base + b)), TimeOrder::Uncertain);
        assert_eq!(at(base).cmp_time(at(base + b + 1)), TimeOrder::Before);
        assert_eq!(at(base + b + 1).cmp_time(at(base)), TimeOrder::After);
    }
}

/// A `get_ts` value is certainly before every reading taken after it returns (it is in the
/// past), and a fresh reading is uncertain with respect to itself.
#[test]
fn a_timestamp_is_before_every_later_ordo_reading() {
    let options = CalibrateOptions { runs: 20, ..CalibrateOptions::default() };
    let clock = match OrdoClock::detect(&options, None).unwrap() {
        OrdoDetection::Ordo { clock, .. } => clock,
        OrdoDetection::UseSystemClock { reason } => return eprintln!("skipped: {reason}"),
    };
    for _ in 0..1_000 {
        let ts = clock.get_ts();
        let later = clock.now();
        assert_eq!(Interval::exact(ts).cmp_time(later), TimeOrder::Before);
        assert_eq!(later.cmp_time(later), TimeOrder::Uncertain);
    }
}
