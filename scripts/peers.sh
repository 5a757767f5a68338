#!/usr/bin/env bash
# rxvm against onnxruntime (and tract) on the nine model-zoo CNNs: sets up a venv at
# .cache/peers/venv (onnxruntime 1.32, onnx 1.23.2, numpy and tract from PyPI), the model
# files (scripts/fetch-onnx-data.sh) and a release build of rxvm, then runs
# scripts/peers.py, which times each engine in a process of its own, round after round,
# and prints the markdown table of docs/performance.md ("Speed against onnxruntime").
# Downloads packages: not part of the test suite (CI does not run it).
#
#   bash scripts/peers.sh                      # all nine models, print the table
#   bash scripts/peers.sh --update-docs        # and rewrite it in docs/performance.md
#   bash scripts/peers.sh --models squeezenet,resnet50 --reps 10 --cl-reps 2 --rounds 2
#   bash scripts/peers.sh --pocl --table peers.md
#
# The OpenCL columns need scripts/setup-opencl.sh's runtimes (peers.py sources
# scripts/opencl-env.sh for the rxvm runs on OpenCL only); without them they stay empty.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.cache/peers/venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check 'onnxruntime==1.32.*' 'onnx==1.23.2' numpy
if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check tract; then
  echo "peers: tract could not be installed from PyPI; its column stays empty" >&2
fi
bash scripts/fetch-onnx-data.sh
cargo build --release --locked
exec "$venv/bin/python" scripts/peers.py --rxvm "${CARGO_TARGET_DIR:-target}/release/rxvm" "$@"
