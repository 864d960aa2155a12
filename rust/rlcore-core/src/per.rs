//! Prioritized replay state (Schaul et al. 2016, "Prioritized Experience Replay"): the sum tree
//! of row priorities, the priority new transitions get, the checks of α, β, ε and of priority
//! updates, and the importance-sampling weights. It knows rows only by index; the storage tells
//! it which rows hold a transition.

use crate::error::{CoreError, Result};
use crate::index;
use crate::sumtree::SumTree;

/// How many updates of a batch ahead [`PerState::update`] requests the lines it will read
/// (requesting the whole batch at once overflows the miss buffers, which then drop requests).
const UPDATE_AHEAD: usize = 16;

/// The largest priority `(p + eps)^alpha` a row can hold. A buffer has fewer than 2^64 rows, so
/// the total priority mass stays below 2^64 * 1e280 ≈ 1.8e299, finite in float64 with room to
/// spare, whatever sequence of adds (new rows get the running maximum, itself at most this) and
/// updates comes. `update_priorities` refuses larger priorities instead of clamping them: a
/// priority this large comes from a diverged TD error or a bug, which clamping would hide while
/// silently reshaping the sampling distribution (NaN and inf are refused for the same reason).
pub const MAX_PRIORITY: f64 = 1e280;

/// Prioritized replay state.
#[derive(Debug, Clone)]
pub struct PerState {
    pub(crate) tree: SumTree,
    pub alpha: f64,
    pub beta: f64,
    pub eps: f64,
    /// Largest `(p + eps)^alpha` set so far; new transitions get it.
    pub(crate) max_p: f64,
}

/// Check the parameters of prioritized replay.
///
/// Errors: `InvalidValue` for `alpha` or `beta` negative or not finite, `eps <= 0` or not
/// finite, or a smallest priority `eps^alpha` outside `(0, MAX_PRIORITY]`.
pub fn check_params(alpha: f64, beta: f64, eps: f64) -> Result<()> {
    if !(alpha.is_finite() && alpha >= 0.0) {
        return Err(CoreError::value(format!("alpha must be >= 0, got {alpha}")));
    }
    check_beta(beta)?;
    if !(eps.is_finite() && eps > 0.0) {
        return Err(CoreError::value(format!("eps must be > 0, got {eps}")));
    }
    let floor = eps.powf(alpha);
    if !(floor > 0.0 && floor <= MAX_PRIORITY) {
        return Err(CoreError::value(format!(
            "eps^alpha = {eps}^{alpha} = {floor:e} is the smallest priority and must lie in \
             (0, {MAX_PRIORITY:e}]; use a larger eps or a smaller alpha"
        )));
    }
    Ok(())
}

/// Errors: `InvalidValue` for a negative or non-finite β.
pub fn check_beta(beta: f64) -> Result<()> {
    if beta.is_finite() && beta >= 0.0 {
        Ok(())
    } else {
        Err(CoreError::value(format!(
            "beta must be a finite number >= 0, got {beta}"
        )))
    }
}

/// The priority `(p + eps)^alpha` a row gets from priority `p`, the one at position `k` of an
/// update (named in the error). `alpha` and `eps` must pass [`check_params`].
///
/// Errors: `InvalidValue` for a negative, NaN or infinite `p`, or one whose `(p + eps)^alpha`
/// exceeds [`MAX_PRIORITY`].
#[inline]
fn stored_priority(k: usize, p: f64, alpha: f64, eps: f64) -> Result<f64> {
    if !(p.is_finite() && p >= 0.0) {
        return Err(CoreError::value(format!(
            "update_priorities: priority {p} (position {k}) must be finite and >= 0"
        )));
    }
    // eps^alpha lies in (0, MAX_PRIORITY] (checked by check_params), so v > 0
    let v = (p + eps).powf(alpha);
    if !(v > 0.0 && v <= MAX_PRIORITY) {
        return Err(CoreError::value(format!(
            "update_priorities: priority {p:e} (position {k}) gives (p + eps)^alpha = {v:e}, \
             above the largest storable priority {MAX_PRIORITY:e}; scale the priorities down \
             (e.g. clip TD errors)"
        )));
    }
    Ok(v)
}

/// The `(row, (p + eps)^alpha)` of each index and priority of an update of a buffer of `rows`
/// rows, checked (`alpha`, `eps` as [`check_params`] accepts them). An index is a bare row or a
/// row with a generation (see [`crate::index`]); its row must lie in `[0, rows)`.
///
/// Errors: `Shape` for a length mismatch; `InvalidValue` for a negative index or one whose row
/// lies outside `[0, rows)`, and for the priorities [`stored_priority`] refuses.
fn checked_updates(
    idx: &[i64],
    prio: &[f64],
    rows: usize,
    alpha: f64,
    eps: f64,
) -> Result<Vec<(usize, f64)>> {
    if idx.len() != prio.len() {
        return Err(CoreError::shape(format!(
            "update_priorities: {} indices but {} priorities; pass one priority per index",
            idx.len(),
            prio.len()
        )));
    }
    let mut updates = Vec::with_capacity(idx.len());
    for (k, (&i, &p)) in idx.iter().zip(prio.iter()).enumerate() {
        let row = index::split(i).0;
        if i < 0 || row >= rows as u64 {
            return Err(CoreError::value(format!(
                "update_priorities: index {i} (position {k}) is out of range: its row must \
                 lie in [0, {rows}) (pass the indices that sample or add returned)"
            )));
        }
        updates.push((row as usize, stored_priority(k, p, alpha, eps)?));
    }
    Ok(updates)
}

