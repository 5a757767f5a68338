//! OpenCL buffer kernels for the sampling family (GridSample, AffineGrid, Resize, Upsample;
//! see `super::cl`), mirroring the host kernels in `super::resize`: one work-item per output
//! point, the mode, padding and rank compiled into the source. Resize's per-axis tap tables
//! (input positions and weights) are worked out on the host, as the host kernel does, and
//! uploaded for the call.

use super::cl::{check_out, cl_type, input, with_buffer};
use super::cl::{long_arg as l, ClCtx, ClFn, ClTensor, Infos, Res};
use super::loss_cl::{calc_ty, load, pragmas, ptr_ty, store, work};
use super::texture_cl::{launch, texture, ClOperand, ClTexture, TextureFn};
use super::{Attrs, Operator, TensorInfo};
use crate::ir::operators::loss::FLOATS;
use crate::ir::operators::resize::*;
use crate::ir::types::DType;
use crate::opencl::device::KernelArg;
use std::fmt::Write;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[
    (Operator::GridSample, grid_sample),
    (Operator::AffineGrid, affine_grid),
    (Operator::Resize, |c, i, f, a, o| resize(c, i, f, a, o, false)),
    (Operator::Upsample, |c, i, f, a, o| resize(c, i, f, a, o, true)),
];

fn float_in<'a>(ins: &'a [Option<ClTensor>], i: usize, name: &str) -> Result<&'a ClTensor, String> {
    let t = input(ins, i, name)?;
    if !FLOATS.contains(&t.dtype) {
        return Err(format!("input {} ({name}) must be f32, f16 or f64, found {}", i + 1, t.dtype));
    }
    Ok(t)
}

