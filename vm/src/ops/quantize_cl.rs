//! OpenCL buffer kernels for the quantization family (see `super::cl`). They mirror the
//! host kernels in `super::quantize`: zero points are subtracted into i32 scratch tensors
//! with the broadcast kernel of `super::elementwise_cl`, then one generated matmul or
//! convolution kernel (its shape baked in) sums in 32-bit wrapping integers and requantizes
//! each result. Scale arithmetic rounds to the scales' dtype as the host does; divisions
//! and the requantization run in `double` where the device has fp64.

use super::bitwise_cl::{check_out, input, optional, output, wide, Infos, Res};
use super::cl::Scratch;
use super::cl::{cl_type, ClCtx, ClFn, ClTensor};
use super::elementwise_cl::{bcast, Operand, FP64_PRAGMA};
use super::{Attrs, Operator, TensorInfo};
use crate::ir::minifloat::RoundMode;
use crate::ir::operators::nn::{ConvDims, MatMulDims};
use crate::ir::operators::quantize::*;
use crate::ir::types::DType;
use crate::opencl::device::KernelArg;
use crate::opencl::narrow;
use std::fmt::Write;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[
    (Operator::QuantizeLinear, quantize_linear),
    (Operator::DequantizeLinear, dequantize_linear),
    (Operator::DynamicQuantizeLinear, dynamic_quantize_linear),
    (Operator::QLinearMatMul, qlinear_matmul),
    (Operator::QLinearConv, qlinear_conv),
    (Operator::MatMulInteger, matmul_integer),
    (Operator::ConvInteger, conv_integer),
];

// ---------------------------------------------------------------------------------------
// Helpers.

/// The inputs' infos from the device tensors (the values are not needed).
/// [`infos`] with the values the interpreter knows (`known`, the call's infos).
fn with_values<'a>(ins: &'a [Option<ClTensor>], known: Infos<'_, 'a>) -> Vec<Option<TensorInfo<'a>>> {
    let mut v = infos(ins);
    for (t, k) in v.iter_mut().zip(known) {
        if let (Some(t), Some(k)) = (t.as_mut(), k.as_ref()) {
            t.value = k.value;
        }
    }
    v
}

fn infos(ins: &[Option<ClTensor>]) -> Vec<Option<TensorInfo<'_>>> {
    ins.iter().map(|t| t.as_ref().map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: None })).collect()
}

/// The C expression loading element `idx` of the buffer `p` of dtype `d`, as a number.
fn load(d: DType, p: &str, idx: &str) -> String {
    if d == DType::F16 {
        format!("vload_half({idx}, {p})")
    } else {
        format!("{p}[{idx}]")
    }
}

/// `__global const T* name, ulong nameo` for a tensor of dtype `d`.
fn param(d: DType, name: &str) -> String {
    format!(", __global const {}* {name}, ulong {name}o", cl_type(d))
}

/// OpenCL C helpers rounding to a float dtype: `rf(x)` (to f32), `rh(x)` (to f16), for
/// the working type `w` (`double` or `float`).
fn rounding(w: &str) -> String {
    format!(
        "{w} rf({w} v) {{ return ({w})(float)v; }}\n\
         {w} rh({w} v) {{ ushort h; vstore_half_rte(v, 0, (__private half*)&h); return ({w})vload_half(0, (__private const half*)&h); }}\n"
    )
}

/// The rounding function of dtype `d` (`rf`, `rh`, or none for f64).
fn round_fn(d: DType) -> &'static str {
    match d {
        DType::F32 => "rf",
        DType::F16 => "rh",
        _ => "",
    }
}

/// The `(lo, hi)` range of an integer dtype as C literals.
fn range(d: DType) -> (i64, i64) {
    let (lo, hi) = d.int_range().unwrap_or((0, 0));
    (lo as i64, hi as i64)
}

/// The scale-index expression of element `i` for a layout.
fn layout_index(l: Layout) -> String {
    match l {
        Layout::Tensor => "0".into(),
        Layout::Axis { inner, dim } => format!("(i / {inner}UL) % {dim}UL"),
        Layout::Blocks { inner, dim, blocks, block } => {
            format!("((i / {inner}UL / {dim}UL) * {blocks}UL + (i / {inner}UL) % {dim}UL / {block}UL) * {inner}UL + i % {inner}UL")
        }
    }
}

