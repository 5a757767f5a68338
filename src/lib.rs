//! rxvm: the compiler (ONNX models to programs, with their memory plans), the memory
//! planner, the command line and the REPL.
//! The VM itself is the `rxvm-vm` crate, the assembler the `rxvm-asm` crate.

// Bad input must become an error, never a panic: `unwrap` and `expect` are refused outside
// tests (the few on internal invariants carry an `allow` that says why).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod bench;
pub mod cli;
pub mod compile;
pub mod conformance;
pub mod graph;
pub mod inputs;
pub mod npy;
pub mod onnx;
pub mod plan;
pub mod repl;
pub mod report;
pub mod session;
pub mod stats;

pub use rxvm_asm as asm;
pub use rxvm_vm as vm;

/// The Rust examples of `docs/compiler.md`, run as doctests so they cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../docs/compiler.md")]
pub struct CompilerDocs;

/// The Rust examples of `docs/memory.md` (pools, chaining), run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/memory.md")]
pub struct MemoryDocs;
