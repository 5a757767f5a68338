//! Every file in `tests/bad/` is refused — by the lexer, the parser, the assembler, the
//! verifier or, when it assembles, when the VM loads it or at run time on the host device —
//! with the exact diagnostic in its snapshot. None may panic, and none may run successfully.
//! A file runs under the limits its `; max-live-bytes: SIZE` comment lines set.

use std::path::Path;

fn diagnose(rel: &str) -> String {
    let path = Path::new(rel);
    let program = match rxvm::session::load_program(path) {
        Ok(p) => p,
        Err(rxvm::session::Failure::Rendered(text)) => return text,
        Err(rxvm::session::Failure::Message(m)) => return format!("error: {m}\n"),
    };
    let source = program.source.clone();
    let limits = limits(&std::fs::read_to_string(path).unwrap_or_default());
    let host = vec![rxvm::vm::memory::DeviceSpec::Host(rxvm::vm::DeviceCaps::host())];
    // Refused when the VM loads it (e.g. a constant it cannot allocate), as `rxvm run`
    // prints it.
    let mut vm = match rxvm::vm::Vm::with_devices_and_limits(std::sync::Arc::new(program.module), host, limits) {
        Ok(vm) => vm,
        Err(e) => return format!("[load]\n{}", rxvm::session::render_vm_error(&e, source.as_ref())),
    };
    match vm.invoke("main", &[]) {
        Ok(v) => panic!("{rel} ran successfully and returned {v:?}; a bad input must be refused"),
        Err(e) => format!("[run time]\n{}", rxvm::session::render_vm_error(&e, source.as_ref())),
    }
}

/// The limits a file asks to run under, in comment lines of the form `; max-live-bytes:
/// SIZE` (as `--max-live-bytes` takes it); the defaults otherwise.
fn limits(text: &str) -> rxvm::vm::Limits {
    let mut limits = rxvm::vm::Limits::default();
    for line in text.lines() {
        if let Some(v) = line.trim().strip_prefix("; max-live-bytes:") {
            let bytes = rxvm::vm::device::parse_size(v).unwrap_or_else(|| panic!("not a size: `{v}`"));
            limits.max_live_bytes = Some(bytes);
        }
    }
    limits
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
