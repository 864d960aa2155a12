//! Drawing rows (uniform and prioritized), n-step windows and the gather into caller-owned
//! output arrays (docs/n-step.md, docs/her.md, docs/per.md). Relabeling is in `her`, the
//! order of the steps in `replay`.

use crate::batch::{BatchField, Field};
use crate::error::{CoreError, Result};
use crate::mem::{cast_mut, gather_rows, GatherRows, Plain};
use crate::per::PerState;
use crate::rng::Rng;
use crate::schema::Schema;
use crate::storage::{Storage, F_TRANSITION};

/// How many samples ahead the gather prefetches rows (software pipelining: enough misses in
/// flight to hide memory latency, few enough not to overflow the miss buffers).
const PREFETCH_AHEAD: usize = 12;
// `sample_fused` queues the candidates in flight in a ring of 16 slots
const _: () = assert!(PREFETCH_AHEAD <= 16);

/// Row storage larger than this (bytes) is sampled with `sample_fused`'s two-stage prefetch: it
/// does not stay in the caches (8 MiB: several times a core's L2, a share of a typical L3).
const STAGED_PREFETCH_BYTES: usize = 8 << 20;

/// With the two-stage prefetch, how many candidates before its turn a candidate's whole n-step
/// window is requested.
const WINDOW_AHEAD: usize = 6;
const _: () = assert!(WINDOW_AHEAD <= PREFETCH_AHEAD);

/// Caller-owned output arrays for one batch of B samples (C-contiguous, row-major).
pub struct BatchOut<'a> {
    /// One slice per observation column, `B * item_bytes` each.
    pub obs: Vec<&'a mut [u8]>,
    pub obs_next: Vec<&'a mut [u8]>,
    /// `act` then the extras, `B * item_bytes` each.
    pub step: Vec<&'a mut [u8]>,
    pub rew: &'a mut [f32],
    pub terminated: &'a mut [u8],
    pub truncated: &'a mut [u8],
    pub discount: &'a mut [f32],
    pub indices: &'a mut [i64],
    /// Importance weights; required for prioritized buffers, ignored otherwise.
    pub weights: Option<&'a mut [f32]>,
}

