//! The synchronised clock: FaRMv2's cluster time (§4.1, Fig. 1, 2, 4) over a local [`Clock`].
//!
//! # Mechanism
//! One machine of the cluster is the **clock master** (CM); its time is the cluster's time. A
//! [`SyncedClock::master`] answers sync requests with its local reading and its own `now()` is its
//! local `now()`. Every other machine runs a [`SyncedClock::follower`], which a dedicated thread
//! synchronises with the CM (FaRMv2 Fig. 2, `SYNC`):
//!
//! ```text
//! send = local.now()            begin_sync()          every local reading is an interval
//! cm   = CM's local.now()       master_time() (RPC)   [c, c + B_local] / [c, c + B_cm]
//! recv = local.now()            finish_sync()
//! ```
//!
//! A sync `S` bounds the CM's time at any later local reading `T`, for a relative drift of at
//! most `ε` between the two machines (`ε` = [`SyncOptions::drift_bound_ppm`]):
//!
//! ```text
//! LB(S, T) = S.cm.lo + (T.lo − S.recv.hi) · (1 − ε)     rounded down
//! UB(S, T) = S.cm.hi + (T.hi − S.send.lo) · (1 + ε)     rounded up
//! ```
//!
//! Why: the CM read its clock at an instant `x` between `send` and `recv` (one-way latencies are
//! non-negative), when its time was in `[cm.lo, cm.hi]` and the local true time in
//! `[send.lo, recv.hi]`. From `x` to `T` the local true time advanced by some `Δ` with
//! `T.lo − recv.hi ≤ Δ ≤ T.hi − send.lo`, and the CM's by between `Δ(1 − ε)` and `Δ(1 + ε)`.
//! Both machines' intra-node boundaries `B` are inside the formulas because every reading is an
//! interval. The bounds hold only for a `T` read **after** `recv` (LB) and `send` (UB); `now()`
//! reads its local clock after loading the state (see *Concurrency*), which guarantees it.
//!
//! The follower keeps the two best syncs, exactly as Fig. 2: `S_lower` with the highest LB and
//! `S_upper` with the lowest UB, comparing a new sync with them at `T_now = recv` (`≥` and `≤`, so
//! ties take the new one). `LB(S_a, T) − LB(S_b, T)` does not depend on `T` (same slope), so the
//! sync that is best at `T_now` stays best for every later reading (up to 1 ns of rounding); a
//! sync with a worse round trip therefore never widens the interval. `now()` is
//! `[LB(S_lower, T), UB(S_upper, T)]`, whose width grows by `2ε` per unit of local time since the
//! syncs.
//!
//! All arithmetic (module `bounds`) is on `u64` nanoseconds with saturation; the `e·ε/10^6`
//! products are exact (`u128` when `u64` would overflow) and rounded outwards.
//!
//! # Enabled and disabled
//! A follower is disabled until its first successful sync; [`SyncedClock::disable`] (clock-master
//! failover, FaRMv2 §4.3) disables either kind. While disabled, `now()`/`get_ts()` block
//! (spinning, then yielding, then sleeping) and the `try_` variants fail with [`ClockDisabled`]
//! after their timeout. The first sync after a disable clears all previous sync state (§4.3: "on
//! the first successful synchronization, a non-CM clears all previous synchronization state") and
//! enables the clock. A sync begun before a `disable` is refused ([`SyncError::Stale`]): each
//! [`SyncStart`] carries the clock's generation, which `disable` bumps.
//!
//! # Failover (FaRMv2 §4.3, Fig. 6)
//! The clock keeps FF, the last fast-forward point it knows. NEW-CONFIG disables it and raises
//! FF to its current upper bound ([`SyncedClock::disable_for_reconfiguration`]); ADVANCE raises
//! FF and records `FF + elapsed·(1 + ε)` as the upper bound of the new master's time
//! ([`SyncedClock::advance`]); the new master is enabled reading exactly FF
//! ([`SyncedClock::enable_master_at`]: a signed offset on its local clock, published with the
//! master flag in the same snapshot), and a master named follower by a later configuration
//! stops ([`SyncedClock::become_follower`]). The protocol that calls these is
//! `ordo_cluster::failover`.
//!
//! # Concurrency
//! `now()` is on every transaction's hot path. The state readers need — the enabled flag and the
//! four numbers `S_lower.cm.lo`, `S_lower.recv.hi`, `S_upper.cm.hi`, `S_upper.send.lo` — is
//! published through one `SeqLock` of atomics (module `seqlock`): readers take no lock and write
//! nothing; the writers (`finish_sync`, `disable`) are serialised by the mutex that also holds
//! the full sync state, counters and drift monitor. The enabled flag is a word of the same
//! snapshot, so a reader that sees "enabled" uses bounds from the same write or a later one —
//! never the zeroes from before the first sync. A reader reads its local clock *after*
//! validating the snapshot: the snapshot's `recv` was read before its publication, which
//! happens-before the reader's Acquire load, so `T` is later than `recv` (a reading on another
//! core may *look* earlier by up to `B_local`, which the `recv.hi` in LB absorbs).
//!
//! # Guarantees and deviations
//! * Every interval of an enabled clock contains the CM's time at some instant of the call, as
//!   long as the relative drift stays within `ε` and each `B` holds. The left bound need not be
//!   non-decreasing on a thread (FaRMv2 promises that; nothing in Ordo needs it).
//! * When the drift or a boundary assumption is broken, `LB` can exceed `UB`; the reading is then
//!   returned as `[UB, LB]` and counted in [`SyncStats::inverted_readings`].
//! * [`Clock::now`] says "never waits"; this clock waits while disabled (DESIGN §1, §6).
//! * [`Clock::get_ts`] is `[L, U] = now()`, then wait until `now().lo > U` (FaRMv2 Fig. 4 sleeps
//!   `(U − L)(1 + ε)`; re-reading instead also covers a sync that narrows the interval meanwhile).
//!   Every wait is counted, in per-thread-sharded counters so that statistics add no shared
//!   cache line to the hot path.
//! * The drift monitor (module `drift`) estimates the local rate relative to the CM from sync
//!   pairs and raises [`SyncStats::drift_alarm`] above [`SyncOptions::drift_alarm_ppm`].
//!
//! # Invariants
//! * A follower is enabled exactly when `S_lower` and `S_upper` are set from syncs begun in the
//!   current generation (configuration); a refused sync changes nothing but a counter.
//! * `S_lower` gives a lower bound at least that of every sync accepted since it, and `S_upper`
//!   an upper bound at most theirs, at every later `T` (debug-asserted at each sync, at `recv`).
//! * A reader uses the published bounds only when the enabled word of the same snapshot is set.
//! * The interval of a reading is `[LB(S_lower, T), UB(S_upper, T)]` of one snapshot and one
//!   local reading `T` taken after it.

