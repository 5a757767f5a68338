//! OpenCL buffer kernels for the sequence-state family (see `super::cl`). They mirror the
//! host kernels in `super::vision`.
//!
//! CausalConvWithState computes an output element per work-item and then the carried
//! state. LinearAttention runs a work-item per (batch, KV head, value column): a column of
//! the state only ever mixes with itself, so each work-item carries its column through the
//! steps in a scratch buffer. TensorScatter reads the (small) write indices back to check
//! them, then copies the cache and writes the update rows.

use super::cl::{check_out, input};
use super::cl::{cl_type, long_arg as l, ClCtx, ClFn, ClTensor};
use super::loss_cl::{calc_ty, pragmas, ptr_ty, work};
use super::signal_cl::host_copy;
use super::{Attrs, Operator, TensorInfo};
use crate::ir::operators::vision::*;
use crate::ir::types::DType;
use crate::opencl::device::KernelArg;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[
    (Operator::CausalConvWithState, causal_conv),
    (Operator::LinearAttention, linear_attention),
    (Operator::TensorScatter, tensor_scatter),
];

type Res = Result<(), String>;
type Infos<'a, 'b> = &'a [Option<TensorInfo<'b>>];

fn shapes(ins: &[Option<ClTensor>]) -> Vec<Option<(DType, &[i64])>> {
    ins.iter().map(|t| t.as_ref().map(|t| (t.dtype, &t.shape[..]))).collect()
}

/// Types, loads and stores of a float dtype: `TP` (buffer), `C` (compute), `LD`, `ST`.
fn head(ctx: &ClCtx, d: DType) -> Result<String, String> {
    let mut s = pragmas(ctx, d, false)?.to_string();
    s.push_str(&format!("typedef {} TP;\ntypedef {} C;\n", ptr_ty(d), calc_ty(d)));
    if d == DType::F16 {
        s.push_str("#define LD(p, i) vload_half((i), (p))\n#define ST(p, i, v) vstore_half((float)(v), (i), (p))\n");
    } else {
        s.push_str("#define LD(p, i) ((C)(p)[(i)])\n#define ST(p, i, v) ((p)[(i)] = (TP)(v))\n");
    }
    Ok(s)
}

fn causal_conv(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    let (d, [nb, nc, nl, k]) = causal_conv_dims(&shapes(ins))?;
    let act = silu(a)?;
    let x = input(ins, 0, "input")?;
    let w = input(ins, 1, "weight")?;
    let (b, past) = (ins.get(2).and_then(Option::as_ref), ins.get(3).and_then(Option::as_ref));
    let y = outs.first().ok_or("CausalConvWithState: the output is missing")?;
    check_out(y, d, &[nb as i64, nc as i64, nl as i64])?;
    let st = outs.get(1);
    if let Some(s) = st {
        check_out(s, d, &[nb as i64, nc as i64, k as i64 - 1])?;
    }
    let h = head(ctx, d)?;
    let src = format!(
        "{h}#define HAS_B {}\n#define HAS_P {}\n#define SILU {}\n\
         C padded(__global const TP* x, ulong xo, __global const TP* p, ulong po, long bc, long i, long L, long P) {{\n  \
         if (i < P) return HAS_P ? LD(p, po + bc * P + i) : (C)0;\n  return LD(x, xo + bc * L + i - P);\n}}\n\
         __kernel void k(__global const TP* x, ulong xo, __global const TP* w, ulong wo, __global const TP* b, ulong bo, \
         __global const TP* p, ulong po, __global TP* y, ulong yo, __global TP* s, ulong so, long C_, long L, long K, \
         long STATE) {{\n  long id = get_global_id(0);\n  long P = K - 1;\n  if (STATE) {{\n    long i = id % P, bc = id / P;\n    \
         ST(s, so + id, padded(x, xo, p, po, bc, L + i, L, P));\n    return;\n  }}\n  long l = id % L, bc = id / L, c = bc % C_;\n  \
         C v = HAS_B ? LD(b, bo + c) : (C)0;\n  for (long j = 0; j < K; j++) v += LD(w, wo + c * K + j) * padded(x, xo, p, po, bc, l + j, L, P);\n  \
         if (SILU) v = v / ((C)1 + exp(-v));\n  ST(y, yo + id, v);\n}}\n",
        b.is_some() as u8,
        past.is_some() as u8,
        act as u8
    );
    let args = |state: bool| {
        let mut v: Vec<KernelArg> = Vec::new();
        v.extend(x.args());
        v.extend(w.args());
        v.extend(b.unwrap_or(x).args());
        v.extend(past.unwrap_or(x).args());
        v.extend(y.args());
        v.extend(st.unwrap_or(y).args());
        v.extend([l(nc as i64), l(nl as i64), l(k as i64), l(state as i64)]);
        v
    };
    let n = (nb * nc * nl) as u64;
    if n > 0 {
        ctx.run(&src, &args(false), work(n)?)?;
    }
    let n = (nb * nc * (k - 1)) as u64;
    if st.is_some() && n > 0 {
        ctx.run(&src, &args(true), work(n)?)?;
    }
    Ok(())
}

