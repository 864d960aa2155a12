//! Property tests of the replay core against a plain reference model: random vector-env
//! streams with terminations, truncations, continuity breaks and ring wrap-around.
#![allow(clippy::needless_range_loop)]

use proptest::prelude::*;
use rlcore_core::{Array, BatchOut, DType, GoalStrategy, HerConfig, Obs, ReplayCore, Steps};

/// One env step of the generated stream.
#[derive(Debug, Clone, Copy)]
struct Ev {
    rew: f32,
    term: bool,
    trunc: bool,
    /// The given obs does not continue the previous obs_next (a shuffled stream).
    jump: bool,
    masked: bool,
}

fn ev() -> impl Strategy<Value = Ev> {
    (0u8..10, 0u8..20, any::<bool>(), 0u8..30, 0u8..10).prop_map(|(r, d, tt, j, m)| Ev {
        rew: r as f32 - 3.0,
        term: d == 0 && tt,
        trunc: d == 0 && !tt,
        jump: j == 0,
        masked: m == 0,
    })
}

/// Reference: per env, the transitions written in order, with their episode number, plus the
/// row accounting of DESIGN.md (L + 1 rows per episode, one fresh row when an episode opens).
#[derive(Default, Clone)]
struct RefEnv {
    /// (obs id, next obs id, rew, term, trunc, episode number, row number)
    trans: Vec<(f64, f64, f32, bool, bool, usize, u64)>,
    rows: u64,
    open: bool,
    episode: usize,
    last_next: f64,
}

fn f64s(x: &[f64]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

struct Out {
    obs: Vec<u8>,
    obs_next: Vec<u8>,
    act: Vec<u8>,
    rew: Vec<f32>,
    term: Vec<u8>,
    trunc: Vec<u8>,
    disc: Vec<f32>,
    idx: Vec<i64>,
    w: Vec<f32>,
}

impl Out {
    fn new(b: usize, obs_dim: usize) -> Self {
        Out {
            obs: vec![0; b * obs_dim * 8],
            obs_next: vec![0; b * obs_dim * 8],
            act: vec![0; b * 4],
            rew: vec![0.0; b],
            term: vec![0; b],
            trunc: vec![0; b],
            disc: vec![0.0; b],
            idx: vec![0; b],
            w: vec![0.0; b],
        }
    }
    fn batch(&mut self, per: bool) -> BatchOut<'_> {
        BatchOut {
            obs: vec![&mut self.obs[..]],
            obs_next: vec![&mut self.obs_next[..]],
            step: vec![&mut self.act[..]],
            rew: &mut self.rew,
            terminated: &mut self.term,
            truncated: &mut self.trunc,
            discount: &mut self.disc,
            indices: &mut self.idx,
            weights: if per { Some(&mut self.w[..]) } else { None },
        }
    }
    fn obs_id(&self, i: usize, next: bool) -> f64 {
        let b = if next { &self.obs_next } else { &self.obs };
        f64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap())
    }
}

/// Run a stream of `steps` vector steps into a core and the reference.
fn run(core: &mut ReplayCore, n_envs: usize, stream: &[Vec<Ev>]) -> Vec<RefEnv> {
    let mut refs = vec![RefEnv::default(); n_envs];
    let mut next_id = 1.0f64;
    for step in stream {
        let mut obs = vec![0.0f64; n_envs];
        let mut obs_next = vec![0.0f64; n_envs];
        let mut rew = vec![0.0f32; n_envs];
        let mut term = vec![0u8; n_envs];
        let mut trunc = vec![0u8; n_envs];
        let mut mask = vec![0u8; n_envs];
        for (e, ev) in step.iter().enumerate().take(n_envs) {
            let r = &mut refs[e];
            let o = if r.open && !ev.jump {
                r.last_next
            } else {
                next_id += 1.0;
                next_id
            };
            next_id += 1.0;
            obs[e] = o;
            obs_next[e] = next_id;
            rew[e] = ev.rew;
            term[e] = ev.term as u8;
            trunc[e] = ev.trunc as u8;
            mask[e] = (!ev.masked) as u8;
            if ev.masked {
                continue;
            }
            if r.open && o != r.last_next {
                r.open = false; // continuity cut: the previous episode ends here
            }
            if !r.open {
                r.rows += 1;
                r.episode += 1;
                r.open = true;
            }
            let row = r.rows - 1;
            r.trans
                .push((o, next_id, ev.rew, ev.term, ev.trunc, r.episode, row));
            r.rows += 1;
            r.last_next = next_id;
            if ev.term || ev.trunc {
                r.open = false;
            }
        }
        let ob = f64s(&obs);
        let onb = f64s(&obs_next);
        let act: Vec<u8> = obs.iter().flat_map(|&v| (v as f32).to_ne_bytes()).collect();
        let rb: Vec<u8> = rew.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let shape_o = [n_envs, 1];
        let shape_n = [n_envs];
        let s = Steps {
            obs: Obs::Array(Array {
                dtype: DType::F64,
                shape: &shape_o,
                data: &ob,
            }),
            act: Array {
                dtype: DType::F32,
                shape: &shape_o,
                data: &act,
            },
            rew: Array {
                dtype: DType::F32,
                shape: &shape_n,
                data: &rb,
            },
            terminated: Array {
                dtype: DType::U8,
                shape: &shape_n,
                data: &term,
            },
            truncated: Array {
                dtype: DType::U8,
                shape: &shape_n,
                data: &trunc,
            },
            obs_next: Obs::Array(Array {
                dtype: DType::F64,
                shape: &shape_o,
                data: &onb,
            }),
            extras: &[],
            mask: Some(Array {
                dtype: DType::Bool,
                shape: &shape_n,
                data: &mask,
            }),
            env_ids: None,
        };
        core.add(&s).unwrap();
    }
    refs
}

