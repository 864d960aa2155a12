//! Sequence replay for recurrent agents (R2D2: Kapturowski et al. 2019, "Recurrent Experience
//! Replay in Distributed Reinforcement Learning"): fixed-length runs of consecutive steps of one
//! episode of one env, gathered in one call (docs/sequences.md).
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

mod gather;
mod priorities;
mod starts;

pub use priorities::{sequence_priorities, sequence_priority_update};

use crate::batch::{Field, SeqField};
use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::her::RewardFn;
use crate::mem::{cast_mut, Plain};
use crate::replay::ReplayCore;
use crate::validate::{self, MAX_BATCH};
use gather::{gather, pick_goals, relabel};
use starts::{draw_prioritized_starts, draw_uniform_starts};

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
                Field::Obs => obs.push(b),
                Field::ObsNext => obs_next.push(b),
                Field::Act | Field::Extras => step.push(b),
                Field::State => state.push(b),
                Field::Rew => rew = Some(typed(f, b)?),
                Field::Terminated => term = Some(b),
                Field::Truncated => trunc = Some(b),
                Field::Discount => disc = Some(typed(f, b)?),
                Field::Mask => mask = Some(b),
                Field::IsFirst => first = Some(b),
                Field::Horizon => hor = Some(typed(f, b)?),
                Field::Indices => idx = Some(typed(f, b)?),
                Field::StartIndices => start = Some(typed(f, b)?),
                Field::Weights => w = Some(typed(f, b)?),
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
        for slot in [Field::Obs, Field::ObsNext] {
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
                slot: if j == 0 { Field::Act } else { Field::Extras },
                key: (j > 0).then(|| c.spec.name.clone()),
                dtype: c.spec.dtype,
                shape: dims(&[b, l], &c.spec.shape),
            });
        }
        for &j in &state {
            let c = &sc.step[j];
            out.push(SeqField {
                slot: Field::State,
                key: Some(c.spec.name.clone()),
                dtype: c.spec.dtype,
                shape: dims(&[b], &c.spec.shape),
            });
        }
        for (slot, dtype) in [
            (Field::Rew, DType::F32),
            (Field::Terminated, DType::Bool),
            (Field::Truncated, DType::Bool),
            (Field::Discount, DType::F32),
            (Field::Mask, DType::Bool),
            (Field::IsFirst, DType::Bool),
            (Field::Horizon, DType::I64),
            (Field::Indices, DType::I64),
        ] {
            out.push(SeqField {
                slot,
                key: None,
                dtype,
                shape: vec![b, l],
            });
        }
        out.push(SeqField {
            slot: Field::StartIndices,
            key: None,
            dtype: DType::I64,
            shape: vec![b],
        });
        if self.per.is_some() {
            out.push(SeqField {
                slot: Field::Weights,
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use crate::schema::{Obs, Steps};
    use crate::Array;

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
            &crate::mem::bytes_of(&bufs[at(Field::StartIndices)])
                [..fields[at(Field::StartIndices)].bytes()],
        )
        .to_vec();
        let mask = crate::mem::bytes_of(&bufs[at(Field::Mask)])[..fields[at(Field::Mask)].bytes()]
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
