//! OpenCL buffer kernels for the tensor operators (see `super::cl`).
//!
//! These operators move elements without looking at them, so their kernels are generic over
//! the element size (`uchar`/`ushort`/`uint`/`ulong`): one program serves every dtype of a
//! size. Most of them are one strided copy ([`copy`]: output multi-index → input element
//! through per-dim strides, up to [`MAX_RANK`] dims after coalescing), launched once per
//! input (Concat) or output (Split). Pad, Gather, ConstantOfShape and Cast have their own
//! kernels; Shape writes its few values with a buffer write.
//!
//! Index-like inputs (starts, pads, repeats, ...) are read from the host values the
//! interpreter passes in [`TensorInfo::value`]; Gather's indices are read on the device (and
//! checked there when they are too large to have a host value). Every launch's index
//! range is checked on the host against the operands' sizes first, and the kernels check
//! again, so a bad plan is an error, never an out-of-bounds access.

use super::cl::{cl_type, pragmas, storage_type, vector_group, ClCtx, ClFn, ClTensor, Res};
use super::{AttrValue, Attrs, Operator, TensorInfo};
use crate::ir::host_tensor::{load_i64, store_f64, store_i64, HostTensor};
use crate::ir::types::DType;
use crate::opencl::device::{ClView, KernelArg, ViewKind};
use crate::opencl::narrow;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[
    (Operator::Concat, concat),
    (Operator::Transpose, transpose),
    (Operator::Reshape, same_bytes),
    (Operator::Flatten, same_bytes),
    (Operator::Squeeze, same_bytes),
    (Operator::Unsqueeze, same_bytes),
    (Operator::Split, split),
    (Operator::Slice, slice),
    (Operator::Gather, gather),
    (Operator::Tile, tile),
    (Operator::Pad, pad),
    (Operator::Shape, shape),
    (Operator::ConstantOfShape, constant_of_shape),
    (Operator::Cast, cast),
    // The kernel converts to the output's dtype, which CastLike's second input decided.
    (Operator::CastLike, cast),
];

/// Defines the registered launcher `$name` as `$inner` run on [`unaliased`] inputs.
macro_rules! unaliased {
    ($($name:ident => $inner:ident),* $(,)?) => {$(
        fn $name(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: &[Option<TensorInfo>], attrs: &Attrs, outs: &[ClTensor]) -> Res {
            unaliased(ctx, ins, outs, |ins| $inner(ctx, ins, infos, attrs, outs))
        }
    )*};
}

unaliased!(
    concat => concat_k,
    transpose => transpose_k,
    split => split_k,
    slice => slice_k,
    gather => gather_k,
    tile => tile_k,
    pad => pad_k,
    cast => cast_k,
);

/// Runs `f` on the inputs, first copying to a temporary buffer every input whose bytes
/// overlap an output's in the same `cl_mem` (an in-place call such as `Transpose(%x) ->
/// (%x)`: the operator must read all of its input before writing its output, which the
/// work-items of one launch do not).
pub(super) fn unaliased(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    outs: &[ClTensor],
    f: impl FnOnce(&[Option<ClTensor>]) -> Res,
) -> Res {
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
            Some(t) if r.is_ok() && overlaps(t) => {
                let size = (t.numel() * t.dtype.size() as u64).max(8);
                match ctx.dev.alloc(size) {
                    Ok((block, _)) => {
                        let copy = ClTensor { mem: block.raw(), offset: 0, dtype: t.dtype, shape: t.shape.clone() };
                        blocks.push(block);
                        r = Strided::dense(t.numel() as i64).run(ctx, t, &copy);
                        Some(copy)
                    }
                    Err(e) => {
                        r = Err(e.to_string());
                        None
                    }
                }
            }
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

/// Dims a strided kernel handles (after coalescing).
const MAX_RANK: usize = 8;

// ---------------------------------------------------------------------------------------
// Helpers.

fn input(ins: &[Option<ClTensor>], i: usize) -> Result<&ClTensor, String> {
    ins.get(i).and_then(Option::as_ref).ok_or_else(|| format!("input {} is required", i + 1))
}

fn output(outs: &[ClTensor], i: usize) -> Result<&ClTensor, String> {
    outs.get(i).ok_or_else(|| format!("output {} is required", i + 1))
}

/// The unsigned OpenCL type of an element of `size` bytes.
fn bits_type(size: usize) -> Result<&'static str, String> {
    Ok(match size {
        1 => "uchar",
        2 => "ushort",
        4 => "uint",
        8 => "ulong",
        s => return Err(format!("no OpenCL element type of {s} bytes")),
    })
}

/// Row-major element strides of `shape`.
fn strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(shape[i + 1].max(0));
    }
    s
}

/// The values of an index input (i64 or i32, rank 0 or 1), from its host value.
fn ints_of(t: &HostTensor, what: &str) -> Result<Vec<i64>, String> {
    if !matches!(t.dtype, DType::I64 | DType::I32) {
        return Err(format!("the {what} input must be an i64 (or i32) tensor, found {}", t.dtype));
    }
    if t.shape.len() > 1 {
        return Err(format!("the {what} input must be 1-D, found shape {:?}", t.shape));
    }
    Ok(t.data.chunks_exact(t.dtype.size()).map(|c| load_i64(t.dtype, c)).collect())
}

/// The values of index input `i`, if given.
fn value_ints(infos: &[Option<TensorInfo>], i: usize, what: &str) -> Result<Option<Vec<i64>>, String> {
    match infos.get(i).and_then(Option::as_ref) {
        None => Ok(None),
        Some(t) => {
            let v = t.value.ok_or_else(|| format!("the value of the {what} input is not available on the host"))?;
            ints_of(v, what).map(Some)
        }
    }
}

/// Resolves a possibly negative axis against `rank`.
fn norm_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    if !(-r..r).contains(&axis) {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    }
    Ok(axis.rem_euclid(r) as usize)
}

fn check_dtype(x: &ClTensor, y: &ClTensor) -> Result<(), String> {
    if x.dtype.size() != y.dtype.size() {
        return Err(format!("input is {} but output is {}", x.dtype, y.dtype));
    }
    Ok(())
}

