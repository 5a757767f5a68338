//! OpenCL kernels of the activation family: every operator is an f32 map, whose
//! expression ([`f32_map`]) the buffer kernels here (through the elementwise family's
//! unary kernel) and the texture kernels (`super::texture_cl`) share. The expressions
//! mirror the host kernels in `super::activation`, in f32 with OpenCL's built-ins (`erf`,
//! `erfc`, `rint` rounds halves to even in the default rounding mode); f64 runs the same
//! expressions in double (devices with `cl_khr_fp64`).

use super::cl::{float_arg as f32_arg, ClCtx, ClFn, ClTensor, Res};
use super::elementwise_cl::{double_map, unary_f32, unary_f64, Params};
use super::{Attrs, Operator, TensorInfo};
use crate::ir::operators::activation::{gelu_tanh, validate_celu, validate_hard_sigmoid, validate_thresholded_relu};
use crate::ir::types::DType;

macro_rules! table {
    ($($op:ident)*) => {
        /// This family's OpenCL buffer kernels, by operator.
        pub static CL: &[(Operator, ClFn)] = &[$(
            (Operator::$op, |ctx: &ClCtx, ins: &[Option<ClTensor>], _: &[Option<TensorInfo>], attrs: &Attrs,
                outs: &[ClTensor]| -> Res { mapped(Operator::$op, ctx, ins, attrs, outs) }),
        )*];
    };
}

table!(Gelu Erf HardSigmoid HardSwish Mish Celu ThresholdedRelu Log Reciprocal Floor Ceil Round Sign Sin Cos Tan
    Asin Acos Atan Sinh Cosh Asinh Acosh Atanh);

/// The buffer kernel of activation operator `op`: its [`f32_map`] over one f32 (f16,
/// bf16) buffer, or over an f64 buffer in double ([`double_map`]).
fn mapped(op: Operator, ctx: &ClCtx, ins: &[Option<ClTensor>], attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let (expr, params) = f32_map(op, attrs)?.ok_or_else(|| format!("{} is not an activation", op.name()))?;
    let ins = &ins[..1.min(ins.len())];
    if ins.first().and_then(Option::as_ref).is_some_and(|x| x.dtype == DType::F64) {
        let (expr, params) = double_map(expr, params)?;
        return unary_f64(ctx, ins, outs, &expr, params);
    }
    unary_f32(ctx, ins, outs, expr, params)
}

/// The f32 expression `y = expr(v)` of an activation operator and its scalar parameters;
/// `None` for operators of other families.
pub(super) fn f32_map(op: Operator, attrs: &Attrs) -> Result<Option<(&'static str, Params)>, String> {
    let alpha = |default: f64| ("float alpha", f32_arg(attrs.float("alpha", default) as f32));
    Ok(Some(match op {
        // tanh saturates to ±1 explicitly beyond |u| = 10 (where it is ±1 in f32): PoCL's
        // tanh is a little short of -1 there, which turns the formula's -inf * 0 (NaN, as
        // on the host) into -inf.
        Operator::Gelu if gelu_tanh(attrs)? => (
            "0.5f * v * (1.0f + (fabs(0.7978845608028654f * (v + 0.044715f * v * v * v)) > 10.0f \
             ? copysign(1.0f, v) : tanh(0.7978845608028654f * (v + 0.044715f * v * v * v))))",
            vec![],
        ),
        Operator::Gelu => ("0.5f * v * erfc(-v * 0.7071067811865476f)", vec![]),
        Operator::Erf => ("erf(v)", vec![]),
        Operator::HardSigmoid => {
            validate_hard_sigmoid(attrs)?;
            let beta = ("float beta", f32_arg(attrs.float("beta", 0.5) as f32));
            (
                "(alpha * v + beta) < 0.0f ? 0.0f : (alpha * v + beta) > 1.0f ? 1.0f : (alpha * v + beta)",
                vec![alpha(0.2), beta],
            )
        }
        Operator::HardSwish => {
            ("v * ((v / 6.0f + 0.5f) < 0.0f ? 0.0f : (v / 6.0f + 0.5f) > 1.0f ? 1.0f : (v / 6.0f + 0.5f))", vec![])
        }
        Operator::Mish => ("v * tanh(fmax(v, 0.0f) + log1p(exp(-fabs(v))))", vec![]),
        Operator::Celu => {
            validate_celu(attrs)?;
            ("v > 0.0f ? v : alpha * expm1(v / alpha)", vec![alpha(1.0)])
        }
        Operator::ThresholdedRelu => {
            validate_thresholded_relu(attrs)?;
            ("v > alpha ? v : 0.0f", vec![alpha(1.0)])
        }
        Operator::Log => ("log(v)", vec![]),
        Operator::Reciprocal => ("1.0f / v", vec![]),
        Operator::Floor => ("floor(v)", vec![]),
        Operator::Ceil => ("ceil(v)", vec![]),
        Operator::Round => ("rint(v)", vec![]),
        Operator::Sign => ("v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v == 0.0f ? 0.0f : v", vec![]),
        Operator::Sin => ("sin(v)", vec![]),
        Operator::Cos => ("cos(v)", vec![]),
        Operator::Tan => ("tan(v)", vec![]),
        Operator::Asin => ("asin(v)", vec![]),
        Operator::Acos => ("acos(v)", vec![]),
        Operator::Atan => ("atan(v)", vec![]),
        Operator::Sinh => ("sinh(v)", vec![]),
        Operator::Cosh => ("cosh(v)", vec![]),
        Operator::Asinh => ("asinh(v)", vec![]),
        Operator::Acosh => ("acosh(v)", vec![]),
        Operator::Atanh => ("atanh(v)", vec![]),
        _ => return Ok(None),
    }))
}

