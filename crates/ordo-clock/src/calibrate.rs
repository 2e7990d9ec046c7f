//! Calibration: measuring `ORDO_BOUNDARY`, the largest offset between any two cores' counters
//! (ORDO §3.2, Fig. 4, Table 1, Fig. 9).
//!
//! # Mechanism
//! For every unordered pair of cores `{i, j}` two threads, pinned to `i` and `j`, run the
//! [`crate::handshake`] ping-pong for up to `runs` rounds. Each round measures both one-way
//! deltas `δ_ij` (stamp on `i`, reading on `j`) and `δ_ji`; each is the physical offset plus
//! the message latency. Per direction we keep the **minimum** over the rounds (the least
//! latency-polluted sample, Fig. 4 line 19); per pair the **maximum** of the two directions,
//! because we do not know which counter is ahead (line 31; by the Lemma of §3.2.2 it is at least
//! the physical offset); over all pairs the **maximum** again (line 30): that is the boundary `B`.
//!
//! Pairs are scheduled as a round-robin tournament (the circle method): `N − 1` rounds (`N` for
//! odd `N`) of disjoint pairs, and the pairs of one round run concurrently, each on its own two
//! cores. Concurrent pairs can only add latency, which makes the result larger, never smaller.
//!
//! # Erring large
//! A boundary that is too small breaks correctness silently (`get_ts` would return timestamps
//! that are not yet in the past on some core); one that is too large only costs waiting. So:
//! * every pair is always measured, in both directions — the time budget
//!   ([`CalibrateOptions::time_budget`], split evenly over the rounds) only shortens sessions, and
//!   never below [`RUNS_MIN`] rounds (fewer samples give a larger minimum, never a smaller one);
//! * ticks become nanoseconds rounded up, plus [`ROUNDING_SLACK_NANOS`] for the rounding down of
//!   the two readings being compared (see [`crate::counter::TickConversion`]);
//! * a session that fails is an error, never a skipped pair.
//!
//! # Invariants of a [`Calibration`] (checked by [`Calibration::validate`])
//! * `cores` is sorted and duplicate-free; `offsets` holds exactly one entry per ordered pair of
//!   distinct cores;
//! * `boundary_ticks >= max(0, every offset)`, and `boundary_nanos` is at least its conversion
//!   rounded up.

use std::io;
use std::thread;
use std::time::{Duration, Instant};

use crate::cores::{self, CoreError};
use crate::counter::{Counter, CounterError, CounterInfo, TickConversion};
use crate::handshake::{HandshakeError, Mailbox, SideOutcome};

/// The default number of ping-pong rounds per pair (the paper uses 100 000).
pub const DEFAULT_RUNS: u64 = 100_000;

/// The default bound on the whole handshake phase.
pub const DEFAULT_TIME_BUDGET: Duration = Duration::from_secs(10);

/// The rounds a session always runs (or `runs`, if smaller), even past the time budget.
pub const RUNS_MIN: u64 = 100;

/// How long past its deadline a session may wait for a silent peer before failing.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Added to the boundary in nanoseconds: two readings converted with rounding down may differ by
/// one more nanosecond than their tick difference converted with rounding up.
pub const ROUNDING_SLACK_NANOS: u64 = 1;

/// What to calibrate and how hard to try.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalibrateOptions {
    /// Ping-pong rounds per pair; each round samples both directions. Must be at least 1.
    pub runs: u64,
    /// The cores to calibrate; `None` = every usable core (online and allowed). Duplicates are
    /// ignored.
    pub cores: Option<Vec<usize>>,
    /// A bound on the handshake phase, split evenly over the tournament rounds.
    pub time_budget: Duration,
    /// Whether disjoint pairs are measured concurrently.
    pub parallel: bool,
}

impl Default for CalibrateOptions {
    fn default() -> Self {
        CalibrateOptions {
            runs: DEFAULT_RUNS,
            cores: None,
            time_budget: DEFAULT_TIME_BUDGET,
            parallel: true,
        }
    }
}

