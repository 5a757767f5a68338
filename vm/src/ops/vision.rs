//! Operators: the sequence-state family (CausalConvWithState, LinearAttention,
//! TensorScatter): the host kernels and their `HOST` table (the schemas are in
//! `crate::ir::operators::vision`). Floats compute in f64 and round once to their dtype.

use super::host::HostFn;
use super::host::{prepare, req};
use super::loss::{floats, ints, put};
use super::Attrs;
use crate::ir::host_tensor::HostTensor;
use crate::ir::operators::vision::*;
use crate::ir::operators::Operator;
use crate::ir::types::DType;

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[
    (Operator::CausalConvWithState, causal_conv),
    (Operator::LinearAttention, linear_attention),
    (Operator::TensorScatter, tensor_scatter),
];

fn shapes<'a>(ins: &[Option<&'a HostTensor>]) -> Vec<Option<(DType, &'a [i64])>> {
    ins.iter().map(|t| t.map(|t| (t.dtype, &t.shape[..]))).collect()
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

fn causal_conv(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, out, infer_causal_conv)?;
    let (_, [nb, nc, nl, k]) = causal_conv_dims(&shapes(ins))?;
    let act = silu(a)?;
    let x = floats(req(ins, 0)?);
    let w = floats(req(ins, 1)?);
    let bias = ins.get(2).copied().flatten().map(floats);
    let past = ins.get(3).copied().flatten().map(floats);
    let p = k - 1;
    let padded = |b: usize, c: usize, i: usize| -> f64 {
        if i < p {
            past.as_ref().map_or(0.0, |s| s[(b * nc + c) * p + i])
        } else {
            x[(b * nc + c) * nl + i - p]
        }
    };
    let mut y = vec![0.0; nb * nc * nl];
    let mut st = vec![0.0; nb * nc * p];
    for b in 0..nb {
        for c in 0..nc {
            for l in 0..nl {
                let mut v = bias.as_ref().map_or(0.0, |bv| bv[c]);
                for j in 0..k {
                    v += w[c * k + j] * padded(b, c, l + j);
                }
                y[(b * nc + c) * nl + l] = if act { v * sigmoid(v) } else { v };
            }
            for i in 0..p {
                st[(b * nc + c) * p + i] = padded(b, c, nl + i);
            }
        }
    }
    put(&mut out[0], &y);
    if let Some(o) = out.get_mut(1) {
        put(o, &st);
    }
    Ok(())
}

fn linear_attention(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, out, infer_linear_attention)?;
    let p = lin_attn(&shapes(ins), a)?;
    let get = |i: usize| ins.get(i).copied().flatten().map(floats);
    let (q, k, v) = (floats(req(ins, 0)?), floats(req(ins, 1)?), floats(req(ins, 2)?));
    let (past, decay, beta) = (get(3), get(4), get(5));
    let (t_len, hq, hkv, dk, dv) = (p.t, p.hq, p.hkv, p.dk, p.dv);
    let group = hq / hkv;
    let mut y = vec![0.0; p.b * t_len * hq * dv];
    let mut state = past.unwrap_or_else(|| vec![0.0; p.b * hkv * dk * dv]);
    let mut col = vec![0.0; dk];
    for b in 0..p.b {
        for h in 0..hkv {
            for m in 0..dv {
                let sat = |d: usize| ((b * hkv + h) * dk + d) * dv + m;
                for (d, c) in col.iter_mut().enumerate() {
                    *c = state[sat(d)];
                }
                for t in 0..t_len {
                    let row = b * t_len + t;
                    if let Some(g) = &decay {
                        for (d, c) in col.iter_mut().enumerate() {
                            let gi = if p.decay_per_dim { row * hkv * dk + h * dk + d } else { row * hkv + h };
                            *c *= g[gi].exp();
                        }
                    }
                    let kt = &k[row * hkv * dk + h * dk..row * hkv * dk + (h + 1) * dk];
                    let mut vt = v[row * hkv * dv + h * dv + m];
                    if let Some(be) = &beta {
                        let r: f64 = col.iter().zip(kt).map(|(s, k)| s * k).sum();
                        let bi = if p.beta_per_head { row * hkv + h } else { row };
                        vt = be[bi] * (vt - r);
                    }
                    for (c, kd) in col.iter_mut().zip(kt) {
                        *c += kd * vt;
                    }
                    for g in 0..group {
                        let qh = h * group + g;
                        let qt = &q[row * hq * dk + qh * dk..row * hq * dk + (qh + 1) * dk];
                        let o: f64 = col.iter().zip(qt).map(|(s, q)| s * q).sum();
                        y[row * hq * dv + qh * dv + m] = p.scale * o;
                    }
                }
                for (d, c) in col.iter().enumerate() {
                    state[sat(d)] = *c;
                }
            }
        }
    }
    put(&mut out[0], &y);
    if let Some(o) = out.get_mut(1) {
        put(o, &state);
    }
    Ok(())
}