#![forbid(unsafe_code)]

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::clock::{Clock, ClockKind};
use crate::drift::{DriftEstimate, DriftMonitor, DriftSample};
use crate::seqlock::SeqLock;
use crate::time::{Interval, Timestamp};

mod bounds;

use bounds::{lower_bound, upper_bound};

/// The largest drift bound accepted; larger values are lowered to it. At `ε ≥ 10^6` the lower
/// bound's rate `1 − ε` would not be positive, and no useful clock is that bad.
pub const DRIFT_BOUND_PPM_MAX: u64 = 500_000;

/// Spins of a waiting reader before it starts yielding.
const WAIT_SPINS: u32 = 256;
/// Yields of a waiting reader before it starts sleeping.
const WAIT_YIELDS: u32 = 64;
/// A wait shorter than this yields instead of sleeping: Linux adds its timer slack (50 µs by
/// default) to every sleep, which would double a wait of a few tens of µs.
const WAIT_SLEEP_FROM: Duration = Duration::from_micros(200);
/// What a sleep is shortened by, so that it ends before the wait does (the timer slack).
const WAIT_SLEEP_SLACK: Duration = Duration::from_micros(60);
/// The longest sleep of a long wait.
const WAIT_SLEEP_MAX: Duration = Duration::from_millis(1);

/// Shards of the `get_ts` wait counters (threads pick one round-robin).
const WAIT_SHARDS: usize = 16;

/// The published words: enabled flag, the two bounds' parameters, the master flag and the
/// master's fast-forward offset.
const WORDS: usize = 7;
const W_ENABLED: usize = 0;
const W_LOWER_CM_LO: usize = 1;
const W_LOWER_RECV_HI: usize = 2;
const W_UPPER_CM_HI: usize = 3;
const W_UPPER_SEND_LO: usize = 4;
const W_MASTER: usize = 5;
const W_MASTER_OFFSET: usize = 6;

static NEXT_CLOCK_ID: AtomicU64 = AtomicU64::new(1);
static NEXT_WAIT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // Relaxed: only spreads threads over the shards.
    static WAIT_SHARD: usize = NEXT_WAIT_SHARD.fetch_add(1, Ordering::Relaxed) % WAIT_SHARDS;
}

/// Settings of a synchronised clock.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SyncOptions {
    /// `ε`: the assumed bound on the relative drift of the local clock and the CM's, in ppm
    /// (FaRMv2 uses 1000). Correctness depends on it; values above [`DRIFT_BOUND_PPM_MAX`] are
    /// lowered to it.
    pub drift_bound_ppm: u64,
    /// The drift monitor raises its alarm when an estimate exceeds this, in ppm (FaRMv2: 200).
    pub drift_alarm_ppm: u64,
    /// The largest error a drift estimate may have to be used, in ppm (at most half the alarm
    /// threshold keeps the alarm meaningful: an estimate is then off by at most half the
    /// threshold, so the alarm never fires below `alarm/2` and always fires above `1.5·alarm`).
    pub drift_error_max_ppm: u64,
    /// The least local time between the two syncs of a drift estimate.
    pub drift_sample_spacing: Duration,
    /// A `now()`/`get_ts()` that has waited this long for a disabled clock is counted in
    /// [`SyncStats::disabled_stalls`] (it keeps waiting: the trait methods cannot fail).
    pub disabled_timeout: Duration,
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions {
            drift_bound_ppm: 1_000,
            drift_alarm_ppm: 200,
            drift_error_max_ppm: 100,
            drift_sample_spacing: Duration::from_millis(100),
            disabled_timeout: Duration::from_secs(1),
        }
    }
}

