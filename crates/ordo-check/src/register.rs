//! Dependencies of read-write registers (Elle §4.3), with optional version tags.
//!
//! A register read names the version it returned (the unique value, hence its writer), so
//! `wr` edges are always known. What it does not show is the order of versions, which `ww`
//! and `rw` edges need. Two sources give that order, and nothing else is assumed:
//!
//! 1. **Version tags.** When the engine reports the timestamp it installed a version with (on
//!    the write, or on a read that returned it), the versions of a key are totally ordered by
//!    tag; consecutive tagged versions give `ww` edges. Tags must agree with one another (one
//!    value, one tag) and be unique per key (DESIGN §4.7: timestamps may repeat across
//!    objects, never within one).
//! 2. **Writes follow reads.** A transaction that read version `v` of a key and then wrote the
//!    key installed a version after `v` (Elle's `wfr` inference): any other order would put a
//!    `ww`/`wr` cycle (G1c) between the two writers, which every checked model rejects anyway.
//!
//! From the known successors of each version, `rw` edges follow: a reader of `v` precedes
//! every known successor of `v` (a direct successor, or a later version reached by `ww` edges
//! that exist too, so no cycle changes class). A reader of the initial state precedes every
//! writer with no known predecessor (each is somewhere after the initial state).
//!
//! # Limits
//!
//! Without tags, blind writes (a write with no earlier read of the key in the transaction) are
//! unordered against each other, so anomalies that live in that order cannot be seen: a lost
//! update between two blind writers, a G0 write cycle built from blind writes, and the
//! `rw` edges out of readers of a version whose successor is a blind write. The checker then
//! under-reports; it never reports a cycle that a tag-ordered history would not have.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::graph::{EdgeKind, Graph};
use crate::infer::{Facts, RegisterRead, Role};
use crate::violation::Violation;

/// Adds the `ww`, `wr` and `rw` edges of every register key, or reports contradictory version
/// tags.
pub(crate) fn infer(f: &Facts<'_>, g: &mut Graph) -> Result<(), Violation> {
    let mut reads_by_key: BTreeMap<u64, Vec<&RegisterRead>> = BTreeMap::new();
    for read in &f.register_reads {
        reads_by_key.entry(read.key).or_default().push(read);
    }
    // Final writes of full nodes, per key: (writer, value, tag).
    let mut writes_by_key: BTreeMap<u64, Vec<(usize, u64, Option<u64>)>> = BTreeMap::new();
    for (&(key, value), w) in &f.writes.register {
        if w.is_final && f.roles[w.txn] == Role::Full {
            writes_by_key.entry(key).or_default().push((w.txn, value, w.version));
        }
    }

    let no_reads = Vec::new();
    for (&key, writes) in &mut writes_by_key {
        writes.sort_unstable();
        let reads = reads_by_key.get(&key).unwrap_or(&no_reads);
        infer_key(f, g, key, writes, reads)?;
    }
    // Keys read but never written by a full node: only reads of the initial state can be
    // there (anything else was reported by `check_reads`), and they have no successor.
    Ok(())
}

fn infer_key(
    f: &Facts<'_>,
    g: &mut Graph,
    key: u64,
    writes: &[(usize, u64, Option<u64>)],
    reads: &[&RegisterRead],
) -> Result<(), Violation> {
    let writer_of = |value: u64| f.writes.register.get(&(key, value)).map(|w| w.txn);

    // 1. Version tags, from writes and from reads that returned the version.
    let mut tag: FxHashMap<u64, u64> =
        writes.iter().filter_map(|&(_, value, version)| version.map(|t| (value, t))).collect();
    for read in reads {
        let (Some(value), Some(version)) = (read.seen, read.version) else {
            continue;
        };
        match tag.get(&value) {
            Some(&first) if first != version => {
                let writer = writer_of(value).unwrap_or(read.txn);
                return Err(Violation::VersionMismatch {
                    key,
                    value,
                    first,
                    second: version,
                    writer: f.violation_txn(writer),
                });
            }
            Some(_) => {}
            None => {
                tag.insert(value, version);
            }
        }
    }
    let mut tagged: Vec<(u64, usize)> =
        writes.iter().filter_map(|&(txn, value, _)| tag.get(&value).map(|&t| (t, txn))).collect();
    tagged.sort_unstable();

    let mut successors: FxHashMap<usize, Vec<usize>> = FxHashMap::default();
    let mut has_predecessor: FxHashSet<usize> = FxHashSet::default();
    for pair in tagged.windows(2) {
        let ((t1, a), (t2, b)) = (pair[0], pair[1]);
        if t1 == t2 {
            return Err(Violation::DuplicateVersion {
                key,
                version: t1,
                first: f.violation_txn(a),
                second: f.violation_txn(b),
            });
        }
        g.add(a, b, EdgeKind::Ww, Some(key));
        successors.entry(a).or_default().push(b);
        has_predecessor.insert(b);
    }

    // 2. Writes follow reads.
    let writes_key: FxHashSet<usize> = writes.iter().map(|&(txn, _, _)| txn).collect();
    for read in reads {
        if !writes_key.contains(&read.txn) {
            continue;
        }
        if let Some(w) = read.seen.and_then(writer_of) {
            g.add(w, read.txn, EdgeKind::Ww, Some(key));
            successors.entry(w).or_default().push(read.txn);
            has_predecessor.insert(read.txn);
        }
    }

    // 3. Reads: `wr` from the writer, `rw` to the known successors.
    let roots: Vec<usize> = writes
        .iter()
        .map(|&(txn, _, _)| txn)
        .filter(|txn| !has_predecessor.contains(txn))
        .collect();
    for read in reads {
        match read.seen.and_then(writer_of) {
            Some(w) => {
                g.add(w, read.txn, EdgeKind::Wr, Some(key));
                for &s in successors.get(&w).into_iter().flatten() {
                    g.add(read.txn, s, EdgeKind::Rw, Some(key));
                }
            }
            None => {
                for &root in &roots {
                    g.add(read.txn, root, EdgeKind::Rw, Some(key));
                }
            }
        }
    }
    Ok(())
}
