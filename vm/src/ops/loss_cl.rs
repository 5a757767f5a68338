//! OpenCL buffer kernels for the loss family and the window operators Shrink, LpPool,
//! MaxUnpool and Col2Im (see `super::cl`). They mirror the host kernels in `super::loss`.
//!
//! The losses compute one element `(n, d)` per work-item when unreduced; a reduced loss is
//! summed by one work-item (losses are small next to the networks that produce them), in
//! double where the device has it. f16 tensors are read with `vload_half` and computed in
//! float; f64 needs `cl_khr_fp64`. A target outside the classes (which the host refuses)
//! gives NaN.

use super::cl::{check_out, float_arg, input, long_arg as l, ClCtx, ClFn, ClTensor, Infos, Res};
use super::elementwise_cl::FP64_PRAGMA;
use super::nn_cl::{Geo, GEO_PARAMS, SPLIT_OUT, TAPS_BEGIN, TAPS_END, WINDOW_START};
use super::{Attrs, Operator};
use crate::ir::operators::loss::*;
use crate::ir::types::DType;
use crate::opencl::device::KernelArg;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[
    (Operator::NegativeLogLikelihoodLoss, nll),
    (Operator::SoftmaxCrossEntropyLoss, sce),
    (Operator::Shrink, shrink),
    (Operator::LpPool, lp_pool),
    (Operator::MaxUnpool, max_unpool),
    (Operator::Col2Im, col2im),
];

/// The element type of a float buffer in OpenCL C.
pub(super) fn ptr_ty(d: DType) -> &'static str {
    match d {
        DType::F16 => "half",
        DType::F64 => "double",
        _ => "float",
    }
}

/// The type a float dtype computes in.
pub(super) fn calc_ty(d: DType) -> &'static str {
    if d == DType::F64 {
        "double"
    } else {
        "float"
    }
}

/// OpenCL C reading element `i` of buffer `p` of dtype `d` in its computing type.
pub(super) fn load(d: DType, p: &str, i: &str) -> String {
    match d {
        DType::F16 => format!("vload_half({i}, {p})"),
        _ => format!("{p}[{i}]"),
    }
}

/// OpenCL C writing `v` to element `i` of buffer `p` of dtype `d`.
pub(super) fn store(d: DType, p: &str, i: &str, v: &str) -> String {
    match d {
        DType::F16 => format!("vstore_half((float)({v}), {i}, {p});"),
        _ => format!("{p}[{i}] = ({})({v});", ptr_ty(d)),
    }
}

/// The pragmas a source needs for dtype `d` and, with `acc`, double accumulation.
pub(super) fn pragmas(ctx: &ClCtx, d: DType, acc: bool) -> Result<&'static str, String> {
    if d == DType::F64 && !ctx.has_fp64() {
        return Err("the device has no fp64 support (cl_khr_fp64), so it cannot compute f64 tensors".into());
    }
    Ok(if d == DType::F64 || (acc && ctx.has_fp64()) { FP64_PRAGMA } else { "" })
}

pub(super) fn work(n: u64) -> Result<usize, String> {
    usize::try_from(n).map_err(|_| format!("{n} work-items do not fit in a launch"))
}

// ---------------------------------------------------------------------------------------
// Losses.

