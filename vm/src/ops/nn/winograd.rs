//! Winograd F(2x2, 3x3) and F(4x4, 3x3): 3x3 convolutions with unit strides and
//! dilations in 16 multiplies per 2x2 output tile and input channel (4 per output, instead
//! of 9), or 36 per 4x4 tile (2.25 per output).
//!
//! With `g` a 3x3 kernel and `d` an input tile of `a x a` (a = r + 2 for r x r output
//! tiles), the output tile is `Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A`. Summed over input channels,
//! the elementwise product is a² matrix products, one per position `p` of the transformed
//! tile: `M[p] (K x T) = U[p] (K x C) · V[p] (C x T)`, for K output channels, C input
//! channels and T tiles. The transformed weights `U` are packed once for the GEMM (and
//! kept with a constant, in place of the im2col packing); the input is transformed a
//! block of tile rows at a time into `V`, the products run on the packed GEMM, and the
//! output transform writes the output rows with the bias.
//!
//! 4x4 tiles take planes with many tiles: fewer multiplies and a smaller `V` to write and
//! read; on small planes their few tiles make narrow products that waste the GEMM kernel's
//! columns, and 2x2 tiles are faster.
//!
//! Layouts: `V` is `[C][a²][T]` (rows padded, [`v_row`]) and `M` is `[K][a²][T]`, so that a
//! range of channels is one contiguous run (what threads split), and position `p`'s
//! matrix is every a²-th row.

use super::epilogue::{Activation, Epilogue, Post};
use super::gemm::{gemm_rows, Mat, PackedA};
use super::simd::{arr, arr_mut};
use super::workers::{ranges, run_parts, threads, PAR_WORK};
use crate::ir::host_tensor::ConstOperand;
use crate::ir::operators::nn::ConvDims;
use std::cell::RefCell;
use std::sync::Arc;

/// Positions of a transformed 2x2 tile (4x4).
const POS: usize = 16;
/// Tiles (4x4) a layer needs, at least, for 4x4 tiles.
const MANY_TILES: usize = 36;
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
/// The transforms work in runs of this many tiles (one AVX2 vector, half an AVX-512
/// one): loops of a fixed length compile to vector operations, where loops over a tile
/// row's 4 to 28 tiles ran mostly in their scalar remainders. Runs of 16 wasted more on
/// rows of 7 to 11 tiles (2x2 tiles take planes up to about 22x22, 4x4 ones 28x28 from
/// 7 tiles) than they saved on long rows (resnet50, one thread: 79.2 -> 78.1 ms of
/// convolutions with 8).
const LANES: usize = 8;

/// A run of [`LANES`] values, `$e` for each lane `$x`: a loop into a local array, which
/// stays inside the kernel it is written in and takes that kernel's vector instructions
/// (`std::array::from_fn` may be left out of line, compiled for the baseline CPU).
macro_rules! run {
    (|$x:ident| $e:expr) => {{
        let mut out = [0f32; LANES];
        for $x in 0..LANES {
            out[$x] = $e;
        }
        out
    }};
}

/// The row length of `V` for `t` tiles: a run of [`LANES`] from the last tile may write
/// past `t`, into this padding.
fn v_row(t: usize) -> usize {
    t + LANES
}

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
    /// The output tiles' side, 2 or 4.
    r: usize,
    /// Tile rows and columns (r x r outputs each).
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
        let r = if oh.div_ceil(4) * ow.div_ceil(4) >= MANY_TILES { 4 } else { 2 };
        let (th, tw) = (oh.div_ceil(r), ow.div_ceil(r));
        let weight_bytes = (r + 2) * (r + 2) * cg * mg * 4;
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
            r,
            th,
            tw,
        })
    }

    /// The output tiles' side, 2 or 4.
    #[cfg(test)]
    pub(super) fn side(&self) -> usize {
        self.r
    }

    /// Positions of a transformed tile.
    fn pos(&self) -> usize {
        (self.r + 2) * (self.r + 2)
    }

    /// Tiles per block, about: [`BLOCK_TILES`] of 2x2 tiles, as many bytes of `V` for
    /// larger tiles.
    fn block_tiles(&self) -> usize {
        BLOCK_TILES * POS / self.pos()
    }
}

