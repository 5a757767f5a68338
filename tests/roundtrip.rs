//! `asm -> disasm -> asm` gives byte-identical bytecode (names included; source positions
//! naturally differ and are compared separately) for every program in the repository.

use rxvm::asm::{assemble, assemble_file, disassemble};
use rxvm::vm::module::Module;
use rxvm::vm::write_module;
use std::path::{Path, PathBuf};

fn programs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in ["examples", "tests/programs", "tests/bad"] {
        for e in std::fs::read_dir(root.join(dir)).expect("dir exists") {
            let p = e.expect("entry").path();
            // Bad inputs that assemble (they fail at run time) are programs too.
            if p.extension().is_some_and(|x| x == "rxa") && (dir != "tests/bad" || assemble_file(&p).is_ok()) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The module without source positions, which legitimately change across a round trip.
fn without_locs(m: &Module) -> Module {
    let mut m = m.clone();
    m.source_file = None;
    for f in m.funcs.values_mut() {
        f.debug.locs.clear();
    }
    m
}

fn check_round_trip(name: &str, m1: &Module) {
    let text = disassemble(m1);
    let m2 = match assemble(&text, name) {
        Ok(m) => m,
        Err(d) => panic!("{name}: the disassembly does not assemble:\n{}\n{text}", d.render()),
    };
    let (mut s1, mut s2) = (m1.clone(), m2.clone());
    s1.strip_debug();
    s2.strip_debug();
    assert_eq!(write_module(&s1), write_module(&s2), "{name}: stripped bytecode differs\n{text}");
    assert_eq!(write_module(&without_locs(m1)), write_module(&without_locs(&m2)), "{name}: names differ\n{text}");
    // The printer is a fixed point: printing the re-assembled module gives the same text.
    assert_eq!(disassemble(&m2), text, "{name}: disassembly is not stable");
}

#[test]
fn every_program_round_trips() {
    let progs = programs();
    assert!(progs.len() >= 8, "found only {progs:?}");
    for p in &progs {
        let m = assemble_file(p).unwrap_or_else(|d| panic!("{}:\n{}", p.display(), d.render()));
        check_round_trip(&p.display().to_string(), &m);
    }
}

#[test]
fn stripped_modules_round_trip_with_generated_names() {
    for p in programs() {
        let mut m = assemble_file(&p).unwrap_or_else(|d| panic!("{}", d.render()));
        m.strip_debug();
        let text = disassemble(&m);
        let back = assemble(&text, "stripped.rxa").unwrap_or_else(|d| panic!("{}\n{text}", d.render()));
        let mut back_stripped = back.clone();
        back_stripped.strip_debug();
        assert_eq!(write_module(&m), write_module(&back_stripped), "{}", p.display());
    }
}

/// A parameter placement survives `asm -> rxb -> disasm -> asm`: the `.rxb` carries it,
/// the disassembly writes it back as `in %STORAGE at OFFSET`, and the reassembled module is
/// byte-identical.
#[test]
fn placements_round_trip_through_bytecode() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/placement.rxa");
    let m1 = assemble_file(&path).unwrap_or_else(|d| panic!("{}", d.render()));
    let model = &m1.funcs[m1.func_by_name("model").expect("@model")];
    let p = model.placement(0).copied().expect("%x is placed");
    assert_eq!((p.param, p.storage, p.offset), (0, 1, 4096));
    let bytes = write_module(&m1);
    let loaded = rxvm::vm::load_module(&bytes).expect("the module loads");
    assert_eq!(loaded, m1);
    let text = disassemble(&loaded);
    assert!(
        text.contains("func @model(%x: f32[1, 3, 4, 4] in %arena at 4096, %arena: storage) -> (f32[1, 10], float) {"),
        "{text}"
    );
    let m2 = assemble(&text, "placement.rxa").unwrap_or_else(|d| panic!("{}\n{text}", d.render()));
    assert_eq!(write_module(&without_locs(&m1)), write_module(&without_locs(&m2)));
    // Stripped: generated names, the same placement.
    let mut s = loaded.clone();
    s.strip_debug();
    let text = disassemble(&s);
    assert!(text.contains("(%r0: f32[1, 3, 4, 4] in %r1 at 4096, %r1: storage)"), "{text}");
    let mut back = assemble(&text, "stripped.rxa").unwrap_or_else(|d| panic!("{}\n{text}", d.render()));
    back.strip_debug();
    assert_eq!(write_module(&s), write_module(&back));
}
