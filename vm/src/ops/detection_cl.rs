//! OpenCL buffer kernels for the detection family (see `super::cl`). They mirror the host
//! kernels in `super::detection`: a work-item per output element. RoiAlign reads its
//! (small) batch indices back to check them first.

use super::cl::{check_out, float_arg, input, long_arg as l, ClCtx, ClFn, ClTensor, Infos, Res};
use super::loss_cl::{calc_ty, pragmas, ptr_ty, work};
use super::signal_cl::host_copy;
use super::{Attrs, Operator};
use crate::ir::operators::detection::*;
use crate::ir::types::DType;
use crate::opencl::device::KernelArg;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[(Operator::RoiAlign, roi_align), (Operator::DeformConv, deform_conv)];

fn shapes(ins: &[Option<ClTensor>]) -> Vec<Option<(DType, &[i64])>> {
    ins.iter().map(|t| t.as_ref().map(|t| (t.dtype, &t.shape[..]))).collect()
}

/// Types, loads and stores of a float dtype: `TP` (buffer), `C` (compute), `LD`, `ST`.
fn head(ctx: &ClCtx, d: DType) -> Result<String, String> {
    let mut s = pragmas(ctx, d, false)?.to_string();
    s.push_str(&format!("typedef {} TP;\ntypedef {} C;\n", ptr_ty(d), calc_ty(d)));
    if d == DType::F16 {
        s.push_str("#define LD(p, i) vload_half((i), (p))\n#define ST(p, i, v) vstore_half((float)(v), (i), (p))\n");
    } else {
        s.push_str("#define LD(p, i) ((C)(p)[(i)])\n#define ST(p, i, v) ((p)[(i)] = (TP)(v))\n");
    }
    Ok(s)
}

/// A float argument in the compute type of `d`.
fn c_arg(d: DType, v: f64) -> KernelArg {
    if d == DType::F64 {
        KernelArg::Bytes(v.to_ne_bytes(), 8)
    } else {
        float_arg(v as f32)
    }
}

fn roi_align(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    let p = roi_dims(&shapes(ins), a)?;
    let (x, r, b) = (input(ins, 0, "X")?, input(ins, 1, "rois")?, input(ins, 2, "batch_indices")?);
    let y = outs.first().ok_or("RoiAlign: the output is missing")?;
    let i = |v: usize| v as i64;
    check_out(y, p.dtype, &[i(p.rois), i(p.c), i(p.oh), i(p.ow)])?;
    check_batch_indices(&host_copy(ctx, b, infos.get(2).and_then(Option::as_ref))?.to_i64(), p.n)?;
    let h = head(ctx, p.dtype)?;
    let src = format!(
        "{h}#define MAXMODE {}\n#define HALF {}\n#define SR {}\n\
         __kernel void k(__global const TP* x, ulong xo, __global const TP* r, ulong ro, __global const long* bi, \
         ulong bo, __global TP* y, ulong yo, long CH, long H, long W, long OH, long OW, C scale) {{\n  \
         long id = get_global_id(0);\n  long pw = id % OW, t = id / OW;\n  long ph = t % OH; t /= OH;\n  \
         long c = t % CH, n = t / CH;\n  C off = HALF ? (C)0.5 : (C)0;\n  \
         C x1 = LD(r, ro + n * 4) * scale - off, y1 = LD(r, ro + n * 4 + 1) * scale - off;\n  \
         C x2 = LD(r, ro + n * 4 + 2) * scale - off, y2 = LD(r, ro + n * 4 + 3) * scale - off;\n  \
         C rw = x2 - x1, rh = y2 - y1;\n  if (!HALF) {{ rw = fmax(rw, (C)1); rh = fmax(rh, (C)1); }}\n  \
         C bh = rh / (C)OH, bw = rw / (C)OW;\n  long gh = SR, gw = SR;\n  if (SR == 0) {{\n    \
         C vh = ceil(rh / (C)OH), vw = ceil(rw / (C)OW);\n    gh = isfinite(vh) && vh > 0 ? (long)fmin(vh, (C)1e6) : 0;\n    \
         gw = isfinite(vw) && vw > 0 ? (long)fmin(vw, (C)1e6) : 0;\n  }}\n  \
         C count = (C)max(gh * gw, (long)1);\n  long base = (bi[bo + n] * CH + c) * H * W;\n  \
         C acc = 0;\n  int any = 0;\n  \
         for (long iy = 0; iy < gh; iy++) {{\n    \
         C yy = y1 + (C)ph * bh + ((C)iy + (C)0.5) * bh / (C)gh;\n    \
         for (long ix = 0; ix < gw; ix++) {{\n      \
         C xx = x1 + (C)pw * bw + ((C)ix + (C)0.5) * bw / (C)gw;\n      \
         C v1 = 0, v2 = 0, v3 = 0, v4 = 0;\n      \
         if (yy >= (C)-1 && yy <= (C)H && xx >= (C)-1 && xx <= (C)W) {{\n        \
         C yv = fmax(yy, (C)0), xv = fmax(xx, (C)0);\n        long yl = (long)yv, xl = (long)xv, yh, xh;\n        \
         if (yl >= H - 1) {{ yl = H - 1; yh = yl; yv = (C)yl; }} else yh = yl + 1;\n        \
         if (xl >= W - 1) {{ xl = W - 1; xh = xl; xv = (C)xl; }} else xh = xl + 1;\n        \
         C ly = yv - (C)yl, lx = xv - (C)xl, hy = (C)1 - ly, hx = (C)1 - lx;\n        \
         v1 = hy * hx * LD(x, xo + base + yl * W + xl);\n        v2 = hy * lx * LD(x, xo + base + yl * W + xh);\n        \
         v3 = ly * hx * LD(x, xo + base + yh * W + xl);\n        v4 = ly * lx * LD(x, xo + base + yh * W + xh);\n      \
         }}\n      \
         if (MAXMODE) {{\n        C m = fmax(fmax(v1, v2), fmax(v3, v4));\n        acc = any ? fmax(acc, m) : m;\n        \
         any = 1;\n      }} else acc += v1 + v2 + v3 + v4;\n    }}\n  }}\n  \
         ST(y, yo + id, MAXMODE ? acc : acc / count);\n}}\n",
        p.max as u8, p.half_pixel as u8, p.sampling
    );
    let n = (p.rois * p.c * p.oh * p.ow) as u64;
    if n == 0 {
        return Ok(());
    }
    let mut args: Vec<KernelArg> = Vec::new();
    args.extend(x.args());
    args.extend(r.args());
    args.extend(b.args());
    args.extend(y.args());
    args.extend([l(i(p.c)), l(i(p.h)), l(i(p.w)), l(i(p.oh)), l(i(p.ow))]);
    args.push(c_arg(p.dtype, p.scale));
    ctx.run(&src, &args, work(n)?)
}

