#!/usr/bin/env bash
# Runs every criterion benchmark (benches/), counts the interpreter's workloads with
# callgrind (scripts/callgrind-counts.sh) and rewrites the generated tables of
# docs/performance.md from the medians and the counts. Sets up what the benchmarks need
# first: the OpenCL runtimes (Intel's CPU runtime for the OpenCL rows), ONNX's model files
# and valgrind. Last, scripts/peers.sh times rxvm against onnxruntime and tract and
# rewrites that table too (it installs them from PyPI into .cache/peers/venv).
#
#   bash scripts/bench.sh            # everything, about 20 minutes on 2 cores
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
if ! command -v valgrind >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get install -y -qq valgrind || { apt-get update -qq && apt-get install -y -qq valgrind; }) >/dev/null
fi
if command -v valgrind >/dev/null 2>&1; then
  bash scripts/callgrind-counts.sh
else
  echo "bench: valgrind is missing; the tables get no callgrind column"
  rm -f target/callgrind/counts.tsv
fi
python3 scripts/bench_tables.py
bash scripts/peers.sh --update-docs
