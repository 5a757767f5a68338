//! Operators: activation family — host kernels of the unary maps whose schemas are in
//! `crate::ir::operators::activation`. Each kernel runs the family's shared prologue
//! (`super::elementwise::unary_f32_f64`: data, attribute and shape checks) and maps every
//! element: f32, f16 and bf16 in f32, f64 in f64. Functions without an f32 form in Rust's std (erf, erfc) and those where f32
//! intermediates lose accuracy (Gelu, Mish, Celu, the hyperbolic functions: acosh near 1)
//! are computed in f64 and rounded once.

use super::elementwise::{no_checks, unary_f32_f64};
use super::host::HostFn;
use super::Attrs;
use crate::ir::host_tensor::HostTensor;
use crate::ir::operators::activation::*;
use crate::ir::operators::Operator;
use std::f64::consts::{FRAC_1_SQRT_2, FRAC_2_PI};

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[
    (Operator::Gelu, gelu),
    (Operator::Erf, |i, a, o| unary_f32_f64(i, a, o, no_checks, |v| libm::erf(v as f64) as f32, libm::erf)),
    (Operator::HardSigmoid, hard_sigmoid),
    (Operator::HardSwish, |i, a, o| {
        unary_f32_f64(
            i,
            a,
            o,
            no_checks,
            |v| v * (v / 6.0 + 0.5).clamp(0.0, 1.0),
            |v| v * (v / 6.0 + 0.5).clamp(0.0, 1.0),
        )
    }),
    (Operator::Mish, |i, a, o| unary_f32_f64(i, a, o, no_checks, |v| mish(v as f64) as f32, mish)),
    (Operator::Celu, celu),
    (Operator::ThresholdedRelu, thresholded_relu),
    (Operator::Log, |i, a, o| unary_f32_f64(i, a, o, no_checks, f32::ln, f64::ln)),
    (Operator::Reciprocal, |i, a, o| unary_f32_f64(i, a, o, no_checks, f32::recip, f64::recip)),
    (Operator::Floor, |i, a, o| unary_f32_f64(i, a, o, no_checks, f32::floor, f64::floor)),
    (Operator::Ceil, |i, a, o| unary_f32_f64(i, a, o, no_checks, f32::ceil, f64::ceil)),
    (Operator::Round, |i, a, o| unary_f32_f64(i, a, o, no_checks, f32::round_ties_even, f64::round_ties_even)),
    (Operator::Sign, |i, a, o| unary_f32_f64(i, a, o, no_checks, |v| sign(v as f64) as f32, sign)),
    (Operator::Sin, |i, a, o| unary_f32_f64(i, a, o, no_checks, f32::sin, f64::sin)),
    (Operator::Cos, |i, a, o| unary_f32_f64(i, a, o, no_checks, f32::cos, f64::cos)),
    (Operator::Tan, |i, a, o| unary_f32_f64(i, a, o, no_checks, f32::tan, f64::tan)),
    (Operator::Asin, |i, a, o| unary_f32_f64(i, a, o, no_checks, f32::asin, f64::asin)),
    (Operator::Acos, |i, a, o| unary_f32_f64(i, a, o, no_checks, f32::acos, f64::acos)),
    (Operator::Atan, |i, a, o| unary_f32_f64(i, a, o, no_checks, f32::atan, f64::atan)),
    (Operator::Sinh, |i, a, o| unary_f32_f64(i, a, o, no_checks, |v| (v as f64).sinh() as f32, f64::sinh)),
    (Operator::Cosh, |i, a, o| unary_f32_f64(i, a, o, no_checks, |v| (v as f64).cosh() as f32, f64::cosh)),
    (Operator::Asinh, |i, a, o| unary_f32_f64(i, a, o, no_checks, |v| (v as f64).asinh() as f32, f64::asinh)),
    (Operator::Acosh, |i, a, o| unary_f32_f64(i, a, o, no_checks, |v| (v as f64).acosh() as f32, f64::acosh)),
    (Operator::Atanh, |i, a, o| unary_f32_f64(i, a, o, no_checks, |v| (v as f64).atanh() as f32, f64::atanh)),
];

/// numpy's sign: ±1, 0 for ±0, NaN for NaN.
fn sign(v: f64) -> f64 {
    if v > 0.0 {
        1.0
    } else if v < 0.0 {
        -1.0
    } else if v == 0.0 {
        0.0
    } else {
        v
    }
}

