//! The calibration cache: a measured [`Calibration`] stored as JSON so that start-up does not
//! repeat the handshake (DESIGN §1).
//!
//! # Mechanism
//! One file, `calibration.json`, in a cache directory (default `$XDG_CACHE_HOME/ordo`, else
//! `$HOME/.cache/ordo`), holds a versioned envelope `{format_version, key, calibration}`. The
//! [`CacheKey`] is what the boundary depends on: the CPU model, the calibrated core set and the
//! boot id (`/proc/sys/kernel/random/boot_id`) — counters are reset, and their offsets may change,
//! at every boot (ORDO §3.2.2: the offset is constant *until the machine is reset*).
//!
//! [`load_or_calibrate`] trusts a cached value only if the file parses, the format version and
//! the key match, it was measured with at least the requested runs, and it passes
//! [`Calibration::validate`]. Anything else — a garbage file, another key, a failed check — is
//! recomputed, and the reason is returned to the caller as a [`CacheWarning`] (this crate does not
//! log). A new measurement is written atomically (temporary file in the same directory, then
//! `rename`), so a reader never sees half a file; a directory that cannot be written is another
//! warning, and the fresh calibration is still returned.
//!
//! # Invariants
//! * A calibration returned from the cache satisfies [`Calibration::validate`] and matches the
//!   current key.
//! * Cache problems never fail a calibration: they only add warnings.

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::calibrate::{CalibrateError, CalibrateOptions, Calibration, calibrate};
use crate::cores;

/// The version of the cache file layout; bump it when [`Calibration`] changes shape.
pub const FORMAT_VERSION: u32 = 1;

/// The cache file's name inside the cache directory.
pub const FILE_NAME: &str = "calibration.json";

/// The file holding the boot id.
const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// What a cached calibration must match to be used.
#[derive(Clone, PartialEq, Eq, Debug, serde::Serialize, serde::Deserialize)]
pub struct CacheKey {
    /// The CPU model.
    pub cpu_model: String,
    /// The calibrated cores, sorted.
    pub cores: Vec<usize>,
    /// The kernel's boot id.
    pub boot_id: String,
}

impl CacheKey {
    /// The key of this machine, this boot and `cores`; `None` when the boot id is unreadable
    /// (then nothing may be cached: a value from another boot could be wrong).
    pub fn current(cores: &[usize]) -> Option<CacheKey> {
        let boot_id = std::fs::read_to_string(BOOT_ID_PATH).ok()?.trim().to_owned();
        if boot_id.is_empty() {
            return None;
        }
        let mut cores = cores.to_vec();
        cores.sort_unstable();
        cores.dedup();
        Some(CacheKey { cpu_model: cores::cpu_model(), cores, boot_id })
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct CacheFile {
    format_version: u32,
    key: CacheKey,
    calibration: Calibration,
}

/// Why a cached value was not used, or a new one not stored. Shown to the user as a warning.
#[derive(Debug)]
pub enum CacheWarning {
    /// No cache directory could be determined (neither `XDG_CACHE_HOME` nor `HOME` is set).
    NoCacheDir,
    /// The boot id is unreadable, so nothing can be cached safely.
    NoBootId,
    /// The cache file exists but could not be read.
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The cache file is not a valid cache file (garbage, truncated, failed validation).
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The cache file is valid but for another machine, boot, core set, format or fewer runs.
    Stale {
        /// The file.
        path: PathBuf,
        /// Which part did not match.
        reason: String,
    },
    /// The new calibration could not be written.
    Unwritable {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl fmt::Display for CacheWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheWarning::NoCacheDir => {
                write!(f, "no cache directory (set XDG_CACHE_HOME or HOME); not caching")
            }
            CacheWarning::NoBootId => write!(f, "cannot read {BOOT_ID_PATH}; not caching"),
            CacheWarning::Unreadable { path, source } => {
                write!(
                    f,
                    "cannot read calibration cache {}: {source}; recalibrating",
                    path.display()
                )
            }
            CacheWarning::Corrupt { path, detail } => {
                write!(
                    f,
                    "ignoring corrupt calibration cache {}: {detail}; recalibrating",
                    path.display()
                )
            }
            CacheWarning::Stale { path, reason } => {
                write!(
                    f,
                    "ignoring stale calibration cache {} ({reason}); recalibrating",
                    path.display()
                )
            }
            CacheWarning::Unwritable { path, source } => {
                write!(f, "cannot write calibration cache {}: {source}", path.display())
            }
        }
    }
}

/// Where a calibration came from.
#[derive(Clone, Copy, PartialEq, Eq, Debug, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CalibrationSource {
    /// Loaded from the cache.
    Cached,
    /// Measured now.
    Measured,
}

