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
use rxvm::vm::memory::DeviceSpec;
use rxvm::vm::opencl::find_device;
use rxvm::vm::{DeviceCaps, Vm};
use std::sync::Arc;

const TRIPLES: usize = 1_000;

fn module(text: &str) -> Arc<rxvm::vm::Module> {
    Arc::new(rxvm_asm::assemble(text, "bench.rxa").unwrap_or_else(|d| panic!("{}", d.render())))
}

/// `TRIPLES` unrolled triples; `view` is the `alloc_tensor` type and scope.
fn triples(view: &str) -> Arc<rxvm::vm::Module> {
    let mut t = String::from("module triples\n\nfunc @main() {\n");
    for _ in 0..TRIPLES {
        t.push_str(&format!("  %s = alloc_storage 8192\n  %t = alloc_tensor %s, 0, {view}\n  kill %t\n  kill %s\n"));
    }
    t.push_str("  ret\n}\n");
    module(&t)
}

const BUFFER: &str = "f32[1024]";
const IMAGE: &str = "f32[1, 2, 30, 4], scope \"global.texture\"";

fn bench(c: &mut Criterion) {
    let mut devices = vec![("host", DeviceSpec::Host(DeviceCaps::host()))];
    match find_device("intel") {
        Ok(info) => devices.push(("intel", DeviceSpec::OpenCl(info))),
        Err(e) => eprintln!("memory_ops: no Intel OpenCL device ({e}); measuring the host only"),
    }
    let mut g = c.benchmark_group("triple");
    g.throughput(Throughput::Elements(TRIPLES as u64));
    for (dev, spec) in &devices {
        for (kind, view) in [("buffer", BUFFER), ("image", IMAGE)] {
            let mut vm = Vm::with_devices(triples(view), vec![spec.clone()]).expect("a VM");
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
    let empty = module("module empty\n\nfunc @main() {\n  ret\n}\n");
    let id = empty.func_by_name("main").expect("@main");
    let mut vm = Vm::host(empty).expect("a VM");
    let mut g = c.benchmark_group("empty_invocation");
    g.bench_function("by_id", |b| b.iter(|| vm.invoke_values(id, Vec::new()).expect("runs")));
    g.bench_function("by_name", |b| b.iter(|| vm.invoke("main", &[]).expect("runs")));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
