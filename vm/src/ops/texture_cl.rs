//! OpenCL kernels on blocked textures (see `crate::ir::operators::blocked` for the layout): Conv, pooling,
//! BatchNormalization, the elementwise operators and Concat along channel blocks, plus the
//! layout conversions between an NCHW buffer and the blocked layout behind
//! `@vm.to_blocked` / `@vm.from_blocked`.
//!
//! Every kernel runs one work-item per output texel and moves four channels at a time with
//! `read_imagef` / `write_imagef`. A texel of a `[N, CB, s0, s1, s2, 4]` tensor (spatial dims
//! padded in front to three) sits at `x = s2`, `y = ((n * CB + cb) * s0 + s0i) * s1 + s1i`,
//! exactly where the `global.texture` folding puts it. Weights and other parameters stay in
//! buffers. Padding channels of Conv and BatchNormalization outputs are written as zero.

use super::activation_cl;
use super::cl::{float_arg as f, long_arg as l, ClCtx, ClTensor, Res};
use super::elementwise_cl::{f32_fold, f32_map};
use super::nn_cl::{Geo, GEO_PARAMS, SPLIT_OUT, TAPS_BEGIN, TAPS_END, TAP_COUNTS, WINDOW_START};
use super::{Attrs, Operator, TensorInfo};
use crate::ir::types::DType;
use crate::opencl::device::KernelArg;
use opencl3::types::cl_mem;
use std::fmt::Write;

/// A blocked texture operand: its image and logical `[N, C, spatial...]` shape.
#[derive(Clone, Debug)]
pub struct ClTexture {
    pub mem: cl_mem,
    pub shape: Vec<i64>,
}

impl ClTexture {
    fn n(&self) -> i64 {
        self.shape[0]
    }
    fn c(&self) -> i64 {
        self.shape[1]
    }
    /// Channel blocks.
    fn cb(&self) -> i64 {
        (self.shape[1] + 3) / 4
    }
    fn spatial(&self) -> &[i64] {
        &self.shape[2..]
    }
    /// Image width: the last spatial dim.
    fn width(&self) -> i64 {
        *self.shape.last().unwrap_or(&1)
    }
    /// Image rows per channel block: the spatial dims but the last.
    fn rows(&self) -> i64 {
        let sp = self.spatial();
        sp[..sp.len().saturating_sub(1)].iter().product()
    }
    /// Texels in the image.
    fn texels(&self) -> i64 {
        self.n() * self.cb() * self.rows() * self.width()
    }
}

/// An operand of a texture call: a texture (activations) or a buffer (parameters).
#[derive(Clone, Debug)]
pub enum ClOperand {
    Texture(ClTexture),
    Buffer(ClTensor),
}

/// Shared OpenCL: the sampler, a lane of a `float4` by index, and texel coordinates.
const PRELUDE: &str =
    "__constant sampler_t smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;\n\
#define LANE(v, q) ((q) == 0 ? (v).x : (q) == 1 ? (v).y : (q) == 2 ? (v).z : (v).w)\n\
#define AT(x, y) ((int2)((int)(x), (int)(y)))\n";

pub(super) fn launch(ctx: &ClCtx, src: &str, args: &[KernelArg], n: i64) -> Res {
    if n <= 0 {
        return Ok(());
    }
    let n = usize::try_from(n).map_err(|_| format!("{n} work-items do not fit in a launch"))?;
    ctx.run(&format!("{PRELUDE}{src}"), args, n)
}

pub(super) fn texture(ins: &[Option<ClOperand>], i: usize) -> Result<&ClTexture, String> {
    match ins.get(i) {
        Some(Some(ClOperand::Texture(t))) => Ok(t),
        _ => Err(format!("input {} must be a texture", i + 1)),
    }
}

fn buffer(ins: &[Option<ClOperand>], i: usize) -> Result<Option<&ClTensor>, String> {
    match ins.get(i) {
        Some(Some(ClOperand::Buffer(t))) if t.dtype == DType::F32 => Ok(Some(t)),
        Some(Some(ClOperand::Buffer(t))) => Err(format!("input {} must be f32, found {}", i + 1, t.dtype)),
        Some(Some(ClOperand::Texture(_))) => Err(format!("input {} must be a buffer", i + 1)),
        _ => Ok(None),
    }
}

