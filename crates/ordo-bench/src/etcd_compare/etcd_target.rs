//! The etcd side of `etcd-compare`: the transaction shape of [`super`] through `etcd-client`.
//!
//! # One transaction
//! 1. **Read**: one `Txn` with no compares whose success branch is two `Range` requests, one per
//!    key: a single round trip, linearizable (etcd's default; served after the leader's
//!    ReadIndex), returning each key's value (its counter) and `mod_revision`.
//! 2. **Commit**: one `Txn` that compares both keys' `mod_revision` to what was read and, if
//!    both still match, puts the written key's counter plus one. `succeeded == false` is a
//!    [`TxnOutcome::Conflict`]: nothing was written.
//!
//! The compares make it the optimistic transaction of the module docs: a commit happens only if
//! no other commit touched either key between the read and the commit (etcd applies `Txn`s one at
//! a time in revision order), so a committed counter is always the one read plus one and the
//! counters sum to the commits.
//!
//! # Keys
//! Key `i` is `/ordo-bench/etcd-compare/<i as 10 decimal digits>`: lexical order is numeric
//! order, so [`EtcdTarget::counters`] reads them back with ranges. Values are the counter in
//! decimal. [`TxnTarget::load`] writes them in `Txn`s of [`LOAD_BATCH_MAX`] puts (etcd's default
//! `--max-txn-ops` is 128).
//!
//! # Connections
//! The target opens `connections` etcd clients; client `i` of a run uses connection
//! `i % connections`. One `etcd-client` client is a tonic channel balanced over the endpoints it
//! is given: one HTTP/2 connection per endpoint, each request sent to one of them, concurrent
//! requests multiplexed as HTTP/2 streams. Given every member ([`Endpoints::All`]), followers
//! forward writes to the leader and ask it for a read index: an extra hop. [`Endpoints::Leader`]
//! connects to the member that leads when the target connects (if leadership moves later, that
//! member forwards like any follower). The benchmark's defaults — one connection, to the leader
//! — are the settings measured fastest for etcd on the benchmark machine (2 cores: 1 connection
//! beat 8 and 64 by 6 % and 14 % at 64 clients; the leader beat all members by about 10 %), so
//! that etcd is not handicapped by its client.
//!
//! Every request is bounded by the request timeout ([`CompareError::Timeout`]).

use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, KeyValue, KvClient, Txn, TxnOp,
    TxnOpResponse,
};
use ordo_cluster::etcd_server::EtcdCluster;

use super::{CompareError, TargetFuture, TxnKeys, TxnOutcome, TxnTarget};

/// Puts per load `Txn` (etcd's default `--max-txn-ops`).
pub const LOAD_BATCH_MAX: u64 = 128;

/// Keys per range request when reading the counters back.
const COUNTERS_BATCH_MAX: u64 = 1_000;

/// The most connections a target opens.
pub const CONNECTIONS_MAX: usize = 1_024;

const KEY_PREFIX: &str = "/ordo-bench/etcd-compare/";

/// The etcd key of counter `i`.
pub fn key(i: u64) -> String {
    format!("{KEY_PREFIX}{i:010}")
}

/// The counter index of an etcd key, if it is one of ours.
fn index(key: &[u8]) -> Option<u64> {
    std::str::from_utf8(key).ok()?.strip_prefix(KEY_PREFIX)?.parse().ok()
}

/// The counter a value holds.
fn counter(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// Which members a target's connections reach (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoints {
    /// The member leading when the target connects.
    Leader,
    /// Every member, requests balanced over them.
    All,
}

/// The index in `endpoints` of the member that says it leads.
///
/// # Errors
/// [`CompareError::Etcd`] or [`CompareError::Timeout`] when a member cannot be asked;
/// [`CompareError::NoLeader`] when none says it leads.
pub async fn leader(
    endpoints: &[String],
    request_timeout: Duration,
) -> Result<usize, CompareError> {
    let after_ms = u64::try_from(request_timeout.as_millis()).unwrap_or(u64::MAX);
    for (i, endpoint) in endpoints.iter().enumerate() {
        let options = ConnectOptions::new()
            .with_connect_timeout(request_timeout)
            .with_timeout(request_timeout);
        let ask = async {
            let mut client = Client::connect([endpoint], Some(options)).await?;
            client.status().await
        };
        let status = match tokio::time::timeout(request_timeout, ask).await {
            Ok(Ok(status)) => status,
            Ok(Err(source)) => return Err(CompareError::Etcd { op: "status", source }),
            Err(_) => return Err(CompareError::Timeout { target: "etcd", op: "status", after_ms }),
        };
        if status.header().is_some_and(|h| h.member_id() == status.leader()) {
            return Ok(i);
        }
    }
    Err(CompareError::NoLeader { endpoints: endpoints.to_vec() })
}

