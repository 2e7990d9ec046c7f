//! # ssca2 — SSCA2 kernel 1, graph construction (STAMP `ssca2`)
//!
//! The generator follows SSCA2's scalable data generator as STAMP runs it: `2^scale` vertices,
//! randomly permuted and cut into cliques of 1 to `2^(scale/3)` vertices; every pair in a
//! clique gets an edge in one direction (both with probability `1 - u`), plus random parallel
//! edges up to `-p` per pair; every vertex links to vertices at distances 1, 2, 4, … in other
//! cliques with probabilities `i`, `i/2`, `i/4`, … (1 to `-p` parallel copies each). The edge
//! tuples are sorted by (start, end). Edge weights and the `-l` path length only matter to
//! kernels 2–4, which STAMP does not run; `-l` is kept for the command line, weights are not
//! generated.
//!
//! ## Kernel 1
//! 1. *Out-lists* (no transactions, as in STAMP): each thread owns a contiguous range of
//!    vertices and builds their out-lists (the distinct end vertices of their edges); the
//!    threads add their list sizes to a shared total in one transaction each.
//! 2. *Implied edges* (the transactional part): for every edge `i → v` whose reverse `v → i`
//!    does not exist, the thread owning `i` appends `i` to `v`'s in-list in one transaction
//!    (found in batches of `BATCH_EDGES`, then appended in order: `append_batch`).
//!    Each vertex has a head object `[count, last_chunk, slot_0 .. slot_3]` ([`HEAD_SLOTS`]);
//!    once its slots are full the transaction allocates overflow chunks
//!    `[previous_chunk, slot_0 .. slot_4]` ([`CHUNK_SLOTS`]; STAMP's `auxArr`). Every object
//!    with its 16-byte header fills one 64-byte slot, which the heap aligns to a cache line, so
//!    an append reads and writes one or two lines, as STAMP's appends write a count and one
//!    slot of `impliedEdgeList`. (Until session 15 the head held STAMP's
//!    `MAX_CLUSTER_SIZE` = `2^(scale/3)` slots inline: 528 bytes copied in and out per append
//!    at the standard scale 20, and 528 MB of heads to set up.) Transactions conflict when two
//!    threads append to the same vertex.
//! 3. The in-lists are read back (read-only transactions per vertex range) and sorted.
//!
//! ## What is compared
//! The order of an in-list depends on the interleaving, so the output holds every vertex's
//! out-list and *sorted* in-list; [`Ssca2::verify`] demands they equal the sequential ones,
//! vertex by vertex, and that the shared out-list total equals the sum of the out-lists.

use ordo::{Addr, Error, Ordo};
use ordo_clock::Clock;
use rand::{Rng, SeedableRng, rngs::SmallRng};

use super::{
    Kernel, Size, alloc_objects, bytes_to_words, check_range, check_threads, on_threads,
    parse_value, partition, unknown_param, words_to_bytes,
};
use crate::error::BenchError;

/// In-list slots in a vertex's head object (after the count and the newest chunk's address).
pub const HEAD_SLOTS: usize = 4;
/// In-list slots in an overflow chunk (after the previous chunk's address).
pub const CHUNK_SLOTS: usize = 5;
/// Implied edges a thread finds before it runs their appends (phase 2, `append_batch`).
const BATCH_EDGES: usize = 256;
/// How many appends of a batch ahead the head object is prefetched.
const PREFETCH_AHEAD: usize = 8;

/// Generator parameters (STAMP's `ssca2` flags).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Ssca2Params {
    /// `-s`: `2^scale` vertices.
    pub scale: u32,
    /// `-i`: probability of the first inter-clique edge of a vertex.
    pub prob_interclique: f64,
    /// `-u`: probability that an intra-clique pair is linked in one direction only.
    pub prob_unidirectional: f64,
    /// `-l`: kernel 3's path length (kept for the command line; kernel 1 ignores it).
    pub path_length_max: usize,
    /// `-p`: most parallel edges between two vertices.
    pub parallel_edges_max: usize,
}

impl Ssca2Params {
    /// `2^scale`.
    pub fn vertices(&self) -> usize {
        1 << self.scale
    }

