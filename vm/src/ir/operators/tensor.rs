//! Operator schemas of the tensor family: attributes, validation and shape inference
//! (the kernels are in `crate::ops::tensor`).

use super::elementwise::flag_attr;
use super::shape::input;
use crate::ir::attrs::*;
use crate::ir::host_tensor::{load_i64, HostTensor};
use crate::ir::minifloat::RoundMode;
use crate::ir::schema::*;
use crate::ir::types::DType;

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(Concat, in 1..=64, out 1..=1, attrs &[attr!("axis", Int)], validate validate_concat, infer infer_concat, "joins its inputs along `axis` (required; negative counts from the back)"),
    op!(Transpose, in 1..=1, out 1..=1, attrs &[attr!("perm", Ints)], validate validate_transpose,
        infer infer_transpose, "permutes the axes: output axis i is input axis `perm[i]` \
        (default: reversed)"),
    op!(Reshape, in 1..=2, out 1..=1, attrs &[attr!("shape", Ints), attr!("allowzero", Int)],
        validate validate_reshape, infer infer_reshape, "reshapes to input 2 (i64; the `shape` \
        attribute before opset 5): 0 copies the input dim unless `allowzero` = 1, one -1 is inferred"),
    op!(Flatten, in 1..=1, out 1..=1, attrs &[attr!("axis", Int)], infer infer_flatten,
        "reshapes to 2-D [prod(dims[..axis]), prod(dims[axis..])]; `axis` default 1, in [-rank, rank]"),
    op!(Squeeze, in 1..=2, out 1..=1, attrs &[attr!("axes", Ints)], infer infer_squeeze,
        "removes the size-1 axes listed in `axes` (attribute before opset 13, i64 input 2 from 13); \
        without axes (or with an empty list) every size-1 axis"),
    op!(Unsqueeze, in 1..=2, out 1..=1, attrs &[attr!("axes", Ints)], infer infer_unsqueeze,
        "inserts size-1 axes at the output positions `axes` (attribute before opset 13, i64 input 2 from 13)"),
    op!(Split, in 1..=2, out 1..=64,
        attrs &[attr!("axis", Int), attr!("split", Ints), attr!("num_outputs", Int), attr!("outputs", Int)],
        validate validate_split, infer infer_split, "splits along `axis` (default 0) into parts \
        sized by `split` (attribute before opset 13, i64 input 2 from 13), into `num_outputs` parts (opset 18; \
        the last may be smaller), or else into `outputs` equal parts: `outputs` is an rxvm attribute, the number \
        of outputs the call names, which the importer/assembler passes when no sizes are given"),
    op!(Slice, in 1..=5, out 1..=1, attrs &[attr!("starts", Ints), attr!("ends", Ints), attr!("axes", Ints)],
        validate validate_slice, infer infer_slice, "takes elements starts..ends (step `steps`) \
        along `axes`: attributes before opset 10, i64 inputs 2-5 (starts, ends, axes, steps) from 10; negative \
        indices count from the back, out-of-range ones clamp, negative steps walk backwards"),
    op!(Gather, in 2..=2, out 1..=1, attrs &[attr!("axis", Int)], infer infer_gather,
        "picks the entries `indices` (input 2, i64 or i32, any shape; negative counts from the back) along \
        `axis` (default 0)"),
    op!(Tile, in 2..=2, out 1..=1, attrs &[], infer infer_tile,
        "repeats the input `repeats[i]` times along each axis i (input 2, i64)"),
    op!(Pad, in 1..=4, out 1..=1,
        attrs &[attr!("mode", Str), attr!("pads", Ints), attr!("paddings", Ints), attr!("value", Float)],
        validate validate_pad, infer infer_pad, "pads by `pads` [begin..., end...] (attribute \
        before opset 11, i64 input 2 from 11; negative crops) in `mode` constant (value: `value` attribute or \
        input 3), reflect, edge or wrap; optional input 4 (opset 18) lists the axes the pads apply to"),
    op!(Shape, in 1..=1, out 1..=1, attrs &[attr!("start", Int), attr!("end", Int)], infer infer_shape, "the input's shape as a 1-D i64 tensor, dims `start`..`end` (default all; negative \
        counts from the back, clamped)"),
    op!(ConstantOfShape, in 1..=1, out 1..=1, attrs &[attr!("value", Float), attr!("dtype", Str)],
        validate validate_constant_of_shape, infer infer_constant_of_shape,
        "a tensor of the shape given by input 1 (i64) filled with `value` (default 0.0); rxvm takes the ONNX \
        tensor attribute as a number `value` (an integer is stored exactly) and a dtype name `dtype` (default \
        \"f32\")"),
    op!(Cast, in 1..=1, out 1..=1, attrs &[attr!("to", Int), attr!("saturate", Int), attr!("round_mode", Str)],
        validate validate_cast, infer infer_cast,
        "converts to the ONNX TensorProto data type `to` (1 f32, 2 u8, 3 i8, 4 u16, 5 i16, \
        6 i32, 7 i64, 9 bool, 10 f16, 11 f64, 12 u32, 13 u64, 16 bf16, 17 f8e4m3fn, 18 f8e4m3fnuz, 19 f8e5m2, \
        20 f8e5m2fnuz, 24 f8e8m0); floats to ints truncate, to bool is != 0, to floats round to nearest even; \
        to float8, `saturate` 1 (default) clamps to the largest finite value, 0 overflows to inf or NaN; to \
        f8e8m0, `round_mode` up (default), down or nearest"),
    op!(CastLike, in 2..=2, out 1..=1, attrs &[attr!("saturate", Int), attr!("round_mode", Str)],
        validate validate_cast_like, infer infer_cast_like,
        "converts input 1 to the dtype of input 2 (whose values are not read), as Cast does (`saturate`, \
        `round_mode` as for Cast)"),
];

