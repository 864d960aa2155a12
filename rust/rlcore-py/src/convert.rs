//! Python objects to the core's input types and back: integers, floats, index arrays, NumPy
//! arrays, observation dicts, extras and column specs in; fresh arrays and column views out.
//! What fails here is a conversion (an object that is no number, no array, a non-str key);
//! every range, shape and layout check is the core's.

use std::fmt;

use numpy::npyffi::{self, npy_intp, PY_ARRAY_API};
use numpy::{dtype, PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString, PyTuple, PyType};
use rlcore_core::{validate, Array, ColumnSpec, ColumnView, CoreError, DType, Obs, OutArray};
use smallvec::SmallVec;

use crate::errors::Result;

/// Any Python object, and a NumPy array of any dtype, bound to the interpreter.
pub type Any<'py> = Bound<'py, PyAny>;
pub type Arr<'py> = Bound<'py, PyUntypedArray>;

static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
static NUMPY_GENERIC: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn numpy_mod(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    Ok(NUMPY.get_or_try_init(py, || py.import("numpy").map(|m| m.unbind()))?.bind(py))
}

/// `numpy.generic`, the base class of NumPy scalars.
fn numpy_generic(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    let init = || -> PyResult<Py<PyType>> {
        Ok(numpy_mod(py)?.getattr("generic")?.cast_into::<PyType>()?.unbind())
    };
    Ok(NUMPY_GENERIC.get_or_try_init(py, init)?.bind(py))
}

pub fn type_name(obj: &Any<'_>) -> String {
    obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

// ---------------------------------------------------------------------------------------------
// scalars

/// A Python or NumPy bool: never taken as a number (`True` as a capacity is a bug).
fn is_bool(obj: &Any<'_>) -> PyResult<bool> {
    if obj.is_instance_of::<PyBool>() {
        return Ok(true);
    }
    if obj.is_instance(numpy_generic(obj.py())?)? {
        let d = obj.getattr("dtype")?;
        return Ok(d.cast::<PyArrayDescr>().is_ok_and(|d| d.kind() == b'b'));
    }
    Ok(false)
}

/// A Python int or anything with `__index__` (not bool, not float), as `i128`.
pub fn int(obj: &Any<'_>, what: impl fmt::Display) -> Result<i128> {
    let too_big = || CoreError::value(format!("{what}: integer {obj} is far out of range"));
    if let Ok(i) = obj.cast_exact::<PyInt>() {
        return i.extract::<i128>().map_err(|_| too_big().into());
    }
    if !is_bool(obj)? {
        match obj.extract::<i128>() {
            Ok(v) => return Ok(v),
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => return Err(too_big().into()),
            Err(_) => {}
        }
    }
    let msg = format!("{what}: expected an integer, got {} ({obj})", type_name(obj));
    Err(CoreError::dtype(msg).into())
}

/// A Python float or int, a NumPy number, or anything else with `__float__` but arrays and bools.
pub fn float(obj: &Any<'_>, what: &str) -> Result<f64> {
    if let Ok(f) = obj.cast_exact::<PyFloat>() {
        return Ok(f.value());
    }
    if !is_bool(obj)? && obj.cast::<PyUntypedArray>().is_err() {
        match obj.extract::<f64>() {
            Ok(v) => return Ok(v),
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
                let msg = format!("{what}: {obj} is beyond the range of float64");
                return Err(CoreError::value(msg).into());
            }
            Err(_) => {}
        }
    }
    let msg = format!("{what}: expected a number, got {} ({obj})", type_name(obj));
    Err(CoreError::dtype(msg).into())
}

/// `f` of an optional argument (`None` means absent).
pub fn opt<'py, T>(
    obj: Option<&Any<'py>>, f: impl FnOnce(&Any<'py>) -> Result<T>,
) -> Result<Option<T>> {
    obj.filter(|x| !x.is_none()).map(f).transpose()
}

/// A count (`capacity`, `batch_size`, ...).
pub fn count(obj: &Any<'_>, what: &str) -> Result<usize> {
    Ok(validate::count(what, int(obj, what)?)?)
}

/// The seed: an integer, or a fresh one from the operating system for `None`.
pub fn seed(obj: Option<&Any<'_>>) -> Result<u64> {
    Ok(opt(obj, |x| Ok(validate::seed(int(x, "seed")?)?))?
        .unwrap_or_else(rlcore_core::rng::entropy_seed))
}

