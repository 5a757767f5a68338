//! Operator schemas of the sequence-state family: CausalConvWithState, LinearAttention and
//! TensorScatter (the kernels are in `crate::ops::vision` and `crate::ops::vision_cl`).
//! They are the stateful building blocks of recurrent-style language models (Mamba, Gated
//! DeltaNet) and of KV-cache updates.

use super::elementwise::{check_dtype, input, optional};
use super::tensor::check_shape;
use crate::ir::attrs::*;
use crate::ir::schema::*;
use crate::ir::types::DType;

/// The float dtypes of this family.
pub(crate) const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::F64];

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(CausalConvWithState, in 2..=4, out 1..=2, attrs &[attr!("activation", Str)],
        validate validate_causal_conv, infer infer_causal_conv,
        "causal depthwise 1-D convolution of input [batch, channels, length] by weight [channels, 1, k] (+ bias \
        [channels]) after past_state [batch, channels, k - 1] (zeros if omitted); output [batch, channels, length] \
        (activation none, silu or swish: x·sigmoid(x)) and present_state, the last k - 1 positions; f16, f32, f64"),
    op!(LinearAttention, in 3..=6, out 1..=2,
        attrs &[
            attr!("chunk_size", Int),
            attr!("kv_num_heads", Int),
            attr!("q_num_heads", Int),
            attr!("scale", Float),
            attr!("update_rule", Str),
        ],
        validate validate_linear_attention, infer infer_linear_attention,
        "recurrent linear attention over query [B, T, Hq·dk], key [B, T, Hkv·dk], value [B, T, Hkv·dv] with state \
        [B, Hkv, dk, dv] (past_state, zeros if omitted): update_rule linear, gated (decay, log-space, per head or \
        per key dim), delta (beta) or gated_delta (default); o = scale·qᵀS (scale 0: 1/√dk); query heads share KV \
        heads in groups; outputs output [B, T, Hq·dv] and present_state; f16, f32, f64"),
    op!(TensorScatter, in 2..=3, out 1..=1, attrs &[attr!("axis", Int), attr!("mode", Str)],
        validate validate_tensor_scatter, infer infer_tensor_scatter,
        "past_cache with update written along `axis` (default -2, not 0) from each batch row's write_indices (i64 \
        [batch], zeros if omitted); mode linear (out of range is an error) or circular (wraps); any dtype"),
];

// ---------------------------------------------------------------------------------------
// CausalConvWithState.

/// Whether the activation is SiLU.
pub(crate) fn silu(a: &Attrs) -> Result<bool, String> {
    match a.str("activation").unwrap_or("none") {
        "none" => Ok(false),
        "silu" | "swish" => Ok(true),
        other => Err(format!(
            "attribute `activation` of @onnx.CausalConvWithState must be \"none\", \"silu\" or \"swish\", found {other:?}"
        )),
    }
}

fn validate_causal_conv(a: &Attrs) -> Result<(), String> {
    silu(a).map(|_| ())
}

/// CausalConvWithState's sizes: batch, channels, length, kernel.
pub(crate) fn causal_conv_dims(ins: &[Option<(DType, &[i64])>]) -> Result<(DType, [usize; 4]), String> {
    const OP: &str = "CausalConvWithState";
    let get = |i: usize| ins.get(i).copied().flatten();
    let x = get(0).ok_or("input 1 (input) is required")?;
    let w = get(1).ok_or("input 2 (weight) is required")?;
    if !FLOATS.contains(&x.0) {
        return Err(format!("input 1 (input) must be f32, f16 or f64, found {}", x.0));
    }
    for (i, name) in [(1, "weight"), (2, "bias"), (3, "past_state")] {
        if let Some(t) = get(i) {
            if t.0 != x.0 {
                return Err(format!("input {} ({name}) must have the input's dtype {}, found {}", i + 1, x.0, t.0));
            }
        }
    }
    if x.1.len() != 3 || x.1.iter().any(|&d| d < 0) {
        return Err(format!("{OP}: the input must be [batch, channels, length], found shape {:?}", x.1));
    }
    check_shape(x.1, OP)?;
    let (b, c, l) = (x.1[0], x.1[1], x.1[2]);
    if w.1.len() != 3 || w.1[0] != c || w.1[1] != 1 || w.1[2] < 1 {
        return Err(format!("{OP}: the weight must be [channels = {c}, 1, k ≥ 1], found shape {:?}", w.1));
    }
    let k = w.1[2];
    check_shape(w.1, OP)?;
    if let Some(t) = get(2) {
        if t.1 != [c] {
            return Err(format!("{OP}: the bias must be [{c}], found shape {:?}", t.1));
        }
    }
    if let Some(t) = get(3) {
        if t.1 != [b, c, k - 1] {
            return Err(format!("{OP}: past_state must be [{b}, {c}, {}], found shape {:?}", k - 1, t.1));
        }
    }
    check_shape(&[b, c, l + k], OP)?;
    Ok((x.0, [b as usize, c as usize, l as usize, k as usize]))
}

