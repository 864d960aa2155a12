//! Python objects to the core's input types and back: the one place that converts integers,
//! floats, index arrays and NumPy arrays, observation dicts and extras, column specs, and that
//! allocates or wraps NumPy arrays. Every range, shape and layout check is the core's; what
//! fails here is a conversion (an object that is no number, no array, a non-str key, ...).
//!
//! Over 700 lines on purpose: the conversion rules (bools refused as numbers, native byte order,
//! scalars read without numpy, views that keep the buffer alive, `out=` headers) read in one place,
//! each next to the one that relies on it; half of the file is their documentation.

use std::fmt;

use numpy::npyffi::{self, npy_intp, PY_ARRAY_API};
use numpy::{dtype, PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString, PyTuple, PyType};
use rlcore_core::{
    her, validate, Array, BatchField, ColumnSpec, ColumnView, CoreError, DType, Field, Goals, Obs,
    OutArray, Steps,
};
use smallvec::SmallVec;

use crate::errors::Result;

// ---------------------------------------------------------------------------------------------
// numpy

static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
static NUMPY_GENERIC: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn numpy_mod(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    Ok(NUMPY
        .get_or_try_init(py, || py.import("numpy").map(|m| m.unbind()))?
        .bind(py))
}

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

pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

// ---------------------------------------------------------------------------------------------
// scalars

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
/// Errors: `DType` for bool, float (even `2.0`), NumPy floats, None, str and anything else
/// without `__index__`; `InvalidValue` for an integer beyond ±2**127.
pub fn int(obj: &Bound<'_, PyAny>, what: impl fmt::Display) -> Result<i128> {
    let py = obj.py();
    let too_big = || CoreError::value(format!("{what}: integer {obj} is far out of range"));
    if let Ok(i) = obj.cast_exact::<PyInt>() {
        return i.extract::<i128>().map_err(|_| too_big().into());
    }
    if !is_bool(obj)? {
        match obj.extract::<i128>() {
            Ok(v) => return Ok(v),
            Err(e) if e.is_instance_of::<PyOverflowError>(py) => return Err(too_big().into()),
            Err(_) => {}
        }
    }
    Err(CoreError::dtype(format!(
        "{what}: expected an integer, got {} ({obj})",
        type_name(obj)
    ))
    .into())
}

/// A float argument: a Python float or int, a NumPy number, or anything else with `__float__`
/// except arrays.
///
/// Errors: `DType` for bool, None, str, arrays and anything else without `__float__`;
/// `InvalidValue` for an int too large for float64.
pub fn float(obj: &Bound<'_, PyAny>, what: &str) -> Result<f64> {
    let py = obj.py();
    if let Ok(f) = obj.cast_exact::<PyFloat>() {
        return Ok(f.value());
    }
    if !is_bool(obj)? && obj.cast::<PyUntypedArray>().is_err() {
        match obj.extract::<f64>() {
            Ok(v) => return Ok(v),
            Err(e) if e.is_instance_of::<PyOverflowError>(py) => {
                return Err(CoreError::value(format!(
                    "{what}: {obj} is beyond the range of float64"
                ))
                .into())
            }
            Err(_) => {}
        }
    }
    Err(CoreError::dtype(format!(
        "{what}: expected a number, got {} ({obj})",
        type_name(obj)
    ))
    .into())
}

/// An optional float argument (`None` means absent).
pub fn opt_float(obj: Option<&Bound<'_, PyAny>>, what: &str) -> Result<Option<f64>> {
    match obj {
        Some(x) if !x.is_none() => float(x, what).map(Some),
        _ => Ok(None),
    }
}

/// A count argument (`capacity`, `batch_size`, ...) as the core's `usize`.
pub fn count(obj: &Bound<'_, PyAny>, what: &str) -> Result<usize> {
    Ok(validate::count(what, int(obj, what)?)?)
}

/// The seed argument: an integer, or a fresh seed from the operating system for `None`.
pub fn seed(obj: Option<&Bound<'_, PyAny>>) -> Result<u64> {
    match obj {
        Some(x) if !x.is_none() => Ok(validate::seed(int(x, "seed")?)?),
        _ => Ok(rlcore_core::rng::entropy_seed()),
    }
}

