//! Configuration: a node's own file, and the cluster's configuration that lives in etcd.
//!
//! Two documents, two owners:
//!
//! * [`NodeConfig`] — one TOML file per node (`ordo node --config FILE`): who the node is, where it
//!   listens, where etcd is, the cluster secret, and its clock and lease settings. Read once at
//!   start; a wrong file is a [`ConfigError`] naming the file and the field.
//! * [`ClusterConfig`] — the FaRM configuration (FaRMv2 §4.3): a sequence number, the members,
//!   the configuration manager (CM, also the clock master) and the region map (region → primary
//!   and backups). It lives in etcd as JSON and changes only by compare-and-swap on its sequence
//!   number ([`crate::etcd::ConfigStore::swap`]); every node watches it.
//!
//! # Invariants (checked by [`ClusterConfig::validate`], on every document read or written)
//! * member ids are unique and non-zero (id 0 is reserved for tools such as `ordo cluster status`);
//! * the CM is a member;
//! * every region's primary and backups are members, pairwise distinct;
//! * a region appears once.
//!
//! A configuration read from etcd that breaks one of these is refused with the reason; the node
//! keeps the configuration it has (or does not start).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A node's identity in the cluster. `0` is reserved for tools.
pub type NodeId = u64;

/// What went wrong with a configuration, naming where.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The node's file could not be read.
    #[error("cannot read node configuration {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The node's file is not valid TOML for a [`NodeConfig`].
    #[error("node configuration {path} is invalid: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (it names the line and field).
        message: String,
    },
    /// A field has a value the node cannot use.
    #[error("node configuration {path}: field `{field}`: {reason}")]
    Field {
        /// The file.
        path: PathBuf,
        /// The field.
        field: &'static str,
        /// Why it is refused.
        reason: String,
    },
    /// The secret file could not be read or is too short.
    #[error("cluster secret {path}: {reason}")]
    Secret {
        /// The secret file.
        path: PathBuf,
        /// Why it is refused.
        reason: String,
    },
    /// The cluster configuration in etcd is not valid JSON for a [`ClusterConfig`].
    #[error("cluster configuration (seq {seq:?}) is not valid: {message}")]
    Document {
        /// Its sequence number when it could be read.
        seq: Option<u64>,
        /// What is wrong.
        message: String,
    },
    /// The cluster configuration names a node that is not a member.
    #[error("cluster configuration seq {seq}: {role} names node {node}, which is not a member")]
    UnknownNode {
        /// The configuration's sequence number.
        seq: u64,
        /// Where the node is named ("the CM", "region 3 primary", …).
        role: String,
        /// The unknown node.
        node: NodeId,
    },
    /// This node is not a member of the cluster configuration.
    #[error(
        "node {node} is not a member of cluster configuration seq {seq} (members: {members:?})"
    )]
    NotAMember {
        /// This node.
        node: NodeId,
        /// The configuration's sequence number.
        seq: u64,
        /// Its members.
        members: Vec<NodeId>,
    },
}

/// Which local clock a node synchronises (the CM's local clock is the cluster's time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LocalClockChoice {
    /// The invariant CPU counter with its calibrated boundary (falls back to `system` where the
    /// counter is not invariant).
    Ordo,
    /// `CLOCK_MONOTONIC`.
    #[default]
    System,
}

