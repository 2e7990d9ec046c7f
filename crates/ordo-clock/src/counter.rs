//! The invariant hardware counter: reading it, deciding whether it is invariant, and turning its
//! ticks into nanoseconds.
//!
//! # Mechanism
//! ORDO (EuroSys'18 §2.2) builds its clock on the per-core counters every modern CPU exposes:
//! the time-stamp counter (TSC) on x86_64 and the generic timer's virtual count `CNTVCT_EL0` on
//! aarch64. An *invariant* counter ticks at a constant rate whatever the core's frequency or
//! sleep state, and every core's counter is driven by one motherboard clock, so two cores'
//! counters differ by a constant offset: the skew ORDO bounds with `ORDO_BOUNDARY`
//! (see [`mod@crate::calibrate`]).
//!
//! A reading is one instruction sequence, chosen once by [`Counter::detect`]:
//!
//! | [`CounterKind`] | sequence | why |
//! |---|---|---|
//! | `Rdtscp` | `rdtscp; lfence` | `rdtscp` waits until every earlier instruction has executed and earlier loads are globally visible; the trailing `lfence` keeps later instructions from starting before the read |
//! | `LfenceRdtsc` | `lfence; rdtsc; lfence` | the same fence on both sides where `rdtscp` is missing (Linux `rdtsc_ordered`) |
//! | `Cntvct` | `isb; mrs cntvct_el0; isb` | `isb` flushes the pipeline so the read is neither hoisted above earlier nor sunk below later instructions |
//!
//! The sequences are written with `asm!` and without `nomem`, which also makes each one a
//! compiler barrier: the compiler can neither move memory accesses across a reading nor merge two
//! readings. (`core::arch::x86_64::_rdtsc` would leave the compiler's ordering unspecified.)
//! `core::arch::x86_64::__cpuid` answers the detection questions.
//!
//! # Invariants
//! * A reading on one core never decreases (the counter is monotonic per core).
//! * A reading is ordered after every load that precedes it in program order and before every
//!   instruction that follows it. The happens-before proof of `get_ts` (see [`crate::Clock`])
//!   and the calibration handshake ([`crate::handshake`]) both need exactly this: a reading taken
//!   after an Acquire load observed a value is later than the writer's reading that preceded its
//!   Release store.
//! * Invariance is decided by CPUID leaf `0x8000_0007` EDX bit 8 ("invariant TSC"), or by the
//!   kernel's `/proc/cpuinfo` flags `constant_tsc` *and* `nonstop_tsc` (hypervisors sometimes hide
//!   the CPUID bit but the kernel has verified the counter). The aarch64 generic timer is invariant
//!   by architecture. A counter that is not invariant must not back an ORDO clock; callers fall
//!   back to [`crate::SystemClock`].
//!
//! # Frequency and conversion
//! The tick rate comes, in order of preference, from CPUID leaf `0x15` (crystal clock times the
//! TSC/crystal ratio), the hypervisor's leaf `0x4000_0010`, CPUID leaf `0x16` (the nominal base
//! frequency), `CNTFRQ_EL0` on aarch64, or else it is measured against `CLOCK_MONOTONIC_RAW` over
//! [`MEASURE_WINDOW`]. [`FrequencySource`] records which one was used.
//!
//! Ticks become nanoseconds by the precomputed fixed-point multiply
//! `ns = (ticks * mult) >> 32` with `mult = round(10^9 * 2^32 / frequency_hz)` ([`TickConversion`]):
//! one 64×64→128-bit multiply and a shift on the hot path. The conversion is monotonic, so a
//! per-core monotonic counter stays monotonic in nanoseconds.
//!
//! An error in the frequency scales every nanosecond value by the same factor: ORDO's
//! correctness needs only that readings and the boundary are in the *same* units, which they are
//! because the boundary is measured in ticks and converted by the same [`TickConversion`]
//! (rounded up, see [`TickConversion::ticks_to_nanos_ceil`]). Only comparisons with real time
//! (leases, reports) see the error.

use std::fmt;
use std::time::Duration;

use crate::system::{CLOCK_MONOTONIC_RAW_ID, clock_nanos};

/// How long the fallback frequency measurement compares the counter with `CLOCK_MONOTONIC_RAW`.
pub const MEASURE_WINDOW: Duration = Duration::from_millis(50);

