//! OpenCL buffer kernels for the signal family (see `super::cl`). They mirror the host
//! kernels in `super::signal`.
//!
//! DFT and STFT compute one output bin per work-item as a direct sum (in double where the
//! device has it), the twiddle's angle from `(k·t mod n) / n`. The windows compute one
//! element per work-item. MelWeightMatrix is a table of a few hundred values decided by
//! five scalars whose floors must match the reference exactly: it is computed on the host
//! (as `super::signal` does) and written to the output buffer.

use super::cl::{check_out, input};
use super::cl::{cl_type, long_arg as l, ClCtx, ClFn, ClTensor};
use super::elementwise_cl::FP64_PRAGMA;
use super::loss_cl::{pragmas, ptr_ty, work};
use super::{Attrs, Operator, TensorInfo};
use crate::ir::host_tensor::{store_f64, HostTensor};
use crate::ir::operators::signal::*;
use crate::ir::types::DType;
use crate::opencl::device::{ClView, KernelArg, ViewKind};

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[
    (Operator::DFT, dft),
    (Operator::STFT, stft),
    (Operator::HannWindow, hann),
    (Operator::HammingWindow, hamming),
    (Operator::BlackmanWindow, blackman),
    (Operator::MelWeightMatrix, mel),
];

type Res = Result<(), String>;
type Infos<'a, 'b> = &'a [Option<TensorInfo<'b>>];

/// The value of a (small) input: the host copy the interpreter passed, else read back.
pub(super) fn host_copy(ctx: &ClCtx, t: &ClTensor, info: Option<&TensorInfo>) -> Result<HostTensor, String> {
    if let Some(v) = info.and_then(|i| i.value) {
        return Ok(v.clone());
    }
    let n = usize::try_from(t.numel()).map_err(|_| "tensor too large")?;
    let es = t.dtype.size();
    let mut b = vec![0u8; n * es];
    if n > 0 {
        let v = ClView { mem: t.mem, offset: t.offset * es as u64, kind: ViewKind::Buffer };
        ctx.dev.read(&v, b.len(), None, &mut b).map_err(|e| e.to_string())?;
    }
    HostTensor::new(t.dtype, t.shape.clone(), b)
}

/// The host copies of the optional inputs `which`, others `None`, for the host planners.
fn copies(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    infos: Infos,
    which: &[usize],
) -> Result<Vec<Option<HostTensor>>, String> {
    let mut v = Vec::with_capacity(ins.len());
    for (i, t) in ins.iter().enumerate() {
        v.push(match t {
            Some(t) if which.contains(&i) => Some(host_copy(ctx, t, infos.get(i).and_then(Option::as_ref))?),
            _ => None,
        });
    }
    Ok(v)
}

/// The source's head: pragmas, the compute type `A`, `PI` and `LIT(v)` for a literal of
/// type `A` (double where the device has it).
fn acc(ctx: &ClCtx, d: DType) -> Result<String, String> {
    let p = pragmas(ctx, d, true)?;
    Ok(if ctx.has_fp64() {
        format!("{FP64_PRAGMA}typedef double A;\n#define PI M_PI\n#define LIT(v) v\n")
    } else {
        format!("{p}typedef float A;\n#define PI M_PI_F\n#define LIT(v) v##f\n")
    })
}

fn loads(d: DType) -> &'static str {
    if d == DType::F16 {
        "#define LD(p, i) vload_half((i), (p))\n#define ST(p, i, v) vstore_half((float)(v), (i), (p))\n"
    } else {
        "#define LD(p, i) ((A)(p)[(i)])\n#define ST(p, i, v) ((p)[(i)] = (TP)(v))\n"
    }
}

// ---------------------------------------------------------------------------------------
// DFT and STFT.