fn linear_attention(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    let p = lin_attn(&shapes(ins), a)?;
    let get = |i: usize| ins.get(i).and_then(Option::as_ref);
    let (q, k, v) = (input(ins, 0, "query")?, input(ins, 1, "key")?, input(ins, 2, "value")?);
    let y = outs.first().ok_or("LinearAttention: the output is missing")?;
    let i = |v: usize| v as i64;
    check_out(y, p.dtype, &[i(p.b), i(p.t), i(p.hq * p.dv)])?;
    let st = outs.get(1);
    if let Some(s) = st {
        check_out(s, p.state_dtype, &[i(p.b), i(p.hkv), i(p.dk), i(p.dv)])?;
    }
    let wide = p.dtype == DType::F64 || p.state_dtype == DType::F64;
    let h = head(ctx, if wide { DType::F64 } else { DType::F32 })?;
    // Loads and stores of the state's dtype and of the activations' dtype.
    let ld = |d: DType, name: &str| match d {
        DType::F16 => format!("#define {name}(p, i) vload_half((i), (p))\n"),
        _ => format!("#define {name}(p, i) ((C)(p)[(i)])\n"),
    };
    let stf = |d: DType, name: &str| match d {
        DType::F16 => format!("#define {name}(p, i, v) vstore_half((float)(v), (i), (p))\n"),
        _ => format!("#define {name}(p, i, v) ((p)[(i)] = ({})(v))\n", cl_type(d)),
    };
    let (tq, ts) = (ptr_ty(p.dtype), ptr_ty(p.state_dtype));
    let src = format!(
        "{h}{}{}{}{}#define HAS_PAST {}\n#define GATED {}\n#define DELTA {}\n#define DECAY_DIM {}\n#define BETA_HEAD {}\n\
         __kernel void k(__global const {tq}* q, ulong qo, __global const {tq}* kk, ulong ko, __global const {tq}* v, ulong vo, \
         __global const {ts}* past, ulong po, __global const {tq}* g, ulong go, __global const {tq}* be, ulong bo, \
         __global {tq}* y, ulong yo, __global {ts}* st, ulong so, __global C* s, long HAS_ST, long T, long HQ, long HKV, \
         long DK, long DV, C scale) {{\n  long id = get_global_id(0);\n  long m = id % DV, r = id / DV;\n  long h = r % HKV, b = r / HKV;\n  \
         long G = HQ / HKV;\n  long sb = (b * HKV + h) * DK * DV + m;\n  \
         for (long d = 0; d < DK; d++) s[sb + d * DV] = HAS_PAST ? LDS(past, po + sb + d * DV) : (C)0;\n  \
         for (long t = 0; t < T; t++) {{\n    long row = b * T + t;\n    \
         if (GATED) for (long d = 0; d < DK; d++) s[sb + d * DV] *= exp(LDQ(g, go + (DECAY_DIM ? row * HKV * DK + h * DK + d : row * HKV + h)));\n    \
         long kb = ko + row * HKV * DK + h * DK;\n    C vt = LDQ(v, vo + row * HKV * DV + h * DV + m);\n    \
         if (DELTA) {{\n      C rr = 0;\n      for (long d = 0; d < DK; d++) rr += s[sb + d * DV] * LDQ(kk, kb + d);\n      \
         vt = LDQ(be, bo + (BETA_HEAD ? row * HKV + h : row)) * (vt - rr);\n    }}\n    \
         for (long d = 0; d < DK; d++) s[sb + d * DV] += LDQ(kk, kb + d) * vt;\n    \
         for (long gg = 0; gg < G; gg++) {{\n      long qh = h * G + gg;\n      long qb = qo + row * HQ * DK + qh * DK;\n      C o = 0;\n      \
         for (long d = 0; d < DK; d++) o += s[sb + d * DV] * LDQ(q, qb + d);\n      STQ(y, yo + row * HQ * DV + qh * DV + m, scale * o);\n    }}\n  }}\n  \
         if (HAS_ST) for (long d = 0; d < DK; d++) STS(st, so + sb + d * DV, s[sb + d * DV]);\n}}\n",
        ld(p.dtype, "LDQ"),
        ld(p.state_dtype, "LDS"),
        stf(p.dtype, "STQ"),
        stf(p.state_dtype, "STS"),
        get(3).is_some() as u8,
        p.gating as u8,
        p.delta as u8,
        p.decay_per_dim as u8,
        p.beta_per_head as u8,
    );
    let n = (p.b * p.hkv * p.dv) as u64;
    if n == 0 {
        return Ok(());
    }
    let es = if wide { 8u64 } else { 4 };
    let (block, _) = ctx.dev.alloc((n * p.dk as u64 * es).max(8)).map_err(|e| e.to_string())?;
    let mut args: Vec<KernelArg> = Vec::new();
    args.extend(q.args());
    args.extend(k.args());
    args.extend(v.args());
    args.extend(get(3).unwrap_or(q).args());
    args.extend(get(4).unwrap_or(q).args());
    args.extend(get(5).unwrap_or(q).args());
    args.extend(y.args());
    args.extend(st.unwrap_or(y).args());
    args.push(KernelArg::Mem(block.raw()));
    args.extend([l(st.is_some() as i64), l(i(p.t)), l(i(p.hq)), l(i(p.hkv)), l(i(p.dk)), l(i(p.dv))]);
    args.push(if wide { KernelArg::Bytes(p.scale.to_ne_bytes(), 8) } else { super::cl::float_arg(p.scale as f32) });
    let r = ctx.run(&src, &args, work(n)?);
    ctx.dev.release(block);
    r
}

