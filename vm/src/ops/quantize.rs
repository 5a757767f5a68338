//! Operators: the quantization family (QuantizeLinear, DequantizeLinear,
//! DynamicQuantizeLinear, QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger): the host
//! kernels and their `HOST` table (the schemas are in `crate::ir::operators::quantize`).
//!
//! They compute as ONNX's reference implementation (numpy) does: integer products and sums
//! in i32 (wrapping), the scale arithmetic in the scales' dtype, the requantization of an
//! i32 result in f64, and rounding half to even before saturating to the output type.

use super::bitwise::{elems, opt, put, walk};
use super::host::HostFn;
use super::host::{first, prepare, req};
pub(crate) use super::num::round_to;
use super::num::{floating, Arith};
use super::{Attrs, TensorInfo};
use crate::ir::host_tensor::{load_f64, store_f64, store_i64, HostTensor};
use crate::ir::minifloat::{float8_encode, RoundMode};
use crate::ir::operators::nn::{ConvDims, MatMulDims};
use crate::ir::operators::quantize::*;
use crate::ir::operators::Operator;
use crate::ir::types::DType;

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[
    (Operator::QuantizeLinear, quantize_linear),
    (Operator::DequantizeLinear, dequantize_linear),
    (Operator::DynamicQuantizeLinear, dynamic_quantize_linear),
    (Operator::QLinearMatMul, qlinear_matmul),
    (Operator::QLinearConv, qlinear_conv),
    (Operator::MatMulInteger, matmul_integer),
    (Operator::ConvInteger, conv_integer),
];

// ---------------------------------------------------------------------------------------
// Helpers.

fn infos<'a>(ins: &[Option<&'a HostTensor>]) -> Vec<Option<TensorInfo<'a>>> {
    ins.iter().map(|t| t.map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) })).collect()
}

/// Rounds half to even and saturates to the integer dtype `d` (NaN gives 0).
pub(crate) fn saturate(d: DType, v: f64) -> i64 {
    let (lo, hi) = d.int_range().unwrap_or((0, 0));
    let r = v.round_ties_even();
    if r.is_nan() {
        0
    } else {
        r.clamp(lo as f64, hi as f64) as i64
    }
}

/// Integer elements as i32 (u8, i8, u16, i16 and i32 tensors).
fn ints(t: &HostTensor) -> Vec<i32> {
    t.to_i64().into_iter().map(|v| v as i32).collect()
}

/// Integer elements minus a zero point broadcast as `zshape` (`None`: no zero point).
fn minus_zero_point(x: &HostTensor, z: Option<&HostTensor>, zshape: Option<&[i64]>) -> Vec<i32> {
    let mut v = ints(x);
    if let (Some(z), Some(zs)) = (z, zshape) {
        let zv = ints(z);
        walk(&x.shape, [zs], |k, [j]| v[k] = v[k].wrapping_sub(zv[j]));
    }
    v
}

/// numpy's matmul on i32 (wrapping), with the dims of [`crate::ir::operators::nn::matmul_dims`].
pub(crate) fn matmul_i32(a: &[i32], b: &[i32], d: &MatMulDims) -> Vec<i32> {
    let (m, k, n) = (d.m, d.k, d.n);
    let batch: usize = d.batch.iter().map(|&v| v.max(0) as usize).product();
    let mut y = vec![0i32; batch * m * n];
    let mut idx = vec![0usize; d.batch.len()];
    for ys in y.chunks_exact_mut((m * n).max(1)).take(batch) {
        let (ao, bo) =
            idx.iter().enumerate().fold((0, 0), |(x, z), (j, &c)| (x + c * d.a_strides[j], z + c * d.b_strides[j]));
        let (aa, bb) = (&a[ao * m * k..], &b[bo * k * n..]);
        for r in 0..m {
            for c in 0..n {
                let mut acc = 0i32;
                for t in 0..k {
                    acc = acc.wrapping_add(aa[r * k + t].wrapping_mul(bb[t * n + c]));
                }
                ys[r * n + c] = acc;
            }
        }
        for j in (0..idx.len()).rev() {
            idx[j] += 1;
            if idx[j] < d.batch[j] as usize {
                break;
            }
            idx[j] = 0;
        }
    }
    y
}