/// A texture kernel: runs its operator on blocked textures. The call was checked by
/// `blocked::infer`, which gave the logical shapes of the textures; `ins` holds textures
/// for the activations and buffers for the parameters.
pub type TextureFn = fn(&ClCtx, Operator, &[Option<ClOperand>], &[Option<TensorInfo>], &Attrs, &ClTexture) -> Res;

/// The texture kernels, one per operator with a blocked form (`blocked::form`).
pub static TEXTURE: &[(Operator, TextureFn)] = &[
    (Operator::Conv, |ctx, _, ins, _, attrs, y| conv(ctx, ins, attrs, y)),
    (Operator::MaxPool, |ctx, _, ins, _, attrs, y| pool(ctx, texture(ins, 0)?, y, attrs, true)),
    (Operator::AveragePool, |ctx, _, ins, _, attrs, y| pool(ctx, texture(ins, 0)?, y, attrs, false)),
    (Operator::GlobalAveragePool, |ctx, _, ins, _, _, y| global_pool(ctx, texture(ins, 0)?, y, false)),
    (Operator::GlobalMaxPool, |ctx, _, ins, _, _, y| global_pool(ctx, texture(ins, 0)?, y, true)),
    (Operator::BatchNormalization, |ctx, _, ins, _, attrs, y| batch_norm(ctx, ins, attrs, y)),
    (Operator::Concat, |ctx, _, ins, _, _, y| concat(ctx, ins, y)),
    (Operator::Add, fold),
    (Operator::Sub, fold),
    (Operator::Mul, fold),
    (Operator::Div, fold),
    (Operator::Pow, fold),
    (Operator::Max, fold),
    (Operator::Min, fold),
    (Operator::Sum, fold),
    (Operator::Relu, map),
    (Operator::Clip, map),
    (Operator::LeakyRelu, map),
    (Operator::Sigmoid, map),
    (Operator::Tanh, map),
    (Operator::Exp, map),
    (Operator::Sqrt, map),
    (Operator::Neg, map),
    (Operator::Abs, map),
    (Operator::Elu, map),
    (Operator::Selu, map),
    (Operator::Softplus, map),
    (Operator::Softsign, map),
    (Operator::Identity, map),
    (Operator::Dropout, map),
    (Operator::Gelu, map),
    (Operator::Erf, map),
    (Operator::HardSigmoid, map),
    (Operator::HardSwish, map),
    (Operator::Mish, map),
    (Operator::Celu, map),
    (Operator::ThresholdedRelu, map),
    (Operator::Log, map),
    (Operator::Reciprocal, map),
    (Operator::Floor, map),
    (Operator::Ceil, map),
    (Operator::Round, map),
    (Operator::Sign, map),
    (Operator::Sin, map),
    (Operator::Cos, map),
    (Operator::Tan, map),
    (Operator::Asin, map),
    (Operator::Acos, map),
    (Operator::Atan, map),
    (Operator::Sinh, map),
    (Operator::Cosh, map),
    (Operator::Asinh, map),
    (Operator::Acosh, map),
    (Operator::Atanh, map),
];

/// An n-ary elementwise operator: its f32 fold over same-shaped textures.
fn fold(
    ctx: &ClCtx,
    op: Operator,
    ins: &[Option<ClOperand>],
    _: &[Option<TensorInfo>],
    _: &Attrs,
    y: &ClTexture,
) -> Res {
    let fold = f32_fold(op).ok_or_else(|| format!("{} has no f32 fold", op.name()))?;
    let xs = (0..ins.len()).map(|i| texture(ins, i)).collect::<Result<Vec<_>, _>>()?;
    elementwise(ctx, &xs, &fold, "v", Vec::new(), y)
}

