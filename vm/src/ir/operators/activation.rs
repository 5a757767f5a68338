//! Operator schemas of the activation family: the unary f32 maps of modern networks and
//! ONNX's unary math operators (Gelu, Erf, HardSwish, HardSigmoid, Mish, Celu,
//! ThresholdedRelu, Log, Reciprocal, Floor, Ceil, Round, Sign, the trigonometric and
//! hyperbolic functions and their inverses), on f32, f16 and bf16 (computed in f32) and
//! f64 (computed in f64). The kernels are in `crate::ops::activation` (host) and
//! `crate::ops::activation_cl` (OpenCL buffers and textures).

use super::elementwise::{finite_attr, infer_f32_f64};
use crate::ir::attrs::*;
use crate::ir::schema::*;

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(Gelu, in 1..=1, out 1..=1, attrs &[attr!("approximate", Str)], validate validate_gelu, infer infer_f32_f64,
        "approximate \"none\" (default): x / 2 * (1 + erf(x / √2)); \"tanh\": x / 2 * (1 + tanh(√(2/π) * (x + 0.044715 x³)))"),
    op!(Erf, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "erf(x)"),
    op!(HardSigmoid, in 1..=1, out 1..=1, attrs &[attr!("alpha", Float), attr!("beta", Float)],
        validate validate_hard_sigmoid, infer infer_f32_f64,
        "max(0, min(1, alpha * x + beta)) (alpha 0.2, beta 0.5; NaN stays NaN)"),
    op!(HardSwish, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "x * max(0, min(1, x / 6 + 0.5))"),
    op!(Mish, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "x * tanh(ln(1 + exp(x))), computed stably"),
    op!(Celu, in 1..=1, out 1..=1, attrs &[attr!("alpha", Float)], validate validate_celu, infer infer_f32_f64,
        "max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) (alpha 1.0, finite and nonzero)"),
    op!(ThresholdedRelu, in 1..=1, out 1..=1, attrs &[attr!("alpha", Float)],
        validate validate_thresholded_relu, infer infer_f32_f64, "x > alpha ? x : 0 (alpha 1.0; NaN gives 0)"),
    op!(Log, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "ln(x) (-inf at 0, NaN for x < 0)"),
    op!(Reciprocal, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "1 / x"),
    op!(Floor, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "floor(x)"),
    op!(Ceil, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "ceil(x)"),
    op!(Round, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "x rounded to the nearest integer, halves to even"),
    op!(Sign, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "1 for x > 0, -1 for x < 0, 0 for ±0, NaN for NaN"),
    op!(Sin, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "sin(x)"),
    op!(Cos, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "cos(x)"),
    op!(Tan, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "tan(x)"),
    op!(Asin, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "asin(x) (NaN outside [-1, 1])"),
    op!(Acos, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "acos(x) (NaN outside [-1, 1])"),
    op!(Atan, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "atan(x)"),
    op!(Sinh, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "sinh(x)"),
    op!(Cosh, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "cosh(x)"),
    op!(Asinh, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "asinh(x)"),
    op!(Acosh, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "acosh(x) (NaN for x < 1)"),
    op!(Atanh, in 1..=1, out 1..=1, attrs &[], infer infer_f32_f64, "atanh(x) (±inf at ±1, NaN outside [-1, 1])"),
];

/// Gelu's `approximate`: false for "none" (the default), true for "tanh".
pub(crate) fn gelu_tanh(a: &Attrs) -> Result<bool, String> {
    match a.str("approximate") {
        None | Some("none") => Ok(false),
        Some("tanh") => Ok(true),
        Some(s) => Err(format!("attribute `approximate` of @onnx.Gelu must be \"none\" or \"tanh\", found {s:?}")),
    }
}

pub(crate) fn validate_gelu(a: &Attrs) -> Result<(), String> {
    gelu_tanh(a).map(|_| ())
}

pub(crate) fn validate_hard_sigmoid(a: &Attrs) -> Result<(), String> {
    finite_attr(a, "alpha", "HardSigmoid")?;
    finite_attr(a, "beta", "HardSigmoid")
}

pub(crate) fn validate_celu(a: &Attrs) -> Result<(), String> {
    finite_attr(a, "alpha", "Celu")?;
    if a.float("alpha", 1.0) == 0.0 {
        return Err("attribute `alpha` of @onnx.Celu must be nonzero (it divides x)".into());
    }
    Ok(())
}

pub(crate) fn validate_thresholded_relu(a: &Attrs) -> Result<(), String> {
    finite_attr(a, "alpha", "ThresholdedRelu")
}
