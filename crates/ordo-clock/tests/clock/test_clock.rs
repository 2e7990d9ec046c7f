//! The test clock meets the `Clock` contract exactly when its skews stay inside the claimed
//! boundary: every interval contains the reference ("true global") time when all offsets lie in
//! `[-B_claimed, 0]` without drift, and not otherwise.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use ordo_clock::{Clock, Reference, TestClock, ThreadSkew};

const B: u64 = 1_000;

#[test]
fn intervals_contain_the_reference_time_when_skew_is_within_the_boundary() {
    let clock = TestClock::new(B);
    for offset in [-(B as i64), -(B as i64) + 1, -500, -1, 0] {
        clock.set_thread_skew(offset, 0);
        for _ in 0..1_000 {
            let (interval, reference) = clock.read_with_reference();
            assert!(interval.contains(reference), "offset {offset}: {interval:?} vs {reference:?}");
            assert_eq!(interval.width_nanos(), B);
        }
    }
}

#[test]
fn intervals_contain_the_reference_time_on_every_thread() {
    let clock = TestClock::builder()
        .claimed_boundary_nanos(B)
        .skew_by_index(|i| ThreadSkew::offset(-((i as i64 * 337) % (B as i64 + 1))))
        .build();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..10_000 {
                    let (interval, reference) = clock.read_with_reference();
                    assert!(interval.contains(reference), "{interval:?} vs {reference:?}");
                }
            });
        }
    });
}

#[test]
fn intervals_miss_the_reference_time_when_skew_exceeds_the_boundary() {
    let clock = TestClock::builder()
        .claimed_boundary_nanos(B)
        .reference(Reference::Manual { start_nanos: 1_000_000 })
        .build();
    for offset in [-(B as i64) - 1, 1, 5_000] {
        clock.set_thread_skew(offset, 0);
        let (interval, reference) = clock.read_with_reference();
        assert!(!interval.contains(reference), "offset {offset}");
    }
}

#[test]
fn drift_moves_a_thread_out_of_the_window_over_time() {
    let clock = TestClock::builder()
        .claimed_boundary_nanos(B)
        .reference(Reference::Manual { start_nanos: 1_000_000 })
        .build();
    clock.set_thread_skew(0, 100); // 100 ppm fast: 1 µs ahead after 10 ms
    assert!(clock.now().contains(clock.reference_now()));
    clock.advance(20_000_000);
    let (interval, reference) = clock.read_with_reference();
    assert_eq!(interval.lo().nanos_since(reference), 2_000);
    assert!(!interval.contains(reference));
}

#[test]
fn get_ts_is_in_the_past_when_it_returns() {
    let clock = TestClock::builder()
        .claimed_boundary_nanos(B)
        .reference(Reference::Stepped { start_nanos: 1_000_000, step_nanos: 10 })
        .build();
    clock.set_thread_skew(-(B as i64) / 3, 0);
    for _ in 0..100 {
        let ts = clock.get_ts();
        assert!(ts < clock.reference_now());
    }
}
