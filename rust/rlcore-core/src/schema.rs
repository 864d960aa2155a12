//! What a buffer stores and how callers name it: the columns (observation columns, `act`,
//! extras), the row record layout, the reserved names, the `"obs.<key>"` convention of dict
//! observations (applied here only), the inputs of one `add`/`extend` call ([`Steps`]) and their
//! lookup by name and column views by public name ([`ColumnView`]). The layout of a sampled
//! batch is in [`crate::batch`].

use std::borrow::Cow;

use smallvec::SmallVec;

use crate::dtype::{Array, DType};
use crate::error::{CoreError, Result};

/// Names an extra column cannot take (`InvalidValue` at declaration: from gymnasium spaces, from
/// arrays or inferred by the first add): every argument name of `add`/`extend` (`self` too: the
/// Python `extend` takes it), every field of a sampled `TransitionBatch`, the fixed columns that
/// `column()` reads, and `env_ids` for partial vector steps. Names starting with `obs.` are
/// reserved as well (dict observation keys). Any other string is a valid name: names are only
/// ever dictionary keys, never file names or identifiers.
pub const RESERVED_NAMES: &[&str] = &[
    "obs",
    "act",
    "rew",
    "terminated",
    "truncated",
    "obs_next",
    "mask",
    "env_ids",
    "self",
    "discount",
    "indices",
    "weights",
    "extras",
    "flags",
];

/// Whether `name` is reserved for an extra column (see [`RESERVED_NAMES`]).
pub fn is_reserved(name: &str) -> bool {
    RESERVED_NAMES.contains(&name) || name.starts_with(OBS_KEY_PREFIX)
}

/// The name of the single observation column of array observations.
pub const OBS: &str = "obs";
/// Dict observations store key `k` in the column `"obs.k"`.
const OBS_KEY_PREFIX: &str = "obs.";

/// The column name of dict observation key `key`.
pub fn obs_column_name(key: &str) -> String {
    format!("{OBS_KEY_PREFIX}{key}")
}

/// The dict key of an observation column name (`None` for `"obs"` and non-observation names).
pub fn obs_key(name: &str) -> Option<&str> {
    name.strip_prefix(OBS_KEY_PREFIX)
}

/// How a message names an observation column given as argument `what`: `obs`, `obs['key']`.
pub fn display<'a>(what: &'a str, name: &str) -> Cow<'a, str> {
    match obs_key(name) {
        Some(key) => Cow::Owned(format!("{what}['{key}']")),
        None => Cow::Borrowed(what),
    }
}

/// Name, dtype and per-row shape of a stored column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnSpec {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl ColumnSpec {
    pub fn new(name: impl Into<String>, dtype: DType, shape: Vec<usize>) -> Self {
        ColumnSpec {
            name: name.into(),
            dtype,
            shape,
        }
    }
    /// A spec from a dtype name (`"float32"`, ...), as a front end reads declarations.
    ///
    /// Errors: `DType` for a dtype name columns cannot have.
    pub fn parse(name: String, dtype: &str, shape: Vec<usize>) -> Result<Self> {
        match DType::from_name(dtype) {
            Some(dtype) => Ok(ColumnSpec { name, dtype, shape }),
            None => Err(CoreError::dtype(format!(
                "column '{name}': unsupported dtype '{dtype}'"
            ))),
        }
    }
    /// Bytes one row of this column takes.
    pub fn item_bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }
}

/// A stored column: `item_bytes` bytes at `offset` inside every row record.
///
/// `spec` is the column as callers see it (inputs of `add`, arrays of a batch). For the
/// frame-stacked observation column (`frame_stack = k`) the caller's row is a stack `[k, *F]`
/// of which a row record holds only the newest frame `F` (`stored_shape`, `item_bytes`); the
/// stack is rebuilt from the rows before it at sample time. Every other column stores the
/// caller's row as it is (`stack == 1`, `stored_shape == spec.shape`).
#[derive(Debug, Clone)]
pub struct Column {
    pub spec: ColumnSpec,
    /// Bytes of the stored row (one frame of a stacked column).
    pub item_bytes: usize,
    pub offset: usize,
    /// Frames per caller row: k for the stacked observation column, else 1.
    pub stack: usize,
    /// Shape of the stored row: `spec.shape` without its leading stack axis when stacked.
    pub stored_shape: Vec<usize>,
}

