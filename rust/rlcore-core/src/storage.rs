//! Episode-contiguous replay storage (DESIGN.md, "The storage model").
//!
//! Each env owns one contiguous segment of `seg_len = capacity / num_envs` rows used as a ring.
//! An episode of length L occupies L + 1 consecutive rows: L transition rows (holding o_t and the
//! transition fields) and one terminal row holding the final observation. Rows are addressed
//! inside the core by an *absolute* per-env counter (`abs`, never wrapping) so that episode and
//! window arithmetic never confuses the newest rows with the oldest; the physical row is
//! `env * seg_len + abs % seg_len`.

use crate::dtype::{cast_into, check_cast, check_values, read_f64, read_flag, DType};
use crate::error::{CoreError, Result};
use crate::rng::Rng;
use crate::sumtree::SumTree;

/// Row flag: the row holds a transition (o_t, a_t, r_t, flags) whose next observation is in the
/// following row.
pub const F_TRANSITION: u8 = 1;
/// Row flag: the row is the first row its episode was written with.
pub const F_EP_START: u8 = 2;
/// Row flag (transition rows): the continuity check cut the episode after this step; the next
/// row holds its true next observation and the step bootstraps like a truncation.
pub const F_CUT: u8 = 4;
/// Row flag: the row holds the final observation of a finished (or cut) episode.
pub const F_TERMINAL: u8 = 8;

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
    RESERVED_NAMES.contains(&name) || name.starts_with("obs.")
}

/// Marks an episode record whose episode is still running.
pub(crate) const OPEN: u64 = u64::MAX;

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
    /// Bytes one row of this column takes.
    pub fn item_bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }
}

/// A stored column: `item_bytes` bytes at `offset` inside every row record.
#[derive(Debug, Clone)]
pub struct Column {
    pub spec: ColumnSpec,
    pub item_bytes: usize,
    pub offset: usize,
}

/// Byte offsets of the fixed fields at the start of every row record.
pub const OFF_FLAGS: usize = 0;
pub const OFF_TERM: usize = 1;
pub const OFF_TRUNC: usize = 2;
pub const OFF_REW: usize = 4;
pub const OFF_EP_ID: usize = 8;
const HEADER: usize = 16;

/// A borrowed input array: dtype, shape and C-contiguous native-endian bytes.
#[derive(Debug, Clone, Copy)]
pub struct Array<'a> {
    pub dtype: DType,
    pub shape: &'a [usize],
    pub data: &'a [u8],
}

impl<'a> Array<'a> {
    fn ndim(&self) -> usize {
        self.shape.len()
    }
    fn row_bytes(&self, lead: usize) -> usize {
        self.shape[lead..].iter().product::<usize>() * self.dtype.size()
    }
}

/// One call's worth of steps: either one vector-env step (leading dim N = num_envs, or no
/// leading dim for a single env) or, for [`ReplayCore::extend`], T consecutive steps of one env.
#[derive(Debug, Clone, Copy)]
pub struct Steps<'a> {
    /// Observation columns by name (`"obs"`, or `"obs.<key>"` for dict observations).
    pub obs: &'a [(&'a str, Array<'a>)],
    pub act: Array<'a>,
    pub rew: Array<'a>,
    pub terminated: Array<'a>,
    pub truncated: Array<'a>,
    pub obs_next: &'a [(&'a str, Array<'a>)],
    pub extras: &'a [(&'a str, Array<'a>)],
    /// Bool `[N]`: envs whose entry is false are skipped (not a transition).
    pub mask: Option<Array<'a>>,
}

/// An episode that ended during an `add`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpisodeDone {
    pub env: usize,
    pub ret: f64,
    pub len: u64,
}

/// What an `add` wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AddOutcome {
    /// Per env: the row the transition was written to, or -1 where masked.
    pub rows: Vec<i64>,
    pub done: Vec<EpisodeDone>,
}

/// Goal-selection strategy of hindsight relabeling (Andrychowicz et al. 2017, sec. 4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoalStrategy {
    Future,
    Final,
    Episode,
}

/// HER configuration.
#[derive(Debug, Clone)]
pub struct HerConfig {
    pub strategy: GoalStrategy,
    /// Relabel probability is `future_k / (future_k + 1)`.
    pub future_k: f64,
    /// Native sparse reward `-(||ag - g||_2 > eps)`; `None` means a user callable.
    pub distance_threshold: Option<f64>,
    pub achieved_goal: String,
    pub desired_goal: String,
}

