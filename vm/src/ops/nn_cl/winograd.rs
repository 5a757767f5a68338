//! Winograd F(2x2, 3x3) on OpenCL, for f32 3x3 convolutions with unit strides and one
//! group: the host's algorithm (`ops/nn/winograd.rs`) as four kernels.
//!
//! 1. The weights' transform `U = G g Gᵀ`, [16][K][C], one work-item per (output, input)
//!    channel pair.
//! 2. The input's transform `V = Bᵀ d Bᵀ`, [16][C][T] for a block of T tiles, one
//!    work-item per (tile, channel): neighbouring work-items take neighbouring tiles.
//! 3. The 16 products `M[p] = U[p] V[p]`, [16][K][T]: a work-item keeps the sums of a
//!    block of output channels for one tile in registers, as the direct convolution does,
//!    so every load of V feeds that many multiply-adds and the weights it reads are the
//!    same for all the tiles of a vector or a GPU wave (a broadcast).
//! 4. The output's transform `Aᵀ M A` with the bias and FusedConv's epilogue, one
//!    work-item per (tile, output channel).
//!
//! The transformed input and products live in device scratch buffers of at most
//! [`BLOCK_BYTES`] each, a block of tiles at a time; the queue runs the blocks in order.

use super::super::cl::{float_arg as f, ClCtx, ClTensor, Scratch};
use crate::opencl::device::KernelArg;

/// The most bytes of the transformed input, and of the products, of one block of tiles.
const BLOCK_BYTES: usize = 16 << 20;

/// A convolution's geometry for Winograd: one image's planes and the padding before them.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plane {
    pub(super) n: usize,
    pub(super) c: usize,
    pub(super) k: usize,
    pub(super) ih: usize,
    pub(super) iw: usize,
    pub(super) oh: usize,
    pub(super) ow: usize,
    pub(super) pt: usize,
    pub(super) pl: usize,
}

impl Plane {
    /// Whether Winograd takes the convolution: enough input and output channels, and
    /// tiles, that the transforms cost less than the multiplies they save.
    pub(super) fn takes(&self) -> bool {
        self.c >= 32 && self.k >= 16 && self.tiles_per_image() >= 16 && self.pt <= 2 && self.pl <= 2
    }

    fn tiles_per_image(&self) -> usize {
        self.oh.div_ceil(2) * self.ow.div_ceil(2)
    }
}

/// Output channels per work-item of the products: the largest of 32, 16, 8, 4, 2 and 1
/// that divides `k` (on Intel's CPU runtime, vgg19 with 32: 244 ms, 16: 256, 8: 337).
fn channel_block(k: usize) -> usize {
    [32, 16, 8, 4, 2, 1].into_iter().find(|b| k.is_multiple_of(*b)).unwrap_or(1)
}

fn int(v: usize) -> Result<KernelArg, String> {
    i32::try_from(v).map(KernelArg::I32).map_err(|_| format!("{v} is too large for the Winograd kernels"))
}

/// The convolution of `x` by `w` (bias `b`) into `y`: `epilogue` is OpenCL C applied to
/// `acc` before each output's store, `oi` its index in `y` (reading `z` at `zo + oi` and
/// the activation parameters `p0`, `p1`).
#[allow(clippy::too_many_arguments)]
pub(super) fn conv(
    ctx: &ClCtx,
    pl: &Plane,
    x: &ClTensor,
    w: &ClTensor,
    b: Option<&ClTensor>,
    y: &ClTensor,
    z: Option<&ClTensor>,
    epilogue: &str,
    params: [f32; 2],
) -> Result<(), String> {
    let block = BLOCK_BYTES / (4 * 16 * pl.c.max(pl.k));
    conv_in_blocks(ctx, pl, x, w, b, y, z, epilogue, params, block)
}

