//! Operator schemas of the nn family: attributes, validation and shape inference
//! (the kernels are in `crate::ops::nn`).

use super::shape::{broadcast, broadcast_strides};
use crate::ir::attrs::*;
use crate::ir::schema::*;
use crate::ir::types::DType;

/// Conv's attributes, then `extra`.
macro_rules! conv_attrs {
    ($($extra:expr),*) => {
        &[
            attr!("auto_pad", Str),
            attr!("dilations", Ints),
            attr!("group", Int),
            attr!("kernel_shape", Ints),
            attr!("pads", Ints),
            attr!("strides", Ints),
            $($extra),*
        ]
    };
}

pub(crate) const CONV_ATTRS: &[AttrSpec] = conv_attrs!();

/// FusedConv (onnxruntime's com.microsoft contrib operator): Conv's attributes and the
/// activation.
pub(crate) const FUSED_CONV_ATTRS: &[AttrSpec] =
    conv_attrs!(attr!("activation", Str), attr!("activation_params", Floats));

/// The activations FusedConv applies, with how many `activation_params` each takes.
pub const FUSED_ACTIVATIONS: &[(&str, usize)] =
    &[("Identity", 0), ("Relu", 0), ("LeakyRelu", 1), ("Clip", 2), ("Sigmoid", 0), ("Tanh", 0), ("HardSigmoid", 2)];

pub(crate) const CONV_TRANSPOSE_ATTRS: &[AttrSpec] = &[
    attr!("auto_pad", Str),
    attr!("dilations", Ints),
    attr!("group", Int),
    attr!("kernel_shape", Ints),
    attr!("output_padding", Ints),
    attr!("output_shape", Ints),
    attr!("pads", Ints),
    attr!("strides", Ints),
];

pub(crate) const MAX_POOL_ATTRS: &[AttrSpec] = &[
    attr!("auto_pad", Str),
    attr!("ceil_mode", Int),
    attr!("dilations", Ints),
    attr!("kernel_shape", Ints),
    attr!("pads", Ints),
    attr!("storage_order", Int),
    attr!("strides", Ints),
];

pub(crate) const AVERAGE_POOL_ATTRS: &[AttrSpec] = &[
    attr!("auto_pad", Str),
    attr!("ceil_mode", Int),
    attr!("count_include_pad", Int),
    attr!("dilations", Ints),
    attr!("kernel_shape", Ints),
    attr!("pads", Ints),
    attr!("strides", Ints),
];

/// `broadcast` is the opset < 7 flag that allowed C to broadcast; C always broadcasts now.
pub(crate) const GEMM_ATTRS: &[AttrSpec] =
    &[attr!("alpha", Float), attr!("beta", Float), attr!("transA", Int), attr!("transB", Int), attr!("broadcast", Int)];

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(Conv, in 2..=3, out 1..=1, attrs CONV_ATTRS, validate validate_conv, infer infer_conv,
        "N-d convolution of X [N, C, ...] with W [M, C/group, k...] and optional bias B [M]; pads, strides, dilations, group, auto_pad"),
    op!(FusedConv, in 2..=4, out 1..=1, attrs FUSED_CONV_ATTRS, validate validate_fused_conv, infer infer_fused_conv,
        "onnxruntime's FusedConv: Y = activation(Conv(X, W, B) + Z), Z optional and shaped as Y; activation Relu, LeakyRelu [alpha], Clip [min, max], Sigmoid, Tanh, HardSigmoid [alpha, beta] or Identity (the compiler fuses Conv, Add and activation chains into it)"),
    op!(ConvTranspose, in 2..=3, out 1..=1, attrs CONV_TRANSPOSE_ATTRS, validate validate_conv_transpose,
        infer infer_conv_transpose,
        "N-d transposed convolution, W [C, M/group, k...]; pads, strides, dilations, group, output_padding, output_shape, auto_pad"),
    op!(MaxPool, in 1..=1, out 1..=2, attrs MAX_POOL_ATTRS, validate validate_max_pool, infer infer_max_pool, "N-d max pooling (f32, f16, bf16, u8, i8) with optional i64 Indices (flat; within a plane row-major, or \
        column-major with storage_order 1); pads, strides, dilations, ceil_mode, auto_pad"),
    op!(AveragePool, in 1..=1, out 1..=1, attrs AVERAGE_POOL_ATTRS, validate validate_average_pool,
        infer infer_average_pool,
        "N-d average pooling; count_include_pad, pads, strides, dilations, ceil_mode, auto_pad"),
    op!(GlobalAveragePool, in 1..=1, out 1..=1, attrs &[], infer infer_global_pool,
        "mean over all spatial dims: [N, C, ...] -> [N, C, 1, ...]"),
    op!(GlobalMaxPool, in 1..=1, out 1..=1, attrs &[], infer infer_global_pool,
        "max over all spatial dims: [N, C, ...] -> [N, C, 1, ...]"),
    op!(Gemm, in 2..=3, out 1..=1, attrs GEMM_ATTRS, validate validate_gemm, infer infer_gemm,
        "alpha * A' B' + beta * C for matrices (transA, transB; C broadcast to [M, N])"),
    op!(MatMul, in 2..=2, out 1..=1, attrs &[], infer infer_matmul,
        "numpy matmul: 1-D operands promoted, batch dims broadcast"),
];

