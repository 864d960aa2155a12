//! Frame-stacked observations (docs/frames.md): a buffer built with
//! `frame_stack = k` is given observations that are stacks `[k, *F]` of the k newest frames
//! (gymnasium's `FrameStackObservation`, stack axis first) and stores only the newest frame of
//! each step, once, in the observation column of its row. The stack of a row is rebuilt at
//! sample time from the rows before it in the same episode.
//!
//! Exact semantics. Let an episode's frames start at absolute row `fs` (its first row). The
//! stack of alive row `a` of that episode is, oldest first,
//!
//! `stack(a)[j] = frame(max(a - (k - 1) + j, fs))`, `j = 0 .. k - 1`,
//!
//! which is gymnasium's default `padding_type="reset"`: the first stacks of an episode repeat
//! its first frame. An episode is written from the first stack `S` it is given: with `r` the
//! largest index such that `S[0] == S[1] == ... == S[r]`, the frames `S[r] .. S[k - 2]` go into
//! `k - 1 - r` *prefix* rows (flag `F_PREFIX`, never transitions) and `S[k - 1]` into the
//! episode's first transition row, so that `stack(first row) == S` byte for byte. A reset
//! stack (`r = k - 1`) needs no prefix row; a zero-padded one (`padding_type="zero"`) one; a
//! stack from the middle of a stream at most `k - 1`. Every later step writes only the newest
//! frame of `obs_next`, whose older `k - 1` frames must be `obs`'s newest `k - 1` (else the
//! add is refused, see [`check_shift`]); a step whose `obs` is not the stack stored for the
//! env's open row cuts the episode there (the continuity check, comparing whole stacks).
//!
//! Eligibility. A transition row `a` is sampleable only while every row its stack reads is
//! alive: `max(a - (k - 1), fs) >= lo` (`lo` the env's oldest alive row). Once the ring
//! overwrites an episode's first frame (`fs < lo`), its first `k - 1` surviving rows
//! `lo .. lo + k - 2` lose their transition flag (`Storage::retire_broken_stacks`, at the
//! claim that overwrote it: at most k - 1 rows per claim), so no draw, uniform, prioritized,
//! n-step or sequence, ever returns them, and `len()` does not count them. Every row after a
//! sampleable row of the same episode is sampleable too, so n-step windows and sequences that
//! start at a sampleable row read only live frames; `obs_next` of an episode's last
//! transition is the stack of its terminal row (which holds the final frame).

use crate::dtype::{cast_into, Array, DType};
use crate::error::{CoreError, Result};
use crate::mem::same_bytes;
use crate::per::PerState;
use crate::schema::{Column, Schema};
use crate::storage::{Storage, F_TRANSITION};
use crate::validate::Checked;

/// Whether frame `fa` of `a` and frame `fb` of `b` (frames of `bytes` input bytes each) hold
/// the same values once stored as `col` (inputs of one dtype that is the column's compare by
/// bytes; others after the cast the store makes).
fn frames_equal(a: &Array<'_>, fa: usize, b: &Array<'_>, fb: usize, col: &Column) -> bool {
    let n = a.row_bytes(a.ndim() - col.spec.shape.len()) / col.stack;
    let m = b.row_bytes(b.ndim() - col.spec.shape.len()) / col.stack;
    let (x, y) = (&a.data[fa * n..(fa + 1) * n], &b.data[fb * m..(fb + 1) * m]);
    if a.dtype == b.dtype && a.dtype != DType::Bool {
        return same_bytes(x, y);
    }
    let mut tmp = vec![0u8; 2 * col.item_bytes];
    let (u, v) = tmp.split_at_mut(col.item_bytes);
    cast_into(x, a.dtype, u, col.spec.dtype);
    cast_into(y, b.dtype, v, col.spec.dtype);
    same_bytes(u, v)
}

/// Check that every (unmasked) input row's `obs_next` stack is its `obs` stack shifted by one
/// frame: `obs_next[i][j] == obs[i][j + 1]` for `j < k - 1`, so that storing the newest frame
/// of `obs_next` rebuilds it exactly. No-op for buffers without frame stacking.
///
/// Errors: `InvalidValue` naming the first row and frame that differ.
pub(crate) fn check_shift(schema: &Schema, s: &Checked<'_>) -> Result<()> {
    let (Some(k), Some(col)) = (schema.frame_stack, schema.obs.first()) else {
        return Ok(());
    };
    let (o, on) = (s.obs[0], s.obs_next[0]);
    for i in 0..s.n {
        if s.mask.is_some_and(|m| m.data[i] == 0) {
            continue;
        }
        for j in 0..k - 1 {
            if !frames_equal(on, i * k + j, o, i * k + j + 1, col) {
                return Err(CoreError::value(format!(
                    "obs_next[{i}] is not obs[{i}] shifted by one frame: its frame {j} differs \
                     from frame {} of obs[{i}]. A buffer with frame_stack={k} stores the newest \
                     frame of each step once, so obs_next must be the env's next stack (as \
                     gymnasium's FrameStackObservation returns it); nothing was added",
                    j + 1
                )));
            }
        }
    }
    Ok(())
}

impl Storage {
    /// The absolute row of frame `j` (0 oldest) of the stack at absolute row `a` of an episode
    /// whose frames start at `fs <= a`.
    #[inline]
    fn stack_abs(&self, a: u64, fs: u64, j: usize) -> u64 {
        (a + j as u64).saturating_sub(self.k1).max(fs)
    }

