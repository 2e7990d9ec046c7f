//! # Read-log-update on any clock (RLU, SOSP'15; RLU^ORDO, ORDO §4.1 and Fig. 7)
//!
//! RLU lets readers traverse a linked structure without locks or retries while writers update
//! it: a writer *locks* each object it changes, works on a private **copy** in its per-thread
//! write log, and at commit draws a **write clock** that splits time into the old and the new
//! snapshot. A reader records its **local clock** when its section starts; on meeting an object
//! locked by another thread it **steals** the copy when its local clock is certainly after that
//! writer's write clock, and reads the original otherwise. Before the writer copies its log back
//! over the originals it **synchronizes**: it waits for every reader that was active when it
//! committed and did not start certainly after its write clock — exactly the readers that may
//! be reading the originals.
//!
//! The runtime is generic over [`ordo_clock::Clock`]:
//!
//! * with [`ordo_clock::LogicalClock`] it is the original RLU: the local clock is the global
//!   counter, the write clock is its value at commit and committing advances the counter with
//!   one `fetch_add` (Fig. 7 lines 6, 27–28);
//! * with [`ordo_clock::OrdoClock`] it is RLU^ORDO: the local clock is an ORDO reading
//!   (`get_time`, line 7), both tests use `cmp_time` (lines 21 and 50), and commit uses
//!   `new_time` with the **extra `ORDO_BOUNDARY`** (line 30).
//!
//! ## The protocol, and why the extra boundary is needed
//!
//! Write `B` for the clock's boundary (0 for the logical clock) and read a stored clock value
//! `t` as the reading `[t, t + B]`. "Certainly after" is `cmp_time == After`: `a > w + B`.
//!
//! * **Reader lock**: publish `local = PENDING`, make the run count odd, `fence(SeqCst)`, take
//!   `r = now().lo`, publish `local = r`, `fence(SeqCst)`.
//! * **Dereference** of an object locked by thread `w` with write clock `wc`: `wc = INF` (not
//!   committing) → original; `wc = BLOCK` (committing, clock not yet drawn) → wait for the value;
//!   otherwise steal iff `r > wc + B`. The header is re-read after copying the fields, so a copy
//!   from a section that has since ended (or aborted) is never returned.
//! * **Commit**: the writer first ends its read section (so committers never wait for one
//!   another), then `wc = BLOCK`, `fence(SeqCst)`, `w = now().lo`, `wc = w`, then
//!   `new_time(w + 2B)`: it spins until its own reading is past `w + 2B`, so global time has
//!   passed `w + 2B` (an exact clock — the logical counter — cannot pass a value by itself, so
//!   there the writer calls `get_ts` until it returns more than `w`: one `fetch_add`). Then it
//!   takes the run-count snapshot, waits for the readers as above, writes back, unlocks, sets
//!   `wc = INF` and switches to its other log.
//!
//! Two facts make this sound (given the hardware assumption that the `SeqCst` fence order
//! agrees with real time, the assumption every clock-based protocol in Ordo makes):
//!
//! 1. *No reader steals from a commit whose start it could not see.* A reader whose last fence
//!    comes before the writer's `BLOCK` fence read its clock before the writer did, so
//!    `r ≤ true time ≤ w + B`: it never steals from this commit (and the writer waits for it).
//!    A reader fenced after it sees `BLOCK` or `w` on every locked object of the commit, so it
//!    decides the same way for all of them.
//! 2. *Every reader the writer does not wait for steals.* A reader not active at the snapshot
//!    read its clock after the wait, when global time exceeded `w + 2B`; its reading lags
//!    global time by at most `B`, so `r > w + B`: it steals.
//!
//! Fact 2 is where ORDO's extra boundary goes. With only `new_time(w + B)` — the bare
//! `new_time` of the write clock — global time has passed only `w + B`, and a reader whose
//! counter lags by up to `B` (within the claimed boundary!) can start after the snapshot with
//! `w < r ≤ w + B`: it neither steals nor is waited for, and reads the originals while the
//! writer overwrites them, after an earlier reader already saw the new values. The negative
//! test in `tests/rlu/rlu_shortcuts.rs` scripts exactly that and `ordo-check` rejects the history.
//!
//! *Deviation from Fig. 7.* The figure stores as write clock the reading that `new_time`
//! returns. Fact 2 would then need `r > wc + B` for readers starting right after, which a reader
//! lagging by `B` does not have; storing the reading taken *before* the wait keeps the figure's
//! three changes (ORDO reading at lock, `cmp_time` in dereference and synchronize, `new_time`
//! with an extra boundary at commit) and makes fact 2 hold.
//!
//! ## Objects and memory
//!
//! Objects are nodes of a fixed-capacity arena addressed by [`NodeId`], each three data words
//! (`key`, `next`, `aux`) and a header word, all atomics: the runtime has no `unsafe` code. A
//! header is 0 when unlocked, otherwise it names the owner thread, the log and slot of the copy
//! and the owner's section number (kept per thread id across handles, so a header is never
//! reused while anybody could still hold it). A stealing reader copies the fields out and then
//! re-reads the header: only if it is unchanged — the same section still holds the lock, and
//! its copies are final once its write clock is published — is the copy returned. Copies live
//! in two logs per thread, used alternately, so a live handle reuses a log only after the next
//! commit's synchronize. A *new* handle that takes over a dropped handle's thread id starts on
//! log 0 with no synchronize in between, so it may overwrite a slot a reader is about to steal
//! from: the header re-check is what keeps that copy from being returned (the removal test in
//! `tests/rlu/rlu_mechanisms.rs` scripts it). Nodes freed in a section are recycled only after the
//! commit that publishes the unlinking *and* the next commit of the same thread (or a full
//! grace period when the thread handle is dropped); one synchronize already suffices, since
//! readers that steal never reach an unlinked node. A node recycled earlier — before the
//! synchronize — could be rewritten under a reader that still holds a link to it
//! (`tests/rlu/rlu_mechanisms.rs`).
//!
//! ## Deferral (RLU §3.7), off by default
//!
//! With [`RluOptions::defer_limit`] `= Some(n)` a writer section does not commit when it ends:
//! its objects stay locked, its copies stay in the current log, and the thread goes on to its
//! next section, which sees its own deferred copies (the header names the owner). Others read
//! the originals (the write clock stays `INF`), so a deferred write becomes visible to other
//! threads only at the commit that publishes it. That commit is the ordinary one above — the
//! same `BLOCK`, write clock, `new_time(w + 2B)` and synchronize, over either clock — and
//! publishes every deferred section at once: one synchronize for up to `n` writer sections.
//! It happens, always outside a section, when
//!
//! * `n` writer sections are pending (the defer limit);
//! * another writer found one of the thread's locked objects: it sets the owner's **sync
//!   request** flag, aborts and retries; the owner checks the flag at every section boundary
//!   (before each attempt and after each section) and commits. A thread that stopped running
//!   sections does not see requests: call [`RluThread::flush`] before going idle (dropping the
//!   handle flushes);
//! * a section needs an object locked by one of the thread's own *deferred* sections (an
//!   aborted attempt could not undo a change to that copy), or its log is full: the attempt is
//!   aborted, the deferred writes are committed, and the section is retried.
//!
//! An aborted attempt unlocks only its own locks and drops only its own frees; `write` and
//! `free` accept only objects locked in the current section. Nothing waits while holding a
//! section open except on a `BLOCK` write clock, so crossed requests cannot deadlock: each
//! side aborts, and commits at its next attempt.
//!
//! *What deferral relaxes.* An update returns before others can see it. A history is
//! linearizable when each operation of a thread with deferred writes is taken to complete at
//! the commit that publishes them — `tests/rlu/rlu_defer.rs` records it that way and checks it
//! with `ordo-check` on every clock. Without that (stamping completion when the call returns)
//! a later reader on another thread may miss an update that has returned: RLU's deferral trades
//! real-time order for fewer synchronizes, as in the RLU paper.

#[cfg(not(loom))]
pub mod hashset;
mod runtime;

pub use runtime::{NodeId, NodeValue, Rlu, RluError, RluOptions, RluStats, RluThread, Section};
#[cfg(feature = "shortcuts")]
pub use runtime::{RluShortcuts, RluStep};