fn tensor_scatter(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, out, infer_tensor_scatter)?;
    let d = scatter_dims(&shapes(ins), a)?;
    let (c, u) = (req(ins, 0)?, req(ins, 1)?);
    let idx = ins.get(2).copied().flatten().map(ints).unwrap_or_default();
    let pos = scatter_positions(&d, &idx, circular(a)?)?;
    let es = c.dtype.size();
    let o = &mut out[0];
    o.data.copy_from_slice(&c.data);
    let row = d.inner * es;
    for b in 0..d.batch {
        for mi in 0..d.mid {
            for s in 0..d.len {
                let p = pos[b * d.len + s];
                let src = ((b * d.mid + mi) * d.len + s) * row;
                let dst = ((b * d.mid + mi) * d.max_len + p) * row;
                o.data[dst..dst + row].copy_from_slice(&u.data[src..src + row]);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ir::host_tensor::store_f64;

    fn tensor(d: DType, shape: &[i64], vals: &[f64]) -> HostTensor {
        let mut t = HostTensor::zeros(d, shape).unwrap();
        for (c, &v) in t.data.chunks_exact_mut(d.size()).zip(vals) {
            store_f64(d, v, c);
        }
        t
    }

    fn run(op: &str, ins: &[Option<HostTensor>], a: &Attrs) -> Result<Vec<Vec<f64>>, String> {
        let def = crate::ops::OPS.iter().find(|o| o.name == op).unwrap();
        let refs: Vec<Option<&HostTensor>> = ins.iter().map(Option::as_ref).collect();
        let inferred = (def.infer)(&crate::ops::host::infos(&refs)?, a)?;
        let mut out: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        (def.op.id().host_kernel().unwrap())(&refs, a, &mut out)?;
        Ok(out.iter().map(floats).collect())
    }

    fn attrs(list: &[(&str, AttrValue)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    #[test]
    fn causal_conv_by_hand() {
        // One channel, k = 2, weight [1, 10], past [5]: y = [5 + 10·1, 1 + 10·2, 2 + 10·3].
        let x = tensor(DType::F32, &[1, 1, 3], &[1.0, 2.0, 3.0]);
        let w = tensor(DType::F32, &[1, 1, 2], &[1.0, 10.0]);
        let past = tensor(DType::F32, &[1, 1, 1], &[5.0]);
        let out = run("CausalConvWithState", &[Some(x), Some(w), None, Some(past)], &Attrs::default()).unwrap();
        assert_eq!(out[0], vec![15.0, 21.0, 32.0]);
        assert_eq!(out[1], vec![3.0]);
    }

    #[test]
    fn linear_attention_by_hand() {
        // One head, dk = dv = 1, linear: S = Σ k·v, o = q·S (scale 1).
        let t = |v: &[f64]| tensor(DType::F32, &[1, 2, 1], v);
        let a = attrs(&[
            ("q_num_heads", AttrValue::Int(1)),
            ("kv_num_heads", AttrValue::Int(1)),
            ("update_rule", AttrValue::Str("linear".into())),
        ]);
        let out =
            run("LinearAttention", &[Some(t(&[1.0, 2.0])), Some(t(&[3.0, 4.0])), Some(t(&[5.0, 6.0]))], &a).unwrap();
        assert_eq!(out[0], vec![15.0, 2.0 * (15.0 + 24.0)]);
        assert_eq!(out[1], vec![39.0]);
        // The default rule needs decay and beta.
        let d = attrs(&[("q_num_heads", AttrValue::Int(1)), ("kv_num_heads", AttrValue::Int(1))]);
        assert!(
            run("LinearAttention", &[Some(t(&[1.0, 2.0])), Some(t(&[3.0, 4.0])), Some(t(&[5.0, 6.0]))], &d).is_err()
        );
    }

    #[test]
    fn tensor_scatter_linear_and_circular() {
        let c = tensor(DType::F32, &[2, 3, 1], &[0.0; 6]);
        let u = tensor(DType::F32, &[2, 2, 1], &[1.0, 2.0, 3.0, 4.0]);
        let idx =
            HostTensor::new(DType::I64, vec![2], [0i64, 2].iter().flat_map(|v| v.to_le_bytes()).collect()).unwrap();
        let lin = attrs(&[("axis", AttrValue::Int(1))]);
        assert!(run("TensorScatter", &[Some(c.clone()), Some(u.clone()), Some(idx.clone())], &lin).is_err());
        let circ = attrs(&[("axis", AttrValue::Int(1)), ("mode", AttrValue::Str("circular".into()))]);
        let out = run("TensorScatter", &[Some(c), Some(u), Some(idx)], &circ).unwrap();
        assert_eq!(out[0], vec![1.0, 2.0, 0.0, 4.0, 0.0, 3.0]);
    }
}
