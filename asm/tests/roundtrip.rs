//! assemble → disassemble → assemble gives the same module: byte-identical `.rxb` once
//! debug info is stripped, the same register and label names, and a printer fixed point.

use rxvm_asm::{assemble, assemble_file, assemble_unverified, disassemble};
use rxvm_vm::bytecode::{Arg, Instr};
use rxvm_vm::module::{ConstData, Literal, Module};
use rxvm_vm::types::{DType, Dim, Type};
use rxvm_vm::write_module;
use std::path::Path;

fn stripped(m: &Module) -> Vec<u8> {
    let mut m = m.clone();
    m.strip_debug();
    write_module(&m)
}

type FuncNames = (Vec<String>, Vec<(u32, String)>);

/// Names must survive: everything but the source positions.
fn names(m: &Module) -> Vec<FuncNames> {
    m.funcs.iter().map(|f| (f.debug.reg_names.clone(), f.debug.labels.clone())).collect()
}

/// Asserts the round trip and returns the disassembly.
fn round_trip(name: &str, m1: &Module) -> String {
    let text = disassemble(m1);
    let m2 = match assemble_unverified(&text, name) {
        Ok(m) => m,
        Err(d) => panic!("{name}: the disassembly does not assemble:\n{}\n{text}", d.render()),
    };
    assert_eq!(stripped(m1), stripped(&m2), "{name}: bytecode differs\n{text}");
    assert_eq!(names(m1), names(&m2), "{name}: names differ\n{text}");
    assert_eq!(m1.name, m2.name);
    assert_eq!(disassemble(&m2), text, "{name}: the printer is not a fixed point");

    // Without debug info: generated names, same bytecode.
    let mut s1 = m1.clone();
    s1.strip_debug();
    let text_s = disassemble(&s1);
    let m3 = match assemble_unverified(&text_s, name) {
        Ok(m) => m,
        Err(d) => panic!("{name}: the stripped disassembly does not assemble:\n{}\n{text_s}", d.render()),
    };
    assert_eq!(stripped(m1), stripped(&m3), "{name}: stripped bytecode differs\n{text_s}");
    text
}

fn program(name: &str) -> (String, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs").join(name);
    let text = std::fs::read_to_string(&path).expect("test program");
    (path.display().to_string(), text)
}

#[test]
fn all_forms_round_trip() {
    let (path, text) = program("all_forms.rxa");
    let m = assemble_unverified(&text, &path).unwrap_or_else(|d| panic!("{}", d.render()));
    let out = round_trip(&path, &m);
    insta::assert_snapshot!("all_forms_disassembly", out);
}

#[test]
fn verified_programs_round_trip() {
    for name in ["loops.rxa", "tensors.rxa"] {
        let (path, text) = program(name);
        let m = assemble(&text, &path).unwrap_or_else(|d| panic!("{}", d.render()));
        round_trip(&path, &m);
    }
}

#[test]
fn repository_examples_round_trip() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut n = 0;
    for dir in ["examples", "tests/programs"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "rxa") {
                let Ok(text) = std::fs::read_to_string(&p) else {
                    continue;
                };
                let Ok(m) = assemble_unverified(&text, &p.display().to_string()) else {
                    continue;
                };
                round_trip(&p.display().to_string(), &m);
                n += 1;
            }
        }
    }
    eprintln!("{n} repository programs round-tripped");
}

