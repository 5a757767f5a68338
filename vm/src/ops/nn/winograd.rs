//! Winograd F(2x2, 3x3): 3x3 convolutions with unit strides and dilations in 16
//! multiplies per 2x2 output tile and input channel instead of 36.
//!
//! With `g` a 3x3 kernel and `d` a 4x4 input tile, the 2x2 output tile is
//! `Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A`. Summed over input channels, the elementwise product is
//! 16 matrix products, one per position `p` of the 4x4 transformed tile:
//! `M[p] (K x T) = U[p] (K x C) · V[p] (C x T)`, for K output channels, C input channels
//! and T tiles. The transformed weights `U` are packed once for the GEMM (and kept with a
//! constant, in place of the im2col packing: 16/9 of the weights); the input is
//! transformed a block of tile rows at a time into `V`, the products run on the packed
//! GEMM, and the output transform writes the output rows with the bias.
//!
//! Layouts: `V` is `[C][16][T]` and `M` is `[K][16][T]`, so that a range of channels is
//! one contiguous run (what threads split), and position `p`'s matrix is every 16th row.

use super::epilogue::{Activation, Epilogue, Post};
use super::gemm::{gemm_rows, Mat, PackedA};
use super::workers::{ranges, run_parts, threads, PAR_WORK};
use crate::ir::host_tensor::ConstOperand;
use crate::ir::operators::nn::ConvDims;
use std::cell::RefCell;
use std::sync::Arc;

/// Positions of a transformed tile.
const POS: usize = 16;
/// Tiles per block, about (whole tile rows). Every block reads all the transformed
/// weights, so blocks must be large for the products to outweigh that reading; the
/// block's products stay in the core's cache because they are made for a chunk of
/// output channels at a time.
const BLOCK_TILES: usize = 256;
/// Bytes of products per chunk of output channels: they stay in the core's cache from
/// the products to the output transform.
const M_BYTES: usize = 1 << 19;

/// Layers with fewer tiles than this take Winograd only when their transformed weights
/// are at most [`SMALL_WEIGHTS`] bytes (see [`Wino::new`]).
const FEW_TILES: usize = 32;
/// Input channels per group, at least: each of the 16 products is a GEMM summing over
/// this many, and with fewer their short sums and the transforms cost more than the
/// multiplies saved (docs/performance.md, "What made the host path faster").
const MIN_CHANNELS: usize = 16;
const SMALL_WEIGHTS: usize = 1 << 20;

thread_local! {
    /// A block's transformed input `V` and products `M`, per thread.
    static BLOCK: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// The geometry of one convolution that Winograd takes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Wino {
    n: usize,
    group: usize,
    c: usize,
    m: usize,
    cg: usize,
    mg: usize,
    ih: usize,
    iw: usize,
    oh: usize,
    ow: usize,
    pt: usize,
    pl: usize,
    /// Tile rows and columns (2x2 outputs each).
    th: usize,
    tw: usize,
}

impl Wino {
    /// The convolution's geometry when Winograd takes it: a 2-D 3x3 kernel with unit
    /// strides and dilations, pads up to 2, and enough channels and tiles that the
    /// transforms cost less than the multiplies they save. Its weights are 16/9 of the
    /// im2col path's, and every call reads them all: a layer with few tiles and large
    /// weights (resnet50's 7x7 layers, 16 MiB of transformed weights for 16 tiles) is
    /// bound by reading them from memory, which Winograd makes slower.
    pub(super) fn new(cd: &ConvDims) -> Option<Wino> {
        let g = &cd.geo;
        let unit = |v: &[usize]| v.iter().all(|&s| s == 1);
        let pads_ok = g.pb.iter().chain(&g.pe).all(|&p| (0..=2).contains(&p));
        if g.k != [3, 3] || !unit(&g.s) || !unit(&g.d) || !pads_ok || cd.group == 0 {
            return None;
        }
        let (cg, mg) = (cd.c / cd.group, cd.m / cd.group);
        let (oh, ow) = (g.out_sp[0], g.out_sp[1]);
        let (th, tw) = (oh.div_ceil(2), ow.div_ceil(2));
        let weight_bytes = POS * cg * mg * 4;
        if cg < MIN_CHANNELS || mg < 16 || th * tw < 16 || (th * tw < FEW_TILES && weight_bytes > SMALL_WEIGHTS) {
            return None;
        }
        Some(Wino {
            n: cd.n,
            group: cd.group,
            c: cd.c,
            m: cd.m,
            cg,
            mg,
            ih: g.in_sp[0],
            iw: g.in_sp[1],
            oh,
            ow,
            pt: g.pb[0] as usize,
            pl: g.pb[1] as usize,
            th,
            tw,
        })
    }
}

