//! Operators: elementwise family — activations, broadcasting arithmetic, the variadic
//! Max/Min/Sum, Dropout and Identity, Softmax/LogSoftmax, ReduceMean/ReduceSum and the
//! normalizations (BatchNormalization, InstanceNormalization, LRN). The schemas
//! (attributes, shape inference) are in `crate::ir::operators::elementwise`; the host
//! kernels and their `HOST` table are here.
//!
//! Shape inference checks dtypes, ranks and shapes. Every host kernel first re-runs the
//! attribute validation and the shape inference on its actual inputs and checks that every
//! tensor's data matches its shape ([`prepare`]), so the kernels only index tensors whose
//! sizes are known to be right.
//!
//! Operators whose semantics changed between ONNX opsets take an optional `onnx_opset`
//! attribute (the importer passes the model's opset); without it the newest semantics apply.

use super::host::{self, first, req, HostFn};
use super::num::{floating, numeric, Arith};
use super::{Attrs, InferFn, OutInfo, TensorInfo};
use crate::ir::host_tensor::{load_f64, numel, store_f64, HostTensor};
use crate::ir::operators::elementwise::*;
use crate::ir::operators::shape::{broadcast, broadcast_strides};
use crate::ir::operators::Operator;
use crate::ir::types::DType;
use std::borrow::Cow;
use std::mem::size_of;

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[
    (Operator::Clip, clip),
    (Operator::LeakyRelu, leaky_relu),
    (Operator::Sigmoid, sigmoid),
    (Operator::Tanh, tanh),
    (Operator::Exp, exp),
    (Operator::Sqrt, sqrt),
    (Operator::Pow, pow),
    (Operator::Neg, neg),
    (Operator::Abs, abs),
    (Operator::Elu, elu),
    (Operator::Selu, selu),
    (Operator::Softplus, softplus),
    (Operator::Softsign, softsign),
    (Operator::PRelu, prelu),
    (Operator::Add, add),
    (Operator::Sub, sub),
    (Operator::Mul, mul),
    (Operator::Div, div),
    (Operator::Max, max),
    (Operator::Min, min),
    (Operator::Sum, sum),
    (Operator::Dropout, dropout),
    (Operator::Identity, identity),
    (Operator::Softmax, softmax),
    (Operator::LogSoftmax, log_softmax),
    (Operator::ReduceMean, reduce_mean),
    (Operator::ReduceSum, reduce_sum),
    (Operator::ReduceMax, reduce_max),
    (Operator::ReduceMin, reduce_min),
    (Operator::ReduceProd, reduce_prod),
    (Operator::ReduceL1, reduce_l1),
    (Operator::ReduceL2, reduce_l2),
    (Operator::ReduceLogSum, reduce_log_sum),
    (Operator::ReduceLogSumExp, reduce_log_sum_exp),
    (Operator::ReduceSumSquare, reduce_sum_square),
    (Operator::BatchNormalization, batch_norm),
    (Operator::InstanceNormalization, instance_norm),
    (Operator::LayerNormalization, layer_norm),
    (Operator::ArgMax, arg_max),
    (Operator::ArgMin, arg_min),
    (Operator::LRN, lrn),
];

// ---------------------------------------------------------------------------------------
// Shared helpers.

pub(super) type Validate = fn(&Attrs) -> Result<(), String>;

fn view_mut<T: Elem>(data: &mut [u8]) -> Option<&mut [T]> {
    if cfg!(target_endian = "big") {
        return None;
    }
    // SAFETY: as in `view`; every value written is valid as bytes.
    let (head, mid, tail) = unsafe { data.align_to_mut::<T>() };
    (head.is_empty() && tail.is_empty()).then_some(mid)
}

/// Writes `v` into `out`.
fn store<T: Elem>(out: &mut HostTensor, v: &[T]) {
    if let Some(o) = view_mut::<T>(&mut out.data) {
        let n = o.len().min(v.len());
        o[..n].copy_from_slice(&v[..n]);
        return;
    }
    for (c, x) in out.data.chunks_exact_mut(size_of::<T>()).zip(v) {
        x.write(c);
    }
}

/// Runs `f` on the elements of `out` (in place when aligned; their prior values are
/// unspecified: `f` must write every element).
fn with_out<T: Elem + Default>(out: &mut HostTensor, f: impl FnOnce(&mut [T])) {
    if let Some(o) = view_mut::<T>(&mut out.data) {
        return f(o);
    }
    let mut v = vec![T::default(); out.data.len() / size_of::<T>()];
    f(&mut v);
    store(out, &v);
}

/// `out = f(x)` elementwise.
fn map<T: Elem>(x: &HostTensor, out: &mut HostTensor, f: impl Fn(T) -> T) {
    if let (Some(xs), Some(o)) = (view::<T>(&x.data), view_mut::<T>(&mut out.data)) {
        o.iter_mut().zip(xs).for_each(|(o, &v)| *o = f(v));
        return;
    }
    let n = size_of::<T>();
    for (o, i) in out.data.chunks_exact_mut(n).zip(x.data.chunks_exact(n)) {
        f(T::read(i)).write(o);
    }
}

fn infos<'a>(ins: &[Option<&'a HostTensor>]) -> Vec<Option<TensorInfo<'a>>> {
    ins.iter().map(|t| t.map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) })).collect()
}

/// The prologue of every kernel: validates the attributes, then [`host::prepare`].
fn prepare(
    ins: &[Option<&HostTensor>],
    attrs: &Attrs,
    outs: &[HostTensor],
    validate: Validate,
    infer: InferFn,
) -> Result<Vec<OutInfo>, String> {
    validate(attrs)?;
    host::prepare(ins, attrs, outs, infer)
}

fn unsupported(d: DType) -> String {
    format!("unsupported dtype {d}")
}

pub(super) fn no_checks(_: &Attrs) -> Result<(), String> {
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Broadcasting.

/// `f(a, b)` for every element of the numpy broadcast of `a` (shape `ash`) and `b` (shape
/// `bsh`) to `out`, in row-major order. `a` and `b` must hold their shapes' elements and
/// `out` must be their broadcast. Dimensions are coalesced so the inner loop runs over the
/// longest contiguous (or repeated) stretch.
fn broadcast_map<A: Copy, B: Copy, T: Copy + Default>(
    a: &[A],
    ash: &[i64],
    b: &[B],
    bsh: &[i64],
    out: &[i64],
    f: impl Fn(A, B) -> T,
) -> Vec<T> {
    let n = numel(out).map_or(0, |n| n as usize);
    let mut y = vec![T::default(); n];
    broadcast_into(a, ash, b, bsh, out, f, &mut y);
    y
}

/// [`broadcast_map`] into `y` (as many elements as `out` has).
fn broadcast_into<A: Copy, B: Copy, T>(
    a: &[A],
    ash: &[i64],
    b: &[B],
    bsh: &[i64],
    out: &[i64],
    f: impl Fn(A, B) -> T,
    y: &mut [T],
) {
    let n = match numel(out) {
        Some(n) if n > 0 => (n as usize).min(y.len()),
        _ => return,
    };
    let y = &mut y[..n];
    if a.len() == n && b.len() == n {
        y.iter_mut().zip(a.iter().zip(b)).for_each(|(o, (&x, &z))| *o = f(x, z));
        return;
    }
    if a.len() == n && b.len() == 1 {
        let z = b[0];
        y.iter_mut().zip(a).for_each(|(o, &x)| *o = f(x, z));
        return;
    }
    if a.len() == 1 && b.len() == n {
        let x = a[0];
        y.iter_mut().zip(b).for_each(|(o, &z)| *o = f(x, z));
        return;
    }
    let (sa, sb) = (broadcast_strides(ash, out), broadcast_strides(bsh, out));
    // Coalesce: drop unit dimensions, merge a dimension into the previous one when both
    // operands step through them as one.
    let (mut dims, mut ta, mut tb) = (Vec::new(), Vec::new(), Vec::<usize>::new());
    for i in 0..out.len() {
        let d = out[i].max(0) as usize;
        if d == 1 {
            continue;
        }
        if let (Some(ld), Some(la), Some(lb)) = (dims.last_mut(), ta.last_mut(), tb.last_mut()) {
            if *la == sa[i] * d && *lb == sb[i] * d {
                *ld *= d;
                *la = sa[i];
                *lb = sb[i];
                continue;
            }
        }
        dims.push(d);
        ta.push(sa[i]);
        tb.push(sb[i]);
    }
    let (Some(&inner), Some(&ia), Some(&ib)) = (dims.last(), ta.last(), tb.last()) else {
        // Only unit dimensions: one element (handled above, kept for completeness).
        y.iter_mut().zip(a.iter().zip(b)).for_each(|(o, (&x, &z))| *o = f(x, z));
        return;
    };
    let k = dims.len() - 1;
    let mut idx = vec![0usize; k];
    let (mut oa, mut ob) = (0usize, 0usize);
    for row in y.chunks_exact_mut(inner) {
        match (ia, ib) {
            (1, 1) => row
                .iter_mut()
                .zip(a[oa..oa + inner].iter().zip(&b[ob..ob + inner]))
                .for_each(|(o, (&x, &z))| *o = f(x, z)),
            (1, 0) => {
                let z = b[ob];
                row.iter_mut().zip(&a[oa..oa + inner]).for_each(|(o, &x)| *o = f(x, z));
            }
            (0, 1) => {
                let x = a[oa];
                row.iter_mut().zip(&b[ob..ob + inner]).for_each(|(o, &z)| *o = f(x, z));
            }
            _ => row.iter_mut().enumerate().for_each(|(j, o)| *o = f(a[oa + j * ia], b[ob + j * ib])),
        }
        for d in (0..k).rev() {
            idx[d] += 1;
            oa += ta[d];
            ob += tb[d];
            if idx[d] < dims[d] {
                break;
            }
            oa -= ta[d] * dims[d];
            ob -= tb[d] * dims[d];
            idx[d] = 0;
        }
    }
}

/// `out = f(a, b)` with broadcasting, for inputs checked by [`prepare`].
fn bin<T: Elem + Default>(
    a: &HostTensor,
    b: &HostTensor,
    attrs: &Attrs,
    out: &mut HostTensor,
    f: impl Fn(T, T) -> T,
) -> Result<(), String> {
    let bsh = legacy_b_shape(&a.shape, &b.shape, attrs)?;
    let (av, bv, shape) = (values::<T>(a), values::<T>(b), out.shape.clone());
    with_out(out, |y| broadcast_into(&av, &a.shape, &bv, &bsh, &shape, f, y));
    Ok(())
}

/// Validates and prepares a binary arithmetic call: returns its two inputs.
fn arith_inputs<'a>(
    ins: &[Option<&'a HostTensor>],
    attrs: &Attrs,
    outs: &[HostTensor],
    validate: Validate,
    infer: InferFn,
) -> Result<(&'a HostTensor, &'a HostTensor), String> {
    prepare(ins, attrs, outs, validate, infer)?;
    Ok((req(ins, 0)?, req(ins, 1)?))
}

fn pow(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    let (a, b) = arith_inputs(ins, attrs, outs, validate_pow, infer_pow)?;
    let out = first(outs)?;
    if a.dtype == DType::F32 && b.dtype == DType::F32 {
        return bin::<f32>(a, b, attrs, out, f32::powf);
    }
    // The exponent may be of another dtype (ONNX's T1): computed in f64, rounded to A's type.
    let e: Vec<f64> = numeric!(b.dtype, U => values::<U>(b).iter().map(|&v| v.to_f64()).collect());
    let bsh = legacy_b_shape(&a.shape, &b.shape, attrs)?;
    numeric!(a.dtype, T => {
        let (av, shape) = (values::<T>(a), out.shape.clone());
        let f = |x: T, y: f64| T::from_f64(x.to_f64().powf(y));
        with_out(out, |o: &mut [T]| broadcast_into(&av, &a.shape, &e, &bsh, &shape, f, o));
        Ok(())
    })
}

/// Add, Sub, Mul or Div on any numeric dtype.
fn arith(
    ins: &[Option<&HostTensor>],
    attrs: &Attrs,
    outs: &mut [HostTensor],
    validate: Validate,
    op: char,
) -> Result<(), String> {
    let (a, b) = arith_inputs(ins, attrs, outs, validate, infer_arith)?;
    let out = first(outs)?;
    numeric!(a.dtype, T => {
        // Every element of B is used when the output is not empty.
        if op == '/' && !a.dtype.is_float() && out.numel() > 0 && values::<T>(b).iter().any(|v| v.is_zero()) {
            return Err("integer division by zero (input 2 has a zero element)".into());
        }
        let g: fn(T, T) -> T = match op {
            '+' => <T as Arith>::add,
            '-' => <T as Arith>::sub,
            '*' => <T as Arith>::mul,
            _ => <T as Arith>::div,
        };
        bin(a, b, attrs, out, g)
    })
}

fn add(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    arith(ins, attrs, outs, validate_add, '+')
}

fn sub(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    arith(ins, attrs, outs, validate_sub, '-')
}

fn mul(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    arith(ins, attrs, outs, validate_mul, '*')
}

fn div(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    arith(ins, attrs, outs, validate_div, '/')
}

/// A unary float operator, `out = $body` for each element `$v`: the body is compiled for
/// f32 and f64; f16 computes in f32.
macro_rules! unary_float {
    ($ins:expr, $attrs:expr, $outs:expr, |$v:ident| $body:expr) => {{
        prepare($ins, $attrs, $outs, no_checks, infer_float)?;
        let (x, out) = (req($ins, 0)?, first($outs)?);
        match x.dtype {
            DType::F64 => map(x, out, |$v: f64| $body),
            DType::F16 => map(x, out, |h: half::f16| {
                let $v = h.to_f32();
                half::f16::from_f32($body)
            }),
            _ => map(x, out, |$v: f32| $body),
        }
        Ok(())
    }};
}

/// A unary f32 operator: `out = f(x)`.
pub(super) fn unary_f32(
    ins: &[Option<&HostTensor>],
    attrs: &Attrs,
    outs: &mut [HostTensor],
    validate: Validate,
    f: impl Fn(f32) -> f32,
) -> Result<(), String> {
    prepare(ins, attrs, outs, validate, infer_f32)?;
    let x = req(ins, 0)?;
    if x.dtype == DType::BF16 {
        // Computed in f32 and rounded once.
        map::<half::bf16>(x, first(outs)?, |v| half::bf16::from_f32(f(v.to_f32())));
    } else if x.dtype == DType::F16 {
        map::<half::f16>(x, first(outs)?, |v| half::f16::from_f32(f(v.to_f32())));
    } else {
        map::<f32>(x, first(outs)?, f);
    }
    Ok(())
}

/// A unary map of the activation family: `f` on f32 (f16 and bf16 compute in f32, as
/// [`unary_f32`]), `g` on f64.
pub(super) fn unary_f32_f64(
    ins: &[Option<&HostTensor>],
    attrs: &Attrs,
    outs: &mut [HostTensor],
    validate: Validate,
    f: impl Fn(f32) -> f32,
    g: impl Fn(f64) -> f64,
) -> Result<(), String> {
    if ins.first().copied().flatten().is_some_and(|x| x.dtype == DType::F64) {
        prepare(ins, attrs, outs, validate, infer_f32_f64)?;
        map::<f64>(req(ins, 0)?, first(outs)?, g);
        return Ok(());
    }
    unary_f32(ins, attrs, outs, validate, f)
}

fn clip(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, validate_clip, infer_clip)?;
    let x = req(ins, 0)?;
    numeric!(x.dtype, T => {
        let bound = |i: usize, name: &str| -> Option<T> {
            match ins.get(i).copied().flatten() {
                Some(t) => values::<T>(t).first().copied(),
                None => attrs.get(name).map(|_| T::from_f64(attrs.float(name, 0.0))),
            }
        };
        let (lo, hi) = (bound(1, "min"), bound(2, "max"));
        // max(v, lo) then min(., hi), keeping NaN; lo > hi gives hi, as numpy.clip.
        map(x, first(outs)?, |v: T| {
            let v = match lo {
                Some(l) if v < l => l,
                _ => v,
            };
            match hi {
                Some(h) if v > h => h,
                _ => v,
            }
        });
    });
    Ok(())
}

