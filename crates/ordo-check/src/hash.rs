//! A fast hasher for the checker's integer-keyed maps.
//!
//! The checker hashes millions of small integer keys (`(key, value)` pairs, node pairs) for a
//! 10⁵-transaction history. The standard library's SipHash resists collision attacks that
//! cannot happen here (the input is a test's own history) at several times the cost, so the
//! maps use the multiply-rotate hash of Firefox and rustc (`FxHash`) instead. It is kept
//! in-crate so that `ordo-check` depends on nothing but `serde` and `thiserror`.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// `HashMap` with [`FxHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;
/// `HashSet` with [`FxHasher`].
pub(crate) type FastSet<K> = HashSet<K, BuildHasherDefault<FxHasher>>;

/// The `FxHash` function: for each word, `h = (h.rotl(5) ^ word) * K`.
#[derive(Default, Clone, Copy, Debug)]
pub(crate) struct FxHasher {
    hash: u64,
}

/// The multiplier of `FxHash` (from the golden ratio, odd).
const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_work_and_spread_small_keys() {
        let mut m: FastMap<(u64, u64), usize> = FastMap::default();
        for k in 0..1000u64 {
            m.insert((k % 10, k), k as usize);
        }
        assert_eq!(m.len(), 1000);
        assert_eq!(m.get(&(3, 13)), Some(&13));
        let hashes: FastSet<u64> = (0..1000u64)
            .map(|k| {
                let mut h = FxHasher::default();
                h.write_u64(k);
                h.finish()
            })
            .collect();
        assert_eq!(hashes.len(), 1000);
    }
}
