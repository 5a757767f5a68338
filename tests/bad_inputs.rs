//! Every file in `tests/bad/` is refused — by the lexer, the parser, the assembler, the
//! verifier or, when it assembles, when the VM loads it or at run time on the host device —
//! with the exact diagnostic in its snapshot. None may panic, and none may run successfully.
//!
//! A file may set the VM's limits as the command line would, in a comment line
//! `; limits: max-live-bytes=64M timeout=200ms max-instructions=N max-call-depth=N`
//! (for a program that, without them, would run for a long time or take all memory).

use std::path::Path;

/// The limits a `; limits:` line of `source` sets.
fn limits(source: &str) -> rxvm::vm::Limits {
    let mut l = rxvm::vm::Limits::default();
    for line in source.lines().filter_map(|l| l.trim().strip_prefix("; limits:")) {
        for kv in line.split_whitespace() {
            let (k, v) = kv.split_once('=').unwrap_or_else(|| panic!("`{kv}` in `; limits:` is not KEY=VALUE"));
            match k {
                "max-live-bytes" => l.max_live_bytes = Some(rxvm::vm::device::parse_size(v).expect("a byte count")),
                "timeout" => l.timeout = Some(rxvm::cli::parse_duration(v).expect("a time")),
                "max-instructions" => l.max_instructions = Some(v.parse().expect("a count")),
                "max-call-depth" => l.max_call_depth = v.parse().expect("a depth"),
                other => panic!("unknown limit `{other}` in `; limits:`"),
            }
        }
    }
    l
}

fn diagnose(rel: &str) -> String {
    let path = Path::new(rel);
    let program = match rxvm::session::load_program(path) {
        Ok(p) => p,
        Err(rxvm::session::Failure::Rendered(text)) => return text,
        Err(rxvm::session::Failure::Message(m)) => return format!("error: {m}\n"),
    };
    let source = program.source.clone();
    let limits = limits(&std::fs::read_to_string(path).expect("read the file"));
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