/// Every check `update_priorities` of a buffer of `rows` rows with these `alpha` and `eps` makes
/// before it writes, for a front end that must refuse a whole update before it sends parts of
/// it anywhere (the shards of a distributed buffer, whose global indices are checked against
/// their total rows): the error that update would give, or `Ok`.
///
/// Errors: `InvalidValue` for `alpha` or `eps` [`check_params`] refuses (`beta` is not
/// involved), an index outside `[0, rows)`, a negative, NaN or infinite priority, or one whose
/// `(p + eps)^alpha` exceeds [`MAX_PRIORITY`]; `Shape` for a length mismatch.
pub fn check_priority_update(
    idx: &[i64],
    prio: &[f64],
    rows: usize,
    alpha: f64,
    eps: f64,
) -> Result<()> {
    check_params(alpha, 0.0, eps)?;
    checked_updates(idx, prio, rows, alpha, eps).map(|_| ())
}

impl PerState {
    /// State for `rows` rows, all priority 0, with parameters checked by [`check_params`].
    pub(crate) fn new(rows: usize, alpha: f64, beta: f64, eps: f64) -> Result<Self> {
        Ok(PerState {
            tree: SumTree::try_new(rows)?,
            alpha,
            beta,
            eps,
            max_p: 1.0,
        })
    }

    /// Bytes of the priority trees.
    pub fn nbytes(&self) -> usize {
        self.tree.nbytes()
    }

    pub(crate) fn set_beta(&mut self, beta: f64) -> Result<()> {
        check_beta(beta)?;
        self.beta = beta;
        Ok(())
    }

    /// Row `p` no longer holds a transition (overwritten by the ring).
    #[inline]
    pub(crate) fn on_drop(&mut self, p: usize) {
        self.tree.set(p, 0.0);
    }

    /// Row `p` now holds a new transition: it gets the running maximum priority.
    #[inline]
    pub(crate) fn on_write(&mut self, p: usize) {
        self.tree.set(p, self.max_p);
    }

    /// Forget every priority (in place).
    pub(crate) fn reset(&mut self) {
        self.tree.reset();
        self.max_p = 1.0;
    }

    /// Set `(p + eps)^alpha` for each index that names the transition its row holds now
    /// (`names_current(k, row)` for the index at position k; `prefetch_row(r)` requests the
    /// line it reads). Returns how many indices were skipped (stale: see [`crate::index`]).
    /// Validates everything before writing.
    ///
    /// Errors: `Shape` for a length mismatch, `InvalidValue` for an index whose row lies
    /// outside `[0, rows)`, a negative, NaN or infinite priority, or one whose
    /// `(p + eps)^alpha` exceeds [`MAX_PRIORITY`].
    pub(crate) fn update(
        &mut self,
        idx: &[i64],
        prio: &[f64],
        rows: usize,
        names_current: impl Fn(usize, usize) -> bool,
        prefetch_row: impl Fn(usize),
    ) -> Result<usize> {
        let mut updates = checked_updates(idx, prio, rows, self.alpha, self.eps)?;
        let before = updates.len();
        // the checks read the rows and the trees at random places: each update's lines are
        // requested UPDATE_AHEAD updates before they are read, so the misses of a batch overlap
        let ahead = |r: usize| {
            self.tree.prefetch_leaf(r);
            prefetch_row(r);
        };
        updates
            .iter()
            .take(UPDATE_AHEAD)
            .for_each(|&(r, _)| ahead(r));
        let mut kept = 0;
        for i in 0..updates.len() {
            if let Some(&(r, _)) = updates.get(i + UPDATE_AHEAD) {
                ahead(r);
            }
            let (r, v) = updates[i];
            if names_current(i, r) {
                updates[kept] = (r, v);
                kept += 1;
            }
        }
        updates.truncate(kept);
        for &(_, v) in &updates {
            self.max_p = self.max_p.max(v);
        }
        self.tree.set_batch(&updates);
        Ok(before - updates.len())
    }

    /// `(total priority mass, smallest positive priority, priority given to new transitions)`.
    pub fn stats(&self) -> (f64, f64, f64) {
        (self.tree.total(), self.tree.min_positive(), self.max_p)
    }

    /// The priority of row `r` (0 for non-transition rows).
    #[inline]
    pub(crate) fn get(&self, r: usize) -> f64 {
        self.tree.get(r)
    }

    /// The importance-sampling weight of each drawn row into `out`.
    pub(crate) fn weights(&self, rows: impl Iterator<Item = usize>, out: &mut [f32]) {
        let pmin = self.tree.min_positive();
        for (w, p) in out.iter_mut().zip(rows) {
            *w = is_weight(self.tree.get(p), pmin, self.beta);
        }
    }
}

