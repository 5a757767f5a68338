//! Operator schemas of the elementwise family: attributes, validation and shape inference
//! (the kernels are in `crate::ops::elementwise`).

use super::shape::broadcast;
use super::Operator;
use crate::ir::attrs::*;
use crate::ir::host_tensor::{numel, HostTensor};
use crate::ir::schema::*;
use crate::ir::types::DType;
use std::borrow::Cow;
use std::mem::size_of;

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(Clip, in 1..=3, out 1..=1, attrs &[attr!("min", Float), attr!("max", Float)],
        validate validate_clip, infer infer_clip,
        "clamp to [min, max]: attributes (opset 6) or scalar inputs 2, 3 (opset 11+); default ±inf"),
    op!(LeakyRelu, in 1..=1, out 1..=1, attrs &[attr!("alpha", Float)],
        validate validate_leaky_relu, infer infer_f32_f64, "x > 0 ? x : alpha * x (alpha 0.01)"),
    op!(Sigmoid, in 1..=1, out 1..=1, attrs &[], infer infer_float, "1 / (1 + exp(-x))"),
    op!(Tanh, in 1..=1, out 1..=1, attrs &[], infer infer_float, "tanh(x)"),
    op!(Exp, in 1..=1, out 1..=1, attrs &[], infer infer_float, "exp(x)"),
    op!(Sqrt, in 1..=1, out 1..=1, attrs &[], infer infer_float, "sqrt(x) (NaN for x < 0)"),
    op!(Pow, in 2..=2, out 1..=1, attrs &[attr!("broadcast", Int), attr!("axis", Int)],
        validate validate_pow, infer infer_pow,
        "x ^ y with numpy broadcasting: x f32, f16, f64, i32 or i64, y any numeric dtype (computed in f64 unless both are f32); opset ≤ 6 `broadcast`/`axis` accepted"),
    op!(Neg, in 1..=1, out 1..=1, attrs &[], infer infer_signed, "-x (floats and signed integers; integers wrap)"),
    op!(Abs, in 1..=1, out 1..=1, attrs &[], infer infer_abs, "|x| (every numeric dtype; integers wrap)"),
    op!(Elu, in 1..=1, out 1..=1, attrs &[attr!("alpha", Float)],
        validate validate_elu, infer infer_f32_f64, "x > 0 ? x : alpha * (exp(x) - 1) (alpha 1.0)"),
    op!(Selu, in 1..=1, out 1..=1, attrs &[attr!("alpha", Float), attr!("gamma", Float)],
        validate validate_selu, infer infer_f32_f64,
        "gamma * (x > 0 ? x : alpha * (exp(x) - 1)) (alpha 1.6732632, gamma 1.0507010)"),
    op!(Softplus, in 1..=1, out 1..=1, attrs &[], infer infer_float, "ln(1 + exp(x)), computed stably"),
    op!(Softsign, in 1..=1, out 1..=1, attrs &[], infer infer_float, "x / (1 + |x|)"),
    op!(PRelu, in 2..=2, out 1..=1, attrs &[attr!("onnx_opset", Int)],
        validate validate_prelu, infer infer_prelu,
        "x > 0 ? x : slope * x; slope broadcasts to x, or is 1-D per channel (opset 6, preferred if `onnx_opset` < 7)"),
    op!(Add, in 2..=2, out 1..=1, attrs &[attr!("broadcast", Int), attr!("axis", Int)],
        validate validate_add, infer infer_arith,
        "a + b with numpy broadcasting (every numeric dtype: integers wrap, f16 computes in f32; opset ≤ 6 `broadcast`/`axis` accepted)"),
    op!(Sub, in 2..=2, out 1..=1, attrs &[attr!("broadcast", Int), attr!("axis", Int)],
        validate validate_sub, infer infer_arith,
        "a - b with numpy broadcasting (every numeric dtype; opset ≤ 6 `broadcast`/`axis` accepted)"),
    op!(Mul, in 2..=2, out 1..=1, attrs &[attr!("broadcast", Int), attr!("axis", Int)],
        validate validate_mul, infer infer_arith,
        "a * b with numpy broadcasting (every numeric dtype; opset ≤ 6 `broadcast`/`axis` accepted)"),
    op!(Div, in 2..=2, out 1..=1, attrs &[attr!("broadcast", Int), attr!("axis", Int)],
        validate validate_div, infer infer_arith,
        "a / b with numpy broadcasting (every numeric dtype; integer division truncates, by zero is an error)"),
    op!(Max, in 1..=64, out 1..=1, attrs &[], infer infer_variadic,
        "elementwise maximum of 1 to 64 inputs with broadcasting (every numeric dtype; NaN propagates)"),
    op!(Min, in 1..=64, out 1..=1, attrs &[], infer infer_variadic,
        "elementwise minimum of 1 to 64 inputs with broadcasting (every numeric dtype; NaN propagates)"),
    op!(Sum, in 1..=64, out 1..=1, attrs &[], infer infer_variadic,
        "elementwise sum of 1 to 64 inputs with broadcasting (every numeric dtype)"),
    op!(Dropout, in 1..=3, out 1..=2,
        attrs &[attr!("ratio", Float), attr!("seed", Int), attr!("is_test", Int)],
        validate validate_dropout, infer infer_dropout,
        "inference: output = x, mask = all true (bool); training (training_mode true and ratio > 0): mask = u >= \
        ratio with u uniform in [0, 1) from numpy's RandomState(seed) (MT19937; a random seed without `seed`), \
        output = mask * x / (1 - ratio)"),
    op!(Identity, in 1..=1, out 1..=1, attrs &[], infer infer_any, "a copy of x (any dtype)"),
    op!(Softmax, in 1..=1, out 1..=1, attrs &[attr!("axis", Int), attr!("onnx_opset", Int)],
        validate validate_softmax, infer infer_softmax,
        "softmax along `axis` (default -1); `onnx_opset` < 13: over x coerced to 2-D at `axis` (default 1)"),
    op!(LogSoftmax, in 1..=1, out 1..=1, attrs &[attr!("axis", Int), attr!("onnx_opset", Int)],
        validate validate_log_softmax, infer infer_softmax,
        "log of softmax along `axis` (default -1); `onnx_opset` < 13: over x coerced to 2-D at `axis` (default 1)"),
    op!(ReduceMean, in 1..=2, out 1..=1,
        attrs &[attr!("axes", Ints), attr!("keepdims", Int), attr!("noop_with_empty_axes", Int)],
        validate validate_reduce_mean, infer infer_reduce_mean,
        "f32 mean over `axes` (attribute or constant input 2; default all); keepdims 1, noop_with_empty_axes 0"),
    op!(ReduceSum, in 1..=2, out 1..=1,
        attrs &[attr!("axes", Ints), attr!("keepdims", Int), attr!("noop_with_empty_axes", Int)],
        validate validate_reduce_sum, infer infer_reduce_sum,
        "f32/i32/i64 sum over `axes` (attribute or constant input 2; default all); keepdims 1, noop_with_empty_axes 0"),
    op!(ReduceMax, in 1..=2, out 1..=1,
        attrs &[attr!("axes", Ints), attr!("keepdims", Int), attr!("noop_with_empty_axes", Int)],
        validate validate_reduce_max, infer infer_reduce_max,
        "f32/i32/i64 maximum over `axes` (NaN propagates; of nothing: -inf, or the type's minimum); `axes` as for ReduceSum"),
    op!(ReduceMin, in 1..=2, out 1..=1,
        attrs &[attr!("axes", Ints), attr!("keepdims", Int), attr!("noop_with_empty_axes", Int)],
        validate validate_reduce_min, infer infer_reduce_min,
        "f32/i32/i64 minimum over `axes` (NaN propagates; of nothing: +inf, or the type's maximum); `axes` as for ReduceSum"),
    op!(ReduceProd, in 1..=2, out 1..=1,
        attrs &[attr!("axes", Ints), attr!("keepdims", Int), attr!("noop_with_empty_axes", Int)],
        validate validate_reduce_prod, infer infer_reduce_prod,
        "f32/i32/i64 product over `axes` (integers wrap; of nothing: 1); `axes` as for ReduceSum"),
    op!(ReduceL1, in 1..=2, out 1..=1,
        attrs &[attr!("axes", Ints), attr!("keepdims", Int), attr!("noop_with_empty_axes", Int)],
        validate validate_reduce_l1, infer infer_reduce_l1,
        "f32/i32/i64 sum of absolute values over `axes`; `axes` as for ReduceSum"),
    op!(ReduceL2, in 1..=2, out 1..=1,
        attrs &[attr!("axes", Ints), attr!("keepdims", Int), attr!("noop_with_empty_axes", Int)],
        validate validate_reduce_l2, infer infer_reduce_l2,
        "f32 square root of the sum of squares over `axes`; `axes` as for ReduceSum"),
    op!(ReduceLogSum, in 1..=2, out 1..=1,
        attrs &[attr!("axes", Ints), attr!("keepdims", Int), attr!("noop_with_empty_axes", Int)],
        validate validate_reduce_log_sum, infer infer_reduce_log_sum,
        "f32 log of the sum over `axes` (of nothing: -inf); `axes` as for ReduceSum"),
    op!(ReduceLogSumExp, in 1..=2, out 1..=1,
        attrs &[attr!("axes", Ints), attr!("keepdims", Int), attr!("noop_with_empty_axes", Int)],
        validate validate_reduce_log_sum_exp, infer infer_reduce_log_sum_exp,
        "f32 log of the sum of exponentials over `axes`, computed stably (of nothing: -inf); `axes` as for ReduceSum"),
    op!(ReduceSumSquare, in 1..=2, out 1..=1,
        attrs &[attr!("axes", Ints), attr!("keepdims", Int), attr!("noop_with_empty_axes", Int)],
        validate validate_reduce_sum_square, infer infer_reduce_sum_square,
        "f32/i32/i64 sum of squares over `axes` (integers wrap); `axes` as for ReduceSum"),
    op!(BatchNormalization, in 5..=5, out 1..=5,
        attrs &[attr!("epsilon", Float), attr!("momentum", Float), attr!("spatial", Int), attr!("is_test", Int),
            attr!("training_mode", Int)],
        validate validate_batch_norm, infer infer_batch_norm,
        "inference: scale * (x - mean) / sqrt(var + epsilon) + B per channel (spatial 0: per C×D1×…), only Y; \
        training_mode 1: normalizes with the batch's mean and (population) variance and also outputs the running \
        mean and var (mean * momentum + batch mean * (1 - momentum), momentum 0.9) and the batch mean and var"),
    op!(ArgMax, in 1..=1, out 1..=1, attrs &[attr!("axis", Int), attr!("keepdims", Int), attr!("select_last_index", Int)],
        validate validate_arg_max, infer infer_arg_reduce,
        "i64 index of the largest element along `axis` (default 0; NaN counts as largest, as in numpy); keepdims 1; \
        ties: the first, or the last with select_last_index 1"),
    op!(ArgMin, in 1..=1, out 1..=1, attrs &[attr!("axis", Int), attr!("keepdims", Int), attr!("select_last_index", Int)],
        validate validate_arg_min, infer infer_arg_reduce,
        "i64 index of the smallest element along `axis` (NaN counts as smallest, as in numpy); as ArgMax"),
    op!(LayerNormalization, in 2..=3, out 1..=3,
        attrs &[attr!("axis", Int), attr!("epsilon", Float), attr!("stash_type", Int)],
        validate validate_layer_norm, infer infer_layer_norm,
        "(x - mean) / sqrt(var + epsilon) * Scale + B over the dims from `axis` (default -1) on; Scale and B \
        broadcast to those dims; optional outputs Mean and InvStdDev (epsilon 1e-5; computed in f64)"),
    op!(InstanceNormalization, in 3..=3, out 1..=1, attrs &[attr!("epsilon", Float)],
        validate validate_instance_norm, infer infer_instance_norm,
        "scale * (x - mean) / sqrt(var + epsilon) + B with statistics per (n, c) (epsilon 1e-5)"),
    op!(LRN, in 1..=1, out 1..=1,
        attrs &[attr!("alpha", Float), attr!("beta", Float), attr!("bias", Float), attr!("size", Int)],
        validate validate_lrn, infer infer_lrn,
        "x / (bias + alpha / size * Σ x² over `size` channels) ^ beta (alpha 1e-4, beta 0.75, bias 1)"),
];

