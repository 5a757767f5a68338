//! Random bytes, random token soups and mutated programs never make the assembler panic;
//! whatever does assemble also round-trips through the disassembler, and every diagnostic
//! renders.

use rxvm_asm::{assemble, assemble_unverified, disassemble};
use rxvm_vm::write_module;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

/// Tokens other than the language's words (those come from `rxvm_asm::syntax::keywords`).
const OTHER: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    "=",
    "->",
    "?",
    "\n",
    "\n",
    "\n",
    "%x",
    "%y",
    "%s",
    "%t",
    "@main",
    "@w",
    "@vm.add",
    "@vm.fill",
    "@vm.print",
    "@vm.iadd",
    "@vm.nope",
    "@onnx.Relu",
    "@onnx.Add",
    "@onnx.relu",
    "->",
    "{",
    "}",
    "alpha",
    "axis",
    "broadcast",
    "@f",
    "0",
    "1",
    "-1",
    "64",
    "0x7f",
    "99999999999999999999999999999999999999999",
    "1.5",
    "-0.0",
    "1e-7",
    "inf",
    "-inf",
    "nan",
    "nan(0x1)",
    "nan(0xffffffffffffffffffffff)",
    "\"global\"",
    "\"global.texture\"",
    "\"x\\q\"",
    "\"",
    "l1",
    "l1:",
    "l2:",
    "; comment",
    "é",
    "$",
    "\t",
    "  ",
    "\r\n",
];

/// What token soups are made of: [`OTHER`] and every word of the language.
fn vocab() -> Vec<&'static str> {
    let mut v = OTHER.to_vec();
    v.extend(rxvm_asm::syntax::keywords());
    v
}

fn check(src: &str) {
    let r = std::panic::catch_unwind(|| {
        for result in [assemble(src, "fuzz.rxa"), assemble_unverified(src, "fuzz.rxa")] {
            match result {
                Err(d) => {
                    let text = d.render();
                    assert!(text.starts_with("error"), "{text}");
                    for item in d.items() {
                        assert!(item.span.start <= item.span.end && item.span.end <= src.len(), "{item:?}");
                    }
                }
                Ok(m) => {
                    let text = disassemble(&m);
                    let m2 = assemble_unverified(&text, "fuzz.rxa")
                        .unwrap_or_else(|d| panic!("disassembly does not assemble:\n{}\n{text}", d.render()));
                    let (mut a, mut b) = (m.clone(), m2);
                    a.strip_debug();
                    b.strip_debug();
                    assert_eq!(write_module(&a), write_module(&b), "round trip differs:\n{text}");
                }
            }
        }
    });
    if r.is_err() {
        panic!("the assembler panicked on {src:?}");
    }
}

#[test]
fn random_bytes() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for _ in 0..3000 {
        let n = rng.below(200);
        let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        check(&String::from_utf8_lossy(&bytes));
        // Mostly-ASCII printable text reaches the parser more often.
        let text: String = (0..n).map(|_| (b' ' + (rng.next() % 95) as u8) as char).collect();
        check(&text);
    }
}

#[test]
fn token_soup() {
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    let vocab = vocab();
    for _ in 0..5000 {
        let n = rng.below(60);
        let mut s = String::new();
        for _ in 0..n {
            s.push_str(rng.pick(&vocab));
            if rng.below(3) > 0 {
                s.push(' ');
            }
        }
        check(&s);
    }
}

fn seeds() -> Vec<String> {
    let mut v = vec![
        "module m\nconst @w: f32[2] = [1.0, 2.0]\nfunc @main(%x: f32[2]) -> f32[2] {\n  %s = alloc_storage 8\n  \
         %y = alloc_tensor %s, 0, f32[2]\n  call @vm.add(%x, @w, %y)\n  kill %s\n  ret %y\n}\n"
            .to_string(),
        "func @main(%n: int) -> int {\n  %i = int 0\nloop:\n  %i = call @vm.iadd(%i, 1)\n  %c = call @vm.ilt(%i, %n)\n  \
         br_if %c, loop, done\ndone:\n  ret %i\n}\n"
            .to_string(),
        "func @main(%x: f32[2, 3]) -> f32[2, 3] {\n  %s = alloc_storage 24\n  %y = alloc_tensor %s, 0, f32[2, 3]\n  \
         call @onnx.Relu(%x) -> (%y)\n  call @onnx.Add(%y, %x) -> (%y) { broadcast = 1, axis = 0 }\n  kill %s\n  \
         ret %y\n}\n"
            .to_string(),
    ];
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for p in [
        "tests/programs/all_forms.rxa",
        "tests/programs/loops.rxa",
        "tests/programs/tensors.rxa",
        "tests/programs/op_calls.rxa",
        "tests/programs/kernels.rxa",
    ] {
        if let Ok(t) = std::fs::read_to_string(root.join(p)) {
            v.push(t);
        }
    }
    v
}

#[test]
fn mutated_programs() {
    let mut rng = Rng(0x0bad_cafe_1234_5678);
    let vocab = vocab();
    let seeds = seeds();
    for seed in &seeds {
        check(seed);
        // Split into rough tokens (keeping separators) and mutate.
        let mut toks: Vec<String> = Vec::new();
        let mut cur = String::new();
        for c in seed.chars() {
            if c.is_whitespace() || "()[]{},:=".contains(c) {
                if !cur.is_empty() {
                    toks.push(std::mem::take(&mut cur));
                }
                toks.push(c.to_string());
            } else {
                cur.push(c);
            }
        }
        if !cur.is_empty() {
            toks.push(cur);
        }
        for _ in 0..400 {
            let mut t = toks.clone();
            for _ in 0..1 + rng.below(3) {
                if t.is_empty() {
                    break;
                }
                let i = rng.below(t.len());
                match rng.below(4) {
                    0 => {
                        t.remove(i);
                    }
                    1 => {
                        let x = t[rng.below(t.len())].clone();
                        t.insert(i, x);
                    }
                    2 => t[i] = rng.pick(&vocab).to_string(),
                    _ => {
                        let j = rng.below(t.len());
                        t.swap(i, j);
                    }
                }
            }
            check(&t.concat());
        }
        // Every prefix, byte by byte on char boundaries.
        for (i, _) in seed.char_indices().step_by(7) {
            check(&seed[..i]);
        }
    }
}

#[test]
fn pathological_sizes() {
    // Deep and wide inputs: long lists, many registers, long lines.
    let many = (0..5000).map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    check(&format!("func @main() {{\n  call @vm.print({many})\n  ret\n}}\n"));
    check(&format!("func @main() {{\n  %s = shape [{many}]\n  ret\n}}\n"));
    let regs: String = (0..3000).map(|i| format!("  %r{i} = int {i}\n")).collect();
    check(&format!("func @main() {{\n{regs}  ret\n}}\n"));
    check(&"(".repeat(10_000));
    check(&"[".repeat(10_000));
    check(&format!("const @w: f32[{}] = fill(1.0)\n", "1, ".repeat(300)));
    check("const @w: f32[9223372036854775807, 9223372036854775807] = fill(1.0)\n");
    check("const @w: f32[9223372036854775807, 2] = []\n");
    check(&"\n".repeat(10_000));
    check(&";".repeat(10_000));
}
