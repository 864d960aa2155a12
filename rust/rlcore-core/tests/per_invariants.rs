//! Prioritized replay invariants: finite mass, weights in (0, 1], stale indices skipped.
#![allow(clippy::needless_range_loop)]

mod common;

use common::*;
use proptest::prelude::*;
use rlcore_core::ReplayCore;

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
