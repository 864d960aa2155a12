//! Element types of stored columns, the borrowed typed arrays a front end hands in, and the
//! casts allowed when writing them into a column.

use crate::error::{CoreError, Result};

/// A borrowed input array: dtype, shape and C-contiguous native-endian bytes.
#[derive(Debug, Clone, Copy)]
pub struct Array<'a> {
    pub dtype: DType,
    pub shape: &'a [usize],
    pub data: &'a [u8],
}

impl Array<'_> {
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }
    /// Bytes of one row below the leading `lead` dimensions.
    pub fn row_bytes(&self, lead: usize) -> usize {
        self.shape[lead..].iter().product::<usize>() * self.dtype.size()
    }
}

/// Element type of a column or of an input array (native byte order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    Bool,
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
    F32,
    F64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Unsigned,
    Signed,
    Float,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
        }
    }

    fn kind(self) -> Kind {
        match self {
            DType::Bool => Kind::Bool,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => Kind::Unsigned,
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => Kind::Signed,
            DType::F32 | DType::F64 => Kind::Float,
        }
    }

    /// From NumPy's `dtype.kind` character and `dtype.itemsize`.
    pub fn from_kind(kind: u8, itemsize: usize) -> Option<DType> {
        Some(match (kind, itemsize) {
            (b'b', 1) => DType::Bool,
            (b'u', 1) => DType::U8,
            (b'u', 2) => DType::U16,
            (b'u', 4) => DType::U32,
            (b'u', 8) => DType::U64,
            (b'i', 1) => DType::I8,
            (b'i', 2) => DType::I16,
            (b'i', 4) => DType::I32,
            (b'i', 8) => DType::I64,
            (b'f', 4) => DType::F32,
            (b'f', 8) => DType::F64,
            _ => return None,
        })
    }

    /// The NumPy name (`"float32"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    pub fn from_name(name: &str) -> Option<DType> {
        Some(match name {
            "bool" => DType::Bool,
            "uint8" => DType::U8,
            "uint16" => DType::U16,
            "uint32" => DType::U32,
            "uint64" => DType::U64,
            "int8" => DType::I8,
            "int16" => DType::I16,
            "int32" => DType::I32,
            "int64" => DType::I64,
            "float32" => DType::F32,
            "float64" => DType::F64,
            _ => return None,
        })
    }

    /// NumPy's `same_kind` rule: bool into anything; unsigned into unsigned, signed or float;
    /// signed into signed or float; float into float. Float into an integer column, and any
    /// number into a bool column, lose information and are refused.
    pub fn can_cast_to(self, dst: DType) -> bool {
        use Kind::*;
        matches!(
            (self.kind(), dst.kind()),
            (Bool, _)
                | (Unsigned, Unsigned | Signed | Float)
                | (Signed, Signed | Float)
                | (Float, Float)
        )
    }
}

/// Check that `src` can be written into a column of dtype `dst`, naming the column on failure.
pub fn check_cast(what: &str, src: DType, dst: DType) -> Result<()> {
    if src.can_cast_to(dst) {
        Ok(())
    } else {
        Err(CoreError::dtype(format!(
            "{what}: cannot store {} values in a {} column without loss; convert explicitly \
             (e.g. arr.astype(np.{}))",
            src.name(),
            dst.name(),
            dst.name()
        )))
    }
}

