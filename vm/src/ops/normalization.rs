//! Operators: the newer normalizations (RMSNormalization, GroupNormalization,
//! LpNormalization, MeanVarianceNormalization): the host kernels and their `HOST` table (the
//! schemas are in `crate::ir::operators::normalization`). They compute in f64 and store in
//! the input's dtype; each re-runs the shape inference on its actual inputs first.

use super::attention::put;
use super::host::HostFn;
use super::host::{infos, prepare, req};
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ir::types::DType;
    use crate::ops::attention::tests::{assert_close, attrs, def, f, float, int, run};
    use crate::ops::Attrs;

    #[test]
    fn rms_normalization() {
        let x = f(&[2, 2], &[3.0, 4.0, 1.0, -1.0]);
        let w = f(&[2], &[1.0, 2.0]);
        let eps0 = attrs(&[("epsilon", float(0.0))]);
        let y = run("RMSNormalization", &[Some(&x), Some(&w)], &eps0).unwrap();
        let r = 12.5f64.sqrt();
        assert_close(&y[0].to_f64(), &[3.0 / r, 8.0 / r, 1.0, -2.0]);
        // axis 0: one row of everything; Scale broadcasts to X.
        let a = attrs(&[("epsilon", float(0.0)), ("axis", int(0))]);
        let w1 = f(&[2, 1], &[1.0, 10.0]);
        let y = run("RMSNormalization", &[Some(&x), Some(&w1)], &a).unwrap();
        let r = 6.75f64.sqrt();
        assert_close(&y[0].to_f64(), &[3.0 / r, 4.0 / r, 10.0 / r, -10.0 / r]);
        // Default epsilon 1e-5.
        let y = run("RMSNormalization", &[Some(&x), Some(&w)], &Attrs::default()).unwrap();
        let k = 1.0 / (1.0 + 1e-5f64).sqrt();
        assert_close(&y[0].to_f64()[2..], &[k, -2.0 * k]);
        let e = run("RMSNormalization", &[Some(&x), Some(&f(&[3], &[1.0; 3]))], &Attrs::default()).unwrap_err();
        assert!(e.contains("does not broadcast"), "{e}");
        let e = def("RMSNormalization").check_attrs(&attrs(&[("stash_type", int(0))])).unwrap_err();
        assert!(e.contains("stash_type"), "{e}");
        let e = run("RMSNormalization", &[Some(&x), Some(&w)], &attrs(&[("axis", int(2))])).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
    }

    #[test]
    fn group_normalization() {
        // N 1, C 4, 2 groups of 2 channels × 2 elements.
        let x = f(&[1, 4, 2], &[1.0, 3.0, 1.0, 3.0, 0.0, 0.0, 2.0, 2.0]);
        let sc = f(&[4], &[1.0, 2.0, 1.0, 1.0]);
        let b = f(&[4], &[0.0, 0.0, 5.0, 0.0]);
        let a = attrs(&[("num_groups", int(2)), ("epsilon", float(0.0))]);
        let y = run("GroupNormalization", &[Some(&x), Some(&sc), Some(&b)], &a).unwrap();
        assert_close(&y[0].to_f64(), &[-1.0, 1.0, -2.0, 2.0, 4.0, 4.0, 1.0, 1.0]);
        // Opset 18: scale and bias per group.
        let (sg, bg) = (f(&[2], &[2.0, 1.0]), f(&[2], &[0.0, 1.0]));
        let y = run("GroupNormalization", &[Some(&x), Some(&sg), Some(&bg)], &a).unwrap();
        assert_close(&y[0].to_f64(), &[-2.0, 2.0, -2.0, 2.0, 0.0, 0.0, 2.0, 2.0]);
        let e =
            run("GroupNormalization", &[Some(&x), Some(&sc), Some(&b)], &attrs(&[("num_groups", int(3))])).unwrap_err();
        assert!(e.contains("not a multiple"), "{e}");
        let e = run("GroupNormalization", &[Some(&x), Some(&f(&[3], &[1.0; 3])), Some(&b)], &a).unwrap_err();
        assert!(e.contains("expected [4]"), "{e}");
        let e = def("GroupNormalization").check_attrs(&Attrs::default()).unwrap_err();
        assert!(e.contains("num_groups"), "{e}");
    }

    #[test]
    fn lp_normalization() {
        let x = f(&[2, 2], &[3.0, 4.0, 0.0, 0.0]);
        let y = run("LpNormalization", &[Some(&x)], &Attrs::default()).unwrap();
        assert_close(&y[0].to_f64(), &[0.6, 0.8, 0.0, 0.0]);
        let y = run("LpNormalization", &[Some(&x)], &attrs(&[("p", int(1)), ("axis", int(0))])).unwrap();
        assert_close(&y[0].to_f64(), &[1.0, 1.0, 0.0, 0.0]);
        let x = f(&[2], &[-3.0, 4.0]);
        let y = run("LpNormalization", &[Some(&x)], &attrs(&[("p", int(1))])).unwrap();
        assert_close(&y[0].to_f64(), &[-3.0 / 7.0, 4.0 / 7.0]);
        let e = def("LpNormalization").check_attrs(&attrs(&[("p", int(3))])).unwrap_err();
        assert!(e.contains("1 or 2"), "{e}");
    }

    #[test]
    fn mean_variance_normalization() {
        // Statistics over axes 0 and 2 of (2, 2, 1): channel 0 holds 1 and 3, channel 1 5 and 5.
        let x = f(&[2, 2, 1], &[1.0, 5.0, 3.0, 5.0]);
        let y =
            run("MeanVarianceNormalization", &[Some(&x)], &attrs(&[("axes", AttrValue::Ints(vec![0, 2]))])).unwrap();
        let k = 1.0 / (1.0 + 1e-9);
        assert_close(&y[0].to_f64(), &[-k, 0.0, k, 0.0]);
        let e = run("MeanVarianceNormalization", &[Some(&x)], &Attrs::default()).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
        let e =
            def("MeanVarianceNormalization").check_attrs(&attrs(&[("axes", AttrValue::Ints(vec![1, 1]))])).unwrap_err();
        assert!(e.contains("repeats"), "{e}");
        let i = HostTensor::zeros(DType::I64, &[2]).unwrap();
        let e = run("MeanVarianceNormalization", &[Some(&i)], &Attrs::default()).unwrap_err();
        assert!(e.contains("must be f32"), "{e}");
    }
}
