//! Priority updates for prioritized replay (Schaul et al. 2016, sec. 3.3).

use crate::error::{CoreError, Result};
use crate::storage::{ReplayCore, F_TRANSITION};

/// The largest priority `(p + eps)^alpha` a row can hold. A buffer has fewer than 2^64 rows, so
/// the total priority mass stays below 2^64 * 1e280 ≈ 1.8e299, finite in float64 with room to
/// spare, whatever sequence of adds (new rows get the running maximum, itself at most this) and
/// updates comes. `update_priorities` refuses larger priorities instead of clamping them: a
/// priority this large comes from a diverged TD error or a bug, which clamping would hide while
/// silently reshaping the sampling distribution (NaN and inf are refused for the same reason).
pub const MAX_PRIORITY: f64 = 1e280;

impl ReplayCore {
    /// Set `(p + eps)^alpha` as the priority of the transition each index names.
    ///
    /// Which transition an index names: a row index is handed out by `add`/`extend` (the row of
    /// each transition written) and by `sample` (the rows drawn). With bare row indices the most
    /// recent hand-out of a row defines the transition its index means, and an update lands if
    /// and only if the row still holds that transition. Rows that hold no transition now (a
    /// terminal row, the open row of a running episode, a row never written or cleared) are
    /// skipped, as are rows whose transition is not the one last handed out; the number skipped
    /// is returned. An index handed out by `sample` before its row was overwritten is thus
    /// skipped while the row holds no transition, and lands on the newer transition once an
    /// `add` has handed the row out for it (Ape-X actors set initial priorities from `add`'s
    /// indices; a learner whose sampled rows may have been overwritten meanwhile cannot tell
    /// the two apart with row indices alone).
    ///
    /// All inputs are validated before any write, for skipped rows too, and any failure fails
    /// the whole call: `Shape` for a length mismatch, `InvalidValue` for an index out of
    /// `[0, rows)`, a negative, NaN or infinite priority, or one whose `(p + eps)^alpha`
    /// exceeds [`MAX_PRIORITY`]; `Usage` on a buffer without prioritized replay.
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
        let (alpha, eps) = (per.alpha, per.eps);
        let mut updates = Vec::with_capacity(idx.len());
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
            // eps^alpha lies in (0, MAX_PRIORITY] (checked by enable_per), so v > 0
            let v = (p + eps).powf(alpha);
            if !(v > 0.0 && v <= MAX_PRIORITY) {
                return Err(CoreError::value(format!(
                    "update_priorities: priority {p:e} (position {k}) gives (p + eps)^alpha = \
                     {v:e}, above the largest storable priority {MAX_PRIORITY:e}; scale the \
                     priorities down (e.g. clip TD errors)"
                )));
            }
            updates.push((i as usize, v));
        }
        let mut skipped = 0;
        let mut max_p = per.max_p;
        updates.retain(|&(r, v)| {
            // a never-written row has no abs (and no record), so its flag is never read
            let holds = self.abs_of(r).map(|(_, a)| a) == Some(per.handed_out[r])
                && self.flag(r) & F_TRANSITION != 0;
            if holds {
                max_p = max_p.max(v);
            } else {
                skipped += 1;
            }
            holds
        });
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
