//! # ordo-testalloc — the largest allocation a test made
//!
//! Tests that feed decoders hostile lengths (a frame header claiming 4 GiB, a record claiming
//! a whole chunk) must show that nothing is allocated in proportion to the claim. A test binary
//! installs [`Largest`] as its global allocator:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: ordo_testalloc::Largest = ordo_testalloc::Largest;
//! ```
//!
//! and reads [`largest_bytes`] after the hostile input (or wraps it in [`measured`]). The
//! record is process-wide: tests of one binary that measure must not overlap (serialize them,
//! or compare against a bound no honest allocation of any test reaches).
//!
//! This crate is the only place the workspace implements `GlobalAlloc`: every method forwards
//! to [`System`] unchanged and adds one relaxed atomic `fetch_max`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

static LARGEST_ALLOCATION_BYTES: AtomicUsize = AtomicUsize::new(0);

/// [`System`], recording the size of the largest allocation or reallocation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Largest;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; recording
// the size is one atomic operation and allocates nothing.
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // Relaxed: a statistic, read after the measured code ran on this or a joined thread.
        LARGEST_ALLOCATION_BYTES.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which `System` shares.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` (through this allocator) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Relaxed: as in `alloc`.
        LARGEST_ALLOCATION_BYTES.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: as for `dealloc`; `new_size` comes from the caller under the same contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// The largest allocation since the process started or the last [`reset`], in bytes. Zero
/// unless [`Largest`] is the global allocator.
pub fn largest_bytes() -> usize {
    LARGEST_ALLOCATION_BYTES.load(Ordering::Relaxed)
}

/// Forgets the allocations so far.
pub fn reset() {
    LARGEST_ALLOCATION_BYTES.store(0, Ordering::Relaxed);
}

/// Runs `f` and returns its result with the largest allocation made meanwhile (by any thread).
pub fn measured<T>(f: impl FnOnce() -> T) -> (T, usize) {
    reset();
    let t = f();
    (t, largest_bytes())
}
