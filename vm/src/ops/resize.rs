//! Operators: the sampling family (GridSample, AffineGrid, Resize, Upsample): the host kernels and their
//! `HOST` table (the schemas are in `crate::ir::operators::resize`).
//!
//! They follow ONNX's reference implementation; coordinates of f16 and f32 tensors are
//! rounded to f32 where the reference computes in f32, so that ties and floors agree.

use super::host::HostFn;
use super::host::{infos, prepare, req};
use super::loss::{floats, ints, next_index, put, strides};
use super::Attrs;
use crate::ir::host_tensor::{load_f64, store_f64, store_i64, HostTensor};
use crate::ir::operators::resize::*;
use crate::ir::operators::Operator;
use crate::ir::types::DType;

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[
    (Operator::GridSample, grid_sample),
    (Operator::AffineGrid, affine_grid),
    (Operator::Resize, |i, a, o| resize(i, a, o, false)),
    (Operator::Upsample, |i, a, o| resize(i, a, o, true)),
];

// ---------------------------------------------------------------------------------------
// GridSample.

/// Reflects `x` into `[lo, hi]` by the nearer border, repeatedly.
pub(crate) fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let rng = hi - lo;
    if rng <= 0.0 {
        return lo;
    }
    if x < lo {
        let dx = lo - x;
        let n = (dx / rng).trunc();
        let r = dx - n * rng;
        if n % 2.0 == 0.0 {
            lo + r
        } else {
            hi - r
        }
    } else if x > hi {
        let dx = x - hi;
        let n = (dx / rng).trunc();
        let r = dx - n * rng;
        if n % 2.0 == 0.0 {
            hi - r
        } else {
            lo + r
        }
    } else {
        x
    }
}

/// Keys' cubic convolution weights (A = -0.75) of the 4 taps around a point `t` ∈ [0, 1)
/// past the second.
pub(crate) fn cubic_weights(t: f64, a: f64) -> [f64; 4] {
    let w = |x: f64| crate::ir::operators::resize::cubic(x, a);
    [w(t + 1.0), w(t), w(1.0 - t), w(2.0 - t)]
}

fn grid_sample(ins: &[Option<&HostTensor>], a: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, outs, infer_grid_sample)?;
    let (x, g) = (req(ins, 0)?, req(ins, 1)?);
    let (mode, pad, align) = grid_sample_attrs(a)?;
    let (xv, gv) = (floats(x), floats(g));
    let r = x.shape.len() - 2;
    let (n, c) = (x.shape[0] as usize, x.shape[1] as usize);
    let sp: Vec<usize> = x.shape[2..].iter().map(|&d| d as usize).collect();
    let plane: usize = sp.iter().product();
    let st = strides(&sp);
    let points: usize = g.shape[1..=r].iter().map(|&d| d as usize).product();
    // The reference computes coordinates in f32 for f32 (and f16) tensors.
    let round = |v: f64| if g.dtype == DType::F64 { v } else { v as f32 as f64 };
    let taps = match mode {
        SampleMode::Nearest => 1,
        SampleMode::Linear => 2,
        SampleMode::Cubic => 4,
    };
    let mut y = vec![0.0; n * c * points];
    let (mut lo, mut hi) = (vec![0.0; r], vec![0.0; r]);
    let mut w = vec![[0.0f64; 4]; r];
    let mut base = vec![0i64; r];
    let tap_dims = vec![taps; r];
    for b in 0..n {
        for p in 0..points {
            for i in 0..r {
                let nv = gv[(b * points + p) * r + (r - 1 - i)];
                let len = sp[i] as f64;
                let mut v = round(if align { (nv + 1.0) / 2.0 * (len - 1.0) } else { ((nv + 1.0) * len - 1.0) / 2.0 });
                if mode == SampleMode::Nearest {
                    v = v.round_ties_even();
                }
                (lo[i], hi[i]) = if align { (0.0, len - 1.0) } else { (-0.5, len - 0.5) };
                if v < lo[i] || v > hi[i] {
                    match pad {
                        Padding::Border => v = v.clamp(0.0, (len - 1.0).max(0.0)),
                        Padding::Reflection => v = round(reflect(v, lo[i], hi[i])),
                        Padding::Zeros => {}
                    }
                }
                match mode {
                    SampleMode::Nearest => {
                        base[i] = v.trunc() as i64;
                        w[i] = [1.0, 0.0, 0.0, 0.0];
                    }
                    SampleMode::Linear => {
                        let f = v.floor();
                        base[i] = f as i64;
                        let t = v - f;
                        w[i] = [1.0 - t, t, 0.0, 0.0];
                    }
                    SampleMode::Cubic => {
                        let f = v.floor();
                        base[i] = f as i64 - 1;
                        w[i] = cubic_weights(v - f, -0.75);
                    }
                }
            }
            for ch in 0..c {
                let xp = &xv[(b * c + ch) * plane..][..plane];
                let mut tap = vec![0usize; r];
                let mut sum = 0.0;
                loop {
                    let (mut off, mut wt, mut ok) = (0usize, 1.0, true);
                    for i in 0..r {
                        let d = sp[i] as i64;
                        let mut at = base[i] + tap[i] as i64;
                        match pad {
                            Padding::Zeros => ok &= at >= 0 && at < d,
                            Padding::Border => at = at.clamp(0, d - 1),
                            Padding::Reflection => {
                                at = (reflect(at as f64, lo[i], hi[i]).trunc() as i64).clamp(0, d - 1)
                            }
                        }
                        if ok {
                            off += at as usize * st[i];
                        }
                        wt *= w[i][tap[i]];
                    }
                    if ok && plane > 0 {
                        sum += wt * xp[off];
                    }
                    if !next_index(&mut tap, &tap_dims) {
                        break;
                    }
                }
                y[(b * c + ch) * points + p] = sum;
            }
        }
    }
    put(&mut outs[0], &y);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// AffineGrid.

