//! Old versions (FaRMv2 §4.4–4.5): copies of head versions, kept so that transactions with an
//! older read timestamp can still read a consistent snapshot.
//!
//! When a committing transaction locks an object in multi-version mode it copies the head version
//! (header, length, payload) into old-version memory and, at install, points the new head's
//! old-version pointer (OVP) at the copy. Each object's versions thus form a list in decreasing
//! timestamp order. A reader whose `rts` is older than the head walks the list to the newest
//! version `<= rts`; if the list ends first the read aborts (the history was truncated or never
//! existed).
//!
//! Old-version memory comes in 1 MiB **blocks** (FaRMv2 §4.5). A worker owns one active block and
//! bump-allocates copies in it: one comparison and one addition. Each block records its **GC
//! time**, the largest write timestamp of the transactions whose copies it holds (the moment
//! those copies stopped being heads). When a worker's block is full it is *retired*; the GC
//! (`crate::gc`) recycles a retired block whole once its GC time is below the GC safe point,
//! since every reader with `rts >= GC` stops at a newer version before reaching it (FaRMv2 §4.5).
//! Recycled blocks are filled with a poison pattern, so a reader that reaches one anyway (a GC
//! bug; the negative test provokes it) gets [`Recycled`] instead of silently reading garbage.
//!
//! Old-version memory is bounded by `blocks_max`. When no block is free, the commit applies the
//! budget policy of FaRMv2 §5.3 ([`BudgetPolicy`]): wait for the GC, abort, or truncate the
//! object's history (the new head keeps no old version; older readers of that object abort).
//!
//! # Layout of a copy
//! ```text
//! word 0: header of the copied version (ALLOC | ts; never LOCK)
//! word 1: 63..40 payload length in bytes | 39..0 OVP of the next older copy (0 = end)
//! word 2.. payload
//! ```
//! An OVP is `block << 17 | word offset`; block ids start at 1 so that 0 means "none".
//!
//! # Invariants
//! * A copy is written completely before the `Release` store that installs the head pointing at
//!   it; readers reach it only through that head (or an older copy), so they see it complete.
//! * Copies are immutable until their block is recycled.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use ordo_clock::Timestamp;

use crate::heap::memory::RegionMemory;
use crate::object::{HEADER_WORDS, Header, ObjectRef};

/// Words in one old-version block (1 MiB).
pub(crate) const BLOCK_WORDS: usize = 1 << 17;
const OFFSET_BITS: u32 = 17;
/// The largest block id an OVP can name.
const BLOCK_ID_MAX: usize = (1 << (40 - OFFSET_BITS)) - 1;

const _: () = assert!(BLOCK_WORDS == 1 << OFFSET_BITS);
/// The largest object (header + 256 KiB) fits a block.
const _: () = assert!(HEADER_WORDS + crate::heap::OBJECT_BYTES_MAX / 8 <= BLOCK_WORDS);

struct Block {
    memory: RegionMemory,
    /// Largest write timestamp whose copies this block holds (its GC time).
    gc_ts: AtomicU64,
}

/// A word no copy ever starts with: LOCK and ALLOC set together never occur in a copy.
pub(crate) const POISON: u64 = 0xF0F0_DEAD_F0F0_DEAD;
const _: () = assert!(POISON & crate::object::LOCK_BIT != 0);

/// What a commit does when old-version memory is exhausted (FaRMv2 §5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum BudgetPolicy {
    /// Wait (bounded by `BLOCK_WAIT_MAX`) for the GC to recycle a block, then abort.
    #[default]
    Block,
    /// Abort the committing transaction at once.
    Abort,
    /// Keep going without an old version: the object's history is truncated.
    Truncate,
}

impl std::str::FromStr for BudgetPolicy {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "block" => Ok(BudgetPolicy::Block),
            "abort" => Ok(BudgetPolicy::Abort),
            "truncate" => Ok(BudgetPolicy::Truncate),
            _ => Err(crate::Error::Config(format!(
                "unknown budget policy {s:?}; expected block, abort or truncate"
            ))),
        }
    }
}