fn shapes<'a>(ins: &'a [Option<TensorInfo>]) -> Vec<Option<(DType, &'a [i64])>> {
    ins.iter().map(|t| t.as_ref().map(|t| (t.dtype, t.shape))).collect()
}

pub(crate) fn infer_causal_conv(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    silu(a)?;
    let (d, [b, c, l, k]) = causal_conv_dims(&shapes(ins))?;
    let (b, c) = (b as i64, c as i64);
    Ok(vec![(d, vec![b, c, l as i64]), (d, vec![b, c, k as i64 - 1])])
}

// ---------------------------------------------------------------------------------------
// LinearAttention.

/// A LinearAttention's checked attributes and sizes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LinAttn {
    pub(crate) gating: bool,
    pub(crate) delta: bool,
    pub(crate) scale: f64,
    pub(crate) b: usize,
    pub(crate) t: usize,
    pub(crate) hq: usize,
    pub(crate) hkv: usize,
    pub(crate) dk: usize,
    pub(crate) dv: usize,
    /// decay per key dim (else per head).
    pub(crate) decay_per_dim: bool,
    /// beta per head (else one per step).
    pub(crate) beta_per_head: bool,
    pub(crate) dtype: DType,
    pub(crate) state_dtype: DType,
}

fn rule(a: &Attrs) -> Result<(bool, bool), String> {
    match a.str("update_rule").unwrap_or("gated_delta") {
        "linear" => Ok((false, false)),
        "gated" => Ok((true, false)),
        "delta" => Ok((false, true)),
        "gated_delta" => Ok((true, true)),
        other => Err(format!(
            "attribute `update_rule` of @onnx.LinearAttention must be \"linear\", \"gated\", \"delta\" or \
             \"gated_delta\", found {other:?}"
        )),
    }
}

fn validate_linear_attention(a: &Attrs) -> Result<(), String> {
    rule(a)?;
    let (q, kv) = (a.int("q_num_heads", 0), a.int("kv_num_heads", 0));
    if a.get("q_num_heads").is_none() || a.get("kv_num_heads").is_none() {
        return Err("@onnx.LinearAttention: q_num_heads and kv_num_heads are required".into());
    }
    if q < 1 || kv < 1 || q % kv != 0 {
        return Err(format!(
            "@onnx.LinearAttention: q_num_heads ({q}) must be a positive multiple of kv_num_heads ({kv})"
        ));
    }
    let s = a.float("scale", 0.0);
    if !s.is_finite() {
        return Err(format!("attribute `scale` of @onnx.LinearAttention must be finite, found {s}"));
    }
    Ok(())
}

