//! Sum tree and min tree over row priorities, in `f64` (Schaul et al. 2016, "Prioritized
//! Experience Replay", sec. 3.3 and appendix B.2.1), with 8 children per node: the 8 child sums
//! (or minima) of a node fill one 64-byte cache line, so a descent or an update over a 1M-row
//! buffer touches 7 lines per tree instead of 20 (issue 20).
//!
//! The min tree has no leaf level of its own: a leaf's minimum is its priority, or `+inf` for a
//! zero priority, so the minima of level 1 are taken straight from the sum tree's leaf lines.
//! An update thus writes one leaf line (the one the sampling descent has just read) and the min
//! tree only from level 1 up, which at 1M rows is 1 MiB instead of 9.
//!
//! Each internal node is recomputed from its children on every update (never adjusted by a
//! difference), always adding them in the same order, so rounding errors do not accumulate:
//! after any sequence of updates every node equals the sum of its subtree's leaves as computed
//! by the same additions, whatever the order of the updates, and a subtree whose leaves are all
//! zero sums to exactly zero. The descent never enters a zero subtree, so a zero priority leaf
//! (terminal rows, overwritten rows) is never returned.

/// Children per node: one cache line of `f64`.
const K: usize = 8;

/// How many descents of a batch ahead [`SumTree::find_batch`] requests the line it will read.
const DESCENT_AHEAD: usize = 16;

/// One node's children: their sums (or minima), in one cache line.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Line([f64; K]);

/// The entries of a line, each read by its own 8-byte load. An update stores one entry of a
/// line and reads the whole line right after ([`SumTree::fix_up`]); a wider load that covers
/// the stored entry (which the compiler would otherwise merge neighbouring reads into) cannot
/// take its value from the store buffer and waits for the store to reach the cache.
#[inline(always)]
fn entries(l: &Line) -> [f64; K] {
    // SAFETY: each pointer is to an f64 of the line, aligned and initialised; the volatile read
    // only keeps the loads separate.
    std::array::from_fn(|k| unsafe { std::ptr::read_volatile(&l.0[k]) })
}

/// The sum of one line, in a fixed order (pairwise).
#[inline]
fn line_sum(l: &Line) -> f64 {
    let x = entries(l);
    ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7]))
}

/// The smallest positive entry of a leaf line, `+inf` when none is positive: the minimum of the
/// leaves' entries in the min tree, which has no leaf level of its own.
#[inline]
fn line_min_positive(l: &Line) -> f64 {
    let x = entries(l);
    let pos = |k: usize| if x[k] > 0.0 { x[k] } else { f64::INFINITY };
    line_min(&Line(std::array::from_fn(pos)))
}

/// The minimum of one line. Entries are never NaN (priorities are checked finite, empty leaves
/// are `+inf`), so SSE2's `minsd` (which differs from `f64::min` only for NaN) computes it
/// without branches (a data-dependent branch here mispredicts half the time).
#[inline]
fn line_min(l: &Line) -> f64 {
    let x = entries(l);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86-64; only register operations.
    unsafe {
        use std::arch::x86_64::*;
        let lo = |a: __m128d, b: __m128d| _mm_min_sd(a, b);
        let v = |k: usize| _mm_set_sd(x[k]);
        let m = lo(
            lo(lo(v(0), v(1)), lo(v(2), v(3))),
            lo(lo(v(4), v(5)), lo(v(6), v(7))),
        );
        _mm_cvtsd_f64(m)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        x.iter().fold(f64::INFINITY, |m, &v| m.min(v))
    }
}

/// A line's running sums `c_k`, added in pairs: `c_(2i) = s_(2i) + c_(2i-1)` and
/// `c_(2i+1) = (s_(2i) + s_(2i+1)) + c_(2i-1)`. Nondecreasing for non-negative children (float
/// addition is monotone), which is all [`SumTree::pick`] needs; the order is that of the SSE2
/// path of [`running_sums_and_passed`], so both give the same sums everywhere.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
fn running_sums(x: &[f64; K]) -> [f64; K] {
    let mut c = [0.0f64; K];
    let mut carry = 0.0;
    for i in 0..K / 2 {
        let (a, b) = (x[2 * i], x[2 * i + 1]);
        c[2 * i] = a + carry;
        c[2 * i + 1] = (b + a) + carry;
        carry = c[2 * i + 1];
    }
    c
}

