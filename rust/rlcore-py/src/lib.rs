//! Thin PyO3 binding of `rlcore-core`: converts arrays, releases the GIL for large copies and
//! maps the core's one error enum to the Python exception classes. No logic lives here.

use std::borrow::Cow;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

use numpy::npyffi::{self, npy_intp, PY_ARRAY_API};
use numpy::{dtype, PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{
    PyException, PyIndexError, PyOSError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyTuple, PyType};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

use rlcore_core::{
    checksum::crc32c, compute_gae as core_gae, compute_nstep_returns as core_nstep,
    state::state_layout_for, AddOutcome, Array, BatchOut, ColumnSpec, CoreError, DType,
    GoalStrategy, Goals, HerConfig, Obs, ReplayCore, StatePart, Steps,
};
use smallvec::SmallVec;

// ---------------------------------------------------------------------------------------------
// errors

static ERRORS: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

const ERROR_NAMES: [&str; 7] = [
    "RlcoreError",
    "ShapeError",
    "DTypeError",
    "InvalidValueError",
    "EmptyBufferError",
    "ApiUsageError",
    "SaveFileError",
];

fn make_errors(py: Python<'_>) -> PyResult<Vec<Py<PyType>>> {
    let type_fn = py.import("builtins")?.getattr("type")?;
    let ns = |doc: &str| -> PyResult<Bound<'_, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("__module__", "rlcore.errors")?;
        d.set_item("__doc__", doc)?;
        Ok(d)
    };
    let base = type_fn
        .call1((
            "RlcoreError",
            (py.get_type::<PyException>(),),
            ns("Base class of every rlcore error.")?,
        ))?
        .cast_into::<PyType>()?;
    let leaf = |name: &str, builtin: Bound<'_, PyType>, doc: &str| -> PyResult<Py<PyType>> {
        Ok(type_fn
            .call1((name, (base.clone(), builtin), ns(doc)?))?
            .cast_into::<PyType>()?
            .unbind())
    };
    Ok(vec![
        base.clone().unbind(),
        leaf(
            "ShapeError",
            py.get_type::<PyValueError>(),
            "An array has the wrong shape.",
        )?,
        leaf(
            "DTypeError",
            py.get_type::<PyTypeError>(),
            "A dtype cannot be stored without loss.",
        )?,
        leaf(
            "InvalidValueError",
            py.get_type::<PyValueError>(),
            "An argument is out of range.",
        )?,
        leaf(
            "EmptyBufferError",
            py.get_type::<PyIndexError>(),
            "The buffer holds no transition.",
        )?,
        leaf(
            "ApiUsageError",
            py.get_type::<PyRuntimeError>(),
            "A call not allowed in this state.",
        )?,
        leaf(
            "SaveFileError",
            py.get_type::<PyOSError>(),
            "A save is missing, incomplete or corrupt.",
        )?,
    ])
}

fn err_type(py: Python<'_>, k: usize) -> Bound<'_, PyType> {
    match ERRORS.get(py) {
        Some(v) => v[k].bind(py).clone(),
        None => py.get_type::<PyRuntimeError>(),
    }
}

#[cold]
fn to_py(py: Python<'_>, e: CoreError) -> PyErr {
    let k = match &e {
        CoreError::Shape(_) => 1,
        CoreError::DType(_) => 2,
        CoreError::InvalidValue(_) => 3,
        CoreError::Empty(_) => 4,
        CoreError::Usage(_) => 5,
        CoreError::Corrupt(_) => 6,
    };
    PyErr::from_type(err_type(py, k), e.message().to_string())
}

#[cold]
fn py_err(py: Python<'_>, k: usize, msg: String) -> PyErr {
    PyErr::from_type(err_type(py, k), msg)
}

trait OrPy<T> {
    fn or_py(self, py: Python<'_>) -> PyResult<T>;
}
impl<T> OrPy<T> for Result<T, CoreError> {
    #[inline]
    fn or_py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

// ---------------------------------------------------------------------------------------------
// arrays in

static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

static NUMPY_GENERIC: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// `numpy.generic`, the base class of NumPy scalars.
fn numpy_generic(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    Ok(NUMPY_GENERIC
        .get_or_try_init(py, || -> PyResult<Py<PyType>> {
            Ok(numpy_mod(py)?
                .getattr("generic")?
                .cast_into::<PyType>()?
                .unbind())
        })?
        .bind(py))
}

fn numpy_mod(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    Ok(NUMPY
        .get_or_try_init(py, || py.import("numpy").map(|m| m.unbind()))?
        .bind(py))
}

// ---------------------------------------------------------------------------------------------
// scalar arguments: the one place that converts Python numbers; ranges are checked by the core

/// Whether `obj` is a Python or NumPy bool (never accepted where a number is expected: `True`
/// as a capacity or a discount is a bug, although Python's bool is an int).
fn is_bool(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    if obj.is_instance_of::<PyBool>() {
        return Ok(true);
    }
    if obj.is_instance(numpy_generic(obj.py())?)? {
        let d = obj.getattr("dtype")?;
        return Ok(d.cast::<PyArrayDescr>().is_ok_and(|d| d.kind() == b'b'));
    }
    Ok(false)
}

/// An integer argument: a Python int or anything with `__index__` (NumPy integers), as `i128`
/// for the core's range checks.
///
/// Raises DTypeError for bool, float (even `2.0`), NumPy floats, None, str and anything else
/// without `__index__`; InvalidValueError for an integer beyond ±2**127.
fn int_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<i128> {
    let py = obj.py();
    let too_big = || py_err(py, 3, format!("{what}: integer {obj} is far out of range"));
    if let Ok(i) = obj.cast_exact::<PyInt>() {
        return i.extract::<i128>().map_err(|_| too_big());
    }
    if !is_bool(obj)? {
        match obj.extract::<i128>() {
            Ok(v) => return Ok(v),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) => {
                return Err(too_big())
            }
            Err(_) => {}
        }
    }
    Err(py_err(
        py,
        2,
        format!(
            "{what}: expected an integer, got {} ({obj})",
            type_name(obj)
        ),
    ))
}

/// A float argument: a Python float or int, a NumPy number, or anything else with `__float__`
/// except arrays.
///
/// Raises DTypeError for bool, None, str, arrays and anything else without `__float__`;
/// InvalidValueError for an int too large for float64.
fn float_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<f64> {
    let py = obj.py();
    if let Ok(f) = obj.cast_exact::<PyFloat>() {
        return Ok(f.value());
    }
    let wrong = !is_bool(obj)? && obj.cast::<PyUntypedArray>().is_err();
    if wrong {
        match obj.extract::<f64>() {
            Ok(v) => return Ok(v),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) => {
                return Err(py_err(
                    py,
                    3,
                    format!("{what}: {obj} is beyond the range of float64"),
                ))
            }
            Err(_) => {}
        }
    }
    Err(py_err(
        py,
        2,
        format!("{what}: expected a number, got {} ({obj})", type_name(obj)),
    ))
}

/// An optional float argument (`None` means absent).
fn opt_float_arg(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<f64>> {
    match obj {
        Some(x) if !x.is_none() => float_arg(x, what).map(Some),
        _ => Ok(None),
    }
}

/// An argument with a default: `Given(None)` when the caller left it out, the object (which may
/// be `None`) when given, so that an explicit `alpha=None` is refused rather than defaulted.
struct Given<'py>(Option<Bound<'py, PyAny>>);

impl<'a, 'py> FromPyObject<'a, 'py> for Given<'py> {
    type Error = PyErr;
    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Given(Some(obj.to_owned())))
    }
}

impl Given<'_> {
    fn float(&self, what: &str, default: f64) -> PyResult<f64> {
        self.0.as_ref().map_or(Ok(default), |o| float_arg(o, what))
    }
    fn count(&self, what: &str, default: usize) -> PyResult<usize> {
        self.0.as_ref().map_or(Ok(default), |o| count_arg(o, what))
    }
}

/// A count argument (`capacity`, `batch_size`, ...) as the core's `usize`.
fn count_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    rlcore_core::validate::count(what, int_arg(obj, what)?).or_py(obj.py())
}

/// An input converted to C-contiguous native-endian bytes (borrowed from the array when possible).
struct In<'py> {
    arr: Option<Bound<'py, PyUntypedArray>>,
    scalar: [u8; 8],
    dtype: DType,
}

