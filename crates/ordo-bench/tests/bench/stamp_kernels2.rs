//! STAMP vacation, intruder and genome at tiny sizes: the parallel versions on 1, 2 and 4
//! threads with the logical, system and (where it can be opened) ORDO clocks pass `verify`;
//! corrupted outputs are rejected; bad parameters give typed errors.
#![allow(clippy::unwrap_used)]

use ordo::{Config, Ordo};
use ordo_bench::error::BenchError;
use ordo_bench::stamp::genome::{Genome, GenomeParams};
use ordo_bench::stamp::intruder::{Intruder, IntruderParams};
use ordo_bench::stamp::vacation::{
    ReservationInfo, Resource, ResourceKind, Vacation, VacationParams,
};
use ordo_bench::stamp::{Kernel, Size};
use ordo_clock::{CalibrateOptions, Clock, LogicalClock, OrdoClock, OrdoDetection, SystemClock};

const SEED: u64 = 7;

fn tiny_vacation() -> VacationParams {
    VacationParams {
        queries_per_task: 4,
        query_percent: 90,
        user_percent: 80,
        relations: 64,
        tasks: 600,
    }
}

fn tiny_intruder() -> IntruderParams {
    IntruderParams { attack_percent: 10, max_length: 8, flows: 300 }
}

fn tiny_genome() -> GenomeParams {
    // Few random segments: the fillers and every matching round are exercised.
    GenomeParams { gene_length: 96, segment_length: 10, segments: 40 }
}

/// Generates, runs sequentially, then in parallel on 1, 2 and 4 threads with fresh databases
/// on `clock`; every parallel output must verify.
fn run_all<K: Kernel, C: Clock + Send + Sync + 'static>(
    params: &K::Params,
    clock: impl Fn() -> C,
) -> (K::Input, K::Output, K::Output) {
    let input = K::generate(params, SEED).unwrap();
    let seq = K::sequential(&input);
    let mut last = None;
    for threads in [1, 2, 4] {
        let db = Ordo::with_clock(Config::default(), clock()).unwrap();
        let par = K::parallel(&db, &input, threads).unwrap();
        K::verify(&input, &seq, &par)
            .unwrap_or_else(|e| panic!("{} on {threads} threads: {e}", K::NAME));
        last = Some(par);
    }
    (input, seq, last.unwrap())
}

fn ordo_clock() -> Option<OrdoClock> {
    let options = CalibrateOptions { runs: 20, ..CalibrateOptions::default() };
    match OrdoClock::detect(&options, None).unwrap() {
        OrdoDetection::Ordo { clock, .. } => Some(clock),
        OrdoDetection::UseSystemClock { reason } => {
            eprintln!("ORDO clock skipped: {reason}");
            None
        }
    }
}

fn every_clock<K: Kernel>(params: &K::Params) {
    run_all::<K, _>(params, LogicalClock::new);
    run_all::<K, _>(params, SystemClock::new);
    if let Some(clock) = ordo_clock() {
        run_all::<K, _>(params, || clock);
    }
}

fn is_inconsistent(r: Result<(), BenchError>) -> bool {
    matches!(r, Err(BenchError::Inconsistent(_)))
}

fn assert_out_of_range<T>(r: Result<T, BenchError>, param: &str) {
    match r {
        Err(BenchError::OutOfRange { name, .. }) => assert_eq!(name, param),
        Err(e) => panic!("{param}: wrong error {e}"),
        Ok(_) => panic!("{param}: accepted"),
    }
}

// ---- vacation ----

#[test]
fn vacation_parallel_keeps_the_invariants_on_every_clock() {
    every_clock::<Vacation>(&tiny_vacation());
}

#[test]
fn vacation_tasks_change_the_tables() {
    let (input, seq, _) = run_all::<Vacation, _>(&tiny_vacation(), LogicalClock::new);
    let reserved: u64 = seq.resources.iter().flat_map(|t| t.values()).map(|r| r.used).sum();
    assert!(reserved > 0, "some reservations must stand");
    assert!(seq.customers.len() < input.params.relations as usize, "some customers deleted");
    let loaded = 3 * input.params.relations as usize;
    let rows: usize = seq.resources.iter().map(|t| t.len()).sum();
    assert!(rows != loaded || seq.resources.iter().flat_map(|t| t.values()).any(|r| r.total > 500));
}

