//! The CI model set: tests/zoo/ holds tiny configurations of today's architectures (ViT,
//! Swin, ConvNeXt, MobileNetV3, EfficientNet, a transformer encoder, an LSTM, a GPT-2-style
//! decoder), each exported from PyTorch with both exporters (TorchScript and dynamo) with
//! random weights and non-trivial BatchNorm statistics, as conformance cases holding
//! onnxruntime's outputs (`bash scripts/zoo.sh --small --cases tests/zoo` regenerates them;
//! CI needs no torch). Every case matches onnxruntime on the host, Intel and PoCL, and on
//! Intel with `--textures auto`; every memory plan reaches the lower bound. The full-size
//! models are in docs/models.md.

use rxvm::compile::{compile, Options, Textures};
use rxvm::conformance::{find_cases, report, run_all, run_case_with_options, Outcome};
use rxvm::session::read_model;
use rxvm::vm::memory::DeviceSpec;
use rxvm::vm::DeviceCaps;
use std::path::{Path, PathBuf};

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/zoo");
    let cases = find_cases(&[dir]).expect("the zoo cases");
    assert_eq!(cases.len(), 16, "8 models, each from both exporters");
    cases
}

fn all_pass(label: &str, device: DeviceSpec) {
    let results = run_all(&cases(), &device);
    let text = report(&results);
    println!("{label}:\n{text}");
    assert!(
        results.iter().all(|r| r.outcome == Outcome::Pass),
        "{label}: a zoo model does not match onnxruntime:\n{text}"
    );
}

#[test]
fn zoo_models_match_onnxruntime_on_the_host() {
    all_pass("host", DeviceSpec::Host(DeviceCaps::host()));
}

#[test]
fn zoo_models_match_onnxruntime_on_intel_and_pocl() {
    for name in ["intel", "pocl"] {
        if let Some(d) = rxvm_test_support::devices::opencl_platform(name) {
            all_pass(name, DeviceSpec::OpenCl(d));
        }
    }
}

#[test]
fn zoo_models_run_with_textures_on_intel() {
    let Some(d) = rxvm_test_support::devices::opencl_platform("intel") else { return };
    let device = DeviceSpec::OpenCl(d);
    let options = Options { textures: Textures::Auto, ..Options::default() };
    for case in cases() {
        let (outcome, _) = run_case_with_options(&case, &device, &options);
        assert_eq!(outcome, Outcome::Pass, "{} with --textures auto on Intel", case.display());
    }
}

#[test]
fn zoo_plans_reach_the_lower_bound() {
    for case in cases() {
        let Ok((model, shapes)) = read_model(&case.join("model.onnx")) else { panic!("{} reads", case.display()) };
        let c = compile(&model, &shapes, &Options::default()).expect("the model compiles");
        assert_eq!(c.report.arena_bytes, c.report.lower_bound, "{}: the plan is above the lower bound", case.display());
    }
}
