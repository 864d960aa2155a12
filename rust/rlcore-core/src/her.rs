//! Hindsight experience replay (Andrychowicz et al. 2017): the configuration and its checks, the
//! goal columns of the schema, per-sample goal selection and the relabeling of a gathered
//! batch. Relabeling is pure: it only writes into the output arrays, never into storage.

use crate::dtype::{read_f64, Array, DType};
use crate::error::{CoreError, Result};
use crate::rng::Rng;
use crate::sampling::{discounted_sum, BatchOut, Plan};
use crate::schema::{obs_key, ColumnSpec};
use crate::storage::Storage;

/// Goal-selection strategy of hindsight relabeling (Andrychowicz et al. 2017, sec. 4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoalStrategy {
    Future,
    Final,
    Episode,
}

impl GoalStrategy {
    /// The strategy named `"future"`, `"final"` or `"episode"`.
    ///
    /// Errors: `InvalidValue` for any other name.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "future" => Ok(GoalStrategy::Future),
            "final" => Ok(GoalStrategy::Final),
            "episode" => Ok(GoalStrategy::Episode),
            _ => Err(CoreError::value(format!(
                "strategy must be 'future', 'final' or 'episode', got '{name}'"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GoalStrategy::Future => "future",
            GoalStrategy::Final => "final",
            GoalStrategy::Episode => "episode",
        }
    }
}

/// HER configuration.
#[derive(Debug, Clone)]
pub struct HerConfig {
    pub strategy: GoalStrategy,
    /// Relabel probability is `future_k / (future_k + 1)`.
    pub future_k: f64,
    /// Native sparse reward `-(||ag - g||_2 > eps)`; `None` means a user callable.
    pub distance_threshold: Option<f64>,
    pub achieved_goal: String,
    pub desired_goal: String,
    /// Draw only transitions of episodes that have ended and are whole in the ring (the oldest
    /// episode, once the ring has overwritten its first steps, is not drawn), as
    /// Stable-Baselines3's `HerReplayBuffer` does. `false`: every stored transition, the
    /// running episodes' included.
    pub finished_only: bool,
    /// Relabel exactly the last `⌊B·(1 − 1/(k + 1))⌋` samples of a batch of B (Stable-
    /// Baselines3's count and order: kept goals first, relabeled ones last). `false`: each
    /// sample independently with probability `k / (k + 1)`.
    pub exact_ratio: bool,
}

/// The goal pairs a user reward function is asked about: `count` achieved goals and as many
/// (relabeled) desired goals, each of `dtype` and shape `shape`, C-contiguous, and `info`: the
/// extra step columns (`add(..., **extras)`) of the transition of each pair (the step whose
/// reward is recomputed), `count` rows each.
#[derive(Debug, Clone, Copy)]
pub struct Goals<'a> {
    pub dtype: DType,
    pub shape: &'a [usize],
    pub count: usize,
    pub achieved: &'a [u8],
    pub desired: &'a [u8],
    pub info: &'a [InfoColumn<'a>],
}

/// One extra step column of the transitions whose rewards a user reward function recomputes:
/// `data` holds their rows of shape `shape`, C-contiguous, in goal-pair order.
#[derive(Debug, Clone)]
pub struct InfoColumn<'a> {
    pub name: &'a str,
    pub dtype: DType,
    pub shape: &'a [usize],
    pub data: Vec<u8>,
}

/// The extra step columns (every step column but `act`) of transition rows `rows`, for a user
/// reward function's `info`.
pub(crate) fn info_columns<'a>(st: &'a Storage, rows: &[usize]) -> Vec<InfoColumn<'a>> {
    st.schema.step[1..]
        .iter()
        .map(|c| {
            let mut data = Vec::with_capacity(rows.len() * c.item_bytes);
            for &r in rows {
                data.extend_from_slice(st.cell(c, r));
            }
            InfoColumn {
                name: &c.spec.name,
                dtype: c.spec.dtype,
                shape: &c.spec.shape,
                data,
            }
        })
        .collect()
}

/// A vectorised reward function for HER relabeling: goal pairs in, one reward per pair out (see
/// [`rewards_from`] for the checks of what it returns). Called once per sample call.
pub type RewardFn<'f> = dyn FnMut(&Goals<'_>) -> Result<Vec<f32>> + 'f;