/// An argument with a default: `Given(None)` when the caller left it out, the object (which may
/// be `None`) when given, so that an explicit `alpha=None` is refused rather than defaulted.
pub struct Given<'py>(pub Option<Bound<'py, PyAny>>);

impl<'a, 'py> FromPyObject<'a, 'py> for Given<'py> {
    type Error = PyErr;
    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Given(Some(obj.to_owned())))
    }
}

impl Given<'_> {
    pub fn float(&self, what: &str, default: f64) -> Result<f64> {
        self.0.as_ref().map_or(Ok(default), |o| float(o, what))
    }
    pub fn count(&self, what: &str, default: usize) -> Result<usize> {
        self.0.as_ref().map_or(Ok(default), |o| count(o, what))
    }
}

// ---------------------------------------------------------------------------------------------
// arrays in

/// How an error message names an argument: by name, or as one key of a dict argument.
#[derive(Clone, Copy)]
pub enum What<'a> {
    Arg(&'a str),
    Key(&'a str, &'a str),
}

impl fmt::Display for What<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            What::Arg(a) => f.write_str(a),
            What::Key(a, k) => write!(f, "{a}['{k}']"),
        }
    }
}

/// An input converted to C-contiguous native-endian bytes (borrowed from the array when possible).
pub struct In<'py> {
    arr: Option<Bound<'py, PyUntypedArray>>,
    scalar: [u8; 8],
    dtype: DType,
}

impl In<'_> {
    /// The core's view of the input.
    pub fn array(&self) -> Array<'_> {
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

    fn scalar(dtype: DType, scalar: [u8; 8]) -> Self {
        In {
            arr: None,
            scalar,
            dtype,
        }
    }
}

/// Any array-like as an input: a NumPy array (copied only when not C-contiguous or not native
/// byte order), a Python or NumPy scalar, or anything `numpy.asarray` converts.
///
/// Errors: `DType` for an unsupported dtype or an object NumPy cannot convert; `InvalidValue`
/// for a Python int beyond int64.
pub fn array<'py>(obj: &Bound<'py, PyAny>, what: What<'_>) -> Result<In<'py>> {
    let py = obj.py();
    // Python scalars first: an exact type test each, where the array test walks their MRO
    let mut scalar = [0u8; 8];
    if let Ok(b) = obj.cast_exact::<PyBool>() {
        scalar[0] = b.is_true() as u8;
        return Ok(In::scalar(DType::Bool, scalar));
    }
    if let Ok(f) = obj.cast_exact::<PyFloat>() {
        scalar.copy_from_slice(&f.value().to_ne_bytes());
        return Ok(In::scalar(DType::F64, scalar));
    }
    if obj.cast_exact::<PyInt>().is_ok() {
        let v = i64::try_from(int(obj, what)?).map_err(|_| {
            CoreError::value(format!("{what}: integer {obj} does not fit in int64"))
        })?;
        scalar.copy_from_slice(&v.to_ne_bytes());
        return Ok(In::scalar(DType::I64, scalar));
    }
    if let Ok(a) = obj.cast::<PyUntypedArray>() {
        let d = a.dtype();
        let Some(dt) = DType::from_kind(d.kind(), d.itemsize()) else {
            return Err(CoreError::dtype(format!(
                "{what}: dtype {d} is not supported; use bool, integer or float arrays"
            ))
            .into());
        };
        let arr = if a.is_c_contiguous() && d.is_native_byteorder() != Some(false) {
            a.clone()
        } else {
            // (asarray, not ascontiguousarray: that one makes a 0-d array 1-d)
            let native = d.call_method1("newbyteorder", ("=",))?;
            let kw = PyDict::new(py);
            kw.set_item("dtype", native)?;
            kw.set_item("order", "C")?;
            numpy_mod(py)?
                .call_method("asarray", (a,), Some(&kw))?
                .cast_into::<PyUntypedArray>()?
        };
        return Ok(In {
            arr: Some(arr),
            scalar: [0; 8],
            dtype: dt,
        });
    }
    // numpy scalars (np.float32(r), np.bool_(done), np.int64(a)): read the value directly
    if obj.is_instance(numpy_generic(py)?)? {
        let d = obj.getattr("dtype")?;
        let d = d.cast::<PyArrayDescr>()?;
        if let Some(dt) = DType::from_kind(d.kind(), d.itemsize()) {
            let n = dt.size();
            match dt {
                DType::F32 => {
                    scalar[..4].copy_from_slice(&(obj.extract::<f64>()? as f32).to_ne_bytes())
                }
                DType::F64 => scalar.copy_from_slice(&obj.extract::<f64>()?.to_ne_bytes()),
                DType::Bool => scalar[0] = obj.is_truthy()? as u8,
                DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                    scalar[..n].copy_from_slice(&obj.extract::<u64>()?.to_ne_bytes()[..n])
                }
                _ => scalar[..n].copy_from_slice(&obj.extract::<i64>()?.to_ne_bytes()[..n]),
            }
            return Ok(In::scalar(dt, scalar));
        }
    }
    if obj.is_none() {
        return Err(
            CoreError::dtype(format!("{what} is missing (got None); pass an array")).into(),
        );
    }
    // lists, tensors with __array__, other scalars: let numpy convert
    let cannot = |detail: String| -> crate::errors::Error {
        CoreError::dtype(format!(
            "{what}: cannot convert {} to an array{detail}",
            type_name(obj)
        ))
        .into()
    };
    let a = numpy_mod(py)?
        .call_method1("asarray", (obj,))
        .map_err(|e| cannot(format!(" ({e})")))?;
    if a.cast::<PyUntypedArray>().is_err() {
        return Err(cannot(String::new()));
    }
    array(&a, what)
}