/// The normalized coordinate of position `i` of `len` along an axis.
pub(crate) fn base_coord(i: usize, len: usize, align: bool) -> f64 {
    if align {
        if len <= 1 {
            -1.0
        } else {
            -1.0 + i as f64 * 2.0 / (len - 1) as f64
        }
    } else {
        -1.0 + (2 * i + 1) as f64 / len as f64
    }
}

fn affine_grid(ins: &[Option<&HostTensor>], a: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, outs, infer_affine_grid)?;
    let (t, s) = (req(ins, 0)?, req(ins, 1)?);
    let (sp, _) = affine_grid_shape(&t.shape, &ints(s))?;
    let align = a.int("align_corners", 0) == 1;
    let tv = floats(t);
    let r = sp.len();
    let sp: Vec<usize> = sp.iter().map(|&d| d as usize).collect();
    let points: usize = sp.iter().product();
    let n = t.shape[0] as usize;
    let mut y = vec![0.0; n * points * r];
    if points > 0 {
        for b in 0..n {
            let th = &tv[b * r * (r + 1)..][..r * (r + 1)];
            let mut pos = vec![0usize; r];
            for p in 0..points {
                // Homogeneous (x, y[, z], 1): x along the last axis.
                let mut h: Vec<f64> = (0..r).map(|i| base_coord(pos[r - 1 - i], sp[r - 1 - i], align)).collect();
                h.push(1.0);
                for row in 0..r {
                    y[(b * points + p) * r + row] = (0..=r).map(|k| th[row * (r + 1) + k] * h[k]).sum();
                }
                next_index(&mut pos, &sp);
            }
        }
    }
    put(&mut outs[0], &y);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Resize and Upsample.

/// Writes `v` as `dtype`: floats round to nearest, integers round to nearest even and
/// saturate (as ONNX's reference and onnxruntime do for Resize).
pub(crate) fn store_saturating(dtype: DType, v: f64, out: &mut [u8]) {
    let range = match dtype {
        DType::U8 => Some((0.0, u8::MAX as f64)),
        DType::I8 => Some((i8::MIN as f64, i8::MAX as f64)),
        DType::U16 => Some((0.0, u16::MAX as f64)),
        DType::I16 => Some((i16::MIN as f64, i16::MAX as f64)),
        DType::U32 => Some((0.0, u32::MAX as f64)),
        DType::I32 => Some((i32::MIN as f64, i32::MAX as f64)),
        DType::U64 => Some((0.0, i64::MAX as f64)),
        DType::I64 => Some((i64::MIN as f64, i64::MAX as f64)),
        _ => None,
    };
    match range {
        Some((lo, hi)) => {
            let r = v.round_ties_even();
            let r = if r.is_nan() { 0.0 } else { r.clamp(lo, hi) };
            store_i64(dtype, r as i64, out)
        }
        None => store_f64(dtype, v, out),
    }
}

