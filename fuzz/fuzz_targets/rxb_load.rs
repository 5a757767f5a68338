//! `cargo +nightly fuzz run rxb_load`: see `rxvm_test_support::fuzz::rxb_load` and docs/reliability.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rxvm_test_support::fuzz::rxb_load(data));
