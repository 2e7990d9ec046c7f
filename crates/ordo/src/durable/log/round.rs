//! Sync-mode group commit: the durable marker and the rounds that advance it.
//!
//! # The marker (sync mode)
//! A committer publishes a lower bound `lower` of its write timestamp in its slot *before*
//! drawing `wts` (FaRMv2's `get_ts`), stages its record under its locks, then stores
//! `appended = wts` and clears `lower`. A round (run by one committer, the leader, under
//! `sync_lock`) computes the marker
//!
//! ```text
//! A: M = max over slots of appended          (records already staged)
//!    fence(SeqCst)                            (pairs with one after publishing lower)
//! B: for every slot: lower;   D = min(M, min(lower) - 1)
//! ```
//!
//! **Claim** (proved in [`crate::durable::marker`], model-checked by `tests/loom_marker.rs`): every
//! record with `wts <= D` was staged before B read its slot, so the runs the leader takes from
//! the stream after B hold it. Hence also: every record staged after the leader took the runs
//! is above `D`, and every record written after a marker `D` in the stream is above `D`.
//!
//! The leader then takes every staged run, appends a marker record `D` to the stream behind
//! them, writes the runs (usually one: the stream's next bytes), and issues **one
//! `fdatasync` per segment with unsynced writes** (usually one). Committers return once the
//! in-memory marker, published after the flush, covers their `wts`.
//!
//! A round may span chunks (and so segments), and the device persists unsynced pages in any
//! order, so the marker can reach the disk before records it covers. Recovery therefore
//! trusts a marker only when (1) it lies inside the valid prefix of its own chunk — which
//! covers the round's records before it in that chunk — and (2) every other chunk the round
//! wrote to, which the marker names as its **frontier** (`(segment, chunk, end)`), has a
//! valid prefix reaching the named end (a chunk of a segment that no longer exists was
//! deleted by a checkpoint, so all its records are at or below C). A record with `wts <= D`
//! was written by this round (before the marker in its chunk, or in a frontier chunk) or by
//! an earlier round whose flush completed. So a trusted marker `D` implies every record at or
//! below `D` is on the disk, and a completed round leaves a trusted marker.
//!
//! `tests/durable/durable_group.rs` scripts the crash states of a round spanning chunks and
//! segments (the marker flushed, a frontier chunk's records not) and fails with the frontier
//! check removed; `tests/durable/durable_power.rs` cuts power at random points with and
//! without random unsynced writes kept.
//!
//! # Batching
//! A waiting committer leads a round when `sync_lock` is free, otherwise it sleeps until a
//! round ends (or `WAIT_SLICE`). Committers that stage while a flush is in flight are
//! covered by the next round together. With `group_wait` (250 us by default) a leader first
//! waits, bounded, for the committers the previous round released (`gather`): closed-loop
//! threads then share every flush instead of alternating between two half-full rounds.
//! A commit that does not wait (`Options::wait_durable = false`) is made durable by the next
//! round: another committer's, or the checkpointer's, which runs one before each checkpoint.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::durable::format::{self, KIND_MARKER, SEGMENT_HEADER_BYTES};
use crate::durable::{DurableError, Mode};

use super::segment::Segment;
use super::stream::ChunkEnd;
use super::{Log, WAIT_SLICE, lock};

/// Bytes of a marker record naming `frontier` chunks.
fn marker_len(frontier: usize) -> usize {
    format::RECORD_HEADER_BYTES + frontier * (format::ENTRY_HEADER_BYTES + 16)
}

impl Log {
    /// Step before `get_ts`: publish a lower bound of the coming write timestamp (the marker
    /// and the process-mode checkpoint bound stay below it until the record is appended).
    #[inline]
    pub(crate) fn publish_lower(&self, slot: usize, lower: u64) {
        self.marks.publish_lower(slot, lower);
    }