impl<'a> BatchOut<'a> {
    /// Assemble the output from one byte slice per batch field, in the order of
    /// [`crate::ReplayCore::batch_fields`] (each of `B * item_bytes` bytes; the sizes are
    /// checked by `sample`).
    ///
    /// Errors: `Usage` for a slice misaligned for its elements, `Shape` for a missing field.
    pub fn from_fields<'f>(
        fields: impl Iterator<Item = (BatchField<'f>, &'a mut [u8])>,
    ) -> Result<Self> {
        fn typed<'a, T: Plain>(f: &BatchField<'_>, b: &'a mut [u8]) -> Result<&'a mut [T]> {
            cast_mut(b).ok_or_else(|| {
                CoreError::usage(format!(
                    "out.{}: the array must be aligned to its {}-byte elements",
                    f.label(),
                    std::mem::size_of::<T>()
                ))
            })
        }
        let (mut obs, mut obs_next, mut step) = (Vec::new(), Vec::new(), Vec::new());
        let (mut rew, mut term, mut trunc, mut disc, mut idx, mut weights) =
            (None, None, None, None, None, None);
        for (f, b) in fields {
            match f.field {
                Field::Obs => obs.push(b),
                Field::ObsNext => obs_next.push(b),
                Field::Act | Field::Extras => step.push(b),
                Field::Rew => rew = Some(typed(&f, b)?),
                Field::Terminated => term = Some(b),
                Field::Truncated => trunc = Some(b),
                Field::Discount => disc = Some(typed(&f, b)?),
                Field::Indices => idx = Some(typed(&f, b)?),
                Field::Weights => weights = Some(typed(&f, b)?),
                f => {
                    let m = format!("out: {} is no field of a transition batch", f.name());
                    return Err(CoreError::shape(m));
                }
            }
        }
        let missing = |what: &str| CoreError::shape(format!("out: no array for field '{what}'"));
        Ok(BatchOut {
            obs,
            obs_next,
            step,
            rew: rew.ok_or_else(|| missing("rew"))?,
            terminated: term.ok_or_else(|| missing("terminated"))?,
            truncated: trunc.ok_or_else(|| missing("truncated"))?,
            discount: disc.ok_or_else(|| missing("discount"))?,
            indices: idx.ok_or_else(|| missing("indices"))?,
            weights,
        })
    }

    /// Check that every array has the size a batch of `b` samples of `schema` needs.
    ///
    /// Errors: `Shape` for a wrong number of arrays, a wrong size, or missing weights of a
    /// prioritized buffer.
    pub(crate) fn check(&self, schema: &Schema, b: usize, prioritized: bool) -> Result<()> {
        let bad = |what: &str, got: usize, want: usize| -> Result<()> {
            if got == want {
                Ok(())
            } else {
                Err(CoreError::shape(format!(
                    "out.{what}: expected {want} bytes/elements for batch_size={b}, got {got}"
                )))
            }
        };
        if self.obs.len() != schema.obs.len() || self.obs_next.len() != schema.obs.len() {
            return Err(CoreError::shape("out: wrong number of observation arrays"));
        }
        if self.step.len() != schema.step.len() {
            return Err(CoreError::shape("out: wrong number of act/extra arrays"));
        }
        for (c, (o, on)) in schema
            .obs
            .iter()
            .zip(self.obs.iter().zip(self.obs_next.iter()))
        {
            bad("obs", o.len(), b * c.io_bytes())?;
            bad("obs_next", on.len(), b * c.io_bytes())?;
        }
        for (c, s) in schema.step.iter().zip(self.step.iter()) {
            bad(&c.spec.name, s.len(), b * c.item_bytes)?;
        }
        bad("rew", self.rew.len(), b)?;
        bad("terminated", self.terminated.len(), b)?;
        bad("truncated", self.truncated.len(), b)?;
        bad("discount", self.discount.len(), b)?;
        bad("indices", self.indices.len(), b)?;
        if prioritized {
            match &self.weights {
                Some(w) => bad("weights", w.len(), b)?,
                None => {
                    return Err(CoreError::shape(
                        "out.weights is required for prioritized buffers",
                    ))
                }
            }
        }
        Ok(())
    }
}

/// Where one sample reads from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Plan {
    pub env: usize,
    /// Absolute index of step t.
    pub t: u64,
    /// First surviving row and terminal (or open) row of t's episode, absolute.
    pub start: u64,
    pub end: u64,
    /// Window length m.
    pub m: u64,
    /// Physical rows of t, t+m (bootstrap observation) and t+m-1 (window end).
    pub p: usize,
    pub q: usize,
    pub last: usize,
    /// Physical row whose achieved goal replaces the desired goal (HER), or `usize::MAX`.
    pub goal_row: usize,
}

/// The physical rows of a batch's samples: row t and the row of its bootstrap observation.
#[derive(Debug, Default)]
pub(crate) struct RowPairs {
    pub t: Vec<usize>,
    pub next: Vec<usize>,
}

impl RowPairs {
    fn clear(&mut self) {
        self.t.clear();
        self.next.clear();
    }
    #[inline]
    fn push(&mut self, t: usize, next: usize) {
        self.t.push(t);
        self.next.push(next);
    }
}

/// Scratch memory of the sampler, kept across calls so that a sample allocates nothing.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    pub plans: Vec<Plan>,
    us: Vec<f64>,
    rows: Vec<usize>,
    pub(crate) pairs: RowPairs,
}

impl Scratch {
    /// Bytes of the scratch memory (it grows to the largest batch sampled).
    pub(crate) fn nbytes(&self) -> usize {
        self.plans.capacity() * std::mem::size_of::<Plan>()
            + self.us.capacity() * 8
            + (self.rows.capacity() + self.pairs.t.capacity() + self.pairs.next.capacity())
                * std::mem::size_of::<usize>()
    }

