//! How full the env segments are: per env the number of alive rows `min(head, seg_len)`, their
//! total, how many segments are full, and the env that holds the r-th alive row in env order —
//! every query O(1) or O(log num_envs), so that neither a uniform draw nor `len()` costs time
//! proportional to the number of envs (a Fenwick tree, Fenwick 1994, "A new data structure for
//! cumulative frequency tables", over the per-env counts). The storage tells it of every row it
//! claims; it knows nothing of rows' contents.

use crate::error::Result;
use crate::mem::alloc;

#[derive(Debug, Clone)]
pub(crate) struct Fill {
    seg: u64,
    /// Sum over envs of their alive rows.
    alive: u64,
    /// Envs whose segment is full (`head >= seg`).
    full: usize,
    /// Fenwick tree (1-based; entry 0 unused) over the per-env alive rows.
    fen: Box<[u64]>,
    /// The largest power of two <= num_envs (the first step of a descent).
    top: usize,
}

impl Fill {
    /// `num_envs` empty segments of `seg` rows.
    ///
    /// Errors: `InvalidValue` when the tree cannot be allocated.
    pub(crate) fn new(num_envs: usize, seg: usize) -> Result<Self> {
        let top = if num_envs == 0 {
            0
        } else {
            1 << (usize::BITS - 1 - num_envs.leading_zeros())
        };
        Ok(Fill {
            seg: seg as u64,
            alive: 0,
            full: 0,
            fen: alloc(num_envs + 1, 0u64)?,
            top,
        })
    }

    fn envs(&self) -> usize {
        self.fen.len() - 1
    }

    /// Env `e` claims its next row; `head` is its row count before the claim.
    #[inline]
    pub(crate) fn on_claim(&mut self, e: usize, head: u64) {
        if head >= self.seg {
            return;
        }
        self.alive += 1;
        if head + 1 == self.seg {
            self.full += 1;
        }
        let mut i = e + 1;
        while i < self.fen.len() {
            self.fen[i] += 1;
            i += i & i.wrapping_neg();
        }
    }

    /// Recompute everything from the envs' row counts (after a load or a clear).
    pub(crate) fn rebuild(&mut self, heads: impl Iterator<Item = u64>) {
        self.fen.fill(0);
        self.alive = 0;
        self.full = 0;
        for (e, h) in heads.enumerate() {
            let a = h.min(self.seg);
            self.alive += a;
            self.full += usize::from(h >= self.seg);
            self.fen[e + 1] = a;
        }
        // in-place O(N) construction: each node adds itself into its parent
        for i in 1..self.fen.len() {
            let parent = i + (i & i.wrapping_neg());
            if parent < self.fen.len() {
                self.fen[parent] += self.fen[i];
            }
        }
    }

    /// Bytes of the tree.
    pub(crate) fn nbytes(&self) -> usize {
        std::mem::size_of_val(&*self.fen)
    }

    /// Total alive rows of all envs.
    #[inline]
    pub(crate) fn alive(&self) -> u64 {
        self.alive
    }

    /// Whether every segment is full.
    #[inline]
    pub(crate) fn all_full(&self) -> bool {
        self.full == self.envs()
    }

    /// `(e, k)`: alive row `r` (`r < alive()`) counted over the envs in order is env `e`'s k-th
    /// alive row (the first env whose running count exceeds r).
    #[inline]
    pub(crate) fn locate(&self, r: u64) -> (usize, u64) {
        let (mut pos, mut rem, mut step) = (0usize, r, self.top);
        while step > 0 {
            let next = pos + step;
            if next < self.fen.len() && self.fen[next] <= rem {
                pos = next;
                rem -= self.fen[next];
            }
            step >>= 1;
        }
        (pos, rem)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn locate_and_counts_match_a_linear_scan(
            n in 1usize..40,
            seg in 2usize..6,
            claims in proptest::collection::vec(0usize..40, 0..300),
        ) {
            let mut f = Fill::new(n, seg).unwrap(); // ok: test
            let mut heads = vec![0u64; n];
            for c in claims {
                let e = c % n;
                f.on_claim(e, heads[e]);
                heads[e] += 1;
            }
            let mut g = Fill::new(n, seg).unwrap(); // ok: test
            g.rebuild(heads.iter().copied());
            let alive: Vec<u64> = heads.iter().map(|&h| h.min(seg as u64)).collect();
            let total: u64 = alive.iter().sum();
            for fill in [&f, &g] {
                prop_assert_eq!(fill.alive(), total);
                prop_assert_eq!(fill.all_full(), heads.iter().all(|&h| h >= seg as u64));
                for r in 0..total {
                    // the linear scan the draw used before
                    let (mut e, mut k) = (0, r);
                    while k >= alive[e] {
                        k -= alive[e];
                        e += 1;
                    }
                    prop_assert_eq!(fill.locate(r), (e, k));
                }
            }
        }
    }
}
