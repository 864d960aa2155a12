//! `RawBuffer`, the Python class over the core's `ReplayCore` (documented in
//! `rlcore/_core.pyi`): every method converts its arguments, makes one core call through
//! `call` and converts the result back.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use rlcore_core::{
    AddOutcome, BatchField, BatchOut, GoalStrategy, HerConfig, OutField, ReplayCore, SampleRequest,
    SeqRequest, StatePart, Steps,
};
use rlcore_core::{DEFAULT_ALPHA, DEFAULT_BETA, DEFAULT_EPS, DEFAULT_ETA, DEFAULT_FUTURE_K};
use smallvec::SmallVec;

use crate::arrays::{self, slices};
use crate::call::{self, Shared};
use crate::convert::{self, opt_array, vec_array, Any, Arr, Given, SpecTuple, What};
use crate::errors::Result;
use crate::fast;

#[pyclass(module = "rlcore._core", frozen)]
pub struct AddResult {
    out: AddOutcome,
}

#[pymethods]
impl AddResult {
    #[getter]
    fn indices<'py>(&self, py: Python<'py>) -> Any<'py> {
        vec_array(py, self.out.rows.to_vec())
    }
    #[getter]
    fn done_envs<'py>(&self, py: Python<'py>) -> Any<'py> {
        vec_array(py, self.out.done.iter().map(|d| d.env as i64).collect())
    }
    #[getter]
    fn episode_returns<'py>(&self, py: Python<'py>) -> Any<'py> {
        vec_array(py, self.out.done.iter().map(|d| d.ret).collect())
    }
    #[getter]
    fn episode_lengths<'py>(&self, py: Python<'py>) -> Any<'py> {
        vec_array(py, self.out.done.iter().map(|d| d.len as i64).collect())
    }
    fn __repr__(&self) -> String {
        let d = &self.out.done;
        format!(
            "AddResult(indices={:?}, done_envs={:?}, episode_returns={:?}, episode_lengths={:?})",
            self.out.rows,
            d.iter().map(|d| d.env).collect::<Vec<_>>(),
            d.iter().map(|d| d.ret).collect::<Vec<_>>(),
            d.iter().map(|d| d.len).collect::<Vec<_>>()
        )
    }
}

#[pyclass(module = "rlcore._core", subclass, frozen)]
pub struct RawBuffer(Shared);

