//! OpenCL buffer kernels for the newer normalizations (RMSNormalization,
//! GroupNormalization, LpNormalization, MeanVarianceNormalization; see `super::cl`). They
//! mirror the host kernels in `super::normalization`, accumulating in double where the
//! device has fp64 (else float) and storing in the input's dtype. An input that overlaps the
//! output is copied first (`unaliased`).

use super::attention_cl::{check_outs, dtype_prelude, global, real_arg, shapes};
use super::cl::{cl_type, input, need_fp64, ClCtx, ClFn, ClTensor, Infos, Res};
use super::elementwise_cl::{bcast, Operand, FP64_PRAGMA};
use super::tensor_cl::unaliased;
use super::{Attrs, Operator};
use crate::ir::operators::normalization::*;
use crate::ir::types::DType;
use crate::opencl::device::KernelArg;
use std::fmt::Write;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[
    (Operator::RMSNormalization, rms_norm),
    (Operator::GroupNormalization, group_norm),
    (Operator::LpNormalization, lp_norm),
    (Operator::MeanVarianceNormalization, mvn),
];

/// The accumulation type: double for f64 tensors or where the device has fp64, else float.
fn acc(ctx: &ClCtx, d: DType) -> &'static str {
    if d == DType::F64 || ctx.has_fp64() {
        "double"
    } else {
        "float"
    }
}

fn pragma(a: &str) -> &'static str {
    if a == "double" {
        FP64_PRAGMA
    } else {
        ""
    }
}

fn l(v: usize) -> KernelArg {
    KernelArg::U64(v as u64)
}

/// RMSNormalization: one work-item per normalized row computes 1 / rms into a scratch
/// buffer, then a broadcast kernel writes X · that · Scale.
fn rms_norm(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    unaliased(ctx, ins, outs, |ins| rms_norm_k(ctx, ins, attrs, outs))
}

fn rms_norm_k(ctx: &ClCtx, ins: &[Option<ClTensor>], attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let (x, w) = (input(ins, 0, "X")?, input(ins, 1, "Scale")?);
    check_outs(outs, &infer_rms(&shapes(ins), attrs)?)?;
    need_fp64(ctx, x.dtype)?;
    need_fp64(ctx, w.dtype)?;
    let axis = rms_axis(&x.shape, attrs)?;
    let (rows, inner) = (count(&x.shape[..axis]), count(&x.shape[axis..]));
    if rows == 0 || inner == 0 {
        return Ok(());
    }
    let a = acc(ctx, x.dtype);
    let t = cl_type(x.dtype);
    let src = format!(
        "{}{}__kernel void k(__global const {t}* x, ulong xo, __global {a}* inv, ulong rows, ulong inner, {a} eps) {{\n  \
         ulong r = get_global_id(0);\n  if (r >= rows) return;\n  {a} s = 0;\n  \
         for (ulong j = 0; j < inner; j++) {{ {a} v = LD(x, xo + r * inner + j); s += v * v; }}\n  \
         inv[r] = 1 / sqrt(s / ({a})inner + eps);\n}}\n",
        pragma(a),
        dtype_prelude(x.dtype, a),
    );
    let size = if a == "double" { 8 } else { 4 };
    let (block, _) = ctx.dev.alloc((rows * size) as u64).map_err(|e| e.to_string())?;
    let mut args: Vec<KernelArg> = x.args().into();
    args.extend([KernelArg::Mem(block.raw()), l(rows), l(inner), real_arg(a, attrs.float("epsilon", 1e-5))]);
    let stats: Vec<i64> = x.shape.iter().enumerate().map(|(i, &d)| if i < axis { d } else { 1 }).collect();
    let inv = ClTensor {
        mem: block.raw(),
        offset: 0,
        dtype: if a == "double" { DType::F64 } else { DType::F32 },
        shape: stats.clone(),
    };
    let result = global(rows as u64).and_then(|g| ctx.run(&src, &args, g)).and_then(|_| {
        let ops = [
            Operand { t: x, shape: &x.shape, ty: t },
            Operand { t: &inv, shape: &stats, ty: a },
            Operand { t: w, shape: &w.shape, ty: cl_type(w.dtype) },
        ];
        let cast = if x.dtype == DType::F16 { "(float)" } else { "" };
        bcast(
            ctx,
            &ops,
            &outs[0],
            t,
            a == "double" || w.dtype == DType::F64,
            "",
            &format!("{cast}(({a})v0 * v1 * ({a})v2)"),
        )
    });
    ctx.dev.release(block);
    result
}

