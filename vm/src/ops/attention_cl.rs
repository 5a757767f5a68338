//! OpenCL buffer kernels for the transformer family (Attention, RotaryEmbedding, Swish,
//! SwiGLU; see `super::cl`). They mirror the host kernels in `super::attention`, including
//! where those round to the dtype: f16 is computed in float with every rounding of the
//! reference emulated (`rh`), f32 in float, f64 in double (with `cl_khr_fp64`).
//!
//! Attention is one program with a `phase` argument, launched once per phase over its own
//! range: (0) the biased scores Q·Kᵀ of every (b, head, query, key) into a scratch buffer,
//! (1) each row's softmax in place, with the fully-masked-row guard, (2) Y = P·V per output
//! element, (3, 4) present_key and present_value. The geometry travels as arguments; the
//! program is specialized only on dtypes and options.

use super::cl::{cl_type, float_arg, ClCtx, ClFn, ClTensor};
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

type Res = Result<(), String>;
type Infos<'a, 'b> = &'a [Option<TensorInfo<'b>>];

fn input<'a>(ins: &'a [Option<ClTensor>], i: usize, name: &str) -> Result<&'a ClTensor, String> {
    ins.get(i).and_then(Option::as_ref).ok_or_else(|| format!("input {} ({name}) is required", i + 1))
}

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

pub(super) fn need_fp64(ctx: &ClCtx, d: DType) -> Res {
    if d == DType::F64 && !ctx.has_fp64() {
        return Err("the device has no fp64 support (cl_khr_fp64), so it cannot compute f64 tensors".into());
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
fn attention_source(p: &AttentionPlan, r: &str, s: &str, has_qk: bool) -> String {
    let t = cl_type(p.dtype);
    let fp64 = r == "double" || s == "double";
    // The softmax's rounding, in its compute type `s`.
    let rp = match p.softmax {
        DType::F16 => format!("return ({s})rh((float)x);"),
        DType::F32 if s == "double" => format!("return ({s})(float)x;"),
        _ => "return x;".to_string(),
    };
    let (mt, mask_load) = match &p.mask {
        None => ("uchar", "0".to_string()),
        Some(m) if m.dtype == DType::Bool => ("uchar", "(mask[mi] ? (R)0 : (R)(-INFINITY))".to_string()),
        Some(_) => (t, "LD(mask, mi)".to_string()),
    };
    format!(
        "{pragma}typedef {r} R;\ntypedef {s} S;\n{prelude}\
S rp(S x) {{ {rp} }}\n\
#define HAS_MASK {has_mask}\n#define CAUSAL {causal}\n#define NONPAD {nonpad}\n#define MODE {mode}\n#define HAS_QK {has_qk}\n\
#define KEY(b, h, j, c) ((j) < PAST ? LD(pk, pko + (((b) * HKV + (h)) * PAST + (j)) * D + (c)) \\\n\
  : LD(k, ko + (b) * kb + (h) * kh + ((j) - PAST) * ks + (c)))\n\
#define VAL(b, h, j, c) ((j) < PAST ? LD(pv, pvo + (((b) * HKV + (h)) * PAST + (j)) * DV + (c)) \\\n\
  : LD(v, vo + (b) * vb + (h) * vh + ((j) - PAST) * vs + (c)))\n\
R bias(__global const {mt}* mask, ulong mo, __global const long* np, ulong npo, long ms0, long ms1, long ms2, \
long mkv, long SQ, long PAST, long left, long right, long b, long h, long i, long j) {{\n\
  R m = 0;\n\
#if HAS_MASK\n  if (j < mkv) {{ ulong mi = mo + b * ms0 + h * ms1 + i * ms2 + j; m = {mask_load}; }} else m = -INFINITY;\n#endif\n\
  long valid = NONPAD ? np[npo + b] : 0;\n  long diff = i + (NONPAD ? valid - SQ : PAST) - j;\n\
  if (CAUSAL && diff < 0) m += -INFINITY;\n\
  if ((left >= 0 && diff > left) || (right >= 0 && -diff > right)) m += -INFINITY;\n\
  if (NONPAD && j >= valid) m += -INFINITY;\n  return m;\n}}\n\
__kernel void k(long phase, __global const {t}* q, ulong qo, __global const {t}* k, ulong ko, __global const {t}* v, ulong vo,\n\
  __global const {mt}* mask, ulong mo, __global const {t}* pk, ulong pko, __global const {t}* pv, ulong pvo,\n\
  __global const long* np, ulong npo, __global S* x, __global {t}* y, ulong yo, __global {t}* ok, ulong oko,\n\
  __global {t}* ov, ulong ovo, __global {t}* oqk, ulong oqko,\n\
  long B, long HQ, long HKV, long SQ, long KVL, long PAST, long D, long DV,\n\
  long qb, long qh, long qs, long kb, long kh, long ks, long vb, long vh, long vs, long yb, long yh, long ys,\n\
  long ms0, long ms1, long ms2, long mkv, long left, long right, R scale, R softcap) {{\n\
  long T = PAST + KVL, g = get_global_id(0), G = HQ / HKV;\n\
  if (phase == 0) {{\n\
    if (g >= B * HQ * SQ * T) return;\n\
    long j = g % T, r = g / T, i = r % SQ, bh = r / SQ, h = bh % HQ, b = bh / HQ, kvh = h / G;\n\
    R acc = 0;\n\
    for (long c = 0; c < D; c++) acc += rt(LD(q, qo + b * qb + h * qh + i * qs + c) * scale) * rt(KEY(b, kvh, j, c) * scale);\n\
    R qk = rt(acc);\n\
    if (softcap > 0) qk = rt(rt(tanh(rt(qk / softcap))) * softcap);\n\
    R xv = rt(qk + bias(mask, mo, np, npo, ms0, ms1, ms2, mkv, SQ, PAST, left, right, b, h, i, j));\n\
    x[g] = (S)xv;\n\
#if HAS_QK && MODE < 3\n    ST(oqk, oqko + g, MODE == 2 ? xv : qk);\n#endif\n\
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
      if (bias(mask, mo, np, npo, ms0, ms1, ms2, mkv, SQ, PAST, left, right, b, h, i, j) != -INFINITY) masked = 0;\n\
    for (long j = 0; j < T; j++) {{\n\
      S pr = masked ? 0 : rp(xr[j] / sum);\n\
#if HAS_QK && MODE == 3\n      ST(oqk, oqko + g * T + j, pr);\n#endif\n\
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
        has_mask = p.mask.is_some() as u8,
        causal = p.causal as u8,
        nonpad = p.nonpad as u8,
        mode = p.mode,
        has_qk = has_qk as u8,
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
    let src = attention_source(p, r, s, has_qk);
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
