//! The packed, cache-blocked f32 GEMM the convolutions and matrix products run on.

use super::epilogue::Epilogue;
use super::simd::{arr, arr_mut};
use super::workers::{ranges, run_parts, threads, PAR_WORK};
use std::cell::RefCell;

thread_local! {
    /// The GEMM's packed blocks of A and B, per thread, reused between calls.
    static PACK: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

// ---------------------------------------------------------------------------------------
// GEMM: C[m, n] += alpha * A[m, k] B[k, n] on strided f32 views.

/// A strided matrix view: element (i, j) is `d[i * rs + j * cs]`; as the left operand of a
/// product, maybe packed already.
#[derive(Clone, Copy)]
pub(super) struct Mat<'a> {
    pub(super) d: &'a [f32],
    pub(super) rs: usize,
    pub(super) cs: usize,
    pub(super) packed: Option<PackedRows<'a>>,
}

/// Rows `r0..` of a [`PackedA`] (`r0` a multiple of its kernel's rows): the left operand
/// of a product over some of its rows, which threads split between them.
#[derive(Clone, Copy)]
pub(super) struct PackedRows<'a> {
    pub(super) p: &'a PackedA,
    pub(super) r0: usize,
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
pub(super) enum Packed {
    Fresh(PackedA),
    Kept(std::sync::Arc<PackedA>),
}

impl Packed {
    pub(super) fn get(&self) -> &PackedA {
        match self {
            Packed::Fresh(p) => p,
            Packed::Kept(p) => p,
        }
    }
}

/// A left operand packed once for every column block of a product (a convolution's
/// weights, shared by all its column chunks and threads) as [`pack_a`] packs one block:
/// for each KC block of k, the MR-tall strips of all rows.
pub(super) struct PackedA {
    pub(super) mr: usize,
    pub(super) m: usize,
    pub(super) k: usize,
    pub(super) data: Vec<f32>,
}

