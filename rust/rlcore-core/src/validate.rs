//! Checks of the arguments a front end hands in, made once here so that a front end only
//! converts types: integers of any size (a Python int is unbounded; the binding passes them as
//! `i128`), index and priority arrays of any numeric dtype, discount-like scalars, the sample
//! arguments, and one `add`/`extend` call's arrays against the buffer's [`Schema`].
//! Parameters that belong to one feature (PER's alpha/beta/eps and priorities, HER's future_k
//! and threshold, GAE's rollout arrays) are checked in that feature's module.

use crate::batch::OutField;
use crate::dtype::{check_cast, check_values, read_f64, Array, DType};
use crate::error::{CoreError, Result};
use crate::schema::{display, Column, Obs, Schema, Steps};
use smallvec::SmallVec;

/// The largest batch `sample` draws (2^31 − 1 rows; larger ones cannot be allocated usefully).
pub const MAX_BATCH: usize = (1 << 31) - 1;

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

/// Indices from a 0-d or 1-d integer array, exactly; an empty array of any dtype is no
/// indices (an empty Python list arrives as float64).
///
/// Errors: `Shape` for 2 or more dimensions, `DType` for a non-empty bool, float or other
/// non-integer array, `InvalidValue` for an unsigned index above `i64::MAX`.
pub fn index_array(what: &str, a: &Array<'_>) -> Result<Vec<i64>> {
    let n = one_dim(what, a)?;
    if n == 0 {
        // an empty list has no integer dtype (NumPy makes it float64): nothing to convert
        return Ok(Vec::new());
    }
    macro_rules! ints {
        ($t:ty) => {{
            let s = std::mem::size_of::<$t>();
            (0..n)
                .map(|k| {
                    let mut b = [0u8; std::mem::size_of::<$t>()];
                    b.copy_from_slice(&a.data[k * s..(k + 1) * s]);
                    let v = <$t>::from_ne_bytes(b);
                    i64::try_from(v).map_err(|_| {
                        CoreError::value(format!(
                            "{what}: index {v} (position {k}) is out of range (above 2**63 - 1)"
                        ))
                    })
                })
                .collect::<Result<Vec<i64>>>()?
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
/// The env of each row of a partial vector step (`add(..., env_ids=ids)`): `ids` must be a 1-d
/// integer array with one entry per row of `rew` (which must be `[K]`), each in `[0, num_envs)`,
/// no two equal.
///
/// Errors: `Shape` (`rew` not 1-d, `ids` not 1-d, a length other than `rew`'s), `DType` (not
/// integers), `InvalidValue` (an id out of range, a repeated id).
pub fn env_ids(ids: &Array<'_>, rew: &Array<'_>, num_envs: usize) -> Result<Vec<usize>> {
    if rew.ndim() != 1 {
        return Err(CoreError::shape(format!(
            "rew: with env_ids, expected shape [K] (one reward per listed env), got {:?}",
            rew.shape
        )));
    }
    let given = index_array("env_ids", ids)?;
    if ids.ndim() != 1 || given.len() != rew.shape[0] {
        return Err(CoreError::shape(format!(
            "env_ids: expected shape [{}] (one env id per row of rew), got {:?}",
            rew.shape[0], ids.shape
        )));
    }
    let mut seen = vec![false; num_envs];
    let mut out = Vec::with_capacity(given.len());
    for (k, &e) in given.iter().enumerate() {
        if e < 0 || e as u64 >= num_envs as u64 {
            return Err(CoreError::value(format!(
                "env_ids[{k}] is {e}; env ids must be in [0, num_envs={num_envs})"
            )));
        }
        let e = e as usize;
        if seen[e] {
            return Err(CoreError::value(format!(
                "env_ids[{k}] is {e}, which appears earlier too; each env may have at most one \
                 row per add"
            )));
        }
        seen[e] = true;
        out.push(e);
    }
    Ok(out)
}

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

/// Check that a discount-like scalar lies in [0, 1].
///
/// Errors: `InvalidValue` outside (NaN included).
pub fn unit(name: &str, x: f64) -> Result<()> {
    if (0.0..=1.0).contains(&x) {
        Ok(())
    } else {
        Err(CoreError::value(format!(
            "{name} must be in [0, 1], got {x}"
        )))
    }
}

/// The scalar arguments of `sample`.
///
/// Errors: `InvalidValue` for `batch_size` outside `[1, MAX_BATCH]`, `n_step < 1` or `gamma`
/// outside `[0, 1]`.
pub fn sample_args(batch_size: usize, n_step: usize, gamma: f64) -> Result<()> {
    if !(1..=MAX_BATCH).contains(&batch_size) {
        return Err(CoreError::value(format!(
            "batch_size must be in [1, {MAX_BATCH}], got {batch_size}"
        )));
    }
    if n_step < 1 {
        return Err(CoreError::value(format!(
            "n_step must be >= 1, got {n_step}"
        )));
    }
    unit("gamma", gamma)
}

/// One call's inputs after [`steps`]: every array checked, observation and step arrays in
/// column order (borrowed from the [`Steps`]: the hot path copies no array descriptor).
#[derive(Debug)]
pub struct Checked<'a> {
    /// Number of input rows.
    pub n: usize,
    pub obs: SmallVec<[&'a Array<'a>; 4]>,
    pub obs_next: SmallVec<[&'a Array<'a>; 4]>,
    /// `act`, then the extras.
    pub step: SmallVec<[&'a Array<'a>; 4]>,
    pub rew: &'a Array<'a>,
    pub terminated: &'a Array<'a>,
    pub truncated: &'a Array<'a>,
    pub mask: Option<&'a Array<'a>>,
}

/// Check one call's inputs against a defined schema: the observation keys, the leading
/// dimension (decided by the rank of `rew`: none for one step of a single env, else N rows),
/// `expect_rows` rows when given, finite float32 rewards, bool or integer flags, a bool mask,
/// the extras' names, and every observation, `act` and extra array of its column's shape with a
/// dtype and values the column holds.
///
/// Errors: `Shape` (shapes, observation keys), `DType` (dtypes, values out of a column's range),
/// `InvalidValue` (non-finite rewards), `Usage` (missing or unknown extras).
pub fn steps<'a>(
    schema: &Schema,
    s: &'a Steps<'a>,
    expect_rows: Option<usize>,
) -> Result<Checked<'a>> {
    if let Some(u) = usual(schema, s, expect_rows) {
        return Ok(u.checked());
    }
    let obs = schema.obs_arrays("obs", &s.obs)?;
    let obs_next = schema.obs_arrays("obs_next", &s.obs_next)?;
    // leading dimension: decided by the rank of rew
    let (n, lead) = match s.rew.ndim() {
        0 => (1usize, 0usize),
        1 => (s.rew.shape[0], 1usize),
        _ => {
            return Err(CoreError::shape(format!(
                "rew: expected shape [N] (one reward per env) or a scalar, got {:?}",
                s.rew.shape
            )))
        }
    };
    if let Some(want) = expect_rows {
        if n != want || (lead == 0 && want != 1) {
            return Err(CoreError::shape(format!(
                "rew: expected shape [{want}] (num_envs={want}), got {:?}; pass one row per env",
                s.rew.shape
            )));
        }
    }
    check_cast("rew", s.rew.dtype, DType::F32)?;
    if s.rew.dtype != DType::F32 && s.rew.dtype != DType::F64 {
        check_values("rew", s.rew.data, s.rew.dtype, DType::F32)?;
    }
    for i in 0..n {
        let r = read_f64(s.rew.dtype, s.rew.data, i);
        if !(r as f32).is_finite() {
            return Err(CoreError::value(format!(
                "rew[{i}] is {r}; rewards must be finite and within float32 range (|r| < 3.4e38)"
            )));
        }
    }
    for (what, a) in [("terminated", &s.terminated), ("truncated", &s.truncated)] {
        if !same_dims(a.shape, s.rew.shape) {
            return Err(CoreError::shape(format!(
                "{what}: expected shape {:?} like rew, got {:?}",
                s.rew.shape, a.shape
            )));
        }
        if !matches!(
            a.dtype,
            DType::Bool
                | DType::U8
                | DType::I8
                | DType::U16
                | DType::I16
                | DType::U32
                | DType::I32
                | DType::U64
                | DType::I64
        ) {
            return Err(CoreError::dtype(format!(
                "{what}: expected bool or integer flags (nonzero means set), got {}",
                a.dtype.name()
            )));
        }
    }
    if let Some(m) = &s.mask {
        if !same_dims(m.shape, s.rew.shape) {
            return Err(CoreError::shape(format!(
                "mask: expected shape {:?} like rew, got {:?}",
                s.rew.shape, m.shape
            )));
        }
        if m.dtype != DType::Bool {
            return Err(CoreError::dtype(format!(
                "mask: expected bool, got {}",
                m.dtype.name()
            )));
        }
    }
    let check = |what: &str, a: &Array<'_>, col: &Column| -> Result<()> {
        let ok = a.ndim() == col.spec.shape.len() + lead
            && (lead == 0 || a.shape[0] == n)
            && same_dims(&a.shape[lead..], &col.spec.shape);
        if !ok {
            let mut want: Vec<usize> = if lead == 1 { vec![n] } else { vec![] };
            want.extend_from_slice(&col.spec.shape);
            return Err(CoreError::shape(format!(
                "{what}: expected shape {want:?}, got {:?}",
                a.shape
            )));
        }
        check_cast(what, a.dtype, col.spec.dtype)?;
        check_values(what, a.data, a.dtype, col.spec.dtype)
    };
    for (what, given) in [("obs", &obs), ("obs_next", &obs_next)] {
        for (col, a) in schema.obs.iter().zip(given.iter()) {
            // the key's label (`obs['achieved_goal']`, a formatted string) only for the error
            if check(what, a, col).is_err() {
                check(&display(what, &col.spec.name), a, col)?;
            }
        }
    }
    check("act", &s.act, &schema.step[0])?;
    let mut step: SmallVec<[&'a Array<'a>; 4]> = SmallVec::new();
    step.push(&s.act);
    step.extend(schema.extra_arrays(s.extras)?);
    for (col, a) in schema.step[1..].iter().zip(step[1..].iter()) {
        check(&col.spec.name, a, col)?;
    }
    Ok(Checked {
        n,
        obs,
        obs_next,
        step,
        rew: &s.rew,
        terminated: &s.terminated,
        truncated: &s.truncated,
        mask: s.mask.as_ref(),
    })
}