/// One node's file. Paths are relative to the file's directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// This node's id (non-zero).
    pub id: NodeId,
    /// The cluster's name; peers of another cluster are refused.
    pub cluster: String,
    /// Where the node listens for peers and clients (`host:port`).
    pub listen: String,
    /// etcd endpoints (`http://host:port` or `host:port`).
    pub etcd: Vec<String>,
    /// The file holding the shared cluster secret (at least 16 bytes).
    pub secret_file: PathBuf,
    /// Optional `host:port` serving Prometheus text at `/metrics`.
    #[serde(default)]
    pub metrics_listen: Option<String>,
    /// The lease period in milliseconds. FaRM uses 10 ms with its lease threads on dedicated
    /// cores; the default of 50 ms leaves room for the scheduling stalls of a small shared
    /// machine running several nodes (a stall longer than the lease is a false suspicion).
    #[serde(default = "default_lease_ms")]
    pub lease_ms: u32,
    /// Clock synchronisations per second, summed over all non-CM members (the CM's load).
    #[serde(default = "default_sync_rate")]
    pub sync_rate_per_s: u32,
    /// The drift bound ε in parts per million (FaRMv2 uses 1000).
    #[serde(default = "default_drift_bound")]
    pub drift_bound_ppm: u64,
    /// The drift the monitor alarms at, in parts per million (FaRMv2 uses 200).
    #[serde(default = "default_drift_alarm")]
    pub drift_alarm_ppm: u64,
    /// Which local clock to synchronise.
    #[serde(default)]
    pub clock: LocalClockChoice,
    /// How long the node keeps retrying etcd at start before giving up, in milliseconds.
    #[serde(default = "default_etcd_start_ms")]
    pub etcd_start_timeout_ms: u64,
    /// Whether the node's engine keeps old versions (`single` or `multi`, FaRMv2 §4.4).
    #[serde(default)]
    pub versions: VersionsChoice,
    /// Bytes per region (a multiple of 1 MiB). Default 64 MiB.
    #[serde(default = "default_region_bytes")]
    pub region_bytes: usize,
    /// Threads of the node's network runtime, which serves other nodes' and clients' requests
    /// (default 2). Nodes sharing a small machine do better with 1: fewer threads to wake.
    #[serde(default = "default_network_threads")]
    pub network_threads: usize,
    /// Where the node keeps its durable log and heap files (relative to the file's
    /// directory); none keeps the node in memory.
    #[serde(default)]
    pub data_dir: Option<PathBuf>,
    /// `sync` (acknowledge COMMIT-BACKUP once it is on disk) or `process` (once it is in the
    /// OS: survives a crash of the process, not of the machine). Needs `data_dir`.
    #[serde(default)]
    pub durability: Option<DurabilityChoice>,
    /// Act on a lease expiry (FaRMv2 §4.3): the CM removes a suspected member, a member that
    /// suspects the CM takes over as CM, clocks are fast-forwarded (`crate::failover`). Off by
    /// default while transaction recovery is not built: a backup promoted to primary does not
    /// yet resolve the transactions it holds untruncated, nor are a dead coordinator's locks
    /// released.
    #[serde(default)]
    pub failover: bool,
}

/// How a node's backups make their parts durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DurabilityChoice {
    /// On disk before the acknowledgement.
    Sync,
    /// In the OS before the acknowledgement.
    Process,
}

fn default_network_threads() -> usize {
    2
}

/// The engine's version mode, as a node file names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum VersionsChoice {
    /// Head versions only.
    #[default]
    Single,
    /// Old versions kept for snapshot reads.
    Multi,
}

fn default_region_bytes() -> usize {
    64 << 20
}

fn default_lease_ms() -> u32 {
    50
}
fn default_sync_rate() -> u32 {
    2_000
}
fn default_drift_bound() -> u64 {
    1_000
}
fn default_drift_alarm() -> u64 {
    200
}
fn default_etcd_start_ms() -> u64 {
    60_000
}

impl NodeConfig {
    /// A configuration with the defaults for everything but identity and addresses.
    pub fn new(
        id: NodeId,
        cluster: &str,
        listen: &str,
        etcd: Vec<String>,
        secret_file: PathBuf,
    ) -> Self {
        NodeConfig {
            id,
            cluster: cluster.to_string(),
            listen: listen.to_string(),
            etcd,
            secret_file,
            metrics_listen: None,
            lease_ms: default_lease_ms(),
            sync_rate_per_s: default_sync_rate(),
            drift_bound_ppm: default_drift_bound(),
            drift_alarm_ppm: default_drift_alarm(),
            clock: LocalClockChoice::default(),
            etcd_start_timeout_ms: default_etcd_start_ms(),
            versions: VersionsChoice::default(),
            region_bytes: default_region_bytes(),
            network_threads: default_network_threads(),
            data_dir: None,
            durability: None,
            failover: false,
        }
    }

