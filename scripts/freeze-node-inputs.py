#!/usr/bin/env python3
"""Freezes the shape-deciding inputs of ONNX node test cases into initializers.

ONNX's node suite gives Resize's roi / scales / sizes (and Upsample's scales) as graph
inputs, which the VM cannot compile (a graph input that decides a shape is dynamic). This
turns each such case into an equivalent one where those inputs are initializers holding the
case's values, with the same expected outputs:

    .cache/onnx/venv/bin/python scripts/freeze-node-inputs.py .cache/onnx/node tests/resize \
        --match resize --match upsample

For every case dir `test_*` under SRC whose name contains one of the --match strings (all
cases without --match), every graph input that feeds one of the frozen input positions of
a node (--op NAME:POS,POS...; by default Resize:1,2,3 and Upsample:1) becomes an
initializer in OUT/<case>/model.onnx; each test_data_set_* keeps the other inputs (renumbered
input_0..) and the outputs. Needs onnx and numpy only.

With --sandwich, each frozen case whose first input and output are 4-D f32 also gets a Relu
before and after its nodes (so that a compiler placing texture operators next to texture
neighbours puts the resize on textures), its expected outputs recomputed with ONNX's
reference evaluator from the case's inputs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

import onnx
from onnx import numpy_helper

DEFAULT_OPS = {"Resize": {1, 2, 3}, "Upsample": {1}}


def frozen_inputs(model: onnx.ModelProto, ops: dict[str, set[int]]) -> list[str]:
    """The graph inputs that feed a frozen position of a node."""
    graph_inputs = {i.name for i in model.graph.input} - {t.name for t in model.graph.initializer}
    names = []
    for node in model.graph.node:
        positions = ops.get(node.op_type)
        if not positions:
            continue
        for pos, name in enumerate(node.input):
            if pos in positions and name in graph_inputs and name not in names:
                names.append(name)
    return names


def sandwich(dst: str) -> bool:
    """Wraps the frozen case in `dst` between two Relus and recomputes its outputs."""
    import numpy as np
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    model = onnx.load(os.path.join(dst, "model.onnx"))
    g = model.graph
    x, y = g.input[0], g.output[0]
    four_d_f32 = lambda v: v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT and len(v.type.tensor_type.shape.dim) == 4
    if len(g.output) != 1 or not four_d_f32(x) or not four_d_f32(y):
        return False
    inner_x, inner_y = x.name + ".relu", y.name + ".pre"
    for n in g.node:
        n.input[:] = [inner_x if i == x.name else i for i in n.input]
        n.output[:] = [inner_y if o == y.name else o for o in n.output]
    nodes = [helper.make_node("Relu", [x.name], [inner_x]), *g.node, helper.make_node("Relu", [inner_y], [y.name])]
    del g.node[:]
    g.node.extend(nodes)
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(dst, "model.onnx"))
    ev = ReferenceEvaluator(model)
    for s in sorted(d for d in os.listdir(dst) if d.startswith("test_data_set_")):
        feeds = {}
        for k, v in enumerate(g.input):
            t = onnx.TensorProto()
            with open(os.path.join(dst, s, f"input_{k}.pb"), "rb") as f:
                t.ParseFromString(f.read())
            feeds[v.name] = numpy_helper.to_array(t)
        (out,) = ev.run(None, feeds)
        t = numpy_helper.from_array(np.asarray(out), y.name)
        with open(os.path.join(dst, s, "output_0.pb"), "wb") as f:
            f.write(t.SerializeToString())
    return True


def freeze_case(src: str, dst: str, ops: dict[str, set[int]]) -> bool:
    model = onnx.load(os.path.join(src, "model.onnx"))
    names = frozen_inputs(model, ops)
    if not names:
        return False
    order = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    sets = sorted(d for d in os.listdir(src) if d.startswith("test_data_set_"))
    if not sets:
        return False
    # The values come from the first data set; every other set must hold the same ones.
    values = {}
    for s in sets:
        for k, name in enumerate(order):
            if name not in names:
                continue
            t = onnx.TensorProto()
            with open(os.path.join(src, s, f"input_{k}.pb"), "rb") as f:
                t.ParseFromString(f.read())
            arr = numpy_helper.to_array(t)
            if name in values and not (values[name].shape == arr.shape and (values[name] == arr).all()):
                print(f"{src}: input {name} differs across data sets; not frozen", file=sys.stderr)
                return False
            values[name] = arr
    for name in names:
        model.graph.initializer.append(numpy_helper.from_array(values[name], name))
    kept = [i for i in model.graph.input if i.name not in names]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    onnx.checker.check_model(model)
    if os.path.exists(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    onnx.save(model, os.path.join(dst, "model.onnx"))
    for s in sets:
        os.makedirs(os.path.join(dst, s))
        k_out = 0
        for k, name in enumerate(order):
            if name in names:
                continue
            shutil.copy(os.path.join(src, s, f"input_{k}.pb"), os.path.join(dst, s, f"input_{k_out}.pb"))
            k_out += 1
        for f in sorted(os.listdir(os.path.join(src, s))):
            if f.startswith("output_"):
                shutil.copy(os.path.join(src, s, f), os.path.join(dst, s, f))
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="the node suite (a dir of test_* case dirs)")
    ap.add_argument("out", help="where the frozen cases go")
    ap.add_argument("--match", action="append", default=[], help="only cases whose name contains this")
    ap.add_argument("--op", action="append", default=[], help="NAME:POS,POS... input positions to freeze")
    ap.add_argument("--sandwich", action="store_true", help="wrap 4-D f32 cases between Relus (texture tests)")
    args = ap.parse_args()
    ops = DEFAULT_OPS
    if args.op:
        ops = {}
        for spec in args.op:
            name, _, pos = spec.partition(":")
            ops[name] = {int(p) for p in pos.split(",") if p}
    n = 0
    for case in sorted(os.listdir(args.src)):
        if not case.startswith("test_") or (args.match and not any(m in case for m in args.match)):
            continue
        src = os.path.join(args.src, case)
        dst = os.path.join(args.out, case)
        if os.path.isdir(src) and freeze_case(src, dst, ops):
            if args.sandwich and not sandwich(dst):
                shutil.rmtree(dst)
                continue
            n += 1
    print(f"froze {n} cases into {args.out}")


if __name__ == "__main__":
    main()
