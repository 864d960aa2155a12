//! Sequence replay for recurrent agents (R2D2: Kapturowski et al. 2019, "Recurrent Experience
//! Replay in Distributed Reinforcement Learning"): fixed-length runs of consecutive steps of one
//! episode of one env, gathered in one call (DESIGN.md, "Sequences").
//!
//! Exact semantics. Let `L = burn_in + seq_len`. An episode of env e whose surviving transition
//! rows are the absolute rows `s .. end - 1` (`end` its terminal row, or for a running episode
//! its open row, which holds the newest observation) has `n = end - s` transitions. A start `t`
//! is *eligible* when
//!
//! - `s <= t` and `t + L <= end` (the whole sequence lies in the episode), or
//! - `pad` is set, `n < L` and `t = s` (a short episode, taken once, from its first surviving
//!   step, padded at the end).
//!
//! Starts are drawn with replacement, uniformly over all eligible starts of all envs (each with
//! probability `1 / E`, E the number of eligible starts); under prioritized replay with
//! probability `p_t / sum_{eligible u} p_u`, `p_t` the priority of row t. A sequence thus never
//! crosses an episode end, the write cursor or an overwritten row (the surviving start of a
//! partially overwritten episode is `s`).
//!
//! Step k of a sequence started at t is valid (`mask`) when `k < v = min(L, end - t)`. For a
//! valid step the n-step window stays inside the sequence: `m = min(n_step, v - k)`,
//! `rew = sum_{j<m} gamma^j r[t+k+j]`, `obs_next = obs[t+k+m]`,
//! `discount = gamma^m (1 - terminated[t+k+m-1])`, flags of row `t+k+m-1`, `horizon = m`.
//! Padded steps are zero everywhere, with `indices = -1`. `is_first` marks the row an episode
//! was started with (false for the surviving start of an overwritten episode). Extras named as
//! recurrent state are returned once per sequence, from its first step t.
//!
//! Drawing costs O(B) expected: uniform (or prioritized) transitions are drawn and the
//! ineligible ones rejected; after a fixed number of rejections the eligible starts are
//! enumerated (O(number of stored episodes)), which also detects that there is none.

use crate::dtype::{read_f64, Array, DType};
use crate::error::{CoreError, Result};
use crate::her::{exact_relabel_count, goal_distance, GoalStrategy, Goals, RewardFn};
use crate::mem::{cast_mut, copy_row, Plain};
use crate::replay::ReplayCore;
use crate::rng::Rng;
use crate::sampling::{discounted_sum, Plan};
use crate::storage::{Storage, F_EP_START, F_TRANSITION, OPEN};
use crate::validate::{self, OutArray, MAX_BATCH};

/// Rejected draws allowed per sample before the eligible starts are enumerated.
const REJECTIONS_PER_SAMPLE: usize = 64;

/// The arguments of one `sample_sequences` call.
#[derive(Debug, Clone, PartialEq)]
pub struct SeqRequest {
    /// B, sequences per batch.
    pub batch_size: usize,
    /// Steps of each sequence after the burn-in (>= 1).
    pub seq_len: usize,
    /// Steps before them that a recurrent learner only unrolls over (>= 0).
    pub burn_in: usize,
    pub n_step: usize,
    pub gamma: f64,
    /// Take episodes shorter than L (padded), or never choose them.
    pub pad: bool,
    /// Extras returned once per sequence (its first step) instead of per step.
    pub state: Vec<String>,
}

impl SeqRequest {
    /// L = burn_in + seq_len (checked not to overflow by [`ReplayCore::check_sequence_args`]).
    pub fn steps(&self) -> usize {
        self.burn_in.saturating_add(self.seq_len)
    }
}

/// A field of a sampled `SequenceBatch`, in the order of its tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqSlot {
    Obs,
    Act,
    Rew,
    ObsNext,
    Terminated,
    Truncated,
    Discount,
    Mask,
    IsFirst,
    Horizon,
    Indices,
    StartIndices,
    Weights,
    Extras,
    State,
}

impl SeqSlot {
    /// Number of fields of a `SequenceBatch`.
    pub const COUNT: usize = 15;

    /// The position of the field in a `SequenceBatch`.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The field's name in a `SequenceBatch`.
    pub fn name(self) -> &'static str {
        match self {
            SeqSlot::Obs => "obs",
            SeqSlot::Act => "act",
            SeqSlot::Rew => "rew",
            SeqSlot::ObsNext => "obs_next",
            SeqSlot::Terminated => "terminated",
            SeqSlot::Truncated => "truncated",
            SeqSlot::Discount => "discount",
            SeqSlot::Mask => "mask",
            SeqSlot::IsFirst => "is_first",
            SeqSlot::Horizon => "horizon",
            SeqSlot::Indices => "indices",
            SeqSlot::StartIndices => "start_indices",
            SeqSlot::Weights => "weights",
            SeqSlot::Extras => "extras",
            SeqSlot::State => "state",
        }
    }
}

/// One array of a sampled sequence batch: its field, its key inside the field's dict (the
/// observation key of dict observations, an extra's name), dtype and full shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeqField {
    pub slot: SeqSlot,
    pub key: Option<String>,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl SeqField {
    /// Bytes of the whole array.
    pub fn bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }
    /// How messages name the array: `obs`, `obs['key']`, `extras['h']`, `rew`, ...
    pub fn label(&self) -> String {
        match &self.key {
            Some(k) => format!("{}['{k}']", self.slot.name()),
            None => self.slot.name().to_string(),
        }
    }
}

