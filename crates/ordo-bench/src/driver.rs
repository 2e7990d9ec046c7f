//! The timed multi-threaded driver every workload uses: start threads on a barrier, run a
//! closure in a loop until the deadline, and collect commits, latencies and per-reason aborts.

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use ordo::{AbortKind, Stats};

/// Latency percentiles in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Latency {
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
}

/// What one timed run measured.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct RunStats {
    /// Threads that ran.
    pub threads: usize,
    /// Wall-clock time of the measured phase, in seconds.
    pub elapsed_s: f64,
    /// Transactions committed (each logical transaction counts once, however often retried).
    pub committed: u64,
    /// Committed transactions per second.
    pub tx_per_s: f64,
    /// Aborted attempts by reason (names of `ordo::AbortKind`).
    pub aborts: Vec<(String, u64)>,
    /// Aborted attempts per attempt.
    pub abort_rate: f64,
    /// Latency of committed transactions, retries included.
    pub latency: Latency,
    /// Total time spent waiting out write-timestamp uncertainty, per commit, in ns.
    pub write_wait_ns_per_commit: f64,
    /// Workload-specific figures (e.g. `new_orders_per_s` for TPC-C), by name.
    pub metrics: Vec<(String, f64)>,
}

/// Runs `body(thread_index, rng_seed)` on `threads` threads until `duration` has passed. `body`
/// performs one complete transaction (with its retries) per call and returns normally.
pub fn run_timed<F>(
    threads: usize,
    duration: Duration,
    stats_before: Stats,
    stats: impl Fn() -> Stats,
    body: F,
) -> RunStats
where
    F: Fn(usize, &mut u64) + Sync,
{
    run_timed_then(threads, duration, stats_before, stats, body, |_| {})
}

/// [`run_timed`], and each worker calls `finish(thread_index)` when it stops, before the run
/// ends (e.g. to publish work a thread buffered, which other still-running workers may wait
/// for).
pub fn run_timed_then<F, G>(
    threads: usize,
    duration: Duration,
    stats_before: Stats,
    stats: impl Fn() -> Stats,
    body: F,
    finish: G,
) -> RunStats
where
    F: Fn(usize, &mut u64) + Sync,
    G: Fn(usize) + Sync,
{
    run_limited(threads, duration, None, stats_before, stats, body, finish)
}

/// How often the driver looks whether every thread of a counted run has finished.
const COUNTED_POLL: Duration = Duration::from_micros(200);

/// [`run_timed_then`], but each thread stops after `txns_per_thread` calls of `body` when that
/// is given (`duration` then only caps the run), and the run ends when the last thread does: a
/// run of exactly these transactions, whose instruction counts compare between builds (one
/// thread, one seed), as DBx1000's `MAX_TXN_PER_PART` does.
pub fn run_limited<F, G>(
    threads: usize,
    duration: Duration,
    txns_per_thread: Option<u64>,
    stats_before: Stats,
    stats: impl Fn() -> Stats,
    body: F,
    finish: G,
) -> RunStats
where
    F: Fn(usize, &mut u64) + Sync,
    G: Fn(usize) + Sync,
{
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run_salt = RUNS.fetch_add(1, Ordering::Relaxed).wrapping_mul(0xD1B5_4A32_D192_ED03);
    let barrier = Barrier::new(threads + 1);
    let stop = AtomicBool::new(false);
    let limit = txns_per_thread.unwrap_or(u64::MAX);
    let done = AtomicUsize::new(0);
    let mut hist = Histogram::<u64>::new(3).expect("3 significant figures is a valid histogram");
    let mut committed = 0u64;
    let mut elapsed = Duration::ZERO;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, stop, body, finish, done) = (&barrier, &stop, &body, &finish, &done);
                s.spawn(move || {
                    let mut h = Histogram::<u64>::new(3).expect("valid histogram");
                    let timer = Timer::new();
                    // Differs per thread and per run, so repetitions do not replay one stream.
                    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ (t as u64) << 32 ^ run_salt;
                    let mut n = 0u64;
                    barrier.wait();
                    while n < limit && !stop.load(Ordering::Relaxed) {
                        let start = timer.now_ns();
                        body(t, &mut state);
                        let _ = h.record(timer.now_ns().saturating_sub(start));
                        n += 1;
                    }
                    finish(t);
                    // Release: the driver's Acquire load sees every thread's work done.
                    done.fetch_add(1, Ordering::Release);
                    (n, h)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        if txns_per_thread.is_some() {
            // Until every thread has run its transactions, or the duration caps the run.
            while done.load(Ordering::Acquire) < threads && start.elapsed() < duration {
                std::thread::sleep(COUNTED_POLL);
            }
        } else {
            std::thread::sleep(duration);
        }
        stop.store(true, Ordering::Relaxed);
        for handle in handles {
            if let Ok((n, h)) = handle.join() {
                committed += n;
                let _ = hist.add(h);
            }
        }
        elapsed = start.elapsed();
    });
    let after = stats();
    let aborts: Vec<(String, u64)> = AbortKind::ALL
        .iter()
        .map(|k| (k.name().to_string(), after.aborts_of(*k) - stats_before.aborts_of(*k)))
        .collect();
    let aborted: u64 = aborts.iter().map(|(_, n)| n).sum();
    let commits_rw = after.commits - stats_before.commits;
    let wait = after.write_wait_ns - stats_before.write_wait_ns;
    // The engine's ways of not aborting, when they happened (see `ordo::Stats`).
    let metrics = [
        ("extensions", after.extensions - stats_before.extensions),
        ("locked_read_waits", after.locked_read_waits - stats_before.locked_read_waits),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .map(|(name, n)| (name.to_string(), n as f64))
    .collect();
    RunStats {
        threads,
        elapsed_s: elapsed.as_secs_f64(),
        committed,
        tx_per_s: committed as f64 / elapsed.as_secs_f64().max(1e-9),
        abort_rate: aborted as f64 / (aborted + committed).max(1) as f64,
        aborts,
        latency: Latency {
            p50_ns: hist.value_at_quantile(0.5),
            p99_ns: hist.value_at_quantile(0.99),
            p999_ns: hist.value_at_quantile(0.999),
        },
        write_wait_ns_per_commit: wait as f64 / commits_rw.max(1) as f64,
        metrics,
    }
}

