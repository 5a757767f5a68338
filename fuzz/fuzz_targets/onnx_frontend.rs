//! `cargo +nightly fuzz run onnx_frontend`: see `rxvm::fuzz::onnx_frontend` and docs/reliability.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rxvm::fuzz::onnx_frontend(data));
