#!/usr/bin/env bash
# Sets up what the tests need and runs every check CI runs: formatting, clippy with
# warnings as errors, the whole test suite, and a build of the benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."

# Rust components the checks use (present on a rustup toolchain; added if missing).
if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --workspace --locked
echo "== cargo bench --no-run"
cargo bench --workspace --locked --no-run