/// The line's running sums ([`running_sums`]) and the mask with bit k set where `u >= c_k`,
/// computed two children at a time in SSE2 registers (every x86-64 has SSE2): the sums never
/// go through memory before they are compared, which would stall on store forwarding.
#[inline(always)]
fn running_sums_and_passed(x: &[f64; K], u: f64) -> ([f64; K], u32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86-64; the loads read x[0..8] and the stores write c[0..8], two
    // at a time, in bounds.
    unsafe {
        use std::arch::x86_64::*;
        let (z, uu) = (_mm_setzero_pd(), _mm_set1_pd(u));
        // (x_k, x_k + x_(k+1)) plus the carry in both lanes
        let pair = |k: usize, carry: __m128d| {
            let v = _mm_loadu_pd(x.as_ptr().add(k));
            _mm_add_pd(_mm_add_pd(v, _mm_unpacklo_pd(z, v)), carry)
        };
        let high = |v: __m128d| _mm_unpackhi_pd(v, v);
        let c01 = pair(0, z);
        let c23 = pair(2, high(c01));
        let c45 = pair(4, high(c23));
        let c67 = pair(6, high(c45));
        let m = |v: __m128d| _mm_movemask_pd(_mm_cmple_pd(v, uu)) as u32;
        let passed = m(c01) | (m(c23) << 2) | (m(c45) << 4) | (m(c67) << 6);
        let mut c = [0.0f64; K];
        _mm_storeu_pd(c.as_mut_ptr(), c01);
        _mm_storeu_pd(c.as_mut_ptr().add(2), c23);
        _mm_storeu_pd(c.as_mut_ptr().add(4), c45);
        _mm_storeu_pd(c.as_mut_ptr().add(6), c67);
        (c, passed)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let c = running_sums(x);
        let mut passed = 0u32;
        for (k, &ck) in c.iter().enumerate() {
            passed |= u32::from(u >= ck) << k;
        }
        (c, passed)
    }
}

/// The last child of a line that is positive (0 if none is).
#[cold]
fn last_positive(x: &[f64; K]) -> usize {
    x.iter().rposition(|&v| v > 0.0).unwrap_or(0)
}

/// A K-ary tree over `len` leaves, for sums and minima. Level 0 holds the leaves, K to a line;
/// entry j of level l + 1 is the sum (the minimum of the positive leaves below, `+inf` for none)
/// of line j of level l; the top level is one line, whose sum is the total.
#[derive(Debug, Clone)]
pub struct SumTree {
    len: usize,
    /// First line of each level in `sum`, bottom (leaves) first; the last level has one line.
    level_at: Vec<usize>,
    sum: Box<[Line]>,
    /// Levels 1 and up of the min tree: line `line` of `sum` (at level >= 1) has its minima in
    /// line `line - level_at[1]` here (empty for a tree of one line).
    min: Box<[Line]>,
    total: f64,
    min_all: f64,
    /// Scratch of [`SumTree::set_batch`]: the lines of one level whose entries changed.
    dirty: Vec<usize>,
}

impl SumTree {
    /// Bytes of both trees.
    pub fn nbytes(&self) -> usize {
        std::mem::size_of_val(&*self.sum) + std::mem::size_of_val(&*self.min)
    }

    /// The first line of every level for `len` leaves, the number of lines in all and the
    /// number of lines above the leaves (the min tree's).
    fn layout(len: usize) -> (Vec<usize>, usize, usize) {
        let mut level_at = Vec::new();
        let (mut entries, mut at) = (len.max(1), 0usize);
        loop {
            level_at.push(at);
            let lines = entries.div_ceil(K);
            at += lines;
            if lines == 1 {
                let leaf_lines = level_at.get(1).copied().unwrap_or(at);
                return (level_at, at, at - leaf_lines);
            }
            entries = lines;
        }
    }

    /// A tree over `len` leaves, all priority 0.
    pub fn new(len: usize) -> Self {
        let (level_at, lines, min_lines) = Self::layout(len);
        SumTree {
            len,
            level_at,
            sum: vec![Line([0.0; K]); lines].into_boxed_slice(),
            min: vec![Line([f64::INFINITY; K]); min_lines].into_boxed_slice(),
            total: 0.0,
            min_all: f64::INFINITY,
            dirty: Vec::new(),
        }
    }