/// One launch of the strided copy: for every multi-index `i` over `dims`, the element at
/// `src_off + Σ i·src_st` (or `(i mod modulo)·src_st` with a modulo, for Tile) goes to
/// `dst_off + Σ i·dst_st` (elements, relative to the operands' views).
struct Strided {
    dims: Vec<i64>,
    src_off: i64,
    src_st: Vec<i64>,
    dst_off: i64,
    dst_st: Vec<i64>,
    modulo: Option<Vec<i64>>,
}

impl Strided {
    /// A dense copy of `n` elements.
    fn dense(n: i64) -> Strided {
        Strided { dims: vec![n], src_off: 0, src_st: vec![1], dst_off: 0, dst_st: vec![1], modulo: None }
    }

    /// Drops size-1 dims and merges dims that are contiguous on both sides.
    fn coalesce(&mut self) {
        let r = self.dims.len();
        let mut d: Vec<(i64, i64, i64, i64)> = Vec::with_capacity(r);
        for k in 0..r {
            let m = self.modulo.as_ref().map_or(i64::MAX, |m| m[k]);
            let (n, s, t) = (self.dims[k], self.src_st[k], self.dst_st[k]);
            if n == 1 {
                continue;
            }
            if self.modulo.is_none() {
                if let Some(last) = d.last_mut() {
                    if s.checked_mul(n) == Some(last.1) && t.checked_mul(n) == Some(last.2) {
                        *last = (last.0.saturating_mul(n), s, t, m);
                        continue;
                    }
                }
            }
            d.push((n, s, t, m));
        }
        self.dims = d.iter().map(|e| e.0).collect();
        self.src_st = d.iter().map(|e| e.1).collect();
        self.dst_st = d.iter().map(|e| e.2).collect();
        if let Some(m) = &mut self.modulo {
            *m = d.iter().map(|e| e.3).collect();
        }
    }

    /// The lowest and highest element a side touches (`st` strides from `off`).
    fn range(&self, off: i64, st: &[i64], modulo: Option<&[i64]>) -> (i128, i128) {
        let (mut lo, mut hi) = (off as i128, off as i128);
        for k in 0..self.dims.len() {
            let mut n = self.dims[k] as i128;
            if let Some(m) = modulo {
                n = n.min(m[k] as i128);
            }
            let e = (n - 1) * st[k] as i128;
            if e < 0 {
                lo += e;
            } else {
                hi += e;
            }
        }
        (lo, hi)
    }

    fn run(mut self, ctx: &ClCtx, x: &ClTensor, y: &ClTensor) -> Result<(), String> {
        let r = self.dims.len();
        if self.src_st.len() != r || self.dst_st.len() != r || self.modulo.as_ref().is_some_and(|m| m.len() != r) {
            return Err("internal error: strided copy with mismatched ranks".into());
        }
        if self.dims.iter().any(|&d| d <= 0) {
            return Ok(());
        }
        if self.modulo.as_ref().is_some_and(|m| m.iter().any(|&d| d <= 0)) {
            return Err("internal error: tile of an empty axis".into());
        }
        check_dtype(x, y)?;
        self.coalesce();
        let r = self.dims.len();
        if r > MAX_RANK {
            return Err(format!("the copy needs {r} dims after merging; the OpenCL kernel supports {MAX_RANK}"));
        }
        let n: u64 = self.dims.iter().map(|&d| d as u64).product();
        let (slo, shi) = self.range(self.src_off, &self.src_st, self.modulo.as_deref());
        let (dlo, dhi) = self.range(self.dst_off, &self.dst_st, None);
        if slo < 0 || shi >= x.numel() as i128 || dlo < 0 || dhi >= y.numel() as i128 {
            return Err(format!(
                "internal error: copy out of bounds (input elements {slo}..={shi} of {}, output {dlo}..={dhi} of {})",
                x.numel(),
                y.numel()
            ));
        }
        let usize_n = usize::try_from(n).map_err(|_| "tensor too large")?;
        let t = bits_type(x.dtype.size())?;
        // The dims and strides are the kernel's constants: it divides by literals, which
        // compilers turn into multiplications, and neighbouring work-items' addresses
        // differ by a known stride (one vector load where it is 1: a channel shuffle's
        // planes). `int` arithmetic when every index fits, as the windowed kernels.
        let fits = |v: i128| v.abs() < i32::MAX as i128;
        let narrow = [n as i128, x.numel() as i128, y.numel() as i128, slo, shi, dlo, dhi].into_iter().all(fits);
        let ix = if narrow { "int" } else { "long" };
        let [xm, xo] = x.args();
        let [ym, yo] = y.args();
        let args = [
            xm,
            xo,
            KernelArg::U64(x.numel()),
            ym,
            yo,
            KernelArg::U64(y.numel()),
            KernelArg::U64(n),
            KernelArg::U64(self.src_off as u64),
            KernelArg::U64(self.dst_off as u64),
        ];
        let check =
            "  if (si < 0 || (ulong)si >= xn || di < 0 || (ulong)di >= yn) return;\n  y[yo + di] = x[xo + si];\n";
        let params = format!(
            "__global const {t}* x, ulong xo, ulong xn, __global {t}* y, ulong yo, ulong yn, ulong n, long so, long dof"
        );
        // (Merging can leave no dims at all: a copy of one element.)
        let inner = if r >= 2 { self.dims[r - 1] } else { 0 };
        if inner >= 16 && self.modulo.is_none() && self.src_st[r - 1] == 1 && self.dst_st[r - 1] == 1 {
            // Rows contiguous on both sides (Concat's, Split's and Slice's rows, a channel
            // shuffle's planes): a 2-D range, the row's elements along dim 0 and the rows
            // along dim 1, so neighbouring work-items copy neighbouring elements (vector
            // loads and stores) and the divisions are per row, not per element. (Every
            // parameter is used: Intel's CPU compiler 2021.2 drops an unused one and then
            // refuses the launch with CL_INVALID_KERNEL_ARGS.)
            let mut body = String::new();
            for k in (0..r - 1).rev() {
                let (nk, sk, tk) = (self.dims[k], self.src_st[k], self.dst_st[k]);
                body.push_str(&format!("  q = r % {nk}; r /= {nk}; si += q * {sk}; di += q * {tk};\n"));
            }
            let src = format!(
                "__kernel void k({params}) {{\n  {ix} j = ({ix})get_global_id(0);\n  if (j >= {inner} || get_global_id(1) * {inner} + j >= n) return;\n  \
                 {ix} r = ({ix})get_global_id(1), q;\n  {ix} si = ({ix})so + j, di = ({ix})dof + j;\n{body}{check}}}\n"
            );
            let lanes = vector_group(inner);
            let rows = usize::try_from(n / inner as u64).map_err(|_| "tensor too large")?;
            let range = [(inner as usize).div_ceil(lanes) * lanes, rows];
            return ctx.run_groups(&src, &args, &range, &[lanes, 1]);
        }
        let mut body = String::new();
        for k in (0..r).rev() {
            let (nk, sk, tk) = (self.dims[k], self.src_st[k], self.dst_st[k]);
            // (The outermost dim too: what is left is below it, but Intel's CPU compiler
            // 2021.2 miscompiles the dense copy written as `j = r`.)
            let split = format!("j = r % {nk}; r /= {nk}; ");
            let j = match &self.modulo {
                Some(m) => format!("(j % {})", m[k]),
                None => "j".to_string(),
            };
            body.push_str(&format!("  {split}si += {j} * {sk}; di += j * {tk};\n"));
        }
        let src = format!(
            "__kernel void k({params}) {{\n  ulong i = get_global_id(0);\n  if (i >= n) return;\n  \
             {ix} r = ({ix})i, j;\n  {ix} si = ({ix})so, di = ({ix})dof;\n{body}{check}}}\n"
        );
        ctx.run(&src, &args, usize_n)
    }
}