/// An argument with a default: `Given(None)` when left out, the object (maybe `None`) when
/// given, so that an explicit `alpha=None` is refused rather than defaulted.
pub struct Given<'py>(pub Option<Any<'py>>);

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

/// How a message names an argument: by name, or as one key of a dict argument.
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

/// An input as C-contiguous native-endian bytes (borrowed from the array when possible).
pub struct In<'py> {
    arr: Option<Arr<'py>>,
    scalar: [u8; 8],
    dtype: DType,
}

impl In<'_> {
    /// The core's view of the input.
    pub fn array(&self) -> Array<'_> {
        let (dtype, Some(a)) = (self.dtype, &self.arr) else {
            let data = &self.scalar[..self.dtype.size()];
            return Array { dtype: self.dtype, shape: &[], data };
        };
        let n = a.shape().iter().product::<usize>() * dtype.size();
        // SAFETY: `a` is a C-contiguous array of `n` bytes kept alive by `self`.
        let data = unsafe { std::slice::from_raw_parts((*a.as_array_ptr()).data as *const u8, n) };
        Array { dtype, shape: a.shape(), data }
    }
}

/// Any array-like: a NumPy array (copied only when not C-contiguous or not native byte order),
/// a Python or NumPy scalar, or anything `numpy.asarray` converts.
pub fn array<'py>(obj: &Any<'py>, what: What<'_>) -> Result<In<'py>> {
    let py = obj.py();
    let scalar = |dtype, scalar| Ok(In { arr: None, scalar, dtype });
    // Python scalars first: an exact type test each, where the array test walks their MRO
    let mut s = [0u8; 8];
    if let Ok(b) = obj.cast_exact::<PyBool>() {
        s[0] = b.is_true() as u8;
        return scalar(DType::Bool, s);
    }
    if let Ok(f) = obj.cast_exact::<PyFloat>() {
        return scalar(DType::F64, f.value().to_ne_bytes());
    }
    if obj.cast_exact::<PyInt>().is_ok() {
        let v = i64::try_from(int(obj, what)?).map_err(|_| {
            CoreError::value(format!("{what}: integer {obj} does not fit in int64"))
        })?;
        return scalar(DType::I64, v.to_ne_bytes());
    }
    if let Ok(a) = obj.cast::<PyUntypedArray>() {
        let d = a.dtype();
        let Some(dtype) = DType::from_kind(d.kind(), d.itemsize()) else {
            let msg =
                format!("{what}: dtype {d} is not supported; use bool, integer or float arrays");
            return Err(CoreError::dtype(msg).into());
        };
        let arr = if a.is_c_contiguous() && d.is_native_byteorder() != Some(false) {
            a.clone()
        } else {
            // (asarray, not ascontiguousarray: that one makes a 0-d array 1-d)
            let kw = PyDict::new(py);
            kw.set_item("dtype", d.call_method1("newbyteorder", ("=",))?)?;
            kw.set_item("order", "C")?;
            let a = numpy_mod(py)?.call_method("asarray", (a,), Some(&kw))?;
            a.cast_into::<PyUntypedArray>().map_err(PyErr::from)?
        };
        return Ok(In { arr: Some(arr), scalar: [0; 8], dtype });
    }
    // numpy scalars (np.float32(r), np.bool_(done), np.int64(a)): read the value directly
    if obj.is_instance(numpy_generic(py)?)? {
        let d = obj.getattr("dtype")?;
        let d = d.cast::<PyArrayDescr>().map_err(PyErr::from)?;
        if let Some(dt) = DType::from_kind(d.kind(), d.itemsize()) {
            let n = dt.size();
            match dt {
                DType::F32 => s[..4].copy_from_slice(&(obj.extract::<f64>()? as f32).to_ne_bytes()),
                DType::F64 => s = obj.extract::<f64>()?.to_ne_bytes(),
                DType::Bool => s[0] = obj.is_truthy()? as u8,
                DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                    s[..n].copy_from_slice(&obj.extract::<u64>()?.to_ne_bytes()[..n])
                }
                _ => s[..n].copy_from_slice(&obj.extract::<i64>()?.to_ne_bytes()[..n]),
            }
            return scalar(dt, s);
        }
    }
    if obj.is_none() {
        return Err(CoreError::dtype(format!("{what} is missing (got None); pass an array")).into());
    }
    // lists, tensors with __array__, other scalars: let numpy convert
    let cannot = |detail: String| {
        let ty = type_name(obj);
        CoreError::dtype(format!("{what}: cannot convert {ty} to an array{detail}")).into()
    };
    let a =
        numpy_mod(py)?.call_method1("asarray", (obj,)).map_err(|e| cannot(format!(" ({e})")))?;
    if a.cast::<PyUntypedArray>().is_err() {
        return Err(cannot(String::new()));
    }
    array(&a, what)
}

