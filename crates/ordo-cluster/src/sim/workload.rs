//! The workload: clients running read-only and blind write transactions against one perfect
//! multi-version store, each waiting out its timestamp's uncertainty (module docs of `sim`).

use std::time::Duration;

use ordo_check::Op;

use super::*;

/// A transaction in flight or finished.
#[derive(Debug)]
pub(super) struct SimTxn {
    pub(super) node: NodeId,
    pub(super) client: u32,
    /// `wts` or `rts`.
    pub(super) ts: u64,
    /// Keys read (empty for a writer).
    pub(super) reads: Vec<u64>,
    /// Keys and values written (empty for a reader).
    pub(super) writes: Vec<(u64, u64)>,
    pub(super) invoke: u64,
    pub(super) complete: Option<u64>,
    pub(super) ops: Vec<Op>,
}

/// The perfect multi-version store: per key, versions by (timestamp, writer).
#[derive(Debug, Default)]
pub(super) struct Store {
    pub(super) versions: BTreeMap<u64, BTreeMap<(u64, usize), u64>>,
    pub(super) locks: BTreeMap<u64, usize>,
}

impl Store {
    /// The newest version of `key` at or below `ts`: (value, version).
    pub(super) fn read(&self, key: u64, ts: u64) -> Option<(u64, u64)> {
        let versions = self.versions.get(&key)?;
        versions
            .range(..=(ts, usize::MAX))
            .next_back()
            .map(|(&(version, _), &value)| (value, version))
    }
}

impl World {
    pub(super) fn client_start(&self, node: NodeId, client: u32) {
        let mut st = self.st.borrow_mut();
        if !st.nodes[idx(node)].alive {
            return;
        }
        let Ok(reading) = self.clock(node).try_now(Duration::ZERO) else {
            st.schedule(REFUSED_PAUSE_NANOS, Event::ClientStart { node, client });
            return;
        };
        let ts = reading.hi().as_nanos();
        let write = st.rng.range(0, 1) == 1;
        let mut keys: Vec<u64> = (1..=KEYS).collect();
        let count = if write { st.rng.range(1, 2) } else { st.rng.range(1, 3) };
        let mut chosen = Vec::new();
        for _ in 0..count {
            let i = usize::try_from(st.rng.range(0, keys.len() as u64 - 1)).unwrap_or(0);
            chosen.push(keys.remove(i));
        }
        let t = st.txns.len();
        let invoke = 2 * st.now + 1;
        let mut txn = SimTxn {
            node,
            client,
            ts,
            reads: Vec::new(),
            writes: Vec::new(),
            invoke,
            complete: None,
            ops: Vec::new(),
        };
        if write {
            if chosen.iter().any(|k| st.store.locks.contains_key(k)) {
                // Locked by a writer in its commit wait: not attempted, try again later.
                st.schedule(REFUSED_PAUSE_NANOS, Event::ClientStart { node, client });
                return;
            }
            for &key in &chosen {
                let value = st.next_value;
                st.next_value += 1;
                st.store.locks.insert(key, t);
                st.store.versions.entry(key).or_default().insert((ts, t), value);
                txn.writes.push((key, value));
                txn.ops.push(Op::WriteRegister { key, value, version: Some(ts) });
            }
        } else {
            txn.reads = chosen;
        }
        st.txns.push(txn);
        let wait = reading.width_nanos().max(1);
        st.schedule(wait, Event::TxnPoll(t));
    }

    pub(super) fn txn_poll(&self, t: usize) {
        let mut st = self.st.borrow_mut();
        let node = st.txns[t].node;
        if !st.nodes[idx(node)].alive {
            return;
        }
        let ts = st.txns[t].ts;
        let reading = match self.clock(node).try_now(Duration::ZERO) {
            Ok(reading) => reading,
            Err(_) => {
                // `get_ts` blocks while the clock is disabled.
                st.schedule(STALL_POLL_NANOS, Event::TxnPoll(t));
                return;
            }
        };
        let lo = reading.lo().as_nanos();
        if lo <= ts {
            st.schedule((ts - lo).max(MICRO), Event::TxnPoll(t));
            return;
        }
        let complete = 2 * st.now;
        let reads = std::mem::take(&mut st.txns[t].reads);
        let mut ops = Vec::with_capacity(reads.len());
        for key in reads {
            let (seen, version) = match st.store.read(key, ts) {
                Some((value, version)) => (Some(value), Some(version)),
                None => (None, None),
            };
            ops.push(Op::ReadRegister { key, seen, version });
        }
        let writes = st.txns[t].writes.clone();
        for (key, _) in writes {
            if st.store.locks.get(&key) == Some(&t) {
                st.store.locks.remove(&key);
            }
        }
        let txn = &mut st.txns[t];
        txn.ops.extend(ops);
        txn.complete = Some(complete);
        let client = txn.client;
        let think = st.rng.range(0, THINK_MAX_NANOS);
        st.schedule(think, Event::ClientStart { node, client });
    }
}
