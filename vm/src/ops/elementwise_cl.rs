//! OpenCL buffer kernels for the elementwise operators (see `super::cl`).
//!
//! The kernels mirror the host implementations in `super::elementwise` (same attribute
//! handling, dtypes and formulas). Broadcasting operators share one generated kernel that
//! folds its operands element by element, with the (coalesced) output dimensions and each
//! operand's strides passed as arguments; reductions, softmax and the normalizations run
//! one work-item per output element or per reduced row and accumulate in `double` when the
//! device has fp64 (else `float`).

use super::cl::{
    check_dtype, check_out, cl_type, float_arg as f32_arg, input, need_fp64, output, raw_type, storage_of, ClCtx, ClFn,
    ClTensor, Infos, Res,
};
use super::num::{numeric, Arith};
use super::{AttrValue, Attrs, Operator, TensorInfo};
use crate::ir::host_tensor::HostTensor;
use crate::ir::operators::elementwise::{
    legacy_b_shape, reduction, same_dtype, values, Reduction, ARITH, F32_BF16, NUMERIC, POW_BASE, SIGNED,
};
use crate::ir::operators::shape::{broadcast, broadcast_strides};
use crate::ir::types::DType;
use crate::opencl::device::KernelArg;
use crate::opencl::narrow;
use std::fmt::Write;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[
    (Operator::Relu, relu),
    (Operator::Add, add),
    (Operator::Sub, sub),
    (Operator::Mul, mul),
    (Operator::Div, div),
    (Operator::Pow, pow),
    (Operator::Max, max),
    (Operator::Min, min),
    (Operator::Sum, sum),
    (Operator::Clip, clip),
    (Operator::LeakyRelu, leaky_relu),
    (Operator::Sigmoid, sigmoid),
    (Operator::Tanh, tanh),
    (Operator::Exp, exp),
    (Operator::Sqrt, sqrt),
    (Operator::Neg, neg),
    (Operator::Abs, abs),
    (Operator::Elu, elu),
    (Operator::Selu, selu),
    (Operator::Softplus, softplus),
    (Operator::Softsign, softsign),
    (Operator::PRelu, prelu),
    (Operator::Dropout, dropout),
    (Operator::Identity, identity),
    (Operator::Softmax, softmax),
    (Operator::LogSoftmax, log_softmax),
    (Operator::ReduceMean, reduce_mean),
    (Operator::ReduceSum, reduce_sum),
    (Operator::ReduceMax, reduce_max),
    (Operator::ReduceMin, reduce_min),
    (Operator::ReduceProd, reduce_prod),
    (Operator::ReduceL1, reduce_l1),
    (Operator::ReduceL2, reduce_l2),
    (Operator::ReduceLogSum, reduce_log_sum),
    (Operator::ReduceLogSumExp, reduce_log_sum_exp),
    (Operator::ReduceSumSquare, reduce_sum_square),
    (Operator::BatchNormalization, batch_norm),
    (Operator::InstanceNormalization, instance_norm),
    (Operator::LayerNormalization, layer_norm),
    (Operator::ArgMax, arg_max),
    (Operator::ArgMin, arg_min),
    (Operator::LRN, lrn),
];

/// Scalar kernel parameters: (OpenCL declaration, value).
pub(super) type Params = Vec<(&'static str, KernelArg)>;

pub(super) const FP64_PRAGMA: &str = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";

/// The most dimensions a broadcast kernel takes after coalescing (keeps the argument list
/// well inside the minimum `CL_DEVICE_MAX_PARAMETER_SIZE`).
pub(super) const MAX_DIMS: usize = 16;
/// Operands per launch of the broadcast kernel; variadic operators fold in chunks.
const MAX_OPERANDS: usize = 4;

// ---------------------------------------------------------------------------------------
// Helpers.

/// The host value of input `i`, when the interpreter read it back.
fn host_value<'b>(infos: Infos<'_, 'b>, i: usize) -> Option<&'b HostTensor> {
    infos.get(i).and_then(|t| t.as_ref()).and_then(|t| t.value)
}

/// The accumulation type: `double` when the device has fp64, else `float`.
#[derive(Clone, Copy)]
struct Acc {
    ty: &'static str,
    fp64: bool,
}

impl Acc {
    fn of(ctx: &ClCtx) -> Acc {
        if ctx.has_fp64() {
            Acc { ty: "double", fp64: true }
        } else {
            Acc { ty: "float", fp64: false }
        }
    }

    fn pragma(self) -> &'static str {
        if self.fp64 {
            FP64_PRAGMA
        } else {
            ""
        }
    }

    /// A scalar argument of this type.
    fn arg(self, v: f64) -> KernelArg {
        if self.fp64 {
            KernelArg::Bytes(v.to_ne_bytes(), 8)
        } else {
            f32_arg(v as f32)
        }
    }
}

/// The product of `dims` as a u64 (0 for any zero dimension; negative dims count as 0).
fn prod(dims: &[i64]) -> u64 {
    dims.iter().fold(1u64, |a, &d| a.saturating_mul(d.max(0) as u64))
}

fn norm_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    }
    Ok((if axis < 0 { axis + r } else { axis }) as usize)
}

fn u64s(v: &[u64]) -> impl Iterator<Item = KernelArg> + '_ {
    v.iter().map(|&x| KernelArg::U64(x))
}

// ---------------------------------------------------------------------------------------
// Generic kernels.

/// `y[i] = expr(v)` with `v = x[i]` (an `in_t`), plus scalar parameters `params`
/// (declaration, value).
#[allow(clippy::too_many_arguments)]
fn map_kernel(
    ctx: &ClCtx,
    x: &ClTensor,
    y: &ClTensor,
    in_t: &str,
    out_t: &str,
    fp64: bool,
    expr: &str,
    params: Vec<(&str, KernelArg)>,
) -> Res {
    let n = y.numel();
    if x.numel() != n {
        return Err(format!("input has {} elements but the output has {n}", x.numel()));
    }
    if n == 0 {
        return Ok(());
    }
    let mut decl = String::new();
    for (d, _) in &params {
        let _ = write!(decl, ", {d}");
    }
    // bf16 loads as float and stores rounded to nearest even.
    let (mut pre, mut load, mut store) =
        (String::new(), format!("{in_t} v = x[xo + i];"), format!("y[yo + i] = {expr};"));
    if in_t == "bf16" || out_t == "bf16" {
        pre = narrow::defs(DType::BF16, false);
    }
    if in_t == "bf16" {
        load = format!("float v = {};", narrow::load(DType::BF16, "x[xo + i]"));
    }
    if out_t == "bf16" {
        store = format!("y[yo + i] = {};", narrow::store_default(DType::BF16, &format!("({expr})")));
    }
    // half is a storage type (no cl_khr_fp16 needed): loaded as float, stored rounded.
    if in_t == "half" {
        load = "float v = vload_half(xo + i, x);".to_string();
    }
    if out_t == "half" {
        store = format!("vstore_half({expr}, yo + i, y);");
    }
    let (in_s, out_s) = (storage_of(in_t), storage_of(out_t));
    let src = format!(
        "{}{pre}__kernel void k(__global const {in_s}* x, ulong xo, __global {out_s}* y, ulong yo, ulong n{decl}) {{\n  \
         ulong i = get_global_id(0);\n  if (i < n) {{\n    {load}\n    {store}\n  }}\n}}\n",
        if fp64 { FP64_PRAGMA } else { "" }
    );
    let [xm, xo] = x.args();
    let [ym, yo] = y.args();
    let mut args = vec![xm, xo, ym, yo, KernelArg::U64(n)];
    args.extend(params.into_iter().map(|(_, a)| a));
    ctx.run(&src, &args, n as usize)
}

/// A raw element copy `y = x` (any dtype).
fn copy(ctx: &ClCtx, x: &ClTensor, y: &ClTensor) -> Res {
    if x.dtype != y.dtype {
        return Err(format!("cannot copy {} into {}", x.dtype, y.dtype));
    }
    let t = raw_type(x.dtype);
    map_kernel(ctx, x, y, t, t, false, "v", Vec::new())
}

/// Coalesced broadcast layout of `shapes` to `out`: the output dimensions (units dropped,
/// mergeable neighbours merged) and each operand's element strides along them.
pub(super) fn layout(out: &[i64], shapes: &[&[i64]]) -> Result<(Vec<u64>, Vec<Vec<u64>>), String> {
    for s in shapes {
        let ok = s.len() <= out.len()
            && s.iter().zip(&out[out.len() - s.len()..]).all(|(&d, &o)| d == o || (d == 1 && o >= 0));
        if !ok {
            return Err(format!("shape {s:?} does not broadcast to the output shape {out:?}"));
        }
    }
    let full: Vec<Vec<usize>> = shapes.iter().map(|s| broadcast_strides(s, out)).collect();
    let mut dims: Vec<u64> = Vec::new();
    let mut st: Vec<Vec<u64>> = vec![Vec::new(); shapes.len()];
    for (i, &o) in out.iter().enumerate() {
        let d = o.max(0) as u64;
        if d == 1 {
            continue;
        }
        if let Some(ld) = dims.last_mut() {
            if st.iter().zip(&full).all(|(t, f)| t.last() == Some(&(f[i] as u64 * d))) {
                *ld *= d;
                for (t, f) in st.iter_mut().zip(&full) {
                    if let Some(l) = t.last_mut() {
                        *l = f[i] as u64;
                    }
                }
                continue;
            }
        }
        dims.push(d);
        for (t, f) in st.iter_mut().zip(&full) {
            t.push(f[i] as u64);
        }
    }
    Ok((dims, st))
}

/// `y = fold(op, operands)` with numpy broadcasting, every tensor of OpenCL type `t`.
/// `operands` pairs each tensor with the shape it broadcasts as (it must hold that many
/// elements); `op(acc, next)` is the C expression combining two values (`v` and `w`),
/// made a function of the kernel's prelude and applied left to right by [`bcast`].
fn nary(ctx: &ClCtx, operands: &[(&ClTensor, &[i64])], y: &ClTensor, t: &str, fp64: bool, op: &str) -> Res {
    if operands.is_empty() || operands.len() > MAX_OPERANDS {
        return Err(format!("a broadcast kernel takes 1 to {MAX_OPERANDS} operands, found {}", operands.len()));
    }
    let acc = if t == "half" || t == "bf16" { "float" } else { t };
    let prelude = format!("inline {acc} rxvm_fold({acc} v, {acc} w) {{ return {op}; }}\n");
    let expr = (1..operands.len()).fold("v0".to_string(), |e, j| format!("rxvm_fold({e}, v{j})"));
    let list: Vec<Operand> = operands.iter().map(|&(t_, shape)| Operand { t: t_, shape, ty: t }).collect();
    bcast(ctx, &list, y, t, fp64, &prelude, &expr)
}

/// One operand of [`bcast`]: the tensor, the shape it broadcasts as, and the OpenCL type
/// its elements load as (`half` loads as `float` through `vload_half`).
pub(super) struct Operand<'a> {
    pub(super) t: &'a ClTensor,
    pub(super) shape: &'a [i64],
    pub(super) ty: &'a str,
}

