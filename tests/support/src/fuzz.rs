//! Fuzz targets: one function per input surface, shared by the cargo-fuzz crate in `fuzz/`
//! (one `fuzz_targets/*.rs` per function, each a one-line call) and by the short
//! deterministic runs of `tests/fuzz_short.rs` that are part of `cargo test`.
//!
//! | Function | Input | What it checks |
//! |----------|-------|----------------|
//! | [`asm_text`] | `.rxa` text | assembles or fails with a diagnostic that renders; an assembled module round-trips through `.rxb` and through the disassembler |
//! | [`rxb_load`] | `.rxb` bytes | loads (decode + verify) or fails with an error; a loaded module re-encodes to bytes that load to the same bytes, and its stripped disassembly re-assembles to it |
//! | [`exec_host`] | `.rxb` bytes (they start with `\0RXB`) or `.rxa` text | every verified program runs on the host device within instruction, call-depth and memory budgets; afterwards no storage is left alive |
//! | [`onnx_frontend`] | ONNX model bytes | reads, compiles (buffers, and textures for a target) and runs on the host, or fails with an error; a compiled module verifies, round-trips through `.rxb`, and fails at run time only for reasons the compiler cannot know ([`allowed_run_error`]) |
//! | [`planner`] | a planning problem (binary, MiniMalloc CSV, Glow trace or image requests) | every strategy, the best-of and the exact search give plans the independent checker ([`rxvm::plan::check`]) accepts, within the bounds the lower bound and the decision search prove |
//!
//! Each function must never panic. It returns normally when the input is refused with an
//! error, and it panics *only* when it detects a bug: a module that verified but does not
//! round-trip, a plan the checker rejects, a compiled module the verifier refuses or that
//! fails at run time for a reason the compiler should have caught, an "internal" compiler
//! error, a storage still alive after a run — or a panic inside the code under test, which
//! libFuzzer and the short runs report the same way.
//!
//! Budgets keep every input cheap: programs run with [`EXEC_LIMITS`] on a host device capped
//! by [`EXEC_CAPS`] (so a fuzzed program can neither loop forever nor take the machine's
//! memory), inputs are at most [`MAX_INPUT_BYTES`] per tensor, and the exact planner search
//! gets at most [`MAX_PLAN_BUDGET`] nodes. Text that mentions `file` is skipped: `file("...")`
//! constants and kernel sources read the file system (any path), so what such an input does
//! depends on the machine's files, not on the input; the regression inputs, which are
//! fixed and reviewed, are replayed with files read ([`Target::outcome_reading_files`]).
//!
//! `docs/reliability.md` tells how to run the fuzzers and what they found.

use rxvm::compile::{self, Options, Planner, Textures};
use rxvm::plan::{self, Buffer, Plan, Problem};
use rxvm_asm::{assemble, disassemble};
use rxvm_vm::builtins::Builtin;
use rxvm_vm::bytecode::Instr;
use rxvm_vm::types::{dense_bytes, DType, Dim, Type};
use rxvm_vm::{load_module, write_module, DeviceCaps, HostTensor, HostValue, Limits, Module, Vm};
use std::path::Path;
use std::sync::Arc;

/// The host device programs run on: 256 KiB of memory in all, constants included.
pub const EXEC_CAPS: &str = "mem=256k,max-alloc=256k";

/// Call depth, instructions per invocation and live bytes for fuzzed programs.
pub const EXEC_LIMITS: Limits = Limits {
    max_call_depth: 64,
    max_instructions: Some(10_000),
    max_live_bytes: Some(256 * 1024),
    timeout: None,
    interrupt: None,
};

/// Instructions per invocation for programs that call `@vm.print` (each print may format a
/// whole tensor, so fewer of them).
pub const PRINT_INSTRUCTIONS: u64 = 100;

/// Largest input tensor built for a parameter; functions that need more are not run.
pub const MAX_INPUT_BYTES: u64 = 64 * 1024;

/// At most this many functions of a module are invoked.
pub const MAX_FUNCS_RUN: usize = 4;

/// Search nodes per pool for the exact planner search (and its decision problem).
pub const MAX_PLAN_BUDGET: u64 = 500;

/// Bytes of constant subgraph outputs the compiler may evaluate for a fuzzed model, in all
/// (`Options::fold_budget`): 64 MiB, so that a run stays far below libFuzzer's 2 GB limit.
pub const MAX_FOLD_BUDGET: u64 = 64 << 20;

/// Buffers of a binary planning problem beyond this many are ignored (planner bugs show on
/// small problems; big ones only make each input slower).
pub const MAX_PLAN_BUFFERS: usize = 96;

/// The fuzz targets, by name (the names of `fuzz/fuzz_targets/*.rs` and of the corpus and
/// regression folders).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    AsmText,
    RxbLoad,
    ExecHost,
    OnnxFrontend,
    Planner,
}

impl Target {
    pub const ALL: [Target; 5] =
        [Target::AsmText, Target::RxbLoad, Target::ExecHost, Target::OnnxFrontend, Target::Planner];

