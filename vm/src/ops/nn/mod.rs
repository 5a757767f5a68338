//! Operators: nn family — convolutions, pooling and matrix products: the host kernels
//! and their `HOST` table (the schemas are in `crate::ir::operators::nn`).
//!
//! Everything computes in f32 and accumulates in f32, like typical runtimes. Spatial
//! operators are N-d (any number of spatial dims after `[N, C]`). Convolutions run as
//! im2col (skipped for pointwise kernels) plus a packed, cache-blocked GEMM; the GEMM and
//! the per-(batch, group) work split over the available cores once the work is large.

#[macro_use]
mod simd;
mod conv;
mod epilogue;
mod flat;
mod gemm;
mod operands;
mod pool;
mod winograd;
mod workers;

use conv::{conv_f32, conv_transpose_f32};
use epilogue::{Activation, Post};
use gemm::{gemm, Mat};
use operands::{
    check_out, f32_view, fill_f32, host_input, operands_dtype, prod, put_wide, unflatten, values, wide, wide64,
    write_f32,
};
use pool::{average_pool, global_average_pool, global_max_pool, max_pool};
use workers::par_items;

use super::host::{on_tensors, HostFn, ViewFn};
use super::Attrs;
use crate::ir::host_tensor::{load_f64, numel, store_f64, TensorMut, TensorRef};
use crate::ir::operators::nn::*;
use crate::ir::operators::shape::broadcast_strides;
use crate::ir::operators::Operator;
use crate::ir::types::DType;

/// This family's in-place host kernels.
pub(crate) static VIEW: &[(Operator, ViewFn)] = &[
    (Operator::Conv, conv),
    (Operator::FusedConv, fused_conv),
    (Operator::ConvTranspose, conv_transpose),
    (Operator::MaxPool, max_pool),
    (Operator::AveragePool, average_pool),
    (Operator::GlobalAveragePool, global_average_pool),
    (Operator::GlobalMaxPool, global_max_pool),
    (Operator::Gemm, gemm_op),
    (Operator::MatMul, matmul),
];

/// This family's host kernels: the in-place ones on host tensors.
pub(crate) static HOST: &[(Operator, HostFn)] = &[
    (Operator::Conv, |i, a, o| on_tensors(conv, i, a, o)),
    (Operator::FusedConv, |i, a, o| on_tensors(fused_conv, i, a, o)),
    (Operator::ConvTranspose, |i, a, o| on_tensors(conv_transpose, i, a, o)),
    (Operator::MaxPool, |i, a, o| on_tensors(max_pool, i, a, o)),
    (Operator::AveragePool, |i, a, o| on_tensors(average_pool, i, a, o)),
    (Operator::GlobalAveragePool, |i, a, o| on_tensors(global_average_pool, i, a, o)),
    (Operator::GlobalMaxPool, |i, a, o| on_tensors(global_max_pool, i, a, o)),
    (Operator::Gemm, |i, a, o| on_tensors(gemm_op, i, a, o)),
    (Operator::MatMul, |i, a, o| on_tensors(matmul, i, a, o)),
];

fn conv(ins: &[Option<TensorRef>], attrs: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    conv_then(ins, attrs, outs, Post::NONE)
}