impl In<'_> {
    fn array(&self) -> Array<'_> {
        match &self.arr {
            Some(a) => {
                let n: usize = a.shape().iter().product::<usize>() * self.dtype.size();
                // SAFETY: `a` is a C-contiguous array of `n` bytes kept alive by `self`.
                let data =
                    unsafe { std::slice::from_raw_parts((*a.as_array_ptr()).data as *const u8, n) };
                Array {
                    dtype: self.dtype,
                    shape: a.shape(),
                    data,
                }
            }
            None => Array {
                dtype: self.dtype,
                shape: &[],
                data: &self.scalar[..self.dtype.size()],
            },
        }
    }
}

fn to_in<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<In<'py>> {
    let py = obj.py();
    if let Ok(a) = obj.cast::<PyUntypedArray>() {
        let d = a.dtype();
        let Some(dt) = DType::from_kind(d.kind(), d.itemsize()) else {
            return Err(py_err(
                py,
                2,
                format!(
                    "{what}: dtype {} is not supported; use bool, integer or float arrays",
                    d
                ),
            ));
        };
        if a.is_c_contiguous() && d.is_native_byteorder() != Some(false) {
            return Ok(In {
                arr: Some(a.clone()),
                scalar: [0; 8],
                dtype: dt,
            });
        }
        let native = d.call_method1("newbyteorder", ("=",))?;
        let c = numpy_mod(py)?.call_method1("ascontiguousarray", (a, native))?;
        let c = c.cast_into::<PyUntypedArray>()?;
        return Ok(In {
            arr: Some(c),
            scalar: [0; 8],
            dtype: dt,
        });
    }
    let mut scalar = [0u8; 8];
    if let Ok(b) = obj.cast_exact::<PyBool>() {
        scalar[0] = b.is_true() as u8;
        return Ok(In {
            arr: None,
            scalar,
            dtype: DType::Bool,
        });
    }
    if let Ok(f) = obj.cast_exact::<PyFloat>() {
        scalar.copy_from_slice(&f.value().to_ne_bytes());
        return Ok(In {
            arr: None,
            scalar,
            dtype: DType::F64,
        });
    }
    if obj.cast_exact::<PyInt>().is_ok() {
        let v = i64::try_from(int_arg(obj, what)?).map_err(|_| {
            py_err(
                py,
                3,
                format!("{what}: integer {obj} does not fit in int64"),
            )
        })?;
        scalar.copy_from_slice(&v.to_ne_bytes());
        return Ok(In {
            arr: None,
            scalar,
            dtype: DType::I64,
        });
    }
    // numpy scalars (np.float32(r), np.bool_(done), np.int64(a)): read the value directly
    if obj.is_instance(numpy_generic(py)?)? {
        let d = obj.getattr("dtype")?;
        let d = d.cast::<PyArrayDescr>()?;
        if let Some(dt) = DType::from_kind(d.kind(), d.itemsize()) {
            match dt {
                DType::F32 => {
                    scalar[..4].copy_from_slice(&(obj.extract::<f64>()? as f32).to_ne_bytes())
                }
                DType::F64 => scalar.copy_from_slice(&obj.extract::<f64>()?.to_ne_bytes()),
                DType::Bool => scalar[0] = obj.is_truthy()? as u8,
                DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                    let v: u64 = obj.extract()?;
                    scalar[..dt.size()].copy_from_slice(&v.to_ne_bytes()[..dt.size()]);
                }
                _ => {
                    let v: i64 = obj.extract()?;
                    scalar[..dt.size()].copy_from_slice(&v.to_ne_bytes()[..dt.size()]);
                }
            }
            return Ok(In {
                arr: None,
                scalar,
                dtype: dt,
            });
        }
    }
    // lists, tensors with __array__, other scalars: let numpy convert
    let a = numpy_mod(py)?
        .call_method1("asarray", (obj,))
        .map_err(|e| {
            py_err(
                py,
                2,
                format!(
                    "{what}: cannot convert {} to an array ({e})",
                    type_name(obj)
                ),
            )
        })?;
    if a.cast::<PyUntypedArray>().is_err() {
        return Err(py_err(
            py,
            2,
            format!("{what}: cannot convert {} to an array", type_name(obj)),
        ));
    }
    to_in(&a, what)
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Named inputs (observation keys or extras), inline for the usual few.
type Named<'py> = SmallVec<[(Cow<'static, str>, In<'py>); 4]>;

/// The core's view of named inputs.
fn arrays<'a>(v: &'a Named<'_>) -> SmallVec<[(&'a str, Array<'a>); 4]> {
    v.iter().map(|(n, i)| (n.as_ref(), i.array())).collect()
}

fn names_in<'py>(core: &ReplayCore, obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Named<'py>> {
    let py = obj.py();
    let cols = core.obs_columns();
    if let Ok(d) = obj.cast::<PyDict>() {
        if core.has_schema() {
            if !core.obs_is_dict() {
                return Err(py_err(
                    py,
                    1,
                    format!("{what}: expected an array, got a dict"),
                ));
            }
            let mut v = Named::new();
            for c in cols {
                let key = &c.spec.name[4..];
                let item = d.get_item(key)?.ok_or_else(|| {
                    py_err(
                        py,
                        1,
                        format!("{what}: the observation dict has no key '{key}'"),
                    )
                })?;
                v.push((
                    Cow::Owned(c.spec.name.clone()),
                    to_in(&item, &format!("{what}['{key}']"))?,
                ));
            }
            if d.len() != cols.len() {
                return Err(py_err(
                    py,
                    1,
                    format!(
                        "{what}: expected keys {:?}, got {} keys",
                        cols.iter().map(|c| &c.spec.name[4..]).collect::<Vec<_>>(),
                        d.len()
                    ),
                ));
            }
            return Ok(v);
        }
        let mut v = Named::new();
        for (k, item) in d.iter() {
            let key: String = k
                .extract()
                .map_err(|_| py_err(py, 1, format!("{what}: dict keys must be str")))?;
            v.push((
                Cow::Owned(format!("obs.{key}")),
                to_in(&item, &format!("{what}['{key}']"))?,
            ));
        }
        if v.is_empty() {
            return Err(py_err(py, 1, format!("{what}: empty observation dict")));
        }
        return Ok(v);
    }
    if core.has_schema() && core.obs_is_dict() {
        return Err(py_err(
            py,
            1,
            format!(
                "{what}: expected a dict with keys {:?}, got {}",
                cols.iter().map(|c| &c.spec.name[4..]).collect::<Vec<_>>(),
                type_name(obj)
            ),
        ));
    }
    let mut v = Named::new();
    v.push((Cow::Borrowed("obs"), to_in(obj, what)?));
    Ok(v)
}

fn extras_in<'py>(core: &ReplayCore, kw: Option<&Bound<'py, PyDict>>) -> PyResult<Named<'py>> {
    let Some(kw) = kw else {
        return Ok(Named::new());
    };
    let mut v = Named::new();
    if core.has_schema() {
        // schema order; missing or unknown names are reported by the core
        for c in &core.step_columns()[1..] {
            if let Some(item) = kw.get_item(&c.spec.name)? {
                v.push((Cow::Owned(c.spec.name.clone()), to_in(&item, &c.spec.name)?));
            }
        }
        if v.len() == kw.len() {
            return Ok(v);
        }
        v.clear();
    }
    for (k, item) in kw.iter() {
        let name: String = k.extract().map_err(|_| {
            py_err(
                kw.py(),
                2,
                format!("extras: column names must be str, got {}", type_name(&k)),
            )
        })?;
        let i = to_in(&item, &name)?;
        v.push((Cow::Owned(name), i));
    }
    Ok(v)
}

// ---------------------------------------------------------------------------------------------
// arrays out