/// The bracketing attempts per measurement endpoint; the tightest bracket is kept.
const MEASURE_SAMPLES_MAX: usize = 16;

/// The lowest and highest plausible counter frequencies; outside them a measurement is rejected.
const FREQUENCY_HZ_MIN: u64 = 1_000_000;
const FREQUENCY_HZ_MAX: u64 = 100_000_000_000;

/// The fixed-point shift of [`TickConversion`].
const CONVERSION_SHIFT: u32 = 32;

const NANOS_PER_SEC: u64 = 1_000_000_000;

const _: () = assert!(FREQUENCY_HZ_MIN > 0);
// With f >= FREQUENCY_HZ_MIN the multiplier 10^9 * 2^32 / f fits comfortably in a u64.
const _: () = assert!(
    ((NANOS_PER_SEC as u128) << CONVERSION_SHIFT) / (FREQUENCY_HZ_MIN as u128) < u64::MAX as u128
);

/// The instruction sequence that reads the counter.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterKind {
    /// x86_64 `rdtscp; lfence`.
    Rdtscp,
    /// x86_64 `lfence; rdtsc; lfence`, where `rdtscp` is not available.
    LfenceRdtsc,
    /// aarch64 `isb; mrs cntvct_el0; isb`.
    Cntvct,
}

impl CounterKind {
    /// A short human-readable description, e.g. `"rdtscp (x86_64 TSC)"`.
    pub fn describe(self) -> &'static str {
        match self {
            CounterKind::Rdtscp => "rdtscp; lfence (x86_64 TSC)",
            CounterKind::LfenceRdtsc => "lfence; rdtsc; lfence (x86_64 TSC)",
            CounterKind::Cntvct => "isb; mrs cntvct_el0 (aarch64 generic timer)",
        }
    }
}

/// Whether the counter is invariant, and the evidence for the answer.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Invariance {
    /// CPUID leaf `0x8000_0007` EDX bit 8 (invariant TSC) is set.
    CpuidInvariantTsc,
    /// `/proc/cpuinfo` lists both `constant_tsc` and `nonstop_tsc`.
    CpuinfoFlags,
    /// The architecture guarantees it (the aarch64 generic timer).
    Architectural,
    /// No evidence of invariance: the counter must not back an ORDO clock.
    NotInvariant,
}

impl Invariance {
    /// Whether the counter may back an ORDO clock.
    pub fn is_invariant(self) -> bool {
        !matches!(self, Invariance::NotInvariant)
    }

    /// A short human-readable description of the evidence.
    pub fn describe(self) -> &'static str {
        match self {
            Invariance::CpuidInvariantTsc => "invariant (CPUID 0x80000007 EDX[8])",
            Invariance::CpuinfoFlags => "invariant (/proc/cpuinfo constant_tsc + nonstop_tsc)",
            Invariance::Architectural => "invariant (architectural)",
            Invariance::NotInvariant => "NOT invariant",
        }
    }
}

/// Where the counter frequency came from.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrequencySource {
    /// CPUID leaf `0x15`: crystal frequency times the TSC/crystal ratio.
    Cpuid15,
    /// The hypervisor's CPUID leaf `0x4000_0010` (TSC frequency in kHz).
    Hypervisor,
    /// CPUID leaf `0x16`: the nominal base frequency.
    Cpuid16,
    /// The aarch64 `CNTFRQ_EL0` register.
    Cntfrq,
    /// Measured against `CLOCK_MONOTONIC_RAW` over [`MEASURE_WINDOW`].
    MonotonicRaw,
    /// Given by the caller (for example a test or a configuration file).
    Given,
}

impl FrequencySource {
    /// A short human-readable description.
    pub fn describe(self) -> &'static str {
        match self {
            FrequencySource::Cpuid15 => "CPUID 0x15 (crystal ratio)",
            FrequencySource::Hypervisor => "hypervisor CPUID 0x40000010",
            FrequencySource::Cpuid16 => "CPUID 0x16 (base frequency)",
            FrequencySource::Cntfrq => "CNTFRQ_EL0",
            FrequencySource::MonotonicRaw => "measured against CLOCK_MONOTONIC_RAW over 50 ms",
            FrequencySource::Given => "given",
        }
    }
}

