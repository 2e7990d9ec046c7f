//! # ordo-check — histories and checkers
//!
//! Records transaction histories and checks them for strict serializability, opacity and
//! snapshot isolation by cycle search over dependency graphs (the approach of Elle).
#![forbid(unsafe_code)]