/// An i32 scratch tensor holding `x - zp` (`zp` broadcast as `zshape`; none: just `x`).
fn minus_zero_point<'a>(
    ctx: &'a ClCtx<'a>,
    x: &ClTensor,
    zp: Option<(&ClTensor, &[i64])>,
) -> Result<(Scratch<'a>, ClTensor), String> {
    let s = Scratch::new(ctx, x.numel() * 4)?;
    let t = s.tensor(DType::I32, &x.shape);
    let tx = cl_type(x.dtype);
    match zp {
        Some((z, zshape)) => {
            let ops =
                [Operand { t: x, shape: &x.shape, ty: tx }, Operand { t: z, shape: zshape, ty: cl_type(z.dtype) }];
            bcast(ctx, &ops, &t, "int", false, "", "(int)v0 - (int)v1")?;
        }
        None => bcast(ctx, &[Operand { t: x, shape: &x.shape, ty: tx }], &t, "int", false, "", "(int)v0")?,
    }
    Ok((s, t))
}

/// The pragmas of a kernel with `prelude`: fp64 when it computes in double, and no
/// contraction of `a * b + c` into fma (the host rounds the product first).
fn pragma_for(prelude: &str) -> String {
    let fp64 = if prelude.contains("double") { FP64_PRAGMA } else { "" };
    format!("{fp64}{NO_FMA}")
}

const NO_FMA: &str = "#pragma OPENCL FP_CONTRACT OFF\n";

/// Extra kernel parameters: their declarations and arguments.
#[derive(Default)]
struct Extra {
    decl: String,
    args: Vec<KernelArg>,
}

impl Extra {
    fn tensor(&mut self, t: &ClTensor, name: &str) {
        self.decl.push_str(&param(t.dtype, name));
        self.args.extend(t.args());
    }
}

/// What a kernel does with each sum: OpenCL C before the kernel, extra kernel arguments,
/// and the statement writing `y[yo + i]` from the sum `v`.
struct Tail<'a> {
    prelude: &'a str,
    extra: Extra,
    epilogue: &'a str,
}

/// Runs the batched i32 matmul of `a` and `b` (i32 tensors of `d`'s operand shapes) with
/// `epilogue` writing `y[yo + i]` from the sum `v`, the row `r` and the column `c`.
fn run_matmul(ctx: &ClCtx, a: &ClTensor, b: &ClTensor, d: &MatMulDims, y: &ClTensor, tail: Tail) -> Res {
    let Tail { prelude, extra, epilogue } = tail;
    let total = y.numel();
    if total == 0 {
        return Ok(());
    }
    let (m, k, n) = (d.m, d.k, d.n);
    let pragma = pragma_for(prelude);
    let mut src = format!(
        "{pragma}{prelude}__kernel void k(__global const int* a, ulong ao, __global const int* b, ulong bo, \
         __global {}* y, ulong yo{}) {{\n  ulong i = get_global_id(0);\n  if (i >= {total}UL) return;\n  \
         ulong c = i % {n}UL, t = i / {n}UL, r = t % {m}UL, bt = t / {m}UL, am = 0, bm = 0;\n",
        cl_type(y.dtype),
        extra.decl
    );
    for j in (0..d.batch.len()).rev() {
        let _ = writeln!(
            src,
            "  {{ ulong q = bt % {}UL; bt /= {}UL; am += q * {}UL; bm += q * {}UL; }}",
            d.batch[j].max(1),
            d.batch[j].max(1),
            d.a_strides[j],
            d.b_strides[j]
        );
    }
    let _ = write!(
        src,
        "  __global const int* ap = a + ao + (am * {m}UL + r) * {k}UL;\n  \
         __global const int* bp = b + bo + bm * {}UL + c;\n  uint acc = 0;\n  \
         for (ulong p = 0; p < {k}UL; p++) acc += (uint)ap[p] * (uint)bp[p * {n}UL];\n  int v = as_int(acc);\n  \
         {epilogue}\n}}\n",
        k * n
    );
    let mut args: Vec<KernelArg> = a.args().into_iter().chain(b.args()).chain(y.args()).collect();
    args.extend(extra.args);
    ctx.run(&src, &args, total as usize)
}