/// An optional array argument (`None` means absent).
pub fn opt_array<'py>(obj: Option<&Bound<'py, PyAny>>, what: &str) -> Result<Option<In<'py>>> {
    match obj {
        Some(x) if !x.is_none() => array(x, What::Arg(what)).map(Some),
        _ => Ok(None),
    }
}

/// Row indices from an integer array-like.
pub fn indices(obj: &Bound<'_, PyAny>, what: &str) -> Result<Vec<i64>> {
    Ok(validate::index_array(
        what,
        &array(obj, What::Arg(what))?.array(),
    )?)
}

/// Priorities from a numeric array-like.
pub fn priorities(obj: &Bound<'_, PyAny>) -> Result<Vec<f64>> {
    Ok(validate::priority_array(
        &array(obj, What::Arg("priorities"))?.array(),
    )?)
}

/// Inputs by name (dict observation keys, extras), in the caller's order. (A `Vec`, not a
/// `SmallVec`: it stays empty, without an allocation, in the common call without extras, and a
/// small inline buffer would be copied around on every add.)
#[derive(Default)]
pub struct Named<'py>(Vec<(Bound<'py, PyString>, In<'py>)>);

impl Named<'_> {
    /// The core's view: `(name, array)` pairs.
    pub fn arrays(&self) -> Result<Vec<(&str, Array<'_>)>> {
        self.0
            .iter()
            .map(|(k, i)| -> Result<(&str, Array<'_>)> { Ok((k.to_str()?, i.array())) })
            .collect()
    }
}

/// Every item of `d` as an input; `bad_key` is the error for a key that is not a str.
fn named<'py>(
    d: &Bound<'py, PyDict>,
    what: &str,
    bad_key: impl Fn(&Bound<'py, PyAny>) -> CoreError,
) -> Result<Named<'py>> {
    let mut v = Named(Vec::with_capacity(d.len()));
    for (k, item) in d.iter() {
        let k = k
            .cast_into::<PyString>()
            .map_err(|e| bad_key(e.into_inner().as_any()))?;
        let i = array(&item, What::Key(what, k.to_str()?))?;
        v.0.push((k, i));
    }
    Ok(v)
}

