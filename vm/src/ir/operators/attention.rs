//! Operator schemas of the transformer family: Attention (opsets 23–25), RotaryEmbedding,
//! Swish and SwiGLU (the kernels are in `crate::ops::attention` and
//! `crate::ops::attention_cl`).
//!
//! Attention's whole geometry (heads, sequence lengths, head sizes, how the mask broadcasts,
//! which cache the causal frontier counts from) is decided once from the input shapes and
//! the attributes by [`attention_plan`], which inference, the host kernel and the OpenCL
//! kernel share.

use super::elementwise::{check_dtype, finite_attr, flag_attr, input, optional};
use super::tensor::check_shape;
use crate::ir::attrs::*;
use crate::ir::schema::*;
use crate::ir::types::DType;

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(Attention, in 3..=7, out 1..=4,
        attrs &[attr!("is_causal", Int), attr!("kv_num_heads", Int), attr!("q_num_heads", Int),
            attr!("qk_matmul_output_mode", Int), attr!("scale", Float), attr!("softcap", Float),
            attr!("softmax_precision", Int), attr!("left_window_size", Int), attr!("right_window_size", Int)],
        validate validate_attention, infer infer_attention,
        "softmax(Q·Kᵀ·scale (softcapped) + bias)·V over 4-D (B, heads, S, D) or 3-D (B, S, heads·D, with \
        q_num_heads/kv_num_heads) Q, K, V of one float dtype (f16, f32, f64); grouped-query heads; bias from \
        attn_mask (bool, or additive float; broadcast, padded with -inf past its last dim), is_causal \
        (bottom-right), left/right_window_size and nonpad_kv_seqlen; past_key/past_value concatenate into \
        present_key/present_value; output 4 by qk_matmul_output_mode 0–3; a fully masked row gives 0"),
    op!(RotaryEmbedding, in 3..=4, out 1..=1,
        attrs &[attr!("interleaved", Int), attr!("num_heads", Int), attr!("rotary_embedding_dim", Int)],
        validate validate_rotary, infer infer_rotary,
        "rotates pairs of the first rotary_embedding_dim (default all) elements of each head of a 4-D \
        (B, heads, S, D) or 3-D (B, S, heads·D, with num_heads) input by cos/sin caches (rows picked by \
        position_ids, else (B, S, ·) caches); pairs are halves or, with interleaved, neighbours (f16, f32, f64)"),
    op!(Swish, in 1..=1, out 1..=1, attrs &[attr!("alpha", Float)], validate validate_swish, infer infer_swish,
        "x · sigmoid(alpha · x) (alpha 1; f16, f32, f64)"),
    op!(SwiGLU, in 2..=2, out 1..=1, attrs &[attr!("alpha", Float)], validate validate_swiglu, infer infer_swiglu,
        "a · sigmoid(alpha · a) · b for a and b of one shape and dtype (alpha 1; f16, f32, f64)"),
];

/// The float dtypes of this family.
pub(crate) const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::F64];

// ---------------------------------------------------------------------------------------
// Attention.

fn int_at_least(a: &Attrs, name: &str, min: i64) -> Result<(), String> {
    match a.get(name) {
        Some(AttrValue::Int(v)) if *v < min => {
            Err(format!("attribute `{name}` of @onnx.Attention must be at least {min}, found {v}"))
        }
        _ => Ok(()),
    }
}

pub(crate) fn validate_attention(a: &Attrs) -> Result<(), String> {
    const OP: &str = "Attention";
    flag_attr(a, "is_causal", OP)?;
    int_at_least(a, "q_num_heads", 1)?;
    int_at_least(a, "kv_num_heads", 1)?;
    int_at_least(a, "left_window_size", -1)?;
    int_at_least(a, "right_window_size", -1)?;
    match a.get("qk_matmul_output_mode") {
        Some(AttrValue::Int(v)) if !(0..=3).contains(v) => {
            return Err(format!("attribute `qk_matmul_output_mode` of @onnx.{OP} must be 0, 1, 2 or 3, found {v}"))
        }
        _ => {}
    }
    finite_attr(a, "scale", OP)?;
    if a.get("scale").is_some() && a.float("scale", 1.0) <= 0.0 {
        return Err(format!("attribute `scale` of @onnx.{OP} must be positive, found {}", a.float("scale", 1.0)));
    }
    finite_attr(a, "softcap", OP)?;
    if a.float("softcap", 0.0) < 0.0 {
        return Err(format!(
            "attribute `softcap` of @onnx.{OP} must be ≥ 0 (0: none), found {}",
            a.float("softcap", 0.0)
        ));
    }
    softmax_precision(a, None).map(|_| ())
}