/// x * tanh(softplus(x)), softplus as max(x, 0) + ln(1 + e^-|x|) (no overflow).
fn mish(x: f64) -> f64 {
    x * (x.max(0.0) + (-x.abs()).exp().ln_1p()).tanh()
}

fn gelu(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    if gelu_tanh(attrs)? {
        let c = FRAC_2_PI.sqrt();
        let g = move |x: f64| 0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh());
        unary_f32_f64(ins, attrs, outs, validate_gelu, |v| g(v as f64) as f32, g)
    } else {
        // x/2 (1 + erf(x/√2)) = x/2 erfc(-x/√2): no cancellation for large negative x.
        let g = |x: f64| 0.5 * x * libm::erfc(-x * FRAC_1_SQRT_2);
        unary_f32_f64(ins, attrs, outs, validate_gelu, |v| g(v as f64) as f32, g)
    }
}

/// `max(0, min(1, t))` keeping NaN (as numpy's `clip`, which the ONNX reference uses;
/// `clamp` returns NaN for NaN); alpha and beta are f32, as ONNX's attributes.
fn hard_sigmoid(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    let (a32, b32) = (attrs.float("alpha", 0.2) as f32, attrs.float("beta", 0.5) as f32);
    let (alpha, beta) = (a32 as f64, b32 as f64);
    unary_f32_f64(
        ins,
        attrs,
        outs,
        validate_hard_sigmoid,
        |v| (a32 * v + b32).clamp(0.0, 1.0),
        |v| (alpha * v + beta).clamp(0.0, 1.0),
    )
}

fn celu(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    // For any nonzero alpha, min(0, alpha (exp(x/alpha) - 1)) is 0 for x > 0 and the term
    // itself otherwise, so the sum is one branch or the other.
    let alpha = attrs.float("alpha", 1.0) as f32 as f64;
    let g = move |v: f64| if v > 0.0 { v } else { alpha * (v / alpha).exp_m1() };
    unary_f32_f64(ins, attrs, outs, validate_celu, |v| if v > 0.0 { v } else { g(v as f64) as f32 }, g)
}

fn thresholded_relu(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    let a32 = attrs.float("alpha", 1.0) as f32;
    let alpha = a32 as f64;
    unary_f32_f64(
        ins,
        attrs,
        outs,
        validate_thresholded_relu,
        |v| if v > a32 { v } else { 0.0 },
        |v| if v > alpha { v } else { 0.0 },
    )
}

#[cfg(test)]
#[allow(clippy::approx_constant, clippy::excessive_precision)]
mod tests {
    use super::*;
    use crate::ops::{AttrValue, TensorInfo, OPS};

    fn attrs(list: &[(&str, AttrValue)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    fn float(v: f64) -> AttrValue {
        AttrValue::Float(v)
    }

    /// Runs `name` the way the interpreter does (attribute check, inference, host kernel).
    fn run(name: &str, x: &[f32], a: &Attrs) -> Result<Vec<f32>, String> {
        let def = OPS.iter().find(|o| o.name == name).unwrap_or_else(|| panic!("no operator {name}"));
        def.check_attrs(a)?;
        let x = HostTensor::from_f32(&[x.len() as i64], x).unwrap();
        let info = [Some(TensorInfo { dtype: x.dtype, shape: &x.shape, value: Some(&x) })];
        let (dtype, shape) = (def.infer)(&info, a)?.remove(0);
        let mut out = [HostTensor::zeros(dtype, &shape).unwrap()];
        (def.op.id().host_kernel().unwrap())(&[Some(&x)], a, &mut out)?;
        Ok(out[0].data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect())
    }

    /// Checks `name` on `x` against reference values (NaN matches NaN; within 2 ulp-ish).
    fn check(name: &str, a: &Attrs, x: &[f32], want: &[f32]) {
        let got = run(name, x, a).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got.len(), want.len());
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= 1e-7 + 3e-7 * w.abs();
            assert!(ok, "{name} {a:?} element {i} (x = {}): got {g}, want {w}\n got {got:?}\nwant {want:?}", x[i]);
        }
    }

