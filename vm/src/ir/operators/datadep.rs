//! Operator schemas of the operators whose output shapes depend on their input data:
//! NonZero, Unique and NonMaxSuppression (the kernels are in `crate::ops::datadep` and
//! `crate::ops::datadep_cl`).
//!
//! Their inference needs the whole data input's values (how many elements are nonzero,
//! distinct or selected): without them it returns the "needs the value of its ... input"
//! error, so the compiler emits an allocating call, and the VM reads these operators'
//! inputs for inference whatever their size ([`reads_whole_inputs`]). Inference computes
//! the result itself to know its size: the `plan_*` functions here are shared by inference
//! and by the kernels, which write the planned result.

use super::elementwise::{check_dtype, check_scalar, flag_attr, input, optional};
use super::tensor::{check_shape, norm_axis, prod};
use super::Operator;
use crate::ir::attrs::*;
use crate::ir::host_tensor::{load_f64, load_i64, HostTensor};
use crate::ir::schema::*;
use crate::ir::types::DType;
use std::cmp::Ordering;

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(NonZero, in 1..=1, out 1..=1, attrs &[], infer infer_non_zero,
        "the indices of the nonzero elements of X (any dtype; NaN is nonzero, -0 is zero) as i64 [rank, count], \
        one column per element in row-major order (a scalar counts as 1-D); the count needs X's value"),
    op!(Unique, in 1..=1, out 1..=4, attrs &[attr!("axis", Int), attr!("sorted", Int)],
        validate validate_unique, infer infer_unique,
        "the distinct elements of X (flattened) or slices along `axis`: Y, the i64 index of each one's first \
        occurrence, the i64 inverse indices of X's elements (slices) into Y and i64 counts; `sorted` 1 (default) \
        orders Y ascending (slices lexicographically; NaN above every number, all NaNs equal), 0 by first \
        occurrence; any dtype; the sizes need X's value"),
    op!(NonMaxSuppression, in 2..=5, out 1..=1, attrs &[attr!("center_point_box", Int)],
        validate validate_non_max_suppression, infer infer_non_max_suppression,
        "per batch and class, greedily selects boxes (f32 [B, N, 4]: y1, x1, y2, x2 corners, or x, y, w, h with \
        `center_point_box` 1) by descending score (f32 [B, C, N]; ties to the lower index; NaN below every \
        score), skipping those whose IoU with a selected one exceeds iou_threshold (input 4, default 0) and \
        those scoring at most score_threshold (input 5, if given), at most max_output_boxes_per_class (input \
        3, i64, default 0) each; output i64 [selected, 3] rows (batch, class, box); the count needs the values"),
];

/// True for the operators whose inference reads every input's whole value (their output
/// shapes depend on the data): the VM reads these inputs for an allocating call's
/// inference whatever their size, also from a device.
pub fn reads_whole_inputs(op: Operator) -> bool {
    matches!(op, Operator::NonZero | Operator::Unique | Operator::NonMaxSuppression)
}

/// The value of input `i` (`name`), checked against its shape and dtype.
fn value<'a>(t: &TensorInfo<'a>, op: &str, name: &str) -> Result<&'a HostTensor, String> {
    let v = t.value.ok_or_else(|| format!("{op} needs the value of its {name} input to infer the output shape"))?;
    let n = prod(t.shape, op)?;
    if v.dtype != t.dtype || v.data.len() as u64 != n as u64 * t.dtype.size() as u64 {
        return Err(format!(
            "{op}: the value of {name} holds {} bytes of {}, not {:?} of {}",
            v.data.len(),
            v.dtype,
            t.shape,
            t.dtype
        ));
    }
    Ok(v)
}

/// Whether an element is nonzero: floats by value (NaN is nonzero, -0 is zero), the
/// other dtypes by their bits.
fn nonzero(dtype: DType, b: &[u8]) -> bool {
    if dtype.is_float() {
        load_f64(dtype, b) != 0.0
    } else {
        b.iter().any(|&x| x != 0)
    }
}

// ---------------------------------------------------------------------------------------
// NonZero.

