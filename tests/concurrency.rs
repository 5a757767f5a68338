//! One loaded module, shared as an `Arc<Module>` by several VMs on several threads, each
//! running models: every result is bit-identical to the single-threaded run's.

use rxvm::compile::{compile, Options, Textures};
use rxvm::graph::{Graph, GraphInput, Node};
use rxvm::vm::memory::DeviceSpec;
use rxvm::vm::ops::{AttrValue, Attrs};
use rxvm::vm::types::DType;
use rxvm::vm::{HostTensor, HostValue, Module, Vm};
use std::path::Path;
use std::sync::Arc;

const THREADS: usize = 3;

fn node(op: &str, ins: &[&str], out: &str, attrs: &[(&str, AttrValue)]) -> Node {
    Node {
        name: format!("{}_{out}", op.to_lowercase()),
        op: op.into(),
        inputs: ins.iter().map(|s| s.to_string()).collect(),
        outputs: vec![out.to_string()],
        attrs: Attrs(attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()),
    }
}

/// A CNN with a branch and a skip connection: Conv → Relu → MaxPool, then two Convs that
/// meet in a Concat and a residual Add, then GlobalAveragePool → Flatten → Gemm → Softmax.
fn cnn() -> Graph {
    let mut g = Graph::new("threads".into());
    g.inputs.push(GraphInput {
        name: "image".into(),
        dtype: DType::F32,
        dims: vec![
            rxvm::graph::InputDim::Fixed(1),
            rxvm::graph::InputDim::Fixed(3),
            rxvm::graph::InputDim::Fixed(32),
            rxvm::graph::InputDim::Fixed(32),
        ],
    });
    let w = |shape: &[i64], seed| HostTensor::random(DType::F32, shape, seed).expect("weights");
    g.add_const("w1", w(&[8, 3, 3, 3], 1));
    g.add_const("wa", w(&[4, 8, 3, 3], 2));
    g.add_const("wb", w(&[4, 8, 1, 1], 3));
    g.add_const("fc", w(&[10, 8], 4));
    let pads = ("pads", AttrValue::Ints(vec![1, 1, 1, 1]));
    let pool = [("kernel_shape", AttrValue::Ints(vec![2, 2])), ("strides", AttrValue::Ints(vec![2, 2]))];
    g.nodes.push(node("Conv", &["image", "w1"], "c1", std::slice::from_ref(&pads)));
    g.nodes.push(node("Relu", &["c1"], "r1", &[]));
    g.nodes.push(node("MaxPool", &["r1"], "p1", &pool));
    g.nodes.push(node("Conv", &["p1", "wa"], "a", &[pads]));
    g.nodes.push(node("Conv", &["p1", "wb"], "b", &[]));
    g.nodes.push(node("Concat", &["a", "b"], "ab", &[("axis", AttrValue::Int(1))]));
    g.nodes.push(node("Add", &["ab", "p1"], "s", &[]));
    g.nodes.push(node("GlobalAveragePool", &["s"], "gap", &[]));
    g.nodes.push(node("Flatten", &["gap"], "flat", &[]));
    g.nodes.push(node("Gemm", &["flat", "fc"], "logits", &[("transB", AttrValue::Int(1))]));
    g.nodes.push(node("Softmax", &["logits"], "probs", &[]));
    g.outputs.push("probs".into());
    g
}

fn inputs(shape: &[i64], n: u64) -> Vec<HostTensor> {
    (0..n).map(|seed| HostTensor::random(DType::F32, shape, 100 + seed).expect("input")).collect()
}

/// The output bytes of each input, run in order on one VM.
fn run_all(vm: &mut Vm, inputs: &[HostTensor]) -> Vec<Vec<u8>> {
    inputs
        .iter()
        .map(|x| match &vm.invoke("main", &[HostValue::Tensor(x.clone())]).expect("runs")[..] {
            [HostValue::Tensor(t)] => t.data.clone(),
            other => panic!("expected one tensor, found {} values", other.len()),
        })
        .collect()
}