    /// The commit published a lower bound but will not append (it aborted).
    #[inline]
    pub(crate) fn clear_lower(&self, slot: usize) {
        self.marks.clear_lower(slot);
    }

    /// Waits until the marker covers `ts` (sync mode), leading rounds when nobody else does;
    /// `slot` is the waiting committer's (`None`: not a committer, its rounds do not gather).
    pub(crate) fn wait_durable(&self, slot: Option<usize>, ts: u64) -> Result<(), DurableError> {
        if self.mode != Mode::Sync {
            return Ok(());
        }
        loop {
            self.check_poison()?;
            if self.marker() >= ts {
                return Ok(());
            }
            if let Ok(mut scratch) = self.sync_lock.try_lock() {
                if let Some(me) = slot {
                    self.gather(me);
                }
                let progressed = self.round(&mut scratch);
                drop(scratch);
                drop(lock(&self.wake.0));
                self.wake.1.notify_all();
                if !progressed? {
                    // A committer between its timestamp and its append holds the marker back.
                    std::thread::yield_now();
                }
                continue;
            }
            let g = lock(&self.wake.0);
            if self.marker() >= ts {
                return Ok(());
            }
            let _ = self.wake.1.wait_timeout(g, WAIT_SLICE);
        }
    }

    /// Leader/follower batching: before a round, the leader waits (blocked, woken by each
    /// append, at most half the last flush and `group_wait`) until every other committer the
    /// previous round released has appended its next record. Closed-loop committers then share
    /// every flush instead of alternating between two half-full rounds; a committer that stops
    /// committing costs one bounded wait, once. Only a heuristic: correctness does not depend
    /// on it.
    fn gather(&self, me: usize) {
        let k = self.completed.load(Ordering::Relaxed);
        let budget =
            Duration::from_nanos(self.flush_ns.load(Ordering::Relaxed) / 2).min(self.group_wait);
        if k == 0 || budget.is_zero() {
            return;
        }
        let missing = || {
            self.slots.iter().enumerate().any(|(i, s)| {
                i != me
                    && s.released.load(Ordering::Relaxed) == k
                    && self.marks.appended_of(i) <= s.covered.load(Ordering::Relaxed)
            })
        };
        if !missing() {
            return;
        }
        let deadline = Instant::now() + budget;
        // SeqCst: pairs with append_tx's SeqCst load.
        self.gathering.store(true, Ordering::SeqCst);
        let mut g = lock(&self.gather_wake.0);
        while missing() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            g = match self.gather_wake.1.wait_timeout(g, deadline - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        drop(g);
        self.gathering.store(false, Ordering::Relaxed);
    }

    /// One round: see the module docs. Returns whether the marker advanced.
    fn round(&self, seen: &mut [u64]) -> Result<bool, DurableError> {
        self.stats.rounds.fetch_add(1, Ordering::Relaxed);
        // A and B (`crate::durable::marker`).
        let d = self.marks.bound(self.shortcuts.ignore_pending, Some(seen));
        if d <= self.marker() {
            return Ok(false);
        }
        // C. Take every staged run (all records with wts <= D among them, by the claim) and
        // put the marker behind them, naming the other chunks the round writes to.
        let runs = {
            let mut st = lock(&self.stream);
            let mut touched: Vec<ChunkEnd> = Vec::new();
            for r in &st.runs {
                let e = r.end();
                match touched.last_mut() {
                    Some(t) if (t.seq, t.chunk) == (e.seq, e.chunk) => *t = e,
                    _ => touched.push(e),
                }
            }
            let current = st.at.as_ref().map(|(seg, chunk)| (seg.header.seq, *chunk));
            let here = touched.iter().filter(|t| Some((t.seq, t.chunk)) != current).count();
            if !st.fits(marker_len(here), self.chunk_bytes)
                && let Err(e) = self.next_stream_chunk(&mut st)
            {
                return self.poison(e);
            }
            let current = st.at.as_ref().map(|(seg, chunk)| (seg.header.seq, *chunk));
            let mut m = std::mem::take(&mut st.marker);
            m.begin(KIND_MARKER, d);
            for f in touched.iter().filter(|t| Some((t.seq, t.chunk)) != current) {
                m.entry_words(f.seq, [u64::from(f.chunk), u64::from(f.end_bytes)]);
            }
            let rec = m.finish();
            debug_assert!(
                st.fits(rec.len(), self.chunk_bytes),
                "the round's marker fits its chunk"
            );
            st.push(rec, d);
            st.marker = m;
            std::mem::take(&mut st.runs)
        };
        // D. Write the runs in stream order: usually one `pwrite` of the records and the marker.
        let mut written = Ok(());
        for r in &runs {
            if written.is_err() {
                break;
            }
            let offset = SEGMENT_HEADER_BYTES
                + u64::from(r.chunk) * u64::from(self.chunk_bytes)
                + u64::from(r.start_bytes);
            written = r.seg.file.write_at(&r.bytes, offset).map_err(|source| DurableError::Io {
                op: "write",
                path: r.seg.path.clone(),
                source,
            });
            self.stats.records.fetch_add(r.records, Ordering::Relaxed);
            self.stats.bytes.fetch_add(r.bytes.len() as u64, Ordering::Relaxed);
            // Release: pairs with the Acquire load in Segment::sync (the pwrite is done).
            r.seg.dirty.fetch_add(1, Ordering::Release);
        }
        {
            let mut st = lock(&self.stream);
            for mut r in runs {
                r.bytes.clear();
                st.spare.push(r.bytes);
            }
        }
        if let Err(e) = written {
            return self.poison(e);
        }
        // E. One fdatasync per segment with unsynced appends: usually a single one, covering
        // every thread's records and the marker at once.
        let segs: Vec<Arc<Segment>> = lock(&self.segments).clone();
        let flush_start = Instant::now();
        for seg in &segs {
            if let Err(e) = seg.sync(&self.stats) {
                return self.poison(e);
            }
        }
        self.flush_ns.store(flush_start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        let k = self.completed.load(Ordering::Relaxed) + 1;
        self.completed.store(k, Ordering::Relaxed);
        for (i, s) in self.slots.iter().enumerate() {
            if seen[i] > s.covered.load(Ordering::Relaxed) {
                s.released.store(k, Ordering::Relaxed);
            }
            s.covered.store(seen[i], Ordering::Relaxed);
        }
        // Rounds run one at a time (under `sync_lock`), and this one found `d` above it.
        debug_assert!(self.marker() < d, "the durable marker only grows");
        // Release: pairs with marker()'s Acquire; waiters see a flushed marker only.
        self.marker.fetch_max(d, Ordering::Release);
        Ok(true)
    }

    /// Sync mode: runs one round unless a leader is running one, so that commits which did
    /// not wait become durable (the checkpointer, before each checkpoint). Never waits for a
    /// committer that holds the marker back.
    pub(crate) fn round_once(&self) -> Result<(), DurableError> {
        if self.mode != Mode::Sync {
            return Ok(());
        }
        self.check_poison()?;
        if let Ok(mut scratch) = self.sync_lock.try_lock() {
            let r = self.round(&mut scratch);
            drop(scratch);
            drop(lock(&self.wake.0));
            self.wake.1.notify_all();
            r?;
        }
        Ok(())
    }

    /// Makes every record staged so far durable (sync mode; a no-op otherwise), waiting for
    /// committers in flight: at close.
    pub(crate) fn sync_appended(&self) -> Result<(), DurableError> {
        self.wait_durable(None, self.marks.max_appended())
    }

    /// A timestamp X such that every record with `wts <= X` has been written to its segment:
    /// the marker's A/B computation without the flush (see the module docs).
    pub(crate) fn appended_bound(&self) -> u64 {
        self.marks.bound(false, None)
    }
}
