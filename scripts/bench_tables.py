#!/usr/bin/env python3
"""Turns criterion's results (target/criterion/**/new/{benchmark,estimates}.json) into the
tables of docs/performance.md: the text between `<!-- bench:begin -->` and
`<!-- bench:end -->` is replaced. Run by scripts/bench.sh after `cargo bench`.

Every figure is criterion's median. The TVM references are the ones issue 9 quotes,
measured on this machine (Apache TVM 0.27 from PyPI, Relax VM, CPU, pooled allocator).
"""

import json
import os
import pathlib
import platform
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CRITERION = ROOT / "target" / "criterion"
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"

MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
          "shufflenet", "squeezenet", "vgg19", "zfnet512"]
# TVM default CPU build (untuned kernels), whole inference, median ms.
TVM_MODEL_MS = {"squeezenet": 123, "shufflenet": 29, "bvlc_alexnet": 586, "zfnet512": 1144,
                "inception_v1": 608, "inception_v2": 886, "densenet121": 1231,
                "resnet50": 1785, "vgg19": 9573}
# TVM's Relax VM with every kernel a no-op: per inference where measured, else 70-85 ns
# per instruction (its best, 70, is the reference used).
TVM_OVERHEAD_US = {"densenet121": 221, "resnet50": 33}
TVM_NS_PER_INSTR = 70


def load():
    out = {}
    for bj in CRITERION.glob("**/new/benchmark.json"):
        b = json.loads(bj.read_text())
        est = json.loads((bj.parent / "estimates.json").read_text())
        tp = b.get("throughput") or {}
        out[b["full_id"]] = {
            "median_ns": est["median"]["point_estimate"],
            "elements": tp.get("Elements"),
            "bytes": tp.get("Bytes") or tp.get("BytesDecimal"),
        }
    return out


def load_counts():
    """scripts/callgrind-counts.sh's results: workload -> instructions per unit, and the
    commit they were counted at (None when the file is missing)."""
    path = ROOT / "target" / "callgrind" / "counts.tsv"
    if not path.exists():
        return {}, None
    counts, commit = {}, None
    for line in path.read_text().splitlines():
        if line.startswith("# commit\t"):
            commit = line.split("\t", 1)[1]
        elif line and not line.startswith(("#", "workload\t")):
            workload, _unit, per_unit, _vm = line.split("\t")
            counts[workload] = float(per_unit)
    return counts, commit


def fmt_count(counts, key):
    if key not in counts:
        return "–"
    n = counts[key]
    return f"{n:,.1f}" if n < 100 else f"{n:,.0f}"


def fmt_ns(ns):
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.1f} ns"


def verdict(ok):
    return "met" if ok else "**missed**"


def machine():
    cpu = "unknown CPU"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                cpu = line.split(":", 1)[1].strip()
    except OSError:
        pass
    rustc = subprocess.run(["rustc", "-V"], capture_output=True, text=True).stdout.strip()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; {rustc}; commit {commit}"


