//! Operators: the transformer family (Attention, RotaryEmbedding, Swish, SwiGLU): the host
//! kernels and their `HOST` table (the schemas are in `crate::ir::operators::attention`).
//!
//! The kernels compute in f64 and round to the operands' dtype where ONNX's reference
//! implementation rounds (Attention: Q and K after scaling, Q·Kᵀ, softcap, the biased scores,
//! the softmax in its precision, the probabilities, Y), so f16 results match the reference's
//! f16 arithmetic rather than only an exact computation. Every kernel re-runs the shape
//! inference on its actual inputs and checks the data sizes first ([`prepare`]).

use super::host::HostFn;
use super::{Attrs, InferFn, TensorInfo};
use crate::ir::host_tensor::{load_f64, store_f64, HostTensor};
use crate::ir::operators::attention::*;
use crate::ir::operators::tensor::check_data;
use crate::ir::operators::Operator;
use crate::ir::types::DType;

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[
    (Operator::Attention, attention),
    (Operator::RotaryEmbedding, rotary),
    (Operator::Swish, swish),
    (Operator::SwiGLU, swiglu),
];

type Res = Result<(), String>;

// ---------------------------------------------------------------------------------------
// Helpers (shared with `super::normalization`).

/// The inputs as inference sees them, their data checked against their shapes.
pub(super) fn infos<'a>(ins: &[Option<&'a HostTensor>]) -> Result<Vec<Option<TensorInfo<'a>>>, String> {
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

/// Checks the inputs' data, infers the outputs from the actual inputs and checks the given
/// outputs (at least one; a prefix of the inferred ones) against them.
pub(super) fn prepare(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &[HostTensor], infer: InferFn) -> Res {
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
    Ok(())
}

pub(super) fn req<'a>(ins: &[Option<&'a HostTensor>], i: usize) -> Result<&'a HostTensor, String> {
    ins.get(i).copied().flatten().ok_or_else(|| format!("input {} is required", i + 1))
}

/// Rounding of an f64 to `d`'s precision (and back).
pub(super) fn rounder(d: DType) -> fn(f64) -> f64 {
    match d {
        DType::F16 => |x| half::f16::from_f64(x).to_f64(),
        DType::F32 => |x| x as f32 as f64,
        _ => |x| x,
    }
}

/// Writes `v` into `out`, converted to its dtype.
pub(super) fn put(out: &mut HostTensor, v: &[f64]) {
    let (d, n) = (out.dtype, out.dtype.size());
    for (c, &x) in out.data.chunks_exact_mut(n).zip(v) {
        store_f64(d, x, c);
    }
}

// ---------------------------------------------------------------------------------------
// Attention.

/// The additive bias of score (b, h, i, j): the mask's value (bool: 0 or -inf; -inf past
/// its last dim), then -inf where the causal frontier, the window or the padding exclude
/// key j. `mask` is in the mask's layout; `nonpad` the valid keys per batch.
pub(crate) fn bias(p: &AttentionPlan, mask: &[f64], nonpad: &[i64], [b, h, i, j]: [usize; 4]) -> f64 {
    let mut m = 0.0;
    if let Some(mp) = &p.mask {
        m = if j < mp.kv {
            let k = b * mp.strides[0] + h * mp.strides[1] + i * mp.strides[2] + j * mp.strides[3];
            mask.get(k).copied().unwrap_or(f64::NAN)
        } else {
            f64::NEG_INFINITY
        };
    }
    let valid = nonpad.get(b).copied().unwrap_or(0);
    let offset = match p.offset {
        Offset::Fixed(o) => o,
        Offset::NonPad => valid.saturating_sub(p.q_len as i64),
    };
    // The query's distance from key j.
    let diff = (i as i64).saturating_add(offset).saturating_sub(j as i64);
    if p.causal && diff < 0 {
        m += f64::NEG_INFINITY;
    }
    if (p.left >= 0 && diff > p.left) || (p.right >= 0 && diff.saturating_neg() > p.right) {
        m += f64::NEG_INFINITY;
    }
    if p.nonpad && j as i64 >= valid {
        m += f64::NEG_INFINITY;
    }
    m
}

