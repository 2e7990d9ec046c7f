//! The cluster configuration in etcd: read, create, compare-and-swap, watch (FaRMv2 §4.3; FaRM
//! keeps it in ZooKeeper).
//!
//! # Layout
//! Under the prefix `/ordo/<cluster>/`:
//! * `seq` — the configuration's sequence number in decimal;
//! * `config` — the [`ClusterConfig`] as JSON, whose `seq` field equals `seq`.
//!
//! # Invariants
//! * Both keys change together, in one etcd transaction guarded by `seq` holding the expected
//!   value ([`ConfigStore::swap`]) or not existing yet ([`ConfigStore::create`]): the configuration
//!   changes only by compare-and-swap on its sequence number, and every change increments it by
//!   exactly one.
//! * A document that fails [`ClusterConfig::validate`] is never written, and one read back that
//!   fails it is refused (a typed error), never half-used.
//! * Every call is bounded in time (`request_timeout`); connecting at start retries with bounded
//!   exponential back-off until `start_timeout`, logging each failure.

use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, ConnectOptions, Txn, TxnOp};

use crate::config::{ClusterConfig, ConfigError};

/// What went wrong talking to etcd.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// No endpoint answered within the start timeout.
    #[error(
        "etcd at {endpoints:?} unreachable after {attempts} attempts in {waited_ms} ms: {last}"
    )]
    Unreachable {
        /// The endpoints tried.
        endpoints: Vec<String>,
        /// How many connection attempts were made.
        attempts: u32,
        /// How long it tried.
        waited_ms: u64,
        /// The last error.
        last: String,
    },
    /// A request failed (etcd down, timeout, …).
    #[error("etcd {op} on {key}: {source}")]
    Request {
        /// The operation.
        op: &'static str,
        /// The key.
        key: String,
        /// The client's error.
        source: etcd_client::Error,
    },
    /// A request took longer than the request timeout.
    #[error("etcd {op} on {key} timed out after {after_ms} ms")]
    Timeout {
        /// The operation.
        op: &'static str,
        /// The key.
        key: String,
        /// The timeout.
        after_ms: u64,
    },
    /// The stored document is invalid.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The compare-and-swap lost: the sequence number was not the expected one.
    #[error("configuration changed concurrently: expected seq {expected}, found {found:?}")]
    Conflict {
        /// The sequence number the caller based its change on.
        expected: u64,
        /// What etcd holds (None: no configuration).
        found: Option<u64>,
    },
    /// `swap` was given a configuration whose seq is not `expected + 1`.
    #[error("a new configuration must have seq {want}, not {got}")]
    BadSeq {
        /// The required value.
        want: u64,
        /// The given value.
        got: u64,
    },
}

/// Handle to the cluster's configuration keys.
#[derive(Clone)]
pub struct ConfigStore {
    client: Client,
    seq_key: String,
    config_key: String,
    request_timeout: Duration,
}

/// Bounded exponential back-off: 50 ms doubling to at most 2 s.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    next: Duration,
    max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: Duration::from_millis(50), max: Duration::from_secs(2) }
    }
}

impl Backoff {
    /// The next delay; doubles up to the maximum.
    pub fn step(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        d
    }
}

/// Normalises an endpoint to a URL etcd-client accepts.
fn endpoint_url(e: &str) -> String {
    if e.contains("://") { e.to_string() } else { format!("http://{e}") }
}

impl ConfigStore {
    /// Connects, retrying with back-off until `start_timeout` (a `warn` per failure).
    pub async fn connect(
        endpoints: &[String],
        cluster: &str,
        request_timeout: Duration,
        start_timeout: Duration,
    ) -> Result<Self, EtcdError> {
        let urls: Vec<String> = endpoints.iter().map(|e| endpoint_url(e)).collect();
        let started = Instant::now();
        let mut backoff = Backoff::default();
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let options = ConnectOptions::new()
                .with_connect_timeout(request_timeout)
                .with_timeout(request_timeout)
                .with_keep_alive(Duration::from_secs(1), request_timeout);
            let attempt = async {
                let client = Client::connect(&urls, Some(options)).await?;
                // A connection is lazy: prove etcd answers.
                let mut probe = client.clone();
                probe.get("/ordo/", None).await?;
                Ok::<_, etcd_client::Error>(client)
            };
            let last = match tokio::time::timeout(request_timeout, attempt).await {
                Ok(Ok(client)) => {
                    return Ok(ConfigStore {
                        client,
                        seq_key: format!("/ordo/{cluster}/seq"),
                        config_key: format!("/ordo/{cluster}/config"),
                        request_timeout,
                    });
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("no answer within {} ms", request_timeout.as_millis()),
            };
            let waited = started.elapsed();
            if waited >= start_timeout {
                return Err(EtcdError::Unreachable {
                    endpoints: urls,
                    attempts,
                    waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                    last,
                });
            }
            let delay = backoff.step().min(start_timeout - waited);
            tracing::warn!(endpoints = ?urls, attempt = attempts, error = %last,
                retry_in_ms = delay.as_millis() as u64, "etcd unreachable; retrying");
            tokio::time::sleep(delay).await;
        }
    }

