//! Operands of the nn kernels: reading inputs in place (or widened), checking and
//! writing outputs, and the few index helpers every kernel of the family shares.

use crate::ir::host_tensor::{load_f64, numel, store_f64, TensorMut, TensorRef};
use crate::ir::operators::nn::{ty, MATMUL_FLOATS};
use crate::ir::types::DType;
use crate::ops::host::{load_f32s, store_f32s};
use std::borrow::Cow;

pub(super) fn prod(v: &[usize]) -> usize {
    v.iter().product()
}

pub(super) fn host_input<'a>(ins: &[Option<TensorRef<'a>>], i: usize, name: &str) -> Result<TensorRef<'a>, String> {
    ins.get(i).copied().flatten().ok_or_else(|| format!("the input {name} is required"))
}

/// Little-endian f32 bytes viewed in place, when they are 4-byte aligned.
pub(super) fn f32_view(data: &[u8]) -> Option<&[f32]> {
    if cfg!(target_endian = "big") {
        return None;
    }
    // SAFETY: every bit pattern is a valid f32, and `align_to` only hands out the aligned
    // middle part (checked to be everything).
    let (head, mid, tail) = unsafe { data.align_to::<f32>() };
    (head.is_empty() && tail.is_empty()).then_some(mid)
}

pub(super) fn f32_view_mut(data: &mut [u8]) -> Option<&mut [f32]> {
    if cfg!(target_endian = "big") {
        return None;
    }
    // SAFETY: as in `f32_view`; every f32 written is valid as bytes.
    let (head, mid, tail) = unsafe { data.align_to_mut::<f32>() };
    (head.is_empty() && tail.is_empty()).then_some(mid)
}

/// The f32 elements of an input, checked against its shape (borrowed when aligned).
pub(super) fn values<'a>(t: TensorRef<'a>, name: &str) -> Result<Cow<'a, [f32]>, String> {
    if t.dtype != DType::F32 {
        return Err(format!("{name} must be f32, found {}{:?}", t.dtype, t.shape));
    }
    if numel(t.shape).and_then(|n| n.checked_mul(4)) != Some(t.data.len() as u64) {
        return Err(format!("{name}: {} bytes of data do not match the shape {}", t.data.len(), ty(t.shape)));
    }
    Ok(match f32_view(t.data) {
        Some(v) => Cow::Borrowed(v),
        None => Cow::Owned(load_f32s(t.data)),
    })
}

/// Checks that output `i` was allocated as `dtype[shape]`.
pub(super) fn check_out(outs: &[TensorMut], i: usize, dtype: DType, shape: &[i64]) -> Result<(), String> {
    let o = outs.get(i).ok_or_else(|| format!("output {} is missing", i + 1))?;
    let bytes = numel(shape).and_then(|n| n.checked_mul(dtype.size() as u64));
    if o.dtype != dtype || o.shape != shape || bytes != Some(o.data.len() as u64) {
        return Err(format!("output {} is {}{:?}, expected {dtype}{shape:?}", i + 1, o.dtype, o.shape));
    }
    Ok(())
}

/// Runs `f` on an f32 output's elements, zeroed first (in place when aligned).
pub(super) fn fill_f32(out: &mut TensorMut, f: impl FnOnce(&mut [f32]) -> Result<(), String>) -> Result<(), String> {
    if let Some(v) = f32_view_mut(out.data) {
        v.fill(0.0);
        return f(v);
    }
    let mut v = vec![0f32; out.data.len() / 4];
    f(&mut v)?;
    store_f32s(out.data, &v);
    Ok(())
}

/// Runs `f` on an f32 output's elements (in place when aligned, with whatever they held:
/// `f` must write every element).
pub(super) fn write_f32(out: &mut TensorMut, f: impl FnOnce(&mut [f32]) -> Result<(), String>) -> Result<(), String> {
    if let Some(v) = f32_view_mut(out.data) {
        return f(v);
    }
    let mut v = vec![0f32; out.data.len() / 4];
    f(&mut v)?;
    store_f32s(out.data, &v);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Other float dtypes: f16 and bf16 are widened to f32 (exactly), computed by the f32
// kernels and rounded back; f64 is computed in f64 by plain loops.

/// The one dtype of a product's operands (f32, f16, bf16 or f64).
pub(super) fn operands_dtype(ts: &[Option<TensorRef>]) -> Result<DType, String> {
    let mut it = ts.iter().flatten();
    let d = it.next().map_or(DType::F32, |t| t.dtype);
    if !MATMUL_FLOATS.contains(&d) {
        return Err(format!("the operands must be f32, f16, bf16 or f64, found {d}"));
    }
    if let Some(t) = it.find(|t| t.dtype != d) {
        return Err(format!("the operands must have one dtype, found {d} and {}", t.dtype));
    }
    Ok(d)
}

/// The data of `t` checked against its shape.
pub(super) fn check_len(t: TensorRef, name: &str) -> Result<(), String> {
    if numel(t.shape).and_then(|n| n.checked_mul(t.dtype.size() as u64)) != Some(t.data.len() as u64) {
        return Err(format!("{name}: {} bytes of data do not match the shape {}{:?}", t.data.len(), t.dtype, t.shape));
    }
    Ok(())
}

/// An f32, f16 or bf16 input's elements as f32 (exact).
pub(super) fn wide<'a>(t: TensorRef<'a>, name: &str) -> Result<Cow<'a, [f32]>, String> {
    if t.dtype == DType::F32 {
        return values(t, name);
    }
    check_len(t, name)?;
    Ok(Cow::Owned(t.data.chunks_exact(t.dtype.size()).map(|c| load_f64(t.dtype, c) as f32).collect()))
}

/// An input's elements as f64.
pub(super) fn wide64(t: TensorRef, name: &str) -> Result<Vec<f64>, String> {
    check_len(t, name)?;
    Ok(t.to_f64())
}

/// Stores values into a float output (rounding to nearest even for f16 and bf16).
pub(super) fn put_wide(out: &mut TensorMut, v: impl Iterator<Item = f64>) -> Result<(), String> {
    let (d, size) = (out.dtype, out.dtype.size());
    for (chunk, x) in out.data.chunks_exact_mut(size).zip(v) {
        store_f64(d, x, chunk);
    }
    Ok(())
}

/// Coordinates of flat index `i` in `dims` (row-major).
pub(super) fn unflatten(mut i: usize, dims: &[usize], out: &mut [usize]) {
    for (o, &d) in out.iter_mut().zip(dims).rev() {
        *o = i % d.max(1);
        i /= d.max(1);
    }
}