/// Check one sampled row against the reference; returns (env, position in env's transitions).
#[allow(clippy::too_many_arguments)]
fn check_sample(
    refs: &[RefEnv],
    seg: u64,
    out: &Out,
    i: usize,
    n_step: usize,
    gamma: f64,
) -> Result<(usize, usize), TestCaseError> {
    let id = out.obs_id(i, false);
    let (e, pos) = refs
        .iter()
        .enumerate()
        .find_map(|(e, r)| r.trans.iter().position(|t| t.0 == id).map(|p| (e, p)))
        .ok_or_else(|| TestCaseError::fail(format!("sampled obs {id} was never a transition")))?;
    let r = &refs[e];
    let t = r.trans[pos];
    // the row must still be alive (not overwritten by the ring)
    prop_assert!(
        t.6 + seg >= r.rows,
        "sampled an overwritten row (row {} of {}, seg {seg})",
        t.6,
        r.rows
    );
    // window: stays inside the episode, stops at its end or the newest transition
    let ep: Vec<_> = r.trans.iter().filter(|x| x.5 == t.5).collect();
    let k0 = ep.iter().position(|x| x.0 == id).unwrap_or(0);
    let m = n_step.min(ep.len() - k0);
    let mut want_rew = 0.0f64;
    let mut g = 1.0f64;
    for k in 0..m {
        want_rew += g * ep[k0 + k].2 as f64;
        g *= gamma;
    }
    let endt = ep[k0 + m - 1];
    let want_next = endt.1;
    let want_disc = g * (1.0 - endt.3 as u8 as f64);
    prop_assert_eq!(out.obs_id(i, true), want_next, "obs_next of sample {}", i);
    prop_assert!(
        (out.rew[i] as f64 - want_rew).abs() < 1e-4,
        "rew {} vs {}",
        out.rew[i],
        want_rew
    );
    prop_assert!(
        (out.disc[i] as f64 - want_disc).abs() < 1e-6,
        "discount {} vs {}",
        out.disc[i],
        want_disc
    );
    prop_assert_eq!(out.term[i], endt.3 as u8);
    prop_assert_eq!(out.trunc[i], endt.4 as u8);
    Ok((e, pos))
}

