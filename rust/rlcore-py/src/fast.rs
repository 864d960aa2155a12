//! The fast path of `add`/`extend` (unsafe: it reads NumPy's object layouts directly): the
//! arguments in the collector's usual forms are read straight from their objects, without a
//! reference count or a copy: exact `numpy.ndarray`s (no subclass), C-contiguous in native byte
//! order with a dtype a column can have, and Python or NumPy floats and bools. Any other object
//! gives `None`, and `convert::array` then converts it (to the same result: these are the
//! objects it borrows as they are).

use numpy::npyffi::{self, NPY_TYPES};
use numpy::PyArrayDescrMethods;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat};
use rlcore_core::{Array, DType, Obs, Steps};

use crate::convert::Any;

/// The arguments of one `add`/`extend` call without mask, env ids or extras, if all six take
/// the fast path. Call it with the buffer's lock held and use the result before any Python code
/// runs: the views hold no reference, so another thread that resizes an array frees their memory.
pub fn usual_steps<'a>(
    [obs, act, rew, terminated, truncated, obs_next]: [&'a Any<'_>; 6],
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
fn usual_value<'a>(obj: &'a Any<'_>, buf: &'a mut [u8; 8]) -> Option<Array<'a>> {
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
    Some(Array { dtype, shape: &[], data: &buf[..dtype.size()] })
}

/// The core's view of an exact `numpy.ndarray` that is C-contiguous, in native byte order and
/// of a dtype a column can have; `None` for anything else.
#[inline(always)]
fn usual_array<'a>(obj: &'a Any<'_>) -> Option<Array<'a>> {
    let (p, types) = (obj.as_ptr(), numpy_types(obj.py()));
    // SAFETY: `p` is a live object (borrowed for 'a); its fields are read as a PyArrayObject
    // only once its type is exactly numpy.ndarray. The descriptor's prefix up to `type_num`
    // has the same layout in NumPy 1 and 2.
    unsafe {
        if pyo3::ffi::Py_TYPE(p) as usize != types.ndarray {
            return None;
        }
        let a = &*(p as *const npyffi::PyArrayObject);
        let d = &*a.descr;
        let foreign = if cfg!(target_endian = "little") { b'>' } else { b'<' };
        if a.flags & npyffi::NPY_ARRAY_C_CONTIGUOUS == 0 || d.byteorder as u8 == foreign {
            return None;
        }
        let dtype = (*types.dtypes.get(usize::try_from(d.type_num).ok()?)?)?;
        let shape: &'a [usize] = match usize::try_from(a.nd) {
            Ok(0) | Err(_) => &[],
            Ok(nd) => std::slice::from_raw_parts(a.dimensions as *const usize, nd),
        };
        let n = shape.iter().product::<usize>() * dtype.size();
        let data =
            if n == 0 { &[][..] } else { std::slice::from_raw_parts(a.data as *const u8, n) };
        Some(Array { dtype, shape, data })
    }
}

/// A NumPy scalar object of C type `T`: NumPy's `PyBoolScalarObject`, `PyFloatScalarObject`, ...
/// (numpy/arrayscalars.h: the object header, then the value).
#[repr(C)]
struct ScalarObject<T> {
    ob_base: pyo3::ffi::PyObject,
    obval: T,
}

/// Addresses of the NumPy type objects the fast path compares with, and the dtype of every
/// NumPy type number a column can have (fixed once NumPy is loaded).
struct NumpyTypes {
    ndarray: usize,
    float64: usize,
    float32: usize,
    bool_: usize,
    dtypes: [Option<DType>; NPY_TYPES::NPY_DOUBLE as usize + 1],
}

fn numpy_types(py: Python<'_>) -> &'static NumpyTypes {
    static TYPES: std::sync::OnceLock<NumpyTypes> = std::sync::OnceLock::new();
    TYPES.get_or_init(|| {
        use npyffi::NpyTypes as T;
        // SAFETY: NumPy's C API is loaded on first use, with the interpreter attached.
        let get = |t| unsafe { npyffi::get_type_object(py, t) as usize };
        // the builtin type numbers up to NPY_DOUBLE (0 ..= 12: bool, the C integer types, float,
        // double) are fixed by NumPy's ABI
        let dtype_of = |n: std::ffi::c_int| {
            // SAFETY: a new reference to the builtin descriptor of a builtin type number.
            let d = unsafe { npyffi::PY_ARRAY_API.PyArray_DescrFromType(py, n) } as *mut _;
            let d = unsafe { Bound::from_owned_ptr_or_opt(py, d) }?;
            let d = d.cast_into::<numpy::PyArrayDescr>().ok()?;
            DType::from_kind(d.kind(), d.itemsize())
        };
        NumpyTypes {
            ndarray: get(T::PyArray_Type),
            float64: get(T::PyDoubleArrType_Type),
            float32: get(T::PyFloatArrType_Type),
            bool_: get(T::PyBoolArrType_Type),
            dtypes: std::array::from_fn(|n| dtype_of(n as std::ffi::c_int)),
        }
    })
}
