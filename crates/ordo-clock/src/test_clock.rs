//! The test clock: a known "true" global time seen by each thread through an injected skew and
//! drift, behind a claimed boundary (DESIGN §8: tests inject time through the clock seam).
//!
//! # Mechanism
//! A [`TestClock`] has a **reference** time — the true global time tests reason about — that is
//! one of
//! * [`Reference::Real`]: monotonic nanoseconds since the clock was built (from an [`Instant`]),
//!   plus a start value;
//! * [`Reference::Manual`]: frozen, moved only by [`TestClock::advance`] / [`TestClock::set_reference`];
//!   `get_ts` then waits until some thread advances it;
//! * [`Reference::Stepped`]: advanced by a fixed step at every reading — deterministic and
//!   never blocking, the choice for tests that must not depend on scheduling.
//!
//! Each thread reads `c = reference + offset + drift_ppm · elapsed / 10^6` (`elapsed` = reference
//! minus its start value), with its own [`ThreadSkew`] `{offset, drift}`, and `now()` returns
//! `[c, c + B_claimed]`. A thread's skew is set by [`TestClock::set_thread_skew`] (for the calling
//! thread) or assigned on first use by the closure given to [`TestClockBuilder::skew_by_index`]
//! (threads are numbered in the order they first read the clock); it defaults to zero.
//!
//! The skews live in a thread-local list keyed by a per-clock id, so reads take no lock and two
//! test clocks never see each other's settings. Entries of dropped clocks are pruned when a
//! thread meets a new clock.
//!
//! # What tests can rely on
//! * If every thread's offset lies in `[-B_claimed, 0]` and drift is 0, every interval contains
//!   the reference time at the instant of the read ([`TestClock::read_with_reference`] shows
//!   both), so the clock meets the [`Clock`] contract and `get_ts` values strictly increase along
//!   happens-before.
//! * If the offsets spread wider than `B_claimed` — the boundary is *too small* — those
//!   properties fail; `tests/clock/happens_before.rs` demonstrates it (the negative test of DESIGN §8).
//! * Readings saturate at 0: keep the start value larger than any negative skew (the default
//!   start is 1000 s).

use std::cell::RefCell;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use crate::clock::{Clock, ClockKind, TimedTs, get_ts_timed_by_waiting};
use crate::time::{Interval, Timestamp};

/// The default reference start: large enough that negative skews of up to 1000 s stay positive.
pub const DEFAULT_START_NANOS: u64 = 1_000_000_000_000;

/// The smallest drift accepted; slower would make a thread's clock run backwards.
pub const DRIFT_PPM_MIN: i64 = -999_999;

/// Source ids of test clocks, so thread-local skews of different clocks never mix.
static NEXT_CLOCK_ID: AtomicU64 = AtomicU64::new(1);

/// How a thread's reading departs from the reference time.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct ThreadSkew {
    /// Constant offset in nanoseconds (positive = ahead of the reference).
    pub offset_nanos: i64,
    /// Rate error in parts per million of the elapsed reference time (positive = runs fast).
    pub drift_ppm: i64,
}

impl ThreadSkew {
    /// A constant offset without drift.
    pub const fn offset(offset_nanos: i64) -> Self {
        ThreadSkew { offset_nanos, drift_ppm: 0 }
    }
}

/// Where the reference (true global) time comes from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Reference {
    /// Real monotonic time since the clock was built, starting at the given value.
    Real {
        /// The reference value when the clock is built.
        start_nanos: u64,
    },
    /// Frozen; moved only by [`TestClock::advance`] and [`TestClock::set_reference`].
    Manual {
        /// The initial value.
        start_nanos: u64,
    },
    /// Advanced by `step_nanos` at every reading (by `now`, not by `reference_now`).
    Stepped {
        /// The initial value.
        start_nanos: u64,
        /// The advance per reading.
        step_nanos: u64,
    },
}

impl Default for Reference {
    fn default() -> Self {
        Reference::Real { start_nanos: DEFAULT_START_NANOS }
    }
}

enum ReferenceState {
    Real { epoch: Instant, start_nanos: u64 },
    Manual { now: AtomicU64, start_nanos: u64 },
    Stepped { now: AtomicU64, start_nanos: u64, step_nanos: u64 },
}

