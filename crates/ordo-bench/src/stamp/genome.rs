//! # STAMP genome: gene sequencing by segment overlap (Minh et al., IISWC'08)
//!
//! A gene of `gene_length` nucleotides (`a c g t`) is sampled as `segments` random substrings of
//! `segment_length`. The sequencer rebuilds the gene in STAMP's three phases:
//! 1. **Deduplicate**: insert every segment into a shared hash set; threads take equal chunks
//!    of the segment list, [`DEDUP_CHUNK`] segments per transaction (STAMP's `CHUNK_STEP1`),
//!    inserting a segment only when the set lacks it.
//! 2. **Match**: each unique segment gets a *construct entry* (`is_start`, `next`, `overlap`,
//!    and — kept exact only at a chain's ends — the chain's `start`, `end` and `length`), and
//!    for every prefix length `L` in `1..s` it is indexed under its `L`-prefix in a shared start
//!    table. Then for `L = s-1` down to `1` (one round each, all threads between barriers), every
//!    entry that still ends its chain looks up its `L`-suffix among the start table's `L`-prefixes
//!    and links to the first candidate that still starts a chain and is not its own chain's start
//!    (which would close a cycle): one transaction per entry and round, which re-checks both
//!    conditions and splices the two chains.
//! 3. **Build**: follow every chain from its start, appending each next segment without its
//!    overlap.
//!
//! In the engine the hash set is an [`ordo::map::HashMap`] keyed by segment bytes; the construct
//! entries are heap objects of seven words; the start table is one [`BTree`] whose keys are
//! `[L] ++ hash(L-prefix) ++ entry address` — a multimap, so a lookup is a range scan over
//! `[L] ++ hash(suffix)` and two entries indexed under one prefix never write the same key.
//! As in STAMP, which keeps one hash table of lists per `L` keyed by the same incremental hash,
//! the link step compares the strings after a hash match. The threads split the inserted
//! segments evenly, create their construct entries, and match those entries in phase 2. The
//! sequential version runs the same phases on `std` collections, its start table keyed by
//! `(L, hash)` too.
//!
//! ## Uniqueness, and what [`Kernel::verify`] checks
//! Greedy matching is order-dependent in general: when two chains could take the same start,
//! the first transaction to commit wins. The generator rules that out. Let `k0` be the smallest
//! `k` for which the gene's `k`-mers are all distinct (the gene is redrawn, at most
//! [`GENE_ATTEMPTS_MAX`] times, until `k0 < s`). Beyond STAMP's random start positions (and its
//! fillers for the first and last positions), the generator adds segments so that consecutive
//! distinct start positions are at most `s - k0` apart — STAMP only guarantees `s - 1`. Then
//! every round `L >= k0` links each segment to exactly its successor in gene order (an
//! `L`-suffix occurs once in the gene, so the only candidate starts where the successor starts,
//! and no successor is claimed twice), and rounds below `k0` find one chain, which they may not
//! close. Hence every serial order, and so every serializable execution, yields one chain equal
//! to the gene. `verify` checks exactly that: the sequential and parallel outputs are equal, hold
//! one chain, and that chain is the generated gene.

use std::collections::{BTreeMap, HashSet};
use std::ops::{Bound, ControlFlow};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex, PoisonError};

use ordo::map::HashMap;
use ordo::tree::{BTree, Direction, TreeOptions};
use ordo::{Addr, Ordo, Tx};
use ordo_clock::Clock;
use rand::{Rng, SeedableRng, rngs::SmallRng};

use super::{Kernel, Size};
use super::{on_threads, out_of_range};
use crate::error::BenchError;