/// Check caller-supplied output arrays against the layout: one per field, of its dtype and
/// shape, C-contiguous, writable, aligned and not sharing memory.
///
/// Errors: `Shape` (count, shape), `DType`, `Usage` (layout, overlap).
pub fn check_sequence_out(fields: &[SeqField], arrays: &[OutArray<'_>]) -> Result<()> {
    if fields.len() != arrays.len() {
        return Err(CoreError::shape(format!(
            "out: {} arrays for a sequence batch of {} arrays",
            arrays.len(),
            fields.len()
        )));
    }
    let mut spans = Vec::with_capacity(arrays.len());
    for (f, a) in fields.iter().zip(arrays) {
        if a.dtype.as_ref().ok() != Some(&f.dtype) {
            let got = match &a.dtype {
                Ok(d) => d.name().to_string(),
                Err(desc) => desc.clone(),
            };
            return Err(CoreError::dtype(format!(
                "out.{}: expected dtype {}, got {got}",
                f.label(),
                f.dtype.name()
            )));
        }
        if a.shape != f.shape.as_slice() {
            return Err(CoreError::shape(format!(
                "out.{}: expected shape {:?}, got {:?}",
                f.label(),
                f.shape,
                a.shape
            )));
        }
        if !(a.c_contiguous && a.writable && a.addr.is_multiple_of(f.dtype.size())) {
            return Err(CoreError::usage(format!(
                "out.{}: the array must be C-contiguous, writable and aligned",
                f.label()
            )));
        }
        if a.len > 0 {
            spans.push((a.addr, a.len));
        }
    }
    spans.sort_unstable();
    if spans.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0) {
        return Err(CoreError::usage(
            "out: two output arrays share memory; give every field its own array",
        ));
    }
    Ok(())
}

/// Where one sequence reads from: env, absolute start t, the episode's surviving start s and
/// end (terminal or open row), and the number of valid steps v.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Start {
    env: usize,
    t: u64,
    s: u64,
    end: u64,
    v: u64,
}

/// Typed output slices of one sequence batch.
struct SeqOut<'a> {
    obs: Vec<&'a mut [u8]>,
    obs_next: Vec<&'a mut [u8]>,
    /// `act` then the per-step extras; `step_cols` names their schema columns.
    step: Vec<&'a mut [u8]>,
    state: Vec<&'a mut [u8]>,
    rew: &'a mut [f32],
    terminated: &'a mut [u8],
    truncated: &'a mut [u8],
    discount: &'a mut [f32],
    mask: &'a mut [u8],
    is_first: &'a mut [u8],
    horizon: &'a mut [i64],
    indices: &'a mut [i64],
    start_indices: &'a mut [i64],
    weights: Option<&'a mut [f32]>,
}

impl<'a> SeqOut<'a> {
    fn new(fields: &[SeqField], slices: Vec<&'a mut [u8]>) -> Result<Self> {
        fn typed<'a, T: Plain>(f: &SeqField, b: &'a mut [u8]) -> Result<&'a mut [T]> {
            cast_mut(b).ok_or_else(|| {
                CoreError::usage(format!(
                    "out.{}: the array must be aligned to its elements",
                    f.label()
                ))
            })
        }
        if fields.len() != slices.len() {
            return Err(CoreError::shape("out: wrong number of arrays"));
        }
        let (mut obs, mut obs_next, mut step, mut state) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut rew, mut term, mut trunc, mut disc) = (None, None, None, None);
        let (mut mask, mut first, mut hor, mut idx, mut start, mut w) =
            (None, None, None, None, None, None);
        for (f, b) in fields.iter().zip(slices) {
            if b.len() != f.bytes() {
                return Err(CoreError::shape(format!(
                    "out.{}: expected {} bytes, got {}",
                    f.label(),
                    f.bytes(),
                    b.len()
                )));
            }
            match f.slot {
                SeqSlot::Obs => obs.push(b),
                SeqSlot::ObsNext => obs_next.push(b),
                SeqSlot::Act | SeqSlot::Extras => step.push(b),
                SeqSlot::State => state.push(b),
                SeqSlot::Rew => rew = Some(typed(f, b)?),
                SeqSlot::Terminated => term = Some(b),
                SeqSlot::Truncated => trunc = Some(b),
                SeqSlot::Discount => disc = Some(typed(f, b)?),
                SeqSlot::Mask => mask = Some(b),
                SeqSlot::IsFirst => first = Some(b),
                SeqSlot::Horizon => hor = Some(typed(f, b)?),
                SeqSlot::Indices => idx = Some(typed(f, b)?),
                SeqSlot::StartIndices => start = Some(typed(f, b)?),
                SeqSlot::Weights => w = Some(typed(f, b)?),
            }
        }
        let missing = |what: &str| CoreError::shape(format!("out: no array for field '{what}'"));
        Ok(SeqOut {
            obs,
            obs_next,
            step,
            state,
            rew: rew.ok_or_else(|| missing("rew"))?,
            terminated: term.ok_or_else(|| missing("terminated"))?,
            truncated: trunc.ok_or_else(|| missing("truncated"))?,
            discount: disc.ok_or_else(|| missing("discount"))?,
            mask: mask.ok_or_else(|| missing("mask"))?,
            is_first: first.ok_or_else(|| missing("is_first"))?,
            horizon: hor.ok_or_else(|| missing("horizon"))?,
            indices: idx.ok_or_else(|| missing("indices"))?,
            start_indices: start.ok_or_else(|| missing("start_indices"))?,
            weights: w,
        })
    }
}