impl PackedA {
    /// Packs `a` (m x k) for the GEMM kernel this CPU runs, into `buf`'s memory.
    pub(super) fn new(a: Mat, m: usize, k: usize, mut buf: Vec<f32>) -> PackedA {
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

impl<'a> Mat<'a> {
    /// A left operand that is only its packing: its rows `r0..` of `p`.
    pub(super) fn packed(p: &'a PackedA, r0: usize) -> Mat<'a> {
        Mat { d: &[], rs: 0, cs: 0, packed: Some(PackedRows { p, r0 }) }
    }

    /// Whether a `rows` x `cols` left operand is all there: in the data, or packed.
    fn covers(&self, rows: usize, cols: usize) -> bool {
        self.fits(rows, cols)
            || self.packed.is_some_and(|p| p.r0.is_multiple_of(p.p.mr) && p.r0 + rows <= p.p.m && p.p.k == cols)
    }

    /// Whether a `rows` x `cols` matrix fits in the data.
    pub(super) fn fits(&self, rows: usize, cols: usize) -> bool {
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
pub(super) fn gemm(
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
    gemm_rows(m, n, k, alpha, a, b, &mut rows, par, Epilogue::ADD)
}

/// Hands out the column ranges `parts` (consecutive, from 0) of every row: one list of row
/// segments per range.
pub(super) fn split_columns<'a>(rows: &'a mut [&mut [f32]], parts: &[(usize, usize)]) -> Vec<Vec<&'a mut [f32]>> {
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
pub(super) fn gemm_rows(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: Mat,
    b: Mat,
    c: &mut [&mut [f32]],
    par: bool,
    epi: Epilogue,
) -> Result<(), String> {
    if m == 0 || n == 0 || k == 0 {
        return Ok(());
    }
    if c.len() < m || c[..m].iter().any(|r| r.len() < n) || !a.covers(m, k) || !b.fits(k, n) {
        return Err("internal error: matrix product operands out of range".into());
    }
    let c = &mut c[..m];
    let t = if par && (m as f64) * (n as f64) * (k as f64) >= PAR_WORK { threads() } else { 1 };
    if t > 1 && m >= 16 * t {
        // A packed operand is split between whole strips of its kernel's rows.
        let per = match a.packed {
            Some(p) => m.div_ceil(t).next_multiple_of(p.p.mr),
            None => m.div_ceil(t),
        };
        return run_parts(c.chunks_mut(per).enumerate(), |(ti, part)| {
            let r0 = ti * per;
            let a_rows = Mat {
                d: a.d.get(r0 * a.rs..).unwrap_or(&[]),
                packed: a.packed.map(|p| PackedRows { r0: p.r0 + r0, ..p }),
                ..a
            };
            gemm_serial(part.len(), n, k, alpha, a_rows, b, part, epi.at(r0, 0));
            Ok(())
        });
    }
    if t > 1 && n >= 16 * t {
        let parts = ranges(n, t, 16);
        let lists = split_columns(c, &parts);
        return run_parts(lists.into_iter().zip(parts.iter().copied()), |(mut rows, (j0, j1))| {
            let b_cols = Mat { d: &b.d[j0 * b.cs..], ..b };
            gemm_serial(m, j1 - j0, k, alpha, a, b_cols, &mut rows, epi.at(0, j0));
            Ok(())
        });
    }
    gemm_serial(m, n, k, alpha, a, b, c, epi);
    Ok(())
}

/// Single-threaded `C += alpha * A B`, or what `epi` says (operands already checked to
/// fit).
#[allow(clippy::too_many_arguments)]
fn gemm_serial(m: usize, n: usize, k: usize, alpha: f32, a: Mat, b: Mat, c: &mut [&mut [f32]], epi: Epilogue) {
    // The shortcuts read A's data; a packed-only A goes to the packed kernel.
    if let Some(shortcut) = Shortcut::of(m, n, &a, &b).filter(|_| a.fits(m, k)) {
        // They add to C: start it as the epilogue says, and finish it after.
        if epi.overwrite {
            for (i, row) in c.iter_mut().enumerate().take(m) {
                row[..n].fill(epi.start(i));
            }
        }
        shortcut.run(m, n, k, alpha, a, b, c);
        if epi.post() {
            for (i, row) in c.iter_mut().enumerate().take(m) {
                epi.finish(i, 0, &mut row[..n]);
            }
        }
        return;
    }
    match Kernel::detect() {
        // SAFETY: the CPU supports AVX-512F (and FMA), as `detect` found.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 => unsafe { gemm_packed_avx512(m, n, k, alpha, a, b, c, epi) },
        // SAFETY: the CPU supports AVX2 and FMA, as `detect` found.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { gemm_packed_avx2(m, n, k, alpha, a, b, c, epi) },
        _ => gemm_packed::<MR_PORTABLE, NR_PORTABLE, false>(m, n, k, alpha, a, b, c, epi),
    }
}

/// The products [`gemm_serial`] runs without packing: few rows or a single column, as row
/// AXPYs or dot products over dense operands.
#[derive(Clone, Copy)]
enum Shortcut {
    /// Few rows: row-times-matrix as contiguous AXPYs over B's rows.
    RowAxpys,
    /// Few rows times a transposed B (e.g. a fully connected layer with transB): dot
    /// products of contiguous rows, each row of B read once.
    RowDots,
    /// Matrix-vector: dot products of contiguous rows.
    MatVec,
}

impl Shortcut {
    fn of(m: usize, n: usize, a: &Mat, b: &Mat) -> Option<Shortcut> {
        if m < 4 && b.cs == 1 {
            Some(Shortcut::RowAxpys)
        } else if m < 4 && a.cs == 1 && b.rs == 1 {
            Some(Shortcut::RowDots)
        } else if n == 1 && a.cs == 1 && b.rs == 1 {
            Some(Shortcut::MatVec)
        } else {
            None
        }
    }

    /// `C += alpha * A B`.
    #[allow(clippy::too_many_arguments)]
    fn run(self, m: usize, n: usize, k: usize, alpha: f32, a: Mat, b: Mat, c: &mut [&mut [f32]]) {
        match self {
            Shortcut::RowAxpys => {
                for (i, row) in c.iter_mut().enumerate().take(m) {
                    let row = &mut row[..n];
                    for p in 0..k {
                        let av = alpha * a.d[i * a.rs + p * a.cs];
                        let br = &b.d[p * b.rs..][..n];
                        row.iter_mut().zip(br).for_each(|(o, &v)| *o += av * v);
                    }
                }
            }
            Shortcut::RowDots => {
                for j in 0..n {
                    let bj = &b.d[j * b.cs..][..k];
                    for (i, row) in c.iter_mut().enumerate().take(m) {
                        row[j] += alpha * dot(&a.d[i * a.rs..][..k], bj);
                    }
                }
            }
            Shortcut::MatVec => {
                let bv = &b.d[..k];
                for (i, row) in c.iter_mut().enumerate().take(m) {
                    row[0] += alpha * dot(&a.d[i * a.rs..][..k], bv);
                }
            }
        }
    }
}

/// Dot product with 32 independent partial sums (four AVX registers in flight), folded
/// pairwise (lanes j and j + 16, then j and j + 8), then the last 8 in order, then the
/// tail's products.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    // (The plain loops pair the leftovers of unequal slices differently.)
    debug_assert_eq!(a.len(), b.len(), "dot of unequal lengths");
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { dot_avx2(a, b) };
    }
    dot_lanes(a, b)
}

const DOT_LANES: usize = 32;

/// [`dot`] in plain loops.
fn dot_lanes(a: &[f32], b: &[f32]) -> f32 {
    const L: usize = DOT_LANES;
    let mut acc = [0f32; L];
    let (ca, cb) = (a.chunks_exact(L), b.chunks_exact(L));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for j in 0..L {
            acc[j] += x[j] * y[j];
        }
    }
    let mut w = L;
    while w > 8 {
        w /= 2;
        for j in 0..w {
            acc[j] += acc[j + w];
        }
    }
    acc[..8].iter().sum::<f32>() + tail
}

/// [`dot_lanes`] as AVX2 intrinsics: the same multiplies and adds (no FMA) in the same
/// order, so the same bits. (Compiled from the plain loops, the sums went through the
/// stack in shuffles, and fully connected layers ran at a fifth of onnxruntime's speed.)
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    const L: usize = DOT_LANES;
    let n = a.len().min(b.len());
    let whole = n / L * L;
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut r = [_mm256_setzero_ps(); 4];
    for c in (0..whole).step_by(L) {
        for (q, rq) in r.iter_mut().enumerate() {
            // SAFETY: c + 8q + 8 <= whole <= n: inside both slices.
            let (x, y) = unsafe { (_mm256_loadu_ps(pa.add(c + 8 * q)), _mm256_loadu_ps(pb.add(c + 8 * q))) };
            *rq = _mm256_add_ps(*rq, _mm256_mul_ps(x, y));
        }
    }
    let (r0, r1) = (_mm256_add_ps(r[0], r[2]), _mm256_add_ps(r[1], r[3]));
    let mut last = [0f32; 8];
    // SAFETY: `last` holds 8 floats.
    unsafe { _mm256_storeu_ps(last.as_mut_ptr(), _mm256_add_ps(r0, r1)) };
    let tail: f32 = a[whole..n].iter().zip(&b[whole..n]).map(|(x, y)| x * y).sum();
    last.iter().sum::<f32>() + tail
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_packed_avx2(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: Mat,
    b: Mat,
    c: &mut [&mut [f32]],
    epi: Epilogue,
) {
    gemm_packed::<MR_AVX2, NR_AVX2, true>(m, n, k, alpha, a, b, c, epi);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_packed_avx512(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: Mat,
    b: Mat,
    c: &mut [&mut [f32]],
    epi: Epilogue,
) {
    gemm_packed::<MR512, NR512, true>(m, n, k, alpha, a, b, c, epi);
}

const MR512: usize = 12;
const MR_AVX2: usize = 6;
const MR_PORTABLE: usize = 4;
const NR512: usize = 32;
const NR_AVX2: usize = 16;
const NR_PORTABLE: usize = 8;

/// Block sizes: A blocks are MC x KC, B panels KC x NC (MC and NC multiples of every MR / NR).
const KC: usize = 256;
const MC: usize = 96;
const NC: usize = 2048;

/// The packed, register-blocked GEMM: B panels packed in NR-wide strips, A blocks in
/// MR-tall strips, an MR x NR micro-kernel over each pair.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn gemm_packed<const MR: usize, const NR: usize, const FMA: bool>(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: Mat,
    b: Mat,
    c: &mut [&mut [f32]],
    epi: Epilogue,
) {
    // (Taken out of the thread-local, not borrowed in a closure: a closure would not
    // inherit the caller's target features.)
    let (mut ap, mut bp) = PACK.take();
    gemm_blocks::<MR, NR, FMA>(m, n, k, alpha, a, b, c, epi, &mut ap, &mut bp);
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
    epi: Epilogue,
    ap: &mut Vec<f32>,
    bp: &mut Vec<f32>,
) {
    let mut acc = [[0f32; NR]; MR];
    for j0 in (0..n).step_by(NC) {
        let nc = NC.min(n - j0);
        for p0 in (0..k).step_by(KC) {
            let kc = KC.min(k - p0);
            let (first, last) = (p0 == 0 && epi.overwrite, p0 + kc == k && epi.post());
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
                        #[cfg(target_arch = "x86_64")]
                        if FMA && MR == MR_AVX2 && NR == NR_AVX2 && mr == MR && nr == NR {
                            if let Some(tile) = TileOut::new(&epi, c, (ii, jj), alpha, (first, last)) {
                                // SAFETY: this 6 x 16 FMA kernel only runs inside
                                // `gemm_packed_avx2`, on a CPU with AVX2 and FMA; `tile`
                                // points to 6 distinct rows of 16 floats of C (and of Z).
                                unsafe { micro_tile_avx2(asl, bs, &tile) };
                                continue;
                            }
                        }
                        #[cfg(target_arch = "x86_64")]
                        if FMA && MR == MR512 && NR == NR512 && mr == MR && nr == NR {
                            if let Some(tile) = TileOut::new(&epi, c, (ii, jj), alpha, (first, last)) {
                                // SAFETY: this 12 x 32 kernel only runs inside
                                // `gemm_packed_avx512`, on a CPU with AVX-512F; `tile`
                                // points to 12 distinct rows of 32 floats of C (and of Z).
                                unsafe { micro_tile_avx512(asl, bs, &tile) };
                                continue;
                            }
                        }
                        micro::<MR, NR, FMA>(asl, bs, nr, &mut acc);
                        for (i, accr) in acc.iter().enumerate().take(mr) {
                            epi.store((ii + i, jj), &mut c[ii + i][jj..jj + nr], accr, alpha, (first, last));
                        }
                    }
                }
            }
        }
    }
}