// ---------------------------------------------------------------------------------------
// Attribute validation (shape independent; run at load time and again before use).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AutoPad {
    NotSet,
    SameUpper,
    SameLower,
    Valid,
}

pub(crate) fn auto_pad(attrs: &Attrs) -> Result<AutoPad, String> {
    match attrs.str("auto_pad").unwrap_or("NOTSET") {
        "NOTSET" => Ok(AutoPad::NotSet),
        "SAME_UPPER" => Ok(AutoPad::SameUpper),
        "SAME_LOWER" => Ok(AutoPad::SameLower),
        "VALID" => Ok(AutoPad::Valid),
        other => Err(format!("auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, found {other:?}")),
    }
}

pub(crate) fn check_ints(attrs: &Attrs, name: &str, min: i64, what: &str) -> Result<(), String> {
    match attrs.ints(name) {
        Some(v) if v.iter().any(|&x| x < min) => Err(format!("{name} must be {what}, found {v:?}")),
        _ => Ok(()),
    }
}

pub(crate) fn flag(attrs: &Attrs, name: &str) -> Result<bool, String> {
    match attrs.int(name, 0) {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(format!("{name} must be 0 or 1, found {v}")),
    }
}

/// Checks shared by convolutions and pooling: value ranges, auto_pad, and that the
/// per-axis lists agree on the number of spatial dims.
pub(crate) fn validate_window(attrs: &Attrs) -> Result<(), String> {
    let ap = auto_pad(attrs)?;
    check_ints(attrs, "strides", 1, "positive")?;
    check_ints(attrs, "dilations", 1, "positive")?;
    check_ints(attrs, "kernel_shape", 1, "positive")?;
    check_ints(attrs, "pads", 0, "non-negative")?;
    if let Some(p) = attrs.ints("pads") {
        if p.len() % 2 != 0 {
            return Err(format!(
                "pads must hold the begins and then the ends of every spatial axis (an even count), found {} values",
                p.len()
            ));
        }
        if ap != AutoPad::NotSet && p.iter().any(|&v| v != 0) {
            return Err(format!(
                "pads {p:?} cannot be combined with auto_pad {:?}",
                attrs.str("auto_pad").unwrap_or("")
            ));
        }
    }
    check_ints(attrs, "output_padding", 0, "non-negative")?;
    // The descriptions are built only for the error: this runs on every call.
    let spatial = |name: &str, len: usize| if name == "pads" { len / 2 } else { len };
    let describe = |name: &str, len: usize| {
        if name == "pads" {
            format!("pads has {len} values ({} spatial dims)", len / 2)
        } else {
            format!("{name} has {len} values")
        }
    };
    let mut seen: Option<(&str, usize)> = None;
    for name in ["kernel_shape", "strides", "dilations", "pads", "output_padding"] {
        let Some(v) = attrs.ints(name) else { continue };
        match seen {
            None => seen = Some((name, v.len())),
            Some((first, len)) if spatial(first, len) != spatial(name, v.len()) => {
                return Err(format!("{} but {}", describe(name, v.len()), describe(first, len)))
            }
            _ => {}
        }
    }
    Ok(())
}

pub(crate) fn validate_conv(attrs: &Attrs) -> Result<(), String> {
    validate_window(attrs)?;
    let g = attrs.int("group", 1);
    if g < 1 {
        return Err(format!("group must be at least 1, found {g}"));
    }
    Ok(())
}

