//! Malformed and invalid `.rxb` files are refused with the exact error in the snapshot:
//! corrupt containers (by the reader) and well-formed but unsafe code (by the verifier).

use rxvm::vm::builder::{ModuleBuilder, Operand};
use rxvm::vm::bytecode::{Arg, ConstId, FuncId, Instr, Label, Reg};
use rxvm::vm::module::{ConstData, Literal, Module};
use rxvm::vm::types::{DType, Dim, Scope, Type};
use rxvm::vm::{load_module, write_module, ModuleError};

/// The `.rxb` header's size: magic, version, reserved, file length.
const HEADER: usize = rxvm::vm::binary::HEADER_LEN;

/// `b` with its header's file length set to its length: for cases that change the length
/// on purpose, to reach the check they are about rather than the header's.
fn with_len(mut b: Vec<u8>) -> Vec<u8> {
    let n = (b.len() as u64).to_le_bytes();
    b[8..HEADER].copy_from_slice(&n);
    b
}

/// A valid module: a storage, a view, a fill, a loop and a call.
fn base() -> Module {
    let mut mb = ModuleBuilder::new("base");
    mb.constant("w", DType::F32, &[2], ConstData::Bytes(vec![0; 8].into()));
    let helper = mb.declare("helper", vec![Type::Int], vec![Type::Int]);
    let mut h = mb.function("helper", vec![Type::Int], vec![Type::Int]);
    let r = h.call_builtin("iadd", &[h.param(0).into(), Operand::Int(1)]).unwrap();
    h.ret(&[r[0].into()]);
    mb.add_function(h);
    let mut f = mb.function("main", vec![Type::Int], vec![Type::AnyTensor]);
    let s = f.alloc_storage(Operand::Int(64), Some(Operand::Int(64)), 0, Scope::Global);
    let t = f.alloc_tensor(s, Operand::Int(0), DType::F32, &[Operand::Int(4)], Scope::Global);
    f.call_builtin("fill", &[t.into(), Operand::Float(0.5)]).unwrap();
    let n = f.call(helper, 1, &[f.param(0).into()]);
    let l = f.label();
    let done = f.label();
    f.place(l);
    f.br_if(n[0], done, done);
    f.place(done);
    f.kill(s);
    f.ret(&[t.into()]);
    mb.add_function(f);
    mb.build().expect("the base module is valid")
}

fn refuse(bytes: &[u8]) -> String {
    match load_module(bytes) {
        Ok(_) => panic!("the corrupt module loaded"),
        Err(e) => e.to_string(),
    }
}

fn refuse_module(m: &Module) -> String {
    refuse(&write_module(m))
}

fn main_fn(m: &mut Module) -> &mut rxvm::vm::module::Function {
    &mut m.funcs[FuncId(1)]
}

#[test]
fn base_module_loads() {
    let m = base();
    assert_eq!(load_module(&write_module(&m)).unwrap(), m);
}

#[test]
fn corrupt_containers() {
    let good = write_module(&base());
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty file", vec![]),
        ("short header", good[..3].to_vec()),
        ("bad magic", [b"RXB\0".as_slice(), &good[4..]].concat()),
        ("unknown version", {
            let mut b = good.clone();
            b[4] = 9;
            b
        }),
        ("reserved header bits", {
            let mut b = good.clone();
            b[6] = 1;
            b
        }),
        ("a version-1 file (8-byte header, no file length)", {
            let mut b = [&good[..8], &good[HEADER..]].concat();
            b[4] = 1;
            b
        }),
        ("truncated in the header", good[..10].to_vec()),
        ("truncated in the middle", good[..good.len() / 2].to_vec()),
        ("truncated by one byte", good[..good.len() - 1].to_vec()),
        ("trailing garbage", [good.as_slice(), &[0x42]].concat()),
        ("a file length shorter than the header", {
            let mut b = good.clone();
            b[8..HEADER].copy_from_slice(&3u64.to_le_bytes());
            b
        }),
        ("trailing garbage section id", with_len([good.as_slice(), &[0x42]].concat())),
        ("a section header cut short", with_len([good.as_slice(), &[0x0b, 1, 0]].concat())),
    ];
    // The first section (strings) starts after the header: id, length, count.
    // The second section (meta) follows the strings section; renumber it as strings.
    let strings_len = u32::from_le_bytes(good[HEADER + 1..HEADER + 5].try_into().unwrap()) as usize;
    let mut b = good.clone();
    b[HEADER + 5 + strings_len] = 1;
    cases.push(("a section twice", b));
    let mut b = good.clone();
    b[HEADER] = 5;
    cases.push(("a section of the wrong kind", b));
    let mut b = good.clone();
    b[HEADER + 1..HEADER + 5].copy_from_slice(&u32::MAX.to_le_bytes());
    cases.push(("section length past the end", b));
    let mut b = good.clone();
    b[HEADER + 5..HEADER + 9].copy_from_slice(&0x4000_0000u32.to_le_bytes());
    cases.push(("string count larger than the file", b));
    let mut out = String::new();
    for (name, bytes) in cases {
        out.push_str(&format!("{name}:\n  {}\n", refuse(&bytes)));
    }
    insta::assert_snapshot!(out);
}

