//! Operators: FlexAttention's host kernel and its `HOST` table (the schema is in
//! `crate::ir::operators::flex`). Computes in f64 and rounds once to the dtype.

use super::host::HostFn;
use super::host::{prepare, req};
use super::loss::{floats, put};
use super::Attrs;
use crate::ir::host_tensor::HostTensor;
use crate::ir::operators::flex::*;
use crate::ir::operators::Operator;
use crate::ir::types::DType;

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[(Operator::FlexAttention, flex_attention)];

fn flex_attention(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, out, infer_flex)?;
    let sh: Vec<Option<(DType, &[i64])>> = ins.iter().map(|t| t.map(|t| (t.dtype, &t.shape[..]))).collect();
    let p = flex_dims(&sh, a)?;
    let (q, k, v) = (floats(req(ins, 0)?), floats(req(ins, 1)?), floats(req(ins, 2)?));
    let group = p.hq / p.hkv;
    let mut y = vec![0.0; p.b * p.hq * p.l * p.ev];
    let mut sc = vec![0.0; p.s];
    for b in 0..p.b {
        for h in 0..p.hq {
            let kh = b * p.hkv + h / group;
            for i in 0..p.l {
                let qr = &q[((b * p.hq + h) * p.l + i) * p.e..][..p.e];
                for (j, s) in sc.iter_mut().enumerate() {
                    let kr = &k[(kh * p.s + j) * p.e..][..p.e];
                    *s = p.scale * qr.iter().zip(kr).map(|(x, y)| x * y).sum::<f64>();
                }
                let m = sc.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let mut sum = 0.0;
                for s in sc.iter_mut() {
                    *s = (*s - m).exp();
                    sum += *s;
                }
                let row = &mut y[((b * p.hq + h) * p.l + i) * p.ev..][..p.ev];
                for (d, o) in row.iter_mut().enumerate() {
                    *o = sc.iter().enumerate().map(|(j, s)| s * v[(kh * p.s + j) * p.ev + d]).sum::<f64>() / sum;
                }
            }
        }
    }
    put(&mut out[0], &y);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ops::host::testing::{attrs, tensor};

    #[test]
    fn flex_attention_by_hand() {
        // One query, two keys with scores 0 and ln 3 (scale 1): weights 1/4 and 3/4.
        let q = tensor(DType::F32, &[1, 1, 1, 1], &[1.0]);
        let k = tensor(DType::F32, &[1, 1, 2, 1], &[0.0, 3f64.ln()]);
        let v = tensor(DType::F32, &[1, 1, 2, 2], &[4.0, 8.0, 0.0, 4.0]);
        let a = attrs(&[("scale", AttrValue::Float(1.0))]);
        let refs = [Some(&q), Some(&k), Some(&v)];
        let inf = crate::ops::host::infos(&refs).unwrap();
        let o = infer_flex(&inf, &a).unwrap();
        let mut out = vec![HostTensor::zeros(o[0].0, &o[0].1).unwrap()];
        flex_attention(&refs, &a, &mut out).unwrap();
        let y = floats(&out[0]);
        assert!((y[0] - 1.0).abs() < 1e-6 && (y[1] - 5.0).abs() < 1e-6, "{y:?}");
        // Heads that do not group are an error.
        let k3 = tensor(DType::F32, &[1, 3, 2, 1], &[0.0; 6]);
        let v3 = tensor(DType::F32, &[1, 3, 2, 2], &[0.0; 12]);
        let q2 = tensor(DType::F32, &[1, 2, 1, 1], &[0.0; 2]);
        let refs = [Some(&q2), Some(&k3), Some(&v3)];
        let e = infer_flex(&crate::ops::host::infos(&refs).unwrap(), &a).unwrap_err();
        assert!(e.contains("multiple"), "{e}");
    }
}