/// Segments per deduplication transaction (STAMP's `CHUNK_STEP1`).
pub const DEDUP_CHUNK: usize = 12;
/// Start-table inserts per transaction in phase 2a (the first also creates the entry). The
/// table is not read before phase 2b, so an entry's `s - 1` inserts need not be atomic; STAMP
/// makes each its own transaction. Keys of short prefixes are few (`4^L`), so concurrent
/// entries collide there: with all 63 inserts of the large input in one transaction 0.31 % of
/// attempts aborted at 2 threads, each losing 63 inserts; with 8, 0.05–0.07 % and 2 threads ran
/// 1.10× faster; 16 was no better than 63, and one per transaction doubled the transaction
/// count and ran slower (session 22, `docs/results/2026-11-29-s22-stamp-ab.txt`).
pub const INDEX_CHUNK: usize = 8;
/// Gene draws before giving up on one whose `(s-1)`-mers are distinct.
pub const GENE_ATTEMPTS_MAX: usize = 64;
/// The longest gene accepted.
pub const GENE_LENGTH_MAX: u32 = 1 << 20;
/// The longest segment accepted (a start-table key holds `L < s` in one byte).
pub const SEGMENT_LENGTH_MAX: u32 = 256;
/// The most random segments accepted.
pub const SEGMENTS_MAX: u32 = 1 << 24;
/// The nucleotides.
pub const NUCLEOTIDES: [u8; 4] = *b"acgt";

/// The generator's parameters (STAMP's `genome` flags).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GenomeParams {
    /// `-g`: gene length, `segment_length..=GENE_LENGTH_MAX`.
    pub gene_length: u32,
    /// `-s`: segment length, `2..=SEGMENT_LENGTH_MAX`, long enough that a random gene's
    /// `(s-1)`-mers are distinct with high probability: `4^(s-1) >= 16 × gene_length`.
    pub segment_length: u32,
    /// `-n`: random segments drawn, `1..=SEGMENTS_MAX` (fillers come on top).
    pub segments: u32,
}

/// A generated input.
#[derive(Clone, Debug)]
pub struct GenomeInput {
    /// The parameters it was generated from.
    pub params: GenomeParams,
    /// The gene.
    pub gene: Vec<u8>,
    /// The segments: `segments` random ones, then the fillers.
    pub segments: Vec<Vec<u8>>,
    /// `k0`: the shortest length whose substrings of the gene are all distinct.
    pub unique_kmer_length: usize,
}

/// The sequencer's result.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct GenomeOutput {
    /// The sequences of the chains left after matching, sorted (one, the gene, for generated
    /// inputs).
    pub chains: Vec<Vec<u8>>,
    /// Distinct segments found by deduplication.
    pub unique_segments: u64,
}

impl GenomeOutput {
    /// The reconstructed sequence when matching left exactly one chain.
    pub fn sequence(&self) -> Option<&[u8]> {
        match self.chains.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }
}

/// The smallest `k` for which all `k`-mers of `gene` are distinct (`gene.len()` at most).
fn unique_kmer_length(gene: &[u8]) -> usize {
    let distinct = |k: usize| {
        let mut seen = HashSet::with_capacity(gene.len());
        gene.windows(k).all(|w| seen.insert(w))
    };
    // Distinctness is monotone in k: binary search the smallest k that has it.
    let (mut lo, mut hi) = (1, gene.len().max(1));
    while lo < hi {
        let mid = (lo + hi) / 2;
        if distinct(mid) { hi = mid } else { lo = mid + 1 }
    }
    lo
}

/// The STAMP genome kernel.
#[derive(Clone, Copy, Debug, Default)]
pub struct Genome;

/// One construct entry (STAMP's `constructEntry_t`), as seven words in the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    /// No entry links to this one yet.
    is_start: bool,
    /// The following entry (null at a chain's end).
    next: u64,
    /// Exact at a chain's end: the chain's first entry.
    start: u64,
    /// Exact at a chain's start: the chain's last entry.
    end: u64,
    /// Exact at a chain's start: the chain's sequence length.
    length: u64,
    /// Characters shared with `next`.
    overlap: u64,
    /// Index of the segment in the input.
    segment: u64,
}