/// An observation argument: one array, or a dict of arrays by key.
pub enum ObsIn<'py> {
    Array(In<'py>),
    Dict(Named<'py>),
}

/// The core's view of an [`ObsIn`].
pub enum ObsArrays<'a> {
    Array(Array<'a>),
    Dict(Vec<(&'a str, Array<'a>)>),
}

impl ObsIn<'_> {
    pub fn arrays(&self) -> Result<ObsArrays<'_>> {
        Ok(match self {
            ObsIn::Array(i) => ObsArrays::Array(i.array()),
            ObsIn::Dict(n) => ObsArrays::Dict(n.arrays()?),
        })
    }
}

impl ObsArrays<'_> {
    pub fn obs(&self) -> Obs<'_> {
        match self {
            ObsArrays::Array(a) => Obs::Array(*a),
            ObsArrays::Dict(d) => Obs::Dict(d),
        }
    }
}

/// An observation argument (`obs`, `obs_next`).
///
/// Errors: `Shape` for a dict key that is not a str; conversion errors of its arrays.
pub fn obs<'py>(obj: &Bound<'py, PyAny>, what: &str) -> Result<ObsIn<'py>> {
    match obj.cast::<PyDict>() {
        Ok(d) => Ok(ObsIn::Dict(named(d, what, |_| {
            CoreError::shape(format!("{what}: dict keys must be str"))
        })?)),
        Err(_) => Ok(ObsIn::Array(array(obj, What::Arg(what))?)),
    }
}

/// The extras of `add`/`extend`, by name.
///
/// Errors: `DType` for a name that is not a str; conversion errors of its arrays.
pub fn extras<'py>(kw: Option<&Bound<'py, PyDict>>) -> Result<Named<'py>> {
    match kw {
        None => Ok(Named::default()),
        Some(d) => named(d, "extras", |k| {
            CoreError::dtype(format!(
                "extras: column names must be str, got {}",
                type_name(k)
            ))
        }),
    }
}

/// The arguments of `add`/`extend` in the collector's usual forms, read straight from their
/// objects without a reference count or a copy: exact `numpy.ndarray`s (no subclass) that are
/// C-contiguous in native byte order with a dtype a column can have, and Python or NumPy
/// floats and bools (their values kept in `scalars`). `None` for any other object, which
/// [`array`] then converts (the result is the same: these are the objects it borrows as they
/// are). Call it with the buffer's lock held and use the result before any Python code runs:
/// the views hold no reference, so another thread that resizes an array frees their memory.
pub fn usual_steps<'a>(
    [obs, act, rew, terminated, truncated, obs_next]: [&'a Bound<'_, PyAny>; 6],
    scalars: &'a mut [[u8; 8]; 3],
) -> Option<Steps<'a>> {
    let [s_rew, s_te, s_tr] = scalars;
    Some(Steps {
        obs: Obs::Array(usual_array(obs)?),
        act: usual_array(act)?,
        rew: usual_value(rew, s_rew)?,
        terminated: usual_value(terminated, s_te)?,
        truncated: usual_value(truncated, s_tr)?,
        obs_next: Obs::Array(usual_array(obs_next)?),
        extras: &[],
        mask: None,
        env_ids: None,
    })
}

/// A Python float or bool (exact types), or a NumPy float64, float32 or bool scalar, as a 0-d
/// array of `buf`; else [`usual_array`].
#[inline(always)]
fn usual_value<'a>(obj: &'a Bound<'_, PyAny>, buf: &'a mut [u8; 8]) -> Option<Array<'a>> {
    let dtype = if let Ok(f) = obj.cast_exact::<PyFloat>() {
        *buf = f.value().to_ne_bytes();
        DType::F64
    } else if let Ok(b) = obj.cast_exact::<PyBool>() {
        buf[0] = b.is_true() as u8;
        DType::Bool
    } else {
        let (p, types) = (obj.as_ptr(), numpy_types(obj.py()));
        // SAFETY: `p` is a live object; its value is read as the scalar type it exactly is
        // (numpy.float64 subclasses Python's float; the others are NumPy's scalar structs).
        unsafe {
            let t = pyo3::ffi::Py_TYPE(p) as usize;
            if t == types.float64 {
                *buf = pyo3::ffi::PyFloat_AsDouble(p).to_ne_bytes();
                DType::F64
            } else if t == types.float32 {
                let v = (*(p as *const ScalarObject<f32>)).obval;
                buf[..4].copy_from_slice(&v.to_ne_bytes());
                DType::F32
            } else if t == types.bool_ {
                buf[0] = ((*(p as *const ScalarObject<u8>)).obval != 0) as u8;
                DType::Bool
            } else {
                return usual_array(obj);
            }
        }
    };
    Some(Array {
        dtype,
        shape: &[],
        data: &buf[..dtype.size()],
    })
}

