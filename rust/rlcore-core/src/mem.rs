//! Memory helpers shared by every module: fallible allocation, huge-page advice, short row
//! copies and comparisons without libc calls, typed views of byte slices, and division by a
//! fixed divisor. Nothing here knows about columns, episodes or sampling.

use crate::error::{CoreError, Result};

/// A boxed slice of `n` copies of `v`, or an `InvalidValue` error (instead of an abort) when the
/// memory cannot be had. Slices of 4 MiB or more are advised onto transparent huge pages before
/// they are first written (see [`advise_huge_pages`]): storage rows, episode records and the
/// priority tree are read at random rows, and with 4 KiB pages nearly every such read of a large
/// buffer also misses the TLB.
pub fn alloc<T: Clone>(n: usize, v: T) -> Result<Box<[T]>> {
    let mut x: Vec<T> = Vec::new();
    x.try_reserve_exact(n).map_err(|_| {
        CoreError::value(format!(
            "cannot allocate {n} x {} bytes for the buffer; use a smaller capacity",
            std::mem::size_of::<T>()
        ))
    })?;
    advise_huge_pages(x.as_ptr() as usize, n * std::mem::size_of::<T>());
    x.resize(n, v);
    Ok(x.into_boxed_slice())
}

/// Ask the kernel to back the whole 2 MiB pages inside `[start, start + bytes)` with transparent
/// huge pages (`madvise(MADV_HUGEPAGE)`; the system's THP mode "madvise" honours it). Only pages
/// not yet touched get them at their first write, so this must come before the memory is
/// filled; a fill before the advice (as this crate did until 0.2) leaves 4 KiB pages. Ranges
/// under 4 MiB are left alone; a hint only: no error when the kernel declines.
pub(crate) fn advise_huge_pages(start: usize, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        if bytes < 2 * HUGE {
            return;
        }
        let aligned = start.div_ceil(HUGE) * HUGE;
        let len = (start + bytes).saturating_sub(aligned) / HUGE * HUGE;
        if len == 0 {
            return;
        }
        // SAFETY: madvise on a range inside our own allocation only changes paging hints.
        unsafe {
            libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, bytes);
}

/// Copy a short byte row without a call into libc's memmove (rows are usually < 256 bytes):
/// two overlapping fixed-size moves cover any length between the block size and twice it.
#[inline(always)]
pub fn copy_row(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    debug_assert_eq!(n, dst.len());
    macro_rules! two {
        ($k:expr) => {{
            // SAFETY: n >= $k, so both $k-byte windows [0, $k) and [n - $k, n) are in bounds.
            unsafe {
                let a = std::ptr::read_unaligned(src.as_ptr() as *const [u8; $k]);
                let b = std::ptr::read_unaligned(src.as_ptr().add(n - $k) as *const [u8; $k]);
                std::ptr::write_unaligned(dst.as_mut_ptr() as *mut [u8; $k], a);
                std::ptr::write_unaligned(dst.as_mut_ptr().add(n - $k) as *mut [u8; $k], b);
            }
        }};
    }
    match n {
        0 => {}
        1..=3 => dst.copy_from_slice(src),
        4..=8 => two!(4),
        9..=16 => two!(8),
        17..=32 => two!(16),
        33..=64 => two!(32),
        65..=128 => two!(64),
        _ => dst.copy_from_slice(src),
    }
}

/// Gather one column of a batch: for each i, the `n` bytes at `rows[i] * rec + off` of `src`
/// into `dst[i * n .. (i + 1) * n]` (`dst.len() == rows.len() * n`). The copy width is chosen
/// once per column, not per row: the inner loop is specialised for the column's size class
/// (two overlapping moves of a fixed width), with no per-row dispatch or bounds checks once the
/// largest row and the output size are checked. Sizes that fail that check take the checked
/// slice path (which panics on a row outside `src`: a caller bug).
pub fn gather_column(src: &[u8], rec: usize, off: usize, n: usize, rows: &[usize], dst: &mut [u8]) {
    gather_rows(src, rec, off, n, GatherRows::new(rows), dst)
}

