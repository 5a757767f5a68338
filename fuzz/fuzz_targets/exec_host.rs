//! `cargo +nightly fuzz run exec_host`: see `rxvm::fuzz::exec_host` and docs/reliability.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rxvm::fuzz::exec_host(data));
