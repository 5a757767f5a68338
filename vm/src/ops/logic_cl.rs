//! OpenCL buffer kernels for the comparison and logic family and the shape helpers (see
//! `super::cl`). They mirror the host kernels in `super::logic`: one generated broadcast
//! kernel per call, with the coalesced output dimensions and each operand's strides as
//! arguments (the layout of `super::elementwise_cl`), each operand loaded in its own type
//! (`half` through `vload_half`) and bools written as 0 or 1. Where and Expand move raw
//! element bits, so they take every dtype.

use super::cl::{
    check_dtype, check_out, cl_type, float_arg, input, need_fp64, raw_type, ClCtx, ClFn, ClTensor, Infos, Res,
};
use super::elementwise_cl::{bcast, Operand, FP64_PRAGMA};
use super::{Attrs, Operator};
use crate::ir::operators::elementwise::legacy_b_shape;
use crate::ir::operators::logic::{plan_range, RangeArgs, EQUAL, NUMERIC};
use crate::ir::operators::shape::broadcast;
use crate::ir::types::DType;
use crate::opencl::device::KernelArg;
use crate::opencl::narrow;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[
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

fn output(outs: &[ClTensor]) -> Result<&ClTensor, String> {
    outs.first().ok_or_else(|| "output 1 is required".to_string())
}

/// The loading type of a dtype's elements: its OpenCL type, or `raw` bits of its width.
fn ty(d: DType, raw: bool) -> &'static str {
    if raw {
        raw_type(d)
    } else {
        cl_type(d)
    }
}

// ---------------------------------------------------------------------------------------
// Comparisons and logic.

/// A binary operator's inputs (one dtype from `allowed`), B's broadcast shape and the checked
/// output.
fn binary<'a>(
    ins: &'a [Option<ClTensor>],
    attrs: &Attrs,
    outs: &'a [ClTensor],
    allowed: &[DType],
    out_dtype: Option<DType>,
) -> Result<(&'a ClTensor, &'a ClTensor, Vec<i64>, &'a ClTensor), String> {
    let (a, b) = (input(ins, 0, "A")?, input(ins, 1, "B")?);
    check_dtype(a, 0, "A", allowed)?;
    if b.dtype != a.dtype {
        return Err(format!("inputs 1 and 2 must have the same dtype, found {} and {}", a.dtype, b.dtype));
    }
    let bsh = legacy_b_shape(&a.shape, &b.shape, attrs)?;
    let y = output(outs)?;
    check_out(y, out_dtype.unwrap_or(a.dtype), &broadcast(&a.shape, &bsh)?)?;
    Ok((a, b, bsh, y))
}

fn compare(ctx: &ClCtx, ins: &[Option<ClTensor>], attrs: &Attrs, outs: &[ClTensor], op: &str) -> Res {
    let allowed = if op == "==" { EQUAL } else { NUMERIC };
    let (a, b, bsh, y) = binary(ins, attrs, outs, allowed, Some(DType::Bool))?;
    need_fp64(ctx, a.dtype)?;
    let t = cl_type(a.dtype);
    let expr = if a.dtype == DType::Bool {
        format!("(uchar)((v0 != 0) {op} (v1 != 0))")
    } else {
        format!("(uchar)(v0 {op} v1)")
    };
    let ops = [Operand { t: a, shape: &a.shape, ty: t }, Operand { t: b, shape: &bsh, ty: t }];
    bcast(ctx, &ops, y, "uchar", a.dtype == DType::F64, "", &expr)
}

fn equal(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    compare(ctx, ins, attrs, outs, "==")
}

fn less(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    compare(ctx, ins, attrs, outs, "<")
}

fn greater(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    compare(ctx, ins, attrs, outs, ">")
}

fn less_or_equal(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    compare(ctx, ins, attrs, outs, "<=")
}

fn greater_or_equal(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    compare(ctx, ins, attrs, outs, ">=")
}

fn not(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", &[DType::Bool])?;
    let y = output(outs)?;
    check_out(y, DType::Bool, &x.shape)?;
    bcast(ctx, &[Operand { t: x, shape: &x.shape, ty: "uchar" }], y, "uchar", false, "", "(uchar)(v0 == 0)")
}

