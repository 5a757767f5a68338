//! OpenCL buffer kernels for the bitwise family, the float classifiers and Mean (see
//! `super::cl`). They mirror the host kernels in `super::bitwise` through the generated
//! broadcast kernel of `super::elementwise_cl` (coalesced output dimensions and each
//! operand's strides as arguments). The helpers here are shared with the quantization and
//! linear-algebra families.

use super::cl::{cl_type, need_fp64, raw_type, ClCtx, ClFn, ClTensor};
use super::elementwise_cl::{bcast, Operand, FP64_PRAGMA};
use super::{Attrs, Operator, TensorInfo};
use crate::ir::operators::bitwise::{bit_cast_target, inf_signs, shift_left, INTEGERS};
use crate::ir::operators::elementwise::{same_dtype, FLOATS};
use crate::ir::operators::shape::broadcast;
use crate::ir::types::DType;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[
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

pub(super) type Res = Result<(), String>;
pub(super) type Infos<'a, 'b> = &'a [Option<TensorInfo<'b>>];

// ---------------------------------------------------------------------------------------
// Helpers.

pub(super) fn input<'a>(ins: &'a [Option<ClTensor>], i: usize, name: &str) -> Result<&'a ClTensor, String> {
    ins.get(i).and_then(Option::as_ref).ok_or_else(|| format!("input {} ({name}) is required", i + 1))
}

pub(super) fn optional(ins: &[Option<ClTensor>], i: usize) -> Option<&ClTensor> {
    ins.get(i).and_then(Option::as_ref)
}

pub(super) fn output(outs: &[ClTensor], i: usize) -> Result<&ClTensor, String> {
    outs.get(i).ok_or_else(|| format!("output {} is required", i + 1))
}

pub(super) fn check_dtype(t: &ClTensor, i: usize, name: &str, allowed: &[DType]) -> Res {
    if allowed.contains(&t.dtype) {
        Ok(())
    } else {
        let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
        Err(format!("input {} ({name}) must be {} on OpenCL, found {}", i + 1, names.join(" or "), t.dtype))
    }
}

pub(super) fn check_out(y: &ClTensor, dtype: DType, shape: &[i64]) -> Res {
    if y.dtype != dtype || y.shape != shape {
        return Err(format!("output is {}{:?}, expected {dtype}{shape:?}", y.dtype, y.shape));
    }
    Ok(())
}

/// `double` and its pragma when the device has fp64, else `float`.
pub(super) fn wide(ctx: &ClCtx) -> (&'static str, &'static str) {
    if ctx.has_fp64() {
        ("double", FP64_PRAGMA)
    } else {
        ("float", "")
    }
}

// ---------------------------------------------------------------------------------------
// Bitwise operators.

/// Two integer inputs of one dtype and the checked broadcast output.
fn binary<'a>(
    ins: &'a [Option<ClTensor>],
    outs: &'a [ClTensor],
) -> Result<(&'a ClTensor, &'a ClTensor, &'a ClTensor), String> {
    let (a, b) = (input(ins, 0, "A")?, input(ins, 1, "B")?);
    check_dtype(a, 0, "A", INTEGERS)?;
    if b.dtype != a.dtype {
        return Err(format!("inputs 1 and 2 must have the same dtype, found {} and {}", a.dtype, b.dtype));
    }
    let y = output(outs, 0)?;
    check_out(y, a.dtype, &broadcast(&a.shape, &b.shape)?)?;
    Ok((a, b, y))
}

fn binary_op(ctx: &ClCtx, ins: &[Option<ClTensor>], outs: &[ClTensor], prelude: &str, expr: &str) -> Res {
    let (a, b, y) = binary(ins, outs)?;
    let t = cl_type(a.dtype);
    let ops = [Operand { t: a, shape: &a.shape, ty: t }, Operand { t: b, shape: &b.shape, ty: t }];
    bcast(ctx, &ops, y, t, false, prelude, &expr.replace("T", t))
}

