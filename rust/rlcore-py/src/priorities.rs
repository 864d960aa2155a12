//! A prioritized buffer's update checks as module functions, for a front end that splits one
//! update over several buffers (the shards of `rlcore.distributed.ShardedReplayBuffer`) and must
//! refuse the whole update before it sends any part of it: the same conversions, checks and
//! errors as a buffer's own `update_priorities` and `update_sequence_priorities`.

use pyo3::prelude::*;

use crate::convert::{self, vec_array, Given, What};
use crate::errors::Result;

/// `(indices int64 [B], priorities float64 [B])` converted and checked exactly as
/// `update_priorities` of a prioritized buffer of `rows` rows with these `alpha` and `eps`
/// does before it writes. Raises what that method raises: DTypeError (non-integer indices,
/// non-numeric priorities), ShapeError (not both [B]), InvalidValueError (an index outside
/// [0, rows), a negative, NaN or infinite priority, one whose (p + eps) ** alpha exceeds
/// MAX_PRIORITY, alpha/eps a prioritized buffer refuses).
#[pyfunction]
pub fn _priority_update<'py>(
    py: Python<'py>,
    indices: &Bound<'py, PyAny>,
    priorities: &Bound<'py, PyAny>,
    alpha: f64,
    eps: f64,
    rows: usize,
) -> Result<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let idx = convert::indices(indices, "indices")?;
    let pr = convert::priorities(priorities)?;
    rlcore_core::check_priority_update(&idx, &pr, rows, alpha, eps)?;
    Ok((vec_array(py, idx), vec_array(py, pr)))
}

/// `(start_indices int64 [B], priorities float64 [B])`: each sequence's priority from its TD
/// errors `td_errors` [B, T] with R2D2's mixture `eta * max_k |delta_k| + (1 - eta) *
/// mean_k |delta_k|` over its valid steps (`mask` [B, T], None: all), converted and checked
/// exactly as `update_sequence_priorities` of a prioritized buffer of `rows` rows with these
/// `alpha` and `eps` does before it writes; the priorities are those it would pass on to
/// `update_priorities`. Raises what that method raises: DTypeError, ShapeError,
/// InvalidValueError.
#[pyfunction]
#[pyo3(signature = (start_indices, td_errors, mask, eta, alpha, eps, rows))]
pub fn _sequence_update<'py>(
    start_indices: &Bound<'py, PyAny>,
    td_errors: &Bound<'py, PyAny>,
    mask: Option<&Bound<'py, PyAny>>,
    eta: Given<'py>,
    alpha: f64,
    eps: f64,
    rows: usize,
) -> Result<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let idx = convert::indices(start_indices, "start_indices")?;
    let td = convert::array(td_errors, What::Arg("td_errors"))?;
    let m = convert::opt_array(mask, "mask")?;
    let eta = eta.float("eta", 0.9)?;
    let prio = rlcore_core::sequence_priorities(
        idx.len(),
        &td.array(),
        m.as_ref().map(|m| m.array()).as_ref(),
        eta,
    )?;
    rlcore_core::check_priority_update(&idx, &prio, rows, alpha, eps)?;
    let py = start_indices.py();
    Ok((vec_array(py, idx), vec_array(py, prio)))
}