/// One group's transformed weights, packed for the GEMM: `U[p]` (mg x cg) per position.
pub(super) struct Weights {
    packed: Vec<PackedA>,
}

impl Weights {
    /// Transforms and packs a group's weights `wg` ([mg, cg, 3, 3]).
    fn new(wg: &[f32], mg: usize, cg: usize) -> Weights {
        let mut u = vec![0f32; POS * mg * cg];
        for (kc, g) in wg.chunks_exact(9).enumerate().take(mg * cg) {
            // G g (4x3), then (G g) Gᵀ (4x4), with G = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1].
            let mut gg = [[0f32; 3]; 4];
            for j in 0..3 {
                let (a, b, c) = (g[j], g[3 + j], g[6 + j]);
                gg[0][j] = a;
                gg[1][j] = 0.5 * (a + b + c);
                gg[2][j] = 0.5 * (a - b + c);
                gg[3][j] = c;
            }
            for (i, r) in gg.iter().enumerate() {
                let row = [r[0], 0.5 * (r[0] + r[1] + r[2]), 0.5 * (r[0] - r[1] + r[2]), r[2]];
                for (j, &v) in row.iter().enumerate() {
                    u[(i * 4 + j) * mg * cg + kc] = v;
                }
            }
        }
        let packed = u
            .chunks_exact(mg * cg)
            .map(|up| PackedA::new(Mat { d: up, rs: cg, cs: 1, packed: None }, mg, cg, Vec::new()))
            .collect();
        Weights { packed }
    }
}

/// The convolution of `x` by `w` (with bias `b`) into `y`, every element of which it
/// writes; `w_const` is the weights' constant, if they are one, to keep their transform.
pub(super) fn conv(
    x: &[f32],
    (w, w_const): (&[f32], Option<ConstOperand>),
    b: Option<&[f32]>,
    post: Post,
    wi: &Wino,
    y: &mut [f32],
) -> Result<(), String> {
    let (in_plane, out_plane) = (wi.ih * wi.iw, wi.oh * wi.ow);
    if post.z.is_some_and(|z| z.len() != y.len()) {
        return Err("Z does not match the output".into());
    }
    let (cg, mg) = (wi.cg, wi.mg);
    for item in 0..wi.n * wi.group {
        let (ni, gi) = (item / wi.group, item % wi.group);
        let xg = &x[(ni * wi.c + gi * cg) * in_plane..][..cg * in_plane];
        let wg = &w[gi * mg * cg * 9..][..mg * cg * 9];
        let bg = b.map(|b| &b[gi * mg..][..mg]);
        let at = (ni * wi.m + gi * mg) * out_plane;
        let yg = &mut y[at..][..mg * out_plane];
        let post = Post { z: post.z.map(|z| &z[at..][..mg * out_plane]), ..post };
        let weights = match w_const {
            Some(c) => {
                c.get_or_make("winograd weights", gi as u64, [mg as u64, cg as u64], || Weights::new(wg, mg, cg))
            }
            None => Arc::new(Weights::new(wg, mg, cg)),
        };
        item_conv(xg, &weights, bg, post, wi, yg)?;
    }
    Ok(())
}

