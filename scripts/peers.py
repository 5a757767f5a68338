#!/usr/bin/env python3
"""rxvm against onnxruntime (and tract) on the nine model-zoo CNNs of the onnx wheel.

Run by scripts/peers.sh, which sets up the venv (.cache/peers/venv), the model files and
a release build of rxvm; see docs/performance.md, "Speed against onnxruntime".

For each model, rounds of one run per engine, engine after engine (the order rotated
each round, so no engine always runs right after another): onnxruntime (default session
options: every graph optimisation, default intra-op threads), tract, `rxvm bench --json
--device host` and `--device opencl:intel` (and opencl:pocl with --pocl). Each run is a
process of its own: onnxruntime and tract run in this script started as a child
(`--runner`), which prints its timings as JSON; rxvm is `rxvm bench --json`. Every run gets
the same input, a deterministic pseudo-random tensor of the model's input shape (a .npy
file), and reports its load time (session creation / model loading and optimisation /
reading, compiling and creating the VM), its first inference and the median of the
steady-state inferences after a warm-up. The peak RSS of every engine is measured the same
way: the child's ru_maxrss from wait4. Per model and engine the table shows the median over
the rounds (peak RSS: the largest).

    python3 scripts/peers.py --rxvm target/release/rxvm [--models a,b] [--reps N]
        [--cl-reps N] [--rounds N] [--warmup N] [--pocl] [--table FILE] [--update-docs]
"""

import argparse
import json
import math
import os
import platform
import re
import selectors
import statistics
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
LIGHT = os.path.join(ROOT, ".cache/onnx/wheel/onnx/backend/test/data/light")
INPUTS = os.path.join(ROOT, ".cache/peers/inputs")
DOC = os.path.join(ROOT, "docs/performance.md")
BEGIN, END = "<!-- peers:begin -->", "<!-- peers:end -->"
# rxvm_test_support::models::NAMES
MODELS = [
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
]


# --- the runner: one engine, one model, in a process of its own ---------------------------


def runner(engine, model, input_path, warmup, reps):
    """Times one engine on one model; prints one JSON object."""
    import numpy as np

    x = np.load(input_path)
    t0 = time.perf_counter()
    if engine == "ort":
        import onnxruntime as ort

        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        feed = {name: x}

        def infer():
            return sess.run(None, feed)

    elif engine == "tract":
        import tract

        # into_model: typed and decluttered; into_runnable: optimised all the way.
        state = tract.onnx().load(model).into_model().into_runnable().spawn_state()

        def infer():
            return state.run([x])

    else:
        raise SystemExit(f"unknown engine {engine}")
    load = time.perf_counter() - t0

    def timed():
        t = time.perf_counter()
        out = infer()
        took = time.perf_counter() - t
        del out
        return took * 1e3

    first = timed()
    for _ in range(warmup):
        timed()
    times = [timed() for _ in range(reps)]
    print(
        json.dumps(
            {
                "load_ms": load * 1e3,
                "first_ms": first,
                "median_ms": statistics.median(times),
                "min_ms": min(times),
                "reps": len(times),
            }
        )
    )


# --- the driver ---------------------------------------------------------------------------


def model_input(name):
    """The model's path, its input name, and a .npy of a deterministic random input."""
    import numpy as np
    import onnx

    path = os.path.join(LIGHT, f"light_{name}.onnx")
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    inp = next(i for i in m.graph.input if i.name not in inits)
    dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in inp.type.tensor_type.shape.dim]
    dtype = onnx.helper.tensor_dtype_to_np_dtype(inp.type.tensor_type.elem_type)
    os.makedirs(INPUTS, exist_ok=True)
    npy = os.path.join(INPUTS, f"{name}.npy")
    x = np.random.default_rng(0).random(dims).astype(dtype)
    np.save(npy, x)
    return path, inp.name, npy


def spawn(cmd, env=None, timeout=3600):
    """Runs `cmd` to completion; (report, error): its last stdout line as JSON with the
    child's peak RSS (ru_maxrss of wait4) as `rss`."""
    r, w = os.pipe()
    er, ew = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.close(er)
        os.dup2(w, 1)
        os.dup2(ew, 2)
        try:
            os.execvpe(cmd[0], cmd, env if env is not None else os.environ)
        finally:
            os._exit(127)
    os.close(w)
    os.close(ew)
    deadline = time.monotonic() + timeout
    out, err = b"", b""
    sel = selectors.DefaultSelector()
    sel.register(r, selectors.EVENT_READ, "out")
    sel.register(er, selectors.EVENT_READ, "err")
    while sel.get_map():
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, 9)
            break
        for key, _ in sel.select(timeout=left):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fd)
                os.close(key.fd)
            elif key.data == "out":
                out += chunk
            else:
                err += chunk
    _, status, usage = os.wait4(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        last = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {code}"]
        return None, last[0][:200]
    lines = out.decode().strip().splitlines()
    try:
        rep = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        return None, "no JSON report"
    rep["rss"] = usage.ru_maxrss * 1024  # KiB on Linux
    return rep, None


def opencl_env():
    """The environment `source scripts/opencl-env.sh` makes, or None without the runtimes."""
    cmd = ["bash", "-c", "source scripts/opencl-env.sh >/dev/null 2>&1 && env -0"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, check=False)
    if p.returncode != 0:
        return None
    env = {}
    for item in p.stdout.split(b"\0"):
        if b"=" in item:
            k, v = item.split(b"=", 1)
            env[k.decode()] = v.decode()
    return env


def has_device(rxvm, env, device):
    """Whether rxvm runs on `device` (opencl:NAME) in `env`: one inference of an example."""
    probe = [rxvm, "bench", "examples/mlp.rxa", "--device", device, "--reps", "1", "--warmup", "0", "--json"]
    return subprocess.run(probe, cwd=ROOT, env=env, capture_output=True, check=False).returncode == 0


def version(module):
    try:
        import importlib.metadata as md

        return md.version(module)
    except Exception:  # noqa: BLE001 - any failure means "not installed"
        return None


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def git_commit():
    p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, check=False, text=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, check=False, text=True
    )
    return p.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def fmt_ms(v):
    if v is None:
        return "—"
    return f"{v / 1e3:.2f} s" if v >= 1000 else f"{v:.1f} ms"