/// `acc = A B` for one MR-tall strip of A and one NR-wide strip of B (`ap`, `bp`: their
/// KC-block, k-major), of which the first `cols` columns are used. The AVX-512 and AVX2
/// kernels are intrinsics: their sums live in registers from the first step (written in
/// plain Rust, the zeroed sums went through a memset of the stack and reloads that
/// stalled on it); they compute what the plain loop computes, `fma(a, b, sum)` from zero,
/// in the same order.
#[inline(always)]
fn micro<const MR: usize, const NR: usize, const FMA: bool>(
    ap: &[f32],
    bp: &[f32],
    cols: usize,
    acc: &mut [[f32; NR]; MR],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if FMA && MR == MR512 && NR == NR512 {
            let acc = (acc as *mut [[f32; NR]; MR]).cast::<[[f32; NR512]; MR512]>();
            // SAFETY: the shapes are equal (checked just above), so the cast is the identity;
            // and the 12 x 32 FMA kernel only runs inside `gemm_packed_avx512`, on a CPU that
            // has AVX-512F.
            unsafe { micro_avx512(ap, bp, cols, &mut *acc) };
            return;
        }
        if FMA && MR == MR_AVX2 && NR == NR_AVX2 {
            let acc = (acc as *mut [[f32; NR]; MR]).cast::<[[f32; NR_AVX2]; MR_AVX2]>();
            // SAFETY: as above; the 6 x 16 FMA kernel only runs inside `gemm_packed_avx2`,
            // on a CPU that has AVX2 and FMA.
            unsafe { micro_avx2(ap, bp, &mut *acc) };
            return;
        }
    }
    *acc = [[0f32; NR]; MR];
    for (av, bv) in ap.chunks_exact(MR).zip(bp.chunks_exact(NR)) {
        for i in 0..MR {
            let x = av[i];
            for j in 0..NR {
                acc[i][j] = if FMA { x.mul_add(bv[j], acc[i][j]) } else { acc[i][j] + x * bv[j] };
            }
        }
    }
}

