//! Element arithmetic shared by the host kernels: [`numeric!`] picks the Rust type of a
//! numeric dtype, and [`Arith`] computes on every one of them the way ONNX runtimes do:
//! integers wrap (two's complement), f16 and bf16 compute in f32 and round once to nearest
//! even. The float8 dtypes are storage types: these macros refuse them.

use crate::ir::operators::elementwise::Elem;
use crate::ir::types::DType;
use half::{bf16, f16};

/// Runs `$body` with `$T` the Rust type of `$d` when `$d` is one of the listed dtypes;
/// any other dtype `$o` evaluates `$other`. The one dtype-to-type table every dispatch
/// ([`numeric!`], the bitwise family's integer dispatch, the CLI's `.npy` I/O) is cut
/// from.
#[doc(hidden)]
#[macro_export]
macro_rules! with_dtype {
    ($d:expr, $T:ident => $body:expr; [$($D:ident: $t:ty),* $(,)?], $o:ident => $other:expr) => {
        match $d {
            $($crate::types::DType::$D => {
                type $T = $t;
                $body
            })*
            #[allow(unreachable_patterns)]
            $o => $other,
        }
    };
}

/// Runs `$body` with `$T` the Rust type of the numeric dtype `$d`; bool and the float8
/// storage types return an error from the enclosing function.
macro_rules! numeric {
    ($d:expr, $T:ident => $body:expr) => {
        $crate::with_dtype!($d, $T => $body; [
            F32: f32, F16: half::f16, F64: f64, I8: i8, I16: i16, I32: i32, I64: i64,
            U8: u8, U16: u16, U32: u32, U64: u64, BF16: half::bf16,
        ], d => return Err($crate::ops::num::not_numeric(d)))
    };
}
pub(crate) use numeric;

/// Why [`numeric!`] refuses a dtype.
pub(crate) fn not_numeric(d: crate::ir::types::DType) -> String {
    if d == crate::ir::types::DType::Bool {
        "bool tensors have no numeric value here".to_string()
    } else {
        format!("{d} is a storage type: Cast it to a wider float to compute on it")
    }
}

/// Runs `$body` with `$T` the Rust type of the float dtype `$d`; other dtypes return an
/// error from the enclosing function.
macro_rules! floating {
    ($d:expr, $T:ident => $body:expr) => {
        match $d {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F16 => {
                type $T = half::f16;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            DType::BF16 => {
                type $T = half::bf16;
                $body
            }
            d => return Err(format!("{d} is not a float dtype this operator computes in")),
        }
    };
}
pub(crate) use floating;

/// Arithmetic on one numeric element type.
pub(crate) trait Arith: Elem + PartialOrd + Default {
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// Integers: truncating; by zero gives 0 (kernels refuse a zero divisor first) and
    /// `MIN / -1` wraps to `MIN`.
    fn div(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    fn is_nan(self) -> bool;
    fn to_f64(self) -> f64;
    /// Floats round; integers truncate toward zero and saturate (NaN gives 0), as Rust's
    /// `as`.
    fn from_f64(v: f64) -> Self;
    /// Integers: the value (u64 wraps); floats truncate and saturate.
    fn to_i64(self) -> i64;
    /// Integers: the low bits (wrapping); floats: the nearest value.
    fn from_i64(v: i64) -> Self;
    fn is_zero(self) -> bool {
        self == Self::default()
    }
    /// The larger of two values; NaN if either is.
    fn max_nan(self, o: Self) -> Self {
        if self > o || self.is_nan() {
            self
        } else {
            o
        }
    }
    /// A total order: NaN above every number (as numpy sorts).
    fn total_order(self, o: Self) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        match (self.is_nan(), o.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => self.partial_cmp(&o).unwrap_or(Ordering::Equal),
        }
    }
    /// The smaller of two values; NaN if either is.
    fn min_nan(self, o: Self) -> Self {
        if self < o || self.is_nan() {
            self
        } else {
            o
        }
    }
}

macro_rules! arith_int {
    (|$a:ident| $abs:expr; $($t:ty),*) => {$(
        impl Arith for $t {
            #[inline(always)]
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)]
            fn div(self, o: Self) -> Self { if o == 0 { 0 } else { self.wrapping_div(o) } }
            #[inline(always)]
            fn neg(self) -> Self { self.wrapping_neg() }
            #[inline(always)]
            fn abs(self) -> Self { let $a = self; $abs }
            #[inline(always)]
            fn is_nan(self) -> bool { false }
            #[inline(always)]
            fn to_f64(self) -> f64 { self as f64 }
            #[inline(always)]
            fn from_f64(v: f64) -> Self { v as $t }
            #[inline(always)]
            fn to_i64(self) -> i64 { self as i64 }
            #[inline(always)]
            fn from_i64(v: i64) -> Self { v as $t }
        }
    )*};
}
arith_int!(|v| v.wrapping_abs(); i8, i16, i32, i64);
arith_int!(|v| v; u8, u16, u32, u64);