/// One group's transformed weights, packed for the GEMM: `U[p]` (mg x cg) per position.
pub(super) struct Weights {
    packed: Vec<PackedA>,
}

impl Weights {
    /// Transforms and packs a group's weights `wg` ([mg, cg, 3, 3]) for `r` x `r` tiles.
    fn new(wg: &[f32], mg: usize, cg: usize, r: usize) -> Weights {
        let a = r + 2;
        let mut u = vec![0f32; a * a * mg * cg];
        for (kc, g) in wg.chunks_exact(9).enumerate().take(mg * cg) {
            let g: [[f64; 3]; 3] = std::array::from_fn(|i| std::array::from_fn(|j| f64::from(g[3 * i + j])));
            // G g (a x 3), then (G g) Gᵀ (a x a), in f64.
            let gg: Vec<[f64; 3]> =
                (0..a).map(|i| std::array::from_fn(|j| kernel_row(r, i, [g[0][j], g[1][j], g[2][j]]))).collect();
            for (i, row) in gg.iter().enumerate() {
                for j in 0..a {
                    u[(i * a + j) * mg * cg + kc] = kernel_row(r, j, *row) as f32;
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

/// Row `i` of G (a x 3) times `v`: for 2x2 tiles G = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1]; for
/// 4x4 tiles [¼ 0 0; -⅙ -⅙ -⅙; -⅙ ⅙ -⅙; 1/24 1/12 ⅙; 1/24 -1/12 ⅙; 0 0 1].
fn kernel_row(r: usize, i: usize, [a, b, c]: [f64; 3]) -> f64 {
    match (r, i) {
        (2, 0) => a,
        (2, 1) => 0.5 * (a + b + c),
        (2, 2) => 0.5 * (a - b + c),
        (4, 0) => a / 4.0,
        (4, 1) => -(a + b + c) / 6.0,
        (4, 2) => -(a - b + c) / 6.0,
        (4, 3) => a / 24.0 + b / 12.0 + c / 6.0,
        (4, 4) => a / 24.0 - b / 12.0 + c / 6.0,
        // The last row, (2, 3) or (4, 5).
        _ => c,
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
                let what = if wi.r == 4 { "winograd 4x4 weights" } else { "winograd weights" };
                c.get_or_make(what, gi as u64, [mg as u64, cg as u64], || Weights::new(wg, mg, cg, wi.r))
            }
            None => Arc::new(Weights::new(wg, mg, cg, wi.r)),
        };
        item_conv(xg, &weights, bg, post, wi, yg)?;
    }
    Ok(())
}

/// One (batch, group) item: blocks of tile rows, split between threads when there are
/// several; a single block splits each phase instead.
fn item_conv(xg: &[f32], u: &Weights, b: Option<&[f32]>, post: Post, wi: &Wino, y: &mut [f32]) -> Result<(), String> {
    let (tw, th, ow, oh, r, pos) = (wi.tw, wi.th, wi.ow, wi.oh, wi.r, wi.pos());
    let work = (pos * wi.mg * wi.cg * th * tw) as f64;
    let par = threads() > 1 && work >= PAR_WORK;
    let mut count = th.div_ceil((wi.block_tiles() / tw).clamp(1, th));
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
    let out_rows = |(t0, t1): (usize, usize)| (r * t0 * ow, (r * t1).min(oh) * ow);
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
            v.resize(wi.cg * pos * v_row(t), 0.0);
            input_transform(xg, wi, t0, t1, 0, v);
            // Output channels in chunks (whole strips of the GEMM kernel's rows).
            let chunk = (M_BYTES / (4 * pos * t) / mr * mr).max(mr);
            for (k0, rows) in (0..wi.mg).step_by(chunk).zip(rows.chunks_mut(chunk)) {
                // (The products write every element: no need to clear it.)
                m.resize(rows.len() * pos * v_row(t), 0.0);
                for (p, mut mrows) in by_position(m, t, pos).into_iter().enumerate() {
                    product(u, p, k0, t, wi, v, &mut mrows)?;
                }
                output_transform(m, b, wi, t0, t1, k0, rows);
                if post.any() {
                    for (ki, row) in rows.iter_mut().enumerate() {
                        post.apply((k0 + ki) * oh * ow + r * t0 * ow, row);
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
    let (nt, pos) = (threads(), wi.pos());
    v.resize(wi.cg * pos * v_row(t), 0.0);
    // (The products write every element: no need to clear it.)
    m.resize(wi.mg * pos * v_row(t), 0.0);
    let cparts = ranges(wi.cg, nt, 1);
    let mut vparts = Vec::with_capacity(cparts.len());
    let mut rest = &mut v[..];
    for &(c0, c1) in &cparts {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut((c1 - c0) * pos * v_row(t));
        vparts.push((c0, head));
        rest = tail;
    }
    run_parts(vparts, |(c0, vp)| {
        input_transform(xg, wi, t0, t1, c0, vp);
        Ok(())
    })?;
    let v = &v[..];
    // The products by positions: each job takes whole positions.
    let mut rows = by_position(m, t, pos).into_iter();
    let jobs: Vec<_> =
        ranges(pos, nt, 1).into_iter().map(|(p0, p1)| (p0, rows.by_ref().take(p1 - p0).collect::<Vec<_>>())).collect();
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
        output_transform(&m[k0 * pos * v_row(t)..], b, wi, t0, t1, k0, &mut planes);
        if post.any() {
            for (ki, plane) in planes.iter_mut().enumerate() {
                post.apply((k0 + ki) * wi.oh * wi.ow, plane);
            }
        }
        Ok(())
    })
}

/// The rows of `m` ([K][pos][T], rows [`v_row`] long) by position: `M[p]`'s rows (their
/// first `t`), one per output channel.
fn by_position(m: &mut [f32], t: usize, pos: usize) -> Vec<Vec<&mut [f32]>> {
    let tv = v_row(t);
    let mut rows: Vec<Vec<&mut [f32]>> = (0..pos).map(|_| Vec::with_capacity(m.len() / (pos * tv))).collect();
    for (r, row) in m.chunks_exact_mut(tv).enumerate() {
        rows[r % pos].push(&mut row[..t]);
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
    let vb = Mat { d: &v[p * v_row(t)..], rs: wi.pos() * v_row(t), cs: 1, packed: None };
    gemm_rows(rows.len(), t, wi.cg, 1.0, a, vb, rows, false, Epilogue::write(None, Activation::Identity, None))
}

widest! {
    /// Transforms the input tiles of tile rows `t0..t1` of input channels `c0..` (as
    /// many as `v` holds) into `v` ([C][16][T], rows [`v_row`] long): `Bᵀ d B` per tile, with
    /// `Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]`, zero outside the input.
    /// Each input row is split into its even and odd columns, so that the rows' and then
    /// the columns' combinations are contiguous vector operations over whole tile rows.
    fn input_transform2(xg: &[f32], wi: &Wino, t0: usize, t1: usize, c0: usize, v: &mut [f32]) {
        let (ih, iw, tw) = (wi.ih, wi.iw, wi.tw);
        let t = (t1 - t0) * tw;
        let tv = v_row(t);
        let w1 = tw + 1;
        // Even and odd columns of the tile row's 4 input rows, then their row
        // combinations: [e0, o0, e1, o1, ...], each `wp` long. The rows' combinations run
        // over whole runs covering `w1` columns; the columns' read one column further.
        let wr = w1.next_multiple_of(LANES);
        let wp = wr + LANES;
        let mut eo = vec![0f32; 8 * wp];
        let mut te = vec![0f32; 8 * wp];
        for (ci, vc) in v.chunks_exact_mut(POS * tv).enumerate() {
            let xp = &xg[(c0 + ci) * ih * iw..][..ih * iw];
            for ty in t0..t1 {
                for r in 0..4 {
                    let iy = (2 * ty + r).wrapping_sub(wi.pt);
                    let row = if iy < ih { &xp[iy * iw..][..iw] } else { &[][..] };
                    phases::<2>(row, wi.pl, &mut eo[r * 2 * wp..][..2 * wp], wp, w1);
                }
                {
                    let (d0, rest) = eo.split_at(2 * wp);
                    let (d1, rest) = rest.split_at(2 * wp);
                    let (d2, d3) = rest.split_at(2 * wp);
                    // Rows: t0 = d0 - d2, t1 = d1 + d2, t2 = d2 - d1, t3 = d1 - d3 (even
                    // and odd columns alike).
                    let (a0, rest) = te.split_at_mut(2 * wp);
                    let (a1, rest) = rest.split_at_mut(2 * wp);
                    let (a2, a3) = rest.split_at_mut(2 * wp);
                    for j0 in (0..wr).step_by(LANES).chain((wp..wp + wr).step_by(LANES)) {
                        let run = j0..j0 + LANES;
                        // (Copied out first: the compiler cannot tell that the stores below
                        // miss them, and would keep the loop scalar to preserve the order.)
                        let (d0, d1, d2, d3): ([f32; LANES], [f32; LANES], [f32; LANES], [f32; LANES]) =
                            (*arr(&d0[run.clone()]), *arr(&d1[run.clone()]), *arr(&d2[run.clone()]), *arr(&d3[run.clone()]));
                        let a0: &mut [f32; LANES] = arr_mut(&mut a0[run.clone()]);
                        let a1: &mut [f32; LANES] = arr_mut(&mut a1[run.clone()]);
                        let a2: &mut [f32; LANES] = arr_mut(&mut a2[run.clone()]);
                        let a3: &mut [f32; LANES] = arr_mut(&mut a3[run]);
                        *a0 = run!(|j| d0[j] - d2[j]);
                        *a1 = run!(|j| d1[j] + d2[j]);
                        *a2 = run!(|j| d2[j] - d1[j]);
                        *a3 = run!(|j| d1[j] - d3[j]);
                    }
                }
                let base = (ty - t0) * tw;
                for i in 0..4 {
                    let (e, o) = te[i * 2 * wp..][..2 * wp].split_at(wp);
                    let dst = &mut vc[i * 4 * tv..][..4 * tv];
                    let (v0, rest) = dst.split_at_mut(tv);
                    let (v1, rest) = rest.split_at_mut(tv);
                    let (v2, v3) = rest.split_at_mut(tv);
                    // Columns: c0 = e[x], c1 = o[x], c2 = e[x + 1], c3 = o[x + 1]. A run
                    // past the tile row writes the next one's start (written after) or
                    // the row's padding.
                    for x0 in (0..tw).step_by(LANES) {
                        let (here, next) = (x0..x0 + LANES, x0 + 1..x0 + 1 + LANES);
                        // (Copied out first, as above.)
                        let (e0, e1): ([f32; LANES], [f32; LANES]) = (*arr(&e[here.clone()]), *arr(&e[next.clone()]));
                        let (o0, o1): ([f32; LANES], [f32; LANES]) = (*arr(&o[here]), *arr(&o[next]));
                        let out = base + x0..base + x0 + LANES;
                        let v0: &mut [f32; LANES] = arr_mut(&mut v0[out.clone()]);
                        let v1: &mut [f32; LANES] = arr_mut(&mut v1[out.clone()]);
                        let v2: &mut [f32; LANES] = arr_mut(&mut v2[out.clone()]);
                        let v3: &mut [f32; LANES] = arr_mut(&mut v3[out]);
                        *v0 = run!(|x| e0[x] - e1[x]);
                        *v1 = run!(|x| o0[x] + e1[x]);
                        *v2 = run!(|x| e1[x] - o0[x]);
                        *v3 = run!(|x| o0[x] - o1[x]);
                    }
                }
            }
        }
    }
}

widest! {
    /// Transforms the products of tile rows `t0..t1` (`m`: [K][16][T], output channels
    /// `k0..`) into the output rows of those tiles in `planes` (one per output channel,
    /// from the block's first output row), `Aᵀ M A` per tile plus the bias, with
    /// `Aᵀ = [1 1 1 0; 0 1 -1 -1]`.
    fn output_transform2(
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
        let tv = v_row(t);
        // In runs of LANES tiles, as the input transform; a run past the tile row reads
        // the next one's products (or the row's padding) and writes past `tw` in `s`.
        let sw = tw.next_multiple_of(LANES);
        let mut s = vec![0f32; 4 * sw];
        for (ki, plane) in planes.iter_mut().enumerate() {
            let mk = &m[ki * POS * tv..][..POS * tv];
            let bias = b.map_or(0.0, |b| b[k0 + ki]);
            for ty in t0..t1 {
                let base = (ty - t0) * tw;
                let (y00, rest) = s.split_at_mut(sw);
                let (y01, rest) = rest.split_at_mut(sw);
                let (y10, y11) = rest.split_at_mut(sw);
                for x0 in (0..tw).step_by(LANES) {
                    // (Copied out: see the input transform.)
                    let at = |p: usize| -> [f32; LANES] { *arr(&mk[p * tv + base + x0..][..LANES]) };
                    let (m00, m01, m02, m03) = (at(0), at(1), at(2), at(3));
                    let (m10, m11, m12, m13) = (at(4), at(5), at(6), at(7));
                    let (m20, m21, m22, m23) = (at(8), at(9), at(10), at(11));
                    let (m30, m31, m32, m33) = (at(12), at(13), at(14), at(15));
                    // Rows first: s0 = m0 + m1 + m2, s1 = m1 - m2 - m3; then columns.
                    let s00: [f32; LANES] = run!(|x| m00[x] + m10[x] + m20[x]);
                    let s01: [f32; LANES] = run!(|x| m01[x] + m11[x] + m21[x]);
                    let s02: [f32; LANES] = run!(|x| m02[x] + m12[x] + m22[x]);
                    let s03: [f32; LANES] = run!(|x| m03[x] + m13[x] + m23[x]);
                    let s10: [f32; LANES] = run!(|x| m10[x] - m20[x] - m30[x]);
                    let s11: [f32; LANES] = run!(|x| m11[x] - m21[x] - m31[x]);
                    let s12: [f32; LANES] = run!(|x| m12[x] - m22[x] - m32[x]);
                    let s13: [f32; LANES] = run!(|x| m13[x] - m23[x] - m33[x]);
                    let run = x0..x0 + LANES;
                    *arr_mut::<LANES>(&mut y00[run.clone()]) = run!(|x| s00[x] + s01[x] + s02[x] + bias);
                    *arr_mut::<LANES>(&mut y01[run.clone()]) = run!(|x| s01[x] - s02[x] - s03[x] + bias);
                    *arr_mut::<LANES>(&mut y10[run.clone()]) = run!(|x| s10[x] + s11[x] + s12[x] + bias);
                    *arr_mut::<LANES>(&mut y11[run]) = run!(|x| s11[x] - s12[x] - s13[x] + bias);
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

/// Transforms the input tiles of tile rows `t0..t1` of input channels `c0..` (as many as
/// `v` holds) into `v` ([C][a²][T], rows [`v_row`] long).
fn input_transform(xg: &[f32], wi: &Wino, t0: usize, t1: usize, c0: usize, v: &mut [f32]) {
    if wi.r == 4 {
        input_transform4(xg, wi, t0, t1, c0, v)
    } else {
        input_transform2(xg, wi, t0, t1, c0, v)
    }
}

/// Transforms the products of tile rows `t0..t1` into the output rows of those tiles (see
/// [`output_transform2`]).
fn output_transform(
    m: &[f32],
    b: Option<&[f32]>,
    wi: &Wino,
    t0: usize,
    t1: usize,
    k0: usize,
    planes: &mut [&mut [f32]],
) {
    if wi.r == 4 {
        output_transform4(m, b, wi, t0, t1, k0, planes)
    } else {
        output_transform2(m, b, wi, t0, t1, k0, planes)
    }
}

/// A run of [`LANES`] tiles' values.
type Run = [f32; LANES];

/// `Bᵀ d` for 4x4 tiles, over runs: `Bᵀ = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
/// 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]`.
#[inline(always)]
fn input_combinations(d: &[Run; 6]) -> [Run; 6] {
    let [d0, d1, d2, d3, d4, d5] = d;
    [
        run!(|x| 4.0 * d0[x] - 5.0 * d2[x] + d4[x]),
        run!(|x| (d3[x] + d4[x]) - 4.0 * (d1[x] + d2[x])),
        run!(|x| (d4[x] - d3[x]) + 4.0 * (d1[x] - d2[x])),
        run!(|x| (d4[x] - d2[x]) + 2.0 * (d3[x] - d1[x])),
        run!(|x| (d4[x] - d2[x]) - 2.0 * (d3[x] - d1[x])),
        run!(|x| 4.0 * d1[x] - 5.0 * d3[x] + d5[x]),
    ]
}

/// `Aᵀ m` for 4x4 tiles, over runs: `Aᵀ = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0;
/// 0 1 -1 8 -8 1]`.
#[inline(always)]
fn output_combinations(m: &[Run; 6]) -> [Run; 4] {
    let [m0, m1, m2, m3, m4, m5] = m;
    let (a, b): (Run, Run) = (run!(|x| m1[x] + m2[x]), run!(|x| m1[x] - m2[x]));
    let (c, d): (Run, Run) = (run!(|x| m3[x] + m4[x]), run!(|x| m3[x] - m4[x]));
    [
        run!(|x| m0[x] + a[x] + c[x]),
        run!(|x| b[x] + 2.0 * d[x]),
        run!(|x| a[x] + 4.0 * c[x]),
        run!(|x| b[x] + 8.0 * d[x] + m5[x]),
    ]
}

widest! {
    /// [`input_transform`] for 4x4 tiles: each of a tile row's 6 input rows is split into
    /// its 4 column phases (columns 4x + j), so that the rows' and then the columns'
    /// combinations are vector operations over runs of tiles.
    fn input_transform4(xg: &[f32], wi: &Wino, t0: usize, t1: usize, c0: usize, v: &mut [f32]) {
        let (ih, iw, tw) = (wi.ih, wi.iw, wi.tw);
        let t = (t1 - t0) * tw;
        let tv = v_row(t);
        let w1 = tw + 1;
        let wr = w1.next_multiple_of(LANES);
        let wp = wr + LANES;
        // [row][phase], each `wp` long: the input rows' phases, then their combinations.
        let mut ph = vec![0f32; 24 * wp];
        let mut te = vec![0f32; 24 * wp];
        for (ci, vc) in v.chunks_exact_mut(36 * tv).enumerate() {
            let xp = &xg[(c0 + ci) * ih * iw..][..ih * iw];
            for ty in t0..t1 {
                // A tile row's first 2 input rows are the previous one's last 2.
                let fresh = if ty > t0 {
                    ph.copy_within(16 * wp..24 * wp, 0);
                    2
                } else {
                    0
                };
                for r in fresh..6 {
                    let rows = &mut ph[r * 4 * wp..][..4 * wp];
                    let iy = (4 * ty + r).wrapping_sub(wi.pt);
                    let row = if iy < ih { &xp[iy * iw..][..iw] } else { &[][..] };
                    phases::<4>(row, wi.pl, rows, wp, w1);
                }
                for q in 0..4 {
                    for j0 in (0..wr).step_by(LANES) {
                        let at = |r: usize| -> Run { *arr(&ph[(r * 4 + q) * wp + j0..][..LANES]) };
                        let out = input_combinations(&[at(0), at(1), at(2), at(3), at(4), at(5)]);
                        for (i, o) in out.iter().enumerate() {
                            *arr_mut::<LANES>(&mut te[(i * 4 + q) * wp + j0..][..LANES]) = *o;
                        }
                    }
                }
                // Columns of tile x: phases 0-3 at x, then phases 0 and 1 at x + 1. A run
                // past the tile row writes the next one's start (written after) or the
                // row's padding.
                let base = (ty - t0) * tw;
                for i in 0..6 {
                    let p = &te[i * 4 * wp..][..4 * wp];
                    for x0 in (0..tw).step_by(LANES) {
                        let at = |q: usize, s: usize| -> Run { *arr(&p[q * wp + x0 + s..][..LANES]) };
                        let out = input_combinations(&[at(0, 0), at(1, 0), at(2, 0), at(3, 0), at(0, 1), at(1, 1)]);
                        for (j, o) in out.iter().enumerate() {
                            *arr_mut::<LANES>(&mut vc[(i * 6 + j) * tv + base + x0..][..LANES]) = *o;
                        }
                    }
                }
            }
        }
    }
}

/// The `R` column phases of an input row padded by `pl` zeros on the left (and zeros past
/// its end), each `wp` apart in `out`: `out[j * wp + x] = row[R x + j - pl]` for x < `w1`
/// (for 2x2 tiles its even and odd columns, for 4x4 tiles columns 4x to 4x + 3).
#[inline(always)]
fn phases<const R: usize>(row: &[f32], pl: usize, out: &mut [f32], wp: usize, w1: usize) {
    let at = |q: usize| q.checked_sub(pl).and_then(|i| row.get(i)).copied().unwrap_or(0.0);
    // Tiles whose R columns all lie in the row read them in one chunk.
    let lo = pl.div_ceil(R).min(w1);
    let hi = ((row.len() + pl) / R).clamp(lo, w1);
    for x in (0..lo).chain(hi..w1) {
        for j in 0..R {
            out[j * wp + x] = at(R * x + j);
        }
    }
    if hi > lo {
        let src = &row[R * lo - pl..R * hi - pl];
        for (j, p) in out.chunks_exact_mut(wp).take(R).enumerate() {
            for (o, q) in p[lo..hi].iter_mut().zip(src.chunks_exact(R)) {
                *o = q[j];
            }
        }
    }
}

widest! {
    /// [`output_transform`] for 4x4 tiles: `Aᵀ M A` per tile plus the bias, in runs of
    /// tiles (a run past the tile row reads the next one's products or the padding, and
    /// writes past `tw` in its scratch).
    fn output_transform4(
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
        let tv = v_row(t);
        let sw = tw.next_multiple_of(LANES);
        // The tile row's outputs: [row r][column c] runs over tiles, `sw` long.
        let mut s = vec![0f32; 16 * sw];
        for (ki, plane) in planes.iter_mut().enumerate() {
            let mk = &m[ki * 36 * tv..][..36 * tv];
            let bias = b.map_or(0.0, |b| b[k0 + ki]);
            for ty in t0..t1 {
                let base = (ty - t0) * tw;
                for x0 in (0..tw).step_by(LANES) {
                    let at = |p: usize| -> Run { *arr(&mk[p * tv + base + x0..][..LANES]) };
                    // Rows first (per column j of the 6x6 products), then columns.
                    let mut cols = [[[0f32; LANES]; 4]; 6];
                    for (j, col) in cols.iter_mut().enumerate() {
                        *col = output_combinations(&[at(j), at(6 + j), at(12 + j), at(18 + j), at(24 + j), at(30 + j)]);
                    }
                    for r in 0..4 {
                        let row = [cols[0][r], cols[1][r], cols[2][r], cols[3][r], cols[4][r], cols[5][r]];
                        for (c, y) in output_combinations(&row).iter().enumerate() {
                            *arr_mut::<LANES>(&mut s[(r * 4 + c) * sw + x0..][..LANES]) =
                                run!(|x| y[x] + bias);
                        }
                    }
                }
                for r in 0..4 {
                    if 4 * ty + r >= oh {
                        break;
                    }
                    let out = &mut plane[(4 * (ty - t0) + r) * ow..][..ow];
                    let y = |c: usize| &s[(r * 4 + c) * sw..][..sw];
                    let (y0, y1, y2, y3) = (y(0), y(1), y(2), y(3));
                    let whole = ow / 4;
                    for (x, o) in out.chunks_exact_mut(4).enumerate() {
                        (o[0], o[1], o[2], o[3]) = (y0[x], y1[x], y2[x], y3[x]);
                    }
                    for c in 0..ow % 4 {
                        out[4 * whole + c] = y(c)[whole];
                    }
                }
            }
        }
    }
}
