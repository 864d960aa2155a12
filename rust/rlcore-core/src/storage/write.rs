//! The writes of `add`/`extend`: the row-by-row path, the bulk path (column payloads copied
//! afterwards one column at a time), the run path of one env's consecutive steps and the usual
//! path of one array observation; every transition ends in [`Storage::finish_transition`].

use super::*;

/// Calls with at least this many rows take the bulk path of [`Storage::write_rows`] (below it
/// the bookkeeping of the deferred copies costs more than it saves).
const BULK_ROWS: usize = 32;

/// How far ahead of its write [`Storage::write_run`] fetches the ring's rows (their flags are
/// read before they are overwritten; 16 rows measured 20.7 µs per 1,000-row extend, 64 rows
/// 17.2 µs).
const RUN_PREFETCH_ROWS: usize = 64;

/// The column payload writes of one bulk call in call order: observation columns (source 0 =
/// `obs`, 1 = `obs_next`; one list, since a ring that wraps within the call writes a row from
/// either, and the later write must win), step columns (source 0); and per env the input row
/// whose `obs_next` this call left at the env's open row.
struct Deferred {
    obs: Vec<Span>,
    step: Vec<Span>,
    pending: Vec<usize>,
}

impl Deferred {
    fn new(num_envs: usize, rows: usize) -> Self {
        Deferred {
            obs: Vec::with_capacity(rows + rows / 8),
            step: Vec::with_capacity(rows),
            pending: vec![usize::MAX; num_envs],
        }
    }
    fn pending(&self, e: usize) -> Option<usize> {
        Some(self.pending[e]).filter(|&j| j != usize::MAX)
    }
    fn one(row: usize, src: u8, at: usize) -> Span {
        Span {
            row,
            src,
            at,
            len: 1,
        }
    }
}

impl Storage {
    /// Write the checked input rows, row i into env `env_of(i)`, skipping masked rows; `per` is
    /// told about every transition dropped and written.
    ///
    /// Calls of many rows whose columns need no cast (the input dtype is the column's, and not
    /// bool) take the bulk path: the rows' bookkeeping (episodes, flags, rewards, the ring,
    /// priorities) runs row by row as always, while the column payloads are recorded and copied
    /// afterwards one column at a time ([`scatter_column`]), in the same order, so the result
    /// is byte for byte the same. The continuity check then compares each observation with the
    /// input `obs_next` that the env's previous row of this call left at its open row.
    pub(crate) fn write_rows(
        &mut self,
        s: &Checked<'_>,
        env_of: impl Fn(usize) -> usize,
        mut per: Option<&mut PerState>,
    ) -> AddOutcome {
        let n = s.n;
        let mut out = AddOutcome {
            rows: SmallVec::with_capacity(n),
            done: Vec::new(),
        };
        let mut bulk = (n >= BULK_ROWS && self.copies_without_cast(s))
            .then(|| Deferred::new(self.num_envs, n));
        // runs of rows that continue one env's open episode take the run path (one env, no
        // frame stacks, no mask: an offline dataset or one env's chunk)
        let runs = bulk.is_some() && self.num_envs == 1 && self.k1 == 0 && s.mask.is_none();
        let mut i = 0;
        while i < n {
            if s.mask.as_ref().is_some_and(|m| m.data[i] == 0) {
                out.rows.push(-1);
                i += 1;
                continue;
            }
            if let (true, Some(d)) = (runs, bulk.as_mut()) {
                let len = self.run_len(s, i, d);
                if len > 0 {
                    self.write_run(s, i, len, per.as_deref_mut(), d, &mut out);
                    i += len;
                    continue;
                }
            }
            let (row, done) = self.write_step(env_of(i), s, i, per.as_deref_mut(), bulk.as_mut());
            out.rows.push(self.handed_out(row, per.is_some()));
            out.done.extend(done);
            i += 1;
        }
        if let Some(d) = bulk {
            self.apply(s, &d);
        }
        out
    }

