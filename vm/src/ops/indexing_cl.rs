//! OpenCL buffer kernels of the indexing family (see `super::cl`). They mirror the host
//! kernels in `super::indexing`.
//!
//! Operands are passed as buffers of the unsigned type of their element width
//! (`uchar`..`ulong`): the operators that move elements copy those bits, so one program
//! serves every dtype of a width; the ones that compute load and store through the
//! `LD`/`ST` macros of their dtype (`half` through `vload_half`/`vstore_half`, computed in
//! float and rounded to half at every step, as the host does). Shapes and strides are
//! kernel arguments; a program depends only on the rank, the axis and the dtypes.
//!
//! Indices are read and checked on the device: a work-item that meets an index outside its
//! axis records the index's position in an error flag (`atomic_min`) and stops, and the
//! launcher reads the offending index back for the error. Scatters copy the data first and
//! then let each work-item apply the updates of its own output positions in index order,
//! so duplicates resolve as on the host (the last write wins, reductions in order).
//! Inputs that overlap an output in memory are staged in a temporary buffer first.

use super::cl::{check_out, cl_type, input, need_fp64, output, with_buffer, ClCtx, ClFn, ClTensor, Infos, Res};
use super::{Attrs, Operator, TensorInfo};
use crate::ir::host_tensor::{load_i64, store_f64, HostTensor};
use crate::ir::operators::indexing::*;
use crate::ir::operators::tensor::norm_axis;
use crate::ir::types::DType;
use crate::opencl::device::{ClView, KernelArg, ViewKind};
use crate::opencl::narrow;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[
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

/// Defines the registered launcher `$name` as `$inner` run on inputs staged away from the
/// outputs' memory.
macro_rules! staged {
    ($($name:ident => $inner:ident),* $(,)?) => {$(
        fn $name(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
            staged(ctx, ins, outs, |ins| $inner(ctx, ins, infos, attrs, outs))
        }
    )*};
}

staged!(
    gather_elements => gather_elements_k,
    trilu => trilu_k,
    cum_sum => cum_sum_k,
    cum_prod => cum_prod_k,
    top_k => top_k_k,
    scatter_elements => scatter_elements_k,
    scatter_nd => scatter_nd_k,
    hardmax => hardmax_k,
    one_hot => one_hot_k,
    gather_nd => gather_nd_k,
    depth_to_space => depth_to_space_k,
    space_to_depth => space_to_depth_k,
    reverse_sequence => reverse_sequence_k,
    scatter => scatter_k,
    compress => compress_k,
    center_crop_pad => center_crop_pad_k,
);

// ---------------------------------------------------------------------------------------
// Helpers.

/// The unsigned OpenCL type of an element of `d`'s width.
fn bits(d: DType) -> &'static str {
    match d.size() {
        1 => "uchar",
        2 => "ushort",
        4 => "uint",
        _ => "ulong",
    }
}

/// The global size of a launch over `n` work-items.
fn global(n: u64) -> Result<usize, String> {
    usize::try_from(n).map_err(|_| "tensor too large".to_string())
}

fn u(v: usize) -> KernelArg {
    KernelArg::U64(v as u64)
}

fn udims_of(s: &[i64]) -> Vec<usize> {
    s.iter().map(|&d| d.max(0) as usize).collect()
}

fn strides(shape: &[usize]) -> Vec<usize> {
    super::indexing::strides(shape)
}

/// `(outer, n, inner)` of a shape around `axis`.
fn split3(shape: &[i64], axis: usize) -> (usize, usize, usize) {
    let s = udims_of(shape);
    (s[..axis].iter().product(), s.get(axis).copied().unwrap_or(1), s[(axis + 1).min(s.len())..].iter().product())
}

/// The source prelude of typed loads and stores for dtype `d`: `CT` (the compute type),
/// `LD(p, i)`, `ST(p, i, v)` on bit-typed pointers, `RND` (rounding to the dtype), `GT`,
/// `EQ`, `ISNAN` (NaN above every number), `ADD`/`MUL` (wrapping for integers).
fn typed(d: DType) -> String {
    let t = cl_type(d);
    let b = bits(d);
    let mut s = String::new();
    if d == DType::F64 {
        s.push_str("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n");
    }
    if d == DType::F16 {
        s.push_str(
            "#define CT float\n#define LD(p, i) vload_half((i), (__global const half*)(p))\n\
             #define ST(p, i, v) vstore_half((v), (i), (__global half*)(p))\n\
             float rnd(float v) { ushort h; vstore_half(v, 0, (half*)&h); return vload_half(0, (const half*)&h); }\n\
             #define RND(v) rnd(v)\n",
        );
    } else if d == DType::BF16 {
        // Computed in float, stored rounded to nearest even.
        s.push_str(&narrow::defs(d, false));
        s.push_str(&format!(
            "#define CT float\n#define LD(p, i) {}\n#define ST(p, i, v) (((__global ushort*)(p))[i] = {})\n\
             #define RND(v) {}\n",
            narrow::load(d, "((__global const ushort*)(p))[i]"),
            narrow::store_default(d, "(v)"),
            narrow::load(d, &narrow::store_default(d, "(v)")),
        ));
    } else {
        s.push_str(&format!(
            "#define CT {t}\n#define LD(p, i) (((__global const {t}*)(p))[i])\n\
             #define ST(p, i, v) (((__global {t}*)(p))[i] = (v))\n#define RND(v) (v)\n"
        ));
    }
    // float8 codes only move (no operator computes on them): the integer forms compile.
    if d.is_float() && !d.is_float8() {
        s.push_str(
            "#define ISNAN(a) isnan(a)\n#define GT(a, b) ((isnan(a) && !isnan(b)) || (a) > (b))\n\
             #define EQ(a, b) ((isnan(a) && isnan(b)) || (a) == (b))\n#define ADD(a, b) ((a) + (b))\n\
             #define MUL(a, b) ((a) * (b))\n",
        );
    } else {
        s.push_str(&format!(
            "#define ISNAN(a) 0\n#define GT(a, b) ((a) > (b))\n#define EQ(a, b) ((a) == (b))\n\
             #define ADD(a, b) (({t})(({b})(a) + ({b})(b)))\n#define MUL(a, b) (({t})(({b})(a) * ({b})(b)))\n"
        ));
    }
    s.push_str(&format!("typedef {b} T;\n"));
    s
}

/// The error flag macro: records position `q` of a bad index and ends the work-item.
const BAD: &str = "#define BAD(q) { atomic_min(err, (uint)min((ulong)(q), (ulong)0xfffffffe)); return; }\n";

/// OpenCL statements splitting `var` into coordinates `c0..` over the dims `{dn}0..` (kernel
/// arguments), skipping `skip`.
fn coords(r: usize, var: &str, dn: &str, skip: Option<usize>) -> String {
    let mut s = format!("  ulong rem = {var};\n");
    for d in (0..r).rev() {
        if Some(d) == skip {
            continue;
        }
        s.push_str(&format!("  ulong c{d} = rem % {dn}{d}; rem /= {dn}{d};\n"));
    }
    s
}

/// `ulong {name}0, ulong {name}1, ...` kernel parameters.
fn params(r: usize, name: &str, ty: &str) -> String {
    (0..r).map(|d| format!(", {ty} {name}{d}")).collect()
}