#[test]
fn encoding_details() {
    let (path, text) = program("all_forms.rxa");
    let m = assemble_unverified(&text, &path).unwrap_or_else(|d| panic!("{}", d.render()));
    assert_eq!(m.name, "all_forms");
    assert_eq!(m.source_file.as_deref(), Some(path.as_str()));

    // Literals are interned in order of first appearance, bitwise.
    let lits: Vec<String> = m.literals.iter().map(|l| format!("{l:?}")).collect();
    assert_eq!(&lits[..3], ["Int(536870912)", "Int(-536870913)", "Float(2.0)"], "{lits:?}");
    assert!(m.literals.iter().any(|l| l.same(&Literal::Float(-0.0))));
    assert!(m.literals.iter().any(|l| l.same(&Literal::Float(1e-7))));
    for (i, a) in m.literals.iter().enumerate() {
        for b in &m.literals[i + 1..] {
            assert!(!a.same(b), "{a:?} is in the pool twice");
        }
    }

    // Parameters are registers 0..n; the rest in order of first appearance.
    let main = &m.funcs[m.func_by_name("main").expect("main").0 as usize];
    assert_eq!(&main.debug.reg_names[..6], ["x", "sh", "st", "any", "i", "j"]);
    assert_eq!(main.num_regs as usize, main.debug.reg_names.len());
    assert_eq!(main.debug.locs.len(), main.code.len());
    assert_eq!(
        main.debug.locs[0].line,
        text.lines().position(|l| l.contains("%i = int -5000000000")).unwrap() as u32 + 1
    );
    assert_eq!(main.debug.locs[0].col, 3);
    // Two labels at one pc: the first is kept for the debug table.
    let yes = main.debug.labels.iter().find(|(_, n)| n == "yes").expect("yes").0;
    assert!(!main.debug.labels.iter().any(|(_, n)| n == "also_yes"));
    assert!(main.debug.labels.windows(2).all(|w| w[0].0 < w[1].0));
    assert!(matches!(main.code[yes as usize], Instr::Br { .. }));

    // Omitted align is the immediate 0; int literal to a float parameter is a float.
    let first_storage = main.code.iter().find_map(|i| match i {
        Instr::AllocStorage { align, .. } => Some(*align),
        _ => None,
    });
    assert_eq!(first_storage, Arg::imm(128));
    let k = main.code.iter().find_map(|i| match i {
        Instr::AllocStorage { align, .. } if Some(*align) == Arg::imm(0) => Some(()),
        _ => None,
    });
    assert!(k.is_none(), "every alloc_storage in all_forms has an align");

    // Constants.
    let c = |n: &str| &m.consts[m.const_by_name(n).expect("const").0 as usize];
    assert_eq!(c("filled").data, ConstData::Fill(-0.0));
    assert_eq!(c("filled_int").data, ConstData::Fill(-7.0));
    assert_eq!(c("scalar").shape, Vec::<i64>::new());
    assert_eq!(c("u64s").data, ConstData::Bytes([u64::MAX.to_le_bytes(), [0; 8]].concat()));
    assert_eq!(c("bools").data, ConstData::Bytes(vec![1, 0, 1]));
    assert_eq!(c("f16s").dtype, DType::F16);
    let ConstData::Bytes(b) = &c("f16s").data else { panic!() };
    assert_eq!(&b[..4], &[0x00, 0x38, 0x00, 0xc0]);
    let ConstData::Bytes(b) = &c("ints_as_floats").data else { panic!() };
    assert_eq!(b, &[1.0f32.to_le_bytes(), (-2.0f32).to_le_bytes(), 16.0f32.to_le_bytes()].concat());

    // Types.
    let types = &m.funcs[m.func_by_name("types").expect("types").0 as usize];
    assert_eq!(types.params[5], Type::Tensor { dtype: DType::F32, dims: vec![Dim::Any, Dim::Known(4)] });
    assert_eq!(types.params[6], Type::Tensor { dtype: DType::Bool, dims: vec![] });
    assert_eq!(types.params[4], Type::AnyTensor);
}

