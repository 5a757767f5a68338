//! Operator schema of FlexAttention, from the `ai.onnx.preview` domain (the kernels are in
//! `crate::ops::flex` and `crate::ops::flex_cl`). Its `score_mod` and `prob_mod` subgraphs
//! are not supported (the importer refuses graph attributes).

use super::elementwise::input;
use super::tensor::check_shape;
use crate::ir::attrs::*;
use crate::ir::schema::*;
use crate::ir::types::DType;

/// The operators of the `ai.onnx.preview` domain the VM has.
pub const PREVIEW_DOMAIN_OPS: &[&str] = &["FlexAttention"];

const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::F64];

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[op!(FlexAttention, in 3..=3, out 1..=1,
    attrs &[attr!("scale", Float), attr!("softmax_precision", Int)],
    validate validate_flex, infer infer_flex,
    "ai.onnx.preview: softmax(scale · Q Kᵀ) V over Q [B, Hq, L, E], K [B, Hkv, S, E], V [B, Hkv, S, Ev] (Hq a \
    multiple of Hkv; scale default 1/√E) into [B, Hq, L, Ev]; f16 (softmax in f32), f32, f64; score_mod and \
    prob_mod subgraphs are not supported")];

/// FlexAttention's sizes and scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Flex {
    pub(crate) b: usize,
    pub(crate) hq: usize,
    pub(crate) hkv: usize,
    pub(crate) l: usize,
    pub(crate) s: usize,
    pub(crate) e: usize,
    pub(crate) ev: usize,
    pub(crate) scale: f64,
    pub(crate) dtype: DType,
}

fn validate_flex(a: &Attrs) -> Result<(), String> {
    let s = a.float("scale", 1.0);
    if !s.is_finite() {
        return Err(format!("attribute `scale` of @onnx.FlexAttention must be finite, found {s}"));
    }
    if let Some(p) = a.get("softmax_precision") {
        if !matches!(p, AttrValue::Int(1 | 10 | 11 | 16)) {
            return Err(format!(
                "attribute `softmax_precision` of @onnx.FlexAttention must be an ONNX float type (1, 10, 11 or 16), \
                 found {p}"
            ));
        }
    }
    Ok(())
}

pub(crate) fn flex_dims(ins: &[Option<(DType, &[i64])>], a: &Attrs) -> Result<Flex, String> {
    const OP: &str = "FlexAttention";
    validate_flex(a)?;
    let get = |i: usize| ins.get(i).copied().flatten();
    let q = get(0).ok_or("input 1 (Q) is required")?;
    let k = get(1).ok_or("input 2 (K) is required")?;
    let v = get(2).ok_or("input 3 (V) is required")?;
    if !FLOATS.contains(&q.0) {
        return Err(format!("input 1 (Q) must be f32, f16 or f64, found {}", q.0));
    }
    for (i, name, t) in [(2, "K", k), (3, "V", v)] {
        if t.0 != q.0 {
            return Err(format!("input {i} ({name}) must have Q's dtype {}, found {}", q.0, t.0));
        }
    }
    for (name, t) in [("Q", q), ("K", k), ("V", v)] {
        if t.1.len() != 4 || t.1.iter().any(|&d| d < 0) {
            return Err(format!("{OP}: {name} must be rank 4, found shape {:?}", t.1));
        }
        check_shape(t.1, OP)?;
    }
    let (b, hq, l, e) = (q.1[0], q.1[1], q.1[2], q.1[3]);
    let (hkv, s) = (k.1[1], k.1[2]);
    if k.1[0] != b || v.1[0] != b || k.1[3] != e || v.1[1] != hkv || v.1[2] != s {
        return Err(format!(
            "{OP}: K must be [{b}, Hkv, S, {e}] and V [{b}, Hkv, S, Ev], found shapes {:?} and {:?}",
            k.1, v.1
        ));
    }
    if hkv < 1 || hq % hkv != 0 {
        return Err(format!("{OP}: Q's {hq} heads must be a multiple of K's {hkv}"));
    }
    let ev = v.1[3];
    check_shape(&[b, hq, l, ev], OP)?;
    let scale = match a.get("scale") {
        Some(_) => a.float("scale", 1.0),
        None => 1.0 / (e.max(1) as f64).sqrt(),
    };
    let u = |x: i64| x as usize;
    Ok(Flex { b: u(b), hq: u(hq), hkv: u(hkv), l: u(l), s: u(s), e: u(e), ev: u(ev), scale, dtype: q.0 })
}

pub(crate) fn infer_flex(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    input(ins, 0, "Q")?;
    let sh: Vec<Option<(DType, &[i64])>> = ins.iter().map(|t| t.as_ref().map(|t| (t.dtype, t.shape))).collect();
    let p = flex_dims(&sh, a)?;
    let i = |v: usize| v as i64;
    Ok(vec![(p.dtype, vec![i(p.b), i(p.hq), i(p.l), i(p.ev)])])
}