/// The clock stayed disabled for the whole timeout of a `try_` call (a follower is enabled by a
/// sync with the clock master).
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("the synchronised clock stayed disabled for {waited:?}")]
pub struct ClockDisabled {
    /// How long the call waited.
    pub waited: Duration,
}

/// Why a sync was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum SyncError {
    /// The clock master does not synchronise with anyone.
    #[error("the clock master does not synchronise")]
    Master,
    /// The [`SyncStart`] came from another clock.
    #[error("the sync was begun on another clock")]
    ForeignStart,
    /// The clock was disabled after the sync began: its reply may come from an old configuration.
    #[error("the clock was disabled after the sync began")]
    Stale,
    /// The clock asked by [`SyncedClock::sync_with`] is not an enabled master.
    #[error("the clock master did not answer (not a master, or disabled)")]
    MasterUnavailable,
}

/// The first half of a sync: the local reading taken before the request was sent.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SyncStart {
    clock_id: u64,
    generation: u64,
    send: Interval,
}

impl SyncStart {
    /// The local reading `T_send`.
    pub fn send(&self) -> Interval {
        self.send
    }
}

/// What one successful sync did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SyncOutcome {
    /// Local time from sending the request to receiving the reply (`recv.lo − send.lo`).
    pub rtt_nanos: u64,
    /// The sync became `S_lower` (it gives the highest lower bound).
    pub improved_lower: bool,
    /// The sync became `S_upper` (it gives the lowest upper bound).
    pub improved_upper: bool,
    /// The sync enabled the clock (the first one, or the first after a disable).
    pub enabled_now: bool,
    /// The drift estimate this sync completed, if any.
    pub drift: Option<DriftEstimate>,
}

/// Counters and the current state of a synchronised clock.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, serde::Serialize)]
pub struct SyncStats {
    /// This clock is the clock master.
    pub master: bool,
    /// The clock is enabled.
    pub enabled: bool,
    /// Successful syncs.
    pub syncs: u64,
    /// Syncs refused with a [`SyncError`] by `finish_sync`.
    pub rejected_syncs: u64,
    /// Syncs that became `S_lower`.
    pub lower_improvements: u64,
    /// Syncs that became `S_upper`.
    pub upper_improvements: u64,
    /// The round trip of the last successful sync, in ns.
    pub last_rtt_nanos: Option<u64>,
    /// The smallest round trip of a successful sync, in ns.
    pub min_rtt_nanos: Option<u64>,
    /// `U − L` of a reading taken by `stats()`, when enabled.
    pub width_nanos: Option<u64>,
    /// `get_ts` calls (each waits out its uncertainty).
    pub get_ts_waits: u64,
    /// Their total wait, in local ns.
    pub get_ts_wait_nanos: u64,
    /// The latest drift estimate: the local rate relative to the CM, in ppm (positive: fast).
    pub drift_estimate_ppm: Option<i64>,
    /// The error bound of that estimate, in ppm.
    pub drift_error_ppm: Option<u64>,
    /// Drift estimates made.
    pub drift_estimates: u64,
    /// The latest estimate exceeds [`SyncOptions::drift_alarm_ppm`].
    pub drift_alarm: bool,
    /// Estimates that exceeded it.
    pub drift_alarms: u64,
    /// Times the clock was disabled.
    pub disables: u64,
    /// FF: the last fast-forward point this clock knows of, in ns (0: none).
    pub ff_nanos: u64,
    /// Times this clock was enabled as master at a fast-forward point.
    pub enables_at_ff: u64,
    /// `now()`/`get_ts()` calls that waited longer than [`SyncOptions::disabled_timeout`].
    pub disabled_stalls: u64,
    /// Readings whose lower bound exceeded the upper one (the drift bound or a boundary is
    /// wrong).
    pub inverted_readings: u64,
    /// Syncs after which `LB(S_lower) > UB(S_upper)` at their receive time (same cause).
    pub inconsistent_syncs: u64,
}

/// One synchronisation: the three readings.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Sample {
    send: Interval,
    cm: Interval,
    recv: Interval,
}

impl Sample {
    fn lower_at(&self, t: Interval, eps_ppm: u64) -> u64 {
        lower_bound(self.cm.lo().as_nanos(), self.recv.hi().as_nanos(), t.lo().as_nanos(), eps_ppm)
    }