fn grid_sample(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    let (x, g) = (float_in(ins, 0, "X")?, float_in(ins, 1, "grid")?);
    let y = outs.first().ok_or("output 1 is required")?;
    check_out(y, x.dtype, &grid_sample_shape(&x.shape, &g.shape, a)?)?;
    let (mode, pad, align) = grid_sample_attrs(a)?;
    let r = x.shape.len() - 2;
    if r > 3 {
        return Err(format!("GridSample: the OpenCL kernel supports up to 3 spatial dims, found {r}"));
    }
    let total = y.numel();
    if total == 0 {
        return Ok(());
    }
    let mut pragma = pragmas(ctx, x.dtype, false)?.to_string();
    if g.dtype == DType::F64 && x.dtype != DType::F64 {
        pragma = pragmas(ctx, g.dtype, false)?.to_string();
    }
    let c = if x.dtype == DType::F64 || g.dtype == DType::F64 { "double" } else { "float" };
    let (xp, gp) = (ptr_ty(x.dtype), ptr_ty(g.dtype));
    let taps = match mode {
        SampleMode::Nearest => 1,
        SampleMode::Linear => 2,
        SampleMode::Cubic => 4,
    };
    let coord_fix = match mode {
        SampleMode::Nearest => "    v = rint(v);\n",
        _ => "",
    };
    let outside = match pad {
        Padding::Border => "      v = clamp(v, (C_T)0, fmax(len - 1, (C_T)0));\n",
        Padding::Reflection => "      v = refl(v, lo[i], hi[i]);\n",
        Padding::Zeros => "",
    };
    let weights = match mode {
        SampleMode::Nearest => "    base[i] = (long)trunc(v);\n    w[i][0] = 1;\n",
        SampleMode::Linear => {
            "    C_T f = floor(v);\n    base[i] = (long)f;\n    w[i][0] = 1 - (v - f);\n    w[i][1] = v - f;\n"
        }
        SampleMode::Cubic => {
            "    C_T f = floor(v);\n    base[i] = (long)f - 1;\n    C_T t = v - f;\n    \
             w[i][0] = cw(t + 1);\n    w[i][1] = cw(t);\n    w[i][2] = cw(1 - t);\n    w[i][3] = cw(2 - t);\n"
        }
    };
    let fetch = match pad {
        Padding::Zeros => "      if (at < 0 || at >= dims[i]) ok = 0;\n",
        Padding::Border => "      at = clamp(at, 0L, dims[i] - 1);\n",
        Padding::Reflection => "      at = clamp((long)trunc(refl((C_T)at, lo[i], hi[i])), 0L, dims[i] - 1);\n",
    };
    let denorm = if align { "(nv + 1) / 2 * (len - 1)" } else { "((nv + 1) * len - 1) / 2" };
    let bounds = if align { "lo[i] = 0; hi[i] = len - 1;" } else { "lo[i] = -0.5; hi[i] = len - 0.5;" };
    // f32 coordinates for f16 and f32 grids, as the host (and ONNX's reference) computes.
    let round = if c == "double" && g.dtype != DType::F64 { "(C_T)(float)" } else { "" };
    let src = format!(
        "{pragma}#define C_T {c}\n#define R {r}\n#define T {taps}\n\
         C_T refl(C_T x, C_T lo, C_T hi) {{\n  C_T rng = hi - lo;\n  if (rng <= 0) return lo;\n  \
         if (x < lo) {{ C_T dx = lo - x; C_T n = trunc(dx / rng); C_T r = dx - n * rng; \
         return fmod(n, (C_T)2) == 0 ? lo + r : hi - r; }}\n  \
         if (x > hi) {{ C_T dx = x - hi; C_T n = trunc(dx / rng); C_T r = dx - n * rng; \
         return fmod(n, (C_T)2) == 0 ? hi - r : lo + r; }}\n  return x;\n}}\n\
         C_T cw(C_T x) {{\n  const C_T a = -0.75;\n  x = fabs(x);\n  \
         if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;\n  \
         if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;\n  return 0;\n}}\n\
         __kernel void k(__global const {xp}* x, ulong xo, __global const {gp}* g, ulong go, __global {xp}* y, \
         ulong yo, long total, long C, long S, long d0, long d1, long d2) {{\n  long gid = get_global_id(0);\n  \
         if (gid >= total) return;\n  long s = gid % S, nc = gid / S, n = nc / C;\n  \
         long dims[3] = {{d0, d1, d2}};\n  long st[3];\n  long plane = 1;\n  \
         for (int i = R - 1; i >= 0; i--) {{ st[i] = plane; plane *= dims[i]; }}\n  \
         C_T lo[3], hi[3], w[3][4];\n  long base[3];\n  \
         for (int i = 0; i < R; i++) {{\n    C_T nv = (C_T){gload};\n    C_T len = (C_T)dims[i];\n    \
         C_T v = {round}({denorm});\n{coord_fix}    {bounds}\n    if (v < lo[i] || v > hi[i]) {{\n{outside}    }}\n\
         {weights}  }}\n  C_T sum = 0;\n  int count = 1;\n  for (int i = 0; i < R; i++) count *= T;\n  \
         for (int q = 0; q < count; q++) {{\n    int rem = q, ok = 1;\n    long off = 0;\n    C_T wt = 1;\n    \
         for (int i = R - 1; i >= 0; i--) {{\n      int tp = rem % T; rem /= T;\n      long at = base[i] + tp;\n\
         {fetch}      off += at * st[i];\n      wt *= w[i][tp];\n    }}\n    \
         if (ok) sum += wt * (C_T){xload};\n  }}\n  {ystore}\n}}\n",
        gload = load(g.dtype, "g", "go + (n * S + s) * R + (R - 1 - i)"),
        xload = load(x.dtype, "x", "xo + nc * plane + off"),
        ystore = store(x.dtype, "y", "yo + gid", "sum"),
    );
    let mut d = [1i64; 3];
    d[..r].copy_from_slice(&x.shape[2..]);
    let points = g.shape[1..=r].iter().product::<i64>();
    let mut args = Vec::with_capacity(13);
    args.extend(x.args());
    args.extend(g.args());
    args.extend(y.args());
    args.extend([l(total as i64), l(x.shape[1]), l(points), l(d[0]), l(d[1]), l(d[2])]);
    ctx.run(&src, &args, work(total)?)
}

