//! Operators: tensor family — data movement and shape manipulation: Concat, Transpose,
//! Reshape, Flatten, Squeeze, Unsqueeze, Split, Slice, Gather, Tile, Pad, Shape,
//! ConstantOfShape and Cast: the host kernels and their `HOST` table (the schemas are in
//! `crate::ir::operators::tensor`).
//!
//! The kernels are dtype-generic (they move element bytes, any [`DType`]); index and shape
//! inputs are i64 (i32 accepted). Where ONNX moved an attribute to an input across opsets
//! (Reshape `shape`, Squeeze/Unsqueeze `axes`, Split `split`, Slice `starts`/`ends`/`axes`,
//! Pad `pads`/`value`), both forms are accepted, but not both at once in one call.
//!
//! Shape inference for operators whose output shape depends on an index input (Reshape,
//! Squeeze/Unsqueeze with an axes input, Split with a split input, Slice, Tile, Pad,
//! ConstantOfShape) needs that input's value: it is known at run time and, for constants, at
//! compile time; otherwise inference fails with "<Op> needs the value of its <name> input to
//! infer the output shape".
//!
//! Every operator plans its work with the same function at inference and in the host kernel,
//! so the kernel re-checks everything it relies on and never panics on malformed inputs.

use super::host::{on_tensors, HostFn, ViewFn};
use super::{AttrValue, Attrs, OutInfo, TensorInfo};
use crate::ir::host_tensor::{load_f64, load_i64, store_f64, store_i64, HostTensor, TensorMut, TensorRef};
use crate::ir::minifloat::{float8_encode, RoundMode};
use crate::ir::operators::shape::input;
use crate::ir::operators::tensor::*;
use crate::ir::operators::Operator;
use crate::ir::types::DType;

/// This family's host kernels.
/// This family's in-place host kernels: the copies that take no input values.
pub(crate) static VIEW: &[(Operator, ViewFn)] = &[(Operator::Concat, concat), (Operator::Transpose, transpose)];

pub(crate) static HOST: &[(Operator, HostFn)] = &[
    (Operator::Concat, |i, a, o| on_tensors(concat, i, a, o)),
    (Operator::Transpose, |i, a, o| on_tensors(transpose, i, a, o)),
    (Operator::Reshape, host_reshape),
    (Operator::Flatten, host_flatten),
    (Operator::Squeeze, host_squeeze),
    (Operator::Unsqueeze, host_unsqueeze),
    (Operator::Split, host_split),
    (Operator::Slice, host_slice),
    (Operator::Gather, host_gather),
    (Operator::Tile, host_tile),
    (Operator::Pad, host_pad),
    (Operator::Shape, host_shape),
    (Operator::ConstantOfShape, host_constant_of_shape),
    (Operator::Cast, host_cast),
    (Operator::CastLike, host_cast_like),
];

/// `prod` as a usize.
fn uprod(dims: &[i64], op: &str) -> Result<usize, String> {
    usize::try_from(prod(dims, op)?).map_err(|_| format!("{op}: shape {dims:?} is too large"))
}

/// Row-major element strides of `shape`.
fn strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(shape[i + 1]);
    }
    s
}

/// `Σ index·stride` in elements, saturating (an out-of-range result fails the copy's bounds
/// checks; it only happens for empty tensors, which copy nothing).
fn dot(index: impl Iterator<Item = i64>, strides: &[i64]) -> i64 {
    index.zip(strides).fold(0i64, |a, (i, &s)| a.saturating_add(i.saturating_mul(s)))
}

/// Builds the inference view of the host inputs, checking their data sizes.
fn host_infos<'a>(ins: &[Option<&'a HostTensor>], op: &str) -> Result<Vec<Option<TensorInfo<'a>>>, String> {
    ins.iter()
        .map(|t| match t {
            Some(t) => {
                check_data(t, op)?;
                Ok(Some(TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) }))
            }
            None => Ok(None),
        })
        .collect()
}

/// The in-place inputs as inference sees them (shapes, no values), their data checked.
fn view_infos<'a>(ins: &[Option<TensorRef<'a>>], op: &str) -> Result<Vec<Option<TensorInfo<'a>>>, String> {
    ins.iter()
        .map(|t| match t {
            Some(t) => {
                check_bytes(t.dtype, t.shape, t.data.len(), op)?;
                Ok(Some(TensorInfo { dtype: t.dtype, shape: t.shape, value: None }))
            }
            None => Ok(None),
        })
        .collect()
}

/// Checks the pre-shaped outputs against the plan (the caller may pass fewer outputs than the
/// operator can produce, never more).
fn check_outs(outs: &[HostTensor], expect: &[OutInfo], op: &str) -> Result<(), String> {
    check_out_types(outs.iter().map(|o| (o.dtype, &o.shape[..], o.data.len())), outs.len(), expect, op)
}

/// [`check_outs`] of in-place outputs.
fn check_view_outs(outs: &[TensorMut], expect: &[OutInfo], op: &str) -> Result<(), String> {
    check_out_types(outs.iter().map(|o| (o.dtype, o.shape, o.data.len())), outs.len(), expect, op)
}

fn check_out_types<'a>(
    outs: impl Iterator<Item = (DType, &'a [i64], usize)>,
    n: usize,
    expect: &[OutInfo],
    op: &str,
) -> Result<(), String> {
    if n == 0 || n > expect.len() {
        return Err(format!("{op}: given {n} outputs, expected 1 to {}", expect.len()));
    }
    for (i, ((d, sh, len), (dtype, shape))) in outs.zip(expect).enumerate() {
        if d != *dtype || sh != &shape[..] {
            return Err(format!("{op}: output {} is {d}{sh:?}, expected {dtype}{shape:?}", i + 1));
        }
        check_bytes(d, sh, len, op)?;
    }
    Ok(())
}

const OOB: &str = "internal error: copy out of bounds";

/// Copies `n` bytes from `src[s..]` to `dst[d..]`, an error (never a panic) when out of bounds.
fn copy_bytes(dst: &mut [u8], d: usize, src: &[u8], s: usize, n: usize) -> Result<(), String> {
    let from = s.checked_add(n).and_then(|e| src.get(s..e)).ok_or(OOB)?;
    let to = d.checked_add(n).and_then(|e| dst.get_mut(d..e)).ok_or(OOB)?;
    to.copy_from_slice(from);
    Ok(())
}

/// Fills `dst` with copies of the element `pat`.
fn fill(dst: &mut [u8], pat: &[u8]) {
    let es = pat.len();
    if es == 0 || dst.len() < es {
        return;
    }
    dst[..es].copy_from_slice(pat);
    let mut done = es;
    while done < dst.len() {
        let n = done.min(dst.len() - done);
        dst.copy_within(..n, done);
        done += n;
    }
}

/// The byte range of `n` elements of size `es` starting at element `pos` in a buffer of
/// `len` bytes.
fn span(pos: i64, n: usize, es: usize, len: usize) -> Result<std::ops::Range<usize>, String> {
    let start = usize::try_from(pos).ok().and_then(|p| p.checked_mul(es)).ok_or(OOB)?;
    let end = n.checked_mul(es).and_then(|b| start.checked_add(b)).filter(|&e| e <= len).ok_or(OOB)?;
    Ok(start..end)
}

/// Copies between strided layouts: for every multi-index `i` over `dims` (row-major), the
/// element at `src_off + i·src_st` goes to `dst_off + i·dst_st` (offsets and strides in
/// elements; strides may be 0 or negative). Dimensions are coalesced first and the innermost
/// run that is contiguous on both sides is copied with one memcpy.
#[allow(clippy::too_many_arguments)]
fn strided_copy(
    src: &[u8],
    src_off: i64,
    src_st: &[i64],
    dst: &mut [u8],
    dst_off: i64,
    dst_st: &[i64],
    dims: &[i64],
    es: usize,
) -> Result<(), String> {
    if src_st.len() != dims.len() || dst_st.len() != dims.len() {
        return Err(OOB.into());
    }
    if dims.iter().any(|&d| d <= 0) {
        return Ok(());
    }
    // (size, src stride, dst stride), outermost first, size-1 dims dropped.
    let mut d: Vec<(i64, i64, i64)> = Vec::with_capacity(dims.len());
    for k in 0..dims.len() {
        let (n, s, t) = (dims[k], src_st[k], dst_st[k]);
        if n == 1 {
            continue;
        }
        if let Some(last) = d.last_mut() {
            if s.checked_mul(n) == Some(last.1) && t.checked_mul(n) == Some(last.2) {
                *last = (last.0.saturating_mul(n), s, t);
                continue;
            }
        }
        d.push((n, s, t));
    }
    let (run, outer) = match d.split_last() {
        Some((&(n, 1, 1), rest)) => (n as usize, rest),
        _ => (1, &d[..]),
    };
    let mut idx = vec![0i64; outer.len()];
    let (mut sp, mut dp) = (src_off, dst_off);
    loop {
        let s = span(sp, run, es, src.len())?;
        let t = span(dp, run, es, dst.len())?;
        dst[t].copy_from_slice(&src[s]);
        let mut k = outer.len();
        loop {
            if k == 0 {
                return Ok(());
            }
            k -= 1;
            idx[k] += 1;
            sp = sp.wrapping_add(outer[k].1);
            dp = dp.wrapping_add(outer[k].2);
            if idx[k] < outer[k].0 {
                break;
            }
            // Out-of-range positions (only possible for inconsistent arguments) fail in `span`.
            sp = sp.wrapping_sub(outer[k].1.wrapping_mul(outer[k].0));
            dp = dp.wrapping_sub(outer[k].2.wrapping_mul(outer[k].0));
            idx[k] = 0;
        }
    }
}

/// Host kernel of the operators that only change the shape: the bytes are copied as is.
fn host_same_bytes(
    ins: &[Option<&HostTensor>],
    attrs: &Attrs,
    outs: &mut [HostTensor],
    op: &str,
    infer: super::InferFn,
) -> Result<(), String> {
    let infos = host_infos(ins, op)?;
    let expect = infer(&infos, attrs)?;
    check_outs(outs, &expect, op)?;
    let x = input(&infos, 0, op)?.value.ok_or(OOB)?;
    if x.data.len() != outs[0].data.len() {
        return Err(OOB.into());
    }
    outs[0].data.copy_from_slice(&x.data);
    Ok(())
}