/// Runs the i32 convolution of `x` and `w` (i32 tensors) with `epilogue` writing
/// `y[yo + i]` from the sum `v` and the output channel `m`.
fn run_conv(ctx: &ClCtx, x: &ClTensor, w: &ClTensor, cd: &ConvDims, y: &ClTensor, tail: Tail) -> Res {
    let Tail { prelude, extra, epilogue } = tail;
    let total = y.numel();
    if total == 0 {
        return Ok(());
    }
    let g = &cd.geo;
    let nsp = g.k.len();
    let in_sz: usize = g.in_sp.iter().product();
    let k_sz: usize = g.k.iter().product();
    let (cg, mg) = (cd.c / cd.group, (cd.m / cd.group).max(1));
    let pragma = pragma_for(prelude);
    let mut src = format!(
        "{pragma}{prelude}__kernel void k(__global const int* x, ulong xo, __global const int* w, ulong wo, \
         __global {}* y, ulong yo{}) {{\n  ulong i = get_global_id(0);\n  if (i >= {total}UL) return;\n  ulong t = i;\n",
        cl_type(y.dtype),
        extra.decl
    );
    for d in (0..nsp).rev() {
        let _ = writeln!(src, "  long o{d} = (long)(t % {}UL); t /= {}UL;", g.out_sp[d], g.out_sp[d]);
    }
    let _ = write!(
        src,
        "  ulong m = t % {m}UL, n = t / {m}UL, grp = m / {mg}UL;\n  uint acc = 0;\n  \
         for (ulong ci = 0; ci < {cg}UL; ci++) {{\n    \
         __global const int* xp = x + xo + (n * {c}UL + grp * {cg}UL + ci) * {in_sz}UL;\n    \
         __global const int* wp = w + wo + (m * {cg}UL + ci) * {k_sz}UL;\n",
        m = cd.m,
        c = cd.c
    );
    let mut xoff = String::from("0");
    let mut woff = String::from("0");
    for d in 0..nsp {
        let _ = writeln!(
            src,
            "    for (long k{d} = 0; k{d} < {}; k{d}++) {{ long p{d} = o{d} * {} + k{d} * {} - {}; \
             if (p{d} < 0 || p{d} >= {}) continue;",
            g.k[d], g.s[d], g.d[d], g.pb[d], g.in_sp[d]
        );
        xoff = format!("({xoff}) * {} + p{d}", g.in_sp[d]);
        woff = format!("({woff}) * {} + k{d}", g.k[d]);
    }
    let _ = writeln!(src, "    acc += (uint)xp[{xoff}] * (uint)wp[{woff}];");
    src.push_str(&"    }".repeat(nsp));
    let _ = write!(src, "\n  }}\n  int v = as_int(acc);\n  {epilogue}\n}}\n");
    let mut args: Vec<KernelArg> = x.args().into_iter().chain(w.args()).chain(y.args()).collect();
    args.extend(extra.args);
    ctx.run(&src, &args, total as usize)
}

/// `mult(a, b, y)`: `a * b / y` rounded as the scales' dtype `d` rounds, in the working
/// type `w`.
fn multiplier(ctx: &ClCtx, d: DType) -> (String, &'static str) {
    let (w, _) = wide(ctx);
    let r = round_fn(d);
    (
        format!(
            "{}{w} mult(float a, float b, float y) {{ return {r}({r}(({w})a * ({w})b) / ({w})y); }}\n",
            rounding(w)
        ),
        w,
    )
}

/// The requantizing epilogue: `y = saturate(round(v * mlt + zp))`.
fn requantize(y: DType, w: &str, mlt: &str, zp: &str) -> String {
    let (lo, hi) = range(y);
    format!("{w} q = rint(({w})v * {mlt} + ({w}){zp});\n  y[yo + i] = ({})clamp(q, ({w}){lo}, ({w}){hi});", cl_type(y))
}

// ---------------------------------------------------------------------------------------
// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.

