//! Operators: nn family — convolutions, pooling and matrix products: the host kernels
//! and their `HOST` table (the schemas are in `crate::ir::operators::nn`).
//!
//! Everything computes in f32 and accumulates in f32, like typical runtimes. Spatial
//! operators are N-d (any number of spatial dims after `[N, C]`). Convolutions run as
//! im2col (skipped for pointwise kernels) plus a packed, cache-blocked GEMM; the GEMM and
//! the per-(batch, group) work split over the available cores once the work is large.

use super::host::{load_f32s, on_tensors, store_f32s, HostFn, ViewFn};
use super::Attrs;
use crate::ir::host_tensor::{load_f64, numel, store_f64, ConstOperand, TensorMut, TensorRef};
use crate::ir::operators::nn::*;
use crate::ir::operators::shape::broadcast_strides;
use crate::ir::operators::Operator;
use crate::ir::types::DType;
use smallvec::SmallVec;
use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::OnceLock;

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

fn prod(v: &[usize]) -> usize {
    v.iter().product()
}

// ---------------------------------------------------------------------------------------
// Host kernels.

fn host_input<'a>(ins: &[Option<TensorRef<'a>>], i: usize, name: &str) -> Result<TensorRef<'a>, String> {
    ins.get(i).copied().flatten().ok_or_else(|| format!("the input {name} is required"))
}

/// Little-endian f32 bytes viewed in place, when they are 4-byte aligned.
fn f32_view(data: &[u8]) -> Option<&[f32]> {
    if cfg!(target_endian = "big") {
        return None;
    }
    // SAFETY: every bit pattern is a valid f32, and `align_to` only hands out the aligned
    // middle part (checked to be everything).
    let (head, mid, tail) = unsafe { data.align_to::<f32>() };
    (head.is_empty() && tail.is_empty()).then_some(mid)
}

fn f32_view_mut(data: &mut [u8]) -> Option<&mut [f32]> {
    if cfg!(target_endian = "big") {
        return None;
    }
    // SAFETY: as in `f32_view`; every f32 written is valid as bytes.
    let (head, mid, tail) = unsafe { data.align_to_mut::<f32>() };
    (head.is_empty() && tail.is_empty()).then_some(mid)
}

/// The f32 elements of an input, checked against its shape (borrowed when aligned).
fn values<'a>(t: TensorRef<'a>, name: &str) -> Result<Cow<'a, [f32]>, String> {
    if t.dtype != DType::F32 {
        return Err(format!("{name} must be f32, found {}{:?}", t.dtype, t.shape));
    }
    if numel(t.shape).and_then(|n| n.checked_mul(4)) != Some(t.data.len() as u64) {
        return Err(format!("{name}: {} bytes of data do not match the shape {}", t.data.len(), ty(t.shape)));
    }
    Ok(match f32_view(t.data) {
        Some(v) => Cow::Borrowed(v),
        None => Cow::Owned(load_f32s(t.data)),
    })
}

/// Checks that output `i` was allocated as `dtype[shape]`.
fn check_out(outs: &[TensorMut], i: usize, dtype: DType, shape: &[i64]) -> Result<(), String> {
    let o = outs.get(i).ok_or_else(|| format!("output {} is missing", i + 1))?;
    let bytes = numel(shape).and_then(|n| n.checked_mul(dtype.size() as u64));
    if o.dtype != dtype || o.shape != shape || bytes != Some(o.data.len() as u64) {
        return Err(format!("output {} is {}{:?}, expected {dtype}{shape:?}", i + 1, o.dtype, o.shape));
    }
    Ok(())
}

/// Runs `f` on an f32 output's elements, zeroed first (in place when aligned).
fn fill_f32(out: &mut TensorMut, f: impl FnOnce(&mut [f32]) -> Result<(), String>) -> Result<(), String> {
    if let Some(v) = f32_view_mut(out.data) {
        v.fill(0.0);
        return f(v);
    }
    let mut v = vec![0f32; out.data.len() / 4];
    f(&mut v)?;
    store_f32s(out.data, &v);
    Ok(())
}

/// Runs `f` on an f32 output's elements (in place when aligned, with whatever they held:
/// `f` must write every element).
fn write_f32(out: &mut TensorMut, f: impl FnOnce(&mut [f32]) -> Result<(), String>) -> Result<(), String> {
    if let Some(v) = f32_view_mut(out.data) {
        return f(v);
    }
    let mut v = vec![0f32; out.data.len() / 4];
    f(&mut v)?;
    store_f32s(out.data, &v);
    Ok(())
}

fn conv(ins: &[Option<TensorRef>], attrs: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    let (x, w, b) = (host_input(ins, 0, "X")?, host_input(ins, 1, "W")?, ins.get(2).copied().flatten());
    let cd = conv_dims(x.shape, w.shape, b.map(|b| b.shape), attrs)?;
    let d = operands_dtype(&[Some(x), Some(w), b])?;
    check_out(outs, 0, d, &cd.out_shape)?;
    match d {
        DType::F32 => {
            let (xv, wv, bv) = (values(x, "X")?, values(w, "W")?, b.map(|b| values(b, "B")).transpose()?);
            write_f32(&mut outs[0], |y| conv_f32(&xv, (&wv, w.constant), bv.as_deref(), &cd, y))
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
            conv_f32(&xv, (&wv, w.constant), bv.as_deref(), &cd, &mut y)?;
            put_wide(&mut outs[0], y.iter().map(|&v| v as f64))
        }
    }
}

/// FusedConv: the convolution, then `+ Z` and the activation over its output, each step
/// rounded to the output dtype as the unfused operators round it.
fn fused_conv(ins: &[Option<TensorRef>], attrs: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    let (act, params) = fused_activation(attrs)?;
    let act = Activation::new(act, &params);
    conv(ins.get(..3).unwrap_or(ins), attrs, outs)?;
    let y = outs.first_mut().ok_or("the output Y is required")?;
    let z = ins.get(3).copied().flatten();
    if let Some(z) = z {
        if z.dtype != y.dtype || z.shape != y.shape || z.data.len() != y.data.len() {
            return Err(format!("Z is {}{:?} but Y is {}{:?}: they must match", z.dtype, z.shape, y.dtype, y.shape));
        }
    }
    if y.dtype == DType::F32 {
        if let (Some(yv), Some(zv)) = (f32_view_mut(y.data), z.map_or(Some(&[][..]), |z| f32_view(z.data))) {
            act.epilogue(yv, z.map(|_| zv));
            return Ok(());
        }
    }
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

/// A FusedConv activation (`p` its `activation_params`), with the formulas of the unfused
/// operators' f32 kernels, so the results are the same.
#[derive(Clone, Copy)]
enum Activation {
    Identity,
    Relu,
    LeakyRelu(f32),
    Clip(f32, f32),
    Sigmoid,
    Tanh,
    HardSigmoid(f32, f32),
}

impl Activation {
    fn new(name: &str, p: &[f64]) -> Activation {
        let p = |i: usize| p.get(i).copied().unwrap_or(0.0) as f32;
        match name {
            "Relu" => Activation::Relu,
            "LeakyRelu" => Activation::LeakyRelu(p(0)),
            "Clip" => Activation::Clip(p(0), p(1)),
            "Sigmoid" => Activation::Sigmoid,
            "Tanh" => Activation::Tanh,
            "HardSigmoid" => Activation::HardSigmoid(p(0), p(1)),
            _ => Activation::Identity,
        }
    }

    #[inline(always)]
    fn apply(self, v: f32) -> f32 {
        match self {
            Activation::Identity => v,
            Activation::Relu => v.max(0.0),
            Activation::LeakyRelu(a) => {
                if v > 0.0 {
                    v
                } else {
                    v * a
                }
            }
            // NaN stays NaN; a > b gives b, as Clip.
            Activation::Clip(a, b) => {
                let v = if v < a { a } else { v };
                if v > b {
                    b
                } else {
                    v
                }
            }
            Activation::Sigmoid => {
                if v >= 0.0 {
                    1.0 / (1.0 + (-v).exp())
                } else {
                    let e = v.exp();
                    e / (1.0 + e)
                }
            }
            Activation::Tanh => v.tanh(),
            Activation::HardSigmoid(a, b) => (a * v + b).clamp(0.0, 1.0),
        }
    }

    /// `y = act(y + z)` (`act(y)` without `z`) over f32s, the loop compiled for each
    /// activation so that it vectorises: one pass that the residual networks make after
    /// every convolution.
    fn epilogue(self, y: &mut [f32], z: Option<&[f32]>) {
        fn run(y: &mut [f32], z: Option<&[f32]>, f: impl Fn(f32) -> f32) {
            match z {
                Some(z) => y.iter_mut().zip(z).for_each(|(o, &v)| *o = f(*o + v)),
                None => y.iter_mut().for_each(|o| *o = f(*o)),
            }
        }
        match self {
            Activation::Identity if z.is_none() => {}
            Activation::Identity => run(y, z, |v| v),
            Activation::Relu => run(y, z, |v| v.max(0.0)),
            act => run(y, z, move |v| act.apply(v)),
        }
    }
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

// ---------------------------------------------------------------------------------------
// Other float dtypes: f16 and bf16 are widened to f32 (exactly), computed by the f32
// kernels and rounded back; f64 is computed in f64 by the plain loops below.

/// The one dtype of a product's operands (f32, f16, bf16 or f64).
fn operands_dtype(ts: &[Option<TensorRef>]) -> Result<DType, String> {
    let mut it = ts.iter().flatten();
    let d = it.next().map_or(DType::F32, |t| t.dtype);
    if !MATMUL_FLOATS.contains(&d) {
        return Err(format!("the operands must be f32, f16, bf16 or f64, found {d}"));
    }
    if let Some(t) = it.find(|t| t.dtype != d) {
        return Err(format!("the operands must have one dtype, found {d} and {}", t.dtype));
    }
    Ok(d)
}

/// The data of `t` checked against its shape.
fn check_len(t: TensorRef, name: &str) -> Result<(), String> {
    if numel(t.shape).and_then(|n| n.checked_mul(t.dtype.size() as u64)) != Some(t.data.len() as u64) {
        return Err(format!("{name}: {} bytes of data do not match the shape {}{:?}", t.data.len(), t.dtype, t.shape));
    }
    Ok(())
}

/// An f32, f16 or bf16 input's elements as f32 (exact).
fn wide<'a>(t: TensorRef<'a>, name: &str) -> Result<Cow<'a, [f32]>, String> {
    if t.dtype == DType::F32 {
        return values(t, name);
    }
    check_len(t, name)?;
    Ok(Cow::Owned(t.data.chunks_exact(t.dtype.size()).map(|c| load_f64(t.dtype, c) as f32).collect()))
}

/// An input's elements as f64.
fn wide64(t: TensorRef, name: &str) -> Result<Vec<f64>, String> {
    check_len(t, name)?;
    Ok(t.to_f64())
}

/// Stores values into a float output (rounding to nearest even for f16 and bf16).
fn put_wide(out: &mut TensorMut, v: impl Iterator<Item = f64>) -> Result<(), String> {
    let (d, size) = (out.dtype, out.dtype.size());
    for (chunk, x) in out.data.chunks_exact_mut(size).zip(v) {
        store_f64(d, x, chunk);
    }
    Ok(())
}

