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
    for f in &mut m.funcs {
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
