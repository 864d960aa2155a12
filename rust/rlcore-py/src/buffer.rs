//! `RawBuffer`, the Python class over the core's `ReplayCore`: every method converts its
//! arguments, takes the lock, makes one core call (with the GIL released for large gathers)
//! and converts the result back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

use numpy::PyUntypedArray;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use rlcore_core::{
    AddOutcome, BatchOut, CoreError, GoalStrategy, HerConfig, ReplayCore, SeqRequest, StatePart,
    Steps,
};

use crate::convert::{self, bytes_mut, vec_array, Given, SpecTuple, What};
use crate::errors::Result;

/// Gathers larger than this many bytes release the GIL.
pub const DETACH_BYTES: usize = 1 << 20;

/// Result of one `add`: the rows written and the episodes that ended.
#[pyclass(module = "rlcore._core", frozen)]
pub struct AddResult {
    out: AddOutcome,
}

#[pymethods]
impl AddResult {
    /// int64 [N]: row of each env's transition, -1 where the env was masked.
    #[getter]
    fn indices<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        vec_array(py, self.out.rows.to_vec())
    }
    /// int64 [D]: envs whose episode ended with this step.
    #[getter]
    fn done_envs<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        vec_array(py, self.out.done.iter().map(|d| d.env as i64).collect())
    }
    /// float64 [D]: undiscounted returns of those episodes.
    #[getter]
    fn episode_returns<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        vec_array(py, self.out.done.iter().map(|d| d.ret).collect())
    }
    /// int64 [D]: lengths (steps) of those episodes.
    #[getter]
    fn episode_lengths<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        vec_array(py, self.out.done.iter().map(|d| d.len as i64).collect())
    }
    fn __repr__(&self) -> String {
        format!(
            "AddResult(indices={:?}, done_envs={:?}, episode_returns={:?}, episode_lengths={:?})",
            self.out.rows,
            self.out.done.iter().map(|d| d.env).collect::<Vec<_>>(),
            self.out.done.iter().map(|d| d.ret).collect::<Vec<_>>(),
            self.out.done.iter().map(|d| d.len).collect::<Vec<_>>()
        )
    }
}

/// The Rust replay core. Use `rlcore.ReplayBuffer`, `rlcore.HERReplayBuffer` or
/// `rlcore.PrioritizedReplayBuffer`, which subclass it.
#[pyclass(module = "rlcore._core", subclass, frozen)]
pub struct RawBuffer {
    /// Locked by every call. Large samples run with the GIL released, so another Python thread
    /// (e.g. a collector adding while a prefetch thread samples) waits for the lock — with the
    /// GIL released too, so the two never deadlock.
    core: Mutex<ReplayCore>,
    /// Id of the thread holding `core` (0: none), to refuse re-entrant calls instead of
    /// deadlocking (a `compute_reward` that calls back into its own buffer).
    owner: AtomicU64,
}

/// The calling thread's id for `owner`: its Python thread state, unique among live threads
/// (the caller is attached to the interpreter; a read of the runtime's current thread state,
/// where a Rust thread-local costs a `__tls_get_addr` call in a dynamically loaded module).
fn thread_id(_py: Python<'_>) -> u64 {
    // SAFETY: attached to the interpreter (`_py`), so there is a current thread state.
    unsafe { pyo3::ffi::PyThreadState_Get() as usize as u64 }
}

/// The locked core; clears the owner on drop.
struct Guard<'a> {
    g: MutexGuard<'a, ReplayCore>,
    owner: &'a AtomicU64,
}

impl std::ops::Deref for Guard<'_> {
    type Target = ReplayCore;
    fn deref(&self) -> &ReplayCore {
        &self.g
    }
}
impl std::ops::DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut ReplayCore {
        &mut self.g
    }
}
impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.owner.store(0, Ordering::Release);
    }
}