/// Coordinates of flat index `i` in `dims` (row-major).
fn unflatten(mut i: usize, dims: &[usize], out: &mut [usize]) {
    for (o, &d) in out.iter_mut().zip(dims).rev() {
        *o = i % d.max(1);
        i /= d.max(1);
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

/// im2col / col2im buffers hold about this many floats (so that they stay in cache).
const COLS_CHUNK: usize = 1 << 17;

/// Columns per im2col / col2im chunk for `rows` rows and `n` columns: cache-sized, but at
/// least 256 wide (so that repacking the weights per chunk stays cheap) as long as that
/// stays under 4 MiB, and never under 16.
fn cols_chunk(rows: usize, n: usize) -> usize {
    let rows = rows.max(1);
    (COLS_CHUNK / rows).max(((1 << 20) / rows).min(256)).max(16).min(n).max(1)
}

/// The flattened multi-indices of every kernel tap, row-major.
fn kernel_taps(k: &[usize]) -> Vec<usize> {
    let total = prod(k);
    let mut taps = Vec::with_capacity(total * k.len());
    let mut idx = vec![0usize; k.len()];
    for _ in 0..total {
        taps.extend_from_slice(&idx);
        for i in (0..k.len()).rev() {
            idx[i] += 1;
            if idx[i] < k[i] {
                break;
            }
            idx[i] = 0;
        }
    }
    taps
}

fn add_bias(y: &mut [f32], b: Option<&[f32]>, plane: usize) {
    if let (Some(b), true) = (b, plane > 0) {
        for (p, &bv) in y.chunks_mut(plane).zip(b.iter().cycle()) {
            p.iter_mut().for_each(|v| *v += bv);
        }
    }
}

/// Splits `0..n` into at most `t` ranges of at least `min` elements.
fn ranges(n: usize, t: usize, min: usize) -> Vec<(usize, usize)> {
    let parts = t.min(n / min.max(1)).max(1);
    let per = n.div_ceil(parts).max(1);
    (0..n).step_by(per).map(|a| (a, (a + per).min(n))).collect()
}

/// One (transposed) convolution's per-(batch, group) problem.
struct ConvItem<'a> {
    g: &'a Geo,
    cg: usize,
    mg: usize,
    in_plane: usize,
    out_plane: usize,
    kprod: usize,
    taps: Vec<usize>,
}

impl ConvItem<'_> {
    fn new(cd: &ConvDims) -> ConvItem<'_> {
        let g = &cd.geo;
        ConvItem {
            g,
            cg: cd.c / cd.group,
            mg: cd.m / cd.group,
            in_plane: prod(&g.in_sp),
            out_plane: prod(&g.out_sp),
            kprod: prod(&g.k),
            taps: kernel_taps(&g.k),
        }
    }

    fn pointwise(&self) -> bool {
        let g = self.g;
        self.kprod == 1 && g.s.iter().all(|&s| s == 1) && g.pb.iter().chain(&g.pe).all(|&p| p == 0)
    }

    /// Few output channels per group (depthwise): direct loops beat im2col + GEMM.
    fn direct(&self) -> bool {
        self.mg < 4 && (!self.pointwise() || self.cg == 1)
    }

    /// The group's weights packed once for all the GEMMs of its column chunks (none for the
    /// direct loops); give the buffer back with [`ConvItem::unpack`]. Constant weights
    /// (`constant`: theirs, and where the group's start in them) are packed once for every
    /// call and kept with the constant: repacking them was a tenth of resnet50's time.
    fn pack(&self, wg: &[f32], constant: Option<(ConstOperand, u64)>) -> Option<Packed> {
        let krows = self.cg * self.kprod;
        let a = Mat { d: wg, rs: krows, cs: 1, packed: None };
        if self.direct() || !a.fits(self.mg, krows) {
            return None;
        }
        Some(match constant {
            Some((c, at)) => {
                Packed::Kept(c.get_or_make("conv weights packed", at, [self.mg as u64, krows as u64], || {
                    PackedA::new(a, self.mg, krows, Vec::new())
                }))
            }
            None => Packed::Fresh(PackedA::new(a, self.mg, krows, WEIGHTS.take())),
        })
    }

    fn unpack(p: Option<Packed>) {
        if let Some(Packed::Fresh(p)) = p {
            WEIGHTS.set(p.data);
        }
    }

    /// Adds output columns `q0..q1` of output channels `r0..r1` of a convolution item to `y`
    /// (`r1 - r0` row segments holding those columns). `xg` holds the group's input
    /// channels, `wg` its weights ([Mg, Cg * kernel]), `wp` them packed
    /// ([`ConvItem::pack`]). A part of the channels (`r0` a multiple of the GEMM kernel's
    /// rows) only where the item is a GEMM, not for the direct loops.
    #[allow(clippy::too_many_arguments)]
    fn conv_cols(
        &self,
        xg: &[f32],
        wg: &[f32],
        wp: Option<&PackedA>,
        (r0, r1): (usize, usize),
        q0: usize,
        q1: usize,
        y: &mut [&mut [f32]],
    ) -> Result<(), String> {
        let (g, cg, mg, kprod) = (self.g, self.cg, self.mg, self.kprod);
        let krows = cg * kprod;
        let a = Mat { d: &wg[r0 * krows..], rs: krows, cs: 1, packed: wp.map(|p| PackedRows { p, r0 }) };
        let rows = r1 - r0;
        debug_assert!((r0, r1) == (0, mg) || !self.direct());
        if self.pointwise() {
            return gemm_rows(
                rows,
                q1 - q0,
                cg,
                1.0,
                a,
                Mat { d: &xg[q0..], rs: self.in_plane, cs: 1, packed: None },
                y,
                false,
            );
        }
        let nd = g.k.len();
        if self.direct() && nd <= 2 {
            if !(q0 == 0 && q1 == self.out_plane && self.direct_flat(xg, wg, y)) {
                self.direct_2d(xg, wg, q0, q1, y);
            }
            return Ok(());
        }
        if self.direct() {
            // Accumulate shifted input rows, weighted, into each output row.
            let sl = g.s[nd - 1];
            for (m, row) in y.iter_mut().enumerate().take(mg) {
                for c in 0..cg {
                    let xp = &xg[c * self.in_plane..][..self.in_plane];
                    for (ki, kk) in self.taps.chunks_exact(nd).enumerate() {
                        let wv = wg[m * krows + c * kprod + ki];
                        walk_tap(&g.out_sp, &g.in_sp, kk, g, q0, q1, |col, _, head, hits, t0| {
                            let dst = &mut row[col + head..col + head + hits];
                            if sl == 1 {
                                dst.iter_mut().zip(&xp[t0..t0 + hits]).for_each(|(o, &v)| *o += wv * v);
                            } else {
                                for (j, o) in dst.iter_mut().enumerate() {
                                    *o += wv * xp[t0 + j * sl];
                                }
                            }
                        });
                    }
                }
            }
            return Ok(());
        }
        // im2col in column chunks, each followed by its GEMM (im2col writes every element of
        // the reused buffer).
        let chunk = cols_chunk(krows, q1 - q0);
        let mut cols = COLS.take();
        if cols.len() < krows * chunk {
            cols.resize(krows * chunk, 0.0);
        }
        let mut run = || {
            for c0 in (q0..q1).step_by(chunk) {
                let c1 = (c0 + chunk).min(q1);
                let wd = c1 - c0;
                let cols = &mut cols[..krows * wd];
                im2col(xg, g, &self.taps, c0, c1, cols);
                let mut sub: Vec<&mut [f32]> = y.iter_mut().map(|r| &mut r[c0 - q0..c1 - q0]).collect();
                gemm_rows(rows, wd, krows, 1.0, a, Mat { d: cols, rs: wd, cs: 1, packed: None }, &mut sub, false)?;
            }
            Ok(())
        };
        let res = run();
        COLS.set(cols);
        res
    }

    /// The direct convolution of whole planes (1-D and 2-D kernels) as long vector loops.
    /// Each input channel is copied once into a zero-padded plane `pw` wide (a multiple of
    /// the column stride), split into `sx` phases (phase `p` holds the padded columns `p`,
    /// `p + sx`, ...). Output position (oy, ox) then sits at the flat index
    /// `j = oy * pwo + ox` (`pwo = sy * pw / sx`, the positions `ox >= ow` are scratch) and
    /// kernel tap `t` reads the flat element `sx * j + off_t` of the padded plane, that is
    /// element `j + off_t / sx` of phase `off_t % sx`: a contiguous run for every tap, over
    /// all rows at once. The accumulators start from `y` (the bias) and add the taps in
    /// order, channel by channel. False (nothing done) when the padded planes would be much
    /// larger than the tensors (huge pads or dilations).
    fn direct_flat(&self, xg: &[f32], wg: &[f32], y: &mut [&mut [f32]]) -> bool {
        let g = self.g;
        let two = g.k.len() == 2;
        let at = |v: &[usize], one: usize| if two { (v[0], v[1]) } else { (one, v[0]) };
        let ((ih, iw), (oh, ow), (kh, kw)) = (at(&g.in_sp, 1), at(&g.out_sp, 1), at(&g.k, 1));
        let ((sy, sx), (dy, dx)) = (at(&g.s, 1), at(&g.d, 1));
        let (pt, pl) = if two { (g.pb[0], g.pb[1]) } else { (0, g.pb[0]) };
        let (mg, cg, kprod) = (self.mg, self.cg, self.kprod);
        if ow == 0 || oh == 0 || y.len() < mg || y[..mg].iter().any(|r| r.len() < oh * ow) {
            return ow == 0 || oh == 0;
        }
        // Sizes in u128 first: anything far beyond the tensors falls back to `direct_2d`.
        let limit = 16 * (self.in_plane + self.out_plane) as u128 + (1 << 16);
        let (pt, pl) = (u128::try_from(pt).unwrap_or(u128::MAX), u128::try_from(pl).unwrap_or(u128::MAX));
        let w_need = ((ow - 1) as u128 * sx as u128 + (kw - 1) as u128 * dx as u128 + 1).max(pl + iw as u128);
        let pw128 = w_need.div_ceil(sx as u128) * sx as u128;
        let rows_need = (pt + ih as u128).max((oh - 1) as u128 * sy as u128 + (kh - 1) as u128 * dy as u128 + 1);
        let pwo128 = sy as u128 * pw128 / sx as u128;
        if pt > limit || pl > limit || pw128 > limit || rows_need * pw128 > limit || oh as u128 * pwo128 > limit {
            return false;
        }
        let (pt, pl, pw, pwo) = (pt as usize, pl as usize, pw128 as usize, pwo128 as usize);
        // Flat tap offsets into the padded plane, row-major over the kernel.
        let offs: Vec<usize> = (0..kh * kw).map(|t| (t / kw) * dy * pw + (t % kw) * dx).collect();
        let max_off = offs.iter().max().copied().unwrap_or(0) / sx;
        let len = (oh * pwo).div_ceil(FLAT) * FLAT;
        // Every phase holds the padded input rows and the reads of the last lanes.
        let plen = (len + max_off).max(rows_need as usize * pw / sx) + FLAT;
        let mut buf = SCRATCH.take();
        {
            buf.clear();
            buf.resize(mg * len + sx * plen, 0.0);
            let (acc, phases) = buf.split_at_mut(mg * len);
            for (a, yr) in acc.chunks_exact_mut(len).zip(y.iter()) {
                for oy in 0..oh {
                    a[oy * pwo..][..ow].copy_from_slice(&yr[oy * ow..][..ow]);
                }
            }
            let mut taps: Vec<(usize, f32)> = Vec::with_capacity(kprod);
            for c in 0..cg {
                if c > 0 {
                    phases.fill(0.0);
                }
                let xp = &xg[c * self.in_plane..][..self.in_plane];
                for (iy, xr) in xp.chunks_exact(iw.max(1)).take(ih).enumerate() {
                    let base = (pt + iy) * pw / sx;
                    if sx == 1 {
                        phases[base + pl..][..iw].copy_from_slice(xr);
                    } else {
                        // Phase p takes the input columns ix with (pl + ix) % sx == p.
                        for p in 0..sx {
                            let ix0 = (p + sx - pl % sx) % sx;
                            if ix0 >= iw {
                                continue;
                            }
                            let dst = &mut phases[p * plen + base + (pl + ix0) / sx..];
                            dst.iter_mut().zip(xr[ix0..].iter().step_by(sx)).for_each(|(o, &v)| *o = v);
                        }
                    }
                }
                for (m, a) in acc.chunks_exact_mut(len).enumerate() {
                    let wc = &wg[m * cg * kprod + c * kprod..][..kprod];
                    taps.clear();
                    taps.extend(offs.iter().zip(wc).map(|(&o, &w)| ((o % sx) * plen + o / sx, w)));
                    flat_taps(a, phases, &taps);
                }
            }
            for (a, yr) in acc.chunks_exact(len).zip(y.iter_mut()) {
                for oy in 0..oh {
                    yr[oy * ow..][..ow].copy_from_slice(&a[oy * pwo..][..ow]);
                }
            }
        }
        SCRATCH.set(buf);
        true
    }

    /// The direct loops for 1-D and 2-D kernels (as 2-D with a unit height): for every output
    /// channel, input channel and kernel tap, in that order, adds the weighted input row
    /// segment the tap reads to the output row segment, over output positions `q0..q1`. The
    /// range of rows (columns) a tap row (column) hits is worked out once, so the inner loop
    /// is a plain multiply-add over contiguous (or strided) elements.
    fn direct_2d(&self, xg: &[f32], wg: &[f32], q0: usize, q1: usize, y: &mut [&mut [f32]]) {
        let g = self.g;
        let two = g.k.len() == 2;
        let at = |v: &[usize], one: usize| if two { (v[0], v[1]) } else { (one, v[0]) };
        let ((ih, iw), (oh, ow), (kh, kw)) = (at(&g.in_sp, 1), at(&g.out_sp, 1), at(&g.k, 1));
        let ((sy, sx), (dy, dx)) = (at(&g.s, 1), at(&g.d, 1));
        let (pt, pl) = if two { (g.pb[0], g.pb[1]) } else { (0, g.pb[0]) };
        if ow == 0 || oh == 0 || q0 >= q1 {
            return;
        }
        // Per tap row (column): its offset into the input and the output rows (columns) whose
        // read lands inside the input.
        let rows: Vec<(i128, usize, usize)> = (0..kh).map(|ky| hit_range(oh, ih, sy, ky, dy, pt)).collect();
        let cols: Vec<(i128, usize, usize)> = (0..kw).map(|kx| hit_range(ow, iw, sx, kx, dx, pl)).collect();
        let (cg, kprod, krows, in_plane) = (self.cg, self.kprod, self.cg * self.kprod, self.in_plane);
        let (oy0, oy1) = (q0 / ow, (q1 - 1) / ow);
        for (m, orow_all) in y.iter_mut().enumerate().take(self.mg) {
            for c in 0..cg {
                let xp = &xg[c * in_plane..][..in_plane];
                let wc = &wg[m * krows + c * kprod..][..kprod];
                for oy in oy0..=oy1 {
                    // Output columns xa..xb of this row are in q0..q1.
                    let xa = if oy == oy0 { q0 - oy * ow } else { 0 };
                    let xb = if oy == oy1 { q1 - oy * ow } else { ow };
                    let orow = &mut orow_all[oy * ow + xa - q0..oy * ow + xb - q0];
                    for (ky, &(offy, ya, yb)) in rows.iter().enumerate() {
                        if oy < ya || oy >= yb {
                            continue;
                        }
                        let iy = (oy as i128 * sy as i128 + offy) as usize;
                        let xr = &xp[iy * iw..][..iw];
                        for (kx, &(offx, ca, cb)) in cols.iter().enumerate() {
                            let (lo, hi) = (ca.max(xa), cb.min(xb));
                            if lo >= hi {
                                continue;
                            }
                            let wv = wc[ky * kw + kx];
                            let dst = &mut orow[lo - xa..hi - xa];
                            let i0 = (lo as i128 * sx as i128 + offx) as usize;
                            if sx == 1 {
                                dst.iter_mut().zip(&xr[i0..i0 + (hi - lo)]).for_each(|(o, &v)| *o += wv * v);
                            } else {
                                let src = xr[i0..].iter().step_by(sx);
                                dst.iter_mut().zip(src).for_each(|(o, &v)| *o += wv * v);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Adds a transposed convolution item's output channels `m0..m1` to `y` (their planes).
    /// `xg` holds the group's input channels, `wg` its weights ([Cg, Mg * kernel]).
    fn conv_transpose_channels(
        &self,
        xg: &[f32],
        wg: &[f32],
        m0: usize,
        m1: usize,
        y: &mut [f32],
    ) -> Result<(), String> {
        let (g, cg, kprod, in_plane) = (self.g, self.cg, self.kprod, self.in_plane);
        let (krows, rows) = (self.mg * kprod, (m1 - m0) * kprod);
        // The product needs W's transpose: rows (m, tap), columns c.
        let wt = Mat { d: &wg[m0 * kprod..], rs: 1, cs: krows, packed: None };
        let chunk = cols_chunk(rows, in_plane);
        let mut cols = vec![0f32; rows * chunk];
        for q0 in (0..in_plane).step_by(chunk) {
            let q1 = (q0 + chunk).min(in_plane);
            let wd = q1 - q0;
            let cols = &mut cols[..rows * wd];
            cols.fill(0.0);
            gemm(rows, wd, cg, 1.0, wt, Mat { d: &xg[q0..], rs: in_plane, cs: 1, packed: None }, cols, wd, false)?;
            col2im(cols, g, m1 - m0, &self.taps, q0, q1, y);
        }
        Ok(())
    }
}

/// A convolution; `w` its weights, and when they are a constant, where to keep them packed.
fn conv_f32(
    x: &[f32],
    (w, w_const): (&[f32], Option<ConstOperand>),
    b: Option<&[f32]>,
    cd: &ConvDims,
    y: &mut [f32],
) -> Result<(), String> {
    let it = ConvItem::new(cd);
    let (cg, mg, in_plane, out_plane) = (it.cg, it.mg, it.in_plane, it.out_plane);
    let krows = cg * it.kprod;
    let sizes_ok = x.len() == cd.n * cd.c * in_plane && w.len() == cd.m * krows && y.len() == cd.n * cd.m * out_plane;
    if !sizes_ok || b.is_some_and(|b| b.len() != cd.m) {
        return Err("the tensors do not match their shapes".into());
    }
    // Every output element starts at its bias (or 0).
    match b {
        Some(b) if out_plane > 0 => y.chunks_mut(out_plane).zip(b.iter().cycle()).for_each(|(p, &bv)| p.fill(bv)),
        _ => y.fill(0.0),
    }
    let item_work = mg as f64 * out_plane as f64 * krows as f64;
    let (group, it) = (cd.group, &it);
    par_items(y, mg * out_plane, item_work * cd.n as f64 * cd.group as f64, |item, yi, par| {
        let (ni, gi) = (item / group, item % group);
        let xg = &x[(ni * cd.c + gi * cg) * in_plane..][..cg * in_plane];
        let wg = &w[gi * mg * krows..][..mg * krows];
        let mut rows: Vec<&mut [f32]> = yi.chunks_mut(out_plane).collect();
        let parts = if par && item_work >= PAR_WORK { ranges(out_plane, threads(), 64) } else { vec![] };
        let packed = it.pack(wg, w_const.map(|c| (c, (gi * mg * krows * 4) as u64)));
        let wp = packed.as_ref().map(|p| p.get());
        // Too few columns to split (7x7 planes): threads take output channels instead.
        let row_parts = match wp {
            Some(p) if parts.len() < 2 && par && item_work >= PAR_WORK => ranges(mg.div_ceil(p.mr), threads(), 2)
                .into_iter()
                .map(|(a, b)| (a * p.mr, (b * p.mr).min(mg)))
                .collect(),
            _ => vec![],
        };
        let res = if row_parts.len() > 1 {
            let mut lists = Vec::with_capacity(row_parts.len());
            let mut rest = &mut rows[..];
            for &(r0, r1) in &row_parts {
                let (part, tail) = std::mem::take(&mut rest).split_at_mut(r1 - r0);
                lists.push((part, (r0, r1)));
                rest = tail;
            }
            run_parts(lists, |(list, range)| it.conv_cols(xg, wg, wp, range, 0, out_plane, list))
        } else if parts.len() < 2 {
            it.conv_cols(xg, wg, wp, (0, mg), 0, out_plane, &mut rows)
        } else {
            // One large item: threads take ranges of output columns (im2col included).
            let lists = split_columns(&mut rows, &parts);
            run_parts(lists.into_iter().zip(parts.iter().copied()), |(mut list, (q0, q1))| {
                it.conv_cols(xg, wg, wp, (0, mg), q0, q1, &mut list)
            })
        };
        ConvItem::unpack(packed);
        res
    })
}

fn conv_transpose_f32(x: &[f32], w: &[f32], b: Option<&[f32]>, cd: &ConvDims, y: &mut [f32]) -> Result<(), String> {
    let it = ConvItem::new(cd);
    let (cg, mg, in_plane, out_plane) = (it.cg, it.mg, it.in_plane, it.out_plane);
    let krows = mg * it.kprod;
    let sizes_ok = x.len() == cd.n * cd.c * in_plane && w.len() == cd.c * krows && y.len() == cd.n * cd.m * out_plane;
    if !sizes_ok || b.is_some_and(|b| b.len() != cd.m) {
        return Err("the tensors do not match their shapes".into());
    }
    let item_work = cg as f64 * in_plane as f64 * krows as f64;
    let (group, it) = (cd.group, &it);
    par_items(y, mg * out_plane, item_work * cd.n as f64 * cd.group as f64, |item, yi, par| {
        let (ni, gi) = (item / group, item % group);
        let xg = &x[(ni * cd.c + gi * cg) * in_plane..][..cg * in_plane];
        let wg = &w[gi * cg * krows..][..cg * krows];
        let parts = if par && item_work >= PAR_WORK { ranges(mg, threads(), 1) } else { vec![] };
        if parts.len() < 2 {
            return it.conv_transpose_channels(xg, wg, 0, mg, yi);
        }
        // One large item: threads take ranges of output channels (disjoint output planes).
        let mut rest = yi;
        let mut jobs = Vec::with_capacity(parts.len());
        for &(m0, m1) in &parts {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut((m1 - m0) * out_plane);
            rest = tail;
            jobs.push((m0, m1, head));
        }
        run_parts(jobs, |(m0, m1, head)| it.conv_transpose_channels(xg, wg, m0, m1, head))
    })?;
    add_bias(y, b, out_plane);
    Ok(())
}

/// Accumulator lanes per step of [`flat_taps`].
const FLAT: usize = 16;

thread_local! {
    /// Per-thread scratch buffers, reused between calls: the direct convolution's planes,
    /// the im2col columns and the GEMM's packed blocks.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    static COLS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    static PACK: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
    /// A convolution group's packed weights ([`ConvItem::pack`]).
    static WEIGHTS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// `acc[j] += w * src[j + off]` for every `(off, w)` of `taps` in order, `FLAT` lanes of
/// `acc` (a multiple of `FLAT` long) at a time, kept in registers over the taps. `src` must
/// reach `acc.len() + off` for every tap.
fn flat_taps(acc: &mut [f32], src: &[f32], taps: &[(usize, f32)]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        unsafe { flat_taps_avx2(acc, src, taps) };
        return;
    }
    flat_taps_body(acc, src, taps);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn flat_taps_avx2(acc: &mut [f32], src: &[f32], taps: &[(usize, f32)]) {
    flat_taps_body(acc, src, taps);
}

#[inline(always)]
// The `expect` converts a slice of exactly FLAT lanes (the range says so) to an array, which
// lets the compiler vectorise the loop without bounds checks.
#[allow(clippy::expect_used)]
fn flat_taps_body(acc: &mut [f32], src: &[f32], taps: &[(usize, f32)]) {
    for (ci, a) in acc.chunks_exact_mut(FLAT).enumerate() {
        let j = ci * FLAT;
        let mut r = [0f32; FLAT];
        r.copy_from_slice(a);
        for &(off, w) in taps {
            let s: &[f32; FLAT] = src[j + off..j + off + FLAT].try_into().expect("FLAT lanes");
            for i in 0..FLAT {
                r[i] += w * s[i];
            }
        }
        a.copy_from_slice(&r);
    }
}

/// For kernel tap `kk` on one axis (stride `s`, dilation `d`, begin padding `pb`): the
/// offset `kk * d - pb` and the output positions `lo..hi` (within `0..out`) whose input
/// position `o * s + offset` lies in `0..len`.
fn hit_range(out: usize, len: usize, s: usize, kk: usize, d: usize, pb: i64) -> (i128, usize, usize) {
    let (s, off) = (s as i128, kk as i128 * d as i128 - pb as i128);
    let lo = ceil_div(-off, s).clamp(0, out as i128);
    let hi = ((len as i128 - 1 - off).div_euclid(s) + 1).clamp(lo, out as i128);
    (off, lo as usize, hi as usize)
}

fn ceil_div(a: i128, b: i128) -> i128 {
    -(-a).div_euclid(b)
}

/// Walks, for one kernel tap `kk`, the flat positions `q0..q1` of `grid`, which map to
/// positions `q * s + kk * d - pb` of `target` (per spatial axis), in runs along the last
/// axis: `f(col, len, head, hits, t0)` says that of the `len` positions from `col` (counted
/// from `q0`), the first `head` miss the target, the next `hits` land on the flat target
/// positions `t0`, `t0 + s_last`, ... and the rest miss.
fn walk_tap(
    grid: &[usize],
    target: &[usize],
    kk: &[usize],
    g: &Geo,
    q0: usize,
    q1: usize,
    mut f: impl FnMut(usize, usize, usize, usize, usize),
) {
    let nd = grid.len();
    if nd == 0 || q0 >= q1 {
        return;
    }
    let last = nd - 1;
    // On the stack: im2col walks a tap for every row of its columns.
    let off: SmallVec<[i128; 4]> = (0..nd).map(|i| kk[i] as i128 * g.d[i] as i128 - g.pb[i] as i128).collect();
    let mut idx: SmallVec<[usize; 4]> = smallvec::smallvec![0; nd];
    let mut rest = q0;
    for i in (0..nd).rev() {
        idx[i] = rest % grid[i];
        rest /= grid[i];
    }
    let (sl, tl, ol) = (g.s[last] as i128, target[last] as i128, off[last]);
    // The run of last-axis positions that hit the target is the same on every row.
    let lo_all = ceil_div(-ol, sl).max(0);
    let hi_all = ((tl - 1 - ol).div_euclid(sl) + 1).max(lo_all);
    let mut q = q0;
    while q < q1 {
        let mut base = Some(0usize);
        for i in 0..last {
            let t = idx[i] as i128 * g.s[i] as i128 + off[i];
            if t < 0 || t >= target[i] as i128 {
                base = None;
                break;
            }
            base = base.map(|b| b * target[i] + t as usize);
        }
        let qa = idx[last];
        let len = (grid[last] - qa).min(q1 - q);
        let qb = qa + len;
        match base {
            Some(base) => {
                let lo = lo_all.clamp(qa as i128, qb as i128);
                let hi = hi_all.clamp(lo, qb as i128);
                let t0 = if hi > lo { base * target[last] + (lo * sl + ol) as usize } else { 0 };
                f(q - q0, len, lo as usize - qa, (hi - lo) as usize, t0);
            }
            None => f(q - q0, len, len, 0, 0),
        }
        q += len;
        idx[last] = qb;
        if qb == grid[last] {
            idx[last] = 0;
            for i in (0..last).rev() {
                idx[i] += 1;
                if idx[i] < grid[i] {
                    break;
                }
                idx[i] = 0;
            }
        }
    }
}

/// Fills the im2col rows (row `c * kernel + tap`) for output positions `q0..q1`.
fn im2col(x: &[f32], g: &Geo, taps: &[usize], q0: usize, q1: usize, cols: &mut [f32]) {
    let (nd, in_plane, width) = (g.k.len(), prod(&g.in_sp), q1 - q0);
    let (sl, kprod) = (g.s[nd - 1], taps.len() / nd);
    for (r, row) in cols.chunks_exact_mut(width.max(1)).enumerate() {
        let (c, tap) = (r / kprod, r % kprod);
        let xp = &x[c * in_plane..][..in_plane];
        walk_tap(&g.out_sp, &g.in_sp, &taps[tap * nd..][..nd], g, q0, q1, |col, len, head, hits, t0| {
            let seg = &mut row[col..col + len];
            seg[..head].fill(0.0);
            let dst = &mut seg[head..head + hits];
            if sl == 1 {
                dst.copy_from_slice(&xp[t0..t0 + hits]);
            } else {
                for (j, v) in dst.iter_mut().enumerate() {
                    *v = xp[t0 + j * sl];
                }
            }
            seg[head + hits..].fill(0.0);
        });
    }
}

/// Scatter-adds `cols` ([Mg * kernel, q1 - q0], for input positions `q0..q1`) into the
/// output planes `y` ([Mg, out...]).
fn col2im(cols: &[f32], g: &Geo, mg: usize, taps: &[usize], q0: usize, q1: usize, y: &mut [f32]) {
    let (nd, out_plane, width) = (g.k.len(), prod(&g.out_sp), q1 - q0);
    let sl = g.s[nd - 1];
    let mut rows = cols.chunks_exact(width.max(1));
    for m in 0..mg {
        let yp = &mut y[m * out_plane..][..out_plane];
        for kk in taps.chunks_exact(nd) {
            let Some(row) = rows.next() else { return };
            walk_tap(&g.in_sp, &g.out_sp, kk, g, q0, q1, |col, _, head, hits, t0| {
                let src = &row[col + head..col + head + hits];
                if sl == 1 {
                    yp[t0..t0 + hits].iter_mut().zip(src).for_each(|(o, v)| *o += v);
                } else {
                    for (j, v) in src.iter().enumerate() {
                        yp[t0 + j * sl] += v;
                    }
                }
            });
        }
    }
}

/// For one output coordinate on one axis: the first input position the window covers
/// inside the input, how many taps land inside the input, and how many land inside the
/// input or its padding (for `count_include_pad`).
#[derive(Clone, Copy, Debug)]
struct Taps {
    first: usize,
    hits: usize,
    padded: usize,
}

fn pool_taps(g: &Geo) -> Vec<Vec<Taps>> {
    (0..g.k.len())
        .map(|i| {
            let (len, k, s, d, pb, pe) =
                (g.in_sp[i] as i128, g.k[i] as i128, g.s[i] as i128, g.d[i] as i128, g.pb[i] as i128, g.pe[i] as i128);
            (0..g.out_sp[i])
                .map(|o| {
                    let start = o as i128 * s - pb;
                    let lo = if start >= 0 { 0 } else { ceil_div(-start, d) }.min(k);
                    let hi = if len - 1 - start >= 0 { ((len - 1 - start) / d + 1).min(k) } else { 0 };
                    let padded = if len + pe - 1 - start >= 0 { ((len + pe - 1 - start) / d + 1).min(k) } else { 0 };
                    let hits = (hi - lo).max(0);
                    let first = if hits > 0 { (start + lo * d) as usize } else { 0 };
                    Taps { first, hits: hits as usize, padded: padded as usize }
                })
                .collect()
        })
        .collect()
}

#[derive(Clone, Copy)]
enum PoolKind {
    Max,
    Average { include_pad: bool },
}

/// A pooling output slot: the value alone, or the value and the flat index of the max.
trait PoolOut: Send + Sized {
    fn set(&mut self, v: f32, index: i64);
    fn value(&self) -> f32;

    /// `dst[j]` takes `src[j * sx]` where that is strictly greater (flat input index
    /// `base + j * sx`).
    fn max_from(dst: &mut [Self], src: &[f32], sx: usize, base: i64) {
        for (j, o) in dst.iter_mut().enumerate() {
            let v = src[j * sx];
            if v > o.value() {
                o.set(v, base + (j * sx) as i64);
            }
        }
    }

    /// `dst[j] += src[j * sx]`.
    fn add_from(dst: &mut [Self], src: &[f32], sx: usize) {
        for (j, o) in dst.iter_mut().enumerate() {
            o.set(o.value() + src[j * sx], -1);
        }
    }
}

impl PoolOut for f32 {
    #[inline(always)]
    fn set(&mut self, v: f32, _: i64) {
        *self = v;
    }
    #[inline(always)]
    fn value(&self) -> f32 {
        *self
    }

    // Without indices the row is a select or an add per element, which the compiler
    // vectorises when the stride is a constant (strided `src[j * sx]` reads are not).
    fn max_from(dst: &mut [f32], src: &[f32], sx: usize, _: i64) {
        let max = |o: &mut f32, v: f32| *o = if v > *o { v } else { *o };
        match sx {
            1 => dst.iter_mut().zip(src).for_each(|(o, &v)| max(o, v)),
            2 => dst.iter_mut().zip(src.chunks(2)).for_each(|(o, c)| max(o, c[0])),
            _ => dst.iter_mut().zip(src.chunks(sx)).for_each(|(o, c)| max(o, c[0])),
        }
    }

    fn add_from(dst: &mut [f32], src: &[f32], sx: usize) {
        match sx {
            1 => dst.iter_mut().zip(src).for_each(|(o, &v)| *o += v),
            2 => dst.iter_mut().zip(src.chunks(2)).for_each(|(o, c)| *o += c[0]),
            _ => dst.iter_mut().zip(src.chunks(sx)).for_each(|(o, c)| *o += c[0]),
        }
    }
}

impl PoolOut for (f32, i64) {
    #[inline(always)]
    fn set(&mut self, v: f32, index: i64) {
        *self = (v, index);
    }
    #[inline(always)]
    fn value(&self) -> f32 {
        self.0
    }
}

/// Pools every [N, C] plane of `x` into `y`; MaxPool indices are flat over the whole input
/// (row-major), -1 for a window entirely in the padding.
fn pool_f32<P: PoolOut>(x: &[f32], pd: &PoolDims, kind: PoolKind, y: &mut [P]) -> Result<(), String> {
    let g = &pd.geo;
    let nd = g.k.len();
    let (in_plane, out_plane) = (prod(&g.in_sp), prod(&g.out_sp));
    if nd == 0 || x.len() != pd.n * pd.c * in_plane || y.len() != pd.n * pd.c * out_plane {
        return Err("the tensors do not match their shapes".into());
    }
    let taps = pool_taps(g);
    let mut strides = vec![1usize; nd];
    for i in (0..nd - 1).rev() {
        strides[i] = strides[i + 1] * g.in_sp[i + 1];
    }
    let window = g.k.iter().fold(1usize, |a, &k| a.saturating_mul(k)).min(in_plane.max(1));
    let (last, lw, ld) = (nd - 1, g.out_sp[nd - 1], g.d[nd - 1]);
    par_items(y, out_plane, y.len() as f64 * window as f64, |plane, yp, _| {
        let xp = &x[plane * in_plane..][..in_plane];
        let plane_base = (plane * in_plane) as i64;
        let mut o = vec![0usize; last];
        let (mut bases, mut next) = (Vec::new(), Vec::new());
        for orow in yp.chunks_mut(lw.max(1)) {
            // Offsets of the window's rows over the leading axes, in row-major order.
            bases.clear();
            bases.push(0usize);
            let (mut hits, mut padded) = (1usize, 1usize);
            for i in 0..last {
                let t = taps[i][o[i]];
                hits *= t.hits;
                padded = padded.saturating_mul(t.padded);
                next.clear();
                for &b in &bases {
                    next.extend((0..t.hits).map(|j| b + (t.first + j * g.d[i]) * strides[i]));
                }
                std::mem::swap(&mut bases, &mut next);
            }
            for (slot, t) in orow.iter_mut().zip(&taps[last]) {
                match kind {
                    PoolKind::Max => {
                        let (mut best, mut at) = (f32::NEG_INFINITY, None);
                        for &b in &bases {
                            for p in (0..t.hits).map(|j| b + t.first + j * ld) {
                                if at.is_none() || xp[p] > best {
                                    (best, at) = (xp[p], Some(p));
                                }
                            }
                        }
                        slot.set(best, at.map_or(-1, |p| plane_base + p as i64));
                    }
                    PoolKind::Average { include_pad } => {
                        let mut sum = 0f32;
                        for &b in &bases {
                            sum += xp[b + t.first..].iter().step_by(ld).take(t.hits).sum::<f32>();
                        }
                        let count = if include_pad { padded.saturating_mul(t.padded) } else { hits * t.hits };
                        slot.set(sum / count as f32, -1);
                    }
                }
            }
            for i in (0..last).rev() {
                o[i] += 1;
                if o[i] < g.out_sp[i] {
                    break;
                }
                o[i] = 0;
            }
        }
        Ok(())
    })
}

/// Whether [`pool_2d`] takes a pooling: 1-D or 2-D, with a kernel of modest size.
fn rows_pool(g: &Geo) -> bool {
    (1..=2).contains(&g.k.len()) && g.k.iter().fold(1usize, |a, &k| a.saturating_mul(k)) <= 1 << 16
}

/// [`pool_f32`] for 1-D and 2-D windows without MaxPool indices, as row operations: for
/// every kernel tap (row-major), the output row segment whose reads land inside the input
/// is combined with the matching (strided) input row segment. MaxPool starts every output
/// at its window's first tap inside the input and keeps strictly greater values, tap by
/// tap in order, as `pool_f32` does (so NaNs and signed zeros come out the same);
/// AveragePool sums the taps and divides by the count.
fn pool_2d<P: PoolOut>(x: &[f32], pd: &PoolDims, kind: PoolKind, y: &mut [P]) -> Result<(), String> {
    let g = &pd.geo;
    let two = g.k.len() == 2;
    let at = |v: &[usize], one: usize| if two { (v[0], v[1]) } else { (one, v[0]) };
    let ((ih, iw), (oh, ow), (kh, kw)) = (at(&g.in_sp, 1), at(&g.out_sp, 1), at(&g.k, 1));
    let ((sy, sx), (dy, dx)) = (at(&g.s, 1), at(&g.d, 1));
    let (pt, pl) = if two { (g.pb[0], g.pb[1]) } else { (0, g.pb[0]) };
    let (in_plane, out_plane) = (ih * iw, oh * ow);
    if x.len() != pd.n * pd.c * in_plane || y.len() != pd.n * pd.c * out_plane {
        return Err("the tensors do not match their shapes".into());
    }
    if y.is_empty() {
        return Ok(());
    }
    let rows: Vec<(i128, usize, usize)> = (0..kh).map(|ky| hit_range(oh, ih, sy, ky, dy, pt)).collect();
    let cols: Vec<(i128, usize, usize)> = (0..kw).map(|kx| hit_range(ow, iw, sx, kx, dx, pl)).collect();
    // The first tap inside the input per output row / column (None: the window misses it).
    let first = |r: &[(i128, usize, usize)], o: usize| r.iter().position(|&(_, lo, hi)| (lo..hi).contains(&o));
    // Per output column, the input column of that first tap.
    let first_col: Vec<Option<usize>> =
        (0..ow).map(|ox| first(&cols, ox).map(|kx| (ox as i128 * sx as i128 + cols[kx].0) as usize)).collect();
    // AveragePool's divisor per output row / column (separable).
    let taps = pool_taps(g);
    let count = |t: &Taps, include_pad: bool| if include_pad { t.padded } else { t.hits };
    let (ty, tx) = if two { (&taps[0][..], &taps[1][..]) } else { (&[][..], &taps[0][..]) };
    let window = kh.saturating_mul(kw).min(in_plane.max(1));
    par_items(y, out_plane, y.len() as f64 * window as f64, |plane, yp, _| {
        let xp = &x[plane * in_plane..][..in_plane];
        // MaxPool indices are flat over the whole input.
        let plane_base = (plane * in_plane) as i64;
        for (oy, yrow) in yp.chunks_exact_mut(ow.max(1)).enumerate() {
            match kind {
                PoolKind::Max => match first(&rows, oy) {
                    Some(ky) => {
                        let r0 = (oy as i128 * sy as i128 + rows[ky].0) as usize * iw;
                        for (o, f) in yrow.iter_mut().zip(&first_col) {
                            match *f {
                                Some(ix) => o.set(xp[r0 + ix], plane_base + (r0 + ix) as i64),
                                None => o.set(f32::NEG_INFINITY, -1),
                            }
                        }
                    }
                    None => yrow.iter_mut().for_each(|o| o.set(f32::NEG_INFINITY, -1)),
                },
                PoolKind::Average { .. } => yrow.iter_mut().for_each(|o| o.set(0.0, -1)),
            }
            for &(offy, ya, yb) in &rows {
                if oy < ya || oy >= yb {
                    continue;
                }
                let r0 = (oy as i128 * sy as i128 + offy) as usize * iw;
                let xr = &xp[r0..][..iw];
                for &(offx, lo, hi) in &cols {
                    if lo >= hi {
                        continue;
                    }
                    let dst = &mut yrow[lo..hi];
                    let i0 = (lo as i128 * sx as i128 + offx) as usize;
                    let src = &xr[i0..=i0 + (hi - lo - 1) * sx];
                    match kind {
                        PoolKind::Max => P::max_from(dst, src, sx, plane_base + (r0 + i0) as i64),
                        PoolKind::Average { .. } => P::add_from(dst, src, sx),
                    }
                }
            }
            if let PoolKind::Average { include_pad } = kind {
                let cy = if two { count(&ty[oy], include_pad) } else { 1 };
                for (o, t) in yrow.iter_mut().zip(tx) {
                    o.set(o.value() / cy.saturating_mul(count(t, include_pad)) as f32, -1);
                }
            }
        }
        Ok(())
    })
}

fn max_pool(ins: &[Option<TensorRef>], attrs: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    validate_max_pool(attrs)?;
    let x = host_input(ins, 0, "X")?;
    let pd = pool_dims(x.shape, attrs)?;
    if x.dtype != DType::F32 {
        return max_pool_wide(x, &pd, attrs, outs);
    }
    check_out(outs, 0, DType::F32, &pd.out_shape)?;
    let xv = values(x, "X")?;
    if outs.len() < 2 || attrs.int("storage_order", 0) == 1 {
        if outs.len() >= 2 {
            return max_pool_wide(x, &pd, attrs, outs);
        }
        if rows_pool(&pd.geo) {
            return write_f32(&mut outs[0], |y| pool_2d(&xv, &pd, PoolKind::Max, y));
        }
        return fill_f32(&mut outs[0], |y| pool_f32(&xv, &pd, PoolKind::Max, y));
    }
    check_out(outs, 1, DType::I64, &pd.out_shape)?;
    let mut y = vec![(0f32, -1i64); outs[1].data.len() / 8];
    if rows_pool(&pd.geo) {
        pool_2d(&xv, &pd, PoolKind::Max, &mut y)?;
    } else {
        pool_f32(&xv, &pd, PoolKind::Max, &mut y)?;
    }
    write_f32(&mut outs[0], |v| {
        v.iter_mut().zip(&y).for_each(|(o, p)| *o = p.0);
        Ok(())
    })?;
    for (chunk, p) in outs[1].data.chunks_exact_mut(8).zip(&y) {
        chunk.copy_from_slice(&p.1.to_le_bytes());
    }
    Ok(())
}

/// MaxPool on the other dtypes (widened exactly to f32) and with column-major Indices.
fn max_pool_wide(x: TensorRef, pd: &PoolDims, attrs: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    if !MAX_POOL_DTYPES.contains(&x.dtype) {
        return Err(format!("X must be f32, f16, bf16, u8 or i8, found {}{:?}", x.dtype, x.shape));
    }
    check_out(outs, 0, x.dtype, &pd.out_shape)?;
    check_len(x, "X")?;
    let xv: Vec<f32> = x.data.chunks_exact(x.dtype.size()).map(|c| load_f64(x.dtype, c) as f32).collect();
    let total = numel(&pd.out_shape).unwrap_or(0) as usize;
    let mut y = vec![(0f32, -1i64); total];
    if rows_pool(&pd.geo) {
        pool_2d(&xv, pd, PoolKind::Max, &mut y)?;
    } else {
        pool_f32(&xv, pd, PoolKind::Max, &mut y)?;
    }
    put_wide(&mut outs[0], y.iter().map(|p| p.0 as f64))?;
    if outs.len() < 2 {
        return Ok(());
    }
    check_out(outs, 1, DType::I64, &pd.out_shape)?;
    let sp = &pd.geo.in_sp;
    let vol = prod(sp).max(1);
    let col_major = attrs.int("storage_order", 0) == 1;
    let mut coords = vec![0usize; sp.len()];
    for (chunk, p) in outs[1].data.chunks_exact_mut(8).zip(&y) {
        let mut i = p.1;
        if col_major && i >= 0 {
            // Row-major within the plane to column-major (the first spatial axis fastest).
            let (plane, at) = (i as usize / vol, i as usize % vol);
            unflatten(at, sp, &mut coords);
            let (mut flat, mut stride) = (0usize, 1usize);
            for (&c, &d) in coords.iter().zip(sp) {
                flat += c * stride;
                stride *= d;
            }
            i = (plane * vol + flat) as i64;
        }
        chunk.copy_from_slice(&i.to_le_bytes());
    }
    Ok(())
}

fn average_pool(ins: &[Option<TensorRef>], attrs: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    validate_average_pool(attrs)?;
    let x = host_input(ins, 0, "X")?;
    let pd = pool_dims(x.shape, attrs)?;
    check_out(outs, 0, DType::F32, &pd.out_shape)?;
    let include_pad = flag(attrs, "count_include_pad")?;
    let xv = values(x, "X")?;
    if rows_pool(&pd.geo) {
        return write_f32(&mut outs[0], |y| pool_2d(&xv, &pd, PoolKind::Average { include_pad }, y));
    }
    fill_f32(&mut outs[0], |y| pool_f32(&xv, &pd, PoolKind::Average { include_pad }, y))
}

/// Reduces every [N, C] plane of X to one value.
fn global_pool(ins: &[Option<TensorRef>], outs: &mut [TensorMut], max: bool) -> Result<(), String> {
    let x = host_input(ins, 0, "X")?;
    let shape = global_shape(x.shape)?;
    check_out(outs, 0, DType::F32, &shape)?;
    let xv = values(x, "X")?;
    let planes = (shape[0] * shape[1]) as usize;
    let plane = xv.len().checked_div(planes).unwrap_or(0);
    fill_f32(&mut outs[0], |y| {
        for (slot, xp) in y.iter_mut().zip(xv.chunks_exact(plane.max(1))) {
            *slot = if plane == 0 {
                if max {
                    f32::NEG_INFINITY
                } else {
                    f32::NAN
                }
            } else if max {
                xp.iter().fold(f32::NEG_INFINITY, |a, &v| if v > a || v.is_nan() { v } else { a })
            } else {
                let mut acc = [0f32; 8];
                let chunks = xp.chunks_exact(8);
                let tail: f32 = chunks.remainder().iter().sum();
                for c in chunks {
                    for j in 0..8 {
                        acc[j] += c[j];
                    }
                }
                (acc.iter().sum::<f32>() + tail) / plane as f32
            };
        }
        Ok(())
    })
}

fn global_average_pool(ins: &[Option<TensorRef>], _: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    global_pool(ins, outs, false)
}

fn global_max_pool(ins: &[Option<TensorRef>], _: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    global_pool(ins, outs, true)
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

// ---------------------------------------------------------------------------------------
// Threads.

/// Work (multiply-adds) above which kernels split over threads.
const PAR_WORK: f64 = 1e6;

fn threads() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()).min(8))
}

/// The host kernels' worker threads, one fewer than [`threads`] (the calling thread takes
/// a share): created once and kept for the life of the process, so a parallel region
/// costs a wake-up, not a thread spawn. A pool of its own, so that an application's use
/// of rayon's global pool neither starves nor is starved by the VM.
fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let n = threads().saturating_sub(1).max(1);
        rayon::ThreadPoolBuilder::new().num_threads(n).thread_name(|i| format!("rxvm-host-{i}")).build().ok()
    })
    .as_ref()
}

/// Runs `f` on every job, in parallel: the first on the calling thread, the others on
/// [`pool`] (or in order on the calling thread if it could not be created). The first
/// error (in job order) is returned; a job that panics is an error, not a panic.
fn run_parts<J: Send>(
    jobs: impl IntoIterator<Item = J>,
    f: impl Fn(J) -> Result<(), String> + Sync,
) -> Result<(), String> {
    let run = |job: J| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(job)))
            .unwrap_or_else(|_| Err("a worker thread panicked".into()))
    };
    let run = &run;
    let Some(pool) = pool() else {
        return jobs.into_iter().try_for_each(run);
    };
    let jobs: Vec<J> = jobs.into_iter().collect();
    let mut results: Vec<Result<(), String>> = jobs.iter().map(|_| Ok(())).collect();
    pool.in_place_scope(|sc| {
        let mut pairs = jobs.into_iter().zip(results.iter_mut());
        let first = pairs.next();
        for (job, slot) in pairs {
            sc.spawn(move |_| *slot = run(job));
        }
        if let Some((job, slot)) = first {
            *slot = run(job);
        }
    });
    results.into_iter().collect()
}