impl Column {
    /// Bytes of one caller row (an input row of `add`, a sample's row of a batch).
    #[inline]
    pub fn io_bytes(&self) -> usize {
        self.item_bytes * self.stack
    }
}

/// Byte offsets of the fixed fields at the start of every row record.
pub const OFF_FLAGS: usize = 0;
pub const OFF_TERM: usize = 1;
pub const OFF_TRUNC: usize = 2;
pub const OFF_REW: usize = 4;
pub const OFF_EP_ID: usize = 8;
/// Bytes of the fixed fields; the columns follow.
pub const HEADER: usize = 16;
const _: () = assert!(OFF_REW + 4 <= OFF_EP_ID && OFF_EP_ID + 8 <= HEADER);

/// The columns of a buffer and the layout of its row records. Rows are interleaved records
/// (flags, terminated, truncated, rew, episode id, then every column) so that one sample touches
/// one or two cache lines and the next observation (row t + 1) is adjacent in memory.
#[derive(Debug, Clone)]
pub struct Schema {
    /// One column `"obs"`, or one column `"obs.<key>"` per key of dict observations.
    pub obs: Vec<Column>,
    /// `act` first, then the extras.
    pub step: Vec<Column>,
    /// Bytes per row record (the row stride of every column view), a multiple of 8.
    pub rec: usize,
    pub obs_is_dict: bool,
    /// `Some(k)`: the observation column `"obs"` holds one frame per row and callers see
    /// stacks of the k newest frames (see [`Column`] and `frames`).
    pub frame_stack: Option<usize>,
}

impl Schema {
    /// No columns yet (before `from_spaces` or the first add).
    pub fn undefined() -> Self {
        Schema {
            obs: Vec::new(),
            step: Vec::new(),
            rec: HEADER,
            obs_is_dict: false,
            frame_stack: None,
        }
    }

    pub fn is_defined(&self) -> bool {
        !self.step.is_empty()
    }

    /// Check a declaration and lay out the row record: header, then each column aligned to its
    /// element size. `step[0]` must be `act`.
    ///
    /// Errors: `InvalidValue` for no observation column, a first step column other than `act`,
    /// observation columns other than one `obs` or only `obs.<key>`, a reserved extra name or a
    /// name defined twice.
    pub fn new(obs: Vec<ColumnSpec>, step: Vec<ColumnSpec>) -> Result<Schema> {
        Schema::with_frames(obs, step, None)
    }

    /// As [`Schema::new`], with the observation column stacked over `frame_stack` frames (see
    /// [`Column`]): its declared shape must be `[k, *F]`, and a row record holds one frame `F`.
    ///
    /// Errors: as [`Schema::new`]; `InvalidValue` for `k < 1`; `Usage` for dict observations;
    /// `Shape` for an observation shape whose leading (stack) axis is not k.
    pub fn with_frames(
        obs: Vec<ColumnSpec>,
        step: Vec<ColumnSpec>,
        frame_stack: Option<usize>,
    ) -> Result<Schema> {
        if obs.is_empty() {
            return Err(CoreError::value(
                "at least one observation column is needed",
            ));
        }
        if step.first().map(|s| s.name.as_str()) != Some("act") {
            return Err(CoreError::value("the first step column must be 'act'"));
        }
        let is_dict = obs.iter().any(|c| obs_key(&c.name).is_some());
        if (is_dict && obs.iter().any(|c| obs_key(&c.name).is_none()))
            || (!is_dict && (obs.len() != 1 || obs[0].name != OBS))
        {
            return Err(CoreError::value(
                "observation columns must be one column 'obs' or columns 'obs.<key>'",
            ));
        }
        if let Some(c) = step[1..].iter().find(|c| is_reserved(&c.name)) {
            return Err(CoreError::value(format!(
                "extra column '{}': the name is reserved (reserved are {:?} and names starting \
                 with 'obs.'); pick another name for the extra",
                c.name, RESERVED_NAMES
            )));
        }
        let mut seen = std::collections::HashSet::new();
        for c in obs.iter().chain(step.iter()) {
            if !seen.insert(c.name.as_str()) {
                return Err(CoreError::value(format!(
                    "column '{}' is defined twice",
                    c.name
                )));
            }
        }
        let stack = match frame_stack {
            None => 1,
            Some(k) => {
                check_stack(k, &obs[0], is_dict)?;
                k
            }
        };
        let mut off = HEADER;
        let mut place = |spec: ColumnSpec, stack: Option<usize>| -> Column {
            let a = spec.dtype.size();
            off = off.div_ceil(a) * a;
            let stored_shape = match stack {
                Some(_) => spec.shape[1..].to_vec(),
                None => spec.shape.clone(),
            };
            let c = Column {
                item_bytes: stored_shape.iter().product::<usize>() * spec.dtype.size(),
                offset: off,
                stack: stack.unwrap_or(1),
                stored_shape,
                spec,
            };
            off += c.item_bytes;
            c
        };
        let obs: Vec<Column> = obs
            .into_iter()
            .map(|c| place(c, frame_stack.map(|_| stack)))
            .collect();
        let step: Vec<Column> = step.into_iter().map(|c| place(c, None)).collect();
        Ok(Schema {
            obs,
            step,
            rec: off.div_ceil(8) * 8,
            obs_is_dict: is_dict,
            frame_stack,
        })
    }

