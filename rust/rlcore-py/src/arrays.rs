//! The arrays of a sampled batch, one path for every kind of batch ([`OutField`]): fresh, or
//! taken from the caller's `out=` batch and checked by the core; and the tuple that the Python
//! batch (`TransitionBatch`, `SequenceBatch`) is made of.

use numpy::PyUntypedArray;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple};
use rlcore_core::{validate, CoreError, Field, OutArray, OutField};
use smallvec::SmallVec;

use crate::convert::{self, type_name, Any, Arr};
use crate::errors::Result;

/// The arrays of one batch, one per field.
pub type Arrays<'py> = SmallVec<[Arr<'py>; 16]>;

/// The name of a field as an interned string: reading an `out` batch builds no string.
fn attr(py: Python<'_>, f: Field) -> &Bound<'_, PyString> {
    static NAMES: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();
    let init = || Field::ALL.iter().map(|f| PyString::intern(py, f.name()).unbind()).collect();
    NAMES.get_or_init(py, init)[f as usize].bind(py)
}

/// Fresh arrays for `fields`, or (`out`) the arrays of a batch the caller passed, checked by the
/// core.
pub fn arrays<'py, F: OutField>(
    py: Python<'py>, fields: &[F], out: Option<&Any<'py>>,
) -> Result<Arrays<'py>> {
    let Some(out) = out else {
        return Ok(fields
            .iter()
            .map(|f| convert::fresh(py, f.dtype(), &f.shape()))
            .collect::<PyResult<_>>()?);
    };
    let mut arrays = Arrays::new();
    let mut last: Option<(Field, Any<'py>)> = None;
    for f in fields {
        let field = match &last {
            Some((k, a)) if *k == f.field() => a.clone(),
            _ => {
                let a = out
                    .getattr(attr(py, f.field()))
                    .map_err(|_| f.missing(&type_name(out), None))?;
                last.insert((f.field(), a)).1.clone()
            }
        };
        let obj = match f.key() {
            None => field,
            Some(k) => {
                let missing = || f.missing(&type_name(out), Some(&type_name(&field)));
                field.get_item(k).map_err(|_| missing())?
            }
        };
        arrays.push(obj.cast_into::<PyUntypedArray>().map_err(|e| {
            let got = type_name(&e.into_inner());
            CoreError::dtype(format!("out.{}: expected a numpy array, got {got}", f.label()))
        })?);
    }
    let headers: SmallVec<[OutArray<'_>; 16]> = arrays.iter().map(convert::header).collect();
    validate::out_arrays(fields, &headers)?;
    drop(headers);
    Ok(arrays)
}

/// The writable bytes of each array.
///
/// # Safety
/// The arrays must come from [`arrays`] (fresh, or checked by the core: C-contiguous, writable,
/// not sharing memory) and stay alive while the slices are used.
pub unsafe fn slices<'a, 'b>(arrays: &'b Arrays<'_>) -> impl Iterator<Item = &'a mut [u8]> + 'b {
    arrays.iter().map(|a| convert::bytes_mut(a))
}

/// The batch as a tuple in its field order: keyed arrays in dicts, `extras` and `state` always
/// dicts, a field without an array (`weights` of a buffer without priorities) None.
pub fn tuple<'py, F: OutField>(
    py: Python<'py>, fields: &[F], arrays: Arrays<'py>,
) -> PyResult<Bound<'py, PyTuple>> {
    let dict = || PyDict::new(py).into_any();
    let mut slots: SmallVec<[Option<Any<'py>>; 16]> =
        F::FIELDS.iter().map(|f| f.always_dict().then(dict)).collect();
    for (f, a) in fields.iter().zip(arrays) {
        let Some(k) = F::FIELDS.iter().position(|x| *x == f.field()) else {
            continue;
        };
        match f.key() {
            None => slots[k] = Some(a.into_any()),
            Some(key) => slots[k].get_or_insert_with(dict).set_item(key, a)?,
        }
    }
    PyTuple::new(py, slots.into_iter().map(|s| s.unwrap_or_else(|| py.None().into_bound(py))))
}
