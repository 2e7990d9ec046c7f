//! Shared helpers for reports: serde adapters and table formatting.

use std::time::Duration;

/// Serialises a duration as milliseconds.
pub fn duration_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

/// Serialises a value through its `Display`-like name.
pub fn display<S: serde::Serializer>(i: &ordo::Isolation, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(i.name())
}

/// Serialises a value through `Debug`, lower-cased.
pub fn debug<T: std::fmt::Debug, S: serde::Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{v:?}").to_lowercase())
}