pub(crate) fn validate_fused_conv(attrs: &Attrs) -> Result<(), String> {
    validate_conv(attrs)?;
    fused_activation(attrs).map(|_| ())
}

/// FusedConv's activation and its parameters, checked.
pub fn fused_activation(attrs: &Attrs) -> Result<(&str, Vec<f64>), String> {
    let name = attrs.str("activation").unwrap_or("Identity");
    let Some(&(_, n)) = FUSED_ACTIVATIONS.iter().find(|(a, _)| *a == name) else {
        let known: Vec<&str> = FUSED_ACTIVATIONS.iter().map(|(a, _)| *a).collect();
        return Err(format!("activation must be one of {}, found {name:?}", known.join(", ")));
    };
    let params = attrs.floats("activation_params").unwrap_or_default();
    if params.len() != n {
        return Err(format!("activation {name} takes {n} activation_params, found {}", params.len()));
    }
    Ok((name, params))
}

pub(crate) fn validate_conv_transpose(attrs: &Attrs) -> Result<(), String> {
    validate_conv(attrs)?;
    check_ints(attrs, "output_shape", 0, "non-negative")
}

pub(crate) fn validate_pool(attrs: &Attrs) -> Result<(), String> {
    validate_window(attrs)?;
    if attrs.ints("kernel_shape").is_none() {
        return Err("kernel_shape is required".into());
    }
    flag(attrs, "ceil_mode")?;
    Ok(())
}

pub(crate) fn validate_max_pool(attrs: &Attrs) -> Result<(), String> {
    validate_pool(attrs)?;
    match attrs.int("storage_order", 0) {
        0 | 1 => Ok(()),
        v => Err(format!("storage_order must be 0 (row-major Indices) or 1 (column-major), found {v}")),
    }
}

pub(crate) fn validate_average_pool(attrs: &Attrs) -> Result<(), String> {
    validate_pool(attrs)?;
    flag(attrs, "count_include_pad")?;
    Ok(())
}

pub(crate) fn validate_gemm(attrs: &Attrs) -> Result<(), String> {
    flag(attrs, "transA")?;
    flag(attrs, "transB")?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Shapes and window geometry.

/// `f32[2, 3]`.
pub(crate) fn ty(shape: &[i64]) -> String {
    format!("f32{shape:?}")
}

/// The dims of an input's shape as `usize` (an error for negative dims or absurd sizes).
pub(crate) fn dims(shape: &[i64], name: &str) -> Result<Vec<usize>, String> {
    check_size(shape, name)?;
    shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("{name} has a negative dimension: {shape:?}")))
        .collect()
}

/// Rejects tensors whose byte size (or a partial product of their dims) does not fit in
/// an i64, so that later size arithmetic cannot overflow.
pub(crate) fn check_size(shape: &[i64], name: &str) -> Result<(), String> {
    let n = shape.iter().try_fold(8i64, |a, &d| a.checked_mul(d.max(1)));
    match n {
        Some(_) => Ok(()),
        None => Err(format!("{name} {} is too large", ty(shape))),
    }
}

pub(crate) fn to_i64(v: i128, what: &str) -> Result<i64, String> {
    i64::try_from(v).map_err(|_| format!("{what} is out of range ({v})"))
}

pub(crate) fn to_usize(v: i128, what: &str) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("{what} is out of range ({v})"))
}

/// A per-axis attribute list, or `default` on every axis.
pub(crate) fn axis_list(attrs: &Attrs, name: &str, n: usize, default: i64) -> Result<Vec<i64>, String> {
    match attrs.ints(name) {
        None => Ok(vec![default; n]),
        Some(v) if v.len() == n => Ok(v.to_vec()),
        Some(v) => Err(format!("{name} has {} values but the input has {n} spatial dims", v.len())),
    }
}

/// `pads` as (begins, ends).
pub(crate) fn pads_list(attrs: &Attrs, n: usize) -> Result<(Vec<i64>, Vec<i64>), String> {
    match attrs.ints("pads") {
        None => Ok((vec![0; n], vec![0; n])),
        Some(p) if p.len() == 2 * n => Ok((p[..n].to_vec(), p[n..].to_vec())),
        Some(p) => Err(format!(
            "pads has {} values but the input has {n} spatial dims (expected {}: the begins, then the ends)",
            p.len(),
            2 * n
        )),
    }
}

