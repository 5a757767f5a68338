//! Operator schemas of the indexing family: GatherElements, GatherND, ScatterElements,
//! Scatter, ScatterND, Trilu, CumSum, CumProd, TopK, Hardmax, OneHot, EyeLike,
//! DepthToSpace, SpaceToDepth, ReverseSequence, Compress and CenterCropPad (the kernels are
//! in `crate::ops::indexing` and `crate::ops::indexing_cl`).
//!
//! Indices follow ONNX: a negative index counts from the back of its axis, and an index
//! outside `[-size, size)` is an error (OneHot alone maps such an index to the off value, as
//! ONNX defines). The `plan_*` functions are shared by inference and by the kernels, which
//! re-run them on their actual operands.

use super::elementwise::{check_dtype, check_scalar, dtype_list, flag_attr, input, optional};
use super::tensor::{check_shape, norm_axis, prod, value_ints};
use crate::ir::attrs::*;
use crate::ir::host_tensor::load_i64;
use crate::ir::schema::*;
use crate::ir::types::DType;

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(GatherElements, in 2..=2, out 1..=1, attrs &[attr!("axis", Int)], infer infer_gather_elements,
        "output[i...] = data[i... with index `axis` replaced by indices[i...]] (indices i64 or i32, the data's rank, \
        each dim no larger than the data's but along `axis`; negative counts from the back); any dtype"),
    op!(Trilu, in 1..=2, out 1..=1, attrs &[attr!("upper", Int)], validate validate_trilu, infer infer_trilu,
        "keeps the upper (`upper` = 1, default) or lower triangle of the last two dims from diagonal k (optional \
        i64 scalar input 2, default 0), zeroing the rest; any dtype"),
    op!(CumSum, in 2..=2, out 1..=1, attrs &[attr!("exclusive", Int), attr!("reverse", Int)],
        validate validate_cumsum, infer infer_cum,
        "running sums along the axis given by input 2 (i32/i64 scalar, negative counts from the back); \
        `exclusive` leaves out the element itself, `reverse` runs from the end (i32, i64, u32, u64, f16, f32, f64)"),
    op!(CumProd, in 2..=2, out 1..=1, attrs &[attr!("exclusive", Int), attr!("reverse", Int)],
        validate validate_cumprod, infer infer_cum,
        "running products along the axis given by input 2, as CumSum (i32, i64, u32, u64, f16, f32, f64)"),
    op!(TopK, in 1..=2, out 2..=2,
        attrs &[attr!("axis", Int), attr!("largest", Int), attr!("sorted", Int), attr!("k", Int)],
        validate validate_topk, infer infer_topk,
        "the k largest (`largest` = 1, default) or smallest elements along `axis` (default -1), sorted, and their \
        i64 indices; ties go to the lower index; k is input 2 (i64 [1], its value decides the output shape) or \
        the `k` attribute (opset 1); numeric dtypes (NaN sorts above every number)"),
    op!(ScatterElements, in 3..=3, out 1..=1, attrs &[attr!("axis", Int), attr!("reduction", Str)],
        validate validate_scatter_elements, infer infer_scatter_elements,
        "a copy of data with updates[i...] written at the position of i... whose index `axis` is replaced by \
        indices[i...] (i64 or i32, negative counts from the back), in order (the last duplicate wins), or \
        combined by `reduction` none/add/mul/max/min; any dtype (reductions: numeric)"),
    op!(ScatterND, in 3..=3, out 1..=1, attrs &[attr!("reduction", Str)], validate validate_scatter_nd,
        infer infer_scatter_nd,
        "a copy of data with the slices updates[i...] written at the index tuples indices[i..., :] (i64, negative \
        counts from the back), in order, or combined by `reduction` none/add/mul/max/min; any dtype \
        (reductions: numeric)"),
    op!(Hardmax, in 1..=1, out 1..=1, attrs &[attr!("axis", Int), attr!("onnx_opset", Int)],
        validate validate_hardmax, infer infer_hardmax,
        "1 at the first maximum along `axis` (default -1; opset < 13: of the input flattened to 2-D at `axis`, \
        default 1), 0 elsewhere (f16, f32, f64)"),
    op!(OneHot, in 3..=3, out 1..=1, attrs &[attr!("axis", Int)], infer infer_one_hot,
        "values[1] where indices (numeric; negative counts from the back) equals the position along the new axis \
        `axis` (default -1) of size depth (input 2, a numeric scalar whose value decides the output shape), \
        values[0] elsewhere (an index outside [-depth, depth) gives values[0] all along); values any dtype"),
    op!(GatherND, in 2..=2, out 1..=1, attrs &[attr!("batch_dims", Int)], infer infer_gather_nd,
        "the slices of data at the index tuples indices[..., :] (i64; negative counts from the back), after \
        `batch_dims` leading dims shared by data and indices; any dtype"),
    op!(EyeLike, in 1..=1, out 1..=1, attrs &[attr!("dtype", Int), attr!("k", Int)], validate validate_eye_like,
        infer infer_eye_like,
        "a 2-D tensor of the input's shape with ones on diagonal `k` (default 0) and zeros elsewhere, of the ONNX \
        data type `dtype` (default: the input's)"),
    op!(DepthToSpace, in 1..=1, out 1..=1, attrs &[attr!("blocksize", Int), attr!("mode", Str)],
        validate validate_depth_to_space, infer infer_depth_to_space,
        "[N, C, H, W] → [N, C/b², H·b, W·b] moving channel blocks into space (b = `blocksize`, required), in \
        `mode` DCR (default) or CRD order; any dtype"),
    op!(SpaceToDepth, in 1..=1, out 1..=1, attrs &[attr!("blocksize", Int), attr!("mode", Str)],
        validate validate_space_to_depth, infer infer_space_to_depth,
        "[N, C, H, W] → [N, C·b², H/b, W/b] moving b×b blocks of space into channels (b = `blocksize`, required), \
        in `mode` DCR (default) or CRD order; any dtype"),
    op!(ReverseSequence, in 2..=2, out 1..=1, attrs &[attr!("batch_axis", Int), attr!("time_axis", Int)],
        validate validate_reverse_sequence, infer infer_reverse_sequence,
        "reverses the first sequence_lens[b] (input 2, i64, each in 0..=time) elements along `time_axis` \
        (default 0) of each batch b along `batch_axis` (default 1); the axes are 0 and 1; any dtype"),
    op!(Scatter, in 3..=3, out 1..=1, attrs &[attr!("axis", Int)], infer infer_scatter,
        "ScatterElements without reduction (deprecated since opset 11); any dtype"),
    op!(Compress, in 2..=2, out 1..=1, attrs &[attr!("axis", Int)], infer infer_compress,
        "the slices along `axis` (default: of the flattened input) where condition (input 2, bool 1-D, no longer \
        than the axis; its value decides the output shape) is true; any dtype"),
    op!(CenterCropPad, in 2..=2, out 1..=1, attrs &[attr!("axes", Ints)], infer infer_center_crop_pad,
        "crops or zero-pads each of `axes` (default all) around its centre to the size given by input 2 (i64 or \
        i32; its value decides the output shape); any dtype"),
];

