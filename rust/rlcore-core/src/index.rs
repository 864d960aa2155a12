//! What an index names (issue 38).
//!
//! A bare row index (`0 <= i < rows`) names whatever its row holds at the time it is used. The
//! indices a prioritized buffer hands out — `sample`'s and `sample_at`'s `indices`,
//! `sample_sequences`' `start_indices`, `add`'s rows — name one *transition*: bits
//! `0..ROW_BITS` hold its row and bits `ROW_BITS..63` its generation `1 + lap mod GENERATIONS`,
//! where `lap = abs / seg` counts how often the env's ring segment had wrapped when the
//! transition was written. A row holds one transition per lap, so (row, generation) names it
//! until `GENERATIONS` further laps of that segment have gone by (at least 2^62 / num_envs
//! steps of its env: never, in practice). An index whose generation is not that of the
//! transition its row holds now is *stale*: priority updates skip it (and count it), reads
//! refuse it. While a segment has not wrapped, an index is `row + 2^ROW_BITS`. `clear` starts
//! the laps again (they are derived from the saved ring cursors, so a save round-trips its
//! indices exactly): an index handed out before a `clear` can name a transition written after
//! it.

/// Bits of an index that hold its row: a buffer has fewer than 2^40 rows.
pub const ROW_BITS: u32 = 40;
/// `index & ROW_MASK` is an index's row.
pub const ROW_MASK: u64 = (1 << ROW_BITS) - 1;
/// Generations run `1..=GENERATIONS` (0 marks a bare row), so an index stays below 2^63.
pub const GENERATIONS: u64 = (1 << (63 - ROW_BITS)) - 1;

/// `(row, generation)` of a non-negative index (generation 0: a bare row).
#[inline]
pub fn split(i: i64) -> (u64, u64) {
    let u = i as u64;
    (u & ROW_MASK, u >> ROW_BITS)
}

/// The index naming the transition in `row` written during lap `lap` of its segment.
#[inline]
pub fn join(row: usize, lap: u64) -> i64 {
    ((1 + lap % GENERATIONS) << ROW_BITS | row as u64) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_split_into_row_and_generation() {
        assert_eq!(split(join(5, 0)), (5, 1));
        assert_eq!(join(5, 0), 5 + (1 << 40));
        assert_eq!(split(join(7, GENERATIONS - 1)), (7, GENERATIONS));
        // the generations cycle; an index stays positive
        assert_eq!(join(7, GENERATIONS), join(7, 0));
        assert!(join(ROW_MASK as usize, GENERATIONS - 1) > 0);
        assert_eq!(split(3), (3, 0));
    }
}
