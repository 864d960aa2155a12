//! The one mapping of the core's errors to Python exceptions. The classes are defined once, in
//! `rlcore/errors.py` (each leaf subclasses `RlcoreError` and a builtin, which `create_exception!`
//! cannot express); the module fetches them at import and re-exports them.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use rlcore_core::CoreError;

/// An error of a binding call: the core's, or one Python raised (a user callback, a failed
/// attribute lookup), passed through unchanged.
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

/// The class of `rlcore.errors` that a core error raises.
fn class_name(e: &CoreError) -> &'static str {
    match e {
        CoreError::Shape(_) => "ShapeError",
        CoreError::DType(_) => "DTypeError",
        CoreError::InvalidValue(_) => "InvalidValueError",
        CoreError::Empty(_) => "EmptyBufferError",
        CoreError::Usage(_) => "ApiUsageError",
        CoreError::Corrupt(_) => "SaveFileError",
    }
}

impl From<Error> for PyErr {
    #[cold]
    fn from(e: Error) -> PyErr {
        let e = match e {
            Error::Py(e) => return e,
            Error::Core(e) => e,
        };
        let (name, msg) = (class_name(&e), e.message().to_string());
        Python::attach(|py| {
            match CLASSES.get(py).and_then(|c| c.iter().find(|(n, _)| *n == name)) {
                Some((_, c)) => PyErr::from_type(c.bind(py).clone(), msg),
                None => PyRuntimeError::new_err(msg),
            }
        })
    }
}

const NAMES: [&str; 7] = [
    "RlcoreError",
    "ShapeError",
    "DTypeError",
    "InvalidValueError",
    "EmptyBufferError",
    "ApiUsageError",
    "SaveFileError",
];

static CLASSES: PyOnceLock<Vec<(&'static str, Py<PyType>)>> = PyOnceLock::new();

/// Fetch the exception classes from `rlcore.errors` and add them to module `m`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let classes = CLASSES.get_or_try_init(py, || -> PyResult<_> {
        let errors = py.import("rlcore.errors")?;
        let class = |n: &'static str| Ok((n, errors.getattr(n)?.cast_into::<PyType>()?.unbind()));
        NAMES.into_iter().map(class).collect::<PyResult<Vec<_>>>()
    })?;
    for (name, c) in classes {
        m.add(*name, c.bind(py))?;
    }
    Ok(())
}
