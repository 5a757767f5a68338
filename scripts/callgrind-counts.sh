#!/usr/bin/env bash
# Counts the machine instructions the benchmarks' workloads execute, with callgrind: each
# workload of benches/counts.rs runs N and 2N times under `valgrind --tool=callgrind`,
# counting only inside the measured runs (not the set-up), and the difference of the two
# totals divided by N (and by the units one run is: VM instructions, triples, invocations,
# inferences or bytes of assembler input) is what one unit costs: what one run costs apart
# from the first.
# Unlike wall-clock medians the counts do not move with the machine's load or the code's
# layout, so two builds compare exactly.
#
#   bash scripts/callgrind-counts.sh                       # every workload, ~7 minutes
#   bash scripts/callgrind-counts.sh triple/host/image     # named workloads
#   N=1000 bash scripts/callgrind-counts.sh empty_invocation/by_id
#
# Prints a table and writes target/callgrind/counts.tsv, which scripts/bench_tables.py
# puts beside the medians in docs/performance.md. Needs valgrind; the `intel` triples need
# Intel's runtime (`source scripts/opencl-env.sh`), the models scripts/fetch-onnx-data.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "callgrind-counts: valgrind is not installed" >&2; exit 1; }

# The bench profile's binary: the code criterion times.
bin=$(cargo bench --locked --bench counts --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "counts" and m.get("executable"):
        print(m["executable"])')
[ -x "$bin" ] || { echo "callgrind-counts: could not build benches/counts.rs" >&2; exit 1; }

out=target/callgrind
mkdir -p "$out"
if [ $# -gt 0 ]; then
  list=$("$bin" --list | awk 'NR == FNR { want[$1] = 1; next } ($1 in want)' <(printf '%s\n' "$@") -)
  for w in "$@"; do
    grep -q "^$w " <<<"$list" || { echo "callgrind-counts: no workload $w ($bin --list)" >&2; exit 1; }
  done
else
  list=$("$bin" --list)
fi

# Total instructions of one callgrind run of `workload iterations`; its report line on stdout.
total() {
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*counts::measured_runs*' \
    --callgrind-out-file="$out/$3.out" "$bin" "$1" "$2" >"$out/$3.report" 2>"$out/$3.log" ||
    { echo "callgrind-counts: $1 failed:" >&2; tail -n 5 "$out/$3.log" >&2; exit 1; }
  sed -n 's/^totals: //p' "$out/$3.out"
}

tsv=$out/counts.tsv
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# Edits to the docs (bench.sh rewrites docs/performance.md) do not change what is counted.
[ -n "$(git status --porcelain --untracked-files=no -- . ':!docs' 2>/dev/null)" ] && commit="$commit+changes"
printf '# commit\t%s\n' "$commit" >"$tsv.new"
printf 'workload\tunit\tinstructions_per_unit\tvm_instructions_per_unit\n' >>"$tsv.new"
printf '%-30s %-12s %16s %16s\n' workload unit 'instr / unit' 'VM instr / unit'
while read -r workload iterations; do
  n=${N:-$iterations}
  skip=""
  case $workload in
    triple/intel/*) "$bin" "$workload" 1 >/dev/null 2>&1 || skip="no Intel OpenCL runtime" ;;
    model_overhead/*) [ -d .cache/onnx/wheel/onnx/backend/test/data/light ] || skip="no model data" ;;
  esac
  if [ -n "$skip" ]; then
    printf '%-30s skipped: %s\n' "$workload" "$skip"
    continue
  fi
  a=$(total "$workload" "$n" once)
  b=$(total "$workload" $((2 * n)) twice)
  # workload=... unit=... units_per_run=... instructions_per_run=... runs=...
  read -r unit units vm_instructions < <(sed -n 's/.* unit=\([^ ]*\) units_per_run=\([0-9]*\) instructions_per_run=\([0-9]*\).*/\1 \2 \3/p' "$out/twice.report")
  row=$(python3 -c "import sys
a, b, n, units, vm = map(int, sys.argv[1:])
per = (b - a) / (n * units)
print(f'{per:.1f}\t{vm / units:.4g}')" "$a" "$b" "$n" "$units" "$vm_instructions")
  printf '%s\t%s\t%s\n' "$workload" "$unit" "$row" >>"$tsv.new"
  printf '%-30s %-12s %16s %16s\n' "$workload" "$unit" ${row}
done <<<"$list"
mv "$tsv.new" "$tsv"
rm -f "$out"/once.* "$out"/twice.*
echo "written: $tsv"
