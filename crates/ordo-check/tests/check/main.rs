//! Integration tests of the history checker: hand-written anomalies, generated histories, the recorder.
//!
//! One test binary (links once); each module is one former test file.

mod anomalies;
mod generated;
mod recorder;
