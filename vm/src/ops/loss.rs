//! Operators: the loss family (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) and the
//! window operators Shrink, LpPool, MaxUnpool and Col2Im: the host kernels and their `HOST`
//! table (the schemas are in `crate::ir::operators::loss`).
//!
//! Float tensors of any width are read into f64 and written back rounded to their dtype;
//! the losses accumulate in f64. Every kernel re-runs the shape inference on its actual
//! inputs first ([`prepare`]), so it only indexes tensors whose sizes are known to be right.

use super::host::{prepare, req, HostFn};
use super::Attrs;
use crate::ir::host_tensor::{load_f64, load_i64, store_f64, HostTensor};
use crate::ir::operators::loss::*;
use crate::ir::operators::nn::pool_dims;
use crate::ir::operators::Operator;

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[
    (Operator::NegativeLogLikelihoodLoss, nll),
    (Operator::SoftmaxCrossEntropyLoss, sce),
    (Operator::Shrink, shrink),
    (Operator::LpPool, lp_pool),
    (Operator::MaxUnpool, max_unpool),
    (Operator::Col2Im, col2im),
];

// ---------------------------------------------------------------------------------------
// Helpers.

/// Every element as f64.
pub(crate) fn floats(t: &HostTensor) -> Vec<f64> {
    t.data.chunks_exact(t.dtype.size()).map(|c| load_f64(t.dtype, c)).collect()
}

/// Every element as i64.
pub(crate) fn ints(t: &HostTensor) -> Vec<i64> {
    t.data.chunks_exact(t.dtype.size()).map(|c| load_i64(t.dtype, c)).collect()
}

/// Writes `v` into `t` (same element count), rounded to its dtype.
pub(crate) fn put(t: &mut HostTensor, v: &[f64]) {
    let (d, es) = (t.dtype, t.dtype.size());
    for (c, &x) in t.data.chunks_exact_mut(es).zip(v) {
        store_f64(d, x, c);
    }
}

// ---------------------------------------------------------------------------------------
// Losses.

/// The per-element losses and weights of NegativeLogLikelihoodLoss on log-probabilities
/// `lp` [N, C, D]: `-lp[n, t, d] · w[t]` and `w[t]` (0 for ignored elements). A target
/// outside [0, C) that is not ignored is an error.
fn nll_elements(
    lp: &[f64],
    target: &[i64],
    weight: Option<&[f64]>,
    ld: &LossDims,
    op: &str,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let (c, d) = (ld.c, ld.d);
    let mut loss = vec![0.0; ld.n * d];
    let mut wsum = vec![0.0; ld.n * d];
    for (k, (&t, (l, w))) in target.iter().zip(loss.iter_mut().zip(wsum.iter_mut())).enumerate() {
        if ld.ignore == Some(t) {
            continue;
        }
        if t < 0 || t as u64 >= c as u64 {
            return Err(format!("{op}: target {t} (element {k}) is outside the classes [0, {c})"));
        }
        let (n, j) = (k / d, k % d);
        let wt = weight.map_or(1.0, |w| w[t as usize]);
        *l = -lp[(n * c + t as usize) * d + j] * wt;
        *w = wt;
    }
    Ok((loss, wsum))
}

/// Reduces the per-element losses into the loss output.
fn reduce_loss(loss: Vec<f64>, w: &[f64], ld: &LossDims, out: &mut HostTensor) {
    match ld.reduction {
        Reduction::None => put(out, &loss),
        Reduction::Sum => put(out, &[loss.iter().sum()]),
        // The summed weights of the elements not ignored (the element count without
        // weights); 0 / 0 is NaN, as in ONNX.
        Reduction::Mean => put(out, &[loss.iter().sum::<f64>() / w.iter().sum::<f64>()]),
    }
}

/// A loss's scores, targets, weights and sizes.
type LossParts<'a> = (&'a HostTensor, Vec<i64>, Option<Vec<f64>>, LossDims);

fn loss_parts<'a>(ins: &[Option<&'a HostTensor>], a: &Attrs, op: &str) -> Result<LossParts<'a>, String> {
    let (x, t) = (req(ins, 0)?, req(ins, 1)?);
    let w = ins.get(2).copied().flatten();
    let ld = loss_dims((x.dtype, &x.shape), (t.dtype, &t.shape), w.map(|w| (w.dtype, &w.shape[..])), a, op)?;
    Ok((x, ints(t), w.map(floats), ld))
}

