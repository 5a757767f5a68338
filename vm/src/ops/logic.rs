//! Operators: the comparison and logic family (Equal, Less, Greater, LessOrEqual,
//! GreaterOrEqual, Not, And, Or, Xor, Where) and the shape helpers (Expand, Range, Mod,
//! Size): the host kernels and their `HOST` table (the schemas are in
//! `crate::ir::operators::logic`).
//!
//! The kernels are dtype-generic where ONNX is: comparisons and Mod dispatch on the element
//! type; Where and Expand move element bytes of any dtype. Bool tensors hold one byte per
//! element; any nonzero byte reads as true, and every bool written is 0 or 1. Every kernel
//! re-runs the shape inference on its actual inputs and checks the data sizes first
//! ([`prepare`]), so it only indexes tensors whose sizes are known to be right.

use super::host::{first, prepare, req, HostFn};
use super::num::numeric;
use super::{Attrs, TensorInfo};
use crate::ir::host_tensor::{store_f64, store_i64, HostTensor};
use crate::ir::operators::elementwise::Elem;
use crate::ir::operators::logic::*;
use crate::ir::operators::shape::broadcast_strides;
use crate::ir::operators::Operator;
use crate::ir::types::DType;
use half::{bf16, f16};

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[
    (Operator::Equal, equal),
    (Operator::Less, less),
    (Operator::Greater, greater),
    (Operator::LessOrEqual, less_or_equal),
    (Operator::GreaterOrEqual, greater_or_equal),
    (Operator::Not, not),
    (Operator::And, and),
    (Operator::Or, or),
    (Operator::Xor, xor),
    (Operator::Where, where_),
    (Operator::Expand, expand),
    (Operator::Range, range),
    (Operator::Mod, modulo),
    (Operator::Size, size),
];

// ---------------------------------------------------------------------------------------
// Helpers.

/// Calls `f(k, offsets)` for every element `k` of the row-major tensor of shape `out`, with
/// the element offset in each operand broadcast to `out` (each of `shapes` must broadcast
/// to `out`, with a rank no larger).
fn walk<const N: usize>(out: &[i64], shapes: [&[i64]; N], mut f: impl FnMut(usize, [usize; N])) {
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

/// A number of a numeric dtype, compared as ONNX compares.
trait Num: Elem + PartialOrd {}
impl<T: Elem + PartialOrd> Num for T {}

fn elems<T: Num>(t: &HostTensor) -> Vec<T> {
    t.data.chunks_exact(T::SIZE).map(T::read).collect()
}

// ---------------------------------------------------------------------------------------
// Comparisons.

#[derive(Clone, Copy)]
enum Cmp {
    Eq,
    Lt,
    Gt,
    Le,
    Ge,
}

/// `a cmp b` (false whenever either is NaN, as IEEE comparisons are).
#[inline(always)]
fn test<T: PartialOrd>(c: Cmp, a: T, b: T) -> bool {
    match c {
        Cmp::Eq => a == b,
        Cmp::Lt => a < b,
        Cmp::Gt => a > b,
        Cmp::Le => a <= b,
        Cmp::Ge => a >= b,
    }
}

fn compare_as<T: Num>(a: &HostTensor, b: &HostTensor, bsh: &[i64], out: &mut HostTensor, c: Cmp) {
    let (av, bv) = (elems::<T>(a), elems::<T>(b));
    let shape = out.shape.clone();
    let y = &mut out.data;
    walk(&shape, [&a.shape, bsh], |k, [i, j]| y[k] = test(c, av[i], bv[j]) as u8);
}

fn compare(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor], c: Cmp) -> Result<(), String> {
    let infer = if matches!(c, Cmp::Eq) { infer_equal } else { infer_order };
    prepare(ins, attrs, outs, infer)?;
    let (a, b) = (req(ins, 0)?, req(ins, 1)?);
    let bsh = binary_shapes(&infos2(a, b), attrs, EQUAL)?.1;
    let out = first(outs)?;
    if a.dtype == DType::Bool {
        // Any nonzero byte is true.
        let norm = |t: &HostTensor| t.data.iter().map(|&v| (v != 0) as u8).collect::<Vec<u8>>();
        let (av, bv) = (norm(a), norm(b));
        let shape = out.shape.clone();
        let y = &mut out.data;
        walk(&shape, [&a.shape, &bsh], |k, [i, j]| y[k] = test(c, av[i], bv[j]) as u8);
        return Ok(());
    }
    numeric!(a.dtype, T => compare_as::<T>(a, b, &bsh, out, c));
    Ok(())
}