/// What cannot be done with the counter.
#[derive(Debug, thiserror::Error)]
pub enum CounterError {
    /// This architecture has no supported counter.
    #[error("no supported hardware counter on {arch}")]
    Unsupported {
        /// The target architecture.
        arch: &'static str,
    },
    /// The kernel makes the counter instruction fault in this process (`prctl(PR_SET_TSC)`).
    #[error("the time-stamp counter is disabled for this process (PR_TSC_SIGSEGV)")]
    Disabled,
    /// The frequency measurement produced no usable value.
    #[error("counter frequency measurement failed: {detail}")]
    Frequency {
        /// What went wrong.
        detail: String,
    },
    /// A frequency given by the caller (or a cache file) is outside the plausible range.
    #[error("implausible counter frequency {frequency_hz} Hz")]
    ImplausibleFrequency {
        /// The frequency.
        frequency_hz: u64,
    },
    /// Described counter information names a counter this machine does not read.
    #[error("counter {expected:?} described, but this machine reads {found:?}")]
    KindMismatch {
        /// The kind that was described.
        expected: CounterKind,
        /// The kind this machine uses.
        found: CounterKind,
    },
}

/// The fixed-point ticks→nanoseconds conversion `ns = (ticks * mult) >> 32`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TickConversion {
    mult: u64,
    frequency_hz: u64,
}

impl TickConversion {
    /// The conversion for a counter ticking at `frequency_hz`.
    pub fn new(frequency_hz: u64) -> Result<Self, CounterError> {
        if !(FREQUENCY_HZ_MIN..=FREQUENCY_HZ_MAX).contains(&frequency_hz) {
            return Err(CounterError::ImplausibleFrequency { frequency_hz });
        }
        let scaled = (u128::from(NANOS_PER_SEC) << CONVERSION_SHIFT) + u128::from(frequency_hz) / 2;
        let mult = u64::try_from(scaled / u128::from(frequency_hz))
            .map_err(|_| CounterError::ImplausibleFrequency { frequency_hz })?;
        debug_assert!(mult > 0);
        Ok(TickConversion { mult, frequency_hz })
    }

    /// The frequency this conversion was built for.
    pub fn frequency_hz(self) -> u64 {
        self.frequency_hz
    }

    /// `ticks` in nanoseconds, rounded down (saturating at `u64::MAX`).
    #[inline]
    pub fn ticks_to_nanos(self, ticks: u64) -> u64 {
        let ns = (u128::from(ticks) * u128::from(self.mult)) >> CONVERSION_SHIFT;
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// `ticks` in nanoseconds, rounded up: for widths that must not shrink (the boundary).
    pub fn ticks_to_nanos_ceil(self, ticks: u64) -> u64 {
        let product = u128::from(ticks) * u128::from(self.mult);
        let ns = (product + ((1u128 << CONVERSION_SHIFT) - 1)) >> CONVERSION_SHIFT;
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// A signed tick difference in nanoseconds, rounded away from zero.
    pub fn signed_ticks_to_nanos(self, ticks: i64) -> i64 {
        let magnitude = self.ticks_to_nanos_ceil(ticks.unsigned_abs());
        let magnitude = i64::try_from(magnitude).unwrap_or(i64::MAX);
        if ticks < 0 { -magnitude } else { magnitude }
    }

    /// `nanos` in ticks, rounded up.
    pub fn nanos_to_ticks_ceil(self, nanos: u64) -> u64 {
        let product = u128::from(nanos) * u128::from(self.frequency_hz);
        let ticks = product.div_ceil(u128::from(NANOS_PER_SEC));
        u64::try_from(ticks).unwrap_or(u64::MAX)
    }
}

/// The serialisable description of a counter: what was detected and where the frequency came
/// from. Stored in a [`crate::Calibration`].
#[derive(Clone, Copy, PartialEq, Eq, Debug, serde::Serialize, serde::Deserialize)]
pub struct CounterInfo {
    /// The instruction sequence.
    pub kind: CounterKind,
    /// Whether the counter is invariant, and why we think so.
    pub invariance: Invariance,
    /// Ticks per second.
    pub frequency_hz: u64,
    /// Where `frequency_hz` came from.
    pub frequency_source: FrequencySource,
}

impl fmt::Display for CounterInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, {}, {:.3} MHz from {}",
            self.kind.describe(),
            self.invariance.describe(),
            self.frequency_hz as f64 / 1e6,
            self.frequency_source.describe()
        )
    }
}