#[test]
fn vacation_verify_rejects_corrupted_states() {
    let (input, seq, par) = run_all::<Vacation, _>(&tiny_vacation(), LogicalClock::new);
    // A unit counted as used that no customer holds.
    let mut bad = par.clone();
    let r = bad.resources[0].values_mut().next().unwrap();
    r.used += 1;
    r.total += 1;
    assert!(is_inconsistent(Vacation::verify(&input, &seq, &bad)));
    // used + free != total.
    let mut bad = par.clone();
    bad.resources[1].values_mut().next().unwrap().free += 1;
    assert!(is_inconsistent(Vacation::verify(&input, &seq, &bad)));
    // A customer reservation dropped: its resource's count no longer matches.
    let mut bad = par.clone();
    let holder = bad.customers.values_mut().find(|c| !c.is_empty()).unwrap();
    holder.pop();
    assert!(is_inconsistent(Vacation::verify(&input, &seq, &bad)));
    // A reservation of a resource that does not exist.
    let mut bad = par.clone();
    let holder = bad.customers.values_mut().find(|c| !c.is_empty()).unwrap();
    let (kind, id) = (holder[0].kind, holder[0].id);
    let r = bad.resources[kind as usize].remove(&id).unwrap();
    assert!(r.used > 0);
    assert!(is_inconsistent(Vacation::verify(&input, &seq, &bad)));
    // A row no task touches, changed (the relations above the query range are untouched).
    let mut bad = par.clone();
    let top = u64::from(input.params.relations);
    assert!(top > input.params.query_range());
    let room = bad.resources[ResourceKind::Room as usize].get_mut(&top).unwrap();
    room.price = if room.price == 90 { 50 } else { 90 };
    assert!(is_inconsistent(Vacation::verify(&input, &seq, &bad)));
    let mut bad = par.clone();
    bad.customers.remove(&top);
    assert!(is_inconsistent(Vacation::verify(&input, &seq, &bad)));
    // A resource and a reservation of it outside 1..=relations.
    let mut bad = par.clone();
    let outside = top + 1;
    let r = *bad.resources[0].values().next().unwrap();
    bad.resources[0].insert(outside, Resource { used: 1, free: r.total - 1, ..r });
    let holder = bad.customers.values_mut().next().unwrap();
    holder.push(ReservationInfo { kind: ResourceKind::Car, id: outside, price: r.price });
    holder.sort_by_key(|i| (i.kind, i.id));
    assert!(is_inconsistent(Vacation::verify(&input, &seq, &bad)));
    // The sequential state is checked too.
    let mut bad = seq.clone();
    bad.resources[2].values_mut().next().unwrap().price = 55;
    assert!(is_inconsistent(Vacation::verify(&input, &bad, &par)));
}

#[test]
fn vacation_bad_parameters_are_typed_errors() {
    let p = tiny_vacation();
    assert_out_of_range(
        Vacation::generate(&VacationParams { queries_per_task: 0, ..p.clone() }, 1),
        "queries_per_task",
    );
    assert_out_of_range(
        Vacation::generate(&VacationParams { query_percent: 0, ..p.clone() }, 1),
        "query_percent",
    );
    assert_out_of_range(
        Vacation::generate(&VacationParams { query_percent: 101, ..p.clone() }, 1),
        "query_percent",
    );
    assert_out_of_range(
        Vacation::generate(&VacationParams { user_percent: 101, ..p.clone() }, 1),
        "user_percent",
    );
    assert_out_of_range(
        Vacation::generate(&VacationParams { relations: 0, ..p.clone() }, 1),
        "relations",
    );
    assert_out_of_range(Vacation::generate(&VacationParams { tasks: 0, ..p.clone() }, 1), "tasks");
    for size in [Size::Small, Size::Medium, Size::Large] {
        Vacation::validate(&Vacation::params(size)).unwrap();
    }
    let input = Vacation::generate(&p, 1).unwrap();
    let db = Ordo::with_clock(Config::default(), LogicalClock::new()).unwrap();
    assert!(matches!(Vacation::parallel(&db, &input, 0), Err(BenchError::ZeroThreads)));
}