/// The geometry of a sliding window on every spatial axis. For Conv and pooling, output
/// position `o` reads input positions `o * s + kk * d - pb` (`kk` over the kernel); for
/// ConvTranspose, input position `i` writes output positions `i * s + kk * d - pb`.
#[derive(Clone, Debug)]
pub(crate) struct Geo {
    pub(crate) k: Vec<usize>,
    pub(crate) s: Vec<usize>,
    pub(crate) d: Vec<usize>,
    /// Begin / end padding (of the input for Conv and pooling, of the output for
    /// ConvTranspose, where it may be negative when `output_shape` asks for more).
    pub(crate) pb: Vec<i64>,
    pub(crate) pe: Vec<i64>,
    pub(crate) in_sp: Vec<usize>,
    pub(crate) out_sp: Vec<usize>,
}

/// Conv and pooling geometry (output size from the input, kernel, pads and auto_pad).
pub(crate) fn window_geo(in_sp: &[usize], k: &[usize], attrs: &Attrs, ceil_mode: bool) -> Result<Geo, String> {
    let n = in_sp.len();
    let s = axis_list(attrs, "strides", n, 1)?;
    let d = axis_list(attrs, "dilations", n, 1)?;
    let (pads_b, pads_e) = pads_list(attrs, n)?;
    let ap = auto_pad(attrs)?;
    let mut g =
        Geo { k: k.to_vec(), s: vec![], d: vec![], pb: vec![], pe: vec![], in_sp: in_sp.to_vec(), out_sp: vec![] };
    for i in 0..n {
        let (len, kk, st, di) = (in_sp[i] as i128, k[i] as i128, s[i] as i128, d[i] as i128);
        if st < 1 || di < 1 || kk < 1 {
            return Err(format!("spatial dim {i}: kernel {kk}, stride {st} and dilation {di} must be positive"));
        }
        let span = (kk - 1) * di + 1;
        let (pb, pe, out) = match ap {
            AutoPad::SameUpper | AutoPad::SameLower => {
                let out = (len + st - 1) / st;
                let total = ((out - 1) * st + span - len).max(0);
                let (small, big) = (total / 2, total - total / 2);
                if ap == AutoPad::SameUpper {
                    (small, big, out)
                } else {
                    (big, small, out)
                }
            }
            AutoPad::Valid | AutoPad::NotSet => {
                let (pb, pe) = if ap == AutoPad::Valid { (0, 0) } else { (pads_b[i] as i128, pads_e[i] as i128) };
                let padded = len + pb + pe;
                if padded < span {
                    let dil = if di > 1 { format!(" with dilation {di}") } else { String::new() };
                    return Err(format!(
                        "spatial dim {i}: the kernel ({kk}{dil}) spans {span} but the input is only {padded} wide \
                         ({len} plus pads {pb} + {pe})"
                    ));
                }
                // ceil_mode only changes explicit padding (VALID gives the same size either way).
                let ceil = ceil_mode && ap == AutoPad::NotSet;
                let mut out = if ceil { (padded - span + st - 1) / st + 1 } else { (padded - span) / st + 1 };
                // With ceil_mode, a window that would start in the end padding is dropped.
                if ceil && (out - 1) * st >= len + pb {
                    out -= 1;
                }
                (pb, pe, out)
            }
        };
        g.s.push(st as usize);
        g.d.push(di as usize);
        g.pb.push(to_i64(pb, "padding")?);
        g.pe.push(to_i64(pe, "padding")?);
        g.out_sp.push(to_usize(out, "output size")?);
    }
    Ok(g)
}