/// One call of the collector's usual kind, checked by [`usual`]: an array observation (no
/// dict), no extras and no mask, every observation and `act` array of its column's exact dtype
/// and shape, float32 or float64 rewards that are all finite as float32, and bool flags.
#[derive(Debug)]
pub struct Usual<'a> {
    /// Number of input rows.
    pub n: usize,
    pub obs: &'a Array<'a>,
    pub obs_next: &'a Array<'a>,
    pub act: &'a Array<'a>,
    pub rew: &'a Array<'a>,
    pub terminated: &'a Array<'a>,
    pub truncated: &'a Array<'a>,
    /// Bytes of one input row of `obs` (and `obs_next`), and of `act`.
    pub obs_bytes: usize,
    pub act_bytes: usize,
}

impl<'a> Usual<'a> {
    /// The call as [`steps`] would return it.
    fn checked(&self) -> Checked<'a> {
        Checked {
            n: self.n,
            obs: smallvec::smallvec![self.obs],
            obs_next: smallvec::smallvec![self.obs_next],
            step: smallvec::smallvec![self.act],
            rew: self.rew,
            terminated: self.terminated,
            truncated: self.truncated,
            mask: None,
        }
    }
}

/// [`steps`] for the collector's usual call (see [`Usual`]), in a few comparisons. Every call
/// it accepts passes the full checks with the same result (an exact dtype needs no value
/// check); `None` for any other call, which [`steps`] then checks in full (and reports).
#[inline]
pub fn usual<'a>(
    schema: &Schema,
    s: &'a Steps<'a>,
    expect_rows: Option<usize>,
) -> Option<Usual<'a>> {
    let (Obs::Array(obs), Obs::Array(obs_next)) = (&s.obs, &s.obs_next) else {
        return None;
    };
    let ([col], [act_col]) = (&schema.obs[..], &schema.step[..]) else {
        return None;
    };
    if schema.obs_is_dict || !s.extras.is_empty() || s.mask.is_some() {
        return None;
    }
    let (n, lead) = match s.rew.shape {
        [] => (1, 0),
        [n] => (*n, 1),
        _ => return None,
    };
    if expect_rows.is_some_and(|want| n != want || (lead == 0 && want != 1)) {
        return None;
    }
    let flags_ok = |a: &Array<'_>| a.dtype == DType::Bool && same_dims(a.shape, s.rew.shape);
    if !(flags_ok(&s.terminated) && flags_ok(&s.truncated)) {
        return None;
    }
    let finite = match s.rew.dtype {
        DType::F32 => s
            .rew
            .data
            .chunks_exact(4)
            .all(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]).is_finite()),
        DType::F64 => (0..n).all(|i| (read_f64(DType::F64, s.rew.data, i) as f32).is_finite()),
        _ => false,
    };
    let exact = |a: &Array<'_>, c: &Column| {
        a.dtype == c.spec.dtype
            && a.ndim() == c.spec.shape.len() + lead
            && (lead == 0 || a.shape[0] == n)
            && same_dims(&a.shape[lead..], &c.spec.shape)
    };
    if !(finite && exact(obs, col) && exact(obs_next, col) && exact(&s.act, act_col)) {
        return None;
    }
    Some(Usual {
        n,
        obs,
        obs_next,
        act: &s.act,
        rew: &s.rew,
        terminated: &s.terminated,
        truncated: &s.truncated,
        obs_bytes: col.io_bytes(),
        act_bytes: act_col.io_bytes(),
    })
}

