//! ONNX's own operator test vectors (the onnx==1.23.2 wheel's pytorch-converted and
//! pytorch-operator cases, and ONNX's node test suite generated from the wheel, both
//! written by scripts/fetch-onnx-data.sh) run through the VM's operators on the host
//! device. Float outputs must match within `conformance::ATOL + conformance::RTOL *
//! |expected|`; a case that uses an operator the VM lacks is skipped and named.
//! `RXVM_REQUIRE_ONNX_DATA=1` (set by scripts/test.sh) makes missing data an error.

use rxvm::conformance::{find_cases, report, run_all, summary, Cause, Outcome};
use rxvm::vm::memory::DeviceSpec;
use rxvm::vm::DeviceCaps;
use std::path::{Path, PathBuf};

fn cases() -> Option<Vec<PathBuf>> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/onnx/wheel/onnx/backend/test/data");
    if !data.join("pytorch-converted").is_dir() {
        assert!(
            std::env::var("RXVM_REQUIRE_ONNX_DATA").is_err(),
            "ONNX test data is missing: run scripts/fetch-onnx-data.sh"
        );
        eprintln!("skipping: no ONNX test data (run scripts/fetch-onnx-data.sh)");
        return None;
    }
    let cases = find_cases(&[data.join("pytorch-converted"), data.join("pytorch-operator")]).expect("cases");
    assert_eq!(cases.len(), 117, "the wheel ships 117 pytorch cases");
    Some(cases)
}

/// Runs every case on `device`; asserts none fails and at least `min_passed` pass.
fn check(label: &str, device: DeviceSpec, min_passed: usize) {
    let Some(cases) = cases() else { return };
    let results = run_all(&cases, &device);
    let text = report(&results);
    println!("{label} conformance:\n{text}");
    let failed: Vec<_> = results.iter().filter(|r| matches!(r.outcome, Outcome::Fail(_))).collect();
    assert!(failed.is_empty(), "{label}: failing cases:\n{text}");
    let passed = results.iter().filter(|r| r.outcome == Outcome::Pass).count();
    // Raised as kernels land; a drop means a regression.
    assert!(passed >= min_passed, "{label}: only {passed} cases pass:\n{text}");
}

/// An OpenCL platform for the conformance run, unless absent and not required.
fn platform(name: &str) -> Option<DeviceSpec> {
    rxvm_test_support::devices::opencl_platform(name).map(DeviceSpec::OpenCl)
}

#[test]
fn onnx_backend_cases_pass_on_intel_opencl() {
    if let Some(d) = platform("intel") {
        check("intel", d, MIN_PASSED_OPENCL);
    }
}

#[test]
fn onnx_backend_cases_pass_on_pocl() {
    if let Some(d) = platform("pocl") {
        check("pocl", d, MIN_PASSED_OPENCL);
    }
}

#[test]
fn onnx_backend_cases_pass_on_the_host() {
    check("host", DeviceSpec::Host(DeviceCaps::host()), MIN_PASSED);
}

/// The number of cases that pass today (see docs/operators.md).
const MIN_PASSED: usize = 117;
/// The number of cases that pass on an OpenCL device today (operators without an OpenCL
/// kernel are skipped).
const MIN_PASSED_OPENCL: usize = 117;

/// ONNX's node test suite (1,884 cases, .cache/onnx/node) on the host: at least
/// [`NODE_MIN_PASSED`] pass; none panics or hangs; no output is wrong except the cases of
/// [`NODE_WRONG_RESULTS`]; and every case that does not pass has a known cause (so that
/// `rxvm conformance --summary` files it). The whole suite runs: it takes about a second
/// in a debug build. docs/conformance.md has the baseline and the summary.
#[test]
fn onnx_node_suite_on_the_host() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/onnx/node");
    if !dir.join(".complete").is_file() {
        assert!(
            std::env::var("RXVM_REQUIRE_ONNX_DATA").is_err(),
            "ONNX's node test suite is missing: run scripts/fetch-onnx-data.sh"
        );
        eprintln!("skipping: no ONNX node test suite (run scripts/fetch-onnx-data.sh)");
        return;
    }
    let cases = find_cases(&[dir]).expect("cases");
    assert_eq!(cases.len(), 1884, "onnx 1.23.2's node suite has 1,884 cases");
    let results = run_all(&cases, &DeviceSpec::Host(DeviceCaps::host()));
    let text = summary(&results);
    println!("host node-suite conformance:\n{text}");
    let with = |want: fn(&Cause) -> bool| -> Vec<String> {
        results
            .iter()
            .filter(|r| r.cause.as_ref().is_some_and(want))
            .map(|r| format!("{}: {:?}", r.name, r.outcome))
            .collect()
    };
    let crashed = with(|c| matches!(c, Cause::Panic | Cause::Timeout));
    assert!(crashed.is_empty(), "cases that panicked or hung:\n{}", crashed.join("\n"));
    let wrong: Vec<String> = with(|c| *c == Cause::WrongResult)
        .into_iter()
        .filter(|w| !NODE_WRONG_RESULTS.iter().any(|(name, _)| w.starts_with(&format!("{name}: "))))
        .collect();
    assert!(wrong.is_empty(), "wrong results (not in NODE_WRONG_RESULTS):\n{}", wrong.join("\n"));
    let unknown = with(|c| *c == Cause::Other);
    assert!(
        unknown.is_empty(),
        "errors conformance::classify_error does not file under a cause (teach it their kind):\n{}",
        unknown.join("\n")
    );
    let passed = results.iter().filter(|r| r.outcome == Outcome::Pass).count();
    // Raised as operators land; a drop means a regression.
    assert!(passed >= NODE_MIN_PASSED, "only {passed} node-suite cases pass on the host:\n{text}");
}

