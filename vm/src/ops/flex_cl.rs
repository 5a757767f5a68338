//! OpenCL buffer kernel for FlexAttention (see `super::cl`), mirroring the host kernel in
//! `super::flex`: a work-item per output element, which recomputes its row's softmax
//! (two passes over the keys: the largest score, then the weighted sum).

use super::cl::{check_out, float_arg, input, long_arg as l, ClCtx, ClFn, ClTensor, Infos, Res};
use super::loss_cl::{calc_ty, pragmas, ptr_ty, work};
use super::{Attrs, Operator};
use crate::ir::operators::flex::*;
use crate::ir::types::DType;
use crate::opencl::device::KernelArg;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[(Operator::FlexAttention, flex_attention)];

fn flex_attention(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    let sh: Vec<Option<(DType, &[i64])>> = ins.iter().map(|t| t.as_ref().map(|t| (t.dtype, &t.shape[..]))).collect();
    let p = flex_dims(&sh, a)?;
    let (q, k, v) = (input(ins, 0, "Q")?, input(ins, 1, "K")?, input(ins, 2, "V")?);
    let y = outs.first().ok_or("FlexAttention: the output is missing")?;
    let i = |v: usize| v as i64;
    check_out(y, p.dtype, &[i(p.b), i(p.hq), i(p.l), i(p.ev)])?;
    let d = p.dtype;
    let mut h = pragmas(ctx, d, false)?.to_string();
    h.push_str(&format!("typedef {} TP;\ntypedef {} C;\n", ptr_ty(d), calc_ty(d)));
    if d == DType::F16 {
        h.push_str("#define LD(p, i) vload_half((i), (p))\n#define ST(p, i, v) vstore_half((float)(v), (i), (p))\n");
    } else {
        h.push_str("#define LD(p, i) ((C)(p)[(i)])\n#define ST(p, i, v) ((p)[(i)] = (TP)(v))\n");
    }
    let src = format!(
        "{h}__kernel void k(__global const TP* q, ulong qo, __global const TP* kk, ulong ko, __global const TP* v, \
         ulong vo, __global TP* y, ulong yo, long HQ, long G, long L, long S, long E, long EV, C scale) {{\n  \
         long id = get_global_id(0);\n  long dv = id % EV, r = id / EV;\n  long bh = r / L;\n  \
         long b = bh / HQ, hh = bh % HQ;\n  long kh = b * (HQ / G) + hh / G;\n  ulong qb = qo + r * E;\n  \
         C m = -INFINITY;\n  for (long j = 0; j < S; j++) {{\n    C s = 0;\n    \
         for (long e = 0; e < E; e++) s += LD(q, qb + e) * LD(kk, ko + (kh * S + j) * E + e);\n    m = fmax(m, s * scale);\n  }}\n  \
         C sum = 0, acc = 0;\n  for (long j = 0; j < S; j++) {{\n    C s = 0;\n    \
         for (long e = 0; e < E; e++) s += LD(q, qb + e) * LD(kk, ko + (kh * S + j) * E + e);\n    \
         C w = exp(s * scale - m);\n    sum += w;\n    acc += w * LD(v, vo + (kh * S + j) * EV + dv);\n  }}\n  \
         ST(y, yo + id, acc / sum);\n}}\n"
    );
    let n = (p.b * p.hq * p.l * p.ev) as u64;
    if n == 0 {
        return Ok(());
    }
    let mut args: Vec<KernelArg> = Vec::new();
    args.extend(q.args());
    args.extend(k.args());
    args.extend(v.args());
    args.extend(y.args());
    args.extend([l(i(p.hq)), l(i(p.hq / p.hkv)), l(i(p.l)), l(i(p.s)), l(i(p.e)), l(i(p.ev))]);
    args.push(if d == DType::F64 { KernelArg::Bytes(p.scale.to_ne_bytes(), 8) } else { float_arg(p.scale as f32) });
    ctx.run(&src, &args, work(n)?)
}

#[cfg(test)]
mod tests {
    use crate::ir::attrs::AttrValue;
    use crate::ir::types::DType;
    use crate::ops::cl::testing::device;
    use crate::ops::loss_cl::tests::{attrs, check, random};

    #[test]
    fn flex_attention_kernel_matches_the_host() {
        let Some(dev) = device() else { return };
        let mut dtypes = vec![DType::F32, DType::F16];
        if dev.has_fp64 {
            dtypes.push(DType::F64);
        }
        for d in dtypes {
            let q = random(d, &[2, 4, 3, 8], 1, -1.0, 1.0);
            let k = random(d, &[2, 2, 5, 8], 2, -1.0, 1.0);
            let v = random(d, &[2, 2, 5, 6], 3, -1.0, 1.0);
            for a in [attrs(&[]), attrs(&[("scale", AttrValue::Float(0.3))])] {
                check(&dev, "FlexAttention", &[Some(q.clone()), Some(k.clone()), Some(v.clone())], &a, 1);
            }
        }
    }
}
