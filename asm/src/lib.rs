//! rxvm-asm: the `.rxa` text assembler, its diagnostics, and the disassembler.
//!
//! ```
//! let src = "func @main() -> int {\n  %x = int 42\n  ret %x\n}\n";
//! let m = rxvm_asm::assemble(src, "answer.rxa").expect("assembles");
//! let text = rxvm_asm::disassemble(&m);
//! let again = rxvm_asm::assemble(&text, "answer.rxa").expect("re-assembles");
//! let main = m.func_by_name("main").expect("main");
//! assert_eq!(m.funcs[main].code, again.funcs[main].code);
//! ```
//!
//! The language is described in `docs/assembly.md`.

// No `unwrap`/`expect` outside tests: bad input (text, bytecode, models, arguments) must
// give an error, never a panic. An invariant that cannot fail is allowed where it is
// stated, with `#[allow]` and the reason.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
// `Diagnostic` is the error type of every fallible step; it is only built on the cold
// path, so boxing it to shrink `Result`s would add noise and no speed.
#![allow(clippy::result_large_err)]

pub mod assemble;
pub mod ast;
pub mod diag;
pub mod lexer;
pub mod parser;
pub mod printer;
pub mod syntax;

pub use diag::{emit_runtime_error, render_runtime_error, runtime_diagnostic, Diagnostic, Diagnostics};
pub use rxvm_vm::Module;

use assemble::SourceMap;
use std::path::Path;

/// Parses and assembles `source` without running the verifier; also returns where every
/// function, instruction and operand came from. `base_dir` resolves `file("...")` paths
/// (the current directory when `None`).
pub fn assemble_with_map(
    source: &str,
    file_name: &str,
    base_dir: Option<&Path>,
) -> Result<(Module, SourceMap), Diagnostics> {
    assemble_map_opt(source, file_name, base_dir, true)
}

fn assemble_map_opt(
    source: &str,
    file_name: &str,
    base_dir: Option<&Path>,
    want_map: bool,
) -> Result<(Module, SourceMap), Diagnostics> {
    let arena = bumpalo::Bump::new();
    let mut toks = Vec::new();
    let fail = |items: Vec<Diagnostic>| Diagnostics::new(file_name, source, items);
    let ast = parser::parse_with(source, &arena, &mut toks).map_err(|d| fail(vec![d]))?;
    assemble::assemble_ast_with(&ast, source, file_name, base_dir, want_map).map_err(fail)
}

fn assemble_in(source: &str, file_name: &str, base_dir: Option<&Path>) -> Result<Module, Diagnostics> {
    // Declaration by declaration first; the whole parse tree when that is not enough (see
    // `Streamed::Whole`). The source map is only needed to place a verifier error:
    // assemble without it, and (rarely) assemble again with it when the verifier refuses
    // the module.
    let module = match assemble::assemble_stream(source, file_name, base_dir) {
        assemble::Streamed::Module(m) => m,
        assemble::Streamed::Whole => assemble_map_opt(source, file_name, base_dir, false)?.0,
        assemble::Streamed::Error(d) => return Err(Diagnostics::new(file_name, source, vec![d])),
    };
    match rxvm_vm::verify_module(&module) {
        Ok(()) => Ok(module),
        Err(e) => {
            let (_, map) = assemble_with_map(source, file_name, base_dir)?;
            Err(Diagnostics::new(file_name, source, vec![map.verify_diagnostic(&e)]))
        }
    }
}

fn dir_of(file_name: &str) -> Option<&Path> {
    Path::new(file_name).parent().filter(|p| !p.as_os_str().is_empty())
}

/// Parses, assembles and verifies `source`. `file_name` is recorded in the module and
/// shown in diagnostics; `file("...")` constants are resolved relative to its directory.
pub fn assemble(source: &str, file_name: &str) -> Result<Module, Diagnostics> {
    assemble_in(source, file_name, dir_of(file_name))
}

/// As [`assemble()`] but without the verifier (for testing the verifier, or tools that
/// want to look at invalid programs).
pub fn assemble_unverified(source: &str, file_name: &str) -> Result<Module, Diagnostics> {
    assemble_with_map(source, file_name, dir_of(file_name)).map(|(m, _)| m)
}

/// Reads, assembles and verifies the file at `path`.
pub fn assemble_file(path: &Path) -> Result<Module, Diagnostics> {
    let file_name = path.display().to_string();
    let source = std::fs::read_to_string(path).map_err(|e| {
        Diagnostics::without_source(
            file_name.as_str(),
            vec![Diagnostic::new(0..0, format!("cannot read {file_name}: {e}"))],
        )
    })?;
    assemble_in(&source, &file_name, dir_of(&file_name))
}

/// Prints a module as `.rxa` text that assembles back to the same module.
pub fn disassemble(m: &Module) -> String {
    printer::print_module(m)
}
