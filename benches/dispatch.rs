//! Interpreter overhead: a bare builtin call, an empty invocation, and the
//! alloc_storage + alloc_tensor + kill triple on the host device (steady state: pool hits).
//! `cargo bench --bench dispatch`; per-element figures are time / elements.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rxvm_vm::builder::{ModuleBuilder, Operand};
use rxvm_vm::types::{DType, Scope};
use rxvm_vm::Vm;
use std::sync::Arc;

const N: u64 = 10_000;

/// `main()`: `n` straight-line calls of `@vm.nop`, then `ret`.
fn nops(n: u64) -> rxvm_vm::Module {
    let mut mb = ModuleBuilder::new("nops");
    let mut f = mb.function("main", vec![], vec![]);
    for _ in 0..n {
        f.call_builtin("nop", &[]).expect("nop exists");
    }
    f.ret(&[]);
    mb.add_function(f);
    mb.build().expect("valid")
}

/// `main()`: `n` unrolled alloc_storage / alloc_tensor / kill / kill sequences.
fn triples(n: u64) -> rxvm_vm::Module {
    let mut mb = ModuleBuilder::new("triples");
    let mut f = mb.function("main", vec![], vec![]);
    for _ in 0..n {
        let s = f.alloc_storage(Operand::Int(4096), None, 0, Scope::Global);
        let t = f.alloc_tensor(s, Operand::Int(0), DType::F32, &[Operand::Int(1024)], Scope::Global);
        f.kill(t);
        f.kill(s);
    }
    f.ret(&[]);
    mb.add_function(f);
    mb.build().expect("valid")
}

fn empty() -> rxvm_vm::Module {
    let mut mb = ModuleBuilder::new("empty");
    let mut f = mb.function("main", vec![], vec![]);
    f.ret(&[]);
    mb.add_function(f);
    mb.build().expect("valid")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("dispatch");
    g.throughput(Throughput::Elements(N));
    let mut vm = Vm::host(Arc::new(nops(N))).expect("vm");
    g.bench_function("builtin_nop_call", |b| b.iter(|| vm.invoke("main", &[]).expect("runs")));
    let mut vm = Vm::host(Arc::new(triples(N))).expect("vm");
    vm.invoke("main", &[]).expect("warm the pool");
    g.bench_function("alloc_storage_tensor_kill_triple", |b| b.iter(|| vm.invoke("main", &[]).expect("runs")));
    g.finish();
    let mut vm = Vm::host(Arc::new(empty())).expect("vm");
    c.bench_function("empty_invocation", |b| b.iter(|| vm.invoke("main", &[]).expect("runs")));
}

criterion_group!(benches, bench);
criterion_main!(benches);
