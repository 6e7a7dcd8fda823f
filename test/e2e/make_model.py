#!/usr/bin/env python3
"""Writes small ONNX models (good and deliberately bad) for pcc's lit tests.

usage: make_model.py KIND OUT [ARG]

Every model is built with onnx.helper and written without running the ONNX
checker (most of the bad ones would not pass it). KIND is one of:

  relu              x: float[2,3] -> Relu (node "relu_node") -> y
  unsupported       x -> FancyOp (node "my_fancy_node", not an ONNX op) -> y
  custom-domain     x -> com.example::Relu (node "vendor_relu") -> y
  dangling          y = Add(x, ghost) (node "add_ghost"); nothing produces ghost
  cycle             a = Relu(b) ("relu_a"), b = Relu(a) ("relu_b"), y = Add(x, a)
  external          initializer W (4 floats) stored as external data at the
                    location ARG (relative to OUT's folder), y = Add(x, W);
                    also writes the 16 bytes of W to OUT's folder/w.bin
  absurd-initializer  initializer of dims [2^20, 2^20, 2^10] (no data)
  absurd-input      graph input of dims [2^40, 2^40]
  negative-input    graph input with a dimension of -3
  symbolic-input    graph input of shape ["batch", 3]
  no-opset          relu without any opset import
  no-outputs        relu with the graph output removed
  missing-output    graph output "z" that no node produces
  wrong-data-size   initializer of dims [2,3] holding 5 floats
  locations         nodes named like a PyTorch export, for diagnostics:
                    ARG picks the failing node (matmul, reshape, gather,
                    unnamed, trilu, rank17, ok)
  tensor            ARG is "SHAPE:DTYPE[:V,V,...]" (e.g. "2x3:float32" or
                    "1:int64:-1"; an empty SHAPE is a scalar): writes a
                    TensorProto named "x" of that shape holding the values
                    given, or filled with 0.5, for `--bind` and
                    `pcc run --input`
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]


def model(nodes, inputs, outputs, initializers=(), opset=OPSET):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=opset, ir_version=8)


def vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def relu_model(**kw):
    return model([helper.make_node("Relu", ["x"], ["y"], name="relu_node")],
                 [vi("x", [2, 3])], [vi("y", [2, 3])], **kw)


def external(out, location):
    folder = os.path.dirname(os.path.abspath(out))
    data = np.arange(4, dtype=np.float32).tobytes()
    with open(os.path.join(folder, "w.bin"), "wb") as f:
        f.write(data)
    w = TensorProto()
    w.name = "W"
    w.data_type = TensorProto.FLOAT
    w.dims.extend([4])
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"),
                       ("length", str(len(data)))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    return model([helper.make_node("Add", ["x", "W"], ["y"], name="add_w")],
                 [vi("x", [4])], [vi("y", [4])], [w])


def locations(which):
    """A small attention-like block whose node names look like a PyTorch
    export's; `which` makes one node fail (or none, with "ok")."""
    x = vi("x", [2, 4])
    w = numpy_helper.from_array(
        np.arange(16, dtype=np.float32).reshape(4, 4) / 16,
        "blocks.0.attn.c_attn.weight")
    nodes = [helper.make_node("MatMul", ["x", "blocks.0.attn.c_attn.weight"],
                              ["h"], name="/blocks.0/attn/c_attn/MatMul")]
    inits = [w]
    if which == "matmul":
        bad = numpy_helper.from_array(np.ones((3, 2), np.float32),
                                      "blocks.0.mlp.weight")
        inits.append(bad)
        nodes.append(helper.make_node("MatMul", ["h", "blocks.0.mlp.weight"],
                                      ["y"], name="/blocks.0/mlp/MatMul"))
    elif which == "reshape":
        shape = numpy_helper.from_array(np.array([3, -1], np.int64), "shape")
        inits.append(shape)
        nodes.append(helper.make_node("Reshape", ["h", "shape"], ["y"],
                                      name="/blocks.0/attn/Reshape_1"))
    elif which == "gather":
        nodes.append(helper.make_node("Gather", ["h", "h"], ["y"], axis=5,
                                      name="/blocks.0/attn/Gather_7"))
    elif which == "unnamed":
        nodes.append(helper.make_node("Relu", ["h"], ["r"]))
        nodes.append(helper.make_node("Softmax", ["r"], ["y"], axis=2))
    elif which == "trilu":
        nodes.append(helper.make_node("ReduceMean", ["h"], ["r"], axes=[0],
                                      keepdims=0, name="/blocks.0/ReduceMean"))
        nodes.append(helper.make_node("Trilu", ["r"], ["y"],
                                      name="/blocks.0/attn/Trilu"))
    elif which == "rank17":
        # The CPU code generator handles GatherElements up to rank 16.
        shape = numpy_helper.from_array(np.array([1] * 17, np.int64), "r17")
        index = numpy_helper.from_array(np.zeros([1] * 17, np.int64), "index")
        inits += [shape, index]
        nodes.append(helper.make_node("ReduceSum", ["h"], ["s"], keepdims=0,
                                      name="/blocks.0/ReduceSum"))
        nodes.append(helper.make_node("Reshape", ["s", "r17"], ["s17"],
                                      name="/blocks.0/Reshape"))
        nodes.append(helper.make_node("GatherElements", ["s17", "index"],
                                      ["y"], name="/blocks.0/GatherElements"))
    elif which == "ok":
        nodes.append(helper.make_node("Relu", ["h"], ["y"],
                                      name="/blocks.0/act/Relu"))
    else:
        sys.exit("unknown locations case " + which)
    return model(nodes, [x], [vi("y", None)], inits)