#[test]
fn vacation_generation_is_deterministic() {
    let p = tiny_vacation();
    let (a, b, c) = (
        Vacation::generate(&p, 3).unwrap(),
        Vacation::generate(&p, 3).unwrap(),
        Vacation::generate(&p, 4).unwrap(),
    );
    assert_eq!(a.tasks, b.tasks);
    assert_eq!(a.initial, b.initial);
    assert_ne!(a.tasks, c.tasks);
}

// ---- intruder ----

#[test]
fn intruder_parallel_finds_the_sequential_attacks_on_every_clock() {
    every_clock::<Intruder>(&tiny_intruder());
}

#[test]
fn intruder_finds_the_planted_attacks() {
    let (input, seq, par) = run_all::<Intruder, _>(&tiny_intruder(), LogicalClock::new);
    assert!(!input.attacks.is_empty());
    assert_eq!(seq.attacks, input.attacks);
    assert_eq!(par.attacks, input.attacks);
    assert!(input.packets.len() > input.params.flows as usize, "flows are fragmented");
    assert!(input.packets.iter().any(|p| p.fragment > 0 && p.fragments > 2));
}

#[test]
fn intruder_verify_rejects_corrupted_outputs() {
    let (input, seq, par) = run_all::<Intruder, _>(&tiny_intruder(), LogicalClock::new);
    let mut bad = par.clone();
    bad.attacks.pop();
    assert!(is_inconsistent(Intruder::verify(&input, &seq, &bad)));
    let mut bad = par.clone();
    bad.attacks.push(u64::from(input.params.flows) + 1);
    assert!(is_inconsistent(Intruder::verify(&input, &seq, &bad)));
    let mut bad = par.clone();
    bad.payload_digest ^= 1;
    assert!(is_inconsistent(Intruder::verify(&input, &seq, &bad)));
    let mut bad = par.clone();
    bad.flows_decoded -= 1;
    assert!(is_inconsistent(Intruder::verify(&input, &seq, &bad)));
    let mut bad = par.clone();
    bad.flows_incomplete = 1;
    assert!(is_inconsistent(Intruder::verify(&input, &seq, &bad)));
    // A sequential run that misses a planted attack is rejected even when both runs agree.
    let mut missed = seq.clone();
    missed.attacks.remove(0);
    assert!(is_inconsistent(Intruder::verify(&input, &missed, &missed.clone())));
}

#[test]
fn intruder_bad_parameters_are_typed_errors() {
    let p = tiny_intruder();
    assert_out_of_range(
        Intruder::generate(&IntruderParams { attack_percent: 101, ..p.clone() }, 1),
        "attack_percent",
    );
    assert_out_of_range(
        Intruder::generate(&IntruderParams { max_length: 0, ..p.clone() }, 1),
        "max_length",
    );
    assert_out_of_range(Intruder::generate(&IntruderParams { flows: 0, ..p.clone() }, 1), "flows");
    for size in [Size::Small, Size::Medium, Size::Large] {
        Intruder::validate(&Intruder::params(size)).unwrap();
    }
    let input = Intruder::generate(&p, 1).unwrap();
    let db = Ordo::with_clock(Config::default(), LogicalClock::new()).unwrap();
    assert!(matches!(Intruder::parallel(&db, &input, 0), Err(BenchError::ZeroThreads)));
}

#[test]
fn intruder_generation_is_deterministic() {
    let p = tiny_intruder();
    let (a, b, c) = (
        Intruder::generate(&p, 3).unwrap(),
        Intruder::generate(&p, 3).unwrap(),
        Intruder::generate(&p, 4).unwrap(),
    );
    assert_eq!(a.packets, b.packets);
    assert_eq!(a.attacks, b.attacks);
    assert_ne!(a.packets, c.packets);
}