/// Runs `src` (whose last parameter is `__global uint* err`, lowered through [`BAD`] to the
/// position of a bad index) and returns that position, if any.
fn run_flagged(ctx: &ClCtx, src: &str, mut args: Vec<KernelArg>, n: usize) -> Result<Option<u64>, String> {
    let (block, _) = ctx.dev.alloc(4).map_err(|e| e.to_string())?;
    let view = ClView { mem: block.raw(), offset: 0, kind: ViewKind::Buffer };
    let mut flag = [0xffu8; 4];
    let r = ctx.dev.write(&view, None, &flag).map_err(|e| e.to_string()).and_then(|_| {
        args.push(KernelArg::Mem(block.raw()));
        ctx.run(src, &args, n)?;
        ctx.dev.read(&view, 4, None, &mut flag).map_err(|e| e.to_string())
    });
    ctx.dev.release(block);
    r?;
    let q = u32::from_le_bytes(flag);
    Ok((q != u32::MAX).then_some(q as u64))
}

/// Reads `count` elements of `t` from element `at` on the device.
fn read_elems(ctx: &ClCtx, t: &ClTensor, at: u64, count: usize) -> Result<Vec<u8>, String> {
    let es = t.dtype.size();
    let mut b = vec![0u8; count * es];
    if count > 0 {
        let v = ClView { mem: t.mem, offset: (t.offset + at) * es as u64, kind: ViewKind::Buffer };
        ctx.dev.read(&v, b.len(), None, &mut b).map_err(|e| e.to_string())?;
    }
    Ok(b)
}

/// The value of input `t`: the host copy the interpreter passed, else read from the device.
fn host_value(ctx: &ClCtx, t: &ClTensor, info: Option<&TensorInfo>) -> Result<HostTensor, String> {
    if let Some(v) = info.and_then(|i| i.value) {
        return Ok(v.clone());
    }
    let n = usize::try_from(t.numel()).map_err(|_| "tensor too large")?;
    HostTensor::new(t.dtype, t.shape.clone(), read_elems(ctx, t, 0, n)?)
}

/// The error for the bad index at position `q` of `idx` (read back from the device).
fn bad_index(ctx: &ClCtx, op: &str, idx: &ClTensor, q: u64, what: impl Fn(i64) -> String) -> String {
    match read_elems(ctx, idx, q, 1) {
        Ok(b) => format!("{op}: {}", what(load_i64(idx.dtype, &b))),
        Err(_) => format!("{op}: an index is out of range"),
    }
}

/// Copies all of `x` into `y` (same element width and count).
fn copy(ctx: &ClCtx, x: &ClTensor, y: &ClTensor) -> Res {
    let n = y.numel();
    if x.numel() != n || x.dtype.size() != y.dtype.size() {
        return Err(format!("cannot copy {}{:?} into {}{:?}", x.dtype, x.shape, y.dtype, y.shape));
    }
    if n == 0 || (x.mem == y.mem && x.offset == y.offset) {
        return Ok(());
    }
    let t = bits(x.dtype);
    let src = format!(
        "__kernel void k(__global const {t}* x, ulong xo, __global {t}* y, ulong yo, ulong n) {{\n  \
         ulong i = get_global_id(0);\n  if (i < n) y[yo + i] = x[xo + i];\n}}\n"
    );
    let [xm, xo] = x.args();
    let [ym, yo] = y.args();
    ctx.run(&src, &[xm, xo, ym, yo, KernelArg::U64(n)], global(n)?)
}

/// Runs `f` on the inputs, first copying to a temporary buffer every input whose bytes
/// overlap an output's in the same `cl_mem` (an in-place call: a launch's work-items do not
/// read all of an input before others write the output).
fn staged(ctx: &ClCtx, ins: &[Option<ClTensor>], outs: &[ClTensor], f: impl FnOnce(&[Option<ClTensor>]) -> Res) -> Res {
    let bytes = |t: &ClTensor| {
        let es = t.dtype.size() as u128;
        (t.offset as u128 * es, (t.offset as u128 + t.numel() as u128) * es)
    };
    let overlaps = |t: &ClTensor| {
        let (a0, a1) = bytes(t);
        outs.iter().any(|o| {
            let (b0, b1) = bytes(o);
            o.mem == t.mem && a0 < b1 && b0 < a1
        })
    };
    if !ins.iter().flatten().any(overlaps) {
        return f(ins);
    }
    let mut blocks = Vec::new();
    let mut staged = Vec::with_capacity(ins.len());
    let mut r = Ok(());
    for t in ins {
        staged.push(match t {
            Some(t) if r.is_ok() && overlaps(t) => match ctx.dev.alloc((t.numel() * t.dtype.size() as u64).max(8)) {
                Ok((block, _)) => {
                    let c = ClTensor { mem: block.raw(), offset: 0, dtype: t.dtype, shape: t.shape.clone() };
                    blocks.push(block);
                    r = copy(ctx, t, &c);
                    Some(c)
                }
                Err(e) => {
                    r = Err(e.to_string());
                    None
                }
            },
            t => t.clone(),
        });
    }
    if r.is_ok() {
        r = f(&staged);
    }
    for b in blocks {
        ctx.dev.release(b);
    }
    r
}

/// The kernel's view of inputs as inference sees them (shapes and dtypes, and the host
/// values the interpreter passed).
fn shape_infos<'a>(ins: &'a [Option<ClTensor>], infos: Infos<'a, 'a>) -> Vec<Option<TensorInfo<'a>>> {
    ins.iter()
        .enumerate()
        .map(|(i, t)| {
            t.as_ref().map(|t| TensorInfo {
                dtype: t.dtype,
                shape: &t.shape,
                value: infos.get(i).and_then(Option::as_ref).and_then(|v| v.value),
            })
        })
        .collect()
}

fn index_type(d: DType) -> Result<&'static str, String> {
    match d {
        DType::I64 => Ok("long"),
        DType::I32 => Ok("int"),
        d => Err(format!("indices must be i64 or i32, found {d}")),
    }
}

// ---------------------------------------------------------------------------------------
// GatherElements, ScatterElements, Scatter.

fn gather_elements_k(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    const OP: &str = "GatherElements";
    let (x, idx, y) = (input(ins, 0, "data")?, input(ins, 1, "indices")?, output(outs, 0)?);
    let (axis, (d, shape)) = plan_elements(&shape_infos(ins, infos), attrs, OP, false)?;
    check_out(y, d, &shape)?;
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let r = x.shape.len();
    let (t, it) = (bits(x.dtype), index_type(idx.dtype)?);
    let mut body = coords(r, "i", "D", None);
    let sum: Vec<String> =
        (0..r).map(|d| if d == axis { format!("(ulong)v * S{d}") } else { format!("c{d} * S{d}") }).collect();
    body.push_str(&format!("  y[yo + i] = x[xo + {}];\n", sum.join(" + ")));
    let src = format!(
        "{BAD}__kernel void k(__global const {t}* x, ulong xo, __global const {it}* idx, ulong io, __global {t}* y, \
         ulong yo, ulong n, long size{}{}, __global uint* err) {{\n  ulong i = get_global_id(0);\n  if (i >= n) return;\n  \
         long v = (long)idx[io + i];\n  if (v < 0) v += size;\n  if (v < 0 || v >= size) BAD(i);\n{body}}}\n",
        params(r, "D", "ulong"),
        params(r, "S", "ulong")
    );
    let [xm, xo] = x.args();
    let [im, io] = idx.args();
    let [ym, yo] = y.args();
    let size = x.shape[axis];
    let mut args = vec![xm, xo, im, io, ym, yo, KernelArg::U64(n), KernelArg::U64(size as u64)];
    args.extend(idx.shape.iter().map(|&d| KernelArg::U64(d as u64)));
    args.extend(strides(&udims_of(&x.shape)).into_iter().map(u));
    match run_flagged(ctx, &src, args, global(n)?)? {
        None => Ok(()),
        Some(q) => {
            Err(bad_index(ctx, OP, idx, q, |v| format!("index {v} is out of range for axis {axis} of size {size}")))
        }
    }
}