/// The dtype the softmax runs in: `softmax_precision` (an ONNX dtype code), else `q`.
pub(crate) fn softmax_precision(a: &Attrs, q: Option<DType>) -> Result<Option<DType>, String> {
    match a.get("softmax_precision") {
        None => Ok(q),
        Some(AttrValue::Int(1)) => Ok(Some(DType::F32)),
        Some(AttrValue::Int(10)) => Ok(Some(DType::F16)),
        Some(AttrValue::Int(11)) => Ok(Some(DType::F64)),
        Some(v) => Err(format!(
            "attribute `softmax_precision` of @onnx.Attention must be 1 (f32), 10 (f16) or 11 (f64), found {} \
             (bfloat16 is not supported)",
            v.describe()
        )),
    }
}

/// How attn_mask applies: its dtype, its dims right-aligned to (B, heads, S_q, kv) and its
/// element strides for that index (0 along a broadcast dim). Keys past `kv` are masked (the
/// reference pads the mask with -inf / false).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MaskPlan {
    pub dtype: DType,
    pub kv: usize,
    pub strides: [usize; 4],
}

/// Where the causal frontier and the sliding window of query row `i` sit: key `j` is at
/// distance `i + offset - j` from the query.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Offset {
    /// The same for every batch (the past length, or 0).
    Fixed(i64),
    /// `nonpad_kv_seqlen[b] - S_q` (an external cache).
    NonPad,
}

/// Attention's geometry and options, decided from the input shapes and the attributes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AttentionPlan {
    pub dtype: DType,
    /// The softmax's dtype.
    pub softmax: DType,
    /// 3-D (B, S, heads·D) inputs and Y rather than 4-D (B, heads, S, D).
    pub packed: bool,
    pub batch: usize,
    pub q_heads: usize,
    pub kv_heads: usize,
    pub q_len: usize,
    /// New keys (K's sequence length) and past keys; the keys attended are `past + kv_len`.
    pub kv_len: usize,
    pub past: usize,
    pub head: usize,
    pub v_head: usize,
    pub mask: Option<MaskPlan>,
    pub causal: bool,
    pub nonpad: bool,
    pub offset: Offset,
    pub left: i64,
    pub right: i64,
    /// sqrt(scale) as applied to Q and to K, in f64 (the kernels round it to the dtype).
    pub scale_sqrt: f64,
    /// 0: none.
    pub softcap: f64,
    pub mode: i64,
}

impl AttentionPlan {
    pub fn total(&self) -> usize {
        self.past + self.kv_len
    }

    /// Element strides (batch, head, position) of a Q, K or V operand with `heads` heads of
    /// `d` elements over `len` positions (the element within a head is contiguous).
    pub fn strides(&self, heads: usize, len: usize, d: usize) -> [usize; 3] {
        if self.packed {
            [len * heads * d, d, heads * d]
        } else {
            [heads * len * d, len * d, d]
        }
    }

    /// The shapes of Y, present_key, present_value and qk_matmul_output.
    pub fn outputs(&self) -> Vec<OutInfo> {
        let i = |v: usize| v as i64;
        let y = if self.packed {
            vec![i(self.batch), i(self.q_len), i(self.q_heads * self.v_head)]
        } else {
            vec![i(self.batch), i(self.q_heads), i(self.q_len), i(self.v_head)]
        };
        let t = i(self.total());
        vec![
            (self.dtype, y),
            (self.dtype, vec![i(self.batch), i(self.kv_heads), t, i(self.head)]),
            (self.dtype, vec![i(self.batch), i(self.kv_heads), t, i(self.v_head)]),
            (self.dtype, vec![i(self.batch), i(self.q_heads), i(self.q_len), t]),
        ]
    }
}

/// A dim as usize (inference checked the shapes are valid).
fn dim(s: &[i64], k: usize) -> usize {
    s.get(k).map_or(0, |&d| d.max(0) as usize)
}