/// [`micro`]'s 12 x 32 kernel: 24 zmm sums, two loads of B and 12 broadcasts of A per step;
/// for at most 16 `cols` (a product's last strip when its columns are no multiple of 32)
/// 12 sums and one load, the same bits in those columns, the rest of `acc` left as it was.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn micro_avx512(ap: &[f32], bp: &[f32], cols: usize, acc: &mut [[f32; NR512]; MR512]) {
    // SAFETY: the caller's CPU has AVX-512F.
    unsafe {
        if cols <= NR512 / 2 {
            store_sums_avx512(&sums_avx512::<1>(ap, bp), acc);
        } else {
            store_sums_avx512(&sums_avx512::<2>(ap, bp), acc);
        }
    }
}

/// Stores [`sums_avx512`]'s `W` vectors of each row at the start of `acc`'s rows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn store_sums_avx512<const W: usize>(
    c: &[[std::arch::x86_64::__m512; W]; MR512],
    acc: &mut [[f32; NR512]; MR512],
) {
    use std::arch::x86_64::*;
    for (row, ci) in acc.iter_mut().zip(c) {
        for (w, v) in ci.iter().enumerate() {
            // SAFETY: a row holds 32 floats, W (at most 2) stores of 16.
            unsafe { _mm512_storeu_ps(row.as_mut_ptr().add(16 * w), *v) };
        }
    }
}