/// An etcd cluster as a [`TxnTarget`] (module docs).
pub struct EtcdTarget {
    connections: Vec<KvClient>,
    endpoints: Vec<String>,
    request_timeout: Duration,
    /// The cluster, when this target started it: stopped when the target is dropped.
    cluster: Option<EtcdCluster>,
}

impl EtcdTarget {
    /// Connects `connections` clients (1 to [`CONNECTIONS_MAX`]) to the cluster at `endpoints`
    /// (every member's client URL), each proved to answer a read.
    ///
    /// # Errors
    /// [`CompareError::Etcd`] or [`CompareError::Timeout`] when a connection cannot be made or
    /// does not answer within `request_timeout`.
    pub async fn connect(
        endpoints: &[String],
        connections: usize,
        request_timeout: Duration,
    ) -> Result<Self, CompareError> {
        if !(1..=CONNECTIONS_MAX).contains(&connections) {
            return Err(CompareError::OutOfRange {
                name: "etcd connections",
                value: connections as u64,
                expected: "1 to 1024",
            });
        }
        let mut target = EtcdTarget {
            connections: Vec::with_capacity(connections),
            endpoints: endpoints.to_vec(),
            request_timeout,
            cluster: None,
        };
        for _ in 0..connections {
            let options = ConnectOptions::new()
                .with_connect_timeout(request_timeout)
                .with_timeout(request_timeout);
            let client =
                target.bounded("connect", Client::connect(endpoints, Some(options))).await?;
            let mut kv = client.kv_client();
            target.bounded("connect", kv.get(KEY_PREFIX, None)).await?;
            target.connections.push(kv);
        }
        Ok(target)
    }

    /// Connects to `cluster` as [`EtcdTarget::connect`] does, to its leader or every member,
    /// and owns it: it stops when the target is dropped.
    ///
    /// # Errors
    /// As [`EtcdTarget::connect`] and [`leader`].
    pub async fn with_cluster(
        cluster: EtcdCluster,
        connections: usize,
        endpoints: Endpoints,
        request_timeout: Duration,
    ) -> Result<Self, CompareError> {
        let mut chosen = cluster.endpoints();
        if endpoints == Endpoints::Leader {
            let i = leader(&chosen, request_timeout).await?;
            chosen = vec![chosen.swap_remove(i)];
        }
        let mut target = Self::connect(&chosen, connections, request_timeout).await?;
        target.cluster = Some(cluster);
        Ok(target)
    }

    /// The cluster this target owns, if it started one.
    pub fn cluster(&self) -> Option<&EtcdCluster> {
        self.cluster.as_ref()
    }

