//! Dependencies of list-append keys (Elle §4.2).
//!
//! A list read returns every append it saw, in order, so it is a prefix of the key's final
//! version order. All reads of a key must therefore be prefixes of one another — of the
//! longest one in particular — or no single append order explains them ("incompatible
//! order"). Given that, the longest read *is* the version order as far as anybody observed
//! it, and every edge below follows from it:
//!
//! * `ww`: consecutive elements of the longest read written by different transactions;
//! * `wr`: the writer of the last element of a read, to the reader (earlier writers reach the
//!   reader through the `ww` chain, with the same number of anti-dependencies);
//! * `rw`: a reader of a proper prefix, to the writer of the element that follows the prefix
//!   in the longest read (its direct successor version).
//!
//! # Appends nobody saw
//!
//! A committed append missing from the longest read was installed after everything anybody
//! observed (the final list contains it, and the longest read is a prefix of the final list).
//! So its writer follows the writer of the longest read's last element (`ww`), and every read
//! that returned the whole longest list missed it (`rw`). The order among several such
//! appends is unknown and none is invented. Reads shorter than the longest reach these writers
//! through their direct successor and the `ww` chain, again with one `rw` on the way, which
//! keeps the edge count linear without changing any cycle's anomaly class.
//!
//! Read-only nodes (aborted attempts under opacity) contribute reads only: their appends are
//! neither in any read (that would be G1a, reported earlier) nor counted as unseen appends.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::graph::{EdgeKind, Graph};
use crate::infer::{Facts, ListRead, Role};
use crate::violation::Violation;

/// Adds the `ww`, `wr` and `rw` edges of every list key, or reports an order no single
/// version order explains.
pub(crate) fn infer(f: &Facts<'_>, g: &mut Graph) -> Result<(), Violation> {
    let mut reads_by_key: BTreeMap<u64, Vec<&ListRead<'_>>> = BTreeMap::new();
    for read in &f.list_reads {
        reads_by_key.entry(read.key).or_default().push(read);
    }
    // Appends by graph nodes that take effect, per read key: (value, writer).
    let mut appends_by_key: FxHashMap<u64, Vec<(u64, usize)>> = FxHashMap::default();
    for (&(key, value), w) in &f.writes.list {
        if f.roles[w.txn] == Role::Full && reads_by_key.contains_key(&key) {
            appends_by_key.entry(key).or_default().push((value, w.txn));
        }
    }

    for (&key, reads) in &reads_by_key {
        let writer = |e: &u64| f.writes.list.get(&(key, *e)).map(|w| w.txn);
        let Some(longest) = reads.iter().max_by_key(|r| r.prefix.len()) else {
            continue;
        };
        let order = longest.prefix;
        // A read with a repeated element is reported as such; checking the longest read and
        // the reads that are not its prefixes covers every read (a prefix of a duplicate-free
        // list is duplicate-free).
        duplicate_free(f, key, longest)?;
        for read in reads {
            if !order.starts_with(read.prefix) {
                duplicate_free(f, key, read)?;
                return Err(Violation::IncompatibleOrder {
                    key,
                    first_seen: read.prefix.to_vec(),
                    first: f.violation_txn(read.txn),
                    second_seen: order.to_vec(),
                    second: f.violation_txn(longest.txn),
                });
            }
        }

        // Every element has a writer that is a full node: `check_reads` ruled out garbage and
        // aborted writers, and a write that was read makes its writer a full node.
        for pair in order.windows(2) {
            if let (Some(a), Some(b)) = (writer(&pair[0]), writer(&pair[1])) {
                g.add(a, b, EdgeKind::Ww, Some(key));
            }
        }

        let seen: FxHashSet<u64> = order.iter().copied().collect();
        let mut unseen: Vec<usize> = appends_by_key
            .get(&key)
            .into_iter()
            .flatten()
            .filter(|(value, _)| !seen.contains(value))
            .map(|&(_, txn)| txn)
            .collect();
        unseen.sort_unstable();
        unseen.dedup();
        if let Some(last) = order.last().and_then(writer) {
            for &u in &unseen {
                g.add(last, u, EdgeKind::Ww, Some(key));
            }
        }

        for read in reads {
            if let Some(last) = read.prefix.last().and_then(writer) {
                g.add(last, read.txn, EdgeKind::Wr, Some(key));
            }
            match order.get(read.prefix.len()) {
                Some(next) => {
                    if let Some(next) = writer(next) {
                        g.add(read.txn, next, EdgeKind::Rw, Some(key));
                    }
                }
                None => {
                    for &u in &unseen {
                        g.add(read.txn, u, EdgeKind::Rw, Some(key));
                    }
                }
            }
        }
    }
    Ok(())
}

fn duplicate_free(f: &Facts<'_>, key: u64, read: &ListRead<'_>) -> Result<(), Violation> {
    let distinct: FxHashSet<&u64> = read.prefix.iter().collect();
    if distinct.len() == read.prefix.len() {
        return Ok(());
    }
    Err(Violation::DuplicateElements {
        key,
        seen: read.prefix.to_vec(),
        reader: f.violation_txn(read.txn),
    })
}
