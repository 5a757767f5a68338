//! OpenCL buffer kernels for the classic-ML family (see `super::cl`). They mirror the host
//! kernels in `super::ml`. Binarizer and ArrayFeatureExtractor run a work-item per output
//! element (the extractor reads its indices back to check them first); TfIdfVectorizer
//! and TreeEnsemble run a work-item per row, their n-grams and trees compiled into the
//! kernel source as constant tables.

use super::cl::{check_out, cl_type, input, long_arg as l, raw_type, ClCtx, ClFn, ClTensor, Infos, Res};
use super::loss_cl::{calc_ty, pragmas, ptr_ty, work};
use super::ml::{agg_init, max_finite};
use super::signal_cl::host_copy;
use super::{Attrs, Operator};
use crate::ir::operators::ml::*;
use crate::ir::types::DType;
use crate::opencl::device::KernelArg;
use std::fmt::Write;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[
    (Operator::TfIdfVectorizer, tfidf_vectorizer),
    (Operator::Binarizer, binarizer),
    (Operator::ArrayFeatureExtractor, array_feature_extractor),
    (Operator::TreeEnsemble, tree_ensemble),
];

/// Loads and stores of dtype `d` as `C` (float dtypes) or its own type (integers).
fn head(ctx: &ClCtx, d: DType) -> Result<String, String> {
    let mut s = pragmas(ctx, d, false)?.to_string();
    if d.is_float() {
        s.push_str(&format!("typedef {} TP;\ntypedef {} C;\n", ptr_ty(d), calc_ty(d)));
    } else {
        s.push_str(&format!("typedef {0} TP;\ntypedef {0} C;\n", cl_type(d)));
    }
    if d == DType::F16 {
        s.push_str("#define LD(p, i) vload_half((i), (p))\n#define ST(p, i, v) vstore_half((float)(v), (i), (p))\n");
    } else {
        s.push_str("#define LD(p, i) ((C)(p)[(i)])\n#define ST(p, i, v) ((p)[(i)] = (TP)(v))\n");
    }
    Ok(s)
}

/// A float literal of the compute type of `d` (exact for its dtype).
fn lit(d: DType, v: f64) -> String {
    if v.is_nan() {
        return "(C)NAN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "(C)INFINITY".into() } else { "(-(C)INFINITY)".into() };
    }
    if d == DType::F64 {
        format!("{v:e}")
    } else {
        format!("{:e}f", v as f32)
    }
}

/// A table of float values of `d`'s compute type whose non-finite entries are 0 in
/// `name` and flagged in `name`N (1 NaN, 2 +∞, 3 -∞): some compilers refuse `NAN` in a
/// constant initializer. Read an entry with `SPECIAL(name, name##N, i)`.
fn float_table(s: &mut String, d: DType, name: &str, v: &[f64]) {
    let vals: Vec<String> = v.iter().map(|&x| lit(d, if x.is_finite() { x } else { 0.0 })).collect();
    let flags: Vec<String> = v
        .iter()
        .map(|&x| {
            if x.is_nan() {
                "1"
            } else if x == f64::INFINITY {
                "2"
            } else if x == f64::NEG_INFINITY {
                "3"
            } else {
                "0"
            }
            .to_string()
        })
        .collect();
    table(s, "C", name, &vals);
    table(s, "uchar", &format!("{name}N"), &flags);
}

const SPECIAL: &str =
    "#define SPECIAL(t, f, i) (f[i] == 0 ? t[i] : f[i] == 1 ? (C)NAN : f[i] == 2 ? (C)INFINITY : -(C)INFINITY)\n";

/// A `__constant` array named `name` of element type `ty` (one dummy element if empty).
fn table(s: &mut String, ty: &str, name: &str, items: &[String]) {
    let body = if items.is_empty() { "0".to_string() } else { items.join(", ") };
    let _ = writeln!(s, "__constant {ty} {name}[{}] = {{{body}}};", items.len().max(1));
}

fn binarizer(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    let x = input(ins, 0, "X")?;
    let y = outs.first().ok_or("Binarizer: the output is missing")?;
    check_out(y, x.dtype, &x.shape)?;
    if !matches!(x.dtype, DType::F32 | DType::F16 | DType::F64 | DType::I32 | DType::I64) {
        return Err(format!("input 1 (X) must be f16, f32, f64, i32 or i64, found {}", x.dtype));
    }
    let t = a.float("threshold", 0.0);
    let h = head(ctx, x.dtype)?;
    // Integers compare as double where the device has it, else as float.
    let cmp = if x.dtype.is_float() {
        format!("LD(x, xo + id) > {}", lit(x.dtype, t))
    } else if ctx.has_fp64() {
        format!("(double)LD(x, xo + id) > {t:e}")
    } else {
        format!("(float)LD(x, xo + id) > {:e}f", t as f32)
    };
    let fp = if !x.dtype.is_float() && ctx.has_fp64() { super::elementwise_cl::FP64_PRAGMA } else { "" };
    let src = format!(
        "{fp}{h}__kernel void k(__global const TP* x, ulong xo, __global TP* y, ulong yo) {{\n  long id = get_global_id(0);\n  \
         ST(y, yo + id, ({cmp}) ? (C)1 : (C)0);\n}}\n"
    );
    let n = x.numel();
    if n == 0 {
        return Ok(());
    }
    let mut args: Vec<KernelArg> = Vec::new();
    args.extend(x.args());
    args.extend(y.args());
    ctx.run(&src, &args, work(n)?)
}

