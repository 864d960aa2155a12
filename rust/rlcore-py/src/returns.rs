//! The free functions over rollouts: GAE and n-step returns (their checks are the core's).

use numpy::PyUntypedArrayMethods;
use pyo3::prelude::*;
use rlcore_core::{DType, GaeInputs, NstepInputs};

use crate::convert::{self, bytes_mut, vec_array, What};
use crate::errors::Result;

/// GAE over `[T, N]` float32 arrays; returns (advantages, returns). See `rlcore.compute_gae`.
#[pyfunction]
#[pyo3(signature = (rew, values, next_values, terminated, truncated, gamma, gae_lambda))]
#[allow(clippy::too_many_arguments)]
pub fn _compute_gae<'py>(
    py: Python<'py>,
    rew: &Bound<'py, PyAny>,
    values: &Bound<'py, PyAny>,
    next_values: &Bound<'py, PyAny>,
    terminated: &Bound<'py, PyAny>,
    truncated: &Bound<'py, PyAny>,
    gamma: &Bound<'py, PyAny>,
    gae_lambda: &Bound<'py, PyAny>,
) -> Result<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let (gamma, gae_lambda) = (
        convert::float(gamma, "gamma")?,
        convert::float(gae_lambda, "gae_lambda")?,
    );
    let ins = [
        (rew, "rew"),
        (values, "values"),
        (next_values, "next_values"),
        (terminated, "terminated"),
        (truncated, "truncated"),
    ]
    .map(|(o, what)| convert::array(o, What::Arg(what)));
    let [r, v, nv, te, tr] = ins;
    let (r, v, nv, te, tr) = (r?, v?, nv?, te?, tr?);
    let g = GaeInputs {
        rew: r.array(),
        values: v.array(),
        next_values: nv.array(),
        terminated: te.array(),
        truncated: tr.array(),
        gamma,
        gae_lambda,
    };
    let shape = g.check()?;
    let (adv, ret) = (
        convert::fresh(py, DType::F32, &shape)?,
        convert::fresh(py, DType::F32, &shape)?,
    );
    // SAFETY: fresh float32 arrays of T*N elements, owned here.
    let (a, b) = unsafe { (bytes_mut(&adv), bytes_mut(&ret)) };
    let as_f32 = |s: &'py mut [u8]| rlcore_core::mem::cast_mut::<f32>(s);
    match (as_f32(a), as_f32(b)) {
        (Some(a), Some(b)) => g.run(a, b)?,
        _ => return Err(rlcore_core::CoreError::usage("misaligned output arrays").into()),
    }
    debug_assert_eq!(adv.shape(), &shape[..]);
    Ok((adv.into_any(), ret.into_any()))
}

/// n-step returns over a flat stream `[T]`; returns (returns, discounts, horizons).
#[pyfunction]
#[pyo3(signature = (rew, terminated, truncated, n_step, gamma))]
pub fn _compute_nstep_returns<'py>(
    py: Python<'py>,
    rew: &Bound<'py, PyAny>,
    terminated: &Bound<'py, PyAny>,
    truncated: &Bound<'py, PyAny>,
    n_step: &Bound<'py, PyAny>,
    gamma: &Bound<'py, PyAny>,
) -> Result<(Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let (n_step, gamma) = (
        convert::count(n_step, "n_step")?,
        convert::float(gamma, "gamma")?,
    );
    let r = convert::array(rew, What::Arg("rew"))?;
    let te = convert::array(terminated, What::Arg("terminated"))?;
    let tr = convert::array(truncated, What::Arg("truncated"))?;
    let (ret, disc, hor) = NstepInputs {
        rew: r.array(),
        terminated: te.array(),
        truncated: tr.array(),
        n_step,
        gamma,
    }
    .run()?;
    Ok((vec_array(py, ret), vec_array(py, disc), vec_array(py, hor)))
}