// ---------------------------------------------------------------------------------------
// Shared helpers.

/// The optional input at `i`.
pub(crate) fn opt_in<'b, 'a>(ins: &'b [Option<TensorInfo<'a>>], i: usize) -> Option<&'b TensorInfo<'a>> {
    ins.get(i).and_then(|x| x.as_ref())
}

/// The product of `dims`, an error for a negative dim or overflow.
pub(crate) fn prod(dims: &[i64], op: &str) -> Result<i64, String> {
    dims.iter()
        .try_fold(1i64, |a, &d| if d < 0 { None } else { a.checked_mul(d) })
        .ok_or_else(|| format!("{op}: invalid or too large shape {dims:?}"))
}

/// Checks that `shape` has no negative dims and that its element count fits.
pub(crate) fn check_shape(shape: &[i64], op: &str) -> Result<(), String> {
    prod(shape, op).map(|_| ())
}

/// Checks that a tensor's data holds exactly its shape's elements.
pub(crate) fn check_data(t: &HostTensor, op: &str) -> Result<(), String> {
    check_bytes(t.dtype, &t.shape, t.data.len(), op)
}

/// Whether `len` bytes are what a `dtype[shape]` tensor needs.
pub(crate) fn check_bytes(dtype: DType, shape: &[i64], len: usize, op: &str) -> Result<(), String> {
    let need = (prod(shape, op)? as u128) * dtype.size() as u128;
    if len as u128 != need {
        return Err(format!("{op}: a {dtype}{shape:?} tensor needs {need} bytes, found {len}"));
    }
    Ok(())
}

/// The values of an index tensor (i64 or i32, rank 0 or 1).
pub(crate) fn ints_of(t: &HostTensor, op: &str, what: &str) -> Result<Vec<i64>, String> {
    if !matches!(t.dtype, DType::I64 | DType::I32) {
        return Err(format!("{op}: the {what} input must be an i64 (or i32) tensor, found {}", t.dtype));
    }
    if t.shape.len() > 1 {
        return Err(format!("{op}: the {what} input must be 1-D, found shape {:?}", t.shape));
    }
    check_data(t, op)?;
    Ok(t.data.chunks_exact(t.dtype.size()).map(|c| load_i64(t.dtype, c)).collect())
}

/// The values of an index input, which inference needs.
pub(crate) fn value_ints(t: &TensorInfo, op: &str, what: &str) -> Result<Vec<i64>, String> {
    let v = t.value.ok_or_else(|| format!("{op} needs the value of its {what} input to infer the output shape"))?;
    ints_of(v, op, what)
}

/// A list given either as the attribute `name` (older opsets) or as input `i` (newer ones).
pub(crate) fn attr_or_input(
    ins: &[Option<TensorInfo>],
    attrs: &Attrs,
    i: usize,
    name: &str,
    op: &str,
) -> Result<Option<Vec<i64>>, String> {
    match (attrs.ints(name), opt_in(ins, i)) {
        (Some(_), Some(_)) => Err(format!(
            "{op}: give `{name}` either as an attribute (older opsets) or as input {} (newer opsets), not both",
            i + 1
        )),
        (Some(a), None) => Ok(Some(a.to_vec())),
        (None, Some(t)) => value_ints(t, op, name).map(Some),
        (None, None) => Ok(None),
    }
}

/// Resolves a possibly negative axis against `rank`.
pub(crate) fn norm_axis(axis: i64, rank: usize, op: &str) -> Result<usize, String> {
    let r = rank as i64;
    if rank == 0 {
        return Err(format!("{op}: axis {axis} is out of range: the input is a scalar (rank 0) and has no axes"));
    }
    if !(-r..r).contains(&axis) {
        return Err(format!("{op}: axis {axis} is out of range for rank {rank} (expected {}..={})", -r, r - 1));
    }
    Ok(axis.rem_euclid(r) as usize)
}

