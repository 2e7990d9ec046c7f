//! Per-transaction options: isolation mode, retry bounds, and (test builds only) the unsafe
//! shortcuts the negative tests switch on.

/// The isolation a transaction runs at (FaRMv2 §3.1, §4.3).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum Isolation {
    /// Strict serializability with opacity: `rts = get_ts()` (waits out uncertainty), reads are
    /// validated at commit. The default.
    #[default]
    StrictSerializable,
    /// Serializable, not strict: `rts = now().lo` (no wait), so a transaction may miss writes
    /// that committed just before it started; still opaque and serializable.
    Serializable,
    /// Strict snapshot isolation: as strict serializable but without read validation.
    StrictSnapshot,
    /// Snapshot isolation without the start wait.
    Snapshot,
}

impl Isolation {
    /// Whether reads are validated at commit (the serializable modes).
    pub fn validates_reads(self) -> bool {
        matches!(self, Isolation::StrictSerializable | Isolation::Serializable)
    }

    /// Whether the read timestamp must cover every transaction that finished before this one
    /// began (the strict modes). Strict snapshot isolation waits out the clock's uncertainty
    /// for it; strict serializability reads optimistically instead (see [`crate::Tx`]).
    pub fn is_strict(self) -> bool {
        matches!(self, Isolation::StrictSerializable | Isolation::StrictSnapshot)
    }

    /// Every mode.
    pub const ALL: [Isolation; 4] = [
        Isolation::StrictSerializable,
        Isolation::Serializable,
        Isolation::StrictSnapshot,
        Isolation::Snapshot,
    ];

    /// A short name for reports and command lines.
    pub fn name(self) -> &'static str {
        match self {
            Isolation::StrictSerializable => "strict-serializable",
            Isolation::Serializable => "serializable",
            Isolation::StrictSnapshot => "strict-si",
            Isolation::Snapshot => "si",
        }
    }
}

impl std::str::FromStr for Isolation {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Isolation::ALL.into_iter().find(|i| i.name() == s).ok_or_else(|| {
            crate::Error::Config(format!(
                "unknown isolation {s:?}; expected one of strict-serializable, serializable, strict-si, si"
            ))
        })
    }
}

/// Bounds of `Ordo::run`'s retry loop.
pub const RETRIES_MAX_DEFAULT: u32 = 10_000;
/// The longest single back-off pause, in microseconds.
pub const BACKOFF_US_MAX: u64 = 1_000;

/// Options of one transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// The isolation mode.
    pub isolation: Isolation,
    /// How many attempts `Ordo::run_with` makes before giving up with
    /// [`crate::Error::RetriesExhausted`]. At least 1.
    pub retries_max: u32,
    /// The transaction intends to write: in the serializable modes, reading an old version then
    /// aborts at once (eager validation, FaRMv2 §4.4) instead of failing validation at commit.
    pub will_write: bool,
    /// In a sync-durable database, wait until the commit is durable before returning (the
    /// default). `false` returns once the record is written to the OS: the transaction is
    /// still logged, and durable with the next group flush, but a power loss may lose it.
    pub wait_durable: bool,
    /// The unsafe shortcuts of the negative tests; all off by default.
    #[cfg(feature = "shortcuts")]
    pub shortcuts: Shortcuts,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            isolation: Isolation::default(),
            retries_max: RETRIES_MAX_DEFAULT,
            will_write: false,
            wait_durable: true,
            #[cfg(feature = "shortcuts")]
            shortcuts: Shortcuts::default(),
        }
    }
}

impl Options {
    /// Default options at `isolation`.
    pub fn isolation(isolation: Isolation) -> Self {
        Options { isolation, ..Options::default() }
    }
}

/// Protocol steps a negative test can remove to show the checker notices (DESIGN §8).
/// Only compiled with the `shortcuts` feature; never enable it outside tests.
#[cfg(feature = "shortcuts")]
#[derive(Clone, Copy, Debug, Default)]
pub struct Shortcuts {
    /// Take `wts = now().hi` at commit without waiting until it is in the past (FaRMv2 §7.3).
    pub skip_write_wait: bool,
    /// Validate reads before waiting out the write timestamp, i.e. concurrently with the wait.
    pub validate_before_wait: bool,
    /// Draw (and wait out) the write timestamp before taking the write locks.
    pub wait_before_lock: bool,
    /// Let reads return locked objects instead of aborting.
    pub skip_read_lock_check: bool,
    /// Skip read validation in serializable modes.
    pub skip_validation: bool,
    /// In strict serializable mode, do not revalidate earlier reads when a read returns a
    /// version that may postdate them (see `Tx`'s "Optimistic read timestamp").
    pub skip_read_revalidation: bool,
    /// In strict serializable mode, move the read timestamp forward on a too-new head without
    /// checking that the reads so far are still current (see `Tx::extend`).
    pub skip_extension_check: bool,
    /// Do not register the read timestamp with the GC, so the GC may recycle old versions this
    /// transaction still needs.
    pub skip_registration: bool,
    /// Install the new versions (and unlock) *before* writing the redo record, so a reader may
    /// see a value whose record a crash loses (durable databases).
    pub log_after_install: bool,
    /// Called at each step of the commit protocol, so a test can script an interleaving
    /// (for example, pause a committer between its write timestamp and its install).
    pub hook: Option<fn(CommitStep)>,
}

#[cfg(feature = "shortcuts")]
impl PartialEq for Shortcuts {
    fn eq(&self, other: &Self) -> bool {
        // Hooks are compared by presence: function pointer identity is not meaningful.
        self.skip_write_wait == other.skip_write_wait
            && self.validate_before_wait == other.validate_before_wait
            && self.wait_before_lock == other.wait_before_lock
            && self.skip_read_lock_check == other.skip_read_lock_check
            && self.skip_validation == other.skip_validation
            && self.skip_read_revalidation == other.skip_read_revalidation
            && self.skip_extension_check == other.skip_extension_check
            && self.skip_registration == other.skip_registration
            && self.log_after_install == other.log_after_install
            && self.hook.is_some() == other.hook.is_some()
    }
}

#[cfg(feature = "shortcuts")]
impl Eq for Shortcuts {}

/// The points of the commit protocol at which [`Shortcuts::hook`] is called.
#[cfg(feature = "shortcuts")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitStep {
    /// Commit of a read-write transaction starts: nothing is locked yet (with
    /// `wait_before_lock`, the write timestamp has already been drawn and waited out).
    BeforeLock,
    /// The write set is locked.
    Locked,
    /// The write timestamp has been drawn (and, unless skipped, waited out).
    WriteTimestamp,
    /// Validation passed (or was skipped); logging and installation come next.
    Validated,
    /// The new versions are installed and unlocked (visible to readers); with the correct
    /// order the redo record was written before.
    Installed,
}
