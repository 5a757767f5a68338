#!/usr/bin/env python3
"""Exports a set of today's models from PyTorch with both ONNX exporters and compares
`rxvm run` with onnxruntime on each device. Run through scripts/zoo.sh (it makes the venv).

    zoo.py [--small] [--out DIR] [--devices host,opencl:intel,opencl:pocl] [--only NAME]
           [--table docs/models.md] [--cases DIR]

Every model gets random weights (seeded) with non-trivial BatchNorm statistics, so its
outputs are O(1) and differ from input to input. `--small` builds tiny configurations of
the same architectures (each `.onnx` under 1 MB); with `--cases DIR` each export is
written as a conformance case (`DIR/<model>-<exporter>/model.onnx` and
`test_data_set_0/{input,output}_K.pb` holding onnxruntime's outputs), the set CI runs
without torch (tests/zoo.rs).
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torchvision
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
RTOL, ATOL = 1e-3, 1e-4


# ---------------------------------------------------------------------------------------
# Models.


class GptBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x, mask):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, t, h, d // h).transpose(1, 2)
        k = k.view(b, t, h, d // h).transpose(1, 2)
        v = v.view(b, t, h, d // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h))
        att = att.masked_fill(mask[:, :, :t, :t] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        x = x + self.proj(y)
        x = x + self.out(nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return x


class Gpt2(nn.Module):
    """A GPT-2-style decoder: token and position embeddings, pre-norm blocks with causal
    self-attention and a tanh-GELU MLP, a final LayerNorm and the LM head."""

    def __init__(self, vocab, ctx, d, heads, layers):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList([GptBlock(d, heads) for _ in range(layers)])
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx))

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x, self.mask)
        return self.head(self.lnf(x))


class Lstm(nn.Module):
    def __init__(self, inp, hidden, layers, classes):
        super().__init__()
        self.lstm = nn.LSTM(inp, hidden, layers)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y[-1])


class Encoder(nn.Module):
    def __init__(self, d, heads, ff, layers, classes):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True, activation="gelu")
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d, classes)

    def forward(self, x):
        return self.fc(self.enc(x).mean(dim=1))


def image(n, size):
    return (torch.randn(n, 3, size, size),)


def models(small):
    """(name, constructor, example inputs) of the set."""
    tv = torchvision.models
    if small:
        from torchvision.models.convnext import CNBlockConfig
        from torchvision.models.efficientnet import _efficientnet_conf
        from torchvision.models.mobilenetv3 import _mobilenet_v3_conf

        def mnv3():
            setting, last = _mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.25)
            return tv.MobileNetV3(setting, last, num_classes=10)

        def effnet():
            setting, last = _efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.25)
            return tv.EfficientNet(setting, 0.0, num_classes=10, last_channel=last)

        return [
            ("vit", lambda: tv.VisionTransformer(32, 8, 2, 2, 32, 64, num_classes=10), lambda: image(1, 32)),
            (
                "swin",
                lambda: tv.SwinTransformer([2, 2], 16, [2, 2], [2, 4], [4, 4], num_classes=10),
                lambda: image(1, 32),
            ),
            (
                "convnext",
                lambda: tv.ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)], num_classes=10),
                lambda: image(1, 32),
            ),
            ("mobilenet_v3", mnv3, lambda: image(1, 64)),
            ("efficientnet", effnet, lambda: image(1, 64)),
            ("transformer_encoder", lambda: Encoder(32, 4, 64, 2, 10), lambda: (torch.randn(1, 16, 32),)),
            ("lstm", lambda: Lstm(16, 32, 2, 10), lambda: (torch.randn(12, 1, 16),)),
            ("gpt2", lambda: Gpt2(256, 32, 32, 4, 2), lambda: (torch.randint(0, 256, (1, 16)),)),
        ]
    return [
        ("vit_b_16", lambda: tv.vit_b_16(), lambda: image(1, 224)),
        ("swin_t", lambda: tv.swin_t(), lambda: image(1, 224)),
        ("convnext_tiny", lambda: tv.convnext_tiny(), lambda: image(1, 224)),
        ("mobilenet_v3_large", lambda: tv.mobilenet_v3_large(), lambda: image(1, 224)),
        ("efficientnet_b0", lambda: tv.efficientnet_b0(), lambda: image(1, 224)),
        ("transformer_encoder", lambda: Encoder(256, 8, 1024, 4, 100), lambda: (torch.randn(1, 64, 256),)),
        ("lstm", lambda: Lstm(64, 256, 2, 100), lambda: (torch.randn(32, 1, 64),)),
        ("gpt2", lambda: Gpt2(4096, 128, 256, 8, 4), lambda: (torch.randint(0, 4096, (1, 64)),)),
    ]


def randomize(model, seed):
    """Random weights with BatchNorm statistics that are not the identity, so that outputs
    are O(1) and input-dependent."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            # torchvision zero-initialises some heads (ViT's): every Linear gets variance-
            # preserving random weights, every LayerNorm a random affine.
            if isinstance(m, nn.Linear):
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) / math.sqrt(m.in_features))
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
            if isinstance(m, nn.LayerNorm) and m.weight is not None:
                m.weight.copy_(1.0 + 0.1 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
                if m.weight is not None:
                    m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
    return model.eval()


# ---------------------------------------------------------------------------------------
# Export and comparison.


def export(model, args, path, exporter):
    names = [f"input_{i}" for i in range(len(args))]
    if exporter == "torchscript":
        torch.onnx.export(model, args, str(path), dynamo=False, opset_version=17, input_names=names)
    else:
        prog = torch.onnx.export(model, args, dynamo=True, input_names=names, external_data=False)
        prog.save(str(path))
    onnx.checker.check_model(str(path))


def write_case(case, model_path, feeds, outs):
    case.mkdir(parents=True, exist_ok=True)
    data = case / "test_data_set_0"
    data.mkdir(exist_ok=True)
    (case / "model.onnx").write_bytes(Path(model_path).read_bytes())
    for i, (name, v) in enumerate(feeds.items()):
        (data / f"input_{i}.pb").write_bytes(numpy_helper.from_array(v, name).SerializeToString())
    m = onnx.load(str(model_path), load_external_data=False)
    for i, (o, v) in enumerate(zip(m.graph.output, outs)):
        (data / f"output_{i}.pb").write_bytes(numpy_helper.from_array(v, o.name).SerializeToString())


def rxvm(*args, timeout=3600):
    exe = os.environ.get("RXVM", str(ROOT / "target/release/rxvm"))
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)