/// ConvTranspose geometry per the ONNX spec: the output size from pads, or pads from
/// `output_shape` (or from auto_pad SAME_*, which asks for `input * stride`).
pub(crate) fn transpose_geo(in_sp: &[usize], k: &[usize], attrs: &Attrs) -> Result<Geo, String> {
    let n = in_sp.len();
    let s = axis_list(attrs, "strides", n, 1)?;
    let d = axis_list(attrs, "dilations", n, 1)?;
    let op = axis_list(attrs, "output_padding", n, 0)?;
    let (pads_b, pads_e) = pads_list(attrs, n)?;
    let ap = auto_pad(attrs)?;
    let wanted: Option<&[i64]> = match attrs.ints("output_shape") {
        None => None,
        Some(v) if v.len() == n => Some(v),
        Some(v) if v.len() == n + 2 => Some(&v[2..]),
        Some(v) => {
            return Err(format!("output_shape has {} values but the input has {n} spatial dims", v.len()));
        }
    };
    let mut g =
        Geo { k: k.to_vec(), s: vec![], d: vec![], pb: vec![], pe: vec![], in_sp: in_sp.to_vec(), out_sp: vec![] };
    for i in 0..n {
        let (len, kk, st, di, opad) = (in_sp[i] as i128, k[i] as i128, s[i] as i128, d[i] as i128, op[i] as i128);
        if st < 1 || di < 1 || kk < 1 || opad < 0 {
            return Err(format!("spatial dim {i}: kernel {kk}, stride {st} and dilation {di} must be positive"));
        }
        if opad >= st && opad >= di {
            return Err(format!(
                "output_padding {opad} on spatial dim {i} must be smaller than the stride ({st}) or the dilation ({di})"
            ));
        }
        let full = st * (len - 1) + opad + (kk - 1) * di + 1;
        let target = match (wanted, ap) {
            (Some(w), _) => Some(w[i] as i128),
            (None, AutoPad::SameUpper | AutoPad::SameLower) => Some(len * st),
            _ => None,
        };
        let (pb, pe, out) = match target {
            Some(out) => {
                // Pads follow from the wanted size; floor division, as in the spec's reference.
                let total = full - out;
                let half = total.div_euclid(2);
                if ap == AutoPad::SameUpper {
                    (half, total - half, out)
                } else {
                    (total - half, half, out)
                }
            }
            None => {
                let (pb, pe) = if ap == AutoPad::Valid { (0, 0) } else { (pads_b[i] as i128, pads_e[i] as i128) };
                let out = full - pb - pe;
                if out < 0 {
                    return Err(format!(
                        "spatial dim {i}: pads {pb} + {pe} remove more than the {full} positions the transposed \
                         convolution produces"
                    ));
                }
                (pb, pe, out)
            }
        };
        g.s.push(st as usize);
        g.d.push(di as usize);
        g.pb.push(to_i64(pb, "padding")?);
        g.pe.push(to_i64(pe, "padding")?);
        g.out_sp.push(to_usize(out, "output size")?);
    }
    Ok(g)
}

/// Resolved dims of a (transposed) convolution.
#[derive(Debug)]
pub(crate) struct ConvDims {
    pub(crate) n: usize,
    pub(crate) c: usize,
    pub(crate) m: usize,
    pub(crate) group: usize,
    pub(crate) geo: Geo,
    pub(crate) out_shape: Vec<i64>,
}

/// The kernel's spatial dims from W, checked against `kernel_shape` if given.
pub(crate) fn kernel_dims(w: &[i64], wd: &[usize], nsp: usize, attrs: &Attrs) -> Result<Vec<usize>, String> {
    let k = wd[2..].to_vec();
    if let Some(ks) = attrs.ints("kernel_shape") {
        if ks.len() != nsp {
            return Err(format!("kernel_shape has {} dims but the input has {nsp} spatial dims", ks.len()));
        }
        if ks != &w[2..] {
            return Err(format!("kernel_shape {ks:?} does not match the weight {} (kernel {:?})", ty(w), &w[2..]));
        }
    }
    if k.contains(&0) {
        return Err(format!("the weight {} has an empty kernel", ty(w)));
    }
    Ok(k)
}

pub(crate) fn check_bias(b: Option<&[i64]>, m: usize) -> Result<(), String> {
    match b {
        Some(b) if b.len() != 1 || b[0] as u64 != m as u64 => {
            Err(format!("bias is {} but there are {m} output channels (expected f32[{m}])", ty(b)))
        }
        _ => Ok(()),
    }
}

pub(crate) fn conv_dims(x: &[i64], w: &[i64], b: Option<&[i64]>, attrs: &Attrs) -> Result<ConvDims, String> {
    validate_conv(attrs)?;
    if x.len() < 3 {
        return Err(format!("the input must be [N, C, spatial...] (rank 3 or more), found {}", ty(x)));
    }
    if w.len() != x.len() {
        return Err(format!(
            "the weight {} must be [M, C/group, kernel...] with the rank of the input {}",
            ty(w),
            ty(x)
        ));
    }
    let (xd, wd) = (dims(x, "the input")?, dims(w, "the weight")?);
    let nsp = x.len() - 2;
    let group = usize::try_from(attrs.int("group", 1)).map_err(|_| "group is out of range".to_string())?;
    let (n, c, m) = (xd[0], xd[1], wd[0]);
    if c % group != 0 {
        return Err(format!("group {group} does not divide {c} input channels"));
    }
    if m % group != 0 {
        return Err(format!("group {group} does not divide {m} output channels (the weight is {})", ty(w)));
    }
    if wd[1] != c / group {
        return Err(format!(
            "weight is {} but the input has {c} channels / group {group} → expected {} input channels per group",
            ty(w),
            c / group
        ));
    }
    let k = kernel_dims(w, &wd, nsp, attrs)?;
    check_bias(b, m)?;
    let geo = window_geo(&xd[2..], &k, attrs, false)?;
    let mut out_shape = vec![n as i64, m as i64];
    out_shape.extend(geo.out_sp.iter().map(|&v| v as i64));
    check_size(&out_shape, "the output")?;
    Ok(ConvDims { n, c, m, group, geo, out_shape })
}