/// `y[i] = expr` over the broadcast of `operands` to `y`'s shape, where `expr` reads operand
/// `j`'s element as `v{j}`; `prelude` is OpenCL C placed before the kernel (helper
/// functions). `out_ty` is the output's OpenCL type (`half` stores through `vstore_half`).
pub(super) fn bcast(
    ctx: &ClCtx,
    operands: &[Operand],
    y: &ClTensor,
    out_ty: &str,
    fp64: bool,
    prelude: &str,
    expr: &str,
) -> Res {
    for (j, o) in operands.iter().enumerate() {
        if o.t.numel() != prod(o.shape) {
            return Err(format!(
                "operand {} holds {} elements, not the {} of shape {:?}",
                j + 1,
                o.t.numel(),
                prod(o.shape),
                o.shape
            ));
        }
    }
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let shapes: Vec<&[i64]> = operands.iter().map(|o| o.shape).collect();
    let (dims, strides) = layout(&y.shape, &shapes)?;
    if dims.len() > MAX_DIMS {
        return Err(format!("broadcasting over {} dimensions (at most {MAX_DIMS} are supported)", dims.len()));
    }
    let (k, r) = (operands.len(), dims.len());
    let mut src = String::from(if fp64 { FP64_PRAGMA } else { "" });
    // bf16 loads as float and stores rounded to nearest even (as half through vload_half).
    if out_ty == "bf16" || operands.iter().any(|o| o.ty == "bf16") {
        src.push_str(&narrow::defs(DType::BF16, false));
    }
    src.push_str(prelude);
    src.push_str("__kernel void k(");
    for (j, o) in operands.iter().enumerate() {
        let _ = write!(src, "__global const {}* a{j}, ulong o{j}, ", storage_of(o.ty));
    }
    let _ = write!(src, "__global {}* y, ulong yo, ulong n", storage_of(out_ty));
    for d in 0..r {
        let _ = write!(src, ", ulong d{d}");
    }
    for j in 0..k {
        for d in 0..r {
            let _ = write!(src, ", ulong s{j}_{d}");
        }
    }
    src.push_str(") {\n  ulong i = get_global_id(0);\n  if (i >= n) return;\n  ulong t = i;\n");
    for j in 0..k {
        let _ = writeln!(src, "  ulong p{j} = o{j};");
    }
    for d in (0..r).rev() {
        if d > 0 {
            let _ = write!(src, "  {{ ulong c = t % d{d}; t /= d{d};");
            for j in 0..k {
                let _ = write!(src, " p{j} += c * s{j}_{d};");
            }
            src.push_str(" }\n");
        } else {
            for j in 0..k {
                let _ = writeln!(src, "  p{j} += t * s{j}_0;");
            }
        }
    }
    for (j, o) in operands.iter().enumerate() {
        if o.ty == "half" {
            let _ = writeln!(src, "  float v{j} = vload_half(p{j}, a{j});");
        } else if o.ty == "bf16" {
            let _ = writeln!(src, "  float v{j} = {};", narrow::load(DType::BF16, &format!("a{j}[p{j}]")));
        } else {
            let _ = writeln!(src, "  {} v{j} = a{j}[p{j}];", o.ty);
        }
    }
    if out_ty == "half" {
        let _ = writeln!(src, "  vstore_half({expr}, yo + i, y);\n}}");
    } else if out_ty == "bf16" {
        let _ = writeln!(src, "  y[yo + i] = {};\n}}", narrow::store_default(DType::BF16, &format!("({expr})")));
    } else {
        let _ = writeln!(src, "  y[yo + i] = {expr};\n}}");
    }
    let mut args = Vec::with_capacity(2 * k + 3 + r + k * r);
    for o in operands {
        args.extend(o.t.args());
    }
    args.extend(y.args());
    args.push(KernelArg::U64(n));
    args.extend(u64s(&dims));
    for s in &strides {
        args.extend(u64s(s));
    }
    ctx.run(&src, &args, n as usize)
}

// ---------------------------------------------------------------------------------------
// Relu (kept from the original example).

fn relu(ctx: &ClCtx, ins: &[Option<ClTensor>], _: &[Option<TensorInfo>], _: &Attrs, outs: &[ClTensor]) -> Res {
    let x = ins.first().and_then(Option::as_ref).ok_or("input 1 is required")?;
    let y = outs.first().ok_or("output 1 is required")?;
    if matches!(x.dtype, DType::F16 | DType::BF16) {
        return unary_f32(ctx, &ins[..1], outs, "fmax(v, 0.0f)", Vec::new());
    }
    if x.dtype == DType::F64 {
        return unary_f64(ctx, &ins[..1], outs, "fmax(v, 0.0)", Vec::new());
    }
    if x.dtype != DType::F32 {
        return Err(format!("Relu supports f32, f16, bf16 and f64 tensors, found {}", x.dtype));
    }
    let t = cl_type(x.dtype);
    map_kernel(ctx, x, y, t, t, false, "fmax(v, 0.0f)", Vec::new())
}

// ---------------------------------------------------------------------------------------
// Binary arithmetic with broadcasting.

/// The unsigned OpenCL type of an integer dtype's width.
fn unsigned_type(d: DType) -> &'static str {
    raw_type(d)
}

/// The C expression of `v op w` for dtype `d`: floats (f16 loads as float) compute
/// directly; integers wrap (through their unsigned type, as C leaves signed overflow
/// undefined and promotes narrow types to int); integer division truncates, and by zero
/// gives 0 as the host's.
fn arith_expr(op: char, d: DType) -> String {
    if d.is_float() {
        return match op {
            '^' => "pow(v, w)".into(),
            _ => format!("v {op} w"),
        };
    }
    let (t, u) = (cl_type(d), unsigned_type(d));
    let signed = matches!(d, DType::I8 | DType::I16 | DType::I32 | DType::I64);
    match (op, signed, d.size() < 4) {
        ('/', true, true) => format!("(w == 0 ? ({t})0 : as_{t}(({u})((int)v / (int)w)))"),
        ('/', true, false) => format!("(w == 0 ? ({t})0 : (w == -1 ? as_{t}(({u})0 - as_{u}(v)) : v / w))"),
        ('/', false, _) => format!("(w == 0 ? ({t})0 : ({t})(v / w))"),
        (_, _, true) => format!("as_{t}(({u})((uint)as_{u}(v) {op} (uint)as_{u}(w)))"),
        _ => format!("as_{t}(as_{u}(v) {op} as_{u}(w))"),
    }
}

fn arith(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    infos: Infos,
    attrs: &Attrs,
    outs: &[ClTensor],
    op: char,
    allowed: &[DType],
) -> Res {
    let (a, b) = (input(ins, 0, "A")?, input(ins, 1, "B")?);
    check_dtype(a, 0, "A", allowed)?;
    if b.dtype != a.dtype {
        return Err(format!("inputs 1 and 2 must have the same dtype, found {} and {}", a.dtype, b.dtype));
    }
    need_fp64(ctx, a.dtype)?;
    let y = output(outs, 0)?;
    let bsh = legacy_b_shape(&a.shape, &b.shape, attrs)?;
    check_out(y, a.dtype, &broadcast(&a.shape, &bsh)?)?;
    if op == '/' && !a.dtype.is_float() && y.numel() > 0 {
        if let Some(v) = host_value(infos, 1) {
            if v.data.chunks_exact(v.dtype.size()).any(|e| e.iter().all(|&b| b == 0)) {
                return Err("integer division by zero (input 2 has a zero element)".into());
            }
        }
    }
    let expr = arith_expr(op, a.dtype);
    nary(ctx, &[(a, &a.shape), (b, &bsh)], y, cl_type(a.dtype), a.dtype == DType::F64, &expr)
}

fn add(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    arith(ctx, ins, infos, attrs, outs, '+', ARITH)
}

fn sub(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    arith(ctx, ins, infos, attrs, outs, '-', ARITH)
}

fn mul(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    arith(ctx, ins, infos, attrs, outs, '*', ARITH)
}

fn div(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    arith(ctx, ins, infos, attrs, outs, '/', ARITH)
}

/// Pow: f32 by f32 computes in float; other pairs (an exponent of another dtype) in double
/// where the device has fp64 (as the host, in f64), else in float, rounded to the base's
/// dtype (integers truncate and saturate).
fn pow(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let (a, b) = (input(ins, 0, "X")?, input(ins, 1, "Y")?);
    if a.dtype == DType::F32 && b.dtype == DType::F32 {
        return arith(ctx, ins, infos, attrs, outs, '^', &[DType::F32]);
    }
    check_dtype(a, 0, "X", POW_BASE)?;
    check_dtype(b, 1, "Y", NUMERIC)?;
    if a.dtype == DType::F64 || b.dtype == DType::F64 {
        need_fp64(ctx, DType::F64)?;
    }
    let y = output(outs, 0)?;
    let bsh = legacy_b_shape(&a.shape, &b.shape, attrs)?;
    check_out(y, a.dtype, &broadcast(&a.shape, &bsh)?)?;
    let c = if ctx.has_fp64() { "double" } else { "float" };
    let p = format!("pow(({c})v0, ({c})v1)");
    let expr = match a.dtype {
        DType::F32 | DType::F16 => format!("(float){p}"),
        DType::F64 => p,
        d => format!("convert_{}_sat_rtz({p})", cl_type(d)),
    };
    let (ta, tb) = (cl_type(a.dtype), cl_type(b.dtype));
    let ops = [Operand { t: a, shape: &a.shape, ty: ta }, Operand { t: b, shape: &bsh, ty: tb }];
    bcast(ctx, &ops, y, ta, ctx.has_fp64(), "", &expr)
}

// ---------------------------------------------------------------------------------------
// Variadic Max, Min, Sum.

fn variadic(ins: &[Option<ClTensor>], outs: &[ClTensor], ctx: &ClCtx, op: &str) -> Res {
    let x = input(ins, 0, "data_0")?;
    check_dtype(x, 0, "data_0", NUMERIC)?;
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
    let float = x.dtype.is_float();
    let expr = match (op, x.dtype) {
        ("max", _) if float => f32_fold(Operator::Max).unwrap_or_default(),
        ("min", _) if float => f32_fold(Operator::Min).unwrap_or_default(),
        ("max", _) => "max(v, w)".to_string(),
        ("min", _) => "min(v, w)".to_string(),
        (_, d) => arith_expr('+', d),
    };
    let t = cl_type(x.dtype);
    // The first chunk writes y; later ones fold y itself with the next inputs.
    let first: Vec<(&ClTensor, &[i64])> = list.iter().take(MAX_OPERANDS).map(|t| (*t, &t.shape[..])).collect();
    let fp64 = x.dtype == DType::F64;
    nary(ctx, &first, y, t, fp64, &expr)?;
    for chunk in list[first.len()..].chunks(MAX_OPERANDS - 1) {
        let mut ops: Vec<(&ClTensor, &[i64])> = vec![(y, &y.shape[..])];
        ops.extend(chunk.iter().map(|t| (*t, &t.shape[..])));
        nary(ctx, &ops, y, t, fp64, &expr)?;
    }
    Ok(())
}

fn max(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    variadic(ins, outs, ctx, "max")
}

fn min(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    variadic(ins, outs, ctx, "min")
}

fn sum(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    variadic(ins, outs, ctx, "sum")
}

// ---------------------------------------------------------------------------------------
// Unary operators.

/// A unary f32 operator `y = expr(v)` (also the buffer kernel of `super::activation_cl`);
/// bf16 computes it in float.
pub(super) fn unary_f32(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    outs: &[ClTensor],
    expr: &str,
    params: Vec<(&str, KernelArg)>,
) -> Res {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", F32_BF16)?;
    let y = output(outs, 0)?;
    check_out(y, x.dtype, &x.shape)?;
    // bf16 and f16 compute in float and round once.
    let t = match x.dtype {
        DType::BF16 => "bf16",
        DType::F16 => "half",
        _ => "float",
    };
    map_kernel(ctx, x, y, t, t, false, expr, params)
}

/// A unary f64 operator `y = expr(v)` in double (the activation family's f64 maps): `expr`
/// and `params` are in double; the device needs fp64.
pub(super) fn unary_f64(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    outs: &[ClTensor],
    expr: &str,
    params: Vec<(&str, KernelArg)>,
) -> Res {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", &[DType::F64])?;
    need_fp64(ctx, x.dtype)?;
    let y = output(outs, 0)?;
    check_out(y, x.dtype, &x.shape)?;
    map_kernel(ctx, x, y, "double", "double", true, expr, params)
}