/// Prioritized replay state.
#[derive(Debug, Clone)]
pub struct PerState {
    pub(crate) tree: SumTree,
    pub alpha: f64,
    pub beta: f64,
    pub eps: f64,
    /// Largest `(p + eps)^alpha` set so far; new transitions get it.
    pub(crate) max_p: f64,
    /// Per row: absolute index of the transition it held when its row index was last handed
    /// out (`u64::MAX`: never). `add`/`extend` hand out the row of every transition they write,
    /// `sample` the rows it draws; `update_priorities` lands only where the row still holds
    /// that transition. Since every transition is handed out by the add that writes it, a
    /// transition row's record names the transition it holds, and `sample` (which only hands
    /// out transition rows) has nothing to write.
    pub(crate) handed_out: Box<[u64]>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct EnvState {
    /// Absolute index of the next row to write (= rows ever written).
    pub head: u64,
    /// Whether an episode is open; then its newest observation is at `head - 1`.
    pub open: bool,
    /// Episode id of the open (or last) episode; ids count up per env.
    pub next_ep: u64,
    pub ep_return: f64,
    pub ep_len: u64,
    /// Alive transition rows.
    pub n_trans: u64,
}

/// The replay core: fixed-size storage, episode index, sampling state.
#[derive(Debug)]
pub struct ReplayCore {
    pub(crate) num_envs: usize,
    pub(crate) seg: usize,
    /// `p / seg` without a division instruction (sampling computes it for every row).
    pub(crate) seg_div: FastDiv,
    pub(crate) rows: usize,
    pub(crate) obs_cols: Vec<Column>,
    /// `act` first, then extras.
    pub(crate) step_cols: Vec<Column>,
    /// Bytes per row record: flags, terminated, truncated, rew, episode id, then every column.
    /// Rows are interleaved so that one sample touches one or two cache lines, and the next
    /// observation (row t + 1) is adjacent in memory.
    pub(crate) rec: usize,
    /// `rows * rec` bytes (as u64 words for 8-byte alignment), allocated once by `declare`.
    pub(crate) data: Box<[u64]>,
    /// Episode records per env, indexed `env * seg + ep % seg`: absolute start and terminal row.
    pub(crate) ep_start: Box<[u64]>,
    pub(crate) ep_end: Box<[u64]>,
    pub(crate) envs: Vec<EnvState>,
    pub(crate) rng: Rng,
    pub(crate) per: Option<PerState>,
    pub(crate) her: Option<HerConfig>,
    /// Column indices of (achieved_goal, desired_goal) once the schema is known.
    pub(crate) her_cols: Option<(usize, usize)>,
    pub(crate) obs_is_dict: bool,
    pub(crate) scratch: Vec<u8>,
    pub(crate) scratch_f64: Vec<f64>,
    pub(crate) scratch_rows: Vec<usize>,
    pub(crate) plan: Vec<crate::sampling::Plan>,
}

/// Rows per env segment of a buffer of `capacity` rows over `num_envs` envs.
///
/// Errors: `InvalidValue` when `capacity / num_envs < 2` or `num_envs == 0`.
pub(crate) fn segment_len_for(capacity: usize, num_envs: usize) -> Result<usize> {
    if num_envs == 0 {
        return Err(CoreError::value("num_envs must be >= 1, got 0"));
    }
    let seg = capacity / num_envs;
    if seg < 2 {
        return Err(CoreError::value(format!(
            "capacity must be at least 2 rows per env: got capacity={capacity} for \
             num_envs={num_envs}; use capacity >= {}",
            2 * num_envs
        )));
    }
    Ok(seg)
}

impl ReplayCore {
    /// An empty buffer of `capacity` rows split into `num_envs` ring segments.
    ///
    /// Errors: `InvalidValue` when `capacity / num_envs < 2` or `num_envs == 0`.
    pub fn new(capacity: usize, num_envs: usize, seed: u64) -> Result<Self> {
        let seg = segment_len_for(capacity, num_envs)?;
        let rows = seg * num_envs;
        Ok(ReplayCore {
            num_envs,
            seg,
            seg_div: FastDiv::new(seg as u64),
            rows,
            obs_cols: Vec::new(),
            step_cols: Vec::new(),
            rec: HEADER,
            data: Vec::new().into_boxed_slice(),
            ep_start: alloc(rows, 0u64)?,
            ep_end: alloc(rows, OPEN)?,
            envs: vec![EnvState::default(); num_envs],
            rng: Rng::new(seed),
            per: None,
            her: None,
            her_cols: None,
            obs_is_dict: false,
            scratch: Vec::new(),
            scratch_f64: Vec::new(),
            scratch_rows: Vec::new(),
            plan: Vec::new(),
        })
    }