/// The strides of `shape` (row-major).
fn strides_of(shape: &[i64]) -> Vec<usize> {
    let mut st = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        st[i] = st[i + 1] * shape[i + 1].max(0) as usize;
    }
    st
}

fn resize(ins: &[Option<&HostTensor>], a: &Attrs, outs: &mut [HostTensor], upsample: bool) -> Result<(), String> {
    prepare(ins, a, outs, if upsample { infer_upsample } else { infer_resize })?;
    let plan = resize_plan(&infos(ins)?, a, upsample)?;
    let x = req(ins, 0)?;
    let tables = plan.tables()?;
    let y = outs.first_mut().ok_or("an output tensor is required")?;
    let d = x.dtype;
    let es = d.size();
    let r = plan.out.len();
    let st = strides_of(&plan.input);
    let mut by_axis: Vec<Option<&AxisTable>> = vec![None; r];
    for t in &tables {
        by_axis[t.axis] = Some(t);
    }
    let total: usize = plan.out.iter().map(|&v| v.max(0) as usize).product();
    if total == 0 {
        return Ok(());
    }
    let nearest = plan.attrs.mode == ResizeMode::Nearest;
    let mut extrap = vec![0u8; es];
    store_saturating(d, plan.attrs.extrapolation, &mut extrap);
    let out_dims: Vec<usize> = plan.out.iter().map(|&v| v as usize).collect();
    let tap_dims: Vec<usize> = tables.iter().map(|t| t.taps).collect();
    let mut pos = vec![0usize; r];
    let mut tap = vec![0usize; tables.len()];
    for o in 0..total {
        let mut base = 0usize;
        let mut outside = false;
        for ax in 0..r {
            match by_axis[ax] {
                None => base += pos[ax] * st[ax],
                Some(t) => outside |= t.idx.get(pos[ax] * t.taps).is_none_or(|&i| i < 0),
            }
        }
        let dst = &mut y.data[o * es..][..es];
        if outside {
            dst.copy_from_slice(&extrap);
        } else if nearest {
            let off = base + tables.iter().map(|t| t.idx[pos[t.axis]] as usize * st[t.axis]).sum::<usize>();
            dst.copy_from_slice(&x.data[off * es..][..es]);
        } else {
            tap.iter_mut().for_each(|v| *v = 0);
            let mut sum = 0.0;
            loop {
                let (mut off, mut w) = (base, 1.0);
                for (t, &k) in tables.iter().zip(&tap) {
                    let at = pos[t.axis] * t.taps + k;
                    off += t.idx[at] as usize * st[t.axis];
                    w *= t.w[at];
                }
                sum += w * load_f64(d, &x.data[off * es..][..es]);
                if !next_index(&mut tap, &tap_dims) {
                    break;
                }
            }
            store_saturating(d, sum, dst);
        }
        next_index(&mut pos, &out_dims);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ir::bytecode::OpId;
    use crate::ir::schema::TensorInfo;
    use crate::ops::host::infos;

    fn t(d: DType, shape: &[i64], v: &[f64]) -> HostTensor {
        let mut h = HostTensor::zeros(d, shape).unwrap();
        put(&mut h, v);
        h
    }

    fn run(op: &str, ins: &[&HostTensor], a: &[(&str, AttrValue)]) -> Result<Vec<f64>, String> {
        let a = Attrs(a.iter().map(|(k, v)| (k.to_string(), v.clone())).collect());
        let def = OpId::from_name(op).unwrap().def();
        def.check_attrs(&a)?;
        let ins: Vec<Option<&HostTensor>> = ins.iter().map(|&t| Some(t)).collect();
        let inferred = (def.infer)(&infos(&ins)?, &a)?;
        let mut outs: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        (def.op.id().host_kernel().unwrap())(&ins, &a, &mut outs)?;
        Ok(floats(&outs[0]))
    }

    fn s(v: &str) -> AttrValue {
        AttrValue::Str(v.into())
    }

    #[test]
    fn grid_sample_modes_and_padding() {
        // X [1, 1, 2, 2] = [[1, 2], [3, 4]]; points (x, y) normalized with align_corners.
        let x = t(DType::F32, &[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
        let g = t(DType::F32, &[1, 1, 3, 2], &[-1.0, -1.0, 0.0, 0.0, 1.0, -1.0]);
        let ac = ("align_corners", AttrValue::Int(1));
        assert_eq!(run("GridSample", &[&x, &g], std::slice::from_ref(&ac)).unwrap(), vec![1.0, 2.5, 2.0]);
        // Nearest rounds ties to even: (0.5, 0.5) → (0, 0).
        assert_eq!(run("GridSample", &[&x, &g], &[ac.clone(), ("mode", s("nearest"))]).unwrap(), vec![1.0, 1.0, 2.0]);
        // Outside: zeros gives 0, border clamps.
        let g = t(DType::F32, &[1, 1, 1, 2], &[3.0, -1.0]);
        assert_eq!(run("GridSample", &[&x, &g], std::slice::from_ref(&ac)).unwrap(), vec![0.0]);
        assert_eq!(run("GridSample", &[&x, &g], &[ac.clone(), ("padding_mode", s("border"))]).unwrap(), vec![2.0]);
        assert_eq!(reflect(-1.25, -0.5, 1.5), 0.25);
        assert_eq!(reflect(3.75, -0.5, 1.5), -0.25);
        let e = run("GridSample", &[&x, &g], &[("mode", s("area"))]).unwrap_err();
        assert!(e.contains("must be linear, nearest or cubic"), "{e}");
        let e = run("GridSample", &[&x, &t(DType::F32, &[1, 1, 1, 3], &[0.0; 3])], &[]).unwrap_err();
        assert!(e.contains("the grid must be [N, H1, ..., H2, 2]"), "{e}");
        // Cubic weights sum to 1.
        assert!((cubic_weights(0.3, -0.75).iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn affine_grid_maps_the_base_grid() {
        // Identity theta: the base grid itself.
        let th = t(DType::F32, &[1, 2, 3], &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
        let size = HostTensor::new(DType::I64, vec![4], [1i64, 1, 2, 3].iter().flat_map(|v| v.to_le_bytes()).collect())
            .unwrap();
        let y = run("AffineGrid", &[&th, &size], &[("align_corners", AttrValue::Int(1))]).unwrap();
        assert_eq!(y, vec![-1.0, -1.0, 0.0, -1.0, 1.0, -1.0, -1.0, 1.0, 0.0, 1.0, 1.0, 1.0]);
        let y = run("AffineGrid", &[&th, &size], &[]).unwrap();
        let third = 2.0 / 3.0;
        let want = [-third, -0.5, 0.0, -0.5, third, -0.5, -third, 0.5, 0.0, 0.5, third, 0.5];
        assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6), "{y:?}");
        let e = run("AffineGrid", &[&t(DType::F32, &[1, 3, 4], &[0.0; 12]), &size], &[]).unwrap_err();
        assert!(e.contains("theta must be [N, 2, 3]"), "{e}");
    }

    fn f32s(shape: &[i64], v: &[f64]) -> HostTensor {
        t(DType::F32, shape, v)
    }

    fn resize(ins: &[Option<&HostTensor>], a: &[(&str, AttrValue)]) -> Result<(Vec<i64>, Vec<f64>), String> {
        let a = Attrs(a.iter().map(|(k, v)| (k.to_string(), v.clone())).collect());
        let def = OpId::from_name("Resize").unwrap().def();
        def.check_attrs(&a)?;
        let inferred = (def.infer)(&infos(ins)?, &a)?;
        let mut outs: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        (def.op.id().host_kernel().unwrap())(ins, &a, &mut outs)?;
        Ok((outs[0].shape.clone(), floats(&outs[0])))
    }

    #[test]
    fn resize_nearest_linear_cubic_by_hand() {
        let x = f32s(&[1, 1, 1, 2], &[1.0, 3.0]);
        let sc = f32s(&[4], &[1.0, 1.0, 1.0, 2.0]);
        // half_pixel ×2: x_ori = -0.25, 0.25, 0.75, 1.25; nearest rounds prefer floor.
        let (shape, y) = resize(&[Some(&x), None, Some(&sc)], &[]).unwrap();
        assert_eq!((shape, y), (vec![1, 1, 1, 4], vec![1.0, 1.0, 3.0, 3.0]));
        // Linear clamps at the edges: 1, 1.5, 2.5, 3.
        let (_, y) = resize(&[Some(&x), None, Some(&sc)], &[("mode", s("linear"))]).unwrap();
        assert_eq!(y, vec![1.0, 1.5, 2.5, 3.0]);
        // align_corners: 0, 1/3, 2/3, 1.
        let (_, y) = resize(
            &[Some(&x), None, Some(&sc)],
            &[("mode", s("linear")), ("coordinate_transformation_mode", s("align_corners"))],
        )
        .unwrap();
        assert!(y.iter().zip([1.0, 5.0 / 3.0, 7.0 / 3.0, 3.0]).all(|(a, b)| (a - b).abs() < 1e-6), "{y:?}");
        // Asymmetric nearest ceil: x_ori = 0, 0.5, 1, 1.5 → 0, 1, 1, 1 (clamped).
        let a = [("coordinate_transformation_mode", s("asymmetric")), ("nearest_mode", s("ceil"))];
        assert_eq!(resize(&[Some(&x), None, Some(&sc)], &a).unwrap().1, vec![1.0, 3.0, 3.0, 3.0]);
        // Cubic on a constant row stays constant.
        let c = f32s(&[1, 1, 1, 3], &[2.0, 2.0, 2.0]);
        let (_, y) = resize(&[Some(&c), None, Some(&sc)], &[("mode", s("cubic"))]).unwrap();
        assert!(y.iter().all(|v| (v - 2.0).abs() < 1e-12), "{y:?}");
        // Sizes with tf_crop_and_resize: roi [0.5, 1] of [0, 10, 20] → 10, 15, 20; out of roi → extrapolation.
        let x3 = f32s(&[3], &[0.0, 10.0, 20.0]);
        let roi = f32s(&[2], &[0.5, 1.5]);
        let sz = t(DType::I64, &[1], &[5.0]);
        let a = [
            ("mode", s("linear")),
            ("coordinate_transformation_mode", s("tf_crop_and_resize")),
            ("extrapolation_value", AttrValue::Float(-1.0)),
        ];
        let (shape, y) = resize(&[Some(&x3), Some(&roi), None, Some(&sz)], &a).unwrap();
        assert_eq!((shape, y), (vec![5], vec![10.0, 15.0, 20.0, -1.0, -1.0]));
        // u8 rounds half to even and saturates.
        let u = t(DType::U8, &[2], &[1.0, 4.0]);
        let sc1 = f32s(&[1], &[2.0]);
        let a = [("mode", s("linear")), ("coordinate_transformation_mode", s("align_corners"))];
        assert_eq!(resize(&[Some(&u), None, Some(&sc1)], &a).unwrap().1, vec![1.0, 2.0, 3.0, 4.0]);
        let mut out = [0u8; 1];
        store_saturating(DType::U8, 300.0, &mut out);
        assert_eq!(out, [255]);
        store_saturating(DType::I8, -2.5, &mut out);
        assert_eq!(out[0] as i8, -2);
    }

    #[test]
    fn resize_policies_axes_and_upsample() {
        let x = f32s(&[1, 1, 2, 4], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        let sz = t(DType::I64, &[2], &[4.0, 4.0]);
        let axes = ("axes", AttrValue::Ints(vec![2, 3]));
        // not_larger: scale min(2, 1) = 1 → [2, 4]; not_smaller: 2 → [4, 8].
        let a = [axes.clone(), ("keep_aspect_ratio_policy", s("not_larger"))];
        assert_eq!(resize(&[Some(&x), None, None, Some(&sz)], &a).unwrap().0, vec![1, 1, 2, 4]);
        let a = [axes.clone(), ("keep_aspect_ratio_policy", s("not_smaller"))];
        assert_eq!(resize(&[Some(&x), None, None, Some(&sz)], &a).unwrap().0, vec![1, 1, 4, 8]);
        // Upsample (opset 9) nearest repeats.
        let def = OpId::from_name("Upsample").unwrap();
        let sc = f32s(&[4], &[1.0, 1.0, 1.0, 2.0]);
        let y = run("Upsample", &[&x, &sc], &[]).unwrap();
        assert_eq!(y[..8], [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]);
        assert!(def.host_kernel().is_ok());
        // Opset 10 Resize takes X, scales.
        let y = run("Resize", &[&x, &sc], &[("onnx_opset", AttrValue::Int(10))]).unwrap();
        assert_eq!(y[..4], [1.0, 1.0, 2.0, 2.0]);
    }

    #[test]
    fn resize_errors_are_clear() {
        let x = f32s(&[1, 1, 2, 2], &[1.0; 4]);
        let sc = f32s(&[4], &[1.0, 1.0, 2.0, 2.0]);
        let sz = t(DType::I64, &[4], &[1.0, 1.0, 3.0, 3.0]);
        let e = resize(&[Some(&x), None, Some(&sc), Some(&sz)], &[]).unwrap_err();
        assert!(e.contains("either scales or sizes"), "{e}");
        let e = resize(&[Some(&x)], &[]).unwrap_err();
        assert!(e.contains("one of scales and sizes"), "{e}");
        let e = resize(&[Some(&x), None, Some(&f32s(&[2], &[2.0, 2.0]))], &[]).unwrap_err();
        assert!(e.contains("scales must hold 4 values"), "{e}");
        let e = resize(&[Some(&x), None, Some(&sc)], &[("mode", s("area"))]).unwrap_err();
        assert!(e.contains("must be nearest, linear or cubic"), "{e}");
        let e = resize(&[Some(&x), None, Some(&sc)], &[("coordinate_transformation_mode", s("x"))]).unwrap_err();
        assert!(e.contains("coordinate_transformation_mode"), "{e}");
        let e = resize(&[Some(&x), None, Some(&sc)], &[("antialias", AttrValue::Int(1))]).unwrap_err();
        assert!(e.contains("antialias"), "{e}");
        let e = resize(&[Some(&x), None, Some(&sc)], &[("axes", AttrValue::Ints(vec![2, 2]))]).unwrap_err();
        assert!(e.contains("repeated"), "{e}");
        let e = resize(&[Some(&x), None, Some(&f32s(&[4], &[1.0, 1.0, -1.0, 2.0]))], &[]).unwrap_err();
        assert!(e.contains("positive"), "{e}");
        let a = [("coordinate_transformation_mode", s("tf_crop_and_resize"))];
        let e = resize(&[Some(&x), None, None, Some(&sz)], &a).unwrap_err();
        assert!(e.contains("needs the roi input"), "{e}");
        // Extreme plans give errors or clamped taps, never a panic.
        let lin = |anti: i64, coord: &str| {
            let a = Attrs(vec![
                ("mode".into(), s("linear")),
                ("antialias".into(), AttrValue::Int(anti)),
                ("coordinate_transformation_mode".into(), s(coord)),
            ]);
            resize_attrs(&a).unwrap()
        };
        let plan = |attrs, scale| ResizePlan { attrs, input: vec![3], out: vec![2], scales: vec![scale], roi: None };
        let e = plan(lin(1, "half_pixel"), 1e-9).tables().unwrap_err();
        assert!(e.contains("taps per output"), "{e}");
        let t = plan(lin(0, "asymmetric"), 1e-300).tables().unwrap();
        assert_eq!(t[0].idx, vec![0, 0, 2, 2]);
        // A scales input without a value (a graph input) is a dynamic shape.
        let info = [
            Some(TensorInfo { dtype: DType::F32, shape: &x.shape, value: None }),
            None,
            Some(TensorInfo { dtype: DType::F32, shape: &[4], value: None }),
        ];
        let e = infer_resize(&info, &Attrs::default()).unwrap_err();
        assert!(e.contains("needs the value of its scales input"), "{e}");
    }
}