/// The OpenCL statement combining the update `b` into `y[at]` by `red` (typed prelude).
fn apply(red: Reduction, at: &str, b: &str) -> String {
    let e = match red {
        Reduction::None => return format!("y[{at}] = {b};"),
        Reduction::Add => "ADD(a, b)",
        Reduction::Mul => "MUL(a, b)",
        Reduction::Max => "(ISNAN(a) ? a : (ISNAN(b) || GT(b, a)) ? b : a)",
        Reduction::Min => "(ISNAN(a) ? a : (ISNAN(b) || GT(a, b)) ? b : a)",
    };
    format!("{{ CT a = LD(y, {at}), b = LD(&{b}, 0); ST(y, {at}, {e}); }}")
}

fn scatter_common(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    infos: Infos,
    attrs: &Attrs,
    outs: &[ClTensor],
    op: &str,
    red: Reduction,
) -> Res {
    let (x, idx, up, y) =
        (input(ins, 0, "data")?, input(ins, 1, "indices")?, input(ins, 2, "updates")?, output(outs, 0)?);
    let (axis, (d, shape)) = plan_elements(&shape_infos(ins, infos), attrs, op, true)?;
    check_out(y, d, &shape)?;
    if red != Reduction::None {
        need_fp64(ctx, d)?;
    }
    copy(ctx, x, y)?;
    let len = idx.shape[axis].max(0) as u64;
    if len == 0 || idx.numel() == 0 {
        return Ok(());
    }
    let lines = idx.numel() / len;
    let r = x.shape.len();
    let it = index_type(idx.dtype)?;
    // The line's offsets in indices (p, stride of the axis pa) and in the output (s).
    let mut body = coords(r, "l", "D", Some(axis));
    let ist = strides(&udims_of(&idx.shape));
    let p: Vec<String> = (0..r).filter(|&k| k != axis).map(|k| format!("c{k} * {}UL", ist[k])).collect();
    let s: Vec<String> = (0..r).filter(|&k| k != axis).map(|k| format!("c{k} * S{k}")).collect();
    let join = |v: Vec<String>| if v.is_empty() { "0".to_string() } else { v.join(" + ") };
    body.push_str(&format!(
        "  ulong p = {}, s = {};\n  for (ulong j = 0; j < len; j++) {{\n    ulong q = p + j * {}UL;\n    \
         long v = (long)idx[io + q];\n    if (v < 0) v += size;\n    if (v < 0 || v >= size) BAD(q);\n    \
         ulong at = yo + s + (ulong)v * S{axis};\n    {}\n  }}\n",
        join(p),
        join(s),
        ist[axis],
        apply(red, "at", "u[uo + q]")
    ));
    let prelude = if red == Reduction::None { format!("typedef {} T;\n", bits(d)) } else { typed(d) };
    let src = format!(
        "{prelude}{BAD}__kernel void k(__global T* y, ulong yo, __global const {it}* idx, ulong io, __global const T* u, \
         ulong uo, ulong lines, ulong len, long size{}{}, __global uint* err) {{\n  ulong l = get_global_id(0);\n  \
         if (l >= lines) return;\n{body}}}\n",
        params(r, "D", "ulong"),
        params(r, "S", "ulong")
    );
    let [ym, yo] = y.args();
    let [im, io] = idx.args();
    let [um, uo] = up.args();
    let size = x.shape[axis];
    let mut args =
        vec![ym, yo, im, io, um, uo, KernelArg::U64(lines), KernelArg::U64(len), KernelArg::U64(size as u64)];
    args.extend(idx.shape.iter().map(|&d| KernelArg::U64(d as u64)));
    args.extend(strides(&udims_of(&x.shape)).into_iter().map(u));
    match run_flagged(ctx, &src, args, global(lines)?)? {
        None => Ok(()),
        Some(q) => {
            Err(bad_index(ctx, op, idx, q, |v| format!("index {v} is out of range for axis {axis} of size {size}")))
        }
    }
}

fn scatter_elements_k(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    const OP: &str = "ScatterElements";
    scatter_common(ctx, ins, infos, attrs, outs, OP, reduction(attrs, OP)?)
}

fn scatter_k(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    scatter_common(ctx, ins, infos, attrs, outs, "Scatter", Reduction::None)
}

// ---------------------------------------------------------------------------------------
// GatherND and ScatterND.

/// The statements adding index tuple `t`'s offset (over `k` dims `D`/`S`) to `s`.
fn tuple_code(k: usize) -> String {
    (0..k)
        .map(|j| {
            format!(
                "    {{ long v = idx[io + t * {k}UL + {j}UL]; if (v < 0) v += (long)D{j}; \
                 if (v < 0 || v >= (long)D{j}) BAD(t * {k}UL + {j}UL); s += (ulong)v * S{j}; }}\n"
            )
        })
        .collect()
}

fn gather_nd_k(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    const OP: &str = "GatherND";
    let (x, idx, y) = (input(ins, 0, "data")?, input(ins, 1, "indices")?, output(outs, 0)?);
    let (b, k, (d, shape)) = plan_gather_nd(&shape_infos(ins, infos), attrs)?;
    check_out(y, d, &shape)?;
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let xs = udims_of(&x.shape);
    let q = idx.shape.len();
    let tuples: usize = udims_of(&idx.shape[b..q - 1]).iter().product();
    let slice: usize = xs[b + k..].iter().product();
    let batch_stride: usize = xs[b..].iter().product();
    let st = strides(&xs[b..]);
    let t = bits(x.dtype);
    let src = format!(
        "{BAD}__kernel void k(__global const {t}* x, ulong xo, __global const long* idx, ulong io, __global {t}* y, \
         ulong yo, ulong n, ulong slice, ulong tuples, ulong bstride{}{}, __global uint* err) {{\n  \
         ulong i = get_global_id(0);\n  if (i >= n) return;\n  ulong t = i / slice;\n  \
         ulong s = (t / tuples) * bstride + i % slice;\n{}  y[yo + i] = x[xo + s];\n}}\n",
        params(k, "D", "ulong"),
        params(k, "S", "ulong"),
        tuple_code(k)
    );
    let [xm, xo] = x.args();
    let [im, io] = idx.args();
    let [ym, yo] = y.args();
    let mut args = vec![xm, xo, im, io, ym, yo, KernelArg::U64(n), u(slice), u(tuples), u(batch_stride)];
    args.extend(xs[b..b + k].iter().map(|&v| u(v)));
    args.extend(st[..k].iter().map(|&v| u(v)));
    match run_flagged(ctx, &src, args, global(n)?)? {
        None => Ok(()),
        Some(p) => Err(bad_index(ctx, OP, idx, p, |v| {
            let j = p as usize % k;
            format!("index {v} is out of range for axis {} of size {}", b + j, xs[b + j])
        })),
    }
}