    pub fn name(self) -> &'static str {
        match self {
            Target::AsmText => "asm_text",
            Target::RxbLoad => "rxb_load",
            Target::ExecHost => "exec_host",
            Target::OnnxFrontend => "onnx_frontend",
            Target::Planner => "planner",
        }
    }

    pub fn from_name(s: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == s)
    }

    /// Runs the target on one input.
    pub fn run(self, data: &[u8]) {
        let _ = self.outcome(data);
    }

    /// [`Target::outcome`], except that assembly text that mentions `file` is assembled too,
    /// reading the files it names: for the regression inputs, which are fixed and reviewed
    /// (finding F5 was about `file("/dev/zero")`).
    pub fn outcome_reading_files(self, data: &[u8]) -> String {
        match self {
            Target::AsmText => match std::str::from_utf8(data) {
                Ok(text) => assembled_outcome(text),
                Err(e) => format!("skipped: not UTF-8 ({e})"),
            },
            _ => self.outcome(data),
        }
    }

    /// Runs the target on one input and says how it ended: `ok`, or the errors that refused
    /// it, as the tools print them (the regression tests compare this with `NAME.expected`).
    pub fn outcome(self, data: &[u8]) -> String {
        match self {
            Target::AsmText => asm_text_outcome(data),
            Target::RxbLoad => rxb_load_outcome(data),
            Target::ExecHost => exec_host_outcome(data),
            Target::OnnxFrontend => onnx_outcome(data),
            Target::Planner => planner_outcome(data),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Assembler and loader

/// The input as assembly text: UTF-8 that does not mention `file` (see the module docs).
fn fuzz_text(data: &[u8]) -> Result<&str, String> {
    let text = std::str::from_utf8(data).map_err(|e| format!("skipped: not UTF-8 ({e})"))?;
    if text.contains("file") {
        return Err("skipped: mentions `file`".to_string());
    }
    Ok(text)
}

/// `.rxa` text: assembles (parse, assemble, verify) or fails with diagnostics that render;
/// an assembled module passes [`check_round_trips`].
pub fn asm_text(data: &[u8]) {
    let _ = asm_text_outcome(data);
}

fn asm_text_outcome(data: &[u8]) -> String {
    match fuzz_text(data) {
        Ok(text) => assembled_outcome(text),
        Err(e) => e,
    }
}

fn assembled_outcome(text: &str) -> String {
    match assemble(text, "fuzz.rxa") {
        Ok(m) => {
            check_round_trips(&m, true);
            "ok".to_string()
        }
        Err(d) => d.render(),
    }
}

/// `.rxb` bytes: loads (decode and verify) or fails with an error; a loaded module passes
/// [`check_round_trips`] without names (see there).
pub fn rxb_load(data: &[u8]) {
    let _ = rxb_load_outcome(data);
}

fn rxb_load_outcome(data: &[u8]) -> String {
    let outcome = match load_module(data) {
        Ok(m) => {
            check_round_trips(&m, false);
            return "ok".to_string();
        }
        Err(e) => e.to_string(),
    };
    // A mutant with bytes inserted or erased is refused by the header's file length alone;
    // with that length fixed it also exercises the sections.
    let n = rxvm_vm::binary::HEADER_LEN;
    if data.len() >= n && data[8..n] != (data.len() as u64).to_le_bytes() {
        let mut fixed = data.to_vec();
        fixed[8..n].copy_from_slice(&(data.len() as u64).to_le_bytes());
        if let Ok(m) = load_module(&fixed) {
            check_round_trips(&m, false);
        }
    }
    outcome
}

/// The module without source positions, which legitimately change across a disassembly.
fn without_locs(m: &Module) -> Module {
    let mut m = m.clone();
    m.source_file = None;
    for f in m.funcs.values_mut() {
        f.debug.locs.clear();
    }
    m
}

/// xorshift64*: a small fixed generator, so that the deterministic short runs and smoke
/// tests (`tests/fuzz_short.rs`, `tests/fuzz_smoke.rs`) try the same inputs every time and
/// a failure reproduces from its seed.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    #[allow(clippy::should_implement_trait)] // not an iterator: it never ends
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// What a verified module must survive:
///
/// * `write_module` then `load_module` succeeds and re-encodes to the same bytes;
/// * the disassembly of the stripped module assembles. For a module the assembler made
///   (`assembled`), to the same stripped bytes. For a loaded one, to a module of the same
///   shape (functions with the same names, signatures and code lengths; the same constants
///   and kernels): the text cannot keep what the assembler numbers itself (register numbers
///   in order of first use, unused registers), so the first re-assembly is canonical, and
///   it must then be a fixed point of disassembly and assembly;
/// * `assembled` only: the disassembly of the module itself (with its names) assembles to
///   the same bytes except for source positions, and printing that module again gives the
///   same text.
///
/// Panics (a bug) when one does not hold.
pub fn check_round_trips(m: &Module, assembled: bool) {
    let bytes = write_module(m);
    let back = match load_module(&bytes) {
        Ok(b) => b,
        Err(e) => panic!("a verified module does not load back from its own bytes: {e}"),
    };
    assert!(write_module(&back) == bytes, "a verified module re-encodes to different bytes after a load");

    let mut stripped = m.clone();
    stripped.strip_debug();
    let text = disassemble(&stripped);
    let again = reassemble(&text, "the disassembly of a verified (stripped) module");
    if assembled {
        assert!(
            write_module(&again) == write_module(&stripped),
            "the disassembly of a verified (stripped) module assembles to a different module:\n{text}"
        );
    } else {
        if let Some(diff) = shape_difference(&stripped, &again) {
            panic!("the disassembly of a verified module assembles to a module of another shape: {diff}\n{text}");
        }
        let text2 = disassemble(&again);
        let third = reassemble(&text2, "the disassembly of a re-assembled module");
        assert!(
            write_module(&third) == write_module(&again),
            "disassembly and assembly are not a fixed point on a re-assembled module:\n{text2}"
        );
    }

    if assembled {
        let text = disassemble(m);
        let m2 = match assemble(&text, "disasm.rxa") {
            Ok(a) => a,
            Err(d) => panic!("the disassembly of an assembled module does not assemble:\n{}\n{text}", d.render()),
        };
        assert!(
            write_module(&without_locs(m)) == write_module(&without_locs(&m2)),
            "the disassembly of an assembled module assembles to a different module:\n{text}"
        );
        assert!(disassemble(&m2) == text, "the disassembler is not a fixed point:\n{text}");
    }
}

/// Assembles disassembled text, which must succeed; returns the stripped module.
fn reassemble(text: &str, what: &str) -> Module {
    match assemble(text, "disasm.rxa") {
        Ok(mut a) => {
            a.strip_debug();
            a
        }
        Err(d) => panic!("{what} does not assemble:\n{}\n{text}", d.render()),
    }
}

/// How two modules differ in shape (see [`check_round_trips`]), if they do.
fn shape_difference(a: &Module, b: &Module) -> Option<String> {
    if a.funcs.len() != b.funcs.len() || a.consts.len() != b.consts.len() || a.kernels != b.kernels {
        return Some("different numbers of functions or constants, or different kernels".to_string());
    }
    for (f, g) in a.funcs.values().zip(b.funcs.values()) {
        if f.name != g.name || f.params != g.params || f.results != g.results || f.code.len() != g.code.len() {
            return Some(format!("function @{} differs in name, signature or length", f.name));
        }
    }
    for (c, d) in a.consts.values().zip(b.consts.values()) {
        if c.name != d.name || c.dtype != d.dtype || c.shape != d.shape {
            return Some(format!("constant @{} differs", c.name));
        }
    }
    None
}

// ---------------------------------------------------------------------------------------
// Execution

/// A program to run: `.rxb` bytes (they start with the magic `\0RXB`) are loaded, anything
/// else is assembled as text. Each of the first [`MAX_FUNCS_RUN`] functions whose
/// parameters can be built runs under [`EXEC_LIMITS`] on a host device with [`EXEC_CAPS`];
/// run-time errors are rendered as the CLI renders them. Afterwards no storage may be left
/// alive except the constants' (a leak or an accounting error is a bug).
pub fn exec_host(data: &[u8]) {
    let _ = exec_host_outcome(data);
}

fn exec_host_outcome(data: &[u8]) -> String {
    let (module, source) = if data.starts_with(&rxvm_vm::binary::MAGIC) {
        let m = match load_module(data) {
            Ok(m) => m,
            Err(e) => return format!("not run: {e}"),
        };
        // The disassembly stands in for a source file that no longer matches the module's
        // positions: rendering must cope with lines and columns that are out of range.
        let text = disassemble(&m);
        (m, ("fuzz.rxb.rxa".to_string(), text))
    } else {
        let text = match fuzz_text(data) {
            Ok(t) => t,
            Err(e) => return e,
        };
        match assemble(text, "fuzz.rxa") {
            Ok(m) => (m, ("fuzz.rxa".to_string(), text.to_string())),
            Err(d) => return format!("not run:\n{}", d.render()),
        }
    };
    outcome_of(run_bounded(module, Some(&source), DeviceCaps::host()))
}

/// `ok`, or the errors one per paragraph.
fn outcome_of(errors: Vec<String>) -> String {
    if errors.is_empty() {
        "ok".to_string()
    } else {
        errors.join("\n")
    }
}

/// Whether any function calls `@vm.print`.
fn prints(m: &Module) -> bool {
    let print = Builtin::Print as u32;
    m.funcs
        .values()
        .any(|f| f.code.iter().any(|i| matches!(i, Instr::CallBuiltin { builtin, .. } if builtin.0 == print)))
}

/// A host value for a parameter, or `None` when the type cannot be built within the
/// budget. Storage parameters are left to the VM (it sizes them from the code).
fn input_for(t: &Type, seed: u64) -> Option<Option<HostValue>> {
    Some(Some(match t {
        Type::Int => HostValue::Int(3),
        Type::Float => HostValue::Float(0.5),
        Type::Shape => HostValue::Shape(vec![2, 3]),
        Type::Storage => return Some(None),
        Type::AnyTensor => HostValue::Tensor(HostTensor::random(DType::F32, &[4], seed).ok()?),
        Type::Tensor { dtype, dims } => {
            let shape: Vec<i64> = dims.iter().map(|d| if let Dim::Known(v) = d { *v } else { 2 }).collect();
            if dense_bytes(*dtype, &shape)? > MAX_INPUT_BYTES {
                return None;
            }
            HostValue::Tensor(HostTensor::random(*dtype, &shape, seed).ok()?)
        }
    }))
}

/// Runs the first [`MAX_FUNCS_RUN`] functions of `module` whose inputs can be built, on one
/// host device with `caps` limited by [`EXEC_CAPS`], then checks that nothing is left alive.
/// Returns the run-time errors (rendered), for callers that judge them.
fn run_bounded(module: Module, source: Option<&(String, String)>, caps: DeviceCaps) -> Vec<String> {
    let Ok(caps) = caps.with_overrides(EXEC_CAPS) else { return Vec::new() };
    let mut limits = EXEC_LIMITS;
    if prints(&module) {
        limits.max_instructions = Some(PRINT_INSTRUCTIONS);
    }
    let nconsts = module.consts.len() as u64;
    let m = Arc::new(module);
    let Ok(mut vm) = Vm::new(m.clone(), vec![caps]) else { return Vec::new() };
    vm.capture_output();
    vm.limits = limits;
    let mut errors = Vec::new();
    for (k, f) in m.funcs.values().enumerate().take(MAX_FUNCS_RUN) {
        let args: Option<Vec<Option<HostValue>>> = f.params.iter().map(|t| input_for(t, k as u64 + 1)).collect();
        let Some(args) = args else { continue };
        let id = rxvm_vm::bytecode::FuncId(k as u32);
        let given: Vec<HostValue> = args.into_iter().flatten().collect();
        // Storage parameters: the VM sizes them from the code (`host_args`); where the code
        // does not fix the size, a 4 KiB storage.
        let needs = vm.storage_needs(id);
        let storages: Vec<Option<rxvm_vm::value::Value>> = f
            .params
            .iter()
            .enumerate()
            .map(|(i, t)| match (t, needs.get(i)) {
                (Type::Storage, Some(None) | None) => vm.new_storage(0, 4096).ok(),
                _ => None,
            })
            .collect();
        let result = vm.host_args(id, &given, &storages).and_then(|vals| vm.invoke_values(id, vals));
        match result {
            Ok(values) => {
                for v in &values {
                    let _ = rxvm_vm::interp::to_host(v);
                }
            }
            Err(e) => errors.push(rxvm::session::render_vm_error(&e, source)),
        }
        let _ = vm.take_output();
    }
    let st = vm.stats();
    assert!(
        st.live_bytes == 0 && st.live_storages == nconsts && st.live_views == nconsts,
        "storages or views outlive the run: {st:?} (the module has {nconsts} constants)"
    );
    errors
}

// ---------------------------------------------------------------------------------------
// ONNX

/// FNV-1a, to derive per-input choices (target, textures) from the bytes.
fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// ONNX model bytes: read into a graph, compiled twice (buffers for the host; textures for
/// a target picked from the bytes) and each compiled module run on the host with the
/// target's caps within the execution budgets. Errors are fine, except: a compiled module
/// that the verifier refuses or that does not round-trip through `.rxb`, a compile error
/// that says "internal", or a run-time error of a compiled model that
/// [`allowed_run_error`] does not allow — each is a bug.
pub fn onnx_frontend(data: &[u8]) {
    let _ = onnx_outcome(data);
}

fn onnx_outcome(data: &[u8]) -> String {
    outcome_of(onnx_compile_and_run(data))
}

/// [`onnx_frontend`], returning the errors: reading, then each compile's or its run's
/// (tools use them to look for compiled programs that fail when run).
pub fn onnx_compile_and_run(data: &[u8]) -> Vec<String> {
    let g = match rxvm::onnx::model_from_bytes(data, "fuzz.onnx") {
        Ok(g) => g,
        Err(e) => return vec![format!("read: {e}")],
    };
    let shapes: Vec<Vec<i64>> =
        g.inputs.iter().map(|i| i.dims.iter().map(|d| d.fixed().unwrap_or(1)).collect()).collect();
    let preset = DeviceCaps::PRESETS[(fnv(data) % DeviceCaps::PRESETS.len() as u64) as usize];
    let mut errors = Vec::new();
    for (textures, target) in [(Textures::None, "host"), (Textures::Auto, preset)] {
        let Some(target) = DeviceCaps::preset(target) else { continue };
        let opts = Options {
            planner: Planner::Best,
            textures,
            target: target.clone(),
            plan_budget: MAX_PLAN_BUDGET,
            fold_budget: MAX_FOLD_BUDGET,
            ..Options::default()
        };
        let c = match compile::compile(&g, &shapes, &opts) {
            Ok(c) => c,
            Err(e) => {
                assert!(!e.contains("internal"), "the compiler reports an internal error: {e}");
                errors.push(format!("compile ({textures:?}, {}): {e}", target.name));
                continue;
            }
        };
        if let Err(e) = rxvm_vm::verify_module(&c.module) {
            panic!("a compiled module fails verification: {e}\n{}", disassemble(&c.module));
        }
        let bytes = write_module(&c.module);
        match load_module(&bytes) {
            Ok(back) => assert!(write_module(&back) == bytes, "a compiled module re-encodes differently"),
            Err(e) => panic!("a compiled module does not load back from its bytes: {e}"),
        }
        let name = target.name.clone();
        let run_time_calls = run_time_shape_calls(&c.module);
        for e in run_bounded(c.module, None, target) {
            assert!(
                allowed_run_error(&e) || at_instruction(&e).is_some_and(|pc| run_time_calls.contains(&pc)),
                "a compiled model fails at run time with an error the compiler should have caught: {e}"
            );
            errors.push(format!("run ({textures:?}, {name}): {e}"));
        }
    }
    errors
}

/// The instructions of `@main` that allocate their outputs (`%y = call @onnx.X(...)`):
/// their shapes depend on input values, so they may fail on random inputs (a Reshape to a
/// random shape).
fn run_time_shape_calls(m: &rxvm_vm::Module) -> Vec<usize> {
    let Some(f) = m.func_by_name("main").and_then(|i| m.func(i)) else { return Vec::new() };
    let alloc = |i: &rxvm_vm::bytecode::Instr| matches!(i, rxvm_vm::bytecode::Instr::CallOpAlloc { .. });
    f.code.iter().enumerate().filter(|(_, i)| alloc(i)).map(|(pc, _)| pc).collect()
}

/// The instruction a rendered run-time error of `@main` names (`@main instruction N`, or
/// `(in @main, instruction N)` with a source map).
fn at_instruction(e: &str) -> Option<usize> {
    let (at, len) =
        ["@main instruction ", "@main, instruction "].iter().find_map(|m| e.find(m).map(|i| (i, m.len())))?;
    let rest = &e[at + len..];
    rest[..rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len())].parse().ok()
}

/// Whether a compiled model may fail at run time with this (rendered) error: a device or
/// budget limit ([`EXEC_CAPS`], [`EXEC_LIMITS`]), or an error that depends on the input
/// values (an index out of range, a division by zero; the inputs are random). Any other
/// run-time error of a model the compiler accepted is a check the compiler lacks
/// (findings F7 to F9 of `docs/reliability.md`).
pub fn allowed_run_error(e: &str) -> bool {
    const LIMITS: [&str; 5] = [
        "exceeds the largest allocation",
        "out of device memory",
        "live-bytes limit",
        "instruction limit",
        "call depth limit",
    ];
    LIMITS.iter().any(|m| e.contains(m))
        || (e.contains("index") && e.contains("out of range"))
        || e.contains("division by zero")
}

// ---------------------------------------------------------------------------------------
// Planner

/// Alignments a binary problem picks from (0 is refused by validation).
const ALIGNS: [u64; 16] = [1, 1, 2, 4, 8, 16, 32, 64, 128, 256, 3, 5, 12, 48, 1000, 0];

/// A planning problem from bytes. The first byte picks the form of the rest:
///
/// * `0`: binary: a flags byte (bits 0-1: the exact-search budget 0/10/100/[`MAX_PLAN_BUDGET`];
///   bits 2-4: sizes are shifted left by 0, 4, 8, 16, 24, 32, 48 or 56 bits), then 6 bytes
///   per buffer: size (u16, little-endian), alignment index into 16 values (low nibble) and
///   pool (bits 4-5), first step, lifetime length (255: an empty lifetime), and a spread
///   `s` (low 3 bits): steps are shifted left by `s`; at most [`MAX_PLAN_BUFFERS`] buffers;
/// * `1`: a MiniMalloc CSV instance (text);
/// * `2`: a Glow allocator trace (text); every model of it is planned;
/// * `3`: image-slot requests, 5 bytes each: width, height, texel size, first step, length.
///
/// Other first bytes are taken modulo 4.
pub fn planner(data: &[u8]) {
    let _ = planner_outcome(data);
}

fn planner_outcome(data: &[u8]) -> String {
    let Some((&mode, rest)) = data.split_first() else { return "empty".to_string() };
    match mode % 4 {
        0 => {
            let Some((&flags, rest)) = rest.split_first() else { return "no flags".to_string() };
            let budget = [0, 10, 100, MAX_PLAN_BUDGET][usize::from(flags & 3)];
            let shift = [0u32, 4, 8, 16, 24, 32, 48, 56][usize::from((flags >> 2) & 7)];
            let buffers = rest
                .chunks_exact(6)
                .take(MAX_PLAN_BUFFERS)
                .map(|c| {
                    let size = u64::from(u16::from_le_bytes([c[0], c[1]])) << shift;
                    let align = ALIGNS[usize::from(c[2] & 15)];
                    let pool = u32::from((c[2] >> 4) & 3);
                    let spread = u32::from(c[5] & 7);
                    let first = u32::from(c[3]) << spread;
                    let last = if c[4] == 255 { first.wrapping_sub(1) } else { first + (u32::from(c[4]) << spread) };
                    Buffer { size, align, first, last, pool }
                })
                .collect();
            check_problem(&Problem::new(buffers), budget)
        }
        1 => {
            let Ok(text) = std::str::from_utf8(rest) else { return "not UTF-8".to_string() };
            let p = match plan::trace::parse_minimalloc_csv(text) {
                Ok(p) => p,
                Err(e) => return e,
            };
            // Writing and reading back gives the same problem.
            if let Ok(csv) = plan::trace::write_minimalloc_csv(&p) {
                match plan::trace::parse_minimalloc_csv(&csv) {
                    Ok(q) => assert!(q.buffers == p.buffers, "a MiniMalloc CSV does not read back the same:\n{csv}"),
                    Err(e) => panic!("a written MiniMalloc CSV does not parse: {e}\n{csv}"),
                }
            }
            check_problem(&p, MAX_PLAN_BUDGET / 4)
        }
        2 => {
            let Ok(text) = std::str::from_utf8(rest) else { return "not UTF-8".to_string() };
            let models = match plan::trace::parse_glow_models(text) {
                Ok(m) => m,
                Err(e) => return e,
            };
            let outcomes: Vec<String> =
                models.iter().take(4).map(|m| check_problem(&m.problem, MAX_PLAN_BUDGET / 4)).collect();
            outcomes.join("\n")
        }
        _ => {
            check_images(rest);
            "ok".to_string()
        }
    }
}

/// Plans `p` every way there is and checks each plan with [`plan::check`] and against the
/// bounds (see [`planner`]). Panics on a bug; a problem that fails validation must make every
/// planner return an error. Returns `ok` or the validation error.
pub fn check_problem(p: &Problem, budget: u64) -> String {
    let validation = p.validate();
    let valid = validation.is_ok();
    let bounds = plan::lower_bound_per_pool(p);
    let bound_of = |pool: u32| bounds.iter().find(|b| b.0 == pool).map_or(0, |b| b.1);
    let checked = |what: &str, r: Result<Plan, String>| -> Option<Plan> {
        match r {
            Ok(plan) => {
                assert!(valid, "{what} planned a problem that fails validation: {p:?}");
                if let Err(e) = plan::check(p, &plan) {
                    panic!("{what} made a plan the checker refuses: {e}\nproblem: {p:?}\nplan: {plan:?}");
                }
                for &(pool, bytes) in &plan.pool_sizes {
                    assert!(bytes >= bound_of(pool), "{what}: pool {pool} has {bytes} bytes, below its lower bound");
                }
                Some(plan)
            }
            Err(e) => {
                assert!(!valid, "{what} failed on a valid problem: {e}\nproblem: {p:?}");
                None
            }
        }
    };
    let mut heuristic_total = u64::MAX;
    for (name, strategy) in plan::STRATEGIES {
        if let Some(plan) = checked(name, strategy(p)) {
            heuristic_total = heuristic_total.min(plan.arena_bytes());
        }
    }
    let best = checked("best_of", plan::best_of(p));
    if let Some(best) = &best {
        assert!(best.arena_bytes() == heuristic_total, "best_of is not the best strategy");
    }
    let _ = checked("no reuse", compile::run_planner(p, Planner::None, 0));
    let exact = plan::exact::plan_exact(p, budget);
    let exact_plan = exact.as_ref().ok().map(|r| r.plan.clone());
    if let (Some(plan), Ok(r), Some(best)) = (checked("exact", exact.clone().map(|r| r.plan)), &exact, &best) {
        for o in &r.pools {
            let heuristic = best.pool_size(o.pool).unwrap_or(0);
            assert!(plan.pool_size(o.pool) == Some(o.arena), "exact: pool {} reports a different arena", o.pool);
            assert!(o.arena <= heuristic, "exact: pool {} got worse than the heuristic", o.pool);
            assert!(o.lower_bound >= bound_of(o.pool), "exact: pool {}'s bound is below the peak", o.pool);
            assert!(o.arena >= o.lower_bound, "exact: pool {} is below its own lower bound", o.pool);
        }
    }
    let outcome = match validation {
        Ok(()) => "ok".to_string(),
        Err(e) => e,
    };
    if !valid || p.buffers.is_empty() {
        return outcome;
    }
    // The decision problem against what is known: every pool fits in the largest arena a
    // plan reached, and no pool fits below the largest peak of live bytes.
    let Some(exact_plan) = exact_plan else { return outcome };
    let widest = exact_plan.pool_sizes.iter().map(|&(_, b)| b).max().unwrap_or(0);
    match plan::exact::fit(p, widest, budget) {
        Ok(plan::exact::FitOutcome::Impossible) => {
            panic!("fit: capacity {widest} proved impossible, but a plan fits in it: {p:?}")
        }
        Ok(plan::exact::FitOutcome::Fits(offsets)) => {
            let pool_sizes = p.pools().into_iter().map(|pool| (pool, widest)).collect();
            let plan = Plan { offsets, pool_sizes, strategy: "fit" };
            if let Err(e) = plan::check(p, &plan) {
                panic!("fit made placements the checker refuses: {e}\nproblem: {p:?}");
            }
        }
        Ok(plan::exact::FitOutcome::BudgetExhausted) => {}
        Err(e) => panic!("fit failed on a valid problem: {e}"),
    }
    let peak = bounds.iter().map(|b| b.1).max().unwrap_or(0);
    if peak > 0 {
        if let Ok(plan::exact::FitOutcome::Fits(_)) = plan::exact::fit(p, peak - 1, budget) {
            panic!("fit: every pool fits below the peak of live bytes {peak}: {p:?}");
        }
    }
    outcome
}

/// Image-slot requests from bytes (see [`planner`]); the slots must cover their requests,
/// keep texel sizes apart and never hold two requests live at the same step.
fn check_images(data: &[u8]) {
    use plan::images::{plan_images, ImageRequest};
    let reqs: Vec<ImageRequest> = data
        .chunks_exact(5)
        .map(|c| ImageRequest {
            width: u64::from(c[0]) + 1,
            height: u64::from(c[1]) + 1,
            bytes_per_texel: [4, 8, 16][usize::from(c[2] % 3)],
            first: u32::from(c[3]),
            last: u32::from(c[3]) + u32::from(c[4] % 64),
        })
        .collect();
    let p = plan_images(&reqs);
    assert!(p.slot_of.len() == reqs.len(), "image plan: one slot per request");
    for (i, a) in reqs.iter().enumerate() {
        let Some(s) = p.slots.get(p.slot_of[i]) else { panic!("image plan: request {i} has no slot") };
        assert!(s.width >= a.width && s.height >= a.height, "image plan: slot does not cover request {i}");
        assert!(s.bytes_per_texel == a.bytes_per_texel, "image plan: texel sizes mixed in one slot");
        for (j, b) in reqs.iter().enumerate().skip(i + 1) {
            if p.slot_of[i] == p.slot_of[j] {
                assert!(a.last < b.first || b.last < a.first, "image plan: {i} and {j} share a slot while live");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Seeds

/// A libFuzzer dictionary for the text targets (`-dict=`): the assembly language's words
/// (mnemonics, keywords, dtypes, scopes), every builtin, operator and operator attribute
/// name, and a few numbers at the edges. Written by `scripts/fuzz-seeds.sh` to
/// `fuzz/corpus/rxa.dict`.
pub fn dictionary() -> String {
    use rxvm_vm::types::Scope;
    // The language's words come from its tables (rxvm_asm::syntax::keywords); then names,
    // punctuation and numbers at the edges.
    let mut words: Vec<String> = rxvm_asm::syntax::keywords().iter().map(|w| w.to_string()).collect();
    words.extend(
        [
            "->",
            "?",
            "%r0",
            "%x",
            "@main",
            "0",
            "1",
            "-1",
            "64",
            "4096",
            "65536",
            "4294967296",
            "9223372036854775807",
            "-9223372036854775808",
            "1e308",
            "-0.0",
            "nan",
            "inf",
        ]
        .iter()
        .map(|w| w.to_string()),
    );
    words.extend(Scope::ALL.iter().map(|s| format!("\"{}\"", s.name())));
    words.extend(rxvm_vm::builtins::BUILTINS.iter().map(|b| format!("@vm.{}", b.name)));
    for op in rxvm_vm::ops::OPS.iter() {
        words.push(format!("@onnx.{}", op.name));
        words.extend(op.attrs.iter().map(|a| a.name.to_string()));
    }
    words.sort();
    words.dedup();
    dict_file("rxvm assembly words for libFuzzer (-dict=); made by rxvm_test_support::fuzz::dictionary", words)
}

/// A libFuzzer dictionary for `onnx_frontend`: every operator and attribute name the VM
/// knows, and the ONNX names of the dtypes. Written to `fuzz/corpus/onnx.dict`.
pub fn onnx_dictionary() -> String {
    let mut words: Vec<String> =
        ["ai.onnx", "value", "Constant", "ConstantOfShape"].iter().map(|w| w.to_string()).collect();
    for op in rxvm_vm::ops::OPS.iter() {
        words.push(op.name.to_string());
        words.extend(op.attrs.iter().map(|a| a.name.to_string()));
    }
    words.sort();
    words.dedup();
    dict_file(
        "ONNX operator and attribute names for libFuzzer (-dict=); made by rxvm_test_support::fuzz::onnx_dictionary",
        words,
    )
}

fn dict_file(title: &str, words: Vec<String>) -> String {
    let mut out = format!("# {title}\n");
    for w in words {
        out.push('"');
        for c in w.chars() {
            match c {
                '"' | '\\' => {
                    out.push('\\');
                    out.push(c);
                }
                c => out.push(c),
            }
        }
        out.push_str("\"\n");
    }
    out
}

/// The seed inputs of `target`, named, from the repository at `root`: the examples, the test
/// programs and the bad inputs as text; their `.rxb` (full and stripped); small ONNX models
/// (a few built here, the malformed models of `tests/bad_onnx`, and the ONNX test data
/// under `.cache/onnx` when it was fetched, up to 16 KiB each); planning problems (generated, and cut from `tests/data`).
/// `scripts/fuzz-seeds.sh` writes them to `fuzz/corpus/<target>/`.
pub fn seeds(target: Target, root: &Path) -> Vec<(String, Vec<u8>)> {
    match target {
        Target::AsmText => text_seeds(root),
        Target::RxbLoad => rxb_seeds(root),
        Target::ExecHost => {
            let mut v = text_seeds(root);
            v.extend(rxb_seeds(root));
            v
        }
        Target::OnnxFrontend => onnx_seeds(root),
        Target::Planner => planner_seeds(root),
    }
}

fn sorted_files(dir: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    v.sort();
    v
}

fn text_seeds(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    for dir in ["examples", "tests/programs", "tests/bad"] {
        for p in sorted_files(&root.join(dir), "rxa") {
            if let (Ok(bytes), Some(name)) = (std::fs::read(&p), p.file_name()) {
                v.push((format!("{}-{}", dir.replace('/', "-"), name.to_string_lossy()), bytes));
            }
        }
    }
    v
}

fn rxb_seeds(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    for (name, text) in text_seeds(root) {
        let Ok(text) = String::from_utf8(text) else { continue };
        let Ok(mut m) = assemble(&text, &name) else { continue };
        let stem = name.trim_end_matches(".rxa");
        v.push((format!("{stem}.rxb"), write_module(&m)));
        m.strip_debug();
        v.push((format!("{stem}.stripped.rxb"), write_module(&m)));
    }
    v
}

fn onnx_seeds(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v = builtin_onnx_models();
    for p in sorted_files(&root.join("tests/bad_onnx"), "onnx") {
        if let (Ok(bytes), Some(name)) = (std::fs::read(&p), p.file_name()) {
            v.push((format!("bad-{}", name.to_string_lossy()), bytes));
        }
    }
    let data = root.join(".cache/onnx/wheel/onnx/backend/test/data");
    for suite in ["pytorch-operator", "pytorch-converted", "simple", "node"] {
        let mut cases: Vec<_> = std::fs::read_dir(data.join(suite))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        cases.sort();
        for case in cases {
            let model = case.join("model.onnx");
            let small = std::fs::metadata(&model).is_ok_and(|m| m.len() <= 16 * 1024);
            if let (true, Ok(bytes), Some(name)) = (small, std::fs::read(&model), case.file_name()) {
                v.push((format!("{suite}-{}.onnx", name.to_string_lossy()), bytes));
            }
        }
    }
    v
}

/// A few small models built in code, so the ONNX target has seeds without the test data.
pub fn builtin_onnx_models() -> Vec<(String, Vec<u8>)> {
    use crate::onnx_build::{f32_tensor, i64_tensor, int_attr, ints_attr, value_info, Encoding, F32};
    use onnx_protobuf::{AttributeProto, GraphProto, NodeProto, TensorProto, ValueInfoProto};
    let value = |name: &str, dims: &[i64]| value_info(name, F32, dims);
    let tensor = |name: &str, dims: &[i64], values: &[f32]| f32_tensor(name, dims, values, Encoding::Typed);
    let ints_tensor = |name: &str, values: &[i64]| i64_tensor(name, values, Encoding::Typed);
    let (ints, int) = (ints_attr, int_attr);
    fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
        let mut n = crate::onnx_build::node(op, inputs, outputs);
        n.attribute = attrs;
        n
    }
    let model = |nodes: Vec<NodeProto>, inits: Vec<TensorProto>, inputs: Vec<ValueInfoProto>, outputs: &[&str]| {
        let mut g = GraphProto::new();
        g.name = "g".into();
        g.node = nodes;
        g.initializer = inits;
        g.input = inputs;
        g.output = outputs.iter().map(|o| value(o, &[])).collect();
        crate::onnx_build::bytes(&crate::onnx_build::model(g))
    };
    let ramp = |n: usize| -> Vec<f32> { (0..n).map(|i| i as f32 * 0.25 - 1.0).collect() };
    vec![
        (
            "builtin-add.onnx".to_string(),
            model(
                vec![node("Add", &["x", "w"], &["y"], vec![])],
                vec![tensor("w", &[1, 4], &ramp(4))],
                vec![value("x", &[1, 4])],
                &["y"],
            ),
        ),
        (
            "builtin-conv-relu-pool.onnx".to_string(),
            model(
                vec![
                    node(
                        "Conv",
                        &["x", "w", "b"],
                        &["c"],
                        vec![ints("pads", &[1, 1, 1, 1]), ints("kernel_shape", &[3, 3])],
                    ),
                    node("Relu", &["c"], &["r"], vec![]),
                    node("MaxPool", &["r"], &["y"], vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])]),
                ],
                vec![tensor("w", &[2, 1, 3, 3], &ramp(18)), tensor("b", &[2], &[0.5, -0.5])],
                vec![value("x", &[1, 1, 4, 4])],
                &["y"],
            ),
        ),
        (
            "builtin-matmul-reshape-softmax.onnx".to_string(),
            model(
                vec![
                    node("MatMul", &["x", "w"], &["m"], vec![]),
                    node("Reshape", &["m", "s"], &["r"], vec![]),
                    node("Softmax", &["r"], &["y"], vec![int("axis", -1)]),
                ],
                vec![tensor("w", &[3, 2], &ramp(6)), ints_tensor("s", &[1, 4])],
                vec![value("x", &[2, 3])],
                &["y"],
            ),
        ),
        (
            "builtin-constant-of-shape.onnx".to_string(),
            model(
                vec![
                    node("ConstantOfShape", &["s"], &["c"], vec![]),
                    node("Mul", &["x", "c"], &["y"], vec![]),
                    node("Transpose", &["y"], &["t"], vec![ints("perm", &[1, 0])]),
                ],
                vec![ints_tensor("s", &[2, 3])],
                vec![value("x", &[2, 3])],
                &["t"],
            ),
        ),
    ]
}

fn planner_seeds(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    // Binary problems from a fixed generator (xorshift64*).
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    for (k, (n, flags)) in
        [(4usize, 0u8), (12, 3), (24, 1), (40, 2), (64, 3), (16, 3 | (2 << 2))].into_iter().enumerate()
    {
        let mut b = vec![0u8, flags];
        for _ in 0..n {
            let r = next().to_le_bytes();
            // size, align/pool (mostly pool 0, small alignments), first, length, spread 0.
            b.extend_from_slice(&[r[0], r[1] & 0x0f, r[2] & 0x17, r[3] % 32, r[4] % 16, 0]);
        }
        v.push((format!("binary-{k}.bin"), b));
    }
    for p in sorted_files(&root.join("tests/data/minimalloc"), "csv") {
        if let (Ok(text), Some(name)) = (std::fs::read_to_string(&p), p.file_name()) {
            let head: Vec<&str> = text.lines().take(40).collect();
            let mut b = vec![1u8];
            b.extend_from_slice(head.join("\n").as_bytes());
            v.push((format!("minimalloc-{}", name.to_string_lossy()), b));
        }
    }
    if let Ok(text) = std::fs::read_to_string(root.join("tests/data/glow/MemoryAllocatorTestModels.txt")) {
        // One seed per model, cut to its first 60 directives (the rest frees everything).
        let mut model: Vec<&str> = Vec::new();
        let mut k = 0;
        let mut flush = |model: &mut Vec<&str>, v: &mut Vec<(String, Vec<u8>)>| {
            if model.len() > 1 {
                let mut b = vec![2u8];
                b.extend_from_slice(glow_prefix(model).as_bytes());
                v.push((format!("glow-{k}.txt"), b));
                k += 1;
            }
            model.clear();
        };
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            if line.starts_with("MODEL") {
                flush(&mut model, &mut v);
            }
            model.push(line);
        }
        flush(&mut model, &mut v);
    }
    let mut images = vec![3u8];
    for i in 0..24u8 {
        images.extend_from_slice(&[i.wrapping_mul(37) % 64, i.wrapping_mul(11) % 32, i % 3, i, i % 5]);
    }
    v.push(("images.bin".to_string(), images));
    v
}

/// The first directives of a Glow model, with `FREE`s added for every buffer still live so
/// the trace stays valid.
fn glow_prefix(model: &[&str]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut live: Vec<&str> = Vec::new();
    for line in model.iter().take(60) {
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some("ALLOC"), Some(id)) => live.push(id),
            (Some("FREE"), Some(id)) => live.retain(|l| *l != id),
            (Some("MEM" | "EFF"), _) => continue,
            _ => {}
        }
        out.push(line.to_string());
    }
    out.extend(live.iter().map(|id| format!("FREE {id}")));
    out.join("\n") + "\n"
}
