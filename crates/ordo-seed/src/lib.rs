//! # ordo-seed — one replayable seed per randomized test
//!
//! The randomized tests of the workspace (the crash loop, the power-loss runs, the proptests,
//! the history tests, the stress tests; README, "Reproducing a randomized failure", lists
//! them) draw their randomness from one [`Seed`] each:
//!
//! * `ORDO_SEED=<n>` set (decimal, or hex with `0x`): the seed is `n`, so a run replays the
//!   failing one exactly — up to thread scheduling, which no seed fixes: a multi-threaded
//!   test replays the same choices (keys, amounts, delays, power-loss subsets), not the same
//!   interleaving.
//! * unset: a fresh seed per test, drawn from the OS-seeded hasher keys and the time, so every
//!   run explores new cases.
//!
//! The seed is printed when it is drawn (`<test>: ORDO_SEED=<n>`, on stderr, which the test
//! harness shows for a failed test) and again, with the command to rerun, if the test then
//! panics: the [`Seed`]'s `Drop` checks `std::thread::panicking()`. A test that needs several
//! independent streams (one per thread, one per iteration) takes them from [`Seed::derive`],
//! never from a second source.
//!
//! Proptests take the same seed through [`proptest_config`]: proptest's own random seed is
//! replaced by a fixed one derived from [`Seed`], printed in the same way, so
//! `ORDO_SEED=<n> cargo test NAME` reruns the same cases (and proptest's shrinking then
//! finds the same minimal input).
//!
//! ```
//! let seed = ordo_seed::Seed::new("my_test");
//! let per_thread: Vec<u64> = (0..4).map(|t| seed.derive(t)).collect();
//! assert_eq!(per_thread[0], seed.derive(0));
//! ```
#![forbid(unsafe_code)]

use std::hash::{BuildHasher, Hasher};

use proptest::test_runner::{Config as ProptestConfig, RngSeed};

/// The environment variable that fixes the seed.
pub const ENV: &str = "ORDO_SEED";

/// A test's seed: `ORDO_SEED` or a fresh one, printed when drawn and again if the test fails.
#[derive(Debug)]
pub struct Seed {
    test: String,
    value: u64,
}

impl Seed {
    /// The seed of the test `test` (its name, as `cargo test` filters it). Called on a test
    /// harness's test thread, the thread's name (the test's full path) is used instead, so a
    /// helper shared by several tests may pass its own name.
    ///
    /// # Panics
    /// When `ORDO_SEED` is set but is not a number: a replay must not silently run another
    /// seed.
    pub fn new(test: &str) -> Seed {
        let thread = std::thread::current();
        let test = match thread.name() {
            Some(name) if name != "main" => name,
            _ => test,
        };
        let value = match std::env::var(ENV) {
            Ok(text) => match parse(&text) {
                Some(v) => v,
                None => panic!("{ENV}={text:?} is not a u64 (decimal, or hex with 0x)"),
            },
            Err(_) => fresh(),
        };
        eprintln!("{test}: {ENV}={value}");
        Seed { test: test.to_string(), value }
    }

    /// The seed itself.
    pub fn value(&self) -> u64 {
        self.value
    }

    /// An independent seed for stream `stream` (a thread, an iteration): SplitMix64 of the
    /// seed and the stream number, so nearby streams are unrelated.
    pub fn derive(&self, stream: u64) -> u64 {
        splitmix64(self.value ^ splitmix64(stream.wrapping_add(0x5EED)))
    }
}

impl Drop for Seed {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "\n{test} failed with {ENV}={v}; rerun it with:\n    {ENV}={v} cargo test \
                 {test}\n(the test's crate and --test target narrow it further)",
                test = self.test,
                v = self.value
            );
        }
    }
}

/// A proptest configuration running `cases` cases from a fixed seed derived from
/// `ORDO_SEED` (or a fresh one), printed as `<test>: ORDO_SEED=<n>`.
///
/// Proptest drops the configuration before it reports a failure, so the rerun hint is the
/// line printed at the start (shown with the failed test's output).
pub fn proptest_config(test: &str, cases: u32) -> ProptestConfig {
    let seed = Seed::new(test);
    ProptestConfig { cases, rng_seed: RngSeed::Fixed(seed.derive(0)), ..ProptestConfig::default() }
}

fn parse(text: &str) -> Option<u64> {
    let t = text.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

/// A fresh seed: the std hasher's per-process random keys, mixed with the time.
fn fresh() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    h.write_u64(nanos);
    // Below 2^53: the seed survives a round trip through a JSON number or a spreadsheet.
    h.finish() >> 11
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_decimal_and_hex() {
        assert_eq!(parse("42"), Some(42));
        assert_eq!(parse(" 0x2a "), Some(42));
        assert_eq!(parse("x"), None);
    }

    #[test]
    fn streams_differ_and_repeat() {
        let s = Seed { test: "t".into(), value: 7 };
        assert_ne!(s.derive(0), s.derive(1));
        assert_eq!(s.derive(3), Seed { test: "u".into(), value: 7 }.derive(3));
    }
}