/// A NumPy scalar object of C type `T`: NumPy's `PyBoolScalarObject`, `PyFloatScalarObject`, ...
/// (numpy/arrayscalars.h: the object header, then the value).
#[repr(C)]
struct ScalarObject<T> {
    ob_base: pyo3::ffi::PyObject,
    obval: T,
}

/// Addresses of the NumPy type objects the lean path compares with (fixed once NumPy is
/// loaded).
struct NumpyTypes {
    ndarray: usize,
    float64: usize,
    float32: usize,
    bool_: usize,
}

fn numpy_types(py: Python<'_>) -> &'static NumpyTypes {
    static TYPES: std::sync::OnceLock<NumpyTypes> = std::sync::OnceLock::new();
    TYPES.get_or_init(|| {
        use npyffi::NpyTypes as T;
        // SAFETY: NumPy's C API is loaded on first use, with the interpreter attached.
        let get = |t| unsafe { npyffi::get_type_object(py, t) as usize };
        NumpyTypes {
            ndarray: get(T::PyArray_Type),
            float64: get(T::PyDoubleArrType_Type),
            float32: get(T::PyFloatArrType_Type),
            bool_: get(T::PyBoolArrType_Type),
        }
    })
}

/// The core's view of an exact `numpy.ndarray` that is C-contiguous, in native byte order and
/// of a dtype a column can have; `None` for anything else.
#[inline(always)]
fn usual_array<'a>(obj: &'a Bound<'_, PyAny>) -> Option<Array<'a>> {
    let p = obj.as_ptr();
    // SAFETY: `p` is a live object (borrowed for 'a); its fields are read as a PyArrayObject
    // only once its type is exactly numpy.ndarray. The descriptor's prefix up to `type_num`
    // has the same layout in NumPy 1 and 2.
    unsafe {
        if pyo3::ffi::Py_TYPE(p) as usize != numpy_types(obj.py()).ndarray {
            return None;
        }
        let a = &*(p as *const npyffi::PyArrayObject);
        if a.flags & npyffi::NPY_ARRAY_C_CONTIGUOUS == 0 {
            return None;
        }
        let d = &*a.descr;
        let foreign = if cfg!(target_endian = "little") {
            b'>'
        } else {
            b'<'
        };
        if d.byteorder as u8 == foreign {
            return None;
        }
        let dtype = dtype_of_num(d.type_num)?;
        let shape: &'a [usize] = match usize::try_from(a.nd) {
            Ok(0) | Err(_) => &[],
            Ok(nd) => std::slice::from_raw_parts(a.dimensions as *const usize, nd),
        };
        let n = shape.iter().product::<usize>() * dtype.size();
        let data = if n == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(a.data as *const u8, n)
        };
        Some(Array { dtype, shape, data })
    }
}