    /// `2^(scale/3)`: the largest clique, and the inline slots of an in-list.
    pub fn clique_max(&self) -> usize {
        1 << (self.scale / 3)
    }
}

/// The generated graph: edge tuples sorted by (start, end).
#[derive(Clone, Debug)]
pub struct Ssca2Input {
    /// The parameters it was made with.
    pub params: Ssca2Params,
    /// Start vertex of every edge.
    pub start: Vec<u32>,
    /// End vertex of every edge.
    pub end: Vec<u32>,
}

/// Adjacency in compressed rows: vertex `v`'s list is `list[index[v]..index[v + 1]]`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Adjacency {
    /// `vertices + 1` offsets.
    pub index: Vec<usize>,
    /// The lists, one after another.
    pub list: Vec<u32>,
}

impl Adjacency {
    fn from_lists(lists: impl IntoIterator<Item = Vec<u32>>) -> Adjacency {
        let mut a = Adjacency { index: vec![0], list: Vec::new() };
        for l in lists {
            a.list.extend(l);
            a.index.push(a.list.len());
        }
        a
    }

    /// The list of vertex `v`.
    pub fn of(&self, v: usize) -> &[u32] {
        match (self.index.get(v), self.index.get(v + 1)) {
            (Some(&a), Some(&b)) if a <= b && b <= self.list.len() => &self.list[a..b],
            _ => &[],
        }
    }

    /// Vertices.
    pub fn vertices(&self) -> usize {
        self.index.len().saturating_sub(1)
    }
}

/// Kernel 1's graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ssca2Output {
    /// Distinct out-neighbours of every vertex, ascending.
    pub out: Adjacency,
    /// Implied in-neighbours of every vertex (`i` with `i → v` and no `v → i`), ascending.
    pub implied: Adjacency,
    /// The out-list total as the threads summed it.
    pub out_total: u64,
}

/// The kernel.
#[derive(Debug)]
pub struct Ssca2;

const PARAM_NAMES: &str = "s|scale, i|prob-interclique, u|prob-unidirectional, l|path-length, \
                           p|parallel-edges";

impl Kernel for Ssca2 {
    const NAME: &'static str = "ssca2";
    type Params = Ssca2Params;
    type Input = Ssca2Input;
    type Output = Ssca2Output;

    /// Small: `-s13 -i1.0 -u1.0 -l3 -p3`; medium: `-s14 -i1.0 -u1.0 -l9 -p9`; large: the
    /// standard `-s20 -i1.0 -u1.0 -l3 -p3` (STAMP's README).
    fn params(size: Size) -> Ssca2Params {
        let (scale, lp) = match size {
            Size::Small => (13, 3),
            Size::Medium => (14, 9),
            Size::Large => (20, 3),
        };
        Ssca2Params {
            scale,
            prob_interclique: 1.0,
            prob_unidirectional: 1.0,
            path_length_max: lp,
            parallel_edges_max: lp,
        }
    }

