//! The recorder from real threads: a store that serialises everything behind one lock yields
//! histories every check accepts; interleavings recorded by hand are stamped in real time.

use std::collections::HashMap;
use std::sync::Mutex;

use ordo_check::{
    Consistency, Outcome, Recorder, TxnRecorder, check, check_opacity, check_serializable,
    check_strict_serializable,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const ALL: [Consistency; 5] = [
    Consistency::Serializable,
    Consistency::StrictSerializable,
    Consistency::Opacity,
    Consistency::SnapshotIsolation,
    Consistency::StrictSnapshotIsolation,
];

#[derive(Default)]
struct Store {
    lists: HashMap<u64, Vec<u64>>,
    registers: HashMap<u64, (u64, u64)>,
    version: u64,
}

/// One transaction against the store, entirely under its lock: serial by construction.
fn run_one(store: &Mutex<Store>, mut rec: TxnRecorder<'_>, rng: &mut SmallRng, next: &mut u64) {
    let mut s = store.lock().expect("store lock");
    let commit = rng.random_bool(0.8);
    let mut lists = HashMap::new();
    let mut registers = HashMap::new();
    for _ in 0..rng.random_range(1..=4) {
        let key = rng.random_range(0..4);
        *next += 1;
        match rng.random_range(0..4) {
            0 => {
                let seen =
                    lists.get(&key).or_else(|| s.lists.get(&key)).cloned().unwrap_or_default();
                rec.read_list(key, &seen);
            }
            1 => {
                lists
                    .entry(key)
                    .or_insert_with(|| s.lists.get(&key).cloned().unwrap_or_default())
                    .push(*next);
                rec.append(key, *next);
            }
            2 => match (registers.get(&key), s.registers.get(&key)) {
                (Some(&v), _) => rec.read_register(key, Some(v)),
                (None, Some(&(v, version))) => rec.read_register_at(key, Some(v), version),
                (None, None) => rec.read_register(key, None),
            },
            _ => {
                registers.insert(key, *next);
                rec.write_register(key, *next);
            }
        }
    }
    if commit {
        s.version += 1;
        let version = s.version;
        s.lists.extend(lists);
        s.registers.extend(registers.into_iter().map(|(k, v)| (k, (v, version))));
        drop(s);
        rec.commit_at(version);
    } else {
        drop(s);
        rec.abort();
    }
}

#[test]
fn threads_over_a_serial_store_are_accepted_by_every_check() {
    const THREADS: u64 = 4;
    const TXNS: usize = 300;
    let seed = ordo_seed::Seed::new("threads_over_a_serial_store_are_accepted_by_every_check");
    let store = Mutex::new(Store::default());
    let rec = Recorder::new();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (store, rec) = (&store, &rec);
            let thread_seed = seed.derive(t);
            scope.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(thread_seed);
                // Values unique across threads: thread in the high bits.
                let mut next = t << 40;
                for _ in 0..TXNS {
                    run_one(store, rec.begin(t as u32), &mut rng, &mut next);
                }
            });
        }
    });
    let h = rec.history();
    assert_eq!(h.len(), THREADS as usize * TXNS);
    assert!(h.committed() > h.len() / 2);
    for model in ALL {
        if let Err(v) = check(&h, model) {
            panic!("{model:?} rejected a serial store's history:\n{v}");
        }
    }
}

#[test]
fn an_interleaving_recorded_by_hand_is_stamped_in_real_time() {
    // T1 reads key 1 before T2 runs and key 2 after it: read skew.
    let rec = Recorder::new();
    let mut t1 = rec.begin(0);
    t1.read_list(1, &[]);
    let mut t2 = rec.begin(1);
    t2.append(1, 1);
    t2.append(2, 1);
    t2.commit();
    t1.read_list(2, &[1]);
    t1.commit();
    let h = rec.history();
    let v = check_serializable(&h).expect_err("read skew");
    assert_eq!(v.name(), "G-single");

    // An attempt that starts after a commit completed but misses its append: only real time
    // says it is stale, and only opacity looks at aborted attempts.
    let rec = Recorder::new();
    let mut writer = rec.begin(0);
    writer.append(1, 1);
    writer.commit();
    let mut stale = rec.begin(1);
    stale.read_list(1, &[]);
    stale.abort();
    let h = rec.history();
    check_strict_serializable(&h).expect("the stale attempt aborted");
    let v = check_opacity(&h).expect_err("stale aborted read");
    assert_eq!(v.name(), "G-single-realtime");
}

#[test]
fn a_dropped_attempt_is_recorded_with_an_unknown_outcome() {
    let rec = Recorder::new();
    {
        let mut t = rec.begin(7);
        t.append(1, 1);
        // Dropped without an outcome, as after a panic or an early `?` return.
    }
    let h = rec.history();
    assert_eq!(h.len(), 1);
    assert_eq!(h.txns()[0].outcome, Outcome::Unknown);
    assert_eq!(h.txns()[0].process, 7);
    assert!(rec.history().committed() == 0);
}

#[test]
fn recorder_is_shareable_across_threads() {
    fn assert_sync_send<T: Sync + Send>() {}
    assert_sync_send::<Recorder>();
}