    fn upper_at(&self, t: Interval, eps_ppm: u64) -> u64 {
        upper_bound(self.cm.hi().as_nanos(), self.send.lo().as_nanos(), t.hi().as_nanos(), eps_ppm)
    }
}

/// The writers' state, behind the mutex.
#[derive(Debug)]
struct Writer {
    generation: u64,
    enabled: bool,
    /// This clock is the clock master (it can become one, or stop being one, in failover).
    master: bool,
    /// A master's time is its local reading plus this (set when it was enabled at a
    /// fast-forward point, FaRMv2 §4.3, so that it read exactly FF then — negative when its
    /// local clock was ahead of FF; 0 for a master from the start).
    master_offset_nanos: i64,
    /// FF: the last time the cluster's clocks were fast-forwarded to, as this clock knows it
    /// (raised by `disable_for_reconfiguration`, `advance` and `enable_master_at`).
    ff_nanos: u64,
    enables_at_ff: u64,
    lower: Option<Sample>,
    upper: Option<Sample>,
    drift: DriftMonitor,
    syncs: u64,
    rejected_syncs: u64,
    lower_improvements: u64,
    upper_improvements: u64,
    last_rtt_nanos: Option<u64>,
    min_rtt_nanos: Option<u64>,
    disables: u64,
    inconsistent_syncs: u64,
}

impl Writer {
    fn words(&self) -> [u64; WORDS] {
        let mut words = [0; WORDS];
        words[W_ENABLED] = u64::from(self.enabled);
        words[W_MASTER] = u64::from(self.master);
        words[W_MASTER_OFFSET] = self.master_offset_nanos as u64; // two's complement, undone on reading
        if let Some(lower) = self.lower {
            words[W_LOWER_CM_LO] = lower.cm.lo().as_nanos();
            words[W_LOWER_RECV_HI] = lower.recv.hi().as_nanos();
        }
        if let Some(upper) = self.upper {
            words[W_UPPER_CM_HI] = upper.cm.hi().as_nanos();
            words[W_UPPER_SEND_LO] = upper.send.lo().as_nanos();
        }
        words
    }
}

#[derive(Debug, Default)]
struct WaitShard {
    count: AtomicU64,
    nanos: AtomicU64,
}

/// A synchronised reading and the local reading it came from.
#[derive(Clone, Copy, Debug)]
struct Reading {
    synced: Interval,
    local: Interval,
    /// The snapshot was a master's.
    master: bool,
}

/// FaRMv2's synchronised cluster clock over a local clock `L`. See the module docs.
pub struct SyncedClock<L: Clock> {
    local: L,
    id: u64,
    drift_bound_ppm: u64,
    options: SyncOptions,
    published: SeqLock<WORDS>,
    writer: Mutex<Writer>,
    waits: [CachePadded<WaitShard>; WAIT_SHARDS],
    inverted_readings: CachePadded<AtomicU64>,
    disabled_stalls: AtomicU64,
}