pub(crate) const F32: &[DType] = &[DType::F32];
pub(crate) const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::F64];
/// Every numeric dtype: what arithmetic, the comparisons and Mod take.
pub(crate) const NUMERIC: &[DType] = DType::ALL.split_at(DType::NUMERIC_COUNT).0;
/// The signed numeric dtypes (Neg).
pub(crate) const SIGNED: &[DType] =
    &[DType::F32, DType::F16, DType::F64, DType::I8, DType::I16, DType::I32, DType::I64];
/// The dtypes the arithmetic reductions (Sum, Prod, L1, SumSquare) take.
pub(crate) const REDUCE_ARITH: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::F64,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
];
/// ReduceMax and ReduceMin take bool too (any, all).
pub(crate) const REDUCE_ORDERED: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::F64,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::Bool,
];
/// The dtypes Add, Sub, Mul and Div compute in: every numeric dtype and bf16 (in f32).
pub(crate) const ARITH: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::F64,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::BF16,
];
/// The f32 maps (the activation family, LeakyRelu, Elu, Selu) take f16 and bf16 too,
/// computed in f32 and rounded once.
pub(crate) const F32_BF16: &[DType] = &[DType::F32, DType::F16, DType::BF16];
/// The unary maps of the activation family, Relu, LeakyRelu, Elu and Selu take f64 too,
/// computed in f64.
pub(crate) const F32_BF16_F64: &[DType] = &[DType::F32, DType::F16, DType::BF16, DType::F64];