/// The dtype of a NumPy type number (its C type's size decides), for the dtypes a column can
/// have.
fn dtype_of_num(num: std::ffi::c_int) -> Option<DType> {
    use npyffi::NPY_TYPES as T;
    use std::ffi::{c_int, c_long, c_longlong, c_short};
    let int = |size: usize, signed: bool| match (size, signed) {
        (1, true) => DType::I8,
        (2, true) => DType::I16,
        (4, true) => DType::I32,
        (8, true) => DType::I64,
        (1, false) => DType::U8,
        (2, false) => DType::U16,
        (4, false) => DType::U32,
        _ => DType::U64,
    };
    let size = std::mem::size_of::<c_int>;
    Some(match num {
        n if n == T::NPY_BOOL as c_int => DType::Bool,
        n if n == T::NPY_BYTE as c_int => DType::I8,
        n if n == T::NPY_UBYTE as c_int => DType::U8,
        n if n == T::NPY_SHORT as c_int => int(std::mem::size_of::<c_short>(), true),
        n if n == T::NPY_USHORT as c_int => int(std::mem::size_of::<c_short>(), false),
        n if n == T::NPY_INT as c_int => int(size(), true),
        n if n == T::NPY_UINT as c_int => int(size(), false),
        n if n == T::NPY_LONG as c_int => int(std::mem::size_of::<c_long>(), true),
        n if n == T::NPY_ULONG as c_int => int(std::mem::size_of::<c_long>(), false),
        n if n == T::NPY_LONGLONG as c_int => int(std::mem::size_of::<c_longlong>(), true),
        n if n == T::NPY_ULONGLONG as c_int => int(std::mem::size_of::<c_longlong>(), false),
        n if n == T::NPY_FLOAT as c_int => DType::F32,
        n if n == T::NPY_DOUBLE as c_int => DType::F64,
        _ => return None,
    })
}

/// Column specs from a sequence of `(name, dtype name, shape)`.
///
/// Errors: `DType` for an item of another form or an unsupported dtype name.
pub fn specs(obj: &Bound<'_, PyAny>) -> Result<Vec<ColumnSpec>> {
    let mut v = Vec::new();
    for item in obj.try_iter()? {
        let item = item?;
        let (name, dt, shape): (String, String, Vec<usize>) = item.extract().map_err(|_| {
            CoreError::dtype(format!(
                "column spec {item}: expected (name: str, dtype name: str, shape: tuple of \
                 ints >= 0)"
            ))
        })?;
        v.push(ColumnSpec::parse(name, &dt, shape)?);
    }
    Ok(v)
}

/// A column spec as Python sees it: `(name, dtype name, shape tuple)`.
pub type SpecTuple<'py> = (String, &'static str, Bound<'py, PyTuple>);

pub fn spec_tuples<'py>(py: Python<'py>, specs: &[ColumnSpec]) -> PyResult<Vec<SpecTuple<'py>>> {
    specs
        .iter()
        .map(|c| Ok((c.name.clone(), c.dtype.name(), PyTuple::new(py, &c.shape)?)))
        .collect()
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

/// A new array of `dims`: fresh and owned by NumPy (`data` None), or a read-only view of `data`
/// with byte `strides` (None: C-contiguous) that keeps `base` alive.
///
/// # Safety
/// `data`, when given, must address every element of the view and outlive `base`.
unsafe fn new_array<'py>(
    py: Python<'py>,
    dt: DType,
    dims: &[usize],
    strides: Option<&[usize]>,
    data: Option<(*const u8, &Bound<'py, PyAny>)>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let mut d: SmallVec<[npy_intp; 4]> = dims.iter().map(|&x| x as npy_intp).collect();
    let mut st: SmallVec<[npy_intp; 4]> = strides
        .unwrap_or_default()
        .iter()
        .map(|&x| x as npy_intp)
        .collect();
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

/// A fresh, uninitialised C-contiguous array.
pub fn fresh<'py>(
    py: Python<'py>,
    dt: DType,
    dims: &[usize],
) -> PyResult<Bound<'py, PyUntypedArray>> {
    // SAFETY: no external data; NumPy allocates.
    unsafe { new_array(py, dt, dims, None, None) }
}

/// A read-only zero-copy view of a stored column that keeps `base` (the buffer) alive.
pub fn view<'py>(
    py: Python<'py>,
    v: &ColumnView,
    base: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    // SAFETY: the core's views address memory allocated once and never reallocated or freed
    // while the buffer (`base`, kept alive by the view) exists; every element lies inside it.
    unsafe { new_array(py, v.dtype, &v.shape, Some(&v.strides), Some((v.ptr, base))) }
}

