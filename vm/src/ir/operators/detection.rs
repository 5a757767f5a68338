//! Operator schemas of the detection family: RoiAlign and DeformConv (the kernels are in
//! `crate::ops::detection` and `crate::ops::detection_cl`).

use super::elementwise::{input, optional};
use super::tensor::check_shape;
use crate::ir::attrs::*;
use crate::ir::schema::*;
use crate::ir::types::DType;

/// The float dtypes of this family.
pub(crate) const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::F64];

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(RoiAlign, in 3..=3, out 1..=1,
        attrs &[
            attr!("coordinate_transformation_mode", Str),
            attr!("mode", Str),
            attr!("output_height", Int),
            attr!("output_width", Int),
            attr!("sampling_ratio", Int),
            attr!("spatial_scale", Float),
            attr!("onnx_opset", Int),
        ],
        validate validate_roi_align, infer infer_roi_align,
        "X [N, C, H, W] pooled over each roi [x1, y1, x2, y2] (scaled by spatial_scale) of image batch_indices[r] \
        (i64) into [rois, C, output_height, output_width] (default 1): bilinear samples (sampling_ratio per bin, 0: \
        adaptive ceil(roi/bin)) averaged (mode avg) or their largest weighted corner (mode max, as ONNX's \
        reference); coordinate_transformation_mode half_pixel (default from opset 16) or output_half_pixel; f16, \
        f32, f64"),
    op!(DeformConv, in 3..=5, out 1..=1,
        attrs &[
            attr!("dilations", Ints),
            attr!("group", Int),
            attr!("kernel_shape", Ints),
            attr!("offset_group", Int),
            attr!("pads", Ints),
            attr!("strides", Ints),
        ],
        validate validate_deform_conv, infer infer_deform_conv,
        "2-D deformable convolution of X [N, C, H, W] by W [oc, C/group, kh, kw]: each kernel tap samples X \
        bilinearly (zeros outside) at its position moved by offset [N, offset_group·kh·kw·2, oh, ow] (dy, dx), \
        scaled by mask [N, offset_group·kh·kw, oh, ow] (ones if omitted), plus bias B [oc]; f16, f32, f64"),
];

// ---------------------------------------------------------------------------------------
// RoiAlign.

/// RoiAlign's checked attributes and sizes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Roi {
    pub(crate) max: bool,
    pub(crate) half_pixel: bool,
    pub(crate) oh: usize,
    pub(crate) ow: usize,
    pub(crate) sampling: usize,
    pub(crate) scale: f64,
    pub(crate) n: usize,
    pub(crate) c: usize,
    pub(crate) h: usize,
    pub(crate) w: usize,
    pub(crate) rois: usize,
    pub(crate) dtype: DType,
}

/// RoiAlign's attributes: (max mode, half_pixel, output height, width, sampling ratio, scale).
pub(crate) fn roi_attrs(a: &Attrs) -> Result<(bool, bool, usize, usize, usize, f64), String> {
    const OP: &str = "@onnx.RoiAlign";
    let max = match a.str("mode").unwrap_or("avg") {
        "avg" => false,
        "max" => true,
        other => return Err(format!("attribute `mode` of {OP} must be \"avg\" or \"max\", found {other:?}")),
    };
    let opset = a.int("onnx_opset", 16);
    if opset < 1 {
        return Err(format!("attribute `onnx_opset` of {OP} must be a positive opset version, found {opset}"));
    }
    let default = if opset < 16 { "output_half_pixel" } else { "half_pixel" };
    let half_pixel = match a.str("coordinate_transformation_mode").unwrap_or(default) {
        "half_pixel" => true,
        "output_half_pixel" => false,
        other => {
            return Err(format!(
                "attribute `coordinate_transformation_mode` of {OP} must be \"half_pixel\" or \"output_half_pixel\", \
                 found {other:?}"
            ))
        }
    };
    let (oh, ow, sr) = (a.int("output_height", 1), a.int("output_width", 1), a.int("sampling_ratio", 0));
    for (name, v) in [("output_height", oh), ("output_width", ow)] {
        if !(1..=1 << 20).contains(&v) {
            return Err(format!("attribute `{name}` of {OP} must be positive (at most 2^20), found {v}"));
        }
    }
    if !(0..=1 << 16).contains(&sr) {
        return Err(format!("attribute `sampling_ratio` of {OP} must be 0 (adaptive) or positive, found {sr}"));
    }
    let s = a.float("spatial_scale", 1.0);
    if !s.is_finite() {
        return Err(format!("attribute `spatial_scale` of {OP} must be finite, found {s}"));
    }
    Ok((max, half_pixel, oh as usize, ow as usize, sr as usize, s))
}