/// NonZero's result: its shape `[rank, count]` and the i64 indices, row-major.
pub(crate) fn plan_non_zero(ins: &[Option<TensorInfo>]) -> Result<(Vec<i64>, Vec<i64>), String> {
    const OP: &str = "NonZero";
    let x = input(ins, 0, "X")?;
    check_shape(x.shape, OP)?;
    let v = value(x, OP, "X")?;
    // A scalar counts as 1-D (as numpy < 2 and ONNX Runtime).
    let dims: Vec<i64> = if x.shape.is_empty() { vec![1] } else { x.shape.to_vec() };
    let es = x.dtype.size();
    let hits: Vec<usize> =
        v.data.chunks_exact(es).enumerate().filter(|(_, b)| nonzero(x.dtype, b)).map(|(i, _)| i).collect();
    let (r, n) = (dims.len(), hits.len());
    let mut out = vec![0i64; r * n];
    for (j, &flat) in hits.iter().enumerate() {
        let mut rest = flat as i64;
        for k in (0..r).rev() {
            let d = dims[k].max(1);
            out[k * n + j] = rest % d;
            rest /= d;
        }
    }
    Ok((vec![r as i64, n as i64], out))
}

pub(crate) fn infer_non_zero(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![(DType::I64, plan_non_zero(ins)?.0)])
}

// ---------------------------------------------------------------------------------------
// Unique.

pub(crate) fn validate_unique(a: &Attrs) -> Result<(), String> {
    flag_attr(a, "sorted", "Unique")
}

/// Unique's result: the outputs' types (Y, indices, inverse_indices, counts) and, for
/// each output element of Y, the element (no axis) or slice (with an axis) of X it copies;
/// the i64 indices, inverse indices and counts.
pub(crate) struct UniquePlan {
    pub outs: Vec<OutInfo>,
    /// The axis (`None`: X flattened).
    pub axis: Option<usize>,
    /// The index of each distinct element (slice) of X, in Y's order: Y's `indices`.
    pub first: Vec<i64>,
    pub inverse: Vec<i64>,
    pub counts: Vec<i64>,
}

/// Orders two elements of `dtype`: numbers by value (-0 equals 0), NaN above every number
/// and equal to NaN (numpy's unique with `equal_nan`); u64 unsigned.
fn elem_cmp(dtype: DType, a: &[u8], b: &[u8]) -> Ordering {
    if dtype.is_float() {
        let (x, y) = (load_f64(dtype, a), load_f64(dtype, b));
        match (x.is_nan(), y.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        }
    } else if dtype == DType::U64 {
        let f = |b: &[u8]| u64::from_le_bytes(b.get(..8).and_then(|s| s.try_into().ok()).unwrap_or([0; 8]));
        f(a).cmp(&f(b))
    } else {
        load_i64(dtype, a).cmp(&load_i64(dtype, b))
    }
}

