//! Export and import of the whole buffer state (for save/load and checkpoints).
//!
//! The state is a list of named, typed arrays. Import validates every part and the episode
//! invariants before copying anything, and copies into the existing memory (never reallocates).

use crate::dtype::DType;
use crate::error::{CoreError, Result};
use crate::rng::Rng;
use crate::storage::{
    ReplayCore, F_CUT, F_EP_START, F_TERMINAL, F_TRANSITION, OFF_EP_ID, OFF_FLAGS, OFF_REW,
    OFF_TERM, OFF_TRUNC,
};

/// One named array of the state. `bytes` is C-contiguous, native byte order.
#[derive(Debug)]
pub struct StatePart<'a> {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: std::borrow::Cow<'a, [u8]>,
}

/// Plain numeric types whose slices can be viewed as bytes.
trait Plain: Copy {}
impl Plain for u8 {}
impl Plain for u64 {}
impl Plain for f64 {}

fn bytes_of<T: Plain>(x: &[T]) -> &[u8] {
    // SAFETY: T is a plain numeric type without padding; any byte pattern is a valid u8.
    unsafe { std::slice::from_raw_parts(x.as_ptr() as *const u8, std::mem::size_of_val(x)) }
}

fn copy_into<T: Plain>(dst: &mut [T], src: &[u8]) {
    // SAFETY: lengths were validated by the caller; T accepts any bit pattern (u8/u64/f32/f64).
    let d = unsafe {
        std::slice::from_raw_parts_mut(dst.as_mut_ptr() as *mut u8, std::mem::size_of_val(dst))
    };
    d.copy_from_slice(src);
}

