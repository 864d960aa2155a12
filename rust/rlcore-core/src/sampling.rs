//! Drawing rows, n-step windows and the gather into caller-owned output arrays
//! (DESIGN.md, "Returns, relabeling, priorities").

use crate::error::{CoreError, Result};
use crate::gae::check_unit;
use crate::storage::{copy_row, GoalStrategy, ReplayCore, F_TRANSITION};

/// The largest batch `sample` draws (2^31 − 1 rows; larger ones cannot be allocated usefully).
pub const MAX_BATCH: usize = (1 << 31) - 1;

/// How many samples ahead the gather prefetches rows (software pipelining: enough misses in
/// flight to hide memory latency, few enough not to overflow the miss buffers).
const PREFETCH_AHEAD: usize = 12;

/// Caller-owned output arrays for one batch of B samples (C-contiguous, row-major).
pub struct BatchOut<'a> {
    /// One slice per observation column, `B * item_bytes` each.
    pub obs: Vec<&'a mut [u8]>,
    pub obs_next: Vec<&'a mut [u8]>,
    /// `act` then the extras, `B * item_bytes` each.
    pub step: Vec<&'a mut [u8]>,
    pub rew: &'a mut [f32],
    pub terminated: &'a mut [u8],
    pub truncated: &'a mut [u8],
    pub discount: &'a mut [f32],
    pub indices: &'a mut [i64],
    /// Importance weights; required for prioritized buffers, ignored otherwise.
    pub weights: Option<&'a mut [f32]>,
}

/// A vectorised reward function for HER relabeling: `(achieved_goal bytes [M, G], desired_goal
/// bytes [M, G], M) -> M rewards`. Called once per sample call.
pub type RewardFn<'f> = dyn FnMut(&[u8], &[u8], usize) -> Result<Vec<f32>> + 'f;

/// Where one sample reads from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Plan {
    pub env: usize,
    /// Absolute index of step t.
    pub t: u64,
    /// First surviving row and terminal (or open) row of t's episode, absolute.
    pub start: u64,
    pub end: u64,
    /// Window length m.
    pub m: u64,
    /// Physical rows of t, t+m (bootstrap observation) and t+m-1 (window end).
    pub p: usize,
    pub q: usize,
    pub last: usize,
    /// Physical row whose achieved goal replaces the desired goal (HER), or `usize::MAX`.
    pub goal_row: usize,
}

impl ReplayCore {
    /// Absolute index of physical row `p`, or `None` if it was never written.
    #[inline]
    pub(crate) fn abs_of(&self, p: usize) -> Option<(usize, u64)> {
        let e = self.env_of(p);
        let local = (p - e * self.seg) as u64;
        let h = self.envs[e].head;
        if h == 0 {
            return None;
        }
        let seg = self.seg as u64;
        let newest = h - 1;
        let diff = (newest % seg + seg - local) % seg;
        let alive = h.min(seg);
        if diff >= alive {
            return None;
        }
        Some((e, newest - diff))
    }

    /// Oldest alive absolute row of env `e`.
    #[inline]
    pub(crate) fn alive_lo(&self, e: usize) -> u64 {
        self.envs[e].head.saturating_sub(self.seg as u64)
    }

    /// (first surviving row, terminal or open row) of the episode holding alive row `abs`.
    #[inline]
    pub(crate) fn bounds_abs(&self, e: usize, abs: u64) -> (u64, u64) {
        let p = self.phys(e, abs);
        let ep = self.ep_id(p);
        let rec = self.rec(e, ep);
        let start = self.ep_start[rec].max(self.alive_lo(e));
        let end = match self.ep_end[rec] {
            crate::storage::OPEN => self.envs[e].head - 1,
            x => x,
        };
        (start, end)
    }

    /// The checks [`ReplayCore::sample`] makes of its scalar arguments and the buffer's state,
    /// for a front end to make before it allocates the output arrays.
    ///
    /// Errors: `InvalidValue` for `batch_size` outside `[1, MAX_BATCH]`, `n_step < 1` or `gamma`
    /// outside `[0, 1]`; `Empty` when no transition is stored.
    pub fn check_sample_args(&self, b: usize, n_step: usize, gamma: f64) -> Result<()> {
        if !(1..=MAX_BATCH).contains(&b) {
            return Err(CoreError::value(format!(
                "batch_size must be in [1, {MAX_BATCH}], got {b}"
            )));
        }
        if n_step < 1 {
            return Err(CoreError::value(format!(
                "n_step must be >= 1, got {n_step}"
            )));
        }
        check_unit("gamma", gamma)?;
        if self.is_empty() {
            return Err(CoreError::empty(
                "cannot sample: the buffer holds no transition yet; add some steps first",
            ));
        }
        Ok(())
    }

