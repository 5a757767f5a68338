//! OpenCL buffer kernels for the nn operators (see `super::cl`): convolutions, pooling and
//! matrix products, with the reduction looped in f32 (the semantics of the host kernels in
//! `super::nn`). Conv computes a block of output channels per work-item (see [`conv_any`]);
//! the others one output element per work-item.
//!
//! Geometry (sizes, strides, dilations, pads) is passed as kernel arguments, so one program
//! per operator (and per optional-operand variant, channel block and index width) serves
//! every shape. Spatial operators take 1 to 3 spatial dims, padded in front to 3 with
//! size-1 axes. Index arithmetic is `int` unless an operand has 2^31 elements or more.

mod winograd;

use super::cl::{float_arg as f, long_arg as l, vector_group, ClCtx, ClFn, ClTensor};
use super::{Attrs, Operator, TensorInfo};
use crate::ir::operators::shape::broadcast_strides;
use crate::ir::types::DType;
use crate::opencl::device::KernelArg;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[
    (Operator::Conv, |ctx, ins, _, attrs, outs| conv_any(ctx, ins, attrs, outs, false, false)),
    (Operator::FusedConv, |ctx, ins, _, attrs, outs| conv_any(ctx, ins, attrs, outs, false, true)),
    (Operator::ConvTranspose, |ctx, ins, _, attrs, outs| conv_any(ctx, ins, attrs, outs, true, false)),
    (Operator::MaxPool, max_pool),
    (Operator::AveragePool, average_pool),
    (Operator::GlobalAveragePool, global_average_pool),
    (Operator::GlobalMaxPool, global_max_pool),
    (Operator::Gemm, gemm),
    (Operator::MatMul, matmul),
];

// ---------------------------------------------------------------------------------------
// Operands and arguments.

/// Required input `i` (`name` in messages), f32.
fn input<'a>(ins: &'a [Option<ClTensor>], i: usize, name: &str) -> Result<&'a ClTensor, String> {
    let t = ins.get(i).and_then(Option::as_ref).ok_or_else(|| format!("the input {name} is required"))?;
    f32_only(t, name)?;
    Ok(t)
}

/// Required input `i` of any dtype (a product's; [`Elems::of`] checks them).
fn any_input<'a>(ins: &'a [Option<ClTensor>], i: usize, name: &str) -> Result<&'a ClTensor, String> {
    ins.get(i).and_then(Option::as_ref).ok_or_else(|| format!("the input {name} is required"))
}

fn f32_only(t: &ClTensor, name: &str) -> Result<(), String> {
    if t.dtype != DType::F32 {
        return Err(format!("the OpenCL kernel supports f32 tensors only; {name} is {}{:?}", t.dtype, t.shape));
    }
    Ok(())
}

/// The f32 output `Y` (the first output).
fn output(outs: &[ClTensor]) -> Result<&ClTensor, String> {
    let y = outs.first().ok_or("the output Y is required")?;
    f32_only(y, "the output Y")?;
    Ok(y)
}

fn mem(t: &ClTensor) -> [KernelArg; 2] {
    t.args()
}

/// Checks a shape's dims are non-negative and its element count fits in an i64.
fn count(shape: &[i64], name: &str) -> Result<i64, String> {
    shape.iter().try_fold(1i64, |a, &d| {
        if d < 0 {
            return Err(format!("{name} has a negative dimension: {shape:?}"));
        }
        a.checked_mul(d).ok_or_else(|| format!("{name} {shape:?} is too large"))
    })
}

/// The work-item count of a launch.
fn global(n: i64) -> Result<usize, String> {
    usize::try_from(n).map_err(|_| format!("{n} work-items do not fit in a launch"))
}

// ---------------------------------------------------------------------------------------
// The dtypes of the products (Conv, ConvTranspose, Gemm, MatMul): f32, f16 and bf16
// (stored narrow, computed in f32) and f64 (computed in double, on devices with fp64).

/// How a product kernel reads and writes its dtype's elements.
struct Elems {
    d: DType,
}

impl Elems {
    /// The dtype of a product's operands (all the same) and output, checked for the device.
    fn of(ctx: &ClCtx, ins: &[Option<ClTensor>], outs: &[ClTensor]) -> Result<Elems, String> {
        let y = outs.first().ok_or("the output Y is required")?;
        let d = y.dtype;
        if !crate::ir::operators::nn::MATMUL_FLOATS.contains(&d) {
            return Err(format!("the OpenCL kernel supports f32, f16, bf16 and f64; the output is {d}{:?}", y.shape));
        }
        if let Some((i, t)) =
            ins.iter().enumerate().find_map(|(i, t)| t.as_ref().filter(|t| t.dtype != d).map(|t| (i, t)))
        {
            return Err(format!("input {} is {}{:?} but the output is {d}", i + 1, t.dtype, t.shape));
        }
        super::cl::need_fp64(ctx, d)?;
        Ok(Elems { d })
    }

