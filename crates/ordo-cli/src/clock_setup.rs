//! Flags shared by every command that builds a clock: where the calibration cache is, whether
//! to use it, and how hard an ORDO calibration tries.

use std::path::PathBuf;

use clap::Args;
use ordo_clock::{CacheWarning, CalibrationCache};

/// Where the calibration cache lives.
#[derive(Args, Debug, Clone)]
pub(crate) struct CacheArgs {
    /// The calibration cache directory [default: $XDG_CACHE_HOME/ordo or ~/.cache/ordo].
    #[arg(long, value_name = "DIR")]
    pub(crate) cache_dir: Option<PathBuf>,
    /// Neither read nor write the calibration cache: always measure.
    #[arg(long, conflicts_with = "cache_dir")]
    pub(crate) no_cache: bool,
}

impl CacheArgs {
    /// The cache to use, if any; a missing default directory is a warning, not an error.
    pub(crate) fn cache(&self) -> Option<CalibrationCache> {
        if self.no_cache {
            return None;
        }
        match &self.cache_dir {
            Some(dir) => Some(CalibrationCache::new(dir)),
            None => match CalibrationCache::at_default_dir() {
                Ok(cache) => Some(cache),
                Err(warning) => {
                    warn(&warning);
                    None
                }
            },
        }
    }
}

/// Prints one warning line on stderr.
pub(crate) fn warn(warning: &CacheWarning) {
    eprintln!("warning: {warning}");
}
