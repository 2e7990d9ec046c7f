//! Transaction recovery (FaRMv2 §4.7, FaRM §5.3, DESIGN §6): what happens to the transactions
//! of coordinators that a reconfiguration removed.
//!
//! # The problem
//! A coordinator that dies mid-commit leaves parts of its transactions behind: locks at
//! surviving primaries (LOCK), records at backups (COMMIT-BACKUP, not yet truncated). A client
//! may already have been told "committed" — if every COMMIT-BACKUP was acknowledged — or
//! nothing at all. The survivors must finish every such transaction the same way everywhere,
//! and never block on the dead coordinator.
//!
//! # The protocol
//! After the reconfiguration round that removed members ([`crate::failover`]), the CM sends
//! RECOVER-QUERY naming the removed members to every survivor (itself included). Each answers
//! RECOVER-STATE: the records it holds from those coordinators, the parts it holds locked for
//! them, and its [`Evidence`] of their transactions ([`ordo::remote::RecoveryState`]). The
//! coordinators are dead, so nothing they sent is still to arrive: the states are final. The
//! CM decides every transaction with [`decide`] and sends RECOVER-DECIDE to every survivor,
//! which installs or releases its locked parts and applies or drops its records
//! ([`ordo::Ordo::serve_resolve`]).
//!
//! # The vote ([`decide`])
//! For each transaction (coordinator, attempt):
//! 1. **Evidence of commit** — some primary installed a part (COMMIT-PRIMARY) or some backup
//!    applied one (TRUNCATE): both happen only after the commit point, so it committed, at the
//!    evidence's write timestamp.
//! 2. **Evidence of abort** — some primary released a part on ABORT or some backup dropped one:
//!    both happen only when the coordinator decided to abort.
//! 3. **Otherwise, commit iff every region the transaction writes still has its part** — a
//!    record at some survivor (each record lists every region the transaction writes), or, for a
//!    region none of whose backups survived (or that has none), the lock at its surviving
//!    primary (a locked part holds the new values, and no backup is left to diverge from
//!    it). A coordinator reports a commit only after every backup of every region acknowledged,
//!    and no region loses all its replicas (the plan refuses that), so a transaction a client
//!    saw commit passes — provided some record survives, which rule 4 needs. A transaction that
//!    fails it never reached its commit point: nothing of it was installed (COMMIT-PRIMARY comes
//!    after the commit point), so aborting it is safe.
//! 4. A transaction with locks and no record at all aborts (it never got to COMMIT-BACKUP).
//!
//! **When the records may not prove a commit.** A coordinator that backs up a region it
//! writes holds one of the transaction's records itself, and with one backup per region its
//! crash takes the region's only record: rule 3's lock clause covers that region as long as
//! some record survives elsewhere. When none does — the coordinator was the only backup of
//! every region written, or they all lost their backups (a failover degraded them,
//! re-replication has not restored them) — rule 4 would abort a transaction the client saw
//! commit. So such a coordinator does not report a commit before one COMMIT-PRIMARY at another
//! node was acknowledged (FaRM §4's "at least one hardware ack", paid only then): that
//! primary's `Installed` evidence commits the transaction by rule 1 (`owners.rs`). Rule 3's
//! lock clause and this wait were both found by the data-path simulation (`crate::sim::data`)
//! as acknowledged writes lost when a coordinator crashed with its COMMIT-PRIMARYs still
//! queued.
//!
//! Rule 1 is what the evidence is for: a coordinator that died between TRUNCATE of one region
//! and COMMIT-PRIMARY of another leaves one region's record applied (gone) and the other's
//! pending; without the evidence rule 3 would abort a transaction that is already half
//! installed. `the_evidence_of_an_applied_part_commits_the_rest` fails without rule 1.
//!
//! # Clients
//! A client coordinates too, but no failover removes it. The CM presumes a client dead when
//! its OAT reports stop for `node::CLIENT_OAT_TTL`, and runs the same query and vote for it;
//! every member fences the client when queried (nothing more from it is served, code
//! `FENCED`), so its state is final when voted on. A client that was only cut off must
//! reconnect under a new id; its transactions in flight were decided without it.
//!
//! Slots a dead coordinator reserved at a survivor and never locked are given back when the
//! survivor answers the query (`Ordo::serve_recovery_state`): nothing more from it arrives.
//!
//! # Not covered (yet)
//! * Evidence older than the ring ([`ordo::remote::EVIDENCE_MAX`] entries) is forgotten.

use std::collections::BTreeMap;

use ordo::remote::{Decision, Evidence, Record, RecoveryState, Seen, TxKey};
use ordo_clock::Timestamp;

use crate::config::{ClusterConfig, NodeId};