pub(crate) fn conv_transpose_dims(x: &[i64], w: &[i64], b: Option<&[i64]>, attrs: &Attrs) -> Result<ConvDims, String> {
    validate_conv_transpose(attrs)?;
    if x.len() < 3 {
        return Err(format!("the input must be [N, C, spatial...] (rank 3 or more), found {}", ty(x)));
    }
    if w.len() != x.len() {
        return Err(format!(
            "the weight {} must be [C, M/group, kernel...] with the rank of the input {}",
            ty(w),
            ty(x)
        ));
    }
    let (xd, wd) = (dims(x, "the input")?, dims(w, "the weight")?);
    let nsp = x.len() - 2;
    let group = usize::try_from(attrs.int("group", 1)).map_err(|_| "group is out of range".to_string())?;
    let (n, c) = (xd[0], xd[1]);
    if c % group != 0 {
        return Err(format!("group {group} does not divide {c} input channels"));
    }
    if wd[0] != c {
        return Err(format!(
            "weight is {} but the input has {c} channels (ConvTranspose weights are [C, M/group, kernel...])",
            ty(w)
        ));
    }
    let m = wd[1].checked_mul(group).ok_or("the number of output channels is out of range")?;
    let k = kernel_dims(w, &wd, nsp, attrs)?;
    check_bias(b, m)?;
    let geo = transpose_geo(&xd[2..], &k, attrs)?;
    let mut out_shape = vec![n as i64, to_i64(m as i128, "the number of output channels")?];
    out_shape.extend(geo.out_sp.iter().map(|&v| v as i64));
    check_size(&out_shape, "the output")?;
    Ok(ConvDims { n, c, m, group, geo, out_shape })
}

/// Resolved dims of a pooling.
pub(crate) struct PoolDims {
    pub(crate) n: usize,
    pub(crate) c: usize,
    pub(crate) geo: Geo,
    pub(crate) out_shape: Vec<i64>,
}

pub(crate) fn pool_dims(x: &[i64], attrs: &Attrs) -> Result<PoolDims, String> {
    validate_pool(attrs)?;
    if x.len() < 3 {
        return Err(format!("the input must be [N, C, spatial...] (rank 3 or more), found {}", ty(x)));
    }
    let xd = dims(x, "the input")?;
    let nsp = x.len() - 2;
    let ks = attrs.ints("kernel_shape").unwrap_or(&[]);
    if ks.len() != nsp {
        return Err(format!("kernel_shape has {} dims but the input has {nsp} spatial dims", ks.len()));
    }
    let k = ks.iter().map(|&v| to_usize(v as i128, "kernel_shape")).collect::<Result<Vec<_>, _>>()?;
    let geo = window_geo(&xd[2..], &k, attrs, flag(attrs, "ceil_mode")?)?;
    let mut out_shape = vec![x[0], x[1]];
    out_shape.extend(geo.out_sp.iter().map(|&v| v as i64));
    check_size(&out_shape, "the output")?;
    Ok(PoolDims { n: xd[0], c: xd[1], geo, out_shape })
}

