//! Checks of scalar and index arguments as a front end hands them in: integers of any size
//! (a Python int is unbounded; the binding passes them as `i128`) and arrays of any numeric
//! dtype. Every range check of such an argument lives here or in the method that takes it, so a
//! front end only converts types.

use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::storage::Array;

/// A count or size argument (`capacity`, `num_envs`, `batch_size`, `n_step`): an integer in
/// `[0, 2**64)`. The method that takes it checks its own lower and upper limits.
///
/// Errors: `InvalidValue` for a negative value or one of 2**64 or more.
pub fn count(what: &str, v: i128) -> Result<usize> {
    usize::try_from(v)
        .map_err(|_| CoreError::value(format!("{what} must be an integer in [0, 2**64), got {v}")))
}

/// The seed of a buffer's generator: an integer in `[0, 2**64)`.
///
/// Errors: `InvalidValue` outside that range.
pub fn seed(v: i128) -> Result<u64> {
    u64::try_from(v).map_err(|_| {
        CoreError::value(format!(
            "seed must be None or an integer in [0, 2**64), got {v}"
        ))
    })
}

/// Row indices from a 0-d or 1-d integer array, exactly (an unsigned index beyond `i64::MAX`
/// becomes `i64::MAX`, which every range check refuses).
///
/// Errors: `Shape` for 2 or more dimensions, `DType` for a bool, float or other non-integer
/// dtype.
pub fn index_array(what: &str, a: &Array<'_>) -> Result<Vec<i64>> {
    let n = one_dim(what, a)?;
    macro_rules! ints {
        ($t:ty) => {{
            let s = std::mem::size_of::<$t>();
            (0..n)
                .map(|k| {
                    let mut b = [0u8; std::mem::size_of::<$t>()];
                    b.copy_from_slice(&a.data[k * s..(k + 1) * s]);
                    i64::try_from(<$t>::from_ne_bytes(b)).unwrap_or(i64::MAX)
                })
                .collect()
        }};
    }
    Ok(match a.dtype {
        DType::I8 => ints!(i8),
        DType::I16 => ints!(i16),
        DType::I32 => ints!(i32),
        DType::I64 => ints!(i64),
        DType::U8 => ints!(u8),
        DType::U16 => ints!(u16),
        DType::U32 => ints!(u32),
        DType::U64 => ints!(u64),
        DType::Bool | DType::F32 | DType::F64 => {
            return Err(CoreError::dtype(format!(
                "{what}: indices must be integers, got {}",
                a.dtype.name()
            )))
        }
    })
}

/// Priorities from a 0-d or 1-d integer or float array, as float64 (their values are checked by
/// `update_priorities`).
///
/// Errors: `Shape` for 2 or more dimensions, `DType` for a bool array.
pub fn priority_array(a: &Array<'_>) -> Result<Vec<f64>> {
    let n = one_dim("priorities", a)?;
    if a.dtype == DType::Bool {
        return Err(CoreError::dtype(
            "priorities: expected floats (or integers), got bool",
        ));
    }
    Ok((0..n)
        .map(|k| crate::dtype::read_f64(a.dtype, a.data, k))
        .collect())
}

/// The number of elements of a 0-d (one element) or 1-d array.
fn one_dim(what: &str, a: &Array<'_>) -> Result<usize> {
    match a.shape {
        [] => Ok(1),
        [n] => Ok(*n),
        s => Err(CoreError::shape(format!(
            "{what}: expected a 1-d array, got shape {s:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_seeds_outside_u64_are_invalid_values() {
        assert_eq!(count("capacity", 5), Ok(5));
        assert_eq!(count("capacity", 1 << 63), Ok(1 << 63));
        for v in [-1i128, 1 << 64, i128::MIN] {
            assert!(matches!(
                count("capacity", v),
                Err(CoreError::InvalidValue(_))
            ));
            assert!(matches!(seed(v), Err(CoreError::InvalidValue(_))));
        }
        assert_eq!(seed((1 << 64) - 1), Ok(u64::MAX));
    }

    #[test]
    fn index_arrays_convert_exactly_and_refuse_floats_bools_and_matrices() {
        let big = [u64::MAX, 3];
        let bytes: Vec<u8> = big.iter().flat_map(|x| x.to_ne_bytes()).collect();
        let a = Array {
            dtype: DType::U64,
            shape: &[2],
            data: &bytes,
        };
        assert_eq!(index_array("indices", &a), Ok(vec![i64::MAX, 3]));
        let neg = (-2i8).to_ne_bytes();
        let a = Array {
            dtype: DType::I8,
            shape: &[],
            data: &neg,
        };
        assert_eq!(index_array("indices", &a), Ok(vec![-2]));
        for dt in [DType::Bool, DType::F32, DType::F64] {
            let a = Array {
                dtype: dt,
                shape: &[1],
                data: &[0; 8],
            };
            assert!(matches!(
                index_array("indices", &a),
                Err(CoreError::DType(_))
            ));
        }
        let a = Array {
            dtype: DType::I64,
            shape: &[1, 1],
            data: &[0; 8],
        };
        assert!(matches!(
            index_array("indices", &a),
            Err(CoreError::Shape(_))
        ));
    }
}
