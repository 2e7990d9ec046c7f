//! Integration tests of the clock crate: calibration, cache, comparisons, happens-before, test
//! clocks, the synchronised cluster clock.
//!
//! One test binary (links once); each module is one former test file.

mod cache;
mod calibration;
mod cmp_time;
mod happens_before;
mod synced;
mod test_clock;