impl Entry {
    fn to_words(self) -> [u64; 7] {
        [
            u64::from(self.is_start),
            self.next,
            self.start,
            self.end,
            self.length,
            self.overlap,
            self.segment,
        ]
    }

    fn from_words(w: [u64; 7]) -> Self {
        Entry {
            is_start: w[0] != 0,
            next: w[1],
            start: w[2],
            end: w[3],
            length: w[4],
            overlap: w[5],
            segment: w[6],
        }
    }
}

/// Where the matching code reads and writes entries: a `Vec` or the engine's heap objects.
trait Entries {
    fn get(&mut self, id: u64) -> Result<Entry, BenchError>;
    fn set(&mut self, id: u64, e: Entry) -> Result<(), BenchError>;
}

/// Tries to link end entry `end` to `candidate` with `overlap` shared characters; returns
/// whether it did. Re-checks that `candidate` still starts a chain and is not the start of
/// `end`'s own chain, then splices: STAMP's `sequencer_run` step 2b transaction.
fn try_link<E: Entries>(
    entries: &mut E,
    segments: &[Vec<u8>],
    end: u64,
    candidate: u64,
    overlap: u64,
) -> Result<bool, BenchError> {
    let c = entries.get(candidate)?;
    let e = entries.get(end)?;
    if !c.is_start || e.start == candidate || e.next != 0 {
        return Ok(false);
    }
    // The start table is keyed by prefix hashes: compare the strings, as STAMP does after a
    // hash match.
    let (Some(c_seg), Some(e_seg)) =
        (segments.get(c.segment as usize), segments.get(e.segment as usize))
    else {
        return Err(BenchError::Inconsistent(format!(
            "entry {candidate} or {end} names a segment not in the input"
        )));
    };
    let n = overlap as usize;
    if n > c_seg.len() || n > e_seg.len() || c_seg[..n] != e_seg[e_seg.len() - n..] {
        return Ok(false);
    }
    let chain_start = e.start;
    let chain_end = c.end;
    let c_length = c.length;
    entries.set(candidate, Entry { is_start: false, ..c })?;
    let ce = entries.get(chain_end)?;
    entries.set(chain_end, Entry { start: chain_start, ..ce })?;
    let e = entries.get(end)?;
    entries.set(end, Entry { next: candidate, overlap, ..e })?;
    let cs = entries.get(chain_start)?;
    let length = cs.length + c_length - overlap;
    entries.set(chain_start, Entry { end: chain_end, length, ..cs })?;
    Ok(true)
}

/// Follows every chain from its start; `starts` are the entries with `is_start`.
fn build_chains<E: Entries>(
    entries: &mut E,
    starts: &[u64],
    segments: &[Vec<u8>],
    total_entries: usize,
) -> Result<Vec<Vec<u8>>, BenchError> {
    let segment = |e: &Entry| {
        segments.get(e.segment as usize).ok_or_else(|| {
            BenchError::Inconsistent(format!(
                "an entry names segment {}, not in the input",
                e.segment
            ))
        })
    };
    let mut chains = Vec::with_capacity(starts.len());
    for &start in starts {
        let mut e = entries.get(start)?;
        let mut seq = segment(&e)?.clone();
        let mut steps = 0;
        while e.next != 0 {
            steps += 1;
            if steps > total_entries {
                return Err(BenchError::Inconsistent("a chain is longer than the entries".into()));
            }
            let overlap = e.overlap as usize;
            e = entries.get(e.next)?;
            let s = segment(&e)?;
            if overlap > s.len() || !seq.ends_with(&s[..overlap]) {
                return Err(BenchError::Inconsistent(format!(
                    "a link claims {overlap} overlapping characters that do not overlap"
                )));
            }
            seq.extend_from_slice(&s[overlap..]);
        }
        chains.push(seq);
    }
    chains.sort();
    Ok(chains)
}

