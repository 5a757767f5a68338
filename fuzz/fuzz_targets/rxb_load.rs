//! `cargo +nightly fuzz run rxb_load`: see `rxvm::fuzz::rxb_load` and docs/reliability.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rxvm::fuzz::rxb_load(data));