/// One (batch, group) item: blocks of tile rows, split between threads when there are
/// several; a single block splits each phase instead.
fn item_conv(xg: &[f32], u: &Weights, b: Option<&[f32]>, post: Post, wi: &Wino, y: &mut [f32]) -> Result<(), String> {
    let (tw, th, ow, oh) = (wi.tw, wi.th, wi.ow, wi.oh);
    let work = (POS * wi.mg * wi.cg * th * tw) as f64;
    let par = threads() > 1 && work >= PAR_WORK;
    let mut count = th.div_ceil((BLOCK_TILES / tw).clamp(1, th));
    if par && count > 1 {
        // As many blocks for every thread, so that none waits for another.
        count = count.next_multiple_of(threads()).min(th);
    }
    let rows_per_block = th.div_ceil(count);
    let blocks: Vec<(usize, usize)> =
        (0..th).step_by(rows_per_block).map(|t0| (t0, (t0 + rows_per_block).min(th))).collect();
    if blocks.len() == 1 && par {
        return BLOCK.with_borrow_mut(|(v, m)| one_block_split(xg, u, b, post, wi, v, m, y));
    }
    // Each block's output rows, in every output plane.
    let out_rows = |(t0, t1): (usize, usize)| (2 * t0 * ow, (2 * t1).min(oh) * ow);
    let mut lists: Vec<Vec<&mut [f32]>> = blocks.iter().map(|_| Vec::with_capacity(wi.mg)).collect();
    for plane in y.chunks_exact_mut(oh * ow) {
        let mut rest = plane;
        for (list, &blk) in lists.iter_mut().zip(&blocks) {
            let (a, z) = out_rows(blk);
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(z - a);
            list.push(head);
            rest = tail;
        }
    }
    let mr = u.packed[0].mr;
    let job = |(&(t0, t1), mut rows): (&(usize, usize), Vec<&mut [f32]>)| {
        BLOCK.with_borrow_mut(|(v, m)| {
            let t = (t1 - t0) * tw;
            v.resize(wi.cg * POS * t, 0.0);
            input_transform(xg, wi, t0, t1, 0, v);
            // Output channels in chunks (whole strips of the GEMM kernel's rows).
            let chunk = (M_BYTES / (4 * POS * t) / mr * mr).max(mr);
            for (k0, rows) in (0..wi.mg).step_by(chunk).zip(rows.chunks_mut(chunk)) {
                // (The products write every element: no need to clear it.)
                m.resize(rows.len() * POS * t, 0.0);
                for (p, mut mrows) in by_position(m, t).into_iter().enumerate() {
                    product(u, p, k0, t, wi, v, &mut mrows)?;
                }
                output_transform(m, b, wi, t0, t1, k0, rows);
                if post.any() {
                    for (ki, row) in rows.iter_mut().enumerate() {
                        post.apply((k0 + ki) * oh * ow + 2 * t0 * ow, row);
                    }
                }
            }
            Ok(())
        })
    };
    if par {
        run_parts(blocks.iter().zip(lists), job)
    } else {
        blocks.iter().zip(lists).try_for_each(job)
    }
}

/// A single block with its phases split between threads: the input transform by input
/// channels, the products by positions, the output transform by output channels.
#[allow(clippy::too_many_arguments)]
fn one_block_split(
    xg: &[f32],
    u: &Weights,
    b: Option<&[f32]>,
    post: Post,
    wi: &Wino,
    v: &mut Vec<f32>,
    m: &mut Vec<f32>,
    y: &mut [f32],
) -> Result<(), String> {
    let (t0, t1) = (0, wi.th);
    let t = wi.th * wi.tw;
    let nt = threads();
    v.resize(wi.cg * POS * t, 0.0);
    // (The products write every element: no need to clear it.)
    m.resize(wi.mg * POS * t, 0.0);
    let cparts = ranges(wi.cg, nt, 1);
    let mut vparts = Vec::with_capacity(cparts.len());
    let mut rest = &mut v[..];
    for &(c0, c1) in &cparts {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut((c1 - c0) * POS * t);
        vparts.push((c0, head));
        rest = tail;
    }
    run_parts(vparts, |(c0, vp)| {
        input_transform(xg, wi, t0, t1, c0, vp);
        Ok(())
    })?;
    let v = &v[..];
    // The products by positions: each job takes whole positions.
    let mut rows = by_position(m, t).into_iter();
    let jobs: Vec<_> =
        ranges(POS, nt, 1).into_iter().map(|(p0, p1)| (p0, rows.by_ref().take(p1 - p0).collect::<Vec<_>>())).collect();
    run_parts(jobs, |(p0, mut rows)| {
        rows.iter_mut().enumerate().try_for_each(|(i, prow)| product(u, p0 + i, 0, t, wi, v, prow))
    })?;
    let m = &m[..];
    let kparts = ranges(wi.mg, nt, 1);
    let mut yparts = Vec::with_capacity(kparts.len());
    let mut rest = y;
    for &(k0, k1) in &kparts {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut((k1 - k0) * wi.oh * wi.ow);
        yparts.push((k0, head.chunks_exact_mut(wi.oh * wi.ow).collect::<Vec<_>>()));
        rest = tail;
    }
    run_parts(yparts, |(k0, mut planes)| {
        output_transform(&m[k0 * POS * t..], b, wi, t0, t1, k0, &mut planes);
        if post.any() {
            for (ki, plane) in planes.iter_mut().enumerate() {
                post.apply((k0 + ki) * wi.oh * wi.ow, plane);
            }
        }
        Ok(())
    })
}

