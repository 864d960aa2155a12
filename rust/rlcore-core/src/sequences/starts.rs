//! Eligible sequence starts (module docs of `sequences`): their count and mass, and the
//! uniform and prioritized draws over them.

use super::Start;
use crate::error::{CoreError, Result};
use crate::replay::ReplayCore;
use crate::rng::Rng;
use crate::sampling::Plan;
use crate::storage::{Storage, F_TRANSITION, OPEN};

/// Rejected draws allowed per sample before the eligible starts are enumerated.
const REJECTIONS_PER_SAMPLE: usize = 64;

impl ReplayCore {
    /// The eligible starts of sequences of `burn_in + seq_len` steps (module docs): how many
    /// there are and their sampling mass, i.e. the sum of their rows' priorities on a
    /// prioritized buffer and their number on a uniform one. What a sharded buffer weights its
    /// shards by, so that a start's probability over all shards is the one of a single buffer.
    /// O(stored episodes), plus O(log capacity) per episode under PER (range sums of the tree).
    ///
    /// Errors: `InvalidValue` for `seq_len < 1` or a length that overflows.
    pub fn sequence_start_mass(
        &self,
        seq_len: usize,
        burn_in: usize,
        pad: bool,
    ) -> Result<(u64, f64)> {
        if seq_len < 1 {
            return Err(CoreError::value(format!(
                "seq_len must be >= 1, got {seq_len}"
            )));
        }
        let l = burn_in
            .checked_add(seq_len)
            .ok_or_else(|| CoreError::value("burn_in + seq_len overflows"))? as u64;
        let runs = self.st.eligible_runs(l, pad);
        let count: u64 = runs.iter().map(|r| r.2).sum();
        let Some(per) = &self.per else {
            return Ok((count, count as f64));
        };
        let seg = self.st.seg;
        let mut mass = 0.0;
        for (e, first, n) in runs {
            let p0 = self.st.phys(e, first);
            let seg_end = (e + 1) * seg;
            let n = n as usize;
            if p0 + n <= seg_end {
                mass += per.tree.range_sum(p0, p0 + n);
            } else {
                mass += per.tree.range_sum(p0, seg_end);
                mass += per.tree.range_sum(e * seg, e * seg + (p0 + n - seg_end));
            }
        }
        Ok((count, mass))
    }
}

impl Storage {
    /// The start at alive transition row `p` if it is eligible for sequences of `l` steps.
    #[inline]
    pub(super) fn eligible_start(&self, p: usize, l: u64, pad: bool) -> Option<Start> {
        let (env, t) = self.abs_of(p)?;
        if self.flag(p) & F_TRANSITION == 0 {
            return None;
        }
        let (s, end) = self.bounds_abs(env, t);
        let ok = t + l <= end || (pad && t == s && end - s < l);
        ok.then(|| Start {
            env,
            t,
            s,
            end,
            v: l.min(end - t),
        })
    }

    /// Every run of eligible starts: (env, first start, number of starts), one per episode
    /// that has any, in O(number of stored episodes).
    fn eligible_runs(&self, l: u64, pad: bool) -> Vec<(usize, u64, u64)> {
        let mut runs = Vec::new();
        for e in 0..self.num_envs {
            let st = &self.envs[e];
            if st.head == 0 {
                continue;
            }
            let lo = self.alive_lo(e);
            let first = self.ep_id(self.phys(e, lo));
            for ep in first..st.next_ep {
                let rec = self.ep_rec(e, ep);
                let s = self.sampleable_start(e, rec);
                let end = match self.ep_end[rec] {
                    OPEN => st.head - 1,
                    x => x,
                };
                if end <= s {
                    continue;
                }
                let n = end - s;
                if n >= l {
                    runs.push((e, s, n - l + 1));
                } else if pad {
                    runs.push((e, s, 1));
                }
            }
        }
        runs
    }

    fn start_at(&self, e: usize, t: u64, l: u64, pad: bool) -> Result<Start> {
        self.eligible_start(self.phys(e, t), l, pad)
            .ok_or_else(|| CoreError::corrupt("rlcore internal error: an enumerated sequence start is not eligible; please report it"))
    }
}