    /// As [`SumTree::new`], failing with `InvalidValue` instead of aborting when the memory cannot
    /// be had.
    pub fn try_new(len: usize) -> crate::error::Result<Self> {
        if len.checked_add(K).is_none() {
            return Err(crate::error::CoreError::value(
                "capacity too large for a sum tree",
            ));
        }
        let (level_at, lines, min_lines) = Self::layout(len);
        Ok(SumTree {
            len,
            level_at,
            sum: crate::mem::alloc(lines, Line([0.0; K]))?,
            min: crate::mem::alloc(min_lines, Line([f64::INFINITY; K]))?,
            total: 0.0,
            min_all: f64::INFINITY,
            dirty: Vec::new(),
        })
    }

    /// Set every leaf to 0 in place (no reallocation).
    pub fn reset(&mut self) {
        self.sum.fill(Line([0.0; K]));
        self.min.fill(Line([f64::INFINITY; K]));
        self.total = 0.0;
        self.min_all = f64::INFINITY;
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
        self.sum[i / K].0[i % K]
    }

    /// Set leaf `i` to `p >= 0` (0 removes it from sampling) and recompute its ancestors.
    #[inline]
    pub fn set(&mut self, i: usize, p: f64) {
        self.sum[i / K].0[i % K] = p;
        self.fix_up(i);
    }

    /// The minimum of line `line` of `sum` (at any level), from the min tree or, for a leaf
    /// line, from the leaves themselves.
    #[inline]
    fn min_of_line(&self, line: usize) -> f64 {
        match line.checked_sub(self.leaf_lines()) {
            None => line_min_positive(&self.sum[line]),
            Some(m) => line_min(&self.min[m]),
        }
    }

    /// Lines of level 0 (the leaves).
    #[inline]
    fn leaf_lines(&self) -> usize {
        self.level_at.get(1).copied().unwrap_or(self.sum.len())
    }

    /// Hint the CPU to fetch the lines an update of leaf `i` reads and writes in the two lowest
    /// levels (the levels that do not stay in cache in a large tree): the leaf line and the
    /// level-1 lines of both trees, so that a batch of updates has its misses in flight
    /// together.
    #[inline]
    pub fn prefetch_leaf(&self, i: usize) {
        let leaf = i / K;
        if let Some(l) = self.sum.get(leaf) {
            crate::mem::prefetch(l);
        }
        if let Some(&at) = self.level_at.get(1) {
            let up = at + leaf / K;
            if let (Some(s), Some(m)) = (self.sum.get(up), self.min.get(up - at)) {
                crate::mem::prefetch(s);
                crate::mem::prefetch(m);
            }
        }
    }

    /// Set each leaf `i` of `updates` to its `p >= 0`, in order (a leaf named twice keeps the
    /// later value), and recompute their ancestors: the same tree, bit for bit, as
    /// [`SumTree::set`] of each in turn (every node is recomputed from its final children in the
    /// same order), but a node shared by several leaves is recomputed once, and each level is
    /// done for the whole batch before the next: at 256 updates of a 1M-leaf tree, about 950
    /// line recomputations instead of 1,800.
    pub fn set_batch(&mut self, updates: &[(usize, f64)]) {
        if updates.is_empty() {
            return;
        }
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.clear();
        for &(i, p) in updates {
            self.sum[i / K].0[i % K] = p;
            dirty.push(i / K);
        }
        dirty.sort_unstable();
        dirty.dedup();
        for l in 0..self.level_at.len() - 1 {
            for &j in &dirty {
                self.refresh(l, j);
            }
            // the parents, still sorted: consecutive lines share a parent
            for j in dirty.iter_mut() {
                *j /= K;
            }
            dirty.dedup();
        }
        self.dirty = dirty;
        self.refresh_top();
    }

    /// Recompute entry `j` of level `l + 1` of both trees from line `j` of level `l`.
    #[inline(always)]
    fn refresh(&mut self, l: usize, j: usize) {
        let line = self.level_at[l] + j;
        let (s, m) = (line_sum(&self.sum[line]), self.min_of_line(line));
        let up = self.level_at[l + 1] + j / K;
        self.sum[up].0[j % K] = s;
        self.min[up - self.leaf_lines()].0[j % K] = m;
    }

    /// Recompute the total and the smallest positive leaf from the top line.
    #[inline(always)]
    fn refresh_top(&mut self) {
        let top = self.level_at[self.level_at.len() - 1];
        self.total = line_sum(&self.sum[top]);
        self.min_all = self.min_of_line(top);
    }

