//! The Ordo side of `etcd-compare`: the transaction shape of [`super`] on an in-process
//! loopback Ordo cluster ([`ordo_cluster::loopback::Loopback`]) through cluster clients
//! ([`ordo_cluster::client::Client`]).
//!
//! # The cluster
//! [`OrdoTarget::start`] starts `nodes` nodes on loopback TCP (static configuration, no etcd),
//! one region per node as its primary and one backup of it on the next node, and connects
//! `connections` clients. Each client is a coordinator without regions: every read, lock,
//! validation and commit step of its transactions is a call to the node that owns the object
//! (FaRMv2 Fig. 3 over TCP), as an etcd client's requests go to etcd.
//!
//! # One transaction
//! One attempt of the engine's strictly serializable optimistic transaction
//! (`begin`, `read` both counters, `write` the first one plus one, `commit`), without the
//! engine's retry loop: an abort of any kind ([`ordo::Error::Aborted`]: a locked or too-new
//! object read, a lock held by another commit, a failed validation) is a
//! [`TxnOutcome::Conflict`], and the driver runs the keys again as a new transaction. Any other
//! error (a participant gone, a timeout) stops the run.
//!
//! A client's calls block the calling thread until the owner answers, so each benchmark client
//! is a thread of its own ([`TxnTarget::txn_blocking`]). Benchmark client `i` uses client
//! connection `i % connections`.
//!
//! # Where transactions are coordinated
//! [`Coordinators`]: in cluster clients outside the nodes (every step is a call, as with
//! etcd), in the nodes' engines round-robin (FaRM's co-located coordinators), or in the engine
//! of the node that is primary of the object the transaction writes (FaRM's locality: work
//! shipped to its data, as a partition-aware client does).
//!
//! # Keys
//! [`TxnTarget::load`] allocates counter `i` as a `u64` object at node `i % nodes` (co-located,
//! in that node's own region), in transactions of [`LOAD_BATCH`] allocations, so the keys are
//! spread evenly over the regions and a transaction's two keys are on one node a third of the
//! time. Their addresses are kept in key order. [`TxnTarget::counters`] reads them back at their
//! primaries, then drains the backups and checks that every backup holds its primary's objects
//! (the cluster's replication invariant).
//!
//! Starting, loading, reading back and stopping all block (they start and stop runtimes), so the
//! target does them off any async worker thread.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use ordo::{Addr, Options};
use ordo_cluster::client::Client;
use ordo_cluster::loopback::{Loopback, LoopbackOptions};

use super::{BlockingTxn, CompareError, TargetFuture, TxnKeys, TxnOutcome, TxnTarget};

/// Counters allocated per loading transaction.
pub const LOAD_BATCH: usize = 256;

/// Counters read per transaction when reading them back.
const COUNTERS_BATCH: usize = 1_000;

/// The most client connections a target opens.
pub const CONNECTIONS_MAX: usize = 64;

/// How long the backups may take to apply every commit before the replication check.
const QUIESCE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the benchmark's transactions are coordinated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Coordinators {
    /// Cluster clients outside the nodes (as etcd's clients are): every step is a call.
    #[default]
    Client,
    /// The nodes' own engines (FaRM's deployment: applications run on the cluster's machines):
    /// benchmark client `i` runs on node `i mod nodes`; steps on its own objects are local.
    Nodes,
    /// The nodes' own engines, each transaction shipped to the primary of the object it writes
    /// (FaRM's locality: the application runs where its data is). Reading and locking the
    /// written object are local; the other read (when it lives elsewhere), its validation and
    /// COMMIT-BACKUP to the written region's backup cross the network.
    Owner,
}

/// How the cluster and its clients are set up.
#[derive(Clone, Debug)]
pub struct OrdoOptions {
    /// Nodes (at least 2: one backup per region).
    pub nodes: usize,
    /// Client connections shared by the benchmark's clients (1 to [`CONNECTIONS_MAX`]).
    pub connections: usize,
    /// Bytes per region (each node is primary of one).
    pub region_bytes: usize,
    /// Where transactions are coordinated.
    pub coordinators: Coordinators,
}

impl Default for OrdoOptions {
    fn default() -> Self {
        OrdoOptions {
            nodes: 3,
            connections: 1,
            region_bytes: 64 << 20,
            coordinators: Coordinators::Client,
        }
    }
}

/// A loopback Ordo cluster as a [`TxnTarget`] (module docs).
pub struct OrdoTarget {
    /// `None` only while dropping.
    inner: Option<Arc<Inner>>,
}

/// The cluster, its clients and the keys' addresses. Fields drop in order: the clients before
/// the cluster they are connected to.
struct Inner {
    clients: Vec<Client>,
    keys: RwLock<Arc<[Addr]>>,
    cluster: Loopback,
    options: OrdoOptions,
}

fn ordo_err(op: &'static str) -> impl Fn(ordo::Error) -> CompareError {
    move |source| CompareError::Ordo { op, source }
}

