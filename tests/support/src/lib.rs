//! Test support for rxvm, kept out of the `rxvm` library: the root package's tests and
//! benchmarks use it as a dev-dependency, and the cargo-fuzz crate in `fuzz/` as a
//! dependency.
//!
//! * [`fuzz`]: one function per fuzz target, their seeds and dictionaries
//!   (`tests/fuzz_short.rs`, `tests/fuzz_smoke.rs`, `fuzz/fuzz_targets/*.rs`).
//! * [`onnx_build`]: small ONNX models built in code (the fuzz seeds, `tests/bad_onnx.rs`).
//! * [`devices`]: the host and the installed OpenCL platforms, required ones enforced.
//! * [`models`]: the nine model-zoo CNNs of the onnx wheel.
//! * [`graphs`]: small graphs built with the compiler's graph API.
//! * [`cli`]: running the `rxvm` binary in tests.

pub mod cli;
pub mod devices;
pub mod fuzz;
pub mod graphs;
pub mod models;
pub mod onnx_build;