fn leaky_relu(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    let alpha = attrs.float("alpha", 0.01) as f32;
    let a64 = alpha as f64;
    unary_f32_f64(
        ins,
        attrs,
        outs,
        validate_leaky_relu,
        |v| if v > 0.0 { v } else { v * alpha },
        |v| if v > 0.0 { v } else { v * a64 },
    )
}

fn sigmoid(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    unary_float!(ins, attrs, outs, |v| {
        if v >= 0.0 {
            1.0 / (1.0 + (-v).exp())
        } else {
            let e = v.exp();
            e / (1.0 + e)
        }
    })
}

fn tanh(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    unary_float!(ins, attrs, outs, |v| v.tanh())
}

fn exp(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    unary_float!(ins, attrs, outs, |v| v.exp())
}

fn sqrt(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    unary_float!(ins, attrs, outs, |v| v.sqrt())
}

fn elu(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    let alpha = attrs.float("alpha", 1.0) as f32;
    let a64 = alpha as f64;
    unary_f32_f64(
        ins,
        attrs,
        outs,
        validate_elu,
        |v| if v > 0.0 { v } else { alpha * v.exp_m1() },
        |v| if v > 0.0 { v } else { a64 * v.exp_m1() },
    )
}

fn selu(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    // The ONNX defaults 1.67326319217681884765625 and 1.05070102214813232421875 are these
    // f32 values exactly.
    let alpha = attrs.float("alpha", 1.673_263_2_f32 as f64) as f32;
    let gamma = attrs.float("gamma", 1.050_701_f32 as f64) as f32;
    let (a64, g64) = (alpha as f64, gamma as f64);
    unary_f32_f64(
        ins,
        attrs,
        outs,
        validate_selu,
        |v| if v > 0.0 { gamma * v } else { gamma * (alpha * v.exp() - alpha) },
        |v| if v > 0.0 { g64 * v } else { g64 * (a64 * v.exp() - a64) },
    )
}

fn softplus(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    // ln(1 + e^x) = max(x, 0) + ln(1 + e^-|x|): no overflow for large x.
    unary_float!(ins, attrs, outs, |v| v.max(0.0) + (-v.abs()).exp().ln_1p())
}

fn softsign(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    unary_float!(ins, attrs, outs, |v| v / (1.0 + v.abs()))
}

fn neg(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, no_checks, infer_signed)?;
    let (x, out) = (req(ins, 0)?, first(outs)?);
    numeric!(x.dtype, T => map(x, out, <T as Arith>::neg));
    Ok(())
}

fn abs(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, no_checks, infer_abs)?;
    let (x, out) = (req(ins, 0)?, first(outs)?);
    numeric!(x.dtype, T => map(x, out, <T as Arith>::abs));
    Ok(())
}

fn prelu(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, validate_prelu, infer_prelu)?;
    let (x, s) = (req(ins, 0)?, req(ins, 1)?);
    let ssh = prelu_slope_shape(&x.shape, &s.shape, attrs)?;
    let out = first(outs)?;
    let y =
        broadcast_map(
            &values::<f32>(x),
            &x.shape,
            &values::<f32>(s),
            &ssh,
            &x.shape,
            |v, a| {
                if v > 0.0 {
                    v
                } else {
                    v * a
                }
            },
        );
    store(out, &y);
    Ok(())
}

/// Folds the inputs with `f`, broadcasting as it goes.
fn fold<T: Elem + Default>(
    ins: &[Option<&HostTensor>],
    out: &mut HostTensor,
    f: impl Fn(T, T) -> T,
) -> Result<(), String> {
    let mut it = ins.iter().flatten();
    let Some(x) = it.next() else { return Err("input 1 is required".into()) };
    if ins.iter().flatten().all(|t| t.shape == out.shape) {
        // No broadcasting: fold straight into the output, input by input.
        let rest: Vec<Cow<[T]>> = it.map(|t| values::<T>(t)).collect();
        let xv = values::<T>(x);
        with_out(out, |y| {
            y.copy_from_slice(&xv[..y.len()]);
            for r in &rest {
                y.iter_mut().zip(r.iter()).for_each(|(o, &v)| *o = f(*o, v));
            }
        });
        return Ok(());
    }
    let (mut acc, mut shape) = (values::<T>(x).into_owned(), x.shape.clone());
    for t in it {
        let s = broadcast(&shape, &t.shape)?;
        acc = broadcast_map(&acc, &shape, &values::<T>(t), &t.shape, &s, &f);
        shape = s;
    }
    store(out, &acc);
    Ok(())
}

fn variadic(ins: &[Option<&HostTensor>], outs: &mut [HostTensor], op: Operator) -> Result<(), String> {
    prepare(ins, &Attrs::default(), outs, no_checks, infer_variadic)?;
    let out = first(outs)?;
    numeric!(req(ins, 0)?.dtype, T => {
        let f: fn(T, T) -> T = match op {
            Operator::Max => T::max_nan,
            Operator::Min => T::min_nan,
            _ => <T as Arith>::add,
        };
        fold(ins, out, f)
    })
}

fn max(ins: &[Option<&HostTensor>], _: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    variadic(ins, outs, Operator::Max)
}

fn min(ins: &[Option<&HostTensor>], _: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    variadic(ins, outs, Operator::Min)
}

fn sum(ins: &[Option<&HostTensor>], _: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    variadic(ins, outs, Operator::Sum)
}

fn dropout(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, validate_dropout, infer_dropout)?;
    let x = req(ins, 0)?;
    let training = ins.get(2).copied().flatten().is_some_and(|t| t.data.iter().any(|&b| b != 0));
    let ratio = dropout_ratio(ins.get(1).copied().flatten(), attrs);
    if !training || ratio == 0.0 {
        first(outs)?.data.copy_from_slice(&x.data);
        if let Some(mask) = outs.get_mut(1) {
            mask.data.fill(1);
        }
        return Ok(());
    }
    let scale = dropout_scale(ins.get(1).copied().flatten(), attrs);
    let mut rng = Mt19937::new(dropout_seed(attrs));
    let size = x.dtype.size();
    let mut keep = vec![false; x.data.len() / size.max(1)];
    for (i, (c, k)) in first(outs)?.data.chunks_exact_mut(size).zip(keep.iter_mut()).enumerate() {
        *k = rng.next_f64() >= ratio;
        // numpy's mask * x * scale: a dropped element is 0 * x (-0 for negative x, NaN for
        // NaN or inf).
        let v = load_f64(x.dtype, &x.data[i * size..][..size]);
        store_f64(x.dtype, (if *k { 1.0 } else { 0.0 }) * v * scale, c);
    }
    if let Some(mask) = outs.get_mut(1) {
        mask.data.iter_mut().zip(&keep).for_each(|(m, &k)| *m = k as u8);
    }
    Ok(())
}

/// Dropout's ratio: the input, else the attribute (opset < 12), else 0.5.
pub(super) fn dropout_ratio(r: Option<&HostTensor>, attrs: &Attrs) -> f64 {
    match r {
        Some(r) => r.to_f64().first().copied().unwrap_or(0.5),
        None => attrs.float("ratio", 0.5),
    }
}

/// Dropout's 1 / (1 - ratio), in the ratio's dtype as numpy computes it (f32 for the
/// attribute).
pub(super) fn dropout_scale(r: Option<&HostTensor>, attrs: &Attrs) -> f64 {
    let d = r.map_or(DType::F32, |r| r.dtype);
    let rd = |v: f64| crate::ops::num::round_to(d, v);
    rd(1.0 / rd(1.0 - rd(dropout_ratio(r, attrs))))
}

/// Dropout's seed: the attribute (as numpy takes it, modulo 2^32), else a random one.
pub(super) fn dropout_seed(attrs: &Attrs) -> u32 {
    match attrs.get("seed") {
        Some(_) => attrs.int("seed", 0) as u32,
        None => {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64),
            );
            h.finish() as u32
        }
    }
}

/// numpy's legacy `RandomState(seed)`: MT19937 seeded by `init_genrand`, doubles from two
/// 32-bit draws (53 bits), as `random_sample` / `uniform(0, 1)`.
pub(crate) struct Mt19937 {
    mt: [u32; 624],
    pos: usize,
}

impl Mt19937 {
    pub(crate) fn new(seed: u32) -> Mt19937 {
        let mut mt = [0u32; 624];
        mt[0] = seed;
        for i in 1..624 {
            mt[i] = 1_812_433_253u32.wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_add(i as u32);
        }
        Mt19937 { mt, pos: 624 }
    }

    fn twist(&mut self) {
        for i in 0..624 {
            let y = (self.mt[i] & 0x8000_0000) | (self.mt[(i + 1) % 624] & 0x7fff_ffff);
            let mut v = self.mt[(i + 397) % 624] ^ (y >> 1);
            if y & 1 != 0 {
                v ^= 0x9908_b0df;
            }
            self.mt[i] = v;
        }
        self.pos = 0;
    }

    pub(crate) fn next_u32(&mut self) -> u32 {
        if self.pos >= 624 {
            self.twist();
        }
        let mut y = self.mt[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    pub(crate) fn next_f64(&mut self) -> f64 {
        let (a, b) = (self.next_u32() >> 5, self.next_u32() >> 6);
        (a as f64 * 67_108_864.0 + b as f64) / 9_007_199_254_740_992.0
    }
}

fn identity(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, no_checks, infer_any)?;
    first(outs)?.data.copy_from_slice(&req(ins, 0)?.data);
    Ok(())
}

/// Softmax (or its log) of the `n` elements at stride `inner` in each block; sums in f64.
fn softmax_kernel(x: &[f32], y: &mut [f32], n: usize, inner: usize, log: bool) {
    if n == 0 || inner == 0 {
        return;
    }
    if inner == 1 {
        for (xr, yr) in x.chunks_exact(n).zip(y.chunks_exact_mut(n)) {
            let m = xr.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            let mut s = 0f64;
            if log {
                for &v in xr {
                    s += ((v - m).exp()) as f64;
                }
                let ls = s.ln();
                for (o, &v) in yr.iter_mut().zip(xr) {
                    *o = ((v - m) as f64 - ls) as f32;
                }
            } else {
                for (o, &v) in yr.iter_mut().zip(xr) {
                    let e = (v - m).exp();
                    *o = e;
                    s += e as f64;
                }
                for o in yr.iter_mut() {
                    *o = (*o as f64 / s) as f32;
                }
            }
        }
        return;
    }
    let mut m = vec![0f32; inner];
    let mut s = vec![0f64; inner];
    for (xb, yb) in x.chunks_exact(n * inner).zip(y.chunks_exact_mut(n * inner)) {
        m.fill(f32::NEG_INFINITY);
        for row in xb.chunks_exact(inner) {
            for (mm, &v) in m.iter_mut().zip(row) {
                *mm = mm.max(v);
            }
        }
        s.fill(0.0);
        for (xr, yr) in xb.chunks_exact(inner).zip(yb.chunks_exact_mut(inner)) {
            for (((o, &v), &mm), ss) in yr.iter_mut().zip(xr).zip(&m).zip(s.iter_mut()) {
                let e = (v - mm).exp();
                *ss += e as f64;
                if !log {
                    *o = e;
                }
            }
        }
        if log {
            for v in s.iter_mut() {
                *v = v.ln();
            }
            for (xr, yr) in xb.chunks_exact(inner).zip(yb.chunks_exact_mut(inner)) {
                for (((o, &v), &mm), &ls) in yr.iter_mut().zip(xr).zip(&m).zip(&s) {
                    *o = ((v - mm) as f64 - ls) as f32;
                }
            }
        } else {
            for yr in yb.chunks_exact_mut(inner) {
                for (o, &ss) in yr.iter_mut().zip(&s) {
                    *o = (*o as f64 / ss) as f32;
                }
            }
        }
    }
}

fn softmax_host(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor], log: bool) -> Result<(), String> {
    prepare(ins, attrs, outs, if log { validate_log_softmax } else { validate_softmax }, infer_softmax)?;
    let x = req(ins, 0)?;
    if x.numel() == 0 {
        return Ok(());
    }
    let (_, n, inner) = softmax_dims(&x.shape, attrs)?;
    match x.dtype {
        DType::F64 => {
            let xv = values::<f64>(x);
            let mut y = vec![0f64; xv.len()];
            softmax_f64(&xv, &mut y, n, inner, log);
            store(first(outs)?, &y);
        }
        DType::F16 => {
            let xv: Vec<f32> = values::<half::f16>(x).iter().map(|v| v.to_f32()).collect();
            let mut y = vec![0f32; xv.len()];
            softmax_narrow(&xv, &mut y, n, inner, log, |v| half::f16::from_f32(v).to_f32());
            store(first(outs)?, &y.iter().map(|&v| half::f16::from_f32(v)).collect::<Vec<_>>());
        }
        DType::BF16 => {
            let xv: Vec<f32> = values::<half::bf16>(x).iter().map(|v| v.to_f32()).collect();
            let mut y = vec![0f32; xv.len()];
            softmax_narrow(&xv, &mut y, n, inner, log, |v| half::bf16::from_f32(v).to_f32());
            store(first(outs)?, &y.iter().map(|&v| half::bf16::from_f32(v)).collect::<Vec<_>>());
        }
        _ => {
            let xv = values::<f32>(x);
            let mut y = vec![0f32; xv.len()];
            softmax_kernel(&xv, &mut y, n, inner, log);
            store(first(outs)?, &y);
        }
    }
    Ok(())
}

