//! The transactional hash map and B+tree: models, proptests, limits, bad input, concurrency.
//!
//! One test binary (linked once); each module is one former test file.

#![allow(clippy::unwrap_used)] // test code: panics are the failure reports

mod common;
#[path = "../map_common/mod.rs"]
mod map_common;
#[path = "../tree_common/mod.rs"]
mod tree_common;

mod map_concurrent;
mod map_limits;
mod map_model;
mod map_proptest;
mod tree_bad_input;
mod tree_concurrent;
mod tree_hints;
mod tree_memo;
mod tree_model;
mod tree_proptest;
mod tree_table;