fn concat(ins: &[Option<TensorRef>], attrs: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    const OP: &str = "Concat";
    let infos = view_infos(ins, OP)?;
    let (axis, out) = plan_concat(&infos, attrs)?;
    check_view_outs(outs, std::slice::from_ref(&out), OP)?;
    if outs[0].data.is_empty() {
        return Ok(());
    }
    let es = out.0.size();
    let outer = uprod(&out.1[..axis], OP)?;
    let mut parts = Vec::with_capacity(infos.len());
    for t in ins.iter().flatten() {
        parts.push((t, uprod(&t.shape[axis..], OP)? * es));
    }
    let dst = &mut *outs[0].data;
    let mut pos = 0;
    for o in 0..outer {
        for &(t, n) in &parts {
            copy_bytes(dst, pos, t.data, o * n, n)?;
            pos += n;
        }
    }
    Ok(())
}

fn transpose(ins: &[Option<TensorRef>], attrs: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    const OP: &str = "Transpose";
    let infos = view_infos(ins, OP)?;
    let (perm, out) = plan_transpose(&infos, attrs)?;
    check_view_outs(outs, std::slice::from_ref(&out), OP)?;
    let x = ins.first().copied().flatten().ok_or_else(|| format!("{OP}: input 1 is required"))?;
    let in_st = strides(x.shape);
    let src_st: Vec<i64> = perm.iter().map(|&p| in_st[p]).collect();
    strided_copy(x.data, 0, &src_st, outs[0].data, 0, &strides(&out.1), &out.1, out.0.size())
}

fn host_reshape(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    host_same_bytes(ins, attrs, outs, "Reshape", infer_reshape)
}

fn host_flatten(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    host_same_bytes(ins, attrs, outs, "Flatten", infer_flatten)
}

fn host_squeeze(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    host_same_bytes(ins, attrs, outs, "Squeeze", infer_squeeze)
}

fn host_unsqueeze(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    host_same_bytes(ins, attrs, outs, "Unsqueeze", infer_unsqueeze)
}

fn host_split(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    const OP: &str = "Split";
    let infos = host_infos(ins, OP)?;
    let (axis, sizes, expect) = plan_split(&infos, attrs)?;
    check_outs(outs, &expect, OP)?;
    let x = input(&infos, 0, OP)?.value.ok_or(OOB)?;
    let es = x.dtype.size();
    let outer = uprod(&x.shape[..axis], OP)?;
    let inner = uprod(&x.shape[axis + 1..], OP)? * es;
    let dim = x.shape[axis] as usize;
    let mut start = 0usize;
    for (out, &size) in outs.iter_mut().zip(&sizes) {
        let n = size as usize * inner;
        if n > 0 {
            for o in 0..outer {
                copy_bytes(&mut out.data, o * n, &x.data, (o * dim + start) * inner, n)?;
            }
        }
        start += size as usize;
    }
    Ok(())
}

fn host_slice(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    const OP: &str = "Slice";
    let infos = host_infos(ins, OP)?;
    let (plan, out) = plan_slice(&infos, attrs)?;
    check_outs(outs, std::slice::from_ref(&out), OP)?;
    let x = input(&infos, 0, OP)?.value.ok_or(OOB)?;
    let in_st = strides(&x.shape);
    let off = dot(plan.iter().map(|p| p.0), &in_st);
    let src_st: Vec<i64> = plan.iter().zip(&in_st).map(|(p, s)| p.1.saturating_mul(*s)).collect();
    strided_copy(&x.data, off, &src_st, &mut outs[0].data, 0, &strides(&out.1), &out.1, out.0.size())
}

fn host_gather(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    const OP: &str = "Gather";
    let infos = host_infos(ins, OP)?;
    let (axis, out) = plan_gather(&infos, attrs)?;
    check_outs(outs, std::slice::from_ref(&out), OP)?;
    let (x, it) = (input(&infos, 0, OP)?.value.ok_or(OOB)?, input(&infos, 1, OP)?.value.ok_or(OOB)?);
    let size = x.shape[axis];
    let mut idx = Vec::with_capacity(it.data.len() / it.dtype.size());
    for c in it.data.chunks_exact(it.dtype.size()) {
        let v = load_i64(it.dtype, c);
        if !(-size..size).contains(&v) {
            return Err(format!("{OP}: index {v} is out of range for axis {axis} of size {size}"));
        }
        idx.push(v.rem_euclid(size) as usize);
    }
    let es = x.dtype.size();
    let inner = uprod(&x.shape[axis + 1..], OP)? * es;
    if inner == 0 || idx.is_empty() {
        return Ok(());
    }
    let outer = uprod(&x.shape[..axis], OP)?;
    let dst = &mut outs[0].data;
    let mut pos = 0;
    for o in 0..outer {
        for &i in &idx {
            copy_bytes(dst, pos, &x.data, (o * size as usize + i) * inner, inner)?;
            pos += inner;
        }
    }
    Ok(())
}

fn host_tile(ins: &[Option<&HostTensor>], _: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    const OP: &str = "Tile";
    let infos = host_infos(ins, OP)?;
    let (reps, out) = plan_tile(&infos)?;
    check_outs(outs, std::slice::from_ref(&out), OP)?;
    let x = input(&infos, 0, OP)?.value.ok_or(OOB)?;
    // View the output as [r0, d0, r1, d1, ...]; the repeat axes read the input with stride 0.
    let in_st = strides(&x.shape);
    let dims: Vec<i64> = reps.iter().zip(&x.shape).flat_map(|(&r, &d)| [r, d]).collect();
    let src_st: Vec<i64> = in_st.iter().flat_map(|&s| [0, s]).collect();
    strided_copy(&x.data, 0, &src_st, &mut outs[0].data, 0, &strides(&dims), &dims, out.0.size())
}

/// The input index (along one axis) an output index `j` reads in a non-constant mode.
fn pad_source(mode: &str, j: i64, crop: i64, kept: i64, add: i64) -> i64 {
    let k = j - add;
    let k = match mode {
        "edge" => k.clamp(0, kept - 1),
        "wrap" => k.rem_euclid(kept),
        _ if kept == 1 => 0,
        _ => {
            let period = (kept - 1).saturating_mul(2);
            let m = k.rem_euclid(period);
            if m >= kept {
                period - m
            } else {
                m
            }
        }
    };
    crop + k
}

