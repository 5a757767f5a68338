#!/usr/bin/env bash
# Sets up what the tests need and runs every check CI runs: the three OpenCL runtimes
# (PoCL, Intel CPU, Oclgrind), valgrind, ONNX's test data (from the onnx wheel), formatting, clippy with warnings as errors, the whole test
# suite on the host and on each OpenCL platform, and one run of each benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."

# Rust components the checks use (present on a rustup toolchain; added if missing).
if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi

echo "== OpenCL runtimes"
bash scripts/setup-opencl.sh
# shellcheck source=scripts/opencl-env.sh
source scripts/opencl-env.sh
# In CI a missing platform fails the OpenCL tests instead of skipping them.
if [ "${CI:-}" = "true" ]; then
  export RXVM_REQUIRE_OPENCL="${RXVM_REQUIRE_OPENCL:-pocl,intel,oclgrind}"
fi

echo "== valgrind (tests/leaks.rs runs the host device under memcheck)"
if ! command -v valgrind >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get install -y -qq valgrind >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq valgrind; }) >/dev/null
  else
    echo "valgrind is missing: install it to run the leak check (tests/leaks.rs skips it)"
  fi
fi
if [ "${CI:-}" = "true" ]; then
  export RXVM_REQUIRE_VALGRIND=1
fi

echo "== ONNX test data"
bash scripts/fetch-onnx-data.sh
export RXVM_REQUIRE_ONNX_DATA=1

# A one-off build gains nothing from incremental caches; they add a gigabyte of disk.
if [ "${CI:-}" = "true" ]; then
  export CARGO_INCREMENTAL=0
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --workspace --locked
echo "== rxvm-vm without OpenCL (the host-only build: no opencl3 in it, host tests pass)"
if cargo tree -p rxvm-vm --no-default-features -e normal --locked | grep -q opencl3; then
  echo "opencl3 is in the dependency tree of rxvm-vm --no-default-features" >&2
  exit 1
fi
cargo clippy -p rxvm-vm --all-targets --no-default-features --locked -- -D warnings
cargo test -p rxvm-vm --no-default-features --locked
echo "== ONNX conformance per device (also asserted by tests/conformance.rs)"
onnx_data=.cache/onnx/wheel/onnx/backend/test/data
for device in host opencl:intel opencl:pocl; do
  printf '%-14s ' "$device"
  ./target/debug/rxvm conformance "$onnx_data/pytorch-converted" "$onnx_data/pytorch-operator" --device "$device" | tail -n 1
done
echo "== ONNX's node test suite on the host (asserted by tests/conformance.rs; docs/conformance.md)"
# It exits with 1 while cases fail: the groups of the summary and its last line are shown.
{ ./target/debug/rxvm conformance .cache/onnx/node --summary || true; } | grep -v '^    '
echo "== cargo bench -- --test (each benchmark once: they build, run and check their results)"
cargo bench --workspace --locked --bench '*' -- --test
