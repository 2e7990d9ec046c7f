//! The atomics RLU's runtime uses, switched to `loom`'s under `--cfg loom` so the header / copy /
//! write-clock protocol runs unchanged inside the loom models of `tests/loom_rlu.rs` (STYLE: one
//! `sync` module).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
