//! OpenCL buffer kernels for the transformer family (Attention, RotaryEmbedding, Swish,
//! SwiGLU; see `super::cl`). They mirror the host kernels in `super::attention`, including
//! where those round to the dtype: f16 is computed in float with every rounding of the
//! reference emulated (`rh`), f32 in float, f64 in double (with `cl_khr_fp64`).
//!
//! Attention is one program with a `phase` argument, launched once per phase over its own
//! range: (0) the biased scores Q·Kᵀ of every (b, head, query, key) into a scratch buffer,
//! (1) each row's softmax in place, with the fully-masked-row guard, (2) Y = P·V per output
//! element, (3, 4) present_key and present_value. The geometry and the options travel as
//! arguments, so a program is specialized only on the dtype and the softmax's precision.

use super::cl::{cl_type, float_arg, input, need_fp64, ClCtx, ClFn, ClTensor, Infos, Res};
use super::elementwise_cl::FP64_PRAGMA;
use super::tensor_cl::unaliased;
use super::{Attrs, Operator, TensorInfo};
use crate::ir::operators::attention::*;
use crate::ir::types::DType;
use crate::opencl::device::{ClView, KernelArg, ViewKind};

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[
    (Operator::Attention, attention),
    (Operator::RotaryEmbedding, rotary),
    (Operator::Swish, swish),
    (Operator::SwiGLU, swiglu),
];

/// The operands' dtypes and shapes as inference sees them (no values).
pub(super) fn shapes(ins: &[Option<ClTensor>]) -> Vec<Option<TensorInfo<'_>>> {
    ins.iter().map(|t| t.as_ref().map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: None })).collect()
}

/// Checks the outputs (a non-empty prefix of `want`) against the inferred ones.
pub(super) fn check_outs(outs: &[ClTensor], want: &[(DType, Vec<i64>)]) -> Res {
    if outs.is_empty() || outs.len() > want.len() {
        return Err(format!("expected 1 to {} outputs, found {}", want.len(), outs.len()));
    }
    for (i, (o, (d, s))) in outs.iter().zip(want).enumerate() {
        if o.dtype != *d || o.shape != *s {
            return Err(format!("output {} is {}{:?}, expected {d}{s:?}", i + 1, o.dtype, o.shape));
        }
    }
    Ok(())
}

/// A work-item count as usize.
pub(super) fn global(n: u64) -> Result<usize, String> {
    usize::try_from(n).map_err(|_| "tensor too large for one launch".to_string())
}

/// OpenCL C helpers for dtype `d` computed in `r` (`float` or `double`): `LD(p, i)` loads an
/// element as `r`, `ST(p, i, v)` stores one, `rt(x)` rounds to `d`'s precision, and `rh(x)`
/// rounds a float to the nearest half (ties to even; overflow to infinity).
pub(super) fn dtype_prelude(d: DType, r: &str) -> String {
    let t = cl_type(d);
    let mut s = String::from(
        "float rh(float x) {\n  float a = fabs(x);\n  if (isnan(x) || isinf(x)) return x;\n  \
         if (a >= 65520.0f) return copysign(INFINITY, x);\n  \
         if (a < 6.103515625e-05f) return copysign(rint(a * 16777216.0f) * 5.9604644775390625e-08f, x);\n  \
         int e;\n  frexp(a, &e);\n  float q = ldexp(1.0f, e - 11);\n  return copysign(rint(a / q) * q, x);\n}\n",
    );
    if d == DType::F16 {
        s.push_str(&format!(
            "#define LD(p, i) (({r})vload_half((i), (p)))\n#define ST(p, i, v) vstore_half_rte((float)(v), (i), (p))\n\
             {r} rt({r} x) {{ return ({r})rh((float)x); }}\n"
        ));
    } else {
        s.push_str(&format!(
            "#define LD(p, i) (({r})(p)[i])\n#define ST(p, i, v) ((p)[i] = ({t})(v))\n{r} rt({r} x) {{ return x; }}\n"
        ));
    }
    s
}

