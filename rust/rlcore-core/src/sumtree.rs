//! Sum tree and min tree over row priorities, in `f64` (Schaul et al. 2016, "Prioritized
//! Experience Replay", sec. 3.3 and appendix B.2.1).
//!
//! Each internal node is recomputed from its two children on every update (never adjusted by a
//! difference), so rounding errors do not accumulate: after any sequence of updates every node
//! equals the sum of its subtree's leaves as computed by the same additions, and a subtree whose
//! leaves are all zero sums to exactly zero. The descent never enters a zero subtree, so a zero
//! priority leaf (terminal rows, overwritten rows) is never returned.

/// A complete binary tree with `size` (a power of two) leaves, for sums and minima.
#[derive(Debug, Clone)]
pub struct SumTree {
    size: usize,
    len: usize,
    sum: Box<[f64]>,
    min: Box<[f64]>,
}

impl SumTree {
    /// A tree over `len` leaves, all priority 0.
    pub fn new(len: usize) -> Self {
        let size = len.max(1).next_power_of_two();
        SumTree {
            size,
            len,
            sum: vec![0.0; 2 * size].into_boxed_slice(),
            min: vec![f64::INFINITY; 2 * size].into_boxed_slice(),
        }
    }

    /// As [`SumTree::new`], failing with `InvalidValue` instead of aborting when the memory cannot
    /// be had.
    pub fn try_new(len: usize) -> crate::error::Result<Self> {
        let size = len
            .max(1)
            .checked_next_power_of_two()
            .and_then(|s| s.checked_mul(2).map(|_| s))
            .ok_or_else(|| crate::error::CoreError::value("capacity too large for a sum tree"))?;
        Ok(SumTree {
            size,
            len,
            sum: crate::mem::alloc(2 * size, 0.0)?,
            min: crate::mem::alloc(2 * size, f64::INFINITY)?,
        })
    }

