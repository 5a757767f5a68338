//! Memory instructions in steady state: `alloc_storage` (a pool hit) + `alloc_tensor` +
//! `kill` + `kill`, in ns per triple, on the host device and on OpenCL (Intel's CPU runtime
//! when present: a buffer view, and an image view over the buffer with its pitch; the
//! storage's block caches both, so no `cl_mem` is created after the first round); and the
//! cost of invoking an empty function (by id with VM values, and by name with host values).
//! `cargo bench --bench memory_ops`.
//!
//! Each round is one invocation of a function with 1,000 triples (throughput: 1,000), so
//! the invocation's own cost is amortised; `empty_invocation` measures it alone.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rxvm::vm::Vm;

mod common;
use common::TRIPLES;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("triple");
    g.throughput(Throughput::Elements(TRIPLES as u64));
    for (dev, spec) in &common::devices("memory_ops") {
        for (kind, view) in common::VIEWS {
            let mut vm = Vm::with_devices(common::triples(view), vec![spec.clone()]).expect("a VM");
            vm.invoke("main", &[]).expect("the first round fills the pool and the view caches");
            let before = vm.cl_stats();
            g.bench_function(format!("{dev}/{kind}"), |b| b.iter(|| vm.invoke("main", &[]).expect("runs")));
            // Steady state: every later round reuses the pooled block and its cached view.
            let created =
                |s: [(&str, u64); 7]| s.iter().filter(|(k, _)| k.ends_with("_created")).map(|(_, n)| n).sum::<u64>();
            assert_eq!(created(vm.cl_stats()), created(before), "{dev}/{kind}: a round created a cl_mem");
        }
    }
    g.finish();
    // An empty function: by id with VM values (`Vm::invoke_values`, the embedding's hot
    // path once it has looked the function up) and by name with host values (`Vm::invoke`).
    let empty = common::module(common::EMPTY);
    let id = empty.func_by_name("main").expect("@main");
    let mut vm = Vm::host(empty).expect("a VM");
    let mut g = c.benchmark_group("empty_invocation");
    g.bench_function("by_id", |b| b.iter(|| vm.invoke_values(id, Vec::new()).expect("runs")));
    g.bench_function("by_name", |b| b.iter(|| vm.invoke("main", &[]).expect("runs")));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