/// What [`Counter::probe`] finds without measuring anything.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CounterProbe {
    /// The instruction sequence this machine would use.
    pub kind: CounterKind,
    /// Whether the counter is invariant.
    pub invariance: Invariance,
}

/// The hardware counter of this machine, ready to read.
#[derive(Clone, Copy, Debug)]
pub struct Counter {
    info: CounterInfo,
    conversion: TickConversion,
}

impl Counter {
    /// Detects the counter kind and invariance (cheap: CPUID and `/proc/cpuinfo`), without the
    /// frequency.
    pub fn probe() -> Result<CounterProbe, CounterError> {
        let kind = arch::detect_kind()?;
        Ok(CounterProbe { kind, invariance: arch::detect_invariance() })
    }

    /// Detects the counter and its frequency. Takes [`MEASURE_WINDOW`] when no CPUID leaf or
    /// register names the frequency.
    pub fn detect() -> Result<Self, CounterError> {
        let probe = Self::probe()?;
        let (frequency_hz, frequency_source) = match arch::frequency_from_hardware() {
            Some(found) => found,
            None => (measure_frequency(probe.kind)?, FrequencySource::MonotonicRaw),
        };
        Self::from_parts(probe, frequency_hz, frequency_source)
    }

    /// The counter described by `info` (for example loaded from a cached calibration): the kind
    /// is re-detected and must match; the frequency is taken from `info`.
    pub fn from_info(info: &CounterInfo) -> Result<Self, CounterError> {
        let probe = Self::probe()?;
        if probe.kind != info.kind {
            return Err(CounterError::KindMismatch { expected: info.kind, found: probe.kind });
        }
        Self::from_parts(probe, info.frequency_hz, info.frequency_source)
    }

    /// This machine's counter, with a frequency given by the caller.
    pub fn with_frequency(frequency_hz: u64) -> Result<Self, CounterError> {
        Self::from_parts(Self::probe()?, frequency_hz, FrequencySource::Given)
    }

    fn from_parts(
        probe: CounterProbe,
        frequency_hz: u64,
        frequency_source: FrequencySource,
    ) -> Result<Self, CounterError> {
        let conversion = TickConversion::new(frequency_hz)?;
        let info = CounterInfo {
            kind: probe.kind,
            invariance: probe.invariance,
            frequency_hz,
            frequency_source,
        };
        Ok(Counter { info, conversion })
    }

    /// What was detected.
    pub fn info(&self) -> CounterInfo {
        self.info
    }

    /// The ticks→nanoseconds conversion.
    pub fn conversion(&self) -> TickConversion {
        self.conversion
    }

    /// One ordered reading of the counter, in ticks. See the module docs for the ordering.
    #[inline]
    pub fn read_ticks(&self) -> u64 {
        arch::read(self.info.kind)
    }

    /// One ordered reading of the counter, in nanoseconds.
    #[inline]
    pub fn read_nanos(&self) -> u64 {
        self.conversion.ticks_to_nanos(self.read_ticks())
    }
}

/// Measures the counter frequency against `CLOCK_MONOTONIC_RAW` over [`MEASURE_WINDOW`].
fn measure_frequency(kind: CounterKind) -> Result<u64, CounterError> {
    let start = bracketed_sample(kind);
    std::thread::sleep(MEASURE_WINDOW);
    let end = bracketed_sample(kind);
    let ticks = end.ticks.saturating_sub(start.ticks);
    let nanos = end.nanos.saturating_sub(start.nanos);
    if ticks == 0 || nanos == 0 {
        return Err(CounterError::Frequency {
            detail: format!("no progress: {ticks} ticks in {nanos} ns"),
        });
    }
    let hz = u128::from(ticks) * u128::from(NANOS_PER_SEC) / u128::from(nanos);
    let hz = u64::try_from(hz).map_err(|_| CounterError::Frequency {
        detail: format!("{ticks} ticks in {nanos} ns overflows"),
    })?;
    if !(FREQUENCY_HZ_MIN..=FREQUENCY_HZ_MAX).contains(&hz) {
        return Err(CounterError::Frequency { detail: format!("implausible result {hz} Hz") });
    }
    Ok(hz)
}