fn alive_transitions(refs: &[RefEnv], seg: u64) -> usize {
    refs.iter()
        .map(|r| r.trans.iter().filter(|t| t.6 + seg >= r.rows).count())
        .sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    /// The uniform draw leaves out each env's newest row (it never holds a transition): no
    /// transition may be lost with it. Every alive transition turns up within 50 draws per
    /// transition (a given one is missed with probability below e^-50 per case).
    #[test]
    fn every_alive_transition_is_drawn(
        n_envs in 1usize..4,
        seg in 2usize..12,
        steps in proptest::collection::vec(proptest::collection::vec(ev(), 3), 1..40),
        seed in any::<u64>(),
    ) {
        let mut core = ReplayCore::new(seg * n_envs, n_envs, seed).unwrap();
        let refs = run(&mut core, n_envs, &steps);
        let alive: std::collections::BTreeSet<u64> = refs
            .iter()
            .flat_map(|r| r.trans.iter().filter(move |t| t.6 + seg as u64 >= r.rows).map(|t| t.0.to_bits()))
            .collect();
        prop_assert_eq!(core.len(), alive.len());
        let (b, mut seen) = (64, std::collections::BTreeSet::new());
        let mut out = Out::new(b, 1);
        for _ in 0..(50 * alive.len()).div_ceil(b) {
            core.sample(b, 1, 0.99, &mut out.batch(false), None).unwrap();
            seen.extend((0..b).map(|i| out.obs_id(i, false).to_bits()));
        }
        prop_assert_eq!(seen, alive);
    }

    #[test]
    fn samples_match_reference(
        n_envs in 1usize..4,
        seg in 2usize..24,
        steps in proptest::collection::vec(proptest::collection::vec(ev(), 3), 1..90),
        n_step in 1usize..5,
        gamma in prop_oneof![Just(1.0f64), Just(0.5), 0.0f64..1.0],
        seed in any::<u64>(),
    ) {
        let mut core = ReplayCore::new(seg * n_envs, n_envs, seed).unwrap();
        let refs = run(&mut core, n_envs, &steps);
        prop_assert_eq!(core.len(), alive_transitions(&refs, seg as u64));
        if core.is_empty() {
            let mut out = Out::new(4, 1);
            let mut bo = out.batch(false);
            prop_assert!(core.sample(4, n_step, gamma, &mut bo, None).is_err());
            return Ok(());
        }
        let b = 64;
        let mut out = Out::new(b, 1);
        {
            let mut bo = out.batch(false);
            core.sample(b, n_step, gamma, &mut bo, None).unwrap();
        }
        for i in 0..b {
            check_sample(&refs, seg as u64, &out, i, n_step, gamma)?;
        }
        // episode queries agree with the reference
        let idx: Vec<i64> = out.idx.clone();
        let (starts, ends, lens) = core.episode_bounds(&idx).unwrap();
        let nexts = core.next(&idx).unwrap();
        let prevs = core.prev(&idx).unwrap();
        for i in 0..b {
            let (e, pos) = check_sample(&refs, seg as u64, &out, i, n_step, gamma)?;
            let r = &refs[e];
            let t = r.trans[pos];
            let alive: Vec<_> = r.trans.iter().filter(|x| x.5 == t.5 && x.6 + seg as u64 >= r.rows).collect();
            prop_assert_eq!(lens[i] as usize, alive.len());
            let first = alive[0];
            prop_assert_eq!(starts[i] as u64 % seg as u64, first.6 % seg as u64 + (e as u64 * seg as u64) % seg as u64);
            prop_assert!(ends[i] >= 0);
            let k = alive.iter().position(|x| x.0 == t.0).unwrap();
            let want_next = if k + 1 < alive.len() { alive[k + 1].6 } else { t.6 };
            let want_prev = if k > 0 { alive[k - 1].6 } else { t.6 };
            prop_assert_eq!(nexts[i] as u64, e as u64 * seg as u64 + want_next % seg as u64);
            prop_assert_eq!(prevs[i] as u64, e as u64 * seg as u64 + want_prev % seg as u64);
        }
    }

    #[test]
    fn prioritized_samples_are_transitions_and_state_round_trips(
        n_envs in 1usize..3,
        seg in 2usize..20,
        steps in proptest::collection::vec(proptest::collection::vec(ev(), 2), 1..60),
        prios in proptest::collection::vec(0.0f64..5.0, 64),
        seed in any::<u64>(),
    ) {
        let mut core = ReplayCore::new(seg * n_envs, n_envs, seed).unwrap();
        core.enable_per(0.7, 0.5, 1e-6).unwrap();
        let refs = run(&mut core, n_envs, &steps);
        if core.is_empty() {
            return Ok(());
        }
        let b = 64;
        let mut out = Out::new(b, 1);
        {
            let mut bo = out.batch(true);
            core.sample(b, 2, 0.9, &mut bo, None).unwrap();
        }
        for i in 0..b {
            check_sample(&refs, seg as u64, &out, i, 2, 0.9)?;
            prop_assert!(out.w[i] > 0.0 && out.w[i] <= 1.0 + 1e-6);
        }
        let idx = out.idx.clone();
        core.update_priorities(&idx, &prios).unwrap();
        // export, import into a fresh core, and both sample the same
        let parts: Vec<_> = core.state_parts().into_iter().map(|p| rlcore_core::StatePart {
            name: p.name, dtype: p.dtype, shape: p.shape, bytes: std::borrow::Cow::Owned(p.bytes.into_owned()),
        }).collect();
        let mut other = ReplayCore::new(seg * n_envs, n_envs, 0).unwrap();
        other.enable_per(0.7, 0.5, 1e-6).unwrap();
        let (o, s) = core.schema();
        other.declare(o, s).unwrap();
        other.load_state(&parts).unwrap();
        let mut out2 = Out::new(b, 1);
        {
            let mut bo = out.batch(true);
            core.sample(b, 3, 0.9, &mut bo, None).unwrap();
        }
        {
            let mut bo = out2.batch(true);
            other.sample(b, 3, 0.9, &mut bo, None).unwrap();
        }
        prop_assert_eq!(&out.idx, &out2.idx);
        prop_assert_eq!(&out.rew, &out2.rew);
        prop_assert_eq!(&out.w, &out2.w);
        // the exported state round-trips byte for byte; export checks its destinations
        let again: Vec<_> = other.state_parts().into_iter().map(|p| p.bytes.into_owned()).collect();
        let first: Vec<_> = core.state_parts().into_iter().map(|p| p.bytes.into_owned()).collect();
        prop_assert_eq!(first, again);
        let mut short = vec![0u8; 3];
        let mut dsts: Vec<&mut [u8]> = vec![short.as_mut_slice()];
        prop_assert!(core.export_state(&mut dsts).is_err());
    }
}

