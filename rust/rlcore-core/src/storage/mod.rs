//! Episode-contiguous ring storage (docs/replay-buffer.md, "Storage model").
//!
//! Each env owns one contiguous segment of `seg_len = capacity / num_envs` rows used as a ring.
//! An episode of length L occupies L + 1 consecutive rows: L transition rows (holding o_t and the
//! transition fields) and one terminal row holding the final observation. Rows are addressed
//! inside the core by an *absolute* per-env counter (`abs`, never wrapping) so that episode and
//! window arithmetic never confuses the newest rows with the oldest; the physical row is
//! `env * seg_len + abs % seg_len`. This module owns the rows, the per-env ring state, the
//! episode records and the writes of `add`/`extend`; queries are in `episodes`, draws and
//! gathers in `sampling`.

use crate::dtype::{cast_into, read_f64, read_flag, Array, DType};
use crate::error::{CoreError, Result};
use crate::fill::Fill;
use crate::mem::{alloc, same_bytes, scatter_column, FastDiv, Span};
use crate::per::PerState;
use crate::schema::{
    Column, ColumnView, Schema, OFF_EP_ID, OFF_FLAGS, OFF_REW, OFF_TERM, OFF_TRUNC,
};
use crate::validate::{Checked, Usual};
use smallvec::SmallVec;

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
/// Row flag (frame-stacked buffers): the row holds an older frame of its episode's first
/// stack, written before the episode's first transition row (see `frames`); never a transition.
pub const F_PREFIX: u8 = 16;

/// Marks an episode record whose episode is still running.
pub(crate) const OPEN: u64 = u64::MAX;

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
    /// Per input row: the row its transition was written to (on a prioritized buffer the index
    /// naming that transition, see [`crate::index`]), or -1 where masked (inline up to 8 rows:
    /// a collector's add allocates nothing for it).
    pub rows: SmallVec<[i64; 8]>,
    pub done: Vec<EpisodeDone>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct EnvState {
    /// Absolute index of the next row to write (= rows ever written).
    pub head: u64,
    /// Whether an episode is open; then its newest observation is at `head - 1`.
    pub open: bool,
    /// The id the next episode gets (the open or last one is `next_ep - 1`); ids count up per env.
    pub next_ep: u64,
    pub ep_return: f64,
    pub ep_len: u64,
    /// Alive transition rows.
    pub n_trans: u64,
}

mod write;

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

/// The rows, their columns and the episode index.
#[derive(Debug)]
pub struct Storage {
    pub(crate) num_envs: usize,
    pub(crate) seg: usize,
    /// `p / seg` and `abs % seg` without a division instruction (every row write, draw and
    /// index query computes them).
    pub(crate) seg_div: FastDiv,
    pub(crate) rows: usize,
    pub(crate) schema: Schema,
    /// `rows * schema.rec` bytes (as u64 words for 8-byte alignment), allocated once when the
    /// schema is defined.
    pub(crate) data: Box<[u64]>,
    /// Episode records per env, indexed `env * seg + ep % seg`: absolute start and terminal row.
    pub(crate) ep_start: Box<[u64]>,
    pub(crate) ep_end: Box<[u64]>,
    /// Per episode record (frame-stacked buffers): the prefix rows written before `ep_start`,
    /// so that the episode's frames start at `ep_start - ep_pre` (at most k - 1).
    pub(crate) ep_pre: Box<[u8]>,
    /// k - 1 for a buffer of stacks of k frames, else 0 (cached from the schema).
    pub(crate) k1: u64,
    pub(crate) envs: Vec<EnvState>,
    /// Alive rows per env and their total, for O(log N) uniform draws over N envs.
    pub(crate) fill: Fill,
    /// Alive transition rows of all envs (the sum of `envs[e].n_trans`), so `len()` is O(1).
    transitions: u64,

    /// Whether this storage hands out indices that name transitions (prioritized buffers); a
    /// buffer that hands out bare rows refuses an index with a generation as out of range.
    pub(crate) names_transitions: bool,
    /// One observation row, for the continuity check of cast inputs.
    scratch: Vec<u8>,
}

impl Storage {
    /// Empty storage of `capacity` rows split into `num_envs` ring segments, without columns.
    ///
    /// Errors: `InvalidValue` when `capacity / num_envs < 2` or `num_envs == 0`.
    pub(crate) fn new(capacity: usize, num_envs: usize) -> Result<Self> {
        let seg = segment_len_for(capacity, num_envs)?;
        let rows = seg * num_envs;
        Ok(Storage {
            num_envs,
            seg,
            seg_div: FastDiv::new(seg as u64),
            rows,
            schema: Schema::undefined(),
            data: Vec::new().into_boxed_slice(),
            ep_start: alloc(rows, 0u64)?,
            ep_end: alloc(rows, OPEN)?,
            ep_pre: Vec::new().into_boxed_slice(),
            k1: 0,
            envs: vec![EnvState::default(); num_envs],
            fill: Fill::new(num_envs, seg)?,
            transitions: 0,
            names_transitions: false,
            scratch: Vec::new(),
        })
    }

