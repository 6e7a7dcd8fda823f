"""Writes a copy of an ONNX model whose initializers are named without a
prefix (an exporter's wrapper, "m."): strip_prefix.py IN OUT PREFIX."""

import sys

import onnx

source, target, prefix = sys.argv[1:4]
model = onnx.load(source)
renamed = {}
for init in model.graph.initializer:
    if init.name.startswith(prefix):
        renamed[init.name] = init.name[len(prefix):]
        init.name = renamed[init.name]
for node in model.graph.node:
    for i, name in enumerate(node.input):
        if name in renamed:
            node.input[i] = renamed[name]
for value in list(model.graph.input) + list(model.graph.value_info):
    if value.name in renamed:
        value.name = renamed[value.name]
onnx.save(model, target)
print("renamed", len(renamed))