/// Attention's plan from its inputs' dtypes and shapes (`ins` as inference sees them).
pub(crate) fn attention_plan(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<AttentionPlan, String> {
    validate_attention(a)?;
    let (q, k, v) = (input(ins, 0, "Q")?, input(ins, 1, "K")?, input(ins, 2, "V")?);
    check_dtype(q, 0, "Q", FLOATS)?;
    for (i, name, t) in [(1, "K", k), (2, "V", v)] {
        if t.dtype != q.dtype {
            return Err(format!("input {} ({name}) is {}, but Q is {}", i + 1, t.dtype, q.dtype));
        }
    }
    for (i, t) in ins.iter().enumerate() {
        if let Some(t) = t {
            check_shape(t.shape, "Attention").map_err(|e| format!("input {}: {e}", i + 1))?;
        }
    }
    let rank = q.shape.len();
    if rank != 3 && rank != 4 {
        return Err(format!("input 1 (Q) must be 3-D (B, S, hidden) or 4-D (B, heads, S, D), found rank {rank}"));
    }
    for (i, name, t) in [(1, "K", k), (2, "V", v)] {
        if t.shape.len() != rank {
            return Err(format!("input {} ({name}) has rank {}, but Q has rank {rank}", i + 1, t.shape.len()));
        }
    }
    let packed = rank == 3;
    let heads_attr = |name: &str| a.get(name).map(|_| a.int(name, 1) as usize);
    let (qh_attr, kvh_attr) = (heads_attr("q_num_heads"), heads_attr("kv_num_heads"));
    let batch = dim(q.shape, 0);
    let (q_heads, q_len, head, kv_heads, kv_len, kd, v_head);
    if packed {
        let (Some(qh), Some(kvh)) = (qh_attr, kvh_attr) else {
            return Err("3-D Q, K and V need the attributes `q_num_heads` and `kv_num_heads`".into());
        };
        let split = |t: &TensorInfo, i: usize, name: &str, heads: usize| -> Result<usize, String> {
            let hidden = dim(t.shape, 2);
            if !hidden.is_multiple_of(heads) {
                return Err(format!(
                    "input {} ({name}) has hidden size {hidden}, which {heads} heads do not divide",
                    i + 1
                ));
            }
            Ok(hidden / heads)
        };
        (q_heads, kv_heads) = (qh, kvh);
        (q_len, kv_len) = (dim(q.shape, 1), dim(k.shape, 1));
        head = split(q, 0, "Q", qh)?;
        kd = split(k, 1, "K", kvh)?;
        v_head = split(v, 2, "V", kvh)?;
        if dim(v.shape, 1) != kv_len {
            return Err(format!("K has {kv_len} positions, but V has {}", dim(v.shape, 1)));
        }
    } else {
        (q_heads, q_len, head) = (dim(q.shape, 1), dim(q.shape, 2), dim(q.shape, 3));
        (kv_heads, kv_len, kd) = (dim(k.shape, 1), dim(k.shape, 2), dim(k.shape, 3));
        v_head = dim(v.shape, 3);
        if dim(v.shape, 1) != kv_heads || dim(v.shape, 2) != kv_len {
            return Err(format!("V has shape {:?}, but K has {kv_heads} heads of {kv_len} positions", v.shape));
        }
        for (name, given, actual) in [("q_num_heads", qh_attr, q_heads), ("kv_num_heads", kvh_attr, kv_heads)] {
            if given.is_some_and(|g| g != actual) {
                return Err(format!(
                    "attribute `{name}` is {}, but the 4-D inputs have {actual} heads",
                    given.unwrap_or(0)
                ));
            }
        }
    }
    for (i, name, t) in [(1, "K", k), (2, "V", v)] {
        if dim(t.shape, 0) != batch {
            return Err(format!("input {} ({name}) has batch size {}, but Q has {batch}", i + 1, dim(t.shape, 0)));
        }
    }
    if kd != head {
        return Err(format!("Q's head size is {head}, but K's is {kd}"));
    }
    if kv_heads == 0 || !q_heads.is_multiple_of(kv_heads) {
        return Err(format!("the {q_heads} query heads are not a multiple of the {kv_heads} key/value heads"));
    }
    // The cache.
    let (pk, pv) = (optional(ins, 4), optional(ins, 5));
    let past = match (pk, pv) {
        (None, None) => 0,
        (Some(pk), Some(pv)) => {
            for (i, name, t, d) in [(4, "past_key", pk, head), (5, "past_value", pv, v_head)] {
                if t.dtype != q.dtype {
                    return Err(format!("input {} ({name}) is {}, but Q is {}", i + 1, t.dtype, q.dtype));
                }
                let p = dim(t.shape, 2);
                let want = [batch as i64, kv_heads as i64, p as i64, d as i64];
                if t.shape != want {
                    return Err(format!(
                        "input {} ({name}) has shape {:?}, expected (B, kv heads, past, head size) = {want:?}",
                        i + 1,
                        t.shape
                    ));
                }
            }
            if pk.shape[2] != pv.shape[2] {
                return Err(format!("past_key has {} positions, but past_value has {}", pk.shape[2], pv.shape[2]));
            }
            dim(pk.shape, 2)
        }
        _ => return Err("past_key and past_value must be given together".into()),
    };
    let total = past.checked_add(kv_len).ok_or("Attention: too many keys")?;
    // nonpad_kv_seqlen.
    let nonpad = match optional(ins, 6) {
        None => false,
        Some(n) => {
            check_dtype(n, 6, "nonpad_kv_seqlen", &[DType::I64])?;
            if n.shape != [batch as i64] {
                return Err(format!("input 7 (nonpad_kv_seqlen) has shape {:?}, expected [{batch}]", n.shape));
            }
            if past > 0 || pk.is_some() {
                return Err("nonpad_kv_seqlen cannot be combined with past_key and past_value".into());
            }
            true
        }
    };
    // The mask.
    let mask = match optional(ins, 3) {
        None => None,
        Some(m) => {
            if m.dtype != DType::Bool && m.dtype != q.dtype {
                return Err(format!("input 4 (attn_mask) must be bool or {} (as Q), found {}", q.dtype, m.dtype));
            }
            let r = m.shape.len();
            if !(1..=4).contains(&r) {
                return Err(format!("input 4 (attn_mask) must have rank 1 to 4, found rank {r}"));
            }
            let mut dims = [1usize; 4];
            for (k, &d) in m.shape.iter().enumerate() {
                dims[4 - r + k] = d.max(0) as usize;
            }
            if dims[3] > total {
                return Err(format!("input 4 (attn_mask) covers {} keys, but there are {total} (past + new)", dims[3]));
            }
            let target = [batch, q_heads, q_len];
            for k in 0..3 {
                if dims[k] != 1 && dims[k] != target[k] {
                    return Err(format!(
                        "input 4 (attn_mask) of shape {:?} does not broadcast to (B, heads, S_q) = {target:?}",
                        m.shape
                    ));
                }
            }
            let mut strides = [0usize; 4];
            let mut s = 1usize;
            for k in (0..4).rev() {
                strides[k] = if dims[k] == 1 && k < 3 { 0 } else { s };
                s = s.saturating_mul(dims[k]);
            }
            Some(MaskPlan { dtype: m.dtype, kv: dims[3], strides })
        }
    };
    let offset = if nonpad { Offset::NonPad } else { Offset::Fixed(past as i64) };
    let scale = match a.get("scale") {
        Some(_) => a.float("scale", 1.0),
        None => 1.0 / (head as f64).sqrt(),
    };
    let softmax = softmax_precision(a, Some(q.dtype))?.unwrap_or(q.dtype);
    let plan = AttentionPlan {
        dtype: q.dtype,
        softmax,
        packed,
        batch,
        q_heads,
        kv_heads,
        q_len,
        kv_len,
        past,
        head,
        v_head,
        mask,
        causal: a.int("is_causal", 0) == 1,
        nonpad,
        offset,
        left: a.int("left_window_size", -1),
        right: a.int("right_window_size", -1),
        scale_sqrt: scale.sqrt(),
        softcap: a.float("softcap", 0.0),
        mode: a.int("qk_matmul_output_mode", 0),
    };
    for (_, s) in plan.outputs() {
        check_shape(&s, "Attention")?;
    }
    Ok(plan)
}

pub(crate) fn infer_attention(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(attention_plan(ins, a)?.outputs())
}

// ---------------------------------------------------------------------------------------
// RotaryEmbedding.

pub(crate) fn validate_rotary(a: &Attrs) -> Result<(), String> {
    flag_attr(a, "interleaved", "RotaryEmbedding")?;
    for name in ["num_heads", "rotary_embedding_dim"] {
        if let Some(AttrValue::Int(v)) = a.get(name) {
            if *v < 0 {
                return Err(format!("attribute `{name}` of @onnx.RotaryEmbedding must be ≥ 0, found {v}"));
            }
        }
    }
    Ok(())
}

/// RotaryEmbedding's geometry: the input as (B, S, heads, D) with element strides, the
/// rotated width and the caches' indexing.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RotaryPlan {
    pub batch: usize,
    pub seq: usize,
    pub heads: usize,
    pub head: usize,
    /// Element strides of (batch, position, head) in the input and output.
    pub strides: [usize; 3],
    /// The rotated elements of each head (even), the rest pass through.
    pub rot: usize,
    pub interleaved: bool,
    /// Rows of the caches (with position_ids: the cache's positions; else B·S).
    pub cache_rows: usize,
    pub position_ids: bool,
}