/// The double form of an f32 map (`f32_map` here or in `super::activation_cl`): float literals (`0.5f`) lose their suffix (the
/// double overloads are then chosen), `float` parameters become `double` (their values are
/// f32 attributes, exact in double, as the host's f64 kernels take them), and Gelu's tanh
/// saturates where tanh is ±1 in double (|u| > 20).
pub(super) fn double_map(expr: &str, params: Params) -> Result<(String, Params), String> {
    let expr = expr.replace("> 10.0f", "> 20.0f");
    let mut out = String::with_capacity(expr.len());
    let mut prev = ' ';
    for c in expr.chars() {
        if !(c == 'f' && (prev.is_ascii_digit() || prev == '.')) {
            out.push(c);
        }
        prev = c;
    }
    let mut doubles = Vec::with_capacity(params.len());
    for (decl, arg) in params {
        let (Some(name), KernelArg::Bytes(b, 4)) = (decl.strip_prefix("float "), &arg) else {
            return Err(format!("parameter `{decl}` has no double form"));
        };
        let v = f32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64;
        let decl: &'static str = match name {
            "alpha" => "double alpha",
            "beta" => "double beta",
            "gamma" => "double gamma",
            _ => return Err(format!("parameter `{decl}` has no double form")),
        };
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&v.to_ne_bytes());
        doubles.push((decl, KernelArg::Bytes(bytes, 8)));
    }
    Ok((out, doubles))
}

/// The f32 expression `y = expr(v)` of a unary operator (and its scalar parameters), shared
/// by the buffer kernels here and the texture kernels (`super::texture_cl`); `None` for
/// operators that are not f32 maps. Scalar inputs (Clip's bounds, Dropout's mode) are read
/// from `infos`.
pub(super) fn f32_map(op: Operator, infos: Infos, attrs: &Attrs) -> Result<Option<(&'static str, Params)>, String> {
    let alpha = |default: f64| ("float alpha", f32_arg(attrs.float("alpha", default) as f32));
    Ok(Some(match op {
        Operator::Relu => ("fmax(v, 0.0f)", vec![]),
        Operator::Sigmoid => ("v >= 0.0f ? 1.0f / (1.0f + exp(-v)) : exp(v) / (1.0f + exp(v))", vec![]),
        Operator::Tanh => ("tanh(v)", vec![]),
        Operator::Exp => ("exp(v)", vec![]),
        Operator::Sqrt => ("sqrt(v)", vec![]),
        Operator::Softplus => ("fmax(v, 0.0f) + log1p(exp(-fabs(v)))", vec![]),
        Operator::Softsign => ("v / (1.0f + fabs(v))", vec![]),
        Operator::Neg => ("-v", vec![]),
        Operator::Abs => ("fabs(v)", vec![]),
        Operator::Identity => ("v", vec![]),
        Operator::Dropout => {
            if host_value(infos, 2).is_some_and(|t| t.data.iter().any(|&b| b != 0)) {
                return Err("training_mode is true, but only inference is supported (Dropout copies its input)".into());
            }
            ("v", vec![])
        }
        Operator::LeakyRelu => ("v > 0.0f ? v : v * alpha", vec![alpha(0.01)]),
        Operator::Elu => ("v > 0.0f ? v : alpha * expm1(v)", vec![alpha(1.0)]),
        Operator::Selu => {
            let gamma = attrs.float("gamma", 1.050_701_f32 as f64) as f32;
            (
                "v > 0.0f ? gamma * v : gamma * (alpha * exp(v) - alpha)",
                vec![alpha(1.673_263_2_f32 as f64), ("float gamma", f32_arg(gamma))],
            )
        }
        Operator::Clip => {
            let [lo, hi] = clip_bounds(infos, attrs)?;
            (
                "(v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v)",
                vec![("float lo", f32_arg(lo)), ("float hi", f32_arg(hi))],
            )
        }
        _ => return Ok(None),
    }))
}

/// The f32 fold `v = fold(v, w)` of an n-ary elementwise operator (shared with the texture
/// kernels); `None` for other operators.
pub(super) fn f32_fold(op: Operator) -> Option<String> {
    Some(match op {
        Operator::Add => arith_expr('+', DType::F32),
        Operator::Sub => arith_expr('-', DType::F32),
        Operator::Mul => arith_expr('*', DType::F32),
        Operator::Div => arith_expr('/', DType::F32),
        Operator::Pow => arith_expr('^', DType::F32),
        Operator::Sum => arith_expr('+', DType::F32),
        Operator::Max => "(v > w || isnan(v)) ? v : w".into(),
        Operator::Min => "(v < w || isnan(v)) ? v : w".into(),
        _ => return None,
    })
}

/// Clip's `[min, max]`: from inputs 2 and 3 (scalars whose values are known) or the
/// attributes (opset < 11), else unbounded.
fn clip_bounds(infos: Infos, attrs: &Attrs) -> Result<[f32; 2], String> {
    let mut bounds = [f32::NEG_INFINITY, f32::INFINITY];
    for (k, (i, name)) in [(1, "min"), (2, "max")].into_iter().enumerate() {
        match infos.get(i).and_then(Option::as_ref) {
            Some(t) => {
                if attrs.get(name).is_some() {
                    return Err(format!("`{name}` is given both as an attribute and as input {}", i + 1));
                }
                if t.dtype != DType::F32 {
                    return Err(format!("input {} ({name}) must be f32 on OpenCL, found {}", i + 1, t.dtype));
                }
                let v =
                    t.value.ok_or_else(|| format!("input {} ({name}) must be a scalar whose value is known", i + 1))?;
                if v.dtype != DType::F32 || v.data.len() != 4 {
                    return Err(format!(
                        "input {} ({name}) must be a scalar (one element), found shape {:?}",
                        i + 1,
                        v.shape
                    ));
                }
                bounds[k] = f32::from_le_bytes([v.data[0], v.data[1], v.data[2], v.data[3]]);
            }
            None => bounds[k] = attrs.float(name, bounds[k] as f64) as f32,
        }
    }
    Ok(bounds)
}

/// A buffer kernel for an f32 map of [`f32_map`]; the parameterless float maps also take
/// f16 (computed in float) and f64, LeakyRelu, Elu and Selu f64 (in double), and Clip
/// every numeric dtype.
fn mapped(op: Operator, ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "X")?;
    if x.dtype != DType::F32 {
        let y = output(outs, 0)?;
        check_out(y, x.dtype, &x.shape)?;
        if op == Operator::Clip {
            check_dtype(x, 0, "input", NUMERIC)?;
            return map_typed(ctx, x, y, &clip_expr(infos, attrs, x.dtype)?);
        }
        let float_only = matches!(
            op,
            Operator::Sigmoid
                | Operator::Tanh
                | Operator::Exp
                | Operator::Sqrt
                | Operator::Softplus
                | Operator::Softsign
        );
        if float_only && matches!(x.dtype, DType::F16 | DType::F64) {
            let (expr, _) = f32_map(op, infos, attrs)?.ok_or_else(|| format!("{} is not an f32 map", op.name()))?;
            // `1.0f` literals would make double overloads ambiguous.
            let expr = if x.dtype == DType::F64 { expr.replace(".0f", ".0") } else { expr.to_string() };
            return map_typed(ctx, x, y, &expr);
        }
    }
    let (expr, params) = f32_map(op, infos, attrs)?.ok_or_else(|| format!("{} is not an f32 map", op.name()))?;
    if x.dtype == DType::F64 && matches!(op, Operator::LeakyRelu | Operator::Elu | Operator::Selu) {
        let (expr, params) = double_map(expr, params)?;
        return unary_f64(ctx, &ins[..1], outs, &expr, params);
    }
    unary_f32(ctx, &ins[..1.min(ins.len())], outs, expr, params)
}

/// Clip's expression for a dtype other than f32: the bounds (inputs of `d` whose values
/// are known, or the opset-6 float attributes) as literals.
fn clip_expr(infos: Infos, attrs: &Attrs, d: DType) -> Result<String, String> {
    let literal = |i: usize, name: &str| -> Result<Option<String>, String> {
        let v = match infos.get(i).and_then(Option::as_ref) {
            Some(t) => {
                let v =
                    t.value.ok_or_else(|| format!("input {} ({name}) must be a scalar whose value is known", i + 1))?;
                if v.dtype != d || v.data.len() != d.size() {
                    return Err(format!("input {} ({name}) must be a {d} scalar", i + 1));
                }
                numeric!(d, T => values::<T>(v).first().map(|&x| if d.is_float() { Err(x.to_f64()) } else { Ok(x.to_i64()) }))
            }
            None if attrs.get(name).is_some() => Some(Err(attrs.float(name, 0.0))),
            None => None,
        };
        let t = cl_type(d);
        Ok(v.map(|v| match v {
            Ok(i64::MIN) => format!("(({t})(-9223372036854775807L - 1))"),
            Ok(i) => format!("(({t}){i}L)"),
            Err(f) if f.is_nan() => "NAN".to_string(),
            Err(f) if f.is_infinite() => if f > 0.0 { "INFINITY" } else { "-INFINITY" }.to_string(),
            Err(f) if d == DType::F64 => format!("({f:?})"),
            Err(f) if d.is_float() => format!("({:?}f)", f as f32),
            Err(f) => format!("(({t}){})", f.trunc() as i64),
        }))
    };
    let (lo, hi) = (literal(1, "min")?, literal(2, "max")?);
    let mut e = "v".to_string();
    if let Some(lo) = lo {
        e = format!("(v < {lo} ? {lo} : v)");
    }
    if let Some(hi) = hi {
        e = format!("({e} > {hi} ? {hi} : {e})");
    }
    Ok(e)
}

macro_rules! mapped {
    ($($name:ident $op:ident),*) => {$(
        fn $name(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
            mapped(Operator::$op, ctx, ins, infos, attrs, outs)
        }
    )*};
}

mapped!(sigmoid Sigmoid, tanh Tanh, exp Exp, sqrt Sqrt, softplus Softplus, softsign Softsign,
    leaky_relu LeakyRelu, elu Elu, selu Selu, clip Clip);

/// `y = expr(v)` elementwise on `x`'s own dtype (`half` computes in float), through a
/// one-operand [`bcast`].
fn map_typed(ctx: &ClCtx, x: &ClTensor, y: &ClTensor, expr: &str) -> Res {
    need_fp64(ctx, x.dtype)?;
    let t = cl_type(x.dtype);
    let acc = if t == "half" { "float" } else { t };
    let prelude = format!("inline {acc} rxvm_map({acc} v) {{ return {expr}; }}\n");
    let ops = [Operand { t: x, shape: &x.shape, ty: t }];
    bcast(ctx, &ops, y, t, x.dtype == DType::F64, &prelude, "rxvm_map(v0)")
}

fn signed_unary(ctx: &ClCtx, ins: &[Option<ClTensor>], outs: &[ClTensor], neg: bool) -> Res {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", if neg { SIGNED } else { NUMERIC })?;
    let y = output(outs, 0)?;
    check_out(y, x.dtype, &x.shape)?;
    let (t, u) = (cl_type(x.dtype), unsigned_type(x.dtype));
    let signed = matches!(x.dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64);
    let expr = match (x.dtype.is_float(), neg) {
        (true, true) => "-v".to_string(),
        (true, false) => "fabs(v)".to_string(),
        (false, true) => format!("as_{t}(({u})(({u})0 - as_{u}(v)))"),
        (false, false) if signed => format!("as_{t}(({u})abs(v))"),
        (false, false) => "v".to_string(),
    };
    map_typed(ctx, x, y, &expr)
}

fn neg(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    signed_unary(ctx, ins, outs, true)
}

fn abs(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    signed_unary(ctx, ins, outs, false)
}

// ---------------------------------------------------------------------------------------
// PRelu.

fn prelu(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let (x, s) = (input(ins, 0, "X")?, input(ins, 1, "slope")?);
    check_dtype(x, 0, "X", &[DType::F32])?;
    check_dtype(s, 1, "slope", &[DType::F32])?;
    let ssh = crate::ir::operators::elementwise::prelu_slope_shape(&x.shape, &s.shape, attrs)?;
    let y = output(outs, 0)?;
    check_out(y, x.dtype, &x.shape)?;
    nary(ctx, &[(x, &x.shape), (s, &ssh)], y, "float", false, "v > 0.0f ? v : v * w")
}

// ---------------------------------------------------------------------------------------
// Dropout and Identity.

