//! # ordo-cluster — Ordo across machines
//!
//! Membership and configuration in etcd, leases, clock synchronisation (FaRMv2 Fig. 2), a TCP
//! wire protocol, primary-backup replication and clock-master failover. Not built yet: this crate
//! holds only its documentation until the cluster issue is taken.
#![forbid(unsafe_code)]
