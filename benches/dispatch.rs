//! Interpreter dispatch: nanoseconds per instruction of cheap instructions, straight-line
//! and in a loop. `cargo bench --bench dispatch`; each benchmark's throughput is its count
//! of executed instructions, so criterion's `elem/s` inverts to ns per instruction.
//!
//! * `straight/nop`: 10,000 `call @vm.nop()` (the bare builtin call, TVM's reference is
//!   `vm.builtin.null_value` at 27 ns);
//! * `straight/iadd`: 10,000 `%a = call @vm.iadd(%a, 1)` (read, add with overflow check, write);
//! * `loop/iadd_ilt_br_if`: a counted loop of 10,000 iterations, three instructions each.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rxvm::vm::{HostValue, Vm};

mod common;
use common::{instructions, IADD, LOOP, N, NOP};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("straight");
    let mut nop = Vm::host(common::straight(NOP, "()")).expect("a VM");
    g.throughput(Throughput::Elements(instructions(&mut nop, &[])));
    g.bench_function("nop", |b| b.iter(|| nop.invoke("main", &[]).expect("runs")));
    let mut iadd = Vm::host(common::straight(IADD, "int")).expect("a VM");
    assert_eq!(iadd.invoke("main", &[]).expect("runs"), [HostValue::Int(N as i64)]);
    g.bench_function("iadd", |b| b.iter(|| iadd.invoke("main", &[]).expect("runs")));
    g.finish();

    let mut g = c.benchmark_group("loop");
    let mut looped = Vm::host(common::module(LOOP)).expect("a VM");
    let n = [HostValue::Int(N as i64)];
    g.throughput(Throughput::Elements(instructions(&mut looped, &n)));
    assert_eq!(looped.invoke("main", &n).expect("runs"), [HostValue::Int(N as i64)]);
    g.bench_function("iadd_ilt_br_if", |b| b.iter(|| looped.invoke("main", &n).expect("runs")));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