fn descr(py: Python<'_>, dt: DType) -> Bound<'_, PyArrayDescr> {
    match dt {
        DType::Bool => dtype::<bool>(py),
        DType::U8 => dtype::<u8>(py),
        DType::U16 => dtype::<u16>(py),
        DType::U32 => dtype::<u32>(py),
        DType::U64 => dtype::<u64>(py),
        DType::I8 => dtype::<i8>(py),
        DType::I16 => dtype::<i16>(py),
        DType::I32 => dtype::<i32>(py),
        DType::I64 => dtype::<i64>(py),
        DType::F32 => dtype::<f32>(py),
        DType::F64 => dtype::<f64>(py),
    }
}

/// A new C-contiguous array. With `data` and `base`: a read-only view of `data` that keeps `base`
/// alive; without: a fresh, uninitialised array owned by NumPy.
///
/// # Safety
/// `data`, when given, must point to `prod(dims) * dt.size()` bytes that outlive `base`.
unsafe fn new_array<'py>(
    py: Python<'py>,
    dt: DType,
    dims: &[usize],
    data: Option<(*const u8, &Bound<'py, PyAny>)>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    new_strided(py, dt, dims, None, data)
}

/// As `new_array`, with byte strides (`None`: C-contiguous).
///
/// # Safety
/// As `new_array`; with strides, every addressed element must lie inside the memory.
unsafe fn new_strided<'py>(
    py: Python<'py>,
    dt: DType,
    dims: &[usize],
    strides: Option<&[usize]>,
    data: Option<(*const u8, &Bound<'py, PyAny>)>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let mut d: Vec<npy_intp> = dims.iter().map(|&x| x as npy_intp).collect();
    let mut st: Vec<npy_intp> = strides
        .map(|s| s.iter().map(|&x| x as npy_intp).collect())
        .unwrap_or_default();
    let st_ptr = if strides.is_some() {
        st.as_mut_ptr()
    } else {
        std::ptr::null_mut()
    };
    let (ptr, flags) = match data {
        Some((p, _)) => (p as *mut std::ffi::c_void, npyffi::NPY_ARRAY_CARRAY_RO),
        None => (std::ptr::null_mut(), 0),
    };
    let raw = PY_ARRAY_API.PyArray_NewFromDescr(
        py,
        npyffi::get_type_object(py, npyffi::NpyTypes::PyArray_Type),
        descr(py, dt).into_dtype_ptr(),
        d.len() as std::ffi::c_int,
        d.as_mut_ptr(),
        st_ptr,
        ptr,
        flags,
        std::ptr::null_mut(),
    );
    if raw.is_null() {
        return Err(PyErr::fetch(py));
    }
    if let Some((_, base)) = data {
        PY_ARRAY_API.PyArray_SetBaseObject(
            py,
            raw as *mut npyffi::PyArrayObject,
            base.clone().into_ptr(),
        );
    }
    Ok(Bound::from_owned_ptr(py, raw).cast_into_unchecked())
}

fn fresh<'py>(py: Python<'py>, dt: DType, dims: &[usize]) -> PyResult<Bound<'py, PyUntypedArray>> {
    // SAFETY: no external data; NumPy allocates.
    unsafe { new_array(py, dt, dims, None) }
}

/// The writable bytes of an array (fresh or validated `out=`).
///
/// # Safety
/// The array must be C-contiguous and writable, and stay alive and unaliased while the slice is used.
unsafe fn bytes_mut<'a>(a: &Bound<'_, PyUntypedArray>) -> &'a mut [u8] {
    let n = a.shape().iter().product::<usize>() * a.dtype().itemsize();
    std::slice::from_raw_parts_mut((*a.as_array_ptr()).data as *mut u8, n)
}

fn vec_array<'py, T: numpy::Element>(py: Python<'py>, v: Vec<T>) -> Bound<'py, PyAny> {
    numpy::PyArray1::from_vec(py, v).into_any()
}

/// Validate a caller-supplied output array: exact dtype and shape, C-contiguous, writable.
fn check_out_array<'py>(
    py: Python<'py>,
    obj: &Bound<'py, PyAny>,
    what: &str,
    dt: DType,
    dims: &[usize],
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let a = obj.cast::<PyUntypedArray>().map_err(|_| {
        py_err(
            py,
            2,
            format!("out.{what}: expected a numpy array, got {}", type_name(obj)),
        )
    })?;
    let d = a.dtype();
    let got = DType::from_kind(d.kind(), d.itemsize());
    if got != Some(dt) || d.is_native_byteorder() == Some(false) {
        return Err(py_err(
            py,
            2,
            format!("out.{what}: expected dtype {}, got {}", dt.name(), d),
        ));
    }
    if a.shape() != dims {
        return Err(py_err(
            py,
            1,
            format!("out.{what}: expected shape {dims:?}, got {:?}", a.shape()),
        ));
    }
    // SAFETY: reading the flags of a live array object.
    let flags = unsafe { (*a.as_array_ptr()).flags };
    if flags & npyffi::NPY_ARRAY_C_CONTIGUOUS == 0 || flags & npyffi::NPY_ARRAY_WRITEABLE == 0 {
        return Err(py_err(
            py,
            5,
            format!("out.{what}: the array must be C-contiguous and writable"),
        ));
    }
    Ok(a.clone())
}

// ---------------------------------------------------------------------------------------------
// the buffer

/// Result of one `add`: the rows written and the episodes that ended.
#[pyclass(module = "rlcore._core", frozen)]
struct AddResult {
    out: AddOutcome,
}

#[pymethods]
impl AddResult {
    /// int64 [N]: row of each env's transition, -1 where the env was masked.
    #[getter]
    fn indices<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        vec_array(py, self.out.rows.clone())
    }
    /// int64 [D]: envs whose episode ended with this step.
    #[getter]
    fn done_envs<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        vec_array(py, self.out.done.iter().map(|d| d.env as i64).collect())
    }
    /// float64 [D]: undiscounted returns of those episodes.
    #[getter]
    fn episode_returns<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        vec_array(py, self.out.done.iter().map(|d| d.ret).collect())
    }
    /// int64 [D]: lengths (steps) of those episodes.
    #[getter]
    fn episode_lengths<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        vec_array(py, self.out.done.iter().map(|d| d.len as i64).collect())
    }
    fn __repr__(&self) -> String {
        format!(
            "AddResult(indices={:?}, done_envs={:?}, episode_returns={:?}, episode_lengths={:?})",
            self.out.rows,
            self.out.done.iter().map(|d| d.env).collect::<Vec<_>>(),
            self.out.done.iter().map(|d| d.ret).collect::<Vec<_>>(),
            self.out.done.iter().map(|d| d.len).collect::<Vec<_>>()
        )
    }
}

/// The Rust replay core. Use `rlcore.ReplayBuffer`, `rlcore.HERReplayBuffer` or
/// `rlcore.PrioritizedReplayBuffer`, which subclass it.
#[pyclass(module = "rlcore._core", subclass, frozen)]
struct RawBuffer {
    /// Locked by every call. Large samples run with the GIL released, so another Python thread
    /// (e.g. a collector adding while a prefetch thread samples) waits for the lock — with the
    /// GIL released too, so the two never deadlock.
    core: Mutex<ReplayCore>,
    /// Id of the thread holding `core` (0: none), to refuse re-entrant calls instead of
    /// deadlocking (a `compute_reward` that calls back into its own buffer).
    owner: AtomicU64,
}

static NEXT_TID: AtomicU64 = AtomicU64::new(1);
thread_local! {
    static TID: u64 = NEXT_TID.fetch_add(1, Ordering::Relaxed);
}

fn tid() -> u64 {
    TID.with(|t| *t)
}

/// The locked core; clears the owner on drop.
struct Guard<'a> {
    g: MutexGuard<'a, ReplayCore>,
    owner: &'a AtomicU64,
}

impl std::ops::Deref for Guard<'_> {
    type Target = ReplayCore;
    fn deref(&self) -> &ReplayCore {
        &self.g
    }
}
impl std::ops::DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut ReplayCore {
        &mut self.g
    }
}
impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.owner.store(0, Ordering::Release);
    }
}

impl RawBuffer {
    /// Apply a vectorised core query to an index array and return its result as a NumPy array.
    fn per_index<'py, T: numpy::Element>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
        f: impl FnOnce(&ReplayCore, &[i64]) -> Result<Vec<T>, CoreError>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let idx = idx_vec(py, indices, "indices")?;
        let guard = self.lock(py)?;
        let v = f(&guard, &idx).or_py(py)?;
        Ok(vec_array(py, v))
    }

    /// Lock the core. A thread that has to wait releases the GIL while it waits, so a holder
    /// that runs with the GIL released (a large sample) can always take the GIL back.
    fn lock<'a>(&'a self, py: Python<'_>) -> PyResult<Guard<'a>> {
        let me = tid();
        let g = match self.core.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                if self.owner.load(Ordering::Acquire) == me {
                    return Err(py_err(
                        py,
                        5,
                        "the buffer is already in use by this thread (a compute_reward that calls back into \
                         its own buffer?)"
                            .to_string(),
                    ));
                }
                // wait with the GIL released (a guard cannot cross back), then take it with the GIL
                loop {
                    py.detach(|| drop(self.core.lock()));
                    match self.core.try_lock() {
                        Ok(g) => break g,
                        Err(TryLockError::Poisoned(p)) => break p.into_inner(),
                        Err(TryLockError::WouldBlock) => continue,
                    }
                }
            }
        };
        self.owner.store(me, Ordering::Release);
        Ok(Guard {
            g,
            owner: &self.owner,
        })
    }
}