/// A direct N-d convolution on i32 (wrapping), with the dims of
/// [`crate::ir::operators::nn::conv_dims`]: x `[N, C, in...]`, w `[M, C/group, k...]`.
pub(crate) fn conv_i32(x: &[i32], w: &[i32], cd: &ConvDims) -> Vec<i32> {
    let g = &cd.geo;
    let nsp = g.k.len();
    let in_sz: usize = g.in_sp.iter().product();
    let out_sz: usize = g.out_sp.iter().product();
    let k_sz: usize = g.k.iter().product();
    let (cg, mg) = (cd.c / cd.group, cd.m / cd.group);
    // The input offset of each (output position, kernel position), or None in the padding.
    let mut taps: Vec<Option<usize>> = Vec::with_capacity(out_sz * k_sz);
    let mut oc = vec![0usize; nsp];
    for _ in 0..out_sz {
        let mut kc = vec![0usize; nsp];
        for _ in 0..k_sz {
            let mut off = Some(0usize);
            for d in 0..nsp {
                let p = (oc[d] * g.s[d]) as i64 + (kc[d] * g.d[d]) as i64 - g.pb[d];
                off = match off {
                    Some(o) if p >= 0 && (p as usize) < g.in_sp[d] => Some(o * g.in_sp[d] + p as usize),
                    _ => None,
                };
            }
            taps.push(off);
            advance(&mut kc, &g.k);
        }
        advance(&mut oc, &g.out_sp);
    }
    let mut y = vec![0i32; cd.n * cd.m * out_sz];
    for n in 0..cd.n {
        for m in 0..cd.m {
            let grp = m / mg.max(1);
            let ys = &mut y[(n * cd.m + m) * out_sz..][..out_sz];
            for (o, yv) in ys.iter_mut().enumerate() {
                let mut acc = 0i32;
                for ci in 0..cg {
                    let xs = &x[(n * cd.c + grp * cg + ci) * in_sz..];
                    let ws = &w[(m * cg + ci) * k_sz..][..k_sz];
                    for (t, &wv) in taps[o * k_sz..][..k_sz].iter().zip(ws) {
                        if let Some(p) = t {
                            acc = acc.wrapping_add(xs[*p].wrapping_mul(wv));
                        }
                    }
                }
                *yv = acc;
            }
        }
    }
    y
}

/// Advances a row-major multi-index over `dims`.
fn advance(idx: &mut [usize], dims: &[usize]) {
    for d in (0..idx.len()).rev() {
        idx[d] += 1;
        if idx[d] < dims[d] {
            return;
        }
        idx[d] = 0;
    }
}

/// The first element of a one-element tensor as f64.
fn scalar(t: &HostTensor) -> f64 {
    t.data.get(..t.dtype.size()).map_or(0.0, |b| load_f64(t.dtype, b))
}

// ---------------------------------------------------------------------------------------
// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.

fn quantize_linear(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_quantize)?;
    let p = plan_quantize(&infos(ins), attrs)?;
    let (x, s) = (req(ins, 0)?, req(ins, 1)?);
    let (xv, sv) = (x.to_f64(), s.to_f64());
    let zv = opt(ins, 2).map(|z| z.to_i64());
    let out = first(outs)?;
    let es = p.out.size();
    if p.out.is_float8() {
        // The zero point is 0 (checked by the plan): y = saturate(x / scale), rounded to
        // nearest even; without `saturate`, overflow gives inf (or NaN where there is none).
        let sat = attrs.int("saturate", 1) != 0;
        for (k, (c, &v)) in out.data.chunks_exact_mut(es).zip(&xv).enumerate() {
            let i = p.layout.index(k);
            let q = round_to(p.precision, round_to(p.precision, v) / round_to(p.precision, sv[i]));
            c[0] = float8_encode(p.out, q, sat, RoundMode::Nearest).unwrap_or(0);
        }
        return Ok(());
    }
    for (k, (c, &v)) in out.data.chunks_exact_mut(es).zip(&xv).enumerate() {
        let i = p.layout.index(k);
        let q = round_to(p.precision, round_to(p.precision, v) / round_to(p.precision, sv[i]));
        let zp = zv.as_ref().map_or(0, |z| z[i]);
        let r = q.round_ties_even();
        let r = if r.is_nan() { 0 } else { r.clamp(i64::MIN as f64, i64::MAX as f64) as i64 };
        let (lo, hi) = p.out.int_range().unwrap_or((0, 0));
        store_i64(p.out, (r as i128 + zp as i128).clamp(lo, hi) as i64, c);
    }
    Ok(())
}