/// Softmax of f16 or bf16 values (given as f32) the way the ONNX reference computes it
/// on such arrays: every step (`x - max`, `exp`, the sum, the quotient, LogSoftmax's
/// `log`) computed in f32 and rounded to the dtype by `r`. (Rounding only the result
/// differs from the reference by an ulp here and there, which a following MatMul can
/// amplify past the tolerance.)
fn softmax_narrow(x: &[f32], y: &mut [f32], n: usize, inner: usize, log: bool, r: impl Fn(f32) -> f32) {
    if n == 0 || inner == 0 {
        return;
    }
    for (xb, yb) in x.chunks_exact(n * inner).zip(y.chunks_exact_mut(n * inner)) {
        for i in 0..inner {
            let m = (0..n).fold(f32::NEG_INFINITY, |m, j| m.max(xb[j * inner + i]));
            let mut s = 0f32;
            for j in 0..n {
                let e = r(r(xb[j * inner + i] - m).exp());
                yb[j * inner + i] = e;
                s += e;
            }
            let s = r(s);
            for j in 0..n {
                let v = r(yb[j * inner + i] / s);
                yb[j * inner + i] = if log { r(v.ln()) } else { v };
            }
        }
    }
}

/// [`softmax_kernel`] in f64 (plain loops).
fn softmax_f64(x: &[f64], y: &mut [f64], n: usize, inner: usize, log: bool) {
    if n == 0 || inner == 0 {
        return;
    }
    for (xb, yb) in x.chunks_exact(n * inner).zip(y.chunks_exact_mut(n * inner)) {
        for i in 0..inner {
            let m = (0..n).fold(f64::NEG_INFINITY, |m, j| m.max(xb[j * inner + i]));
            let s: f64 = (0..n).map(|j| (xb[j * inner + i] - m).exp()).sum();
            for j in 0..n {
                let v = xb[j * inner + i] - m;
                yb[j * inner + i] = if log { v - s.ln() } else { v.exp() / s };
            }
        }
    }
}

fn softmax(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    softmax_host(ins, attrs, outs, false)
}

fn log_softmax(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    softmax_host(ins, attrs, outs, true)
}

/// Adds every element of `x` (shape `shape`; nothing when it is empty) into `acc`, the row-major tensor of
/// the kept dimensions. Adjacent dimensions of the same kind are merged, and the innermost
/// run is either summed into one accumulator or added elementwise to a row of `acc`.
fn reduce_into<T: Copy, A: Copy>(x: &[T], shape: &[i64], red: &[bool], acc: &mut [A], add: impl Fn(A, T) -> A) {
    // A reduction of nothing leaves every output at the fold's start.
    if x.is_empty() {
        return;
    }
    let mut groups: Vec<(usize, bool)> = Vec::new();
    for (&d, &r) in shape.iter().zip(red) {
        let d = d.max(0) as usize;
        if d == 1 {
            continue;
        }
        match groups.last_mut() {
            Some((s, k)) if *k == r => *s *= d,
            _ => groups.push((d, r)),
        }
    }
    let Some((&(inner, inner_red), outer)) = groups.split_last() else {
        if let (Some(a), Some(&v)) = (acc.first_mut(), x.first()) {
            *a = add(*a, v);
        }
        return;
    };
    let mut ostr = vec![0usize; outer.len()];
    let mut s = if inner_red { 1 } else { inner };
    for (i, &(d, r)) in outer.iter().enumerate().rev() {
        if !r {
            ostr[i] = s;
            s *= d;
        }
    }
    let mut idx = vec![0usize; outer.len()];
    let mut ob = 0usize;
    for run in x.chunks_exact(inner) {
        if inner_red {
            if let Some(a) = acc.get_mut(ob) {
                *a = run.iter().fold(*a, |a, &v| add(a, v));
            }
        } else if let Some(dst) = acc.get_mut(ob..ob + inner) {
            for (a, &v) in dst.iter_mut().zip(run) {
                *a = add(*a, v);
            }
        }
        for i in (0..outer.len()).rev() {
            idx[i] += 1;
            ob += ostr[i];
            if idx[i] < outer[i].0 {
                break;
            }
            ob -= ostr[i] * outer[i].0;
            idx[i] = 0;
        }
    }
}

/// The f64 fold of reduction `r` (every one but LogSumExp, which [`log_sum_exp_fold`]
/// does): its start and step. Max and Min propagate NaN, as numpy does.
fn float_fold(r: Reduction) -> Fold<f64> {
    match r {
        Reduction::Mean | Reduction::Sum | Reduction::LogSum | Reduction::LogSumExp => (0.0, |a, v| a + v),
        Reduction::Max => (f64::NEG_INFINITY, |a, v| if a.is_nan() || v.is_nan() { f64::NAN } else { a.max(v) }),
        Reduction::Min => (f64::INFINITY, |a, v| if a.is_nan() || v.is_nan() { f64::NAN } else { a.min(v) }),
        Reduction::Prod => (1.0, |a, v| a * v),
        Reduction::L1 => (0.0, |a, v| a + v.abs()),
        Reduction::L2 | Reduction::SumSquare => (0.0, |a, v| a + v * v),
    }
}

/// LogSumExp in one pass, stably: the running maximum `m` and the sum `s` of `exp(v - m)`,
/// rescaled when the maximum grows. Infinities and NaN are kept apart so that no
/// `inf - inf` is taken.
fn log_sum_exp_fold((m, s): (f64, f64), v: f64) -> (f64, f64) {
    if m.is_nan() || v.is_nan() {
        (f64::NAN, f64::NAN)
    } else if v == f64::NEG_INFINITY {
        (m, s)
    } else if m == f64::INFINITY || v == f64::INFINITY {
        (f64::INFINITY, 1.0)
    } else if v > m {
        (v, s * (m - v).exp() + 1.0)
    } else {
        (m, s + (v - m).exp())
    }
}

/// A fold's start and step.
type Fold<T> = (T, fn(T, T) -> T);

/// The integer fold of reduction `r` in wrapping i64 arithmetic; `min`/`max` are the
/// element type's bounds (the Max and Min of nothing).
fn int_fold(r: Reduction, min: i64, max: i64) -> Result<Fold<i64>, String> {
    Ok(match r {
        Reduction::Sum => (0, i64::wrapping_add),
        Reduction::Max => (min, i64::max),
        Reduction::Min => (max, i64::min),
        Reduction::Prod => (1, i64::wrapping_mul),
        Reduction::L1 => (0, |a, v| a.wrapping_add(v.wrapping_abs())),
        Reduction::SumSquare => (0, |a, v| a.wrapping_add(v.wrapping_mul(v))),
        other => return Err(format!("{other:?} computes in f32 only")),
    })
}

fn reduce_host(
    ins: &[Option<&HostTensor>],
    attrs: &Attrs,
    outs: &mut [HostTensor],
    op: Operator,
) -> Result<(), String> {
    let def = op.id().def();
    prepare(ins, attrs, outs, def.validate, def.infer)?;
    let r = reduction(op).ok_or_else(|| format!("{} is not a reduction", op.name()))?;
    let x = req(ins, 0)?;
    let out = first(outs)?;
    let Some(red) = reduce_axes(&infos(ins), attrs, x.shape.len())? else {
        out.data.copy_from_slice(&x.data);
        return Ok(());
    };
    let count: usize = x.shape.iter().zip(&red).filter(|(_, &r)| r).map(|(&d, _)| d.max(0) as usize).product();
    let kept = out.numel() as usize;
    if x.dtype.is_float() {
        floating!(x.dtype, T => {
            let xs = values::<T>(x);
            let acc: Vec<f64> = if r == Reduction::LogSumExp {
                let mut acc = vec![(f64::NEG_INFINITY, 0.0); kept];
                reduce_into(&xs, &x.shape, &red, &mut acc, |a, v| log_sum_exp_fold(a, v.to_f64()));
                acc.iter().map(|&(m, s)| if m == f64::INFINITY || m.is_nan() { m } else { m + s.ln() }).collect()
            } else {
                let (start, step) = float_fold(r);
                let mut acc = vec![start; kept];
                reduce_into(&xs, &x.shape, &red, &mut acc, |a, v| step(a, v.to_f64()));
                acc
            };
            let y: Vec<T> = acc
                .iter()
                .map(|&a| {
                    T::from_f64(match r {
                        // The mean of nothing is NaN (0 / 0).
                        Reduction::Mean => a / count as f64,
                        Reduction::L2 => a.sqrt(),
                        Reduction::LogSum => a.ln(),
                        _ => a,
                    })
                })
                .collect();
            store(out, &y);
        });
        return Ok(());
    }
    if x.dtype == DType::Bool {
        // Max is any, Min is all (of nothing: false and true, as numpy's bool bounds).
        let (start, step) = int_fold(r, 0, 1)?;
        let mut acc = vec![start; kept];
        reduce_into(&x.data, &x.shape, &red, &mut acc, |a, v: u8| step(a, (v != 0) as i64));
        out.data.iter_mut().zip(&acc).for_each(|(o, &a)| *o = (a != 0) as u8);
        return Ok(());
    }
    numeric!(x.dtype, T => {
        let (lo, hi) = (T::from_f64(f64::NEG_INFINITY).to_i64(), T::from_f64(f64::INFINITY).to_i64());
        let (start, step) = int_fold(r, lo, hi)?;
        let mut acc = vec![start; kept];
        reduce_into(&values::<T>(x), &x.shape, &red, &mut acc, |a, v| step(a, v.to_i64()));
        store(out, &acc.iter().map(|&a| T::from_i64(a)).collect::<Vec<T>>());
    });
    Ok(())
}

/// The Reduce operators' host kernels.
macro_rules! reduce_kernels {
    ($($name:ident $op:ident),*) => {$(
        fn $name(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
            reduce_host(ins, attrs, outs, Operator::$op)
        }
    )*};
}

reduce_kernels!(reduce_mean ReduceMean, reduce_sum ReduceSum, reduce_max ReduceMax, reduce_min ReduceMin,
    reduce_prod ReduceProd, reduce_l1 ReduceL1, reduce_l2 ReduceL2, reduce_log_sum ReduceLogSum,
    reduce_log_sum_exp ReduceLogSumExp, reduce_sum_square ReduceSumSquare);

fn batch_norm(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, validate_batch_norm, infer_batch_norm)?;
    let x = req(ins, 0)?;
    if x.numel() == 0 {
        return Ok(());
    }
    let eps = attrs.float("epsilon", 1e-5);
    let inner = if attrs.int("spatial", 1) == 0 { 1 } else { prod(x.shape.get(2..).unwrap_or(&[])) };
    let p: Vec<Cow<[f32]>> = (1..5).map(|i| req(ins, i).map(values::<f32>)).collect::<Result<_, _>>()?;
    let [scale, bias, mean, var] = &p[..] else { return Err("BatchNormalization takes 5 inputs".into()) };
    if a_training(attrs) {
        return batch_norm_training(&values::<f32>(x), [scale, bias, mean, var], inner, attrs, outs);
    }
    // (mean, scale / sqrt(var + eps), bias) per channel.
    let coef: Vec<(f32, f32, f32)> =
        (0..scale.len()).map(|c| (mean[c], (scale[c] as f64 / (var[c] as f64 + eps).sqrt()) as f32, bias[c])).collect();
    let xv = values::<f32>(x);
    with_out(first(outs)?, |y: &mut [f32]| {
        for ((xs, ys), &(m, a, b)) in xv.chunks_exact(inner).zip(y.chunks_exact_mut(inner)).zip(coef.iter().cycle()) {
            for (o, &v) in ys.iter_mut().zip(xs) {
                *o = (v - m) * a + b;
            }
        }
    });
    Ok(())
}

/// BatchNormalization with training_mode 1, as the ONNX reference computes it in f32: the
/// batch's per-channel mean and population variance (summed in f64 here),
/// `y = scale * (x - mean) / sqrt(var + epsilon) + B`, and outputs 2 to 5: the running
/// mean and var (`mean * momentum + batch mean * (1 - momentum)`), the batch mean and var.
fn batch_norm_training(
    x: &[f32],
    [scale, bias, mean, var]: [&[f32]; 4],
    inner: usize,
    attrs: &Attrs,
    outs: &mut [HostTensor],
) -> Result<(), String> {
    let params = scale.len();
    let (eps, mom) = (attrs.float("epsilon", 1e-5) as f32, attrs.float("momentum", 0.9));
    let (mut sum, mut cnt) = (vec![0f64; params], vec![0f64; params]);
    let channel = |i: usize| (i / inner.max(1)) % params.max(1);
    for (i, &v) in x.iter().enumerate() {
        sum[channel(i)] += v as f64;
        cnt[channel(i)] += 1.0;
    }
    let bm: Vec<f64> = sum.iter().zip(&cnt).map(|(s, c)| s / c).collect();
    let mut sq = vec![0f64; params];
    for (i, &v) in x.iter().enumerate() {
        sq[channel(i)] += (v as f64 - bm[channel(i)]).powi(2);
    }
    let bm: Vec<f32> = bm.iter().map(|&v| v as f32).collect();
    let bv: Vec<f32> = sq.iter().zip(&cnt).map(|(s, c)| (s / c) as f32).collect();
    with_out(first(outs)?, |y: &mut [f32]| {
        for (i, (o, &v)) in y.iter_mut().zip(x).enumerate() {
            let c = channel(i);
            *o = scale[c] * (v - bm[c]) / (bv[c] + eps).sqrt() + bias[c];
        }
    });
    let (m1, m2) = (mom as f32, (1.0 - mom) as f32);
    let running = |p: &[f32], b: &[f32]| -> Vec<f32> { p.iter().zip(b).map(|(&p, &b)| p * m1 + b * m2).collect() };
    let extra = [running(mean, &bm), running(var, &bv), bm, bv];
    for (o, v) in outs.iter_mut().skip(1).zip(extra) {
        store(o, &v);
    }
    Ok(())
}

fn instance_norm(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, validate_instance_norm, infer_instance_norm)?;
    let x = req(ins, 0)?;
    if x.numel() == 0 {
        return Ok(());
    }
    let eps = attrs.float("epsilon", 1e-5);
    let inner = prod(&x.shape[2..]);
    let (scale, bias) = (values::<f32>(req(ins, 1)?), values::<f32>(req(ins, 2)?));
    let xv = values::<f32>(x);
    let mut y = vec![0f32; xv.len()];
    let count = inner as f64;
    for ((xs, ys), (&s, &b)) in
        xv.chunks_exact(inner).zip(y.chunks_exact_mut(inner)).zip(scale.iter().zip(bias.iter()).cycle())
    {
        let mean = xs.iter().map(|&v| v as f64).sum::<f64>() / count;
        let var = xs.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / count;
        let a = s as f64 / (var + eps).sqrt();
        for (o, &v) in ys.iter_mut().zip(xs) {
            *o = ((v as f64 - mean) * a + b as f64) as f32;
        }
    }
    store(first(outs)?, &y);
    Ok(())
}

