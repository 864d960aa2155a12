//! Property tests of the replay core against a plain reference model: random vector-env
//! streams with terminations, truncations, continuity breaks and ring wrap-around.
#![allow(clippy::needless_range_loop)]

mod common;

use common::*;
use proptest::prelude::*;
use rlcore_core::{Array, DType, Obs, ReplayCore, Steps};

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