    /// The column specs a first call's arrays define: shapes below the `lead` leading
    /// dimensions, dtypes as given except bool, which is stored as uint8; dict observation
    /// columns in the order of `obs`'s keys.
    ///
    /// Errors: `Shape` for an array with fewer than `lead` dimensions or an empty observation
    /// dict.
    pub fn infer(s: &Steps<'_>, lead: usize) -> Result<(Vec<ColumnSpec>, Vec<ColumnSpec>)> {
        let spec = |name: String, a: &Array<'_>| -> Result<ColumnSpec> {
            if a.ndim() < lead {
                return Err(CoreError::shape(format!(
                    "{name}: expected a leading env dimension, got shape {:?}",
                    a.shape
                )));
            }
            let dtype = if a.dtype == DType::Bool {
                DType::U8
            } else {
                a.dtype
            };
            Ok(ColumnSpec::new(name, dtype, a.shape[lead..].to_vec()))
        };
        for (what, o) in [("obs", &s.obs), ("obs_next", &s.obs_next)] {
            if matches!(o, Obs::Dict([])) {
                return Err(CoreError::shape(format!("{what}: empty observation dict")));
            }
        }
        let obs = match s.obs {
            Obs::Array(a) => vec![spec(OBS.to_string(), &a)?],
            Obs::Dict(d) => d
                .iter()
                .map(|(k, a)| spec(obs_column_name(k), a))
                .collect::<Result<Vec<_>>>()?,
        };
        let mut step = vec![spec("act".to_string(), &s.act)?];
        for (n, a) in s.extras {
            step.push(spec(n.to_string(), a)?);
        }
        Ok((obs, step))
    }

    /// The observation arrays of argument `what` in column order, looked up by key.
    ///
    /// Errors: `Shape` for an array where the columns are a dict or the reverse, a missing key,
    /// or keys the columns do not have.
    pub fn obs_arrays<'a>(
        &self,
        what: &str,
        o: &'a Obs<'a>,
    ) -> Result<SmallVec<[&'a Array<'a>; 4]>> {
        match (o, self.obs_is_dict) {
            (Obs::Array(a), false) => Ok(std::iter::once(a).collect()),
            (Obs::Dict(_), false) => Err(CoreError::shape(format!(
                "{what}: expected an array, got a dict"
            ))),
            (Obs::Array(_), true) => Err(CoreError::shape(format!(
                "{what}: expected a dict with keys {:?}, got an array",
                self.obs_keys()
            ))),
            (Obs::Dict(given), true) => {
                let mut out = SmallVec::new();
                for (k, col) in self.obs.iter().enumerate() {
                    let key = obs_key(&col.spec.name).unwrap_or_default();
                    out.push(find(given, k, key).ok_or_else(|| {
                        CoreError::shape(format!("{what}: the observation dict has no key '{key}'"))
                    })?);
                }
                if given.len() != self.obs.len() {
                    return Err(CoreError::shape(format!(
                        "{what}: expected keys {:?}, got {} keys",
                        self.obs_keys(),
                        given.len()
                    )));
                }
                Ok(out)
            }
        }
    }

    /// The extra arrays in column order, looked up by name.
    ///
    /// Errors: `Usage` for a missing or unknown extra.
    pub fn extra_arrays<'a>(
        &self,
        given: &'a [(&'a str, Array<'a>)],
    ) -> Result<SmallVec<[&'a Array<'a>; 4]>> {
        let cols = &self.step[1..];
        let mut out = SmallVec::new();
        if given.len() == cols.len() {
            for (k, col) in cols.iter().enumerate() {
                match find(given, k, &col.spec.name) {
                    Some(a) => out.push(a),
                    None => break,
                }
            }
        }
        if out.len() != cols.len() {
            return Err(CoreError::usage(format!(
                "extra columns must be exactly {:?} (declared at the first add or by from_spaces), \
                 got {:?}",
                cols.iter().map(|c| c.spec.name.as_str()).collect::<Vec<_>>(),
                given.iter().map(|(n, _)| *n).collect::<Vec<_>>()
            )));
        }
        Ok(out)
    }

    /// The keys of dict observations (empty for array observations).
    pub fn obs_keys(&self) -> Vec<&str> {
        self.obs
            .iter()
            .filter_map(|c| obs_key(&c.spec.name))
            .collect()
    }

    /// Column specs as callers see them (a stacked observation column with its stack axis):
    /// observation columns, then `act` and the extras.
    pub fn specs(&self) -> (Vec<ColumnSpec>, Vec<ColumnSpec>) {
        (
            self.obs.iter().map(|c| c.spec.clone()).collect(),
            self.step.iter().map(|c| c.spec.clone()).collect(),
        )
    }

    /// Every column: observation columns, then step columns.
    pub fn columns(&self) -> impl Iterator<Item = &Column> {
        self.obs.iter().chain(self.step.iter())
    }

    /// The largest observation row in bytes (the continuity check's scratch size).
    pub fn max_obs_bytes(&self) -> usize {
        self.obs.iter().map(|c| c.item_bytes).max().unwrap_or(0)
    }

    /// Where the column with public name `name` sits in a row record: `(offset, dtype, shape
    /// of one stored row)` (one frame `F` for a stacked observation column). Public names are the column names (`"obs"`, `"obs.<key>"`, `"act"`, the
    /// extras) and the fixed fields `"rew"` (float32), `"terminated"`, `"truncated"` and
    /// `"flags"` (uint8).
    ///
    /// Errors: `Usage` before the columns are defined and for an unknown name.
    pub fn locate(&self, name: &str) -> Result<(usize, DType, &[usize])> {
        if !self.is_defined() {
            return Err(CoreError::usage(format!(
                "column '{name}': the buffer's columns are defined by the first add (or \
                 from_spaces); add data first"
            )));
        }
        if let Some(&(_, off)) = FIXED_FIELDS.iter().find(|(n, _)| *n == name) {
            let dtype = if off == OFF_REW {
                DType::F32
            } else {
                DType::U8
            };
            return Ok((off, dtype, &[]));
        }
        match self.columns().find(|c| c.spec.name == name) {
            Some(c) => Ok((c.offset, c.spec.dtype, &c.stored_shape)),
            None => Err(CoreError::usage(format!(
                "unknown column '{name}'; columns are {:?}",
                self.columns()
                    .map(|c| c.spec.name.as_str())
                    .chain(FIXED_FIELDS.iter().map(|(n, _)| *n))
                    .collect::<Vec<_>>()
            ))),
        }
    }
}

