//! OpenCL buffer kernels for the sampling family (GridSample, AffineGrid; see `super::cl`),
//! mirroring the host kernels in `super::resize`: one work-item per output point, the
//! mode, padding and rank compiled into the source.

use super::cl::{check_out, input};
use super::cl::{long_arg as l, ClCtx, ClFn, ClTensor, Infos, Res};
use super::loss_cl::{calc_ty, load, pragmas, ptr_ty, store, work};
use super::{Attrs, Operator};
use crate::ir::operators::loss::FLOATS;
use crate::ir::operators::resize::*;
use crate::ir::types::DType;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[(Operator::GridSample, grid_sample), (Operator::AffineGrid, affine_grid)];

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ops::cl::testing::device;
    use crate::ops::loss_cl::tests::{attrs, check, random, tensor};

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
}