/// A unary elementwise operator: its f32 map of one texture.
fn map(
    ctx: &ClCtx,
    op: Operator,
    ins: &[Option<ClOperand>],
    infos: &[Option<TensorInfo>],
    attrs: &Attrs,
    y: &ClTexture,
) -> Res {
    let map = match f32_map(op, infos, attrs)? {
        Some(m) => Some(m),
        None => activation_cl::f32_map(op, attrs)?,
    };
    let (map, params) = map.ok_or_else(|| format!("{} is not an f32 map", op.name()))?;
    elementwise(ctx, &[texture(ins, 0)?], "v", map, params, y)
}

/// Conv: one work-item per output texel (4 output channels). With one group each input
/// texel read feeds all 16 channel pairs; grouped (e.g. depthwise) convolutions gather each
/// output channel's inputs lane by lane.
fn conv(ctx: &ClCtx, ins: &[Option<ClOperand>], attrs: &Attrs, y: &ClTexture) -> Res {
    let x = texture(ins, 0)?;
    let w = buffer(ins, 1)?.ok_or("input 2 (W) is required")?;
    let b = buffer(ins, 2)?;
    let group = attrs.int("group", 1);
    let (c, m) = (x.c(), y.c());
    let geo = Geo::new(x.spatial(), y.spatial(), &w.shape[2..], attrs, false)?.fit(&[&x.shape, &w.shape, &y.shape]);
    let (cg, mg) = (c / group, m / group);
    let taps = format!("{TAPS_BEGIN}        long tap = (a0 * k1 + a1) * k2 + a2;\n");
    let body = if group == 1 {
        format!(
            "  for (long cb = 0; cb < CBi; cb++) {{\n\
               long cn = min(4L, C - cb * 4);\n{taps}\
                 float4 v = read_imagef(x, smp, AT(i2, ((n * CBi + cb) * in0 + i0) * in1 + i1));\n\
                 for (int q = 0; q < 4; q++) {{\n\
                   long mm = cbo * 4 + q;\n\
                   if (mm >= M) break;\n\
                   __global const float* wp = w + wo + (mm * cg + cb * 4) * kvol + tap;\n\
                   float s = 0.0f;\n\
                   for (int j = 0; j < cn; j++) s += LANE(v, j) * wp[j * kvol];\n\
                   acc[q] += s;\n\
                 }}\n\
               {TAPS_END}\
             }}\n"
        )
    } else {
        format!(
            "  for (int q = 0; q < 4; q++) {{\n\
               long mm = cbo * 4 + q;\n\
               if (mm >= M) break;\n\
               long g = mm / mg;\n\
               for (long ci = 0; ci < cg; ci++) {{\n\
                 long ch = g * cg + ci;\n\
                 int lane = (int)(ch % 4);\n\
                 __global const float* wp = w + wo + (mm * cg + ci) * kvol;\n{taps}\
                   float4 v = read_imagef(x, smp, AT(i2, ((n * CBi + ch / 4) * in0 + i0) * in1 + i1));\n\
                   acc[q] += LANE(v, lane) * wp[tap];\n\
                 {TAPS_END}\
               }}\n\
             }}\n"
        )
    };
    let src = format!(
        "{ix}__kernel void k(__read_only image2d_t x, __global const float* w, ulong wo, __global const float* b, ulong bo, \
         int has_bias, __write_only image2d_t y, long total, long C, long CBi, long M, long CBo, long cg, long mg, \
         {GEO_PARAMS}) {{\n\
         long gid = get_global_id(0);\n\
         if (gid >= total) return;\n\
         ix r = (ix)gid;\n{SPLIT_OUT}\
         long cbo = r % CBo, n = r / CBo;\n{WINDOW_START}\
         long kvol = k0 * k1 * k2;\n\
         float acc[4] = {{0.0f, 0.0f, 0.0f, 0.0f}};\n{body}\
         for (int q = 0; q < 4; q++) {{\n\
           long mm = cbo * 4 + q;\n\
           if (mm < M && has_bias) acc[q] += b[bo + mm];\n\
         }}\n\
         write_imagef(y, AT(o2, ((n * CBo + cbo) * out0 + o0) * out1 + o1), (float4)(acc[0], acc[1], acc[2], acc[3]));\n}}\n",
        ix = geo.ix()
    );
    let total = y.n() * y.cb() * geo.out_volume();
    let mut args = vec![KernelArg::Mem(x.mem)];
    args.extend(w.args());
    args.extend(b.unwrap_or(w).args());
    args.push(KernelArg::I32(b.is_some() as i32));
    args.push(KernelArg::Mem(y.mem));
    args.extend([l(total), l(c), l(x.cb()), l(m), l(y.cb()), l(cg), l(mg)]);
    args.extend(geo.args());
    launch(ctx, &src, &args, total)
}

