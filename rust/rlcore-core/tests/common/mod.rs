//! What the property tests share: the generated vector-env streams, the reference model and
//! the sampled batch buffers.
#![allow(dead_code, clippy::needless_range_loop)]

use proptest::prelude::*;
use rlcore_core::{Array, BatchOut, DType, Obs, ReplayCore, Steps};

/// One env step of the generated stream.
#[derive(Debug, Clone, Copy)]
pub struct Ev {
    pub rew: f32,
    pub term: bool,
    pub trunc: bool,
    /// The given obs does not continue the previous obs_next (a shuffled stream).
    pub jump: bool,
    pub masked: bool,
}

pub fn ev() -> impl Strategy<Value = Ev> {
    (0u8..10, 0u8..20, any::<bool>(), 0u8..30, 0u8..10).prop_map(|(r, d, tt, j, m)| Ev {
        rew: r as f32 - 3.0,
        term: d == 0 && tt,
        trunc: d == 0 && !tt,
        jump: j == 0,
        masked: m == 0,
    })
}

/// Reference: per env, the transitions written in order, with their episode number, plus the
/// row accounting of docs/replay-buffer.md (L + 1 rows per episode, one fresh row when an episode opens).
#[derive(Default, Clone)]
pub struct RefEnv {
    /// (obs id, next obs id, rew, term, trunc, episode number, row number)
    pub trans: Vec<(f64, f64, f32, bool, bool, usize, u64)>,
    pub rows: u64,
    pub open: bool,
    pub episode: usize,
    pub last_next: f64,
}

pub fn f64s(x: &[f64]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

pub struct Out {
    pub obs: Vec<u8>,
    pub obs_next: Vec<u8>,
    pub act: Vec<u8>,
    pub rew: Vec<f32>,
    pub term: Vec<u8>,
    pub trunc: Vec<u8>,
    pub disc: Vec<f32>,
    pub idx: Vec<i64>,
    pub w: Vec<f32>,
}

impl Out {
    pub fn new(b: usize, obs_dim: usize) -> Self {
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
    pub fn batch(&mut self, per: bool) -> BatchOut<'_> {
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
    pub fn obs_id(&self, i: usize, next: bool) -> f64 {
        let b = if next { &self.obs_next } else { &self.obs };
        f64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap())
    }
}

/// Run a stream of `steps` vector steps into a core and the reference.
pub fn run(core: &mut ReplayCore, n_envs: usize, stream: &[Vec<Ev>]) -> Vec<RefEnv> {
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
pub fn check_sample(
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

pub fn alive_transitions(refs: &[RefEnv], seg: u64) -> usize {
    refs.iter()
        .map(|r| r.trans.iter().filter(|t| t.6 + seg >= r.rows).count())
        .sum()
}