    fn validate(p: &Ssca2Params) -> Result<(), BenchError> {
        check_range("scale", p.scale, 2..=22, "2..=22")?;
        for (name, v) in [
            ("prob-interclique", p.prob_interclique),
            ("prob-unidirectional", p.prob_unidirectional),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(BenchError::OutOfRange {
                    name,
                    value: v.to_string(),
                    expected: "0..=1",
                });
            }
        }
        check_range("path-length", p.path_length_max, 1..=64, "1..=64")?;
        check_range("parallel-edges", p.parallel_edges_max, 1..=64, "1..=64")
    }

    fn generate(p: &Ssca2Params, seed: u64) -> Result<Ssca2Input, BenchError> {
        Self::validate(p)?;
        Ok(generate_graph(p, seed))
    }

    fn sequential(input: &Ssca2Input) -> Ssca2Output {
        let n = input.params.vertices();
        let lists: Vec<Vec<u32>> = (0..n).map(|v| out_list(input, v)).collect();
        let out = Adjacency::from_lists(lists);
        let mut implied: Vec<Vec<u32>> = vec![Vec::new(); n];
        for i in 0..n {
            for &v in out.of(i) {
                if !has_edge(&out, v as usize, i as u32) {
                    implied[v as usize].push(i as u32);
                }
            }
        }
        for l in &mut implied {
            l.sort_unstable();
        }
        let out_total = out.list.len() as u64;
        Ssca2Output { out, implied: Adjacency::from_lists(implied), out_total }
    }

    fn parallel<C: Clock + Send + Sync + 'static>(
        db: &Ordo<C>,
        input: &Ssca2Input,
        threads: usize,
    ) -> Result<Ssca2Output, BenchError> {
        check_threads(threads)?;
        let n = input.params.vertices();
        let empty = words_to_bytes(&[0u64; 2 + HEAD_SLOTS]);
        let total = db.run(|tx| tx.alloc(&0u64))?;
        // Phase 1: out-lists per vertex range, sizes summed in a shared counter; each thread
        // also allocates its vertices' (empty) in-list heads, so that no serial step allocates
        // all of them.
        let parts = on_threads(threads, |t| {
            let range = partition(n, t, threads);
            let heads = alloc_objects(db, std::iter::repeat_n(&empty[..], range.len()))?;
            let lists: Vec<Vec<u32>> = range.map(|v| out_list(input, v)).collect();
            let size: u64 = lists.iter().map(|l| l.len() as u64).sum();
            db.run(|tx| {
                let s: u64 = tx.read(total)?;
                tx.write(total, &(s + size))
            })?;
            Ok((heads, lists))
        })?;
        let (heads, lists): (Vec<Vec<Addr>>, Vec<Vec<Vec<u32>>>) = parts.into_iter().unzip();
        let heads: Vec<Addr> = heads.into_iter().flatten().collect();
        let out = Adjacency::from_lists(lists.into_iter().flatten());
        // Phase 2: implied edges, one transaction per append, found and appended in batches
        // (`append_batch` says why).
        on_threads(threads, |t| {
            let mut batch: Vec<(Addr, u32)> = Vec::with_capacity(BATCH_EDGES);
            for i in partition(n, t, threads) {
                for &v in out.of(i) {
                    if !has_edge(&out, v as usize, i as u32) {
                        batch.push((heads[v as usize], i as u32));
                        if batch.len() == BATCH_EDGES {
                            append_batch(db, &mut batch)?;
                        }
                    }
                }
            }
            append_batch(db, &mut batch)
        })?;
        // Phase 3: read the in-lists back and sort them.
        let parts = on_threads(threads, |t| {
            partition(n, t, threads)
                .map(|v| {
                    let mut l = read_list(db, heads[v])?;
                    l.sort_unstable();
                    Ok(l)
                })
                .collect::<Result<Vec<_>, BenchError>>()
        })?;
        let implied = Adjacency::from_lists(parts.into_iter().flatten());
        let out_total = db.run(|tx| tx.read::<u64>(total))?;
        Ok(Ssca2Output { out, implied, out_total })
    }

    fn verify(
        input: &Ssca2Input,
        sequential: &Ssca2Output,
        parallel: &Ssca2Output,
    ) -> Result<(), BenchError> {
        let bad = |what: String| Err(BenchError::Inconsistent(format!("ssca2: {what}")));
        let n = input.params.vertices();
        for (name, s, p) in [
            ("out-list", &sequential.out, &parallel.out),
            ("implied in-list", &sequential.implied, &parallel.implied),
        ] {
            if p.vertices() != n || p.index.last() != Some(&p.list.len()) {
                return bad(format!(
                    "the {name}s cover {} vertices and {} entries, expected {n} vertices",
                    p.vertices(),
                    p.list.len()
                ));
            }
            if let Some(v) = (0..n).find(|v| s.of(*v) != p.of(*v)) {
                let (got, want) = (p.of(v), s.of(v));
                let at = got
                    .iter()
                    .zip(want)
                    .position(|(a, b)| a != b)
                    .unwrap_or(got.len().min(want.len()));
                return bad(format!(
                    "vertex {v}'s {name} has {} entries, the sequential version's {}; they \
                     first differ at position {at}: {:?} vs {:?}",
                    got.len(),
                    want.len(),
                    got.get(at),
                    want.get(at)
                ));
            }
        }
        if parallel.out_total != parallel.out.list.len() as u64 {
            return bad(format!(
                "the shared out-list total is {}, the out-lists hold {}",
                parallel.out_total,
                parallel.out.list.len()
            ));
        }
        Ok(())
    }

    fn set_param(p: &mut Ssca2Params, name: &str, value: &str) -> Result<(), BenchError> {
        let app = Self::NAME;
        match name {
            "s" | "scale" => p.scale = parse_value(app, name, value)?,
            "i" | "prob-interclique" => p.prob_interclique = parse_value(app, name, value)?,
            "u" | "prob-unidirectional" => p.prob_unidirectional = parse_value(app, name, value)?,
            "l" | "path-length" => p.path_length_max = parse_value(app, name, value)?,
            "p" | "parallel-edges" => p.parallel_edges_max = parse_value(app, name, value)?,
            _ => return Err(unknown_param(app, name, PARAM_NAMES)),
        }
        Ok(())
    }
}