fn deform_conv(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    let p = deform_dims(&shapes(ins), a)?;
    let (x, w, off) = (input(ins, 0, "X")?, input(ins, 1, "W")?, input(ins, 2, "offset")?);
    let (b, m) = (ins.get(3).and_then(Option::as_ref), ins.get(4).and_then(Option::as_ref));
    let y = outs.first().ok_or("DeformConv: the output is missing")?;
    let i = |v: usize| v as i64;
    check_out(y, p.dtype, &[i(p.n), i(p.oc), i(p.oh), i(p.ow)])?;
    let h = head(ctx, p.dtype)?;
    let src = format!(
        "{h}#define HAS_B {}\n#define HAS_M {}\n\
         C px(__global const TP* x, long base, long H, long W, long yy, long xx) {{\n  \
         return (yy < 0 || xx < 0 || yy >= H || xx >= W) ? (C)0 : LD(x, base + yy * W + xx);\n}}\n\
         __kernel void k(__global const TP* x, ulong xo, __global const TP* w, ulong wo, __global const TP* of, \
         ulong oo, __global const TP* b, ulong bo, __global const TP* m, ulong mo, __global TP* y, ulong yo, \
         long CH, long H, long W, long OC, long KH, long KW, long OH, long OW, long G, long OG, long PH, long PW, \
         long SH, long SW, long DH, long DW) {{\n  \
         long id = get_global_id(0);\n  long j = id % OW, t = id / OW;\n  long i = t % OH; t /= OH;\n  \
         long o = t % OC, n = t / OC;\n  long icg = CH / G, ocg = OC / G, icog = CH / OG, KK = KH * KW, OP = OH * OW;\n  \
         long g = o / ocg;\n  C v = HAS_B ? LD(b, bo + o) : (C)0;\n  \
         for (long ci = 0; ci < icg; ci++) {{\n    long c = g * icg + ci, og = c / icog;\n    \
         long base = xo + (n * CH + c) * H * W;\n    \
         for (long k = 0; k < KK; k++) {{\n      long ki = k / KW, kj = k % KW;\n      \
         long oi = oo + ((n * OG + og) * KK + k) * 2 * OP + i * OW + j;\n      \
         C yy = (C)(i * SH + ki * DH - PH) + LD(of, oi);\n      C xx = (C)(j * SW + kj * DW - PW) + LD(of, oi + OP);\n      \
         C mv = HAS_M ? LD(m, mo + ((n * OG + og) * KK + k) * OP + i * OW + j) : (C)1;\n      \
         C s = 0;\n      if (yy > (C)-1 && yy < (C)H && xx > (C)-1 && xx < (C)W) {{\n        \
         C y0 = floor(yy), x0 = floor(xx), ly = yy - y0, lx = xx - x0;\n        long yi = (long)y0, xi = (long)x0;\n        \
         s = px(x, base, H, W, yi, xi) * ((C)1 - ly) * ((C)1 - lx) + px(x, base, H, W, yi, xi + 1) * ((C)1 - ly) * lx\n          \
         + px(x, base, H, W, yi + 1, xi) * ly * ((C)1 - lx) + px(x, base, H, W, yi + 1, xi + 1) * ly * lx;\n      }}\n      \
         v += LD(w, wo + (o * icg + ci) * KK + k) * mv * s;\n    }}\n  }}\n  ST(y, yo + id, v);\n}}\n",
        b.is_some() as u8,
        m.is_some() as u8
    );
    let n = (p.n * p.oc * p.oh * p.ow) as u64;
    if n == 0 {
        return Ok(());
    }
    let mut args: Vec<KernelArg> = Vec::new();
    args.extend(x.args());
    args.extend(w.args());
    args.extend(off.args());
    args.extend(b.unwrap_or(x).args());
    args.extend(m.unwrap_or(x).args());
    args.extend(y.args());
    for v in [p.c, p.h, p.w, p.oc, p.kh, p.kw, p.oh, p.ow, p.group, p.offset_group] {
        args.push(l(i(v)));
    }
    for v in [p.pads[0], p.pads[1], p.strides[0], p.strides[1], p.dilations[0], p.dilations[1]] {
        args.push(l(i(v)));
    }
    ctx.run(&src, &args, work(n)?)
}

