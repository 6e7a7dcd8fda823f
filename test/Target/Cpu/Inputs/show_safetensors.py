"""Prints a safetensors file for FileCheck: its metadata, then one line per
tensor, `name dtype shape: values` (values rounded to 6 digits)."""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64,
          "I32": np.int32, "F16": np.float16, "U8": np.uint8}

data = open(sys.argv[1], "rb").read()
(length,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + length])
print("metadata", json.dumps(header.pop("__metadata__", {}), sort_keys=True))
for name, info in header.items():
    begin, end = info["data_offsets"]
    values = np.frombuffer(data[8 + length + begin:8 + length + end],
                           DTYPES[info["dtype"]])
    shown = " ".join("%.6g" % v for v in values)
    print(f"{name} {info['dtype']} {info['shape']}: {shown}")