/// An optional array argument (`None` means absent).
pub fn opt_array<'py>(obj: Option<&Any<'py>>, what: &str) -> Result<Option<In<'py>>> {
    opt(obj, |x| array(x, What::Arg(what)))
}

/// Row indices from an integer array-like.
pub fn indices(obj: &Any<'_>, what: &str) -> Result<Vec<i64>> {
    Ok(validate::index_array(what, &array(obj, What::Arg(what))?.array())?)
}

/// Priorities from a numeric array-like.
pub fn priorities(obj: &Any<'_>) -> Result<Vec<f64>> {
    Ok(validate::priority_array(&array(obj, What::Arg("priorities"))?.array())?)
}

/// Inputs by name (dict observation keys, extras), in the caller's order.
#[derive(Default)]
pub struct Named<'py>(Vec<(Bound<'py, PyString>, In<'py>)>);

impl Named<'_> {
    /// The core's view: `(name, array)` pairs.
    pub fn arrays(&self) -> Result<Vec<(&str, Array<'_>)>> {
        self.0.iter().map(|(k, i)| Ok((k.to_str()?, i.array()))).collect()
    }
}

/// Every item of `d` as an input; `bad_key` is the error for a key that is not a str.
fn named<'py>(
    d: &Bound<'py, PyDict>, what: &str, bad_key: impl Fn(&Any<'py>) -> CoreError,
) -> Result<Named<'py>> {
    let mut v = Named(Vec::with_capacity(d.len()));
    for (k, item) in d.iter() {
        let k = k.cast_into::<PyString>().map_err(|e| bad_key(e.into_inner().as_any()))?;
        let i = array(&item, What::Key(what, k.to_str()?))?;
        v.0.push((k, i));
    }
    Ok(v)
}

/// An observation argument (`obs`, `obs_next`): one array, or a dict of arrays by key.
pub enum ObsIn<'py> {
    Array(In<'py>),
    Dict(Named<'py>),
}

impl ObsIn<'_> {
    /// The core's view; `keys` holds the `(key, array)` pairs of a dict observation.
    pub fn obs<'a>(&'a self, keys: &'a mut Vec<(&'a str, Array<'a>)>) -> Result<Obs<'a>> {
        match self {
            ObsIn::Array(i) => Ok(Obs::Array(i.array())),
            ObsIn::Dict(n) => {
                *keys = n.arrays()?;
                Ok(Obs::Dict(keys))
            }
        }
    }
}

pub fn obs<'py>(obj: &Any<'py>, what: &str) -> Result<ObsIn<'py>> {
    match obj.cast::<PyDict>() {
        Ok(d) => {
            let bad_key = |_: &Any<'_>| CoreError::shape(format!("{what}: dict keys must be str"));
            Ok(ObsIn::Dict(named(d, what, bad_key)?))
        }
        Err(_) => Ok(ObsIn::Array(array(obj, What::Arg(what))?)),
    }
}

/// The extras of `add`/`extend`, by name.
pub fn extras<'py>(kw: Option<&Bound<'py, PyDict>>) -> Result<Named<'py>> {
    let bad_key = |k: &Any<'_>| {
        CoreError::dtype(format!("extras: column names must be str, got {}", type_name(k)))
    };
    kw.map_or(Ok(Named::default()), |d| named(d, "extras", bad_key))
}

