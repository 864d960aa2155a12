//! The replay core: the storage, the buffer's generator, and the optional prioritized and
//! hindsight parts, with the order in which one call uses them. It sits above every module it
//! composes, so that those import each other one way only (mem → dtype → schema → validate →
//! per → storage → episodes/sampling → her → replay → state).

use crate::batch::BatchField;
use crate::error::{CoreError, Result};
use crate::her::{self, HerConfig, RewardFn};
use crate::per::{self, PerState};
use crate::rng::Rng;
use crate::sampling::{self, BatchOut, Plan, Scratch};
use crate::schema::{Column, ColumnSpec, ColumnView, Schema, Steps};
use crate::storage::{AddOutcome, Storage};
use crate::validate::{self, Checked};

/// The replay core: fixed-size storage, episode index, sampling state.
#[derive(Debug)]
pub struct ReplayCore {
    pub(crate) st: Storage,
    pub(crate) rng: Rng,
    pub(crate) per: Option<PerState>,
    pub(crate) her: Option<HerConfig>,
    /// Column indices of (achieved_goal, desired_goal) once the schema is known.
    pub(crate) her_goals: Option<(usize, usize)>,
    /// Stack size of frame-stacked observations (see `frames`), set before the columns.
    frame_stack: Option<usize>,
    scratch: Scratch,
}

/// One `sample` call: `batch_size` drawn transitions, or (`at`) the batch of the transitions
/// those indices name, with for HER the goal rows `goals_at` (see [`ReplayCore::sample_at`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleRequest {
    pub batch_size: usize,
    pub n_step: usize,
    pub gamma: f64,
    pub at: Option<Vec<i64>>,
    pub goals_at: Option<Vec<i64>>,
}

impl ReplayCore {
    /// An empty buffer of `capacity` rows split into `num_envs` ring segments.
    ///
    /// Errors: `InvalidValue` when `capacity / num_envs < 2` or `num_envs == 0`.
    pub fn new(capacity: usize, num_envs: usize, seed: u64) -> Result<Self> {
        Ok(ReplayCore {
            st: Storage::new(capacity, num_envs)?,
            rng: Rng::new(seed),
            per: None,
            her: None,
            her_goals: None,
            frame_stack: None,
            scratch: Scratch::default(),
        })
    }

    /// Store observations as stacks of `k` frames, one frame per row (see `frames`): the
    /// observation column's shape is `[k, *F]` (stack axis first, as gymnasium's
    /// `FrameStackObservation` gives it), a row holds its newest frame `F`, and samples
    /// rebuild the stacks. Must be called before the columns are defined.
    ///
    /// Errors: `InvalidValue` for `k < 1`; `Usage` once the columns are defined, on a HER
    /// buffer, or when called twice.
    pub fn enable_frame_stack(&mut self, k: usize) -> Result<()> {
        if k < 1 {
            return Err(CoreError::value(format!(
                "frame_stack must be >= 1 (or None for no stacking), got {k}"
            )));
        }
        if self.has_schema() || self.frame_stack.is_some() {
            return Err(CoreError::usage(
                "set frame_stack when the buffer is built, before its columns are defined",
            ));
        }
        if self.her.is_some() {
            return Err(CoreError::usage(
                "frame_stack cannot be combined with HER (goal observations are dicts)",
            ));
        }
        self.frame_stack = Some(k);
        Ok(())
    }

    /// The stack size of frame-stacked observations, `None` without stacking.
    pub fn frame_stack(&self) -> Option<usize> {
        self.frame_stack
    }

    /// Bytes of memory the buffer holds (row records, episode index, priorities, sampler
    /// scratch): what it costs resident once every row has been written.
    pub fn nbytes(&self) -> usize {
        self.st.nbytes() + self.per.as_ref().map_or(0, PerState::nbytes) + self.scratch.nbytes()
    }