fn quantize_linear(ctx: &ClCtx, ins: &[Option<ClTensor>], known: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let (x, s) = (input(ins, 0, "x")?, input(ins, 1, "y_scale")?);
    let p = plan_quantize(&with_values(ins, known), attrs)?;
    let y = output(outs, 0)?;
    check_out(y, p.out, &x.shape)?;
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let (w, pragma) = wide(ctx);
    let r = round_fn(p.precision);
    let mut extra = Extra::default();
    extra.tensor(x, "x");
    extra.tensor(s, "s");
    let z = optional(ins, 2);
    if let Some(z) = z {
        extra.tensor(z, "z");
    }
    if p.out.is_float8() {
        // y = saturate(x / scale) (the zero point is 0: checked by the plan when its value
        // is known, ignored here), rounded to nearest even like the host.
        let sat = attrs.int("saturate", 1) != 0;
        let src = format!(
            "{pragma}{NO_FMA}{}{}__kernel void k(__global uchar* y, ulong yo{}) {{\n  ulong i = get_global_id(0);\n  \
             if (i >= {n}UL) return;\n  ulong si = {};\n  \
             {w} q = {r}({r}(({w}){}) / {r}(({w}){}));\n  y[yo + i] = {};\n}}\n",
            rounding(w),
            narrow::defs(p.out, false),
            extra.decl,
            layout_index(p.layout),
            load(x.dtype, "x", "xo + i"),
            load(s.dtype, "s", "so + si"),
            narrow::store(p.out, "(float)q", false, sat, RoundMode::Nearest),
        );
        let mut args: Vec<KernelArg> = Vec::from(y.args());
        args.extend(extra.args);
        return ctx.run(&src, &args, n as usize);
    }
    let zp = if z.is_some() { "(long)z[zo + si]" } else { "0" };
    let (lo, hi) = range(p.out);
    let src = format!(
        "{pragma}{NO_FMA}{}__kernel void k(__global {}* y, ulong yo{}) {{\n  ulong i = get_global_id(0);\n  \
         if (i >= {n}UL) return;\n  ulong si = {};\n  \
         {w} q = {r}({r}(({w}){}) / {r}(({w}){}));\n  {w} rq = rint(q);\n  \
         long iv = isnan(rq) ? 0 : (long)clamp(rq, ({w})-9.2e18, ({w})9.2e18);\n  \
         long o = clamp(iv + {zp}, (long){lo}L, (long){hi}L);\n  y[yo + i] = ({})o;\n}}\n",
        rounding(w),
        cl_type(p.out),
        extra.decl,
        layout_index(p.layout),
        load(x.dtype, "x", "xo + i"),
        load(s.dtype, "s", "so + si"),
        cl_type(p.out)
    );
    let mut args: Vec<KernelArg> = Vec::from(y.args());
    args.extend(extra.args);
    ctx.run(&src, &args, n as usize)
}

fn dequantize_linear(ctx: &ClCtx, ins: &[Option<ClTensor>], known: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let (x, s) = (input(ins, 0, "x")?, input(ins, 1, "x_scale")?);
    let (d, layout) = plan_dequantize(&with_values(ins, known), attrs)?;
    let y = output(outs, 0)?;
    check_out(y, d, &x.shape)?;
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let mut extra = Extra::default();
    extra.tensor(x, "x");
    extra.tensor(s, "s");
    let z = optional(ins, 2);
    if let Some(z) = z {
        extra.tensor(z, "z");
    }
    let (mut xv, sv) = (load(x.dtype, "x", "xo + i"), load(s.dtype, "s", "so + si"));
    // A float8 x decodes to float; its zero point is 0 (checked by the plan when its value
    // is known, ignored here).
    let f8 = x.dtype.is_float8();
    if f8 {
        xv = narrow::load(x.dtype, &xv);
    }
    let zv = if z.is_some() && !f8 { "z[zo + si]" } else { "0" };
    // An i32 x with a zero point subtracts in f64, as numpy does; the rest is f32.
    let (pragma, value) = if x.dtype == DType::I32 && z.is_some() {
        let (w, pragma) = wide(ctx);
        (pragma, format!("({w})((long){xv} - (long){zv}) * ({w}){sv}"))
    } else {
        ("", format!("((float){xv} - (float){zv}) * (float){sv}"))
    };
    let store = if d == DType::F16 {
        "vstore_half_rte(r, yo + i, y);".to_string()
    } else {
        format!("y[yo + i] = ({})r;", cl_type(d))
    };
    let src = format!(
        "{pragma}{}__kernel void k(__global {}* y, ulong yo{}) {{\n  ulong i = get_global_id(0);\n  \
         if (i >= {n}UL) return;\n  ulong si = {};\n  {} r = {value};\n  {store}\n}}\n",
        narrow::defs(x.dtype, false),
        cl_type(d),
        extra.decl,
        layout_index(layout),
        if pragma.is_empty() { "float" } else { "double" },
    );
    let mut args: Vec<KernelArg> = Vec::from(y.args());
    args.extend(extra.args);
    ctx.run(&src, &args, n as usize)
}

/// Work-items of the first pass of DynamicQuantizeLinear's min/max reduction.
const PARTS: u64 = 256;