/// The rows of `m` ([K][16][T]) by position: `M[p]`'s rows, one per output channel.
fn by_position(m: &mut [f32], t: usize) -> Vec<Vec<&mut [f32]>> {
    let mut rows: Vec<Vec<&mut [f32]>> = (0..POS).map(|_| Vec::with_capacity(m.len() / (POS * t).max(1))).collect();
    for (r, row) in m.chunks_exact_mut(t).enumerate() {
        rows[r % POS].push(row);
    }
    rows
}

/// `M[p] += U[p] V[p]` for position `p` over output channels `k0..` (`rows`: M[p]'s
/// rows, one per output channel from `k0`, which is a multiple of the kernel's rows).
fn product(
    u: &Weights,
    p: usize,
    k0: usize,
    t: usize,
    wi: &Wino,
    v: &[f32],
    rows: &mut [&mut [f32]],
) -> Result<(), String> {
    let a = Mat::packed(&u.packed[p], k0);
    let vb = Mat { d: &v[p * t..], rs: POS * t, cs: 1, packed: None };
    gemm_rows(rows.len(), t, wi.cg, 1.0, a, vb, rows, false, Epilogue::write(None, Activation::Identity, None))
}

widest! {
    /// Transforms the input tiles of tile rows `t0..t1` of input channels `c0..` (as
    /// many as `v` holds) into `v` ([C][16][T]): `Bᵀ d B` per tile, with
    /// `Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]`, zero outside the input.
    /// Each input row is split into its even and odd columns, so that the rows' and then
    /// the columns' combinations are contiguous vector operations over whole tile rows.
    fn input_transform(xg: &[f32], wi: &Wino, t0: usize, t1: usize, c0: usize, v: &mut [f32]) {
        let (ih, iw, tw) = (wi.ih, wi.iw, wi.tw);
        let t = (t1 - t0) * tw;
        let w1 = tw + 1;
        // Even and odd columns of the tile row's 4 input rows, then their row
        // combinations: [e0..e3, o0..o3] each w1 long.
        let mut eo = vec![0f32; 8 * w1];
        let mut te = vec![0f32; 8 * w1];
        for (ci, vc) in v.chunks_exact_mut(POS * t).enumerate() {
            let xp = &xg[(c0 + ci) * ih * iw..][..ih * iw];
            for ty in t0..t1 {
                for r in 0..4 {
                    let (e, o) = eo[r * 2 * w1..][..2 * w1].split_at_mut(w1);
                    let iy = (2 * ty + r).wrapping_sub(wi.pt);
                    if iy >= ih {
                        e.fill(0.0);
                        o.fill(0.0);
                        continue;
                    }
                    deinterleave(&xp[iy * iw..][..iw], wi.pl, e, o);
                }
                {
                    let (e, rest) = eo.split_at(2 * w1);
                    let (r1, rest) = rest.split_at(2 * w1);
                    let (r2, r3) = rest.split_at(2 * w1);
                    // Rows: t0 = d0 - d2, t1 = d1 + d2, t2 = d2 - d1, t3 = d1 - d3 (even
                    // and odd columns alike).
                    let (a0, rest) = te.split_at_mut(2 * w1);
                    let (a1, rest) = rest.split_at_mut(2 * w1);
                    let (a2, a3) = rest.split_at_mut(2 * w1);
                    for j in 0..2 * w1 {
                        let (d0, d1, d2, d3) = (e[j], r1[j], r2[j], r3[j]);
                        a0[j] = d0 - d2;
                        a1[j] = d1 + d2;
                        a2[j] = d2 - d1;
                        a3[j] = d1 - d3;
                    }
                }
                let base = (ty - t0) * tw;
                for i in 0..4 {
                    let (e, o) = te[i * 2 * w1..][..2 * w1].split_at(w1);
                    let (e0, e1, o0, o1) = (&e[..tw], &e[1..=tw], &o[..tw], &o[1..=tw]);
                    let dst = &mut vc[i * 4 * t..][..4 * t];
                    let (v0, rest) = dst.split_at_mut(t);
                    let (v1, rest) = rest.split_at_mut(t);
                    let (v2, v3) = rest.split_at_mut(t);
                    let (v0, v1) = (&mut v0[base..][..tw], &mut v1[base..][..tw]);
                    let (v2, v3) = (&mut v2[base..][..tw], &mut v3[base..][..tw]);
                    // Columns: c0 = e[x], c1 = o[x], c2 = e[x + 1], c3 = o[x + 1].
                    for x in 0..tw {
                        v0[x] = e0[x] - e1[x];
                        v1[x] = o0[x] + e1[x];
                        v2[x] = e1[x] - o0[x];
                        v3[x] = o0[x] - o1[x];
                    }
                }
            }
        }
    }
}