/// Differential tests: every activation kernel on the device against the host kernel, on
/// the OpenCL device named by `RXVM_TEST_CL_DEVICE` (skipped without an OpenCL runtime).
#[cfg(test)]
mod tests {
    /// The activation family's float maps the CL tests check against the host.
    const MAPS: [&str; 24] = [
        "Gelu",
        "Erf",
        "HardSigmoid",
        "HardSwish",
        "Mish",
        "Celu",
        "ThresholdedRelu",
        "Log",
        "Reciprocal",
        "Floor",
        "Ceil",
        "Round",
        "Sign",
        "Sin",
        "Cos",
        "Tan",
        "Asin",
        "Acos",
        "Atan",
        "Sinh",
        "Cosh",
        "Asinh",
        "Acosh",
        "Atanh",
    ];

    use super::*;
    use crate::ir::host_tensor::HostTensor;
    use crate::ops::cl::testing::{device, run_kernel};
    use crate::ops::{AttrValue, OPS};

    fn attrs(list: &[(&str, AttrValue)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    /// `n` deterministic pseudo-random values in `[lo, hi)`.
    fn rand(seed: u64, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                lo + (hi - lo) * ((s >> 40) as f32 / (1u64 << 24) as f32)
            })
            .collect()
    }

    /// Runs `name` on the host and on `dev` and compares elementwise: equal (NaN equal to
    /// NaN, so infinities and NaNs must agree) or within `rel` relative / 1e-6 absolute.
    fn check(dev: &crate::opencl::device::ClDevice, name: &str, x: &[f32], a: &Attrs, rel: f32) {
        let def = OPS.iter().find(|o| o.name == name).unwrap();
        let x = HostTensor::from_f32(&[x.len() as i64], x).unwrap();
        let infos = [Some(TensorInfo { dtype: x.dtype, shape: &x.shape, value: None })];
        let (dtype, shape) = (def.infer)(&infos, a).unwrap().remove(0);
        let mut want = [HostTensor::zeros(dtype, &shape).unwrap()];
        (def.op.id().host_kernel().unwrap())(&[Some(&x)], a, &mut want).unwrap();
        let got = run_kernel(dev, name, &[Some(x.clone())], &infos, a, &want).remove(0);
        let f =
            |b: &[u8]| -> Vec<f32> { b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect() };
        let (w, g, xs) = (f(&want[0].data), f(&got), f(&x.data));
        for i in 0..w.len() {
            let ok = (w[i].is_nan() && g[i].is_nan()) || w[i] == g[i] || (w[i] - g[i]).abs() <= 1e-6 + rel * w[i].abs();
            assert!(ok, "{name} {a}: x = {}: host {}, OpenCL {}", xs[i], w[i], g[i]);
        }
    }

