//! # STAMP intruder: signature-based network intrusion detection (Minh et al., IISWC'08)
//!
//! The input is a stream of packets: `flows` flows, each a payload split into fragments, all
//! fragments of all flows shuffled together. Workers repeatedly
//! 1. **capture**: pop the next packet from the shared packet queue (one transaction),
//! 2. **reassemble**: add it to its flow's fragment list in the shared fragment map; the packet
//!    that completes a flow removes the list, joins the payload in fragment order and pushes the
//!    flow on the shared queue of decoded flows (one transaction; a one-fragment flow goes
//!    straight to the decoded queue),
//! 3. pop one decoded flow (one transaction) and, outside any transaction, run the **detector**
//!    on it: lower-case the payload and search it for each signature of the dictionary; a hit
//!    records the flow id in the shared set of attacks (one transaction).
//!
//! This is STAMP's `processPackets` loop with its three `TM_BEGIN`/`TM_END` blocks. In the
//! engine, the packet queue is a head index in one heap object over the read-only shuffled
//! packet array (STAMP's queue holds pointers into the stream); the fragment map is an
//! [`ordo::map::HashMap`] from flow id to the address of the flow's fragment list, one heap
//! object holding the packet indices received, sorted by fragment id (STAMP's map holds a
//! pointer to a sorted list per flow). The list is allocated by the flow's first packet with
//! room for every fragment; a packet that neither starts nor completes its flow only reads the
//! map and changes the list object (until session 22 the list was the map's value, and every
//! packet rewrote its map bucket);
//! the decoded queue is a FIFO linked list of heap objects (`[next, flow id, payload…]`) under a
//! `[head, tail]` descriptor object; the attack set is a [`BTree`] keyed by flow id. The packet
//! queue head and the decoded queue descriptor are the kernel's hot spots, as in STAMP.
//!
//! ## Generation (STAMP's `stream_generate`)
//! For each flow id `1..=flows`: with probability `attack_percent` % the payload is a random
//! signature of the dictionary; otherwise it is `1..=max_length` random printable characters
//! (`' '..='~'`). A flow of `b` bytes is split into `1..=b` packets of `b / n` bytes, the last
//! taking the remainder, so `max_length` (STAMP's `-l`) also bounds the packet count of a
//! random flow. The generator runs the detector on every payload: the **ground truth** is the
//! set of flows it flags (the inserted attacks plus any random payload that happens to contain
//! a signature, as STAMP's generator also counts). Finally all packets are shuffled.
//!
//! ## What [`Kernel::verify`] checks
//! The result does not depend on the interleaving, so the parallel [`IntruderOutput`] must equal
//! the sequential one field by field: the sorted attack flow ids, the number of flows decoded,
//! an order-independent digest of every reassembled `(flow id, payload)` (so a mis-assembled
//! payload is caught even when the detector would not notice), and the flows left half
//! reassembled (zero). The sequential attack set must also equal the generator's ground truth.

use std::collections::{HashMap as StdHashMap, VecDeque};
use std::time::Instant;

use ordo::map::HashMap;
use ordo::tree::BTree;
use ordo::{Addr, Ordo, Tx};
use ordo_clock::Clock;
use rand::{Rng, SeedableRng, rngs::SmallRng};

use super::{Kernel, Size};
use super::{on_threads, out_of_range, parse_value, unknown_param};
use crate::error::BenchError;

/// The detector's dictionary: common English words, as STAMP's default signatures are.
pub const SIGNATURES: [&str; 32] = [
    "about", "after", "again", "because", "before", "between", "could", "during", "every", "first",
    "found", "great", "house", "large", "little", "might", "never", "other", "people", "place",
    "right", "small", "still", "their", "there", "these", "thing", "think", "three", "under",
    "where", "which",
];
/// The largest `flows` accepted.
pub const FLOWS_MAX: u32 = 1 << 24;
/// The largest `max_length` accepted (a decoded flow must fit one heap object comfortably).
pub const LENGTH_MAX: u32 = 1 << 16;
/// The names `--param` accepts (STAMP's flag letters or long names).
const PARAM_NAMES: &str = "a|attack-percent, l|max-length, n|flows";