/// The even and odd columns of an input row padded by `pl` zeros on the left (and zeros
/// past its end): `e[j] = row[2j - pl]`, `o[j] = row[2j + 1 - pl]`.
#[inline(always)]
fn deinterleave(row: &[f32], pl: usize, e: &mut [f32], o: &mut [f32]) {
    let n = e.len();
    // Padded column q holds row[q - pl]; columns 2j and 2j + 1 inside the row for
    // j in lo..hi, both.
    let lo = pl.div_ceil(2).min(n);
    let hi = ((row.len() + pl) / 2).clamp(lo, n);
    let at = |q: usize| q.checked_sub(pl).and_then(|i| row.get(i)).copied().unwrap_or(0.0);
    for j in (0..lo).chain(hi..n) {
        e[j] = at(2 * j);
        o[j] = at(2 * j + 1);
    }
    let src = &row[2 * lo - pl..2 * hi - pl];
    for ((e, o), pair) in e[lo..hi].iter_mut().zip(&mut o[lo..hi]).zip(src.chunks_exact(2)) {
        *e = pair[0];
        *o = pair[1];
    }
}

widest! {
    /// Transforms the products of tile rows `t0..t1` (`m`: [K][16][T], output channels
    /// `k0..`) into the output rows of those tiles in `planes` (one per output channel,
    /// from the block's first output row), `Aᵀ M A` per tile plus the bias, with
    /// `Aᵀ = [1 1 1 0; 0 1 -1 -1]`.
    fn output_transform(
        m: &[f32],
        b: Option<&[f32]>,
        wi: &Wino,
        t0: usize,
        t1: usize,
        k0: usize,
        planes: &mut [&mut [f32]],
    ) {
        let (tw, ow, oh) = (wi.tw, wi.ow, wi.oh);
        let t = (t1 - t0) * tw;
        let mut s = vec![0f32; 4 * tw];
        for (ki, plane) in planes.iter_mut().enumerate() {
            let mk = &m[ki * POS * t..][..POS * t];
            let bias = b.map_or(0.0, |b| b[k0 + ki]);
            for ty in t0..t1 {
                let base = (ty - t0) * tw;
                let at = |p: usize| &mk[p * t + base..][..tw];
                let (y00, rest) = s.split_at_mut(tw);
                let (y01, rest) = rest.split_at_mut(tw);
                let (y10, y11) = rest.split_at_mut(tw);
                {
                    let (m00, m01, m02, m03) = (at(0), at(1), at(2), at(3));
                    let (m10, m11, m12, m13) = (at(4), at(5), at(6), at(7));
                    let (m20, m21, m22, m23) = (at(8), at(9), at(10), at(11));
                    let (m30, m31, m32, m33) = (at(12), at(13), at(14), at(15));
                    for x in 0..tw {
                        // Rows first: s0 = m0 + m1 + m2, s1 = m1 - m2 - m3; then columns.
                        let s00 = m00[x] + m10[x] + m20[x];
                        let s01 = m01[x] + m11[x] + m21[x];
                        let s02 = m02[x] + m12[x] + m22[x];
                        let s03 = m03[x] + m13[x] + m23[x];
                        let s10 = m10[x] - m20[x] - m30[x];
                        let s11 = m11[x] - m21[x] - m31[x];
                        let s12 = m12[x] - m22[x] - m32[x];
                        let s13 = m13[x] - m23[x] - m33[x];
                        y00[x] = s00 + s01 + s02 + bias;
                        y01[x] = s01 - s02 - s03 + bias;
                        y10[x] = s10 + s11 + s12 + bias;
                        y11[x] = s11 - s12 - s13 + bias;
                    }
                }
                let oy = 2 * (ty - t0);
                let pairs = ow / 2;
                for (r, (ya, yb)) in [(&*y00, &*y01), (&*y10, &*y11)].into_iter().enumerate() {
                    if 2 * ty + r >= oh {
                        break;
                    }
                    let row = &mut plane[(oy + r) * ow..][..ow];
                    for ((out, &a), &b) in row.chunks_exact_mut(2).zip(&ya[..pairs]).zip(&yb[..pairs]) {
                        out[0] = a;
                        out[1] = b;
                    }
                    if ow % 2 == 1 {
                        row[ow - 1] = ya[pairs];
                    }
                }
            }
        }
    }
}
