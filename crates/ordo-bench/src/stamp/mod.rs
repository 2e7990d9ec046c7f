//! # STAMP kernels on Ordo transactions (ORDO §6.6, Fig. 15)
//!
//! Each kernel of the STAMP suite (Minh et al., IISWC'08) is a [`Kernel`]: its inputs are made by
//! a generator driven by the original generators' parameters ([`Size::Small`] and
//! [`Size::Medium`] presets), it has a plain sequential version (no transactions) that defines
//! the expected result, and a parallel version whose shared state lives in the engine and is
//! changed only inside Ordo transactions. A run reports the parallel version's speedup over the
//! sequential one and fails unless [`Kernel::verify`] accepts the parallel output against the
//! sequential output.
//!
//! Kernels whose result depends on the interleaving (vacation, labyrinth) verify invariants
//! that every serial order satisfies instead of equality; each kernel's module says which.

use std::fmt::Debug;

use ordo::Ordo;
use ordo_clock::Clock;

use crate::error::BenchError;

/// Input size preset, after the STAMP README's recommended "small" and "medium" inputs
/// (scaled where a kernel notes it, so that the medium input runs in seconds here).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Size {
    /// Seconds-scale inputs for tests and the suite.
    Small,
    /// The larger preset.
    Medium,
}

/// One STAMP kernel.
pub trait Kernel {
    /// The kernel's name as `ordo bench stamp --app NAME` spells it.
    const NAME: &'static str;
    /// Generator parameters (the original generator's flags).
    type Params: Clone + Debug + serde::Serialize + Send + Sync;
    /// A generated input, shared read-only by the workers.
    type Input: Send + Sync;
    /// What a run produces, comparable between the sequential and the parallel versions.
    type Output: Debug + Send;

    /// The parameters of a preset.
    fn params(size: Size) -> Self::Params;
    /// Checks every parameter; the error names the first one out of range.
    fn validate(params: &Self::Params) -> Result<(), BenchError>;
    /// Generates the input deterministically from `seed`.
    fn generate(params: &Self::Params, seed: u64) -> Result<Self::Input, BenchError>;
    /// The sequential version: plain data structures, no transactions.
    fn sequential(input: &Self::Input) -> Self::Output;
    /// The parallel version on `threads` threads; every access to shared state is inside a
    /// transaction of `db`.
    fn parallel<C: Clock + Send + Sync + 'static>(
        db: &Ordo<C>,
        input: &Self::Input,
        threads: usize,
    ) -> Result<Self::Output, BenchError>;
    /// Accepts the parallel output when it is what the sequential version computes (or, for
    /// order-dependent kernels, satisfies the invariants every serial order satisfies);
    /// otherwise [`BenchError::Inconsistent`] says what differs.
    fn verify(
        input: &Self::Input,
        sequential: &Self::Output,
        parallel: &Self::Output,
    ) -> Result<(), BenchError>;
}
