//! Operator schemas of the newer normalizations: RMSNormalization, GroupNormalization,
//! LpNormalization and MeanVarianceNormalization (the kernels are in
//! `crate::ops::normalization` and `crate::ops::normalization_cl`).
//!
//! The geometry helpers here (`rms_axis`, `group_norm_plan`, `lp_split`, `mvn_axes`) are
//! shared by inference, the host kernels and the OpenCL kernels.

use super::attention::FLOATS;
use super::elementwise::{check_dtype, epsilon_attr, input, norm_axis};
use super::shape::broadcast;
use super::tensor::check_shape;
use crate::ir::attrs::*;
use crate::ir::schema::*;

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(RMSNormalization, in 2..=2, out 1..=1, attrs &[attr!("axis", Int), attr!("epsilon", Float), attr!("stash_type", Int)],
        validate validate_rms, infer infer_rms,
        "X / sqrt(mean(X²) + epsilon) · Scale over the dims from `axis` (default -1) on; Scale broadcasts to X \
        (epsilon 1e-5; f16, f32, f64; computed in f64)"),
    op!(GroupNormalization, in 3..=3, out 1..=1,
        attrs &[attr!("epsilon", Float), attr!("num_groups", Int), attr!("stash_type", Int)],
        validate validate_group_norm, infer infer_group_norm,
        "(x - mean) / sqrt(var + epsilon) over num_groups groups of channels of (N, C, …), then scale · y + bias per \
        channel (opset 21; scale and bias of num_groups elements: per group, as opset 18) (epsilon 1e-5; f16, f32, f64)"),
    op!(LpNormalization, in 1..=1, out 1..=1, attrs &[attr!("axis", Int), attr!("p", Int)],
        validate validate_lp_norm, infer infer_lp_norm,
        "x / ‖x‖ₚ along `axis` (default -1; p 1 or 2, default 2); a zero norm gives 0 (f16, f32, f64)"),
    op!(MeanVarianceNormalization, in 1..=1, out 1..=1, attrs &[attr!("axes", Ints)],
        validate validate_mvn, infer infer_mvn,
        "(x - mean) / (sqrt(var) + 1e-9) with the statistics over `axes` (default [0, 2, 3]) (f16, f32, f64)"),
];

/// One stash type: f32 (1).
fn stash_attr(a: &Attrs, op: &str) -> Result<(), String> {
    match a.get("stash_type") {
        None | Some(AttrValue::Int(1)) => Ok(()),
        Some(v) => Err(format!(
            "attribute `stash_type` of @onnx.{op} must be 1 (compute in f32 or wider), found {}",
            v.describe()
        )),
    }
}

pub(crate) fn validate_rms(a: &Attrs) -> Result<(), String> {
    epsilon_attr(a, "RMSNormalization")?;
    stash_attr(a, "RMSNormalization")
}

/// A float input with a valid shape.
fn float_input<'a, 'b>(
    ins: &'a [Option<TensorInfo<'b>>],
    i: usize,
    name: &str,
    op: &str,
) -> Result<&'a TensorInfo<'b>, String> {
    let x = input(ins, i, name)?;
    check_dtype(x, i, name, FLOATS)?;
    check_shape(x.shape, op).map_err(|e| format!("input {} ({name}): {e}", i + 1))?;
    Ok(x)
}

/// The product of `dims` (inference checked the shape).
pub(crate) fn count(dims: &[i64]) -> usize {
    dims.iter().fold(1usize, |a, &d| a.saturating_mul(d.max(0) as usize))
}

/// RMSNormalization's first normalized axis.
pub(crate) fn rms_axis(x: &[i64], a: &Attrs) -> Result<usize, String> {
    if x.is_empty() {
        return Err("input 1 (X) must have rank ≥ 1, found a scalar".into());
    }
    norm_axis(a.int("axis", -1), x.len())
}