    /// Set every leaf to 0 in place (no reallocation).
    pub fn reset(&mut self) {
        self.sum.fill(0.0);
        self.min.fill(f64::INFINITY);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Priority of leaf `i`.
    #[inline]
    pub fn get(&self, i: usize) -> f64 {
        self.sum[self.size + i]
    }

    /// Set leaf `i` to `p >= 0` (0 removes it from sampling) and recompute its ancestors.
    #[inline]
    pub fn set(&mut self, i: usize, p: f64) {
        let mut idx = self.size + i;
        self.sum[idx] = p;
        self.min[idx] = if p > 0.0 { p } else { f64::INFINITY };
        idx /= 2;
        while idx >= 1 {
            let (l, r) = (2 * idx, 2 * idx + 1);
            self.sum[idx] = self.sum[l] + self.sum[r];
            self.min[idx] = self.min[l].min(self.min[r]);
            idx /= 2;
        }
    }

    /// Sum of all leaves.
    #[inline]
    pub fn total(&self) -> f64 {
        self.sum[1]
    }

    /// Smallest positive leaf (`+inf` when all leaves are 0).
    #[inline]
    pub fn min_positive(&self) -> f64 {
        self.min[1]
    }

    /// The leaf where the prefix sum passes `u` (`0 <= u < total`). Never returns a zero leaf
    /// while `total() > 0`, whatever the rounding of `u`.
    #[inline]
    pub fn find(&self, mut u: f64) -> usize {
        let mut idx = 1;
        while idx < self.size {
            let l = 2 * idx;
            let ls = self.sum[l];
            if (u < ls && ls > 0.0) || self.sum[l + 1] <= 0.0 {
                idx = l;
            } else {
                u -= ls;
                idx = l + 1;
            }
        }
        idx - self.size
    }

    /// [`SumTree::find`] for a whole batch, descending all of them one level at a time: the
    /// loads of one level are independent, so their cache misses overlap instead of queuing up
    /// behind each other (a 1M-leaf tree is 20 levels of mostly-missing loads). `us` is consumed
    /// (left holding the residual masses); `out[i]` receives the leaf of `us[i]`.
    pub fn find_batch(&self, us: &mut [f64], out: &mut [usize]) {
        debug_assert_eq!(us.len(), out.len());
        out.iter_mut().for_each(|x| *x = 1);
        let mut level_size = 1;
        while level_size < self.size {
            for (idx, u) in out.iter_mut().zip(us.iter_mut()) {
                let l = 2 * *idx;
                let ls = self.sum[l];
                if (*u < ls && ls > 0.0) || self.sum[l + 1] <= 0.0 {
                    *idx = l;
                } else {
                    *u -= ls;
                    *idx = l + 1;
                }
            }
            level_size *= 2;
        }
        out.iter_mut().for_each(|x| *x -= self.size);
    }

    /// Recompute every internal node from the leaves (used after bulk loads).
    pub fn rebuild(&mut self) {
        for idx in (1..self.size).rev() {
            let (l, r) = (2 * idx, 2 * idx + 1);
            self.sum[idx] = self.sum[l] + self.sum[r];
            self.min[idx] = self.min[l].min(self.min[r]);
        }
    }

    /// Set every leaf from a slice (length `len`) and rebuild.
    pub fn load_leaves(&mut self, leaves: &[f64]) {
        for (i, &p) in leaves.iter().enumerate() {
            self.sum[self.size + i] = p;
            self.min[self.size + i] = if p > 0.0 { p } else { f64::INFINITY };
        }
        self.rebuild();
    }

    /// The leaves (length `len`).
    pub fn leaves(&self) -> &[f64] {
        &self.sum[self.size..self.size + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use proptest::prelude::*;

    #[test]
    fn find_follows_prefix_sums() {
        let mut t = SumTree::new(5);
        for (i, p) in [1.0, 0.0, 2.0, 3.0, 0.0].iter().enumerate() {
            t.set(i, *p);
        }
        assert_eq!(t.total(), 6.0);
        assert_eq!(t.find(0.5), 0);
        assert_eq!(t.find(1.0), 2);
        assert_eq!(t.find(2.99), 2);
        assert_eq!(t.find(3.0), 3);
        assert_eq!(t.find(5.999), 3);
        // rounding past the end never lands on a zero leaf
        assert_eq!(t.find(6.0), 3);
        assert_eq!(t.find(1e9), 3);
        assert_eq!(t.min_positive(), 1.0);
    }

    #[test]
    fn find_batch_equals_find() {
        let mut t = SumTree::new(37);
        let mut r = Rng::new(5);
        for i in 0..37 {
            t.set(i, if i % 3 == 0 { 0.0 } else { r.uniform() });
        }
        let mut us: Vec<f64> = (0..200)
            .map(|k| t.total() * (k as f64 + 0.5) / 200.0)
            .collect();
        let want: Vec<usize> = us.iter().map(|&u| t.find(u)).collect();
        let mut got = vec![0; 200];
        t.find_batch(&mut us, &mut got);
        assert_eq!(got, want);
    }

    #[test]
    fn million_updates_with_tiny_and_huge_values_never_return_a_zero_leaf() {
        let n = 1000;
        let mut t = SumTree::new(n);
        let mut r = Rng::new(11);
        for step in 0..1_000_000u32 {
            let i = r.below(n as u64) as usize;
            let p = match step % 5 {
                0 => 0.0,
                1 => 1e-12 * r.uniform(),
                2 => 1e12 * r.uniform(),
                _ => r.uniform(),
            };
            t.set(i, p);
        }
        for k in 0..10_000 {
            let u = t.total() * (k as f64 + r.uniform()) / 10_000.0;
            let leaf = t.find(u);
            assert!(
                leaf < n && t.get(leaf) > 0.0,
                "leaf {leaf} has priority {}",
                t.get(leaf)
            );
        }
    }

    proptest! {
        #[test]
        fn nodes_are_sums_and_minima_of_leaves(ps in proptest::collection::vec(0.0f64..10.0, 1..70),
                                                 updates in proptest::collection::vec((0usize..70, 0.0f64..10.0), 0..200)) {
            let n = ps.len();
            let mut t = SumTree::new(n);
            let mut leaves = ps.clone();
            for (i, p) in ps.iter().enumerate() { t.set(i, *p); }
            for (i, p) in updates { let i = i % n; t.set(i, p); leaves[i] = p; }
            let total: f64 = leaves.iter().sum();
            prop_assert!((t.total() - total).abs() <= 1e-9 * total.max(1.0));
            let m = leaves.iter().cloned().filter(|&p| p > 0.0).fold(f64::INFINITY, f64::min);
            prop_assert_eq!(t.min_positive(), m);
            if t.total() > 0.0 {
                for k in 0..50 {
                    let u = t.total() * (k as f64) / 50.0;
                    let leaf = t.find(u);
                    prop_assert!(leaves[leaf] > 0.0);
                }
            }
        }
    }
}
