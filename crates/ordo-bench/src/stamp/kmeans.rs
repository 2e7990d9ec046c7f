//! # kmeans — K-means clustering (STAMP `kmeans`)
//!
//! Points are assigned to the nearest of `k` centres, the centres are moved to the mean of their
//! points, and this repeats until fewer than `threshold` of the points changed cluster in an
//! iteration (or `loops_max` iterations ran). Like STAMP, the run is repeated for every `k` from
//! `min_clusters` (`-n`) to `max_clusters` (`-m`), each from `k` randomly picked points.
//!
//! ## The transactional part (as in STAMP's `normal_exec`)
//! Per iteration, threads grab chunks of [`CHUNK`] points through a transaction on a shared
//! cursor, find each point's nearest centre (reading the centres, which are immutable during an
//! iteration, outside transactions), and add the point to its cluster's accumulator — one
//! transaction per point over a per-cluster object `[count, sum_0 .. sum_{D-1}]`. At the end of
//! its work each thread adds its count of changed memberships to a shared `delta` object in one
//! transaction. Between two barriers thread 0 then reads and resets the accumulators, moves the
//! centres and decides whether to go on. With few clusters (`-m15`, STAMP's "kmeans-high")
//! the accumulators are heavily contended.
//!
//! ## Deviation from STAMP: fixed-point coordinates
//! STAMP's features and sums are `float`s, so the parallel result depends on the order of the
//! additions. Here coordinates are fixed-point integers ([`FRAC_BITS`] fractional bits, in
//! `[0, 2^FRAC_BITS)`), sums are exact integers and a new centre is `sum / count` (integer
//! division), and squared distances are exact — so the result does not depend on the order of
//! the accumulations, and [`Kmeans::verify`] demands that the parallel output (every centre,
//! every membership, every iteration's delta) *equals* the sequential one. Ties in distance go
//! to the lowest cluster index in both versions (STAMP's `<`).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Barrier, Mutex, RwLock};

use ordo::{Addr, Error, Ordo};
use ordo_clock::Clock;
use rand::{Rng, SeedableRng, rngs::SmallRng};

use super::{
    Kernel, Size, alloc_objects, bytes_to_words, check_range, check_threads, on_threads,
    parse_value, unknown_param, words_to_bytes,
};
use crate::error::BenchError;

/// Fractional bits of the fixed-point coordinates: a coordinate is an integer in
/// `[0, 2^FRAC_BITS)` standing for `x / 2^FRAC_BITS`.
pub const FRAC_BITS: u32 = 16;

/// Points per grab of the shared cursor (STAMP's `CHUNK`).
pub const CHUNK: usize = 3;

/// Generator and algorithm parameters. The input file of STAMP
/// (`random-n<points>-d<dims>-c<centres>.txt`) is generated instead of read.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct KmeansParams {
    /// Points (`n` in the input's name).
    pub points: usize,
    /// Dimensions per point (`d` in the input's name).
    pub dims: usize,
    /// Centres the points are generated around (`c` in the input's name).
    pub centres: usize,
    /// Smallest `k` (`-n`).
    pub min_clusters: usize,
    /// Largest `k` (`-m`).
    pub max_clusters: usize,
    /// Stop when at most this fraction of the points changed cluster (`-t`).
    pub threshold: f64,
    /// Most iterations per `k` (STAMP: 500).
    pub loops_max: usize,
}

/// The generated input.
#[derive(Clone, Debug)]
pub struct KmeansInput {
    /// The parameters it was made with.
    pub params: KmeansParams,
    /// `points × dims` fixed-point coordinates, row-major.
    pub coords: Vec<i64>,
    /// For each `k` from `min_clusters` to `max_clusters`, the indices of the points that are
    /// the initial centres.
    pub initial: Vec<Vec<usize>>,
}

/// The clustering for one `k`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KmeansRun {
    /// `k`.
    pub clusters: usize,
    /// Points that changed cluster, per iteration.
    pub deltas: Vec<u64>,
    /// Final centres, `k × dims` fixed-point coordinates.
    pub centres: Vec<i64>,
    /// Final cluster of every point.
    pub membership: Vec<u32>,
}

/// One [`KmeansRun`] per `k`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KmeansOutput {
    /// In order of `k`.
    pub runs: Vec<KmeansRun>,
}

/// The kernel.
#[derive(Debug)]
pub struct Kmeans;

const PARAM_NAMES: &str = "points, dims, centres, n|min-clusters, m|max-clusters, t|threshold, \
                           loops-max";

impl Kernel for Kmeans {
    const NAME: &'static str = "kmeans";
    type Params = KmeansParams;
    type Input = KmeansInput;
    type Output = KmeansOutput;