impl ReplayCore {
    /// The checks of a `sample_sequences` call's arguments and of the buffer's state, made
    /// before any output array is allocated.
    ///
    /// Errors: `InvalidValue` for batch_size outside `[1, 2**31 - 1]`, `seq_len < 1`,
    /// `n_step < 1`, `gamma` outside [0, 1], `B * L` above `2**31 - 1` or above
    /// [`ReplayCore::max_batch_rows`], a state name given
    /// twice; `Usage` for a state name that is not an extra column (or before the first add);
    /// `Empty` when no transition is stored.
    pub fn check_sequence_args(&self, req: &SeqRequest) -> Result<()> {
        validate::sample_args(req.batch_size, req.n_step, req.gamma)?;
        if req.seq_len < 1 {
            return Err(CoreError::value(format!(
                "seq_len must be >= 1, got {}",
                req.seq_len
            )));
        }
        let l = req
            .burn_in
            .checked_add(req.seq_len)
            .filter(|l| {
                l.checked_mul(req.batch_size)
                    .is_some_and(|n| n <= MAX_BATCH)
            })
            .ok_or_else(|| {
                CoreError::value(format!(
                    "batch_size * (burn_in + seq_len) must be at most {MAX_BATCH}, got {} * ({} \
                     + {})",
                    req.batch_size, req.burn_in, req.seq_len
                ))
            })?;
        debug_assert!(l >= 1);
        self.check_batch_rows("batch_size * (burn_in + seq_len)", l * req.batch_size)?;
        if self.is_empty() {
            return Err(CoreError::empty(
                "cannot sample sequences: the buffer holds no transition yet; add some steps \
                 first",
            ));
        }
        self.state_columns(&req.state)?;
        Ok(())
    }

    /// The eligible starts of sequences of `burn_in + seq_len` steps (module docs): how many
    /// there are and their sampling mass, i.e. the sum of their rows' priorities on a
    /// prioritized buffer and their number on a uniform one. What a sharded buffer weights its
    /// shards by, so that a start's probability over all shards is the one of a single buffer.
    /// O(stored episodes), plus O(log capacity) per episode under PER (range sums of the tree).
    ///
    /// Errors: `InvalidValue` for `seq_len < 1` or a length that overflows.
    pub fn sequence_start_mass(
        &self,
        seq_len: usize,
        burn_in: usize,
        pad: bool,
    ) -> Result<(u64, f64)> {
        if seq_len < 1 {
            return Err(CoreError::value(format!(
                "seq_len must be >= 1, got {seq_len}"
            )));
        }
        let l = burn_in
            .checked_add(seq_len)
            .ok_or_else(|| CoreError::value("burn_in + seq_len overflows"))? as u64;
        let runs = self.st.eligible_runs(l, pad);
        let count: u64 = runs.iter().map(|r| r.2).sum();
        let Some(per) = &self.per else {
            return Ok((count, count as f64));
        };
        let seg = self.st.seg;
        let mut mass = 0.0;
        for (e, first, n) in runs {
            let p0 = self.st.phys(e, first);
            let seg_end = (e + 1) * seg;
            let n = n as usize;
            if p0 + n <= seg_end {
                mass += per.tree.range_sum(p0, p0 + n);
            } else {
                mass += per.tree.range_sum(p0, seg_end);
                mass += per.tree.range_sum(e * seg, e * seg + (p0 + n - seg_end));
            }
        }
        Ok((count, mass))
    }

    /// Schema indices (into the step columns) of the recurrent-state extras, in schema order.
    fn state_columns(&self, names: &[String]) -> Result<Vec<usize>> {
        let step = &self.st.schema.step;
        for (k, n) in names.iter().enumerate() {
            if names[..k].contains(n) {
                return Err(CoreError::value(format!(
                    "state: column '{n}' is named twice"
                )));
            }
            if !step[1..].iter().any(|c| &c.spec.name == n) {
                return Err(CoreError::usage(format!(
                    "state: '{n}' is not an extra column; extras are {:?} (write the recurrent \
                     state at collection: add(..., {n}=h))",
                    step[1..]
                        .iter()
                        .map(|c| c.spec.name.as_str())
                        .collect::<Vec<_>>()
                )));
            }
        }
        Ok((1..step.len())
            .filter(|&j| names.contains(&step[j].spec.name))
            .collect())
    }

    /// The arrays of a sequence batch of `req`, in the order [`ReplayCore::sample_sequences`]
    /// takes them: every observation column (`obs`, `[B, L, *O]`), again (`obs_next`), `act`
    /// `[B, L, *A]`, the per-step extras `[B, L, *shape]`, the state extras `[B, *shape]`, then
    /// `rew` f32, `terminated`/`truncated` bool, `discount` f32, `mask`/`is_first` bool,
    /// `horizon` and `indices` i64 (all `[B, L]`), `start_indices` i64 `[B]` and, for
    /// prioritized buffers, `weights` f32 `[B]`.
    ///
    /// Errors: as [`ReplayCore::check_sequence_args`].
    pub fn sequence_fields(&self, req: &SeqRequest) -> Result<Vec<SeqField>> {
        self.check_sequence_args(req)?;
        let state = self.state_columns(&req.state)?;
        let (b, l) = (req.batch_size, req.steps());
        let sc = &self.st.schema;
        let dims = |lead: &[usize], row: &[usize]| {
            let mut v = lead.to_vec();
            v.extend_from_slice(row);
            v
        };
        let mut out = Vec::new();
        for slot in [SeqSlot::Obs, SeqSlot::ObsNext] {
            for c in &sc.obs {
                out.push(SeqField {
                    slot,
                    key: crate::schema::obs_key(&c.spec.name).map(str::to_string),
                    dtype: c.spec.dtype,
                    shape: dims(&[b, l], &c.spec.shape),
                });
            }
        }
        for (j, c) in sc.step.iter().enumerate() {
            if state.contains(&j) {
                continue;
            }
            out.push(SeqField {
                slot: if j == 0 {
                    SeqSlot::Act
                } else {
                    SeqSlot::Extras
                },
                key: (j > 0).then(|| c.spec.name.clone()),
                dtype: c.spec.dtype,
                shape: dims(&[b, l], &c.spec.shape),
            });
        }
        for &j in &state {
            let c = &sc.step[j];
            out.push(SeqField {
                slot: SeqSlot::State,
                key: Some(c.spec.name.clone()),
                dtype: c.spec.dtype,
                shape: dims(&[b], &c.spec.shape),
            });
        }
        for (slot, dtype) in [
            (SeqSlot::Rew, DType::F32),
            (SeqSlot::Terminated, DType::Bool),
            (SeqSlot::Truncated, DType::Bool),
            (SeqSlot::Discount, DType::F32),
            (SeqSlot::Mask, DType::Bool),
            (SeqSlot::IsFirst, DType::Bool),
            (SeqSlot::Horizon, DType::I64),
            (SeqSlot::Indices, DType::I64),
        ] {
            out.push(SeqField {
                slot,
                key: None,
                dtype,
                shape: vec![b, l],
            });
        }
        out.push(SeqField {
            slot: SeqSlot::StartIndices,
            key: None,
            dtype: DType::I64,
            shape: vec![b],
        });
        if self.per.is_some() {
            out.push(SeqField {
                slot: SeqSlot::Weights,
                key: None,
                dtype: DType::F32,
                shape: vec![b],
            });
        }
        Ok(out)
    }

