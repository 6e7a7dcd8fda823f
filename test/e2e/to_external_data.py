#!/usr/bin/env python3
"""Rewrites an ONNX model with its initializers in one external data file,
as exporters save models near protobuf's 2 GB limit.

usage: to_external_data.py IN.onnx OUT.onnx

OUT's folder receives OUT.onnx and OUT.onnx.data; every initializer of at
least 64 bytes moves to the data file, each at an offset aligned as
onnx's own writer aligns it.
"""
import os
import sys

import onnx
from onnx import external_data_helper


def main():
    src, out = sys.argv[1], sys.argv[2]
    model = onnx.load(src)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    external_data_helper.convert_model_to_external_data(
        model, all_tensors_to_one_file=True,
        location=os.path.basename(out) + ".data", size_threshold=64)
    onnx.save_model(model, out)
    moved = sum(t.data_location == onnx.TensorProto.EXTERNAL
                for t in model.graph.initializer)
    print(f"{moved} initializers in {os.path.basename(out)}.data")


if __name__ == "__main__":
    main()