fn logic(ctx: &ClCtx, ins: &[Option<ClTensor>], attrs: &Attrs, outs: &[ClTensor], op: &str) -> Res {
    let (a, b, bsh, y) = binary(ins, attrs, outs, &[DType::Bool], None)?;
    let ops = [Operand { t: a, shape: &a.shape, ty: "uchar" }, Operand { t: b, shape: &bsh, ty: "uchar" }];
    bcast(ctx, &ops, y, "uchar", false, "", &format!("(uchar)((v0 != 0) {op} (v1 != 0))"))
}

fn and(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    logic(ctx, ins, attrs, outs, "&&")
}

fn or(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    logic(ctx, ins, attrs, outs, "||")
}

fn xor(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    logic(ctx, ins, attrs, outs, "!=")
}

// ---------------------------------------------------------------------------------------
// Where and Expand.

fn where_(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    let (c, x, yv) = (input(ins, 0, "condition")?, input(ins, 1, "X")?, input(ins, 2, "Y")?);
    check_dtype(c, 0, "condition", &[DType::Bool])?;
    if x.dtype != yv.dtype {
        return Err(format!("inputs 2 (X) and 3 (Y) must have the same dtype, found {} and {}", x.dtype, yv.dtype));
    }
    let y = output(outs)?;
    check_out(y, x.dtype, &broadcast(&broadcast(&c.shape, &x.shape)?, &yv.shape)?)?;
    let t = ty(x.dtype, true);
    let ops = [
        Operand { t: c, shape: &c.shape, ty: "uchar" },
        Operand { t: x, shape: &x.shape, ty: t },
        Operand { t: yv, shape: &yv.shape, ty: t },
    ];
    bcast(ctx, &ops, y, t, false, "", "v0 != 0 ? v1 : v2")
}

fn expand(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "input")?;
    input(ins, 1, "shape")?;
    let y = output(outs)?;
    if y.dtype != x.dtype {
        return Err(format!("output is {}, expected {}", y.dtype, x.dtype));
    }
    // The output shape (checked against the shape input by inference) must be the input's
    // broadcast.
    if broadcast(&x.shape, &y.shape).ok().as_ref() != Some(&y.shape) {
        return Err(format!("input of shape {:?} does not broadcast to the output shape {:?}", x.shape, y.shape));
    }
    let t = ty(x.dtype, true);
    bcast(ctx, &[Operand { t: x, shape: &x.shape, ty: t }], y, t, false, "", "v0")
}

// ---------------------------------------------------------------------------------------
// Mod.

/// The helper function `m(a, b)` of Mod for dtype `d` (`fmod`: C's remainder, else Python's).
/// Integer division by zero gives 0 (the host refuses it; the kernels check what they can),
/// and MIN % -1 is 0.
fn mod_prelude(d: DType, fmod: bool) -> String {
    let t = cl_type(d);
    if d.is_float() {
        let t = if d == DType::F16 { "float" } else { t };
        if fmod {
            return format!("{t} m({t} a, {t} b) {{ return fmod(a, b); }}\n");
        }
        // numpy.mod: the divisor's sign, a zero signed as the divisor.
        return format!(
            "{t} m({t} a, {t} b) {{\n  {t} r = fmod(a, b);\n  if (b == 0) return r;\n  \
             if (r == 0) return copysign(({t})0, b);\n  return ((b < 0) != (r < 0)) ? r + b : r;\n}}\n"
        );
    }
    let signed = matches!(d, DType::I8 | DType::I16 | DType::I32 | DType::I64);
    match (signed, fmod) {
        (false, _) => format!("{t} m({t} a, {t} b) {{ return b == 0 ? ({t})0 : ({t})(a % b); }}\n"),
        (true, true) => format!("{t} m({t} a, {t} b) {{ return (b == 0 || b == -1) ? ({t})0 : ({t})(a % b); }}\n"),
        (true, false) => format!(
            "{t} m({t} a, {t} b) {{\n  if (b == 0 || b == -1) return ({t})0;\n  {t} r = ({t})(a % b);\n  \
             return (r != 0 && ((r < 0) != (b < 0))) ? ({t})(r + b) : r;\n}}\n"
        ),
    }
}