pub(crate) fn rotary_plan(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<RotaryPlan, String> {
    validate_rotary(a)?;
    let x = input(ins, 0, "input")?;
    check_dtype(x, 0, "input", FLOATS)?;
    check_shape(x.shape, "RotaryEmbedding")?;
    let (batch, seq, heads, head, strides) = match x.shape.len() {
        4 => {
            let [b, h, s, d] = [0, 1, 2, 3].map(|k| dim(x.shape, k));
            if a.get("num_heads").is_some_and(|v| *v != AttrValue::Int(0) && *v != AttrValue::Int(h as i64)) {
                return Err(format!(
                    "attribute `num_heads` is {}, but the 4-D input has {h} heads",
                    a.int("num_heads", 0)
                ));
            }
            (b, s, h, d, [h * s * d, d, s * d])
        }
        3 => {
            let [b, s, hidden] = [0, 1, 2].map(|k| dim(x.shape, k));
            let h = a.int("num_heads", 0) as usize;
            if h == 0 {
                return Err("a 3-D input (B, S, hidden) needs the attribute `num_heads`".into());
            }
            if !hidden.is_multiple_of(h) {
                return Err(format!("the hidden size {hidden} is not a multiple of num_heads {h}"));
            }
            (b, s, h, hidden / h, [s * hidden, hidden, hidden / h])
        }
        r => return Err(format!("input 1 (input) must be 3-D (B, S, hidden) or 4-D (B, heads, S, D), found rank {r}")),
    };
    let rot = match a.int("rotary_embedding_dim", 0) as usize {
        0 => head,
        r => r,
    };
    if rot > head || !rot.is_multiple_of(2) {
        return Err(format!("rotary_embedding_dim {rot} must be even and at most the head size {head}"));
    }
    let half = rot / 2;
    let pos = optional(ins, 3);
    let mut cache_rows = 0;
    for (i, name) in [(1, "cos_cache"), (2, "sin_cache")] {
        let c = input(ins, i, name)?;
        if c.dtype != x.dtype {
            return Err(format!("input {} ({name}) is {}, but the input is {}", i + 1, c.dtype, x.dtype));
        }
        check_shape(c.shape, "RotaryEmbedding")?;
        let ok = match pos {
            Some(_) => c.shape.len() == 2 && dim(c.shape, 1) == half,
            None => c.shape == [batch as i64, seq as i64, half as i64],
        };
        if !ok {
            let want = if pos.is_some() {
                format!("(max position + 1, {half})")
            } else {
                format!("({batch}, {seq}, {half}) without position_ids")
            };
            return Err(format!("input {} ({name}) has shape {:?}, expected {want}", i + 1, c.shape));
        }
        if i == 1 {
            cache_rows = if pos.is_some() { dim(c.shape, 0) } else { batch * seq };
        } else if pos.is_some() && dim(c.shape, 0) != cache_rows {
            return Err(format!("sin_cache has {} rows, but cos_cache has {cache_rows}", dim(c.shape, 0)));
        }
    }
    if let Some(p) = pos {
        check_dtype(p, 3, "position_ids", &[DType::I64])?;
        if p.shape != [batch as i64, seq as i64] {
            return Err(format!("input 4 (position_ids) has shape {:?}, expected [{batch}, {seq}]", p.shape));
        }
    }
    Ok(RotaryPlan {
        batch,
        seq,
        heads,
        head,
        strides,
        rot,
        interleaved: a.int("interleaved", 0) == 1,
        cache_rows,
        position_ids: pos.is_some(),
    })
}

pub(crate) fn infer_rotary(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    rotary_plan(ins, a)?;
    let x = input(ins, 0, "input")?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

// ---------------------------------------------------------------------------------------
// Swish and SwiGLU.

pub(crate) fn validate_swish(a: &Attrs) -> Result<(), String> {
    finite_attr(a, "alpha", "Swish")
}

pub(crate) fn validate_swiglu(a: &Attrs) -> Result<(), String> {
    finite_attr(a, "alpha", "SwiGLU")
}

pub(crate) fn infer_swish(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", FLOATS)?;
    check_shape(x.shape, "Swish")?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

pub(crate) fn infer_swiglu(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (x, g) = (input(ins, 0, "A")?, input(ins, 1, "B")?);
    check_dtype(x, 0, "A", FLOATS)?;
    check_shape(x.shape, "SwiGLU")?;
    if g.dtype != x.dtype || g.shape != x.shape {
        return Err(format!(
            "inputs 1 (A) and 2 (B) must have one dtype and shape (no broadcasting), found {}{:?} and {}{:?}",
            x.dtype, x.shape, g.dtype, g.shape
        ));
    }
    Ok(vec![(x.dtype, x.shape.to_vec())])
}