/// The longest a committer waits for old-version memory under [`BudgetPolicy::Block`].
pub const BLOCK_WAIT_MAX: std::time::Duration = std::time::Duration::from_millis(50);

/// A worker's active block and bump pointer, plus blocks it filled during the commit in
/// progress: those are retired only when that commit has finished (`finish_commit`), because
/// until then their GC time does not yet cover the copies just made in them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cursor {
    block: u32,
    next_word: u32,
    filled: Vec<u32>,
}

/// A reader reached a recycled block: the GC safe point passed a snapshot still in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Recycled;

/// All old-version memory of a database.
pub(crate) struct VersionArena {
    blocks: Box<[OnceLock<Block>]>,
    policy: BudgetPolicy,
    /// Whether new blocks ask for transparent huge pages, as the heap's regions do
    /// ([`crate::heap::HeapConfig::huge_pages`]).
    huge_pages: bool,
    pools: Mutex<Pools>,
    truncations: AtomicU64,
    recycled: AtomicU64,
}

#[derive(Default)]
struct Pools {
    /// Next never-used block id.
    next: usize,
    /// Full blocks waiting for the safe point.
    retired: Vec<u32>,
    /// Recycled blocks ready for reuse.
    free: Vec<u32>,
}

/// A copy found by [`VersionArena::find`].
pub(crate) struct OldVersion {
    pub(crate) header: Header,
    pub(crate) len_bytes: usize,
}

/// Old-version memory counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VersionStats {
    /// Blocks ever mapped.
    pub blocks_mapped: usize,
    /// Blocks retired and waiting for the GC safe point.
    pub blocks_retired: usize,
    /// Blocks recycled and ready for reuse.
    pub blocks_free: usize,
    /// Blocks recycled so far.
    pub blocks_recycled: u64,
    /// Object histories truncated for lack of memory.
    pub truncations: u64,
}

impl VersionArena {
    /// An arena of at most `blocks_max` blocks.
    pub(crate) fn new(blocks_max: usize, policy: BudgetPolicy, huge_pages: bool) -> Self {
        let blocks_max = blocks_max.min(BLOCK_ID_MAX);
        VersionArena {
            blocks: (0..=blocks_max).map(|_| OnceLock::new()).collect(),
            policy,
            huge_pages,
            pools: Mutex::new(Pools { next: 1, ..Pools::default() }),
            truncations: AtomicU64::new(0),
            recycled: AtomicU64::new(0),
        }
    }

    fn block(&self, id: u32) -> Option<&Block> {
        self.blocks.get(id as usize)?.get()
    }

    fn pools(&self) -> std::sync::MutexGuard<'_, Pools> {
        self.pools.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counters for reports and tests.
    pub(crate) fn stats(&self) -> VersionStats {
        let p = self.pools();
        VersionStats {
            blocks_mapped: p.next - 1,
            blocks_retired: p.retired.len(),
            blocks_free: p.free.len(),
            blocks_recycled: self.recycled.load(Ordering::Relaxed),
            truncations: self.truncations.load(Ordering::Relaxed),
        }
    }

    /// A free block: recycled if any, else newly mapped within the budget.
    fn take_block(&self) -> Option<u32> {
        let mut p = self.pools();
        if let Some(id) = p.free.pop() {
            return Some(id);
        }
        let id = p.next;
        if id >= self.blocks.len() {
            return None;
        }
        let memory = RegionMemory::anonymous(BLOCK_WORDS * 8, self.huge_pages).ok()?;
        if self.blocks[id].set(Block { memory, gc_ts: AtomicU64::new(0) }).is_err() {
            return None;
        }
        p.next += 1;
        Some(id as u32)
    }