/// A calibration, where it came from, and what went wrong with the cache on the way.
#[derive(Debug)]
pub struct CalibrationOutcome {
    /// The calibration.
    pub calibration: Calibration,
    /// Cached or measured.
    pub source: CalibrationSource,
    /// The cache file consulted, if any.
    pub cache_path: Option<PathBuf>,
    /// Cache problems, in the order met; empty on a clean hit or a clean store.
    pub warnings: Vec<CacheWarning>,
}

/// A calibration cache directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalibrationCache {
    dir: PathBuf,
}

impl CalibrationCache {
    /// A cache in `dir` (created on first store).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        CalibrationCache { dir: dir.into() }
    }

    /// The default directory: `$XDG_CACHE_HOME/ordo` if that variable holds an absolute path,
    /// else `$HOME/.cache/ordo`.
    pub fn default_dir() -> Option<PathBuf> {
        let absolute =
            |var: &str| std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute());
        absolute("XDG_CACHE_HOME")
            .map(|base| base.join("ordo"))
            .or_else(|| absolute("HOME").map(|home| home.join(".cache").join("ordo")))
    }

    /// The cache in [`CalibrationCache::default_dir`], or a warning when there is none.
    pub fn at_default_dir() -> Result<Self, CacheWarning> {
        Self::default_dir().map(Self::new).ok_or(CacheWarning::NoCacheDir)
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cache file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// The cached calibration for `key` measured with at least `runs_min` runs: `Ok(None)` when
    /// there is no file, `Err` with the reason when there is one that must not be trusted.
    pub fn load(&self, key: &CacheKey, runs_min: u64) -> Result<Option<Calibration>, CacheWarning> {
        let path = self.path();
        let text = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            // No file, or a path that cannot hold one (a component is not a directory: the
            // store will say so).
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok(None);
            }
            Err(source) => return Err(CacheWarning::Unreadable { path, source }),
        };
        let corrupt = |detail: String| CacheWarning::Corrupt { path: path.clone(), detail };
        let stale = |reason: String| CacheWarning::Stale { path: path.clone(), reason };
        // The version first, so that a file of another format is stale, not corrupt.
        let value: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| corrupt(e.to_string()))?;
        let version = value.get("format_version").and_then(serde_json::Value::as_u64);
        if version != Some(u64::from(FORMAT_VERSION)) {
            let found = version.map_or_else(|| "none".to_owned(), |v| v.to_string());
            return Err(stale(format!("format version {found} instead of {FORMAT_VERSION}")));
        }
        let file: CacheFile = serde_json::from_value(value).map_err(|e| corrupt(e.to_string()))?;
        if file.key.cpu_model != key.cpu_model {
            return Err(stale(format!("measured on CPU `{}`", file.key.cpu_model)));
        }
        if file.key.boot_id != key.boot_id {
            return Err(stale("measured before the last reboot".to_owned()));
        }
        if file.key.cores != key.cores {
            return Err(stale(format!(
                "measured on cores {}",
                cores::format_core_list(&file.key.cores)
            )));
        }
        let calibration = file.calibration;
        calibration
            .validate()
            .map_err(|detail| CacheWarning::Corrupt { path: path.clone(), detail })?;
        if calibration.cores != key.cores {
            return Err(CacheWarning::Corrupt {
                path,
                detail: "key and calibration name different cores".to_owned(),
            });
        }
        if calibration.runs_requested < runs_min {
            return Err(stale(format!(
                "measured with {} runs, {runs_min} requested",
                calibration.runs_requested
            )));
        }
        Ok(Some(calibration))
    }

    /// Writes `calibration` under `key`, atomically (temporary file, then rename).
    pub fn store(&self, key: &CacheKey, calibration: &Calibration) -> Result<(), CacheWarning> {
        let unwritable =
            |path: &Path, source| CacheWarning::Unwritable { path: path.to_owned(), source };
        std::fs::create_dir_all(&self.dir).map_err(|e| unwritable(&self.dir, e))?;
        let file = CacheFile {
            format_version: FORMAT_VERSION,
            key: key.clone(),
            calibration: calibration.clone(),
        };
        let json = serde_json::to_vec_pretty(&file)
            .map_err(|e| unwritable(&self.dir, std::io::Error::other(e)))?;
        let final_path = self.path();
        let tmp_path = self.dir.join(format!(".{FILE_NAME}.{}.tmp", std::process::id()));
        let written = std::fs::File::create(&tmp_path).and_then(|mut f| {
            f.write_all(&json)?;
            f.write_all(b"\n")?;
            f.sync_all()
        });
        if let Err(e) = written.and_then(|()| std::fs::rename(&tmp_path, &final_path)) {
            let _ = std::fs::remove_file(&tmp_path);
            return Err(unwritable(&final_path, e));
        }
        Ok(())
    }
}