/// An element type the kernels compute in, read from and written to little-endian bytes.
/// (Every implementor is a plain number: any bit pattern is a valid value.)
pub(crate) trait Elem: Copy {
    /// The element's size in bytes.
    const SIZE: usize;
    fn read(b: &[u8]) -> Self;
    fn write(self, b: &mut [u8]);
}

macro_rules! elem {
    ($t:ty, $n:literal) => {
        impl Elem for $t {
            const SIZE: usize = $n;
            #[inline(always)]
            fn read(b: &[u8]) -> Self {
                let mut a = [0u8; $n];
                a.copy_from_slice(&b[..$n]);
                <$t>::from_le_bytes(a)
            }
            #[inline(always)]
            fn write(self, b: &mut [u8]) {
                b[..$n].copy_from_slice(&self.to_le_bytes());
            }
        }
    };
}
elem!(f32, 4);
elem!(f64, 8);
elem!(half::f16, 2);
elem!(half::bf16, 2);
elem!(i8, 1);
elem!(i16, 2);
elem!(i32, 4);
elem!(i64, 8);
elem!(u8, 1);
elem!(u16, 2);
elem!(u32, 4);
elem!(u64, 8);

/// Little-endian bytes viewed in place as elements, when they are aligned for `T` (and
/// a whole number of elements).
pub(crate) fn view<T: Elem>(data: &[u8]) -> Option<&[T]> {
    if cfg!(target_endian = "big") {
        return None;
    }
    // SAFETY: every `Elem` is a plain number (any bit pattern is valid), and `align_to`
    // only hands out the aligned middle part (checked to be everything).
    let (head, mid, tail) = unsafe { data.align_to::<T>() };
    (head.is_empty() && tail.is_empty()).then_some(mid)
}

/// The elements of `t` (its data length has been checked by [`prepare`]): borrowed in place
/// when aligned.
pub(crate) fn values<T: Elem>(t: &HostTensor) -> Cow<'_, [T]> {
    match view::<T>(&t.data) {
        Some(v) => Cow::Borrowed(v),
        None => Cow::Owned(t.data.chunks_exact(size_of::<T>()).map(T::read).collect()),
    }
}

/// The integer elements of an i32 or i64 tensor (empty for other dtypes).
pub(crate) fn ints_of(t: &HostTensor) -> Vec<i64> {
    match t.dtype {
        DType::I64 => values::<i64>(t).into_owned(),
        DType::I32 => values::<i32>(t).iter().map(|&v| i64::from(v)).collect(),
        _ => Vec::new(),
    }
}