// ---------------------------------------------------------------------------------------
// Operators built on the strided copy.

/// Reshape, Flatten, Squeeze, Unsqueeze: the same bytes under a new shape.
fn same_bytes(ctx: &ClCtx, ins: &[Option<ClTensor>], _: &[Option<TensorInfo>], _: &Attrs, outs: &[ClTensor]) -> Res {
    let (x, y) = (input(ins, 0)?, output(outs, 0)?);
    if x.numel() != y.numel() {
        return Err(format!("input has {} elements but output has {}", x.numel(), y.numel()));
    }
    if x.mem == y.mem && x.offset == y.offset && x.dtype == y.dtype {
        return Ok(());
    }
    unaliased(ctx, ins, outs, |ins| Strided::dense(x.numel() as i64).run(ctx, input(ins, 0)?, y))
}

fn concat_k(ctx: &ClCtx, ins: &[Option<ClTensor>], _: &[Option<TensorInfo>], attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let y = output(outs, 0)?;
    let axis = norm_axis(attrs.int("axis", 0), y.shape.len())?;
    let out_st = strides(&y.shape);
    let mut start = 0i64;
    for i in 0..ins.len() {
        let x = input(ins, i)?;
        if x.shape.len() != y.shape.len() {
            return Err(format!("input {} has rank {}, the output {}", i + 1, x.shape.len(), y.shape.len()));
        }
        Strided {
            dims: x.shape.clone(),
            src_off: 0,
            src_st: strides(&x.shape),
            dst_off: start.saturating_mul(out_st[axis]),
            dst_st: out_st.clone(),
            modulo: None,
        }
        .run(ctx, x, y)?;
        start = start.saturating_add(x.shape[axis]);
    }
    if start != y.shape[axis] {
        return Err(format!("the inputs add up to {start} along axis {axis}, the output has {}", y.shape[axis]));
    }
    Ok(())
}

fn transpose_k(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    _: &[Option<TensorInfo>],
    attrs: &Attrs,
    outs: &[ClTensor],
) -> Res {
    let (x, y) = (input(ins, 0)?, output(outs, 0)?);
    let r = x.shape.len();
    let perm: Vec<usize> = match attrs.ints("perm") {
        Some(p) => p.iter().map(|&v| usize::try_from(v).unwrap_or(usize::MAX)).collect(),
        None => (0..r).rev().collect(),
    };
    if perm.len() != r || perm.iter().any(|&p| p >= r) || y.shape.len() != r {
        return Err(format!("perm {perm:?} does not fit rank {r}"));
    }
    let in_st = strides(&x.shape);
    let src_st = perm.iter().map(|&p| in_st[p]).collect();
    Strided { dims: y.shape.clone(), src_off: 0, src_st, dst_off: 0, dst_st: strides(&y.shape), modulo: None }
        .run(ctx, x, y)
}

fn split_k(ctx: &ClCtx, ins: &[Option<ClTensor>], _: &[Option<TensorInfo>], attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0)?;
    let axis = norm_axis(attrs.int("axis", 0), x.shape.len())?;
    let in_st = strides(&x.shape);
    let mut start = 0i64;
    for y in outs {
        if y.shape.len() != x.shape.len() {
            return Err(format!("an output has rank {}, the input {}", y.shape.len(), x.shape.len()));
        }
        Strided {
            dims: y.shape.clone(),
            src_off: start.saturating_mul(in_st[axis]),
            src_st: in_st.clone(),
            dst_off: 0,
            dst_st: strides(&y.shape),
            modulo: None,
        }
        .run(ctx, x, y)?;
        start = start.saturating_add(y.shape[axis]);
    }
    Ok(())
}

fn slice_k(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    infos: &[Option<TensorInfo>],
    attrs: &Attrs,
    outs: &[ClTensor],
) -> Res {
    let (x, y) = (input(ins, 0)?, output(outs, 0)?);
    // The host's plan: the same one shape inference already accepted for this call.
    let plan = crate::ir::operators::tensor::plan_slice(infos, attrs)?.0;
    let counts: Vec<i64> = plan.iter().map(|p| p.2).collect();
    if counts != y.shape {
        return Err(format!("the slice has shape {counts:?}, the output {:?}", y.shape));
    }
    let in_st = strides(&x.shape);
    let src_off = plan.iter().zip(&in_st).fold(0i64, |a, (p, s)| a.saturating_add(p.0.saturating_mul(*s)));
    let src_st = plan.iter().zip(&in_st).map(|(p, s)| p.1.saturating_mul(*s)).collect();
    Strided { dims: y.shape.clone(), src_off, src_st, dst_off: 0, dst_st: strides(&y.shape), modulo: None }
        .run(ctx, x, y)
}

