//! Operators: the recurrent family (RNN, GRU, LSTM): the host kernels and their `HOST`
//! table (the schemas are in `crate::ir::operators::recurrent`).
//!
//! Tensors of any float width are read into f64, computed in f64 and written back rounded
//! to their dtype. Every kernel re-runs the shape inference on its actual inputs first
//! ([`prepare`]), so it only indexes tensors whose sizes are known to be right.

use super::host::prepare;
use super::host::HostFn;
use super::loss::{floats, ints, put};
use super::{Attrs, InferFn};
use crate::ir::host_tensor::HostTensor;
use crate::ir::operators::recurrent::*;
use crate::ir::operators::Operator;
use crate::ir::types::DType;

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[(Operator::RNN, rnn), (Operator::GRU, gru), (Operator::LSTM, lstm)];

fn rnn(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    run(ins, a, out, Cell::Rnn, infer_rnn)
}
fn gru(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    run(ins, a, out, Cell::Gru, infer_gru)
}
fn lstm(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    run(ins, a, out, Cell::Lstm, infer_lstm)
}

/// The checked sizes of a call on host tensors.
pub(crate) fn dims_of(ins: &[Option<&HostTensor>], a: &Attrs, cell: Cell) -> Result<RnnDims, String> {
    let shapes: Vec<Option<(DType, &[i64])>> = ins.iter().map(|t| t.map(|t| (t.dtype, &t.shape[..]))).collect();
    rnn_dims(&shapes, a, cell)
}

/// The batch rows' sequence lengths: `sequence_lens`, each in [0, seq], or `seq` for all.
pub(crate) fn seq_lens(t: Option<&HostTensor>, dims: &RnnDims) -> Result<Vec<usize>, String> {
    let Some(t) = t else { return Ok(vec![dims.seq; dims.batch]) };
    ints(t)
        .into_iter()
        .map(|v| match usize::try_from(v) {
            Ok(v) if v <= dims.seq => Ok(v),
            _ => Err(format!(
                "{}: sequence_lens holds {v}, outside [0, {}] (the sequence length)",
                dims.attrs.cell.name(),
                dims.seq
            )),
        })
        .collect()
}

fn run(
    ins: &[Option<&HostTensor>],
    a: &Attrs,
    out: &mut [HostTensor],
    cell: Cell,
    infer: InferFn,
) -> Result<(), String> {
    prepare(ins, a, out, infer)?;
    let dims = dims_of(ins, a, cell)?;
    let get = |i: usize| ins.get(i).copied().flatten();
    let req = |i: usize| get(i).ok_or_else(|| format!("{}: input {} is required", cell.name(), i + 1));
    let (x, w, r) = (floats(req(0)?), floats(req(1)?), floats(req(2)?));
    let b = get(3).map(floats);
    let lens = seq_lens(get(4), &dims)?;
    let h0 = get(5).map(floats);
    let c0 = if cell == Cell::Lstm { get(6).map(floats) } else { None };
    let p = if cell == Cell::Lstm { get(7).map(floats) } else { None };
    let res = compute(&dims, &x, &w, &r, b.as_deref(), &lens, h0.as_deref(), c0.as_deref(), p.as_deref());
    for (o, v) in out.iter_mut().zip([&res.y, &res.h, &res.c]) {
        put(o, v);
    }
    Ok(())
}

/// The outputs of a recurrent call, in the layout of the call.
pub(crate) struct RnnOut {
    pub(crate) y: Vec<f64>,
    pub(crate) h: Vec<f64>,
    pub(crate) c: Vec<f64>,
}

