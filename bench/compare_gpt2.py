#!/usr/bin/env python3
"""Compares pcc's logits of an export_gpt2.py model with PyTorch's.

usage: python compare_gpt2.py MODEL_DIR [--size S] [--vocab V] OUTPUTS

MODEL_DIR is export_gpt2.py's folder (state.pt, input_0.pb); OUTPUTS the
outputs.safetensors that `pcc run --dump` wrote. Prints the largest
difference, absolute and relative to the largest logit.
"""
import argparse
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from safetensors.numpy import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_gpt2 import build  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("outputs")
    ap.add_argument("--size", default="small")
    ap.add_argument("--vocab", type=int, default=50257)
    a = ap.parse_args()
    model = build(a.vocab, a.size)
    model.load_state_dict(torch.load(os.path.join(a.model, "state.pt")))
    ids = onnx.TensorProto()
    with open(os.path.join(a.model, "input_0.pb"), "rb") as f:
        ids.ParseFromString(f.read())
    with torch.no_grad():
        ref = model(torch.from_numpy(numpy_helper.to_array(ids).copy())).logits.numpy()
    got = next(iter(load_file(a.outputs).values()))
    diff = float(np.abs(got - ref).max())
    scale = float(np.abs(ref).max())
    print(f"logits: max |pcc - PyTorch| = {diff:.3g} ({diff / scale:.2g} of max |logit|)")


if __name__ == "__main__":
    main()