fn dynamic_quantize_linear(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "x")?;
    let inferred = infer_dynamic_quantize(&infos(ins), attrs)?;
    for (i, (o, (d, s))) in outs.iter().zip(&inferred).enumerate() {
        check_out(o, *d, s).map_err(|e| format!("output {}: {e}", i + 1))?;
    }
    let y = output(outs, 0)?;
    let n = x.numel();
    let (w, pragma) = wide(ctx);
    let parts = n.clamp(1, PARTS);
    let scratch = Scratch::new(ctx, 8 * parts)?;
    // Pass 1: max(x, 0) and min(x, 0) of strided slices (NaN propagates).
    let src = format!(
        "__kernel void k(__global const float* x, ulong xo, ulong n, __global float* part) {{\n  \
         ulong g = get_global_id(0);\n  float mx = 0.0f, mn = 0.0f;\n  \
         for (ulong i = g; i < n; i += {parts}UL) {{ float v = x[xo + i];\n    \
         mx = (isnan(v) || isnan(mx)) ? NAN : fmax(mx, v);\n    mn = (isnan(v) || isnan(mn)) ? NAN : fmin(mn, v); }}\n  \
         part[2 * g] = mx;\n  part[2 * g + 1] = mn;\n}}\n"
    );
    let [xm, xo] = x.args();
    ctx.run(&src, &[xm, xo, KernelArg::U64(n), scratch.arg()], parts as usize)?;
    // Pass 2: the scale and zero point, into the scratch (and the optional outputs).
    let mut decl = String::new();
    let mut writes = String::new();
    let mut args = vec![scratch.arg()];
    if let Some(o) = outs.get(1) {
        decl.push_str(", __global float* ys, ulong yso");
        writes.push_str("  ys[yso] = s;\n");
        args.extend(o.args());
    }
    if let Some(o) = outs.get(2) {
        decl.push_str(", __global uchar* yz, ulong yzo");
        writes.push_str("  yz[yzo] = (uchar)z;\n");
        args.extend(o.args());
    }
    let src = format!(
        "{pragma}__kernel void k(__global float* part{decl}) {{\n  float mx = 0.0f, mn = 0.0f;\n  \
         for (ulong g = 0; g < {parts}UL; g++) {{ float a = part[2 * g], b = part[2 * g + 1];\n    \
         mx = (isnan(a) || isnan(mx)) ? NAN : fmax(mx, a);\n    mn = (isnan(b) || isnan(mn)) ? NAN : fmin(mn, b); }}\n  \
         float s = (float)(({w})(mx == mn ? 1.0f : mx - mn) / ({w})255.0);\n  \
         float iz = 0.0f - (float)(({w})mn / ({w})s);\n  \
         float z = rint(iz > 255.0f ? 255.0f : (iz >= 0.0f ? iz : 0.0f));\n  \
         part[0] = s;\n  part[1] = z;\n{writes}}}\n"
    );
    ctx.run(&src, &args, 1)?;
    if n == 0 {
        return Ok(());
    }
    // Pass 3: quantize.
    let src = format!(
        "{pragma}__kernel void k(__global const float* x, ulong xo, __global const float* part, __global uchar* y, \
         ulong yo, ulong n) {{\n  ulong i = get_global_id(0);\n  if (i >= n) return;\n  \
         float q = rint((float)(({w})x[xo + i] / ({w})part[0])) + part[1];\n  \
         y[yo + i] = isnan(q) ? (uchar)0 : (uchar)clamp(q, 0.0f, 255.0f);\n}}\n"
    );
    let ([xm, xo], [ym, yo]) = (x.args(), y.args());
    ctx.run(&src, &[xm, xo, scratch.arg(), ym, yo, KernelArg::U64(n)], n as usize)
}

// ---------------------------------------------------------------------------------------
// QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger.

fn qlinear_matmul(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    let names = ["a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"];
    let t: Vec<&ClTensor> = names.iter().enumerate().map(|(i, n)| input(ins, i, n)).collect::<Result<_, _>>()?;
    let p = plan_qlinear_matmul(&infos(ins))?;
    let y = output(outs, 0)?;
    check_out(y, p.out, &p.dims.out_shape)?;
    if y.numel() == 0 {
        return Ok(());
    }
    let (m, n) = (p.dims.m as i64, p.dims.n as i64);
    let za: Vec<i64> = if p.a_len == 1 { vec![] } else { vec![m, 1] };
    let zb: Vec<i64> = if p.b_len == 1 { vec![] } else { vec![n] };
    let (_sa, a) = minus_zero_point(ctx, t[0], Some((t[2], &za)))?;
    let (_sb, b) = minus_zero_point(ctx, t[3], Some((t[5], &zb)))?;
    let mut extra = Extra::default();
    for (i, name) in [(1, "sa"), (4, "sb"), (6, "sy"), (7, "yz")] {
        extra.tensor(t[i], name);
    }
    let (prelude, w) = multiplier(ctx, t[1].dtype);
    let d = t[1].dtype;
    let mlt = format!(
        "mult({}, {}, {})",
        load(d, "sa", if p.a_len == 1 { "sao" } else { "sao + r" }),
        load(d, "sb", if p.b_len == 1 { "sbo" } else { "sbo + c" }),
        load(d, "sy", "syo")
    );
    let epilogue = requantize(p.out, w, &mlt, "yz[yzo]");
    run_matmul(ctx, &a, &b, &p.dims, y, Tail { prelude: &prelude, extra, epilogue: &epilogue })
}