/// The generator's parameters (STAMP's `intruder` flags; `-s` is the `seed` of
/// [`Kernel::generate`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct IntruderParams {
    /// `-a`: percentage of flows that carry an attack, `0..=100`.
    pub attack_percent: u32,
    /// `-l`: the longest random payload, and so the most packets of a random flow,
    /// `1..=LENGTH_MAX`.
    pub max_length: u32,
    /// `-n`: flows, `1..=FLOWS_MAX`.
    pub flows: u32,
}

/// One fragment of a flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// The flow, `1..=flows`.
    pub flow: u64,
    /// Its position in the flow, `0..fragments`.
    pub fragment: u32,
    /// The flow's fragment count.
    pub fragments: u32,
    /// The payload bytes of this fragment.
    pub data: Vec<u8>,
}

/// A generated stream.
#[derive(Clone, Debug)]
pub struct IntruderInput {
    /// The parameters it was generated from.
    pub params: IntruderParams,
    /// All packets, shuffled: the capture order.
    pub packets: Vec<Packet>,
    /// The flows the detector flags when run on the generated payloads, ascending.
    pub attacks: Vec<u64>,
}

/// What a run found.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct IntruderOutput {
    /// Flows detected as attacks, ascending.
    pub attacks: Vec<u64>,
    /// Flows reassembled and run through the detector.
    pub flows_decoded: u64,
    /// Wrapping sum of a 64-bit hash of every reassembled `(flow id, payload)`.
    pub payload_digest: u64,
    /// Flows still in the fragment map at the end (incomplete).
    pub flows_incomplete: u64,
}

/// The detector: lower-case the payload, then search for every signature.
pub fn is_attack(payload: &[u8]) -> bool {
    let lower = payload.to_ascii_lowercase();
    SIGNATURES.iter().any(|s| lower.windows(s.len()).any(|w| w == s.as_bytes()))
}

