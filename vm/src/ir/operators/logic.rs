//! Operator schemas of the comparison and logic family and the shape helpers transformers
//! use: Equal, Less, Greater, LessOrEqual, GreaterOrEqual, Not, And, Or, Xor, Where, Expand,
//! Range, Mod and Size (the kernels are in `crate::ops::logic` and `crate::ops::logic_cl`).
//!
//! Binary operators broadcast as numpy does; the comparisons and the logical operators of
//! opset 1 also accept the legacy `broadcast`/`axis` attributes (B aligned at `axis`).

use super::elementwise::{check_dtype, check_scalar, flag_attr, input, legacy_b_shape};
use super::shape::broadcast;
use super::tensor::{check_shape, value_ints};
use crate::ir::attrs::*;
use crate::ir::host_tensor::{load_f64, load_i64};
use crate::ir::schema::*;
use crate::ir::types::DType;

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(Equal, in 2..=2, out 1..=1, attrs &[attr!("broadcast", Int), attr!("axis", Int)],
        validate validate_equal, infer infer_equal,
        "a == b → bool with numpy broadcasting (bool, every integer width, f16, f32, f64; NaN is unequal to everything)"),
    op!(Less, in 2..=2, out 1..=1, attrs &[attr!("broadcast", Int), attr!("axis", Int)],
        validate validate_less, infer infer_order, "a < b → bool with numpy broadcasting (every integer width, f16, f32, f64; false with NaN)"),
    op!(Greater, in 2..=2, out 1..=1, attrs &[attr!("broadcast", Int), attr!("axis", Int)],
        validate validate_greater, infer infer_order, "a > b → bool with numpy broadcasting (every integer width, f16, f32, f64; false with NaN)"),
    op!(LessOrEqual, in 2..=2, out 1..=1, attrs &[], infer infer_order,
        "a <= b → bool with numpy broadcasting (every integer width, f16, f32, f64; false with NaN)"),
    op!(GreaterOrEqual, in 2..=2, out 1..=1, attrs &[], infer infer_order,
        "a >= b → bool with numpy broadcasting (every integer width, f16, f32, f64; false with NaN)"),
    op!(Not, in 1..=1, out 1..=1, attrs &[], infer infer_not, "logical not of a bool tensor"),
    op!(And, in 2..=2, out 1..=1, attrs &[attr!("broadcast", Int), attr!("axis", Int)],
        validate validate_and, infer infer_logic, "a and b for bool tensors with numpy broadcasting"),
    op!(Or, in 2..=2, out 1..=1, attrs &[attr!("broadcast", Int), attr!("axis", Int)],
        validate validate_or, infer infer_logic, "a or b for bool tensors with numpy broadcasting"),
    op!(Xor, in 2..=2, out 1..=1, attrs &[attr!("broadcast", Int), attr!("axis", Int)],
        validate validate_xor, infer infer_logic, "a xor b for bool tensors with numpy broadcasting"),
    op!(Where, in 3..=3, out 1..=1, attrs &[], infer infer_where,
        "condition ? X : Y elementwise, the three inputs broadcast together (bool condition; X and Y of one dtype, any)"),
    op!(Expand, in 2..=2, out 1..=1, attrs &[], infer infer_expand,
        "broadcasts the input to the shape input 2 (i64) numpy-style: the output shape is the broadcast of both \
        (a 1 in `shape` keeps the input's dim); any dtype"),
    op!(Range, in 3..=3, out 1..=1, attrs &[], infer infer_range,
        "start + i·delta for i < max(ceil((limit - start) / delta), 0) from scalar inputs start, limit, delta \
        (f16, f32, f64, i16, i32, i64; delta 0 is an error; the length needs the inputs' values)"),
    op!(Mod, in 2..=2, out 1..=1, attrs &[attr!("fmod", Int)], validate validate_mod, infer infer_mod,
        "remainder with numpy broadcasting: fmod 0 (default) takes the divisor's sign as Python's % and numpy.mod \
        (for floats, opset 28), fmod 1 the dividend's as C fmod; integer division by zero is an error"),
    op!(Size, in 1..=1, out 1..=1, attrs &[], infer infer_size, "the input's element count as an i64 scalar (any dtype)"),
];