/// A RECOVER-STATE or RECOVER-DECIDE that does not decode.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed {what}: {reason}")]
pub struct RecoveryDecodeError {
    /// Which list.
    pub what: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

/// One transaction's parts as the survivors reported them.
#[derive(Default)]
struct Tally {
    regions: Vec<u16>,
    wts: Option<Timestamp>,
    recorded: Vec<u16>,
    locked: Vec<u16>,
    committed: Option<Timestamp>,
    aborted: bool,
}

/// The vote (see the module docs) over every survivor's state. `before` is the configuration
/// the transactions ran under (for which regions had backups), `removed` the members it lost
/// (and the dead clients: they back up nothing). Returns one decision per transaction that any
/// survivor holds a record or a lock of, in (coordinator, attempt) order.
pub fn decide(
    before: &ClusterConfig,
    removed: &[NodeId],
    states: &[RecoveryState],
) -> Vec<Decision> {
    let mut txs: BTreeMap<(u64, u64), Tally> = BTreeMap::new();
    for state in states {
        for r in &state.records {
            let t = txs.entry((r.key.coordinator, r.key.tx)).or_default();
            t.recorded.push(r.key.region);
            t.wts = Some(r.wts);
            for &region in &r.regions {
                if !t.regions.contains(&region) {
                    t.regions.push(region);
                }
            }
        }
        for k in &state.locks {
            txs.entry((k.coordinator, k.tx)).or_default().locked.push(k.region);
        }
    }
    for state in states {
        for e in &state.evidence {
            // Evidence alone (nothing left anywhere) needs no decision.
            let Some(t) = txs.get_mut(&(e.coordinator, e.tx)) else { continue };
            if e.seen.is_commit() {
                t.committed = Some(e.wts);
            } else {
                t.aborted = true;
            }
        }
    }
    // A region none of whose backups survived (or that had none): its primary's lock is the
    // only copy of the part left.
    let no_backup_left = |region: u16| {
        before
            .regions
            .iter()
            .find(|r| r.region == u32::from(region))
            .is_some_and(|r| r.backups.iter().all(|b| removed.contains(b)))
    };
    txs.into_iter()
        .map(|((coordinator, tx), t)| {
            let commit = if let Some(wts) = t.committed {
                Some(wts)
            } else if t.aborted || t.recorded.is_empty() {
                None
            } else {
                let whole = t.regions.iter().all(|r| {
                    t.recorded.contains(r) || (no_backup_left(*r) && t.locked.contains(r))
                });
                if whole { t.wts } else { None }
            };
            Decision { coordinator, tx, commit }
        })
        .collect()
}

/// The removed members whose transactions recovery decides: those in `before` and not in
/// `after`.
pub fn removed(before: &ClusterConfig, after: &ClusterConfig) -> Vec<NodeId> {
    before.members.iter().map(|m| m.id).filter(|&id| after.member(id).is_none()).collect()
}

/// RECOVER-STATE's three lists.
pub fn encode_state(state: &RecoveryState) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let mut records = Vec::new();
    for r in &state.records {
        records.extend([
            r.key.coordinator,
            r.key.tx,
            u64::from(r.key.region),
            r.wts.as_nanos(),
            r.regions.len() as u64,
        ]);
        records.extend(r.regions.iter().map(|&g| u64::from(g)));
    }
    let locks =
        state.locks.iter().flat_map(|k| [k.coordinator, k.tx, u64::from(k.region)]).collect();
    let evidence = state
        .evidence
        .iter()
        .flat_map(|e| [e.coordinator, e.tx, e.seen.code(), e.wts.as_nanos()])
        .collect();
    (records, locks, evidence)
}

fn region_of(word: u64, what: &'static str) -> Result<u16, RecoveryDecodeError> {
    u16::try_from(word)
        .map_err(|_| RecoveryDecodeError { what, reason: format!("region {word} out of range") })
}

