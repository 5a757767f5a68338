//! `cargo +nightly fuzz run planner`: see `rxvm_test_support::fuzz::planner` and docs/reliability.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rxvm_test_support::fuzz::planner(data));
