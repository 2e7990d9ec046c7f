//! The engine: API, stress, GC, histories checked by ordo-check, negative shortcuts, slab reuse,
//! and the layering of its modules.
//!
//! One test binary (linked once); each module is one former test file.

#![allow(clippy::unwrap_used)] // test code: panics are the failure reports

#[path = "../common/mod.rs"]
mod common;

mod engine_api;
mod engine_stress;
mod extension;
mod gc;
mod history;
mod layering;
mod shortcuts;
mod slab_reuse;
