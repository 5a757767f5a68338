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
use std::sync::Arc;

const N: usize = 10_000;

fn vm(text: &str) -> Vm {
    let module = rxvm_asm::assemble(text, "bench.rxa").unwrap_or_else(|d| panic!("{}", d.render()));
    Vm::host(Arc::new(module)).expect("a VM")
}

fn straight(body: &str, ret: &str) -> String {
    let mut t = format!("module straight\n\nfunc @main() -> {ret} {{\n  %a = int 0\n");
    for _ in 0..N {
        t.push_str(body);
    }
    t.push_str(if ret == "int" { "  ret %a\n}\n" } else { "  ret\n}\n" });
    t
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("straight");
    // 1 int + N calls + ret.
    g.throughput(Throughput::Elements(N as u64 + 2));
    let mut nop = vm(&straight("  call @vm.nop()\n", "()"));
    g.bench_function("nop", |b| b.iter(|| nop.invoke("main", &[]).expect("runs")));
    let mut iadd = vm(&straight("  %a = call @vm.iadd(%a, 1)\n", "int"));
    assert_eq!(iadd.invoke("main", &[]).expect("runs"), [HostValue::Int(N as i64)]);
    g.bench_function("iadd", |b| b.iter(|| iadd.invoke("main", &[]).expect("runs")));
    g.finish();

    let mut g = c.benchmark_group("loop");
    // 2 setup instructions, 3 per iteration, 1 ret.
    g.throughput(Throughput::Elements(3 * N as u64 + 3));
    let mut looped = vm("module looped

func @main(%n: int) -> int {
  %i = int 0
loop:
  %i = call @vm.iadd(%i, 1)
  %more = call @vm.ilt(%i, %n)
  br_if %more, loop, done
done:
  ret %i
}
");
    let n = [HostValue::Int(N as i64)];
    assert_eq!(looped.invoke("main", &n).expect("runs"), [HostValue::Int(N as i64)]);
    g.bench_function("iadd_ilt_br_if", |b| b.iter(|| looped.invoke("main", &n).expect("runs")));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
