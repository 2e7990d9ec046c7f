//! STAMP kernels at tiny sizes: the parallel version on Ordo reproduces the sequential result
//! (or, for labyrinth, the invariants of every serial order) at 1, 2 and 4 threads with the
//! logical and the ORDO (or system) clock; corrupted outputs are rejected; bad parameters give
//! typed errors.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use ordo::{Config, Ordo};
use ordo_bench::error::BenchError;
use ordo_bench::stamp::intruder::Intruder;
use ordo_bench::stamp::kmeans::{Kmeans, KmeansParams};
use ordo_bench::stamp::labyrinth::{ENDPOINT, Labyrinth, LabyrinthParams};
use ordo_bench::stamp::ssca2::{self, Ssca2, Ssca2Params};
use ordo_bench::stamp::{App, Kernel, RunConfig, Size, kernel_params, run_app, run_kernel};
use ordo_clock::{AnyClock, Counter, LogicalClock, OrdoClock, SystemClock};

/// The logical clock and the ORDO clock (the system clock where no invariant counter exists).
fn clocks() -> Vec<(String, Arc<AnyClock>)> {
    let second =
        match Counter::detect().ok().and_then(|c| OrdoClock::with_boundary_nanos(c, 2_000).ok()) {
            Some(c) => ("ordo".to_owned(), Arc::new(AnyClock::Ordo(c))),
            None => ("system".to_owned(), Arc::new(AnyClock::System(SystemClock::new()))),
        };
    vec![("logical".to_owned(), Arc::new(AnyClock::Logical(LogicalClock::new()))), second]
}

fn config() -> RunConfig {
    RunConfig {
        thread_counts: vec![1, 2, 4],
        repetitions: 1,
        seed: 7,
        durability: ordo_bench::engine::Durability::none(),
    }
}

fn tiny_kmeans() -> KmeansParams {
    KmeansParams {
        points: 300,
        dims: 4,
        centres: 4,
        min_clusters: 3,
        max_clusters: 4,
        threshold: 0.01,
        loops_max: 50,
    }
}

fn tiny_ssca2() -> Ssca2Params {
    Ssca2Params {
        scale: 8,
        prob_interclique: 1.0,
        prob_unidirectional: 1.0,
        path_length_max: 3,
        parallel_edges_max: 3,
    }
}

fn tiny_labyrinth() -> LabyrinthParams {
    LabyrinthParams { width: 10, height: 10, depth: 2, paths: 24 }
}

fn db() -> Ordo<LogicalClock> {
    Ordo::with_clock(Config::default(), LogicalClock::new()).unwrap()
}

#[test]
fn kmeans_parallel_equals_sequential() {
    let report =
        run_kernel::<Kmeans, _>(&tiny_kmeans(), &config(), &clocks(), &mut |_| {}).unwrap();
    assert_eq!(report.runs.len(), 6);
    assert!(report.runs.iter().all(|r| r.commits > 0));
    // The work is real: several iterations, every point assigned.
    let input = Kmeans::generate(&tiny_kmeans(), 7).unwrap();
    let out = Kmeans::sequential(&input);
    assert_eq!(out.runs.len(), 2);
    assert!(out.runs.iter().all(|r| r.deltas.len() > 1 && r.membership.iter().all(|m| *m < 4)));
}

#[test]
fn ssca2_parallel_equals_sequential() {
    let report = run_kernel::<Ssca2, _>(&tiny_ssca2(), &config(), &clocks(), &mut |_| {}).unwrap();
    assert_eq!(report.runs.len(), 6);
    let input = Ssca2::generate(&tiny_ssca2(), 7).unwrap();
    let out = Ssca2::sequential(&input);
    // -u1.0 makes every intra-clique edge one-way, so there are many implied edges, and some
    // vertex overflows the head's inline slots into a chunk.
    assert!(out.implied.list.len() > 100, "{}", out.implied.list.len());
    assert!((0..256).any(|v| out.implied.of(v).len() > ssca2::HEAD_SLOTS));
}

