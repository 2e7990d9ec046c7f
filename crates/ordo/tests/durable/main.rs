//! Durability: basics and bad input, checkpoints, group commit, commit order, power loss, replay.
//!
//! One test binary (linked once); each module is one former test file.

#![allow(clippy::unwrap_used)] // test code: panics are the failure reports

#[path = "../durable_common/mod.rs"]
mod durable_common;

mod durable_basic;
mod durable_checkpoint;
mod durable_group;
mod durable_large;
mod durable_order;
mod durable_power;
mod durable_replay;
mod durable_stream;