fn nll(ins: &[Option<&HostTensor>], a: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    const OP: &str = "NegativeLogLikelihoodLoss";
    prepare(ins, a, outs, infer_nll)?;
    let (x, t, w, ld) = loss_parts(ins, a, OP)?;
    let (loss, ws) = nll_elements(&floats(x), &t, w.as_deref(), &ld, OP)?;
    reduce_loss(loss, &ws, &ld, &mut outs[0]);
    Ok(())
}

/// Log-softmax over axis 1 of `x` [N, C, D].
fn log_softmax(x: &[f64], n: usize, c: usize, d: usize) -> Vec<f64> {
    let mut y = vec![0.0; x.len()];
    for i in 0..n {
        for j in 0..d {
            let at = |k: usize| (i * c + k) * d + j;
            let m = (0..c).map(|k| x[at(k)]).fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = (0..c).map(|k| (x[at(k)] - m).exp()).sum();
            let ls = s.ln();
            for k in 0..c {
                y[at(k)] = x[at(k)] - m - ls;
            }
        }
    }
    y
}

fn sce(ins: &[Option<&HostTensor>], a: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    const OP: &str = "SoftmaxCrossEntropyLoss";
    prepare(ins, a, outs, infer_sce)?;
    let (x, t, w, ld) = loss_parts(ins, a, OP)?;
    let lp = log_softmax(&floats(x), ld.n, ld.c, ld.d);
    let (loss, ws) = nll_elements(&lp, &t, w.as_deref(), &ld, OP)?;
    reduce_loss(loss, &ws, &ld, &mut outs[0]);
    if let Some(o) = outs.get_mut(1) {
        put(o, &lp);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Shrink.

fn shrink(ins: &[Option<&HostTensor>], a: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, outs, infer_shrink)?;
    let (bias, lambd) = (a.float("bias", 0.0), a.float("lambd", 0.5));
    let y: Vec<f64> = floats(req(ins, 0)?)
        .into_iter()
        .map(|v| {
            if v < -lambd {
                v + bias
            } else if v > lambd {
                v - bias
            } else {
                0.0
            }
        })
        .collect();
    put(&mut outs[0], &y);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// N-d index helpers.

/// Advances a row-major multi-index within `dims`; false once it wraps around.
pub(crate) fn next_index(idx: &mut [usize], dims: &[usize]) -> bool {
    for i in (0..dims.len()).rev() {
        idx[i] += 1;
        if idx[i] < dims[i] {
            return true;
        }
        idx[i] = 0;
    }
    false
}

/// Row-major strides of `dims`.
pub(crate) fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

// ---------------------------------------------------------------------------------------
// LpPool.

fn lp_pool(ins: &[Option<&HostTensor>], a: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, outs, infer_lp_pool)?;
    let x = req(ins, 0)?;
    let pd = pool_dims(&x.shape, a)?;
    let g = &pd.geo;
    let p = a.int("p", 2) as i32;
    let xv = floats(x);
    let (in_plane, out_plane): (usize, usize) = (g.in_sp.iter().product(), g.out_sp.iter().product());
    let ist = strides(&g.in_sp);
    let nd = g.k.len();
    let mut y = vec![0.0; pd.n * pd.c * out_plane];
    if out_plane > 0 && in_plane > 0 {
        for plane in 0..pd.n * pd.c {
            let xp = &xv[plane * in_plane..][..in_plane];
            let mut o = vec![0usize; nd];
            for slot in y[plane * out_plane..][..out_plane].iter_mut() {
                let mut tap = vec![0usize; nd];
                let mut sum = 0.0f64;
                loop {
                    let mut at = 0usize;
                    let mut inside = true;
                    for i in 0..nd {
                        let pos = (o[i] * g.s[i] + tap[i] * g.d[i]) as i64 - g.pb[i];
                        if pos < 0 || pos as usize >= g.in_sp[i] {
                            inside = false;
                            break;
                        }
                        at += pos as usize * ist[i];
                    }
                    if inside {
                        sum += xp[at].abs().powi(p);
                    }
                    if !next_index(&mut tap, &g.k) {
                        break;
                    }
                }
                *slot = sum.powf(1.0 / p as f64);
                next_index(&mut o, &g.out_sp);
            }
        }
    }
    put(&mut outs[0], &y);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// MaxUnpool.

fn max_unpool(ins: &[Option<&HostTensor>], a: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    const OP: &str = "MaxUnpool";
    prepare(ins, a, outs, infer_max_unpool)?;
    let (x, i) = (req(ins, 0)?, req(ins, 1)?);
    let want = ins.get(2).copied().flatten().map(ints);
    let (inferred, out) = max_unpool_shapes(&x.shape, want, a)?;
    let idims: Vec<usize> = inferred.iter().map(|&d| d as usize).collect();
    let odims: Vec<usize> = out.iter().map(|&d| d as usize).collect();
    let (ist, ost) = (strides(&idims), strides(&odims));
    let total: usize = idims.iter().product();
    let mut y = vec![0.0; odims.iter().product()];
    for (k, (v, idx)) in floats(x).into_iter().zip(ints(i)).enumerate() {
        if idx < 0 || idx as u64 >= total as u64 {
            return Err(format!("{OP}: index {idx} (element {k} of I) is outside the unpooled shape {inferred:?}"));
        }
        let mut rest = idx as usize;
        let mut at = 0usize;
        let mut inside = true;
        for d in 0..idims.len() {
            let c = rest / ist[d];
            rest %= ist[d];
            if c >= odims[d] {
                inside = false;
                break;
            }
            at += c * ost[d];
        }
        if inside {
            y[at] = v;
        }
    }
    put(&mut outs[0], &y);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Col2Im.

fn col2im(ins: &[Option<&HostTensor>], a: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    const OP: &str = "Col2Im";
    prepare(ins, a, outs, infer_col2im)?;
    let x = req(ins, 0)?;
    let image = ints(req(ins, 1)?);
    let block = ints(req(ins, 2)?);
    let g = col2im_dims(&x.shape, &image, &block, a).map_err(|e| format!("{OP}: {e}"))?;
    let xv = floats(x);
    let r = g.image.len();
    let (bprod, l): (usize, usize) = (g.block.iter().product(), g.blocks.iter().product());
    let (bst, qst) = (strides(&g.block), strides(&g.blocks));
    let plane: usize = g.image.iter().product();
    let mut y = vec![0.0; g.n * g.c * plane];
    if plane > 0 {
        for (nc, yp) in y.chunks_exact_mut(plane).enumerate() {
            let (n, c) = (nc / g.c, nc % g.c);
            let mut pos = vec![0usize; r];
            for slot in yp.iter_mut() {
                let mut tap = vec![0usize; r];
                let mut sum = 0.0;
                loop {
                    let mut ok = true;
                    let (mut b, mut q) = (0usize, 0usize);
                    for i in 0..r {
                        let t = (pos[i] + g.pad[i]) as i64 - (tap[i] * g.dil[i]) as i64;
                        if t < 0 || !(t as usize).is_multiple_of(g.stride[i]) || t as usize / g.stride[i] >= g.blocks[i]
                        {
                            ok = false;
                            break;
                        }
                        b += tap[i] * bst[i];
                        q += t as usize / g.stride[i] * qst[i];
                    }
                    if ok {
                        sum += xv[(n * g.c * bprod + c * bprod + b) * l + q];
                    }
                    if !next_index(&mut tap, &g.block) {
                        break;
                    }
                }
                *slot = sum;
                next_index(&mut pos, &g.image);
            }
        }
    }
    put(&mut outs[0], &y);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ir::bytecode::OpId;
    use crate::ir::types::DType;

    pub(crate) fn t(d: DType, shape: &[i64], v: &[f64]) -> HostTensor {
        let mut h = HostTensor::zeros(d, shape).unwrap();
        put(&mut h, v);
        h
    }

    pub(crate) fn i64s(shape: &[i64], v: &[i64]) -> HostTensor {
        HostTensor::new(DType::I64, shape.to_vec(), v.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap()
    }

    fn attrs(list: &[(&str, AttrValue)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    fn s(v: &str) -> AttrValue {
        AttrValue::Str(v.into())
    }

    fn run(op: &str, ins: &[Option<&HostTensor>], a: &Attrs) -> Result<Vec<HostTensor>, String> {
        let def = OpId::from_name(op).unwrap().def();
        def.check_attrs(a)?;
        let inferred = (def.infer)(&crate::ops::host::infos(ins)?, a)?;
        let mut outs: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        (def.op.id().host_kernel().unwrap())(ins, a, &mut outs)?;
        Ok(outs)
    }

    fn close(got: &HostTensor, want: &[f64]) {
        let g = floats(got);
        assert_eq!(g.len(), want.len(), "{g:?} vs {want:?}");
        for (x, y) in g.iter().zip(want) {
            assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0) || (x.is_nan() && y.is_nan()), "{g:?} vs {want:?}");
        }
    }

    #[test]
    fn nll_reductions_weights_and_ignore_index() {
        // x [2, 3]: log-probabilities; targets 2 and 0.
        let x = t(DType::F32, &[2, 3], &[-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]);
        let tg = i64s(&[2], &[2, 0]);
        let none = attrs(&[("reduction", s("none"))]);
        close(&run("NegativeLogLikelihoodLoss", &[Some(&x), Some(&tg)], &none).unwrap()[0], &[3.0, 4.0]);
        let sum = attrs(&[("reduction", s("sum"))]);
        close(&run("NegativeLogLikelihoodLoss", &[Some(&x), Some(&tg)], &sum).unwrap()[0], &[7.0]);
        close(&run("NegativeLogLikelihoodLoss", &[Some(&x), Some(&tg)], &Attrs::default()).unwrap()[0], &[3.5]);
        // Weights [1, 2, 3]: mean = (3·3 + 4·1) / (3 + 1).
        let w = t(DType::F32, &[3], &[1.0, 2.0, 3.0]);
        close(
            &run("NegativeLogLikelihoodLoss", &[Some(&x), Some(&tg), Some(&w)], &Attrs::default()).unwrap()[0],
            &[13.0 / 4.0],
        );
        // ignore_index 0 drops the second element, also from the mean's divisor.
        let ii = attrs(&[("ignore_index", AttrValue::Int(0))]);
        close(&run("NegativeLogLikelihoodLoss", &[Some(&x), Some(&tg)], &ii).unwrap()[0], &[3.0]);
        // A negative ignore_index; [N, C, D] layout with D = 2, f64.
        let x = t(DType::F64, &[1, 2, 2], &[-1.0, -2.0, -3.0, -4.0]);
        let tg = i64s(&[1, 2], &[1, -1]);
        let a = attrs(&[("ignore_index", AttrValue::Int(-1)), ("reduction", s("none"))]);
        let y = run("NegativeLogLikelihoodLoss", &[Some(&x), Some(&tg)], &a).unwrap();
        assert_eq!(y[0].dtype, DType::F64);
        close(&y[0], &[3.0, 0.0]);
        // Errors.
        let e = run("NegativeLogLikelihoodLoss", &[Some(&x), Some(&i64s(&[1, 2], &[2, 0]))], &Attrs::default());
        assert!(e.unwrap_err().contains("outside the classes [0, 2)"));
        let e = run("NegativeLogLikelihoodLoss", &[Some(&x), Some(&i64s(&[2], &[0, 0]))], &Attrs::default());
        assert!(e.unwrap_err().contains("the target must be [N, d1, ..., dk] = [1, 2]"));
        let def = OpId::from_name("NegativeLogLikelihoodLoss").unwrap().def();
        let e = def.check_attrs(&attrs(&[("reduction", s("avg"))])).unwrap_err();
        assert!(e.contains("must be \"none\", \"sum\" or \"mean\""), "{e}");
    }

    #[test]
    fn sce_is_nll_of_log_softmax() {
        let x = t(DType::F32, &[2, 3], &[1.0, 2.0, 3.0, 0.0, 0.0, 0.0]);
        let tg = i64s(&[2], &[2, 1]);
        let ls = |v: [f64; 3]| {
            let m = v.iter().cloned().fold(f64::MIN, f64::max);
            let s: f64 = v.iter().map(|x| (x - m).exp()).sum();
            v.map(|x| x - m - s.ln())
        };
        let (a, b) = (ls([1.0, 2.0, 3.0]), ls([0.0; 3]));
        let y = run("SoftmaxCrossEntropyLoss", &[Some(&x), Some(&tg)], &Attrs::default()).unwrap();
        close(&y[0], &[-(a[2] + b[1]) / 2.0]);
        close(&y[1], &[a[0], a[1], a[2], b[0], b[1], b[2]]);
        let h = t(DType::F16, &[2, 3], &[1.0, 2.0, 3.0, 0.0, 0.0, 0.0]);
        let y = run("SoftmaxCrossEntropyLoss", &[Some(&h), Some(&tg)], &attrs(&[("reduction", s("none"))])).unwrap();
        assert!((floats(&y[0])[0] + a[2]).abs() < 1e-3);
    }

    #[test]
    fn shrink_soft_and_hard() {
        let x = t(DType::F32, &[5], &[-2.0, -1.0, 0.0, 1.0, 2.0]);
        let a = attrs(&[("lambd", AttrValue::Float(1.5)), ("bias", AttrValue::Float(1.5))]);
        close(&run("Shrink", &[Some(&x)], &a).unwrap()[0], &[-0.5, 0.0, 0.0, 0.0, 0.5]);
        let a = attrs(&[("lambd", AttrValue::Float(1.5))]);
        close(&run("Shrink", &[Some(&x)], &a).unwrap()[0], &[-2.0, 0.0, 0.0, 0.0, 2.0]);
        let e = OpId::from_name("Shrink").unwrap().def().check_attrs(&attrs(&[("lambd", AttrValue::Float(-1.0))]));
        assert!(e.unwrap_err().contains("must not be negative"));
    }

    #[test]
    fn lp_pool_norms_the_window() {
        let x = t(DType::F32, &[1, 1, 2, 2], &[1.0, -2.0, 3.0, 4.0]);
        let a = attrs(&[("kernel_shape", AttrValue::Ints(vec![2, 2])), ("p", AttrValue::Int(1))]);
        close(&run("LpPool", &[Some(&x)], &a).unwrap()[0], &[10.0]);
        let a = attrs(&[("kernel_shape", AttrValue::Ints(vec![1, 2])), ("pads", AttrValue::Ints(vec![0, 1, 0, 0]))]);
        // p = 2, window [pad, x] and [x, x] per row.
        close(&run("LpPool", &[Some(&x)], &a).unwrap()[0], &[1.0, 5f64.sqrt(), 3.0, 5.0]);
        let e = OpId::from_name("LpPool")
            .unwrap()
            .def()
            .check_attrs(&attrs(&[("kernel_shape", AttrValue::Ints(vec![2])), ("p", AttrValue::Int(0))]));
        assert!(e.unwrap_err().contains("positive"));
    }

    #[test]
    fn max_unpool_scatters() {
        let x = t(DType::F32, &[1, 1, 2, 2], &[5.0, 6.0, 7.0, 8.0]);
        let i = i64s(&[1, 1, 2, 2], &[5, 7, 13, 15]);
        let a = attrs(&[("kernel_shape", AttrValue::Ints(vec![2, 2])), ("strides", AttrValue::Ints(vec![2, 2]))]);
        let y = run("MaxUnpool", &[Some(&x), Some(&i)], &a).unwrap();
        assert_eq!(y[0].shape, vec![1, 1, 4, 4]);
        let mut want = vec![0.0; 16];
        want[5] = 5.0;
        want[7] = 6.0;
        want[13] = 7.0;
        want[15] = 8.0;
        close(&y[0], &want);
        // A larger output_shape places the unpooled tensor at its origin.
        let y = run("MaxUnpool", &[Some(&x), Some(&i), Some(&i64s(&[4], &[1, 1, 5, 5]))], &a).unwrap();
        let f = floats(&y[0]);
        assert_eq!((f[6], f[8], f[16], f[18]), (5.0, 6.0, 7.0, 8.0));
        let e = run("MaxUnpool", &[Some(&x), Some(&i64s(&[1, 1, 2, 2], &[5, 7, 13, 16]))], &a).unwrap_err();
        assert!(e.contains("outside the unpooled shape"), "{e}");
    }

    #[test]
    fn col2im_sums_blocks() {
        // One channel, image [3], block [2], stride 1: two blocks [a, b] at 0 and [c, d] at 1.
        let x = t(DType::F32, &[1, 2, 2], &[1.0, 10.0, 2.0, 20.0]);
        let y = run("Col2Im", &[Some(&x), Some(&i64s(&[1], &[3])), Some(&i64s(&[1], &[2]))], &Attrs::default());
        // x[0, k, l]: block l tap k. image[0] = b0t0, image[1] = b0t1 + b1t0, image[2] = b1t1.
        close(&y.unwrap()[0], &[1.0, 2.0 + 10.0, 20.0]);
        let e = run("Col2Im", &[Some(&x), Some(&i64s(&[1], &[4])), Some(&i64s(&[1], &[2]))], &Attrs::default());
        assert!(e.unwrap_err().contains("the geometry gives"));
    }
}