    /// Turn on prioritized sampling (Schaul et al. 2016). Must be called before the first add.
    pub fn enable_per(&mut self, alpha: f64, beta: f64, eps: f64) -> Result<()> {
        if !(alpha.is_finite() && alpha >= 0.0) {
            return Err(CoreError::value(format!("alpha must be >= 0, got {alpha}")));
        }
        check_beta(beta)?;
        if !(eps.is_finite() && eps > 0.0) {
            return Err(CoreError::value(format!("eps must be > 0, got {eps}")));
        }
        let floor = eps.powf(alpha);
        if !(floor > 0.0 && floor <= crate::per::MAX_PRIORITY) {
            return Err(CoreError::value(format!(
                "eps^alpha = {eps}^{alpha} = {floor:e} is the smallest priority and must lie in \
                 (0, {:e}]; use a larger eps or a smaller alpha",
                crate::per::MAX_PRIORITY
            )));
        }
        if !self.is_empty() {
            return Err(CoreError::usage(
                "enable prioritized replay before the first add",
            ));
        }
        self.per = Some(PerState {
            tree: SumTree::try_new(self.rows)?,
            alpha,
            beta,
            eps,
            max_p: 1.0,
            handed_out: alloc(self.rows, u64::MAX)?,
        });
        Ok(())
    }

    /// Turn on hindsight relabeling. Must be called before the first add.
    pub fn enable_her(&mut self, cfg: HerConfig) -> Result<()> {
        if !(cfg.future_k.is_finite() && cfg.future_k >= 0.0) {
            return Err(CoreError::value(format!(
                "future_k must be >= 0, got {}",
                cfg.future_k
            )));
        }
        if let Some(eps) = cfg.distance_threshold {
            if !(eps.is_finite() && eps >= 0.0) {
                return Err(CoreError::value(format!(
                    "distance_threshold must be a finite number >= 0, got {eps}"
                )));
            }
        }
        if self.has_schema() {
            return Err(CoreError::usage("enable HER before the first add"));
        }
        self.her = Some(cfg);
        Ok(())
    }

    pub fn num_envs(&self) -> usize {
        self.num_envs
    }
    pub fn segment_len(&self) -> usize {
        self.seg
    }
    /// Total rows (`num_envs * segment_len`).
    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn has_schema(&self) -> bool {
        !self.step_cols.is_empty()
    }
    pub fn obs_is_dict(&self) -> bool {
        self.obs_is_dict
    }
    pub fn per(&self) -> Option<&PerState> {
        self.per.as_ref()
    }
    pub fn her(&self) -> Option<&HerConfig> {
        self.her.as_ref()
    }
    pub fn set_beta(&mut self, beta: f64) -> Result<()> {
        check_beta(beta)?;
        match self.per.as_mut() {
            Some(p) => {
                p.beta = beta;
                Ok(())
            }
            None => Err(CoreError::usage(
                "beta is only defined for prioritized buffers",
            )),
        }
    }

    /// Number of sampleable transitions.
    pub fn len(&self) -> usize {
        self.envs.iter().map(|s| s.n_trans as usize).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Column specs: observation columns, then `act` and the extras.
    pub fn schema(&self) -> (Vec<ColumnSpec>, Vec<ColumnSpec>) {
        (
            self.obs_cols.iter().map(|c| c.spec.clone()).collect(),
            self.step_cols.iter().map(|c| c.spec.clone()).collect(),
        )
    }

    pub fn obs_columns(&self) -> &[Column] {
        &self.obs_cols
    }
    pub fn step_columns(&self) -> &[Column] {
        &self.step_cols
    }
    /// Bytes per row record (the row stride of every column view).
    pub fn record_bytes(&self) -> usize {
        self.rec
    }
    /// Start of the row records (`rows * record_bytes()` bytes; empty before the schema exists).
    /// Stable for the buffer's lifetime once the schema exists: the memory is never reallocated.
    pub fn data_ptr(&self) -> *const u8 {
        self.data.as_ptr() as *const u8
    }

    /// All row records as bytes.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: u64 words reinterpreted as bytes; every byte pattern is valid.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr() as *const u8, self.data.len() * 8) }
    }
    #[inline]
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above; the borrow of self.data is exclusive.
        unsafe {
            std::slice::from_raw_parts_mut(self.data.as_mut_ptr() as *mut u8, self.data.len() * 8)
        }
    }
    #[inline]
    pub(crate) fn flag(&self, p: usize) -> u8 {
        self.bytes()[p * self.rec + OFF_FLAGS]
    }
    #[inline]
    pub(crate) fn set_flag(&mut self, p: usize, v: u8) {
        let o = p * self.rec + OFF_FLAGS;
        self.bytes_mut()[o] = v;
    }
    #[inline]
    pub(crate) fn or_flag(&mut self, p: usize, v: u8) {
        let o = p * self.rec + OFF_FLAGS;
        self.bytes_mut()[o] |= v;
    }
    #[inline]
    pub(crate) fn term(&self, p: usize) -> u8 {
        self.bytes()[p * self.rec + OFF_TERM]
    }
    #[inline]
    pub(crate) fn trunc(&self, p: usize) -> u8 {
        self.bytes()[p * self.rec + OFF_TRUNC]
    }
    #[inline]
    pub(crate) fn rew(&self, p: usize) -> f32 {
        let o = p * self.rec + OFF_REW;
        let b = &self.bytes()[o..o + 4];
        f32::from_ne_bytes([b[0], b[1], b[2], b[3]])
    }
    #[inline]
    pub(crate) fn ep_id(&self, p: usize) -> u64 {
        let o = p * self.rec + OFF_EP_ID;
        let mut a = [0u8; 8];
        a.copy_from_slice(&self.bytes()[o..o + 8]);
        u64::from_ne_bytes(a)
    }
    #[inline]
    pub(crate) fn set_u64(&mut self, p: usize, off: usize, v: u64) {
        let o = p * self.rec + off;
        self.bytes_mut()[o..o + 8].copy_from_slice(&v.to_ne_bytes());
    }
    /// One column's bytes of row p.
    #[inline]
    pub(crate) fn cell(&self, c: &Column, p: usize) -> &[u8] {
        let o = p * self.rec + c.offset;
        &self.bytes()[o..o + c.item_bytes]
    }

