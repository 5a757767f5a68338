//! The nine model-zoo CNNs of the `onnx==1.23.2` wheel (`backend/test/data/light`,
//! fetched by `scripts/fetch-onnx-data.sh`) compile and run, and match the wheel's expected
//! outputs. The input is the one ONNX's backend test runner feeds these models
//! (`generate_dummy_data(..., random=False)` in `onnx/backend/test/runner/__init__.py`):
//! element i of n is i / n, as f32 (`--input NAME=ramp`). The tolerance is the runner's:
//! |out - expected| <= 1e-7 + rtol * |expected| with rtol 1e-3 (2e-3 for densenet121).
//!
//! On the host the planned program is bit-identical to the no-reuse program (every tensor
//! its own storage): a plan that let two live tensors overlap would change the result.
//!
//! With `--textures auto` the activations of texture operators live in blocked images. On
//! the host (which computes texture operators with its buffer kernels) that program is
//! bit-identical to the buffer program; on Intel (images over the arena's buffer) and PoCL
//! (each texture a separate image) it matches the expected outputs within the tolerance.
//!
//! With `--inputs-in-arena` the input shares the arena with the activations: the run needs
//! no more device bytes than the default (measured: the VM's peak equals the plan's device
//! bytes), and the outputs are bit-identical to the default plan's, on the host and on
//! Intel (there also with `--io caller`: outputs in a storage the caller passes).

use rxvm::compile::{compile, InputsInArena, Io, Options, Planner, PoolMap, Textures};
use rxvm::session::ramp;
use rxvm::vm::memory::DeviceSpec;
use rxvm::vm::{DeviceCaps, HostValue, Vm};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MODELS: [(&str, f64); 9] = [
    ("bvlc_alexnet", 1e-3),
    ("densenet121", 2e-3),
    ("inception_v1", 1e-3),
    ("inception_v2", 1e-3),
    ("resnet50", 1e-3),
    ("shufflenet", 1e-3),
    ("squeezenet", 1e-3),
    ("vgg19", 1e-3),
    ("zfnet512", 1e-3),
];

fn light_dir() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/onnx/wheel/onnx/backend/test/data/light");
    if d.is_dir() {
        return Some(d);
    }
    assert!(
        std::env::var("RXVM_REQUIRE_ONNX_DATA").is_err(),
        "the ONNX light models are missing: run scripts/fetch-onnx-data.sh"
    );
    None
}

fn run(m: rxvm::vm::Module, spec: DeviceSpec, input: &HostValue) -> Vec<f64> {
    run_measured(m, spec, input).0
}

/// The output and the VM's peak of live storage bytes.
fn run_measured(m: rxvm::vm::Module, spec: DeviceSpec, input: &HostValue) -> (Vec<f64>, u64) {
    let mut vm = Vm::with_devices(Arc::new(m), vec![spec]).expect("a VM");
    let out = match vm.invoke("main", std::slice::from_ref(input)).expect("the model runs").pop() {
        Some(HostValue::Tensor(t)) => t.to_f64(),
        other => panic!("unexpected result {other:?}"),
    };
    let io = vm.last_io();
    assert!(io.fallbacks.is_empty() && io.copies.d2d == 0, "unexpected copies: {io:?}");
    (out, vm.stats().peak_bytes)
}