/// MaxPool (first maximum, like the host) or AveragePool over a window per output texel.
fn pool(ctx: &ClCtx, x: &ClTexture, y: &ClTexture, attrs: &Attrs, max: bool) -> Res {
    let k = attrs.ints("kernel_shape").ok_or("kernel_shape is required")?;
    let geo = Geo::new(x.spatial(), y.spatial(), k, attrs, false)?.fit(&[&x.shape, &y.shape]);
    let include_pad = attrs.int("count_include_pad", 0) != 0;
    // Taps inside the input (`h`) and inside the input or its padding (`q`), as the
    // buffer kernel counts them.
    let (init, step, fin) = if max {
        (
            "float4 acc = (float4)(-INFINITY); int first = 1;",
            "acc = first ? v : select(acc, v, isgreater(v, acc)); first = 0;",
            "acc",
        )
    } else {
        ("float4 acc = (float4)(0.0f);", "acc += v;", "acc / (float)(include_pad ? q0 * q1 * q2 : h0 * h1 * h2)")
    };
    let src = format!(
        "{ix}__kernel void k(__read_only image2d_t x, __write_only image2d_t y, long total, int include_pad, {GEO_PARAMS}) {{\n\
         long gid = get_global_id(0);\n\
         if (gid >= total) return;\n\
         ix r = (ix)gid;\n{SPLIT_OUT}\
         long plane = r;\n\
{WINDOW_START}{TAP_COUNTS}\
         {init}\n\
         {TAPS_BEGIN}\
               float4 v = read_imagef(x, smp, AT(i2, (plane * in0 + i0) * in1 + i1));\n\
               {step}\n\
         {TAPS_END}\
         write_imagef(y, AT(o2, (plane * out0 + o0) * out1 + o1), {fin});\n}}\n",
        ix = geo.ix()
    );
    let total = y.n() * y.cb() * geo.out_volume();
    let mut args = vec![KernelArg::Mem(x.mem), KernelArg::Mem(y.mem), l(total), KernelArg::I32(include_pad as i32)];
    args.extend(geo.args());
    launch(ctx, &src, &args, total)
}

/// GlobalAveragePool / GlobalMaxPool: one work-item per (n, channel block).
fn global_pool(ctx: &ClCtx, x: &ClTexture, y: &ClTexture, max: bool) -> Res {
    let (init, step, fin) = if max {
        ("(float4)(-INFINITY)", "acc = select(acc, v, isgreater(v, acc) || isnan(v));", "acc")
    } else {
        ("(float4)(0.0f)", "acc += v;", "acc / (float)(rows * width)")
    };
    let src = format!(
        "__kernel void k(__read_only image2d_t x, __write_only image2d_t y, long planes, long rows, long width) {{\n\
         long plane = get_global_id(0);\n\
         if (plane >= planes) return;\n\
         float4 acc = {init};\n\
         for (long r = 0; r < rows; r++)\n\
           for (long i = 0; i < width; i++) {{\n\
             float4 v = read_imagef(x, smp, AT(i, plane * rows + r));\n\
             {step}\n\
           }}\n\
         write_imagef(y, AT(0, plane), {fin});\n}}\n"
    );
    let planes = x.n() * x.cb();
    let args = [KernelArg::Mem(x.mem), KernelArg::Mem(y.mem), l(planes), l(x.rows()), l(x.width())];
    launch(ctx, &src, &args, planes)
}