/// [`micro_avx512`]'s sums over B's first `W` vectors of 16 columns (1 or 2), in
/// registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn sums_avx512<const W: usize>(ap: &[f32], bp: &[f32]) -> [[std::arch::x86_64::__m512; W]; MR512] {
    use std::arch::x86_64::*;
    debug_assert!(W <= NR512 / 16);
    let steps = (ap.len() / MR512).min(bp.len() / NR512);
    let (a, b) = (ap.as_ptr(), bp.as_ptr());
    let mut c = [[_mm512_setzero_ps(); W]; MR512];
    for p in 0..steps {
        // SAFETY: step p reads A[p * 12..][..12] and B[p * 32..][..16 W], inside the slices
        // (`steps` counts whole steps of both).
        unsafe {
            let mut bv = [_mm512_setzero_ps(); W];
            for (w, v) in bv.iter_mut().enumerate() {
                *v = _mm512_loadu_ps(b.add(p * NR512 + 16 * w));
            }
            for (i, ci) in c.iter_mut().enumerate() {
                let x = _mm512_set1_ps(*a.add(p * MR512 + i));
                for (cw, bw) in ci.iter_mut().zip(&bv) {
                    *cw = _mm512_fmadd_ps(x, *bw, *cw);
                }
            }
        }
    }
    c
}

/// [`micro`]'s 6 x 16 kernel: 12 ymm sums, two loads of B and 6 broadcasts of A per step.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn micro_avx2(ap: &[f32], bp: &[f32], acc: &mut [[f32; NR_AVX2]; MR_AVX2]) {
    use std::arch::x86_64::*;
    // SAFETY: the caller's CPU has AVX2 and FMA.
    let c = unsafe { sums_avx2(ap, bp) };
    for (row, ci) in acc.iter_mut().zip(&c) {
        // SAFETY: a row holds 16 floats: two stores of 8.
        unsafe {
            _mm256_storeu_ps(row.as_mut_ptr(), ci[0]);
            _mm256_storeu_ps(row.as_mut_ptr().add(8), ci[1]);
        }
    }
}

/// [`micro_avx2`]'s sums, in registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn sums_avx2(ap: &[f32], bp: &[f32]) -> [[std::arch::x86_64::__m256; 2]; MR_AVX2] {
    use std::arch::x86_64::*;
    let steps = (ap.len() / MR_AVX2).min(bp.len() / NR_AVX2);
    let (a, b) = (ap.as_ptr(), bp.as_ptr());
    let mut c = [[_mm256_setzero_ps(); 2]; MR_AVX2];
    for p in 0..steps {
        // SAFETY: step p reads A[p * 6..][..6] and B[p * 16..][..16], inside the slices.
        unsafe {
            let (b0, b1) = (_mm256_loadu_ps(b.add(p * NR_AVX2)), _mm256_loadu_ps(b.add(p * NR_AVX2 + 8)));
            for (i, ci) in c.iter_mut().enumerate() {
                let x = _mm256_set1_ps(*a.add(p * MR_AVX2 + i));
                ci[0] = _mm256_fmadd_ps(x, b0, ci[0]);
                ci[1] = _mm256_fmadd_ps(x, b1, ci[1]);
            }
        }
    }
    c
}

/// Where a whole 6 x 16 tile of C goes, and what [`Epilogue::store`] does on the way,
/// for [`micro_tile_avx2`] to do it from registers (storing the sums to the stack and
/// reading them back for the epilogue cost as much as the products when k is short:
/// Winograd's products over 16 to 64 channels, 1x1 layers over few channels).
#[cfg(target_arch = "x86_64")]
struct TileOut<'c, const MR: usize, const NR: usize> {
    rows: [*mut f32; MR],
    /// Each row's start (the bias or 0) when the tile writes C; None: it adds to C.
    start: Option<[f32; MR]>,
    z: Option<[*const f32; MR]>,
    relu: bool,
    alpha: f32,
    /// The rows (and Z's) are borrowed from the product's operands for this long.
    _borrow: std::marker::PhantomData<&'c mut [f32]>,
}

#[cfg(target_arch = "x86_64")]
impl<'c, const MR: usize, const NR: usize> TileOut<'c, MR, NR> {
    /// The tile at `(ii, jj)` of C (whole: MR rows of NR columns), when its epilogue is one
    /// the registers take (an activation other than ReLU goes through `store`).
    fn new<'e: 'c>(
        epi: &Epilogue<'e>,
        c: &'c mut [&mut [f32]],
        (ii, jj): (usize, usize),
        alpha: f32,
        (first, last): (bool, bool),
    ) -> Option<TileOut<'c, MR, NR>> {
        use super::epilogue::Activation;
        let relu = match epi.act {
            _ if !last => false,
            Activation::Identity => false,
            Activation::Relu => true,
            _ => return None,
        };
        let rows = c.get_mut(ii..ii + MR)?;
        let mut ptrs = [std::ptr::null_mut(); MR];
        for (p, row) in ptrs.iter_mut().zip(rows.iter_mut()) {
            *p = row.get_mut(jj..jj + NR)?.as_mut_ptr();
        }
        let z = match epi.z {
            Some(z) if last => {
                let mut zp = [std::ptr::null(); MR];
                for (i, p) in zp.iter_mut().enumerate() {
                    *p = z.get(epi.r0 + ii + i)?.get(epi.c0 + jj..epi.c0 + jj + NR)?.as_ptr();
                }
                Some(zp)
            }
            _ => None,
        };
        let start = first.then(|| std::array::from_fn(|i| epi.start(ii + i)));
        Some(TileOut { rows: ptrs, start, z, relu, alpha, _borrow: std::marker::PhantomData })
    }
}