    /// Small: `-m15 -n15 -t0.05 -i random-n2048-d16-c16`; medium: `-m15 -n15 -t0.05 -i
    /// random-n16384-d24-c16` (STAMP's "kmeans-high" inputs); large: the standard
    /// `-m15 -n15 -t0.00001 -i random-n65536-d32-c16`.
    fn params(size: Size) -> KmeansParams {
        let (points, dims, threshold) = match size {
            Size::Small => (2048, 16, 0.05),
            Size::Medium => (16384, 24, 0.05),
            Size::Large => (65536, 32, 0.00001),
        };
        KmeansParams {
            points,
            dims,
            centres: 16,
            min_clusters: 15,
            max_clusters: 15,
            threshold,
            loops_max: 500,
        }
    }

    fn validate(p: &KmeansParams) -> Result<(), BenchError> {
        check_range("points", p.points, 1..=1 << 22, "1..=4194304")?;
        check_range("dims", p.dims, 1..=64, "1..=64")?;
        check_range("centres", p.centres, 1..=p.points, "1..=points")?;
        check_range(
            "min-clusters",
            p.min_clusters,
            1..=p.points.min(1024),
            "1..=min(points, 1024)",
        )?;
        check_range(
            "max-clusters",
            p.max_clusters,
            p.min_clusters..=p.points.min(1024),
            "min-clusters..=min(points, 1024)",
        )?;
        if !(0.0..=1.0).contains(&p.threshold) {
            return Err(BenchError::OutOfRange {
                name: "threshold",
                value: p.threshold.to_string(),
                expected: "0..=1",
            });
        }
        check_range("loops-max", p.loops_max, 1..=100_000, "1..=100000")
    }

    fn generate(p: &KmeansParams, seed: u64) -> Result<KmeansInput, BenchError> {
        Self::validate(p)?;
        let mut rng = SmallRng::seed_from_u64(seed);
        let one = 1i64 << FRAC_BITS;
        let centres: Vec<i64> = (0..p.centres * p.dims).map(|_| rng.random_range(0..one)).collect();
        let spread = one / 8;
        let mut coords = Vec::with_capacity(p.points * p.dims);
        for _ in 0..p.points {
            let c = rng.random_range(0..p.centres);
            for j in 0..p.dims {
                let x = centres[c * p.dims + j] + rng.random_range(-spread..=spread);
                coords.push(x.clamp(0, one - 1));
            }
        }
        let initial = (p.min_clusters..=p.max_clusters)
            .map(|k| (0..k).map(|_| rng.random_range(0..p.points)).collect())
            .collect();
        Ok(KmeansInput { params: p.clone(), coords, initial })
    }

    fn sequential(input: &KmeansInput) -> KmeansOutput {
        let p = &input.params;
        let mut runs = Vec::new();
        for picks in &input.initial {
            let k = picks.len();
            let mut centres = initial_centres(input, picks);
            let mut membership = vec![u32::MAX; p.points];
            let mut deltas = Vec::new();
            loop {
                let mut sums = vec![0i64; k * (p.dims + 1)];
                let mut delta = 0u64;
                for (i, m) in membership.iter_mut().enumerate() {
                    let point = &input.coords[i * p.dims..(i + 1) * p.dims];
                    let c = nearest(point, &centres, p.dims);
                    if *m != c as u32 {
                        delta += 1;
                    }
                    *m = c as u32;
                    let acc = &mut sums[c * (p.dims + 1)..(c + 1) * (p.dims + 1)];
                    acc[0] += 1;
                    for (a, x) in acc[1..].iter_mut().zip(point) {
                        *a += x;
                    }
                }
                move_centres(&mut centres, &sums, p.dims);
                deltas.push(delta);
                if !go_on(p, delta, deltas.len()) {
                    break;
                }
            }
            runs.push(KmeansRun { clusters: k, deltas, centres, membership });
        }
        KmeansOutput { runs }
    }

