//! TPC-C's random functions (clause 2.1.6 NURand, clause 4.3.2 strings and last names),
//! scaled to smaller tables when the configuration asks for fewer items or customers.

use rand::Rng;
use rand::rngs::SmallRng;

/// The ten syllables of customer last names (clause 4.3.2.3).
const SYLLABLES: [&[u8]; 10] =
    [b"BAR", b"OUGHT", b"ABLE", b"PRI", b"PRES", b"ESE", b"ANTI", b"CALLY", b"ATION", b"EING"];

/// The last name of number `n` in `0..=999`: three syllables from its digits.
pub fn last_name(n: u32, out: &mut Vec<u8>) {
    out.clear();
    for digit in [n / 100 % 10, n / 10 % 10, n % 10] {
        out.extend_from_slice(SYLLABLES[digit as usize]);
    }
}

/// The constants C of NURand (clause 2.1.6): one per A. The run-time constant of the last-name
/// NURand differs from the load-time one by a delta allowed by clause 2.1.6.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NuRand {
    /// C for last names at load time.
    pub c_last_load: u32,
    /// C for last names at run time.
    pub c_last_run: u32,
    /// C for customer ids.
    pub c_id: u32,
    /// C for item ids.
    pub c_item: u32,
}

impl NuRand {
    /// Draws the constants.
    pub fn new(rng: &mut SmallRng) -> Self {
        let c_last_load = rng.random_range(0..=255);
        let c_last_run = loop {
            let c = rng.random_range(0..=255u32);
            let delta = c.abs_diff(c_last_load);
            if (65..=119).contains(&delta) && delta != 96 && delta != 112 {
                break c;
            }
        };
        NuRand {
            c_last_load,
            c_last_run,
            c_id: rng.random_range(0..=1023),
            c_item: rng.random_range(0..=8191),
        }
    }
}

/// NURand(A, x, y) with constant `c`.
#[inline]
pub fn nurand(rng: &mut SmallRng, a: u32, c: u32, x: u32, y: u32) -> u32 {
    let r = rng.random_range(0..=a) | rng.random_range(x..=y);
    (r.wrapping_add(c)) % (y - x + 1) + x
}

/// The A of NURand for a range of `n` values: the standard's A (255, 1023, 8191 for 1000,
/// 3000, 100000 values) when the range is full size, else the largest `2^k - 1` at most
/// `standard_a * n / full` (at least 0), so skew stays similar on scaled-down tables.
pub fn scaled_a(standard_a: u32, n: u32, full: u32) -> u32 {
    if n >= full {
        return standard_a;
    }
    let target = (u64::from(standard_a) * u64::from(n) / u64::from(full)) as u32;
    if target == 0 { 0 } else { (1u32 << (31 - target.leading_zeros())) - 1 }
}

/// Random upper-case letters, `lo..=hi` of them (a-string of clause 4.3.2.2).
pub fn astring(rng: &mut SmallRng, lo: usize, hi: usize, out: &mut Vec<u8>) {
    out.clear();
    let n = rng.random_range(lo..=hi);
    out.extend((0..n).map(|_| b'A' + rng.random_range(0..26u8)));
}

/// Random digits, exactly `n` of them (n-string).
pub fn nstring(rng: &mut SmallRng, n: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend((0..n).map(|_| b'0' + rng.random_range(0..10u8)));
}

/// I_DATA / S_DATA: 26..=50 letters, 10% of them with "ORIGINAL" at a random position.
pub fn data_with_original(rng: &mut SmallRng, out: &mut Vec<u8>) {
    astring(rng, 26, 50, out);
    if rng.random_range(0..10) == 0 {
        let at = rng.random_range(0..=out.len() - 8);
        out[at..at + 8].copy_from_slice(b"ORIGINAL");
    }
}

