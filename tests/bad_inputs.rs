//! Every file in `tests/bad/` is refused — by the lexer, the parser, the assembler, the
//! verifier or, when it assembles, when the VM loads it or at run time on the host device —
//! with the exact diagnostic in its snapshot. None may panic, and none may run successfully.

use std::path::Path;

fn diagnose(rel: &str) -> String {
    let path = Path::new(rel);
    let program = match rxvm::session::load_program(path) {
        Ok(p) => p,
        Err(rxvm::session::Failure::Rendered(text)) => return text,
        Err(rxvm::session::Failure::Message(m)) => return format!("error: {m}\n"),
    };
    let source = program.source.clone();
    // Refused when the VM loads it (e.g. a constant it cannot allocate), as `rxvm run`
    // prints it.
    let mut vm = match rxvm::vm::Vm::host(std::sync::Arc::new(program.module)) {
        Ok(vm) => vm,
        Err(e) => return format!("[load]\n{}", rxvm::session::render_vm_error(&e, source.as_ref())),
    };
    match vm.invoke("main", &[]) {
        Ok(v) => panic!("{rel} ran successfully and returned {v:?}; a bad input must be refused"),
        Err(e) => format!("[run time]\n{}", rxvm::session::render_vm_error(&e, source.as_ref())),
    }
}

#[test]
fn bad_inputs_give_their_diagnostics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::env::set_current_dir(root).expect("cd to the package root");
    let mut count = 0;
    insta::glob!("bad/*.rxa", |path| {
        let rel = path.strip_prefix(root).expect("inside the package").to_string_lossy().replace('\\', "/");
        let text = diagnose(&rel);
        insta::assert_snapshot!(text);
        count += 1;
    });
    assert!(count >= 30, "expected at least 30 bad inputs, found {count}");
}
