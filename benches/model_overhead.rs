//! The VM's own cost per inference: the nine model-zoo CNNs compiled for the host, run with
//! every kernel replaced by a no-op (`Kernels::Noop`, `rxvm run --noop-kernels`): each
//! operator call still reads its operands, infers its output types and checks them against
//! the output views, and every `alloc_storage` / `alloc_tensor` / `kill` runs as usual.
//! The input is uploaded once and passed as a VM tensor (`Vm::invoke_values`), results stay
//! VM values: one iteration is the dispatch of one inference's bytecode.
//!
//! Throughput is the instructions one inference executes, so criterion's `elem/s` inverts
//! to ns per instruction. TVM's Relax VM, measured the same way on this machine: 70–85 ns
//! per instruction (densenet121: 221 µs for 2,632 instructions; resnet50: 33 µs).
//! `cargo bench --bench model_overhead`; needs `scripts/fetch-onnx-data.sh`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rxvm::compile::{compile, Options};
use rxvm::vm::{Kernels, Vm};
use std::sync::Arc;

mod common;

fn bench(c: &mut Criterion) {
    let Some(dir) = common::light_dir("model_overhead") else { return };
    let mut g = c.benchmark_group("model_overhead");
    for name in common::MODELS {
        let (graph, shapes, input) = common::load(&dir, name);
        let compiled = compile(&graph, &shapes, &Options::default()).expect("compiles");
        let mut vm = Vm::host(Arc::new(compiled.module)).expect("a VM");
        vm.kernels = Kernels::Noop;
        let input = vm.upload(&input).expect("upload");
        let main = vm.module().func_by_name("main").expect("@main");
        let before = vm.stats().instructions;
        vm.invoke_values(main, vec![input.clone()]).expect("runs");
        let per_inference = vm.stats().instructions - before;
        g.throughput(Throughput::Elements(per_inference));
        g.bench_function(name, |b| b.iter(|| vm.invoke_values(main, vec![input.clone()]).expect("runs")));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
