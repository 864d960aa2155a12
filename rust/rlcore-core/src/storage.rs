//! Episode-contiguous replay storage (DESIGN.md, "The storage model").
//!
//! Each env owns one contiguous segment of `seg_len = capacity / num_envs` rows used as a ring.
//! An episode of length L occupies L + 1 consecutive rows: L transition rows (holding o_t and the
//! transition fields) and one terminal row holding the final observation. Rows are addressed
//! inside the core by an *absolute* per-env counter (`abs`, never wrapping) so that episode and
//! window arithmetic never confuses the newest rows with the oldest; the physical row is
//! `env * seg_len + abs % seg_len`.

use crate::dtype::{cast_into, check_cast, read_f64, read_flag, DType};
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
        ColumnSpec { name: name.into(), dtype, shape }
    }
    /// Bytes one row of this column takes.
    pub fn item_bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }
}

/// A stored column: `rows * item_bytes` bytes allocated once, never reallocated.
#[derive(Debug)]
pub struct Column {
    pub spec: ColumnSpec,
    pub item_bytes: usize,
    pub(crate) data: Box<[u8]>,
}

impl Column {
    fn new(spec: ColumnSpec, rows: usize) -> Self {
        let item_bytes = spec.item_bytes();
        Column { spec, item_bytes, data: vec![0u8; rows * item_bytes].into_boxed_slice() }
    }
    #[inline]
    pub(crate) fn row(&self, r: usize) -> &[u8] {
        &self.data[r * self.item_bytes..(r + 1) * self.item_bytes]
    }
    /// The whole column, `rows * item_bytes` bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }
}

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
    pub(crate) rows: usize,
    pub(crate) obs_cols: Vec<Column>,
    /// `act` first, then extras.
    pub(crate) step_cols: Vec<Column>,
    pub(crate) rew: Box<[f32]>,
    pub(crate) term: Box<[u8]>,
    pub(crate) trunc: Box<[u8]>,
    pub(crate) flags: Box<[u8]>,
    pub(crate) ep_id: Box<[u64]>,
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
    pub(crate) plan: Vec<crate::sampling::Plan>,
}

