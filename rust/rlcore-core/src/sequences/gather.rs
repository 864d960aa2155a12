//! The gather of sampled sequences and their hindsight relabeling.

use super::{SeqOut, SeqRequest, Start};
use crate::error::{CoreError, Result};
use crate::her::{exact_relabel_count, goal_distance, GoalStrategy, Goals, RewardFn};
use crate::mem::copy_row;
use crate::rng::Rng;
use crate::sampling::discounted_sum;
use crate::storage::{Storage, F_EP_START};

/// Gather the sequences (module docs): observations, step columns and n-step fields of every
/// valid step, zeros (indices −1) on padded steps, the state extras of each first step.
pub(super) fn gather(
    st: &Storage,
    starts: &[Start],
    l: usize,
    req: &SeqRequest,
    state: &[usize],
    o: &mut SeqOut<'_>,
) {
    let sc = &st.schema;
    let step_cols: Vec<usize> = (0..sc.step.len()).filter(|j| !state.contains(j)).collect();
    let gamma = req.gamma;
    for (i, s) in starts.iter().enumerate() {
        let p0 = st.phys(s.env, s.t);
        o.start_indices[i] = p0 as i64;
        // where the episode's frames start (stacked observations)
        let fs = if st.k1 > 0 {
            st.frames_from(s.env, p0)
        } else {
            0
        };
        for (k, &j) in state.iter().enumerate() {
            let c = &sc.step[j];
            let ib = c.item_bytes;
            copy_row(&mut o.state[k][i * ib..(i + 1) * ib], st.cell(c, p0));
        }
        let v = s.v as usize;
        for k in 0..l {
            let at = i * l + k;
            if k >= v {
                for (c, (ob, on)) in sc
                    .obs
                    .iter()
                    .zip(o.obs.iter_mut().zip(o.obs_next.iter_mut()))
                {
                    let ib = c.io_bytes();
                    ob[at * ib..(at + 1) * ib].fill(0);
                    on[at * ib..(at + 1) * ib].fill(0);
                }
                for (&j, out) in step_cols.iter().zip(o.step.iter_mut()) {
                    let ib = sc.step[j].item_bytes;
                    out[at * ib..(at + 1) * ib].fill(0);
                }
                o.rew[at] = 0.0;
                o.terminated[at] = 0;
                o.truncated[at] = 0;
                o.discount[at] = 0.0;
                o.mask[at] = 0;
                o.is_first[at] = 0;
                o.horizon[at] = 0;
                o.indices[at] = -1;
                continue;
            }
            let t = s.t + k as u64;
            let p = st.phys(s.env, t);
            let m = req.n_step.min(v - k) as u64;
            let q = st.phys(s.env, t + m);
            let last = st.phys(s.env, t + m - 1);
            let (rew, g) = discounted_sum(
                (0..m).map(|j| f64::from(st.rew(st.phys(s.env, t + j)))),
                gamma,
            );
            for (c, (ob, on)) in sc
                .obs
                .iter()
                .zip(o.obs.iter_mut().zip(o.obs_next.iter_mut()))
            {
                let ib = c.io_bytes();
                if c.stack > 1 {
                    st.copy_stack(c, s.env, t, fs, &mut ob[at * ib..(at + 1) * ib]);
                    st.copy_stack(c, s.env, t + m, fs, &mut on[at * ib..(at + 1) * ib]);
                    continue;
                }
                copy_row(&mut ob[at * ib..(at + 1) * ib], st.cell(c, p));
                copy_row(&mut on[at * ib..(at + 1) * ib], st.cell(c, q));
            }
            for (&j, out) in step_cols.iter().zip(o.step.iter_mut()) {
                let c = &sc.step[j];
                let ib = c.item_bytes;
                copy_row(&mut out[at * ib..(at + 1) * ib], st.cell(c, p));
            }
            let term = st.term(last);
            o.rew[at] = rew as f32;
            o.terminated[at] = term;
            o.truncated[at] = st.trunc(last);
            o.discount[at] = (g * f64::from(1 - term)) as f32;
            o.mask[at] = 1;
            o.is_first[at] = u8::from(st.flag(p) & F_EP_START != 0);
            o.horizon[at] = m as i64;
            o.indices[at] = p as i64;
        }
    }
}

