//! Partial vector steps (`env_ids`): any interleaving equals lock-step adds; bad ids change
//! nothing.
#![allow(clippy::needless_range_loop)]

mod common;

use common::*;
use proptest::prelude::*;
use rlcore_core::{Array, DType, Obs, ReplayCore, Steps};

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