/// Check a frame stack of `k` over the observation column `obs`.
///
/// Errors: `InvalidValue` for `k < 1`; `Usage` for dict observations; `Shape` for an
/// observation shape whose leading (stack) axis is not k.
fn check_stack(k: usize, obs: &ColumnSpec, is_dict: bool) -> Result<()> {
    if k < 1 {
        return Err(CoreError::value(format!(
            "frame_stack must be >= 1 (or None for no stacking), got {k}"
        )));
    }
    if is_dict {
        return Err(CoreError::usage(
            "frame_stack needs array observations; dict observations are not supported (stack \
             the frames of one key in an env wrapper instead)",
        ));
    }
    if obs.shape.first() != Some(&k) {
        return Err(CoreError::shape(format!(
            "obs: with frame_stack={k} the observation shape must be [{k}, *frame] (the stack \
             axis first, as gymnasium's FrameStackObservation gives it), got {:?}",
            obs.shape
        )));
    }
    Ok(())
}

/// The fixed per-row fields that `column()` reads, by public name.
const FIXED_FIELDS: [(&str, usize); 4] = [
    ("rew", OFF_REW),
    ("terminated", OFF_TERM),
    ("truncated", OFF_TRUNC),
    ("flags", OFF_FLAGS),
];

/// The entry named `name` in `given`, looked for at position `k` first (callers usually pass
/// names in column order).
#[inline]
fn find<'a>(given: &'a [(&'a str, Array<'a>)], k: usize, name: &str) -> Option<&'a Array<'a>> {
    match given.get(k) {
        Some((n, a)) if *n == name => Some(a),
        _ => given.iter().find(|(n, _)| *n == name).map(|(_, a)| a),
    }
}

