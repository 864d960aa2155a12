//! Episode queries on physical row indices, O(1) each (DESIGN.md, "Episode index").

use crate::error::{CoreError, Result};
use crate::storage::{Storage, F_TRANSITION};

impl Storage {
    fn alive(&self, idx: i64) -> Result<(usize, u64)> {
        if idx < 0 || idx as usize >= self.rows {
            return Err(CoreError::value(format!(
                "index {idx} is out of range [0, {}) of the buffer's rows",
                self.rows
            )));
        }
        self.abs_of(idx as usize).ok_or_else(|| {
            CoreError::value(format!(
                "row {idx} holds no data yet (nothing was written there)"
            ))
        })
    }

    /// Validate all indices first (so a bad one fails the whole call), then map each.
    fn map_rows<F: Fn(&Self, usize, u64) -> i64>(&self, idx: &[i64], f: F) -> Result<Vec<i64>> {
        let mut alive = Vec::with_capacity(idx.len());
        for &i in idx {
            alive.push(self.alive(i)?);
        }
        Ok(alive.into_iter().map(|(e, a)| f(self, e, a)).collect())
    }

    /// The row of the previous step of the same episode; the episode's first surviving row maps
    /// to itself.
    pub(crate) fn prev(&self, idx: &[i64]) -> Result<Vec<i64>> {
        self.map_rows(idx, |s, e, a| {
            let (start, _) = s.bounds_abs(e, a);
            s.phys(e, if a > start { a - 1 } else { a }) as i64
        })
    }

    /// The row of the next step of the same episode; the last transition of an episode (and
    /// the terminal row) map to themselves.
    pub(crate) fn next(&self, idx: &[i64]) -> Result<Vec<i64>> {
        self.map_rows(idx, |s, e, a| {
            let (_, end) = s.bounds_abs(e, a);
            s.phys(e, if a + 1 < end { a + 1 } else { a }) as i64
        })
    }

    /// Per index: (first surviving row of its episode, row holding the episode's final — or, for
    /// a running episode, newest — observation, number of surviving transitions).
    pub(crate) fn episode_bounds(&self, idx: &[i64]) -> Result<(Vec<i64>, Vec<i64>, Vec<i64>)> {
        let mut alive = Vec::with_capacity(idx.len());
        for &i in idx {
            alive.push(self.alive(i)?);
        }
        let mut starts = Vec::with_capacity(idx.len());
        let mut ends = Vec::with_capacity(idx.len());
        let mut lens = Vec::with_capacity(idx.len());
        for (e, a) in alive {
            let (s, en) = self.bounds_abs(e, a);
            starts.push(self.phys(e, s) as i64);
            ends.push(self.phys(e, en) as i64);
            lens.push((en - s) as i64);
        }
        Ok((starts, ends, lens))
    }

    /// Rows of the newest transition of every env whose episode is still running.
    pub(crate) fn unfinished_index(&self) -> Vec<i64> {
        (0..self.num_envs)
            .filter(|&e| self.envs[e].open)
            .map(|e| self.phys(e, self.envs[e].head - 2) as i64)
            .collect()
    }

    /// Per env: the row of its newest transition, or -1 if it holds none.
    pub(crate) fn last_index(&self) -> Vec<i64> {
        (0..self.num_envs)
            .map(|e| {
                let h = self.envs[e].head;
                if h < 2 {
                    return -1;
                }
                let p = self.phys(e, h - 2);
                if self.flag(p) & F_TRANSITION != 0 {
                    p as i64
                } else {
                    -1
                }
            })
            .collect()
    }

    /// Whether each row currently holds a sampleable transition.
    pub(crate) fn is_transition(&self, idx: &[i64]) -> Result<Vec<bool>> {
        let mut out = Vec::with_capacity(idx.len());
        for &i in idx {
            if i < 0 || i as usize >= self.rows {
                return Err(CoreError::value(format!(
                    "index {i} is out of range [0, {})",
                    self.rows
                )));
            }
            out.push(
                self.abs_of(i as usize).is_some() && self.flag(i as usize) & F_TRANSITION != 0,
            );
        }
        Ok(out)
    }
}