/// The digest term of one flow (FNV-1a over the id and payload, then a final mix).
fn flow_hash(flow: u64, payload: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in flow.to_le_bytes().iter().chain(payload) {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    h ^ (h >> 29)
}

/// The STAMP intruder kernel.
#[derive(Clone, Copy, Debug, Default)]
pub struct Intruder;

/// Joins the fragments (packet indices sorted by fragment id) of a complete flow, checking that
/// the fragment ids are exactly `0..fragments` (STAMP's decoder does the same check).
fn assemble(packets: &[Packet], indices: &[u32]) -> Result<Vec<u8>, BenchError> {
    let mut out = Vec::new();
    for (want, &i) in indices.iter().enumerate() {
        let p = packets.get(i as usize).ok_or_else(|| {
            BenchError::Inconsistent(format!(
                "fragment list names packet {i}, which is not in the stream"
            ))
        })?;
        if p.fragment as usize != want {
            return Err(BenchError::Inconsistent(format!(
                "flow {}: fragment {} where fragment {want} belongs",
                p.flow, p.fragment
            )));
        }
        out.extend_from_slice(&p.data);
    }
    Ok(out)
}

/// A fragment list object: word 0 is the count of packets filed, then the packet indices two
/// to a word (element `j` in the low half of word `1 + j / 2` when `j` is even, the high half
/// when odd), sorted by fragment id. It is allocated by a flow's first packet with room for all
/// its fragments, so its length never changes.
fn new_list(fragments: u32, index: u32) -> Vec<u8> {
    let mut bytes = vec![0u8; list_bytes(fragments)];
    bytes[..8].copy_from_slice(&1u64.to_le_bytes());
    bytes[8..12].copy_from_slice(&index.to_le_bytes());
    bytes
}

/// The length of the list object of a flow of `fragments` packets.
fn list_bytes(fragments: u32) -> usize {
    8 + 4 * fragments as usize
}

fn list_get(words: &[u64], j: usize) -> u32 {
    (words[1 + j / 2] >> (32 * (j % 2))) as u32
}

fn list_set(words: &mut [u64], j: usize, index: u32) {
    let shift = 32 * (j % 2);
    let w = &mut words[1 + j / 2];
    *w = (*w & !(u64::from(u32::MAX) << shift)) | (u64::from(index) << shift);
}

/// Files packet `index` (of a flow of `fragments` packets) into the flow's list object, given
/// as its words. Returns the whole list, sorted, when this packet completes the flow (the words
/// are then left as they were: the caller frees the object); otherwise inserts the index in
/// fragment order and counts it. A count past the flow's size, an object too short for it or a
/// listed index outside the stream is an error, never a panic.
fn list_insert(
    packets: &[Packet],
    words: &mut [u64],
    index: u32,
    fragments: u32,
) -> Result<Option<Vec<u32>>, BenchError> {
    let n = fragments as usize;
    let p = packets.get(index as usize);
    let bad = || {
        BenchError::Inconsistent(format!(
            "flow {}: a corrupt fragment list",
            p.map_or(0, |p| p.flow)
        ))
    };
    let (Some(p), Some(&count)) = (p, words.first()) else {
        return Err(bad());
    };
    let count = count as usize;
    if count >= n || words.len() < 1 + n.div_ceil(2) {
        return Err(bad());
    }
    // The first listed packet whose fragment id is not below this one's.
    let (mut lo, mut hi) = (0, count);
    while lo < hi {
        let mid = (lo + hi) / 2;
        let listed = packets.get(list_get(words, mid) as usize).ok_or_else(bad)?;
        if listed.fragment < p.fragment {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if count + 1 == n {
        let mut list = Vec::with_capacity(n);
        list.extend((0..count).map(|j| list_get(words, j)));
        list.insert(lo, index);
        return Ok(Some(list));
    }
    for j in (lo..count).rev() {
        let moved = list_get(words, j);
        list_set(words, j + 1, moved);
    }
    list_set(words, lo, index);
    words[0] = count as u64 + 1;
    Ok(None)
}

/// Inserts packet `index` into a fragment list kept sorted by fragment id.
fn insert_sorted(packets: &[Packet], list: &mut Vec<u32>, index: u32) {
    let fragment = packets[index as usize].fragment;
    let pos = list.partition_point(|&i| packets[i as usize].fragment < fragment);
    list.insert(pos, index);
}

/// The engine objects of one parallel run.
#[derive(Clone, Copy, Debug)]
struct Shared {
    /// One `u64`: the index of the next packet to capture.
    packet_head: Addr,
    /// Flow id (8 bytes, little-endian) → the address of its fragment list object (see
    /// [`list_insert`]).
    fragments: HashMap,
    /// `[head, tail]` of the decoded-flow FIFO (null when empty).
    decoded: Addr,
    /// Flow id (big-endian) → empty: the attacks found.
    attacks: BTree,
}

/// Bytes before the payload in a decoded-queue node: `next`, flow id.
const NODE_HEADER_BYTES: usize = 16;

fn word(bytes: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
    u64::from_le_bytes(w)
}

impl Shared {
    /// Step 1: the next packet's index, if any.
    fn capture<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        count: usize,
    ) -> Result<Option<u32>, ordo::Error> {
        let head: u64 = tx.read(self.packet_head)?;
        if head >= count as u64 {
            return Ok(None);
        }
        tx.write(self.packet_head, &(head + 1))?;
        Ok(Some(head as u32))
    }

    /// Step 2: file packet `index`; a completed flow goes to the decoded queue.
    fn reassemble<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        packets: &[Packet],
        index: u32,
    ) -> Result<(), BenchError> {
        let p = &packets[index as usize];
        if p.fragments <= 1 {
            return self.push_decoded(tx, p.flow, &p.data);
        }
        let key = p.flow.to_le_bytes();
        let found = self.fragments.get_with(tx, &key, |v| {
            <[u8; 8]>::try_from(v).map(|a| Addr::from_raw(u64::from_le_bytes(a)))
        })?;
        let list_addr = match found {
            None => {
                // The flow's first packet: a list object with room for all its fragments.
                let addr = tx.alloc_bytes(&new_list(p.fragments, index))?;
                self.fragments.insert(tx, &key, &addr.to_raw().to_le_bytes())?;
                return Ok(());
            }
            Some(Ok(addr)) => addr,
            Some(Err(_)) => {
                return Err(BenchError::Inconsistent(format!(
                    "flow {}: the fragment map's value is not an object address",
                    p.flow
                )));
            }
        };
        let Some(list) =
            tx.update_words(list_addr, |words| list_insert(packets, words, index, p.fragments))??
        else {
            return Ok(());
        };
        let payload = assemble(packets, &list)?;
        self.fragments.remove(tx, &key)?;
        tx.free(list_addr)?;
        self.push_decoded(tx, p.flow, &payload)
    }

    fn push_decoded<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        flow: u64,
        payload: &[u8],
    ) -> Result<(), BenchError> {
        let mut node = Vec::with_capacity(NODE_HEADER_BYTES + payload.len());
        node.extend_from_slice(&0u64.to_le_bytes());
        node.extend_from_slice(&flow.to_le_bytes());
        node.extend_from_slice(payload);
        let addr = tx.alloc_bytes(&node)?;
        let [head, tail]: [u64; 2] = tx.read(self.decoded)?;
        if tail == 0 {
            tx.write(self.decoded, &[addr.to_raw(), addr.to_raw()])?;
        } else {
            // The old tail's `next` word, changed in place (its payload is not copied out).
            tx.update_words(Addr::from_raw(tail), |node| node[0] = addr.to_raw())?;
            tx.write(self.decoded, &[head, addr.to_raw()])?;
        }
        Ok(())
    }

    /// Step 3: pop a decoded flow, if any.
    fn pop_decoded<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
    ) -> Result<Option<(u64, Vec<u8>)>, BenchError> {
        let [head, tail]: [u64; 2] = tx.read(self.decoded)?;
        if head == 0 {
            return Ok(None);
        }
        let node_addr = Addr::from_raw(head);
        let node = tx.read_bytes(node_addr)?;
        if node.len() < NODE_HEADER_BYTES {
            return Err(BenchError::Inconsistent(format!(
                "decoded-queue node {node_addr} has {} bytes",
                node.len()
            )));
        }
        let next = word(&node, 0);
        let flow = word(&node, 1);
        let new_tail = if next == 0 { 0 } else { tail };
        tx.write(self.decoded, &[next, new_tail])?;
        tx.free(node_addr)?;
        Ok(Some((flow, node[NODE_HEADER_BYTES..].to_vec())))
    }
}