def section(r, counts, counts_commit):
    lines = []
    add = lines.append
    get = r.get
    add(f"Measured on: {machine()}. Medians of criterion's samples; "
        "reproduce with `bash scripts/bench.sh` (all of it, about 20 minutes on this machine) or one "
        "benchmark with the command in its row's section.")
    if counts:
        add("")
        add(f"The *callgrind* columns count the machine instructions per unit (VM instruction, triple, "
            f"invocation, inference, byte) with `bash scripts/callgrind-counts.sh` (commit {counts_commit}): "
            "the benchmark's workload (`benches/counts.rs`) run N and 2N times under callgrind, the "
            "difference divided by N. Unlike the medians they do not move with the machine's load or "
            "the code's layout.")
    add("")

    add("### Interpreter: dispatch, memory instructions, invocation")
    add("")
    add("`cargo bench --bench dispatch` and `cargo bench --bench memory_ops`.")
    add("")
    add("| what | median | per unit | target | TVM Relax VM | ours / TVM | target | callgrind |")
    add("|---|---:|---:|---:|---:|---:|---|---:|")
    rows = [
        ("bare builtin call (`call @vm.nop()`, 10,002 instructions)", "straight/nop", 3, 27),
        ("`%a = call @vm.iadd(%a, 1)` straight-line", "straight/iadd", 3, None),
        ("loop: `iadd`, `ilt`, `br_if` per iteration", "loop/iadd_ilt_br_if", 3, None),
    ]
    for what, key, target, tvm in rows:
        if key not in r:
            continue
        per = r[key]["median_ns"] / r[key]["elements"]
        add(f"| {what} | {fmt_ns(r[key]['median_ns'])} | {per:.2f} ns/instr | ≤ {target} ns | "
            f"{f'{tvm} ns' if tvm else '–'} | {f'{per / tvm:.3f}' if tvm else '–'} | {verdict(per <= target)} | "
            f"{fmt_count(counts, key)} |")
    for key, what in [("empty_invocation/by_id", "empty function invocation by id (`Vm::invoke_values`)"),
                      ("empty_invocation/by_name", "empty function invocation by name (`Vm::invoke`)")]:
        if key not in r:
            continue
        ns = r[key]["median_ns"]
        add(f"| {what} | {fmt_ns(ns)} | {ns:.1f} ns | ≤ 20 ns | 69 ns | "
            f"{ns / 69:.2f} | {verdict(ns <= 20)} | {fmt_count(counts, key)} |")
    for dev, kind, target in [("host", "buffer", 30), ("host", "image", 30),
                              ("intel", "buffer", 100), ("intel", "image", 100)]:
        key = f"triple/{dev}/{kind}"
        if key not in r:
            continue
        per = r[key]["median_ns"] / r[key]["elements"]
        where = "host" if dev == "host" else "Intel OpenCL"
        add(f"| alloc_storage + alloc_tensor ({kind} view) + 2 kill, {where}, steady state | "
            f"{fmt_ns(r[key]['median_ns'])} / 1,000 | {per:.0f} ns/triple | ≤ {target} ns | 294 ns | "
            f"{per / 294:.2f} | {verdict(per <= target)} | {fmt_count(counts, key)} |")
    add("")

    add("### Model overhead: every kernel a no-op")
    add("")
    add("`cargo bench --bench model_overhead` (`rxvm run --noop-kernels`): the bytecode of one "
        "inference with every operator call checked but not computed.")
    add("")
    add("| model | instructions | µs / inference | ns / instruction | TVM µs / inference | ours / TVM | "
        "target ≤ 10 % | callgrind / inference |")
    add("|---|---:|---:|---:|---:|---:|---|---:|")
    for m in MODELS:
        key = f"model_overhead/{m}"
        if key not in r:
            continue
        ns, n = r[key]["median_ns"], r[key]["elements"]
        per = ns / n
        if m in TVM_OVERHEAD_US:
            tvm_us = TVM_OVERHEAD_US[m]
            ratio = ns / 1e3 / tvm_us
            tvm_txt = f"{tvm_us}"
        else:
            ratio = per / TVM_NS_PER_INSTR
            tvm_txt = f"– ({TVM_NS_PER_INSTR} ns/instr)"
        add(f"| {m} | {n:,} | {ns / 1e3:.1f} | {per:.1f} | {tvm_txt} | {ratio:.2f} | {verdict(ratio <= 0.10)} | "
            f"{fmt_count(counts, key)} |")
    add("")
    add("Where TVM's time per inference is not known, the ratio is per instruction against its "
        "best figure (70 ns).")
    add("")

    add("### Assembler, disassembler, loader")
    add("")
    add("`cargo bench --bench assembler`: a generated 10 MB `.rxa` (fire modules, residual "
        "blocks, textures, loops, calls); MB = 10^6 bytes.")
    add("")
    add("| what | median | throughput | target | callgrind / byte |")
    add("|---|---:|---:|---|---:|")
    for what, key, target in [("assemble `.rxa` (parse, assemble, verify)", "assembler/assemble", 100),
                              ("disassemble (bytes of text printed)", "assembler/disassemble", 200),
                              ("load + verify `.rxb`", "assembler/load_verify", 300)]:
        if key not in r:
            continue
        mbs = r[key]["bytes"] / (r[key]["median_ns"] / 1e9) / 1e6
        add(f"| {what} | {fmt_ns(r[key]['median_ns'])} | {mbs:.0f} MB/s | ≥ {target} MB/s: {verdict(mbs >= target)} "
            f"| {fmt_count(counts, key)} |")
    add("")

    add("### End-to-end inference")
    add("")
    add("`cargo bench --bench models` (after `source scripts/opencl-env.sh`): one `Vm::invoke` "
        "of the compiled model, input upload and output download included.")
    add("")
    add("| model | host | Intel OpenCL | faster | TVM (default CPU build) | faster / TVM | target |")
    add("|---|---:|---:|---:|---:|---:|---|")
    for m in MODELS:
        host = get(f"models/{m}/host", {}).get("median_ns")
        intel = get(f"models/{m}/intel", {}).get("median_ns")
        if host is None and intel is None:
            continue
        best = min(x for x in (host, intel) if x is not None)
        tvm = TVM_MODEL_MS[m] * 1e6
        add(f"| {m} | {fmt_ns(host) if host else '–'} | {fmt_ns(intel) if intel else '–'} | {fmt_ns(best)} | "
            f"{TVM_MODEL_MS[m]} ms | {best / tvm:.2f} | {verdict(best < tvm)} |")
    add("")
    return "\n".join(lines)


def main():
    r = load()
    if not r:
        sys.exit("no criterion results under target/criterion: run `cargo bench` first")
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        sys.exit(f"{DOC} has no {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    counts, counts_commit = load_counts()
    DOC.write_text(f"{head}{BEGIN}\n{section(r, counts, counts_commit)}\n{END}{tail}")
    print(f"updated {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