/// What a caller-supplied output array is, read from its header (its data is not touched).
#[derive(Debug, Clone)]
pub struct OutArray<'a> {
    /// Its element type, or how the front end describes it when no column can have it (or it
    /// is not in native byte order).
    pub dtype: std::result::Result<DType, String>,
    pub shape: &'a [usize],
    pub c_contiguous: bool,
    pub writable: bool,
    /// Address and length in bytes of its memory.
    pub addr: usize,
    pub len: usize,
}

/// Check caller-supplied output arrays, one per field of `fields` in their order: each of
/// exactly the field's dtype and shape, C-contiguous, writable, aligned to its elements, and no
/// two sharing memory. One check for every kind of batch ([`OutField`]).
///
/// Errors: `DType` (dtype), `Shape` (shape, number of arrays), `Usage` (layout, shared memory).
pub fn out_arrays<F: OutField>(fields: &[F], arrays: &[OutArray<'_>]) -> Result<()> {
    let mut spans: SmallVec<[(usize, usize); 16]> = SmallVec::new();
    for (k, f) in fields.iter().enumerate() {
        let Some(a) = arrays.get(k) else {
            return Err(CoreError::shape(format!("out: no array for {}", f.label())));
        };
        let dtype = f.dtype();
        if a.dtype.as_ref().ok() != Some(&dtype) {
            let got = match &a.dtype {
                Ok(d) => d.name().to_string(),
                Err(desc) => desc.clone(),
            };
            return Err(CoreError::dtype(format!(
                "out.{}: expected dtype {}, got {got}",
                f.label(),
                dtype.name()
            )));
        }
        let (lead, row) = f.dims();
        let n = lead.len();
        if !(a.shape.len() == n + row.len()
            && same_dims(&a.shape[..n], lead)
            && same_dims(&a.shape[n..], row))
        {
            return Err(CoreError::shape(format!(
                "out.{}: expected shape {:?}, got {:?}",
                f.label(),
                f.shape().as_slice(),
                a.shape
            )));
        }
        if !(a.c_contiguous && a.writable) {
            return Err(CoreError::usage(format!(
                "out.{}: the array must be C-contiguous and writable",
                f.label()
            )));
        }
        if !a.addr.is_multiple_of(dtype.size()) {
            return Err(CoreError::usage(format!(
                "out.{}: the array must be aligned to its {}-byte elements",
                f.label(),
                dtype.size()
            )));
        }
        if a.len > 0 {
            spans.push((a.addr, a.len));
        }
    }
    if fields.len() != arrays.len() {
        return Err(CoreError::shape(format!(
            "out: {} arrays for a batch of {} fields",
            arrays.len(),
            fields.len()
        )));
    }
    spans.sort_unstable();
    if spans.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0) {
        return Err(CoreError::usage(
            "out: two output arrays share memory; give every field its own array",
        ));
    }
    Ok(())
}