    /// Sample `req.batch_size` sequences (see the module docs for the exact semantics) into
    /// `out`, one byte slice per field of [`ReplayCore::sequence_fields`]. HER buffers relabel
    /// each sequence independently with probability `k / (k + 1)` (strategy `future`: the
    /// achieved goal after a step t' uniform in [last valid step, e − 1]; `final`: e − 1;
    /// `episode`: uniform in [s, e − 1]), the goal replacing the desired goal at every valid
    /// step of `obs` and `obs_next` and every reward recomputed against it; `reward_fn` is then
    /// called once with every (achieved, desired) pair of the batch. Prioritized buffers fill
    /// `weights` as for transitions, from the start rows' priorities.
    ///
    /// Errors: those of [`ReplayCore::check_sequence_args`]; `Empty` when no start is eligible
    /// (with `pad = false`: no stored episode has L transitions); `Shape`/`Usage` for `out`
    /// slices of the wrong sizes or alignment; `Usage` for HER without a reward; the reward
    /// function's errors. On error the buffer, its generator included, is unchanged.
    pub fn sample_sequences(
        &mut self,
        req: &SeqRequest,
        out: Vec<&mut [u8]>,
        reward_fn: Option<&mut RewardFn<'_>>,
    ) -> Result<()> {
        let fields = self.sequence_fields(req)?;
        let mut o = SeqOut::new(&fields, out)?;
        if self.needs_reward_fn() && reward_fn.is_none() {
            return Err(CoreError::usage(
                "HER needs a reward: pass compute_reward=... or distance_threshold=...",
            ));
        }
        let state = self.state_columns(&req.state)?;
        let rng_before = self.rng.clone();
        let res = self.sample_sequences_inner(req, &state, &mut o, reward_fn);
        if res.is_err() {
            self.rng = rng_before;
        }
        res
    }

    fn sample_sequences_inner(
        &mut self,
        req: &SeqRequest,
        state: &[usize],
        o: &mut SeqOut<'_>,
        reward_fn: Option<&mut RewardFn<'_>>,
    ) -> Result<()> {
        let l = req.steps() as u64;
        let starts = match &self.per {
            None => draw_uniform_starts(&self.st, &mut self.rng, req.batch_size, l, req.pad)?,
            Some(per) => {
                draw_prioritized_starts(&self.st, per, &mut self.rng, req.batch_size, l, req.pad)?
            }
        };
        gather(&self.st, &starts, l as usize, req, state, o);
        if self.per.is_some() {
            // a prioritized buffer's start indices name the start transitions (see `index`)
            for (x, s) in o.start_indices.iter_mut().zip(&starts) {
                *x = self.st.index_at(s.env, s.t);
            }
        }
        if let (Some(cfg), Some(goals)) = (&self.her, self.her_goals) {
            let goal_rows = pick_goals(cfg, &self.st, &mut self.rng, &starts);
            relabel(
                cfg.distance_threshold,
                goals,
                &self.st,
                &starts,
                &goal_rows,
                l as usize,
                req,
                o,
                reward_fn,
            )?;
        }
        if let (Some(per), Some(w)) = (&self.per, o.weights.as_deref_mut()) {
            let st = &self.st;
            per.weights(starts.iter().map(|s| st.phys(s.env, s.t)), w);
        }
        Ok(())
    }

    /// Set each sequence's priority from its TD errors with R2D2's mixture (Kapturowski et al.
    /// 2019, sec. 2.3): `p = eta * max_k |delta_k| + (1 - eta) * mean_k |delta_k|` over the
    /// valid steps k (`mask`; every step when `mask` is `None`), then as
    /// [`ReplayCore::update_priorities`] for the start rows: `(p + eps)^alpha`. Returns the
    /// number of start indices skipped (stale, or holding no transition now).
    ///
    /// `td` is `[B, T]` (float or integer), `mask` `[B, T]` bool or integer (nonzero: valid),
    /// `idx` `[B]`.
    ///
    /// Errors: `Shape` for a td array that is not 2-d, B that differs from `idx`, a mask of
    /// another shape; `DType` for bool TD errors; `InvalidValue` for a non-finite TD error,
    /// `eta` outside [0, 1], a sequence without a valid step, and whatever
    /// `update_priorities` refuses; `Usage` without prioritized replay. Nothing is written
    /// unless the whole call is valid.
    pub fn update_sequence_priorities(
        &mut self,
        idx: &[i64],
        td: &Array<'_>,
        mask: Option<&Array<'_>>,
        eta: f64,
    ) -> Result<usize> {
        if self.per.is_none() {
            return Err(CoreError::usage(
                "update_sequence_priorities needs a prioritized buffer",
            ));
        }
        let prio = sequence_priorities(idx.len(), td, mask, eta)?;
        self.update_priorities(idx, &prio)
    }
}