fn dequantize_linear(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_dequantize)?;
    let (d, layout) = plan_dequantize(&infos(ins), attrs)?;
    let (x, s) = (req(ins, 0)?, req(ins, 1)?);
    let (xv, sv) = (x.to_i64(), s.to_f64());
    let z = opt(ins, 2);
    let zv = z.map(|z| z.to_i64());
    let out = first(outs)?;
    // numpy: x as f32 minus the zero point, times the scale, in f32; an i32 x with a zero
    // point subtracts in f64.
    let wide = x.dtype == DType::I32 && z.is_some();
    if x.dtype.is_float8() {
        // The zero point is 0 (checked by the plan): y = x * scale in f32.
        for (k, (c, v)) in out.data.chunks_exact_mut(d.size()).zip(x.to_f64()).enumerate() {
            store_f64(d, (v as f32 * sv[layout.index(k)] as f32) as f64, c);
        }
        return Ok(());
    }
    for (k, (c, &v)) in out.data.chunks_exact_mut(d.size()).zip(&xv).enumerate() {
        let i = layout.index(k);
        let zp = zv.as_ref().map_or(0, |z| z[i]);
        let y = if wide { (v - zp) as f64 * sv[i] } else { ((v as f32 - zp as f32) * sv[i] as f32) as f64 };
        store_f64(d, y, c);
    }
    Ok(())
}

fn dynamic_quantize_linear(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_dynamic_quantize)?;
    let xv = elems::<f32>(req(ins, 0)?);
    let nan_max = |a: f32, b: f32| if a.is_nan() || b.is_nan() { f32::NAN } else { a.max(b) };
    let nan_min = |a: f32, b: f32| if a.is_nan() || b.is_nan() { f32::NAN } else { a.min(b) };
    let (mx, mn) = xv.iter().fold((0f32, 0f32), |(a, b), &v| (nan_max(a, v), nan_min(b, v)));
    let (scale, zp) = dynamic_params(mx, mn);
    let y: Vec<u8> = xv.iter().map(|&v| dynamic_quantize(v, scale, zp)).collect();
    let Some((o, rest)) = outs.split_first_mut() else { return Err("an output tensor is required".into()) };
    o.data.copy_from_slice(&y);
    if let Some(s) = rest.get_mut(0) {
        put(s, &[scale]);
    }
    if let Some(z) = rest.get_mut(1) {
        put(z, &[zp as u8]);
    }
    Ok(())
}

/// DynamicQuantizeLinear's scale and (rounded) zero point from max(x, 0) and min(x, 0).
pub(crate) fn dynamic_params(mx: f32, mn: f32) -> (f32, f32) {
    let scale = (if mx == mn { 1.0 } else { mx - mn }) / 255.0;
    let izp = 0.0 - mn / scale;
    let zp = if izp > 255.0 {
        255.0
    } else if izp >= 0.0 {
        izp
    } else {
        0.0
    };
    (scale, zp.round_ties_even())
}

pub(crate) fn dynamic_quantize(v: f32, scale: f32, zp: f32) -> u8 {
    let q = (v / scale).round_ties_even() + zp;
    if q.is_nan() {
        0
    } else {
        q.clamp(0.0, 255.0) as u8
    }
}

// ---------------------------------------------------------------------------------------
// QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger.

/// `a[i] * b[j] / y` in the scales' dtype `T`, as f64.
fn multiplier_as<T: Arith>(a: &HostTensor, b: &HostTensor, y: &HostTensor) -> Vec<Vec<f64>> {
    let (av, bv, yv) = (elems::<T>(a), elems::<T>(b), elems::<T>(y));
    let y0 = yv.first().copied().unwrap_or_default();
    av.iter().map(|&x| bv.iter().map(|&w| x.mul(w).div(y0).to_f64()).collect()).collect()
}