/// The node-suite cases that pass on the host today (docs/conformance.md).
const NODE_MIN_PASSED: usize = 1702;
/// Node-suite cases whose output is known to be wrong, each with its cause
/// (docs/conformance.md): none today.
const NODE_WRONG_RESULTS: &[(&str, &str)] = &[];

/// A case whose expected outputs hold infinities and NaN: `rxvm conformance` passes it when
/// the outputs are the same non-finite values (it once failed `inf` against `inf`, as
/// `inf - inf` is NaN), and fails it when an infinity has the other sign.
#[test]
fn non_finite_outputs_compare_exactly() {
    use onnx_protobuf::{GraphProto, Message};
    use rxvm_test_support::onnx_build::{bytes, f32_tensor, model, node, value_info, Encoding, F32};
    let root = std::env::temp_dir().join(format!("rxvm-conformance-inf-{}", std::process::id()));
    // x / z = [inf, -inf, NaN, 2].
    let (x, z) = ([1.0, -1.0, 0.0, 2.0], [0.0, 0.0, 0.0, 1.0]);
    let mut g = GraphProto::new();
    g.name = "div".into();
    g.input.push(value_info("x", F32, &[4]));
    g.initializer.push(f32_tensor("z", &[4], &z, Encoding::Raw));
    g.node.push(node("Div", &["x", "z"], &["y"]));
    g.output.push(value_info("y", F32, &[4]));
    let case = |name: &str, want: [f32; 4]| {
        let dir = root.join(name);
        let set = dir.join("test_data_set_0");
        std::fs::create_dir_all(&set).expect("a case folder");
        std::fs::write(dir.join("model.onnx"), bytes(&model(g.clone()))).expect("model.onnx");
        let tensor = |n: &str, v: &[f32]| f32_tensor(n, &[4], v, Encoding::Raw).write_to_bytes().expect("a tensor");
        std::fs::write(set.join("input_0.pb"), tensor("x", &x)).expect("input_0.pb");
        std::fs::write(set.join("output_0.pb"), tensor("y", &want)).expect("output_0.pb");
        dir
    };
    let inf = f32::INFINITY;
    let same = case("same", [inf, -inf, f32::NAN, 2.0]);
    let flipped = case("flipped", [inf, inf, f32::NAN, 2.0]);
    let run = |dir: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_rxvm")).arg("conformance").arg(dir).output().expect("rxvm runs")
    };
    let out = run(&same);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout, "pass  same\n1 passed, 0 failed, 0 skipped\n");
    let out = run(&flipped);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "FAIL  flipped: output 0: element 1 is -inf, expected inf (tolerance 0.00001 + 0.001 * |expected|)\n0 passed, 1 failed, 0 skipped\n"
    );
    // `--summary` files it as a wrong result, named with its error.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rxvm"))
        .args(["conformance", "--summary"])
        .arg(&flipped)
        .arg(&same)
        .output()
        .expect("rxvm runs");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "1 case(s) did not pass, by cause:\n  wrong result: 1 case\n    flipped: output 0: element 1 is -inf, expected inf (tolerance 0.00001 + 0.001 * |expected|)\n1 passed, 1 failed, 0 skipped\n"
    );
    // A case over `--timeout` fails as a timeout, and the run goes on (1 µs: no case reads
    // its model that fast).
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rxvm"))
        .args(["conformance", "--summary", "--timeout", "0.001ms"])
        .arg(&same)
        .output()
        .expect("rxvm runs");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "1 case(s) did not pass, by cause:\n  timeout: 1 case\n    same: ran longer than the time limit (1µs)\n0 passed, 1 failed, 0 skipped\n"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// The cases of ONNX's node suite (`.cache/onnx/node`, when generated) that exercise the
