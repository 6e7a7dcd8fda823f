#!/usr/bin/env python3
"""Compares a pcc dump (outputs.safetensors) with ONNX TensorProto references.

usage: compare_outputs.py DUMP.safetensors REF.pb [REF.pb ...] [--tol T]
                          [--rtol R --atol A]

Each REF.pb is matched to the dump's tensor of the same name (or, if the
name is absent, to the output at the same position). With --tol, the check is
max|out - ref| <= T * max|ref| (the model-level criterion); otherwise
|out - ref| <= atol + rtol * |ref| element-wise (ONNX's node-test criterion).
Prints one line per tensor and exits 1 on any mismatch.
"""
import json
import struct
import sys

import numpy as np
from onnx import TensorProto, numpy_helper

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64,
          "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
          "U16": np.uint16, "U32": np.uint32, "U64": np.uint64,
          "BOOL": np.bool_, "F16": np.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[base + b:base + e], dtype=DTYPES[info["dtype"]])
        out.append((b, name, arr.reshape(info["shape"])))
    out.sort(key=lambda x: x[0])
    return [(name, arr) for _, name, arr in out]


def main(argv):
    tol = rtol = atol = None
    args = []
    i = 0
    while i < len(argv):
        if argv[i] in ("--tol", "--rtol", "--atol"):
            val = float(argv[i + 1])
            if argv[i] == "--tol":
                tol = val
            elif argv[i] == "--rtol":
                rtol = val
            else:
                atol = val
            i += 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) < 2:
        print(__doc__)
        return 2
    outputs = read_safetensors(args[0])
    by_name = dict(outputs)
    ok = True
    for pos, ref_path in enumerate(args[1:]):
        t = TensorProto()
        with open(ref_path, "rb") as f:
            t.ParseFromString(f.read())
        ref = numpy_helper.to_array(t)
        name = t.name if t.name in by_name else outputs[pos][0]
        out = by_name[name]
        if out.shape != ref.shape:
            print(f"FAIL {name}: shape {list(out.shape)} vs reference "
                  f"{list(ref.shape)}")
            ok = False
            continue
        if ref.dtype == np.bool_ or not np.issubdtype(ref.dtype, np.floating):
            good = np.array_equal(out, ref)
            print(f"{'ok' if good else 'FAIL'} {name}: exact match {good}")
            ok &= good
            continue
        o64, r64 = out.astype(np.float64), ref.astype(np.float64)
        same_nan = np.isnan(o64) == np.isnan(r64)
        diff = np.where(np.isnan(r64), 0, np.abs(o64 - r64))
        diff = np.where(np.isinf(r64) & (o64 == r64), 0, diff)
        if tol is not None:
            scale = np.max(np.abs(r64[np.isfinite(r64)])) if r64.size else 0
            err = float(np.max(diff)) if diff.size else 0.0
            good = bool(same_nan.all()) and err <= tol * max(scale, 1e-30)
            print(f"{'ok' if good else 'FAIL'} {name}: max|diff| {err:.3e}, "
                  f"{tol:g} x max|ref| = {tol * scale:.3e}")
        else:
            rt = 1e-3 if rtol is None else rtol
            at = 1e-7 if atol is None else atol
            good = bool(same_nan.all()) and bool(
                np.all(diff <= at + rt * np.abs(np.where(np.isnan(r64), 0, r64))))
            print(f"{'ok' if good else 'FAIL'} {name}: max|diff| "
                  f"{float(np.max(diff)) if diff.size else 0:.3e}")
        ok &= good
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