    /// How many rows from input row `i` on continue env 0's open episode exactly as
    /// [`Storage::write_step`] would find (bulk call of one env): the open row holds the input
    /// `obs_next` of row `i - 1` (pending), each row's observation equals the previous row's
    /// `obs_next`, no row but the last ends the episode, and the rows written stay inside the
    /// ring segment (no wrap within the run). 0 when row `i` is not such a row.
    fn run_len(&self, s: &Checked<'_>, i: usize, d: &Deferred) -> usize {
        if !self.envs[0].open || i == 0 || d.pending(0) != Some(i - 1) {
            return 0;
        }
        let head = self.envs[0].head;
        // rows written: the open row's fields, then one new row per step (p+1 ..= p+len)
        let room = self.seg - 1 - self.seg_div.rem(head - 1) as usize;
        let mut len = (s.n - i).min(room);
        // the first row that ends the episode is the run's last
        let flag_at = |r: usize| {
            read_flag(s.terminated.dtype, s.terminated.data, r)
                || read_flag(s.truncated.dtype, s.truncated.data, r)
        };
        if let Some(k) = (i..i + len).position(flag_at) {
            len = k + 1;
        }
        // each row's observation must be the previous row's obs_next: the spans compare whole
        // (one memcmp per column); on a mismatch the first differing row ends the run
        for (c, (a, b)) in self.schema.obs.iter().zip(s.obs.iter().zip(&s.obs_next)) {
            let rb = c.io_bytes();
            let (x, y) = (
                &a.data[i * rb..(i + len) * rb],
                &b.data[(i - 1) * rb..(i - 1 + len) * rb],
            );
            if x != y {
                len = x
                    .chunks_exact(rb)
                    .zip(y.chunks_exact(rb))
                    .position(|(u, v)| u != v)
                    .unwrap_or(len);
            }
        }
        len
    }

    /// Write input rows `i .. i + len` of env 0 (see [`Storage::run_len`]): the same bytes,
    /// counts, priorities and outcome as `len` calls of [`Storage::write_step`], with the column
    /// payloads recorded as two runs.
    fn write_run(
        &mut self,
        s: &Checked<'_>,
        i: usize,
        len: usize,
        per: Option<&mut PerState>,
        d: &mut Deferred,
        out: &mut AddOutcome,
    ) {
        // the usual dtypes (float32 rewards, one-byte flags) read without a dtype match per row
        let (rw, te, tr) = (s.rew, s.terminated, s.truncated);
        if rw.dtype == DType::F32 && te.dtype.size() == 1 && tr.dtype.size() == 1 {
            let rew = |r: usize| {
                let b = &rw.data[r * 4..r * 4 + 4];
                f32::from_ne_bytes([b[0], b[1], b[2], b[3]])
            };
            let flags = |r: usize| (te.data[r] != 0, tr.data[r] != 0);
            self.write_run_rows(i, len, per, d, out, rew, flags);
        } else {
            let rew = |r: usize| read_f64(rw.dtype, rw.data, r) as f32;
            let flags = |r: usize| {
                (
                    read_flag(te.dtype, te.data, r),
                    read_flag(tr.dtype, tr.data, r),
                )
            };
            self.write_run_rows(i, len, per, d, out, rew, flags);
        }
    }

