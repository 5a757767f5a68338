//! Operator schemas of the loss family and of the window operators the nn family lacks:
//! NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, Shrink, LpPool, MaxUnpool and Col2Im
//! (the kernels are in `crate::ops::loss` and `crate::ops::loss_cl`).
//!
//! The losses take scores `[N, C, d1, ..., dk]` (f16, f32, f64), class indices
//! `[N, d1, ..., dk]` (i32 or i64) and optional class weights `[C]`.

use super::elementwise::{check_dtype, dtype_list, input, optional};
use super::nn::{check_ints, dims, pool_dims, to_usize, validate_window};
use super::tensor::{check_shape, value_ints};
use crate::ir::attrs::*;
use crate::ir::schema::*;
use crate::ir::types::DType;

/// The float dtypes of this family.
pub(crate) const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::F64];

pub(crate) const LP_POOL_ATTRS: &[AttrSpec] = &[
    attr!("auto_pad", Str),
    attr!("ceil_mode", Int),
    attr!("dilations", Ints),
    attr!("kernel_shape", Ints),
    attr!("p", Int),
    attr!("pads", Ints),
    attr!("strides", Ints),
];

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(NegativeLogLikelihoodLoss, in 2..=3, out 1..=1,
        attrs &[attr!("ignore_index", Int), attr!("reduction", Str)],
        validate validate_nll, infer infer_nll,
        "-input[n, target[n, d...], d...] (times weight[target]) per element, reduced by `reduction` none / sum / \
        mean (mean divides by the summed weights of the elements not ignored); `ignore_index` elements count 0; \
        f16, f32, f64 scores, i32 or i64 targets"),
    op!(SoftmaxCrossEntropyLoss, in 2..=3, out 1..=2,
        attrs &[attr!("ignore_index", Int), attr!("reduction", Str)],
        validate validate_sce, infer infer_sce,
        "NegativeLogLikelihoodLoss of LogSoftmax(scores) over axis 1; the optional output 2 is that log-probability \
        (f16, f32, f64 scores, i32 or i64 targets)"),
    op!(Shrink, in 1..=1, out 1..=1, attrs &[attr!("bias", Float), attr!("lambd", Float)],
        validate validate_shrink, infer infer_shrink,
        "x < -lambd ? x + bias : x > lambd ? x - bias : 0 (bias 0, lambd 0.5; f16, f32, f64)"),
    op!(LpPool, in 1..=1, out 1..=1, attrs LP_POOL_ATTRS, validate validate_lp_pool, infer infer_lp_pool,
        "N-d Lp pooling (sum over the window of |x|^p)^(1/p), p ≥ 1 (2); pads, strides, dilations, ceil_mode, auto_pad \
        (f32)"),
    op!(MaxUnpool, in 2..=3, out 1..=1,
        attrs &[attr!("kernel_shape", Ints), attr!("pads", Ints), attr!("strides", Ints)],
        validate validate_max_unpool, infer infer_max_unpool,
        "scatters X to the flat positions I (as MaxPool's Indices) of a zero tensor of the shape MaxPool came from \
        ((in - 1) * stride - pads + kernel), then places it at the origin of `output_shape` (a constant input) if \
        given; f32"),
    op!(Col2Im, in 3..=3, out 1..=1,
        attrs &[attr!("dilations", Ints), attr!("pads", Ints), attr!("strides", Ints)],
        validate validate_col2im, infer infer_col2im,
        "sums the column blocks [N, C·∏block, L] into an image [N, C, image_shape...] (image_shape and block_shape \
        are constant inputs); dilations, pads, strides; f32"),
];

// ---------------------------------------------------------------------------------------
// Losses.

/// A loss's reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduction {
    None,
    Sum,
    Mean,
}

pub(crate) fn reduction(a: &Attrs, op: &str) -> Result<Reduction, String> {
    match a.str("reduction").unwrap_or("mean") {
        "none" => Ok(Reduction::None),
        "sum" => Ok(Reduction::Sum),
        "mean" => Ok(Reduction::Mean),
        other => {
            Err(format!("attribute `reduction` of @onnx.{op} must be \"none\", \"sum\" or \"mean\", found {other:?}"))
        }
    }
}

fn validate_nll(a: &Attrs) -> Result<(), String> {
    reduction(a, "NegativeLogLikelihoodLoss").map(|_| ())
}

