//! Operator schemas of the bitwise family and the float classifiers: BitShift,
//! BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot, BitCast, IsInf, IsNaN and Mean (the
//! kernels are in `crate::ops::bitwise` and `crate::ops::bitwise_cl`).
//!
//! The binary operators broadcast as numpy does.

use super::elementwise::{check_dtype, input, same_dtype, FLOATS};
use super::shape::broadcast;
use super::tensor::check_shape;
use crate::ir::attrs::*;
use crate::ir::schema::*;
use crate::ir::types::DType;

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(BitShift, in 2..=2, out 1..=1, attrs &[attr!("direction", Str)], validate validate_bit_shift,
        infer infer_bit_shift,
        "X shifted by Y bits, `direction` LEFT or RIGHT, with numpy broadcasting (every integer width; signed \
        right shifts are arithmetic; a shift below 0 or of the width or more gives 0, or -1 shifting a negative \
        X right)"),
    op!(BitwiseAnd, in 2..=2, out 1..=1, attrs &[], infer infer_bitwise,
        "a & b with numpy broadcasting (every integer width)"),
    op!(BitwiseOr, in 2..=2, out 1..=1, attrs &[], infer infer_bitwise,
        "a | b with numpy broadcasting (every integer width)"),
    op!(BitwiseXor, in 2..=2, out 1..=1, attrs &[], infer infer_bitwise,
        "a ^ b with numpy broadcasting (every integer width)"),
    op!(BitwiseNot, in 1..=1, out 1..=1, attrs &[], infer infer_bitwise_not, "~x (every integer width)"),
    op!(IsInf, in 1..=1, out 1..=1, attrs &[attr!("detect_negative", Int), attr!("detect_positive", Int)],
        validate validate_is_inf, infer infer_classify,
        "x is +inf (detect_positive, default 1) or -inf (detect_negative, default 1) → bool (f16, f32, f64)"),
    op!(IsNaN, in 1..=1, out 1..=1, attrs &[], infer infer_classify, "x is NaN → bool (f16, f32, f64)"),
    op!(Mean, in 1..=64, out 1..=1, attrs &[], infer infer_mean,
        "elementwise mean of 1 to 64 inputs with numpy broadcasting (f16, f32, f64: summed in order in the \
        input's dtype, then divided by the count)"),
    op!(BitCast, in 1..=1, out 1..=1, attrs &[attr!("to", Int)], validate validate_bit_cast, infer infer_bit_cast,
        "the input's bits reinterpreted as dtype `to` (an ONNX data type code) of the same element size; \
        a bool written is 0 or 1"),
];

/// The integer dtypes the bitwise operators take.
pub(crate) const INTEGERS: &[DType] =
    &[DType::I8, DType::I16, DType::I32, DType::I64, DType::U8, DType::U16, DType::U32, DType::U64];

/// Whether a shift goes left (else right).
pub(crate) fn shift_left(attrs: &Attrs) -> Result<bool, String> {
    match attrs.str("direction") {
        Some("LEFT") => Ok(true),
        Some("RIGHT") => Ok(false),
        Some(other) => {
            Err(format!("attribute `direction` of @onnx.BitShift must be \"LEFT\" or \"RIGHT\", found {other:?}"))
        }
        None => Err("@onnx.BitShift needs the `direction` attribute (\"LEFT\" or \"RIGHT\")".into()),
    }
}

fn validate_bit_shift(a: &Attrs) -> Result<(), String> {
    shift_left(a).map(|_| ())
}

/// The broadcast output of two inputs of one dtype from `allowed`.
pub(crate) fn binary(ins: &[Option<TensorInfo>], allowed: &[DType]) -> Result<(DType, Vec<i64>), String> {
    let (a, b) = (input(ins, 0, "A")?, input(ins, 1, "B")?);
    check_dtype(a, 0, "A", allowed)?;
    if b.dtype != a.dtype {
        return Err(format!("inputs 1 and 2 must have the same dtype, found {} and {}", a.dtype, b.dtype));
    }
    let out = broadcast(a.shape, b.shape)?;
    Ok((a.dtype, out))
}

pub(crate) fn infer_bit_shift(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    shift_left(attrs)?;
    Ok(vec![binary(ins, INTEGERS)?])
}

pub(crate) fn infer_bitwise(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![binary(ins, INTEGERS)?])
}

pub(crate) fn infer_bitwise_not(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", INTEGERS)?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

fn flag(a: &Attrs, name: &str) -> Result<bool, String> {
    match a.int(name, 1) {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(format!("attribute `{name}` of @onnx.IsInf must be 0 or 1, found {v}")),
    }
}

/// IsInf's (detect_positive, detect_negative).
pub(crate) fn inf_signs(a: &Attrs) -> Result<(bool, bool), String> {
    Ok((flag(a, "detect_positive")?, flag(a, "detect_negative")?))
}

fn validate_is_inf(a: &Attrs) -> Result<(), String> {
    inf_signs(a).map(|_| ())
}

pub(crate) fn infer_classify(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", FLOATS)?;
    Ok(vec![(DType::Bool, x.shape.to_vec())])
}

pub(crate) fn infer_mean(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "data_0")?;
    check_dtype(x, 0, "data_0", FLOATS)?;
    let mut shape = x.shape.to_vec();
    for i in 1..ins.len() {
        let t = input(ins, i, &format!("data_{i}"))?;
        same_dtype(i, t.dtype, x.dtype)?;
        shape = broadcast(&shape, t.shape).map_err(|e| format!("input {}: {e}", i + 1))?;
    }
    Ok(vec![(x.dtype, shape)])
}

/// BitCast's target dtype.
pub(crate) fn bit_cast_target(attrs: &Attrs) -> Result<DType, String> {
    let Some(v) = attrs.get("to") else {
        return Err("@onnx.BitCast needs the `to` attribute (an ONNX TensorProto data type code)".into());
    };
    DType::from_onnx(attrs.int("to", 0)).ok_or_else(|| {
        format!(
            "BitCast: `to` = {v} is not a supported ONNX data type; supported: 1 (f32), 2 (u8), 3 (i8), 4 (u16), \
             5 (i16), 6 (i32), 7 (i64), 9 (bool), 10 (f16), 11 (f64), 12 (u32), 13 (u64)"
        )
    })
}

fn validate_bit_cast(a: &Attrs) -> Result<(), String> {
    bit_cast_target(a).map(|_| ())
}

pub(crate) fn infer_bit_cast(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let to = bit_cast_target(attrs)?;
    let x = input(ins, 0, "input")?;
    if x.dtype.size() != to.size() {
        return Err(format!(
            "BitCast needs types of one bit width, but the input is {} ({} bits) and `to` is {to} ({} bits)",
            x.dtype,
            8 * x.dtype.size(),
            8 * to.size()
        ));
    }
    check_shape(x.shape, "BitCast")?;
    Ok(vec![(to, x.shape.to_vec())])
}
