//! Priority updates for prioritized replay (Schaul et al. 2016, sec. 3.3).

use crate::error::{CoreError, Result};
use crate::storage::{ReplayCore, F_TRANSITION};

impl ReplayCore {
    /// Set `(p + eps)^alpha` as the priority of each row. All inputs are validated before any
    /// write: a negative, NaN or infinite priority, an index out of range, a length mismatch or
    /// priorities so large that the total priority mass overflows fail the whole call. Rows
    /// that were overwritten since they were last sampled (they hold another transition, a
    /// terminal row or an open row now) are skipped; their count is returned.
    pub fn update_priorities(&mut self, idx: &[i64], prio: &[f64]) -> Result<usize> {
        let rows = self.rows;
        let Some(per) = self.per.as_ref() else {
            return Err(CoreError::usage(
                "update_priorities needs a prioritized buffer",
            ));
        };
        if idx.len() != prio.len() {
            return Err(CoreError::shape(format!(
                "update_priorities: {} indices but {} priorities; pass one priority per index",
                idx.len(),
                prio.len()
            )));
        }
        for (k, (&i, &p)) in idx.iter().zip(prio.iter()).enumerate() {
            if i < 0 || i as usize >= rows {
                return Err(CoreError::value(format!(
                    "update_priorities: index {i} (position {k}) is out of range [0, {rows})"
                )));
            }
            if !(p.is_finite() && p >= 0.0) {
                return Err(CoreError::value(format!(
                    "update_priorities: priority {p} (position {k}) must be finite and >= 0"
                )));
            }
        }
        let (alpha, eps) = (per.alpha, per.eps);
        let mut skipped = 0;
        let mut max_p = per.max_p;
        let mut updates = Vec::with_capacity(idx.len());
        for (&i, &p) in idx.iter().zip(prio.iter()) {
            let r = i as usize;
            let now = self.abs_of(r).map(|(_, a)| a);
            let stale = per.sampled[r] != u64::MAX && Some(per.sampled[r]) != now;
            if now.is_none() || stale || self.flag(r) & F_TRANSITION == 0 {
                skipped += 1;
                continue;
            }
            let v = (p + eps).powf(alpha);
            if !(v.is_finite() && v > 0.0) {
                return Err(CoreError::value(format!(
                    "update_priorities: (p + eps)^alpha = {v} for p = {p} is not a positive \
                     finite number"
                )));
            }
            max_p = max_p.max(v);
            updates.push((r, v));
        }
        let mut total = per.tree.total();
        for &(r, v) in &updates {
            total += v - per.tree.get(r);
        }
        if !total.is_finite() {
            return Err(CoreError::value(
                "update_priorities: these priorities make the total priority mass overflow \
                 float64; scale them down (e.g. clip TD errors)",
            ));
        }
        if let Some(per) = self.per.as_mut() {
            for (r, v) in updates {
                per.tree.set(r, v);
            }
            per.max_p = max_p;
        }
        Ok(skipped)
    }

    /// `(total priority mass, smallest positive priority, priority given to new transitions)`
    /// in O(1), or `None` for a buffer without prioritized replay. A sharded buffer samples each
    /// shard in proportion to its mass and rescales weights with the global minimum.
    pub fn priority_stats(&self) -> Option<(f64, f64, f64)> {
        self.per
            .as_ref()
            .map(|p| (p.tree.total(), p.tree.min_positive(), p.max_p))
    }

    /// Current priorities `(p + eps)^alpha` of the given rows (0 for non-transition rows).
    pub fn priorities(&self, idx: &[i64]) -> Result<Vec<f64>> {
        let Some(per) = self.per.as_ref() else {
            return Err(CoreError::usage(
                "priorities are only defined for prioritized buffers",
            ));
        };
        idx.iter()
            .map(|&i| {
                if i < 0 || i as usize >= self.rows {
                    Err(CoreError::value(format!(
                        "index {i} is out of range [0, {})",
                        self.rows
                    )))
                } else {
                    Ok(per.tree.get(i as usize))
                }
            })
            .collect()
    }
}