/// Resolves a list of axes, rejecting duplicates.
pub(crate) fn norm_axes(axes: &[i64], rank: usize, op: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::with_capacity(axes.len());
    let mut seen = vec![false; rank];
    for &a in axes {
        let n = norm_axis(a, rank, op)?;
        if std::mem::replace(&mut seen[n], true) {
            return Err(format!("{op}: axis {a} is listed twice (axes {axes:?}, rank {rank})"));
        }
        out.push(n);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Concat.

pub(crate) fn validate_concat(attrs: &Attrs) -> Result<(), String> {
    match attrs.get("axis") {
        Some(_) => Ok(()),
        None => Err("Concat needs the `axis` attribute".into()),
    }
}

pub(crate) fn plan_concat(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<(usize, OutInfo), String> {
    const OP: &str = "Concat";
    validate_concat(attrs)?;
    let first = input(ins, 0, OP)?;
    check_shape(first.shape, OP)?;
    let axis = norm_axis(attrs.int("axis", 0), first.shape.len(), OP)?;
    let mut out = first.shape.to_vec();
    out[axis] = 0;
    for i in 0..ins.len() {
        let t = input(ins, i, OP)?;
        check_shape(t.shape, OP)?;
        if t.dtype != first.dtype {
            return Err(format!("{OP}: input {} is {}, but input 1 is {}", i + 1, t.dtype, first.dtype));
        }
        let same_rest = t.shape.len() == first.shape.len()
            && t.shape.iter().zip(first.shape).enumerate().all(|(d, (a, b))| d == axis || a == b);
        if !same_rest {
            return Err(format!(
                "{OP}: input {} has shape {:?}, which does not match input 1's {:?} outside axis {axis}",
                i + 1,
                t.shape,
                first.shape
            ));
        }
        out[axis] = out[axis].checked_add(t.shape[axis]).ok_or_else(|| format!("{OP}: output is too large"))?;
    }
    check_shape(&out, OP)?;
    Ok((axis, (first.dtype, out)))
}

pub(crate) fn infer_concat(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![plan_concat(ins, attrs)?.1])
}

// ---------------------------------------------------------------------------------------
// Transpose.

pub(crate) fn check_perm(perm: &[i64], op: &str) -> Result<(), String> {
    let n = perm.len() as i64;
    for (i, &p) in perm.iter().enumerate() {
        if !(0..n).contains(&p) || perm[..i].contains(&p) {
            return Err(format!("{op}: perm {perm:?} is not a permutation of 0..{n}"));
        }
    }
    Ok(())
}

pub(crate) fn validate_transpose(attrs: &Attrs) -> Result<(), String> {
    attrs.ints("perm").map_or(Ok(()), |p| check_perm(p, "Transpose"))
}

pub(crate) fn plan_transpose(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<(Vec<usize>, OutInfo), String> {
    const OP: &str = "Transpose";
    let x = input(ins, 0, OP)?;
    check_shape(x.shape, OP)?;
    let r = x.shape.len();
    let perm: Vec<usize> = match attrs.ints("perm") {
        Some(p) => {
            check_perm(p, OP)?;
            if p.len() != r {
                return Err(format!("{OP}: perm {p:?} has {} entries, but the input has rank {r}", p.len()));
            }
            p.iter().map(|&v| v as usize).collect()
        }
        None => (0..r).rev().collect(),
    };
    let out = perm.iter().map(|&p| x.shape[p]).collect();
    Ok((perm, (x.dtype, out)))
}

pub(crate) fn infer_transpose(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![plan_transpose(ins, attrs)?.1])
}

// ---------------------------------------------------------------------------------------
// Reshape, Flatten, Squeeze, Unsqueeze: new shapes over the same bytes.

pub(crate) fn check_reshape_spec(spec: &[i64], allowzero: bool, op: &str) -> Result<(), String> {
    if let Some(&d) = spec.iter().find(|&&d| d < -1) {
        return Err(format!("{op}: shape {spec:?} has the negative size {d} (only one -1, inferred, is allowed)"));
    }
    if spec.iter().filter(|&&d| d == -1).count() > 1 {
        return Err(format!("{op}: shape {spec:?} has more than one -1"));
    }
    if allowzero && spec.contains(&0) && spec.contains(&-1) {
        return Err(format!("{op}: with allowzero = 1, shape {spec:?} cannot have both 0 and -1"));
    }
    Ok(())
}

pub(crate) fn validate_reshape(attrs: &Attrs) -> Result<(), String> {
    let allowzero = attrs.int("allowzero", 0);
    if !matches!(allowzero, 0 | 1) {
        return Err(format!("Reshape: allowzero must be 0 or 1, found {allowzero}"));
    }
    attrs.ints("shape").map_or(Ok(()), |s| check_reshape_spec(s, allowzero == 1, "Reshape"))
}

pub(crate) fn infer_reshape(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    const OP: &str = "Reshape";
    validate_reshape(attrs)?;
    let x = input(ins, 0, OP)?;
    let total = prod(x.shape, OP)?;
    let spec = attr_or_input(ins, attrs, 1, "shape", OP)?
        .ok_or_else(|| format!("{OP} needs a shape: input 2 (or the `shape` attribute before opset 5)"))?;
    let allowzero = attrs.int("allowzero", 0) == 1;
    check_reshape_spec(&spec, allowzero, OP)?;
    let mut out = Vec::with_capacity(spec.len());
    for (i, &d) in spec.iter().enumerate() {
        out.push(match d {
            0 if !allowzero => *x.shape.get(i).ok_or_else(|| {
                format!(
                    "{OP}: shape[{i}] is 0 (copy the input dim), but the input {:?} has rank {}",
                    x.shape,
                    x.shape.len()
                )
            })?,
            d => d,
        });
    }
    let known = out.iter().filter(|&&d| d != -1).try_fold(1i64, |a, &d| a.checked_mul(d));
    let known = known.ok_or_else(|| format!("{OP}: shape {spec:?} is too large"))?;
    if let Some(slot) = out.iter().position(|&d| d == -1) {
        if known == 0 || total % known != 0 {
            return Err(format!(
                "{OP}: cannot reshape {:?} ({total} elements) into {spec:?}: the -1 cannot be inferred",
                x.shape
            ));
        }
        out[slot] = total / known;
    } else if known != total {
        return Err(format!("{OP}: cannot reshape {:?} ({total} elements) into {out:?} ({known} elements)", x.shape));
    }
    Ok(vec![(x.dtype, out)])
}

pub(crate) fn infer_flatten(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    const OP: &str = "Flatten";
    let x = input(ins, 0, OP)?;
    check_shape(x.shape, OP)?;
    let (axis, r) = (attrs.int("axis", 1), x.shape.len() as i64);
    if !(-r..=r).contains(&axis) {
        return Err(format!("{OP}: axis {axis} is out of range for rank {r} (expected {}..={r})", -r));
    }
    let a = (if axis < 0 { axis + r } else { axis }) as usize;
    Ok(vec![(x.dtype, vec![prod(&x.shape[..a], OP)?, prod(&x.shape[a..], OP)?])])
}

pub(crate) fn infer_squeeze(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    const OP: &str = "Squeeze";
    let x = input(ins, 0, OP)?;
    check_shape(x.shape, OP)?;
    let out = match attr_or_input(ins, attrs, 1, "axes", OP)?.filter(|a| !a.is_empty()) {
        None => x.shape.iter().copied().filter(|&d| d != 1).collect(),
        Some(axes) => {
            let axes = norm_axes(&axes, x.shape.len(), OP)?;
            if let Some(&a) = axes.iter().find(|&&a| x.shape[a] != 1) {
                return Err(format!(
                    "{OP}: axis {a} of {:?} has size {}; only size-1 axes can be squeezed",
                    x.shape, x.shape[a]
                ));
            }
            x.shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect()
        }
    };
    Ok(vec![(x.dtype, out)])
}

pub(crate) fn infer_unsqueeze(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    const OP: &str = "Unsqueeze";
    let x = input(ins, 0, OP)?;
    check_shape(x.shape, OP)?;
    let axes = attr_or_input(ins, attrs, 1, "axes", OP)?
        .ok_or_else(|| format!("{OP} needs `axes`: the attribute before opset 13, input 2 from opset 13"))?;
    let n = x.shape.len() + axes.len();
    // Axes index the output, whose rank is the input's plus the number of axes.
    let axes = norm_axes(&axes, n, OP).map_err(|e| e.replace("for rank", "for the output rank"))?;
    let mut inserted = vec![false; n];
    for &a in &axes {
        inserted[a] = true;
    }
    let mut dims = x.shape.iter();
    let out = inserted.iter().map(|&ins| if ins { 1 } else { dims.next().copied().unwrap_or(1) }).collect();
    Ok(vec![(x.dtype, out)])
}

// ---------------------------------------------------------------------------------------
// Split.

pub(crate) const MAX_SPLIT: i64 = 64;

pub(crate) fn validate_split(attrs: &Attrs) -> Result<(), String> {
    const OP: &str = "Split";
    let split = attrs.ints("split");
    let num = attrs.get("num_outputs").map(|_| attrs.int("num_outputs", 0));
    let outputs = attrs.get("outputs").map(|_| attrs.int("outputs", 0));
    for (name, v) in [("num_outputs", num), ("outputs", outputs)] {
        if let Some(v) = v.filter(|v| !(1..=MAX_SPLIT).contains(v)) {
            return Err(format!("{OP}: `{name}` must be in 1..={MAX_SPLIT}, found {v}"));
        }
    }
    if let Some(s) = split {
        if s.len() as i64 > MAX_SPLIT {
            return Err(format!("{OP}: `split` has {} sizes; at most {MAX_SPLIT} outputs are supported", s.len()));
        }
        if let Some(&d) = s.iter().find(|&&d| d < 0) {
            return Err(format!("{OP}: `split` {s:?} has the negative size {d}"));
        }
        if num.is_some() && !s.is_empty() {
            return Err(format!("{OP}: give either `split` or `num_outputs`, not both"));
        }
        if let Some(o) = outputs.filter(|&o| !s.is_empty() && o != s.len() as i64) {
            return Err(format!("{OP}: `split` {s:?} gives {} outputs, but `outputs` is {o}", s.len()));
        }
    }
    if let (Some(n), Some(o)) = (num, outputs) {
        if n != o {
            return Err(format!("{OP}: `num_outputs` is {n}, but `outputs` is {o}"));
        }
    }
    Ok(())
}

pub(crate) fn plan_split(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<(usize, Vec<i64>, Vec<OutInfo>), String> {
    const OP: &str = "Split";
    validate_split(attrs)?;
    let x = input(ins, 0, OP)?;
    check_shape(x.shape, OP)?;
    let axis = norm_axis(attrs.int("axis", 0), x.shape.len(), OP)?;
    let dim = x.shape[axis];
    let split = attr_or_input(ins, attrs, 1, "split", OP)?.filter(|s| !s.is_empty());
    let num = attrs.get("num_outputs").map(|_| attrs.int("num_outputs", 0));
    let outputs = attrs.get("outputs").map(|_| attrs.int("outputs", 0));
    let sizes = match (split, num) {
        (Some(_), Some(_)) => return Err(format!("{OP}: give either split sizes or `num_outputs`, not both")),
        (Some(s), None) => {
            if let Some(&d) = s.iter().find(|&&d| d < 0) {
                return Err(format!("{OP}: split {s:?} has the negative size {d}"));
            }
            if s.len() as i64 > MAX_SPLIT {
                return Err(format!("{OP}: split has {} sizes; at most {MAX_SPLIT} outputs are supported", s.len()));
            }
            if let Some(o) = outputs.filter(|&o| o != s.len() as i64) {
                return Err(format!("{OP}: split {s:?} gives {} outputs, but `outputs` is {o}", s.len()));
            }
            let sum = s.iter().try_fold(0i64, |a, &d| a.checked_add(d));
            if sum != Some(dim) {
                return Err(format!("{OP}: split sizes {s:?} do not add up to {dim}, the size of axis {axis}"));
            }
            s
        }
        (None, Some(n)) => {
            let chunk = dim / n + (dim % n != 0) as i64;
            let last = chunk.checked_mul(n - 1).map_or(-1, |c| dim - c);
            if last < 0 {
                return Err(format!("{OP}: axis {axis} of size {dim} cannot be split into {n} chunks of {chunk}"));
            }
            let mut s = vec![chunk; n as usize];
            s[n as usize - 1] = last;
            s
        }
        (None, None) => {
            let n = outputs.ok_or_else(|| {
                format!(
                    "{OP} needs split sizes (the `split` attribute before opset 13, input 2 from 13), \
                     `num_outputs` (opset 18) or `outputs` (the number of outputs, for an equal split)"
                )
            })?;
            if dim % n != 0 {
                return Err(format!("{OP}: axis {axis} of size {dim} does not split into {n} equal parts"));
            }
            vec![dim / n; n as usize]
        }
    };
    let outs = sizes
        .iter()
        .map(|&s| {
            let mut shape = x.shape.to_vec();
            shape[axis] = s;
            (x.dtype, shape)
        })
        .collect();
    Ok((axis, sizes, outs))
}

pub(crate) fn infer_split(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(plan_split(ins, attrs)?.2)
}

// ---------------------------------------------------------------------------------------
// Slice.

pub(crate) fn validate_slice(attrs: &Attrs) -> Result<(), String> {
    const OP: &str = "Slice";
    let (s, e, a) = (attrs.ints("starts"), attrs.ints("ends"), attrs.ints("axes"));
    match (s, e) {
        (Some(s), Some(e)) if s.len() != e.len() => {
            Err(format!("{OP}: `starts` has {} values but `ends` has {}", s.len(), e.len()))
        }
        (Some(s), Some(_)) => match a {
            Some(a) if a.len() != s.len() => {
                Err(format!("{OP}: `axes` has {} values but `starts` has {}", a.len(), s.len()))
            }
            _ => Ok(()),
        },
        (None, None) if a.is_none() => Ok(()),
        _ => Err(format!("{OP}: the attribute form (before opset 10) needs both `starts` and `ends`")),
    }
}

/// Per input dim: first index, step and count.
pub(crate) type SlicePlan = Vec<(i64, i64, i64)>;

pub(crate) fn plan_slice(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<(SlicePlan, OutInfo), String> {
    const OP: &str = "Slice";
    validate_slice(attrs)?;
    let x = input(ins, 0, OP)?;
    check_shape(x.shape, OP)?;
    let r = x.shape.len();
    let attr_form = attrs.ints("starts").is_some();
    let input_form = (1..5).any(|i| opt_in(ins, i).is_some());
    let (starts, ends, axes, steps) = match (attr_form, input_form) {
        (true, true) => {
            return Err(format!(
                "{OP}: give starts/ends either as attributes (before opset 10) or as inputs (from opset 10), not both"
            ))
        }
        (true, false) => {
            let s = attrs.ints("starts").unwrap_or_default().to_vec();
            (s, attrs.ints("ends").unwrap_or_default().to_vec(), attrs.ints("axes").map(<[i64]>::to_vec), None)
        }
        (false, _) => {
            let (Some(s), Some(e)) = (opt_in(ins, 1), opt_in(ins, 2)) else {
                return Err(format!(
                    "{OP} needs starts and ends: inputs 2 and 3 (attributes `starts` and `ends` before opset 10)"
                ));
            };
            let axes = opt_in(ins, 3).map(|t| value_ints(t, OP, "axes")).transpose()?;
            let steps = opt_in(ins, 4).map(|t| value_ints(t, OP, "steps")).transpose()?;
            (value_ints(s, OP, "starts")?, value_ints(e, OP, "ends")?, axes, steps)
        }
    };
    let n = starts.len();
    let count_err = |what: &str, k: usize| format!("{OP}: {what} has {k} values, but starts has {n}");
    if ends.len() != n {
        return Err(count_err("ends", ends.len()));
    }
    let axes = axes.unwrap_or_else(|| (0..n as i64).collect());
    if axes.len() != n {
        return Err(count_err("axes", axes.len()));
    }
    let steps = steps.unwrap_or_else(|| vec![1; n]);
    if steps.len() != n {
        return Err(count_err("steps", steps.len()));
    }
    let axes = norm_axes(&axes, r, OP)?;
    let mut plan: SlicePlan = x.shape.iter().map(|&d| (0, 1, d)).collect();
    for (i, &a) in axes.iter().enumerate() {
        let (dim, step) = (x.shape[a], steps[i]);
        let wrap = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
        let (s, e) = (wrap(starts[i]), wrap(ends[i]));
        let (s, count) = match step {
            0 => return Err(format!("{OP}: the step for axis {a} is 0")),
            st if st > 0 => {
                let (s, e) = (s.clamp(0, dim), e.clamp(0, dim));
                (s, if e > s { (e - s - 1) / st + 1 } else { 0 })
            }
            st => {
                // Clamped to [0, dim - 1] and [-1, dim - 1] (`dim - 1` may be -1).
                let (s, e) = (s.max(0).min(dim - 1), e.max(-1).min(dim - 1));
                (s, if s > e { ((s as i128 - e as i128 - 1) / -(st as i128) + 1) as i64 } else { 0 })
            }
        };
        plan[a] = (if count > 0 { s } else { 0 }, step, count);
    }
    let out = plan.iter().map(|p| p.2).collect();
    Ok((plan, (x.dtype, out)))
}

pub(crate) fn infer_slice(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![plan_slice(ins, attrs)?.1])
}

// ---------------------------------------------------------------------------------------
// Gather.

pub(crate) fn plan_gather(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<(usize, OutInfo), String> {
    const OP: &str = "Gather";
    let (x, idx) = (input(ins, 0, OP)?, input(ins, 1, OP)?);
    check_shape(x.shape, OP)?;
    check_shape(idx.shape, OP)?;
    if !matches!(idx.dtype, DType::I64 | DType::I32) {
        return Err(format!("{OP}: indices must be i64 or i32, found {}", idx.dtype));
    }
    let axis = norm_axis(attrs.int("axis", 0), x.shape.len(), OP)?;
    let out: Vec<i64> = x.shape[..axis].iter().chain(idx.shape).chain(&x.shape[axis + 1..]).copied().collect();
    check_shape(&out, OP)?;
    Ok((axis, (x.dtype, out)))
}

pub(crate) fn infer_gather(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![plan_gather(ins, attrs)?.1])
}

// ---------------------------------------------------------------------------------------
// Tile.

pub(crate) fn plan_tile(ins: &[Option<TensorInfo>]) -> Result<(Vec<i64>, OutInfo), String> {
    const OP: &str = "Tile";
    let x = input(ins, 0, OP)?;
    check_shape(x.shape, OP)?;
    let reps = value_ints(input(ins, 1, OP)?, OP, "repeats")?;
    if reps.len() != x.shape.len() {
        return Err(format!(
            "{OP}: repeats {reps:?} has {} values, but the input has rank {}",
            reps.len(),
            x.shape.len()
        ));
    }
    if let Some(&r) = reps.iter().find(|&&r| r < 0) {
        return Err(format!("{OP}: repeats {reps:?} has the negative count {r}"));
    }
    let out = x.shape.iter().zip(&reps).map(|(&d, &r)| d.checked_mul(r)).collect::<Option<Vec<i64>>>();
    let out = out.ok_or_else(|| format!("{OP}: output is too large"))?;
    check_shape(&out, OP)?;
    Ok((reps, (x.dtype, out)))
}

pub(crate) fn infer_tile(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![plan_tile(ins)?.1])
}

// ---------------------------------------------------------------------------------------
// Pad.

pub(crate) const PAD_MODES: [&str; 4] = ["constant", "reflect", "edge", "wrap"];

pub(crate) fn validate_pad(attrs: &Attrs) -> Result<(), String> {
    const OP: &str = "Pad";
    if let Some(m) = attrs.str("mode").filter(|m| !PAD_MODES.contains(m)) {
        return Err(format!("{OP}: mode must be \"constant\", \"reflect\", \"edge\" or \"wrap\", found {m:?}"));
    }
    if attrs.ints("pads").is_some() && attrs.ints("paddings").is_some() {
        return Err(format!("{OP}: give `pads` or its opset-1 name `paddings`, not both"));
    }
    if let Some(p) = attrs.ints("pads").or(attrs.ints("paddings")).filter(|p| p.len() % 2 != 0) {
        return Err(format!("{OP}: pads {p:?} must have an even number of values (begins, then ends)"));
    }
    Ok(())
}

pub(crate) struct PadPlan {
    pub(crate) mode: &'static str,
    /// Per dim: elements cropped at the begin, kept, added at the begin.
    pub(crate) crop: Vec<i64>,
    pub(crate) kept: Vec<i64>,
    pub(crate) add: Vec<i64>,
    pub(crate) out: OutInfo,
}

pub(crate) fn plan_pad(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<PadPlan, String> {
    const OP: &str = "Pad";
    validate_pad(attrs)?;
    let x = input(ins, 0, OP)?;
    check_shape(x.shape, OP)?;
    let r = x.shape.len();
    let mode = attrs.str("mode").unwrap_or("constant");
    let mode = PAD_MODES.into_iter().find(|m| *m == mode).ok_or_else(|| format!("{OP}: unknown mode {mode:?}"))?;
    let pads_attr = attrs.ints("pads").or(attrs.ints("paddings"));
    let pads = match (pads_attr, opt_in(ins, 1)) {
        (Some(_), Some(_)) => {
            return Err(format!("{OP}: give pads either as an attribute (before opset 11) or as input 2, not both"))
        }
        (Some(p), None) => p.to_vec(),
        (None, Some(t)) => value_ints(t, OP, "pads")?,
        (None, None) => {
            return Err(format!("{OP} needs pads: input 2 (the `pads` attribute before opset 11)"));
        }
    };
    if let Some(c) = opt_in(ins, 2) {
        if attrs.get("value").is_some() {
            return Err(format!("{OP}: give the constant either as the `value` attribute or as input 3, not both"));
        }
        if c.dtype != x.dtype || prod(c.shape, OP)? != 1 {
            return Err(format!(
                "{OP}: constant_value must be a single {} element, found {}{:?}",
                x.dtype, c.dtype, c.shape
            ));
        }
    }
    let axes = match opt_in(ins, 3) {
        Some(t) => norm_axes(&value_ints(t, OP, "axes")?, r, OP)?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(format!(
            "{OP}: pads {pads:?} has {} values, but {} axes need {}",
            pads.len(),
            axes.len(),
            2 * axes.len()
        ));
    }
    let (mut begin, mut end) = (vec![0i64; r], vec![0i64; r]);
    for (i, &a) in axes.iter().enumerate() {
        (begin[a], end[a]) = (pads[i], pads[i + axes.len()]);
    }
    let mut p = PadPlan { mode, crop: vec![], kept: vec![], add: vec![], out: (x.dtype, vec![]) };
    for d in 0..r {
        let n = x.shape[d];
        let (c0, c1) = (begin[d].min(0).unsigned_abs(), end[d].min(0).unsigned_abs());
        let cropped = c0.checked_add(c1).and_then(|c| i64::try_from(c).ok());
        let kept = cropped.and_then(|c| n.checked_sub(c)).filter(|&k| k >= 0);
        let kept = kept.ok_or_else(|| {
            format!("{OP}: pads {} and {} crop more than the {n} elements of axis {d}", begin[d], end[d])
        })?;
        let (a0, a1) = (begin[d].max(0), end[d].max(0));
        if mode != "constant" && kept == 0 && (a0 > 0 || a1 > 0) {
            return Err(format!("{OP}: axis {d} is empty, so it cannot be padded in {mode} mode"));
        }
        let o =
            kept.checked_add(a0).and_then(|v| v.checked_add(a1)).ok_or_else(|| format!("{OP}: output too large"))?;
        p.crop.push(c0 as i64);
        p.kept.push(kept);
        p.add.push(a0);
        p.out.1.push(o);
    }
    check_shape(&p.out.1, OP)?;
    Ok(p)
}

pub(crate) fn infer_pad(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![plan_pad(ins, attrs)?.out])
}

// ---------------------------------------------------------------------------------------
// Shape.

pub(crate) fn shape_range(rank: usize, attrs: &Attrs) -> (usize, usize) {
    let r = rank as i64;
    let norm = |v: i64| (if v < 0 { v.saturating_add(r) } else { v }).clamp(0, r) as usize;
    let (s, e) = (norm(attrs.int("start", 0)), norm(attrs.int("end", r)));
    (s, e.max(s))
}

/// The value of `Shape` of a tensor of shape `x`: its dims from `start` to `end`. It
/// depends on the shape alone, so a compiler that knows the shape knows the value.
pub fn shape_value(x: &[i64], attrs: &Attrs) -> Vec<i64> {
    let (s, e) = shape_range(x.len(), attrs);
    x[s..e].to_vec()
}

pub(crate) fn infer_shape(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "Shape")?;
    let (s, e) = shape_range(x.shape.len(), attrs);
    Ok(vec![(DType::I64, vec![(e - s) as i64])])
}

// ---------------------------------------------------------------------------------------
// ConstantOfShape.

pub(crate) fn constant_dtype(attrs: &Attrs) -> Result<DType, String> {
    match attrs.str("dtype") {
        None => Ok(DType::F32),
        Some(n) => DType::from_name(n).ok_or_else(|| {
            let names: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
            format!("ConstantOfShape: unknown dtype {n:?}; expected one of {}", names.join(", "))
        }),
    }
}

pub(crate) fn validate_constant_of_shape(attrs: &Attrs) -> Result<(), String> {
    let dtype = constant_dtype(attrs)?;
    if let Some(AttrValue::Float(v)) = attrs.get("value") {
        if !dtype.is_float() && dtype != DType::Bool && (v.fract() != 0.0 || !v.is_finite()) {
            return Err(format!("ConstantOfShape: value {v} is not an integer, but dtype is {dtype}"));
        }
    }
    Ok(())
}

pub(crate) fn infer_constant_of_shape(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    const OP: &str = "ConstantOfShape";
    let shape = value_ints(input(ins, 0, OP)?, OP, "shape")?;
    if let Some(&d) = shape.iter().find(|&&d| d < 0) {
        return Err(format!("{OP}: shape {shape:?} has the negative size {d}"));
    }
    check_shape(&shape, OP)?;
    Ok(vec![(constant_dtype(attrs)?, shape)])
}

// ---------------------------------------------------------------------------------------
// Cast.

pub(crate) fn cast_target(attrs: &Attrs) -> Result<DType, String> {
    let Some(v) = attrs.get("to") else {
        return Err("Cast needs the `to` attribute (an ONNX TensorProto data type code)".into());
    };
    let code = attrs.int("to", 0);
    DType::from_onnx(code).ok_or_else(|| {
        format!(
            "Cast: `to` = {v} is not a supported ONNX data type; supported: 1 (f32), 2 (u8), 3 (i8), 4 (u16), \
             5 (i16), 6 (i32), 7 (i64), 9 (bool), 10 (f16), 11 (f64), 12 (u32), 13 (u64), 16 (bf16), \
             17 (f8e4m3fn), 18 (f8e4m3fnuz), 19 (f8e5m2), 20 (f8e5m2fnuz), 24 (f8e8m0)"
        )
    })
}

/// The `saturate` (default 1) and `round_mode` (default up) of Cast and CastLike.
pub(crate) fn cast_mode(attrs: &Attrs, op: &str) -> Result<(bool, RoundMode), String> {
    flag_attr(attrs, "saturate", op)?;
    let mode = match attrs.get("round_mode") {
        None => RoundMode::Up,
        Some(_) => {
            let m = attrs.str("round_mode").unwrap_or_default();
            RoundMode::from_name(m).ok_or_else(|| {
                format!("attribute `round_mode` of @onnx.{op} must be \"up\", \"down\" or \"nearest\", found {m:?}")
            })?
        }
    };
    Ok((attrs.int("saturate", 1) != 0, mode))
}

pub(crate) fn validate_cast(attrs: &Attrs) -> Result<(), String> {
    cast_mode(attrs, "Cast")?;
    cast_target(attrs).map(|_| ())
}

pub(crate) fn validate_cast_like(attrs: &Attrs) -> Result<(), String> {
    cast_mode(attrs, "CastLike").map(|_| ())
}

pub(crate) fn infer_cast_like(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "CastLike")?;
    check_shape(x.shape, "CastLike")?;
    let target = input(ins, 1, "CastLike")?;
    Ok(vec![(target.dtype, x.shape.to_vec())])
}

pub(crate) fn infer_cast(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "Cast")?;
    check_shape(x.shape, "Cast")?;
    Ok(vec![(cast_target(attrs)?, x.shape.to_vec())])
}