/// activation family directly: every one passes on the host, Intel and PoCL. (Their
/// `_expanded` forms need `Constant` attribute forms and CastLike, and the f16/bf16 Celu
/// cases f16 arithmetic, which are not this family's.)
#[test]
fn activation_node_cases_pass_on_every_device() {
    let node = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/onnx/node");
    if !node.is_dir() {
        eprintln!("skipping: no ONNX node suite under .cache/onnx/node");
        return;
    }
    let names = "acos acos_example acosh acosh_example asin asin_example asinh asinh_example atan atan_example \
                 atanh atanh_example ceil ceil_example celu cos cos_example cosh cosh_example erf floor floor_example \
                 gelu_default_1 gelu_default_2 gelu_tanh_1 gelu_tanh_2 hardsigmoid hardsigmoid_default \
                 hardsigmoid_example hardswish hardswish_expanded log log_example mish mish_expanded reciprocal \
                 reciprocal_example round sign sin sin_example sinh sinh_example tan tan_example thresholdedrelu \
                 thresholdedrelu_default thresholdedrelu_example";
    let cases: Vec<PathBuf> = names.split_whitespace().map(|n| node.join(format!("test_{n}"))).collect();
    assert_eq!(cases.len(), 48);
    let mut devices = vec![("host", DeviceSpec::Host(DeviceCaps::host()))];
    for name in ["intel", "pocl"] {
        if let Some(d) = platform(name) {
            devices.push((name, d));
        }
    }
    for (label, device) in devices {
        let results = run_all(&cases, &device);
        let text = report(&results);
        let passed = results.iter().filter(|r| r.outcome == Outcome::Pass).count();
        assert_eq!(passed, cases.len(), "{label}: activation node cases:\n{text}");
    }
}

/// The cases of ONNX's node suite (`.cache/onnx/node`, when generated) that exercise the
/// comparison and logic family and Expand, Range, Mod and Size directly: every one passes
/// on the host, Intel and PoCL. (The others need string tensors (Equal), bf16 (Range), Loop
/// (Range's `_expanded` forms), or the values of graph inputs when compiling: Expand's
/// shape and Range's scalars are inputs of those models.)
#[test]
fn logic_node_cases_pass_on_every_device() {
    let node = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/onnx/node");
    if !node.is_dir() {
        eprintln!("skipping: no ONNX node suite under .cache/onnx/node");
        return;
    }
    let names = "and2d and3d and4d and_bcast3v1d and_bcast3v2d and_bcast4v2d and_bcast4v3d and_bcast4v4d equal \
                 equal_bcast equal_int16 equal_int8 equal_uint16 equal_uint32 equal_uint64 equal_uint8 greater \
                 greater_bcast greater_equal greater_equal_bcast greater_equal_bcast_expanded \
                 greater_equal_expanded greater_equal_int16 greater_equal_int16_expanded greater_equal_int8 \
                 greater_equal_int8_expanded greater_equal_uint16 greater_equal_uint16_expanded \
                 greater_equal_uint32 greater_equal_uint32_expanded greater_equal_uint64 \
                 greater_equal_uint64_expanded greater_equal_uint8 greater_equal_uint8_expanded greater_int16 \
                 greater_int8 greater_uint16 greater_uint32 greater_uint64 greater_uint8 less less_bcast \
                 less_equal less_equal_bcast less_equal_bcast_expanded less_equal_expanded less_equal_int16 \
                 less_equal_int16_expanded less_equal_int8 less_equal_int8_expanded less_equal_uint16 \
                 less_equal_uint16_expanded less_equal_uint32 less_equal_uint32_expanded less_equal_uint64 \
                 less_equal_uint64_expanded less_equal_uint8 less_equal_uint8_expanded less_int16 less_int8 \
                 less_uint16 less_uint32 less_uint64 less_uint8 mod_broadcast mod_float16_mixed_sign_fmod_0 \
                 mod_float32_mixed_sign_fmod_0 mod_float64_mixed_sign_fmod_0 mod_float_edge_cases_fmod_0_float16 \
                 mod_float_edge_cases_fmod_0_float32 mod_float_edge_cases_fmod_0_float64 mod_int64_fmod \
                 mod_mixed_sign_float16 mod_mixed_sign_float32 mod_mixed_sign_float64 mod_mixed_sign_int16 \
                 mod_mixed_sign_int32 mod_mixed_sign_int64 mod_mixed_sign_int8 mod_uint16 mod_uint32 mod_uint64 \
                 mod_uint8 not_2d not_3d not_4d or2d or3d or4d or_bcast3v1d or_bcast3v2d or_bcast4v2d \
                 or_bcast4v3d or_bcast4v4d size size_example where_example where_long_example xor2d xor3d xor4d \
                 xor_bcast3v1d xor_bcast3v2d xor_bcast4v2d xor_bcast4v3d xor_bcast4v4d";
    let cases: Vec<PathBuf> = names.split_whitespace().map(|n| node.join(format!("test_{n}"))).collect();
    assert_eq!(cases.len(), 106);
    let mut devices = vec![("host", DeviceSpec::Host(DeviceCaps::host()))];
    for name in ["intel", "pocl"] {
        if let Some(d) = platform(name) {
            devices.push((name, d));
        }
    }
    for (label, device) in devices {
        let results = run_all(&cases, &device);
        let text = report(&results);
        let passed = results.iter().filter(|r| r.outcome == Outcome::Pass).count();
        assert_eq!(passed, cases.len(), "{label}: logic node cases:\n{text}");
    }
}