#[test]
fn file_constants() {
    let dir = std::env::temp_dir().join(format!("rxvm-asm-file-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).expect("temp dir");
    let data: Vec<u8> = (0..64u8).collect();
    std::fs::write(dir.join("sub/w.bin"), &data).expect("write data");
    let src =
        "const @m: f32[4, 4] = file(\"sub/w.bin\")\n\nfunc @main() -> f32[4, 4] {\n  %w = const @m\n  ret %w\n}\n";
    let path = dir.join("prog.rxa");
    std::fs::write(&path, src).expect("write source");
    let m = assemble_file(&path).unwrap_or_else(|d| panic!("{}", d.render()));
    assert_eq!(m.consts[0].data, ConstData::Bytes(data));
    // Printed as a list, it re-assembles to the same bytes.
    round_trip("file.rxa", &m);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every f16 bit pattern, and many f32 and f64 ones, survive print → assemble in constants
/// and in the literal pool.
#[test]
fn float_bit_patterns_survive() {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let f16_bytes: Vec<u8> = (0..=u16::MAX).flat_map(|b| b.to_le_bytes()).collect();
    let mut f32_bytes = Vec::new();
    let mut f64_bytes = Vec::new();
    let mut lits = Vec::new();
    let specials32 =
        [0u32, 0x8000_0000, 1, 0x7f7f_ffff, 0x7f80_0000, 0xff80_0000, 0x7fc0_0000, 0x7f80_0001, 0xffff_ffff];
    for s in specials32 {
        f32_bytes.extend_from_slice(&s.to_le_bytes());
    }
    for _ in 0..20_000 {
        f32_bytes.extend_from_slice(&(next() as u32).to_le_bytes());
        let b = next();
        f64_bytes.extend_from_slice(&b.to_le_bytes());
        lits.push(f64::from_bits(b));
    }
    for s in [0u64, 1 << 63, 1, 0x7ff0_0000_0000_0000, 0x7ff8_0000_0000_0000, 0x7ff0_0000_0000_0001, u64::MAX] {
        f64_bytes.extend_from_slice(&s.to_le_bytes());
        lits.push(f64::from_bits(s));
    }
    let n16 = f16_bytes.len() / 2;
    let n32 = f32_bytes.len() / 4;
    let n64 = f64_bytes.len() / 8;
    let mut src = format!(
        "const @a: f16[{n16}] = fill(0.0)\nconst @b: f32[{n32}] = fill(0.0)\nconst @c: f64[{n64}] = fill(0.0)\n\
         func @main() {{\n"
    );
    for (i, v) in lits.iter().enumerate() {
        src.push_str(&format!(
            "  %r{i} = float 0.0\n  call @vm.print({})\n",
            if v.is_nan() { "nan".into() } else { format!("{v:?}") }
        ));
    }
    src.push_str("  ret\n}\n");
    let mut m = assemble_unverified(&src, "floats.rxa").unwrap_or_else(|d| panic!("{}", d.render()));
    m.consts[0].data = ConstData::Bytes(f16_bytes);
    m.consts[1].data = ConstData::Bytes(f32_bytes);
    m.consts[2].data = ConstData::Bytes(f64_bytes);
    // Put the exact bit patterns (NaN payloads included) into the code and the pool.
    let main = &mut m.funcs[0];
    let mut k = 0;
    for ins in &mut main.code {
        if let Instr::LoadFloat { value, .. } = ins {
            *value = lits[k];
            k += 1;
        }
    }
    m.literals = lits.iter().map(|v| Literal::Float(*v)).collect();
    for (i, a) in main.args.iter_mut().enumerate() {
        *a = Arg::lit(i as u32);
    }
    round_trip("floats.rxa", &m);
}

#[test]
fn disassembly_of_a_stripped_module_uses_generated_names() {
    let (path, text) = program("loops.rxa");
    let mut m = assemble(&text, &path).unwrap_or_else(|d| panic!("{}", d.render()));
    m.strip_debug();
    let out = disassemble(&m);
    insta::assert_snapshot!("loops_stripped", out);
}

/// Partial, clashing or unprintable debug names (possible in a hand-made `.rxb`) still
/// print as a program with the same bytecode.
#[test]
fn odd_debug_names_still_round_trip() {
    let (path, text) = program("loops.rxa");
    let mut m = assemble(&text, &path).unwrap_or_else(|d| panic!("{}", d.render()));
    let f = &mut m.funcs[0];
    // Register 0 named like register 1's generated name; 1 unnamed; 2 and 3 clash; 4 unprintable.
    f.debug.reg_names = vec!["r1".into(), String::new(), "dup".into(), "dup".into(), "a b".into()];
    // Labels: one unprintable, one past the end, one duplicated name.
    f.debug.labels = vec![(3, "not a label".into()), (5, "x".into()), (9, "x".into()), (99, "gone".into())];
    m.name = "weird name\n".into();
    let out = disassemble(&m);
    let back = assemble(&out, "odd.rxa").unwrap_or_else(|d| panic!("{}\n{out}", d.render()));
    assert_eq!(stripped(&m), stripped(&back), "{out}");
    assert_eq!(back.name, "weird name\n");
    insta::assert_snapshot!("odd_debug_names", out);
}