fn bit_identical(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn assert_matches(what: &str, got: &[f64], want: &[f64], rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    let worst = got.iter().zip(want).map(|(g, w)| (g - w).abs() / (1e-7 + rtol * w.abs())).fold(0.0, f64::max);
    assert!(worst <= 1.0, "{what}: an output is {worst:.2}x the tolerance away from the expected value");
}

#[test]
fn light_models_match_onnx_expected_outputs_on_every_device() {
    let Some(dir) = light_dir() else { return };
    let devices: Vec<(&str, DeviceSpec)> = ["intel", "pocl"]
        .into_iter()
        .filter_map(|name| Some((name, DeviceSpec::OpenCl(rxvm_test_support::devices::opencl_platform(name)?))))
        .collect();
    for (name, rtol) in MODELS {
        let g = rxvm::onnx::read_model(&dir.join(format!("light_{name}.onnx"))).expect("the model reads");
        let shapes: Vec<Vec<i64>> =
            g.inputs.iter().map(|i| i.dims.iter().map(|d| d.fixed().unwrap_or(1)).collect()).collect();
        let input = HostValue::Tensor(ramp(g.inputs[0].dtype, &shapes[0]).expect("input"));
        let (_, want) = rxvm::onnx::read_tensor_file(&dir.join(format!("light_{name}_output_0.pb"))).expect("expected");
        let want = want.to_f64();
        let planned = compile(&g, &shapes, &Options::default()).expect("compiles");
        let naive = compile(&g, &shapes, &Options { planner: Planner::None, ..Options::default() }).expect("compiles");
        let r = &planned.report;
        assert!(r.arena_bytes >= r.lower_bound && r.arena_bytes < r.naive_bytes, "{name}: {r:?}");
        let (host, peak) = run_measured(planned.module.clone(), DeviceSpec::Host(DeviceCaps::host()), &input);
        assert_matches(&format!("{name} on the host"), &host, &want, rtol);
        assert_eq!(peak, r.device_bytes(), "{name}: measured peak vs the plan's device bytes");
        // The input in the arena: never more device bytes, the same outputs.
        let in_arena = |io: Io| Options {
            pools: PoolMap { inputs_in_arena: InputsInArena::All, io, ..PoolMap::default() },
            ..Options::default()
        };
        let shared = compile(&g, &shapes, &in_arena(Io::Vm)).expect("compiles with the input in the arena");
        let (out, peak) = run_measured(shared.module, DeviceSpec::Host(DeviceCaps::host()), &input);
        assert!(bit_identical(&out, &host), "{name}: --inputs-in-arena changes the result");
        assert_eq!(peak, shared.report.device_bytes(), "{name}: measured peak with the input in the arena");
        assert!(
            shared.report.device_bytes() <= r.device_bytes() && shared.report.input_bytes == 0,
            "{name}: {:?} vs {r:?}",
            shared.report
        );
        let host_naive = run(naive.module, DeviceSpec::Host(DeviceCaps::host()), &input);
        assert!(bit_identical(&host, &host_naive), "{name}: plan changes the result");
        // Reordering independent operators never raises the peak and never changes a value.
        let reordered = compile(&g, &shapes, &Options { reorder: true, ..Options::default() }).expect("compiles");
        let (before, after) = reordered.report.reorder_peaks.expect("peaks reported");
        assert!(after <= before && reordered.report.lower_bound == after, "{name}: {:?}", reordered.report);
        if after < before {
            let out = run(reordered.module, DeviceSpec::Host(DeviceCaps::host()), &input);
            assert!(
                out.iter().zip(&host).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{name}: reordering changes the result"
            );
        }
        let textured = |target: &DeviceCaps| {
            let c = compile(
                &g,
                &shapes,
                &Options { textures: Textures::Auto, target: target.clone(), ..Options::default() },
            )
            .expect("compiles with textures");
            assert!(c.report.textures > 0, "{name}: no tensor in textures for {}", target.name);
            c
        };
        let host_tex = run(textured(&DeviceCaps::host()).module, DeviceSpec::Host(DeviceCaps::host()), &input);
        assert!(
            host_tex.iter().zip(&host).all(|(a, b)| a.to_bits() == b.to_bits()),
            "{name}: textures change the result on the host"
        );
        for (dev, spec) in &devices {
            let out = run(planned.module.clone(), spec.clone(), &input);
            assert_matches(&format!("{name} on {dev}"), &out, &want, rtol);
            if *dev == "intel" {
                let DeviceSpec::OpenCl(info) = spec else { unreachable!() };
                let opts = Options { target: info.caps.clone(), ..in_arena(Io::Caller) };
                let bound = compile(&g, &shapes, &opts).expect("compiles for caller-owned I/O");
                let got = run(bound.module, spec.clone(), &input);
                assert!(bit_identical(&got, &out), "{name} on {dev}: the input in the arena, outputs in caller memory");
            }
            let DeviceSpec::OpenCl(info) = spec else { unreachable!() };
            let tex = run(textured(&info.caps).module, spec.clone(), &input);
            assert_matches(&format!("{name} on {dev} with textures"), &tex, &want, rtol);
            assert_matches(&format!("{name} on {dev} with textures vs buffers"), &tex, &out, rtol);
        }
        eprintln!(
            "{name}: arena {} B, lower bound {} B, no-reuse {} B ({}), matches with and without textures on host{}",
            r.arena_bytes,
            r.lower_bound,
            r.naive_bytes,
            r.strategy,
            devices.iter().map(|d| format!(", {}", d.0)).collect::<String>()
        );
    }
}