/// The importance-sampling weight `(N·P(i))^-β / max_j (N·P(j))^-β = (p_i / p_min)^-β`
/// (Schaul et al. 2016, sec. 3.4; `N·P(i) = N·p_i / total`, and the maximum over j is at the
/// smallest priority), for `p_min <= p_i`, both positive and finite. The ratio is taken
/// directly, never through `p / total` (which underflows for tiny priorities beside a large
/// total); where the ratio itself overflows (priorities more than ~1e308 apart) the weight is
/// computed from logarithms. Weights below float32's smallest normal number 2^-126 are returned
/// as 2^-126, so every weight lies in [2^-126, 1]: positive, finite and never subnormal.
#[inline]
fn is_weight(p_i: f64, p_min: f64, beta: f64) -> f32 {
    let ratio = p_i / p_min;
    let w = if ratio.is_finite() {
        ratio.powf(-beta)
    } else {
        (beta * (p_min.ln() - p_i.ln())).exp()
    };
    (w as f32).clamp(f32::MIN_POSITIVE, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_stay_in_unit_interval_for_priorities_any_decades_apart() {
        // ordinary ratios: exactly the textbook formula
        assert_eq!(is_weight(4.0, 1.0, 0.5), 0.5);
        assert_eq!(is_weight(3.0, 3.0, 0.7), 1.0);
        assert_eq!(is_weight(1e30, 1e-30, 0.0), 1.0);
        // a subnormal minimum beside a huge priority: the ratio overflows float64
        let p_min = 5e-324;
        let w = is_weight(1e280, p_min, 0.01);
        let want = (0.01 * (p_min.ln() - 1e280f64.ln())).exp() as f32;
        assert!(
            want > 1e-7 && (w - want).abs() <= 1e-6 * want,
            "{w} vs {want}"
        );
        // a true weight below float32's range is the smallest normal float32, never 0
        for (p, beta) in [(1e280, 1.0), (1e200, 0.4), (1e40, 1.0), (1e280, 1e18)] {
            let w = is_weight(p, p_min, beta);
            assert_eq!(w, f32::MIN_POSITIVE, "p={p} beta={beta}");
        }
    }

    #[test]
    fn parameters_and_updates_are_checked_before_any_write() {
        assert!(check_params(0.6, 0.4, 1e-6).is_ok());
        for (a, b, e) in [
            (-0.1, 0.4, 1e-6),
            (f64::NAN, 0.4, 1e-6),
            (0.6, -1.0, 1e-6),
            (0.6, f64::INFINITY, 1e-6),
            (0.6, 0.4, 0.0),
            (2.0, 0.4, 1e-300),
        ] {
            assert!(
                matches!(check_params(a, b, e), Err(CoreError::InvalidValue(_))),
                "{a} {b} {e}"
            );
        }
        let mut per = PerState::new(4, 1.0, 0.4, 1e-6).unwrap(); // ok: test
        let holds = |_k: usize, r: usize| r < 2;
        per.on_write(0);
        per.on_write(1);
        let before = per.tree.leaves().to_vec();
        for (idx, prio) in [
            (vec![0, 4], vec![1.0, 1.0]),
            (vec![0, -1], vec![1.0, 1.0]),
            (vec![0, 1], vec![1.0, f64::NAN]),
            (vec![0, 1], vec![1.0, -2.0]),
            (vec![0, 1], vec![1.0, 1e281]),
        ] {
            let r = per.update(&idx, &prio, 4, holds, |_| ());
            assert!(
                matches!(r, Err(CoreError::InvalidValue(_))),
                "{idx:?} {prio:?}"
            );
            assert_eq!(per.tree.leaves(), &before[..]);
            // a front end's check of the whole update refuses it with the same error
            assert_eq!(
                check_priority_update(&idx, &prio, 4, 1.0, 1e-6),
                r.map(|_| ())
            );
        }
        assert_eq!(
            check_priority_update(&[0, 3, 3], &[0.0, 1.0, 1e200], 4, 1.0, 1e-6),
            Ok(())
        );
        assert!(matches!(
            check_priority_update(&[0], &[1.0], 4, -1.0, 1e-6),
            Err(CoreError::InvalidValue(_))
        ));
        assert!(matches!(
            check_priority_update(&[0], &[1.0, 2.0], 4, 1.0, 1e-6),
            Err(CoreError::Shape(_))
        ));
        assert!(matches!(
            per.update(&[0], &[1.0, 2.0], 4, holds, |_| ()),
            Err(CoreError::Shape(_))
        ));
        // rows 2 and 3 hold no transition: skipped
        assert_eq!(
            per.update(&[0, 2, 3], &[3.0, 1.0, 1.0], 4, holds, |_| ()),
            Ok(2)
        );
        assert_eq!(per.tree.get(0), 3.0 + 1e-6);
        assert_eq!(per.stats().2, 3.0 + 1e-6);
    }
}