fn scatter_nd_k(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    const OP: &str = "ScatterND";
    let (x, idx, up, y) =
        (input(ins, 0, "data")?, input(ins, 1, "indices")?, input(ins, 2, "updates")?, output(outs, 0)?);
    let (k, red) = plan_scatter_nd(&shape_infos(ins, infos), attrs)?;
    check_out(y, x.dtype, &x.shape)?;
    if red != Reduction::None {
        need_fp64(ctx, x.dtype)?;
    }
    copy(ctx, x, y)?;
    let xs = udims_of(&x.shape);
    let tuples: usize = udims_of(&idx.shape[..idx.shape.len() - 1]).iter().product();
    let slice: usize = xs[k..].iter().product();
    if tuples == 0 || slice == 0 {
        return Ok(());
    }
    let st = strides(&xs);
    let prelude = if red == Reduction::None { format!("typedef {} T;\n", bits(x.dtype)) } else { typed(x.dtype) };
    let src = format!(
        "{prelude}{BAD}__kernel void k(__global T* y, ulong yo, __global const long* idx, ulong io, __global const T* u, \
         ulong uo, ulong slice, ulong tuples{}{}, __global uint* err) {{\n  ulong e = get_global_id(0);\n  \
         if (e >= slice) return;\n  for (ulong t = 0; t < tuples; t++) {{\n    ulong s = e;\n{}    \
         ulong at = yo + s;\n    {}\n  }}\n}}\n",
        params(k, "D", "ulong"),
        params(k, "S", "ulong"),
        tuple_code(k),
        apply(red, "at", "u[uo + t * slice + e]")
    );
    let [ym, yo] = y.args();
    let [im, io] = idx.args();
    let [um, uo] = up.args();
    let mut args = vec![ym, yo, im, io, um, uo, u(slice), u(tuples)];
    args.extend(xs[..k].iter().map(|&v| u(v)));
    args.extend(st[..k].iter().map(|&v| u(v)));
    match run_flagged(ctx, &src, args, global(slice as u64)?)? {
        None => Ok(()),
        Some(p) => Err(bad_index(ctx, OP, idx, p, |v| {
            let j = p as usize % k;
            format!("index {v} is out of range for axis {j} of size {}", xs[j])
        })),
    }
}

// ---------------------------------------------------------------------------------------
// Trilu and EyeLike.

fn trilu_k(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let (x, y) = (input(ins, 0, "input")?, output(outs, 0)?);
    let sh = shape_infos(ins, infos);
    let [(d, shape)] = &infer_trilu(&sh, attrs)?[..] else { return Err("Trilu infers one output".into()) };
    check_out(y, *d, shape)?;
    let k = match ins.get(1).and_then(Option::as_ref) {
        Some(t) => host_value(ctx, t, infos.get(1).and_then(Option::as_ref))?.to_i64().first().copied().unwrap_or(0),
        None => 0,
    };
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let r = x.shape.len();
    let keep = if attrs.int("upper", 1) != 0 { "d >= kk" } else { "d <= kk" };
    let t = bits(x.dtype);
    let src = format!(
        "__kernel void k(__global const {t}* x, ulong xo, __global {t}* y, ulong yo, ulong n, ulong rows, ulong cols, \
         long kk) {{\n  ulong i = get_global_id(0);\n  if (i >= n) return;\n  \
         long d = (long)(i % cols) - (long)((i / cols) % rows);\n  y[yo + i] = ({keep}) ? x[xo + i] : ({t})0;\n}}\n"
    );
    let [xm, xo] = x.args();
    let [ym, yo] = y.args();
    let args = [
        xm,
        xo,
        ym,
        yo,
        KernelArg::U64(n),
        KernelArg::U64(x.shape[r - 2] as u64),
        KernelArg::U64(x.shape[r - 1] as u64),
        KernelArg::U64(k as u64),
    ];
    ctx.run(&src, &args, global(n)?)
}

/// The bits of 1 in dtype `d`.
fn one_bits(d: DType) -> u64 {
    let mut b = [0u8; 8];
    store_f64(d, 1.0, &mut b[..d.size()]);
    u64::from_le_bytes(b)
}

fn eye_like(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    input(ins, 0, "input")?;
    let y = output(outs, 0)?;
    let [(d, shape)] = &infer_eye_like(&shape_infos(ins, infos), attrs)?[..] else {
        return Err("EyeLike infers one output".into());
    };
    check_out(y, *d, shape)?;
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let t = bits(*d);
    let src = format!(
        "__kernel void k(__global {t}* y, ulong yo, ulong n, ulong cols, long kk, ulong one) {{\n  \
         ulong i = get_global_id(0);\n  if (i >= n) return;\n  \
         y[yo + i] = ((long)(i % cols) - (long)(i / cols) == kk) ? ({t})one : ({t})0;\n}}\n"
    );
    let [ym, yo] = y.args();
    let args = [
        ym,
        yo,
        KernelArg::U64(n),
        KernelArg::U64(shape[1] as u64),
        KernelArg::U64(attrs.int("k", 0) as u64),
        KernelArg::U64(one_bits(*d)),
    ];
    ctx.run(&src, &args, global(n)?)
}

// ---------------------------------------------------------------------------------------
// CumSum, CumProd.

fn cum(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor], prod: bool) -> Res {
    let (x, a, y) = (input(ins, 0, "x")?, input(ins, 1, "axis")?, output(outs, 0)?);
    let [(d, shape)] = &infer_cum(&shape_infos(ins, infos), attrs)?[..] else { return Err("one output".into()) };
    check_out(y, *d, shape)?;
    need_fp64(ctx, *d)?;
    let axis = cum_axis(&host_value(ctx, a, infos.get(1).and_then(Option::as_ref))?.to_i64(), x.shape.len())?;
    let (outer, n, inner) = split3(&x.shape, axis);
    let lines = outer * inner;
    if lines == 0 || n == 0 {
        return Ok(());
    }
    let (excl, rev) = (attrs.int("exclusive", 0) != 0, attrs.int("reverse", 0) != 0);
    let (init, op) = if prod { ("1", "MUL(acc, v)") } else { ("0", "ADD(acc, v)") };
    let j = if rev { "n - 1 - jj" } else { "jj" };
    let store = if excl { "acc" } else { "nx" };
    let src = format!(
        "{}__kernel void k(__global const T* x, ulong xo, __global T* y, ulong yo, ulong lines, ulong n, ulong inner) {{\n  \
         ulong l = get_global_id(0);\n  if (l >= lines) return;\n  ulong o = l / inner, in = l % inner;\n  \
         CT acc = (CT){init};\n  for (ulong jj = 0; jj < n; jj++) {{\n    ulong at = (o * n + ({j})) * inner + in;\n    \
         CT v = LD(x, xo + at);\n    CT nx = RND({op});\n    ST(y, yo + at, {store});\n    acc = nx;\n  }}\n}}\n",
        typed(*d)
    );
    let [xm, xo] = x.args();
    let [ym, yo] = y.args();
    ctx.run(&src, &[xm, xo, ym, yo, u(lines), u(n), u(inner)], global(lines as u64)?)
}

fn cum_sum_k(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    cum(ctx, ins, infos, attrs, outs, false)
}

fn cum_prod_k(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    cum(ctx, ins, infos, attrs, outs, true)
}

// ---------------------------------------------------------------------------------------
// TopK and Hardmax.