/// [`conv`] in blocks of at most `block` tiles.
#[allow(clippy::too_many_arguments)]
fn conv_in_blocks(
    ctx: &ClCtx,
    pl: &Plane,
    x: &ClTensor,
    w: &ClTensor,
    b: Option<&ClTensor>,
    y: &ClTensor,
    z: Option<&ClTensor>,
    epilogue: &str,
    params: [f32; 2],
    block: usize,
) -> Result<(), String> {
    let (c, k) = (pl.c, pl.k);
    let per_image = pl.tiles_per_image();
    let total = pl.n * per_image;
    let block = block.clamp(1, total.max(1));
    let u = Scratch::new(ctx, (16 * k * c * 4) as u64)?;
    let v = Scratch::new(ctx, (16 * c * block * 4) as u64)?;
    let m = Scratch::new(ctx, (16 * k * block * 4) as u64)?;
    ctx.run(WEIGHTS, &[w.args()[0], w.args()[1], u.arg(), int(k)?, int(c)?], k * c)?;
    let kb = channel_block(k);
    let products = products_source(kb);
    let output = output_source(b.is_some(), epilogue);
    for t0 in (0..total).step_by(block) {
        let t = block.min(total - t0);
        let geo = [pl.ih, pl.iw, pl.oh, pl.ow, pl.pt, pl.pl, pl.ow.div_ceil(2), per_image];
        let mut args = vec![x.args()[0], x.args()[1], v.arg(), int(c)?, int(t0)?, int(t)?];
        for g in geo {
            args.push(int(g)?);
        }
        ctx.run_nd(INPUT, &args, &[t, c])?;
        let args = [u.arg(), v.arg(), m.arg(), int(c)?, int(k)?, int(t)?];
        ctx.run_nd(&products, &args, &[t, k / kb, 16])?;
        let bias = b.unwrap_or(y);
        let zt = z.unwrap_or(y);
        let mut args = vec![m.arg(), bias.args()[0], bias.args()[1], y.args()[0], y.args()[1]];
        args.extend([zt.args()[0], zt.args()[1], f(params[0]), f(params[1]), int(k)?, int(t0)?, int(t)?]);
        for g in [pl.oh, pl.ow, pl.ow.div_ceil(2), per_image] {
            args.push(int(g)?);
        }
        ctx.run_nd(&output, &args, &[t, k])?;
    }
    Ok(())
}

/// `U[p][k][c] = (G g Gᵀ)[p]` with `G = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1]`.
const WEIGHTS: &str = "__kernel void k(__global const float* w, ulong wo, __global float* u, int K, int C) {
  int kc = get_global_id(0);
  __global const float* g = w + wo + (long)kc * 9;
  float gg[4][3];
  for (int j = 0; j < 3; j++) {
    float a = g[j], b = g[3 + j], c = g[6 + j];
    gg[0][j] = a; gg[1][j] = 0.5f * (a + b + c); gg[2][j] = 0.5f * (a - b + c); gg[3][j] = c;
  }
  long kcs = (long)K * C;
  for (int i = 0; i < 4; i++) {
    float r0 = gg[i][0], r1 = gg[i][1], r2 = gg[i][2];
    u[(i * 4 + 0) * kcs + kc] = r0;
    u[(i * 4 + 1) * kcs + kc] = 0.5f * (r0 + r1 + r2);
    u[(i * 4 + 2) * kcs + kc] = 0.5f * (r0 - r1 + r2);
    u[(i * 4 + 3) * kcs + kc] = r2;
  }
}
";

