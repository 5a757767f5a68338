//! Pooling: MaxPool (with indices), AveragePool and the global pools.

use super::conv::{ceil_div, hit_range};
use super::flat::{flat_max, flat_sum, FlatPlane};
use super::operands::{check_len, check_out, fill_f32, host_input, prod, put_wide, unflatten, values, write_f32};
use super::workers::par_items;
use crate::ir::host_tensor::{load_f64, numel, TensorMut, TensorRef};
use crate::ir::operators::nn::{
    flag, global_shape, pool_dims, validate_average_pool, validate_max_pool, Geo, PoolDims, MAX_POOL_DTYPES,
};
use crate::ir::types::DType;
use crate::ops::Attrs;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};

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

thread_local! {
    /// [`pool_flat`]'s accumulator and padded phases, per thread.
    static FLAT_BUF: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// [`pool_2d`] for 1-D and 2-D windows over whole planes as long vector loops
/// ([`FlatPlane`]): the plane is copied once into padded phases (`-inf` around it for
/// MaxPool, 0 for AveragePool) and every window tap is a contiguous run over all the
/// output rows, so short rows cost no more than long ones. The results are
/// [`pool_2d`]'s, bit for bit: MaxPool starts from the window's first tap and keeps
/// strictly greater values (a padding tap, `-inf`, is never greater than a tap inside
/// the input that is not a NaN; a plane holding a NaN is left to [`pool_2d`], where a
/// window's first inside tap decides), and AveragePool adds the taps in order from 0
/// (padding adds 0, which changes no sum) and divides by the same count. False when the
/// flat layout does not fit or a plane holds a NaN: `y` is then for [`pool_2d`] to write.
fn pool_flat(x: &[f32], pd: &PoolDims, kind: PoolKind, y: &mut [f32]) -> Result<bool, String> {
    let g = &pd.geo;
    let Some(fp) = FlatPlane::new(g) else { return Ok(false) };
    let (in_plane, out_plane) = (prod(&g.in_sp), prod(&g.out_sp));
    if x.len() != pd.n * pd.c * in_plane || y.len() != pd.n * pd.c * out_plane {
        return Err("the tensors do not match their shapes".into());
    }
    // AveragePool's divisor per output row and column (separable), as pool_2d's.
    let taps = pool_taps(g);
    let counts = |i: usize, include_pad: bool| -> Vec<usize> {
        taps.get(i).map_or(vec![1], |t| t.iter().map(|t| if include_pad { t.padded } else { t.hits }).collect())
    };
    let two = g.k.len() == 2;
    let (cy, cx) = match kind {
        PoolKind::Average { include_pad } if two => (counts(0, include_pad), counts(1, include_pad)),
        PoolKind::Average { include_pad } => (vec![1], counts(0, include_pad)),
        PoolKind::Max => (vec![], vec![]),
    };
    // Per output position, the divisor.
    let divisors: Vec<f32> = cy.iter().flat_map(|&a| cx.iter().map(move |&b| a.saturating_mul(b) as f32)).collect();
    let window = fp.taps.len().min(in_plane.max(1));
    let nan = AtomicBool::new(false);
    par_items(y, out_plane, y.len() as f64 * window as f64, |plane, yp, _| {
        let xp = &x[plane * in_plane..][..in_plane];
        FLAT_BUF.with_borrow_mut(|buf| {
            buf.resize(fp.len + fp.phases_len(), 0.0);
            let (acc, phases) = buf.split_at_mut(fp.len);
            match kind {
                PoolKind::Max => {
                    // (A fold, not `any`: it vectorises.)
                    if xp.iter().fold(false, |a, v| a | v.is_nan()) {
                        nan.store(true, Ordering::Relaxed);
                        return;
                    }
                    fp.load(xp, phases, f32::NEG_INFINITY);
                    flat_max(acc, phases, &fp.taps);
                    fp.gather(acc, yp);
                }
                PoolKind::Average { .. } => {
                    fp.load(xp, phases, 0.0);
                    flat_sum(acc, phases, &fp.taps);
                    fp.gather(acc, yp);
                    yp.iter_mut().zip(&divisors).for_each(|(v, &d)| *v /= d);
                }
            }
        });
        Ok(())
    })
    .map(|()| !nan.load(Ordering::Relaxed))
}

pub(super) fn max_pool(ins: &[Option<TensorRef>], attrs: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
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
            return write_f32(&mut outs[0], |y| {
                if pool_flat(&xv, &pd, PoolKind::Max, y)? {
                    return Ok(());
                }
                pool_2d(&xv, &pd, PoolKind::Max, y)
            });
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

pub(super) fn average_pool(ins: &[Option<TensorRef>], attrs: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    validate_average_pool(attrs)?;
    let x = host_input(ins, 0, "X")?;
    let pd = pool_dims(x.shape, attrs)?;
    check_out(outs, 0, DType::F32, &pd.out_shape)?;
    let include_pad = flag(attrs, "count_include_pad")?;
    let xv = values(x, "X")?;
    if whole_plane(&pd.geo) {
        // One window per plane, in one pass over it (the windowed paths set up a padded
        // plane per window: 12x onnxruntime's time on 2048 planes of 7x7).
        let plane = prod(&pd.geo.in_sp);
        return write_f32(&mut outs[0], |y| {
            y.iter_mut().zip(xv.chunks_exact(plane)).for_each(|(o, xp)| *o = plane_mean(xp));
            Ok(())
        });
    }
    if rows_pool(&pd.geo) {
        let kind = PoolKind::Average { include_pad };
        return write_f32(&mut outs[0], |y| {
            if pool_flat(&xv, &pd, kind, y)? {
                return Ok(());
            }
            pool_2d(&xv, &pd, kind, y)
        });
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
                plane_mean(xp)
            };
        }
        Ok(())
    })
}

