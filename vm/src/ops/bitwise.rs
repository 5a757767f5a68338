//! Operators: the bitwise family (BitShift, BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot,
//! BitCast) and the float classifiers and Mean (IsInf, IsNaN, Mean): the host kernels and
//! their `HOST` table (the schemas are in `crate::ir::operators::bitwise`).
//!
//! Every kernel re-runs the shape inference on its actual inputs and checks the data sizes
//! first ([`prepare`]), so it only indexes tensors whose sizes are known to be right. The
//! helpers here are shared with the quantization and linear-algebra families.

use super::host::{first, prepare, req, HostFn};
use super::num::{floating, Arith};
use super::{Attrs, InferFn};
use crate::ir::host_tensor::HostTensor;
use crate::ir::operators::bitwise::*;
use crate::ir::operators::elementwise::{values, Elem};
use crate::ir::operators::shape::broadcast_strides;
use crate::ir::operators::Operator;
use crate::ir::types::DType;

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[
    (Operator::BitShift, bit_shift),
    (Operator::BitwiseAnd, bitwise_and),
    (Operator::BitwiseOr, bitwise_or),
    (Operator::BitwiseXor, bitwise_xor),
    (Operator::BitwiseNot, bitwise_not),
    (Operator::IsInf, is_inf),
    (Operator::IsNaN, is_nan),
    (Operator::Mean, mean),
    (Operator::BitCast, bit_cast),
];

// ---------------------------------------------------------------------------------------
// Helpers.

/// Optional input `i`.
pub(crate) fn opt<'a>(ins: &[Option<&'a HostTensor>], i: usize) -> Option<&'a HostTensor> {
    ins.get(i).copied().flatten()
}

/// The elements of `t` as `T` (its size was checked by [`prepare`]).
pub(crate) fn elems<T: Elem>(t: &HostTensor) -> Vec<T> {
    values::<T>(t).into_owned()
}

/// Writes `v` into `out`'s bytes.
pub(crate) fn put<T: Elem>(out: &mut HostTensor, v: &[T]) {
    for (c, x) in out.data.chunks_exact_mut(T::SIZE).zip(v) {
        x.write(c);
    }
}

/// Calls `f(k, offsets)` for every element `k` of the row-major tensor of shape `out`, with
/// the element offset in each operand broadcast to `out` (each of `shapes` must broadcast
/// to `out`, with a rank no larger).
pub(crate) fn walk<const N: usize>(out: &[i64], shapes: [&[i64]; N], mut f: impl FnMut(usize, [usize; N])) {
    let n = out.iter().fold(1usize, |a, &d| a.saturating_mul(d.max(0) as usize));
    if n == 0 {
        return;
    }
    if shapes.iter().all(|s| *s == out) {
        (0..n).for_each(|k| f(k, [k; N]));
        return;
    }
    let strides: [Vec<usize>; N] = shapes.map(|s| broadcast_strides(s, out));
    let dims: Vec<usize> = out.iter().map(|&d| d.max(0) as usize).collect();
    let mut idx = vec![0usize; dims.len()];
    let mut offs = [0usize; N];
    for k in 0..n {
        f(k, offs);
        for d in (0..dims.len()).rev() {
            idx[d] += 1;
            for (o, s) in offs.iter_mut().zip(&strides) {
                *o += s[d];
            }
            if idx[d] < dims[d] {
                break;
            }
            for (o, s) in offs.iter_mut().zip(&strides) {
                *o -= s[d] * dims[d];
            }
            idx[d] = 0;
        }
    }
}

/// Runs `$body` with `$T` the Rust type of the integer dtype `$d`; other dtypes return an
/// error from the enclosing function.
macro_rules! integer {
    ($d:expr, $T:ident => $body:expr) => {
        $crate::with_dtype!($d, $T => $body; [
            I8: i8, I16: i16, I32: i32, I64: i64, U8: u8, U16: u16, U32: u32, U64: u64,
        ], d => return Err(format!("{d} is not an integer dtype")))
    };
}

/// Bit operations on one integer element type.
pub(crate) trait Bits: Elem {
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    fn not(self) -> Self;
    /// ONNX BitShift: a shift amount below 0 or of the width or more leaves only the sign
    /// fill (0, or -1 shifting a negative value right).
    fn shift(self, by: Self, left: bool) -> Self;
}