impl Kernel for Intruder {
    const NAME: &'static str = "intruder";
    type Params = IntruderParams;
    type Input = IntruderInput;
    type Output = IntruderOutput;

    /// Small: STAMP's simulator input `-a10 -l4 -n2048`, with 8× the flows (`-n16384`) so the
    /// run lasts long enough to time; medium: `-a10 -l16 -n65536`; large: the standard
    /// `-a10 -l128 -n262144`.
    fn params(size: Size) -> IntruderParams {
        match size {
            Size::Small => IntruderParams { attack_percent: 10, max_length: 4, flows: 16_384 },
            Size::Medium => IntruderParams { attack_percent: 10, max_length: 16, flows: 65_536 },
            Size::Large => IntruderParams { attack_percent: 10, max_length: 128, flows: 262_144 },
        }
    }

    fn validate(p: &IntruderParams) -> Result<(), BenchError> {
        if p.attack_percent > 100 {
            return Err(out_of_range("attack_percent", p.attack_percent, "0..=100"));
        }
        if !(1..=LENGTH_MAX).contains(&p.max_length) {
            return Err(out_of_range("max_length", p.max_length, "1..=65536"));
        }
        if !(1..=FLOWS_MAX).contains(&p.flows) {
            return Err(out_of_range("flows", p.flows, "1..=16777216"));
        }
        Ok(())
    }

    fn generate(p: &IntruderParams, seed: u64) -> Result<IntruderInput, BenchError> {
        Self::validate(p)?;
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut packets = Vec::new();
        let mut attacks = Vec::new();
        for flow in 1..=u64::from(p.flows) {
            let payload: Vec<u8> = if rng.random_range(0..100) < p.attack_percent {
                SIGNATURES[rng.random_range(0..SIGNATURES.len())].as_bytes().to_vec()
            } else {
                let len = rng.random_range(1..=p.max_length);
                (0..len).map(|_| rng.random_range(b' '..=b'~')).collect()
            };
            if is_attack(&payload) {
                attacks.push(flow);
            }
            let len = payload.len();
            let n = rng.random_range(1..=len);
            let size = len / n;
            for f in 0..n {
                let end = if f + 1 == n { len } else { (f + 1) * size };
                packets.push(Packet {
                    flow,
                    fragment: f as u32,
                    fragments: n as u32,
                    data: payload[f * size..end].to_vec(),
                });
            }
        }
        // Fisher–Yates.
        for i in (1..packets.len()).rev() {
            let j = rng.random_range(0..=i);
            packets.swap(i, j);
        }
        if packets.len() > u32::MAX as usize {
            return Err(out_of_range("flows", p.flows, "a stream of at most 2^32 packets"));
        }
        Ok(IntruderInput { params: p.clone(), packets, attacks })
    }