/// Each of `b` sequences' priority from its TD errors with R2D2's mixture (Kapturowski et al.
/// 2019, sec. 2.3): `p = eta * max_k |delta_k| + (1 - eta) * mean_k |delta_k|` over the valid
/// steps k (`mask`; every step when `mask` is `None`), float64 `[b]`. `td` is `[b, T]` (float or
/// integer), `mask` `[b, T]` bool or integer (nonzero: valid). This is the first half of
/// [`ReplayCore::update_sequence_priorities`], for a front end that must refuse a whole update
/// before it sends parts of it anywhere.
///
/// Errors: `Shape` for a td array that is not `[b, T]`, a mask of another shape; `DType` for bool
/// TD errors or float masks; `InvalidValue` for a non-finite TD error, `eta` outside [0, 1], a
/// sequence without a valid step.
pub fn sequence_priorities(
    b: usize,
    td: &Array<'_>,
    mask: Option<&Array<'_>>,
    eta: f64,
) -> Result<Vec<f64>> {
    validate::unit("eta", eta)?;
    if td.ndim() != 2 || td.shape[0] != b {
        return Err(CoreError::shape(format!(
            "td_errors: expected shape [B, T] with B = {} (the number of start indices), \
             got {:?}",
            b, td.shape
        )));
    }
    if td.dtype == DType::Bool {
        return Err(CoreError::dtype("td_errors: expected floats, got bool"));
    }
    if let Some(m) = mask {
        if m.shape != td.shape {
            return Err(CoreError::shape(format!(
                "mask: expected the shape of td_errors {:?}, got {:?}",
                td.shape, m.shape
            )));
        }
        if matches!(m.dtype, DType::F32 | DType::F64) {
            return Err(CoreError::dtype(format!(
                "mask: expected bool (or integer) flags, got {}",
                m.dtype.name()
            )));
        }
    }
    let t = td.shape[1];
    let mut prio = Vec::with_capacity(b);
    for i in 0..b {
        let (mut max, mut sum, mut n) = (0.0f64, 0.0f64, 0usize);
        for k in 0..t {
            let j = i * t + k;
            let x = read_f64(td.dtype, td.data, j);
            if !x.is_finite() {
                return Err(CoreError::value(format!(
                    "td_errors[{i}, {k}] is {x}; TD errors must be finite"
                )));
            }
            if mask.is_some_and(|m| !crate::dtype::read_flag(m.dtype, m.data, j)) {
                continue;
            }
            max = max.max(x.abs());
            sum += x.abs();
            n += 1;
        }
        if n == 0 {
            return Err(CoreError::value(format!(
                "sequence {i} has no valid step in mask; pass the batch's mask (e.g. \
                 batch.mask[:, burn_in:]) with its TD errors"
            )));
        }
        prio.push(eta * max + (1.0 - eta) * sum / n as f64);
    }
    Ok(prio)
}

impl Storage {
    /// The start at alive transition row `p` if it is eligible for sequences of `l` steps.
    #[inline]
    fn eligible_start(&self, p: usize, l: u64, pad: bool) -> Option<Start> {
        let (env, t) = self.abs_of(p)?;
        if self.flag(p) & F_TRANSITION == 0 {
            return None;
        }
        let (s, end) = self.bounds_abs(env, t);
        let ok = t + l <= end || (pad && t == s && end - s < l);
        ok.then(|| Start {
            env,
            t,
            s,
            end,
            v: l.min(end - t),
        })
    }

    /// Every run of eligible starts: (env, first start, number of starts), one per episode
    /// that has any, in O(number of stored episodes).
    fn eligible_runs(&self, l: u64, pad: bool) -> Vec<(usize, u64, u64)> {
        let mut runs = Vec::new();
        for e in 0..self.num_envs {
            let st = &self.envs[e];
            if st.head == 0 {
                continue;
            }
            let lo = self.alive_lo(e);
            let first = self.ep_id(self.phys(e, lo));
            for ep in first..st.next_ep {
                let rec = self.ep_rec(e, ep);
                let s = self.sampleable_start(e, rec);
                let end = match self.ep_end[rec] {
                    OPEN => st.head - 1,
                    x => x,
                };
                if end <= s {
                    continue;
                }
                let n = end - s;
                if n >= l {
                    runs.push((e, s, n - l + 1));
                } else if pad {
                    runs.push((e, s, 1));
                }
            }
        }
        runs
    }

    fn start_at(&self, e: usize, t: u64, l: u64, pad: bool) -> Result<Start> {
        self.eligible_start(self.phys(e, t), l, pad)
            .ok_or_else(|| CoreError::corrupt("rlcore internal error: an enumerated sequence start is not eligible; please report it"))
    }
}

fn no_start(l: u64, pad: bool) -> CoreError {
    if pad {
        CoreError::empty("cannot sample sequences: the buffer holds no transition yet")
    } else {
        CoreError::empty(format!(
            "cannot sample sequences of {l} steps with pad=False: no stored episode has {l} \
             transitions; pass pad=True, a shorter seq_len/burn_in, or add more steps"
        ))
    }
}

/// B starts uniform over the eligible ones (module docs): uniform transitions with the
/// ineligible rejected, then, past the rejection budget, by enumeration.
fn draw_uniform_starts(
    st: &Storage,
    rng: &mut Rng,
    b: usize,
    l: u64,
    pad: bool,
) -> Result<Vec<Start>> {
    let mut starts = Vec::with_capacity(b);
    let mut plans = vec![Plan::default(); b];
    let mut budget = REJECTIONS_PER_SAMPLE.saturating_mul(b);
    while starts.len() < b && budget > 0 {
        let k = b - starts.len();
        st.draw_uniform(rng, &mut plans[..k]);
        for pl in &plans[..k] {
            match st.eligible_start(pl.p, l, pad) {
                Some(s) => starts.push(s),
                None => budget = budget.saturating_sub(1),
            }
        }
    }
    if starts.len() < b {
        let runs = st.eligible_runs(l, pad);
        let total: u64 = runs.iter().map(|r| r.2).sum();
        if total == 0 {
            return Err(no_start(l, pad));
        }
        while starts.len() < b {
            let mut r = rng.below(total);
            let mut run = runs[0];
            for &x in &runs {
                run = x;
                if r < x.2 {
                    break;
                }
                r -= x.2;
            }
            starts.push(st.start_at(run.0, run.1 + r, l, pad)?);
        }
    }
    Ok(starts)
}