struct Sample {
    nanos: u64,
    ticks: u64,
}

/// A counter reading paired with the middle of the tightest `CLOCK_MONOTONIC_RAW` bracket around
/// it, out of [`MEASURE_SAMPLES_MAX`] attempts.
fn bracketed_sample(kind: CounterKind) -> Sample {
    let mut best: Option<(u64, Sample)> = None;
    for _ in 0..MEASURE_SAMPLES_MAX {
        let before = clock_nanos(CLOCK_MONOTONIC_RAW_ID);
        let ticks = arch::read(kind);
        let after = clock_nanos(CLOCK_MONOTONIC_RAW_ID);
        let width = after.saturating_sub(before);
        let sample = Sample { nanos: before + width / 2, ticks };
        if best.as_ref().is_none_or(|(w, _)| width < *w) {
            best = Some((width, sample));
        }
    }
    match best {
        Some((_, sample)) => sample,
        None => Sample { nanos: clock_nanos(CLOCK_MONOTONIC_RAW_ID), ticks: arch::read(kind) },
    }
}

/// Whether `/proc/cpuinfo` text declares an invariant TSC (`constant_tsc` and `nonstop_tsc` on
/// the first `flags` line).
pub fn cpuinfo_declares_invariant(cpuinfo: &str) -> bool {
    let Some(flags) = cpuinfo.lines().find(|l| l.starts_with("flags")) else {
        return false;
    };
    let Some((_, list)) = flags.split_once(':') else {
        return false;
    };
    let mut constant = false;
    let mut nonstop = false;
    for flag in list.split_whitespace() {
        constant |= flag == "constant_tsc";
        nonstop |= flag == "nonstop_tsc";
    }
    constant && nonstop
}

#[cfg(target_arch = "x86_64")]
mod arch {
    use core::arch::x86_64::__cpuid;

    use super::{CounterError, CounterKind, FrequencySource, Invariance};

    const LEAF_EXT_MAX: u32 = 0x8000_0000;
    const LEAF_EXT_FEATURES: u32 = 0x8000_0001;
    const LEAF_EXT_POWER: u32 = 0x8000_0007;
    const LEAF_TSC_CRYSTAL: u32 = 0x15;
    const LEAF_FREQUENCY: u32 = 0x16;
    const LEAF_HYPERVISOR_MAX: u32 = 0x4000_0000;
    const LEAF_HYPERVISOR_TSC: u32 = 0x4000_0010;
    const EDX_RDTSCP: u32 = 1 << 27;
    const EDX_INVARIANT_TSC: u32 = 1 << 8;
    const ECX_HYPERVISOR: u32 = 1 << 31;

    pub(super) fn detect_kind() -> Result<CounterKind, CounterError> {
        if tsc_disabled_by_prctl() {
            return Err(CounterError::Disabled);
        }
        let ext_max = __cpuid(LEAF_EXT_MAX).eax;
        if ext_max >= LEAF_EXT_FEATURES && __cpuid(LEAF_EXT_FEATURES).edx & EDX_RDTSCP != 0 {
            Ok(CounterKind::Rdtscp)
        } else {
            Ok(CounterKind::LfenceRdtsc)
        }
    }

    fn tsc_disabled_by_prctl() -> bool {
        let mut mode: libc::c_int = 0;
        // SAFETY: PR_GET_TSC writes one c_int through the pointer, which points to `mode`, a live
        // local of that type; the remaining arguments are ignored by this prctl.
        let rc = unsafe { libc::prctl(libc::PR_GET_TSC, &mut mode as *mut libc::c_int) };
        rc == 0 && mode == libc::PR_TSC_SIGSEGV
    }

    pub(super) fn detect_invariance() -> Invariance {
        let ext_max = __cpuid(LEAF_EXT_MAX).eax;
        if ext_max >= LEAF_EXT_POWER && __cpuid(LEAF_EXT_POWER).edx & EDX_INVARIANT_TSC != 0 {
            return Invariance::CpuidInvariantTsc;
        }
        match std::fs::read_to_string("/proc/cpuinfo") {
            Ok(text) if super::cpuinfo_declares_invariant(&text) => Invariance::CpuinfoFlags,
            _ => Invariance::NotInvariant,
        }
    }

