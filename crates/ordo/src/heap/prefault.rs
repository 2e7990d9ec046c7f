//! Fresh slabs faulted in ahead of use, off the allocating thread.
//!
//! A region's memory costs nothing until touched; the first store to each of its pages then
//! takes a page fault in which the kernel zeroes the page (a 2 MiB huge page at once where
//! transparent huge pages are on). An insert-heavy workload adopts fresh slabs steadily, and
//! each adoption paid that fault on the committing thread: in TPC-C NewOrder+Payment on a
//! 2-vCPU VM, `clear_page_erms` under `Heap::reserve` was 23 % of the time at one thread.
//!
//! [`Prefaulter`] moves it to a background thread: when the allocator takes a fresh slab, it
//! asks for the slab [`PREFAULT_AHEAD_SLABS`] further down the fresh stack (the one it will take
//! that many adoptions later) to be faulted in with `MADV_POPULATE_WRITE`, which populates the
//! pages as a store would but writes nothing. So the prefault never changes what the slab holds
//! and may race freely with the allocator reaching the slab first: the kernel serializes the
//! two faults, and whichever comes second finds the page present.
//!
//! # Bounds
//! Requests go through a bounded queue ([`QUEUE_SLABS`]); a request that finds it full is
//! dropped (the slab then faults on first use, as without this), so the allocator never waits.
//! The thread holds a region's memory (an `Arc`) only while it advises it, and ends when the
//! heap drops its sender.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

use super::memory::RegionMemory;

/// How many slabs ahead of the allocator the prefaulter works.
pub(crate) const PREFAULT_AHEAD_SLABS: usize = 4;

/// Requests the queue holds before new ones are dropped.
const QUEUE_SLABS: usize = 64;

/// One request: `len_bytes` of `memory` from `offset_bytes`.
struct Request {
    memory: Arc<RegionMemory>,
    offset_bytes: usize,
    len_bytes: usize,
}

/// The handle the heap keeps: a sender to the background thread and its counters.
pub(crate) struct Prefaulter {
    tx: SyncSender<Request>,
    counts: Arc<Counts>,
}

/// What the prefaulter did.
#[derive(Default)]
struct Counts {
    /// Requests carried out.
    done: AtomicU64,
    /// Requests dropped because the queue was full.
    dropped: AtomicU64,
}

impl Prefaulter {
    /// Starts the background thread; `None` when it cannot be started (then nothing is
    /// prefaulted and slabs fault on first use).
    pub(crate) fn start() -> Option<Self> {
        let (tx, rx) = sync_channel(QUEUE_SLABS);
        let counts = Arc::new(Counts::default());
        let thread_counts = counts.clone();
        std::thread::Builder::new()
            .name("ordo-prefault".into())
            .spawn(move || run(&rx, &thread_counts))
            .ok()?;
        Some(Prefaulter { tx, counts })
    }

    /// Asks for `len_bytes` of `memory` from `offset_bytes` to be faulted in; never blocks.
    pub(crate) fn request(&self, memory: Arc<RegionMemory>, offset_bytes: usize, len_bytes: usize) {
        match self.tx.try_send(Request { memory, offset_bytes, len_bytes }) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                // Relaxed: a statistic.
                self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            }
            // The thread is gone (it never panics, but if it did): slabs fault on first use.
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Requests carried out so far.
    #[cfg(test)]
    pub(crate) fn done(&self) -> u64 {
        // Relaxed: a statistic; tests that read it wait for it to grow.
        self.counts.done.load(Ordering::Relaxed)
    }
}

fn run(rx: &Receiver<Request>, counts: &Counts) {
    // Ends when the heap drops its sender.
    while let Ok(Request { memory, offset_bytes, len_bytes }) = rx.recv() {
        memory.prefault(offset_bytes, len_bytes);
        // Relaxed: a statistic.
        counts.done.fetch_add(1, Ordering::Relaxed);
    }
}