/// Runs `f(item, out_chunk, may_split)` over the `item_len`-sized chunks of `out`. When the
/// work is large and there are at least as many items as threads, contiguous ranges of
/// items go to the threads (and `may_split` is false); otherwise the items run in order
/// and `f` may split its own work (`may_split` true).
fn par_items<T: Send>(
    out: &mut [T],
    item_len: usize,
    work: f64,
    f: impl Fn(usize, &mut [T], bool) -> Result<(), String> + Sync,
) -> Result<(), String> {
    if item_len == 0 || out.is_empty() {
        return Ok(());
    }
    let items = out.len() / item_len;
    let t = threads();
    if t > 1 && items >= t && work >= PAR_WORK {
        let per = items.div_ceil(t);
        run_parts(out.chunks_mut(per * item_len).enumerate(), |(ti, part)| {
            part.chunks_mut(item_len).enumerate().try_for_each(|(j, it)| f(ti * per + j, it, false))
        })
    } else {
        out.chunks_mut(item_len).enumerate().try_for_each(|(i, it)| f(i, it, true))
    }
}

// ---------------------------------------------------------------------------------------
// GEMM: C[m, n] += alpha * A[m, k] B[k, n] on strided f32 views.

/// A strided matrix view: element (i, j) is `d[i * rs + j * cs]`; as the left operand of a
/// product, maybe packed already.
#[derive(Clone, Copy)]
struct Mat<'a> {
    d: &'a [f32],
    rs: usize,
    cs: usize,
    packed: Option<PackedRows<'a>>,
}

/// Rows `r0..` of a [`PackedA`] (`r0` a multiple of its kernel's rows): the left operand
/// of a product over some of its rows, which threads split between them.
#[derive(Clone, Copy)]
struct PackedRows<'a> {
    p: &'a PackedA,
    r0: usize,
}

impl<'a> PackedRows<'a> {
    /// The strips of rows `i0..i0 + mc` (`i0` a multiple of MR) in the KC block at `p0`,
    /// when this is the packing of an `m` x `k` operand for an `MR`-row kernel.
    fn block<const MR: usize>(
        self,
        m: usize,
        k: usize,
        i0: usize,
        p0: usize,
        mc: usize,
        kc: usize,
    ) -> Option<&'a [f32]> {
        let (p, i0) = (self.p, self.r0 + i0);
        if p.mr != MR || self.r0 + m > p.m || p.k != k || !i0.is_multiple_of(MR) {
            return None;
        }
        let start = p0 * p.m.div_ceil(MR) * MR + i0 * kc;
        p.data.get(start..start + mc.div_ceil(MR) * MR * kc)
    }
}

/// Weights packed for one call, or kept with their constant.
enum Packed {
    Fresh(PackedA),
    Kept(std::sync::Arc<PackedA>),
}

impl Packed {
    fn get(&self) -> &PackedA {
        match self {
            Packed::Fresh(p) => p,
            Packed::Kept(p) => p,
        }
    }
}

/// A left operand packed once for every column block of a product (a convolution's
/// weights, shared by all its column chunks and threads) as [`pack_a`] packs one block:
/// for each KC block of k, the MR-tall strips of all rows.
struct PackedA {
    mr: usize,
    m: usize,
    k: usize,
    data: Vec<f32>,
}

impl PackedA {
    /// Packs `a` (m x k) for the GEMM kernel this CPU runs, into `buf`'s memory.
    fn new(a: Mat, m: usize, k: usize, mut buf: Vec<f32>) -> PackedA {
        let kernel = Kernel::detect();
        let mr = kernel.rows();
        let rows = m.div_ceil(mr) * mr;
        // (Every element is written: the strips, padding included.)
        buf.resize(rows * k, 0.0);
        let pack = |(p0, block): (usize, &mut [f32])| {
            let kc = KC.min(k - p0);
            match kernel {
                Kernel::Avx512 => pack_a_into::<MR512>(&a, 0, p0, m, kc, block),
                Kernel::Avx2 => pack_a_into::<MR_AVX2>(&a, 0, p0, m, kc, block),
                Kernel::Portable => pack_a_into::<MR_PORTABLE>(&a, 0, p0, m, kc, block),
            }
            Ok(())
        };
        let blocks: Vec<(usize, &mut [f32])> = (0..k).step_by(KC).zip(buf.chunks_mut(rows * KC)).collect();
        let t = threads().min(blocks.len());
        // Packing streams the weights from memory once per call: both cores share it.
        let res = if t > 1 && (rows * k) as f64 >= PAR_WORK {
            let per = blocks.len().div_ceil(t);
            let mut jobs: Vec<Vec<(usize, &mut [f32])>> = Vec::with_capacity(t);
            for (i, b) in blocks.into_iter().enumerate() {
                if i % per == 0 {
                    jobs.push(Vec::with_capacity(per));
                }
                if let Some(job) = jobs.last_mut() {
                    job.push(b);
                }
            }
            run_parts(jobs, |job| job.into_iter().try_for_each(pack))
        } else {
            blocks.into_iter().try_for_each(pack)
        };
        debug_assert!(res.is_ok(), "packing cannot fail");
        PackedA { mr, m, k, data: buf }
    }
}

/// The GEMM micro-kernel this CPU runs: [`gemm_serial`] calls it and [`PackedA`] packs
/// for it.
#[derive(Clone, Copy)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
enum Kernel {
    Avx512,
    Avx2,
    Portable,
}

impl Kernel {
    fn detect() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512f") {
                return Kernel::Avx512;
            }
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                return Kernel::Avx2;
            }
        }
        Kernel::Portable
    }

    /// Its rows (MR).
    fn rows(self) -> usize {
        match self {
            Kernel::Avx512 => MR512,
            Kernel::Avx2 => MR_AVX2,
            Kernel::Portable => MR_PORTABLE,
        }
    }
}

impl Mat<'_> {
    /// Whether a `rows` x `cols` matrix fits in the data.
    fn fits(&self, rows: usize, cols: usize) -> bool {
        if rows == 0 || cols == 0 {
            return true;
        }
        let last = (rows - 1)
            .checked_mul(self.rs)
            .and_then(|r| (cols - 1).checked_mul(self.cs).and_then(|c| r.checked_add(c)));
        last.is_some_and(|l| l < self.d.len())
    }
}

/// `C += alpha * A B` with C row-major (`ldc` apart); splits over threads when `par` and the
/// work is large.
#[allow(clippy::too_many_arguments)]
fn gemm(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: Mat,
    b: Mat,
    c: &mut [f32],
    ldc: usize,
    par: bool,
) -> Result<(), String> {
    if m == 0 || n == 0 || k == 0 {
        return Ok(());
    }
    if n > ldc || !matches!((m - 1).checked_mul(ldc).and_then(|r| r.checked_add(n)), Some(l) if l <= c.len()) {
        return Err("internal error: matrix product output out of range".into());
    }
    let mut rows: Vec<&mut [f32]> = c.chunks_mut(ldc).take(m).map(|r| &mut r[..n]).collect();
    gemm_rows(m, n, k, alpha, a, b, &mut rows, par)
}

/// Hands out the column ranges `parts` (consecutive, from 0) of every row: one list of row
/// segments per range.
fn split_columns<'a>(rows: &'a mut [&mut [f32]], parts: &[(usize, usize)]) -> Vec<Vec<&'a mut [f32]>> {
    let mut out: Vec<Vec<&'a mut [f32]>> = parts.iter().map(|_| Vec::with_capacity(rows.len())).collect();
    for row in rows.iter_mut() {
        let mut rest: &'a mut [f32] = &mut row[..];
        for (list, &(j0, j1)) in out.iter_mut().zip(parts) {
            let take = (j1 - j0).min(rest.len());
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(take);
            list.push(head);
            rest = tail;
        }
    }
    out
}

/// `C += alpha * A B` with C given as rows (at least `n` long each); splits the rows or
/// the columns over threads when `par` and the work is large.
#[allow(clippy::too_many_arguments)]
fn gemm_rows(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: Mat,
    b: Mat,
    c: &mut [&mut [f32]],
    par: bool,
) -> Result<(), String> {
    if m == 0 || n == 0 || k == 0 {
        return Ok(());
    }
    if c.len() < m || c[..m].iter().any(|r| r.len() < n) || !a.fits(m, k) || !b.fits(k, n) {
        return Err("internal error: matrix product operands out of range".into());
    }
    let c = &mut c[..m];
    let t = if par && (m as f64) * (n as f64) * (k as f64) >= PAR_WORK { threads() } else { 1 };
    if t > 1 && m >= 16 * t {
        let per = m.div_ceil(t);
        return run_parts(c.chunks_mut(per).enumerate(), |(ti, part)| {
            let a_rows = Mat { d: &a.d[ti * per * a.rs..], packed: None, ..a };
            gemm_serial(part.len(), n, k, alpha, a_rows, b, part);
            Ok(())
        });
    }
    if t > 1 && n >= 16 * t {
        let parts = ranges(n, t, 16);
        let lists = split_columns(c, &parts);
        return run_parts(lists.into_iter().zip(parts.iter().copied()), |(mut rows, (j0, j1))| {
            let b_cols = Mat { d: &b.d[j0 * b.cs..], ..b };
            gemm_serial(m, j1 - j0, k, alpha, a, b_cols, &mut rows);
            Ok(())
        });
    }
    gemm_serial(m, n, k, alpha, a, b, c);
    Ok(())
}