/// The product of `dims` (callers only use it on shapes of tensors that exist with at
/// least one element, so it cannot overflow; it saturates anyway).
pub(crate) fn prod(dims: &[i64]) -> usize {
    dims.iter().fold(1usize, |a, &d| a.saturating_mul(d.max(0) as usize))
}

pub(crate) fn input<'a, 'b>(
    ins: &'a [Option<TensorInfo<'b>>],
    i: usize,
    name: &str,
) -> Result<&'a TensorInfo<'b>, String> {
    ins.get(i).and_then(|x| x.as_ref()).ok_or_else(|| format!("input {} ({name}) is required", i + 1))
}

pub(crate) fn optional<'a, 'b>(ins: &'a [Option<TensorInfo<'b>>], i: usize) -> Option<&'a TensorInfo<'b>> {
    ins.get(i).and_then(|x| x.as_ref())
}

/// `f32`, `f32 or i64`, `f32, i32 or i64`.
pub(crate) fn dtype_list(allowed: &[DType]) -> String {
    match allowed {
        [] => "nothing".into(),
        [one] => one.name().into(),
        [rest @ .., last] => {
            let rest: Vec<&str> = rest.iter().map(|d| d.name()).collect();
            format!("{} or {}", rest.join(", "), last.name())
        }
    }
}

pub(crate) fn check_dtype(t: &TensorInfo, i: usize, name: &str, allowed: &[DType]) -> Result<(), String> {
    if allowed.contains(&t.dtype) {
        Ok(())
    } else {
        Err(format!("input {} ({name}) must be {}, found {}", i + 1, dtype_list(allowed), t.dtype))
    }
}

/// Checks that an input holds exactly one element (ONNX scalars; `[1]` is accepted too).
pub(crate) fn check_scalar(t: &TensorInfo, i: usize, name: &str) -> Result<(), String> {
    if numel(t.shape) == Some(1) {
        Ok(())
    } else {
        Err(format!("input {} ({name}) must be a scalar (one element), found shape {:?}", i + 1, t.shape))
    }
}

/// Normalizes a possibly negative axis.
pub(crate) fn norm_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    }
    Ok((if axis < 0 { axis + r } else { axis }) as usize)
}

// Attribute checks.

pub(crate) fn finite_attr(a: &Attrs, name: &str, op: &str) -> Result<(), String> {
    if a.get(name).is_some() {
        let v = a.float(name, 0.0);
        if !v.is_finite() {
            return Err(format!("attribute `{name}` of @onnx.{op} must be finite, found {v}"));
        }
    }
    Ok(())
}

pub(crate) fn flag_attr(a: &Attrs, name: &str, op: &str) -> Result<(), String> {
    match a.get(name) {
        Some(AttrValue::Int(v)) if *v != 0 && *v != 1 => {
            Err(format!("attribute `{name}` of @onnx.{op} must be 0 or 1, found {v}"))
        }
        _ => Ok(()),
    }
}

pub(crate) fn opset_attr(a: &Attrs, op: &str) -> Result<(), String> {
    match a.get("onnx_opset") {
        Some(AttrValue::Int(v)) if *v < 1 => {
            Err(format!("attribute `onnx_opset` of @onnx.{op} must be a positive opset version, found {v}"))
        }
        _ => Ok(()),
    }
}

/// B's shape for the opset ≤ 6 form: with `broadcast = 1` and `axis`, B's dimensions line up
/// with A's starting at `axis` (trailing 1s are appended); otherwise B's own shape (numpy
/// broadcasting, which covers the legacy suffix matching).
pub(crate) fn legacy_b_shape(a: &[i64], b: &[i64], attrs: &Attrs) -> Result<Vec<i64>, String> {
    let Some(AttrValue::Int(axis)) = attrs.get("axis") else { return Ok(b.to_vec()) };
    if attrs.int("broadcast", 0) != 1 {
        return Ok(b.to_vec());
    }
    let r = a.len() as i64;
    let start = if *axis < 0 { axis + r } else { *axis };
    if start < 0 || start + b.len() as i64 > r {
        return Err(format!(
            "axis {axis} is out of range: B (rank {}) placed at axis {axis} does not fit in A's rank {r}",
            b.len()
        ));
    }
    let mut s = b.to_vec();
    s.resize((r - start) as usize, 1);
    Ok(s)
}

/// Dtype, effective B shape and output shape of a binary arithmetic operator.
pub(crate) fn arith_shapes(
    ins: &[Option<TensorInfo>],
    attrs: &Attrs,
    allowed: &[DType],
) -> Result<(DType, Vec<i64>), String> {
    let (a, b) = (input(ins, 0, "A")?, input(ins, 1, "B")?);
    check_dtype(a, 0, "A", allowed)?;
    if b.dtype != a.dtype {
        return Err(format!("inputs 1 and 2 must have the same dtype, found {} and {}", a.dtype, b.dtype));
    }
    let bsh = legacy_b_shape(a.shape, b.shape, attrs)?;
    Ok((a.dtype, broadcast(a.shape, &bsh)?))
}

pub(crate) fn legacy_bcast_attrs(a: &Attrs, op: &str) -> Result<(), String> {
    flag_attr(a, "broadcast", op)
}