/// B starts with probability proportional to their row's priority among the eligible ones:
/// a stratified first draw per sample (Schaul et al. 2016, app. B.2.1), ineligible draws
/// replaced by draws over the whole mass (so that each start's marginal probability is
/// exactly `p_t / sum_{eligible} p`), then, past the rejection budget, by enumeration.
fn draw_prioritized_starts(
    st: &Storage,
    per: &crate::per::PerState,
    rng: &mut Rng,
    b: usize,
    l: u64,
    pad: bool,
) -> Result<Vec<Start>> {
    let total = per.tree.total();
    let seg_mass = total / b as f64;
    let mut starts = Vec::with_capacity(b);
    let mut budget = REJECTIONS_PER_SAMPLE.saturating_mul(b);
    let mut pending = 0usize;
    for i in 0..b {
        let u = ((i as f64 + rng.uniform()) * seg_mass).min(total);
        match st.eligible_start(per.tree.find(u), l, pad) {
            Some(s) => starts.push(s),
            None => pending += 1,
        }
    }
    while pending > 0 && budget > 0 {
        let u = (rng.uniform() * total).min(total);
        match st.eligible_start(per.tree.find(u), l, pad) {
            Some(s) => {
                starts.push(s);
                pending -= 1;
            }
            None => budget -= 1,
        }
    }
    if pending > 0 {
        let mut cands = Vec::new();
        let mut cum = Vec::new();
        let mut acc = 0.0f64;
        for (e, first, n) in st.eligible_runs(l, pad) {
            for t in first..first + n {
                let p = per.tree.get(st.phys(e, t));
                if p > 0.0 {
                    acc += p;
                    cands.push((e, t));
                    cum.push(acc);
                }
            }
        }
        if cands.is_empty() {
            return Err(no_start(l, pad));
        }
        for _ in 0..pending {
            let u = rng.uniform() * acc;
            let j = cum.partition_point(|&c| c <= u).min(cands.len() - 1);
            starts.push(st.start_at(cands[j].0, cands[j].1, l, pad)?);
        }
    }
    Ok(starts)
}

/// Gather the sequences (module docs): observations, step columns and n-step fields of every
/// valid step, zeros (indices −1) on padded steps, the state extras of each first step.
fn gather(
    st: &Storage,
    starts: &[Start],
    l: usize,
    req: &SeqRequest,
    state: &[usize],
    o: &mut SeqOut<'_>,
) {
    let sc = &st.schema;
    let step_cols: Vec<usize> = (0..sc.step.len()).filter(|j| !state.contains(j)).collect();
    let gamma = req.gamma;
    for (i, s) in starts.iter().enumerate() {
        let p0 = st.phys(s.env, s.t);
        o.start_indices[i] = p0 as i64;
        // where the episode's frames start (stacked observations)
        let fs = if st.k1 > 0 {
            st.frames_from(s.env, p0)
        } else {
            0
        };
        for (k, &j) in state.iter().enumerate() {
            let c = &sc.step[j];
            let ib = c.item_bytes;
            copy_row(&mut o.state[k][i * ib..(i + 1) * ib], st.cell(c, p0));
        }
        let v = s.v as usize;
        for k in 0..l {
            let at = i * l + k;
            if k >= v {
                for (c, (ob, on)) in sc
                    .obs
                    .iter()
                    .zip(o.obs.iter_mut().zip(o.obs_next.iter_mut()))
                {
                    let ib = c.io_bytes();
                    ob[at * ib..(at + 1) * ib].fill(0);
                    on[at * ib..(at + 1) * ib].fill(0);
                }
                for (&j, out) in step_cols.iter().zip(o.step.iter_mut()) {
                    let ib = sc.step[j].item_bytes;
                    out[at * ib..(at + 1) * ib].fill(0);
                }
                o.rew[at] = 0.0;
                o.terminated[at] = 0;
                o.truncated[at] = 0;
                o.discount[at] = 0.0;
                o.mask[at] = 0;
                o.is_first[at] = 0;
                o.horizon[at] = 0;
                o.indices[at] = -1;
                continue;
            }
            let t = s.t + k as u64;
            let p = st.phys(s.env, t);
            let m = req.n_step.min(v - k) as u64;
            let q = st.phys(s.env, t + m);
            let last = st.phys(s.env, t + m - 1);
            let (rew, g) = discounted_sum(
                (0..m).map(|j| f64::from(st.rew(st.phys(s.env, t + j)))),
                gamma,
            );
            for (c, (ob, on)) in sc
                .obs
                .iter()
                .zip(o.obs.iter_mut().zip(o.obs_next.iter_mut()))
            {
                let ib = c.io_bytes();
                if c.stack > 1 {
                    st.copy_stack(c, s.env, t, fs, &mut ob[at * ib..(at + 1) * ib]);
                    st.copy_stack(c, s.env, t + m, fs, &mut on[at * ib..(at + 1) * ib]);
                    continue;
                }
                copy_row(&mut ob[at * ib..(at + 1) * ib], st.cell(c, p));
                copy_row(&mut on[at * ib..(at + 1) * ib], st.cell(c, q));
            }
            for (&j, out) in step_cols.iter().zip(o.step.iter_mut()) {
                let c = &sc.step[j];
                let ib = c.item_bytes;
                copy_row(&mut out[at * ib..(at + 1) * ib], st.cell(c, p));
            }
            let term = st.term(last);
            o.rew[at] = rew as f32;
            o.terminated[at] = term;
            o.truncated[at] = st.trunc(last);
            o.discount[at] = (g * f64::from(1 - term)) as f32;
            o.mask[at] = 1;
            o.is_first[at] = u8::from(st.flag(p) & F_EP_START != 0);
            o.horizon[at] = m as i64;
            o.indices[at] = p as i64;
        }
    }
}