/// The inference view of two host inputs.
fn infos2<'a>(a: &'a HostTensor, b: &'a HostTensor) -> [Option<TensorInfo<'a>>; 2] {
    [a, b].map(|t| Some(TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) }))
}

fn equal(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    compare(ins, attrs, outs, Cmp::Eq)
}

fn less(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    compare(ins, attrs, outs, Cmp::Lt)
}

fn greater(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    compare(ins, attrs, outs, Cmp::Gt)
}

fn less_or_equal(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    compare(ins, attrs, outs, Cmp::Le)
}

fn greater_or_equal(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    compare(ins, attrs, outs, Cmp::Ge)
}

// ---------------------------------------------------------------------------------------
// Not, And, Or, Xor.

fn not(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_not)?;
    let x = req(ins, 0)?;
    first(outs)?.data.iter_mut().zip(&x.data).for_each(|(o, &v)| *o = (v == 0) as u8);
    Ok(())
}

fn logic(
    ins: &[Option<&HostTensor>],
    attrs: &Attrs,
    outs: &mut [HostTensor],
    f: impl Fn(bool, bool) -> bool,
) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_logic)?;
    let (a, b) = (req(ins, 0)?, req(ins, 1)?);
    let bsh = binary_shapes(&infos2(a, b), attrs, &[DType::Bool])?.1;
    let out = first(outs)?;
    let shape = out.shape.clone();
    let y = &mut out.data;
    walk(&shape, [&a.shape, &bsh], |k, [i, j]| y[k] = f(a.data[i] != 0, b.data[j] != 0) as u8);
    Ok(())
}

fn and(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    logic(ins, attrs, outs, |x, y| x && y)
}

fn or(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    logic(ins, attrs, outs, |x, y| x || y)
}

fn xor(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    logic(ins, attrs, outs, |x, y| x != y)
}

// ---------------------------------------------------------------------------------------
// Where and Expand: element bytes of any dtype.

fn where_(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_where)?;
    let (c, x, y) = (req(ins, 0)?, req(ins, 1)?, req(ins, 2)?);
    let es = x.dtype.size();
    let out = first(outs)?;
    let shape = out.shape.clone();
    let o = &mut out.data;
    walk(&shape, [&c.shape, &x.shape, &y.shape], |k, [ic, ix, iy]| {
        let src = if c.data[ic] != 0 { &x.data[ix * es..][..es] } else { &y.data[iy * es..][..es] };
        o[k * es..][..es].copy_from_slice(src);
    });
    Ok(())
}

fn expand(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_expand)?;
    let x = req(ins, 0)?;
    let es = x.dtype.size();
    let out = first(outs)?;
    let shape = out.shape.clone();
    let o = &mut out.data;
    walk(&shape, [&x.shape], |k, [i]| o[k * es..][..es].copy_from_slice(&x.data[i * es..][..es]));
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Range and Size.

fn range(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_range)?;
    let infos: Vec<Option<TensorInfo>> =
        ins.iter().map(|t| t.map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) })).collect();
    let (d, args, _) = plan_range(&infos)?;
    let out = first(outs)?;
    let es = d.size();
    for (i, o) in out.data.chunks_exact_mut(es).enumerate() {
        match args {
            // Every value lies between start and limit, so it fits the dtype.
            RangeArgs::Int { start, delta } => store_i64(d, start.wrapping_add((i as i64).wrapping_mul(delta)), o),
            RangeArgs::Float { start, delta } => store_f64(d, start + i as f64 * delta, o),
        }
    }
    Ok(())
}