/// (strategy, future_k, distance_threshold, achieved goal key, desired goal key, finished_only,
/// exact_ratio).
type HerTuple = (String, f64, Option<f64>, String, String, bool, bool);

/// Gathers larger than this many bytes release the GIL.
const DETACH_BYTES: usize = 1 << 20;

fn idx_vec(py: Python<'_>, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<i64>> {
    rlcore_core::validate::index_array(what, &to_in(obj, what)?.array()).or_py(py)
}

fn parse_strategy(py: Python<'_>, s: &str) -> PyResult<GoalStrategy> {
    match s {
        "future" => Ok(GoalStrategy::Future),
        "final" => Ok(GoalStrategy::Final),
        "episode" => Ok(GoalStrategy::Episode),
        _ => Err(py_err(
            py,
            3,
            format!("strategy must be 'future', 'final' or 'episode', got '{s}'"),
        )),
    }
}

fn os_seed() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(std::process::id() as u64);
    h.finish()
}

fn spec_tuple<'py>(py: Python<'py>, c: &ColumnSpec) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(
        py,
        [
            c.name.clone().into_pyobject(py)?.into_any(),
            c.dtype.name().into_pyobject(py)?.into_any(),
            PyTuple::new(py, c.shape.iter())?.into_any(),
        ],
    )
}