fn dropout(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "data")?;
    check_dtype(x, 0, "data", &[DType::F32, DType::F16, DType::F64])?;
    let y = output(outs, 0)?;
    check_out(y, x.dtype, &x.shape)?;
    let t = ins.get(2).and_then(Option::as_ref);
    let known_off = match host_value(infos, 2) {
        Some(v) => v.data.iter().all(|&b| b == 0),
        None => t.is_none(),
    };
    if !known_off {
        return dropout_training(ctx, ins, attrs, outs);
    }
    copy(ctx, x, y)?;
    if let Some(mask) = outs.get(1) {
        check_out(mask, DType::Bool, &x.shape)?;
        let n = mask.numel();
        if n > 0 {
            let src = "__kernel void k(__global uchar* y, ulong yo, ulong n) {\n  ulong i = get_global_id(0);\n  \
                       if (i < n) y[yo + i] = 1;\n}\n";
            let [mm, mo] = mask.args();
            ctx.run(src, &[mm, mo, KernelArg::U64(n)], n as usize)?;
        }
    }
    Ok(())
}

/// Dropout whose training_mode is true or not known: one work-item walks the tensor with
/// numpy's MT19937 stream (see the host's `Mt19937`), deciding inference or training from
/// the device's training_mode and ratio. The draws compare as 53-bit integers with the
/// ratio scaled by 2^53, so no fp64 is needed for f32 and f16.
fn dropout_training(ctx: &ClCtx, ins: &[Option<ClTensor>], attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "data")?;
    let y = output(outs, 0)?;
    let t = input(ins, 2, "training_mode")?;
    let r = ins.get(1).and_then(Option::as_ref);
    if let Some(r) = r {
        check_dtype(r, 1, "ratio", &[DType::F32, DType::F16, DType::F64])?;
    }
    need_fp64(ctx, x.dtype)?;
    let rd = r.map_or(DType::F32, |r| r.dtype);
    need_fp64(ctx, rd)?;
    let n = y.numel();
    let mask = outs.get(1);
    if let Some(m) = mask {
        check_out(m, DType::Bool, &x.shape)?;
    }
    // The ratio and 1 / (1 - ratio) in the ratio's dtype (f32 for the attribute).
    let (rt, ratio, scale) = match (r, rd) {
        (None, _) => ("float", "attr".to_string(), "1.0f / (1.0f - ratio)".to_string()),
        (Some(_), DType::F16) => ("float", "vload_half(ro, r)".to_string(), "rh(1.0f / rh(1.0f - ratio))".to_string()),
        (Some(_), DType::F64) => ("double", "r[ro]".to_string(), "1.0 / (1.0 - ratio)".to_string()),
        (Some(_), _) => ("float", "r[ro]".to_string(), "1.0f / (1.0f - ratio)".to_string()),
    };
    let (xt, wt, ld, st) = match x.dtype {
        DType::F16 => ("half", "float", "vload_half(xo + i, x)", "vstore_half(v, yo + i, y);"),
        DType::F64 => ("double", "double", "x[xo + i]", "y[yo + i] = v;"),
        _ => ("float", "float", "x[xo + i]", "y[yo + i] = v;"),
    };
    let src = format!(
        "{}#pragma OPENCL FP_CONTRACT OFF\n\
         float rh(float v) {{ ushort h; vstore_half_rte(v, 0, (__private half*)&h); return vload_half(0, (__private const half*)&h); }}\n\
         __kernel void k(__global const {xt}* x, ulong xo, __global {xt}* y, ulong yo, __global uchar* m, ulong mo, \
         int has_mask, __global const uchar* t, ulong to, __global const {rs}* r, ulong ro, float attr, uint seed, \
         ulong n) {{\n  if (get_global_id(0) != 0) return;\n  \
         {rt} ratio = {ratio};\n  \
         if (!t[to] || ratio == 0) {{\n    for (ulong i = 0; i < n; i++) {{ {wt} v = {ld}; {st} if (has_mask) m[mo + i] = 1; }}\n    \
         return;\n  }}\n  \
         {rt} scale = {scale};\n  \
         ulong thr = (ulong)ceil(ratio * ({rt})9007199254740992.0);\n  \
         uint mt[624];\n  mt[0] = seed;\n  \
         for (uint i = 1; i < 624; i++) mt[i] = 1812433253u * (mt[i - 1] ^ (mt[i - 1] >> 30)) + i;\n  \
         uint pos = 624;\n  \
         for (ulong i = 0; i < n; i++) {{\n    uint w[2];\n    \
           for (int h = 0; h < 2; h++) {{\n      \
             if (pos >= 624) {{\n        \
               for (uint j = 0; j < 624; j++) {{\n          \
                 uint q = (mt[j] & 0x80000000u) | (mt[(j + 1) % 624] & 0x7fffffffu);\n          \
                 uint v = mt[(j + 397) % 624] ^ (q >> 1);\n          \
                 if (q & 1u) v ^= 0x9908b0dfu;\n          mt[j] = v;\n        }}\n        pos = 0;\n      }}\n      \
             uint e = mt[pos++];\n      e ^= e >> 11;\n      e ^= (e << 7) & 0x9d2c5680u;\n      \
             e ^= (e << 15) & 0xefc60000u;\n      w[h] = e ^ (e >> 18);\n    }}\n    \
           ulong u = ((ulong)(w[0] >> 5) << 26) + (ulong)(w[1] >> 6);\n    \
           int keep = u >= thr;\n    \
           {wt} v = ({wt})(keep ? 1.0f : 0.0f) * {ld} * ({wt})scale;\n    {st}\n    \
           if (has_mask) m[mo + i] = (uchar)keep;\n  }}\n}}\n",
        if x.dtype == DType::F64 || rd == DType::F64 { FP64_PRAGMA } else { "" },
        rs = super::cl::storage_type(rd),
    );
    let mut args = Vec::with_capacity(16);
    args.extend(x.args());
    args.extend(y.args());
    args.extend(mask.unwrap_or(t).args());
    args.push(KernelArg::I32(mask.is_some() as i32));
    args.extend(t.args());
    args.extend(r.unwrap_or(t).args());
    args.push(f32_arg(attrs.float("ratio", 0.5) as f32));
    args.push(KernelArg::I32(super::elementwise::dropout_seed(attrs) as i32));
    args.push(KernelArg::U64(n));
    ctx.run(&src, &args, 1)
}

fn identity(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "input")?;
    let y = output(outs, 0)?;
    check_out(y, x.dtype, &x.shape)?;
    copy(ctx, x, y)
}

// ---------------------------------------------------------------------------------------
// Softmax and LogSoftmax.

/// `(outer, n, inner)` as the host's `softmax_dims`.
fn softmax_dims(shape: &[i64], attrs: &Attrs) -> Result<(u64, u64, u64), String> {
    let legacy = attrs.int("onnx_opset", 13) < 13;
    let axis = attrs.int("axis", if legacy { 1 } else { -1 });
    let ax = norm_axis(axis, shape.len())?;
    Ok(if legacy {
        (prod(&shape[..ax]), prod(&shape[ax..]), 1)
    } else {
        (prod(&shape[..ax]), prod(&shape[ax..ax + 1]), prod(&shape[ax + 1..]))
    })
}

fn softmax_cl(ctx: &ClCtx, ins: &[Option<ClTensor>], attrs: &Attrs, outs: &[ClTensor], log: bool) -> Res {
    let x = input(ins, 0, "input")?;
    check_dtype(x, 0, "input", &[DType::F32, DType::F16, DType::BF16, DType::F64])?;
    let y = output(outs, 0)?;
    check_out(y, x.dtype, &x.shape)?;
    let (outer, n, inner) = softmax_dims(&x.shape, attrs)?;
    if x.numel() == 0 {
        return Ok(());
    }
    need_fp64(ctx, x.dtype)?;
    let src = if x.dtype == DType::F32 {
        let acc = Acc::of(ctx);
        let a = acc.ty;
        let body = if log {
            format!("  {a} ls = log(s);\n  for (ulong j = 0; j < n; j++) y[yb + j * inner] = (float)(({a})(x[xb + j * inner] - m) - ls);\n")
        } else {
            format!(
                "  for (ulong j = 0; j < n; j++) y[yb + j * inner] = (float)(({a})exp(x[xb + j * inner] - m) / s);\n"
            )
        };
        format!(
            "{}__kernel void k(__global const float* x, ulong xo, __global float* y, ulong yo, ulong rows, ulong n, \
             ulong inner) {{\n  ulong r = get_global_id(0);\n  if (r >= rows) return;\n  \
             ulong base = (r / inner) * n * inner + r % inner;\n  ulong xb = xo + base, yb = yo + base;\n  \
             float m = -INFINITY;\n  for (ulong j = 0; j < n; j++) m = fmax(m, x[xb + j * inner]);\n  \
             {a} s = 0;\n  for (ulong j = 0; j < n; j++) s += ({a})exp(x[xb + j * inner] - m);\n{body}}}\n",
            acc.pragma()
        )
    } else {
        // f64 computes in double. f16 and bf16 round every step to the dtype, as the host
        // (`softmax_narrow`): f16 rounds by a store to and a load from the output, bf16 by
        // its store and load functions.
        let (t, a) = (super::cl::storage_type(x.dtype), if x.dtype == DType::F64 { "double" } else { "float" });
        let round = match x.dtype {
            DType::F16 => {
                "float rnd(float v, __global half* y, ulong i) { vstore_half(v, i, y); return vload_half(i, y); }\n\
                 float ldx(__global const half* x, ulong i) { return vload_half(i, x); }\n\
                 void sty(float v, __global half* y, ulong i) { vstore_half(v, i, y); }\n"
            }
            DType::BF16 => {
                "float rnd(float v, __global ushort* y, ulong i) { return ld_bf16(st_bf16(v, 0, 0)); }\n\
                 float ldx(__global const ushort* x, ulong i) { return ld_bf16(x[i]); }\n\
                 void sty(float v, __global ushort* y, ulong i) { y[i] = st_bf16(v, 0, 0); }\n"
            }
            _ => {
                "double rnd(double v, __global double* y, ulong i) { return v; }\n\
                 double ldx(__global const double* x, ulong i) { return x[i]; }\n\
                 void sty(double v, __global double* y, ulong i) { y[i] = v; }\n"
            }
        };
        let out = if log { "rnd(log(rnd(e / s, y, q)), y, q)" } else { "rnd(e / s, y, q)" };
        format!(
            "{}{}{round}__kernel void k(__global const {t}* x, ulong xo, __global {t}* y, ulong yo, ulong rows, \
             ulong n, ulong inner) {{\n  ulong r = get_global_id(0);\n  if (r >= rows) return;\n  \
             ulong base = (r / inner) * n * inner + r % inner;\n  ulong xb = xo + base, yb = yo + base;\n  \
             {a} m = -INFINITY;\n  for (ulong j = 0; j < n; j++) m = fmax(m, ldx(x, xb + j * inner));\n  \
             {a} s = 0;\n  for (ulong j = 0; j < n; j++) {{\n    ulong q = yb + j * inner;\n    \
             {a} e = rnd(exp(rnd(ldx(x, xb + j * inner) - m, y, q)), y, q);\n    sty(e, y, q);\n    s += e;\n  }}\n  \
             {a} e0 = ldx(y, yb);\n  s = rnd(s, y, yb);\n  sty(e0, y, yb);\n  \
             for (ulong j = 0; j < n; j++) {{\n    ulong q = yb + j * inner;\n    {a} e = ldx(y, q);\n    \
             sty({out}, y, q);\n  }}\n}}\n",
            super::cl::pragmas(x.dtype),
            narrow::defs(x.dtype, false),
        )
    };
    let rows = outer * inner;
    let [xm, xo] = x.args();
    let [ym, yo] = y.args();
    let args = [xm, xo, ym, yo, KernelArg::U64(rows), KernelArg::U64(n), KernelArg::U64(inner)];
    ctx.run(&src, &args, rows as usize)
}

fn softmax(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    softmax_cl(ctx, ins, attrs, outs, false)
}

fn log_softmax(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    softmax_cl(ctx, ins, attrs, outs, true)
}

// ---------------------------------------------------------------------------------------
// ReduceMean and ReduceSum.

