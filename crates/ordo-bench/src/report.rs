//! Shared helpers for reports: serde adapters and table formatting.

use std::time::Duration;

/// The median, smallest and largest of `values` (zeros when empty); sorts `values`.
pub fn median_min_max(values: &mut [f64]) -> (f64, f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    let median =
        if values.len() % 2 == 1 { values[mid] } else { (values[mid - 1] + values[mid]) / 2.0 };
    (median, values[0], values[values.len() - 1])
}

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

/// Facts about the machine a result was measured on, for JSON lines.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Machine {
    /// CPU model name from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: usize,
    /// Kernel release.
    pub kernel: String,
}

impl Machine {
    /// Reads the facts; unknown ones are `"unknown"`.
    pub fn read() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split(':').nth(1)))
            .map_or_else(|| "unknown".to_owned(), |s| s.trim().to_owned());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "unknown".to_owned(), |s| s.trim().to_owned());
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Machine { cpu_model, cpus, kernel }
    }
}

/// The commit checked out when the benchmark binary was built (uncommitted changes are not
/// reflected), or `"unknown"` without git: a result names its binary's source, not the
/// checkout it runs in.
pub fn git_revision() -> String {
    env!("ORDO_BUILD_REVISION").to_owned()
}
