//! `cargo +nightly fuzz run asm_text`: see `rxvm::fuzz::asm_text` and docs/reliability.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rxvm::fuzz::asm_text(data));
