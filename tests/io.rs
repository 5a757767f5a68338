//! Memory pools and zero-copy inputs/outputs (docs/memory.md).
//!
//! - Two compiled models chained (A's output is B's input) on the host and on Intel's
//!   OpenCL runtime: nothing is copied between them and no output is copied out of VM
//!   memory; with an incompatible binding (B on another runtime) the VM makes exactly one
//!   copy and says why; an input planned in B's arena but passed from elsewhere is read in
//!   place, with a note that the saving is lost.
//! - Three pools (inputs, activations, outputs): each its own storage, no byte shared across
//!   pools, and the report lists each pool's size.

use rxvm::compile::{compile, Compiled, InputsInArena, Io, Options, PoolMap};
use rxvm::graph::Graph;
use rxvm::plan::BufferKind;
use rxvm::session::ramp;
use rxvm::vm::host_tensor::HostTensor;
use rxvm::vm::io::Copies;
use rxvm::vm::memory::{DeviceSpec, Runtime};
use rxvm::vm::ops::{AttrValue, Attrs};
use rxvm::vm::types::DType;
use rxvm::vm::value::Value;
use rxvm::vm::Chain;
use rxvm::vm::{DeviceCaps, HostValue, Vm};
use std::sync::Arc;

fn weights(shape: &[i64], seed: u64) -> HostTensor {
    HostTensor::random(DType::F32, shape, seed).expect("weights")
}

fn pads() -> Attrs {
    Attrs(vec![("pads".into(), AttrValue::Ints(vec![1, 1, 1, 1]))])
}

/// A: image [1,3,8,8] → Conv → Relu → features [1,4,8,8].
fn model_a() -> Graph {
    let mut g = Graph::new("a".into());
    g.add_const("wa", weights(&[4, 3, 3, 3], 1));
    g.input("image", DType::F32, &[1, 3, 8, 8])
        .node("conv_a", "Conv", &["image", "wa"], &["ca"], pads())
        .node("relu_a", "Relu", &["ca"], &["features"], Attrs::default())
        .output("features");
    g
}

/// B: features [1,4,8,8] → Conv → Relu → GlobalAveragePool → pooled [1,4,1,1].
fn model_b() -> Graph {
    let mut g = Graph::new("b".into());
    g.add_const("wb", weights(&[4, 4, 3, 3], 2));
    g.input("features", DType::F32, &[1, 4, 8, 8])
        .node("conv_b", "Conv", &["features", "wb"], &["cb"], pads())
        .node("relu_b", "Relu", &["cb"], &["rb"], Attrs::default())
        .node("gap", "GlobalAveragePool", &["rb"], &["pooled"], Attrs::default())
        .output("pooled");
    g
}

fn build(g: &Graph, caps: &DeviceCaps, pools: PoolMap) -> Compiled {
    let shapes: Vec<Vec<i64>> =
        g.inputs.iter().map(|i| i.dims.iter().map(|d| d.fixed().unwrap_or(1)).collect()).collect();
    compile(g, &shapes, &Options { target: caps.clone(), pools, ..Options::default() }).expect("compiles")
}

fn caller_io() -> PoolMap {
    PoolMap { io: Io::Caller, ..PoolMap::default() }
}

/// The devices to test on: the host, and Intel's OpenCL CPU runtime when installed
/// (required when `RXVM_REQUIRE_OPENCL` names it).
fn devices() -> Vec<DeviceSpec> {
    rxvm_test_support::devices::host_and(&["intel"]).into_iter().map(|(_, d)| d).collect()
}

fn caps(spec: &DeviceSpec) -> DeviceCaps {
    rxvm::session::device_caps(spec)
}