/// Runs the recurrence. Inputs are dense and checked against `dims`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn compute(
    dims: &RnnDims,
    x: &[f64],
    w: &[f64],
    r: &[f64],
    b: Option<&[f64]>,
    lens: &[usize],
    h0: Option<&[f64]>,
    c0: Option<&[f64]>,
    p: Option<&[f64]>,
) -> RnnOut {
    let at = &dims.attrs;
    let (t_len, n_b, n_i, n_h, n_d) = (dims.seq, dims.batch, dims.input, dims.hidden, dims.dirs);
    let cell = at.cell;
    let g = cell.gates();
    let layout1 = at.layout == 1;
    // Element offsets of X[t, n, :] and of a state [d, n, :] in the call's layouts.
    let x_at = |t: usize, n: usize| if layout1 { (n * t_len + t) * n_i } else { (t * n_b + n) * n_i };
    let s_at = |d: usize, n: usize| if layout1 { (n * n_d + d) * n_h } else { (d * n_b + n) * n_h };
    let y_at = |t: usize, d: usize, n: usize| {
        if layout1 {
            ((n * t_len + t) * n_d + d) * n_h
        } else {
            ((t * n_d + d) * n_b + n) * n_h
        }
    };
    let clip = |v: f64| match at.clip {
        Some(c) => v.clamp(-c, c),
        None => v,
    };
    let mut y = vec![0.0; t_len * n_d * n_b * n_h];
    let mut yh = vec![0.0; n_d * n_b * n_h];
    let mut yc = vec![0.0; n_d * n_b * n_h];
    let mut pre = vec![0.0; g * n_h];
    let mut rh = vec![0.0; n_h];
    for d in 0..n_d {
        let acts = at.acts_of(d);
        let act = |k: usize, v: f64| acts.get(k).map_or(v, |a| a.apply(v));
        let wd = &w[d * g * n_h * n_i..(d + 1) * g * n_h * n_i];
        let rd = &r[d * g * n_h * n_h..(d + 1) * g * n_h * n_h];
        let bias = |k: usize| b.map_or(0.0, |b| b[d * 2 * g * n_h + k]);
        let rbias = |k: usize| b.map_or(0.0, |b| b[d * 2 * g * n_h + g * n_h + k]);
        let peep = |k: usize, j: usize| p.map_or(0.0, |p| p[d * 3 * n_h + k * n_h + j]);
        for (n, &len) in lens.iter().enumerate() {
            let so = s_at(d, n);
            let mut h: Vec<f64> = h0.map_or_else(|| vec![0.0; n_h], |v| v[so..so + n_h].to_vec());
            let mut c: Vec<f64> = c0.map_or_else(|| vec![0.0; n_h], |v| v[so..so + n_h].to_vec());
            for s in 0..len {
                let t = if at.reversed(d) { len - 1 - s } else { s };
                let xt = &x[x_at(t, n)..x_at(t, n) + n_i];
                // X·Wᵀ + Wb for every gate row, and H·Rᵀ (+ Rb) where the cell allows.
                for (k, v) in pre.iter_mut().enumerate() {
                    let wr = &wd[k * n_i..(k + 1) * n_i];
                    *v = xt.iter().zip(wr).map(|(a, b)| a * b).sum::<f64>() + bias(k);
                }
                let rdot = |k: usize, hv: &[f64]| -> f64 {
                    rd[k * n_h..(k + 1) * n_h].iter().zip(hv).map(|(a, b)| a * b).sum::<f64>()
                };
                match cell {
                    Cell::Rnn => {
                        let nh: Vec<f64> = (0..n_h).map(|j| act(0, clip(pre[j] + rdot(j, &h) + rbias(j)))).collect();
                        h = nh;
                    }
                    Cell::Lstm => {
                        let mut nh = vec![0.0; n_h];
                        let mut nc = vec![0.0; n_h];
                        for j in 0..n_h {
                            let gate = |q: usize| pre[q * n_h + j] + rdot(q * n_h + j, &h) + rbias(q * n_h + j);
                            let i = act(0, clip(gate(0) + peep(0, j) * c[j]));
                            let f = if at.input_forget { 1.0 - i } else { act(0, clip(gate(2) + peep(2, j) * c[j])) };
                            let cc = act(1, clip(gate(3)));
                            let cn = f * c[j] + i * cc;
                            let o = act(0, clip(gate(1) + peep(1, j) * cn));
                            nc[j] = cn;
                            nh[j] = o * act(2, cn);
                        }
                        h = nh;
                        c = nc;
                    }
                    Cell::Gru => {
                        let mut z = vec![0.0; n_h];
                        let mut rg = vec![0.0; n_h];
                        for j in 0..n_h {
                            z[j] = act(0, clip(pre[j] + rdot(j, &h) + rbias(j)));
                            rg[j] = act(0, clip(pre[n_h + j] + rdot(n_h + j, &h) + rbias(n_h + j)));
                            rh[j] = rg[j] * h[j];
                        }
                        let nh: Vec<f64> = (0..n_h)
                            .map(|j| {
                                let k = 2 * n_h + j;
                                let hh = if at.linear_before_reset {
                                    pre[k] + rg[j] * (rdot(k, &h) + rbias(k))
                                } else {
                                    pre[k] + rdot(k, &rh) + rbias(k)
                                };
                                let hh = act(1, clip(hh));
                                (1.0 - z[j]) * hh + z[j] * h[j]
                            })
                            .collect();
                        h = nh;
                    }
                }
                let yo = y_at(t, d, n);
                y[yo..yo + n_h].copy_from_slice(&h);
            }
            yh[so..so + n_h].copy_from_slice(&h);
            yc[so..so + n_h].copy_from_slice(&c);
        }
    }
    RnnOut { y, h: yh, c: yc }
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

    fn attrs(list: &[(&str, AttrValue)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    fn host(op: &str, ins: &[Option<HostTensor>], a: &Attrs) -> Vec<HostTensor> {
        let def = crate::ops::OPS.iter().find(|o| o.name == op).unwrap();
        let refs: Vec<Option<&HostTensor>> = ins.iter().map(Option::as_ref).collect();
        let inferred = (def.infer)(&crate::ops::host::infos(&refs).unwrap(), a).unwrap();
        let mut out: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        (def.op.id().host_kernel().unwrap())(&refs, a, &mut out).unwrap();
        out
    }

    fn close(got: &HostTensor, want: &[f64]) {
        let g = floats(got);
        assert_eq!(g.len(), want.len());
        for (i, (a, b)) in g.iter().zip(want).enumerate() {
            assert!((a - b).abs() < 1e-5, "element {i}: {a} vs {b} (all {g:?})");
        }
    }

    #[test]
    fn rnn_matches_a_hand_computation() {
        // One unit, one input: h1 = tanh(0.5·1 + 0 + 0.1 + 0.2), h2 = tanh(0.5·2 + 2·h1 + 0.3).
        let x = tensor(DType::F32, &[2, 1, 1], &[1.0, 2.0]);
        let w = tensor(DType::F32, &[1, 1, 1], &[0.5]);
        let r = tensor(DType::F32, &[1, 1, 1], &[2.0]);
        let b = tensor(DType::F32, &[1, 2], &[0.1, 0.2]);
        let out = host("RNN", &[Some(x.clone()), Some(w.clone()), Some(r.clone()), Some(b.clone())], &Attrs::default());
        let h1 = (0.5f64 + 0.3).tanh();
        let h2 = (1.0 + 2.0 * h1 + 0.3).tanh();
        close(&out[0], &[h1, h2]);
        close(&out[1], &[h2]);
        // Reverse: the second step first.
        let a = attrs(&[("direction", AttrValue::Str("reverse".into()))]);
        let out = host("RNN", &[Some(x.clone()), Some(w.clone()), Some(r.clone()), Some(b.clone())], &a);
        let g2 = (1.0f64 + 0.3).tanh();
        let g1 = (0.5 + 2.0 * g2 + 0.3).tanh();
        close(&out[0], &[g1, g2]);
        close(&out[1], &[g1]);
        // sequence_lens 1: the second step is zero and the state stops at the first.
        let lens = HostTensor::new(DType::I32, vec![1], 1i32.to_le_bytes().to_vec()).unwrap();
        let out = host("RNN", &[Some(x), Some(w), Some(r), Some(b), Some(lens)], &Attrs::default());
        close(&out[0], &[h1, 0.0]);
        close(&out[1], &[h1]);
    }

    #[test]
    fn activations_and_clip_apply() {
        let x = tensor(DType::F32, &[1, 1, 1], &[3.0]);
        let w = tensor(DType::F32, &[1, 1, 1], &[1.0]);
        let r = tensor(DType::F32, &[1, 1, 1], &[0.0]);
        let a = attrs(&[
            ("activations", AttrValue::Str("Affine".into())),
            ("activation_alpha", AttrValue::Floats(vec![2.0])),
            ("activation_beta", AttrValue::Floats(vec![0.5])),
            ("clip", AttrValue::Float(1.0)),
        ]);
        let out = host("RNN", &[Some(x), Some(w), Some(r)], &a);
        // clip(3) = 1, then 2·1 + 0.5.
        close(&out[0], &[2.5]);
    }

    #[test]
    fn lstm_and_gru_single_step() {
        let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
        // LSTM, one unit: gates i, o, f, c from W = [1, 2, 3, 4], x = 0.5, h0 = 0, c0 = 1.
        let x = tensor(DType::F32, &[1, 1, 1], &[0.5]);
        let w = tensor(DType::F32, &[1, 4, 1], &[1.0, 2.0, 3.0, 4.0]);
        let r = tensor(DType::F32, &[1, 4, 1], &[0.0; 4]);
        let h0 = tensor(DType::F32, &[1, 1, 1], &[0.0]);
        let c0 = tensor(DType::F32, &[1, 1, 1], &[1.0]);
        let out = host(
            "LSTM",
            &[Some(x.clone()), Some(w), Some(r), None, None, Some(h0.clone()), Some(c0)],
            &Attrs::default(),
        );
        let (i, o, f, c) = (sig(0.5), sig(1.0), sig(1.5), 2f64.tanh());
        let cn = f * 1.0 + i * c;
        close(&out[0], &[o * cn.tanh()]);
        close(&out[2], &[cn]);
        // GRU, one unit: z from 1, r from 2, h from 3; h0 = 1, R for h = 1.
        let w = tensor(DType::F32, &[1, 3, 1], &[1.0, 2.0, 3.0]);
        let r = tensor(DType::F32, &[1, 3, 1], &[0.0, 0.0, 1.0]);
        let h0 = tensor(DType::F32, &[1, 1, 1], &[1.0]);
        let out = host(
            "GRU",
            &[Some(x.clone()), Some(w.clone()), Some(r.clone()), None, None, Some(h0.clone())],
            &Attrs::default(),
        );
        let (z, rr) = (sig(0.5), sig(1.0));
        let hh = (1.5 + rr * 1.0).tanh();
        close(&out[1], &[(1.0 - z) * hh + z]);
    }

    #[test]
    fn bad_attributes_and_shapes_are_errors() {
        let a = attrs(&[("direction", AttrValue::Str("sideways".into()))]);
        assert!(rnn_attrs(&a, Cell::Rnn).unwrap_err().contains("direction"));
        let a = attrs(&[("activations", AttrValue::Str("Tanh,Nope".into()))]);
        assert!(rnn_attrs(&a, Cell::Gru).unwrap_err().contains("Nope"));
        let a = attrs(&[("activations", AttrValue::Str("Tanh".into()))]);
        assert!(rnn_attrs(&a, Cell::Lstm).unwrap_err().contains("3 functions"));
        let x: &[i64] = &[2, 1, 3];
        let w: &[i64] = &[1, 4, 2];
        let r: &[i64] = &[1, 4, 4];
        let err = rnn_dims(
            &[Some((DType::F32, x)), Some((DType::F32, w)), Some((DType::F32, r))],
            &Attrs::default(),
            Cell::Rnn,
        )
        .unwrap_err();
        assert!(err.contains("W"), "{err}");
    }
}