    /// The absolute row where the frames of the episode holding physical row `p` of env `e`
    /// start (its first prefix row, or its first row).
    #[inline]
    pub(crate) fn frames_from(&self, e: usize, p: usize) -> u64 {
        let rec = self.ep_rec(e, self.ep_id(p));
        self.ep_start[rec] - u64::from(self.ep_pre[rec])
    }

    /// The prefix rows input row `i`'s `obs` stack needs to start an episode: `k - 1 - r`, with
    /// `r` the largest index such that its frames `0 ..= r` are equal (see the module docs).
    pub(crate) fn prefix_frames(&self, s: &Checked<'_>, i: usize) -> usize {
        let (Some(col), Some(a)) = (self.schema.obs.first(), s.obs.first()) else {
            return 0;
        };
        let k = col.stack;
        let mut r = 0;
        while r + 1 < k && frames_equal(a, i * k, a, i * k + r + 1, col) {
            r += 1;
        }
        k - 1 - r
    }

    /// Whether input row `i`'s `obs` stack equals the stack stored for env `e`'s open row `p`
    /// (frame by frame, after the cast the store makes).
    pub(crate) fn stack_equal(
        &mut self,
        e: usize,
        p: usize,
        given: &[&Array<'_>],
        i: usize,
    ) -> bool {
        let (Some(col), Some(a)) = (self.schema.obs.first(), given.first()) else {
            return true;
        };
        let k = col.stack;
        let rb = a.row_bytes(a.ndim() - col.spec.shape.len()) / k;
        let cur = self.envs[e].head - 1;
        let fs = self.frames_from(e, p);
        let same_dtype = a.dtype == col.spec.dtype && a.dtype != DType::Bool;
        for j in 0..k {
            let src = &a.data[(i * k + j) * rb..(i * k + j + 1) * rb];
            let stored = self.cell(col, self.phys(e, self.stack_abs(cur, fs, j)));
            let equal = if same_dtype {
                same_bytes(src, stored)
            } else {
                let mut tmp = vec![0u8; col.item_bytes];
                cast_into(src, a.dtype, &mut tmp, col.spec.dtype);
                same_bytes(&tmp, stored)
            };
            if !equal {
                return false;
            }
        }
        true
    }

    /// After env `e` claimed absolute row `abs` over an older one: the transition rows whose
    /// stacks now read an overwritten frame (the first k - 1 surviving rows of an episode whose
    /// first frame is gone) stop being transitions.
    pub(crate) fn retire_broken_stacks(
        &mut self,
        e: usize,
        abs: u64,
        mut per: Option<&mut PerState>,
    ) {
        let lo = self.alive_lo(e);
        for a in lo..(lo + self.k1).min(abs) {
            let p = self.phys(e, a);
            let f = self.flag(p);
            if f & F_TRANSITION != 0 && self.frames_from(e, p) < lo {
                self.clear_flag(p, F_TRANSITION);
                self.retire(e, p, per.as_deref_mut());
            }
        }
    }

    /// Copy the stack `[k, *F]` of alive absolute row `a` of env `e` (frames from `fs`) of
    /// stacked column `col` into `dst` (`k * item_bytes` bytes).
    #[inline]
    pub(crate) fn copy_stack(&self, col: &Column, e: usize, a: u64, fs: u64, dst: &mut [u8]) {
        let fb = col.item_bytes;
        for (j, d) in dst.chunks_exact_mut(fb).enumerate() {
            d.copy_from_slice(self.cell(col, self.phys(e, self.stack_abs(a, fs, j))));
        }
    }

    /// Gather the stacks of stacked column `col` for a batch: `obs[i]` the stack of row
    /// `t[i]`, `next[i]` the stack of row `next[i]` (a later row of the same episode, m rows
    /// on). The `k - m` frames the two stacks share are copied from `obs[i]` (in cache), so a
    /// sample reads `k + min(m, k)` frames from storage.
    pub(crate) fn gather_stacks(
        &self,
        col: &Column,
        t: &[usize],
        next: &[usize],
        obs: &mut [u8],
        obs_next: &mut [u8],
    ) {
        let (fb, k) = (col.item_bytes, col.stack);
        let sb = fb * k;
        let seg = self.seg;
        for (i, (&p, &q)) in t.iter().zip(next).enumerate() {
            // sampled rows are transitions, so alive; an unwritten row is a caller bug
            let Some((e, a)) = self.abs_of(p) else {
                continue;
            };
            let m = if q >= p { q - p } else { q + seg - p };
            let fs = self.frames_from(e, p);
            let (o, on) = (
                &mut obs[i * sb..(i + 1) * sb],
                &mut obs_next[i * sb..(i + 1) * sb],
            );
            self.copy_stack(col, e, a, fs, o);
            for j in 0..k {
                let d = &mut on[j * fb..(j + 1) * fb];
                if j + m < k {
                    d.copy_from_slice(&o[(j + m) * fb..(j + m + 1) * fb]);
                } else {
                    let r = self.phys(e, self.stack_abs(a + m as u64, fs, j));
                    d.copy_from_slice(self.cell(col, r));
                }
            }
        }
    }
}