fn dft(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "input")?;
    let y = outs.first().ok_or("DFT: the output is missing")?;
    let host = copies(ctx, ins, infos, &[1, 2])?;
    let refs: Vec<Option<&HostTensor>> = host.iter().map(Option::as_ref).collect();
    let p = dft_plan_on(&refs, x, a)?;
    check_out(y, x.dtype, &p.out)?;
    let d = x.dtype;
    let pragma = acc(ctx, d)?;
    let (sign, scale) = match p.kind {
        DftKind::Forward => ("-1", "1"),
        _ => ("1", "(A)N"),
    };
    let body = match p.kind {
        DftKind::Forward | DftKind::Inverse => format!(
            "  A sr = 0, si = 0;\n  long m = min(L, N);\n  for (long t = 0; t < m; t++) {{\n    long b = xo + ((o * L + t) * IN + i) * CP;\n    \
             A xr = LD(x, b), xi = CP == 2 ? LD(x, b + 1) : (A)0;\n    \
             A ang = {sign} * 2 * PI * (A)((k * t) % N) / (A)N;\n    A c = cos(ang), s = sin(ang);\n    \
             sr += xr * c - xi * s;\n    si += xr * s + xi * c;\n  }}\n  long q = yo + ((o * K + k) * IN + i) * 2;\n  \
             ST(y, q, sr / {scale});\n  ST(y, q + 1, si / {scale});\n"
        ),
        DftKind::InverseReal => "  long m = min(L, N / 2 + 1);\n  A acc = m > 0 ? LD(x, xo + (o * L * IN + i) * CP) : (A)0;\n  \
             for (long q = 1; q < m; q++) {\n    long b = xo + ((o * L + q) * IN + i) * CP;\n    \
             A xr = LD(x, b), xi = CP == 2 ? LD(x, b + 1) : (A)0;\n    \
             A ang = 2 * PI * (A)((q * k) % N) / (A)N;\n    \
             acc += 2 * q == N ? xr * cos(ang) : 2 * (xr * cos(ang) - xi * sin(ang));\n  }\n  \
             ST(y, yo + (o * K + k) * IN + i, acc / (A)N);\n"
            .to_string(),
    };
    let src = format!(
        "{pragma}typedef {} TP;\n{}#define CP {}\n__kernel void k(__global const TP* x, ulong xo, __global TP* y, ulong yo, long L, long N, long K, long IN) {{\n  \
         long id = get_global_id(0);\n  long i = id % IN, r = id / IN;\n  long k = r % K, o = r / K;\n{body}}}\n",
        ptr_ty(d),
        loads(d),
        p.comps
    );
    let total = (p.outer * p.out_len * p.inner) as u64;
    if total == 0 {
        return Ok(());
    }
    let mut args: Vec<KernelArg> = Vec::new();
    args.extend(x.args());
    args.extend(y.args());
    args.extend([l(p.len as i64), l(p.n as i64), l(p.out_len as i64), l(p.inner as i64)]);
    ctx.run(&src, &args, work(total)?)
}

/// The DFT plan from host copies of the axis and length inputs.
fn dft_plan_on(host: &[Option<&HostTensor>], x: &ClTensor, a: &Attrs) -> Result<DftPlan, String> {
    let inf: Vec<Option<TensorInfo>> =
        host.iter().map(|t| t.map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) })).collect();
    let axis = dft_axis_of(inf.get(2).and_then(Option::as_ref), a)?.ok_or("DFT: the axis is unknown")?;
    let len = host.get(1).copied().flatten().and_then(|t| t.to_i64().first().copied());
    dft_plan(&x.shape, Some(axis), len, a)
}