    /// [`Storage::write_run`] with the rewards and flags of input row r read by `rew(r)` and
    /// `flags(r)` (terminated, truncated).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn write_run_rows(
        &mut self,
        i: usize,
        len: usize,
        mut per: Option<&mut PerState>,
        d: &mut Deferred,
        out: &mut AddOutcome,
        rew_at: impl Fn(usize) -> f32,
        flags_at: impl Fn(usize) -> (bool, bool),
    ) {
        let e = 0;
        let rec = self.schema.rec;
        let cur0 = self.envs[e].head - 1;
        let p0 = self.phys(e, cur0);
        let ep = self.envs[e].next_ep - 1;
        let seg = self.seg as u64;
        let mut ep_return = self.envs[e].ep_return;
        let mut dropped = 0u64;
        let rows = crate::mem::bytes_of(&self.data).len() / rec;
        for k in 0..len {
            let r = i + k;
            let (p, cur) = (p0 + k, cur0 + k as u64);
            // the ring rows ahead are cold (their flags are read before they are overwritten)
            if p + RUN_PREFETCH_ROWS < rows {
                crate::mem::prefetch(
                    &crate::mem::bytes_of(&self.data)[(p + RUN_PREFETCH_ROWS) * rec],
                );
            }
            let rew = rew_at(r);
            let (term, trunc) = flags_at(r);
            // the open row's transition fields; the next row is claimed
            let (np, nabs) = (p + 1, cur + 1);
            let retire = nabs >= seg && self.flag(np) & F_TRANSITION != 0;
            let data = crate::mem::bytes_of_mut(&mut self.data);
            let o = p * rec;
            data[o + OFF_FLAGS] |= F_TRANSITION;
            data[o + OFF_TERM] = term as u8;
            data[o + OFF_TRUNC] = trunc as u8;
            data[o + OFF_REW..o + OFF_REW + 4].copy_from_slice(&rew.to_ne_bytes());
            let no = np * rec;
            data[no..no + 4].fill(0);
            data[no + OFF_EP_ID..no + OFF_EP_ID + 8].copy_from_slice(&ep.to_ne_bytes());
            if let Some(per) = per.as_deref_mut() {
                per.on_write(p);
                if retire {
                    per.on_drop(np);
                }
            }
            dropped += u64::from(retire);
            self.fill.on_claim(e, nabs);
            ep_return += rew as f64;
            out.rows.push(if per.is_some() {
                self.index_at(e, cur)
            } else {
                p as i64
            });
        }
        let st = &mut self.envs[e];
        st.head += len as u64;
        st.n_trans = st.n_trans + len as u64 - dropped;
        st.ep_return = ep_return;
        st.ep_len += len as u64;
        self.transitions = self.transitions + len as u64 - dropped;
        let (step, obs) = (
            Span {
                row: p0,
                src: 0,
                at: i,
                len,
            },
            Span {
                row: p0 + 1,
                src: 1,
                at: i,
                len,
            },
        );
        d.step.push(step);
        d.obs.push(obs);
        let last = i + len - 1;
        d.pending[e] = last;
        let (term, trunc) = flags_at(last);
        if term || trunc {
            out.done
                .push(self.end_episode(e, ep, p0 + len, cur0 + len as u64));
        }
    }

    /// Whether every observation and step column of the input holds the column's own dtype (not
    /// bool, which is stored as 0/1), so that its rows are the column's bytes.
    fn copies_without_cast(&self, s: &Checked<'_>) -> bool {
        let same = |col: &Column, a: &Array<'_>| {
            a.dtype == col.spec.dtype
                && a.dtype != DType::Bool
                && a.row_bytes(a.ndim() - col.spec.shape.len()) == col.io_bytes()
        };
        let sc = &self.schema;
        sc.obs.iter().zip(&s.obs).all(|(c, a)| same(c, a))
            && sc.obs.iter().zip(&s.obs_next).all(|(c, a)| same(c, a))
            && sc.step.iter().zip(&s.step).all(|(c, a)| same(c, a))
    }

    /// Copy the recorded column payloads of a bulk call (see [`Storage::write_rows`]).
    fn apply(&mut self, s: &Checked<'_>, d: &Deferred) {
        self.apply_spans(s, &d.obs, &d.step);
    }

    /// Copy column payloads: `obs` spans into the observation columns, `step` spans into the
    /// step columns.
    fn apply_spans(&mut self, s: &Checked<'_>, obs: &[Span], step: &[Span]) {
        let (schema, data) = (&self.schema, crate::mem::bytes_of_mut(&mut self.data));
        for (k, c) in schema.obs.iter().enumerate() {
            let srcs = [s.obs[k].data, s.obs_next[k].data];
            scatter_column(data, schema.rec, c.offset, c.item_bytes, obs, srcs);
        }
        for (k, c) in schema.step.iter().enumerate() {
            let srcs = [s.step[k].data, s.step[k].data];
            scatter_column(data, schema.rec, c.offset, c.item_bytes, step, srcs);
        }
    }

    /// Claim the next row of env `e`'s ring, dropping whatever it held.
    fn claim_row(&mut self, e: usize, mut per: Option<&mut PerState>) -> (u64, usize) {
        let abs = self.envs[e].head;
        let p = self.phys(e, abs);
        if abs >= self.seg as u64 && self.flag(p) & F_TRANSITION != 0 {
            self.retire(e, p, per.as_deref_mut());
        }
        let o = p * self.schema.rec;
        self.bytes_mut()[o..o + 4].fill(0);
        self.fill.on_claim(e, abs);
        self.envs[e].head = abs + 1;
        if self.k1 > 0 && abs >= self.seg as u64 {
            self.retire_broken_stacks(e, abs, per);
        }
        (abs, p)
    }

    /// Row `p` of env `e` stops holding a sampleable transition.
    #[inline]
    pub(crate) fn retire(&mut self, e: usize, p: usize, per: Option<&mut PerState>) {
        self.envs[e].n_trans -= 1;
        self.transitions -= 1;
        if let Some(per) = per {
            per.on_drop(p);
        }
    }

    /// Write frame `j` of input row `i` (the whole row: `j = 0` of an unstacked column) at
    /// row p.
    pub(crate) fn write_obs(&mut self, p: usize, given: &[&Array<'_>], i: usize, j: usize) {
        self.write_columns(false, p, given, i, j);
    }

    /// [`Storage::write_obs`] for the observation columns, or (`step`) for the step columns
    /// (`act`, then the extras; unstacked, so `j = 0`), each from its array in `given`.
    fn write_columns(&mut self, step: bool, p: usize, given: &[&Array<'_>], i: usize, j: usize) {
        let rec = self.schema.rec;
        let cols = if step {
            &self.schema.step
        } else {
            &self.schema.obs
        };
        let data = crate::mem::bytes_of_mut(&mut self.data);
        for (col, a) in cols.iter().zip(given.iter()) {
            let rb = a.row_bytes(a.ndim() - col.spec.shape.len()) / col.stack;
            let f = i * col.stack + j;
            let src = &a.data[f * rb..(f + 1) * rb];
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
    fn obs_equal(&mut self, e: usize, p: usize, given: &[&Array<'_>], i: usize) -> bool {
        if self.k1 > 0 {
            return self.stack_equal(e, p, given, i);
        }
        self.obs_equal_at(p, given, i)
    }

    /// As [`Storage::obs_equal`] for env `e`'s open row p during a bulk call: where this call
    /// already gave that row its observation (input `obs_next` row `j`, not yet copied), the
    /// given observation is compared with that input row; else with the stored row.
    fn obs_equal_bulk(
        &mut self,
        e: usize,
        p: usize,
        s: &Checked<'_>,
        i: usize,
        bulk: Option<&Deferred>,
    ) -> bool {
        match bulk.and_then(|d| d.pending(e)) {
            // (no casts on the bulk path: an input row is the column's bytes)
            Some(j) => self
                .schema
                .obs
                .iter()
                .zip(s.obs.iter().zip(&s.obs_next))
                .all(|(c, (a, b))| {
                    let rb = c.io_bytes();
                    same_bytes(&a.data[i * rb..(i + 1) * rb], &b.data[j * rb..(j + 1) * rb])
                }),
            None => self.obs_equal(e, p, &s.obs, i),
        }
    }

    pub(crate) fn obs_equal_at(&mut self, p: usize, given: &[&Array<'_>], i: usize) -> bool {
        let rec = self.schema.rec;
        let data = crate::mem::bytes_of(&self.data);
        for (col, a) in self.schema.obs.iter().zip(given.iter()) {
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

    /// Write row i of the (validated) inputs as the next step of env e; with `bulk`, record
    /// the column payloads there instead of copying them (see [`Storage::write_rows`]).
    fn write_step(
        &mut self,
        e: usize,
        s: &Checked<'_>,
        i: usize,
        mut per: Option<&mut PerState>,
        mut bulk: Option<&mut Deferred>,
    ) -> (usize, Option<EpisodeDone>) {
        // continuity check: the new obs must be the obs_next stored one step earlier
        if self.envs[e].open {
            let cur = self.envs[e].head - 1;
            let pc = self.phys(e, cur);
            let same = match bulk.as_deref() {
                Some(d) => self.obs_equal_bulk(e, pc, s, i, Some(d)),
                None => self.obs_equal(e, pc, &s.obs, i),
            };
            if !same {
                self.cut_open(e);
            }
        }
        if !self.envs[e].open {
            // a stack whose oldest frames are not its first frame repeated (gymnasium's reset
            // padding) brings them as prefix rows, so that its stack is rebuilt exactly
            let pre = if self.k1 > 0 {
                self.prefix_frames(s, i)
            } else {
                0
            };
            let first = self.schema.obs.first().map_or(1, |c| c.stack) - 1 - pre;
            let ep = self.envs[e].next_ep;
            for j in first..first + pre {
                let (_, q) = self.claim_row(e, per.as_deref_mut());
                match bulk.as_deref_mut() {
                    Some(d) => d
                        .obs
                        .push(Deferred::one(q, 0, i * (self.k1 as usize + 1) + j)),
                    None => self.write_obs(q, &s.obs, i, j),
                }
                self.set_flag(q, F_PREFIX);
                self.set_ep_id(q, ep);
            }
            let (abs, p) = self.claim_row(e, per.as_deref_mut());
            let newest = self.k1 as usize;
            match bulk.as_deref_mut() {
                Some(d) => d.obs.push(Deferred::one(p, 0, i * (newest + 1) + newest)),
                None => self.write_obs(p, &s.obs, i, newest),
            }
            self.start_episode(e, abs, p, pre);
        }
        // transition fields at the open row
        let cur = self.envs[e].head - 1;
        let p = self.phys(e, cur);
        let r = read_f64(s.rew.dtype, s.rew.data, i);
        let term = read_flag(s.terminated.dtype, s.terminated.data, i);
        let trunc = read_flag(s.truncated.dtype, s.truncated.data, i);
        match bulk.as_deref_mut() {
            Some(d) => d.step.push(Deferred::one(p, 0, i)),
            None => self.write_columns(true, p, &s.step, i, 0),
        }
        // next observation in the next row
        let (np, done) = self.finish_transition(e, p, r, term, trunc, per);
        let newest = self.k1 as usize;
        match bulk {
            Some(d) => {
                d.obs.push(Deferred::one(np, 1, i * (newest + 1) + newest));
                d.pending[e] = i;
            }
            None => self.write_obs(np, &s.obs_next, i, newest),
        }
        (p, done)
    }

    /// Write row i of a [`Usual`] call (one array observation column and `act`, both in the
    /// inputs' exact dtypes, not bool; no frame stack) as the next step of env e: the same
    /// bytes, counts and outcome as [`Storage::write_step`], with each observation compared
    /// and copied as one span.
    fn write_usual_step(
        &mut self,
        e: usize,
        u: &Usual<'_>,
        i: usize,
        mut per: Option<&mut PerState>,
    ) -> (usize, Option<EpisodeDone>) {
        debug_assert!(self.k1 == 0 && self.schema.obs.len() == 1 && self.schema.step.len() == 1);
        let (rec, off, ob) = (self.schema.rec, self.schema.obs[0].offset, u.obs_bytes);
        let obs = &u.obs.data[i * ob..(i + 1) * ob];
        if self.envs[e].open {
            let pc = self.phys(e, self.envs[e].head - 1);
            if !same_bytes(obs, &self.bytes()[pc * rec + off..pc * rec + off + ob]) {
                self.cut_open(e);
            }
        }
        if !self.envs[e].open {
            let (abs, p) = self.claim_row(e, per.as_deref_mut());
            crate::mem::copy_row(&mut self.bytes_mut()[p * rec + off..][..ob], obs);
            self.start_episode(e, abs, p, 0);
        }
        let cur = self.envs[e].head - 1;
        let p = self.phys(e, cur);
        let (aoff, ab) = (self.schema.step[0].offset, u.act_bytes);
        crate::mem::copy_row(
            &mut self.bytes_mut()[p * rec + aoff..][..ab],
            &u.act.data[i * ab..(i + 1) * ab],
        );
        let r = read_f64(u.rew.dtype, u.rew.data, i);
        let (term, trunc) = (u.terminated.data[i] != 0, u.truncated.data[i] != 0);
        let (np, done) = self.finish_transition(e, p, r, term, trunc, per);
        crate::mem::copy_row(
            &mut self.bytes_mut()[np * rec + off..][..ob],
            &u.obs_next.data[i * ob..(i + 1) * ob],
        );
        (p, done)
    }

    /// [`Storage::write_rows`] for a [`Usual`] call of one step of every env (row i is env i).
    pub(crate) fn write_usual(
        &mut self,
        u: &Usual<'_>,
        mut per: Option<&mut PerState>,
    ) -> AddOutcome {
        let mut out = AddOutcome {
            rows: SmallVec::with_capacity(u.n),
            done: Vec::new(),
        };
        for i in 0..u.n {
            let (row, done) = self.write_usual_step(i, u, i, per.as_deref_mut());
            out.rows.push(self.handed_out(row, per.is_some()));
            out.done.extend(done);
        }
        out
    }

    /// The index an add hands out for the transition it just wrote to row `p`: the index naming
    /// it on a prioritized buffer (`per`), else the bare row (see [`crate::index`]).
    #[inline]
    fn handed_out(&self, p: usize, per: bool) -> i64 {
        if per {
            self.index_of(p)
        } else {
            p as i64
        }
    }

    /// Whether a [`Usual`] call can take [`Storage::write_usual`]: no frame stack and no bool
    /// column (bools are stored as 0/1 whatever the input byte, a cast).
    pub(crate) fn takes_usual(&self) -> bool {
        self.k1 == 0
            && self.schema.obs.len() == 1
            && self.schema.step.len() == 1
            && self.schema.obs[0].spec.dtype != DType::Bool
            && self.schema.step[0].spec.dtype != DType::Bool
    }

    /// Cut env e's open episode where the next step's observation is not the one stored at its
    /// open row (the continuity check): its last transition is marked cut and the open row
    /// ends it.
    fn cut_open(&mut self, e: usize) {
        let cur = self.envs[e].head - 1;
        let (pc, last) = (self.phys(e, cur), self.phys(e, cur - 1));
        self.or_flag(last, F_CUT);
        self.or_flag(pc, F_TERMINAL);
        let ep = self.envs[e].next_ep - 1;
        let rec = self.ep_rec(e, ep);
        self.ep_end[rec] = cur;
        self.envs[e].open = false;
    }

    /// Env e's next episode starts at row p (absolute `abs`), which holds its first observation,
    /// after `pre` prefix rows.
    fn start_episode(&mut self, e: usize, abs: u64, p: usize, pre: usize) {
        let st = &mut self.envs[e];
        let ep = st.next_ep;
        st.next_ep += 1;
        st.open = true;
        st.ep_return = 0.0;
        st.ep_len = 0;
        self.set_flag(p, F_EP_START);
        self.set_ep_id(p, ep);
        let rec = self.ep_rec(e, ep);
        self.ep_start[rec] = abs;
        self.ep_end[rec] = OPEN;
        if self.k1 > 0 {
            self.ep_pre[rec] = pre as u8;
        }
    }

    /// The transition at env e's open row p (its step columns already written): its fixed
    /// fields, counts and priority, then the next row claimed for its next observation (the
    /// caller copies that) and, when `term || trunc`, the episode's end. Returns the next row
    /// and the episode that ended.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn finish_transition(
        &mut self,
        e: usize,
        p: usize,
        r: f64,
        term: bool,
        trunc: bool,
        mut per: Option<&mut PerState>,
    ) -> (usize, Option<EpisodeDone>) {
        {
            let o = p * self.schema.rec;
            let data = self.bytes_mut();
            data[o + OFF_FLAGS] |= F_TRANSITION;
            data[o + OFF_TERM] = term as u8;
            data[o + OFF_TRUNC] = trunc as u8;
            data[o + OFF_REW..o + OFF_REW + 4].copy_from_slice(&(r as f32).to_ne_bytes());
        }
        self.envs[e].n_trans += 1;
        self.transitions += 1;
        if let Some(per) = per.as_deref_mut() {
            per.on_write(p);
        }
        let (nabs, np) = self.claim_row(e, per);
        let ep = self.envs[e].next_ep - 1;
        self.set_ep_id(np, ep);
        let st = &mut self.envs[e];
        st.ep_return += r as f32 as f64;
        st.ep_len += 1;
        if !(term || trunc) {
            return (np, None);
        }
        (np, Some(self.end_episode(e, ep, np, nabs)))
    }

    /// Env e's episode `ep` ends: row `np` (absolute `nabs`) holds its final observation.
    fn end_episode(&mut self, e: usize, ep: u64, np: usize, nabs: u64) -> EpisodeDone {
        let st = &mut self.envs[e];
        st.open = false;
        let done = EpisodeDone {
            env: e,
            ret: st.ep_return,
            len: st.ep_len,
        };
        self.set_flag(np, F_TERMINAL);
        let rec = self.ep_rec(e, ep);
        self.ep_end[rec] = nabs;
        done
    }
}