def plan_bytes(model_path):
    """(arena bytes, lower bound) of the host plan, from `rxvm plan`."""
    r = rxvm("plan", str(model_path))
    arena = lower = None
    for line in r.stdout.splitlines():
        parts = line.split()
        if parts[:1] == ["arena"]:
            arena = int(parts[1].replace(",", ""))
        if parts[:2] == ["lower", "bound"]:
            lower = int(parts[2].replace(",", ""))
    return arena, lower


def compare(model_path, feeds, want, device, tmp, extra=()):
    args = ["run", str(model_path), "--device", device, "-q", *extra]
    for i, (name, v) in enumerate(feeds.items()):
        p = tmp / f"in{i}.npy"
        np.save(p, v)
        args += ["-i", f"{name}={p}"]
    outs = [tmp / f"out{i}.npy" for i in range(len(want))]
    for p in outs:
        args += ["-o", str(p)]
    r = rxvm(*args)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
    worst, ok = 0.0, True
    for p, w in zip(outs, want):
        g = np.load(p)
        if g.shape != w.shape:
            return None, f"shape {g.shape} vs {w.shape}"
        d = np.abs(g.astype(np.float64) - w.astype(np.float64))
        worst = max(worst, float(d.max(initial=0.0)))
        ok &= bool(np.all(d <= ATOL + RTOL * np.abs(w.astype(np.float64))))
    return worst, None if ok else "outside rtol 1e-3 / atol 1e-4"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--out", default=str(ROOT / ".cache/zoo/models"))
    ap.add_argument("--devices", default="host,opencl:intel,opencl:pocl")
    ap.add_argument("--only")
    ap.add_argument("--table")
    ap.add_argument("--cases")
    ap.add_argument("--textures", action="store_true", help="also run --textures auto on Intel")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, failures = [], 0
    for seed, (name, make, inputs) in enumerate(models(a.small)):
        if a.only and a.only not in name:
            continue
        torch.manual_seed(seed)
        model = randomize(make(), seed)
        args = inputs()
        for exporter in ["torchscript", "dynamo"]:
            path = out / f"{name}-{exporter}.onnx"
            t0 = time.time()
            try:
                export(model, args, path, exporter)
            except Exception as e:  # an exporter failure is a row of the table, not a crash
                rows.append((name, exporter, "export failed", str(e).splitlines()[0][:80], "", ""))
                continue
            sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            feeds = {i.name: v.numpy() for i, v in zip(sess.get_inputs(), args)}
            want = sess.run(None, feeds)
            if a.cases:
                write_case(Path(a.cases) / f"{name}-{exporter}", path, feeds, want)
            arena, lower = plan_bytes(path)
            results = []
            runs = [(d, ()) for d in a.devices.split(",")]
            if a.textures:
                runs.append(("opencl:intel", ("--textures", "auto")))
            with tempfile.TemporaryDirectory() as tmp:
                for device, extra in runs:
                    worst, err = compare(path, feeds, want, device, Path(tmp), extra)
                    label = device.split(":")[-1] + (" textures" if extra else "")
                    if err:
                        failures += 1
                        results.append(f"{label}: FAIL ({err})")
                    else:
                        results.append(f"{label}: {worst:.1e}")
            scale = max(float(np.abs(w).max(initial=0.0)) for w in want)
            rows.append(
                (
                    name,
                    exporter,
                    ", ".join(results),
                    f"{scale:.2f}",
                    f"{arena:,}" if arena else "?",
                    f"{lower:,}" if lower else "?",
                )
            )
            print(" | ".join(rows[-1]), f"({time.time() - t0:.0f} s)", flush=True)
    header = "| model | exporter | max abs diff vs onnxruntime per device | max abs output | arena B | lower bound B |\n"
    header += "|---|---|---|---|---|---|\n"
    table = header + "".join("| " + " | ".join(r) + " |\n" for r in rows)
    print(table)
    if a.table:
        Path(a.table).write_text(table)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
