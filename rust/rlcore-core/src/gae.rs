//! Generalized advantage estimation and n-step returns on raw arrays.

use crate::error::{CoreError, Result};

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

/// Check that a discount-like scalar lies in [0, 1].
pub fn check_unit(name: &str, x: f64) -> Result<()> {
    if (0.0..=1.0).contains(&x) {
        Ok(())
    } else {
        Err(CoreError::value(format!(
            "{name} must be in [0, 1], got {x}"
        )))
    }
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