/// [`micro_avx2`] and [`Epilogue::store`] of its rows, with the sums kept in registers: the
/// same operations in the same order (`start + alpha * sum` or `c + alpha * sum`, then `+ z`,
/// then ReLU), so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn micro_tile_avx2(ap: &[f32], bp: &[f32], t: &TileOut<'_, MR_AVX2, NR_AVX2>) {
    use std::arch::x86_64::*;
    // SAFETY: the caller's CPU has AVX2 and FMA; `t`'s rows (and Z's) are 16 floats each,
    // distinct, and C's rows are not read through anything else meanwhile.
    unsafe {
        let c = sums_avx2(ap, bp);
        let alpha = _mm256_set1_ps(t.alpha);
        for (i, ci) in c.iter().enumerate() {
            let p = t.rows[i];
            let (s0, s1) = (_mm256_mul_ps(alpha, ci[0]), _mm256_mul_ps(alpha, ci[1]));
            let (b0, b1) = match t.start {
                Some(start) => (_mm256_set1_ps(start[i]), _mm256_set1_ps(start[i])),
                None => (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8))),
            };
            let (mut v0, mut v1) = (_mm256_add_ps(b0, s0), _mm256_add_ps(b1, s1));
            if let Some(z) = t.z {
                v0 = _mm256_add_ps(v0, _mm256_loadu_ps(z[i]));
                v1 = _mm256_add_ps(v1, _mm256_loadu_ps(z[i].add(8)));
            }
            if t.relu {
                // max(v, 0) is 0 for a NaN, as `f32::max`.
                v0 = _mm256_max_ps(v0, _mm256_setzero_ps());
                v1 = _mm256_max_ps(v1, _mm256_setzero_ps());
            }
            _mm256_storeu_ps(p, v0);
            _mm256_storeu_ps(p.add(8), v1);
        }
    }
}

