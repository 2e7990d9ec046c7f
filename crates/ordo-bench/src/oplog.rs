//! The Oplog reverse-map benchmark (ORDO §6.3, Fig. 10's data structure without the kernel).
//!
//! Each worker thread is a process that maps and unmaps pages, as `mmap`/`munmap`/`fork`/`exit`
//! do: an update either adds a mapping `(its address space, a fresh virtual address)` of a random
//! page or removes its oldest live mapping, keeping at most `live_max` live mappings per thread.
//! With probability `read_ratio` an operation instead reads one page's mappings (swap-out), which
//! merges the logs of that page's object into it. Updates are logged in the thread's own log of
//! an [`ordo_apps::oplog::Oplog`] stamped by the clock under test: the logical clock (one shared
//! counter, written by every update) or ORDO (`get_ts`: no shared write, a wait of the
//! boundary).
//!
//! # Objects
//! OpLog logs per *object* (Boyd-Wickizer et al. §3: each kernel object that uses it — an
//! `anon_vma`, an `address_space` — embeds its own per-core logs), so a read merges only the
//! logs of the object it reads. Here the pages are split into `objects` reverse maps, page `p`
//! in object `p mod objects`, each an [`Oplog`] with one log per thread, all stamped by one
//! shared clock. `objects = 1` is a single reverse map for every page: each read then merges
//! every update of every thread under one lock, which serializes the workload (the merge is
//! the work), so it does not scale whatever the clock.
//!
//! Nothing a worker touches on an update is shared: its log in the object (a cache-padded
//! mutex nobody else takes but a reader of that object), its own state and counters (padded),
//! and the clock — the shared counter of the logical clock, nothing for ORDO.
//!
//! Reported: operations per second (`tx_per_s`), and `updates_per_s` / `reads_per_s` in
//! `metrics`; latency is per operation.
//!
//! **Check** (after every run): the reverse map, merged up to a fresh cut, holds exactly the
//! union of the threads' live mappings, and every logged update has been applied. Each thread
//! removes only mappings it added earlier, so an add applied after its remove would leave a
//! stale mapping behind — a wrong merge order shows.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use ordo_apps::oplog::{Mapping, Oplog, Rmap, RmapOp};
use ordo_clock::Clock;
use rand::{Rng, SeedableRng, rngs::SmallRng};

use crate::driver::{RunStats, Tally, run_timed};
use crate::error::BenchError;
use crate::harness::Loaded;

/// Objects a run splits the pages into unless told otherwise.
pub const OBJECTS_DEFAULT: usize = 64;

/// The most objects a run may use (each holds a cache-padded log per thread).
pub const OBJECTS_MAX: usize = 1 << 12;

/// Parameters of an Oplog run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OplogConfig {
    /// Physical pages mappings are drawn from (uniformly).
    pub pages: u64,
    /// Live mappings a thread keeps at most before it removes its oldest.
    pub live_max: usize,
    /// Fraction of operations that read a page's mappings, in `[0, 1]`.
    pub read_ratio: f64,
    /// Objects (reverse maps, each with its own logs) the pages are split into (module docs).
    pub objects: usize,
    /// Worker threads: the number of logs, and the most threads a run may use.
    pub threads: usize,
    /// Measured duration.
    #[serde(serialize_with = "crate::report::duration_ms")]
    pub duration: Duration,
    /// Seed of the workers' choices.
    pub seed: u64,
}

impl Default for OplogConfig {
    fn default() -> Self {
        OplogConfig {
            pages: 4096,
            live_max: 64,
            read_ratio: 0.01,
            objects: OBJECTS_DEFAULT,
            threads: 1,
            duration: Duration::from_secs(1),
            seed: 1,
        }
    }
}

impl OplogConfig {
    /// Checks every parameter; returns the first that is out of range.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad =
            |name, value: String, expected| Err(BenchError::OutOfRange { name, value, expected });
        if self.threads == 0 {
            return Err(BenchError::ZeroThreads);
        }
        if self.threads > ordo_apps::oplog::THREADS_MAX {
            return bad("threads", self.threads.to_string(), "1..=65536");
        }
        if self.pages == 0 {
            return bad("pages", self.pages.to_string(), "at least 1");
        }
        if self.live_max == 0 || self.live_max > 1 << 20 {
            return bad("live-max", self.live_max.to_string(), "1..=1048576");
        }
        if !(0.0..=1.0).contains(&self.read_ratio) {
            return bad("read-ratio", self.read_ratio.to_string(), "0..=1");
        }
        if self.objects == 0 || self.objects > OBJECTS_MAX {
            return bad("objects", self.objects.to_string(), "1..=4096");
        }
        Ok(())
    }
}

/// One worker's process state: its live mappings, oldest first.
struct Process {
    rng: SmallRng,
    live: VecDeque<(u64, Mapping)>,
    next_vaddr: u64,
}

/// The reverse map on one clock, with every worker's state between runs.
pub struct OplogBench<C: Clock> {
    /// Object `i` holds the pages `p` with `p mod objects == i`; all share one clock.
    objects: Vec<Oplog<Rmap, Arc<C>>>,
    cfg: OplogConfig,
    /// Worker `t`'s state; only worker `t` locks it during a run (uncontended, and padded so
    /// that neighbours' states share no cache line).
    processes: Vec<CachePadded<Mutex<Process>>>,
    updates: Tally,
    reads: Tally,
}