/// Runs `inputs` on `THREADS` threads, each with its own VM over the shared `module`, each
/// starting at another input and going round twice; every output must equal `want`.
fn check_threads(label: &str, module: &Arc<Module>, spec: &DeviceSpec, inputs: &[HostTensor], want: &[Vec<u8>]) {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let mut vm = Vm::with_devices(module.clone(), vec![spec.clone()]).expect("a VM");
                    let order: Vec<usize> = (0..2 * inputs.len()).map(|k| (k + t) % inputs.len()).collect();
                    let got: Vec<(usize, Vec<u8>)> = order
                        .iter()
                        .map(|&i| (i, run_all(&mut vm, std::slice::from_ref(&inputs[i])).remove(0)))
                        .collect();
                    // Only the constants are still alive.
                    let (s, consts) = (vm.stats(), module.consts.len() as u64);
                    assert_eq!(
                        (s.live_storages, s.live_views, s.live_bytes),
                        (consts, consts, 0),
                        "{label}, thread {t}"
                    );
                    got
                })
            })
            .collect();
        for (t, h) in handles.into_iter().enumerate() {
            for (i, bytes) in h.join().expect("the thread finishes") {
                assert!(bytes == want[i], "{label}: thread {t}, input {i} differs from the single-threaded run");
            }
        }
    });
}

fn devices() -> Vec<(&'static str, DeviceSpec)> {
    rxvm_test_support::devices::host_and(&["intel"])
}

#[test]
fn vms_on_several_threads_share_one_module_and_agree_with_one_thread() {
    let g = cnn();
    let shapes = vec![vec![1, 3, 32, 32]];
    let xs = inputs(&shapes[0], 4);
    for (dev, spec) in devices() {
        for textures in [Textures::None, Textures::Auto] {
            let mut opts = Options { textures, ..Options::default() };
            opts.target = rxvm::session::device_caps(&spec);
            let module = Arc::new(compile(&g, &shapes, &opts).expect("compiles").module);
            let mut one = Vm::with_devices(module.clone(), vec![spec.clone()]).expect("a VM");
            let want = run_all(&mut one, &xs);
            assert!(want.windows(2).all(|w| w[0] != w[1]), "different inputs give different outputs");
            check_threads(&format!("{dev}, textures {textures:?}"), &module, &spec, &xs, &want);
        }
    }
}

#[test]
fn squeezenet_on_several_threads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/onnx/wheel/onnx/backend/test/data/light");
    let path = dir.join("light_squeezenet.onnx");
    if !path.is_file() {
        assert!(
            std::env::var("RXVM_REQUIRE_ONNX_DATA").is_err(),
            "the ONNX light models are missing: run scripts/fetch-onnx-data.sh"
        );
        return;
    }
    let g = rxvm::onnx::read_model(&path).expect("squeezenet loads");
    let shapes: Vec<Vec<i64>> =
        g.inputs.iter().map(|i| i.dims.iter().map(|d| d.fixed().unwrap_or(1)).collect()).collect();
    let xs = inputs(&shapes[0], 2);
    let module = Arc::new(compile(&g, &shapes, &Options::default()).expect("compiles").module);
    let spec = DeviceSpec::Host(rxvm::vm::DeviceCaps::host());
    let mut one = Vm::with_devices(module.clone(), vec![spec.clone()]).expect("a VM");
    let want = run_all(&mut one, &xs);
    check_threads("squeezenet", &module, &spec, &xs, &want);
}

/// An OpenCL C program of `n` helper functions chained in kernel `k`; `salt` makes each
/// source distinct (no runtime cache can share a build).
fn chained_kernel(n: usize, salt: &str) -> String {
    let mut src = format!("// {salt}\n");
    for h in 0..n {
        src.push_str(&format!("float h{h}(float x) {{ return x * {h}.0f + 1.0f; }}\n"));
    }
    src.push_str("__kernel void k(__global float* a) {\n  float x = a[get_global_id(0)];\n");
    for h in 0..n {
        src.push_str(&format!("  x = h{h}(x);\n"));
    }
    src.push_str("  a[get_global_id(0)] = x;\n}\n");
    src
}

/// Devices opened, given kernels and dropped on two threads at once, so that one thread's
/// programs are built while the other's are released. The Intel CPU runtime crashed the
/// process on that (SIGSEGV in its LLVM, about one run in three of this test) until builds
/// and releases took one lock (`PROGRAM_LOCK` in vm/src/opencl.rs). A race, so a run
/// without the lock may pass; one with it must never crash.
#[test]
fn programs_built_on_one_thread_while_another_releases_its_own() {
    for (dev, spec) in devices() {
        let DeviceSpec::OpenCl(info) = spec else { continue };
        std::thread::scope(|s| {
            for t in 0..2 {
                let info = &info;
                s.spawn(move || {
                    for round in 0..40 {
                        let cl = rxvm::vm::opencl::ClDevice::open(info).expect("the device opens");
                        for k in 0..4 {
                            let src = chained_kernel(60, &format!("thread {t}, round {round}, kernel {k}"));
                            cl.kernel(&src).unwrap_or_else(|e| panic!("{dev}: {e}"));
                        }
                    }
                });
            }
        });
    }
}