pub(crate) fn lin_attn(ins: &[Option<(DType, &[i64])>], a: &Attrs) -> Result<LinAttn, String> {
    const OP: &str = "LinearAttention";
    validate_linear_attention(a)?;
    let (gating, delta) = rule(a)?;
    let get = |i: usize| ins.get(i).copied().flatten();
    let names = ["query", "key", "value", "past_state", "decay", "beta"];
    let mut qkv = Vec::new();
    for (i, name) in names.iter().enumerate().take(3) {
        let t = get(i).ok_or_else(|| format!("input {} ({name}) is required", i + 1))?;
        if t.1.len() != 3 || t.1.iter().any(|&d| d < 0) {
            return Err(format!("{OP}: {name} must be [B, T, heads·dim], found shape {:?}", t.1));
        }
        check_shape(t.1, OP)?;
        qkv.push(t);
    }
    let (q, k, v) = (qkv[0], qkv[1], qkv[2]);
    if !FLOATS.contains(&q.0) {
        return Err(format!("input 1 (query) must be f32, f16 or f64, found {}", q.0));
    }
    for (i, t) in [(1, Some(k)), (2, Some(v)), (4, get(4)), (5, get(5))] {
        if let Some(t) = t {
            if t.0 != q.0 {
                return Err(format!(
                    "input {} ({}) must have the query's dtype {}, found {}",
                    i + 1,
                    names[i],
                    q.0,
                    t.0
                ));
            }
        }
    }
    let (hq, hkv) = (a.int("q_num_heads", 1), a.int("kv_num_heads", 1));
    let (b, t) = (q.1[0], q.1[1]);
    for (name, x) in [("key", k), ("value", v)] {
        if x.1[..2] != [b, t] {
            return Err(format!("{OP}: {name} must be [{b}, {t}, ...] as the query, found shape {:?}", x.1));
        }
    }
    if q.1[2] % hq != 0 || k.1[2] % hkv != 0 || v.1[2] % hkv != 0 {
        return Err(format!(
            "{OP}: the last dims of query {:?}, key {:?} and value {:?} must divide by the head counts {hq} and {hkv}",
            q.1, k.1, v.1
        ));
    }
    let (dk, dv) = (q.1[2] / hq, v.1[2] / hkv);
    if k.1[2] / hkv != dk {
        return Err(format!("{OP}: key's head size {} differs from the query's {dk}", k.1[2] / hkv));
    }
    let state = [b, hkv, dk, dv];
    let state_dtype = match get(3) {
        Some(s) => {
            if !FLOATS.contains(&s.0) {
                return Err(format!("input 4 (past_state) must be f32, f16 or f64, found {}", s.0));
            }
            if s.1 != state {
                return Err(format!("{OP}: past_state must be {state:?}, found shape {:?}", s.1));
            }
            s.0
        }
        None => q.0,
    };
    check_shape(&state, OP)?;
    let mut decay_per_dim = false;
    match (gating, get(4)) {
        (true, None) => return Err(format!("{OP}: update_rule gated and gated_delta need the decay input")),
        (false, Some(_)) => return Err(format!("{OP}: update_rule linear and delta take no decay input")),
        (true, Some(g)) => {
            if g.1.len() != 3 || g.1[..2] != [b, t] || (g.1[2] != hkv && g.1[2] != hkv * dk) {
                return Err(format!("{OP}: decay must be [{b}, {t}, {hkv} or {}], found shape {:?}", hkv * dk, g.1));
            }
            decay_per_dim = g.1[2] == hkv * dk && hkv * dk != hkv;
        }
        (false, None) => {}
    }
    let mut beta_per_head = false;
    match (delta, get(5)) {
        (true, None) => return Err(format!("{OP}: update_rule delta and gated_delta need the beta input")),
        (false, Some(_)) => return Err(format!("{OP}: update_rule linear and gated take no beta input")),
        (true, Some(be)) => {
            if be.1.len() != 3 || be.1[..2] != [b, t] || (be.1[2] != hkv && be.1[2] != 1) {
                return Err(format!("{OP}: beta must be [{b}, {t}, {hkv} or 1], found shape {:?}", be.1));
            }
            beta_per_head = be.1[2] == hkv && hkv != 1;
        }
        (false, None) => {}
    }
    let s = a.float("scale", 0.0);
    let scale = if s == 0.0 { 1.0 / (dk as f64).sqrt() } else { s };
    let u = |v: i64| v as usize;
    Ok(LinAttn {
        gating,
        delta,
        scale,
        b: u(b),
        t: u(t),
        hq: u(hq),
        hkv: u(hkv),
        dk: u(dk),
        dv: u(dv),
        decay_per_dim,
        beta_per_head,
        dtype: q.0,
        state_dtype,
    })
}

pub(crate) fn infer_linear_attention(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    let p = lin_attn(&shapes(ins), a)?;
    let i = |v: usize| v as i64;
    Ok(vec![(p.dtype, vec![i(p.b), i(p.t), i(p.hq * p.dv)]), (p.state_dtype, vec![i(p.b), i(p.hkv), i(p.dk), i(p.dv)])])
}