impl ReplayCore {
    /// An empty buffer of `capacity` rows split into `num_envs` ring segments.
    ///
    /// Errors: `InvalidValue` when `capacity / num_envs < 2` or `num_envs == 0`.
    pub fn new(capacity: usize, num_envs: usize, seed: u64) -> Result<Self> {
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
        let rows = seg * num_envs;
        Ok(ReplayCore {
            num_envs,
            seg,
            rows,
            obs_cols: Vec::new(),
            step_cols: Vec::new(),
            rew: vec![0.0; rows].into_boxed_slice(),
            term: vec![0; rows].into_boxed_slice(),
            trunc: vec![0; rows].into_boxed_slice(),
            flags: vec![0; rows].into_boxed_slice(),
            ep_id: vec![0; rows].into_boxed_slice(),
            ep_start: vec![0; rows].into_boxed_slice(),
            ep_end: vec![OPEN; rows].into_boxed_slice(),
            envs: vec![EnvState::default(); num_envs],
            rng: Rng::new(seed),
            per: None,
            her: None,
            her_cols: None,
            obs_is_dict: false,
            scratch: Vec::new(),
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
        if self.len() > 0 {
            return Err(CoreError::usage("enable prioritized replay before the first add"));
        }
        self.per = Some(PerState { tree: SumTree::new(self.rows), alpha, beta, eps, max_p: 1.0 });
        Ok(())
    }

    /// Turn on hindsight relabeling. Must be called before the first add.
    pub fn enable_her(&mut self, cfg: HerConfig) -> Result<()> {
        if !(cfg.future_k.is_finite() && cfg.future_k >= 0.0) {
            return Err(CoreError::value(format!("future_k must be >= 0, got {}", cfg.future_k)));
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
            None => Err(CoreError::usage("beta is only defined for prioritized buffers")),
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
    pub fn rew_column(&self) -> &[f32] {
        &self.rew
    }
    pub fn terminated_column(&self) -> &[u8] {
        &self.term
    }
    pub fn truncated_column(&self) -> &[u8] {
        &self.trunc
    }
    pub fn flags_column(&self) -> &[u8] {
        &self.flags
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
            return Err(CoreError::value("at least one observation column is needed"));
        }
        if step.first().map(|s| s.name.as_str()) != Some("act") {
            return Err(CoreError::value("the first step column must be 'act'"));
        }
        let is_dict = obs.iter().any(|c| c.name.starts_with("obs."));
        if is_dict && obs.iter().any(|c| !c.name.starts_with("obs.")) {
            return Err(CoreError::value("observation columns must all be 'obs' or all 'obs.<key>'"));
        }
        let mut seen = std::collections::HashSet::new();
        for c in obs.iter().chain(step.iter()) {
            if !seen.insert(c.name.clone()) {
                return Err(CoreError::value(format!("column '{}' is defined twice", c.name)));
            }
            if matches!(c.name.as_str(), "rew" | "terminated" | "truncated" | "obs_next") {
                return Err(CoreError::value(format!(
                    "'{}' is a reserved column name; pick another name for the extra",
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
                    obs.iter().position(|c| c.name.strip_prefix("obs.") == Some(key)).ok_or_else(|| {
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
                if cfg.distance_threshold.is_some() && !matches!(obs[ag].dtype, DType::F32 | DType::F64)
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
        self.obs_is_dict = is_dict;
        self.obs_cols = obs.into_iter().map(|s| Column::new(s, self.rows)).collect();
        self.step_cols = step.into_iter().map(|s| Column::new(s, self.rows)).collect();
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
            Ok(ColumnSpec::new(name, store_dtype(a.dtype), a.shape[lead..].to_vec()))
        };
        let obs = s.obs.iter().map(|(n, a)| spec(n, a)).collect::<Result<Vec<_>>>()?;
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
            if !r.is_finite() {
                return Err(CoreError::value(format!("rew[{i}] is {r}; rewards must be finite")));
            }
        }
        for (what, a) in [("terminated", &s.terminated), ("truncated", &s.truncated)] {
            if a.shape != s.rew.shape {
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
                    "{what}: expected bool (or integer 0/1) flags, got {}",
                    a.dtype.name()
                )));
            }
        }
        if let Some(m) = &s.mask {
            if m.shape != s.rew.shape {
                return Err(CoreError::shape(format!(
                    "mask: expected shape {:?} like rew, got {:?}",
                    s.rew.shape, m.shape
                )));
            }
            if m.dtype != DType::Bool {
                return Err(CoreError::dtype(format!("mask: expected bool, got {}", m.dtype.name())));
            }
        }
        let check = |what: &str, a: &Array<'_>, col: &Column| -> Result<()> {
            let ok = a.ndim() == col.spec.shape.len() + lead
                && (lead == 0 || a.shape[0] == n)
                && a.shape[lead..] == col.spec.shape[..];
            if !ok {
                let mut want: Vec<usize> = if lead == 1 { vec![n] } else { vec![] };
                want.extend_from_slice(&col.spec.shape);
                return Err(CoreError::shape(format!(
                    "{what}: expected shape {want:?}, got {:?}",
                    a.shape
                )));
            }
            check_cast(what, a.dtype, col.spec.dtype)
        };
        let check_obs = |what: &str, given: &[(&str, Array<'_>)]| -> Result<()> {
            if given.len() != self.obs_cols.len() {
                return Err(self.obs_keys_error(what, given));
            }
            for (col, (name, a)) in self.obs_cols.iter().zip(given.iter()) {
                if col.spec.name != *name {
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
            || extras.iter().zip(s.extras.iter()).any(|(c, (nm, _))| c.spec.name != *nm)
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
            self.obs_cols.iter().map(|c| c.spec.name.as_str()).collect::<Vec<_>>(),
            given.iter().map(|(n, _)| *n).collect::<Vec<_>>()
        ))
    }

    /// Add one vector-env step: row i of every array belongs to env i. Validates everything
    /// before writing; on error nothing changes. The first call defines the columns.
    pub fn add(&mut self, s: &Steps<'_>) -> Result<AddOutcome> {
        let fresh = !self.has_schema();
        if fresh {
            let lead = usize::from(s.rew.ndim() == 1);
            self.infer(s, lead)?;
        }
        let (n, _lead) = match self.validate(s, Some(self.num_envs)) {
            Ok(v) => v,
            Err(e) => {
                if fresh {
                    self.forget_schema();
                }
                return Err(e);
            }
        };
        let mut out = AddOutcome { rows: Vec::with_capacity(n), done: Vec::new() };
        for e in 0..n {
            if let Some(m) = &s.mask {
                if m.data[e] == 0 {
                    out.rows.push(-1);
                    continue;
                }
            }
            let (row, done) = self.write_step(e, s, e);
            out.rows.push(row as i64);
            if let Some(d) = done {
                out.done.push(d);
            }
        }
        Ok(out)
    }

    /// Add T consecutive steps of one env (rows of the arrays in time order), e.g. an offline
    /// dataset of whole episodes. Equivalent to T single-env `add` calls. Needs `num_envs == 1`.
    pub fn extend(&mut self, s: &Steps<'_>) -> Result<AddOutcome> {
        if self.num_envs != 1 {
            return Err(CoreError::usage("extend (from_arrays) needs a buffer with num_envs=1"));
        }
        if s.rew.ndim() != 1 {
            return Err(CoreError::shape(format!(
                "rew: expected shape [T], got {:?}",
                s.rew.shape
            )));
        }
        let fresh = !self.has_schema();
        if fresh {
            self.infer(s, 1)?;
        }
        let (t_len, _) = match self.validate(s, None) {
            Ok(v) => v,
            Err(e) => {
                if fresh {
                    self.forget_schema();
                }
                return Err(e);
            }
        };
        let mut out = AddOutcome { rows: Vec::with_capacity(t_len), done: Vec::new() };
        for i in 0..t_len {
            if let Some(m) = &s.mask {
                if m.data[i] == 0 {
                    out.rows.push(-1);
                    continue;
                }
            }
            let (row, done) = self.write_step(0, s, i);
            out.rows.push(row as i64);
            if let Some(d) = done {
                out.done.push(d);
            }
        }
        Ok(out)
    }

    fn forget_schema(&mut self) {
        self.obs_cols.clear();
        self.step_cols.clear();
        self.her_cols = None;
        self.obs_is_dict = false;
    }

    #[inline]
    pub(crate) fn phys(&self, env: usize, abs: u64) -> usize {
        env * self.seg + (abs % self.seg as u64) as usize
    }

    /// Claim the next row of env `e`'s ring, dropping whatever it held.
    fn claim_row(&mut self, e: usize) -> (u64, usize) {
        let abs = self.envs[e].head;
        let p = self.phys(e, abs);
        if abs >= self.seg as u64 && self.flags[p] & F_TRANSITION != 0 {
            self.envs[e].n_trans -= 1;
            if let Some(per) = self.per.as_mut() {
                per.tree.set(p, 0.0);
            }
        }
        self.flags[p] = 0;
        self.term[p] = 0;
        self.trunc[p] = 0;
        self.envs[e].head = abs + 1;
        (abs, p)
    }

    fn write_obs(&mut self, p: usize, given: &[(&str, Array<'_>)], i: usize) {
        for (col, (_, a)) in self.obs_cols.iter_mut().zip(given.iter()) {
            let rb = a.row_bytes(a.ndim() - col.spec.shape.len());
            let src = &a.data[i * rb..(i + 1) * rb];
            let ib = col.item_bytes;
            cast_into(src, a.dtype, &mut col.data[p * ib..(p + 1) * ib], col.spec.dtype);
        }
    }

    /// Whether the given observation (row i) is byte-equal to the one stored at row p.
    fn obs_equal(&mut self, p: usize, given: &[(&str, Array<'_>)], i: usize) -> bool {
        for (col, (_, a)) in self.obs_cols.iter().zip(given.iter()) {
            let rb = a.row_bytes(a.ndim() - col.spec.shape.len());
            let src = &a.data[i * rb..(i + 1) * rb];
            let stored = col.row(p);
            if a.dtype == col.spec.dtype {
                if src != stored {
                    return false;
                }
            } else {
                let tmp = &mut self.scratch[..col.item_bytes];
                cast_into(src, a.dtype, tmp, col.spec.dtype);
                if tmp != stored {
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
                self.flags[last] |= F_CUT;
                self.flags[pc] |= F_TERMINAL;
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
            self.flags[p] = F_EP_START;
            self.ep_id[p] = ep;
            let rec = self.rec(e, ep);
            self.ep_start[rec] = abs;
            self.ep_end[rec] = OPEN;
        }
        // transition fields at the open row
        let cur = self.envs[e].head - 1;
        let p = self.phys(e, cur);
        for (k, col) in self.step_cols.iter_mut().enumerate() {
            let a = if k == 0 { &s.act } else { &s.extras[k - 1].1 };
            let rb = a.row_bytes(a.ndim() - col.spec.shape.len());
            let src = &a.data[i * rb..(i + 1) * rb];
            let ib = col.item_bytes;
            cast_into(src, a.dtype, &mut col.data[p * ib..(p + 1) * ib], col.spec.dtype);
        }
        let r = read_f64(s.rew.dtype, s.rew.data, i);
        let term = read_flag(s.terminated.dtype, s.terminated.data, i);
        let trunc = read_flag(s.truncated.dtype, s.truncated.data, i);
        self.rew[p] = r as f32;
        self.term[p] = term as u8;
        self.trunc[p] = trunc as u8;
        self.flags[p] |= F_TRANSITION;
        self.envs[e].n_trans += 1;
        if let Some(per) = self.per.as_mut() {
            per.tree.set(p, per.max_p);
        }
        // next observation in the next row
        let (nabs, np) = self.claim_row(e);
        self.write_obs(np, s.obs_next, i);
        let ep = self.envs[e].next_ep - 1;
        self.ep_id[np] = ep;
        let st = &mut self.envs[e];
        st.ep_return += r as f32 as f64;
        st.ep_len += 1;
        if term || trunc {
            let done = EpisodeDone { env: e, ret: st.ep_return, len: st.ep_len };
            st.open = false;
            self.flags[np] = F_TERMINAL;
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
        self.flags.fill(0);
        self.term.fill(0);
        self.trunc.fill(0);
        self.ep_end.fill(OPEN);
        if let Some(per) = self.per.as_mut() {
            per.tree = SumTree::new(self.rows);
            per.max_p = 1.0;
        }
    }
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
        Err(CoreError::value(format!("beta must be a finite number >= 0, got {beta}")))
    }
}