/// The arrays of a `TransitionBatch` of `b` samples.
fn transition_fields(core: &ReplayCore, b: usize) -> SmallVec<[(usize, BatchField<'_>); 16]> {
    core.batch_fields().map(|f| (b, f)).collect()
}

impl RawBuffer {
    /// One add or extend call: convert, lock, let the core check and write.
    fn write(
        &self, py: Python<'_>, args: [&Any<'_>; 6], mask: Option<&Any<'_>>,
        env_ids: Option<&Any<'_>>, extras: Option<&Bound<'_, PyDict>>, extend: bool,
    ) -> Result<AddResult> {
        let write = if extend { ReplayCore::extend } else { ReplayCore::add };
        let absent = |x: Option<&Any<'_>>| x.is_none_or(|x| x.is_none());
        // the lock first: waiting for it releases the GIL, and another thread may then change
        // or free the arrays, so their headers are read only once it is held
        let mut core = self.0.lock(py)?;
        if absent(mask) && absent(env_ids) && extras.is_none() {
            let mut scalars = [[0u8; 8]; 3];
            if let Some(steps) = fast::usual_steps(args, &mut scalars) {
                return Ok(AddResult { out: write(&mut core, &steps)? });
            }
        }
        let [obs, act, rew, terminated, truncated, obs_next] = args;
        let (o, on) = (convert::obs(obs, "obs")?, convert::obs(obs_next, "obs_next")?);
        let (a, r) =
            (convert::array(act, What::Arg("act"))?, convert::array(rew, What::Arg("rew"))?);
        let te = convert::array(terminated, What::Arg("terminated"))?;
        let tr = convert::array(truncated, What::Arg("truncated"))?;
        let (m, ids) = (opt_array(mask, "mask")?, opt_array(env_ids, "env_ids")?);
        let ex = convert::extras(extras)?;
        let (mut ok, mut onk, ex) = (Vec::new(), Vec::new(), ex.arrays()?);
        let steps = Steps {
            obs: o.obs(&mut ok)?,
            act: a.array(),
            rew: r.array(),
            terminated: te.array(),
            truncated: tr.array(),
            obs_next: on.obs(&mut onk)?,
            extras: &ex,
            mask: m.as_ref().map(|m| m.array()),
            env_ids: ids.as_ref().map(|i| i.array()),
        };
        Ok(AddResult { out: write(&mut core, &steps)? })
    }

    /// Apply a core query to an index array.
    fn per_index<'py, T: numpy::Element>(
        &self, py: Python<'py>, indices: &Any<'py>,
        f: impl FnOnce(&ReplayCore, &[i64]) -> rlcore_core::Result<Vec<T>>,
    ) -> Result<Any<'py>> {
        let idx = convert::indices(indices, "indices")?;
        Ok(vec_array(py, f(&*self.0.lock(py)?, &idx)?))
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
        capacity: &Any<'_>, num_envs: Given<'_>, seed: Option<&Any<'_>>, prioritized: bool,
        alpha: Given<'_>, beta: Given<'_>, eps: Given<'_>, her_strategy: Option<&str>,
        future_k: Given<'_>, distance_threshold: Option<&Any<'_>>, achieved_goal_key: &str,
        desired_goal_key: &str, finished_only: bool, exact_ratio: bool,
        frame_stack: Option<&Any<'_>>,
    ) -> Result<Self> {
        let (capacity, num_envs) =
            (convert::count(capacity, "capacity")?, num_envs.count("num_envs", 1)?);
        let seed = convert::seed(seed)?;
        let (alpha, beta) =
            (alpha.float("alpha", DEFAULT_ALPHA)?, beta.float("beta", DEFAULT_BETA)?);
        let (eps, future_k) =
            (eps.float("eps", DEFAULT_EPS)?, future_k.float("future_k", DEFAULT_FUTURE_K)?);
        let distance_threshold =
            convert::opt(distance_threshold, |x| convert::float(x, "distance_threshold"))?;
        let frame_stack = convert::opt(frame_stack, |k| convert::count(k, "frame_stack"))?;
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
        Ok(RawBuffer(Shared::new(core)))
    }

    #[pyo3(signature = (obs, act, rew, terminated, truncated, obs_next, *, mask=None, env_ids=None, **extras))]
    #[allow(clippy::too_many_arguments)]
    fn add(
        &self, py: Python<'_>, obs: &Any<'_>, act: &Any<'_>, rew: &Any<'_>, terminated: &Any<'_>,
        truncated: &Any<'_>, obs_next: &Any<'_>, mask: Option<&Any<'_>>, env_ids: Option<&Any<'_>>,
        extras: Option<&Bound<'_, PyDict>>,
    ) -> Result<AddResult> {
        let args = [obs, act, rew, terminated, truncated, obs_next];
        self.write(py, args, mask, env_ids, extras, false)
    }

    /// `extras` is a dict, not keyword arguments, so that every name, reserved ones included,
    /// reaches the core's declaration check.
    #[pyo3(signature = (obs, act, rew, terminated, truncated, obs_next, *, mask=None, extras=None))]
    #[allow(clippy::too_many_arguments)]
    fn _extend(
        &self, py: Python<'_>, obs: &Any<'_>, act: &Any<'_>, rew: &Any<'_>, terminated: &Any<'_>,
        truncated: &Any<'_>, obs_next: &Any<'_>, mask: Option<&Any<'_>>,
        extras: Option<&Bound<'_, PyDict>>,
    ) -> Result<AddResult> {
        let args = [obs, act, rew, terminated, truncated, obs_next];
        self.write(py, args, mask, None, extras, true)
    }

    #[pyo3(signature = (batch_size, n_step, gamma, out, compute_reward, indices=None, goal_indices=None))]
    #[allow(clippy::too_many_arguments)]
    fn _sample<'py>(
        &self, py: Python<'py>, batch_size: &Any<'py>, n_step: &Any<'py>, gamma: &Any<'py>,
        out: Option<&Any<'py>>, compute_reward: Option<&Any<'py>>, indices: Option<&Any<'py>>,
        goal_indices: Option<&Any<'py>>,
    ) -> Result<Bound<'py, PyTuple>> {
        let at = indices.map(|a| convert::indices(a, "indices")).transpose()?;
        let goals_at = goal_indices.map(|a| convert::indices(a, "goal_indices")).transpose()?;
        let b = convert::count(batch_size, "batch_size")?;
        let (n_step, gamma) = (convert::count(n_step, "n_step")?, convert::float(gamma, "gamma")?);
        let req = SampleRequest { batch_size: b, n_step, gamma, at, goals_at };
        let mut guard = self.0.lock(py)?;
        let core = &mut *guard;
        core.check_sample_request(&req)?; // before any array is allocated
                                          // the fields once (they borrow the core); from here on the batch holds the arrays
        let (batch, mut bo, bytes) = {
            let fields = transition_fields(core, b);
            let arrays = arrays::arrays(py, &fields, out)?;
            // SAFETY: arrays from `arrays::arrays`, alive in `batch` until the end of this call.
            let bo =
                BatchOut::from_fields(fields.iter().map(|f| f.1).zip(unsafe { slices(&arrays) }))?;
            let bytes = fields.iter().map(|f| f.bytes()).sum();
            (arrays::tuple(py, &fields, arrays)?, bo, bytes)
        };
        let reward = compute_reward.filter(|_| core.needs_reward_fn());
        call::run(py, bytes, reward, |rf| core.sample_request(&req, &mut bo, rf))?;
        Ok(batch)
    }

    /// Benchmark only (not API): the floor of `sample(batch_size, n_step=n_step)`, a bare
    /// gather of drawn rows into the same arrays (see `ReplayCore::floor_gather`).
    #[cfg(feature = "bench")]
    #[pyo3(signature = (batch_size, seed, n_step=1))]
    fn _floor_gather<'py>(
        &self, py: Python<'py>, batch_size: &Any<'py>, seed: u64, n_step: usize,
    ) -> Result<Bound<'py, PyTuple>> {
        let b = convert::count(batch_size, "batch_size")?;
        let mut core = self.0.lock(py)?;
        core.check_sample_args(b, n_step, 0.0)?;
        let arrays = arrays::arrays(py, &transition_fields(&core, b), None)?;
        // SAFETY: fresh arrays, alive until the end of this call.
        let mut bo = BatchOut::from_fields(core.batch_fields().zip(unsafe { slices(&arrays) }))?;
        core.floor_gather(b, n_step, seed, &mut bo)?;
        drop(bo);
        let batch = arrays::tuple(py, &transition_fields(&core, b), arrays)?;
        Ok(batch)
    }

    #[pyo3(signature = (batch_size, seq_len, burn_in, n_step, gamma, pad, state, out, compute_reward))]
    #[allow(clippy::too_many_arguments)]
    fn _sample_sequences<'py>(
        &self, py: Python<'py>, batch_size: &Any<'py>, seq_len: &Any<'py>, burn_in: &Any<'py>,
        n_step: &Any<'py>, gamma: &Any<'py>, pad: bool, state: Vec<String>, out: Option<&Any<'py>>,
        compute_reward: Option<&Any<'py>>,
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
        let mut guard = self.0.lock(py)?;
        let core = &mut *guard;
        let fields = core.sequence_fields(&req)?;
        let arrays = arrays::arrays(py, &fields, out)?;
        // SAFETY: arrays from `arrays::arrays`, alive until the end of this call.
        let out = unsafe { slices(&arrays) }.collect();
        let reward = compute_reward.filter(|_| core.needs_reward_fn());
        let bytes = fields.iter().map(|f| f.bytes()).sum();
        call::run(py, bytes, reward, |rf| core.sample_sequences(&req, out, rf))?;
        Ok(arrays::tuple(py, &fields, arrays)?)
    }

    #[pyo3(signature = (seq_len, *, burn_in, pad))]
    fn sequence_start_mass(
        &self, py: Python<'_>, seq_len: &Any<'_>, burn_in: &Any<'_>, pad: bool,
    ) -> Result<(u64, f64)> {
        let (seq_len, burn_in) =
            (convert::count(seq_len, "seq_len")?, convert::count(burn_in, "burn_in")?);
        Ok(self.0.lock(py)?.sequence_start_mass(seq_len, burn_in, pad)?)
    }

    #[pyo3(signature = (start_indices, td_errors, *, mask=None, eta=Given(None)),
           text_signature = "(self, start_indices, td_errors, *, mask=None, eta=0.9)")]
    fn update_sequence_priorities(
        &self, py: Python<'_>, start_indices: &Any<'_>, td_errors: &Any<'_>,
        mask: Option<&Any<'_>>, eta: Given<'_>,
    ) -> Result<usize> {
        let idx = convert::indices(start_indices, "start_indices")?;
        let td = convert::array(td_errors, What::Arg("td_errors"))?;
        let (m, eta) = (opt_array(mask, "mask")?, eta.float("eta", DEFAULT_ETA)?);
        let m = m.as_ref().map(|m| m.array());
        Ok(self.0.lock(py)?.update_sequence_priorities(&idx, &td.array(), m.as_ref(), eta)?)
    }

    fn __len__(&self, py: Python<'_>) -> Result<usize> {
        Ok(self.0.lock(py)?.len())
    }
    #[getter]
    fn capacity(&self, py: Python<'_>) -> Result<usize> {
        Ok(self.0.lock(py)?.rows())
    }
    #[getter]
    fn num_envs(&self, py: Python<'_>) -> Result<usize> {
        Ok(self.0.lock(py)?.num_envs())
    }
    #[getter]
    fn segment_len(&self, py: Python<'_>) -> Result<usize> {
        Ok(self.0.lock(py)?.segment_len())
    }
    #[getter]
    fn frame_stack(&self, py: Python<'_>) -> Result<Option<usize>> {
        Ok(self.0.lock(py)?.frame_stack())
    }
    #[getter]
    fn nbytes(&self, py: Python<'_>) -> Result<usize> {
        Ok(self.0.lock(py)?.nbytes())
    }
    #[getter]
    fn prioritized(&self, py: Python<'_>) -> Result<bool> {
        Ok(self.0.lock(py)?.per().is_some())
    }
    #[getter]
    fn alpha(&self, py: Python<'_>) -> Result<Option<f64>> {
        Ok(self.0.lock(py)?.per().map(|p| p.alpha))
    }
    #[getter]
    fn eps(&self, py: Python<'_>) -> Result<Option<f64>> {
        Ok(self.0.lock(py)?.per().map(|p| p.eps))
    }
    #[getter]
    fn get_beta(&self, py: Python<'_>) -> Result<Option<f64>> {
        Ok(self.0.lock(py)?.per().map(|p| p.beta))
    }
    #[setter]
    fn set_beta(&self, py: Python<'_>, beta: &Any<'_>) -> Result<()> {
        let beta = convert::float(beta, "beta")?;
        Ok(self.0.lock(py)?.set_beta(beta)?)
    }

    #[allow(clippy::type_complexity)]
    fn _her_config(
        &self, py: Python<'_>,
    ) -> Result<Option<(&'static str, f64, Option<f64>, String, String, bool, bool)>> {
        Ok(self.0.lock(py)?.her().map(|h| {
            let (ag, dg) = (h.achieved_goal.clone(), h.desired_goal.clone());
            (
                h.strategy.name(),
                h.future_k,
                h.distance_threshold,
                ag,
                dg,
                h.finished_only,
                h.exact_ratio,
            )
        }))
    }

    fn update_priorities(
        &self, py: Python<'_>, indices: &Any<'_>, priorities: &Any<'_>,
    ) -> Result<usize> {
        let (idx, pr) = (convert::indices(indices, "indices")?, convert::priorities(priorities)?);
        Ok(self.0.lock(py)?.update_priorities(&idx, &pr)?)
    }
    fn priority_stats(&self, py: Python<'_>) -> Result<Option<(f64, f64, f64)>> {
        Ok(self.0.lock(py)?.priority_stats())
    }
    fn priorities<'py>(&self, py: Python<'py>, indices: &Any<'py>) -> Result<Any<'py>> {
        self.per_index(py, indices, |c, idx| c.priorities(idx))
    }
    fn prev<'py>(&self, py: Python<'py>, indices: &Any<'py>) -> Result<Any<'py>> {
        self.per_index(py, indices, |c, idx| c.prev(idx))
    }
    fn next<'py>(&self, py: Python<'py>, indices: &Any<'py>) -> Result<Any<'py>> {
        self.per_index(py, indices, |c, idx| c.next(idx))
    }
    fn episode_bounds<'py>(
        &self, py: Python<'py>, indices: &Any<'py>,
    ) -> Result<Bound<'py, PyTuple>> {
        let idx = convert::indices(indices, "indices")?;
        let (s, e, l) = self.0.lock(py)?.episode_bounds(&idx)?;
        Ok(PyTuple::new(py, [vec_array(py, s), vec_array(py, e), vec_array(py, l)])?)
    }
    fn unfinished_index<'py>(&self, py: Python<'py>) -> Result<Any<'py>> {
        Ok(vec_array(py, self.0.lock(py)?.unfinished_index()))
    }
    fn last_index<'py>(&self, py: Python<'py>) -> Result<Any<'py>> {
        Ok(vec_array(py, self.0.lock(py)?.last_index()))
    }
    fn rows_of<'py>(&self, py: Python<'py>, indices: &Any<'py>) -> Result<Any<'py>> {
        self.per_index(py, indices, |c, idx| c.rows_of(idx))
    }
    fn is_transition<'py>(&self, py: Python<'py>, indices: &Any<'py>) -> Result<Any<'py>> {
        self.per_index(py, indices, |c, idx| c.is_transition(idx))
    }
    fn clear(&self, py: Python<'_>) -> Result<()> {
        self.0.lock(py)?.clear();
        Ok(())
    }

    fn _column<'py>(slf: &Bound<'py, Self>, name: &str) -> Result<Arr<'py>> {
        let v = slf.get().0.lock(slf.py())?.column_view(name)?;
        Ok(convert::view(slf.py(), &v, slf.as_any())?)
    }

    fn _declare(&self, py: Python<'_>, obs: &Any<'_>, step: &Any<'_>) -> Result<()> {
        let (o, s) = (convert::specs(obs)?, convert::specs(step)?);
        Ok(self.0.lock(py)?.declare(o, s)?)
    }

    fn _schema<'py>(&self, py: Python<'py>) -> Result<(Vec<SpecTuple<'py>>, Vec<SpecTuple<'py>>)> {
        let (o, s) = self.0.lock(py)?.schema();
        Ok((convert::spec_tuples(py, &o)?, convert::spec_tuples(py, &s)?))
    }

    /// Every array a fresh copy, filled by the core in one pass over the row records.
    fn _state_parts<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyList>> {
        let core = self.0.lock(py)?;
        let mut parts = Vec::new();
        for (name, dtype, shape) in core.state_layout() {
            parts.push((name, convert::fresh(py, dtype, &shape)?));
        }
        // SAFETY: fresh arrays owned by this function, each of exactly its layout's size.
        let mut dsts: Vec<&mut [u8]> =
            parts.iter().map(|(_, a)| unsafe { convert::bytes_mut(a) }).collect();
        core.export_state(&mut dsts)?;
        Ok(PyList::new(py, parts)?)
    }

    #[pyo3(signature = (parts, obs=None, step=None))]
    fn _load_state(
        &self, py: Python<'_>, parts: &Bound<'_, PyDict>, obs: Option<&Any<'_>>,
        step: Option<&Any<'_>>,
    ) -> Result<()> {
        let mut ins = Vec::with_capacity(parts.len());
        for (k, v) in parts.iter() {
            let name: String = k.extract()?;
            let i = convert::array(&v, What::Arg(&name))?;
            ins.push((name, i));
        }
        let sp: Vec<StatePart<'_>> =
            ins.iter().map(|(n, i)| StatePart::of(n, &i.array())).collect();
        let (o, s) = (convert::opt_specs(obs)?, convert::opt_specs(step)?);
        Ok(self.0.lock(py)?.load_state_with_schema(o, s, &sp)?)
    }
}