    /// Recompute the ancestors of leaf `i` from their children.
    #[inline]
    fn fix_up(&mut self, i: usize) {
        let mut j = i / K; // line of level l holding the entry
        for l in 0..self.level_at.len() - 1 {
            self.refresh(l, j);
            j /= K;
        }
        self.refresh_top();
    }

    /// Sum of all leaves.
    #[inline]
    pub fn total(&self) -> f64 {
        self.total
    }

    /// Smallest positive leaf (`+inf` when all leaves are 0).
    #[inline]
    pub fn min_positive(&self) -> f64 {
        self.min_all
    }

    /// Sum of the leaves `lo..hi` (`hi <= len`; 0 for an empty range), from at most `2 (K - 1)`
    /// entries per level: O(K log_K len), never a walk over the leaves.
    pub fn range_sum(&self, mut lo: usize, mut hi: usize) -> f64 {
        let hi_max = self.len;
        hi = hi.min(hi_max);
        let mut acc = 0.0;
        for &at in &self.level_at {
            if lo >= hi {
                return acc;
            }
            let entry = |i: usize| self.sum[at + i / K].0[i % K];
            while lo < hi && !lo.is_multiple_of(K) {
                acc += entry(lo);
                lo += 1;
            }
            while lo < hi && !hi.is_multiple_of(K) {
                hi -= 1;
                acc += entry(hi);
            }
            lo /= K;
            hi /= K;
        }
        if lo < hi {
            acc += self.total; // the whole top line
        }
        acc
    }

    /// Within one line (whose sum is positive), the child where the prefix sum passes `u`
    /// (`u >= 0`), and `u` less the children before it. With the line's running sums `c_k`
    /// ([`running_sums`]: `c_k - c_(k-1)` is `s_k` up to rounding, and the `c_k` are
    /// nondecreasing, as float addition of non-negative numbers is), the
    /// `k` with `u >= c_k` are a prefix `0 .. run` and the child is `run`: a zero child
    /// `s_k = 0` has `c_k = c_(k-1) <= u` whenever the run reaches it, so it is passed over, and
    /// `s_run > 0` (for `run = 0`, `s_0 = c_0 > u >= 0`). Only when rounding carries `u` past
    /// the line's sum (`run = K`) is the child the last positive one. So a zero child is never
    /// taken, and the residual `u - c_(j-1)` is >= 0. The comparisons are independent of each
    /// other and free of data-dependent branches (a descent's children are random), so
    /// descents of a batch overlap.
    #[inline]
    fn pick(line: &Line, u: f64) -> (usize, f64) {
        let x = &line.0;
        let (c, passed) = running_sums_and_passed(x, u);
        let run = passed.trailing_ones() as usize;
        let j = if run < K { run } else { last_positive(x) };
        let before = if j == 0 { 0.0 } else { c[j - 1] };
        (j, u - before)
    }

    /// The leaf where the prefix sum passes `u` (`0 <= u < total`). Never returns a zero leaf
    /// while `total() > 0`, whatever the rounding of `u`.
    #[inline]
    pub fn find(&self, mut u: f64) -> usize {
        let mut e = 0; // entry of the level above: the line to descend into
        for l in (0..self.level_at.len()).rev() {
            let (j, rest) = Self::pick(&self.sum[self.level_at[l] + e], u);
            u = rest;
            e = e * K + j;
        }
        e
    }

    /// [`SumTree::find`] for a whole batch, descending all of them one level at a time: the
    /// loads of one level are independent, and each is requested (prefetched) `DESCENT_AHEAD`
    /// descents before it is read, so their cache misses overlap instead of queuing up behind
    /// each other (requesting a whole level at once overflows the miss buffers, which then drop
    /// requests). `us` is consumed (left holding the residual masses); `out[i]` receives the
    /// leaf of `us[i]`, and `on_leaf(out[i])` is called as soon as that descent has ended (the
    /// sampler requests the drawn row's records there).
    pub fn find_batch(&self, us: &mut [f64], out: &mut [usize], on_leaf: impl Fn(usize)) {
        debug_assert_eq!(us.len(), out.len());
        out.iter_mut().for_each(|x| *x = 0);
        let n = out.len();
        for l in (0..self.level_at.len()).rev() {
            let at = self.level_at[l];
            let request = |e: usize| {
                if let Some(line) = self.sum.get(at + e) {
                    crate::mem::prefetch(line);
                }
            };
            out.iter().take(DESCENT_AHEAD).for_each(|&e| request(e));
            for i in 0..n {
                if let Some(&ahead) = out.get(i + DESCENT_AHEAD) {
                    request(ahead);
                }
                let (j, rest) = Self::pick(&self.sum[at + out[i]], us[i]);
                us[i] = rest;
                out[i] = out[i] * K + j;
                if l == 0 {
                    on_leaf(out[i]);
                }
            }
        }
    }