/// The rewards a user reward function returned for `count` goal pairs, as float32.
///
/// Errors: `Shape` unless the array has shape `[count]`; `DType` for a dtype that does not hold
/// numbers.
pub fn rewards_from(a: &Array<'_>, count: usize) -> Result<Vec<f32>> {
    if a.shape != [count] {
        return Err(CoreError::shape(format!(
            "compute_reward must return one reward per goal pair, shape [{count}]; got shape {:?}",
            a.shape
        )));
    }
    if !a.dtype.can_cast_to(DType::F64) {
        return Err(CoreError::dtype(format!(
            "compute_reward returned dtype {}; expected float",
            a.dtype.name()
        )));
    }
    Ok((0..count)
        .map(|k| read_f64(a.dtype, a.data, k) as f32)
        .collect())
}

impl HerConfig {
    /// Check the numeric parameters.
    ///
    /// Errors: `InvalidValue` for a negative or non-finite `future_k`, or a negative or
    /// non-finite `distance_threshold`.
    pub fn check(&self) -> Result<()> {
        if !(self.future_k.is_finite() && self.future_k >= 0.0) {
            return Err(CoreError::value(format!(
                "future_k must be >= 0, got {}",
                self.future_k
            )));
        }
        if let Some(eps) = self.distance_threshold {
            if !(eps.is_finite() && eps >= 0.0) {
                return Err(CoreError::value(format!(
                    "distance_threshold must be a finite number >= 0, got {eps}"
                )));
            }
        }
        Ok(())
    }

    /// The indices of the (achieved goal, desired goal) observation columns among `obs`.
    ///
    /// Errors: `Shape` for array observations, a missing goal key, or goals of different shapes
    /// or dtypes; `DType` for non-float goals with the native reward.
    pub fn goal_columns(&self, obs: &[ColumnSpec], is_dict: bool) -> Result<(usize, usize)> {
        if !is_dict {
            return Err(CoreError::shape(
                "HER needs dict observations with observation / achieved_goal / desired_goal \
                 keys, got a single array",
            ));
        }
        let find = |key: &str| {
            obs.iter()
                .position(|c| obs_key(&c.name) == Some(key))
                .ok_or_else(|| {
                    CoreError::shape(format!(
                        "HER: the observation dict has no key '{key}'; keys are {:?}",
                        obs.iter()
                            .filter_map(|c| obs_key(&c.name))
                            .collect::<Vec<_>>()
                    ))
                })
        };
        let ag = find(&self.achieved_goal)?;
        let dg = find(&self.desired_goal)?;
        if obs[ag].dtype != obs[dg].dtype || obs[ag].shape != obs[dg].shape {
            return Err(CoreError::shape(format!(
                "HER: achieved goal {:?} {} and desired goal {:?} {} must have the same shape \
                 and dtype",
                obs[ag].shape,
                obs[ag].dtype.name(),
                obs[dg].shape,
                obs[dg].dtype.name()
            )));
        }
        if self.distance_threshold.is_some() && !matches!(obs[ag].dtype, DType::F32 | DType::F64) {
            return Err(CoreError::dtype(format!(
                "HER native reward needs float32 or float64 goals, got {}",
                obs[ag].dtype.name()
            )));
        }
        Ok((ag, dg))
    }
}

/// Decide whether and to which step's achieved goal to relabel each sample: independently with
/// probability `k / (k + 1)`, or, with `exact_ratio`, exactly the last `⌊B·(1 − 1/(k + 1))⌋`
/// samples (the ratio computed as Stable-Baselines3 computes it, in f64). Strategy `future`
/// picks t' uniformly in [t, e − 1], `final` picks e − 1, `episode` picks uniformly in
/// [s, e − 1]; the goal is the achieved goal after step t', stored in row t' + 1.
pub(crate) fn plan_goals(cfg: &HerConfig, st: &Storage, rng: &mut Rng, plans: &mut [Plan]) {
    let pick = |pl: &mut Plan, rng: &mut Rng| {
        let tp = match cfg.strategy {
            GoalStrategy::Future => pl.t + rng.below(pl.end - pl.t),
            GoalStrategy::Final => pl.end - 1,
            GoalStrategy::Episode => pl.start + rng.below(pl.end - pl.start),
        };
        pl.goal_row = st.phys(pl.env, tp + 1);
        // relabeling reads the goal row after the gather: fetch it meanwhile
        st.prefetch_rows(pl.goal_row, 1, 256);
    };
    if cfg.exact_ratio {
        let b = plans.len();
        let relabeled = exact_relabel_count(cfg.future_k, b);
        for pl in plans[b - relabeled..].iter_mut() {
            pick(pl, rng);
        }
        return;
    }
    let prob = cfg.future_k / (cfg.future_k + 1.0);
    for pl in plans.iter_mut() {
        if rng.uniform() < prob {
            pick(pl, rng);
        }
    }
}