/// `s(a, b)`: ONNX BitShift on the OpenCL type of `d`.
fn shift_prelude(d: DType, left: bool) -> String {
    let t = cl_type(d);
    let u = raw_type(d);
    let w = 8 * d.size();
    let signed = matches!(d, DType::I8 | DType::I16 | DType::I32 | DType::I64);
    let out_of_range = if signed { format!("b < 0 || b >= {w}") } else { format!("b >= {w}") };
    let body = match (left, signed) {
        (true, _) => format!("({out_of_range}) ? ({t})0 : ({t})(({u})a << ({u})b)"),
        (false, true) => format!("({out_of_range}) ? (a < 0 ? ({t})-1 : ({t})0) : ({t})(a >> b)"),
        (false, false) => format!("({out_of_range}) ? ({t})0 : ({t})(a >> b)"),
    };
    format!("{t} s({t} a, {t} b) {{ return {body}; }}\n")
}

fn bit_shift(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let left = shift_left(attrs)?;
    let d = input(ins, 0, "X")?.dtype;
    check_dtype(input(ins, 0, "X")?, 0, "X", INTEGERS)?;
    binary_op(ctx, ins, outs, &shift_prelude(d, left), "s(v0, v1)")
}

fn bitwise_and(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    binary_op(ctx, ins, outs, "", "(T)(v0 & v1)")
}

fn bitwise_or(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    binary_op(ctx, ins, outs, "", "(T)(v0 | v1)")
}

fn bitwise_xor(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    binary_op(ctx, ins, outs, "", "(T)(v0 ^ v1)")
}

fn bitwise_not(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", INTEGERS)?;
    let y = output(outs, 0)?;
    check_out(y, x.dtype, &x.shape)?;
    let t = cl_type(x.dtype);
    bcast(ctx, &[Operand { t: x, shape: &x.shape, ty: t }], y, t, false, "", &format!("({t})(~v0)"))
}

// ---------------------------------------------------------------------------------------
// IsInf, IsNaN.

fn classify(ctx: &ClCtx, ins: &[Option<ClTensor>], outs: &[ClTensor], expr: &str) -> Res {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", FLOATS)?;
    need_fp64(ctx, x.dtype)?;
    let y = output(outs, 0)?;
    check_out(y, DType::Bool, &x.shape)?;
    let t = cl_type(x.dtype);
    bcast(ctx, &[Operand { t: x, shape: &x.shape, ty: t }], y, "uchar", x.dtype == DType::F64, "", expr)
}

fn is_inf(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let expr = match inf_signs(attrs)? {
        (true, true) => "(uchar)(isinf(v0) != 0)",
        (true, false) => "(uchar)(isinf(v0) && v0 > 0)",
        (false, true) => "(uchar)(isinf(v0) && v0 < 0)",
        (false, false) => "(uchar)0",
    };
    classify(ctx, ins, outs, expr)
}

fn is_nan(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    classify(ctx, ins, outs, "(uchar)(isnan(v0) != 0)")
}

// ---------------------------------------------------------------------------------------
// Mean.

/// Operands per launch (the output itself is one of them after the first launch).
const MEAN_OPERANDS: usize = 4;

fn mean(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "data_0")?;
    check_dtype(x, 0, "data_0", FLOATS)?;
    need_fp64(ctx, x.dtype)?;
    let mut list = vec![x];
    let mut shape = x.shape.clone();
    for i in 1..ins.len() {
        let t = input(ins, i, &format!("data_{i}"))?;
        same_dtype(i, t.dtype, x.dtype)?;
        shape = broadcast(&shape, &t.shape).map_err(|e| format!("input {}: {e}", i + 1))?;
        list.push(t);
    }
    let y = output(outs, 0)?;
    check_out(y, x.dtype, &shape)?;
    let t = cl_type(x.dtype);
    let fp64 = x.dtype == DType::F64;
    // numpy adds in order, rounding each sum to the dtype: f32 and f64 sums stay in their
    // type inside a launch; f16 sums (computed in float) are rounded by storing each one.
    let per = if x.dtype == DType::F16 { 2 } else { MEAN_OPERANDS };
    let sum = |ops: &[Operand]| {
        let expr = (1..ops.len()).fold("v0".to_string(), |e, j| format!("({e} + v{j})"));
        bcast(ctx, ops, y, t, fp64, "", &expr)
    };
    let head: Vec<Operand> = list.iter().take(per).map(|t_| Operand { t: t_, shape: &t_.shape, ty: t }).collect();
    sum(&head)?;
    for chunk in list[head.len()..].chunks(per - 1) {
        let mut ops = vec![Operand { t: y, shape: &y.shape, ty: t }];
        ops.extend(chunk.iter().map(|t_| Operand { t: t_, shape: &t_.shape, ty: t }));
        sum(&ops)?;
    }
    let n = list.len();
    let expr = if fp64 { format!("v0 / {n}.0") } else { format!("v0 / {n}.0f") };
    bcast(ctx, &[Operand { t: y, shape: &y.shape, ty: t }], y, t, fp64, "", &expr)
}

