//! Sliding windows over whole planes as long vector loops: the direct convolution of
//! few-channel kernels and pooling.
//!
//! A 1-D or 2-D input plane is copied, padded, into `sy * sx` phases: phase (ry, rx)
//! holds the padded rows `ry, ry + sy, ...` and of them the columns `rx, rx + sx, ...`,
//! as rows `pwp` wide. Output position (oy, ox) then sits at the flat index
//! `j = oy * pwp + ox` (the positions `ox >= ow` are scratch) and the window tap that
//! reads padded row `oy * sy + ky` and column `ox * sx + kx` reads element
//! `j + (ky / sy) * pwp + kx / sx` of phase (ky % sy, kx % sx): a contiguous run for
//! every tap, over all the rows at once, whatever the plane's width or the strides.

use crate::ir::operators::nn::Geo;

/// Accumulator lanes per step of the loops over taps (a multiple of every vector width).
pub(super) const LANES: usize = 16;

/// A window's geometry over flat padded planes.
pub(super) struct FlatPlane {
    ih: usize,
    iw: usize,
    oh: usize,
    ow: usize,
    sy: usize,
    sx: usize,
    pt: usize,
    pl: usize,
    /// The phases' row width.
    pwp: usize,
    /// Accumulator length: the flat output positions, rounded up to [`LANES`].
    pub(super) len: usize,
    /// Each phase's length: its padded rows and the reads of the last lanes.
    plen: usize,
    /// Per window tap (row-major), where its run starts in the phases.
    pub(super) taps: Vec<usize>,
}

impl FlatPlane {
    /// The flat layout of a 1-D or 2-D window `g` with a non-empty output; None when the
    /// padded planes would be far larger than the tensors (huge pads or dilations).
    pub(super) fn new(g: &Geo) -> Option<FlatPlane> {
        let two = match g.k.len() {
            1 => false,
            2 => true,
            _ => return None,
        };
        let at = |v: &[usize], one: usize| if two { (v[0], v[1]) } else { (one, v[0]) };
        let ((ih, iw), (oh, ow), (kh, kw)) = (at(&g.in_sp, 1), at(&g.out_sp, 1), at(&g.k, 1));
        let ((sy, sx), (dy, dx)) = (at(&g.s, 1), at(&g.d, 1));
        let (pt, pl) = if two { (g.pb[0], g.pb[1]) } else { (0, g.pb[0]) };
        if ow == 0 || oh == 0 || kh == 0 || kw == 0 || sx == 0 || sy == 0 {
            return None;
        }
        // Sizes in u128 first: anything far beyond the tensors is refused.
        let limit = 16 * (ih * iw + oh * ow) as u128 + (1 << 16);
        let (pt, pl) = (u128::try_from(pt).ok()?, u128::try_from(pl).ok()?);
        let w_need = ((ow - 1) as u128 * sx as u128 + (kw - 1) as u128 * dx as u128 + 1).max(pl + iw as u128);
        let h_need = ((oh - 1) as u128 * sy as u128 + (kh - 1) as u128 * dy as u128 + 1).max(pt + ih as u128);
        let (pwp, rows) = (w_need.div_ceil(sx as u128), h_need.div_ceil(sy as u128));
        // Every phase holds its share of the padded plane, and there are sy * sx of them.
        let phases = sy as u128 * sx as u128;
        if pt > limit || pl > limit || pwp > limit || phases * rows * pwp > limit || phases * oh as u128 * pwp > limit {
            return None;
        }
        let (pt, pl, pwp, rows) = (pt as usize, pl as usize, pwp as usize, rows as usize);
        // Per tap: its phase and its offset in it.
        let taps: Vec<(usize, usize)> = (0..kh * kw)
            .map(|t| {
                let (y, x) = ((t / kw) * dy, (t % kw) * dx);
                ((y % sy) * sx + x % sx, (y / sy) * pwp + x / sx)
            })
            .collect();
        let max_off = taps.iter().map(|&(_, o)| o).max().unwrap_or(0);
        let len = (oh * pwp).div_ceil(LANES) * LANES;
        let plen = (len + max_off).max(rows * pwp) + LANES;
        let taps = taps.iter().map(|&(phase, o)| phase * plen + o).collect();
        Some(FlatPlane { ih, iw, oh, ow, sy, sx, pt, pl, pwp, len, plen, taps })
    }

    /// The length of the phases of one padded plane.
    pub(super) fn phases_len(&self) -> usize {
        self.sy * self.sx * self.plen
    }