/// BatchNormalization (inference) per texel with per-channel parameters from buffers.
fn batch_norm(ctx: &ClCtx, ins: &[Option<ClOperand>], attrs: &Attrs, y: &ClTexture) -> Res {
    if attrs.int("training_mode", 0) == 1 {
        return Err("supports inference only: `training_mode` must be 0".into());
    }
    let x = texture(ins, 0)?;
    let mut p = Vec::with_capacity(4);
    for (i, name) in [(1, "scale"), (2, "B"), (3, "mean"), (4, "var")] {
        p.push(buffer(ins, i)?.ok_or_else(|| format!("input {} ({name}) is required", i + 1))?);
    }
    let src = "__kernel void k(__read_only image2d_t x, __global const float* sc, ulong sco, \
               __global const float* b, ulong bo, __global const float* mn, ulong mo, __global const float* vr, \
               ulong vo, __write_only image2d_t y, long total, long width, long rows, long CB, long C, float eps) {\n\
               long gid = get_global_id(0);\n\
               if (gid >= total) return;\n\
               long px = gid % width, row = gid / width;\n\
               long cb = (row / rows) % CB;\n\
               float4 v = read_imagef(x, smp, AT(px, row));\n\
               float r[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n\
               for (int q = 0; q < 4; q++) {\n\
                 long c = cb * 4 + q;\n\
                 if (c >= C) break;\n\
                 float k = sc[sco + c] / sqrt(vr[vo + c] + eps);\n\
                 r[q] = (LANE(v, q) - mn[mo + c]) * k + b[bo + c];\n\
               }\n\
               write_imagef(y, AT(px, row), (float4)(r[0], r[1], r[2], r[3]));\n}\n";
    let total = y.texels();
    let mut args = vec![KernelArg::Mem(x.mem)];
    for t in &p {
        args.extend(t.args());
    }
    args.push(KernelArg::Mem(y.mem));
    args.extend([l(total), l(y.width()), l(y.rows()), l(y.cb()), l(x.c())]);
    args.push(f(attrs.float("epsilon", 1e-5) as f32));
    launch(ctx, src, &args, total)
}

/// An elementwise operator over textures of one shape: the operands folded with `fold`
/// (`v` and `w`), then `map` applied to `v`, lane by lane.
fn elementwise(
    ctx: &ClCtx,
    xs: &[&ClTexture],
    fold: &str,
    map: &str,
    params: Vec<(&str, KernelArg)>,
    y: &ClTexture,
) -> Res {
    let mut decl = String::new();
    for (i, _) in xs.iter().enumerate() {
        let _ = write!(decl, "__read_only image2d_t x{i}, ");
    }
    let mut loads = String::new();
    for i in 0..xs.len() {
        let _ = writeln!(loads, "  float4 t{i} = read_imagef(x{i}, smp, at);");
    }
    let mut lane = String::from("    float v = LANE(t0, q);\n");
    for i in 1..xs.len() {
        let _ = writeln!(lane, "    {{ float w = LANE(t{i}, q); v = {fold}; }}");
    }
    let extra: String = params.iter().map(|(d, _)| format!(", {d}")).collect();
    let src = format!(
        "__kernel void k({decl}__write_only image2d_t y, long total, long width{extra}) {{\n\
         long gid = get_global_id(0);\n\
         if (gid >= total) return;\n\
         int2 at = AT(gid % width, gid / width);\n{loads}\
         float r[4];\n\
         for (int q = 0; q < 4; q++) {{\n{lane}    r[q] = {map};\n  }}\n\
         write_imagef(y, at, (float4)(r[0], r[1], r[2], r[3]));\n}}\n"
    );
    let total = y.texels();
    let mut args: Vec<KernelArg> = xs.iter().map(|x| KernelArg::Mem(x.mem)).collect();
    args.extend([KernelArg::Mem(y.mem), l(total), l(y.width())]);
    args.extend(params.into_iter().map(|(_, a)| a));
    launch(ctx, &src, &args, total)
}

