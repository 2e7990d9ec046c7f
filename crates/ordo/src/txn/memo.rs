//! # Where this attempt found its keys: a memo for structures built on [`super::Tx`]
//!
//! A read-modify-write of a key that the same transaction looked up a moment ago (a query, then
//! the reservation; a `get`, then an `update`) descends its tree twice. [`Memo`] remembers, for a
//! few `(structure, key)` pairs, the object an operation of this attempt found the key in —
//! for [`crate::tree::BTree`], the leaf — so the second operation can read that object alone.
//!
//! ## Invariant (what a user of the memo must keep)
//! The memo is a *hint*: a position it returns is only used after the object, read through the
//! transaction, is seen to hold the key. That check is what makes it safe, so:
//! - the key is identified by a 64-bit hash, and a collision costs only a wasted read;
//! - a structure that changes which object holds which keys (a B+tree split, merge or
//!   redistribution) calls [`Memo::forget`] for itself first, so no position recorded before the
//!   change is used after it. Without that, a leaf emptied into its sibling and then freed (and
//!   its slot reused by an allocation of the same attempt) could be read as the key's home.
//!
//! The memo lives in the attempt ([`super::Tx`]), not the worker: every attempt starts empty,
//! and positions never leak from one snapshot into another. Within an attempt every read sees
//! one snapshot (read-timestamp extension re-checks all earlier reads, the descents included),
//! so a position recorded by a descent stays the key's home until this attempt itself changes
//! the structure.

use crate::addr::Addr;

/// Positions remembered per attempt: vacation's reservation queries four resources and updates
/// up to three; TPC-C reads and writes up to fifteen stock rows, but through direct addresses.
pub(crate) const MEMO_ENTRIES: usize = 8;

/// One remembered position.
#[derive(Clone, Copy, Default)]
struct Entry {
    /// The structure's identity (a tree's root address); [`Addr::NULL`] marks a free entry.
    structure: Addr,
    key_hash: u64,
    at: Addr,
}

/// A small, fixed-size map `(structure, key hash) → object`, replaced round-robin.
#[derive(Default)]
pub(crate) struct Memo {
    entries: [Entry; MEMO_ENTRIES],
    next: usize,
}

impl Memo {
    /// Where `key_hash` of `structure` was last found in this attempt, if remembered.
    #[inline]
    pub(crate) fn get(&self, structure: Addr, key_hash: u64) -> Option<Addr> {
        if structure == Addr::NULL {
            return None;
        }
        self.entries
            .iter()
            .find(|e| e.structure == structure && e.key_hash == key_hash)
            .map(|e| e.at)
    }

    /// Remembers that `key_hash` of `structure` is in the object at `at`.
    #[inline]
    pub(crate) fn put(&mut self, structure: Addr, key_hash: u64, at: Addr) {
        if structure == Addr::NULL {
            return;
        }
        let entry = Entry { structure, key_hash, at };
        if let Some(e) =
            self.entries.iter_mut().find(|e| e.structure == structure && e.key_hash == key_hash)
        {
            *e = entry;
            return;
        }
        self.entries[self.next] = entry;
        self.next = (self.next + 1) % MEMO_ENTRIES;
    }

    /// Forgets every position of `structure` (it is about to move keys between objects).
    #[inline]
    pub(crate) fn forget(&mut self, structure: Addr) {
        for e in &mut self.entries {
            if e.structure == structure {
                *e = Entry::default();
            }
        }
    }
}

/// A 64-bit hash of a key for [`Memo`] (FxHash's multiply-rotate over 8-byte words; the memo
/// checks the key itself, so only speed matters).
#[inline]
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    let mut h = key.len() as u64;
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("chunks of 8 bytes"));
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(n: u64) -> Addr {
        Addr::new(0, n * 64)
    }

    #[test]
    fn remembers_replaces_and_forgets_per_structure() {
        let mut m = Memo::default();
        m.put(a(1), 7, a(10));
        m.put(a(2), 7, a(20));
        assert_eq!(m.get(a(1), 7), Some(a(10)));
        assert_eq!(m.get(a(2), 7), Some(a(20)));
        assert_eq!(m.get(a(1), 8), None);
        m.put(a(1), 7, a(11));
        assert_eq!(m.get(a(1), 7), Some(a(11)));
        m.forget(a(1));
        assert_eq!(m.get(a(1), 7), None);
        assert_eq!(m.get(a(2), 7), Some(a(20)));
        // The null structure is never remembered (it marks free entries).
        m.put(Addr::NULL, 0, a(5));
        assert_eq!(m.get(Addr::NULL, 0), None);
    }

    #[test]
    fn keeps_the_newest_entries() {
        let mut m = Memo::default();
        for k in 0..(MEMO_ENTRIES as u64 + 3) {
            m.put(a(1), k, a(100 + k));
        }
        for k in 0..3 {
            assert_eq!(m.get(a(1), k), None, "key {k} was replaced");
        }
        for k in 3..(MEMO_ENTRIES as u64 + 3) {
            assert_eq!(m.get(a(1), k), Some(a(100 + k)));
        }
    }

    #[test]
    fn key_hash_covers_every_byte_and_the_length() {
        let base = key_hash(b"customer:0000042");
        assert_ne!(base, key_hash(b"customer:0000043"));
        assert_ne!(base, key_hash(b"Customer:0000042"));
        assert_ne!(key_hash(b"ab"), key_hash(b"ab\0"));
        assert_ne!(key_hash(b""), key_hash(b"\0"));
    }
}