fn loss(ctx: &ClCtx, ins: &[Option<ClTensor>], a: &Attrs, outs: &[ClTensor], softmax: bool) -> Res {
    let op = if softmax { "SoftmaxCrossEntropyLoss" } else { "NegativeLogLikelihoodLoss" };
    let (x, t) = (input(ins, 0, "input")?, input(ins, 1, "target")?);
    let w = ins.get(2).and_then(Option::as_ref);
    let ld = loss_dims((x.dtype, &x.shape), (t.dtype, &t.shape), w.map(|w| (w.dtype, &w.shape[..])), a, op)?;
    // The log-probability output has the scores' rank; the loss has a smaller one.
    let y = outs.iter().find(|o| o.shape.len() != x.shape.len());
    let lp = if softmax { outs.iter().find(|o| o.shape.len() == x.shape.len()) } else { None };
    if outs.is_empty() || outs.len() != y.is_some() as usize + lp.is_some() as usize {
        return Err(format!("{op}: expected the loss and (SoftmaxCrossEntropyLoss) the log-probability outputs"));
    }
    if let Some(y) = y {
        check_out(y, x.dtype, &ld.out)?;
    }
    if let Some(lp) = lp {
        check_out(lp, x.dtype, &x.shape)?;
    }
    let d = x.dtype;
    let pragma = pragmas(ctx, d, true)?;
    let (p, c) = (ptr_ty(d), calc_ty(d));
    let acc = if ctx.has_fp64() { "double" } else { "float" };
    let tt = if t.dtype == DType::I32 { "int" } else { "long" };
    let ignore = match ld.ignore {
        Some(v) => format!("  if (tg == {v}L) {{ l = 0; wt = 0; }} else\n"),
        None => String::new(),
    };
    let weight = if w.is_some() { load(d, "w", "wo + tg") } else { "1".into() };
    // The log-probability of class `tg` at (n, j), and the column's log-sum-exp for SCE.
    let (column, at) = if softmax {
        (
            format!(
                "  {c} m = -INFINITY;\n  for (long q = 0; q < C; q++) m = fmax(m, ({c}){});\n  \
                 {c} s = 0;\n  for (long q = 0; q < C; q++) s += exp(({c}){} - m);\n  {c} lse = m + log(s);\n",
                load(d, "x", "xo + (n * C + q) * D + j"),
                load(d, "x", "xo + (n * C + q) * D + j")
            ),
            format!("(({c}){} - lse)", load(d, "x", "xo + (n * C + tg) * D + j")),
        )
    } else {
        (String::new(), format!("({c}){}", load(d, "x", "xo + (n * C + tg) * D + j")))
    };
    let elem = format!(
        "  long n = k / D, j = k % D;\n  long tg = (long)t[to + k];\n{column}  {c} l, wt;\n{ignore}  \
         if (tg < 0 || tg >= C) {{ l = NAN; wt = NAN; }}\n  else {{ wt = ({c}){weight}; l = -{at} * wt; }}\n"
    );
    let params = format!(
        "__global const {p}* x, ulong xo, __global const {tt}* t, ulong to, __global const {p}* w, ulong wo, \
         __global {p}* y, ulong yo, __global {p}* lp, ulong lpo, long N, long C, long D"
    );
    let mut args: Vec<KernelArg> = Vec::with_capacity(13);
    args.extend(x.args());
    args.extend(t.args());
    args.extend(w.unwrap_or(x).args());
    args.extend(y.or(lp).unwrap_or(x).args());
    args.extend(lp.or(y).unwrap_or(x).args());
    args.extend([l(ld.n as i64), l(ld.c as i64), l(ld.d as i64)]);
    let elements = (ld.n * ld.d) as u64;
    let write_y = y.is_some() && ld.reduction == Reduction::None;
    if elements > 0 && (write_y || lp.is_some()) {
        let wy = if write_y { store(d, "y", "yo + k", "l") } else { String::new() };
        let wlp = if lp.is_some() {
            format!(
                "  for (long q = 0; q < C; q++) {}\n",
                store(
                    d,
                    "lp",
                    "lpo + (n * C + q) * D + j",
                    &format!("({c}){} - lse", load(d, "x", "xo + (n * C + q) * D + j"))
                )
            )
        } else {
            String::new()
        };
        let src = format!(
            "{pragma}__kernel void k({params}) {{\n  long k = get_global_id(0);\n  if (k >= N * D) return;\n{elem}  \
             {wy}\n{wlp}}}\n"
        );
        ctx.run(&src, &args, work(elements)?)?;
    }
    if y.is_some() && ld.reduction != Reduction::None {
        let fin = if ld.reduction == Reduction::Sum { "sum" } else { "sum / wsum" };
        let src = format!(
            "{pragma}__kernel void k({params}) {{\n  {acc} sum = 0, wsum = 0;\n  \
             for (long k = 0; k < N * D; k++) {{\n{elem}  sum += l; wsum += wt;\n  }}\n  {}\n}}\n",
            store(d, "y", "yo", fin)
        );
        ctx.run(&src, &args, 1)?;
    }
    Ok(())
}