/// Runs blocking `f` on tokio's blocking pool when called on a runtime, else here.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, CompareError> + Send + 'static,
) -> Result<T, CompareError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| CompareError::Task(e.to_string()))?
}

impl OrdoTarget {
    /// Starts the cluster and connects the clients. Blocks for as long as that takes (about a
    /// second): call it off async worker threads (e.g. in `spawn_blocking`).
    ///
    /// # Errors
    /// [`CompareError::OutOfRange`] for fewer than 2 nodes or connections out of range;
    /// [`CompareError::Cluster`] when a node does not start or a client does not connect.
    pub fn start(options: OrdoOptions) -> Result<Self, CompareError> {
        if !(2..=64).contains(&options.nodes) {
            return Err(CompareError::OutOfRange {
                name: "ordo nodes",
                value: options.nodes as u64,
                expected: "2 to 64",
            });
        }
        if !(1..=CONNECTIONS_MAX).contains(&options.connections) {
            return Err(CompareError::OutOfRange {
                name: "ordo connections",
                value: options.connections as u64,
                expected: "1 to 64",
            });
        }
        let mut cluster_options = LoopbackOptions::new(options.nodes);
        cluster_options.engine.heap.region_bytes = options.region_bytes;
        // Co-located coordinators run on tokio's blocking pool, whose threads each keep a
        // worker (a thread slot) per node engine they ran on; the pool may grow past the
        // default 256 slots over many runs.
        cluster_options.engine.threads_max = 4 * ordo::THREADS_MAX_DEFAULT;
        let cluster = Loopback::start(cluster_options).map_err(cluster_err)?;
        let mut clients = Vec::with_capacity(options.connections);
        for _ in 0..options.connections {
            clients.push(cluster.client(ordo::Config::default()).map_err(cluster_err)?);
        }
        let inner = Inner { clients, keys: RwLock::new(Arc::from(Vec::new())), cluster, options };
        Ok(OrdoTarget { inner: Some(Arc::new(inner)) })
    }

    fn inner(&self) -> Arc<Inner> {
        // Present until drop.
        self.inner.clone().unwrap_or_else(|| unreachable!("an OrdoTarget is used after drop"))
    }

    /// Network calls the clients issued so far (every read, lock, validation and commit
    /// message; a fan-out to several backups counts each).
    pub fn round_trips(&self) -> u64 {
        self.inner.as_ref().map_or(0, |i| i.round_trips())
    }
}

fn cluster_err(e: ordo_cluster::loopback::LoopbackError) -> CompareError {
    CompareError::Cluster(Box::new(e))
}

impl Inner {
    fn round_trips(&self) -> u64 {
        let clients: u64 = self
            .clients
            .iter()
            .map(|c| c.owners().round_trips.load(std::sync::atomic::Ordering::Relaxed))
            .sum();
        let nodes: u64 = self
            .cluster
            .nodes()
            .iter()
            .map(|n| n.owners().round_trips.load(std::sync::atomic::Ordering::Relaxed))
            .sum();
        clients + nodes
    }