/// The softmax of the reference (in place, rounding with `r`): a row whose maximum is -inf
/// subtracts 0 instead, and a zero sum divides by 1 (so such a row gives zeros); NaN
/// propagates.
pub(crate) fn softmax_row(x: &mut [f64], r: fn(f64) -> f64) {
    let mut m = f64::NEG_INFINITY;
    for &v in x.iter() {
        if v.is_nan() || v > m {
            m = v;
            if v.is_nan() {
                break;
            }
        }
    }
    if m == f64::NEG_INFINITY {
        m = 0.0;
    }
    let mut s = 0.0;
    for v in x.iter_mut() {
        *v = r(r(*v - m).exp());
        s += *v;
    }
    let s = match r(s) {
        0.0 => 1.0,
        s => s,
    };
    for v in x.iter_mut() {
        *v = r(*v / s);
    }
}

fn attention(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_attention)?;
    let p = attention_plan(&infos(ins)?, attrs)?;
    let vals = |i: usize| ins.get(i).copied().flatten().map(HostTensor::to_f64).unwrap_or_default();
    let (q, k, v, past_k, past_v) = (vals(0), vals(1), vals(2), vals(4), vals(5));
    let mask: Vec<f64> = match ins.get(3).copied().flatten() {
        Some(m) if m.dtype == DType::Bool => {
            m.data.iter().map(|&b| if b != 0 { 0.0 } else { f64::NEG_INFINITY }).collect()
        }
        Some(m) => m.to_f64(),
        None => Vec::new(),
    };
    let nonpad = ins.get(6).copied().flatten().map(HostTensor::to_i64).unwrap_or_default();
    let (rt, rp) = (rounder(p.dtype), rounder(p.softmax));
    let s = rt(p.scale_sqrt);
    let (b_n, hq, hkv, sq, t, d, dv) = (p.batch, p.q_heads, p.kv_heads, p.q_len, p.total(), p.head, p.v_head);
    // present_key and present_value, (B, kv heads, past + new, ·).
    let present = |new: &[f64], past: &[f64], w: usize| -> Vec<f64> {
        let [sb, sh, ss] = p.strides(hkv, p.kv_len, w);
        let mut out = Vec::with_capacity(b_n * hkv * t * w);
        for b in 0..b_n {
            for h in 0..hkv {
                for j in 0..t {
                    for c in 0..w {
                        out.push(
                            if j < p.past {
                                past.get(((b * hkv + h) * p.past + j) * w + c)
                            } else {
                                new.get(b * sb + h * sh + (j - p.past) * ss + c)
                            }
                            .copied()
                            .unwrap_or(f64::NAN),
                        );
                    }
                }
            }
        }
        out
    };
    let (pk, pv) = (present(&k, &past_k, d), present(&v, &past_v, dv));
    let ks: Vec<f64> = pk.iter().map(|&x| rt(x * s)).collect();
    let group = hq / hkv.max(1);
    let [qb, qh, qs] = p.strides(hq, sq, d);
    let [yb, yh, ys] = p.strides(hq, sq, dv);
    let want_qk = outs.len() > 3;
    let mut y = vec![0f64; b_n * hq * sq * dv];
    let mut qk_out = if want_qk { vec![0f64; b_n * hq * sq * t] } else { Vec::new() };
    let (mut qrow, mut x, mut bs) = (vec![0f64; d], vec![0f64; t], vec![0f64; t]);
    for b in 0..b_n {
        for h in 0..hq {
            let kvh = h / group.max(1);
            let kbase = (b * hkv + kvh) * t;
            for i in 0..sq {
                for (c, slot) in qrow.iter_mut().enumerate() {
                    *slot = rt(q.get(b * qb + h * qh + i * qs + c).copied().unwrap_or(f64::NAN) * s);
                }
                let row = ((b * hq + h) * sq + i) * t;
                for j in 0..t {
                    let kr = &ks[(kbase + j) * d..(kbase + j + 1) * d];
                    let mut qk = rt(qrow.iter().zip(kr).map(|(a, b)| a * b).sum::<f64>());
                    if p.softcap > 0.0 {
                        qk = rt(rt(rt(qk / p.softcap).tanh()) * p.softcap);
                    }
                    bs[j] = bias(&p, &mask, &nonpad, [b, h, i, j]);
                    x[j] = rt(qk + bs[j]);
                    if want_qk && p.mode < 3 {
                        qk_out[row + j] = if p.mode == 2 { x[j] } else { qk };
                    }
                }
                for v in x.iter_mut() {
                    *v = rp(*v);
                }
                softmax_row(&mut x, rp);
                if bs.iter().all(|&v| v == f64::NEG_INFINITY) {
                    x.fill(0.0);
                }
                if want_qk && p.mode == 3 {
                    qk_out[row..row + t].copy_from_slice(&x);
                }
                for v in x.iter_mut() {
                    *v = rt(*v);
                }
                let yrow = b * yb + h * yh + i * ys;
                for c in 0..dv {
                    let acc: f64 = x.iter().enumerate().map(|(j, &w)| w * pv[(kbase + j) * dv + c]).sum();
                    y[yrow + c] = rt(acc);
                }
            }
        }
    }
    let results = [y, pk, pv, qk_out];
    for (o, r) in outs.iter_mut().zip(&results) {
        put(o, r);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// RotaryEmbedding.

fn rotary(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_rotary)?;
    let p = rotary_plan(&infos(ins)?, attrs)?;
    let x = req(ins, 0)?.to_f64();
    let (cos, sin) = (req(ins, 1)?.to_f64(), req(ins, 2)?.to_f64());
    let pos = ins.get(3).copied().flatten().map(HostTensor::to_i64);
    let r = rounder(req(ins, 0)?.dtype);
    let half = p.rot / 2;
    let mut y = x.clone();
    for b in 0..p.batch {
        for s in 0..p.seq {
            let row = match &pos {
                Some(ids) => {
                    let id = ids.get(b * p.seq + s).copied().unwrap_or(-1);
                    if id < 0 || id as u64 >= p.cache_rows as u64 {
                        return Err(format!(
                            "position id {id} is out of range for caches of {} positions",
                            p.cache_rows
                        ));
                    }
                    id as usize
                }
                None => b * p.seq + s,
            };
            for h in 0..p.heads {
                let base = b * p.strides[0] + s * p.strides[1] + h * p.strides[2];
                for k in 0..half {
                    let (c, sn) = (cos[row * half + k], sin[row * half + k]);
                    let (i1, i2) =
                        if p.interleaved { (base + 2 * k, base + 2 * k + 1) } else { (base + k, base + half + k) };
                    let (x1, x2) = (x[i1], x[i2]);
                    y[i1] = r(r(c * x1) - r(sn * x2));
                    y[i2] = r(r(sn * x1) + r(c * x2));
                }
            }
        }
    }
    put(&mut outs[0], &y);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Swish and SwiGLU.

/// x · sigmoid(alpha · x), the sigmoid rounded to the dtype as the reference does.
fn swish_of(x: f64, alpha: f64, r: fn(f64) -> f64) -> f64 {
    r(x * r(1.0 / (1.0 + (-alpha * x).exp())))
}

fn swish(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_swish)?;
    let x = req(ins, 0)?;
    let (alpha, r) = (attrs.float("alpha", 1.0), rounder(x.dtype));
    let y: Vec<f64> = x.to_f64().into_iter().map(|v| swish_of(v, alpha, r)).collect();
    put(&mut outs[0], &y);
    Ok(())
}

fn swiglu(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_swiglu)?;
    let (a, g) = (req(ins, 0)?, req(ins, 1)?);
    let (alpha, r) = (attrs.float("alpha", 1.0), rounder(a.dtype));
    let es = g.dtype.size();
    let y: Vec<f64> = a
        .to_f64()
        .into_iter()
        .zip(g.data.chunks_exact(es))
        .map(|(v, gb)| r(swish_of(v, alpha, r) * load_f64(g.dtype, gb)))
        .collect();
    put(&mut outs[0], &y);
    Ok(())
}