/// Gemm's (M, K, N) after transposes.
pub(crate) fn gemm_dims(
    a: &[i64],
    b: &[i64],
    c: Option<&[i64]>,
    attrs: &Attrs,
) -> Result<(usize, usize, usize), String> {
    validate_gemm(attrs)?;
    let (ta, tb) = (attrs.int("transA", 0) != 0, attrs.int("transB", 0) != 0);
    if a.len() != 2 {
        return Err(format!("A must be a matrix (rank 2), found {}", ty(a)));
    }
    if b.len() != 2 {
        return Err(format!("B must be a matrix (rank 2), found {}", ty(b)));
    }
    let (ad, bd) = (dims(a, "A")?, dims(b, "B")?);
    let (m, k) = if ta { (ad[1], ad[0]) } else { (ad[0], ad[1]) };
    let (k2, n) = if tb { (bd[1], bd[0]) } else { (bd[0], bd[1]) };
    if k != k2 {
        return Err(format!(
            "A is {} (transA {}) and B is {} (transB {}): inner dimensions {k} and {k2} differ",
            ty(a),
            ta as i64,
            ty(b),
            tb as i64
        ));
    }
    if let Some(c) = c {
        let ok = c.len() <= 2 && c.iter().rev().zip([n, m]).all(|(&d, want)| d == 1 || d as u64 == want as u64);
        if !ok {
            return Err(format!("C is {} but must broadcast to the output [{m}, {n}]", ty(c)));
        }
    }
    check_size(&[m as i64, n as i64], "the output")?;
    Ok((m, k, n))
}

/// MatMul dims: batch shape, (M, K, N), the batch strides of A and B (in matrices) and the
/// output shape.
pub(crate) struct MatMulDims {
    pub(crate) batch: Vec<i64>,
    pub(crate) m: usize,
    pub(crate) k: usize,
    pub(crate) n: usize,
    pub(crate) a_strides: Vec<usize>,
    pub(crate) b_strides: Vec<usize>,
    pub(crate) a_batch: usize,
    pub(crate) b_batch: usize,
    pub(crate) out_shape: Vec<i64>,
}

pub(crate) fn matmul_dims(a: &[i64], b: &[i64]) -> Result<MatMulDims, String> {
    if a.is_empty() || b.is_empty() {
        return Err(format!("MatMul needs operands of rank 1 or more, found A {} and B {}", ty(a), ty(b)));
    }
    dims(a, "A")?;
    dims(b, "B")?;
    let (a2, b2): (Vec<i64>, Vec<i64>) =
        (if a.len() == 1 { vec![1, a[0]] } else { a.to_vec() }, if b.len() == 1 { vec![b[0], 1] } else { b.to_vec() });
    let (ra, rb) = (a2.len(), b2.len());
    let (m, k, k2, n) = (a2[ra - 2], a2[ra - 1], b2[rb - 2], b2[rb - 1]);
    if k != k2 {
        return Err(format!("A is {} and B is {}: inner dimensions {k} and {k2} differ", ty(a), ty(b)));
    }
    let (ab, bb) = (&a2[..ra - 2], &b2[..rb - 2]);
    let batch = broadcast(ab, bb)
        .map_err(|e| format!("the batch dims of A {} and B {} do not broadcast: {e}", ty(a), ty(b)))?;
    let mut out_shape = batch.clone();
    if a.len() > 1 {
        out_shape.push(m);
    }
    if b.len() > 1 {
        out_shape.push(n);
    }
    check_size(&out_shape, "the output")?;
    Ok(MatMulDims {
        a_strides: broadcast_strides(ab, &batch),
        b_strides: broadcast_strides(bb, &batch),
        a_batch: ab.iter().product::<i64>() as usize,
        b_batch: bb.iter().product::<i64>() as usize,
        batch,
        m: m as usize,
        k: k as usize,
        n: n as usize,
        out_shape,
    })
}

// ---------------------------------------------------------------------------------------
// Shape inference.

