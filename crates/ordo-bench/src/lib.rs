//! # ordo-bench — workloads and reports
//!
//! The benchmarks of the three papers, run in-process against the engine with every clock.
#![forbid(unsafe_code)]

pub mod clock;
pub mod clock_crossover;
pub mod cluster;
pub mod cluster_clock;
pub mod driver;
pub mod durable;
pub mod engine;
pub mod error;
pub mod etcd_compare;
pub mod failover;
pub mod harness;
pub mod hashtable;
pub mod oplog;
pub mod report;
pub mod scan_update;
pub mod stamp;
pub mod synthetic;
pub mod tpcc;
pub mod ycsb;
pub mod zipf;
