//! Cores: which ones exist and may be used, pinning a thread to one, and the CPU model.
//!
//! # Mechanism
//! Calibration (ORDO Fig. 4, `run_on_core`) and the clock benchmark pin threads to cores. The
//! usable cores are the kernel's online set (`/sys/devices/system/cpu/online`) intersected with
//! this thread's affinity mask (`sched_getaffinity`): a container or `taskset` may allow fewer
//! cores than are online. A thread is pinned with `sched_setaffinity(0, …)`, which affects only
//! the calling thread.
//!
//! # Invariants
//! * Every list returned here is sorted and free of duplicates.
//! * Core numbers are below `CPU_SETSIZE` (1024 with glibc); larger numbers are an error, never a
//!   silent truncation.

use std::io;
use std::path::Path;

/// The file listing the online cores.
const ONLINE_PATH: &str = "/sys/devices/system/cpu/online";
/// The file whose `model name` line names the CPU.
const CPUINFO_PATH: &str = "/proc/cpuinfo";

/// Why a core set could not be read, parsed or applied.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// A kernel file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: io::Error,
    },
    /// A core list (`0-3,5`) is malformed.
    #[error("malformed core list `{text}`: {detail}")]
    Parse {
        /// The text.
        text: String,
        /// What is wrong with it.
        detail: &'static str,
    },
    /// A core number does not fit a `cpu_set_t`.
    #[error("core {core} is beyond the largest core number this program supports ({max})")]
    TooLarge {
        /// The core.
        core: usize,
        /// The largest supported core number.
        max: usize,
    },
    /// `sched_getaffinity` failed.
    #[error("cannot read this thread's affinity mask: {source}")]
    AffinityMask {
        /// The OS error.
        source: io::Error,
    },
    /// `sched_setaffinity` failed.
    #[error("cannot pin a thread to core {core}: {source}")]
    Pin {
        /// The core.
        core: usize,
        /// The OS error.
        source: io::Error,
    },
}

/// The number of cores a `cpu_set_t` holds.
fn set_size() -> usize {
    usize::try_from(libc::CPU_SETSIZE).unwrap_or(1024)
}

/// Parses a kernel-style core list: `"0-3,5,7-8"` → `[0, 1, 2, 3, 5, 7, 8]` (sorted, deduplicated).
pub fn parse_core_list(text: &str) -> Result<Vec<usize>, CoreError> {
    let err = |detail| CoreError::Parse { text: text.to_owned(), detail };
    let mut cores = Vec::new();
    for part in text.trim().split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(err("empty element"));
        }
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo.trim(), hi.trim()),
            None => (part, part),
        };
        let lo: usize = lo.parse().map_err(|_| err("not a core number"))?;
        let hi: usize = hi.parse().map_err(|_| err("not a core number"))?;
        if lo > hi {
            return Err(err("descending range"));
        }
        if hi >= set_size() {
            return Err(CoreError::TooLarge { core: hi, max: set_size() - 1 });
        }
        cores.extend(lo..=hi);
    }
    cores.sort_unstable();
    cores.dedup();
    Ok(cores)
}

