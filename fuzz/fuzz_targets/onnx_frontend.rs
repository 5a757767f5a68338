//! `cargo +nightly fuzz run onnx_frontend`: see `rxvm_test_support::fuzz::onnx_frontend` and docs/reliability.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rxvm_test_support::fuzz::onnx_frontend(data));