/// Cliques of up to 16 vertices: some in-list runs past its head and two linked chunks, and
/// the parallel in-lists still equal the sequential ones.
#[test]
fn ssca2_in_lists_chain_several_chunks() {
    let params = Ssca2Params { scale: 12, ..tiny_ssca2() };
    let input = Ssca2::generate(&params, 7).unwrap();
    let out = Ssca2::sequential(&input);
    let two_chunks = ssca2::HEAD_SLOTS + 2 * ssca2::CHUNK_SLOTS;
    assert!((0..out.implied.vertices()).any(|v| out.implied.of(v).len() > two_chunks));
    let report = run_kernel::<Ssca2, _>(&params, &config(), &clocks(), &mut |_| {}).unwrap();
    assert_eq!(report.runs.len(), 6);
}

#[test]
fn labyrinth_parallel_satisfies_serial_invariants() {
    let report =
        run_kernel::<Labyrinth, _>(&tiny_labyrinth(), &config(), &clocks(), &mut |_| {}).unwrap();
    assert_eq!(report.runs.len(), 6);
    let input = Labyrinth::generate(&tiny_labyrinth(), 7).unwrap();
    let seq = Labyrinth::sequential(&input);
    // The maze is tight enough that some paths are dropped and some routed.
    assert!(seq.routed() > 0 && seq.routed() < 24, "{} routed", seq.routed());
    // One thread claims in path order: the same routes as the sequential version.
    let par = Labyrinth::parallel(&db(), &input, 1).unwrap();
    assert_eq!(
        par.routes.iter().map(|r| r.as_ref().map(|r| r.cells.clone())).collect::<Vec<_>>(),
        seq.routes.iter().map(|r| r.as_ref().map(|r| r.cells.clone())).collect::<Vec<_>>()
    );
    assert_eq!(par.grid, seq.grid);
}

#[test]
fn kmeans_rejects_corrupted_output() {
    let input = Kmeans::generate(&tiny_kmeans(), 3).unwrap();
    let seq = Kmeans::sequential(&input);
    let par = Kmeans::parallel(&db(), &input, 2).unwrap();
    Kmeans::verify(&input, &seq, &par).unwrap();
    let mut bad = par.clone();
    bad.runs[0].centres[5] += 1;
    assert!(matches!(Kmeans::verify(&input, &seq, &bad), Err(BenchError::Inconsistent(_))));
    let mut bad = par.clone();
    bad.runs[1].membership[17] = (bad.runs[1].membership[17] + 1) % 4;
    assert!(matches!(Kmeans::verify(&input, &seq, &bad), Err(BenchError::Inconsistent(_))));
    let mut bad = par;
    bad.runs[0].deltas.push(0);
    assert!(Kmeans::verify(&input, &seq, &bad).is_err());
}

#[test]
fn ssca2_rejects_corrupted_output() {
    let input = Ssca2::generate(&tiny_ssca2(), 3).unwrap();
    let seq = Ssca2::sequential(&input);
    let par = Ssca2::parallel(&db(), &input, 2).unwrap();
    Ssca2::verify(&input, &seq, &par).unwrap();
    // An implied edge lost (as a lost update of a counter would lose it).
    let mut bad = par.clone();
    let v = (0..256).find(|v| !bad.implied.of(*v).is_empty()).unwrap();
    let at = bad.implied.index[v];
    bad.implied.list.remove(at);
    for i in &mut bad.implied.index[v + 1..] {
        *i -= 1;
    }
    assert!(matches!(Ssca2::verify(&input, &seq, &bad), Err(BenchError::Inconsistent(_))));
    // An out-edge redirected.
    let mut bad = par.clone();
    bad.out.list[0] ^= 1;
    assert!(Ssca2::verify(&input, &seq, &bad).is_err());
    // A wrong shared total.
    let mut bad = par;
    bad.out_total += 1;
    assert!(Ssca2::verify(&input, &seq, &bad).is_err());
}

