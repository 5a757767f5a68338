//! Convolutions on f32: im2col + GEMM, direct loops for depthwise and few-channel
//! kernels, and the transposed convolution's GEMM + col2im.

use super::epilogue::{Epilogue, Post};
use super::flat::{flat_taps, FlatPlane};
use super::gemm::{gemm, gemm_rows, split_columns, Mat, Packed, PackedA, PackedRows};
use super::operands::prod;
use super::winograd::{self, Wino};
use super::workers::{par_items, ranges, run_parts, threads, PAR_WORK};
use crate::ir::host_tensor::ConstOperand;
use crate::ir::operators::nn::{ConvDims, Geo};
use smallvec::SmallVec;
use std::cell::RefCell;

/// im2col / col2im buffers hold about this many floats (so that they stay in cache).
const COLS_CHUNK: usize = 1 << 17;

/// Columns per im2col / col2im chunk for `rows` rows and `n` columns: cache-sized, but at
/// least 256 wide (so that repacking the weights per chunk stays cheap) as long as that
/// stays under 4 MiB, and never under 16; a multiple of 32 (the widest GEMM kernel's
/// columns) from 64 on, so that only the last chunk ends in a partial strip.
fn cols_chunk(rows: usize, n: usize) -> usize {
    let rows = rows.max(1);
    let chunk = (COLS_CHUNK / rows).max(((1 << 20) / rows).min(256)).max(16);
    let chunk = if chunk >= 64 { chunk / 32 * 32 } else { chunk };
    chunk.min(n).max(1)
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
    /// (`constant`: theirs, and the index of the group) are packed once for every
    /// call and kept with the constant: repacking them was a tenth of resnet50's time.
    fn pack(&self, wg: &[f32], constant: Option<(ConstOperand, u64)>) -> Option<Packed> {
        let krows = self.cg * self.kprod;
        let a = Mat { d: wg, rs: krows, cs: 1, packed: None };
        if self.direct() || !a.fits(self.mg, krows) {
            return None;
        }
        Some(match constant {
            Some((c, group)) => {
                Packed::Kept(c.get_or_make("conv weights packed", group, [self.mg as u64, krows as u64], || {
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

    /// Computes output columns `q0..q1` of output channels `r0..r1` of a convolution item
    /// into `y` (`r1 - r0` row segments holding those columns): written with `epi` (whose
    /// rows and columns are the item's) where the item is a GEMM, added to what `y` holds
    /// (the bias) by the direct loops. `xg` holds the group's input channels, `wg` its
    /// weights ([Mg, Cg * kernel]), `wp` them packed ([`ConvItem::pack`]). A part of the
    /// channels (`r0` a multiple of the GEMM kernel's rows) only where the item is a GEMM.
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
        epi: Epilogue,
    ) -> Result<(), String> {
        let (g, cg, mg, kprod) = (self.g, self.cg, self.mg, self.kprod);
        let krows = cg * kprod;
        let a = Mat { d: &wg[r0 * krows..], rs: krows, cs: 1, packed: wp.map(|p| PackedRows { p, r0 }) };
        let rows = r1 - r0;
        let epi = epi.at(r0, q0);
        debug_assert!((r0, r1) == (0, mg) || !self.direct());
        if self.pointwise() {
            let b = Mat { d: &xg[q0..], rs: self.in_plane, cs: 1, packed: None };
            return gemm_rows(rows, q1 - q0, cg, 1.0, a, b, y, false, epi);
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
                let b = Mat { d: cols, rs: wd, cs: 1, packed: None };
                gemm_rows(rows, wd, krows, 1.0, a, b, &mut sub, false, epi.at(0, c0 - q0))?;
            }
            Ok(())
        };
        let res = run();
        COLS.set(cols);
        res
    }

    /// The direct convolution of whole planes (1-D and 2-D kernels) as long vector loops
    /// over flat padded planes ([`FlatPlane`]): each input channel is copied once into its
    /// zero-padded phases, and every kernel tap is a contiguous run over all the output
    /// rows at once. The accumulators start from `y` (the bias) and add the taps in order,
    /// channel by channel. False (nothing done) when the padded planes would be much
    /// larger than the tensors (huge pads or dilations).
    fn direct_flat(&self, xg: &[f32], wg: &[f32], y: &mut [&mut [f32]]) -> bool {
        let (mg, cg, kprod) = (self.mg, self.cg, self.kprod);
        if self.out_plane == 0 {
            return true;
        }
        let Some(fp) = FlatPlane::new(self.g) else { return false };
        if y.len() < mg || y[..mg].iter().any(|r| r.len() < self.out_plane) {
            return false;
        }
        let mut buf = SCRATCH.take();
        {
            buf.clear();
            buf.resize(mg * fp.len + fp.phases_len(), 0.0);
            let (acc, phases) = buf.split_at_mut(mg * fp.len);
            for (a, yr) in acc.chunks_exact_mut(fp.len).zip(y.iter()) {
                fp.scatter(yr, a);
            }
            let mut taps: Vec<(usize, f32)> = Vec::with_capacity(kprod);
            for c in 0..cg {
                fp.load(&xg[c * self.in_plane..][..self.in_plane], phases, 0.0);
                for (m, a) in acc.chunks_exact_mut(fp.len).enumerate() {
                    let wc = &wg[m * cg * kprod + c * kprod..][..kprod];
                    taps.clear();
                    taps.extend(fp.taps.iter().zip(wc).map(|(&o, &w)| (o, w)));
                    flat_taps(a, phases, &taps);
                }
            }
            for (a, yr) in acc.chunks_exact(fp.len).zip(y.iter_mut()) {
                fp.gather(a, yr);
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
        for (m, orow_all) in y.iter_mut().enumerate().take(self.mg) {
            for c in 0..cg {
                let xp = &xg[c * in_plane..][..in_plane];
                let wc = &wg[m * krows + c * kprod..][..kprod];
                for (oy, xa, xb) in row_spans(q0, q1, ow) {
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
pub(super) fn conv_f32(
    x: &[f32],
    (w, w_const): (&[f32], Option<ConstOperand>),
    b: Option<&[f32]>,
    cd: &ConvDims,
    post: Post,
    y: &mut [f32],
) -> Result<(), String> {
    let it = ConvItem::new(cd);
    let (cg, mg, in_plane, out_plane) = (it.cg, it.mg, it.in_plane, it.out_plane);
    let krows = cg * it.kprod;
    let sizes_ok = x.len() == cd.n * cd.c * in_plane && w.len() == cd.m * krows && y.len() == cd.n * cd.m * out_plane;
    if !sizes_ok || b.is_some_and(|b| b.len() != cd.m) {
        return Err("the tensors do not match their shapes".into());
    }
    if let Some(wi) = Wino::new(cd) {
        return winograd::conv(x, (w, w_const), b, post, &wi, y);
    }
    if post.z.is_some_and(|z| z.len() != y.len()) {
        return Err("Z does not match the output".into());
    }
    // The GEMMs write their output with the bias and the epilogue; the direct loops add to
    // the bias, and the epilogue follows them.
    let direct = it.direct();
    if direct {
        match b {
            Some(b) if out_plane > 0 => y.chunks_mut(out_plane).zip(b.iter().cycle()).for_each(|(p, &bv)| p.fill(bv)),
            _ => y.fill(0.0),
        }
    }
    let item_work = mg as f64 * out_plane as f64 * krows as f64;
    let (group, it) = (cd.group, &it);
    par_items(y, mg * out_plane, item_work * cd.n as f64 * cd.group as f64, |item, yi, par| {
        let (ni, gi) = (item / group, item % group);
        let xg = &x[(ni * cd.c + gi * cg) * in_plane..][..cg * in_plane];
        let wg = &w[gi * mg * krows..][..mg * krows];
        let mut rows: Vec<&mut [f32]> = yi.chunks_mut(out_plane).collect();
        let z_rows: Option<Vec<&[f32]>> =
            post.z.map(|z| z[item * mg * out_plane..][..mg * out_plane].chunks(out_plane.max(1)).collect());
        let bg = b.map(|b| &b[gi * mg..][..mg]);
        let epi = Epilogue::write(bg, post.act, z_rows.as_deref());
        let parts = if par && item_work >= PAR_WORK { ranges(out_plane, threads(), 64) } else { vec![] };
        let packed = it.pack(wg, w_const.map(|c| (c, gi as u64)));
        let wp = packed.as_ref().map(|p| p.get());
        // Threads take output channels instead of columns where there are too few columns
        // to split (7x7 planes), and in 1x1 layers with many channels: there no im2col
        // is repeated for each part, and whole rows per thread leave no cache line of the
        // output written by two threads (at every row, with columns split) and no partly
        // empty strip of the GEMM kernel in each part (85 of 96 columns computed in use,
        // for 169 split in two).
        let by_rows = parts.len() < 2 || (it.pointwise() && mg >= 64 * threads());
        let row_parts = match wp {
            Some(p) if by_rows && par && item_work >= PAR_WORK => ranges(mg.div_ceil(p.mr), threads(), 2)
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
            run_parts(lists, |(list, range)| it.conv_cols(xg, wg, wp, range, 0, out_plane, list, epi))
        } else if parts.len() < 2 {
            it.conv_cols(xg, wg, wp, (0, mg), 0, out_plane, &mut rows, epi)
        } else {
            // One large item: threads take ranges of output columns (im2col included).
            let lists = split_columns(&mut rows, &parts);
            run_parts(lists.into_iter().zip(parts.iter().copied()), |(mut list, (q0, q1))| {
                it.conv_cols(xg, wg, wp, (0, mg), q0, q1, &mut list, epi)
            })
        };
        ConvItem::unpack(packed);
        res
    })?;
    if direct && post.any() {
        post.apply(0, y);
    }
    Ok(())
}

pub(super) fn conv_transpose_f32(
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
    cd: &ConvDims,
    y: &mut [f32],
) -> Result<(), String> {
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

thread_local! {
    /// Per-thread scratch buffers, reused between calls: the direct convolution's planes
    /// and the im2col columns.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    static COLS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// A convolution group's packed weights ([`ConvItem::pack`]).
    static WEIGHTS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// For kernel tap `kk` on one axis (stride `s`, dilation `d`, begin padding `pb`): the
/// offset `kk * d - pb` and the output positions `lo..hi` (within `0..out`) whose input
/// position `o * s + offset` lies in `0..len`.
pub(super) fn hit_range(out: usize, len: usize, s: usize, kk: usize, d: usize, pb: i64) -> (i128, usize, usize) {
    let (s, off) = (s as i128, kk as i128 * d as i128 - pb as i128);
    let lo = ceil_div(-off, s).clamp(0, out as i128);
    let hi = ((len as i128 - 1 - off).div_euclid(s) + 1).clamp(lo, out as i128);
    (off, lo as usize, hi as usize)
}

pub(super) fn ceil_div(a: i128, b: i128) -> i128 {
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
    if g.k.len() == 2 {
        return im2col_2d(x, g, q0, q1, cols);
    }
    let (nd, in_plane, width) = (g.k.len(), prod(&g.in_sp), q1 - q0);
    let (sl, kprod) = (g.s[nd - 1], taps.len() / nd);
    for (r, row) in cols.chunks_exact_mut(width.max(1)).enumerate() {
        let (c, tap) = (r / kprod, r % kprod);
        let xp = &x[c * in_plane..][..in_plane];
        walk_tap(&g.out_sp, &g.in_sp, &taps[tap * nd..][..nd], g, q0, q1, |col, len, head, hits, t0| {
            let seg = &mut row[col..col + len];
            seg[..head].fill(0.0);
            strided_copy(&mut seg[head..head + hits], &xp[t0..], sl);
            seg[head + hits..].fill(0.0);
        });
    }
}

/// [`im2col`] for 2-D kernels: the rows and columns each kernel tap reads are worked out
/// once per tap ([`hit_range`]), so each output row of each tap is a fill, a copy and a
/// fill. (The N-D walk recomputed a tap's geometry for every row of the columns, which
/// on 7x7 planes cost as much as the product.)
fn im2col_2d(x: &[f32], g: &Geo, q0: usize, q1: usize, cols: &mut [f32]) {
    let ((ih, iw), (oh, ow), (kh, kw)) = ((g.in_sp[0], g.in_sp[1]), (g.out_sp[0], g.out_sp[1]), (g.k[0], g.k[1]));
    let ((sy, sx), (dy, dx)) = ((g.s[0], g.s[1]), (g.d[0], g.d[1]));
    let width = q1 - q0;
    if width == 0 || ow == 0 {
        return;
    }
    let rows: Vec<(i128, usize, usize)> = (0..kh).map(|ky| hit_range(oh, ih, sy, ky, dy, g.pb[0])).collect();
    let cols_hit: Vec<(i128, usize, usize)> = (0..kw).map(|kx| hit_range(ow, iw, sx, kx, dx, g.pb[1])).collect();
    let (in_plane, kprod) = (ih * iw, kh * kw);
    for (r, row) in cols.chunks_exact_mut(width).enumerate() {
        let (c, ky, kx) = (r / kprod, r % kprod / kw, r % kw);
        let xp = &x[c * in_plane..][..in_plane];
        let ((offy, ya, yb), (offx, ca, cb)) = (rows[ky], cols_hit[kx]);
        for (oy, xa, xb) in row_spans(q0, q1, ow) {
            let seg = &mut row[oy * ow + xa - q0..oy * ow + xb - q0];
            let (lo, hi) = (ca.clamp(xa, xb), cb.clamp(xa, xb));
            if oy < ya || oy >= yb || lo >= hi {
                seg.fill(0.0);
                continue;
            }
            let iy = (oy as i128 * sy as i128 + offy) as usize;
            let i0 = (lo as i128 * sx as i128 + offx) as usize;
            seg[..lo - xa].fill(0.0);
            strided_copy(&mut seg[lo - xa..hi - xa], &xp[iy * iw + i0..], sx);
            seg[hi - xa..].fill(0.0);
        }
    }
}

/// The output rows that flat positions `q0..q1` (`q0 < q1`) of rows `ow` wide touch, each
/// as `(row, xa, xb)`: its columns `xa..xb` are the ones in `q0..q1`.
fn row_spans(q0: usize, q1: usize, ow: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    let (oy0, oy1) = (q0 / ow, (q1 - 1) / ow);
    (oy0..=oy1).map(move |oy| {
        let xa = if oy == oy0 { q0 - oy * ow } else { 0 };
        let xb = if oy == oy1 { q1 - oy * ow } else { ow };
        (oy, xa, xb)
    })
}

/// `dst[j] = src[j * s]`. A stride of 2 (the strided convolutions') is a loop over pairs,
/// which the compiler vectorises; other strides read one element at a time.
fn strided_copy(dst: &mut [f32], src: &[f32], s: usize) {
    let Some(last) = dst.len().checked_sub(1) else { return };
    match s {
        1 => dst.copy_from_slice(&src[..dst.len()]),
        2 => {
            dst[..last].iter_mut().zip(src[..2 * last].chunks_exact(2)).for_each(|(d, pair)| *d = pair[0]);
            dst[last] = src[2 * last];
        }
        _ => dst.iter_mut().zip(src.iter().step_by(s)).for_each(|(d, &v)| *d = v),
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