    fn parallel<C: Clock + Send + Sync + 'static>(
        db: &Ordo<C>,
        input: &KmeansInput,
        threads: usize,
    ) -> Result<KmeansOutput, BenchError> {
        check_threads(threads)?;
        let mut runs = Vec::new();
        for picks in &input.initial {
            runs.push(parallel_one(db, input, picks, threads)?);
        }
        Ok(KmeansOutput { runs })
    }

    fn verify(
        _input: &KmeansInput,
        sequential: &KmeansOutput,
        parallel: &KmeansOutput,
    ) -> Result<(), BenchError> {
        let bad = |what: String| Err(BenchError::Inconsistent(format!("kmeans: {what}")));
        if sequential.runs.len() != parallel.runs.len() {
            return bad(format!(
                "{} clusterings, the sequential version made {}",
                parallel.runs.len(),
                sequential.runs.len()
            ));
        }
        for (s, p) in sequential.runs.iter().zip(&parallel.runs) {
            let k = s.clusters;
            if s.clusters != p.clusters {
                return bad(format!("k = {} where the sequential run has k = {k}", p.clusters));
            }
            if s.deltas != p.deltas {
                return bad(format!(
                    "k = {k}: changed memberships per iteration {:?}, sequential {:?}",
                    p.deltas, s.deltas
                ));
            }
            if let Some(i) = (0..s.centres.len().max(p.centres.len()))
                .find(|i| s.centres.get(*i) != p.centres.get(*i))
            {
                return bad(format!(
                    "k = {k}: centre coordinate {i} is {:?}, sequential {:?}",
                    p.centres.get(i),
                    s.centres.get(i)
                ));
            }
            if let Some(i) = (0..s.membership.len().max(p.membership.len()))
                .find(|i| s.membership.get(*i) != p.membership.get(*i))
            {
                return bad(format!(
                    "k = {k}: point {i} is in cluster {:?}, sequential {:?}",
                    p.membership.get(i),
                    s.membership.get(i)
                ));
            }
        }
        Ok(())
    }

    fn set_param(p: &mut KmeansParams, name: &str, value: &str) -> Result<(), BenchError> {
        let app = Self::NAME;
        match name {
            "points" => p.points = parse_value(app, name, value)?,
            "dims" => p.dims = parse_value(app, name, value)?,
            "centres" => p.centres = parse_value(app, name, value)?,
            "n" | "min-clusters" => p.min_clusters = parse_value(app, name, value)?,
            "m" | "max-clusters" => p.max_clusters = parse_value(app, name, value)?,
            "t" | "threshold" => p.threshold = parse_value(app, name, value)?,
            "loops-max" => p.loops_max = parse_value(app, name, value)?,
            _ => return Err(unknown_param(app, name, PARAM_NAMES)),
        }
        Ok(())
    }
}

/// The centres a clustering starts from: copies of the picked points.
fn initial_centres(input: &KmeansInput, picks: &[usize]) -> Vec<i64> {
    let d = input.params.dims;
    picks.iter().flat_map(|&i| input.coords[i * d..(i + 1) * d].iter().copied()).collect()
}

/// The index of the centre nearest to `point` (squared Euclidean distance; ties to the lowest).
fn nearest(point: &[i64], centres: &[i64], dims: usize) -> usize {
    let mut best = 0;
    let mut best_dist = i64::MAX;
    for (c, centre) in centres.chunks_exact(dims).enumerate() {
        let dist: i64 = point.iter().zip(centre).map(|(x, y)| (x - y) * (x - y)).sum();
        if dist < best_dist {
            best = c;
            best_dist = dist;
        }
    }
    best
}

/// Moves every centre with points to the mean of its points (`sums` holds `[count, sums..]`
/// per cluster); a centre without points stays (as in STAMP).
fn move_centres(centres: &mut [i64], sums: &[i64], dims: usize) {
    for (centre, acc) in centres.chunks_exact_mut(dims).zip(sums.chunks_exact(dims + 1)) {
        if acc[0] > 0 {
            for (x, s) in centre.iter_mut().zip(&acc[1..]) {
                *x = s / acc[0];
            }
        }
    }
}

/// Whether another iteration runs after `iterations` with `delta` changes in the last.
fn go_on(p: &KmeansParams, delta: u64, iterations: usize) -> bool {
    (delta as f64 / p.points as f64) > p.threshold && iterations < p.loops_max
}

/// The shared objects of one clustering.
struct Shared {
    /// Per cluster `[count, sum_0 .. sum_{D-1}]` as two's-complement words.
    accumulators: Vec<Addr>,
    /// The next point to hand out (a `u64`).
    cursor: Addr,
    /// Points that changed cluster this iteration (a `u64`).
    delta: Addr,
}