    fn sequential(input: &IntruderInput) -> IntruderOutput {
        let packets = &input.packets;
        let mut out = IntruderOutput::default();
        let mut fragments: StdHashMap<u64, Vec<u32>> = StdHashMap::new();
        let mut decoded: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
        for (index, p) in packets.iter().enumerate() {
            if p.fragments <= 1 {
                decoded.push_back((p.flow, p.data.clone()));
            } else {
                let list = fragments.entry(p.flow).or_default();
                insert_sorted(packets, list, index as u32);
                if list.len() == p.fragments as usize {
                    // The generator's fragment ids are always 0..n; a failure leaves the flow
                    // incomplete, which verify reports.
                    if let Ok(payload) = assemble(packets, list) {
                        fragments.remove(&p.flow);
                        decoded.push_back((p.flow, payload));
                    }
                }
            }
            if let Some((flow, payload)) = decoded.pop_front() {
                out.flows_decoded += 1;
                out.payload_digest = out.payload_digest.wrapping_add(flow_hash(flow, &payload));
                if is_attack(&payload) {
                    out.attacks.push(flow);
                }
            }
        }
        out.attacks.sort_unstable();
        out.flows_incomplete = fragments.len() as u64;
        out
    }

    fn parallel<C: Clock + Send + Sync + 'static>(
        db: &Ordo<C>,
        input: &IntruderInput,
        threads: usize,
    ) -> Result<IntruderOutput, BenchError> {
        Ok(Self::parallel_timed(db, input, threads)?.0)
    }

    /// Times the workers alone, as STAMP's timer brackets `processPackets` and not the
    /// allocation of the decoder (our fragment map, created with room for every flow) or the
    /// read-out of the results.
    fn parallel_timed<C: Clock + Send + Sync + 'static>(
        db: &Ordo<C>,
        input: &IntruderInput,
        threads: usize,
    ) -> Result<(IntruderOutput, f64), BenchError> {
        if threads == 0 {
            return Err(BenchError::ZeroThreads);
        }
        let packets = &input.packets;
        let shared = db.run(|tx| {
            Ok::<_, ordo::Error>(Shared {
                packet_head: tx.alloc(&0u64)?,
                fragments: HashMap::create(tx, input.params.flows as usize)?,
                decoded: tx.alloc(&[0u64; 2])?,
                attacks: BTree::create(tx)?,
            })
        })?;
        let start = Instant::now();
        let per_thread = on_threads(threads, |_| {
            let (mut decoded, mut digest) = (0u64, 0u64);
            while let Some(index) = db.run(|tx| shared.capture(tx, packets.len()))? {
                db.run(|tx| shared.reassemble(tx, packets, index))?;
                if let Some((flow, payload)) = db.run(|tx| shared.pop_decoded(tx))? {
                    decoded += 1;
                    digest = digest.wrapping_add(flow_hash(flow, &payload));
                    if is_attack(&payload) {
                        db.run(|tx| shared.attacks.insert(tx, &flow.to_be_bytes(), &[]))?;
                    }
                }
            }
            Ok((decoded, digest))
        })?;
        let elapsed_s = start.elapsed().as_secs_f64();
        let mut out = IntruderOutput::default();
        for (decoded, digest) in per_thread {
            out.flows_decoded += decoded;
            out.payload_digest = out.payload_digest.wrapping_add(digest);
        }
        db.run(|tx| {
            out.attacks.clear();
            for (k, _) in shared.attacks.entries(tx)? {
                let id: [u8; 8] = k.as_slice().try_into().map_err(|_| {
                    BenchError::Inconsistent(format!("an attack key has {} bytes", k.len()))
                })?;
                out.attacks.push(u64::from_be_bytes(id));
            }
            out.flows_incomplete = shared.fragments.len(tx)? as u64;
            let [head, _]: [u64; 2] = tx.read(shared.decoded)?;
            if head != 0 {
                return Err(BenchError::Inconsistent(
                    "decoded flows are left in the queue after every packet was processed".into(),
                ));
            }
            Ok(())
        })?;
        Ok((out, elapsed_s))
    }

    fn verify(
        input: &IntruderInput,
        sequential: &IntruderOutput,
        parallel: &IntruderOutput,
    ) -> Result<(), BenchError> {
        let fail = |what: String| Err(BenchError::Inconsistent(format!("intruder: {what}")));
        if sequential.attacks != input.attacks {
            return fail(format!(
                "the sequential run found {} attacks, the generator planted {}",
                sequential.attacks.len(),
                input.attacks.len()
            ));
        }
        if parallel.attacks != sequential.attacks {
            let missing = sequential.attacks.iter().find(|f| !parallel.attacks.contains(f));
            let extra = parallel.attacks.iter().find(|f| !sequential.attacks.contains(f));
            return fail(format!(
                "the parallel run found {} attacks, the sequential {} (first missing {missing:?}, \
                 first extra {extra:?})",
                parallel.attacks.len(),
                sequential.attacks.len()
            ));
        }
        let flows = u64::from(input.params.flows);
        for (label, out) in [("sequential", sequential), ("parallel", parallel)] {
            if out.flows_decoded != flows {
                return fail(format!("{label}: {} of {flows} flows decoded", out.flows_decoded));
            }
            if out.flows_incomplete != 0 {
                return fail(format!("{label}: {} flows left incomplete", out.flows_incomplete));
            }
        }
        if parallel.payload_digest != sequential.payload_digest {
            return fail(format!(
                "payload digests differ: parallel {:#x}, sequential {:#x}",
                parallel.payload_digest, sequential.payload_digest
            ));
        }
        Ok(())
    }

    fn set_param(p: &mut IntruderParams, name: &str, value: &str) -> Result<(), BenchError> {
        let app = Self::NAME;
        match name {
            "a" | "attack-percent" => p.attack_percent = parse_value(app, name, value)?,
            "l" | "max-length" => p.max_length = parse_value(app, name, value)?,
            "n" | "flows" => p.flows = parse_value(app, name, value)?,
            _ => return Err(unknown_param(app, name, PARAM_NAMES)),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packets filed in any order come out sorted by fragment id when the last one arrives;
    /// until then the object counts them. A count past the flow's size, an object too short
    /// for the flow, or a listed index outside the stream is an error (each check is needed:
    /// without it the code indexes out of bounds or lists a packet twice).
    #[test]
    fn fragment_lists_sort_complete_and_reject_corruption() {
        let flow = |fragment| Packet { flow: 7, fragment, fragments: 5, data: vec![b'x'] };
        // Stream positions 0..5 hold fragments 3, 0, 4, 1, 2.
        let packets: Vec<Packet> = [3, 0, 4, 1, 2].into_iter().map(flow).collect();
        let to_words = |bytes: Vec<u8>| -> Vec<u64> {
            bytes
                .chunks(8)
                .map(|c| {
                    let mut w = [0u8; 8];
                    w[..c.len()].copy_from_slice(c);
                    u64::from_le_bytes(w)
                })
                .collect()
        };
        let mut words = to_words(new_list(5, 2));
        assert_eq!(words.len(), 1 + 3, "a count word and five halves");
        for index in [0, 4, 1] {
            assert!(list_insert(&packets, &mut words, index, 5).unwrap().is_none());
        }
        assert_eq!(words[0], 4);
        let before = words.clone();
        let list = list_insert(&packets, &mut words, 3, 5).unwrap().expect("complete");
        assert_eq!(list, [1, 3, 4, 0, 2], "stream positions in fragment order");
        assert_eq!(words, before, "the completing packet leaves the object as it was");
        assemble(&packets, &list).unwrap();

        let full = {
            let mut w = before.clone();
            w[0] = 5;
            w
        };
        assert!(list_insert(&packets, &mut full.clone(), 3, 5).is_err(), "count past the size");
        assert!(list_insert(&packets, &mut before[..2].to_vec(), 3, 5).is_err(), "too short");
        let mut outside = to_words(new_list(5, 9));
        assert!(list_insert(&packets, &mut outside, 1, 5).is_err(), "index 9 of 5 packets");
        assert!(list_insert(&packets, &mut to_words(new_list(5, 0)), 5, 5).is_err());
    }
}
