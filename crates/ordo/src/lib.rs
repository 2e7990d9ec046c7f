//! # ordo — the engine
//!
//! A heap of versioned objects and transactions over it that are strictly serializable and
//! opaque, ordered by the time of an [`ordo_clock::Clock`] (FaRMv2 Alg. 2 on one machine).
//!
//! * [`heap`] — regions, 1 MiB slabs of one size class, thread-owned allocation, stable [`Addr`]s.
//! * [`object`] — the 16-byte header and the seqlock-style read / lock / install protocol.
//! * [`txn`] — transactions: read timestamps, buffered writes, and the commit protocol in
//!   [`txn::commit`], talking to object owners through [`txn::participant::Participant`].
//! * [`Ordo`] — the embedded API: `run` with retry, explicit `begin`/`commit`, statistics.
//!
//! # Layers
//!
//! Modules depend only downward; each names only modules of the layers below its own
//! (`tests/engine/layering.rs` reads the sources and fails otherwise, so a cycle cannot come
//! back):
//!
//! 1. `sync` (the loom seam), `addr`, `le_bytes`, `gc` (the safe point, given closures);
//! 2. `bitmap`, [`object`], `mapping` (page-aligned memory), `error` (with
//!    [`durable::DurableError`], kept there so that [`Error::Durable`] needs nothing above);
//! 3. [`heap`] — a durable heap's region files come through its `RegionFiles` seam, which the
//!    durable layer implements;
//! 4. `mvcc` (old versions) and [`durable`] (files, logs, recovery);
//! 5. [`txn`] — read and write sets, participants (and the [`remote::Remote`] trait they
//!    call), commit, per-thread workers, and the engine state every transaction shares;
//! 6. [`remote`] — the cluster's wire types and serving tables;
//! 7. the database handle [`Ordo`] (configuration, retry, statistics, the `serve_*` family);
//! 8. [`map`], then [`tree`], then [`table`], on transactions alone.
//!
//! The ORDO applications that are not parts of the store — RLU, Oplog and the hash set of
//! Fig. 11 on RLU and on Ordo transactions — live in the `ordo-apps` crate, which uses only
//! this crate's public API.
//!
//! ```
//! use ordo::{Config, Ordo};
//! use ordo_clock::LogicalClock;
//!
//! let db = Ordo::with_clock(Config::default(), LogicalClock::new())?;
//! let account = db.run(|tx| tx.alloc(&100u64))?;
//! db.run(|tx| {
//!     let balance: u64 = tx.read(account)?;
//!     tx.write(account, &(balance - 30))
//! })?;
//! assert_eq!(db.run(|tx| tx.read::<u64>(account))?, 70);
//! # Ok::<(), ordo::Error>(())
//! ```

#[cfg(not(loom))]
mod addr;
/// Public only in the loom build, for its model of the bitmap (`tests/loom_object.rs`).
#[cfg(loom)]
pub mod bitmap;
#[cfg(not(loom))]
#[allow(unreachable_pub)] // its items are `pub` for the loom build above
mod bitmap;
#[cfg(not(loom))]
mod db;
#[cfg(not(loom))]
pub mod durable;
/// Under loom only the durable marker's bound is built, for its model (`tests/loom_marker.rs`).
#[cfg(loom)]
pub mod durable {
    pub mod marker;
}
#[cfg(not(loom))]
mod error;
#[cfg(not(loom))]
mod gc;
#[cfg(not(loom))]
pub mod heap;
#[cfg(not(loom))]
mod le_bytes;
#[cfg(not(loom))]
pub mod map;
#[cfg(not(loom))]
mod mapping;
#[cfg(not(loom))]
mod mvcc;
pub mod object;
#[cfg(not(loom))]
pub mod remote;
mod sync;
#[cfg(not(loom))]
pub mod table;
#[cfg(not(loom))]
pub mod tree;
#[cfg(not(loom))]
pub mod txn;

#[cfg(not(loom))]
pub use addr::Addr;
#[cfg(not(loom))]
pub use db::{
    Config, GC_INTERVAL_US_DEFAULT, Ordo, READ_LATEST_WAIT, SnapshotPin, Stats,
    THREADS_MAX_DEFAULT, VERSION_BLOCKS_MAX_DEFAULT, Versions,
};
#[cfg(not(loom))]
pub use error::{Abort, AbortKind, Error, ParticipantFailure, ParticipantStep};
#[cfg(not(loom))]
pub use gc::GcRound;
#[cfg(not(loom))]
pub use mvcc::{BLOCK_WAIT_MAX, BudgetPolicy, VersionStats};
#[cfg(not(loom))]
pub use txn::{CommitInfo, Isolation, Options, Tx};