    /// Allocate the rows of `schema` (once: the memory is never reallocated afterwards).
    ///
    /// Errors: `InvalidValue` when the rows cannot be allocated.
    pub(crate) fn define(&mut self, schema: Schema) -> Result<()> {
        let words = self
            .rows
            .checked_mul(schema.rec / 8)
            .ok_or_else(|| CoreError::value("capacity times row size overflows the address space"))?
            .max(1);
        if let Some(k) = schema.frame_stack {
            if self.seg <= k {
                return Err(CoreError::value(format!(
                    "frame_stack={k} needs more than k rows per env: got capacity // num_envs = \
                     {}; use capacity >= {}",
                    self.seg,
                    (k + 1) * self.num_envs
                )));
            }
            self.ep_pre = alloc(self.rows, 0u8)?;
        }
        self.data = alloc(words, 0u64)?;
        self.scratch = vec![0u8; 2 * schema.max_obs_bytes()];
        self.k1 = schema.frame_stack.map_or(0, |k| k as u64 - 1);
        self.schema = schema;
        Ok(())
    }

    /// Undo [`Storage::define`] (a first add whose inputs turned out invalid).
    pub(crate) fn forget_schema(&mut self) {
        self.schema = Schema::undefined();
        self.data = Vec::new().into_boxed_slice();
        self.ep_pre = Vec::new().into_boxed_slice();
        self.k1 = 0;
    }

    /// Bytes of memory the storage holds: row records, episode records, per-env state.
    pub(crate) fn nbytes(&self) -> usize {
        std::mem::size_of_val(&*self.data)
            + std::mem::size_of_val(&*self.ep_start)
            + std::mem::size_of_val(&*self.ep_end)
            + self.ep_pre.len()
            + self.envs.len() * std::mem::size_of::<EnvState>()
            + self.fill.nbytes()
            + self.scratch.len()
    }

