//! Host kernels: the reference implementations. They read inputs and write outputs as
//! dense row-major host tensors.

use super::{Attrs, InferFn, OutInfo, TensorInfo};
use crate::ir::host_tensor::{HostTensor, TensorMut, TensorRef};
use crate::ir::operators::shape::broadcast_strides;
use crate::ir::operators::tensor::check_data;
use crate::ir::types::DType;

/// A host kernel: computes the outputs (pre-shaped, zeroed) from the inputs on the host.
pub type HostFn = fn(&[Option<&HostTensor>], &Attrs, &mut [HostTensor]) -> Result<(), String>;

/// An in-place host kernel: reads its inputs and writes its outputs where they lie (a host
/// view's memory), and writes every element of its outputs, which hold stale bytes. On
/// the host device the operators that have one run without copying an operand (weights
/// included) into or out of a scratch buffer; their [`HostFn`] is [`on_tensors`] over it.
pub type ViewFn = fn(&[Option<TensorRef>], &Attrs, &mut [TensorMut]) -> Result<(), String>;

/// Runs an in-place kernel on host tensors.
pub fn on_tensors(
    f: ViewFn,
    ins: &[Option<&HostTensor>],
    attrs: &Attrs,
    outs: &mut [HostTensor],
) -> Result<(), String> {
    let refs: smallvec::SmallVec<[Option<TensorRef>; 6]> = ins.iter().map(|t| t.map(TensorRef::from)).collect();
    let mut muts: smallvec::SmallVec<[TensorMut; 2]> = outs.iter_mut().map(HostTensor::view_mut).collect();
    f(&refs, attrs, &mut muts)
}

// ---------------------------------------------------------------------------------------
// The prologue the kernels share: the inputs' data checked against their shapes, the
// outputs inferred from the actual inputs and the given ones checked against them, so a
// kernel only indexes tensors whose sizes are known to be right.

/// The inputs as inference sees them (values included), their data checked.
pub(crate) fn infos<'a>(ins: &[Option<&'a HostTensor>]) -> Result<Vec<Option<TensorInfo<'a>>>, String> {
    let mut infos = Vec::with_capacity(ins.len());
    for (i, t) in ins.iter().enumerate() {
        infos.push(match t {
            Some(t) => {
                check_data(t, &format!("input {}", i + 1))?;
                Some(TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) })
            }
            None => None,
        });
    }
    Ok(infos)
}

/// Checks the inputs' data, infers the outputs and checks the given ones (at least one, a
/// prefix of the inferred) against them; returns the inferred outputs.
pub(crate) fn prepare(
    ins: &[Option<&HostTensor>],
    attrs: &Attrs,
    outs: &[HostTensor],
    infer: InferFn,
) -> Result<Vec<OutInfo>, String> {
    let inferred = infer(&infos(ins)?, attrs)?;
    if outs.is_empty() || outs.len() > inferred.len() {
        return Err(format!("expected 1 to {} output tensors, found {}", inferred.len(), outs.len()));
    }
    for (i, (o, (dtype, shape))) in outs.iter().zip(&inferred).enumerate() {
        if o.dtype != *dtype || o.shape != *shape {
            return Err(format!("output {} is {}{:?}, expected {dtype}{shape:?}", i + 1, o.dtype, o.shape));
        }
        check_data(o, &format!("output {}", i + 1))?;
    }
    Ok(inferred)
}

/// Required input `i`.
pub(crate) fn req<'a>(ins: &[Option<&'a HostTensor>], i: usize) -> Result<&'a HostTensor, String> {
    ins.get(i).copied().flatten().ok_or_else(|| format!("input {} is required", i + 1))
}

/// The first output.
pub(crate) fn first(outs: &mut [HostTensor]) -> Result<&mut HostTensor, String> {
    outs.first_mut().ok_or_else(|| "an output tensor is required".to_string())
}

/// The f32 elements of a tensor (an error for other dtypes).
pub fn f32s(t: &HostTensor, op: &str) -> Result<Vec<f32>, String> {
    if t.dtype != DType::F32 {
        return Err(format!("{op} supports f32 tensors, found {}", t.dtype));
    }
    Ok(load_f32s(&t.data))
}