/// The sequential version's entries.
impl Entries for Vec<Entry> {
    fn get(&mut self, id: u64) -> Result<Entry, BenchError> {
        // Ids are 1-based so that 0 is "none", as the engine's null address is.
        self.as_slice()
            .get(id.wrapping_sub(1) as usize)
            .copied()
            .ok_or_else(|| BenchError::Inconsistent(format!("entry {id} does not exist")))
    }

    fn set(&mut self, id: u64, e: Entry) -> Result<(), BenchError> {
        let slot = self
            .as_mut_slice()
            .get_mut(id.wrapping_sub(1) as usize)
            .ok_or_else(|| BenchError::Inconsistent(format!("entry {id} does not exist")))?;
        *slot = e;
        Ok(())
    }
}

/// The parallel version's entries: heap objects, inside one transaction.
struct TxEntries<'a, 'b, C: Clock>(&'a mut Tx<'b, C>);

impl<C: Clock> Entries for TxEntries<'_, '_, C> {
    fn get(&mut self, id: u64) -> Result<Entry, BenchError> {
        Ok(Entry::from_words(self.0.read::<[u64; 7]>(Addr::from_raw(id))?))
    }

    fn set(&mut self, id: u64, e: Entry) -> Result<(), BenchError> {
        Ok(self.0.write(Addr::from_raw(id), &e.to_words())?)
    }
}

/// The hash of a segment's `L`-prefix for every `L` in `1..=segment.len()`, in order: STAMP's
/// incremental sdbm hash (`h = c + (h << 6) + (h << 16) - h`), on 64 bits.
fn prefix_hashes(segment: &[u8]) -> impl Iterator<Item = u64> + '_ {
    segment.iter().scan(0u64, |h, &c| {
        *h = u64::from(c).wrapping_add(*h << 6).wrapping_add(*h << 16).wrapping_sub(*h);
        Some(*h)
    })
}

/// The hash of a whole string, as [`prefix_hashes`] gives it for the full length.
fn string_hash(s: &[u8]) -> u64 {
    prefix_hashes(s).last().unwrap_or(0)
}

/// Bytes of a start-table key: `[L] ++ hash ++ entry`.
const TABLE_KEY_BYTES: usize = 1 + 8 + 8;
/// Bytes of a scan bound: `[L] ++ hash`.
const TABLE_BOUND_BYTES: usize = 1 + 8;

/// A start-table key: `[L] ++ hash of the L-prefix ++ entry address`, big-endian (the first
/// [`TABLE_BOUND_BYTES`] are the scan bound of all entries under one hash). STAMP keys its
/// per-`L` tables by the same hash and compares strings after a match ([`try_link`] does);
/// until session 22 the key held the prefix itself, up to `1 + 63 + 8` bytes.
fn table_key(len: usize, hash: u64, entry: u64) -> [u8; TABLE_KEY_BYTES] {
    let mut k = [0u8; TABLE_KEY_BYTES];
    k[0] = len as u8;
    k[1..9].copy_from_slice(&hash.to_be_bytes());
    k[9..].copy_from_slice(&entry.to_be_bytes());
    k
}

/// The start table's node size (small nodes: a lookup or insert copies less; its 17-byte keys
/// fit any node size).
const START_TABLE_NODE_BYTES: usize = 512;

/// The entries indexed under `[L] ++ hash(suffix)`, in key order: those whose `L`-prefix is
/// `suffix`, and any whose prefix only shares its hash.
fn candidates<C: Clock>(
    tx: &mut Tx<'_, C>,
    table: BTree,
    len: usize,
    suffix: &[u8],
) -> Result<Vec<u64>, BenchError> {
    let key = table_key(len, string_hash(suffix), 0);
    let lo = &key[..TABLE_BOUND_BYTES];
    let mut out = Vec::new();
    table.range(tx, Bound::Included(lo), Bound::Unbounded, Direction::Forward, None, |k, _| {
        if k.len() != TABLE_KEY_BYTES || !k.starts_with(lo) {
            return ControlFlow::Break(());
        }
        let mut id = [0u8; 8];
        id.copy_from_slice(&k[TABLE_BOUND_BYTES..]);
        out.push(u64::from_be_bytes(id));
        ControlFlow::Continue(())
    })?;
    Ok(out)
}