    /// The first `b` plans (grown if needed).
    pub(crate) fn plans(&mut self, b: usize) -> &mut [Plan] {
        if self.plans.len() < b {
            self.plans.resize(b, Plan::default());
        }
        &mut self.plans[..b]
    }
}

/// Stratified prioritized draw: one sample from each of B equal slices of the priority mass
/// (Schaul et al. 2016, appendix B.2.1), into `plans[i].p`, each drawn row's records (rows t
/// and t + 1, as [`Storage::draw_uniform`]'s) requested from the storage `st` as it is found.
pub(crate) fn draw_prioritized(
    per: &PerState,
    st: &Storage,
    rng: &mut Rng,
    scratch: &mut Scratch,
    b: usize,
) {
    let total = per.tree.total();
    let seg_mass = total / b as f64;
    let (us, rows) = (&mut scratch.us, &mut scratch.rows);
    us.clear();
    rows.clear();
    for i in 0..b {
        us.push(((i as f64 + rng.uniform()) * seg_mass).min(total));
    }
    rows.resize(b, 0);
    // each drawn row's records requested as soon as its descent ends, so that their misses
    // overlap with the descents still to come
    per.tree.find_batch(us, rows, |p| st.prefetch(p));
    for (pl, &p) in scratch.plans.iter_mut().zip(rows.iter()) {
        pl.p = p;
    }
}

impl Storage {
    /// Hint the CPU to fetch the records of row p and its next row (at most four cache lines).
    #[inline]
    fn prefetch(&self, p: usize) {
        self.prefetch_rows(p, 2, 256);
    }

    /// Hint the CPU to fetch the line of row p's fixed fields (its flags among them).
    #[inline]
    pub(crate) fn prefetch_flag(&self, p: usize) {
        self.prefetch_bytes(p * self.schema.rec, 1);
    }

    /// Hint the CPU to fetch the episode record (start and end) of the episode holding row p,
    /// whose own record must be readable (it is read to find the episode).
    #[inline]
    fn prefetch_episode(&self, p: usize) {
        let rec = self.ep_rec(self.env_of(p), self.ep_id(p));
        crate::mem::prefetch(&self.ep_start[rec]);
        crate::mem::prefetch(&self.ep_end[rec]);
    }

    /// How many rows from each drawn row on the draw's prefetch ([`Storage::draw_uniform`],
    /// [`draw_prioritized`]) brings into cache whole (its 256 bytes hold rows t and t + 1 of
    /// records up to 128 bytes).
    pub(crate) fn draw_fetched_rows(&self) -> usize {
        if 2 * self.schema.rec <= 256 {
            2
        } else {
            0
        }
    }

    /// Hint the CPU to fetch the records of `rows` rows from row p on in ring order (at most
    /// `cap` bytes): rows past the end of p's env segment are its first rows (with short
    /// segments, e.g. many envs of a few rows each, a row's next row is often there).
    #[inline]
    pub(crate) fn prefetch_rows(&self, p: usize, rows: usize, cap: usize) {
        let (rec, end) = (self.schema.rec, self.seg_end(p));
        if p + rows <= end {
            self.prefetch_bytes(p * rec, (rows * rec).min(cap));
            return;
        }
        let here = end - p;
        let first = (here * rec).min(cap);
        self.prefetch_bytes(p * rec, first);
        let start = (end - self.seg) * rec;
        self.prefetch_bytes(start, ((rows - here) * rec).min(cap - first));
    }