/// Row indices to gather several columns from, with their largest index found once for all of
/// them (the bounds check of [`gather_column`]).
#[derive(Debug, Clone, Copy)]
pub struct GatherRows<'a> {
    rows: &'a [usize],
    top: usize,
}

impl<'a> GatherRows<'a> {
    pub fn new(rows: &'a [usize]) -> Self {
        GatherRows {
            rows,
            top: rows.iter().copied().max().unwrap_or(0),
        }
    }
}

/// [`gather_column`] of rows whose largest index is already known.
pub fn gather_rows(
    src: &[u8],
    rec: usize,
    off: usize,
    n: usize,
    rows: GatherRows<'_>,
    dst: &mut [u8],
) {
    let (rows, top) = (rows.rows, rows.top);
    let fits = dst.len() == rows.len() * n
        && top
            .checked_mul(rec)
            .and_then(|x| x.checked_add(off + n))
            .is_some_and(|end| end <= src.len());
    #[inline(always)]
    fn each<const K: usize>(
        src: &[u8],
        rec: usize,
        off: usize,
        n: usize,
        rows: &[usize],
        dst: &mut [u8],
    ) {
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        for (i, &r) in rows.iter().enumerate() {
            // SAFETY: K <= n, the row's n bytes lie inside `src` (checked above for the largest
            // row) and slot i's n bytes inside `dst` (its size is checked above), so both K-byte
            // windows [0, K) and [n - K, n) of source and destination are in bounds.
            unsafe {
                let a = s.add(r * rec + off);
                let b = d.add(i * n);
                let x = std::ptr::read_unaligned(a as *const [u8; K]);
                let y = std::ptr::read_unaligned(a.add(n - K) as *const [u8; K]);
                std::ptr::write_unaligned(b as *mut [u8; K], x);
                std::ptr::write_unaligned(b.add(n - K) as *mut [u8; K], y);
            }
        }
    }
    match n {
        _ if !fits || n < 4 => {
            for (i, &r) in rows.iter().enumerate() {
                let o = r * rec + off;
                dst[i * n..(i + 1) * n].copy_from_slice(&src[o..o + n]);
            }
        }
        4..=8 => each::<4>(src, rec, off, n, rows, dst),
        9..=16 => each::<8>(src, rec, off, n, rows, dst),
        17..=32 => each::<16>(src, rec, off, n, rows, dst),
        33..=64 => each::<32>(src, rec, off, n, rows, dst),
        65..=128 => each::<64>(src, rec, off, n, rows, dst),
        _ => {
            for (i, &r) in rows.iter().enumerate() {
                let o = r * rec + off;
                dst[i * n..(i + 1) * n].copy_from_slice(&src[o..o + n]);
            }
        }
    }
}

/// A run of rows written from one source: input rows `at .. at + len` of source `src` into
/// rows `row .. row + len` (a single row is a run of length 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub row: usize,
    pub src: u8,
    pub at: usize,
    pub len: usize,
}

