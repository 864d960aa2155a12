//! The buffer's own random generator: Xoshiro256++ (Blackman & Vigna 2019) seeded by SplitMix64.
//!
//! Owned here rather than taken from a crate so that a seed gives the same stream in every
//! version of rlcore.

/// Xoshiro256++ state. `Rng::new(seed)` expands the seed with SplitMix64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator whose stream is fully determined by `seed`.
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let s = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        Rng { s }
    }

    /// Restore a state captured with [`Rng::state`]. An all-zero state (invalid for xoshiro) is
    /// replaced by the state of seed 0.
    pub fn from_state(s: [u64; 4]) -> Self {
        if s == [0; 4] {
            Rng::new(0)
        } else {
            Rng { s }
        }
    }

    pub fn state(&self) -> [u64; 4] {
        self.s
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform integer in `[0, n)` (Lemire's nearly divisionless method, unbiased). `n` must be > 0.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let mut m = (self.next_u64() as u128) * (n as u128);
        let mut low = m as u64;
        if low < n {
            let threshold = n.wrapping_neg() % n;
            while low < threshold {
                m = (self.next_u64() as u128) * (n as u128);
                low = m as u64;
            }
        }
        (m >> 64) as u64
    }

    /// Uniform float in `[0, 1)` with 53 random bits.
    #[inline]
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A new generator whose stream is independent of this one (for a second buffer seeded
    /// from the first): seeded by two outputs of this generator.
    pub fn split(&mut self) -> Rng {
        let a = self.next_u64();
        Rng::new(a ^ self.next_u64().rotate_left(32))
    }
}

/// A seed for buffers created without one: a fresh randomly keyed hash of the process id
/// (std's `RandomState` keys come from the operating system's random source).
pub fn entropy_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id() as u64);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_different_seeds_differ() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut c = Rng::new(8);
        let xa: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let xb: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..16).map(|_| c.next_u64()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
    }

    #[test]
    fn entropy_seeds_differ() {
        let seeds: std::collections::HashSet<u64> = (0..8).map(|_| entropy_seed()).collect();
        assert_eq!(seeds.len(), 8);
    }

    #[test]
    fn below_is_uniform() {
        let mut r = Rng::new(1);
        let n = 7u64;
        let draws = 70_000;
        let mut counts = [0u32; 7];
        for _ in 0..draws {
            counts[r.below(n) as usize] += 1;
        }
        // chi-square with 6 degrees of freedom; 22.46 is the 0.999 quantile
        let e = draws as f64 / n as f64;
        let chi2: f64 = counts.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
        assert!(chi2 < 22.46, "chi2 = {chi2}");
    }

    #[test]
    fn uniform_in_unit_interval() {
        let mut r = Rng::new(3);
        let mut sum = 0.0;
        for _ in 0..100_000 {
            let u = r.uniform();
            assert!((0.0..1.0).contains(&u));
            sum += u;
        }
        assert!((sum / 100_000.0 - 0.5).abs() < 0.005);
    }
}