/// [`micro_tile_avx2`] for the 12 x 32 AVX-512 kernel: its sums and the epilogue of its
/// rows from registers, the same operations in the same order as [`Epilogue::store`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn micro_tile_avx512(ap: &[f32], bp: &[f32], t: &TileOut<'_, MR512, NR512>) {
    use std::arch::x86_64::*;
    // SAFETY: the caller's CPU has AVX-512F; `t`'s rows (and Z's) are 32 floats each,
    // distinct, and C's rows are not read through anything else meanwhile.
    unsafe {
        let c = sums_avx512::<2>(ap, bp);
        let alpha = _mm512_set1_ps(t.alpha);
        for (i, ci) in c.iter().enumerate() {
            let p = t.rows[i];
            let (s0, s1) = (_mm512_mul_ps(alpha, ci[0]), _mm512_mul_ps(alpha, ci[1]));
            let (b0, b1) = match t.start {
                Some(start) => (_mm512_set1_ps(start[i]), _mm512_set1_ps(start[i])),
                None => (_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16))),
            };
            let (mut v0, mut v1) = (_mm512_add_ps(b0, s0), _mm512_add_ps(b1, s1));
            if let Some(z) = t.z {
                v0 = _mm512_add_ps(v0, _mm512_loadu_ps(z[i]));
                v1 = _mm512_add_ps(v1, _mm512_loadu_ps(z[i].add(16)));
            }
            if t.relu {
                // max(v, 0) is 0 for a NaN, as `f32::max`.
                v0 = _mm512_max_ps(v0, _mm512_setzero_ps());
                v1 = _mm512_max_ps(v1, _mm512_setzero_ps());
            }
            _mm512_storeu_ps(p, v0);
            _mm512_storeu_ps(p.add(16), v1);
        }
    }
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
            let base = (p0 + p) * b.rs + jj * b.cs;
            if b.cs == 1 && w == NR {
                // A whole strip row: a copy of known size, inlined (a call to memmove per
                // row was a twentieth of resnet50's samples).
                let (src, dst): (&[f32; NR], &mut [f32; NR]) = (arr(&b.d[base..base + NR]), arr_mut(row));
                *dst = *src;
                continue;
            }
            row[w..].fill(0.0);
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
    use super::super::epilogue::Activation;
    use super::*;

    /// The AVX2 and AVX-512 kernels' whole tiles stored from registers give the bits of
    /// their sums stored and then written row by row by `Epilogue::store`: written from
    /// the bias or added to C, then (on the last block of k) with and without Z and ReLU,
    /// at offsets into the epilogue's rows and columns, with alpha 1.5, and with NaNs,
    /// infinities and signed zeros among the operands; the columns either side of the
    /// tile keep theirs. AVX-512's half-width strip gives its full kernel's first 16
    /// columns.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn tiles_stored_from_registers_give_the_row_stores_bits() {
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            tiles_match::<MR_AVX2, NR_AVX2>(micro_avx2, micro_tile_avx2);
        }
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY (in the closure): the CPU has AVX-512F, checked just above.
            tiles_match::<MR512, NR512>(|a, b, acc| unsafe { micro_avx512(a, b, NR512, acc) }, micro_tile_avx512);
            let kc = 29;
            let ap: Vec<f32> = (0..MR512 * kc).map(|i| (i % 13) as f32 * 0.37 - 2.0).collect();
            let bp: Vec<f32> = (0..NR512 * kc).map(|i| (i % 11) as f32 * 0.41 - 2.0).collect();
            let (mut full, mut half) = ([[0f32; NR512]; MR512], [[f32::NAN; NR512]; MR512]);
            // SAFETY: the CPU has AVX-512F (checked above).
            unsafe {
                micro_avx512(&ap, &bp, NR512, &mut full);
                micro_avx512(&ap, &bp, NR512 / 2, &mut half);
            }
            for (f, h) in full.iter().zip(&half) {
                assert_eq!(
                    f[..16].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    h[..16].iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                );
            }
        }
    }

    /// [`tiles_stored_from_registers_give_the_row_stores_bits`] for one kernel (the caller
    /// checked that the CPU has its features).
    #[cfg(target_arch = "x86_64")]
    fn tiles_match<const MR: usize, const NR: usize>(
        micro: unsafe fn(&[f32], &[f32], &mut [[f32; NR]; MR]),
        tile_kernel: unsafe fn(&[f32], &[f32], &TileOut<'_, MR, NR>),
    ) {
        let special = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0];
        let val = |i: usize, s: usize| {
            let h = (i * 37 + s * 11) % 29;
            // (The products stay finite: the specials are in the bias, Z and C.)
            if h < 5 && s > 2 {
                special[h]
            } else {
                h as f32 * 0.25 - 3.0
            }
        };
        let kc = 37;
        let ap: Vec<f32> = (0..MR * kc).map(|i| val(i, 1)).collect();
        let bp: Vec<f32> = (0..NR * kc).map(|i| val(i, 2)).collect();
        let (r0, c0) = (3, 5);
        let bias: Vec<f32> = (0..r0 + MR).map(|i| val(i, 3)).collect();
        let z: Vec<Vec<f32>> = (0..r0 + MR).map(|r| (0..c0 + NR).map(|j| val(r * 100 + j, 4)).collect()).collect();
        let z_rows: Vec<&[f32]> = z.iter().map(|r| &r[..]).collect();
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for act in [Activation::Identity, Activation::Relu] {
            for with_z in [false, true] {
                for (first, last) in [(true, true), (true, false), (false, true), (false, false)] {
                    let epi = Epilogue::write(Some(&bias), act, with_z.then_some(&z_rows[..])).at(r0, c0);
                    let c: Vec<Vec<f32>> = (0..MR).map(|r| (0..NR + 2).map(|j| val(r * 50 + j, 5)).collect()).collect();
                    let (mut want, mut got) = (c.clone(), c);
                    let mut acc = [[0f32; NR]; MR];
                    // SAFETY: the CPU has the kernel's features (the caller checked).
                    unsafe { micro(&ap, &bp, &mut acc) };
                    for (i, row) in want.iter_mut().enumerate() {
                        epi.store((i, 0), &mut row[1..1 + NR], &acc[i], 1.5, (first, last));
                    }
                    let mut rows: Vec<&mut [f32]> = got.iter_mut().map(|r| &mut r[1..]).collect();
                    let tile = TileOut::new(&epi, &mut rows, (0, 0), 1.5, (first, last)).expect("a whole tile");
                    // SAFETY: as above; the tile's rows are `got`'s.
                    unsafe { tile_kernel(&ap, &bp, &tile) };
                    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
                        for (j, (&w, &g)) in w.iter().zip(g).enumerate() {
                            assert!(
                                same(w, g),
                                "{MR}x{NR}, {act:?}, z {with_z}, first {first}, last {last}: [{i}][{j}] {g} vs {w}"
                            );
                        }
                    }
                }
            }
        }
        let sums_finite = (0..NR).all(|j| (0..kc).map(|p| ap[p * MR] * bp[p * NR + j]).sum::<f32>().is_finite());
        assert!(sums_finite && special.iter().all(|&v| bias.iter().chain(z.concat().iter()).any(|&x| same(x, v))));
    }

    /// The dot product of the few-row and matrix-vector products: the AVX2 intrinsics
    /// give the plain loops' bits, at every length around the 32 lanes, and both agree
    /// with the f64 sum.
    #[test]
    fn dot_products_match_the_plain_loops_bit_for_bit() {
        let val = |i: usize, s: usize| ((i * 37 + s * 11) % 23) as f32 * 0.37 - 4.1;
        for n in (0..100).chain([255, 256, 257, 2048, 2049]) {
            let a: Vec<f32> = (0..n).map(|i| val(i, 1)).collect();
            let b: Vec<f32> = (0..n).map(|i| val(i, 2)).collect();
            let got = dot(&a, &b);
            assert_eq!(got.to_bits(), dot_lanes(&a, &b).to_bits(), "length {n}");
            let want: f64 = a.iter().zip(&b).map(|(&x, &y)| x as f64 * y as f64).sum();
            assert!((got as f64 - want).abs() <= 1e-4 * want.abs().max(1.0), "length {n}: {got} vs {want}");
        }
    }

    /// Every GEMM kernel this CPU has (AVX-512's 12 x 32, AVX2's 6 x 16 and the portable
    /// 4 x 8) on sizes that are no multiple of their strips, over several blocks of k: adding
    /// to C, and writing C from a bias with an epilogue after (ReLU, a residual Z, and an
    /// activation the AVX2 kernel's registers leave to the row stores). Sums in f64 for
    /// reference.
    #[test]
    fn every_gemm_kernel_matches_naive_loops() {
        let (m, k, n) = (29usize, 600usize, 70usize);
        let val = |i: usize, s: usize| ((i * 37 + s * 11) % 23) as f32 * 0.125 - 1.375;
        let a: Vec<f32> = (0..m * k).map(|i| val(i, 1)).collect();
        let b: Vec<f32> = (0..k * n).map(|i| val(i, 2)).collect();
        let bias: Vec<f32> = (0..m).map(|i| val(i, 3)).collect();
        let z: Vec<f32> = (0..m * n).map(|i| val(i, 4) * 40.0).collect();
        let z_rows: Vec<&[f32]> = z.chunks(n).collect();
        let dot = |i: usize, j: usize| (0..k).map(|p| a[i * k + p] as f64 * b[p * n + j] as f64).sum::<f64>();
        type Kernel = unsafe fn(usize, usize, usize, f32, Mat, Mat, &mut [&mut [f32]], Epilogue);
        let mut kernels: Vec<(&str, Kernel)> = vec![("portable", |m, n, k, al, a, b, c, e| {
            gemm_packed::<MR_PORTABLE, NR_PORTABLE, false>(m, n, k, al, a, b, c, e)
        })];
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                kernels.push(("avx2", gemm_packed_avx2));
            }
            if std::is_x86_feature_detected!("avx512f") {
                kernels.push(("avx512", gemm_packed_avx512));
            }
        }
        let leaky = |v: f64| if v > 0.0 { v } else { 0.25 * v };
        type Want<'a> = &'a dyn Fn(usize, usize, f64) -> f64;
        let epilogues: [(&str, Epilogue, Want); 4] = [
            ("add", Epilogue::ADD, &|_, _, p| 1.0 + p),
            ("bias+relu", Epilogue::write(Some(&bias), Activation::Relu, None), &|i, _, p| {
                (bias[i] as f64 + p).max(0.0)
            }),
            ("z", Epilogue::write(None, Activation::Identity, Some(&z_rows)), &|i, j, p| p + z[i * n + j] as f64),
            ("bias+z+leaky", Epilogue::write(Some(&bias), Activation::LeakyRelu(0.25), Some(&z_rows)), &|i, j, p| {
                leaky(bias[i] as f64 + p + z[i * n + j] as f64)
            }),
        ];
        for (name, kernel) in kernels {
            for (what, epi, want) in &epilogues {
                let mut c = vec![1f32; m * n];
                let mut rows: Vec<&mut [f32]> = c.chunks_mut(n).collect();
                let (am, bm) = (Mat { d: &a, rs: k, cs: 1, packed: None }, Mat { d: &b, rs: n, cs: 1, packed: None });
                // SAFETY: the CPU has the kernel's features (detected above).
                unsafe { kernel(m, n, k, 2.0, am, bm, &mut rows, *epi) };
                for (idx, &got) in c.iter().enumerate() {
                    let (i, j) = (idx / n, idx % n);
                    let want = want(i, j, 2.0 * dot(i, j));
                    assert!(
                        (got as f64 - want).abs() <= 1e-4 * want.abs().max(1.0),
                        "{name}, {what}: C[{i}][{j}] = {got}, expected {want}"
                    );
                }
            }
        }
    }
}