fn affine_grid(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    const OP: &str = "AffineGrid";
    let t = float_in(ins, 0, "theta")?;
    input(ins, 1, "size")?;
    let info = infos.get(1).and_then(Option::as_ref).ok_or("AffineGrid: the size info is missing")?;
    let size = crate::ir::operators::tensor::value_ints(info, OP, "size")?;
    let (sp, out) = affine_grid_shape(&t.shape, &size)?;
    let y = outs.first().ok_or("output 1 is required")?;
    check_out(y, t.dtype, &out)?;
    let align = match a.int("align_corners", 0) {
        0 => false,
        1 => true,
        v => return Err(format!("attribute `align_corners` of @onnx.{OP} must be 0 or 1, found {v}")),
    };
    let r = sp.len();
    let points = sp.iter().product::<i64>() * size[0];
    if points == 0 {
        return Ok(());
    }
    let d = t.dtype;
    let pragma = pragmas(ctx, d, false)?;
    let (p, c) = (ptr_ty(d), calc_ty(d));
    let coord = if align {
        "len <= 1 ? (C_T)-1 : (C_T)-1 + (C_T)i * 2 / (C_T)(len - 1)"
    } else {
        "(C_T)-1 + (C_T)(2 * i + 1) / (C_T)len"
    };
    let src = format!(
        "{pragma}#define C_T {c}\n#define R {r}\n__kernel void k(__global const {p}* t, ulong to, __global {p}* y, ulong yo, \
         long total, long s0, long s1, long s2) {{\n  long gid = get_global_id(0);\n  if (gid >= total) return;\n  \
         long sz[3] = {{s0, s1, s2}};\n  long rest = gid;\n  C_T h[4];\n  \
         for (int k = 0; k < R; k++) {{\n    long len = sz[R - 1 - k];\n    long i = rest % len; rest /= len;\n    \
         h[k] = {coord};\n  }}\n  h[R] = 1;\n  long n = rest;\n  \
         for (int row = 0; row < R; row++) {{\n    C_T acc = 0;\n    \
         for (int k = 0; k <= R; k++) acc += (C_T){tl} * h[k];\n    {ys}\n  }}\n}}\n",
        tl = load(d, "t", "to + (n * R + row) * (R + 1) + k"),
        ys = store(d, "y", "yo + gid * R + row", "acc"),
    );
    let mut s = [1i64; 3];
    s[..r].copy_from_slice(&sp);
    let mut args = Vec::with_capacity(8);
    args.extend(t.args());
    args.extend(y.args());
    args.extend([l(points), l(s[0]), l(s[1]), l(s[2])]);
    ctx.run(&src, &args, work(points as u64)?)
}

// ---------------------------------------------------------------------------------------
// Resize and Upsample.

/// This family's texture kernels: Resize and Upsample of the spatial dims of a 4-D tensor
/// on blocked textures (`crate::ir::operators::blocked`).
pub static TEXTURE: &[(Operator, TextureFn)] = &[
    (Operator::Resize, |ctx, _, ins, infos, a, y| resize_texture(ctx, ins, infos, a, y, false)),
    (Operator::Upsample, |ctx, _, ins, infos, a, y| resize_texture(ctx, ins, infos, a, y, true)),
];