fn validate_sce(a: &Attrs) -> Result<(), String> {
    reduction(a, "SoftmaxCrossEntropyLoss").map(|_| ())
}

/// The sizes of a loss: N, C, D (the product of d1..dk) and the loss output's shape.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LossDims {
    pub(crate) n: usize,
    pub(crate) c: usize,
    pub(crate) d: usize,
    pub(crate) reduction: Reduction,
    pub(crate) ignore: Option<i64>,
    pub(crate) out: Vec<i64>,
}

/// Checks a loss's inputs: scores [N, C, d...] (a float dtype), target [N, d...] (i32 or
/// i64) and the optional weight [C] of the scores' dtype.
pub(crate) fn loss_dims(
    x: (DType, &[i64]),
    t: (DType, &[i64]),
    w: Option<(DType, &[i64])>,
    a: &Attrs,
    op: &str,
) -> Result<LossDims, String> {
    let red = reduction(a, op)?;
    if !FLOATS.contains(&x.0) {
        return Err(format!("input 1 (input) must be {}, found {}", dtype_list(FLOATS), x.0));
    }
    if !matches!(t.0, DType::I32 | DType::I64) {
        return Err(format!("input 2 (target) must be i32 or i64, found {}", t.0));
    }
    let xs = x.1;
    if xs.len() < 2 {
        return Err(format!("{op}: the input must be [N, C, d1, ..., dk] (rank 2 or more), found shape {xs:?}"));
    }
    let xd = dims(xs, "the input")?;
    let mut want = vec![xs[0]];
    want.extend_from_slice(&xs[2..]);
    if t.1 != want.as_slice() {
        return Err(format!(
            "{op}: the target must be [N, d1, ..., dk] = {want:?} for the input {xs:?}, found {:?}",
            t.1
        ));
    }
    if let Some((wd, ws)) = w {
        if wd != x.0 {
            return Err(format!("input 3 (weight) must have the input's dtype {}, found {wd}", x.0));
        }
        if ws != [xs[1]] {
            return Err(format!("{op}: the weight must be [C] = [{}], found {ws:?}", xs[1]));
        }
    }
    let d = xd[2..].iter().product();
    let out = if red == Reduction::None { want } else { vec![] };
    let ignore = a.get("ignore_index").map(|_| a.int("ignore_index", 0));
    Ok(LossDims { n: xd[0], c: xd[1], d, reduction: red, ignore, out })
}

fn loss_infos(ins: &[Option<TensorInfo>], a: &Attrs, op: &str) -> Result<(DType, LossDims, Vec<i64>), String> {
    let (x, t) = (input(ins, 0, "input")?, input(ins, 1, "target")?);
    let w = optional(ins, 2).map(|w| (w.dtype, w.shape));
    let ld = loss_dims((x.dtype, x.shape), (t.dtype, t.shape), w, a, op)?;
    Ok((x.dtype, ld, x.shape.to_vec()))
}

pub(crate) fn infer_nll(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (d, ld, _) = loss_infos(ins, a, "NegativeLogLikelihoodLoss")?;
    Ok(vec![(d, ld.out)])
}

pub(crate) fn infer_sce(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (d, ld, xs) = loss_infos(ins, a, "SoftmaxCrossEntropyLoss")?;
    Ok(vec![(d, ld.out), (d, xs)])
}

// ---------------------------------------------------------------------------------------
// Shrink.

fn validate_shrink(a: &Attrs) -> Result<(), String> {
    for name in ["bias", "lambd"] {
        if a.get(name).is_some() && !a.float(name, 0.0).is_finite() {
            return Err(format!("attribute `{name}` of @onnx.Shrink must be finite, found {}", a.float(name, 0.0)));
        }
    }
    if a.float("lambd", 0.5) < 0.0 {
        return Err(format!("attribute `lambd` of @onnx.Shrink must not be negative, found {}", a.float("lambd", 0.5)));
    }
    Ok(())
}

pub(crate) fn infer_shrink(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "input")?;
    check_dtype(x, 0, "input", FLOATS)?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

// ---------------------------------------------------------------------------------------
// LpPool.

