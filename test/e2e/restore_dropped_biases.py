#!/usr/bin/env python3
"""Gives back to a fixture's Gemm nodes the biases the exporter removed.

usage: restore_dropped_biases.py FIXTURE_DIR OUT.onnx

The dynamo exporter's optimizer removes the bias of a Gemm when it is zero,
as every bias of a freshly initialized model is, so those parameters are
gone from the ONNX file while PyTorch, whose losses the fixture's
ref/sgd.json holds, trains them. No compiler can train a parameter that is
not in the graph; to compare a training run with PyTorch's, this writes
FIXTURE_DIR/model.onnx to OUT.onnx with, for every Gemm without a bias
whose weight initializer is P.weight and whose PyTorch parameter P.bias the
fixture's meta.json lists, an initializer P.bias as its bias: the value of
the initializer meta.json says P.bias was merged into, or zeros. Prints
"restored N biases". Needs python3-onnx and python3-numpy.
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2])
        return 2
    fixture, out = argv
    model = onnx.load(os.path.join(fixture, "model.onnx"))
    with open(os.path.join(fixture, "meta.json")) as f:
        params = json.load(f)["grads"]
    inits = {t.name: t for t in model.graph.initializer}
    restored = 0
    for node in model.graph.node:
        if node.op_type != "Gemm" or len(node.input) != 2:
            continue
        weight = node.input[1]
        if not weight.endswith(".weight") or weight not in inits:
            continue
        bias = weight[: -len(".weight")] + ".bias"
        if bias not in params or bias in inits:
            continue
        trans_b = any(a.name == "transB" and a.i for a in node.attribute)
        dims = inits[weight].dims
        columns = dims[0] if trans_b else dims[1]
        merged = params[bias].get("onnx_initializer", [])
        if merged:
            value = numpy_helper.to_array(inits[merged[0]])
        else:
            value = np.zeros(columns, np.float32)
        if value.shape != (columns,):
            print("FAIL: %s would be %s, not [%d]"
                  % (bias, list(value.shape), columns))
            return 1
        model.graph.initializer.append(numpy_helper.from_array(value, bias))
        inits[bias] = model.graph.initializer[-1]
        node.input.append(bias)
        restored += 1
    onnx.save(model, out)
    print("restored %d biases" % restored)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