pub(crate) fn validate_pow(a: &Attrs) -> Result<(), String> {
    legacy_bcast_attrs(a, "Pow")
}
pub(crate) fn validate_sub(a: &Attrs) -> Result<(), String> {
    legacy_bcast_attrs(a, "Sub")
}
pub(crate) fn validate_mul(a: &Attrs) -> Result<(), String> {
    legacy_bcast_attrs(a, "Mul")
}
pub(crate) fn validate_div(a: &Attrs) -> Result<(), String> {
    legacy_bcast_attrs(a, "Div")
}

pub(crate) fn infer_arith(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (dtype, shape) = arith_shapes(ins, attrs, ARITH)?;
    Ok(vec![(dtype, shape)])
}

/// Pow's base takes these dtypes (ONNX's T); its exponent any numeric dtype (T1).
pub(crate) const POW_BASE: &[DType] = &[DType::F32, DType::F16, DType::F64, DType::I32, DType::I64];

pub(crate) fn infer_pow(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (a, b) = (input(ins, 0, "X")?, input(ins, 1, "Y")?);
    check_dtype(a, 0, "X", POW_BASE)?;
    check_dtype(b, 1, "Y", NUMERIC)?;
    let bsh = legacy_b_shape(a.shape, b.shape, attrs)?;
    Ok(vec![(a.dtype, broadcast(a.shape, &bsh)?)])
}

pub(crate) fn validate_add(a: &Attrs) -> Result<(), String> {
    legacy_bcast_attrs(a, "Add")
}

// ---------------------------------------------------------------------------------------
// Unary operators.