    /// Number of sampleable transitions.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.transitions as usize
    }

    /// Recompute the counts kept beside the per-env state (after a load set it directly).
    pub(crate) fn recount(&mut self) {
        self.transitions = self.envs.iter().map(|s| s.n_trans).sum();
        self.fill.rebuild(self.envs.iter().map(|s| s.head));
    }

    /// All row records as bytes.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        crate::mem::bytes_of(&self.data)
    }
    #[inline]
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        crate::mem::bytes_of_mut(&mut self.data)
    }
    #[inline]
    pub(crate) fn flag(&self, p: usize) -> u8 {
        self.bytes()[p * self.schema.rec + OFF_FLAGS]
    }
    #[inline]
    fn set_flag(&mut self, p: usize, v: u8) {
        let o = p * self.schema.rec + OFF_FLAGS;
        self.bytes_mut()[o] = v;
    }
    #[inline]
    pub(crate) fn clear_flag(&mut self, p: usize, v: u8) {
        let o = p * self.schema.rec + OFF_FLAGS;
        self.bytes_mut()[o] &= !v;
    }
    #[inline]
    fn or_flag(&mut self, p: usize, v: u8) {
        let o = p * self.schema.rec + OFF_FLAGS;
        self.bytes_mut()[o] |= v;
    }
    #[inline]
    pub(crate) fn term(&self, p: usize) -> u8 {
        self.bytes()[p * self.schema.rec + OFF_TERM]
    }
    #[inline]
    pub(crate) fn trunc(&self, p: usize) -> u8 {
        self.bytes()[p * self.schema.rec + OFF_TRUNC]
    }
    #[inline]
    pub(crate) fn rew(&self, p: usize) -> f32 {
        let o = p * self.schema.rec + OFF_REW;
        let b = &self.bytes()[o..o + 4];
        f32::from_ne_bytes([b[0], b[1], b[2], b[3]])
    }
    #[inline]
    pub(crate) fn ep_id(&self, p: usize) -> u64 {
        let o = p * self.schema.rec + OFF_EP_ID;
        let mut a = [0u8; 8];
        a.copy_from_slice(&self.bytes()[o..o + 8]);
        u64::from_ne_bytes(a)
    }
    #[inline]
    fn set_ep_id(&mut self, p: usize, v: u64) {
        let o = p * self.schema.rec + OFF_EP_ID;
        self.bytes_mut()[o..o + 8].copy_from_slice(&v.to_ne_bytes());
    }
    /// One column's bytes of row p.
    #[inline]
    pub(crate) fn cell(&self, c: &Column, p: usize) -> &[u8] {
        let o = p * self.schema.rec + c.offset;
        &self.bytes()[o..o + c.item_bytes]
    }

    /// The env owning physical row p.
    #[inline]
    pub(crate) fn env_of(&self, p: usize) -> usize {
        if self.num_envs == 1 {
            return 0;
        }
        self.seg_div.div(p as u64) as usize
    }

    /// The physical row of absolute row `abs` of env `env`.
    #[inline]
    pub(crate) fn phys(&self, env: usize, abs: u64) -> usize {
        env * self.seg + self.seg_div.rem(abs) as usize
    }

    /// The index of episode `ep`'s record of env `e`.
    #[inline]
    pub(crate) fn ep_rec(&self, e: usize, ep: u64) -> usize {
        e * self.seg + self.seg_div.rem(ep) as usize
    }

    /// Next physical row in the same env segment (ring order).
    #[inline]
    pub(crate) fn next_row(&self, p: usize) -> usize {
        self.row_after(p, 1)
    }

    /// One past the last physical row of the env segment holding row p.
    #[inline]
    pub(crate) fn seg_end(&self, p: usize) -> usize {
        (self.env_of(p) + 1) * self.seg
    }

    /// The physical row `k <= seg_len` rows after row p in its env segment's ring order.
    #[inline]
    pub(crate) fn row_after(&self, p: usize, k: usize) -> usize {
        let end = self.seg_end(p);
        if p + k >= end {
            p + k - self.seg
        } else {
            p + k
        }
    }

    /// (env, absolute index) of physical row `p`, or `None` if it was never written.
    #[inline]
    pub(crate) fn abs_of(&self, p: usize) -> Option<(usize, u64)> {
        let e = self.env_of(p);
        let local = (p - e * self.seg) as u64;
        let h = self.envs[e].head;
        if h == 0 {
            return None;
        }
        let seg = self.seg as u64;
        let newest = h - 1;
        // (newest - local) mod seg, without a division instruction (local < seg)
        let r = self.seg_div.rem(newest);
        let diff = if r >= local {
            r - local
        } else {
            r + seg - local
        };
        let alive = h.min(seg);
        if diff >= alive {
            return None;
        }
        Some((e, newest - diff))
    }

    /// The absolute index of the transition row `p` holds, or `None` when it holds none.
    #[inline]
    pub(crate) fn transition_abs(&self, p: usize) -> Option<u64> {
        // a never-written row has no abs (and no record), so its flag is never read
        let (_, a) = self.abs_of(p)?;
        (self.flag(p) & F_TRANSITION != 0).then_some(a)
    }

    /// Oldest alive absolute row of env `e`.
    #[inline]
    pub(crate) fn alive_lo(&self, e: usize) -> u64 {
        self.envs[e].head.saturating_sub(self.seg as u64)
    }

    /// The first sampleable row of env `e`'s episode with record `rec`: its first surviving
    /// transition row, and for stacks of k frames the first whose k frames all survive (once
    /// the ring has overwritten an episode's first frame, its first k - 1 surviving rows hold
    /// no stack; see `frames`).
    #[inline]
    pub(crate) fn sampleable_start(&self, e: usize, rec: usize) -> u64 {
        let (s, lo) = (self.ep_start[rec], self.alive_lo(e));
        if self.k1 == 0 {
            return s.max(lo);
        }
        let frames_from = s - u64::from(self.ep_pre[rec]);
        if frames_from >= lo {
            s
        } else {
            s.max(lo + self.k1)
        }
    }

    /// (first sampleable row, terminal or open row) of the episode holding alive row `abs`
    /// (see [`Storage::sampleable_start`]; the start is at most the end).
    #[inline]
    pub(crate) fn bounds_abs(&self, e: usize, abs: u64) -> (u64, u64) {
        self.bounds_at(e, self.phys(e, abs))
    }

    /// [`Storage::bounds_abs`] of physical row `p` of env `e`.
    #[inline]
    pub(crate) fn bounds_at(&self, e: usize, p: usize) -> (u64, u64) {
        let ep = self.ep_id(p);
        let rec = self.ep_rec(e, ep);
        let end = match self.ep_end[rec] {
            OPEN => self.envs[e].head - 1,
            x => x,
        };
        (self.sampleable_start(e, rec).min(end), end)
    }

    /// A zero-copy view of the column with public name `name` (see [`Schema::locate`]).
    ///
    /// Errors: `Usage` before the columns are defined and for an unknown name.
    pub(crate) fn column_view(&self, name: &str) -> Result<ColumnView> {
        let at = self.schema.locate(name)?;
        Ok(ColumnView::new(
            self.bytes().as_ptr(),
            self.rows,
            self.schema.rec,
            at,
        ))
    }

    /// Forget all data (columns keep their memory and schema).
    pub(crate) fn clear(&mut self) {
        for s in &mut self.envs {
            *s = EnvState::default();
        }
        self.recount();
        let rec = self.schema.rec;
        let rows = if self.schema.is_defined() {
            self.rows
        } else {
            0
        };
        let bytes = self.bytes_mut();
        for p in 0..rows {
            bytes[p * rec..p * rec + 4].fill(0);
        }
        self.ep_end.fill(OPEN);
    }
}
