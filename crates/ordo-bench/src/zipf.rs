//! Key choosers: uniform, and YCSB's Zipfian generator (Gray et al., "Quickly generating
//! billion-record synthetic databases", SIGMOD'94), as DBx1000 and YCSB use it.
//!
//! With skew `theta` in `[0, 1)`, key `i` (0-based, before scrambling) is drawn with probability
//! proportional to `1 / (i + 1)^theta`; `theta = 0` is uniform. `zeta(n, theta)` is computed once
//! per generator (O(n)), as in DBx1000.

use rand::Rng;

/// An invalid skew.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
#[error("zipf theta {theta} is outside [0, 1)")]
pub struct ThetaOutOfRange {
    /// The value given.
    pub theta: f64,
}

/// Draws keys in `0..n` with Zipfian skew `theta`.
#[derive(Clone, Debug)]
pub struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipf {
    /// A generator over `0..n` (n ≥ 1).
    pub fn new(n: u64, theta: f64) -> Result<Self, ThetaOutOfRange> {
        if !(0.0..1.0).contains(&theta) || theta.is_nan() {
            return Err(ThetaOutOfRange { theta });
        }
        let n = n.max(1);
        let zeta = |count: u64| (1..=count).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let zetan = zeta(n);
        let zeta2 = zeta(2.min(n));
        let alpha = 1.0 / (1.0 - theta);
        let eta = if n > 1 {
            (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan)
        } else {
            1.0
        };
        Ok(Zipf { n, theta, alpha, zetan, eta })
    }

    /// The number of keys drawn from, `n`.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Whether the generator draws from no keys (never: `n` is at least 1).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Widens the generator to `0..n` (a no-op unless `n` grows), extending `zeta(n)` by the new
    /// terms only — O(growth), as YCSB's `ZipfianGenerator` does when its item count grows. Used
    /// by the "latest" distribution, whose key space grows with every acknowledged insert.
    pub fn grow_to(&mut self, n: u64) {
        if n <= self.n {
            return;
        }
        let theta = self.theta;
        self.zetan += (self.n + 1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        self.n = n;
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        self.eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / self.zetan);
    }

    /// The next key.
    #[inline]
    pub fn sample<R: Rng>(&self, rng: &mut R) -> u64 {
        if self.theta == 0.0 {
            return rng.random_range(0..self.n);
        }
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.n - 1);
        }
        let v = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.n - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::SmallRng};

    #[test]
    fn growing_matches_a_fresh_generator() {
        let mut g = Zipf::new(10, 0.99).unwrap();
        g.grow_to(5_000);
        let f = Zipf::new(5_000, 0.99).unwrap();
        assert_eq!(g.len(), 5_000);
        assert!((g.zetan - f.zetan).abs() < 1e-9 && (g.eta - f.eta).abs() < 1e-9);
        g.grow_to(100); // never shrinks
        assert_eq!(g.len(), 5_000);
    }

    #[test]
    fn rejects_bad_theta() {
        assert!(Zipf::new(10, 1.0).is_err());
        assert!(Zipf::new(10, -0.1).is_err());
        assert!(Zipf::new(10, f64::NAN).is_err());
    }

    #[test]
    fn skew_concentrates_on_low_keys_and_stays_in_range() {
        let mut rng = SmallRng::seed_from_u64(1);
        let n = 1000;
        for theta in [0.0, 0.6, 0.9, 0.99] {
            let z = Zipf::new(n, theta).unwrap();
            let mut hits = vec![0u32; n as usize];
            for _ in 0..200_000 {
                hits[z.sample(&mut rng) as usize] += 1;
            }
            let head: u32 = hits[..10].iter().sum();
            let expected_uniform = 200_000 / 100;
            if theta == 0.0 {
                assert!(head < expected_uniform * 2, "uniform head {head}");
            } else {
                assert!(head > expected_uniform * 2, "theta {theta} head {head}");
            }
        }
    }
}