/// Single-threaded `C += alpha * A B` (operands already checked to fit).
fn gemm_serial(m: usize, n: usize, k: usize, alpha: f32, a: Mat, b: Mat, c: &mut [&mut [f32]]) {
    if m < 4 && b.cs == 1 {
        // Few rows: row-times-matrix as contiguous AXPYs over B's rows.
        for (i, row) in c.iter_mut().enumerate().take(m) {
            let row = &mut row[..n];
            for p in 0..k {
                let av = alpha * a.d[i * a.rs + p * a.cs];
                let br = &b.d[p * b.rs..][..n];
                row.iter_mut().zip(br).for_each(|(o, &v)| *o += av * v);
            }
        }
        return;
    }
    if m < 4 && a.cs == 1 && b.rs == 1 {
        // Few rows times a transposed B (e.g. a fully connected layer with transB): dot
        // products of contiguous rows, each row of B read once.
        for j in 0..n {
            let bj = &b.d[j * b.cs..][..k];
            for (i, row) in c.iter_mut().enumerate().take(m) {
                row[j] += alpha * dot(&a.d[i * a.rs..][..k], bj);
            }
        }
        return;
    }
    if n == 1 && a.cs == 1 && b.rs == 1 {
        // Matrix-vector: dot products of contiguous rows.
        let bv = &b.d[..k];
        for (i, row) in c.iter_mut().enumerate().take(m) {
            row[0] += alpha * dot(&a.d[i * a.rs..][..k], bv);
        }
        return;
    }
    match Kernel::detect() {
        // SAFETY: the CPU supports AVX-512F (and FMA), as `detect` found.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 => unsafe { gemm_packed_avx512(m, n, k, alpha, a, b, c) },
        // SAFETY: the CPU supports AVX2 and FMA, as `detect` found.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { gemm_packed_avx2(m, n, k, alpha, a, b, c) },
        _ => gemm_packed::<MR_PORTABLE, 8, false>(m, n, k, alpha, a, b, c),
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { dot_avx2(a, b) };
    }
    dot_body(a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    dot_body(a, b)
}

/// Dot product with 32 independent partial sums (four AVX registers in flight).
#[inline(always)]
fn dot_body(a: &[f32], b: &[f32]) -> f32 {
    const L: usize = 32;
    let mut acc = [0f32; L];
    let (ca, cb) = (a.chunks_exact(L), b.chunks_exact(L));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for j in 0..L {
            acc[j] += x[j] * y[j];
        }
    }
    // Pairwise: lanes j and j + 8 (and so on) fold together, then the last 8.
    let mut w = L;
    while w > 8 {
        w /= 2;
        for j in 0..w {
            acc[j] += acc[j + w];
        }
    }
    acc[..8].iter().sum::<f32>() + tail
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gemm_packed_avx2(m: usize, n: usize, k: usize, alpha: f32, a: Mat, b: Mat, c: &mut [&mut [f32]]) {
    gemm_packed::<MR_AVX2, 16, true>(m, n, k, alpha, a, b, c);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn gemm_packed_avx512(m: usize, n: usize, k: usize, alpha: f32, a: Mat, b: Mat, c: &mut [&mut [f32]]) {
    gemm_packed::<MR512, NR512, true>(m, n, k, alpha, a, b, c);
}

const MR512: usize = 12;
const MR_AVX2: usize = 6;
const MR_PORTABLE: usize = 4;
const NR512: usize = 32;

/// Block sizes: A blocks are MC x KC, B panels KC x NC (MC and NC multiples of every MR / NR).
const KC: usize = 256;
const MC: usize = 96;
const NC: usize = 2048;

/// The packed, register-blocked GEMM: B panels packed in NR-wide strips, A blocks in
/// MR-tall strips, an MR x NR micro-kernel over each pair.
#[inline(always)]
fn gemm_packed<const MR: usize, const NR: usize, const FMA: bool>(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: Mat,
    b: Mat,
    c: &mut [&mut [f32]],
) {
    // (Taken out of the thread-local, not borrowed in a closure: a closure would not
    // inherit the caller's target features.)
    let (mut ap, mut bp) = PACK.take();
    gemm_blocks::<MR, NR, FMA>(m, n, k, alpha, a, b, c, &mut ap, &mut bp);
    PACK.set((ap, bp));
}

/// [`gemm_packed`] with the packing buffers given.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn gemm_blocks<const MR: usize, const NR: usize, const FMA: bool>(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: Mat,
    b: Mat,
    c: &mut [&mut [f32]],
    ap: &mut Vec<f32>,
    bp: &mut Vec<f32>,
) {
    for j0 in (0..n).step_by(NC) {
        let nc = NC.min(n - j0);
        for p0 in (0..k).step_by(KC) {
            let kc = KC.min(k - p0);
            pack_b::<NR>(&b, p0, j0, kc, nc, bp);
            for i0 in (0..m).step_by(MC) {
                let mc = MC.min(m - i0);
                let strips = match a.packed.and_then(|p| p.block::<MR>(m, k, i0, p0, mc, kc)) {
                    Some(strips) => strips,
                    None => {
                        pack_a::<MR>(&a, i0, p0, mc, kc, ap);
                        &ap[..]
                    }
                };
                for (js, bs) in bp.chunks_exact(NR * kc).enumerate() {
                    let jj = j0 + js * NR;
                    let nr = NR.min(n - jj);
                    for (is, asl) in strips.chunks_exact(MR * kc).enumerate() {
                        let ii = i0 + is * MR;
                        let mr = MR.min(m - ii);
                        let acc = micro::<MR, NR, FMA>(asl, bs);
                        for (i, accr) in acc.iter().enumerate().take(mr) {
                            let row = &mut c[ii + i][jj..jj + nr];
                            row.iter_mut().zip(accr).for_each(|(o, &v)| *o += alpha * v);
                        }
                    }
                }
            }
        }
    }
}

#[inline(always)]
fn micro<const MR: usize, const NR: usize, const FMA: bool>(ap: &[f32], bp: &[f32]) -> [[f32; NR]; MR] {
    let mut acc = [[0f32; NR]; MR];
    for (av, bv) in ap.chunks_exact(MR).zip(bp.chunks_exact(NR)) {
        for i in 0..MR {
            let x = av[i];
            for j in 0..NR {
                acc[i][j] = if FMA { x.mul_add(bv[j], acc[i][j]) } else { acc[i][j] + x * bv[j] };
            }
        }
    }
    acc
}

/// Packs A[i0.., p0..] (mc x kc) as MR-tall strips, each k-major; short strips are zero-padded.
/// (`out` is reused between calls: every element is written.)
#[inline(always)]
fn pack_a<const MR: usize>(a: &Mat, i0: usize, p0: usize, mc: usize, kc: usize, out: &mut Vec<f32>) {
    out.resize(mc.div_ceil(MR) * MR * kc, 0.0);
    pack_a_into::<MR>(a, i0, p0, mc, kc, out);
}

/// [`pack_a`] into `out`, which holds exactly the strips.
#[inline(always)]
fn pack_a_into<const MR: usize>(a: &Mat, i0: usize, p0: usize, mc: usize, kc: usize, out: &mut [f32]) {
    for (s, dst) in out.chunks_exact_mut(MR * kc).enumerate() {
        let rows = MR.min(mc - s * MR);
        if rows < MR {
            for p in 0..kc {
                dst[p * MR + rows..p * MR + MR].fill(0.0);
            }
        }
        if rows == MR && a.cs == 1 {
            // A full strip of contiguous rows: read the MR rows side by side and write
            // each column of the strip at once (the loop below scatters one row at a time).
            let src: [&[f32]; MR] = std::array::from_fn(|ii| {
                let base = (i0 + s * MR + ii) * a.rs + p0;
                &a.d[base..base + kc]
            });
            for (p, col) in dst.chunks_exact_mut(MR).enumerate() {
                for (c, r) in col.iter_mut().zip(&src) {
                    *c = r[p];
                }
            }
            continue;
        }
        for ii in 0..rows {
            let base = (i0 + s * MR + ii) * a.rs + p0 * a.cs;
            if a.cs == 1 {
                for (p, &v) in a.d[base..base + kc].iter().enumerate() {
                    dst[p * MR + ii] = v;
                }
            } else {
                for p in 0..kc {
                    dst[p * MR + ii] = a.d[base + p * a.cs];
                }
            }
        }
    }
}

/// Packs B[p0.., j0..] (kc x nc) as NR-wide strips, each k-major; short strips are zero-padded.
#[inline(always)]
fn pack_b<const NR: usize>(b: &Mat, p0: usize, j0: usize, kc: usize, nc: usize, out: &mut Vec<f32>) {
    out.resize(nc.div_ceil(NR) * NR * kc, 0.0);
    for (s, dst) in out.chunks_exact_mut(NR * kc).enumerate() {
        let jj = j0 + s * NR;
        let w = NR.min(j0 + nc - jj);
        for (p, row) in dst.chunks_exact_mut(NR).enumerate() {
            row[w..].fill(0.0);
            let base = (p0 + p) * b.rs + jj * b.cs;
            if b.cs == 1 {
                row[..w].copy_from_slice(&b.d[base..base + w]);
            } else {
                for (j, v) in row[..w].iter_mut().enumerate() {
                    *v = b.d[base + j * b.cs];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::host_tensor::HostTensor;
    use crate::ops::{AttrValue, OpId, TensorInfo};

    /// Exact dyadic test values in [-1.375, 1.375]; the generator for the expected values
    /// (ONNX's reference evaluator, or naive numpy loops where it falls short) uses the
    /// same formula.
    fn gen(shape: &[i64], seed: u64) -> HostTensor {
        let n: i64 = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|i| ((i * 37 + seed as i64 * 13 + 11) % 23 - 11) as f32 * 0.125).collect();
        HostTensor::from_f32(shape, &v).unwrap()
    }

    fn attrs(list: &[(&str, AttrValue)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    fn ints(v: &[i64]) -> AttrValue {
        AttrValue::Ints(v.to_vec())
    }

    /// Runs an operator as the verifier and interpreter do: attribute check, inference,
    /// zeroed outputs of the inferred types, host kernel.
    fn run(op: &str, ins: &[Option<&HostTensor>], attrs: &Attrs) -> Result<Vec<HostTensor>, String> {
        let def = OpId::from_name(op).ok_or("unknown operator")?.def();
        def.check_attrs(attrs)?;
        let infos: Vec<Option<TensorInfo>> =
            ins.iter().map(|t| t.map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) })).collect();
        let inferred = (def.infer)(&infos, attrs)?;
        let mut outs = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s)).collect::<Result<Vec<_>, _>>()?;
        (def.op.id().host_kernel().unwrap())(ins, attrs, &mut outs)?;
        Ok(outs)
    }

    fn err(op: &str, ins: &[&HostTensor], at: &[(&str, AttrValue)]) -> String {
        let ins: Vec<Option<&HostTensor>> = ins.iter().map(|t| Some(*t)).collect();
        match run(op, &ins, &attrs(at)) {
            Ok(_) => panic!("{op} {}: expected an error", attrs(at)),
            Err(e) => e,
        }
    }

    fn assert_close(what: &str, got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{what}: element count");
        for (j, (x, y)) in got.iter().zip(want).enumerate() {
            let tol = 1e-4 * y.abs().max(1.0);
            assert!((x - y).abs() <= tol, "{what}: element {j} is {x}, expected {y}");
        }
    }

    /// Runs `op` on generated inputs `(shape, seed)` and compares every listed output.
    #[allow(clippy::type_complexity)]
    fn check(op: &str, ins: &[Option<(&[i64], u64)>], at: &[(&str, AttrValue)], want: &[(&[i64], &[f64])]) {
        let tensors: Vec<Option<HostTensor>> = ins.iter().map(|t| t.map(|(s, seed)| gen(s, seed))).collect();
        let refs: Vec<Option<&HostTensor>> = tensors.iter().map(|t| t.as_ref()).collect();
        let a = attrs(at);
        let outs = run(op, &refs, &a).unwrap_or_else(|e| panic!("{op} {a}: {e}"));
        for (i, (shape, vals)) in want.iter().enumerate() {
            assert_eq!(&outs[i].shape[..], *shape, "{op} {a}: output {i} shape");
            assert_close(&format!("{op} {a}: output {i}"), &outs[i].to_f64(), vals);
        }
    }

    /// Constant weights are packed once, per group, and kept with the constant: later
    /// calls use the kept packing and give the same bits as packing them afresh.
    #[test]
    fn constant_conv_weights_are_packed_once_and_kept() {
        use crate::ir::host_tensor::Derived;
        let x = HostTensor::random(DType::F32, &[2, 4, 9, 9], 1).unwrap();
        let w = HostTensor::random(DType::F32, &[8, 2, 3, 3], 2).unwrap();
        let attrs = Attrs(vec![
            ("group".to_string(), AttrValue::Int(2)),
            ("pads".to_string(), AttrValue::Ints(vec![1, 1, 1, 1])),
        ]);
        let derived = Derived::default();
        let run = |constant: Option<ConstOperand>| {
            let mut y = HostTensor::zeros(DType::F32, &[2, 8, 9, 9]).unwrap();
            let ins = [Some(TensorRef::from(&x)), Some(TensorRef { constant, ..TensorRef::from(&w) })];
            conv(&ins, &attrs, &mut [y.view_mut()]).unwrap();
            y.data
        };
        let fresh = run(None);
        assert!(derived.is_empty());
        let kept = Some(ConstOperand { derived: &derived, offset: 0 });
        assert_eq!(run(kept), fresh);
        assert_eq!(derived.len(), 2, "one packing per group");
        assert_eq!(run(kept), fresh);
        assert_eq!(derived.len(), 2, "reused, not packed again");
        // The same bytes at another place in their storage are another packing.
        assert_eq!(run(Some(ConstOperand { derived: &derived, offset: 4096 })), fresh);
        assert_eq!(derived.len(), 4);
        assert!(fresh.iter().any(|&b| b != 0));
    }

    /// A layer with few output positions (7x7, too few to split by columns) and much work
    /// is split between threads by output channels, each using its rows of the kept
    /// packing; it agrees with the f64 convolution.
    #[test]
    fn a_conv_with_few_columns_splits_its_channels_between_threads() {
        use crate::ir::host_tensor::Derived;
        let x = HostTensor::random(DType::F32, &[1, 64, 7, 7], 3).unwrap();
        let w = HostTensor::random(DType::F32, &[100, 64, 3, 3], 4).unwrap();
        let attrs = Attrs(vec![("pads".to_string(), AttrValue::Ints(vec![1, 1, 1, 1]))]);
        let wide = |t: &HostTensor| {
            let data = t.to_f64().iter().flat_map(|v| v.to_le_bytes()).collect();
            HostTensor::new(DType::F64, t.shape.clone(), data).unwrap()
        };
        let (x64, w64) = (wide(&x), wide(&w));
        let mut want = HostTensor::zeros(DType::F64, &[1, 100, 7, 7]).unwrap();
        conv(&[Some((&x64).into()), Some((&w64).into())], &attrs, &mut [want.view_mut()]).unwrap();
        let derived = Derived::default();
        for constant in [None, Some(ConstOperand { derived: &derived, offset: 0 })] {
            let mut y = HostTensor::zeros(DType::F32, &[1, 100, 7, 7]).unwrap();
            let ins = [Some(TensorRef::from(&x)), Some(TensorRef { constant, ..TensorRef::from(&w) })];
            conv(&ins, &attrs, &mut [y.view_mut()]).unwrap();
            assert_close("7x7 conv", &y.to_f64(), &want.to_f64());
        }
        assert!(want.to_f64().iter().any(|v| v.abs() > 0.5));
    }

    #[test]
    fn conv_matches_reference() {
        // 2-D, no padding
        check(
            "Conv",
            &[Some((&[1, 1, 5, 5], 1)), Some((&[1, 1, 3, 3], 2))],
            &[],
            &[(
                &[1, 1, 3, 3],
                &[-0.890625, 2.0625, -0.734375, -0.859375, 2.09375, -3.9375, -0.828125, 0.6875, -0.3125],
            )],
        );
        // pads and bias
        check(
            "Conv",
            &[Some((&[1, 2, 5, 5], 1)), Some((&[3, 2, 3, 3], 2)), Some((&[3], 3))],
            &[("pads", AttrValue::Ints(vec![1, 1, 1, 1]))],
            &[(
                &[1, 3, 5, 5],
                &[
                    0.375, -1.5625, 1.5, 0.25, -4.015625, 0.921875, -1.40625, 2.796875, -1.625, -1.828125, -2.921875,
                    -0.15625, 0.8125, -4.6875, -0.03125, 0.0625, -0.34375, -4.046875, -0.921875, 0.328125, 3.859375,
                    -4.90625, -1.046875, 0.296875, -1.3125, 2.125, 0.3125, 2.90625, 1.90625, -2.484375, 2.578125,
                    0.390625, 3.890625, -0.15625, -0.5, -1.09375, 1.71875, 2.34375, -3.140625, 1.46875, 2.0625,
                    1.609375, -2.078125, 0.703125, 2.0, 5.953125, -2.875, 1.234375, 2.109375, 0.5625, -2.59375, 0.75,
                    -0.359375, 3.921875, -3.828125, -1.875, 1.109375, 0.671875, 2.03125, -1.6875, -5.015625, 2.875,
                    -0.078125, -0.515625, 0.8125, -1.328125, 3.203125, -3.703125, -4.5, 1.875, 3.015625, -0.84375,
                    0.28125, -2.546875, 1.0,
                ],
            )],
        );
        // strides 2, asymmetric pads
        check(
            "Conv",
            &[Some((&[1, 2, 7, 6], 4)), Some((&[2, 2, 3, 3], 5))],
            &[("strides", AttrValue::Ints(vec![2, 2])), ("pads", AttrValue::Ints(vec![1, 0, 2, 1]))],
            &[(
                &[1, 2, 4, 3],
                &[
                    -4.484375, -0.96875, 5.1875, 2.671875, 3.390625, -2.859375, -0.5625, -4.875, -0.90625, -2.25,
                    5.015625, -0.546875, -4.75, -1.09375, 5.234375, 0.078125, 2.625, -2.515625, -0.8125, -2.9375,
                    -0.796875, 0.3125, 1.25, -0.171875,
                ],
            )],
        );
        // dilations
        check(
            "Conv",
            &[Some((&[1, 1, 7, 7], 6)), Some((&[2, 1, 3, 3], 7))],
            &[("dilations", AttrValue::Ints(vec![2, 2])), ("pads", AttrValue::Ints(vec![2, 2, 2, 2]))],
            &[(
                &[1, 2, 7, 7],
                &[
                    0.921875, -0.484375, -1.953125, 1.84375, 0.96875, 1.78125, -1.453125, -1.375, 0.453125, 0.90625,
                    1.46875, -1.203125, -1.453125, 1.78125, -0.96875, -1.53125, -0.25, -0.5, 2.484375, -1.296875,
                    -1.546875, 1.203125, 0.28125, 2.3125, -3.328125, -1.78125, 2.703125, -0.78125, 1.578125, 1.015625,
                    -1.953125, 2.828125, -1.015625, 2.03125, -0.015625, -1.046875, 1.765625, -1.765625, -1.703125,
                    1.59375, -0.765625, 1.65625, -2.203125, -1.1875, 1.546875, -0.1875, 1.671875, -1.421875, -2.234375,
                    -1.421875, 1.40625, 1.0625, 1.6875, -2.359375, -0.078125, 0.921875, 0.40625, 2.15625, -2.109375,
                    -0.765625, 1.65625, 0.8125, 0.015625, -0.09375, -0.59375, 3.671875, -1.515625, -3.109375, -0.59375,
                    0.296875, 2.15625, -3.015625, -2.8125, 3.140625, -0.25, 1.6875, -1.015625, -1.703125, 2.109375,
                    0.046875, 0.25, -0.265625, -1.0625, 1.984375, -1.078125, -2.296875, 1.84375, -1.265625, 2.8125,
                    -0.671875, -1.5625, 1.890625, -1.125, 3.078125, -1.828125, -3.140625, 0.640625, 0.828125,
                ],
            )],
        );
        // group 2 with bias, batch 2
        check(
            "Conv",
            &[Some((&[2, 4, 5, 5], 8)), Some((&[6, 2, 3, 3], 9)), Some((&[6], 10))],
            &[("group", AttrValue::Int(2)), ("pads", AttrValue::Ints(vec![0, 1, 0, 1]))],
            &[(
                &[2, 6, 3, 5],
                &[
                    0.78125, -1.375, 2.125, -1.921875, -2.1875, 0.703125, -1.484375, 2.015625, -2.03125, -2.375,
                    -2.96875, -0.15625, 0.46875, -5.015625, -0.40625, -0.96875, 2.140625, 1.703125, 3.0625, -0.671875,
                    -0.875, 2.109375, 1.671875, 3.03125, -0.6875, -4.015625, 3.875, 0.921875, 0.484375, 1.8125, -2.0,
                    -0.8125, 3.078125, 1.578125, -5.625, -2.09375, -0.765625, 3.125, 1.625, -5.46875, -5.0625, 1.4375,
                    3.171875, -0.484375, -2.4375, 0.265625, 4.3125, 1.390625, 1.34375, 4.203125, 0.34375, 1.921875,
                    4.03125, 2.1875, 2.375, 0.421875, -1.90625, 5.234375, 0.15625, -0.890625, -0.484375, 2.859375,
                    0.3125, -0.4375, 3.125, -0.59375, 0.546875, 3.03125, 0.84375, 1.46875, -0.703125, -3.203125,
                    4.3125, -0.75, -1.625, -1.59375, -2.1875, 0.671875, -4.015625, 5.28125, -1.53125, -4.0625,
                    3.828125, -1.9375, 4.15625, -1.46875, -7.375, 5.546875, -2.734375, 1.59375, -2.578125, -3.203125,
                    -2.578125, -0.15625, -1.984375, -5.53125, -1.15625, 0.546875, -0.265625, -5.40625, -1.65625,
                    -0.546875, 2.234375, -1.8125, -2.0, 2.34375, -1.0, -3.953125, 3.875, -1.703125, -0.078125,
                    1.484375, -0.390625, 4.203125, -4.59375, -3.9375, 2.53125, 1.734375, 3.09375, -0.65625, 0.796875,
                    -5.265625, -3.53125, 1.4375, 0.375, -1.453125, -2.34375, 0.46875, 2.203125, -1.984375, -5.140625,
                    -0.859375, 3.03125, 1.53125, -5.78125, 1.46875, 3.578125, -1.140625, -1.90625, 4.65625, 1.546875,
                    0.46875, 0.78125, 1.09375, 4.265625, 0.1875, 4.1875, 1.265625, 1.21875, 4.234375, 0.5625, 2.25,
                    -2.09375, -3.203125, 3.78125, 0.8125, -0.78125, -0.09375, -0.125, 3.5625, -0.375, 3.015625,
                    0.46875, -0.28125, 3.34375, -1.78125, 4.515625, -2.6875, -7.375, 5.0625, -1.0, 1.921875, -0.25,
                    -3.859375, 5.375, -1.65625, -2.109375, 0.75, -3.9375, 5.328125,
                ],
            )],
        );
        // depthwise, strides 2
        check(
            "Conv",
            &[Some((&[1, 3, 6, 6], 11)), Some((&[3, 1, 3, 3], 12))],
            &[
                ("group", AttrValue::Int(3)),
                ("strides", AttrValue::Ints(vec![2, 2])),
                ("pads", AttrValue::Ints(vec![1, 1, 1, 1])),
            ],
            &[(
                &[1, 3, 3, 3],
                &[
                    -0.78125, 3.90625, -1.875, -0.78125, -2.609375, 0.1875, -0.453125, 0.15625, 2.953125, 0.296875,
                    -1.875, 0.734375, 0.125, -0.21875, 2.046875, -1.3125, -0.28125, 0.546875, -0.296875, 4.390625,
                    0.296875, 0.859375, -2.21875, -0.84375, -0.546875, -1.15625, -0.140625,
                ],
            )],
        );
        // 1-D with stride, dilation, pads
        check(
            "Conv",
            &[Some((&[2, 3, 10], 13)), Some((&[4, 3, 3], 14))],
            &[
                ("strides", AttrValue::Ints(vec![2])),
                ("pads", AttrValue::Ints(vec![1, 2])),
                ("dilations", AttrValue::Ints(vec![2])),
            ],
            &[(
                &[2, 4, 5],
                &[
                    -0.046875, 1.0625, -2.65625, 0.453125, 2.15625, 0.6875, -1.875, 1.421875, 3.28125, -1.765625,
                    -0.734375, 2.015625, 0.46875, -2.515625, 1.140625, 0.359375, -2.359375, 1.3125, 3.546875, -1.34375,
                    1.921875, -5.84375, 2.296875, 1.453125, 0.5625, -5.53125, 3.015625, 1.640625, -0.8125, -1.484375,
                    3.546875, -2.140625, -0.09375, 0.515625, 1.140625, -5.703125, 3.125, 2.125, -0.671875, -1.625,
                ],
            )],
        );
        // 3-D
        check(
            "Conv",
            &[Some((&[1, 2, 4, 5, 4], 15)), Some((&[3, 2, 2, 3, 2], 16)), Some((&[3], 17))],
            &[("pads", AttrValue::Ints(vec![1, 0, 1, 0, 1, 1])), ("strides", AttrValue::Ints(vec![1, 2, 1]))],
            &[(
                &[1, 3, 4, 2, 5],
                &[
                    -0.3125, 0.03125, -3.171875, 0.453125, -1.203125, -0.71875, -1.515625, -5.4375, 2.140625, -1.625,
                    -3.5625, 3.34375, -1.828125, 0.546875, -3.53125, -3.390625, -0.296875, -2.234375, 3.015625,
                    -2.671875, 0.640625, 0.53125, -3.5625, -7.65625, 2.75, -0.984375, 3.0, -1.8125, -1.953125,
                    -0.703125, -0.546875, -9.828125, 3.328125, 0.3125, -0.3125, 0.34375, 0.546875, 0.40625, -4.046875,
                    2.703125, -0.03125, 2.125, 1.53125, 1.296875, 1.375, 2.8125, 2.046875, 0.734375, -0.578125,
                    2.40625, -1.296875, -1.328125, -1.28125, -0.15625, 1.171875, -0.734375, 2.28125, -2.703125,
                    1.296875, 0.625, -2.046875, -0.03125, 6.125, -1.015625, -1.8125, -3.28125, 1.421875, -1.40625,
                    0.4375, -1.640625, 5.109375, 1.984375, 0.59375, -2.234375, 2.390625, -1.875, -0.15625, 4.921875,
                    0.65625, 0.765625, -2.625, -0.8125, 1.203125, -2.890625, 1.4375, -1.5625, 0.578125, 1.875, -0.0625,
                    0.6875, -0.109375, -2.046875, -0.015625, -3.375, -2.75, 3.0, -0.53125, 4.734375, -4.015625,
                    0.328125, -0.421875, -3.46875, -6.828125, 4.546875, -2.421875, 0.890625, -4.109375, 0.078125,
                    0.671875, -1.859375, -4.328125, 4.09375, 1.453125, 3.84375, -3.171875, -0.5, -3.375, -4.578125,
                    4.640625, -4.40625,
                ],
            )],
        );
        // auto_pad SAME_UPPER, strides 2
        check(
            "Conv",
            &[Some((&[1, 1, 5, 6], 18)), Some((&[2, 1, 3, 3], 19))],
            &[("auto_pad", AttrValue::Str("SAME_UPPER".into())), ("strides", AttrValue::Ints(vec![2, 2]))],
            &[(
                &[1, 2, 3, 3],
                &[
                    -2.34375, -1.40625, 2.5625, -0.140625, 3.03125, -2.71875, 0.1875, -1.671875, 0.40625, 3.46875,
                    -1.9375, -1.5625, -2.4375, -0.515625, 3.15625, 0.65625, 0.71875, -0.453125,
                ],
            )],
        );
        // auto_pad SAME_LOWER, even kernel
        check(
            "Conv",
            &[Some((&[1, 1, 5, 5], 20)), Some((&[1, 1, 2, 2], 21))],
            &[("auto_pad", AttrValue::Str("SAME_LOWER".into()))],
            &[(
                &[1, 1, 5, 5],
                &[
                    -0.765625, 0.4375, 1.140625, -0.671875, 0.75, 0.328125, -0.3125, -0.734375, 0.28125, -0.5,
                    0.390625, -0.265625, -0.6875, 0.328125, -0.453125, 0.453125, -0.21875, -0.640625, 0.375, -0.40625,
                    0.515625, -0.171875, -0.59375, 0.421875, -0.359375,
                ],
            )],
        );
        // auto_pad SAME_UPPER, even kernel
        check(
            "Conv",
            &[Some((&[1, 1, 5, 5], 20)), Some((&[1, 1, 2, 2], 21))],
            &[("auto_pad", AttrValue::Str("SAME_UPPER".into()))],
            &[(
                &[1, 1, 5, 5],
                &[
                    -0.3125, -0.734375, 0.28125, -0.5, 0.125, -0.265625, -0.6875, 0.328125, -0.453125, 0.109375,
                    -0.21875, -0.640625, 0.375, -0.40625, 0.09375, -0.171875, -0.59375, 0.421875, -0.359375, 0.078125,
                    -0.171875, -1.296875, 1.53125, -0.671875, 0.09375,
                ],
            )],
        );
        // auto_pad SAME_LOWER with dilation
        check(
            "Conv",
            &[Some((&[1, 2, 6, 5], 22)), Some((&[2, 2, 2, 3], 23))],
            &[("auto_pad", AttrValue::Str("SAME_LOWER".into())), ("dilations", AttrValue::Ints(vec![2, 1]))],
            &[(
                &[1, 2, 6, 5],
                &[
                    0.6875, -1.15625, 1.328125, 0.578125, -2.34375, -5.125, 1.34375, 2.578125, -1.21875, 0.03125,
                    -5.046875, 1.40625, 2.640625, -1.15625, 0.15625, -1.734375, 1.46875, 2.703125, -1.09375, 0.28125,
                    0.859375, 0.8125, -1.1875, -1.03125, 0.40625, 0.859375, 0.296875, 0.484375, -2.5625, 1.390625,
                    -1.625, 1.046875, 0.859375, -2.5625, 1.859375, 1.75, 1.4375, -0.15625, -1.03125, 2.328125, 1.625,
                    1.375, -0.21875, -1.09375, 2.25, 2.21875, -1.203125, -0.28125, -1.15625, 2.171875, 2.09375, -4.5,
                    1.453125, -1.21875, 2.09375, 0.578125, -2.0, -1.96875, 0.578125, 0.078125,
                ],
            )],
        );
        // auto_pad VALID, strides
        check(
            "Conv",
            &[Some((&[1, 1, 7, 5], 24)), Some((&[1, 1, 3, 2], 25))],
            &[("auto_pad", AttrValue::Str("VALID".into())), ("strides", AttrValue::Ints(vec![2, 2]))],
            &[(&[1, 1, 3, 2], &[-0.421875, -0.578125, -0.484375, -1.71875, -0.546875, 0.375])],
        );
        // pointwise 1x1 with bias
        check(
            "Conv",
            &[Some((&[2, 4, 3, 3], 26)), Some((&[5, 4, 1, 1], 27)), Some((&[5], 28))],
            &[],
            &[(
                &[2, 5, 3, 3],
                &[
                    -2.625, 1.234375, -1.375, 0.328125, 0.234375, -2.375, 1.484375, -1.125, -3.375, 2.1875, 0.78125,
                    1.171875, 2.28125, 1.59375, 1.984375, 0.578125, 0.96875, 2.796875, -1.625, 1.765625, -1.3125, 1.0,
                    1.515625, -1.5625, 1.828125, -1.25, -1.8125, 1.390625, -3.71875, 1.234375, -0.28125, -3.59375,
                    1.359375, -3.75, 1.203125, 1.484375, -0.625, 2.296875, -1.25, 1.671875, 2.796875, -0.75, 2.171875,
                    -1.375, -0.25, -3.125, 0.734375, -1.875, 1.984375, 0.453125, -2.875, 0.984375, -1.625, 2.234375,
                    2.59375, 1.1875, 1.578125, 0.171875, -1.953125, 2.390625, 0.984375, 1.375, -0.03125, -1.75,
                    1.640625, -1.4375, 1.953125, 1.03125, -1.6875, 1.703125, -1.375, 2.015625, 1.453125, -3.65625,
                    1.296875, -3.8125, -0.296875, 1.421875, -3.6875, 1.265625, -3.84375, -0.375, 2.546875, -1.0,
                    1.921875, 1.609375, -0.5, 2.421875, -1.125, 1.796875,
                ],
            )],
        );
        // 1x1 with stride
        check(
            "Conv",
            &[Some((&[1, 2, 5, 5], 29)), Some((&[3, 2, 1, 1], 30))],
            &[("strides", AttrValue::Ints(vec![2, 2]))],
            &[(
                &[1, 3, 3, 3],
                &[
                    1.265625, 0.765625, -0.09375, 0.921875, 0.421875, -0.4375, 0.9375, 0.078125, -0.78125, 1.265625,
                    -0.25, -0.328125, 1.234375, -0.28125, -0.359375, -0.234375, -0.3125, -0.390625, 1.265625,
                    -1.265625, -0.5625, 1.546875, -0.984375, -0.28125, -1.40625, -0.703125, 0.0,
                ],
            )],
        );
        // explicit kernel_shape
        check(
            "Conv",
            &[Some((&[1, 2, 4, 4], 31)), Some((&[2, 2, 3, 3], 32))],
            &[("kernel_shape", AttrValue::Ints(vec![3, 3])), ("pads", AttrValue::Ints(vec![1, 1, 1, 1]))],
            &[(
                &[1, 2, 4, 4],
                &[
                    4.015625, -3.671875, 1.078125, -0.109375, 0.859375, -0.921875, 2.21875, -0.046875, -2.078125,
                    1.578125, 0.765625, -1.203125, 0.265625, -4.421875, 1.484375, -1.5, 0.3125, -2.453125, -1.046875,
                    2.75, 0.65625, -4.453125, 3.734375, -1.90625, 1.234375, 1.703125, -2.328125, 0.8125, -1.265625,
                    -0.84375, 1.71875, -4.375,
                ],
            )],
        );
        // kernel larger than input, padded
        check(
            "Conv",
            &[Some((&[1, 1, 2, 2], 33)), Some((&[1, 1, 3, 3], 34))],
            &[("pads", AttrValue::Ints(vec![1, 1, 1, 1])), ("strides", AttrValue::Ints(vec![2, 2]))],
            &[(&[1, 1, 1, 1], &[1.390625])],
        );
    }

    #[test]
    fn conv_transpose_matches_reference() {
        // 2-D basic
        check(
            "ConvTranspose",
            &[Some((&[1, 1, 3, 3], 1)), Some((&[1, 2, 3, 3], 2))],
            &[],
            &[(
                &[1, 2, 5, 5],
                &[
                    -0.46875, 1.125, -1.859375, 0.96875, -0.625, 0.578125, 0.65625, -0.46875, 1.875, -1.4375, 0.875,
                    -3.78125, 3.125, -0.734375, 0.6875, -0.78125, 0.546875, 1.484375, -3.078125, 0.625, -0.390625,
                    1.015625, -1.34375, 1.40625, 0.0, 1.40625, -1.34375, 1.640625, -0.640625, 0.3125, -2.828125,
                    1.171875, 1.234375, -1.28125, 1.1875, -0.234375, 1.9375, -6.9375, 1.8125, -0.359375, 1.625,
                    -0.96875, 1.578125, 1.078125, -2.796875, 0.46875, -0.609375, 1.984375, -1.15625, 1.71875,
                ],
            )],
        );
        // strides and output_padding
        check(
            "ConvTranspose",
            &[Some((&[1, 1, 3, 3], 3)), Some((&[1, 2, 3, 3], 4))],
            &[("strides", AttrValue::Ints(vec![3, 2])), ("output_padding", AttrValue::Ints(vec![1, 1]))],
            &[(
                &[1, 2, 10, 8],
                &[
                    -0.65625, 0.328125, -0.546875, -0.328125, 1.015625, 0.09375, -0.34375, 0.0, -0.21875, 0.765625,
                    -0.546875, -0.765625, 0.703125, 0.21875, -0.21875, 0.0, 0.21875, 1.203125, -0.546875, -1.203125,
                    0.390625, 0.34375, -0.09375, 0.0, -1.03125, 0.515625, -1.609375, -0.140625, -0.046875, 0.28125,
                    -1.03125, 0.0, -0.34375, 1.203125, -1.109375, -0.328125, 0.140625, 0.65625, -0.65625, 0.0, 0.34375,
                    1.890625, -0.609375, -0.515625, 0.328125, 1.03125, -0.28125, 0.0, 0.75, -0.375, 1.28125, 0.046875,
                    -1.109375, 0.46875, -1.71875, 0.0, 0.25, -0.875, 0.84375, 0.109375, -0.421875, 1.09375, -1.09375,
                    0.0, -0.25, -1.375, 0.40625, 0.171875, 0.265625, 1.71875, -0.46875, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                    0.0, 0.0, 0.0, 0.65625, -0.875, -0.546875, 0.875, 0.078125, -0.25, 0.03125, 0.0, 1.09375, -0.4375,
                    -0.546875, 0.4375, -0.234375, -0.125, 0.15625, 0.0, -0.984375, 0.0, 1.96875, 0.0, -1.265625, 0.0,
                    0.28125, 0.0, 1.03125, -1.375, -0.109375, 0.375, 0.515625, -0.75, 0.09375, 0.0, 1.71875, -0.6875,
                    0.390625, 0.1875, 0.703125, -0.375, 0.46875, 0.0, -1.546875, 0.0, 1.96875, 0.0, -1.265625, 0.0,
                    0.84375, 0.0, -0.75, 1.0, -0.03125, -0.125, 0.953125, -1.25, 0.15625, 0.0, -1.25, 0.5, -0.46875,
                    -0.0625, 1.640625, -0.625, 0.78125, 0.0, 1.125, 0.0, -1.265625, 0.0, -1.265625, 0.0, 1.40625, 0.0,
                    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                ],
            )],
        );
        // pads, strides, bias
        check(
            "ConvTranspose",
            &[Some((&[1, 2, 3, 4], 5)), Some((&[2, 3, 3, 3], 6)), Some((&[3], 7))],
            &[("strides", AttrValue::Ints(vec![2, 2])), ("pads", AttrValue::Ints(vec![1, 2, 0, 1]))],
            &[(
                &[1, 3, 6, 6],
                &[
                    0.640625, -1.3125, 0.796875, 0.5625, -0.84375, 0.28125, -3.375, -0.9375, 5.203125, -0.78125,
                    -3.109375, 2.25, 0.546875, 0.4375, 0.703125, -1.28125, 0.859375, 0.59375, 4.703125, -1.03125,
                    -3.25, -0.875, 2.09375, -0.71875, 0.453125, -1.40625, 0.609375, 0.46875, -1.03125, 0.1875,
                    -2.21875, -1.28125, 2.34375, 0.28125, -1.71875, 1.125, -2.125, 0.40625, -2.046875, -1.890625,
                    0.546875, -2.03125, 0.171875, -0.484375, -4.703125, -0.40625, 2.640625, -1.40625, -2.171875,
                    -1.953125, -2.09375, 0.421875, -2.015625, -1.875, -3.515625, -0.53125, -0.125, -0.453125,
                    -3.921875, -4.328125, -2.21875, 0.359375, -2.140625, -1.9375, 0.453125, -2.078125, -1.65625,
                    0.484375, -2.203125, -2.125, 1.203125, -1.140625, 1.21875, -0.75, 1.21875, 1.046875, -0.21875,
                    1.046875, -2.75, -0.390625, 5.515625, -0.390625, -2.75, 2.84375, 1.21875, 1.046875, 1.21875, -0.75,
                    1.21875, 1.046875, 5.515625, -0.390625, -2.75, -0.390625, 2.640625, -0.03125, 1.21875, -0.75,
                    1.21875, 1.046875, -0.21875, 1.046875, -1.453125, -0.625, 2.953125, 0.859375, -0.90625, 1.984375,
                ],
            )],
        );
        // output_shape
        check(
            "ConvTranspose",
            &[Some((&[1, 1, 3, 3], 8)), Some((&[1, 2, 3, 3], 9))],
            &[("strides", AttrValue::Ints(vec![3, 2])), ("output_shape", AttrValue::Ints(vec![10, 8]))],
            &[(
                &[1, 2, 10, 8],
                &[
                    -0.34375, 1.203125, -1.109375, -0.328125, 0.140625, 0.65625, -0.65625, 0.0, 0.34375, 1.890625,
                    -0.609375, -0.515625, 0.328125, 1.03125, -0.28125, 0.0, 1.03125, -1.375, -0.109375, 0.375,
                    0.515625, -0.75, 0.09375, 0.0, 0.25, -0.875, 0.84375, 0.109375, -0.421875, 1.09375, -1.09375, 0.0,
                    -0.25, -1.375, 0.40625, 0.171875, 0.265625, 1.71875, -0.46875, 0.0, -0.75, 1.0, -0.03125, -0.125,
                    0.953125, -1.25, 0.15625, 0.0, 0.125, -0.4375, 0.28125, 0.546875, -0.265625, -0.984375, 0.984375,
                    0.0, -0.125, -0.6875, 0.34375, 0.859375, -0.515625, -1.546875, 0.421875, 0.0, -0.375, 0.5, 0.40625,
                    -0.625, -0.765625, 1.125, -0.140625, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.71875, -0.6875,
                    0.390625, 0.1875, 0.703125, -0.375, 0.46875, 0.0, -1.546875, 0.0, 1.96875, 0.0, -1.265625, 0.0,
                    0.84375, 0.0, -0.859375, 0.6875, -1.484375, -0.1875, 0.0, 0.375, -0.9375, 0.0, -1.25, 0.5,
                    -0.46875, -0.0625, 1.640625, -0.625, 0.78125, 0.0, 1.125, 0.0, -1.265625, 0.0, -1.265625, 0.0,
                    1.40625, 0.0, 0.625, -0.5, 1.171875, 0.0625, -0.9375, 0.625, -1.5625, 0.0, -0.625, 0.25, 0.46875,
                    -0.3125, -1.015625, 0.5625, -0.703125, 0.0, 0.5625, 0.0, -1.265625, 0.0, 1.96875, 0.0, -1.265625,
                    0.0, 0.3125, -0.25, 0.234375, 0.3125, -0.078125, -0.5625, 1.40625, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                    0.0, 0.0, 0.0,
                ],
            )],
        );
        // output_shape with output_padding
        check(
            "ConvTranspose",
            &[Some((&[1, 1, 3, 3], 8)), Some((&[1, 2, 3, 3], 9))],
            &[
                ("strides", AttrValue::Ints(vec![3, 2])),
                ("output_shape", AttrValue::Ints(vec![10, 8])),
                ("output_padding", AttrValue::Ints(vec![1, 1])),
            ],
            &[(
                &[1, 2, 10, 8],
                &[
                    -0.34375, 1.203125, -1.109375, -0.328125, 0.140625, 0.65625, -0.65625, 0.0, 0.34375, 1.890625,
                    -0.609375, -0.515625, 0.328125, 1.03125, -0.28125, 0.0, 1.03125, -1.375, -0.109375, 0.375,
                    0.515625, -0.75, 0.09375, 0.0, 0.25, -0.875, 0.84375, 0.109375, -0.421875, 1.09375, -1.09375, 0.0,
                    -0.25, -1.375, 0.40625, 0.171875, 0.265625, 1.71875, -0.46875, 0.0, -0.75, 1.0, -0.03125, -0.125,
                    0.953125, -1.25, 0.15625, 0.0, 0.125, -0.4375, 0.28125, 0.546875, -0.265625, -0.984375, 0.984375,
                    0.0, -0.125, -0.6875, 0.34375, 0.859375, -0.515625, -1.546875, 0.421875, 0.0, -0.375, 0.5, 0.40625,
                    -0.625, -0.765625, 1.125, -0.140625, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.71875, -0.6875,
                    0.390625, 0.1875, 0.703125, -0.375, 0.46875, 0.0, -1.546875, 0.0, 1.96875, 0.0, -1.265625, 0.0,
                    0.84375, 0.0, -0.859375, 0.6875, -1.484375, -0.1875, 0.0, 0.375, -0.9375, 0.0, -1.25, 0.5,
                    -0.46875, -0.0625, 1.640625, -0.625, 0.78125, 0.0, 1.125, 0.0, -1.265625, 0.0, -1.265625, 0.0,
                    1.40625, 0.0, 0.625, -0.5, 1.171875, 0.0625, -0.9375, 0.625, -1.5625, 0.0, -0.625, 0.25, 0.46875,
                    -0.3125, -1.015625, 0.5625, -0.703125, 0.0, 0.5625, 0.0, -1.265625, 0.0, 1.96875, 0.0, -1.265625,
                    0.0, 0.3125, -0.25, 0.234375, 0.3125, -0.078125, -0.5625, 1.40625, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                    0.0, 0.0, 0.0,
                ],
            )],
        );
        // dilations
        check(
            "ConvTranspose",
            &[Some((&[1, 1, 3, 3], 10)), Some((&[1, 1, 2, 2], 11))],
            &[("dilations", AttrValue::Ints(vec![2, 2]))],
            &[(
                &[1, 1, 5, 5],
                &[
                    -0.625, 0.46875, 0.265625, -0.375, 0.1875, 0.859375, 0.15625, -1.234375, -0.125, 0.4375, -0.703125,
                    0.78125, -1.890625, 0.21875, 0.640625, 1.71875, 0.3125, -0.921875, 0.03125, -0.109375, 1.09375,
                    -0.3125, -1.609375, -0.03125, -0.171875,
                ],
            )],
        );
        // auto_pad SAME_UPPER
        check(
            "ConvTranspose",
            &[Some((&[1, 1, 3, 3], 12)), Some((&[1, 2, 3, 3], 13))],
            &[("auto_pad", AttrValue::Str("SAME_UPPER".into())), ("strides", AttrValue::Ints(vec![2, 2]))],
            &[(
                &[1, 2, 6, 6],
                &[
                    -0.625, 0.078125, 1.90625, -0.140625, -1.40625, 0.0, -0.3125, 0.390625, -0.140625, -0.703125,
                    1.265625, 0.0, -1.125, 0.84375, 1.640625, -1.34375, -0.578125, 0.0625, -0.5625, 0.703125,
                    -0.953125, -0.390625, 0.453125, 0.3125, 1.25, 1.109375, -2.140625, -0.71875, -0.765625, 0.6875,
                    0.625, -0.78125, 1.46875, -0.078125, -0.359375, 0.625, 0.3125, -0.78125, -0.640625, 1.40625,
                    0.140625, 0.0, 0.625, -0.46875, -0.890625, 0.84375, -0.421875, 0.0, -0.296875, -1.5625, 1.640625,
                    1.0625, -0.65625, -0.625, 1.125, -0.84375, -0.203125, 0.46875, 0.265625, -0.375, -2.171875,
                    1.28125, 1.9375, 0.3125, -0.71875, -1.375, -1.25, 0.9375, -0.59375, 0.09375, 0.953125, -0.75,
                ],
            )],
        );
        // auto_pad SAME_LOWER
        check(
            "ConvTranspose",
            &[Some((&[1, 1, 3, 3], 12)), Some((&[1, 2, 3, 3], 13))],
            &[("auto_pad", AttrValue::Str("SAME_LOWER".into())), ("strides", AttrValue::Ints(vec![2, 2]))],
            &[(
                &[1, 2, 6, 6],
                &[
                    0.390625, -0.140625, -0.703125, 1.265625, 0.0, 0.0, 0.84375, 1.640625, -1.34375, -0.578125, 0.0625,
                    0.625, 0.703125, -0.953125, -0.390625, 0.453125, 0.3125, -0.5625, 1.109375, -2.140625, -0.71875,
                    -0.765625, 0.6875, 0.9375, -0.78125, 1.46875, -0.078125, -0.359375, 0.625, -1.125, -1.40625,
                    0.78125, -0.140625, 0.078125, 1.125, -0.625, -0.46875, -0.890625, 0.84375, -0.421875, 0.0, 0.0,
                    -1.5625, 1.640625, 1.0625, -0.65625, -0.625, -0.0625, -0.84375, -0.203125, 0.46875, 0.265625,
                    -0.375, 0.1875, 1.28125, 1.9375, 0.3125, -0.71875, -1.375, 0.3125, 0.9375, -0.59375, 0.09375,
                    0.953125, -0.75, 0.375, 0.3125, -0.921875, 0.03125, -1.484375, -0.25, 0.875,
                ],
            )],
        );
        // 1-D
        check(
            "ConvTranspose",
            &[Some((&[1, 2, 5], 14)), Some((&[2, 3, 3], 15))],
            &[("strides", AttrValue::Ints(vec![2])), ("pads", AttrValue::Ints(vec![1, 0]))],
            &[(
                &[1, 3, 10],
                &[
                    0.09375, -1.578125, 1.21875, 1.03125, -0.53125, -1.03125, 0.59375, 1.578125, -1.15625, -0.3125,
                    -0.078125, -0.078125, -1.0625, 1.90625, 0.46875, -0.78125, -0.515625, 1.203125, 1.015625, -1.375,
                    0.109375, 0.703125, 0.25, -1.171875, 0.03125, 0.546875, 0.171875, -1.328125, -0.046875, 0.4375,
                ],
            )],
        );
        // 3-D
        check(
            "ConvTranspose",
            &[Some((&[1, 1, 2, 3, 2], 16)), Some((&[1, 2, 2, 2, 2], 17))],
            &[("strides", AttrValue::Ints(vec![2, 1, 2]))],
            &[(
                &[1, 2, 4, 4, 4],
                &[
                    -0.140625, 0.078125, 1.125, -0.625, -0.90625, 0.625, 0.921875, -1.484375, -1.921875, 1.796875,
                    -0.09375, -0.3125, -0.6875, 1.71875, -0.125, 0.3125, 0.015625, -0.125, -0.125, 1.0, 0.1875,
                    -0.796875, -0.796875, 0.75, 0.734375, -1.65625, -0.25, -0.109375, 1.03125, -0.515625, 0.1875,
                    -0.09375, 0.984375, -0.546875, -0.984375, 0.546875, 0.71875, -1.25, 1.109375, 0.234375, -0.296875,
                    -0.078125, 1.53125, -2.1875, -0.1875, 0.46875, 0.375, -0.9375, -0.109375, 0.875, 0.109375, -0.875,
                    -0.6875, 0.578125, 0.484375, 1.046875, -0.140625, -0.28125, -1.125, 1.265625, 0.28125, -0.140625,
                    -0.5625, 0.28125, 0.171875, 0.03125, -1.375, -0.25, 0.921875, 0.296875, 0.359375, -0.96875,
                    1.234375, 1.0, 0.671875, -0.265625, -1.203125, 1.203125, -0.21875, 0.21875, -0.03125, -0.171875,
                    0.25, 1.375, -0.140625, -1.125, -0.28125, 1.265625, -0.0625, -2.453125, -0.203125, -0.0625,
                    0.515625, -1.03125, 0.09375, -0.1875, -1.203125, -0.21875, 1.203125, 0.21875, 0.421875, -0.828125,
                    -2.65625, 0.421875, 0.734375, -0.125, 0.171875, -1.390625, -0.328125, 0.328125, 0.65625, -0.65625,
                    0.21875, 1.203125, -0.21875, -1.203125, -0.265625, 1.0, 0.671875, 1.234375, -0.1875, -0.328125,
                    -0.328125, 2.0625, 0.140625, -0.28125, -0.28125, 0.5625,
                ],
            )],
        );
        // SAME_UPPER with negative total padding
        check(
            "ConvTranspose",
            &[Some((&[1, 1, 3], 21)), Some((&[1, 1, 1], 22))],
            &[("strides", AttrValue::Ints(vec![2])), ("auto_pad", AttrValue::Str("SAME_UPPER".into()))],
            &[(&[1, 1, 6], &[0.0, -0.46875, 0.0, 1.71875, 0.0, 0.3125])],
        );
        // SAME_LOWER with negative total padding
        check(
            "ConvTranspose",
            &[Some((&[1, 1, 3], 21)), Some((&[1, 1, 1], 22))],
            &[("strides", AttrValue::Ints(vec![2])), ("auto_pad", AttrValue::Str("SAME_LOWER".into()))],
            &[(&[1, 1, 6], &[-0.46875, 0.0, 1.71875, 0.0, 0.3125, 0.0])],
        );
        // batch 2
        check(
            "ConvTranspose",
            &[Some((&[2, 2, 2, 3], 18)), Some((&[2, 2, 2, 2], 19)), Some((&[2], 20))],
            &[("strides", AttrValue::Ints(vec![2, 1])), ("pads", AttrValue::Ints(vec![0, 1, 1, 0]))],
            &[(
                &[2, 2, 3, 3],
                &[
                    0.125, 0.046875, 2.078125, -0.921875, 3.015625, -0.375, 0.25, 0.171875, 1.265625, -0.21875,
                    -0.53125, -1.078125, 0.171875, 0.640625, -0.296875, 0.28125, -0.03125, -0.265625, 3.140625, 0.1875,
                    0.625, -0.03125, -0.765625, 3.21875, 3.265625, 0.3125, -0.1875, -1.453125, 0.03125, -0.703125,
                    -0.671875, -0.203125, -0.625, -0.953125, 0.53125, 0.109375,
                ],
            )],
        );
    }

    #[test]
    fn grouped_conv_transpose_matches_naive() {
        // naive check, group 1
        check(
            "ConvTranspose",
            &[Some((&[1, 2, 3, 3], 1)), Some((&[2, 2, 3, 3], 2)), Some((&[2], 3))],
            &[
                ("strides", AttrValue::Ints(vec![2, 2])),
                ("pads", AttrValue::Ints(vec![1, 0, 0, 1])),
                ("output_padding", AttrValue::Ints(vec![1, 0])),
            ],
            &[(
                &[1, 2, 7, 6],
                &[
                    -0.75, 0.515625, -1.265625, -0.125, -1.109375, -1.125, 0.140625, -2.671875, 0.6875, -2.515625,
                    -0.078125, -0.203125, -0.921875, -1.765625, -0.796875, -2.765625, -0.28125, 0.1875, -1.28125,
                    0.3125, -1.96875, 0.109375, 0.140625, -2.609375, -0.734375, -0.453125, -1.046875, -1.453125,
                    -0.890625, -2.09375, -0.609375, -1.046875, -1.109375, -0.5625, -1.578125, 0.28125, -0.875, -0.875,
                    -0.875, -0.875, -0.875, -0.875, -0.546875, 0.71875, 1.484375, 0.9375, 1.5625, 0.796875, -0.78125,
                    1.796875, -2.984375, 1.875, 0.40625, 0.15625, 1.859375, 1.015625, 1.71875, 0.875, -1.796875,
                    0.734375, 1.875, 0.59375, 2.515625, 0.3125, 0.515625, 1.828125, 0.671875, 0.953125, 1.59375,
                    0.8125, 1.671875, 1.03125, 0.796875, 1.078125, 0.8125, 0.625, 2.0625, 0.53125, 0.875, 0.875, 0.875,
                    0.875, 0.875, 0.875,
                ],
            )],
        );
        // group 2 with bias
        check(
            "ConvTranspose",
            &[Some((&[1, 4, 3, 3], 4)), Some((&[4, 3, 2, 2], 5)), Some((&[6], 6))],
            &[("group", AttrValue::Int(2)), ("strides", AttrValue::Ints(vec![2, 2]))],
            &[(
                &[1, 6, 6, 6],
                &[
                    0.46875, 2.625, 1.6875, -0.09375, 0.390625, 2.9375, 0.46875, 0.46875, 2.078125, 1.375, 1.171875,
                    -0.234375, 0.53125, 2.375, 1.75, -0.34375, 0.453125, 2.6875, -0.09375, 1.03125, 1.515625, 1.9375,
                    0.609375, 0.328125, 1.671875, -0.03125, 1.8125, -0.59375, 0.515625, 2.4375, 2.21875, 1.234375,
                    0.953125, 2.5, 0.046875, 0.890625, 1.5, -0.65625, -1.53125, 0.640625, 1.1875, -0.578125, 1.5,
                    -0.65625, -1.140625, 1.03125, 1.96875, 0.203125, 1.75, -0.71875, -1.28125, 0.578125, 1.4375,
                    -0.640625, 1.125, -1.34375, -1.515625, 0.34375, 1.59375, -0.484375, -1.59375, 0.65625, -1.03125,
                    0.515625, 1.6875, -0.703125, -1.046875, 1.203125, -1.890625, -0.34375, 1.21875, -1.171875,
                    -1.78125, 0.375, -0.796875, -2.578125, -2.328125, 0.21875, -1.78125, -1.78125, -0.40625, -1.109375,
                    -1.546875, -2.953125, -1.34375, 0.5, -0.359375, -2.453125, -1.890625, 0.34375, -1.96875, -0.84375,
                    -0.59375, -0.171875, -1.734375, -2.015625, -0.90625, -2.609375, 0.078125, -2.328125, -1.453125,
                    0.46875, -0.359375, -1.34375, -0.78125, 0.765625, -1.921875, -1.078125, 2.0625, -0.171875,
                    -0.65625, 1.4375, 2.375, 0.53125, 0.109375, 2.1875, 1.015625, -0.84375, -0.59375, 1.875, 1.8125,
                    -0.734375, -0.90625, 0.875, 2.125, -0.03125, 0.671875, 2.4375, 1.578125, -0.59375, -0.03125, 2.125,
                    -0.59375, 1.578125, 2.4375, 0.671875, 1.875, -0.59375, 0.875, -0.90625, -0.734375, 1.8125, 0.53125,
                    2.375, -1.171875, 0.90625, 0.125, -1.734375, -1.09375, 1.375, -1.328125, -1.046875, 0.359375,
                    -0.0625, -0.46875, -1.59375, -1.234375, 0.53125, 0.0625, -2.109375, -1.15625, 1.0, -2.015625,
                    -0.609375, -0.328125, 0.375, -1.15625, -1.15625, 0.140625, -1.640625, -1.078125, 1.46875, -1.21875,
                    0.625, 0.53125, -0.171875, -0.296875, -1.703125, -1.84375, -0.71875, 2.78125, 0.546875, -0.171875,
                    1.921875, 2.625, 0.78125, 0.828125, 0.390625, 1.5, 2.15625, -0.34375, 1.40625, 2.90625, 0.359375,
                    -0.046875, 1.734375, 2.75, 0.59375, 1.765625, -0.421875, 2.4375, 1.34375, 0.59375, 0.59375,
                    -0.203125, 1.96875, 2.59375, 0.828125, 2.875, 0.40625, 1.265625, 2.359375, -0.578125, 1.609375,
                    1.53125, -0.21875,
                ],
            )],
        );
        // depthwise-style group 3, batch 2
        check(
            "ConvTranspose",
            &[Some((&[2, 3, 4], 7)), Some((&[3, 1, 3], 8))],
            &[
                ("group", AttrValue::Int(3)),
                ("strides", AttrValue::Ints(vec![2])),
                ("pads", AttrValue::Ints(vec![1, 1])),
                ("dilations", AttrValue::Ints(vec![2])),
            ],
            &[(
                &[2, 3, 9],
                &[
                    0.0, 1.671875, 0.0, -1.0625, 0.0, 1.984375, 0.0, -0.609375, 0.0, 0.0, -0.140625, 0.0, -2.53125,
                    0.0, 0.765625, 0.0, 1.328125, 0.0, 0.0, 0.9375, 0.0, -1.28125, 0.0, 0.828125, 0.0, 0.765625, 0.0,
                    0.0, 0.796875, 0.0, -2.59375, 0.0, 0.453125, 0.0, -0.9375, 0.0, 0.0, 0.984375, 0.0, 0.734375, 0.0,
                    -2.4375, 0.0, 0.484375, 0.0, 0.0, -0.609375, 0.0, 1.390625, 0.0, -1.53125, 0.0, 1.203125, 0.0,
                ],
            )],
        );
        // output_shape larger than natural (negative pads)
        check(
            "ConvTranspose",
            &[Some((&[1, 1, 3, 3], 9)), Some((&[1, 1, 2, 2], 10))],
            &[("strides", AttrValue::Ints(vec![2, 2])), ("output_shape", AttrValue::Ints(vec![8, 9]))],
            &[(
                &[1, 1, 8, 9],
                &[
                    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.25, 0.1875, 0.875, -0.65625, -0.875, 0.65625,
                    0.0, 0.0, 0.0, -0.09375, 0.34375, 0.328125, -1.203125, -0.328125, 1.203125, 0.0, 0.0, 0.0, 0.25,
                    -0.1875, 1.375, -1.03125, -0.375, 0.28125, 0.0, 0.0, 0.0, 0.09375, -0.34375, 0.515625, -1.890625,
                    -0.140625, 0.515625, 0.0, 0.0, 0.0, 0.75, -0.5625, -1.0, 0.75, 0.125, -0.09375, 0.0, 0.0, 0.0,
                    0.28125, -1.03125, -0.375, 1.375, 0.046875, -0.171875, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                    0.0, 0.0,
                ],
            )],
        );
        // output_shape SAME_UPPER
        check(
            "ConvTranspose",
            &[Some((&[1, 1, 3, 3], 9)), Some((&[1, 1, 2, 2], 10))],
            &[
                ("strides", AttrValue::Ints(vec![2, 2])),
                ("output_shape", AttrValue::Ints(vec![7, 8])),
                ("auto_pad", AttrValue::Str("SAME_UPPER".into())),
            ],
            &[(
                &[1, 1, 7, 8],
                &[
                    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.25, 0.1875, 0.875, -0.65625, -0.875, 0.65625, 0.0,
                    0.0, -0.09375, 0.34375, 0.328125, -1.203125, -0.328125, 1.203125, 0.0, 0.0, 0.25, -0.1875, 1.375,
                    -1.03125, -0.375, 0.28125, 0.0, 0.0, 0.09375, -0.34375, 0.515625, -1.890625, -0.140625, 0.515625,
                    0.0, 0.0, 0.75, -0.5625, -1.0, 0.75, 0.125, -0.09375, 0.0, 0.0, 0.28125, -1.03125, -0.375, 1.375,
                    0.046875, -0.171875, 0.0,
                ],
            )],
        );
    }

    #[test]
    fn max_pool_matches_reference() {
        // 2-D, kernel 2
        check(
            "MaxPool",
            &[Some((&[1, 1, 4, 4], 1))],
            &[("kernel_shape", AttrValue::Ints(vec![2, 2]))],
            &[
                (&[1, 1, 3, 3], &[0.5, 0.625, 1.125, 1.25, 0.625, 0.75, 1.375, 1.375, 0.75]),
                (&[1, 1, 3, 3], &[1.0, 6.0, 3.0, 8.0, 6.0, 11.0, 13.0, 13.0, 11.0]),
            ],
        );
        // kernel 3, strides 2, pads 1
        check(
            "MaxPool",
            &[Some((&[1, 1, 5, 5], 2))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![3, 3])),
                ("strides", AttrValue::Ints(vec![2, 2])),
                ("pads", AttrValue::Ints(vec![1, 1, 1, 1])),
            ],
            &[
                (&[1, 1, 3, 3], &[0.5, 1.125, 0.0, 0.75, 1.375, 0.25, 0.875, 1.375, 0.375]),
                (&[1, 1, 3, 3], &[5.0, 7.0, 8.0, 15.0, 17.0, 18.0, 20.0, 17.0, 23.0]),
            ],
        );
        // ceil_mode
        check(
            "MaxPool",
            &[Some((&[1, 1, 5, 5], 3))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![2, 2])),
                ("strides", AttrValue::Ints(vec![2, 2])),
                ("ceil_mode", AttrValue::Int(1)),
            ],
            &[
                (&[1, 1, 3, 3], &[1.0, -0.125, 0.5, 1.25, 0.125, 0.75, 1.375, 0.25, 0.875]),
                (&[1, 1, 3, 3], &[6.0, 7.0, 9.0, 16.0, 17.0, 19.0, 21.0, 22.0, 24.0]),
            ],
        );
        // ceil_mode drops a window starting in the end padding
        check(
            "MaxPool",
            &[Some((&[1, 1, 5, 5], 4))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![2, 2])),
                ("strides", AttrValue::Ints(vec![2, 2])),
                ("pads", AttrValue::Ints(vec![1, 1, 1, 1])),
                ("ceil_mode", AttrValue::Int(1)),
            ],
            &[
                (&[1, 1, 3, 3], &[0.75, 1.375, 0.25, 1.0, -0.125, 0.5, 1.25, 0.125, 0.75]),
                (&[1, 1, 3, 3], &[0.0, 2.0, 3.0, 10.0, 11.0, 13.0, 20.0, 21.0, 23.0]),
            ],
        );
        // dilations
        check(
            "MaxPool",
            &[Some((&[1, 1, 5, 5], 5))],
            &[("kernel_shape", AttrValue::Ints(vec![2, 2])), ("dilations", AttrValue::Ints(vec![2, 2]))],
            &[
                (&[1, 1, 3, 3], &[0.375, 1.25, 1.0, 0.5, 1.375, 1.125, 0.625, -0.5, 1.25]),
                (&[1, 1, 3, 3], &[12.0, 1.0, 14.0, 17.0, 6.0, 19.0, 22.0, 23.0, 24.0]),
            ],
        );
        // dilations, strides, ceil_mode
        check(
            "MaxPool",
            &[Some((&[1, 1, 6, 7], 6))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![2, 3])),
                ("dilations", AttrValue::Ints(vec![2, 1])),
                ("strides", AttrValue::Ints(vec![2, 2])),
                ("ceil_mode", AttrValue::Int(1)),
            ],
            &[
                (&[1, 1, 3, 3], &[1.125, 1.0, 1.25, 1.25, 1.0, 1.375, 1.25, 0.75, 1.375]),
                (&[1, 1, 3, 3], &[0.0, 18.0, 5.0, 28.0, 18.0, 33.0, 28.0, 31.0, 33.0]),
            ],
        );
        // 1-D
        check(
            "MaxPool",
            &[Some((&[1, 2, 9], 7))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![3])),
                ("strides", AttrValue::Ints(vec![2])),
                ("pads", AttrValue::Ints(vec![1, 1])),
            ],
            &[
                (&[1, 2, 5], &[-0.125, 0.5, 1.125, 0.625, 0.625, 1.25, 0.75, 1.375, 1.375, 0.875]),
                (&[1, 2, 5], &[0.0, 2.0, 4.0, 7.0, 7.0, 9.0, 12.0, 14.0, 14.0, 17.0]),
            ],
        );
        // 3-D
        check(
            "MaxPool",
            &[Some((&[1, 1, 4, 4, 4], 8))],
            &[("kernel_shape", AttrValue::Ints(vec![2, 2, 2])), ("strides", AttrValue::Ints(vec![2, 2, 2]))],
            &[
                (&[1, 1, 2, 2, 2], &[0.875, 1.375, 1.25, 1.125, 1.25, 1.125, 1.375, 1.25]),
                (&[1, 1, 2, 2, 2], &[21.0, 18.0, 13.0, 31.0, 36.0, 54.0, 41.0, 59.0]),
            ],
        );
        // 3-D, asymmetric
        check(
            "MaxPool",
            &[Some((&[1, 2, 3, 4, 5], 9))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![2, 3, 2])),
                ("strides", AttrValue::Ints(vec![1, 2, 2])),
                ("pads", AttrValue::Ints(vec![0, 1, 1, 1, 0, 0])),
            ],
            &[
                (
                    &[1, 2, 3, 2, 3],
                    &[
                        0.875, 1.375, 0.375, 1.125, 1.25, 0.625, 1.375, 1.375, 0.875, 1.375, 0.5, 1.125, 1.375, 0.25,
                        0.875, 1.375, 0.5, 1.125, -0.5, 1.25, 1.375, -0.25, 1.375, 1.375, 0.0, 1.25, 1.25, 0.25, 1.375,
                        1.375, 0.0, 0.625, 1.25, 0.25, 0.875, 1.375,
                    ],
                ),
                (
                    &[1, 2, 3, 2, 3],
                    &[
                        25.0, 22.0, 28.0, 35.0, 17.0, 38.0, 45.0, 22.0, 48.0, 45.0, 56.0, 58.0, 45.0, 46.0, 48.0, 45.0,
                        56.0, 58.0, 85.0, 86.0, 68.0, 95.0, 91.0, 68.0, 105.0, 86.0, 109.0, 115.0, 91.0, 114.0, 105.0,
                        107.0, 109.0, 115.0, 117.0, 114.0,
                    ],
                ),
            ],
        );
        // auto_pad SAME_UPPER
        check(
            "MaxPool",
            &[Some((&[1, 1, 5, 5], 10))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![3, 3])),
                ("strides", AttrValue::Ints(vec![2, 2])),
                ("auto_pad", AttrValue::Str("SAME_UPPER".into())),
            ],
            &[
                (&[1, 1, 3, 3], &[0.875, 1.375, 1.375, 1.125, 1.125, 0.625, 1.25, 1.25, 0.75]),
                (&[1, 1, 3, 3], &[6.0, 3.0, 3.0, 16.0, 16.0, 19.0, 21.0, 21.0, 24.0]),
            ],
        );
        // auto_pad SAME_LOWER
        check(
            "MaxPool",
            &[Some((&[1, 1, 5, 5], 11))],
            &[("kernel_shape", AttrValue::Ints(vec![2, 2])), ("auto_pad", AttrValue::Str("SAME_LOWER".into()))],
            &[
                (
                    &[1, 1, 5, 5],
                    &[
                        0.625, 0.625, 1.25, 1.25, 0.125, 0.75, 0.75, 1.375, 1.375, 0.25, 0.875, 0.875, 1.375, 1.375,
                        0.375, 1.0, 1.0, -0.125, 0.5, 0.5, 1.125, 1.125, 0.0, 0.625, 0.625,
                    ],
                ),
                (
                    &[1, 1, 5, 5],
                    &[
                        0.0, 0.0, 2.0, 2.0, 3.0, 5.0, 5.0, 7.0, 7.0, 8.0, 10.0, 10.0, 7.0, 7.0, 13.0, 15.0, 15.0, 16.0,
                        18.0, 18.0, 20.0, 20.0, 21.0, 23.0, 23.0,
                    ],
                ),
            ],
        );
        // auto_pad VALID
        check(
            "MaxPool",
            &[Some((&[1, 1, 5, 6], 12))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![2, 2])),
                ("strides", AttrValue::Ints(vec![2, 2])),
                ("auto_pad", AttrValue::Str("VALID".into())),
            ],
            &[
                (&[1, 1, 2, 3], &[1.25, 0.75, 1.375, 1.0, 0.875, 0.5]),
                (&[1, 1, 2, 3], &[6.0, 9.0, 11.0, 19.0, 14.0, 22.0]),
            ],
        );
        // batch and channels (Indices are flat over the whole tensor)
        check(
            "MaxPool",
            &[Some((&[2, 2, 4, 4], 13))],
            &[("kernel_shape", AttrValue::Ints(vec![2, 2])), ("strides", AttrValue::Ints(vec![2, 2]))],
            &[
                (
                    &[2, 2, 2, 2],
                    &[
                        1.125, 0.5, 0.75, 1.375, 0.375, 1.0, 1.125, 0.625, 1.25, 1.375, 0.875, 1.0, 0.5, 1.125, 1.375,
                        0.75,
                    ],
                ),
                (
                    &[2, 2, 2, 2],
                    &[5.0, 3.0, 13.0, 15.0, 21.0, 23.0, 28.0, 31.0, 33.0, 38.0, 41.0, 46.0, 49.0, 51.0, 61.0, 59.0],
                ),
            ],
        );
    }

    #[test]
    fn average_pool_matches_reference() {
        // 2-D kernel 3
        check(
            "AveragePool",
            &[Some((&[1, 1, 5, 5], 1))],
            &[("kernel_shape", AttrValue::Ints(vec![3, 3]))],
            &[(
                &[1, 1, 3, 3],
                &[
                    -0.33333334,
                    0.45833334,
                    0.29166666,
                    -0.20833333,
                    0.2638889,
                    0.097222224,
                    -0.083333336,
                    0.06944445,
                    -0.097222224,
                ],
            )],
        );
        // pads, count_include_pad 0
        check(
            "AveragePool",
            &[Some((&[1, 1, 5, 5], 2))],
            &[("kernel_shape", AttrValue::Ints(vec![3, 3])), ("pads", AttrValue::Ints(vec![1, 1, 1, 1]))],
            &[(
                &[1, 1, 5, 5],
                &[
                    -0.125,
                    0.27083334,
                    0.104166664,
                    -0.0625,
                    -0.625,
                    -0.0625,
                    0.33333334,
                    0.16666667,
                    0.0,
                    -0.5625,
                    0.0625,
                    0.45833334,
                    0.29166666,
                    0.125,
                    -0.4375,
                    0.1875,
                    0.2638889,
                    0.097222224,
                    -0.06944445,
                    -0.3125,
                    0.25,
                    0.16666667,
                    0.0,
                    -0.16666667,
                    -0.25,
                ],
            )],
        );
        // pads, count_include_pad 1
        check(
            "AveragePool",
            &[Some((&[1, 1, 5, 5], 2))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![3, 3])),
                ("pads", AttrValue::Ints(vec![1, 1, 1, 1])),
                ("count_include_pad", AttrValue::Int(1)),
            ],
            &[(
                &[1, 1, 5, 5],
                &[
                    -0.055555556,
                    0.18055555,
                    0.06944445,
                    -0.041666668,
                    -0.2777778,
                    -0.041666668,
                    0.33333334,
                    0.16666667,
                    0.0,
                    -0.375,
                    0.041666668,
                    0.45833334,
                    0.29166666,
                    0.125,
                    -0.29166666,
                    0.125,
                    0.2638889,
                    0.097222224,
                    -0.06944445,
                    -0.20833333,
                    0.11111111,
                    0.11111111,
                    0.0,
                    -0.11111111,
                    -0.11111111,
                ],
            )],
        );
        // ceil_mode, exclude pad
        check(
            "AveragePool",
            &[Some((&[1, 1, 5, 5], 3))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![2, 2])),
                ("strides", AttrValue::Ints(vec![2, 2])),
                ("ceil_mode", AttrValue::Int(1)),
            ],
            &[(&[1, 1, 3, 3], &[0.0625, -0.75, 0.4375, 0.3125, -0.5, 0.6875, 0.5, -0.3125, 0.875])],
        );
        // ceil_mode, include pad
        check(
            "AveragePool",
            &[Some((&[1, 1, 6, 6], 4))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![3, 3])),
                ("strides", AttrValue::Ints(vec![2, 2])),
                ("pads", AttrValue::Ints(vec![1, 1, 1, 1])),
                ("ceil_mode", AttrValue::Int(1)),
                ("count_include_pad", AttrValue::Int(1)),
            ],
            &[(
                &[1, 1, 4, 4],
                &[
                    -0.1388889,
                    -0.055555556,
                    0.041666668,
                    0.125,
                    -0.25,
                    0.013888889,
                    0.0,
                    -0.083333336,
                    0.013888889,
                    0.25,
                    -0.083333336,
                    -0.125,
                    -0.16666667,
                    0.104166664,
                    -0.0625,
                    -0.3125,
                ],
            )],
        );
        // ceil_mode, include pad, exclude pad
        check(
            "AveragePool",
            &[Some((&[1, 1, 6, 6], 4))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![3, 3])),
                ("strides", AttrValue::Ints(vec![2, 2])),
                ("pads", AttrValue::Ints(vec![1, 1, 1, 1])),
                ("ceil_mode", AttrValue::Int(1)),
            ],
            &[(
                &[1, 1, 4, 4],
                &[
                    -0.3125,
                    -0.083333336,
                    0.0625,
                    0.375,
                    -0.375,
                    0.013888889,
                    0.0,
                    -0.16666667,
                    0.020833334,
                    0.25,
                    -0.083333336,
                    -0.25,
                    -0.5,
                    0.20833333,
                    -0.125,
                    -1.25,
                ],
            )],
        );
        // strides and dilations
        check(
            "AveragePool",
            &[Some((&[1, 2, 7, 6], 5))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![2, 2])),
                ("strides", AttrValue::Ints(vec![2, 1])),
                ("dilations", AttrValue::Ints(vec![2, 2])),
                ("pads", AttrValue::Ints(vec![1, 0, 1, 1])),
            ],
            &[(
                &[1, 2, 4, 5],
                &[
                    0.25, 0.5625, -0.5625, -0.25, -0.25, -0.03125, 0.28125, -0.125, -0.53125, 0.1875, 0.125, -0.28125,
                    0.03125, -0.375, -0.375, 0.5625, -0.5625, -0.25, 0.0625, -1.375, 0.4375, -0.6875, 1.0625, -0.0625,
                    1.375, 0.15625, -0.25, 0.0625, 0.375, 0.375, -0.40625, 0.625, -0.5, 0.53125, -0.1875, -0.6875,
                    1.0625, -0.0625, 0.25, 0.25,
                ],
            )],
        );
        // 1-D
        check(
            "AveragePool",
            &[Some((&[2, 1, 8], 6))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![3])),
                ("strides", AttrValue::Ints(vec![2])),
                ("pads", AttrValue::Ints(vec![1, 1])),
                ("count_include_pad", AttrValue::Int(1)),
            ],
            &[(&[2, 1, 4], &[0.375, -0.16666667, 0.45833334, 0.125, 0.125, 0.41666666, 0.083333336, -0.25])],
        );
        // 3-D
        check(
            "AveragePool",
            &[Some((&[1, 1, 4, 4, 3], 7))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![2, 2, 2])),
                ("strides", AttrValue::Ints(vec![2, 2, 1])),
                ("pads", AttrValue::Ints(vec![1, 0, 0, 0, 1, 1])),
            ],
            &[(
                &[1, 1, 2, 2, 3],
                &[
                    -0.21875, 0.09375, 0.25, 0.21875, -0.1875, -0.75, 0.015625, -0.03125, 0.125, -0.265625, 0.046875,
                    0.5625,
                ],
            )],
        );
        // SAME_UPPER exclude pad
        check(
            "AveragePool",
            &[Some((&[1, 1, 5, 5], 8))],
            &[("kernel_shape", AttrValue::Ints(vec![2, 2])), ("auto_pad", AttrValue::Str("SAME_UPPER".into()))],
            &[(
                &[1, 1, 5, 5],
                &[
                    -0.4375, -0.125, 0.1875, 0.5, -0.0625, -0.3125, 0.0, 0.3125, 0.625, 0.0625, -0.1875, 0.125, 0.4375,
                    0.75, 0.1875, -0.0625, 0.25, -0.15625, 0.15625, 0.3125, 0.0, 0.3125, -0.8125, -0.5, 0.375,
                ],
            )],
        );
        // SAME_LOWER include pad
        check(
            "AveragePool",
            &[Some((&[1, 1, 5, 5], 8))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![3, 3])),
                ("strides", AttrValue::Ints(vec![2, 2])),
                ("auto_pad", AttrValue::Str("SAME_LOWER".into())),
                ("count_include_pad", AttrValue::Int(1)),
            ],
            &[(
                &[1, 1, 3, 3],
                &[
                    -0.19444445,
                    0.18055555,
                    0.22222222,
                    -0.16666667,
                    0.45833334,
                    0.45833334,
                    -0.027777778,
                    0.11111111,
                    0.06944445,
                ],
            )],
        );
        // VALID
        check(
            "AveragePool",
            &[Some((&[1, 1, 5, 5], 9))],
            &[
                ("kernel_shape", AttrValue::Ints(vec![3, 2])),
                ("strides", AttrValue::Ints(vec![2, 2])),
                ("auto_pad", AttrValue::Str("VALID".into())),
            ],
            &[(&[1, 1, 2, 2], &[-0.1875, 0.4375, 0.0625, 0.6875])],
        );
    }

    #[test]
    fn global_pools_match_reference() {
        // GlobalAveragePool 2-D
        check(
            "GlobalAveragePool",
            &[Some((&[2, 3, 4, 5], 1))],
            &[],
            &[(&[2, 3, 1, 1], &[-0.00625, 0.0625, -0.0125, -0.0875, -0.01875, 0.05])],
        );
        // GlobalAveragePool 1-D
        check(
            "GlobalAveragePool",
            &[Some((&[2, 2, 7], 2))],
            &[],
            &[(&[2, 2, 1], &[-0.125, 0.21428572, 0.14285715, -0.3392857])],
        );
        // GlobalAveragePool 3-D
        check(
            "GlobalAveragePool",
            &[Some((&[1, 2, 2, 3, 2], 3))],
            &[],
            &[(&[1, 2, 1, 1, 1], &[-0.114583336, 0.041666668])],
        );
        // GlobalMaxPool 2-D
        check(
            "GlobalMaxPool",
            &[Some((&[2, 3, 4, 5], 4))],
            &[],
            &[(&[2, 3, 1, 1], &[1.375, 1.375, 1.375, 1.375, 1.375, 1.375])],
        );
        // GlobalMaxPool 3-D (numpy)
        check("GlobalMaxPool", &[Some((&[1, 2, 2, 3, 2], 5))], &[], &[(&[1, 2, 1, 1, 1], &[1.375, 1.125])]);
        // GlobalMaxPool 1-D (numpy)
        check("GlobalMaxPool", &[Some((&[2, 3, 5], 6))], &[], &[(&[2, 3, 1], &[1.125, 1.25, 1.375, 1.0, 1.125, 1.25])]);
        // GlobalAveragePool 2-D (numpy)
        check(
            "GlobalAveragePool",
            &[Some((&[2, 3, 4, 5], 1))],
            &[],
            &[(&[2, 3, 1, 1], &[-0.00625, 0.0625, -0.0125, -0.0875, -0.01875, 0.05])],
        );
    }

    #[test]
    fn gemm_matches_reference() {
        // plain with C
        check(
            "Gemm",
            &[Some((&[3, 4], 1)), Some((&[4, 5], 2)), Some((&[3, 5], 3))],
            &[],
            &[(
                &[3, 5],
                &[
                    -0.640625, 1.390625, -0.171875, -1.015625, 1.015625, -1.296875, 1.578125, -1.296875, -1.296875,
                    1.578125, -0.15625, 0.328125, 1.171875, -1.21875, -0.734375,
                ],
            )],
        );
        // transA, alpha, beta, row C
        check(
            "Gemm",
            &[Some((&[4, 3], 4)), Some((&[4, 5], 5)), Some((&[5], 6))],
            &[("transA", AttrValue::Int(1)), ("alpha", AttrValue::Float(0.5)), ("beta", AttrValue::Float(2.0))],
            &[(
                &[3, 5],
                &[
                    2.09375, 1.28125, -2.40625, 1.09375, -1.15625, 2.6171875, -0.515625, -2.390625, 2.0234375,
                    -1.6484375, 1.703125, 1.28125, -2.015625, 0.078125, 0.015625,
                ],
            )],
        );
        // transB, column C
        check(
            "Gemm",
            &[Some((&[3, 4], 7)), Some((&[5, 4], 8)), Some((&[3, 1], 9))],
            &[("transB", AttrValue::Int(1))],
            &[(
                &[3, 5],
                &[
                    -1.046875, 2.46875, -0.84375, -0.5625, 1.15625, -0.953125, -1.96875, 2.046875, -2.203125,
                    -1.421875, 0.9375, 0.0625, -0.453125, 3.703125, -0.046875,
                ],
            )],
        );
        // both transposed, scalar C
        check(
            "Gemm",
            &[Some((&[4, 3], 10)), Some((&[5, 4], 11)), Some((&[], 12))],
            &[("transA", AttrValue::Int(1)), ("transB", AttrValue::Int(1)), ("beta", AttrValue::Float(-1.5))],
            &[(
                &[3, 5],
                &[
                    0.765625, 3.15625, 0.15625, 2.546875, -0.453125, 0.875, -0.5625, 0.875, -0.5625, 0.875, -0.453125,
                    2.546875, 0.15625, 3.15625, 0.765625,
                ],
            )],
        );
        // [1] C
        check(
            "Gemm",
            &[Some((&[2, 3], 13)), Some((&[3, 2], 14)), Some((&[1], 15))],
            &[("alpha", AttrValue::Float(2.0))],
            &[(&[2, 2], &[-1.71875, -0.875, 2.90625, 0.65625])],
        );
        // no C
        check(
            "Gemm",
            &[Some((&[3, 6], 16)), Some((&[6, 2], 17))],
            &[],
            &[(&[3, 2], &[1.84375, -1.21875, 0.65625, 0.75, -2.6875, 2.359375])],
        );
        // [1, N] C, beta 0
        check(
            "Gemm",
            &[Some((&[5, 4], 18)), Some((&[4, 3], 19)), Some((&[1, 3], 20))],
            &[("beta", AttrValue::Float(0.0))],
            &[(
                &[5, 3],
                &[
                    1.671875, 0.1875, -0.9375, 0.28125, -1.4375, 1.875, 1.765625, -0.1875, -0.703125, -1.78125, 1.0625,
                    1.75, 1.859375, -0.5625, -0.46875,
                ],
            )],
        );
    }

    #[test]
    fn matmul_matches_reference() {
        // 2-D
        check(
            "MatMul",
            &[Some((&[3, 4], 1)), Some((&[4, 5], 2))],
            &[],
            &[(
                &[3, 5],
                &[
                    0.234375, 0.515625, 0.078125, 0.359375, 0.640625, -0.546875, 0.578125, -1.171875, -0.046875,
                    1.078125, 0.46875, -0.796875, 1.171875, -0.09375, -1.359375,
                ],
            )],
        );
        // 1-D x 2-D
        check(
            "MatMul",
            &[Some((&[4], 3)), Some((&[4, 5], 4))],
            &[],
            &[(&[5], &[-1.6875, 0.140625, -0.546875, -0.875, 0.953125])],
        );
        // 2-D x 1-D
        check("MatMul", &[Some((&[3, 4], 5)), Some((&[4], 6))], &[], &[(&[3], &[-1.328125, -0.546875, -1.5625])]);
        // 1-D x 1-D
        check("MatMul", &[Some((&[4], 7)), Some((&[4], 8))], &[], &[(&[], &[-1.296875])]);
        // batched
        check(
            "MatMul",
            &[Some((&[2, 3, 4], 9)), Some((&[2, 4, 5], 10))],
            &[],
            &[(
                &[2, 3, 5],
                &[
                    0.015625, 0.015625, 0.015625, 0.734375, 0.015625, 0.984375, -0.328125, 0.515625, -2.59375,
                    0.046875, 1.234375, -1.390625, 0.296875, 1.625, -0.640625, -0.359375, 2.171875, 0.03125, -0.671875,
                    0.421875, -0.125, 2.171875, -0.203125, -0.0625, -0.28125, -0.609375, -1.78125, 0.640625, -1.609375,
                    1.890625,
                ],
            )],
        );
        // broadcast batch
        check(
            "MatMul",
            &[Some((&[2, 1, 3, 4], 11)), Some((&[3, 4, 2], 12))],
            &[],
            &[(
                &[2, 3, 3, 2],
                &[
                    0.546875, 0.65625, 2.109375, -1.609375, 0.078125, 0.796875, -0.015625, -1.34375, 1.828125,
                    0.265625, 0.078125, -1.71875, -0.578125, -1.90625, 1.546875, -0.015625, 0.078125, -1.71875,
                    1.640625, -1.46875, -0.390625, 0.9375, -0.625, 1.90625, 1.921875, -0.109375, 0.171875, -2.09375,
                    -0.859375, 1.671875, 2.203125, 0.171875, 0.734375, -1.53125, -1.09375, 1.4375,
                ],
            )],
        );
        // shared B
        check(
            "MatMul",
            &[Some((&[2, 3, 4], 13)), Some((&[4, 5], 14))],
            &[],
            &[(
                &[2, 3, 5],
                &[
                    -0.171875, -0.3125, -0.09375, -0.234375, -0.015625, -0.125, 0.578125, -0.515625, 0.1875, -0.90625,
                    -0.078125, -1.765625, 0.859375, -0.828125, 1.796875, 0.328125, -0.515625, 0.796875, -0.046875,
                    1.265625, 0.015625, 0.015625, 0.015625, 0.015625, 0.015625, 0.421875, 1.265625, -0.046875,
                    0.796875, -0.515625,
                ],
            )],
        );
        // shared A
        check(
            "MatMul",
            &[Some((&[3, 4], 15)), Some((&[2, 4, 5], 16))],
            &[],
            &[(
                &[2, 3, 5],
                &[
                    0.34375, -1.484375, 1.359375, -0.46875, 1.65625, -0.609375, 1.640625, -1.859375, 0.390625,
                    1.921875, -0.125, -0.265625, -0.046875, -0.1875, 2.546875, 1.15625, -0.671875, 2.171875, 0.34375,
                    -1.484375, -1.609375, 0.640625, -1.78125, -0.609375, 1.640625, -0.0625, -0.203125, 2.171875,
                    -0.125, -0.265625,
                ],
            )],
        );
        // 1-D x batched
        check(
            "MatMul",
            &[Some((&[4], 17)), Some((&[2, 4, 3], 18))],
            &[],
            &[(&[2, 3], &[-1.5625, 0.3125, -1.40625, -1.34375, -1.625, 0.25])],
        );
        // batched x 1-D
        check(
            "MatMul",
            &[Some((&[2, 3, 4], 19)), Some((&[4], 20))],
            &[],
            &[(&[2, 3], &[-1.203125, -0.953125, 0.015625, -0.8125, 2.671875, -0.671875])],
        );
    }

    /// Pseudo-random values for the large cases.
    fn rnd(shape: &[i64], seed: u64) -> HostTensor {
        HostTensor::random(DType::F32, shape, seed).unwrap()
    }

    /// Naive 2-D convolution in f64 straight from the definition.
    #[allow(clippy::too_many_arguments)]
    fn naive_conv2d(
        x: &HostTensor,
        w: &HostTensor,
        b: Option<&HostTensor>,
        s: [usize; 2],
        d: [usize; 2],
        pb: [usize; 2],
        pe: [usize; 2],
        group: usize,
    ) -> (Vec<i64>, Vec<f64>) {
        let (xv, wv) = (x.to_f64(), w.to_f64());
        let [n, c, h, wd] = [0, 1, 2, 3].map(|i| x.shape[i] as usize);
        let [m, cg, kh, kw] = [0, 1, 2, 3].map(|i| w.shape[i] as usize);
        let mg = m / group;
        let oh = (h + pb[0] + pe[0] - (kh - 1) * d[0] - 1) / s[0] + 1;
        let ow = (wd + pb[1] + pe[1] - (kw - 1) * d[1] - 1) / s[1] + 1;
        let mut y = vec![0f64; n * m * oh * ow];
        for ni in 0..n {
            for mi in 0..m {
                let g = mi / mg;
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut acc = b.map_or(0.0, |b| b.to_f64()[mi]);
                        for ci in 0..cg {
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy = (oy * s[0] + ky * d[0]) as i64 - pb[0] as i64;
                                    let ix = (ox * s[1] + kx * d[1]) as i64 - pb[1] as i64;
                                    if iy < 0 || ix < 0 || iy >= h as i64 || ix >= wd as i64 {
                                        continue;
                                    }
                                    let xi = ((ni * c + g * cg + ci) * h + iy as usize) * wd + ix as usize;
                                    acc += xv[xi] * wv[((mi * cg + ci) * kh + ky) * kw + kx];
                                }
                            }
                        }
                        y[((ni * m + mi) * oh + oy) * ow + ox] = acc;
                    }
                }
            }
        }
        (vec![n as i64, m as i64, oh as i64, ow as i64], y)
    }

    /// Naive 2-D transposed convolution in f64 (scatter form).
    fn naive_conv_transpose2d(x: &HostTensor, w: &HostTensor, s: [usize; 2], pb: [usize; 2], group: usize) -> Vec<f64> {
        let (xv, wv) = (x.to_f64(), w.to_f64());
        let [n, c, h, wd] = [0, 1, 2, 3].map(|i| x.shape[i] as usize);
        let [_, mg, kh, kw] = [0, 1, 2, 3].map(|i| w.shape[i] as usize);
        let (cg, m) = (c / group, mg * group);
        let oh = s[0] * (h - 1) + kh - 2 * pb[0];
        let ow = s[1] * (wd - 1) + kw - 2 * pb[1];
        let mut y = vec![0f64; n * m * oh * ow];
        for ni in 0..n {
            for ci in 0..c {
                let g = ci / cg;
                for iy in 0..h {
                    for ix in 0..wd {
                        let xval = xv[((ni * c + ci) * h + iy) * wd + ix];
                        for mi in 0..mg {
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let oy = (iy * s[0] + ky) as i64 - pb[0] as i64;
                                    let ox = (ix * s[1] + kx) as i64 - pb[1] as i64;
                                    if oy < 0 || ox < 0 || oy >= oh as i64 || ox >= ow as i64 {
                                        continue;
                                    }
                                    let yi = ((ni * m + g * mg + mi) * oh + oy as usize) * ow + ox as usize;
                                    y[yi] += xval * wv[((ci * mg + mi) * kh + ky) * kw + kx];
                                }
                            }
                        }
                    }
                }
            }
        }
        y
    }

    fn naive_matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut y = vec![0f64; m * n];
        for i in 0..m {
            for p in 0..k {
                for j in 0..n {
                    y[i * n + j] += a[i * k + p] * b[p * n + j];
                }
            }
        }
        y
    }

    fn transpose(v: &[f64], rows: usize, cols: usize) -> Vec<f64> {
        (0..cols * rows).map(|i| v[(i % rows) * cols + i / rows]).collect()
    }

    #[test]
    fn large_convolutions_match_naive_loops() {
        // (x, w, bias, strides, dilations, pads begin, pads end, group): batch-split threads,
        // column-split threads, depthwise, pointwise, direct loops, im2col in several chunks.
        type Case<'a> = (&'a [i64], &'a [i64], bool, [usize; 2], [usize; 2], [usize; 2], [usize; 2], usize);
        let cases: &[Case] = &[
            (&[2, 16, 20, 18], &[32, 16, 3, 3], true, [1, 2], [1, 2], [1, 1], [1, 1], 1),
            (&[1, 32, 24, 24], &[48, 32, 3, 3], false, [1, 1], [1, 1], [1, 1], [1, 1], 1),
            (&[2, 96, 32, 32], &[96, 1, 3, 3], true, [1, 1], [1, 1], [1, 1], [1, 1], 96),
            (&[1, 64, 62, 62], &[2, 64, 3, 3], false, [1, 1], [1, 1], [1, 1], [1, 1], 1),
            (&[1, 32, 40, 40], &[48, 32, 1, 1], true, [1, 1], [1, 1], [0, 0], [0, 0], 1),
            (&[1, 4, 120, 120], &[3, 4, 3, 3], true, [1, 1], [1, 1], [1, 1], [1, 1], 1),
            (&[1, 64, 30, 30], &[8, 64, 3, 3], true, [1, 1], [1, 1], [1, 1], [1, 1], 1),
            (&[1, 8, 61, 57], &[8, 1, 3, 3], false, [2, 2], [2, 1], [2, 1], [2, 1], 8),
            (&[3, 12, 17, 19], &[12, 3, 5, 3], true, [2, 3], [1, 2], [2, 0], [1, 3], 4),
            // Direct loops over padded planes: strides, dilations, wide pads, two channels
            // per group in and out.
            (&[1, 6, 9, 11], &[6, 1, 3, 3], true, [3, 2], [2, 3], [4, 5], [3, 2], 6),
            (&[2, 6, 13, 10], &[6, 2, 3, 2], true, [1, 2], [1, 1], [0, 1], [2, 0], 3),
            (&[1, 4, 7, 5], &[4, 1, 1, 3], false, [1, 3], [1, 1], [0, 2], [0, 0], 4),
        ];
        for (i, &(xs, ws, bias, s, d, pb, pe, group)) in cases.iter().enumerate() {
            let (x, w, b) = (rnd(xs, 1 + i as u64), rnd(ws, 100 + i as u64), rnd(&[ws[0]], 200 + i as u64));
            let b = bias.then_some(&b);
            let at = attrs(&[
                ("strides", ints(&[s[0] as i64, s[1] as i64])),
                ("dilations", ints(&[d[0] as i64, d[1] as i64])),
                ("pads", ints(&[pb[0] as i64, pb[1] as i64, pe[0] as i64, pe[1] as i64])),
                ("group", AttrValue::Int(group as i64)),
            ]);
            let got = run("Conv", &[Some(&x), Some(&w), b], &at).unwrap();
            let (shape, want) = naive_conv2d(&x, &w, b, s, d, pb, pe, group);
            assert_eq!(got[0].shape, shape, "case {i}");
            assert_close(&format!("conv case {i}"), &got[0].to_f64(), &want);
        }
    }

    #[test]
    fn large_transposed_convolutions_match_naive_loops() {
        type Case<'a> = (&'a [i64], &'a [i64], [usize; 2], [usize; 2], usize);
        let cases: &[Case] = &[
            (&[1, 16, 12, 12], &[16, 8, 4, 4], [2, 2], [1, 1], 1),
            (&[2, 32, 16, 16], &[32, 8, 3, 3], [2, 1], [1, 0], 2),
            (&[1, 8, 9, 7], &[8, 1, 3, 3], [1, 2], [0, 1], 8),
            (&[1, 4, 40, 40], &[4, 16, 3, 3], [1, 1], [0, 0], 1),
        ];
        for (i, &(xs, ws, s, pb, group)) in cases.iter().enumerate() {
            let (x, w) = (rnd(xs, 10 + i as u64), rnd(ws, 20 + i as u64));
            let at = attrs(&[
                ("strides", ints(&[s[0] as i64, s[1] as i64])),
                ("pads", ints(&[pb[0] as i64, pb[1] as i64, pb[0] as i64, pb[1] as i64])),
                ("group", AttrValue::Int(group as i64)),
            ]);
            let got = run("ConvTranspose", &[Some(&x), Some(&w)], &at).unwrap();
            assert_close(
                &format!("conv_transpose case {i}"),
                &got[0].to_f64(),
                &naive_conv_transpose2d(&x, &w, s, pb, group),
            );
        }
    }

    #[test]
    fn large_matrix_products_match_naive_loops() {
        // (m, k, n): packed with row-split threads, few rows (AXPY) with column-split threads,
        // matrix-vector, odd sizes around the block edges.
        for (i, &(m, k, n)) in
            [(150, 200, 170), (2, 3000, 400), (300, 500, 1), (97, 257, 35), (1, 7, 1)].iter().enumerate()
        {
            let (a, b) = (rnd(&[m, k], 30 + i as u64), rnd(&[k, n], 40 + i as u64));
            let got = run("MatMul", &[Some(&a), Some(&b)], &Attrs::default()).unwrap();
            let want = naive_matmul(&a.to_f64(), &b.to_f64(), m as usize, k as usize, n as usize);
            assert_close(&format!("matmul {m}x{k}x{n}"), &got[0].to_f64(), &want);
        }
        // Batched, split over batches.
        let (a, b) = (rnd(&[8, 40, 60], 50), rnd(&[8, 60, 70], 51));
        let got = run("MatMul", &[Some(&a), Some(&b)], &Attrs::default()).unwrap()[0].to_f64();
        let (av, bv) = (a.to_f64(), b.to_f64());
        for bi in 0..8 {
            let want = naive_matmul(&av[bi * 2400..][..2400], &bv[bi * 4200..][..4200], 40, 60, 70);
            assert_close(&format!("batch {bi}"), &got[bi * 2800..][..2800], &want);
        }
        // Gemm with both transposes (strided packing), alpha, beta and a row bias.
        let (m, k, n) = (40usize, 300usize, 120usize);
        let (a, b, c) = (rnd(&[k as i64, m as i64], 60), rnd(&[n as i64, k as i64], 61), rnd(&[n as i64], 62));
        let at = attrs(&[
            ("transA", AttrValue::Int(1)),
            ("transB", AttrValue::Int(1)),
            ("alpha", AttrValue::Float(0.5)),
            ("beta", AttrValue::Float(-2.0)),
        ]);
        let got = run("Gemm", &[Some(&a), Some(&b), Some(&c)], &at).unwrap();
        let mut want = naive_matmul(&transpose(&a.to_f64(), k, m), &transpose(&b.to_f64(), n, k), m, k, n);
        let cv = c.to_f64();
        for (j, v) in want.iter_mut().enumerate() {
            *v = 0.5 * *v - 2.0 * cv[j % n];
        }
        assert_close("gemm", &got[0].to_f64(), &want);
    }

    #[test]
    fn portable_gemm_kernel_matches_naive_loops() {
        // The SSE-width kernel that machines without AVX2/FMA use, on odd sizes.
        let (m, k, n) = (13usize, 300usize, 21usize);
        let (a, b) = (rnd(&[m as i64, k as i64], 70), rnd(&[k as i64, n as i64], 71));
        let (av, bv) = (values((&a).into(), "A").unwrap(), values((&b).into(), "B").unwrap());
        let mut c = vec![1f32; m * n];
        let mut rows: Vec<&mut [f32]> = c.chunks_mut(n).collect();
        gemm_packed::<4, 8, false>(
            m,
            n,
            k,
            2.0,
            Mat { d: &av, rs: k, cs: 1, packed: None },
            Mat { d: &bv, rs: n, cs: 1, packed: None },
            &mut rows,
        );
        let want: Vec<f64> = naive_matmul(&a.to_f64(), &b.to_f64(), m, k, n).iter().map(|v| 1.0 + 2.0 * v).collect();
        let got: Vec<f64> = c.iter().map(|&v| v as f64).collect();
        assert_close("portable gemm", &got, &want);
    }

    #[test]
    fn large_pools_split_over_planes() {
        let x = rnd(&[4, 8, 64, 64], 80);
        let at = attrs(&[("kernel_shape", ints(&[3, 3])), ("pads", ints(&[1, 1, 1, 1])), ("strides", ints(&[1, 1]))]);
        let mx = run("MaxPool", &[Some(&x)], &at).unwrap();
        let avg = run("AveragePool", &[Some(&x)], &at).unwrap();
        let xv = x.to_f64();
        let (ymax, yind, yavg) = (mx[0].to_f64(), mx[1].to_i64(), avg[0].to_f64());
        for plane in 0..32 {
            for oy in 0..64i64 {
                for ox in 0..64i64 {
                    let (mut best, mut at, mut sum, mut count) = (f64::NEG_INFINITY, -1i64, 0.0, 0.0);
                    for iy in (oy - 1).max(0)..(oy + 2).min(64) {
                        for ix in (ox - 1).max(0)..(ox + 2).min(64) {
                            let i = plane * 4096 + (iy * 64 + ix) as usize;
                            if xv[i] > best {
                                (best, at) = (xv[i], i as i64);
                            }
                            sum += xv[i];
                            count += 1.0;
                        }
                    }
                    let o = plane * 4096 + (oy * 64 + ox) as usize;
                    assert_eq!((ymax[o], yind[o]), (best, at), "max at {o}");
                    assert!((yavg[o] - sum / count).abs() < 1e-5, "average at {o}");
                }
            }
        }
    }

    #[test]
    fn f32_views_need_alignment() {
        let buf: Vec<u8> = 1.5f32.to_le_bytes().iter().chain(&2.5f32.to_le_bytes()).copied().collect();
        match f32_view(&buf) {
            Some(v) => assert_eq!(v, [1.5, 2.5]),
            None => assert_ne!(buf.as_ptr() as usize % 4, 0),
        }
        let start = (4 - buf.as_ptr() as usize % 4) % 4 + 1;
        assert!(f32_view(&buf[start..start + 4]).is_none(), "a misaligned view");
        assert!(f32_view(&buf[..3]).is_none(), "a partial element");
        // Misaligned bytes still convert (by copy) and results are stored back correctly.
        let mut t = HostTensor::from_f32(&[2], &[0.0, 0.0]).unwrap();
        fill_f32(&mut t.view_mut(), |v| {
            v.copy_from_slice(&[3.0, -1.0]);
            Ok(())
        })
        .unwrap();
        assert_eq!(t.to_f64(), [3.0, -1.0]);
    }

    #[test]
    fn empty_dims_and_zero_inner_sizes() {
        // Batch 0, K = 0 (the product is 0, Gemm keeps beta * C), 1-D against 1-D.
        let y = run("Conv", &[Some(&gen(&[0, 2, 5, 5], 1)), Some(&gen(&[3, 2, 3, 3], 2))], &Attrs::default()).unwrap();
        assert_eq!(y[0].shape, vec![0, 3, 3, 3]);
        let y = run("MatMul", &[Some(&gen(&[2, 0], 1)), Some(&gen(&[0, 3], 2))], &Attrs::default()).unwrap();
        assert_eq!((y[0].shape.clone(), y[0].to_f64()), (vec![2, 3], vec![0.0; 6]));
        let c = gen(&[3], 3);
        let y = run("Gemm", &[Some(&gen(&[2, 0], 1)), Some(&gen(&[0, 3], 2)), Some(&c)], &Attrs::default()).unwrap();
        assert_eq!(y[0].to_f64(), [c.to_f64(), c.to_f64()].concat());
        let y = run("GlobalAveragePool", &[Some(&gen(&[0, 4, 3, 3], 1))], &Attrs::default()).unwrap();
        assert_eq!(y[0].shape, vec![0, 4, 1, 1]);
        let y = run("MaxPool", &[Some(&gen(&[1, 0, 4, 4], 1))], &attrs(&[("kernel_shape", ints(&[2, 2]))])).unwrap();
        assert_eq!(y[1].shape, vec![1, 0, 3, 3]);
    }

    #[test]
    fn attribute_validation_errors() {
        let conv = OpId::from_name("Conv").unwrap().def();
        let bad = |at: &[(&str, AttrValue)]| conv.check_attrs(&attrs(at)).unwrap_err();
        assert!(bad(&[("pads", ints(&[1, -1, 1, 1]))]).contains("pads must be non-negative"));
        assert!(bad(&[("pads", ints(&[1, 1, 1]))]).contains("even count"));
        assert!(bad(&[("strides", ints(&[1, 0]))]).contains("strides must be positive"));
        assert!(bad(&[("dilations", ints(&[-2]))]).contains("dilations must be positive"));
        assert!(bad(&[("kernel_shape", ints(&[3, 0]))]).contains("kernel_shape must be positive"));
        assert!(bad(&[("group", AttrValue::Int(0))]).contains("group must be at least 1"));
        assert!(bad(&[("auto_pad", AttrValue::Str("SAME".into()))]).contains("auto_pad must be NOTSET"));
        let e = bad(&[("auto_pad", AttrValue::Str("SAME_UPPER".into())), ("pads", ints(&[1, 1, 1, 1]))]);
        assert!(e.contains("cannot be combined with auto_pad"), "{e}");
        let e = bad(&[("strides", ints(&[1, 1, 1])), ("kernel_shape", ints(&[3, 3]))]);
        assert_eq!(e, "strides has 3 values but kernel_shape has 2 values");
        let e = bad(&[("dilations", ints(&[1])), ("pads", ints(&[0, 0, 0, 0]))]);
        assert_eq!(e, "pads has 4 values (2 spatial dims) but dilations has 1 values");
        assert!(bad(&[("alpha", AttrValue::Float(1.0))]).contains("has no attribute `alpha`"));
        let max_pool = OpId::from_name("MaxPool").unwrap().def();
        let bad = |at: &[(&str, AttrValue)]| max_pool.check_attrs(&attrs(at)).unwrap_err();
        assert_eq!(bad(&[("strides", ints(&[2, 2]))]), "kernel_shape is required");
        let k = ("kernel_shape", ints(&[2, 2]));
        assert!(bad(&[k.clone(), ("storage_order", AttrValue::Int(2))]).contains("storage_order must be 0"));
        assert!(bad(&[k.clone(), ("ceil_mode", AttrValue::Int(2))]).contains("ceil_mode must be 0 or 1"));
        let avg = OpId::from_name("AveragePool").unwrap().def();
        assert!(avg
            .check_attrs(&attrs(&[k, ("count_include_pad", AttrValue::Int(-1))]))
            .unwrap_err()
            .contains("0 or 1"));
        let gemm = OpId::from_name("Gemm").unwrap().def();
        assert!(gemm
            .check_attrs(&attrs(&[("transB", AttrValue::Int(3))]))
            .unwrap_err()
            .contains("transB must be 0 or 1"));
        let ct = OpId::from_name("ConvTranspose").unwrap().def();
        assert!(ct.check_attrs(&attrs(&[("output_padding", ints(&[-1]))])).unwrap_err().contains("non-negative"));
        assert!(ct.check_attrs(&attrs(&[("output_shape", ints(&[4, -4]))])).unwrap_err().contains("non-negative"));
        for op in ["Conv", "ConvTranspose", "MaxPool", "AveragePool", "Gemm"] {
            let def = OpId::from_name(op).unwrap().def();
            let ok = if op.ends_with("Pool") { attrs(&[("kernel_shape", ints(&[2]))]) } else { Attrs::default() };
            def.check_attrs(&ok).unwrap_or_else(|e| panic!("{op}: {e}"));
        }
    }

    #[test]
    fn shape_errors_name_the_problem() {
        let x8 = gen(&[1, 8, 5, 5], 1);
        let e = err("Conv", &[&x8, &gen(&[6, 2, 3, 3], 2)], &[("group", AttrValue::Int(3))]);
        assert_eq!(e, "group 3 does not divide 8 input channels");
        let e = err("Conv", &[&x8, &gen(&[8, 4, 3, 3], 2)], &[("group", AttrValue::Int(4))]);
        assert_eq!(
            e,
            "weight is f32[8, 4, 3, 3] but the input has 8 channels / group 4 → expected 2 input channels per group"
        );
        let e = err("Conv", &[&x8, &gen(&[6, 2, 3, 3], 2)], &[("group", AttrValue::Int(4))]);
        assert_eq!(e, "group 4 does not divide 6 output channels (the weight is f32[6, 2, 3, 3])");
        let e = err("Conv", &[&gen(&[1, 4, 8, 8], 1), &gen(&[16, 3, 3, 3], 2)], &[]);
        assert_eq!(
            e,
            "weight is f32[16, 3, 3, 3] but the input has 4 channels / group 1 → expected 4 input channels per group"
        );
        let e = err(
            "Conv",
            &[&x8, &gen(&[6, 4, 3, 3], 2)],
            &[("group", AttrValue::Int(2)), ("kernel_shape", ints(&[3, 3, 3]))],
        );
        assert_eq!(e, "kernel_shape has 3 dims but the input has 2 spatial dims");
        let e = err("Conv", &[&x8, &gen(&[6, 8, 3, 3], 2)], &[("kernel_shape", ints(&[3, 2]))]);
        assert!(e.contains("kernel_shape [3, 2] does not match the weight f32[6, 8, 3, 3]"), "{e}");
        let e = err("Conv", &[&x8, &gen(&[6, 8, 3, 3], 2), &gen(&[5], 3)], &[]);
        assert_eq!(e, "bias is f32[5] but there are 6 output channels (expected f32[6])");
        let e = err("Conv", &[&x8, &gen(&[6, 8, 7, 3], 2)], &[]);
        assert!(e.contains("spatial dim 0: the kernel (7) spans 7 but the input is only 5 wide"), "{e}");
        let e = err("Conv", &[&x8, &gen(&[6, 8, 3, 3], 2)], &[("dilations", ints(&[3, 1]))]);
        assert!(e.contains("the kernel (3 with dilation 3) spans 7"), "{e}");
        let e = err("Conv", &[&x8, &gen(&[6, 8, 3], 2)], &[]);
        assert!(e.contains("with the rank of the input"), "{e}");
        let e = err("Conv", &[&gen(&[8, 5], 1), &gen(&[6, 8], 2)], &[]);
        assert!(e.contains("rank 3 or more"), "{e}");
        let e = err("Conv", &[&x8, &gen(&[6, 8, 3, 3], 2)], &[("strides", ints(&[1, 1, 1]))]);
        assert_eq!(e, "strides has 3 values but the input has 2 spatial dims");
        let e = err("Conv", &[&x8, &gen(&[6, 8, 3, 3], 2)], &[("pads", ints(&[1, 1]))]);
        assert!(e.contains("pads has 2 values but the input has 2 spatial dims (expected 4"), "{e}");
        let half = HostTensor::zeros(DType::F16, &[1, 8, 5, 5]).unwrap();
        let e = err("Conv", &[&half, &gen(&[6, 8, 3, 3], 2)], &[]);
        assert_eq!(e, "W is f32[6, 8, 3, 3] but X is f16: they must have one dtype");
        let e = err("Conv", &[&HostTensor::zeros(DType::I32, &[1, 8, 5, 5]).unwrap(), &gen(&[6, 8, 3, 3], 2)], &[]);
        assert_eq!(e, "X must be f32, f16, bf16 or f64, found i32[1, 8, 5, 5]");
        let e = run("Conv", &[Some(&x8), None], &Attrs::default()).unwrap_err();
        assert_eq!(e, "the input W is required");

        let e = err("ConvTranspose", &[&x8, &gen(&[4, 2, 3, 3], 2)], &[]);
        assert!(e.contains("weight is f32[4, 2, 3, 3] but the input has 8 channels"), "{e}");
        let e = err("ConvTranspose", &[&x8, &gen(&[8, 2, 3, 3], 2)], &[("group", AttrValue::Int(3))]);
        assert_eq!(e, "group 3 does not divide 8 input channels");
        let e = err("ConvTranspose", &[&x8, &gen(&[8, 2, 3, 3], 2)], &[("output_padding", ints(&[1, 1]))]);
        assert!(
            e.contains("output_padding 1 on spatial dim 0 must be smaller than the stride (1) or the dilation (1)"),
            "{e}"
        );
        let e = err("ConvTranspose", &[&x8, &gen(&[8, 2, 3, 3], 2)], &[("pads", ints(&[4, 0, 4, 0]))]);
        assert!(e.contains("remove more than the 7 positions"), "{e}");
        let e = err("ConvTranspose", &[&x8, &gen(&[8, 2, 3, 3], 2)], &[("output_shape", ints(&[4, 4, 4]))]);
        assert!(e.contains("output_shape has 3 values"), "{e}");

        let e = err("MaxPool", &[&x8], &[("kernel_shape", ints(&[2]))]);
        assert_eq!(e, "kernel_shape has 1 dims but the input has 2 spatial dims");
        let e = err("AveragePool", &[&x8], &[("kernel_shape", ints(&[6, 2]))]);
        assert!(e.contains("spatial dim 0: the kernel (6) spans 6 but the input is only 5 wide"), "{e}");

        let e = err("Gemm", &[&gen(&[2, 3], 1), &gen(&[4, 5], 2)], &[]);
        assert!(e.contains("inner dimensions 3 and 4 differ"), "{e}");
        let e = err("Gemm", &[&gen(&[2, 3, 1], 1), &gen(&[3, 5], 2)], &[]);
        assert_eq!(e, "A must be a matrix (rank 2), found f32[2, 3, 1]");
        let e = err("Gemm", &[&gen(&[2, 3], 1), &gen(&[3, 5], 2), &gen(&[2], 3)], &[]);
        assert_eq!(e, "C is f32[2] but must broadcast to the output [2, 5]");
        let e = err("MatMul", &[&gen(&[2, 3], 1), &gen(&[4], 2)], &[]);
        assert!(e.contains("inner dimensions 3 and 4 differ"), "{e}");
        let e = err("MatMul", &[&gen(&[2, 2, 3], 1), &gen(&[3, 3, 4], 2)], &[]);
        assert!(e.contains("the batch dims of A f32[2, 2, 3] and B f32[3, 3, 4] do not broadcast"), "{e}");
        let scalar = HostTensor::from_f32(&[], &[1.0]).unwrap();
        assert!(err("MatMul", &[&scalar, &gen(&[3], 2)], &[]).contains("rank 1 or more"));
        assert!(err("GlobalMaxPool", &[&gen(&[4], 1)], &[]).contains("rank 2 or more"));
    }

    #[test]
    fn kernels_reject_mismatched_outputs_and_data() {
        let (x, w) = (gen(&[1, 2, 4, 4], 1), gen(&[3, 2, 3, 3], 2));
        let def = OpId::from_name("Conv").unwrap().def();
        let mut outs = vec![HostTensor::zeros(DType::F32, &[1, 3, 3, 3]).unwrap()];
        let e = (def.op.id().host_kernel().unwrap())(&[Some(&x), Some(&w)], &Attrs::default(), &mut outs).unwrap_err();
        assert!(e.contains("expected f32[1, 3, 2, 2]"), "{e}");
        assert!((def.op.id().host_kernel().unwrap())(&[Some(&x), Some(&w)], &Attrs::default(), &mut []).is_err());
        let broken = HostTensor { dtype: DType::F32, shape: vec![1, 2, 4, 4], data: vec![0; 12] };
        let mut outs = vec![HostTensor::zeros(DType::F32, &[1, 3, 2, 2]).unwrap()];
        assert!((def.op.id().host_kernel().unwrap())(&[Some(&broken), Some(&w)], &Attrs::default(), &mut outs).is_err());
        // MaxPool without its optional Indices output.
        let def = OpId::from_name("MaxPool").unwrap().def();
        let mut outs = vec![HostTensor::zeros(DType::F32, &[1, 2, 2, 2]).unwrap()];
        (def.op.id().host_kernel().unwrap())(&[Some(&x)], &attrs(&[("kernel_shape", ints(&[3, 3]))]), &mut outs)
            .unwrap();
    }

    #[test]
    fn extreme_attributes_never_panic() {
        let big = i64::MAX;
        let x = gen(&[1, 2, 5, 5], 1);
        let w = gen(&[2, 2, 3, 3], 2);
        let lists: &[&[(&str, AttrValue)]] = &[
            &[("strides", ints(&[big, big]))],
            &[("dilations", ints(&[big, 1]))],
            &[("pads", ints(&[big, big, big, big]))],
            &[("pads", ints(&[big, 0, 0, 0])), ("strides", ints(&[big, 1]))],
            &[("group", AttrValue::Int(big))],
            &[("kernel_shape", ints(&[big, big]))],
            &[("output_shape", ints(&[big, big]))],
            &[("output_shape", ints(&[0, 0]))],
            &[("output_padding", ints(&[big - 1, 0])), ("strides", ints(&[big, 1]))],
            &[("auto_pad", AttrValue::Str("SAME_UPPER".into())), ("strides", ints(&[big, big]))],
            &[("auto_pad", AttrValue::Str("SAME_LOWER".into())), ("dilations", ints(&[big, big]))],
            &[("ceil_mode", AttrValue::Int(1)), ("strides", ints(&[big, 3])), ("pads", ints(&[0, 2, big, 2]))],
            &[("count_include_pad", AttrValue::Int(1)), ("pads", ints(&[4, 4, 4, 4]))],
            &[
                ("count_include_pad", AttrValue::Int(1)),
                ("kernel_shape", ints(&[big / 2, big / 2])),
                ("pads", ints(&[0, 0, big / 2, big / 2])),
                ("strides", ints(&[big, big])),
            ],
        ];
        for at in lists {
            for op in ["Conv", "ConvTranspose"] {
                let _ = run(op, &[Some(&x), Some(&w), None], &attrs(at));
            }
            let mut with_k = at.to_vec();
            if !at.iter().any(|(k, _)| *k == "kernel_shape") {
                with_k.push(("kernel_shape", ints(&[3, 3])));
            }
            for op in ["MaxPool", "AveragePool"] {
                let _ = run(op, &[Some(&x)], &attrs(&with_k));
            }
        }
        // Windows entirely inside the padding: max is -inf with index -1, the average 0/0.
        let y = run("MaxPool", &[Some(&x)], &attrs(&[("kernel_shape", ints(&[2, 2])), ("pads", ints(&[3, 3, 0, 0]))]))
            .unwrap();
        assert_eq!((y[0].to_f64()[0], y[1].to_i64()[0]), (f64::NEG_INFINITY, -1));
        // No channels at all: any group divides 0.
        let (x0, w0) = (gen(&[2, 0, 5, 5], 1), gen(&[0, 0, 3, 3], 2));
        for op in ["Conv", "ConvTranspose"] {
            let y = run(op, &[Some(&x0), Some(&w0)], &attrs(&[("group", AttrValue::Int(big))])).unwrap();
            assert_eq!(y[0].numel(), 0, "{op}");
        }
        let huge = HostTensor { dtype: DType::F32, shape: vec![big, big, 0], data: vec![] };
        for op in ["GlobalAveragePool", "GlobalMaxPool"] {
            assert!(run(op, &[Some(&huge)], &Attrs::default()).unwrap_err().contains("too large"));
        }
        assert!(run("MatMul", &[Some(&huge), Some(&gen(&[0, 2], 1))], &Attrs::default()).is_err());
        let neg = HostTensor { dtype: DType::F32, shape: vec![-1, 2], data: vec![] };
        assert!(run("Gemm", &[Some(&neg), Some(&gen(&[2, 2], 1))], &Attrs::default())
            .unwrap_err()
            .contains("negative"));
    }

    /// `t` converted to dtype `d` (the generated values are exact in every float dtype).
    fn cast(t: &HostTensor, d: DType) -> HostTensor {
        let mut o = HostTensor::zeros(d, &t.shape).unwrap();
        for (c, v) in o.data.chunks_exact_mut(d.size()).zip(t.to_f64()) {
            store_f64(d, v, c);
        }
        o
    }

    /// Conv, ConvTranspose, Gemm and MatMul on f16, bf16 and f64 give the f32 results
    /// (exact here: small dyadic values), rounded to the dtype.
    #[test]
    fn products_on_narrow_and_wide_floats() {
        let cases: Vec<(&str, Vec<HostTensor>, Attrs)> = vec![
            (
                "Conv",
                vec![gen(&[1, 4, 5, 5], 1), gen(&[6, 2, 3, 3], 2), gen(&[6], 3)],
                attrs(&[("group", AttrValue::Int(2)), ("pads", ints(&[1, 0, 1, 2]))]),
            ),
            (
                "Conv",
                vec![gen(&[2, 3, 7], 4), gen(&[2, 3, 2], 5)],
                attrs(&[("strides", ints(&[2])), ("dilations", ints(&[2]))]),
            ),
            (
                "ConvTranspose",
                vec![gen(&[1, 2, 3, 3], 6), gen(&[2, 3, 2, 2], 7), gen(&[3], 8)],
                attrs(&[("strides", ints(&[2, 2]))]),
            ),
            (
                "Gemm",
                vec![gen(&[4, 3], 9), gen(&[5, 4], 10), gen(&[5], 11)],
                attrs(&[
                    ("transA", AttrValue::Int(1)),
                    ("transB", AttrValue::Int(1)),
                    ("alpha", AttrValue::Float(0.5)),
                    ("beta", AttrValue::Float(2.0)),
                ]),
            ),
            ("MatMul", vec![gen(&[2, 1, 3, 4], 12), gen(&[3, 4, 5], 13)], Attrs::default()),
            ("MatMul", vec![gen(&[4], 14), gen(&[4, 3], 15)], Attrs::default()),
        ];
        for (op, ins, a) in &cases {
            let refs: Vec<Option<&HostTensor>> = ins.iter().map(Some).collect();
            let want = run(op, &refs, a).unwrap().remove(0);
            for d in [DType::F16, DType::BF16, DType::F64] {
                let cins: Vec<HostTensor> = ins.iter().map(|t| cast(t, d)).collect();
                let crefs: Vec<Option<&HostTensor>> = cins.iter().map(Some).collect();
                let got = run(op, &crefs, a).unwrap_or_else(|e| panic!("{op} {d}: {e}")).remove(0);
                assert_eq!(got, cast(&want, d), "{op} {a} on {d}");
            }
        }
        // Mixed dtypes are an error naming both.
        let e = err("MatMul", &[&gen(&[2, 2], 1), &cast(&gen(&[2, 2], 2), DType::F64)], &[]);
        assert_eq!(e, "B is f64[2, 2] but A is f32: they must have one dtype");
    }

    #[test]
    fn max_pool_column_major_indices_and_bytes() {
        // A 1x1x2x3 plane: the max of the 2x2 windows (stride 1) is at (1, 1) and (0, 2).
        let x = HostTensor::from_f32(&[1, 1, 2, 3], &[1.0, 2.0, 9.0, 4.0, 8.0, 3.0]).unwrap();
        let a = |so: i64| attrs(&[("kernel_shape", ints(&[2, 2])), ("storage_order", AttrValue::Int(so))]);
        let row = run("MaxPool", &[Some(&x)], &a(0)).unwrap();
        assert_eq!(row[1].to_i64(), [4, 2]);
        let col = run("MaxPool", &[Some(&x)], &a(1)).unwrap();
        assert_eq!(col[0], row[0]);
        // Column-major: (h, w) -> h + w * 2.
        assert_eq!(col[1].to_i64(), [3, 4]);
        let xb = cast(&x, DType::U8);
        let outs = run("MaxPool", &[Some(&xb)], &a(1)).unwrap();
        assert_eq!(outs[0], cast(&row[0], DType::U8));
        assert_eq!(outs[1].to_i64(), [3, 4]);
        let e = err("MaxPool", &[&cast(&x, DType::I32)], &[("kernel_shape", ints(&[2, 2]))]);
        assert_eq!(e, "X must be f32, f16, bf16, u8 or i8, found i32[1, 1, 2, 3]");
    }
}