/// Input `i` (`name` in messages), required, f32.
pub(crate) fn f32_input<'a>(ins: &'a [Option<TensorInfo<'a>>], i: usize, name: &str) -> Result<&'a [i64], String> {
    let t = ins.get(i).and_then(|t| t.as_ref()).ok_or_else(|| format!("the input {name} is required"))?;
    if t.dtype != DType::F32 {
        return Err(format!("{name} must be f32, found {}{:?}", t.dtype, t.shape));
    }
    Ok(t.shape)
}

/// The float dtypes Conv, ConvTranspose, Gemm and MatMul take (f16 and bf16 are stored
/// narrow and computed in f32, f64 is computed in f64).
pub(crate) const MATMUL_FLOATS: &[DType] = &[DType::F32, DType::F16, DType::BF16, DType::F64];

/// A shape borrowed from a [`TensorInfo`].
pub(crate) type Shape<'a> = &'a [i64];

/// The inputs `names` (the optional ones may be absent) share one dtype out of
/// [`MATMUL_FLOATS`]; returns it with their shapes.
pub(crate) fn float_inputs<'a>(
    ins: &'a [Option<TensorInfo<'a>>],
    names: &[&str],
    required: usize,
) -> Result<(DType, Vec<Option<Shape<'a>>>), String> {
    let mut dtype: Option<(DType, &str)> = None;
    let mut shapes = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let t = match ins.get(i).and_then(|t| t.as_ref()) {
            Some(t) => t,
            None if i < required => return Err(format!("the input {name} is required")),
            None => {
                shapes.push(None);
                continue;
            }
        };
        match dtype {
            None if !MATMUL_FLOATS.contains(&t.dtype) => {
                return Err(format!("{name} must be f32, f16, bf16 or f64, found {}{:?}", t.dtype, t.shape))
            }
            None => dtype = Some((t.dtype, name)),
            Some((d, first)) if d != t.dtype => {
                return Err(format!("{name} is {}{:?} but {first} is {d}: they must have one dtype", t.dtype, t.shape))
            }
            _ => {}
        }
        shapes.push(Some(t.shape));
    }
    Ok((dtype.map_or(DType::F32, |d| d.0), shapes))
}

pub(crate) fn infer_conv(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (d, s) = float_inputs(ins, &["X", "W", "B"], 2)?;
    let (x, w) = (s[0].unwrap_or(&[]), s[1].unwrap_or(&[]));
    Ok(vec![(d, conv_dims(x, w, s[2], attrs)?.out_shape)])
}

pub(crate) fn infer_fused_conv(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let out = infer_conv(ins.get(..3).unwrap_or(ins), attrs)?;
    if let (Some(Some(z)), Some((d, shape))) = (ins.get(3), out.first()) {
        if z.dtype != *d || z.shape != &shape[..] {
            return Err(format!("Z is {}{:?} but Y is {d}{shape:?}: they must match", z.dtype, z.shape));
        }
    }
    Ok(out)
}

pub(crate) fn infer_conv_transpose(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (d, s) = float_inputs(ins, &["X", "W", "B"], 2)?;
    let (x, w) = (s[0].unwrap_or(&[]), s[1].unwrap_or(&[]));
    Ok(vec![(d, conv_transpose_dims(x, w, s[2], attrs)?.out_shape)])
}

/// The dtypes MaxPool takes besides f32 (compared as f32, which holds them exactly).
pub(crate) const MAX_POOL_DTYPES: &[DType] = &[DType::F32, DType::F16, DType::BF16, DType::U8, DType::I8];

pub(crate) fn infer_max_pool(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    validate_max_pool(attrs)?;
    let x = ins.first().and_then(|t| t.as_ref()).ok_or("the input X is required")?;
    if !MAX_POOL_DTYPES.contains(&x.dtype) {
        return Err(format!("X must be f32, f16, bf16, u8 or i8, found {}{:?}", x.dtype, x.shape));
    }
    let s = pool_dims(x.shape, attrs)?.out_shape;
    Ok(vec![(x.dtype, s.clone()), (DType::I64, s)])
}

pub(crate) fn infer_average_pool(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    validate_average_pool(attrs)?;
    Ok(vec![(DType::F32, pool_dims(f32_input(ins, 0, "X")?, attrs)?.out_shape)])
}

pub(crate) fn global_shape(x: &[i64]) -> Result<Vec<i64>, String> {
    if x.len() < 2 {
        return Err(format!("the input must be [N, C, spatial...] (rank 2 or more), found {}", ty(x)));
    }
    dims(x, "the input")?;
    let mut s = x[..2].to_vec();
    s.resize(x.len(), 1);
    check_size(&s, "the output")?;
    Ok(s)
}

pub(crate) fn infer_global_pool(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![(DType::F32, global_shape(f32_input(ins, 0, "X")?)?)])
}

pub(crate) fn infer_gemm(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (d, s) = float_inputs(ins, &["A", "B", "C"], 2)?;
    let (m, _, n) = gemm_dims(s[0].unwrap_or(&[]), s[1].unwrap_or(&[]), s[2], attrs)?;
    Ok(vec![(d, vec![m as i64, n as i64])])
}

pub(crate) fn infer_matmul(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (d, s) = float_inputs(ins, &["A", "B"], 2)?;
    Ok(vec![(d, matmul_dims(s[0].unwrap_or(&[]), s[1].unwrap_or(&[]))?.out_shape)])
}
