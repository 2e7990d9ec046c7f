//! RLU: linearizability on every clock, deferral, the removal tests of its mechanisms, Fig. 7's boundary.
//!
//! One test binary (linked once); each module is one former test file.

#![allow(clippy::unwrap_used)] // test code: panics are the failure reports

mod common;
mod set_common;

mod rlu;
mod rlu_defer;
mod rlu_mechanisms;
mod rlu_shortcuts;
