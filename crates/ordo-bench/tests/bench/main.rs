//! Integration tests of the workloads at tiny scale: each against its model, invariants or sequential result.
//!
//! One test binary (links once); each module is one former test file.

mod etcd_compare;
mod oplog;
mod stamp;
mod stamp_kernels2;
mod synthetic;
mod tpcc;
mod ycsb;
