//! assemble → disassemble → assemble gives the same module: byte-identical `.rxb` once
//! debug info is stripped, the same register and label names, and a printer fixed point.

use rxvm_asm::{assemble, assemble_file, assemble_unverified, assemble_with_map, disassemble};
use rxvm_vm::bytecode::{Arg, ArgKind, ConstId, FuncId, Instr, OpId, Reg};
use rxvm_vm::module::{ConstData, Literal, Module};
use rxvm_vm::ops::{AttrValue, Attrs};
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
    m.funcs.values().map(|f| (f.debug.reg_names.iter().map(String::from).collect(), f.debug.labels.clone())).collect()
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
fn op_calls_round_trip() {
    let (path, text) = program("op_calls.rxa");
    let m = assemble_unverified(&text, &path).unwrap_or_else(|d| panic!("{}", d.render()));
    let out = round_trip(&path, &m);
    insta::assert_snapshot!("op_calls_disassembly", out);
}

#[test]
fn op_call_encoding() {
    let (path, text) = program("op_calls.rxa");
    let (m, map) = assemble_with_map(&text, &path, None).unwrap_or_else(|d| panic!("{}", d.render()));
    let f = &m.funcs[FuncId(0)];
    let calls: Vec<(OpId, u32, u32, u8, u16)> = f
        .code
        .iter()
        .filter_map(|i| match *i {
            Instr::CallOp { op, list, attrs, nout, nin } => Some((op, list, attrs, nout, nin)),
            _ => None,
        })
        .collect();
    let (relu, add) = (OpId::from_name("Relu").expect("Relu"), OpId::from_name("onnx.Add").expect("Add"));
    let summary: Vec<(OpId, u32, u8, u16)> = calls.iter().map(|&(op, _, a, o, i)| (op, a, o, i)).collect();
    assert_eq!(
        summary,
        [
            (relu, 0, 1, 1),
            (add, 0, 1, 2),
            (add, 1, 2, 2),
            (relu, 2, 1, 1),
            (add, 0, 1, 2),
            (relu, 0, 0, 0),
            (relu, 0, 0, 1)
        ]
    );
    // The list holds the inputs then the outputs; `none` is Arg::NONE.
    let (x, y, z) = (Reg(0), Reg(2), Reg(3));
    assert_eq!(f.debug.reg_names.iter().take(4).collect::<Vec<_>>(), ["x", "s", "y", "z"]);
    let list = |k: usize| {
        let (_, start, _, nout, nin) = calls[k];
        f.args[start as usize..][..nin as usize + nout as usize].iter().map(|a| a.kind()).collect::<Vec<_>>()
    };
    assert_eq!(list(0), [ArgKind::Reg(x), ArgKind::Reg(y)]);
    assert!(matches!(list(1)[..], [ArgKind::Reg(r), ArgKind::Const(_), ArgKind::Reg(o)] if r == y && o == z));
    assert_eq!(list(2), [ArgKind::Reg(x), ArgKind::None, ArgKind::Reg(y), ArgKind::Reg(z)]);
    assert_eq!(list(3), [Arg::NONE.kind(), ArgKind::Reg(z)]);
    assert!(matches!(list(6)[..], [ArgKind::Const(_)]));

    // One attribute set per non-empty block, in text order; `{ }` is no set.
    assert_eq!(m.attrs.len(), 2);
    let want = Attrs(
        [
            ("int", AttrValue::Int(3)),
            ("neg", AttrValue::Int(-16)),
            ("big", AttrValue::Int(i64::MAX)),
            ("float", AttrValue::Float(0.5)),
            ("tiny", AttrValue::Float(1e-7)),
            ("negzero", AttrValue::Float(-0.0)),
            ("minf", AttrValue::Float(f64::NEG_INFINITY)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
    );
    assert_eq!(m.attrs[0].0[..7], want.0[..]);
    let bits = |n: &str| match m.attrs[0].get(n) {
        Some(AttrValue::Float(v)) => v.to_bits(),
        other => panic!("{n}: {other:?}"),
    };
    assert_eq!(bits("negzero"), (-0.0f64).to_bits());
    assert_eq!(bits("quiet"), f64::NAN.to_bits());
    assert_eq!(bits("payload"), 0x7ff0_0000_0000_0005);
    assert_eq!(m.attrs[0].get("ints"), Some(&AttrValue::Ints(vec![1, -2, 3])));
    assert_eq!(m.attrs[0].get("empty"), Some(&AttrValue::Ints(vec![])));
    assert_eq!(m.attrs[0].get("floats"), Some(&AttrValue::Floats(vec![0.5, 1.0])));
    assert_eq!(m.attrs[0].get("mixed"), Some(&AttrValue::Floats(vec![1.0, 2.5, -3.0])));
    assert_eq!(m.attrs[0].get("str"), Some(&AttrValue::Str("NOTSET".into())));
    assert_eq!(m.attrs[0].get("escaped"), Some(&AttrValue::Str("a\"b\\c\n".into())));
    assert_eq!(
        m.attrs[1].0,
        [
            ("strides".to_string(), AttrValue::Ints(vec![2, 2])),
            ("pads".to_string(), AttrValue::Ints(vec![1, 1, 1, 1])),
            ("alpha".to_string(), AttrValue::Int(1)),
        ]
    );

    // Operand spans: inputs, outputs, then the attribute block; and each attribute.
    let pcs: Vec<usize> =
        f.code.iter().enumerate().filter(|(_, i)| matches!(i, Instr::CallOp { .. })).map(|(pc, _)| pc).collect();
    let spans = |pc: usize| -> Vec<&str> {
        map.funcs[FuncId(0)].instrs[pc].operands.iter().map(|s| &text[s.range()]).collect()
    };
    let third = spans(pcs[2]);
    assert_eq!(third[..4], ["%x", "none", "%y", "%z"]);
    assert!(third[4].starts_with("{ int = 3,") && third[4].ends_with('}'), "{}", third[4]);
    let fourth = spans(pcs[3]);
    assert!(fourth[2].starts_with("{\n    strides") && fourth[2].ends_with("alpha = 1\n  }"), "{}", fourth[2]);
    let attrs: Vec<(&str, &str)> =
        map.funcs[FuncId(0)].instrs[pcs[3]].attrs.iter().map(|(n, s)| (n.as_str(), &text[s.range()])).collect();
    assert_eq!(
        attrs,
        [("strides", "strides = [2, 2]"), ("pads", "pads = [1, 1,\n            1, 1]"), ("alpha", "alpha = 1")]
    );
    // Without a block, the instruction's span stands for it.
    let first = &map.funcs[FuncId(0)].instrs[pcs[0]];
    assert_eq!(&text[first.operands[2].range()], "call @onnx.Relu(%x) -> (%y)");
}

/// A verified program with operator calls (and an attribute set the verifier accepts)
/// round-trips, and runs.
#[test]
fn verified_op_calls_round_trip() {
    let src = "const @b: f32[3] = [0.5, -1.0, 2.0]\n\n\
               func @main(%x: f32[2, 3]) -> f32[2, 3] {\n  %s = alloc_storage 48\n\
               \x20 %h = alloc_tensor %s, 0, f32[2, 3]\n  %y = alloc_tensor %s, 24, f32[2, 3]\n\
               \x20 call @onnx.Relu(%x) -> (%h)\n\
               \x20 call @onnx.Add(%h, @b) -> (%y) { broadcast = 1, axis = 1 }\n\
               \x20 call @onnx.Add(%y, %y) -> (%y)\n  kill %h\n  kill %s\n  ret %y\n}\n";
    let m = assemble(src, "ops.rxa").unwrap_or_else(|d| panic!("{}", d.render()));
    assert_eq!(m.attrs.len(), 1);
    let text = round_trip("ops.rxa", &m);
    assert!(text.contains("  call @onnx.Add(%h, @b) -> (%y) { broadcast = 1, axis = 1 }\n"), "{text}");
    assert!(text.contains("  call @onnx.Relu(%x) -> (%h)\n"), "{text}");
}

/// Calls whose attribute blocks are written alike share one attribute set (a model repeats
/// `{ kernel_shape = [3, 3], ... }` hundreds of times), however they are spaced, as the
/// printer's fixed point requires; a block with an error is reported at every call.
#[test]
fn equal_attribute_blocks_share_one_set() {
    let src = "func @main(%x: f32[2, 3]) -> f32[2, 3] {\n  %s = alloc_storage 48\n\
               \x20 %h = alloc_tensor %s, 0, f32[2, 3]\n  %y = alloc_tensor %s, 24, f32[2, 3]\n\
               \x20 call @onnx.Softmax(%x) -> (%h) { axis = 1 }\n\
               \x20 call @onnx.Softmax(%h) -> (%y) { axis = 0 }\n\
               \x20 call @onnx.Softmax(%y) -> (%h) { axis = 1 }\n\
               \x20 call @onnx.Softmax(%h) -> (%y) {axis = 1}\n  kill %h\n  kill %s\n  ret %y\n}\n";
    let m = assemble(src, "shared.rxa").unwrap_or_else(|d| panic!("{}", d.render()));
    let ids: Vec<u32> = m.funcs[FuncId(0)]
        .code
        .iter()
        .filter_map(|i| match i {
            Instr::CallOp { attrs, .. } => Some(*attrs),
            _ => None,
        })
        .collect();
    assert_eq!(ids, [1, 2, 1, 1]);
    assert_eq!(m.attrs.len(), 2);
    assert_eq!(m.attrs[0].get("axis"), Some(&AttrValue::Int(1)));
    assert_eq!(m.attrs[1].get("axis"), Some(&AttrValue::Int(0)));
    // The source-map assembly (behind unverified assembly and verifier errors) builds
    // the same module.
    let (mapped, _) = assemble_with_map(src, "shared.rxa", None).unwrap_or_else(|d| panic!("{}", d.render()));
    assert_eq!(stripped(&mapped), stripped(&m));
    let text = round_trip("shared.rxa", &m);
    assert_eq!(text.matches("{ axis = 1 }").count(), 3, "{text}");
    // Floats are compared bit for bit: -0.0 and 0.0 are kept apart.
    let zeros = src.replace("{ axis = 1 }", "{ alpha = 0.0 }").replace("{axis = 1}", "{ alpha = -0.0 }");
    let m = assemble_unverified(&zeros, "zeros.rxa").unwrap_or_else(|d| panic!("{}", d.render()));
    assert_eq!(m.attrs.len(), 3);

    let bad = src.replace("{ axis = 1 }", "{ axis = 1, axis = 2 }");
    let d = assemble_unverified(&bad, "shared.rxa").expect_err("a duplicate attribute is an error");
    let lines: Vec<usize> = d.items().iter().map(|e| bad[..e.span.start].lines().count()).collect();
    assert!(d.items().iter().all(|e| e.message == "duplicate attribute `axis`"), "{}", d.render());
    assert_eq!(lines, [5, 7], "{}", d.render());
}

/// Operators with attributes of several kinds, optional inputs and several outputs: the
/// verifier accepts the attribute sets the assembler builds, and they round-trip.
#[test]
fn verified_attribute_kinds_round_trip() {
    let src = "func @main(%x: f32[2, 4]) -> (f32[4, 2], f32[2, 2], f32[2, 2], f32[2, 6]) {\n\
               \x20 %s = alloc_storage 160\n\
               \x20 %t = alloc_tensor %s, 0, f32[4, 2]\n\
               \x20 %a = alloc_tensor %s, 32, f32[2, 2]\n\
               \x20 %b = alloc_tensor %s, 48, f32[2, 2]\n\
               \x20 %p = alloc_tensor %s, 64, f32[2, 6]\n\
               \x20 call @onnx.Transpose(%x) -> (%t) { perm = [1, 0] }\n\
               \x20 call @onnx.Split(%x) -> (%a, %b) {\n    axis = 1,\n    split = [2, 2]\n  }\n\
               \x20 call @onnx.Pad(%x) -> (%p) { mode = \"constant\", pads = [0, 1, 0, 1], value = 0.5 }\n\
               \x20 ret %t, %a, %b, %p\n}\n";
    let m = match assemble(src, "attrs.rxa") {
        Ok(m) => m,
        Err(d) => panic!("{}", d.render()),
    };
    assert_eq!(m.attrs.len(), 3);
    assert_eq!(m.attrs[2].get("value"), Some(&AttrValue::Float(0.5)));
    assert_eq!(m.attrs[2].get("mode"), Some(&AttrValue::Str("constant".into())));
    let text = round_trip("attrs.rxa", &m);
    assert!(text.contains("  call @onnx.Split(%x) -> (%a, %b) { axis = 1, split = [2, 2] }\n"), "{text}");
    assert!(text.contains("{ mode = \"constant\", pads = [0, 1, 0, 1], value = 0.5 }"), "{text}");
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
    let main = &m.funcs[m.func_by_name("main").expect("main")];
    assert_eq!(main.debug.reg_names.iter().take(6).collect::<Vec<_>>(), ["x", "sh", "st", "any", "i", "j"]);
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
    let c = |n: &str| &m.consts[m.const_by_name(n).expect("const")];
    assert_eq!(c("filled").data, ConstData::Fill(-0.0));
    assert_eq!(c("filled_int").data, ConstData::Fill(-7.0));
    assert_eq!(c("scalar").shape, Vec::<i64>::new());
    assert_eq!(c("u64s").data, ConstData::Bytes([u64::MAX.to_le_bytes(), [0; 8]].concat().into()));
    assert_eq!(c("bools").data, ConstData::Bytes(vec![1, 0, 1].into()));
    assert_eq!(c("f16s").dtype, DType::F16);
    let ConstData::Bytes(b) = &c("f16s").data else { panic!() };
    assert_eq!(&b[..4], &[0x00, 0x38, 0x00, 0xc0]);
    let ConstData::Bytes(b) = &c("ints_as_floats").data else { panic!() };
    assert_eq!(b, &[1.0f32.to_le_bytes(), (-2.0f32).to_le_bytes(), 16.0f32.to_le_bytes()].concat());

    // Types.
    let types = &m.funcs[m.func_by_name("types").expect("types")];
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
    assert_eq!(m.consts[ConstId(0)].data, ConstData::Bytes(data.into()));
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
    m.consts[ConstId(0)].data = ConstData::Bytes(f16_bytes.into());
    m.consts[ConstId(1)].data = ConstData::Bytes(f32_bytes.into());
    m.consts[ConstId(2)].data = ConstData::Bytes(f64_bytes.into());
    // Put the exact bit patterns (NaN payloads included) into the code and the pool.
    let main = &mut m.funcs[FuncId(0)];
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

/// Every bf16 bit pattern and every code of each float8 format prints as a literal that
/// assembles back to the same bits (NaNs: `nan` with E5M2's and bf16's payloads, `-nan`
/// for E4M3FN's negative NaN).
#[test]
fn narrow_float_constants_round_trip_every_code() {
    let narrow = [DType::BF16, DType::F8E4M3FN, DType::F8E5M2, DType::F8E4M3FNUZ, DType::F8E5M2FNUZ, DType::F8E8M0];
    let mut src = String::new();
    for (i, d) in narrow.iter().enumerate() {
        let n = if *d == DType::BF16 { 65536 } else { 256 };
        src.push_str(&format!("const @c{i}: {d}[{n}] = fill(0.0)\n"));
    }
    let mut m = assemble_unverified(&src, "narrow.rxa").unwrap_or_else(|d| panic!("{}", d.render()));
    for (i, d) in narrow.iter().enumerate() {
        m.consts[ConstId(i as u32)].data = ConstData::Bytes(if *d == DType::BF16 {
            (0..=u16::MAX).flat_map(u16::to_le_bytes).collect()
        } else {
            (0..=u8::MAX).collect()
        });
    }
    let text = round_trip("narrow.rxa", &m);
    assert!(text.contains("const @c1: f8e4m3fn[256] = [0.0, 0.001953125,"), "{}", &text[..200]);
    assert!(text.contains("448.0, nan, -0.0,"));
}

#[test]
fn narrow_float_literals_round_and_refuse_what_does_not_fit() {
    let bytes = |src: &str| match assemble_unverified(src, "t.rxa") {
        Ok(m) => match &m.consts[ConstId(0)].data {
            ConstData::Bytes(b) => Ok(b.to_vec()),
            other => panic!("{other:?}"),
        },
        Err(d) => Err(d.render()),
    };
    // Rounded once to nearest even: 0.3 is 0.3125 in E4M3FN, 1 + 2^-8 is 1 in bf16.
    assert_eq!(bytes("const @a: f8e4m3fn[3] = [0.3, -448, nan]\n").unwrap(), [0x2a, 0xfe, 0x7f]);
    assert_eq!(bytes("const @a: bf16[1] = [1.00390625]\n").unwrap(), [0x80, 0x3f]);
    assert_eq!(bytes("const @a: f8e5m2[2] = [-inf, nan(0x1)]\n").unwrap(), [0xfc, 0x7d]);
    assert_eq!(bytes("const @a: f8e8m0[2] = [1.0, 0.125]\n").unwrap(), [127, 124]);
    assert!(bytes("const @a: f8e4m3fn[1] = [500.0]\n").unwrap_err().contains("out of range for f8e4m3fn"));
    assert!(bytes("const @a: f8e4m3fnuz[1] = [nan(0x1)]\n").unwrap_err().contains("no NaN payloads"));
    assert!(bytes("const @a: f8e8m0[1] = [-2.0]\n").unwrap_err().contains("positive"));
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
    let f = &mut m.funcs[FuncId(0)];
    // Register 0 named like register 1's generated name; 1 unnamed; 2 and 3 clash; 4 unprintable.
    f.debug.reg_names = ["r1", "", "dup", "dup", "a b"].into_iter().collect();
    // Labels: one unprintable, one past the end, one duplicated name.
    f.debug.labels = vec![(3, "not a label".into()), (5, "x".into()), (9, "x".into()), (99, "gone".into())];
    m.name = "weird name\n".into();
    let out = disassemble(&m);
    let back = assemble(&out, "odd.rxa").unwrap_or_else(|d| panic!("{}\n{out}", d.render()));
    assert_eq!(stripped(&m), stripped(&back), "{out}");
    assert_eq!(back.name, "weird name\n");
    insta::assert_snapshot!("odd_debug_names", out);
}

#[test]
fn kernels_round_trip() {
    let (path, text) = program("kernels.rxa");
    let (m, map) =
        assemble_with_map(&text, &path, Path::new(&path).parent()).unwrap_or_else(|d| panic!("{}", d.render()));
    // Declaration order; the file form is embedded.
    let names: Vec<&str> = m.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["scale", "saxpy"]);
    assert_eq!(m.kernels[0].entry, "scale");
    assert_eq!(
        m.kernels[0].source,
        "__kernel void scale(__global float* x, float k) {\n\tx[get_global_id(0)] *= k; /* \"\\\" */\n}"
    );
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/saxpy.cl");
    assert_eq!(m.kernels[1].source, std::fs::read_to_string(file).expect("saxpy.cl"));
    let f = &m.funcs[FuncId(0)];
    let calls: Vec<(u32, u32, u8, u16)> = f
        .code
        .iter()
        .filter_map(|i| match *i {
            Instr::CallKernel { kernel, list, ndims, nargs } => Some((kernel, list, ndims, nargs)),
            _ => None,
        })
        .collect();
    assert_eq!(calls.iter().map(|c| (c.0, c.2, c.3)).collect::<Vec<_>>(), [(0, 1, 2), (1, 2, 4), (0, 3, 2)]);
    // Arguments then global sizes.
    let (_, list, ndims, nargs) = calls[1];
    let args = f.arg_slice(list, nargs as usize + ndims as usize).expect("list");
    assert_eq!(args[0].kind(), ArgKind::Reg(Reg(0)));
    assert_eq!(args[2].kind(), ArgKind::Lit(1));
    assert_eq!(m.literals[1], Literal::Float(0.5));
    assert_eq!(args[4].kind(), ArgKind::Reg(Reg(2)));
    assert!(matches!(args[5].kind(), ArgKind::Imm(1)));
    // Operand spans: arguments, then dims.
    let spans: Vec<&str> = map.funcs[FuncId(0)].instrs[1].operands.iter().map(|s| &text[s.range()]).collect();
    assert_eq!(spans, ["%x", "%y", "0.5", "%n", "%n", "1"]);
    let out = round_trip(&path, &m);
    assert!(out.contains("  call @cl.saxpy(%x, %y, 0.5, %n) global [%n, 1]\n"), "{out}");
    assert_eq!(disassemble(&assemble_unverified(&out, "elsewhere/k.rxa").expect("re-assembles")), out);
    insta::assert_snapshot!("kernels_disassembly", out);
}