fn nll(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    loss(ctx, ins, a, outs, false)
}

fn sce(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    loss(ctx, ins, a, outs, true)
}

// ---------------------------------------------------------------------------------------
// Shrink.

fn shrink(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "input")?;
    if !FLOATS.contains(&x.dtype) {
        return Err(format!("input 1 (input) must be f32, f16 or f64, found {}", x.dtype));
    }
    let y = outs.first().ok_or("output 1 is required")?;
    check_out(y, x.dtype, &x.shape)?;
    let d = x.dtype;
    let pragma = pragmas(ctx, d, false)?;
    let (p, c) = (ptr_ty(d), calc_ty(d));
    let n = x.numel();
    if n == 0 {
        return Ok(());
    }
    let src = format!(
        "{pragma}__kernel void k(__global const {p}* x, ulong xo, __global {p}* y, ulong yo, ulong n, float bias, \
         float lambd) {{\n  ulong i = get_global_id(0);\n  if (i >= n) return;\n  {c} v = {};\n  \
         {c} r = v < -lambd ? v + bias : v > lambd ? v - bias : 0;\n  {}\n}}\n",
        load(d, "x", "xo + i"),
        store(d, "y", "yo + i", "r")
    );
    let mut args = Vec::with_capacity(7);
    args.extend(x.args());
    args.extend(y.args());
    args.extend([KernelArg::U64(n), float_arg(a.float("bias", 0.0) as f32), float_arg(a.float("lambd", 0.5) as f32)]);
    ctx.run(&src, &args, work(n)?)
}

// ---------------------------------------------------------------------------------------
// LpPool.

fn f32_in<'a>(ins: &'a [Option<ClTensor>], i: usize, name: &str) -> Result<&'a ClTensor, String> {
    let t = input(ins, i, name)?;
    if t.dtype != DType::F32 {
        return Err(format!("input {} ({name}) must be f32, found {}", i + 1, t.dtype));
    }
    Ok(t)
}

fn f32_out(outs: &[ClTensor]) -> Result<&ClTensor, String> {
    let y = outs.first().ok_or("output 1 is required")?;
    if y.dtype != DType::F32 {
        return Err(format!("output 1 must be f32, found {}", y.dtype));
    }
    Ok(y)
}

fn lp_pool(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    validate_lp_pool(a)?;
    let x = f32_in(ins, 0, "X")?;
    let y = f32_out(outs)?;
    let r = x.shape.len();
    if r < 3 || y.shape.len() != r || y.shape[..2] != x.shape[..2] {
        return Err(format!("X {:?} and the output {:?} must be [N, C, spatial...] alike", x.shape, y.shape));
    }
    let k = a.ints("kernel_shape").ok_or("kernel_shape is required")?;
    let geo = Geo::new(&x.shape[2..], &y.shape[2..], k, a, false)?.fit(&[&x.shape, &y.shape]);
    let total = y.numel();
    if total == 0 {
        return Ok(());
    }
    let src = format!(
        "{ix}__kernel void k(__global const float* x, ulong xo, __global float* y, ulong yo, long total, int p, \
         {GEO_PARAMS}) {{\n  long gid = get_global_id(0);\n  if (gid >= total) return;\n  ix r = (ix)gid;\n{SPLIT_OUT}  \
         __global const float* xp = x + xo + r * in0 * in1 * in2;\n{WINDOW_START}  float sum = 0.0f;\n{TAPS_BEGIN}  \
         sum += pown(fabs(xp[(i0 * in1 + i1) * in2 + i2]), p);\n{TAPS_END}  y[yo + gid] = pow(sum, 1.0f / (float)p);\n}}\n",
        ix = geo.ix()
    );
    let mut args = Vec::with_capacity(30);
    args.extend(x.args());
    args.extend(y.args());
    args.extend([l(total as i64), KernelArg::Bytes((a.int("p", 2) as i32 as u32 as u64).to_ne_bytes(), 4)]);
    args.extend(geo.args());
    ctx.run(&src, &args, work(total)?)
}