/// The mirror of [`gather_column`]: for each span of `writes`, in order, and each `j < len`, the
/// `n` bytes `srcs[src][(at + j) * n ..][..n]` into `dst` at `(row + j) * rec + off` (a later
/// write to a row replaces an earlier one; `src` picks one of two sources, e.g. `obs` and
/// `obs_next`). Specialised per size class like the gather; sizes or rows that fail the up-front
/// check take the checked slice path.
pub fn scatter_column(
    dst: &mut [u8],
    rec: usize,
    off: usize,
    n: usize,
    writes: &[Span],
    srcs: [&[u8]; 2],
) {
    let (top_row, top_src) = writes
        .iter()
        .filter(|w| w.len > 0)
        .fold((0, 0), |(r, i), w| {
            (r.max(w.row + w.len - 1), i.max(w.at + w.len - 1))
        });
    let fits = (top_src + 1)
        .checked_mul(n)
        .is_some_and(|end| end <= srcs[0].len().min(srcs[1].len()))
        && top_row
            .checked_mul(rec)
            .and_then(|x| x.checked_add(off + n))
            .is_some_and(|end| end <= dst.len())
        && writes.iter().all(|w| w.src < 2);
    #[inline(always)]
    fn each<const K: usize>(
        dst: &mut [u8],
        rec: usize,
        off: usize,
        n: usize,
        writes: &[Span],
        srcs: [&[u8]; 2],
    ) {
        let (s, d) = ([srcs[0].as_ptr(), srcs[1].as_ptr()], dst.as_mut_ptr());
        for w in writes {
            for j in 0..w.len {
                // SAFETY: K <= n, src < 2, and the largest row's and source index's n bytes were
                // checked to lie inside `dst` and both sources, so both K-byte windows of both
                // sides are in bounds.
                unsafe {
                    let a = s[w.src as usize].add((w.at + j) * n);
                    let b = d.add((w.row + j) * rec + off);
                    let x = std::ptr::read_unaligned(a as *const [u8; K]);
                    let y = std::ptr::read_unaligned(a.add(n - K) as *const [u8; K]);
                    std::ptr::write_unaligned(b as *mut [u8; K], x);
                    std::ptr::write_unaligned(b.add(n - K) as *mut [u8; K], y);
                }
            }
        }
    }
    match n {
        _ if !fits || !(4..=128).contains(&n) => {
            for w in writes {
                for j in 0..w.len {
                    let (o, i) = ((w.row + j) * rec + off, w.at + j);
                    dst[o..o + n].copy_from_slice(&srcs[w.src as usize][i * n..(i + 1) * n]);
                }
            }
        }
        4..=8 => each::<4>(dst, rec, off, n, writes, srcs),
        9..=16 => each::<8>(dst, rec, off, n, writes, srcs),
        17..=32 => each::<16>(dst, rec, off, n, writes, srcs),
        33..=64 => each::<32>(dst, rec, off, n, writes, srcs),
        _ => each::<64>(dst, rec, off, n, writes, srcs),
    }
}

/// Hint the CPU to fetch the cache line holding `x` (a hint only: it never faults).
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint and never faults; the address is a valid reference.
    unsafe {
        std::arch::x86_64::_mm_prefetch(x as *const T as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// Byte equality without a call into libc's memcmp (the rows compared on every add are short).
#[inline]
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        let x = u64::from_ne_bytes([x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]]);
        let y = u64::from_ne_bytes([y[0], y[1], y[2], y[3], y[4], y[5], y[6], y[7]]);
        if x != y {
            return false;
        }
    }
    ca.remainder()
        .iter()
        .zip(cb.remainder())
        .all(|(x, y)| x == y)
}

/// Plain numeric types: no padding, every bit pattern valid, so their slices can be viewed as
/// bytes and (when aligned) bytes as them.
pub trait Plain: Copy + 'static {}
impl Plain for u8 {}
impl Plain for i64 {}
impl Plain for u64 {}
impl Plain for f32 {}
impl Plain for f64 {}

/// The bytes of a slice of plain numbers.
#[inline]
pub fn bytes_of<T: Plain>(x: &[T]) -> &[u8] {
    // SAFETY: T is a plain numeric type without padding; any byte pattern is a valid u8.
    unsafe { std::slice::from_raw_parts(x.as_ptr() as *const u8, std::mem::size_of_val(x)) }
}

/// The bytes of a mutable slice of plain numbers.
#[inline]
pub fn bytes_of_mut<T: Plain>(x: &mut [T]) -> &mut [u8] {
    // SAFETY: as `bytes_of`; every byte pattern written through the view is a valid T.
    unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr() as *mut u8, std::mem::size_of_val(x)) }
}