    /// Gives up the worker's blocks (the worker is going away). No commit is in progress.
    pub(crate) fn retire(&self, cursor: &RefCell<Cursor>) {
        let mut c = cursor.borrow_mut();
        let mut p = self.pools();
        p.retired.append(&mut c.filled);
        if c.block != 0 {
            p.retired.push(c.block);
        }
        *c = Cursor::default();
    }

    /// Retires the blocks filled during the commit that just finished (committed or aborted):
    /// every copy in them now has its final GC time.
    pub(crate) fn finish_commit(&self, cursor: &RefCell<Cursor>) {
        let mut c = cursor.borrow_mut();
        if !c.filled.is_empty() {
            self.pools().retired.append(&mut c.filled);
        }
    }

    /// Copies the locked head of `obj` (whose unlocked header was `head`) into the worker's block.
    /// Returns the copy's OVP; `Ok(0)` when the history was truncated; `Err(())` when the policy
    /// says to abort.
    pub(crate) fn copy_head(
        &self,
        cursor: &RefCell<Cursor>,
        obj: ObjectRef<'_>,
        head: Header,
    ) -> Result<u64, ()> {
        let words = HEADER_WORDS + obj.head_len_bytes().div_ceil(8);
        let mut c = cursor.borrow_mut();
        if c.block == 0 || c.next_word as usize + words > BLOCK_WORDS {
            if c.block != 0 {
                let full = c.block;
                c.filled.push(full);
                c.block = 0;
            }
            let block = match self.take_block() {
                Some(b) => b,
                None => match self.wait_for_block() {
                    Some(b) => b,
                    None if self.policy == BudgetPolicy::Truncate => {
                        self.truncations.fetch_add(1, Ordering::Relaxed);
                        return Ok(0);
                    }
                    None => return Err(()),
                },
            };
            c.block = block;
            c.next_word = 0;
        }
        let Some(block) = self.block(c.block) else { return Err(()) };
        let start = c.next_word as usize;
        let dst = &block.memory.words()[start..start + words];
        obj.copy_locked_head(head, dst);
        c.next_word = (start + words) as u32;
        Ok(((c.block as u64) << OFFSET_BITS) | start as u64)
    }