    pub(super) fn frequency_from_hardware() -> Option<(u64, FrequencySource)> {
        let basic_max = __cpuid(0).eax;
        if basic_max >= LEAF_TSC_CRYSTAL {
            let leaf = __cpuid(LEAF_TSC_CRYSTAL);
            let (denominator, numerator, crystal_hz) = (leaf.eax, leaf.ebx, leaf.ecx);
            if denominator != 0 && numerator != 0 && crystal_hz != 0 {
                let hz = u64::from(crystal_hz) * u64::from(numerator) / u64::from(denominator);
                return Some((hz, FrequencySource::Cpuid15));
            }
        }
        if __cpuid(1).ecx & ECX_HYPERVISOR != 0
            && __cpuid(LEAF_HYPERVISOR_MAX).eax >= LEAF_HYPERVISOR_TSC
        {
            let khz = __cpuid(LEAF_HYPERVISOR_TSC).eax;
            if khz != 0 {
                return Some((u64::from(khz) * 1_000, FrequencySource::Hypervisor));
            }
        }
        if basic_max >= LEAF_FREQUENCY {
            let base_mhz = __cpuid(LEAF_FREQUENCY).eax & 0xffff;
            if base_mhz != 0 {
                return Some((u64::from(base_mhz) * 1_000_000, FrequencySource::Cpuid16));
            }
        }
        None
    }

    #[inline(always)]
    pub(super) fn read(kind: CounterKind) -> u64 {
        let lo: u32;
        let hi: u32;
        match kind {
            CounterKind::Rdtscp => {
                // SAFETY: `rdtscp` exists on this CPU: `detect_kind` chose this kind only after
                // CPUID 0x8000_0001 EDX[27] said so, and a `CounterKind` reaches here only through
                // a `Counter` built by `detect_kind`. The sequence writes only the named registers
                // (eax, edx, ecx = TSC_AUX) and touches no memory or stack; it is left without
                // `nomem` on purpose so that it is a compiler barrier (module docs).
                unsafe {
                    core::arch::asm!(
                        "rdtscp",
                        "lfence",
                        out("eax") lo,
                        out("edx") hi,
                        out("ecx") _,
                        options(nostack, preserves_flags),
                    );
                }
            }
            CounterKind::LfenceRdtsc | CounterKind::Cntvct => {
                // SAFETY: `lfence` (SSE2) and `rdtsc` are part of the x86_64 baseline. `Cntvct`
                // never reaches here on x86_64 (`detect_kind` never returns it); reading the TSC
                // for it is still sound. Only eax and edx are written; no memory or stack is
                // touched; no `nomem`, so it is a compiler barrier (module docs).
                unsafe {
                    core::arch::asm!(
                        "lfence",
                        "rdtsc",
                        "lfence",
                        out("eax") lo,
                        out("edx") hi,
                        options(nostack, preserves_flags),
                    );
                }
            }
        }
        (u64::from(hi) << 32) | u64::from(lo)
    }
}

#[cfg(target_arch = "aarch64")]
mod arch {
    use super::{CounterError, CounterKind, FrequencySource, Invariance};

    pub(super) fn detect_kind() -> Result<CounterKind, CounterError> {
        Ok(CounterKind::Cntvct)
    }

    pub(super) fn detect_invariance() -> Invariance {
        Invariance::Architectural
    }

    pub(super) fn frequency_from_hardware() -> Option<(u64, FrequencySource)> {
        let hz: u64;
        // SAFETY: CNTFRQ_EL0 is readable at EL0 on Linux (the kernel enables user access to the
        // generic timer); the instruction writes one general register and touches no memory.
        unsafe {
            core::arch::asm!("mrs {hz}, cntfrq_el0", hz = out(reg) hz, options(nomem, nostack, preserves_flags));
        }
        (hz != 0).then_some((hz, FrequencySource::Cntfrq))
    }