    fn keys(&self) -> Arc<[Addr]> {
        self.keys.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Allocates `keys` counters at 0, key `i` at node `i % nodes`.
    fn load(&self, keys: u64) -> Result<(), CompareError> {
        let keys = usize::try_from(keys).map_err(|_| CompareError::OutOfRange {
            name: "keys",
            value: keys,
            expected: "addressable on this machine",
        })?;
        let nodes = self.cluster.nodes();
        let mut per_node: Vec<Vec<Addr>> = Vec::with_capacity(nodes.len());
        for (j, node) in nodes.iter().enumerate() {
            // Keys j, j + n, j + 2n, …
            let wanted = keys.saturating_sub(j).div_ceil(nodes.len());
            let mut addrs = Vec::with_capacity(wanted);
            while addrs.len() < wanted {
                let batch = LOAD_BATCH.min(wanted - addrs.len());
                let allocated = node
                    .db()
                    .run(|tx| (0..batch).map(|_| tx.alloc(&0u64)).collect::<Result<Vec<_>, _>>())
                    .map_err(ordo_err("load"))?;
                addrs.extend(allocated);
            }
            per_node.push(addrs);
        }
        let addrs: Vec<Addr> =
            (0..keys).map(|i| per_node[i % nodes.len()][i / nodes.len()]).collect();
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = Arc::from(addrs);
        Ok(())
    }

    /// One attempt of the transaction (module docs).
    fn txn(&self, client: usize, keys: TxnKeys) -> Result<TxnOutcome, CompareError> {
        let addrs = self.keys();
        let addr = |key: u64| {
            usize::try_from(key).ok().and_then(|i| addrs.get(i).copied()).ok_or_else(|| {
                CompareError::Corrupt { target: "ordo", key, found: "nothing".into() }
            })
        };
        let (write, read) = (addr(keys.write)?, addr(keys.read)?);
        let nodes = self.cluster.nodes();
        let db: &ordo::Ordo<_> = match self.options.coordinators {
            Coordinators::Client => &self.clients[client % self.clients.len()],
            Coordinators::Nodes => nodes[client % nodes.len()].db(),
            Coordinators::Owner => {
                let primary = nodes[0].placement().primary(write.region());
                match nodes.iter().find(|n| Some(n.id()) == primary) {
                    Some(node) => node.db(),
                    None => {
                        return Err(CompareError::Corrupt {
                            target: "ordo",
                            key: keys.write,
                            found: format!("region {} without a primary", write.region()),
                        });
                    }
                }
            }
        };
        let options = Options { will_write: true, retries_max: 1, ..Options::default() };
        let attempt = (|| {
            let mut tx = db.begin_with(options)?;
            let value: u64 = tx.read(write)?;
            let _: u64 = tx.read(read)?;
            tx.write(write, &(value + 1))?;
            tx.commit()
        })();
        match attempt {
            Ok(_) => Ok(TxnOutcome::Committed),
            Err(ordo::Error::Aborted(_)) => Ok(TxnOutcome::Conflict),
            Err(e) => Err(CompareError::Ordo { op: "txn", source: e }),
        }
    }

    /// The counters `0..keys` read at their primaries, then the replication check.
    fn counters(&self, keys: u64) -> Result<Vec<u64>, CompareError> {
        let addrs = self.keys();
        if keys > addrs.len() as u64 {
            return Err(CompareError::Corrupt {
                target: "ordo",
                key: addrs.len() as u64,
                found: "nothing".into(),
            });
        }
        let addrs = &addrs[..keys as usize];
        let nodes = self.cluster.nodes();
        let mut counters = vec![0u64; addrs.len()];
        for node in nodes {
            let mine: Vec<usize> = (0..addrs.len())
                .filter(|&i| node.placement().primary(addrs[i].region()) == Some(node.id()))
                .collect();
            for chunk in mine.chunks(COUNTERS_BATCH) {
                let values = node
                    .db()
                    .run(|tx| {
                        chunk
                            .iter()
                            .map(|&i| tx.read::<u64>(addrs[i]))
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .map_err(ordo_err("counters"))?;
                for (&i, v) in chunk.iter().zip(values) {
                    counters[i] = v;
                }
            }
        }
        for client in &self.clients {
            client.owners().flush();
        }
        if !self.cluster.quiesce(QUIESCE_TIMEOUT) {
            return Err(CompareError::Replication(format!(
                "backups still held unapplied commits after {} ms",
                QUIESCE_TIMEOUT.as_millis()
            )));
        }
        self.cluster.check_replication().map_err(CompareError::Replication)?;
        Ok(counters)
    }
}

impl TxnTarget for OrdoTarget {
    fn name(&self) -> &'static str {
        "ordo"
    }

    fn describe(&self) -> String {
        let Some(inner) = &self.inner else { return "ordo: stopped".into() };
        format!(
            "ordo: {} loopback nodes (one {} MiB region each, 1 backup), coordinators: {}; \
             each client a thread of its own",
            inner.options.nodes,
            inner.options.region_bytes >> 20,
            match inner.options.coordinators {
                Coordinators::Client => format!("{} client(s)", inner.options.connections),
                Coordinators::Nodes => "the nodes' engines (co-located)".to_string(),
                Coordinators::Owner => {
                    "the nodes' engines, each transaction at its written object's primary"
                        .to_string()
                }
            }
        )
    }

    fn load(&self, keys: u64) -> TargetFuture<'_, ()> {
        let inner = self.inner();
        Box::pin(blocking(move || inner.load(keys)))
    }

    fn txn(&self, client: usize, keys: TxnKeys) -> TargetFuture<'_, TxnOutcome> {
        let inner = self.inner();
        Box::pin(blocking(move || inner.txn(client, keys)))
    }

    fn counters(&self, keys: u64) -> TargetFuture<'_, Vec<u64>> {
        let inner = self.inner();
        Box::pin(blocking(move || inner.counters(keys)))
    }

    fn round_trips(&self) -> Option<u64> {
        Some(OrdoTarget::round_trips(self))
    }

    /// Ordo's API is synchronous: each client is a thread of its own.
    fn txn_blocking(&self) -> Option<BlockingTxn> {
        let inner = self.inner();
        Some(Arc::new(move |client, keys| inner.txn(client, keys)))
    }
}

impl Drop for OrdoTarget {
    /// Stops the clients and the cluster. That drops their runtimes, which tokio refuses on an
    /// async thread, so on a runtime it happens on a thread of its own (joined).
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else { return };
        if tokio::runtime::Handle::try_current().is_ok() {
            let _ = std::thread::Builder::new()
                .name("ordo-target-stop".into())
                .spawn(move || drop(inner))
                .map(|t| t.join());
        } else {
            drop(inner);
        }
    }
}
