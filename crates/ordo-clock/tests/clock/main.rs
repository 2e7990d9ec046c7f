//! Integration tests of the clock crate: calibration, cache, comparisons, happens-before, test clocks.
//!
//! One test binary (links once); each module is one former test file.

mod cache;
mod calibration;
mod cmp_time;
mod happens_before;
mod test_clock;