#[cfg(test)]
mod tests {
    use crate::ir::attrs::AttrValue;
    use crate::ir::host_tensor::HostTensor;
    use crate::ir::types::DType;
    use crate::ops::cl::testing::device;
    use crate::ops::loss_cl::tests::{attrs, check, rand, random, tensor};

    #[test]
    fn detection_kernels_match_the_host() {
        let Some(dev) = device() else { return };
        let mut dtypes = vec![DType::F32, DType::F16];
        if dev.has_fp64 {
            dtypes.push(DType::F64);
        }
        let s = |v: &str| AttrValue::Str(v.into());
        let int = AttrValue::Int;
        let ints = |v: &[i64]| AttrValue::Ints(v.to_vec());
        for d in dtypes {
            let x = random(d, &[2, 3, 9, 8], 1, -1.0, 1.0);
            // Rois inside and partly outside the image, x1 < x2 and y1 < y2.
            let mut rv = Vec::new();
            for (k, c) in rand(2, 20, -2.0, 9.0).chunks(4).enumerate() {
                let e = rand(3 + k as u64, 2, 0.5, 5.0);
                rv.extend([c[0], c[1], c[0] + e[0], c[1] + e[1]]);
            }
            // A NaN roi samples nothing.
            rv[16] = f64::NAN;
            let rois = tensor(d, &[5, 4], &rv);
            let bi =
                HostTensor::new(DType::I64, vec![5], [0i64, 1, 1, 0, 1].iter().flat_map(|v| v.to_le_bytes()).collect())
                    .unwrap();
            for mode in ["avg", "max"] {
                for ctm in ["half_pixel", "output_half_pixel"] {
                    for sr in [0i64, 2] {
                        let a = attrs(&[
                            ("mode", s(mode)),
                            ("coordinate_transformation_mode", s(ctm)),
                            ("sampling_ratio", int(sr)),
                            ("output_height", int(3)),
                            ("output_width", int(4)),
                            ("spatial_scale", AttrValue::Float(0.75)),
                        ]);
                        check(&dev, "RoiAlign", &[Some(x.clone()), Some(rois.clone()), Some(bi.clone())], &a, 1);
                    }
                }
            }
            let x = random(d, &[2, 4, 6, 5], 4, -1.0, 1.0);
            let w = random(d, &[6, 2, 3, 2], 5, -1.0, 1.0);
            let b = random(d, &[6], 6, -1.0, 1.0);
            let a = attrs(&[
                ("group", int(2)),
                ("offset_group", int(2)),
                ("pads", ints(&[1, 0, 2, 1])),
                ("strides", ints(&[2, 1])),
                ("dilations", ints(&[1, 2])),
            ]);
            // Output: oh = (6 + 3 - 3) / 2 + 1 = 4, ow = (5 + 1 - 3) / 1 + 1 = 4.
            let off = random(d, &[2, 2 * 6 * 2, 4, 4], 7, -2.0, 2.0);
            let m = random(d, &[2, 2 * 6, 4, 4], 8, 0.0, 1.0);
            check(&dev, "DeformConv", &[Some(x.clone()), Some(w.clone()), Some(off.clone())], &a, 1);
            check(&dev, "DeformConv", &[Some(x), Some(w), Some(off), Some(b), Some(m)], &a, 1);
        }
    }
}