type SkewAssigner = Box<dyn Fn(usize) -> ThreadSkew + Send + Sync>;

struct Inner {
    id: u64,
    claimed_boundary_nanos: u64,
    reference: ReferenceState,
    assign: Option<SkewAssigner>,
    next_thread_index: AtomicUsize,
}

struct SkewEntry {
    clock_id: u64,
    alive: Weak<Inner>,
    skew: ThreadSkew,
}

thread_local! {
    static THREAD_SKEWS: RefCell<Vec<SkewEntry>> = const { RefCell::new(Vec::new()) };
}

/// Builds a [`TestClock`].
pub struct TestClockBuilder {
    claimed_boundary_nanos: u64,
    reference: Reference,
    assign: Option<SkewAssigner>,
}

impl TestClockBuilder {
    /// The width every `now()` interval claims (the `B` tests may exceed on purpose).
    pub fn claimed_boundary_nanos(mut self, nanos: u64) -> Self {
        self.claimed_boundary_nanos = nanos;
        self
    }

    /// The reference time source (default: [`Reference::Real`]).
    pub fn reference(mut self, reference: Reference) -> Self {
        self.reference = reference;
        self
    }

    /// Assigns each thread's skew when it first reads the clock, from its index (0, 1, 2, … in
    /// first-use order). [`TestClock::set_thread_skew`] still overrides it.
    pub fn skew_by_index(
        mut self,
        assign: impl Fn(usize) -> ThreadSkew + Send + Sync + 'static,
    ) -> Self {
        self.assign = Some(Box::new(assign));
        self
    }

    /// The clock.
    pub fn build(self) -> TestClock {
        let reference = match self.reference {
            Reference::Real { start_nanos } => {
                ReferenceState::Real { epoch: Instant::now(), start_nanos }
            }
            Reference::Manual { start_nanos } => {
                ReferenceState::Manual { now: AtomicU64::new(start_nanos), start_nanos }
            }
            Reference::Stepped { start_nanos, step_nanos } => ReferenceState::Stepped {
                now: AtomicU64::new(start_nanos),
                start_nanos,
                step_nanos,
            },
        };
        TestClock {
            inner: Arc::new(Inner {
                id: NEXT_CLOCK_ID.fetch_add(1, Ordering::Relaxed),
                claimed_boundary_nanos: self.claimed_boundary_nanos,
                reference,
                assign: self.assign,
                next_thread_index: AtomicUsize::new(0),
            }),
        }
    }
}

/// A clock with injected per-thread skew and drift. Cheap to clone (clones share everything).
#[derive(Clone)]
pub struct TestClock {
    inner: Arc<Inner>,
}

impl fmt::Debug for TestClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestClock")
            .field("id", &self.inner.id)
            .field("claimed_boundary_nanos", &self.inner.claimed_boundary_nanos)
            .finish_non_exhaustive()
    }
}

impl TestClock {
    /// A builder: claimed boundary 0, real reference time, no skew.
    pub fn builder() -> TestClockBuilder {
        TestClockBuilder {
            claimed_boundary_nanos: 0,
            reference: Reference::default(),
            assign: None,
        }
    }

    /// A real-time clock claiming `claimed_boundary_nanos`, every thread unskewed until set.
    pub fn new(claimed_boundary_nanos: u64) -> Self {
        Self::builder().claimed_boundary_nanos(claimed_boundary_nanos).build()
    }

    /// Sets the calling thread's skew for this clock.
    ///
    /// `drift_ppm` below [`DRIFT_PPM_MIN`] is raised to it (time never runs backwards).
    pub fn set_thread_skew(&self, offset_nanos: i64, drift_ppm: i64) {
        let skew = ThreadSkew { offset_nanos, drift_ppm: drift_ppm.max(DRIFT_PPM_MIN) };
        let stored = THREAD_SKEWS.try_with(|cell| {
            let mut entries = cell.borrow_mut();
            match entries.iter_mut().find(|e| e.clock_id == self.inner.id) {
                Some(entry) => entry.skew = skew,
                None => {
                    entries.retain(|e| e.alive.strong_count() > 0);
                    entries.push(SkewEntry {
                        clock_id: self.inner.id,
                        alive: Arc::downgrade(&self.inner),
                        skew,
                    });
                }
            }
        });
        debug_assert!(stored.is_ok(), "set_thread_skew during thread teardown");
    }

