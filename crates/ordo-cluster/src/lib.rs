//! # ordo-cluster — Ordo across machines
//!
//! FaRMv2 over TCP: membership and configuration in etcd, leases, clock synchronisation
//! (FaRMv2 Fig. 2), a wire protocol with authenticated peers, distributed transactions with
//! primary-backup replication, GC across nodes, a client, and (in a later step) clock-master
//! failover and recovery. DESIGN §6 is the plan; each module's essay states its invariants.
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
//! | [`failover`] | the next configuration after a suspicion, and what the reconfiguration round does with the clocks (FaRMv2 Fig. 6) |
//! | [`metrics`] | per-node metrics, Prometheus text |
//! | [`owners`] | the remote participant: READ, LOCK, VALIDATE, COMMIT-BACKUP, COMMIT-PRIMARY, TRUNCATE, ABORT to the nodes holding each region |
//! | [`recovery`] | the vote that commits or aborts a removed coordinator's transactions (FaRMv2 §4.7) |
//! | [`rereplicate`] | a new backup for a region that lost one, and the paced copy to it |
//! | [`node`] | a running node: its engine (primaries and backups), network task, lease, clock-sync and OAT thread, configuration watch |
//! | [`client`] | the cluster client: the embedded engine's API over the cluster |
//! | [`loopback`] | an in-process cluster for tests and benchmarks, with the replication check |
//! | [`sim`] | deterministic simulation of clock sync, leases and failover, every history checked; [`sim::data`]: of the data path with real engines |
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
//! `ordo cluster up | status | down`, `ordo bench cluster-clock`.
//!
//! Built (Cluster II): regions placed on nodes as primary + `f` backups from the configuration's
//! region map; the engine's one coordinator (`ordo::txn::commit`) drives local and remote
//! owners through `ordo::remote::Remote` ([`owners::RemoteOwners`]); backups keep each
//! COMMIT-BACKUP until TRUNCATE (piggybacked on later messages) and apply it then, keeping no
//! old versions; a transaction that aborts after some COMMIT-BACKUPs tells those backups to drop
//! its part. [`client::Client`] runs `run`, `begin`, `read_only_at`, every isolation mode,
//! `HashMap` and `BTree` over the cluster; transactions also run inside nodes. GC across nodes
//! (FaRMv2 Fig. 9): members send their OAT on lease requests and clients report theirs, the CM's
//! minimum comes back on lease grants and bounds every member's GC safe point; remote
//! old-version reads below a node's safe point are refused (`SnapshotTooOld`);
//! `Ordo::pin_snapshot` holds a snapshot time that other nodes serve (distributed read-only
//! transactions).
//!
//! Durable members (`data_dir` and `durability = "sync" | "process"` in the node file): each
//! backup logs every part it backs up to its durable log — stamped with its own clock, so the
//! log's marker and checkpointer see records in order — before acknowledging COMMIT-BACKUP;
//! primaries do not log (FaRM's design). A member's directory reopened on its own recovers the
//! regions it backed up.
//!
//! Built (Cluster III, first step): [`failover::plan`] — the next configuration after a
//! suspicion by FaRM's rules (majority, CM-only removal of non-CMs, backup promotion, a region
//! that would lose every replica refused) — and [`failover::run_round`], the reconfiguration
//! round of FaRMv2 Fig. 6 (NEW-CONFIG/ACK, lease wait, CONFIG-COMMIT, ADVANCE, the new CM
//! enabled at `[FF, FF]`) over the [`failover::RoundMembers`] seam, with the clock's failover
//! roles in [`ordo_clock::SyncedClock`]. Tested in process on virtual clocks, including two
//! failovers in a row and the negative test that skipping ADVANCE makes time go backwards.
//! A node with `failover = true` in its file runs them on a lease expiry (the `ordo-failover`
//! thread: plan, compare-and-swap in etcd, the round over TCP) and reports the clock-disabled
//! time ([`node::Node::last_failover`]); a member that loses its CM lease disables its clock.
//!
//! Built (Cluster III, second step): transaction recovery ([`recovery`]): every record names
//! the regions its transaction writes, survivors keep evidence of what happened to recent
//! transactions, and after the round the CM votes on every transaction the removed members
//! coordinated (RECOVER-QUERY / RECOVER-DECIDE): committed ones are installed and applied,
//! the rest released and dropped. A backup promoted to primary serves its region only once the
//! records it holds of it are resolved — by recovery, or by the live coordinators' TRUNCATE or
//! discard, which go to the backups their COMMIT-BACKUP went to — then rebuilds its free-slot
//! state from the objects' headers; old-version reads below the promotion are refused
//! (`SnapshotTooOld`). Re-replication ([`rereplicate`]): the CM gives each region that lost a
//! backup the least-loaded member, and the primary copies the region to it, paced, while a
//! LOCK routed by an older configuration is refused.
//!
//! A client silent for `CLIENT_OAT_TTL` is presumed dead: members fence it and recovery decides
//! its transactions the same way.
//!
//! Built (Cluster III, simulation of the clock layer): [`sim`] — a seeded, deterministic
//! simulation of clock sync, leases, crashes, partitions, etcd outages and the failover round
//! over a simulated network, with a workload whose every history is checked for strict
//! serializability; 1,000 seeds in the suite, more with `scripts/sim-long.sh`, and negative
//! tests for the lease wait and ADVANCE.
//!
//! Built (Cluster III, simulation of the data path): [`sim::data`] — the real engines as
//! members, durable on the storage seam's fault backend, a simulated network behind the
//! engine's `Remote` seam where transactions interleave at every message, crashes mid-commit,
//! the failover plan, the recovery vote, gated promotion, re-replication, and restarts after
//! power loss with torn writes; every history checked, 1,000 seeds in the suite, negative tests
//! for the vote, the primary check of COMMIT-BACKUP, the promotion gate and the COMMIT-PRIMARY
//! acknowledgement. `ordo sim clock|data` runs both.
//!
//! Not yet: moving regions or growing the region map; rejoining a cluster from a member's files
//! (a restarted member is checked for what it acknowledged, not readmitted); re-replicated
//! images are not logged by a durable new backup.
#![forbid(unsafe_code)]

pub mod auth;
pub mod client;
pub mod config;
pub mod etcd;
pub mod etcd_server;
pub mod failover;
pub mod lease;
pub mod local;
pub mod loopback;
pub mod metrics;
pub mod node;
pub mod owners;
pub mod recovery;
pub mod rereplicate;
pub mod sim;
pub mod transport;
pub mod wire;
