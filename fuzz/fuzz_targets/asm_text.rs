//! `cargo +nightly fuzz run asm_text`: see `rxvm_test_support::fuzz::asm_text` and docs/reliability.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rxvm_test_support::fuzz::asm_text(data));
