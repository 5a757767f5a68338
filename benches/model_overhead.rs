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

mod common;

fn bench(c: &mut Criterion) {
    let Some(dir) = common::light_dir("model_overhead") else { return };
    let mut g = c.benchmark_group("model_overhead");
    for name in common::MODELS {
        let mut model = common::NoopModel::new(&dir, name);
        g.throughput(Throughput::Elements(model.instructions));
        g.bench_function(name, |b| b.iter(|| model.infer()));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