/// A scalar kernel argument of type `ty` (`float` or `double`).
pub(super) fn real_arg(ty: &str, v: f64) -> KernelArg {
    if ty == "double" {
        KernelArg::Bytes(v.to_ne_bytes(), 8)
    } else {
        float_arg(v as f32)
    }
}

// ---------------------------------------------------------------------------------------
// Attention.

/// The program of one Attention configuration (see the module docs for the phases).
fn attention_source(p: &AttentionPlan, r: &str, s: &str) -> String {
    let t = cl_type(p.dtype);
    let fp64 = r == "double" || s == "double";
    // The softmax's rounding, in its compute type `s`.
    let rp = match p.softmax {
        DType::F16 => format!("return ({s})rh((float)x);"),
        DType::F32 if s == "double" => format!("return ({s})(float)x;"),
        _ => "return x;".to_string(),
    };
    format!(
        "{pragma}typedef {r} R;\ntypedef {s} S;\n{prelude}\
S rp(S x) {{ {rp} }}\n\
#define KEY(b, h, j, c) ((j) < PAST ? LD(pk, pko + (((b) * HKV + (h)) * PAST + (j)) * D + (c)) \\\n\
  : LD(k, ko + (b) * kb + (h) * kh + ((j) - PAST) * ks + (c)))\n\
#define VAL(b, h, j, c) ((j) < PAST ? LD(pv, pvo + (((b) * HKV + (h)) * PAST + (j)) * DV + (c)) \\\n\
  : LD(v, vo + (b) * vb + (h) * vh + ((j) - PAST) * vs + (c)))\n\
R bias(__global const uchar* mask, ulong mo, __global const long* np, ulong npo, long mk, long causal, long nonpad, \
long ms0, long ms1, long ms2, long mkv, long SQ, long PAST, long left, long right, long b, long h, long i, long j) {{\n\
  R m = 0;\n\
  if (mk != 0) {{\n\
    ulong mi = mo + b * ms0 + h * ms1 + i * ms2 + j;\n\
    if (j >= mkv) m = -INFINITY;\n\
    else if (mk == 1) m = mask[mi] ? (R)0 : (R)(-INFINITY);\n\
    else m = LD((__global const {t}*)mask, mi);\n\
  }}\n\
  long valid = nonpad ? np[npo + b] : 0;\n  long diff = i + (nonpad ? valid - SQ : PAST) - j;\n\
  if (causal && diff < 0) m += -INFINITY;\n\
  if ((left >= 0 && diff > left) || (right >= 0 && -diff > right)) m += -INFINITY;\n\
  if (nonpad && j >= valid) m += -INFINITY;\n  return m;\n}}\n\
#define BIAS(b, h, i, j) bias(mask, mo, np, npo, mk, causal, nonpad, ms0, ms1, ms2, mkv, SQ, PAST, left, right, b, h, i, j)\n\
__kernel void k(long phase, __global const {t}* q, ulong qo, __global const {t}* k, ulong ko, __global const {t}* v, ulong vo,\n\
  __global const uchar* mask, ulong mo, __global const {t}* pk, ulong pko, __global const {t}* pv, ulong pvo,\n\
  __global const long* np, ulong npo, __global S* x, __global {t}* y, ulong yo, __global {t}* ok, ulong oko,\n\
  __global {t}* ov, ulong ovo, __global {t}* oqk, ulong oqko,\n\
  long B, long HQ, long HKV, long SQ, long KVL, long PAST, long D, long DV,\n\
  long qb, long qh, long qs, long kb, long kh, long ks, long vb, long vh, long vs, long yb, long yh, long ys,\n\
  long ms0, long ms1, long ms2, long mkv, long left, long right, long mk, long causal, long nonpad, long mode,\n\
  long has_qk, R scale, R softcap) {{\n\
  long T = PAST + KVL, g = get_global_id(0), G = HQ / HKV;\n\
  if (phase == 0) {{\n\
    if (g >= B * HQ * SQ * T) return;\n\
    long j = g % T, r = g / T, i = r % SQ, bh = r / SQ, h = bh % HQ, b = bh / HQ, kvh = h / G;\n\
    R acc = 0;\n\
    for (long c = 0; c < D; c++) acc += rt(LD(q, qo + b * qb + h * qh + i * qs + c) * scale) * rt(KEY(b, kvh, j, c) * scale);\n\
    R qk = rt(acc);\n\
    if (softcap > 0) qk = rt(rt(tanh(rt(qk / softcap))) * softcap);\n\
    R xv = rt(qk + BIAS(b, h, i, j));\n\
    x[g] = (S)xv;\n\
    if (has_qk && mode < 3) ST(oqk, oqko + g, mode == 2 ? xv : qk);\n\
  }} else if (phase == 1) {{\n\
    if (g >= B * HQ * SQ) return;\n\
    long i = g % SQ, bh = g / SQ, h = bh % HQ, b = bh / HQ;\n\
    __global S* xr = x + g * T;\n\
    S m = -INFINITY;\n\
    for (long j = 0; j < T; j++) {{ S u = rp(xr[j]); if (isnan(u)) {{ m = u; break; }} if (u > m) m = u; }}\n\
    if (m == -INFINITY) m = 0;\n\
    S sum = 0;\n\
    for (long j = 0; j < T; j++) {{ S e = rp(exp(rp(rp(xr[j]) - m))); xr[j] = e; sum += e; }}\n\
    sum = rp(sum);\n    if (sum == 0) sum = 1;\n\
    int masked = 1;\n\
    for (long j = 0; j < T && masked; j++)\n\
      if (BIAS(b, h, i, j) != -INFINITY) masked = 0;\n\
    for (long j = 0; j < T; j++) {{\n\
      S pr = masked ? 0 : rp(xr[j] / sum);\n\
      if (has_qk && mode == 3) ST(oqk, oqko + g * T + j, pr);\n\
      xr[j] = (S)rt((R)pr);\n\
    }}\n\
  }} else if (phase == 2) {{\n\
    if (g >= B * HQ * SQ * DV) return;\n\
    long c = g % DV, r = g / DV, i = r % SQ, bh = r / SQ, h = bh % HQ, b = bh / HQ, kvh = h / G;\n\
    R acc = 0;\n\
    for (long j = 0; j < T; j++) acc += (R)x[r * T + j] * VAL(b, kvh, j, c);\n\
    ST(y, yo + b * yb + h * yh + i * ys + c, rt(acc));\n\
  }} else if (phase == 3) {{\n\
    if (g >= B * HKV * T * D) return;\n\
    long c = g % D, r = g / D, j = r % T, bh = r / T;\n\
    ST(ok, oko + g, KEY(bh / HKV, bh % HKV, j, c));\n\
  }} else {{\n\
    if (g >= B * HKV * T * DV) return;\n\
    long c = g % DV, r = g / DV, j = r % T, bh = r / T;\n\
    ST(ov, ovo + g, VAL(bh / HKV, bh % HKV, j, c));\n\
  }}\n}}\n",
        pragma = if fp64 { FP64_PRAGMA } else { "" },
        prelude = dtype_prelude(p.dtype, r),
    )
}