fn parse_specs(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Vec<ColumnSpec>> {
    let mut v = Vec::new();
    for item in obj.try_iter()? {
        let item = item?;
        let (name, dt, shape): (String, String, Vec<usize>) = item.extract().map_err(|_| {
            py_err(
                py,
                2,
                format!(
                    "column spec {item}: expected (name: str, dtype name: str, shape: tuple of \
                     ints >= 0)"
                ),
            )
        })?;
        let dtype = DType::from_name(&dt)
            .ok_or_else(|| py_err(py, 2, format!("column '{name}': unsupported dtype '{dt}'")))?;
        v.push(ColumnSpec::new(name, dtype, shape));
    }
    Ok(v)
}

#[pymethods]
impl RawBuffer {
    #[new]
    #[pyo3(signature = (capacity, *, num_envs=Given(None), seed=None, prioritized=false,
                        alpha=Given(None), beta=Given(None), eps=Given(None), her_strategy=None,
                        future_k=Given(None), distance_threshold=None,
                        achieved_goal_key="achieved_goal", desired_goal_key="desired_goal",
                        finished_only=false, exact_ratio=false),
           text_signature = "(capacity, *, num_envs=1, seed=None, prioritized=False, alpha=0.6, \
                             beta=0.4, eps=1e-06, her_strategy=None, future_k=4.0, \
                             distance_threshold=None, achieved_goal_key='achieved_goal', \
                             desired_goal_key='desired_goal', finished_only=False, \
                             exact_ratio=False)")]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        capacity: &Bound<'_, PyAny>,
        num_envs: Given<'_>,
        seed: Option<&Bound<'_, PyAny>>,
        prioritized: bool,
        alpha: Given<'_>,
        beta: Given<'_>,
        eps: Given<'_>,
        her_strategy: Option<&str>,
        future_k: Given<'_>,
        distance_threshold: Option<&Bound<'_, PyAny>>,
        achieved_goal_key: &str,
        desired_goal_key: &str,
        finished_only: bool,
        exact_ratio: bool,
    ) -> PyResult<Self> {
        let capacity = count_arg(capacity, "capacity")?;
        let num_envs = num_envs.count("num_envs", 1)?;
        let seed = match seed {
            Some(x) if !x.is_none() => {
                rlcore_core::validate::seed(int_arg(x, "seed")?).or_py(py)?
            }
            _ => os_seed(),
        };
        let (alpha, beta, eps) = (
            alpha.float("alpha", 0.6)?,
            beta.float("beta", 0.4)?,
            eps.float("eps", 1e-6)?,
        );
        let future_k = future_k.float("future_k", 4.0)?;
        let distance_threshold = opt_float_arg(distance_threshold, "distance_threshold")?;
        let mut core = ReplayCore::new(capacity, num_envs, seed).or_py(py)?;
        if prioritized {
            core.enable_per(alpha, beta, eps).or_py(py)?;
        }
        if let Some(s) = her_strategy {
            core.enable_her(HerConfig {
                strategy: parse_strategy(py, s)?,
                future_k,
                distance_threshold,
                achieved_goal: achieved_goal_key.to_string(),
                desired_goal: desired_goal_key.to_string(),
                finished_only,
                exact_ratio,
            })
            .or_py(py)?;
        }
        Ok(RawBuffer {
            core: Mutex::new(core),
            owner: AtomicU64::new(0),
        })
    }

    /// Add one vector-env step of N = num_envs envs: row i of every array belongs to env i.
    ///
    /// obs, obs_next: [N, *O] arrays (or dicts of them for dict observations); obs_next holds
    /// the true next observation (the final one where the episode ended). act: [N, *A].
    /// rew: [N] finite rewards, stored as float32. terminated, truncated: [N] bool or integer
    /// flags (nonzero means set). mask: [N] bool, False where the env's step is not a
    /// transition (gymnasium's NEXT_STEP autoreset). **extras: [N, *shape] extra columns.
    /// A single-env buffer also takes arrays without the leading N. The first add (or
    /// from_spaces) fixes the columns; later adds must match them.
    ///
    /// Returns an AddResult: indices [N] rows written (-1 where masked), and done_envs,
    /// episode_returns, episode_lengths of the episodes that ended.
    ///
    /// Raises ShapeError (shapes), DTypeError (dtypes or values a column cannot hold),
    /// InvalidValueError (non-finite rewards), ApiUsageError (missing or unknown extras,
    /// re-entrant use). Everything is validated before a byte is written.
    #[pyo3(signature = (obs, act, rew, terminated, truncated, obs_next, *, mask=None, **extras))]
    #[allow(clippy::too_many_arguments)]
    fn add<'py>(
        &self,
        py: Python<'py>,
        obs: &Bound<'py, PyAny>,
        act: &Bound<'py, PyAny>,
        rew: &Bound<'py, PyAny>,
        terminated: &Bound<'py, PyAny>,
        truncated: &Bound<'py, PyAny>,
        obs_next: &Bound<'py, PyAny>,
        mask: Option<&Bound<'py, PyAny>>,
        extras: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<AddResult> {
        let out = self.write(
            py, obs, act, rew, terminated, truncated, obs_next, mask, extras, false,
        )?;
        Ok(AddResult { out })
    }

    /// Add T consecutive steps (offline data); see `ReplayBuffer.extend` and `from_arrays`.
    /// `extras` is a dict (not keyword arguments), so that every name, reserved ones included,
    /// reaches the core's declaration check.
    #[pyo3(signature = (obs, act, rew, terminated, truncated, obs_next, *, mask=None, extras=None))]
    #[allow(clippy::too_many_arguments)]
    fn _extend<'py>(
        &self,
        py: Python<'py>,
        obs: &Bound<'py, PyAny>,
        act: &Bound<'py, PyAny>,
        rew: &Bound<'py, PyAny>,
        terminated: &Bound<'py, PyAny>,
        truncated: &Bound<'py, PyAny>,
        obs_next: &Bound<'py, PyAny>,
        mask: Option<&Bound<'py, PyAny>>,
        extras: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<AddResult> {
        let out = self.write(
            py, obs, act, rew, terminated, truncated, obs_next, mask, extras, true,
        )?;
        Ok(AddResult { out })
    }

    /// Sample into fresh (or `out`) arrays; returns the fields of a TransitionBatch as a tuple.
    /// With `indices` (and for HER `goal_indices`), the batch of those rows instead of a draw
    /// (`batch_size` must then be their count).
    #[pyo3(signature = (batch_size, n_step, gamma, out, compute_reward, indices=None, goal_indices=None))]
    #[allow(clippy::too_many_arguments)]
    fn _sample<'py>(
        &self,
        py: Python<'py>,
        batch_size: &Bound<'py, PyAny>,
        n_step: &Bound<'py, PyAny>,
        gamma: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
        compute_reward: Option<&Bound<'py, PyAny>>,
        indices: Option<&Bound<'py, PyAny>>,
        goal_indices: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let at = indices.map(|a| idx_vec(py, a, "indices")).transpose()?;
        let goals_at = goal_indices
            .map(|a| idx_vec(py, a, "goal_indices"))
            .transpose()?;
        let batch_size = count_arg(batch_size, "batch_size")?;
        let n_step = count_arg(n_step, "n_step")?;
        let gamma = float_arg(gamma, "gamma")?;
        let mut guard = self.lock(py)?;
        let core = &mut *guard;
        // the core's checks, before any output array is allocated
        core.check_sample_args(batch_size, n_step, gamma)
            .or_py(py)?;
        let b = batch_size;
        let (obs_specs, step_specs) = (core.obs_columns(), core.step_columns());
        let dims = |shape: &[usize]| -> Vec<usize> {
            let mut d = Vec::with_capacity(shape.len() + 1);
            d.push(b);
            d.extend_from_slice(shape);
            d
        };
        let per = core.per().is_some();
        // output arrays: fresh, or validated from `out`
        let mut obs_a = Vec::with_capacity(obs_specs.len());
        let mut obs_next_a = Vec::with_capacity(obs_specs.len());
        let mut step_a = Vec::with_capacity(step_specs.len());
        let (rew_a, term_a, trunc_a, disc_a, idx_a, w_a);
        match out {
            None => {
                for c in obs_specs {
                    obs_a.push(fresh(py, c.spec.dtype, &dims(&c.spec.shape))?);
                    obs_next_a.push(fresh(py, c.spec.dtype, &dims(&c.spec.shape))?);
                }
                for c in step_specs {
                    step_a.push(fresh(py, c.spec.dtype, &dims(&c.spec.shape))?);
                }
                rew_a = fresh(py, DType::F32, &[b])?;
                term_a = fresh(py, DType::Bool, &[b])?;
                trunc_a = fresh(py, DType::Bool, &[b])?;
                disc_a = fresh(py, DType::F32, &[b])?;
                idx_a = fresh(py, DType::I64, &[b])?;
                w_a = if per {
                    Some(fresh(py, DType::F32, &[b])?)
                } else {
                    None
                };
            }
            Some(o) => {
                let get = |name: &str| {
                    o.getattr(name).map_err(|_| {
                        py_err(
                            py,
                            5,
                            format!(
                                "out must be a TransitionBatch (from a previous sample of this \
                                 buffer); it has no field '{name}' ({})",
                                type_name(o)
                            ),
                        )
                    })
                };
                // a dict field of `out` (obs of dict observations, extras) must hold every key
                let item = |f: &Bound<'py, PyAny>, field: &str, key: &str| {
                    f.get_item(key).map_err(|_| {
                        py_err(
                            py,
                            5,
                            format!(
                                "out.{field} has no array '{key}' ({}); pass a TransitionBatch \
                                 from a previous sample of this buffer",
                                type_name(f)
                            ),
                        )
                    })
                };
                let dict_obs = core.obs_is_dict();
                for (field, dst) in [("obs", &mut obs_a), ("obs_next", &mut obs_next_a)] {
                    let f = get(field)?;
                    for c in obs_specs {
                        let (item, what) = if dict_obs {
                            let key = &c.spec.name[4..];
                            (item(&f, field, key)?, format!("{field}['{key}']"))
                        } else {
                            (f.clone(), field.to_string())
                        };
                        dst.push(check_out_array(
                            py,
                            &item,
                            &what,
                            c.spec.dtype,
                            &dims(&c.spec.shape),
                        )?);
                    }
                }
                let extras = get("extras")?;
                for (k, c) in step_specs.iter().enumerate() {
                    let item = if k == 0 {
                        get("act")?
                    } else {
                        item(&extras, "extras", &c.spec.name)?
                    };
                    step_a.push(check_out_array(
                        py,
                        &item,
                        &c.spec.name,
                        c.spec.dtype,
                        &dims(&c.spec.shape),
                    )?);
                }
                rew_a = check_out_array(py, &get("rew")?, "rew", DType::F32, &[b])?;
                term_a = check_out_array(py, &get("terminated")?, "terminated", DType::Bool, &[b])?;
                trunc_a = check_out_array(py, &get("truncated")?, "truncated", DType::Bool, &[b])?;
                disc_a = check_out_array(py, &get("discount")?, "discount", DType::F32, &[b])?;
                idx_a = check_out_array(py, &get("indices")?, "indices", DType::I64, &[b])?;
                w_a = if per {
                    Some(check_out_array(
                        py,
                        &get("weights")?,
                        "weights",
                        DType::F32,
                        &[b],
                    )?)
                } else {
                    None
                };
            }
        }
        if out.is_some() {
            let mut spans: Vec<(usize, usize)> = obs_a
                .iter()
                .chain(obs_next_a.iter())
                .chain(step_a.iter())
                .chain([&rew_a, &term_a, &trunc_a, &disc_a, &idx_a])
                .chain(w_a.iter())
                .map(|a| {
                    // SAFETY: only the address and length of a live array are read.
                    let s = unsafe { bytes_mut(a) };
                    (s.as_ptr() as usize, s.len())
                })
                .filter(|&(_, n)| n > 0)
                .collect();
            spans.sort_unstable();
            if spans.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0) {
                return Err(py_err(
                    py,
                    5,
                    "out: two output arrays share memory; give every field its own array"
                        .to_string(),
                ));
            }
        }
        let row_bytes: usize = obs_specs.iter().map(|c| 2 * c.item_bytes).sum::<usize>()
            + step_specs.iter().map(|c| c.item_bytes).sum::<usize>();
        // SAFETY: every array above is C-contiguous, writable, alive until the end of this call
        // and distinct (fresh, or checked `out` arrays which the caller must not alias).
        let cast_f32 = |a: &Bound<'_, PyUntypedArray>| -> &mut [f32] {
            let s = unsafe { bytes_mut(a) };
            unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut f32, s.len() / 4) }
        };
        let mut bo = BatchOut {
            obs: obs_a.iter().map(|a| unsafe { bytes_mut(a) }).collect(),
            obs_next: obs_next_a.iter().map(|a| unsafe { bytes_mut(a) }).collect(),
            step: step_a.iter().map(|a| unsafe { bytes_mut(a) }).collect(),
            rew: cast_f32(&rew_a),
            terminated: unsafe { bytes_mut(&term_a) },
            truncated: unsafe { bytes_mut(&trunc_a) },
            discount: cast_f32(&disc_a),
            indices: {
                let s = unsafe { bytes_mut(&idx_a) };
                unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut i64, s.len() / 8) }
            },
            weights: w_a.as_ref().map(cast_f32),
        };
        let n = n_step;
        match (
            core.her().map(|h| h.distance_threshold.is_none()),
            compute_reward,
        ) {
            (Some(true), Some(f)) => {
                let mut stash: Option<PyErr> = None;
                let mut call = |g: &Goals<'_>| -> Result<Vec<f32>, CoreError> {
                    match call_reward(py, f, g.dtype, g.shape, g.achieved, g.desired, g.count) {
                        Ok(v) => Ok(v),
                        Err(e) => {
                            let msg = e.to_string();
                            stash = Some(e);
                            Err(CoreError::usage(msg))
                        }
                    }
                };
                let r = match &at {
                    Some(ix) => {
                        core.sample_at(ix, goals_at.as_deref(), n, gamma, &mut bo, Some(&mut call))
                    }
                    None => core.sample(b, n, gamma, &mut bo, Some(&mut call)),
                };
                if let Some(e) = stash {
                    return Err(e);
                }
                r.or_py(py)?;
            }
            _ => {
                let mut run = || match &at {
                    Some(ix) => core.sample_at(ix, goals_at.as_deref(), n, gamma, &mut bo, None),
                    None => core.sample(b, n, gamma, &mut bo, None),
                };
                if b * row_bytes > DETACH_BYTES {
                    py.detach(run).or_py(py)?;
                } else {
                    run().or_py(py)?;
                }
            }
        }
        drop(bo);
        let wrap = |v: Vec<Bound<'py, PyUntypedArray>>| -> PyResult<Bound<'py, PyAny>> {
            if core.obs_is_dict() {
                let d = PyDict::new(py);
                for (c, a) in core.obs_columns().iter().zip(v) {
                    d.set_item(&c.spec.name[4..], a)?;
                }
                Ok(d.into_any())
            } else {
                Ok(v.into_iter()
                    .next()
                    .map(|a| a.into_any())
                    .unwrap_or_else(|| py.None().into_bound(py)))
            }
        };
        let obs_o = wrap(obs_a)?;
        let obs_next_o = wrap(obs_next_a)?;
        let extras = PyDict::new(py);
        let mut it = step_a.into_iter();
        let act_o = it
            .next()
            .map(|a| a.into_any())
            .unwrap_or_else(|| py.None().into_bound(py));
        for (c, a) in core.step_columns()[1..].iter().zip(it) {
            extras.set_item(&c.spec.name, a)?;
        }
        let w_o = match w_a {
            Some(a) => a.into_any(),
            None => py.None().into_bound(py),
        };
        PyTuple::new(
            py,
            [
                obs_o,
                act_o,
                rew_a.into_any(),
                obs_next_o,
                term_a.into_any(),
                trunc_a.into_any(),
                disc_a.into_any(),
                idx_a.into_any(),
                w_o,
                extras.into_any(),
            ],
        )
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.lock(py)?.len())
    }

    /// Total rows of storage (`num_envs * segment_len`).
    #[getter]
    fn capacity(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.lock(py)?.rows())
    }
    #[getter]
    fn num_envs(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.lock(py)?.num_envs())
    }
    /// Rows per env segment (`capacity // num_envs`).
    #[getter]
    fn segment_len(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.lock(py)?.segment_len())
    }
    #[getter]
    fn prioritized(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.lock(py)?.per().is_some())
    }
    #[getter]
    fn alpha(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        Ok(self.lock(py)?.per().map(|p| p.alpha))
    }
    #[getter]
    fn eps(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        Ok(self.lock(py)?.per().map(|p| p.eps))
    }
    /// Importance-sampling exponent β of prioritized buffers; settable at any time.
    #[getter]
    fn get_beta(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        Ok(self.lock(py)?.per().map(|p| p.beta))
    }
    #[setter]
    fn set_beta(&self, py: Python<'_>, beta: &Bound<'_, PyAny>) -> PyResult<()> {
        let beta = float_arg(beta, "beta")?;
        self.lock(py)?.set_beta(beta).or_py(py)
    }

    fn _her_config(&self, py: Python<'_>) -> PyResult<Option<HerTuple>> {
        Ok(self.lock(py)?.her().map(|h| {
            let s = match h.strategy {
                GoalStrategy::Future => "future",
                GoalStrategy::Final => "final",
                GoalStrategy::Episode => "episode",
            };
            (
                s.to_string(),
                h.future_k,
                h.distance_threshold,
                h.achieved_goal.clone(),
                h.desired_goal.clone(),
                h.finished_only,
                h.exact_ratio,
            )
        }))
    }

    /// Set `(p + eps) ** alpha` as the priority of the transition each index names; returns how
    /// many indices were skipped.
    ///
    /// indices: int [K] rows, as handed out by `add`/`extend` (`AddResult.indices`, Ape-X style
    /// initial priorities) or by `sample` (`TransitionBatch.indices`). priorities: [K] numbers
    /// >= 0 (e.g. |TD error|), one per index.
    ///
    /// Which transition an index names: with bare row indices, the most recent hand-out of a
    /// row (by add, extend or sample) defines it, and an update lands if and only if the row
    /// still holds that transition. A row that holds no transition now (a terminal row, the
    /// open row of a running episode, a row never written or cleared) is skipped and counted.
    /// So an index from `sample` whose row was overwritten since is skipped while the row holds
    /// no transition, and lands on the newer transition once `add` has handed the row out for it.
    ///
    /// Raises ShapeError (K differs, arrays not 1-d), DTypeError (non-integer indices, bool or
    /// non-numeric priorities), InvalidValueError (an index outside [0, capacity); a negative,
    /// NaN or infinite priority; one whose (p + eps) ** alpha exceeds MAX_PRIORITY = 1e280, so
    /// that the total priority mass of any buffer stays finite), ApiUsageError (not a
    /// prioritized buffer). Nothing is written unless the whole call is valid.
    fn update_priorities(
        &self,
        py: Python<'_>,
        indices: &Bound<'_, PyAny>,
        priorities: &Bound<'_, PyAny>,
    ) -> PyResult<usize> {
        let idx = idx_vec(py, indices, "indices")?;
        let pr = rlcore_core::validate::priority_array(&to_in(priorities, "priorities")?.array())
            .or_py(py)?;
        self.lock(py)?.update_priorities(&idx, &pr).or_py(py)
    }

    /// (total priority mass, smallest positive priority or inf, priority of new transitions),
    /// O(1); None for a buffer without prioritized replay.
    fn priority_stats(&self, py: Python<'_>) -> PyResult<Option<(f64, f64, f64)>> {
        Ok(self.lock(py)?.priority_stats())
    }

    /// float64 [K]: current `(p + eps) ** alpha` of rows `indices` (0 for non-transition rows).
    fn priorities<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.per_index(py, indices, |c, idx| c.priorities(idx))
    }

    /// int64 [K]: row of the previous step of the same episode (clamped at its first row).
    fn prev<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.per_index(py, indices, |c, idx| c.prev(idx))
    }

    /// int64 [K]: row of the next step of the same episode (clamped at its last transition).
    fn next<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.per_index(py, indices, |c, idx| c.next(idx))
    }

    /// (start, end, length), int64 [K] each: first surviving row of each index's episode, the row
    /// holding its final (or newest) observation, and its number of surviving transitions.
    fn episode_bounds<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let idx = idx_vec(py, indices, "indices")?;
        let (s, e, l) = self.lock(py)?.episode_bounds(&idx).or_py(py)?;
        PyTuple::new(py, [vec_array(py, s), vec_array(py, e), vec_array(py, l)])
    }

    /// int64 [U]: newest transition row of every env whose episode is still running.
    fn unfinished_index<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(vec_array(py, self.lock(py)?.unfinished_index()))
    }

    /// int64 [N]: newest transition row of each env, -1 where an env holds none.
    fn last_index<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(vec_array(py, self.lock(py)?.last_index()))
    }

    /// bool [K]: whether each row currently holds a sampleable transition.
    fn is_transition<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.per_index(py, indices, |c, idx| c.is_transition(idx))
    }

    /// Forget every stored step; memory, columns and the RNG stream are kept.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        self.lock(py)?.clear();
        Ok(())
    }

    /// A read-only zero-copy view `[capacity, *shape]` of a stored column.
    fn _column<'py>(slf: &Bound<'py, Self>, name: &str) -> PyResult<Bound<'py, PyUntypedArray>> {
        let py = slf.py();
        let me = slf.get();
        let core = me.lock(py)?;
        let v = core.column_view(name).or_py(py)?;
        let base = slf.clone().into_any();
        // SAFETY: the records are allocated once and never reallocated or freed while the buffer
        // object (the view's base) is alive; every strided element lies inside them.
        unsafe {
            new_strided(
                py,
                v.dtype,
                &v.shape,
                Some(&v.strides),
                Some((v.ptr, &base)),
            )
        }
    }

    /// Declare columns up front: lists of (name, dtype name, shape).
    fn _declare(
        &self,
        py: Python<'_>,
        obs: &Bound<'_, PyAny>,
        step: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let o = parse_specs(py, obs)?;
        let s = parse_specs(py, step)?;
        self.lock(py)?.declare(o, s).or_py(py)
    }

    /// (obs specs, step specs) as lists of (name, dtype name, shape); empty before the first add.
    fn _schema<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
        let (o, s) = self.lock(py)?.schema();
        let ol = PyList::empty(py);
        for c in &o {
            ol.append(spec_tuple(py, c)?)?;
        }
        let sl = PyList::empty(py);
        for c in &s {
            sl.append(spec_tuple(py, c)?)?;
        }
        Ok((ol, sl))
    }

    /// The whole state as a list of (name, array); every array is a fresh copy, filled by the
    /// core in one pass over the row records.
    fn _state_parts<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyList>> {
        let py = slf.py();
        let me = slf.get();
        let l = PyList::empty(py);
        let core = me.lock(py)?;
        let layout = core.state_layout();
        let mut arrays = Vec::with_capacity(layout.len());
        for (name, dtype, shape) in &layout {
            arrays.push((name.clone(), fresh(py, *dtype, shape)?));
        }
        {
            // SAFETY: fresh arrays owned by this function, each of exactly its layout's size.
            let mut dsts: Vec<&mut [u8]> = arrays
                .iter()
                .map(|(_, a)| unsafe { bytes_mut(a) })
                .collect();
            core.export_state(&mut dsts).or_py(py)?;
        }
        for (name, a) in arrays {
            l.append((name, a))?;
        }
        Ok(l)
    }

    /// Replace the whole state from a dict name -> array (validated before anything changes).
    /// `obs`/`step` column specs declare the columns of a buffer that has none yet.
    #[pyo3(signature = (parts, obs=None, step=None))]
    fn _load_state(
        &self,
        py: Python<'_>,
        parts: &Bound<'_, PyDict>,
        obs: Option<&Bound<'_, PyAny>>,
        step: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let mut ins = Vec::with_capacity(parts.len());
        for (k, v) in parts.iter() {
            let name: String = k.extract()?;
            let i = to_in(&v, &name)?;
            ins.push((name, i));
        }
        let sp: Vec<StatePart<'_>> = ins
            .iter()
            .map(|(n, i)| {
                let a = i.array();
                StatePart {
                    name: n.clone(),
                    dtype: a.dtype,
                    shape: a.shape.to_vec(),
                    bytes: Cow::Borrowed(a.data),
                }
            })
            .collect();
        let o = match obs {
            Some(x) => parse_specs(py, x)?,
            None => Vec::new(),
        };
        let s = match step {
            Some(x) => parse_specs(py, x)?,
            None => Vec::new(),
        };
        self.lock(py)?.load_state_with_schema(o, s, &sp).or_py(py)
    }
}