pub(crate) fn infer_rms(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    validate_rms(a)?;
    let x = float_input(ins, 0, "X", "RMSNormalization")?;
    rms_axis(x.shape, a)?;
    let s = float_input(ins, 1, "Scale", "RMSNormalization")?;
    if broadcast(s.shape, x.shape).ok().as_deref() != Some(x.shape) {
        return Err(format!("input 2 (Scale) has shape {:?}, which does not broadcast to X's {:?}", s.shape, x.shape));
    }
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

pub(crate) fn validate_group_norm(a: &Attrs) -> Result<(), String> {
    epsilon_attr(a, "GroupNormalization")?;
    stash_attr(a, "GroupNormalization")?;
    match a.get("num_groups") {
        None => Err("@onnx.GroupNormalization requires the attribute `num_groups`".into()),
        Some(AttrValue::Int(g)) if *g < 1 => {
            Err(format!("attribute `num_groups` of @onnx.GroupNormalization must be at least 1, found {g}"))
        }
        _ => Ok(()),
    }
}

/// GroupNormalization's geometry: (N, groups, channels per group, spatial elements), and
/// whether scale and bias are per group (opset 18) rather than per channel.
pub(crate) fn group_norm_plan(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<([usize; 4], bool), String> {
    validate_group_norm(a)?;
    let x = float_input(ins, 0, "X", "GroupNormalization")?;
    if x.shape.len() < 2 {
        return Err(format!("input 1 (X) must have rank ≥ 2 (N, C, …), found rank {}", x.shape.len()));
    }
    let g = a.int("num_groups", 1).max(1) as usize;
    let c = x.shape[1].max(0) as usize;
    if !c.is_multiple_of(g) {
        return Err(format!("the {c} channels are not a multiple of num_groups {g}"));
    }
    let mut per_group = false;
    for (i, name) in [(1, "scale"), (2, "bias")] {
        let t = float_input(ins, i, name, "GroupNormalization")?;
        if t.dtype != x.dtype {
            return Err(format!("input {} ({name}) is {}, but X is {}", i + 1, t.dtype, x.dtype));
        }
        let n = if t.shape.len() == 1 { Some(t.shape[0].max(0) as usize) } else { None };
        match n {
            Some(n) if n == c => {}
            Some(n) if n == g => per_group = true,
            _ => {
                return Err(format!(
                    "input {} ({name}) has shape {:?}, expected [{c}] (the channels) or [{g}] (the groups, opset 18)",
                    i + 1,
                    t.shape
                ))
            }
        }
    }
    let n = x.shape[0].max(0) as usize;
    Ok(([n, g, c / g, count(&x.shape[2..])], per_group && g != c))
}

pub(crate) fn infer_group_norm(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    group_norm_plan(ins, a)?;
    let x = input(ins, 0, "X")?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

pub(crate) fn validate_lp_norm(a: &Attrs) -> Result<(), String> {
    match a.get("p") {
        None | Some(AttrValue::Int(1 | 2)) => Ok(()),
        Some(v) => Err(format!("attribute `p` of @onnx.LpNormalization must be 1 or 2, found {}", v.describe())),
    }
}

/// A tensor as (outer, axis length, inner) around one axis.
pub(crate) type Split = [usize; 3];

/// LpNormalization's split of X around its axis.
pub(crate) fn lp_split(x: &[i64], a: &Attrs) -> Result<Split, String> {
    if x.is_empty() {
        return Err("input 1 (input) must have rank ≥ 1, found a scalar".into());
    }
    let axis = norm_axis(a.int("axis", -1), x.len())?;
    Ok([count(&x[..axis]), count(&x[axis..=axis]), count(&x[axis + 1..])])
}

pub(crate) fn infer_lp_norm(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    validate_lp_norm(a)?;
    let x = float_input(ins, 0, "input", "LpNormalization")?;
    lp_split(x.shape, a)?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

pub(crate) fn validate_mvn(a: &Attrs) -> Result<(), String> {
    if let Some(axes) = a.ints("axes") {
        let mut seen = axes.to_vec();
        seen.sort_unstable();
        if seen.windows(2).any(|w| w[0] == w[1]) {
            return Err(format!("attribute `axes` of @onnx.MeanVarianceNormalization repeats an axis: {axes:?}"));
        }
    }
    Ok(())
}

/// Which of X's dims MeanVarianceNormalization reduces.
pub(crate) fn mvn_axes(x: &[i64], a: &Attrs) -> Result<Vec<bool>, String> {
    let axes = a.ints("axes").map_or_else(|| vec![0, 2, 3], <[i64]>::to_vec);
    let mut red = vec![false; x.len()];
    for &ax in &axes {
        let k = norm_axis(ax, x.len()).map_err(|e| format!("attribute `axes` {axes:?}: {e}"))?;
        if red[k] {
            return Err(format!("attribute `axes` {axes:?} names axis {k} twice"));
        }
        red[k] = true;
    }
    Ok(red)
}

pub(crate) fn infer_mvn(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    validate_mvn(a)?;
    let x = float_input(ins, 0, "X", "MeanVarianceNormalization")?;
    mvn_axes(x.shape, a)?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}