/// The index dtypes of GatherElements and ScatterElements.
const INDEX: &[DType] = &[DType::I64, DType::I32];

/// The numeric dtypes (the reductions, TopK).
pub(crate) use super::elementwise::NUMERIC;

/// CumSum's and CumProd's dtypes.
pub(crate) const CUM: &[DType] = &[DType::I32, DType::I64, DType::U32, DType::U64, DType::F16, DType::F32, DType::F64];

/// Hardmax's dtypes.
pub(crate) const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::F64];

/// The integer values of a known index-like tensor of any integer dtype (or a float one,
/// truncated, as OneHot takes).
pub(crate) fn ints(t: &TensorInfo) -> Option<Vec<i64>> {
    let v = t.value?;
    let es = v.dtype.size();
    if v.data.len() as u64 != crate::ir::host_tensor::numel(&v.shape)? * es as u64 {
        return None;
    }
    Some(v.data.chunks_exact(es).map(|c| load_i64(v.dtype, c)).collect())
}

/// Dims as `usize` (of shapes checked by [`check_shape`]).
pub(crate) fn udims(s: &[i64]) -> Vec<usize> {
    s.iter().map(|&d| d.max(0) as usize).collect()
}

/// Resolves an index against an axis of `size`: negative counts from the back, outside
/// `[-size, size)` is an error.
pub(crate) fn resolve(i: i64, size: i64, axis: usize, op: &str) -> Result<usize, String> {
    let v = if i < 0 { i.wrapping_add(size) } else { i };
    if !(0..size).contains(&v) {
        return Err(format!("{op}: index {i} is out of range for axis {axis} of size {size}"));
    }
    Ok(v as usize)
}

