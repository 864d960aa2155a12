//! The one mapping of the core's errors to Python exceptions.
//!
//! The exception classes are defined once, in Python (`rlcore/errors.py`): each leaf subclasses
//! both `RlcoreError` and the builtin a user would catch (`ShapeError(RlcoreError, ValueError)`),
//! which pyo3's `create_exception!` cannot express (it takes one base). The module fetches the
//! classes once at import and re-exports them, so `rlcore._core.ShapeError is
//! rlcore.errors.ShapeError`.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use rlcore_core::CoreError;

/// An error of a binding call: one of the core's, or one Python raised (a user callback, a
/// failed attribute lookup, ...), passed through unchanged.
pub enum Error {
    Core(CoreError),
    Py(PyErr),
}

pub type Result<T> = std::result::Result<T, Error>;

impl From<CoreError> for Error {
    #[inline]
    fn from(e: CoreError) -> Self {
        Error::Core(e)
    }
}

impl From<PyErr> for Error {
    #[inline]
    fn from(e: PyErr) -> Self {
        Error::Py(e)
    }
}

impl From<pyo3::CastError<'_, '_>> for Error {
    fn from(e: pyo3::CastError<'_, '_>) -> Self {
        Error::Py(e.into())
    }
}

impl From<pyo3::CastIntoError<'_>> for Error {
    fn from(e: pyo3::CastIntoError<'_>) -> Self {
        Error::Py(e.into())
    }
}

impl From<Error> for PyErr {
    #[cold]
    fn from(e: Error) -> PyErr {
        match e {
            Error::Py(e) => e,
            Error::Core(e) => {
                let k = match &e {
                    CoreError::Shape(_) => 1,
                    CoreError::DType(_) => 2,
                    CoreError::InvalidValue(_) => 3,
                    CoreError::Empty(_) => 4,
                    CoreError::Usage(_) => 5,
                    CoreError::Corrupt(_) => 6,
                };
                let msg = e.message().to_string();
                Python::attach(|py| match CLASSES.get(py) {
                    Some(c) => PyErr::from_type(c[k].bind(py).clone(), msg),
                    None => PyRuntimeError::new_err(msg),
                })
            }
        }
    }
}

/// The classes of `rlcore.errors`, in the order of the mapping above.
const NAMES: [&str; 7] = [
    "RlcoreError",
    "ShapeError",
    "DTypeError",
    "InvalidValueError",
    "EmptyBufferError",
    "ApiUsageError",
    "SaveFileError",
];

static CLASSES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

/// Fetch the exception classes from `rlcore.errors` and add them to module `m`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let classes = CLASSES.get_or_try_init(py, || -> PyResult<Vec<Py<PyType>>> {
        let errors = py.import("rlcore.errors")?;
        NAMES
            .iter()
            .map(|name| Ok(errors.getattr(*name)?.cast_into::<PyType>()?.unbind()))
            .collect()
    })?;
    for (name, c) in NAMES.iter().zip(classes) {
        m.add(*name, c.bind(py))?;
    }
    Ok(())
}