/// The writable bytes of an array (fresh, or an `out=` array the core checked).
///
/// # Safety
/// The array must be C-contiguous and writable, and stay alive and unaliased while the slice is
/// used.
pub unsafe fn bytes_mut<'a>(a: &Bound<'_, PyUntypedArray>) -> &'a mut [u8] {
    let n = a.shape().iter().product::<usize>() * a.dtype().itemsize();
    std::slice::from_raw_parts_mut((*a.as_array_ptr()).data as *mut u8, n)
}

pub fn vec_array<'py, T: numpy::Element>(py: Python<'py>, v: Vec<T>) -> Bound<'py, PyAny> {
    numpy::PyArray1::from_vec(py, v).into_any()
}

/// The arrays of one sampled batch, one per batch field.
pub type Arrays<'py> = SmallVec<[Bound<'py, PyUntypedArray>; 16]>;

fn batch_dims(b: usize, f: &BatchField<'_>) -> SmallVec<[usize; 4]> {
    let mut d = SmallVec::with_capacity(f.row_shape.len() + 1);
    d.push(b);
    d.extend_from_slice(f.row_shape);
    d
}

/// Fresh arrays for a batch of `b` samples.
pub fn fresh_batch<'py, 'f>(
    py: Python<'py>,
    fields: impl Iterator<Item = BatchField<'f>>,
    b: usize,
) -> PyResult<Arrays<'py>> {
    fields
        .map(|f| fresh(py, f.dtype, &batch_dims(b, &f)))
        .collect()
}

/// The name of a batch field as an interned Python string, so that reading a field of an `out`
/// batch does not build and hash a new string per call.
fn field_name<'py>(py: Python<'py>, f: Field) -> &'py Bound<'py, PyString> {
    match f {
        Field::Obs => pyo3::intern!(py, "obs"),
        Field::ObsNext => pyo3::intern!(py, "obs_next"),
        Field::Act => pyo3::intern!(py, "act"),
        Field::Extras => pyo3::intern!(py, "extras"),
        Field::Rew => pyo3::intern!(py, "rew"),
        Field::Terminated => pyo3::intern!(py, "terminated"),
        Field::Truncated => pyo3::intern!(py, "truncated"),
        Field::Discount => pyo3::intern!(py, "discount"),
        Field::Indices => pyo3::intern!(py, "indices"),
        Field::Weights => pyo3::intern!(py, "weights"),
    }
}

