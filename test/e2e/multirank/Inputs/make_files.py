"""Writes the whole tensors of model.c for a mesh of N ranks:
DIR/weights.safetensors (w = 1..4N, v = 100..100+3N-2, pcc.step = 0) and
INPUT (x = X0,2,3,4, u = 1000, 2000, ..., 2000N).
Usage: make_files.py N DIR INPUT [X0 (default 1)]"""
import json
import struct
import sys


def write_safetensors(path, tensors):
    """tensors: [(name, dtype, shape, format, values)]"""
    header, data = {}, b""
    for name, dtype, shape, fmt, values in tensors:
        raw = struct.pack("<%d%s" % (len(values), fmt), *values)
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


n, folder, inputs = int(sys.argv[1]), sys.argv[2], sys.argv[3]
x0 = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
write_safetensors(folder + "/weights.safetensors", [
    ("w", "F32", [4 * n], "f", [float(i + 1) for i in range(4 * n)]),
    ("v", "F32", [3 * n - 1], "f", [float(100 + i) for i in range(3 * n - 1)]),
    ("pcc.step", "I64", [], "q", [0]),
])
write_safetensors(inputs, [
    ("x", "F32", [4], "f", [x0, 2.0, 3.0, 4.0]),
    ("u", "F32", [2 * n], "f", [float(1000 * (i + 1)) for i in range(2 * n)]),
])
