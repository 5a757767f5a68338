//! Operator fusion (docs/compiler.md, "Fusion"): a ResNet-style network's Conv, residual
//! Add and ReLU chains become `FusedConv`s, with the unfused program's outputs (bit for
//! bit on the host), a plan at the fused graph's lower bound, and on every device.

use rxvm::compile::{compile, Options};
use rxvm::vm::types::DType;
use rxvm::vm::{HostTensor, HostValue, Module, Vm};
use rxvm_test_support::graphs::resnet18_style;
use std::sync::Arc;

fn calls(m: &Module, op: &str) -> usize {
    rxvm::asm::disassemble(m).matches(&format!("@onnx.{op}(")).count()
}

fn run(vm: &mut Vm, input: &HostTensor) -> Vec<f64> {
    let out = vm.invoke("main", &[HostValue::Tensor(input.clone())]).expect("runs");
    let [HostValue::Tensor(y)] = &out[..] else { panic!("{out:?}") };
    y.to_f64()
}

#[test]
fn conv_chains_fuse_and_compute_what_the_unfused_program_does() {
    let g = resnet18_style();
    let shapes = [vec![2, 3, 32, 32]];
    let fused = compile(&g, &shapes, &Options::default()).expect("compiles");
    let plain = compile(&g, &shapes, &Options { fuse: false, ..Options::default() }).expect("compiles");
    // 20 convolutions (BatchNormalization folded into each); 17 ReLUs and 8 residual Adds,
    // every one right after a convolution.
    assert_eq!((calls(&plain.module, "Conv"), calls(&plain.module, "Relu"), calls(&plain.module, "Add")), (20, 17, 8));
    assert_eq!(calls(&fused.module, "FusedConv"), 20 - 3, "the three 1x1 projections have nothing to fuse");
    assert_eq!((calls(&fused.module, "Conv"), calls(&fused.module, "Relu"), calls(&fused.module, "Add")), (3, 0, 0));
    // The plan is at the fused graph's lower bound, below the unfused plan's.
    let (f, p) = (&fused.report, &plain.report);
    assert_eq!(f.arena_bytes, f.lower_bound);
    assert!(f.arena_bytes <= p.arena_bytes, "{} > {}", f.arena_bytes, p.arena_bytes);

    let image = HostTensor::random(DType::F32, &[2, 3, 32, 32], 5).unwrap();
    let want = run(&mut Vm::host(Arc::new(plain.module)).unwrap(), &image);
    let got = run(&mut Vm::host(Arc::new(fused.module.clone())).unwrap(), &image);
    assert!(want.iter().any(|v| v.abs() > 0.1), "outputs of size O(1): {want:?}");
    assert_eq!(got, want, "the host computes the fused chains bit for bit as the unfused ones");

    for (name, spec) in rxvm_test_support::devices::host_and(&["intel", "pocl"]).into_iter().skip(1) {
        let opts = Options { target: rxvm::session::device_caps(&spec), ..Options::default() };
        let c = compile(&g, &shapes, &opts).expect("compiles");
        assert_eq!(calls(&c.module, "FusedConv"), 17, "{name}");
        let got = run(&mut Vm::with_devices(Arc::new(c.module), vec![spec]).unwrap(), &image);
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{name}: {a} vs {b}");
        }
    }
}