    #[test]
    fn kernels_match_the_host() {
        let Some(dev) = device() else { return };
        let none = Attrs::default();
        let edges = [
            0.0,
            -0.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -100.0,
            -20.0,
            -5.0,
            1e-4,
            -1e-6,
            20.0,
            100.0,
            0.5,
            -0.5,
            1.0,
            -1.0,
            2.5,
            -2.5,
        ];
        let mut x = rand(7, 300, -4.0, 4.0);
        x.extend(edges);
        for name in MAPS {
            // Exact operations must agree bit for bit; the transcendental ones within the
            // OpenCL built-ins' few ulp (erfc's relative error grows in the far tail).
            let rel = match name {
                "Floor" | "Ceil" | "Round" | "Sign" | "ThresholdedRelu" => 0.0,
                _ => 1e-5,
            };
            check(&dev, name, &x, &none, rel);
            check(&dev, name, &rand(9, 64, -1.0, 1.0), &none, rel);
        }
        let s = |v: &str| AttrValue::Str(v.into());
        let f = AttrValue::Float;
        check(&dev, "Gelu", &x, &attrs(&[("approximate", s("tanh"))]), 1e-5);
        check(&dev, "HardSigmoid", &x, &attrs(&[("alpha", f(0.7)), ("beta", f(-0.1))]), 1e-5);
        check(&dev, "Celu", &x, &attrs(&[("alpha", f(0.3))]), 1e-5);
        check(&dev, "Celu", &x, &attrs(&[("alpha", f(-2.0))]), 1e-5);
        check(&dev, "ThresholdedRelu", &x, &attrs(&[("alpha", f(-0.5))]), 0.0);
        // Round's ties go to even on the device too (rint), not away from zero.
        let ties = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 4194304.5, -3.5, 2.4999998];
        check(&dev, "Round", &ties, &none, 0.0);
    }

    /// f64 in double: every activation against the host's f64 kernel (skipped without fp64).
    #[test]
    fn f64_kernels_match_the_host() {
        use crate::ir::types::DType;
        use crate::ops::host::testing::tensor;
        let Some(dev) = device() else { return };
        if !(ClCtx { dev: &dev }).has_fp64() {
            return;
        }
        let mut xs: Vec<f64> = rand(11, 200, -4.0, 4.0).iter().map(|&v| v as f64 + 1e-9).collect();
        xs.extend([0.0, -0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e-300, -25.0, 25.0, 0.5, -2.5, 1.0]);
        let x = tensor(DType::F64, &[xs.len() as i64], &xs);
        let s = |v: &str| AttrValue::Str(v.into());
        let f = AttrValue::Float;
        let none = Attrs::default();
        let mut cases: Vec<(&str, Attrs)> = MAPS
            .iter()
            .copied()
            // and the elementwise family's f32 maps that take f64 too:
            .chain(["Relu", "LeakyRelu", "Elu", "Selu"])
            .map(|n| (n, none.clone()))
            .collect();
        cases.push(("Gelu", attrs(&[("approximate", s("tanh"))])));
        cases.push(("HardSigmoid", attrs(&[("alpha", f(0.7)), ("beta", f(-0.1))])));
        cases.push(("Celu", attrs(&[("alpha", f(0.3))])));
        cases.push(("LeakyRelu", attrs(&[("alpha", f(0.3))])));
        cases.push(("Selu", attrs(&[("alpha", f(2.0)), ("gamma", f(0.5))])));
        for (name, a) in cases {
            let def = OPS.iter().find(|o| o.name == name).unwrap();
            let infos = [Some(TensorInfo { dtype: x.dtype, shape: &x.shape, value: None })];
            let (dtype, shape) = (def.infer)(&infos, &a).unwrap().remove(0);
            let mut want = [HostTensor::zeros(dtype, &shape).unwrap()];
            (def.op.id().host_kernel().unwrap())(&[Some(&x)], &a, &mut want).unwrap();
            let got = run_kernel(&dev, name, &[Some(x.clone())], &infos, &a, &want).remove(0);
            let got = HostTensor::new(DType::F64, shape.clone(), got).unwrap().to_f64();
            let exact = matches!(name, "Floor" | "Ceil" | "Round" | "Sign" | "ThresholdedRelu" | "Relu" | "LeakyRelu");
            for (i, (w, g)) in want[0].to_f64().into_iter().zip(got).enumerate() {
                let tol = if exact { 0.0 } else { 1e-14 + 1e-12 * w.abs() };
                let ok = (w.is_nan() && g.is_nan()) || w == g || (w - g).abs() <= tol;
                assert!(ok, "{name} {a} x = {}: host {w:e}, OpenCL {g:e}", xs[i]);
            }
        }
    }
}