    const X8: [f32; 8] = [-3.0, -1.5, -0.5, 0.0, 0.25, 1.0, 2.5, 10.0];
    const INF: f32 = f32::INFINITY;
    const NAN: f32 = f32::NAN;

    // Reference values: Python's `math` module in f64 (erf, tanh, log1p, ...), rounded
    // to f32; written down, not computed by the code under test.
    #[test]
    fn activations_match_reference_values() {
        let none = Attrs::default();
        let tanh = attrs(&[("approximate", AttrValue::Str("tanh".into()))]);
        let explicit_none = attrs(&[("approximate", AttrValue::Str("none".into()))]);
        #[rustfmt::skip]
        let cases: &[(&str, Attrs, [f32; 8])] = &[
            ("Gelu", none.clone(), [-0.004049694165587425, -0.10021080076694489, -0.1542687714099884, 0.0, 0.14967657625675201, 0.8413447737693787, 2.48447585105896, 10.0]),
            ("Gelu", explicit_none, [-0.004049694165587425, -0.10021080076694489, -0.1542687714099884, 0.0, 0.14967657625675201, 0.8413447737693787, 2.48447585105896, 10.0]),
            ("Gelu", tanh.clone(), [-0.003637392073869705, -0.10042842477560043, -0.1542859971523285, 0.0, 0.14967535436153412, 0.8411920070648193, 2.4849157333374023, 10.0]),
            ("Erf", none.clone(), [-0.9999778866767883, -0.9661051630973816, -0.5204998850822449, 0.0, 0.27632638812065125, 0.8427007794380188, 0.9995930194854736, 1.0]),
            ("HardSigmoid", none.clone(), [0.0, 0.20000000298023224, 0.4000000059604645, 0.5, 0.550000011920929, 0.699999988079071, 1.0, 1.0]),
            ("HardSigmoid", attrs(&[("alpha", float(0.5)), ("beta", float(-0.25))]), [0.0, 0.0, 0.0, 0.0, 0.0, 0.25, 1.0, 1.0]),
            ("HardSwish", none.clone(), [-0.0, -0.375, -0.2083333283662796, 0.0, 0.1354166716337204, 0.6666666865348816, 2.2916667461395264, 10.0]),
            ("Mish", none.clone(), [-0.14564746618270874, -0.2980997562408447, -0.22074377536773682, 0.0, 0.16957241296768188, 0.8650984168052673, 2.4713923931121826, 10.0]),
            ("Celu", none.clone(), [-0.9502129554748535, -0.7768698334693909, -0.39346933364868164, 0.0, 0.25, 1.0, 2.5, 10.0]),
            ("Celu", attrs(&[("alpha", float(2.0))]), [-1.5537396669387817, -1.0552668571472168, -0.44239842891693115, 0.0, 0.25, 1.0, 2.5, 10.0]),
            ("ThresholdedRelu", none.clone(), [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.5, 10.0]),
            ("ThresholdedRelu", attrs(&[("alpha", float(0.2))]), [0.0, 0.0, 0.0, 0.0, 0.25, 1.0, 2.5, 10.0]),
            ("Sin", none.clone(), [-0.14112000167369843, -0.9974949955940247, -0.4794255495071411, 0.0, 0.24740396440029144, 0.8414709568023682, 0.5984721183776855, -0.5440211296081543]),
            ("Cos", none.clone(), [-0.9899924993515015, 0.07073719799518585, 0.8775825500488281, 1.0, 0.9689124226570129, 0.5403022766113281, -0.8011435866355896, -0.83907151222229]),
            ("Atan", none.clone(), [-1.249045729637146, -0.9827937483787537, -0.46364760398864746, 0.0, 0.244978666305542, 0.7853981852531433, 1.1902899742126465, 1.4711276292800903]),
            ("Floor", none.clone(), [-3.0, -2.0, -1.0, 0.0, 0.0, 1.0, 2.0, 10.0]),
            ("Ceil", none.clone(), [-3.0, -1.0, -0.0, 0.0, 1.0, 1.0, 3.0, 10.0]),
            ("Round", none.clone(), [-3.0, -2.0, -0.0, 0.0, 0.0, 1.0, 2.0, 10.0]),
            ("Sign", none.clone(), [-1.0, -1.0, -1.0, 0.0, 1.0, 1.0, 1.0, 1.0]),
        ];
        for (name, a, want) in cases {
            check(name, a, &X8, want);
        }
        #[rustfmt::skip]
        let other: &[(&str, [f32; 8], [f32; 8])] = &[
            ("Tan", [-0.9, -0.5, 0.0, 0.3, 0.99, 2.0, 0.5, -1.25],
                [-1.2601581811904907, -0.5463024973869324, 0.0, 0.30933627486228943, 1.5236767530441284, -2.185039758682251, 0.5463024973869324, -3.0095696449279785]),
            ("Asin", [-1.0, -0.9, -0.5, 0.0, 0.3, 0.5, 0.99, 1.0],
                [-1.5707963705062866, -1.1197694540023804, -0.5235987901687622, 0.0, 0.30469265580177307, 0.5235987901687622, 1.4292569160461426, 1.5707963705062866]),
            ("Acos", [-1.0, -0.9, -0.5, 0.0, 0.3, 0.5, 0.99, 1.0],
                [3.1415927410125732, 2.690565824508667, 2.094395160675049, 1.5707963705062866, 1.2661036252975464, 1.0471975803375244, 0.14153940975666046, 0.0]),
            ("Log", [0.001, 0.5, 1.0, 2.0, 2.7182817, 10.0, 1e30, 3.4e38],
                [-6.907755374908447, -0.6931471824645996, 0.0, 0.6931471824645996, 0.9999999403953552, 2.3025851249694824, 69.07755279541016, 88.72200775146484]),
            ("Reciprocal", [0.001, 0.5, 1.0, 2.0, 2.7182817, 10.0, 1e30, 3.4e38],
                [999.9999389648438, 2.0, 1.0, 0.5, 0.3678794503211975, 0.10000000149011612, 1.0000000031710769e-30, 2.9411769389805726e-39]),
            ("Sinh", X8, [-10.017874717712402, -2.129279375076294, -0.5210952758789062, 0.0, 0.25261232256889343, 1.175201177597046, 6.050204277038574, 11013.232421875]),
            ("Cosh", X8, [10.067662239074707, 2.352409601211548, 1.1276259422302246, 1.0, 1.0314130783081055, 1.5430806875228882, 6.132289409637451, 11013.2333984375]),
            ("Asinh", X8, [-1.8184465169906616, -1.19476318359375, -0.4812118113040924, 0.0, 0.24746645987033844, 0.8813735842704773, 1.647231101989746, 2.998223066329956]),
            ("Acosh", [1.0, 1.0001, 1.5, 2.0, 3.0, 10.0, 1e10, 3e38],
                [0.0, 0.014143191277980804, 0.9624236226081848, 1.316957950592041, 1.7627471685409546, 2.993222951889038, 23.718997955322266, 89.28999328613281]),
            ("Atanh", [-0.999, -0.9, -0.5, 0.0, 0.25, 0.5, 0.9, 1e-4],
                [-3.8002076148986816, -1.4722193479537964, -0.5493061542510986, 0.0, 0.2554128170013428, 0.5493061542510986, 1.4722193479537964, 9.999999747378752e-05]),
        ];
        for (name, x, want) in other {
            check(name, &none, x, want);
        }
    }