fn validate_roi_align(a: &Attrs) -> Result<(), String> {
    roi_attrs(a).map(|_| ())
}

pub(crate) fn roi_dims(ins: &[Option<(DType, &[i64])>], a: &Attrs) -> Result<Roi, String> {
    const OP: &str = "RoiAlign";
    let (max, half_pixel, oh, ow, sampling, scale) = roi_attrs(a)?;
    let get = |i: usize| ins.get(i).copied().flatten();
    let x = get(0).ok_or("input 1 (X) is required")?;
    let r = get(1).ok_or("input 2 (rois) is required")?;
    let b = get(2).ok_or("input 3 (batch_indices) is required")?;
    if !FLOATS.contains(&x.0) {
        return Err(format!("input 1 (X) must be f32, f16 or f64, found {}", x.0));
    }
    if r.0 != x.0 {
        return Err(format!("input 2 (rois) must have X's dtype {}, found {}", x.0, r.0));
    }
    if b.0 != DType::I64 {
        return Err(format!("input 3 (batch_indices) must be i64, found {}", b.0));
    }
    if x.1.len() != 4 || x.1.iter().any(|&d| d < 0) {
        return Err(format!("{OP}: X must be [N, C, H, W], found shape {:?}", x.1));
    }
    check_shape(x.1, OP)?;
    if r.1.len() != 2 || r.1[1] != 4 || r.1[0] < 0 {
        return Err(format!("{OP}: rois must be [num_rois, 4], found shape {:?}", r.1));
    }
    if b.1 != [r.1[0]] {
        return Err(format!("{OP}: batch_indices must be [num_rois = {}], found shape {:?}", r.1[0], b.1));
    }
    let out = [r.1[0], x.1[1], oh as i64, ow as i64];
    check_shape(&out, OP)?;
    let u = |v: i64| v as usize;
    Ok(Roi {
        max,
        half_pixel,
        oh,
        ow,
        sampling,
        scale,
        n: u(x.1[0]),
        c: u(x.1[1]),
        h: u(x.1[2]),
        w: u(x.1[3]),
        rois: u(r.1[0]),
        dtype: x.0,
    })
}

pub(crate) fn shapes<'a>(ins: &'a [Option<TensorInfo>]) -> Vec<Option<(DType, &'a [i64])>> {
    ins.iter().map(|t| t.as_ref().map(|t| (t.dtype, t.shape))).collect()
}

pub(crate) fn infer_roi_align(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    let p = roi_dims(&shapes(ins), a)?;
    if let Some(v) = optional(ins, 2).and_then(|t| t.value) {
        check_batch_indices(&v.to_i64(), p.n)?;
    }
    let i = |v: usize| v as i64;
    Ok(vec![(p.dtype, vec![i(p.rois), i(p.c), i(p.oh), i(p.ow)])])
}

