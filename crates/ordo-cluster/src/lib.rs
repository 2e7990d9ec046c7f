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
//! | [`etcd_server`] | a private etcd member for tests, benchmarks and `ordo cluster up` |
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
#![forbid(unsafe_code)]

pub mod auth;
pub mod config;
pub mod etcd;
pub mod etcd_server;
pub mod lease;
pub mod local;
pub mod metrics;
pub mod node;
pub mod transport;
pub mod wire;
