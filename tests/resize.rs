//! ONNX's node-suite Resize and Upsample cases with their roi / scales / sizes frozen into
//! initializers (`scripts/freeze-node-inputs.py` made tests/resize/ from the suite, whose
//! cases give those inputs as graph inputs, which decide shapes and so cannot compile). Every
//! case matches the expected outputs on the host, Intel and PoCL, and on Intel with
//! `--textures auto`. tests/resize-textures/ holds the same cases between two Relus
//! (`--sandwich`, expected outputs from ONNX's reference evaluator), so that with
//! `--textures auto` the resizes of the spatial dims run on textures (28 of them; a resize
//! whose sizes or roi name the channel axis stays on buffers).

use rxvm::compile::{Options, Textures};
use rxvm::conformance::{find_cases, report, run_all, run_case_with_options, Outcome};
use rxvm::vm::memory::DeviceSpec;
use rxvm::vm::DeviceCaps;
use std::path::{Path, PathBuf};

fn cases_in(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let cases = find_cases(&[dir]).expect("the resize cases");
    assert_eq!(cases.len(), 40, "39 Resize cases and test_upsample_nearest");
    cases
}

fn cases() -> Vec<PathBuf> {
    cases_in("tests/resize")
}

fn all_pass(label: &str, device: DeviceSpec) {
    let results = run_all(&cases(), &device);
    let text = report(&results);
    println!("{label}:\n{text}");
    assert!(results.iter().all(|r| r.outcome == Outcome::Pass), "{label}: a resize case fails:\n{text}");
}

#[test]
fn resize_cases_pass_on_the_host() {
    all_pass("host", DeviceSpec::Host(DeviceCaps::host()));
}

#[test]
fn resize_cases_pass_on_intel_and_pocl() {
    for name in ["intel", "pocl"] {
        if let Some(d) = rxvm_test_support::devices::opencl_platform(name) {
            all_pass(name, DeviceSpec::OpenCl(d));
        }
    }
}

#[test]
fn resize_cases_pass_with_textures_on_intel() {
    let Some(d) = rxvm_test_support::devices::opencl_platform("intel") else { return };
    let device = DeviceSpec::OpenCl(d);
    let options = Options { textures: Textures::Auto, ..Options::default() };
    for case in cases().into_iter().chain(cases_in("tests/resize-textures")) {
        let (outcome, _) = run_case_with_options(&case, &device, &options);
        assert_eq!(outcome, Outcome::Pass, "{} with --textures auto on Intel", case.display());
    }
}

#[test]
fn relu_sandwiched_resize_cases_pass_on_the_host_and_opencl() {
    let cases = cases_in("tests/resize-textures");
    let mut devices = vec![("host", DeviceSpec::Host(DeviceCaps::host()))];
    for name in ["intel", "pocl"] {
        if let Some(d) = rxvm_test_support::devices::opencl_platform(name) {
            devices.push((name, DeviceSpec::OpenCl(d)));
        }
    }
    for (label, device) in devices {
        let results = run_all(&cases, &device);
        let text = report(&results);
        assert!(results.iter().all(|r| r.outcome == Outcome::Pass), "{label}: a sandwiched resize case fails:\n{text}");
    }
}
