//! The core's priority checks as module functions, for a front end that splits one update over
//! several buffers (the shards of `rlcore.distributed.ShardedReplayBuffer`) and must refuse the
//! whole update before it sends any part of it: the same checks and errors as a buffer's own
//! `update_priorities` and `update_sequence_priorities`.

use pyo3::prelude::*;

use crate::convert::{self, vec_array, What};
use crate::errors::Result;

/// Raise what `update_priorities` of a buffer with these `alpha` and `eps` would raise for
/// `priorities` (float [B]), or return None: InvalidValueError for a negative, NaN or infinite
/// priority, one whose `(p + eps) ** alpha` exceeds MAX_PRIORITY, or alpha/eps a prioritized
/// buffer refuses; ShapeError/DTypeError for an array that is not numbers [B].
#[pyfunction]
pub fn _check_priorities(priorities: &Bound<'_, PyAny>, alpha: f64, eps: f64) -> Result<()> {
    let pr = convert::priorities(priorities)?;
    Ok(rlcore_core::check_priorities(&pr, alpha, eps)?)
}

/// float64 [B]: each sequence's priority from its TD errors `td_errors` [B, T] with R2D2's
/// mixture `eta * max_k |delta_k| + (1 - eta) * mean_k |delta_k|` over its valid steps (`mask`
/// [B, T], None: all), as `update_sequence_priorities` computes it before
/// `(p + eps) ** alpha`. Raises what that method raises for these arguments: ShapeError,
/// DTypeError, InvalidValueError.
#[pyfunction]
#[pyo3(signature = (b, td_errors, mask, eta))]
pub fn _sequence_priorities<'py>(
    py: Python<'py>,
    b: usize,
    td_errors: &Bound<'py, PyAny>,
    mask: Option<&Bound<'py, PyAny>>,
    eta: f64,
) -> Result<Bound<'py, PyAny>> {
    let td = convert::array(td_errors, What::Arg("td_errors"))?;
    let m = convert::opt_array(mask, "mask")?;
    let prio = rlcore_core::sequence_priorities(
        b,
        &td.array(),
        m.as_ref().map(|m| m.array()).as_ref(),
        eta,
    )?;
    Ok(vec_array(py, prio))
}