    /// The engine configuration this file asks for.
    pub fn engine(&self) -> ordo::Config {
        let versions = match self.versions {
            VersionsChoice::Single => ordo::Versions::Single,
            VersionsChoice::Multi => ordo::Versions::Multi,
        };
        let heap = ordo::heap::HeapConfig { region_bytes: self.region_bytes, ..Default::default() };
        let durability = match (&self.data_dir, self.durability) {
            (Some(dir), Some(mode)) => Some(ordo::durable::DurableConfig::new(
                dir.clone(),
                match mode {
                    DurabilityChoice::Sync => ordo::durable::Mode::Sync,
                    DurabilityChoice::Process => ordo::durable::Mode::Process,
                },
            )),
            _ => None,
        };
        ordo::Config { versions, heap, durability, ..ordo::Config::default() }
    }

    /// Reads and checks a node's file; a relative `secret_file` is resolved against its directory.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        let mut config: NodeConfig = toml::from_str(&text)
            .map_err(|e| ConfigError::Parse { path: path.to_path_buf(), message: e.to_string() })?;
        if let Some(dir) = path.parent() {
            if config.secret_file.is_relative() {
                config.secret_file = dir.join(&config.secret_file);
            }
            if let Some(data) = config.data_dir.as_mut().filter(|d| d.is_relative()) {
                *data = dir.join(&*data);
            }
        }
        config.check(path)?;
        Ok(config)
    }

    /// The file's text (TOML).
    pub fn to_toml(&self) -> String {
        // A struct of plain fields always serialises.
        toml::to_string(self).unwrap_or_default()
    }

    /// Checks every field; `path` only names the file in errors.
    pub fn check(&self, path: &Path) -> Result<(), ConfigError> {
        let field = |field: &'static str, reason: &str| ConfigError::Field {
            path: path.to_path_buf(),
            field,
            reason: reason.to_string(),
        };
        if self.id == 0 {
            return Err(field("id", "0 is reserved for tools; use 1 or more"));
        }
        if self.cluster.is_empty() || self.cluster.len() > 128 {
            return Err(field("cluster", "must be 1 to 128 characters"));
        }
        if self.listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(field("listen", "must be an IP address and port, e.g. 127.0.0.1:7101"));
        }
        if let Some(m) = &self.metrics_listen
            && m.parse::<std::net::SocketAddr>().is_err()
        {
            return Err(field("metrics_listen", "must be an IP address and port"));
        }
        if self.etcd.is_empty() {
            return Err(field("etcd", "name at least one endpoint"));
        }
        if self.durability.is_some() != self.data_dir.is_some() {
            return Err(field("durability", "durability and data_dir go together"));
        }
        if self.network_threads == 0 || self.network_threads > 64 {
            return Err(field("network_threads", "must be 1 to 64"));
        }
        if self.lease_ms == 0 || self.lease_ms > 60_000 {
            return Err(field("lease_ms", "must be 1 to 60000"));
        }
        if self.sync_rate_per_s == 0 || self.sync_rate_per_s > 1_000_000 {
            return Err(field("sync_rate_per_s", "must be 1 to 1000000"));
        }
        if self.drift_bound_ppm == 0 || self.drift_bound_ppm >= 1_000_000 {
            return Err(field("drift_bound_ppm", "must be 1 to 999999"));
        }
        Ok(())
    }

    /// The lease period.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(u64::from(self.lease_ms))
    }

    /// Reads the cluster secret named by `secret_file`.
    pub fn read_secret(&self) -> Result<Vec<u8>, ConfigError> {
        read_secret_file(&self.secret_file)
    }
}

