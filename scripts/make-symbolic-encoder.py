#!/usr/bin/env python3
"""Writes the symbolic-sequence transformer encoder that tests/symbolic.rs compiles once and
runs at several lengths, with onnxruntime's outputs at each length as the expected ones.

    python3 scripts/make-symbolic-encoder.py tests/symbolic

writes OUT/encoder.onnx (input x: f32[1, seq, 32], `seq` a named dim; two pre-norm layers of
4-head self-attention and a ReLU MLP, random weights of a fixed seed) and, for each length L
in 1, 7, 64 and 512, OUT/x_L.npy and OUT/y_L.npy (onnxruntime 1.x on the CPU). Needs onnx,
numpy and onnxruntime (not needed by the tests, which read the files).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

D, HEADS, FF, LAYERS = 32, 4, 64, 2
LENGTHS = [1, 7, 64, 512]


def build():
    rng = np.random.default_rng(2026)
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def weight(name, shape, fan_in):
        return const(name, (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32))

    def op(kind, ins, out, **attrs):
        nodes.append(helper.make_node(kind, ins, [out], name=out, **attrs))
        return out

    split_heads = const("split_heads", np.array([0, 0, HEADS, D // HEADS], dtype=np.int64))
    merge_heads = const("merge_heads", np.array([0, 0, D], dtype=np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(D // HEADS), dtype=np.float32))
    x = "x"
    for l in range(LAYERS):
        p = f"l{l}"
        g1 = const(f"{p}.ln1.g", (1 + 0.1 * rng.standard_normal(D)).astype(np.float32))
        b1 = const(f"{p}.ln1.b", (0.1 * rng.standard_normal(D)).astype(np.float32))
        h = op("LayerNormalization", [x, g1, b1], f"{p}.ln1", axis=-1, epsilon=1e-5)
        heads = {}
        for t in "qkv":
            w = weight(f"{p}.w{t}", (D, D), D)
            b = const(f"{p}.b{t}", (0.1 * rng.standard_normal(D)).astype(np.float32))
            m = op("MatMul", [h, w], f"{p}.{t}.mm")
            a = op("Add", [m, b], f"{p}.{t}")
            r = op("Reshape", [a, split_heads], f"{p}.{t}.heads")
            perm = [0, 2, 3, 1] if t == "k" else [0, 2, 1, 3]
            heads[t] = op("Transpose", [r], f"{p}.{t}.t", perm=perm)
        s = op("MatMul", [heads["q"], heads["k"]], f"{p}.scores")
        s = op("Mul", [s, scale], f"{p}.scaled")
        pr = op("Softmax", [s], f"{p}.probs", axis=-1)
        c = op("MatMul", [pr, heads["v"]], f"{p}.ctx")
        c = op("Transpose", [c], f"{p}.ctx.t", perm=[0, 2, 1, 3])
        c = op("Reshape", [c, merge_heads], f"{p}.ctx.merged")
        o = op("MatMul", [c, weight(f"{p}.wo", (D, D), D)], f"{p}.o")
        x1 = op("Add", [x, o], f"{p}.res1")
        g2 = const(f"{p}.ln2.g", (1 + 0.1 * rng.standard_normal(D)).astype(np.float32))
        b2 = const(f"{p}.ln2.b", (0.1 * rng.standard_normal(D)).astype(np.float32))
        h2 = op("LayerNormalization", [x1, g2, b2], f"{p}.ln2", axis=-1, epsilon=1e-5)
        f1 = op("MatMul", [h2, weight(f"{p}.w1", (D, FF), D)], f"{p}.ff1")
        f1 = op("Add", [f1, const(f"{p}.b1", (0.1 * rng.standard_normal(FF)).astype(np.float32))], f"{p}.ff1b")
        f1 = op("Relu", [f1], f"{p}.relu")
        f2 = op("MatMul", [f1, weight(f"{p}.w2", (FF, D), FF)], f"{p}.ff2")
        x = op("Add", [x1, f2], f"{p}.out" if l < LAYERS - 1 else "y")
    graph = helper.make_graph(
        nodes,
        "encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", D])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/symbolic"
    os.makedirs(out, exist_ok=True)
    model = build()
    path = os.path.join(out, "encoder.onnx")
    onnx.save(model, path)
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    for n in LENGTHS:
        x = rng.standard_normal((1, n, D)).astype(np.float32)
        (y,) = sess.run(None, {"x": x})
        np.save(os.path.join(out, f"x_{n}.npy"), x)
        np.save(os.path.join(out, f"y_{n}.npy"), y)
    print(f"wrote {path} and inputs/outputs for lengths {LENGTHS} (onnxruntime {ort.__version__})")


if __name__ == "__main__":
    main()