/// HER: goals come from the same episode at a step >= t (future) even after the ring wrapped
/// twice (CASES.md #9), and the native reward is the Fetch threshold reward.
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

/// One operation of a random prioritized-replay session.
#[derive(Debug, Clone)]
enum PerOp {
    Add(Vec<Vec<Ev>>),
    Update(Vec<(usize, f64)>),
    Sample(usize),
    Clear,
}

fn extreme_priority() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(5e-324),
        Just(1e-310),
        Just(f64::MIN_POSITIVE),
        Just(1e-300),
        Just(1e139),
        Just(rlcore_core::MAX_PRIORITY),
        Just(1e300),
        Just(1e308),
        Just(f64::MAX),
        0.0f64..10.0,
    ]
}

fn per_op(rows: usize) -> impl Strategy<Value = PerOp> {
    prop_oneof![
        3 => proptest::collection::vec(proptest::collection::vec(ev(), 2), 1..12).prop_map(PerOp::Add),
        3 => proptest::collection::vec((0..rows, extreme_priority()), 1..6).prop_map(PerOp::Update),
        2 => (1usize..40).prop_map(PerOp::Sample),
        1 => Just(PerOp::Clear),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever adds (new rows take the running maximum), updates with extreme values, clears and
    /// samples come, the total priority mass stays finite, updates above MAX_PRIORITY are refused
    /// before any write, no zero-priority or non-transition row is drawn and every weight is a
    /// finite number in (0, 1].
    #[test]
    fn priority_mass_stays_finite_and_weights_in_unit_interval(
        alpha in prop_oneof![Just(0.0f64), Just(0.5), Just(1.0), Just(2.0)],
        eps in prop_oneof![Just(1e-6f64), Just(1e-140), Just(1e-300)],
        ops in proptest::collection::vec(per_op(16), 1..40),
        seed in any::<u64>(),
    ) {
        let mut core = ReplayCore::new(16, 2, seed).unwrap();
        let floor = eps.powf(alpha);
        let enabled = core.enable_per(alpha, 0.6, eps);
        if !(floor > 0.0 && floor <= rlcore_core::MAX_PRIORITY) {
            prop_assert!(enabled.is_err());
            return Ok(());
        }
        enabled.unwrap();
        let all: Vec<i64> = (0..16).collect();
        for op in ops {
            match op {
                PerOp::Add(steps) => {
                    run(&mut core, 2, &steps);
                }
                PerOp::Clear => core.clear(),
                PerOp::Update(u) => {
                    let idx: Vec<i64> = u.iter().map(|x| x.0 as i64).collect();
                    let p: Vec<f64> = u.iter().map(|x| x.1).collect();
                    let before = core.priorities(&all).unwrap();
                    let too_big = p.iter().any(|&x| (x + eps).powf(alpha) > rlcore_core::MAX_PRIORITY);
                    let res = core.update_priorities(&idx, &p);
                    prop_assert_eq!(res.is_err(), too_big, "{:?}", res);
                    if too_big {
                        prop_assert_eq!(core.priorities(&all).unwrap(), before);
                    } else {
                        let not_t = core.is_transition(&idx).unwrap().iter().filter(|t| !**t).count();
                        prop_assert_eq!(res.unwrap(), not_t);
                    }
                }
                PerOp::Sample(b) => {
                    if core.is_empty() {
                        continue;
                    }
                    let mut out = Out::new(b, 1);
                    {
                        let mut bo = out.batch(true);
                        core.sample(b, 1, 0.9, &mut bo, None).unwrap();
                    }
                    prop_assert!(core.is_transition(&out.idx).unwrap().iter().all(|&t| t));
                    prop_assert!(core.priorities(&out.idx).unwrap().iter().all(|&p| p > 0.0));
                    prop_assert!(out.w.iter().all(|&w| w.is_finite() && w > 0.0 && w <= 1.0), "{:?}", out.w);
                }
            }
            let (total, _, max_p) = core.priority_stats().unwrap();
            let leaves = core.priorities(&all).unwrap();
            let sum: f64 = leaves.iter().sum();
            prop_assert!(total.is_finite() && max_p <= rlcore_core::MAX_PRIORITY);
            prop_assert!(leaves.iter().all(|&p| p <= rlcore_core::MAX_PRIORITY));
            prop_assert!((total - sum).abs() <= 1e-9 * sum, "total {} vs {}", total, sum);
        }
    }
}

/// A sampled index names the transition it was drawn for (issue 38): once the ring has written
/// a newer transition into its row, an update through it is skipped and counted, and the newer
/// transition keeps its priority; a bare row index names whatever the row holds now.
#[test]
fn stale_sampled_index_skips_the_transition_that_overwrote_its_row() {
    let mut core = ReplayCore::new(8, 1, 0).unwrap();
    core.enable_per(1.0, 0.4, 1e-9).unwrap();
    let step = vec![Ev {
        rew: 0.0,
        term: false,
        trunc: false,
        jump: false,
        masked: false,
    }];
    run(&mut core, 1, &vec![step.clone(); 7]);
    let mut out = Out::new(64, 1);
    {
        let mut bo = out.batch(true);
        core.sample(64, 1, 0.9, &mut bo, None).unwrap();
    }
    let gen1 = |r: i64| r + (1 << rlcore_core::index::ROW_BITS);
    assert!((0..7).all(|r| out.idx.contains(&gen1(r))), "{:?}", out.idx);
    // 13 more steps (a new episode): the ring wraps, the newest transition sits in a row that
    // was sampled above for an older transition
    run(&mut core, 1, &vec![step.clone(); 13]);
    let last = core.last_index()[0];
    let stale = gen1(last);
    assert!(out.idx.contains(&stale));
    let before = core.priorities(&[last]).unwrap();
    assert_eq!(core.update_priorities(&[stale], &[1000.0]).unwrap(), 1);
    assert_eq!(core.priorities(&[last]).unwrap(), before);
    assert_eq!(core.priorities(&[stale]).unwrap(), vec![0.0]);
    assert_eq!(
        core.is_transition(&[stale, last]).unwrap(),
        vec![false, true]
    );
    assert!(matches!(
        core.prev(&[stale]),
        Err(rlcore_core::CoreError::InvalidValue(_))
    ));
    // the bare row names the newer transition; so does a fresh sample's index of it
    assert_eq!(core.update_priorities(&[last], &[50.0]).unwrap(), 0);
    assert_eq!(core.priorities(&[last]).unwrap(), vec![50.0 + 1e-9]);
    let fresh = (2..8)
        .map(|g| last + (g << rlcore_core::index::ROW_BITS))
        .find(|&i| core.is_transition(&[i]).unwrap()[0])
        .unwrap();
    assert_eq!(core.update_priorities(&[fresh], &[7.0]).unwrap(), 0);
    assert_eq!(core.priorities(&[fresh]).unwrap(), vec![7.0 + 1e-9]);
}

/// One env's row of a vector step: (obs id, next obs id, rew, term, trunc, masked).
type Row = (f64, f64, f32, bool, bool, bool);

/// The per-env streams of a generated vector-env run (obs ids continue the previous obs_next
/// unless the event jumps or the episode ended), as `run` builds them.
fn env_streams(n_envs: usize, stream: &[Vec<Ev>]) -> Vec<Vec<Row>> {
    let mut out = vec![Vec::new(); n_envs];
    let mut last_next = vec![None::<f64>; n_envs];
    let mut next_id = 1.0f64;
    for step in stream {
        for (e, ev) in step.iter().enumerate().take(n_envs) {
            let o = match last_next[e] {
                Some(x) if !ev.jump => x,
                _ => {
                    next_id += 1.0;
                    next_id
                }
            };
            next_id += 1.0;
            out[e].push((o, next_id, ev.rew, ev.term, ev.trunc, ev.masked));
            if !ev.masked {
                last_next[e] = if ev.term || ev.trunc {
                    None
                } else {
                    Some(next_id)
                };
            }
        }
    }
    out
}

/// Add `rows` (env, row) in one call: with `env_ids` when `ids` is true (and then only the
/// listed envs), else one row per env in env order.
fn add_rows(core: &mut ReplayCore, rows: &[(usize, Row)], ids: bool) -> rlcore_core::Result<()> {
    let k = rows.len();
    let ob = f64s(&rows.iter().map(|r| r.1 .0).collect::<Vec<_>>());
    let onb = f64s(&rows.iter().map(|r| r.1 .1).collect::<Vec<_>>());
    let act: Vec<u8> = rows
        .iter()
        .flat_map(|r| (r.1 .0 as f32).to_ne_bytes())
        .collect();
    let rb: Vec<u8> = rows.iter().flat_map(|r| r.1 .2.to_ne_bytes()).collect();
    let term: Vec<u8> = rows.iter().map(|r| r.1 .3 as u8).collect();
    let trunc: Vec<u8> = rows.iter().map(|r| r.1 .4 as u8).collect();
    let mask: Vec<u8> = rows.iter().map(|r| (!r.1 .5) as u8).collect();
    let env: Vec<u8> = rows
        .iter()
        .flat_map(|r| (r.0 as i64).to_ne_bytes())
        .collect();
    let (shape_o, shape_n) = ([k, 1], [k]);
    let arr = |dtype, shape, data| Array { dtype, shape, data };
    let s = Steps {
        obs: Obs::Array(arr(DType::F64, &shape_o, &ob)),
        act: arr(DType::F32, &shape_o, &act),
        rew: arr(DType::F32, &shape_n, &rb),
        terminated: arr(DType::U8, &shape_n, &term),
        truncated: arr(DType::U8, &shape_n, &trunc),
        obs_next: Obs::Array(arr(DType::F64, &shape_o, &onb)),
        extras: &[],
        mask: Some(arr(DType::Bool, &shape_n, &mask)),
        env_ids: ids.then(|| arr(DType::I64, &shape_n, &env)),
    };
    core.add(&s).map(|_| ())
}

fn state_bytes(core: &ReplayCore) -> Vec<Vec<u8>> {
    core.state_parts()
        .into_iter()
        .map(|p| p.bytes.into_owned())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    /// Partial vector steps (`env_ids`): any interleaving of the per-env streams, in adds of
    /// distinct envs in any order, stores exactly what lock-step adds store (rows, episode
    /// index, continuity cuts, priorities) and samples the same batches at the same seed.
    #[test]
    fn env_id_adds_of_any_interleaving_equal_lock_step(
        n_envs in 1usize..5,
        seg in 2usize..24,
        steps in proptest::collection::vec(proptest::collection::vec(ev(), 4), 1..60),
        picks in proptest::collection::vec((0usize..4, any::<bool>()), 0..400),
        prioritized in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let streams = env_streams(n_envs, &steps);
        let fresh = || {
            let mut c = ReplayCore::new(seg * n_envs, n_envs, seed).unwrap();
            if prioritized {
                c.enable_per(0.6, 0.4, 1e-6).unwrap();
            }
            c
        };
        let mut lock = fresh();
        for t in 0..steps.len() {
            let rows: Vec<_> = (0..n_envs).map(|e| (e, streams[e][t])).collect();
            add_rows(&mut lock, &rows, false).unwrap();
        }
        // interleave: each pick takes the next row of an env (picks run out: the rest in env
        // order); a call closes when an env would repeat or the pick says so
        let mut part = fresh();
        let mut pos = vec![0usize; n_envs];
        let mut order: Vec<usize> = picks.iter().map(|p| p.0 % n_envs).collect();
        for e in 0..n_envs {
            order.extend(std::iter::repeat_n(e, steps.len()));
        }
        let mut call: Vec<(usize, Row)> = Vec::new();
        for (k, &e) in order.iter().enumerate() {
            if pos[e] == steps.len() {
                continue;
            }
            if call.iter().any(|r| r.0 == e) || picks.get(k).is_some_and(|p| p.1) {
                if !call.is_empty() {
                    add_rows(&mut part, &call, true).unwrap();
                }
                call.clear();
            }
            // masked rows are left out or sent masked, alternately
            let row = streams[e][pos[e]];
            if !(row.5 && pos[e] % 2 == 0) {
                call.push((e, row));
            }
            pos[e] += 1;
        }
        if !call.is_empty() {
            add_rows(&mut part, &call, true).unwrap();
        }
        if !part.has_schema() {
            // every row was masked and left out: nothing defined the columns
            prop_assert!(lock.is_empty());
            return Ok(());
        }
        prop_assert_eq!(state_bytes(&lock), state_bytes(&part));
        prop_assert_eq!(lock.len(), part.len());
        if lock.is_empty() {
            return Ok(());
        }
        let b = 32;
        let (mut o1, mut o2) = (Out::new(b, 1), Out::new(b, 1));
        lock.sample(b, 3, 0.9, &mut o1.batch(prioritized), None).unwrap();
        part.sample(b, 3, 0.9, &mut o2.batch(prioritized), None).unwrap();
        prop_assert_eq!(&o1.idx, &o2.idx);
        prop_assert_eq!(&o1.obs, &o2.obs);
        prop_assert_eq!(&o1.obs_next, &o2.obs_next);
        prop_assert_eq!(&o1.rew, &o2.rew);
        prop_assert_eq!(&o1.disc, &o2.disc);
    }
}

/// Bad env ids fail the whole add with a typed error and leave the buffer byte for byte as it
/// was (the first add included: it defines no columns).
#[test]
fn bad_env_ids_raise_typed_errors_and_change_nothing() {
    use rlcore_core::CoreError;
    let row = |o: f64| (o, o + 0.5, 1.0f32, false, false, false);
    let mut core = ReplayCore::new(16, 3, 1).unwrap();
    // before the first add: a failed call must not define the columns
    let err = add_rows(&mut core, &[(3, row(1.0))], true);
    assert!(matches!(err, Err(CoreError::InvalidValue(m)) if m.contains("[0, num_envs=3)")));
    assert!(!core.has_schema());
    add_rows(&mut core, &[(2, row(1.0)), (0, row(2.0))], true).unwrap();
    let before = state_bytes(&core);
    let cases: Vec<(Vec<(usize, Row)>, &str)> = vec![
        (vec![(1, row(3.0)), (1, row(4.0))], "appears earlier"),
        (vec![(0, row(3.0)), (7, row(4.0))], "num_envs=3"),
    ];
    for (rows, msg) in cases {
        let err = add_rows(&mut core, &rows, true);
        assert!(
            matches!(&err, Err(CoreError::InvalidValue(m)) if m.contains(msg)),
            "{err:?}"
        );
        assert_eq!(state_bytes(&core), before);
    }
    // wrong length, negative ids, floats, a 2-d id array, 0-d rewards
    let ob = f64s(&[5.0, 6.0]);
    let act = [0u8; 8];
    let rew = [0u8; 8];
    let flags = [0u8; 2];
    let ids_i64 = |v: &[i64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_ne_bytes()).collect() };
    let short = ids_i64(&[0]);
    let neg = ids_i64(&[-1, 0]);
    let two = ids_i64(&[0, 1]);
    let fl: Vec<u8> = [0.0f64, 1.0].iter().flat_map(|x| x.to_ne_bytes()).collect();
    type Case<'a> = (DType, &'a [usize], &'a [u8], fn(&CoreError) -> bool);
    let bad: [Case<'_>; 4] = [
        (DType::I64, &[1], &short, |e| {
            matches!(e, CoreError::Shape(_))
        }),
        (DType::I64, &[2], &neg, |e| {
            matches!(e, CoreError::InvalidValue(_))
        }),
        (DType::F64, &[2], &fl, |e| matches!(e, CoreError::DType(_))),
        (DType::I64, &[2, 1], &two, |e| {
            matches!(e, CoreError::Shape(_))
        }),
    ];
    for (dtype, shape, data, ok) in bad {
        let s = Steps {
            obs: Obs::Array(Array {
                dtype: DType::F64,
                shape: &[2, 1],
                data: &ob,
            }),
            act: Array {
                dtype: DType::F32,
                shape: &[2, 1],
                data: &act,
            },
            rew: Array {
                dtype: DType::F32,
                shape: &[2],
                data: &rew,
            },
            terminated: Array {
                dtype: DType::U8,
                shape: &[2],
                data: &flags,
            },
            truncated: Array {
                dtype: DType::U8,
                shape: &[2],
                data: &flags,
            },
            obs_next: Obs::Array(Array {
                dtype: DType::F64,
                shape: &[2, 1],
                data: &ob,
            }),
            extras: &[],
            mask: None,
            env_ids: Some(Array { dtype, shape, data }),
        };
        let err = core.add(&s).unwrap_err();
        assert!(ok(&err), "{err:?}");
        assert_eq!(state_bytes(&core), before);
        assert!(matches!(core.extend(&s), Err(CoreError::Usage(_))));
    }
}