/// Phases separated by barriers. A thread whose step fails records it and keeps arriving at the
/// barriers (so no one waits forever); every thread skips the remaining steps once any failed.
struct Phases {
    barrier: Barrier,
    failed: AtomicBool,
}

impl Phases {
    /// Runs `step` unless something failed, then waits for every thread.
    fn step(
        &self,
        result: &mut Result<(), BenchError>,
        step: impl FnOnce() -> Result<(), BenchError>,
    ) {
        // Relaxed suffices: the barrier orders the flag between phases, and a late look only
        // means one more step runs before the failure is seen.
        if result.is_ok() && !self.failed.load(Ordering::Relaxed) {
            *result = step();
            if result.is_err() {
                self.failed.store(true, Ordering::Relaxed);
            }
        }
        self.barrier.wait();
    }
}

impl Kernel for Genome {
    const NAME: &'static str = "genome";
    type Params = GenomeParams;
    type Input = GenomeInput;
    type Output = GenomeOutput;

    /// STAMP's `-g256 -s16 -n16384` (small), `-g512 -s32 -n32768` (medium) and the standard
    /// `-g16384 -s64 -n16777216` (large).
    fn params(size: Size) -> GenomeParams {
        match size {
            Size::Small => GenomeParams { gene_length: 256, segment_length: 16, segments: 16_384 },
            Size::Medium => GenomeParams { gene_length: 512, segment_length: 32, segments: 32_768 },
            Size::Large => {
                GenomeParams { gene_length: 16_384, segment_length: 64, segments: 16_777_216 }
            }
        }
    }

    fn validate(p: &GenomeParams) -> Result<(), BenchError> {
        if !(2..=SEGMENT_LENGTH_MAX).contains(&p.segment_length) {
            return Err(out_of_range("segment_length", p.segment_length, "2..=256"));
        }
        if !(p.segment_length..=GENE_LENGTH_MAX).contains(&p.gene_length) {
            return Err(out_of_range("gene_length", p.gene_length, "segment_length..=1048576"));
        }
        // 4^(s-1) >= 16 g, i.e. 2(s-1) >= log2(g) + 4.
        let bits = 2 * (u64::from(p.segment_length) - 1);
        if bits < 64 && (1u64 << bits) < 16 * u64::from(p.gene_length) {
            return Err(out_of_range(
                "segment_length",
                p.segment_length,
                "4^(segment_length-1) >= 16 * gene_length, so the gene's overlaps are unique",
            ));
        }
        if !(1..=SEGMENTS_MAX).contains(&p.segments) {
            return Err(out_of_range("segments", p.segments, "1..=16777216"));
        }
        Ok(())
    }