/// The convolution, with `post` applied to its f32 output (only f32 convolutions take one).
fn conv_then(ins: &[Option<TensorRef>], attrs: &Attrs, outs: &mut [TensorMut], post: Post) -> Result<(), String> {
    let (x, w, b) = (host_input(ins, 0, "X")?, host_input(ins, 1, "W")?, ins.get(2).copied().flatten());
    let cd = conv_dims(x.shape, w.shape, b.map(|b| b.shape), attrs)?;
    let d = operands_dtype(&[Some(x), Some(w), b])?;
    check_out(outs, 0, d, &cd.out_shape)?;
    if d != DType::F32 && post.any() {
        return Err(format!("internal error: a {d} convolution given an f32 epilogue"));
    }
    match d {
        DType::F32 => {
            let (xv, wv, bv) = (values(x, "X")?, values(w, "W")?, b.map(|b| values(b, "B")).transpose()?);
            write_f32(&mut outs[0], |y| conv_f32(&xv, (&wv, w.constant), bv.as_deref(), &cd, post, y))
        }
        DType::F64 => {
            let (xv, wv, bv) = (wide64(x, "X")?, wide64(w, "W")?, b.map(|b| wide64(b, "B")).transpose()?);
            let mut y = vec![0f64; outs[0].data.len() / 8];
            conv_f64(&xv, &wv, bv.as_deref(), &cd, &mut y, false)?;
            put_wide(&mut outs[0], y.iter().copied())
        }
        _ => {
            let (xv, wv, bv) = (wide(x, "X")?, wide(w, "W")?, b.map(|b| wide(b, "B")).transpose()?);
            let mut y = vec![0f32; numel(&cd.out_shape).unwrap_or(0) as usize];
            conv_f32(&xv, (&wv, w.constant), bv.as_deref(), &cd, Post::NONE, &mut y)?;
            put_wide(&mut outs[0], y.iter().map(|&v| v as f64))
        }
    }
}

/// FusedConv: the convolution, then `+ Z` and the activation over its output, each step
/// rounded to the output dtype as the unfused operators round it. On f32 the convolution
/// applies them itself, to each block of its output as it finishes it.
fn fused_conv(ins: &[Option<TensorRef>], attrs: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    let (act, params) = fused_activation(attrs)?;
    let act = Activation::new(act, &params);
    let conv_ins = ins.get(..3).unwrap_or(ins);
    let z = ins.get(3).copied().flatten();
    let y = outs.first().ok_or("the output Y is required")?;
    if let Some(z) = z {
        if z.dtype != y.dtype || z.shape != y.shape || z.data.len() != y.data.len() {
            return Err(format!("Z is {}{:?} but Y is {}{:?}: they must match", z.dtype, z.shape, y.dtype, y.shape));
        }
    }
    if y.dtype == DType::F32 {
        if let Some(zv) = z.map_or(Some(None), |z| f32_view(z.data).map(Some)) {
            return conv_then(conv_ins, attrs, outs, Post { act, z: zv });
        }
    }
    conv(conv_ins, attrs, outs)?;
    let y = outs.first_mut().ok_or("the output Y is required")?;
    let (d, size) = (y.dtype, y.dtype.size());
    for (i, c) in y.data.chunks_exact_mut(size).enumerate() {
        let mut v = load_f64(d, c);
        if let Some(z) = z {
            store_f64(d, v + load_f64(d, &z.data[i * size..][..size]), c);
            v = load_f64(d, c);
        }
        store_f64(d, act.apply(v as f32) as f64, c);
    }
    Ok(())
}

fn conv_transpose(ins: &[Option<TensorRef>], attrs: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    let (x, w, b) = (host_input(ins, 0, "X")?, host_input(ins, 1, "W")?, ins.get(2).copied().flatten());
    let cd = conv_transpose_dims(x.shape, w.shape, b.map(|b| b.shape), attrs)?;
    let d = operands_dtype(&[Some(x), Some(w), b])?;
    check_out(outs, 0, d, &cd.out_shape)?;
    match d {
        DType::F32 => {
            let (xv, wv, bv) = (values(x, "X")?, values(w, "W")?, b.map(|b| values(b, "B")).transpose()?);
            fill_f32(&mut outs[0], |y| conv_transpose_f32(&xv, &wv, bv.as_deref(), &cd, y))
        }
        DType::F64 => {
            let (xv, wv, bv) = (wide64(x, "X")?, wide64(w, "W")?, b.map(|b| wide64(b, "B")).transpose()?);
            let mut y = vec![0f64; outs[0].data.len() / 8];
            conv_f64(&xv, &wv, bv.as_deref(), &cd, &mut y, true)?;
            put_wide(&mut outs[0], y.iter().copied())
        }
        _ => {
            let (xv, wv, bv) = (wide(x, "X")?, wide(w, "W")?, b.map(|b| wide(b, "B")).transpose()?);
            let mut y = vec![0f32; numel(&cd.out_shape).unwrap_or(0) as usize];
            conv_transpose_f32(&xv, &wv, bv.as_deref(), &cd, &mut y)?;
            put_wide(&mut outs[0], y.iter().map(|&v| v as f64))
        }
    }
}

