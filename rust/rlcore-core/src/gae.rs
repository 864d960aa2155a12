//! Generalized advantage estimation and n-step returns: on typed slices, and on the arrays a
//! front end hands in ([`GaeInputs`], [`NstepInputs`], which check dtypes and shapes).

use crate::dtype::{Array, DType};
use crate::error::{CoreError, Result};
use crate::mem::cast_or_copy;
use crate::validate::unit as check_unit;

/// The arrays and parameters of one GAE call as a front end hands them in: `rew`, `values`,
/// `next_values` float32 `[T, N]`, `terminated`, `truncated` bool or uint8 `[T, N]`.
#[derive(Debug, Clone, Copy)]
pub struct GaeInputs<'a> {
    pub rew: Array<'a>,
    pub values: Array<'a>,
    pub next_values: Array<'a>,
    pub terminated: Array<'a>,
    pub truncated: Array<'a>,
    pub gamma: f64,
    pub gae_lambda: f64,
}

impl GaeInputs<'_> {
    /// The rollout's shape `[T, N]` after checking every argument.
    ///
    /// Errors: `InvalidValue` for `gamma` or `gae_lambda` outside [0, 1]; `DType` for values
    /// that are not float32 or flags that are not bool or uint8; `Shape` for a `rew` that is not
    /// 2-d or an array of another shape.
    pub fn check(&self) -> Result<[usize; 2]> {
        check_unit("gamma", self.gamma)?;
        check_unit("gae_lambda", self.gae_lambda)?;
        check_f32("rew", &self.rew)?;
        let &[t, n] = self.rew.shape else {
            return Err(CoreError::shape(format!(
                "rew: expected shape [T, N], got {:?}",
                self.rew.shape
            )));
        };
        check_f32("values", &self.values)?;
        check_f32("next_values", &self.next_values)?;
        check_flags("terminated", &self.terminated)?;
        check_flags("truncated", &self.truncated)?;
        check_like_rew(
            &self.rew,
            [
                ("values", &self.values),
                ("next_values", &self.next_values),
                ("terminated", &self.terminated),
                ("truncated", &self.truncated),
            ],
        )?;
        Ok([t, n])
    }

    /// [`GaeInputs::run`] into new vectors: `([T, N], advantages, returns)`.
    ///
    /// Errors: as [`GaeInputs::check`].
    pub fn run_new(&self) -> Result<([usize; 2], Vec<f32>, Vec<f32>)> {
        let [t, n] = self.check()?;
        let (mut adv, mut ret) = (vec![0.0; t * n], vec![0.0; t * n]);
        self.run(&mut adv, &mut ret)?;
        Ok(([t, n], adv, ret))
    }

    /// Check, then [`compute_gae`] into `advantages` and `returns` (T * N elements each).
    ///
    /// Errors: as [`GaeInputs::check`]; `Shape` for outputs of another size.
    pub fn run(&self, advantages: &mut [f32], returns: &mut [f32]) -> Result<()> {
        let [t, n] = self.check()?;
        compute_gae(
            &cast_or_copy(self.rew.data),
            &cast_or_copy(self.values.data),
            &cast_or_copy(self.next_values.data),
            self.terminated.data,
            self.truncated.data,
            t,
            n,
            self.gamma as f32,
            self.gae_lambda as f32,
            advantages,
            returns,
        )
    }
}

/// The arrays and parameters of one n-step returns call as a front end hands them in: `rew`
/// float32 `[T]`, `terminated`, `truncated` bool or uint8 `[T]`.
#[derive(Debug, Clone, Copy)]
pub struct NstepInputs<'a> {
    pub rew: Array<'a>,
    pub terminated: Array<'a>,
    pub truncated: Array<'a>,
    pub n_step: usize,
    pub gamma: f64,
}

impl NstepInputs<'_> {
    /// Check every argument, then [`compute_nstep_returns`]: `(returns, discounts, horizons)`.
    ///
    /// Errors: `InvalidValue` for `gamma` outside [0, 1] or `n_step < 1`; `DType` for rewards
    /// that are not float32 or flags that are not bool or uint8; `Shape` for a `rew` that is not
    /// 1-d or flags of another shape.
    pub fn run(&self) -> Result<(Vec<f32>, Vec<f32>, Vec<i64>)> {
        check_unit("gamma", self.gamma)?;
        check_f32("rew", &self.rew)?;
        let &[t] = self.rew.shape else {
            return Err(CoreError::shape(format!(
                "rew: expected shape [T], got {:?}",
                self.rew.shape
            )));
        };
        check_flags("terminated", &self.terminated)?;
        check_flags("truncated", &self.truncated)?;
        check_like_rew(
            &self.rew,
            [
                ("terminated", &self.terminated),
                ("truncated", &self.truncated),
            ],
        )?;
        let (mut ret, mut disc, mut hor) = (vec![0f32; t], vec![0f32; t], vec![0i64; t]);
        compute_nstep_returns(
            &cast_or_copy(self.rew.data),
            self.terminated.data,
            self.truncated.data,
            self.n_step,
            self.gamma as f32,
            &mut ret,
            &mut disc,
            &mut hor,
        )?;
        Ok((ret, disc, hor))
    }
}