    /// Recompute every internal node from the leaves (used after bulk loads).
    pub fn rebuild(&mut self) {
        for l in 0..self.level_at.len() - 1 {
            for j in 0..self.level_at[l + 1] - self.level_at[l] {
                self.refresh(l, j);
            }
        }
        self.refresh_top();
    }

    /// Set every leaf from a slice (length `len`) and rebuild.
    pub fn load_leaves(&mut self, leaves: &[f64]) {
        for (i, &p) in leaves.iter().enumerate() {
            self.sum[i / K].0[i % K] = p;
        }
        self.rebuild();
    }

    /// The leaves (length `len`).
    pub fn leaves(&self) -> &[f64] {
        let lines = &self.sum[..self.leaf_lines()];
        // SAFETY: `Line` is `repr(C)` over `[f64; K]` with size 64 = K * 8 (no padding), so the
        // leaf lines are `lines.len() * K` consecutive f64s; `len` of them are leaves.
        let flat =
            unsafe { std::slice::from_raw_parts(lines.as_ptr() as *const f64, lines.len() * K) };
        &flat[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use proptest::prelude::*;

    /// The binary tree this one replaced (issue 20), kept as the reference of the proptests.
    /// A complete binary tree with `size` (a power of two) leaves, for sums and minima.
    #[derive(Debug, Clone)]
    pub struct BinaryTree {
        size: usize,
        sum: Box<[f64]>,
        min: Box<[f64]>,
    }

    impl BinaryTree {
        /// A tree over `len` leaves, all priority 0.
        pub fn new(len: usize) -> Self {
            let size = len.max(1).next_power_of_two();
            BinaryTree {
                size,
                sum: vec![0.0; 2 * size].into_boxed_slice(),
                min: vec![f64::INFINITY; 2 * size].into_boxed_slice(),
            }
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
    }

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
        t.find_batch(&mut us, &mut got, |_| ());
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
        /// Against the binary tree it replaced: the same leaves and minimum, the same total up to
        /// rounding, every drawn leaf positive, the same leaf wherever `u` is not within rounding
        /// of a prefix-sum boundary, and a tree rebuilt from its leaves bitwise equal to the one
        /// built by updates in any order (no drift).
        #[test]
        fn eight_ary_tree_agrees_with_the_binary_tree(
            ps in proptest::collection::vec(prop_oneof![Just(0.0f64), 1e-9f64..1e-6, 0.0f64..10.0, 1e6f64..1e9], 1..700),
            updates in proptest::collection::vec((0usize..700, prop_oneof![Just(0.0f64), 0.0f64..10.0]), 0..300),
            us in proptest::collection::vec(0.0f64..1.0, 1..64),
        ) {
            let n = ps.len();
            let (mut t, mut b) = (SumTree::new(n), BinaryTree::new(n));
            let mut leaves = ps.clone();
            for (i, p) in ps.iter().enumerate() { t.set(i, *p); b.set(i, *p); }
            for (i, p) in updates { let i = i % n; t.set(i, p); b.set(i, p); leaves[i] = p; }
            prop_assert_eq!(t.leaves(), &leaves[..]);
            for i in 0..n { prop_assert_eq!(t.get(i), b.get(i)); }
            prop_assert_eq!(t.min_positive(), b.min_positive());
            prop_assert!((t.total() - b.total()).abs() <= 1e-12 * b.total().max(1e-300));
            let mut r = SumTree::new(n);
            r.load_leaves(&leaves);
            prop_assert_eq!(r.total().to_bits(), t.total().to_bits());
            prop_assert_eq!(r.min_positive(), t.min_positive());
            let mut rev = SumTree::new(n);
            for i in (0..n).rev() { rev.set(i, leaves[i]); }
            prop_assert_eq!(rev.total().to_bits(), t.total().to_bits());
            if t.total() > 0.0 {
                let prefix: Vec<f64> = leaves.iter().scan(0.0, |a, &p| { *a += p; Some(*a) }).collect();
                let mut batch: Vec<f64> = us.iter().map(|&x| x * t.total()).collect();
                let mut got = vec![0; batch.len()];
                let want: Vec<usize> = batch.iter().map(|&u| t.find(u)).collect();
                for &u in &batch {
                    let leaf = t.find(u);
                    prop_assert!(leaves[leaf] > 0.0, "zero leaf {} drawn", leaf);
                    let near = prefix.iter().any(|&c| (c - u).abs() <= 1e-9 * t.total());
                    if !near { prop_assert_eq!(leaf, b.find(u)); }
                }
                t.find_batch(&mut batch, &mut got, |_| ());
                prop_assert_eq!(got, want);
                for u in [t.total(), t.total() * 2.0, f64::MAX] {
                    prop_assert!(leaves[t.find(u)] > 0.0);
                }
            }
        }
    }

    proptest! {
        /// A batch of updates gives the tree that setting them one at a time gives, bit for
        /// bit, in every node (repeated leaves included: the later value wins).
        #[test]
        fn batched_updates_equal_single_updates(
            n in 1usize..3000,
            init in proptest::collection::vec(prop_oneof![Just(0.0f64), 0.0f64..10.0, 1e-9f64..1e-6], 1..200),
            batch in proptest::collection::vec((0usize..3000, prop_oneof![Just(0.0f64), 0.0f64..10.0, 1e3f64..1e9]), 0..300),
        ) {
            let (mut one, mut many) = (SumTree::new(n), SumTree::new(n));
            for (k, &p) in init.iter().enumerate() {
                let i = (k * 7919) % n;
                one.set(i, p);
                many.set(i, p);
            }
            let batch: Vec<(usize, f64)> = batch.into_iter().map(|(i, p)| (i % n, p)).collect();
            for &(i, p) in &batch {
                one.set(i, p);
            }
            many.set_batch(&batch);
            let bits = |t: &SumTree| (t.sum.iter().chain(t.min.iter()).flat_map(|l| l.0).map(f64::to_bits).collect::<Vec<_>>(), t.total.to_bits(), t.min_all.to_bits());
            prop_assert_eq!(bits(&one), bits(&many));
        }
    }

    proptest! {
        /// The SSE2 running sums are the portable ones, bit for bit, and the mask marks exactly
        /// the sums `u` passes, a prefix of the line; `pick` never takes a zero child.
        #[test]
        fn running_sums_and_picks_agree_with_the_portable_order(
            xs in proptest::collection::vec(prop_oneof![Just(0.0f64), 0.0f64..1e3, 1e-300f64..1e-290], K),
            frac in 0.0f64..1.0001,
        ) {
            let x: [f64; K] = xs.clone().try_into().unwrap(); // ok: test
            let total: f64 = running_sums(&x)[K - 1];
            let u = frac * total;
            let (c, passed) = running_sums_and_passed(&x, u);
            prop_assert_eq!(c.map(f64::to_bits), running_sums(&x).map(f64::to_bits));
            for (k, &ck) in c.iter().enumerate() {
                prop_assert_eq!(passed >> k & 1 == 1, u >= ck);
            }
            prop_assert_eq!((passed + 1) & passed, 0, "not a prefix: {:b}", passed);
            if total > 0.0 {
                let (j, rest) = SumTree::pick(&Line(x), u);
                prop_assert!(x[j] > 0.0 && rest >= 0.0, "j={} rest={}", j, rest);
            }
        }
    }

    proptest! {
        #[test]
        fn range_sums_equal_the_sum_of_the_leaves(
            ps in proptest::collection::vec(prop_oneof![Just(0.0f64), 0.0f64..10.0], 1..1200),
            ranges in proptest::collection::vec((0usize..1300, 0usize..1300), 1..40),
        ) {
            let mut t = SumTree::new(ps.len());
            t.load_leaves(&ps);
            for (a, b) in ranges {
                let (lo, hi) = (a.min(b).min(ps.len()), a.max(b).min(ps.len()));
                let want: f64 = ps[lo..hi].iter().sum();
                let got = t.range_sum(lo, hi);
                prop_assert!((got - want).abs() <= 1e-9 * (1.0 + want), "{lo}..{hi}: {got} vs {want}");
            }
            prop_assert!((t.range_sum(0, ps.len()) - t.total()).abs() <= 1e-9 * (1.0 + t.total()));
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
