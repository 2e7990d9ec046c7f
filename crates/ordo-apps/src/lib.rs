//! # ordo-apps — ORDO's applications
//!
//! The ORDO paper (Kashyap et al., EuroSys'18) shows its clock inside several concurrent
//! algorithms. Two of them — RLU and Oplog — are here, with the hash set of Fig. 11 on RLU and
//! on Ordo transactions, next to (not inside) the engine: they are *users* of the clock or of
//! the store, not parts of it.
//!
//! * [`rlu`] — read-log-update on any [`ordo_clock::Clock`] (ORDO §4.1, Fig. 7): the logical
//!   clock gives the original RLU, the ORDO clock RLU^ORDO; [`rlu::hashset`] is the hash set of
//!   Fig. 11 on it.
//! * [`hashset`] — the same hash set with every operation an Ordo transaction
//!   ([`ordo::Ordo::run`]), the other side of the Fig. 11 comparison.
//! * [`oplog`] — Oplog's per-thread logs stamped by the clock and merged when read (ORDO §4.4),
//!   with the reverse map [`oplog::Rmap`].
//!
//! Transactions ordered by hardware time — the engine itself — are the `ordo` crate.
//!
//! ## Layering
//!
//! [`rlu`] and [`oplog`] depend only on `ordo-clock`; [`hashset`] uses only the public API of
//! `ordo` ([`ordo::Ordo`], [`ordo::Tx`], [`ordo::Addr`]). Nothing in `ordo` depends on this
//! crate. Under `--cfg loom` only the RLU runtime is built (its atomics come through the
//! crate's `sync` module), for the models in `tests/loom_rlu.rs`.
//!
//! ## Features
//!
//! `shortcuts` — test-only switches that remove one step of the RLU or Oplog protocol
//! ([`rlu::RluOptions`]'s `shortcuts`, `Oplog::with_shortcuts`), for the negative tests that show
//! each step necessary. Never on outside tests.

#[cfg(not(loom))]
pub mod hashset;
#[cfg(not(loom))]
pub mod oplog;
pub mod rlu;
mod sync;