// ---- genome ----

#[test]
fn genome_parallel_rebuilds_the_gene_on_every_clock() {
    every_clock::<Genome>(&tiny_genome());
}

#[test]
fn genome_rebuilds_the_gene_when_every_position_is_sampled() {
    // Many more segments than positions: mostly duplicates, as in STAMP's presets.
    let p = GenomeParams { gene_length: 128, segment_length: 12, segments: 2_000 };
    let (input, seq, par) = run_all::<Genome, _>(&p, LogicalClock::new);
    assert_eq!(seq.sequence(), Some(input.gene.as_slice()));
    assert_eq!(par.unique_segments, 128 - 12 + 1);
}

#[test]
fn genome_long_segments_fit_the_start_table() {
    // Start-table keys of 1 + 149 + 8 bytes exceed small nodes' key limit.
    let p = GenomeParams { gene_length: 300, segment_length: 150, segments: 20 };
    let (input, _, par) = run_all::<Genome, _>(&p, LogicalClock::new);
    assert_eq!(par.sequence(), Some(input.gene.as_slice()));
}

#[test]
fn genome_fillers_bound_the_gaps() {
    // With STAMP's own filler bound (gaps up to s - 1) seed 5 rebuilds a wrong gene: a short
    // overlap is ambiguous and greedy matching takes the wrong partner.
    for seed in 0..20 {
        let input = Genome::generate(&tiny_genome(), seed).unwrap();
        assert_eq!(
            Genome::sequential(&input).sequence(),
            Some(input.gene.as_slice()),
            "seed {seed}"
        );
        let s = input.params.segment_length as usize;
        let mut starts: Vec<usize> = input
            .segments
            .iter()
            .map(|seg| input.gene.windows(s).position(|w| w == seg.as_slice()).unwrap())
            .collect();
        starts.sort_unstable();
        starts.dedup();
        assert_eq!(starts[0], 0);
        assert_eq!(*starts.last().unwrap(), input.gene.len() - s);
        let k0 = input.unique_kmer_length;
        assert!(starts.windows(2).all(|w| w[1] - w[0] <= s - k0), "seed {seed}");
    }
}

#[test]
fn genome_verify_rejects_corrupted_outputs() {
    let (input, seq, par) = run_all::<Genome, _>(&tiny_genome(), LogicalClock::new);
    let mut bad = par.clone();
    let base = &mut bad.chains[0][10];
    *base = if *base == b'a' { b'c' } else { b'a' };
    assert!(is_inconsistent(Genome::verify(&input, &seq, &bad)));
    let mut bad = par.clone();
    bad.chains[0].pop();
    assert!(is_inconsistent(Genome::verify(&input, &seq, &bad)));
    let mut bad = par.clone();
    bad.chains.push(b"acgt".to_vec());
    assert!(is_inconsistent(Genome::verify(&input, &seq, &bad)));
    let mut bad = par.clone();
    bad.unique_segments += 1;
    assert!(is_inconsistent(Genome::verify(&input, &seq, &bad)));
}

#[test]
fn genome_bad_parameters_are_typed_errors() {
    let p = tiny_genome();
    assert_out_of_range(
        Genome::generate(&GenomeParams { segment_length: 1, ..p.clone() }, 1),
        "segment_length",
    );
    assert_out_of_range(
        Genome::generate(&GenomeParams { segment_length: 257, ..p.clone() }, 1),
        "segment_length",
    );
    // 4^3 = 64 < 16 × 96: overlaps of 3 bases cannot be unique.
    assert_out_of_range(
        Genome::generate(&GenomeParams { segment_length: 4, ..p.clone() }, 1),
        "segment_length",
    );
    assert_out_of_range(
        Genome::generate(&GenomeParams { gene_length: 5, ..p.clone() }, 1),
        "gene_length",
    );
    assert_out_of_range(
        Genome::generate(&GenomeParams { segments: 0, ..p.clone() }, 1),
        "segments",
    );
    for size in [Size::Small, Size::Medium, Size::Large] {
        Genome::validate(&Genome::params(size)).unwrap();
    }
    let input = Genome::generate(&p, 1).unwrap();
    let db = Ordo::with_clock(Config::default(), LogicalClock::new()).unwrap();
    assert!(matches!(Genome::parallel(&db, &input, 0), Err(BenchError::ZeroThreads)));
}

