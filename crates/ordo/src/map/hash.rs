//! The map's key hash: fixed, seeded, fast, and the same on every machine and in every process.
//!
//! The hash decides where a key lives in the trie (its top bits pick the directory slots), and the
//! map will be persisted, so the function is part of the on-heap format: changing it requires a
//! new [`super::FORMAT_VERSION`]. It must not depend on the platform (words are read
//! little-endian) or on process state (no random keys: the seed is stored in the map's root).
//!
//! The construction is the folded multiply of aHash/foldhash — `fold(a, b)` = the xor of the two
//! halves of the 128-bit product — absorbing the key eight bytes at a time, followed by
//! MurmurHash3's `fmix64` finaliser so that the *top* bits, which the trie consumes first, depend
//! on every input bit. It is not DoS-resistant: with a fixed seed an adversary can build colliding
//! keys. The map stays correct under collisions (overflow chains at the depth limit), only slower.

/// The seed of maps created with default options ("ordo_map" in ASCII).
pub(super) const SEED_DEFAULT: u64 = u64::from_le_bytes(*b"ordo_map");

/// The 64-bit golden ratio: mixes the length into the initial state.
const MUL_LEN: u64 = 0x9E37_79B9_7F4A_7C15;
/// wyhash's first prime: the multiplier of every absorbed word.
const MUL_WORD: u64 = 0xA076_1D64_78BD_642F;

/// The folded multiply: both halves of the full 128-bit product, xor-ed.
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

/// MurmurHash3's 64-bit finaliser: full avalanche.
#[inline]
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^ (h >> 33)
}

/// The hash of `key` under `seed`.
#[inline]
pub(super) fn hash(seed: u64, key: &[u8]) -> u64 {
    let len = key.len() as u64;
    let mut h = fold(seed ^ MUL_WORD, len ^ MUL_LEN);
    let mut chunks = key.chunks_exact(8);
    for chunk in chunks.by_ref() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = fold(h ^ u64::from_le_bytes(word), MUL_WORD);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        h = fold(h ^ u64::from_le_bytes(word), MUL_WORD);
    }
    fmix64(h ^ len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_pinned() {
        // Part of the persisted format: if this changes, bump FORMAT_VERSION. (Values checked
        // against an independent Python transcription of the function.)
        assert_eq!(hash(SEED_DEFAULT, b""), 0x2DEF_A166_EFCC_872C);
        assert_eq!(hash(SEED_DEFAULT, b"ordo"), 0xCE46_20F0_69BC_2D57);
        assert_eq!(hash(7, b"a key longer than eight bytes"), 0x01EA_C5F4_978E_1FB6);
    }

    #[test]
    fn length_and_seed_matter() {
        assert_ne!(hash(SEED_DEFAULT, b""), hash(SEED_DEFAULT, b"\0"));
        assert_ne!(hash(SEED_DEFAULT, b"\0"), hash(SEED_DEFAULT, b"\0\0"));
        assert_ne!(hash(1, b"k"), hash(2, b"k"));
    }

    #[test]
    fn top_bits_spread_evenly() {
        // The trie's first level uses the top 6 bits: sequential keys must fill all 64 slots.
        let mut counts = [0u32; 64];
        for i in 0..64_000u32 {
            let h = hash(SEED_DEFAULT, format!("user{i}").as_bytes());
            counts[(h >> 58) as usize] += 1;
        }
        for c in counts {
            assert!((800..1200).contains(&c), "{counts:?}");
        }
    }
}
