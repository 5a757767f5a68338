//! Operators: the indexing family (GatherElements, GatherND, ScatterElements, Scatter,
//! ScatterND, Trilu, CumSum, CumProd, TopK, Hardmax, OneHot, EyeLike, DepthToSpace,
//! SpaceToDepth, ReverseSequence, Compress, CenterCropPad): the host kernels and their
//! `HOST` table (the schemas are in `crate::ir::operators::indexing`).
//!
//! The operators that only move elements (gathers, scatters without reduction, the layout
//! operators) copy element bytes, so they take every dtype; the others dispatch on the
//! element type (f16 through `half`, rounding each result to f16 as numpy does). Every
//! kernel re-runs the shape inference on its actual inputs and checks the data sizes first
//! ([`prepare`]), and checks every index against its axis, so a bad input is an error,
//! never an out-of-bounds access.

use super::host::{first, infos, prepare, req, HostFn};
use super::num::{numeric, Arith};
use super::Attrs;
use crate::ir::host_tensor::{load_i64, store_f64, HostTensor};
use crate::ir::operators::indexing::*;
use crate::ir::operators::Operator;
use crate::ir::types::DType;
use std::cmp::Ordering;

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[
    (Operator::GatherElements, gather_elements),
    (Operator::Trilu, trilu),
    (Operator::CumSum, cum_sum),
    (Operator::CumProd, cum_prod),
    (Operator::TopK, top_k),
    (Operator::ScatterElements, scatter_elements),
    (Operator::ScatterND, scatter_nd),
    (Operator::Hardmax, hardmax),
    (Operator::OneHot, one_hot),
    (Operator::GatherND, gather_nd),
    (Operator::EyeLike, eye_like),
    (Operator::DepthToSpace, depth_to_space),
    (Operator::SpaceToDepth, space_to_depth),
    (Operator::ReverseSequence, reverse_sequence),
    (Operator::Scatter, scatter),
    (Operator::Compress, compress),
    (Operator::CenterCropPad, center_crop_pad),
];

type Ins<'a, 'b> = &'a [Option<&'b HostTensor>];
type Res = Result<(), String>;

// ---------------------------------------------------------------------------------------
// Helpers.

/// Row-major strides (in elements) of a shape.
pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1].saturating_mul(shape[d + 1]);
    }
    s
}

/// Calls `f(k, index)` for every element `k` of a row-major tensor of `shape` with its
/// multi-index.
fn each_index(shape: &[usize], mut f: impl FnMut(usize, &[usize]) -> Res) -> Res {
    let n = shape.iter().product::<usize>();
    let mut idx = vec![0usize; shape.len()];
    for k in 0..n {
        f(k, &idx)?;
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(())
}

/// Element `i` of an integer (or float, truncated) tensor.
fn int_at(t: &HostTensor, i: usize) -> i64 {
    let es = t.dtype.size();
    t.data.get(i * es..(i + 1) * es).map_or(0, |b| load_i64(t.dtype, b))
}

fn elem(data: &[u8], i: usize, es: usize) -> Result<&[u8], String> {
    data.get(i * es..(i + 1) * es).ok_or_else(|| format!("element {i} is out of bounds"))
}

fn put(data: &mut [u8], i: usize, es: usize, v: &[u8]) -> Res {
    data.get_mut(i * es..(i + 1) * es).ok_or_else(|| format!("element {i} is out of bounds"))?.copy_from_slice(v);
    Ok(())
}

/// `dst = dst ⊕ src` for one element of a numeric type (max/min propagate NaN, as numpy's
/// maximum/minimum do).
fn combine<T: Arith>(r: Reduction, dst: &mut [u8], src: &[u8]) {
    let (a, b) = (T::read(dst), T::read(src));
    let v = match r {
        Reduction::None => b,
        Reduction::Add => a.add(b),
        Reduction::Mul => a.mul(b),
        Reduction::Max if a.is_nan() => a,
        Reduction::Max => {
            if b.is_nan() || b.total_order(a) == Ordering::Greater {
                b
            } else {
                a
            }
        }
        Reduction::Min if a.is_nan() => a,
        Reduction::Min => {
            if b.is_nan() || b.total_order(a) == Ordering::Less {
                b
            } else {
                a
            }
        }
    };
    v.write(dst);
}

/// Combines an update's bytes into an element's.
type Combine = fn(Reduction, &mut [u8], &[u8]);

/// The element combiner of a reduction and dtype.
fn combiner(r: Reduction, d: DType) -> Result<Combine, String> {
    if r == Reduction::None {
        return Ok(|_, dst, src| dst.copy_from_slice(src));
    }
    numeric!(d, T => Ok(combine::<T>))
}

// ---------------------------------------------------------------------------------------
// GatherElements, ScatterElements, Scatter.

fn gather_elements(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    const OP: &str = "GatherElements";
    prepare(ins, attrs, outs, infer_gather_elements)?;
    let (x, idx) = (req(ins, 0)?, req(ins, 1)?);
    let (axis, _) = plan_elements(&infos(ins)?, attrs, OP, false)?;
    let xs = udims(&x.shape);
    let st = strides(&xs);
    let es = x.dtype.size();
    let y = first(outs)?;
    each_index(&udims(&idx.shape), |k, i| {
        let v = resolve(int_at(idx, k), x.shape[axis], axis, OP)?;
        let off: usize = i.iter().zip(&st).enumerate().map(|(d, (&c, &s))| if d == axis { v } else { c } * s).sum();
        put(&mut y.data, k, es, elem(&x.data, off, es)?)
    })
}

fn scatter_common(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor], op: &str, red: Reduction) -> Res {
    let (x, idx, u) = (req(ins, 0)?, req(ins, 1)?, req(ins, 2)?);
    let (axis, _) = plan_elements(&infos(ins)?, attrs, op, true)?;
    let f = combiner(red, x.dtype)?;
    let st = strides(&udims(&x.shape));
    let es = x.dtype.size();
    let y = first(outs)?;
    y.data.copy_from_slice(&x.data);
    each_index(&udims(&idx.shape), |k, i| {
        let v = resolve(int_at(idx, k), x.shape[axis], axis, op)?;
        let off: usize = i.iter().zip(&st).enumerate().map(|(d, (&c, &s))| if d == axis { v } else { c } * s).sum();
        let dst = y.data.get_mut(off * es..(off + 1) * es).ok_or("a scatter target is out of bounds")?;
        f(red, dst, elem(&u.data, k, es)?);
        Ok(())
    })
}