/// Per sequence: the physical row whose achieved goal becomes its goal, or `usize::MAX` to
/// keep the stored goals (see [`ReplayCore::sample_sequences`]).
pub(super) fn pick_goals(
    cfg: &crate::her::HerConfig,
    st: &Storage,
    rng: &mut Rng,
    starts: &[Start],
) -> Vec<usize> {
    let b = starts.len();
    let pick = |s: &Start, rng: &mut Rng| {
        let last = s.t + s.v - 1;
        let tp = match cfg.strategy {
            GoalStrategy::Future => last + rng.below(s.end - last),
            GoalStrategy::Final => s.end - 1,
            GoalStrategy::Episode => s.s + rng.below(s.end - s.s),
        };
        st.phys(s.env, tp + 1)
    };
    let mut rows = vec![usize::MAX; b];
    if cfg.exact_ratio {
        let n = exact_relabel_count(cfg.future_k, b);
        for i in b - n..b {
            rows[i] = pick(&starts[i], rng);
        }
    } else {
        let prob = cfg.future_k / (cfg.future_k + 1.0);
        for (i, s) in starts.iter().enumerate() {
            if rng.uniform() < prob {
                rows[i] = pick(s, rng);
            }
        }
    }
    rows
}

/// Replace the desired goal of every valid step of each relabeled sequence and recompute its
/// n-step rewards: `r'_k = R(achieved_goal(obs[t+k+1]), g)` per valid step, summed over each
/// step's window as in [`gather`].
///
/// Errors: `Usage` without a reward; `Shape`/`InvalidValue` for a reward function that returns
/// the wrong number of rewards or a non-finite one; the reward function's own error.
#[allow(clippy::too_many_arguments)]
pub(super) fn relabel(
    threshold: Option<f64>,
    (ag, dg): (usize, usize),
    st: &Storage,
    starts: &[Start],
    goal_rows: &[usize],
    l: usize,
    req: &SeqRequest,
    o: &mut SeqOut<'_>,
    reward_fn: Option<&mut RewardFn<'_>>,
) -> Result<()> {
    let ag_col = &st.schema.obs[ag];
    let gb = ag_col.item_bytes;
    let relabeled = || {
        starts
            .iter()
            .zip(goal_rows)
            .enumerate()
            .filter(|(_, (_, &g))| g != usize::MAX)
    };
    for (i, (s, &g)) in relabeled() {
        let goal = st.cell(ag_col, g);
        for k in 0..s.v as usize {
            let at = i * l + k;
            o.obs[dg][at * gb..(at + 1) * gb].copy_from_slice(goal);
            o.obs_next[dg][at * gb..(at + 1) * gb].copy_from_slice(goal);
        }
    }
    // one reward per valid step: achieved goal after step t + k against the new goal
    let total: usize = relabeled().map(|(_, (s, _))| s.v as usize).sum();
    if total == 0 {
        return Ok(());
    }
    let rewards: Vec<f32> = match threshold {
        Some(eps) => {
            let dt = ag_col.spec.dtype;
            let mut r = Vec::with_capacity(total);
            for (_, (s, &g)) in relabeled() {
                let goal = st.cell(ag_col, g);
                for k in 0..s.v {
                    let d = goal_distance(dt, st.cell(ag_col, st.phys(s.env, s.t + k + 1)), goal);
                    r.push(-f32::from(u8::from(d > eps)));
                }
            }
            r
        }
        None => {
            let Some(f) = reward_fn else {
                return Err(CoreError::usage("HER needs a reward function"));
            };
            let mut ags = Vec::with_capacity(total * gb);
            let mut gs = Vec::with_capacity(total * gb);
            let mut trans = Vec::with_capacity(total);
            for (_, (s, &g)) in relabeled() {
                let goal = st.cell(ag_col, g);
                for k in 0..s.v {
                    ags.extend_from_slice(st.cell(ag_col, st.phys(s.env, s.t + k + 1)));
                    gs.extend_from_slice(goal);
                    trans.push(st.phys(s.env, s.t + k));
                }
            }
            let info = crate::her::info_columns(st, &trans);
            let r = f(&Goals {
                dtype: ag_col.spec.dtype,
                shape: &ag_col.spec.shape,
                count: total,
                achieved: &ags,
                desired: &gs,
                info: &info,
            })?;
            if r.len() != total {
                return Err(CoreError::shape(format!(
                    "compute_reward returned {} rewards for {total} goal pairs; it must return \
                     one reward per row, shape [M]",
                    r.len()
                )));
            }
            if let Some(bad) = r.iter().find(|x| !x.is_finite()) {
                return Err(CoreError::value(format!(
                    "compute_reward returned a non-finite reward ({bad})"
                )));
            }
            r
        }
    };
    let mut k0 = 0usize;
    for (i, (s, _)) in relabeled() {
        let v = s.v as usize;
        let r = &rewards[k0..k0 + v];
        for k in 0..v {
            let m = req.n_step.min(v - k);
            let (sum, _) = discounted_sum(r[k..k + m].iter().map(|&x| f64::from(x)), req.gamma);
            o.rew[i * l + k] = sum as f32;
        }
        k0 += v;
    }
    Ok(())
}