    /// The key holding the configuration document.
    pub fn config_key(&self) -> &str {
        &self.config_key
    }

    async fn bounded<T>(
        &self,
        op: &'static str,
        key: &str,
        fut: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, EtcdError> {
        match tokio::time::timeout(self.request_timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(source)) => Err(EtcdError::Request { op, key: key.to_string(), source }),
            Err(_) => Err(EtcdError::Timeout {
                op,
                key: key.to_string(),
                after_ms: u64::try_from(self.request_timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// The current configuration, `None` when the cluster has none yet.
    pub async fn get(&self) -> Result<Option<ClusterConfig>, EtcdError> {
        let mut client = self.client.clone();
        let resp = self
            .bounded("get", &self.config_key, client.get(self.config_key.as_str(), None))
            .await?;
        match resp.kvs().first() {
            None => Ok(None),
            Some(kv) => Ok(Some(ClusterConfig::from_json(kv.value())?)),
        }
    }

    /// Writes the first configuration; fails with [`EtcdError::Conflict`] if one exists.
    pub async fn create(&self, config: &ClusterConfig) -> Result<(), EtcdError> {
        config.validate()?;
        let txn = Txn::new()
            .when([Compare::version(self.seq_key.as_str(), CompareOp::Equal, 0)])
            .and_then(self.puts(config));
        self.commit(txn, 0).await
    }

    /// Replaces the configuration whose seq is `expected` by `next` (whose seq must be
    /// `expected + 1`): the compare-and-swap of the module docs.
    pub async fn swap(&self, expected: u64, next: &ClusterConfig) -> Result<(), EtcdError> {
        if next.seq != expected + 1 {
            return Err(EtcdError::BadSeq { want: expected + 1, got: next.seq });
        }
        next.validate()?;
        let txn = Txn::new()
            .when([Compare::value(self.seq_key.as_str(), CompareOp::Equal, expected.to_string())])
            .and_then(self.puts(next));
        self.commit(txn, expected).await
    }

    fn puts(&self, config: &ClusterConfig) -> [TxnOp; 2] {
        [
            TxnOp::put(self.seq_key.as_str(), config.seq.to_string(), None),
            TxnOp::put(self.config_key.as_str(), config.to_json(), None),
        ]
    }

    async fn commit(&self, txn: Txn, expected: u64) -> Result<(), EtcdError> {
        let mut client = self.client.clone();
        let resp = self.bounded("txn", &self.seq_key, client.txn(txn)).await?;
        if resp.succeeded() {
            return Ok(());
        }
        let found = self.get().await?.map(|c| c.seq);
        Err(EtcdError::Conflict { expected, found })
    }

    /// Removes the cluster's keys (used by tests and `cluster down --purge`).
    pub async fn delete_all(&self) -> Result<(), EtcdError> {
        let mut client = self.client.clone();
        let prefix = self.seq_key.trim_end_matches("seq").to_string();
        let opts = etcd_client::DeleteOptions::new().with_prefix();
        self.bounded("delete", &prefix, client.delete(prefix.as_str(), Some(opts))).await?;
        Ok(())
    }

    /// Watches the configuration key; every valid document put is sent on the returned channel
    /// (invalid ones are logged and skipped). The stream ends when etcd goes away; callers
    /// re-watch (see `node`).
    pub async fn watch(&self) -> Result<etcd_client::WatchStream, EtcdError> {
        let mut client = self.client.clone();
        self.bounded("watch", &self.config_key, client.watch(self.config_key.as_str(), None)).await
    }
}