    /// Copies input plane `xp` into `phases` ([`FlatPlane::phases_len`] long), `pad`
    /// everywhere outside it.
    pub(super) fn load(&self, xp: &[f32], phases: &mut [f32], pad: f32) {
        let (iw, sx, pl) = (self.iw, self.sx, self.pl);
        phases.fill(pad);
        for (iy, xr) in xp.chunks_exact(iw.max(1)).take(self.ih).enumerate() {
            let row = self.pt + iy;
            let base = (row % self.sy) * sx * self.plen + (row / self.sy) * self.pwp;
            if sx == 1 {
                phases[base + pl..][..iw].copy_from_slice(xr);
                continue;
            }
            // Column phase p takes the input columns ix with (pl + ix) % sx == p: the row
            // in whole groups of sx columns (a loop the compiler vectorises), then the
            // columns before and after them one by one.
            let head = (sx - pl % sx) % sx;
            let groups = iw.saturating_sub(head) / sx;
            let at = |ix: usize| base + ((pl + ix) % sx) * self.plen + (pl + ix) / sx;
            for ix in (0..head.min(iw)).chain(head + groups * sx..iw) {
                phases[at(ix)] = xr[ix];
            }
            if groups == 0 {
                continue;
            }
            let (first, src) = (at(head), &xr[head..head + groups * sx]);
            if sx == 2 {
                let (even, odd) = phases[first..].split_at_mut(self.plen);
                let pairs = even[..groups].iter_mut().zip(&mut odd[..groups]).zip(src.chunks_exact(2));
                pairs.for_each(|((e, o), pair)| (*e, *o) = (pair[0], pair[1]));
            } else {
                for (q, group) in src.chunks_exact(sx).enumerate() {
                    for (p, &v) in group.iter().enumerate() {
                        phases[first + p * self.plen + q] = v;
                    }
                }
            }
        }
    }

    /// Sets the output positions of accumulator `acc` from the output plane `y`.
    pub(super) fn scatter(&self, y: &[f32], acc: &mut [f32]) {
        for oy in 0..self.oh {
            acc[oy * self.pwp..][..self.ow].copy_from_slice(&y[oy * self.ow..][..self.ow]);
        }
    }

    /// Copies the output positions of accumulator `acc` to the output plane `y`.
    pub(super) fn gather(&self, acc: &[f32], y: &mut [f32]) {
        for (oy, yr) in y.chunks_exact_mut(self.ow).take(self.oh).enumerate() {
            yr.copy_from_slice(&acc[oy * self.pwp..][..self.ow]);
        }
    }
}

widest! {
    /// `acc[j] += w * src[j + off]` for every `(off, w)` of `taps` in order, [`LANES`]
    /// lanes of `acc` (a multiple of `LANES` long) at a time, kept in registers over the
    /// taps. `src` must reach `acc.len() + off` for every tap.
    // The `expect`s convert slices of exactly LANES elements (the ranges say so) to arrays,
    // which lets the compiler vectorise the loop without bounds checks.
    #[allow(clippy::expect_used)]
    pub(super) fn flat_taps(acc: &mut [f32], src: &[f32], taps: &[(usize, f32)]) {
        for (ci, a) in acc.chunks_exact_mut(LANES).enumerate() {
            let j = ci * LANES;
            let mut r: [f32; LANES] = (&*a).try_into().expect("LANES lanes");
            for &(off, w) in taps {
                let s: &[f32; LANES] = src[j + off..j + off + LANES].try_into().expect("LANES lanes");
                for i in 0..LANES {
                    r[i] += w * s[i];
                }
            }
            a.copy_from_slice(&r);
        }
    }
}

widest! {
    /// `acc[j] = src[j + off_0]`, then for every later offset in order `src[j + off]`
    /// where that is strictly greater: MaxPool's scan over a window's taps.
    #[allow(clippy::expect_used)]
    pub(super) fn flat_max(acc: &mut [f32], src: &[f32], taps: &[usize]) {
        let Some((&first, rest)) = taps.split_first() else { return };
        for (ci, a) in acc.chunks_exact_mut(LANES).enumerate() {
            let j = ci * LANES;
            let mut r: [f32; LANES] = src[j + first..j + first + LANES].try_into().expect("LANES lanes");
            for &off in rest {
                let s: &[f32; LANES] = src[j + off..j + off + LANES].try_into().expect("LANES lanes");
                for i in 0..LANES {
                    r[i] = if s[i] > r[i] { s[i] } else { r[i] };
                }
            }
            a.copy_from_slice(&r);
        }
    }
}

widest! {
    /// `acc[j] = 0 + src[j + off]` over every offset in order: AveragePool's sum.
    #[allow(clippy::expect_used)]
    pub(super) fn flat_sum(acc: &mut [f32], src: &[f32], taps: &[usize]) {
        for (ci, a) in acc.chunks_exact_mut(LANES).enumerate() {
            let j = ci * LANES;
            let mut r = [0f32; LANES];
            for &off in taps {
                let s: &[f32; LANES] = src[j + off..j + off + LANES].try_into().expect("LANES lanes");
                for i in 0..LANES {
                    r[i] += s[i];
                }
            }
            a.copy_from_slice(&r);
        }
    }
}