/// Buffers whose rows exceed the cache-sized bound of `sample_fused` take its two-stage prefetch
/// path (issue 20): their samples are the planned path's (`sample_at`) for the same rows, field
/// for field, with one-step and n-step windows, over episodes that end in the window and rows
/// that wrap at the segment end.
#[test]
fn large_buffers_sample_what_sample_at_returns() {
    let (n_envs, seg) = (2usize, 160_000usize);
    let mut core = ReplayCore::new(n_envs * seg, n_envs, 3).unwrap(); // ok: test
                                                                      // 1.2 segments per env: the ring wraps; episodes of 1..=7 steps, terminated or truncated
    let n = seg * 6 / 5;
    let mut obs = vec![0.0f64; n * n_envs];
    let mut obs_next = vec![0.0f64; n * n_envs];
    let (mut rew, mut term, mut trunc) = (
        vec![0f32; n * n_envs],
        vec![0u8; n * n_envs],
        vec![0u8; n * n_envs],
    );
    let mut id = 0.0f64;
    for e in 0..n_envs {
        let mut last = None;
        for t in 0..n {
            let j = t * n_envs + e;
            obs[j] = last.unwrap_or_else(|| {
                id += 1.0;
                id
            });
            id += 1.0;
            obs_next[j] = id;
            rew[j] = (j % 13) as f32 - 6.0;
            let end = (t * 7 + e) % 11 == 0;
            term[j] = u8::from(end && t % 2 == 0);
            trunc[j] = u8::from(end && t % 2 == 1);
            last = (!end).then_some(id);
        }
    }
    let act = vec![0u8; n * n_envs * 4];
    let (so, sa, sn) = ([n * n_envs, 1], [n * n_envs, 1], [n * n_envs]);
    let (ob, onb) = (f64s(&obs), f64s(&obs_next));
    let rb: Vec<u8> = rew.iter().flat_map(|r| r.to_ne_bytes()).collect();
    let arr = |dtype, shape: &[usize], data: &[u8]| -> Array<'_> {
        Array {
            dtype,
            shape: shape.to_vec().leak(),
            data: data.to_vec().leak(),
        }
    };
    core.extend(&Steps {
        obs: Obs::Array(arr(DType::F64, &so, &ob)),
        act: arr(DType::F32, &sa, &act),
        rew: arr(DType::F32, &sn, &rb),
        terminated: arr(DType::U8, &sn, &term),
        truncated: arr(DType::U8, &sn, &trunc),
        obs_next: Obs::Array(arr(DType::F64, &so, &onb)),
        extras: &[],
        mask: None,
        env_ids: None,
    })
    .unwrap(); // ok: test
    assert!(
        core.nbytes() > 8 << 20,
        "the buffer must exceed the staged-prefetch bound"
    );
    let b = 512;
    for n_step in [1usize, 3] {
        for _ in 0..4 {
            let (mut got, mut want) = (Out::new(b, 1), Out::new(b, 1));
            core.sample(b, n_step, 0.9, &mut got.batch(false), None)
                .unwrap(); // ok: test
            let idx = got.idx.clone();
            core.sample_at(&idx, None, n_step, 0.9, &mut want.batch(false), None)
                .unwrap(); // ok: test
            assert_eq!(got.obs, want.obs);
            assert_eq!(got.obs_next, want.obs_next);
            assert_eq!(got.rew, want.rew);
            assert_eq!(got.term, want.term);
            assert_eq!(got.trunc, want.trunc);
            assert_eq!(got.disc, want.disc);
            assert_eq!(got.idx, want.idx);
        }
    }
    // the benchmarks' floor runs the same staged pipeline without the validity check: it takes
    // every drawn row, and copies the same bytes sample_at does for those that are transitions
    let mut floor = Out::new(b, 1);
    core.floor_gather(b, 1, 9, &mut floor.batch(false)).unwrap(); // ok: test
    let is_t = core.is_transition(&floor.idx).unwrap(); // ok: test
    let taken: Vec<usize> = (0..b).filter(|&i| is_t[i]).collect();
    assert!(
        taken.len() < b,
        "the floor takes rows that hold no transition too"
    );
    let idx: Vec<i64> = taken.iter().map(|&i| floor.idx[i]).collect();
    let mut want = Out::new(idx.len(), 1);
    core.sample_at(&idx, None, 1, 0.9, &mut want.batch(false), None)
        .unwrap(); // ok: test
    for (k, &i) in taken.iter().enumerate() {
        assert_eq!(floor.obs_id(i, false), want.obs_id(k, false));
        assert_eq!(floor.obs_id(i, true), want.obs_id(k, true));
        assert_eq!(
            (floor.rew[i], floor.term[i], floor.trunc[i]),
            (want.rew[k], want.term[k], want.trunc[k])
        );
    }
    // with n_step = 3 it reads the window's rows as they come: for rows whose 3-step window
    // lies inside one running episode, the observation after it and the sum of its rewards
    // are those of sample_at(n_step = 3, gamma = 1)
    let mut floor = Out::new(b, 1);
    core.floor_gather(b, 3, 10, &mut floor.batch(false))
        .unwrap(); // ok: test
    let is_t = core.is_transition(&floor.idx).unwrap(); // ok: test
    let taken: Vec<usize> = (0..b).filter(|&i| is_t[i]).collect();
    let idx: Vec<i64> = taken.iter().map(|&i| floor.idx[i]).collect();
    let mut want = Out::new(idx.len(), 1);
    core.sample_at(&idx, None, 3, 0.5, &mut want.batch(false), None)
        .unwrap(); // ok: test
    let mut sums = Out::new(idx.len(), 1);
    core.sample_at(&idx, None, 3, 1.0, &mut sums.batch(false), None)
        .unwrap(); // ok: test
    let mut whole = 0;
    for (k, &i) in taken.iter().enumerate() {
        // discount 0.5^3: the window has 3 steps and does not end in a termination
        if want.disc[k] != 0.125 {
            continue;
        }
        whole += 1;
        assert_eq!(floor.obs_id(i, false), want.obs_id(k, false));
        assert_eq!(floor.obs_id(i, true), want.obs_id(k, true));
        assert!((floor.rew[i] - sums.rew[k]).abs() <= 1e-5 * sums.rew[k].abs().max(1.0));
    }
    assert!(whole > b / 4, "only {whole} whole windows among {b} rows");
}