/// Column specs from a sequence of `(name, dtype name, shape)`.
pub fn specs(obj: &Any<'_>) -> Result<Vec<ColumnSpec>> {
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

/// Optional column specs (`None`: none).
pub fn opt_specs(obj: Option<&Any<'_>>) -> Result<Vec<ColumnSpec>> {
    Ok(obj.map(specs).transpose()?.unwrap_or_default())
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
/// with byte `strides` that keeps `base` alive.
///
/// # Safety
/// `data`, when given, must address every element of the view and outlive `base`.
unsafe fn new_array<'py>(
    py: Python<'py>, dt: DType, dims: &[usize], data: Option<(*const u8, &[usize], &Any<'py>)>,
) -> PyResult<Arr<'py>> {
    let mut d: SmallVec<[npy_intp; 4]> = dims.iter().map(|&x| x as npy_intp).collect();
    let (ptr, mut st, flags) = match data {
        Some((p, st, _)) => {
            (p as *mut _, st.iter().map(|&x| x as npy_intp).collect(), npyffi::NPY_ARRAY_CARRAY_RO)
        }
        None => (std::ptr::null_mut(), SmallVec::<[npy_intp; 4]>::new(), 0),
    };
    let st_ptr = if data.is_some() { st.as_mut_ptr() } else { std::ptr::null_mut() };
    let ty = npyffi::get_type_object(py, npyffi::NpyTypes::PyArray_Type);
    let (nd, descr) = (d.len() as std::ffi::c_int, descr(py, dt).into_dtype_ptr());
    let (dp, null) = (d.as_mut_ptr(), std::ptr::null_mut());
    let raw = PY_ARRAY_API.PyArray_NewFromDescr(py, ty, descr, nd, dp, st_ptr, ptr, flags, null);
    if raw.is_null() {
        return Err(PyErr::fetch(py));
    }
    if let Some((_, _, base)) = data {
        PY_ARRAY_API.PyArray_SetBaseObject(py, raw as *mut _, base.clone().into_ptr());
    }
    Ok(Bound::from_owned_ptr(py, raw).cast_into_unchecked())
}

/// A fresh, uninitialised C-contiguous array.
pub fn fresh<'py>(py: Python<'py>, dt: DType, dims: &[usize]) -> PyResult<Arr<'py>> {
    // SAFETY: no external data; NumPy allocates.
    unsafe { new_array(py, dt, dims, None) }
}

/// A fresh array holding a copy of `data` (`dims` of `dt`, exactly its size).
pub fn copy_of<'py>(py: Python<'py>, dt: DType, dims: &[usize], data: &[u8]) -> PyResult<Arr<'py>> {
    let a = fresh(py, dt, dims)?;
    // SAFETY: a fresh array of exactly this size, owned here.
    unsafe { bytes_mut(&a).copy_from_slice(data) };
    Ok(a)
}

/// A read-only zero-copy view of a stored column that keeps `base` (the buffer) alive.
pub fn view<'py>(py: Python<'py>, v: &ColumnView, base: &Any<'py>) -> PyResult<Arr<'py>> {
    // SAFETY: the core's views address memory allocated once and never reallocated or freed
    // while the buffer (`base`, kept alive by the view) exists; every element lies inside it.
    unsafe { new_array(py, v.dtype, &v.shape, Some((v.ptr, &v.strides, base))) }
}

/// The writable bytes of an array (fresh, or an `out=` array the core checked).
///
/// # Safety
/// The array must be C-contiguous and writable, and stay alive and unaliased while the slice is
/// used.
pub unsafe fn bytes_mut<'a>(a: &Arr<'_>) -> &'a mut [u8] {
    let n = a.shape().iter().product::<usize>() * a.dtype().itemsize();
    std::slice::from_raw_parts_mut((*a.as_array_ptr()).data as *mut u8, n)
}

pub fn vec_array<'py, T: numpy::Element>(py: Python<'py>, v: Vec<T>) -> Any<'py> {
    numpy::PyArray1::from_vec(py, v).into_any()
}

/// What the core checks of an output array, read from its header.
pub fn header<'a>(a: &'a Arr<'_>) -> OutArray<'a> {
    let d = a.dtype();
    let dtype = match DType::from_kind(d.kind(), d.itemsize()) {
        Some(dt) if d.is_native_byteorder() != Some(false) => Ok(dt),
        _ => Err(d.to_string()),
    };
    // SAFETY: reading the flags and data pointer of a live array object.
    let (flags, addr) = unsafe { ((*a.as_array_ptr()).flags, (*a.as_array_ptr()).data as usize) };
    OutArray {
        dtype,
        shape: a.shape(),
        c_contiguous: flags & npyffi::NPY_ARRAY_C_CONTIGUOUS != 0,
        writable: flags & npyffi::NPY_ARRAY_WRITEABLE != 0,
        addr,
        len: a.shape().iter().product::<usize>() * d.itemsize(),
    }
}