/// Per sequence: the physical row whose achieved goal becomes its goal, or `usize::MAX` to
/// keep the stored goals (see [`ReplayCore::sample_sequences`]).
fn pick_goals(
    cfg: &crate::her::HerConfig,
    st: &Storage,
    rng: &mut Rng,
    starts: &[Start],
) -> Vec<usize> {
    let b = starts.len();
    let pick = |s: &Start, rng: &mut Rng| {
        let last = s.t + s.v - 1;
        let tp = match cfg.strategy {
            GoalStrategy::Future => last + rng.below(s.end - last),
            GoalStrategy::Final => s.end - 1,
            GoalStrategy::Episode => s.s + rng.below(s.end - s.s),
        };
        st.phys(s.env, tp + 1)
    };
    let mut rows = vec![usize::MAX; b];
    if cfg.exact_ratio {
        let n = exact_relabel_count(cfg.future_k, b);
        for i in b - n..b {
            rows[i] = pick(&starts[i], rng);
        }
    } else {
        let prob = cfg.future_k / (cfg.future_k + 1.0);
        for (i, s) in starts.iter().enumerate() {
            if rng.uniform() < prob {
                rows[i] = pick(s, rng);
            }
        }
    }
    rows
}

/// Replace the desired goal of every valid step of each relabeled sequence and recompute its
/// n-step rewards: `r'_k = R(achieved_goal(obs[t+k+1]), g)` per valid step, summed over each
/// step's window as in [`gather`].
///
/// Errors: `Usage` without a reward; `Shape`/`InvalidValue` for a reward function that returns
/// the wrong number of rewards or a non-finite one; the reward function's own error.
#[allow(clippy::too_many_arguments)]
fn relabel(
    threshold: Option<f64>,
    (ag, dg): (usize, usize),
    st: &Storage,
    starts: &[Start],
    goal_rows: &[usize],
    l: usize,
    req: &SeqRequest,
    o: &mut SeqOut<'_>,
    reward_fn: Option<&mut RewardFn<'_>>,
) -> Result<()> {
    let ag_col = &st.schema.obs[ag];
    let gb = ag_col.item_bytes;
    let relabeled = || {
        starts
            .iter()
            .zip(goal_rows)
            .enumerate()
            .filter(|(_, (_, &g))| g != usize::MAX)
    };
    for (i, (s, &g)) in relabeled() {
        let goal = st.cell(ag_col, g);
        for k in 0..s.v as usize {
            let at = i * l + k;
            o.obs[dg][at * gb..(at + 1) * gb].copy_from_slice(goal);
            o.obs_next[dg][at * gb..(at + 1) * gb].copy_from_slice(goal);
        }
    }
    // one reward per valid step: achieved goal after step t + k against the new goal
    let total: usize = relabeled().map(|(_, (s, _))| s.v as usize).sum();
    if total == 0 {
        return Ok(());
    }
    let rewards: Vec<f32> = match threshold {
        Some(eps) => {
            let dt = ag_col.spec.dtype;
            let mut r = Vec::with_capacity(total);
            for (_, (s, &g)) in relabeled() {
                let goal = st.cell(ag_col, g);
                for k in 0..s.v {
                    let d = goal_distance(dt, st.cell(ag_col, st.phys(s.env, s.t + k + 1)), goal);
                    r.push(-f32::from(u8::from(d > eps)));
                }
            }
            r
        }
        None => {
            let Some(f) = reward_fn else {
                return Err(CoreError::usage("HER needs a reward function"));
            };
            let mut ags = Vec::with_capacity(total * gb);
            let mut gs = Vec::with_capacity(total * gb);
            let mut trans = Vec::with_capacity(total);
            for (_, (s, &g)) in relabeled() {
                let goal = st.cell(ag_col, g);
                for k in 0..s.v {
                    ags.extend_from_slice(st.cell(ag_col, st.phys(s.env, s.t + k + 1)));
                    gs.extend_from_slice(goal);
                    trans.push(st.phys(s.env, s.t + k));
                }
            }
            let info = crate::her::info_columns(st, &trans);
            let r = f(&Goals {
                dtype: ag_col.spec.dtype,
                shape: &ag_col.spec.shape,
                count: total,
                achieved: &ags,
                desired: &gs,
                info: &info,
            })?;
            if r.len() != total {
                return Err(CoreError::shape(format!(
                    "compute_reward returned {} rewards for {total} goal pairs; it must return \
                     one reward per row, shape [M]",
                    r.len()
                )));
            }
            if let Some(bad) = r.iter().find(|x| !x.is_finite()) {
                return Err(CoreError::value(format!(
                    "compute_reward returned a non-finite reward ({bad})"
                )));
            }
            r
        }
    };
    let mut k0 = 0usize;
    for (i, (s, _)) in relabeled() {
        let v = s.v as usize;
        let r = &rewards[k0..k0 + v];
        for k in 0..v {
            let m = req.n_step.min(v - k);
            let (sum, _) = discounted_sum(r[k..k + m].iter().map(|&x| f64::from(x)), req.gamma);
            o.rew[i * l + k] = sum as f32;
        }
        k0 += v;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use crate::schema::{Obs, Steps};

    /// One env, float32 obs [1] holding the step counter, act int64, episodes of the given
    /// lengths (terminated), the last one left running when `open`.
    fn buffer(capacity: usize, lens: &[usize], open: bool, prioritized: bool) -> ReplayCore {
        let mut c = ReplayCore::new(capacity, 1, 7).unwrap(); // ok: test
        if prioritized {
            c.enable_per(0.6, 0.4, 1e-6).unwrap(); // ok: test
        }
        let mut x = 0f32;
        for (e, &n) in lens.iter().enumerate() {
            for k in 0..n {
                let done = k + 1 == n && !(open && e + 1 == lens.len());
                let (o, on) = (x.to_ne_bytes(), (x + 1.0).to_ne_bytes());
                let (a, r) = (0i64.to_ne_bytes(), 1f32.to_ne_bytes());
                let (d, f) = ([u8::from(done)], [0u8]);
                let arr = |dtype, shape: &'static [usize], data| Array { dtype, shape, data };
                let s = Steps {
                    obs: Obs::Array(arr(DType::F32, &[1, 1], &o)),
                    act: arr(DType::I64, &[1], &a),
                    rew: arr(DType::F32, &[1], &r),
                    terminated: arr(DType::Bool, &[1], &d),
                    truncated: arr(DType::Bool, &[1], &f),
                    obs_next: Obs::Array(arr(DType::F32, &[1, 1], &on)),
                    extras: &[],
                    mask: None,
                    env_ids: None,
                };
                c.add(&s).unwrap(); // ok: test
                x += if done { 100.0 } else { 1.0 };
            }
        }
        c
    }

    fn req(b: usize, seq_len: usize, burn_in: usize, pad: bool) -> SeqRequest {
        SeqRequest {
            batch_size: b,
            seq_len,
            burn_in,
            n_step: 1,
            gamma: 0.5,
            pad,
            state: vec![],
        }
    }

    /// Sample and return (start rows, mask) of the batch.
    fn sample(c: &mut ReplayCore, r: &SeqRequest) -> Result<(Vec<i64>, Vec<u8>)> {
        let fields = c.sequence_fields(r)?;
        let mut bufs: Vec<Vec<u64>> = fields
            .iter()
            .map(|f| vec![0u64; f.bytes().div_ceil(8)])
            .collect();
        let slices: Vec<&mut [u8]> = bufs
            .iter_mut()
            .zip(&fields)
            .map(|(b, f)| &mut crate::mem::bytes_of_mut(b)[..f.bytes()])
            .collect();
        c.sample_sequences(r, slices, None)?;
        let at = |slot| fields.iter().position(|f| f.slot == slot).unwrap(); // ok: test
        let starts = crate::mem::cast_or_copy::<i64>(
            &crate::mem::bytes_of(&bufs[at(SeqSlot::StartIndices)])
                [..fields[at(SeqSlot::StartIndices)].bytes()],
        )
        .to_vec();
        let mask = crate::mem::bytes_of(&bufs[at(SeqSlot::Mask)])
            [..fields[at(SeqSlot::Mask)].bytes()]
            .to_vec();
        Ok((starts, mask))
    }

    #[test]
    fn sequences_start_only_where_they_fit_and_short_episodes_are_padded() {
        // episodes of 5 and 2 transitions (rows 0..5 + terminal 5, rows 6..8 + terminal 8)
        let mut c = buffer(64, &[5, 2], false, false);
        let (starts, mask) = sample(&mut c, &req(400, 3, 0, true)).unwrap(); // ok: test
        let mut seen = std::collections::BTreeSet::new();
        for (i, &s) in starts.iter().enumerate() {
            seen.insert(s);
            let valid: u8 = mask[i * 3..i * 3 + 3].iter().sum();
            assert_eq!(valid, if s == 6 { 2 } else { 3 });
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![0, 1, 2, 6]);
        let (starts, _) = sample(&mut c, &req(200, 3, 0, false)).unwrap(); // ok: test
        assert!(starts.iter().all(|&s| (0..=2).contains(&s)));
    }

    proptest::proptest! {
        /// The start mass a sharded buffer weights its shards by equals the enumeration of the
        /// eligible starts (count, and sum of their priorities), after the ring wraps too.
        #[test]
        fn start_mass_equals_the_enumerated_eligible_starts(
            lens in proptest::collection::vec(1usize..12, 1..12),
            cap in 8usize..48,
            open: bool,
            pad: bool,
            prioritized: bool,
            seq_len in 1usize..6,
            burn_in in 0usize..4,
            prio_seed: u64,
        ) {
            let mut c = buffer(cap, &lens, open, prioritized);
            let mut rng = Rng::new(prio_seed);
            if let Some(per) = c.per.as_mut() {
                for p in 0..cap {
                    if c.st.transition_abs(p).is_some() {
                        per.tree.set(p, rng.uniform() * 3.0);
                    }
                }
            }
            let l = (seq_len + burn_in) as u64;
            let (mut count, mut mass) = (0u64, 0.0f64);
            for p in 0..cap {
                if c.st.eligible_start(p, l, pad).is_some() {
                    count += 1;
                    mass += c.per.as_ref().map_or(1.0, |per| per.tree.get(p));
                }
            }
            let (got_count, got_mass) = c.sequence_start_mass(seq_len, burn_in, pad).unwrap(); // ok: test
            proptest::prop_assert_eq!(got_count, count);
            proptest::prop_assert!((got_mass - mass).abs() <= 1e-9 * (1.0 + mass), "{} vs {}", got_mass, mass);
        }
    }

    #[test]
    fn no_eligible_start_is_a_typed_error_and_leaves_the_generator() {
        let mut c = buffer(64, &[5, 2], true, false);
        let before = c.rng.clone();
        let e = sample(&mut c, &req(4, 4, 3, false)).unwrap_err(); // ok: test
        assert!(matches!(e, CoreError::Empty(_)), "{e:?}");
        assert_eq!(c.rng.state(), before.state());
        assert!(matches!(
            sample(&mut c, &req(4, 0, 0, true)),
            Err(CoreError::InvalidValue(_))
        ));
    }

    #[test]
    fn prioritized_starts_stay_eligible_after_the_ring_wraps() {
        // capacity 16: episodes of 6, 6, 6 and a running 3 wrap the ring
        let mut c = buffer(16, &[6, 6, 6, 3], true, true);
        let (starts, mask) = sample(&mut c, &req(300, 4, 0, false)).unwrap(); // ok: test
        for (i, &s) in starts.iter().enumerate() {
            assert!(c.is_transition(&[s]).unwrap()[0]); // ok: test
            let (st, end, _) = c.episode_bounds(&[s]).unwrap(); // ok: test
            let len = (end[0] - s).rem_euclid(16);
            assert!(len >= 4, "start {s} episode {st:?}..{end:?}");
            assert_eq!(mask[i * 4..i * 4 + 4], [1, 1, 1, 1]);
        }
    }
}