pub(crate) fn validate_lp_pool(a: &Attrs) -> Result<(), String> {
    validate_window(a).map_err(|e| format!("@onnx.LpPool: {e}"))?;
    if a.ints("kernel_shape").is_none() {
        return Err("@onnx.LpPool: kernel_shape is required".into());
    }
    match a.int("ceil_mode", 0) {
        0 | 1 => {}
        v => return Err(format!("attribute `ceil_mode` of @onnx.LpPool must be 0 or 1, found {v}")),
    }
    let p = a.int("p", 2);
    if !(1..=1 << 20).contains(&p) {
        return Err(format!("attribute `p` of @onnx.LpPool must be a positive integer, found {p}"));
    }
    Ok(())
}

pub(crate) fn infer_lp_pool(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    validate_lp_pool(a)?;
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", &[DType::F32])?;
    Ok(vec![(DType::F32, pool_dims(x.shape, a).map_err(|e| format!("LpPool: {e}"))?.out_shape)])
}

// ---------------------------------------------------------------------------------------
// MaxUnpool.

fn validate_max_unpool(a: &Attrs) -> Result<(), String> {
    validate_window(a).map_err(|e| format!("@onnx.MaxUnpool: {e}"))?;
    if a.ints("kernel_shape").is_none() {
        return Err("@onnx.MaxUnpool: kernel_shape is required".into());
    }
    Ok(())
}

/// MaxUnpool's shapes: the shape MaxPool came from (where the indices point) and the output's.
pub(crate) fn max_unpool_shapes(
    x: &[i64],
    out_shape: Option<Vec<i64>>,
    a: &Attrs,
) -> Result<(Vec<i64>, Vec<i64>), String> {
    const OP: &str = "MaxUnpool";
    validate_max_unpool(a)?;
    if x.len() < 3 {
        return Err(format!("{OP}: X must be [N, C, spatial...] (rank 3 or more), found shape {x:?}"));
    }
    dims(x, "X")?;
    let n = x.len() - 2;
    let k = a.ints("kernel_shape").unwrap_or(&[]);
    if k.len() != n {
        return Err(format!("{OP}: kernel_shape has {} values but X has {n} spatial dims", k.len()));
    }
    let s = super::nn::axis_list(a, "strides", n, 1).map_err(|e| format!("{OP}: {e}"))?;
    let (pb, pe) = super::nn::pads_list(a, n).map_err(|e| format!("{OP}: {e}"))?;
    let mut inferred = x[..2].to_vec();
    for i in 0..n {
        let v = (x[i + 2] as i128 - 1) * s[i] as i128 - pb[i] as i128 - pe[i] as i128 + k[i] as i128;
        if v < 0 || v > i64::MAX as i128 {
            return Err(format!("{OP}: spatial dim {i} of the unpooled shape is out of range ({v})"));
        }
        inferred.push(v as i64);
    }
    check_shape(&inferred, OP)?;
    let out = match out_shape {
        None => inferred.clone(),
        Some(o) => {
            if o.len() != x.len() {
                return Err(format!("{OP}: output_shape {o:?} must have X's rank {}", x.len()));
            }
            if o.iter().any(|&d| d < 0) {
                return Err(format!("{OP}: output_shape {o:?} has a negative size"));
            }
            o
        }
    };
    check_shape(&out, OP)?;
    Ok((inferred, out))
}

pub(crate) fn infer_max_unpool(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    const OP: &str = "MaxUnpool";
    let (x, i) = (input(ins, 0, "X")?, input(ins, 1, "I")?);
    check_dtype(x, 0, "X", &[DType::F32])?;
    check_dtype(i, 1, "I", &[DType::I64])?;
    if i.shape != x.shape {
        return Err(format!("{OP}: I {:?} must have X's shape {:?}", i.shape, x.shape));
    }
    let want = match optional(ins, 2) {
        Some(t) => Some(value_ints(t, OP, "output_shape")?),
        None => None,
    };
    Ok(vec![(DType::F32, max_unpool_shapes(x.shape, want, a)?.1)])
}

// ---------------------------------------------------------------------------------------
// Col2Im.