impl RawBuffer {
    #[allow(clippy::too_many_arguments)]
    fn write<'py>(
        &self,
        py: Python<'py>,
        obs: &Bound<'py, PyAny>,
        act: &Bound<'py, PyAny>,
        rew: &Bound<'py, PyAny>,
        terminated: &Bound<'py, PyAny>,
        truncated: &Bound<'py, PyAny>,
        obs_next: &Bound<'py, PyAny>,
        mask: Option<&Bound<'py, PyAny>>,
        extras: Option<&Bound<'py, PyDict>>,
        extend: bool,
    ) -> PyResult<AddOutcome> {
        let mut guard = self.lock(py)?;
        let core = &mut *guard;
        let plain = !core.obs_is_dict()
            && extras.is_none_or(|e| e.is_empty())
            && obs.cast::<PyDict>().is_err()
            && obs_next.cast::<PyDict>().is_err();
        if plain && core.has_schema() {
            // the common case (array observations, no extras) without any intermediate vectors
            let (o, on) = (to_in(obs, "obs")?, to_in(obs_next, "obs_next")?);
            let (a, r) = (to_in(act, "act")?, to_in(rew, "rew")?);
            let (te, tr) = (
                to_in(terminated, "terminated")?,
                to_in(truncated, "truncated")?,
            );
            let m = match mask {
                Some(m) if !m.is_none() => Some(to_in(m, "mask")?),
                _ => None,
            };
            let steps = Steps {
                obs: Obs::Array(o.array()),
                act: a.array(),
                rew: r.array(),
                terminated: te.array(),
                truncated: tr.array(),
                obs_next: Obs::Array(on.array()),
                extras: &[],
                mask: m.as_ref().map(|m| m.array()),
            };
            return if extend {
                core.extend(&steps)
            } else {
                core.add(&steps)
            }
            .or_py(py);
        }
        let o = names_in(core, obs, "obs")?;
        let mut on = names_in(core, obs_next, "obs_next")?;
        if !core.has_schema() {
            // first add of dict observations: take obs_next's keys in obs's order
            let mut sorted = Named::new();
            for (name, _) in &o {
                if let Some(k) = on.iter().position(|(n, _)| n == name) {
                    sorted.push(on.remove(k));
                }
            }
            sorted.extend(on.drain(..));
            on = sorted;
        }
        let a = to_in(act, "act")?;
        let r = to_in(rew, "rew")?;
        let te = to_in(terminated, "terminated")?;
        let tr = to_in(truncated, "truncated")?;
        let m = match mask {
            Some(m) if !m.is_none() => Some(to_in(m, "mask")?),
            _ => None,
        };
        let ex = extras_in(core, extras)?;
        let (o_arr, on_arr, ex_arr) = (arrays(&o), arrays(&on), arrays(&ex));
        fn as_obs<'a>(v: &[(&'a str, Array<'a>)]) -> SmallVec<[(&'a str, Array<'a>); 4]> {
            v.iter()
                .map(|(n, a)| (n.strip_prefix("obs.").unwrap_or(n), *a))
                .collect()
        }
        fn obs_of<'a>(
            dict: bool,
            v: &[(&'a str, Array<'a>)],
            k: &'a [(&'a str, Array<'a>)],
        ) -> Obs<'a> {
            if dict || v.iter().any(|(n, _)| n.starts_with("obs.")) || v.is_empty() {
                Obs::Dict(k)
            } else {
                Obs::Array(v[0].1)
            }
        }
        let (o_keys, on_keys) = (as_obs(&o_arr), as_obs(&on_arr));
        let dict = core.obs_is_dict();
        let steps = Steps {
            obs: obs_of(dict, &o_arr, &o_keys),
            act: a.array(),
            rew: r.array(),
            terminated: te.array(),
            truncated: tr.array(),
            obs_next: obs_of(dict, &on_arr, &on_keys),
            extras: &ex_arr,
            mask: m.as_ref().map(|m| m.array()),
        };
        if extend {
            core.extend(&steps).or_py(py)
        } else {
            core.add(&steps).or_py(py)
        }
    }
}