// ---------------------------------------------------------------------------------------
// MaxUnpool.

fn max_unpool(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    const OP: &str = "MaxUnpool";
    let x = f32_in(ins, 0, "X")?;
    let i = input(ins, 1, "I")?;
    if i.dtype != DType::I64 || i.shape != x.shape {
        return Err(format!("input 2 (I) must be i64{:?}, found {}{:?}", x.shape, i.dtype, i.shape));
    }
    let y = f32_out(outs)?;
    let want = match ins.get(2).and_then(Option::as_ref) {
        Some(_) => {
            let t = infos.get(2).and_then(Option::as_ref).ok_or("MaxUnpool: output_shape's info is missing")?;
            Some(crate::ir::operators::tensor::value_ints(t, OP, "output_shape")?)
        }
        None => None,
    };
    let (inferred, out) = max_unpool_shapes(&x.shape, want, a)?;
    check_out(y, DType::F32, &out)?;
    if inferred.len() > 5 {
        return Err(format!("{OP}: the OpenCL kernel supports up to 3 spatial dims, found {}", inferred.len() - 2));
    }
    let pad = |v: &[i64]| {
        let mut p = vec![1i64; 5 - v.len()];
        p.extend_from_slice(v);
        p
    };
    let (idims, odims) = (pad(&inferred), pad(&out));
    let mut ost = [1i64; 5];
    for d in (0..4).rev() {
        ost[d] = ost[d + 1] * odims[d + 1];
    }
    let ny = y.numel();
    if ny == 0 {
        return Ok(());
    }
    let zero = "__kernel void k(__global float* y, ulong yo, ulong n) {\n  ulong i = get_global_id(0);\n  \
                if (i < n) y[yo + i] = 0.0f;\n}\n";
    let [ym, yo] = y.args();
    ctx.run(zero, &[ym, yo, KernelArg::U64(ny)], work(ny)?)?;
    let nx = x.numel();
    if nx == 0 {
        return Ok(());
    }
    // Indices outside the unpooled shape (which the host refuses) are skipped.
    let src = "__kernel void k(__global const float* x, ulong xo, __global const long* ind, ulong io, \
        __global float* y, ulong yo, long n, long i0, long i1, long i2, long i3, long i4, long o0, long o1, long o2, \
        long o3, long o4, long s0, long s1, long s2, long s3, long s4) {\n  long k = get_global_id(0);\n  \
        if (k >= n) return;\n  long idx = ind[io + k];\n  if (idx < 0 || idx >= i0 * i1 * i2 * i3 * i4) return;\n  \
        long c4 = idx % i4; idx /= i4;\n  long c3 = idx % i3; idx /= i3;\n  long c2 = idx % i2; idx /= i2;\n  \
        long c1 = idx % i1; long c0 = idx / i1;\n  \
        if (c0 >= o0 || c1 >= o1 || c2 >= o2 || c3 >= o3 || c4 >= o4) return;\n  \
        y[yo + c0 * s0 + c1 * s1 + c2 * s2 + c3 * s3 + c4 * s4] = x[xo + k];\n}\n";
    let mut args = Vec::with_capacity(22);
    args.extend(x.args());
    args.extend(i.args());
    args.extend(y.args());
    args.push(l(nx as i64));
    args.extend(idims.iter().chain(&odims).chain(&ost).map(|&v| l(v)));
    ctx.run(src, &args, work(nx)?)
}