fn reduce_cl(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    infos: Infos,
    attrs: &Attrs,
    outs: &[ClTensor],
    op: Operator,
) -> Res {
    let r = reduction(op).ok_or_else(|| format!("{} is not a reduction", op.name()))?;
    let x = input(ins, 0, "data")?;
    check_dtype(x, 0, "data", r.dtypes())?;
    let y = output(outs, 0)?;
    let keep = attrs.int("keepdims", 1) != 0;
    let Some(red) = crate::ir::operators::elementwise::reduce_axes(infos, attrs, x.shape.len())? else {
        check_out(y, x.dtype, &x.shape)?;
        return copy(ctx, x, y);
    };
    let want: Vec<i64> = x
        .shape
        .iter()
        .zip(&red)
        .filter_map(|(&d, &r)| match (r, keep) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    check_out(y, x.dtype, &want)?;
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    // Group adjacent dimensions of the same kind (dropping units), with x strides.
    let mut groups: Vec<(u64, bool)> = Vec::new();
    for (&d, &r) in x.shape.iter().zip(&red) {
        let d = d.max(0) as u64;
        if d == 1 {
            continue;
        }
        match groups.last_mut() {
            Some((s, k)) if *k == r => *s *= d,
            _ => groups.push((d, r)),
        }
    }
    let mut strides = vec![0u64; groups.len()];
    let mut s = 1u64;
    for (i, &(d, _)) in groups.iter().enumerate().rev() {
        strides[i] = s;
        s = s.saturating_mul(d);
    }
    let kept: Vec<(u64, u64)> = groups.iter().zip(&strides).filter(|(g, _)| !g.1).map(|(g, &s)| (g.0, s)).collect();
    let reduced: Vec<(u64, u64)> = groups.iter().zip(&strides).filter(|(g, _)| g.1).map(|(g, &s)| (g.0, s)).collect();
    if kept.len() + reduced.len() > 2 * MAX_DIMS {
        return Err(format!("reducing a tensor of rank {} is not supported on OpenCL", x.shape.len()));
    }
    let count: u64 = x.shape.iter().zip(&red).filter(|(_, &r)| r).map(|(&d, _)| d.max(0) as u64).product();
    let t = cl_type(x.dtype);
    let acc = Acc::of(ctx);
    // The accumulator's type, its start, one step `s = f(s, v)` and the result from `s`.
    need_fp64(ctx, x.dtype)?;
    let half = x.dtype == DType::F16;
    // The accumulator's type, its start, one step `s = f(s, v)` and the result from `s`.
    let (a, start, step, fin, pragma) = if x.dtype.is_float() {
        let (a, pragma) = if x.dtype == DType::F64 { ("double", FP64_PRAGMA) } else { (acc.ty, acc.pragma()) };
        // The result's type (f16 stores a float through vstore_half).
        let o = if half { "float" } else { t };
        let (start, step, fin) = match r {
            Reduction::Mean => ("0", format!("s += ({a})v;"), format!("({o})(s / cnt)")),
            Reduction::Sum => ("0", format!("s += ({a})v;"), format!("({o})s")),
            Reduction::Max => {
                ("-INFINITY", format!("s = (isnan(s) || isnan(v)) ? NAN : fmax(s, ({a})v);"), format!("({o})s"))
            }
            Reduction::Min => {
                ("INFINITY", format!("s = (isnan(s) || isnan(v)) ? NAN : fmin(s, ({a})v);"), format!("({o})s"))
            }
            Reduction::Prod => ("1", format!("s *= ({a})v;"), format!("({o})s")),
            Reduction::L1 => ("0", format!("s += fabs(({a})v);"), format!("({o})s")),
            Reduction::L2 => ("0", format!("s += ({a})v * ({a})v;"), format!("({o})sqrt(s)")),
            Reduction::SumSquare => ("0", format!("s += ({a})v * ({a})v;"), format!("({o})s")),
            Reduction::LogSum => ("0", format!("s += ({a})v;"), format!("({o})log(s)")),
            // A first pass finds the maximum m (below); this one sums exp(v - m).
            Reduction::LogSumExp => (
                "0",
                format!("if (!isinf(m)) s += exp(({a})v - m);"),
                format!("({o})((isinf(m) || isnan(m)) ? m : m + log(s))"),
            ),
        };
        (a, start, step, fin, pragma)
    } else if x.dtype == DType::Bool {
        // Max is any, Min is all.
        let (start, step) = int_step(r, "(long)(v != 0)", "0", "1")?;
        ("long", start, step, "(uchar)(s != 0)".to_string(), "")
    } else {
        // Integers wrap in a ulong (the low bits are the element); Max and Min compare
        // signed, which holds every value of the widths up to 32 bits and i64.
        let (min, max) = match x.dtype {
            DType::I8 => ("CHAR_MIN", "CHAR_MAX"),
            DType::I16 => ("SHRT_MIN", "SHRT_MAX"),
            DType::I32 => ("INT_MIN", "INT_MAX"),
            DType::U8 => ("0", "UCHAR_MAX"),
            DType::U16 => ("0", "USHRT_MAX"),
            DType::U32 => ("0", "UINT_MAX"),
            DType::I64 => ("LONG_MIN", "LONG_MAX"),
            d => return Err(format!("{} does not reduce {d} tensors on OpenCL", op.name())),
        };
        let (start, step) = int_step(r, "(long)v", min, max)?;
        let fin = if x.dtype == DType::I64 {
            "s".to_string()
        } else {
            format!("as_{t}(({})(ulong)s)", unsigned_type(x.dtype))
        };
        ("long", start, step, fin, "")
    };
    let load = |idx: &str| if half { format!("float v = vload_half({idx}, x);") } else { format!("{t} v = x[{idx}];") };
    let mut src =
        format!("{pragma}__kernel void k(__global const {t}* x, ulong xo, __global {t}* y, ulong yo, ulong n");
    for i in 0..kept.len() {
        let _ = write!(src, ", ulong kd{i}, ulong ks{i}");
    }
    for i in 0..reduced.len() {
        let _ = write!(src, ", ulong rd{i}, ulong rs{i}");
    }
    let _ =
        write!(src, ", ulong cntu) {{\n  ulong i = get_global_id(0);\n  if (i >= n) return;\n  ulong t = i, p = xo;\n");
    for i in (0..kept.len()).rev() {
        let _ = writeln!(src, "  {{ ulong c = t % kd{i}; t /= kd{i}; p += c * ks{i}; }}");
    }
    let mut idx = String::from("p");
    let mut loops = String::new();
    for i in 0..reduced.len() {
        let _ = writeln!(loops, "  for (ulong r{i} = 0; r{i} < rd{i}; r{i}++)");
        let _ = write!(idx, " + r{i} * rs{i}");
    }
    if r == Reduction::LogSumExp {
        let _ = writeln!(src, "  {a} m = -INFINITY;");
        let _ = writeln!(src, "{loops}  {{ {} m = (isnan(m) || isnan(v)) ? NAN : fmax(m, ({a})v); }}", load(&idx));
    }
    let _ = writeln!(src, "  {a} s = {start};");
    let _ = writeln!(src, "{loops}  {{ {} {step} }}", load(&idx));
    if r == Reduction::Mean {
        let _ = writeln!(src, "  {a} cnt = ({a})cntu;");
    }
    if half {
        let _ = write!(src, "  vstore_half({fin}, yo + i, y);\n}}\n");
    } else {
        let _ = write!(src, "  y[yo + i] = {fin};\n}}\n");
    }
    let [xm, xo] = x.args();
    let [ym, yo] = y.args();
    let mut args = vec![xm, xo, ym, yo, KernelArg::U64(n)];
    for &(d, s) in kept.iter().chain(&reduced) {
        args.push(KernelArg::U64(d));
        args.push(KernelArg::U64(s));
    }
    args.push(KernelArg::U64(count));
    ctx.run(&src, &args, n as usize)
}

/// The start and step of an integer reduction, in wrapping `long` arithmetic (`ulong` for
/// the sums and products, whose overflow C leaves undefined in `long`); `v` as `long` is
/// `val`, the element type's bounds `min` and `max`.
fn int_step(r: Reduction, val: &str, min: &'static str, max: &'static str) -> Result<(&'static str, String), String> {
    Ok(match r {
        Reduction::Sum => ("0", format!("s = (long)((ulong)s + (ulong){val});")),
        Reduction::Max => (min, format!("s = max(s, {val});")),
        Reduction::Min => (max, format!("s = min(s, {val});")),
        Reduction::Prod => ("1", format!("s = (long)((ulong)s * (ulong){val});")),
        Reduction::L1 => {
            ("0", format!("s = (long)((ulong)s + (ulong)({val} < 0 ? 0ul - (ulong){val} : (ulong){val}));"))
        }
        Reduction::SumSquare => ("0", format!("s = (long)((ulong)s + (ulong){val} * (ulong){val});")),
        other => return Err(format!("{other:?} computes in f32 only")),
    })
}

/// The Reduce operators' OpenCL kernels.
macro_rules! reduce_kernels {
    ($($name:ident $op:ident),*) => {$(
        fn $name(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
            reduce_cl(ctx, ins, infos, attrs, outs, Operator::$op)
        }
    )*};
}

reduce_kernels!(reduce_mean ReduceMean, reduce_sum ReduceSum, reduce_max ReduceMax, reduce_min ReduceMin,
    reduce_prod ReduceProd, reduce_l1 ReduceL1, reduce_l2 ReduceL2, reduce_log_sum ReduceLogSum,
    reduce_log_sum_exp ReduceLogSumExp, reduce_sum_square ReduceSumSquare);

// ---------------------------------------------------------------------------------------
// Normalizations.

fn batch_norm(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", &[DType::F32])?;
    if x.shape.is_empty() {
        return Err("input 1 (X) must have rank ≥ 1 (N, C, D1, …), found a scalar".into());
    }
    let spatial = attrs.int("spatial", 1) != 0;
    let params = if !spatial {
        prod(&x.shape[1..])
    } else if x.shape.len() >= 2 {
        x.shape[1].max(0) as u64
    } else {
        1
    };
    let inner = if spatial { prod(x.shape.get(2..).unwrap_or(&[])) } else { 1 };
    let mut p = Vec::new();
    for (i, name) in [(1, "scale"), (2, "B"), (3, "mean"), (4, "var")] {
        let t = input(ins, i, name)?;
        check_dtype(t, i, name, &[DType::F32])?;
        if t.numel() != params {
            return Err(format!("input {} ({name}) has {} elements, expected {params}", i + 1, t.numel()));
        }
        p.push(t);
    }
    let y = output(outs, 0)?;
    check_out(y, x.dtype, &x.shape)?;
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    if crate::ir::operators::elementwise::a_training(attrs) {
        return batch_norm_training(ctx, x, &p, outs, (n, inner, params), attrs);
    }
    let acc = Acc::of(ctx);
    let a = acc.ty;
    let src = format!(
        "{}__kernel void k(__global const float* x, ulong xo, __global const float* sc, ulong sco, \
         __global const float* b, ulong bo, __global const float* mn, ulong mo, __global const float* vr, ulong vo, \
         __global float* y, ulong yo, ulong n, ulong inner, ulong params, {a} eps) {{\n  \
         ulong i = get_global_id(0);\n  if (i >= n) return;\n  ulong c = (i / inner) % params;\n  \
         float k = (float)(({a})sc[sco + c] / sqrt(({a})vr[vo + c] + eps));\n  \
         y[yo + i] = (x[xo + i] - mn[mo + c]) * k + b[bo + c];\n}}\n",
        acc.pragma()
    );
    let mut args: Vec<KernelArg> = x.args().into();
    for t in &p {
        args.extend(t.args());
    }
    args.extend(y.args());
    args.extend([
        KernelArg::U64(n),
        KernelArg::U64(inner),
        KernelArg::U64(params),
        acc.arg(attrs.float("epsilon", 1e-5)),
    ]);
    ctx.run(&src, &args, n as usize)
}

/// BatchNormalization with training_mode 1 (see the host's `batch_norm_training`): one
/// work-item per channel computes the batch mean and variance into a scratch buffer and
/// outputs 2 to 5, then one work-item per element normalizes.
fn batch_norm_training(
    ctx: &ClCtx,
    x: &ClTensor,
    p: &[&ClTensor],
    outs: &[ClTensor],
    (n, inner, params): (u64, u64, u64),
    attrs: &Attrs,
) -> Res {
    let [sc, b, mn, vr] = p else { return Err("BatchNormalization takes 5 inputs".into()) };
    for (i, o) in outs.iter().enumerate().skip(1) {
        check_out(o, DType::F32, &mn.shape).map_err(|e| format!("output {}: {e}", i + 1))?;
    }
    let scratch = super::cl::Scratch::new(ctx, 8 * params.max(1))?;
    let acc = Acc::of(ctx);
    let a = acc.ty;
    let mut decl = String::new();
    let mut writes = String::new();
    let mut args: Vec<KernelArg> = x.args().into();
    args.extend(mn.args());
    args.extend(vr.args());
    args.push(scratch.arg());
    let values = ["mn[mo + c] * m1 + bm * m2", "vr[vo + c] * m1 + bv * m2", "bm", "bv"];
    for (k, (o, v)) in outs.iter().skip(1).zip(values).enumerate() {
        let _ = write!(decl, ", __global float* o{k}, ulong o{k}o");
        let _ = writeln!(writes, "  o{k}[o{k}o + c] = {v};");
        args.extend(o.args());
    }
    let mom = attrs.float("momentum", 0.9);
    args.extend([
        KernelArg::U64(n),
        KernelArg::U64(inner),
        KernelArg::U64(params),
        f32_arg(mom as f32),
        f32_arg((1.0 - mom) as f32),
    ]);
    let src = format!(
        "{}#pragma OPENCL FP_CONTRACT OFF\n__kernel void k(__global const float* x, ulong xo, __global const float* mn, \
         ulong mo, __global const float* vr, ulong vo, __global float* st{decl}, ulong n, ulong inner, ulong params, \
         float m1, float m2) {{\n  ulong c = get_global_id(0);\n  if (c >= params) return;\n  \
         {a} s = 0, cnt = 0;\n  \
         for (ulong i = c * inner; i < n; i += params * inner) for (ulong j = 0; j < inner; j++) {{ s += x[xo + i + j]; cnt += 1; }}\n  \
         {a} mean = s / cnt, q = 0;\n  \
         for (ulong i = c * inner; i < n; i += params * inner) for (ulong j = 0; j < inner; j++) {{ {a} d = x[xo + i + j] - mean; q += d * d; }}\n  \
         float bm = (float)mean, bv = (float)(q / cnt);\n  st[2 * c] = bm;\n  st[2 * c + 1] = bv;\n{writes}}}\n",
        acc.pragma()
    );
    ctx.run(&src, &args, params as usize)?;
    let y = output(outs, 0)?;
    let src = "#pragma OPENCL FP_CONTRACT OFF\n__kernel void k(__global const float* x, ulong xo, __global const float* sc, \
               ulong sco, __global const float* b, ulong bo, __global const float* st, __global float* y, ulong yo, \
               ulong n, ulong inner, ulong params, float eps) {\n  ulong i = get_global_id(0);\n  if (i >= n) return;\n  \
               ulong c = (i / inner) % params;\n  \
               y[yo + i] = sc[sco + c] * (x[xo + i] - st[2 * c]) / sqrt(st[2 * c + 1] + eps) + b[bo + c];\n}\n";
    let mut args: Vec<KernelArg> = x.args().into();
    args.extend(sc.args());
    args.extend(b.args());
    args.push(scratch.arg());
    args.extend(y.args());
    args.extend([
        KernelArg::U64(n),
        KernelArg::U64(inner),
        KernelArg::U64(params),
        f32_arg(attrs.float("epsilon", 1e-5) as f32),
    ]);
    ctx.run(src, &args, n as usize)
}

/// ArgMax (`max`) or ArgMin: one work-item per output element, walking its axis; NaN is
/// preferred to any number, as on the host.
fn arg_reduce(ctx: &ClCtx, ins: &[Option<ClTensor>], attrs: &Attrs, outs: &[ClTensor], max: bool) -> Res {
    let x = input(ins, 0, "data")?;
    check_dtype(x, 0, "data", SIGNED)?;
    let ((outer, n, inner), shape) = crate::ir::operators::elementwise::arg_split(&x.shape, attrs)?;
    let y = output(outs, 0)?;
    check_out(y, DType::I64, &shape)?;
    let count = (outer * inner) as u64;
    if count == 0 {
        return Ok(());
    }
    let t = cl_type(x.dtype);
    let cmp = if max { ">" } else { "<" };
    let last = attrs.int("select_last_index", 0) != 0;
    // `better(a, b)`: a is preferred to b.
    let better = |a: &str, b: &str| {
        let nan = if x.dtype == DType::F32 { format!("(isnan({a}) && !isnan({b})) || ") } else { String::new() };
        format!("({nan}{a} {cmp} {b})")
    };
    let take = if last { format!("{} || !{}", better("v", "b"), better("b", "v")) } else { better("v", "b") };
    let src = format!(
        "__kernel void k(__global const {t}* x, ulong xo, __global long* y, ulong yo, ulong count, ulong n, ulong inner) {{\n  \
         ulong g = get_global_id(0);\n  if (g >= count) return;\n  ulong o = g / inner, i = g % inner;\n  \
         ulong base = xo + o * n * inner + i;\n  {t} b = x[base];\n  long best = 0;\n  \
         for (ulong k = 1; k < n; k++) {{ {t} v = x[base + k * inner]; if ({take}) {{ b = v; best = (long)k; }} }}\n  \
         y[yo + g] = best;\n}}\n"
    );
    let [xm, xo] = x.args();
    let [ym, yo] = y.args();
    let args = [xm, xo, ym, yo, KernelArg::U64(count), KernelArg::U64(n as u64), KernelArg::U64(inner as u64)];
    ctx.run(&src, &args, count as usize)
}

fn arg_max(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    arg_reduce(ctx, ins, attrs, outs, true)
}

fn arg_min(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    arg_reduce(ctx, ins, attrs, outs, false)
}

/// LayerNormalization: one work-item per normalized row (mean, variance, then the row),
/// writing Mean and InvStdDev too when the call names them. Scale and B are the
/// normalized dims' elements in order, or one element.
fn layer_norm(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", &[DType::F32])?;
    let (axis, stats) = crate::ir::operators::elementwise::layer_norm_split(&x.shape, attrs)?;
    let inner = prod(&x.shape[axis..]);
    let rows = prod(&x.shape[..axis]);
    let param = |i: usize, name: &str| -> Result<Option<&ClTensor>, String> {
        let Some(t) = ins.get(i).and_then(Option::as_ref) else { return Ok(None) };
        check_dtype(t, i, name, &[DType::F32])?;
        match t.numel() {
            n if n == inner || n == 1 => Ok(Some(t)),
            n => Err(format!(
                "on OpenCL, input {} ({name}) has the normalized dims' {inner} elements or one; it has {n}",
                i + 1
            )),
        }
    };
    let sc = param(1, "Scale")?.ok_or("input 2 (Scale) is required")?;
    let b = param(2, "B")?;
    let y = output(outs, 0)?;
    check_out(y, x.dtype, &x.shape)?;
    for o in outs.iter().skip(1) {
        check_out(o, DType::F32, &stats)?;
    }
    if y.numel() == 0 || inner == 0 {
        return Ok(());
    }
    let acc = Acc::of(ctx);
    let a = acc.ty;
    let (has_b, has_mean, has_inv) = (b.is_some(), outs.len() > 1, outs.len() > 2);
    let src = format!(
        "{}__kernel void k(__global const float* x, ulong xo, __global const float* sc, ulong sco, ulong scn, \
         __global const float* b, ulong bo, ulong bn, __global float* y, ulong yo, __global float* mo, ulong moo, \
         __global float* io, ulong ioo, ulong rows, ulong inner, {a} eps) {{\n  \
         ulong r = get_global_id(0);\n  if (r >= rows) return;\n  \
         ulong xb = xo + r * inner, yb = yo + r * inner;\n  {a} cnt = ({a})inner;\n  \
         {a} s = 0;\n  for (ulong j = 0; j < inner; j++) s += ({a})x[xb + j];\n  {a} mean = s / cnt;\n  \
         {a} q = 0;\n  for (ulong j = 0; j < inner; j++) {{ {a} d = ({a})x[xb + j] - mean; q += d * d; }}\n  \
         {a} k = 1 / sqrt(q / cnt + eps);\n  \
         for (ulong j = 0; j < inner; j++) {{\n    {a} g = ({a})sc[sco + (scn == 1 ? 0 : j)];\n    \
         {a} bb = {};\n    y[yb + j] = (float)((({a})x[xb + j] - mean) * k * g + bb);\n  }}\n  \
         {}{}}}\n",
        acc.pragma(),
        if has_b { format!("({a})b[bo + (bn == 1 ? 0 : j)]") } else { "0".to_string() },
        if has_mean { "mo[moo + r] = (float)mean; " } else { "" },
        if has_inv { "io[ioo + r] = (float)k; " } else { "" },
    );
    // Absent operands pass the input's buffer, never read.
    let mut args: Vec<KernelArg> = x.args().into();
    args.extend(sc.args());
    args.push(KernelArg::U64(sc.numel()));
    args.extend(b.unwrap_or(x).args());
    args.push(KernelArg::U64(b.map_or(1, ClTensor::numel)));
    args.extend(y.args());
    args.extend(outs.get(1).unwrap_or(y).args());
    args.extend(outs.get(2).unwrap_or(y).args());
    args.extend([KernelArg::U64(rows), KernelArg::U64(inner), acc.arg(attrs.float("epsilon", 1e-5))]);
    ctx.run(&src, &args, rows as usize)
}

fn instance_norm(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "input")?;
    check_dtype(x, 0, "input", &[DType::F32])?;
    if x.shape.len() < 3 {
        return Err(format!("input 1 (input) must have rank ≥ 3 (N, C, D1, …), found rank {}", x.shape.len()));
    }
    let (sc, b) = (input(ins, 1, "scale")?, input(ins, 2, "B")?);
    for (i, t) in [(1, sc), (2, b)] {
        check_dtype(t, i, if i == 1 { "scale" } else { "B" }, &[DType::F32])?;
        if t.shape.len() != 1 || t.shape[0] != x.shape[1] {
            return Err(format!(
                "input {} has shape {:?}, expected [{}] (the channel count)",
                i + 1,
                t.shape,
                x.shape[1]
            ));
        }
    }
    let y = output(outs, 0)?;
    check_out(y, x.dtype, &x.shape)?;
    if y.numel() == 0 {
        return Ok(());
    }
    let c = x.shape[1] as u64;
    let inner = prod(&x.shape[2..]);
    let rows = prod(&x.shape[..2]);
    let acc = Acc::of(ctx);
    let a = acc.ty;
    let src = format!(
        "{}__kernel void k(__global const float* x, ulong xo, __global const float* sc, ulong sco, \
         __global const float* b, ulong bo, __global float* y, ulong yo, ulong rows, ulong inner, ulong ch, {a} eps) {{\n  \
         ulong r = get_global_id(0);\n  if (r >= rows) return;\n  ulong c = r % ch;\n  \
         ulong xb = xo + r * inner, yb = yo + r * inner;\n  {a} cnt = ({a})inner;\n  \
         {a} s = 0;\n  for (ulong j = 0; j < inner; j++) s += ({a})x[xb + j];\n  {a} mean = s / cnt;\n  \
         {a} q = 0;\n  for (ulong j = 0; j < inner; j++) {{ {a} d = ({a})x[xb + j] - mean; q += d * d; }}\n  \
         {a} k = ({a})sc[sco + c] / sqrt(q / cnt + eps);\n  {a} bb = ({a})b[bo + c];\n  \
         for (ulong j = 0; j < inner; j++) y[yb + j] = (float)((({a})x[xb + j] - mean) * k + bb);\n}}\n",
        acc.pragma()
    );
    let mut args: Vec<KernelArg> = x.args().into();
    args.extend(sc.args());
    args.extend(b.args());
    args.extend(y.args());
    args.extend([
        KernelArg::U64(rows),
        KernelArg::U64(inner),
        KernelArg::U64(c),
        acc.arg(attrs.float("epsilon", 1e-5)),
    ]);
    ctx.run(&src, &args, rows as usize)
}