/// Formats a sorted core list compactly: `[0, 1, 2, 3, 5]` → `"0-3,5"`.
pub fn format_core_list(cores: &[usize]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < cores.len() {
        let start = cores[i];
        let mut end = start;
        while i + 1 < cores.len() && cores[i + 1] == end + 1 {
            i += 1;
            end = cores[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

/// The online cores, from `/sys/devices/system/cpu/online`.
pub fn online_cores() -> Result<Vec<usize>, CoreError> {
    let text = std::fs::read_to_string(ONLINE_PATH)
        .map_err(|source| CoreError::Read { path: ONLINE_PATH.to_owned(), source })?;
    parse_core_list(&text)
}

/// The cores the calling thread may run on (`sched_getaffinity`).
pub fn allowed_cores() -> Result<Vec<usize>, CoreError> {
    // SAFETY: cpu_set_t is a plain bit array for which all-zero is a valid (empty) value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live cpu_set_t of the size passed; the kernel writes at most that many
    // bytes and keeps no reference.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(CoreError::AffinityMask { source: io::Error::last_os_error() });
    }
    // SAFETY: CPU_ISSET reads bit `core` of `set`, and `core < CPU_SETSIZE`, the bit count of a
    // cpu_set_t, so the access is in bounds.
    Ok((0..set_size()).filter(|&core| unsafe { libc::CPU_ISSET(core, &set) }).collect())
}

/// The cores usable for calibration and benchmarks: online and in the affinity mask. Falls back
/// to the affinity mask alone when the online list cannot be read (some containers hide it).
pub fn usable_cores() -> Result<Vec<usize>, CoreError> {
    let allowed = allowed_cores()?;
    match online_cores() {
        Ok(online) => Ok(allowed.into_iter().filter(|c| online.binary_search(c).is_ok()).collect()),
        Err(_) if !Path::new(ONLINE_PATH).exists() => Ok(allowed),
        Err(e) => Err(e),
    }
}

/// Pins the calling thread to `core`.
pub fn pin_current_thread(core: usize) -> Result<(), CoreError> {
    if core >= set_size() {
        return Err(CoreError::TooLarge { core, max: set_size() - 1 });
    }
    // SAFETY: cpu_set_t is a plain bit array for which all-zero is a valid (empty) value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `core < CPU_SETSIZE` (checked above), so CPU_SET writes a bit inside `set`.
    unsafe { libc::CPU_SET(core, &mut set) };
    // SAFETY: `set` is a live, initialised cpu_set_t of the size passed; pid 0 is the calling
    // thread; the kernel only reads the mask.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(CoreError::Pin { core, source: io::Error::last_os_error() });
    }
    Ok(())
}

/// The CPU model as the kernel names it (`model name` on x86, `CPU implementer`/`CPU part` on
/// arm), or `"unknown"`.
pub fn cpu_model() -> String {
    match std::fs::read_to_string(CPUINFO_PATH) {
        Ok(text) => cpu_model_from_cpuinfo(&text),
        Err(_) => "unknown".to_owned(),
    }
}

/// The CPU model named by `/proc/cpuinfo` text.
pub fn cpu_model_from_cpuinfo(cpuinfo: &str) -> String {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim().to_owned())
        })
    };
    if let Some(model) = field("model name") {
        return model;
    }
    match (field("CPU implementer"), field("CPU part")) {
        (Some(implementer), Some(part)) => format!("implementer {implementer} part {part}"),
        _ => "unknown".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_lists_parse_and_format() {
        assert_eq!(parse_core_list("0-3,5,7-8\n").unwrap(), vec![0, 1, 2, 3, 5, 7, 8]);
        assert_eq!(parse_core_list("1,0,1").unwrap(), vec![0, 1]);
        assert_eq!(format_core_list(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7-8");
        assert_eq!(format_core_list(&[4]), "4");
        assert_eq!(format_core_list(&[]), "");
        for bad in ["", "a", "3-1", "1,,2", "-1"] {
            assert!(matches!(parse_core_list(bad), Err(CoreError::Parse { .. })), "{bad}");
        }
        assert!(matches!(parse_core_list("0-100000"), Err(CoreError::TooLarge { .. })));
    }

    #[test]
    fn this_machine_has_usable_cores() {
        let usable = usable_cores().unwrap();
        assert!(!usable.is_empty());
        assert!(usable.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn pinning_to_a_huge_core_is_an_error() {
        assert!(matches!(pin_current_thread(1 << 20), Err(CoreError::TooLarge { .. })));
    }

    #[test]
    fn cpu_models_are_found() {
        assert_eq!(
            cpu_model_from_cpuinfo("processor\t: 0\nmodel name\t: Foo CPU @ 2GHz\n"),
            "Foo CPU @ 2GHz"
        );
        assert_eq!(
            cpu_model_from_cpuinfo("CPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"),
            "implementer 0x41 part 0xd0c"
        );
        assert_eq!(cpu_model_from_cpuinfo(""), "unknown");
    }
}
