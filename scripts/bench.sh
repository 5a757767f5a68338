#!/usr/bin/env bash
# Runs every criterion benchmark (benches/) and rewrites the generated tables of
# docs/performance.md from the medians. Sets up what the benchmarks need first: the
# OpenCL runtimes (Intel's CPU runtime for the OpenCL rows) and ONNX's model files.
#
#   bash scripts/bench.sh            # everything, about 12 minutes on 2 cores
#   bash scripts/bench.sh --quick    # criterion's quick mode: a smoke run, rough figures
#
# Extra arguments go to every benchmark binary (criterion's options).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-opencl.sh
# shellcheck source=scripts/opencl-env.sh
source scripts/opencl-env.sh
bash scripts/fetch-onnx-data.sh
cargo bench --locked --bench '*' -- --noplot "$@"
python3 scripts/bench_tables.py
