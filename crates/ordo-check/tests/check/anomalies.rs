//! Hand-written anomalies: each history below is rejected by the checks that must reject it,
//! with the anomaly named, and accepted by the weaker checks that allow it. A checker that
//! never fails proves nothing (DESIGN §8).

use ordo_check::{
    Consistency, History, HistoryBuilder, Violation, check, check_opacity, check_serializable,
    check_snapshot_isolation, check_strict_serializable, check_strict_snapshot_isolation,
};

const ALL: [Consistency; 5] = [
    Consistency::Serializable,
    Consistency::StrictSerializable,
    Consistency::Opacity,
    Consistency::SnapshotIsolation,
    Consistency::StrictSnapshotIsolation,
];

/// Asserts that `result` is a violation called `name`, and returns it.
#[track_caller]
fn rejected(result: Result<(), Violation>, name: &str) -> Violation {
    match result {
        Ok(()) => panic!("expected {name}, but the history was accepted"),
        Err(v) => {
            assert_eq!(v.name(), name, "wrong anomaly reported:\n{v}");
            v
        }
    }
}

#[track_caller]
fn rejected_by_all(h: &History, name: &str) {
    for model in ALL {
        let v = check(h, model).expect_err(&format!("{model:?} accepted a {name} history"));
        assert_eq!(v.name(), name, "{model:?} reported the wrong anomaly:\n{v}");
    }
}

#[track_caller]
fn accepted_by_all(h: &History) {
    for model in ALL {
        if let Err(v) = check(h, model) {
            panic!("{model:?} rejected a valid history:\n{v}");
        }
    }
}

#[test]
fn g0_write_cycle() {
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).append(1, 1).append(2, 2).commit();
    b.txn(1).span(2, 3).append(1, 2).append(2, 1).commit();
    b.txn(2).read_list(1, &[1, 2]).read_list(2, &[1, 2]).commit();
    let h = b.build();
    rejected_by_all(&h, "G0");
    let text = check_serializable(&h).unwrap_err().to_string();
    assert!(text.contains("T1 -ww(key 1)-> T2 -ww(key 2)-> T1"), "{text}");
}

#[test]
fn g0_write_cycle_on_tagged_registers() {
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).write_register_at(1, 1, 10).write_register_at(2, 2, 20).commit();
    b.txn(1).span(2, 3).write_register_at(1, 2, 20).write_register_at(2, 1, 10).commit();
    rejected_by_all(&b.build(), "G0");
}

#[test]
fn g1a_aborted_read() {
    let mut b = HistoryBuilder::new();
    b.txn(0).append(1, 1).abort();
    b.txn(1).read_list(1, &[1]).commit();
    rejected_by_all(&b.build(), "G1a");

    let mut b = HistoryBuilder::new();
    b.txn(0).write_register(1, 7).abort();
    b.txn(1).read_register(1, Some(7)).commit();
    let v = rejected(check_serializable(&b.build()), "G1a");
    assert!(v.to_string().contains("aborted read"), "{v}");
}

#[test]
fn g1b_intermediate_read() {
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).append(1, 1).append(1, 2).commit();
    b.txn(1).span(2, 3).read_list(1, &[1]).commit();
    rejected_by_all(&b.build(), "G1b");

    // A list missing the writer's *earlier* append shows it half applied too.
    let mut b = HistoryBuilder::new();
    b.txn(0).append(1, 1).append(1, 2).commit();
    b.txn(1).read_list(1, &[2]).commit();
    rejected_by_all(&b.build(), "G1b");

    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).write_register(1, 1).write_register(1, 2).commit();
    b.txn(1).span(2, 3).read_register(1, Some(1)).commit();
    rejected_by_all(&b.build(), "G1b");
}

#[test]
fn g1c_circular_information_flow() {
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).append(1, 1).read_list(2, &[1]).commit();
    b.txn(1).span(2, 3).append(2, 1).read_list(1, &[1]).commit();
    rejected_by_all(&b.build(), "G1c");

    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).write_register(1, 1).read_register(2, Some(1)).commit();
    b.txn(1).span(2, 3).write_register(2, 1).read_register(1, Some(1)).commit();
    rejected_by_all(&b.build(), "G1c");
}