// ---------------------------------------------------------------------------------------
// Col2Im.

fn col2im(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    const OP: &str = "Col2Im";
    let x = f32_in(ins, 0, "input")?;
    input(ins, 1, "image_shape")?;
    input(ins, 2, "block_shape")?;
    let val = |i: usize, what: &str| -> Result<Vec<i64>, String> {
        let t = infos.get(i).and_then(Option::as_ref).ok_or_else(|| format!("{OP}: the {what} info is missing"))?;
        crate::ir::operators::tensor::value_ints(t, OP, what)
    };
    let g = col2im_dims(&x.shape, &val(1, "image_shape")?, &val(2, "block_shape")?, a)?;
    let y = f32_out(outs)?;
    check_out(y, DType::F32, &g.out)?;
    let r = g.image.len();
    if r > 3 {
        return Err(format!("{OP}: the OpenCL kernel supports up to 3 spatial dims, found {r}"));
    }
    let total = y.numel();
    if total == 0 {
        return Ok(());
    }
    let pad3 = |v: &[usize], fill: usize| {
        let mut p = vec![fill; 3 - r];
        p.extend_from_slice(v);
        p
    };
    let lists = [
        pad3(&g.image, 1),
        pad3(&g.block, 1),
        pad3(&g.stride, 1),
        pad3(&g.dil, 1),
        pad3(&g.pad, 0),
        pad3(&g.blocks, 1),
    ];
    let (bprod, nl): (usize, usize) = (g.block.iter().product(), g.blocks.iter().product());
    let taps = "  for (long a0 = 0; a0 < bk0; a0++) {\n    long t0 = p0 + pd0 - a0 * dl0;\n    \
        if (t0 < 0 || t0 % st0 != 0 || t0 / st0 >= nb0) continue;\n    \
        for (long a1 = 0; a1 < bk1; a1++) {\n      long t1 = p1 + pd1 - a1 * dl1;\n      \
        if (t1 < 0 || t1 % st1 != 0 || t1 / st1 >= nb1) continue;\n      \
        for (long a2 = 0; a2 < bk2; a2++) {\n        long t2 = p2 + pd2 - a2 * dl2;\n        \
        if (t2 < 0 || t2 % st2 != 0 || t2 / st2 >= nb2) continue;\n        \
        long b = (a0 * bk1 + a1) * bk2 + a2;\n        long q = (t0 / st0 * nb1 + t1 / st1) * nb2 + t2 / st2;\n        \
        sum += x[xo + (nc * B + b) * L + q];\n  } } }\n";
    let src = format!(
        "__kernel void k(__global const float* x, ulong xo, __global float* y, ulong yo, long total, long B, long L, \
         long im0, long im1, long im2, long bk0, long bk1, long bk2, long st0, long st1, long st2, long dl0, long dl1, \
         long dl2, long pd0, long pd1, long pd2, long nb0, long nb1, long nb2) {{\n  long gid = get_global_id(0);\n  \
         if (gid >= total) return;\n  long r = gid;\n  long p2 = r % im2; r /= im2;\n  long p1 = r % im1; r /= im1;\n  \
         long p0 = r % im0; long nc = r / im0;\n  float sum = 0.0f;\n{taps}  y[yo + gid] = sum;\n}}\n"
    );
    let mut args = Vec::with_capacity(25);
    args.extend(x.args());
    args.extend(y.args());
    args.extend([l(total as i64), l(bprod as i64), l(nl as i64)]);
    args.extend(lists.iter().flatten().map(|&v| l(v as i64)));
    ctx.run(&src, &args, work(total)?)
}