/// A per-channel zero point of w `[M, ...]` broadcasts as `[M, 1, ...]`.
fn channel_shape(w: &ClTensor, len: usize) -> Vec<i64> {
    if len <= 1 {
        return vec![];
    }
    let mut s = vec![1i64; w.shape.len()];
    if let Some(f) = s.first_mut() {
        *f = len as i64;
    }
    s
}

fn qlinear_conv(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let names = ["x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point"];
    let t: Vec<&ClTensor> = names.iter().enumerate().map(|(i, n)| input(ins, i, n)).collect::<Result<_, _>>()?;
    let p = plan_qlinear_conv(&infos(ins), attrs)?;
    let y = output(outs, 0)?;
    check_out(y, p.out, &p.dims.out_shape)?;
    if y.numel() == 0 {
        return Ok(());
    }
    let (_sx, x) = minus_zero_point(ctx, t[0], Some((t[2], &[])))?;
    let zw = channel_shape(t[3], p.w_zp_len);
    let (_sw, w) = minus_zero_point(ctx, t[3], Some((t[5], &zw)))?;
    let mut extra = Extra::default();
    for (i, name) in [(1, "sx"), (4, "sw"), (6, "sy"), (7, "yz")] {
        extra.tensor(t[i], name);
    }
    let bias = optional(ins, 8);
    if let Some(b) = bias {
        extra.tensor(b, "bias");
    }
    let (prelude, wt) = multiplier(ctx, DType::F32);
    let mlt = format!("mult(sx[sxo], sw[swo{}], sy[syo])", if p.w_len == 1 { "" } else { " + m" });
    let add_bias = if bias.is_some() { "v = as_int((uint)v + (uint)bias[biaso + m]);\n  " } else { "" };
    let epilogue = format!("{add_bias}{}", requantize(p.out, wt, &mlt, "yz[yzo]"));
    run_conv(ctx, &x, &w, &p.dims, y, Tail { prelude: &prelude, extra, epilogue: &epilogue })
}

fn matmul_integer(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    let (a, b) = (input(ins, 0, "A")?, input(ins, 1, "B")?);
    let (dims, za, zb) = plan_matmul_integer(&infos(ins))?;
    let y = output(outs, 0)?;
    check_out(y, DType::I32, &dims.out_shape)?;
    if y.numel() == 0 {
        return Ok(());
    }
    let zpa = optional(ins, 2).zip(za.as_deref());
    let zpb = optional(ins, 3).zip(zb.as_deref());
    let (_sa, a) = minus_zero_point(ctx, a, zpa)?;
    let (_sb, b) = minus_zero_point(ctx, b, zpb)?;
    run_matmul(ctx, &a, &b, &dims, y, Tail { prelude: "", extra: Extra::default(), epilogue: "y[yo + i] = v;" })
}

fn conv_integer(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let (x, w) = (input(ins, 0, "x")?, input(ins, 1, "w")?);
    let (dims, w_len) = plan_conv_integer(&infos(ins), attrs)?;
    let y = output(outs, 0)?;
    check_out(y, DType::I32, &dims.out_shape)?;
    if y.numel() == 0 {
        return Ok(());
    }
    let zw = channel_shape(w, w_len);
    let (_sx, x) = minus_zero_point(ctx, x, optional(ins, 2).map(|z| (z, &[][..])))?;
    let (_sw, w) = minus_zero_point(ctx, w, optional(ins, 3).map(|z| (z, &zw[..])))?;
    run_conv(ctx, &x, &w, &dims, y, Tail { prelude: "", extra: Extra::default(), epilogue: "y[yo + i] = v;" })
}

