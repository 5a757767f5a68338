#!/usr/bin/env bash
# Fetches ONNX's own test data from the onnx==1.23.2 wheel on PyPI (not committed):
# backend/test/data/{pytorch-converted,pytorch-operator,light,...} under
# .cache/onnx/wheel/onnx/backend/test/data. Idempotent.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="$root/.cache/onnx"
data="$cache/wheel/onnx/backend/test/data"
if [ -f "$data/.complete" ]; then
  echo "ONNX test data: $data"
  exit 0
fi
mkdir -p "$cache"
if ! ls "$cache"/onnx-1.23.2-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps --only-binary=:all: onnx==1.23.2 -d "$cache"
fi
wheel=$(ls "$cache"/onnx-1.23.2-*.whl | head -n 1)
command -v unzip >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq unzip >/dev/null; }
tmp="$cache/wheel.tmp"
rm -rf "$tmp" && mkdir -p "$tmp"
unzip -q "$wheel" 'onnx/backend/test/data/*' -d "$tmp"
rm -rf "$cache/wheel" && mv "$tmp" "$cache/wheel"
touch "$data/.complete"
echo "ONNX test data: $data ($(ls "$data/pytorch-converted" | wc -l) pytorch-converted, $(ls "$data/pytorch-operator" | wc -l) pytorch-operator cases)"