fn array_feature_extractor(ctx: &ClCtx, ins: &[Option<ClTensor>], infos: Infos, _: &Attrs, outs: &[ClTensor]) -> Res {
    let (x, yi) = (input(ins, 0, "X")?, input(ins, 1, "Y")?);
    let (_, c, k, shape) = afe_dims(&x.shape, &yi.shape)?;
    let z = outs.first().ok_or("ArrayFeatureExtractor: the output is missing")?;
    check_out(z, x.dtype, &shape)?;
    check_features(&host_copy(ctx, yi, infos.get(1).and_then(Option::as_ref))?.to_i64(), c)?;
    let ty = raw_type(x.dtype);
    let src = format!(
        "__kernel void k(__global const {ty}* x, ulong xo, __global const long* ix, ulong io, __global {ty}* z, \
         ulong zo, long C, long K) {{\n  long id = get_global_id(0);\n  long j = id % K, r = id / K;\n  \
         z[zo + id] = x[xo + r * C + ix[io + j]];\n}}\n"
    );
    let n = z.numel();
    if n == 0 {
        return Ok(());
    }
    let mut args: Vec<KernelArg> = Vec::new();
    args.extend(x.args());
    args.extend(yi.args());
    args.extend(z.args());
    args.extend([l(c as i64), l(k as i64)]);
    ctx.run(&src, &args, work(n)?)
}

fn tfidf_vectorizer(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    let p = tfidf(a)?;
    let x = input(ins, 0, "X")?;
    if !matches!(x.dtype, DType::I32 | DType::I64) {
        return Err(format!("input 1 (X) must be i32 or i64, found {}", x.dtype));
    }
    let c = x.shape.last().copied().unwrap_or(0);
    let rows = if x.shape.len() == 2 { x.shape[0] } else { 1 };
    let y = outs.first().ok_or("TfIdfVectorizer: the output is missing")?;
    let want: Vec<i64> = if x.shape.len() == 2 { vec![rows, p.size as i64] } else { vec![p.size as i64] };
    check_out(y, DType::F32, &want)?;
    // The n-grams: their lengths, starts in one item table, and output columns.
    let mut s = String::new();
    let (mut lens, mut starts, mut cols, mut items) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (g, col) in &p.grams {
        lens.push(g.len().to_string());
        starts.push(items.len().to_string());
        cols.push(col.to_string());
        items.extend(g.iter().map(|v| format!("{v}L")));
    }
    table(&mut s, "long", "GLEN", &lens);
    table(&mut s, "long", "GSTART", &starts);
    table(&mut s, "long", "GCOL", &cols);
    table(&mut s, "long", "GITEM", &items);
    let ws: Vec<String> = p.weights.as_deref().unwrap_or(&[]).iter().map(|&w| format!("{:e}f", w as f32)).collect();
    table(&mut s, "float", "WEIGHT", &ws);
    let src = format!(
        "{s}#define NG {}\n#define MINN {}\n#define MAXN {}\n#define SKIP {}\n#define MODE {}\n#define HAS_W {}\n\
         __kernel void k(__global const {xt}* x, ulong xo, __global float* y, ulong yo, long C, long O) {{\n  \
         long r = get_global_id(0);\n  __global const {xt}* row = x + xo + r * C;\n  __global float* out = y + yo + r * O;\n  \
         for (long i = 0; i < O; i++) out[i] = 0.0f;\n  \
         for (long skip = 1; skip <= SKIP + 1; skip++) {{\n    long lo = skip == 1 ? MINN : max((long)MINN, (long)2);\n    \
         if (lo > MAXN) break;\n    for (long st = 0; st < C; st++) {{\n      for (long n = lo; n <= MAXN; n++) {{\n        \
         if (st + skip * (n - 1) >= C) break;\n        for (long g = 0; g < NG; g++) {{\n          \
         if (GLEN[g] != n) continue;\n          int ok = 1;\n          \
         for (long q = 0; q < n && ok; q++) ok = GITEM[GSTART[g] + q] == (long)row[st + q * skip];\n          \
         if (ok) {{ out[GCOL[g]] += 1.0f; break; }}\n        }}\n      }}\n    }}\n  }}\n  \
         for (long i = 0; i < O; i++) {{\n    float w = HAS_W ? WEIGHT[i] : 1.0f;\n    float v = out[i];\n    \
         out[i] = MODE == 0 ? v : MODE == 1 ? (v > 0.0f ? w : 0.0f) : w * v;\n  }}\n}}\n",
        p.grams.len(),
        p.min,
        p.max,
        p.skip,
        p.mode,
        p.weights.is_some() as u8,
        xt = cl_type(x.dtype)
    );
    if rows <= 0 || p.size == 0 {
        return Ok(());
    }
    let mut args: Vec<KernelArg> = Vec::new();
    args.extend(x.args());
    args.extend(y.args());
    args.extend([l(c), l(p.size as i64)]);
    ctx.run(&src, &args, work(rows as u64)?)
}