fn stft(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "signal")?;
    let y = outs.first().ok_or("STFT: the output is missing")?;
    let host = copies(ctx, ins, infos, &[1, 3])?;
    let step = host
        .get(1)
        .and_then(Option::as_ref)
        .and_then(|t| t.to_i64().first().copied())
        .ok_or("STFT: frame_step is required")?;
    let fl = host.get(3).and_then(Option::as_ref).and_then(|t| t.to_i64().first().copied());
    let w = ins.get(2).and_then(Option::as_ref);
    if let Some(w) = w {
        if w.dtype != x.dtype {
            return Err(format!("input 3 (window) must have the signal's dtype {}, found {}", x.dtype, w.dtype));
        }
    }
    let p = stft_plan(&x.shape, step, w.map(|w| &w.shape[..]), fl, a)?;
    check_out(y, x.dtype, &p.out)?;
    let d = x.dtype;
    let pragma = acc(ctx, d)?;
    let src = format!(
        "{pragma}typedef {} TP;\n{}#define CP {}\n#define HAS_W {}\n\
         __kernel void k(__global const TP* x, ulong xo, __global const TP* w, ulong wo, __global TP* y, ulong yo, \
         long L, long S, long F, long FR, long K) {{\n  long id = get_global_id(0);\n  long k = id % K, r = id / K;\n  \
         long f = r % FR, b = r / FR;\n  A sr = 0, si = 0;\n  for (long t = 0; t < F; t++) {{\n    \
         long q = xo + (b * L + f * S + t) * CP;\n    A wt = HAS_W ? LD(w, wo + t) : (A)1;\n    \
         A xr = LD(x, q) * wt, xi = CP == 2 ? LD(x, q + 1) * wt : (A)0;\n    \
         A ang = -2 * PI * (A)((k * t) % F) / (A)F;\n    A c = cos(ang), s = sin(ang);\n    \
         sr += xr * c - xi * s;\n    si += xr * s + xi * c;\n  }}\n  ST(y, yo + id * 2, sr);\n  ST(y, yo + id * 2 + 1, si);\n}}\n",
        ptr_ty(d),
        loads(d),
        p.comps,
        w.is_some() as u8
    );
    let total = (p.batch * p.frames * p.bins) as u64;
    if total == 0 {
        return Ok(());
    }
    let mut args: Vec<KernelArg> = Vec::new();
    args.extend(x.args());
    args.extend(w.unwrap_or(x).args());
    args.extend(y.args());
    args.extend([l(p.length as i64), l(p.step as i64), l(p.frame as i64), l(p.frames as i64), l(p.bins as i64)]);
    ctx.run(&src, &args, work(total)?)
}

// ---------------------------------------------------------------------------------------
// Windows and MelWeightMatrix.

fn window(ctx: &ClCtx, a: &Attrs, outs: &[ClTensor], kind: WindowKind, op: &str) -> Res {
    let y = outs.first().ok_or_else(|| format!("{op}: the output is missing"))?;
    let d = output_dtype(a, op)?;
    if y.dtype != d || y.shape.len() != 1 {
        return Err(format!("{op}: the output is {}{:?}, expected a 1-D {d} tensor", y.dtype, y.shape));
    }
    let size = y.shape[0].max(0);
    let periodic = a.int("periodic", 1) != 0;
    let den = if periodic { size } else { size - 1 };
    let pragma = acc(ctx, d)?;
    let expr = match kind {
        WindowKind::Hann => "sin(x / 2) * sin(x / 2)",
        WindowKind::Hamming => "(A)25 / 46 - (A)21 / 46 * cos(x)",
        WindowKind::Blackman => "LIT(0.42) - LIT(0.5) * cos(x) + LIT(0.08) * cos(2 * x)",
    };
    let store = if d == DType::F16 {
        "vstore_half((float)v, id, y + yo)".to_string()
    } else {
        format!("y[yo + id] = ({})v", cl_type(d))
    };
    let src = format!(
        "{pragma}__kernel void k(__global {}* y, ulong yo, long DEN) {{\n  long id = get_global_id(0);\n  \
         A v = 1;\n  if (DEN > 0) {{\n    A x = 2 * PI * (A)id / (A)DEN;\n    v = {expr};\n  }}\n  {store};\n}}\n",
        cl_type(d)
    );
    if size == 0 {
        return Ok(());
    }
    let mut args: Vec<KernelArg> = Vec::new();
    args.extend(y.args());
    args.push(l(den));
    ctx.run(&src, &args, work(size as u64)?)
}

fn hann(ctx: &ClCtx, _: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    window(ctx, a, outs, WindowKind::Hann, "HannWindow")
}
fn hamming(ctx: &ClCtx, _: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    window(ctx, a, outs, WindowKind::Hamming, "HammingWindow")
}
fn blackman(ctx: &ClCtx, _: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    window(ctx, a, outs, WindowKind::Blackman, "BlackmanWindow")
}