/// Reads a secret file: its bytes with surrounding whitespace trimmed, at least 16 of them.
pub fn read_secret_file(path: &Path) -> Result<Vec<u8>, ConfigError> {
    let bytes = std::fs::read(path)
        .map_err(|e| ConfigError::Secret { path: path.to_path_buf(), reason: e.to_string() })?;
    let trimmed = bytes.trim_ascii().to_vec();
    if trimmed.len() < 16 {
        return Err(ConfigError::Secret {
            path: path.to_path_buf(),
            reason: format!("{} bytes; at least 16 are required", trimmed.len()),
        });
    }
    Ok(trimmed)
}

/// A member of the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Member {
    /// The node's id.
    pub id: NodeId,
    /// Where it listens (`host:port`).
    pub addr: String,
}

/// Where one region lives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionPlacement {
    /// The region id.
    pub region: u32,
    /// The node holding the primary copy.
    pub primary: NodeId,
    /// The nodes holding backups (FaRM's `f` replicas).
    pub backups: Vec<NodeId>,
}

/// The cluster's configuration (FaRMv2 §4.3), as stored in etcd.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The sequence number; every change increments it by one.
    pub seq: u64,
    /// The members.
    pub members: Vec<Member>,
    /// The configuration manager, which is also the clock master.
    pub cm: NodeId,
    /// The region map.
    pub regions: Vec<RegionPlacement>,
}

impl ClusterConfig {
    /// The first configuration of a new cluster: `members` in order, the first one the CM, and
    /// one region per member whose primary is that member and whose `backups` backups are the
    /// members after it (wrapping around).
    pub fn initial(members: Vec<Member>, backups: usize) -> Self {
        let n = members.len();
        let regions = (0..n)
            .map(|i| RegionPlacement {
                region: u32::try_from(i + 1).unwrap_or(u32::MAX),
                primary: members[i].id,
                backups: (1..=backups.min(n.saturating_sub(1)))
                    .map(|k| members[(i + k) % n].id)
                    .collect(),
            })
            .collect();
        let cm = members.first().map_or(0, |m| m.id);
        ClusterConfig { seq: 1, members, cm, regions }
    }