/// The calibration for `options`: from `cache` when a trustworthy value is there, else measured
/// (and stored in `cache`). `cache = None` always measures and stores nothing.
///
/// # Errors
/// Only the errors of [`calibrate`]; cache problems become [`CalibrationOutcome::warnings`].
pub fn load_or_calibrate(
    options: &CalibrateOptions,
    cache: Option<&CalibrationCache>,
) -> Result<CalibrationOutcome, CalibrateError> {
    load_or_else(options, cache, || calibrate(options))
}

/// [`load_or_calibrate`] with the measurement supplied by the caller (tests use a cheap one).
pub fn load_or_else(
    options: &CalibrateOptions,
    cache: Option<&CalibrationCache>,
    measure: impl FnOnce() -> Result<Calibration, CalibrateError>,
) -> Result<CalibrationOutcome, CalibrateError> {
    if options.runs == 0 {
        return Err(CalibrateError::RunsZero);
    }
    let Some(cache) = cache else {
        let calibration = measure()?;
        return Ok(CalibrationOutcome {
            calibration,
            source: CalibrationSource::Measured,
            cache_path: None,
            warnings: Vec::new(),
        });
    };
    let mut warnings = Vec::new();
    // The key needs the resolved core set; an explicit list is the set, otherwise the usable
    // cores are (exactly what `calibrate` resolves `None` to).
    let cores = match &options.cores {
        Some(cores) => cores.clone(),
        None => cores::usable_cores()?,
    };
    let key = CacheKey::current(&cores);
    if let Some(key) = &key {
        match cache.load(key, options.runs) {
            Ok(Some(calibration)) => {
                return Ok(CalibrationOutcome {
                    calibration,
                    source: CalibrationSource::Cached,
                    cache_path: Some(cache.path()),
                    warnings,
                });
            }
            Ok(None) => {}
            Err(warning) => warnings.push(warning),
        }
    } else {
        warnings.push(CacheWarning::NoBootId);
    }
    let calibration = measure()?;
    if let Some(key) = &key
        && key.cores == calibration.cores
        && let Err(warning) = cache.store(key, &calibration)
    {
        warnings.push(warning);
    }
    Ok(CalibrationOutcome {
        calibration,
        source: CalibrationSource::Measured,
        cache_path: Some(cache.path()),
        warnings,
    })
}