fn attention(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    for (i, name) in [(0, "Q"), (1, "K"), (2, "V")] {
        input(ins, i, name)?;
    }
    let p = attention_plan(&shapes(ins), attrs)?;
    check_outs(outs, &p.outputs())?;
    need_fp64(ctx, p.dtype)?;
    unaliased(ctx, ins, outs, |ins| attention_run(ctx, ins, &p, outs))
}

fn attention_run(ctx: &ClCtx, ins: &[Option<ClTensor>], p: &AttentionPlan, outs: &[ClTensor]) -> Res {
    let q = input(ins, 0, "Q")?;
    let r = if p.dtype == DType::F64 { "double" } else { "float" };
    let s = if p.dtype == DType::F64 || (p.softmax == DType::F64 && ctx.has_fp64()) { "double" } else { "float" };
    let has_qk = outs.len() > 3;
    let src = attention_source(p, r, s);
    let (b, hq, hkv, sq, t) = (p.batch as u64, p.q_heads as u64, p.kv_heads as u64, p.q_len as u64, p.total() as u64);
    let rows = b * hq * sq;
    let scores = rows * t;
    let elem = if s == "double" { 8 } else { 4 };
    let (block, _) = ctx.dev.alloc((scores * elem).max(8)).map_err(|e| e.to_string())?;
    let opt = |i: usize| ins.get(i).and_then(Option::as_ref).unwrap_or(q).args();
    let mut args = vec![KernelArg::U64(0)];
    for i in 0..7 {
        args.extend(opt(i));
    }
    args.push(KernelArg::Mem(block.raw()));
    for i in 0..4 {
        args.extend(outs.get(i).unwrap_or(&outs[0]).args());
    }
    let l = |v: usize| KernelArg::U64(v as u64);
    let [qb, qh, qs] = p.strides(p.q_heads, p.q_len, p.head);
    let [kb, kh, ks] = p.strides(p.kv_heads, p.kv_len, p.head);
    let [vb, vh, vs] = p.strides(p.kv_heads, p.kv_len, p.v_head);
    let [yb, yh, ys] = p.strides(p.q_heads, p.q_len, p.v_head);
    args.extend([p.batch, p.q_heads, p.kv_heads, p.q_len, p.kv_len, p.past, p.head, p.v_head].map(l));
    args.extend([qb, qh, qs, kb, kh, ks, vb, vh, vs, yb, yh, ys].map(l));
    let (ms, mkv) = p.mask.as_ref().map_or(([0; 4], 0), |m| (m.strides, m.kv));
    args.extend([ms[0], ms[1], ms[2], mkv].map(l));
    args.extend([KernelArg::U64(p.left as u64), KernelArg::U64(p.right as u64)]);
    let mk = match &p.mask {
        None => 0,
        Some(m) if m.dtype == DType::Bool => 1,
        Some(_) => 2,
    };
    args.extend([mk, p.causal as usize, p.nonpad as usize, p.mode as usize, has_qk as usize].map(l));
    // Q and K are scaled by sqrt(scale) rounded to the dtype, as the reference does.
    let rt = super::attention::rounder(p.dtype);
    args.extend([real_arg(r, rt(p.scale_sqrt)), real_arg(r, p.softcap)]);
    let mut phases = vec![(0, scores), (1, rows), (2, rows * p.v_head as u64)];
    if outs.len() > 1 {
        phases.push((3, b * hkv * t * p.head as u64));
    }
    if outs.len() > 2 {
        phases.push((4, b * hkv * t * p.v_head as u64));
    }
    let mut result = Ok(());
    for (phase, n) in phases {
        if n == 0 {
            continue;
        }
        args[0] = KernelArg::U64(phase);
        result = global(n).and_then(|n| ctx.run(&src, &args, n));
        if result.is_err() {
            break;
        }
    }
    ctx.dev.release(block);
    result
}