    /// Declare the columns up front (from gymnasium spaces). `step[0]` must be `act`.
    ///
    /// Errors: `Usage` if a schema exists already; `Shape`/`InvalidValue` for bad specs.
    pub fn declare(&mut self, obs: Vec<ColumnSpec>, step: Vec<ColumnSpec>) -> Result<()> {
        if self.has_schema() {
            return Err(CoreError::usage(
                "the buffer's columns are already defined (by from_spaces or the first add)",
            ));
        }
        if obs.is_empty() {
            return Err(CoreError::value(
                "at least one observation column is needed",
            ));
        }
        if step.first().map(|s| s.name.as_str()) != Some("act") {
            return Err(CoreError::value("the first step column must be 'act'"));
        }
        let is_dict = obs.iter().any(|c| c.name.starts_with("obs."));
        if (is_dict && obs.iter().any(|c| !c.name.starts_with("obs.")))
            || (!is_dict && (obs.len() != 1 || obs[0].name != "obs"))
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
            if !seen.insert(c.name.clone()) {
                return Err(CoreError::value(format!(
                    "column '{}' is defined twice",
                    c.name
                )));
            }
        }
        let her_cols = match &self.her {
            None => None,
            Some(cfg) => {
                if !is_dict {
                    return Err(CoreError::shape(
                        "HER needs dict observations with observation / achieved_goal / \
                         desired_goal keys, got a single array",
                    ));
                }
                let find = |key: &str| {
                    obs.iter()
                        .position(|c| c.name.strip_prefix("obs.") == Some(key))
                        .ok_or_else(|| {
                            CoreError::shape(format!(
                                "HER: the observation dict has no key '{key}'; keys are {:?}",
                                obs.iter().map(|c| &c.name[4..]).collect::<Vec<_>>()
                            ))
                        })
                };
                let ag = find(&cfg.achieved_goal)?;
                let dg = find(&cfg.desired_goal)?;
                if obs[ag].dtype != obs[dg].dtype || obs[ag].shape != obs[dg].shape {
                    return Err(CoreError::shape(format!(
                        "HER: achieved goal {:?} {} and desired goal {:?} {} must have the same \
                         shape and dtype",
                        obs[ag].shape,
                        obs[ag].dtype.name(),
                        obs[dg].shape,
                        obs[dg].dtype.name()
                    )));
                }
                if cfg.distance_threshold.is_some()
                    && !matches!(obs[ag].dtype, DType::F32 | DType::F64)
                {
                    return Err(CoreError::dtype(format!(
                        "HER native reward needs float32 or float64 goals, got {}",
                        obs[ag].dtype.name()
                    )));
                }
                Some((ag, dg))
            }
        };
        let max_obs = obs.iter().map(|c| c.item_bytes()).max().unwrap_or(0);
        // record layout: header, then each column aligned to its element size
        let mut off = HEADER;
        let mut place = |spec: ColumnSpec| -> Column {
            let a = spec.dtype.size();
            off = off.div_ceil(a) * a;
            let c = Column {
                item_bytes: spec.item_bytes(),
                offset: off,
                spec,
            };
            off += c.item_bytes;
            c
        };
        let obs_cols: Vec<Column> = obs.into_iter().map(&mut place).collect();
        let step_cols: Vec<Column> = step.into_iter().map(&mut place).collect();
        let rec = off.div_ceil(8) * 8;
        let words = self
            .rows
            .checked_mul(rec / 8)
            .ok_or_else(|| CoreError::value("capacity times row size overflows the address space"))?
            .max(1);
        let data = alloc(words, 0u64)?;
        self.obs_is_dict = is_dict;
        self.obs_cols = obs_cols;
        self.step_cols = step_cols;
        self.rec = rec;
        self.data = data;
        advise_huge_pages(&self.data);
        self.her_cols = her_cols;
        self.scratch = vec![0u8; max_obs];
        Ok(())
    }

    /// Infer the schema from the first call's arrays.
    fn infer(&mut self, s: &Steps<'_>, lead: usize) -> Result<()> {
        let spec = |name: &str, a: &Array<'_>| -> Result<ColumnSpec> {
            if a.ndim() < lead {
                return Err(CoreError::shape(format!(
                    "{name}: expected a leading env dimension, got shape {:?}",
                    a.shape
                )));
            }
            Ok(ColumnSpec::new(
                name,
                store_dtype(a.dtype),
                a.shape[lead..].to_vec(),
            ))
        };
        let obs = s
            .obs
            .iter()
            .map(|(n, a)| spec(n, a))
            .collect::<Result<Vec<_>>>()?;
        let mut step = vec![spec("act", &s.act)?];
        for (n, a) in s.extras {
            step.push(spec(n, a)?);
        }
        self.declare(obs, step)
    }

    /// Validate one call's inputs against the schema; returns (number of rows, has lead dim).
    fn validate(&self, s: &Steps<'_>, expect_rows: Option<usize>) -> Result<(usize, usize)> {
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
        check_numeric("rew", s.rew.dtype, DType::F32)?;
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
        let check_obs = |what: &str, given: &[(&str, Array<'_>)]| -> Result<()> {
            if given.len() != self.obs_cols.len() {
                return Err(self.obs_keys_error(what, given));
            }
            for (col, (name, a)) in self.obs_cols.iter().zip(given.iter()) {
                if !same_bytes(col.spec.name.as_bytes(), name.as_bytes()) {
                    return Err(self.obs_keys_error(what, given));
                }
                check(&display(what, name), a, col)?;
            }
            Ok(())
        };
        check_obs("obs", s.obs)?;
        check_obs("obs_next", s.obs_next)?;
        check("act", &s.act, &self.step_cols[0])?;
        let extras = &self.step_cols[1..];
        if s.extras.len() != extras.len()
            || extras
                .iter()
                .zip(s.extras.iter())
                .any(|(c, (nm, _))| c.spec.name != *nm)
        {
            return Err(CoreError::usage(format!(
                "extra columns must be exactly {:?} (declared at the first add or by from_spaces), \
                 got {:?}",
                extras.iter().map(|c| c.spec.name.as_str()).collect::<Vec<_>>(),
                s.extras.iter().map(|(n, _)| *n).collect::<Vec<_>>()
            )));
        }
        for (col, (name, a)) in extras.iter().zip(s.extras.iter()) {
            check(name, a, col)?;
        }
        Ok((n, lead))
    }

    #[cold]
    fn obs_keys_error(&self, what: &str, given: &[(&str, Array<'_>)]) -> CoreError {
        CoreError::shape(format!(
            "{what}: expected observation columns {:?}, got {:?}",
            self.obs_cols
                .iter()
                .map(|c| c.spec.name.as_str())
                .collect::<Vec<_>>(),
            given.iter().map(|(n, _)| *n).collect::<Vec<_>>()
        ))
    }

    /// Add one vector-env step: row i of every array belongs to env i. Validates everything
    /// before writing; on error nothing changes. The first call defines the columns.
    pub fn add(&mut self, s: &Steps<'_>) -> Result<AddOutcome> {
        let lead = usize::from(s.rew.ndim() == 1);
        let n = self.define_and_validate(s, lead, Some(self.num_envs))?;
        Ok(self.write_rows(s, n, |i| i))
    }

    /// Add T consecutive vector steps in one call: row i of the arrays is step `i / N` of env
    /// `i % N` (a `[T, N, ...]` chunk flattened time-major to `[T * N, ...]`; with `N = 1`, T
    /// steps of one env such as an offline dataset). Equivalent to T `add` calls, validated as a
    /// whole before anything is written.
    pub fn extend(&mut self, s: &Steps<'_>) -> Result<AddOutcome> {
        if s.rew.ndim() != 1 {
            return Err(CoreError::shape(format!(
                "rew: expected shape [T * num_envs], got {:?}",
                s.rew.shape
            )));
        }
        let n_envs = self.num_envs;
        if !s.rew.shape[0].is_multiple_of(n_envs) {
            return Err(CoreError::shape(format!(
                "extend: {} rows is not a whole number of steps of {n_envs} envs",
                s.rew.shape[0]
            )));
        }
        let rows = self.define_and_validate(s, 1, None)?;
        Ok(self.write_rows(s, rows, |i| i % n_envs))
    }

    /// Infer the columns on the first call, then validate; a failed first call leaves the
    /// buffer without columns. Returns the number of input rows.
    fn define_and_validate(
        &mut self,
        s: &Steps<'_>,
        lead: usize,
        rows: Option<usize>,
    ) -> Result<usize> {
        let fresh = !self.has_schema();
        if fresh {
            self.infer(s, lead)?;
        }
        match self.validate(s, rows) {
            Ok((n, _)) => Ok(n),
            Err(e) => {
                if fresh {
                    self.forget_schema();
                }
                Err(e)
            }
        }
    }

    /// Write input rows 0..n (validated), row i into env `env_of(i)`, skipping masked rows.
    fn write_rows(
        &mut self,
        s: &Steps<'_>,
        n: usize,
        env_of: impl Fn(usize) -> usize,
    ) -> AddOutcome {
        let mut out = AddOutcome {
            rows: Vec::with_capacity(n),
            done: Vec::new(),
        };
        for i in 0..n {
            if s.mask.as_ref().is_some_and(|m| m.data[i] == 0) {
                out.rows.push(-1);
                continue;
            }
            let (row, done) = self.write_step(env_of(i), s, i);
            out.rows.push(row as i64);
            out.done.extend(done);
        }
        out
    }

    pub(crate) fn forget_schema(&mut self) {
        self.obs_cols.clear();
        self.step_cols.clear();
        self.rec = HEADER;
        self.data = Vec::new().into_boxed_slice();
        self.her_cols = None;
        self.obs_is_dict = false;
    }

    /// The env owning physical row p.
    #[inline]
    pub(crate) fn env_of(&self, p: usize) -> usize {
        self.seg_div.div(p as u64) as usize
    }

    #[inline]
    pub(crate) fn phys(&self, env: usize, abs: u64) -> usize {
        env * self.seg + (abs % self.seg as u64) as usize
    }

    /// Claim the next row of env `e`'s ring, dropping whatever it held.
    fn claim_row(&mut self, e: usize) -> (u64, usize) {
        let abs = self.envs[e].head;
        let p = self.phys(e, abs);
        if abs >= self.seg as u64 && self.flag(p) & F_TRANSITION != 0 {
            self.envs[e].n_trans -= 1;
            if let Some(per) = self.per.as_mut() {
                per.tree.set(p, 0.0);
            }
        }
        let o = p * self.rec;
        self.bytes_mut()[o..o + 4].fill(0);
        self.envs[e].head = abs + 1;
        (abs, p)
    }

    fn write_obs(&mut self, p: usize, given: &[(&str, Array<'_>)], i: usize) {
        let rec = self.rec;
        // SAFETY: u64 words viewed as bytes; `obs_cols` is not touched through this slice.
        let data = unsafe {
            std::slice::from_raw_parts_mut(self.data.as_mut_ptr() as *mut u8, self.data.len() * 8)
        };
        for (col, (_, a)) in self.obs_cols.iter().zip(given.iter()) {
            let rb = a.row_bytes(a.ndim() - col.spec.shape.len());
            let src = &a.data[i * rb..(i + 1) * rb];
            let o = p * rec + col.offset;
            cast_into(
                src,
                a.dtype,
                &mut data[o..o + col.item_bytes],
                col.spec.dtype,
            );
        }
    }

    /// Whether the given observation (row i) is byte-equal to the one stored at row p.
    fn obs_equal(&mut self, p: usize, given: &[(&str, Array<'_>)], i: usize) -> bool {
        let rec = self.rec;
        // SAFETY: u64 words viewed as bytes (read-only).
        let data = unsafe {
            std::slice::from_raw_parts(self.data.as_ptr() as *const u8, self.data.len() * 8)
        };
        for (col, (_, a)) in self.obs_cols.iter().zip(given.iter()) {
            let rb = a.row_bytes(a.ndim() - col.spec.shape.len());
            let src = &a.data[i * rb..(i + 1) * rb];
            let o = p * rec + col.offset;
            let stored = &data[o..o + col.item_bytes];
            // bools compare by truth value, as they are stored (0/1 whatever the input byte)
            if a.dtype == col.spec.dtype && a.dtype != DType::Bool {
                if !same_bytes(src, stored) {
                    return false;
                }
            } else {
                let tmp = &mut self.scratch[..col.item_bytes];
                cast_into(src, a.dtype, tmp, col.spec.dtype);
                if !same_bytes(tmp, stored) {
                    return false;
                }
            }
        }
        true
    }

    /// Write row i of the (validated) inputs as the next step of env e.
    fn write_step(&mut self, e: usize, s: &Steps<'_>, i: usize) -> (usize, Option<EpisodeDone>) {
        // continuity check: the new obs must be the obs_next stored one step earlier
        if self.envs[e].open {
            let cur = self.envs[e].head - 1;
            let pc = self.phys(e, cur);
            if !self.obs_equal(pc, s.obs, i) {
                let last = self.phys(e, cur - 1);
                self.or_flag(last, F_CUT);
                self.or_flag(pc, F_TERMINAL);
                let ep = self.envs[e].next_ep - 1;
                let rec = self.rec(e, ep);
                self.ep_end[rec] = cur;
                self.envs[e].open = false;
            }
        }
        if !self.envs[e].open {
            let (abs, p) = self.claim_row(e);
            self.write_obs(p, s.obs, i);
            let st = &mut self.envs[e];
            let ep = st.next_ep;
            st.next_ep += 1;
            st.open = true;
            st.ep_return = 0.0;
            st.ep_len = 0;
            self.set_flag(p, F_EP_START);
            self.set_u64(p, OFF_EP_ID, ep);
            let rec = self.rec(e, ep);
            self.ep_start[rec] = abs;
            self.ep_end[rec] = OPEN;
        }
        // transition fields at the open row
        let cur = self.envs[e].head - 1;
        let p = self.phys(e, cur);
        let rec = self.rec;
        let r = read_f64(s.rew.dtype, s.rew.data, i);
        let term = read_flag(s.terminated.dtype, s.terminated.data, i);
        let trunc = read_flag(s.truncated.dtype, s.truncated.data, i);
        {
            // SAFETY: u64 words viewed as bytes; `step_cols` is not touched through this slice.
            let data = unsafe {
                std::slice::from_raw_parts_mut(
                    self.data.as_mut_ptr() as *mut u8,
                    self.data.len() * 8,
                )
            };
            for (k, col) in self.step_cols.iter().enumerate() {
                let a = if k == 0 { &s.act } else { &s.extras[k - 1].1 };
                let rb = a.row_bytes(a.ndim() - col.spec.shape.len());
                let src = &a.data[i * rb..(i + 1) * rb];
                let o = p * rec + col.offset;
                cast_into(
                    src,
                    a.dtype,
                    &mut data[o..o + col.item_bytes],
                    col.spec.dtype,
                );
            }
            let o = p * rec;
            data[o + OFF_FLAGS] |= F_TRANSITION;
            data[o + OFF_TERM] = term as u8;
            data[o + OFF_TRUNC] = trunc as u8;
            data[o + OFF_REW..o + OFF_REW + 4].copy_from_slice(&(r as f32).to_ne_bytes());
        }
        self.envs[e].n_trans += 1;
        if let Some(per) = self.per.as_mut() {
            // the add hands out row p for this transition (its `AddOutcome::rows`)
            per.tree.set(p, per.max_p);
            per.handed_out[p] = cur;
        }
        // next observation in the next row
        let (nabs, np) = self.claim_row(e);
        self.write_obs(np, s.obs_next, i);
        let ep = self.envs[e].next_ep - 1;
        self.set_u64(np, OFF_EP_ID, ep);
        let st = &mut self.envs[e];
        st.ep_return += r as f32 as f64;
        st.ep_len += 1;
        if term || trunc {
            let done = EpisodeDone {
                env: e,
                ret: st.ep_return,
                len: st.ep_len,
            };
            st.open = false;
            self.set_flag(np, F_TERMINAL);
            let rec = self.rec(e, ep);
            self.ep_end[rec] = nabs;
            (p, Some(done))
        } else {
            (p, None)
        }
    }

    #[inline]
    pub(crate) fn rec(&self, e: usize, ep: u64) -> usize {
        e * self.seg + (ep % self.seg as u64) as usize
    }

    /// Forget all data (columns keep their memory and schema; the RNG stream continues).
    pub fn clear(&mut self) {
        for s in &mut self.envs {
            *s = EnvState::default();
        }
        for p in 0..if self.has_schema() { self.rows } else { 0 } {
            let o = p * self.rec;
            self.bytes_mut()[o..o + 4].fill(0);
        }
        self.ep_end.fill(OPEN);
        if let Some(per) = self.per.as_mut() {
            per.tree.reset();
            per.max_p = 1.0;
            per.handed_out.fill(u64::MAX);
        }
    }
}

/// Division by a fixed divisor d via one 128-bit multiply (Lemire, Kaser & Kurz 2019, "Faster
/// Remainder by Direct Computation"): exact for numerators and divisors below 2^32.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FastDiv {
    m: u64,
    d: u64,
}

impl FastDiv {
    pub(crate) fn new(d: u64) -> Self {
        FastDiv {
            m: u64::MAX / d.max(1) + 1,
            d,
        }
    }
    #[inline]
    pub(crate) fn div(&self, n: u64) -> u64 {
        if n >> 32 != 0 || self.d >> 32 != 0 {
            return n / self.d;
        }
        ((n as u128 * self.m as u128) >> 64) as u64
    }
}

/// Byte equality without a call into libc's memcmp (the rows compared on every add are short).
#[inline]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        let x = u64::from_ne_bytes([x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]]);
        let y = u64::from_ne_bytes([y[0], y[1], y[2], y[3], y[4], y[5], y[6], y[7]]);
        if x != y {
            return false;
        }
    }
    ca.remainder()
        .iter()
        .zip(cb.remainder())
        .all(|(x, y)| x == y)
}

/// Shape equality for the few dimensions of an array.
#[inline]
fn same_dims(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Copy a short byte row without a call into libc's memmove (rows are usually < 256 bytes):
/// two overlapping fixed-size moves cover any length between the block size and twice it.
#[inline(always)]
pub(crate) fn copy_row(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    debug_assert_eq!(n, dst.len());
    macro_rules! two {
        ($k:expr) => {{
            // SAFETY: n >= $k, so both $k-byte windows [0, $k) and [n - $k, n) are in bounds.
            unsafe {
                let a = std::ptr::read_unaligned(src.as_ptr() as *const [u8; $k]);
                let b = std::ptr::read_unaligned(src.as_ptr().add(n - $k) as *const [u8; $k]);
                std::ptr::write_unaligned(dst.as_mut_ptr() as *mut [u8; $k], a);
                std::ptr::write_unaligned(dst.as_mut_ptr().add(n - $k) as *mut [u8; $k], b);
            }
        }};
    }
    match n {
        0 => {}
        1..=3 => dst.copy_from_slice(src),
        4..=8 => two!(4),
        9..=16 => two!(8),
        17..=32 => two!(16),
        33..=64 => two!(32),
        65..=128 => two!(64),
        _ => dst.copy_from_slice(src),
    }
}

/// Ask the kernel to back large storage with transparent huge pages: sampling touches random
/// rows, and with 4 KiB pages nearly every sample of a large buffer misses the TLB.
fn advise_huge_pages(data: &[u64]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = std::mem::size_of_val(data);
        if bytes < 2 * HUGE {
            return;
        }
        let start = data.as_ptr() as usize;
        let aligned = start.div_ceil(HUGE) * HUGE;
        let len = (start + bytes - aligned) / HUGE * HUGE;
        // SAFETY: madvise on a range inside our own allocation only changes paging hints.
        unsafe {
            libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = data;
}

/// A boxed slice of `n` copies of `v`, or an `InvalidValue` error (instead of an abort) when the
/// memory cannot be had.
pub(crate) fn alloc<T: Clone>(n: usize, v: T) -> Result<Box<[T]>> {
    let mut x: Vec<T> = Vec::new();
    x.try_reserve_exact(n).map_err(|_| {
        CoreError::value(format!(
            "cannot allocate {n} x {} bytes for the buffer; use a smaller capacity",
            std::mem::size_of::<T>()
        ))
    })?;
    x.resize(n, v);
    Ok(x.into_boxed_slice())
}

/// The dtype a column gets when inferred from data: bool is stored as uint8.
fn store_dtype(d: DType) -> DType {
    if d == DType::Bool {
        DType::U8
    } else {
        d
    }
}

fn display(what: &str, name: &str) -> String {
    match name.strip_prefix("obs.") {
        Some(key) => format!("{what}['{key}']"),
        None => what.to_string(),
    }
}

fn check_numeric(what: &str, src: DType, dst: DType) -> Result<()> {
    check_cast(what, src, dst)
}

pub(crate) fn check_beta(beta: f64) -> Result<()> {
    if beta.is_finite() && beta >= 0.0 {
        Ok(())
    } else {
        Err(CoreError::value(format!(
            "beta must be a finite number >= 0, got {beta}"
        )))
    }
}