    /// Awaits `fut` for at most the request timeout.
    async fn bounded<T>(
        &self,
        op: &'static str,
        fut: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, CompareError> {
        match tokio::time::timeout(self.request_timeout, fut).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(source)) => Err(CompareError::Etcd { op, source }),
            Err(_) => Err(CompareError::Timeout {
                target: "etcd",
                op,
                after_ms: u64::try_from(self.request_timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// The connection of client `client`.
    fn connection(&self, client: usize) -> KvClient {
        debug_assert!(!self.connections.is_empty());
        self.connections[client % self.connections.len()].clone()
    }

    /// The counter and `mod_revision` of `key_index` in a read's response.
    fn read_one(
        response: Option<&TxnOpResponse>,
        key_index: u64,
    ) -> Result<(u64, i64), CompareError> {
        let kv: Option<&KeyValue> = match response {
            Some(TxnOpResponse::Get(get)) => get.kvs().first(),
            _ => None,
        };
        let corrupt =
            |found: String| CompareError::Corrupt { target: "etcd", key: key_index, found };
        let kv = kv.ok_or_else(|| corrupt("nothing".into()))?;
        let value = counter(kv.value())
            .ok_or_else(|| corrupt(format!("{:?}", String::from_utf8_lossy(kv.value()))))?;
        Ok((value, kv.mod_revision()))
    }

    async fn txn_async(&self, client: usize, keys: TxnKeys) -> Result<TxnOutcome, CompareError> {
        let mut kv = self.connection(client);
        let (write_key, read_key) = (key(keys.write), key(keys.read));
        let read = Txn::new()
            .and_then([TxnOp::get(write_key.as_str(), None), TxnOp::get(read_key.as_str(), None)]);
        let responses = self.bounded("read", kv.txn(read)).await?.op_responses();
        let (written, write_rev) = Self::read_one(responses.first(), keys.write)?;
        let (_, read_rev) = Self::read_one(responses.get(1), keys.read)?;
        let commit = Txn::new()
            .when([
                Compare::mod_revision(write_key.as_str(), CompareOp::Equal, write_rev),
                Compare::mod_revision(read_key.as_str(), CompareOp::Equal, read_rev),
            ])
            .and_then([TxnOp::put(write_key.as_str(), (written + 1).to_string(), None)]);
        let committed = self.bounded("commit", kv.txn(commit)).await?.succeeded();
        Ok(if committed { TxnOutcome::Committed } else { TxnOutcome::Conflict })
    }

    async fn load_async(&self, keys: u64) -> Result<(), CompareError> {
        let mut kv = self.connection(0);
        let mut from = 0;
        while from < keys {
            let to = (from + LOAD_BATCH_MAX).min(keys);
            let puts: Vec<TxnOp> = (from..to).map(|i| TxnOp::put(key(i), "0", None)).collect();
            self.bounded("load", kv.txn(Txn::new().and_then(puts))).await?;
            from = to;
        }
        Ok(())
    }

    async fn counters_async(&self, keys: u64) -> Result<Vec<u64>, CompareError> {
        let mut kv = self.connection(0);
        let mut counters = Vec::with_capacity(usize::try_from(keys).unwrap_or(0));
        let mut from = 0;
        while from < keys {
            let to = (from + COUNTERS_BATCH_MAX).min(keys);
            let range = GetOptions::new().with_range(key(to));
            let response = self.bounded("counters", kv.get(key(from), Some(range))).await?;
            for kv in response.kvs() {
                // Keys come in key order, which is index order: the next must be `next`.
                let next = counters.len() as u64;
                if index(kv.key()) != Some(next) {
                    // A gap: key `next` is missing.
                    return Err(CompareError::Corrupt {
                        target: "etcd",
                        key: next,
                        found: "nothing".into(),
                    });
                }
                let value = counter(kv.value()).ok_or_else(|| CompareError::Corrupt {
                    target: "etcd",
                    key: next,
                    found: format!("{:?}", String::from_utf8_lossy(kv.value())),
                })?;
                counters.push(value);
            }
            if counters.len() as u64 != to {
                return Err(CompareError::Corrupt {
                    target: "etcd",
                    key: counters.len() as u64,
                    found: "nothing".into(),
                });
            }
            from = to;
        }
        Ok(counters)
    }
}

impl TxnTarget for EtcdTarget {
    fn name(&self) -> &'static str {
        "etcd"
    }

    fn describe(&self) -> String {
        let members = self.cluster.as_ref().map_or(String::new(), |c| {
            format!("{} members, data in {}; ", c.members().len(), c.dir().display())
        });
        format!(
            "etcd: {members}{} client connection(s) to {}",
            self.connections.len(),
            self.endpoints.join(",")
        )
    }

    fn load(&self, keys: u64) -> TargetFuture<'_, ()> {
        Box::pin(self.load_async(keys))
    }

    fn txn(&self, client: usize, keys: TxnKeys) -> TargetFuture<'_, TxnOutcome> {
        Box::pin(self.txn_async(client, keys))
    }

    fn counters(&self, keys: u64) -> TargetFuture<'_, Vec<u64>> {
        Box::pin(self.counters_async(keys))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_as_their_indices_and_parse_back() {
        assert!(key(9) < key(10));
        assert!(key(99_999) < key(100_000));
        assert_eq!(index(key(12_345).as_bytes()), Some(12_345));
        assert_eq!(index(b"/elsewhere/0000000001"), None);
        assert_eq!(counter(b"41"), Some(41));
        assert_eq!(counter(b"x"), None);
    }
}