/// Call the user's vectorised `compute_reward(achieved_goal [M, *G], desired_goal [M, *G], info)`
/// and check that it returned M numbers.
fn call_reward(
    py: Python<'_>,
    f: &Bound<'_, PyAny>,
    gdt: DType,
    gshape: &[usize],
    ag: &[u8],
    g: &[u8],
    m: usize,
) -> PyResult<Vec<f32>> {
    let mut dims = vec![m];
    dims.extend_from_slice(gshape);
    let ag_a = fresh(py, gdt, &dims)?;
    let g_a = fresh(py, gdt, &dims)?;
    // SAFETY: fresh arrays of exactly these sizes.
    unsafe {
        bytes_mut(&ag_a).copy_from_slice(ag);
        bytes_mut(&g_a).copy_from_slice(g);
    }
    let res = f.call1((ag_a, g_a, PyDict::new(py)))?;
    let r = to_in(&res, "compute_reward result").map_err(|_| {
        py_err(
            py,
            2,
            format!(
                "compute_reward must return a numeric array of shape [{m}], got {}",
                type_name(&res)
            ),
        )
    })?;
    let a = r.array();
    if a.shape != [m] {
        return Err(py_err(
            py,
            1,
            format!(
                "compute_reward must return one reward per goal pair, shape [{m}]; got shape {:?}",
                a.shape
            ),
        ));
    }
    if !matches!(a.dtype, DType::F32 | DType::F64) && !a.dtype.can_cast_to(DType::F64) {
        return Err(py_err(
            py,
            2,
            format!(
                "compute_reward returned dtype {}; expected float",
                a.dtype.name()
            ),
        ));
    }
    Ok((0..m)
        .map(|k| rlcore_core::dtype::read_f64(a.dtype, a.data, k) as f32)
        .collect())
}

// ---------------------------------------------------------------------------------------------
// free functions

fn f32_in<'py>(
    py: Python<'py>,
    obj: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<(In<'py>, Vec<usize>)> {
    let i = to_in(obj, what)?;
    if i.dtype != DType::F32 {
        return Err(py_err(
            py,
            2,
            format!("{what}: expected float32, got {}", i.dtype.name()),
        ));
    }
    let shape = i.array().shape.to_vec();
    Ok((i, shape))
}