/// Whether `data` contains "ORIGINAL". Every 8-byte window holds exactly one position `q` with
/// `q % 8 == 7`, at some offset `j` into the window; so only those positions are looked at, and a
/// match can start only at `q - j` for an offset `j` where the needle has `data[q]` (a table
/// of 8-bit masks, one per byte value), checked by one 8-byte compare. TPC-C's 26 to 50 random
/// letters take 3 to 6 looks and, as 7 of the 26 letters are in the needle, one or two compares.
/// (Before: a `memchr` scan for `O` with a compare at each, 5 % of a NewOrder+Payment
/// transaction's instructions, as the vector search restarted after each of the ~1.5 `O`s of a
/// string; a Horspool skip by the window's last byte and the plain compare of every 8-byte
/// window both cost more than that.)
pub fn has_original(data: &[u8]) -> bool {
    const NEEDLE: [u8; 8] = *b"ORIGINAL";
    /// Bit `j` of `OFFSETS[b]`: `NEEDLE[j] == b`.
    const OFFSETS: [u8; 256] = {
        let mut t = [0u8; 256];
        let mut j = 0;
        while j < NEEDLE.len() {
            t[NEEDLE[j] as usize] |= 1 << j;
            j += 1;
        }
        t
    };
    let mut q = NEEDLE.len() - 1;
    while let Some(&b) = data.get(q) {
        let mut offsets = OFFSETS[usize::from(b)];
        while offsets != 0 {
            // q >= 7 >= j: the start is in the data; the window may run past its end.
            let start = q - offsets.trailing_zeros() as usize;
            if data.get(start..start + NEEDLE.len()) == Some(&NEEDLE[..]) {
                return true;
            }
            offsets &= offsets - 1;
        }
        q += NEEDLE.len();
    }
    false
}

/// A zip code: 4 random digits then "11111".
pub fn zip(rng: &mut SmallRng, out: &mut Vec<u8>) {
    nstring(rng, 4, out);
    out.extend_from_slice(b"11111");
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// Random strings over the needle's letters and a few others, against a plain search.
    #[test]
    fn original_is_found_as_a_plain_search_finds_it() {
        let seed = ordo_seed::Seed::new("original_is_found_as_a_plain_search_finds_it");
        let mut rng = SmallRng::seed_from_u64(seed.derive(0));
        let mut found = 0;
        for round in 0..20_000 {
            let len = round % 70;
            let mut data: Vec<u8> =
                (0..len).map(|_| b"ORIGINALXO"[rng.random_range(0..10)]).collect();
            if len >= 8 && rng.random_range(0..4) == 0 {
                let at = rng.random_range(0..=len - 8);
                data[at..at + 8].copy_from_slice(b"ORIGINAL");
            }
            let plain = data.windows(8).any(|w| w == b"ORIGINAL");
            found += usize::from(plain);
            assert_eq!(has_original(&data), plain, "{}", String::from_utf8_lossy(&data));
        }
        assert!(found > 1000, "{found}");
    }

    #[test]
    fn original_is_found_anywhere_and_only_whole() {
        assert!(has_original(b"ORIGINAL"));
        assert!(has_original(b"xxORIGINALyy"));
        assert!(has_original(b"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqORIGINAL"));
        assert!(!has_original(b"ORIGINA"));
        assert!(!has_original(b"xORIGINxALx"));
        assert!(!has_original(b"original"));
        assert!(!has_original(b""));
        // Every placement in every filler, against a search by hand.
        for filler in [&b"x"[..], b"L", b"A", b"LL", b"ORIGINA", b"RIGINAL", b"AL", b"NAL"] {
            for before in 0..12 {
                for after in 0..12 {
                    let mut data = filler.repeat(before);
                    data.extend_from_slice(b"ORIGINAL");
                    data.extend(filler.repeat(after));
                    assert!(has_original(&data), "{}", String::from_utf8_lossy(&data));
                    data.truncate(filler.len() * before + 7);
                    data.extend(filler.repeat(after));
                    let plain =
                        (0..data.len().saturating_sub(7)).any(|i| &data[i..i + 8] == b"ORIGINAL");
                    assert_eq!(has_original(&data), plain, "{}", String::from_utf8_lossy(&data));
                }
            }
        }
    }

    #[test]
    fn last_names_follow_the_syllables() {
        let mut s = Vec::new();
        last_name(371, &mut s);
        assert_eq!(s, b"PRICALLYOUGHT");
        last_name(0, &mut s);
        assert_eq!(s, b"BARBARBAR");
    }

    #[test]
    fn nurand_stays_in_range_and_run_constant_obeys_delta() {
        let mut rng = SmallRng::seed_from_u64(3);
        for _ in 0..100 {
            let c = NuRand::new(&mut rng);
            let d = c.c_last_run.abs_diff(c.c_last_load);
            assert!((65..=119).contains(&d) && d != 96 && d != 112);
        }
        for _ in 0..10_000 {
            let v = nurand(&mut rng, 1023, 17, 1, 3000);
            assert!((1..=3000).contains(&v));
        }
        assert_eq!(scaled_a(8191, 100_000, 100_000), 8191);
        assert_eq!(scaled_a(1023, 30, 3000), 7);
        assert_eq!(scaled_a(1023, 1, 3000), 0);
    }
}
