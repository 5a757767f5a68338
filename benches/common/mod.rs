//! What the benchmarks share: the programs `dispatch` and `memory_ops` time, the nine
//! model-zoo CNNs of the `onnx==1.23.2` wheel (`scripts/fetch-onnx-data.sh`) with the input
//! ONNX's test runner feeds them, and the set-up of a model with no-op kernels. `counts`
//! runs the same workloads under callgrind (`scripts/callgrind-counts.sh`), so what it
//! counts is what criterion times.
// Each benchmark uses part of this module.
#![allow(dead_code)]

use rxvm::compile::{compile, Options};
use rxvm::graph::Graph;
use rxvm::session::ramp;
use rxvm::vm::bytecode::FuncId;
use rxvm::vm::memory::DeviceSpec;
use rxvm::vm::opencl::find_device;
use rxvm::vm::value::Value;
use rxvm::vm::{DeviceCaps, HostTensor, HostValue, Kernels, Module, Vm};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod rxa;

pub fn module(text: &str) -> Arc<Module> {
    Arc::new(rxvm_asm::assemble(text, "bench.rxa").unwrap_or_else(|d| panic!("{}", d.render())))
}

/// Instructions in a straight-line program, iterations of the counted loop.
pub const N: usize = 10_000;

/// `@main`: `%a = int 0`, `N` copies of `body`, then `ret %a` when `ret` is `int`, else `ret`.
pub fn straight(body: &str, ret: &str) -> Arc<Module> {
    let mut t = format!("module straight\n\nfunc @main() -> {ret} {{\n  %a = int 0\n");
    for _ in 0..N {
        t.push_str(body);
    }
    t.push_str(if ret == "int" { "  ret %a\n}\n" } else { "  ret\n}\n" });
    module(&t)
}
pub const NOP: &str = "  call @vm.nop()\n";
pub const IADD: &str = "  %a = call @vm.iadd(%a, 1)\n";

/// `@main(%n)` counts to `%n`: 1 set-up instruction, 3 per iteration, 1 `ret`.
pub const LOOP: &str = "module looped

func @main(%n: int) -> int {
  %i = int 0
loop:
  %i = call @vm.iadd(%i, 1)
  %more = call @vm.ilt(%i, %n)
  br_if %more, loop, done
done:
  ret %i
}
";

/// `alloc_storage` + `alloc_tensor` + `kill` + `kill` rounds per invocation of `triples`.
pub const TRIPLES: usize = 1_000;

/// `@main` with `TRIPLES` unrolled triples; `view` is the `alloc_tensor` type and scope.
pub fn triples(view: &str) -> Arc<Module> {
    let mut t = String::from("module triples\n\nfunc @main() {\n");
    for _ in 0..TRIPLES {
        t.push_str(&format!("  %s = alloc_storage 8192\n  %t = alloc_tensor %s, 0, {view}\n  kill %t\n  kill %s\n"));
    }
    t.push_str("  ret\n}\n");
    module(&t)
}
pub const BUFFER: &str = "f32[1024]";
pub const IMAGE: &str = "f32[1, 2, 30, 4], scope \"global.texture\"";
/// The triples' views, as the benchmarks name them.
pub const VIEWS: [(&str, &str); 2] = [("buffer", BUFFER), ("image", IMAGE)];

/// The host, and Intel's OpenCL CPU runtime when it is present (with a note when not).
pub fn devices(bench: &str) -> Vec<(&'static str, DeviceSpec)> {
    let mut devices = vec![("host", DeviceSpec::Host(DeviceCaps::host()))];
    match find_device("intel") {
        Ok(info) => devices.push(("intel", DeviceSpec::OpenCl(info))),
        Err(e) => eprintln!("{bench}: no Intel OpenCL device ({e}); measuring the host only"),
    }
    devices
}

/// VM instructions one `@main(args)` executes, counted by the VM.
pub fn instructions(vm: &mut Vm, args: &[HostValue]) -> u64 {
    let before = vm.stats().instructions;
    vm.invoke("main", args).expect("runs");
    vm.stats().instructions - before
}

pub const EMPTY: &str = "module empty\n\nfunc @main() {\n  ret\n}\n";

pub const MODELS: [&str; 9] = rxvm_test_support::models::NAMES;

/// The models' directory, or `None` (with a note) when the data is missing.
pub fn light_dir(bench: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/onnx/wheel/onnx/backend/test/data/light");
    if dir.is_dir() {
        return Some(dir);
    }
    eprintln!("{bench}: {} is missing (scripts/fetch-onnx-data.sh); nothing to measure", dir.display());
    None
}

/// A model, its input shapes, and its input: element i of n is i / n.
pub fn load(dir: &Path, name: &str) -> (Graph, Vec<Vec<i64>>, HostTensor) {
    let graph =
        rxvm::onnx::read_model(&dir.join(format!("light_{name}.onnx"))).unwrap_or_else(|e| panic!("{name}: {e}"));
    let shapes: Vec<Vec<i64>> =
        graph.inputs.iter().map(|i| i.dims.iter().map(|d| d.fixed().unwrap_or(1)).collect()).collect();
    let input = ramp(graph.inputs[0].dtype, &shapes[0]).unwrap_or_else(|e| panic!("{name}: {e}"));
    (graph, shapes, input)
}

/// A model compiled for the host and run with no-op kernels, its input uploaded once.
pub struct NoopModel {
    pub vm: Vm,
    pub main: FuncId,
    pub input: Value,
    /// VM instructions one inference executes.
    pub instructions: u64,
}

impl NoopModel {
    pub fn new(dir: &Path, name: &str) -> NoopModel {
        let (graph, shapes, input) = load(dir, name);
        let compiled = compile(&graph, &shapes, &Options::default()).expect("compiles");
        let mut vm = Vm::host(Arc::new(compiled.module)).expect("a VM");
        vm.kernels = Kernels::Noop;
        let input = vm.upload(&input).expect("upload");
        let main = vm.module().func_by_name("main").expect("@main");
        let mut model = NoopModel { vm, main, input, instructions: 0 };
        let before = model.vm.stats().instructions;
        model.infer();
        model.instructions = model.vm.stats().instructions - before;
        model
    }

    /// One inference; the results stay VM values.
    pub fn infer(&mut self) -> Vec<Value> {
        self.vm.invoke_values(self.main, vec![self.input.clone()]).expect("runs")
    }
}