macro_rules! bits {
    (|$v:ident| $negative:expr; $($t:ty),*) => {$(
        impl Bits for $t {
            #[inline(always)]
            fn and(self, o: Self) -> Self { self & o }
            #[inline(always)]
            fn or(self, o: Self) -> Self { self | o }
            #[inline(always)]
            fn xor(self, o: Self) -> Self { self ^ o }
            #[inline(always)]
            fn not(self) -> Self { !self }
            #[inline(always)]
            fn shift(self, by: Self, left: bool) -> Self {
                let n = by as i128;
                let $v = self;
                let fill: Self = if $negative && !left { !0 } else { 0 };
                if n < 0 || n >= <$t>::BITS as i128 {
                    fill
                } else if left {
                    self.wrapping_shl(n as u32)
                } else {
                    self >> n as u32
                }
            }
        }
    )*};
}
bits!(|v| v < 0; i8, i16, i32, i64);
bits!(|_v| false; u8, u16, u32, u64);

// ---------------------------------------------------------------------------------------
// Kernels.

fn binary_as<T: Bits>(a: &HostTensor, b: &HostTensor, out: &mut HostTensor, f: impl Fn(T, T) -> T) {
    let (av, bv) = (elems::<T>(a), elems::<T>(b));
    let shape = out.shape.clone();
    let y = &mut out.data;
    walk(&shape, [&a.shape, &b.shape], |k, [i, j]| f(av[i], bv[j]).write(&mut y[k * T::SIZE..]));
}

#[derive(Clone, Copy)]
enum BitOp {
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

fn apply<T: Bits>(op: BitOp, a: T, b: T) -> T {
    match op {
        BitOp::And => a.and(b),
        BitOp::Or => a.or(b),
        BitOp::Xor => a.xor(b),
        BitOp::Shl => a.shift(b, true),
        BitOp::Shr => a.shift(b, false),
    }
}

fn binary(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor], op: BitOp) -> Result<(), String> {
    let infer: InferFn = if matches!(op, BitOp::Shl | BitOp::Shr) { infer_bit_shift } else { infer_bitwise };
    prepare(ins, attrs, outs, infer)?;
    let (a, b) = (req(ins, 0)?, req(ins, 1)?);
    let out = first(outs)?;
    integer!(a.dtype, T => binary_as::<T>(a, b, out, |x, y| apply(op, x, y)));
    Ok(())
}

fn bit_shift(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    let op = if shift_left(attrs)? { BitOp::Shl } else { BitOp::Shr };
    binary(ins, attrs, outs, op)
}

fn bitwise_and(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    binary(ins, attrs, outs, BitOp::And)
}

fn bitwise_or(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    binary(ins, attrs, outs, BitOp::Or)
}

fn bitwise_xor(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    binary(ins, attrs, outs, BitOp::Xor)
}

fn not_as<T: Bits>(x: &HostTensor, out: &mut HostTensor) {
    let v: Vec<T> = elems::<T>(x).into_iter().map(Bits::not).collect();
    put(out, &v);
}

fn bitwise_not(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_bitwise_not)?;
    let x = req(ins, 0)?;
    let out = first(outs)?;
    integer!(x.dtype, T => not_as::<T>(x, out));
    Ok(())
}

fn classify_as<T: Arith>(x: &HostTensor, out: &mut HostTensor, f: impl Fn(f64) -> bool) {
    for (o, v) in out.data.iter_mut().zip(elems::<T>(x)) {
        *o = f(v.to_f64()) as u8;
    }
}

fn is_inf(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_classify)?;
    let (pos, neg) = inf_signs(attrs)?;
    let x = req(ins, 0)?;
    let out = first(outs)?;
    let f = |v: f64| v.is_infinite() && if v > 0.0 { pos } else { neg };
    floating!(x.dtype, T => classify_as::<T>(x, out, f));
    Ok(())
}

fn is_nan(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_classify)?;
    let x = req(ins, 0)?;
    let out = first(outs)?;
    floating!(x.dtype, T => classify_as::<T>(x, out, f64::is_nan));
    Ok(())
}

