//! Export and import of the whole buffer state (for save/load and checkpoints).
//!
//! The state is a list of named, typed arrays. Import validates every part and the episode
//! invariants before copying anything, and copies into the existing memory (never reallocates).

use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::mem::{bytes_of, bytes_of_mut, Plain};
use crate::per::MAX_PRIORITY;
use crate::replay::ReplayCore;
use crate::rng::Rng;
use crate::schema::Schema;
use crate::schema::{ColumnSpec, OFF_EP_ID, OFF_FLAGS, OFF_REW, OFF_TERM, OFF_TRUNC};
use crate::storage::{
    segment_len_for, EnvState, F_CUT, F_EP_START, F_PREFIX, F_TERMINAL, F_TRANSITION, OPEN,
};

/// One named array of the state. `bytes` is C-contiguous, native byte order.
#[derive(Debug)]
pub struct StatePart<'a> {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: std::borrow::Cow<'a, [u8]>,
}

impl<'a> StatePart<'a> {
    /// The part `name` holding the bytes of `a`, borrowed.
    pub fn of(name: &str, a: &crate::Array<'a>) -> Self {
        let (dtype, shape) = (a.dtype, a.shape.to_vec());
        StatePart {
            name: name.to_string(),
            dtype,
            shape,
            bytes: a.data.into(),
        }
    }
}

/// Copy saved bytes into plain numbers (lengths were validated by the caller).
fn copy_into<T: Plain>(dst: &mut [T], src: &[u8]) {
    bytes_of_mut(dst).copy_from_slice(src);
}