fn top_k_k(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "X")?;
    let (yv, yi) = (output(outs, 0)?, output(outs, 1)?);
    if !NUMERIC.contains(&x.dtype) {
        return Err(format!("TopK: X must be numeric, found {}", x.dtype));
    }
    need_fp64(ctx, x.dtype)?;
    let axis = norm_axis(attrs.int("axis", -1), x.shape.len(), "TopK")?;
    // k is the output's size along the axis (inference checked it against K).
    let k = yv.shape.get(axis).copied().unwrap_or(-1);
    let mut want = x.shape.clone();
    want[axis] = k;
    if !(0..=x.shape[axis]).contains(&k) {
        return Err(format!("TopK: k = {k} is out of range for axis {axis} of size {}", x.shape[axis]));
    }
    check_out(yv, x.dtype, &want)?;
    check_out(yi, DType::I64, &want)?;
    let (outer, n, inner) = split3(&x.shape, axis);
    let lines = outer * inner;
    if lines == 0 || k == 0 {
        return Ok(());
    }
    let before = if attrs.int("largest", 1) != 0 {
        "(GT(a, b) || (EQ(a, b) && ia < ib))"
    } else {
        "(GT(b, a) || (EQ(a, b) && ia < ib))"
    };
    let src = format!(
        "{}#define BEFORE(a, ia, b, ib) {before}\n__kernel void k(__global const T* x, ulong xo, __global T* v, ulong vo, \
         __global long* ix, ulong ixo, ulong lines, ulong n, ulong inner, ulong k) {{\n  ulong l = get_global_id(0);\n  \
         if (l >= lines) return;\n  ulong o = l / inner, in = l % inner;\n  long pi = -1;\n  CT pv = (CT)0;\n  \
         for (ulong j = 0; j < k; j++) {{\n    long bi = -1;\n    CT bv = (CT)0;\n    \
         for (ulong e = 0; e < n; e++) {{\n      CT a = LD(x, xo + (o * n + e) * inner + in);\n      long ia = (long)e;\n      \
         if (pi >= 0 && !BEFORE(pv, pi, a, ia)) continue;\n      \
         if (bi < 0 || BEFORE(a, ia, bv, bi)) {{ bi = ia; bv = a; }}\n    }}\n    \
         ulong dst = (o * k + j) * inner + in;\n    v[vo + dst] = x[xo + (o * n + (ulong)bi) * inner + in];\n    \
         ix[ixo + dst] = bi;\n    pi = bi;\n    pv = bv;\n  }}\n}}\n",
        typed(x.dtype)
    );
    let [xm, xo] = x.args();
    let [vm, vo] = yv.args();
    let [im, io] = yi.args();
    ctx.run(&src, &[xm, xo, vm, vo, im, io, u(lines), u(n), u(inner), KernelArg::U64(k as u64)], global(lines as u64)?)
}

fn hardmax_k(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let (x, y) = (input(ins, 0, "input")?, output(outs, 0)?);
    let [(d, shape)] = &infer_hardmax(&shape_infos(ins, infos), attrs)?[..] else { return Err("one output".into()) };
    check_out(y, *d, shape)?;
    need_fp64(ctx, *d)?;
    let (outer, n, inner) = hardmax_dims(&x.shape, attrs)?;
    let lines = outer * inner;
    if lines == 0 || n == 0 {
        return Ok(());
    }
    let src = format!(
        "{}__kernel void k(__global const T* x, ulong xo, __global T* y, ulong yo, ulong lines, ulong n, ulong inner, \
         ulong one) {{\n  ulong l = get_global_id(0);\n  if (l >= lines) return;\n  ulong o = l / inner, in = l % inner;\n  \
         ulong best = 0;\n  CT bv = LD(x, xo + o * n * inner + in);\n  for (ulong e = 1; e < n; e++) {{\n    \
         CT a = LD(x, xo + (o * n + e) * inner + in);\n    if (!ISNAN(bv) && (ISNAN(a) || a > bv)) {{ best = e; bv = a; }}\n  }}\n  \
         for (ulong e = 0; e < n; e++) y[yo + (o * n + e) * inner + in] = e == best ? (T)one : (T)0;\n}}\n",
        typed(*d)
    );
    let [xm, xo] = x.args();
    let [ym, yo] = y.args();
    ctx.run(&src, &[xm, xo, ym, yo, u(lines), u(n), u(inner), KernelArg::U64(one_bits(*d))], global(lines as u64)?)
}

// ---------------------------------------------------------------------------------------
// OneHot.

fn one_hot_k(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let (idx, vals, y) = (input(ins, 0, "indices")?, input(ins, 2, "values")?, output(outs, 0)?);
    input(ins, 1, "depth")?;
    if !NUMERIC.contains(&idx.dtype) {
        return Err(format!("OneHot: indices must be numeric, found {}", idx.dtype));
    }
    need_fp64(ctx, idx.dtype)?;
    if vals.shape != [2] {
        return Err(format!("OneHot: values must have shape [2], found {:?}", vals.shape));
    }
    let r = idx.shape.len() as i64;
    let a = attrs.int("axis", -1);
    if !(-r - 1..=r).contains(&a) {
        return Err(format!("OneHot: axis {a} is out of range for the output rank {}", r + 1));
    }
    let axis = (if a < 0 { a + r + 1 } else { a }) as usize;
    // The depth is the output's size along the new axis (inference checked it).
    let depth = y.shape.get(axis).copied().unwrap_or(0);
    let mut want = idx.shape.clone();
    want.insert(axis, depth);
    check_out(y, vals.dtype, &want)?;
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let (_, _, inner) = split3(&want, axis);
    let (load, conv) = match idx.dtype {
        DType::F16 => ("vload_half(io + o * inner + in, idx)".to_string(), "convert_long_sat(w)"),
        d if d.is_float() => ("idx[io + o * inner + in]".to_string(), "convert_long_sat(w)"),
        _ => ("idx[io + o * inner + in]".to_string(), "(long)w"),
    };
    let (it, wt) = match idx.dtype {
        DType::F16 => ("half", "float"),
        d => (cl_type(d), cl_type(d)),
    };
    let t = bits(vals.dtype);
    let pragma = if idx.dtype == DType::F64 { "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" } else { "" };
    let src = format!(
        "{pragma}__kernel void k(__global const {it}* idx, ulong io, __global const {t}* vals, ulong vo, __global {t}* y, \
         ulong yo, ulong n, long depth, ulong inner) {{\n  ulong i = get_global_id(0);\n  if (i >= n) return;\n  \
         ulong in = i % inner, j = (i / inner) % (ulong)depth, o = i / inner / (ulong)depth;\n  {wt} w = {load};\n  \
         long v = {conv};\n  if (v < 0) v += depth;\n  y[yo + i] = vals[vo + (v == (long)j ? 1 : 0)];\n}}\n"
    );
    let [im, io] = idx.args();
    let [vm, vo] = vals.args();
    let [ym, yo] = y.args();
    ctx.run(&src, &[im, io, vm, vo, ym, yo, KernelArg::U64(n), KernelArg::U64(depth as u64), u(inner)], global(n)?)
}

// ---------------------------------------------------------------------------------------
// DepthToSpace, SpaceToDepth.