/// Shape equality for the few dimensions of an array.
#[inline]
fn same_dims(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
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
    use crate::schema::ColumnSpec;

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
    fn sample_arguments_and_discounts_are_range_checked() {
        assert_eq!(sample_args(1, 1, 0.0), Ok(()));
        assert_eq!(sample_args(MAX_BATCH, 1 << 40, 1.0), Ok(()));
        for (b, n, g) in [
            (0, 1, 0.9),
            (MAX_BATCH + 1, 1, 0.9),
            (8, 0, 0.9),
            (8, 1, -0.1),
            (8, 1, 1.0 + 1e-12),
            (8, 1, f64::NAN),
        ] {
            assert!(
                matches!(sample_args(b, n, g), Err(CoreError::InvalidValue(_))),
                "{b} {n} {g}"
            );
        }
        assert!(matches!(
            unit("gae_lambda", 2.0),
            Err(CoreError::InvalidValue(m)) if m == "gae_lambda must be in [0, 1], got 2"
        ));
    }

    fn out_schema() -> Schema {
        Schema::new(
            vec![ColumnSpec::new("obs", DType::F32, vec![3])],
            vec![ColumnSpec::new("act", DType::I64, vec![])],
        )
        .unwrap() // ok: test
    }

    /// Headers of well-formed, disjoint output arrays for a batch of `b` of [`out_schema`].
    fn good_headers(b: usize, shapes: &[Vec<usize>]) -> Vec<OutArray<'_>> {
        let mut addr = 1 << 20;
        out_schema()
            .batch_fields(false)
            .zip(shapes)
            .map(|(f, shape)| {
                let len = b * f.item_bytes();
                let a = OutArray {
                    dtype: Ok(f.dtype),
                    shape,
                    c_contiguous: true,
                    writable: true,
                    addr,
                    len,
                };
                addr += len.div_ceil(64) * 64;
                a
            })
            .collect()
    }

    #[test]
    fn output_arrays_must_fit_the_batch_layout_exactly() {
        let b = 4;
        let sc = out_schema();
        let shapes: Vec<Vec<usize>> = sc
            .batch_fields(false)
            .map(|f| [&[b][..], f.row_shape].concat())
            .collect();
        let fields: Vec<_> = sc.batch_fields(false).map(|f| (b, f)).collect();
        let check = |h: &[OutArray<'_>]| out_arrays(&fields, h);
        assert_eq!(check(&good_headers(b, &shapes)), Ok(()));
        let mut h = good_headers(b, &shapes);
        h[2].dtype = Ok(DType::I32);
        assert!(
            matches!(check(&h), Err(CoreError::DType(m)) if m == "out.act: expected dtype int64, got int32")
        );
        let mut h = good_headers(b, &shapes);
        h[0].dtype = Err(">f4".into());
        assert!(matches!(check(&h), Err(CoreError::DType(m)) if m.ends_with("got >f4")));
        let wrong = vec![b, 4];
        let mut h = good_headers(b, &shapes);
        h[1].shape = &wrong;
        assert!(
            matches!(check(&h), Err(CoreError::Shape(m)) if m == "out.obs_next: expected shape [4, 3], got [4, 4]")
        );
        let mut h = good_headers(b, &shapes);
        h[3].writable = false;
        assert!(matches!(check(&h), Err(CoreError::Usage(_))));
        let mut h = good_headers(b, &shapes);
        h[4].c_contiguous = false;
        assert!(matches!(check(&h), Err(CoreError::Usage(_))));
        let mut h = good_headers(b, &shapes);
        h[2].addr += 4;
        assert!(matches!(check(&h), Err(CoreError::Usage(m)) if m.contains("aligned")));
        let mut h = good_headers(b, &shapes);
        h[6].addr = h[3].addr + 4;
        assert!(matches!(check(&h), Err(CoreError::Usage(m)) if m.contains("share memory")));
        let h = good_headers(b, &shapes);
        assert!(
            matches!(check(&h[..6]), Err(CoreError::Shape(m)) if m == "out: no array for discount")
        );
    }

    #[test]
    fn step_inputs_are_checked_against_the_schema_and_put_in_column_order() {
        use crate::schema::Obs;
        let sc = Schema::new(
            vec![ColumnSpec::new("obs", DType::F32, vec![2])],
            vec![
                ColumnSpec::new("act", DType::F32, vec![]),
                ColumnSpec::new("x", DType::U8, vec![]),
                ColumnSpec::new("y", DType::F64, vec![]),
            ],
        )
        .unwrap(); // ok: test
        let (f4, f8) = ([0u8; 16], [0u8; 32]);
        let nan = f32::NAN.to_ne_bytes().repeat(2);
        let two = [2usize];
        let (obs_shape, f32s, u8s) = ([2usize, 2], &f4[..8], &f4[..2]);
        let a = |dtype, shape, data| Array { dtype, shape, data };
        let x = a(DType::U8, &two[..], u8s);
        let y = a(DType::F64, &two[..], &f8[..16]);
        let extras = [("y", y), ("x", x)];
        let good = Steps {
            obs: Obs::Array(a(DType::F32, &obs_shape[..], &f4[..])),
            act: a(DType::F32, &two[..], f32s),
            rew: a(DType::F32, &two[..], f32s),
            terminated: a(DType::Bool, &two[..], u8s),
            truncated: a(DType::U8, &two[..], u8s),
            obs_next: Obs::Array(a(DType::F32, &obs_shape[..], &f4[..])),
            extras: &extras,
            mask: None,
            env_ids: None,
        };
        let c = steps_checked(&sc, &good).unwrap(); // ok: test
        assert_eq!(c.n, 2);
        assert_eq!(
            c.step.iter().map(|a| a.dtype).collect::<Vec<_>>(),
            [DType::F32, DType::U8, DType::F64]
        );
        assert!(matches!(
            steps(&sc, &good, Some(3)),
            Err(CoreError::Shape(m)) if m.starts_with("rew: expected shape [3]")
        ));
        let mut bad = good;
        bad.terminated = a(DType::F32, &two[..], f32s);
        assert!(matches!(steps_checked(&sc, &bad), Err(CoreError::DType(_))));
        let mut bad = good;
        bad.extras = &extras[..1];
        assert!(matches!(steps_checked(&sc, &bad), Err(CoreError::Usage(_))));
        let mut bad = good;
        bad.obs_next = Obs::Dict(&extras);
        assert!(matches!(steps_checked(&sc, &bad), Err(CoreError::Shape(_))));
        let mut bad = good;
        bad.rew = a(DType::F32, &two[..], &nan);
        assert!(matches!(
            steps_checked(&sc, &bad),
            Err(CoreError::InvalidValue(_))
        ));
    }

    fn steps_checked<'a>(sc: &Schema, s: &'a Steps<'a>) -> Result<Checked<'a>> {
        steps(sc, s, Some(2))
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
        // a uint64 above i64::MAX is out of range, never wrapped (issue 38)
        assert!(matches!(
            index_array("indices", &a),
            Err(CoreError::InvalidValue(m)) if m.contains("18446744073709551615")
        ));
        // an empty list arrives as float64: no indices
        let empty = Array {
            dtype: DType::F64,
            shape: &[0],
            data: &[],
        };
        assert_eq!(index_array("indices", &empty), Ok(vec![]));
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
