//! Sequence priorities (R2D2's mixture of TD errors) and their update.

use crate::dtype::{read_f64, Array, DType};
use crate::error::{CoreError, Result};
use crate::per::check_priority_update;
use crate::replay::ReplayCore;
use crate::validate;

impl ReplayCore {
    /// Set each sequence's priority from its TD errors with R2D2's mixture (Kapturowski et al.
    /// 2019, sec. 2.3): `p = eta * max_k |delta_k| + (1 - eta) * mean_k |delta_k|` over the
    /// valid steps k (`mask`; every step when `mask` is `None`), then as
    /// [`ReplayCore::update_priorities`] for the start rows: `(p + eps)^alpha`. Returns the
    /// number of start indices skipped (stale, or holding no transition now).
    ///
    /// `td` is `[B, T]` (float or integer), `mask` `[B, T]` bool or integer (nonzero: valid),
    /// `idx` `[B]`.
    ///
    /// Errors: `Shape` for a td array that is not 2-d, B that differs from `idx`, a mask of
    /// another shape; `DType` for bool TD errors; `InvalidValue` for a non-finite TD error,
    /// `eta` outside [0, 1], a sequence without a valid step, and whatever
    /// `update_priorities` refuses; `Usage` without prioritized replay. Nothing is written
    /// unless the whole call is valid.
    pub fn update_sequence_priorities(
        &mut self,
        idx: &[i64],
        td: &Array<'_>,
        mask: Option<&Array<'_>>,
        eta: f64,
    ) -> Result<usize> {
        if self.per.is_none() {
            return Err(CoreError::usage(
                "update_sequence_priorities needs a prioritized buffer",
            ));
        }
        let prio = sequence_priorities(idx.len(), td, mask, eta)?;
        self.update_priorities(idx, &prio)
    }
}

/// Each of `b` sequences' priority from its TD errors with R2D2's mixture (Kapturowski et al.
/// 2019, sec. 2.3): `p = eta * max_k |delta_k| + (1 - eta) * mean_k |delta_k|` over the valid
/// steps k (`mask`; every step when `mask` is `None`), float64 `[b]`. `td` is `[b, T]` (float or
/// integer), `mask` `[b, T]` bool or integer (nonzero: valid). This is the first half of
/// [`ReplayCore::update_sequence_priorities`], for a front end that must refuse a whole update
/// before it sends parts of it anywhere.
///
/// Errors: `Shape` for a td array that is not `[b, T]`, a mask of another shape; `DType` for bool
/// TD errors or float masks; `InvalidValue` for a non-finite TD error, `eta` outside [0, 1], a
/// sequence without a valid step.
pub fn sequence_priorities(
    b: usize,
    td: &Array<'_>,
    mask: Option<&Array<'_>>,
    eta: f64,
) -> Result<Vec<f64>> {
    validate::unit("eta", eta)?;
    if td.ndim() != 2 || td.shape[0] != b {
        return Err(CoreError::shape(format!(
            "td_errors: expected shape [B, T] with B = {} (the number of start indices), \
             got {:?}",
            b, td.shape
        )));
    }
    if td.dtype == DType::Bool {
        return Err(CoreError::dtype("td_errors: expected floats, got bool"));
    }
    if let Some(m) = mask {
        if m.shape != td.shape {
            return Err(CoreError::shape(format!(
                "mask: expected the shape of td_errors {:?}, got {:?}",
                td.shape, m.shape
            )));
        }
        if matches!(m.dtype, DType::F32 | DType::F64) {
            return Err(CoreError::dtype(format!(
                "mask: expected bool (or integer) flags, got {}",
                m.dtype.name()
            )));
        }
    }
    let t = td.shape[1];
    let mut prio = Vec::with_capacity(b);
    for i in 0..b {
        let (mut max, mut sum, mut n) = (0.0f64, 0.0f64, 0usize);
        for k in 0..t {
            let j = i * t + k;
            let x = read_f64(td.dtype, td.data, j);
            if !x.is_finite() {
                return Err(CoreError::value(format!(
                    "td_errors[{i}, {k}] is {x}; TD errors must be finite"
                )));
            }
            if mask.is_some_and(|m| !crate::dtype::read_flag(m.dtype, m.data, j)) {
                continue;
            }
            max = max.max(x.abs());
            sum += x.abs();
            n += 1;
        }
        if n == 0 {
            return Err(CoreError::value(format!(
                "sequence {i} has no valid step in mask; pass the batch's mask (e.g. \
                 batch.mask[:, burn_in:]) with its TD errors"
            )));
        }
        prio.push(eta * max + (1.0 - eta) * sum / n as f64);
    }
    Ok(prio)
}

/// [`sequence_priorities`] followed by the checks of [`check_priority_update`] for a
/// prioritized buffer of `rows` rows with these `alpha` and `eps`: the `(start indices,
/// priorities)` that [`ReplayCore::update_sequence_priorities`] would pass on, for a front end
/// that splits one update over several buffers and must refuse all of it before it sends any.
///
/// Errors: those of [`sequence_priorities`] and [`check_priority_update`].
pub fn sequence_priority_update(
    idx: Vec<i64>,
    td: &Array<'_>,
    mask: Option<&Array<'_>>,
    eta: f64,
    (alpha, eps, rows): (f64, f64, usize),
) -> Result<(Vec<i64>, Vec<f64>)> {
    let prio = sequence_priorities(idx.len(), td, mask, eta)?;
    check_priority_update(&idx, &prio, rows, alpha, eps)?;
    Ok((idx, prio))
}