/// Why a calibration could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    /// `runs` was 0.
    #[error("runs must be at least 1")]
    RunsZero,
    /// The core list was empty.
    #[error("no cores to calibrate")]
    NoCores,
    /// A requested core is not online (or does not exist).
    #[error("core {core} is not online (online cores: {online})")]
    CoreOffline {
        /// The core.
        core: usize,
        /// The online cores, as a list like `0-3,5`.
        online: String,
    },
    /// A requested core is online but outside this process's affinity mask.
    #[error("core {core} is not in this process's affinity mask (allowed cores: {allowed})")]
    CoreNotAllowed {
        /// The core.
        core: usize,
        /// The allowed cores, as a list like `0-3,5`.
        allowed: String,
    },
    /// Reading core sets or pinning failed.
    #[error(transparent)]
    Cores(#[from] CoreError),
    /// The counter could not be detected.
    #[error(transparent)]
    Counter(#[from] CounterError),
    /// A calibration thread could not be started.
    #[error("cannot start a calibration thread: {0}")]
    Spawn(io::Error),
    /// The handshake between two cores failed.
    #[error("handshake between cores {a} and {b} failed: {source}")]
    Handshake {
        /// The initiator's core.
        a: usize,
        /// The responder's core.
        b: usize,
        /// What went wrong.
        source: HandshakeError,
    },
    /// A calibration thread panicked (a bug).
    #[error("a calibration thread panicked")]
    ThreadPanicked,
}

/// The minimum one-way delta measured from one core to another (one cell of ORDO Fig. 9).
#[derive(Clone, Copy, PartialEq, Eq, Debug, serde::Serialize, serde::Deserialize)]
pub struct PairOffset {
    /// The core whose counter stamped the message.
    pub from: usize,
    /// The core that received it and read its own counter.
    pub to: usize,
    /// `min(reading on to − stamp on from)`, in ticks.
    pub min_delta_ticks: i64,
    /// The same in nanoseconds, rounded away from zero.
    pub min_delta_nanos: i64,
    /// The messages this minimum was taken over.
    pub runs: u64,
}

/// The result of a calibration: the boundary, the per-pair matrix and what it was measured with.
#[derive(Clone, PartialEq, Eq, Debug, serde::Serialize, serde::Deserialize)]
pub struct Calibration {
    /// The counter and its frequency.
    pub counter: CounterInfo,
    /// The CPU model (`/proc/cpuinfo`).
    pub cpu_model: String,
    /// The calibrated cores, sorted.
    pub cores: Vec<usize>,
    /// The rounds per pair that were asked for.
    pub runs_requested: u64,
    /// One entry per ordered pair of distinct cores, sorted by `(from, to)`.
    pub offsets: Vec<PairOffset>,
    /// `ORDO_BOUNDARY` in ticks: `max(0, max over offsets)`.
    pub boundary_ticks: u64,
    /// `ORDO_BOUNDARY` in nanoseconds (rounded up, plus [`ROUNDING_SLACK_NANOS`]).
    pub boundary_nanos: u64,
    /// The smallest pairwise offset in nanoseconds (ORDO Table 1 *min*); `None` with one core.
    pub offset_nanos_min: Option<i64>,
    /// The largest pairwise offset in nanoseconds (ORDO Table 1 *max*); `None` with one core.
    pub offset_nanos_max: Option<i64>,
    /// Whether the time budget cut some session short of `runs_requested`.
    pub budget_exhausted: bool,
    /// Wall time of the handshake phase, in milliseconds.
    pub elapsed_ms: u64,
}

impl Calibration {
    /// The offset measured from `from` to `to`.
    pub fn offset(&self, from: usize, to: usize) -> Option<&PairOffset> {
        self.offsets.iter().find(|p| p.from == from && p.to == to)
    }

    /// The smallest pairwise offset (ORDO Table 1 *min*), or `None` with fewer than two cores.
    pub fn min_offset(&self) -> Option<&PairOffset> {
        self.offsets.iter().min_by_key(|p| p.min_delta_ticks)
    }

    /// The largest pairwise offset (ORDO Table 1 *max*, which is the boundary unless every
    /// offset is negative), or `None` with fewer than two cores.
    pub fn max_offset(&self) -> Option<&PairOffset> {
        self.offsets.iter().max_by_key(|p| p.min_delta_ticks)
    }

    /// The smallest number of messages any direction was measured with.
    pub fn runs_min(&self) -> Option<u64> {
        self.offsets.iter().map(|p| p.runs).min()
    }

    /// The offset matrix in nanoseconds: row = `from`, column = `to`, both indexed like
    /// [`Calibration::cores`]; the diagonal is `None`.
    pub fn matrix_nanos(&self) -> Vec<Vec<Option<i64>>> {
        self.cores
            .iter()
            .map(|&from| {
                self.cores
                    .iter()
                    .map(|&to| self.offset(from, to).map(|p| p.min_delta_nanos))
                    .collect()
            })
            .collect()
    }

    /// Checks the invariants listed in the module docs; used before trusting a cached value.
    pub fn validate(&self) -> Result<(), String> {
        if self.cores.is_empty() {
            return Err("no cores".to_owned());
        }
        if !self.cores.windows(2).all(|w| w[0] < w[1]) {
            return Err("cores are not sorted and unique".to_owned());
        }
        if self.runs_requested == 0 {
            return Err("runs_requested is 0".to_owned());
        }
        let conversion =
            TickConversion::new(self.counter.frequency_hz).map_err(|e| e.to_string())?;
        let n = self.cores.len();
        if self.offsets.len() != n * (n - 1) {
            return Err(format!("{} offsets for {n} cores", self.offsets.len()));
        }
        for (i, p) in self.offsets.iter().enumerate() {
            let known = |c| self.cores.binary_search(&c).is_ok();
            if p.from == p.to || !known(p.from) || !known(p.to) {
                return Err(format!("offset {} -> {} names a foreign pair", p.from, p.to));
            }
            if self.offsets[..i].iter().any(|q| q.from == p.from && q.to == p.to) {
                return Err(format!("offset {} -> {} appears twice", p.from, p.to));
            }
            if p.runs == 0 {
                return Err(format!("offset {} -> {} has no runs", p.from, p.to));
            }
            if u64::try_from(p.min_delta_ticks).is_ok_and(|d| d > self.boundary_ticks) {
                return Err(format!("offset {} -> {} exceeds the boundary", p.from, p.to));
            }
        }
        let (offset_nanos_min, offset_nanos_max) = offset_range_nanos(&self.offsets);
        if (self.offset_nanos_min, self.offset_nanos_max) != (offset_nanos_min, offset_nanos_max) {
            return Err("offset_nanos_min/max disagree with the offsets".to_owned());
        }
        let nanos_min = conversion.ticks_to_nanos_ceil(self.boundary_ticks);
        if self.boundary_nanos < nanos_min {
            return Err(format!(
                "boundary {} ns is below its {} ticks ({nanos_min} ns)",
                self.boundary_nanos, self.boundary_ticks
            ));
        }
        Ok(())
    }
}

/// The boundary of a set of offsets: `max(0, max δ)` in ticks, and in nanoseconds rounded up
/// plus [`ROUNDING_SLACK_NANOS`].
pub fn boundary_of(offsets: &[PairOffset], conversion: TickConversion) -> (u64, u64) {
    let max_delta = offsets.iter().map(|p| p.min_delta_ticks).max().unwrap_or(0);
    let ticks = u64::try_from(max_delta).unwrap_or(0);
    let nanos = conversion.ticks_to_nanos_ceil(ticks).saturating_add(ROUNDING_SLACK_NANOS);
    (ticks, nanos)
}

/// The smallest and largest `min_delta_nanos` of `offsets` (ORDO Table 1), `None` when empty.
pub fn offset_range_nanos(offsets: &[PairOffset]) -> (Option<i64>, Option<i64>) {
    let nanos = offsets.iter().map(|p| p.min_delta_nanos);
    (nanos.clone().min(), nanos.max())
}

/// The round-robin tournament over `cores` (circle method): every unordered pair appears in
/// exactly one round, and the pairs of a round are disjoint.
pub fn tournament(cores: &[usize]) -> Vec<Vec<(usize, usize)>> {
    let mut slots: Vec<Option<usize>> = cores.iter().copied().map(Some).collect();
    if slots.len() % 2 == 1 {
        slots.push(None);
    }
    let n = slots.len();
    let mut rounds = Vec::new();
    for _ in 1..n {
        let round: Vec<(usize, usize)> =
            (0..n / 2).filter_map(|i| Some((slots[i]?, slots[n - 1 - i]?))).collect();
        if !round.is_empty() {
            rounds.push(round);
        }
        // Keep slot 0 fixed and rotate the others by one.
        slots[1..].rotate_right(1);
    }
    rounds
}

/// Resolves and checks the requested core set against the usable cores.
fn resolve_cores(requested: Option<&[usize]>) -> Result<Vec<usize>, CalibrateError> {
    let usable = cores::usable_cores()?;
    let Some(requested) = requested else {
        return if usable.is_empty() { Err(CalibrateError::NoCores) } else { Ok(usable) };
    };
    let mut wanted = requested.to_vec();
    wanted.sort_unstable();
    wanted.dedup();
    if wanted.is_empty() {
        return Err(CalibrateError::NoCores);
    }
    let online = cores::online_cores().unwrap_or_else(|_| usable.clone());
    let allowed = cores::allowed_cores()?;
    for &core in &wanted {
        if online.binary_search(&core).is_err() {
            return Err(CalibrateError::CoreOffline {
                core,
                online: cores::format_core_list(&online),
            });
        }
        if allowed.binary_search(&core).is_err() {
            return Err(CalibrateError::CoreNotAllowed {
                core,
                allowed: cores::format_core_list(&allowed),
            });
        }
    }
    Ok(wanted)
}

/// Measures `ORDO_BOUNDARY` on this machine. See the module docs.
///
/// # Errors
/// Bad input ([`CalibrateError::RunsZero`], [`CalibrateError::NoCores`],
/// [`CalibrateError::CoreOffline`], [`CalibrateError::CoreNotAllowed`]) is reported before any
/// thread starts; then counter detection, pinning and handshake failures.
pub fn calibrate(options: &CalibrateOptions) -> Result<Calibration, CalibrateError> {
    if options.runs == 0 {
        return Err(CalibrateError::RunsZero);
    }
    let cores = resolve_cores(options.cores.as_deref())?;
    let counter = Counter::detect()?;
    calibrate_with(&counter, &cores, options)
}

/// [`calibrate`] with an already detected counter and a resolved core set.
fn calibrate_with(
    counter: &Counter,
    cores: &[usize],
    options: &CalibrateOptions,
) -> Result<Calibration, CalibrateError> {
    let rounds: Vec<Vec<(usize, usize)>> = if options.parallel {
        tournament(cores)
    } else {
        tournament(cores).into_iter().flatten().map(|pair| vec![pair]).collect()
    };
    let budget_per_round = options
        .time_budget
        .checked_div(u32::try_from(rounds.len().max(1)).unwrap_or(u32::MAX))
        .unwrap_or(Duration::ZERO);
    let rounds_min = options.runs.min(RUNS_MIN);
    let started = Instant::now();
    let mut offsets = Vec::with_capacity(cores.len() * cores.len().saturating_sub(1));
    let mut budget_exhausted = false;
    for round in &rounds {
        let deadline = Instant::now() + budget_per_round;
        let sessions = run_round(counter, round, options.runs, rounds_min, deadline)?;
        for session in sessions {
            budget_exhausted |= session.rounds < options.runs;
            offsets.extend(session.offsets(counter.conversion()));
        }
    }
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    offsets.sort_by_key(|p| (p.from, p.to));
    let (boundary_ticks, boundary_nanos) = boundary_of(&offsets, counter.conversion());
    let (offset_nanos_min, offset_nanos_max) = offset_range_nanos(&offsets);
    let calibration = Calibration {
        counter: counter.info(),
        cpu_model: cores::cpu_model(),
        cores: cores.to_vec(),
        runs_requested: options.runs,
        offsets,
        boundary_ticks,
        boundary_nanos,
        offset_nanos_min,
        offset_nanos_max,
        budget_exhausted,
        elapsed_ms,
    };
    debug_assert_eq!(calibration.validate(), Ok(()));
    Ok(calibration)
}

/// One pair's session: the initiator `a`, the responder `b`, and what each side received.
struct Session {
    a: usize,
    b: usize,
    /// The responder's reception: the `a → b` direction.
    a_to_b: SideOutcome,
    /// The initiator's reception: the `b → a` direction.
    b_to_a: SideOutcome,
    /// Completed rounds.
    rounds: u64,
}

impl Session {
    fn offsets(&self, conversion: TickConversion) -> [PairOffset; 2] {
        let offset = |from, to, side: &SideOutcome| {
            // Every session runs at least one round, so both sides received a message; a
            // missing minimum would make this pair read as 0, so fall back to "unbounded".
            let ticks = side.min_delta_ticks.unwrap_or(i64::MAX);
            PairOffset {
                from,
                to,
                min_delta_ticks: ticks,
                min_delta_nanos: conversion.signed_ticks_to_nanos(ticks),
                runs: side.received,
            }
        };
        [offset(self.a, self.b, &self.a_to_b), offset(self.b, self.a, &self.b_to_a)]
    }
}

type SideResult = Result<SideOutcome, CalibrateError>;

/// Runs the disjoint pairs of one tournament round concurrently.
fn run_round(
    counter: &Counter,
    pairs: &[(usize, usize)],
    runs: u64,
    rounds_min: u64,
    deadline: Instant,
) -> Result<Vec<Session>, CalibrateError> {
    let mailboxes: Vec<Mailbox> = pairs.iter().map(|_| Mailbox::new()).collect();
    let stall_deadline = deadline + STALL_TIMEOUT;
    let results: Vec<(SideResult, SideResult)> = thread::scope(|scope| {
        let mut running = Vec::with_capacity(pairs.len());
        for (&(a, b), mailbox) in pairs.iter().zip(&mailboxes) {
            let responder = thread::Builder::new()
                .name(format!("ordo-calibrate-{b}"))
                .spawn_scoped(scope, move || -> SideResult {
                    if let Err(e) = cores::pin_current_thread(b) {
                        mailbox.abort();
                        return Err(e.into());
                    }
                    mailbox
                        .run_responder(|| counter.read_ticks(), || Instant::now() > stall_deadline)
                        .map_err(|source| CalibrateError::Handshake { a, b, source })
                });
            let responder = match responder {
                Ok(handle) => handle,
                Err(e) => {
                    running.push(Err(CalibrateError::Spawn(e)));
                    continue;
                }
            };
            let initiator = thread::Builder::new()
                .name(format!("ordo-calibrate-{a}"))
                .spawn_scoped(scope, move || -> SideResult {
                    if let Err(e) = cores::pin_current_thread(a) {
                        mailbox.abort();
                        return Err(e.into());
                    }
                    mailbox
                        .run_initiator(
                            runs,
                            || counter.read_ticks(),
                            |done| done < rounds_min || Instant::now() < deadline,
                            || Instant::now() > stall_deadline,
                        )
                        .map_err(|source| CalibrateError::Handshake { a, b, source })
                });
            match initiator {
                Ok(handle) => running.push(Ok((handle, responder))),
                Err(e) => {
                    mailbox.abort();
                    let _ = responder.join();
                    running.push(Err(CalibrateError::Spawn(e)));
                }
            }
        }
        running
            .into_iter()
            .map(|started| match started {
                Ok((initiator, responder)) => {
                    let init = initiator.join().unwrap_or(Err(CalibrateError::ThreadPanicked));
                    let resp = responder.join().unwrap_or(Err(CalibrateError::ThreadPanicked));
                    (init, resp)
                }
                Err(e) => (Err(e), Ok(SideOutcome { min_delta_ticks: None, received: 0 })),
            })
            .collect()
    });
    pairs
        .iter()
        .zip(results)
        .map(|(&(a, b), (init, resp))| match (init, resp) {
            (Ok(b_to_a), Ok(a_to_b)) => {
                Ok(Session { a, b, a_to_b, b_to_a, rounds: b_to_a.received })
            }
            (init, resp) => Err(root_cause(init.err(), resp.err())),
        })
        .collect()
}

/// Of two side errors, the one that explains the other (a pin failure over the peer's
/// "aborted"), preferring the initiator's on ties.
fn root_cause(init: Option<CalibrateError>, resp: Option<CalibrateError>) -> CalibrateError {
    let is_echo = |e: &CalibrateError| {
        matches!(e, CalibrateError::Handshake { source: HandshakeError::PeerAborted, .. })
    };
    match (init, resp) {
        (Some(i), Some(r)) if is_echo(&i) && !is_echo(&r) => r,
        (Some(i), _) => i,
        (None, Some(r)) => r,
        (None, None) => CalibrateError::ThreadPanicked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tournament_covers_every_pair_once_in_disjoint_rounds() {
        for n in 0..=9usize {
            let cores: Vec<usize> = (0..n).map(|i| i * 2 + 1).collect();
            let rounds = tournament(&cores);
            let mut seen = std::collections::BTreeSet::new();
            for round in &rounds {
                let mut used = std::collections::BTreeSet::new();
                for &(a, b) in round {
                    assert_ne!(a, b);
                    assert!(used.insert(a) && used.insert(b), "round not disjoint: {round:?}");
                    assert!(seen.insert((a.min(b), a.max(b))), "pair twice");
                }
            }
            assert_eq!(seen.len(), n * n.saturating_sub(1) / 2, "n={n}");
            assert!(rounds.len() <= n.max(1), "n={n}: {} rounds", rounds.len());
        }
    }

    #[test]
    fn boundary_is_the_largest_offset_rounded_up() {
        let c = TickConversion::new(3_000_000_000).unwrap();
        let p = |from, to, t| PairOffset {
            from,
            to,
            min_delta_ticks: t,
            min_delta_nanos: c.signed_ticks_to_nanos(t),
            runs: 1,
        };
        assert_eq!(boundary_of(&[p(0, 1, 300), p(1, 0, 301)], c), (301, 101 + 1));
        assert_eq!(boundary_of(&[p(0, 1, -5), p(1, 0, -7)], c), (0, 1));
        assert_eq!(boundary_of(&[], c), (0, 1));
    }

    #[test]
    fn root_cause_prefers_the_real_failure() {
        let pin =
            || CalibrateError::Cores(CoreError::Pin { core: 1, source: io::Error::other("x") });
        let echo = || CalibrateError::Handshake { a: 0, b: 1, source: HandshakeError::PeerAborted };
        assert!(matches!(root_cause(Some(echo()), Some(pin())), CalibrateError::Cores(_)));
        assert!(matches!(root_cause(Some(pin()), Some(echo())), CalibrateError::Cores(_)));
        assert!(matches!(root_cause(None, Some(pin())), CalibrateError::Cores(_)));
    }
}
