//! Operators: the detection family (RoiAlign, DeformConv): the host kernels and their
//! `HOST` table (the schemas are in `crate::ir::operators::detection`). Floats compute in
//! f64 and round once to their dtype.

use super::host::HostFn;
use super::host::{prepare, req};
use super::loss::{floats, ints, put};
use super::Attrs;
use crate::ir::host_tensor::HostTensor;
use crate::ir::operators::detection::*;
use crate::ir::operators::Operator;
use crate::ir::types::DType;

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[(Operator::RoiAlign, roi_align), (Operator::DeformConv, deform_conv)];

fn shapes<'a>(ins: &[Option<&'a HostTensor>]) -> Vec<Option<(DType, &'a [i64])>> {
    ins.iter().map(|t| t.map(|t| (t.dtype, &t.shape[..]))).collect()
}

/// One roi's geometry: start (y, x), bin size (y, x) and samples per bin (y, x).
pub(crate) struct RoiGeo {
    pub(crate) start: [f64; 2],
    pub(crate) bin: [f64; 2],
    pub(crate) grid: [usize; 2],
}

/// The geometry of roi `[x1, y1, x2, y2]`, as ONNX's reference computes it.
pub(crate) fn roi_geo(p: &Roi, r: &[f64]) -> RoiGeo {
    let off = if p.half_pixel { 0.5 } else { 0.0 };
    let at = |i: usize| r.get(i).copied().unwrap_or(0.0) * p.scale - off;
    let (x1, y1, x2, y2) = (at(0), at(1), at(2), at(3));
    let (mut rw, mut rh) = (x2 - x1, y2 - y1);
    if !p.half_pixel {
        rw = rw.max(1.0);
        rh = rh.max(1.0);
    }
    let (bh, bw) = (rh / p.oh as f64, rw / p.ow as f64);
    let grid = |size: f64, out: usize| {
        if p.sampling > 0 {
            p.sampling
        } else {
            // ceil(roi / output), as an integer (negative or NaN sizes give 0 samples).
            let v = (size / out as f64).ceil();
            if v.is_finite() && v > 0.0 {
                v.min(1e6) as usize
            } else {
                0
            }
        }
    };
    RoiGeo { start: [y1, x1], bin: [bh, bw], grid: [grid(rh, p.oh), grid(rw, p.ow)] }
}

/// The four (index, weight) corners of a bilinear sample at (y, x) of an h × w image, as
/// RoiAlign's reference takes them (zero weights outside [-1, size]).
pub(crate) fn roi_corners(mut y: f64, mut x: f64, h: usize, w: usize) -> [(usize, f64); 4] {
    // A NaN position (from NaN rois) samples nothing, as one outside the image.
    if !(y >= -1.0 && y <= h as f64 && x >= -1.0 && x <= w as f64) || h == 0 || w == 0 {
        return [(0, 0.0); 4];
    }
    y = y.max(0.0);
    x = x.max(0.0);
    let (mut yl, mut xl) = (y as usize, x as usize);
    let (yh, xh);
    if yl >= h - 1 {
        yl = h - 1;
        yh = yl;
        y = yl as f64;
    } else {
        yh = yl + 1;
    }
    if xl >= w - 1 {
        xl = w - 1;
        xh = xl;
        x = xl as f64;
    } else {
        xh = xl + 1;
    }
    let (ly, lx) = (y - yl as f64, x - xl as f64);
    let (hy, hx) = (1.0 - ly, 1.0 - lx);
    [(yl * w + xl, hy * hx), (yl * w + xh, hy * lx), (yh * w + xl, ly * hx), (yh * w + xh, ly * lx)]
}

