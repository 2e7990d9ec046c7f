//! The atomics of the calibration handshake, switched to loom's under `cfg(loom)`.
//!
//! STYLE: atomics come through one `sync` module so that a loom model runs the real protocol
//! unchanged (`tests/loom_calibration.rs`). Only [`crate::handshake`] uses this module; the clocks
//! themselves keep `std` atomics, since loom atomics panic outside `loom::model`.

#[cfg(loom)]
pub(crate) use loom::hint::spin_loop;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use std::hint::spin_loop;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