/// numpy's order: the first input, plus each next one (each sum rounded to the dtype),
/// divided by the count.
fn mean_as<T: Arith>(ins: &[&HostTensor], out: &mut HostTensor) {
    let shape = out.shape.clone();
    let mut acc = vec![T::default(); out.numel() as usize];
    for (j, t) in ins.iter().enumerate() {
        let v = elems::<T>(t);
        walk(&shape, [&t.shape], |k, [i]| acc[k] = if j == 0 { v[i] } else { acc[k].add(v[i]) });
    }
    let n = T::from_f64(ins.len() as f64);
    let y: Vec<T> = acc.into_iter().map(|v| v.div(n)).collect();
    put(out, &y);
}

fn mean(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_mean)?;
    let list: Vec<&HostTensor> = (0..ins.len()).map(|i| req(ins, i)).collect::<Result<_, _>>()?;
    let out = first(outs)?;
    let d = list.first().map(|t| t.dtype).ok_or("input 1 is required")?;
    floating!(d, T => mean_as::<T>(&list, out));
    Ok(())
}

fn bit_cast(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_bit_cast)?;
    let x = req(ins, 0)?;
    let out = first(outs)?;
    if out.dtype == DType::Bool {
        for (o, &b) in out.data.iter_mut().zip(&x.data) {
            *o = (b != 0) as u8;
        }
    } else {
        out.data.copy_from_slice(&x.data);
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ops::{OpDef, OPS};
    use half::f16;

    pub(crate) fn def(name: &str) -> &'static OpDef {
        OPS.iter().find(|o| o.name == name).unwrap_or_else(|| panic!("no operator {name}"))
    }

    pub(crate) fn tensor<T: Elem>(d: DType, shape: &[i64], v: &[T]) -> HostTensor {
        let mut data = vec![0u8; v.len() * T::SIZE];
        for (c, x) in data.chunks_exact_mut(T::SIZE).zip(v) {
            x.write(c);
        }
        HostTensor::new(d, shape.to_vec(), data).unwrap()
    }

    pub(crate) fn f(shape: &[i64], v: &[f32]) -> HostTensor {
        tensor(DType::F32, shape, v)
    }

    pub(crate) fn b(shape: &[i64], v: &[u8]) -> HostTensor {
        HostTensor::new(DType::Bool, shape.to_vec(), v.to_vec()).unwrap()
    }

    pub(crate) use crate::ops::host::testing::attrs;

    /// Runs an operator as the interpreter does: attribute check, inference with the input
    /// values known, zeroed outputs, host kernel; all the outputs.
    pub(crate) fn run_all(name: &str, ins: &[Option<&HostTensor>], a: &Attrs) -> Result<Vec<HostTensor>, String> {
        let d = def(name);
        d.check_attrs(a)?;
        let inferred = (d.infer)(&crate::ops::host::infos(ins)?, a)?;
        let mut outs: Vec<HostTensor> = inferred.iter().map(|(dt, s)| HostTensor::zeros(*dt, s).unwrap()).collect();
        (d.op.id().host_kernel().unwrap())(ins, a, &mut outs)?;
        Ok(outs)
    }

    pub(crate) fn run(name: &str, ins: &[&HostTensor], a: &Attrs) -> Result<HostTensor, String> {
        let ins: Vec<Option<&HostTensor>> = ins.iter().map(|&t| Some(t)).collect();
        run_all(name, &ins, a).map(|mut o| o.remove(0))
    }

    pub(crate) fn ok(name: &str, ins: &[&HostTensor], a: &Attrs) -> HostTensor {
        run(name, ins, a).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    pub(crate) fn none() -> Attrs {
        Attrs::default()
    }

    fn dir(d: &str) -> Attrs {
        attrs(&[("direction", AttrValue::Str(d.into()))])
    }

    #[test]
    fn shifts_follow_onnx_28() {
        let x = tensor(DType::U8, &[3], &[16u8, 4, 1]);
        let y = tensor(DType::U8, &[3], &[1u8, 2, 3]);
        assert_eq!(ok("BitShift", &[&x, &y], &dir("RIGHT")), tensor(DType::U8, &[3], &[8u8, 1, 0]));
        assert_eq!(ok("BitShift", &[&x, &y], &dir("LEFT")), tensor(DType::U8, &[3], &[32u8, 16, 8]));
        // Overflowing bits are dropped; shifts of the width or more give 0.
        let x = tensor(DType::U8, &[3], &[200u8, 255, 1]);
        let y = tensor(DType::U8, &[3], &[1u8, 8, 200]);
        assert_eq!(ok("BitShift", &[&x, &y], &dir("LEFT")), tensor(DType::U8, &[3], &[144u8, 0, 0]));
        // Signed: arithmetic right shifts; out-of-range shifts keep only the sign fill.
        let x = tensor(DType::I8, &[4], &[-16i8, -1, 64, -128]);
        let y = tensor(DType::I8, &[4], &[2i8, 8, -1, 1]);
        assert_eq!(ok("BitShift", &[&x, &y], &dir("RIGHT")), tensor(DType::I8, &[4], &[-4i8, -1, 0, -64]));
        assert_eq!(ok("BitShift", &[&x, &y], &dir("LEFT")), tensor(DType::I8, &[4], &[-64i8, 0, 0, 0]));
        let x = tensor(DType::I32, &[2], &[0x4000_0001i32, 3]);
        let y = tensor(DType::I32, &[], &[1i32]);
        assert_eq!(ok("BitShift", &[&x, &y], &dir("LEFT")), tensor(DType::I32, &[2], &[i32::MIN + 2, 6]));
        let x = tensor(DType::U64, &[2, 1], &[u64::MAX, 1]);
        let y = tensor(DType::U64, &[3], &[63u64, 64, 0]);
        assert_eq!(
            ok("BitShift", &[&x, &y], &dir("RIGHT")),
            tensor(DType::U64, &[2, 3], &[1u64, 0, u64::MAX, 0, 0, 1])
        );
        assert_eq!(
            def("BitShift").check_attrs(&dir("UP")).unwrap_err(),
            "attribute `direction` of @onnx.BitShift must be \"LEFT\" or \"RIGHT\", found \"UP\""
        );
        assert!(run("BitShift", &[&x, &y], &none()).unwrap_err().contains("needs the `direction` attribute"));
        assert_eq!(
            run("BitShift", &[&f(&[1], &[1.0]), &f(&[1], &[1.0])], &dir("LEFT")).unwrap_err(),
            "input 1 (A) must be i8, i16, i32, i64, u8, u16, u32 or u64, found f32"
        );
    }

    #[test]
    fn bitwise_ops_broadcast() {
        let a = tensor(DType::I16, &[2, 2], &[0b1100i16, -1, 5, i16::MIN]);
        let c = tensor(DType::I16, &[2], &[0b1010i16, 3]);
        assert_eq!(ok("BitwiseAnd", &[&a, &c], &none()), tensor(DType::I16, &[2, 2], &[0b1000i16, 3, 0, 0]));
        assert_eq!(
            ok("BitwiseOr", &[&a, &c], &none()),
            tensor(DType::I16, &[2, 2], &[0b1110i16, -1, 15, i16::MIN + 3])
        );
        assert_eq!(
            ok("BitwiseXor", &[&a, &c], &none()),
            tensor(DType::I16, &[2, 2], &[0b0110i16, -4, 15, i16::MIN + 3])
        );
        assert_eq!(ok("BitwiseNot", &[&a], &none()), tensor(DType::I16, &[2, 2], &[!0b1100i16, 0, -6, i16::MAX]));
        let u = tensor(DType::U8, &[2], &[0u8, 0xf0]);
        assert_eq!(ok("BitwiseNot", &[&u], &none()), tensor(DType::U8, &[2], &[255u8, 0x0f]));
        assert_eq!(
            run("BitwiseAnd", &[&a, &u], &none()).unwrap_err(),
            "inputs 1 and 2 must have the same dtype, found i16 and u8"
        );
        assert_eq!(
            run("BitwiseNot", &[&b(&[1], &[1])], &none()).unwrap_err(),
            "input 1 (X) must be i8, i16, i32, i64, u8, u16, u32 or u64, found bool"
        );
    }

    #[test]
    fn classifiers() {
        let x = f(&[5], &[1.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -0.0]);
        assert_eq!(ok("IsInf", &[&x], &none()), b(&[5], &[0, 1, 1, 0, 0]));
        let pos = attrs(&[("detect_negative", AttrValue::Int(0))]);
        assert_eq!(ok("IsInf", &[&x], &pos), b(&[5], &[0, 1, 0, 0, 0]));
        let neg = attrs(&[("detect_positive", AttrValue::Int(0))]);
        assert_eq!(ok("IsInf", &[&x], &neg), b(&[5], &[0, 0, 1, 0, 0]));
        assert_eq!(ok("IsNaN", &[&x], &none()), b(&[5], &[0, 0, 0, 1, 0]));
        let h = tensor(DType::F16, &[3], &[f16::INFINITY, f16::NAN, f16::MAX]);
        assert_eq!(ok("IsInf", &[&h], &none()), b(&[3], &[1, 0, 0]));
        assert_eq!(ok("IsNaN", &[&h], &none()), b(&[3], &[0, 1, 0]));
        let d = tensor(DType::F64, &[2], &[f64::NEG_INFINITY, f64::MAX]);
        assert_eq!(ok("IsInf", &[&d], &neg), b(&[2], &[1, 0]));
        assert_eq!(
            def("IsInf").check_attrs(&attrs(&[("detect_positive", AttrValue::Int(2))])).unwrap_err(),
            "attribute `detect_positive` of @onnx.IsInf must be 0 or 1, found 2"
        );
        assert_eq!(
            run("IsNaN", &[&tensor(DType::I32, &[1], &[1i32])], &none()).unwrap_err(),
            "input 1 (X) must be f32, f16 or f64, found i32"
        );
    }

    #[test]
    fn mean_broadcasts() {
        let a = f(&[2, 1], &[1.0, 2.0]);
        let c = f(&[3], &[3.0, 4.0, 5.0]);
        let d = f(&[], &[2.0]);
        assert_eq!(
            ok("Mean", &[&a, &c, &d], &none()),
            f(&[2, 3], &[2.0, 7.0 / 3.0, 8.0 / 3.0, 7.0 / 3.0, 8.0 / 3.0, 3.0])
        );
        assert_eq!(ok("Mean", &[&c], &none()), c);
        let h =
            |v: &[f32]| tensor(DType::F16, &[v.len() as i64], &v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>());
        assert_eq!(ok("Mean", &[&h(&[1.0, 3.0]), &h(&[2.0, 4.0])], &none()), h(&[1.5, 3.5]));
        assert_eq!(
            run("Mean", &[&a, &h(&[1.0])], &none()).unwrap_err(),
            "input 2 is f16, but input 1 is f32: all inputs must have one dtype"
        );
        assert_eq!(
            run("Mean", &[&tensor(DType::I32, &[1], &[1i32])], &none()).unwrap_err(),
            "input 1 (data_0) must be f32, f16 or f64, found i32"
        );
    }

    #[test]
    fn bit_cast_reinterprets() {
        let to = |c: i64| attrs(&[("to", AttrValue::Int(c))]);
        let x = f(&[2], &[1.0, -2.0]);
        assert_eq!(ok("BitCast", &[&x], &to(6)), tensor(DType::I32, &[2], &[0x3f80_0000i32, -0x4000_0000]));
        assert_eq!(
            ok("BitCast", &[&tensor(DType::I8, &[2], &[-1i8, 2])], &to(2)),
            tensor(DType::U8, &[2], &[255u8, 2])
        );
        assert_eq!(ok("BitCast", &[&b(&[2], &[1, 0])], &to(2)), tensor(DType::U8, &[2], &[1u8, 0]));
        assert_eq!(ok("BitCast", &[&tensor(DType::U8, &[2], &[7u8, 0])], &to(9)), b(&[2], &[1, 0]));
        assert_eq!(
            run("BitCast", &[&x], &to(7)).unwrap_err(),
            "BitCast needs types of one bit width, but the input is f32 (32 bits) and `to` is i64 (64 bits)"
        );
        assert!(def("BitCast").check_attrs(&to(8)).unwrap_err().contains("`to` = 8 is not a supported"));
        assert!(def("BitCast").check_attrs(&none()).unwrap_err().contains("needs the `to` attribute"));
    }
}