/// Decodes RECOVER-STATE's lists.
pub fn decode_state(
    records: &[u64],
    locks: &[u64],
    evidence: &[u64],
) -> Result<RecoveryState, RecoveryDecodeError> {
    let mut state = RecoveryState::default();
    let mut rest = records;
    while !rest.is_empty() {
        let [coordinator, tx, region, wts, n, tail @ ..] = rest else {
            return Err(RecoveryDecodeError {
                what: "records",
                reason: format!("{} words left, a record needs at least 5", rest.len()),
            });
        };
        let n = usize::try_from(*n).unwrap_or(usize::MAX);
        if n > tail.len() {
            return Err(RecoveryDecodeError {
                what: "records",
                reason: format!("a record lists {n} regions, {} words follow", tail.len()),
            });
        }
        let regions =
            tail[..n].iter().map(|&g| region_of(g, "records")).collect::<Result<Vec<_>, _>>()?;
        state.records.push(Record {
            key: TxKey {
                coordinator: *coordinator,
                tx: *tx,
                region: region_of(*region, "records")?,
            },
            wts: Timestamp::from_nanos(*wts),
            regions,
        });
        rest = &tail[n..];
    }
    if !locks.len().is_multiple_of(3) {
        return Err(RecoveryDecodeError {
            what: "locks",
            reason: format!("{} words are not whole entries of 3", locks.len()),
        });
    }
    for l in locks.chunks_exact(3) {
        state.locks.push(TxKey { coordinator: l[0], tx: l[1], region: region_of(l[2], "locks")? });
    }
    if !evidence.len().is_multiple_of(4) {
        return Err(RecoveryDecodeError {
            what: "evidence",
            reason: format!("{} words are not whole entries of 4", evidence.len()),
        });
    }
    for e in evidence.chunks_exact(4) {
        let seen = Seen::from_code(e[2]).ok_or_else(|| RecoveryDecodeError {
            what: "evidence",
            reason: format!("unknown kind {}", e[2]),
        })?;
        state.evidence.push(Evidence {
            coordinator: e[0],
            tx: e[1],
            seen,
            wts: Timestamp::from_nanos(e[3]),
        });
    }
    Ok(state)
}

/// RECOVER-DECIDE's list: coordinator, attempt, write timestamp (0: abort).
pub fn encode_decisions(decisions: &[Decision]) -> Vec<u64> {
    decisions
        .iter()
        .flat_map(|d| [d.coordinator, d.tx, d.commit.map_or(0, Timestamp::as_nanos)])
        .collect()
}