fn lrn(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", &[DType::F32])?;
    if x.shape.len() < 2 {
        return Err(format!("input 1 (X) must have rank ≥ 2 (N, C, D1, …), found rank {}", x.shape.len()));
    }
    let Some(AttrValue::Int(size)) = attrs.get("size") else {
        return Err("@onnx.LRN requires the integer attribute `size` (the number of channels to sum over)".into());
    };
    if *size < 1 {
        return Err(format!("attribute `size` of @onnx.LRN must be at least 1, found {size}"));
    }
    let y = output(outs, 0)?;
    check_out(y, x.dtype, &x.shape)?;
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let size = *size as u64;
    let (alpha, beta, bias) = (attrs.float("alpha", 1e-4), attrs.float("beta", 0.75), attrs.float("bias", 1.0));
    let before = (size - 1) / 2;
    let c = x.shape[1] as u64;
    let inner = prod(&x.shape[2..]);
    let acc = Acc::of(ctx);
    let a = acc.ty;
    let src = format!(
        "{}__kernel void k(__global const float* x, ulong xo, __global float* y, ulong yo, ulong n, ulong ch, \
         ulong inner, ulong before, ulong size, {a} bias, {a} kk, {a} beta) {{\n  \
         ulong i = get_global_id(0);\n  if (i >= n) return;\n  ulong c = (i / inner) % ch;\n  \
         ulong base = xo + i - c * inner;\n  {a} s = 0;\n  \
         for (ulong j = 0; j < size; j++) {{\n    ulong cc = c + j;\n    \
         if (cc < before || cc - before >= ch) continue;\n    \
         {a} v = ({a})x[base + (cc - before) * inner];\n    s += v * v;\n  }}\n  \
         y[yo + i] = (float)(({a})x[xo + i] / pow(bias + kk * s, beta));\n}}\n",
        acc.pragma()
    );
    let [xm, xo] = x.args();
    let [ym, yo] = y.args();
    let args = [
        xm,
        xo,
        ym,
        yo,
        KernelArg::U64(n),
        KernelArg::U64(c),
        KernelArg::U64(inner),
        KernelArg::U64(before),
        KernelArg::U64(size),
        acc.arg(bias),
        acc.arg(alpha / size as f64),
        acc.arg(beta),
    ];
    ctx.run(&src, &args, n as usize)
}

