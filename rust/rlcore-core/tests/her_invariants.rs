//! HER invariants: goals from the same episode, n-step windows at the segment end.
#![allow(clippy::needless_range_loop)]

mod common;

use common::*;
use rlcore_core::{Array, BatchOut, DType, GoalStrategy, HerConfig, Obs, ReplayCore, Steps};

/// HER: goals come from the same episode at a step >= t (future) even after the ring wrapped
/// twice (a peer library once drew goals from the episode that overwrote it), and the native reward is the Fetch threshold reward.
/// One step of a one-env goal stream into a HER core: achieved goal `ag_before` before the
/// step and `ag` after it, desired goal -1, reward -1, truncated as given.
fn her_step(core: &mut ReplayCore, ag_before: f64, ag: f64, truncated: bool) {
    let o = f64s(&[ag_before]);
    let dg = f64s(&[-1.0]);
    let on = f64s(&[ag]);
    let sh = [1usize];
    let obs = [
        (
            "achieved_goal",
            Array {
                dtype: DType::F64,
                shape: &sh,
                data: &o,
            },
        ),
        (
            "desired_goal",
            Array {
                dtype: DType::F64,
                shape: &sh,
                data: &dg,
            },
        ),
    ];
    let obs_next = [
        (
            "achieved_goal",
            Array {
                dtype: DType::F64,
                shape: &sh,
                data: &on,
            },
        ),
        (
            "desired_goal",
            Array {
                dtype: DType::F64,
                shape: &sh,
                data: &dg,
            },
        ),
    ];
    let act = 0f32.to_ne_bytes();
    let rew = (-1f32).to_ne_bytes();
    let term = [0u8];
    let trunc = [truncated as u8];
    let s = Steps {
        obs: Obs::Dict(&obs),
        act: Array {
            dtype: DType::F32,
            shape: &[],
            data: &act,
        },
        rew: Array {
            dtype: DType::F32,
            shape: &[],
            data: &rew,
        },
        terminated: Array {
            dtype: DType::U8,
            shape: &[],
            data: &term,
        },
        truncated: Array {
            dtype: DType::U8,
            shape: &[],
            data: &trunc,
        },
        obs_next: Obs::Dict(&obs_next),
        extras: &[],
        mask: None,
        env_ids: None,
    };
    core.add(&s).unwrap();
}

/// A one-env HER core of `seg` rows ("future" goals, k = 4, native reward at distance 0.5).
fn her_core(seg: usize) -> ReplayCore {
    let mut core = ReplayCore::new(seg, 1, 3).unwrap();
    core.enable_her(HerConfig {
        strategy: GoalStrategy::Future,
        future_k: 4.0,
        distance_threshold: Some(0.5),
        achieved_goal: "achieved_goal".into(),
        desired_goal: "desired_goal".into(),
        finished_only: false,
        exact_ratio: false,
    })
    .unwrap();
    core
}

/// HER n-step windows on a full one-env ring whose last physical row holds a transition: the
/// window walk's prefetch wraps at the segment's end (drawing that row once overflowed the
/// prefetch's row arithmetic, a panic in builds with overflow checks). Each window stays in the
/// episode and spans min(3, steps left) steps.
#[test]
fn her_nstep_windows_wrap_at_the_segment_end() {
    let seg = 10;
    let mut core = her_core(seg);
    // one running episode of 12 steps: achieved goal t before step t, t + 1 after it
    for t in 0..12 {
        her_step(&mut core, t as f64, t as f64 + 1.0, false);
    }
    let b = 500;
    let mut out = Out::new(b, 1);
    let (mut ag, mut dg, mut ag_n, mut dg_n) = (
        vec![0u8; b * 8],
        vec![0u8; b * 8],
        vec![0u8; b * 8],
        vec![0u8; b * 8],
    );
    let mut bo = out.batch(false);
    bo.obs = vec![&mut ag[..], &mut dg[..]];
    bo.obs_next = vec![&mut ag_n[..], &mut dg_n[..]];
    core.sample(b, 3, 0.9, &mut bo, None).unwrap();
    drop(bo);
    let rd = |v: &[u8], i: usize| f64::from_ne_bytes(v[i * 8..i * 8 + 8].try_into().unwrap());
    assert!(
        out.idx.contains(&(seg as i64 - 1)),
        "the last physical row was never drawn"
    );
    for i in 0..b {
        let (before, after) = (rd(&ag, i), rd(&ag_n, i));
        // 13 rows (12 steps and the open row) in 10: the oldest alive step is 3, the newest 11
        assert!((3.0..=11.0).contains(&before), "step {before}");
        assert_eq!(
            after - before,
            3f64.min(12.0 - before),
            "window of step {before}"
        );
    }
}

#[test]
fn her_future_goals_stay_in_episode_after_wrap() {
    let mut core = her_core(10);
    // episodes of length 4: achieved goal after step t of episode k = 100 k + t + 1
    let mut ag = 0.0f64;
    for k in 0..8 {
        for t in 0..4 {
            let ag_before = if t == 0 { 100.0 * k as f64 } else { ag };
            ag = 100.0 * k as f64 + t as f64 + 1.0;
            her_step(&mut core, ag_before, ag, t == 3);
        }
    }
    let b = 2000;
    let mut ag_o = vec![0u8; b * 8];
    let mut dg_o = vec![0u8; b * 8];
    let mut ag_n = vec![0u8; b * 8];
    let mut dg_n = vec![0u8; b * 8];
    let mut act = vec![0u8; b * 4];
    let (mut rew, mut term, mut trunc, mut disc, mut idx) = (
        vec![0f32; b],
        vec![0u8; b],
        vec![0u8; b],
        vec![0f32; b],
        vec![0i64; b],
    );
    let mut bo = BatchOut {
        obs: vec![&mut ag_o[..], &mut dg_o[..]],
        obs_next: vec![&mut ag_n[..], &mut dg_n[..]],
        step: vec![&mut act[..]],
        rew: &mut rew,
        terminated: &mut term,
        truncated: &mut trunc,
        discount: &mut disc,
        indices: &mut idx,
        weights: None,
    };
    core.sample(b, 1, 0.9, &mut bo, None).unwrap();
    let rd = |v: &[u8], i: usize| f64::from_ne_bytes(v[i * 8..i * 8 + 8].try_into().unwrap());
    let mut relabeled = 0;
    for i in 0..b {
        let a = rd(&ag_o, i); // achieved goal before step t
        let g = rd(&dg_o, i);
        assert_eq!(
            g,
            rd(&dg_n, i),
            "desired goal differs between obs and obs_next"
        );
        if g == -1.0 {
            assert_eq!(rew[i], -1.0);
            continue;
        }
        relabeled += 1;
        let episode = (rd(&ag_n, i) / 100.0).floor();
        let step_after = rd(&ag_n, i); // achieved goal after step t
        assert_eq!(
            (g / 100.0).floor(),
            episode,
            "goal {g} from another episode (sample ag {a})"
        );
        assert!(
            g >= step_after,
            "goal {g} from before step t (achieved after t: {step_after})"
        );
        assert!(g <= 100.0 * episode + 4.0);
        let want = if (rd(&ag_n, i) - g).abs() > 0.5 {
            -1.0
        } else {
            0.0
        };
        assert_eq!(rew[i], want);
    }
    let frac = relabeled as f64 / b as f64;
    // 0.8 expected; binomial sd = sqrt(0.16 / 2000) ~ 0.009
    assert!((frac - 0.8).abs() < 0.04, "relabeled fraction {frac}");
}