/// `⌊B·(1 − 1/(k + 1))⌋`, the number of relabeled samples of a batch of `b` with `exact_ratio`
/// (Stable-Baselines3's `int(her_ratio * batch_size)`, `her_ratio = 1 - 1 / (k + 1)`).
pub fn exact_relabel_count(future_k: f64, b: usize) -> usize {
    let ratio = 1.0 - 1.0 / (future_k + 1.0);
    ((ratio * b as f64) as usize).min(b)
}

/// Point the samples with a given goal step at it: `goal_rows[i]` is the row of a transition
/// t' of sample i's episode (its achieved goal after t', in row t' + 1, becomes the goal), or
/// −1 to keep the stored goal.
///
/// Errors: `InvalidValue` for a row out of range, one that holds no transition, or one of
/// another episode.
pub(crate) fn set_goals(st: &Storage, plans: &mut [Plan], goal_rows: &[i64]) -> Result<()> {
    for (i, (pl, &g)) in plans.iter_mut().zip(goal_rows).enumerate() {
        if g == -1 {
            continue;
        }
        let gp = st.current_row(g).ok();
        let tp = gp
            .and_then(|gp| st.transition_abs(gp).map(|a| (gp, a)))
            .filter(|&(gp, a)| st.env_of(gp) == pl.env && a >= pl.start && a < pl.end)
            .map(|(_, a)| a)
            .ok_or_else(|| {
                CoreError::value(format!(
                    "goal index {g} of sample {i} is not a transition of that sample's episode \
                     (rows {}..{} of env {}); pass -1 to keep the stored goal",
                    st.phys(pl.env, pl.start),
                    st.phys(pl.env, pl.end),
                    pl.env
                ))
            })?;
        pl.goal_row = st.phys(pl.env, tp + 1);
    }
    Ok(())
}

/// Replace the desired goals of relabeled samples (columns `goals` = (achieved, desired)) in
/// `obs` and `obs_next`, and recompute their (n-step) rewards against the new goal: natively
/// with a distance threshold, or with one call of `reward_fn` for every window step.
///
/// Errors: `Usage` without a reward; `Shape`/`InvalidValue` for a reward function that returns
/// the wrong number of rewards or a non-finite one; the reward function's own error.
pub(crate) fn relabel(
    cfg: &HerConfig,
    goals: (usize, usize),
    st: &Storage,
    plans: &[Plan],
    gamma: f64,
    out: &mut BatchOut<'_>,
    reward_fn: Option<&mut RewardFn<'_>>,
) -> Result<()> {
    let (ag, dg) = goals;
    let ag_col = &st.schema.obs[ag];
    let gb = ag_col.item_bytes;
    let window_rows = |pl: &Plan| {
        let first = st.next_row(pl.p);
        (0..pl.m).scan(first, move |r, _| {
            let cur = *r;
            *r = st.next_row(cur);
            Some(cur)
        })
    };
    match cfg.distance_threshold {
        Some(eps) => {
            // the distance read as the goals' own dtype (no per-element dispatch)
            match ag_col.spec.dtype {
                DType::F32 => relabel_native::<f32>(st, ag_col, dg, plans, eps, gamma, out),
                DType::F64 => relabel_native::<f64>(st, ag_col, dg, plans, eps, gamma, out),
                dt => unreachable!("goal_columns refuses {dt:?} goals with the native reward"),
            }
        }
        None => {
            let Some(f) = reward_fn else {
                return Err(CoreError::usage("HER needs a reward function"));
            };
            for (i, pl) in plans.iter().enumerate() {
                if pl.goal_row != usize::MAX {
                    let g = st.cell(ag_col, pl.goal_row);
                    out.obs[dg][i * gb..(i + 1) * gb].copy_from_slice(g);
                    out.obs_next[dg][i * gb..(i + 1) * gb].copy_from_slice(g);
                }
            }
            let m_total: usize = plans
                .iter()
                .filter(|pl| pl.goal_row != usize::MAX)
                .map(|pl| pl.m as usize)
                .sum();
            if m_total == 0 {
                return Ok(());
            }
            let mut ags = Vec::with_capacity(m_total * gb);
            let mut gs = Vec::with_capacity(m_total * gb);
            // the transition of each pair: the row before its achieved goal's
            let mut trans = Vec::with_capacity(m_total);
            for pl in plans.iter().filter(|pl| pl.goal_row != usize::MAX) {
                let g = st.cell(ag_col, pl.goal_row);
                let mut t = pl.p;
                for r in window_rows(pl) {
                    ags.extend_from_slice(st.cell(ag_col, r));
                    gs.extend_from_slice(g);
                    trans.push(t);
                    t = r;
                }
            }
            let info = info_columns(st, &trans);
            let rewards = f(&Goals {
                dtype: ag_col.spec.dtype,
                shape: &ag_col.spec.shape,
                count: m_total,
                achieved: &ags,
                desired: &gs,
                info: &info,
            })?;
            if rewards.len() != m_total {
                return Err(CoreError::shape(format!(
                    "compute_reward returned {} rewards for {m_total} goal pairs; it must return \
                     one reward per row, shape [M]",
                    rewards.len()
                )));
            }
            if let Some(bad) = rewards.iter().find(|r| !r.is_finite()) {
                return Err(CoreError::value(format!(
                    "compute_reward returned a non-finite reward ({bad})"
                )));
            }
            let mut k0 = 0usize;
            for (i, pl) in plans.iter().enumerate() {
                if pl.goal_row == usize::MAX {
                    continue;
                }
                let m = pl.m as usize;
                let rews = rewards[k0..k0 + m].iter().map(|&r| r as f64);
                out.rew[i] = discounted_sum(rews, gamma).0 as f32;
                k0 += m;
            }
        }
    }
    Ok(())
}

