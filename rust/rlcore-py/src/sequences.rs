//! The arrays of a sampled sequence batch (`RawBuffer._sample_sequences`): fresh, or taken
//! from an `out=` batch and checked by the core, and the tuple a `SequenceBatch` is made of;
//! and the call of a user's reward function from inside a core call.

use numpy::PyUntypedArray;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use rlcore_core::{check_sequence_out, CoreError, Goals, OutArray, RewardFn, SeqField, SeqSlot};

use crate::convert::{self, type_name};
use crate::errors::{Error, Result};

/// Fresh arrays, one per field.
pub fn fresh_arrays<'py>(
    py: Python<'py>,
    fields: &[SeqField],
) -> PyResult<Vec<Bound<'py, PyUntypedArray>>> {
    fields
        .iter()
        .map(|f| convert::fresh(py, f.dtype, &f.shape))
        .collect()
}

/// The arrays of a caller's `out` batch (a `SequenceBatch` of this buffer with the same
/// arguments), checked by the core.
///
/// Errors: `Usage` for a missing field or key, `DType` for a field that is no NumPy array, the
/// core's checks of [`check_sequence_out`].
pub fn out_arrays<'py>(
    out: &Bound<'py, PyAny>,
    fields: &[SeqField],
) -> Result<Vec<Bound<'py, PyUntypedArray>>> {
    let mut arrays = Vec::with_capacity(fields.len());
    for f in fields {
        let missing = || {
            CoreError::usage(format!(
                "out must be a SequenceBatch from a previous sample_sequences of this buffer \
                 with the same arguments; it has no array {} ({})",
                f.label(),
                type_name(out)
            ))
        };
        let attr = out.getattr(f.slot.name()).map_err(|_| missing())?;
        let obj = match &f.key {
            None => attr,
            Some(k) => attr.get_item(k).map_err(|_| missing())?,
        };
        let a = obj.cast_into::<PyUntypedArray>().map_err(|e| {
            CoreError::dtype(format!(
                "out.{}: expected a numpy array, got {}",
                f.label(),
                type_name(&e.into_inner())
            ))
        })?;
        arrays.push(a);
    }
    {
        let headers: Vec<OutArray<'_>> = arrays.iter().map(convert::header).collect();
        check_sequence_out(fields, &headers)?;
    }
    Ok(arrays)
}

/// The fields of a `SequenceBatch` as a tuple in its field order: keyed arrays in dicts,
/// `extras` and `state` always dicts, `weights` None for buffers without priorities.
pub fn batch_tuple<'py>(
    py: Python<'py>,
    fields: &[SeqField],
    arrays: Vec<Bound<'py, PyUntypedArray>>,
) -> PyResult<Bound<'py, PyTuple>> {
    let mut slots: Vec<Option<Bound<'py, PyAny>>> = vec![None; SeqSlot::COUNT];
    slots[SeqSlot::Extras.index()] = Some(PyDict::new(py).into_any());
    slots[SeqSlot::State.index()] = Some(PyDict::new(py).into_any());
    for (f, a) in fields.iter().zip(arrays) {
        let s = &mut slots[f.slot.index()];
        match &f.key {
            None => *s = Some(a.into_any()),
            Some(k) => s
                .get_or_insert_with(|| PyDict::new(py).into_any())
                .set_item(k, a)?,
        }
    }
    PyTuple::new(
        py,
        slots
            .into_iter()
            .map(|s| s.unwrap_or_else(|| py.None().into_bound(py))),
    )
}

/// Run a core call that may call the user's `compute_reward` (`f`): the Python error it raises,
/// if any, is the call's error.
pub fn with_reward<T>(
    py: Python<'_>,
    f: Option<&Bound<'_, PyAny>>,
    run: impl FnOnce(Option<&mut RewardFn<'_>>) -> rlcore_core::Result<T>,
) -> Result<T> {
    let Some(f) = f else {
        return Ok(run(None)?);
    };
    let mut raised: Option<PyErr> = None;
    let mut call = |g: &Goals<'_>| -> rlcore_core::Result<Vec<f32>> {
        convert::call_reward(py, f, g).map_err(|e| match e {
            Error::Core(e) => e,
            Error::Py(e) => {
                let msg = e.to_string();
                raised = Some(e);
                CoreError::usage(msg)
            }
        })
    };
    let r = run(Some(&mut call));
    if let Some(e) = raised {
        return Err(e.into());
    }
    Ok(r?)
}
