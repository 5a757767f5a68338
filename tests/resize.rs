//! ONNX's node-suite Resize and Upsample cases with their roi / scales / sizes frozen into
//! initializers (`scripts/freeze-node-inputs.py` made tests/resize/ from the suite, whose
//! cases give those inputs as graph inputs, which decide shapes and so cannot compile). Every
//! case matches the expected outputs on the host, Intel and PoCL, and on Intel with
//! `--textures auto`.

use rxvm::compile::{Options, Textures};
use rxvm::conformance::{find_cases, report, run_all, run_case_with_options, Outcome};
use rxvm::vm::memory::DeviceSpec;
use rxvm::vm::DeviceCaps;
use std::path::{Path, PathBuf};

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/resize");
    let cases = find_cases(&[dir]).expect("the resize cases");
    assert_eq!(cases.len(), 40, "39 Resize cases and test_upsample_nearest");
    cases
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
    for case in cases() {
        let (outcome, _) = run_case_with_options(&case, &device, &options);
        assert_eq!(outcome, Outcome::Pass, "{} with --textures auto on Intel", case.display());
    }
}