/// A draw in `[0, 1)` in steps of 1/1000, as SSCA2's generator draws probabilities.
fn draw(rng: &mut SmallRng) -> f64 {
    f64::from(rng.random_range(0..1000u32)) / 1000.0
}

/// SSCA2's scalable data generator (cliques, intra- and inter-clique edges), sorted.
fn generate_graph(p: &Ssca2Params, seed: u64) -> Ssca2Input {
    let mut rng = SmallRng::seed_from_u64(seed);
    let n = p.vertices();
    let clique_max = p.clique_max();
    let pmax = p.parallel_edges_max;
    // The permutation that hides the clique structure.
    let mut perm: Vec<u32> = (0..n as u32).collect();
    for i in 0..n {
        let j = rng.random_range(i..n);
        perm.swap(i, j);
    }
    // Clique sizes; the last is cut to fit. `clique_of[v]` is v's clique (before permuting).
    let mut firsts = Vec::new();
    let mut clique_of = vec![0u32; n];
    let mut v = 0;
    while v < n {
        let size = rng.random_range(1..=clique_max).min(n - v);
        for c in &mut clique_of[v..v + size] {
            *c = firsts.len() as u32;
        }
        firsts.push((v, size));
        v += size;
    }
    let mut edges: Vec<(u32, u32)> = Vec::new();
    let mut counter = vec![0usize; clique_max * clique_max];
    for &(first, size) in &firsts {
        counter.iter_mut().for_each(|c| *c = 0);
        for i in 0..size {
            for j in 0..i {
                let r = draw(&mut rng);
                let (a, b) = ((first + i) as u32, (first + j) as u32);
                if r >= p.prob_unidirectional {
                    edges.push((a, b));
                    edges.push((b, a));
                    counter[i * clique_max + j] = 1;
                    counter[j * clique_max + i] = 1;
                } else if r >= 0.5 {
                    edges.push((a, b));
                    counter[i * clique_max + j] = 1;
                } else {
                    edges.push((b, a));
                    counter[j * clique_max + i] = 1;
                }
            }
        }
        if size > 1 {
            let extra = rng.random_range(0..2 * size * pmax);
            for _ in 0..extra {
                let i = rng.random_range(0..size);
                let j = rng.random_range(0..size);
                if i != j
                    && counter[i * clique_max + j] < pmax
                    && draw(&mut rng) >= p.prob_unidirectional
                {
                    edges.push(((first + i) as u32, (first + j) as u32));
                    counter[i * clique_max + j] += 1;
                }
            }
        }
    }
    for i in 0..n {
        let mut prob = p.prob_interclique;
        let mut d = 1;
        while d < n {
            for other in [Some((i + d) % n), i.checked_sub(d)] {
                let take = draw(&mut rng) <= prob;
                if let (true, Some(o)) = (take, other)
                    && clique_of[o] != clique_of[i]
                {
                    for _ in 0..rng.random_range(1..=pmax) {
                        edges.push((i as u32, o as u32));
                    }
                }
            }
            d *= 2;
            prob /= 2.0;
        }
    }
    let mut edges: Vec<(u32, u32)> =
        edges.into_iter().map(|(a, b)| (perm[a as usize], perm[b as usize])).collect();
    edges.sort_unstable();
    let (start, end) = edges.into_iter().unzip();
    Ssca2Input { params: p.clone(), start, end }
}