fn host_pad(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    const OP: &str = "Pad";
    let infos = host_infos(ins, OP)?;
    let p = plan_pad(&infos, attrs)?;
    check_outs(outs, std::slice::from_ref(&p.out), OP)?;
    let x = input(&infos, 0, OP)?.value.ok_or(OOB)?;
    let (es, r) = (x.dtype.size(), x.shape.len());
    let (in_st, out_st) = (strides(&x.shape), strides(&p.out.1));
    let dst = &mut outs[0].data;
    if dst.is_empty() {
        return Ok(());
    }
    if p.mode == "constant" {
        let mut value = vec![0u8; es];
        match (opt_in(&infos, 2).and_then(|c| c.value), attrs.get("value")) {
            (Some(c), _) => value.copy_from_slice(c.data.get(..es).ok_or(OOB)?),
            (None, Some(AttrValue::Int(v))) => store_i64(x.dtype, *v, &mut value),
            (None, _) => store_f64(x.dtype, attrs.float("value", 0.0), &mut value),
        }
        fill(dst, &value);
        let (src_off, dst_off) = (dot(p.crop.iter().copied(), &in_st), dot(p.add.iter().copied(), &out_st));
        return strided_copy(&x.data, src_off, &in_st, dst, dst_off, &out_st, &p.kept, es);
    }
    if r == 0 {
        return copy_bytes(dst, 0, &x.data, 0, es);
    }
    // Per axis, the input index each output index reads.
    let maps: Vec<Vec<i64>> = (0..r)
        .map(|d| (0..p.out.1[d]).map(|j| pad_source(p.mode, j, p.crop[d], p.kept[d], p.add[d])).collect())
        .collect();
    let last = r - 1;
    let row = p.out.1[last] as usize;
    let (kept, add, crop) = (p.kept[last] as usize, p.add[last] as usize, p.crop[last] as usize);
    let mut idx = vec![0usize; last];
    let mut dpos = 0usize;
    loop {
        let src_row = dot((0..last).map(|d| maps[d][idx[d]]), &in_st);
        let src_row = usize::try_from(src_row).map_err(|_| OOB)?;
        copy_bytes(dst, (dpos + add) * es, &x.data, (src_row + crop) * es, kept * es)?;
        for j in (0..add).chain(add + kept..row) {
            copy_bytes(dst, (dpos + j) * es, &x.data, (src_row + maps[last][j] as usize) * es, es)?;
        }
        dpos += row;
        let mut k = last;
        loop {
            if k == 0 {
                return Ok(());
            }
            k -= 1;
            idx[k] += 1;
            if (idx[k] as i64) < p.out.1[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

fn host_shape(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    const OP: &str = "Shape";
    let infos = host_infos(ins, OP)?;
    check_outs(outs, &infer_shape(&infos, attrs)?, OP)?;
    let x = input(&infos, 0, OP)?;
    for (c, d) in outs[0].data.chunks_exact_mut(8).zip(shape_value(x.shape, attrs)) {
        c.copy_from_slice(&d.to_le_bytes());
    }
    Ok(())
}

fn host_constant_of_shape(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    const OP: &str = "ConstantOfShape";
    validate_constant_of_shape(attrs)?;
    let infos = host_infos(ins, OP)?;
    let expect = infer_constant_of_shape(&infos, attrs)?;
    check_outs(outs, &expect, OP)?;
    let dtype = expect[0].0;
    let mut value = vec![0u8; dtype.size()];
    match attrs.get("value") {
        Some(AttrValue::Int(v)) => store_i64(dtype, *v, &mut value),
        _ => store_f64(dtype, attrs.float("value", 0.0), &mut value),
    }
    fill(&mut outs[0].data, &value);
    Ok(())
}

/// Converts one element (`b` of dtype `from`) into `out` (of dtype `to`); a float8 target
/// saturates or not, and E8M0 rounds by `mode`.
fn cast_elem(from: DType, b: &[u8], to: DType, out: &mut [u8], sat: bool, mode: RoundMode) {
    if to.is_float8() {
        let v = if from.is_float() {
            load_f64(from, b)
        } else if from == DType::U64 {
            load_i64(from, b) as u64 as f64
        } else {
            load_i64(from, b) as f64
        };
        out[0] = float8_encode(to, v, sat, mode).unwrap_or(0);
        return;
    }
    if from.is_float() {
        let v = load_f64(from, b);
        match to {
            DType::Bool => out[0] = (v != 0.0) as u8,
            DType::U64 => store_i64(to, v as u64 as i64, out),
            t if t.is_float() => store_f64(t, v, out),
            t => store_i64(t, v as i64, out),
        }
    } else {
        let v = if from == DType::U64 { load_i64(from, b) as u64 as i128 } else { load_i64(from, b) as i128 };
        match to {
            DType::F32 => out[..4].copy_from_slice(&(v as f32).to_le_bytes()),
            t if t.is_float() => store_f64(t, v as f64, out),
            t => store_i64(t, v as i64, out),
        }
    }
}

fn host_cast(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    const OP: &str = "Cast";
    let infos = host_infos(ins, OP)?;
    check_outs(outs, &infer_cast(&infos, attrs)?, OP)?;
    let (sat, mode) = cast_mode(attrs, OP)?;
    cast_into(input(&infos, 0, OP)?.value.ok_or(OOB)?, &mut outs[0], sat, mode)
}

fn host_cast_like(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    const OP: &str = "CastLike";
    let infos = host_infos(ins, OP)?;
    check_outs(outs, &infer_cast_like(&infos, attrs)?, OP)?;
    let (sat, mode) = cast_mode(attrs, OP)?;
    cast_into(input(&infos, 0, OP)?.value.ok_or(OOB)?, &mut outs[0], sat, mode)
}

/// `x`'s elements converted into `out` (of `x`'s shape and the target dtype).
fn cast_into(x: &HostTensor, out: &mut HostTensor, sat: bool, mode: RoundMode) -> Result<(), String> {
    let (from, to) = (x.dtype, out.dtype);
    if from == to {
        out.data.copy_from_slice(&x.data);
        return Ok(());
    }
    for (b, o) in x.data.chunks_exact(from.size()).zip(out.data.chunks_exact_mut(to.size())) {
        cast_elem(from, b, to, o, sat, mode);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::OpId;

    type A = AttrValue;

    fn attrs(list: &[(&str, A)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    /// `start, start + 1, ...` as `dtype`.
    fn iota_from(dtype: DType, shape: &[i64], start: i64) -> HostTensor {
        let mut t = HostTensor::zeros(dtype, shape).unwrap();
        let es = dtype.size();
        for (i, c) in t.data.chunks_exact_mut(es).enumerate() {
            store_i64(dtype, start + i as i64, c);
        }
        t
    }

    fn iota(dtype: DType, shape: &[i64]) -> HostTensor {
        iota_from(dtype, shape, 0)
    }

    fn f(shape: &[i64]) -> HostTensor {
        iota(DType::F32, shape)
    }

    fn i64s(v: &[i64]) -> HostTensor {
        HostTensor::new(DType::I64, vec![v.len() as i64], v.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap()
    }

    fn i32s(v: &[i32]) -> HostTensor {
        HostTensor::new(DType::I32, vec![v.len() as i64], v.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap()
    }

    /// Runs an operator as the interpreter does: attribute checks, inference with values,
    /// zeroed outputs, host kernel.
    fn run(op: &str, ins: &[Option<HostTensor>], at: &[(&str, A)]) -> Result<Vec<HostTensor>, String> {
        let def = OpId::from_name(op).unwrap().def();
        assert!(ins.len() >= def.min_inputs && ins.len() <= def.max_inputs, "{op} arity");
        let at = attrs(at);
        def.check_attrs(&at)?;
        let infos: Vec<Option<TensorInfo>> = ins
            .iter()
            .map(|t| t.as_ref().map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) }))
            .collect();
        let inferred = (def.infer)(&infos, &at)?;
        let mut outs: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        let refs: Vec<Option<&HostTensor>> = ins.iter().map(|t| t.as_ref()).collect();
        (def.op.id().host_kernel().unwrap())(&refs, &at, &mut outs)?;
        Ok(outs)
    }

    fn run1(op: &str, ins: &[Option<HostTensor>], at: &[(&str, A)]) -> HostTensor {
        let mut o = run(op, ins, at).unwrap_or_else(|e| panic!("{op}: {e}"));
        assert_eq!(o.len(), 1);
        o.remove(0)
    }

    fn err(op: &str, ins: &[Option<HostTensor>], at: &[(&str, A)]) -> String {
        match run(op, ins, at) {
            Ok(o) => panic!("{op} should fail, gave {o:?}"),
            Err(e) => e,
        }
    }

    /// Asserts shape and values (as i64; every test value is an exact integer).
    fn check(t: &HostTensor, shape: &[i64], values: &[i64]) {
        assert_eq!(t.shape, shape, "shape of {t}");
        assert_eq!(t.to_i64(), values, "values of {t}");
    }

    fn infer_no_values(op: &str, ins: &[Option<HostTensor>], at: &[(&str, A)]) -> Result<Vec<OutInfo>, String> {
        let def = OpId::from_name(op).unwrap().def();
        let infos: Vec<Option<TensorInfo>> = ins
            .iter()
            .map(|t| t.as_ref().map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: None }))
            .collect();
        (def.infer)(&infos, &attrs(at))
    }
    fn range(n: i64) -> Vec<i64> {
        (0..n).collect()
    }

    // Expected values below were computed with numpy 2.4 and checked against
    // onnx.reference (onnx 1.23) for the ONNX-specific rules.

    #[test]
    fn concat_along_an_axis() {
        let (a, b) = (f(&[2, 2, 3]), iota_from(DType::F32, &[2, 1, 3], 100));
        let want = [0, 1, 2, 3, 4, 5, 100, 101, 102, 6, 7, 8, 9, 10, 11, 103, 104, 105];
        check(&run1("Concat", &[Some(a.clone()), Some(b.clone())], &[("axis", A::Int(1))]), &[2, 3, 3], &want);
        check(&run1("Concat", &[Some(a), Some(b)], &[("axis", A::Int(-2))]), &[2, 3, 3], &want);
        // Three inputs, one empty; u8 elements.
        let ins =
            [Some(iota(DType::U8, &[1, 3])), Some(iota(DType::U8, &[0, 3])), Some(iota_from(DType::U8, &[2, 3], 10))];
        let y = run1("Concat", &ins, &[("axis", A::Int(0))]);
        assert_eq!(y.dtype, DType::U8);
        check(&y, &[3, 3], &[0, 1, 2, 10, 11, 12, 13, 14, 15]);
        let ins = [Some(iota(DType::I64, &[2, 1])), Some(iota_from(DType::I64, &[2, 2], 10))];
        check(&run1("Concat", &ins, &[("axis", A::Int(-1))]), &[2, 3], &[0, 10, 11, 1, 12, 13]);
    }

    #[test]
    fn concat_errors() {
        let def = OpId::from_name("Concat").unwrap().def();
        assert!(def.check_attrs(&Attrs::default()).unwrap_err().contains("needs the `axis` attribute"));
        let e = err("Concat", &[Some(f(&[2, 3])), Some(f(&[3, 2]))], &[("axis", A::Int(0))]);
        assert!(e.contains("does not match"), "{e}");
        let e = err("Concat", &[Some(f(&[2, 3])), Some(iota(DType::I32, &[2, 3]))], &[("axis", A::Int(0))]);
        assert!(e.contains("input 2 is i32"), "{e}");
        let e = err("Concat", &[Some(f(&[2, 3])), Some(f(&[2, 3]))], &[("axis", A::Int(2))]);
        assert!(e.contains("axis 2 is out of range for rank 2"), "{e}");
        let e = err("Concat", &[Some(f(&[2, 3])), None], &[("axis", A::Int(0))]);
        assert!(e.contains("input 2 is required"), "{e}");
        let e = err("Concat", &[Some(f(&[]))], &[("axis", A::Int(0))]);
        assert!(e.contains("rank 0"), "{e}");
    }

    #[test]
    fn transpose_permutes_axes() {
        let x = f(&[2, 3, 4]);
        let want = [0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23];
        check(&run1("Transpose", &[Some(x.clone())], &[]), &[4, 3, 2], &want);
        let want = [0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19, 8, 9, 10, 11, 20, 21, 22, 23];
        check(&run1("Transpose", &[Some(x.clone())], &[("perm", A::Ints(vec![1, 0, 2]))]), &[3, 2, 4], &want);
        let want = [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, 12, 16, 20, 13, 17, 21, 14, 18, 22, 15, 19, 23];
        let y = run1("Transpose", &[Some(iota(DType::I16, &[2, 3, 4]))], &[("perm", A::Ints(vec![0, 2, 1]))]);
        assert_eq!(y.dtype, DType::I16);
        check(&y, &[2, 4, 3], &want);
        let want = [0, 4, 8, 1, 5, 9, 12, 16, 20, 13, 17, 21, 2, 6, 10, 3, 7, 11, 14, 18, 22, 15, 19, 23];
        let y = run1("Transpose", &[Some(iota(DType::F64, &[2, 3, 2, 2]))], &[("perm", A::Ints(vec![2, 0, 3, 1]))]);
        check(&y, &[2, 2, 2, 3], &want);
        // Identity and scalars.
        check(&run1("Transpose", &[Some(x.clone())], &[("perm", A::Ints(vec![0, 1, 2]))]), &[2, 3, 4], &range(24));
        check(&run1("Transpose", &[Some(iota_from(DType::I8, &[], 5))], &[]), &[], &[5]);
        check(&run1("Transpose", &[Some(f(&[0, 3]))], &[]), &[3, 0], &[]);
    }

    #[test]
    fn transpose_errors() {
        let def = OpId::from_name("Transpose").unwrap().def();
        let e = def.check_attrs(&attrs(&[("perm", A::Ints(vec![0, 0, 1]))])).unwrap_err();
        assert!(e.contains("not a permutation"), "{e}");
        let e = def.check_attrs(&attrs(&[("perm", A::Ints(vec![-1, 0]))])).unwrap_err();
        assert!(e.contains("not a permutation"), "{e}");
        let e = err("Transpose", &[Some(f(&[2, 3, 4]))], &[("perm", A::Ints(vec![1, 0]))]);
        assert!(e.contains("has 2 entries, but the input has rank 3"), "{e}");
    }

    #[test]
    fn reshape_input_and_attribute_forms() {
        let x = f(&[2, 3, 4]);
        check(&run1("Reshape", &[Some(x.clone()), Some(i64s(&[4, 0, -1]))], &[]), &[4, 3, 2], &range(24));
        check(&run1("Reshape", &[Some(x.clone()), Some(i32s(&[-1]))], &[]), &[24], &range(24));
        check(&run1("Reshape", &[Some(x.clone())], &[("shape", A::Ints(vec![6, -1]))]), &[6, 4], &range(24));
        check(&run1("Reshape", &[Some(iota(DType::Bool, &[1])), Some(i64s(&[]))], &[]), &[], &[0]);
        // allowzero: 0 is a real zero.
        let e = f(&[0, 3]);
        check(&run1("Reshape", &[Some(e.clone()), Some(i64s(&[3, 0]))], &[("allowzero", A::Int(1))]), &[3, 0], &[]);
        let msg = err("Reshape", &[Some(e), Some(i64s(&[3, 0]))], &[]);
        assert!(msg.contains("cannot reshape [0, 3] (0 elements) into [3, 3] (9 elements)"), "{msg}");
    }

    #[test]
    fn reshape_errors() {
        let x = f(&[2, 3, 4]);
        let e = err("Reshape", &[Some(x.clone()), Some(i64s(&[-1, -1]))], &[]);
        assert!(e.contains("more than one -1"), "{e}");
        let e = err("Reshape", &[Some(x.clone()), Some(i64s(&[5, -1]))], &[]);
        assert!(e.contains("the -1 cannot be inferred"), "{e}");
        let e = err("Reshape", &[Some(x.clone()), Some(i64s(&[-2, 12]))], &[]);
        assert!(e.contains("negative size -2"), "{e}");
        let e = err("Reshape", &[Some(x.clone()), Some(i64s(&[0, 0, 0, 0]))], &[]);
        assert!(e.contains("shape[3] is 0"), "{e}");
        let e = err("Reshape", &[Some(x.clone()), Some(f(&[2]))], &[]);
        assert!(e.contains("must be an i64 (or i32) tensor, found f32"), "{e}");
        let e = err("Reshape", &[Some(x.clone())], &[]);
        assert!(e.contains("needs a shape"), "{e}");
        let e = err("Reshape", &[Some(x.clone()), Some(i64s(&[24]))], &[("shape", A::Ints(vec![24]))]);
        assert!(e.contains("not both"), "{e}");
        let e = err("Reshape", &[Some(x.clone()), Some(i64s(&[0, -1]))], &[("allowzero", A::Int(1))]);
        assert!(e.contains("cannot have both 0 and -1"), "{e}");
        let def = OpId::from_name("Reshape").unwrap().def();
        assert!(def.check_attrs(&attrs(&[("allowzero", A::Int(2))])).unwrap_err().contains("0 or 1"));
        let e = infer_no_values("Reshape", &[Some(x), Some(i64s(&[24]))], &[]).unwrap_err();
        assert_eq!(e, "Reshape needs the value of its shape input to infer the output shape");
    }

    #[test]
    fn flatten_axes() {
        let x = f(&[2, 3, 4]);
        check(&run1("Flatten", &[Some(x.clone())], &[]), &[2, 12], &range(24));
        check(&run1("Flatten", &[Some(x.clone())], &[("axis", A::Int(0))]), &[1, 24], &range(24));
        check(&run1("Flatten", &[Some(x.clone())], &[("axis", A::Int(-1))]), &[6, 4], &range(24));
        check(&run1("Flatten", &[Some(x.clone())], &[("axis", A::Int(3))]), &[24, 1], &range(24));
        check(&run1("Flatten", &[Some(x.clone())], &[("axis", A::Int(-3))]), &[1, 24], &range(24));
        let e = err("Flatten", &[Some(x.clone())], &[("axis", A::Int(4))]);
        assert!(e.contains("axis 4 is out of range for rank 3 (expected -3..=3)"), "{e}");
        assert!(err("Flatten", &[Some(x)], &[("axis", A::Int(-4))]).contains("out of range"));
    }

    #[test]
    fn squeeze_and_unsqueeze() {
        let x = f(&[1, 3, 1]);
        check(&run1("Squeeze", &[Some(x.clone())], &[("axes", A::Ints(vec![0, -1]))]), &[3], &[0, 1, 2]);
        check(&run1("Squeeze", &[Some(x.clone())], &[("axes", A::Ints(vec![2]))]), &[1, 3], &[0, 1, 2]);
        check(&run1("Squeeze", &[Some(x.clone()), Some(i64s(&[0]))], &[]), &[3, 1], &[0, 1, 2]);
        check(&run1("Squeeze", &[Some(x.clone())], &[]), &[3], &[0, 1, 2]);
        check(&run1("Squeeze", &[Some(x.clone()), Some(i64s(&[]))], &[]), &[3], &[0, 1, 2]);
        let e = err("Squeeze", &[Some(x.clone())], &[("axes", A::Ints(vec![1]))]);
        assert!(e.contains("axis 1 of [1, 3, 1] has size 3"), "{e}");
        let e = err("Squeeze", &[Some(x.clone())], &[("axes", A::Ints(vec![0, -3]))]);
        assert!(e.contains("listed twice"), "{e}");
        let e = err("Squeeze", &[Some(x.clone())], &[("axes", A::Ints(vec![3]))]);
        assert!(e.contains("out of range"), "{e}");

        let y = f(&[2, 3]);
        check(&run1("Unsqueeze", &[Some(y.clone()), Some(i64s(&[1, -1]))], &[]), &[2, 1, 3, 1], &range(6));
        check(&run1("Unsqueeze", &[Some(y.clone())], &[("axes", A::Ints(vec![0]))]), &[1, 2, 3], &range(6));
        check(&run1("Unsqueeze", &[Some(y.clone())], &[("axes", A::Ints(vec![-1, 0]))]), &[1, 2, 3, 1], &range(6));
        check(&run1("Unsqueeze", &[Some(f(&[])), Some(i32s(&[0]))], &[]), &[1], &[0]);
        let e = err("Unsqueeze", &[Some(y.clone())], &[("axes", A::Ints(vec![4]))]);
        assert!(e.contains("axis 4 is out of range for the output rank 3 (expected -3..=2)"), "{e}");
        let e = err("Unsqueeze", &[Some(y.clone())], &[("axes", A::Ints(vec![1, 1]))]);
        assert!(e.contains("listed twice"), "{e}");
        assert!(err("Unsqueeze", &[Some(y.clone())], &[]).contains("needs `axes`"));
        let e = infer_no_values("Unsqueeze", &[Some(y), Some(i64s(&[0]))], &[]).unwrap_err();
        assert_eq!(e, "Unsqueeze needs the value of its axes input to infer the output shape");
    }

    #[test]
    fn split_forms() {
        let x = f(&[2, 3]);
        let o = run("Split", &[Some(x.clone())], &[("axis", A::Int(1)), ("split", A::Ints(vec![1, 2]))]).unwrap();
        check(&o[0], &[2, 1], &[0, 3]);
        check(&o[1], &[2, 2], &[1, 2, 4, 5]);
        let o = run("Split", &[Some(x.clone()), Some(i64s(&[1, 2]))], &[("axis", A::Int(-1))]).unwrap();
        check(&o[0], &[2, 1], &[0, 3]);
        check(&o[1], &[2, 2], &[1, 2, 4, 5]);
        // Zero-sized part.
        let o = run("Split", &[Some(x.clone()), Some(i64s(&[0, 3]))], &[("axis", A::Int(1))]).unwrap();
        check(&o[0], &[2, 0], &[]);
        check(&o[1], &[2, 3], &range(6));
        // num_outputs (opset 18): the last part is smaller.
        let o = run("Split", &[Some(iota(DType::I64, &[7]))], &[("num_outputs", A::Int(3))]).unwrap();
        check(&o[0], &[3], &[0, 1, 2]);
        check(&o[1], &[3], &[3, 4, 5]);
        check(&o[2], &[1], &[6]);
        // Equal split over the number of outputs.
        let o = run("Split", &[Some(f(&[4, 2]))], &[("outputs", A::Int(2))]).unwrap();
        check(&o[0], &[2, 2], &[0, 1, 2, 3]);
        check(&o[1], &[2, 2], &[4, 5, 6, 7]);
    }

    #[test]
    fn split_errors() {
        let x = f(&[2, 3]);
        let e = err("Split", &[Some(x.clone())], &[("axis", A::Int(1))]);
        assert!(e.contains("needs split sizes"), "{e}");
        let e = err("Split", &[Some(x.clone())], &[("axis", A::Int(1)), ("outputs", A::Int(2))]);
        assert!(e.contains("does not split into 2 equal parts"), "{e}");
        let e = err("Split", &[Some(x.clone()), Some(i64s(&[1, 1]))], &[("axis", A::Int(1))]);
        assert!(e.contains("do not add up to 3"), "{e}");
        let e = err("Split", &[Some(x.clone()), Some(i64s(&[4, -1]))], &[("axis", A::Int(1))]);
        assert!(e.contains("negative size -1"), "{e}");
        let e = err("Split", &[Some(x.clone())], &[("axis", A::Int(2)), ("outputs", A::Int(1))]);
        assert!(e.contains("out of range"), "{e}");
        let e = err("Split", &[Some(iota(DType::F32, &[5]))], &[("num_outputs", A::Int(4))]);
        assert!(e.contains("cannot be split into 4 chunks"), "{e}");
        let def = OpId::from_name("Split").unwrap().def();
        let bad = [
            attrs(&[("split", A::Ints(vec![1, 2])), ("num_outputs", A::Int(2))]),
            attrs(&[("split", A::Ints(vec![1, 2])), ("outputs", A::Int(3))]),
            attrs(&[("num_outputs", A::Int(0))]),
            attrs(&[("outputs", A::Int(65))]),
            attrs(&[("num_outputs", A::Int(2)), ("outputs", A::Int(3))]),
            attrs(&[("split", A::Ints(vec![-1, 2]))]),
        ];
        for a in &bad {
            assert!(def.check_attrs(a).is_err(), "{a}");
        }
        assert!(def.check_attrs(&attrs(&[("split", A::Ints(vec![1, 2])), ("outputs", A::Int(2))])).is_ok());
    }

    #[test]
    fn slice_attribute_form() {
        let x = f(&[3, 4]);
        let at = [("starts", A::Ints(vec![1, 0])), ("ends", A::Ints(vec![1000, 3]))];
        check(&run1("Slice", &[Some(x.clone())], &at), &[2, 3], &[4, 5, 6, 8, 9, 10]);
        let at = [("starts", A::Ints(vec![1])), ("ends", A::Ints(vec![-1])), ("axes", A::Ints(vec![-1]))];
        check(&run1("Slice", &[Some(x.clone())], &at), &[3, 2], &[1, 2, 5, 6, 9, 10]);
        let def = OpId::from_name("Slice").unwrap().def();
        assert!(def
            .check_attrs(&attrs(&[("starts", A::Ints(vec![1]))]))
            .unwrap_err()
            .contains("both `starts` and `ends`"));
        let e = def.check_attrs(&attrs(&[("starts", A::Ints(vec![1])), ("ends", A::Ints(vec![2, 3]))])).unwrap_err();
        assert!(e.contains("`ends` has 2"), "{e}");
    }

    #[test]
    fn slice_input_form_with_steps() {
        let x = f(&[3, 4]);
        let s = |v: &[i64]| Some(i64s(v));
        check(&run1("Slice", &[Some(x.clone()), s(&[1, 0]), s(&[1000, 3])], &[]), &[2, 3], &[4, 5, 6, 8, 9, 10]);
        // Negative step from the back, end far below 0.
        let ins = [Some(x.clone()), s(&[-1]), s(&[-1000]), s(&[1]), s(&[-2])];
        check(&run1("Slice", &ins, &[]), &[3, 2], &[3, 1, 7, 5, 11, 9]);
        let ins = [Some(x.clone()), s(&[2, 0]), s(&[0, i64::MAX]), s(&[0, 1]), s(&[-1, 3])];
        check(&run1("Slice", &ins, &[]), &[2, 2], &[8, 11, 4, 7]);
        let ins = [Some(iota(DType::I64, &[5])), Some(i32s(&[-2])), Some(i32s(&[-5])), None, Some(i32s(&[-1]))];
        check(&run1("Slice", &ins, &[]), &[3], &[3, 2, 1]);
        // Steps only on axis 0 (axes omitted), large positive step.
        let ins = [Some(x.clone()), s(&[0]), s(&[3]), None, s(&[i64::MAX])];
        check(&run1("Slice", &ins, &[]), &[1, 4], &[0, 1, 2, 3]);
        // Extreme starts and ends clamp.
        let ins = [Some(x.clone()), s(&[i64::MIN]), s(&[i64::MAX]), s(&[1]), s(&[i64::MIN])];
        check(&run1("Slice", &ins, &[]), &[3, 0], &[]);
        let ins = [Some(x.clone()), s(&[i64::MAX]), s(&[i64::MIN]), s(&[1]), s(&[-1])];
        check(&run1("Slice", &ins, &[]), &[3, 4], &[3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8]);
        // ONNX clamps a negative-step start to [0, dim - 1], so a start below -dim selects index 0
        // (numpy's x[-9:-9:-1] would be empty; ONNX Runtime agrees with the spec).
        check(&run1("Slice", &[Some(x.clone()), s(&[-9]), s(&[-9]), s(&[0]), s(&[-1])], &[]), &[1, 4], &[0, 1, 2, 3]);
        // Empty results.
        check(&run1("Slice", &[Some(x.clone()), s(&[2]), s(&[1])], &[]), &[0, 4], &[]);
        check(&run1("Slice", &[Some(x.clone()), s(&[0]), s(&[2]), s(&[0]), s(&[-1])], &[]), &[0, 4], &[]);
        check(&run1("Slice", &[Some(f(&[0, 2])), s(&[-1]), s(&[-10]), s(&[0]), s(&[-1])], &[]), &[0, 2], &[]);
    }

    #[test]
    fn slice_errors() {
        let x = f(&[3, 4]);
        let s = |v: &[i64]| Some(i64s(v));
        let e = err("Slice", &[Some(x.clone()), s(&[0]), s(&[1]), s(&[0]), s(&[0])], &[]);
        assert!(e.contains("step for axis 0 is 0"), "{e}");
        let e = err("Slice", &[Some(x.clone()), s(&[0, 0]), s(&[1])], &[]);
        assert!(e.contains("ends has 1 values, but starts has 2"), "{e}");
        let e = err("Slice", &[Some(x.clone()), s(&[0, 0]), s(&[1, 1]), s(&[1, -1])], &[]);
        assert!(e.contains("listed twice"), "{e}");
        let e = err("Slice", &[Some(x.clone()), s(&[0]), s(&[1]), s(&[2])], &[]);
        assert!(e.contains("axis 2 is out of range for rank 2"), "{e}");
        let e = err("Slice", &[Some(x.clone()), s(&[0])], &[]);
        assert!(e.contains("needs starts and ends"), "{e}");
        let at = [("starts", A::Ints(vec![0])), ("ends", A::Ints(vec![1]))];
        let e = err("Slice", &[Some(x.clone()), s(&[0]), s(&[1])], &at);
        assert!(e.contains("not both"), "{e}");
        let e = infer_no_values("Slice", &[Some(x), s(&[0]), s(&[1])], &[]).unwrap_err();
        assert_eq!(e, "Slice needs the value of its starts input to infer the output shape");
    }

    #[test]
    fn gather_along_axes() {
        let d = f(&[3, 4]);
        let idx =
            HostTensor::new(DType::I64, vec![2, 2], [0i64, 2, 1, -1].iter().flat_map(|v| v.to_le_bytes()).collect());
        let want = [0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11];
        check(&run1("Gather", &[Some(d.clone()), Some(idx.unwrap())], &[]), &[2, 2, 4], &want);
        let y = run1("Gather", &[Some(d.clone()), Some(i32s(&[-1, 0, 1]))], &[("axis", A::Int(1))]);
        check(&y, &[3, 3], &[3, 0, 1, 7, 4, 5, 11, 8, 9]);
        let y = run1("Gather", &[Some(iota(DType::U16, &[2, 3, 2])), Some(i64s(&[2, 0]))], &[("axis", A::Int(-2))]);
        assert_eq!(y.dtype, DType::U16);
        check(&y, &[2, 2, 2], &[4, 5, 0, 1, 10, 11, 6, 7]);
        let scalar = HostTensor::new(DType::I64, vec![], 1i64.to_le_bytes().to_vec()).unwrap();
        check(&run1("Gather", &[Some(d.clone()), Some(scalar)], &[]), &[4], &[4, 5, 6, 7]);
        check(&run1("Gather", &[Some(d), Some(i64s(&[]))], &[]), &[0, 4], &[]);
    }

    #[test]
    fn gather_errors() {
        let d = f(&[3, 4]);
        let e = err("Gather", &[Some(d.clone()), Some(i64s(&[0, 3]))], &[]);
        assert!(e.contains("index 3 is out of range for axis 0 of size 3"), "{e}");
        let e = err("Gather", &[Some(d.clone()), Some(i64s(&[-5]))], &[("axis", A::Int(1))]);
        assert!(e.contains("index -5 is out of range for axis 1 of size 4"), "{e}");
        let e = err("Gather", &[Some(d.clone()), Some(f(&[1]))], &[]);
        assert!(e.contains("indices must be i64 or i32"), "{e}");
        assert!(err("Gather", &[Some(d.clone()), Some(i64s(&[0]))], &[("axis", A::Int(2))]).contains("out of range"));
        let e = err("Gather", &[Some(f(&[0, 2])), Some(i64s(&[0]))], &[]);
        assert!(e.contains("out of range for axis 0 of size 0"), "{e}");
    }

    #[test]
    fn tile_repeats() {
        let want = [0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5];
        check(&run1("Tile", &[Some(f(&[2, 3])), Some(i64s(&[2, 2]))], &[]), &[4, 6], &want);
        let want = [0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3];
        let y = run1("Tile", &[Some(iota(DType::I64, &[1, 2, 2])), Some(i32s(&[2, 1, 3]))], &[]);
        check(&y, &[2, 2, 6], &want);
        check(&run1("Tile", &[Some(f(&[2, 3])), Some(i64s(&[0, 2]))], &[]), &[0, 6], &[]);
        check(&run1("Tile", &[Some(f(&[2, 3])), Some(i64s(&[1, 1]))], &[]), &[2, 3], &range(6));
        let e = err("Tile", &[Some(f(&[2, 3])), Some(i64s(&[2]))], &[]);
        assert!(e.contains("has 1 values, but the input has rank 2"), "{e}");
        let e = err("Tile", &[Some(f(&[2, 3])), Some(i64s(&[1, -1]))], &[]);
        assert!(e.contains("negative count -1"), "{e}");
        let e = err("Tile", &[Some(f(&[2, 3])), Some(i64s(&[i64::MAX, 2]))], &[]);
        assert!(e.contains("too large"), "{e}");
        let e = infer_no_values("Tile", &[Some(f(&[2, 3])), Some(i64s(&[1, 1]))], &[]).unwrap_err();
        assert_eq!(e, "Tile needs the value of its repeats input to infer the output shape");
    }

    #[test]
    fn pad_constant_attribute_and_input_forms() {
        let x = f(&[2, 3]);
        let want = [7, 7, 7, 7, 7, 7, 7, 7, 0, 1, 2, 7, 7, 7, 3, 4, 5, 7];
        let at = [("pads", A::Ints(vec![1, 2, 0, 1])), ("value", A::Float(7.0))];
        check(&run1("Pad", &[Some(x.clone())], &at), &[3, 6], &want);
        let at =
            [("paddings", A::Ints(vec![1, 2, 0, 1])), ("value", A::Float(7.0)), ("mode", A::Str("constant".into()))];
        check(&run1("Pad", &[Some(x.clone())], &at), &[3, 6], &want);
        let seven = HostTensor::from_f32(&[], &[7.0]).unwrap();
        check(&run1("Pad", &[Some(x.clone()), Some(i64s(&[1, 2, 0, 1])), Some(seven)], &[]), &[3, 6], &want);
        // Integer data; default value 0.
        let y = run1("Pad", &[Some(iota_from(DType::I32, &[2, 3], 1)), Some(i64s(&[0, 1, 1, 0]))], &[]);
        check(&y, &[3, 4], &[0, 1, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0]);
        // Opset 18 axes input.
        let five = HostTensor::from_f32(&[1], &[5.0]).unwrap();
        let ins = [Some(x.clone()), Some(i64s(&[1, 2])), Some(five), Some(i64s(&[-1]))];
        check(&run1("Pad", &ins, &[]), &[2, 6], &[5, 0, 1, 2, 5, 5, 5, 3, 4, 5, 5, 5]);
        // Negative pads crop: [3, 4] cropped to rows 1.., cols ..3, then padded.
        let ins = [Some(f(&[3, 4])), Some(i64s(&[-1, 1, 1, -1])), Some(HostTensor::from_f32(&[], &[-1.0]).unwrap())];
        check(&run1("Pad", &ins, &[]), &[3, 4], &[-1, 4, 5, 6, -1, 8, 9, 10, -1, -1, -1, -1]);
        // Empty input.
        check(&run1("Pad", &[Some(f(&[0, 2])), Some(i64s(&[1, 0, 0, 1]))], &[]), &[1, 3], &[0, 0, 0]);
        check(&run1("Pad", &[Some(f(&[])), Some(i64s(&[]))], &[]), &[], &[0]);
    }

    #[test]
    fn pad_reflect_edge_wrap() {
        let x = f(&[2, 3]);
        let m = |s: &str| ("mode", A::Str(s.into()));
        let want = [5, 4, 3, 4, 5, 4, 3, 2, 1, 0, 1, 2, 1, 0, 5, 4, 3, 4, 5, 4, 3, 2, 1, 0, 1, 2, 1, 0];
        check(&run1("Pad", &[Some(x.clone()), Some(i64s(&[1, 2, 1, 2]))], &[m("reflect")]), &[4, 7], &want);
        let want = [0, 0, 0, 1, 2, 3, 3, 3, 4, 5, 3, 3, 3, 4, 5];
        check(&run1("Pad", &[Some(x.clone())], &[m("edge"), ("pads", A::Ints(vec![0, 2, 1, 0]))]), &[3, 5], &want);
        let want = [5, 3, 4, 5, 3, 4, 5, 3, 2, 0, 1, 2, 0, 1, 2, 0, 5, 3, 4, 5, 3, 4, 5, 3];
        check(&run1("Pad", &[Some(x.clone()), Some(i64s(&[1, 1, 0, 4]))], &[m("wrap")]), &[3, 8], &want);
        // Pads larger than the axis reflect repeatedly, like numpy.
        let want = [1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1, 0];
        check(&run1("Pad", &[Some(iota(DType::U8, &[3])), Some(i64s(&[7, 6]))], &[m("reflect")]), &[16], &want);
        check(
            &run1("Pad", &[Some(f(&[1, 2])), Some(i64s(&[2, 0, 1, 0]))], &[m("reflect")]),
            &[4, 2],
            &[0, 1, 0, 1, 0, 1, 0, 1],
        );
        // Crop, then reflect.
        let want = [5, 6, 7, 6, 5, 1, 2, 3, 2, 1, 5, 6, 7, 6, 5, 9, 10, 11, 10, 9];
        check(&run1("Pad", &[Some(f(&[3, 4])), Some(i64s(&[1, -1, 0, 2]))], &[m("reflect")]), &[4, 5], &want);
        let want = [
            0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 6, 6, 7, 7,
        ];
        let y = run1("Pad", &[Some(iota(DType::I64, &[2, 2, 2])), Some(i64s(&[1, 0, 1, 0, 1, 1]))], &[m("edge")]);
        check(&y, &[3, 3, 4], &want);
    }

    #[test]
    fn pad_errors() {
        let x = f(&[2, 3]);
        let def = OpId::from_name("Pad").unwrap().def();
        assert!(def.check_attrs(&attrs(&[("mode", A::Str("mirror".into()))])).unwrap_err().contains("mode must be"));
        assert!(def.check_attrs(&attrs(&[("pads", A::Ints(vec![1, 2, 3]))])).unwrap_err().contains("even number"));
        let e = err("Pad", &[Some(x.clone()), Some(i64s(&[1, 1]))], &[]);
        assert!(e.contains("but 2 axes need 4"), "{e}");
        let e = err("Pad", &[Some(x.clone()), Some(i64s(&[-2, 0, -1, 0]))], &[]);
        assert!(e.contains("crop more than the 2 elements of axis 0"), "{e}");
        let e = err("Pad", &[Some(x.clone()), Some(i64s(&[i64::MIN, 0, i64::MIN, 0]))], &[]);
        assert!(e.contains("crop more"), "{e}");
        let e = err("Pad", &[Some(f(&[0, 2])), Some(i64s(&[1, 0, 0, 0]))], &[("mode", A::Str("edge".into()))]);
        assert!(e.contains("axis 0 is empty"), "{e}");
        let e = err("Pad", &[Some(x.clone()), Some(i64s(&[0, 0, 0, 0])), Some(iota(DType::I64, &[]))], &[]);
        assert!(e.contains("constant_value must be a single f32 element"), "{e}");
        let e = err("Pad", &[Some(x.clone())], &[]);
        assert!(e.contains("needs pads"), "{e}");
        let e = err("Pad", &[Some(x.clone()), Some(i64s(&[0, 0, 0, 0]))], &[("pads", A::Ints(vec![0, 0, 0, 0]))]);
        assert!(e.contains("not both"), "{e}");
        let e = infer_no_values("Pad", &[Some(x), Some(i64s(&[0, 0, 0, 0]))], &[]).unwrap_err();
        assert_eq!(e, "Pad needs the value of its pads input to infer the output shape");
    }

    #[test]
    fn shape_with_start_and_end() {
        let x = f(&[2, 3, 4, 5]);
        let y = run1("Shape", &[Some(x.clone())], &[]);
        assert_eq!(y.dtype, DType::I64);
        check(&y, &[4], &[2, 3, 4, 5]);
        check(&run1("Shape", &[Some(x.clone())], &[("start", A::Int(1)), ("end", A::Int(-1))]), &[2], &[3, 4]);
        check(&run1("Shape", &[Some(x.clone())], &[("start", A::Int(-10))]), &[4], &[2, 3, 4, 5]);
        check(&run1("Shape", &[Some(x.clone())], &[("start", A::Int(3)), ("end", A::Int(1))]), &[0], &[]);
        check(&run1("Shape", &[Some(x)], &[("end", A::Int(100))]), &[4], &[2, 3, 4, 5]);
        check(&run1("Shape", &[Some(f(&[]))], &[]), &[0], &[]);
        // Shape needs no values.
        assert_eq!(infer_no_values("Shape", &[Some(f(&[7]))], &[]).unwrap(), vec![(DType::I64, vec![1])]);
    }

    #[test]
    fn constant_of_shape_values_and_dtypes() {
        let y = run1("ConstantOfShape", &[Some(i64s(&[2, 3]))], &[]);
        assert_eq!((y.dtype, y.to_f64()), (DType::F32, vec![0.0; 6]));
        let y = run1("ConstantOfShape", &[Some(i64s(&[3]))], &[("value", A::Float(2.5))]);
        assert_eq!((y.dtype, y.to_f64()), (DType::F32, vec![2.5; 3]));
        let big = (1i64 << 60) + 1;
        let y =
            run1("ConstantOfShape", &[Some(i32s(&[2]))], &[("value", A::Int(big)), ("dtype", A::Str("i64".into()))]);
        check(&y, &[2], &[big, big]);
        let y =
            run1("ConstantOfShape", &[Some(i64s(&[]))], &[("value", A::Float(1.0)), ("dtype", A::Str("bool".into()))]);
        check(&y, &[], &[1]);
        check(&run1("ConstantOfShape", &[Some(i64s(&[0, 5]))], &[]), &[0, 5], &[]);
        let def = OpId::from_name("ConstantOfShape").unwrap().def();
        let e = def.check_attrs(&attrs(&[("dtype", A::Str("float32".into()))])).unwrap_err();
        assert!(e.contains("unknown dtype \"float32\""), "{e}");
        let e = def.check_attrs(&attrs(&[("value", A::Float(1.5)), ("dtype", A::Str("i32".into()))])).unwrap_err();
        assert!(e.contains("not an integer"), "{e}");
        let e = err("ConstantOfShape", &[Some(i64s(&[2, -1]))], &[]);
        assert!(e.contains("negative size -1"), "{e}");
        let e = infer_no_values("ConstantOfShape", &[Some(i64s(&[2]))], &[]).unwrap_err();
        assert_eq!(e, "ConstantOfShape needs the value of its shape input to infer the output shape");
    }

    /// CastLike converts as Cast does, to the dtype of its second input, whose shape and
    /// values do not matter.
    #[test]
    fn cast_like_takes_the_dtype_of_its_second_input() {
        let v = HostTensor::from_f32(&[5], &[-1.7, 2.5, 0.0, 3.99, -0.2]).unwrap();
        let like_i32 = HostTensor::new(DType::I32, vec![2, 2], vec![0xEE; 16]).unwrap();
        let y = run1("CastLike", &[Some(v.clone()), Some(like_i32)], &[]);
        assert_eq!(y.dtype, DType::I32);
        check(&y, &[5], &[-1, 2, 0, 3, 0]);
        let like_bool = HostTensor::new(DType::Bool, vec![0], vec![]).unwrap();
        let y = run1("CastLike", &[Some(v.clone()), Some(like_bool)], &[("saturate", A::Int(1))]);
        assert_eq!(y.dtype, DType::Bool);
        check(&y, &[5], &[1, 1, 0, 1, 1]);
        let y = run1("CastLike", &[Some(i64s(&[-3, 300])), Some(v)], &[]);
        assert_eq!((y.dtype, y.to_f64()), (DType::F32, vec![-3.0, 300.0]));
    }

    #[test]
    fn cast_between_dtypes() {
        let v = HostTensor::from_f32(&[5], &[-1.7, 2.5, 0.0, 3.99, -0.2]).unwrap();
        let y = run1("Cast", &[Some(v.clone())], &[("to", A::Int(6))]);
        assert_eq!(y.dtype, DType::I32);
        check(&y, &[5], &[-1, 2, 0, 3, 0]);
        let y = run1("Cast", &[Some(v.clone())], &[("to", A::Int(9))]);
        assert_eq!(y.dtype, DType::Bool);
        check(&y, &[5], &[1, 1, 0, 1, 1]);
        let y = run1("Cast", &[Some(v.clone())], &[("to", A::Int(11))]);
        assert_eq!(y.to_f64(), [-1.7f32, 2.5, 0.0, 3.99, -0.2].map(|x| x as f64));
        let y = run1("Cast", &[Some(v)], &[("to", A::Int(1))]);
        assert_eq!(y.to_f64()[0], -1.7f32 as f64);
        // Integers to f16 round to nearest; 65519 rounds down to the largest finite f16.
        let w = i64s(&[2049, -3, 65519]);
        let y = run1("Cast", &[Some(w.clone())], &[("to", A::Int(10))]);
        assert_eq!((y.dtype, y.to_f64()), (DType::F16, vec![2048.0, -3.0, 65504.0]));
        let y = run1("Cast", &[Some(i64s(&[-3, 300]))], &[("to", A::Int(2))]);
        check(&y, &[2], &[253, 44]);
        // u64 values above i64::MAX stay unsigned.
        let u = HostTensor::new(DType::U64, vec![1], u64::MAX.to_le_bytes().to_vec()).unwrap();
        assert_eq!(run1("Cast", &[Some(u)], &[("to", A::Int(11))]).to_f64(), vec![u64::MAX as f64]);
        let y = run1("Cast", &[Some(iota(DType::Bool, &[2]))], &[("to", A::Int(7))]);
        check(&y, &[2], &[0, 1]);
        let y = run1("Cast", &[Some(iota(DType::U8, &[2, 2]))], &[("to", A::Int(1))]);
        assert_eq!((y.dtype, y.shape.clone(), y.to_f64()), (DType::F32, vec![2, 2], vec![0.0, 1.0, 2.0, 3.0]));
    }

    #[test]
    fn cast_to_narrow_floats_saturates_and_rounds_as_onnx() {
        let f = |v: &[f32]| HostTensor::from_f32(&[v.len() as i64], v).unwrap();
        let x = f(&[1e9, -1e9, 0.3, f32::INFINITY, 1.5]);
        // E4M3FN: ±448 saturated, NaN without saturation (no infinities); 0.3 is 0.3125.
        let sat = run1("Cast", &[Some(x.clone())], &[("to", A::Int(17))]);
        assert_eq!((sat.dtype, sat.data.as_slice()), (DType::F8E4M3FN, &[0x7e, 0xfe, 0x2a, 0x7e, 0x3c][..]));
        let raw = run1("Cast", &[Some(x.clone())], &[("to", A::Int(17)), ("saturate", A::Int(0))]);
        assert_eq!(raw.data, [0x7f, 0xff, 0x2a, 0x7f, 0x3c]);
        // E5M2 without saturation overflows to ±inf; FNUZ to its one NaN, 0x80.
        let e5 = run1("Cast", &[Some(x.clone())], &[("to", A::Int(19)), ("saturate", A::Int(0))]);
        assert_eq!(e5.data, [0x7c, 0xfc, 0x35, 0x7c, 0x3e]);
        let uz = run1("Cast", &[Some(x.clone())], &[("to", A::Int(18)), ("saturate", A::Int(0))]);
        assert_eq!(uz.data, [0x80, 0x80, 0x32, 0x80, 0x44]);
        // E8M0: 1.5 is 2^0 rounded down, 2^1 up or to nearest; infinity is NaN (0xff).
        for (mode, b) in [("down", 127), ("up", 128), ("nearest", 128)] {
            let y = run1("Cast", &[Some(x.clone())], &[("to", A::Int(24)), ("round_mode", A::Str(mode.into()))]);
            assert_eq!(y.data[3..], [0xff, b], "{mode}");
        }
        // And back: every code decodes exactly (CastLike takes the target from its input 2).
        let back = run1("CastLike", &[Some(sat), Some(f(&[0.0]))], &[]);
        assert_eq!(back.to_f64(), [448.0, -448.0, 0.3125, 448.0, 1.5]);
        // bf16 rounds to nearest even: 1 + 2^-8 is a tie (to 1), 1 + 3 * 2^-8 rounds up.
        let b = run1("Cast", &[Some(f(&[1.0 + 1.0 / 256.0, 1.0 + 3.0 / 256.0]))], &[("to", A::Int(16))]);
        assert_eq!((b.dtype, b.to_f64()), (DType::BF16, vec![1.0, 1.0 + 4.0 / 256.0]));
        // Integers convert by value.
        let y = run1("Cast", &[Some(i64s(&[-3, 1000]))], &[("to", A::Int(17))]);
        assert_eq!(y.to_f64(), [-3.0, 448.0]);
        assert!(
            err("Cast", &[Some(x)], &[("to", A::Int(24)), ("round_mode", A::Str("odd".into()))]).contains("round_mode")
        );
    }

    #[test]
    fn cast_errors() {
        let def = OpId::from_name("Cast").unwrap().def();
        assert!(def.check_attrs(&Attrs::default()).unwrap_err().contains("needs the `to` attribute"));
        let e = def.check_attrs(&attrs(&[("to", A::Int(8))])).unwrap_err();
        assert!(e.contains("`to` = 8 is not a supported ONNX data type"), "{e}");
        // UINT4 and FLOAT4E2M1 are not dtypes of the VM.
        assert!(def.check_attrs(&attrs(&[("to", A::Int(21))])).is_err());
        assert!(def.check_attrs(&attrs(&[("to", A::Int(23))])).is_err());
        for code in [1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16, 17, 18, 19, 20, 24] {
            assert!(def.check_attrs(&attrs(&[("to", A::Int(code))])).is_ok(), "{code}");
        }
    }

    /// The data-movement operators give, for every dtype, the i64 result converted to that dtype.
    #[test]
    fn every_dtype_is_moved_bytewise() {
        type Case<'a> = (&'a str, Vec<Option<HostTensor>>, Vec<(&'a str, A)>);
        let cases: Vec<Case> = vec![
            ("Transpose", vec![None], vec![]),
            ("Concat", vec![None, None], vec![("axis", A::Int(1))]),
            ("Slice", vec![None, Some(i64s(&[-1])), Some(i64s(&[-3])), Some(i64s(&[1])), Some(i64s(&[-1]))], vec![]),
            ("Gather", vec![None, Some(i64s(&[2, 0, 1]))], vec![("axis", A::Int(1))]),
            ("Tile", vec![None, Some(i64s(&[2, 2]))], vec![]),
            ("Pad", vec![None, Some(i64s(&[1, 2, 0, 1]))], vec![("mode", A::Str("reflect".into()))]),
            ("Pad", vec![None, Some(i64s(&[1, 2, 0, 1]))], vec![("value", A::Int(1))]),
            ("Split", vec![None], vec![("axis", A::Int(1)), ("outputs", A::Int(3))]),
            ("Reshape", vec![None, Some(i64s(&[3, 2]))], vec![]),
        ];
        for (op, ins, at) in &cases {
            let with = |d: DType| -> Vec<Option<HostTensor>> {
                ins.iter().map(|t| t.clone().or_else(|| Some(iota_from(d, &[2, 3], 1)))).collect()
            };
            let reference = run(op, &with(DType::I64), at).unwrap();
            for d in DType::ALL {
                let got = run(op, &with(d), at).unwrap_or_else(|e| panic!("{op} {d}: {e}"));
                assert_eq!(got.len(), reference.len());
                for (g, r) in got.iter().zip(&reference) {
                    let mut want = HostTensor::zeros(d, &r.shape).unwrap();
                    for (c, v) in want.data.chunks_exact_mut(d.size()).zip(r.to_i64()) {
                        store_i64(d, v, c);
                    }
                    assert_eq!(*g, want, "{op} on {d}");
                }
            }
        }
    }

    /// Host kernels reject inconsistent tensors and outputs instead of panicking.
    #[test]
    fn host_kernels_check_their_arguments() {
        let bad = HostTensor { dtype: DType::F32, shape: vec![2, 3], data: vec![0; 5] };
        let good = f(&[2, 3]);
        for op in super::OPS {
            let ins: Vec<Option<&HostTensor>> = vec![Some(&bad); op.min_inputs.max(1)];
            let mut outs = vec![HostTensor::zeros(DType::F32, &[1]).unwrap()];
            assert!((op.op.id().host_kernel().unwrap())(&ins, &Attrs::default(), &mut outs).is_err(), "{}", op.name);
            let ins: Vec<Option<&HostTensor>> = vec![Some(&good); op.min_inputs.max(1)];
            let mut outs = vec![HostTensor::zeros(DType::F32, &[7, 7]).unwrap()];
            assert!((op.op.id().host_kernel().unwrap())(&ins, &Attrs::default(), &mut outs).is_err(), "{}", op.name);
            assert!((op.op.id().host_kernel().unwrap())(&[], &Attrs::default(), &mut []).is_err(), "{}", op.name);
        }
    }

    /// Random calls of every operator: attribute checks, inference (with and without values)
    /// and kernels never panic, and a kernel succeeds whenever inference did (except for
    /// Gather's run-time index check).
    #[test]
    fn random_calls_never_panic() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = move |n: u64| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) % n.max(1)
        };
        const INTS: [i64; 12] = [-3, -2, -1, 0, 1, 2, 3, 4, 7, i64::MIN, i64::MAX, 1 << 40];
        let mut ran = 0;
        for _ in 0..30000 {
            let op = &super::OPS[next(super::OPS.len() as u64) as usize];
            let rank = next(5) as usize;
            let mut shape: Vec<i64> = (0..rank).map(|_| next(4) as i64).collect();
            if rank > 1 && next(20) == 0 {
                shape[0] = 0;
                shape[rank - 1] = 1 << 40;
            }
            let dtype = [DType::F32, DType::I64, DType::U8, DType::F16][next(4) as usize];
            let mut ins = vec![Some(iota(dtype, &shape))];
            let nin = op.min_inputs + next((op.max_inputs - op.min_inputs + 1).min(5) as u64) as usize;
            for _ in 1..nin {
                ins.push(match next(6) {
                    0 => None,
                    1 => Some(iota(dtype, &[])),
                    k => {
                        let len = [rank as u64, 2 * rank as u64, next(5)][next(3) as usize];
                        let pool = if k == 2 { 12 } else { 8 };
                        let v: Vec<i64> = (0..len).map(|_| INTS[next(pool) as usize]).collect();
                        Some(if k == 3 { i32s(&v.iter().map(|&x| x as i32).collect::<Vec<_>>()) } else { i64s(&v) })
                    }
                });
            }
            if nin > op.min_inputs && ins.last().is_some_and(|t| t.is_none()) && next(2) == 0 {
                ins.pop();
            }
            let mut at = Vec::new();
            for spec in op.attrs {
                if next(2) == 0 {
                    continue;
                }
                let v = match spec.kind {
                    super::super::AttrKind::Int => A::Int(INTS[next(9) as usize]),
                    super::super::AttrKind::Float => A::Float([0.0, 1.5, -2.0][next(3) as usize]),
                    super::super::AttrKind::Ints | super::super::AttrKind::Floats => {
                        let len = [rank as u64, 2 * rank as u64, next(7)][next(3) as usize];
                        let pool = if next(4) == 0 { 12 } else { 8 };
                        A::Ints((0..len).map(|_| INTS[next(pool) as usize]).collect())
                    }
                    super::super::AttrKind::Str => {
                        A::Str(["constant", "reflect", "edge", "wrap", "f32", "i64", "bogus"][next(7) as usize].into())
                    }
                };
                at.push((spec.name, v));
            }
            let at = attrs(&at);
            if op.check_attrs(&at).is_err() {
                continue;
            }
            let infos: Vec<Option<TensorInfo>> = ins
                .iter()
                .map(|t| t.as_ref().map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: None }))
                .collect();
            let _ = (op.infer)(&infos, &at);
            let infos: Vec<Option<TensorInfo>> = ins
                .iter()
                .map(|t| t.as_ref().map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) }))
                .collect();
            let Ok(inferred) = (op.infer)(&infos, &at) else { continue };
            if inferred.iter().any(|(_, s)| crate::ir::host_tensor::numel(s).is_none_or(|n| n > 100_000)) {
                continue;
            }
            let mut outs: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
            let refs: Vec<Option<&HostTensor>> = ins.iter().map(|t| t.as_ref()).collect();
            match (op.op.id().host_kernel().unwrap())(&refs, &at, &mut outs) {
                Ok(()) => ran += 1,
                Err(e) if op.name == "Gather" && e.contains("out of range") => {}
                Err(e) => panic!("{} failed after inference succeeded: {e}\ninputs {ins:?}\nattrs {at}", op.name),
            }
        }
        assert!(ran > 2000, "only {ran} kernels ran");
    }

    /// Slice against an element-by-element reference built on CPython's `slice.indices`
    /// algorithm, for random shapes, axes, starts, ends and steps. One deliberate difference:
    /// with a negative step, a start below -dim clamps to 0 as the ONNX spec (and ONNX
    /// Runtime) say, where Python clamps it to -1 and selects nothing.
    #[test]
    fn slice_matches_python_slicing() {
        fn py_indices(start: i64, end: i64, step: i64, dim: i64) -> Vec<i64> {
            let (lower, upper) = if step > 0 { (0, dim) } else { (-1, dim - 1) };
            let fix = |v: i64, lower: i64| {
                if v < 0 {
                    (v as i128 + dim as i128).max(lower as i128) as i64
                } else {
                    v.min(upper)
                }
            };
            let (mut i, end) = (fix(start, lower.max(0).min(upper)) as i128, fix(end, lower) as i128);
            let mut out = vec![];
            while (step > 0 && i < end) || (step < 0 && i > end) {
                out.push(i as i64);
                i += step as i128;
            }
            out
        }
        let mut state = 42u64;
        let mut next = move |n: u64| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        const VALS: [i64; 6] = [i64::MIN, i64::MAX, -1000, 1000, -1, 0];
        for _ in 0..3000 {
            let rank = 1 + next(3) as usize;
            let shape: Vec<i64> = (0..rank).map(|_| next(6) as i64).collect();
            let x = iota(DType::I32, &shape);
            let mut axes: Vec<usize> = (0..rank).collect();
            for i in (1..rank).rev() {
                axes.swap(i, next(i as u64 + 1) as usize);
            }
            axes.truncate(1 + next(rank as u64) as usize);
            let mut pick = |small: bool| {
                if next(5) == 0 {
                    VALS[next(6) as usize]
                } else if small {
                    next(7) as i64 - 3
                } else {
                    next(15) as i64 - 7
                }
            };
            let starts: Vec<i64> = axes.iter().map(|_| pick(false)).collect();
            let ends: Vec<i64> = axes.iter().map(|_| pick(false)).collect();
            let steps: Vec<i64> = axes
                .iter()
                .map(|_| match pick(true) {
                    0 => 1,
                    s => s,
                })
                .collect();
            let axes_in: Vec<i64> =
                axes.iter().map(|&a| if next(2) == 0 { a as i64 } else { a as i64 - rank as i64 }).collect();
            let ins =
                [Some(x.clone()), Some(i64s(&starts)), Some(i64s(&ends)), Some(i64s(&axes_in)), Some(i64s(&steps))];
            let y = run1("Slice", &ins, &[]);
            // Reference.
            let mut per_axis: Vec<Vec<i64>> = shape.iter().map(|&d| (0..d).collect()).collect();
            for (k, &a) in axes.iter().enumerate() {
                per_axis[a] = py_indices(starts[k], ends[k], steps[k], shape[a]);
            }
            let out_shape: Vec<i64> = per_axis.iter().map(|v| v.len() as i64).collect();
            let st = strides(&shape);
            let mut want = vec![];
            let n: i64 = out_shape.iter().product();
            for lin in 0..n {
                let (mut rem, mut off) = (lin, 0);
                for d in (0..rank).rev() {
                    off += per_axis[d][(rem % out_shape[d]) as usize] * st[d];
                    rem /= out_shape[d];
                }
                want.push(off);
            }
            assert_eq!(y.shape, out_shape, "{shape:?} {starts:?} {ends:?} {axes_in:?} {steps:?}");
            assert_eq!(y.to_i64(), want, "{shape:?} {starts:?} {ends:?} {axes_in:?} {steps:?}");
        }
    }

    /// Pad against a naive reference that crops, then pads one axis at a time, growing each
    /// line like numpy does (reflecting the grown line chunk by chunk), for random shapes,
    /// pads and modes.
    #[test]
    fn pad_matches_a_naive_reference() {
        fn pad_line(v: &[i64], b: i64, e: i64, mode: &str, c: i64) -> Vec<i64> {
            let lo = (-b).max(0) as usize;
            let hi = v.len() - (-e).max(0) as usize;
            let orig: Vec<i64> = v[lo..hi].to_vec();
            // Each side grows its own copy of the cropped line.
            let (mut left, mut right) = (b.max(0) as usize, e.max(0) as usize);
            let mut l = orig.clone();
            while left > 0 {
                let n = l.len();
                let add: Vec<i64> = match mode {
                    "constant" => vec![c],
                    "edge" => vec![l[0]],
                    "wrap" => orig[orig.len() - left.min(orig.len())..].to_vec(),
                    _ if n == 1 => vec![l[0]],
                    _ => l[1..=left.min(n - 1)].iter().rev().copied().collect(),
                };
                left -= add.len();
                l.splice(0..0, add);
            }
            let mut r = orig.clone();
            while right > 0 {
                let n = r.len();
                let add: Vec<i64> = match mode {
                    "constant" => vec![c],
                    "edge" => vec![r[n - 1]],
                    "wrap" => orig[..right.min(orig.len())].to_vec(),
                    _ if n == 1 => vec![r[0]],
                    _ => r[n - 1 - right.min(n - 1)..n - 1].iter().rev().copied().collect(),
                };
                right -= add.len();
                r.extend(add);
            }
            l.extend_from_slice(&r[orig.len()..]);
            l
        }
        let mut state = 7u64;
        let mut next = move |n: u64| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        let mut checked = 0;
        for _ in 0..3000 {
            let rank = 1 + next(3) as usize;
            let shape: Vec<i64> = (0..rank).map(|_| 1 + next(4) as i64).collect();
            let mode = ["constant", "reflect", "edge", "wrap"][next(4) as usize];
            let pads: Vec<i64> = (0..2 * rank).map(|_| next(10) as i64 - 3).collect();
            let (begin, end) = pads.split_at(rank);
            if (0..rank).any(|d| (-begin[d]).max(0) + (-end[d]).max(0) >= shape[d]) {
                continue; // Cropping everything is covered by the error tests.
            }
            let x = iota(DType::I64, &shape);
            let ins = [Some(x.clone()), Some(i64s(&pads)), Some(iota_from(DType::I64, &[], -1))];
            let y = run1("Pad", &ins, &[("mode", A::Str(mode.into()))]);
            // Reference: pad axis by axis.
            let (mut cur_shape, mut cur) = (shape.clone(), x.to_i64());
            for d in 0..rank {
                let outer: i64 = cur_shape[..d].iter().product();
                let inner: i64 = cur_shape[d + 1..].iter().product();
                let n = cur_shape[d];
                let mut lines = vec![];
                for o in 0..outer {
                    for i in 0..inner {
                        let line: Vec<i64> = (0..n).map(|k| cur[((o * n + k) * inner + i) as usize]).collect();
                        lines.push(pad_line(&line, begin[d], end[d], mode, -1));
                    }
                }
                let m = lines[0].len() as i64;
                let mut next_data = vec![0; (outer * m * inner) as usize];
                for o in 0..outer {
                    for i in 0..inner {
                        for (k, &v) in lines[(o * inner + i) as usize].iter().enumerate() {
                            next_data[((o * m + k as i64) * inner + i) as usize] = v;
                        }
                    }
                }
                cur_shape[d] = m;
                cur = next_data;
            }
            assert_eq!(y.shape, cur_shape, "{mode} {shape:?} {pads:?}");
            assert_eq!(y.to_i64(), cur, "{mode} {shape:?} {pads:?}");
            checked += 1;
        }
        assert!(checked > 1000, "{checked}");
    }
}