    /// Turn on prioritized sampling (Schaul et al. 2016). Must be called before the first add.
    ///
    /// Errors: `InvalidValue` for parameters [`per::check_params`] refuses; `Usage` after the
    /// first add.
    pub fn enable_per(&mut self, alpha: f64, beta: f64, eps: f64) -> Result<()> {
        per::check_params(alpha, beta, eps)?;
        if self.her.as_ref().is_some_and(|cfg| cfg.finished_only) {
            return Err(CoreError::value(
                "finished_only HER sampling draws uniformly; it cannot be combined with \
                 prioritized replay",
            ));
        }
        if !self.is_empty() {
            return Err(CoreError::usage(
                "enable prioritized replay before the first add",
            ));
        }
        if self.st.rows as u64 > crate::index::ROW_MASK {
            return Err(CoreError::value(format!(
                "a prioritized buffer has at most 2^{} rows (its indices carry a generation), \
                 got {}",
                crate::index::ROW_BITS,
                self.st.rows
            )));
        }
        self.per = Some(PerState::new(self.st.rows, alpha, beta, eps)?);
        self.st.names_transitions = true;
        Ok(())
    }

    /// Turn on hindsight relabeling. Must be called before the first add.
    ///
    /// Errors: `InvalidValue` for parameters [`HerConfig::check`] refuses; `Usage` once the
    /// columns are defined.
    pub fn enable_her(&mut self, cfg: HerConfig) -> Result<()> {
        cfg.check()?;
        if self.has_schema() {
            return Err(CoreError::usage("enable HER before the first add"));
        }
        if self.frame_stack.is_some() {
            return Err(CoreError::usage(
                "frame_stack cannot be combined with HER (goal observations are dicts)",
            ));
        }
        if cfg.finished_only && self.per.is_some() {
            return Err(CoreError::value(
                "finished_only HER sampling draws uniformly; it cannot be combined with \
                 prioritized replay",
            ));
        }
        self.her = Some(cfg);
        Ok(())
    }

    pub fn num_envs(&self) -> usize {
        self.st.num_envs
    }
    pub fn segment_len(&self) -> usize {
        self.st.seg
    }
    /// Total rows (`num_envs * segment_len`).
    pub fn rows(&self) -> usize {
        self.st.rows
    }
    pub fn has_schema(&self) -> bool {
        self.st.schema.is_defined()
    }
    pub fn obs_is_dict(&self) -> bool {
        self.st.schema.obs_is_dict
    }
    pub fn per(&self) -> Option<&PerState> {
        self.per.as_ref()
    }
    pub fn her(&self) -> Option<&HerConfig> {
        self.her.as_ref()
    }

    /// Errors: `InvalidValue` for a negative or non-finite β; `Usage` without prioritized replay.
    pub fn set_beta(&mut self, beta: f64) -> Result<()> {
        match self.per.as_mut() {
            Some(p) => p.set_beta(beta),
            None => {
                per::check_beta(beta)?;
                Err(CoreError::usage(
                    "beta is only defined for prioritized buffers",
                ))
            }
        }
    }