/// The distinct end vertices of `v`'s edges, ascending (the edges are sorted).
fn out_list(input: &Ssca2Input, v: usize) -> Vec<u32> {
    let v = v as u32;
    let lo = input.start.partition_point(|s| *s < v);
    let hi = input.start.partition_point(|s| *s <= v);
    let mut list = input.end[lo..hi].to_vec();
    list.dedup();
    list
}

/// Whether `from → to` is an edge.
fn has_edge(out: &Adjacency, from: usize, to: u32) -> bool {
    out.of(from).binary_search(&to).is_ok()
}

/// Appends `i` to the in-list at `head` (inline slots, then overflow chunks) in one transaction.
fn append<C: Clock>(db: &Ordo<C>, head: Addr, i: u32) -> Result<(), BenchError> {
    db.run(|tx| {
        // The head is updated in place; what else the append needs is decided from it.
        let (count, last) = tx.update_words(head, |words| {
            let count = words[0] as usize;
            if count < HEAD_SLOTS {
                words[2 + count] = u64::from(i);
            }
            words[0] += 1;
            (count, words[1])
        })?;
        let Some(over) = count.checked_sub(HEAD_SLOTS) else {
            return Ok(());
        };
        if over % CHUNK_SLOTS == 0 {
            let mut chunk = [0u64; 1 + CHUNK_SLOTS];
            chunk[0] = last;
            chunk[1] = u64::from(i);
            let new = tx.alloc_bytes(&words_to_bytes(&chunk))?.to_raw();
            tx.update_words(head, |words| words[1] = new)
        } else {
            tx.update_words(Addr::from_raw(last), |chunk| {
                chunk[1 + over % CHUNK_SLOTS] = u64::from(i);
            })
        }
    })?;
    Ok(())
}

/// Runs the appends of `batch` in order, one transaction each, and empties it. Each append
/// first asks for the head object [`PREFETCH_AHEAD`] appends ahead ([`Ordo::prefetch`]), so
/// that its cache miss overlaps with the transactions in between.
///
/// Why batches: an append is a transaction of a few hundred instructions, too many for the
/// processor's out-of-order window to reach the next edge's loads while one append waits for
/// memory. Interleaved one by one (until session 19) every `has_edge` lookup and every head
/// took its cache misses in turn: at the standard scale 20 (one run with phase timers, not
/// kept) an append cost ~820 ns against the sequential version's ~165 ns per implied edge,
/// whose short loop overlaps them by itself. Batched, the lookups overlap with each other and
/// the heads arrive before their transactions. (The sequential version was measured with the same batching and was no
/// faster, so it keeps its one loop.)
fn append_batch<C: Clock>(db: &Ordo<C>, batch: &mut Vec<(Addr, u32)>) -> Result<(), BenchError> {
    batch.iter().take(PREFETCH_AHEAD).for_each(|&(head, _)| db.prefetch(head));
    for k in 0..batch.len() {
        if let Some(&(ahead, _)) = batch.get(k + PREFETCH_AHEAD) {
            db.prefetch(ahead);
        }
        let (head, i) = batch[k];
        append(db, head, i)?;
    }
    batch.clear();
    Ok(())
}

/// Reads the in-list at `head` back (in one read-only transaction).
fn read_list<C: Clock>(db: &Ordo<C>, head: Addr) -> Result<Vec<u32>, BenchError> {
    let list = db.run(|tx| {
        let words = tx.read_with(head, bytes_to_words)?;
        let count = words[0] as usize;
        let mut list: Vec<u32> =
            words[2..2 + count.min(HEAD_SLOTS)].iter().map(|w| *w as u32).collect();
        // Chunks are linked newest first; the newest may be partly filled.
        let mut chunks = Vec::new();
        let mut next = Addr::from_raw(words[1]);
        while !next.is_null() {
            let chunk = tx.read_with(next, bytes_to_words)?;
            next = Addr::from_raw(chunk[0]);
            chunks.push(chunk);
        }
        let mut left = count.saturating_sub(HEAD_SLOTS);
        for chunk in chunks.iter().rev() {
            let take = left.min(CHUNK_SLOTS);
            list.extend(chunk[1..1 + take].iter().map(|w| *w as u32));
            left -= take;
        }
        Ok::<_, Error>(list)
    })?;
    Ok(list)
}
