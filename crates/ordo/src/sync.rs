//! The atomics the engine's concurrency cores use, switched to `loom`'s under `--cfg loom` so the
//! header protocol and the bitmap run unchanged inside loom models (STYLE: one `sync` module).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering, fence};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering, fence};