/// Decodes RECOVER-DECIDE's list.
pub fn decode_decisions(words: &[u64]) -> Result<Vec<Decision>, RecoveryDecodeError> {
    if !words.len().is_multiple_of(3) {
        return Err(RecoveryDecodeError {
            what: "decisions",
            reason: format!("{} words are not whole entries of 3", words.len()),
        });
    }
    Ok(words
        .chunks_exact(3)
        .map(|d| Decision {
            coordinator: d[0],
            tx: d[1],
            commit: (d[2] != 0).then(|| Timestamp::from_nanos(d[2])),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Member;

    const DEAD: u64 = 3;

    fn config(backups: usize) -> ClusterConfig {
        let members =
            (1..=3).map(|id| Member { id, addr: format!("127.0.0.1:{}", 7000 + id) }).collect();
        ClusterConfig::initial(members, backups)
    }

    fn ts(n: u64) -> Timestamp {
        Timestamp::from_nanos(n)
    }

    fn key(tx: u64, region: u16) -> TxKey {
        TxKey { coordinator: DEAD, tx, region }
    }

    fn record(tx: u64, region: u16, regions: &[u16]) -> Record {
        Record { key: key(tx, region), wts: ts(100 + tx), regions: regions.to_vec() }
    }

    fn seen(tx: u64, seen: Seen, wts: u64) -> Evidence {
        Evidence { coordinator: DEAD, tx, seen, wts: ts(wts) }
    }

    fn verdict(decisions: &[Decision], tx: u64) -> Option<Timestamp> {
        decisions.iter().find(|d| d.tx == tx).expect("decided").commit
    }

    #[test]
    fn a_transaction_with_every_part_recorded_commits_at_its_write_timestamp() {
        let a = RecoveryState { records: vec![record(1, 1, &[1, 3])], ..Default::default() };
        let b = RecoveryState {
            records: vec![record(1, 3, &[1, 3])],
            locks: vec![key(1, 1)],
            ..Default::default()
        };
        let d = decide(&config(1), &[], &[a, b]);
        assert_eq!(d.len(), 1);
        assert_eq!(verdict(&d, 1), Some(ts(101)));
    }

    #[test]
    fn a_transaction_missing_a_region_aborts() {
        let a = RecoveryState {
            records: vec![record(2, 3, &[1, 3])],
            locks: vec![key(2, 1)],
            ..Default::default()
        };
        assert_eq!(verdict(&decide(&config(1), &[], &[a]), 2), None);
    }

    #[test]
    fn locks_without_any_record_abort() {
        let a = RecoveryState { locks: vec![key(4, 1), key(4, 2)], ..Default::default() };
        assert_eq!(verdict(&decide(&config(1), &[], &[a]), 4), None);
    }

    /// The coordinator truncated region 3 (its record is applied and gone) and died before
    /// COMMIT-PRIMARY at region 1: the transaction is half installed and must commit.
    #[test]
    fn the_evidence_of_an_applied_part_commits_the_rest() {
        let a = RecoveryState {
            records: vec![record(5, 1, &[1, 3])],
            evidence: vec![seen(5, Seen::Applied, 105)],
            ..Default::default()
        };
        let b = RecoveryState { locks: vec![key(5, 1)], ..Default::default() };
        assert_eq!(verdict(&decide(&config(1), &[], &[a, b]), 5), Some(ts(105)));
    }

    #[test]
    fn an_installed_part_commits_with_only_locks_left() {
        let a = RecoveryState {
            locks: vec![key(6, 2)],
            evidence: vec![seen(6, Seen::Installed, 106)],
            ..Default::default()
        };
        assert_eq!(verdict(&decide(&config(1), &[], &[a]), 6), Some(ts(106)));
    }

    /// The coordinator dropped one backup's part (a COMMIT-BACKUP failed elsewhere) and died
    /// before dropping the others: it had decided to abort.
    #[test]
    fn a_forgotten_part_aborts_even_with_every_region_recorded() {
        let a = RecoveryState {
            records: vec![record(7, 1, &[1, 3]), record(7, 3, &[1, 3])],
            evidence: vec![seen(7, Seen::Forgotten, 0)],
            ..Default::default()
        };
        assert_eq!(verdict(&decide(&config(1), &[], &[a]), 7), None);
    }

    #[test]
    fn an_unreplicated_region_counts_by_its_lock() {
        let a =
            RecoveryState { records: vec![], locks: vec![key(8, 1), key(8, 2)], evidence: vec![] };
        // Without backups there is no record at all: nothing shows the coordinator got past
        // its LOCKs, so it aborts.
        assert_eq!(verdict(&decide(&config(0), &[], &[a]), 8), None);
        let mut mixed = config(1);
        mixed.regions[1].backups.clear(); // region 2 unreplicated, regions 1 and 3 replicated
        let b = RecoveryState {
            records: vec![record(9, 1, &[1, 2])],
            locks: vec![key(9, 2)],
            ..Default::default()
        };
        assert_eq!(verdict(&decide(&mixed, &[], std::slice::from_ref(&b)), 9), Some(ts(109)));
        assert_eq!(verdict(&decide(&config(1), &[], &[b]), 9), None, "region 2 has backups here");
    }

    /// The coordinator was region 2's only backup and died with its record after the
    /// commit point (found by the data-path simulation): region 2's part survives only as the
    /// lock at its primary, and it counts — no backup of region 2 is left to diverge from it.
    #[test]
    fn a_region_whose_backups_all_died_counts_by_its_lock() {
        let c = config(1);
        let lost = c.regions[1].backups.clone();
        let b = RecoveryState {
            records: vec![record(9, 1, &[1, 2])],
            locks: vec![key(9, 2)],
            ..Default::default()
        };
        assert_eq!(verdict(&decide(&c, &lost, std::slice::from_ref(&b)), 9), Some(ts(109)));
        assert_eq!(verdict(&decide(&c, &[], &[b]), 9), None, "region 2's backup survives");
    }

    #[test]
    fn state_and_decisions_round_trip_and_malformed_lists_are_named() {
        let state = RecoveryState {
            records: vec![record(1, 1, &[1, 3]), record(2, 3, &[3])],
            locks: vec![key(1, 1)],
            evidence: vec![seen(5, Seen::Applied, 9), seen(6, Seen::Forgotten, 0)],
        };
        let (r, l, e) = encode_state(&state);
        assert_eq!(decode_state(&r, &l, &e).unwrap(), state);
        let decisions = decide(&config(1), &[], std::slice::from_ref(&state));
        assert_eq!(decode_decisions(&encode_decisions(&decisions)).unwrap(), decisions);

        assert_eq!(decode_state(&r[..3], &l, &e).unwrap_err().what, "records");
        let mut long = r.clone();
        long[4] = 1_000;
        assert_eq!(decode_state(&long, &l, &e).unwrap_err().what, "records");
        assert_eq!(decode_state(&r, &l[..2], &e).unwrap_err().what, "locks");
        assert_eq!(decode_state(&r, &[1, 2, 70_000], &e).unwrap_err().what, "locks");
        assert_eq!(decode_state(&r, &l, &[1, 2, 9, 4]).unwrap_err().what, "evidence");
        assert_eq!(decode_decisions(&[1, 2]).unwrap_err().what, "decisions");
    }

    #[test]
    fn removed_members_are_those_the_next_configuration_lacks() {
        let before = config(1);
        let mut after = before.clone();
        after.members.retain(|m| m.id != DEAD);
        assert_eq!(removed(&before, &after), vec![DEAD]);
    }
}
