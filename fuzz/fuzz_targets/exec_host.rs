//! `cargo +nightly fuzz run exec_host`: see `rxvm_test_support::fuzz::exec_host` and docs/reliability.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rxvm_test_support::fuzz::exec_host(data));