fn scatter_elements(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    const OP: &str = "ScatterElements";
    prepare(ins, attrs, outs, infer_scatter_elements)?;
    scatter_common(ins, attrs, outs, OP, reduction(attrs, OP)?)
}

fn scatter(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_scatter)?;
    scatter_common(ins, attrs, outs, "Scatter", Reduction::None)
}

// ---------------------------------------------------------------------------------------
// GatherND and ScatterND.

/// The element offset in data of the index tuple `t` (of `k` values) after `base` (the
/// batch's offset), over data dims `dims` with strides `st`.
fn tuple_offset(idx: &HostTensor, t: usize, k: usize, dims: &[i64], st: &[usize], op: &str) -> Result<usize, String> {
    let mut off = 0usize;
    for j in 0..k {
        let v = resolve(int_at(idx, t * k + j), dims[j], j, op)?;
        off += v * st[j];
    }
    Ok(off)
}

fn gather_nd(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    const OP: &str = "GatherND";
    prepare(ins, attrs, outs, infer_gather_nd)?;
    let (x, idx) = (req(ins, 0)?, req(ins, 1)?);
    let (b, k, _) = plan_gather_nd(&infos(ins)?, attrs)?;
    let xs = udims(&x.shape);
    let q = idx.shape.len();
    let batches: usize = xs[..b].iter().product();
    let tuples: usize = udims(&idx.shape[b..q - 1]).iter().product();
    let slice: usize = xs[b + k..].iter().product();
    let batch_stride: usize = xs[b..].iter().product();
    let st = strides(&xs[b..]);
    let es = x.dtype.size();
    let y = first(outs)?;
    for bi in 0..batches {
        for ti in 0..tuples {
            let t = bi * tuples + ti;
            let src = bi * batch_stride + tuple_offset(idx, t, k, &x.shape[b..], &st, OP)?;
            let from = x.data.get(src * es..(src + slice) * es).ok_or("a gathered slice is out of bounds")?;
            y.data
                .get_mut(t * slice * es..(t + 1) * slice * es)
                .ok_or("an output slice is out of bounds")?
                .copy_from_slice(from);
        }
    }
    Ok(())
}