// ---------------------------------------------------------------------------------------
// GatherElements, ScatterElements, Scatter.

/// The normalized axis of GatherElements / ScatterElements, checking that indices (and
/// updates) have the data's rank and dims no larger than the data's off the axis.
pub(crate) fn plan_elements(
    ins: &[Option<TensorInfo>],
    attrs: &Attrs,
    op: &str,
    scatter: bool,
) -> Result<(usize, OutInfo), String> {
    let (x, idx) = (input(ins, 0, "data")?, input(ins, 1, "indices")?);
    check_shape(x.shape, op)?;
    check_shape(idx.shape, op)?;
    check_dtype(idx, 1, "indices", INDEX).map_err(|e| format!("{op}: {e}"))?;
    let r = x.shape.len();
    if idx.shape.len() != r {
        return Err(format!("{op}: indices {:?} must have the data's rank {r} (data {:?})", idx.shape, x.shape));
    }
    let axis = norm_axis(attrs.int("axis", 0), r, op)?;
    for d in 0..r {
        if d != axis && idx.shape[d] > x.shape[d] {
            return Err(format!(
                "{op}: indices {:?} are larger than the data {:?} in dim {d}, which is not the axis {axis}",
                idx.shape, x.shape
            ));
        }
    }
    if scatter {
        let u = input(ins, 2, "updates")?;
        if u.dtype != x.dtype || u.shape != idx.shape {
            return Err(format!(
                "{op}: updates ({}{:?}) must have the data's dtype {} and the indices' shape {:?}",
                u.dtype, u.shape, x.dtype, idx.shape
            ));
        }
        return Ok((axis, (x.dtype, x.shape.to_vec())));
    }
    Ok((axis, (x.dtype, idx.shape.to_vec())))
}

pub(crate) fn infer_gather_elements(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![plan_elements(ins, attrs, "GatherElements", false)?.1])
}

/// How a scatter combines an update with the element already there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

pub(crate) fn reduction(attrs: &Attrs, op: &str) -> Result<Reduction, String> {
    Ok(match attrs.str("reduction").unwrap_or("none") {
        "none" => Reduction::None,
        "add" => Reduction::Add,
        "mul" => Reduction::Mul,
        "max" => Reduction::Max,
        "min" => Reduction::Min,
        r => return Err(format!("{op}: reduction {r:?} is not one of none, add, mul, max, min")),
    })
}

fn check_reduction_dtype(r: Reduction, d: DType, op: &str) -> Result<(), String> {
    if r != Reduction::None && !NUMERIC.contains(&d) {
        return Err(format!("{op}: reduction {r:?} needs numeric data ({}), found {d}", dtype_list(NUMERIC)));
    }
    Ok(())
}

fn validate_scatter_elements(a: &Attrs) -> Result<(), String> {
    reduction(a, "ScatterElements").map(|_| ())
}

fn validate_scatter_nd(a: &Attrs) -> Result<(), String> {
    reduction(a, "ScatterND").map(|_| ())
}

pub(crate) fn infer_scatter_elements(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    const OP: &str = "ScatterElements";
    let out = plan_elements(ins, attrs, OP, true)?.1;
    check_reduction_dtype(reduction(attrs, OP)?, out.0, OP)?;
    Ok(vec![out])
}

pub(crate) fn infer_scatter(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![plan_elements(ins, attrs, "Scatter", true)?.1])
}

// ---------------------------------------------------------------------------------------
// GatherND and ScatterND.