#[test]
fn g_single_read_skew() {
    // T2 sees T1's write of key 1 but not its write of key 2.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).append(1, 1).append(2, 1).commit();
    b.txn(1).span(2, 3).read_list(1, &[1]).read_list(2, &[]).commit();
    let h = b.build();
    rejected_by_all(&h, "G-single");
    let text = check_snapshot_isolation(&h).unwrap_err().to_string();
    assert!(
        text.contains("T1 -wr(key 1)-> T2 -rw(key 2)-> T1"),
        "the cycle is spelled out:\n{text}"
    );
    assert!(
        text.contains(
            "T2 (process 1, committed, events 2..3): read(list 1) = [1]; read(list 2) = []"
        ),
        "each transaction's operations are printed:\n{text}"
    );

    // The same with registers, no version tags needed.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).write_register(1, 1).write_register(2, 1).commit();
    b.txn(1).span(2, 3).read_register(1, Some(1)).read_register(2, None).commit();
    rejected_by_all(&b.build(), "G-single");
}

#[test]
fn g_single_lost_update() {
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).read_list(1, &[]).append(1, 1).commit();
    b.txn(1).span(2, 3).read_list(1, &[]).append(1, 2).commit();
    b.txn(2).read_list(1, &[1, 2]).commit();
    rejected_by_all(&b.build(), "G-single");

    // Registers need the version order: with tags, lost update is G-single.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).read_register_at(1, None, 0).write_register_at(1, 1, 10).commit();
    b.txn(1).span(2, 3).read_register_at(1, None, 0).write_register_at(1, 2, 20).commit();
    rejected_by_all(&b.build(), "G-single");
}

#[test]
fn lost_update_on_untagged_registers_is_only_visible_as_g2() {
    // The documented limit: without tags the two blind-from-nil writes are unordered, so only
    // the two anti-dependencies are known; SI cannot tell this from write skew.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).read_register(1, None).write_register(1, 1).commit();
    b.txn(1).span(2, 3).read_register(1, None).write_register(1, 2).commit();
    let h = b.build();
    rejected(check_serializable(&h), "G2");
    assert!(check_snapshot_isolation(&h).is_ok());
}

#[test]
fn g2_write_skew_is_allowed_by_snapshot_isolation_only() {
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).read_list(1, &[]).read_list(2, &[]).append(1, 1).commit();
    b.txn(1).span(2, 3).read_list(1, &[]).read_list(2, &[]).append(2, 1).commit();
    b.txn(2).read_list(1, &[1]).read_list(2, &[1]).commit();
    let h = b.build();
    let v = rejected(check_serializable(&h), "G2");
    assert_eq!(v.cycle().map(|c| c.anti_dependencies()), Some(2));
    rejected(check_strict_serializable(&h), "G2");
    rejected(check_opacity(&h), "G2");
    check_snapshot_isolation(&h).expect("write skew is allowed by SI");
    check_strict_snapshot_isolation(&h).expect("write skew is allowed by strict SI");
}

#[test]
fn g_nonadjacent_long_fork_is_forbidden_even_by_snapshot_isolation() {
    // T3 sees T1 but not T2, T4 sees T2 but not T1: no snapshot order explains both.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 5).append(1, 1).commit();
    b.txn(1).span(2, 6).append(2, 1).commit();
    b.txn(2).span(3, 7).read_list(1, &[1]).read_list(2, &[]).commit();
    b.txn(3).span(4, 8).read_list(1, &[]).read_list(2, &[1]).commit();
    let h = b.build();
    rejected_by_all(&h, "G-nonadjacent");
    let v = check_snapshot_isolation(&h).unwrap_err();
    assert_eq!(v.cycle().map(|c| c.anti_dependencies()), Some(2));
}

#[test]
fn real_time_violation_is_serializable_but_not_strict() {
    // T2 is invoked after T1 completed, yet missed T1's append: serialised before T1.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 2).append(1, 1).commit();
    b.txn(1).span(3, 4).read_list(1, &[]).commit();
    let h = b.build();
    check_serializable(&h).expect("a serial order exists: T2, T1");
    check_snapshot_isolation(&h).expect("SI does not look at real time");
    let v = rejected(check_strict_serializable(&h), "G-single-realtime");
    let text = v.to_string();
    assert!(text.contains("T1 -rt-> T2 -rw(key 1)-> T1"), "{text}");
    assert!(text.contains("real-time"), "{text}");
    rejected(check_strict_snapshot_isolation(&h), "G-single-realtime");
    rejected(check_opacity(&h), "G-single-realtime");

    // Overlapping in real time, the same reads are fine.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 3).append(1, 1).commit();
    b.txn(1).span(2, 4).read_list(1, &[]).commit();
    accepted_by_all(&b.build());
}

