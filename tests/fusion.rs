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

/// DenseNet's pre-activation order: BatchNormalization and ReLU *before* each Conv (no Conv
/// to fold into), and a normalization alone at the end. Fused, each normalization is a
/// per-channel Conv (the ReLU after it fused in): no BatchNormalization call is left, and
/// the outputs equal the unfused program's within rounding, on every device.
#[test]
fn batch_normalizations_before_convs_become_per_channel_convs() {
    use rxvm::graph::{Graph, GraphInput, InputDim, Node};
    use rxvm::vm::ops::{AttrValue, Attrs};
    let mut g = Graph::new("preact".into());
    g.inputs.push(GraphInput {
        name: "x".into(),
        dtype: DType::F32,
        dims: [2, 6, 9, 7].into_iter().map(InputDim::Fixed).collect(),
    });
    let param = |seed: u64, lo: f64| {
        let t = HostTensor::random(DType::F32, &[6], seed).unwrap();
        let v: Vec<f32> = t.to_f64().iter().map(|r| (lo + (r + 1.0) * 0.5) as f32).collect();
        HostTensor::from_f32(&[6], &v).unwrap()
    };
    let node = |name: &str, op: &str, ins: &[&str], attrs: Vec<(String, AttrValue)>| Node {
        name: name.into(),
        op: op.into(),
        inputs: ins.iter().map(|s| s.to_string()).collect(),
        outputs: vec![name.into()],
        attrs: Attrs(attrs),
    };
    for (b, seed) in [("bn1", 10), ("bn2", 20)] {
        for (i, (p, lo)) in [("scale", 0.5), ("bias", -0.5), ("mean", -0.3), ("var", 0.2)].into_iter().enumerate() {
            g.add_const(&format!("{b}.{p}"), param(seed + i as u64, lo));
        }
    }
    g.add_const("w", HostTensor::random(DType::F32, &[6, 6, 3, 3], 3).unwrap());
    let bn = |b: &str, x: &str| {
        let ps = ["scale", "bias", "mean", "var"].map(|p| format!("{b}.{p}"));
        node(b, "BatchNormalization", &[x, &ps[0], &ps[1], &ps[2], &ps[3]], vec![])
    };
    g.nodes.push(bn("bn1", "x"));
    g.nodes.push(node("relu", "Relu", &["bn1"], vec![]));
    g.nodes.push(node("conv", "Conv", &["relu", "w"], vec![("pads".into(), AttrValue::Ints(vec![1; 4]))]));
    g.nodes.push(bn("bn2", "conv"));
    g.outputs.push("bn2".into());
    // (bn2 follows a Conv whose output it alone reads: it folds into that Conv.)
    g.nodes.push(node("tail", "BatchNormalization", &["x", "bn2.scale", "bn2.bias", "bn2.mean", "bn2.var"], vec![]));
    g.outputs.push("tail".into());

    let shapes = [vec![2, 6, 9, 7]];
    let fused = compile(&g, &shapes, &Options::default()).expect("compiles");
    let plain = compile(&g, &shapes, &Options { fuse: false, ..Options::default() }).expect("compiles");
    assert_eq!(calls(&plain.module, "BatchNormalization"), 2, "bn1 and tail stay normalizations unfused");
    assert_eq!(calls(&fused.module, "BatchNormalization"), 0);
    assert_eq!((calls(&fused.module, "FusedConv"), calls(&fused.module, "Conv")), (1, 2), "bn1+relu; conv+bn2, tail");

    let x = HostTensor::random(DType::F32, &[2, 6, 9, 7], 7).unwrap();
    let outputs = |m: Module, spec| {
        let out = Vm::with_devices(Arc::new(m), vec![spec]).unwrap().invoke("main", &[HostValue::Tensor(x.clone())]);
        let tensor = |v: &HostValue| match v {
            HostValue::Tensor(t) => t.to_f64(),
            other => panic!("{other:?}"),
        };
        out.expect("runs").iter().map(tensor).collect::<Vec<_>>()
    };
    let devices = rxvm_test_support::devices::host_and(&["intel", "pocl"]);
    let want = outputs(plain.module, devices[0].1.clone());
    assert!(want.iter().all(|o| o.iter().any(|v| v.abs() > 0.1)), "outputs of size O(1)");
    for (name, spec) in devices {
        let opts = Options { target: rxvm::session::device_caps(&spec), ..Options::default() };
        let got = outputs(compile(&g, &shapes, &opts).expect("compiles").module, spec);
        for (g, w) in got.iter().flatten().zip(want.iter().flatten()) {
            assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "{name}: {g} vs {w}");
        }
    }
}
