//! Random byte strings, mutated bytecode, random text and random token soups are refused
//! with errors or run within limits — never a panic. (Deeper fuzzing: see the
//! reliability work; this is the always-on smoke test.)

use rxvm::asm::{assemble, assemble_file};
use rxvm::vm::types::{Dim, Type};
use rxvm::vm::{load_module, write_module, DeviceCaps, HostTensor, HostValue, Vm};
use rxvm_test_support::fuzz::Rng;
use std::path::Path;
use std::sync::Arc;

fn example_modules() -> Vec<rxvm::vm::Module> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut v = Vec::new();
    for dir in ["examples", "tests/programs"] {
        for e in std::fs::read_dir(root.join(dir)).expect("dir") {
            let p = e.expect("entry").path();
            if p.extension().is_some_and(|x| x == "rxa") {
                v.push(assemble_file(&p).unwrap_or_else(|d| panic!("{}", d.render())));
            }
        }
    }
    v
}

/// Runs `main` (if present) with zero/small inputs under tight limits.
fn run_bounded(m: rxvm::vm::Module) {
    let caps = DeviceCaps::host().with_overrides("mem=16M,max-alloc=16M").expect("caps");
    let m = Arc::new(m);
    let Ok(mut vm) = Vm::new(m.clone(), vec![caps]) else {
        return;
    };
    vm.capture_output();
    vm.limits.max_instructions = Some(20_000);
    vm.limits.max_call_depth = 64;
    let Some(fid) = m.func_by_name("main") else {
        return;
    };
    let f = &m.funcs[fid];
    let mut args = Vec::new();
    for t in &f.params {
        args.push(match t {
            Type::Int => HostValue::Int(3),
            Type::Float => HostValue::Float(0.5),
            Type::Shape => HostValue::Shape(vec![1, 2]),
            Type::Tensor { dtype, dims } => {
                let shape: Vec<i64> =
                    dims.iter().map(|d| if let Dim::Known(v) = d { (*v).min(64) } else { 4 }).collect();
                match HostTensor::zeros(*dtype, &shape) {
                    Ok(t) => HostValue::Tensor(t),
                    Err(_) => return,
                }
            }
            _ => return,
        });
    }
    let _ = vm.invoke("main", &args);
}

#[test]
fn random_bytes_never_panic_the_loader() {
    let mut rng = Rng(0x1234_5678);
    for _ in 0..20_000 {
        let len = rng.below(96);
        let mut b: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if rng.below(2) == 0 && b.len() >= 16 {
            b[..8].copy_from_slice(b"\0RXB\x02\0\0\0");
            let n = (b.len() as u64).to_le_bytes();
            b[8..16].copy_from_slice(&n);
        }
        let _ = load_module(&b);
    }
}

#[test]
fn mutated_bytecode_is_refused_or_runs_within_limits() {
    let mut rng = Rng(42);
    let mut loaded = 0;
    for m in example_modules() {
        let good = write_module(&m);
        for _ in 0..500 {
            let mut b = good.clone();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(b.len());
                b[i] = match rng.below(3) {
                    0 => rng.next() as u8,
                    1 => b[i] ^ (1 << rng.below(8)),
                    _ => 0xff,
                };
            }
            if rng.below(10) == 0 {
                b.truncate(rng.below(b.len()));
            }
            if let Ok(m) = load_module(&b) {
                loaded += 1;
                run_bounded(m);
            }
        }
    }
    assert!(loaded > 0, "some mutants should still be valid programs and run");
}

/// The soups' words: every word of the language ([`rxvm_asm::syntax::keywords`]:
/// mnemonics, type keywords, dtypes, declaration keywords, from the VM's tables), then
/// names, punctuation and numbers at the edges.
fn vocab() -> Vec<&'static str> {
    let mut v = rxvm_asm::syntax::keywords();
    v.extend([
        "@main",
        "@vm.add",
        "@vm.iadd",
        "@f",
        "%x",
        "%s",
        "%t",
        "%n",
        "=",
        ",",
        "(",
        ")",
        "{",
        "}",
        "[",
        "]",
        ":",
        "->",
        "?",
        "\"global\"",
        "\"global.texture\"",
        "0",
        "1",
        "-1",
        "64",
        "4096",
        "1.5",
        "fill(1.0)",
        "L:",
        "L",
        "\n",
        "\n",
        "\n",
        ";c\n",
        "99999999999999999999",
        "0x",
        "\"",
        "$",
    ]);
    v
}

#[test]
fn random_token_soups_and_text_never_panic_the_assembler() {
    let vocab = vocab();
    let mut rng = Rng(7);
    let mut assembled = 0;
    for _ in 0..5_000 {
        let n = rng.below(60);
        let mut s = String::new();
        for _ in 0..n {
            s.push_str(vocab[rng.below(vocab.len())]);
            s.push(' ');
        }
        if let Ok(m) = assemble(&s, "soup.rxa") {
            assembled += 1;
            run_bounded(m);
        }
    }
    for _ in 0..5_000 {
        let n = rng.below(80);
        let s: String = (0..n).map(|_| char::from_u32(rng.below(0x250) as u32).unwrap_or('x')).collect();
        let _ = assemble(&s, "noise.rxa");
    }
    let _ = assembled;
}

#[test]
fn mutated_example_text_never_panics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut rng = Rng(99);
    for e in std::fs::read_dir(root.join("examples")).expect("dir") {
        let path = e.expect("entry").path();
        if path.extension().is_none_or(|x| x != "rxa") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("text");
        let tokens: Vec<&str> = text.split_inclusive(|c: char| c.is_whitespace() || ",()[]{}".contains(c)).collect();
        let vocab = vocab();
        for _ in 0..400 {
            let mut t = tokens.clone();
            for _ in 0..1 + rng.below(3) {
                let i = rng.below(t.len());
                match rng.below(3) {
                    0 => {
                        t.remove(i);
                    }
                    1 => {
                        let j = rng.below(t.len());
                        t.swap(i, j);
                    }
                    _ => t.insert(i, vocab[rng.below(vocab.len())]),
                }
            }
            if let Ok(m) = assemble(&t.concat(), "mutant.rxa") {
                run_bounded(m);
            }
        }
    }
}