fn read_u64s(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

impl ReplayCore {
    /// Every array of the state, borrowed where possible.
    pub fn state_parts(&self) -> Vec<StatePart<'_>> {
        let rows = self.rows;
        let n = self.num_envs;
        let mut parts = Vec::new();
        fn push<'b>(
            parts: &mut Vec<StatePart<'b>>,
            name: &str,
            dtype: DType,
            shape: Vec<usize>,
            bytes: std::borrow::Cow<'b, [u8]>,
        ) {
            parts.push(StatePart {
                name: name.to_string(),
                dtype,
                shape,
                bytes,
            });
        }
        let live = if self.has_schema() { rows } else { 0 };
        let gather = |off: usize, width: usize| -> Vec<u8> {
            let b = self.bytes();
            let mut v = Vec::with_capacity(rows * width);
            for p in 0..live {
                let o = p * self.rec + off;
                v.extend_from_slice(&b[o..o + width]);
            }
            v.resize(rows * width, 0);
            v
        };
        for c in self.obs_cols.iter().chain(self.step_cols.iter()) {
            let mut shape = vec![rows];
            shape.extend_from_slice(&c.spec.shape);
            push(
                &mut parts,
                &format!("col:{}", c.spec.name),
                c.spec.dtype,
                shape,
                gather(c.offset, c.item_bytes).into(),
            );
        }
        push(
            &mut parts,
            "rew",
            DType::F32,
            vec![rows],
            gather(OFF_REW, 4).into(),
        );
        push(
            &mut parts,
            "terminated",
            DType::U8,
            vec![rows],
            gather(OFF_TERM, 1).into(),
        );
        push(
            &mut parts,
            "truncated",
            DType::U8,
            vec![rows],
            gather(OFF_TRUNC, 1).into(),
        );
        push(
            &mut parts,
            "flags",
            DType::U8,
            vec![rows],
            gather(OFF_FLAGS, 1).into(),
        );
        push(
            &mut parts,
            "ep_id",
            DType::U64,
            vec![rows],
            gather(OFF_EP_ID, 8).into(),
        );
        push(
            &mut parts,
            "ep_start",
            DType::U64,
            vec![rows],
            bytes_of(&self.ep_start).into(),
        );
        push(
            &mut parts,
            "ep_end",
            DType::U64,
            vec![rows],
            bytes_of(&self.ep_end).into(),
        );
        let u64s = |f: &dyn Fn(&crate::storage::EnvState) -> u64| -> Vec<u8> {
            self.envs.iter().flat_map(|s| f(s).to_ne_bytes()).collect()
        };
        push(
            &mut parts,
            "env.head",
            DType::U64,
            vec![n],
            u64s(&|s| s.head).into(),
        );
        push(
            &mut parts,
            "env.open",
            DType::U64,
            vec![n],
            u64s(&|s| s.open as u64).into(),
        );
        push(
            &mut parts,
            "env.next_ep",
            DType::U64,
            vec![n],
            u64s(&|s| s.next_ep).into(),
        );
        push(
            &mut parts,
            "env.ep_len",
            DType::U64,
            vec![n],
            u64s(&|s| s.ep_len).into(),
        );
        push(
            &mut parts,
            "env.n_trans",
            DType::U64,
            vec![n],
            u64s(&|s| s.n_trans).into(),
        );
        let rets: Vec<u8> = self
            .envs
            .iter()
            .flat_map(|s| s.ep_return.to_ne_bytes())
            .collect();
        push(
            &mut parts,
            "env.ep_return",
            DType::F64,
            vec![n],
            rets.into(),
        );
        let rng: Vec<u8> = self
            .rng
            .state()
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        push(&mut parts, "rng", DType::U64, vec![4], rng.into());
        if let Some(per) = &self.per {
            push(
                &mut parts,
                "per.priorities",
                DType::F64,
                vec![rows],
                bytes_of(per.tree.leaves()).to_vec().into(),
            );
            push(
                &mut parts,
                "per.max_p",
                DType::F64,
                vec![1],
                per.max_p.to_ne_bytes().to_vec().into(),
            );
            push(
                &mut parts,
                "per.sampled",
                DType::U64,
                vec![rows],
                bytes_of(&per.sampled).into(),
            );
        }
        parts
    }

    /// Declare `obs`/`step` columns when the buffer has none yet, then [`ReplayCore::load_state`];
    /// if loading fails, a declaration made here is undone, so the buffer is exactly as before.
    pub fn load_state_with_schema(
        &mut self,
        obs: Vec<crate::storage::ColumnSpec>,
        step: Vec<crate::storage::ColumnSpec>,
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
        let expected: Vec<(String, DType, Vec<usize>)> = self
            .state_parts()
            .into_iter()
            .map(|p| (p.name, p.dtype, p.shape))
            .collect();
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
        let n = self.num_envs;
        let seg = self.seg as u64;
        let head = read_u64s(get("env.head"));
        let open = read_u64s(get("env.open"));
        let next_ep = read_u64s(get("env.next_ep"));
        let n_trans = read_u64s(get("env.n_trans"));
        let flags = get("flags");
        let ep_id = read_u64s(get("ep_id"));
        let ep_start = read_u64s(get("ep_start"));
        let ep_end = read_u64s(get("ep_end"));
        let known = F_TRANSITION | F_EP_START | F_CUT | F_TERMINAL;
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
            for k in 0..alive {
                let abs = head[e] - 1 - k;
                let p = e * self.seg + (abs % seg) as usize;
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
                let rec = e * self.seg + (ep % seg) as usize;
                let (start, end) = (ep_start[rec], ep_end[rec]);
                let running = open[e] == 1 && ep + 1 == next_ep[e];
                let end_ok = if end == crate::storage::OPEN {
                    running
                } else {
                    !running
                        && abs <= end
                        && end < head[e]
                        && (flags[p] & F_TERMINAL == 0 || end == abs)
                        && (flags[p] & F_TRANSITION == 0 || abs < end)
                };
                if start > abs || !end_ok {
                    return Err(CoreError::corrupt(format!(
                        "saved episode record of row {p} (episode {ep}: start {start}, end {end}) \
                         does not contain it (row {abs} of env {e}, head {})",
                        head[e]
                    )));
                }
                if k > 0 {
                    let newer = e * self.seg + ((abs + 1) % seg) as usize;
                    if ep_id[newer] < ep {
                        return Err(CoreError::corrupt(format!(
                            "saved episode ids of env {e} decrease at row {p}"
                        )));
                    }
                }
            }
            if open[e] == 1 {
                let p = e * self.seg + ((head[e] - 1) % seg) as usize;
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
        let rows = self.rows;
        if self.has_schema() {
            let rec = self.rec;
            let cols: Vec<(usize, usize)> = self
                .obs_cols
                .iter()
                .chain(self.step_cols.iter())
                .map(|c| (c.offset, c.item_bytes))
                .collect();
            let mut fixed: Vec<(usize, usize, &[u8])> = cols
                .iter()
                .enumerate()
                .map(|(k, &(off, w))| (off, w, found[k]))
                .collect();
            fixed.push((OFF_REW, 4, get("rew")));
            fixed.push((OFF_TERM, 1, get("terminated")));
            fixed.push((OFF_TRUNC, 1, get("truncated")));
            fixed.push((OFF_FLAGS, 1, get("flags")));
            fixed.push((OFF_EP_ID, 8, get("ep_id")));
            // SAFETY: u64 words viewed as bytes; exclusive borrow of self.data.
            let data = unsafe {
                std::slice::from_raw_parts_mut(
                    self.data.as_mut_ptr() as *mut u8,
                    self.data.len() * 8,
                )
            };
            for (off, w, src) in fixed {
                for p in 0..rows {
                    let o = p * rec + off;
                    data[o..o + w].copy_from_slice(&src[p * w..(p + 1) * w]);
                }
            }
        }
        copy_into(&mut self.ep_start, get("ep_start"));
        copy_into(&mut self.ep_end, get("ep_end"));
        let ep_len = read_u64s(get("env.ep_len"));
        let rets: Vec<f64> = get("env.ep_return")
            .chunks_exact(8)
            .map(|c| f64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        for e in 0..n {
            let s = &mut self.envs[e];
            s.head = head[e];
            s.open = open[e] == 1;
            s.next_ep = next_ep[e];
            s.ep_len = ep_len[e];
            s.n_trans = n_trans[e];
            s.ep_return = rets[e];
        }
        let r = read_u64s(get("rng"));
        self.rng = Rng::from_state([r[0], r[1], r[2], r[3]]);
        if let Some(per) = self.per.as_mut() {
            let leaves: Vec<f64> = get("per.priorities")
                .chunks_exact(8)
                .map(|c| f64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
                .collect();
            debug_assert_eq!(leaves.len(), rows);
            per.tree.load_leaves(&leaves);
            per.max_p = f64::from_ne_bytes(get("per.max_p").try_into().unwrap_or([0; 8]));
            copy_into(&mut per.sampled, get("per.sampled"));
        }
        Ok(())
    }
}