/// Each kernel against the host kernel on the device named by `RXVM_TEST_CL_DEVICE`
/// (default: the first); skipped when no OpenCL runtime is usable.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ir::host_tensor::HostTensor;
    use crate::ops::bitwise_cl::tests::{bits, check, check_tol, values};
    use crate::ops::cl::testing::device;

    fn a(list: &[(&str, AttrValue)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    fn some(v: &[HostTensor]) -> Vec<Option<HostTensor>> {
        v.iter().cloned().map(Some).collect()
    }

    #[test]
    fn kernels_match_the_host() {
        let Some(dev) = device() else { return };
        use DType::*;
        let none = Attrs::default();
        // QuantizeLinear: per tensor, per axis, blocked; every output dtype; f16 and i32 x.
        for (out, lo, hi) in [(U8, 0.0, 255.0), (I8, -128.0, 127.0), (U16, 0.0, 60000.0), (I16, -30000.0, 30000.0)] {
            let x = values(F32, &[3, 4, 5], 1, -300.0, 300.0);
            let z = |shape: &[i64], seed| values(out, shape, seed, lo, hi);
            check(&dev, "QuantizeLinear", &[x.clone(), values(F32, &[], 2, 0.5, 3.0), z(&[], 3)], &none);
            check(&dev, "QuantizeLinear", &[x.clone(), values(F32, &[4], 2, 0.5, 3.0), z(&[4], 3)], &none);
            let blocked = a(&[("axis", AttrValue::Int(-1)), ("block_size", AttrValue::Int(2))]);
            check(
                &dev,
                "QuantizeLinear",
                &[x.clone(), values(F32, &[3, 4, 3], 2, 0.5, 3.0), z(&[3, 4, 3], 3)],
                &blocked,
            );
        }
        let half = values(F16, &[4, 6], 4, -100.0, 100.0);
        check(&dev, "QuantizeLinear", &[half.clone(), values(F16, &[], 5, 0.5, 2.0)], &none);
        check(&dev, "QuantizeLinear", &[half, values(F32, &[6], 5, 0.5, 2.0)], &none);
        let ints = values(I32, &[4, 6], 4, -1000.0, 1000.0);
        check(
            &dev,
            "QuantizeLinear",
            &[ints, values(F32, &[], 5, 0.5, 9.0)],
            &a(&[("output_dtype", AttrValue::Int(3))]),
        );
        // Ties: x / scale exactly halfway.
        let ties = HostTensor::from_f32(&[6], &[1.0, 3.0, 5.0, -1.0, -3.0, -5.0]).unwrap();
        check(
            &dev,
            "QuantizeLinear",
            &[ties, HostTensor::from_f32(&[], &[2.0]).unwrap(), values(I8, &[], 1, 0.0, 1.0)],
            &none,
        );
        // DequantizeLinear.
        for x in [U8, I8, U16, I16, I32] {
            let xs = bits(x, &[2, 3, 4], 6);
            check(&dev, "DequantizeLinear", &[xs.clone(), values(F32, &[], 7, 0.1, 2.0), bits(x, &[], 8)], &none);
            check(&dev, "DequantizeLinear", &[xs.clone(), values(F16, &[3], 7, 0.1, 2.0), bits(x, &[3], 8)], &none);
            let blocked = a(&[("axis", AttrValue::Int(2)), ("block_size", AttrValue::Int(3))]);
            check(&dev, "DequantizeLinear", &[xs.clone(), values(F32, &[2, 3, 2], 7, 0.1, 2.0)], &blocked);
            check(
                &dev,
                "DequantizeLinear",
                &[xs, values(F32, &[], 7, 0.1, 2.0)],
                &a(&[("output_dtype", AttrValue::Int(10))]),
            );
        }
        // DynamicQuantizeLinear.
        for (seed, lo, hi) in [(1, -3.0, 5.0), (2, 1.0, 5.0), (3, -5.0, -1.0)] {
            check(&dev, "DynamicQuantizeLinear", &[values(F32, &[1000], seed, lo, hi)], &none);
        }
        check(&dev, "DynamicQuantizeLinear", &[values(F32, &[0], 1, 0.0, 1.0)], &none);
        // QLinearMatMul: 2-D and batched, per tensor and per row/column, f32 and f16 scales.
        for (q, sd) in [(U8, F32), (I8, F32), (U8, F16), (I8, F16)] {
            let (ashape, bshape): (&[i64], &[i64]) = (&[2, 3, 5], &[5, 4]);
            let scales = |len: i64, seed| values(sd, &[len], seed, 0.001, 0.05);
            for (al, bl) in [(1, 1), (3, 4)] {
                let ins = [
                    bits(q, ashape, 1),
                    scales(al, 2),
                    bits(q, if al == 1 { &[1] } else { &[3][..] }, 3),
                    bits(q, bshape, 4),
                    scales(bl, 5),
                    bits(q, if bl == 1 { &[1] } else { &[4][..] }, 6),
                    values(sd, &[1], 7, 0.5, 2.0),
                    bits(q, &[1], 8),
                ];
                check(&dev, "QLinearMatMul", &ins, &none);
            }
        }
        // MatMulInteger: zero points per tensor, per row, per column, absent; broadcast batch.
        for (ta, tb) in [(U8, U8), (I8, U8), (I8, I8)] {
            let (x, w) = (bits(ta, &[2, 1, 3, 7], 1), bits(tb, &[4, 7, 5], 2));
            check(&dev, "MatMulInteger", &[x.clone(), w.clone()], &none);
            check(&dev, "MatMulInteger", &[x.clone(), w.clone(), bits(ta, &[], 3), bits(tb, &[1], 4)], &none);
            check(
                &dev,
                "MatMulInteger",
                &[bits(ta, &[3, 7], 1), w.clone(), bits(ta, &[3], 3), bits(tb, &[5], 4)],
                &none,
            );
            check_tol(
                &dev,
                "MatMulInteger",
                &[Some(bits(ta, &[7], 1)), Some(w), None, Some(bits(tb, &[5], 4))],
                &none,
                0.0,
            );
        }
        // ConvInteger and QLinearConv: pads, strides, dilations, groups, 1-D and 2-D.
        let conv_attrs = [
            none.clone(),
            a(&[("pads", AttrValue::Ints(vec![1, 0, 2, 1])), ("strides", AttrValue::Ints(vec![2, 1]))]),
            a(&[("dilations", AttrValue::Ints(vec![2, 1])), ("group", AttrValue::Int(2))]),
            a(&[("auto_pad", AttrValue::Str("SAME_UPPER".into()))]),
        ];
        for (i, at) in conv_attrs.iter().enumerate() {
            for (tx, tw) in [(U8, U8), (I8, U8), (U8, I8)] {
                let x = bits(tx, &[2, 4, 6, 5], i as u64);
                let cin = if i == 2 { 2 } else { 4 };
                let w = bits(tw, &[6, cin, 3, 2], 9 + i as u64);
                check(&dev, "ConvInteger", &[x.clone(), w.clone()], at);
                check(&dev, "ConvInteger", &[x.clone(), w.clone(), bits(tx, &[], 3), bits(tw, &[6], 4)], at);
                for (wl, yz) in [(1, U8), (6, I8)] {
                    let ins = some(&[
                        x.clone(),
                        values(F32, &[], 5, 0.01, 0.1),
                        bits(tx, &[], 6),
                        w.clone(),
                        values(F32, &[wl], 7, 0.01, 0.1),
                        bits(tw, &[wl], 8),
                        values(F32, &[], 9, 0.5, 4.0),
                        bits(yz, &[], 10),
                    ]);
                    check_tol(&dev, "QLinearConv", &ins, at, 0.0);
                    let mut with_b = ins.clone();
                    with_b.push(Some(values(I32, &[6], 11, -500.0, 500.0)));
                    check_tol(&dev, "QLinearConv", &with_b, at, 0.0);
                }
            }
        }
        check(&dev, "ConvInteger", &[bits(U8, &[1, 2, 9], 1), bits(U8, &[3, 2, 4], 2)], &none);
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

    /// float8 QuantizeLinear (saturating or not) and DequantizeLinear against the host.
    #[test]
    fn float8_quantize_and_dequantize() {
        let Some(dev) = device() else { return };
        for d in [DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ] {
            let x = values(DType::F32, &[4, 6], 1, -3000.0, 3000.0);
            let s = values(DType::F32, &[6], 2, 0.5, 2.0);
            let z = HostTensor::zeros(d, &[6]).unwrap();
            for sat in [0, 1] {
                let at = a(&[("axis", AttrValue::Int(1)), ("saturate", AttrValue::Int(sat))]);
                check(&dev, "QuantizeLinear", &[x.clone(), s.clone(), z.clone()], &at);
            }
            let q = bits(d, &[4, 6], 3);
            check_tol(
                &dev,
                "DequantizeLinear",
                &some(&[q.clone(), s.clone()]),
                &a(&[("axis", AttrValue::Int(1))]),
                0.0,
            );
            let sh = values(DType::F16, &[], 4, 0.5, 2.0);
            check_tol(
                &dev,
                "DequantizeLinear",
                &some(&[q, sh, HostTensor::zeros(d, &[]).unwrap()]),
                &Attrs::default(),
                0.0,
            );
        }
    }
}