fn multipliers(a: &HostTensor, b: &HostTensor, y: &HostTensor) -> Result<Vec<Vec<f64>>, String> {
    floating!(a.dtype, T => Ok(multiplier_as::<T>(a, b, y)))
}

/// Requantizes i32 results: `round(acc * mult(k) + zp)` saturated to `out`.
fn requantize(acc: &[i32], out: &mut HostTensor, zp: f64, mult: impl Fn(usize) -> f64) {
    let d = out.dtype;
    for (k, (c, &v)) in out.data.chunks_exact_mut(d.size()).zip(acc).enumerate() {
        store_i64(d, saturate(d, v as f64 * mult(k) + zp), c);
    }
}

fn qlinear_matmul(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_qlinear_matmul)?;
    let p = plan_qlinear_matmul(&infos(ins))?;
    let t: Vec<&HostTensor> = (0..8).map(|i| req(ins, i)).collect::<Result<_, _>>()?;
    let (m, n) = (p.dims.m, p.dims.n);
    let av = per_row(t[0], t[2], p.a_len, m, p.dims.k);
    let bv = per_col(t[3], t[5], p.b_len, n);
    let acc = matmul_i32(&av, &bv, &p.dims);
    let mult = multipliers(t[1], t[4], t[6])?;
    let zp = scalar(t[7]);
    let (al, bl) = (p.a_len, p.b_len);
    requantize(&acc, first(outs)?, zp, |k| {
        let (c, r) = (k % n.max(1), (k / n.max(1)) % m.max(1));
        mult[if al == 1 { 0 } else { r }][if bl == 1 { 0 } else { c }]
    });
    Ok(())
}

/// `a - zp`, the zero point per tensor (`len` 1) or per row of the `[.., m, k]` operand.
fn per_row(a: &HostTensor, z: &HostTensor, len: usize, m: usize, k: usize) -> Vec<i32> {
    let zv = ints(z);
    let mut v = ints(a);
    for (i, x) in v.iter_mut().enumerate() {
        let r = if len == 1 { 0 } else { (i / k.max(1)) % m.max(1) };
        *x = x.wrapping_sub(zv.get(r).copied().unwrap_or(0));
    }
    v
}

/// `b - zp`, the zero point per tensor (`len` 1) or per column of the `[.., k, n]` operand.
fn per_col(b: &HostTensor, z: &HostTensor, len: usize, n: usize) -> Vec<i32> {
    let zv = ints(z);
    let mut v = ints(b);
    for (i, x) in v.iter_mut().enumerate() {
        let c = if len == 1 { 0 } else { i % n.max(1) };
        *x = x.wrapping_sub(zv.get(c).copied().unwrap_or(0));
    }
    v
}

fn qlinear_conv(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_qlinear_conv)?;
    let p = plan_qlinear_conv(&infos(ins), attrs)?;
    let t: Vec<&HostTensor> = (0..8).map(|i| req(ins, i)).collect::<Result<_, _>>()?;
    let x = minus_zero_point(t[0], Some(t[2]), Some(&[]));
    let w = per_channel(t[3], Some(t[5]), p.dims.m);
    let mut acc = conv_i32(&x, &w, &p.dims);
    let out_sz: usize = p.dims.geo.out_sp.iter().product();
    let m = p.dims.m;
    if let Some(b) = opt(ins, 8) {
        let bv = ints(b);
        for (k, v) in acc.iter_mut().enumerate() {
            *v = v.wrapping_add(bv[(k / out_sz.max(1)) % m]);
        }
    }
    // numpy: x_scale * w_scale / y_scale in f32, the product with the i32 sums in f64.
    let (xs, ys) = (scalar(t[1]) as f32, scalar(t[6]) as f32);
    let ws = elems::<f32>(t[4]);
    let mult: Vec<f64> = ws.iter().map(|&w| (xs * w / ys) as f64).collect();
    let zp = scalar(t[7]);
    requantize(&acc, first(outs)?, zp, |k| mult[if p.w_len == 1 { 0 } else { (k / out_sz.max(1)) % m }]);
    Ok(())
}