pub(crate) fn plan_unique(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<UniquePlan, String> {
    const OP: &str = "Unique";
    let x = input(ins, 0, "X")?;
    check_shape(x.shape, OP)?;
    validate_unique(attrs)?;
    let sorted = attrs.int("sorted", 1) != 0;
    let axis = match attrs.get("axis") {
        Some(_) => Some(norm_axis(attrs.int("axis", 0), x.shape.len(), OP)?),
        None => None,
    };
    let v = value(x, OP, "X")?;
    let es = x.dtype.size();
    // The items compared: `n` slices of `w` elements; element `k` of item `i` is at flat
    // index (o * n + i) * inner + e for k = o * inner + e (o < outer, e < inner).
    let (n, outer, inner) = match axis {
        Some(a) => (x.shape[a] as usize, prod(&x.shape[..a], OP)? as usize, prod(&x.shape[a + 1..], OP)? as usize),
        None => (prod(x.shape, OP)? as usize, 1, 1),
    };
    let w = outer * inner;
    let at = |i: usize, k: usize| -> &[u8] {
        let (o, e) = (k / inner.max(1), k % inner.max(1));
        let p = ((o * n + i) * inner + e) * es;
        v.data.get(p..p + es).unwrap_or(&[])
    };
    let cmp = |i: &usize, j: &usize| -> Ordering {
        (0..w).map(|k| elem_cmp(x.dtype, at(*i, k), at(*j, k))).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
    };
    // A stable sort: each run of equal items starts with its first occurrence.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(cmp);
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for &i in &order {
        match groups.last_mut() {
            Some((f, members)) if cmp(f, &i).is_eq() => members.push(i),
            _ => groups.push((i, vec![i])),
        }
    }
    if !sorted {
        groups.sort_by_key(|(f, _)| *f);
    }
    let mut inverse = vec![0i64; n];
    for (g, (_, members)) in groups.iter().enumerate() {
        for &i in members {
            inverse[i] = g as i64;
        }
    }
    let u = groups.len() as i64;
    let y_shape = match axis {
        Some(a) => {
            let mut s = x.shape.to_vec();
            s[a] = u;
            s
        }
        None => vec![u],
    };
    Ok(UniquePlan {
        outs: vec![(x.dtype, y_shape), (DType::I64, vec![u]), (DType::I64, vec![n as i64]), (DType::I64, vec![u])],
        axis,
        first: groups.iter().map(|(f, _)| *f as i64).collect(),
        inverse,
        counts: groups.iter().map(|(_, m)| m.len() as i64).collect(),
    })
}

pub(crate) fn infer_unique(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(plan_unique(ins, attrs)?.outs)
}

/// Unique's Y bytes: the slices (elements) of X at `plan.first` along the axis.
pub(crate) fn unique_values(x: &HostTensor, plan: &UniquePlan) -> Vec<u8> {
    let es = x.dtype.size();
    let (n, outer, inner) = match plan.axis {
        Some(a) => (
            x.shape.get(a).copied().unwrap_or(0) as usize,
            x.shape.get(..a).unwrap_or(&[]).iter().product::<i64>() as usize,
            x.shape.get(a + 1..).unwrap_or(&[]).iter().product::<i64>() as usize,
        ),
        None => (x.data.len() / es.max(1), 1, 1),
    };
    let mut out = Vec::with_capacity(outer * plan.first.len() * inner * es);
    for o in 0..outer {
        for &i in &plan.first {
            let p = (o * n + i as usize) * inner * es;
            out.extend_from_slice(x.data.get(p..p + inner * es).unwrap_or(&[]));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// NonMaxSuppression.

pub(crate) fn validate_non_max_suppression(a: &Attrs) -> Result<(), String> {
    flag_attr(a, "center_point_box", "NonMaxSuppression")
}

/// A box's extent along one axis and the other: `[min, max]` pairs (x, y).
fn extents(b: [f32; 4], center: bool) -> [[f32; 2]; 2] {
    let mm = |p: f32, q: f32| if p >= q { [q, p] } else { [p, q] };
    if center {
        let (hw, hh) = (b[2] / 2.0, b[3] / 2.0);
        [[b[0] - hw, b[0] + hw], [b[1] - hh, b[1] + hh]]
    } else {
        [mm(b[1], b[3]), mm(b[0], b[2])]
    }
}

/// Whether box `b` is suppressed by the selected box `s`: their IoU exceeds `iou`
/// (computed in f32 as the ONNX reference; degenerate boxes never suppress).
fn suppresses(b: [f32; 4], s: [f32; 4], center: bool, iou: f32) -> bool {
    let ([bx, by], [sx, sy]) = (extents(b, center), extents(s, center));
    let (ix0, ix1) = (bx[0].max(sx[0]), bx[1].min(sx[1]));
    if ix1 <= ix0 {
        return false;
    }
    let (iy0, iy1) = (by[0].max(sy[0]), by[1].min(sy[1]));
    if iy1 <= iy0 {
        return false;
    }
    let inter = (ix1 - ix0) * (iy1 - iy0);
    if inter <= 0.0 {
        return false;
    }
    let (a1, a2) = ((bx[1] - bx[0]) * (by[1] - by[0]), (sx[1] - sx[0]) * (sy[1] - sy[0]));
    let union = a1 + a2 - inter;
    if a1 <= 0.0 || a2 <= 0.0 || union <= 0.0 {
        return false;
    }
    inter / union > iou
}

/// NonMaxSuppression's selected `(batch, class, box)` triples, in output order.
pub(crate) fn plan_non_max_suppression(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<[i64; 3]>, String> {
    const OP: &str = "NonMaxSuppression";
    validate_non_max_suppression(attrs)?;
    let center = attrs.int("center_point_box", 0) != 0;
    let (boxes, scores) = (input(ins, 0, "boxes")?, input(ins, 1, "scores")?);
    check_dtype(boxes, 0, "boxes", &[DType::F32])?;
    check_dtype(scores, 1, "scores", &[DType::F32])?;
    let [nb, nn, four] = boxes.shape[..] else {
        return Err(format!("boxes must be 3-D [batches, boxes, 4], found shape {:?}", boxes.shape));
    };
    if four != 4 {
        return Err(format!("boxes must be 3-D [batches, boxes, 4], found shape {:?}", boxes.shape));
    }
    let [sb, nc, sn] = scores.shape[..] else {
        return Err(format!("scores must be 3-D [batches, classes, boxes], found shape {:?}", scores.shape));
    };
    if sb != nb || sn != nn {
        return Err(format!(
            "scores {:?} must be [batches, classes, boxes] for boxes {:?} ({nb} batches, {nn} boxes)",
            scores.shape, boxes.shape
        ));
    }
    check_shape(boxes.shape, OP)?;
    check_shape(scores.shape, OP)?;
    // The optional scalars: an empty tensor counts as not given (as the ONNX reference).
    let scalar = |i: usize, name: &str, dtype: DType| -> Result<Option<f64>, String> {
        let Some(t) = optional(ins, i) else { return Ok(None) };
        check_dtype(t, i, name, &[dtype])?;
        if prod(t.shape, OP)? == 0 {
            return Ok(None);
        }
        check_scalar(t, i, name)?;
        let v = value(t, OP, name)?;
        Ok(Some(if dtype == DType::I64 { load_i64(dtype, &v.data) as f64 } else { load_f64(dtype, &v.data) }))
    };
    let max_out = scalar(2, "max_output_boxes_per_class", DType::I64)?.map_or(0, |v| (v as i64).max(0));
    let iou = scalar(3, "iou_threshold", DType::F32)?.unwrap_or(0.0) as f32;
    let score_threshold = scalar(4, "score_threshold", DType::F32)?.map(|v| v as f32);
    let (bv, sv) = (value(boxes, OP, "boxes")?, value(scores, OP, "scores")?);
    let f32s = |t: &HostTensor| -> Vec<f32> {
        t.data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    };
    let (bx, sc) = (f32s(bv), f32s(sv));
    let (nn, nc) = (nn as usize, nc as usize);
    let mut out = Vec::new();
    if max_out == 0 {
        return Ok(out);
    }
    // NaN sorts below every score (and -0 equals 0): a total order for the sort.
    let key = |s: f32| if s.is_nan() { f32::NEG_INFINITY } else { s + 0.0 };
    for b in 0..nb as usize {
        let batch = bx.get(b * nn * 4..(b + 1) * nn * 4).unwrap_or(&[]);
        let corners =
            |i: usize| -> [f32; 4] { batch.get(i * 4..i * 4 + 4).and_then(|c| c.try_into().ok()).unwrap_or([0.0; 4]) };
        for c in 0..nc {
            let cs = sc.get((b * nc + c) * nn..(b * nc + c + 1) * nn).unwrap_or(&[]);
            let mut cand: Vec<usize> = (0..cs.len()).filter(|&i| score_threshold.is_none_or(|t| cs[i] > t)).collect();
            // Descending score, ties to the lower index (stable); NaN after -inf.
            cand.sort_by(|&i, &j| key(cs[j]).total_cmp(&key(cs[i])).then(cs[i].is_nan().cmp(&cs[j].is_nan())));
            let mut chosen: Vec<usize> = Vec::new();
            for i in cand {
                if chosen.len() as i64 >= max_out {
                    break;
                }
                if !chosen.iter().any(|&s| suppresses(corners(i), corners(s), center, iou)) {
                    chosen.push(i);
                    out.push([b as i64, c as i64, i as i64]);
                }
            }
        }
    }
    Ok(out)
}

pub(crate) fn infer_non_max_suppression(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![(DType::I64, vec![plan_non_max_suppression(ins, attrs)?.len() as i64, 3])])
}