impl<L: Clock> fmt::Debug for SyncedClock<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncedClock")
            .field("master", &self.is_master())
            .field("id", &self.id)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<L: Clock> SyncedClock<L> {
    /// The clock master: enabled, its time is its local clock.
    pub fn master(local: L, options: SyncOptions) -> Self {
        Self::build(local, options, true)
    }

    /// A follower: disabled until its first successful sync.
    pub fn follower(local: L, options: SyncOptions) -> Self {
        Self::build(local, options, false)
    }

    fn build(local: L, options: SyncOptions, master: bool) -> Self {
        let spacing_nanos =
            u64::try_from(options.drift_sample_spacing.as_nanos()).unwrap_or(u64::MAX);
        let writer = Writer {
            generation: 0,
            enabled: master,
            master,
            master_offset_nanos: 0,
            ff_nanos: 0,
            enables_at_ff: 0,
            lower: None,
            upper: None,
            drift: DriftMonitor::new(
                spacing_nanos,
                options.drift_error_max_ppm,
                options.drift_alarm_ppm,
            ),
            syncs: 0,
            rejected_syncs: 0,
            lower_improvements: 0,
            upper_improvements: 0,
            last_rtt_nanos: None,
            min_rtt_nanos: None,
            disables: 0,
            inconsistent_syncs: 0,
        };
        SyncedClock {
            local,
            // Relaxed: only needs to be unique.
            id: NEXT_CLOCK_ID.fetch_add(1, Ordering::Relaxed),
            drift_bound_ppm: options.drift_bound_ppm.min(DRIFT_BOUND_PPM_MAX),
            options,
            published: SeqLock::new(writer.words()),
            writer: Mutex::new(writer),
            waits: std::array::from_fn(|_| CachePadded::new(WaitShard::default())),
            inverted_readings: CachePadded::new(AtomicU64::new(0)),
            disabled_stalls: AtomicU64::new(0),
        }
    }

    /// The local clock.
    pub fn local(&self) -> &L {
        &self.local
    }

    /// The settings.
    pub fn options(&self) -> SyncOptions {
        self.options
    }

    /// The drift bound `ε` in use, in ppm (the option, at most [`DRIFT_BOUND_PPM_MAX`]).
    pub fn drift_bound_ppm(&self) -> u64 {
        self.drift_bound_ppm
    }

    /// Whether this is the clock master (failover can change it: [`SyncedClock::enable_master_at`],
    /// [`SyncedClock::become_follower`]).
    pub fn is_master(&self) -> bool {
        self.published.read()[W_MASTER] != 0
    }

    /// Whether the clock is enabled (gives out time without waiting).
    pub fn is_enabled(&self) -> bool {
        self.published.read()[W_ENABLED] != 0
    }

    /// The clock master's answer to a sync request: its current local interval. `None` while
    /// disabled (FaRMv2 §4.3: requests are rejected) and on a follower.
    pub fn master_time(&self) -> Option<Interval> {
        self.try_read().filter(|r| r.master).map(|r| r.synced)
    }

    /// The first half of a sync: reads `T_send`. Take it right before sending the request.
    pub fn begin_sync(&self) -> SyncStart {
        // The generation is read before `send`: a disable in between makes the sync stale.
        let generation = self.lock_writer().generation;
        SyncStart { clock_id: self.id, generation, send: self.local.now() }
    }

    /// The second half of a sync: `cm` is the master's reply ([`SyncedClock::master_time`]);
    /// `T_recv` is read here, so call it as soon as the reply arrives. Keeps the sync as `S_lower`
    /// and/or `S_upper` where it improves them (Fig. 2), enables the clock on the first sync of a
    /// configuration (clearing older state), and feeds the drift monitor.
    ///
    /// # Errors
    /// [`SyncError::Master`] on the master, [`SyncError::ForeignStart`] for a `start` of another
    /// clock, [`SyncError::Stale`] when the clock was disabled after `start`.
    pub fn finish_sync(&self, start: SyncStart, cm: Interval) -> Result<SyncOutcome, SyncError> {
        // Read before taking the lock: waiting for the lock only makes the sync less precise.
        let recv = self.local.now();
        let eps = self.drift_bound_ppm;
        let mut w = self.lock_writer();
        let refused = if w.master {
            Some(SyncError::Master)
        } else if start.clock_id != self.id {
            Some(SyncError::ForeignStart)
        } else if start.generation != w.generation {
            Some(SyncError::Stale)
        } else {
            None
        };
        if let Some(error) = refused {
            w.rejected_syncs = w.rejected_syncs.saturating_add(1);
            return Err(error);
        }
        let new = Sample { send: start.send, cm, recv };
        let (improved_lower, improved_upper, enabled_now) = match (w.enabled, w.lower, w.upper) {
            (true, Some(lower), Some(upper)) => {
                // Fig. 2: compare at T_now = recv; ties take the new sync.
                let improved_lower = new.lower_at(recv, eps) >= lower.lower_at(recv, eps);
                let improved_upper = new.upper_at(recv, eps) <= upper.upper_at(recv, eps);
                if improved_lower {
                    w.lower = Some(new);
                }
                if improved_upper {
                    w.upper = Some(new);
                }
                (improved_lower, improved_upper, false)
            }
            _ => {
                // The first sync of this configuration: drop every older sync (FaRMv2 §4.3).
                w.lower = Some(new);
                w.upper = Some(new);
                w.enabled = true;
                w.drift.reset();
                (true, true, true)
            }
        };
        debug_assert!(w.enabled, "a successful sync leaves the clock enabled");
        if improved_lower || improved_upper {
            let words = w.words();
            self.published.write(words);
        }
        if let (Some(lower), Some(upper)) = (w.lower, w.upper) {
            debug_assert!(lower.lower_at(recv, eps) >= new.lower_at(recv, eps));
            debug_assert!(upper.upper_at(recv, eps) <= new.upper_at(recv, eps));
            if lower.lower_at(recv, eps) > upper.upper_at(recv, eps) {
                w.inconsistent_syncs = w.inconsistent_syncs.saturating_add(1);
            }
        }
        let rtt_nanos = recv.lo().nanos_since(start.send.lo());
        w.syncs = w.syncs.saturating_add(1);
        w.lower_improvements = w.lower_improvements.saturating_add(u64::from(improved_lower));
        w.upper_improvements = w.upper_improvements.saturating_add(u64::from(improved_upper));
        w.last_rtt_nanos = Some(rtt_nanos);
        w.min_rtt_nanos = Some(w.min_rtt_nanos.map_or(rtt_nanos, |m| m.min(rtt_nanos)));
        let drift = w.drift.observe(DriftSample::new(start.send, cm, recv));
        Ok(SyncOutcome { rtt_nanos, improved_lower, improved_upper, enabled_now, drift })
    }

    /// One sync by direct call (in-process clusters, tests): `begin_sync`, ask `master`,
    /// `finish_sync`.
    ///
    /// # Errors
    /// [`SyncError::MasterUnavailable`] when `master` is not an enabled master, else as
    /// [`SyncedClock::finish_sync`].
    pub fn sync_with<M: Clock>(&self, master: &SyncedClock<M>) -> Result<SyncOutcome, SyncError> {
        let start = self.begin_sync();
        let cm = master.master_time().ok_or(SyncError::MasterUnavailable)?;
        self.finish_sync(start, cm)
    }

    /// Disables the clock (clock-master failover): readers block, syncs in flight are refused.
    /// The sync state is kept; the next successful sync replaces it and re-enables the clock.
    pub fn disable(&self) {
        let mut w = self.lock_writer();
        self.disable_locked(&mut w);
    }

    /// The upper bound of this clock's time at the local reading `local`, from the state under
    /// the writer lock, enabled or not: a master's shifted local reading, a follower's
    /// `UB(S_upper, local)`; `None` for a follower that never synchronised.
    fn upper_bound_locked(&self, w: &Writer, local: Interval) -> Option<u64> {
        if w.master {
            Some(local.hi().as_nanos().saturating_add_signed(w.master_offset_nanos))
        } else {
            w.upper.map(|u| u.upper_at(local, self.drift_bound_ppm))
        }
    }

    /// Disables under the writer lock: a new generation (syncs in flight become stale), and
    /// the enabled word cleared where it was set.
    fn disable_locked(&self, w: &mut Writer) {
        w.generation = w.generation.wrapping_add(1);
        if w.enabled {
            w.enabled = false;
            w.disables = w.disables.saturating_add(1);
            let words = w.words();
            self.published.write(words);
        }
    }

    /// NEW-CONFIG of clock-master failover (FaRMv2 §4.3, Fig. 6): disables the clock and raises
    /// FF to the upper bound of the current time interval — computed from the sync state even
    /// when the clock is already disabled, so two failovers in a row lose nothing — and returns
    /// FF. A follower that never synchronised contributes only the FF it had.
    pub fn disable_for_reconfiguration(&self) -> Timestamp {
        // Read before the lock (as `finish_sync`): the bound only grows with a later reading.
        let local = self.local.now();
        let mut w = self.lock_writer();
        if let Some(upper) = self.upper_bound_locked(&w, local) {
            w.ff_nanos = w.ff_nanos.max(upper);
        }
        self.disable_locked(&mut w);
        Timestamp::from_nanos(w.ff_nanos)
    }

    /// ADVANCE of clock-master failover: raises FF to `ff` (never lowers it). The clock stays
    /// disabled; a follower is enabled by its first sync with the new master.
    ///
    /// ADVANCE is also a bound on the new master's time: it enables its clock at `[FF, FF]`
    /// only after this member acknowledged, so at any later local reading `T` its time is at
    /// most `FF + (T − now)(1 + ε)` — the upper bound of a sync whose request left now and
    /// whose reply read `FF`. That becomes the sync state's upper half (the old master's is
    /// of no use any more), so a NEW-CONFIG that finds the new master dead before this member
    /// ever synced with it still raises FF past every timestamp that master handed out.
    pub fn advance(&self, ff: Timestamp) {
        let local = self.local.now();
        let mut w = self.lock_writer();
        w.ff_nanos = w.ff_nanos.max(ff.as_nanos());
        if !w.master {
            let at = Timestamp::from_nanos(w.ff_nanos);
            w.upper = Some(Sample { send: local, cm: Interval::new(at, at), recv: local });
            w.lower = None;
        }
    }

    /// FF as this clock knows it (0 before any failover).
    pub fn fast_forward_point(&self) -> Timestamp {
        Timestamp::from_nanos(self.lock_writer().ff_nanos)
    }

    /// The new clock master enables its clock at `[FF, FF]` (FaRMv2 Fig. 6, after every
    /// ADVANCE-ACK): FF is raised to `ff` and to this clock's own upper bound now, and the
    /// clock becomes an enabled master whose time is its local reading shifted so that it
    /// reads FF now — shifted back too when its local clock is ahead of FF, because the
    /// members bound this master's time by FF plus their elapsed time ([`SyncedClock::advance`]).
    /// Every later reading is therefore above every timestamp any clock of the old
    /// configuration handed out before it was disabled. Sync state is cleared. Returns FF.
    pub fn enable_master_at(&self, ff: Timestamp) -> Timestamp {
        let local = self.local.now();
        let mut w = self.lock_writer();
        let own_upper = self.upper_bound_locked(&w, local);
        let ff = w.ff_nanos.max(ff.as_nanos()).max(own_upper.unwrap_or(0));
        w.ff_nanos = ff;
        w.master = true;
        // Exactly FF now, also when the local clock is ahead: the members' ADVANCE bounds
        // (`advance`) assume this master's time starts at FF.
        let shift = i128::from(ff) - i128::from(local.lo().as_nanos());
        w.master_offset_nanos =
            i64::try_from(shift).unwrap_or(if shift < 0 { i64::MIN } else { i64::MAX });
        w.lower = None;
        w.upper = None;
        w.drift.reset();
        w.generation = w.generation.wrapping_add(1);
        w.enabled = true;
        w.enables_at_ff = w.enables_at_ff.saturating_add(1);
        let words = w.words();
        self.published.write(words);
        Timestamp::from_nanos(ff)
    }

    /// A master that is no longer the CM (a configuration named another) becomes a disabled
    /// follower, enabled again by its first sync with the new master. FF is kept.
    pub fn become_follower(&self) {
        let local = self.local.now();
        let mut w = self.lock_writer();
        if w.master {
            let upper = self.upper_bound_locked(&w, local).unwrap_or(0);
            w.ff_nanos = w.ff_nanos.max(upper);
        }
        w.master = false;
        w.master_offset_nanos = 0;
        w.lower = None;
        w.upper = None;
        let was_enabled = w.enabled;
        self.disable_locked(&mut w);
        if !was_enabled {
            // The master flag changed even though the enabled word did not.
            let words = w.words();
            self.published.write(words);
        }
    }

    /// The current time, waiting at most `timeout` for a disabled clock to be enabled.
    ///
    /// # Errors
    /// [`ClockDisabled`] when the clock stayed disabled for the whole `timeout`.
    pub fn try_now(&self, timeout: Duration) -> Result<Interval, ClockDisabled> {
        let deadline = Deadline::after(timeout);
        self.read_waiting(&deadline).map(|r| r.synced)
    }

    /// [`Clock::get_ts`], waiting at most `timeout` (from the call's start) for a disabled clock
    /// to be enabled. The uncertainty wait itself always ends and is not bounded by `timeout`.
    ///
    /// # Errors
    /// [`ClockDisabled`] when the clock was disabled at the deadline.
    pub fn try_get_ts(&self, timeout: Duration) -> Result<Timestamp, ClockDisabled> {
        self.ts_waiting(&Deadline::after(timeout))
    }

    /// Counters and current state.
    pub fn stats(&self) -> SyncStats {
        let width_nanos = self.try_read().map(|r| r.synced.width_nanos());
        let (get_ts_waits, get_ts_wait_nanos) = self.waits.iter().fold((0u64, 0u64), |acc, s| {
            // Relaxed: statistics, no ordering with anything.
            let count = s.count.load(Ordering::Relaxed);
            let nanos = s.nanos.load(Ordering::Relaxed);
            (acc.0.saturating_add(count), acc.1.saturating_add(nanos))
        });
        let w = self.lock_writer();
        let drift = w.drift.report();
        SyncStats {
            master: w.master,
            enabled: w.enabled,
            syncs: w.syncs,
            rejected_syncs: w.rejected_syncs,
            lower_improvements: w.lower_improvements,
            upper_improvements: w.upper_improvements,
            last_rtt_nanos: w.last_rtt_nanos,
            min_rtt_nanos: w.min_rtt_nanos,
            width_nanos,
            get_ts_waits,
            get_ts_wait_nanos,
            drift_estimate_ppm: drift.latest.map(|e| e.rate_ppm),
            drift_error_ppm: drift.latest.map(|e| e.error_ppm),
            drift_estimates: drift.estimates,
            drift_alarm: drift.alarm,
            drift_alarms: drift.alarms,
            disables: w.disables,
            ff_nanos: w.ff_nanos,
            enables_at_ff: w.enables_at_ff,
            // Relaxed: statistics.
            disabled_stalls: self.disabled_stalls.load(Ordering::Relaxed),
            inverted_readings: self.inverted_readings.load(Ordering::Relaxed),
            inconsistent_syncs: w.inconsistent_syncs,
        }
    }

    fn lock_writer(&self) -> MutexGuard<'_, Writer> {
        // A panic while holding the lock cannot leave the state half-updated in a way readers
        // see (they read the seqlock), so a poisoned lock is used as is.
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One reading, or `None` while disabled. Never waits (beyond a racing seqlock write).
    #[inline]
    fn try_read(&self) -> Option<Reading> {
        let words = self.published.read();
        if words[W_ENABLED] == 0 {
            return None;
        }
        // After the snapshot (module docs, Concurrency): T is later than the syncs' readings.
        let local = self.local.now();
        if words[W_MASTER] != 0 {
            let offset = words[W_MASTER_OFFSET] as i64;
            let synced = Interval::new(
                Timestamp::from_nanos(local.lo().as_nanos().saturating_add_signed(offset)),
                Timestamp::from_nanos(local.hi().as_nanos().saturating_add_signed(offset)),
            );
            return Some(Reading { synced, local, master: true });
        }
        let eps = self.drift_bound_ppm;
        let lo =
            lower_bound(words[W_LOWER_CM_LO], words[W_LOWER_RECV_HI], local.lo().as_nanos(), eps);
        let hi =
            upper_bound(words[W_UPPER_CM_HI], words[W_UPPER_SEND_LO], local.hi().as_nanos(), eps);
        let synced = if lo <= hi {
            Interval::new(Timestamp::from_nanos(lo), Timestamp::from_nanos(hi))
        } else {
            // Relaxed: statistics.
            self.inverted_readings.fetch_add(1, Ordering::Relaxed);
            Interval::new(Timestamp::from_nanos(hi), Timestamp::from_nanos(lo))
        };
        Some(Reading { synced, local, master: false })
    }

    /// One reading, waiting while the clock is disabled until `deadline`.
    #[inline]
    fn read_waiting(&self, deadline: &Deadline) -> Result<Reading, ClockDisabled> {
        match self.try_read() {
            Some(reading) => Ok(reading),
            None => self.wait_enabled(deadline),
        }
    }

    #[cold]
    fn wait_enabled(&self, deadline: &Deadline) -> Result<Reading, ClockDisabled> {
        let mut backoff = Backoff::default();
        let mut stalled = false;
        loop {
            if let Some(reading) = self.try_read() {
                return Ok(reading);
            }
            let waited = deadline.start.elapsed();
            if deadline.timeout.is_some_and(|timeout| waited >= timeout) {
                return Err(ClockDisabled { waited });
            }
            if !stalled && waited >= self.options.disabled_timeout {
                stalled = true;
                // Relaxed: statistics.
                self.disabled_stalls.fetch_add(1, Ordering::Relaxed);
            }
            backoff.snooze(WAIT_SLEEP_MAX);
        }
    }

    /// `GET_TS`: `[L, U] = now()`, then wait until `now().lo > U`; return `U`.
    fn ts_waiting(&self, deadline: &Deadline) -> Result<Timestamp, ClockDisabled> {
        let first = self.read_waiting(deadline)?;
        let upper = first.synced.hi();
        let mut backoff = Backoff::default();
        loop {
            let reading = self.read_waiting(deadline)?;
            if reading.synced.lo() > upper {
                self.record_wait(reading.local.lo().nanos_since(first.local.lo()));
                return Ok(upper);
            }
            // The uncertainty left, in local time give or take ε: how long a sleep may be.
            let left = Duration::from_nanos(upper.nanos_since(reading.synced.lo()));
            backoff.snooze(left);
        }
    }

    fn record_wait(&self, nanos: u64) {
        let shard = WAIT_SHARD.try_with(|s| *s).unwrap_or(0);
        if let Some(shard) = self.waits.get(shard) {
            // Relaxed: statistics.
            shard.count.fetch_add(1, Ordering::Relaxed);
            shard.nanos.fetch_add(nanos, Ordering::Relaxed);
        }
    }
}