/// One clustering with `picks.len()` clusters on `threads` threads.
fn parallel_one<C: Clock + Send + Sync + 'static>(
    db: &Ordo<C>,
    input: &KmeansInput,
    picks: &[usize],
    threads: usize,
) -> Result<KmeansRun, BenchError> {
    let p = &input.params;
    let k = picks.len();
    let zero = vec![0u64; p.dims + 1];
    let accumulators = alloc_objects(db, (0..k).map(|_| words_to_bytes(&zero)))?;
    let (cursor, delta) = db.run(|tx| Ok::<_, Error>((tx.alloc(&0u64)?, tx.alloc(&0u64)?)))?;
    let shared = Shared { accumulators, cursor, delta };
    // Relaxed throughout: in an iteration each point's entry is written by the one thread that
    // took its chunk; iterations are separated by `Barrier::wait`, which orders them.
    let membership: Vec<AtomicU32> = (0..p.points).map(|_| AtomicU32::new(u32::MAX)).collect();
    let centres = RwLock::new(initial_centres(input, picks));
    let deltas = Mutex::new(Vec::new());
    let failure: Mutex<Option<BenchError>> = Mutex::new(None);
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(threads);
    let fail = |e: BenchError| {
        let mut slot = failure.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert(e);
    };
    on_threads(threads, |t| {
        loop {
            let mine = centres.read().unwrap_or_else(|e| e.into_inner()).clone();
            if let Err(e) = assign_points(db, input, &shared, &mine, &membership) {
                fail(e);
            }
            barrier.wait();
            if t == 0 {
                let failed = failure.lock().unwrap_or_else(|e| e.into_inner()).is_some();
                let next = if failed {
                    Ok(false)
                } else {
                    let mut c = centres.write().unwrap_or_else(|e| e.into_inner());
                    let mut d = deltas.lock().unwrap_or_else(|e| e.into_inner());
                    end_iteration(db, p, &shared, &mut c, &mut d)
                };
                match next {
                    Ok(go) => stop.store(!go, Ordering::Relaxed),
                    Err(e) => {
                        fail(e);
                        stop.store(true, Ordering::Relaxed);
                    }
                }
            }
            barrier.wait();
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
        }
    })?;
    if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    Ok(KmeansRun {
        clusters: k,
        deltas: deltas.into_inner().unwrap_or_else(|e| e.into_inner()),
        centres: centres.into_inner().unwrap_or_else(|e| e.into_inner()),
        membership: membership.into_iter().map(AtomicU32::into_inner).collect(),
    })
}

/// One thread's share of an iteration: grab chunks, assign their points, accumulate.
fn assign_points<C: Clock>(
    db: &Ordo<C>,
    input: &KmeansInput,
    shared: &Shared,
    centres: &[i64],
    membership: &[AtomicU32],
) -> Result<(), BenchError> {
    let p = &input.params;
    let mut delta = 0u64;
    loop {
        let start = db.run(|tx| {
            let s: u64 = tx.read(shared.cursor)?;
            tx.write(shared.cursor, &(s + CHUNK as u64))?;
            Ok::<_, Error>(s as usize)
        })?;
        if start >= p.points {
            break;
        }
        for (i, m) in membership.iter().enumerate().take((start + CHUNK).min(p.points)).skip(start)
        {
            let point = &input.coords[i * p.dims..(i + 1) * p.dims];
            let c = nearest(point, centres, p.dims);
            if m.load(Ordering::Relaxed) != c as u32 {
                delta += 1;
            }
            m.store(c as u32, Ordering::Relaxed);
            let acc = shared.accumulators[c];
            db.run(|tx| {
                tx.update_words(acc, |words| {
                    words[0] += 1;
                    for (w, x) in words[1..].iter_mut().zip(point) {
                        *w = (*w as i64 + x) as u64;
                    }
                })
            })?;
        }
    }
    db.run(|tx| {
        let d: u64 = tx.read(shared.delta)?;
        tx.write(shared.delta, &(d + delta))
    })?;
    Ok(())
}

/// Thread 0 between the barriers: read and reset the accumulators, the cursor and the delta in
/// one transaction, move the centres, and say whether another iteration runs.
fn end_iteration<C: Clock>(
    db: &Ordo<C>,
    p: &KmeansParams,
    shared: &Shared,
    centres: &mut [i64],
    deltas: &mut Vec<u64>,
) -> Result<bool, BenchError> {
    let zero = words_to_bytes(&vec![0u64; p.dims + 1]);
    let (delta, sums) = db.run(|tx| {
        let delta: u64 = tx.read(shared.delta)?;
        let mut sums = Vec::with_capacity(shared.accumulators.len() * (p.dims + 1));
        for &acc in &shared.accumulators {
            sums.extend(tx.read_with(acc, bytes_to_words)?.into_iter().map(|w| w as i64));
            tx.write_bytes(acc, &zero)?;
        }
        tx.write(shared.delta, &0u64)?;
        tx.write(shared.cursor, &0u64)?;
        Ok::<_, Error>((delta, sums))
    })?;
    if sums.len() != shared.accumulators.len() * (p.dims + 1) {
        return Err(BenchError::Inconsistent(format!(
            "kmeans: accumulators hold {} words, expected {}",
            sums.len(),
            shared.accumulators.len() * (p.dims + 1)
        )));
    }
    move_centres(centres, &sums, p.dims);
    deltas.push(delta);
    Ok(go_on(p, delta, deltas.len()))
}