fn size(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_size)?;
    let n = req(ins, 0)?.numel() as i64;
    first(outs)?.data.copy_from_slice(&n.to_le_bytes());
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Mod.

/// The remainders of a dtype: Python's (the divisor's sign) and C's (the dividend's).
trait Rem: Num {
    fn python(self, b: Self) -> Self;
    fn c(self, b: Self) -> Self;
}

macro_rules! rem_signed {
    ($($t:ty),*) => {$(
        impl Rem for $t {
            fn c(self, b: Self) -> Self {
                // By zero is refused before; MIN % -1 is 0.
                if b == 0 { 0 } else { self.wrapping_rem(b) }
            }
            fn python(self, b: Self) -> Self {
                let r = self.c(b);
                if r != 0 && ((r < 0) != (b < 0)) { r.wrapping_add(b) } else { r }
            }
        }
    )*};
}
rem_signed!(i8, i16, i32, i64);

macro_rules! rem_unsigned {
    ($($t:ty),*) => {$(
        impl Rem for $t {
            fn c(self, b: Self) -> Self {
                if b == 0 { 0 } else { self % b }
            }
            fn python(self, b: Self) -> Self {
                self.c(b)
            }
        }
    )*};
}
rem_unsigned!(u8, u16, u32, u64);

/// numpy's floating remainder (`npy_divmod`), from `m` = C's `fmod(a, b)`: moved by the
/// divisor when the signs differ, and a zero remainder signed as the divisor (`-0.0` for a
/// negative one).
macro_rules! python_float {
    ($t:ty, $name:ident) => {
        fn $name(m: $t, b: $t) -> $t {
            if b == 0.0 {
                m
            } else if m == 0.0 {
                (0.0 as $t).copysign(b)
            } else if (b < 0.0) != (m < 0.0) {
                m + b
            } else {
                m
            }
        }
    };
}
python_float!(f32, python_f32);
python_float!(f64, python_f64);

impl Rem for f32 {
    fn c(self, b: Self) -> Self {
        self % b
    }
    fn python(self, b: Self) -> Self {
        python_f32(self % b, b)
    }
}

impl Rem for f64 {
    fn c(self, b: Self) -> Self {
        self % b
    }
    fn python(self, b: Self) -> Self {
        python_f64(self % b, b)
    }
}

macro_rules! rem_half {
    ($($t:ident),*) => {$(
        impl Rem for $t {
            fn c(self, b: Self) -> Self {
                // The remainder is exact, so computing it in f32 and rounding back loses nothing.
                $t::from_f32(self.to_f32() % b.to_f32())
            }
            fn python(self, b: Self) -> Self {
                // numpy (ml_dtypes for bf16) computes half remainders in f32 and rounds once.
                let (x, y) = (self.to_f32(), b.to_f32());
                $t::from_f32(python_f32(x % y, y))
            }
        }
    )*};
}
rem_half!(f16, bf16);

fn mod_as<T: Rem>(a: &HostTensor, b: &HostTensor, out: &mut HostTensor, fmod: bool) {
    let (av, bv) = (elems::<T>(a), elems::<T>(b));
    let shape = out.shape.clone();
    let y = &mut out.data;
    walk(&shape, [&a.shape, &b.shape], |k, [i, j]| {
        let r = if fmod { av[i].c(bv[j]) } else { av[i].python(bv[j]) };
        r.write(&mut y[k * T::SIZE..]);
    });
}