/// GroupNormalization: one work-item per (n, group) computes the statistics and writes the
/// group's elements.
fn group_norm(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    unaliased(ctx, ins, outs, |ins| group_norm_k(ctx, ins, attrs, outs))
}

fn group_norm_k(ctx: &ClCtx, ins: &[Option<ClTensor>], attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "X")?;
    let (sc, b) = (input(ins, 1, "scale")?, input(ins, 2, "bias")?);
    check_outs(outs, &infer_group_norm(&shapes(ins), attrs)?)?;
    let ([n, groups, per, spatial], per_group) = group_norm_plan(&shapes(ins), attrs)?;
    need_fp64(ctx, x.dtype)?;
    let (count, size) = (n * groups, per * spatial);
    if count == 0 || size == 0 {
        return Ok(());
    }
    let a = acc(ctx, x.dtype);
    let t = cl_type(x.dtype);
    let src = format!(
        "{}{}__kernel void k(__global const {t}* x, ulong xo, __global const {t}* sc, ulong so, __global const {t}* b, \
         ulong bo, __global {t}* y, ulong yo, ulong count, ulong G, ulong per, ulong sp, {a} eps) {{\n  \
         ulong g = get_global_id(0);\n  if (g >= count) return;\n  ulong size = per * sp, base = g * size;\n  \
         {a} s = 0;\n  for (ulong j = 0; j < size; j++) s += LD(x, xo + base + j);\n  {a} mean = s / ({a})size;\n  \
         {a} q = 0;\n  for (ulong j = 0; j < size; j++) {{ {a} d = LD(x, xo + base + j) - mean; q += d * d; }}\n  \
         {a} k = 1 / sqrt(q / ({a})size + eps);\n  \
         for (ulong j = 0; j < size; j++) {{\n    ulong p = {param};\n    \
         ST(y, yo + base + j, (LD(x, xo + base + j) - mean) * k * LD(sc, so + p) + LD(b, bo + p));\n  }}\n}}\n",
        pragma(a),
        dtype_prelude(x.dtype, a),
        param = if per_group { "g % G" } else { "(g % G) * per + j / sp" },
    );
    let mut args: Vec<KernelArg> = x.args().into();
    args.extend(sc.args());
    args.extend(b.args());
    args.extend(outs[0].args());
    args.extend([l(count), l(groups), l(per), l(spatial), real_arg(a, attrs.float("epsilon", 1e-5))]);
    ctx.run(&src, &args, global(count as u64)?)
}

/// LpNormalization: one work-item per (outer, inner) line along the axis.
fn lp_norm(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    unaliased(ctx, ins, outs, |ins| lp_norm_k(ctx, ins, attrs, outs))
}

fn lp_norm_k(ctx: &ClCtx, ins: &[Option<ClTensor>], attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "input")?;
    check_outs(outs, &infer_lp_norm(&shapes(ins), attrs)?)?;
    need_fp64(ctx, x.dtype)?;
    let [outer, len, inner] = lp_split(&x.shape, attrs)?;
    let lines = outer * inner;
    if lines == 0 || len == 0 {
        return Ok(());
    }
    let a = acc(ctx, x.dtype);
    let t = cl_type(x.dtype);
    let p2 = attrs.int("p", 2) == 2;
    let src = format!(
        "{}{}__kernel void k(__global const {t}* x, ulong xo, __global {t}* y, ulong yo, ulong lines, ulong len, \
         ulong inner) {{\n  ulong g = get_global_id(0);\n  if (g >= lines) return;\n  \
         ulong base = (g / inner) * len * inner + g % inner;\n  {a} s = 0;\n  \
         for (ulong k = 0; k < len; k++) {{ {a} v = LD(x, xo + base + k * inner); s += {term}; }}\n  \
         {a} norm = {norm};\n  \
         for (ulong k = 0; k < len; k++) ST(y, yo + base + k * inner, norm == 0 ? 0 : LD(x, xo + base + k * inner) / norm);\n}}\n",
        pragma(a),
        dtype_prelude(x.dtype, a),
        term = if p2 { "v * v" } else { "fabs(v)" },
        norm = if p2 { "sqrt(s)" } else { "s" },
    );
    let mut args: Vec<KernelArg> = x.args().into();
    args.extend(outs[0].args());
    args.extend([l(lines), l(len), l(inner)]);
    ctx.run(&src, &args, global(lines as u64)?)
}

/// MeanVarianceNormalization: one work-item per group of the kept dims, walking the reduced
/// dims (the shape is baked into the source).
fn mvn(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    unaliased(ctx, ins, outs, |ins| mvn_k(ctx, ins, attrs, outs))
}