    fn generate(p: &GenomeParams, seed: u64) -> Result<GenomeInput, BenchError> {
        Self::validate(p)?;
        let mut rng = SmallRng::seed_from_u64(seed);
        let (g, s) = (p.gene_length as usize, p.segment_length as usize);
        let mut drawn = None;
        for _ in 0..GENE_ATTEMPTS_MAX {
            let gene: Vec<u8> = (0..g).map(|_| NUCLEOTIDES[rng.random_range(0..4)]).collect();
            let k0 = unique_kmer_length(&gene);
            if k0 < s {
                drawn = Some((gene, k0));
                break;
            }
        }
        let Some((gene, k0)) = drawn else {
            return Err(out_of_range(
                "segment_length",
                p.segment_length,
                "long enough that a random gene's (segment_length-1)-mers are distinct",
            ));
        };
        let starts = g - s + 1;
        let mut used = vec![false; starts];
        let mut segments: Vec<Vec<u8>> = (0..p.segments)
            .map(|_| {
                let at = rng.random_range(0..starts);
                used[at] = true;
                gene[at..at + s].to_vec()
            })
            .collect();
        // Fillers: the first and last positions, and no gap between consecutive starts above
        // s - k0 (see the module docs).
        let gap_max = s - k0;
        let mut last = None;
        for at in 0..starts {
            let need = match last {
                None => at == 0,
                Some(prev) => at == starts - 1 || at - prev == gap_max,
            };
            if used[at] || need {
                if !used[at] {
                    used[at] = true;
                    segments.push(gene[at..at + s].to_vec());
                }
                last = Some(at);
            }
        }
        Ok(GenomeInput { params: p.clone(), gene, segments, unique_kmer_length: k0 })
    }

    fn sequential(input: &GenomeInput) -> GenomeOutput {
        let s = input.params.segment_length as usize;
        // Phase 1: first occurrence of each segment, in input order.
        let mut seen = HashSet::new();
        let unique: Vec<usize> =
            (0..input.segments.len()).filter(|&i| seen.insert(&input.segments[i])).collect();
        // Phase 2a: entries (id = position + 1) and the start table.
        let mut entries: Vec<Entry> = unique
            .iter()
            .enumerate()
            .map(|(i, &seg)| {
                let id = i as u64 + 1;
                Entry {
                    is_start: true,
                    next: 0,
                    start: id,
                    end: id,
                    length: s as u64,
                    overlap: 0,
                    segment: seg as u64,
                }
            })
            .collect();
        // Keyed as the engine's start table: `(L, hash of the L-prefix)`.
        let mut table: BTreeMap<(usize, u64), Vec<u64>> = BTreeMap::new();
        for (i, &seg) in unique.iter().enumerate() {
            for (len, hash) in (1..s).zip(prefix_hashes(&input.segments[seg])) {
                table.entry((len, hash)).or_default().push(i as u64 + 1);
            }
        }
        // Phase 2b: rounds of decreasing overlap.
        let mut is_end = vec![true; entries.len()];
        for len in (1..s).rev() {
            for i in 0..entries.len() {
                if !is_end[i] {
                    continue;
                }
                let seg = &input.segments[entries[i].segment as usize];
                let Some(list) = table.get(&(len, string_hash(&seg[s - len..]))) else { continue };
                for &c in list {
                    // Vec entries never fail to read or write.
                    let linked =
                        try_link(&mut entries, &input.segments, i as u64 + 1, c, len as u64);
                    if let Ok(true) = linked {
                        is_end[i] = false;
                        break;
                    }
                }
            }
        }
        // Phase 3.
        let starts: Vec<u64> =
            (0..entries.len()).filter(|&i| entries[i].is_start).map(|i| i as u64 + 1).collect();
        let total = entries.len();
        let chains =
            build_chains(&mut entries, &starts, &input.segments, total).unwrap_or_default();
        GenomeOutput { chains, unique_segments: unique.len() as u64 }
    }

