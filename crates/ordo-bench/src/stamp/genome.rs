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
//! `[L] ++ prefix ++ entry address` — a multimap, so a lookup is a range scan over
//! `[L] ++ suffix` and two entries indexed under one prefix never write the same key (STAMP uses
//! one hash table of lists per `L`, comparing strings after a hash match). Each thread creates
//! the construct entries of the segments *its* deduplication transactions inserted, and matches
//! those entries in phase 2. The sequential version runs the same phases on `std` collections.
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
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};

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
/// Gene draws before giving up on one whose `(s-1)`-mers are distinct.
pub const GENE_ATTEMPTS_MAX: usize = 64;
/// The longest gene accepted.
pub const GENE_LENGTH_MAX: u32 = 1 << 20;
/// The longest segment accepted (start-table keys are `1 + s + 8` bytes, under the key limit).
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
    end: u64,
    candidate: u64,
    overlap: u64,
) -> Result<bool, BenchError> {
    let c = entries.get(candidate)?;
    let e = entries.get(end)?;
    if !c.is_start || e.start == candidate || e.next != 0 {
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

/// A start-table key: `[L] ++ prefix` (a scan bound) or `[L] ++ prefix ++ entry` (an entry).
fn table_key(len: usize, prefix: &[u8], entry: Option<u64>) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + prefix.len() + 8);
    k.push(len as u8);
    k.extend_from_slice(prefix);
    if let Some(e) = entry {
        k.extend_from_slice(&e.to_be_bytes());
    }
    k
}

/// Node sizes tried for the start table, smallest first; the default size takes every key
/// [`SEGMENT_LENGTH_MAX`] allows.
const START_TABLE_NODE_BYTES: [usize; 3] = [512, 1024, ordo::tree::NODE_BYTES_DEFAULT];

/// The start table's nodes: the smallest size whose key limit takes `[L] ++ prefix ++ entry`
/// for segments of `segment_length` (small nodes: a lookup or insert copies less).
fn start_table_nodes(segment_length: usize) -> TreeOptions {
    let fits = |o: &TreeOptions| o.key_bytes_max() >= segment_length + 8;
    START_TABLE_NODE_BYTES
        .into_iter()
        .map(TreeOptions::with_node_bytes)
        .find(fits)
        .unwrap_or_default()
}

/// The entries indexed under `[L] ++ suffix`, in key order.
fn candidates<C: Clock>(
    tx: &mut Tx<'_, C>,
    table: BTree,
    len: usize,
    suffix: &[u8],
) -> Result<Vec<u64>, BenchError> {
    let lo = table_key(len, suffix, None);
    let mut out = Vec::new();
    table.range(tx, Bound::Included(&lo), Bound::Unbounded, Direction::Forward, None, |k, _| {
        if k.len() != lo.len() + 8 || !k.starts_with(&lo) {
            return ControlFlow::Break(());
        }
        let mut id = [0u8; 8];
        id.copy_from_slice(&k[lo.len()..]);
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
        let mut table: BTreeMap<(usize, &[u8]), Vec<u64>> = BTreeMap::new();
        for (i, &seg) in unique.iter().enumerate() {
            for len in 1..s {
                table.entry((len, &input.segments[seg][..len])).or_default().push(i as u64 + 1);
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
                let Some(list) = table.get(&(len, &seg[s - len..])) else { continue };
                for &c in list {
                    // Vec entries never fail to read or write.
                    if let Ok(true) = try_link(&mut entries, i as u64 + 1, c, len as u64) {
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
            let table = BTree::create_with(tx, start_table_nodes(s))?;
            // Sized for the unique segments, at most one per gene position, as STAMP sizes its
            // hash set by the gene length (sizing it by the 16 M drawn segments of the large
            // input spread 16 k entries over 64 k buckets: a cache miss per lookup).
            let unique_max = input.params.gene_length as usize;
            Ok::<_, ordo::Error>((HashMap::create(tx, unique_max)?, table))
        })?;
        let phases = Phases { barrier: Barrier::new(threads), failed: AtomicBool::new(false) };
        let owned = on_threads(threads, |t| {
            let mut result = Ok(());
            // Phase 1: this thread's chunk of segments, DEDUP_CHUNK per transaction; keep the
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
                Ok(())
            });
            // Phase 2a: an entry per owned segment, indexed under each of its prefixes.
            let mut entries: Vec<(u64, usize)> = Vec::with_capacity(mine.len());
            phases.step(&mut result, || {
                for &seg in &mine {
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
                        for len in 1..s {
                            table.insert(
                                tx,
                                &table_key(len, &segments[seg][..len], Some(id)),
                                &[],
                            )?;
                        }
                        Ok::<_, ordo::Error>(id)
                    })?;
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
                                if try_link(&mut TxEntries(tx), id, c, len as u64)? {
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
