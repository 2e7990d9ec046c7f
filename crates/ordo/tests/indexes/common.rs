//! What the map and tree model tests share: how each of their transactions ends.
#![allow(dead_code, unreachable_pub)] // shared by the modules of one test binary

use ordo::Tx;
use ordo_clock::Clock;
use rand::{Rng, rngs::SmallRng};

/// How a transaction of a model test ends: committed, or aborted or dropped (which must leave
/// no trace).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// `commit`.
    Commit,
    /// `abort`.
    Abort,
    /// Dropped without either.
    Drop,
}

impl End {
    /// Commit eight times in ten, abort or drop once each.
    pub fn random(rng: &mut SmallRng) -> End {
        match rng.random_range(0..10) {
            0 => End::Abort,
            1 => End::Drop,
            _ => End::Commit,
        }
    }

    /// Ends `tx` this way; when it commits, `pending` (the model with the transaction's
    /// operations) becomes the `model`.
    pub fn apply<C: Clock, M>(self, tx: Tx<'_, C>, model: &mut M, pending: M) {
        match self {
            End::Commit => {
                tx.commit().unwrap();
                *model = pending;
            }
            End::Abort => tx.abort(),
            End::Drop => drop(tx),
        }
    }
}