/// Concat along channel blocks: each input's texels are copied to its block range of `y`.
fn concat(ctx: &ClCtx, ins: &[Option<ClOperand>], y: &ClTexture) -> Res {
    let src = "__kernel void k(__read_only image2d_t x, __write_only image2d_t y, long total, long width, long rows, \
               long CBi, long CBo, long off) {\n\
               long gid = get_global_id(0);\n\
               if (gid >= total) return;\n\
               long px = gid % width, row = gid / width;\n\
               long r = row % rows, t = row / rows;\n\
               long cb = t % CBi, n = t / CBi;\n\
               write_imagef(y, AT(px, (n * CBo + off + cb) * rows + r), read_imagef(x, smp, AT(px, row)));\n}\n";
    let mut off = 0;
    for i in 0..ins.len() {
        let x = texture(ins, i)?;
        let total = x.texels();
        let args = [
            KernelArg::Mem(x.mem),
            KernelArg::Mem(y.mem),
            l(total),
            l(x.width()),
            l(x.rows()),
            l(x.cb()),
            l(y.cb()),
            l(off),
        ];
        launch(ctx, src, &args, total)?;
        off += x.cb();
    }
    Ok(())
}

/// How the blocked side of a layout conversion is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockedSide {
    /// A `global.texture` image.
    Image,
    /// A plain buffer in the blocked element order (pointer + element offset).
    Buffer,
}

/// `@vm.to_blocked` / `@vm.from_blocked` on the device: between the NCHW f32 buffer `plain`
/// (`[N, C, spatial...]`) and the blocked tensor `blocked` (an image `mem`, or a buffer
/// `mem` + `offset` in elements). `to_blocked` selects the direction.
pub fn convert(
    ctx: &ClCtx,
    plain: &ClTensor,
    blocked: (cl_mem, u64, BlockedSide),
    to_blocked: bool,
) -> Result<(), String> {
    let s = &plain.shape;
    if s.len() < 3 {
        return Err(format!("the plain tensor must be [N, C, spatial...], found {s:?}"));
    }
    let t = ClTexture { mem: blocked.0, shape: s.clone() };
    let (decl_b, load, store) = match blocked.2 {
        BlockedSide::Image if to_blocked => (
            "__write_only image2d_t bk, ulong bo",
            "",
            "write_imagef(bk, AT(px, row), (float4)(r[0], r[1], r[2], r[3]));",
        ),
        BlockedSide::Image => (
            "__read_only image2d_t bk, ulong bo",
            "float4 v = read_imagef(bk, smp, AT(px, row)); r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w;",
            "",
        ),
        BlockedSide::Buffer if to_blocked => {
            ("__global float* bk, ulong bo", "", "for (int q = 0; q < 4; q++) bk[bo + gid * 4 + q] = r[q];")
        }
        BlockedSide::Buffer => {
            ("__global const float* bk, ulong bo", "for (int q = 0; q < 4; q++) r[q] = bk[bo + gid * 4 + q];", "")
        }
    };
    let body = if to_blocked {
        format!(
            "for (int q = 0; q < 4; q++) {{ long c = cb * 4 + q; r[q] = c < C ? p[po + (n * C + c) * vol + sp] : 0.0f; }}\n  {store}"
        )
    } else {
        format!("{load}\n  for (int q = 0; q < 4; q++) {{ long c = cb * 4 + q; if (c < C) p[po + (n * C + c) * vol + sp] = r[q]; }}")
    };
    let pq = if to_blocked { "const " } else { "" };
    let src = format!(
        "__kernel void k(__global {pq}float* p, ulong po, {decl_b}, long total, long width, long rows, long CB, long C) {{\n\
         long gid = get_global_id(0);\n\
         if (gid >= total) return;\n\
         long px = gid % width, row = gid / width;\n\
         long r0 = row % rows, t = row / rows;\n\
         long cb = t % CB, n = t / CB;\n\
         long vol = rows * width, sp = r0 * width + px;\n\
         float r[4] = {{0.0f, 0.0f, 0.0f, 0.0f}};\n  {body}\n}}\n"
    );
    let total = t.texels();
    let mut args = Vec::from(plain.args());
    args.extend([KernelArg::Mem(blocked.0), KernelArg::U64(blocked.1)]);
    args.extend([l(total), l(t.width()), l(t.rows()), l(t.cb()), l(t.c())]);
    launch(ctx, &src, &args, total)
}