fn flag_in<'py>(
    py: Python<'py>,
    obj: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<(In<'py>, Vec<usize>)> {
    let i = to_in(obj, what)?;
    if !matches!(i.dtype, DType::Bool | DType::U8) {
        return Err(py_err(
            py,
            2,
            format!("{what}: expected bool or uint8, got {}", i.dtype.name()),
        ));
    }
    let shape = i.array().shape.to_vec();
    Ok((i, shape))
}

/// The float32 elements of an input: borrowed when aligned (NumPy arrays are), copied otherwise.
fn f32s<'a>(i: &'a In<'_>) -> Cow<'a, [f32]> {
    let data = i.array().data;
    // SAFETY: every bit pattern is a valid f32; align_to only splits off misaligned ends.
    let (head, mid, tail) = unsafe { data.align_to::<f32>() };
    if head.is_empty() && tail.is_empty() {
        Cow::Borrowed(mid)
    } else {
        Cow::Owned(
            data.chunks_exact(4)
                .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        )
    }
}

/// GAE over `[T, N]` float32 arrays; returns (advantages, returns). See `rlcore.compute_gae`.
#[pyfunction]
#[pyo3(signature = (rew, values, next_values, terminated, truncated, gamma, gae_lambda))]
#[allow(clippy::too_many_arguments)]
fn _compute_gae<'py>(
    py: Python<'py>,
    rew: &Bound<'py, PyAny>,
    values: &Bound<'py, PyAny>,
    next_values: &Bound<'py, PyAny>,
    terminated: &Bound<'py, PyAny>,
    truncated: &Bound<'py, PyAny>,
    gamma: &Bound<'py, PyAny>,
    gae_lambda: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let (gamma, gae_lambda) = (
        float_arg(gamma, "gamma")?,
        float_arg(gae_lambda, "gae_lambda")?,
    );
    for (name, x) in [("gamma", gamma), ("gae_lambda", gae_lambda)] {
        if !(0.0..=1.0).contains(&x) {
            return Err(py_err(py, 3, format!("{name} must be in [0, 1], got {x}")));
        }
    }
    let (gamma, gae_lambda) = (gamma as f32, gae_lambda as f32);
    let (r, shape) = f32_in(py, rew, "rew")?;
    if shape.len() != 2 {
        return Err(py_err(
            py,
            1,
            format!("rew: expected shape [T, N], got {shape:?}"),
        ));
    }
    let (t_len, n) = (shape[0], shape[1]);
    let (v, vs) = f32_in(py, values, "values")?;
    let (nv, nvs) = f32_in(py, next_values, "next_values")?;
    let (te, tes) = flag_in(py, terminated, "terminated")?;
    let (tr, trs) = flag_in(py, truncated, "truncated")?;
    for (what, s) in [
        ("values", &vs),
        ("next_values", &nvs),
        ("terminated", &tes),
        ("truncated", &trs),
    ] {
        if *s != shape {
            return Err(py_err(
                py,
                1,
                format!("{what}: expected shape {shape:?} like rew, got {s:?}"),
            ));
        }
    }
    let adv = fresh(py, DType::F32, &shape)?;
    let ret = fresh(py, DType::F32, &shape)?;
    let (rv, vv, nvv) = (f32s(&r), f32s(&v), f32s(&nv));
    // SAFETY: fresh float32 arrays of T*N elements.
    let (adv_s, ret_s) = unsafe {
        let a = bytes_mut(&adv);
        let b = bytes_mut(&ret);
        (
            std::slice::from_raw_parts_mut(a.as_mut_ptr() as *mut f32, a.len() / 4),
            std::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut f32, b.len() / 4),
        )
    };
    core_gae(
        &rv,
        &vv,
        &nvv,
        te.array().data,
        tr.array().data,
        t_len,
        n,
        gamma,
        gae_lambda,
        adv_s,
        ret_s,
    )
    .or_py(py)?;
    Ok((adv.into_any(), ret.into_any()))
}

/// n-step returns over a flat stream `[T]`; returns (returns, discounts, horizons).
#[pyfunction]
#[pyo3(signature = (rew, terminated, truncated, n_step, gamma))]
fn _compute_nstep_returns<'py>(
    py: Python<'py>,
    rew: &Bound<'py, PyAny>,
    terminated: &Bound<'py, PyAny>,
    truncated: &Bound<'py, PyAny>,
    n_step: &Bound<'py, PyAny>,
    gamma: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let (n_step, gamma) = (count_arg(n_step, "n_step")?, float_arg(gamma, "gamma")?);
    if !(0.0..=1.0).contains(&gamma) {
        return Err(py_err(
            py,
            3,
            format!("gamma must be in [0, 1], got {gamma}"),
        ));
    }
    let gamma = gamma as f32;
    let (r, shape) = f32_in(py, rew, "rew")?;
    if shape.len() != 1 {
        return Err(py_err(
            py,
            1,
            format!("rew: expected shape [T], got {shape:?}"),
        ));
    }
    let (te, tes) = flag_in(py, terminated, "terminated")?;
    let (tr, trs) = flag_in(py, truncated, "truncated")?;
    for (what, s) in [("terminated", &tes), ("truncated", &trs)] {
        if *s != shape {
            return Err(py_err(
                py,
                1,
                format!("{what}: expected shape {shape:?} like rew, got {s:?}"),
            ));
        }
    }
    let t = shape[0];
    let rv = f32s(&r);
    let mut ret = vec![0f32; t];
    let mut disc = vec![0f32; t];
    let mut hor = vec![0i64; t];
    core_nstep(
        &rv,
        te.array().data,
        tr.array().data,
        n_step,
        gamma,
        &mut ret,
        &mut disc,
        &mut hor,
    )
    .or_py(py)?;
    Ok((vec_array(py, ret), vec_array(py, disc), vec_array(py, hor)))
}

/// The (name, dtype name, shape) of every state part a buffer of `capacity` rows over `num_envs`
/// envs with columns `obs` + `step` (lists of (name, dtype name, shape); both empty before the
/// first add) and prioritized replay on or off has, in `_state_parts` order, computed without
/// building the buffer (a loader checks a save's files against it before allocating anything).
/// Raises InvalidValueError for a capacity or num_envs the buffer refuses, DTypeError for an
/// unknown dtype name.
#[pyfunction]
#[pyo3(signature = (capacity, num_envs, obs, step, prioritized))]
fn _state_layout(
    py: Python<'_>,
    capacity: usize,
    num_envs: usize,
    obs: &Bound<'_, PyAny>,
    step: &Bound<'_, PyAny>,
    prioritized: bool,
) -> PyResult<Vec<(String, &'static str, Vec<usize>)>> {
    let o = parse_specs(py, obs)?;
    let s = parse_specs(py, step)?;
    let layout = state_layout_for(capacity, num_envs, &o, &s, prioritized).or_py(py)?;
    Ok(layout
        .into_iter()
        .map(|(name, dtype, shape)| (name, dtype.name(), shape))
        .collect())
}

/// CRC-32C of the bytes of `data` (a numpy array, read in C order) following bytes whose CRC-32C
/// is `value` (0 to start): `_crc32c(b, _crc32c(a)) == _crc32c(concatenation of a and b)`.
/// Releases the GIL for large arrays. Raises DTypeError for an unsupported dtype.
#[pyfunction]
#[pyo3(signature = (data, value=0))]
fn _crc32c(py: Python<'_>, data: &Bound<'_, PyAny>, value: u32) -> PyResult<u32> {
    let i = to_in(data, "data")?;
    let bytes = i.array().data;
    if bytes.len() > DETACH_BYTES {
        Ok(py.detach(|| crc32c(value, bytes)))
    } else {
        Ok(crc32c(value, bytes))
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let errs = ERRORS.get_or_try_init(py, || make_errors(py))?;
    for (name, t) in ERROR_NAMES.iter().zip(errs.iter()) {
        m.add(*name, t.bind(py))?;
    }
    m.add_class::<RawBuffer>()?;
    m.add_class::<AddResult>()?;
    m.add_function(wrap_pyfunction!(_compute_gae, m)?)?;
    m.add_function(wrap_pyfunction!(_compute_nstep_returns, m)?)?;
    m.add_function(wrap_pyfunction!(_state_layout, m)?)?;
    m.add_function(wrap_pyfunction!(_crc32c, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_PRIORITY", rlcore_core::MAX_PRIORITY)?;
    m.add(
        "RESERVED_NAMES",
        PyTuple::new(py, rlcore_core::RESERVED_NAMES)?,
    )?;
    Ok(())
}