fn modulo(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_mod)?;
    let (a, b) = (req(ins, 0)?, req(ins, 1)?);
    let fmod = attrs.int("fmod", 0) == 1;
    let out = first(outs)?;
    // Every element of B is used when the output is not empty.
    if !a.dtype.is_float() && out.numel() > 0 && b.data.chunks_exact(b.dtype.size()).any(|e| e.iter().all(|&v| v == 0))
    {
        return Err("integer division by zero in Mod (input 2 has a zero element)".into());
    }
    numeric!(a.dtype, T => mod_as::<T>(a, b, out, fmod));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ops::{OpDef, OPS};

    fn def(name: &str) -> &'static OpDef {
        OPS.iter().find(|o| o.name == name).unwrap_or_else(|| panic!("no operator {name}"))
    }

    fn tensor<T: Num>(d: DType, shape: &[i64], v: &[T]) -> HostTensor {
        let mut data = vec![0u8; v.len() * T::SIZE];
        for (c, x) in data.chunks_exact_mut(T::SIZE).zip(v) {
            x.write(c);
        }
        HostTensor::new(d, shape.to_vec(), data).unwrap()
    }

    fn f(shape: &[i64], v: &[f32]) -> HostTensor {
        tensor(DType::F32, shape, v)
    }

    fn i64s(shape: &[i64], v: &[i64]) -> HostTensor {
        tensor(DType::I64, shape, v)
    }

    fn b(shape: &[i64], v: &[u8]) -> HostTensor {
        HostTensor::new(DType::Bool, shape.to_vec(), v.to_vec()).unwrap()
    }

    fn attrs(list: &[(&str, AttrValue)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    /// Runs an operator as the interpreter does: attribute check, inference with the input
    /// values known, zeroed outputs, host kernel.
    fn run(name: &str, ins: &[&HostTensor], a: &Attrs) -> Result<HostTensor, String> {
        let d = def(name);
        d.check_attrs(a)?;
        let infos: Vec<Option<TensorInfo>> =
            ins.iter().map(|t| Some(TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) })).collect();
        let inferred = (d.infer)(&infos, a)?;
        let mut outs: Vec<HostTensor> = inferred.iter().map(|(dt, s)| HostTensor::zeros(*dt, s).unwrap()).collect();
        let ins: Vec<Option<&HostTensor>> = ins.iter().map(|&t| Some(t)).collect();
        (d.op.id().host_kernel().unwrap())(&ins, a, &mut outs)?;
        Ok(outs.remove(0))
    }

    fn ok(name: &str, ins: &[&HostTensor], a: &Attrs) -> HostTensor {
        run(name, ins, a).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn none() -> Attrs {
        Attrs::default()
    }

    #[test]
    fn comparisons_broadcast_and_nan_is_false() {
        let a = f(&[2, 3], &[1.0, 2.0, 3.0, f32::NAN, 5.0, -0.0]);
        let c = f(&[3], &[2.0, 2.0, f32::NAN]);
        // Row 1 against [2, 2, NaN]: 1<2, 2=2, 3?NaN; row 2: NaN?2, 5>2, -0?NaN.
        assert_eq!(ok("Equal", &[&a, &c], &none()), b(&[2, 3], &[0, 1, 0, 0, 0, 0]));
        assert_eq!(ok("Less", &[&a, &c], &none()), b(&[2, 3], &[1, 0, 0, 0, 0, 0]));
        assert_eq!(ok("Greater", &[&a, &c], &none()), b(&[2, 3], &[0, 0, 0, 0, 1, 0]));
        assert_eq!(ok("LessOrEqual", &[&a, &c], &none()), b(&[2, 3], &[1, 1, 0, 0, 0, 0]));
        assert_eq!(ok("GreaterOrEqual", &[&a, &c], &none()), b(&[2, 3], &[0, 1, 0, 0, 1, 0]));
        // NaN is not equal to itself; -0 equals +0.
        let n = f(&[2], &[f32::NAN, -0.0]);
        assert_eq!(ok("Equal", &[&n, &f(&[2], &[f32::NAN, 0.0])], &none()), b(&[2], &[0, 1]));
        // [2, 1] against [1, 3]: an outer comparison.
        let col = i64s(&[2, 1], &[1, 3]);
        let row = i64s(&[1, 3], &[0, 1, 2]);
        assert_eq!(ok("Greater", &[&col, &row], &none()), b(&[2, 3], &[1, 0, 0, 1, 1, 1]));
    }

    #[test]
    fn comparisons_take_every_integer_width_and_bool() {
        // Unsigned values above the signed range compare as unsigned.
        let u = tensor(DType::U64, &[3], &[u64::MAX, 1, 0]);
        let v = tensor(DType::U64, &[3], &[1, 1, u64::MAX]);
        assert_eq!(ok("Greater", &[&u, &v], &none()), b(&[3], &[1, 0, 0]));
        let u = tensor(DType::U8, &[2], &[200u8, 7]);
        assert_eq!(ok("Less", &[&u, &tensor(DType::U8, &[], &[100u8])], &none()), b(&[2], &[0, 1]));
        let i = tensor(DType::I8, &[3], &[-128i8, 0, 127]);
        assert_eq!(ok("LessOrEqual", &[&i, &tensor(DType::I8, &[1], &[0i8])], &none()), b(&[3], &[1, 1, 0]));
        let h = tensor(DType::F16, &[2], &[f16::from_f32(0.5), f16::NAN]);
        assert_eq!(
            ok("GreaterOrEqual", &[&h, &tensor(DType::F16, &[], &[f16::from_f32(0.5)])], &none()),
            b(&[2], &[1, 0])
        );
        let d = tensor(DType::F64, &[2], &[0.1f64, 0.3]);
        assert_eq!(ok("Equal", &[&d, &tensor(DType::F64, &[2], &[0.1f64, 0.1 + 0.2])], &none()), b(&[2], &[1, 0]));
        // Equal on bool: any nonzero byte is true.
        let p = b(&[4], &[0, 1, 2, 0]);
        assert_eq!(ok("Equal", &[&p, &b(&[4], &[0, 1, 1, 1])], &none()), b(&[4], &[1, 1, 1, 0]));
        assert_eq!(
            run("Less", &[&p, &p], &none()).unwrap_err(),
            "input 1 (A) must be f32, f16, f64, i8, i16, i32, i64, u8, u16, u32 or u64, found bool"
        );
        assert_eq!(
            run("Equal", &[&u, &i], &none()).unwrap_err(),
            "inputs 1 and 2 must have the same dtype, found u8 and i8"
        );
        assert!(run("Equal", &[&f(&[2], &[0.0; 2]), &f(&[3], &[0.0; 3])], &none())
            .unwrap_err()
            .contains("do not broadcast"));
    }

    #[test]
    fn legacy_broadcast_aligns_b_at_axis() {
        // A [2, 3, 2], B [3] at axis 1: B[j] compares with A[i, j, k].
        let a = i64s(&[2, 3, 2], &[0, 1, 1, 1, 2, 2, 0, 0, 1, 1, 5, 2]);
        let bb = i64s(&[3], &[0, 1, 2]);
        let legacy = attrs(&[("broadcast", AttrValue::Int(1)), ("axis", AttrValue::Int(1))]);
        assert_eq!(ok("Equal", &[&a, &bb], &legacy), b(&[2, 3, 2], &[1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1]));
        let e = def("Less").check_attrs(&attrs(&[("broadcast", AttrValue::Int(2))])).unwrap_err();
        assert_eq!(e, "attribute `broadcast` of @onnx.Less must be 0 or 1, found 2");
    }

    #[test]
    fn logic_truth_tables() {
        let col = b(&[2, 1], &[0, 1]);
        let row = b(&[1, 2], &[0, 1]);
        assert_eq!(ok("And", &[&col, &row], &none()), b(&[2, 2], &[0, 0, 0, 1]));
        assert_eq!(ok("Or", &[&col, &row], &none()), b(&[2, 2], &[0, 1, 1, 1]));
        assert_eq!(ok("Xor", &[&col, &row], &none()), b(&[2, 2], &[0, 1, 1, 0]));
        // Nonzero bytes other than 1 are true, and outputs are 0 or 1.
        assert_eq!(ok("Not", &[&b(&[3], &[0, 1, 7])], &none()), b(&[3], &[1, 0, 0]));
        assert_eq!(ok("And", &[&b(&[2], &[7, 2]), &b(&[], &[9])], &none()), b(&[2], &[1, 1]));
        assert_eq!(ok("Xor", &[&b(&[2], &[7, 0]), &b(&[], &[9])], &none()), b(&[2], &[0, 1]));
        assert_eq!(run("Not", &[&f(&[1], &[1.0])], &none()).unwrap_err(), "input 1 (X) must be bool, found f32");
        assert_eq!(
            run("Or", &[&i64s(&[1], &[1]), &i64s(&[1], &[1])], &none()).unwrap_err(),
            "input 1 (A) must be bool, found i64"
        );
    }

    #[test]
    fn where_broadcasts_three_inputs_of_any_dtype() {
        let c = b(&[2, 1], &[1, 0]);
        let x = f(&[1, 3], &[1.0, 2.0, 3.0]);
        let y = f(&[], &[-1.0]);
        assert_eq!(ok("Where", &[&c, &x, &y], &none()), f(&[2, 3], &[1.0, 2.0, 3.0, -1.0, -1.0, -1.0]));
        let c = b(&[3], &[0, 1, 0]);
        let x = i64s(&[2, 1], &[10, 20]);
        let y = i64s(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        assert_eq!(ok("Where", &[&c, &x, &y], &none()), i64s(&[2, 3], &[1, 10, 3, 4, 20, 6]));
        let h =
            |v: &[f32]| tensor(DType::F16, &[v.len() as i64], &v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>());
        assert_eq!(ok("Where", &[&b(&[2], &[1, 0]), &h(&[1.5, 2.5]), &h(&[-1.0, -2.0])], &none()), h(&[1.5, -2.0]));
        assert_eq!(ok("Where", &[&b(&[2], &[1, 0]), &b(&[2], &[1, 1]), &b(&[], &[0])], &none()), b(&[2], &[1, 0]));
        assert_eq!(
            run("Where", &[&b(&[1], &[1]), &f(&[1], &[1.0]), &i64s(&[1], &[1])], &none()).unwrap_err(),
            "inputs 2 (X) and 3 (Y) must have the same dtype, found f32 and i64"
        );
        assert_eq!(
            run("Where", &[&f(&[1], &[1.0]), &f(&[1], &[1.0]), &f(&[1], &[1.0])], &none()).unwrap_err(),
            "input 1 (condition) must be bool, found f32"
        );
    }

    #[test]
    fn expand_broadcasts_to_the_shape_input() {
        let x = f(&[3, 1], &[1.0, 2.0, 3.0]);
        let y = ok("Expand", &[&x, &i64s(&[3], &[2, 1, 2])], &none());
        assert_eq!(y, f(&[2, 3, 2], &[1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0]));
        // A 1 in `shape` keeps the input's dim; a shorter shape is broadcast too.
        let y = ok("Expand", &[&x, &i64s(&[2], &[1, 1])], &none());
        assert_eq!(y, x);
        let y = ok("Expand", &[&i64s(&[], &[7]), &i64s(&[1], &[3])], &none());
        assert_eq!(y, i64s(&[3], &[7, 7, 7]));
        let y = ok("Expand", &[&x, &i64s(&[3], &[0, 3, 1])], &none());
        assert_eq!(y, f(&[0, 3, 1], &[]));
        assert!(run("Expand", &[&x, &i64s(&[2], &[4, 1])], &none()).unwrap_err().contains("do not broadcast"));
        assert_eq!(
            run("Expand", &[&x, &i64s(&[1], &[-1])], &none()).unwrap_err(),
            "Expand: shape [-1] has the negative size -1"
        );
        let e = (def("Expand").infer)(
            &[
                Some(TensorInfo { dtype: DType::F32, shape: &[3, 1], value: None }),
                Some(TensorInfo { dtype: DType::I64, shape: &[2], value: None }),
            ],
            &none(),
        )
        .unwrap_err();
        assert_eq!(e, "Expand needs the value of its shape input to infer the output shape");
    }

    #[test]
    fn range_counts_like_onnx() {
        let r = |d: DType, s: i64, l: i64, dl: i64| {
            let t = |v: i64| {
                let mut h = HostTensor::zeros(d, &[]).unwrap();
                store_i64(d, v, &mut h.data);
                h
            };
            run("Range", &[&t(s), &t(l), &t(dl)], &none())
        };
        assert_eq!(r(DType::I64, 0, 10, 3).unwrap(), i64s(&[4], &[0, 3, 6, 9]));
        assert_eq!(r(DType::I64, 10, 4, -2).unwrap(), i64s(&[3], &[10, 8, 6]));
        assert_eq!(r(DType::I64, 10, 3, -2).unwrap(), i64s(&[4], &[10, 8, 6, 4]));
        assert_eq!(r(DType::I64, 5, 1, 1).unwrap(), i64s(&[0], &[]));
        assert_eq!(r(DType::I64, 1, 5, -1).unwrap(), i64s(&[0], &[]));
        assert_eq!(r(DType::I32, -3, 3, 4).unwrap(), tensor(DType::I32, &[2], &[-3i32, 1]));
        assert_eq!(r(DType::I16, 3, 0, -1).unwrap(), tensor(DType::I16, &[3], &[3i16, 2, 1]));
        // The extremes of i64 do not overflow the length.
        assert_eq!(r(DType::I64, i64::MIN, i64::MAX, i64::MAX).unwrap(), i64s(&[3], &[i64::MIN, -1, i64::MAX - 1]));
        assert_eq!(r(DType::I64, 1, 2, 0).unwrap_err(), "Range: delta is 0");
        let fl = |s: f32, l: f32, dl: f32| run("Range", &[&f(&[], &[s]), &f(&[], &[l]), &f(&[], &[dl])], &none());
        // ceil((2 - 1) / 0.3) = ceil(3.33) = 4.
        let y = fl(1.0, 2.0, 0.3).unwrap();
        assert_eq!(y.shape, vec![4]);
        let want = [1.0f32, 1.3, 1.6, 1.9];
        for (g, w) in elems::<f32>(&y).iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{g} vs {w}");
        }
        assert_eq!(fl(10.0, 6.0, -3.0).unwrap(), f(&[2], &[10.0, 7.0]));
        assert_eq!(fl(0.0, -1.0, 1.0).unwrap(), f(&[0], &[]));
        assert_eq!(fl(0.0, 1.0, 0.0).unwrap_err(), "Range: delta is 0");
        assert!(fl(0.0, f32::NAN, 1.0).unwrap_err().contains("not a number"));
        let d = |v: f64| tensor(DType::F64, &[], &[v]);
        assert_eq!(ok("Range", &[&d(0.5), &d(2.0), &d(0.5)], &none()), tensor(DType::F64, &[3], &[0.5f64, 1.0, 1.5]));
        assert_eq!(
            run("Range", &[&i64s(&[], &[0]), &i64s(&[], &[1]), &tensor(DType::I32, &[], &[1i32])], &none())
                .unwrap_err(),
            "input 3 (delta) is i32, but input 1 (start) is i64"
        );
        assert_eq!(
            run("Range", &[&i64s(&[2], &[0, 1]), &i64s(&[], &[1]), &i64s(&[], &[1])], &none()).unwrap_err(),
            "input 1 (start) must be a scalar (one element), found shape [2]"
        );
        let e = (def("Range").infer)(&[Some(TensorInfo { dtype: DType::I64, shape: &[], value: None }); 3], &none())
            .unwrap_err();
        assert_eq!(e, "Range needs the value of its start input to infer the output length");
    }

    #[test]
    fn mod_follows_python_or_c() {
        let a = i64s(&[6], &[-7, 7, -7, 7, 6, -6]);
        let m = i64s(&[6], &[3, 3, -3, -3, -3, 4]);
        // Python: the divisor's sign.
        assert_eq!(ok("Mod", &[&a, &m], &none()), i64s(&[6], &[2, 1, -1, -2, 0, 2]));
        // C fmod: the dividend's sign.
        let c = attrs(&[("fmod", AttrValue::Int(1))]);
        assert_eq!(ok("Mod", &[&a, &m], &c), i64s(&[6], &[-1, 1, -1, 1, 0, -2]));
        let i = tensor(DType::I32, &[2], &[i32::MIN, i32::MIN]);
        assert_eq!(
            ok("Mod", &[&i, &tensor(DType::I32, &[2], &[-1i32, 3])], &none()),
            tensor(DType::I32, &[2], &[0i32, 1])
        );
        let u = tensor(DType::U8, &[2], &[250u8, 3]);
        assert_eq!(ok("Mod", &[&u, &tensor(DType::U8, &[], &[7u8])], &none()), tensor(DType::U8, &[2], &[5u8, 3]));
        let i8s = tensor(DType::I8, &[2, 1], &[-5i8, 5]);
        let d8 = tensor(DType::I8, &[2], &[2i8, -2]);
        assert_eq!(ok("Mod", &[&i8s, &d8], &none()), tensor(DType::I8, &[2, 2], &[1i8, -1, 1, -1]));
        let x = f(&[4], &[-7.5, 7.5, 5.0, f32::INFINITY]);
        let y = f(&[4], &[2.0, -2.0, 0.0, 1.0]);
        let got = ok("Mod", &[&x, &y], &c);
        let g = elems::<f32>(&got);
        assert_eq!(&g[..2], &[-1.5, 1.5]);
        assert!(g[2].is_nan() && g[3].is_nan());
        let h = tensor(DType::F16, &[1], &[f16::from_f32(-7.5)]);
        assert_eq!(
            ok("Mod", &[&h, &tensor(DType::F16, &[1], &[f16::from_f32(2.0)])], &c),
            tensor(DType::F16, &[1], &[f16::from_f32(-1.5)])
        );
        assert_eq!(
            run("Mod", &[&a, &i64s(&[1], &[0])], &none()).unwrap_err(),
            "integer division by zero in Mod (input 2 has a zero element)"
        );
        // fmod = 0 on floats (opset 28): numpy.mod, the divisor's sign, zeros signed as it.
        let x = f(&[6], &[-4.5, 7.5, 4.5, -7.5, 6.0, 1e-30]);
        let y = f(&[6], &[2.0, -2.0, 2.0, -2.0, 3.0, -1.0]);
        assert_eq!(ok("Mod", &[&x, &y], &none()), f(&[6], &[1.5, -0.5, 0.5, -1.5, 0.0, -1.0]));
        let inf = f32::INFINITY;
        let x = f(&[14], &[0.0, -0.0, 0.0, -0.0, -3.0, 3.0, -1.0, 1.0, inf, -inf, 1.0, 1.0, f32::NAN, 1.0]);
        let y = f(&[14], &[-2.0, 2.0, 2.0, -2.0, inf, inf, -inf, -inf, 2.0, 2.0, 0.0, -0.0, 2.0, f32::NAN]);
        let got = elems::<f32>(&ok("Mod", &[&x, &y], &none()));
        let want = [-0.0, 0.0, 0.0, -0.0, inf, 3.0, -1.0, -inf];
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "element {i}: {g} vs {w}");
        }
        assert!(got[8..].iter().all(|v| v.is_nan()), "{got:?}");
        let h =
            |v: &[f32]| tensor(DType::F16, &[v.len() as i64], &v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>());
        assert_eq!(ok("Mod", &[&h(&[-4.5, -0.0]), &h(&[2.0, -2.0])], &none()), h(&[1.5, -0.0]));
        let d = |v: &[f64]| tensor(DType::F64, &[v.len() as i64], v);
        assert_eq!(ok("Mod", &[&d(&[-7.0, 0.0]), &d(&[-2.0, -3.0])], &none()), d(&[-1.0, -0.0]));
        let e = def("Mod").check_attrs(&attrs(&[("fmod", AttrValue::Int(2))])).unwrap_err();
        assert_eq!(e, "attribute `fmod` of @onnx.Mod must be 0 or 1, found 2");
    }

    #[test]
    fn size_counts_elements() {
        assert_eq!(ok("Size", &[&f(&[2, 3], &[0.0; 6])], &none()), i64s(&[], &[6]));
        assert_eq!(ok("Size", &[&b(&[4, 0, 2], &[])], &none()), i64s(&[], &[0]));
        assert_eq!(ok("Size", &[&i64s(&[], &[5])], &none()), i64s(&[], &[1]));
    }
}