pub(crate) use super::elementwise::NUMERIC;

/// Equal takes bool too.
pub(crate) const EQUAL: &[DType] = DType::ALL.split_at(DType::NUMERIC_COUNT + 1).0;

/// Range's dtypes.
pub(crate) const RANGE: &[DType] =
    &[DType::F32, DType::F16, DType::F64, DType::BF16, DType::I16, DType::I32, DType::I64];

fn validate_equal(a: &Attrs) -> Result<(), String> {
    flag_attr(a, "broadcast", "Equal")
}
fn validate_less(a: &Attrs) -> Result<(), String> {
    flag_attr(a, "broadcast", "Less")
}
fn validate_greater(a: &Attrs) -> Result<(), String> {
    flag_attr(a, "broadcast", "Greater")
}
fn validate_and(a: &Attrs) -> Result<(), String> {
    flag_attr(a, "broadcast", "And")
}
fn validate_or(a: &Attrs) -> Result<(), String> {
    flag_attr(a, "broadcast", "Or")
}
fn validate_xor(a: &Attrs) -> Result<(), String> {
    flag_attr(a, "broadcast", "Xor")
}

/// The shape B broadcasts as (legacy `broadcast`/`axis` placement or numpy's) and the
/// broadcast output shape of a binary operator whose inputs share one dtype from `allowed`.
pub(crate) fn binary_shapes(
    ins: &[Option<TensorInfo>],
    attrs: &Attrs,
    allowed: &[DType],
) -> Result<(DType, Vec<i64>, Vec<i64>), String> {
    let (a, b) = (input(ins, 0, "A")?, input(ins, 1, "B")?);
    check_dtype(a, 0, "A", allowed)?;
    if b.dtype != a.dtype {
        return Err(format!("inputs 1 and 2 must have the same dtype, found {} and {}", a.dtype, b.dtype));
    }
    let bsh = legacy_b_shape(a.shape, b.shape, attrs)?;
    let out = broadcast(a.shape, &bsh)?;
    Ok((a.dtype, bsh, out))
}

pub(crate) fn infer_equal(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![(DType::Bool, binary_shapes(ins, attrs, EQUAL)?.2)])
}

pub(crate) fn infer_order(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![(DType::Bool, binary_shapes(ins, attrs, NUMERIC)?.2)])
}

pub(crate) fn infer_logic(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    Ok(vec![(DType::Bool, binary_shapes(ins, attrs, &[DType::Bool])?.2)])
}

pub(crate) fn infer_not(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", &[DType::Bool])?;
    Ok(vec![(DType::Bool, x.shape.to_vec())])
}

pub(crate) fn infer_where(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (c, x, y) = (input(ins, 0, "condition")?, input(ins, 1, "X")?, input(ins, 2, "Y")?);
    check_dtype(c, 0, "condition", &[DType::Bool])?;
    if x.dtype != y.dtype {
        return Err(format!("inputs 2 (X) and 3 (Y) must have the same dtype, found {} and {}", x.dtype, y.dtype));
    }
    let shape = broadcast(&broadcast(c.shape, x.shape)?, y.shape)?;
    Ok(vec![(x.dtype, shape)])
}

/// Expand's output shape: the broadcast of the input's shape and the `shape` input.
pub(crate) fn infer_expand(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    const OP: &str = "Expand";
    let x = input(ins, 0, "input")?;
    let s = input(ins, 1, "shape")?;
    check_dtype(s, 1, "shape", &[DType::I64])?;
    let shape = value_ints(s, OP, "shape")?;
    if let Some(&d) = shape.iter().find(|&&d| d < 0) {
        return Err(format!("{OP}: shape {shape:?} has the negative size {d}"));
    }
    let out = broadcast(x.shape, &shape).map_err(|e| format!("{OP}: {e}"))?;
    check_shape(&out, OP)?;
    Ok(vec![(x.dtype, out)])
}