    fn check_out(&self, b: usize, out: &BatchOut<'_>) -> Result<()> {
        let bad = |what: &str, got: usize, want: usize| -> Result<()> {
            if got == want {
                Ok(())
            } else {
                Err(CoreError::shape(format!(
                    "out.{what}: expected {want} bytes/elements for batch_size={b}, got {got}"
                )))
            }
        };
        if out.obs.len() != self.obs_cols.len() || out.obs_next.len() != self.obs_cols.len() {
            return Err(CoreError::shape("out: wrong number of observation arrays"));
        }
        if out.step.len() != self.step_cols.len() {
            return Err(CoreError::shape("out: wrong number of act/extra arrays"));
        }
        for (c, (o, on)) in self
            .obs_cols
            .iter()
            .zip(out.obs.iter().zip(out.obs_next.iter()))
        {
            bad("obs", o.len(), b * c.item_bytes)?;
            bad("obs_next", on.len(), b * c.item_bytes)?;
        }
        for (c, s) in self.step_cols.iter().zip(out.step.iter()) {
            bad(&c.spec.name, s.len(), b * c.item_bytes)?;
        }
        bad("rew", out.rew.len(), b)?;
        bad("terminated", out.terminated.len(), b)?;
        bad("truncated", out.truncated.len(), b)?;
        bad("discount", out.discount.len(), b)?;
        bad("indices", out.indices.len(), b)?;
        if self.per.is_some() {
            match &out.weights {
                Some(w) => bad("weights", w.len(), b)?,
                None => {
                    return Err(CoreError::shape(
                        "out.weights is required for prioritized buffers",
                    ))
                }
            }
        }
        Ok(())
    }

    /// Next physical row in the same env segment (ring order).
    #[inline]
    pub(crate) fn next_row(&self, p: usize) -> usize {
        let end = (self.env_of(p) + 1) * self.seg;
        if p + 1 == end {
            p + 1 - self.seg
        } else {
            p + 1
        }
    }

    /// Hint the CPU to fetch the records of rows p and p + 1 (at most four cache lines).
    #[inline]
    fn prefetch(&self, p: usize) {
        self.prefetch_rows(p, 2, 256);
    }

