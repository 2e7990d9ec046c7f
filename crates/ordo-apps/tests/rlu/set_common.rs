//! Checking hash-set histories: each operation is a one-operation transaction on the register
//! "bucket tag" (see `ordo_apps::rlu::hashset`), checked for strict serializability by `ordo-check`
//! (= linearizability of the tag register), then replayed along the tag chain against a
//! `BTreeSet` model (= every result is the one the set gives at that point of the order).
#![allow(dead_code, unreachable_pub)] // shared by the modules of one test binary

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use ordo_apps::rlu::hashset::RluSetHandle;
use ordo_check::{Recorder, TxnRecorder, check_strict_serializable};
use ordo_clock::Clock;
use rand::{Rng, rngs::SmallRng};

/// Keys of the concurrent history tests: few, so that operations collide.
pub const KEYS: u64 = 12;
/// Buckets of the concurrent history tests' sets (a key's bucket is `key % BUCKETS`).
pub const BUCKETS: u64 = 3;

/// A random operation of the history tests: a key below [`KEYS`]; half `contains`, a quarter
/// each `insert` and `remove`.
pub fn pick(rng: &mut SmallRng) -> (u64, Kind) {
    let k = rng.random_range(0..KEYS);
    let kind = match rng.random_range(0..4) {
        0 | 1 => Kind::Contains,
        2 => Kind::Insert,
        _ => Kind::Remove,
    };
    (k, kind)
}

/// Runs `kind` on `key` through an RLU set handle, tagging a change with `tag`; returns
/// (result, tag seen), what [`SetHistory::record`] takes.
pub fn rlu_tagged<C: Clock>(
    h: &mut RluSetHandle<C>,
    kind: Kind,
    key: u64,
    tag: u64,
) -> (bool, u64) {
    let r = match kind {
        Kind::Contains => h.contains_tagged(key),
        Kind::Insert => h.insert_tagged(key, tag),
        Kind::Remove => h.remove_tagged(key, tag),
    }
    .unwrap();
    (r.result, r.tag_seen)
}

/// What an operation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `contains`.
    Contains,
    /// `insert`.
    Insert,
    /// `remove`.
    Remove,
}

/// One finished operation.
#[derive(Clone, Copy, Debug)]
pub struct Done {
    /// Bucket index.
    pub bucket: u64,
    /// The key.
    pub key: u64,
    /// The operation.
    pub kind: Kind,
    /// Its result.
    pub result: bool,
    /// The bucket tag it saw.
    pub tag_seen: u64,
    /// The tag it wrote when it changed the set.
    pub tag: u64,
}

/// Records operations into a `Recorder` and keeps them for the replay.
#[derive(Default)]
pub struct SetHistory {
    /// The recorder.
    pub rec: Recorder,
    done: Mutex<Vec<Done>>,
}

impl SetHistory {
    /// Runs `op` recorded as process `process`; `op` returns (result, tag seen).
    pub fn record(
        &self,
        process: u32,
        bucket: u64,
        key: u64,
        kind: Kind,
        tag: u64,
        op: impl FnOnce() -> (bool, u64),
    ) {
        self.run(process, bucket, key, kind, tag, op).complete();
    }

    /// Runs `op` like [`record`](Self::record) but leaves its completion to the caller: an
    /// operation whose effect is published later (RLU deferral) completes when it is.
    pub fn run(
        &self,
        process: u32,
        bucket: u64,
        key: u64,
        kind: Kind,
        tag: u64,
        op: impl FnOnce() -> (bool, u64),
    ) -> Pending<'_> {
        let mut t = self.rec.begin(process);
        let (result, tag_seen) = op();
        let seen = (tag_seen != 0).then_some(tag_seen);
        t.read_register(bucket, seen);
        let changed = result && kind != Kind::Contains;
        if changed {
            t.write_register(bucket, tag);
        }
        Pending { t, done: Done { bucket, key, kind, result, tag_seen, tag }, history: self }
    }

    /// Checks the history; returns the number of operations checked.
    pub fn check(&self) -> Result<usize, String> {
        let h = self.rec.history();
        check_strict_serializable(&h).map_err(|v| format!("ordo-check: {v}"))?;
        let done = self.done.lock().unwrap().clone();
        // The chain of each bucket: tag seen -> the update that followed it.
        let mut next: BTreeMap<(u64, u64), Done> = BTreeMap::new();
        for d in done.iter().filter(|d| d.result && d.kind != Kind::Contains) {
            if let Some(other) = next.insert((d.bucket, d.tag_seen), *d) {
                return Err(format!(
                    "two updates followed tag {}: {other:?} and {d:?}",
                    d.tag_seen
                ));
            }
        }
        // The set after each tag, per bucket.
        let mut state_at: BTreeMap<(u64, u64), BTreeSet<u64>> = BTreeMap::new();
        let buckets: BTreeSet<u64> = done.iter().map(|d| d.bucket).collect();
        let mut chained = 0;
        for b in buckets {
            let (mut tag, mut set) = (0u64, BTreeSet::new());
            state_at.insert((b, 0), set.clone());
            while let Some(d) = next.get(&(b, tag)) {
                let ok = match d.kind {
                    Kind::Insert => set.insert(d.key),
                    Kind::Remove => set.remove(&d.key),
                    Kind::Contains => false,
                };
                if !ok {
                    return Err(format!("update {d:?} did not change the model"));
                }
                tag = d.tag;
                chained += 1;
                state_at.insert((b, tag), set.clone());
            }
        }
        let updates = next.len();
        if chained != updates {
            return Err(format!("{} of {updates} updates are not on a chain", updates - chained));
        }
        for d in &done {
            let Some(set) = state_at.get(&(d.bucket, d.tag_seen)) else {
                return Err(format!("{d:?} saw a tag no update wrote"));
            };
            let expected = match d.kind {
                Kind::Contains | Kind::Remove => set.contains(&d.key),
                Kind::Insert => !set.contains(&d.key),
            };
            if d.result != expected {
                return Err(format!("{d:?} disagrees with the model {set:?}"));
            }
        }
        Ok(done.len())
    }
}

/// An operation that returned but is not yet recorded as complete (see [`SetHistory::run`]).
pub struct Pending<'a> {
    t: TxnRecorder<'a>,
    done: Done,
    history: &'a SetHistory,
}

impl Pending<'_> {
    /// Stamps the completion now.
    pub fn complete(self) {
        self.t.commit();
        self.history.done.lock().unwrap().push(self.done);
    }
}
