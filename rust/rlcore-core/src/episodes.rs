//! Episode queries on indices, O(1) each (docs/replay-buffer.md, "Views, episodes"), and what an index
//! names now (see [`crate::index`]).

use crate::error::{CoreError, Result};
use crate::index;
use crate::storage::{Storage, F_TRANSITION};

impl Storage {
    /// The index naming the transition at absolute row `a` of env `e`.
    #[inline]
    pub(crate) fn index_at(&self, e: usize, a: u64) -> i64 {
        index::join(self.phys(e, a), self.seg_div.div(a))
    }

    /// The index naming the transition row `p` holds now (its bare row when it holds none).
    #[inline]
    pub(crate) fn index_of(&self, p: usize) -> i64 {
        match self.abs_of(p) {
            Some((e, a)) if self.flag(p) & F_TRANSITION != 0 => self.index_at(e, a),
            _ => p as i64,
        }
    }

    /// The index naming the transition row `p` holds, which must hold one (a drawn row).
    #[inline]
    pub(crate) fn index_of_transition(&self, p: usize) -> i64 {
        match self.abs_of(p) {
            Some((_, a)) => index::join(p, self.seg_div.div(a)),
            None => p as i64,
        }
    }

    /// Whether index `i` (row `row`) names what its row holds now: always for a bare row;
    /// for an index with a generation, whether the row holds that transition.
    #[inline]
    pub(crate) fn names_current(&self, i: i64, row: usize) -> bool {
        index::split(i).1 == 0 || self.index_of(row) == i
    }

    /// Whether index `i` (row `r`) names a transition row `r` holds now: a bare row, if the row
    /// holds a transition; an index with a generation, if the row holds that very transition.
    /// (One address computation and one flag read: a priority update's check.)
    #[inline]
    pub(crate) fn names_transition_now(&self, i: i64, r: usize) -> bool {
        let Some((_, a)) = self.abs_of(r) else {
            return false;
        };
        self.flag(r) & F_TRANSITION != 0
            && (index::split(i).1 == 0 || index::join(r, self.seg_div.div(a)) == i)
    }

    /// The row of index `i` and whether `i` names what the row holds now.
    ///
    /// Errors: `InvalidValue` for a negative index or one whose row is out of range.
    pub(crate) fn resolve(&self, i: i64) -> Result<(usize, bool)> {
        let (row, generation) = index::split(i);
        if i < 0 || row >= self.rows as u64 || (generation != 0 && !self.names_transitions) {
            return Err(CoreError::value(format!(
                "index {i} is out of range: rows are [0, {}) (pass rows or the indices that \
                 sample or add returned)",
                self.rows
            )));
        }
        Ok((row as usize, self.names_current(i, row as usize)))
    }

    /// The row of index `i`, which must name what its row holds now.
    ///
    /// Errors: `InvalidValue` for an index out of range or a stale one.
    pub(crate) fn current_row(&self, i: i64) -> Result<usize> {
        match self.resolve(i)? {
            (row, true) => Ok(row),
            (row, false) => Err(stale(i, row)),
        }
    }

    fn alive(&self, idx: i64) -> Result<(usize, u64)> {
        let idx = self.current_row(idx)?;
        self.abs_of(idx).ok_or_else(|| {
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

    /// Whether each index names a sampleable transition its row holds now (false for a stale one).
    pub(crate) fn is_transition(&self, idx: &[i64]) -> Result<Vec<bool>> {
        let mut out = Vec::with_capacity(idx.len());
        for &i in idx {
            let (p, current) = self.resolve(i)?;
            out.push(current && self.abs_of(p).is_some() && self.flag(p) & F_TRANSITION != 0);
        }
        Ok(out)
    }
}

/// The error for a stale index (`row` holds a newer transition, or none).
#[cold]
pub(crate) fn stale(i: i64, row: usize) -> CoreError {
    CoreError::value(format!(
        "index {i} names a transition that the ring has overwritten (row {row} holds a newer \
         one or none); sample again"
    ))
}