// ---------------------------------------------------------------------------------------
// BitCast.

fn bit_cast(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let to = bit_cast_target(attrs)?;
    let x = input(ins, 0, "input")?;
    if x.dtype.size() != to.size() {
        return Err(format!("BitCast needs types of one bit width, but the input is {} and `to` is {to}", x.dtype));
    }
    let y = output(outs, 0)?;
    check_out(y, to, &x.shape)?;
    let t = raw_type(to);
    let expr = if to == DType::Bool { "(uchar)(v0 != 0)" } else { "v0" };
    bcast(ctx, &[Operand { t: x, shape: &x.shape, ty: t }], y, t, false, "", expr)
}

/// Each kernel against the host kernel on the device named by `RXVM_TEST_CL_DEVICE`
/// (default: the first); skipped when no OpenCL runtime is usable.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ir::host_tensor::{store_f64, HostTensor};
    use crate::opencl::device::ClDevice;
    use crate::ops::cl::testing::{device, run_kernel};
    use crate::ops::OPS;

    /// Deterministic pseudo-random values in `[lo, hi)`.
    pub(crate) fn rand(seed: u64, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
            })
            .collect()
    }

    /// Random raw bits of every element (so integers cover their whole range).
    pub(crate) fn bits(d: DType, shape: &[i64], seed: u64) -> HostTensor {
        let mut t = HostTensor::zeros(d, shape).unwrap();
        let n = t.data.len();
        for (b, v) in t.data.iter_mut().zip(rand(seed, n, 0.0, 256.0)) {
            *b = v as u8;
        }
        t
    }

    /// Values in `[lo, hi)` stored as `d` (rounded for floats, truncated for integers).
    pub(crate) fn values(d: DType, shape: &[i64], seed: u64, lo: f64, hi: f64) -> HostTensor {
        let mut t = HostTensor::zeros(d, shape).unwrap();
        let n = shape.iter().map(|&d| d.max(0) as usize).product::<usize>();
        for (c, v) in t.data.chunks_exact_mut(d.size()).zip(rand(seed, n, lo, hi)) {
            store_f64(d, if d.is_float() { v } else { v.floor() }, c);
        }
        t
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * (1.0 + b.abs())
    }

    /// Runs `name` on the host and on the device and compares every output (floats within
    /// `tol`, relative; everything else exactly).
    pub(crate) fn check_tol(dev: &ClDevice, name: &str, ins: &[Option<HostTensor>], a: &Attrs, tol: f64) {
        let def = OPS.iter().find(|o| o.name == name).unwrap();
        let infos: Vec<Option<TensorInfo>> = ins
            .iter()
            .map(|t| {
                t.as_ref().map(|t| TensorInfo {
                    dtype: t.dtype,
                    shape: &t.shape,
                    value: (t.numel() <= 64).then_some(t),
                })
            })
            .collect();
        let inferred = (def.infer)(&infos, a).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut want: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        let refs: Vec<Option<&HostTensor>> = ins.iter().map(Option::as_ref).collect();
        (def.op.id().host_kernel().unwrap())(&refs, a, &mut want).unwrap_or_else(|e| panic!("{name} (host): {e}"));
        let got = run_kernel(dev, name, ins, &infos, a, &want);
        for (k, (w, g)) in want.iter().zip(&got).enumerate() {
            let ok = match w.dtype {
                DType::F32 => w.data.chunks_exact(4).zip(g.chunks_exact(4)).all(|(x, y)| {
                    close(
                        f32::from_le_bytes(y.try_into().unwrap()) as f64,
                        f32::from_le_bytes(x.try_into().unwrap()) as f64,
                        tol,
                    )
                }),
                DType::F16 => w.data.chunks_exact(2).zip(g.chunks_exact(2)).all(|(x, y)| {
                    let h = |b: &[u8]| half::f16::from_le_bytes([b[0], b[1]]).to_f64();
                    close(h(y), h(x), tol.max(1e-3))
                }),
                DType::F64 => w.data.chunks_exact(8).zip(g.chunks_exact(8)).all(|(x, y)| {
                    close(f64::from_le_bytes(y.try_into().unwrap()), f64::from_le_bytes(x.try_into().unwrap()), tol)
                }),
                _ => w.data == *g,
            };
            assert!(
                ok,
                "{name} {a} on {:?}: output {} differs\nhost {:?}\ncl   {:?}",
                ins.iter().map(|t| t.as_ref().map(|t| (t.dtype, &t.shape))).collect::<Vec<_>>(),
                k + 1,
                w.data,
                g
            );
        }
    }

    pub(crate) fn check(dev: &ClDevice, name: &str, ins: &[HostTensor], a: &Attrs) {
        let ins: Vec<Option<HostTensor>> = ins.iter().cloned().map(Some).collect();
        check_tol(dev, name, &ins, a, 0.0);
    }

    #[test]
    fn kernels_match_the_host() {
        let Some(dev) = device() else { return };
        use DType::*;
        let none = Attrs::default();
        for d in [I8, I16, I32, I64, U8, U16, U32, U64] {
            for op in ["BitwiseAnd", "BitwiseOr", "BitwiseXor"] {
                check(&dev, op, &[bits(d, &[3, 4, 5], 1), bits(d, &[4, 1], 2)], &none);
            }
            check(&dev, "BitwiseNot", &[bits(d, &[2, 3, 7], 3)], &none);
            let w = 8.0 * d.size() as f64;
            let lo = if d.int_range().is_some_and(|(l, _)| l < 0) { -3.0 } else { 0.0 };
            for dir in ["LEFT", "RIGHT"] {
                let a = Attrs(vec![("direction".into(), AttrValue::Str(dir.into()))]);
                check(&dev, "BitShift", &[bits(d, &[5, 8], 4), values(d, &[8], 5, lo, w + 3.0)], &a);
            }
        }
        let mut floats = vec![F32, F16];
        if dev.has_fp64 {
            floats.push(F64);
        }
        for d in floats {
            let mut x = values(d, &[4, 9], 6, -3.0, 3.0);
            for (i, v) in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -0.0].iter().enumerate() {
                store_f64(d, *v, &mut x.data[i * 5 * d.size()..]);
            }
            for (p, n) in [(1, 1), (1, 0), (0, 1), (0, 0)] {
                let a = Attrs(vec![
                    ("detect_positive".into(), AttrValue::Int(p)),
                    ("detect_negative".into(), AttrValue::Int(n)),
                ]);
                check(&dev, "IsInf", &[x.clone()], &a);
            }
            check(&dev, "IsNaN", &[x.clone()], &none);
            check(&dev, "Mean", &[x.clone()], &none);
            let many: Vec<HostTensor> =
                (0..7).map(|i| values(d, &[[4, 9], [1, 9], [4, 1]][i % 3], i as u64, -5.0, 5.0)).collect();
            check(&dev, "Mean", &many, &none);
            check(&dev, "Mean", &many[..2], &none);
        }
        for (from, to) in [(F32, 6), (I32, 1), (U8, 3), (Bool, 2), (U8, 9), (F64, 7), (U16, 10), (I64, 11)] {
            if (from == F64 || to == 11) && !dev.has_fp64 {
                continue;
            }
            let x = if from == Bool { values(Bool, &[3, 5], 1, 0.0, 2.0) } else { bits(from, &[3, 5], 1) };
            check(&dev, "BitCast", &[x], &Attrs(vec![("to".into(), AttrValue::Int(to))]));
        }
    }

    #[test]
    fn missing_inputs_are_errors() {
        let Some(dev) = device() else { return };
        let ctx = ClCtx { dev: &dev };
        for (name, f) in CL {
            let a = match name {
                Operator::BitShift => Attrs(vec![("direction".into(), AttrValue::Str("LEFT".into()))]),
                Operator::BitCast => Attrs(vec![("to".into(), AttrValue::Int(1))]),
                _ => Attrs::default(),
            };
            let e = f(&ctx, &[], &[], &a, &[]).unwrap_err();
            assert!(e.contains("required"), "{}: {e}", name.name());
        }
    }
}