fn read_u64s(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

/// The name, dtype and shape of one state part.
pub type PartLayout = (String, DType, Vec<usize>);

/// Copy the fields of every row record into per-field arrays (one pass over the records).
/// `fields[k] = (record offset, width, dst)` with `dst.len() == rows * width`.
fn gather_rows(data: &[u8], rec: usize, rows: usize, fields: &mut [(usize, usize, &mut [u8])]) {
    for (p, row) in data.chunks_exact(rec).take(rows).enumerate() {
        for (off, w, dst) in fields.iter_mut() {
            let (off, w) = (*off, *w);
            dst[p * w..(p + 1) * w].copy_from_slice(&row[off..off + w]);
        }
    }
}

/// The inverse of [`gather_rows`]: per-field arrays into the row records, one pass.
fn scatter_rows(data: &mut [u8], rec: usize, rows: usize, fields: &[(usize, usize, &[u8])]) {
    for (p, row) in data.chunks_exact_mut(rec).take(rows).enumerate() {
        for &(off, w, src) in fields {
            row[off..off + w].copy_from_slice(&src[p * w..(p + 1) * w]);
        }
    }
}

/// The per-row fields every buffer has, in state-part order: (name, dtype, record offset).
const FIXED_ROW_FIELDS: [(&str, DType, usize); 5] = [
    ("rew", DType::F32, OFF_REW),
    ("terminated", DType::U8, OFF_TERM),
    ("truncated", DType::U8, OFF_TRUNC),
    ("flags", DType::U8, OFF_FLAGS),
    ("ep_id", DType::U64, OFF_EP_ID),
];

/// The state layout of a buffer of `rows` rows (a multiple of `num_envs`) with stored columns
/// `columns` (name, dtype, shape of a stored row; observation columns, then step columns; none
/// before the first add). Frame-stacked buffers (`frames`) have one more part, `ep_pre`.
fn layout(
    rows: usize,
    num_envs: usize,
    columns: &[(&str, DType, &[usize])],
    per: bool,
    frames: bool,
) -> Vec<PartLayout> {
    let mut out: Vec<PartLayout> = Vec::new();
    for (name, dtype, row) in columns {
        let mut shape = vec![rows];
        shape.extend_from_slice(row);
        out.push((format!("col:{name}"), *dtype, shape));
    }
    for (name, dtype, _) in FIXED_ROW_FIELDS {
        out.push((name.into(), dtype, vec![rows]));
    }
    out.push(("ep_start".into(), DType::U64, vec![rows]));
    out.push(("ep_end".into(), DType::U64, vec![rows]));
    if frames {
        // per episode record: the prefix rows before its first transition row
        out.push(("ep_pre".into(), DType::U8, vec![rows]));
    }
    for name in [
        "env.head",
        "env.open",
        "env.next_ep",
        "env.ep_len",
        "env.n_trans",
    ] {
        out.push((name.into(), DType::U64, vec![num_envs]));
    }
    out.push(("env.ep_return".into(), DType::F64, vec![num_envs]));
    out.push(("rng".into(), DType::U64, vec![4]));
    if per {
        out.push(("per.priorities".into(), DType::F64, vec![rows]));
        out.push(("per.max_p".into(), DType::F64, vec![1]));
        // per row: the transition it holds (u64::MAX: none). Written for the readers of earlier
        // versions, which kept it as a separate record; ignored on load.
        out.push(("per.sampled".into(), DType::U64, vec![rows]));
    }
    out
}

/// The name, dtype and shape of every state part that a buffer built with `capacity`,
/// `num_envs`, the columns `obs` + `step` (as callers see them; both empty for a buffer
/// without columns), prioritized replay on or off and `frame_stack` has, in
/// [`ReplayCore::state_parts`] order, without building the buffer or allocating its storage.
/// A loader checks a save's files against this before it allocates anything.
///
/// Errors: `InvalidValue` for a capacity or num_envs that [`ReplayCore::new`] refuses; with
/// columns and a `frame_stack`, what [`Schema::with_frames`] refuses.
pub fn state_layout_for(
    capacity: usize,
    num_envs: usize,
    obs: &[ColumnSpec],
    step: &[ColumnSpec],
    prioritized: bool,
    frame_stack: Option<usize>,
) -> Result<Vec<PartLayout>> {
    let rows = segment_len_for(capacity, num_envs)? * num_envs;
    let frames = frame_stack.is_some();
    if step.is_empty() {
        return Ok(layout(rows, num_envs, &[], prioritized, frames));
    }
    if frames {
        let sc = Schema::with_frames(obs.to_vec(), step.to_vec(), frame_stack)?;
        let columns = stored_columns(&sc);
        return Ok(layout(rows, num_envs, &columns, prioritized, frames));
    }
    let columns: Vec<(&str, DType, &[usize])> = obs
        .iter()
        .chain(step.iter())
        .map(|c| (c.name.as_str(), c.dtype, c.shape.as_slice()))
        .collect();
    Ok(layout(rows, num_envs, &columns, prioritized, frames))
}

/// (name, dtype, stored row shape) of every column of `sc`.
fn stored_columns(sc: &Schema) -> Vec<(&str, DType, &[usize])> {
    sc.columns()
        .map(|c| {
            (
                c.spec.name.as_str(),
                c.spec.dtype,
                c.stored_shape.as_slice(),
            )
        })
        .collect()
}

impl ReplayCore {
    /// The record offset and width of every per-row field, in state-part order.
    fn row_fields(&self) -> Vec<(String, DType, Vec<usize>, usize, usize)> {
        let rows = self.st.rows;
        let mut out = Vec::new();
        if self.has_schema() {
            for c in self.st.schema.obs.iter().chain(self.st.schema.step.iter()) {
                let mut shape = vec![rows];
                shape.extend_from_slice(&c.stored_shape);
                out.push((
                    format!("col:{}", c.spec.name),
                    c.spec.dtype,
                    shape,
                    c.offset,
                    c.item_bytes,
                ));
            }
        }
        for (name, dtype, off) in FIXED_ROW_FIELDS {
            out.push((name.to_string(), dtype, vec![rows], off, dtype.size()));
        }
        out
    }

    /// Name, dtype and shape of every state part, in the order [`ReplayCore::export_state`]
    /// fills them (no data is copied).
    pub fn state_layout(&self) -> Vec<PartLayout> {
        let columns = if self.has_schema() {
            stored_columns(&self.st.schema)
        } else {
            Vec::new()
        };
        let frames = self.frame_stack().is_some();
        layout(
            self.st.rows,
            self.st.num_envs,
            &columns,
            self.per.is_some(),
            frames,
        )
    }

    /// Write every state part into `dsts` (one per [`ReplayCore::state_layout`] entry, each of
    /// exactly its byte size). Rows without columns (no schema yet) export as zeros.
    ///
    /// Errors: `InvalidValue` when `dsts` does not match the layout.
    pub fn export_state(&self, dsts: &mut [&mut [u8]]) -> Result<()> {
        let layout = self.state_layout();
        if dsts.len() != layout.len()
            || layout
                .iter()
                .zip(dsts.iter())
                .any(|((_, d, s), b)| b.len() != s.iter().product::<usize>() * d.size())
        {
            return Err(CoreError::value(
                "export_state: destinations do not match the state layout".to_string(),
            ));
        }
        let fields = self.row_fields();
        let (row_dsts, rest) = dsts.split_at_mut(fields.len());
        if self.has_schema() {
            let mut f: Vec<(usize, usize, &mut [u8])> = fields
                .iter()
                .zip(row_dsts.iter_mut())
                .map(|((_, _, _, off, w), d)| (*off, *w, &mut **d))
                .collect();
            gather_rows(self.st.bytes(), self.st.schema.rec, self.st.rows, &mut f);
        } else {
            for d in row_dsts.iter_mut() {
                d.fill(0);
            }
        }
        use std::borrow::Cow;
        let u64s = |f: &dyn Fn(&EnvState) -> u64| -> Cow<'_, [u8]> {
            Cow::Owned(
                self.st
                    .envs
                    .iter()
                    .flat_map(|s| f(s).to_ne_bytes())
                    .collect(),
            )
        };
        let mut small: Vec<Cow<'_, [u8]>> = vec![
            Cow::Borrowed(bytes_of(&self.st.ep_start)),
            Cow::Borrowed(bytes_of(&self.st.ep_end)),
        ];
        if self.frame_stack().is_some() {
            // zeros before the columns are defined (the table is allocated with them)
            small.push(if self.st.ep_pre.is_empty() {
                Cow::Owned(vec![0u8; self.st.rows])
            } else {
                Cow::Borrowed(&self.st.ep_pre)
            });
        }
        small.extend([
            u64s(&|s| s.head),
            u64s(&|s| s.open as u64),
            u64s(&|s| s.next_ep),
            u64s(&|s| s.ep_len),
            u64s(&|s| s.n_trans),
            Cow::Owned(
                self.st
                    .envs
                    .iter()
                    .flat_map(|s| s.ep_return.to_ne_bytes())
                    .collect(),
            ),
            Cow::Owned(
                self.rng
                    .state()
                    .iter()
                    .flat_map(|x| x.to_ne_bytes())
                    .collect(),
            ),
        ]);
        if let Some(per) = &self.per {
            small.push(Cow::Borrowed(bytes_of(per.tree.leaves())));
            small.push(Cow::Owned(per.max_p.to_ne_bytes().to_vec()));
            small.push(Cow::Owned(
                (0..self.st.rows)
                    .flat_map(|r| {
                        let a = self.st.transition_abs(r).unwrap_or(u64::MAX);
                        a.to_ne_bytes()
                    })
                    .collect(),
            ));
        }
        for (d, v) in rest.iter_mut().zip(small) {
            d.copy_from_slice(&v);
        }
        Ok(())
    }

    /// Every array of the state (owned copies, in [`ReplayCore::state_layout`] order).
    pub fn state_parts(&self) -> Vec<StatePart<'_>> {
        let layout = self.state_layout();
        let mut bufs: Vec<Vec<u8>> = layout
            .iter()
            .map(|(_, d, s)| vec![0u8; s.iter().product::<usize>() * d.size()])
            .collect();
        let mut dsts: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
        // the destinations are built from the layout itself, so they always match
        let _ = self.export_state(&mut dsts);
        layout
            .into_iter()
            .zip(bufs)
            .map(|((name, dtype, shape), b)| StatePart {
                name,
                dtype,
                shape,
                bytes: b.into(),
            })
            .collect()
    }

    /// Declare `obs`/`step` columns when the buffer has none yet, then [`ReplayCore::load_state`];
    /// if loading fails, a declaration made here is undone, so the buffer is exactly as before.
    pub fn load_state_with_schema(
        &mut self,
        obs: Vec<ColumnSpec>,
        step: Vec<ColumnSpec>,
        parts: &[StatePart<'_>],
    ) -> Result<()> {
        let fresh = !self.has_schema() && !step.is_empty();
        if fresh {
            self.declare(obs, step)?;
        }
        let res = self.load_state(parts);
        if res.is_err() && fresh {
            self.forget_schema();
        }
        res
    }

    /// Replace the whole state by `parts` (as produced by [`ReplayCore::state_parts`] of a buffer
    /// with the same capacity, num_envs, columns and kind). Validates everything first.
    ///
    /// Errors: `Corrupt` when a part is missing, has the wrong dtype/shape, or the episode index
    /// is inconsistent; nothing is changed then.
    pub fn load_state(&mut self, parts: &[StatePart<'_>]) -> Result<()> {
        let expected = self.state_layout();
        let mut found: Vec<&[u8]> = Vec::with_capacity(expected.len());
        for (name, dtype, shape) in &expected {
            let p = parts
                .iter()
                .find(|p| &p.name == name)
                .ok_or_else(|| CoreError::corrupt(format!("saved state has no part '{name}'")))?;
            if p.dtype != *dtype || &p.shape != shape {
                return Err(CoreError::corrupt(format!(
                    "saved part '{name}' is {} {:?}, expected {} {:?} (was it saved from a buffer \
                     with another capacity, num_envs or columns?)",
                    p.dtype.name(),
                    p.shape,
                    dtype.name(),
                    shape
                )));
            }
            let want = shape.iter().product::<usize>() * dtype.size();
            if p.bytes.len() != want {
                return Err(CoreError::corrupt(format!(
                    "saved part '{name}' has {} bytes, expected {want}",
                    p.bytes.len()
                )));
            }
            found.push(&p.bytes);
        }
        let get = |name: &str| -> &[u8] {
            let k = expected.iter().position(|(n, _, _)| n == name).unwrap_or(0);
            found[k]
        };
        // validate the episode index before writing
        let n = self.st.num_envs;
        let seg = self.st.seg as u64;
        let head = read_u64s(get("env.head"));
        let open = read_u64s(get("env.open"));
        let next_ep = read_u64s(get("env.next_ep"));
        let n_trans = read_u64s(get("env.n_trans"));
        let flags = get("flags");
        let ep_id = read_u64s(get("ep_id"));
        let ep_start = read_u64s(get("ep_start"));
        let ep_end = read_u64s(get("ep_end"));
        let k1 = self.frame_stack().map_or(0, |k| k as u64 - 1);
        let ep_pre: &[u8] = if self.frame_stack().is_some() {
            get("ep_pre")
        } else {
            &[]
        };
        if let Some(&bad) = ep_pre.iter().find(|&&x| u64::from(x) > k1) {
            return Err(CoreError::corrupt(format!(
                "saved ep_pre holds {bad} prefix rows; a stack of {} frames has at most {k1}",
                k1 + 1
            )));
        }
        let known = F_TRANSITION | F_EP_START | F_CUT | F_TERMINAL | F_PREFIX;
        if let Some(bad) = flags.iter().find(|&&f| f & !known != 0) {
            return Err(CoreError::corrupt(format!(
                "saved flags hold an unknown bit pattern {bad:#x}"
            )));
        }
        for e in 0..n {
            if open[e] > 1 || (open[e] == 1 && (head[e] < 2 || next_ep[e] == 0)) {
                return Err(CoreError::corrupt(format!(
                    "saved state of env {e} is inconsistent"
                )));
            }
            let alive = head[e].min(seg);
            let mut count = 0u64;
            // the ring position of the newest row, walked backwards without a division per row
            let mut slot = if alive > 0 {
                ((head[e] - 1) % seg) as usize
            } else {
                0
            };
            let mut rec_of = (u64::MAX, 0usize); // (episode, its record index), cached per episode
            for k in 0..alive {
                let abs = head[e] - 1 - k;
                let p = e * self.st.seg + slot;
                slot = if slot == 0 { self.st.seg - 1 } else { slot - 1 };
                if flags[p] & F_TRANSITION != 0 {
                    count += 1;
                }
                if ep_id[p] >= next_ep[e] {
                    return Err(CoreError::corrupt(format!(
                        "saved row {p} names episode {} but env {e} has only started {}",
                        ep_id[p], next_ep[e]
                    )));
                }
                // the episode record of every alive row must contain it
                let ep = ep_id[p];
                if rec_of.0 != ep {
                    rec_of = (ep, e * self.st.seg + (ep % seg) as usize);
                }
                let rec = rec_of.1;
                let (start, end) = (ep_start[rec], ep_end[rec]);
                let pre = ep_pre.get(rec).map_or(0, |&x| u64::from(x));
                // prefix rows lie before the episode's first row, its other rows from it on
                let prefix = flags[p] & F_PREFIX != 0;
                if prefix && (flags[p] != F_PREFIX || abs >= start || abs + pre < start || k1 == 0)
                {
                    return Err(CoreError::corrupt(format!(
                        "saved prefix row {p} (row {abs} of env {e}) is not one of the {pre} \
                         prefix rows of its episode {ep} (first row {start})"
                    )));
                }
                // a transition's stack reads rows max(abs - k1, frames start): all alive
                let lo = head[e].saturating_sub(seg);
                if flags[p] & F_TRANSITION != 0
                    && k1 > 0
                    && start.saturating_sub(pre) < lo
                    && abs.saturating_sub(k1) < lo
                {
                    return Err(CoreError::corrupt(format!(
                        "saved transition row {p} (row {abs} of env {e}) reads a stack frame \
                         that the ring has overwritten"
                    )));
                }
                let running = open[e] == 1 && ep + 1 == next_ep[e];
                let end_ok = if end == OPEN {
                    running
                } else {
                    !running
                        && abs <= end
                        && end < head[e]
                        && (flags[p] & F_TERMINAL == 0 || end == abs)
                        && (flags[p] & F_TRANSITION == 0 || abs < end)
                };
                if (start > abs && !prefix) || !end_ok {
                    return Err(CoreError::corrupt(format!(
                        "saved episode record of row {p} (episode {ep}: start {start}, end {end}) \
                         does not contain it (row {abs} of env {e}, head {})",
                        head[e]
                    )));
                }
                if k > 0 {
                    let newer = e * self.st.seg + ((abs + 1) % seg) as usize;
                    if ep_id[newer] < ep {
                        return Err(CoreError::corrupt(format!(
                            "saved episode ids of env {e} decrease at row {p}"
                        )));
                    }
                }
            }
            if open[e] == 1 {
                let p = e * self.st.seg + ((head[e] - 1) % seg) as usize;
                if ep_id[p] + 1 != next_ep[e] || flags[p] & (F_TRANSITION | F_TERMINAL) != 0 {
                    return Err(CoreError::corrupt(format!(
                        "saved state of env {e}: the open episode's newest row {p} is inconsistent"
                    )));
                }
            }
            if count != n_trans[e] {
                return Err(CoreError::corrupt(format!(
                    "env {e}: saved transition count {} does not match the {count} transition rows",
                    n_trans[e]
                )));
            }
        }
        let rews = get("rew");
        let (terms, truncs) = (get("terminated"), get("truncated"));
        for (k, &f) in flags.iter().enumerate() {
            if terms[k] > 1 || truncs[k] > 1 {
                return Err(CoreError::corrupt(format!(
                    "saved row {k} has terminated={} truncated={} (flags are 0 or 1)",
                    terms[k], truncs[k]
                )));
            }
            let r = f32::from_ne_bytes(rews[4 * k..4 * k + 4].try_into().unwrap_or([0; 4]));
            if f & F_TRANSITION != 0 && !r.is_finite() {
                return Err(CoreError::corrupt(format!(
                    "saved transition row {k} has reward {r}"
                )));
            }
        }
        let ep_len = read_u64s(get("env.ep_len"));
        for e in 0..n {
            if open[e] == 1 {
                let ep = next_ep[e] - 1;
                let start = ep_start[e * self.st.seg + (ep % seg) as usize];
                if ep_len[e] != head[e] - 1 - start {
                    return Err(CoreError::corrupt(format!(
                        "saved state of env {e}: the running episode has {} steps stored but \
                         its length is saved as {}",
                        head[e] - 1 - start,
                        ep_len[e]
                    )));
                }
            }
        }
        if self.per.is_some() {
            let max_p = f64::from_ne_bytes(get("per.max_p").try_into().unwrap_or([0; 8]));
            let top = get("per.priorities")
                .chunks_exact(8)
                .map(|c| f64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
                .fold(0.0f64, f64::max);
            if !(max_p.is_finite() && max_p > 0.0 && max_p >= top) {
                return Err(CoreError::corrupt(format!(
                    "saved per.max_p {max_p} is not a positive bound of the saved priorities \
                     (largest {top})"
                )));
            }
            if max_p > MAX_PRIORITY {
                return Err(CoreError::corrupt(format!(
                    "saved per.max_p {max_p:e} exceeds the largest storable priority {:e}",
                    MAX_PRIORITY
                )));
            }
        }
        if let Some(_per) = &self.per {
            let pr = get("per.priorities");
            for (k, c) in pr.chunks_exact(8).enumerate() {
                let v = f64::from_ne_bytes(c.try_into().unwrap_or([0; 8]));
                let is_t = flags[k] & F_TRANSITION != 0;
                if !v.is_finite() || v < 0.0 || (is_t != (v > 0.0)) {
                    return Err(CoreError::corrupt(format!(
                        "saved priority {v} of row {k} is invalid for a {} row",
                        if is_t { "transition" } else { "non-transition" }
                    )));
                }
            }
        }
        // write
        if self.has_schema() {
            let fields: Vec<(usize, usize, &[u8])> = self
                .row_fields()
                .iter()
                .map(|(name, _, _, off, w)| (*off, *w, get(name)))
                .collect();
            let (rec, rows) = (self.st.schema.rec, self.st.rows);
            let data = bytes_of_mut(&mut self.st.data);
            scatter_rows(data, rec, rows, &fields);
        }
        copy_into(&mut self.st.ep_start, get("ep_start"));
        copy_into(&mut self.st.ep_end, get("ep_end"));
        if !ep_pre.is_empty() && !self.st.ep_pre.is_empty() {
            self.st.ep_pre.copy_from_slice(ep_pre);
        }
        let rets: Vec<f64> = get("env.ep_return")
            .chunks_exact(8)
            .map(|c| f64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        for e in 0..n {
            let s = &mut self.st.envs[e];
            s.head = head[e];
            s.open = open[e] == 1;
            s.next_ep = next_ep[e];
            s.ep_len = ep_len[e];
            s.n_trans = n_trans[e];
            s.ep_return = rets[e];
        }
        self.st.recount();
        let r = read_u64s(get("rng"));
        self.rng = Rng::from_state([r[0], r[1], r[2], r[3]]);
        if let Some(per) = self.per.as_mut() {
            let leaves: Vec<f64> = get("per.priorities")
                .chunks_exact(8)
                .map(|c| f64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
                .collect();
            debug_assert_eq!(leaves.len(), self.st.rows);
            per.tree.load_leaves(&leaves);
            per.max_p = f64::from_ne_bytes(get("per.max_p").try_into().unwrap_or([0; 8]));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs() -> (Vec<ColumnSpec>, Vec<ColumnSpec>) {
        (
            vec![
                ColumnSpec::new("obs.pos", DType::F32, vec![3]),
                ColumnSpec::new("obs.tag", DType::I16, vec![]),
            ],
            vec![
                ColumnSpec::new("act", DType::I64, vec![]),
                ColumnSpec::new("a\\b/../\0x", DType::U8, vec![2, 2]),
            ],
        )
    }

    #[test]
    fn state_layout_for_equals_the_layout_of_the_built_buffer() {
        for per in [false, true] {
            for (capacity, num_envs) in [(10, 2), (11, 3), (2, 1)] {
                let (obs, step) = specs();
                let mut core = ReplayCore::new(capacity, num_envs, 0).unwrap(); // ok: test
                if per {
                    core.enable_per(0.6, 0.4, 1e-6).unwrap(); // ok: test
                }
                // before the columns exist, then after
                let bare = state_layout_for(capacity, num_envs, &obs, &[], per, None).unwrap(); // ok: test
                assert_eq!(bare, core.state_layout());
                core.declare(obs.clone(), step.clone()).unwrap(); // ok: test
                let full = state_layout_for(capacity, num_envs, &obs, &step, per, None).unwrap(); // ok: test
                assert_eq!(full, core.state_layout());
                let exported: Vec<PartLayout> = core
                    .state_parts()
                    .into_iter()
                    .map(|p| (p.name, p.dtype, p.shape))
                    .collect();
                assert_eq!(full, exported);
            }
        }
    }

    #[test]
    fn frame_stacked_layouts_store_one_frame_per_row_and_match_the_built_buffer() {
        let obs = vec![ColumnSpec::new("obs", DType::U8, vec![4, 84, 84])];
        let step = vec![ColumnSpec::new("act", DType::I64, vec![])];
        for per in [false, true] {
            let mut core = ReplayCore::new(20, 2, 0).unwrap(); // ok: test
            core.enable_frame_stack(4).unwrap(); // ok: test
            if per {
                core.enable_per(0.6, 0.4, 1e-6).unwrap(); // ok: test
            }
            let bare = state_layout_for(20, 2, &obs, &[], per, Some(4)).unwrap(); // ok: test
            assert_eq!(bare, core.state_layout());
            core.declare(obs.clone(), step.clone()).unwrap(); // ok: test
            let full = state_layout_for(20, 2, &obs, &step, per, Some(4)).unwrap(); // ok: test
            assert_eq!(full, core.state_layout());
            assert_eq!(full[0], ("col:obs".into(), DType::U8, vec![20, 84, 84]));
            assert!(full.iter().any(|p| p.0 == "ep_pre"));
            // the caller's view keeps the stack axis; a row record holds one frame
            assert_eq!(core.schema().0, obs);
            assert_eq!(core.obs_columns()[0].item_bytes, 84 * 84);
            assert!(core.nbytes() >= 20 * (16 + 84 * 84 + 8));
        }
        let plain = state_layout_for(20, 2, &obs, &step, false, None).unwrap(); // ok: test
        assert!(!plain.iter().any(|p| p.0 == "ep_pre"));
        // a stack axis other than k, k = 0, and too few rows per env are refused
        assert!(matches!(
            state_layout_for(20, 2, &obs, &step, false, Some(3)),
            Err(CoreError::Shape(_))
        ));
        let mut core = ReplayCore::new(8, 2, 0).unwrap(); // ok: test
        assert!(matches!(
            core.enable_frame_stack(0),
            Err(CoreError::InvalidValue(_))
        ));
        core.enable_frame_stack(4).unwrap(); // ok: test
        assert!(matches!(
            core.declare(obs.clone(), step.clone()),
            Err(CoreError::InvalidValue(_))
        ));
    }

    #[test]
    fn state_layout_for_refuses_what_new_refuses_without_allocating() {
        let (obs, step) = specs();
        assert!(state_layout_for(3, 2, &obs, &step, false, None).is_err());
        assert!(state_layout_for(10, 0, &obs, &step, false, None).is_err());
        // a huge capacity costs nothing: only the shapes are computed
        let big = state_layout_for(1 << 50, 1, &obs, &step, true, None).unwrap(); // ok: test
        assert_eq!(big[0].2, vec![1usize << 50, 3]);
    }
}