    /// Parses a stored document and checks it.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ConfigError> {
        let config: ClusterConfig = serde_json::from_slice(bytes).map_err(|e| {
            let seq = serde_json::from_slice::<serde_json::Value>(bytes)
                .ok()
                .and_then(|v| v.get("seq").and_then(serde_json::Value::as_u64));
            ConfigError::Document { seq, message: e.to_string() }
        })?;
        config.validate()?;
        Ok(config)
    }

    /// The stored form.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// Checks the invariants of the module docs.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let seq = self.seq;
        let doc = |message: String| ConfigError::Document { seq: Some(seq), message };
        if self.members.is_empty() {
            return Err(doc("no members".into()));
        }
        let mut ids = BTreeSet::new();
        for m in &self.members {
            if m.id == 0 {
                return Err(doc("member id 0 is reserved for tools".into()));
            }
            if !ids.insert(m.id) {
                return Err(doc(format!("member {} appears twice", m.id)));
            }
            if m.addr.parse::<std::net::SocketAddr>().is_err() {
                return Err(doc(format!("member {} has address {:?}, not ip:port", m.id, m.addr)));
            }
        }
        let unknown = |role: String, node: NodeId| ConfigError::UnknownNode { seq, role, node };
        if !ids.contains(&self.cm) {
            return Err(unknown("the CM".into(), self.cm));
        }
        let mut regions = BTreeSet::new();
        for r in &self.regions {
            if !regions.insert(r.region) {
                return Err(doc(format!("region {} appears twice", r.region)));
            }
            if !ids.contains(&r.primary) {
                return Err(unknown(format!("region {} primary", r.region), r.primary));
            }
            let mut replicas = BTreeSet::from([r.primary]);
            for &b in &r.backups {
                if !ids.contains(&b) {
                    return Err(unknown(format!("region {} backup", r.region), b));
                }
                if !replicas.insert(b) {
                    return Err(doc(format!("region {} names node {b} twice", r.region)));
                }
            }
        }
        Ok(())
    }

    /// The member with `id`.
    pub fn member(&self, id: NodeId) -> Option<&Member> {
        self.members.iter().find(|m| m.id == id)
    }

    /// Fails unless `id` is a member.
    pub fn require_member(&self, id: NodeId) -> Result<&Member, ConfigError> {
        self.member(id).ok_or_else(|| ConfigError::NotAMember {
            node: id,
            seq: self.seq,
            members: self.members.iter().map(|m| m.id).collect(),
        })
    }

    /// The non-CM members.
    pub fn non_cms(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| m.id != self.cm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: u64) -> Vec<Member> {
        (1..=n).map(|id| Member { id, addr: format!("127.0.0.1:{}", 7100 + id) }).collect()
    }

    #[test]
    fn initial_places_primaries_and_backups_on_distinct_members() {
        let c = ClusterConfig::initial(members(3), 1);
        c.validate().unwrap();
        assert_eq!(c.cm, 1);
        assert_eq!(c.regions[2], RegionPlacement { region: 3, primary: 3, backups: vec![1] });
        let round = ClusterConfig::from_json(&c.to_json()).unwrap();
        assert_eq!(round, c);
    }

    #[test]
    fn unknown_nodes_and_duplicates_are_refused() {
        let mut c = ClusterConfig::initial(members(3), 1);
        c.regions[0].backups = vec![9];
        assert!(matches!(c.validate(), Err(ConfigError::UnknownNode { node: 9, .. })));
        let mut c = ClusterConfig::initial(members(3), 1);
        c.cm = 7;
        assert!(matches!(c.validate(), Err(ConfigError::UnknownNode { node: 7, .. })));
        let mut c = ClusterConfig::initial(members(3), 1);
        c.regions[0].backups = vec![1];
        assert!(matches!(c.validate(), Err(ConfigError::Document { .. })));
        let mut c = ClusterConfig::initial(members(3), 1);
        c.members[1].id = 1;
        assert!(matches!(c.validate(), Err(ConfigError::Document { .. })));
        assert!(matches!(c.require_member(42), Err(ConfigError::NotAMember { node: 42, .. })));
    }

    #[test]
    fn garbage_documents_are_typed_errors() {
        assert!(matches!(
            ClusterConfig::from_json(b"{\"seq\": 4, \"members\": 3}"),
            Err(ConfigError::Document { seq: Some(4), .. })
        ));
        assert!(matches!(ClusterConfig::from_json(b"\xff\x00"), Err(ConfigError::Document { .. })));
    }

    #[test]
    fn node_files_are_checked_field_by_field() {
        let dir = std::env::temp_dir().join(format!("ordo-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("secret"), "0123456789abcdef0123").unwrap();
        let good = NodeConfig::new(
            1,
            "dev",
            "127.0.0.1:7101",
            vec!["127.0.0.1:2379".into()],
            "secret".into(),
        );
        let path = dir.join("node.toml");
        std::fs::write(&path, good.to_toml()).unwrap();
        let loaded = NodeConfig::load(&path).unwrap();
        assert_eq!(loaded.secret_file, dir.join("secret"));
        assert_eq!(loaded.read_secret().unwrap().len(), 20);

        let mut bad = good.clone();
        bad.listen = "nowhere".into();
        std::fs::write(&path, bad.to_toml()).unwrap();
        let e = NodeConfig::load(&path).unwrap_err();
        assert!(matches!(e, ConfigError::Field { field: "listen", .. }), "{e}");

        std::fs::write(&path, "id = 1\nbogus = true\n").unwrap();
        assert!(matches!(NodeConfig::load(&path), Err(ConfigError::Parse { .. })));

        std::fs::write(dir.join("secret"), "short").unwrap();
        assert!(matches!(loaded.read_secret(), Err(ConfigError::Secret { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