/// A byte slice as a slice of `T`, or `None` when it is misaligned for `T` or not a whole
/// number of `T`s.
#[inline]
pub fn cast_mut<T: Plain>(b: &mut [u8]) -> Option<&mut [T]> {
    // SAFETY: every bit pattern is a valid T; align_to_mut only splits off misaligned ends.
    let (head, mid, tail) = unsafe { b.align_to_mut::<T>() };
    (head.is_empty() && tail.is_empty()).then_some(mid)
}

/// A byte slice as `T`s: borrowed when aligned (NumPy arrays are), copied otherwise. The length
/// must be a multiple of `size_of::<T>()`; trailing bytes are ignored.
pub fn cast_or_copy<T: Plain>(b: &[u8]) -> std::borrow::Cow<'_, [T]> {
    // SAFETY: every bit pattern is a valid T; align_to only splits off misaligned ends.
    let (head, mid, tail) = unsafe { b.align_to::<T>() };
    if head.is_empty() && tail.is_empty() {
        std::borrow::Cow::Borrowed(mid)
    } else {
        let s = std::mem::size_of::<T>();
        std::borrow::Cow::Owned(
            b.chunks_exact(s)
                // SAFETY: each chunk holds exactly size_of::<T>() bytes; unaligned read.
                .map(|c| unsafe { std::ptr::read_unaligned(c.as_ptr() as *const T) })
                .collect(),
        )
    }
}

/// Division by a fixed divisor d >= 2 via one 128-bit multiply (Lemire, Kaser & Kurz 2019,
/// "Faster Remainder by Direct Computation"): exact for numerators and divisors below 2^32,
/// a plain division above.
#[derive(Debug, Clone, Copy)]
pub struct FastDiv {
    m: u64,
    d: u64,
}

