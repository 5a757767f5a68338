#!/usr/bin/env bash
# Fills fuzz/corpus/<target>/ with the seed inputs of every fuzz target (rxvm_test_support::fuzz::seeds):
# the examples, test programs and bad inputs as .rxa text and as .rxb (full and stripped),
# small ONNX models (built in, plus .cache/onnx test data up to 16 KiB when fetched by
# scripts/fetch-onnx-data.sh) and planning problems (generated, and cut from tests/data).
# Runs on stable Rust. Usage: bash scripts/fuzz-seeds.sh [OUT_DIR]   (default fuzz/corpus)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-fuzz/corpus}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
cargo run --quiet --release --manifest-path fuzz/Cargo.toml --example seeds -- "$out"
