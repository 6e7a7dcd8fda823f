#!/usr/bin/env python3
"""Compares a pcc training dump with PyTorch's loss and gradients.

usage: compare_grads.py DUMP_DIR MODEL_DIR [--loss-rtol R] [--grad-tol T]

MODEL_DIR holds meta.json and ref/ as made by the export scripts. The loss
(DUMP_DIR/outputs.safetensors, "loss") must be within R (default 1e-5)
relative of ref/loss.pb. Every parameter that meta.json maps to one ONNX
initializer, as is ("onnx_initializer") or transposed
("onnx_initializer_transposed"), or whose several initializers were re-tied
into one, must have a gradient in
DUMP_DIR/grads.safetensors within T (default 1e-4) x max|ref grad|,
compared transposed for transposed initializers. Prints one line per check
and exits 1 on any failure.
"""
import json
import os
import sys

import numpy as np
from onnx import TensorProto, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_outputs import read_safetensors  # noqa: E402


def read_pb(path):
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def main(argv):
    loss_rtol, grad_tol = 1e-5, 1e-4
    args = []
    i = 0
    while i < len(argv):
        if argv[i] == "--loss-rtol":
            loss_rtol = float(argv[i + 1]); i += 2
        elif argv[i] == "--grad-tol":
            grad_tol = float(argv[i + 1]); i += 2
        else:
            args.append(argv[i]); i += 1
    if len(args) != 2:
        print(__doc__)
        return 2
    dump, model = args
    meta = json.load(open(os.path.join(model, "meta.json")))
    outputs = dict(read_safetensors(os.path.join(dump, "outputs.safetensors")))
    grads = dict(read_safetensors(os.path.join(dump, "grads.safetensors")))
    ok = True
    ref_loss = read_pb(os.path.join(model, "ref", "loss.pb")).item()
    loss = np.asarray(outputs["loss"]).item()
    rel = abs(loss - ref_loss) / max(abs(ref_loss), 1e-30)
    good = rel <= loss_rtol
    print(f"{'ok' if good else 'FAIL'} loss: {loss:.7f} vs {ref_loss:.7f} "
          f"(relative {rel:.2e})")
    ok &= good
    checked = 0
    for param, info in sorted(meta["grads"].items()):
        same = info.get("onnx_initializer", [])
        trans = info.get("onnx_initializer_transposed", [])
        # A parameter stored twice (a tied embedding and its transposed
        # copy) is re-tied by the importer and reported under one name.
        present = [(n, False) for n in same if n in grads] + \
                  [(n, True) for n in trans if n in grads]
        if len(same) + len(trans) != 1 and len(present) != 1:
            continue
        name, transposed = present[0] if len(present) == 1 else \
            ((same or trans)[0], bool(trans))
        ref = read_pb(os.path.join(model, "ref", "grads", info["file"]))
        if name not in grads:
            print(f"FAIL {param}: no gradient for initializer '{name}'")
            ok = False
            continue
        got = grads[name].astype(np.float64)
        if transposed:
            got = got.T
        if got.shape != ref.shape:
            print(f"FAIL {param}: shape {list(got.shape)} vs {list(ref.shape)}")
            ok = False
            continue
        scale = float(np.max(np.abs(ref))) if ref.size else 0.0
        err = float(np.max(np.abs(got - ref))) if ref.size else 0.0
        # The floor: a gradient that is mathematically zero (a key bias
        # under softmax) comes out as float32 rounding noise on both sides.
        good = err <= max(grad_tol * scale, 1e-9)
        checked += 1
        if not good:
            print(f"FAIL {param} ({name}): max|diff| {err:.3e} > "
                  f"{grad_tol:g} x {scale:.3e}")
        ok &= good
    print(f"{'ok' if ok else 'FAIL'} gradients: {checked} compared")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
