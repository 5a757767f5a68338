//! Operators: the transformer family (Attention, RotaryEmbedding, Swish, SwiGLU): the host
//! kernels and their `HOST` table (the schemas are in `crate::ir::operators::attention`).
//!
//! The kernels compute in f64 and round to the operands' dtype where ONNX's reference
//! implementation rounds (Attention: Q and K after scaling, Q·Kᵀ, softcap, the biased scores,
//! the softmax in its precision, the probabilities, Y), so f16 results match the reference's
//! f16 arithmetic rather than only an exact computation. Every kernel re-runs the shape
//! inference on its actual inputs and checks the data sizes first ([`prepare`]).

use super::host::{infos, prepare, req, HostFn};
use super::Attrs;
use crate::ir::host_tensor::{load_f64, store_f64, HostTensor};
use crate::ir::operators::attention::*;
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ops::{OpDef, OPS};

    pub(crate) fn def(name: &str) -> &'static OpDef {
        OPS.iter().find(|o| o.name == name).unwrap_or_else(|| panic!("no operator {name}"))
    }

    pub(crate) fn f(shape: &[i64], v: &[f64]) -> HostTensor {
        let mut t = HostTensor::zeros(DType::F32, shape).unwrap();
        put(&mut t, v);
        t
    }

    pub(crate) fn attrs(list: &[(&str, AttrValue)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    pub(crate) fn int(v: i64) -> AttrValue {
        AttrValue::Int(v)
    }

    pub(crate) fn float(v: f64) -> AttrValue {
        AttrValue::Float(v)
    }

    /// Runs an operator as the interpreter does: attribute check, inference with the input
    /// values known, zeroed outputs, host kernel; every output.
    pub(crate) fn run(name: &str, ins: &[Option<&HostTensor>], a: &Attrs) -> Result<Vec<HostTensor>, String> {
        let d = def(name);
        d.check_attrs(a)?;
        let infos: Vec<Option<crate::ops::TensorInfo>> = ins
            .iter()
            .map(|t| t.map(|t| crate::ops::TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) }))
            .collect();
        let inferred = (d.infer)(&infos, a)?;
        let mut outs: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        (d.op.id().host_kernel()?)(ins, a, &mut outs)?;
        Ok(outs)
    }

    pub(crate) fn assert_close(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-5 + 1e-5 * w.abs(), "{got:?} vs {want:?}");
        }
    }

    fn bools(shape: &[i64], v: &[u8]) -> HostTensor {
        HostTensor::new(DType::Bool, shape.to_vec(), v.to_vec()).unwrap()
    }

    /// Q of one query [1, 0], keys [1, 0] and [0, 1], values 1 and 3 (scale 1): the scores are
    /// [1, 0], the probabilities e/(e+1) and 1/(e+1).
    fn qkv(queries: usize) -> (HostTensor, HostTensor, HostTensor) {
        let q = f(&[1, 1, queries as i64, 2], &[1.0, 0.0].repeat(queries));
        (q, f(&[1, 1, 2, 2], &[1.0, 0.0, 0.0, 1.0]), f(&[1, 1, 2, 1], &[1.0, 3.0]))
    }

    const E: f64 = std::f64::consts::E;

    fn both() -> f64 {
        (E + 3.0) / (E + 1.0)
    }

    #[test]
    fn attention_matches_a_hand_computed_softmax() {
        let (q, k, v) = qkv(1);
        let one = attrs(&[("scale", float(1.0))]);
        let y = run("Attention", &[Some(&q), Some(&k), Some(&v)], &one).unwrap();
        assert_close(&y[0].to_f64(), &[both()]);
        // The default scale is 1/sqrt(head size).
        let y = run("Attention", &[Some(&q), Some(&k), Some(&v)], &Attrs::default()).unwrap();
        let e = (0.5f64).sqrt().exp();
        assert_close(&y[0].to_f64(), &[(e + 3.0) / (e + 1.0)]);
        // Outputs 2 and 3 are the keys and values (no past); output 4 by mode.
        assert_eq!(y[1].to_f64(), k.to_f64());
        assert_eq!(y[2].to_f64(), v.to_f64());
        let mode = |m: i64, extra: &[(&str, AttrValue)]| {
            let mut a = vec![("scale", float(1.0)), ("qk_matmul_output_mode", int(m))];
            a.extend(extra.iter().cloned());
            run("Attention", &[Some(&q), Some(&k), Some(&v)], &attrs(&a)).unwrap()[3].to_f64()
        };
        assert_close(&mode(0, &[]), &[1.0, 0.0]);
        assert_close(&mode(3, &[]), &[E / (E + 1.0), 1.0 / (E + 1.0)]);
        let capped = 2.0 * (0.5f64).tanh();
        assert_close(&mode(1, &[("softcap", float(2.0))]), &[capped, 0.0]);
        assert_close(&mode(0, &[("softcap", float(2.0))]), &[capped, 0.0]);
    }

    #[test]
    fn attention_masks_and_the_fully_masked_row() {
        let (q, k, v) = qkv(2);
        let causal = attrs(&[("scale", float(1.0)), ("is_causal", int(1))]);
        let y = run("Attention", &[Some(&q), Some(&k), Some(&v)], &causal).unwrap();
        assert_close(&y[0].to_f64(), &[1.0, both()]);
        // A bool mask with an all-false row: that row gives 0, not NaN; mode 3 is 0 too.
        let m = bools(&[2, 2], &[0, 0, 1, 1]);
        let a = attrs(&[("scale", float(1.0)), ("qk_matmul_output_mode", int(3))]);
        let y = run("Attention", &[Some(&q), Some(&k), Some(&v), Some(&m)], &a).unwrap();
        assert_close(&y[0].to_f64(), &[0.0, both()]);
        assert_close(&y[3].to_f64(), &[0.0, 0.0, E / (E + 1.0), 1.0 / (E + 1.0)]);
        // An additive mask; one key shorter than the keys: padded with -inf.
        let m = f(&[1], &[0.0]);
        let y = run("Attention", &[Some(&q), Some(&k), Some(&v), Some(&m)], &a).unwrap();
        assert_close(&y[0].to_f64(), &[1.0, 1.0]);
        let m = f(&[2], &[-1.0, 0.0]);
        let y = run("Attention", &[Some(&q), Some(&k), Some(&v), Some(&m)], &a).unwrap();
        assert_close(&y[0].to_f64(), &[2.0, 2.0]);
        // nonpad_kv_seqlen 1: only key 0; with is_causal the frontier is 1 - 2 = -1 keys
        // after each query, so query 0 sees nothing.
        let np = HostTensor::new(DType::I64, vec![1], 1i64.to_le_bytes().to_vec()).unwrap();
        let ins = [Some(&q), Some(&k), Some(&v), None, None, None, Some(&np)];
        let y = run("Attention", &ins, &attrs(&[("scale", float(1.0))])).unwrap();
        assert_close(&y[0].to_f64(), &[1.0, 1.0]);
        let y = run("Attention", &ins, &causal).unwrap();
        assert_close(&y[0].to_f64(), &[0.0, 1.0]);
        // A window of one key to the left of a causal query.
        let w = attrs(&[("scale", float(1.0)), ("left_window_size", int(0)), ("right_window_size", int(0))]);
        let y = run("Attention", &[Some(&q), Some(&k), Some(&v)], &w).unwrap();
        assert_close(&y[0].to_f64(), &[1.0, 3.0]);
    }

    #[test]
    fn attention_cache_heads_and_layouts_agree() {
        let r = |s: &[i64], seed| HostTensor::random(DType::F32, s, seed).unwrap();
        // past + new keys attend as the concatenated keys do, and present is that concat.
        let (q, pk, k, pv, v) =
            (r(&[2, 2, 3, 4], 1), r(&[2, 2, 2, 4], 2), r(&[2, 2, 3, 4], 3), r(&[2, 2, 2, 5], 4), r(&[2, 2, 3, 5], 5));
        let none = Attrs::default();
        let y = run("Attention", &[Some(&q), Some(&k), Some(&v), None, Some(&pk), Some(&pv)], &none).unwrap();
        let cat = |a: &HostTensor, b: &HostTensor, w: usize| {
            let (a, b) = (a.to_f64(), b.to_f64());
            let (na, nb) = (a.len() / 4, b.len() / 4);
            let mut out = Vec::new();
            for h in 0..4 {
                out.extend(&a[h * na..(h + 1) * na]);
                out.extend(&b[h * nb..(h + 1) * nb]);
            }
            f(&[2, 2, 5, w as i64], &out)
        };
        let (kk, vv) = (cat(&pk, &k, 4), cat(&pv, &v, 5));
        assert_close(&y[1].to_f64(), &kk.to_f64());
        assert_close(&y[2].to_f64(), &vv.to_f64());
        let y2 = run("Attention", &[Some(&q), Some(&kk), Some(&vv)], &none).unwrap();
        assert_close(&y[0].to_f64(), &y2[0].to_f64());
        // Grouped-query: heads 0 and 1 of Q use K/V head 0.
        let (q, k, v) = (r(&[1, 2, 3, 4], 6), r(&[1, 1, 5, 4], 7), r(&[1, 1, 5, 2], 8));
        let y = run("Attention", &[Some(&q), Some(&k), Some(&v)], &none).unwrap()[0].to_f64();
        let qv = q.to_f64();
        for h in 0..2 {
            let qh = f(&[1, 1, 3, 4], &qv[h * 12..(h + 1) * 12]);
            let yh = run("Attention", &[Some(&qh), Some(&k), Some(&v)], &none).unwrap()[0].to_f64();
            assert_close(&y[h * 6..(h + 1) * 6], &yh);
        }
        // 3-D (B, S, heads·D) is 4-D transposed.
        let (q3, k3, v3) = (r(&[2, 3, 8], 9), r(&[2, 4, 4], 10), r(&[2, 4, 6], 11));
        let heads = attrs(&[("q_num_heads", int(2)), ("kv_num_heads", int(1)), ("is_causal", int(1))]);
        let y3 = run("Attention", &[Some(&q3), Some(&k3), Some(&v3)], &heads).unwrap()[0].to_f64();
        let to4 = |t: &HostTensor, h: usize| {
            let (b, s, hid) = (t.shape[0] as usize, t.shape[1] as usize, t.shape[2] as usize);
            let d = hid / h;
            let v = t.to_f64();
            let mut out = vec![0.0; v.len()];
            for bi in 0..b {
                for si in 0..s {
                    for hi in 0..h {
                        for c in 0..d {
                            out[((bi * h + hi) * s + si) * d + c] = v[(bi * s + si) * hid + hi * d + c];
                        }
                    }
                }
            }
            f(&[b as i64, h as i64, s as i64, d as i64], &out)
        };
        let causal = attrs(&[("is_causal", int(1))]);
        let y4 = run("Attention", &[Some(&to4(&q3, 2)), Some(&to4(&k3, 1)), Some(&to4(&v3, 1))], &causal).unwrap();
        // Y (2, 2, 3, 6) back to (2, 3, 12).
        let y4v = y4[0].to_f64();
        assert_eq!((y3.len(), y4v.len()), (72, 72));
        for bi in 0..2 {
            for si in 0..3 {
                for hi in 0..2 {
                    for c in 0..6 {
                        let a = y3[(bi * 3 + si) * 12 + hi * 6 + c];
                        let b = y4v[((bi * 2 + hi) * 3 + si) * 6 + c];
                        assert!((a - b).abs() < 1e-6, "{a} vs {b}");
                    }
                }
            }
        }
    }

    #[test]
    fn attention_f16_rounds_as_the_reference() {
        let r = |s: &[i64], seed| HostTensor::random(DType::F16, s, seed).unwrap();
        let (q, k, v) = (r(&[1, 2, 3, 8], 1), r(&[1, 2, 4, 8], 2), r(&[1, 2, 4, 8], 3));
        let y = run("Attention", &[Some(&q), Some(&k), Some(&v)], &Attrs::default()).unwrap();
        assert_eq!(y[0].dtype, DType::F16);
        // Within f16 precision of the f32 result.
        let f32_of = |t: &HostTensor| f(&t.shape, &t.to_f64());
        let y32 =
            run("Attention", &[Some(&f32_of(&q)), Some(&f32_of(&k)), Some(&f32_of(&v))], &Attrs::default()).unwrap();
        for (a, b) in y[0].to_f64().iter().zip(y32[0].to_f64()) {
            assert!((a - b).abs() < 4e-3, "{a} vs {b}");
        }
    }

    #[test]
    fn attention_refuses_bad_inputs_and_attributes() {
        let (q, k, v) = qkv(1);
        let e = |ins: &[Option<&HostTensor>], a: &[(&str, AttrValue)]| run("Attention", ins, &attrs(a)).unwrap_err();
        let qkv3 = [Some(&q), Some(&k), Some(&v)];
        assert!(e(&qkv3, &[("qk_matmul_output_mode", int(4))]).contains("qk_matmul_output_mode"));
        assert!(e(&qkv3, &[("softcap", float(-1.0))]).contains("softcap"));
        assert!(e(&qkv3, &[("scale", float(0.0))]).contains("scale"));
        assert!(e(&qkv3, &[("softmax_precision", int(16))]).contains("bfloat16"));
        assert!(e(&qkv3, &[("is_causal", int(2))]).contains("is_causal"));
        assert!(e(&qkv3, &[("q_num_heads", int(2))]).contains("q_num_heads"));
        assert!(e(&qkv3, &[("left_window_size", int(-2))]).contains("left_window_size"));
        let k3 = f(&[1, 1, 2, 3], &[0.0; 6]);
        assert!(e(&[Some(&q), Some(&k3), Some(&v)], &[]).contains("head size"));
        let v2 = f(&[1, 1, 3, 1], &[0.0; 3]);
        assert!(e(&[Some(&q), Some(&k), Some(&v2)], &[]).contains("V has shape"));
        let q3 = f(&[1, 1, 4], &[0.0; 4]);
        assert!(e(&[Some(&q3), Some(&q3), Some(&q3)], &[]).contains("q_num_heads"));
        let a3 = [("q_num_heads", int(3)), ("kv_num_heads", int(1))];
        assert!(e(&[Some(&q3), Some(&q3), Some(&q3)], &a3).contains("do not divide"));
        let long = f(&[3], &[0.0; 3]);
        assert!(e(&[Some(&q), Some(&k), Some(&v), Some(&long)], &[]).contains("covers 3 keys"));
        let odd = f(&[2, 2], &[0.0; 4]);
        assert!(e(&[Some(&q), Some(&k), Some(&v), Some(&odd)], &[]).contains("does not broadcast"));
        assert!(e(&[Some(&q), Some(&k), Some(&v), None, Some(&k)], &[]).contains("together"));
        let np = HostTensor::new(DType::I64, vec![1], 1i64.to_le_bytes().to_vec()).unwrap();
        let with_past = [Some(&q), Some(&k), Some(&v), None, Some(&k), Some(&v), Some(&np)];
        assert!(e(&with_past, &[]).contains("cannot be combined"));
        let i = HostTensor::zeros(DType::I32, &[1, 1, 1, 2]).unwrap();
        assert!(e(&[Some(&i), Some(&k), Some(&v)], &[]).contains("must be f32"));
        assert!(e(&[Some(&q), Some(&k)], &[]).contains("required"));
    }

    #[test]
    fn rotary_embedding_rotates_pairs() {
        // One head of 4: halves (x0, x2) and (x1, x3), or neighbours (x0, x1), (x2, x3).
        let x = f(&[1, 1, 1, 4], &[1.0, 2.0, 3.0, 4.0]);
        let (c, s) = (0.6f64, 0.8f64);
        let cos = f(&[1, 1, 2], &[c, 1.0]);
        let sin = f(&[1, 1, 2], &[s, 0.0]);
        let y = run("RotaryEmbedding", &[Some(&x), Some(&cos), Some(&sin)], &Attrs::default()).unwrap();
        assert_close(&y[0].to_f64(), &[c * 1.0 - s * 3.0, 2.0, s * 1.0 + c * 3.0, 4.0]);
        let il = attrs(&[("interleaved", int(1))]);
        let y = run("RotaryEmbedding", &[Some(&x), Some(&cos), Some(&sin)], &il).unwrap();
        assert_close(&y[0].to_f64(), &[c * 1.0 - s * 2.0, s * 1.0 + c * 2.0, 3.0, 4.0]);
        // rotary_embedding_dim 2 rotates (x0, x1) only; position ids pick cache rows.
        let cos = f(&[2, 1], &[1.0, c]);
        let sin = f(&[2, 1], &[0.0, s]);
        let pos = HostTensor::new(DType::I64, vec![1, 1], 1i64.to_le_bytes().to_vec()).unwrap();
        let a = attrs(&[("rotary_embedding_dim", int(2))]);
        let y = run("RotaryEmbedding", &[Some(&x), Some(&cos), Some(&sin), Some(&pos)], &a).unwrap();
        assert_close(&y[0].to_f64(), &[c * 1.0 - s * 2.0, s * 1.0 + c * 2.0, 3.0, 4.0]);
        // 3-D input with num_heads.
        let x3 = f(&[1, 1, 4], &[1.0, 2.0, 3.0, 4.0]);
        let a = attrs(&[("num_heads", int(2))]);
        let y = run("RotaryEmbedding", &[Some(&x3), Some(&cos), Some(&sin), Some(&pos)], &a).unwrap();
        assert_close(&y[0].to_f64(), &[c * 1.0 - s * 2.0, s * 1.0 + c * 2.0, c * 3.0 - s * 4.0, s * 3.0 + c * 4.0]);
        let bad = HostTensor::new(DType::I64, vec![1, 1], 2i64.to_le_bytes().to_vec()).unwrap();
        let e = run("RotaryEmbedding", &[Some(&x3), Some(&cos), Some(&sin), Some(&bad)], &a).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
        let e =
            run("RotaryEmbedding", &[Some(&x3), Some(&cos), Some(&sin), Some(&pos)], &Attrs::default()).unwrap_err();
        assert!(e.contains("num_heads"), "{e}");
        let e = run("RotaryEmbedding", &[Some(&x), Some(&cos), Some(&sin)], &Attrs::default()).unwrap_err();
        assert!(e.contains("expected (1, 1, 2)"), "{e}");
        let e = def("RotaryEmbedding").check_attrs(&attrs(&[("interleaved", int(3))])).unwrap_err();
        assert!(e.contains("interleaved"), "{e}");
    }

    #[test]
    fn swish_and_swiglu() {
        let x = f(&[3], &[0.0, 1.0, -2.0]);
        let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
        let y = run("Swish", &[Some(&x)], &Attrs::default()).unwrap();
        assert_close(&y[0].to_f64(), &[0.0, sig(1.0), -2.0 * sig(-2.0)]);
        let y = run("Swish", &[Some(&x)], &attrs(&[("alpha", float(0.5))])).unwrap();
        assert_close(&y[0].to_f64(), &[0.0, sig(0.5), -2.0 * sig(-1.0)]);
        let g = f(&[3], &[2.0, 3.0, 4.0]);
        let y = run("SwiGLU", &[Some(&x), Some(&g)], &Attrs::default()).unwrap();
        assert_close(&y[0].to_f64(), &[0.0, 3.0 * sig(1.0), -8.0 * sig(-2.0)]);
        let e = run("SwiGLU", &[Some(&x), Some(&f(&[1], &[1.0]))], &Attrs::default()).unwrap_err();
        assert!(e.contains("no broadcasting"), "{e}");
        let e = def("Swish").check_attrs(&attrs(&[("alpha", float(f64::NAN))])).unwrap_err();
        assert!(e.contains("finite"), "{e}");
    }
}