fn depth_space(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    infos: Infos,
    attrs: &Attrs,
    outs: &[ClTensor],
    d2s: bool,
) -> Res {
    let (x, y) = (input(ins, 0, "input")?, output(outs, 0)?);
    let (op, infer): (&str, super::InferFn) =
        if d2s { ("DepthToSpace", infer_depth_to_space) } else { ("SpaceToDepth", infer_space_to_depth) };
    let [(d, shape)] = &infer(&shape_infos(ins, infos), attrs)?[..] else { return Err("one output".into()) };
    check_out(y, *d, shape)?;
    let (b, crd) = block_mode(attrs, op)?;
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    // Output (ni, co, yy, xx) → input channel ci and position (hi, wi).
    let map = match (d2s, crd) {
        (true, false) => "ulong ci = ((yy % b) * b + xx % b) * YC + co, hi = yy / b, wi = xx / b;",
        (true, true) => "ulong ci = co * b * b + (yy % b) * b + xx % b, hi = yy / b, wi = xx / b;",
        (false, false) => "ulong blk = co / C, ci = co % C, hi = yy * b + blk / b, wi = xx * b + blk % b;",
        (false, true) => "ulong blk = co % (b * b), ci = co / (b * b), hi = yy * b + blk / b, wi = xx * b + blk % b;",
    };
    let t = bits(x.dtype);
    let src = format!(
        "__kernel void k(__global const {t}* x, ulong xo, __global {t}* y, ulong yo, ulong n, ulong C, ulong H, ulong W, \
         ulong YC, ulong YH, ulong YW, ulong b) {{\n  ulong i = get_global_id(0);\n  if (i >= n) return;\n  \
         ulong xx = i % YW, yy = (i / YW) % YH, co = (i / YW / YH) % YC, ni = i / YW / YH / YC;\n  {map}\n  \
         y[yo + i] = x[xo + ((ni * C + ci) * H + hi) * W + wi];\n}}\n"
    );
    let [xm, xo] = x.args();
    let [ym, yo] = y.args();
    let mut args = vec![xm, xo, ym, yo, KernelArg::U64(n)];
    args.extend(x.shape[1..].iter().chain(&shape[1..]).map(|&v| KernelArg::U64(v as u64)));
    args.push(KernelArg::U64(b as u64));
    ctx.run(&src, &args, global(n)?)
}

fn depth_to_space_k(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    depth_space(ctx, ins, infos, attrs, outs, true)
}

fn space_to_depth_k(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    depth_space(ctx, ins, infos, attrs, outs, false)
}

// ---------------------------------------------------------------------------------------
// ReverseSequence, Compress, CenterCropPad.

fn reverse_sequence_k(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    const OP: &str = "ReverseSequence";
    let (x, l, y) = (input(ins, 0, "input")?, input(ins, 1, "sequence_lens")?, output(outs, 0)?);
    let [(d, shape)] = &infer_reverse_sequence(&shape_infos(ins, infos), attrs)?[..] else {
        return Err("one output".into());
    };
    check_out(y, *d, shape)?;
    let (ba, ta) = seq_axes(attrs)?;
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let r = x.shape.len();
    let mut body = coords(r, "i", "D", None);
    let sum: Vec<String> = (0..r).map(|k| if k == ta { format!("t * S{k}") } else { format!("c{k} * S{k}") }).collect();
    body.push_str(&format!(
        "  long len = lens[lo + c{ba}];\n  if (len < 0 || len > (long)D{ta}) BAD(c{ba});\n  \
         ulong t = c{ta} < (ulong)len ? (ulong)len - 1 - c{ta} : c{ta};\n  y[yo + i] = x[xo + {}];\n",
        sum.join(" + ")
    ));
    let t = bits(x.dtype);
    let src = format!(
        "{BAD}__kernel void k(__global const {t}* x, ulong xo, __global {t}* y, ulong yo, ulong n, \
         __global const long* lens, ulong lo{}{}, __global uint* err) {{\n  ulong i = get_global_id(0);\n  \
         if (i >= n) return;\n{body}}}\n",
        params(r, "D", "ulong"),
        params(r, "S", "ulong")
    );
    let [xm, xo] = x.args();
    let [ym, yo] = y.args();
    let [lm, lo] = l.args();
    let mut args = vec![xm, xo, ym, yo, KernelArg::U64(n), lm, lo];
    args.extend(x.shape.iter().map(|&v| KernelArg::U64(v as u64)));
    args.extend(strides(&udims_of(&x.shape)).into_iter().map(u));
    match run_flagged(ctx, &src, args, global(n)?)? {
        None => Ok(()),
        Some(q) => Err(bad_index(ctx, OP, l, q, |v| {
            format!("sequence length {v} is out of range 0..={} (the time axis)", x.shape[ta])
        })),
    }
}

fn compress_k(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let (x, c, y) = (input(ins, 0, "input")?, input(ins, 1, "condition")?, output(outs, 0)?);
    let cond = host_value(ctx, c, infos.get(1).and_then(Option::as_ref))?;
    let mut sh = shape_infos(ins, infos);
    if let Some(Some(i)) = sh.get_mut(1) {
        i.value = Some(&cond);
    }
    let (axis, keep, (d, shape)) = plan_compress(&sh, attrs)?;
    check_out(y, d, &shape)?;
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let (outer, len, inner) = match axis {
        Some(a) => split3(&x.shape, a),
        None => (1, udims_of(&x.shape).iter().product(), 1),
    };
    let _ = outer;
    let t = bits(x.dtype);
    let src = format!(
        "__kernel void k(__global const {t}* x, ulong xo, __global {t}* y, ulong yo, ulong n, ulong m, ulong inner, \
         ulong len, __global const ulong* keep) {{\n  ulong i = get_global_id(0);\n  if (i >= n) return;\n  \
         ulong in = i % inner, j = (i / inner) % m, o = i / inner / m;\n  \
         y[yo + i] = x[xo + (o * len + keep[j]) * inner + in];\n}}\n"
    );
    let kb: Vec<u8> = keep.iter().flat_map(|&v| (v as u64).to_le_bytes()).collect();
    let [xm, xo] = x.args();
    let [ym, yo] = y.args();
    with_buffer(ctx, &kb, |km| {
        ctx.run(&src, &[xm, xo, ym, yo, KernelArg::U64(n), u(keep.len()), u(inner), u(len), km], global(n)?)
    })
}

fn center_crop_pad_k(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let (x, s, y) = (input(ins, 0, "input_data")?, input(ins, 1, "shape")?, output(outs, 0)?);
    // The sizes are the output's (inference checked them against the shape input): only
    // the dims outside `axes` must be the input's.
    let r = x.shape.len();
    let axes: Vec<usize> = match attrs.ints("axes") {
        Some(a) => crate::ir::operators::tensor::norm_axes(a, r, "CenterCropPad")?,
        None => (0..r).collect(),
    };
    if s.shape != [axes.len() as i64] {
        return Err(format!("CenterCropPad: shape must have {} values, found shape {:?}", axes.len(), s.shape));
    }
    if y.dtype != x.dtype || y.shape.len() != r || (0..r).any(|d| !axes.contains(&d) && y.shape[d] != x.shape[d]) {
        return Err(format!(
            "CenterCropPad: output {}{:?} does not fit input {}{:?}",
            y.dtype, y.shape, x.dtype, x.shape
        ));
    }
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let offs = center_offsets(&x.shape, &y.shape);
    let mut body = coords(r, "i", "Y", None);
    body.push_str("  ulong s = 0;\n  long v;\n");
    for d in 0..r {
        body.push_str(&format!(
            "  v = (long)c{d} + F{d};\n  if (v < 0 || v >= (long)X{d}) {{ y[yo + i] = (T)0; return; }}\n  s += (ulong)v * S{d};\n"
        ));
    }
    let t = bits(x.dtype);
    let src = format!(
        "typedef {t} T;\n__kernel void k(__global const T* x, ulong xo, __global T* y, ulong yo, ulong n{}{}{}{}) {{\n  \
         ulong i = get_global_id(0);\n  if (i >= n) return;\n{body}  y[yo + i] = x[xo + s];\n}}\n",
        params(r, "Y", "ulong"),
        params(r, "X", "ulong"),
        params(r, "F", "long"),
        params(r, "S", "ulong")
    );
    let [xm, xo] = x.args();
    let [ym, yo] = y.args();
    let mut args = vec![xm, xo, ym, yo, KernelArg::U64(n)];
    args.extend(y.shape.iter().chain(&x.shape).map(|&v| KernelArg::U64(v as u64)));
    args.extend(offs.iter().map(|&(i, o)| KernelArg::U64((i - o) as u64)));
    args.extend(strides(&udims_of(&x.shape)).into_iter().map(u));
    ctx.run(&src, &args, global(n)?)
}