/// One work-item per output texel: the taps of the resized spatial dims (the host's
/// tables), four channels at a time.
fn resize_texture(
    ctx: &ClCtx,
    ins: &[Option<ClOperand>],
    infos: &[Option<TensorInfo>],
    a: &Attrs,
    y: &ClTexture,
    upsample: bool,
) -> Res {
    let x = texture(ins, 0)?;
    let mut logical: Vec<Option<TensorInfo>> = infos.to_vec();
    let first = logical.first_mut().ok_or("input 1 is required")?;
    *first = Some(TensorInfo { dtype: DType::F32, shape: &x.shape, value: None });
    let plan = resize_plan(&logical, a, upsample)?;
    if plan.input.len() != 4 || !plan.is_identity(0) || !plan.is_identity(1) || plan.out.get(2..) != y.shape.get(2..) {
        return Err("on textures Resize resizes the spatial dims of a 4-D [N, C, H, W] tensor only".into());
    }
    let (hi, ho, wo) = (plan.input[2], plan.out[2], plan.out[3]);
    let planes = y.shape[0] * ((y.shape[1] + 3) / 4);
    let total = planes * ho * wo;
    if total <= 0 {
        return Ok(());
    }
    let tables = plan.tables()?;
    let mut idx: Vec<u8> = Vec::new();
    let mut w: Vec<u8> = Vec::new();
    // Per spatial axis: the tap loop header, the position and the weight.
    let mut axis = Vec::new();
    for (k, (o, var)) in [(0usize, "ho"), (1, "wo")].into_iter().enumerate() {
        match tables.iter().find(|t| t.axis == 2 + o) {
            Some(t) => {
                let off = idx.len() / 8;
                idx.extend(t.idx.iter().flat_map(|v| v.to_le_bytes()));
                w.extend(t.w.iter().flat_map(|&v| (v as f32).to_le_bytes()));
                axis.push((
                    format!("long r{k} = {off}L + {var} * {taps}L;", taps = t.taps),
                    format!("ti[r{k}] < 0"),
                    format!("for (long t{k} = 0; t{k} < {taps}L; t{k}++) {{", taps = t.taps),
                    format!("ti[r{k} + t{k}]"),
                    format!("tw[r{k} + t{k}]"),
                ));
            }
            None => axis.push((String::new(), "0".into(), "{".into(), var.to_string(), "1.0f".into())),
        }
    }
    let (h, ww) = (&axis[0], &axis[1]);
    let src = format!(
        "__kernel void k(__read_only image2d_t x, __write_only image2d_t y, __global const long* ti, \
         __global const float* tw, long total, float ex) {{\n  long gid = get_global_id(0);\n  \
         if (gid >= total) return;\n  long wo = gid % {wo}L, rest = gid / {wo}L;\n  long ho = rest % {ho}L, \
         plane = rest / {ho}L;\n  {}\n  {}\n  \
         if ({} || {}) {{ write_imagef(y, AT(wo, plane * {ho}L + ho), (float4)(ex)); return; }}\n  \
         float4 acc = (float4)(0.0f);\n  {}\n    long hx = {};\n    float wh = {};\n    {}\n      \
         acc += (wh * {}) * read_imagef(x, smp, AT({}, plane * {hi}L + hx));\n    }}\n  }}\n  \
         write_imagef(y, AT(wo, plane * {ho}L + ho), acc);\n}}\n",
        h.0, ww.0, h.1, ww.1, h.2, h.3, h.4, ww.2, ww.4, ww.3
    );
    with_buffer(ctx, &idx, |ti| {
        with_buffer(ctx, &w, |tw| {
            let args = [
                KernelArg::Mem(x.mem),
                KernelArg::Mem(y.mem),
                ti,
                tw,
                l(total),
                super::cl::float_arg(plan.attrs.extrapolation as f32),
            ];
            launch(ctx, &src, &args, total)
        })
    })
}

/// The unsigned OpenCL type of `d`'s width, to move its elements as bits.
fn raw(d: DType) -> &'static str {
    match d.size() {
        1 => "uchar",
        2 => "ushort",
        4 => "uint",
        _ => "ulong",
    }
}