#[test]
fn labyrinth_rejects_corrupted_output() {
    let input = Labyrinth::generate(&tiny_labyrinth(), 3).unwrap();
    let seq = Labyrinth::sequential(&input);
    let par = Labyrinth::parallel(&db(), &input, 2).unwrap();
    Labyrinth::verify(&input, &seq, &par).unwrap();
    let routed: Vec<usize> = (0..24).filter(|i| par.routes[*i].is_some()).collect();
    let long = *routed
        .iter()
        .find(|i| par.routes[**i].as_ref().unwrap().cells.len() > 3)
        .expect("a routed path with inner cells");
    let check = |out: &ordo_bench::stamp::labyrinth::LabyrinthOutput| {
        matches!(Labyrinth::verify(&input, &seq, out), Err(BenchError::Inconsistent(_)))
    };
    // A path forgotten: its cells stay claimed, and it looks dropped though routable.
    let mut bad = par.clone();
    bad.routes[long] = None;
    assert!(check(&bad));
    // A path forgotten and its cells freed: a dropped path that has a route.
    let mut bad = par.clone();
    for &c in &bad.routes[long].as_ref().unwrap().cells.clone()[1..] {
        if bad.grid[c as usize] != ENDPOINT {
            bad.grid[c as usize] = 0;
        }
    }
    bad.routes[long] = None;
    assert!(check(&bad));
    // A disconnected path.
    let mut bad = par.clone();
    let cells = &mut bad.routes[long].as_mut().unwrap().cells;
    cells.remove(1);
    assert!(check(&bad));
    // Two paths claiming one cell: give another routed path's commit the same cells.
    if let Some(&other) = routed.iter().find(|i| **i != long) {
        let mut bad = par.clone();
        let stolen = bad.routes[long].as_ref().unwrap().cells[1];
        bad.grid[stolen as usize] = other as u64 + 1;
        assert!(check(&bad));
    }
    // A cell claimed in the grid by no path.
    let mut bad = par.clone();
    let free = bad.grid.iter().position(|v| *v == 0).unwrap();
    bad.grid[free] = long as u64 + 1;
    assert!(check(&bad));
    // A detour: the route is valid but not the shortest at its commit.
    let mut bad = par;
    let r = bad.routes[long].as_mut().unwrap();
    let (a, b) = (r.cells[0], r.cells[1]);
    r.cells.insert(1, b);
    r.cells.insert(1, a);
    assert!(check(&bad));
}

#[test]
fn bad_parameters_are_typed_errors() {
    let out_of_range = |r: Result<(), BenchError>| matches!(r, Err(BenchError::OutOfRange { .. }));
    assert!(out_of_range(Kmeans::validate(&KmeansParams { dims: 0, ..tiny_kmeans() })));
    assert!(out_of_range(Kmeans::validate(&KmeansParams {
        min_clusters: 5,
        max_clusters: 4,
        ..tiny_kmeans()
    })));
    assert!(out_of_range(Kmeans::validate(&KmeansParams { threshold: 1.5, ..tiny_kmeans() })));
    assert!(out_of_range(Ssca2::validate(&Ssca2Params { scale: 40, ..tiny_ssca2() })));
    assert!(out_of_range(Ssca2::validate(&Ssca2Params {
        prob_unidirectional: -0.1,
        ..tiny_ssca2()
    })));
    assert!(out_of_range(Labyrinth::validate(&LabyrinthParams { paths: 101, ..tiny_labyrinth() })));
    assert!(out_of_range(Labyrinth::validate(&LabyrinthParams { width: 0, ..tiny_labyrinth() })));
    assert!(Labyrinth::generate(&LabyrinthParams { paths: 0, ..tiny_labyrinth() }, 1).is_err());
    // Every preset is in range, STAMP's standard (large) inputs included.
    for size in [Size::Small, Size::Medium, Size::Large] {
        Kmeans::validate(&Kmeans::params(size)).unwrap();
        Ssca2::validate(&Ssca2::params(size)).unwrap();
        Labyrinth::validate(&Labyrinth::params(size)).unwrap();
    }
    let large = Labyrinth::params(Size::Large);
    assert_eq!((large.width, large.height, large.depth, large.paths), (512, 512, 7, 512));
    // Overrides: known names parse and are range-checked, unknown names and bad values refuse.
    let p = kernel_params::<Ssca2>(Size::Small, &[("s".into(), "9".into())]).unwrap();
    assert_eq!(p.scale, 9);
    for (name, value) in [("s", "x"), ("q", "1")] {
        let r = kernel_params::<Ssca2>(Size::Small, &[(name.into(), value.into())]);
        assert!(matches!(r, Err(BenchError::BadParameter { .. })), "{name}={value}");
    }
    let r = kernel_params::<Labyrinth>(Size::Small, &[("n".into(), "100000".into())]);
    assert!(matches!(r, Err(BenchError::OutOfRange { name: "paths", .. })));
    let p = kernel_params::<Intruder>(Size::Large, &[("flows".into(), "1024".into())]).unwrap();
    assert_eq!((p.flows, p.max_length), (1024, 128));
    let r = kernel_params::<Intruder>(Size::Small, &[("a".into(), "101".into())]);
    assert!(matches!(r, Err(BenchError::OutOfRange { name: "attack_percent", .. })));
    // Threads and repetitions.
    assert!(matches!(
        Kmeans::parallel(&db(), &Kmeans::generate(&tiny_kmeans(), 1).unwrap(), 0),
        Err(BenchError::ZeroThreads)
    ));
    let bad = RunConfig { repetitions: 0, ..config() };
    assert!(run_kernel::<Kmeans, _>(&tiny_kmeans(), &bad, &clocks(), &mut |_| {}).is_err());
    // Kernels without `--param` overrides refuse them by name.
    for app in [App::Vacation, App::Intruder, App::Genome] {
        let r = run_app(
            app,
            Size::Small,
            &[("x".into(), "1".into())],
            &config(),
            &clocks(),
            &mut |_| {},
        );
        assert!(matches!(r, Err(BenchError::BadParameter { .. })), "{app:?}: {r:?}");
    }
    assert!("nope".parse::<App>().is_err());
    assert_eq!("labyrinth".parse::<App>().unwrap(), App::Labyrinth);
}