def tensor(out, spec):
    shape, dtype, *values = spec.split(":")
    dims = [int(d) for d in shape.split("x")] if shape else []
    if values:
        array = np.array([float(v) for v in values[0].split(",")])
        array = array.astype(dtype).reshape(dims)
    else:
        array = np.full(dims, 0.5).astype(dtype)
    t = numpy_helper.from_array(array, "x")
    with open(out, "wb") as f:
        f.write(t.SerializeToString())


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    kind, out = sys.argv[1], sys.argv[2]
    arg = sys.argv[3] if len(sys.argv) > 3 else None
    if kind == "tensor":
        return tensor(out, arg)
    if kind == "relu":
        m = relu_model()
    elif kind == "unsupported":
        m = model([helper.make_node("FancyOp", ["x"], ["y"],
                                    name="my_fancy_node")],
                  [vi("x", [2, 3])], [vi("y", [2, 3])])
    elif kind == "custom-domain":
        m = model([helper.make_node("Relu", ["x"], ["y"], name="vendor_relu",
                                    domain="com.example")],
                  [vi("x", [2, 3])], [vi("y", [2, 3])],
                  opset=OPSET + [helper.make_opsetid("com.example", 1)])
    elif kind == "dangling":
        m = model([helper.make_node("Add", ["x", "ghost"], ["y"],
                                    name="add_ghost")],
                  [vi("x", [2, 3])], [vi("y", [2, 3])])
    elif kind == "cycle":
        m = model([helper.make_node("Relu", ["b"], ["a"], name="relu_a"),
                   helper.make_node("Relu", ["a"], ["b"], name="relu_b"),
                   helper.make_node("Add", ["x", "a"], ["y"], name="add")],
                  [vi("x", [2, 3])], [vi("y", [2, 3])])
    elif kind == "external":
        m = external(out, arg)
    elif kind == "absurd-initializer":
        w = TensorProto()
        w.name = "huge"
        w.data_type = TensorProto.FLOAT
        w.dims.extend([1 << 20, 1 << 20, 1 << 10])
        m = model([helper.make_node("Add", ["x", "huge"], ["y"], name="add")],
                  [vi("x", [1])], [vi("y", [1])], [w])
    elif kind == "absurd-input":
        m = model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                  [vi("x", [1 << 40, 1 << 40])], [vi("y", None)])
    elif kind == "negative-input":
        m = model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                  [vi("x", [2, -3])], [vi("y", None)])
    elif kind == "symbolic-input":
        m = model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                  [vi("x", ["batch", 3])], [vi("y", ["batch", 3])])
    elif kind == "no-opset":
        m = relu_model(opset=[])
    elif kind == "no-outputs":
        m = relu_model()
        del m.graph.output[:]
    elif kind == "missing-output":
        m = relu_model()
        m.graph.output.append(vi("z", [2, 3]))
    elif kind == "wrong-data-size":
        w = TensorProto()
        w.name = "w"
        w.data_type = TensorProto.FLOAT
        w.dims.extend([2, 3])
        w.float_data.extend([1.0, 2.0, 3.0, 4.0, 5.0])
        m = model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                  [vi("x", [2, 3])], [vi("y", [2, 3])], [w])
    elif kind == "absurd-typed-initializer":
        w = TensorProto()
        w.name = "w"
        w.data_type = TensorProto.FLOAT
        w.dims.extend([9999999992])
        w.float_data.extend([1.0, 2.0])
        m = model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                  [vi("x", [2])], [vi("y", [2])], [w])
    elif kind == "locations":
        m = locations(arg)
    else:
        sys.exit("unknown kind " + kind)
    with open(out, "wb") as f:
        f.write(m.SerializeToString())


if __name__ == "__main__":
    main()