    /// The buffers' element type.
    fn t(&self) -> &'static str {
        super::cl::storage_type(self.d)
    }

    /// The accumulator type.
    fn acc(&self) -> &'static str {
        if self.d == DType::F64 {
            "double"
        } else {
            "float"
        }
    }

    /// The source's prelude: the fp64 pragma, bf16's load and store.
    fn prelude(&self) -> String {
        format!("{}{}", super::cl::pragmas(self.d), crate::opencl::narrow::defs(self.d, false))
    }

    /// `p[i]` as the accumulator type.
    fn ld(&self, p: &str, i: &str) -> String {
        match self.d {
            DType::F16 => format!("vload_half({i}, {p})"),
            DType::BF16 => format!("ld_bf16({p}[{i}])"),
            _ => format!("{p}[{i}]"),
        }
    }

    /// The statement `p[i] = v`.
    fn st(&self, p: &str, i: &str, v: &str) -> String {
        match self.d {
            DType::F16 => format!("vstore_half({v}, {i}, {p});"),
            DType::BF16 => format!("{p}[{i}] = st_bf16({v}, 0, 0);"),
            _ => format!("{p}[{i}] = {v};"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Window geometry, padded to 3 spatial dims.

/// Per spatial axis (3, the first ones size 1 when the operand has fewer): input and output
/// sizes, kernel, stride, dilation, begin and end padding. Conv and pooling read input
/// position `o * s + kk * d - pb` for output `o`; ConvTranspose writes output position
/// `i * s + kk * d - pb` from input `i`.
#[derive(Debug, Default)]
pub(super) struct Geo {
    inp: [i64; 3],
    out: [i64; 3],
    k: [i64; 3],
    s: [i64; 3],
    d: [i64; 3],
    pb: [i64; 3],
    pe: [i64; 3],
    /// Index arithmetic in `long` (some operand has 2^31 elements or more) rather than
    /// `int`, which vectorises twice as wide on CPUs and is native on GPUs.
    wide: bool,
}

/// The kernel parameters matching [`Geo::args`].
pub(super) const GEO_PARAMS: &str = "ix in0, ix in1, ix in2, ix out0, ix out1, ix out2, ix k0, ix k1, ix k2, \
     ix s0, ix s1, ix s2, ix d0, ix d1, ix d2, ix pb0, ix pb1, ix pb2, ix pe0, ix pe1, ix pe2";

/// OpenCL C splitting flat output index `r` (an `ix`) into `o0, o1, o2` and the rest.
pub(super) const SPLIT_OUT: &str =
    "  ix o2 = r % out2; r /= out2;\n  ix o1 = r % out1; r /= out1;\n  ix o0 = r % out0; r /= out0;\n";

/// OpenCL C: where output position `o0..o2`'s window starts in the input, `st0..st2`.
pub(super) const WINDOW_START: &str = "  ix st0 = o0 * s0 - pb0, st1 = o1 * s1 - pb1, st2 = o2 * s2 - pb2;\n";

/// OpenCL C: the three loops over a window's taps `a0..a2` that fall inside the input, at
/// input position `i0..i2` (from [`WINDOW_START`] and the dilations). The loop body
/// follows; [`TAPS_END`] closes the loops. The windowed kernels (the pools, buffer and
/// texture alike, and the texture Conv) walk their windows with it.
pub(super) const TAPS_BEGIN: &str = "  for (ix a0 = 0; a0 < k0; a0++) {\n\
    ix i0 = st0 + a0 * d0;\n\
    if (i0 < 0 || i0 >= in0) continue;\n\
    for (ix a1 = 0; a1 < k1; a1++) {\n\
      ix i1 = st1 + a1 * d1;\n\
      if (i1 < 0 || i1 >= in1) continue;\n\
      for (ix a2 = 0; a2 < k2; a2++) {\n\
        ix i2 = st2 + a2 * d2;\n\
        if (i2 < 0 || i2 >= in2) continue;\n";

/// Closes [`TAPS_BEGIN`]'s loops.
pub(super) const TAPS_END: &str = "  } } }\n";

/// OpenCL C for AveragePool's divisor: per axis, the taps inside the input (`h0..h2`) and
/// inside the input or its padding (`q0..q2`; taps past the end padding, possible with
/// `ceil_mode`, never count).
pub(super) const TAP_COUNTS: &str = "  ix h0 = 0, h1 = 0, h2 = 0, q0 = 0, q1 = 0, q2 = 0;\n\
  for (ix a = 0; a < k0; a++) { ix i = st0 + a * d0; h0 += i >= 0 && i < in0; q0 += i < in0 + pe0; }\n\
  for (ix a = 0; a < k1; a++) { ix i = st1 + a * d1; h1 += i >= 0 && i < in1; q1 += i < in1 + pe1; }\n\
  for (ix a = 0; a < k2; a++) { ix i = st2 + a * d2; h2 += i >= 0 && i < in2; q2 += i < in2 + pe2; }\n";

impl Geo {
    /// Output positions (the product of the output spatial dims).
    pub(super) fn out_volume(&self) -> i64 {
        self.out.iter().product()
    }

    /// Unit strides and an output the size of the input (a "same" padded window).
    fn same_size(&self) -> bool {
        self.s == [1; 3] && self.inp == self.out
    }

    /// A 1x1 window with unit strides and no padding: output position p reads input p.
    fn pointwise(&self) -> bool {
        self.k == [1; 3] && self.s == [1; 3] && self.pb == [0; 3] && self.pe == [0; 3]
    }

    /// The [`GEO_PARAMS`] arguments, `int`s or `long`s as [`Geo::ix`] declares.
    pub(super) fn args(&self) -> Vec<KernelArg> {
        [self.inp, self.out, self.k, self.s, self.d, self.pb, self.pe]
            .iter()
            .flatten()
            .map(|&v| self.ix_arg(v))
            .collect()
    }

    /// An `ix` kernel argument: an `int` or a `long` as [`Geo::ix`] declares.
    pub(super) fn ix_arg(&self, v: i64) -> KernelArg {
        if self.wide {
            l(v)
        } else {
            KernelArg::I32(v as i32)
        }
    }

    /// OpenCL C declaring the index type `ix` that the snippets and [`GEO_PARAMS`] use.
    pub(super) fn ix(&self) -> &'static str {
        if self.wide {
            "typedef long ix;\n"
        } else {
            "typedef int ix;\n"
        }
    }

    /// Index arithmetic in `int` when every operand (`shapes`) has fewer than 2^31
    /// elements; [`Geo::new`] starts from `long`.
    pub(super) fn fit(mut self, shapes: &[&[i64]]) -> Geo {
        let elems = |s: &&[i64]| s.iter().try_fold(1i64, |a, &d| a.checked_mul(d.max(0)));
        self.wide = !shapes.iter().all(|s| elems(s).is_some_and(|n| n < i32::MAX as i64));
        self
    }

    /// Geometry from the input and output spatial dims and the kernel, with the padding the
    /// host kernels compute (`nn::window_geo` / `nn::transpose_geo`). `transpose` selects
    /// the ConvTranspose rules. The output dims must be the ones the attributes give.
    pub(super) fn new(in_sp: &[i64], out_sp: &[i64], k: &[i64], attrs: &Attrs, transpose: bool) -> Result<Geo, String> {
        let n = in_sp.len();
        if n == 0 || n > 3 {
            return Err(format!("the OpenCL kernel supports 1 to 3 spatial dims, found {n}"));
        }
        if out_sp.len() != n || k.len() != n {
            return Err(format!(
                "the input has {n} spatial dims but the output has {} and the kernel {}",
                out_sp.len(),
                k.len()
            ));
        }
        let sizes = |v: &[i64], what: &str| -> Result<Vec<usize>, String> {
            v.iter().map(|&d| usize::try_from(d).map_err(|_| format!("{what} {v:?} has a negative size"))).collect()
        };
        let (i, kk) = (sizes(in_sp, "the input's spatial dims")?, sizes(k, "the kernel")?);
        let h = if transpose {
            crate::ir::operators::nn::transpose_geo(&i, &kk, attrs)?
        } else {
            crate::ir::operators::nn::window_geo(&i, &kk, attrs, crate::ir::operators::nn::flag(attrs, "ceil_mode")?)?
        };
        if h.out_sp.iter().zip(out_sp).any(|(&a, &b)| a as i64 != b) {
            return Err(format!(
                "the attributes give output spatial dims {:?}, but the output has {out_sp:?}",
                h.out_sp
            ));
        }
        let mut g = Geo { inp: [1; 3], out: [1; 3], k: [1; 3], s: [1; 3], d: [1; 3], wide: true, ..Geo::default() };
        for a in 0..n {
            let j = 3 - n + a;
            (g.inp[j], g.out[j], g.k[j]) = (in_sp[a], out_sp[a], k[a]);
            (g.s[j], g.d[j], g.pb[j], g.pe[j]) = (h.s[a] as i64, h.d[a] as i64, h.pb[a], h.pe[a]);
        }
        Ok(g)
    }
}

// ---------------------------------------------------------------------------------------
// Convolutions.

/// Checks the shared shapes of a (transposed) convolution: X [N, C, ...], W [w0, w1, k...],
/// Y [N, M, ...], optional B [M]. Returns (N, C, M, group).
fn conv_shapes(
    x: &ClTensor,
    w: &ClTensor,
    b: Option<&ClTensor>,
    y: &ClTensor,
    attrs: &Attrs,
    transpose: bool,
) -> Result<(i64, i64, i64, i64), String> {
    let r = x.shape.len();
    if r < 3 || w.shape.len() != r || y.shape.len() != r {
        return Err(format!("X {:?}, W {:?} and Y {:?} must have one rank of 3 or more", x.shape, w.shape, y.shape));
    }
    count(&x.shape, "X")?;
    count(&w.shape, "W")?;
    count(&y.shape, "Y")?;
    let group = attrs.int("group", 1);
    let (n, c, m) = (x.shape[0], x.shape[1], y.shape[1]);
    if group < 1 || c % group != 0 || m % group != 0 || y.shape[0] != n {
        return Err(format!("group {group} does not fit X {:?} and Y {:?}", x.shape, y.shape));
    }
    let ok =
        if transpose { w.shape[0] == c && w.shape[1] * group == m } else { w.shape[0] == m && w.shape[1] * group == c };
    if !ok {
        return Err(format!(
            "the weight {:?} does not fit X {:?}, Y {:?} and group {group}",
            w.shape, x.shape, y.shape
        ));
    }
    if let Some(b) = b {
        if b.shape != [m] {
            return Err(format!("the bias {:?} must be [{m}]", b.shape));
        }
    }
    Ok((n, c, m, group))
}

/// FusedConv's epilogue: `+ Z` (the argument `z` at element `at` when `with_z`) and the
/// activation (its parameters the arguments `p0`, `p1`), applied to `acc` before the store.
fn fused_epilogue(e: &Elems, attrs: &Attrs, with_z: bool, at: &str) -> Result<String, String> {
    let (act, _) = crate::ir::operators::nn::fused_activation(attrs)?;
    let z = if with_z { format!("  acc += {};\n", e.ld("z", &format!("zo + {at}"))) } else { String::new() };
    let f = match act {
        "Relu" => "acc = fmax(acc, 0.0f);",
        "LeakyRelu" => "acc = acc > 0.0f ? acc : acc * p0;",
        "Clip" => "acc = acc < p0 ? p0 : acc; acc = acc > p1 ? p1 : acc;",
        "Sigmoid" => "acc = 1.0f / (1.0f + exp(-acc));",
        "Tanh" => "acc = tanh(acc);",
        "HardSigmoid" => "acc = clamp(p0 * acc + p1, 0.0f, 1.0f);",
        _ => "",
    };
    Ok(format!("{z}  {f}\n"))
}

/// The geometry of an f32 2-D 3x3 convolution with unit strides and dilations, one group
/// and pads up to 2, which Winograd may take.
fn winograd_plane(e: &Elems, group: i64, x: &ClTensor, y: &ClTensor, geo: &Geo) -> Option<winograd::Plane> {
    let pads_ok = geo.pb[1..].iter().chain(&geo.pe[1..]).all(|p| (0..=2).contains(p));
    if e.d != DType::F32 || group != 1 || x.shape.len() != 4 || geo.k != [1, 3, 3] || geo.s != [1; 3] || geo.d != [1; 3]
    {
        return None;
    }
    let u = |v: i64| usize::try_from(v).ok();
    pads_ok.then_some(winograd::Plane {
        n: u(x.shape[0])?,
        c: u(x.shape[1])?,
        k: u(y.shape[1])?,
        ih: u(x.shape[2])?,
        iw: u(x.shape[3])?,
        oh: u(y.shape[2])?,
        ow: u(y.shape[3])?,
        pt: u(geo.pb[1])?,
        pl: u(geo.pb[2])?,
    })
}

/// The output-channel blocks (output channels per work-item) a direct convolution with
/// `mg` output channels per group may run with: those of 32, 16 and 8 that divide `mg`;
/// if none does, the largest that covers `mg` with at most a quarter more (shufflenet's
/// 68 in blocks of 16: a last block of a group that does not fill computes past the
/// group's end, reading its last channel's weights, and stores only what is there); else
/// the largest of 4, 2 and 1 that divides `mg` (1 for depthwise). Larger blocks reuse
/// each input load more but keep more sums in registers and leave fewer work-items;
/// which is fastest depends on the layer and the device, so [`conv_any`] times them
/// (each candidate a kernel to build: the first inference pays for them).
fn channel_blocks(mg: i64) -> Vec<i64> {
    let dividing: Vec<i64> = [32, 16, 8].into_iter().filter(|b| mg % b == 0).collect();
    if !dividing.is_empty() {
        return dividing;
    }
    match [32, 16, 8].into_iter().find(|b| (mg + b - 1) / b * b * 4 <= mg * 5) {
        Some(ragged) => vec![ragged],
        None => vec![[4, 2].into_iter().find(|b| mg % b == 0).unwrap_or(1)],
    }
}

/// The work-items of a convolution's work-group, at most: [`vector_group`] along the output
/// positions, the rest over channel blocks (or rows).
const GROUP_ITEMS: usize = 256;

/// Conv, FusedConv (`fused`) and ConvTranspose.
///
/// Conv runs over a 3-D range: output positions (dim 0, so neighbouring work-items read
/// neighbouring inputs and write neighbouring outputs: coalesced on a GPU, vector lanes on
/// a CPU), blocks of output channels (dim 1) and the batch (dim 2). Each work-item keeps
/// its block's sums in registers, so one input load feeds that many multiply-adds, and
/// every work-item of a group reads the same weights (a broadcast). The block is tuned
/// once per layer shape and device: the first call times each of [`channel_blocks`] and
/// the device remembers the fastest (results do not depend on it: every block sums in
/// the same order). ConvTranspose runs one work-item per output element.
fn conv_any(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    attrs: &Attrs,
    outs: &[ClTensor],
    transpose: bool,
    fused: bool,
) -> Result<(), String> {
    let (ins, z) = if fused { (ins.get(..3).unwrap_or(ins), ins.get(3).and_then(Option::as_ref)) } else { (ins, None) };
    let e = Elems::of(ctx, ins, outs)?;
    let (x, w, b) = (any_input(ins, 0, "X")?, any_input(ins, 1, "W")?, ins.get(2).and_then(Option::as_ref));
    let y = outs.first().ok_or("the output Y is required")?;
    let (n, c, m, group) = conv_shapes(x, w, b, y, attrs, transpose)?;
    if let Some(z) = z {
        if z.shape != y.shape || z.dtype != y.dtype {
            return Err(format!("Z is {}{:?} but Y is {}{:?}: they must match", z.dtype, z.shape, y.dtype, y.shape));
        }
    }
    let geo =
        Geo::new(&x.shape[2..], &y.shape[2..], &w.shape[2..], attrs, transpose)?.fit(&[&x.shape, &w.shape, &y.shape]);
    let (mg, osp) = (m / group, geo.out_volume());
    let bias = if b.is_some() { format!("  acc += {};\n", e.ld("b", "bo + m")) } else { String::new() };
    let epilogue = if fused { fused_epilogue(&e, attrs, z.is_some(), "oi")? } else { String::new() };
    let source = |body: String| {
        format!(
            "{pre}{ix}__kernel void k(__global const {t}* x, ulong xo, __global const {t}* w, ulong wo, \
             __global const {t}* b, ulong bo, __global {t}* y, ulong yo, __global const {t}* z, ulong zo, \
             float p0, float p1, long total, ix C, ix M, ix cg, ix mg, {GEO_PARAMS}) {{\n{body}}}\n",
            pre = e.prelude(),
            ix = geo.ix(),
            t = e.t(),
        )
    };
    let total = count(&y.shape, "Y")?;
    let mut args = Vec::with_capacity(40);
    args.extend(mem(x));
    args.extend(mem(w));
    args.extend(mem(b.unwrap_or(w)));
    args.extend(mem(y));
    args.extend(mem(z.unwrap_or(y)));
    let params = if fused { attrs.floats("activation_params").unwrap_or_default() } else { vec![] };
    let p = |i: usize| params.get(i).copied().unwrap_or(0.0) as f32;
    args.extend([f(p(0)), f(p(1))]);
    args.push(l(total));
    args.extend([c, m, c / group, mg].map(|v| geo.ix_arg(v)));
    args.extend(geo.args());
    if transpose {
        return ctx.run(&source(transposed_conv_body(&e, &bias, &epilogue)), &args, global(total)?);
    }
    if let Some(plane) = winograd_plane(&e, group, x, y, &geo).filter(winograd::Plane::takes) {
        return winograd::conv(ctx, &plane, x, w, b, y, z, &epilogue, [p(0), p(1)]);
    }
    if mg == 1 && c == group && geo.out[0] == 1 && geo.k[0] == 1 {
        // Depthwise (one input and one output channel per group), 1-D or 2-D.
        let lanes = vector_group(geo.out[2]);
        let (rows, planes) = (global(geo.out[1])?, global(n * m)?);
        let group_rows = (GROUP_ITEMS / lanes).min(rows);
        let range = [global(geo.out[2])?.div_ceil(lanes) * lanes, rows.div_ceil(group_rows) * group_rows, planes];
        let body = depthwise_conv_body(&e, [geo.k[1], geo.k[2]], [geo.s[2], geo.d[2]], &bias, &epilogue);
        return ctx.run_groups(&source(body), &args, &range, &[lanes, group_rows, 1]);
    }
    let src = |mb: i64| source(direct_conv_body(&e, &geo, mb, mg, &bias, &epilogue));
    let lanes = vector_group(osp);
    let launch = |src: &str, mb: i64| {
        let g0 = global(osp)?.div_ceil(lanes) * lanes;
        let blocks = global(group * ((mg + mb - 1) / mb))?;
        let rows = (GROUP_ITEMS / lanes).min(blocks).max(1);
        ctx.run_groups(src, &args, &[g0, blocks.div_ceil(rows) * rows, global(n)?], &[lanes, rows, 1])
    };
    let run = |mb: i64| launch(&src(mb), mb);
    let blocks = channel_blocks(mg);
    let key =
        format!("conv {} {:?} {:?} {:?} {geo:?} {} {:?}", e.d, x.shape, w.shape, y.shape, b.is_some(), z.is_some());
    if let Some(mb) = ctx.dev.tuned(&key) {
        return run(mb);
    }
    // Timing runs the kernel once per block; that is only sound when no input is the
    // output's memory (FusedConv's Z may be, accumulating in place). Views may be
    // sub-buffers: compare byte ranges in the buffers they are part of.
    let size = e.d.size() as u64;
    let range = |t: &ClTensor| {
        let (base, at) = ctx.dev.buffer_origin(t.mem);
        (base, at + t.offset * size, at + (t.offset + t.numel()) * size)
    };
    let out = range(y);
    let overlaps = |t: &ClTensor| {
        let r = range(t);
        r.0 == out.0 && r.1 < out.2 && out.1 < r.2
    };
    if blocks.len() == 1 || [Some(x), Some(w), b, z].into_iter().flatten().any(overlaps) {
        return run(blocks[blocks.len() - 1]);
    }
    let mut best = (f64::INFINITY, blocks[0]);
    for &mb in &blocks {
        // Built before the clock starts: the time is the launch's alone.
        let src = src(mb);
        ctx.dev.kernel(&src)?;
        // Launches return before the kernel runs: wait for what is queued, then for it.
        ctx.dev.finish().map_err(|e| e.to_string())?;
        let start = std::time::Instant::now();
        launch(&src, mb)?;
        ctx.dev.finish().map_err(|e| e.to_string())?;
        let secs = start.elapsed().as_secs_f64();
        if secs < best.0 {
            best = (secs, mb);
        }
    }
    ctx.dev.set_tuned(key, best.1);
    if best.1 != blocks[blocks.len() - 1] {
        run(best.1)?;
    }
    Ok(())
}

/// The body of the direct convolution kernel with `mb` output channels per work-item
/// (see [`conv_any`]). W is [M, C/group, k...]: output o reads input o * s + kk * d - pb.
fn direct_conv_body(e: &Elems, geo: &Geo, mb: i64, mg: i64, bias: &str, epilogue: &str) -> String {
    let (t, acc_t, ragged) = (e.t(), e.acc(), mg % mb != 0);
    // Work-item (p, block, n) computes output channels m0.. of group g. A ragged last
    // block of a group reads the group's last channel's weights past its end (`last`).
    let head = if ragged {
        let per_group = (mg + mb - 1) / mb;
        format!(
            "  ix p = (ix)get_global_id(0), n = (ix)get_global_id(2), block = (ix)get_global_id(1);\n\
             ix g = block / {per_group}, m0 = g * mg + (block - g * {per_group}) * {mb}, last = (g + 1) * mg - 1 - m0;\n"
        )
    } else {
        format!(
            "  ix p = (ix)get_global_id(0), n = (ix)get_global_id(2), m0 = (ix)get_global_id(1) * {mb}, g = m0 / mg;\n"
        )
    };
    let row = |j: i64| if ragged { format!("min((ix){j}, last)") } else { j.to_string() };
    let sums = (0..mb)
        .map(|j| format!("    sum{j} += xv * {};\n", e.ld("wp", &format!("{} * wm + t", row(j)))))
        .collect::<String>();
    let stores = (0..mb)
        .map(|j| {
            format!(
                "  {}{{\n  ix m = m0 + {j}, oi = (n * M + m) * osp + p;\n  {acc_t} acc = sum{j};\n{bias}{epilogue}  {}\n  }}\n",
                if ragged { format!("if ({j} <= last) ") } else { String::new() },
                e.st("y", "yo + oi", "acc")
            )
        })
        .collect::<String>();
    let decl = (0..mb).map(|j| format!("sum{j} = 0.0f")).collect::<Vec<_>>().join(", ");
    if geo.pointwise() {
        // A matrix product per image: W [M, C] times X [C, positions]. Neighbouring
        // work-items read neighbouring inputs (one vector load on a CPU).
        return format!(
            "{head}  ix osp = out0 * out1 * out2, wm = cg;\n\
             if (p >= osp || m0 >= M) return;\n\
             {acc_t} {decl};\n\
             __global const {t}* xp = x + xo + (n * C + g * cg) * osp + p;\n\
             __global const {t}* wp = w + wo + m0 * wm;\n\
             for (ix t = 0; t < cg; t++) {{\n\
               {acc_t} xv = {xv};\n{sums}\
             }}\n{stores}",
            xv = e.ld("xp", "t * osp"),
        );
    }
    // The channel loop is innermost, so a tap's bounds and input index are computed once
    // for all channels. Taps outside the input are masked rather than skipped: no branches
    // around the loads, so the work-items of a vector (or a GPU wave) stay in step.
    format!(
        "{head}  ix r = p, osp = out0 * out1 * out2;\n\
         if (p >= osp || m0 >= M) return;\n{SPLIT_OUT}{WINDOW_START}\
         ix kv = k0 * k1 * k2, wm = cg * kv, isp = in0 * in1 * in2;\n\
         {acc_t} {decl};\n\
         __global const {t}* xg = x + xo + (n * C + g * cg) * isp;\n\
         for (ix a0 = 0; a0 < k0; a0++) for (ix a1 = 0; a1 < k1; a1++) for (ix a2 = 0; a2 < k2; a2++) {{\n\
           ix i0 = st0 + a0 * d0, i1 = st1 + a1 * d1, i2 = st2 + a2 * d2;\n\
           int in = i0 >= 0 && i0 < in0 && i1 >= 0 && i1 < in1 && i2 >= 0 && i2 < in2;\n\
           ix xi = {xi}, t = (a0 * k1 + a1) * k2 + a2;\n\
           for (ix c = 0; c < cg; c++) {{\n\
             __global const {t}* wp = w + wo + m0 * wm + c * kv;\n\
             {acc_t} xv = in ? {xv} : 0.0f;\n{sums}\
           }}\n\
         }}\n{stores}",
        // With unit strides and input and output of one size, output position p's tap
        // reads input p plus an offset shared by every work-item.
        xi = if geo.same_size() {
            "p + ((a0 * d0 - pb0) * in1 + a1 * d1 - pb1) * in2 + a2 * d2 - pb2"
        } else {
            "(i0 * in1 + i1) * in2 + i2"
        },
        xv = e.ld("xg", "c * isp + xi"),
    )
}

/// The body of the depthwise convolution kernel (1-D or 2-D: `out0` and `k0` are 1), one
/// work-item per output over a 3-D range: output columns (dim 0, the vector lanes),
/// output rows and (image, channel) planes. The direct kernel's flat positions cost six
/// integer divisions per work-item, which a CPU runtime cannot vectorise, against a
/// depthwise window's nine multiply-adds. The taps are summed in the direct kernel's
/// order; a window row outside the input (the same for a group's lanes) is skipped and a
/// column outside it masked to zero.
///
/// The window's size and its column stride and dilation are literals in the source: with
/// them known, neighbouring work-items' loads are provably neighbouring addresses (one
/// vector load rather than a gather) and the taps unroll.
fn depthwise_conv_body(e: &Elems, [k1, k2]: [i64; 2], [s2, d2]: [i64; 2], bias: &str, epilogue: &str) -> String {
    let (t, acc_t) = (e.t(), e.acc());
    format!(
        "  ix o2 = (ix)get_global_id(0), o1 = (ix)get_global_id(1), nm = (ix)get_global_id(2);\n\
         if (o2 >= out2 || o1 >= out1) return;\n\
         ix m = nm % M, st1 = o1 * s1 - pb1, st2 = o2 * {s2} - pb2;\n\
         __global const {t}* xg = x + xo + nm * in1 * in2;\n\
         __global const {t}* wp = w + wo + m * {k1} * {k2};\n\
         {acc_t} sum0 = 0.0f;\n\
         for (ix a1 = 0; a1 < {k1}; a1++) {{\n\
           ix i1 = st1 + a1 * d1;\n\
           if (i1 < 0 || i1 >= in1) continue;\n\
           for (ix a2 = 0; a2 < {k2}; a2++) {{\n\
             ix i2 = st2 + a2 * {d2};\n\
             {acc_t} xv = i2 >= 0 && i2 < in2 ? {xv} : 0.0f;\n\
             sum0 += xv * {wv};\n\
           }}\n\
         }}\n\
         ix oi = (nm * out1 + o1) * out2 + o2;\n\
         {acc_t} acc = sum0;\n{bias}{epilogue}  {store}\n",
        xv = e.ld("xg", "i1 * in2 + i2"),
        wv = e.ld("wp", &format!("a1 * {k2} + a2")),
        store = e.st("y", "yo + oi", "acc"),
    )
}

/// The body of the ConvTranspose kernel, one work-item per output element. W is
/// [C, M/group, k...]: output o takes input i where o = i * s + kk * d - pb.
fn transposed_conv_body(e: &Elems, bias: &str, epilogue: &str) -> String {
    let (t, acc_t) = (e.t(), e.acc());
    let tap =
        format!("acc += {} * {};", e.ld("xp", "(i0 * in1 + i1) * in2 + i2"), e.ld("wp", "(a0 * k1 + a1) * k2 + a2"));
    format!(
        "  long gid = get_global_id(0);\n\
         if (gid >= total) return;\n\
         ix r = (ix)gid;\n{SPLIT_OUT}\
         ix m = r % M, n = r / M, g = m / mg, ml = m % mg;\n\
         {acc_t} acc = 0.0f;\n\
         for (ix c = 0; c < cg; c++) {{\n\
           ix ci = g * cg + c;\n\
           __global const {t}* xp = x + xo + (n * C + ci) * in0 * in1 * in2;\n\
           __global const {t}* wp = w + wo + (ci * mg + ml) * k0 * k1 * k2;\n\
           for (ix a0 = 0; a0 < k0; a0++) {{\n\
             ix t0 = o0 + pb0 - a0 * d0;\n\
             if (t0 < 0 || t0 % s0 != 0 || t0 / s0 >= in0) continue;\n\
             ix i0 = t0 / s0;\n\
             for (ix a1 = 0; a1 < k1; a1++) {{\n\
               ix t1 = o1 + pb1 - a1 * d1;\n\
               if (t1 < 0 || t1 % s1 != 0 || t1 / s1 >= in1) continue;\n\
               ix i1 = t1 / s1;\n\
               for (ix a2 = 0; a2 < k2; a2++) {{\n\
                 ix t2 = o2 + pb2 - a2 * d2;\n\
                 if (t2 < 0 || t2 % s2 != 0 || t2 / s2 >= in2) continue;\n\
                 ix i2 = t2 / s2;\n\
                 {tap}\n\
               }}\n\
             }}\n\
           }}\n\
         }}\n\
         ix oi = gid;\n{bias}{epilogue}  {store}\n",
        store = e.st("y", "yo + oi", "acc"),
    )
}

// ---------------------------------------------------------------------------------------
// Pooling.

/// The pooling geometry of X into an output of `out_shape`.
fn pool_geo(x: &ClTensor, out_shape: &[i64], attrs: &Attrs) -> Result<Geo, String> {
    let r = x.shape.len();
    if r < 3 || out_shape.len() != r || out_shape[..2] != x.shape[..2] {
        return Err(format!("X {:?} and the output {out_shape:?} must be [N, C, spatial...] alike", x.shape));
    }
    count(&x.shape, "X")?;
    count(out_shape, "the output")?;
    let k = attrs.ints("kernel_shape").ok_or("kernel_shape is required")?;
    Ok(Geo::new(&x.shape[2..], &out_shape[2..], k, attrs, false)?.fit(&[&x.shape, out_shape]))
}

fn max_pool(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    _: &[Option<TensorInfo>],
    attrs: &Attrs,
    outs: &[ClTensor],
) -> Result<(), String> {
    let x = any_input(ins, 0, "X")?;
    if !crate::ir::operators::nn::MAX_POOL_DTYPES.contains(&x.dtype) {
        return Err(format!("X must be f32, f16, bf16, u8 or i8, found {}{:?}", x.dtype, x.shape));
    }
    let col_major = match attrs.int("storage_order", 0) {
        0 => false,
        1 => true,
        v => return Err(format!("storage_order must be 0 or 1, found {v}")),
    };
    // Y and Indices are told apart by dtype (either may be omitted by the call).
    let y = outs.iter().find(|t| t.dtype == x.dtype);
    let idx = outs.iter().find(|t| t.dtype == DType::I64);
    if outs.len() != y.is_some() as usize + idx.is_some() as usize || outs.is_empty() {
        return Err(format!(
            "MaxPool outputs must be {} Y and i64 Indices, found {:?}",
            x.dtype,
            outs.iter().map(|t| t.dtype.to_string()).collect::<Vec<_>>()
        ));
    }
    let shape = &y.or(idx).ok_or("MaxPool has no output")?.shape;
    if idx.is_some_and(|i| &i.shape != shape) {
        return Err("Y and Indices have different shapes".into());
    }
    let geo = pool_geo(x, shape, attrs)?;
    let (t, ld, st) = match x.dtype {
        DType::F16 => ("half", "vload_half(p, xp)", "vstore_half(best, yo + gid, y);"),
        DType::BF16 => ("ushort", "ld_bf16(xp[p])", "y[yo + gid] = st_bf16(best, 0, 0);"),
        DType::U8 => ("uchar", "(float)xp[p]", "y[yo + gid] = (uchar)best;"),
        DType::I8 => ("char", "(float)xp[p]", "y[yo + gid] = (char)best;"),
        _ => ("float", "xp[p]", "y[yo + gid] = best;"),
    };
    let yw = if y.is_some() { format!("  {st}\n") } else { String::new() };
    // Column-major Indices put the first spatial axis fastest (padded axes have size 1).
    let at = if col_major { "(at / (in1 * in2) + (at / in2) % in1 * in0 + at % in2 * in0 * in1)" } else { "at" };
    let iw = if idx.is_some() {
        format!("  ind[io + gid] = at < 0 ? -1L : plane * in0 * in1 * in2 + {at};\n")
    } else {
        String::new()
    };
    let src = format!(
        "{pre}{ix}__kernel void k(__global const {t}* x, ulong xo, __global {t}* y, ulong yo, __global long* ind, \
         ulong io, long total, {GEO_PARAMS}) {{\n\
         long gid = get_global_id(0);\n\
         if (gid >= total) return;\n\
         ix r = (ix)gid;\n{SPLIT_OUT}\
         long plane = r;\n\
         __global const {t}* xp = x + xo + plane * in0 * in1 * in2;\n\
{WINDOW_START}\
         float best = -INFINITY;\n\
         long at = -1;\n\
         {TAPS_BEGIN}\
               long p = (i0 * in1 + i1) * in2 + i2;\n\
               float v = {ld};\n\
               if (at < 0 || v > best) {{ best = v; at = p; }}\n\
         {TAPS_END}{yw}{iw}}}\n",
        pre = crate::opencl::narrow::defs(x.dtype, false),
        ix = geo.ix(),
    );
    let total = count(shape, "the output")?;
    // An omitted output's parameter gets the other output's buffer (never accessed).
    let (yt, it) = (y.or(idx).ok_or("MaxPool has no output")?, idx.or(y).ok_or("MaxPool has no output")?);
    let mut args = Vec::with_capacity(30);
    args.extend(mem(x));
    args.extend(mem(yt));
    args.extend(mem(it));
    args.push(l(total));
    args.extend(geo.args());
    ctx.run(&src, &args, global(total)?)
}

fn average_pool(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    _: &[Option<TensorInfo>],
    attrs: &Attrs,
    outs: &[ClTensor],
) -> Result<(), String> {
    let x = input(ins, 0, "X")?;
    let y = output(outs)?;
    let geo = pool_geo(x, &y.shape, attrs)?;
    let include_pad = match attrs.int("count_include_pad", 0) {
        0 => 0,
        1 => 1,
        v => return Err(format!("count_include_pad must be 0 or 1, found {v}")),
    };
    let src = format!(
        "{ix}__kernel void k(__global const float* x, ulong xo, __global float* y, ulong yo, long total, int include_pad, \
         {GEO_PARAMS}) {{\n\
         long gid = get_global_id(0);\n\
         if (gid >= total) return;\n\
         ix r = (ix)gid;\n{SPLIT_OUT}\
         __global const float* xp = x + xo + r * in0 * in1 * in2;\n\
{WINDOW_START}{TAP_COUNTS}\
         float sum = 0.0f;\n\
         {TAPS_BEGIN}\
               sum += xp[(i0 * in1 + i1) * in2 + i2];\n\
         {TAPS_END}\
         long cnt = include_pad ? q0 * q1 * q2 : h0 * h1 * h2;\n\
         y[yo + gid] = sum / (float)cnt;\n}}\n",
        ix = geo.ix()
    );
    let total = count(&y.shape, "Y")?;
    let mut args = Vec::with_capacity(30);
    args.extend(mem(x));
    args.extend(mem(y));
    args.extend([l(total), KernelArg::I32(include_pad)]);
    args.extend(geo.args());
    ctx.run(&src, &args, global(total)?)
}

/// GlobalAveragePool / GlobalMaxPool: one work-item per [N, C] plane.
fn global_pool(ins: &[Option<ClTensor>], outs: &[ClTensor], ctx: &ClCtx, max: bool) -> Result<(), String> {
    let x = input(ins, 0, "X")?;
    let y = output(outs)?;
    let r = x.shape.len();
    if r < 2 || y.shape.len() != r || y.shape[..2] != x.shape[..2] || y.shape[2..].iter().any(|&d| d != 1) {
        return Err(format!("X {:?} must be [N, C, spatial...] and Y {:?} [N, C, 1, ...]", x.shape, y.shape));
    }
    count(&x.shape, "X")?;
    let planes = x.shape[0] * x.shape[1];
    let vol = count(&x.shape[2..], "X")?;
    // Max propagates NaN (like the host); an empty plane gives -inf (max) or NaN (mean).
    let (init, step, fin) = if max {
        ("-INFINITY", "if (v > acc || isnan(v)) acc = v;", "acc")
    } else {
        ("0.0f", "acc += v;", "vol > 0 ? acc / (float)vol : NAN")
    };
    let src = format!(
        "__kernel void k(__global const float* x, ulong xo, __global float* y, ulong yo, long planes, long vol) {{\n\
         long gid = get_global_id(0);\n\
         if (gid >= planes) return;\n\
         __global const float* xp = x + xo + gid * vol;\n\
         float acc = {init};\n\
         for (long i = 0; i < vol; i++) {{ float v = xp[i]; {step} }}\n\
         y[yo + gid] = {fin};\n}}\n"
    );
    let mut args = Vec::with_capacity(6);
    args.extend(mem(x));
    args.extend(mem(y));
    args.extend([l(planes), l(vol)]);
    ctx.run(&src, &args, global(planes)?)
}

fn global_average_pool(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    _: &[Option<TensorInfo>],
    _: &Attrs,
    outs: &[ClTensor],
) -> Result<(), String> {
    global_pool(ins, outs, ctx, false)
}

fn global_max_pool(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    _: &[Option<TensorInfo>],
    _: &Attrs,
    outs: &[ClTensor],
) -> Result<(), String> {
    global_pool(ins, outs, ctx, true)
}

// ---------------------------------------------------------------------------------------
// Matrix products.

fn gemm(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    _: &[Option<TensorInfo>],
    attrs: &Attrs,
    outs: &[ClTensor],
) -> Result<(), String> {
    let e = Elems::of(ctx, ins, outs)?;
    let (a, b, c) = (any_input(ins, 0, "A")?, any_input(ins, 1, "B")?, ins.get(2).and_then(Option::as_ref));
    let y = outs.first().ok_or("the output Y is required")?;
    if a.shape.len() != 2 || b.shape.len() != 2 || y.shape.len() != 2 {
        return Err(format!("A {:?}, B {:?} and Y {:?} must be matrices", a.shape, b.shape, y.shape));
    }
    count(&a.shape, "A")?;
    count(&b.shape, "B")?;
    let (ta, tb) = (attrs.int("transA", 0) != 0, attrs.int("transB", 0) != 0);
    let (m, k) = if ta { (a.shape[1], a.shape[0]) } else { (a.shape[0], a.shape[1]) };
    let (k2, n) = if tb { (b.shape[1], b.shape[0]) } else { (b.shape[0], b.shape[1]) };
    if k != k2 || y.shape != [m, n] {
        return Err(format!(
            "A {:?} and B {:?} (transA {ta}, transB {tb}) do not give Y {:?}",
            a.shape, b.shape, y.shape
        ));
    }
    let (alpha, beta) = (attrs.float("alpha", 1.0) as f32, attrs.float("beta", 1.0) as f32);
    // C is read only when beta is not 0 (like the host).
    let c = c.filter(|_| beta != 0.0);
    let cs = match c {
        Some(c) => {
            let ok = c.shape.len() <= 2 && c.shape.iter().rev().zip([n, m]).all(|(&d, want)| d == 1 || d == want);
            if !ok {
                return Err(format!("C {:?} must broadcast to the output [{m}, {n}]", c.shape));
            }
            broadcast_strides(&c.shape, &[m, n])
        }
        None => vec![0, 0],
    };
    // Strides of A's (i, p) and B's (p, j) elements.
    let (asi, asp) = if ta { (1, m) } else { (k, 1) };
    let (bsp, bsj) = if tb { (1, k) } else { (n, 1) };
    let cterm = if c.is_some() { format!(" + beta * {}", e.ld("cm", "co + i * csi + j * csj")) } else { String::new() };
    let (t, acc_t) = (e.t(), e.acc());
    let params = format!(
        "__global const {t}* a, ulong ao, __global const {t}* b, ulong bo, \
         __global const {t}* cm, ulong co, __global {t}* y, ulong yo, long M, long N, long K, long asi, long asp, \
         long bsp, long bsj, long csi, long csj, float alpha, float beta"
    );
    let store = e.st("y", "yo + gid", &format!("alpha * acc{cterm}"));
    // A few rows times a transposed B (a fully connected layer: vgg19's first reads 411 MB)
    // are dot products of contiguous rows, K long. One work-item per output would read
    // rows K apart side by side (uncoalesced on a GPU, gathers on a CPU runtime); instead
    // a work-group per output column reads neighbouring elements of the rows, and its
    // partial sums meet in local memory.
    let rows_dot = tb && !ta && m <= GEMV_MAX_ROWS && k >= 4 * GEMV_GROUP as i64;
    let src = if rows_dot {
        format!(
            "{pre}__kernel void k({params}) {{\n\
             __local {acc_t} part[{GEMV_GROUP}];\n\
             int lid = get_local_id(0);\n\
             long j = get_group_id(0);\n\
             __global const {t}* bp = b + bo + j * bsj;\n\
             for (long i = 0; i < M; i++) {{\n\
             __global const {t}* ap = a + ao + i * asi;\n\
             {acc_t} acc = 0.0f;\n\
             for (long p = lid; p < K; p += {GEMV_GROUP}) acc += {la} * {lb};\n\
             part[lid] = acc;\n\
             barrier(CLK_LOCAL_MEM_FENCE);\n\
             if (lid == 0) {{\n\
             for (int s = 1; s < {GEMV_GROUP}; s++) acc += part[s];\n\
             long gid = i * N + j;\n\
             {store}\n\
             }}\n\
             barrier(CLK_LOCAL_MEM_FENCE);\n\
             }}\n}}\n",
            pre = e.prelude(),
            la = e.ld("ap", "p"),
            lb = e.ld("bp", "p"),
        )
    } else {
        format!(
            "{pre}__kernel void k({params}) {{\n\
             long gid = get_global_id(0);\n\
             if (gid >= M * N) return;\n\
             long i = gid / N, j = gid % N;\n\
             __global const {t}* ap = a + ao + i * asi;\n\
             __global const {t}* bp = b + bo + j * bsj;\n\
             {acc_t} acc = 0.0f;\n\
             for (long p = 0; p < K; p++) acc += {la} * {lb};\n\
             {store}\n}}\n",
            pre = e.prelude(),
            la = e.ld("ap", "p * asp"),
            lb = e.ld("bp", "p * bsp"),
        )
    };
    let total = count(&y.shape, "Y")?;
    let mut args = Vec::with_capacity(20);
    args.extend(mem(a));
    args.extend(mem(b));
    args.extend(mem(c.unwrap_or(a)));
    args.extend(mem(y));
    args.extend([
        l(m),
        l(n),
        l(k),
        l(asi),
        l(asp),
        l(bsp),
        l(bsj),
        l(cs[0] as i64),
        l(cs[1] as i64),
        f(alpha),
        f(beta),
    ]);
    if rows_dot {
        let groups = usize::try_from(n).map_err(|_| format!("N = {n} is too large"))?;
        return ctx.run_groups(&src, &args, &[groups * GEMV_GROUP], &[GEMV_GROUP]);
    }
    ctx.run(&src, &args, global(total)?)
}

/// Work-items per output of Gemm's dot-product kernel (a multiple of every device's SIMD
/// width and warp, within every device's work-group limit), and the most rows of A it
/// takes: each row reads the column of B again.
const GEMV_GROUP: usize = 16;
const GEMV_MAX_ROWS: i64 = 8;

/// Batch dims supported by the MatMul kernel after merging.
const MM_BATCH: usize = 4;

fn matmul(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    _: &[Option<TensorInfo>],
    _: &Attrs,
    outs: &[ClTensor],
) -> Result<(), String> {
    let e = Elems::of(ctx, ins, outs)?;
    let (a, b) = (any_input(ins, 0, "A")?, any_input(ins, 1, "B")?);
    let y = outs.first().ok_or("the output Y is required")?;
    if a.shape.is_empty() || b.shape.is_empty() {
        return Err(format!("MatMul needs operands of rank 1 or more, found A {:?} and B {:?}", a.shape, b.shape));
    }
    count(&a.shape, "A")?;
    count(&b.shape, "B")?;
    let a2 = if a.shape.len() == 1 { vec![1, a.shape[0]] } else { a.shape.clone() };
    let b2 = if b.shape.len() == 1 { vec![b.shape[0], 1] } else { b.shape.clone() };
    let (ra, rb) = (a2.len(), b2.len());
    let (m, k, k2, n) = (a2[ra - 2], a2[ra - 1], b2[rb - 2], b2[rb - 1]);
    let (ab, bb) = (&a2[..ra - 2], &b2[..rb - 2]);
    let batch = super::shape::broadcast(ab, bb)?;
    let mut want = batch.clone();
    if a.shape.len() > 1 {
        want.push(m);
    }
    if b.shape.len() > 1 {
        want.push(n);
    }
    if k != k2 || y.shape != want {
        return Err(format!("A {:?} and B {:?} do not give Y {:?}", a.shape, b.shape, y.shape));
    }
    // Batch dims with the strides (in matrices) of A and B; size-1 dims dropped and
    // adjacent dims merged when both operands step through them contiguously.
    let (sa, sb) = (broadcast_strides(ab, &batch), broadcast_strides(bb, &batch));
    let mut dims: Vec<(i64, i64, i64)> = Vec::new();
    for ((&d, &x), &z) in batch.iter().zip(&sa).zip(&sb) {
        let (x, z) = (x as i64, z as i64);
        if d == 1 {
            continue;
        }
        match dims.last_mut() {
            Some(p) if p.1 == x * d && p.2 == z * d => *p = (p.0 * d, x, z),
            _ => dims.push((d, x, z)),
        }
    }
    if dims.len() > MM_BATCH {
        return Err(format!(
            "the OpenCL MatMul kernel supports {MM_BATCH} broadcast batch dims, A {:?} and B {:?} need {}",
            a.shape,
            b.shape,
            dims.len()
        ));
    }
    while dims.len() < MM_BATCH {
        dims.insert(0, (1, 0, 0));
    }
    let (t, acc_t) = (e.t(), e.acc());
    let src = format!(
        "{pre}__kernel void k(__global const {t}* a, ulong ao, __global const {t}* b, ulong bo, \
               __global {t}* y, ulong yo, long total, long M, long N, long K, long bd0, long bd1, long bd2, \
               long bd3, long as0, long as1, long as2, long as3, long bs0, long bs1, long bs2, long bs3) {{\n\
               long gid = get_global_id(0);\n\
               if (gid >= total) return;\n\
               long r = gid;\n\
               long j = r % N; r /= N;\n\
               long i = r % M; r /= M;\n\
               long x3 = r % bd3; r /= bd3;\n\
               long x2 = r % bd2; r /= bd2;\n\
               long x1 = r % bd1; r /= bd1;\n\
               long x0 = r;\n\
               long am = x0 * as0 + x1 * as1 + x2 * as2 + x3 * as3;\n\
               long bm = x0 * bs0 + x1 * bs1 + x2 * bs2 + x3 * bs3;\n\
               __global const {t}* ap = a + ao + (am * M + i) * K;\n\
               __global const {t}* bp = b + bo + bm * K * N + j;\n\
               {acc_t} acc = 0.0f;\n\
               for (long p = 0; p < K; p++) acc += {la} * {lb};\n\
               {store}\n}}\n",
        pre = e.prelude(),
        la = e.ld("ap", "p"),
        lb = e.ld("bp", "p * N"),
        store = e.st("y", "yo + gid", "acc"),
    );
    let total = count(&y.shape, "Y")?;
    let mut args = Vec::with_capacity(22);
    args.extend(mem(a));
    args.extend(mem(b));
    args.extend(mem(y));
    args.extend([l(total), l(m), l(n), l(k)]);
    args.extend(dims.iter().map(|d| l(d.0)));
    args.extend(dims.iter().map(|d| l(d.1)));
    args.extend(dims.iter().map(|d| l(d.2)));
    ctx.run(&src, &args, global(total)?)
}

#[cfg(test)]
mod tests {
    use crate::ir::attrs::AttrValue;
    use crate::ir::host_tensor::{store_f64, HostTensor};
    use crate::ir::types::DType;
    use crate::ops::bitwise_cl::tests::{check_tol, values};
    use crate::ops::cl::testing::device;
    use crate::ops::Attrs;

    fn attrs(list: &[(&str, AttrValue)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    /// Small integers in [-4, 4) stored as `d`: products and their sums are exact in f32,
    /// so host and device round the same results (bf16 is compared exactly).
    fn ints(d: DType, shape: &[i64], seed: u64) -> Option<HostTensor> {
        let v = values(DType::I32, shape, seed, -4.0, 4.0);
        let mut t = HostTensor::zeros(d, shape).unwrap();
        for (c, x) in t.data.chunks_exact_mut(d.size()).zip(v.to_f64()) {
            store_f64(d, x, c);
        }
        Some(t)
    }

    /// The products on f16, bf16, f64 (on devices with fp64) and f32, against the host.
    #[test]
    fn products_match_the_host_on_every_float_dtype() {
        let Some(dev) = device() else { return };
        let mut dtypes = vec![DType::F32, DType::F16, DType::BF16];
        if dev.has_fp64 {
            dtypes.push(DType::F64);
        }
        let l = |v: &[i64]| AttrValue::Ints(v.to_vec());
        for d in dtypes {
            let v = |shape: &[i64], seed| ints(d, shape, seed);
            let conv = attrs(&[("group", AttrValue::Int(2)), ("pads", l(&[1, 0, 1, 2])), ("strides", l(&[2, 1]))]);
            check_tol(&dev, "Conv", &[v(&[2, 4, 6, 5], 1), v(&[6, 2, 3, 3], 2), v(&[6], 3)], &conv, 0.0);
            check_tol(&dev, "Conv", &[v(&[1, 3, 9], 4), v(&[2, 3, 2], 5)], &attrs(&[("dilations", l(&[3]))]), 0.0);
            // Channel blocks of 8 (16 channels), 4 (8 per group) and 2, with padding, over
            // 2 and 3 spatial dims and a batch of 2.
            let pad = attrs(&[("pads", l(&[1, 1, 0, 1])), ("strides", l(&[1, 2]))]);
            check_tol(&dev, "Conv", &[v(&[2, 3, 7, 6], 16), v(&[16, 3, 3, 2], 17), v(&[16], 18)], &pad, 0.0);
            let g2 = attrs(&[("group", AttrValue::Int(2)), ("dilations", l(&[2, 1]))]);
            check_tol(&dev, "Conv", &[v(&[1, 4, 6, 5], 19), v(&[8, 2, 2, 2], 20)], &g2, 0.0);
            let k3 = attrs(&[("pads", l(&[0, 1, 1, 1, 0, 0]))]);
            check_tol(&dev, "Conv", &[v(&[1, 2, 3, 4, 5], 21), v(&[6, 2, 2, 2, 3], 22)], &k3, 0.0);
            let ct = attrs(&[("strides", l(&[2, 2])), ("output_padding", l(&[1, 0]))]);
            check_tol(&dev, "ConvTranspose", &[v(&[1, 2, 3, 3], 6), v(&[2, 3, 2, 2], 7), v(&[3], 8)], &ct, 0.0);
            let g = attrs(&[
                ("transA", AttrValue::Int(1)),
                ("alpha", AttrValue::Float(0.5)),
                ("beta", AttrValue::Float(2.0)),
            ]);
            check_tol(&dev, "Gemm", &[v(&[4, 3], 9), v(&[4, 5], 10), v(&[3, 1], 11)], &g, 0.0);
            // A few rows times a transposed B with K of several work-groups' worth: the
            // dot-product kernel, its partial sums met in local memory; exact sums.
            let tb = attrs(&[("transB", AttrValue::Int(1)), ("beta", AttrValue::Float(0.5))]);
            check_tol(&dev, "Gemm", &[v(&[3, 301], 23), v(&[7, 301], 24), v(&[7], 25)], &tb, 0.0);
            check_tol(&dev, "MatMul", &[v(&[2, 1, 3, 4], 12), v(&[3, 4, 5], 13)], &Attrs::default(), 0.0);
            check_tol(&dev, "MatMul", &[v(&[4], 14), v(&[4, 3], 15)], &Attrs::default(), 0.0);
        }
    }

    /// Depthwise convolutions (their own kernel, the window's columns literal) and channel
    /// blocks that do not divide a group's output channels (the last block of each group
    /// computing past its end, storing what is there) give the host's results exactly.
    #[test]
    fn depthwise_and_ragged_channel_blocks_match_the_host() {
        let Some(dev) = device() else { return };
        let v = |shape: &[i64], seed| ints(DType::F32, shape, seed);
        let l = |v: &[i64]| AttrValue::Ints(v.to_vec());
        let group = |g| ("group", AttrValue::Int(g));
        // Depthwise: unit strides; strides 2 with dilations 2 and uneven pads; 1-D; fused
        // with a residual and an activation; a batch of 2 over planes past one group's size.
        let dw = attrs(&[group(6), ("pads", l(&[1, 1, 1, 1]))]);
        check_tol(&dev, "Conv", &[v(&[2, 6, 9, 7], 1), v(&[6, 1, 3, 3], 2), v(&[6], 3)], &dw, 0.0);
        let dw2 = attrs(&[group(5), ("pads", l(&[0, 2, 1, 1])), ("strides", l(&[2, 2])), ("dilations", l(&[2, 2]))]);
        check_tol(&dev, "Conv", &[v(&[1, 5, 11, 13], 4), v(&[5, 1, 3, 3], 5)], &dw2, 0.0);
        check_tol(&dev, "Conv", &[v(&[3, 4, 10], 6), v(&[4, 1, 3], 7)], &attrs(&[group(4)]), 0.0);
        let fused = attrs(&[
            group(6),
            ("pads", l(&[1, 1, 1, 1])),
            ("activation", AttrValue::Str("LeakyRelu".into())),
            ("activation_params", AttrValue::Floats(vec![0.25])),
        ]);
        let (x, w, b, z) = (v(&[2, 6, 9, 7], 8), v(&[6, 1, 3, 3], 9), v(&[6], 10), v(&[2, 6, 9, 7], 11));
        check_tol(&dev, "FusedConv", &[x, w, b, z], &fused, 0.0);
        // 68 output channels per group: blocks of 16, the last ragged; pointwise and 3x3.
        let g2 = attrs(&[group(2)]);
        check_tol(&dev, "Conv", &[v(&[1, 6, 5, 7], 12), v(&[136, 3, 1, 1], 13), v(&[136], 14)], &g2, 0.0);
        let g2p = attrs(&[group(2), ("pads", l(&[1, 0, 1, 1]))]);
        check_tol(&dev, "Conv", &[v(&[2, 4, 6, 5], 15), v(&[136, 2, 3, 3], 16), v(&[136], 17)], &g2p, 0.0);
    }

    /// Buffer views at aligned offsets are sub-buffers: their origin is the block and the
    /// offset, so Conv's tuner sees that two such views share bytes.
    #[test]
    fn sub_buffer_views_resolve_to_their_block() {
        let Some(dev) = device() else { return };
        let align = dev.caps.mem_base_addr_align;
        let (block, _) = dev.alloc(4 * align).unwrap();
        let whole = dev.view(&block, 0, DType::F32, None).unwrap();
        let sub = dev.view(&block, 2 * align, DType::F32, None).unwrap();
        assert_ne!(sub.mem, block.raw(), "a view at an aligned offset is a sub-buffer");
        assert_eq!(dev.buffer_origin(sub.mem), (block.raw(), 2 * align));
        assert_eq!(dev.buffer_origin(whole.mem), (block.raw(), 0));
        dev.release(block);
    }

    /// MaxPool on the byte and narrow float dtypes, with row- and column-major Indices.
    #[test]
    fn max_pool_dtypes_and_storage_order() {
        let Some(dev) = device() else { return };
        let l = |v: &[i64]| AttrValue::Ints(v.to_vec());
        for d in [DType::F32, DType::F16, DType::BF16, DType::U8, DType::I8] {
            for so in [0, 1] {
                let a = attrs(&[
                    ("kernel_shape", l(&[2, 3])),
                    ("strides", l(&[1, 2])),
                    ("storage_order", AttrValue::Int(so)),
                ]);
                let x = if d == DType::U8 {
                    values(d, &[2, 2, 5, 7], 1, 0.0, 200.0)
                } else {
                    values(d, &[2, 2, 5, 7], 1, -9.0, 9.0)
                };
                check_tol(&dev, "MaxPool", &[Some(x)], &a, 0.0);
            }
        }
        let a = attrs(&[("kernel_shape", l(&[2, 2, 2])), ("storage_order", AttrValue::Int(1))]);
        check_tol(&dev, "MaxPool", &[Some(values(DType::F32, &[1, 2, 3, 4, 3], 2, -1.0, 1.0))], &a, 0.0);
    }
}
