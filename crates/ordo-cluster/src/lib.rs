//! # ordo-cluster — Ordo across machines
//!
//! FaRMv2 over TCP: membership and configuration in etcd, leases, clock synchronisation
//! (FaRMv2 Fig. 2), a wire protocol with authenticated peers, and (in later steps) primary-backup
//! replication and clock-master failover. DESIGN §6 is the plan; each module's essay states its
//! invariants.
//!
//! | module | what it holds |
//! |---|---|
//! | [`config`] | a node's file ([`config::NodeConfig`]) and the cluster configuration ([`config::ClusterConfig`]) |
//! | [`etcd`] | the configuration in etcd: create, compare-and-swap on the sequence number, watch |
//! | [`etcd_server`] | private etcd members for tests, benchmarks and `ordo cluster up`, alone or as a loopback cluster |
//! | [`wire`] | frames and the versioned message enum, explicitly encoded |
//! | [`auth`] | the mutual HMAC challenge over the cluster secret |
//! | [`transport`] | tokio TCP: one connection per peer, bounded queues, request/response |
//! | [`lease`] | lease bookkeeping (FaRMv2 §4.3) |
//! | [`metrics`] | per-node metrics, Prometheus text |
//! | [`node`] | a running node: network task, lease and clock-sync thread, configuration watch |
//! | [`local`] | a local development cluster: etcd plus N node processes |
//!
//! Dependencies point down: `node` uses everything above it; nothing here reaches into the
//! engine's internals (`ordo` is used through its public API).
//!
//! # What is built, and what is next
//! Built (Cluster I): the configuration in etcd with compare-and-swap on its sequence number and
//! a watch; nodes that authenticate each other (mutual HMAC-SHA256 over the cluster secret) and
//! talk length-prefixed, versioned, explicitly encoded frames over tokio TCP with bounded queues;
//! FaRM leases (3-way handshake from a dedicated thread, expiry reported within two periods);
//! FaRMv2 clock synchronisation ([`ordo_clock::SyncedClock`], drift bound ε, drift monitor,
//! clock disabled until the first sync); metrics as Prometheus text; `ordo node`,
//! `ordo cluster up | status | down`, `ordo bench cluster-clock`. The engine's commit
//! coordinator drives a set of participants keyed by region (`ordo::txn::participant`), the
//! seam a remote participant plugs into.
//!
//! Next (Cluster II): regions placed on nodes as primary + backups, the remote participant
//! (READ, LOCK, VALIDATE, COMMIT-BACKUP, COMMIT-PRIMARY, TRUNCATE over the transport), a client
//! API equal to the embedded one, cluster GC/OAT and distributed read-only transactions. Then
//! (Cluster III): suspicion acted on — reconfiguration, clock-master failover with fast-forward,
//! transaction recovery — and deterministic simulation.
#![forbid(unsafe_code)]

pub mod auth;
pub mod client;
pub mod config;
pub mod etcd;
pub mod etcd_server;
pub mod lease;
pub mod local;
pub mod loopback;
pub mod metrics;
pub mod node;
pub mod owners;
pub mod transport;
pub mod wire;