/// A zero-copy view of one stored column: element type, shape `[rows, *row shape]` and byte
/// strides (the record size between rows, C order inside a row), starting at `ptr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnView {
    pub ptr: *const u8,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub strides: Vec<usize>,
}

impl ColumnView {
    /// The view of a column at `offset` with rows of `row_shape` in `rows` records of `rec`
    /// bytes starting at `base`.
    pub(crate) fn new(
        base: *const u8,
        rows: usize,
        rec: usize,
        (offset, dtype, row_shape): (usize, DType, &[usize]),
    ) -> Self {
        let mut shape = Vec::with_capacity(row_shape.len() + 1);
        shape.push(rows);
        shape.extend_from_slice(row_shape);
        let mut strides = vec![0; shape.len()];
        strides[0] = rec;
        let mut inner = dtype.size();
        for (s, &n) in strides[1..].iter_mut().zip(row_shape).rev() {
            *s = inner;
            inner *= n;
        }
        ColumnView {
            ptr: base.wrapping_add(offset),
            dtype,
            shape,
            strides,
        }
    }
}

/// The observations of one call: one array, or a dict of arrays by key (in any order).
#[derive(Debug, Clone, Copy)]
pub enum Obs<'a> {
    Array(Array<'a>),
    Dict(&'a [(&'a str, Array<'a>)]),
}

/// One call's worth of steps: either one vector-env step (leading dim N = num_envs, or no
/// leading dim for a single env) or, for `extend`, T consecutive steps of one env.
#[derive(Debug, Clone, Copy)]
pub struct Steps<'a> {
    pub obs: Obs<'a>,
    pub act: Array<'a>,
    pub rew: Array<'a>,
    pub terminated: Array<'a>,
    pub truncated: Array<'a>,
    pub obs_next: Obs<'a>,
    /// Extra columns by name (in any order).
    pub extras: &'a [(&'a str, Array<'a>)],
    /// Bool `[N]`: envs whose entry is false are skipped (not a transition).
    pub mask: Option<Array<'a>>,
    /// Integer `[K]`: the env of each input row (a partial vector step: a subset of the envs
    /// in any order). `None`: row i belongs to env i and every env has a row.
    pub env_ids: Option<Array<'a>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::Field;

    fn spec(name: &str) -> ColumnSpec {
        ColumnSpec::new(name, DType::F32, vec![2])
    }

    #[test]
    fn declarations_are_checked_and_columns_aligned() {
        let ok = Schema::new(
            vec![ColumnSpec::new("obs", DType::U8, vec![3])],
            vec![spec("act"), ColumnSpec::new("x", DType::F64, vec![])],
        )
        .unwrap(); // ok: test
        assert_eq!(ok.obs[0].offset, HEADER);
        assert_eq!(ok.step[0].offset, 20); // u8 [3] ends at 19, f32 aligns to 20
        assert_eq!(ok.step[1].offset, 32);
        assert_eq!(ok.rec, 40);
        assert!(!ok.obs_is_dict);
        let bad = [
            (vec![], vec![spec("act")]),
            (vec![spec("obs")], vec![spec("x")]),
            (vec![spec("obs"), spec("obs.a")], vec![spec("act")]),
            (vec![spec("o")], vec![spec("act")]),
            (vec![spec("obs")], vec![spec("act"), spec("rew")]),
            (vec![spec("obs")], vec![spec("act"), spec("obs.k")]),
            (vec![spec("obs.a"), spec("obs.a")], vec![spec("act")]),
            (vec![spec("obs")], vec![spec("act"), spec("e"), spec("e")]),
        ];
        for (obs, step) in bad {
            let what = format!("{obs:?} {step:?}");
            assert!(
                matches!(Schema::new(obs, step), Err(CoreError::InvalidValue(_))),
                "{what}"
            );
        }
        let d = Schema::new(vec![spec("obs.a"), spec("obs.b")], vec![spec("act")]).unwrap(); // ok: test
        assert!(d.obs_is_dict);
    }

    fn arr<'a>(shape: &'a [usize], data: &'a [u8]) -> Array<'a> {
        Array {
            dtype: DType::F32,
            shape,
            data,
        }
    }

    fn dict_schema() -> Schema {
        Schema::new(
            vec![
                ColumnSpec::new("obs.a", DType::F32, vec![2]),
                ColumnSpec::new("obs.b", DType::U8, vec![]),
            ],
            vec![
                spec("act"),
                ColumnSpec::new("e1", DType::I64, vec![3]),
                spec("e2"),
            ],
        )
        .unwrap() // ok: test
    }

    #[test]
    fn observation_dicts_are_looked_up_by_key_in_any_order() {
        let sc = dict_schema();
        let (x, y) = ([0u8; 8], [1u8; 1]);
        let (xa, ya) = (arr(&[2], &x), arr(&[], &y));
        let given = [("b", ya), ("a", xa)];
        let dict = Obs::Dict(&given);
        let got = sc.obs_arrays("obs", &dict).unwrap(); // ok: test
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].shape, got[1].shape), (&[2usize][..], &[][..]));
        let shape_err = |o: Obs<'_>| match sc.obs_arrays("obs_next", &o) {
            Err(CoreError::Shape(m)) => m,
            r => panic!("expected a ShapeError, got {r:?}"),
        };
        assert_eq!(
            shape_err(Obs::Array(xa)),
            "obs_next: expected a dict with keys [\"a\", \"b\"], got an array"
        );
        assert_eq!(
            shape_err(Obs::Dict(&[("a", xa)])),
            "obs_next: the observation dict has no key 'b'"
        );
        assert_eq!(
            shape_err(Obs::Dict(&[("a", xa), ("b", ya), ("c", ya)])),
            "obs_next: expected keys [\"a\", \"b\"], got 3 keys"
        );
        let flat = Schema::new(vec![spec("obs")], vec![spec("act")]).unwrap(); // ok: test
        assert!(matches!(
            flat.obs_arrays("obs", &Obs::Dict(&[("a", xa)])),
            Err(CoreError::Shape(m)) if m == "obs: expected an array, got a dict"
        ));
    }

    #[test]
    fn extras_are_looked_up_by_name_and_must_be_exactly_the_declared_ones() {
        let sc = dict_schema();
        let (x, y) = ([0u8; 24], [0u8; 8]);
        let (e1, e2) = (arr(&[3], &x), arr(&[2], &y));
        let given = [("e2", e2), ("e1", e1)];
        let got = sc.extra_arrays(&given).unwrap(); // ok: test
        assert_eq!((got[0].data.len(), got[1].data.len()), (24, 8));
        for given in [
            &[("e1", e1)][..],
            &[("e1", e1), ("e2", e2), ("e3", e2)][..],
            &[("e1", e1), ("e3", e2)][..],
            &[][..],
        ] {
            assert!(
                matches!(sc.extra_arrays(given), Err(CoreError::Usage(_))),
                "{given:?}"
            );
        }
    }

    #[test]
    fn inference_names_dict_columns_and_refuses_empty_dicts() {
        let (x, two) = ([0u8; 8], [2usize]);
        let one = arr(&[], &x[..4]);
        let pos = [("pos", arr(&two, &x))];
        let act = Array {
            dtype: DType::Bool,
            shape: &two,
            data: &x[..2],
        };
        let steps = |obs: Obs<'_>| -> Result<(Vec<ColumnSpec>, Vec<ColumnSpec>)> {
            let s = Steps {
                obs,
                act,
                rew: one,
                terminated: one,
                truncated: one,
                obs_next: obs,
                extras: &[],
                mask: None,
                env_ids: None,
            };
            Schema::infer(&s, 0)
        };
        let (obs, step) = steps(Obs::Dict(&pos)).unwrap(); // ok: test
        assert_eq!(obs, vec![ColumnSpec::new("obs.pos", DType::F32, vec![2])]);
        assert_eq!(step, vec![ColumnSpec::new("act", DType::U8, vec![2])]);
        assert!(matches!(
            steps(Obs::Dict(&[])),
            Err(CoreError::Shape(m)) if m == "obs: empty observation dict"
        ));
    }

    #[test]
    fn views_give_record_strides_and_refuse_unknown_names() {
        let sc = dict_schema();
        let base = 0x1000 as *const u8;
        let v = ColumnView::new(base, 10, sc.rec, sc.locate("e1").unwrap()); // ok: test
        assert_eq!(v.shape, vec![10, 3]);
        assert_eq!(v.strides, vec![sc.rec, 8]);
        assert_eq!(v.dtype, DType::I64);
        assert_eq!(v.ptr as usize, 0x1000 + sc.step[1].offset);
        let v = ColumnView::new(base, 10, sc.rec, sc.locate("rew").unwrap()); // ok: test
        assert_eq!(
            (v.shape, v.strides, v.dtype),
            (vec![10], vec![sc.rec], DType::F32)
        );
        assert_eq!(sc.locate("flags").unwrap().1, DType::U8); // ok: test
        assert_eq!(sc.locate("obs.a").unwrap().2, &[2]); // ok: test
        for bad in ["obs", "weights", "a"] {
            assert!(matches!(sc.locate(bad), Err(CoreError::Usage(_))), "{bad}");
        }
        let grid = Schema::new(
            vec![ColumnSpec::new("obs", DType::U16, vec![2, 3, 4])],
            vec![spec("act")],
        )
        .unwrap(); // ok: test
        let v = ColumnView::new(base, 5, grid.rec, grid.locate("obs").unwrap()); // ok: test
        assert_eq!(v.strides, vec![grid.rec, 24, 8, 2]);
        assert!(matches!(
            Schema::undefined().locate("rew"),
            Err(CoreError::Usage(_))
        ));
    }

    #[test]
    fn batch_layout_lists_every_field_in_assembly_order() {
        let sc = dict_schema();
        let fields: Vec<_> = sc.batch_fields(true).collect();
        let labels: Vec<_> = fields.iter().map(|f| f.label().into_owned()).collect();
        assert_eq!(
            labels,
            [
                "obs['a']",
                "obs['b']",
                "obs_next['a']",
                "obs_next['b']",
                "act",
                "e1",
                "e2",
                "rew",
                "terminated",
                "truncated",
                "discount",
                "indices",
                "weights"
            ]
        );
        assert_eq!(fields[5].field, Field::Extras);
        assert_eq!((fields[5].dtype, fields[5].item_bytes()), (DType::I64, 24));
        assert_eq!(fields[8].dtype, DType::Bool);
        assert_eq!(sc.batch_fields(false).count(), fields.len() - 1);
        let flat = Schema::new(vec![spec("obs")], vec![spec("act")]).unwrap(); // ok: test
        let first = flat.batch_fields(false).next().unwrap(); // ok: test
        assert_eq!((first.key, first.label()), (None, Cow::Borrowed("obs")));
    }

    #[test]
    fn specs_parse_dtype_names() {
        let c = ColumnSpec::parse("x".into(), "int16", vec![2]).unwrap(); // ok: test
        assert_eq!(c, ColumnSpec::new("x", DType::I16, vec![2]));
        assert!(matches!(
            ColumnSpec::parse("x".into(), "complex64", vec![]),
            Err(CoreError::DType(m)) if m == "column 'x': unsupported dtype 'complex64'"
        ));
    }

    #[test]
    fn obs_names_and_keys_round_trip() {
        assert_eq!(obs_column_name("goal"), "obs.goal");
        assert_eq!(obs_key("obs.goal"), Some("goal"));
        assert_eq!(obs_key("obs"), None);
        assert_eq!(display("obs_next", "obs.goal"), "obs_next['goal']");
        assert_eq!(display("obs_next", "obs"), "obs_next");
        assert!(is_reserved("obs.x") && is_reserved("weights") && !is_reserved("logp"));
    }
}