#[test]
fn genome_generation_is_deterministic() {
    let p = tiny_genome();
    let (a, b, c) = (
        Genome::generate(&p, 3).unwrap(),
        Genome::generate(&p, 3).unwrap(),
        Genome::generate(&p, 4).unwrap(),
    );
    assert_eq!((&a.gene, &a.segments), (&b.gene, &b.segments));
    assert_ne!(a.gene, c.gene);
}

// ---- timing (not a test of correctness: run by hand in release) ----

/// Median (min–max) milliseconds of the sequential version and of the parallel version on 1
/// and 2 threads with the logical and the ORDO clock, small presets (or `STAMP_SIZE=medium`),
/// runs interleaved.
/// `cargo test --release -p ordo-bench --test stamp_kernels2 -- --ignored --nocapture`
/// (`STAMP_REPS=n` repetitions, default 5; `STAMP_ONLY=vacation|intruder|genome`).
#[test]
#[ignore = "timing harness, run by hand in release"]
fn time_presets() {
    let reps: usize = std::env::var("STAMP_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let ordo = ordo_clock();
    let only = std::env::var("STAMP_ONLY").ok();
    let wanted = |name: &str| only.as_deref().is_none_or(|o| o == name);
    if wanted(Vacation::NAME) {
        time_kernel::<Vacation>(reps, ordo);
    }
    if wanted(Intruder::NAME) {
        time_kernel::<Intruder>(reps, ordo);
    }
    if wanted(Genome::NAME) {
        time_kernel::<Genome>(reps, ordo);
    }
}

fn time_kernel<K: Kernel>(reps: usize, ordo: Option<OrdoClock>) {
    use ordo_bench::driver::Spread;
    use std::time::Instant;
    let size = match std::env::var("STAMP_SIZE").as_deref() {
        Ok("medium") => Size::Medium,
        Ok("large") => Size::Large,
        _ => Size::Small,
    };
    let input = K::generate(&K::params(size), 1).unwrap();
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let mut seq_ms = Vec::new();
    // (threads, clock) -> times
    let mut par_ms: Vec<((usize, &str), Vec<f64>)> = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let seq = K::sequential(&input);
        seq_ms.push(ms(t));
        for threads in [1, 2] {
            let mut one = |name: &'static str, ms_taken: f64| match par_ms
                .iter_mut()
                .find(|(k, _)| *k == (threads, name))
            {
                Some((_, v)) => v.push(ms_taken),
                None => par_ms.push(((threads, name), vec![ms_taken])),
            };
            let db = Ordo::with_clock(Config::default(), LogicalClock::new()).unwrap();
            let t = Instant::now();
            let par = K::parallel(&db, &input, threads).unwrap();
            one("logical", ms(t));
            K::verify(&input, &seq, &par).unwrap();
            if let Some(clock) = ordo {
                let db = Ordo::with_clock(Config::default(), clock).unwrap();
                let t = Instant::now();
                let par = K::parallel(&db, &input, threads).unwrap();
                one("ordo", ms(t));
                K::verify(&input, &seq, &par).unwrap();
            }
        }
    }
    let show = |v: &[f64]| {
        let s = Spread::of(v);
        format!("{:8.1} ms ({:.1}–{:.1})", s.median, s.min, s.max)
    };
    println!("{} {size:?} {:?}, {reps} reps", K::NAME, K::params(size));
    println!("  sequential          {}", show(&seq_ms));
    for ((threads, clock), v) in &par_ms {
        println!("  parallel {threads}t {clock:<8} {}", show(v));
    }
}