/// Differential tests: every operator on the device against the host kernel. They run on
/// the OpenCL device named by `RXVM_TEST_CL_DEVICE` (default: the first real device) and
/// are skipped when no OpenCL runtime is usable.
#[cfg(test)]
#[allow(clippy::cloned_ref_to_slice_refs)]
mod tests {
    use super::*;
    use crate::opencl::device::ClDevice;
    use crate::ops::cl::testing::device;
    use crate::ops::OPS;

    fn attrs(list: &[(&str, AttrValue)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    fn int(v: i64) -> AttrValue {
        AttrValue::Int(v)
    }

    fn float(v: f64) -> AttrValue {
        AttrValue::Float(v)
    }

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

    fn tensor(dtype: DType, shape: &[i64], seed: u64) -> HostTensor {
        let n = prod(shape) as usize;
        let v = rand(seed, n, -3.0, 3.0);
        let data: Vec<u8> = match dtype {
            DType::F32 => v.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect(),
            DType::F64 => v.iter().flat_map(|&x| x.to_le_bytes()).collect(),
            // Nonzero integers (divisors), negative ones included.
            DType::I32 => v.iter().flat_map(|&x| ((x * 7.0) as i32 | 1).to_le_bytes()).collect(),
            DType::I64 => v.iter().flat_map(|&x| ((x * 7.0) as i64 | 1).to_le_bytes()).collect(),
            // Wide enough that products and sums wrap.
            DType::I8 => v.iter().map(|&x| ((x * 40.0) as i8 | 1) as u8).collect(),
            DType::U8 => v.iter().map(|&x| ((x + 3.0) * 40.0) as u8 | 1).collect(),
            DType::I16 => v.iter().flat_map(|&x| ((x * 9000.0) as i16 | 1).to_le_bytes()).collect(),
            DType::U16 => v.iter().flat_map(|&x| (((x + 3.0) * 9000.0) as u16 | 1).to_le_bytes()).collect(),
            DType::U32 => v.iter().flat_map(|&x| (((x + 3.0) * 7e8) as u32 | 1).to_le_bytes()).collect(),
            DType::U64 => v.iter().flat_map(|&x| (((x + 3.0) * 3e18) as u64 | 1).to_le_bytes()).collect(),
            DType::F16 => v.iter().flat_map(|&x| half::f16::from_f64(x).to_le_bytes()).collect(),
            DType::BF16 => v.iter().flat_map(|&x| half::bf16::from_f64(x).to_le_bytes()).collect(),
            _ => v.iter().map(|&x| (x > 0.0) as u8).collect(),
        };
        HostTensor::new(dtype, shape.to_vec(), data).unwrap()
    }

    fn f32s(shape: &[i64], v: &[f32]) -> HostTensor {
        HostTensor::from_f32(shape, v).unwrap()
    }

    fn i64s(v: &[i64]) -> HostTensor {
        HostTensor::new(DType::I64, vec![v.len() as i64], v.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-3 * b.abs() + 1e-5
    }

    /// Runs `name` on the host and on the device and compares every output.
    fn check(dev: &ClDevice, name: &str, ins: &[Option<HostTensor>], a: &Attrs) {
        let def = OPS.iter().find(|o| o.name == name).unwrap();
        let infos: Vec<Option<TensorInfo>> = ins
            .iter()
            .map(|t| {
                t.as_ref().map(|t| TensorInfo {
                    dtype: t.dtype,
                    shape: &t.shape,
                    value: (t.numel() <= 64 || !t.dtype.is_float()).then_some(t),
                })
            })
            .collect();
        let inferred = (def.infer)(&infos, a).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut want: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        let refs: Vec<Option<&HostTensor>> = ins.iter().map(Option::as_ref).collect();
        (def.op.id().host_kernel().unwrap())(&refs, a, &mut want).unwrap_or_else(|e| panic!("{name} (host): {e}"));
        let outs = super::super::cl::testing::run_kernel(dev, name, ins, &infos, a, &want);
        for (i, (w, got)) in want.iter().zip(outs).enumerate() {
            let ok = match w.dtype {
                DType::F32 => w.data.chunks_exact(4).zip(got.chunks_exact(4)).all(|(x, y)| {
                    close(
                        f32::from_le_bytes(y.try_into().unwrap()) as f64,
                        f32::from_le_bytes(x.try_into().unwrap()) as f64,
                    )
                }),
                DType::F64 => w.data.chunks_exact(8).zip(got.chunks_exact(8)).all(|(x, y)| {
                    close(f64::from_le_bytes(y.try_into().unwrap()), f64::from_le_bytes(x.try_into().unwrap()))
                }),
                // Within two f16 ulps: the device folds n-ary sums in float and may round exp or
                // log otherwise; the host rounds each step to f16, as numpy.
                DType::F16 => w.data.chunks_exact(2).zip(got.chunks_exact(2)).all(|(x, y)| {
                    let (x, y) = (u16::from_le_bytes([x[0], x[1]]), u16::from_le_bytes([y[0], y[1]]));
                    let (fx, fy) = (half::f16::from_bits(x).to_f64(), half::f16::from_bits(y).to_f64());
                    (fx.is_nan() && fy.is_nan()) || x.abs_diff(y) <= 2 || close(fy, fx)
                }),
                // Within one bf16 ulp: both compute in float and round once, but the device's
                // exp or expm1 may differ from the host's in the last float bits.
                DType::BF16 => w.data.chunks_exact(2).zip(got.chunks_exact(2)).all(|(x, y)| {
                    let (x, y) = (u16::from_le_bytes([x[0], x[1]]), u16::from_le_bytes([y[0], y[1]]));
                    let (fx, fy) = (half::bf16::from_bits(x).to_f64(), half::bf16::from_bits(y).to_f64());
                    (fx.is_nan() && fy.is_nan()) || x.abs_diff(y) <= 1
                }),
                _ => w.data == got,
            };
            assert!(ok, "{name} {a}: output {} differs\nhost {:?}\ncl   {:?}", i + 1, w.data, got);
        }
    }

    #[test]
    fn kernels_match_the_host() {
        let Some(dev) = device() else { return };
        let t = |d: DType, s: &[i64], seed: u64| Some(tensor(d, s, seed));
        let none = Attrs::default();
        use DType::*;
        let mut dtypes = vec![F32, F16, I8, I16, I32, I64, U8, U16, U32, U64];
        if dev.has_fp64 {
            dtypes.push(F64);
        }
        for op in ["Add", "Sub", "Mul", "Div"] {
            for &d in &dtypes {
                check(&dev, op, &[t(d, &[2, 3, 4], 1), t(d, &[3, 1], 2)], &none);
                check(&dev, op, &[t(d, &[], 3), t(d, &[5], 4)], &none);
                check(&dev, op, &[t(d, &[4, 1, 3], 5), t(d, &[1, 5, 1], 6)], &none);
                check(&dev, op, &[t(d, &[7, 300], 5), t(d, &[7, 300], 6)], &none);
            }
            let legacy = attrs(&[("broadcast", int(1)), ("axis", int(1))]);
            check(&dev, op, &[t(F32, &[2, 3, 4, 5], 7), t(F32, &[3, 4], 8)], &legacy);
        }
        check(
            &dev,
            "Pow",
            &[Some(f32s(&[2, 3], &[1.5, 2.0, 0.5, -2.0, 3.0, 0.0])), Some(f32s(&[3], &[2.0, 0.5, 3.0]))],
            &none,
        );
        // Pow with an exponent of another dtype, and integer powers.
        let small = |d: DType, seed: u64| {
            let v = rand(seed, 6, 0.0, 4.0);
            let data: Vec<f64> = v.iter().map(|x| x.floor()).collect();
            Some(
                match d {
                    I32 => HostTensor::new(d, vec![6], data.iter().flat_map(|&x| (x as i32).to_le_bytes()).collect()),
                    I64 => {
                        HostTensor::new(d, vec![6], data.iter().flat_map(|&x| (x as i64 - 1).to_le_bytes()).collect())
                    }
                    U8 => HostTensor::new(d, vec![6], data.iter().map(|&x| x as u8).collect()),
                    F16 => HostTensor::new(
                        d,
                        vec![6],
                        data.iter().flat_map(|&x| half::f16::from_f64(x + 0.5).to_le_bytes()).collect(),
                    ),
                    _ => {
                        HostTensor::new(d, vec![6], data.iter().flat_map(|&x| (x as f32 + 0.5).to_le_bytes()).collect())
                    }
                }
                .unwrap(),
            )
        };
        for (a, b) in [(F32, I64), (F32, U8), (I32, I32), (I64, I64), (I64, F32), (F16, I32)] {
            check(&dev, "Pow", &[small(a, 1), small(b, 2)], &none);
        }
        for op in ["Max", "Min", "Sum"] {
            for &d in &dtypes {
                check(&dev, op, &[t(d, &[3, 4], 1)], &none);
                let many: Vec<_> = (0..9).map(|i| t(d, if i % 3 == 0 { &[4] } else { &[3, 1] }, 10 + i)).collect();
                check(&dev, op, &many, &none);
            }
            let nan = Some(f32s(&[3], &[f32::NAN, 1.0, -0.0]));
            check(&dev, op, &[t(F32, &[3], 1), nan.clone(), t(F32, &[2, 3], 2)], &none);
            check(&dev, op, &[nan, t(F32, &[3], 1)], &none);
        }
        let x = t(F32, &[4, 50], 3);
        check(&dev, "Clip", &[x.clone()], &attrs(&[("min", float(-1.0)), ("max", float(0.5))]));
        check(&dev, "Clip", &[x.clone()], &none);
        check(&dev, "Clip", &[x.clone(), Some(f32s(&[], &[-0.5]))], &none);
        check(&dev, "Clip", &[x.clone(), None, Some(f32s(&[1], &[0.25]))], &none);
        check(&dev, "Clip", &[x.clone(), Some(f32s(&[], &[1.0])), Some(f32s(&[], &[-1.0]))], &none);
        let big = Some(f32s(&[6], &[-100.0, -20.0, -1e-3, 0.0, 30.0, 100.0]));
        for op in ["Sigmoid", "Tanh", "Exp", "Sqrt", "Softplus", "Softsign", "LeakyRelu", "Elu", "Selu", "Relu"] {
            check(&dev, op, &[x.clone()], &none);
            check(&dev, op, &[big.clone()], &none);
        }
        check(&dev, "LeakyRelu", &[x.clone()], &attrs(&[("alpha", float(0.3))]));
        check(&dev, "Elu", &[x.clone()], &attrs(&[("alpha", float(0.7))]));
        // bf16 computes in float and rounds once: arithmetic and the f32 maps.
        for op in ["Add", "Sub", "Mul", "Div"] {
            check(&dev, op, &[t(BF16, &[2, 3, 4], 1), t(BF16, &[3, 1], 2)], &none);
            check(&dev, op, &[t(BF16, &[7, 300], 5), t(BF16, &[7, 300], 6)], &none);
        }
        let xb = t(BF16, &[4, 50], 3);
        for op in ["LeakyRelu", "Elu", "Selu", "Celu", "Erf", "Log", "Reciprocal", "Floor", "Round", "Sin", "Sign"] {
            check(&dev, op, &[xb.clone()], &none);
        }
        check(&dev, "Selu", &[x.clone()], &attrs(&[("alpha", float(2.0)), ("gamma", float(3.0))]));
        for &d in &dtypes {
            if !matches!(d, U8 | U16 | U32 | U64) {
                check(&dev, "Neg", &[t(d, &[5, 7], 4)], &none);
            }
            check(&dev, "Abs", &[t(d, &[5, 7], 4)], &none);
            // Clip's bounds are inputs of the dtype (taken from two elements of another tensor).
            let b = tensor(d, &[2], 11);
            let (lo, hi) = (d.size(), 2 * d.size());
            let scalar = |r: std::ops::Range<usize>| Some(HostTensor::new(d, vec![], b.data[r].to_vec()).unwrap());
            check(&dev, "Clip", &[t(d, &[4, 9], 3), scalar(0..lo), scalar(lo..hi)], &none);
            check(&dev, "Clip", &[t(d, &[4, 9], 3), None, scalar(lo..hi)], &none);
        }
        let mut floats = vec![F16];
        if dev.has_fp64 {
            floats.push(F64);
        }
        for d in floats {
            for op in ["Sigmoid", "Tanh", "Exp", "Sqrt", "Softplus", "Softsign"] {
                check(&dev, op, &[t(d, &[4, 9], 3)], &none);
            }
            for op in ["ReduceMean", "ReduceL2", "ReduceLogSumExp", "ReduceSum", "ReduceMax"] {
                check(&dev, op, &[t(d, &[2, 3, 4], 2)], &attrs(&[("axes", AttrValue::Ints(vec![0, 2]))]));
            }
        }
        let opset6 = attrs(&[("onnx_opset", int(6))]);
        check(&dev, "PRelu", &[t(F32, &[2, 3, 4], 1), t(F32, &[3], 2)], &opset6);
        check(&dev, "PRelu", &[t(F32, &[2, 3, 3], 1), t(F32, &[3], 2)], &opset6);
        check(&dev, "PRelu", &[t(F32, &[2, 3, 3], 1), t(F32, &[3], 2)], &none);
        check(&dev, "PRelu", &[t(F32, &[2, 3, 4], 1), t(F32, &[3, 1], 2)], &none);
        check(&dev, "Dropout", &[t(F32, &[3, 5], 1)], &attrs(&[("ratio", float(0.3))]));
        check(&dev, "Dropout", &[t(F16, &[3, 5], 1)], &none);
        check(&dev, "Identity", &[t(I64, &[3, 5], 1)], &none);
        check(&dev, "Identity", &[t(Bool, &[7], 1)], &none);
        check(&dev, "Identity", &[t(F16, &[0, 3], 1)], &none);
        for op in ["Softmax", "LogSoftmax"] {
            let x = t(F32, &[2, 3, 4, 5], 9);
            check(&dev, op, &[x.clone()], &none);
            for axis in [0, 1, 2, -1] {
                check(&dev, op, &[x.clone()], &attrs(&[("axis", int(axis))]));
                check(&dev, op, &[x.clone()], &attrs(&[("axis", int(axis)), ("onnx_opset", int(11))]));
            }
            check(&dev, op, &[x.clone()], &opset6);
        }
        let reductions = [
            "ReduceMean",
            "ReduceSum",
            "ReduceMax",
            "ReduceMin",
            "ReduceProd",
            "ReduceL1",
            "ReduceL2",
            "ReduceLogSum",
            "ReduceLogSumExp",
            "ReduceSumSquare",
        ];
        for op in reductions {
            let x = t(F32, &[2, 3, 1, 4, 5], 9);
            check(&dev, op, &[x.clone()], &none);
            check(&dev, op, &[x.clone()], &attrs(&[("keepdims", int(0))]));
            check(&dev, op, &[x.clone()], &attrs(&[("axes", AttrValue::Ints(vec![1])), ("keepdims", int(0))]));
            check(&dev, op, &[x.clone()], &attrs(&[("axes", AttrValue::Ints(vec![0, 2, -1]))]));
            check(&dev, op, &[x.clone()], &attrs(&[("axes", AttrValue::Ints(vec![1, 3]))]));
            check(&dev, op, &[x.clone(), Some(i64s(&[-2]))], &none);
            check(&dev, op, &[x.clone(), Some(i64s(&[]))], &attrs(&[("noop_with_empty_axes", int(1))]));
            check(&dev, op, &[t(F32, &[2, 0], 1)], &attrs(&[("axes", AttrValue::Ints(vec![1]))]));
        }
        for op in ["ReduceMax", "ReduceMin"] {
            check(&dev, op, &[t(Bool, &[2, 3, 4], 2)], &attrs(&[("axes", AttrValue::Ints(vec![0, 2]))]));
        }
        for d in [I8, I16, I32, I64, U8, U16, U32] {
            for op in ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceSumSquare"] {
                check(&dev, op, &[t(d, &[2, 3, 4], 2)], &attrs(&[("axes", AttrValue::Ints(vec![0, 2]))]));
                check(&dev, op, &[t(d, &[0, 3], 2)], &attrs(&[("axes", AttrValue::Ints(vec![0]))]));
            }
        }
        let bn = |x: &[i64], p: i64| {
            vec![
                t(F32, x, 1),
                t(F32, &[p], 2),
                t(F32, &[p], 3),
                t(F32, &[p], 4),
                Some(tensor(F32, &[p], 5)).map(|mut v| {
                    for c in v.data.chunks_exact_mut(4) {
                        let f = f32::from_le_bytes(c.try_into().unwrap()).abs();
                        c.copy_from_slice(&f.to_le_bytes());
                    }
                    v
                }),
            ]
        };
        check(&dev, "BatchNormalization", &bn(&[2, 3, 2, 2], 3), &attrs(&[("epsilon", float(1e-3))]));
        check(&dev, "BatchNormalization", &bn(&[2, 3, 2], 6), &attrs(&[("spatial", int(0))]));
        check(&dev, "BatchNormalization", &bn(&[3], 1), &none);
        check(&dev, "BatchNormalization", &bn(&[4, 5], 5), &none);
        check(&dev, "InstanceNormalization", &[t(F32, &[2, 3, 5], 1), t(F32, &[3], 2), t(F32, &[3], 3)], &none);
        for op in ["ArgMax", "ArgMin"] {
            for d in [F32, I32, I64] {
                for axis in [0, 1, -1] {
                    for last in [0, 1] {
                        let a = attrs(&[
                            ("axis", int(axis)),
                            ("select_last_index", int(last)),
                            ("keepdims", int(axis & 1)),
                        ]);
                        check(&dev, op, &[t(d, &[3, 4, 5], 4)], &a);
                    }
                }
            }
        }
        for (axis, normalized) in [(-1i64, vec![6i64]), (1, vec![4, 6]), (0, vec![3, 4, 6])] {
            let x = t(F32, &[3, 4, 6], 7);
            let a = attrs(&[("axis", int(axis)), ("epsilon", AttrValue::Float(1e-3))]);
            check(&dev, "LayerNormalization", &[x.clone(), t(F32, &normalized, 8), t(F32, &normalized, 9)], &a);
            check(&dev, "LayerNormalization", &[x.clone(), t(F32, &[1], 8)], &a);
        }
        check(
            &dev,
            "InstanceNormalization",
            &[t(F32, &[1, 2, 3, 4, 5], 1), t(F32, &[2], 2), t(F32, &[2], 3)],
            &attrs(&[("epsilon", float(0.01))]),
        );
        for size in [1, 3, 4, 7] {
            let a = attrs(&[("size", int(size)), ("alpha", float(0.5)), ("beta", float(0.75)), ("bias", float(2.0))]);
            check(&dev, "LRN", &[t(F32, &[2, 5, 2, 3], 1)], &a);
            check(&dev, "LRN", &[t(F32, &[2, 5], 1)], &a);
        }
    }

    #[test]
    fn missing_inputs_are_errors() {
        let Some(dev) = device() else { return };
        let ctx = ClCtx { dev: &dev };
        for (name, f) in CL {
            let e = f(&ctx, &[], &[], &Attrs::default(), &[]).unwrap_err();
            assert!(e.contains("required") || e.contains("attribute"), "{}: {e}", name.name());
        }
    }

    /// Softmax/LogSoftmax on f16, bf16 and f64, the f32 maps on f16, Dropout in training
    /// mode and BatchNormalization with training_mode, against the host.
    #[test]
    fn dtype_extensions_match_the_host() {
        use crate::ops::bitwise_cl::tests::{check_tol, values};
        let Some(dev) = device() else { return };
        let mut floats = vec![(DType::F16, 1e-3), (DType::BF16, 0.0)];
        if dev.has_fp64 {
            floats.push((DType::F64, 1e-12));
        }
        for (d, tol) in floats {
            for op in ["Softmax", "LogSoftmax"] {
                for axis in [1, 2] {
                    let x = values(d, &[2, 3, 7], 1, -4.0, 4.0);
                    check_tol(&dev, op, &[Some(x)], &attrs(&[("axis", int(axis))]), tol);
                }
            }
        }
        for op in ["Celu", "Elu", "Relu", "Sigmoid"] {
            check_tol(&dev, op, &[Some(values(DType::F16, &[5, 7], 2, -5.0, 5.0))], &Attrs::default(), 1e-3);
        }
        let on = HostTensor::new(DType::Bool, vec![], vec![1]).unwrap();
        for (d, shape) in [(DType::F32, &[3, 4, 5][..]), (DType::F16, &[700][..])] {
            let x = values(d, shape, 3, -2.0, 2.0);
            let r = values(DType::F32, &[], 4, 0.2, 0.8);
            let a = attrs(&[("seed", int(7))]);
            check_tol(&dev, "Dropout", &[Some(x.clone()), Some(r), Some(on.clone())], &a, 0.0);
        }
        let p = |seed| Some(values(DType::F32, &[3], seed, 0.5, 2.0));
        let x = values(DType::F32, &[2, 3, 4, 5], 5, -3.0, 3.0);
        let a = attrs(&[("training_mode", int(1)), ("momentum", AttrValue::Float(0.8))]);
        check_tol(&dev, "BatchNormalization", &[Some(x), p(6), p(7), p(8), p(9)], &a, 1e-5);
    }
}