/// `V[p][c][t] = (Bᵀ d B)[p]` for tile `t0 + t` of input channel `c`, with
/// `Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]` and zeros outside the input.
const INPUT: &str = "__kernel void k(__global const float* x, ulong xo, __global float* v, int C, int t0, int T,
    int H, int W, int OH, int OW, int PT, int PL, int TW, int TPI) {
  int t = get_global_id(0), c = get_global_id(1);
  int tg = t0 + t, img = tg / TPI, r = tg - img * TPI, ty = r / TW, tx = r - ty * TW;
  __global const float* xp = x + xo + ((long)img * C + c) * H * W;
  int y0 = 2 * ty - PT, x0 = 2 * tx - PL;
  float d[4][4];
  for (int i = 0; i < 4; i++) {
    int iy = y0 + i;
    for (int j = 0; j < 4; j++) {
      int ix = x0 + j;
      d[i][j] = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? xp[iy * W + ix] : 0.0f;
    }
  }
  float e[4][4];
  for (int j = 0; j < 4; j++) {
    e[0][j] = d[0][j] - d[2][j]; e[1][j] = d[1][j] + d[2][j];
    e[2][j] = d[2][j] - d[1][j]; e[3][j] = d[1][j] - d[3][j];
  }
  long ct = (long)C * T;
  __global float* vp = v + (long)c * T + t;
  for (int i = 0; i < 4; i++) {
    vp[(i * 4 + 0) * ct] = e[i][0] - e[i][2];
    vp[(i * 4 + 1) * ct] = e[i][1] + e[i][2];
    vp[(i * 4 + 2) * ct] = e[i][2] - e[i][1];
    vp[(i * 4 + 3) * ct] = e[i][1] - e[i][3];
  }
}
";

/// `M[p][k][t] = sum_c U[p][k][c] V[p][c][t]` for a block of `kb` output channels.
/// (Blocks of 2 to 4 tiles per work-item as well, each load of U feeding several sums,
/// were slower on Intel's CPU runtime: vgg19 293-369 ms against 244.)
fn products_source(kb: usize) -> String {
    let sums: String = (0..kb).map(|j| format!("    s{j} += up[{j} * C + c] * xv;\n")).collect();
    let decl: String = (0..kb).map(|j| format!("  float s{j} = 0.0f;\n")).collect();
    let stores: String = (0..kb).map(|j| format!("  mp[{j} * (long)T] = s{j};\n")).collect();
    format!(
        "__kernel void k(__global const float* u, __global const float* v, __global float* m, int C, int K, int T) {{
  int t = get_global_id(0), k0 = get_global_id(1) * {kb}, p = get_global_id(2);
  __global const float* vp = v + (long)p * C * T + t;
  __global const float* up = u + ((long)p * K + k0) * C;
{decl}  for (int c = 0; c < C; c++) {{
    float xv = vp[(long)c * T];
{sums}  }}
  __global float* mp = m + ((long)p * K + k0) * T + t;
{stores}}}
"
    )
}