#[test]
fn real_time_with_write_cycle() {
    // T1 completes before T2 starts, yet T2's append sits before T1's.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 2).append(1, 2).commit();
    b.txn(1).span(3, 4).append(1, 1).commit();
    b.txn(2).read_list(1, &[1, 2]).commit();
    let h = b.build();
    check_serializable(&h).expect("serial order T2, T1 explains it");
    rejected(check_strict_serializable(&h), "G0-realtime");
}

#[test]
fn torn_snapshot_of_an_aborted_attempt_breaks_opacity_only() {
    // The aborted attempt saw T1's write of key 1 but the state before T1 of key 2.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).append(1, 1).append(2, 1).commit();
    b.txn(1).span(2, 3).read_list(1, &[1]).read_list(2, &[]).abort();
    let h = b.build();
    check_strict_serializable(&h).expect("committed transactions alone are fine");
    check_snapshot_isolation(&h).expect("committed transactions alone are fine");
    let v = rejected(check_opacity(&h), "G-single");
    assert!(v.to_string().contains("aborted"), "{v}");

    // Registers: the same torn read.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).write_register(1, 1).write_register(2, 1).commit();
    b.txn(1).span(2, 3).read_register(1, Some(1)).read_register(2, None).abort();
    let h = b.build();
    check_strict_serializable(&h).expect("committed transactions alone are fine");
    rejected(check_opacity(&h), "G-single");
}

#[test]
fn stale_snapshot_of_an_aborted_attempt_breaks_opacity() {
    // T1 completed before the attempt was invoked; the attempt still read the old state.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 2).write_register(1, 1).commit();
    b.txn(1).span(3, 4).read_register(1, None).abort();
    let h = b.build();
    check_strict_serializable(&h).expect("the attempt aborted");
    rejected(check_opacity(&h), "G-single-realtime");
}

#[test]
fn aborted_attempt_reading_aborted_state_breaks_opacity_only() {
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).append(1, 1).abort();
    b.txn(1).span(2, 3).read_list(1, &[1]).abort();
    let h = b.build();
    check_strict_serializable(&h).expect("nothing committed");
    rejected(check_opacity(&h), "G1a");
}

#[test]
fn garbage_duplicate_and_internal_anomalies() {
    let mut b = HistoryBuilder::new();
    b.txn(0).read_list(1, &[42]).commit();
    rejected_by_all(&b.build(), "garbage-read");

    let mut b = HistoryBuilder::new();
    b.txn(0).read_register(1, Some(42)).commit();
    rejected_by_all(&b.build(), "garbage-read");

    let mut b = HistoryBuilder::new();
    b.txn(0).append(1, 1).commit();
    b.txn(1).append(1, 1).commit();
    rejected_by_all(&b.build(), "duplicate-write");

    // A read that misses the transaction's own earlier append.
    let mut b = HistoryBuilder::new();
    b.txn(0).append(1, 1).read_list(1, &[]).commit();
    rejected_by_all(&b.build(), "internal");

    // A read after its own register write that returns something else.
    let mut b = HistoryBuilder::new();
    b.txn(0).write_register(1, 1).read_register(1, None).commit();
    rejected_by_all(&b.build(), "internal");

    // Non-repeatable read inside one transaction.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).write_register(1, 1).commit();
    b.txn(1).span(2, 3).read_register(1, None).read_register(1, Some(1)).commit();
    rejected_by_all(&b.build(), "internal");

    // A read that shows an append the transaction makes only later.
    let mut b = HistoryBuilder::new();
    b.txn(0).read_list(1, &[1]).append(1, 1).commit();
    rejected_by_all(&b.build(), "internal");

    // Internal anomalies of aborted attempts matter only to opacity.
    let mut b = HistoryBuilder::new();
    b.txn(0).append(1, 1).read_list(1, &[]).abort();
    let h = b.build();
    check_strict_serializable(&h).expect("the attempt aborted");
    rejected(check_opacity(&h), "internal");
}

#[test]
fn list_orders_must_agree() {
    let mut b = HistoryBuilder::new();
    b.txn(0).append(1, 1).commit();
    b.txn(1).append(1, 2).commit();
    b.txn(2).read_list(1, &[1, 2]).commit();
    b.txn(3).read_list(1, &[2, 1]).commit();
    let v = rejected(check_serializable(&b.build()), "incompatible-order");
    assert!(v.to_string().contains("[2, 1]"), "{v}");

    let mut b = HistoryBuilder::new();
    b.txn(0).append(1, 1).commit();
    b.txn(1).read_list(1, &[1, 1]).commit();
    rejected_by_all(&b.build(), "duplicate-elements");
}