/// Little-endian f32 bytes as f32 elements.
pub fn load_f32s(data: &[u8]) -> Vec<f32> {
    data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Stores f32 elements into a tensor of the same element count.
pub fn put_f32s(t: &mut HostTensor, v: &[f32]) {
    store_f32s(&mut t.data, v)
}

/// Stores f32 elements as little-endian bytes.
pub fn store_f32s(out: &mut [u8], v: &[f32]) {
    for (chunk, x) in out.chunks_exact_mut(4).zip(v) {
        chunk.copy_from_slice(&x.to_le_bytes());
    }
}

pub fn need<'a>(ins: &[Option<&'a HostTensor>], i: usize, op: &str) -> Result<&'a HostTensor, String> {
    ins.get(i).copied().flatten().ok_or_else(|| format!("{op}: input {} is required", i + 1))
}

/// Applies `f` elementwise (f32).
pub fn unary(
    ins: &[Option<&HostTensor>],
    out: &mut [HostTensor],
    op: &str,
    f: impl Fn(f32) -> f32,
) -> Result<(), String> {
    let x = f32s(need(ins, 0, op)?, op)?;
    let y: Vec<f32> = x.iter().map(|&v| f(v)).collect();
    put_f32s(&mut out[0], &y);
    Ok(())
}

/// Applies `f` to two broadcast inputs (f32).
pub fn binary(
    ins: &[Option<&HostTensor>],
    out: &mut [HostTensor],
    op: &str,
    f: impl Fn(f32, f32) -> f32,
) -> Result<(), String> {
    let (a, b) = (need(ins, 0, op)?, need(ins, 1, op)?);
    let (av, bv) = (f32s(a, op)?, f32s(b, op)?);
    let shape = out[0].shape.clone();
    let (sa, sb) = (broadcast_strides(&a.shape, &shape), broadcast_strides(&b.shape, &shape));
    let n = out[0].numel() as usize;
    let mut y = vec![0f32; n];
    let mut idx = vec![0i64; shape.len()];
    for (k, slot) in y.iter_mut().enumerate() {
        let (mut ia, mut ib) = (0usize, 0usize);
        for d in 0..shape.len() {
            ia += idx[d] as usize * sa[d];
            ib += idx[d] as usize * sb[d];
        }
        *slot = f(av[ia], bv[ib]);
        // Advance the multi-index.
        let _ = k;
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    put_f32s(&mut out[0], &y);
    Ok(())
}

/// Little-endian f32 bytes viewed in place, when they are 4-byte aligned (and a whole
/// number of elements).
pub fn f32_slice(data: &[u8]) -> Option<&[f32]> {
    if cfg!(target_endian = "big") {
        return None;
    }
    // SAFETY: every bit pattern is a valid f32, and `align_to` only hands out the aligned
    // middle part (checked to be everything).
    let (head, mid, tail) = unsafe { data.align_to::<f32>() };
    (head.is_empty() && tail.is_empty()).then_some(mid)
}

/// [`f32_slice`] for writing.
pub fn f32_slice_mut(data: &mut [u8]) -> Option<&mut [f32]> {
    if cfg!(target_endian = "big") {
        return None;
    }
    // SAFETY: as in `f32_slice`; every f32 written is valid as bytes.
    let (head, mid, tail) = unsafe { data.align_to_mut::<f32>() };
    (head.is_empty() && tail.is_empty()).then_some(mid)
}

/// Tensors and attributes for the kernels' tests (host and OpenCL).
#[cfg(test)]
pub(crate) mod testing {
    use super::Attrs;
    use crate::ir::attrs::AttrValue;
    use crate::ir::host_tensor::{store_f64, HostTensor};
    use crate::ir::types::DType;

    /// A tensor of dtype `d` with the values `vals` (converted as `store_f64` does).
    pub(crate) fn tensor(d: DType, shape: &[i64], vals: &[f64]) -> HostTensor {
        let mut t = HostTensor::zeros(d, shape).unwrap();
        for (c, &v) in t.data.chunks_exact_mut(d.size()).zip(vals) {
            store_f64(d, v, c);
        }
        t
    }

    pub(crate) fn attrs(list: &[(&str, AttrValue)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }
}