/// Claims re-read their cells: under contention some claim finds a cell taken since its copy and
/// starts over (a `requested` abort). Without the re-check the claim would overwrite the other
/// path's cell, and the replay in `verify` rejects the output — so this test fails either way
/// when the re-check is removed.
#[test]
fn labyrinth_claims_recheck_cells_under_contention() {
    let params = LabyrinthParams { width: 16, height: 16, depth: 2, paths: 60 };
    let mut requested = 0;
    for seed in 0..50 {
        let input = Labyrinth::generate(&params, seed).unwrap();
        let seq = Labyrinth::sequential(&input);
        let db = db();
        let par = Labyrinth::parallel(&db, &input, 4).unwrap();
        Labyrinth::verify(&input, &seq, &par).unwrap();
        requested += db.stats().aborts_of(ordo::AbortKind::Requested);
    }
    eprintln!("requested aborts: {requested}");
    assert!(requested > 0, "no claim ever found a cell taken since its copy");
}

/// The accumulators are read-modified-written in one transaction: with two clusters and four
/// threads, concurrent updates of one accumulator conflict and retry (aborts are counted), and
/// the sums still equal the sequential ones. Split into a read and a write transaction, the
/// updates stop conflicting (no aborts) and lose increments (the output differs) — this test
/// fails either way.
#[test]
fn kmeans_accumulators_conflict_and_stay_exact() {
    let params = KmeansParams { min_clusters: 2, max_clusters: 2, points: 2000, ..tiny_kmeans() };
    let mut aborts = 0;
    for seed in 0..16 {
        let input = Kmeans::generate(&params, seed).unwrap();
        let seq = Kmeans::sequential(&input);
        let db = db();
        let par = Kmeans::parallel(&db, &input, 4).unwrap();
        Kmeans::verify(&input, &seq, &par).unwrap();
        aborts += db.stats().aborts_total();
    }
    eprintln!("aborts: {aborts}");
    assert!(aborts > 0, "concurrent accumulator updates never conflicted");
}

/// A hub every vertex points to (one way): all threads append to one in-list at once, through
/// its inline slots and a chain of overflow chunks. Appends conflict and retry (aborts are
/// counted) and no entry is lost. Split into a read and a write transaction, appends stop
/// conflicting and lose entries — this test fails either way.
#[test]
fn ssca2_hub_appends_conflict_and_lose_nothing() {
    let params = Ssca2Params { scale: 11, ..tiny_ssca2() };
    let n = params.vertices() as u32;
    let mut aborts = 0;
    for hub in 0..32 {
        let start: Vec<u32> = (0..n).filter(|v| *v != hub).collect();
        let end = vec![hub; start.len()];
        let input = ordo_bench::stamp::ssca2::Ssca2Input { params: params.clone(), start, end };
        let seq = Ssca2::sequential(&input);
        assert_eq!(seq.implied.of(hub as usize).len(), n as usize - 1);
        let db = db();
        let par = Ssca2::parallel(&db, &input, 4).unwrap();
        Ssca2::verify(&input, &seq, &par).unwrap();
        aborts += db.stats().aborts_total();
    }
    eprintln!("aborts: {aborts}");
    assert!(aborts > 0, "concurrent appends to the hub never conflicted");
}