def fmt_mib(b):
    return "—" if b is None else f"{b / 2**20:.0f} MiB"


def ratio(a, b):
    return a / b if a is not None and b else None


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt_ratio(r):
    return "—" if r is None else f"{r:.2f}"


def table(results, engines, args, versions, baseline):
    """The markdown table (with its header line) of `results[model][engine]`."""
    ort_v, tract_v, rustc = versions
    header = (
        f"Measured on: {machine()}; onnxruntime {ort_v}, tract {tract_v or 'not installed'}, "
        f"{rustc}; commit {git_commit()}. Medians of {args.reps} steady-state inferences after "
        f"{args.warmup} warm-up ({args.cl_reps} after {args.cl_warmup} on OpenCL), the median over "
        f"{args.rounds} round{'s' if args.rounds > 1 else ''}; reproduce with `bash scripts/peers.sh "
        f"--reps {args.reps} --cl-reps {args.cl_reps} --rounds {args.rounds}"
        f"{' --pocl' if 'rxvm-pocl' in engines else ''}`."
    )
    base = [
        f"{label} {fmt_mib(baseline[e])}"
        for e, label in (("ort", "onnxruntime"), ("tract", "tract"))
        if baseline.get(e)
    ]
    if base:
        header += (
            " The peak RSS of onnxruntime and tract includes their Python runner's: "
            + ", ".join(base)
            + " with the engine and numpy imported, before any model."
        )
    lines = [header, ""]
    pocl = "rxvm-pocl" in engines
    head = ["model", "onnxruntime median", "tract median", "rxvm host median", "rxvm Intel OpenCL median"]
    if pocl:
        head.append("rxvm PoCL median")
    head += ["rxvm host / ORT", "Intel / host", "load ms (ORT, rxvm)", "peak RSS (ORT, rxvm host)"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|---|" + "---:|" * (len(head) - 1))
    host_ort, intel_host = [], []
    for name, res in results.items():

        def med(engine, key="median_ms", res=res):
            return res.get(engine, {}).get(key)

        def cell(engine, res=res):
            e = res.get(engine, {})
            if "error" in e and e.get("median_ms") is None:
                return "fails" if engine != "tract" or tract_v else "—"
            return fmt_ms(e.get("median_ms"))

        r1 = ratio(med("rxvm-host"), med("ort"))
        r2 = ratio(med("rxvm-intel"), med("rxvm-host"))
        host_ort.append(r1)
        intel_host.append(r2)
        row = [name, cell("ort"), cell("tract"), cell("rxvm-host"), cell("rxvm-intel")]
        if pocl:
            row.append(cell("rxvm-pocl"))
        load = f"{med('ort', 'load_ms') or 0:.0f}, {med('rxvm-host', 'load_ms') or 0:.0f}"
        rss = f"{fmt_mib(med('ort', 'rss'))}, {fmt_mib(med('rxvm-host', 'rss'))}"
        row += [fmt_ratio(r1), fmt_ratio(r2), load, rss]
        lines.append("| " + " | ".join(row) + " |")
    geo = ["geometric mean", "", "", "", ""] + ([""] if pocl else [])
    geo += [fmt_ratio(geomean(host_ort)), fmt_ratio(geomean(intel_host)), "", ""]
    lines.append("| " + " | ".join(geo) + " |")
    errors = [
        f"- {name}, {engine}: {e['error']}"
        for name, res in results.items()
        for engine, e in res.items()
        if e.get("error") and e.get("median_ms") is None
    ]
    if errors:
        lines += ["", "Runs that failed:", ""] + errors
    return "\n".join(lines) + "\n"


def update_docs(text):
    with open(DOC) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"peers: {DOC} lacks the markers {BEGIN} ... {END}")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(DOC, "w") as f:
        f.write(head + BEGIN + "\n" + text + END + tail)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runner", nargs=5, metavar=("ENGINE", "MODEL", "INPUT", "WARMUP", "REPS"), help=argparse.SUPPRESS)
    ap.add_argument("--baseline", metavar="ENGINE", help=argparse.SUPPRESS)
    ap.add_argument("--rxvm", default=os.path.join(ROOT, "target/release/rxvm"), help="the rxvm binary")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated model names (default: all nine)")
    ap.add_argument("--reps", type=int, default=20, help="steady-state inferences per run (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up inferences per run (default 3)")
    ap.add_argument("--cl-reps", type=int, default=3, help="steady-state inferences per OpenCL run (default 3)")
    ap.add_argument("--cl-warmup", type=int, default=1, help="warm-up inferences per OpenCL run (default 1)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each engine per model (default 3)")
    ap.add_argument("--pocl", action="store_true", help="add rxvm on PoCL's CPU device")
    ap.add_argument("--table", metavar="FILE", help="write the markdown table to FILE")
    ap.add_argument("--update-docs", action="store_true", help="rewrite the table in docs/performance.md")
    args = ap.parse_args()
    if args.baseline:
        # The runner's own footprint: the interpreter, numpy and the engine, no model.
        import numpy  # noqa: F401

        __import__({"ort": "onnxruntime", "tract": "tract"}[args.baseline])
        print("{}")
        return
    if args.runner:
        engine, model, inp, warmup, reps = args.runner
        runner(engine, model, inp, int(warmup), int(reps))
        return
    for flag in ("reps", "cl_reps", "rounds"):
        if getattr(args, flag) < 1:
            raise SystemExit(f"peers: --{flag.replace('_', '-')} must be at least 1")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise SystemExit(f"peers: unknown model(s) {', '.join(unknown)}; the models are {', '.join(MODELS)}")
    if not os.access(args.rxvm, os.X_OK):
        raise SystemExit(f"peers: {args.rxvm} is not an executable; build it with cargo build --release")

    tract_v = version("tract")
    engines = ["ort"] + (["tract"] if tract_v else []) + ["rxvm-host"]
    cl_env = opencl_env()
    if cl_env and has_device(args.rxvm, cl_env, "opencl:intel"):
        engines.append("rxvm-intel")
    else:
        print("peers: no Intel OpenCL platform (scripts/setup-opencl.sh); its column stays empty", file=sys.stderr)
    if args.pocl:
        if cl_env and has_device(args.rxvm, cl_env, "opencl:pocl"):
            engines.append("rxvm-pocl")
        else:
            print("peers: no PoCL platform; --pocl ignored", file=sys.stderr)

    py = sys.executable
    me = os.path.abspath(__file__)

    def command(engine, path, input_name, npy):
        if engine in ("ort", "tract"):
            return [py, me, "--runner", engine, path, npy, str(args.warmup), str(args.reps)], None
        device = {"rxvm-host": "host", "rxvm-intel": "opencl:intel", "rxvm-pocl": "opencl:pocl"}[engine]
        cl = engine != "rxvm-host"
        reps, warmup = (args.cl_reps, args.cl_warmup) if cl else (args.reps, args.warmup)
        cmd = [args.rxvm, "bench", path, "--json", "--device", device, "--warmup", str(warmup), "--reps", str(reps)]
        cmd += ["-i", f"{input_name}={npy}"]
        return cmd, (cl_env if cl else None)

    baseline = {}
    for engine in ("ort", "tract"):
        if engine in engines:
            rep, _ = spawn([py, me, "--baseline", engine])
            baseline[engine] = rep["rss"] if rep else None

    results = {}
    for name in models:
        path, input_name, npy = model_input(name)
        runs = {e: [] for e in engines}
        errors = {}
        for r in range(args.rounds):
            k = r % len(engines)
            for engine in engines[k:] + engines[:k]:
                cmd, env = command(engine, path, input_name, npy)
                rep, err = spawn(cmd, env)
                if rep is None:
                    errors[engine] = err
                    print(f"peers: {name} {engine} round {r + 1}: {err}", file=sys.stderr)
                else:
                    runs[engine].append(rep)
                    print(
                        f"peers: {name} {engine} round {r + 1}: median {rep['median_ms']:.1f} ms, "
                        f"load {rep['load_ms']:.0f} ms, peak RSS {rep['rss'] / 2**20:.0f} MiB",
                        file=sys.stderr,
                    )
        res = {}
        for engine in engines:
            reps = runs[engine]
            if not reps:
                res[engine] = {"error": errors.get(engine, "no run")}
                continue
            res[engine] = {key: statistics.median(x[key] for x in reps) for key in ("median_ms", "load_ms", "first_ms")}
            res[engine]["rss"] = max(x["rss"] for x in reps)
        results[name] = res

    rustc = (
        subprocess.run(["rustc", "--version"], capture_output=True, check=False, text=True).stdout.strip() or "rustc ?"
    )
    rustc = re.sub(r"\s*\(.*\)", "", rustc)
    text = table(results, engines, args, (version("onnxruntime"), tract_v, rustc), baseline)
    sys.stdout.write(text)
    if args.table:
        with open(args.table, "w") as f:
            f.write(text)
    if args.update_docs:
        update_docs(text)


if __name__ == "__main__":
    main()