fn tile_k(ctx: &ClCtx, ins: &[Option<ClTensor>], _: &[Option<TensorInfo>], _: &Attrs, outs: &[ClTensor]) -> Res {
    let (x, y) = (input(ins, 0)?, output(outs, 0)?);
    if x.shape.len() != y.shape.len() {
        return Err(format!("input rank {} but output rank {}", x.shape.len(), y.shape.len()));
    }
    if y.numel() == 0 {
        return Ok(());
    }
    Strided {
        dims: y.shape.clone(),
        src_off: 0,
        src_st: strides(&x.shape),
        dst_off: 0,
        dst_st: strides(&y.shape),
        modulo: Some(x.shape.clone()),
    }
    .run(ctx, x, y)
}

// ---------------------------------------------------------------------------------------
// Gather.

fn gather_k(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    infos: &[Option<TensorInfo>],
    attrs: &Attrs,
    outs: &[ClTensor],
) -> Res {
    let (x, idx, y) = (input(ins, 0)?, input(ins, 1)?, output(outs, 0)?);
    check_dtype(x, y)?;
    let axis = norm_axis(attrs.int("axis", 0), x.shape.len())?;
    let size = x.shape[axis];
    let it = match idx.dtype {
        DType::I64 => "long",
        DType::I32 => "int",
        d => return Err(format!("indices must be i64 or i32, found {d}")),
    };
    let n = y.numel();
    let nidx = idx.numel();
    let inner: u64 = x.shape[axis + 1..].iter().map(|&d| d.max(0) as u64).product();
    let outer: u64 = x.shape[..axis].iter().map(|&d| d.max(0) as u64).product();
    if outer.checked_mul(nidx).and_then(|v| v.checked_mul(inner)) != Some(n) {
        return Err(format!("output {:?} does not match input {:?} and indices {:?}", y.shape, x.shape, idx.shape));
    }
    if n == 0 {
        return Ok(());
    }
    // Indices with a host value are checked here; others on the device, through a flag.
    let host_idx = infos.get(1).and_then(Option::as_ref).and_then(|t| t.value);
    if let Some(v) = host_idx {
        for c in v.data.chunks_exact(v.dtype.size()) {
            let i = load_i64(v.dtype, c);
            if !(-size..size).contains(&i) {
                return Err(format!("index {i} is out of range for axis {axis} of size {size}"));
            }
        }
    }
    let t = bits_type(x.dtype.size())?;
    // The flag keeps the lowest position of a bad index (`0xffffffff`: none).
    let flag = if host_idx.is_some() { "" } else { ", __global uint* err" };
    let on_bad =
        if host_idx.is_some() { "return;" } else { "{ atomic_min(err, (uint)min(q, (ulong)0xfffffffe)); return; }" };
    let src = format!(
        "__kernel void k(__global const {t}* x, ulong xo, ulong xn, __global const {it}* idx, ulong io, \
         __global {t}* y, ulong yo, ulong n, ulong nidx, ulong inner, long size{flag}) {{\n  \
         ulong i = get_global_id(0);\n  if (i >= n) return;\n  ulong in_ = i % inner, q = (i / inner) % nidx, \
         o = i / inner / nidx;\n  long v = (long)idx[io + q];\n  if (v < 0) v += size;\n  \
         if (v < 0 || v >= size) {on_bad}\n  ulong s = (o * (ulong)size + (ulong)v) * inner + in_;\n  \
         if (s >= xn) return;\n  y[yo + i] = x[xo + s];\n}}\n"
    );
    let [xm, xo] = x.args();
    let [im, io] = idx.args();
    let [ym, yo] = y.args();
    let mut args = vec![
        xm,
        xo,
        KernelArg::U64(x.numel()),
        im,
        io,
        ym,
        yo,
        KernelArg::U64(n),
        KernelArg::U64(nidx),
        KernelArg::U64(inner),
        KernelArg::U64(size as u64),
    ];
    let gl = usize::try_from(n).map_err(|_| "tensor too large")?;
    if host_idx.is_some() {
        return ctx.run(&src, &args, gl);
    }
    let (block, _) = ctx.dev.alloc(4).map_err(|e| e.to_string())?;
    let view = ClView { mem: block.raw(), offset: 0, kind: ViewKind::Buffer };
    let mut flag_val = [0xffu8; 4];
    let r = ctx.dev.write(&view, None, &flag_val).map_err(|e| e.to_string()).and_then(|_| {
        args.push(KernelArg::Mem(block.raw()));
        ctx.run(&src, &args, gl)?;
        ctx.dev.read(&view, 4, None, &mut flag_val).map_err(|e| e.to_string())
    });
    ctx.dev.release(block);
    r?;
    let q = u32::from_le_bytes(flag_val);
    if q == u32::MAX {
        return Ok(());
    }
    // Read the offending index back for the message.
    let es = idx.dtype.size() as u64;
    let mut b = [0u8; 8];
    let at = ClView { mem: idx.mem, offset: (idx.offset + q as u64) * es, kind: ViewKind::Buffer };
    match ctx.dev.read(&at, es as usize, None, &mut b[..es as usize]) {
        Ok(()) => Err(format!(
            "index {} is out of range for axis {axis} of size {size}",
            load_i64(idx.dtype, &b[..es as usize])
        )),
        Err(_) => Err(format!("an index is out of range for axis {axis} of size {size}")),
    }
}

// ---------------------------------------------------------------------------------------
// Pad.