#[test]
fn corrupt_instructions() {
    let m = base();
    let good = write_module(&m);
    // Find main's first instruction word in the code section: it is the only alloc_storage.
    let word = Instr::AllocStorage {
        dst: Reg(1),
        size: Arg::imm(64).unwrap(),
        align: Arg::imm(64).unwrap(),
        device: 0,
        scope: Scope::Global,
    }
    .encode()
    .to_bytes();
    let at = good.windows(16).position(|w| w == word).expect("the word is in the file");
    let mut out = String::new();
    for (name, offset, value) in
        [("unknown opcode", 0usize, 0xeeu8), ("bad scope code", 2, 9), ("non-zero unused slot", 3, 1)]
    {
        let mut b = good.clone();
        b[at + offset] = value;
        out.push_str(&format!("{name}:\n  {}\n", refuse(&b)));
    }
    insta::assert_snapshot!(out);
}

#[test]
fn unsafe_code_is_refused_by_the_verifier() {
    type Mutation = (&'static str, fn(&mut Module));
    let cases: &[Mutation] = &[
        ("register out of range", |m| main_fn(m).code[0] = Instr::Kill { reg: Reg(99) }),
        ("branch target out of range", |m| {
            let f = main_fn(m);
            let i = f.code.iter().position(|i| matches!(i, Instr::BrIf { .. })).unwrap();
            f.code[i] = Instr::Br { target: Label(1000) };
        }),
        ("literal index out of range", |m| m.literals.clear()),
        ("constant index out of range", |m| {
            main_fn(m).code.insert(0, Instr::LoadConst { dst: Reg(0), konst: ConstId(5) })
        }),
        ("function index out of range", |m| {
            let f = main_fn(m);
            let i = f.code.iter().position(|i| matches!(i, Instr::Call { .. })).unwrap();
            if let Instr::Call { list, ndst, nargs, .. } = f.code[i] {
                f.code[i] = Instr::Call { func: FuncId(7), list, ndst, nargs };
            }
        }),
        ("falls off the end", |m| {
            main_fn(m).code.pop();
        }),
        ("no instructions", |m| main_fn(m).code.clear()),
        ("argument list out of range", |m| main_fn(m).args.truncate(2)),
        ("wrong operand kind", |m| {
            let f = main_fn(m);
            // alloc_tensor over the int parameter instead of the storage.
            if let Instr::AllocTensor { dst, args, dtype, scope, ndim, .. } = f.code[1] {
                f.code[1] = Instr::AllocTensor { dst, storage: Reg(0), args, dtype, scope, ndim };
            }
        }),
        ("use before definition", |m| main_fn(m).code.swap(0, 1)),
        ("use after kill", |m| {
            let f = main_fn(m);
            f.code.insert(1, Instr::Kill { reg: Reg(1) });
        }),
        ("call arity", |m| {
            let f = main_fn(m);
            let i = f.code.iter().position(|i| matches!(i, Instr::Call { .. })).unwrap();
            if let Instr::Call { func, list, ndst, .. } = f.code[i] {
                f.code[i] = Instr::Call { func, list, ndst, nargs: 0 };
            }
        }),
        ("constant data size", |m| m.consts[ConstId(0)].data = ConstData::Bytes(vec![0; 7].into())),
        ("int where a float is needed", |m| m.literals[0] = Literal::Int(3)),
        ("duplicate function names", |m| m.funcs[FuncId(0)].name = "main".into()),
        ("view past a constant storage", |m| {
            main_fn(m).args[0] = Arg::imm(1024).unwrap();
        }),
    ];
    let mut out = String::new();
    for (name, mutate) in cases {
        let mut m = base();
        mutate(&mut m);
        out.push_str(&format!("{name}:\n  {}\n", refuse_module(&m).replace('\n', "\n  ")));
    }
    insta::assert_snapshot!(out);
}

/// Found by `fuzz_smoke`: a `const` instruction whose index does not fit an operand
/// tripped a debug assertion in the verifier instead of being refused.
#[test]
fn huge_constant_index_is_refused() {
    let mut m = base();
    main_fn(&mut m).code.insert(0, Instr::LoadConst { dst: Reg(0), konst: ConstId(u32::MAX) });
    let e = refuse_module(&m);
    assert!(e.contains("constant 4294967295 is out of range: the module has 1 constants"), "{e}");
}

/// Found by `fuzz_smoke` (the process was killed for memory): a corrupt register count made
/// the verifier and the interpreter allocate per-register state for a billion registers.
#[test]
fn absurd_register_counts_are_refused() {
    let mut m = base();
    main_fn(&mut m).num_regs = 1_000_000_000;
    let e = refuse_module(&m);
    assert!(e.contains("declares 1000000000 registers, but its code can name at most"), "{e}");
}

/// A model whose input `%x: f32[1, 4]` is placed in its storage parameter at byte 64, and a
/// `@main` that calls it with that view.
fn placed() -> Module {
    let mut mb = ModuleBuilder::new("placed");
    let x_ty = Type::Tensor { dtype: DType::F32, dims: vec![Dim::Known(1), Dim::Known(4)] };
    let model = mb.declare("model", vec![x_ty.clone(), Type::Storage], vec![Type::Float]);
    let mut f = mb.function("model", vec![x_ty, Type::Storage], vec![Type::Float]);
    f.place_param(0, 1, 64);
    let s = f.call_builtin("sum", &[f.param(0).into()]).unwrap();
    f.ret(&[s[0].into()]);
    mb.add_function(f);
    let mut f = mb.function("main", vec![], vec![Type::Float]);
    let st = f.alloc_storage(Operand::Int(80), None, 0, Scope::Global);
    let x = f.alloc_tensor(st, Operand::Int(64), DType::F32, &[Operand::Int(1), Operand::Int(4)], Scope::Global);
    let r = f.call(model, 1, &[x.into(), st.into()]);
    f.ret(&[r[0].into()]);
    mb.add_function(f);
    mb.build().expect("the placed module is valid")
}

/// The sections of an encoded module: (id, offset of the section header, payload length).
fn sections(b: &[u8]) -> Vec<(u8, usize, usize)> {
    let mut out = Vec::new();
    let mut at = HEADER;
    while at < b.len() {
        let len = u32::from_le_bytes(b[at + 1..at + 5].try_into().unwrap()) as usize;
        out.push((b[at], at, len));
        at += 5 + len;
    }
    out
}

const PLACEMENTS: u8 = 11;

#[test]
fn placements_round_trip_and_are_omitted_when_absent() {
    let m = placed();
    let bytes = write_module(&m);
    let back = load_module(&bytes).unwrap();
    assert_eq!(back, m);
    assert_eq!(back.funcs[FuncId(0)].placements, m.funcs[FuncId(0)].placements);
    assert_eq!(back.funcs[FuncId(0)].placement(0).map(|p| (p.storage, p.offset)), Some((1, 64)));
    let ids: Vec<u8> = sections(&bytes).iter().map(|s| s.0).collect();
    assert_eq!(ids.last(), Some(&PLACEMENTS), "{ids:?}");
    // Without placements the section is not written: existing files stay byte-identical.
    assert!(sections(&write_module(&base())).iter().all(|s| s.0 != PLACEMENTS));
}

#[test]
fn corrupt_placements() {
    let good = write_module(&placed());
    let &(_, at, len) = sections(&good).iter().find(|s| s.0 == PLACEMENTS).expect("a Placements section");
    assert_eq!(at + 5 + len, good.len(), "Placements is the last section");
    assert_eq!(len, 4 + 8 + 16, "one function with one placement");
    let payload = at + 5;
    // Payload: function count, then [function index, placement count, (param, storage, offset)].
    let set_u32 = |b: &mut Vec<u8>, off: usize, v: u32| b[off..off + 4].copy_from_slice(&v.to_le_bytes());
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut b = good[..good.len() - 4].to_vec();
    set_u32(&mut b, at + 1, len as u32 - 4);
    cases.push(("a truncated placement", with_len(b)));
    let mut b = good.clone();
    set_u32(&mut b, payload + 8, 2);
    cases.push(("a placement count larger than the section", b));
    let mut b = good.clone();
    set_u32(&mut b, payload, 2);
    cases.push(("a function count larger than the section", b));
    let mut b = good.clone();
    set_u32(&mut b, payload + 4, 2);
    cases.push(("a function index out of range", b));
    let mut b = good.clone();
    set_u32(&mut b, payload + 8, 0);
    set_u32(&mut b, at + 1, 12);
    b.truncate(payload + 12);
    cases.push(("a function listed with no placements", with_len(b)));
    let mut b = good[..payload].to_vec();
    b[at + 1..at + 5].copy_from_slice(&(4u32 + 2 * 24).to_le_bytes());
    b.extend_from_slice(&2u32.to_le_bytes());
    for _ in 0..2 {
        b.extend_from_slice(&good[payload + 4..]);
    }
    let mut b = with_len(b);
    cases.push(("a function listed twice", b.clone()));
    set_u32(&mut b, payload + 4, 1);
    cases.push(("functions out of order", b));
    let mut b = good.clone();
    b.extend_from_slice(&[0, 0, 0]);
    set_u32(&mut b, at + 1, len as u32 + 3);
    cases.push(("trailing bytes in the section", with_len(b)));
    let mut out = String::new();
    for (name, bytes) in cases {
        out.push_str(&format!("{name}:\n  {}\n", refuse(&bytes)));
    }
    insta::assert_snapshot!(out);
}

#[test]
fn invalid_placements_are_refused_by_the_verifier() {
    type Mutation = (&'static str, fn(&mut Module));
    let cases: &[Mutation] = &[
        ("placed parameter out of range", |m| m.funcs[FuncId(0)].placements[0].param = 5),
        ("storage parameter out of range", |m| m.funcs[FuncId(0)].placements[0].storage = 9),
        ("storage parameter is not a storage", |m| {
            m.funcs[FuncId(0)].params[1] = Type::Int;
        }),
        ("placed in itself", |m| m.funcs[FuncId(0)].placements[0].storage = 0),
        ("a parameter placed twice", |m| {
            let p = m.funcs[FuncId(0)].placements[0];
            m.funcs[FuncId(0)].placements.push(rxvm::vm::module::Placement { offset: 128, ..p });
        }),
        ("placed parameter is not a tensor", |m| m.funcs[FuncId(0)].params[0] = Type::Int),
        ("placed parameter has an unknown dimension", |m| {
            m.funcs[FuncId(0)].params[0] = Type::Tensor { dtype: DType::F32, dims: vec![Dim::Any, Dim::Known(4)] };
        }),
        ("placed parameter of any shape", |m| m.funcs[FuncId(0)].params[0] = Type::AnyTensor),
        ("offset plus size overflows", |m| m.funcs[FuncId(0)].placements[0].offset = u64::MAX - 8),
        ("size overflows", |m| {
            m.funcs[FuncId(0)].params[0] =
                Type::Tensor { dtype: DType::F32, dims: vec![Dim::Known(1 << 62), Dim::Known(4)] };
        }),
    ];
    let mut out = String::new();
    for (name, mutate) in cases {
        let mut m = placed();
        mutate(&mut m);
        out.push_str(&format!("{name}:\n  {}\n", refuse_module(&m).replace('\n', "\n  ")));
    }
    insta::assert_snapshot!(out);
}

/// Real `.rxb` files with every optional section between them: debug info (Names, Spans),
/// constants, operator attributes, a user kernel and placements.
fn real_files() -> Vec<(&'static str, Vec<u8>)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![("base (built in code, no debug info)", write_module(&base()))];
    out.push(("placed (built in code, placements)", write_module(&placed())));
    for f in ["tests/programs/placement.rxa", "examples/texture_cnn.rxa", "examples/user_kernel.rxa"] {
        let mut m = rxvm::asm::assemble_file(&root.join(f)).unwrap_or_else(|e| panic!("{f}: {}", e.render()));
        // The file's name as the repository has it, so that the bytes (and the section
        // offsets in the snapshot) do not depend on where the checkout is.
        m.source_file = Some(f.to_string());
        out.push((f, write_module(&m)));
    }
    out
}

/// Every prefix of a real `.rxb` is refused by the reader (never loaded, never refused by
/// the verifier as if it were whole) with "truncated" at the byte where the file ends;
/// before format version 2, a file cut between two sections loaded without the later ones
/// (placements, kernels, attributes lost).
#[test]
fn every_prefix_of_a_real_file_is_refused_as_truncated() {
    let mut boundaries = String::new();
    for (name, good) in real_files() {
        load_module(&good).unwrap_or_else(|e| panic!("{name}: {e}"));
        let ends: Vec<usize> = sections(&good).iter().map(|&(_, at, len)| at + 5 + len).collect();
        boundaries.push_str(&format!("{name} ({} bytes, sections end at {ends:?}):\n", good.len()));
        for n in 0..good.len() {
            let e = match load_module(&good[..n]) {
                Ok(_) => panic!("{name}: the {n}-byte prefix loaded"),
                Err(ModuleError::Verify(e)) => panic!("{name}: the {n}-byte prefix was decoded: {e}"),
                Err(ModuleError::Load(e)) => e,
            };
            assert_eq!(e.offset, n, "{name}, {n}-byte prefix: {e}");
            assert!(n == 0 || e.message.starts_with("truncated: "), "{name}, {n}-byte prefix: {e}");
            // One line per prefix that ends a section or the header: the cuts that loaded.
            if n == HEADER || ends.contains(&n) {
                boundaries.push_str(&format!("  {n}: {e}\n"));
            }
        }
    }
    insta::assert_snapshot!(boundaries);
}

/// Verifier errors on a `.rxb` give the byte offset of what they refuse: the instruction
/// word, the function's record, or the record of the constant, kernel, attribute set or
/// placement; the offset is where that thing is in the file.
#[test]
fn verifier_errors_give_the_byte_offset() {
    fn located(m: &Module) -> (String, usize) {
        let bytes = write_module(m);
        let (read, map) = rxvm::vm::read_module_mapped(&bytes).unwrap();
        let at = map.locate(&rxvm::vm::verify_module(&read).unwrap_err()).expect("an offset");
        match load_module(&bytes) {
            Err(ModuleError::Verify(e)) => {
                let msg = e.to_string();
                assert!(msg.contains(&format!("at byte {at}")), "{msg}");
                (msg, at)
            }
            other => panic!("expected a verifier error, got {other:?}"),
        }
    }
    let mut out = String::new();
    let mut case = |name: &str, m: Module, expect_at: &dyn Fn(&[u8]) -> usize| {
        let (msg, at) = located(&m);
        assert_eq!(at, expect_at(&write_module(&m)), "{name}: {msg}");
        out.push_str(&format!("{name}:\n  {}\n", msg.replace('\n', "\n  ")));
    };
    // An instruction: main's `kill`, found by its word in the Code section.
    let mut m = base();
    let pc = main_fn(&mut m).code.iter().position(|i| matches!(i, Instr::Kill { .. })).unwrap();
    main_fn(&mut m).code[pc] = Instr::Kill { reg: Reg(99) };
    let word = Instr::Kill { reg: Reg(99) }.encode().to_bytes();
    case("register out of range", m, &|b| b.windows(16).position(|w| w == word).unwrap());
    // A function's record: its name's string index starts it (the Functions section holds
    // a count, then helper's record, then main's).
    let mut m = base();
    main_fn(&mut m).code.clear();
    main_fn(&mut m).args.clear();
    case("a function whose code is removed", m, &|b| {
        let &(_, at, _) = sections(b).iter().find(|s| s.0 == 5).unwrap();
        let helper_len = 4 + (4 + 1) + (4 + 1) + 4 + 4 + 4; // name, 1 int param, 1 int result, 3 counts
        at + 5 + 4 + helper_len
    });
    // A constant's record: the first record of the Constants section.
    let mut m = base();
    m.consts[rxvm_vm::bytecode::ConstId(0)].data = ConstData::Fill(0.5);
    m.consts[rxvm_vm::bytecode::ConstId(0)].dtype = DType::I8;
    case("a fill value that is not an i8", m, &|b| {
        let &(_, at, _) = sections(b).iter().find(|s| s.0 == 4).unwrap();
        at + 5 + 4
    });
    // A placement's record: after the function count, index and placement count.
    let mut m = placed();
    m.funcs[rxvm_vm::bytecode::FuncId(0)].placements[0].storage = 9;
    case("a placement in a parameter out of range", m, &|b| {
        let &(_, at, _) = sections(b).iter().find(|s| s.0 == PLACEMENTS).unwrap();
        at + 5 + 12
    });
    insta::assert_snapshot!(out);
}

/// Constants of awkward sizes, bytes and fills, for the data-alignment tests.
fn odd_constants() -> Module {
    let mut mb = ModuleBuilder::new("odd");
    mb.constant("a", DType::U8, &[3], ConstData::Bytes(vec![1, 2, 3].into()));
    mb.constant("b", DType::F32, &[3], ConstData::Bytes([1.5f32, -2.0, 0.25].map(f32::to_le_bytes).concat().into()));
    mb.constant("c", DType::F32, &[4], ConstData::Fill(0.5));
    mb.constant("d", DType::F64, &[2], ConstData::Bytes([7.0f64, 8.0].map(f64::to_le_bytes).concat().into()));
    mb.constant("e", DType::F32, &[0], ConstData::Bytes(Vec::new().into()));
    let mut f = mb.function("main", vec![], vec![Type::Int]);
    let n = f.call_builtin("iadd", &[Operand::Int(1), Operand::Int(2)]).unwrap();
    f.ret(&[n[0].into()]);
    mb.add_function(f);
    mb.build().expect("valid")
}

/// Each constant's data starts at a multiple of 64 bytes in the file, after zero padding,
/// so a mapped file's constants are aligned for every dtype and the host's vector loads; a
/// module read from shared bytes points into them instead of copying.
#[test]
fn constant_data_is_aligned_in_the_file_and_shared_when_mapped() {
    let m = odd_constants();
    let file = rxvm::vm::module::Bytes::from(write_module(&m));
    let (shared, _) = rxvm::vm::read_module_shared(&file).expect("reads");
    assert_eq!(shared, m);
    assert_eq!(load_module(&file).unwrap(), m);
    let range = file.as_ptr() as usize..file.as_ptr() as usize + file.len();
    let mut seen = 0;
    for c in shared.consts.values() {
        let ConstData::Bytes(b) = &c.data else { continue };
        if b.is_empty() {
            continue;
        }
        let at = b.as_ptr() as usize;
        assert!(range.contains(&at), "@{} was copied out of the file", c.name);
        let offset = at - range.start;
        assert_eq!(offset % rxvm::vm::binary::CONST_DATA_ALIGN, 0, "@{} at byte {offset}", c.name);
        // The pad-length byte, then that many zeros, come right before the data.
        let pad = (0..64).find(|&p| file[offset - p - 1] as usize == p).expect("a pad length byte");
        assert!(file[offset - pad..offset].iter().all(|&z| z == 0), "@{}'s padding", c.name);
        seen += 1;
    }
    assert_eq!(seen, 3);
}

#[test]
fn corrupt_constant_padding_is_refused() {
    let good = write_module(&odd_constants());
    let (m, map) = rxvm::vm::read_module_mapped(&good).unwrap();
    // @a's record: name, dtype, rank, one dim, tag, length, then its pad length byte.
    let a = map.consts[0];
    assert_eq!(m.consts[ConstId(0)].name, "a");
    let tag = a + 4 + 1 + 1 + 8;
    let pad_at = tag + 1 + 8;
    assert_eq!(good[tag], 2);
    let pad = good[pad_at] as usize;
    assert!(pad > 0, "the test needs padding to corrupt");
    let mut out = String::new();
    let mut case = |name: &str, edit: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        edit(&mut b);
        out.push_str(&format!("{name}:\n  {}\n", refuse(&b)));
    };
    case("padding byte not zero", &|b| b[pad_at + 1] = 0xff);
    case("padding longer than the alignment", &|b| b[pad_at] = 64);
    case("padding longer than was written", &|b| b[pad_at] = 63);
    case("unknown data tag", &|b| b[tag] = 3);
    insta::assert_snapshot!(out);
}