// ---------------------------------------------------------------------------------------
// TensorScatter.

pub(crate) fn circular(a: &Attrs) -> Result<bool, String> {
    match a.str("mode").unwrap_or("linear") {
        "linear" => Ok(false),
        "circular" => Ok(true),
        other => {
            Err(format!("attribute `mode` of @onnx.TensorScatter must be \"linear\" or \"circular\", found {other:?}"))
        }
    }
}

fn validate_tensor_scatter(a: &Attrs) -> Result<(), String> {
    circular(a).map(|_| ())
}

/// TensorScatter's view of the cache as `[batch, mid, max_len, inner]` (mid: the dims
/// between the batch and the axis) and the update's length along the axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ScatterDims {
    pub(crate) batch: usize,
    pub(crate) mid: usize,
    pub(crate) max_len: usize,
    pub(crate) len: usize,
    pub(crate) inner: usize,
}

pub(crate) fn scatter_dims(ins: &[Option<(DType, &[i64])>], a: &Attrs) -> Result<ScatterDims, String> {
    const OP: &str = "TensorScatter";
    circular(a)?;
    let get = |i: usize| ins.get(i).copied().flatten();
    let c = get(0).ok_or("input 1 (past_cache) is required")?;
    let u = get(1).ok_or("input 2 (update) is required")?;
    if u.0 != c.0 {
        return Err(format!("input 2 (update) must have past_cache's dtype {}, found {}", c.0, u.0));
    }
    let r = c.1.len();
    if r < 2 || u.1.len() != r || c.1.iter().chain(u.1).any(|&d| d < 0) {
        return Err(format!(
            "{OP}: past_cache (rank 2 or more) and update must have one rank, found shapes {:?} and {:?}",
            c.1, u.1
        ));
    }
    check_shape(c.1, OP)?;
    let axis = a.int("axis", -2);
    let ax = if axis < 0 { axis + r as i64 } else { axis };
    if ax < 1 || ax >= r as i64 {
        return Err(format!("{OP}: axis {axis} is out of range for rank {r} (it must not be the batch axis 0)"));
    }
    let ax = ax as usize;
    for i in 0..r {
        if (i != ax && c.1[i] != u.1[i]) || (i == ax && u.1[i] > c.1[i]) {
            return Err(format!(
                "{OP}: update {:?} must match past_cache {:?} except along axis {ax}, where it may be shorter",
                u.1, c.1
            ));
        }
    }
    if let Some(w) = get(2) {
        if w.0 != DType::I64 || w.1 != [c.1[0]] {
            return Err(format!("input 3 (write_indices) must be i64 [{}], found {}{:?}", c.1[0], w.0, w.1));
        }
    }
    let p = |s: &[i64]| s.iter().product::<i64>() as usize;
    Ok(ScatterDims {
        batch: c.1[0] as usize,
        mid: p(&c.1[1..ax]),
        max_len: c.1[ax] as usize,
        len: u.1[ax] as usize,
        inner: p(&c.1[ax + 1..]),
    })
}

pub(crate) fn infer_tensor_scatter(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    let c = input(ins, 0, "past_cache")?;
    if let Some(w) = optional(ins, 2) {
        check_dtype(w, 2, "write_indices", &[DType::I64])?;
    }
    scatter_dims(&shapes(ins), a)?;
    Ok(vec![(c.dtype, c.shape.to_vec())])
}

/// The cache position each (batch row, update step) writes, checked (linear mode: inside
/// the cache).
pub(crate) fn scatter_positions(d: &ScatterDims, idx: &[i64], circ: bool) -> Result<Vec<usize>, String> {
    let mut pos = Vec::with_capacity(d.batch * d.len);
    for b in 0..d.batch {
        let w = idx.get(b).copied().unwrap_or(0);
        for s in 0..d.len {
            let p = w.checked_add(s as i64).ok_or("TensorScatter: a write index overflows")?;
            let p = if circ && d.max_len > 0 { p.rem_euclid(d.max_len as i64) } else { p };
            if p < 0 || p >= d.max_len as i64 {
                return Err(format!(
                    "TensorScatter: batch row {b} writes at {p}, outside the cache's {} positions (write index {w})",
                    d.max_len
                ));
            }
            pos.push(p as usize);
        }
    }
    Ok(pos)
}