    /// Hint the CPU to fetch the records of rows p .. p + rows (at most `cap` bytes).
    #[inline]
    fn prefetch_rows(&self, p: usize, rows: usize, cap: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            let bytes = self.bytes();
            let start = p * self.rec;
            let stop = ((p + rows) * self.rec).min(bytes.len()).min(start + cap);
            let mut o = start;
            while o < stop {
                // SAFETY: prefetch is a hint and never faults; the address is inside `bytes`.
                unsafe {
                    std::arch::x86_64::_mm_prefetch(
                        bytes.as_ptr().add(o) as *const i8,
                        std::arch::x86_64::_MM_HINT_T0,
                    );
                }
                o += 64;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (p, rows, cap);
    }

    /// A uniformly drawn alive row (not necessarily a transition).
    #[inline]
    fn candidate(&mut self, all_full: bool, total: u64) -> usize {
        let r = self.rng.below(total);
        if all_full {
            return r as usize;
        }
        let seg = self.seg as u64;
        let mut r = r;
        let mut e = 0;
        loop {
            let alive = self.envs[e].head.min(seg);
            if r < alive {
                break;
            }
            r -= alive;
            e += 1;
        }
        self.phys(e, self.alive_lo(e) + r)
    }

    /// Draw B rows uniformly among alive transitions: uniform alive rows, rejecting the
    /// non-transition ones (at least about half of all alive rows are transitions, so this
    /// takes < 2 draws per sample on average). All first candidates are prefetched before any
    /// is read, so the cache misses of a batch overlap.
    fn draw_uniform(&mut self, b: usize) {
        let seg = self.seg as u64;
        let all_full = self.envs.iter().all(|s| s.head >= seg);
        let total: u64 = self.envs.iter().map(|s| s.head.min(seg)).sum();
        for i in 0..b {
            self.plan[i].p = self.candidate(all_full, total);
        }
        for i in 0..b.min(PREFETCH_AHEAD) {
            self.prefetch(self.plan[i].p);
        }
        for i in 0..b {
            if i + PREFETCH_AHEAD < b {
                self.prefetch(self.plan[i + PREFETCH_AHEAD].p);
            }
            let mut p = self.plan[i].p;
            while self.flag(p) & F_TRANSITION == 0 {
                p = self.candidate(all_full, total);
            }
            self.plan[i].p = p;
        }
    }

    /// Stratified prioritized draw: one sample from each of B equal slices of the priority mass
    /// (Schaul et al. 2016, appendix B.2.1).
    fn draw_prioritized(&mut self, b: usize) {
        let Some(per) = self.per.as_ref() else { return };
        let total = per.tree.total();
        let seg_mass = total / b as f64;
        let mut us = std::mem::take(&mut self.scratch_f64);
        let mut rows = std::mem::take(&mut self.scratch_rows);
        us.clear();
        rows.clear();
        for i in 0..b {
            us.push(((i as f64 + self.rng.uniform()) * seg_mass).min(total));
        }
        rows.resize(b, 0);
        if let Some(per) = self.per.as_ref() {
            per.tree.find_batch(&mut us, &mut rows);
        }
        for (pl, &p) in self.plan.iter_mut().zip(rows.iter()) {
            pl.p = p;
        }
        self.scratch_f64 = us;
        self.scratch_rows = rows;
    }

    /// Fill each plan's window from its row p: m = min(n, first k >= 1 whose row t + k is not a
    /// transition). Row t + k − 1 being a transition means row t + k holds its next observation
    /// in the same episode: another transition, the terminal row, or the open row of a running
    /// episode. So the window stops exactly at the episode end or the newest stored step,
    /// reading only adjacent records. HER also needs the episode bounds.
    fn plan_windows(&mut self, b: usize, n_step: usize, need_bounds: bool) -> Result<()> {
        for i in 0..b {
            let p = self.plan[i].p;
            let mut last = p;
            let mut q = self.next_row(p);
            let mut m = 1u64;
            while (m as usize) < n_step && self.flag(q) & F_TRANSITION != 0 {
                last = q;
                q = self.next_row(q);
                m += 1;
            }
            let env = self.env_of(p);
            let pl = &mut self.plan[i];
            pl.env = env;
            pl.m = m;
            pl.q = q;
            pl.last = last;
            pl.goal_row = usize::MAX;
            if need_bounds {
                let (e, t) = self.abs_of(p).ok_or_else(internal_row_error)?;
                let (start, end) = self.bounds_abs(e, t);
                let pl = &mut self.plan[i];
                pl.t = t;
                pl.start = start;
                pl.end = end;
            }
        }
        Ok(())
    }

    /// Sample `b` transitions into `out` (see `BatchOut`). For HER buffers with a user reward,
    /// `reward_fn` is called once with every relabeled (achieved, desired) pair.
    ///
    /// Errors: `InvalidValue` (batch_size, n_step, gamma), `Empty`, `Shape` (out arrays),
    /// `Usage` (HER without a reward), or the reward function's error. On error the buffer,
    /// its RNG included, is unchanged.
    pub fn sample(
        &mut self,
        b: usize,
        n_step: usize,
        gamma: f64,
        out: &mut BatchOut<'_>,
        reward_fn: Option<&mut RewardFn<'_>>,
    ) -> Result<()> {
        self.check_sample_args(b, n_step, gamma)?;
        self.check_out(b, out)?;
        // a window of m steps spans m + 1 rows of one segment, so m < seg: any larger n_step
        // gives the same windows (and the prefetch arithmetic stays small)
        let n_step = n_step.min(self.seg);
        if let Some(h) = &self.her {
            if h.distance_threshold.is_none() && reward_fn.is_none() {
                return Err(CoreError::usage(
                    "HER needs a reward: pass compute_reward=... or distance_threshold=...",
                ));
            }
        }
        let rng_before = self.rng.clone();
        let res = self.sample_inner(b, n_step, gamma, out, reward_fn);
        if res.is_err() {
            self.rng = rng_before;
        }
        res
    }

    fn sample_inner(
        &mut self,
        b: usize,
        n_step: usize,
        gamma: f64,
        out: &mut BatchOut<'_>,
        reward_fn: Option<&mut RewardFn<'_>>,
    ) -> Result<()> {
        if self.per.is_none() && self.her.is_none() {
            self.sample_fused(b, n_step, gamma, out);
            return Ok(());
        }
        if self.plan.len() < b {
            self.plan.resize(b, Plan::default());
        }
        if self.per.is_some() {
            self.draw_prioritized(b);
        } else {
            self.draw_uniform(b);
        }
        let her = self.her.is_some();
        self.plan_windows(b, n_step, her)?;
        if her {
            self.plan_goals(b);
        }
        self.gather(b, gamma, out);
        if her {
            self.relabel(b, gamma, out, reward_fn)?;
        }
        // sampling hands out the drawn rows, whose record already names the transition they
        // hold (set when the add that wrote it handed it out): nothing to write
        if let (Some(per), Some(w)) = (self.per.as_ref(), out.weights.as_deref_mut()) {
            let pmin = per.tree.min_positive();
            for (wi, pl) in w.iter_mut().zip(&self.plan[..b]) {
                debug_assert_eq!(
                    self.abs_of(pl.p).map(|(_, a)| a),
                    Some(per.handed_out[pl.p])
                );
                *wi = is_weight(per.tree.get(pl.p), pmin, per.beta);
            }
        }
        Ok(())
    }

    /// The common case (uniform, no priorities, no relabeling) in one pass: draw, check, walk
    /// the n-step window (as `plan_windows`), gather, with the records of the next
    /// `PREFETCH_AHEAD` candidates and their windows already in flight.
    fn sample_fused(&mut self, b: usize, n_step: usize, gamma: f64, out: &mut BatchOut<'_>) {
        let seg = self.seg as u64;
        let all_full = self.envs.iter().all(|s| s.head >= seg);
        let total: u64 = self.envs.iter().map(|s| s.head.min(seg)).sum();
        // a window reads rows t .. t + n (its next observation included)
        let (ahead_rows, ahead_bytes) = (n_step + 1, 64 * (2 + (n_step + 1) * self.rec / 64));
        let mut ring = [0usize; PREFETCH_AHEAD];
        for slot in ring.iter_mut().take(b.min(PREFETCH_AHEAD)) {
            *slot = self.candidate(all_full, total);
            self.prefetch_rows(*slot, ahead_rows, ahead_bytes);
        }
        for i in 0..b {
            let slot = i % PREFETCH_AHEAD;
            let mut p = ring[slot];
            if i + PREFETCH_AHEAD < b {
                let c = self.candidate(all_full, total);
                self.prefetch_rows(c, ahead_rows, ahead_bytes);
                ring[slot] = c;
            }
            while self.flag(p) & F_TRANSITION == 0 {
                p = self.candidate(all_full, total);
            }
            // the window: m = min(n, first k >= 1 whose row t + k is not a transition)
            let mut last = p;
            let mut q = self.next_row(p);
            let mut acc = self.rew(p) as f64;
            let mut g = gamma;
            let mut m = 1;
            while m < n_step && self.flag(q) & F_TRANSITION != 0 {
                acc += g * self.rew(q) as f64;
                g *= gamma;
                last = q;
                q = self.next_row(q);
                m += 1;
            }
            for (k, c) in self.obs_cols.iter().enumerate() {
                let ib = c.item_bytes;
                copy_row(&mut out.obs[k][i * ib..(i + 1) * ib], self.cell(c, p));
                copy_row(&mut out.obs_next[k][i * ib..(i + 1) * ib], self.cell(c, q));
            }
            for (k, c) in self.step_cols.iter().enumerate() {
                let ib = c.item_bytes;
                copy_row(&mut out.step[k][i * ib..(i + 1) * ib], self.cell(c, p));
            }
            let term = self.term(last);
            out.rew[i] = acc as f32;
            out.terminated[i] = term;
            out.truncated[i] = self.trunc(last);
            out.discount[i] = (g * (1 - term) as f64) as f32;
            out.indices[i] = p as i64;
        }
    }

    fn gather(&self, b: usize, gamma: f64, out: &mut BatchOut<'_>) {
        let plan = &self.plan[..b];
        for pl in plan.iter().take(PREFETCH_AHEAD) {
            self.prefetch(pl.p);
        }
        for (i, pl) in plan.iter().enumerate() {
            if let Some(ahead) = plan.get(i + PREFETCH_AHEAD) {
                self.prefetch(ahead.p);
            }
            for (k, c) in self.obs_cols.iter().enumerate() {
                let ib = c.item_bytes;
                copy_row(&mut out.obs[k][i * ib..(i + 1) * ib], self.cell(c, pl.p));
                copy_row(
                    &mut out.obs_next[k][i * ib..(i + 1) * ib],
                    self.cell(c, pl.q),
                );
            }
            for (k, c) in self.step_cols.iter().enumerate() {
                let ib = c.item_bytes;
                copy_row(&mut out.step[k][i * ib..(i + 1) * ib], self.cell(c, pl.p));
            }
            let (rew, g_m) = if pl.m == 1 {
                (self.rew(pl.p) as f64, gamma)
            } else {
                let mut acc = 0.0f64;
                let mut g = 1.0f64;
                let mut r = pl.p;
                for _ in 0..pl.m {
                    acc += g * self.rew(r) as f64;
                    g *= gamma;
                    r = self.next_row(r);
                }
                (acc, g)
            };
            let term = self.term(pl.last);
            out.rew[i] = rew as f32;
            out.terminated[i] = term;
            out.truncated[i] = self.trunc(pl.last);
            out.discount[i] = (g_m * (1 - term) as f64) as f32;
            out.indices[i] = pl.p as i64;
        }
    }

    /// Decide, per sample independently, whether and to which step's achieved goal to relabel.
    fn plan_goals(&mut self, b: usize) {
        let Some(cfg) = self.her.as_ref() else { return };
        let prob = cfg.future_k / (cfg.future_k + 1.0);
        let strategy = cfg.strategy;
        for i in 0..b {
            if self.rng.uniform() >= prob {
                continue;
            }
            let pl = self.plan[i];
            let tp = match strategy {
                GoalStrategy::Future => pl.t + self.rng.below(pl.end - pl.t),
                GoalStrategy::Final => pl.end - 1,
                GoalStrategy::Episode => pl.start + self.rng.below(pl.end - pl.start),
            };
            self.plan[i].goal_row = self.phys(pl.env, tp + 1);
        }
    }

    /// Replace desired goals of relabeled samples and recompute their (n-step) rewards.
    fn relabel(
        &self,
        b: usize,
        gamma: f64,
        out: &mut BatchOut<'_>,
        reward_fn: Option<&mut RewardFn<'_>>,
    ) -> Result<()> {
        let (Some(cfg), Some((ag, dg))) = (self.her.as_ref(), self.her_cols) else {
            return Ok(());
        };
        let plan = &self.plan[..b];
        let ag_col = &self.obs_cols[ag];
        let gb = ag_col.item_bytes;
        for (i, pl) in plan.iter().enumerate() {
            if pl.goal_row != usize::MAX {
                let g = self.cell(ag_col, pl.goal_row);
                out.obs[dg][i * gb..(i + 1) * gb].copy_from_slice(g);
                out.obs_next[dg][i * gb..(i + 1) * gb].copy_from_slice(g);
            }
        }
        let window_rows = |pl: &Plan| {
            let first = self.next_row(pl.p);
            (0..pl.m).scan(first, move |r, _| {
                let cur = *r;
                *r = self.next_row(cur);
                Some(cur)
            })
        };
        match cfg.distance_threshold {
            Some(eps) => {
                let dt = ag_col.spec.dtype;
                for (i, pl) in plan.iter().enumerate() {
                    if pl.goal_row == usize::MAX {
                        continue;
                    }
                    let g = self.cell(ag_col, pl.goal_row);
                    let mut acc = 0.0f64;
                    let mut disc = 1.0f64;
                    for r in window_rows(pl) {
                        let d = goal_distance(dt, self.cell(ag_col, r), g);
                        acc += disc * if d > eps { -1.0 } else { 0.0 };
                        disc *= gamma;
                    }
                    out.rew[i] = acc as f32;
                }
            }
            None => {
                let Some(f) = reward_fn else {
                    return Err(CoreError::usage("HER needs a reward function"));
                };
                let m_total: usize = plan
                    .iter()
                    .filter(|pl| pl.goal_row != usize::MAX)
                    .map(|pl| pl.m as usize)
                    .sum();
                if m_total == 0 {
                    return Ok(());
                }
                let mut ags = Vec::with_capacity(m_total * gb);
                let mut gs = Vec::with_capacity(m_total * gb);
                for pl in plan.iter().filter(|pl| pl.goal_row != usize::MAX) {
                    let g = self.cell(ag_col, pl.goal_row);
                    for r in window_rows(pl) {
                        ags.extend_from_slice(self.cell(ag_col, r));
                        gs.extend_from_slice(g);
                    }
                }
                let rewards = f(&ags, &gs, m_total)?;
                if rewards.len() != m_total {
                    return Err(CoreError::shape(format!(
                        "compute_reward returned {} rewards for {m_total} goal pairs; it must \
                         return one reward per row, shape [M]",
                        rewards.len()
                    )));
                }
                if let Some(bad) = rewards.iter().find(|r| !r.is_finite()) {
                    return Err(CoreError::value(format!(
                        "compute_reward returned a non-finite reward ({bad})"
                    )));
                }
                let mut k0 = 0usize;
                for (i, pl) in plan.iter().enumerate() {
                    if pl.goal_row == usize::MAX {
                        continue;
                    }
                    let mut acc = 0.0f64;
                    let mut disc = 1.0f64;
                    for k in 0..pl.m as usize {
                        acc += disc * rewards[k0 + k] as f64;
                        disc *= gamma;
                    }
                    k0 += pl.m as usize;
                    out.rew[i] = acc as f32;
                }
            }
        }
        Ok(())
    }

    /// The plans of the last sample call (for tests and diagnostics).
    pub fn last_plan(&self, b: usize) -> &[Plan] {
        &self.plan[..b.min(self.plan.len())]
    }
}

/// The importance-sampling weight `(N·P(i))^-β / max_j (N·P(j))^-β = (p_i / p_min)^-β`
/// (Schaul et al. 2016, sec. 3.4; `N·P(i) = N·p_i / total`, and the maximum over j is at the
/// smallest priority), for `p_min <= p_i`, both positive and finite. The ratio is taken
/// directly, never through `p / total` (which underflows for tiny priorities beside a large
/// total); where the ratio itself overflows (priorities more than ~1e308 apart) the weight is
/// computed from logarithms. Weights below float32's smallest normal number 2^-126 are returned
/// as 2^-126, so every weight lies in [2^-126, 1]: positive, finite and never subnormal.
#[inline]
fn is_weight(p_i: f64, p_min: f64, beta: f64) -> f32 {
    let ratio = p_i / p_min;
    let w = if ratio.is_finite() {
        ratio.powf(-beta)
    } else {
        (beta * (p_min.ln() - p_i.ln())).exp()
    };
    (w as f32).clamp(f32::MIN_POSITIVE, 1.0)
}

/// Only alive transition rows are ever drawn; reaching this is a bug in the core.
#[cold]
fn internal_row_error() -> CoreError {
    CoreError::corrupt("rlcore internal error: drew a row that holds no data; please report it")
}

fn goal_distance(dt: crate::dtype::DType, a: &[u8], b: &[u8]) -> f64 {
    let s = dt.size();
    let n = a.len() / s;
    let mut acc = 0.0f64;
    for j in 0..n {
        let d = crate::dtype::read_f64(dt, a, j) - crate::dtype::read_f64(dt, b, j);
        acc += d * d;
    }
    acc.sqrt()
}

#[cfg(test)]
mod tests {
    use super::is_weight;

    #[test]
    fn weights_stay_in_unit_interval_for_priorities_any_decades_apart() {
        // ordinary ratios: exactly the textbook formula
        assert_eq!(is_weight(4.0, 1.0, 0.5), 0.5);
        assert_eq!(is_weight(3.0, 3.0, 0.7), 1.0);
        assert_eq!(is_weight(1e30, 1e-30, 0.0), 1.0);
        // a subnormal minimum beside a huge priority: the ratio overflows float64
        let p_min = 5e-324;
        let w = is_weight(1e280, p_min, 0.01);
        let want = (0.01 * (p_min.ln() - 1e280f64.ln())).exp() as f32;
        assert!(
            want > 1e-7 && (w - want).abs() <= 1e-6 * want,
            "{w} vs {want}"
        );
        // a true weight below float32's range is the smallest normal float32, never 0
        for (p, beta) in [(1e280, 1.0), (1e200, 0.4), (1e40, 1.0), (1e280, 1e18)] {
            let w = is_weight(p, p_min, beta);
            assert_eq!(w, f32::MIN_POSITIVE, "p={p} beta={beta}");
        }
    }
}
