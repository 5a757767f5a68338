//! OpenCL buffer kernels for the linear-algebra family (see `super::cl`), mirroring the
//! host kernels in `super::linalg`. Einsum generates one kernel per equation and shapes
//! (the label sizes and strides baked in): a work-item per output element loops over the
//! summed labels. Det runs a work-item per matrix, doing LU with partial pivoting in a
//! scratch copy.

use super::bitwise_cl::{check_out, input, output, wide, Infos, Res};
use super::cl::Scratch;
use super::cl::{cl_type, need_fp64, ClCtx, ClFn, ClTensor};
use super::{Attrs, Operator, TensorInfo};
use crate::ir::operators::linalg::{det_dims, einsum_plan};
use crate::ir::types::DType;
use crate::opencl::device::KernelArg;
use std::fmt::Write;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[(Operator::Einsum, einsum), (Operator::Det, det)];

fn load(d: DType, p: &str, idx: &str) -> String {
    if d == DType::F16 {
        format!("vload_half({idx}, {p})")
    } else {
        format!("{p}[{idx}]")
    }
}

fn store(d: DType, v: &str) -> String {
    if d == DType::F16 {
        format!("vstore_half_rte({v}, yo + i, y);")
    } else {
        format!("y[yo + i] = ({}){v};", cl_type(d))
    }
}

fn einsum(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let list: Vec<&ClTensor> = (0..ins.len()).map(|i| input(ins, i, "Inputs")).collect::<Result<_, _>>()?;
    let infos: Vec<Option<TensorInfo>> =
        list.iter().map(|t| Some(TensorInfo { dtype: t.dtype, shape: &t.shape, value: None })).collect();
    let (d, plan) = einsum_plan(&infos, attrs)?;
    need_fp64(ctx, d)?;
    let y = output(outs, 0)?;
    check_out(y, d, &plan.out_shape())?;
    let total = y.numel();
    if total == 0 {
        return Ok(());
    }
    let shapes: Vec<&[i64]> = list.iter().map(|t| &t.shape[..]).collect();
    let strides = plan.strides(&shapes);
    let summed = plan.summed();
    let sum_total: usize = summed.iter().map(|&l| plan.sizes[l]).product();
    let (w, pragma) = if d.is_float() {
        let (w, p) = wide(ctx);
        (w, p)
    } else {
        ("ulong", "")
    };
    let t = cl_type(d);
    let mut src = format!("{pragma}#pragma OPENCL FP_CONTRACT OFF\n__kernel void k(");
    for j in 0..list.len() {
        let _ = write!(src, "__global const {t}* a{j}, ulong o{j}, ");
    }
    let _ = write!(
        src,
        "__global {t}* y, ulong yo) {{\n  ulong i = get_global_id(0);\n  if (i >= {total}UL) return;\n  ulong t = i;\n"
    );
    for j in 0..list.len() {
        let _ = writeln!(src, "  ulong b{j} = o{j};");
    }
    // The output index over the output labels, then the summed labels in a loop.
    let decompose = |src: &mut String, labels: &[usize], var: &str, base: &str| {
        for &l in labels.iter().rev() {
            let _ = write!(src, "    {{ ulong c = {var} % {s}UL; {var} /= {s}UL;", s = plan.sizes[l].max(1));
            for (j, st) in strides.iter().enumerate() {
                if st[l] != 0 {
                    let _ = write!(src, " {base}{j} += c * {}UL;", st[l]);
                }
            }
            src.push_str(" }\n");
        }
    };
    decompose(&mut src, &plan.output, "t", "b");
    let _ = writeln!(src, "  {w} acc = 0;\n  for (ulong s = 0; s < {sum_total}UL; s++) {{\n    ulong u = s;");
    for j in 0..list.len() {
        let _ = writeln!(src, "    ulong p{j} = b{j};");
    }
    decompose(&mut src, &summed, "u", "p");
    let factors: Vec<String> = (0..list.len())
        .map(|j| {
            let v = load(d, &format!("a{j}"), &format!("p{j}"));
            if d.is_float() {
                format!("({w}){v}")
            } else {
                format!("(ulong)(long){v}")
            }
        })
        .collect();
    let _ = write!(src, "    acc += {};\n  }}\n  {}\n}}\n", factors.join(" * "), store(d, "acc"));
    let mut args: Vec<KernelArg> = list.iter().flat_map(|t| t.args()).collect();
    args.extend(y.args());
    ctx.run(&src, &args, total as usize)
}