fn tree_ensemble(ctx: &ClCtx, ins: &[Option<ClTensor>], _: Infos, a: &Attrs, outs: &[ClTensor]) -> Res {
    let t = trees(a)?;
    let x = input(ins, 0, "X")?;
    if !matches!(x.dtype, DType::F32 | DType::F16 | DType::F64) || x.shape.len() != 2 {
        return Err(format!("TreeEnsemble: X must be f16, f32 or f64 [N, F], found {}{:?}", x.dtype, x.shape));
    }
    let (n, f) = (x.shape[0], x.shape[1]);
    if t.feature.iter().any(|&v| v as i64 >= f) {
        return Err(format!("TreeEnsemble: a node reads a feature past X's {f}"));
    }
    let y = outs.first().ok_or("TreeEnsemble: the output is missing")?;
    check_out(y, x.dtype, &[n, t.targets as i64])?;
    let d = x.dtype;
    let h = head(ctx, d)?;
    let mut s = String::new();
    let list = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<String>>();
    let child = |c: &(bool, usize)| if c.0 { format!("{}", -(c.1 as i64) - 1) } else { c.1.to_string() };
    table(&mut s, "long", "FEAT", &list(&mut t.feature.iter().map(|v| v.to_string())));
    table(&mut s, "int", "MODE", &list(&mut t.mode.iter().map(|v| v.to_string())));
    s.push_str(SPECIAL);
    float_table(&mut s, d, "SPLIT", &t.split);
    table(&mut s, "long", "YES", &list(&mut t.yes.iter().map(child)));
    table(&mut s, "long", "NO", &list(&mut t.no.iter().map(child)));
    table(&mut s, "int", "NANT", &list(&mut t.nan_true.iter().map(|&v| (v as u8).to_string())));
    table(&mut s, "long", "MLO", &list(&mut t.members.iter().map(|m| m.0.to_string())));
    table(&mut s, "long", "MHI", &list(&mut t.members.iter().map(|m| m.1.to_string())));
    float_table(&mut s, d, "MEMB", &t.member_values);
    table(&mut s, "long", "LTARGET", &list(&mut t.leaf_target.iter().map(|v| v.to_string())));
    float_table(&mut s, d, "LWEIGHT", &t.leaf_weight);
    table(&mut s, "long", "ROOT", &list(&mut t.roots.iter().map(child)));
    let src = format!(
        "{h}{s}#define NNODES {}\n#define NROOTS {}\n#define AGG {}\n\
         __kernel void k(__global const TP* x, ulong xo, __global TP* y, ulong yo, long F, long T) {{\n  \
         long r = get_global_id(0);\n  for (long i = 0; i < T; i++) ST(y, yo + r * T + i, {});\n  \
         for (long q = 0; q < NROOTS; q++) {{\n    long c = ROOT[q];\n    \
         for (long steps = 0; c >= 0 && steps <= NNODES; steps++) {{\n      C v = LD(x, xo + r * F + FEAT[c]);\n      \
         C s = SPECIAL(SPLIT, SPLITN, c);\n      int m = MODE[c], go;\n      if (isnan(v) && NANT[c]) go = 1;\n      \
         else if (m == 0) go = v <= s;\n      else if (m == 1) go = v < s;\n      else if (m == 2) go = v >= s;\n      \
         else if (m == 3) go = v > s;\n      else if (m == 4) go = v == s;\n      else if (m == 5) go = v != s;\n      \
         else {{ go = 0; for (long k2 = MLO[c]; k2 < MHI[c]; k2++) if (SPECIAL(MEMB, MEMBN, k2) == v) go = 1; }}\n      \
         c = go ? YES[c] : NO[c];\n    }}\n    if (c >= 0) continue;\n    long lf = -c - 1;\n    \
         ulong o = yo + r * T + LTARGET[lf];\n    C w = SPECIAL(LWEIGHT, LWEIGHTN, lf), cur = LD(y, o);\n    \
         C nv = AGG == 0 ? cur + w / (C)NROOTS : AGG == 1 ? cur + w : AGG == 2 ? fmin(cur, w) : fmax(cur, w);\n    \
         ST(y, o, nv);\n  }}\n}}\n",
        t.feature.len(),
        t.roots.len(),
        t.aggregate,
        lit(d, agg_init(t.aggregate, max_finite(d)))
    );
    if n <= 0 {
        return Ok(());
    }
    let mut args: Vec<KernelArg> = Vec::new();
    args.extend(x.args());
    args.extend(y.args());
    args.extend([l(f), l(t.targets as i64)]);
    ctx.run(&src, &args, work(n as u64)?)
}