fn mel(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    const OP: &str = "MelWeightMatrix";
    let y = outs.first().ok_or("MelWeightMatrix: the output is missing")?;
    let d = output_dtype(a, OP)?;
    let host = copies(ctx, ins, infos, &[0, 1, 2, 3, 4])?;
    let refs: Vec<Option<&HostTensor>> = host.iter().map(Option::as_ref).collect();
    let bins = refs.first().copied().flatten().and_then(|t| t.to_i64().first().copied()).unwrap_or(0);
    let len = refs.get(1).copied().flatten().and_then(|t| t.to_i64().first().copied()).unwrap_or(0);
    if bins < 1 || len < 1 {
        return Err(format!("{OP}: num_mel_bins and dft_length must be positive, found {bins} and {len}"));
    }
    check_out(y, d, &[len / 2 + 1, bins])?;
    let v = super::signal::mel_values(&refs, &y.shape)?;
    let es = d.size();
    let mut bytes = vec![0u8; v.len() * es];
    for (c, &x) in bytes.chunks_exact_mut(es).zip(&v) {
        store_f64(d, x, c);
    }
    let view = ClView { mem: y.mem, offset: y.offset * es as u64, kind: ViewKind::Buffer };
    ctx.dev.write(&view, None, &bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use crate::ir::attrs::AttrValue;
    use crate::ir::host_tensor::HostTensor;
    use crate::ir::types::DType;
    use crate::ops::cl::testing::device;
    use crate::ops::loss_cl::tests::{attrs, check, random};

    fn i64s(v: i64) -> HostTensor {
        HostTensor::new(DType::I64, vec![], v.to_le_bytes().to_vec()).unwrap()
    }

    #[test]
    fn signal_kernels_match_the_host() {
        let Some(dev) = device() else { return };
        let mut dtypes = vec![DType::F32, DType::F16];
        if dev.has_fp64 {
            dtypes.push(DType::F64);
        }
        let int = AttrValue::Int;
        for d in dtypes {
            for comps in [1, 2] {
                let x = random(d, &[2, 6, 3, comps], 1, -1.0, 1.0);
                for (axis, inv, one) in [(1, 0, 0), (2, 0, 1), (1, 1, 0), (0, 1, 1), (-2, 0, 0)] {
                    let a = attrs(&[("axis", int(axis)), ("inverse", int(inv)), ("onesided", int(one))]);
                    check(&dev, "DFT", &[Some(x.clone())], &a, 1);
                    check(&dev, "DFT", &[Some(x.clone()), Some(i64s(5))], &a, 1);
                }
                // Opset 20: the axis as an input.
                let a = attrs(&[("onnx_opset", int(20))]);
                check(&dev, "DFT", &[Some(x.clone()), None, Some(i64s(1))], &a, 1);
                let sig = random(d, &[2, 20, comps], 2, -1.0, 1.0);
                let w = random(d, &[6], 3, 0.0, 1.0);
                for one in [0, 1] {
                    let a = attrs(&[("onesided", int(one))]);
                    check(&dev, "STFT", &[Some(sig.clone()), Some(i64s(3)), Some(w.clone())], &a, 1);
                    check(&dev, "STFT", &[Some(sig.clone()), Some(i64s(4)), None, Some(i64s(5))], &a, 1);
                }
            }
        }
        for op in ["HannWindow", "HammingWindow", "BlackmanWindow"] {
            for (code, periodic) in [(1, 1), (10, 0), (1, 0)] {
                let a = attrs(&[("output_datatype", int(code)), ("periodic", int(periodic))]);
                check(&dev, op, &[Some(i64s(9))], &a, 1);
            }
        }
        let i32s = |v: i32| HostTensor::new(DType::I32, vec![], v.to_le_bytes().to_vec()).unwrap();
        let f = |v: f32| HostTensor::from_f32(&[], &[v]).unwrap();
        let ins = [Some(i32s(8)), Some(i32s(16)), Some(i32s(8192)), Some(f(0.0)), Some(f(4096.0))];
        check(&dev, "MelWeightMatrix", &ins, &attrs(&[]), 1);
    }
}