/// Every batch index names an image of X.
pub(crate) fn check_batch_indices(idx: &[i64], n: usize) -> Result<(), String> {
    match idx.iter().position(|&b| b < 0 || b >= n as i64) {
        Some(r) => Err(format!(
            "RoiAlign: batch_indices[{r}] = {} is outside X's batch of {n}",
            idx.get(r).copied().unwrap_or(0)
        )),
        None => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------
// DeformConv.

/// DeformConv's checked attributes and sizes (2-D).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Deform {
    pub(crate) n: usize,
    pub(crate) c: usize,
    pub(crate) h: usize,
    pub(crate) w: usize,
    pub(crate) oc: usize,
    pub(crate) kh: usize,
    pub(crate) kw: usize,
    pub(crate) oh: usize,
    pub(crate) ow: usize,
    pub(crate) group: usize,
    pub(crate) offset_group: usize,
    /// Top and left pads.
    pub(crate) pads: [usize; 2],
    pub(crate) strides: [usize; 2],
    pub(crate) dilations: [usize; 2],
    pub(crate) dtype: DType,
}

fn pair(a: &Attrs, name: &str, default: i64, len: usize, min: i64) -> Result<Vec<i64>, String> {
    let v = match a.ints(name) {
        Some(v) => v.to_vec(),
        None => vec![default; len],
    };
    if v.len() != len || v.iter().any(|&d| d < min || d > 1 << 20) {
        return Err(format!(
            "attribute `{name}` of @onnx.DeformConv must be {len} integers ≥ {min} (2-D convolution), found {v:?}"
        ));
    }
    Ok(v)
}

fn validate_deform_conv(a: &Attrs) -> Result<(), String> {
    pair(a, "dilations", 1, 2, 1)?;
    pair(a, "strides", 1, 2, 1)?;
    pair(a, "pads", 0, 4, 0)?;
    if a.get("kernel_shape").is_some() {
        pair(a, "kernel_shape", 1, 2, 1)?;
    }
    for name in ["group", "offset_group"] {
        let v = a.int(name, 1);
        if !(1..=1 << 20).contains(&v) {
            return Err(format!("attribute `{name}` of @onnx.DeformConv must be positive, found {v}"));
        }
    }
    Ok(())
}

pub(crate) fn deform_dims(ins: &[Option<(DType, &[i64])>], a: &Attrs) -> Result<Deform, String> {
    const OP: &str = "DeformConv";
    validate_deform_conv(a)?;
    let get = |i: usize| ins.get(i).copied().flatten();
    let x = get(0).ok_or("input 1 (X) is required")?;
    let wt = get(1).ok_or("input 2 (W) is required")?;
    let off = get(2).ok_or("input 3 (offset) is required")?;
    if !FLOATS.contains(&x.0) {
        return Err(format!("input 1 (X) must be f32, f16 or f64, found {}", x.0));
    }
    for (i, name) in [(1, "W"), (2, "offset"), (3, "B"), (4, "mask")] {
        if let Some(t) = get(i) {
            if t.0 != x.0 {
                return Err(format!("input {} ({name}) must have X's dtype {}, found {}", i + 1, x.0, t.0));
            }
        }
    }
    if x.1.len() != 4 || x.1.iter().any(|&d| d < 0) {
        return Err(format!("{OP}: X must be [N, C, H, W] (2-D convolution only), found shape {:?}", x.1));
    }
    check_shape(x.1, OP)?;
    let (n, c, h, w) = (x.1[0], x.1[1], x.1[2], x.1[3]);
    let (group, og) = (a.int("group", 1), a.int("offset_group", 1));
    if wt.1.len() != 4 || wt.1.iter().any(|&d| d < 1) || wt.1[1] * group != c || wt.1[0] % group != 0 {
        return Err(format!(
            "{OP}: W must be [oc (a multiple of group {group}), C / group = {}, kh, kw], found shape {:?}",
            c / group,
            wt.1
        ));
    }
    check_shape(wt.1, OP)?;
    let (oc, kh, kw) = (wt.1[0], wt.1[2], wt.1[3]);
    if let Some(ks) = a.ints("kernel_shape") {
        if ks != [kh, kw] {
            return Err(format!("{OP}: kernel_shape {ks:?} differs from W's kernel [{kh}, {kw}]"));
        }
    }
    if c % og != 0 {
        return Err(format!("{OP}: X's {c} channels do not divide into offset_group {og}"));
    }
    let (d, s, p) = (pair(a, "dilations", 1, 2, 1)?, pair(a, "strides", 1, 2, 1)?, pair(a, "pads", 0, 4, 0)?);
    let span = |k: i64, d: i64| (k - 1) * d + 1;
    let (eh, ew) = (h + p[0] + p[2] - span(kh, d[0]), w + p[1] + p[3] - span(kw, d[1]));
    if eh < 0 || ew < 0 {
        return Err(format!(
            "{OP}: the dilated kernel [{}, {}] is larger than the padded input [{}, {}]",
            span(kh, d[0]),
            span(kw, d[1]),
            h + p[0] + p[2],
            w + p[1] + p[3]
        ));
    }
    let (oh, ow) = (eh / s[0] + 1, ew / s[1] + 1);
    let want = [n, og * kh * kw * 2, oh, ow];
    if off.1 != want {
        return Err(format!("{OP}: offset must be {want:?}, found shape {:?}", off.1));
    }
    if let Some(b) = get(3) {
        if b.1 != [oc] {
            return Err(format!("{OP}: B must be [{oc}], found shape {:?}", b.1));
        }
    }
    if let Some(m) = get(4) {
        let want = [n, og * kh * kw, oh, ow];
        if m.1 != want {
            return Err(format!("{OP}: mask must be {want:?}, found shape {:?}", m.1));
        }
    }
    check_shape(&[n, oc, oh, ow], OP)?;
    let u = |v: i64| v as usize;
    Ok(Deform {
        n: u(n),
        c: u(c),
        h: u(h),
        w: u(w),
        oc: u(oc),
        kh: u(kh),
        kw: u(kw),
        oh: u(oh),
        ow: u(ow),
        group: u(group),
        offset_group: u(og),
        pads: [u(p[0]), u(p[1])],
        strides: [u(s[0]), u(s[1])],
        dilations: [u(d[0]), u(d[1])],
        dtype: x.0,
    })
}

pub(crate) fn infer_deform_conv(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    input(ins, 0, "X")?;
    let p = deform_dims(&shapes(ins), a)?;
    let i = |v: usize| v as i64;
    Ok(vec![(p.dtype, vec![i(p.n), i(p.oc), i(p.oh), i(p.ow)])])
}