    #[test]
    fn edge_cases_follow_the_onnx_reference() {
        let none = Attrs::default();
        let tanh = attrs(&[("approximate", AttrValue::Str("tanh".into()))]);
        // Far tails: the exact Gelu keeps its tiny negative tail (erfc, no cancellation);
        // -inf gives NaN as the ONNX formula's -inf * 0 does.
        check(
            "Gelu",
            &none,
            &[-10.0, -5.0, 5.0, 1e-4, INF, -INF, NAN],
            &[-7.619852977043458e-23, -1.433257807548216e-06, 4.999998569488525, 5.000398959964514e-05, INF, NAN, NAN],
        );
        check(
            "Gelu",
            &tanh,
            &[-10.0, -5.0, 5.0, 1e-4, INF, -INF, NAN],
            &[-0.0, -2.2917961928214936e-07, 5.0, 5.000398959964514e-05, INF, NAN, NAN],
        );
        check(
            "Erf",
            &none,
            &[-4.0, 4.0, 1e-4, -1e-6, INF, -INF, NAN],
            &[-1.0, 1.0, 0.00011283791536698118, -1.1283791536698118e-06, 1.0, -1.0, NAN],
        );
        check(
            "Mish",
            &none,
            &[-100.0, -20.0, 20.0, 100.0, INF, NAN],
            &[-3.7204474227823893e-42, -4.122307117881974e-08, 20.0, 100.0, INF, NAN],
        );
        check(
            "Celu",
            &none,
            &[-100.0, 1e-3, -1e-3, -INF, INF, NAN],
            &[-1.0, 0.0010000000474974513, -0.0009995001601055264, -1.0, INF, NAN],
        );
        // Clamps keep NaN (numpy's clip); ThresholdedRelu's `x > alpha` is false for NaN.
        // HardSwish(-inf) is the formula's -inf * 0: NaN, as in the ONNX reference.
        check("HardSigmoid", &none, &[NAN, INF, -INF], &[NAN, 1.0, 0.0]);
        check("HardSwish", &none, &[NAN, INF, -INF, -3.0, 3.0], &[NAN, INF, NAN, -0.0, 3.0]);
        check("ThresholdedRelu", &none, &[NAN, INF, 1.0, 1.0000001], &[0.0, INF, 0.0, 1.0000001]);
        // Round: halves go to the even neighbour, in both directions.
        check(
            "Round",
            &none,
            &[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999998, 8388609.0, NAN, -INF],
            &[0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 2.0, 8388609.0, NAN, -INF],
        );
        check("Floor", &none, &[-0.5, -INF, NAN, 1e30], &[-1.0, -INF, NAN, 1e30]);
        check("Ceil", &none, &[-0.5, INF, NAN, -1e30], &[-0.0, INF, NAN, -1e30]);
        check("Sign", &none, &[-0.0, NAN, INF, -INF, 1e-40], &[0.0, NAN, 1.0, -1.0, 1.0]);
        check("Log", &none, &[0.0, -0.0, -1.0, INF, NAN], &[-INF, -INF, NAN, INF, NAN]);
        check("Reciprocal", &none, &[0.0, -0.0, INF, NAN], &[INF, -INF, 0.0, NAN]);
        check("Sin", &none, &[100.0, -1000.0, INF, NAN], &[-0.5063656568527222, -0.8268795609474182, NAN, NAN]);
        check("Asin", &none, &[1.5, -1.0000001, NAN], &[NAN, NAN, NAN]);
        check("Acos", &none, &[1.5, -2.0], &[NAN, NAN]);
        check("Atan", &none, &[INF, -INF], &[1.5707963705062866, -1.5707963705062866]);
        // sinh overflows f32 only where the f32 result does (no intermediate overflow).
        check("Sinh", &none, &[89.0, -90.0, INF, NAN], &[2.2448063889081578e+38, -INF, INF, NAN]);
        check("Cosh", &none, &[-INF, -90.0], &[INF, INF]);
        check("Asinh", &none, &[-1e30, -INF], &[-69.77069854736328, -INF]);
        check("Acosh", &none, &[0.999, INF, -1.0], &[NAN, INF, NAN]);
        check("Atanh", &none, &[1.0, -1.0, 1.0001, NAN], &[INF, -INF, NAN, NAN]);
        // The sign of zero is kept where the reference keeps it.
        let z = run("Round", &[-0.4], &none).unwrap();
        assert!(z[0] == 0.0 && z[0].is_sign_negative(), "Round(-0.4) = {}", z[0]);
    }