/// Along the axis of each (outer, inner) position, the index of the element `better`
/// prefers (the first of equals, or the last with `last`).
fn arg_index<T: Copy>(
    x: &[T],
    (outer, n, inner): (usize, usize, usize),
    last: bool,
    better: impl Fn(T, T) -> bool,
) -> Vec<i64> {
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| x[(o * n + k) * inner + i];
            let mut best = 0;
            for k in 1..n {
                if better(at(k), at(best)) || (last && !better(at(best), at(k))) {
                    best = k;
                }
            }
            out.push(best as i64);
        }
    }
    out
}

fn arg_reduce(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor], max: bool) -> Result<(), String> {
    let def = (if max { Operator::ArgMax } else { Operator::ArgMin }).id().def();
    prepare(ins, attrs, outs, def.validate, def.infer)?;
    let x = req(ins, 0)?;
    let (split, _) = arg_split(&x.shape, attrs)?;
    let last = attrs.int("select_last_index", 0) != 0;
    if x.numel() == 0 {
        return Ok(());
    }
    // NaN is preferred to any number (numpy's argmax and argmin stop at the first NaN).
    let idx = match x.dtype {
        DType::F32 => arg_index(&values::<f32>(x), split, last, |a: f32, b: f32| {
            (a.is_nan() && !b.is_nan()) || if max { a > b } else { a < b }
        }),
        DType::I32 => arg_index(&values::<i32>(x), split, last, |a, b| if max { a > b } else { a < b }),
        DType::I64 => arg_index(&values::<i64>(x), split, last, |a, b| if max { a > b } else { a < b }),
        d => return Err(unsupported(d)),
    };
    store(first(outs)?, &idx);
    Ok(())
}

fn arg_max(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    arg_reduce(ins, attrs, outs, true)
}

fn arg_min(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    arg_reduce(ins, attrs, outs, false)
}

/// `t`'s f32 elements broadcast to `shape` (numpy's rules; the caller checked they apply).
fn expand_f32(t: &HostTensor, shape: &[i64]) -> Vec<f32> {
    let v = values::<f32>(t);
    let strides = broadcast_strides(&t.shape, shape);
    let n = prod(shape);
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        out.push(v[idx.iter().zip(&strides).map(|(i, s)| i * s).sum::<usize>()]);
        for k in (0..shape.len()).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] as usize {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

fn layer_norm(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, validate_layer_norm, infer_layer_norm)?;
    let x = req(ins, 0)?;
    let (axis, _) = layer_norm_split(&x.shape, attrs)?;
    let normalized = &x.shape[axis..];
    let inner = prod(normalized);
    if x.numel() == 0 || inner == 0 {
        return Ok(());
    }
    let eps = attrs.float("epsilon", 1e-5);
    let scale = expand_f32(req(ins, 1)?, normalized);
    let bias = match ins.get(2).copied().flatten() {
        Some(b) => expand_f32(b, normalized),
        None => vec![0.0; inner],
    };
    let xv = values::<f32>(x);
    let rows = xv.len() / inner;
    let (mut y, mut means, mut inv) = (vec![0f32; xv.len()], vec![0f32; rows], vec![0f32; rows]);
    for (r, (xs, ys)) in xv.chunks_exact(inner).zip(y.chunks_exact_mut(inner)).enumerate() {
        let mean = xs.iter().map(|&v| v as f64).sum::<f64>() / inner as f64;
        let var = xs.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / inner as f64;
        let k = 1.0 / (var + eps).sqrt();
        for (j, (o, &v)) in ys.iter_mut().zip(xs).enumerate() {
            *o = ((v as f64 - mean) * k * scale[j] as f64 + bias[j] as f64) as f32;
        }
        (means[r], inv[r]) = (mean as f32, k as f32);
    }
    for (i, out) in outs.iter_mut().enumerate() {
        store(out, [&y, &means, &inv][i]);
    }
    Ok(())
}

fn lrn(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, validate_lrn, infer_lrn)?;
    let x = req(ins, 0)?;
    if x.numel() == 0 {
        return Ok(());
    }
    let (alpha, beta, bias) = (attrs.float("alpha", 1e-4), attrs.float("beta", 0.75), attrs.float("bias", 1.0));
    let size = attrs.int("size", 1).max(1) as u64;
    let k = alpha / size as f64;
    // The window of channel c is [c - floor((size-1)/2), c + ceil((size-1)/2)].
    let before = ((size - 1) / 2) as usize;
    let after = (size - 1) as usize - before;
    let c = x.shape[1] as usize;
    let inner = prod(&x.shape[2..]);
    let xv = values::<f32>(x);
    let mut y = vec![0f32; xv.len()];
    let mut acc = vec![0f64; inner];
    for (xb, yb) in xv.chunks_exact(c * inner).zip(y.chunks_exact_mut(c * inner)) {
        for (ch, (xr, yr)) in xb.chunks_exact(inner).zip(yb.chunks_exact_mut(inner)).enumerate() {
            acc.fill(0.0);
            let (lo, hi) = (ch.saturating_sub(before), ch.saturating_add(after).min(c - 1));
            for row in xb.chunks_exact(inner).skip(lo).take(hi + 1 - lo) {
                for (a, &v) in acc.iter_mut().zip(row) {
                    *a += v as f64 * v as f64;
                }
            }
            for ((o, &v), &a) in yr.iter_mut().zip(xr).zip(&acc) {
                *o = (v as f64 / (bias + k * a).powf(beta)) as f32;
            }
        }
    }
    store(first(outs)?, &y);
    Ok(())
}

pub fn relu(ins: &[Option<&HostTensor>], attrs: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    let x = super::host::need(ins, 0, "Relu")?;
    if x.dtype == DType::F64 {
        return unary_f32_f64(ins, attrs, out, no_checks, |v| v.max(0.0), |v| v.max(0.0));
    }
    if matches!(x.dtype, DType::F16 | DType::BF16) {
        // Computed in f32 and rounded, as the other f32 maps.
        return unary_f32(ins, attrs, out, no_checks, |v| v.max(0.0));
    }
    if let (DType::F32, Some(o)) = (x.dtype, out.first_mut()) {
        if let (Some(xs), Some(ys)) = (super::host::f32_slice(&x.data), super::host::f32_slice_mut(&mut o.data)) {
            ys.iter_mut().zip(xs).for_each(|(o, &v)| *o = v.max(0.0));
            return Ok(());
        }
    }
    super::host::unary(ins, out, "Relu", |v| v.max(0.0))
}

#[cfg(test)]
#[allow(clippy::approx_constant, clippy::excessive_precision)]
mod tests {
    use super::*;
    use crate::ops::{AttrValue, OpDef};