    fn parallel<C: Clock + Send + Sync + 'static>(
        db: &Ordo<C>,
        input: &GenomeInput,
        threads: usize,
    ) -> Result<GenomeOutput, BenchError> {
        if threads == 0 {
            return Err(BenchError::ZeroThreads);
        }
        let s = input.params.segment_length as usize;
        let segments = &input.segments;
        let (set, table) = db.run(|tx| {
            let table =
                BTree::create_with(tx, TreeOptions::with_node_bytes(START_TABLE_NODE_BYTES))?;
            // Sized for the unique segments, at most one per gene position, as STAMP sizes its
            // hash set by the gene length (sizing it by the 16 M drawn segments of the large
            // input spread 16 k entries over 64 k buckets: a cache miss per lookup).
            let unique_max = input.params.gene_length as usize;
            Ok::<_, ordo::Error>((HashMap::create(tx, unique_max)?, table))
        })?;
        let phases = Phases { barrier: Barrier::new(threads), failed: AtomicBool::new(false) };
        // What each thread's phase 1 inserted, in its order: phase 2a splits the concatenation
        // evenly (STAMP splits the hash set's buckets evenly). Which thread inserts a segment
        // depends on timing; with each thread keeping its own, one thread did up to 1.8× the
        // other's phase-2a work at 2 threads.
        let inserted: Vec<Mutex<Vec<usize>>> = (0..threads).map(|_| Mutex::default()).collect();
        let owned = on_threads(threads, |t| {
            let mut result = Ok(());
            // Phase 1: this thread's chunk of segments, DEDUP_CHUNK per transaction; note the
            // ones this thread's committed transactions inserted.
            let mut mine: Vec<usize> = Vec::new();
            let range = (segments.len() * t / threads)..(segments.len() * (t + 1) / threads);
            phases.step(&mut result, || {
                for first in range.clone().step_by(DEDUP_CHUNK) {
                    let batch = first..(first + DEDUP_CHUNK).min(range.end);
                    let inserted = db.run(|tx| {
                        let mut inserted = Vec::new();
                        for i in batch.clone() {
                            if !set.contains_key(tx, &segments[i])? {
                                set.insert(tx, &segments[i], &[])?;
                                inserted.push(i);
                            }
                        }
                        Ok::<_, ordo::Error>(inserted)
                    })?;
                    mine.extend(inserted);
                }
                *inserted[t].lock().unwrap_or_else(PoisonError::into_inner) = mine;
                Ok(())
            });
            // This thread's share of all inserted segments.
            let mine: Vec<usize> = {
                let all: Vec<usize> = inserted
                    .iter()
                    .flat_map(|m| m.lock().unwrap_or_else(PoisonError::into_inner).clone())
                    .collect();
                all[all.len() * t / threads..all.len() * (t + 1) / threads].to_vec()
            };
            // Phase 2a: an entry per owned segment, indexed under each of its prefixes,
            // INDEX_CHUNK prefixes per transaction.
            let mut entries: Vec<(u64, usize)> = Vec::with_capacity(mine.len());
            phases.step(&mut result, || {
                let mut keys = Vec::with_capacity(s);
                for &seg in &mine {
                    keys.clear();
                    keys.extend((1..s).zip(prefix_hashes(&segments[seg])));
                    let mut chunks = keys.chunks(INDEX_CHUNK);
                    let first = chunks.next().unwrap_or_default();
                    let id = db.run(|tx| {
                        let addr = tx.alloc(&[0u64; 7])?;
                        let id = addr.to_raw();
                        let e = Entry {
                            is_start: true,
                            next: 0,
                            start: id,
                            end: id,
                            length: s as u64,
                            overlap: 0,
                            segment: seg as u64,
                        };
                        tx.write(addr, &e.to_words())?;
                        for &(len, hash) in first {
                            table.insert(tx, &table_key(len, hash, id), &[])?;
                        }
                        Ok::<_, ordo::Error>(id)
                    })?;
                    for keys in chunks {
                        db.run(|tx| {
                            for &(len, hash) in keys {
                                table.insert(tx, &table_key(len, hash, id), &[])?;
                            }
                            Ok::<_, ordo::Error>(())
                        })?;
                    }
                    entries.push((id, seg));
                }
                Ok(())
            });
            // Phase 2b: one round per overlap length, longest first.
            let mut is_end = vec![true; entries.len()];
            for len in (1..s).rev() {
                phases.step(&mut result, || {
                    for (k, &(id, seg)) in entries.iter().enumerate() {
                        if !is_end[k] {
                            continue;
                        }
                        let suffix = &segments[seg][s - len..];
                        let linked = db.run(|tx| {
                            for c in candidates(tx, table, len, suffix)? {
                                if try_link(&mut TxEntries(tx), segments, id, c, len as u64)? {
                                    return Ok(true);
                                }
                            }
                            Ok::<_, BenchError>(false)
                        })?;
                        if linked {
                            is_end[k] = false;
                        }
                    }
                    Ok(())
                });
            }
            result.map(|()| entries.into_iter().map(|(id, _)| id).collect::<Vec<u64>>())
        })?;
        // Phase 3: one read-only transaction over every entry.
        let all: Vec<u64> = owned.into_iter().flatten().collect();
        let chains = db.run(|tx| {
            let mut starts = Vec::new();
            for &id in &all {
                if TxEntries(tx).get(id)?.is_start {
                    starts.push(id);
                }
            }
            build_chains(&mut TxEntries(tx), &starts, segments, all.len())
        })?;
        let unique_segments = db.run(|tx| set.len(tx))? as u64;
        Ok(GenomeOutput { chains, unique_segments })
    }

    fn verify(
        input: &GenomeInput,
        sequential: &GenomeOutput,
        parallel: &GenomeOutput,
    ) -> Result<(), BenchError> {
        let fail = |what: String| Err(BenchError::Inconsistent(format!("genome: {what}")));
        if parallel.unique_segments != sequential.unique_segments {
            return fail(format!(
                "{} unique segments in parallel, {} sequentially",
                parallel.unique_segments, sequential.unique_segments
            ));
        }
        for (label, out) in [("sequential", sequential), ("parallel", parallel)] {
            match out.sequence() {
                None => return fail(format!("{label}: {} chains, not one", out.chains.len())),
                Some(seq) if seq != input.gene.as_slice() => {
                    let at = seq.iter().zip(&input.gene).take_while(|(a, b)| a == b).count();
                    return fail(format!(
                        "{label}: the sequence ({} bases) differs from the gene ({} bases) at \
                         base {at}",
                        seq.len(),
                        input.gene.len()
                    ));
                }
                Some(_) => {}
            }
        }
        if parallel != sequential {
            return fail("the parallel and sequential outputs differ".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lone(id: u64, segment: u64) -> Entry {
        Entry { is_start: true, next: 0, start: id, end: id, length: 4, overlap: 0, segment }
    }

    /// The start table is keyed by hashes, so a candidate can share only the hash of the end's
    /// suffix: `try_link` links when the strings overlap and refuses otherwise, leaving both
    /// entries as they were (this fails without the string comparison).
    #[test]
    fn try_link_compares_the_strings_behind_a_hash_match() {
        let segments = vec![b"acgt".to_vec(), b"gtca".to_vec(), b"ttca".to_vec()];
        let mut entries = vec![lone(1, 0), lone(2, 1), lone(3, 2)];
        let before = entries.clone();
        assert!(!try_link(&mut entries, &segments, 1, 3, 2).unwrap(), "gt is not tt");
        assert_eq!(entries, before);
        assert!(try_link(&mut entries, &segments, 1, 2, 2).unwrap(), "gt overlaps gt");
        assert_eq!((entries[0].next, entries[0].overlap, entries[1].is_start), (2, 2, false));
        assert_eq!((entries[0].end, entries[0].length), (2, 6));
        // An entry naming a segment outside the input is an error, not a panic.
        let mut bad = vec![lone(1, 0), lone(2, 9)];
        assert!(try_link(&mut bad, &segments, 1, 2, 2).is_err());
    }

    /// The prefix hashes are the hashes of the prefixes taken one at a time.
    #[test]
    fn prefix_hashes_are_incremental() {
        let s = b"gattaca";
        let all: Vec<u64> = prefix_hashes(s).collect();
        for len in 1..=s.len() {
            assert_eq!(all[len - 1], string_hash(&s[..len]));
        }
        assert_ne!(string_hash(b"ac"), string_hash(b"ca"));
    }
}