/// f64 (transposed) convolution, plain loops: Conv reads input position
/// `o * s + kk * d - pb` for output `o`; ConvTranspose writes output position
/// `i * s + kk * d - pb` from input `i`.
fn conv_f64(
    x: &[f64],
    w: &[f64],
    b: Option<&[f64]>,
    cd: &ConvDims,
    y: &mut [f64],
    transpose: bool,
) -> Result<(), String> {
    let g = &cd.geo;
    let (in_plane, out_plane, taps) = (prod(&g.in_sp), prod(&g.out_sp), prod(&g.k));
    let (cg, mg) = (cd.c / cd.group.max(1), cd.m / cd.group.max(1));
    let w_len = if transpose { cd.c * mg * taps } else { cd.m * cg * taps };
    let sizes_ok = x.len() == cd.n * cd.c * in_plane && w.len() == w_len && y.len() == cd.n * cd.m * out_plane;
    if !sizes_ok || b.is_some_and(|b| b.len() != cd.m) {
        return Err("the tensors do not match their shapes".into());
    }
    let nsp = g.k.len();
    let (mut pos, mut tap) = (vec![0usize; nsp], vec![0usize; nsp]);
    // Where window position `p` (over `from`) and tap `t` land in `to` (flat), if inside.
    let land = |p: &[usize], t: &[usize], to: &[usize]| -> Option<usize> {
        let mut flat = 0usize;
        for a in 0..nsp {
            let v = (p[a] * g.s[a] + t[a] * g.d[a]) as i64 - g.pb[a];
            if v < 0 || v >= to[a] as i64 {
                return None;
            }
            flat = flat * to[a] + v as usize;
        }
        Some(flat)
    };
    y.fill(0.0);
    for n in 0..cd.n {
        for m in 0..cd.m {
            let gi = m / mg.max(1);
            let yp = &mut y[(n * cd.m + m) * out_plane..][..out_plane];
            for c in 0..cg {
                let ci = gi * cg + c;
                let xp = &x[(n * cd.c + ci) * in_plane..][..in_plane];
                let wp = if transpose {
                    &w[(ci * mg + m % mg.max(1)) * taps..][..taps]
                } else {
                    &w[(m * cg + c) * taps..][..taps]
                };
                let positions = if transpose { in_plane } else { out_plane };
                for q in 0..positions {
                    unflatten(q, if transpose { &g.in_sp } else { &g.out_sp }, &mut pos);
                    for (t, &wv) in wp.iter().enumerate() {
                        unflatten(t, &g.k, &mut tap);
                        if transpose {
                            if let Some(o) = land(&pos, &tap, &g.out_sp) {
                                yp[o] += xp[q] * wv;
                            }
                        } else if let Some(i) = land(&pos, &tap, &g.in_sp) {
                            yp[q] += xp[i] * wv;
                        }
                    }
                }
            }
            if let Some(b) = b {
                yp.iter_mut().for_each(|v| *v += b[m]);
            }
        }
    }
    Ok(())
}

/// f64 `C += alpha * A B` with A and B given by strides (plain loops).
#[allow(clippy::too_many_arguments)]
fn gemm_f64(
    m: usize,
    n: usize,
    k: usize,
    alpha: f64,
    a: (&[f64], usize, usize),
    b: (&[f64], usize, usize),
    c: &mut [f64],
) {
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0f64;
            for p in 0..k {
                acc += a.0[i * a.1 + p * a.2] * b.0[p * b.1 + j * b.2];
            }
            c[i * n + j] += alpha * acc;
        }
    }
}