/// The arrays of a caller's `out` batch (a `TransitionBatch` of this buffer), checked by the
/// core against the batch layout.
///
/// Errors: `Usage` for a missing field, observation key or extra; `DType` for a field that is
/// not a NumPy array; the core's checks of [`validate::out_arrays`].
pub fn out_batch<'py, 'f>(
    out: &Bound<'py, PyAny>,
    fields: impl Iterator<Item = BatchField<'f>> + Clone,
    b: usize,
) -> Result<Arrays<'py>> {
    let mut arrays = Arrays::new();
    let mut last: Option<(Field, Bound<'py, PyAny>)> = None;
    for f in fields.clone() {
        let attr = match &last {
            Some((field, a)) if *field == f.field => a.clone(),
            _ => {
                let a = out.getattr(field_name(out.py(), f.field)).map_err(|_| {
                    CoreError::usage(format!(
                        "out must be a TransitionBatch (from a previous sample of this buffer); \
                         it has no field '{}' ({})",
                        f.field.name(),
                        type_name(out)
                    ))
                })?;
                last = Some((f.field, a.clone()));
                a
            }
        };
        let obj = match f.key {
            None => attr,
            Some(key) => attr.get_item(key).map_err(|_| {
                CoreError::usage(format!(
                    "out.{} has no array '{key}' ({}); pass a TransitionBatch from a previous \
                     sample of this buffer",
                    f.field.name(),
                    type_name(&attr)
                ))
            })?,
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
        let headers: SmallVec<[OutArray<'_>; 16]> = arrays.iter().map(header).collect();
        validate::out_arrays(b, fields, &headers)?;
    }
    Ok(arrays)
}

/// What the core checks of an output array, read from its header.
pub fn header<'a>(a: &'a Bound<'_, PyUntypedArray>) -> OutArray<'a> {
    let d = a.dtype();
    let dtype = match DType::from_kind(d.kind(), d.itemsize()) {
        Some(dt) if d.is_native_byteorder() != Some(false) => Ok(dt),
        _ => Err(d.to_string()),
    };
    // SAFETY: reading the flags and data pointer of a live array object.
    let (flags, addr) = unsafe {
        let p = a.as_array_ptr();
        ((*p).flags, (*p).data as usize)
    };
    OutArray {
        dtype,
        shape: a.shape(),
        c_contiguous: flags & npyffi::NPY_ARRAY_C_CONTIGUOUS != 0,
        writable: flags & npyffi::NPY_ARRAY_WRITEABLE != 0,
        addr,
        len: a.shape().iter().product::<usize>() * d.itemsize(),
    }
}

/// The fields of a `TransitionBatch` as a tuple in its field order (obs, act, rew, obs_next,
/// terminated, truncated, discount, indices, weights, extras): keyed arrays go into dicts,
/// `extras` is always a dict, `weights` None for buffers without priorities.
pub fn batch_tuple<'py, 'f>(
    py: Python<'py>,
    fields: impl Iterator<Item = BatchField<'f>>,
    arrays: Arrays<'py>,
) -> PyResult<Bound<'py, PyTuple>> {
    let slot = |f: Field| match f {
        Field::Obs => 0,
        Field::Act => 1,
        Field::Rew => 2,
        Field::ObsNext => 3,
        Field::Terminated => 4,
        Field::Truncated => 5,
        Field::Discount => 6,
        Field::Indices => 7,
        Field::Weights => 8,
        Field::Extras => 9,
    };
    let mut slots: [Option<Bound<'py, PyAny>>; 10] = Default::default();
    slots[9] = Some(PyDict::new(py).into_any());
    for (f, a) in fields.zip(arrays) {
        let s = &mut slots[slot(f.field)];
        match f.key {
            None => *s = Some(a.into_any()),
            Some(key) => s
                .get_or_insert_with(|| PyDict::new(py).into_any())
                .set_item(key, a)?,
        }
    }
    PyTuple::new(
        py,
        slots
            .into_iter()
            .map(|s| s.unwrap_or_else(|| py.None().into_bound(py))),
    )
}

/// Call the user's vectorised `compute_reward(achieved_goal [M, *G], desired_goal [M, *G], info)`
/// and take its M rewards (checked by the core).
///
/// Errors: `DType` for a result that is not array-like; the core's checks of
/// [`her::rewards_from`]; whatever `f` raises.
pub fn call_reward(py: Python<'_>, f: &Bound<'_, PyAny>, g: &Goals<'_>) -> Result<Vec<f32>> {
    let mut dims: SmallVec<[usize; 4]> = SmallVec::new();
    dims.push(g.count);
    dims.extend_from_slice(g.shape);
    let ag = fresh(py, g.dtype, &dims)?;
    let dg = fresh(py, g.dtype, &dims)?;
    // SAFETY: fresh arrays of exactly these sizes, owned here.
    unsafe {
        bytes_mut(&ag).copy_from_slice(g.achieved);
        bytes_mut(&dg).copy_from_slice(g.desired);
    }
    // info: the extra step columns of each pair's transition, [count, *shape] each
    let info = PyDict::new(py);
    for c in g.info {
        let mut dims: SmallVec<[usize; 4]> = SmallVec::new();
        dims.push(g.count);
        dims.extend_from_slice(c.shape);
        let a = fresh(py, c.dtype, &dims)?;
        // SAFETY: a fresh array of exactly this size, owned here.
        unsafe { bytes_mut(&a).copy_from_slice(&c.data) };
        info.set_item(c.name, a)?;
    }
    let res = f.call1((ag, dg, info))?;
    let r = array(&res, What::Arg("compute_reward result")).map_err(|_| {
        CoreError::dtype(format!(
            "compute_reward must return a numeric array of shape [{}], got {}",
            g.count,
            type_name(&res)
        ))
    })?;
    Ok(her::rewards_from(&r.array(), g.count)?)
}