#[test]
fn version_tags_must_agree() {
    let mut b = HistoryBuilder::new();
    b.txn(0).write_register_at(1, 1, 10).commit();
    b.txn(1).read_register_at(1, Some(1), 11).commit();
    rejected_by_all(&b.build(), "version-mismatch");

    let mut b = HistoryBuilder::new();
    b.txn(0).write_register_at(1, 1, 10).commit();
    b.txn(1).write_register_at(1, 2, 10).commit();
    rejected_by_all(&b.build(), "duplicate-version");
}

#[test]
fn tagged_register_stale_read_is_caught_through_the_version_order() {
    // T3 reads T1's version after T2 overwrote it (T2 -rt-> T3): the tags say T2 follows T1.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 2).write_register_at(1, 1, 10).commit();
    b.txn(1).span(3, 4).write_register_at(1, 2, 20).commit();
    b.txn(2).span(5, 6).read_register(1, Some(1)).commit();
    let h = b.build();
    check_serializable(&h).expect("T1, T3, T2 is a serial order");
    rejected(check_strict_serializable(&h), "G-single-realtime");
}

#[test]
fn malformed_histories() {
    let mut b = HistoryBuilder::new();
    b.txn(0).span(5, 5).append(1, 1).commit();
    rejected_by_all(&b.build(), "malformed");
}

#[test]
fn unknown_outcomes() {
    // An unknown attempt whose write was read committed: fine.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 2).append(1, 1).unknown();
    b.txn(1).span(3, 4).read_list(1, &[1]).commit();
    accepted_by_all(&b.build());

    // An unknown attempt nobody observed may never have run: its odd reads are not held
    // against serializability, but opacity checks every attempt.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).append(1, 1).append(2, 1).commit();
    b.txn(1).span(2, 3).read_list(1, &[1]).read_list(2, &[]).append(3, 1).unknown();
    let h = b.build();
    check_strict_serializable(&h).expect("T2 may not have happened");
    rejected(check_opacity(&h), "G-single");

    // Observed, it committed, and then its reads count.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).append(1, 1).append(2, 1).commit();
    b.txn(1).span(2, 3).read_list(1, &[1]).read_list(2, &[]).append(3, 1).unknown();
    b.txn(2).span(5, 6).read_list(3, &[1]).commit();
    rejected(check_serializable(&b.build()), "G-single");
}

#[test]
fn valid_histories_are_accepted() {
    // Serial, mixing both models, with reads of the initial state and read-modify-writes.
    let mut b = HistoryBuilder::new();
    b.txn(0)
        .read_list(1, &[])
        .read_register(1, None)
        .append(1, 1)
        .write_register_at(1, 10, 100)
        .commit();
    b.txn(1)
        .read_list(1, &[1])
        .append(1, 2)
        .read_list(1, &[1, 2])
        .read_register_at(1, Some(10), 100)
        .write_register_at(1, 11, 200)
        .read_register(1, Some(11))
        .commit();
    b.txn(0).read_list(1, &[1, 2]).append(2, 1).abort();
    b.txn(2).read_list(1, &[1, 2]).read_list(2, &[]).read_register(1, Some(11)).commit();
    accepted_by_all(&b.build());

    // Concurrent transactions on disjoint keys, and a concurrent reader of the old state.
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 10).append(1, 1).read_list(1, &[1]).commit();
    b.txn(1).span(2, 9).append(2, 1).commit();
    b.txn(2).span(3, 8).read_list(1, &[]).read_list(2, &[]).commit();
    b.txn(3).span(4, 7).read_register(5, None).write_register(6, 1).commit();
    b.txn(4).span(11, 12).read_list(1, &[1]).read_list(2, &[1]).commit();
    accepted_by_all(&b.build());

    // An empty history.
    accepted_by_all(&History::default());
}

#[test]
fn histories_and_violations_round_trip_through_json() {
    let mut b = HistoryBuilder::new();
    b.txn(0).span(1, 4).append(1, 1).append(2, 1).commit();
    b.txn(1).span(2, 3).read_list(1, &[1]).read_register_at(2, None, 0).read_list(2, &[]).abort();
    let h = b.build();
    let json = serde_json::to_string(&h).expect("serialise history");
    let back: History = serde_json::from_str(&json).expect("deserialise history");
    assert_eq!(back, h);

    let v = check_opacity(&back).unwrap_err();
    let json = serde_json::to_string_pretty(&v).expect("serialise violation");
    let back: Violation = serde_json::from_str(&json).expect("deserialise violation");
    assert_eq!(back, v);
}