fn check_f32(what: &str, a: &Array<'_>) -> Result<()> {
    if a.dtype == DType::F32 {
        Ok(())
    } else {
        Err(CoreError::dtype(format!(
            "{what}: expected float32, got {}",
            a.dtype.name()
        )))
    }
}

fn check_flags(what: &str, a: &Array<'_>) -> Result<()> {
    if matches!(a.dtype, DType::Bool | DType::U8) {
        Ok(())
    } else {
        Err(CoreError::dtype(format!(
            "{what}: expected bool or uint8, got {}",
            a.dtype.name()
        )))
    }
}

fn check_like_rew<const K: usize>(rew: &Array<'_>, others: [(&str, &Array<'_>); K]) -> Result<()> {
    for (what, a) in others {
        if a.shape != rew.shape {
            return Err(CoreError::shape(format!(
                "{what}: expected shape {:?} like rew, got {:?}",
                rew.shape, a.shape
            )));
        }
    }
    Ok(())
}

/// Generalized advantage estimation over a rollout of `t_len` steps of `n_envs` envs, arrays in
/// row-major `[T, N]` order (Schulman et al. 2016, "High-Dimensional Continuous Control Using
/// Generalized Advantage Estimation", eq. 16):
///
/// δ_t = r_t + γ (1 − term_t) V(s_{t+1}) − V(s_t),
/// A_t = δ_t + γ λ (1 − (term_t ∨ trunc_t)) A_{t+1},
/// returns_t = A_t + V(s_t).
///
/// `next_values[t]` is the value of the observation after step t (the true final observation
/// when the step was truncated); a rollout cut mid-episode bootstraps from it at t = T − 1.
#[allow(clippy::too_many_arguments)]
pub fn compute_gae(
    rew: &[f32],
    values: &[f32],
    next_values: &[f32],
    terminated: &[u8],
    truncated: &[u8],
    t_len: usize,
    n_envs: usize,
    gamma: f32,
    gae_lambda: f32,
    advantages: &mut [f32],
    returns: &mut [f32],
) -> Result<()> {
    let n = t_len * n_envs;
    for (name, len) in [
        ("rew", rew.len()),
        ("values", values.len()),
        ("next_values", next_values.len()),
        ("terminated", terminated.len()),
        ("truncated", truncated.len()),
        ("advantages", advantages.len()),
        ("returns", returns.len()),
    ] {
        if len != n {
            return Err(CoreError::shape(format!(
                "compute_gae: {name} has {len} elements, expected T*N = {t_len}*{n_envs} = {n}"
            )));
        }
    }
    check_unit("gamma", gamma as f64)?;
    check_unit("gae_lambda", gae_lambda as f64)?;
    if n == 0 {
        return Ok(());
    }
    let mut last = vec![0.0f32; n_envs];
    let gl = gamma * gae_lambda;
    // one time row at a time, newest first; within a row the envs are independent: zipped
    // row chunks and element iterators carry no bounds checks and vectorise
    let rows = rew
        .chunks_exact(n_envs)
        .zip(values.chunks_exact(n_envs))
        .zip(next_values.chunks_exact(n_envs))
        .zip(terminated.chunks_exact(n_envs))
        .zip(truncated.chunks_exact(n_envs))
        .zip(advantages.chunks_exact_mut(n_envs))
        .zip(returns.chunks_exact_mut(n_envs))
        .rev();
    for ((((((r, v), nv), te), tr), adv), ret) in rows {
        let elems = last
            .iter_mut()
            .zip(r)
            .zip(v)
            .zip(nv)
            .zip(te)
            .zip(tr)
            .zip(adv.iter_mut())
            .zip(ret.iter_mut());
        for (((((((last_e, &r), &v), &nv), &te), &tr), adv), ret) in elems {
            let not_term = f32::from(te == 0);
            let not_done = f32::from((te | tr) == 0);
            let delta = r + gamma * not_term * nv - v;
            let a = delta + gl * not_done * *last_e;
            *last_e = a;
            *adv = a;
            *ret = a + v;
        }
    }
    Ok(())
}