    #[test]
    fn attributes_are_checked() {
        let err = |name: &str, a: &Attrs| run(name, &[1.0], a).expect_err(name);
        assert_eq!(
            err("Gelu", &attrs(&[("approximate", AttrValue::Str("erf".into()))])),
            "attribute `approximate` of @onnx.Gelu must be \"none\" or \"tanh\", found \"erf\""
        );
        assert_eq!(
            err("Celu", &attrs(&[("alpha", float(0.0))])),
            "attribute `alpha` of @onnx.Celu must be nonzero (it divides x)"
        );
        assert_eq!(
            err("HardSigmoid", &attrs(&[("beta", float(f64::NAN))])),
            "attribute `beta` of @onnx.HardSigmoid must be finite, found NaN"
        );
        assert_eq!(
            err("ThresholdedRelu", &attrs(&[("alpha", float(f64::INFINITY))])),
            "attribute `alpha` of @onnx.ThresholdedRelu must be finite, found inf"
        );
        assert!(err("HardSwish", &attrs(&[("alpha", float(0.5))])).contains("alpha"));
        // Only f32 inputs.
        let def = OPS.iter().find(|o| o.name == "Erf").unwrap();
        let x = HostTensor::zeros(crate::ir::types::DType::I64, &[2]).unwrap();
        let info = [Some(TensorInfo { dtype: x.dtype, shape: &x.shape, value: None })];
        assert!((def.infer)(&info, &Attrs::default()).is_err());
    }