/// `w - zp`, the zero point per tensor or per output channel (the first dim).
fn per_channel(w: &HostTensor, z: Option<&HostTensor>, m: usize) -> Vec<i32> {
    let mut v = ints(w);
    if let Some(z) = z {
        let zv = ints(z);
        let per = v.len() / m.max(1);
        for (i, x) in v.iter_mut().enumerate() {
            let c = if zv.len() == 1 { 0 } else { i / per.max(1) };
            *x = x.wrapping_sub(zv.get(c).copied().unwrap_or(0));
        }
    }
    v
}

fn matmul_integer(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_matmul_integer)?;
    let (dims, za, zb) = plan_matmul_integer(&infos(ins))?;
    let a = minus_zero_point(req(ins, 0)?, opt(ins, 2), za.as_deref());
    let b = minus_zero_point(req(ins, 1)?, opt(ins, 3), zb.as_deref());
    put(first(outs)?, &matmul_i32(&a, &b, &dims));
    Ok(())
}

fn conv_integer(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_conv_integer)?;
    let (dims, _) = plan_conv_integer(&infos(ins), attrs)?;
    let x = minus_zero_point(req(ins, 0)?, opt(ins, 2), Some(&[]));
    let w = per_channel(req(ins, 1)?, opt(ins, 3), dims.m);
    put(first(outs)?, &conv_i32(&x, &w, &dims));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ops::bitwise::tests::{attrs, def, f, none, ok, run, run_all, tensor};
    use half::f16;

    fn u8s(shape: &[i64], v: &[u8]) -> HostTensor {
        tensor(DType::U8, shape, v)
    }

    fn i32s(shape: &[i64], v: &[i32]) -> HostTensor {
        tensor(DType::I32, shape, v)
    }

    #[test]
    fn quantize_rounds_half_to_even_and_saturates() {
        let x = f(&[6], &[0.0, 2.0, 3.0, 1000.0, -254.0, -1000.0]);
        let y = ok("QuantizeLinear", &[&x, &f(&[], &[2.0]), &u8s(&[], &[128])], &none());
        assert_eq!(y, u8s(&[6], &[128, 129, 130, 255, 1, 0]));
        // Ties to even: 2.5 → 2, 3.5 → 4, -2.5 → -2.
        let x = f(&[3], &[5.0, 7.0, -5.0]);
        let y = ok("QuantizeLinear", &[&x, &f(&[], &[2.0]), &tensor(DType::I8, &[], &[0i8])], &none());
        assert_eq!(y, tensor(DType::I8, &[3], &[2i8, 4, -2]));
        // Per axis (default axis 1), and without a zero point: u8.
        let x = f(&[1, 2, 2], &[2.0, 4.0, 9.0, 12.0]);
        assert_eq!(ok("QuantizeLinear", &[&x, &f(&[2], &[2.0, 3.0])], &none()), u8s(&[1, 2, 2], &[1, 2, 3, 4]));
        // Blocked along axis 1 with block 2: scales [[1, 10]] for columns [0, 1] and [2, 3].
        let blocked = attrs(&[("axis", AttrValue::Int(1)), ("block_size", AttrValue::Int(2))]);
        let x = f(&[1, 4], &[3.0, 4.0, 30.0, 60.0]);
        assert_eq!(ok("QuantizeLinear", &[&x, &f(&[1, 2], &[1.0, 10.0])], &blocked), u8s(&[1, 4], &[3, 4, 3, 6]));
        // output_dtype without a zero point; u16 and i16 ranges.
        let i16s = attrs(&[("output_dtype", AttrValue::Int(5))]);
        let y = ok("QuantizeLinear", &[&f(&[2], &[1e6, -1e6]), &f(&[], &[1.0])], &i16s);
        assert_eq!(y, tensor(DType::I16, &[2], &[i16::MAX, i16::MIN]));
        let y = ok(
            "QuantizeLinear",
            &[&f(&[2], &[1e6, -3.0]), &f(&[], &[1.0]), &tensor(DType::U16, &[], &[1u16])],
            &none(),
        );
        assert_eq!(y, tensor(DType::U16, &[2], &[u16::MAX, 0]));
        // f16 x and scale divide in f16.
        let h =
            |v: &[f32]| tensor(DType::F16, &[v.len() as i64], &v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>());
        assert_eq!(ok("QuantizeLinear", &[&h(&[3.0, 5.0]), &h(&[2.0])], &none()), u8s(&[2], &[2, 2]));
        // Errors.
        assert_eq!(
            run("QuantizeLinear", &[&x, &f(&[3], &[1.0; 3])], &none()).unwrap_err(),
            "the scale of shape [3] must be a scalar or 1-D with the input's size 4 along axis 1 (per-axis), or set \
             block_size for blocked quantization"
        );
        assert!(run("QuantizeLinear", &[&x, &f(&[1, 3], &[1.0; 3])], &blocked)
            .unwrap_err()
            .contains("needs a scale of shape [1, 2]"));
        let e = def("QuantizeLinear").check_attrs(&attrs(&[("output_dtype", AttrValue::Int(21))])).unwrap_err();
        assert!(e.contains("the ONNX data type 21, which the VM does not have"), "{e}");
        assert_eq!(
            run("QuantizeLinear", &[&x, &f(&[], &[1.0]), &u8s(&[], &[0])], &i16s).unwrap_err(),
            "output_dtype is i16 but the zero point is u8"
        );
    }

    #[test]
    fn dequantize_per_tensor_axis_and_blocks() {
        let x = u8s(&[4], &[0, 3, 128, 255]);
        let y = ok("DequantizeLinear", &[&x, &f(&[], &[2.0]), &u8s(&[], &[128])], &none());
        assert_eq!(y, f(&[4], &[-256.0, -250.0, 0.0, 254.0]));
        let x = tensor(DType::I8, &[2, 2], &[-1i8, 2, 3, -4]);
        let y = ok(
            "DequantizeLinear",
            &[&x, &f(&[2], &[1.0, 0.5]), &tensor(DType::I8, &[2], &[1i8, 0])],
            &attrs(&[("axis", AttrValue::Int(0))]),
        );
        assert_eq!(y, f(&[2, 2], &[-2.0, 1.0, 1.5, -2.0]));
        let blocked = attrs(&[("axis", AttrValue::Int(1)), ("block_size", AttrValue::Int(3))]);
        let x = tensor(DType::I16, &[1, 4], &[1i16, 2, 3, 4]);
        let y = ok("DequantizeLinear", &[&x, &f(&[1, 2], &[1.0, 10.0])], &blocked);
        assert_eq!(y, f(&[1, 4], &[1.0, 2.0, 3.0, 40.0]));
        let f16_out = attrs(&[("output_dtype", AttrValue::Int(10))]);
        let y = ok("DequantizeLinear", &[&i32s(&[1], &[3]), &f(&[], &[0.5])], &f16_out);
        assert_eq!(y, tensor(DType::F16, &[1], &[f16::from_f32(1.5)]));
        assert_eq!(
            run("DequantizeLinear", &[&x, &f(&[], &[1.0]), &u8s(&[], &[0])], &none()).unwrap_err(),
            "the zero point is u8 but x is i16: they must have one dtype"
        );
    }

    #[test]
    fn dynamic_quantize_matches_onnx() {
        let x = f(&[6], &[0.0, 2.0, -3.0, -2.5, 1.34, 0.5]);
        let outs = run_all("DynamicQuantizeLinear", &[Some(&x)], &none()).unwrap();
        assert_eq!(outs[0], u8s(&[6], &[153, 255, 0, 26, 221, 179]));
        assert_eq!(outs[1], f(&[], &[0.019_607_844]));
        assert_eq!(outs[2], u8s(&[], &[153]));
        // All positive: the zero point is 0; 1 / (4 / 255) = 63.75.
        let x = f(&[2], &[1.0, 4.0]);
        let outs = run_all("DynamicQuantizeLinear", &[Some(&x)], &none()).unwrap();
        assert_eq!(outs[2], u8s(&[], &[0]));
        assert_eq!(outs[0], u8s(&[2], &[64, 255]));
    }

    #[test]
    fn integer_matmul_and_conv() {
        // MatMulInteger with per-tensor zero points.
        let a = u8s(&[2, 3], &[11, 7, 3, 10, 6, 2]);
        let b = u8s(&[3, 2], &[1, 4, 2, 5, 3, 6]);
        let y = ok("MatMulInteger", &[&a, &b, &u8s(&[1], &[12]), &u8s(&[1], &[0])], &none());
        // (a - 12) = [[-1, -5, -9], [-2, -6, -10]].
        assert_eq!(y, i32s(&[2, 2], &[-38, -83, -44, -98]));
        // Per row of A and per column of B.
        let y = ok("MatMulInteger", &[&a, &b, &u8s(&[2], &[11, 10]), &u8s(&[2], &[1, 4])], &none());
        // (a - zp_row) = [[0, -4, -8], [0, -4, -8]]; (b - zp_col) = [[0, 0], [1, 1], [2, 2]].
        assert_eq!(y, i32s(&[2, 2], &[-20, -20, -20, -20]));
        assert!(run("MatMulInteger", &[&a, &b, &u8s(&[3], &[1, 2, 3])], &none())
            .unwrap_err()
            .contains("one value per row"));
        // ConvInteger 1x1 kernel with padding.
        let x = u8s(&[1, 1, 2, 2], &[2, 3, 4, 5]);
        let w = u8s(&[1, 1, 1, 1], &[3]);
        let pads = attrs(&[("pads", AttrValue::Ints(vec![1, 0, 0, 0]))]);
        let y = ok("ConvInteger", &[&x, &w, &u8s(&[], &[1]), &u8s(&[1], &[1])], &pads);
        assert_eq!(y, i32s(&[1, 1, 3, 2], &[0, 0, 2, 4, 6, 8]));
        // 2x2 kernel, two output channels with their own zero points.
        let x = u8s(&[1, 1, 3, 3], &[2, 3, 4, 5, 6, 7, 8, 9, 10]);
        let w = u8s(&[2, 1, 2, 2], &[1, 1, 1, 1, 2, 2, 2, 2]);
        let y = ok("ConvInteger", &[&x, &w, &u8s(&[], &[1]), &u8s(&[2], &[0, 1])], &none());
        assert_eq!(y, i32s(&[1, 2, 2, 2], &[12, 16, 24, 28, 12, 16, 24, 28]));
    }

    #[test]
    fn qlinear_matmul_and_conv() {
        // The ONNX example: 2-D u8.
        let a = u8s(&[2, 4], &[208, 236, 0, 238, 3, 214, 255, 29]);
        let b = u8s(&[4, 3], &[152, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247]);
        let s = |v: f32| f(&[1], &[v]);
        let ins =
            [&a, &s(0.0066), &u8s(&[1], &[113]), &b, &s(0.00705), &u8s(&[1], &[114]), &s(0.0107), &u8s(&[1], &[118])];
        assert_eq!(ok("QLinearMatMul", &ins, &none()), u8s(&[2, 3], &[168, 115, 255, 1, 66, 151]));
        // QLinearConv: a 1x1 kernel scaling by x_scale * w_scale / y_scale = 0.5 around zero points.
        let x = u8s(&[1, 1, 1, 4], &[10, 11, 12, 13]);
        let w = u8s(&[1, 1, 1, 1], &[2]);
        let ins = [
            &x,
            &f(&[], &[1.0]),
            &u8s(&[], &[10]),
            &w,
            &f(&[1], &[0.5]),
            &u8s(&[1], &[1]),
            &f(&[], &[1.0]),
            &u8s(&[], &[5]),
        ];
        // (x - 10) * (2 - 1) * 0.5 + 5: 5, 5.5 → 6, 6, 6.5 → 6.
        assert_eq!(ok("QLinearConv", &ins, &none()), u8s(&[1, 1, 1, 4], &[5, 6, 6, 6]));
        let b = i32s(&[1], &[3]);
        let mut with_b: Vec<&HostTensor> = ins.to_vec();
        with_b.push(&b);
        assert_eq!(ok("QLinearConv", &with_b, &none()), u8s(&[1, 1, 1, 4], &[6, 7, 8, 8]));
        assert_eq!(run("QLinearConv", &ins[..7], &none()).unwrap_err(), "input 8 (y_zero_point) is required");
    }
}
