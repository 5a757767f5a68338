//! ONNX's own operator test vectors (the onnx==1.23.2 wheel's pytorch-converted and
//! pytorch-operator cases, fetched by scripts/fetch-onnx-data.sh) run through the VM's
//! operators on the host device. Float outputs must match within
//! `conformance::ATOL + conformance::RTOL * |expected|`; a case that uses an operator the
//! VM lacks is skipped and named. `RXVM_REQUIRE_ONNX_DATA=1` (set by scripts/test.sh)
//! makes missing data an error.

use rxvm::conformance::{find_cases, report, run_all, Outcome};
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