fn pad_k(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: &[Option<TensorInfo>], attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let (x, y) = (input(ins, 0)?, output(outs, 0)?);
    check_dtype(x, y)?;
    let r = x.shape.len();
    let mode = attrs.str("mode").unwrap_or("constant");
    if !["constant", "reflect", "edge", "wrap"].contains(&mode) {
        return Err(format!("unknown mode {mode:?}"));
    }
    let pads = match attrs.ints("pads").or(attrs.ints("paddings")) {
        Some(p) => p.to_vec(),
        None => value_ints(infos, 1, "pads")?.ok_or("needs pads (input 2)")?,
    };
    let axes: Vec<usize> = match value_ints(infos, 3, "axes")? {
        Some(a) => a.iter().map(|&a| norm_axis(a, r)).collect::<Result<_, _>>()?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() || y.shape.len() != r {
        return Err(format!("pads {pads:?} do not fit {} axes", axes.len()));
    }
    let (mut begin, mut end) = (vec![0i64; r], vec![0i64; r]);
    for (i, &a) in axes.iter().enumerate() {
        (begin[a], end[a]) = (pads[i], pads[i + axes.len()]);
    }
    // Per dim: cropped at the begin, kept, added at the begin.
    let (mut crop, mut kept, mut add) = (vec![0i64; r], vec![0i64; r], vec![0i64; r]);
    for d in 0..r {
        let (c0, c1) = (begin[d].min(0).saturating_neg(), end[d].min(0).saturating_neg());
        let k = x.shape[d].saturating_sub(c0.saturating_add(c1));
        let o = k.saturating_add(begin[d].max(0)).saturating_add(end[d].max(0));
        if k < 0 || o != y.shape[d] {
            return Err(format!("pads {pads:?} do not turn {:?} into {:?}", x.shape, y.shape));
        }
        (crop[d], kept[d], add[d]) = (c0, k, begin[d].max(0));
    }
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    if r > MAX_RANK {
        return Err(format!("Pad supports rank up to {MAX_RANK} on OpenCL, found {r}"));
    }
    if mode != "constant" && kept.contains(&0) {
        return Err(format!("an axis is empty, so it cannot be padded in {mode} mode"));
    }
    let es = x.dtype.size();
    let mut value = [0u8; 8];
    if mode == "constant" {
        match (infos.get(2).and_then(Option::as_ref), attrs.get("value")) {
            (Some(c), _) => {
                let v = c.value.ok_or("the value of the constant_value input is not available on the host")?;
                value[..es].copy_from_slice(v.data.get(..es).ok_or("constant_value is empty")?);
            }
            (None, Some(AttrValue::Int(v))) => store_i64(x.dtype, *v, &mut value[..es]),
            (None, _) => store_f64(x.dtype, attrs.float("value", 0.0), &mut value[..es]),
        }
    }
    let map = match mode {
        "constant" => "if (q < 0 || q >= kp) inside = 0;",
        "edge" => "q = clamp(q, (long)0, kp - 1);",
        "wrap" => "q %= kp; if (q < 0) q += kp;",
        _ => "if (kp == 1) q = 0; else { long p = 2 * (kp - 1); q %= p; if (q < 0) q += p; if (q >= kp) q = p - q; }",
    };
    let t = bits_type(es)?;
    let params: String =
        (0..MAX_RANK).map(|k| format!(", long o{k}, long a{k}, long c{k}, long p{k}, long s{k}")).collect();
    let mut body = String::new();
    for k in (0..r).rev() {
        body.push_str(&format!(
            "  {{ long j = r % o{k}; r /= o{k}; long kp = p{k}; long q = j - a{k};\n    {map}\n    si += (c{k} + q) * s{k}; }}\n"
        ));
    }
    let src = format!(
        "__kernel void k(__global const {t}* x, ulong xo, ulong xn, __global {t}* y, ulong yo, ulong n, {t} value{params}) {{\n  \
         ulong i = get_global_id(0);\n  if (i >= n) return;\n  long r = (long)i, si = 0;\n  int inside = 1;\n{body}  \
         y[yo + i] = (inside && si >= 0 && (ulong)si < xn) ? x[xo + si] : value;\n}}\n"
    );
    let in_st = strides(&x.shape);
    let [xm, xo] = x.args();
    let [ym, yo] = y.args();
    let mut args = vec![xm, xo, KernelArg::U64(x.numel()), ym, yo, KernelArg::U64(n), KernelArg::Bytes(value, es)];
    for k in 0..MAX_RANK {
        let v = if k < r { [y.shape[k], add[k], crop[k], kept[k], in_st[k]] } else { [1, 0, 0, 1, 0] };
        args.extend(v.map(|v| KernelArg::U64(v as u64)));
    }
    ctx.run(&src, &args, usize::try_from(n).map_err(|_| "tensor too large")?)
}

// ---------------------------------------------------------------------------------------
// Shape, ConstantOfShape.

fn shape(ctx: &ClCtx, ins: &[Option<ClTensor>], _: &[Option<TensorInfo>], attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let (x, y) = (input(ins, 0)?, output(outs, 0)?);
    let r = x.shape.len() as i64;
    let norm = |v: i64| (if v < 0 { v.saturating_add(r) } else { v }).clamp(0, r) as usize;
    let (s, e) = (norm(attrs.int("start", 0)), norm(attrs.int("end", r)));
    let dims = &x.shape[s..e.max(s)];
    if y.dtype != DType::I64 || y.numel() != dims.len() as u64 {
        return Err(format!("output must be i64[{}], found {}{:?}", dims.len(), y.dtype, y.shape));
    }
    if dims.is_empty() {
        return Ok(());
    }
    let bytes: Vec<u8> = dims.iter().flat_map(|d| d.to_le_bytes()).collect();
    let view = ClView { mem: y.mem, offset: y.offset * 8, kind: ViewKind::Buffer };
    ctx.dev.write(&view, None, &bytes).map_err(|e| e.to_string())
}

/// Fills `y` with the element `value` (its first `dtype.size()` bytes).
fn fill(ctx: &ClCtx, y: &ClTensor, value: [u8; 8]) -> Res {
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let es = y.dtype.size();
    let t = bits_type(es)?;
    let src = format!(
        "__kernel void k(__global {t}* y, ulong yo, ulong n, {t} v) {{\n  ulong i = get_global_id(0);\n  \
         if (i < n) y[yo + i] = v;\n}}\n"
    );
    let [ym, yo] = y.args();
    ctx.run(
        &src,
        &[ym, yo, KernelArg::U64(n), KernelArg::Bytes(value, es)],
        usize::try_from(n).map_err(|_| "too large")?,
    )
}

fn constant_of_shape(
    ctx: &ClCtx,
    _: &[Option<ClTensor>],
    _: &[Option<TensorInfo>],
    attrs: &Attrs,
    outs: &[ClTensor],
) -> Res {
    let y = output(outs, 0)?;
    let es = y.dtype.size();
    let mut value = [0u8; 8];
    match attrs.get("value") {
        Some(AttrValue::Int(v)) => store_i64(y.dtype, *v, &mut value[..es]),
        _ => store_f64(y.dtype, attrs.float("value", 0.0), &mut value[..es]),
    }
    fill(ctx, y, value)
}

// ---------------------------------------------------------------------------------------
// Cast.

fn cast_k(ctx: &ClCtx, ins: &[Option<ClTensor>], _: &[Option<TensorInfo>], attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let (x, y) = (input(ins, 0)?, output(outs, 0)?);
    let (from, to) = (x.dtype, y.dtype);
    if x.numel() != y.numel() {
        return Err(format!("input has {} elements but output has {}", x.numel(), y.numel()));
    }
    if from == to {
        return Strided::dense(x.numel() as i64).run(ctx, x, y);
    }
    if (from == DType::F64 || to == DType::F64) && !ctx.has_fp64() {
        return Err(format!("Cast from {from} to {to} needs f64, which this device does not support (cl_khr_fp64)"));
    }
    let (sat, mode) = crate::ir::operators::tensor::cast_mode(attrs, "Cast")?;
    let n = x.numel();
    if n == 0 {
        return Ok(());
    }
    // The loaded value `v` in the source's compute type (half, bf16 and float8 are loaded
    // as float).
    let load = if from == DType::F16 {
        "float v = vload_half(xo + i, x);".to_string()
    } else if narrow::is_narrow(from) {
        format!("float v = {};", narrow::load(from, "x[xo + i]"))
    } else {
        format!("{} v = x[xo + i];", cl_type(from))
    };
    let fl = from.is_float();
    let conv = match to {
        DType::Bool => "(uchar)(v != 0)".to_string(),
        DType::F16 | DType::F32 => "convert_float_rte(v)".to_string(),
        DType::F64 => "convert_double_rte(v)".to_string(),
        // float8 rounds once from a double source. Other sources go through float, exactly
        // but for integers beyond 2^24: those saturate or overflow as float8 either way, and
        // to bf16 they round as the host's (through f64 and f32) does.
        t if narrow::is_narrow(t) && from == DType::F64 => narrow::store(t, "v", true, sat, mode),
        t if narrow::is_narrow(t) => narrow::store(t, "convert_float_rte(v)", false, sat, mode),
        // NaN becomes 0, as in Rust's saturating `as` (spelled out: Oclgrind gets it wrong).
        DType::U64 if fl => "(isnan(v) ? (ulong)0 : convert_ulong_sat(v))".to_string(),
        t if fl => format!("({})(isnan(v) ? (long)0 : convert_long_sat(v))", cl_type(t)),
        t => format!("({})v", cl_type(t)),
    };
    // f64 → f16 rounds once, from the double. A NaN keeps its sign and top payload bits
    // (quieted), as the host's conversion does (from a double, or from the float every
    // other float source loads as).
    let store = match to {
        DType::F16 if from == DType::F64 => "if (isnan(v)) { ulong b = as_ulong(v); ((__global ushort*)y)[yo + i] = \
            (ushort)(((b >> 48) & 0x8000) | 0x7e00 | ((b & 0xfffffffffffffUL) >> 42)); } \
            else vstore_half_rte(v, yo + i, y);"
            .to_string(),
        DType::F16 if fl => "if (isnan(v)) { uint b = as_uint(v); ((__global ushort*)y)[yo + i] = \
            (ushort)(((b >> 16) & 0x8000) | 0x7e00 | ((b & 0x7fffff) >> 13)); } \
            else vstore_half_rte(v, yo + i, y);"
            .to_string(),
        DType::F16 => format!("vstore_half_rte({conv}, yo + i, y);"),
        _ => format!("y[yo + i] = {conv};"),
    };
    let xt = storage_type(from);
    let yt = storage_type(to);
    let pr = if from == DType::F64 || to == DType::F64 { pragmas(DType::F64) } else { "" };
    let (dx, dy) = (narrow::defs(from, false), narrow::defs(to, from == DType::F64));
    let src = format!(
        "{pr}{dx}{dy}__kernel void k(__global const {xt}* x, ulong xo, __global {yt}* y, ulong yo, ulong n) {{\n  \
         ulong i = get_global_id(0);\n  if (i >= n) return;\n  {load}\n  {store}\n}}\n"
    );
    let [xm, xo] = x.args();
    let [ym, yo] = y.args();
    ctx.run(&src, &[xm, xo, ym, yo, KernelArg::U64(n)], usize::try_from(n).map_err(|_| "tensor too large")?)
}

#[cfg(test)]
mod tests {
    use super::super::cl::testing::upload;
    use super::*;
    use crate::opencl::device::ClDevice;
    use crate::ops::cl::testing::device;
    use crate::ops::OPS;

    type A = AttrValue;

    fn attrs(list: &[(&str, A)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    /// `start, start + 1, ...` (plus a half for floats) as `dtype`.
    fn iota(dtype: DType, shape: &[i64], start: i64) -> Option<HostTensor> {
        let mut t = HostTensor::zeros(dtype, shape).unwrap();
        for (i, c) in t.data.chunks_exact_mut(dtype.size()).enumerate() {
            store_f64(dtype, (start + i as i64) as f64 + if dtype.is_float() { 0.5 } else { 0.0 }, c);
        }
        Some(t)
    }

    fn ints(v: &[i64]) -> Option<HostTensor> {
        Some(
            HostTensor::new(DType::I64, vec![v.len() as i64], v.iter().flat_map(|x| x.to_le_bytes()).collect())
                .unwrap(),
        )
    }

    fn floats(dtype: DType, v: &[f64]) -> Option<HostTensor> {
        let mut t = HostTensor::zeros(dtype, &[v.len() as i64]).unwrap();
        for (c, &x) in t.data.chunks_exact_mut(dtype.size()).zip(v) {
            store_f64(dtype, x, c);
        }
        Some(t)
    }

    /// Runs `name` on the host and on the device and compares the output bytes. Without
    /// `host_values`, input 2 has no host value (as for large index tensors).
    fn check(dev: &ClDevice, name: &str, ins: &[Option<HostTensor>], a: &[(&str, A)], host_values: bool) {
        let a = attrs(a);
        let def = OPS.iter().find(|o| o.name == name).unwrap();
        let all: Vec<Option<TensorInfo>> = ins
            .iter()
            .map(|t| t.as_ref().map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) }))
            .collect();
        let inferred = (def.infer)(&all, &a).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut want: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        let refs: Vec<Option<&HostTensor>> = ins.iter().map(Option::as_ref).collect();
        (def.op.id().host_kernel().unwrap())(&refs, &a, &mut want).unwrap_or_else(|e| panic!("{name} (host): {e}"));
        let mut infos = all.clone();
        if !host_values {
            if let Some(Some(t)) = infos.get_mut(1) {
                t.value = None;
            }
        }
        let outs = super::super::cl::testing::run_kernel(dev, name, ins, &infos, &a, &want);
        for (i, (w, got)) in want.iter().zip(outs).enumerate() {
            assert_eq!(w.data, got, "{name} {a}: output {} differs", i + 1);
        }
    }

    #[test]
    fn tensor_kernels_match_the_host() {
        let Some(dev) = device() else { return };
        use DType::*;
        let (i, s) = (|v: i64| A::Int(v), |v: &str| A::Str(v.into()));
        let l = |v: &[i64]| A::Ints(v.to_vec());
        for d in [F32, U8, I16, I64, F16, Bool] {
            check(&dev, "Transpose", &[iota(d, &[2, 3, 4], 0)], &[], true);
            check(&dev, "Concat", &[iota(d, &[2, 2, 3], 0), iota(d, &[2, 1, 3], 50)], &[("axis", i(1))], true);
            check(&dev, "Tile", &[iota(d, &[2, 1, 3], 0), ints(&[1, 4, 2])], &[], true);
        }
        check(&dev, "Transpose", &[iota(I32, &[2, 1, 3, 2, 2, 3], 0)], &[("perm", l(&[2, 0, 5, 4, 1, 3]))], true);
        // Rows of 16 or more elements contiguous on both sides: the 2-D kernel, rows of 20
        // (a channel shuffle), 17 (Concat along channels; rows past a multiple of 16) and
        // 18 (Slice's rows from an offset).
        for d in [F32, U8, F16] {
            check(&dev, "Transpose", &[iota(d, &[1, 3, 4, 4, 5], 0)], &[("perm", l(&[0, 2, 1, 3, 4]))], true);
            check(&dev, "Concat", &[iota(d, &[2, 3, 17], 0), iota(d, &[2, 2, 17], 90)], &[("axis", i(1))], true);
        }
        // One element: merging the dims leaves none.
        check(&dev, "Transpose", &[iota(F32, &[1, 1, 1], 0)], &[], true);
        check(&dev, "Slice", &[iota(I64, &[3, 1], 0), ints(&[1]), ints(&[2])], &[], true);
        let rows = [("starts", l(&[1, 2])), ("ends", l(&[3, 20]))];
        check(&dev, "Slice", &[iota(F32, &[4, 21], 0)], &rows, true);
        check(&dev, "Reshape", &[iota(F32, &[2, 3, 4], 0), ints(&[4, 0, -1])], &[], true);
        check(&dev, "Flatten", &[iota(I16, &[2, 3, 4], 0)], &[("axis", i(-1))], true);
        check(&dev, "Squeeze", &[iota(F32, &[1, 3, 1], 0)], &[], true);
        check(&dev, "Unsqueeze", &[iota(Bool, &[2, 3], 0), ints(&[1, -1])], &[], true);
        check(&dev, "Split", &[iota(U16, &[7, 2], 0)], &[("num_outputs", i(3))], true);
        check(&dev, "Split", &[iota(F32, &[2, 3], 0), ints(&[0, 1, 2])], &[("axis", i(-1))], true);
        check(&dev, "Slice", &[iota(F32, &[3, 4], 0)], &[("starts", l(&[1, 0])), ("ends", l(&[1000, 3]))], true);
        let big = i64::MAX;
        check(
            &dev,
            "Slice",
            &[iota(I8, &[3, 4], 0), ints(&[2, 0]), ints(&[0, big]), ints(&[0, 1]), ints(&[-1, 3])],
            &[],
            true,
        );
        check(&dev, "Slice", &[iota(F16, &[3, 4], 0), ints(&[big]), ints(&[-big]), ints(&[1]), ints(&[-1])], &[], true);
        let idx = Some(
            HostTensor::new(I64, vec![2, 2], [0i64, 2, 1, -1].iter().flat_map(|v| v.to_le_bytes()).collect()).unwrap(),
        );
        for hv in [true, false] {
            check(&dev, "Gather", &[iota(F32, &[3, 4], 0), idx.clone()], &[], hv);
            check(&dev, "Gather", &[iota(U16, &[2, 3, 2], 0), ints(&[2, 0, -3])], &[("axis", i(-2))], hv);
        }
        for m in ["constant", "reflect", "edge", "wrap"] {
            check(&dev, "Pad", &[iota(F32, &[2, 3], 0), ints(&[1, 2, 1, 2])], &[("mode", s(m))], true);
            check(&dev, "Pad", &[iota(I64, &[3, 4], 0), ints(&[1, -1, 0, 2])], &[("mode", s(m))], true);
            check(&dev, "Pad", &[iota(U8, &[3], 0), ints(&[7, 6])], &[("mode", s(m))], true);
        }
        check(&dev, "Pad", &[iota(F16, &[2, 3], 0), ints(&[1, 0, 0, 1]), floats(F16, &[2.5])], &[], true);
        check(&dev, "Pad", &[iota(I8, &[2, 2], 0)], &[("pads", l(&[0, 1, 0, 1])), ("value", i(-3))], true);
        check(&dev, "Shape", &[iota(F32, &[2, 3, 4], 0)], &[("start", i(-2))], true);
        check(&dev, "ConstantOfShape", &[ints(&[2, 3])], &[("value", A::Float(1.5))], true);
        check(&dev, "ConstantOfShape", &[ints(&[4])], &[("value", i(-7)), ("dtype", s("i64"))], true);
        check(&dev, "ConstantOfShape", &[ints(&[3])], &[("value", A::Float(0.25)), ("dtype", s("f16"))], true);
        // bf16 and float8 tensors move as bytes.
        for d in [BF16, F8E4M3FN, F8E5M2FNUZ, F8E8M0] {
            check(&dev, "Transpose", &[iota(d, &[2, 3, 4], 0)], &[], true);
            check(&dev, "Concat", &[iota(d, &[2, 2, 3], 0), iota(d, &[2, 1, 3], 50)], &[("axis", i(1))], true);
            check(&dev, "Tile", &[iota(d, &[2, 1, 3], 0), ints(&[1, 4, 2])], &[], true);
            check(&dev, "Reshape", &[iota(d, &[2, 3, 4], 0), ints(&[4, 0, -1])], &[], true);
            check(&dev, "Flatten", &[iota(d, &[2, 3, 4], 0)], &[("axis", i(-1))], true);
            check(&dev, "Squeeze", &[iota(d, &[1, 3, 1], 0)], &[], true);
            check(&dev, "Unsqueeze", &[iota(d, &[2, 3], 0), ints(&[1, -1])], &[], true);
            check(&dev, "Split", &[iota(d, &[7, 2], 0)], &[("num_outputs", i(3))], true);
            check(
                &dev,
                "Slice",
                &[iota(d, &[3, 4], 0), ints(&[2, 0]), ints(&[0, big]), ints(&[0, 1]), ints(&[-1, 3])],
                &[],
                true,
            );
            check(&dev, "Gather", &[iota(d, &[3, 4], 0), idx.clone()], &[], true);
            check(&dev, "Pad", &[iota(d, &[2, 3], 0), ints(&[1, 2, 1, 2])], &[("mode", s("reflect"))], true);
            check(&dev, "Pad", &[iota(d, &[2, 3], 0), ints(&[1, 0, 0, 1]), floats(d, &[2.0])], &[], true);
            check(&dev, "ConstantOfShape", &[ints(&[3])], &[("value", A::Float(0.25)), ("dtype", s(d.name()))], true);
        }
        let fv = [
            0.0,
            1.5,
            -1.5,
            2.5,
            -2.7,
            300.25,
            -300.75,
            7e4,
            -7e4,
            1e10,
            -1e10,
            65519.0,
            3e-8,
            f64::NAN,
            f64::INFINITY,
            // Rounding ties and ranges of the narrow floats: bf16's 1 + 2^-8, float8's
            // largest values and the midpoints past them, subnormal ties, E8M0's 1.5.
            1.0 + 1.0 / 256.0,
            -(1.0 + 3.0 / 256.0),
            448.0,
            464.0,
            -465.0,
            240.0,
            248.0,
            57344.0,
            61440.0,
            -0.0,
            0.5 * 2f64.powi(-9),
            0.75 * 2f64.powi(-16),
            1e-39,
            f64::NEG_INFINITY,
            3.0 * 2f64.powi(100),
        ];
        let codes = [
            (1, F32),
            (2, U8),
            (3, I8),
            (4, U16),
            (5, I16),
            (6, I32),
            (7, I64),
            (9, Bool),
            (10, F16),
            (11, F64),
            (12, U32),
            (13, U64),
            (16, BF16),
            (17, F8E4M3FN),
            (18, F8E4M3FNUZ),
            (19, F8E5M2),
            (20, F8E5M2FNUZ),
            (24, F8E8M0),
        ];
        for (_, from) in codes {
            for (code, to) in codes {
                if !dev.has_fp64 && (from == F64 || to == F64) {
                    continue;
                }
                let x = if from.is_float() { floats(from, &fv) } else { iota(from, &[3, 5], -7) };
                check(&dev, "Cast", std::slice::from_ref(&x), &[("to", i(code))], true);
                let like = Some(HostTensor::zeros(to, &[1]).unwrap());
                check(&dev, "CastLike", &[x.clone(), like.clone()], &[], true);
                if to.is_float8() {
                    for m in ["up", "down", "nearest"] {
                        let a = [("to", i(code)), ("saturate", i(0)), ("round_mode", s(m))];
                        check(&dev, "Cast", std::slice::from_ref(&x), &a, true);
                    }
                    check(&dev, "CastLike", &[x, like], &[("saturate", i(0))], true);
                }
            }
        }
    }

    #[test]
    fn in_place_calls_read_before_writing() {
        let Some(dev) = device() else { return };
        let x = iota(DType::F32, &[64, 64], 0).unwrap();
        let (block, t) = upload(&dev, &x, None);
        let f = crate::ops::cl_fn("Transpose").unwrap();
        let infos = [Some(TensorInfo { dtype: x.dtype, shape: &x.shape, value: None })];
        f(&ClCtx { dev: &dev }, &[Some(t.clone())], &infos, &Attrs::default(), std::slice::from_ref(&t)).unwrap();
        let mut got = vec![0u8; x.data.len()];
        let v = ClView { mem: t.mem, offset: t.offset * 4, kind: ViewKind::Buffer };
        dev.read(&v, got.len(), None, &mut got).unwrap();
        let want: Vec<u8> = (0..64 * 64).flat_map(|i| x.data[((i % 64) * 64 + i / 64) * 4..][..4].to_vec()).collect();
        assert_eq!(got, want);
        dev.release(block);
    }
}