macro_rules! arith_float {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            #[inline(always)]
            fn add(self, o: Self) -> Self { self + o }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { self - o }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { self * o }
            #[inline(always)]
            fn div(self, o: Self) -> Self { self / o }
            #[inline(always)]
            fn neg(self) -> Self { -self }
            #[inline(always)]
            fn abs(self) -> Self { <$t>::abs(self) }
            #[inline(always)]
            fn is_nan(self) -> bool { <$t>::is_nan(self) }
            #[inline(always)]
            fn to_f64(self) -> f64 { self as f64 }
            #[inline(always)]
            fn from_f64(v: f64) -> Self { v as $t }
            #[inline(always)]
            fn to_i64(self) -> i64 { self as i64 }
            #[inline(always)]
            fn from_i64(v: i64) -> Self { v as $t }
        }
    )*};
}
arith_float!(f32, f64);

/// f16 and bf16 compute in f32: each result is the f32 result rounded once.
macro_rules! arith_half {
    ($($t:ident),*) => {$(
impl Arith for $t {
    fn add(self, o: Self) -> Self {
        $t::from_f32(self.to_f32() + o.to_f32())
    }
    fn sub(self, o: Self) -> Self {
        $t::from_f32(self.to_f32() - o.to_f32())
    }
    fn mul(self, o: Self) -> Self {
        $t::from_f32(self.to_f32() * o.to_f32())
    }
    fn div(self, o: Self) -> Self {
        $t::from_f32(self.to_f32() / o.to_f32())
    }
    fn neg(self) -> Self {
        -self
    }
    fn abs(self) -> Self {
        $t::from_bits(self.to_bits() & 0x7fff)
    }
    fn is_nan(self) -> bool {
        $t::is_nan(self)
    }
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> Self {
        // Through f32, as the OpenCL kernels round (f64 → f16 directly could differ by a
        // double rounding only where f32 → f16 would too).
        $t::from_f32(v as f32)
    }
    fn to_i64(self) -> i64 {
        self.to_f32() as i64
    }
    fn from_i64(v: i64) -> Self {
        $t::from_f32(v as f32)
    }
}
    )*};
}
arith_half!(f16, bf16);

/// `v` rounded to the float dtype `d` (f64 stays).
pub(crate) fn round_to(d: DType, v: f64) -> f64 {
    match d {
        DType::F32 => v as f32 as f64,
        DType::F16 => f16::from_f64(v).to_f64(),
        _ => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_wrap_and_division_truncates() {
        assert_eq!(Arith::add(i8::MAX, 1), i8::MIN);
        assert_eq!(Arith::sub(0u16, 1), u16::MAX);
        assert_eq!(Arith::mul(200u8, 2), 144);
        assert_eq!(Arith::div(-7i32, 2), -3);
        assert_eq!(Arith::div(i64::MIN, -1), i64::MIN);
        assert_eq!(Arith::neg(1u32), u32::MAX);
        assert_eq!(Arith::abs(i16::MIN), i16::MIN);
        assert_eq!(Arith::abs(7u64), 7);
    }

    #[test]
    fn f16_rounds_once_from_f32() {
        let (a, b) = (f16::from_f32(1.0), f16::from_f32(0.000_488_281_25));
        // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: nearest even is 1.
        assert_eq!(Arith::add(a, b), f16::from_f32(1.0));
        assert_eq!(Arith::abs(f16::from_f32(-2.5)), f16::from_f32(2.5));
        assert!(Arith::max_nan(f16::NAN, a).is_nan());
        assert!(Arith::min_nan(a, f16::NAN).is_nan());
    }

    #[test]
    fn bf16_rounds_once_from_f32() {
        let (a, b) = (bf16::from_f32(1.0), bf16::from_f32(2f32.powi(-8)));
        // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: nearest even is 1.
        assert_eq!(Arith::add(a, b), bf16::from_f32(1.0));
        assert_eq!(Arith::add(Arith::add(a, b), Arith::add(b, b)), bf16::from_f32(1.0 + 2f32.powi(-7)));
        assert_eq!(Arith::abs(bf16::from_f32(-2.5)), bf16::from_f32(2.5));
        assert_eq!(Arith::div(bf16::from_f32(1.0), bf16::from_f32(3.0)).to_bits(), 0x3eab);
        assert!(Arith::max_nan(bf16::NAN, a).is_nan());
    }
}