    /// Number of sampleable transitions.
    pub fn len(&self) -> usize {
        self.st.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Column specs: observation columns, then `act` and the extras.
    pub fn schema(&self) -> (Vec<ColumnSpec>, Vec<ColumnSpec>) {
        self.st.schema.specs()
    }
    pub fn obs_columns(&self) -> &[Column] {
        &self.st.schema.obs
    }
    pub fn step_columns(&self) -> &[Column] {
        &self.st.schema.step
    }
    /// A zero-copy view of the column with public name `name`: `"obs"`, `"obs.<key>"`, `"act"`,
    /// an extra, `"rew"`, `"terminated"`, `"truncated"` or `"flags"`. Its memory is stable for
    /// the buffer's lifetime: the rows are allocated once and never reallocated.
    ///
    /// Errors: `Usage` before the columns are defined and for an unknown name.
    pub fn column_view(&self, name: &str) -> Result<ColumnView> {
        self.st.column_view(name)
    }

    /// The arrays of a sampled batch, in the order [`BatchOut::from_fields`] takes them.
    pub fn batch_fields(&self) -> impl Iterator<Item = BatchField<'_>> + Clone + '_ {
        self.st.schema.batch_fields(self.per.is_some())
    }

    /// Whether [`ReplayCore::sample`] needs a reward function (HER without a native reward).
    pub fn needs_reward_fn(&self) -> bool {
        self.her
            .as_ref()
            .is_some_and(|h| h.distance_threshold.is_none())
    }

    /// Declare the columns up front (from gymnasium spaces). `step[0]` must be `act`.
    ///
    /// Errors: `Usage` if a schema exists already; `InvalidValue` for bad specs ([`Schema::new`])
    /// or storage that cannot be allocated; `Shape`/`DType` for goal columns HER cannot use.
    pub fn declare(&mut self, obs: Vec<ColumnSpec>, step: Vec<ColumnSpec>) -> Result<()> {
        if self.has_schema() {
            return Err(CoreError::usage(
                "the buffer's columns are already defined (by from_spaces or the first add)",
            ));
        }
        let schema = Schema::with_frames(obs, step, self.frame_stack)?;
        let goals = match &self.her {
            None => None,
            Some(cfg) => {
                let (obs, _) = schema.specs();
                Some(cfg.goal_columns(&obs, schema.obs_is_dict)?)
            }
        };
        self.st.define(schema)?;
        self.her_goals = goals;
        Ok(())
    }

    /// Undo a declaration made by a first add whose inputs turned out invalid.
    pub(crate) fn forget_schema(&mut self) {
        self.st.forget_schema();
        self.her_goals = None;
    }

    /// Add one vector-env step: row i of every array belongs to env i, or, with `s.env_ids`,
    /// to env `env_ids[i]` (a partial step: any subset of the envs, in any order). Each env's
    /// rows, episode index, continuity check and priorities are exactly those that lock-step
    /// adds of the same per-env streams give. Validates everything before writing; on error
    /// nothing changes. The first call defines the columns.
    ///
    /// Errors: as [`validate::steps`], and as [`validate::env_ids`] for the ids.
    pub fn add(&mut self, s: &Steps<'_>) -> Result<AddOutcome> {
        if s.env_ids.is_none() && self.st.takes_usual() {
            if let Some(u) = validate::usual(&self.st.schema, s, Some(self.st.num_envs)) {
                return Ok(self.st.write_usual(&u, self.per.as_mut()));
            }
        }
        let Some(ids) = &s.env_ids else {
            let lead = usize::from(s.rew.ndim() == 1);
            let c = self.define_and_validate(s, lead, Some(self.st.num_envs))?;
            return Ok(self.st.write_rows(&c, |i| i, self.per.as_mut()));
        };
        let ids = validate::env_ids(ids, &s.rew, self.st.num_envs)?;
        let c = self.define_and_validate(s, 1, None)?;
        Ok(self.st.write_rows(&c, |i| ids[i], self.per.as_mut()))
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
        if s.env_ids.is_some() {
            return Err(CoreError::usage(
                "extend takes whole vector steps; add partial steps one at a time with \
                 add(..., env_ids=...)",
            ));
        }
        let n_envs = self.st.num_envs;
        if !s.rew.shape[0].is_multiple_of(n_envs) {
            return Err(CoreError::shape(format!(
                "extend: {} rows is not a whole number of steps of {n_envs} envs",
                s.rew.shape[0]
            )));
        }
        let c = self.define_and_validate(s, 1, None)?;
        Ok(self.st.write_rows(&c, |i| i % n_envs, self.per.as_mut()))
    }

    /// Infer the columns on the first call, then validate; a failed first call leaves the
    /// buffer without columns.
    fn define_and_validate<'a>(
        &mut self,
        s: &'a Steps<'a>,
        lead: usize,
        rows: Option<usize>,
    ) -> Result<Checked<'a>> {
        let fresh = !self.has_schema();
        if fresh {
            let (obs, step) = Schema::infer(s, lead)?;
            self.declare(obs, step)?;
        }
        let checked = validate::steps(&self.st.schema, s, rows)
            .and_then(|c| crate::frames::check_shift(&self.st.schema, &c).map(|_| c));
        if checked.is_err() && fresh {
            self.forget_schema();
        }
        checked
    }

    /// The checks [`ReplayCore::sample`] makes of its scalar arguments and the buffer's state,
    /// for a front end to make before it allocates the output arrays.
    ///
    /// Errors: `InvalidValue` for arguments [`validate::sample_args`] refuses and for a batch
    /// above [`ReplayCore::max_batch_rows`]; `Empty` when no transition is stored.
    pub fn check_sample_args(&self, b: usize, n_step: usize, gamma: f64) -> Result<()> {
        validate::sample_args(b, n_step, gamma)?;
        self.check_batch_rows("batch_size", b)?;
        if self.is_empty() {
            return Err(CoreError::empty(
                "cannot sample: the buffer holds no transition yet; add some steps first",
            ));
        }
        Ok(())
    }

    /// The checks [`ReplayCore::sample_at`] makes of `b` indices and its scalar arguments, for a
    /// front end to make before it allocates the output arrays.
    ///
    /// Errors: `InvalidValue` for no indices, then as [`ReplayCore::check_sample_args`].
    pub fn check_sample_at_args(&self, b: usize, n_step: usize, gamma: f64) -> Result<()> {
        if b == 0 {
            return Err(CoreError::value(
                "sample_at: indices is empty; pass at least one index",
            ));
        }
        self.check_sample_args(b, n_step, gamma)
    }

    /// [`ReplayCore::check_sample_at_args`] for a request of indices, else
    /// [`ReplayCore::check_sample_args`].
    pub fn check_sample_request(&self, r: &SampleRequest) -> Result<()> {
        match &r.at {
            Some(ix) => self.check_sample_at_args(ix.len(), r.n_step, r.gamma),
            None => self.check_sample_args(r.batch_size, r.n_step, r.gamma),
        }
    }

    /// [`ReplayCore::sample_at`] for a request of indices, else [`ReplayCore::sample`].
    pub fn sample_request(
        &mut self,
        r: &SampleRequest,
        out: &mut BatchOut<'_>,
        reward_fn: Option<&mut RewardFn<'_>>,
    ) -> Result<()> {
        let (n, gamma) = (r.n_step, r.gamma);
        match &r.at {
            Some(ix) => self.sample_at(ix, r.goals_at.as_deref(), n, gamma, out, reward_fn),
            None => self.sample(r.batch_size, n, gamma, out, reward_fn),
        }
    }

    /// The most rows one batch of this buffer may hold: its rows, or 2^16 for a smaller
    /// buffer. Sampling draws with replacement, so a larger batch only repeats rows; the
    /// bound stops a mistyped batch size before its output arrays are allocated.
    pub fn max_batch_rows(&self) -> usize {
        self.st.rows.max(1 << 16)
    }

    /// Errors: `InvalidValue` when `rows` (of a batch, `what` names it) exceeds
    /// [`ReplayCore::max_batch_rows`].
    pub(crate) fn check_batch_rows(&self, what: &str, rows: usize) -> Result<()> {
        let most = self.max_batch_rows();
        if rows > most {
            return Err(CoreError::value(format!(
                "{what} = {rows} rows is more than this buffer can return in one batch: at most \
                 {most} (its {} rows, or 65536 for a smaller buffer; sampling draws with \
                 replacement, so a larger batch only repeats rows)",
                self.st.rows
            )));
        }
        Ok(())
    }

    /// Sample `b` transitions into `out` (see `BatchOut`). For HER buffers with a user reward,
    /// `reward_fn` is called once with every relabeled (achieved, desired) pair.
    ///
    /// Errors: `InvalidValue` (batch_size, n_step, gamma), `Empty`, `Shape` (out arrays),
    /// `Usage` (HER without a reward), or the reward function's error. On error the buffer,
    /// its RNG included, is unchanged.
    pub fn sample(
        &mut self,
        b: usize,
        n_step: usize,
        gamma: f64,
        out: &mut BatchOut<'_>,
        reward_fn: Option<&mut RewardFn<'_>>,
    ) -> Result<()> {
        let n_step = self.check_sample_call(b, n_step, gamma, out, reward_fn.is_some())?;
        let rng_before = self.rng.clone();
        let res = self.sample_inner(b, n_step, gamma, out, reward_fn);
        if res.is_err() {
            self.rng = rng_before;
        }
        res
    }

    /// The checks of a sample call, before anything is drawn or written; returns the n_step to
    /// use: a window of m steps spans m + 1 rows of one segment, so m < seg, and any larger
    /// n_step gives the same windows (and the prefetch arithmetic stays small).
    fn check_sample_call(
        &self,
        b: usize,
        n_step: usize,
        gamma: f64,
        out: &BatchOut<'_>,
        has_reward_fn: bool,
    ) -> Result<usize> {
        self.check_sample_args(b, n_step, gamma)?;
        out.check(&self.st.schema, b, self.per.is_some())?;
        if self.needs_reward_fn() && !has_reward_fn {
            return Err(CoreError::usage(
                "HER needs a reward: pass compute_reward=... or distance_threshold=...",
            ));
        }
        Ok(n_step.min(self.st.seg))
    }

    /// Draw (uniform or prioritized), plan the n-step windows, pick HER goals, gather, relabel,
    /// weigh. The plain uniform case runs fused in one pass.
    fn sample_inner(
        &mut self,
        b: usize,
        n_step: usize,
        gamma: f64,
        out: &mut BatchOut<'_>,
        reward_fn: Option<&mut RewardFn<'_>>,
    ) -> Result<()> {
        let st = &self.st;
        let rng = &mut self.rng;
        if self.per.is_none() && self.her.is_none() {
            st.sample_fused::<false>(rng, &mut self.scratch.pairs, b, n_step, gamma, out);
            return Ok(());
        }
        self.scratch.plans(b);
        // rows from each drawn row on that the draw already brought into cache
        let fetched = match (&self.per, &self.her) {
            (Some(per), _) => {
                sampling::draw_prioritized(per, st, rng, &mut self.scratch, b);
                st.draw_fetched_rows()
            }
            (None, Some(cfg)) if cfg.finished_only => {
                st.draw_finished(rng, self.scratch.plans(b))?;
                0
            }
            (None, _) => {
                st.draw_uniform(rng, self.scratch.plans(b));
                st.draw_fetched_rows()
            }
        };
        let plans = self.scratch.plans(b);
        st.plan_windows(plans, n_step, fetched, self.her.is_some())?;
        if let Some(cfg) = &self.her {
            her::plan_goals(cfg, st, rng, plans);
        }
        self.finish_batch(gamma, out, reward_fn)
    }

    /// The benchmarks' floor, not part of the API: `b` alive rows drawn with a generator seeded
    /// by `seed` (the buffer's own is untouched) and copied into `out` without any of
    /// `sample`'s semantics, each with the rows of an `n_step` window read as they come (see
    /// `Storage::floor_gather`). The benchmark suite times it next to `sample(b, n_step)` to
    /// show how far the sampler is from a bare gather of the same bytes.
    ///
    /// Errors: `InvalidValue` for `b` or `n_step` [`validate::sample_args`] refuses; `Empty` for
    /// an empty buffer; `Shape` (out arrays).
    #[doc(hidden)]
    pub fn floor_gather(
        &mut self,
        b: usize,
        n_step: usize,
        seed: u64,
        out: &mut BatchOut<'_>,
    ) -> Result<()> {
        self.check_sample_args(b, n_step, 0.0)?;
        out.check(&self.st.schema, b, self.per.is_some())?;
        let rows = &mut self.scratch.pairs;
        // (as in `sample`: no window is longer than a segment)
        let n_step = n_step.min(self.st.seg);
        self.st.floor_gather(&mut Rng::new(seed), rows, n_step, out);
        Ok(())
    }

    /// The batch of the transitions at rows `idx` (each must hold one), as [`ReplayCore::sample`]
    /// would return it had it drawn them: n-step windows, gather, and for HER buffers the goal
    /// of sample i replaced by the achieved goal after the transition at row `goal_idx[i]` (a
    /// transition of the same episode; −1 keeps the stored goal), its reward recomputed; IS
    /// weights for prioritized buffers. Uses no randomness. This is how a peer library's draws
    /// are replayed on this buffer (the draw-injection tests) and how chosen transitions are
    /// re-read.
    ///
    /// Errors: `InvalidValue` (an empty `idx`, n_step, gamma, a row that holds no transition, a
    /// goal row of another episode, `goal_idx` of another length), `Usage` (goals on a buffer
    /// without HER, HER without a reward), `Empty`, `Shape` (out arrays), or the reward
    /// function's error. The buffer is never changed.
    pub fn sample_at(
        &mut self,
        idx: &[i64],
        goal_idx: Option<&[i64]>,
        n_step: usize,
        gamma: f64,
        out: &mut BatchOut<'_>,
        reward_fn: Option<&mut RewardFn<'_>>,
    ) -> Result<()> {
        let b = idx.len();
        self.check_sample_at_args(b, n_step, gamma)?;
        let n_step = self.check_sample_call(b, n_step, gamma, out, reward_fn.is_some())?;
        if let Some(g) = goal_idx {
            if self.her.is_none() {
                return Err(CoreError::usage(
                    "goal indices need a hindsight (HER) buffer",
                ));
            }
            if g.len() != b {
                return Err(CoreError::value(format!(
                    "goal_indices has {} entries for {b} indices; pass one per index (-1 keeps \
                     the stored goal)",
                    g.len()
                )));
            }
        }
        let st = &self.st;
        let plans = self.scratch.plans(b);
        st.plans_at(idx, plans)?;
        st.plan_windows(plans, n_step, 0, self.her.is_some())?;
        if let Some(g) = goal_idx {
            her::set_goals(st, plans, g)?;
        }
        self.finish_batch(gamma, out, reward_fn)
    }

    /// Gather the planned batch, relabel it (HER) and weigh it (PER).
    fn finish_batch(
        &mut self,
        gamma: f64,
        out: &mut BatchOut<'_>,
        reward_fn: Option<&mut RewardFn<'_>>,
    ) -> Result<()> {
        let st = &self.st;
        let b = out.rew.len();
        let plans = &self.scratch.plans[..b];
        st.gather(plans, &mut self.scratch.pairs, gamma, out);
        if let (Some(cfg), Some(goals)) = (&self.her, self.her_goals) {
            her::relabel(cfg, goals, st, plans, gamma, out, reward_fn)?;
        }
        if let (Some(per), Some(w)) = (&self.per, out.weights.as_deref_mut()) {
            per.weights(plans.iter().map(|pl| pl.p), w);
        }
        if self.per.is_some() {
            // a prioritized buffer's indices name the transitions drawn (see `index`)
            for (x, pl) in out.indices.iter_mut().zip(plans) {
                *x = st.index_of_transition(pl.p);
            }
        }
        Ok(())
    }

    /// The plans of the last sample call (for tests and diagnostics).
    pub fn last_plan(&self, b: usize) -> &[Plan] {
        &self.scratch.plans[..b.min(self.scratch.plans.len())]
    }

    /// Set `(p + eps)^alpha` as the priority of the transition each index names.
    ///
    /// Which transition an index names (see [`crate::index`]): the indices a prioritized
    /// buffer hands out (`sample`, `sample_at`, `sample_sequences`' start indices, `add`) carry
    /// the generation of the transition they were handed out for, so an update lands only
    /// while the row still holds that transition. A stale index — its row overwritten by the
    /// ring since — is skipped, as are indices whose row holds no
    /// transition now (a terminal row, the open row of a running episode, a row never
    /// written); the number skipped is returned. A bare row index (below 2^40) names whatever
    /// its row holds now.
    ///
    /// All inputs are validated before any write, for skipped indices too, and any failure
    /// fails the whole call: `Shape` for a length mismatch, `InvalidValue` for a negative index
    /// or one whose row is out of `[0, rows)`, a negative, NaN or infinite priority, or one
    /// whose `(p + eps)^alpha` exceeds [`per::MAX_PRIORITY`]; `Usage` on a buffer without
    /// prioritized replay.
    pub fn update_priorities(&mut self, idx: &[i64], prio: &[f64]) -> Result<usize> {
        let st = &self.st;
        let Some(per) = self.per.as_mut() else {
            return Err(CoreError::usage(
                "update_priorities needs a prioritized buffer",
            ));
        };
        per.update(
            idx,
            prio,
            st.rows,
            |k, r| st.names_transition_now(idx[k], r),
            |r| st.prefetch_flag(r),
        )
    }

    /// `(total priority mass, smallest positive priority, priority given to new transitions)`
    /// in O(1), or `None` for a buffer without prioritized replay. A sharded buffer samples each
    /// shard in proportion to its mass and rescales weights with the global minimum.
    pub fn priority_stats(&self) -> Option<(f64, f64, f64)> {
        self.per.as_ref().map(PerState::stats)
    }

    /// Current priorities `(p + eps)^alpha` of the transitions the indices name (0 for rows
    /// that hold no transition and for stale indices).
    ///
    /// Errors: `Usage` without prioritized replay; `InvalidValue` for an index out of range.
    pub fn priorities(&self, idx: &[i64]) -> Result<Vec<f64>> {
        let Some(per) = self.per.as_ref() else {
            return Err(CoreError::usage(
                "priorities are only defined for prioritized buffers",
            ));
        };
        let resolved = idx
            .iter()
            .map(|&i| self.st.resolve(i))
            .collect::<Result<Vec<_>>>()?;
        Ok(resolved
            .into_iter()
            .map(|(r, current)| if current { per.get(r) } else { 0.0 })
            .collect())
    }

    /// The row of the previous step of the same episode; the episode's first surviving row maps
    /// to itself. Errors: `InvalidValue` for a row out of range or never written.
    pub fn prev(&self, idx: &[i64]) -> Result<Vec<i64>> {
        self.st.prev(idx)
    }
    /// The row of the next step of the same episode; the last transition of an episode (and
    /// the terminal row) map to themselves. Errors: as [`ReplayCore::prev`].
    pub fn next(&self, idx: &[i64]) -> Result<Vec<i64>> {
        self.st.next(idx)
    }
    /// Per index: (first surviving row of its episode, row holding the episode's final — or, for
    /// a running episode, newest — observation, number of surviving transitions).
    /// Errors: as [`ReplayCore::prev`].
    pub fn episode_bounds(&self, idx: &[i64]) -> Result<(Vec<i64>, Vec<i64>, Vec<i64>)> {
        self.st.episode_bounds(idx)
    }
    /// Rows of the newest transition of every env whose episode is still running.
    pub fn unfinished_index(&self) -> Vec<i64> {
        self.st.unfinished_index()
    }
    /// Per env: the row of its newest transition, or -1 if it holds none.
    pub fn last_index(&self) -> Vec<i64> {
        self.st.last_index()
    }
    /// The row of each index: a bare row is its own; an index naming a transition (see
    /// [`crate::index`]) gives its row while the row still holds that transition.
    ///
    /// Errors: `InvalidValue` for an index out of range or a stale one.
    pub fn rows_of(&self, idx: &[i64]) -> Result<Vec<i64>> {
        idx.iter()
            .map(|&i| self.st.current_row(i).map(|r| r as i64))
            .collect()
    }
    /// Whether each row currently holds a sampleable transition.
    /// Errors: `InvalidValue` for a row out of range.
    pub fn is_transition(&self, idx: &[i64]) -> Result<Vec<bool>> {
        self.st.is_transition(idx)
    }

    /// Forget all data (columns keep their memory and schema; the RNG stream continues).
    pub fn clear(&mut self) {
        self.st.clear();
        if let Some(per) = self.per.as_mut() {
            per.reset();
        }
    }
}