    /// Hint the CPU to fetch `len` bytes of the rows' memory from byte `from` on.
    #[inline]
    fn prefetch_bytes(&self, from: usize, len: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            let bytes = self.bytes();
            let stop = (from + len).min(bytes.len());
            let mut o = from;
            while o < stop {
                // SAFETY: prefetch is a hint and never faults; the address is inside `bytes`.
                unsafe {
                    std::arch::x86_64::_mm_prefetch(
                        bytes.as_ptr().add(o) as *const i8,
                        std::arch::x86_64::_MM_HINT_T0,
                    );
                }
                o += 64;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (from, len);
    }

    /// (whether every segment is full, number of alive rows): the candidate draw's range.
    #[inline]
    fn alive_rows(&self) -> (bool, u64) {
        (self.fill.all_full(), self.fill.alive())
    }

    /// A uniformly drawn alive row (not necessarily a transition).
    #[inline]
    fn candidate(&self, rng: &mut Rng, all_full: bool, total: u64) -> usize {
        let r = rng.below(total);
        if all_full {
            return r as usize;
        }
        // the env holding alive row r counted over the envs in order, in O(log N)
        let (e, k) = self.fill.locate(r);
        self.phys(e, self.alive_lo(e) + k)
    }

    /// Draw B rows uniformly among alive transitions into `plans[i].p`: uniform alive rows,
    /// rejecting the non-transition ones (at least about half of all alive rows are
    /// transitions, so this takes < 2 draws per sample on average). All first candidates are
    /// prefetched before any is read, so the cache misses of a batch overlap; so are the
    /// replacements of each round of rejections (in sample order, one per rejected sample a
    /// round), so a retry does not wait for memory either.
    pub(crate) fn draw_uniform(&self, rng: &mut Rng, plans: &mut [Plan]) {
        let (all_full, total) = self.alive_rows();
        // every first candidate in flight before any is read: the check below does so little
        // per row that a window of PREFETCH_AHEAD rows would not hide a miss
        for pl in plans.iter_mut() {
            pl.p = self.candidate(rng, all_full, total);
            self.prefetch(pl.p);
        }
        let mut rejected = true;
        while rejected {
            rejected = false;
            for pl in plans.iter_mut() {
                if self.flag(pl.p) & F_TRANSITION == 0 {
                    pl.p = self.candidate(rng, all_full, total);
                    self.prefetch(pl.p);
                    rejected = true;
                }
            }
        }
    }

    /// The alive rows `[lo, hi)` (absolute) of env `e`'s episodes that have ended and are whole
    /// in the ring, and the number of transitions among them: the running episode is left out,
    /// and so is the oldest one once the ring has overwritten its first steps.
    fn finished_range(&self, e: usize) -> (u64, u64, u64) {
        let s = &self.envs[e];
        if s.head == 0 {
            return (0, 0, 0);
        }
        let mut lo = self.alive_lo(e);
        let (hi, open_transitions) = if s.open {
            let start = self.ep_start[self.ep_rec(e, s.next_ep - 1)].max(lo);
            (start, (s.head - 1).saturating_sub(start))
        } else {
            (s.head, 0)
        };
        let mut transitions = s.n_trans.saturating_sub(open_transitions);
        if lo < hi {
            let rec = self.ep_rec(e, self.ep_id(self.phys(e, lo)));
            if self.ep_start[rec] < lo {
                // closed (it lies before the running one); its rows lo .. end - 1 are transitions
                let end = self.ep_end[rec];
                transitions = transitions.saturating_sub(end - lo);
                lo = end + 1;
            }
        }
        (lo, hi.max(lo), transitions)
    }

    /// Draw B rows uniformly among the transitions of finished, whole episodes (see
    /// [`Storage::finished_range`]) into `plans[i].p`, rejecting terminal rows.
    ///
    /// Errors: `Usage` while no episode has finished.
    pub(crate) fn draw_finished(&self, rng: &mut Rng, plans: &mut [Plan]) -> Result<()> {
        let ranges: Vec<(u64, u64, u64)> =
            (0..self.num_envs).map(|e| self.finished_range(e)).collect();
        if ranges.iter().all(|r| r.2 == 0) {
            return Err(CoreError::usage(
                "cannot sample yet: this buffer samples only finished episodes and none has \
                 ended; start learning after more steps than the longest episode takes \
                 (learning_starts)",
            ));
        }
        let total: u64 = ranges.iter().map(|r| r.1 - r.0).sum();
        for pl in plans.iter_mut() {
            loop {
                let mut r = rng.below(total);
                let mut e = 0;
                while r >= ranges[e].1 - ranges[e].0 {
                    r -= ranges[e].1 - ranges[e].0;
                    e += 1;
                }
                let p = self.phys(e, ranges[e].0 + r);
                if self.flag(p) & F_TRANSITION != 0 {
                    pl.p = p;
                    break;
                }
            }
        }
        Ok(())
    }

    /// Plans for the given rows, each of which must hold a transition.
    ///
    /// Errors: `InvalidValue` for an index out of range, a stale one (see [`crate::index`]) or
    /// one whose row holds no transition.
    pub(crate) fn plans_at(&self, idx: &[i64], plans: &mut [Plan]) -> Result<()> {
        for (pl, &i) in plans.iter_mut().zip(idx) {
            let p = self.current_row(i)?;
            if self.transition_abs(p).is_none() {
                return Err(CoreError::value(format!(
                    "index {i} does not hold a transition (rows are 0..{}; a terminal row, the \
                     newest row of a running episode and unwritten rows hold none)",
                    self.rows
                )));
            }
            pl.p = p;
        }
        Ok(())
    }

    /// Fill each plan's window from its row p: m = min(n, first k >= 1 whose row t + k is not a
    /// transition). Row t + k − 1 being a transition means row t + k holds its next observation
    /// in the same episode: another transition, the terminal row, or the open row of a running
    /// episode. So the window stops exactly at the episode end or the newest stored step,
    /// reading only adjacent records. HER also needs the episode bounds. The draw has already
    /// brought rows t .. t + `fetched` (exclusive) of each plan into cache.
    pub(crate) fn plan_windows(
        &self,
        plans: &mut [Plan],
        n_step: usize,
        fetched: usize,
        need_bounds: bool,
    ) -> Result<()> {
        // the window reads rows t .. t + n: keep the next PREFETCH_AHEAD plans' rows in flight
        let (from, rows) = (
            fetched.min(n_step + 1),
            (n_step + 1).saturating_sub(fetched),
        );
        let ahead = |pl: &Plan| {
            if rows > 0 {
                // (from <= 2 <= seg_len rows)
                let p = self.row_after(pl.p, from);
                self.prefetch_rows(p, rows, 64 * (2 + rows * self.schema.rec / 64))
            }
        };
        plans.iter().take(PREFETCH_AHEAD).for_each(ahead);
        for i in 0..plans.len() {
            if let Some(next) = plans.get(i + PREFETCH_AHEAD) {
                ahead(next);
            }
            // HER: the episode record of a plan whose row is (by now) in cache, so that its
            // bounds are too when its turn comes
            if need_bounds {
                if let Some(mid) = plans.get(i + PREFETCH_AHEAD / 2) {
                    self.prefetch_episode(mid.p);
                }
            }
            let pl = &mut plans[i];
            let p = pl.p;
            let mut last = p;
            let mut q = self.next_row(p);
            let mut m = 1u64;
            while (m as usize) < n_step && self.flag(q) & F_TRANSITION != 0 {
                last = q;
                q = self.next_row(q);
                m += 1;
            }
            pl.env = self.env_of(p);
            pl.m = m;
            pl.q = q;
            pl.last = last;
            pl.goal_row = usize::MAX;
            if need_bounds {
                let (e, t) = self.abs_of(p).ok_or_else(internal_row_error)?;
                let (start, end) = self.bounds_at(e, p);
                pl.t = t;
                pl.start = start;
                pl.end = end;
            }
        }
        Ok(())
    }

    /// The common case (uniform, no priorities, no relabeling) in one pass over the batch: draw,
    /// check, walk the n-step window (as `plan_windows`), write the scalar fields, with the
    /// records of the next `PREFETCH_AHEAD` candidates and their windows already in flight;
    /// then copy the columns of the chosen rows (now in cache) one column at a time.
    ///
    /// Candidates form one queue in draw order, topped up to `min(B - i, PREFETCH_AHEAD)`
    /// before sample i takes its first valid one, so a rejected candidate (a row that holds no
    /// transition) is replaced by one already in flight: with many short env segments, where up
    /// to half of all alive rows are rejected, no retry waits for memory.
    ///
    /// Records of more than [`STAGED_PREFETCH_BYTES`] in all (which do not stay in the caches)
    /// are prefetched in two stages: a candidate's first line (its flag, which decides whether it
    /// is taken) when it is drawn, its whole window only [`WINDOW_AHEAD`] candidates before its
    /// turn. Requesting every line of 12 windows at once puts more misses in flight than the
    /// miss buffers hold, and the requests past them are dropped. Smaller buffers skip the second
    /// stage's work.
    ///
    /// With `FLOOR`, the benchmarks' floor instead (see [`Storage::floor_gather`]).
    pub(crate) fn sample_fused<const FLOOR: bool>(
        &self,
        rng: &mut Rng,
        pairs: &mut RowPairs,
        b: usize,
        n_step: usize,
        gamma: f64,
        out: &mut BatchOut<'_>,
    ) {
        if self.bytes().len() > STAGED_PREFETCH_BYTES {
            self.sample_fused_with::<true, FLOOR>(rng, pairs, b, n_step, gamma, out);
        } else {
            self.sample_fused_with::<false, FLOOR>(rng, pairs, b, n_step, gamma, out);
        }
    }

    /// [`Storage::sample_fused`], with the two-stage prefetch or without.
    #[inline(always)]
    fn sample_fused_with<const STAGED: bool, const FLOOR: bool>(
        &self,
        rng: &mut Rng,
        pairs: &mut RowPairs,
        b: usize,
        n_step: usize,
        gamma: f64,
        out: &mut BatchOut<'_>,
    ) {
        let (all_full, total) = self.alive_rows();
        let sc = &self.schema;
        pairs.clear();
        // a window reads rows t .. t + n (its next observation included)
        let (ahead_rows, ahead_bytes) = (n_step + 1, 64 * (2 + (n_step + 1) * sc.rec / 64));
        // candidates taken .. drawn are queued, candidate k in slot k % 16 (at most
        // PREFETCH_AHEAD < 16 at a time)
        let mut queue = [0usize; 16];
        // candidates taken .. windowed have their whole window requested (STAGED)
        let (mut drawn, mut taken, mut windowed) = (0usize, 0usize, 0usize);
        // the scalar outputs cut to B rows once, so that the loop's writes need no bounds checks
        let (rew_out, term_out, trunc_out) = (
            &mut out.rew[..b],
            &mut out.terminated[..b],
            &mut out.truncated[..b],
        );
        let (disc_out, idx_out) = (&mut out.discount[..b], &mut out.indices[..b]);
        for i in 0..b {
            let p = loop {
                while drawn - taken < PREFETCH_AHEAD.min(b - i) {
                    let c = self.candidate(rng, all_full, total);
                    if STAGED {
                        self.prefetch_bytes(c * sc.rec, 1);
                    } else {
                        self.prefetch_rows(c, ahead_rows, ahead_bytes);
                    }
                    queue[drawn % 16] = c;
                    drawn += 1;
                }
                if STAGED {
                    while windowed < drawn.min(taken + WINDOW_AHEAD) {
                        self.prefetch_rows(queue[windowed % 16], ahead_rows, ahead_bytes);
                        windowed += 1;
                    }
                }
                let c = queue[taken % 16];
                taken += 1;
                if FLOOR || self.flag(c) & F_TRANSITION != 0 {
                    break c;
                }
            };
            if FLOOR {
                // the window's rows read as they come: the rewards of rows t .. t + n - 1 summed
                // as stored, the observation of row t + n
                let (mut q, mut acc) = (self.next_row(p), self.rew(p));
                for _ in 1..n_step {
                    acc += self.rew(q);
                    q = self.next_row(q);
                }
                pairs.push(p, q);
                rew_out[i] = acc;
                term_out[i] = self.term(p);
                trunc_out[i] = self.trunc(p);
                idx_out[i] = p as i64;
                continue;
            }
            // the window: m = min(n, first k >= 1 whose row t + k is not a transition)
            let mut last = p;
            let mut q = self.next_row(p);
            let mut acc = self.rew(p) as f64;
            let mut g = gamma;
            let mut m = 1;
            while m < n_step && self.flag(q) & F_TRANSITION != 0 {
                acc += g * self.rew(q) as f64;
                g *= gamma;
                last = q;
                q = self.next_row(q);
                m += 1;
            }
            pairs.push(p, q);
            let term = self.term(last);
            rew_out[i] = acc as f32;
            term_out[i] = term;
            trunc_out[i] = self.trunc(last);
            disc_out[i] = discount(g, term);
            idx_out[i] = p as i64;
        }
        // the rows' lines are in cache now: copy the columns, one specialised loop per column
        self.gather_columns(pairs, out);
    }

    /// The benchmarks' floor (issue 20): the plainest fast gather of the bytes a `sample(B)`
    /// (or `sample(B, n_step)`) returns, with none of its semantics. `sample_fused`'s pipeline
    /// (the same draw, the same prefetch schedule, the same column copies) with its per-row work
    /// taken out: every drawn alive row t is taken (transition or not); its observation, step
    /// columns and flags, the observation of row t + n (in its env segment's ring order) and the
    /// plain sum of the rewards of rows t .. t + n - 1 are copied into `out`, its index into
    /// `out.indices`. No validity check, no window cut at an episode end, no discount
    /// (`out.discount` is left as it is). Not part of the buffer's API. `n_step` must be in
    /// `1 ..= seg_len`.
    ///
    /// A bare loop that draws all B rows first and then gathers them with the same prefetch
    /// distance is slower than `sample` on buffers out of cache: its iterations are so short
    /// that 12 rows ahead is less time ahead than a DRAM miss takes (measured at 200k and 1M).
    pub(crate) fn floor_gather(
        &self,
        rng: &mut Rng,
        rows: &mut RowPairs,
        n_step: usize,
        out: &mut BatchOut<'_>,
    ) {
        self.sample_fused::<true>(rng, rows, out.rew.len(), n_step, 0.0, out);
    }

    /// Copy the columns of the rows in `rows` into `out`: observations of `rows.t` and
    /// `rows.next`, step columns of `rows.t`, one column at a time (see [`crate::mem::gather_column`];
    /// stacks of frames are rebuilt by `Storage::gather_stacks`).
    fn gather_columns(&self, rows: &RowPairs, out: &mut BatchOut<'_>) {
        let (sc, bytes) = (&self.schema, self.bytes());
        let (t, next) = (GatherRows::new(&rows.t), GatherRows::new(&rows.next));
        for (k, c) in sc.obs.iter().enumerate() {
            if c.stack > 1 {
                self.gather_stacks(c, &rows.t, &rows.next, out.obs[k], out.obs_next[k]);
                continue;
            }
            gather_rows(bytes, sc.rec, c.offset, c.item_bytes, t, out.obs[k]);
            gather_rows(bytes, sc.rec, c.offset, c.item_bytes, next, out.obs_next[k]);
        }
        for (k, c) in sc.step.iter().enumerate() {
            gather_rows(bytes, sc.rec, c.offset, c.item_bytes, t, out.step[k]);
        }
    }

    /// Gather the planned samples: observations of rows t and t + m, step columns of row t, the
    /// n-step return, flags and discount of the window.
    pub(crate) fn gather(
        &self,
        plans: &[Plan],
        pairs: &mut RowPairs,
        gamma: f64,
        out: &mut BatchOut<'_>,
    ) {
        pairs.clear();
        for (i, pl) in plans.iter().enumerate() {
            // (plan_windows has read every plan's rows: they are in cache)
            pairs.push(pl.p, pl.q);
            let (rew, g_m) = if pl.m == 1 {
                (self.rew(pl.p) as f64, gamma)
            } else {
                let mut r = pl.p;
                let rews = (0..pl.m).map(|_| {
                    let x = self.rew(r) as f64;
                    r = self.next_row(r);
                    x
                });
                discounted_sum(rews, gamma)
            };
            let term = self.term(pl.last);
            out.rew[i] = rew as f32;
            out.terminated[i] = term;
            out.truncated[i] = self.trunc(pl.last);
            out.discount[i] = discount(g_m, term);
            out.indices[i] = pl.p as i64;
        }
        self.gather_columns(pairs, out);
    }
}

/// A sample's discount `gamma^m (1 - terminated)` as float32, from `g_m = gamma^m` (finite and
/// not negative) and the window's last terminated flag (0 or 1): `g_m` or 0, the same bits as
/// the product, without its conversions.
#[inline]
fn discount(g_m: f64, terminated: u8) -> f32 {
    if terminated == 0 {
        g_m as f32
    } else {
        0.0
    }
}

/// `sum_k gamma^k r_k` in f64 (Sutton & Barto 2018, eq. 7.1), the first term taken as is, so that
/// a window of `-0.0` rewards (gymnasium-robotics' sparse reward on success) sums to `-0.0`, as
/// a float sum of them does in NumPy; 0 for no terms. Returns (the sum, gamma^m) for m terms.
pub(crate) fn discounted_sum(rews: impl Iterator<Item = f64>, gamma: f64) -> (f64, f64) {
    let mut acc: Option<f64> = None;
    let mut disc = 1.0f64;
    for r in rews {
        let term = disc * r;
        acc = Some(acc.map_or(term, |a| a + term));
        disc *= gamma;
    }
    (acc.unwrap_or(0.0), disc)
}

/// Only alive transition rows are ever drawn; reaching this is a bug in the core.
#[cold]
fn internal_row_error() -> CoreError {
    CoreError::corrupt("rlcore internal error: drew a row that holds no data; please report it")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::schema::ColumnSpec;

    #[test]
    fn batch_out_is_assembled_from_the_layout_and_refuses_misaligned_slices() {
        let sc = Schema::new(
            vec![ColumnSpec::new("obs", DType::U8, vec![3])],
            vec![ColumnSpec::new("act", DType::F32, vec![])],
        )
        .unwrap(); // ok: test
        let b = 2;
        let sizes: Vec<usize> = sc.batch_fields(true).map(|f| b * f.item_bytes()).collect();
        let mut words = vec![0u64; 64];
        let mut assemble = |shift: usize, fields: usize| -> Result<()> {
            let mut rest = &mut crate::mem::bytes_of_mut(&mut words)[shift..];
            let mut slices = Vec::new();
            for &n in &sizes[..fields] {
                let (s, r) = rest.split_at_mut(n.div_ceil(8) * 8);
                slices.push(&mut s[..n]);
                rest = r;
            }
            let out = BatchOut::from_fields(sc.batch_fields(true).zip(slices))?;
            out.check(&sc, b, true)
        };
        assert_eq!(assemble(0, sizes.len()), Ok(()));
        assert!(
            matches!(assemble(1, sizes.len()), Err(CoreError::Usage(m)) if m.contains("out.rew"))
        );
        assert!(matches!(
            assemble(0, sizes.len() - 3),
            Err(CoreError::Shape(_))
        ));
    }
}