/// The mean of a non-empty plane, summed in 8 lanes.
fn plane_mean(xp: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let chunks = xp.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        for j in 0..8 {
            acc[j] += c[j];
        }
    }
    (acc.iter().sum::<f32>() + tail) / xp.len() as f32
}

/// Whether a pooling's one window is each whole plane (no pads, no dilation): a global
/// pool (resnet50's AveragePool 7x7 over 7x7 planes).
fn whole_plane(g: &Geo) -> bool {
    g.k == g.in_sp
        && g.out_sp.iter().all(|&o| o == 1)
        && g.d.iter().all(|&d| d == 1)
        && g.pb.iter().chain(&g.pe).all(|&p| p == 0)
        && !g.in_sp.contains(&0)
}

pub(super) fn global_average_pool(ins: &[Option<TensorRef>], _: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    global_pool(ins, outs, false)
}

pub(super) fn global_max_pool(ins: &[Option<TensorRef>], _: &Attrs, outs: &mut [TensorMut]) -> Result<(), String> {
    global_pool(ins, outs, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;

    /// Pseudo-random values with signed zeros and infinities among them: where MaxPool's
    /// tie rules and AveragePool's sums would show a different order of taps.
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                match s % 16 {
                    0 => 0.0,
                    1 => -0.0,
                    2 => f32::NEG_INFINITY,
                    3 => f32::INFINITY,
                    r => ((s >> 20) % 2001) as f32 / 1000.0 - 1.0 + r as f32 * 1e-3,
                }
            })
            .collect()
    }

    /// The flat-plane pooling gives the row pooling's bits over 1-D and 2-D windows of
    /// every shape: kernels 1-4, strides 1-3, dilations 1-2, pads 0-2 on either side,
    /// ceil_mode, count_include_pad; a plane with a NaN is left to the row pooling.
    #[test]
    fn flat_pools_give_the_row_pools_bits() {
        let mut cases = 0;
        for two in [false, true] {
            for (k, s, d) in [(1, 1, 1), (2, 2, 1), (3, 1, 1), (3, 2, 1), (3, 3, 1), (2, 1, 2), (4, 2, 1), (3, 2, 2)] {
                for (pb, pe) in [(0, 0), (1, 1), (0, 1), (2, 1), (1, 2)] {
                    if pb >= k || pe >= k {
                        continue;
                    }
                    for ceil in [0, 1] {
                        let spatial: Vec<i64> = if two { vec![9, 12] } else { vec![13] };
                        let nd = spatial.len();
                        let shape: Vec<i64> = [2, 3].into_iter().chain(spatial).collect();
                        let rep = |v: i64| AttrValue::Ints(vec![v; nd]);
                        let pads: Vec<i64> = std::iter::repeat_n(pb, nd).chain(std::iter::repeat_n(pe, nd)).collect();
                        let attrs = Attrs(vec![
                            ("kernel_shape".into(), rep(k)),
                            ("strides".into(), rep(s)),
                            ("dilations".into(), rep(d)),
                            ("pads".into(), AttrValue::Ints(pads)),
                            ("ceil_mode".into(), AttrValue::Int(ceil)),
                        ]);
                        let Ok(pd) = pool_dims(&shape, &attrs) else { continue };
                        let x = values(shape.iter().product::<i64>() as usize, cases);
                        let n = pd.out_shape.iter().product::<i64>() as usize;
                        let kinds = [
                            PoolKind::Max,
                            PoolKind::Average { include_pad: false },
                            PoolKind::Average { include_pad: true },
                        ];
                        for kind in kinds {
                            let (mut flat, mut rows) = (vec![7.0f32; n], vec![7.0f32; n]);
                            assert!(pool_flat(&x, &pd, kind, &mut flat).unwrap(), "{attrs}");
                            pool_2d(&x, &pd, kind, &mut rows).unwrap();
                            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                            assert_eq!(bits(&flat), bits(&rows), "{attrs}");
                        }
                        let mut with_nan = x.clone();
                        with_nan[5] = f32::NAN;
                        assert!(!pool_flat(&with_nan, &pd, PoolKind::Max, &mut vec![0.0; n]).unwrap());
                        cases += 1;
                    }
                }
            }
        }
        assert!(cases > 100, "{cases} geometries");
    }
}
