//! Operators: the newer normalizations (RMSNormalization, GroupNormalization,
//! LpNormalization, MeanVarianceNormalization): the host kernels and their `HOST` table (the
//! schemas are in `crate::ir::operators::normalization`). They compute in f64 and store in
//! the input's dtype; each re-runs the shape inference on its actual inputs first.

use super::attention::{infos, prepare, put, req};
use super::host::HostFn;
use super::Attrs;
use crate::ir::host_tensor::HostTensor;
use crate::ir::operators::normalization::*;
use crate::ir::operators::shape::broadcast_strides;
use crate::ir::operators::Operator;

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[
    (Operator::RMSNormalization, rms_norm),
    (Operator::GroupNormalization, group_norm),
    (Operator::LpNormalization, lp_norm),
    (Operator::MeanVarianceNormalization, mvn),
];

type Res = Result<(), String>;

/// `t`'s elements broadcast to `shape` (which they broadcast to: inference checked).
fn expand(t: &HostTensor, shape: &[i64]) -> Vec<f64> {
    let v = t.to_f64();
    let strides = broadcast_strides(&t.shape, shape);
    let dims: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
    let n = count(shape);
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; dims.len()];
    for _ in 0..n {
        out.push(v.get(idx.iter().zip(&strides).map(|(i, s)| i * s).sum::<usize>()).copied().unwrap_or(f64::NAN));
        for k in (0..dims.len()).rev() {
            idx[k] += 1;
            if idx[k] < dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

fn rms_norm(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_rms)?;
    let x = req(ins, 0)?;
    let axis = rms_axis(&x.shape, attrs)?;
    let inner = count(&x.shape[axis..]);
    if x.numel() == 0 || inner == 0 {
        return Ok(());
    }
    let eps = attrs.float("epsilon", 1e-5);
    let w = expand(req(ins, 1)?, &x.shape);
    let mut y = x.to_f64();
    for (row, ws) in y.chunks_exact_mut(inner).zip(w.chunks_exact(inner)) {
        let ms = row.iter().map(|v| v * v).sum::<f64>() / inner as f64;
        let k = 1.0 / (ms + eps).sqrt();
        for (v, &g) in row.iter_mut().zip(ws) {
            *v = *v * k * g;
        }
    }
    put(&mut outs[0], &y);
    Ok(())
}

fn group_norm(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_group_norm)?;
    let ([_, groups, per, spatial], per_group) = group_norm_plan(&infos(ins)?, attrs)?;
    let size = per * spatial;
    let mut y = req(ins, 0)?.to_f64();
    if y.is_empty() || size == 0 {
        return Ok(());
    }
    let (scale, bias) = (req(ins, 1)?.to_f64(), req(ins, 2)?.to_f64());
    let eps = attrs.float("epsilon", 1e-5);
    for (gi, xs) in y.chunks_exact_mut(size).enumerate() {
        let g = gi % groups;
        let mean = xs.iter().sum::<f64>() / size as f64;
        let var = xs.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / size as f64;
        let k = 1.0 / (var + eps).sqrt();
        for (c, ch) in xs.chunks_exact_mut(spatial).enumerate() {
            let p = if per_group { g } else { g * per + c };
            let (sc, b) = (scale.get(p).copied().unwrap_or(f64::NAN), bias.get(p).copied().unwrap_or(f64::NAN));
            for v in ch {
                *v = (*v - mean) * k * sc + b;
            }
        }
    }
    put(&mut outs[0], &y);
    Ok(())
}

fn lp_norm(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_lp_norm)?;
    let x = req(ins, 0)?;
    let [outer, len, inner] = lp_split(&x.shape, attrs)?;
    let p2 = attrs.int("p", 2) == 2;
    let mut y = x.to_f64();
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * len + k) * inner + i;
            let s: f64 = (0..len).map(|k| if p2 { y[at(k)] * y[at(k)] } else { y[at(k)].abs() }).sum();
            let norm = if p2 { s.sqrt() } else { s };
            for k in 0..len {
                y[at(k)] = if norm == 0.0 { 0.0 } else { y[at(k)] / norm };
            }
        }
    }
    put(&mut outs[0], &y);
    Ok(())
}

/// For each element of a tensor of shape `dims`, the row-major index of its kept dims (those
/// not in `red`), and the number of such groups.
pub(crate) fn group_ids(dims: &[i64], red: &[bool]) -> (Vec<usize>, usize) {
    let d: Vec<usize> = dims.iter().map(|&v| v.max(0) as usize).collect();
    let mut stride = vec![0usize; d.len()];
    let mut groups = 1usize;
    for k in (0..d.len()).rev() {
        if !red[k] {
            stride[k] = groups;
            groups = groups.saturating_mul(d[k]);
        }
    }
    let n = count(dims);
    let mut ids = Vec::with_capacity(n);
    let mut idx = vec![0usize; d.len()];
    for _ in 0..n {
        ids.push(idx.iter().zip(&stride).map(|(i, s)| i * s).sum());
        for k in (0..d.len()).rev() {
            idx[k] += 1;
            if idx[k] < d[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    (ids, groups)
}

fn mvn(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_mvn)?;
    let x = req(ins, 0)?;
    let red = mvn_axes(&x.shape, attrs)?;
    let (ids, groups) = group_ids(&x.shape, &red);
    let mut y = x.to_f64();
    let (mut sum, mut n) = (vec![0f64; groups], vec![0usize; groups]);
    for (&g, &v) in ids.iter().zip(&y) {
        sum[g] += v;
        n[g] += 1;
    }
    let mean: Vec<f64> = sum.iter().zip(&n).map(|(s, &c)| s / c.max(1) as f64).collect();
    let mut sq = vec![0f64; groups];
    for (&g, &v) in ids.iter().zip(&y) {
        sq[g] += (v - mean[g]) * (v - mean[g]);
    }
    let std: Vec<f64> = sq.iter().zip(&n).map(|(s, &c)| (s / c.max(1) as f64).sqrt()).collect();
    for (v, &g) in y.iter_mut().zip(&ids) {
        *v = (*v - mean[g]) / (std[g] + 1e-9);
    }
    put(&mut outs[0], &y);
    Ok(())
}