fn scatter_nd(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    const OP: &str = "ScatterND";
    prepare(ins, attrs, outs, infer_scatter_nd)?;
    let (x, idx, u) = (req(ins, 0)?, req(ins, 1)?, req(ins, 2)?);
    let (k, red) = plan_scatter_nd(&infos(ins)?, attrs)?;
    let f = combiner(red, x.dtype)?;
    let xs = udims(&x.shape);
    let tuples: usize = udims(&idx.shape[..idx.shape.len() - 1]).iter().product();
    let slice: usize = xs[k..].iter().product();
    let st = strides(&xs);
    let es = x.dtype.size();
    let y = first(outs)?;
    y.data.copy_from_slice(&x.data);
    for t in 0..tuples {
        let dst = tuple_offset(idx, t, k, &x.shape, &st, OP)?;
        for e in 0..slice {
            let d = y.data.get_mut((dst + e) * es..(dst + e + 1) * es).ok_or("a scatter target is out of bounds")?;
            f(red, d, elem(&u.data, t * slice + e, es)?);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Trilu and EyeLike.

/// Trilu's diagonal: input 2's value (default 0).
fn trilu_k(ins: Ins) -> Result<i64, String> {
    match ins.get(1).copied().flatten() {
        Some(t) if t.numel() == 1 => Ok(int_at(t, 0)),
        Some(t) => Err(format!("Trilu: k must be a scalar, found shape {:?}", t.shape)),
        None => Ok(0),
    }
}

fn trilu(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_trilu)?;
    let x = req(ins, 0)?;
    let k = trilu_k(ins)?;
    let upper = attrs.int("upper", 1) != 0;
    let r = x.shape.len();
    let (rows, cols) = (x.shape[r - 2], x.shape[r - 1]);
    let es = x.dtype.size();
    let y = first(outs)?;
    for (e, (o, i)) in y.data.chunks_exact_mut(es).zip(x.data.chunks_exact(es)).enumerate() {
        let c = (e as i64) % cols.max(1);
        let rw = (e as i64 / cols.max(1)) % rows.max(1);
        let d = c - rw;
        if (upper && d >= k) || (!upper && d <= k) {
            o.copy_from_slice(i);
        } else {
            o.fill(0);
        }
    }
    Ok(())
}

fn eye_like(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_eye_like)?;
    let k = attrs.int("k", 0);
    let y = first(outs)?;
    let (rows, cols) = (y.shape[0], y.shape[1]);
    let (d, es) = (y.dtype, y.dtype.size());
    for (e, o) in y.data.chunks_exact_mut(es).enumerate() {
        let (rw, c) = (e as i64 / cols.max(1), e as i64 % cols.max(1));
        let _ = rows;
        store_f64(d, if c - rw == k { 1.0 } else { 0.0 }, o);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// CumSum, CumProd.

fn cum_as<T: Arith>(x: &HostTensor, y: &mut HostTensor, axis: usize, prod: bool, excl: bool, rev: bool) {
    let s = udims(&x.shape);
    let (outer, n, inner) = (s[..axis].iter().product::<usize>(), s[axis], s[axis + 1..].iter().product::<usize>());
    let xs: Vec<T> = x.data.chunks_exact(T::SIZE).map(T::read).collect();
    let mut out = y.data.chunks_exact_mut(T::SIZE).collect::<Vec<_>>();
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = if prod { T::from_i64(1) } else { T::default() };
            for j in 0..n {
                let j = if rev { n - 1 - j } else { j };
                let at = (o * n + j) * inner + i;
                let v = xs[at];
                let next = if prod { acc.mul(v) } else { acc.add(v) };
                (if excl { acc } else { next }).write(out[at]);
                acc = next;
            }
        }
    }
    let _ = &mut out;
}

fn cum(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor], prod: bool) -> Res {
    prepare(ins, attrs, outs, infer_cum)?;
    let (x, a) = (req(ins, 0)?, req(ins, 1)?);
    let axis = cum_axis(&a.to_i64(), x.shape.len())?;
    let (excl, rev) = (attrs.int("exclusive", 0) != 0, attrs.int("reverse", 0) != 0);
    let y = first(outs)?;
    numeric!(x.dtype, T => cum_as::<T>(x, y, axis, prod, excl, rev));
    Ok(())
}

fn cum_sum(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    cum(ins, attrs, outs, false)
}

fn cum_prod(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    cum(ins, attrs, outs, true)
}

// ---------------------------------------------------------------------------------------
// TopK and Hardmax.

fn top_k_as<T: Arith>(x: &HostTensor, outs: &mut [HostTensor], axis: usize, k: usize, largest: bool) -> Res {
    let s = udims(&x.shape);
    let (outer, n, inner) = (s[..axis].iter().product::<usize>(), s[axis], s[axis + 1..].iter().product::<usize>());
    let xs: Vec<T> = x.data.chunks_exact(T::SIZE).map(T::read).collect();
    let [vals, idxs] = outs else { return Err("TopK writes 2 outputs".into()) };
    let mut line: Vec<usize> = Vec::with_capacity(n);
    for o in 0..outer {
        for i in 0..inner {
            line.clear();
            line.extend(0..n);
            let at = |j: usize| xs[(o * n + j) * inner + i];
            // Stable: equal values keep the lower index first.
            line.sort_by(|&a, &b| if largest { at(b).total_order(at(a)) } else { at(a).total_order(at(b)) });
            for (j, &src) in line.iter().take(k).enumerate() {
                let dst = (o * k + j) * inner + i;
                at(src).write(vals.data.get_mut(dst * T::SIZE..).ok_or("TopK: output out of bounds")?);
                put(&mut idxs.data, dst, 8, &(src as i64).to_le_bytes())?;
            }
        }
    }
    Ok(())
}