#[cfg(test)]
mod tests {
    use crate::ir::attrs::AttrValue;
    use crate::ir::host_tensor::HostTensor;
    use crate::ir::types::DType;
    use crate::ops::cl::testing::device;
    use crate::ops::loss_cl::tests::{attrs, check, rand, random, tensor};

    fn ints(v: &[i64]) -> AttrValue {
        AttrValue::Ints(v.to_vec())
    }

    #[test]
    fn ml_kernels_match_the_host() {
        let Some(dev) = device() else { return };
        let mut dtypes = vec![DType::F32, DType::F16];
        if dev.has_fp64 {
            dtypes.push(DType::F64);
        }
        for d in dtypes.iter().copied().chain([DType::I32, DType::I64]) {
            let x = random(d, &[3, 4, 5], 1, -3.0, 3.0);
            check(&dev, "Binarizer", &[Some(x.clone())], &attrs(&[("threshold", AttrValue::Float(0.5))]), 1);
            let idx = HostTensor::new(DType::I64, vec![3], [4i64, 0, 4].iter().flat_map(|v| v.to_le_bytes()).collect())
                .unwrap();
            check(&dev, "ArrayFeatureExtractor", &[Some(x), Some(idx)], &attrs(&[]), 1);
        }
        for d in [DType::I32, DType::I64] {
            let xv: Vec<f64> = rand(2, 40, 0.0, 4.0).iter().map(|v| v.floor()).collect();
            let x = tensor(d, &[4, 10], &xv);
            for (mode, w) in [("TF", false), ("IDF", true), ("TFIDF", true), ("IDF", false)] {
                let mut a = vec![
                    ("mode", AttrValue::Str(mode.into())),
                    ("min_gram_length", AttrValue::Int(1)),
                    ("max_gram_length", AttrValue::Int(3)),
                    ("max_skip_count", AttrValue::Int(2)),
                    ("ngram_counts", ints(&[0, 3, 7])),
                    ("ngram_indexes", ints(&[0, 1, 2, 3, 4, 5, 6])),
                    ("pool_int64s", ints(&[0, 1, 3, 0, 1, 2, 2, 1, 1, 0])),
                ];
                if w {
                    a.push(("weights", AttrValue::Floats(vec![0.5, 1.0, 2.0, 3.0, 0.25, 1.5, 4.0])));
                }
                check(&dev, "TfIdfVectorizer", &[Some(x.clone())], &attrs(&a), 1);
            }
        }
        for d in dtypes {
            let mut xv = rand(3, 30, -2.0, 2.0);
            xv[4] = f64::NAN;
            xv[7] = 1.0;
            let x = tensor(d, &[10, 3], &xv);
            for agg in 0..4 {
                let a = attrs(&[
                    ("n_targets", AttrValue::Int(3)),
                    ("aggregate_function", AttrValue::Int(agg)),
                    ("nodes_featureids", ints(&[0, 1, 2])),
                    ("nodes_modes", ints(&[0, 6, 3])),
                    ("nodes_splits", AttrValue::Floats(vec![0.25, 0.0, -0.5])),
                    ("nodes_truenodeids", ints(&[1, 0, 1])),
                    ("nodes_trueleafs", ints(&[0, 1, 1])),
                    ("nodes_falsenodeids", ints(&[2, 2, 3])),
                    ("nodes_falseleafs", ints(&[0, 0, 1])),
                    ("nodes_missing_value_tracks_true", ints(&[0, 1, 0])),
                    ("membership_values", AttrValue::Floats(vec![1.0, 2.0, f64::NAN])),
                    ("leaf_targetids", ints(&[0, 1, 2, 1])),
                    ("leaf_weights", AttrValue::Floats(vec![1.5, -2.0, 3.25, 0.5])),
                    ("tree_roots", ints(&[0, 2])),
                ]);
                check(&dev, "TreeEnsemble", &[Some(x.clone())], &a, 1);
            }
        }
    }
}