impl<L: Clock> Clock for SyncedClock<L> {
    /// The synchronised interval; **waits while the clock is disabled** (module docs).
    #[inline]
    fn now(&self) -> Interval {
        let forever = Deadline::never();
        loop {
            // Without a deadline only an enabled clock returns.
            if let Ok(reading) = self.read_waiting(&forever) {
                return reading.synced;
            }
        }
    }

    #[inline]
    fn get_ts(&self) -> Timestamp {
        let forever = Deadline::never();
        loop {
            if let Ok(ts) = self.ts_waiting(&forever) {
                return ts;
            }
        }
    }

    #[inline]
    fn read_ts(&self) -> Timestamp {
        self.get_ts()
    }

    /// The width of a current reading; the local boundary while disabled.
    fn boundary_nanos(&self) -> u64 {
        self.try_read().map_or(self.local.boundary_nanos(), |r| r.synced.width_nanos())
    }

    fn kind(&self) -> ClockKind {
        ClockKind::Synced
    }
}

/// When a wait started and how long it may last (`None`: forever).
struct Deadline {
    start: Instant,
    timeout: Option<Duration>,
}

impl Deadline {
    fn after(timeout: Duration) -> Self {
        Deadline { start: Instant::now(), timeout: Some(timeout) }
    }

    fn never() -> Self {
        Deadline { start: Instant::now(), timeout: None }
    }
}

/// Spin, then yield, then sleep: short waits stay on the core, long ones give it up.
#[derive(Default)]
struct Backoff {
    step: u32,
}

impl Backoff {
    fn snooze(&mut self, sleep_hint: Duration) {
        if self.step < WAIT_SPINS {
            std::hint::spin_loop();
        } else if self.step < WAIT_SPINS + WAIT_YIELDS || sleep_hint < WAIT_SLEEP_FROM {
            std::thread::yield_now();
        } else {
            std::thread::sleep((sleep_hint - WAIT_SLEEP_SLACK).min(WAIT_SLEEP_MAX));
        }
        self.step = self.step.saturating_add(1);
    }
}