fn gemm_op(ins: &[Option<TensorRef>], attrs: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    let (a, b, c) = (host_input(ins, 0, "A")?, host_input(ins, 1, "B")?, ins.get(2).copied().flatten());
    let (m, k, n) = gemm_dims(a.shape, b.shape, c.map(|c| c.shape), attrs)?;
    let d = operands_dtype(&[Some(a), Some(b), c])?;
    check_out(outs, 0, d, &[m as i64, n as i64])?;
    if d != DType::F32 {
        return gemm_wide(a, b, c, attrs, (m, k, n), &mut outs[0]);
    }
    let (alpha, beta) = (attrs.float("alpha", 1.0) as f32, attrs.float("beta", 1.0) as f32);
    let (av, bv) = (values(a, "A")?, values(b, "B")?);
    let cv = match c {
        Some(c) if beta != 0.0 => Some((values(c, "C")?, broadcast_strides(c.shape, &[m as i64, n as i64]))),
        _ => None,
    };
    let am = if attrs.int("transA", 0) != 0 {
        Mat { d: &av, rs: 1, cs: m, packed: None }
    } else {
        Mat { d: &av, rs: k, cs: 1, packed: None }
    };
    let bm = if attrs.int("transB", 0) != 0 {
        Mat { d: &bv, rs: 1, cs: k, packed: None }
    } else {
        Mat { d: &bv, rs: n, cs: 1, packed: None }
    };
    fill_f32(&mut outs[0], |y| {
        if let Some((cv, st)) = &cv {
            for (i, row) in y.chunks_exact_mut(n.max(1)).enumerate() {
                for (j, v) in row.iter_mut().enumerate() {
                    *v = beta * cv[i * st[0] + j * st[1]];
                }
            }
        }
        gemm(m, n, k, alpha, am, bm, y, n, true)
    })
}

fn matmul(ins: &[Option<TensorRef>], _: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    let (a, b) = (host_input(ins, 0, "A")?, host_input(ins, 1, "B")?);
    let md = matmul_dims(a.shape, b.shape)?;
    let d = operands_dtype(&[Some(a), Some(b)])?;
    check_out(outs, 0, d, &md.out_shape)?;
    match d {
        DType::F32 => {
            let (av, bv) = (values(a, "A")?, values(b, "B")?);
            fill_f32(&mut outs[0], |y| matmul_f32(&av, &bv, &md, y))
        }
        DType::F64 => {
            let (av, bv) = (wide64(a, "A")?, wide64(b, "B")?);
            let (m, k, n) = (md.m, md.k, md.n);
            let batches = md.batch.iter().product::<i64>() as usize;
            if av.len() != md.a_batch * m * k || bv.len() != md.b_batch * k * n {
                return Err("the tensors do not match their shapes".into());
            }
            let mut y = vec![0f64; batches * m * n];
            for (bi, yi) in y.chunks_mut((m * n).max(1)).enumerate() {
                let (mut rest, mut ao, mut bo) = (bi, 0usize, 0usize);
                for i in (0..md.batch.len()).rev() {
                    let dd = md.batch[i] as usize;
                    let j = rest % dd.max(1);
                    rest /= dd.max(1);
                    ao += j * md.a_strides[i];
                    bo += j * md.b_strides[i];
                }
                gemm_f64(m, n, k, 1.0, (&av[ao * m * k..], k, 1), (&bv[bo * k * n..], n, 1), yi);
            }
            put_wide(&mut outs[0], y.into_iter())
        }
        _ => {
            let (av, bv) = (wide(a, "A")?, wide(b, "B")?);
            let mut y = vec![0f32; numel(&md.out_shape).unwrap_or(0) as usize];
            matmul_f32(&av, &bv, &md, &mut y)?;
            put_wide(&mut outs[0], y.iter().map(|&v| v as f64))
        }
    }
}