impl RawBuffer {
    /// Lock the core. A thread that has to wait releases the GIL while it waits, so a holder
    /// that runs with the GIL released (a large sample) can always take the GIL back.
    fn lock<'a>(&'a self, py: Python<'_>) -> Result<Guard<'a>> {
        let me = thread_id(py);
        let g = match self.core.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                if self.owner.load(Ordering::Acquire) == me {
                    return Err(CoreError::usage(
                        "the buffer is already in use by this thread (a compute_reward that \
                         calls back into its own buffer?)",
                    )
                    .into());
                }
                // wait with the GIL released (a guard cannot cross back), then take it with the GIL
                loop {
                    py.detach(|| drop(self.core.lock()));
                    match self.core.try_lock() {
                        Ok(g) => break g,
                        Err(TryLockError::Poisoned(p)) => break p.into_inner(),
                        Err(TryLockError::WouldBlock) => continue,
                    }
                }
            }
        };
        self.owner.store(me, Ordering::Release);
        Ok(Guard {
            g,
            owner: &self.owner,
        })
    }

    /// One add or extend call: convert, lock, let the core check and write.
    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        py: Python<'_>,
        obs: &Bound<'_, PyAny>,
        act: &Bound<'_, PyAny>,
        rew: &Bound<'_, PyAny>,
        terminated: &Bound<'_, PyAny>,
        truncated: &Bound<'_, PyAny>,
        obs_next: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
        env_ids: Option<&Bound<'_, PyAny>>,
        extras: Option<&Bound<'_, PyDict>>,
        extend: bool,
    ) -> Result<AddResult> {
        let absent = |x: Option<&Bound<'_, PyAny>>| x.is_none_or(|x| x.is_none());
        // the lock first: waiting for it releases the GIL, and another thread may then change
        // or free the arrays, so their headers are read only once it is held
        let mut core = self.lock(py)?;
        if absent(mask) && absent(env_ids) && extras.is_none() {
            let mut scalars = [[0u8; 8]; 3];
            let args = [obs, act, rew, terminated, truncated, obs_next];
            if let Some(steps) = convert::usual_steps(args, &mut scalars) {
                let out = if extend {
                    core.extend(&steps)?
                } else {
                    core.add(&steps)?
                };
                return Ok(AddResult { out });
            }
        }
        let (o, on) = (
            convert::obs(obs, "obs")?,
            convert::obs(obs_next, "obs_next")?,
        );
        let (a, r) = (
            convert::array(act, What::Arg("act"))?,
            convert::array(rew, What::Arg("rew"))?,
        );
        let te = convert::array(terminated, What::Arg("terminated"))?;
        let tr = convert::array(truncated, What::Arg("truncated"))?;
        let m = convert::opt_array(mask, "mask")?;
        let ids = convert::opt_array(env_ids, "env_ids")?;
        let ex = convert::extras(extras)?;
        let (o, on, ex) = (o.arrays()?, on.arrays()?, ex.arrays()?);
        let steps = Steps {
            obs: o.obs(),
            act: a.array(),
            rew: r.array(),
            terminated: te.array(),
            truncated: tr.array(),
            obs_next: on.obs(),
            extras: &ex,
            mask: m.as_ref().map(|m| m.array()),
            env_ids: ids.as_ref().map(|i| i.array()),
        };
        let out = if extend {
            core.extend(&steps)?
        } else {
            core.add(&steps)?
        };
        Ok(AddResult { out })
    }

    /// Apply a core query to an index array.
    fn per_index<'py, T: numpy::Element>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
        f: impl FnOnce(&ReplayCore, &[i64]) -> rlcore_core::Result<Vec<T>>,
    ) -> Result<Bound<'py, PyAny>> {
        let idx = convert::indices(indices, "indices")?;
        let core = self.lock(py)?;
        let v = f(&core, &idx)?;
        Ok(vec_array(py, v))
    }
}

