//! Assembler, disassembler and loader throughput: `cargo bench --bench assembler`.
//!
//! The input is a generated, deterministic ~10 MB `.rxa` program (about 4,000 functions) in
//! the style of `rxvm compile` output: squeezenet-like fire blocks and residual blocks on
//! buffers and on `global.texture` images (`alloc_storage` arenas, `alloc_tensor` views,
//! `@onnx.*` calls with attributes, `kill`s, layout conversions), classifier heads (Flatten,
//! Gemm, Softmax, Reshape by an `i64` constant), loops over dynamically sized storages
//! (labels, `br`, `br_if`, integer and float literals, literal-pool integers) and driver
//! functions calling the others (`shape`, `const`, `@vm.*` builtins), with comments and a
//! few dozen constants.
//!
//! * `assemble`: text → verified [`Module`], exactly what `rxvm_asm::assemble` (and
//!   `rxvm asm`) does: lexing, parsing, assembling **and the verifier** (including the
//!   load-time shape inference of operator calls). Throughput: bytes of input text.
//! * `disassemble`: [`Module`] → text (`rxvm_asm::disassemble`, what `rxvm disasm` prints).
//!   Throughput: bytes of text produced.
//! * `load_verify`: `.rxb` bytes → verified [`Module`] (`rxvm_vm::load_module`, what the CLI
//!   does with a `.rxb` file: decode, then verify). Throughput: `.rxb` bytes.
//!
//! Before measuring, the generated text must assemble, its disassembly must re-assemble to
//! the same module (same `.rxb`, names included, source positions aside), and the `.rxb`
//! must load back to the same module; any failure panics with the diagnostic. Under
//! `cargo test --benches` (criterion's test mode) a ~1 MB program is used instead.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rxvm_asm::{assemble, disassemble, Module};
use rxvm_vm::{load_module, write_module};

mod common;
use common::rxa::{program, BENCH_BYTES};

/// Size under `cargo test --benches`.
const TEST_BYTES: usize = 1 << 20;

// ------------------------------------------------------------------ checks and benchmarks

/// The module without source positions, which legitimately change across a round trip.
fn without_locs(m: &Module) -> Module {
    let mut m = m.clone();
    m.source_file = None;
    for f in m.funcs.values_mut() {
        f.debug.locs.clear();
    }
    m
}

/// Assembles `text`, checks the round trips, returns the module, its disassembly and `.rxb`.
fn checked(text: &str) -> (Module, String, Vec<u8>) {
    let m = assemble(text, "bench.rxa")
        .unwrap_or_else(|d| panic!("the generated program does not assemble:\n{}", d.render()));
    let dis = disassemble(&m);
    let again =
        assemble(&dis, "bench.rxa").unwrap_or_else(|d| panic!("the disassembly does not re-assemble:\n{}", d.render()));
    assert!(without_locs(&m) == without_locs(&again), "the disassembly re-assembles to a different module");
    assert_eq!(
        write_module(&without_locs(&m)),
        write_module(&without_locs(&again)),
        "different .rxb after a round trip"
    );
    assert_eq!(disassemble(&again), dis, "the disassembly is not a fixed point");
    let rxb = write_module(&m);
    let loaded = load_module(&rxb).unwrap_or_else(|e| panic!("the .rxb does not load: {e}"));
    assert!(loaded == m, "the .rxb loads to a different module");
    (m, dis, rxb)
}

fn benches(c: &mut Criterion) {
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let text = program(if bench_mode { BENCH_BYTES } else { TEST_BYTES });
    let (module, dis, rxb) = checked(&text);
    let nfuncs = module.funcs.len();
    let ninstrs: usize = module.funcs.values().map(|f| f.code.len()).sum();
    eprintln!(
        "assembler bench: {} bytes of .rxa ({nfuncs} functions, {ninstrs} instructions, {} constants), \
         {} bytes of disassembly, {} bytes of .rxb",
        text.len(),
        module.consts.len(),
        dis.len(),
        rxb.len()
    );

    let mut group = c.benchmark_group("assembler");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));

    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("assemble", |b| b.iter(|| assemble(black_box(&text), "bench.rxa").expect("assembles")));

    group.throughput(Throughput::Bytes(dis.len() as u64));
    group.bench_function("disassemble", |b| b.iter(|| disassemble(black_box(&module))));

    group.throughput(Throughput::Bytes(rxb.len() as u64));
    group.bench_function("load_verify", |b| b.iter(|| load_module(black_box(&rxb)).expect("loads")));
    group.finish();
}

criterion_group!(assembler, benches);
criterion_main!(assembler);