/// Each kernel against the host kernel on the device named by `RXVM_TEST_CL_DEVICE`
/// (default: the first); skipped when no OpenCL runtime is usable.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ir::host_tensor::HostTensor;
    use crate::opencl::device::ClDevice;
    use crate::ops::cl::testing::{device, run_kernel};
    use crate::ops::host::infos;
    use crate::ops::loss::floats;
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

    pub(crate) use crate::ops::host::testing::{attrs, tensor};

    pub(crate) fn random(d: DType, shape: &[i64], seed: u64, lo: f64, hi: f64) -> HostTensor {
        let n = shape.iter().product::<i64>() as usize;
        tensor(d, shape, &rand(seed, n, lo, hi))
    }

    /// Runs `name` on the host and on the device and compares every output (`outputs` of
    /// them, the first ones).
    pub(crate) fn check(dev: &ClDevice, name: &str, ins: &[Option<HostTensor>], a: &Attrs, outputs: usize) {
        let def = OPS.iter().find(|o| o.name == name).unwrap();
        let refs: Vec<Option<&HostTensor>> = ins.iter().map(Option::as_ref).collect();
        let inf = infos(&refs).unwrap();
        let inferred = (def.infer)(&inf, a).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut want: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        (def.op.id().host_kernel().unwrap())(&refs, a, &mut want).unwrap_or_else(|e| panic!("{name} (host): {e}"));
        want.truncate(outputs);
        let got = run_kernel(dev, name, ins, &inf, a, &want);
        for (w, g) in want.iter().zip(got) {
            let g = HostTensor::new(w.dtype, w.shape.clone(), g).unwrap();
            let (wv, gv) = (floats(w), floats(&g));
            let tol = if w.dtype == DType::F16 { 2e-3 } else { 1e-4 };
            for (i, (x, y)) in wv.iter().zip(&gv).enumerate() {
                assert!(
                    (x - y).abs() <= tol * x.abs().max(1.0) || (x.is_nan() && y.is_nan()),
                    "{name} {a} {:?}: element {i}: host {x}, OpenCL {y}",
                    w.shape
                );
            }
        }
    }

    fn s(v: &str) -> AttrValue {
        AttrValue::Str(v.into())
    }

    fn ints(v: &[i64]) -> AttrValue {
        AttrValue::Ints(v.to_vec())
    }

    #[test]
    fn loss_kernels_match_the_host() {
        let Some(dev) = device() else { return };
        let mut dtypes = vec![DType::F32, DType::F16];
        if dev.has_fp64 {
            dtypes.push(DType::F64);
        }
        for d in dtypes {
            for (xs, ts) in [(&[4i64, 5][..], &[4i64][..]), (&[3, 5, 2, 3][..], &[3, 2, 3][..])] {
                let x = random(d, xs, 1, -3.0, 1.0);
                let nt = ts.iter().product::<i64>() as usize;
                let tv: Vec<f64> = rand(2, nt, 0.0, 5.0).iter().map(|v| v.floor()).collect();
                for tdt in [DType::I64, DType::I32] {
                    let t = tensor(tdt, ts, &tv);
                    let w = random(d, &[5], 3, 0.5, 2.0);
                    for red in ["none", "sum", "mean"] {
                        for ii in [None, Some(1), Some(-1)] {
                            let mut a = vec![("reduction", s(red))];
                            if let Some(v) = ii {
                                a.push(("ignore_index", AttrValue::Int(v)));
                            }
                            let a = attrs(&a);
                            for weight in [None, Some(w.clone())] {
                                let ins = vec![Some(x.clone()), Some(t.clone()), weight];
                                check(&dev, "NegativeLogLikelihoodLoss", &ins, &a, 1);
                                check(&dev, "SoftmaxCrossEntropyLoss", &ins, &a, 1);
                                check(&dev, "SoftmaxCrossEntropyLoss", &ins, &a, 2);
                            }
                        }
                    }
                }
            }
            let x = random(d, &[37], 4, -3.0, 3.0);
            check(&dev, "Shrink", &[Some(x.clone())], &attrs(&[("lambd", AttrValue::Float(1.5))]), 1);
            let a = attrs(&[("lambd", AttrValue::Float(0.5)), ("bias", AttrValue::Float(0.25))]);
            check(&dev, "Shrink", &[Some(x)], &a, 1);
        }
    }

    #[test]
    fn window_kernels_match_the_host() {
        let Some(dev) = device() else { return };
        let x = random(DType::F32, &[2, 3, 7, 6], 1, -2.0, 2.0);
        for (k, extra) in [
            (vec![2, 2], vec![("p", AttrValue::Int(3))]),
            (vec![3, 2], vec![("pads", ints(&[1, 0, 2, 1])), ("strides", ints(&[2, 1]))]),
            (vec![2, 2], vec![("dilations", ints(&[2, 2])), ("p", AttrValue::Int(1))]),
            (vec![2, 3], vec![("auto_pad", s("SAME_LOWER")), ("p", AttrValue::Int(4))]),
            (vec![3, 3], vec![("ceil_mode", AttrValue::Int(1)), ("strides", ints(&[2, 2]))]),
        ] {
            let mut a = vec![("kernel_shape", ints(&k))];
            a.extend(extra);
            check(&dev, "LpPool", &[Some(x.clone())], &attrs(&a), 1);
        }
        check(
            &dev,
            "LpPool",
            &[Some(random(DType::F32, &[1, 2, 9], 2, -1.0, 1.0))],
            &attrs(&[("kernel_shape", ints(&[3]))]),
            1,
        );
        let x3 = random(DType::F32, &[1, 2, 4, 5, 3], 3, -1.0, 1.0);
        check(&dev, "LpPool", &[Some(x3)], &attrs(&[("kernel_shape", ints(&[2, 2, 2]))]), 1);
        // MaxUnpool of a 2x2 / 2 MaxPool of [1, 2, 4, 6], with and without output_shape.
        let x = random(DType::F32, &[1, 2, 2, 3], 4, -1.0, 1.0);
        // Element (c, h, w) came from one position of its own 2x2 window.
        let idx: Vec<f64> =
            (0..12).map(|k| (k / 6 * 24 + (2 * (k % 6 / 3) + k % 2) * 6 + 2 * (k % 3) + k / 3 % 2) as f64).collect();
        let i = tensor(DType::I64, &[1, 2, 2, 3], &idx);
        let a = attrs(&[("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))]);
        check(&dev, "MaxUnpool", &[Some(x.clone()), Some(i.clone())], &a, 1);
        for shape in [[1.0, 2.0, 5.0, 7.0], [1.0, 2.0, 3.0, 5.0]] {
            let os = tensor(DType::I64, &[4], &shape);
            check(&dev, "MaxUnpool", &[Some(x.clone()), Some(i.clone()), Some(os)], &a, 1);
        }
        // Col2Im, 2-D with strides, pads and dilations; 1-D; 3-D.
        for (image, block, a, l) in [
            (vec![5.0, 5.0], vec![2.0, 2.0], vec![], 16),
            (vec![5.0, 6.0], vec![2.0, 3.0], vec![("strides", ints(&[2, 1])), ("pads", ints(&[1, 0, 0, 1]))], 3 * 5),
            (vec![6.0, 5.0], vec![2.0, 2.0], vec![("dilations", ints(&[2, 1]))], 4 * 4),
            (vec![7.0], vec![3.0], vec![], 5),
            (vec![3.0, 4.0, 3.0], vec![2.0, 2.0, 2.0], vec![], 2 * 3 * 2),
        ] {
            let bp: f64 = block.iter().product();
            let x = random(DType::F32, &[2, 2 * bp as i64, l], 5, -1.0, 1.0);
            let im = tensor(DType::I64, &[image.len() as i64], &image);
            let bl = tensor(DType::I64, &[block.len() as i64], &block);
            check(&dev, "Col2Im", &[Some(x), Some(im), Some(bl)], &attrs(&a), 1);
        }
    }
}