    fn def(name: &str) -> &'static OpDef {
        OPS.iter().find(|o| o.name == name).unwrap_or_else(|| panic!("no operator {name}"))
    }

    fn t(shape: &[i64], v: &[f32]) -> HostTensor {
        HostTensor::from_f32(shape, v).unwrap()
    }

    fn ti32(shape: &[i64], v: &[i32]) -> HostTensor {
        HostTensor::new(DType::I32, shape.to_vec(), v.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap()
    }

    fn ti64(shape: &[i64], v: &[i64]) -> HostTensor {
        HostTensor::new(DType::I64, shape.to_vec(), v.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap()
    }

    fn tbool(shape: &[i64], v: &[bool]) -> HostTensor {
        HostTensor::new(DType::Bool, shape.to_vec(), v.iter().map(|&b| b as u8).collect()).unwrap()
    }

    fn attrs(list: &[(&str, AttrValue)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    fn int(v: i64) -> AttrValue {
        AttrValue::Int(v)
    }

    fn float(v: f64) -> AttrValue {
        AttrValue::Float(v)
    }

    /// Runs an operator the way the interpreter does: attribute check, inference with the
    /// input values known, zeroed outputs, host kernel.
    fn run(name: &str, ins: &[Option<&HostTensor>], a: &Attrs) -> Result<Vec<HostTensor>, String> {
        let d = def(name);
        d.check_attrs(a)?;
        assert!((d.min_inputs..=d.max_inputs).contains(&ins.len()), "{name}: {} inputs", ins.len());
        let inferred = (d.infer)(&infos(ins), a)?;
        let mut outs: Vec<HostTensor> = inferred.iter().map(|(dt, s)| HostTensor::zeros(*dt, s).unwrap()).collect();
        (d.op.id().host_kernel().unwrap())(ins, a, &mut outs)?;
        Ok(outs)
    }

    /// The first output for inputs that are all present.
    fn run1(name: &str, ins: &[&HostTensor], a: &Attrs) -> HostTensor {
        let ins: Vec<Option<&HostTensor>> = ins.iter().map(|&t| Some(t)).collect();
        run(name, &ins, a).unwrap_or_else(|e| panic!("{name}: {e}")).remove(0)
    }

    fn err(name: &str, ins: &[Option<&HostTensor>], a: &Attrs) -> String {
        match run(name, ins, a) {
            Ok(_) => panic!("{name} succeeded; expected an error"),
            Err(e) => e,
        }
    }

    fn assert_close(got: &HostTensor, shape: &[i64], want: &[f32]) {
        assert_eq!(got.dtype, DType::F32);
        assert_eq!(got.shape, shape);
        let g = values::<f32>(got);
        assert_eq!(g.len(), want.len());
        for (i, (&x, &w)) in g.iter().zip(want).enumerate() {
            let ok = (x.is_nan() && w.is_nan()) || x == w || (x - w).abs() <= 1e-6 + 2e-6 * w.abs();
            assert!(ok, "element {i}: got {x}, want {w}\n got {g:?}\nwant {want:?}");
        }
    }

    const X8: [f32; 8] = [-3.0, -1.5, -0.5, 0.0, 0.25, 1.0, 2.5, 10.0];

    #[test]
    fn unary_activations_match_the_onnx_reference() {
        let x = t(&[2, 4], &X8);
        let none = Attrs::default();
        #[rustfmt::skip]
        let cases: &[(&str, Attrs, [f32; 8])] = &[
            ("Sigmoid", none.clone(), [0.047425874, 0.18242553, 0.37754068, 0.5, 0.5621765, 0.7310586, 0.9241418, 0.9999546]),
            ("Tanh", none.clone(), [-0.9950548, -0.9051482, -0.4621172, 0.0, 0.24491866, 0.7615942, 0.9866143, 1.0]),
            ("Exp", none.clone(), [0.049787067, 0.22313015, 0.60653067, 1.0, 1.2840255, 2.718282, 12.182493, 22026.467]),
            ("Softplus", none.clone(), [0.048587352, 0.20141329, 0.474077, 0.6931472, 0.8259394, 1.3132617, 2.5788898, 10.000046]),
            ("Softsign", none.clone(), [-0.75, -0.6, -0.33333334, 0.0, 0.2, 0.5, 0.71428573, 0.90909094]),
            ("Neg", none.clone(), [3.0, 1.5, 0.5, -0.0, -0.25, -1.0, -2.5, -10.0]),
            ("Abs", none.clone(), [3.0, 1.5, 0.5, 0.0, 0.25, 1.0, 2.5, 10.0]),
            ("Elu", attrs(&[("alpha", float(2.0))]), [-1.9004258, -1.5537397, -0.78693867, 0.0, 0.25, 1.0, 2.5, 10.0]),
            ("Elu", none.clone(), [-0.9502129, -0.77686983, -0.39346933, 0.0, 0.25, 1.0, 2.5, 10.0]),
            ("Selu", none.clone(), [-1.6705687, -1.3658143, -0.6917582, 0.0, 0.26267526, 1.050701, 2.6267526, 10.50701]),
            ("LeakyRelu", none.clone(), [-0.03, -0.015, -0.005, 0.0, 0.25, 1.0, 2.5, 10.0]),
            ("LeakyRelu", attrs(&[("alpha", float(0.5))]), [-1.5, -0.75, -0.25, 0.0, 0.25, 1.0, 2.5, 10.0]),
            ("Clip", attrs(&[("min", float(-0.5)), ("max", float(0.5))]), [-0.5, -0.5, -0.5, 0.0, 0.25, 0.5, 0.5, 0.5]),
            ("Clip", none.clone(), X8),
            ("Identity", none.clone(), X8),
        ];
        for (name, a, want) in cases {
            assert_close(&run1(name, &[&x], a), &[2, 4], want);
        }
        // Softplus stays finite where exp overflows; Sigmoid saturates without NaN.
        let big = t(&[3], &[100.0, -100.0, f32::NAN]);
        assert_close(&run1("Softplus", &[&big], &none), &[3], &[100.0, 0.0, f32::NAN]);
        assert_close(&run1("Sigmoid", &[&big], &none), &[3], &[1.0, 0.0, f32::NAN]);
        assert_close(
            &run1("Sqrt", &[&t(&[5], &[0.0, 0.25, 2.0, 9.0, -1.0])], &none),
            &[5],
            &[0.0, 0.5, 1.4142135, 3.0, f32::NAN],
        );
    }

    fn typed<T: Elem>(d: DType, shape: &[i64], v: &[T]) -> HostTensor {
        let mut data = vec![0u8; v.len() * T::SIZE];
        for (c, x) in data.chunks_exact_mut(T::SIZE).zip(v) {
            x.write(c);
        }
        HostTensor::new(d, shape.to_vec(), data).unwrap()
    }

    #[test]
    fn arithmetic_covers_every_numeric_dtype() {
        let none = Attrs::default();
        // Narrow integers wrap as two's complement.
        let a = typed(DType::I8, &[3], &[100i8, -128, 7]);
        let b = typed(DType::I8, &[1], &[100i8]);
        assert_eq!(values::<i8>(&run1("Add", &[&a, &b], &none)).to_vec(), vec![-56, -28, 107]);
        assert_eq!(values::<i8>(&run1("Mul", &[&a, &b], &none)).to_vec(), vec![16, 0, -68]);
        let m1 = typed(DType::I8, &[1], &[-1i8]);
        assert_eq!(values::<i8>(&run1("Div", &[&a, &m1], &none)).to_vec(), vec![-100, -128, -7]);
        let u = typed(DType::U16, &[2], &[1u16, 65535]);
        assert_eq!(
            values::<u16>(&run1("Sub", &[&u, &typed(DType::U16, &[1], &[2u16])], &none)).to_vec(),
            vec![65535, 65533]
        );
        assert_eq!(values::<u16>(&run1("Abs", &[&u], &none)).to_vec(), vec![1, 65535]);
        let e = err("Div", &[Some(&u), Some(&typed(DType::U16, &[2], &[3u16, 0]))], &none);
        assert_eq!(e, "integer division by zero (input 2 has a zero element)");
        // f16 computes in f32 and rounds once; Max propagates NaN.
        let h = |v: &[f32]| {
            typed(DType::F16, &[v.len() as i64], &v.iter().map(|&x| half::f16::from_f32(x)).collect::<Vec<_>>())
        };
        let got = run1("Div", &[&h(&[1.0, 3.0]), &h(&[3.0, 0.0])], &none);
        assert_eq!(values::<half::f16>(&got).to_vec(), vec![half::f16::from_f32(1.0 / 3.0), half::f16::INFINITY]);
        let got = run1("Max", &[&h(&[1.0, f32::NAN]), &h(&[2.0, 0.0])], &none);
        assert_eq!(values::<half::f16>(&got)[0], half::f16::from_f32(2.0));
        assert!(values::<half::f16>(&got)[1].is_nan());
        // Clip with bounds of the input's dtype.
        let x = typed(DType::I8, &[4], &[-100i8, -1, 5, 120]);
        let (lo, hi) = (typed(DType::I8, &[], &[-2i8]), typed(DType::I8, &[], &[100i8]));
        assert_eq!(values::<i8>(&run1("Clip", &[&x, &lo, &hi], &none)).to_vec(), vec![-2, -1, 5, 100]);
        // f64 maps compute in f64.
        let d = typed(DType::F64, &[2], &[1.0f64, -700.0]);
        assert_eq!(values::<f64>(&run1("Exp", &[&d], &none)).to_vec(), vec![1f64.exp(), (-700f64).exp()]);
        // Reductions: u8 sums wrap, bool Max is any and Min is all.
        let r = typed(DType::U8, &[2, 2], &[200u8, 100, 1, 2]);
        let ax = attrs(&[("axes", AttrValue::Ints(vec![1])), ("keepdims", int(0))]);
        assert_eq!(values::<u8>(&run1("ReduceSum", &[&r], &ax)).to_vec(), vec![44, 3]);
        let bools = tbool(&[2, 2], &[true, false, true, true]);
        assert_eq!(run1("ReduceMax", &[&bools], &ax), tbool(&[2], &[true, true]));
        assert_eq!(run1("ReduceMin", &[&bools], &ax), tbool(&[2], &[false, true]));
        let lse =
            run1("ReduceLogSumExp", &[&typed(DType::F64, &[2], &[1000.0f64, 1000.0])], &attrs(&[("keepdims", int(0))]));
        assert_eq!(values::<f64>(&lse).to_vec(), vec![1000.0 + 2f64.ln()]);
    }

    #[test]
    fn neg_and_abs_handle_integers() {
        let x = ti32(&[4], &[-3, 0, 5, i32::MIN]);
        assert_eq!(run1("Neg", &[&x], &Attrs::default()), ti32(&[4], &[3, 0, -5, i32::MIN]));
        assert_eq!(run1("Abs", &[&x], &Attrs::default()), ti32(&[4], &[3, 0, 5, i32::MIN]));
        assert_eq!(run1("Abs", &[&ti64(&[2], &[-7, 7])], &Attrs::default()), ti64(&[2], &[7, 7]));
        let e = err("Sigmoid", &[Some(&x)], &Attrs::default());
        assert_eq!(e, "input 1 (X) must be f32, f16 or f64, found i32");
        let e = err("Neg", &[Some(&tbool(&[1], &[true]))], &Attrs::default());
        assert_eq!(e, "input 1 (X) must be f32, f16, f64, i8, i16, i32 or i64, found bool");
    }

    #[test]
    fn clip_takes_attributes_or_inputs() {
        let x = t(&[2, 4], &X8);
        let none = Attrs::default();
        let lo = t(&[], &[0.1]);
        let hi = t(&[1], &[1.0]);
        let y = run("Clip", &[Some(&x), Some(&lo)], &none).unwrap();
        assert_close(&y[0], &[2, 4], &[0.1, 0.1, 0.1, 0.1, 0.25, 1.0, 2.5, 10.0]);
        let y = run("Clip", &[Some(&x), None, Some(&hi)], &none).unwrap();
        assert_close(&y[0], &[2, 4], &[-3.0, -1.5, -0.5, 0.0, 0.25, 1.0, 1.0, 1.0]);
        // min > max: everything becomes max (numpy.clip); NaN stays NaN.
        let y = run1("Clip", &[&t(&[3], &[-5.0, 5.0, f32::NAN]), &t(&[], &[2.0]), &t(&[], &[1.0])], &none);
        assert_close(&y, &[3], &[1.0, 1.0, f32::NAN]);
        let both = attrs(&[("min", float(0.0))]);
        assert_eq!(err("Clip", &[Some(&x), Some(&lo)], &both), "`min` is given both as an attribute and as input 2");
        let e = err("Clip", &[Some(&x), Some(&t(&[2], &[0.0, 1.0]))], &none);
        assert_eq!(e, "input 2 (min) must be a scalar (one element), found shape [2]");
        let e = def("Clip").check_attrs(&attrs(&[("max", float(f64::NAN))])).unwrap_err();
        assert_eq!(e, "attribute `max` of @onnx.Clip must not be NaN");
    }

    #[test]
    fn binary_arithmetic_broadcasts() {
        let none = Attrs::default();
        let a = t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = t(&[3], &[0.5, 2.0, -1.0]);
        let pow = run1("Pow", &[&a, &t(&[3], &[2.0, 0.5, -1.0])], &none);
        assert_close(&pow, &[2, 3], &[1.0, 1.4142135, 0.33333334, 16.0, 2.236068, 0.16666667]);
        assert_close(&run1("Sub", &[&a, &b], &none), &[2, 3], &[0.5, 0.0, 4.0, 3.5, 3.0, 7.0]);
        let mul = run1("Mul", &[&a, &t(&[2, 1], &[10.0, 20.0])], &none);
        assert_close(&mul, &[2, 3], &[10.0, 20.0, 30.0, 80.0, 100.0, 120.0]);
        assert_close(&run1("Div", &[&a, &b], &none), &[2, 3], &[2.0, 1.0, -3.0, 8.0, 2.5, -6.0]);
        // Scalar on the left.
        assert_close(&run1("Sub", &[&t(&[], &[1.0]), &b], &none), &[3], &[0.5, -1.0, 2.0]);
    }

    #[test]
    fn integer_arithmetic_truncates_and_rejects_division_by_zero() {
        let none = Attrs::default();
        let a = ti32(&[4], &[7, -7, 9, -9]);
        assert_eq!(run1("Div", &[&a, &ti32(&[4], &[2, 2, -4, -4])], &none), ti32(&[4], &[3, -3, -2, 2]));
        assert_eq!(run1("Sub", &[&a, &ti32(&[1], &[1])], &none), ti32(&[4], &[6, -8, 8, -10]));
        let big = ti64(&[2, 1], &[3, i64::MAX]);
        assert_eq!(run1("Mul", &[&big, &ti64(&[2], &[2, -1])], &none), ti64(&[2, 2], &[6, -3, -2, -i64::MAX]));
        assert_eq!(run1("Div", &[&ti64(&[1], &[i64::MIN]), &ti64(&[1], &[-1])], &none), ti64(&[1], &[i64::MIN]));
        let e = err("Div", &[Some(&a), Some(&ti32(&[2, 1], &[1, 0]))], &none);
        assert_eq!(e, "integer division by zero (input 2 has a zero element)");
        // Float division by zero follows IEEE.
        assert_close(&run1("Div", &[&t(&[2], &[1.0, 0.0]), &t(&[1], &[0.0])], &none), &[2], &[f32::INFINITY, f32::NAN]);
    }

    #[test]
    fn binary_arithmetic_errors() {
        let none = Attrs::default();
        let a = t(&[2, 3], &[0.0; 6]);
        let e = err("Sub", &[Some(&a), Some(&t(&[2], &[0.0; 2]))], &none);
        assert_eq!(e, "shapes [2, 3] and [2] do not broadcast (dimension 1: 3 vs 2)");
        let e = err("Mul", &[Some(&a), Some(&ti32(&[1], &[1]))], &none);
        assert_eq!(e, "inputs 1 and 2 must have the same dtype, found f32 and i32");
        let e = err("Pow", &[Some(&tbool(&[1], &[true])), Some(&ti64(&[1], &[2]))], &none);
        assert_eq!(e, "input 1 (X) must be f32, f16, f64, i32 or i64, found bool");
        let e = err("Pow", &[Some(&ti64(&[1], &[2])), Some(&tbool(&[1], &[true]))], &none);
        assert_eq!(e, "input 2 (Y) must be f32, f16, f64, i8, i16, i32, i64, u8, u16, u32 or u64, found bool");
        let e = err("Div", &[Some(&tbool(&[1], &[true])), Some(&tbool(&[1], &[true]))], &none);
        assert_eq!(e, "input 1 (A) must be f32, f16, f64, i8, i16, i32, i64, u8, u16, u32, u64 or bf16, found bool");
        // Integer powers are exact; the exponent may be of another dtype.
        let p = run1("Pow", &[&ti64(&[3], &[2, -3, 10]), &ti32(&[1], &[3])], &none);
        assert_eq!(values::<i64>(&p).to_vec(), vec![8, -27, 1000]);
        let p = run1("Pow", &[&t(&[2], &[2.0, 9.0]), &ti64(&[2], &[-1, 2])], &none);
        assert_close(&p, &[2], &[0.5, 81.0]);
        let mut outs = vec![HostTensor::zeros(DType::F32, &[2, 3]).unwrap()];
        let e = (def("Sub").op.id().host_kernel().unwrap())(&[Some(&a)], &none, &mut outs).unwrap_err();
        assert_eq!(e, "input 2 (B) is required");
        let e = def("Mul").check_attrs(&attrs(&[("broadcast", int(2))])).unwrap_err();
        assert_eq!(e, "attribute `broadcast` of @onnx.Mul must be 0 or 1, found 2");
        let e = def("Sub").check_attrs(&attrs(&[("alpha", float(1.0))])).unwrap_err();
        assert!(e.contains("has no attribute `alpha`"), "{e}");
    }

    #[test]
    fn opset6_broadcast_axis_aligns_b() {
        let a: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let a = t(&[2, 3, 2], &a);
        let b = t(&[3], &[1.0, 10.0, 100.0]);
        let legacy = attrs(&[("broadcast", int(1)), ("axis", int(1))]);
        let y = run1("Mul", &[&a, &b], &legacy);
        let want: Vec<f32> = (0..12).map(|i| i as f32 * [1.0, 10.0, 100.0][(i / 2) % 3]).collect();
        assert_close(&y, &[2, 3, 2], &want);
        // Negative axis counts from A's rank; axis 0 with B [2, 3] lines up with A's first dims.
        let y = run1(
            "Sub",
            &[&a, &t(&[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0])],
            &attrs(&[("broadcast", int(1)), ("axis", int(-3))]),
        );
        let want: Vec<f32> = (0..12).map(|i| i as f32 - (i / 2) as f32).collect();
        assert_close(&y, &[2, 3, 2], &want);
        // Without broadcast = 1 the axis is ignored and numpy rules apply.
        let e = err("Mul", &[Some(&a), Some(&b)], &attrs(&[("axis", int(1))]));
        assert!(e.contains("do not broadcast"), "{e}");
        let e = err("Mul", &[Some(&a), Some(&b)], &attrs(&[("broadcast", int(1)), ("axis", int(2))]));
        assert_eq!(e, "shapes [2, 3, 2] and [3] do not broadcast (dimension 2: 2 vs 3)");
        let e = err("Mul", &[Some(&a), Some(&b)], &attrs(&[("broadcast", int(1)), ("axis", int(3))]));
        assert_eq!(e, "axis 3 is out of range: B (rank 1) placed at axis 3 does not fit in A's rank 3");
    }

    /// The broadcast kernel against a direct per-element evaluation.
    #[test]
    fn broadcast_map_matches_naive_indexing() {
        let shapes: &[(&[i64], &[i64])] = &[
            (&[2, 1, 4], &[3, 1]),
            (&[1, 3, 1, 5], &[2, 1, 4, 1]),
            (&[4], &[2, 3, 4]),
            (&[2, 3], &[2, 3]),
            (&[], &[2, 2]),
            (&[3, 1, 1], &[1, 1, 5]),
            (&[2, 3, 4, 5], &[3, 1, 1]),
            (&[2, 1, 3, 1], &[1, 4, 1, 2]),
            (&[1, 1], &[1]),
            (&[0, 3], &[1, 3]),
        ];
        for &(ash, bsh) in shapes {
            let out = broadcast(ash, bsh).unwrap();
            let na = numel(ash).unwrap() as i64;
            let nb = numel(bsh).unwrap() as i64;
            let a: Vec<i64> = (0..na).collect();
            let b: Vec<i64> = (0..nb).collect();
            let got = broadcast_map(&a, ash, &b, bsh, &out, |x, y| x * 1000 + y);
            let n = numel(&out).unwrap() as usize;
            let (sa, sb) = (broadcast_strides(ash, &out), broadcast_strides(bsh, &out));
            let mut want = Vec::new();
            for flat in 0..n {
                let (mut rem, mut ia, mut ib) = (flat, 0, 0);
                for d in (0..out.len()).rev() {
                    let i = rem % out[d] as usize;
                    rem /= out[d] as usize;
                    ia += i * sa[d];
                    ib += i * sb[d];
                }
                want.push(a[ia] * 1000 + b[ib]);
            }
            assert_eq!(got, want, "{ash:?} with {bsh:?}");
        }
    }

    #[test]
    fn variadic_max_min_sum() {
        let none = Attrs::default();
        let a = t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = t(&[3], &[0.5, 2.0, -1.0]);
        let c = t(&[1, 1], &[4.0]);
        assert_close(&run1("Max", &[&a, &b, &c], &none), &[2, 3], &[4.0, 4.0, 4.0, 4.0, 5.0, 6.0]);
        assert_close(&run1("Min", &[&a, &b, &c], &none), &[2, 3], &[0.5, 2.0, -1.0, 0.5, 2.0, -1.0]);
        assert_close(&run1("Sum", &[&a, &b, &c], &none), &[2, 3], &[5.5, 8.0, 6.0, 8.5, 11.0, 9.0]);
        assert_close(&run1("Sum", &[&b], &none), &[3], &[0.5, 2.0, -1.0]);
        // NaN propagates like numpy.maximum / numpy.minimum.
        let n = t(&[2], &[f32::NAN, 1.0]);
        let m = t(&[2], &[0.0, f32::NAN]);
        assert_close(&run1("Max", &[&n, &m], &none), &[2], &[f32::NAN, f32::NAN]);
        assert_close(&run1("Min", &[&n, &m], &none), &[2], &[f32::NAN, f32::NAN]);
        let i = ti32(&[3], &[1, -5, 7]);
        assert_eq!(run1("Max", &[&i, &ti32(&[], &[0])], &none), ti32(&[3], &[1, 0, 7]));
        assert_eq!(run1("Sum", &[&i, &i, &i], &none), ti32(&[3], &[3, -15, 21]));
        // Sixty-four inputs.
        let many: Vec<&HostTensor> = std::iter::repeat_n(&b, 64).collect();
        assert_close(&run1("Sum", &many, &none), &[3], &[32.0, 128.0, -64.0]);
        let e = err("Max", &[Some(&a), Some(&i)], &none);
        assert_eq!(e, "input 2 is i32, but input 1 is f32: all inputs must have one dtype");
        let e = err("Sum", &[Some(&a), Some(&b), Some(&t(&[2], &[0.0; 2]))], &none);
        assert_eq!(e, "input 3: shapes [2, 3] and [2] do not broadcast (dimension 1: 3 vs 2)");
        assert_eq!(err("Min", &[Some(&a), None], &none), "input 2 (data_1) is required");
    }

    #[test]
    fn prelu_broadcasts_slope_and_accepts_opset6_channels() {
        let none = Attrs::default();
        let xv: Vec<f32> = (0..24).map(|v| (v as f32 - 10.0) / 4.0).collect();
        let x = t(&[2, 3, 4], &xv);
        #[rustfmt::skip]
        let per_channel = [-0.25, -0.225, -0.2, -0.175, -0.3, -0.25, -0.2, -0.15, -0.15, -0.075, 0.0, 0.25,
            0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 3.25];
        #[rustfmt::skip]
        let per_last = [-0.25, -0.45, -0.6, -0.7, -0.15, -0.25, -0.3, -0.3, -0.05, -0.05, 0.0, 0.25,
            0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 3.25];
        let s31 = t(&[3, 1], &[0.1, 0.2, 0.3]);
        assert_close(&run1("PRelu", &[&x, &s31], &none), &[2, 3, 4], &per_channel);
        assert_close(&run1("PRelu", &[&x, &t(&[4], &[0.1, 0.2, 0.3, 0.4])], &none), &[2, 3, 4], &per_last);
        // Opset 6: a 1-D slope with the channel count applies per channel.
        let s3 = t(&[3], &[0.1, 0.2, 0.3]);
        assert_close(&run1("PRelu", &[&x, &s3], &none), &[2, 3, 4], &per_channel);
        // Ambiguous [2, 3, 3] with slope [3]: numpy (last axis) by default, channels for opset 6.
        let x3 = t(&[1, 3, 3], &[-1.0; 9]);
        let y = run1("PRelu", &[&x3, &s3], &none);
        assert_close(&y, &[1, 3, 3], &[-0.1, -0.2, -0.3, -0.1, -0.2, -0.3, -0.1, -0.2, -0.3]);
        let y = run1("PRelu", &[&x3, &s3], &attrs(&[("onnx_opset", int(6))]));
        assert_close(&y, &[1, 3, 3], &[-0.1, -0.1, -0.1, -0.2, -0.2, -0.2, -0.3, -0.3, -0.3]);
        let e = err("PRelu", &[Some(&x), Some(&t(&[5], &[0.0; 5]))], &none);
        assert!(e.starts_with("slope of shape [5] does not broadcast to X of shape [2, 3, 4]"), "{e}");
        // Slope must not grow the output.
        let e = err("PRelu", &[Some(&t(&[4], &[0.0; 4])), Some(&t(&[2, 4], &[0.0; 8]))], &none);
        assert!(e.starts_with("slope of shape [2, 4] does not broadcast"), "{e}");
        let e = def("PRelu").check_attrs(&attrs(&[("onnx_opset", int(0))])).unwrap_err();
        assert_eq!(e, "attribute `onnx_opset` of @onnx.PRelu must be a positive opset version, found 0");
    }

    #[test]
    fn dropout_is_a_copy_with_an_all_true_mask() {
        let x = t(&[2, 2], &[1.0, -2.0, 3.0, -4.0]);
        let a = attrs(&[("ratio", float(0.3)), ("seed", int(7))]);
        let outs = run("Dropout", &[Some(&x)], &a).unwrap();
        assert_eq!(outs[0], x);
        assert_eq!(outs[1], tbool(&[2, 2], &[true; 4]));
        let off = tbool(&[], &[false]);
        let ratio = t(&[], &[0.5]);
        let outs = run("Dropout", &[Some(&x), Some(&ratio), Some(&off)], &Attrs::default()).unwrap();
        assert_eq!(outs[0], x);
        let on = tbool(&[], &[true]);
        let e = err("Dropout", &[Some(&x), Some(&t(&[], &[1.0])), Some(&on)], &Attrs::default());
        assert_eq!(e, "the ratio of @onnx.Dropout must be in [0, 1), found 1");
        let e = def("Dropout").check_attrs(&attrs(&[("ratio", float(1.5))])).unwrap_err();
        assert_eq!(e, "attribute `ratio` of @onnx.Dropout must be in [0, 1), found 1.5");
        let e = err("Dropout", &[Some(&ti32(&[1], &[1]))], &Attrs::default());
        assert_eq!(e, "input 1 (data) must be f32, f16 or f64, found i32");
        // Only the first output may be asked for.
        let mut one = vec![HostTensor::zeros(DType::F32, &[2, 2]).unwrap()];
        (def("Dropout").op.id().host_kernel().unwrap())(&[Some(&x)], &Attrs::default(), &mut one).unwrap();
        assert_eq!(one[0], x);
    }

    #[test]
    fn identity_copies_any_dtype() {
        let x = ti64(&[3], &[1, -2, i64::MAX]);
        assert_eq!(run1("Identity", &[&x], &Attrs::default()), x);
        let b = tbool(&[2, 1], &[true, false]);
        assert_eq!(run1("Identity", &[&b], &Attrs::default()), b);
    }

    fn softmax_input() -> HostTensor {
        t(&[1, 3, 4], &[1.0, 2.0, 3.0, 4.0, -1.0, 0.0, 1.0, 100.0, 0.5, 0.5, -2.0, 3.0])
    }

    #[test]
    fn softmax_opset13_normalizes_along_one_axis() {
        let x = softmax_input();
        #[rustfmt::skip]
        let axis1 = [0.574097, 0.73612475, 0.8756006, 2.0304815e-42, 0.07769558, 0.09962365, 0.11849965, 1.0,
            0.3482074, 0.16425163, 0.0058997497, 7.4689208e-43];
        assert_close(&run1("Softmax", &[&x], &attrs(&[("axis", int(1))])), &[1, 3, 4], &axis1);
        assert_close(
            &run1("Softmax", &[&x], &attrs(&[("axis", int(-2)), ("onnx_opset", int(13))])),
            &[1, 3, 4],
            &axis1,
        );
        #[rustfmt::skip]
        let last = [0.032058604, 0.08714432, 0.2368828, 0.6439143, 1.4012985e-44, 3.783506e-44, 1.0089349e-43, 1.0,
            0.07010372, 0.07010372, 0.005754463, 0.85403806];
        assert_close(&run1("Softmax", &[&x], &Attrs::default()), &[1, 3, 4], &last);
        #[rustfmt::skip]
        let log1 = [-0.55495697, -0.3063557, -0.13284525, -96.0, -2.554957, -2.3063557, -2.1328452, 0.0,
            -1.054957, -1.8063557, -5.1328454, -97.0];
        assert_close(&run1("LogSoftmax", &[&x], &attrs(&[("axis", int(1))])), &[1, 3, 4], &log1);
        #[rustfmt::skip]
        let loglast = [-3.4401896, -2.4401896, -1.4401897, -0.44018966, -101.0, -100.0, -99.0, 0.0,
            -2.6577795, -2.6577795, -5.1577797, -0.15777947];
        assert_close(&run1("LogSoftmax", &[&x], &Attrs::default()), &[1, 3, 4], &loglast);
        // Large values do not overflow.
        let big = t(&[2], &[1000.0, 0.0]);
        assert_close(&run1("Softmax", &[&big], &Attrs::default()), &[2], &[1.0, 0.0]);
        assert_close(&run1("LogSoftmax", &[&big], &Attrs::default()), &[2], &[0.0, -1000.0]);
    }

    #[test]
    fn softmax_before_opset13_coerces_to_2d() {
        let xv: Vec<f32> = (0..12).map(|v| (v as f32 - 5.0) / 4.0).collect();
        let x = t(&[2, 2, 3], &xv);
        let row = [0.081576906, 0.10474682, 0.13449758, 0.1726983, 0.22174902, 0.2847314];
        let both: Vec<f32> = row.iter().chain(&row).copied().collect();
        // Default axis 1 for opset < 13: rows of 2 × 3 elements.
        let y = run1("Softmax", &[&x], &attrs(&[("onnx_opset", int(11))]));
        assert_close(&y, &[2, 2, 3], &both);
        let lrow = [-2.5062091, -2.2562091, -2.0062091, -1.7562091, -1.5062091, -1.2562091];
        let lboth: Vec<f32> = lrow.iter().chain(&lrow).copied().collect();
        let y = run1("LogSoftmax", &[&x], &attrs(&[("onnx_opset", int(6)), ("axis", int(1))]));
        assert_close(&y, &[2, 2, 3], &lboth);
        #[rustfmt::skip]
        let all = [0.01488171, 0.019108493, 0.024535792, 0.031504579, 0.04045268, 0.05194227, 0.0666952, 0.08563832,
            0.109961785, 0.14119373, 0.18129633, 0.2327891];
        let y = run1("Softmax", &[&x], &attrs(&[("onnx_opset", int(12)), ("axis", int(0))]));
        assert_close(&y, &[2, 2, 3], &all);
    }

    #[test]
    fn softmax_errors() {
        let x = t(&[2, 3], &[0.0; 6]);
        assert_eq!(err("Softmax", &[Some(&x)], &attrs(&[("axis", int(2))])), "axis 2 is out of range for rank 2");
        assert_eq!(err("LogSoftmax", &[Some(&x)], &attrs(&[("axis", int(-3))])), "axis -3 is out of range for rank 2");
        assert_eq!(err("Softmax", &[Some(&t(&[], &[1.0]))], &Attrs::default()), "axis -1 is out of range for rank 0");
        // The opset < 13 default axis 1 needs rank 2.
        let e = err("Softmax", &[Some(&t(&[3], &[0.0; 3]))], &attrs(&[("onnx_opset", int(11))]));
        assert_eq!(e, "axis 1 is out of range for rank 1");
        assert_eq!(
            err("Softmax", &[Some(&ti32(&[1], &[0]))], &Attrs::default()),
            "input 1 (input) must be f32, f16, bf16 or f64, found i32"
        );
        let e = def("LogSoftmax").check_attrs(&attrs(&[("onnx_opset", int(-1))])).unwrap_err();
        assert_eq!(e, "attribute `onnx_opset` of @onnx.LogSoftmax must be a positive opset version, found -1");
        let e = def("Softmax").check_attrs(&attrs(&[("axis", float(1.0))])).unwrap_err();
        assert_eq!(e, "attribute `axis` of @onnx.Softmax must be an integer, found the float 1.0");
    }

    fn reduce_input() -> HostTensor {
        let v: Vec<f32> = (0..24).map(|v| v as f32 * 0.5 - 3.0).collect();
        t(&[2, 3, 4], &v)
    }

    /// Each reduction against values computed by hand (numpy's where ONNX's reference uses
    /// it): rows of [1, -2, 3] and [-4, 5, 0.5], the empty reduction, NaN, and a LogSumExp
    /// that a naive exp would overflow.
    /// ArgMax and ArgMin against hand-computed indices: ties (first or last), NaN (preferred,
    /// as numpy's), keepdims, integers.
    #[test]
    fn arg_max_and_min_pick_the_documented_index() {
        let x = t(&[2, 3], &[1.0, 5.0, 5.0, 7.0, f32::NAN, 2.0]);
        let ix = |op: &str, x: &HostTensor, a: &[(&str, AttrValue)]| {
            let y = run1(op, &[x], &attrs(a));
            (y.shape.clone(), values::<i64>(&y).to_vec())
        };
        let rows = [("axis", int(1)), ("keepdims", int(0))];
        assert_eq!(ix("ArgMax", &x, &rows), (vec![2], vec![1, 1]));
        assert_eq!(
            ix("ArgMax", &x, &[rows[0].clone(), rows[1].clone(), ("select_last_index", int(1))]),
            (vec![2], vec![2, 1])
        );
        assert_eq!(ix("ArgMin", &x, &rows), (vec![2], vec![0, 1]));
        assert_eq!(ix("ArgMax", &x, &[]), (vec![1, 3], vec![1, 1, 0]));
        assert_eq!(ix("ArgMin", &x, &[("axis", int(-2))]), (vec![1, 3], vec![0, 1, 1]));
        let xi = ti32(&[3], &[3, 3, 1]);
        assert_eq!(ix("ArgMax", &xi, &[]), (vec![1], vec![0]));
        assert_eq!(ix("ArgMax", &xi, &[("select_last_index", int(1))]), (vec![1], vec![1]));
        let e = err("ArgMax", &[Some(&t(&[0, 2], &[]))], &Attrs::default());
        assert!(e.contains("axis 0 has no elements"), "{e}");
    }

    /// Rows [1, 2, 3] and [2, 4, 9] over the last axis, with a per-element Scale and B,
    /// against hand-computed values; Mean and InvStdDev too; Scale broadcast over axis 0.
    #[test]
    fn layer_normalization_matches_its_definition() {
        let x = t(&[2, 3], &[1.0, 2.0, 3.0, 2.0, 4.0, 9.0]);
        let (sc, b) = (t(&[3], &[1.0, 2.0, 0.5]), t(&[3], &[0.0, 1.0, -1.0]));
        let a = attrs(&[("epsilon", float(0.0))]);
        let outs = run("LayerNormalization", &[Some(&x), Some(&sc), Some(&b)], &a).unwrap();
        let (k1, k2) = (1.0 / (2.0f64 / 3.0).sqrt(), 1.0 / (26.0f64 / 3.0).sqrt());
        let want = [-k1, 1.0, k1 * 0.5 - 1.0, -3.0 * k2, -k2 * 2.0 + 1.0, 4.0 * k2 * 0.5 - 1.0].map(|v| v as f32);
        assert_close(&outs[0], &[2, 3], &want);
        assert_close(&outs[1], &[2, 1], &[2.0, 5.0]);
        assert_close(&outs[2], &[2, 1], &[k1 as f32, k2 as f32]);
        // Over every dim (axis 0), Scale of one element, no B: the whole tensor's statistics.
        let outs = run("LayerNormalization", &[Some(&x), Some(&t(&[1], &[2.0]))], &attrs(&[("axis", int(0))])).unwrap();
        let xs = [1.0f64, 2.0, 3.0, 2.0, 4.0, 9.0];
        let mean = xs.iter().sum::<f64>() / 6.0;
        let k = 1.0 / (xs.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 6.0 + 1e-5).sqrt();
        assert_close(&outs[0], &[2, 3], &xs.map(|v| ((v - mean) * k * 2.0) as f32));
        assert_close(&outs[1], &[1, 1], &[mean as f32]);
        // A Scale that does not broadcast to the normalized dims, and stash_type 0.
        let e = err("LayerNormalization", &[Some(&x), Some(&t(&[2], &[1.0, 1.0]))], &Attrs::default());
        assert!(e.contains("does not broadcast to the normalized dims [3]"), "{e}");
        let e = def("LayerNormalization").check_attrs(&attrs(&[("stash_type", int(0))])).unwrap_err();
        assert!(e.contains("`stash_type`"), "{e}");
    }

    #[test]
    fn every_reduction_matches_its_definition() {
        let x = t(&[2, 3], &[1.0, -2.0, 3.0, -4.0, 5.0, 0.5]);
        let rows = attrs(&[("axes", AttrValue::Ints(vec![1])), ("keepdims", int(0))]);
        let inf = f32::INFINITY;
        for (op, want) in [
            ("ReduceMax", [3.0, 5.0]),
            ("ReduceMin", [-2.0, -4.0]),
            ("ReduceProd", [-6.0, -10.0]),
            ("ReduceL1", [6.0, 9.5]),
            ("ReduceL2", [3.741_657_4, 6.422_616_3]),
            ("ReduceSumSquare", [14.0, 41.25]),
            ("ReduceLogSumExp", [3.132_845_2, 5.011_169_8]),
        ] {
            assert_close(&run1(op, &[&x], &rows), &[2], &want);
        }
        let positive = t(&[2, 2], &[0.5, 1.5, 4.0, 2.0]);
        assert_close(&run1("ReduceLogSum", &[&positive], &rows), &[2], &[0.693_147_2, 1.791_759_5]);
        // Over nothing: each fold's start, finalized.
        let empty = t(&[0, 3], &[]);
        let first = attrs(&[("axes", AttrValue::Ints(vec![0]))]);
        for (op, v) in [
            ("ReduceMax", -inf),
            ("ReduceMin", inf),
            ("ReduceProd", 1.0),
            ("ReduceL2", 0.0),
            ("ReduceLogSum", -inf),
            ("ReduceLogSumExp", -inf),
            ("ReduceMean", f32::NAN),
        ] {
            assert_close(&run1(op, &[&empty], &first), &[1, 3], &[v; 3]);
        }
        // NaN propagates through Max and Min; LogSumExp stays finite where exp overflows.
        let nan = t(&[1, 3], &[1.0, f32::NAN, 2.0]);
        assert!(values::<f32>(&run1("ReduceMax", &[&nan], &rows))[0].is_nan());
        assert!(values::<f32>(&run1("ReduceMin", &[&nan], &rows))[0].is_nan());
        let big = t(&[1, 2], &[1000.0, 1000.0]);
        assert_close(&run1("ReduceLogSumExp", &[&big], &rows), &[1], &[1_000.693_15]);
        let infs = t(&[1, 3], &[inf, 1.0, inf]);
        assert_close(&run1("ReduceLogSumExp", &[&infs], &rows), &[1], &[inf]);
        // Integers: exact, wrapping, and the type's bounds for Max and Min of nothing.
        let xi = ti32(&[2, 2], &[-5, 7, 2, -9]);
        let cols = attrs(&[("axes", AttrValue::Ints(vec![0])), ("keepdims", int(0))]);
        assert_eq!(values::<i32>(&run1("ReduceMax", &[&xi], &cols))[..], [2, 7]);
        assert_eq!(values::<i32>(&run1("ReduceMin", &[&xi], &cols))[..], [-5, -9]);
        assert_eq!(values::<i32>(&run1("ReduceProd", &[&xi], &cols))[..], [-10, -63]);
        assert_eq!(values::<i32>(&run1("ReduceL1", &[&xi], &cols))[..], [7, 16]);
        assert_eq!(values::<i32>(&run1("ReduceSumSquare", &[&xi], &cols))[..], [29, 130]);
        let wraps = ti64(&[2, 1], &[i64::MAX, 2]);
        assert_eq!(values::<i64>(&run1("ReduceProd", &[&wraps], &cols))[..], [-2]);
        let none = ti32(&[0, 2], &[]);
        assert_eq!(values::<i32>(&run1("ReduceMax", &[&none], &cols))[..], [i32::MIN, i32::MIN]);
        assert_eq!(values::<i32>(&run1("ReduceMin", &[&none], &cols))[..], [i32::MAX, i32::MAX]);
        // The f32-only ones refuse integers.
        let e = err("ReduceL2", &[Some(&xi)], &cols);
        assert!(e.contains("i32"), "{e}");
    }

    #[test]
    fn reductions_over_axes() {
        let x = reduce_input();
        let y = run1("ReduceMean", &[&x], &attrs(&[("axes", AttrValue::Ints(vec![0, 2]))]));
        assert_close(&y, &[1, 3, 1], &[0.75, 2.75, 4.75]);
        let y = run1("ReduceMean", &[&x], &attrs(&[("axes", AttrValue::Ints(vec![-2])), ("keepdims", int(0))]));
        assert_close(&y, &[2, 4], &[-1.0, -0.5, 0.0, 0.5, 5.0, 5.5, 6.0, 6.5]);
        assert_close(&run1("ReduceMean", &[&x], &attrs(&[("keepdims", int(0))])), &[], &[2.75]);
        assert_close(&run1("ReduceMean", &[&x], &Attrs::default()), &[1, 1, 1], &[2.75]);
        // Opset 13 ReduceSum: axes as input 2.
        let y = run1("ReduceSum", &[&x, &ti64(&[1], &[2])], &attrs(&[("keepdims", int(0))]));
        assert_close(&y, &[2, 3], &[-9.0, -1.0, 7.0, 15.0, 23.0, 31.0]);
        let y = run1("ReduceSum", &[&x], &attrs(&[("axes", AttrValue::Ints(vec![1, 0]))]));
        assert_close(&y, &[1, 1, 4], &[12.0, 15.0, 18.0, 21.0]);
        let y = run1("ReduceSum", &[&x, &ti64(&[2], &[0, 2])], &Attrs::default());
        assert_close(&y, &[1, 3, 1], &[6.0, 22.0, 38.0]);
        // Integers.
        let i = ti64(&[2, 3], &[0, 1, 2, 3, 4, 5]);
        assert_eq!(run1("ReduceSum", &[&i, &ti64(&[1], &[0])], &Attrs::default()), ti64(&[1, 3], &[3, 5, 7]));
        assert_eq!(run1("ReduceSum", &[&ti32(&[2, 2], &[1, 2, 3, 4])], &Attrs::default()), ti32(&[1, 1], &[10]));
        // Empty axes: reduce everything, or nothing with noop_with_empty_axes.
        let empty = ti64(&[0], &[]);
        assert_close(&run1("ReduceSum", &[&x, &empty], &attrs(&[("keepdims", int(0))])), &[], &[66.0]);
        let noop = attrs(&[("noop_with_empty_axes", int(1))]);
        assert_eq!(run("ReduceSum", &[Some(&x), Some(&empty)], &noop).unwrap()[0], x);
        assert_eq!(run("ReduceMean", &[Some(&x)], &noop).unwrap()[0], x);
        // Size-1 dimensions interleaved with reduced ones.
        let z = t(&[1, 2, 1, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let y = run1("ReduceMean", &[&z], &attrs(&[("axes", AttrValue::Ints(vec![1, 2])), ("keepdims", int(0))]));
        assert_close(&y, &[1, 3], &[2.5, 3.5, 4.5]);
        // Reducing an empty dimension: sums are 0, means NaN.
        let e = t(&[2, 0], &[]);
        assert_close(&run1("ReduceSum", &[&e], &attrs(&[("axes", AttrValue::Ints(vec![1]))])), &[2, 1], &[0.0, 0.0]);
        let y = run1("ReduceMean", &[&e], &attrs(&[("axes", AttrValue::Ints(vec![1]))]));
        assert_close(&y, &[2, 1], &[f32::NAN, f32::NAN]);
    }

    #[test]
    fn reduction_errors() {
        let x = reduce_input();
        let axes = |v: Vec<i64>| attrs(&[("axes", AttrValue::Ints(v))]);
        assert_eq!(err("ReduceMean", &[Some(&x)], &axes(vec![3])), "axis 3 is out of range for rank 3");
        assert_eq!(
            err("ReduceSum", &[Some(&x)], &axes(vec![-1, 2])),
            "axis 2 is listed twice (axes [-1, 2] for rank 3)"
        );
        let e = def("ReduceSum").check_attrs(&axes(vec![1, 1])).unwrap_err();
        assert_eq!(e, "attribute `axes` of @onnx.ReduceSum lists axis 1 twice");
        let e = def("ReduceMean").check_attrs(&attrs(&[("keepdims", int(2))])).unwrap_err();
        assert_eq!(e, "attribute `keepdims` of @onnx.ReduceMean must be 0 or 1, found 2");
        let e = err("ReduceSum", &[Some(&x), Some(&ti64(&[1], &[0]))], &axes(vec![0]));
        assert_eq!(e, "axes are given both as the `axes` attribute and as input 2");
        let e = err("ReduceSum", &[Some(&x), Some(&t(&[1], &[0.0]))], &Attrs::default());
        assert_eq!(e, "input 2 (axes) must be i64 or i32, found f32");
        let e = err("ReduceSum", &[Some(&x), Some(&ti64(&[1, 1], &[0]))], &Attrs::default());
        assert_eq!(e, "input 2 (axes) must be 1-D, found shape [1, 1]");
        let e = err("ReduceMean", &[Some(&ti32(&[1], &[0]))], &Attrs::default());
        assert_eq!(e, "input 1 (data) must be f32, f16 or f64, found i32");
        // Static inference without the axes' value.
        let shape = [2i64, 3, 4];
        let axes_shape = [1i64];
        let ins = [
            Some(TensorInfo { dtype: DType::F32, shape: &shape, value: None }),
            Some(TensorInfo { dtype: DType::I64, shape: &axes_shape, value: None }),
        ];
        let e = (def("ReduceSum").infer)(&ins, &Attrs::default()).unwrap_err();
        assert_eq!(e, "input 2 (axes) must be a constant: its value decides the output shape");
        assert_eq!((def("ReduceSum").infer)(&ins[..1], &axes(vec![1])).unwrap(), vec![(DType::F32, vec![2, 1, 4])]);
    }

    fn norm_input() -> HostTensor {
        let v: Vec<f32> = (0..24).map(|v| (v as f32 - 12.0) / 5.0).collect();
        t(&[2, 3, 2, 2], &v)
    }

    #[test]
    fn batch_normalization_inference() {
        let x = norm_input();
        let (sc, b) = (t(&[3], &[1.0, 0.5, -2.0]), t(&[3], &[0.0, 1.0, 0.25]));
        let (mean, var) = (t(&[3], &[0.5, -1.0, 2.0]), t(&[3], &[1.0, 4.0, 0.25]));
        #[rustfmt::skip]
        let want = [-2.8985512, -2.698651, -2.498751, -2.2988508, 0.85001874, 0.9000125, 0.95000625, 1.0,
            11.427668, 10.629262, 9.830858, 9.0324535, -0.4997502, -0.29985014, -0.09995004, 0.09995007,
            1.4499438, 1.4999375, 1.5499313, 1.599925, 1.8468095, 1.0484049, 0.25, -0.548405];
        let a = attrs(&[("epsilon", float(1e-3)), ("momentum", float(0.9)), ("is_test", int(1)), ("spatial", int(1))]);
        assert_close(&run1("BatchNormalization", &[&x, &sc, &b, &mean, &var], &a), &[2, 3, 2, 2], &want);
        // spatial = 0: one parameter per C × H × W element.
        let x2 = t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
        let p = |v: [f32; 2]| t(&[2], &v);
        let a = attrs(&[("spatial", int(0)), ("epsilon", float(0.0))]);
        let y = run1("BatchNormalization", &[&x2, &p([2.0, 1.0]), &p([0.0, 1.0]), &p([1.0, 0.0]), &p([1.0, 4.0])], &a);
        assert_close(&y, &[2, 2], &[0.0, 2.0, 4.0, 3.0]);
        // 1-D input: one channel.
        let one = t(&[1], &[2.0]);
        let y = run1(
            "BatchNormalization",
            &[&t(&[3], &[1.0, 2.0, 3.0]), &one, &one, &one, &t(&[1], &[1.0])],
            &Attrs::default(),
        );
        let d = (2.0 / 1.00001f64.sqrt()) as f32;
        assert_close(&y, &[3], &[2.0 - d, 2.0, 2.0 + d]);
    }

    #[test]
    fn batch_normalization_errors() {
        let x = norm_input();
        let p3 = t(&[3], &[1.0; 3]);
        let p4 = t(&[4], &[1.0; 4]);
        let e = err("BatchNormalization", &[Some(&x), Some(&p4), Some(&p3), Some(&p3), Some(&p3)], &Attrs::default());
        assert_eq!(e, "input 2 (scale) has 4 elements, expected 3 (the channel count)");
        let e = err(
            "BatchNormalization",
            &[Some(&x), Some(&p3), Some(&p3), Some(&p3), Some(&p4)],
            &attrs(&[("spatial", int(0))]),
        );
        assert_eq!(
            e,
            "input 2 (scale) has 3 elements, expected 12 (the product of X's dimensions after the first, as spatial = 0)"
        );
        let e = def("BatchNormalization").check_attrs(&attrs(&[("training_mode", int(2))])).unwrap_err();
        assert!(e.contains("training_mode"), "{e}");
        let e = def("BatchNormalization").check_attrs(&attrs(&[("epsilon", float(-1.0))])).unwrap_err();
        assert_eq!(e, "attribute `epsilon` of @onnx.BatchNormalization must be finite and ≥ 0, found -1");
        let s = t(&[], &[1.0]);
        let e = err("BatchNormalization", &[Some(&s), Some(&s), Some(&s), Some(&s), Some(&s)], &Attrs::default());
        assert_eq!(e, "input 1 (X) must have rank ≥ 1 (N, C, D1, …), found a scalar");
        let i = ti64(&[3], &[1; 3]);
        let e = err("BatchNormalization", &[Some(&x), Some(&p3), Some(&p3), Some(&i), Some(&p3)], &Attrs::default());
        assert_eq!(e, "input 4 (mean) must be f32, found i64");
    }

    #[test]
    fn instance_normalization() {
        let x = norm_input();
        let (sc, b) = (t(&[3], &[1.0, 0.5, -2.0]), t(&[3], &[0.0, 1.0, 0.25]));
        #[rustfmt::skip]
        let want = [-1.341506, -0.4471683, 0.4471694, 1.341507, 0.32924652, 0.7764155, 1.2235842, 1.6707532,
            2.9330134, 1.1443379, -0.6443377, -2.4330134, -1.3415067, -0.4471689, 0.44716886, 1.3415067,
            0.32924664, 0.77641547, 1.2235845, 1.6707532, 2.933014, 1.1443391, -0.6443369, -2.4330127];
        assert_close(&run1("InstanceNormalization", &[&x, &sc, &b], &Attrs::default()), &[2, 3, 2, 2], &want);
        let e = err("InstanceNormalization", &[Some(&x), Some(&t(&[2], &[1.0; 2])), Some(&b)], &Attrs::default());
        assert_eq!(e, "input 2 (scale) has shape [2], expected [3] (the channel count)");
        let e = err("InstanceNormalization", &[Some(&t(&[2, 3], &[0.0; 6])), Some(&sc), Some(&b)], &Attrs::default());
        assert_eq!(e, "input 1 (input) must have rank ≥ 3 (N, C, D1, …), found rank 2");
        let e = def("InstanceNormalization").check_attrs(&attrs(&[("epsilon", float(f64::INFINITY))])).unwrap_err();
        assert_eq!(e, "attribute `epsilon` of @onnx.InstanceNormalization must be finite and ≥ 0, found inf");
    }

    #[test]
    fn lrn_sums_squares_over_neighbouring_channels() {
        let v: Vec<f32> = (0..20).map(|v| (v as f32 - 9.0) / 3.0).collect();
        let x = t(&[2, 5, 2, 1], &v);
        #[rustfmt::skip]
        let size3 = [-1.1961983, -1.2151321, -0.84559494, -0.8462304, -0.82909375, -0.781969, -0.6874685, -0.52635688,
            -0.29345337, 0.0, 0.29345337, 0.52635688, 0.6874685, 0.781969, 0.82909375, 0.8462304, 0.84559494, 0.8349083,
            1.1961983, 1.1703929];
        let a = attrs(&[("size", int(3)), ("alpha", float(0.5)), ("beta", float(0.75)), ("bias", float(1.0))]);
        assert_close(&run1("LRN", &[&x], &a), &[2, 5, 2, 1], &size3);
        // An even size looks one channel further ahead than behind.
        #[rustfmt::skip]
        let size4 = [-1.924281, -1.7499146, -1.4890246, -1.3093073, -1.1152493, -0.90815324, -0.6905224, -0.46499056,
            -0.2340823, 0.0, 0.23017414, 0.4540766, 0.6691496, 0.8728716, 1.0635891, 1.2403474, 1.4966629, 1.6681154,
            1.9523741, 2.1271782];
        let a = attrs(&[("size", int(4)), ("alpha", float(0.1)), ("beta", float(0.5)), ("bias", float(2.0))]);
        assert_close(&run1("LRN", &[&x], &a), &[2, 5, 2, 1], &size4);
        let e = def("LRN").check_attrs(&Attrs::default()).unwrap_err();
        assert_eq!(e, "@onnx.LRN requires the attribute `size` (the number of channels to sum over)");
        let e = def("LRN").check_attrs(&attrs(&[("size", int(0))])).unwrap_err();
        assert_eq!(e, "attribute `size` of @onnx.LRN must be at least 1, found 0");
        let e = def("LRN").check_attrs(&attrs(&[("size", int(3)), ("beta", float(f64::NAN))])).unwrap_err();
        assert_eq!(e, "attribute `beta` of @onnx.LRN must be finite, found NaN");
        let e = err("LRN", &[Some(&t(&[3], &[0.0; 3]))], &attrs(&[("size", int(3))]));
        assert_eq!(e, "input 1 (X) must have rank ≥ 2 (N, C, D1, …), found rank 1");
    }

    #[test]
    fn attribute_validation() {
        let cases: &[(&str, Attrs, &str)] = &[
            (
                "LeakyRelu",
                attrs(&[("alpha", float(f64::INFINITY))]),
                "attribute `alpha` of @onnx.LeakyRelu must be finite, found inf",
            ),
            ("Elu", attrs(&[("alpha", float(f64::NAN))]), "attribute `alpha` of @onnx.Elu must be finite, found NaN"),
            (
                "Selu",
                attrs(&[("gamma", float(f64::NEG_INFINITY))]),
                "attribute `gamma` of @onnx.Selu must be finite, found -inf",
            ),
            ("Sigmoid", attrs(&[("alpha", float(1.0))]), "@onnx.Sigmoid takes no attributes, found `alpha`"),
            ("Dropout", attrs(&[("is_test", int(3))]), "attribute `is_test` of @onnx.Dropout must be 0 or 1, found 3"),
            (
                "BatchNormalization",
                attrs(&[("spatial", int(-1))]),
                "attribute `spatial` of @onnx.BatchNormalization must be 0 or 1, found -1",
            ),
            (
                "LRN",
                attrs(&[("size", float(3.0))]),
                "attribute `size` of @onnx.LRN must be an integer, found the float 3.0",
            ),
        ];
        for (name, a, want) in cases {
            assert_eq!(def(name).check_attrs(a).unwrap_err(), *want, "{name}");
        }
        // Integer literals are accepted for float attributes.
        def("LeakyRelu").check_attrs(&attrs(&[("alpha", int(1))])).unwrap();
        def("LRN").check_attrs(&attrs(&[("size", int(5))])).unwrap();
    }

    #[test]
    fn kernels_reject_malformed_tensors_and_outputs() {
        let bad = HostTensor { dtype: DType::F32, shape: vec![4], data: vec![0; 3] };
        let good = t(&[4], &[1.0; 4]);
        for op in OPS {
            let mut outs = vec![HostTensor::zeros(DType::F32, &[4]).unwrap()];
            let ins = vec![Some(&bad); op.min_inputs.max(1)];
            let e = (op.op.id().host_kernel().unwrap())(&ins, &attrs(&[("size", int(1))]), &mut outs).unwrap_err();
            assert!(e.contains("needs 16 bytes, found 3") || e.contains("attribute"), "{}: {e}", op.name);
        }
        // A wrong output shape or a missing output is an error.
        let mut outs = vec![HostTensor::zeros(DType::F32, &[5]).unwrap()];
        let e = (def("Exp").op.id().host_kernel().unwrap())(&[Some(&good)], &Attrs::default(), &mut outs).unwrap_err();
        assert_eq!(e, "output 1 is f32[5], expected f32[4]");
        let e = (def("Exp").op.id().host_kernel().unwrap())(&[Some(&good)], &Attrs::default(), &mut []).unwrap_err();
        assert_eq!(e, "expected 1 to 1 output tensors, found 0");
        let e = (def("Exp").op.id().host_kernel().unwrap())(&[], &Attrs::default(), &mut outs).unwrap_err();
        assert_eq!(e, "input 1 (X) is required");
    }

    /// Every operator on a spread of shapes (empty ones, scalars, huge dimensions next to a
    /// zero) and dtypes: errors are fine, panics are not.
    #[test]
    fn no_operator_panics() {
        let huge = 1i64 << 40;
        let tensors = [
            t(&[], &[1.5]),
            t(&[0], &[]),
            t(&[2, 0, 3], &[]),
            HostTensor::zeros(DType::F32, &[0, huge, huge]).unwrap(),
            HostTensor::zeros(DType::F32, &[huge, 0]).unwrap(),
            t(&[3], &[-1.0, 0.0, 2.0]),
            t(&[2, 3], &[1.0, -2.0, 3.0, 0.0, 5.0, -6.0]),
            t(&[1, 3, 1, 2], &[0.5; 6]),
            ti64(&[1], &[-1]),
            ti32(&[2], &[0, 3]),
            tbool(&[1], &[true]),
        ];
        let attr_sets = [
            Attrs::default(),
            attrs(&[("size", int(3))]),
            attrs(&[("size", int(i64::MAX)), ("alpha", float(1.0))]),
            attrs(&[("axis", int(1))]),
            attrs(&[("axis", int(-7))]),
            attrs(&[("axis", int(0)), ("onnx_opset", int(6))]),
            attrs(&[("axes", AttrValue::Ints(vec![0]))]),
            attrs(&[("axes", AttrValue::Ints(vec![-1])), ("keepdims", int(0))]),
            attrs(&[("broadcast", int(1)), ("axis", int(0))]),
            attrs(&[("spatial", int(0))]),
            attrs(&[("onnx_opset", int(6))]),
        ];
        let limit = 1 << 20;
        for op in OPS {
            for a in attr_sets.iter().filter(|a| op.check_attrs(a).is_ok()) {
                let arity = op.min_inputs.min(3);
                let mut combo = vec![0usize; arity];
                loop {
                    // Inputs past the third (BatchNormalization's mean and var) are fixed.
                    let ins: Vec<Option<&HostTensor>> = combo
                        .iter()
                        .map(|&i| Some(&tensors[i]))
                        .chain(std::iter::repeat_n(Some(&tensors[5]), op.min_inputs - arity))
                        .collect();
                    if let Ok(inferred) = (op.infer)(&infos(&ins), a) {
                        if inferred.iter().all(|(_, s)| numel(s).is_some_and(|n| n < limit)) {
                            let mut outs: Vec<HostTensor> =
                                inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
                            let _ = (op.op.id().host_kernel().unwrap())(&ins, a, &mut outs);
                        }
                    }
                    // Next combination.
                    let mut k = 0;
                    while k < arity {
                        combo[k] += 1;
                        if combo[k] < tensors.len() {
                            break;
                        }
                        combo[k] = 0;
                        k += 1;
                    }
                    if k == arity {
                        break;
                    }
                }
            }
        }
    }

    /// numpy's `RandomState(0).uniform(0, 1, 3)` and `RandomState(42)`'s first draw.
    #[test]
    fn mt19937_matches_numpy() {
        let mut r = Mt19937::new(0);
        let got: Vec<f64> = (0..3).map(|_| r.next_f64()).collect();
        assert_eq!(got, [0.5488135039273248, 0.7151893663724195, 0.6027633760716439]);
        assert_eq!(Mt19937::new(42).next_f64(), 0.3745401188473625);
        // Past the first 624 words (a twist).
        let mut r = Mt19937::new(0);
        let v: Vec<f64> = (0..400).map(|_| r.next_f64()).collect();
        assert_eq!(v[399], 0.18523232523618394);
    }

    #[test]
    fn dropout_training_masks_with_the_seeded_stream() {
        let x = t(&[2, 3], &[1.0, -2.0, 3.0, -4.0, 5.0, 6.0]);
        let (r, on) = (t(&[], &[0.6]), tbool(&[], &[true]));
        let outs = run("Dropout", &[Some(&x), Some(&r), Some(&on)], &attrs(&[("seed", int(0))])).unwrap();
        // u = 0.549, 0.715, 0.603, 0.545, 0.424, 0.646: kept where u >= 0.6.
        let keep = [false, true, true, false, false, true];
        assert_eq!(outs[1], tbool(&[2, 3], &keep));
        let scale = 1.0f32 / (1.0f32 - 0.6f32);
        let want: Vec<f32> = [1.0f32, -2.0, 3.0, -4.0, 5.0, 6.0]
            .iter()
            .zip(keep)
            .map(|(&v, k)| if k { v * scale } else { 0.0 * v })
            .collect();
        assert_eq!(outs[0], t(&[2, 3], &want));
        // Ratio 0 or training off: a copy.
        let outs = run("Dropout", &[Some(&x), Some(&t(&[], &[0.0])), Some(&on)], &attrs(&[("seed", int(0))])).unwrap();
        assert_eq!(outs[0], x);
    }

    #[test]
    fn batch_normalization_training_uses_the_batch_statistics() {
        // N = 2, C = 2, 2 elements each: channel 0 holds 1, 2, 5, 6; channel 1 holds 0, 0, 4, 4.
        let x = t(&[2, 2, 2], &[1.0, 2.0, 0.0, 0.0, 5.0, 6.0, 4.0, 4.0]);
        let (s, b) = (t(&[2], &[1.0, 2.0]), t(&[2], &[0.0, 1.0]));
        let (m, v) = (t(&[2], &[1.0, 0.0]), t(&[2], &[1.0, 1.0]));
        let a = attrs(&[("training_mode", int(1)), ("epsilon", float(0.0)), ("momentum", float(0.5))]);
        let outs = run("BatchNormalization", &[Some(&x), Some(&s), Some(&b), Some(&m), Some(&v)], &a).unwrap();
        // Means 3.5 and 2, variances 4.25 and 4.
        let sd0 = 4.25f32.sqrt();
        let y0: Vec<f32> = [1.0f32, 2.0, 5.0, 6.0].iter().map(|&v| (v - 3.5) / sd0).collect();
        let want = t(&[2, 2, 2], &[y0[0], y0[1], -1.0, -1.0, y0[2], y0[3], 3.0, 3.0]);
        assert_eq!(outs[0], want);
        assert_eq!(outs[1], t(&[2], &[2.25, 1.0]));
        assert_eq!(outs[2], t(&[2], &[2.625, 2.5]));
        assert_eq!(outs[3], t(&[2], &[3.5, 2.0]));
        assert_eq!(outs[4], t(&[2], &[4.25, 4.0]));
    }

    /// f16 softmax rounds every step to f16, as the ONNX reference on f16 arrays.
    #[test]
    fn softmax_narrow_and_f64() {
        let h = |v: &[f32]| {
            let d: Vec<u8> = v.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect();
            HostTensor::new(DType::F16, vec![v.len() as i64], d).unwrap()
        };
        let x = h(&[0.1, 0.7, -1.3, 2.2]);
        let y = &run("Softmax", &[Some(&x)], &Attrs::default()).unwrap()[0];
        let r = |v: f32| half::f16::from_f32(v).to_f32();
        let xs = [0.1f32, 0.7, -1.3, 2.2].map(r);
        let e = xs.map(|v| r(r(v - r(2.2)).exp()));
        let s = r(e.iter().sum());
        assert_eq!(y, &h(&e.map(|v| r(v / s))));
        let x64 =
            HostTensor::new(DType::F64, vec![3], [1.0f64, 2.0, 3.0].iter().flat_map(|v| v.to_le_bytes()).collect())
                .unwrap();
        let y = run("Softmax", &[Some(&x64)], &Attrs::default()).unwrap().remove(0).to_f64();
        let z: f64 = [1.0f64, 2.0, 3.0].iter().map(|v| (v - 3.0).exp()).sum();
        assert_eq!(y, [(-2.0f64).exp() / z, (-1.0f64).exp() / z, 1.0 / z]);
    }
}