/// GatherND's plan: `(batch dims b, tuple length k, output)`.
pub(crate) fn plan_gather_nd(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<(usize, usize, OutInfo), String> {
    const OP: &str = "GatherND";
    let (x, idx) = (input(ins, 0, "data")?, input(ins, 1, "indices")?);
    check_shape(x.shape, OP)?;
    check_shape(idx.shape, OP)?;
    check_dtype(idx, 1, "indices", &[DType::I64]).map_err(|e| format!("{OP}: {e}"))?;
    let (r, q) = (x.shape.len(), idx.shape.len());
    let b = attrs.int("batch_dims", 0);
    if b < 0 || b as usize >= r.min(q) {
        return Err(format!(
            "{OP}: batch_dims {b} must be in 0..{} (below the ranks of data {r} and indices {q})",
            r.min(q)
        ));
    }
    let b = b as usize;
    if x.shape[..b] != idx.shape[..b] {
        return Err(format!("{OP}: the first {b} dims of data {:?} and indices {:?} differ", x.shape, idx.shape));
    }
    let k = idx.shape[q - 1];
    if k < 1 || k as usize > r - b {
        return Err(format!(
            "{OP}: the last dim of indices {:?} is {k}; it must be in 1..={} (data rank {r} less batch_dims {b})",
            idx.shape,
            r - b
        ));
    }
    let k = k as usize;
    let out: Vec<i64> = idx.shape[..q - 1].iter().chain(&x.shape[b + k..]).copied().collect();
    check_shape(&out, OP)?;
    Ok((b, k, (x.dtype, out)))
}

pub(crate) fn infer_gather_nd(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![plan_gather_nd(ins, attrs)?.2])
}