fn roi_align(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, out, infer_roi_align)?;
    let p = roi_dims(&shapes(ins), a)?;
    let x = floats(req(ins, 0)?);
    let rois = floats(req(ins, 1)?);
    let bi = ints(req(ins, 2)?);
    check_batch_indices(&bi, p.n)?;
    let plane = p.h * p.w;
    let mut y = vec![0.0; p.rois * p.c * p.oh * p.ow];
    for r in 0..p.rois {
        let g = roi_geo(&p, rois.get(r * 4..r * 4 + 4).unwrap_or(&[]));
        let b = bi.get(r).copied().unwrap_or(0) as usize;
        let count = (g.grid[0] * g.grid[1]).max(1) as f64;
        for c in 0..p.c {
            let img = x.get((b * p.c + c) * plane..(b * p.c + c + 1) * plane).unwrap_or(&[]);
            let at = |i: usize| img.get(i).copied().unwrap_or(0.0);
            for ph in 0..p.oh {
                for pw in 0..p.ow {
                    let mut v: Option<f64> = None;
                    let mut sum = 0.0;
                    for iy in 0..g.grid[0] {
                        let yy = g.start[0] + ph as f64 * g.bin[0] + (iy as f64 + 0.5) * g.bin[0] / g.grid[0] as f64;
                        for ix in 0..g.grid[1] {
                            let xx =
                                g.start[1] + pw as f64 * g.bin[1] + (ix as f64 + 0.5) * g.bin[1] / g.grid[1] as f64;
                            let cs = roi_corners(yy, xx, p.h, p.w);
                            if p.max {
                                let m = cs.iter().map(|&(i, wt)| wt * at(i)).fold(f64::NEG_INFINITY, f64::max);
                                v = Some(v.map_or(m, |o: f64| o.max(m)));
                            } else {
                                sum += cs.iter().map(|&(i, wt)| wt * at(i)).sum::<f64>();
                            }
                        }
                    }
                    y[((r * p.c + c) * p.oh + ph) * p.ow + pw] = if p.max { v.unwrap_or(0.0) } else { sum / count };
                }
            }
        }
    }
    put(&mut out[0], &y);
    Ok(())
}

/// Bilinear sample of an h × w image at (y, x), zeros outside (GridSample with
/// align_corners and zero padding, as DeformConv's reference samples).
pub(crate) fn bilinear(img: &[f64], h: usize, w: usize, y: f64, x: f64) -> f64 {
    if !(y > -1.0 && y < h as f64 && x > -1.0 && x < w as f64) {
        return 0.0;
    }
    let (y0, x0) = (y.floor(), x.floor());
    let (ly, lx) = (y - y0, x - x0);
    let at = |yy: f64, xx: f64| {
        if yy < 0.0 || xx < 0.0 || yy >= h as f64 || xx >= w as f64 {
            0.0
        } else {
            img.get(yy as usize * w + xx as usize).copied().unwrap_or(0.0)
        }
    };
    at(y0, x0) * (1.0 - ly) * (1.0 - lx)
        + at(y0, x0 + 1.0) * (1.0 - ly) * lx
        + at(y0 + 1.0, x0) * ly * (1.0 - lx)
        + at(y0 + 1.0, x0 + 1.0) * ly * lx
}