    /// The calling thread's skew for this clock (assigning it on first use).
    pub fn thread_skew(&self) -> ThreadSkew {
        let id = self.inner.id;
        let known = THREAD_SKEWS
            .try_with(|cell| cell.borrow().iter().find(|e| e.clock_id == id).map(|e| e.skew));
        match known {
            Ok(Some(skew)) => skew,
            Ok(None) => {
                // First use on this thread. The assigner runs outside the borrow, so it may
                // itself read test clocks.
                let index = self.inner.next_thread_index.fetch_add(1, Ordering::Relaxed);
                let skew = self.inner.assign.as_ref().map_or(ThreadSkew::default(), |f| f(index));
                self.set_thread_skew(skew.offset_nanos, skew.drift_ppm);
                ThreadSkew { drift_ppm: skew.drift_ppm.max(DRIFT_PPM_MIN), ..skew }
            }
            // Thread teardown: the thread-local is gone; read unskewed.
            Err(_) => ThreadSkew::default(),
        }
    }

    /// The reference time now, without advancing a stepped reference.
    pub fn reference_now(&self) -> Timestamp {
        Timestamp::from_nanos(match &self.inner.reference {
            ReferenceState::Real { epoch, start_nanos } => real_now(*epoch, *start_nanos),
            // Acquire: pairs with the AcqRel updates in advance()/set_reference()/read_reference().
            ReferenceState::Manual { now, .. } | ReferenceState::Stepped { now, .. } => {
                now.load(Ordering::Acquire)
            }
        })
    }

    /// Advances a manual or stepped reference by `nanos` (no effect on a real one).
    pub fn advance(&self, nanos: u64) {
        match &self.inner.reference {
            ReferenceState::Real { .. } => {}
            // AcqRel: the reference is a total order of updates that readers Acquire.
            ReferenceState::Manual { now, .. } | ReferenceState::Stepped { now, .. } => {
                now.fetch_add(nanos, Ordering::AcqRel);
            }
        }
    }

    /// Moves a manual or stepped reference forward to `ts` (never backwards; no effect on a
    /// real one).
    pub fn set_reference(&self, ts: Timestamp) {
        match &self.inner.reference {
            ReferenceState::Real { .. } => {}
            // AcqRel: see advance().
            ReferenceState::Manual { now, .. } | ReferenceState::Stepped { now, .. } => {
                now.fetch_max(ts.as_nanos(), Ordering::AcqRel);
            }
        }
    }

    /// One reading by the calling thread together with the reference time it was computed from.
    pub fn read_with_reference(&self) -> (Interval, Timestamp) {
        let (reference, start) = self.read_reference();
        let skew = self.thread_skew();
        let elapsed = i128::from(reference) - i128::from(start);
        let reading = i128::from(reference)
            + i128::from(skew.offset_nanos)
            + elapsed * i128::from(skew.drift_ppm) / 1_000_000;
        let reading = u64::try_from(reading.max(0)).unwrap_or(u64::MAX);
        (
            Interval::with_width(Timestamp::from_nanos(reading), self.inner.claimed_boundary_nanos),
            Timestamp::from_nanos(reference),
        )
    }

    /// The reference value for one reading (advancing a stepped reference), and its start.
    fn read_reference(&self) -> (u64, u64) {
        match &self.inner.reference {
            ReferenceState::Real { epoch, start_nanos } => {
                (real_now(*epoch, *start_nanos), *start_nanos)
            }
            // Acquire: see reference_now().
            ReferenceState::Manual { now, start_nanos } => {
                (now.load(Ordering::Acquire), *start_nanos)
            }
            // AcqRel: every reading is one step in the reference's modification order, so a
            // reading that happens after another sees a strictly larger reference.
            ReferenceState::Stepped { now, start_nanos, step_nanos } => {
                (now.fetch_add(*step_nanos, Ordering::AcqRel) + step_nanos, *start_nanos)
            }
        }
    }
}

fn real_now(epoch: Instant, start_nanos: u64) -> u64 {
    let elapsed = u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
    start_nanos.saturating_add(elapsed)
}