// ---------------------------------------------------------------------------------------
// RotaryEmbedding.

fn rotary(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    unaliased(ctx, ins, outs, |ins| rotary_k(ctx, ins, infos, attrs, outs))
}

fn rotary_k(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "input")?;
    let (cos, sin) = (input(ins, 1, "cos_cache")?, input(ins, 2, "sin_cache")?);
    let p = rotary_plan(&shapes(ins), attrs)?;
    check_outs(outs, &[(x.dtype, x.shape.clone())])?;
    need_fp64(ctx, x.dtype)?;
    let pos = ins.get(3).and_then(Option::as_ref);
    // Position ids known here are checked here; others by the kernel, through a flag.
    let known = infos.get(3).and_then(|t| t.as_ref()).and_then(|t| t.value);
    if let Some(ids) = known {
        if let Some(id) = ids.to_i64().into_iter().find(|&id| id < 0 || id as u64 >= p.cache_rows as u64) {
            return Err(format!("position id {id} is out of range for caches of {} positions", p.cache_rows));
        }
    }
    let n = x.numel();
    if n == 0 {
        return Ok(());
    }
    let r = if x.dtype == DType::F64 { "double" } else { "float" };
    let t = cl_type(x.dtype);
    let use_flag = pos.is_some() && known.is_none();
    let src = format!(
        "{pragma}{prelude}__kernel void k(__global const {t}* x, ulong xo, __global const {t}* cs, ulong co, \
         __global const {t}* sn, ulong so, __global const long* pos, ulong po, __global {t}* y, ulong yo, \
         __global uint* flag, ulong n, long S, long H, long D, long rot, long rows, long sb, long ss, long sh) {{\n  \
         ulong g = get_global_id(0);\n  if (g >= n) return;\n  \
         long c = g % D, r = g / D, h = r % H, bs = r / H, s = bs % S, b = bs / S;\n  \
         long base = b * sb + s * ss + h * sh;\n  \
         if (c >= rot) {{ ST(y, yo + base + c, LD(x, xo + base + c)); return; }}\n  \
         long half_ = rot / 2;\n  long row = {row};\n  \
         if (row < 0 || row >= rows) {{ {bad} ST(y, yo + base + c, NAN); return; }}\n  \
         long kk = {kk};\n  int first = {first};\n  \
         long i1 = base + {i1}, i2 = base + {i2};\n  \
         {r} x1 = LD(x, xo + i1), x2 = LD(x, xo + i2);\n  \
         {r} co_ = LD(cs, co + row * half_ + kk), si = LD(sn, so + row * half_ + kk);\n  \
         {r} v = first ? rt(rt(co_ * x1) - rt(si * x2)) : rt(rt(si * x1) + rt(co_ * x2));\n  \
         ST(y, yo + base + c, v);\n}}\n",
        pragma = if r == "double" { FP64_PRAGMA } else { "" },
        prelude = dtype_prelude(x.dtype, r),
        row = if pos.is_some() { "pos[po + b * S + s]" } else { "b * S + s" },
        bad = if use_flag { "flag[0] = 1;" } else { "" },
        kk = if p.interleaved { "c / 2" } else { "c < half_ ? c : c - half_" },
        first = if p.interleaved { "c % 2 == 0" } else { "c < half_" },
        i1 = if p.interleaved { "2 * kk" } else { "kk" },
        i2 = if p.interleaved { "2 * kk + 1" } else { "half_ + kk" },
    );
    let y = &outs[0];
    let flag = if use_flag { Some(ctx.dev.alloc(4).map_err(|e| e.to_string())?.0) } else { None };
    let fv = flag.as_ref().map(|b| ClView { mem: b.raw(), offset: 0, kind: ViewKind::Buffer });
    let mut args: Vec<KernelArg> = x.args().into();
    args.extend(cos.args());
    args.extend(sin.args());
    args.extend(pos.unwrap_or(x).args());
    args.extend(y.args());
    args.push(KernelArg::Mem(fv.as_ref().map_or(x.mem, |v| v.mem)));
    args.push(KernelArg::U64(n));
    let l = |v: usize| KernelArg::U64(v as u64);
    args.extend([p.seq, p.heads, p.head, p.rot, p.cache_rows, p.strides[0], p.strides[1], p.strides[2]].map(l));
    let mut result = match &fv {
        Some(v) => ctx.dev.write(v, None, &[0; 4]).map_err(|e| e.to_string()),
        None => Ok(()),
    };
    let mut got = [0u8; 4];
    result = result.and_then(|_| global(n)).and_then(|g| ctx.run(&src, &args, g));
    if let (Ok(()), Some(v)) = (&result, &fv) {
        result = ctx.dev.read(v, 4, None, &mut got).map_err(|e| e.to_string());
    }
    if let Some(b) = flag {
        ctx.dev.release(b);
    }
    result?;
    if got != [0; 4] {
        return Err(format!("a position id is out of range for caches of {} positions", p.cache_rows));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Swish and SwiGLU.

/// `y = a · sigmoid(alpha · a) [· b]`, elementwise.
fn gated(ctx: &ClCtx, ins: &[Option<ClTensor>], attrs: &Attrs, outs: &[ClTensor], glu: bool) -> Res {
    let a = input(ins, 0, if glu { "A" } else { "X" })?;
    let b = if glu { Some(input(ins, 1, "B")?) } else { None };
    let want = if glu { infer_swiglu(&shapes(ins), attrs)? } else { infer_swish(&shapes(ins), attrs)? };
    check_outs(outs, &want)?;
    need_fp64(ctx, a.dtype)?;
    let n = a.numel();
    if n == 0 {
        return Ok(());
    }
    let r = if a.dtype == DType::F64 { "double" } else { "float" };
    let t = cl_type(a.dtype);
    let src = format!(
        "{pragma}{prelude}__kernel void k(__global const {t}* a, ulong ao, __global const {t}* b, ulong bo, \
         __global {t}* y, ulong yo, ulong n, {r} alpha) {{\n  ulong g = get_global_id(0);\n  if (g >= n) return;\n  \
         {r} x = LD(a, ao + g);\n  {r} v = rt(x * rt(1 / (1 + exp(-alpha * x))));\n  {glu}ST(y, yo + g, v);\n}}\n",
        pragma = if r == "double" { FP64_PRAGMA } else { "" },
        prelude = dtype_prelude(a.dtype, r),
        glu = if glu { "v = rt(v * LD(b, bo + g));\n  " } else { "" },
    );
    let mut args: Vec<KernelArg> = a.args().into();
    args.extend(b.unwrap_or(a).args());
    args.extend(outs[0].args());
    args.extend([KernelArg::U64(n), real_arg(r, attrs.float("alpha", 1.0))]);
    ctx.run(&src, &args, global(n)?)
}

fn swish(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    gated(ctx, ins, attrs, outs, false)
}

fn swiglu(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    gated(ctx, ins, attrs, outs, true)
}

/// Each kernel against the host kernel on the device named by `RXVM_TEST_CL_DEVICE`
/// (default: the first); skipped when no OpenCL runtime is usable.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ir::host_tensor::{store_f64, HostTensor};
    use crate::opencl::device::ClDevice;
    use crate::ops::attention::tests::{attrs, float, int};
    use crate::ops::cl::testing::{device, run_kernel, upload};
    use crate::ops::OPS;

    /// Random values in [-2, 2) of dtype `d`.
    pub(crate) fn rand(d: DType, shape: &[i64], seed: u64) -> HostTensor {
        let mut t = HostTensor::random(d, shape, seed).unwrap();
        let es = d.size();
        for c in t.data.chunks_exact_mut(es) {
            let v = crate::ir::host_tensor::load_f64(d, c);
            store_f64(d, v * 2.0, c);
        }
        t
    }

    fn i64s(shape: &[i64], v: &[i64]) -> HostTensor {
        HostTensor::new(DType::I64, shape.to_vec(), v.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap()
    }

    /// A bool mask with a pattern of falses, and its row 0 all false when `empty_row`.
    fn mask(shape: &[i64], empty_row: bool) -> HostTensor {
        let n: i64 = shape.iter().product();
        let last = *shape.last().unwrap();
        let v: Vec<u8> = (0..n).map(|i| u8::from(!(empty_row && i < last) && (i * 7 + 3) % 5 != 0)).collect();
        HostTensor::new(DType::Bool, shape.to_vec(), v).unwrap()
    }

    /// Runs `name` on the host and on the device with `n_outs` outputs and compares them
    /// (within a few ulps of the dtype: the host computes in f64, the device in float).
    /// `known` passes the inputs' values to the kernel, as the interpreter does for small ones.
    pub(crate) fn check(dev: &ClDevice, name: &str, ins: &[Option<HostTensor>], a: &Attrs, n_outs: usize, known: bool) {
        let def = OPS.iter().find(|o| o.name == name).unwrap();
        let infos: Vec<Option<TensorInfo>> = ins
            .iter()
            .map(|t| t.as_ref().map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: known.then_some(t) }))
            .collect();
        let inferred = (def.infer)(&infos, a).unwrap_or_else(|e| panic!("{name} {a}: {e}"));
        let mut want: Vec<HostTensor> =
            inferred.iter().take(n_outs).map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        let refs: Vec<Option<&HostTensor>> = ins.iter().map(Option::as_ref).collect();
        (def.op.id().host_kernel().unwrap())(&refs, a, &mut want).unwrap_or_else(|e| panic!("{name} (host): {e}"));
        let got = run_kernel(dev, name, ins, &infos, a, &want);
        for (k, (w, g)) in want.iter().zip(got).enumerate() {
            let g = HostTensor::new(w.dtype, w.shape.clone(), g).unwrap();
            let (tol, rel) = match w.dtype {
                DType::F16 => (4e-3, 4e-3),
                DType::F32 => (2e-5, 2e-5),
                _ => (1e-9, 1e-9),
            };
            for (i, (x, y)) in w.to_f64().iter().zip(g.to_f64()).enumerate() {
                let ok = (x.is_nan() && y.is_nan()) || *x == y || (x - y).abs() <= tol + rel * x.abs();
                assert!(
                    ok,
                    "{name} {a} on {:?}: output {} element {i} is {y} on the device, {x} on the host",
                    ins.iter().map(|t| t.as_ref().map(|t| (t.dtype, t.shape.clone()))).collect::<Vec<_>>(),
                    k + 1
                );
            }
        }
    }

    fn floats(dev: &ClDevice) -> Vec<DType> {
        let mut v = vec![DType::F32, DType::F16];
        if dev.has_fp64 {
            v.push(DType::F64);
        }
        v
    }

    #[test]
    fn attention_matches_the_host() {
        let Some(dev) = device() else { return };
        let none = Attrs::default();
        for d in floats(&dev) {
            let r = |s: &[i64], seed| Some(rand(d, s, seed));
            let (q, k, v) = (r(&[2, 4, 3, 8], 1), r(&[2, 2, 5, 8], 2), r(&[2, 2, 5, 6], 3));
            let base = [q.clone(), k.clone(), v.clone()];
            check(&dev, "Attention", &base, &none, 1, false);
            check(&dev, "Attention", &base, &attrs(&[("scale", float(0.3)), ("softcap", float(1.5))]), 4, false);
            for mode in 0..4 {
                let a = attrs(&[("qk_matmul_output_mode", int(mode)), ("is_causal", int(1)), ("softcap", float(2.0))]);
                let ins = [q.clone(), k.clone(), v.clone(), Some(mask(&[3, 5], true))];
                check(&dev, "Attention", &ins, &a, 4, false);
            }
            // Additive masks, broadcast and shorter than the keys; the past.
            let (pk, pv) = (r(&[2, 2, 4, 8], 4), r(&[2, 2, 4, 6], 5));
            for m in [r(&[2, 1, 3, 9], 6), r(&[3, 7], 7), r(&[4, 1, 9], 8)] {
                let ins = [q.clone(), k.clone(), v.clone(), m, pk.clone(), pv.clone()];
                check(&dev, "Attention", &ins, &none, 3, false);
                check(
                    &dev,
                    "Attention",
                    &ins,
                    &attrs(&[("is_causal", int(1)), ("qk_matmul_output_mode", int(2))]),
                    4,
                    false,
                );
            }
            // nonpad_kv_seqlen with a causal window; softmax precisions.
            let np = Some(i64s(&[2], &[4, 1]));
            let ins = [q.clone(), k.clone(), v.clone(), None, None, None, np.clone()];
            let a = attrs(&[("is_causal", int(1)), ("left_window_size", int(1)), ("softmax_precision", int(11))]);
            check(&dev, "Attention", &ins, &a, 1, false);
            let a = attrs(&[
                ("right_window_size", int(0)),
                ("softmax_precision", int(1)),
                ("qk_matmul_output_mode", int(3)),
            ]);
            let ins = [q.clone(), k.clone(), v.clone(), Some(mask(&[2, 1, 1, 5], false)), None, None, np];
            check(&dev, "Attention", &ins, &a, 4, false);
            // 3-D inputs.
            let heads = attrs(&[("q_num_heads", int(4)), ("kv_num_heads", int(2)), ("is_causal", int(1))]);
            let ins = [r(&[2, 3, 32], 9), r(&[2, 5, 16], 10), r(&[2, 5, 12], 11), None, pk.clone(), pv.clone()];
            check(&dev, "Attention", &ins, &heads, 3, false);
        }
    }

    #[test]
    fn rotary_swish_and_swiglu_match_the_host() {
        let Some(dev) = device() else { return };
        let none = Attrs::default();
        for d in floats(&dev) {
            let r = |s: &[i64], seed| Some(rand(d, s, seed));
            let pos = Some(i64s(&[2, 3], &[0, 5, 9, 2, 2, 7]));
            for (il, dim) in [(0, 0), (1, 0), (0, 4), (1, 6)] {
                let a = attrs(&[("interleaved", int(il)), ("rotary_embedding_dim", int(dim))]);
                let half = if dim == 0 { 4 } else { dim / 2 };
                let ins = [r(&[2, 2, 3, 8], 1), r(&[10, half], 2), r(&[10, half], 3), pos.clone()];
                check(&dev, "RotaryEmbedding", &ins, &a, 1, false);
                check(&dev, "RotaryEmbedding", &ins, &a, 1, true);
                let ins = [r(&[2, 3, 8], 4), r(&[2, 3, half], 5), r(&[2, 3, half], 6)];
                let a = attrs(&[("interleaved", int(il)), ("rotary_embedding_dim", int(dim)), ("num_heads", int(1))]);
                check(&dev, "RotaryEmbedding", &ins, &a, 1, false);
            }
            check(&dev, "Swish", &[r(&[3, 7], 1)], &none, 1, false);
            check(&dev, "Swish", &[r(&[5], 2)], &attrs(&[("alpha", float(0.7))]), 1, false);
            check(&dev, "SwiGLU", &[r(&[4, 6], 3), r(&[4, 6], 4)], &attrs(&[("alpha", float(1.702))]), 1, false);
        }
        // A position id past the caches is an error, found by the kernel.
        let ctx = ClCtx { dev: &dev };
        let host = [
            rand(DType::F32, &[1, 1, 2, 4], 1),
            rand(DType::F32, &[3, 2], 2),
            rand(DType::F32, &[3, 2], 3),
            i64s(&[1, 2], &[1, 3]),
        ];
        let mut keep = Vec::new();
        let ins: Vec<Option<ClTensor>> = host
            .iter()
            .map(|t| {
                let (b, ct) = upload(&dev, t, None);
                keep.push(b);
                Some(ct)
            })
            .collect();
        let (b, y) = upload(&dev, &host[0], Some(0));
        keep.push(b);
        let f = crate::ops::cl_fn("RotaryEmbedding").unwrap();
        let infos: Vec<Option<TensorInfo>> =
            host.iter().map(|t| Some(TensorInfo { dtype: t.dtype, shape: &t.shape, value: None })).collect();
        let e = f(&ctx, &ins, &infos, &none, &[y]).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
        for b in keep {
            dev.release(b);
        }
    }

    #[test]
    fn missing_inputs_are_errors() {
        let Some(dev) = device() else { return };
        let ctx = ClCtx { dev: &dev };
        for (name, f) in CL.iter().chain(crate::ops::normalization_cl::CL) {
            let e = f(&ctx, &[], &[], &Attrs::default(), &[]).unwrap_err();
            assert!(e.contains("required"), "{}: {e}", name.name());
        }
    }
}