fn deform_conv(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, out, infer_deform_conv)?;
    let p = deform_dims(&shapes(ins), a)?;
    let x = floats(req(ins, 0)?);
    let wt = floats(req(ins, 1)?);
    let off = floats(req(ins, 2)?);
    let bias = ins.get(3).copied().flatten().map(floats);
    let mask = ins.get(4).copied().flatten().map(floats);
    let (icg, ocg) = (p.c / p.group, p.oc / p.group);
    let icog = p.c / p.offset_group;
    let (kk, plane, oplane) = (p.kh * p.kw, p.h * p.w, p.oh * p.ow);
    let get = |v: &[f64], i: usize| v.get(i).copied().unwrap_or(0.0);
    let mut y = vec![0.0; p.n * p.oc * oplane];
    for n in 0..p.n {
        for o in 0..p.oc {
            let g = o / ocg;
            for i in 0..p.oh {
                for j in 0..p.ow {
                    let mut v = bias.as_ref().map_or(0.0, |b| get(b, o));
                    for ci in 0..icg {
                        let c = g * icg + ci;
                        let og = c / icog;
                        let img = x.get((n * p.c + c) * plane..(n * p.c + c + 1) * plane).unwrap_or(&[]);
                        for ki in 0..p.kh {
                            for kj in 0..p.kw {
                                let k = ki * p.kw + kj;
                                let oi = (((n * p.offset_group + og) * kk + k) * 2) * oplane + i * p.ow + j;
                                let yy =
                                    (i * p.strides[0] + ki * p.dilations[0]) as f64 - p.pads[0] as f64 + get(&off, oi);
                                let xx = (j * p.strides[1] + kj * p.dilations[1]) as f64 - p.pads[1] as f64
                                    + get(&off, oi + oplane);
                                let m = mask.as_ref().map_or(1.0, |m| {
                                    get(m, ((n * p.offset_group + og) * kk + k) * oplane + i * p.ow + j)
                                });
                                v += get(&wt, (o * icg + ci) * kk + k) * m * bilinear(img, p.h, p.w, yy, xx);
                            }
                        }
                    }
                    y[((n * p.oc + o) * p.oh + i) * p.ow + j] = v;
                }
            }
        }
    }
    put(&mut out[0], &y);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ops::host::testing::{attrs, tensor};

    fn run(op: &str, ins: &[Option<HostTensor>], a: &Attrs) -> Result<Vec<f64>, String> {
        let def = crate::ops::OPS.iter().find(|o| o.name == op).unwrap();
        let refs: Vec<Option<&HostTensor>> = ins.iter().map(Option::as_ref).collect();
        let inferred = (def.infer)(&crate::ops::host::infos(&refs)?, a)?;
        let mut out: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        (def.op.id().host_kernel().unwrap())(&refs, a, &mut out)?;
        Ok(floats(&out[0]))
    }

    fn i64s(shape: &[i64], v: &[i64]) -> HostTensor {
        HostTensor::new(DType::I64, shape.to_vec(), v.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap()
    }

    #[test]
    fn roi_align_by_hand() {
        // A 2×2 image [[1, 2], [3, 4]], one roi over all of it, one output bin, one sample
        // at its centre (0.5, 0.5) with output_half_pixel: the mean 2.5.
        let x = tensor(DType::F32, &[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
        let r = tensor(DType::F32, &[1, 4], &[0.0, 0.0, 1.0, 1.0]);
        let a = attrs(&[
            ("coordinate_transformation_mode", AttrValue::Str("output_half_pixel".into())),
            ("sampling_ratio", AttrValue::Int(1)),
        ]);
        let y = run("RoiAlign", &[Some(x.clone()), Some(r.clone()), Some(i64s(&[1], &[0]))], &a).unwrap();
        assert_eq!(y, vec![2.5]);
        // Max mode: the largest weighted corner, 4 · 0.25.
        let mut m = a.clone();
        m.0.push(("mode".into(), AttrValue::Str("max".into())));
        let y = run("RoiAlign", &[Some(x.clone()), Some(r.clone()), Some(i64s(&[1], &[0]))], &m).unwrap();
        assert_eq!(y, vec![1.0]);
        // A batch index outside X's batch is an error, as are bad attributes.
        let e = run("RoiAlign", &[Some(x.clone()), Some(r.clone()), Some(i64s(&[1], &[1]))], &a).unwrap_err();
        assert!(e.contains("batch_indices[0] = 1"), "{e}");
        let bad = attrs(&[("mode", AttrValue::Str("min".into()))]);
        assert!(run("RoiAlign", &[Some(x), Some(r), Some(i64s(&[1], &[0]))], &bad).unwrap_err().contains("`mode`"));
    }

    #[test]
    fn deform_conv_by_hand() {
        // A 1×1 kernel of weight 2 over a 2×2 image; offsets move every tap by (0, 0.5):
        // each output is 2 · the mean of a pixel and its right neighbour (0 past the edge).
        let x = tensor(DType::F32, &[1, 1, 2, 2], &[1.0, 3.0, 5.0, 7.0]);
        let w = tensor(DType::F32, &[1, 1, 1, 1], &[2.0]);
        let off = tensor(DType::F32, &[1, 2, 2, 2], &[0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5]);
        let y = run("DeformConv", &[Some(x.clone()), Some(w.clone()), Some(off.clone())], &Attrs::default()).unwrap();
        assert_eq!(y, vec![4.0, 3.0, 12.0, 7.0]);
        // Bias and mask.
        let b = tensor(DType::F32, &[1], &[1.0]);
        let m = tensor(DType::F32, &[1, 1, 2, 2], &[1.0, 0.0, 0.5, 1.0]);
        let y = run(
            "DeformConv",
            &[Some(x.clone()), Some(w.clone()), Some(off.clone()), Some(b), Some(m)],
            &Attrs::default(),
        )
        .unwrap();
        assert_eq!(y, vec![5.0, 1.0, 7.0, 8.0]);
        // A wrong offset shape is an error.
        let bad = tensor(DType::F32, &[1, 2, 1, 2], &[0.0; 4]);
        let e = run("DeformConv", &[Some(x), Some(w), Some(bad)], &Attrs::default()).unwrap_err();
        assert!(e.contains("offset must be [1, 2, 2, 2]"), "{e}");
    }
}