fn tensor_scatter(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    let d = scatter_dims(&shapes(ins), a)?;
    let circ = circular(a)?;
    let (c, u) = (input(ins, 0, "past_cache")?, input(ins, 1, "update")?);
    let y = outs.first().ok_or("TensorScatter: the output is missing")?;
    check_out(y, c.dtype, &c.shape)?;
    let w = ins.get(2).and_then(Option::as_ref);
    let idx = match w {
        Some(w) => host_copy(ctx, w, infos.get(2).and_then(Option::as_ref))?.to_i64(),
        None => Vec::new(),
    };
    scatter_positions(&d, &idx, circ)?;
    let ty = cl_type(c.dtype);
    let copy = format!(
        "__kernel void k(__global const {ty}* c, ulong co, __global {ty}* y, ulong yo) {{\n  long id = get_global_id(0);\n  \
         y[yo + id] = c[co + id];\n}}\n"
    );
    let n = c.numel();
    // In place (the output is the cache, a donated input): nothing to copy.
    let in_place = c.mem == y.mem && c.offset == y.offset;
    if n > 0 && !in_place {
        let mut args: Vec<KernelArg> = Vec::new();
        args.extend(c.args());
        args.extend(y.args());
        ctx.run(&copy, &args, work(n)?)?;
    }
    let scatter = format!(
        "__kernel void k(__global const {ty}* u, ulong uo, __global const long* w, ulong wo, __global {ty}* y, ulong yo, \
         long MID, long LEN, long MAX, long IN, long HAS_W, long CIRC) {{\n  long id = get_global_id(0);\n  \
         long i = id % IN, r = id / IN;\n  long s = r % LEN; r /= LEN;\n  long mi = r % MID, b = r / MID;\n  \
         long p = (HAS_W ? w[wo + b] : 0) + s;\n  if (CIRC) {{ p %= MAX; if (p < 0) p += MAX; }}\n  \
         y[yo + ((b * MID + mi) * MAX + p) * IN + i] = u[uo + id];\n}}\n"
    );
    let n = u.numel();
    if n > 0 {
        let mut args: Vec<KernelArg> = Vec::new();
        args.extend(u.args());
        args.extend(w.unwrap_or(u).args());
        args.extend(y.args());
        let i = |v: usize| v as i64;
        args.extend([l(i(d.mid)), l(i(d.len)), l(i(d.max_len)), l(i(d.inner)), l(w.is_some() as i64), l(circ as i64)]);
        ctx.run(&scatter, &args, work(n)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ir::attrs::AttrValue;
    use crate::ir::host_tensor::HostTensor;
    use crate::ir::types::DType;
    use crate::ops::cl::testing::device;
    use crate::ops::loss_cl::tests::{attrs, check, random};

    #[test]
    fn sequence_state_kernels_match_the_host() {
        let Some(dev) = device() else { return };
        let mut dtypes = vec![DType::F32, DType::F16];
        if dev.has_fp64 {
            dtypes.push(DType::F64);
        }
        let s = |v: &str| AttrValue::Str(v.into());
        let int = AttrValue::Int;
        for d in dtypes {
            let x = random(d, &[2, 3, 7], 1, -1.0, 1.0);
            for k in [1i64, 4] {
                let w = random(d, &[3, 1, k], 2, -1.0, 1.0);
                let b = random(d, &[3], 3, -1.0, 1.0);
                let past = random(d, &[2, 3, k - 1], 4, -1.0, 1.0);
                for act in ["none", "silu"] {
                    let a = attrs(&[("activation", s(act))]);
                    check(&dev, "CausalConvWithState", &[Some(x.clone()), Some(w.clone())], &a, 2);
                    check(
                        &dev,
                        "CausalConvWithState",
                        &[Some(x.clone()), Some(w.clone()), Some(b.clone()), Some(past.clone())],
                        &a,
                        2,
                    );
                }
            }
            let (bt, t, hq, hkv, dk, dv) = (2, 3, 4, 2, 3, 5);
            let q = random(d, &[bt, t, hq * dk], 5, -1.0, 1.0);
            let k = random(d, &[bt, t, hkv * dk], 6, -1.0, 1.0);
            let v = random(d, &[bt, t, hkv * dv], 7, -1.0, 1.0);
            let past = random(d, &[bt, hkv, dk, dv], 8, -1.0, 1.0);
            let g = random(d, &[bt, t, hkv * dk], 9, -1.0, 0.0);
            let gh = random(d, &[bt, t, hkv], 10, -1.0, 0.0);
            let be = random(d, &[bt, t, hkv], 11, 0.0, 1.0);
            let be1 = random(d, &[bt, t, 1], 12, 0.0, 1.0);
            let heads = [("q_num_heads", int(hq)), ("kv_num_heads", int(hkv))];
            for (rule, past_, g_, be_) in [
                ("linear", None, None, None),
                ("gated", Some(&past), Some(&gh), None),
                ("delta", None, None, Some(&be1)),
                ("gated_delta", Some(&past), Some(&g), Some(&be)),
            ] {
                let mut list = heads.to_vec();
                list.push(("update_rule", s(rule)));
                let ins =
                    [Some(q.clone()), Some(k.clone()), Some(v.clone()), past_.cloned(), g_.cloned(), be_.cloned()];
                check(&dev, "LinearAttention", &ins, &attrs(&list), 2);
            }
        }
        for d in [DType::F32, DType::I64, DType::U8] {
            let c = random(d, &[2, 3, 6, 4], 13, 0.0, 100.0);
            let u = random(d, &[2, 3, 3, 4], 14, 0.0, 100.0);
            let w =
                HostTensor::new(DType::I64, vec![2], [1i64, 5].iter().flat_map(|v| v.to_le_bytes()).collect()).unwrap();
            let a = attrs(&[("mode", s("circular"))]);
            check(&dev, "TensorScatter", &[Some(c.clone()), Some(u.clone()), Some(w)], &a, 1);
            check(&dev, "TensorScatter", &[Some(c), Some(u), None], &attrs(&[("axis", int(2))]), 1);
        }
    }
}