impl FastDiv {
    pub fn new(d: u64) -> Self {
        FastDiv {
            m: u64::MAX / d.max(1) + 1,
            d,
        }
    }
    #[inline]
    pub fn div(&self, n: u64) -> u64 {
        // one test for both operands below 2^32 (the multiply is exact there)
        if (n | self.d) >> 32 != 0 {
            return n / self.d;
        }
        ((n as u128 * self.m as u128) >> 64) as u64
    }
    /// `n % d`, by the same multiply.
    #[inline]
    pub fn rem(&self, n: u64) -> u64 {
        n - self.div(n) * self.d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kB of `AnonHugePages` in the mapping of /proc/self/smaps that holds `addr`.
    #[cfg(target_os = "linux")]
    fn huge_kb_at(addr: usize) -> Option<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            let head = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = head.split_once('-') {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    inside = lo <= addr && addr < hi;
                    continue;
                }
            }
            if inside {
                if let Some(kb) = line.strip_prefix("AnonHugePages:") {
                    return kb.trim().trim_end_matches("kB").trim().parse().ok();
                }
            }
        }
        None
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn large_allocations_get_huge_pages_where_the_kernel_gives_them() {
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        if !mode.contains("[madvise]") && !mode.contains("[always]") {
            return; // THP off on this kernel: nothing to check
        }
        let data = alloc(8 << 20, 0u64).unwrap(); // ok: test; 64 MiB, filled by alloc itself
        let at = data.as_ptr() as usize + (32 << 20);
        let kb = huge_kb_at(at).expect("the mapping is in smaps"); // ok: test

        // all but the unaligned ends (at most two partial 2 MiB pages) on huge pages
        assert!(
            kb >= 60 << 10,
            "only {kb} kB of 65536 on huge pages (THP mode {mode:?})"
        );
    }

    #[test]
    fn copy_row_copies_every_length() {
        for n in 0..300 {
            let src: Vec<u8> = (0..n).map(|i| (i * 7 + 1) as u8).collect();
            let mut dst = vec![0u8; n];
            copy_row(&mut dst, &src);
            assert_eq!(dst, src, "length {n}");
            assert!(same_bytes(&dst, &src));
            if n > 0 {
                dst[n - 1] ^= 1;
                assert!(!same_bytes(&dst, &src), "length {n}");
            }
        }
        assert!(!same_bytes(&[1, 2], &[1]));
    }

    #[test]
    fn gather_column_copies_each_rows_bytes_for_every_width() {
        let rec = 160;
        let src: Vec<u8> = (0..rec * 9).map(|i| (i * 13 + 5) as u8).collect();
        let rows = [3usize, 0, 8, 8, 5];
        for n in 0..=150 {
            for off in [0usize, 1, 7, 10] {
                if off + n > rec {
                    continue;
                }
                let mut dst = vec![0u8; rows.len() * n];
                gather_column(&src, rec, off, n, &rows, &mut dst);
                let want: Vec<u8> = rows
                    .iter()
                    .flat_map(|&r| src[r * rec + off..r * rec + off + n].iter().copied())
                    .collect();
                assert_eq!(dst, want, "width {n} offset {off}");
            }
        }
        // the last row ends exactly at the end of the source
        let mut dst = vec![0u8; 100];
        gather_column(&src, rec, rec - 100, 100, &[8], &mut dst);
        assert_eq!(&dst[..], &src[9 * rec - 100..]);
    }

    #[test]
    fn scatter_column_writes_in_order_for_every_width() {
        let rec = 160;
        let sp = |row, src, at, len| Span { row, src, at, len };
        for n in 0..=150 {
            let a: Vec<u8> = (0..6 * n).map(|i| (i * 7 + 3) as u8).collect();
            let b: Vec<u8> = (0..6 * n).map(|i| (i * 5 + 1) as u8).collect();
            // row 2 is written from both sources and row 6 by two runs; the later write wins
            let writes = [
                sp(2usize, 0u8, 0usize, 1usize),
                sp(5, 1, 3, 3),
                sp(2, 1, 1, 1),
                sp(8, 0, 2, 1),
                sp(4, 0, 1, 4),
                sp(0, 1, 0, 0),
            ];
            let off = 10.min(rec - n);
            let mut dst = vec![0xAAu8; rec * 9];
            let mut want = dst.clone();
            scatter_column(&mut dst, rec, off, n, &writes, [&a, &b]);
            for w in &writes {
                let src = if w.src == 0 { &a } else { &b };
                for j in 0..w.len {
                    let (r, i) = (w.row + j, w.at + j);
                    want[r * rec + off..r * rec + off + n]
                        .copy_from_slice(&src[i * n..(i + 1) * n]);
                }
            }
            assert_eq!(dst, want, "width {n}");
        }
    }

    #[test]
    fn fast_div_is_exact_below_2_pow_32_and_falls_back_above() {
        for d in [2u64, 3, 7, 10, 1000, 65_537, (1 << 32) - 1, 1 << 33] {
            let f = FastDiv::new(d);
            for n in [0u64, 1, 5, 999, 1 << 20, (1 << 32) - 1, 1 << 40, u64::MAX] {
                assert_eq!(f.div(n), n / d, "{n} / {d}");
                assert_eq!(f.rem(n), n % d, "{n} % {d}");
            }
        }
    }

    #[test]
    fn casts_refuse_misaligned_slices_and_copies_read_them() {
        let mut words = [0u64; 3];
        let bytes = bytes_of_mut(&mut words);
        bytes[..4].copy_from_slice(&1.5f32.to_ne_bytes());
        assert_eq!(cast_mut::<f32>(&mut bytes[..8]).map(|s| s[0]), Some(1.5));
        assert!(cast_mut::<f32>(&mut bytes[1..9]).is_none());
        bytes[1..5].copy_from_slice(&2.5f32.to_ne_bytes());
        assert_eq!(cast_or_copy::<f32>(&bytes[1..9])[0], 2.5);
        assert!(alloc::<u8>(usize::MAX, 0).is_err());
    }
}