/// Check that every element of `src` (dtype `src_dt`, a cast allowed by [`check_cast`]) keeps
/// its value in a `dst` column: integers within an integer column's range, integers into a
/// float column only where the float holds them exactly (every integer up to 2^24 in
/// magnitude for float32, 2^53 for float64; above that only those the float represents), and
/// finite floats finite. Rounding a float (float64 into float32) is accepted; overflow and
/// rounding an integer are not.
pub fn check_values(what: &str, src: &[u8], src_dt: DType, dst: DType) -> Result<()> {
    if src_dt == dst || src_dt == DType::Bool || (src_dt.kind() == Kind::Float && dst == DType::F64)
    {
        return Ok(());
    }
    // an integer into a float column: exact when it converts back to itself
    let exact = |v: i128| match dst {
        DType::F32 => (v as f32) as i128 == v,
        DType::F64 => (v as f64) as i128 == v,
        _ => true,
    };
    let (lo, hi): (i128, i128) = match dst {
        DType::U8 => (0, u8::MAX as i128),
        DType::U16 => (0, u16::MAX as i128),
        DType::U32 => (0, u32::MAX as i128),
        DType::U64 => (0, u64::MAX as i128),
        DType::I8 => (i8::MIN as i128, i8::MAX as i128),
        DType::I16 => (i16::MIN as i128, i16::MAX as i128),
        DType::I32 => (i32::MIN as i128, i32::MAX as i128),
        DType::I64 => (i64::MIN as i128, i64::MAX as i128),
        _ => (i128::MIN, i128::MAX),
    };
    for (k, b) in src.chunks_exact(src_dt.size()).enumerate() {
        let ok = match read(src_dt, b) {
            Value::F(f) => dst != DType::F32 || !f.is_finite() || (f as f32).is_finite(),
            Value::I(i) => (lo..=hi).contains(&(i as i128)) && exact(i as i128),
            Value::U(u) => (lo..=hi).contains(&(u as i128)) && exact(u as i128),
        };
        if !ok {
            let float = dst.kind() == Kind::Float;
            let v = match read(src_dt, b) {
                Value::F(f) => format!("{f:e}"),
                Value::I(i) => i.to_string(),
                Value::U(u) => u.to_string(),
            };
            let why = if float {
                "is not exactly representable in"
            } else {
                "does not fit"
            };
            return Err(CoreError::dtype(format!(
                "{what}: element {k} ({v}, {}) {why} a {} column; convert explicitly \
                 or declare the column with a wider dtype",
                src_dt.name(),
                dst.name()
            )));
        }
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Value {
    F(f64),
    I(i64),
    U(u64),
}

#[inline]
fn read(dt: DType, b: &[u8]) -> Value {
    macro_rules! rd {
        ($t:ty) => {{
            let mut a = [0u8; std::mem::size_of::<$t>()];
            a.copy_from_slice(&b[..std::mem::size_of::<$t>()]);
            <$t>::from_ne_bytes(a)
        }};
    }
    match dt {
        // NumPy's rule: a bool is true when its byte is nonzero, whatever the byte
        DType::Bool => Value::U((b[0] != 0) as u64),
        DType::U8 => Value::U(b[0] as u64),
        DType::U16 => Value::U(rd!(u16) as u64),
        DType::U32 => Value::U(rd!(u32) as u64),
        DType::U64 => Value::U(rd!(u64)),
        DType::I8 => Value::I(b[0] as i8 as i64),
        DType::I16 => Value::I(rd!(i16) as i64),
        DType::I32 => Value::I(rd!(i32) as i64),
        DType::I64 => Value::I(rd!(i64)),
        DType::F32 => Value::F(rd!(f32) as f64),
        DType::F64 => Value::F(rd!(f64)),
    }
}

#[inline]
fn write(dt: DType, v: Value, out: &mut [u8]) {
    macro_rules! wr {
        ($t:ty, $x:expr) => {{
            out[..std::mem::size_of::<$t>()].copy_from_slice(&($x as $t).to_ne_bytes());
        }};
    }
    let (f, i, u) = match v {
        Value::F(f) => (f, f as i64, f as u64),
        Value::I(i) => (i as f64, i, i as u64),
        Value::U(u) => (u as f64, u as i64, u),
    };
    match dt {
        DType::Bool => out[0] = (u != 0 || f != 0.0) as u8,
        DType::U8 => wr!(u8, u),
        DType::U16 => wr!(u16, u),
        DType::U32 => wr!(u32, u),
        DType::U64 => wr!(u64, u),
        DType::I8 => wr!(i8, i),
        DType::I16 => wr!(i16, i),
        DType::I32 => wr!(i32, i),
        DType::I64 => wr!(i64, i),
        DType::F32 => wr!(f32, f),
        DType::F64 => wr!(f64, f),
    }
}

/// Copy `src` (elements of `src_dt`) into `dst` (elements of `dst_dt`), converting each element.
/// Both slices must hold the same number of elements. A bool element is 0 or 1 in every
/// destination (NumPy's cast), whatever byte it is stored as (a bool array viewed from uint8
/// can hold 2 or 255).
pub fn cast_into(src: &[u8], src_dt: DType, dst: &mut [u8], dst_dt: DType) {
    if src_dt == DType::Bool {
        if dst_dt.size() == 1 {
            for (d, s) in dst.iter_mut().zip(src) {
                *d = (*s != 0) as u8;
            }
        } else {
            for (s, d) in src.iter().zip(dst.chunks_exact_mut(dst_dt.size())) {
                write(dst_dt, Value::U((*s != 0) as u64), d);
            }
        }
        return;
    }
    if src_dt == dst_dt || (src_dt.size() == 1 && dst_dt.size() == 1 && src_dt != DType::I8) {
        crate::mem::copy_row(dst, src);
        return;
    }
    let (ss, ds) = (src_dt.size(), dst_dt.size());
    for (s, d) in src.chunks_exact(ss).zip(dst.chunks_exact_mut(ds)) {
        write(dst_dt, read(src_dt, s), d);
    }
}

/// Read element `i` of a byte slice of dtype `dt` as f64 (for rewards).
#[inline(always)]
pub fn read_f64(dt: DType, bytes: &[u8], i: usize) -> f64 {
    // the rewards' usual dtypes inline, the others through the generic read
    match dt {
        DType::F32 => {
            let b = &bytes[i * 4..i * 4 + 4];
            f32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64
        }
        DType::F64 => {
            let b = &bytes[i * 8..i * 8 + 8];
            f64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
        }
        _ => read_f64_any(dt, bytes, i),
    }
}

#[inline(never)]
fn read_f64_any(dt: DType, bytes: &[u8], i: usize) -> f64 {
    let s = dt.size();
    match read(dt, &bytes[i * s..(i + 1) * s]) {
        Value::F(f) => f,
        Value::I(x) => x as f64,
        Value::U(x) => x as f64,
    }
}

/// Read element `i` as a flag: nonzero means set.
#[inline(always)]
pub fn read_flag(dt: DType, bytes: &[u8], i: usize) -> bool {
    let s = dt.size();
    if s == 1 {
        return bytes[i] != 0;
    }
    bytes[i * s..(i + 1) * s].iter().any(|&b| b != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_go_into_float_columns_only_where_the_float_holds_them_exactly() {
        let bytes = |v: &[i64]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
        let ok = |v: &[i64], dst| check_values("obs", &bytes(v), DType::I64, dst);
        assert_eq!(ok(&[1 << 24, -(1 << 24), 1 << 30, 123], DType::F32), Ok(()));
        assert!(matches!(
            ok(&[(1 << 24) + 1], DType::F32),
            Err(CoreError::DType(_))
        ));
        assert!(matches!(
            ok(&[123456789], DType::F32),
            Err(CoreError::DType(_))
        ));
        assert_eq!(ok(&[1 << 53, (1 << 53) + 2, 16777217], DType::F64), Ok(()));
        assert!(matches!(
            ok(&[(1 << 53) + 1], DType::F64),
            Err(CoreError::DType(_))
        ));
        assert!(matches!(
            ok(&[i64::MAX], DType::F64),
            Err(CoreError::DType(_))
        ));
        let u = u64::MAX.to_ne_bytes();
        assert!(check_values("obs", &u, DType::U64, DType::F64).is_err());
        // floats into float64, and float rounding into float32, stay accepted
        assert_eq!(
            check_values("obs", &0.1f64.to_ne_bytes(), DType::F64, DType::F32),
            Ok(())
        );
        assert_eq!(
            check_values("obs", &0.1f32.to_ne_bytes(), DType::F32, DType::F64),
            Ok(())
        );
    }

    #[test]
    fn same_kind_rules() {
        assert!(DType::F64.can_cast_to(DType::F32));
        assert!(DType::I64.can_cast_to(DType::F32));
        assert!(DType::Bool.can_cast_to(DType::U8));
        assert!(DType::U8.can_cast_to(DType::I64));
        assert!(!DType::F32.can_cast_to(DType::I64));
        assert!(!DType::I64.can_cast_to(DType::U8));
        assert!(!DType::I64.can_cast_to(DType::Bool));
    }

    #[test]
    fn bool_bytes_2_and_255_cast_to_exactly_one_in_every_dtype() {
        let all = [
            DType::Bool,
            DType::U8,
            DType::U16,
            DType::U32,
            DType::U64,
            DType::I8,
            DType::I16,
            DType::I32,
            DType::I64,
            DType::F32,
            DType::F64,
        ];
        let src = [2u8, 255, 0, 1];
        for dst_dt in all {
            let mut dst = vec![0xAAu8; 4 * dst_dt.size()];
            cast_into(&src, DType::Bool, &mut dst, dst_dt);
            let got: Vec<f64> = (0..4).map(|i| read_f64(dst_dt, &dst, i)).collect();
            assert_eq!(got, [1.0, 1.0, 0.0, 1.0], "{}", dst_dt.name());
            let one = match dst_dt {
                DType::F32 => 1f32.to_ne_bytes().to_vec(),
                DType::F64 => 1f64.to_ne_bytes().to_vec(),
                d => {
                    let mut v = vec![0u8; d.size()];
                    v[..1].copy_from_slice(&[1]);
                    if cfg!(target_endian = "big") {
                        v.reverse();
                    }
                    v
                }
            };
            assert_eq!(&dst[..dst_dt.size()], &one[..], "{}", dst_dt.name());
        }
        assert_eq!(read_f64(DType::Bool, &[2], 0), 1.0);
    }

    #[test]
    fn cast_f64_to_f32_and_i32_to_f64() {
        let src: Vec<u8> = [1.5f64, -2.25]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        let mut dst = vec![0u8; 8];
        cast_into(&src, DType::F64, &mut dst, DType::F32);
        let a = f32::from_ne_bytes(dst[0..4].try_into().unwrap()); // ok: test
        let b = f32::from_ne_bytes(dst[4..8].try_into().unwrap()); // ok: test
        assert_eq!((a, b), (1.5, -2.25));
        let src: Vec<u8> = [-3i32].iter().flat_map(|x| x.to_ne_bytes()).collect();
        let mut dst = vec![0u8; 8];
        cast_into(&src, DType::I32, &mut dst, DType::F64);
        assert_eq!(f64::from_ne_bytes(dst[..].try_into().unwrap()), -3.0); // ok: test
    }
}