/// n-step returns over a flat stream of steps in time order (one env), where an episode ends at
/// a step with `terminated` or `truncated` set and the last step of the stream ends a running
/// episode. For each step t with m = min(n, steps left in its episode from t):
/// `ret[t] = Σ_{k<m} γ^k r_{t+k}`, `discount[t] = γ^m (1 − term_{t+m−1})`, `horizon[t] = m`
/// (Sutton & Barto 2018, eq. 7.1; the bootstrap observation is the one after step t+m−1).
#[allow(clippy::too_many_arguments)]
pub fn compute_nstep_returns(
    rew: &[f32],
    terminated: &[u8],
    truncated: &[u8],
    n_step: usize,
    gamma: f32,
    ret: &mut [f32],
    discount: &mut [f32],
    horizon: &mut [i64],
) -> Result<()> {
    let n = rew.len();
    for (name, len) in [
        ("terminated", terminated.len()),
        ("truncated", truncated.len()),
        ("returns", ret.len()),
        ("discounts", discount.len()),
        ("horizons", horizon.len()),
    ] {
        if len != n {
            return Err(CoreError::shape(format!(
                "compute_nstep_returns: {name} has {len} elements, expected {n} (the length of rew)"
            )));
        }
    }
    if n_step < 1 {
        return Err(CoreError::value(format!(
            "n_step must be >= 1, got {n_step}"
        )));
    }
    check_unit("gamma", gamma as f64)?;
    // end[t]: one past the last step of t's episode, computed backwards.
    let mut end = n;
    let g = gamma as f64;
    for t in (0..n).rev() {
        if terminated[t] != 0 || truncated[t] != 0 {
            end = t + 1;
        }
        let m = n_step.min(end - t);
        let mut acc = 0.0f64;
        let mut p = 1.0f64;
        for k in 0..m {
            acc += p * rew[t + k] as f64;
            p *= g;
        }
        ret[t] = acc as f32;
        discount[t] = (p * (1.0 - (terminated[t + m - 1] != 0) as u8 as f64)) as f32;
        horizon[t] = m as i64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(x: &[f32]) -> Vec<u8> {
        x.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    #[test]
    fn gae_inputs_are_checked_then_computed_like_compute_gae() {
        let (rew, vals) = (f32s(&[1.0, 2.0, 3.0, 4.0]), f32s(&[0.5, 0.25, 0.0, 1.0]));
        let flags = [0u8, 0, 1, 0];
        let (tn, t4) = ([2usize, 2], [4usize]);
        let a = |dtype, shape, data| Array { dtype, shape, data };
        let good = GaeInputs {
            rew: a(DType::F32, &tn[..], &rew),
            values: a(DType::F32, &tn[..], &vals),
            next_values: a(DType::F32, &tn[..], &vals),
            terminated: a(DType::Bool, &tn[..], &flags),
            truncated: a(DType::U8, &tn[..], &[0; 4]),
            gamma: 0.9,
            gae_lambda: 0.8,
        };
        assert_eq!(good.check(), Ok([2, 2]));
        let (mut adv, mut ret) = ([0f32; 4], [0f32; 4]);
        good.run(&mut adv, &mut ret).unwrap(); // ok: test
        let (mut want_a, mut want_r) = ([0f32; 4], [0f32; 4]);
        let v = [0.5f32, 0.25, 0.0, 1.0];
        compute_gae(
            &[1.0, 2.0, 3.0, 4.0],
            &v,
            &v,
            &flags,
            &[0; 4],
            2,
            2,
            0.9,
            0.8,
            &mut want_a,
            &mut want_r,
        )
        .unwrap(); // ok: test
        assert_eq!((adv, ret), (want_a, want_r));
        let err = |g: GaeInputs<'_>| g.check().unwrap_err(); // ok: test
        assert!(matches!(
            err(GaeInputs { gamma: 1.5, ..good }),
            CoreError::InvalidValue(_)
        ));
        assert!(matches!(
            err(GaeInputs { gae_lambda: -0.1, ..good }),
            CoreError::InvalidValue(m) if m == "gae_lambda must be in [0, 1], got -0.1"
        ));
        let doubles = [0u8; 32];
        let bad_values = GaeInputs {
            values: a(DType::F64, &tn[..], &doubles),
            ..good
        };
        assert!(
            matches!(err(bad_values), CoreError::DType(m) if m == "values: expected float32, got float64")
        );
        let bad_flags = GaeInputs {
            truncated: a(DType::I32, &tn[..], &doubles[..16]),
            ..good
        };
        assert!(matches!(err(bad_flags), CoreError::DType(_)));
        let flat = GaeInputs {
            rew: a(DType::F32, &t4[..], &rew),
            ..good
        };
        assert!(
            matches!(err(flat), CoreError::Shape(m) if m == "rew: expected shape [T, N], got [4]")
        );
        let other = GaeInputs {
            next_values: a(DType::F32, &t4[..], &vals),
            ..good
        };
        assert!(
            matches!(err(other), CoreError::Shape(m) if m.starts_with("next_values: expected shape [2, 2]"))
        );
    }

    #[test]
    fn nstep_inputs_are_checked_then_computed() {
        let rew = f32s(&[1.0; 6]);
        let mut term = [0u8; 6];
        term[5] = 1;
        let (t6, t23) = ([6usize], [2usize, 3]);
        let a = |dtype, shape, data| Array { dtype, shape, data };
        let good = NstepInputs {
            rew: a(DType::F32, &t6[..], &rew),
            terminated: a(DType::U8, &t6[..], &term),
            truncated: a(DType::Bool, &t6[..], &[0; 6]),
            n_step: 3,
            gamma: 0.5,
        };
        let (r, d, h) = good.run().unwrap(); // ok: test
        assert_eq!(r, [1.75, 1.75, 1.75, 1.75, 1.5, 1.0]);
        assert_eq!(d, [0.125, 0.125, 0.125, 0.0, 0.0, 0.0]);
        assert_eq!(h, [3, 3, 3, 3, 2, 1]);
        let err = |g: NstepInputs<'_>| g.run().unwrap_err(); // ok: test
        assert!(matches!(
            err(NstepInputs { n_step: 0, ..good }),
            CoreError::InvalidValue(_)
        ));
        assert!(matches!(
            err(NstepInputs {
                gamma: f64::NAN,
                ..good
            }),
            CoreError::InvalidValue(_)
        ));
        let grid = NstepInputs {
            rew: a(DType::F32, &t23[..], &rew),
            ..good
        };
        assert!(
            matches!(err(grid), CoreError::Shape(m) if m == "rew: expected shape [T], got [2, 3]")
        );
        let ints = NstepInputs {
            rew: a(DType::I32, &t6[..], &rew[..24]),
            ..good
        };
        assert!(matches!(err(ints), CoreError::DType(_)));
        let short = NstepInputs {
            truncated: a(DType::Bool, &t23[..], &[0; 6]),
            ..good
        };
        assert!(matches!(err(short), CoreError::Shape(_)));
    }

    #[test]
    fn nstep_oracle_terminated_and_truncated() {
        let rew = [1.0f32; 6];
        let mut flags = [0u8; 6];
        flags[5] = 1;
        let zeros = [0u8; 6];
        let (mut r, mut d, mut h) = ([0f32; 6], [0f32; 6], [0i64; 6]);
        compute_nstep_returns(&rew, &flags, &zeros, 3, 0.5, &mut r, &mut d, &mut h).unwrap(); // ok: test
        assert_eq!(r, [1.75, 1.75, 1.75, 1.75, 1.5, 1.0]);
        assert_eq!(d, [0.125, 0.125, 0.125, 0.0, 0.0, 0.0]);
        assert_eq!(h, [3, 3, 3, 3, 2, 1]);
        compute_nstep_returns(&rew, &zeros, &flags, 3, 0.5, &mut r, &mut d, &mut h).unwrap(); // ok: test
        assert_eq!(d, [0.125, 0.125, 0.125, 0.125, 0.25, 0.5]);
    }

    #[test]
    fn gae_does_not_cross_episode_starts() {
        // one env, episodes of length 3 (terminated) and 2 (cut by the rollout end)
        let rew = [1.0f32, 1.0, 1.0, 1.0, 1.0];
        let values = [0.5f32, 0.5, 0.5, 10.0, 20.0];
        let next_values = [0.5f32, 0.5, 99.0, 20.0, 3.0];
        let term = [0u8, 0, 1, 0, 0];
        let trunc = [0u8; 5];
        let (mut a, mut r) = ([0f32; 5], [0f32; 5]);
        compute_gae(
            &rew,
            &values,
            &next_values,
            &term,
            &trunc,
            5,
            1,
            0.9,
            0.8,
            &mut a,
            &mut r,
        )
        .unwrap(); // ok: test
                   // last step bootstraps from next_values[4] = 3
        let d4 = 1.0 + 0.9 * 3.0 - 20.0;
        assert!((a[4] - d4).abs() < 1e-5);
        let d3 = 1.0 + 0.9 * 20.0 - 10.0;
        assert!((a[3] - (d3 + 0.9 * 0.8 * d4)).abs() < 1e-4);
        // the terminated step ignores its next value and the next episode
        assert!((a[2] - (1.0 - 0.5)).abs() < 1e-6);
        assert!((r[2] - 1.0).abs() < 1e-6);
    }
}