/// Creates the (empty) reverse map on `clock` with `cfg.threads` logs.
pub fn load<C: Clock>(clock: C, cfg: &OplogConfig) -> Result<OplogBench<C>, BenchError> {
    cfg.validate()?;
    let processes = (0..cfg.threads)
        .map(|t| {
            CachePadded::new(Mutex::new(Process {
                rng: SmallRng::seed_from_u64(cfg.seed ^ ((t as u64 + 1) * 0x9E37_79B9)),
                live: VecDeque::with_capacity(cfg.live_max),
                next_vaddr: 0,
            }))
        })
        .collect();
    let clock = Arc::new(clock);
    let objects = (0..cfg.objects)
        .map(|_| Oplog::new(Rmap::default(), clock.clone(), cfg.threads))
        .collect::<Result<_, _>>()?;
    Ok(OplogBench {
        objects,
        cfg: cfg.clone(),
        processes,
        updates: Tally::new(cfg.threads),
        reads: Tally::new(cfg.threads),
    })
}

impl<C: Clock> OplogBench<C> {
    /// The object holding `page`.
    fn object(&self, page: u64) -> &Oplog<Rmap, Arc<C>> {
        // The remainder is below `objects.len()`, a usize.
        &self.objects[(page % self.objects.len() as u64) as usize]
    }

    /// One operation of worker `t`.
    fn operation(&self, t: usize, p: &mut Process) -> Result<(), BenchError> {
        if self.cfg.read_ratio > 0.0 && p.rng.random_bool(self.cfg.read_ratio) {
            let page = p.rng.random_range(0..self.cfg.pages);
            std::hint::black_box(self.object(page).read(|r| r.mappings(page).len())?);
            self.reads.add(t, 1);
            return Ok(());
        }
        let op = if p.live.len() >= self.cfg.live_max
            || (!p.live.is_empty() && p.rng.random_bool(0.5))
        {
            match p.live.pop_front() {
                Some((page, mapping)) => RmapOp::Remove { page, mapping },
                None => return Ok(()),
            }
        } else {
            let page = p.rng.random_range(0..self.cfg.pages);
            // `t < THREADS_MAX`, which fits in u32.
            let mapping = Mapping { space: t as u32, vaddr: p.next_vaddr };
            p.next_vaddr += 4096;
            p.live.push_back((page, mapping));
            RmapOp::Add { page, mapping }
        };
        let page = match op {
            RmapOp::Add { page, .. } | RmapOp::Remove { page, .. } => page,
        };
        self.object(page).log(t, op)?;
        self.updates.add(t, 1);
        Ok(())
    }

    /// Runs `ops_per_thread` operations on each of `threads` threads (no timer), for tests.
    pub fn run_counted(&self, threads: usize, ops_per_thread: u64) -> Result<(), BenchError> {
        self.check_threads(threads)?;
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    s.spawn(move || {
                        let mut p = self.processes[t].lock().unwrap_or_else(|e| e.into_inner());
                        (0..ops_per_thread).try_for_each(|_| self.operation(t, &mut p))
                    })
                })
                .collect();
            handles.into_iter().try_for_each(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(BenchError::Inconsistent("an oplog worker panicked".into()))
                })
            })
        })
    }

    /// Updates and reads done so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.updates.total(), self.reads.total())
    }

    fn check_threads(&self, threads: usize) -> Result<(), BenchError> {
        if threads == 0 {
            return Err(BenchError::ZeroThreads);
        }
        if threads > self.processes.len() {
            return Err(BenchError::OutOfRange {
                name: "threads",
                value: threads.to_string(),
                expected: "at most the threads the oplog was loaded for",
            });
        }
        Ok(())
    }
}

impl<C: Clock> Loaded for OplogBench<C> {
    fn run(&self, threads: usize, duration: Duration) -> Result<RunStats, BenchError> {
        self.check_threads(threads)?;
        let (updates0, reads0) = self.counts();
        let failed = Mutex::new(None);
        let stats = ordo::Stats::default();
        let mut r = run_timed(
            threads,
            duration,
            stats.clone(),
            || stats.clone(),
            |t, _| {
                let mut p = self.processes[t].lock().unwrap_or_else(|e| e.into_inner());
                if let Err(e) = self.operation(t, &mut p) {
                    failed.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
                }
            },
        );
        if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
        let (updates1, reads1) = self.counts();
        let elapsed = r.elapsed_s.max(1e-9);
        r.metrics.push(("updates_per_s".into(), (updates1 - updates0) as f64 / elapsed));
        r.metrics.push(("reads_per_s".into(), (reads1 - reads0) as f64 / elapsed));
        Ok(r)
    }

    fn check(&self) -> Result<(), BenchError> {
        let mut expected: BTreeMap<u64, BTreeSet<Mapping>> = BTreeMap::new();
        for p in &self.processes {
            let p = p.lock().unwrap_or_else(|e| e.into_inner());
            for (page, mapping) in &p.live {
                expected.entry(*page).or_default().insert(*mapping);
            }
        }
        let mut found = BTreeMap::new();
        for object in &self.objects {
            found.append(&mut object.read(Rmap::snapshot)?);
        }
        if found != expected {
            let page = expected
                .keys()
                .chain(found.keys())
                .find(|p| expected.get(*p) != found.get(*p))
                .copied()
                .unwrap_or_default();
            let empty = BTreeSet::new();
            let (want, got) =
                (expected.get(&page).unwrap_or(&empty), found.get(&page).unwrap_or(&empty));
            let missing: Vec<_> = want.difference(got).take(4).collect();
            let extra: Vec<_> = got.difference(want).take(4).collect();
            return Err(BenchError::Inconsistent(format!(
                "the reverse map differs from the live mappings at page {page}: missing \
                 {missing:?}, extra {extra:?} (at most 4 each)"
            )));
        }
        let mut applied = 0u64;
        for object in &self.objects {
            applied += object.applied()?;
        }
        if applied != self.updates.total() {
            return Err(BenchError::Inconsistent(format!(
                "{} updates logged but {applied} applied after a full merge",
                self.updates.total()
            )));
        }
        Ok(())
    }
}