fn validate_col2im(a: &Attrs) -> Result<(), String> {
    check_ints(a, "strides", 1, "positive").map_err(|e| format!("@onnx.Col2Im: {e}"))?;
    check_ints(a, "dilations", 1, "positive").map_err(|e| format!("@onnx.Col2Im: {e}"))?;
    check_ints(a, "pads", 0, "non-negative").map_err(|e| format!("@onnx.Col2Im: {e}"))?;
    if a.ints("pads").is_some_and(|p| p.len() % 2 != 0) {
        return Err("@onnx.Col2Im: pads must hold the begins and then the ends of every spatial axis".into());
    }
    Ok(())
}

/// Col2Im's geometry: per spatial axis the image size, block size, stride, dilation, begin
/// pad and the number of block positions; plus N, C and the output shape.
#[derive(Clone, Debug)]
pub(crate) struct Col2ImDims {
    pub(crate) n: usize,
    pub(crate) c: usize,
    pub(crate) image: Vec<usize>,
    pub(crate) block: Vec<usize>,
    pub(crate) stride: Vec<usize>,
    pub(crate) dil: Vec<usize>,
    pub(crate) pad: Vec<usize>,
    pub(crate) blocks: Vec<usize>,
    pub(crate) out: Vec<i64>,
}

pub(crate) fn col2im_dims(x: &[i64], image: &[i64], block: &[i64], a: &Attrs) -> Result<Col2ImDims, String> {
    const OP: &str = "Col2Im";
    validate_col2im(a)?;
    let r = image.len();
    if r == 0 || block.len() != r {
        return Err(format!("{OP}: image_shape {image:?} and block_shape {block:?} must have one length of 1 or more"));
    }
    if x.len() != 3 {
        return Err(format!("{OP}: the input must be [N, C·∏block_shape, L] (rank 3), found shape {x:?}"));
    }
    let xd = dims(x, "the input")?;
    let us = |v: &[i64], what: &str| -> Result<Vec<usize>, String> {
        v.iter().map(|&d| to_usize(d as i128, what)).collect()
    };
    let (im, bl) = (us(image, "image_shape")?, us(block, "block_shape")?);
    if bl.contains(&0) {
        return Err(format!("{OP}: block_shape {block:?} has an empty dim"));
    }
    let stride = us(&super::nn::axis_list(a, "strides", r, 1).map_err(|e| format!("{OP}: {e}"))?, "strides")?;
    let dil = us(&super::nn::axis_list(a, "dilations", r, 1).map_err(|e| format!("{OP}: {e}"))?, "dilations")?;
    let (pb, pe) = super::nn::pads_list(a, r).map_err(|e| format!("{OP}: {e}"))?;
    let bprod = bl.iter().try_fold(1usize, |p, &b| p.checked_mul(b)).ok_or("Col2Im: block_shape is too large")?;
    if xd[1] % bprod != 0 {
        return Err(format!("{OP}: the input's dim 1 ({}) is not a multiple of ∏block_shape = {bprod}", xd[1]));
    }
    let mut blocks = Vec::with_capacity(r);
    for i in 0..r {
        let span = (bl[i] as i128 - 1) * dil[i] as i128 + 1;
        let len = im[i] as i128 + pb[i] as i128 + pe[i] as i128 - span;
        if len < 0 {
            return Err(format!("{OP}: the block on spatial dim {i} (span {span}) does not fit the padded image"));
        }
        blocks.push((len / stride[i] as i128 + 1) as usize);
    }
    let l: u128 = blocks.iter().map(|&b| b as u128).product();
    if l != xd[2] as u128 {
        return Err(format!("{OP}: the input has {} blocks (dim 2), but the geometry gives {blocks:?} = {l}", xd[2]));
    }
    let mut out = vec![x[0], (xd[1] / bprod) as i64];
    out.extend_from_slice(image);
    check_shape(&out, OP)?;
    let pad = pb.iter().map(|&p| p as usize).collect();
    Ok(Col2ImDims { n: xd[0], c: xd[1] / bprod, image: im, block: bl, stride, dil, pad, blocks, out })
}

pub(crate) fn infer_col2im(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    const OP: &str = "Col2Im";
    let x = input(ins, 0, "input")?;
    check_dtype(x, 0, "input", &[DType::F32])?;
    let image = value_ints(input(ins, 1, "image_shape")?, OP, "image_shape")?;
    let block = value_ints(input(ins, 2, "block_shape")?, OP, "block_shape")?;
    Ok(vec![(DType::F32, col2im_dims(x.shape, &image, &block, a)?.out)])
}