#[pymethods]
impl RawBuffer {
    #[new]
    #[pyo3(signature = (capacity, *, num_envs=Given(None), seed=None, prioritized=false,
                        alpha=Given(None), beta=Given(None), eps=Given(None), her_strategy=None,
                        future_k=Given(None), distance_threshold=None,
                        achieved_goal_key="achieved_goal", desired_goal_key="desired_goal",
                        finished_only=false, exact_ratio=false, frame_stack=None),
           text_signature = "(capacity, *, num_envs=1, seed=None, prioritized=False, alpha=0.6, \
                             beta=0.4, eps=1e-06, her_strategy=None, future_k=4.0, \
                             distance_threshold=None, achieved_goal_key='achieved_goal', \
                             desired_goal_key='desired_goal', finished_only=False, \
                             exact_ratio=False, frame_stack=None)")]
    #[allow(clippy::too_many_arguments)]
    fn new(
        capacity: &Bound<'_, PyAny>,
        num_envs: Given<'_>,
        seed: Option<&Bound<'_, PyAny>>,
        prioritized: bool,
        alpha: Given<'_>,
        beta: Given<'_>,
        eps: Given<'_>,
        her_strategy: Option<&str>,
        future_k: Given<'_>,
        distance_threshold: Option<&Bound<'_, PyAny>>,
        achieved_goal_key: &str,
        desired_goal_key: &str,
        finished_only: bool,
        exact_ratio: bool,
        frame_stack: Option<&Bound<'_, PyAny>>,
    ) -> Result<Self> {
        let capacity = convert::count(capacity, "capacity")?;
        let num_envs = num_envs.count("num_envs", 1)?;
        let seed = convert::seed(seed)?;
        let (alpha, beta, eps) = (
            alpha.float("alpha", 0.6)?,
            beta.float("beta", 0.4)?,
            eps.float("eps", 1e-6)?,
        );
        let future_k = future_k.float("future_k", 4.0)?;
        let distance_threshold = convert::opt_float(distance_threshold, "distance_threshold")?;
        let frame_stack = frame_stack
            .filter(|k| !k.is_none())
            .map(|k| convert::count(k, "frame_stack"))
            .transpose()?;
        let mut core = ReplayCore::new(capacity, num_envs, seed)?;
        if let Some(k) = frame_stack {
            core.enable_frame_stack(k)?;
        }
        if prioritized {
            core.enable_per(alpha, beta, eps)?;
        }
        if let Some(s) = her_strategy {
            core.enable_her(HerConfig {
                strategy: GoalStrategy::parse(s)?,
                future_k,
                distance_threshold,
                achieved_goal: achieved_goal_key.to_string(),
                desired_goal: desired_goal_key.to_string(),
                finished_only,
                exact_ratio,
            })?;
        }
        Ok(RawBuffer {
            core: Mutex::new(core),
            owner: AtomicU64::new(0),
        })
    }

    /// Add one vector-env step of N = num_envs envs: row i of every array belongs to env i;
    /// with env_ids ([K] integers, distinct, each in [0, N)) row i belongs to env env_ids[i]
    /// (a partial step: K <= N envs in any order, e.g. EnvPool's async recv), and every array
    /// has K rows instead of N.
    ///
    /// obs, obs_next: [N, *O] arrays (or dicts of them for dict observations); obs_next holds
    /// the true next observation (the final one where the episode ended). act: [N, *A].
    /// rew: [N] finite rewards, stored as float32. terminated, truncated: [N] bool or integer
    /// flags (nonzero means set). mask: [N] bool, False where the env's step is not a
    /// transition (gymnasium's NEXT_STEP autoreset). **extras: [N, *shape] extra columns.
    /// A single-env buffer also takes arrays without the leading N. The first add (or
    /// from_spaces) fixes the columns; later adds must match them.
    ///
    /// Returns an AddResult: indices [N] (or [K]) rows written (-1 where masked), and done_envs,
    /// episode_returns, episode_lengths of the episodes that ended.
    ///
    /// Raises ShapeError (shapes), DTypeError (dtypes or values a column cannot hold),
    /// InvalidValueError (non-finite rewards, env ids out of range or repeated), ApiUsageError
    /// (missing or unknown extras, re-entrant use). Everything is validated before a byte is
    /// written.
    #[pyo3(signature = (obs, act, rew, terminated, truncated, obs_next, *, mask=None, env_ids=None, **extras))]
    #[allow(clippy::too_many_arguments)]
    fn add(
        &self,
        py: Python<'_>,
        obs: &Bound<'_, PyAny>,
        act: &Bound<'_, PyAny>,
        rew: &Bound<'_, PyAny>,
        terminated: &Bound<'_, PyAny>,
        truncated: &Bound<'_, PyAny>,
        obs_next: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
        env_ids: Option<&Bound<'_, PyAny>>,
        extras: Option<&Bound<'_, PyDict>>,
    ) -> Result<AddResult> {
        self.write(
            py, obs, act, rew, terminated, truncated, obs_next, mask, env_ids, extras, false,
        )
    }

    /// Add T consecutive steps (offline data); see `ReplayBuffer.extend` and `from_arrays`.
    /// `extras` is a dict (not keyword arguments), so that every name, reserved ones included,
    /// reaches the core's declaration check.
    #[pyo3(signature = (obs, act, rew, terminated, truncated, obs_next, *, mask=None, extras=None))]
    #[allow(clippy::too_many_arguments)]
    fn _extend(
        &self,
        py: Python<'_>,
        obs: &Bound<'_, PyAny>,
        act: &Bound<'_, PyAny>,
        rew: &Bound<'_, PyAny>,
        terminated: &Bound<'_, PyAny>,
        truncated: &Bound<'_, PyAny>,
        obs_next: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
        extras: Option<&Bound<'_, PyDict>>,
    ) -> Result<AddResult> {
        self.write(
            py, obs, act, rew, terminated, truncated, obs_next, mask, None, extras, true,
        )
    }

    /// Sample into fresh (or `out`) arrays; returns the fields of a TransitionBatch as a tuple.
    /// With `indices` (and for HER `goal_indices`) the batch of those rows instead of a draw
    /// (`batch_size` must then be their count; see `ReplayCore::sample_at`).
    #[pyo3(signature = (batch_size, n_step, gamma, out, compute_reward, indices=None, goal_indices=None))]
    #[allow(clippy::too_many_arguments)]
    fn _sample<'py>(
        &self,
        py: Python<'py>,
        batch_size: &Bound<'py, PyAny>,
        n_step: &Bound<'py, PyAny>,
        gamma: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
        compute_reward: Option<&Bound<'py, PyAny>>,
        indices: Option<&Bound<'py, PyAny>>,
        goal_indices: Option<&Bound<'py, PyAny>>,
    ) -> Result<Bound<'py, PyTuple>> {
        let at = indices
            .map(|a| convert::indices(a, "indices"))
            .transpose()?;
        let goals_at = goal_indices
            .map(|a| convert::indices(a, "goal_indices"))
            .transpose()?;
        let b = convert::count(batch_size, "batch_size")?;
        let n = convert::count(n_step, "n_step")?;
        let gamma = convert::float(gamma, "gamma")?;
        let mut guard = self.lock(py)?;
        let core = &mut *guard;
        // the core's checks, before any output array is allocated
        match &at {
            Some(ix) => core.check_sample_at_args(ix.len(), n, gamma)?,
            None => core.check_sample_args(b, n, gamma)?,
        }
        let arrays = match out {
            None => convert::fresh_batch(py, core.batch_fields(), b)?,
            Some(o) => convert::out_batch(o, core.batch_fields(), b)?,
        };
        // SAFETY: every array is C-contiguous, writable, alive until the end of this call and
        // distinct (fresh, or `out` arrays the core checked for shared memory).
        let slices = arrays.iter().map(|a| unsafe { bytes_mut(a) });
        let mut bo = BatchOut::from_fields(core.batch_fields().zip(slices))?;
        match compute_reward {
            Some(f) if core.needs_reward_fn() => {
                let mut raised: Option<PyErr> = None;
                let mut call = |g: &rlcore_core::Goals<'_>| -> rlcore_core::Result<Vec<f32>> {
                    convert::call_reward(py, f, g).map_err(|e| match e {
                        crate::errors::Error::Core(e) => e,
                        crate::errors::Error::Py(e) => {
                            let msg = e.to_string();
                            raised = Some(e);
                            CoreError::usage(msg)
                        }
                    })
                };
                let r = match &at {
                    Some(ix) => {
                        core.sample_at(ix, goals_at.as_deref(), n, gamma, &mut bo, Some(&mut call))
                    }
                    None => core.sample(b, n, gamma, &mut bo, Some(&mut call)),
                };
                if let Some(e) = raised {
                    return Err(e.into());
                }
                r?;
            }
            _ => {
                let bytes = b * core.batch_fields().map(|f| f.item_bytes()).sum::<usize>();
                let mut run = || match &at {
                    Some(ix) => core.sample_at(ix, goals_at.as_deref(), n, gamma, &mut bo, None),
                    None => core.sample(b, n, gamma, &mut bo, None),
                };
                if bytes > DETACH_BYTES {
                    py.detach(run)?;
                } else {
                    run()?;
                }
            }
        }
        drop(bo);
        Ok(convert::batch_tuple(py, core.batch_fields(), arrays)?)
    }

    /// Benchmark only (not API): the floor of `sample(batch_size, n_step=n_step)`, i.e. the same
    /// output arrays filled by a bare gather of uniformly drawn alive rows and the rows of their
    /// windows (no validity, window cut or discount work; see `ReplayCore::floor_gather`); the
    /// fields of a TransitionBatch as a tuple.
    #[pyo3(signature = (batch_size, seed, n_step=1))]
    fn _floor_gather<'py>(
        &self,
        py: Python<'py>,
        batch_size: &Bound<'py, PyAny>,
        seed: u64,
        n_step: usize,
    ) -> Result<Bound<'py, PyTuple>> {
        let b = convert::count(batch_size, "batch_size")?;
        let mut core = self.lock(py)?;
        core.check_sample_args(b, n_step, 0.0)?;
        let arrays = convert::fresh_batch(py, core.batch_fields(), b)?;
        // SAFETY: fresh arrays: C-contiguous, writable, distinct, alive until the end of this call.
        let slices = arrays.iter().map(|a| unsafe { bytes_mut(a) });
        let mut bo = BatchOut::from_fields(core.batch_fields().zip(slices))?;
        core.floor_gather(b, n_step, seed, &mut bo)?;
        drop(bo);
        Ok(convert::batch_tuple(py, core.batch_fields(), arrays)?)
    }

    /// Sample sequences into fresh (or `out`) arrays; returns the fields of a SequenceBatch as
    /// a tuple (see `ReplayCore::sample_sequences` and `ReplayBuffer.sample_sequences`).
    #[pyo3(signature = (batch_size, seq_len, burn_in, n_step, gamma, pad, state, out, compute_reward))]
    #[allow(clippy::too_many_arguments)]
    fn _sample_sequences<'py>(
        &self,
        py: Python<'py>,
        batch_size: &Bound<'py, PyAny>,
        seq_len: &Bound<'py, PyAny>,
        burn_in: &Bound<'py, PyAny>,
        n_step: &Bound<'py, PyAny>,
        gamma: &Bound<'py, PyAny>,
        pad: bool,
        state: Vec<String>,
        out: Option<&Bound<'py, PyAny>>,
        compute_reward: Option<&Bound<'py, PyAny>>,
    ) -> Result<Bound<'py, PyTuple>> {
        let req = SeqRequest {
            batch_size: convert::count(batch_size, "batch_size")?,
            seq_len: convert::count(seq_len, "seq_len")?,
            burn_in: convert::count(burn_in, "burn_in")?,
            n_step: convert::count(n_step, "n_step")?,
            gamma: convert::float(gamma, "gamma")?,
            pad,
            state,
        };
        let mut guard = self.lock(py)?;
        let core = &mut *guard;
        let fields = core.sequence_fields(&req)?;
        let arrays = match out {
            None => crate::sequences::fresh_arrays(py, &fields)?,
            Some(o) => crate::sequences::out_arrays(o, &fields)?,
        };
        // SAFETY: every array is C-contiguous, writable, alive until the end of this call and
        // distinct (fresh, or `out` arrays the core checked for shared memory).
        let slices = arrays.iter().map(|a| unsafe { bytes_mut(a) }).collect();
        let f = compute_reward.filter(|_| core.needs_reward_fn());
        let bytes: usize = fields.iter().map(|f| f.bytes()).sum();
        if f.is_none() && bytes > DETACH_BYTES {
            py.detach(|| core.sample_sequences(&req, slices, None))?;
        } else {
            crate::sequences::with_reward(py, f, |rf| core.sample_sequences(&req, slices, rf))?;
        }
        Ok(crate::sequences::batch_tuple(py, &fields, arrays)?)
    }

    /// `(count, mass)` of the eligible starts of sequences of `burn_in + seq_len` steps: their
    /// number, and the sum of their priorities (their number without prioritized replay).
    /// O(stored episodes). Raises InvalidValueError (seq_len < 1), DTypeError (non-integers).
    #[pyo3(signature = (seq_len, *, burn_in, pad))]
    fn sequence_start_mass(
        &self,
        py: Python<'_>,
        seq_len: &Bound<'_, PyAny>,
        burn_in: &Bound<'_, PyAny>,
        pad: bool,
    ) -> Result<(u64, f64)> {
        let seq_len = convert::count(seq_len, "seq_len")?;
        let burn_in = convert::count(burn_in, "burn_in")?;
        Ok(self.lock(py)?.sequence_start_mass(seq_len, burn_in, pad)?)
    }

    /// Set each sequence's priority from its TD errors with R2D2's mixture
    /// `eta * max|delta| + (1 - eta) * mean|delta|` over its valid steps, then
    /// `(p + eps) ** alpha` at its start row; returns how many start rows were skipped (see
    /// `update_priorities`).
    ///
    /// start_indices: int [B] (`SequenceBatch.start_indices`). td_errors: float [B, T].
    /// mask: bool [B, T] valid steps (None: all). eta: in [0, 1].
    ///
    /// Raises ShapeError (shapes), DTypeError (non-integer indices, bool TD errors, a float
    /// mask), InvalidValueError (a non-finite TD error, eta outside [0, 1], a row of mask
    /// without a valid step, an index outside [0, capacity)), ApiUsageError (not a prioritized
    /// buffer). Nothing is written unless the whole call is valid.
    #[pyo3(signature = (start_indices, td_errors, *, mask=None, eta=Given(None)),
           text_signature = "(self, start_indices, td_errors, *, mask=None, eta=0.9)")]
    fn update_sequence_priorities(
        &self,
        py: Python<'_>,
        start_indices: &Bound<'_, PyAny>,
        td_errors: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
        eta: Given<'_>,
    ) -> Result<usize> {
        let idx = convert::indices(start_indices, "start_indices")?;
        let td = convert::array(td_errors, What::Arg("td_errors"))?;
        let m = convert::opt_array(mask, "mask")?;
        let eta = eta.float("eta", 0.9)?;
        let mut core = self.lock(py)?;
        Ok(core.update_sequence_priorities(
            &idx,
            &td.array(),
            m.as_ref().map(|m| m.array()).as_ref(),
            eta,
        )?)
    }

    fn __len__(&self, py: Python<'_>) -> Result<usize> {
        Ok(self.lock(py)?.len())
    }

    /// Total rows of storage (`num_envs * segment_len`).
    #[getter]
    fn capacity(&self, py: Python<'_>) -> Result<usize> {
        Ok(self.lock(py)?.rows())
    }
    #[getter]
    fn num_envs(&self, py: Python<'_>) -> Result<usize> {
        Ok(self.lock(py)?.num_envs())
    }
    /// Rows per env segment (`capacity // num_envs`).
    #[getter]
    fn segment_len(&self, py: Python<'_>) -> Result<usize> {
        Ok(self.lock(py)?.segment_len())
    }
    /// k of a buffer that stores observations as stacks of k frames (one frame per row), or
    /// None.
    #[getter]
    fn frame_stack(&self, py: Python<'_>) -> Result<Option<usize>> {
        Ok(self.lock(py)?.frame_stack())
    }
    /// Bytes of memory the buffer holds: row records (allocated with the columns), episode
    /// index, priorities, sampler scratch. Resident once every row has been written.
    #[getter]
    fn nbytes(&self, py: Python<'_>) -> Result<usize> {
        Ok(self.lock(py)?.nbytes())
    }
    #[getter]
    fn prioritized(&self, py: Python<'_>) -> Result<bool> {
        Ok(self.lock(py)?.per().is_some())
    }
    #[getter]
    fn alpha(&self, py: Python<'_>) -> Result<Option<f64>> {
        Ok(self.lock(py)?.per().map(|p| p.alpha))
    }
    #[getter]
    fn eps(&self, py: Python<'_>) -> Result<Option<f64>> {
        Ok(self.lock(py)?.per().map(|p| p.eps))
    }
    /// Importance-sampling exponent β of prioritized buffers; settable at any time.
    #[getter]
    fn get_beta(&self, py: Python<'_>) -> Result<Option<f64>> {
        Ok(self.lock(py)?.per().map(|p| p.beta))
    }
    #[setter]
    fn set_beta(&self, py: Python<'_>, beta: &Bound<'_, PyAny>) -> Result<()> {
        let beta = convert::float(beta, "beta")?;
        Ok(self.lock(py)?.set_beta(beta)?)
    }

    /// (strategy, future_k, distance_threshold, achieved goal key, desired goal key,
    /// finished_only, exact_ratio).
    #[allow(clippy::type_complexity)]
    fn _her_config(
        &self,
        py: Python<'_>,
    ) -> Result<Option<(&'static str, f64, Option<f64>, String, String, bool, bool)>> {
        Ok(self.lock(py)?.her().map(|h| {
            (
                h.strategy.name(),
                h.future_k,
                h.distance_threshold,
                h.achieved_goal.clone(),
                h.desired_goal.clone(),
                h.finished_only,
                h.exact_ratio,
            )
        }))
    }

    /// Set `(p + eps) ** alpha` as the priority of the transition each index names; returns how
    /// many indices were skipped.
    ///
    /// indices: int [K] rows, as handed out by `add`/`extend` (`AddResult.indices`, Ape-X style
    /// initial priorities) or by `sample` (`TransitionBatch.indices`). priorities: [K] numbers
    /// >= 0 (e.g. |TD error|), one per index.
    ///
    /// Which transition an index names: the one its row holds at the time of the update. A row
    /// that holds no transition now (a terminal row, the open row of a running episode, a row
    /// never written or cleared) is skipped and counted. So an index from `sample` whose row
    /// was overwritten since is skipped while the row holds no transition, and lands on the
    /// newer transition once `add` has written one there.
    ///
    /// Raises ShapeError (K differs, arrays not 1-d), DTypeError (non-integer indices, bool or
    /// non-numeric priorities), InvalidValueError (an index outside [0, capacity); a negative,
    /// NaN or infinite priority; one whose (p + eps) ** alpha exceeds MAX_PRIORITY = 1e280, so
    /// that the total priority mass of any buffer stays finite), ApiUsageError (not a
    /// prioritized buffer). Nothing is written unless the whole call is valid.
    fn update_priorities(
        &self,
        py: Python<'_>,
        indices: &Bound<'_, PyAny>,
        priorities: &Bound<'_, PyAny>,
    ) -> Result<usize> {
        let idx = convert::indices(indices, "indices")?;
        let pr = convert::priorities(priorities)?;
        Ok(self.lock(py)?.update_priorities(&idx, &pr)?)
    }

    /// (total priority mass, smallest positive priority or inf, priority of new transitions),
    /// O(1); None for a buffer without prioritized replay.
    fn priority_stats(&self, py: Python<'_>) -> Result<Option<(f64, f64, f64)>> {
        Ok(self.lock(py)?.priority_stats())
    }

    /// float64 [K]: current `(p + eps) ** alpha` of rows `indices` (0 for non-transition rows).
    fn priorities<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> Result<Bound<'py, PyAny>> {
        self.per_index(py, indices, |c, idx| c.priorities(idx))
    }

    /// int64 [K]: row of the previous step of the same episode (clamped at its first row).
    fn prev<'py>(&self, py: Python<'py>, indices: &Bound<'py, PyAny>) -> Result<Bound<'py, PyAny>> {
        self.per_index(py, indices, |c, idx| c.prev(idx))
    }

    /// int64 [K]: row of the next step of the same episode (clamped at its last transition).
    fn next<'py>(&self, py: Python<'py>, indices: &Bound<'py, PyAny>) -> Result<Bound<'py, PyAny>> {
        self.per_index(py, indices, |c, idx| c.next(idx))
    }

    /// (start, end, length), int64 [K] each: first surviving row of each index's episode, the row
    /// holding its final (or newest) observation, and its number of surviving transitions.
    fn episode_bounds<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> Result<Bound<'py, PyTuple>> {
        let idx = convert::indices(indices, "indices")?;
        let (s, e, l) = self.lock(py)?.episode_bounds(&idx)?;
        Ok(PyTuple::new(
            py,
            [vec_array(py, s), vec_array(py, e), vec_array(py, l)],
        )?)
    }

    /// int64 [U]: newest transition row of every env whose episode is still running.
    fn unfinished_index<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyAny>> {
        Ok(vec_array(py, self.lock(py)?.unfinished_index()))
    }

    /// int64 [N]: newest transition row of each env, -1 where an env holds none.
    fn last_index<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyAny>> {
        Ok(vec_array(py, self.lock(py)?.last_index()))
    }

    /// int64 [K]: the row of each index (an index of a prioritized buffer carries a
    /// generation above its row).
    fn rows_of<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> Result<Bound<'py, PyAny>> {
        self.per_index(py, indices, |c, idx| c.rows_of(idx))
    }

    /// bool [K]: whether each index names a sampleable transition its row holds now.
    fn is_transition<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> Result<Bound<'py, PyAny>> {
        self.per_index(py, indices, |c, idx| c.is_transition(idx))
    }

    /// Forget every stored step; memory, columns and the RNG stream are kept.
    fn clear(&self, py: Python<'_>) -> Result<()> {
        self.lock(py)?.clear();
        Ok(())
    }

    /// A read-only zero-copy view `[capacity, *shape]` of a stored column.
    fn _column<'py>(slf: &Bound<'py, Self>, name: &str) -> Result<Bound<'py, PyUntypedArray>> {
        let py = slf.py();
        let v = slf.get().lock(py)?.column_view(name)?;
        Ok(convert::view(py, &v, slf.as_any())?)
    }

    /// Declare columns up front: lists of (name, dtype name, shape).
    fn _declare(
        &self,
        py: Python<'_>,
        obs: &Bound<'_, PyAny>,
        step: &Bound<'_, PyAny>,
    ) -> Result<()> {
        let (o, s) = (convert::specs(obs)?, convert::specs(step)?);
        Ok(self.lock(py)?.declare(o, s)?)
    }

    /// (obs specs, step specs) as lists of (name, dtype name, shape); empty before the first add.
    fn _schema<'py>(&self, py: Python<'py>) -> Result<(Vec<SpecTuple<'py>>, Vec<SpecTuple<'py>>)> {
        let (o, s) = self.lock(py)?.schema();
        Ok((convert::spec_tuples(py, &o)?, convert::spec_tuples(py, &s)?))
    }

    /// The whole state as a list of (name, array); every array is a fresh copy, filled by the
    /// core in one pass over the row records.
    fn _state_parts<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyList>> {
        let core = self.lock(py)?;
        let mut parts = Vec::new();
        for (name, dtype, shape) in core.state_layout() {
            parts.push((name, convert::fresh(py, dtype, &shape)?));
        }
        // SAFETY: fresh arrays owned by this function, each of exactly its layout's size.
        let mut dsts: Vec<&mut [u8]> = parts.iter().map(|(_, a)| unsafe { bytes_mut(a) }).collect();
        core.export_state(&mut dsts)?;
        Ok(PyList::new(py, parts)?)
    }

    /// Replace the whole state from a dict name -> array (validated before anything changes).
    /// `obs`/`step` column specs declare the columns of a buffer that has none yet.
    #[pyo3(signature = (parts, obs=None, step=None))]
    fn _load_state(
        &self,
        py: Python<'_>,
        parts: &Bound<'_, PyDict>,
        obs: Option<&Bound<'_, PyAny>>,
        step: Option<&Bound<'_, PyAny>>,
    ) -> Result<()> {
        let mut ins = Vec::with_capacity(parts.len());
        for (k, v) in parts.iter() {
            let name: String = k.extract()?;
            let i = convert::array(&v, What::Arg(&name))?;
            ins.push((name, i));
        }
        let sp: Vec<StatePart<'_>> = ins
            .iter()
            .map(|(n, i)| {
                let a = i.array();
                StatePart {
                    name: n.clone(),
                    dtype: a.dtype,
                    shape: a.shape.to_vec(),
                    bytes: a.data.into(),
                }
            })
            .collect();
        let o = obs.map(convert::specs).transpose()?.unwrap_or_default();
        let s = step.map(convert::specs).transpose()?.unwrap_or_default();
        Ok(self.lock(py)?.load_state_with_schema(o, s, &sp)?)
    }
}