    /// f64 computes in f64: hand-checked values (Python's `math` in f64), within 2 ulp.
    #[test]
    fn f64_maps_compute_in_f64() {
        use crate::ir::types::DType;
        use crate::ops::host::testing::tensor;
        let run64 = |name: &str, a: &Attrs, x: &[f64]| -> Vec<f64> {
            let def = OPS.iter().find(|o| o.name == name).unwrap();
            let x = tensor(DType::F64, &[x.len() as i64], x);
            let info = [Some(TensorInfo { dtype: x.dtype, shape: &x.shape, value: Some(&x) })];
            let (dtype, shape) = (def.infer)(&info, a).unwrap().remove(0);
            assert_eq!(dtype, DType::F64);
            let mut out = [HostTensor::zeros(dtype, &shape).unwrap()];
            (def.op.id().host_kernel().unwrap())(&[Some(&x)], a, &mut out).unwrap();
            out[0].to_f64()
        };
        let none = Attrs::default();
        #[rustfmt::skip]
        let cases: &[(&str, &[f64], &[f64])] = &[
            ("Log", &[1.0, 0.5, 10.0, 0.0, -1.0], &[0.0, -0.6931471805599453, 2.302585092994046, f64::NEG_INFINITY, f64::NAN]),
            ("Reciprocal", &[4.0, 3.0], &[0.25, 0.3333333333333333]),
            ("Floor", &[-0.5, 2.7], &[-1.0, 2.0]),
            ("Ceil", &[-0.5, 2.2], &[-0.0, 3.0]),
            ("Round", &[0.5, 1.5, -2.5, 4503599627370495.5], &[0.0, 2.0, -2.0, 4503599627370496.0]),
            ("Sign", &[-3.0, 0.0, 1e-300, f64::NAN], &[-1.0, 0.0, 1.0, f64::NAN]),
            ("Sin", &[1.0], &[0.8414709848078965]),
            ("Cos", &[1.0], &[0.5403023058681398]),
            ("Atan", &[1.0], &[0.7853981633974483]),
            ("Sinh", &[1.0], &[1.1752011936438014]),
            ("Acosh", &[2.0], &[1.3169578969248166]),
            ("Atanh", &[0.5], &[0.5493061443340549]),
            ("Erf", &[0.5], &[0.5204998778130465]),
            ("Gelu", &[1.0], &[0.8413447460685429]),
            // alpha 0.2 is an f32 attribute: 0.2f32 + 0.5.
            ("HardSigmoid", &[1.0, 10.0], &[0.7000000029802322, 1.0]),
            ("ThresholdedRelu", &[1.0, 1.5], &[0.0, 1.5]),
            // The elementwise family's f32 maps that take f64 too (alpha 0.01f32, 1, Selu's
            // f32 defaults).
            ("Relu", &[-1.0, 2.5], &[0.0, 2.5]),
            ("LeakyRelu", &[-2.0, 3.0], &[-0.019999999552965164, 3.0]),
            ("Elu", &[-1.0, 3.0], &[-0.6321205588285577, 3.0]),
            ("Selu", &[-1.0, 2.0], &[-1.1113307412864781, 2.1014020442962646]),
        ];
        for (name, x, want) in cases {
            let got = run64(name, &none, x);
            for (i, (&g, &w)) in got.iter().zip(want.iter()).enumerate() {
                let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= 4.5e-16 * w.abs();
                assert!(ok, "{name} element {i}: got {g:e}, want {w:e}");
            }
        }
        // 1e-300's f32 rounding would be 0: the f64 path does not go through f32.
        assert_eq!(run64("Log", &none, &[1e-300])[0], 1e-300f64.ln());
    }
}
