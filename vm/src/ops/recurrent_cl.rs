//! OpenCL buffer kernels for the recurrent family (RNN, GRU, LSTM; see `super::cl`). They
//! mirror the host kernels in `super::recurrent`.
//!
//! One launch computes X·Wᵀ + Wb for every step, direction, batch row and gate row into a
//! scratch buffer; then the host loops over the steps, launching one kernel per step (two
//! for GRU, whose candidate needs the whole reset gate) with a work-item per (direction,
//! batch row, hidden unit) that adds H·Rᵀ and applies the cell. The states live in two
//! scratch planes, read from one and written to the other by turns. f16 tensors are read
//! with `vload_half` and computed in float; f64 needs `cl_khr_fp64`.

use super::cl::{check_out, input};
use super::cl::{long_arg as l, ClCtx, ClFn, ClTensor};
use super::loss_cl::{calc_ty, pragmas, ptr_ty, work};
use super::{Attrs, Operator, TensorInfo};
use crate::ir::operators::recurrent::*;
use crate::ir::types::DType;
use crate::opencl::device::{ClBlock, ClView, KernelArg, ViewKind};
use opencl3::types::cl_mem;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[(Operator::RNN, rnn), (Operator::GRU, gru), (Operator::LSTM, lstm)];

type Res = Result<(), String>;
type Infos<'a, 'b> = &'a [Option<TensorInfo<'b>>];

fn rnn(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    run(ctx, ins, a, outs, Cell::Rnn)
}
fn gru(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    run(ctx, ins, a, outs, Cell::Gru)
}
fn lstm(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    run(ctx, ins, a, outs, Cell::Lstm)
}

/// An OpenCL C floating literal of the compute type `c`.
fn lit(v: f64, c: &str) -> String {
    if c == "float" {
        format!("{:e}f", v as f32)
    } else {
        format!("{v:e}")
    }
}

/// OpenCL C computing activation `a` of `v` (a variable) in the compute type `c`.
fn act_expr(a: &Act, c: &str) -> String {
    let (al, be) = (lit(a.alpha, c), lit(a.beta, c));
    match a.kind {
        ActKind::Relu => format!("fmax(v, ({c})0)"),
        ActKind::Tanh => "tanh(v)".into(),
        ActKind::Sigmoid => format!("({c})1 / (({c})1 + exp(-v))"),
        ActKind::Affine => format!("{al} * v + {be}"),
        ActKind::LeakyRelu => format!("v >= 0 ? v : {al} * v"),
        ActKind::ThresholdedRelu => format!("v > {al} ? v : ({c})0"),
        ActKind::ScaledTanh => format!("{al} * tanh({be} * v)"),
        ActKind::HardSigmoid => format!("clamp({al} * v + {be}, ({c})0, ({c})1)"),
        ActKind::Elu => format!("v >= 0 ? v : {al} * (exp(v) - ({c})1)"),
        ActKind::Softsign => format!("v / (({c})1 + fabs(v))"),
        ActKind::Softplus => "v > 0 ? v + log1p(exp(-v)) : log1p(exp(v))".into(),
    }
}