pub(crate) fn infer_f32(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", F32_BF16)?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

/// [`infer_f32`] with f64 too: the activation family's maps, Relu, LeakyRelu, Elu, Selu.
pub(crate) fn infer_f32_f64(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", F32_BF16_F64)?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

pub(crate) fn infer_float(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", FLOATS)?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

pub(crate) fn infer_signed(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", SIGNED)?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

pub(crate) fn infer_abs(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", NUMERIC)?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

pub(crate) fn infer_any(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "input")?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

pub(crate) fn validate_clip(a: &Attrs) -> Result<(), String> {
    for name in ["min", "max"] {
        if a.get(name).is_some() && a.float(name, 0.0).is_nan() {
            return Err(format!("attribute `{name}` of @onnx.Clip must not be NaN"));
        }
    }
    Ok(())
}

pub(crate) fn infer_clip(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "input")?;
    check_dtype(x, 0, "input", NUMERIC)?;
    for (i, name) in [(1, "min"), (2, "max")] {
        if let Some(t) = optional(ins, i) {
            if attrs.get(name).is_some() {
                return Err(format!("`{name}` is given both as an attribute and as input {}", i + 1));
            }
            check_dtype(t, i, name, &[x.dtype])?;
            check_scalar(t, i, name)?;
        }
    }
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

pub(crate) fn validate_leaky_relu(a: &Attrs) -> Result<(), String> {
    finite_attr(a, "alpha", "LeakyRelu")
}

pub(crate) fn validate_elu(a: &Attrs) -> Result<(), String> {
    finite_attr(a, "alpha", "Elu")
}

pub(crate) fn validate_selu(a: &Attrs) -> Result<(), String> {
    finite_attr(a, "alpha", "Selu")?;
    finite_attr(a, "gamma", "Selu")
}

// PRelu.

pub(crate) fn validate_prelu(a: &Attrs) -> Result<(), String> {
    opset_attr(a, "PRelu")
}

/// The shape slope broadcasts with: its own when it broadcasts to X unidirectionally, or
/// `[C, 1, …]` (aligned to X's channel dimension 1) for an opset 6 per-channel 1-D slope.
/// With `onnx_opset` < 7 the per-channel reading is tried first.
pub(crate) fn prelu_slope_shape(x: &[i64], s: &[i64], attrs: &Attrs) -> Result<Vec<i64>, String> {
    let legacy = attrs.int("onnx_opset", 7) < 7;
    let channel = || -> Option<Vec<i64>> {
        if s.len() == 1 && x.len() >= 2 && s[0] == x[1] {
            let mut v = vec![1; x.len() - 1];
            v[0] = s[0];
            Some(v)
        } else {
            None
        }
    };
    if legacy {
        if let Some(v) = channel() {
            return Ok(v);
        }
    }
    if broadcast(x, s).is_ok_and(|o| o == x) {
        return Ok(s.to_vec());
    }
    if let Some(v) = channel() {
        return Ok(v);
    }
    Err(format!(
        "slope of shape {s:?} does not broadcast to X of shape {x:?} \
         (it must broadcast unidirectionally, or be 1-D with X's channel count)"
    ))
}

pub(crate) fn infer_prelu(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (x, s) = (input(ins, 0, "X")?, input(ins, 1, "slope")?);
    check_dtype(x, 0, "X", F32)?;
    check_dtype(s, 1, "slope", F32)?;
    prelu_slope_shape(x.shape, s.shape, attrs)?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

// ---------------------------------------------------------------------------------------
// Variadic Max, Min, Sum.

/// Input `i` (0-based) of a variadic operator has the dtype `d` of its first input.
pub(crate) fn same_dtype(i: usize, d: DType, first: DType) -> Result<(), String> {
    if d == first {
        Ok(())
    } else {
        Err(format!("input {} is {d}, but input 1 is {first}: all inputs must have one dtype", i + 1))
    }
}

pub(crate) fn infer_variadic(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "data_0")?;
    check_dtype(x, 0, "data_0", NUMERIC)?;
    let mut shape = x.shape.to_vec();
    for i in 1..ins.len() {
        let t = input(ins, i, &format!("data_{i}"))?;
        same_dtype(i, t.dtype, x.dtype)?;
        shape = broadcast(&shape, t.shape).map_err(|e| format!("input {}: {e}", i + 1))?;
    }
    Ok(vec![(x.dtype, shape)])
}

// ---------------------------------------------------------------------------------------
// Dropout and Identity.

pub(crate) fn validate_dropout(a: &Attrs) -> Result<(), String> {
    if a.get("ratio").is_some() {
        let r = a.float("ratio", 0.5);
        if !(0.0..1.0).contains(&r) {
            return Err(format!("attribute `ratio` of @onnx.Dropout must be in [0, 1), found {r}"));
        }
    }
    flag_attr(a, "is_test", "Dropout")
}

pub(crate) fn infer_dropout(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    validate_dropout(attrs)?;
    let x = input(ins, 0, "data")?;
    check_dtype(x, 0, "data", FLOATS)?;
    if let Some(r) = optional(ins, 1) {
        check_dtype(r, 1, "ratio", FLOATS)?;
        check_scalar(r, 1, "ratio")?;
    }
    if let Some(t) = optional(ins, 2) {
        check_dtype(t, 2, "training_mode", &[DType::Bool])?;
        check_scalar(t, 2, "training_mode")?;
    }
    if let Some(r) = optional(ins, 1).and_then(|r| r.value) {
        let v = r.to_f64().first().copied().unwrap_or(0.0);
        if !(0.0..1.0).contains(&v) {
            return Err(format!("the ratio of @onnx.Dropout must be in [0, 1), found {v}"));
        }
    }
    Ok(vec![(x.dtype, x.shape.to_vec()), (DType::Bool, x.shape.to_vec())])
}

// ---------------------------------------------------------------------------------------
// Softmax and LogSoftmax.

pub(crate) fn validate_softmax(a: &Attrs) -> Result<(), String> {
    opset_attr(a, "Softmax")
}

pub(crate) fn validate_log_softmax(a: &Attrs) -> Result<(), String> {
    opset_attr(a, "LogSoftmax")
}

/// `(outer, n, inner)`: the input is `outer` blocks of `n` × `inner` elements and the
/// softmax runs over the `n` elements of each block at stride `inner`. Opset < 13 coerces
/// the input to 2-D at `axis` (default 1): `n` is the product of dimensions `axis..`.
/// Opset 13 normalizes along `axis` alone (default -1).
pub(crate) fn softmax_dims(shape: &[i64], attrs: &Attrs) -> Result<(usize, usize, usize), String> {
    let legacy = attrs.int("onnx_opset", 13) < 13;
    let axis = attrs.int("axis", if legacy { 1 } else { -1 });
    let ax = norm_axis(axis, shape.len())?;
    Ok(if legacy {
        (prod(&shape[..ax]), prod(&shape[ax..]), 1)
    } else {
        (prod(&shape[..ax]), prod(&shape[ax..ax + 1]), prod(&shape[ax + 1..]))
    })
}

pub(crate) fn infer_softmax(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "input")?;
    check_dtype(x, 0, "input", &[DType::F32, DType::F16, DType::BF16, DType::F64])?;
    softmax_dims(x.shape, attrs)?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

// ---------------------------------------------------------------------------------------
// ReduceMean and ReduceSum.

pub(crate) fn validate_reduce(a: &Attrs, op: &str) -> Result<(), String> {
    flag_attr(a, "keepdims", op)?;
    flag_attr(a, "noop_with_empty_axes", op)?;
    if let Some(axes) = a.ints("axes") {
        for (i, x) in axes.iter().enumerate() {
            if axes[..i].contains(x) {
                return Err(format!("attribute `axes` of @onnx.{op} lists axis {x} twice"));
            }
        }
    }
    Ok(())
}

/// What a Reduce operator computes over the elements it reduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduction {
    Mean,
    Sum,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

/// The reduction a Reduce operator computes.
pub(crate) fn reduction(op: Operator) -> Option<Reduction> {
    Some(match op {
        Operator::ReduceMean => Reduction::Mean,
        Operator::ReduceSum => Reduction::Sum,
        Operator::ReduceMax => Reduction::Max,
        Operator::ReduceMin => Reduction::Min,
        Operator::ReduceProd => Reduction::Prod,
        Operator::ReduceL1 => Reduction::L1,
        Operator::ReduceL2 => Reduction::L2,
        Operator::ReduceLogSum => Reduction::LogSum,
        Operator::ReduceLogSumExp => Reduction::LogSumExp,
        Operator::ReduceSumSquare => Reduction::SumSquare,
        _ => return None,
    })
}

impl Reduction {
    /// The dtypes it computes in: the ones with a square root or a logarithm in f32 only.
    pub(crate) fn dtypes(self) -> &'static [DType] {
        match self {
            Reduction::Mean | Reduction::L2 | Reduction::LogSum | Reduction::LogSumExp => FLOATS,
            Reduction::Max | Reduction::Min => REDUCE_ORDERED,
            _ => REDUCE_ARITH,
        }
    }
}

/// Each Reduce operator's attribute check and inference, over [`validate_reduce`] and
/// [`infer_reduce`].
macro_rules! reductions {
    ($($op:ident $r:ident $validate:ident $infer:ident;)*) => {$(
        pub(crate) fn $validate(a: &Attrs) -> Result<(), String> {
            validate_reduce(a, stringify!($op))
        }

        pub(crate) fn $infer(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
            $validate(attrs)?;
            infer_reduce(ins, attrs, Reduction::$r.dtypes())
        }
    )*};
}

reductions! {
    ReduceMean Mean validate_reduce_mean infer_reduce_mean;
    ReduceSum Sum validate_reduce_sum infer_reduce_sum;
    ReduceMax Max validate_reduce_max infer_reduce_max;
    ReduceMin Min validate_reduce_min infer_reduce_min;
    ReduceProd Prod validate_reduce_prod infer_reduce_prod;
    ReduceL1 L1 validate_reduce_l1 infer_reduce_l1;
    ReduceL2 L2 validate_reduce_l2 infer_reduce_l2;
    ReduceLogSum LogSum validate_reduce_log_sum infer_reduce_log_sum;
    ReduceLogSumExp LogSumExp validate_reduce_log_sum_exp infer_reduce_log_sum_exp;
    ReduceSumSquare SumSquare validate_reduce_sum_square infer_reduce_sum_square;
}

/// Which dimensions are reduced; `None` for a no-op (empty axes with
/// `noop_with_empty_axes = 1`). The OpenCL kernels use it too.
pub(crate) fn reduce_axes(ins: &[Option<TensorInfo>], attrs: &Attrs, rank: usize) -> Result<Option<Vec<bool>>, String> {
    let listed: Vec<i64> = match (attrs.ints("axes"), optional(ins, 1)) {
        (Some(_), Some(_)) => return Err("axes are given both as the `axes` attribute and as input 2".into()),
        (Some(a), None) => a.to_vec(),
        (None, Some(t)) => {
            check_dtype(t, 1, "axes", &[DType::I64, DType::I32])?;
            if t.shape.len() > 1 {
                return Err(format!("input 2 (axes) must be 1-D, found shape {:?}", t.shape));
            }
            match t.value {
                Some(v) => ints_of(v),
                None => return Err("input 2 (axes) must be a constant: its value decides the output shape".into()),
            }
        }
        (None, None) => Vec::new(),
    };
    if listed.is_empty() {
        return Ok(if attrs.int("noop_with_empty_axes", 0) != 0 { None } else { Some(vec![true; rank]) });
    }
    let mut red = vec![false; rank];
    for &a in &listed {
        let k = norm_axis(a, rank)?;
        if red[k] {
            return Err(format!("axis {a} is listed twice (axes {listed:?} for rank {rank})"));
        }
        red[k] = true;
    }
    Ok(Some(red))
}

pub(crate) fn infer_reduce(
    ins: &[Option<TensorInfo>],
    attrs: &Attrs,
    allowed: &[DType],
) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "data")?;
    check_dtype(x, 0, "data", allowed)?;
    let keep = attrs.int("keepdims", 1) != 0;
    let shape = match reduce_axes(ins, attrs, x.shape.len())? {
        None => x.shape.to_vec(),
        Some(red) => x
            .shape
            .iter()
            .zip(&red)
            .filter_map(|(&d, &r)| match (r, keep) {
                (false, _) => Some(d),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect(),
    };
    Ok(vec![(x.dtype, shape)])
}

// ---------------------------------------------------------------------------------------
// Normalizations.

pub(crate) fn epsilon_attr(a: &Attrs, op: &str) -> Result<(), String> {
    if a.get("epsilon").is_some() {
        let e = a.float("epsilon", 0.0);
        if !e.is_finite() || e < 0.0 {
            return Err(format!("attribute `epsilon` of @onnx.{op} must be finite and ≥ 0, found {e}"));
        }
    }
    Ok(())
}

pub(crate) fn validate_batch_norm(a: &Attrs) -> Result<(), String> {
    const OP: &str = "BatchNormalization";
    epsilon_attr(a, OP)?;
    finite_attr(a, "momentum", OP)?;
    flag_attr(a, "spatial", OP)?;
    flag_attr(a, "is_test", OP)?;
    flag_attr(a, "training_mode", OP)?;
    Ok(())
}

/// BatchNormalization's training_mode.
pub(crate) fn a_training(attrs: &Attrs) -> bool {
    attrs.int("training_mode", 0) == 1
}

/// The number of elements each parameter of BatchNormalization has, and what it is.
pub(crate) fn batch_norm_params(x: &[i64], attrs: &Attrs) -> (Option<u64>, &'static str) {
    if attrs.int("spatial", 1) == 0 {
        (numel(x.get(1..).unwrap_or(&[])), "the product of X's dimensions after the first, as spatial = 0")
    } else if x.len() >= 2 {
        (u64::try_from(x[1]).ok(), "the channel count")
    } else {
        (Some(1), "one channel for 1-D X")
    }
}

pub(crate) fn infer_batch_norm(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    validate_batch_norm(attrs)?;
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", F32)?;
    if x.shape.is_empty() {
        return Err("input 1 (X) must have rank ≥ 1 (N, C, D1, …), found a scalar".into());
    }
    let (want, what) = batch_norm_params(x.shape, attrs);
    let Some(want) = want else { return Err(format!("input 1 (X) has an invalid shape {:?}", x.shape)) };
    for (i, name) in [(1, "scale"), (2, "B"), (3, "mean"), (4, "var")] {
        let t = input(ins, i, name)?;
        check_dtype(t, i, name, F32)?;
        match numel(t.shape) {
            Some(n) if n == want => {}
            Some(n) => return Err(format!("input {} ({name}) has {n} elements, expected {want} ({what})", i + 1)),
            None => return Err(format!("input {} ({name}) has an invalid shape {:?}", i + 1, t.shape)),
        }
    }
    let mut outs = vec![(x.dtype, x.shape.to_vec())];
    if a_training(attrs) {
        let p = input(ins, 3, "mean")?.shape.to_vec();
        outs.extend((0..4).map(|_| (x.dtype, p.clone())));
    }
    Ok(outs)
}

fn validate_arg(a: &Attrs, op: &str) -> Result<(), String> {
    flag_attr(a, "keepdims", op)?;
    flag_attr(a, "select_last_index", op)
}

pub(crate) fn validate_arg_max(a: &Attrs) -> Result<(), String> {
    validate_arg(a, "ArgMax")
}

pub(crate) fn validate_arg_min(a: &Attrs) -> Result<(), String> {
    validate_arg(a, "ArgMin")
}

/// A tensor's elements as (outer, axis length, inner) around one axis.
pub(crate) type AxisSplit = (usize, usize, usize);

/// ArgMax/ArgMin's split of `x` around `axis`, and the output shape.
pub(crate) fn arg_split(x: &[i64], attrs: &Attrs) -> Result<(AxisSplit, Vec<i64>), String> {
    let rank = x.len().max(1);
    let axis = norm_axis(attrs.int("axis", 0), rank)?;
    let dims: Vec<i64> = if x.is_empty() { vec![1] } else { x.to_vec() };
    let part = |s: &[i64]| s.iter().fold(1usize, |a, &d| a.saturating_mul(d.max(0) as usize));
    let split = (part(&dims[..axis]), part(&dims[axis..=axis]), part(&dims[axis + 1..]));
    if split.1 == 0 {
        return Err(format!("axis {axis} has no elements, so it has no largest or smallest one"));
    }
    let mut out = dims;
    if attrs.int("keepdims", 1) != 0 {
        out[axis] = 1;
    } else {
        out.remove(axis);
    }
    Ok((split, out))
}

pub(crate) fn infer_arg_reduce(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "data")?;
    check_dtype(x, 0, "data", SIGNED)?;
    Ok(vec![(DType::I64, arg_split(x.shape, attrs)?.1)])
}

pub(crate) fn validate_layer_norm(a: &Attrs) -> Result<(), String> {
    epsilon_attr(a, "LayerNormalization")?;
    match a.get("stash_type") {
        None | Some(AttrValue::Int(1)) => Ok(()),
        Some(v) => Err(format!(
            "attribute `stash_type` of @onnx.LayerNormalization must be 1 (compute in f32 or wider), found {}",
            v.describe()
        )),
    }
}

/// LayerNormalization's split of `x`: the first normalized dim, and the shape of Mean and
/// InvStdDev (`x`'s dims before it, then ones).
pub(crate) fn layer_norm_split(x: &[i64], attrs: &Attrs) -> Result<(usize, Vec<i64>), String> {
    if x.is_empty() {
        return Err("input 1 (X) must have rank ≥ 1, found a scalar".into());
    }
    let axis = norm_axis(attrs.int("axis", -1), x.len())?;
    let stats = x.iter().enumerate().map(|(i, &d)| if i < axis { d } else { 1 }).collect();
    Ok((axis, stats))
}

pub(crate) fn infer_layer_norm(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", F32)?;
    let (axis, stats) = layer_norm_split(x.shape, attrs)?;
    let normalized = &x.shape[axis..];
    for (i, name) in [(1, "Scale"), (2, "B")] {
        let Some(t) = (if i == 1 { Some(input(ins, i, name)?) } else { optional(ins, i) }) else { continue };
        check_dtype(t, i, name, F32)?;
        if broadcast(t.shape, normalized).ok().as_deref() != Some(normalized) {
            return Err(format!(
                "input {} ({name}) has shape {:?}, which does not broadcast to the normalized dims {normalized:?}",
                i + 1,
                t.shape
            ));
        }
    }
    Ok(vec![(x.dtype, x.shape.to_vec()), (DType::F32, stats.clone()), (DType::F32, stats)])
}

pub(crate) fn validate_instance_norm(a: &Attrs) -> Result<(), String> {
    epsilon_attr(a, "InstanceNormalization")
}

pub(crate) fn infer_instance_norm(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "input")?;
    check_dtype(x, 0, "input", F32)?;
    if x.shape.len() < 3 {
        return Err(format!("input 1 (input) must have rank ≥ 3 (N, C, D1, …), found rank {}", x.shape.len()));
    }
    for (i, name) in [(1, "scale"), (2, "B")] {
        let t = input(ins, i, name)?;
        check_dtype(t, i, name, F32)?;
        if t.shape.len() != 1 || t.shape[0] != x.shape[1] {
            return Err(format!(
                "input {} ({name}) has shape {:?}, expected [{}] (the channel count)",
                i + 1,
                t.shape,
                x.shape[1]
            ));
        }
    }
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

pub(crate) fn validate_lrn(a: &Attrs) -> Result<(), String> {
    for name in ["alpha", "beta", "bias"] {
        finite_attr(a, name, "LRN")?;
    }
    match a.get("size") {
        None => Err("@onnx.LRN requires the attribute `size` (the number of channels to sum over)".into()),
        Some(AttrValue::Int(s)) if *s < 1 => {
            Err(format!("attribute `size` of @onnx.LRN must be at least 1, found {s}"))
        }
        _ => Ok(()),
    }
}

pub(crate) fn infer_lrn(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", F32)?;
    if x.shape.len() < 2 {
        return Err(format!("input 1 (X) must have rank ≥ 2 (N, C, D1, …), found rank {}", x.shape.len()));
    }
    Ok(vec![(x.dtype, x.shape.to_vec())])
}