/// ScatterND's plan: the tuple length k (updates are indices.shape[:-1] + data.shape[k:]).
pub(crate) fn plan_scatter_nd(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<(usize, Reduction), String> {
    const OP: &str = "ScatterND";
    let (x, idx, u) = (input(ins, 0, "data")?, input(ins, 1, "indices")?, input(ins, 2, "updates")?);
    check_shape(x.shape, OP)?;
    check_shape(idx.shape, OP)?;
    check_dtype(idx, 1, "indices", &[DType::I64]).map_err(|e| format!("{OP}: {e}"))?;
    let (r, q) = (x.shape.len(), idx.shape.len());
    let k = *idx.shape.last().ok_or_else(|| format!("{OP}: indices must have rank 1 or more, found a scalar"))?;
    if r == 0 || k < 1 || k as usize > r {
        return Err(format!(
            "{OP}: the last dim of indices {:?} is {k}; it must be in 1..={r} (the data's rank)",
            idx.shape
        ));
    }
    let k = k as usize;
    let want: Vec<i64> = idx.shape[..q - 1].iter().chain(&x.shape[k..]).copied().collect();
    if u.dtype != x.dtype || u.shape != want {
        return Err(format!(
            "{OP}: updates ({}{:?}) must be {}{want:?} (indices {:?}, data {:?})",
            u.dtype, u.shape, x.dtype, idx.shape, x.shape
        ));
    }
    let red = reduction(attrs, OP)?;
    check_reduction_dtype(red, x.dtype, OP)?;
    Ok((k, red))
}

pub(crate) fn infer_scatter_nd(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    plan_scatter_nd(ins, attrs)?;
    let x = input(ins, 0, "data")?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

// ---------------------------------------------------------------------------------------
// Trilu.

fn validate_trilu(a: &Attrs) -> Result<(), String> {
    flag_attr(a, "upper", "Trilu")
}

pub(crate) fn infer_trilu(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    const OP: &str = "Trilu";
    let x = input(ins, 0, "input")?;
    check_shape(x.shape, OP)?;
    if x.shape.len() < 2 {
        return Err(format!("{OP}: the input must have rank 2 or more, found shape {:?}", x.shape));
    }
    if let Some(k) = optional(ins, 1) {
        check_dtype(k, 1, "k", &[DType::I64]).map_err(|e| format!("{OP}: {e}"))?;
        check_scalar(k, 1, "k").map_err(|e| format!("{OP}: {e}"))?;
    }
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

// ---------------------------------------------------------------------------------------
// CumSum and CumProd.

fn validate_cumsum(a: &Attrs) -> Result<(), String> {
    flag_attr(a, "exclusive", "CumSum")?;
    flag_attr(a, "reverse", "CumSum")
}

fn validate_cumprod(a: &Attrs) -> Result<(), String> {
    flag_attr(a, "exclusive", "CumProd")?;
    flag_attr(a, "reverse", "CumProd")
}

/// The axis of a CumSum / CumProd, given the axis input's value.
pub(crate) fn cum_axis(axis: &[i64], rank: usize) -> Result<usize, String> {
    match axis {
        [a] => norm_axis(*a, rank, "CumSum/CumProd"),
        _ => Err(format!("CumSum/CumProd: the axis input must hold one value, found {axis:?}")),
    }
}

pub(crate) fn infer_cum(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    const OP: &str = "CumSum/CumProd";
    let x = input(ins, 0, "x")?;
    check_dtype(x, 0, "x", CUM).map_err(|e| format!("{OP}: {e}"))?;
    check_shape(x.shape, OP)?;
    let a = input(ins, 1, "axis")?;
    check_dtype(a, 1, "axis", INDEX).map_err(|e| format!("{OP}: {e}"))?;
    check_scalar(a, 1, "axis").map_err(|e| format!("{OP}: {e}"))?;
    if x.shape.is_empty() {
        return Err(format!("{OP}: the input must have rank 1 or more, found a scalar"));
    }
    // The axis's value does not decide the shape; check it when known.
    if let Some(v) = ints(a) {
        cum_axis(&v, x.shape.len())?;
    }
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

// ---------------------------------------------------------------------------------------
// TopK.

fn validate_topk(a: &Attrs) -> Result<(), String> {
    flag_attr(a, "largest", "TopK")?;
    flag_attr(a, "sorted", "TopK")?;
    if let Some(AttrValue::Int(k)) = a.get("k") {
        if *k < 0 {
            return Err(format!("attribute `k` of @onnx.TopK must be 0 or more, found {k}"));
        }
    }
    Ok(())
}

/// TopK's axis and k.
pub(crate) fn plan_topk(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<(usize, i64, Vec<OutInfo>), String> {
    const OP: &str = "TopK";
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", NUMERIC).map_err(|e| format!("{OP}: {e}"))?;
    check_shape(x.shape, OP)?;
    let axis = norm_axis(attrs.int("axis", -1), x.shape.len(), OP)?;
    let k = match (optional(ins, 1), attrs.get("k")) {
        (Some(_), Some(_)) => return Err(format!("{OP}: give k either as input 2 or as the `k` attribute, not both")),
        (Some(t), None) => {
            check_dtype(t, 1, "K", &[DType::I64]).map_err(|e| format!("{OP}: {e}"))?;
            check_scalar(t, 1, "K").map_err(|e| format!("{OP}: {e}"))?;
            match value_ints(t, OP, "K")?[..] {
                [k] => k,
                _ => return Err(format!("{OP}: K must hold one value")),
            }
        }
        (None, Some(_)) => attrs.int("k", 0),
        (None, None) => return Err(format!("{OP}: k is required (input 2, or the `k` attribute before opset 10)")),
    };
    let n = x.shape[axis];
    if !(0..=n).contains(&k) {
        return Err(format!("{OP}: k = {k} must be in 0..={n} (the size of axis {axis})"));
    }
    let mut s = x.shape.to_vec();
    s[axis] = k;
    Ok((axis, k, vec![(x.dtype, s.clone()), (DType::I64, s)]))
}

pub(crate) fn infer_topk(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(plan_topk(ins, attrs)?.2)
}

// ---------------------------------------------------------------------------------------
// Hardmax.

fn validate_hardmax(a: &Attrs) -> Result<(), String> {
    match a.get("onnx_opset") {
        Some(AttrValue::Int(v)) if *v < 1 => {
            Err(format!("attribute `onnx_opset` of @onnx.Hardmax must be a positive opset version, found {v}"))
        }
        _ => Ok(()),
    }
}

/// `(outer, n, inner)`: Hardmax picks among the `n` elements at stride `inner` of each of
/// `outer` blocks (opset < 13: the input flattened to 2-D at `axis`, default 1).
pub(crate) fn hardmax_dims(shape: &[i64], attrs: &Attrs) -> Result<(usize, usize, usize), String> {
    let legacy = attrs.int("onnx_opset", 13) < 13;
    let axis = attrs.int("axis", if legacy { 1 } else { -1 });
    let ax = norm_axis(axis, shape.len(), "Hardmax")?;
    let p = |s: &[i64]| udims(s).iter().product::<usize>();
    Ok(if legacy {
        (p(&shape[..ax]), p(&shape[ax..]), 1)
    } else {
        (p(&shape[..ax]), p(&shape[ax..ax + 1]), p(&shape[ax + 1..]))
    })
}

pub(crate) fn infer_hardmax(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "input")?;
    check_dtype(x, 0, "input", FLOATS).map_err(|e| format!("Hardmax: {e}"))?;
    check_shape(x.shape, "Hardmax")?;
    hardmax_dims(x.shape, attrs)?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

// ---------------------------------------------------------------------------------------
// OneHot.

/// OneHot's new axis and the output (depth from input 2's value).
pub(crate) fn plan_one_hot(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<(usize, OutInfo), String> {
    const OP: &str = "OneHot";
    let (idx, depth, vals) = (input(ins, 0, "indices")?, input(ins, 1, "depth")?, input(ins, 2, "values")?);
    check_dtype(idx, 0, "indices", NUMERIC).map_err(|e| format!("{OP}: {e}"))?;
    check_dtype(depth, 1, "depth", NUMERIC).map_err(|e| format!("{OP}: {e}"))?;
    check_shape(idx.shape, OP)?;
    check_scalar(depth, 1, "depth").map_err(|e| format!("{OP}: {e}"))?;
    if vals.shape != [2] {
        return Err(format!("{OP}: values must be [off_value, on_value] (shape [2]), found shape {:?}", vals.shape));
    }
    let r = idx.shape.len() as i64;
    let axis = attrs.int("axis", -1);
    if !(-r - 1..=r).contains(&axis) {
        return Err(format!(
            "{OP}: axis {axis} is out of range for the output rank {} (expected {}..={r})",
            r + 1,
            -r - 1
        ));
    }
    let axis = (if axis < 0 { axis + r + 1 } else { axis }) as usize;
    if depth.value.is_none() {
        return Err(format!("{OP} needs the value of its depth input to infer the output shape"));
    }
    let d =
        depth.value.map(|v| crate::ir::host_tensor::load_f64(v.dtype, v.data.get(..v.dtype.size()).unwrap_or(&[0; 8])));
    let d = d.unwrap_or(0.0).trunc();
    if !(d >= 1.0 && d < (1u64 << 53) as f64) {
        return Err(format!("{OP}: depth {d} must be a positive integer"));
    }
    let mut out = idx.shape.to_vec();
    out.insert(axis, d as i64);
    check_shape(&out, OP)?;
    Ok((axis, (vals.dtype, out)))
}

pub(crate) fn infer_one_hot(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![plan_one_hot(ins, attrs)?.1])
}

// ---------------------------------------------------------------------------------------
// EyeLike.

pub(crate) fn eye_dtype(attrs: &Attrs, input: DType) -> Result<DType, String> {
    match attrs.get("dtype") {
        None => Ok(input),
        Some(v) => DType::from_onnx(attrs.int("dtype", 0)).ok_or_else(|| {
            format!(
                "EyeLike: `dtype` = {v} is not a supported ONNX data type; supported: 1 (f32), 2 (u8), 3 (i8), \
                 4 (u16), 5 (i16), 6 (i32), 7 (i64), 9 (bool), 10 (f16), 11 (f64), 12 (u32), 13 (u64)"
            )
        }),
    }
}

fn validate_eye_like(a: &Attrs) -> Result<(), String> {
    eye_dtype(a, DType::F32).map(|_| ())
}

pub(crate) fn infer_eye_like(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "input")?;
    check_shape(x.shape, "EyeLike")?;
    if x.shape.len() != 2 {
        return Err(format!("EyeLike: the input must be 2-D, found shape {:?}", x.shape));
    }
    Ok(vec![(eye_dtype(attrs, x.dtype)?, x.shape.to_vec())])
}

// ---------------------------------------------------------------------------------------
// DepthToSpace and SpaceToDepth.

/// `(blocksize, crd)`: the block size and whether the mode is CRD.
pub(crate) fn block_mode(attrs: &Attrs, op: &str) -> Result<(i64, bool), String> {
    let b = match attrs.get("blocksize") {
        Some(AttrValue::Int(b)) if *b >= 1 => *b,
        Some(v) => return Err(format!("attribute `blocksize` of @onnx.{op} must be 1 or more, found {v}")),
        None => return Err(format!("{op} needs the `blocksize` attribute")),
    };
    let crd = match attrs.str("mode").unwrap_or("DCR") {
        "DCR" => false,
        "CRD" => true,
        m => return Err(format!("attribute `mode` of @onnx.{op} must be \"DCR\" or \"CRD\", found {m:?}")),
    };
    Ok((b, crd))
}

fn validate_depth_to_space(a: &Attrs) -> Result<(), String> {
    block_mode(a, "DepthToSpace").map(|_| ())
}

fn validate_space_to_depth(a: &Attrs) -> Result<(), String> {
    block_mode(a, "SpaceToDepth").map(|_| ())
}

fn nchw<'a>(ins: &'a [Option<TensorInfo>], op: &str) -> Result<(&'a TensorInfo<'a>, [i64; 4]), String> {
    let x = input(ins, 0, "input")?;
    check_shape(x.shape, op)?;
    match *x.shape {
        [n, c, h, w] => Ok((x, [n, c, h, w])),
        _ => Err(format!("{op}: the input must be 4-D [N, C, H, W], found shape {:?}", x.shape)),
    }
}

pub(crate) fn infer_depth_to_space(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    const OP: &str = "DepthToSpace";
    let (b, _) = block_mode(attrs, OP)?;
    let (x, [n, c, h, w]) = nchw(ins, OP)?;
    let bb = b.checked_mul(b).ok_or_else(|| format!("{OP}: blocksize {b} is too large"))?;
    if c % bb != 0 {
        return Err(format!("{OP}: the channel count {c} is not a multiple of blocksize² = {bb}"));
    }
    let out = vec![n, c / bb, h.checked_mul(b).unwrap_or(-1), w.checked_mul(b).unwrap_or(-1)];
    check_shape(&out, OP)?;
    Ok(vec![(x.dtype, out)])
}

pub(crate) fn infer_space_to_depth(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    const OP: &str = "SpaceToDepth";
    let (b, _) = block_mode(attrs, OP)?;
    let (x, [n, c, h, w]) = nchw(ins, OP)?;
    if h % b != 0 || w % b != 0 {
        return Err(format!("{OP}: the spatial size {h}×{w} is not a multiple of blocksize {b}"));
    }
    let out = vec![n, c.checked_mul(b).and_then(|v| v.checked_mul(b)).unwrap_or(-1), h / b, w / b];
    check_shape(&out, OP)?;
    Ok(vec![(x.dtype, out)])
}

// ---------------------------------------------------------------------------------------
// ReverseSequence.

pub(crate) fn seq_axes(a: &Attrs) -> Result<(usize, usize), String> {
    let (b, t) = (a.int("batch_axis", 1), a.int("time_axis", 0));
    if !matches!((b, t), (0, 1) | (1, 0)) {
        return Err(format!(
            "@onnx.ReverseSequence: batch_axis and time_axis must be 0 and 1 (one each), found {b} and {t}"
        ));
    }
    Ok((b as usize, t as usize))
}

fn validate_reverse_sequence(a: &Attrs) -> Result<(), String> {
    seq_axes(a).map(|_| ())
}

pub(crate) fn infer_reverse_sequence(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    const OP: &str = "ReverseSequence";
    let (b, t) = seq_axes(attrs)?;
    let (x, l) = (input(ins, 0, "input")?, input(ins, 1, "sequence_lens")?);
    check_shape(x.shape, OP)?;
    if x.shape.len() < 2 {
        return Err(format!("{OP}: the input must have rank 2 or more, found shape {:?}", x.shape));
    }
    check_dtype(l, 1, "sequence_lens", &[DType::I64]).map_err(|e| format!("{OP}: {e}"))?;
    if l.shape != [x.shape[b]] {
        return Err(format!(
            "{OP}: sequence_lens must be 1-D of the batch size {} (input {:?}), found shape {:?}",
            x.shape[b], x.shape, l.shape
        ));
    }
    if let Some(v) = ints(l) {
        check_seq_lens(&v, x.shape[t])?;
    }
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

pub(crate) fn check_seq_lens(lens: &[i64], time: i64) -> Result<(), String> {
    match lens.iter().find(|&&l| !(0..=time).contains(&l)) {
        Some(l) => Err(format!("ReverseSequence: sequence length {l} is out of range 0..={time} (the time axis)")),
        None => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------
// Compress.

/// Compress's plan: the axis (`None`: the flattened input) and the kept positions along it.
pub(crate) fn plan_compress(
    ins: &[Option<TensorInfo>],
    attrs: &Attrs,
) -> Result<(Option<usize>, Vec<usize>, OutInfo), String> {
    const OP: &str = "Compress";
    let (x, c) = (input(ins, 0, "input")?, input(ins, 1, "condition")?);
    check_shape(x.shape, OP)?;
    check_dtype(c, 1, "condition", &[DType::Bool]).map_err(|e| format!("{OP}: {e}"))?;
    if c.shape.len() != 1 {
        return Err(format!("{OP}: condition must be 1-D, found shape {:?}", c.shape));
    }
    let axis = match attrs.get("axis") {
        Some(_) => Some(norm_axis(attrs.int("axis", 0), x.shape.len(), OP)?),
        None => None,
    };
    let len = match axis {
        Some(a) => x.shape[a],
        None => prod(x.shape, OP)?,
    };
    if c.shape[0] > len {
        return Err(format!("{OP}: condition has {} values, more than the {len} of the axis", c.shape[0]));
    }
    let v = c.value.ok_or_else(|| format!("{OP} needs the value of its condition input to infer the output shape"))?;
    if v.data.len() as i64 != c.shape[0] {
        return Err(format!("{OP}: condition holds {} bytes for shape {:?}", v.data.len(), c.shape));
    }
    let keep: Vec<usize> = v.data.iter().enumerate().filter(|(_, &b)| b != 0).map(|(i, _)| i).collect();
    let out = match axis {
        Some(a) => {
            let mut s = x.shape.to_vec();
            s[a] = keep.len() as i64;
            s
        }
        None => vec![keep.len() as i64],
    };
    Ok((axis, keep, (x.dtype, out)))
}

pub(crate) fn infer_compress(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![plan_compress(ins, attrs)?.2])
}

// ---------------------------------------------------------------------------------------
// CenterCropPad.

/// Per dim of the output: `(input offset, output offset)` of the copied centre; the copied
/// extent is min(in, out) (ONNX: crop and pad each put the extra element at the end).
pub(crate) fn center_offsets(x: &[i64], y: &[i64]) -> Vec<(i64, i64)> {
    x.iter().zip(y).map(|(&i, &o)| if o <= i { ((i - o) / 2, 0) } else { (0, (o - i) / 2) }).collect()
}

pub(crate) fn infer_center_crop_pad(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    const OP: &str = "CenterCropPad";
    let (x, s) = (input(ins, 0, "input_data")?, input(ins, 1, "shape")?);
    check_shape(x.shape, OP)?;
    check_dtype(s, 1, "shape", INDEX).map_err(|e| format!("{OP}: {e}"))?;
    let r = x.shape.len();
    let axes: Vec<usize> = match attrs.ints("axes") {
        Some(a) => super::tensor::norm_axes(a, r, OP)?,
        None => (0..r).collect(),
    };
    if s.shape != [axes.len() as i64] {
        return Err(format!(
            "{OP}: shape must be 1-D with one size per axis ({}), found shape {:?}",
            axes.len(),
            s.shape
        ));
    }
    let sizes = value_ints(s, OP, "shape")?;
    let mut out = x.shape.to_vec();
    for (&a, &n) in axes.iter().zip(&sizes) {
        if n < 0 {
            return Err(format!("{OP}: shape {sizes:?} has the negative size {n}"));
        }
        out[a] = n;
    }
    check_shape(&out, OP)?;
    Ok(vec![(x.dtype, out)])
}