/// A goal element type of the native reward.
trait GoalElem: Copy {
    const SIZE: usize;
    fn read(b: &[u8], j: usize) -> f64;
}

impl GoalElem for f32 {
    const SIZE: usize = 4;
    #[inline(always)]
    fn read(b: &[u8], j: usize) -> f64 {
        let b = &b[j * 4..j * 4 + 4];
        f32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64
    }
}

impl GoalElem for f64 {
    const SIZE: usize = 8;
    #[inline(always)]
    fn read(b: &[u8], j: usize) -> f64 {
        let b = &b[j * 8..j * 8 + 8];
        f64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}

/// [`goal_distance`] for goals of element type `T`: the same f64 arithmetic, in the same order.
#[inline(always)]
fn distance_of<T: GoalElem>(a: &[u8], b: &[u8]) -> f64 {
    distance_by(a.len() / T::SIZE, T::read, a, b)
}

/// Euclidean distance of two goals of `n` elements, element j of each read by `read`.
#[inline(always)]
fn distance_by(n: usize, read: impl Fn(&[u8], usize) -> f64, a: &[u8], b: &[u8]) -> f64 {
    let mut acc = 0.0f64;
    for j in 0..n {
        let d = read(a, j) - read(b, j);
        acc += d * d;
    }
    acc.sqrt()
}

/// The native relabeling of [`relabel`]: each relabeled sample gets the achieved goal of its
/// goal row as desired goal (in `obs` and `obs_next`, column `dg`) and the (n-step) return of
/// `-(||ag - g||_2 > eps)` over its window, as gymnasium-robotics computes the reward (-1.0, or
/// -0.0 on success); a window of one step takes the reward itself, as `discounted_sum` does.
fn relabel_native<T: GoalElem>(
    st: &Storage,
    ag_col: &crate::schema::Column,
    dg: usize,
    plans: &[Plan],
    eps: f64,
    gamma: f64,
    out: &mut BatchOut<'_>,
) {
    let gb = ag_col.item_bytes;
    let reward =
        |r: usize, g: &[u8]| -f64::from(u8::from(distance_of::<T>(st.cell(ag_col, r), g) > eps));
    for (i, pl) in plans.iter().enumerate() {
        if pl.goal_row == usize::MAX {
            continue;
        }
        let g = st.cell(ag_col, pl.goal_row);
        out.obs[dg][i * gb..(i + 1) * gb].copy_from_slice(g);
        out.obs_next[dg][i * gb..(i + 1) * gb].copy_from_slice(g);
        // the achieved goal after step t is stored with the next observation, row t + 1
        let mut r = st.next_row(pl.p);
        out.rew[i] = if pl.m == 1 {
            reward(r, g) as f32
        } else {
            let rews = (0..pl.m).map(|_| {
                let x = reward(r, g);
                r = st.next_row(r);
                x
            });
            discounted_sum(rews, gamma).0 as f32
        };
    }
}

/// Euclidean distance of two goals of dtype `dt`.
pub(crate) fn goal_distance(dt: DType, a: &[u8], b: &[u8]) -> f64 {
    match dt {
        DType::F32 => distance_of::<f32>(a, b),
        DType::F64 => distance_of::<f64>(a, b),
        _ => distance_by(a.len() / dt.size(), |x, j| read_f64(dt, x, j), a, b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::ReplayCore;
    use crate::schema::{Obs, Steps};

    fn cfg(threshold: Option<f64>) -> HerConfig {
        HerConfig {
            strategy: GoalStrategy::Future,
            future_k: 4.0,
            distance_threshold: threshold,
            achieved_goal: "achieved_goal".into(),
            desired_goal: "desired_goal".into(),
            finished_only: false,
            exact_ratio: false,
        }
    }

    /// SB3's `int((1 - 1 / (k + 1)) * B)`, in f64 as Python computes it.
    #[test]
    fn exact_relabel_count_is_sb3s_truncated_share() {
        for (k, b, want) in [
            (4.0, 256, 204),
            (4.0, 1, 0),
            (4.0, 5, 4),
            (1.0, 3, 1),
            (0.0, 256, 0),
            (8.0, 100, 88),
            (1e12, 7, 6),
        ] {
            assert_eq!(exact_relabel_count(k, b), want, "k={k} b={b}");
        }
    }

    /// A window of -0.0 rewards (gymnasium-robotics' success reward) sums to -0.0, as NumPy's
    /// float sum does; the discount after m terms is gamma^m by repeated products.
    #[test]
    fn discounted_sum_keeps_negative_zero_and_returns_gamma_to_the_m() {
        let (s, g) = discounted_sum([-0.0f64, -0.0].into_iter(), 0.9);
        assert!(s == 0.0 && s.is_sign_negative());
        assert_eq!(g, 0.9 * 0.9);
        let (s, _) = discounted_sum([-1.0f64, -0.0, -1.0].into_iter(), 0.5);
        assert_eq!(s, -1.25);
        assert_eq!(discounted_sum(std::iter::empty(), 0.9), (0.0, 1.0));
    }

    #[test]
    fn strategies_parse_and_parameters_are_checked() {
        for s in [
            GoalStrategy::Future,
            GoalStrategy::Final,
            GoalStrategy::Episode,
        ] {
            assert_eq!(GoalStrategy::parse(s.name()), Ok(s));
        }
        assert!(matches!(
            GoalStrategy::parse("random"),
            Err(CoreError::InvalidValue(_))
        ));
        assert!(cfg(Some(0.05)).check().is_ok());
        let mut c = cfg(Some(-1.0));
        assert!(matches!(c.check(), Err(CoreError::InvalidValue(_))));
        c.distance_threshold = None;
        c.future_k = f64::NAN;
        assert!(matches!(c.check(), Err(CoreError::InvalidValue(_))));
    }

    #[test]
    fn goal_columns_are_found_by_key_and_must_match() {
        let spec = |k: &str, dt, n| ColumnSpec::new(format!("obs.{k}"), dt, vec![n]);
        let obs = vec![
            spec("observation", DType::F32, 5),
            spec("achieved_goal", DType::F64, 3),
            spec("desired_goal", DType::F64, 3),
        ];
        assert_eq!(cfg(Some(0.05)).goal_columns(&obs, true), Ok((1, 2)));
        assert!(matches!(
            cfg(None).goal_columns(&obs[..1], false),
            Err(CoreError::Shape(_))
        ));
        assert!(matches!(
            cfg(None).goal_columns(&obs[..2], true),
            Err(CoreError::Shape(m)) if m.contains("no key 'desired_goal'")
        ));
        let mut odd = obs.clone();
        odd[2] = spec("desired_goal", DType::F64, 2);
        assert!(matches!(
            cfg(None).goal_columns(&odd, true),
            Err(CoreError::Shape(_))
        ));
        let ints = [
            spec("achieved_goal", DType::I32, 3),
            spec("desired_goal", DType::I32, 3),
        ];
        assert!(cfg(None).goal_columns(&ints, true).is_ok());
        assert!(matches!(
            cfg(Some(0.1)).goal_columns(&ints, true),
            Err(CoreError::DType(_))
        ));
    }

    #[test]
    fn returned_rewards_must_be_one_number_per_goal_pair() {
        let data: Vec<u8> = [1.0f64, -1.0, 0.0]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        let a = |shape| Array {
            dtype: DType::F64,
            shape,
            data: &data,
        };
        assert_eq!(rewards_from(&a(&[3]), 3), Ok(vec![1.0, -1.0, 0.0]));
        for shape in [&[2usize][..], &[3, 1], &[]] {
            assert!(
                matches!(rewards_from(&a(shape), 3), Err(CoreError::Shape(_))),
                "{shape:?}"
            );
        }
    }

    /// The user reward function is called with the achieved-goal column's dtype and shape
    /// (whatever the column's position among the observation keys) and one pair per relabeled
    /// window step; each pair's achieved goal is a stored achieved goal.
    #[test]
    fn reward_function_gets_the_goal_columns_layout() {
        let mut core = ReplayCore::new(64, 1, 7).unwrap(); // ok: test
        core.enable_her(cfg(None)).unwrap(); // ok: test
        let f64s = |x: &[f64]| -> Vec<u8> { x.iter().flat_map(|v| v.to_ne_bytes()).collect() };
        for t in 0..20 {
            let (o, ag, ag_next, dg) = (
                [0u8; 20],
                f64s(&[t as f64, -(t as f64)]),
                f64s(&[t as f64 + 1.0, -(t as f64) - 1.0]),
                f64s(&[99.0, 99.0]),
            );
            let (five, two) = ([5usize], [2usize]);
            let arr = |dtype, shape, data| Array { dtype, shape, data };
            let obs = [
                ("observation", arr(DType::F32, &five[..], &o[..])),
                ("achieved_goal", arr(DType::F64, &two[..], &ag)),
                ("desired_goal", arr(DType::F64, &two[..], &dg)),
            ];
            let next = [
                obs[0],
                ("achieved_goal", arr(DType::F64, &two[..], &ag_next)),
                obs[2],
            ];
            let (zero, flag) = (0f32.to_ne_bytes(), [u8::from(t % 5 == 4)]);
            let scalar = |dtype, data| arr(dtype, &[], data);
            core.add(&Steps {
                obs: Obs::Dict(&obs),
                act: scalar(DType::F32, &zero),
                rew: scalar(DType::F32, &zero),
                terminated: scalar(DType::U8, &[0]),
                truncated: scalar(DType::U8, &flag),
                obs_next: Obs::Dict(&next),
                extras: &[],
                mask: None,
                env_ids: None,
            })
            .unwrap(); // ok: test
        }
        let b = 64;
        let (mut o, mut ag, mut dg) = (vec![0u8; b * 20], vec![0u8; b * 16], vec![0u8; b * 16]);
        let (mut o2, mut ag2, mut dg2) = (o.clone(), ag.clone(), dg.clone());
        let (mut act, mut rew, mut term, mut trunc, mut disc, mut idx) = (
            vec![0u8; b * 4],
            vec![0f32; b],
            vec![0u8; b],
            vec![0u8; b],
            vec![0f32; b],
            vec![0i64; b],
        );
        let mut out = BatchOut {
            obs: vec![&mut o, &mut ag, &mut dg],
            obs_next: vec![&mut o2, &mut ag2, &mut dg2],
            step: vec![&mut act],
            rew: &mut rew,
            terminated: &mut term,
            truncated: &mut trunc,
            discount: &mut disc,
            indices: &mut idx,
            weights: None,
        };
        let mut calls = Vec::new();
        let mut f = |g: &Goals<'_>| -> Result<Vec<f32>> {
            calls.push((g.dtype, g.shape.to_vec(), g.count, g.achieved.len()));
            let first = f64::from_ne_bytes(g.achieved[..8].try_into().unwrap()); // ok: test
            assert!(first >= 1.0 && first == first.round(), "{first}");
            Ok(vec![-0.5; g.count])
        };
        core.sample(b, 2, 1.0, &mut out, Some(&mut f)).unwrap(); // ok: test
        let relabeled = core
            .last_plan(b)
            .iter()
            .filter(|p| p.goal_row != usize::MAX);
        let pairs: usize = relabeled.map(|p| p.m as usize).sum();
        assert_eq!(calls, vec![(DType::F64, vec![2], pairs, pairs * 16)]);
    }
}
