#!/usr/bin/env bash
# The docs/performance.md table "Inputs in the arena": for each of the nine ONNX CNNs,
# device bytes with and without --inputs-in-arena on the host (plan and measured peak),
# and whether the outputs are bit-identical. Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-onnx-data.sh >/dev/null
cargo build --release --locked --quiet
light=.cache/onnx/wheel/onnx/backend/test/data/light
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
field() { python3 -c "import json,sys; print(json.load(open('$1'))['$2'])"; }
echo "| model | input B | arena B | device B (plan) | peak B (measured) | arena B, input in arena | device B (plan) | peak B (measured) | saved | outputs |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for m in bvlc_alexnet densenet121 inception_v1 inception_v2 resnet50 shufflenet squeezenet vgg19 zfnet512; do
  model="$light/light_$m.onnx"
  input=$(./target/release/rxvm run "$model" -i x=ramp 2>&1 | sed -n 's/.*its parameters are: %\([^,]*\).*/\1/p' || true)
  ./target/release/rxvm run "$model" -i "$input=ramp" -q --stats=json -o "$tmp/a.npy" >"$tmp/a.json"
  ./target/release/rxvm run "$model" -i "$input=ramp" -q --stats=json -o "$tmp/b.npy" --inputs-in-arena >"$tmp/b.json"
  same=$(cmp -s "$tmp/a.npy" "$tmp/b.npy" && echo "bit-identical" || echo "DIFFER")
  ib=$(field "$tmp/a.json" input_bytes)
  a1=$(field "$tmp/a.json" arena_bytes); d1=$(field "$tmp/a.json" device_bytes); p1=$(field "$tmp/a.json" peak_bytes)
  a2=$(field "$tmp/b.json" arena_bytes); d2=$(field "$tmp/b.json" device_bytes); p2=$(field "$tmp/b.json" peak_bytes)
  saved=$(python3 -c "print(f'{$d1 - $d2:,} B ({100 * ($d1 - $d2) / $d1:.1f} %)')")
  g() { python3 -c "print(f'{$1:,}')"; }
  echo "| $m | $(g "$ib") | $(g "$a1") | $(g "$d1") | $(g "$p1") | $(g "$a2") | $(g "$d2") | $(g "$p2") | $saved | $same |"
done