fn mvn_k(ctx: &ClCtx, ins: &[Option<ClTensor>], attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "X")?;
    check_outs(outs, &infer_mvn(&shapes(ins), attrs)?)?;
    need_fp64(ctx, x.dtype)?;
    let red = mvn_axes(&x.shape, attrs)?;
    let n = count(&x.shape);
    if n == 0 {
        return Ok(());
    }
    let dims: Vec<usize> = x.shape.iter().map(|&d| d.max(0) as usize).collect();
    let mut strides = vec![1usize; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * dims[k + 1];
    }
    let (mut groups, mut reduced) = (1usize, 1usize);
    // Element offsets of a kept-dims index `g` and of a reduced-dims index `r`.
    let (mut off_g, mut off_r) = (String::new(), String::new());
    for k in (0..dims.len()).rev() {
        let (body, total) = if red[k] { (&mut off_r, &mut reduced) } else { (&mut off_g, &mut groups) };
        let _ = write!(body, "o += (t % {d}UL) * {s}UL; t /= {d}UL; ", d = dims[k].max(1), s = strides[k]);
        *total *= dims[k];
    }
    let a = acc(ctx, x.dtype);
    let t = cl_type(x.dtype);
    let src = format!(
        "{}{}ulong og(ulong t) {{ ulong o = 0; {off_g}return o; }}\nulong orr(ulong t) {{ ulong o = 0; {off_r}return o; }}\n\
         __kernel void k(__global const {t}* x, ulong xo, __global {t}* y, ulong yo) {{\n  \
         ulong g = get_global_id(0);\n  if (g >= {groups}UL) return;\n  ulong base = og(g);\n  {a} s = 0;\n  \
         for (ulong r = 0; r < {reduced}UL; r++) s += LD(x, xo + base + orr(r));\n  {a} mean = s / ({a}){reduced}UL;\n  \
         {a} q = 0;\n  for (ulong r = 0; r < {reduced}UL; r++) {{ {a} d = LD(x, xo + base + orr(r)) - mean; q += d * d; }}\n  \
         {a} den = sqrt(q / ({a}){reduced}UL) + ({a})1e-9;\n  \
         for (ulong r = 0; r < {reduced}UL; r++) ST(y, yo + base + orr(r), (LD(x, xo + base + orr(r)) - mean) / den);\n}}\n",
        pragma(a),
        dtype_prelude(x.dtype, a),
    );
    let mut args: Vec<KernelArg> = x.args().into();
    args.extend(outs[0].args());
    ctx.run(&src, &args, global(groups as u64)?)
}

#[cfg(test)]
mod tests {
    use crate::ir::attrs::AttrValue;
    use crate::ir::types::DType;
    use crate::ops::attention::tests::{attrs, float, int};
    use crate::ops::attention_cl::tests::{check, rand};
    use crate::ops::cl::testing::device;
    use crate::ops::Attrs;

    #[test]
    fn kernels_match_the_host() {
        let Some(dev) = device() else { return };
        let mut dtypes = vec![DType::F32, DType::F16];
        if dev.has_fp64 {
            dtypes.push(DType::F64);
        }
        for d in dtypes {
            let r = |s: &[i64], seed| Some(rand(d, s, seed));
            for (axis, w) in [(-1i64, vec![6i64]), (1, vec![4, 6]), (0, vec![3, 1, 6]), (1, vec![3, 1, 1])] {
                let a = attrs(&[("axis", int(axis)), ("epsilon", float(1e-3))]);
                check(&dev, "RMSNormalization", &[r(&[3, 4, 6], 1), r(&w, 2)], &a, 1, false);
            }
            for (shape, g, params) in [(vec![2i64, 6, 5], 3, 6), (vec![2, 6, 2, 3], 2, 2), (vec![1, 4, 1, 2, 3], 4, 4)]
            {
                let a = attrs(&[("num_groups", int(g)), ("epsilon", float(1e-2))]);
                check(&dev, "GroupNormalization", &[r(&shape, 3), r(&[params], 4), r(&[params], 5)], &a, 1, false);
            }
            for (axis, p) in [(-1, 2), (0, 1), (1, 2)] {
                let a = attrs(&[("axis", int(axis)), ("p", int(p))]);
                check(&dev, "LpNormalization", &[r(&[3, 4, 5], 6)], &a, 1, false);
            }
            check(&dev, "MeanVarianceNormalization", &[r(&[2, 3, 4, 5], 7)], &Attrs::default(), 1, false);
            let a = attrs(&[("axes", AttrValue::Ints(vec![1, -1]))]);
            check(&dev, "MeanVarianceNormalization", &[r(&[2, 3, 4], 8)], &a, 1, false);
        }
    }
}
