//! The module's functions: returns over rollouts, the save layout and checksum, and the checks
//! of a priority update split over several buffers (documented in `rlcore/_core.pyi`).

use numpy::PyArrayMethods;
use pyo3::prelude::*;
use rlcore_core::{check_priority_update, state, GaeInputs, NstepInputs, DEFAULT_ETA};

use crate::call;
use crate::convert::{self, opt_array, vec_array, Any, Given, What};
use crate::errors::Result;

type Pair<'py> = (Any<'py>, Any<'py>);

#[pyfunction]
#[pyo3(signature = (rew, values, next_values, terminated, truncated, gamma, gae_lambda))]
#[allow(clippy::too_many_arguments)]
pub fn _compute_gae<'py>(
    py: Python<'py>, rew: &Any<'py>, values: &Any<'py>, next_values: &Any<'py>,
    terminated: &Any<'py>, truncated: &Any<'py>, gamma: &Any<'py>, gae_lambda: &Any<'py>,
) -> Result<Pair<'py>> {
    let (gamma, gae_lambda) =
        (convert::float(gamma, "gamma")?, convert::float(gae_lambda, "gae_lambda")?);
    let arg = |o, what| convert::array(o, What::Arg(what));
    let (r, v, nv) = (arg(rew, "rew")?, arg(values, "values")?, arg(next_values, "next_values")?);
    let (te, tr) = (arg(terminated, "terminated")?, arg(truncated, "truncated")?);
    let (rew, values, next_values) = (r.array(), v.array(), nv.array());
    let (terminated, truncated) = (te.array(), tr.array());
    let g = GaeInputs { rew, values, next_values, terminated, truncated, gamma, gae_lambda };
    let (shape, adv, ret) = g.run_new()?;
    let shaped = |v| numpy::PyArray1::from_vec(py, v).reshape(shape).map(Bound::into_any);
    Ok((shaped(adv)?, shaped(ret)?))
}

#[pyfunction]
pub fn _compute_nstep_returns<'py>(
    py: Python<'py>, rew: &Any<'py>, terminated: &Any<'py>, truncated: &Any<'py>,
    n_step: &Any<'py>, gamma: &Any<'py>,
) -> Result<(Any<'py>, Any<'py>, Any<'py>)> {
    let (n_step, gamma) = (convert::count(n_step, "n_step")?, convert::float(gamma, "gamma")?);
    let r = convert::array(rew, What::Arg("rew"))?;
    let te = convert::array(terminated, What::Arg("terminated"))?;
    let tr = convert::array(truncated, What::Arg("truncated"))?;
    let (rew, terminated, truncated) = (r.array(), te.array(), tr.array());
    let (ret, disc, hor) = NstepInputs { rew, terminated, truncated, n_step, gamma }.run()?;
    Ok((vec_array(py, ret), vec_array(py, disc), vec_array(py, hor)))
}

#[pyfunction]
#[pyo3(signature = (capacity, num_envs, obs, step, prioritized, frame_stack=None))]
pub fn _state_layout(
    capacity: usize, num_envs: usize, obs: &Any<'_>, step: &Any<'_>, prioritized: bool,
    frame_stack: Option<usize>,
) -> Result<Vec<(String, &'static str, Vec<usize>)>> {
    let (o, s) = (convert::specs(obs)?, convert::specs(step)?);
    let layout = state::state_layout_for(capacity, num_envs, &o, &s, prioritized, frame_stack)?;
    Ok(layout.into_iter().map(|(name, dtype, shape)| (name, dtype.name(), shape)).collect())
}

#[pyfunction]
#[pyo3(signature = (data, value=0))]
pub fn _crc32c(py: Python<'_>, data: &Any<'_>, value: u32) -> Result<u32> {
    let i = convert::array(data, What::Arg("data"))?;
    let bytes = i.array().data;
    call::run(py, bytes.len(), None, |_| Ok(rlcore_core::checksum::crc32c(value, bytes)))
}

#[pyfunction]
pub fn _priority_update<'py>(
    py: Python<'py>, indices: &Any<'py>, priorities: &Any<'py>, alpha: f64, eps: f64, rows: usize,
) -> Result<Pair<'py>> {
    let (idx, pr) = (convert::indices(indices, "indices")?, convert::priorities(priorities)?);
    check_priority_update(&idx, &pr, rows, alpha, eps)?;
    Ok((vec_array(py, idx), vec_array(py, pr)))
}

#[pyfunction]
#[pyo3(signature = (start_indices, td_errors, mask, eta, alpha, eps, rows))]
pub fn _sequence_update<'py>(
    start_indices: &Any<'py>, td_errors: &Any<'py>, mask: Option<&Any<'py>>, eta: Given<'py>,
    alpha: f64, eps: f64, rows: usize,
) -> Result<Pair<'py>> {
    let idx = convert::indices(start_indices, "start_indices")?;
    let td = convert::array(td_errors, What::Arg("td_errors"))?;
    let (m, eta) = (opt_array(mask, "mask")?, eta.float("eta", DEFAULT_ETA)?);
    let m = m.as_ref().map(|m| m.array());
    let (idx, prio) = rlcore_core::sequence_priority_update(
        idx,
        &td.array(),
        m.as_ref(),
        eta,
        (alpha, eps, rows),
    )?;
    let py = start_indices.py();
    Ok((vec_array(py, idx), vec_array(py, prio)))
}