fn top_k(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_topk)?;
    let x = req(ins, 0)?;
    let (axis, k, _) = plan_topk(&infos(ins)?, attrs)?;
    let largest = attrs.int("largest", 1) != 0;
    numeric!(x.dtype, T => top_k_as::<T>(x, outs, axis, k as usize, largest))
}

fn hardmax_as<T: Arith>(x: &HostTensor, y: &mut HostTensor, (outer, n, inner): (usize, usize, usize)) {
    let xs: Vec<T> = x.data.chunks_exact(T::SIZE).map(T::read).collect();
    let mut out: Vec<T> = vec![T::default(); xs.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * n + j) * inner + i;
            // The first maximum (the first NaN, as numpy's argmax).
            let mut best = 0;
            for j in 1..n {
                if !xs[at(best)].is_nan()
                    && (xs[at(j)].is_nan() || xs[at(j)].total_order(xs[at(best)]) == Ordering::Greater)
                {
                    best = j;
                }
            }
            if n > 0 {
                out[at(best)] = T::from_i64(1);
            }
        }
    }
    for (c, v) in y.data.chunks_exact_mut(T::SIZE).zip(out) {
        v.write(c);
    }
}

fn hardmax(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_hardmax)?;
    let x = req(ins, 0)?;
    let dims = hardmax_dims(&x.shape, attrs)?;
    let y = first(outs)?;
    numeric!(x.dtype, T => hardmax_as::<T>(x, y, dims));
    Ok(())
}

// ---------------------------------------------------------------------------------------
// OneHot.

fn one_hot(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_one_hot)?;
    let (idx, vals) = (req(ins, 0)?, req(ins, 2)?);
    let (axis, (_, shape)) = plan_one_hot(&infos(ins)?, attrs)?;
    let depth = shape[axis];
    let s = udims(&shape);
    let (outer, n, inner) = (s[..axis].iter().product::<usize>(), s[axis], s[axis + 1..].iter().product::<usize>());
    let es = vals.dtype.size();
    let (off, on) = (elem(&vals.data, 0, es)?, elem(&vals.data, 1, es)?);
    let y = first(outs)?;
    for o in 0..outer {
        for i in 0..inner {
            let mut v = int_at(idx, o * inner + i);
            if v < 0 {
                v = v.wrapping_add(depth);
            }
            for j in 0..n {
                put(&mut y.data, (o * n + j) * inner + i, es, if v == j as i64 { on } else { off })?;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// DepthToSpace, SpaceToDepth.

/// Copies `x` into `y` through `src(output index) → input element`.
fn remap(x: &HostTensor, y: &mut HostTensor, src: impl Fn(&[usize]) -> usize) -> Res {
    let es = x.dtype.size();
    let shape = udims(&y.shape);
    let data = &mut y.data;
    each_index(&shape, |k, i| put(data, k, es, elem(&x.data, src(i), es)?))
}

fn depth_to_space(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_depth_to_space)?;
    let x = req(ins, 0)?;
    let (b, crd) = block_mode(attrs, "DepthToSpace")?;
    let b = b as usize;
    let [_, c, h, w] = udims(&x.shape)[..] else { return Err("DepthToSpace: the input must be 4-D".into()) };
    let co_n = c / (b * b);
    remap(x, first(outs)?, |i| {
        let (n, co, yy, xx) = (i[0], i[1], i[2], i[3]);
        let (by, bx, hi, wi) = (yy % b, xx % b, yy / b, xx / b);
        let ci = if crd { co * b * b + by * b + bx } else { (by * b + bx) * co_n + co };
        ((n * c + ci) * h + hi) * w + wi
    })
}

fn space_to_depth(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_space_to_depth)?;
    let x = req(ins, 0)?;
    let (b, crd) = block_mode(attrs, "SpaceToDepth")?;
    let b = b as usize;
    let [_, c, h, w] = udims(&x.shape)[..] else { return Err("SpaceToDepth: the input must be 4-D".into()) };
    remap(x, first(outs)?, |i| {
        let (n, co, yo, xo) = (i[0], i[1], i[2], i[3]);
        let (ci, blk) = if crd { (co / (b * b), co % (b * b)) } else { (co % c.max(1), co / c.max(1)) };
        ((n * c + ci) * h + yo * b + blk / b) * w + xo * b + blk % b
    })
}

// ---------------------------------------------------------------------------------------
// ReverseSequence, Compress, CenterCropPad.

fn reverse_sequence(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_reverse_sequence)?;
    let (x, l) = (req(ins, 0)?, req(ins, 1)?);
    let (ba, ta) = seq_axes(attrs)?;
    let lens = l.to_i64();
    check_seq_lens(&lens, x.shape[ta])?;
    let st = strides(&udims(&x.shape));
    remap(x, first(outs)?, |i| {
        let len = lens.get(i[ba]).copied().unwrap_or(0) as usize;
        let t = if i[ta] < len { len - 1 - i[ta] } else { i[ta] };
        i.iter().zip(&st).enumerate().map(|(d, (&c, &s))| if d == ta { t } else { c } * s).sum()
    })
}