/// `Y = Aᵀ M A` (plus the bias and the epilogue) for tile `t0 + t` of output channel `k`,
/// with `Aᵀ = [1 1 1 0; 0 1 -1 -1]`; the outputs past the plane's edge are not stored.
fn output_source(bias: bool, epilogue: &str) -> String {
    let bias = if bias { "b[bo + k]" } else { "0.0f" };
    let store = |dy: usize, dx: usize| {
        format!(
            "  if (oy0 + {dy} < OH && ox0 + {dx} < OW) {{\n    long oi = base + (oy0 + {dy}) * OW + ox0 + {dx};\n    \
             float acc = o{dy}{dx} + bias;\n  {epilogue}    y[yo + oi] = acc;\n  }}\n"
        )
    };
    let stores: String = [(0, 0), (0, 1), (1, 0), (1, 1)].iter().map(|&(a, b)| store(a, b)).collect();
    format!(
        "__kernel void k(__global const float* m, __global const float* b, ulong bo, __global float* y, ulong yo,
    __global const float* z, ulong zo, float p0, float p1, int K, int t0, int T, int OH, int OW, int TW, int TPI) {{
  int t = get_global_id(0), k = get_global_id(1);
  int tg = t0 + t, img = tg / TPI, r = tg - img * TPI, ty = r / TW, tx = r - ty * TW;
  long kt = (long)K * T;
  __global const float* mp = m + (long)k * T + t;
  float q[16];
  for (int i = 0; i < 16; i++) q[i] = mp[i * kt];
  float s0[4], s1[4];
  for (int j = 0; j < 4; j++) {{
    s0[j] = q[j] + q[4 + j] + q[8 + j];
    s1[j] = q[4 + j] - q[8 + j] - q[12 + j];
  }}
  float o00 = s0[0] + s0[1] + s0[2], o01 = s0[1] - s0[2] - s0[3];
  float o10 = s1[0] + s1[1] + s1[2], o11 = s1[1] - s1[2] - s1[3];
  float bias = {bias};
  int oy0 = 2 * ty, ox0 = 2 * tx;
  long base = ((long)img * K + k) * OH * OW;
{stores}}}
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ir::host_tensor::{store_f64, HostTensor};
    use crate::ir::types::DType;
    use crate::opencl::device::{ClView, ViewKind};
    use crate::ops::bitwise_cl::tests::{check_tol, values};
    use crate::ops::cl::testing::{device, upload};
    use crate::ops::{Attrs, OPS};

    /// Small integers in [-4, 4): the transforms' halves and quarters and every sum are
    /// exact in f32, so host and device give the same values.
    fn ints(shape: &[i64], seed: u64) -> HostTensor {
        let mut t = HostTensor::zeros(DType::F32, shape).unwrap();
        for (c, x) in t.data.chunks_exact_mut(4).zip(values(DType::I32, shape, seed, -4.0, 4.0).to_f64()) {
            store_f64(DType::F32, x, c);
        }
        t
    }

    fn attrs(list: Vec<(&str, AttrValue)>) -> Attrs {
        Attrs(list.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// Conv and FusedConv (with Z and LeakyRelu) through the operators, a batch of 2 with
    /// asymmetric pads; and the block loop in blocks of 7 tiles, which splits the images'
    /// tiles between blocks: all exactly the host's results.
    #[test]
    fn winograd_convolutions_match_the_host() {
        let Some(dev) = device() else { return };
        let pads = AttrValue::Ints(vec![1, 0, 2, 1]);
        let (x, w, b) = (ints(&[2, 32, 9, 11], 1), ints(&[16, 32, 3, 3], 2), ints(&[16], 3));
        let plane = Plane { n: 2, c: 32, k: 16, ih: 9, iw: 11, oh: 10, ow: 10, pt: 1, pl: 0 };
        assert!(plane.takes());
        let conv = attrs(vec![("pads", pads.clone())]);
        check_tol(&dev, "Conv", &[Some(x.clone()), Some(w.clone()), Some(b.clone())], &conv, 0.0);
        let z = ints(&[2, 16, 10, 10], 4);
        let fused = attrs(vec![
            ("pads", pads),
            ("activation", AttrValue::Str("LeakyRelu".into())),
            ("activation_params", AttrValue::Floats(vec![0.25])),
        ]);
        check_tol(&dev, "FusedConv", &[Some(x.clone()), Some(w.clone()), Some(b.clone()), Some(z)], &fused, 0.0);

        let def = OPS.iter().find(|o| o.name == "Conv").unwrap();
        let mut want = [HostTensor::zeros(DType::F32, &[2, 16, 10, 10]).unwrap()];
        (def.op.id().host_kernel().unwrap())(&[Some(&x), Some(&w), Some(&b)], &conv, &mut want).unwrap();
        let (xb, xt) = upload(&dev, &x, None);
        let (wb, wt) = upload(&dev, &w, None);
        let (bb, bt) = upload(&dev, &b, None);
        let (yb, yt) = upload(&dev, &want[0], Some(0xA5));
        let ctx = ClCtx { dev: &dev };
        conv_in_blocks(&ctx, &plane, &xt, &wt, Some(&bt), &yt, None, "", [0.0; 2], 7).unwrap();
        let mut got = vec![0u8; want[0].data.len()];
        let view = ClView { mem: yt.mem, offset: yt.offset * 4, kind: ViewKind::Buffer };
        dev.read(&view, got.len(), None, &mut got).unwrap();
        assert!(got == want[0].data, "blocks of 7 tiles");
        assert!(want[0].to_f64().iter().filter(|v| v.abs() > 1.0).count() > 100, "outputs of size O(1)");
        for block in [xb, wb, bb, yb] {
            dev.release(block);
        }
    }
}