/// The common prelude of the kernels: types, loads and stores, the layout's index macros,
/// the activations `act0`..`act2(d, v)` and `CLIP`.
fn prelude(ctx: &ClCtx, dims: &RnnDims) -> Result<String, String> {
    let d = dims.dtype;
    let at = &dims.attrs;
    let (p, c) = (ptr_ty(d), calc_ty(d));
    let mut s = pragmas(ctx, d, false)?.to_string();
    s.push_str(&format!("typedef {p} TP;\ntypedef {c} C;\n"));
    if d == DType::F16 {
        s.push_str("#define LD(p, i) vload_half((i), (p))\n#define ST(p, i, v) vstore_half((float)(v), (i), (p))\n");
    } else {
        s.push_str("#define LD(p, i) ((C)(p)[(i)])\n#define ST(p, i, v) ((p)[(i)] = (TP)(v))\n");
    }
    if at.layout == 1 {
        s.push_str(
            "#define X_AT(t, n) (((n) * T + (t)) * I)\n#define S_AT(d, n) (((n) * D + (d)) * H)\n\
             #define Y_AT(t, d, n) ((((n) * T + (t)) * D + (d)) * H)\n",
        );
    } else {
        s.push_str(
            "#define X_AT(t, n) (((t) * N + (n)) * I)\n#define S_AT(d, n) (((d) * N + (n)) * H)\n\
             #define Y_AT(t, d, n) ((((t) * D + (d)) * N + (n)) * H)\n",
        );
    }
    s.push_str(&format!("#define G {}\n", at.cell.gates()));
    match at.direction {
        Direction::Forward => s.push_str("#define REV(d) 0\n"),
        Direction::Reverse => s.push_str("#define REV(d) 1\n"),
        Direction::Bidirectional => s.push_str("#define REV(d) ((d) == 1)\n"),
    }
    match at.clip {
        Some(v) => s.push_str(&format!("#define CLIP(v) clamp((v), -{0}, {0})\n", lit(v, c))),
        None => s.push_str("#define CLIP(v) (v)\n"),
    }
    for k in 0..at.cell.activations() {
        s.push_str(&format!("C act{k}(long d, C v) {{\n"));
        for dd in (0..at.dirs()).rev() {
            let a = at.acts_of(dd).get(k).ok_or("internal: an activation is missing")?;
            if dd == 0 {
                s.push_str(&format!("  return {};\n", act_expr(a, c)));
            } else {
                s.push_str(&format!("  if (d == {dd}) return {};\n", act_expr(a, c)));
            }
        }
        s.push_str("}\n");
    }
    Ok(s)
}

/// Reads a small i32 tensor from the device.
fn read_i32s(ctx: &ClCtx, t: &ClTensor) -> Result<Vec<i64>, String> {
    let n = usize::try_from(t.numel()).map_err(|_| "tensor too large")?;
    let mut b = vec![0u8; n * 4];
    if n > 0 {
        let v = ClView { mem: t.mem, offset: t.offset * 4, kind: ViewKind::Buffer };
        ctx.dev.read(&v, b.len(), None, &mut b).map_err(|e| e.to_string())?;
    }
    Ok(b.chunks_exact(4).map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect())
}

fn run(ctx: &ClCtx, ins: &[Option<ClTensor>], a: &Attrs, outs: &[ClTensor], cell: Cell) -> Res {
    let op = cell.name();
    let shapes: Vec<Option<(DType, &[i64])>> =
        ins.iter().map(|t| t.as_ref().map(|t| (t.dtype, &t.shape[..]))).collect();
    let dims = rnn_dims(&shapes, a, cell)?;
    let max_outs = if cell == Cell::Lstm { 3 } else { 2 };
    if outs.is_empty() || outs.len() > max_outs {
        return Err(format!("{op}: expected 1 to {max_outs} outputs, found {}", outs.len()));
    }
    for (i, o) in outs.iter().enumerate() {
        check_out(o, dims.dtype, if i == 0 { &dims.y } else { &dims.state })?;
    }
    let get = |i: usize| ins.get(i).and_then(Option::as_ref);
    let x = input(ins, 0, "X")?;
    if let Some(s) = get(4) {
        for v in read_i32s(ctx, s)? {
            if v < 0 || v > dims.seq as i64 {
                return Err(format!("{op}: sequence_lens holds {v}, outside [0, {}] (the sequence length)", dims.seq));
            }
        }
    }
    let (t, n, d, h) = (dims.seq, dims.batch, dims.dirs, dims.hidden);
    let gh = cell.gates() * h;
    let es = if dims.dtype == DType::F64 { 8u64 } else { 4 };
    let dnh = (d * n * h) as u64;
    let sizes = [
        (d * t * n * gh) as u64 * es,
        2 * dnh * es,
        if cell == Cell::Lstm { 2 * dnh * es } else { 8 },
        if cell == Cell::Gru { 2 * dnh * es } else { 8 },
    ];
    let mut blocks: Vec<ClBlock> = Vec::new();
    let mut r = Ok(());
    for s in sizes {
        match ctx.dev.alloc(s.max(8)) {
            Ok((b, _)) => blocks.push(b),
            Err(e) => {
                r = Err(e.to_string());
                break;
            }
        }
    }
    if r.is_ok() {
        let mems: Vec<cl_mem> = blocks.iter().map(ClBlock::raw).collect();
        r = launch(ctx, ins, x, outs, &dims, &mems);
    }
    for b in blocks {
        ctx.dev.release(b);
    }
    r
}