/// Each kernel against the host kernel on the device named by `RXVM_TEST_CL_DEVICE`
/// (default: the first); skipped when no OpenCL runtime is usable.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::opencl::device::ClDevice;
    use crate::ops::cl::testing::{device, run_kernel};
    use crate::ops::OPS;

    fn rand(seed: u64, n: usize) -> Vec<f64> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (s >> 11) as f64 / (1u64 << 53) as f64
            })
            .collect()
    }

    /// Values in [lo, hi): halves for floats (ties), integers otherwise.
    fn tensor(d: DType, shape: &[i64], seed: u64, lo: f64, hi: f64) -> HostTensor {
        let n = shape.iter().map(|&v| v.max(0) as usize).product::<usize>();
        let mut t = HostTensor::zeros(d, shape).unwrap();
        for (c, v) in t.data.chunks_exact_mut(d.size()).zip(rand(seed, n)) {
            let v = lo + (hi - lo) * v;
            store_f64(d, if d.is_float() { (v * 2.0).floor() / 2.0 } else { v.floor() }, c);
        }
        t
    }

    fn attrs(list: &[(&str, AttrValue)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    fn int(v: i64) -> AttrValue {
        AttrValue::Int(v)
    }

    fn i64s(shape: &[i64], v: &[i64]) -> HostTensor {
        HostTensor::new(DType::I64, shape.to_vec(), v.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap()
    }

    /// Runs `name` on the host and on the device (with host values given for the inputs
    /// when `values`) and compares every output bit for bit.
    fn check(dev: &ClDevice, name: &str, ins: &[HostTensor], a: &Attrs, values: bool) {
        let def = OPS.iter().find(|o| o.name == name).unwrap();
        let all: Vec<Option<TensorInfo>> =
            ins.iter().map(|t| Some(TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) })).collect();
        let inferred = (def.infer)(&all, a).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut want: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        let refs: Vec<Option<&HostTensor>> = ins.iter().map(Some).collect();
        (def.op.id().host_kernel().unwrap())(&refs, a, &mut want).unwrap_or_else(|e| panic!("{name} (host): {e}"));
        let infos: Vec<Option<TensorInfo>> = ins
            .iter()
            .map(|t| Some(TensorInfo { dtype: t.dtype, shape: &t.shape, value: values.then_some(t) }))
            .collect();
        let cl_ins: Vec<Option<HostTensor>> = ins.iter().cloned().map(Some).collect();
        let got = run_kernel(dev, name, &cl_ins, &infos, a, &want);
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(
                &w.data,
                g,
                "{name} {a} on {:?}: output differs",
                ins.iter().map(|t| (t.dtype, &t.shape)).collect::<Vec<_>>()
            );
        }
    }

    /// The error of `name`'s kernel on `ins` (no host values).
    fn cl_err(dev: &ClDevice, name: &str, ins: &[HostTensor], a: &Attrs, out: &[HostTensor]) -> String {
        use crate::ops::cl::testing::upload;
        let mut keep = Vec::new();
        let mut cl_ins = Vec::new();
        for t in ins {
            let (b, c) = upload(dev, t, None);
            keep.push(b);
            cl_ins.push(Some(c));
        }
        let mut cl_outs = Vec::new();
        for t in out {
            let (b, c) = upload(dev, t, None);
            keep.push(b);
            cl_outs.push(c);
        }
        let infos: Vec<Option<TensorInfo>> =
            ins.iter().map(|t| Some(TensorInfo { dtype: t.dtype, shape: &t.shape, value: None })).collect();
        let f = crate::ops::cl_fn(name).unwrap();
        let e = f(&ClCtx { dev }, &cl_ins, &infos, a, &cl_outs).unwrap_err();
        for b in keep {
            dev.release(b);
        }
        e
    }

    /// The numeric dtypes and bool.
    const ALL: &[DType] = DType::ALL.split_at(DType::NUMERIC_COUNT + 1).0;

    #[test]
    fn moving_kernels_match_the_host() {
        let Some(dev) = device() else { return };
        let none = Attrs::default();
        // The moving kernels depend only on the element width: one dtype of each (and bool).
        // bf16 and float8 move as bytes too.
        for d in
            [DType::F32, DType::F16, DType::I64, DType::U8, DType::Bool, DType::BF16, DType::F8E4M3FN, DType::F8E8M0]
        {
            let x = tensor(d, &[3, 4, 5], 1, 0.0, 2.0);
            // GatherElements along each axis, i64 and i32 indices with negatives.
            for axis in 0..3i64 {
                let size = x.shape[axis as usize];
                let mut ishape = vec![2, 3, 4];
                ishape[axis as usize] = 6;
                let idx = tensor(DType::I64, &ishape, 7 + axis as u64, -(size as f64), size as f64);
                check(&dev, "GatherElements", &[x.clone(), idx.clone()], &attrs(&[("axis", int(axis))]), false);
                let idx32 = tensor(DType::I32, &ishape, 9, -(size as f64), size as f64);
                check(&dev, "GatherElements", &[x.clone(), idx32], &attrs(&[("axis", int(axis - 3))]), true);
                let u = tensor(d, &ishape, 11, 0.0, 2.0);
                check(&dev, "Scatter", &[x.clone(), idx.clone(), u.clone()], &attrs(&[("axis", int(axis))]), false);
                check(&dev, "ScatterElements", &[x.clone(), idx, u], &attrs(&[("axis", int(axis))]), false);
            }
            let idx = tensor(DType::I64, &[2, 3, 2], 3, -3.0, 3.0);
            check(&dev, "GatherND", &[x.clone(), idx.clone()], &none, false);
            let bidx = tensor(DType::I64, &[3, 2, 1], 4, -4.0, 4.0);
            check(&dev, "GatherND", &[x.clone(), bidx], &attrs(&[("batch_dims", int(1))]), false);
            check(&dev, "ScatterND", &[x.clone(), idx, tensor(d, &[2, 3, 5], 5, 0.0, 3.0)], &none, false);
            let k = i64s(&[], &[-1]);
            check(&dev, "Trilu", &[x.clone(), k.clone()], &none, false);
            check(&dev, "Trilu", &[x.clone(), k], &attrs(&[("upper", int(0))]), true);
            check(&dev, "Trilu", std::slice::from_ref(&x), &none, false);
            let x4 = tensor(d, &[2, 8, 2, 4], 2, 0.0, 100.0);
            for mode in ["DCR", "CRD"] {
                let a = attrs(&[("blocksize", int(2)), ("mode", AttrValue::Str(mode.into()))]);
                check(&dev, "DepthToSpace", std::slice::from_ref(&x4), &a, false);
                check(&dev, "SpaceToDepth", std::slice::from_ref(&x4), &a, false);
            }
            let lens = i64s(&[4], &[1, 0, 3, 5]);
            let xs = tensor(d, &[5, 4, 3], 6, 0.0, 100.0);
            check(&dev, "ReverseSequence", &[xs.clone(), lens], &none, false);
            let lens = i64s(&[5], &[4, 1, 2, 0, 3]);
            check(
                &dev,
                "ReverseSequence",
                &[xs.clone(), lens],
                &attrs(&[("batch_axis", int(0)), ("time_axis", int(1))]),
                false,
            );
            let c = HostTensor::new(DType::Bool, vec![3], vec![1, 0, 1]).unwrap();
            check(&dev, "Compress", &[xs.clone(), c.clone()], &attrs(&[("axis", int(-1))]), true);
            check(&dev, "Compress", &[xs.clone(), c], &none, false);
            check(&dev, "CenterCropPad", &[xs.clone(), i64s(&[3], &[2, 7, 3])], &none, true);
            check(
                &dev,
                "CenterCropPad",
                &[xs.clone(), i64s(&[2], &[8, 1])],
                &attrs(&[("axes", AttrValue::Ints(vec![-1, 0]))]),
                true,
            );
            let vals = tensor(d, &[2], 8, 0.0, 2.0);
            for (idt, lo) in [(DType::I64, -6.0), (DType::F32, -6.0), (DType::U8, 0.0), (DType::F16, -6.0)] {
                let idx = tensor(idt, &[2, 3], 12, lo, 6.0);
                let depth = tensor(DType::F32, &[], 0, 5.0, 5.5);
                check(&dev, "OneHot", &[idx.clone(), depth.clone(), vals.clone()], &none, true);
                check(&dev, "OneHot", &[idx, depth, vals.clone()], &attrs(&[("axis", int(1))]), true);
            }
            check(&dev, "EyeLike", &[tensor(d, &[4, 2], 0, 0.0, 1.0)], &attrs(&[("k", int(1))]), false);
        }
        for d in DType::ALL {
            let a = attrs(&[("k", int(-1)), ("dtype", int(d.onnx_code()))]);
            check(&dev, "EyeLike", &[tensor(DType::I32, &[3, 5], 0, 0.0, 1.0)], &a, false);
        }
    }

    #[test]
    fn computing_kernels_match_the_host() {
        let Some(dev) = device() else { return };
        let none = Attrs::default();
        let mut numeric: Vec<DType> = ALL.iter().copied().filter(|d| *d != DType::Bool).collect();
        if !dev.has_fp64 {
            numeric.retain(|d| *d != DType::F64);
        }
        for &d in &numeric {
            let x = tensor(d, &[3, 4, 5], 1, 0.0, 4.0);
            for axis in 0..3i64 {
                let size = x.shape[axis as usize];
                let mut ishape = vec![3, 4, 5];
                ishape[axis as usize] = 7;
                let idx = tensor(DType::I64, &ishape, 7 + axis as u64, -(size as f64), size as f64);
                let u = tensor(d, &ishape, 11, 0.0, 4.0);
                for r in ["add", "mul", "max", "min"] {
                    let a = attrs(&[("axis", int(axis)), ("reduction", AttrValue::Str(r.into()))]);
                    check(&dev, "ScatterElements", &[x.clone(), idx.clone(), u.clone()], &a, false);
                }
                let k = i64s(&[1], &[size.min(3)]);
                for largest in [0, 1] {
                    check(
                        &dev,
                        "TopK",
                        &[x.clone(), k.clone()],
                        &attrs(&[("axis", int(axis)), ("largest", int(largest))]),
                        true,
                    );
                }
            }
            let idx = tensor(DType::I64, &[6, 2], 3, -3.0, 3.0);
            for r in ["add", "mul", "max", "min"] {
                let a = attrs(&[("reduction", AttrValue::Str(r.into()))]);
                check(&dev, "ScatterND", &[x.clone(), idx.clone(), tensor(d, &[6, 5], 5, 0.0, 3.0)], &a, false);
            }
            if DType::is_float(d) {
                for a in [none.clone(), attrs(&[("axis", int(1))]), attrs(&[("axis", int(0)), ("onnx_opset", int(11))])]
                {
                    check(&dev, "Hardmax", std::slice::from_ref(&x), &a, false);
                }
            }
            if CUM.contains(&d) {
                for axis in [0i64, 1, -1] {
                    for (e, r) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                        let a = attrs(&[("exclusive", int(e)), ("reverse", int(r))]);
                        check(&dev, "CumSum", &[x.clone(), i64s(&[], &[axis])], &a, e == 1);
                        check(&dev, "CumProd", &[x.clone(), i64s(&[], &[axis])], &a, r == 1);
                    }
                }
            }
        }
        // NaN ties in TopK and Hardmax.
        let mut x = tensor(DType::F32, &[2, 6], 3, 0.0, 2.0);
        store_f64(DType::F32, f64::NAN, &mut x.data[8..12]);
        check(&dev, "TopK", &[x.clone(), i64s(&[1], &[4])], &none, true);
        check(&dev, "Hardmax", &[x], &none, false);
    }

    #[test]
    fn bad_indices_are_errors() {
        let Some(dev) = device() else { return };
        let x = tensor(DType::F32, &[3, 4], 1, 0.0, 2.0);
        let idx = i64s(&[1, 2], &[0, 4]);
        let y = HostTensor::zeros(DType::F32, &[1, 2]).unwrap();
        let e = cl_err(&dev, "GatherElements", &[x.clone(), idx.clone()], &attrs(&[("axis", int(1))]), &[y]);
        assert!(e.contains("index 4 is out of range for axis 1 of size 4"), "{e}");
        let u = tensor(DType::F32, &[1, 2], 2, 0.0, 2.0);
        let e = cl_err(
            &dev,
            "ScatterElements",
            &[x.clone(), idx, u],
            &attrs(&[("axis", int(1))]),
            std::slice::from_ref(&x),
        );
        assert!(e.contains("index 4 is out of range"), "{e}");
        let e = cl_err(
            &dev,
            "GatherND",
            &[x.clone(), i64s(&[1, 2], &[-4, 0])],
            &Attrs::default(),
            &[HostTensor::zeros(DType::F32, &[1]).unwrap()],
        );
        assert!(e.contains("index -4 is out of range for axis 0 of size 3"), "{e}");
        let u = tensor(DType::F32, &[1], 2, 0.0, 2.0);
        let e = cl_err(
            &dev,
            "ScatterND",
            &[x.clone(), i64s(&[1, 2], &[0, 9]), u],
            &Attrs::default(),
            std::slice::from_ref(&x),
        );
        assert!(e.contains("index 9 is out of range for axis 1 of size 4"), "{e}");
        let e = cl_err(&dev, "ReverseSequence", &[x.clone(), i64s(&[4], &[0, 1, 4, 2])], &Attrs::default(), &[x]);
        assert!(e.contains("sequence length 4 is out of range 0..=3"), "{e}");
    }

    #[test]
    fn missing_inputs_are_errors() {
        let Some(dev) = device() else { return };
        let ctx = ClCtx { dev: &dev };
        for (name, f) in CL {
            let e = f(&ctx, &[], &[], &Attrs::default(), &[]).unwrap_err();
            assert!(e.contains("required"), "{}: {e}", name.name());
        }
    }
}