fn det(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "X")?;
    let infos = [Some(TensorInfo { dtype: x.dtype, shape: &x.shape, value: None })];
    let (d, batch, m) = det_dims(&infos)?;
    need_fp64(ctx, d)?;
    let y = output(outs, 0)?;
    check_out(y, d, &batch)?;
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let (w, pragma) = wide(ctx);
    let mm = m * m;
    let scratch = Scratch::new(ctx, n * mm as u64 * if w == "double" { 8 } else { 4 })?;
    let src = format!(
        "{pragma}#pragma OPENCL FP_CONTRACT OFF\n__kernel void k(__global const {t}* x, ulong xo, __global {w}* s, \
         __global {t}* y, ulong yo) {{\n  ulong i = get_global_id(0);\n  if (i >= {n}UL) return;\n  \
         __global {w}* a = s + i * {mm}UL;\n  \
         for (ulong e = 0; e < {mm}UL; e++) a[e] = ({w}){ld};\n  {w} det = 1;\n  \
         for (ulong c = 0; c < {m}UL; c++) {{\n    ulong p = c;\n    {w} best = fabs(a[c * {m}UL + c]);\n    \
         for (ulong r = c + 1; r < {m}UL; r++) if (fabs(a[r * {m}UL + c]) > best) {{ best = fabs(a[r * {m}UL + c]); p = r; }}\n    \
         if (best == 0) {{ det = 0; break; }}\n    \
         if (p != c) {{ for (ulong k = 0; k < {m}UL; k++) {{ {w} q = a[c * {m}UL + k]; a[c * {m}UL + k] = a[p * {m}UL + k]; a[p * {m}UL + k] = q; }} det = -det; }}\n    \
         {w} piv = a[c * {m}UL + c];\n    det *= piv;\n    \
         for (ulong r = c + 1; r < {m}UL; r++) {{ {w} f = a[r * {m}UL + c] / piv;\n      \
         for (ulong k = c + 1; k < {m}UL; k++) a[r * {m}UL + k] -= f * a[c * {m}UL + k]; }}\n  }}\n  {st}\n}}\n",
        t = cl_type(d),
        ld = load(d, "x", &format!("xo + i * {mm}UL + e")),
        st = store(d, "det"),
    );
    let [xm, xo] = x.args();
    let [ym, yo] = y.args();
    ctx.run(&src, &[xm, xo, scratch.arg(), ym, yo], n as usize)
}

/// Each kernel against the host kernel on the device named by `RXVM_TEST_CL_DEVICE`
/// (default: the first); skipped when no OpenCL runtime is usable.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ops::bitwise_cl::tests::{bits, check_tol, values};
    use crate::ops::cl::testing::device;

    #[test]
    fn kernels_match_the_host() {
        let Some(dev) = device() else { return };
        use DType::*;
        let eq = |e: &str| Attrs(vec![("equation".into(), AttrValue::Str(e.into()))]);
        let tol = if dev.has_fp64 { 1e-12 } else { 1e-5 };
        let mut floats = vec![(F32, tol), (F16, 1e-3)];
        if dev.has_fp64 {
            floats.push((F64, 1e-12));
        }
        for (d, tol) in floats {
            let v = |shape: &[i64], seed| Some(values(d, shape, seed, -2.0, 2.0));
            let cases: Vec<(&str, Vec<Option<crate::ir::host_tensor::HostTensor>>)> = vec![
                ("ij->ji", vec![v(&[3, 4], 1)]),
                ("ij->i", vec![v(&[3, 4], 2)]),
                ("...ii->...i", vec![v(&[3, 5, 5], 3)]),
                ("i,i", vec![v(&[5], 4), v(&[5], 5)]),
                ("bij, bjk -> bik", vec![v(&[5, 2, 3], 6), v(&[5, 3, 4], 7)]),
                ("->", vec![v(&[], 8)]),
                ("ii", vec![v(&[4, 4], 9)]),
                ("...j,...j->...", vec![v(&[2, 1, 3], 10), v(&[4, 3], 11)]),
                ("ab,bc,cd", vec![v(&[2, 3], 12), v(&[3, 4], 13), v(&[4, 2], 14)]),
                ("iij->ji", vec![v(&[3, 3, 2], 15)]),
            ];
            for (e, ins) in cases {
                check_tol(&dev, "Einsum", &ins, &eq(e), tol);
            }
            for shape in [&[2, 2][..], &[3, 3, 3], &[2, 5, 5], &[1, 1], &[4, 0, 0]] {
                check_tol(&dev, "Det", &[v(shape, 16)], &Attrs::default(), if d == F16 { 1e-2 } else { 1e-5 });
            }
        }
        for d in [I8, U8, I32, I64, U64] {
            check_tol(&dev, "Einsum", &[Some(bits(d, &[3, 4], 1)), Some(bits(d, &[4, 2], 2))], &eq("ij,jk->ik"), 0.0);
            check_tol(&dev, "Einsum", &[Some(bits(d, &[3, 3], 3))], &eq("ii->i"), 0.0);
        }
    }

    #[test]
    fn missing_inputs_are_errors() {
        let Some(dev) = device() else { return };
        let ctx = ClCtx { dev: &dev };
        for (name, f) in CL {
            let a = Attrs(vec![("equation".into(), AttrValue::Str("i".into()))]);
            let e = f(&ctx, &[], &[], &a, &[]).unwrap_err();
            assert!(e.contains("required"), "{}: {e}", name.name());
        }
    }
}