/// The launches, given the scratch buffers `[xw, h states, c states, GRU gates]`.
fn launch(
    ctx: &ClCtx,
    ins: &[Option<ClTensor>],
    x: &ClTensor,
    outs: &[ClTensor],
    dims: &RnnDims,
    scratch: &[cl_mem],
) -> Res {
    let cell = dims.attrs.cell;
    let pre = prelude(ctx, dims)?;
    let get = |i: usize| ins.get(i).and_then(Option::as_ref);
    let has = |i: usize| get(i).is_some() as u8;
    let (tt, n, d, h) = (dims.seq as u64, dims.batch as u64, dims.dirs as u64, dims.hidden as u64);
    let sizes =
        || [l(dims.seq as i64), l(dims.batch as i64), l(dims.input as i64), l(dims.hidden as i64), l(dims.dirs as i64)];
    let size_params = "long T, long N, long I, long H, long D";
    let opt = |i: usize| get(i).unwrap_or(x).args();
    let [xw, hs, cs, zr] = match scratch {
        [a, b, c, e] => [*a, *b, *c, *e],
        _ => return Err("internal: the recurrent kernels need 4 scratch buffers".into()),
    };
    let m = KernelArg::Mem;
    let cty = calc_ty(dims.dtype);
    let lstm = cell == Cell::Lstm;

    // X·Wᵀ + Wb for every (direction, step, batch row, gate row).
    let src = format!(
        "{pre}#define HAS_B {}\n__kernel void k(__global const TP* x, ulong xo, __global const TP* w, ulong wo, \
         __global const TP* b, ulong bo, __global C* xw, {size_params}) {{\n  long id = get_global_id(0);\n  \
         long GH = G * H;\n  long k = id % GH, r = id / GH;\n  long n = r % N; r /= N;\n  long t = r % T, d = r / T;\n  \
         C acc = 0;\n  long xb = xo + X_AT(t, n), wb = wo + (d * GH + k) * I;\n  \
         for (long i = 0; i < I; i++) acc += LD(x, xb + i) * LD(w, wb + i);\n#if HAS_B\n  \
         acc += LD(b, bo + d * 2 * GH + k);\n#endif\n  xw[id] = acc;\n}}\n",
        has(3)
    );
    let mut args = Vec::new();
    args.extend(x.args());
    args.extend(opt(1));
    args.extend(opt(3));
    args.push(m(xw));
    args.extend(sizes());
    let total = d * tt * n * dims.hidden as u64 * cell.gates() as u64;
    if total > 0 {
        ctx.run(&src, &args, work(total)?)?;
    }
    let states = d * n * h;
    if states == 0 {
        return Ok(());
    }

    // The initial states, into plane 0.
    let src = format!(
        "{pre}#define HAS_H0 {}\n#define HAS_C0 {}\n#define LSTM {}\n__kernel void k(__global const TP* h0, ulong h0o, \
         __global const TP* c0, ulong c0o, __global C* hs, __global C* cs, {size_params}) {{\n  \
         long id = get_global_id(0);\n  long j = id % H, r = id / H;\n  long n = r % N, d = r / N;\n  \
         hs[id] = HAS_H0 ? LD(h0, h0o + S_AT(d, n) + j) : (C)0;\n#if LSTM\n  \
         cs[id] = HAS_C0 ? LD(c0, c0o + S_AT(d, n) + j) : (C)0;\n#endif\n}}\n",
        has(5),
        if lstm { has(6) } else { 0 },
        lstm as u8
    );
    let mut args = Vec::new();
    args.extend(opt(5));
    args.extend(if lstm { opt(6) } else { x.args() });
    args.extend([m(hs), m(cs)]);
    args.extend(sizes());
    ctx.run(&src, &args, work(states)?)?;

    // One step: the parameters and the common head (the row's length, its step's time, the
    // planes read and written, H·Rᵀ and Rb of a gate row).
    let y = outs.first();
    let head_params = format!(
        "__global const C* xw, __global const TP* r, ulong ro, __global const TP* b, ulong bo, \
         __global const int* lens, ulong lo, __global const TP* p, ulong po, __global C* hs, __global C* cs, \
         __global C* zr, __global TP* y, ulong yo, long s, {size_params}"
    );
    let head = format!(
        "#define HAS_B {}\n#define HAS_LENS {}\n#define HAS_P {}\n#define HAS_Y {}\n#define LSTM {}\n\
         #define INPUT_FORGET {}\n#define LBR {}\n",
        has(3),
        has(4),
        if lstm { has(7) } else { 0 },
        y.is_some() as u8,
        lstm as u8,
        dims.attrs.input_forget as u8,
        dims.attrs.linear_before_reset as u8
    );
    let body_head =
        "  long id = get_global_id(0);\n  long j = id % H, r_ = id / H;\n  long n = r_ % N, d = r_ / N;\n  \
         long GH = G * H, DNH = D * N * H;\n  long cur = (s & 1) * DNH, nxt = DNH - cur;\n  \
         long len = T;\n#if HAS_LENS\n  len = clamp((long)lens[lo + n], 0L, T);\n#endif\n  \
         __global const C* h = hs + cur + (d * N + n) * H;\n  long rb0 = ro + d * GH * H;\n";
    let helpers = format!(
        "C rdot(__global const TP* r, long row, __global const C* h, long H) {{\n  C acc = 0;\n  \
         for (long m = 0; m < H; m++) acc += h[m] * LD(r, row + m);\n  return acc;\n}}\n\
         C rbias(__global const TP* b, ulong bo, long d, long GH, long q) {{\n#if HAS_B\n  \
         return LD(b, bo + d * 2 * GH + GH + q);\n#else\n  return 0;\n#endif\n}}\n\
         #define GATE(q) (g[q] + rdot(r, rb0 + (q) * H, h, H) + rbias(b, bo, d, GH, q))\n\
         #define PEEP(q) (HAS_P ? LD(p, po + d * 3 * H + (q) * H + j) : ({cty})0)\n"
    );
    // A step past the row's length keeps the state and leaves Y zero.
    let padded = "  if (s >= len) {\n    hs[nxt + id] = hs[cur + id];\n#if LSTM\n    cs[nxt + id] = cs[cur + id];\n#endif\n\
         #if HAS_Y\n    ST(y, yo + Y_AT(s, d, n) + j, 0);\n#endif\n    return;\n  }\n  long t = REV(d) ? len - 1 - s : s;\n  \
         __global const C* g = xw + ((d * T + t) * N + n) * GH;\n";
    let store = "  hs[nxt + id] = hn;\n#if HAS_Y\n  ST(y, yo + Y_AT(t, d, n) + j, hn);\n#endif\n";
    let cell_body = match cell {
        Cell::Rnn => format!("{padded}  C hn = act0(d, CLIP(GATE(j)));\n{store}"),
        Cell::Lstm => format!(
            "{padded}  C c = cs[cur + id];\n  C i_ = act0(d, CLIP(GATE(j) + PEEP(0) * c));\n  \
             C f_ = INPUT_FORGET ? (C)1 - i_ : act0(d, CLIP(GATE(2 * H + j) + PEEP(2) * c));\n  \
             C cc = act1(d, CLIP(GATE(3 * H + j)));\n  C cn = f_ * c + i_ * cc;\n  \
             C o_ = act0(d, CLIP(GATE(H + j) + PEEP(1) * cn));\n  C hn = o_ * act2(d, cn);\n  \
             cs[nxt + id] = cn;\n{store}"
        ),
        Cell::Gru => format!(
            "{padded}  __global const C* zrow = zr + (d * N + n) * 2 * H;\n  C z = zrow[j];\n  C hh;\n  \
             long q = 2 * H + j;\n  if (LBR) {{\n    hh = g[q] + zrow[H + j] * (rdot(r, rb0 + q * H, h, H) + rbias(b, bo, d, GH, q));\n  \
             }} else {{\n    C acc = 0;\n    for (long m = 0; m < H; m++) acc += zrow[H + m] * h[m] * LD(r, rb0 + q * H + m);\n    \
             hh = g[q] + acc + rbias(b, bo, d, GH, q);\n  }}\n  C hn = ((C)1 - z) * act1(d, CLIP(hh)) + z * h[j];\n{store}"
        ),
    };
    let step_src = format!("{pre}{head}{helpers}__kernel void k({head_params}) {{\n{body_head}{cell_body}}}\n");
    // GRU's gates z and r first, for every unit.
    let gates_src = format!(
        "{pre}{head}{helpers}__kernel void k({head_params}) {{\n{body_head}  if (s >= len) return;\n  long t = REV(d) ? len - 1 - s : s;\n  \
         __global const C* g = xw + ((d * T + t) * N + n) * GH;\n  \
         __global C* zrow = zr + (d * N + n) * 2 * H;\n  zrow[j] = act0(d, CLIP(GATE(j)));\n  \
         zrow[H + j] = act0(d, CLIP(GATE(H + j)));\n}}\n"
    );
    let mut step_args = Vec::new();
    step_args.push(m(xw));
    step_args.extend(opt(2));
    step_args.extend(opt(3));
    step_args.extend(opt(4));
    step_args.extend(if lstm { opt(7) } else { x.args() });
    step_args.extend([m(hs), m(cs), m(zr)]);
    step_args.extend(y.unwrap_or(x).args());
    let s_at = step_args.len();
    step_args.push(l(0));
    step_args.extend(sizes());
    for s in 0..dims.seq {
        step_args[s_at] = l(s as i64);
        if cell == Cell::Gru {
            ctx.run(&gates_src, &step_args, work(states)?)?;
        }
        ctx.run(&step_src, &step_args, work(states)?)?;
    }

    // Y_h and Y_c from the last plane.
    if outs.len() > 1 {
        let yh = &outs[1];
        let yc = outs.get(2);
        let src = format!(
            "{pre}#define HAS_C {}\n__kernel void k(__global const C* hs, __global const C* cs, __global TP* yh, ulong yho, \
             __global TP* yc, ulong yco, {size_params}) {{\n  long id = get_global_id(0);\n  long j = id % H, r = id / H;\n  \
             long n = r % N, d = r / N;\n  long at = (T & 1) * D * N * H + id;\n  ST(yh, yho + S_AT(d, n) + j, hs[at]);\n\
             #if HAS_C\n  ST(yc, yco + S_AT(d, n) + j, cs[at]);\n#endif\n}}\n",
            yc.is_some() as u8
        );
        let mut args = vec![m(hs), m(cs)];
        args.extend(yh.args());
        args.extend(yc.unwrap_or(yh).args());
        args.extend(sizes());
        ctx.run(&src, &args, work(states)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ir::host_tensor::HostTensor;
    use crate::ops::cl::testing::device;
    use crate::ops::loss_cl::tests::{attrs, check, random};

    fn s(v: &str) -> AttrValue {
        AttrValue::Str(v.into())
    }

    #[test]
    fn recurrent_kernels_match_the_host() {
        let Some(dev) = device() else { return };
        let mut dtypes = vec![DType::F32, DType::F16];
        if dev.has_fp64 {
            dtypes.push(DType::F64);
        }
        for dt in dtypes {
            for (cell, op) in [(Cell::Rnn, "RNN"), (Cell::Gru, "GRU"), (Cell::Lstm, "LSTM")] {
                let g = cell.gates() as i64;
                for (case, dir) in ["forward", "reverse", "bidirectional"].iter().enumerate() {
                    let nd = if *dir == "bidirectional" { 2 } else { 1 };
                    let (t, n, i, h) = (4i64, 3i64, 5i64, 3 + case as i64);
                    let layout = (case % 2) as i64;
                    let xs = if layout == 0 { vec![t, n, i] } else { vec![n, t, i] };
                    let st = if layout == 0 { vec![nd, n, h] } else { vec![n, nd, h] };
                    let seed = case as u64 * 10;
                    let x = random(dt, &xs, seed + 1, -1.0, 1.0);
                    let w = random(dt, &[nd, g * h, i], seed + 2, -0.6, 0.6);
                    let r = random(dt, &[nd, g * h, h], seed + 3, -0.6, 0.6);
                    let b = random(dt, &[nd, 2 * g * h], seed + 4, -0.3, 0.3);
                    let lens = HostTensor::new(
                        DType::I32,
                        vec![n],
                        [4i32, 2, 0].iter().flat_map(|v| v.to_le_bytes()).collect(),
                    )
                    .unwrap();
                    let h0 = random(dt, &st, seed + 5, -0.5, 0.5);
                    let c0 = random(dt, &st, seed + 6, -0.5, 0.5);
                    let p = random(dt, &[nd, 3 * h], seed + 7, -0.5, 0.5);
                    let mut full =
                        vec![Some(x.clone()), Some(w.clone()), Some(r.clone()), Some(b), Some(lens), Some(h0)];
                    if cell == Cell::Lstm {
                        full.extend([Some(c0), Some(p)]);
                    }
                    let mut a = vec![
                        ("direction", s(dir)),
                        ("layout", AttrValue::Int(layout)),
                        ("hidden_size", AttrValue::Int(h)),
                    ];
                    let outs = if cell == Cell::Lstm { 3 } else { 2 };
                    check(&dev, op, &full, &attrs(&a), outs);
                    // No optional inputs, only Y.
                    check(&dev, op, &[Some(x.clone()), Some(w.clone()), Some(r.clone())], &attrs(&a), 1);
                    // Activations, clip and the cell's flag.
                    let acts = match cell {
                        Cell::Rnn => "Relu",
                        Cell::Gru => "HardSigmoid,Softsign",
                        Cell::Lstm => "Sigmoid,ScaledTanh,Affine",
                    };
                    let acts = if nd == 2 {
                        format!("{acts},{}", acts.replace("Relu", "Elu").replace("Softsign", "Softplus"))
                    } else {
                        acts.into()
                    };
                    a.push(("activations", s(&acts)));
                    a.push(("clip", AttrValue::Float(0.7)));
                    a.push((
                        "activation_alpha",
                        AttrValue::Floats(if cell == Cell::Rnn && nd == 2 { vec![0.5] } else { vec![] }),
                    ));
                    match cell {
                        Cell::Gru => a.push(("linear_before_reset", AttrValue::Int(1))),
                        Cell::Lstm => a.push(("input_forget", AttrValue::Int(1))),
                        Cell::Rnn => {}
                    }
                    check(&dev, op, &full, &attrs(&a), outs);
                }
            }
        }
    }
}
