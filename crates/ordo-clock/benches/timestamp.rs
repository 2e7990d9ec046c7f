//! The cost of one `now()` and one `get_ts()` for the logical, ORDO and system clocks, on one
//! thread (ORDO Fig. 8 at one thread; `ordo bench clock` runs the multi-threaded version).
//!
//! `get_ts` on the ORDO clock waits out the boundary, so its cost is about `B`; on the system
//! clock it waits for the next distinct `CLOCK_MONOTONIC` reading.

use std::hint::black_box;

use criterion::{Criterion, criterion_main};
use ordo_clock::{CalibrateOptions, Clock, LogicalClock, OrdoClock, OrdoDetection, SystemClock};

fn bench_clock<C: Clock>(c: &mut Criterion, name: &str, clock: &C) {
    let mut group = c.benchmark_group(name);
    group.bench_function("now", |b| b.iter(|| black_box(clock.now())));
    group.bench_function("get_ts", |b| b.iter(|| black_box(clock.get_ts())));
    group.finish();
}

fn timestamps(c: &mut Criterion) {
    bench_clock(c, "logical", &LogicalClock::new());
    bench_clock(c, "system", &SystemClock::new());
    let options = CalibrateOptions { runs: 10_000, ..CalibrateOptions::default() };
    match OrdoClock::detect(&options, None) {
        Ok(OrdoDetection::Ordo { clock, .. }) => bench_clock(c, "ordo", &clock),
        Ok(OrdoDetection::UseSystemClock { reason }) => eprintln!("ordo clock skipped: {reason}"),
        Err(e) => eprintln!("ordo clock skipped: calibration failed: {e}"),
    }
}

// The macro generates an undocumented public function.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::timestamps);
}
criterion_main!(group::benches);
