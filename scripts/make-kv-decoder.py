#!/usr/bin/env python3
"""Writes the GPT-2-style decoder with a KV cache that tests/decoder.rs runs step by step,
with onnxruntime's logits at every step as the expected ones.

    python3 scripts/make-kv-decoder.py tests/decoder

OUT/decoder.onnx takes `seq` new tokens (ids and positions, `[1, seq]`), an additive
attention mask `[1, 1, seq, 128]`, the cache position to write them at (`[1]`), and per
layer a key and a value cache `[1, 4, 128, 8]`; it returns the logits `[1, seq, 64]` and
the updated caches (TensorScatter writes the new keys and values at the position, as
onnxruntime's in-place KV cache does). Two pre-norm layers of 4-head attention over the
whole cache (the mask hides unwritten and future positions) and a GELU MLP; token and
position embeddings, logits tied to the token embedding; random weights of a fixed seed.

OUT/tokens.npy holds 72 token ids: a prefill of the first 8, then 64 decode steps of one
token each. OUT/logits_prefill.npy ([1, 8, 64]) and OUT/logits_steps.npy ([64, 64]) are
onnxruntime's logits. Needs onnx, numpy and onnxruntime (the tests read the files only).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

D, HEADS, FF, LAYERS, MAX, VOCAB = 32, 4, 64, 2, 128, 64
DH = D // HEADS
PREFILL, STEPS = 8, 64


def build():
    rng = np.random.default_rng(2027)
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def rand(name, shape, scale):
        return const(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    def op(kind, ins, out, **attrs):
        nodes.append(helper.make_node(kind, ins, [out], name=out, **attrs))
        return out

    def layer_norm(x, name):
        g = const(f"{name}.g", (1 + 0.1 * rng.standard_normal(D)).astype(np.float32))
        b = const(f"{name}.b", (0.1 * rng.standard_normal(D)).astype(np.float32))
        return op("LayerNormalization", [x, g, b], name, axis=-1, epsilon=1e-5)

    wte = rand("wte", (VOCAB, D), 0.5)
    wpe = rand("wpe", (MAX, D), 0.2)
    split = const("split_heads", np.array([0, 0, HEADS, DH], dtype=np.int64))
    merge = const("merge_heads", np.array([0, 0, D], dtype=np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(DH), dtype=np.float32))
    tok = op("Gather", [wte, "ids"], "tok", axis=0)
    pos = op("Gather", [wpe, "positions"], "pos", axis=0)
    x = op("Add", [tok, pos], "embed")
    cache_inputs, cache_outputs = [], []
    for l in range(LAYERS):
        p = f"l{l}"
        h = layer_norm(x, f"{p}.ln1")
        heads = {}
        for t in "qkv":
            m = op("MatMul", [h, rand(f"{p}.w{t}", (D, D), 1 / np.sqrt(D))], f"{p}.{t}.mm")
            a = op("Add", [m, rand(f"{p}.b{t}", (D,), 0.1)], f"{p}.{t}")
            r = op("Reshape", [a, split], f"{p}.{t}.heads")
            heads[t] = op("Transpose", [r], f"{p}.{t}.t", perm=[0, 2, 1, 3])
        caches = {}
        for t in "kv":
            name = f"cache_{t}{l}"
            cache_inputs.append(name)
            caches[t] = op("TensorScatter", [name, heads[t], "write_index"], f"present_{t}{l}", mode="linear")
            cache_outputs.append(caches[t])
        kt = op("Transpose", [caches["k"]], f"{p}.kt", perm=[0, 1, 3, 2])
        s = op("MatMul", [heads["q"], kt], f"{p}.scores")
        s = op("Mul", [s, scale], f"{p}.scaled")
        s = op("Add", [s, "mask"], f"{p}.masked")
        pr = op("Softmax", [s], f"{p}.probs", axis=-1)
        c = op("MatMul", [pr, caches["v"]], f"{p}.ctx")
        c = op("Transpose", [c], f"{p}.ctx.t", perm=[0, 2, 1, 3])
        c = op("Reshape", [c, merge], f"{p}.ctx.merged")
        o = op("MatMul", [c, rand(f"{p}.wo", (D, D), 1 / np.sqrt(D))], f"{p}.o")
        x1 = op("Add", [x, o], f"{p}.res1")
        h2 = layer_norm(x1, f"{p}.ln2")
        f1 = op("MatMul", [h2, rand(f"{p}.w1", (D, FF), 1 / np.sqrt(D))], f"{p}.ff1")
        f1 = op("Add", [f1, rand(f"{p}.b1", (FF,), 0.1)], f"{p}.ff1b")
        f1 = op("Gelu", [f1], f"{p}.gelu")
        f2 = op("MatMul", [f1, rand(f"{p}.w2", (FF, D), 1 / np.sqrt(FF))], f"{p}.ff2")
        x = op("Add", [x1, f2], f"{p}.out")
    h = layer_norm(x, "ln_f")
    wte_t = op("Transpose", [wte], "wte_t", perm=[1, 0])
    op("MatMul", [h, wte_t], "logits")
    cache_type = [1, HEADS, MAX, DH]
    inputs = [
        helper.make_tensor_value_info("ids", TensorProto.INT64, [1, "seq"]),
        helper.make_tensor_value_info("positions", TensorProto.INT64, [1, "seq"]),
        helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, "seq", MAX]),
        helper.make_tensor_value_info("write_index", TensorProto.INT64, [1]),
    ] + [helper.make_tensor_value_info(n, TensorProto.FLOAT, cache_type) for n in cache_inputs]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "seq", VOCAB])] + [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, cache_type) for n in cache_outputs
    ]
    graph = helper.make_graph(nodes, "decoder", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model, cache_inputs


def mask(start, n):
    """Token i of n new ones (at cache position start + i) sees positions 0..=start+i."""
    m = np.full((1, 1, n, MAX), -1e9, dtype=np.float32)
    for i in range(n):
        m[0, 0, i, : start + i + 1] = 0
    return m


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/decoder"
    os.makedirs(out, exist_ok=True)
    model, cache_names = build()
    path = os.path.join(out, "decoder.onnx")
    onnx.save(model, path)
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    tokens = np.random.default_rng(9).integers(0, VOCAB, PREFILL + STEPS).astype(np.int64)
    caches = {n: np.zeros((1, HEADS, MAX, DH), np.float32) for n in cache_names}

    def step(start, n):
        feed = {
            "ids": tokens[start : start + n].reshape(1, n),
            "positions": np.arange(start, start + n, dtype=np.int64).reshape(1, n),
            "mask": mask(start, n),
            "write_index": np.array([start], dtype=np.int64),
            **caches,
        }
        res = sess.run(None, feed)
        for name, v in zip(cache_names, res[1:]):
            caches[name] = v
        return res[0]

    prefill = step(0, PREFILL)
    steps = np.stack([step(PREFILL + t, 1)[0, 0] for t in range(STEPS)])
    np.save(os.path.join(out, "tokens.npy"), tokens)
    np.save(os.path.join(out, "logits_prefill.npy"), prefill)
    np.save(os.path.join(out, "logits_steps.npy"), steps)
    print(f"wrote {path}, a prefill of {PREFILL} and {STEPS} steps (onnxruntime {ort.__version__})")


if __name__ == "__main__":
    main()