/// B after A, each on its own VM with host values in and out: the reference.
fn separately(spec: &DeviceSpec, a: &Compiled, b: &Compiled, x: &HostTensor) -> Vec<u8> {
    let mut va = Vm::with_devices(Arc::new(a.module.clone()), vec![spec.clone()]).expect("vm");
    let ya = va.invoke("main", &[HostValue::Tensor(x.clone())]).expect("A runs");
    let mut vb = Vm::with_devices(Arc::new(b.module.clone()), vec![spec.clone()]).expect("vm");
    match vb.invoke("main", &ya).expect("B runs").pop() {
        Some(HostValue::Tensor(t)) => t.data,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn chained_models_share_memory_without_copies() {
    let x = ramp(DType::F32, &[1, 3, 8, 8]).expect("input");
    for spec in devices() {
        let dev = caps(&spec).name;
        let a = build(&model_a(), &caps(&spec), caller_io());
        let b = build(&model_b(), &caps(&spec), caller_io());
        // A's output is a view in the caller's storage: the storage parameter `%outputs`.
        assert!(a.report.pools.iter().any(|p| p.name == "outputs" && p.parameter), "{:?}", a.report.pools);
        let want = separately(&spec, &a, &b, &x);

        let rt = Runtime::new(vec![spec.clone()]).expect("runtime");
        let modules = vec![Arc::new(a.module.clone()), Arc::new(b.module.clone())];
        let mut chain = Chain::new(rt.clone(), modules, "main").expect("chain");
        for round in 0..2 {
            let run = chain.run(std::slice::from_ref(&x)).expect("the chain runs");
            assert_eq!(run.outputs[0].data, want, "{dev}: the chain computes what the models compute");
            // Between A and B: nothing copied, nothing replaced.
            assert_eq!(run.stages[1].copies, Copies::default(), "{dev}: {:?}", run.stages[1]);
            assert!(run.stages[1].fallbacks.is_empty(), "{dev}: {:?}", run.stages[1].fallbacks);
            // A's output is computed in the caller's storage: no device-to-device copy.
            assert_eq!(run.stages[0].copies.d2d, 0, "{dev}");
            assert!(run.stages[0].fallbacks.is_empty(), "{dev}: {:?}", run.stages[0].fallbacks);
            // The only copies: the input up and the result down.
            let moved = Copies { h2d: 1, d2h: 1, bytes_h2d: 3 * 64 * 4, bytes_d2h: 4 * 4, ..Copies::default() };
            assert_eq!(run.copies, moved, "{dev}, round {round}");
        }

        // B plans its input inside its own arena, but A's output lives in A's storage: the
        // VM reads it where it is (B's tensors cannot overwrite it there) and notes that the
        // planned saving is lost.
        let b_in_arena =
            build(&model_b(), &caps(&spec), PoolMap { inputs_in_arena: InputsInArena::All, ..caller_io() });
        let modules = vec![Arc::new(a.module.clone()), Arc::new(b_in_arena.module.clone())];
        let mut chain = Chain::new(rt.clone(), modules, "main").expect("chain");
        let run = chain.run(std::slice::from_ref(&x)).expect("the chain runs");
        assert_eq!(run.outputs[0].data, want, "{dev}");
        assert_eq!(run.stages[1].copies, Copies::default(), "{dev}: {:?}", run.stages[1]);
        let notes: Vec<String> = run.stages[1].fallbacks.iter().map(|f| f.to_string()).collect();
        assert_eq!(notes.len(), 1, "{dev}: {notes:?}");
        assert!(
            notes[0].contains("read where it is; the 1024 bytes planned for it in %arena stay unused"),
            "{notes:?}"
        );

        // A deliberately incompatible binding: B's VM on a runtime of its own (on OpenCL,
        // another context), where A's output cannot be read. Exactly one copy, and why.
        let mut va = Vm::with_runtime(Arc::new(a.module.clone()), rt.clone()).expect("vm");
        let fa = va.module().func_by_name("main").expect("main");
        let need = va.storage_needs(fa)[1].expect("size");
        let a_out = va.new_storage(0, need).expect("storage");
        let xa = va.upload(&x).expect("upload");
        let ya = va.invoke_values(fa, vec![xa, a_out]).expect("A runs");
        let other = Runtime::new(vec![spec.clone()]).expect("a second runtime");
        let mut vb = Vm::with_runtime(Arc::new(b.module.clone()), other).expect("vm");
        let fb = vb.module().func_by_name("main").expect("main");
        let need = vb.storage_needs(fb)[1].expect("size");
        let b_out = vb.new_storage(0, need).expect("storage");
        let zb = vb.invoke_values(fb, vec![ya[0].clone(), b_out]).expect("B runs");
        assert_eq!(vb.download(&zb[0]).expect("read").data, want, "{dev}");
        let io = vb.last_io();
        let copied = Copies { d2d: 1, bytes_d2d: 4 * 64 * 4, ..Copies::default() };
        assert_eq!(io.copies, copied, "{dev}: {io:?}");
        let reasons: Vec<String> = io.fallbacks.iter().map(|f| f.to_string()).collect();
        assert_eq!(
            reasons,
            ["@main %features: it belongs to another runtime (another OpenCL context); copied 1024 bytes"],
            "{dev}"
        );
    }
}

#[test]
fn an_output_storage_on_another_device_costs_one_copy_and_a_reason() {
    let a = build(&model_a(), &DeviceCaps::host(), caller_io());
    let devices = vec![DeviceSpec::Host(DeviceCaps::host()), DeviceSpec::Host(DeviceCaps::host())];
    let mut vm = Vm::with_devices(Arc::new(a.module.clone()), devices).expect("vm");
    let x = vm.upload(&ramp(DType::F32, &[1, 3, 8, 8]).expect("input")).expect("upload");
    let id = vm.module().func_by_name("main").expect("main");
    let need = vm.storage_needs(id)[1].expect("the code fixes the size of %outputs");
    assert_eq!(need, 4 * 64 * 4);

    // On device 0, large enough: used in place.
    let mine = vm.new_storage(0, need).expect("storage");
    let out = vm.invoke_values(id, vec![x.clone(), mine.clone()]).expect("runs");
    let (Value::Tensor(y), Value::Storage(s)) = (&out[0], &mine) else { panic!() };
    assert_eq!(y.storage.id, s.id, "the output is a view of the caller's storage");
    assert_eq!(vm.last_io().copies.total(), 0);
    let want = vm.download(&out[0]).expect("read");

    // On device 1: the VM computes in its own storage and copies the output over once.
    let elsewhere = vm.new_storage(1, need).expect("storage");
    let out = vm.invoke_values(id, vec![x.clone(), elsewhere.clone()]).expect("runs");
    let (Value::Tensor(y), Value::Storage(s)) = (&out[0], &elsewhere) else { panic!() };
    assert_eq!(y.storage.id, s.id, "the output ends up in the caller's storage");
    assert_eq!(vm.download(&out[0]).expect("read").data, want.data);
    let io = vm.last_io().clone();
    assert_eq!((io.copies.d2d, io.copies.bytes_d2d), (1, need), "{io:?}");
    let reasons: Vec<String> = io.fallbacks.iter().map(|f| f.to_string()).collect();
    insta::assert_snapshot!("output_storage_on_another_device", reasons.join("\n"));

    // Too small: the output stays in VM memory, nothing copied, and the reason says so.
    let small = vm.new_storage(0, need / 2).expect("storage");
    let out = vm.invoke_values(id, vec![x, small]).expect("runs");
    assert_eq!(vm.download(&out[0]).expect("read").data, want.data);
    let io = vm.last_io();
    assert_eq!(io.copies.d2d, 0);
    assert!(io.fallbacks[0].reason.contains(&format!("holds {} bytes; @main needs {need}", need / 2)), "{io:?}");
}

#[test]
fn three_pools_never_share_bytes_and_report_their_sizes() {
    let pools = PoolMap {
        rules: ["inputs=in", "activations=act", "outputs=out"]
            .iter()
            .map(|r| PoolMap::parse_rule(r).expect("rule"))
            .collect(),
        ..PoolMap::default()
    };
    let g = model_b();
    // Unfused, so the Conv and the ReLU each have an activation in `act`.
    let c = compile(&g, &[vec![1, 4, 8, 8]], &Options { pools, fuse: false, ..Options::default() }).expect("compiles");
    let sizes: Vec<(&str, u64, &str, bool)> =
        c.report.pools.iter().map(|p| (p.name.as_str(), p.bytes, p.holds.as_str(), p.parameter)).collect();
    // The input's pool is provided by the caller; the other two are allocated by @main.
    assert_eq!(
        sizes,
        vec![
            ("act", 2 * 4 * 64 * 4, "activations", false),
            ("in", 4 * 64 * 4, "inputs", true),
            ("out", 16, "outputs", false)
        ]
    );
    assert_eq!(c.report.arena_bytes, 2 * 1024 + 1024 + 16);
    // Every buffer is in its class's pool, and buffers of different pools are in different
    // storages: the program has one storage per pool.
    let pool_of = |kind: BufferKind| -> Vec<String> {
        (0..c.problem.buffers.len())
            .filter(|&i| c.problem.kind(i) == kind)
            .map(|i| c.problem.pool_name(c.problem.buffers[i].pool))
            .collect()
    };
    assert_eq!(pool_of(BufferKind::Input), ["in"]);
    assert_eq!(pool_of(BufferKind::Buffer), ["act", "act"]);
    assert_eq!(pool_of(BufferKind::Output), ["out"]);
    let text = rxvm::asm::disassemble(&c.module);
    assert_eq!(text.matches("alloc_storage").count(), 2, "{text}");
    insta::assert_snapshot!("three_pools", format!("{}{text}", c.plan_comment));

    // Run it: the results equal the default plan's.
    let x = HostValue::Tensor(ramp(DType::F32, &[1, 4, 8, 8]).expect("input"));
    let mut vm = Vm::host(Arc::new(c.module.clone())).expect("vm");
    let got = vm.invoke("main", std::slice::from_ref(&x)).expect("runs");
    let default = build(&g, &DeviceCaps::host(), PoolMap::default());
    let want = Vm::host(Arc::new(default.module)).expect("vm").invoke("main", &[x]).expect("runs");
    assert_eq!(got, want);
    // `in` and `act` are live together; `out` is allocated after `in` was released.
    assert_eq!(vm.stats().peak_bytes, 1024 + 2048);
}