/// Latency timing: the invariant counter where there is one (a few ns a reading), else
/// `Instant` (a `clock_gettime` call, which costs ~50 ns or a system call on some VMs).
struct Timer {
    counter: Option<ordo_clock::Counter>,
    epoch: Instant,
}

impl Timer {
    fn new() -> Self {
        Timer { counter: ordo_clock::Counter::detect().ok(), epoch: Instant::now() }
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        match &self.counter {
            Some(c) => c.read_nanos(),
            None => self.epoch.elapsed().as_nanos() as u64,
        }
    }
}

/// The median, minimum and maximum of some measurements.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Spread {
    /// Median.
    pub median: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
}

impl Spread {
    /// The spread of `values` (all zero when empty).
    pub fn of(values: &[f64]) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let mid = v.len() / 2;
        let median = if v.len() % 2 == 1 { v[mid] } else { (v[mid - 1] + v[mid]) / 2.0 };
        Spread { median, min: v[0], max: v[v.len() - 1] }
    }
}

/// Runs `body(thread)` on `threads` threads (untimed) and sums what they return; the first error
/// (or a panicked thread) is returned instead. Used by the workloads' counted test runs.
pub fn run_counted_threads<F>(threads: usize, body: F) -> Result<u64, ordo::Error>
where
    F: Fn(usize) -> Result<u64, ordo::Error> + Sync,
{
    let results: Vec<Result<u64, ordo::Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn({
                    let body = &body;
                    move || body(t)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| Err(ordo::Error::Config("worker panicked".into())))
            })
            .collect()
    });
    results.into_iter().sum()
}

/// Per-thread counters a workload adds to on its hot path without sharing a cache line, summed
/// when checked (e.g. the committed updates a post-run check expects).
#[derive(Debug)]
pub struct Tally {
    slots: Vec<crossbeam_utils::CachePadded<std::sync::atomic::AtomicU64>>,
}

impl Tally {
    /// Counters for up to `threads` threads (more threads share slots modulo the count).
    pub fn new(threads: usize) -> Self {
        Tally { slots: (0..threads.max(1)).map(|_| Default::default()).collect() }
    }

    /// Adds `n` to `thread`'s counter.
    #[inline]
    pub fn add(&self, thread: usize, n: u64) {
        // Relaxed: the total is read after the workers are joined, which orders it.
        self.slots[thread % self.slots.len()].fetch_add(n, Ordering::Relaxed);
    }

    /// The sum of every counter.
    pub fn total(&self) -> u64 {
        self.slots.iter().map(|s| s.load(Ordering::Relaxed)).sum()
    }
}