/// A Range's scalar inputs, as they are known to inference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum RangeArgs {
    Int { start: i64, delta: i64 },
    Float { start: f64, delta: f64 },
}

/// Range's dtype, its start and delta, and its length.
pub(crate) fn plan_range(ins: &[Option<TensorInfo>]) -> Result<(DType, RangeArgs, i64), String> {
    const OP: &str = "Range";
    let names = ["start", "limit", "delta"];
    let first = input(ins, 0, names[0])?;
    check_dtype(first, 0, names[0], RANGE)?;
    let mut bytes = Vec::with_capacity(3);
    for (i, name) in names.iter().enumerate() {
        let t = input(ins, i, name)?;
        if t.dtype != first.dtype {
            return Err(format!("input {} ({name}) is {}, but input 1 (start) is {}", i + 1, t.dtype, first.dtype));
        }
        check_scalar(t, i, name)?;
        let v =
            t.value.ok_or_else(|| format!("{OP} needs the value of its {name} input to infer the output length"))?;
        let b =
            v.data.get(..v.dtype.size()).ok_or_else(|| format!("{OP}: input {} ({name}) holds no element", i + 1))?;
        bytes.push(b);
    }
    let d = first.dtype;
    if d.is_float() {
        let [s, l, dl] = [load_f64(d, bytes[0]), load_f64(d, bytes[1]), load_f64(d, bytes[2])];
        if dl == 0.0 {
            return Err(format!("{OP}: delta is 0"));
        }
        // In the input's precision, as ONNX's formula (and numpy's arange) computes it.
        let n = match d {
            DType::F32 => ((l as f32 - s as f32) / dl as f32).ceil() as f64,
            DType::F16 => {
                let h = |v: f32| half::f16::from_f32(v).to_f32();
                h(h(l as f32 - s as f32) / dl as f32).ceil() as f64
            }
            DType::BF16 => {
                let h = |v: f32| half::bf16::from_f32(v).to_f32();
                h(h(l as f32 - s as f32) / dl as f32).ceil() as f64
            }
            _ => ((l - s) / dl).ceil(),
        };
        if n.is_nan() {
            return Err(format!("{OP}: the length ceil(({l} - {s}) / {dl}) is not a number"));
        }
        if n >= i64::MAX as f64 {
            return Err(format!("{OP}: the length ceil(({l} - {s}) / {dl}) is too large"));
        }
        Ok((d, RangeArgs::Float { start: s, delta: dl }, (n as i64).max(0)))
    } else {
        let [s, l, dl] = [load_i64(d, bytes[0]), load_i64(d, bytes[1]), load_i64(d, bytes[2])];
        if dl == 0 {
            return Err(format!("{OP}: delta is 0"));
        }
        // ceil((l - s) / dl) without overflow (i128) and with the sign of either operand.
        let (num, den) = (l as i128 - s as i128, dl as i128);
        let q = num.div_euclid(den);
        let q = if num.rem_euclid(den) == 0 {
            q
        } else if den > 0 {
            q + 1
        } else {
            q
        };
        let n = i64::try_from(q.max(0)).map_err(|_| format!("{OP}: the length of [{s}, {l}) by {dl} is too large"))?;
        Ok((d, RangeArgs::Int { start: s, delta: dl }, n))
    }
}

pub(crate) fn infer_range(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (d, _, n) = plan_range(ins)?;
    check_shape(&[n], "Range")?;
    Ok(vec![(d, vec![n])])
}

pub(crate) fn validate_mod(a: &Attrs) -> Result<(), String> {
    flag_attr(a, "fmod", "Mod")
}

pub(crate) fn infer_mod(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    validate_mod(attrs)?;
    let (d, _, out) = binary_shapes(ins, attrs, NUMERIC)?;
    Ok(vec![(d, out)])
}

pub(crate) fn infer_size(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "data")?;
    check_shape(x.shape, "Size")?;
    Ok(vec![(DType::I64, vec![])])
}