fn no_start(l: u64, pad: bool) -> CoreError {
    if pad {
        CoreError::empty("cannot sample sequences: the buffer holds no transition yet")
    } else {
        CoreError::empty(format!(
            "cannot sample sequences of {l} steps with pad=False: no stored episode has {l} \
             transitions; pass pad=True, a shorter seq_len/burn_in, or add more steps"
        ))
    }
}

/// B starts uniform over the eligible ones (module docs): uniform transitions with the
/// ineligible rejected, then, past the rejection budget, by enumeration.
pub(super) fn draw_uniform_starts(
    st: &Storage,
    rng: &mut Rng,
    b: usize,
    l: u64,
    pad: bool,
) -> Result<Vec<Start>> {
    let mut starts = Vec::with_capacity(b);
    let mut plans = vec![Plan::default(); b];
    let mut budget = REJECTIONS_PER_SAMPLE.saturating_mul(b);
    while starts.len() < b && budget > 0 {
        let k = b - starts.len();
        st.draw_uniform(rng, &mut plans[..k]);
        for pl in &plans[..k] {
            match st.eligible_start(pl.p, l, pad) {
                Some(s) => starts.push(s),
                None => budget = budget.saturating_sub(1),
            }
        }
    }
    if starts.len() < b {
        let runs = st.eligible_runs(l, pad);
        let total: u64 = runs.iter().map(|r| r.2).sum();
        if total == 0 {
            return Err(no_start(l, pad));
        }
        while starts.len() < b {
            let mut r = rng.below(total);
            let mut run = runs[0];
            for &x in &runs {
                run = x;
                if r < x.2 {
                    break;
                }
                r -= x.2;
            }
            starts.push(st.start_at(run.0, run.1 + r, l, pad)?);
        }
    }
    Ok(starts)
}

/// B starts with probability proportional to their row's priority among the eligible ones:
/// a stratified first draw per sample (Schaul et al. 2016, app. B.2.1), ineligible draws
/// replaced by draws over the whole mass (so that each start's marginal probability is
/// exactly `p_t / sum_{eligible} p`), then, past the rejection budget, by enumeration.
pub(super) fn draw_prioritized_starts(
    st: &Storage,
    per: &crate::per::PerState,
    rng: &mut Rng,
    b: usize,
    l: u64,
    pad: bool,
) -> Result<Vec<Start>> {
    let total = per.tree.total();
    let seg_mass = total / b as f64;
    let mut starts = Vec::with_capacity(b);
    let mut budget = REJECTIONS_PER_SAMPLE.saturating_mul(b);
    let mut pending = 0usize;
    for i in 0..b {
        let u = ((i as f64 + rng.uniform()) * seg_mass).min(total);
        match st.eligible_start(per.tree.find(u), l, pad) {
            Some(s) => starts.push(s),
            None => pending += 1,
        }
    }
    while pending > 0 && budget > 0 {
        let u = (rng.uniform() * total).min(total);
        match st.eligible_start(per.tree.find(u), l, pad) {
            Some(s) => {
                starts.push(s);
                pending -= 1;
            }
            None => budget -= 1,
        }
    }
    if pending > 0 {
        let mut cands = Vec::new();
        let mut cum = Vec::new();
        let mut acc = 0.0f64;
        for (e, first, n) in st.eligible_runs(l, pad) {
            for t in first..first + n {
                let p = per.tree.get(st.phys(e, t));
                if p > 0.0 {
                    acc += p;
                    cands.push((e, t));
                    cum.push(acc);
                }
            }
        }
        if cands.is_empty() {
            return Err(no_start(l, pad));
        }
        for _ in 0..pending {
            let u = rng.uniform() * acc;
            let j = cum.partition_point(|&c| c <= u).min(cands.len() - 1);
            starts.push(st.start_at(cands[j].0, cands[j].1, l, pad)?);
        }
    }
    Ok(starts)
}
