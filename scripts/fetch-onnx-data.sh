#!/usr/bin/env bash
# Fetches ONNX's own test data (not committed), idempotently:
# - the onnx==1.23.2 wheel's backend/test/data/{pytorch-converted,pytorch-operator,light,...}
#   under .cache/onnx/wheel/onnx/backend/test/data;
# - ONNX's node test suite (1,884 cases), which the wheel does not ship: generated from the
#   wheel's generators (onnx.backend.test.case.node.collect_testcases()) and written with
#   onnx.backend.test.cmd_tools' writer (generate_data) to .cache/onnx/node/<case>/, in the
#   layout of the pytorch-converted cases (model.onnx, test_data_set_N/{input,output}_K.pb).
#   It needs only onnx==1.23.2 and numpy, installed from PyPI into .cache/onnx/venv.
# Each part ends with a `.complete` marker and is skipped when the marker is there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="$root/.cache/onnx"
data="$cache/wheel/onnx/backend/test/data"
node="$cache/node"
mkdir -p "$cache"

if [ -f "$data/.complete" ]; then
  echo "ONNX test data: $data"
else
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
fi

if [ -f "$node/.complete" ]; then
  echo "ONNX node test suite: $node"
  exit 0
fi
venv="$cache/venv"
if ! "$venv/bin/python" -c 'import onnx, numpy; assert onnx.__version__ == "1.23.2"' >/dev/null 2>&1; then
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      (apt-get install -y -qq python3-venv >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq python3-venv; }) >/dev/null
    fi
  fi
  rm -rf "$venv"
  python3 -m venv "$venv"
  # The wheel fetched above serves onnx when it fits this Python; numpy is pinned so the
  # generated expected outputs do not move with numpy releases.
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --find-links "$cache" onnx==1.23.2 numpy==2.4.6
fi
tmp="$cache/node.tmp"
rm -rf "$tmp"
"$venv/bin/python" - "$tmp" <<'PY'
import argparse, sys, types, warnings
import onnx.backend.test.case.node as node
import onnx.backend.test.cmd_tools as cmd_tools

warnings.simplefilter("ignore")  # the generators divide by zero on purpose (inf cases)
cases = node.collect_testcases(None)
# generate_data writes the cases model_test.collect_testcases() returns, each under
# <output>/<kind>/<name>: hand it the node cases (kind "node").
cmd_tools.model_test = types.SimpleNamespace(collect_testcases=lambda: cases)
cmd_tools.generate_data(argparse.Namespace(output=sys.argv[1]))
print(f"generated {len(cases)} node test cases")
PY
rm -rf "$node" && mv "$tmp/node" "$node" && rm -rf "$tmp"
touch "$node/.complete"
echo "ONNX node test suite: $node ($(ls "$node" | wc -l) cases)"