    #[inline(always)]
    pub(super) fn read(_kind: CounterKind) -> u64 {
        let ticks: u64;
        // SAFETY: CNTVCT_EL0 is readable at EL0 on Linux; `isb` has no operands. The sequence
        // writes one general register and touches no memory or stack; it is left without
        // `nomem` on purpose so that it is a compiler barrier (module docs).
        unsafe {
            core::arch::asm!(
                "isb",
                "mrs {ticks}, cntvct_el0",
                "isb",
                ticks = out(reg) ticks,
                options(nostack, preserves_flags),
            );
        }
        ticks
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod arch {
    use super::{CounterError, CounterKind, FrequencySource, Invariance};

    pub(super) fn detect_kind() -> Result<CounterKind, CounterError> {
        Err(CounterError::Unsupported { arch: std::env::consts::ARCH })
    }

    pub(super) fn detect_invariance() -> Invariance {
        Invariance::NotInvariant
    }

    pub(super) fn frequency_from_hardware() -> Option<(u64, FrequencySource)> {
        None
    }

    /// Unreachable: no `Counter` can be built on this architecture (`detect_kind` fails).
    pub(super) fn read(_kind: CounterKind) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_round_trips_within_one_tick() {
        for hz in [1_000_000u64, 24_000_000, 1_999_993_000, 2_000_000_000, 3_700_000_000] {
            let c = TickConversion::new(hz).unwrap();
            for ticks in [0u64, 1, 7, 1_000, 123_456_789, 1 << 40] {
                let floor = c.ticks_to_nanos(ticks);
                let ceil = c.ticks_to_nanos_ceil(ticks);
                assert!(floor <= ceil);
                assert!(ceil - floor <= 1);
                let exact = u128::from(ticks) * 1_000_000_000 / u128::from(hz);
                let floor_err = (i128::try_from(exact).unwrap() - i128::from(floor)).abs();
                assert!(floor_err <= 1 + i128::from(ticks >> 30), "hz={hz} ticks={ticks}");
                assert!(c.nanos_to_ticks_ceil(ceil) >= ticks.saturating_sub(1 + (ticks >> 30)));
            }
        }
    }

    #[test]
    fn conversion_is_monotonic() {
        let c = TickConversion::new(2_345_678_901).unwrap();
        let mut last = 0;
        for ticks in (0..100_000u64).map(|t| t * 37) {
            let ns = c.ticks_to_nanos(ticks);
            assert!(ns >= last);
            last = ns;
        }
    }

    #[test]
    fn signed_conversion_rounds_away_from_zero() {
        let c = TickConversion::new(3_000_000_000).unwrap();
        assert_eq!(c.signed_ticks_to_nanos(0), 0);
        assert_eq!(c.signed_ticks_to_nanos(1), 1);
        assert_eq!(c.signed_ticks_to_nanos(-1), -1);
        assert_eq!(c.signed_ticks_to_nanos(3_000), 1_000);
        assert_eq!(c.signed_ticks_to_nanos(-3_000), -1_000);
    }

    #[test]
    fn implausible_frequencies_are_rejected() {
        assert!(TickConversion::new(0).is_err());
        assert!(TickConversion::new(999).is_err());
        assert!(TickConversion::new(u64::MAX).is_err());
    }

    #[test]
    fn cpuinfo_flags_need_both() {
        let both = "processor : 0\nflags\t\t: fpu tsc constant_tsc rdtscp nonstop_tsc\n";
        let one = "processor : 0\nflags\t\t: fpu tsc constant_tsc rdtscp\n";
        assert!(cpuinfo_declares_invariant(both));
        assert!(!cpuinfo_declares_invariant(one));
        assert!(!cpuinfo_declares_invariant(""));
        assert!(!cpuinfo_declares_invariant("flags"));
    }

    #[test]
    fn detection_gives_a_plausible_counter() {
        let counter = match Counter::detect() {
            Ok(counter) => counter,
            Err(CounterError::Unsupported { .. } | CounterError::Disabled) => return,
            Err(e) => panic!("{e}"),
        };
        let info = counter.info();
        assert!(info.frequency_hz >= FREQUENCY_HZ_MIN);
        assert!(info.frequency_hz <= FREQUENCY_HZ_MAX);
        assert_ne!(counter.read_ticks(), 0);
        let again = Counter::from_info(&info).unwrap();
        assert_eq!(again.info(), info);
    }
}