    fn wait_for_block(&self) -> Option<u32> {
        if self.policy != BudgetPolicy::Block {
            return None;
        }
        let deadline = std::time::Instant::now() + BLOCK_WAIT_MAX;
        while std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_micros(100));
            if let Some(b) = self.take_block() {
                return Some(b);
            }
        }
        None
    }

    /// Raises the GC time of the block holding `ovp` to `wts` (its copy stopped being a head).
    pub(crate) fn note_commit(&self, ovp: u64, wts: Timestamp) {
        if let Some(b) = self.block((ovp >> OFFSET_BITS) as u32) {
            // Release: pairs with the Acquire load in collect(); a block is retired by its owner
            // after every commit that wrote into it, so the GC sees the final GC time.
            b.gc_ts.fetch_max(wts.as_nanos(), Ordering::Release);
        }
    }

    /// Recycles every retired block whose GC time is below `safe`; returns how many.
    pub(crate) fn collect(&self, safe: Timestamp) -> usize {
        let ready: Vec<u32> = {
            let mut p = self.pools();
            let (ready, keep): (Vec<u32>, Vec<u32>) = p.retired.iter().partition(|id| {
                self.block(**id).is_some_and(|b| b.gc_ts.load(Ordering::Acquire) < safe.as_nanos())
            });
            p.retired = keep;
            ready
        };
        for id in &ready {
            if let Some(b) = self.block(*id) {
                // Relaxed: nobody may read a recycled block; the poison is a tripwire for bugs.
                for w in b.memory.words() {
                    w.store(POISON, Ordering::Relaxed);
                }
                b.gc_ts.store(0, Ordering::Relaxed);
            }
        }
        let n = ready.len();
        self.recycled.fetch_add(n as u64, Ordering::Relaxed);
        self.pools().free.extend(ready);
        n
    }

    /// Walks the list starting at `ovp` to the newest copy with timestamp `<= rts`, copying its
    /// payload into `out`. `Ok(None)` when the list ends first.
    pub(crate) fn find(
        &self,
        mut ovp: u64,
        rts: Timestamp,
        out: &mut Vec<u64>,
    ) -> Result<Option<OldVersion>, Recycled> {
        while ovp != 0 {
            let Some(block) = self.block((ovp >> OFFSET_BITS) as u32) else { return Err(Recycled) };
            let start = (ovp & (BLOCK_WORDS as u64 - 1)) as usize;
            let words = block.memory.words();
            // Relaxed loads: copies are immutable and were published by the Release store of a
            // head this reader acquired (see the module invariants).
            let raw = words.get(start).ok_or(Recycled)?.load(Ordering::Relaxed);
            let header = Header::from_raw(raw);
            if header.is_locked() {
                return Err(Recycled); // poison: copies are never locked
            }
            let w1 = words.get(start + 1).ok_or(Recycled)?.load(Ordering::Relaxed);
            let (len_bytes, next) = crate::object::split_word1(w1);
            if header.ts() <= rts {
                let payload = words
                    .get(start + HEADER_WORDS..start + HEADER_WORDS + len_bytes.div_ceil(8))
                    .ok_or(Recycled)?;
                out.clear();
                out.extend(payload.iter().map(|w| w.load(Ordering::Relaxed)));
                return Ok(Some(OldVersion { header, len_bytes }));
            }
            ovp = next;
        }
        Ok(None)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::object::{Expect, ObjectRef};

    fn ts(n: u64) -> Timestamp {
        Timestamp::from_nanos(n)
    }

    /// A block filled by copies of a commit still in progress has GC time 0 until the commit
    /// sets it; it must not be recycled before the commit finishes, however far the safe point.
    /// (This fails if `copy_head` retires a full block at once instead of via `finish_commit`.)
    #[test]
    fn a_block_filled_mid_commit_is_recycled_only_after_the_commit() {
        let arena = VersionArena::new(4, BudgetPolicy::Abort, true);
        let cursor = RefCell::new(Cursor::default());
        // A quarter-block payload: three copies fit in a block, the fourth opens another.
        let payload_words = BLOCK_WORDS / 4;
        let words: Vec<AtomicU64> =
            (0..HEADER_WORDS + payload_words).map(|_| AtomicU64::new(0)).collect();
        let obj = ObjectRef::new(&words);
        let free = obj.try_lock(Expect::Free).unwrap();
        assert!(!free.is_allocated());
        obj.install(ts(1), true, payload_words * 8, 0, &vec![7; payload_words]);
        let head = obj.try_lock(Expect::NotAfter(ts(1))).unwrap();
        let ovps: Vec<u64> = (0..5).map(|_| arena.copy_head(&cursor, obj, head).unwrap()).collect();
        assert_eq!(arena.stats().blocks_mapped, 2);
        // A GC round while the commit is in progress recycles nothing.
        assert_eq!(arena.collect(ts(1 << 60)), 0, "a block of an unfinished commit was recycled");
        let mut out = Vec::new();
        let copy = arena.find(ovps[0], ts(1), &mut out).unwrap().unwrap();
        assert_eq!(copy.header.ts(), ts(1));
        assert!(out.iter().all(|w| *w == 7));
        // The commit sets the GC times, then finishes: the full block is retired.
        for ovp in &ovps {
            arena.note_commit(*ovp, ts(2));
        }
        arena.finish_commit(&cursor);
        assert_eq!(arena.collect(ts(2)), 0, "GC time 2 is not below safe point 2");
        assert_eq!(arena.collect(ts(3)), 1);
        assert!(arena.find(ovps[0], ts(1), &mut out).is_err(), "a recycled block is poisoned");
        obj.unlock(head);
    }
}