impl Clock for TestClock {
    #[inline]
    fn now(&self) -> Interval {
        self.read_with_reference().0
    }

    /// `get_ts` is the default wait: time it by its own readings.
    #[inline]
    fn get_ts_timed(&self) -> TimedTs {
        get_ts_timed_by_waiting(self)
    }

    fn boundary_nanos(&self) -> u64 {
        self.inner.claimed_boundary_nanos
    }

    fn kind(&self) -> ClockKind {
        ClockKind::Test
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_reference_is_frozen_until_advanced() {
        let c = TestClock::builder()
            .claimed_boundary_nanos(10)
            .reference(Reference::Manual { start_nanos: 1_000 })
            .build();
        c.set_thread_skew(-4, 0);
        let (iv, r) = c.read_with_reference();
        assert_eq!(r.as_nanos(), 1_000);
        assert_eq!((iv.lo().as_nanos(), iv.hi().as_nanos()), (996, 1_006));
        c.advance(50);
        assert_eq!(c.reference_now().as_nanos(), 1_050);
        c.set_reference(Timestamp::from_nanos(10));
        assert_eq!(c.reference_now().as_nanos(), 1_050, "never backwards");
    }

    /// `get_ts_timed` draws what `get_ts` draws and brackets the wait: its first reading is no
    /// later than the timestamp, its last one is past it (the wait for a 2 µs window takes
    /// about 2 µs); the logical clock does not wait.
    #[test]
    fn get_ts_timed_brackets_the_wait() {
        let c = TestClock::new(2_000);
        for _ in 0..3 {
            let before = c.now().hi();
            let t = c.get_ts_timed();
            assert!(t.first_lo <= t.ts && t.ts < t.last_lo, "{t:?}");
            assert!(t.ts >= before, "{t:?} after a reading with hi {before:?}");
            assert!(t.last_lo.nanos_since(t.first_lo) >= 2_000, "{t:?}");
            assert!(c.get_ts() > t.ts);
        }
        let logical = crate::LogicalClock::new();
        let t = logical.get_ts_timed();
        assert_eq!((t.first_lo, t.last_lo), (t.ts, t.ts));
        assert!(logical.get_ts_timed().ts > t.ts);
    }

    #[test]
    fn drift_scales_with_elapsed_reference_time() {
        let c =
            TestClock::builder().reference(Reference::Manual { start_nanos: 1_000_000 }).build();
        c.set_thread_skew(0, 1_000); // 0.1% fast
        c.advance(1_000_000);
        assert_eq!(c.now().lo().as_nanos(), 2_000_000 + 1_000);
    }

    #[test]
    fn two_clocks_keep_separate_skews_and_clones_share() {
        let a = TestClock::builder().reference(Reference::Manual { start_nanos: 100 }).build();
        let b = TestClock::builder().reference(Reference::Manual { start_nanos: 100 }).build();
        a.set_thread_skew(7, 0);
        assert_eq!(a.now().lo().as_nanos(), 107);
        assert_eq!(b.now().lo().as_nanos(), 100);
        assert_eq!(a.clone().now().lo().as_nanos(), 107);
    }

    #[test]
    fn skews_are_assigned_by_first_use_index() {
        let c = TestClock::builder()
            .reference(Reference::Manual { start_nanos: 1_000 })
            .skew_by_index(|i| ThreadSkew::offset(i as i64 * 10))
            .build();
        assert_eq!(c.now().lo().as_nanos(), 1_000);
        let other = std::thread::scope(|s| s.spawn(|| c.now().lo().as_nanos()).join().unwrap());
        assert_eq!(other, 1_010);
    }

    #[test]
    fn stepped_reference_advances_per_reading() {
        let c = TestClock::builder()
            .claimed_boundary_nanos(5)
            .reference(Reference::Stepped { start_nanos: 0, step_nanos: 2 })
            .build();
        assert_eq!(c.now().lo().as_nanos(), 2);
        assert_eq!(c.now().lo().as_nanos(), 4);
        assert_eq!(c.reference_now().as_nanos(), 4);
        let t = c.get_ts();
        assert_eq!(t.as_nanos(), 6 + 5);
        assert!(c.now().lo() > t);
    }
}