fn resize(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, a: &Attrs, outs: &[ClTensor], upsample: bool) -> Res {
    let op = if upsample { "Upsample" } else { "Resize" };
    let x = input(ins, 0, "X")?;
    let plan = resize_plan(infos, a, upsample)?;
    let y = outs.first().ok_or("output 1 is required")?;
    check_out(y, x.dtype, &plan.out)?;
    let d = x.dtype;
    let nearest = plan.attrs.mode == ResizeMode::Nearest;
    if !nearest && !RESIZE_NUMERIC.contains(&d) {
        return Err(format!("{op}: linear and cubic modes take float or integer tensors, found {d}"));
    }
    let total = y.numel();
    if total == 0 {
        return Ok(());
    }
    // The computing type: f64 for f64 tensors and wide integers (which f32 cannot hold).
    // Narrow integers compute in f64 too where the device has it (fewer ties rounded apart
    // from the host's).
    let wide = matches!(d, DType::F64 | DType::I32 | DType::U32 | DType::I64 | DType::U64);
    let double = !nearest && (wide || (!d.is_float() && ctx.has_fp64()));
    if double && !ctx.has_fp64() {
        return Err(format!("{op}: interpolating {d} tensors needs a device with fp64 support (cl_khr_fp64)"));
    }
    let tables = plan.tables()?;
    let r = plan.out.len();
    let mut st = vec![1i64; r];
    for i in (0..r.saturating_sub(1)).rev() {
        st[i] = st[i + 1] * plan.input[i + 1];
    }
    let mut idx: Vec<u8> = Vec::new();
    let mut w: Vec<u8> = Vec::new();
    let mut offs = Vec::with_capacity(tables.len());
    let mut n = 0usize;
    for t in &tables {
        offs.push(n);
        n += t.idx.len();
        idx.extend(t.idx.iter().flat_map(|v| v.to_le_bytes()));
        if double {
            w.extend(t.w.iter().flat_map(|v| v.to_le_bytes()));
        } else {
            w.extend(t.w.iter().flat_map(|&v| (v as f32).to_le_bytes()));
        }
    }
    let mut ex = vec![0u8; 8];
    super::resize::store_saturating(d, plan.attrs.extrapolation, &mut ex[..d.size()]);
    let ex = u64::from_le_bytes(ex.try_into().unwrap_or([0; 8]));
    let c = if double { "double" } else { "float" };
    let pragma = if double { super::elementwise_cl::FP64_PRAGMA } else { "" };
    let (xt, yt) = if nearest {
        (raw(d), raw(d))
    } else if matches!(d, DType::F16 | DType::F32 | DType::F64) {
        (ptr_ty(d), ptr_ty(d))
    } else {
        (cl_type(d), cl_type(d))
    };
    let mut b = String::new();
    let _ = write!(
        b,
        "{pragma}#define C_T {c}\n__kernel void k(__global const {xt}* x, ulong xo, __global {yt}* y, ulong yo, \
         __global const long* ti, __global const C_T* tw, ulong total, ulong ex) {{\n  \
         ulong gid = get_global_id(0);\n  if (gid >= total) return;\n  ulong rem = gid;\n  long base = 0;\n"
    );
    let mut at_axis = vec![None; r];
    for (j, t) in tables.iter().enumerate() {
        at_axis[t.axis] = Some(j);
    }
    for ax in (0..r).rev() {
        let _ = writeln!(b, "  long p{ax} = (long)(rem % {o}UL); rem /= {o}UL;", o = plan.out[ax].max(1));
        match at_axis[ax] {
            None => {
                let _ = writeln!(b, "  base += p{ax} * {}L;", st[ax]);
            }
            Some(j) => {
                let _ = writeln!(b, "  long r{j} = {}L + p{ax} * {}L;", offs[j], tables[j].taps);
            }
        }
    }
    if !tables.is_empty() {
        let cond: Vec<String> = (0..tables.len()).map(|j| format!("ti[r{j}] < 0")).collect();
        let _ = writeln!(
            b,
            "  if ({}) {{ ((__global {rt}*)y)[yo + gid] = ({rt})ex; return; }}",
            cond.join(" || "),
            rt = raw(d)
        );
    }
    if nearest {
        let off: String = tables.iter().enumerate().map(|(j, t)| format!(" + ti[r{j}] * {}L", st[t.axis])).collect();
        let _ = writeln!(b, "  y[yo + gid] = x[xo + base{off}];\n}}");
    } else {
        let _ = writeln!(b, "  C_T acc = 0;\n  long o_ = base;\n  C_T w_ = 1;");
        let mut prev = ("o_".to_string(), "w_".to_string());
        for (j, t) in tables.iter().enumerate() {
            let _ = writeln!(
                b,
                "  for (long t{j} = 0; t{j} < {taps}L; t{j}++) {{\n  long o{j} = {po} + ti[r{j} + t{j}] * {s}L;\n  \
                 C_T w{j} = {pw} * tw[r{j} + t{j}];",
                taps = t.taps,
                po = prev.0,
                pw = prev.1,
                s = st[t.axis]
            );
            prev = (format!("o{j}"), format!("w{j}"));
        }
        let xl = if matches!(d, DType::F16 | DType::F32 | DType::F64) {
            load(d, "x", &format!("xo + {}", prev.0))
        } else {
            format!("x[xo + {}]", prev.0)
        };
        let _ = writeln!(b, "  acc += {} * (C_T){xl};", prev.1);
        for _ in &tables {
            b.push_str("  }\n");
        }
        let st_ = if matches!(d, DType::F16 | DType::F32 | DType::F64) {
            store(d, "y", "yo + gid", "acc")
        } else {
            format!("y[yo + gid] = convert_{}_sat_rte(acc);", cl_type(d))
        };
        let _ = writeln!(b, "  {st_}\n}}");
    }
    let mut args = Vec::with_capacity(9);
    args.extend(x.args());
    args.extend(y.args());
    with_buffer(ctx, &idx, |ti| {
        with_buffer(ctx, &w, |tw| {
            args.extend([ti, tw, l(total as i64), KernelArg::U64(ex)]);
            ctx.run(&b, &args, work(total)?)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ir::host_tensor::HostTensor;
    use crate::ops::cl::testing::device;
    use crate::ops::cl::testing::run_kernel;
    use crate::ops::host::infos;
    use crate::ops::loss::floats;
    use crate::ops::loss_cl::tests::{attrs, random, tensor};
    use crate::ops::OPS;

    /// `loss_cl`'s check, but integers may differ by 1 (a tie the device's f32 rounds the
    /// other way).
    fn check(dev: &crate::opencl::device::ClDevice, name: &str, ins: &[Option<HostTensor>], a: &Attrs, _: usize) {
        let def = OPS.iter().find(|o| o.name == name).unwrap();
        let refs: Vec<Option<&HostTensor>> = ins.iter().map(Option::as_ref).collect();
        let inf = infos(&refs).unwrap();
        let inferred = (def.infer)(&inf, a).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut want: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        (def.op.id().host_kernel().unwrap())(&refs, a, &mut want).unwrap_or_else(|e| panic!("{name} (host): {e}"));
        let got = run_kernel(dev, name, ins, &inf, a, &want);
        let (w, g) = (&want[0], HostTensor::new(want[0].dtype, want[0].shape.clone(), got[0].clone()).unwrap());
        if w.dtype == DType::I64 {
            assert_eq!(w.data, g.data, "{name} {a}");
            return;
        }
        let tol = if w.dtype == DType::F16 { 2e-3 } else { 1e-4 };
        for (i, (x, y)) in floats(w).iter().zip(&floats(&g)).enumerate() {
            let ok = if w.dtype.is_float() { (x - y).abs() <= tol * x.abs().max(1.0) } else { (x - y).abs() <= 1.0 };
            assert!(ok, "{name} {a} {:?}: element {i}: host {x}, OpenCL {y}", w.shape);
        }
    }

    fn s(v: &str) -> AttrValue {
        AttrValue::Str(v.into())
    }

    #[test]
    fn sampling_kernels_match_the_host() {
        let Some(dev) = device() else { return };
        let mut dtypes = vec![DType::F32, DType::F16];
        if dev.has_fp64 {
            dtypes.push(DType::F64);
        }
        for d in dtypes {
            for (xs, gs) in [
                (&[2i64, 3, 4, 5][..], &[2i64, 3, 6, 2][..]),
                (&[1, 2, 3, 4, 2][..], &[1, 2, 3, 2, 3][..]),
                (&[1, 2, 7][..], &[1, 5, 1][..]),
            ] {
                let x = random(d, xs, 1, -2.0, 2.0);
                let g = random(d, gs, 2, -1.6, 1.6);
                for mode in ["linear", "nearest", "cubic"] {
                    if mode == "cubic" && xs.len() != 4 {
                        continue;
                    }
                    for pad in ["zeros", "border", "reflection"] {
                        for ac in [0, 1] {
                            let a = attrs(&[
                                ("mode", s(mode)),
                                ("padding_mode", s(pad)),
                                ("align_corners", AttrValue::Int(ac)),
                            ]);
                            check(&dev, "GridSample", &[Some(x.clone()), Some(g.clone())], &a, 1);
                        }
                    }
                }
            }
            for (ts, size) in
                [(&[2i64, 2, 3][..], &[2.0, 3.0, 4.0, 5.0][..]), (&[1, 3, 4][..], &[1.0, 1.0, 3.0, 1.0, 4.0][..])]
            {
                let th = random(d, ts, 3, -1.0, 1.0);
                let sz = tensor(DType::I64, &[size.len() as i64], size);
                for ac in [0, 1] {
                    check(
                        &dev,
                        "AffineGrid",
                        &[Some(th.clone()), Some(sz.clone())],
                        &attrs(&[("align_corners", AttrValue::Int(ac))]),
                        1,
                    );
                }
            }
        }
    }

    #[test]
    fn resize_kernels_match_the_host() {
        let Some(dev) = device() else { return };
        let mut dtypes = vec![DType::F32, DType::F16, DType::U8, DType::I8];
        if dev.has_fp64 {
            dtypes.extend([DType::F64, DType::I32]);
        }
        let none = None;
        for d in dtypes {
            let x = if matches!(d, DType::U8) {
                random(DType::F32, &[2, 3, 5, 7], 1, 0.0, 255.0)
            } else if matches!(d, DType::I8) {
                random(DType::F32, &[2, 3, 5, 7], 1, -128.0, 127.0)
            } else {
                random(DType::F32, &[2, 3, 5, 7], 1, -2.0, 2.0)
            };
            let x = tensor(d, &x.shape, &crate::ops::loss::floats(&x).iter().map(|v| v.round()).collect::<Vec<_>>());
            let x = if d.is_float() { random(d, &[2, 3, 5, 7], 1, -2.0, 2.0) } else { x };
            let scales = [
                tensor(DType::F32, &[4], &[1.0, 1.0, 2.0, 1.5]),
                tensor(DType::F32, &[4], &[1.0, 1.0, 0.6, 0.5]),
                tensor(DType::F32, &[4], &[1.0, 2.0, 1.7, 0.8]),
            ];
            let sizes = [tensor(DType::I64, &[2], &[3.0, 11.0])];
            let roi = tensor(DType::F32, &[4], &[0.2, 0.1, 0.9, 1.2]);
            for mode in ["nearest", "linear", "cubic"] {
                if !d.is_float() && mode == "cubic" {
                    continue;
                }
                for coord in [
                    "half_pixel",
                    "half_pixel_symmetric",
                    "pytorch_half_pixel",
                    "align_corners",
                    "asymmetric",
                    "tf_crop_and_resize",
                ] {
                    let mut cases = Vec::new();
                    for sc in &scales {
                        cases.push((vec![Some(x.clone()), none.clone(), Some(sc.clone())], vec![]));
                    }
                    for sz in &sizes {
                        let axes = ("axes", AttrValue::Ints(vec![2, 3]));
                        let r = if coord == "tf_crop_and_resize" { Some(roi.clone()) } else { None };
                        cases.push((vec![Some(x.clone()), r, None, Some(sz.clone())], vec![axes.clone()]));
                        for p in ["not_larger", "not_smaller"] {
                            let r = if coord == "tf_crop_and_resize" { Some(roi.clone()) } else { None };
                            cases.push((
                                vec![Some(x.clone()), r, None, Some(sz.clone())],
                                vec![axes.clone(), ("keep_aspect_ratio_policy", s(p))],
                            ));
                        }
                    }
                    for (ins, extra) in cases {
                        if coord == "tf_crop_and_resize" && ins.get(1).is_none_or(Option::is_none) {
                            continue;
                        }
                        let mut list = vec![("mode", s(mode)), ("coordinate_transformation_mode", s(coord))];
                        list.extend(extra.iter().cloned());
                        if coord == "tf_crop_and_resize" {
                            list.push(("extrapolation_value", AttrValue::Float(-1.5)));
                        }
                        check(&dev, "Resize", &ins, &attrs(&list), 1);
                        if mode == "nearest" {
                            for nm in ["round_prefer_ceil", "floor", "ceil"] {
                                let mut l2 = list.clone();
                                l2.push(("nearest_mode", s(nm)));
                                check(&dev, "Resize", &ins, &attrs(&l2), 1);
                            }
                        } else {
                            let mut l2 = list.clone();
                            l2.push(("antialias", AttrValue::Int(1)));
                            check(&dev, "Resize", &ins, &attrs(&l2), 1);
                            if mode == "cubic" {
                                let mut l3 = list.clone();
                                l3.push(("exclude_outside", AttrValue::Int(1)));
                                l3.push(("cubic_coeff_a", AttrValue::Float(-0.5)));
                                check(&dev, "Resize", &ins, &attrs(&l3), 1);
                            }
                        }
                    }
                }
            }
            for mode in ["nearest", "linear"] {
                let sc = tensor(DType::F32, &[4], &[1.0, 1.0, 2.0, 3.0]);
                check(&dev, "Upsample", &[Some(x.clone()), Some(sc)], &attrs(&[("mode", s(mode))]), 1);
            }
        }
        // Nearest moves any dtype, i64 exactly.
        let x = tensor(DType::I64, &[1, 1, 2, 3], &[1.0, -2.0, 3.0, 4.0, 5.0, 1e15]);
        let sc = tensor(DType::F32, &[4], &[1.0, 1.0, 2.5, 1.5]);
        check(&dev, "Resize", &[Some(x), None, Some(sc)], &attrs(&[]), 1);
    }
}