fn compress(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_compress)?;
    let x = req(ins, 0)?;
    let (axis, keep, _) = plan_compress(&infos(ins)?, attrs)?;
    let s = udims(&x.shape);
    let (outer, n, inner) = match axis {
        Some(a) => (s[..a].iter().product::<usize>(), s[a], s[a + 1..].iter().product::<usize>()),
        None => (1, s.iter().product(), 1),
    };
    let es = x.dtype.size();
    let m = keep.len();
    let y = first(outs)?;
    for o in 0..outer {
        for (j, &src) in keep.iter().enumerate() {
            let from = x
                .data
                .get((o * n + src) * inner * es..(o * n + src + 1) * inner * es)
                .ok_or("Compress: out of bounds")?;
            y.data
                .get_mut((o * m + j) * inner * es..(o * m + j + 1) * inner * es)
                .ok_or("Compress: out of bounds")?
                .copy_from_slice(from);
        }
    }
    Ok(())
}

fn center_crop_pad(ins: Ins, attrs: &Attrs, outs: &mut [HostTensor]) -> Res {
    prepare(ins, attrs, outs, infer_center_crop_pad)?;
    let x = req(ins, 0)?;
    let y = first(outs)?;
    let offs = center_offsets(&x.shape, &y.shape);
    let st = strides(&udims(&x.shape));
    let es = x.dtype.size();
    let shape = udims(&y.shape);
    let data = &mut y.data;
    each_index(&shape, |k, i| {
        let mut src = 0usize;
        for (d, &c) in i.iter().enumerate() {
            let (ioff, ooff) = offs[d];
            let v = c as i64 - ooff + ioff;
            if c as i64 - ooff < 0 || v >= x.shape[d] || v < 0 {
                return put(data, k, es, &[0u8; 8][..es]);
            }
            src += v as usize * st[d];
        }
        put(data, k, es, elem(&x.data, src, es)?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ops::{OpDef, OPS};

    fn def(name: &str) -> &'static OpDef {
        OPS.iter().find(|o| o.name == name).unwrap_or_else(|| panic!("no operator {name}"))
    }

    fn tensor<T: Arith>(d: DType, shape: &[i64], v: &[T]) -> HostTensor {
        let mut data = vec![0u8; v.len() * T::SIZE];
        for (c, x) in data.chunks_exact_mut(T::SIZE).zip(v) {
            x.write(c);
        }
        HostTensor::new(d, shape.to_vec(), data).unwrap()
    }

    fn f(shape: &[i64], v: &[f32]) -> HostTensor {
        tensor(DType::F32, shape, v)
    }

    fn i64s(shape: &[i64], v: &[i64]) -> HostTensor {
        tensor(DType::I64, shape, v)
    }

    fn iota(d: DType, shape: &[i64]) -> HostTensor {
        let n = shape.iter().product::<i64>() as usize;
        let mut t = HostTensor::zeros(d, shape).unwrap();
        for (i, c) in t.data.chunks_exact_mut(d.size()).enumerate().take(n) {
            store_f64(d, i as f64, c);
        }
        t
    }

    fn attrs(list: &[(&str, AttrValue)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    fn int(v: i64) -> AttrValue {
        AttrValue::Int(v)
    }

    fn s(v: &str) -> AttrValue {
        AttrValue::Str(v.into())
    }

    /// Runs an operator as the interpreter does: attribute check, inference with the input
    /// values known, zeroed outputs, host kernel.
    fn run(name: &str, ins: &[&HostTensor], a: &Attrs) -> Result<Vec<HostTensor>, String> {
        let d = def(name);
        d.check_attrs(a)?;
        let infos: Vec<Option<crate::ops::TensorInfo>> = ins
            .iter()
            .map(|t| Some(crate::ops::TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) }))
            .collect();
        let inferred = (d.infer)(&infos, a)?;
        let mut outs: Vec<HostTensor> = inferred.iter().map(|(dt, s)| HostTensor::zeros(*dt, s).unwrap()).collect();
        let ins: Vec<Option<&HostTensor>> = ins.iter().map(|&t| Some(t)).collect();
        (d.op.id().host_kernel().unwrap())(&ins, a, &mut outs)?;
        Ok(outs)
    }

    fn ok(name: &str, ins: &[&HostTensor], a: &Attrs) -> HostTensor {
        run(name, ins, a).unwrap_or_else(|e| panic!("{name}: {e}")).remove(0)
    }

    fn err(name: &str, ins: &[&HostTensor], a: &Attrs) -> String {
        run(name, ins, a).err().unwrap_or_else(|| panic!("{name} should fail"))
    }

    fn vals(t: &HostTensor) -> Vec<f64> {
        t.to_f64()
    }

    #[test]
    fn gather_elements_and_negative_indices() {
        let d = f(&[3, 3], &[1., 2., 3., 4., 5., 6., 7., 8., 9.]);
        let idx = i64s(&[2, 3], &[-1, -2, 0, -2, 0, 0]);
        let y = ok("GatherElements", &[&d, &idx], &Attrs::default());
        assert_eq!(y.shape, vec![2, 3]);
        assert_eq!(vals(&y), vec![7., 5., 3., 4., 2., 3.]);
        let idx = i64s(&[2, 2], &[0, 0, 1, 0]);
        let d2 = f(&[2, 2], &[1., 2., 3., 4.]);
        assert_eq!(vals(&ok("GatherElements", &[&d2, &idx], &attrs(&[("axis", int(1))]))), vec![1., 1., 4., 3.]);
        let e = err("GatherElements", &[&d2, &i64s(&[1, 1], &[2])], &Attrs::default());
        assert!(e.contains("index 2 is out of range for axis 0 of size 2"), "{e}");
        let e = err("GatherElements", &[&d2, &i64s(&[2], &[0, 1])], &Attrs::default());
        assert!(e.contains("rank"), "{e}");
    }

    #[test]
    fn scatter_elements_reductions_in_order() {
        let d = f(&[1, 5], &[1., 2., 3., 4., 5.]);
        let idx = i64s(&[1, 2], &[1, 1]);
        let u = f(&[1, 2], &[1.1, 2.1]);
        let ax = |r: &str| attrs(&[("axis", int(1)), ("reduction", s(r))]);
        let y = ok("ScatterElements", &[&d, &idx, &u], &ax("add"));
        assert_eq!(vals(&y)[1] as f32, 2.0 + 1.1 + 2.1);
        let y = ok("ScatterElements", &[&d, &idx, &u], &ax("none"));
        assert_eq!(vals(&y)[1] as f32, 2.1);
        let y = ok("ScatterElements", &[&d, &idx, &u], &ax("mul"));
        assert_eq!(vals(&y)[1] as f32, 2.0 * 1.1 * 2.1);
        let y = ok("ScatterElements", &[&d, &idx, &u], &ax("max"));
        assert_eq!(vals(&y)[1] as f32, 2.1);
        let y = ok("ScatterElements", &[&d, &idx, &u], &ax("min"));
        assert_eq!(vals(&y)[1] as f32, 1.1);
        let y = ok("Scatter", &[&d, &i64s(&[1, 2], &[-1, 0]), &u], &attrs(&[("axis", int(1))]));
        assert_eq!(vals(&y), [2.1, 2., 3., 4., 1.1].iter().map(|&v: &f64| v as f32 as f64).collect::<Vec<_>>());
        let e = err("ScatterElements", &[&d, &i64s(&[1, 2], &[5, 0]), &u], &ax("none"));
        assert!(e.contains("index 5 is out of range for axis 1 of size 5"), "{e}");
        let e = def("ScatterElements").check_attrs(&ax("avg")).unwrap_err();
        assert!(e.contains("reduction \"avg\""), "{e}");
        let b = HostTensor::new(DType::Bool, vec![1, 5], vec![0; 5]).unwrap();
        let bu = HostTensor::new(DType::Bool, vec![1, 2], vec![1; 2]).unwrap();
        assert!(err("ScatterElements", &[&b, &idx, &bu], &ax("add")).contains("numeric"));
        assert_eq!(ok("ScatterElements", &[&b, &idx, &bu], &ax("none")).data, vec![0, 1, 0, 0, 0]);
    }

    #[test]
    fn gather_nd_and_scatter_nd() {
        let d = tensor(DType::I32, &[2, 2], &[0i32, 1, 2, 3]);
        let y = ok("GatherND", &[&d, &i64s(&[2, 2], &[0, 0, 1, 1])], &Attrs::default());
        assert_eq!(y.to_i64(), vec![0, 3]);
        let d3 = tensor(DType::I32, &[2, 2, 2], &[0i32, 1, 2, 3, 4, 5, 6, 7]);
        let y = ok("GatherND", &[&d3, &i64s(&[2, 1], &[1, 0])], &attrs(&[("batch_dims", int(1))]));
        assert_eq!((y.shape.clone(), y.to_i64()), (vec![2, 2], vec![2, 3, 4, 5]));
        let y = ok("GatherND", &[&d3, &i64s(&[2, 1, 2], &[0, 1, -1, 0])], &Attrs::default());
        assert_eq!((y.shape.clone(), y.to_i64()), (vec![2, 1, 2], vec![2, 3, 4, 5]));
        assert!(err("GatherND", &[&d3, &i64s(&[1, 1], &[2])], &Attrs::default()).contains("out of range"));
        let data = iota(DType::F32, &[4, 2]);
        let u = f(&[2, 2], &[10., 11., 20., 21.]);
        let y = ok("ScatterND", &[&data, &i64s(&[2, 1], &[3, -4]), &u], &Attrs::default());
        assert_eq!(vals(&y), vec![20., 21., 2., 3., 4., 5., 10., 11.]);
        let y = ok("ScatterND", &[&data, &i64s(&[2, 1], &[1, 1]), &u], &attrs(&[("reduction", s("add"))]));
        assert_eq!(vals(&y), vec![0., 1., 32., 35., 4., 5., 6., 7.]);
        let e = err("ScatterND", &[&data, &i64s(&[2, 1], &[1, 1]), &f(&[2], &[0., 0.])], &Attrs::default());
        assert!(e.contains("updates"), "{e}");
    }

    #[test]
    fn trilu_and_eye_like() {
        let x = iota(DType::I64, &[3, 4]);
        let y = ok("Trilu", &[&x], &Attrs::default());
        assert_eq!(y.to_i64(), vec![0, 1, 2, 3, 0, 5, 6, 7, 0, 0, 10, 11]);
        let k = i64s(&[], &[-1]);
        let y = ok("Trilu", &[&x, &k], &attrs(&[("upper", int(0))]));
        assert_eq!(y.to_i64(), vec![0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0]);
        let y = ok("EyeLike", &[&x], &attrs(&[("k", int(1)), ("dtype", int(11))]));
        assert_eq!((y.dtype, vals(&y)), (DType::F64, vec![0., 1., 0., 0., 0., 0., 1., 0., 0., 0., 0., 1.]));
        assert!(err("EyeLike", &[&iota(DType::F32, &[2])], &Attrs::default()).contains("2-D"));
        // UINT4 is no dtype of the VM; bf16 (16) and the float8 types are.
        assert!(def("EyeLike").check_attrs(&attrs(&[("dtype", int(21))])).is_err());
        let y = ok("EyeLike", &[&x], &attrs(&[("dtype", int(17))]));
        assert_eq!((y.dtype, y.data[..5].to_vec()), (DType::F8E4M3FN, vec![0x38, 0, 0, 0, 0]));
    }

    #[test]
    fn cumsum_cumprod_modes() {
        let x = tensor(DType::F64, &[5], &[1f64, 2., 3., 4., 5.]);
        let ax = i64s(&[], &[0]);
        let run = |op, e, r| vals(&ok(op, &[&x, &ax], &attrs(&[("exclusive", int(e)), ("reverse", int(r))])));
        assert_eq!(run("CumSum", 0, 0), vec![1., 3., 6., 10., 15.]);
        assert_eq!(run("CumSum", 1, 0), vec![0., 1., 3., 6., 10.]);
        assert_eq!(run("CumSum", 0, 1), vec![15., 14., 12., 9., 5.]);
        assert_eq!(run("CumSum", 1, 1), vec![14., 12., 9., 5., 0.]);
        assert_eq!(run("CumProd", 1, 1), vec![120., 60., 20., 5., 1.]);
        let x2 = tensor(DType::I32, &[2, 3], &[1i32, 2, 3, 4, 5, 6]);
        let y = ok("CumSum", &[&x2, &tensor(DType::I32, &[], &[-1i32])], &Attrs::default());
        assert_eq!(y.to_i64(), vec![1, 3, 6, 4, 9, 15]);
        let y = ok("CumProd", &[&x2, &i64s(&[], &[0])], &Attrs::default());
        assert_eq!(y.to_i64(), vec![1, 2, 3, 4, 10, 18]);
        assert!(err("CumSum", &[&x2, &i64s(&[], &[2])], &Attrs::default()).contains("out of range"));
    }

    #[test]
    fn top_k_ties_and_nan() {
        let x = f(&[2, 4], &[1., 3., 3., 2., f32::NAN, 0., 5., 5.]);
        let k = i64s(&[1], &[3]);
        let o = run("TopK", &[&x, &k], &Attrs::default()).unwrap();
        assert_eq!(o[1].to_i64(), vec![1, 2, 3, 0, 2, 3]);
        assert_eq!(vals(&o[0])[..3], [3., 3., 2.]);
        let o = run("TopK", &[&x, &k], &attrs(&[("largest", int(0))])).unwrap();
        assert_eq!(o[1].to_i64(), vec![0, 3, 1, 1, 2, 3]);
        let u = tensor(DType::U64, &[3], &[u64::MAX, 1, u64::MAX - 1]);
        let o = run("TopK", &[&u, &i64s(&[1], &[2])], &attrs(&[("axis", int(0))])).unwrap();
        assert_eq!(o[1].to_i64(), vec![0, 2]);
        assert!(err("TopK", &[&x, &i64s(&[1], &[5])], &Attrs::default()).contains("k = 5"));
    }

    #[test]
    fn hardmax_first_maximum() {
        let x = f(&[2, 3], &[1., 3., 3., -1., -2., -3.]);
        assert_eq!(vals(&ok("Hardmax", &[&x], &Attrs::default())), vec![0., 1., 0., 1., 0., 0.]);
        assert_eq!(vals(&ok("Hardmax", &[&x], &attrs(&[("axis", int(0))]))), vec![1., 1., 1., 0., 0., 0.]);
        // Opset 11: flattened to 2-D at axis 0, one maximum in the whole tensor.
        let y = ok("Hardmax", &[&x], &attrs(&[("axis", int(0)), ("onnx_opset", int(11))]));
        assert_eq!(vals(&y), vec![0., 1., 0., 0., 0., 0.]);
    }

    #[test]
    fn one_hot_axes_and_out_of_range() {
        let idx = i64s(&[3], &[0, -1, 5]);
        let depth = f(&[], &[4.]);
        let v = tensor(DType::I32, &[2], &[2i32, 7]);
        let y = ok("OneHot", &[&idx, &depth, &v], &Attrs::default());
        assert_eq!(y.to_i64(), vec![7, 2, 2, 2, 2, 2, 2, 7, 2, 2, 2, 2]);
        let y = ok("OneHot", &[&idx, &depth, &v], &attrs(&[("axis", int(0))]));
        assert_eq!(y.shape, vec![4, 3]);
        assert_eq!(y.to_i64(), vec![7, 2, 2, 2, 2, 2, 2, 2, 2, 2, 7, 2]);
        let e = err("OneHot", &[&idx, &f(&[], &[0.]), &v], &Attrs::default());
        assert!(e.contains("depth 0 must be a positive integer"), "{e}");
    }

    #[test]
    fn depth_space_round_trip() {
        let x = iota(DType::F32, &[1, 8, 2, 3]);
        for mode in ["DCR", "CRD"] {
            let a = attrs(&[("blocksize", int(2)), ("mode", s(mode))]);
            let y = ok("DepthToSpace", &[&x], &a);
            assert_eq!(y.shape, vec![1, 2, 4, 6]);
            assert_eq!(ok("SpaceToDepth", &[&y], &a), x);
        }
        // First output row: DCR interleaves channels 0 and 2 (blocks of C/b² = 2), CRD 0 and 1.
        let y = ok("DepthToSpace", &[&x], &attrs(&[("blocksize", int(2))]));
        assert_eq!(vals(&y)[..6], [0., 12., 1., 13., 2., 14.]);
        let y = ok("DepthToSpace", &[&x], &attrs(&[("blocksize", int(2)), ("mode", s("CRD"))]));
        assert_eq!(vals(&y)[..6], [0., 6., 1., 7., 2., 8.]);
        assert!(err("DepthToSpace", &[&x], &attrs(&[("blocksize", int(3))])).contains("multiple"));
        assert!(def("SpaceToDepth").check_attrs(&Attrs::default()).is_err());
    }

    #[test]
    fn reverse_sequence_compress_center_crop_pad() {
        let x = iota(DType::F32, &[4, 4]);
        let l = i64s(&[4], &[4, 3, 2, 1]);
        let y = ok("ReverseSequence", &[&x, &l], &attrs(&[("batch_axis", int(1)), ("time_axis", int(0))]));
        assert_eq!(vals(&y), vec![12., 9., 6., 3., 8., 5., 2., 7., 4., 1., 10., 11., 0., 13., 14., 15.]);
        assert!(err("ReverseSequence", &[&x, &i64s(&[4], &[5, 0, 0, 0])], &Attrs::default()).contains("out of range"));
        let x = iota(DType::F32, &[3, 2]);
        let c = HostTensor::new(DType::Bool, vec![3], vec![0, 1, 1]).unwrap();
        assert_eq!(vals(&ok("Compress", &[&x, &c], &attrs(&[("axis", int(0))]))), vec![2., 3., 4., 5.]);
        let c = HostTensor::new(DType::Bool, vec![5], vec![0, 1, 0, 0, 1]).unwrap();
        assert_eq!(vals(&ok("Compress", &[&x, &c], &Attrs::default())), vec![1., 4.]);
        let x = iota(DType::F32, &[5, 2]);
        let y = ok("CenterCropPad", &[&x, &i64s(&[2], &[2, 5])], &Attrs::default());
        assert_eq!(y.shape, vec![2, 5]);
        assert_eq!(vals(&y), vec![0., 2., 3., 0., 0., 0., 4., 5., 0., 0.]);
    }
}