/// Gemm on f16, bf16 (computed in f32) and f64 (computed in f64).
fn gemm_wide(
    a: TensorRef,
    b: TensorRef,
    c: Option<TensorRef>,
    attrs: &Attrs,
    (m, k, n): (usize, usize, usize),
    out: &mut TensorMut,
) -> Result<(), String> {
    let (alpha, beta) = (attrs.float("alpha", 1.0), attrs.float("beta", 1.0));
    let (ta, tb) = (attrs.int("transA", 0) != 0, attrs.int("transB", 0) != 0);
    let mut y = vec![0f64; m * n];
    if let Some(c) = c.filter(|_| beta != 0.0) {
        let (cv, st) = (wide64(c, "C")?, broadcast_strides(c.shape, &[m as i64, n as i64]));
        for (i, row) in y.chunks_exact_mut(n.max(1)).enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                *v = beta * cv[i * st[0] + j * st[1]];
            }
        }
    }
    if a.dtype == DType::F64 {
        let (av, bv) = (wide64(a, "A")?, wide64(b, "B")?);
        let am = if ta { (&av[..], 1, m) } else { (&av[..], k, 1) };
        let bm = if tb { (&bv[..], 1, k) } else { (&bv[..], n, 1) };
        gemm_f64(m, n, k, alpha, am, bm, &mut y);
        return put_wide(out, y.into_iter());
    }
    // f16 / bf16: the f32 product, then alpha and C as the f32 kernel applies them.
    let (av, bv) = (wide(a, "A")?, wide(b, "B")?);
    let am = if ta { Mat { d: &av, rs: 1, cs: m, packed: None } } else { Mat { d: &av, rs: k, cs: 1, packed: None } };
    let bm = if tb { Mat { d: &bv, rs: 1, cs: k, packed: None } } else { Mat { d: &bv, rs: n, cs: 1, packed: None } };
    let mut y32: Vec<f32> = y.iter().map(|&v| v as f32).collect();
    gemm(m, n, k, alpha as f32, am, bm, &mut y32, n, true)?;
    put_wide(out, y32.iter().map(|&v| v as f64))
}

fn matmul_f32(a: &[f32], b: &[f32], md: &MatMulDims, y: &mut [f32]) -> Result<(), String> {
    let (m, k, n) = (md.m, md.k, md.n);
    let batches = md.batch.iter().product::<i64>() as usize;
    if a.len() != md.a_batch * m * k || b.len() != md.b_batch * k * n || y.len() != batches * m * n {
        return Err("the tensors do not match their shapes".into());
    }
    if md.b_batch == 1 && md.a_batch == batches {
        // B is shared by every batch: one GEMM with the batches stacked as rows.
        return gemm(
            batches * m,
            n,
            k,
            1.0,
            Mat { d: a, rs: k, cs: 1, packed: None },
            Mat { d: b, rs: n, cs: 1, packed: None },
            y,
            n,
            true,
        );
    }
    let work = batches as f64 * (m * n) as f64 * k as f64;
    par_items(y, m * n, work, |bi, yi, par| {
        let (mut rest, mut ao, mut bo) = (bi, 0usize, 0usize);
        for i in (0..md.batch.len()).rev() {
            let d = md.batch[i] as usize;
            let j = rest % d;
            rest /= d;
            ao += j * md.a_strides[i];
            bo += j * md.b_strides[i];
        }
        let am = Mat { d: &a[ao * m * k..], rs: k, cs: 1, packed: None };
        let bm = Mat { d: &b[bo * k * n..], rs: n, cs: 1, packed: None };
        gemm(m, n, k, 1.0, am, bm, yi, n, par)
    })
}

#[cfg(test)]
mod tests;