fn modulo(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let (a, b, bsh, y) = binary(ins, attrs, outs, NUMERIC, None)?;
    need_fp64(ctx, a.dtype)?;
    let fmod = attrs.int("fmod", 0) == 1;
    if !a.dtype.is_float() && y.numel() > 0 {
        if let Some(v) = infos.get(1).and_then(|t| t.as_ref()).and_then(|t| t.value) {
            if v.data.chunks_exact(v.dtype.size()).any(|e| e.iter().all(|&x| x == 0)) {
                return Err("integer division by zero in Mod (input 2 has a zero element)".into());
            }
        }
    }
    let t = cl_type(a.dtype);
    let ops = [Operand { t: a, shape: &a.shape, ty: t }, Operand { t: b, shape: &bsh, ty: t }];
    bcast(ctx, &ops, y, t, a.dtype == DType::F64, &mod_prelude(a.dtype, fmod), "m(v0, v1)")
}

// ---------------------------------------------------------------------------------------
// Range and Size.

fn range(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    for (i, name) in ["start", "limit", "delta"].iter().enumerate() {
        input(ins, i, name)?;
    }
    let (d, args, n) = plan_range(infos)?;
    let y = output(outs)?;
    check_out(y, d, &[n])?;
    need_fp64(ctx, d)?;
    if n == 0 {
        return Ok(());
    }
    let t = cl_type(d);
    let (src, start, delta) = match args {
        // Wrapping arithmetic in ulong: every value lies between start and limit.
        RangeArgs::Int { start, delta } => (
            format!(
                "__kernel void k(__global {t}* y, ulong yo, ulong n, long s, long d) {{\n  ulong i = get_global_id(0);\n  \
                 if (i < n) y[yo + i] = ({t})as_long((ulong)s + i * (ulong)d);\n}}\n"
            ),
            KernelArg::U64(start as u64),
            KernelArg::U64(delta as u64),
        ),
        RangeArgs::Float { start, delta } => {
            // In double where the device has it, as the host computes.
            let (c, pragma, a, b) = if ctx.has_fp64() {
                ("double", FP64_PRAGMA, KernelArg::Bytes(start.to_ne_bytes(), 8), KernelArg::Bytes(delta.to_ne_bytes(), 8))
            } else {
                ("float", "", float_arg(start as f32), float_arg(delta as f32))
            };
            (
                if d == DType::F16 {
                    format!(
                        "{pragma}__kernel void k(__global half* y, ulong yo, ulong n, {c} s, {c} d) {{\n  \
                         ulong i = get_global_id(0);\n  if (i < n) vstore_half((float)(s + ({c})i * d), yo + i, y);\n}}\n"
                    )
                } else if d == DType::BF16 {
                    // Through float, as the host rounds (f64, f32, then bf16 to nearest even).
                    let st = narrow::store_default(d, &format!("(float)(s + ({c})i * d)"));
                    format!(
                        "{pragma}{}__kernel void k(__global ushort* y, ulong yo, ulong n, {c} s, {c} d) {{\n  \
                         ulong i = get_global_id(0);\n  if (i < n) y[yo + i] = {st};\n}}\n",
                        narrow::defs(d, false)
                    )
                } else {
                    format!(
                        "{pragma}__kernel void k(__global {t}* y, ulong yo, ulong n, {c} s, {c} d) {{\n  \
                         ulong i = get_global_id(0);\n  if (i < n) y[yo + i] = ({t})(s + ({c})i * d);\n}}\n"
                    )
                },
                a,
                b,
            )
        }
    };
    let [ym, yo] = y.args();
    ctx.run(&src, &[ym, yo, KernelArg::U64(n as u64), start, delta], n as usize)
}

fn size(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "data")?;
    let y = output(outs)?;
    check_out(y, DType::I64, &[])?;
    let [ym, yo] = y.args();
    let src = "__kernel void k(__global long* y, ulong yo, long v) { y[yo] = v; }\n";
    ctx.run(src, &[ym, yo, KernelArg::U64(x.numel())], 1)
}

