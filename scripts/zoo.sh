#!/usr/bin/env bash
# The model zoo (not part of CI): exports today's models from PyTorch with both ONNX
# exporters (TorchScript and dynamo) and compares `rxvm run` with onnxruntime on the host,
# Intel and PoCL; prints the table of docs/models.md.
#
#   bash scripts/zoo.sh                  # the full-size set (vit_b_16, swin_t, ...)
#   bash scripts/zoo.sh --small          # the tiny configurations CI runs from tests/zoo/
#   bash scripts/zoo.sh --small --cases tests/zoo   # regenerate CI's cases (with onnxruntime's outputs)
#   bash scripts/zoo.sh --only gpt2 --table /tmp/t.md --textures
#
# It installs torch, torchvision, onnxruntime, onnx and onnxscript into .cache/zoo/venv
# (about 5 GB: PyPI's torch wheels pull CUDA libraries, which the CPU export ignores) and
# builds rxvm in release mode.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.cache/zoo/venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch, torchvision, onnxruntime, onnxscript' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch torchvision onnxruntime==1.32.* onnx==1.23.2 onnxscript numpy
fi
bash scripts/setup-opencl.sh >/dev/null
# shellcheck source=scripts/opencl-env.sh
source scripts/opencl-env.sh
cargo build --release --locked -q
exec "$venv/bin/python" scripts/zoo.py "$@"
