//! `cargo +nightly fuzz run planner`: see `rxvm::fuzz::planner` and docs/reliability.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rxvm::fuzz::planner(data));