/// Each kernel against the host kernel on the device named by `RXVM_TEST_CL_DEVICE`
/// (default: the first); skipped when no OpenCL runtime is usable.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ir::host_tensor::{store_f64, HostTensor};
    use crate::opencl::device::ClDevice;
    use crate::ops::cl::testing::{device, run_kernel};
    use crate::ops::OPS;

    /// Deterministic pseudo-random values in `[lo, hi)`.
    fn rand(seed: u64, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
            })
            .collect()
    }

    /// Small values (so comparisons see ties), NaN in floats, both signs where the dtype has
    /// them; nonzero when `nonzero`.
    fn tensor(d: DType, shape: &[i64], seed: u64, nonzero: bool) -> HostTensor {
        let n = shape.iter().map(|&d| d.max(0) as usize).product::<usize>();
        let mut t = HostTensor::zeros(d, shape).unwrap();
        let lo = if d.int_range().is_some_and(|(l, _)| l == 0) || d == DType::Bool { 0.0 } else { -4.0 };
        for (i, (c, v)) in t.data.chunks_exact_mut(d.size()).zip(rand(seed, n, lo, 4.0)).enumerate() {
            let mut v = if d == DType::Bool {
                (v >= 2.0) as i64 as f64
            } else if d.is_float() {
                (v * 2.0).round() / 2.0
            } else {
                v.trunc()
            };
            if nonzero && v == 0.0 {
                v = 3.0;
            }
            if d.is_float() && i % 7 == 5 {
                v = f64::NAN;
            }
            store_f64(d, v, c);
        }
        t
    }

    fn scalar(d: DType, v: f64) -> HostTensor {
        let mut t = HostTensor::zeros(d, &[]).unwrap();
        store_f64(d, v, &mut t.data);
        t
    }

    fn close(a: f64, b: f64) -> bool {
        (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-6 * b.abs() + 1e-6
    }

    /// Runs `name` on the host and on the device and compares the output.
    fn check(dev: &ClDevice, name: &str, ins: &[HostTensor], a: &Attrs) {
        let def = OPS.iter().find(|o| o.name == name).unwrap();
        let infos: Vec<Option<crate::ops::TensorInfo>> = ins
            .iter()
            .map(|t| {
                Some(crate::ops::TensorInfo { dtype: t.dtype, shape: &t.shape, value: (t.numel() <= 64).then_some(t) })
            })
            .collect();
        let inferred = (def.infer)(&infos, a).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut want: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        let refs: Vec<Option<&HostTensor>> = ins.iter().map(Some).collect();
        (def.op.id().host_kernel().unwrap())(&refs, a, &mut want).unwrap_or_else(|e| panic!("{name} (host): {e}"));
        let cl_ins: Vec<Option<HostTensor>> = ins.iter().cloned().map(Some).collect();
        let got = run_kernel(dev, name, &cl_ins, &infos, a, &want).remove(0);
        let w = &want[0];
        let ok = match w.dtype {
            DType::F32 => w.data.chunks_exact(4).zip(got.chunks_exact(4)).all(|(x, y)| {
                close(
                    f32::from_le_bytes(y.try_into().unwrap()) as f64,
                    f32::from_le_bytes(x.try_into().unwrap()) as f64,
                )
            }),
            DType::F16 => w.data.chunks_exact(2).zip(got.chunks_exact(2)).all(|(x, y)| {
                let h = |b: &[u8]| half::f16::from_le_bytes([b[0], b[1]]).to_f64();
                close(h(y), h(x))
            }),
            DType::F64 => w.data.chunks_exact(8).zip(got.chunks_exact(8)).all(|(x, y)| {
                close(f64::from_le_bytes(y.try_into().unwrap()), f64::from_le_bytes(x.try_into().unwrap()))
            }),
            _ => w.data == got,
        };
        assert!(
            ok,
            "{name} {a} on {:?}: output differs\nhost {:?}\ncl   {:?}",
            ins.iter().map(|t| (t.dtype, &t.shape)).collect::<Vec<_>>(),
            w.data,
            got
        );
    }

    #[test]
    fn kernels_match_the_host() {
        let Some(dev) = device() else { return };
        use DType::*;
        let none = Attrs::default();
        let t = |d: DType, s: &[i64], seed: u64| tensor(d, s, seed, false);
        let mut numeric = vec![F32, F16, I8, I16, I32, I64, U8, U16, U32, U64];
        if dev.has_fp64 {
            numeric.push(F64);
        }
        for op in ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"] {
            for &d in &numeric {
                check(&dev, op, &[t(d, &[2, 3, 4], 1), t(d, &[3, 1], 2)], &none);
                check(&dev, op, &[t(d, &[], 3), t(d, &[70], 4)], &none);
                check(&dev, op, &[t(d, &[5, 1, 3], 5), t(d, &[1, 4, 1], 6)], &none);
            }
            let legacy = Attrs(vec![("broadcast".into(), AttrValue::Int(1)), ("axis".into(), AttrValue::Int(1))]);
            check(&dev, op, &[t(I32, &[2, 3, 4], 7), t(I32, &[3], 8)], &legacy);
        }
        check(&dev, "Equal", &[t(Bool, &[4, 5], 1), t(Bool, &[5], 2)], &none);
        check(&dev, "Not", &[t(Bool, &[3, 7], 3)], &none);
        for op in ["And", "Or", "Xor"] {
            check(&dev, op, &[t(Bool, &[4, 1], 1), t(Bool, &[1, 6], 2)], &none);
            check(&dev, op, &[t(Bool, &[100], 3), t(Bool, &[100], 4)], &none);
        }
        for d in [F32, F16, I64, U8, Bool, BF16, F8E4M3FN, F8E8M0] {
            check(&dev, "Where", &[t(Bool, &[3, 1], 1), t(d, &[1, 4], 2), t(d, &[], 3)], &none);
            check(&dev, "Where", &[t(Bool, &[4], 4), t(d, &[2, 3, 4], 5), t(d, &[3, 1], 6)], &none);
            let shape =
                HostTensor::new(I64, vec![3], [2i64, 3, 4].iter().flat_map(|v| v.to_le_bytes()).collect()).unwrap();
            check(&dev, "Expand", &[t(d, &[3, 1], 7), shape], &none);
        }
        let fmod = Attrs(vec![("fmod".into(), AttrValue::Int(1))]);
        for &d in &numeric {
            let (a, b) = (t(d, &[3, 4], 1), tensor(d, &[4], 2, true));
            check(&dev, "Mod", &[a.clone(), b.clone()], &none);
            check(&dev, "Mod", &[a, b], &fmod);
        }
        let mins =
            HostTensor::new(I32, vec![2], [i32::MIN, -7].iter().flat_map(|v| v.to_le_bytes()).collect()).unwrap();
        let divs = HostTensor::new(I32, vec![2], [-1i32, 3].iter().flat_map(|v| v.to_le_bytes()).collect()).unwrap();
        check(&dev, "Mod", &[mins.clone(), divs.clone()], &none);
        check(&dev, "Mod", &[mins, divs], &fmod);
        for d in [I16, I32, I64] {
            for (s, l, dl) in [(0.0, 10.0, 3.0), (10.0, 3.0, -2.0), (5.0, 1.0, 1.0), (-100.0, 100.0, 1.0)] {
                check(&dev, "Range", &[scalar(d, s), scalar(d, l), scalar(d, dl)], &none);
            }
        }
        let mut floats = vec![F32, F16, BF16];
        if dev.has_fp64 {
            floats.push(F64);
        }
        for d in floats {
            for (s, l, dl) in [(1.0, 2.0, 0.25), (10.0, -3.0, -0.5), (0.0, -1.0, 1.0), (-3.0, 97.0, 0.5)] {
                check(&dev, "Range", &[scalar(d, s), scalar(d, l), scalar(d, dl)], &none);
            }
        }
        check(&dev, "Size", &[t(F32, &[3, 5], 1)], &none);
        check(&dev, "Size", &[t(Bool, &[0, 5], 1)], &none);
    }

    #[test]
    fn missing_inputs_are_errors() {
        let Some(dev) = device() else { return };
        let ctx = ClCtx { dev: &dev };
        for (name, f) in CL {
            let e = f(&ctx, &[], &[], &Attrs::default(), &[]).unwrap_err();
            assert!(e.contains("required"), "{}: {e}", name.name());
        }
    }
}
