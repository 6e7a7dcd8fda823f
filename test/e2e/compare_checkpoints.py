#!/usr/bin/env python3
"""Compares two pcc checkpoints (or any two safetensors files).

usage: compare_checkpoints.py A.safetensors B.safetensors [--tol T]

Both must hold the same tensor names with the same shapes; each tensor of B
must be within T (default 1e-5) x max|A's| (plus 1e-7 for all-zero tensors)
of A's. Prints "ok N tensors", or one line per mismatch and exits 1.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_outputs import read_safetensors  # noqa: E402


def main(argv):
    tol = 1e-5
    if "--tol" in argv:
        i = argv.index("--tol")
        tol = float(argv[i + 1])
        del argv[i:i + 2]
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2])
        return 2
    a = dict(read_safetensors(argv[1]))
    b = dict(read_safetensors(argv[2]))
    bad = 0
    if set(a) != set(b):
        print("FAIL names differ: only in A %s, only in B %s"
              % (sorted(set(a) - set(b)), sorted(set(b) - set(a))))
        return 1
    for name in sorted(a):
        x, y = np.asarray(a[name], np.float64), np.asarray(b[name], np.float64)
        if x.shape != y.shape:
            print("FAIL %s: shape %s vs %s" % (name, x.shape, y.shape))
            bad += 1
            continue
        limit = tol * float(np.max(np.abs(x), initial=0.0)) + 1e-7
        diff = float(np.max(np.abs(x - y), initial=0.0))
        if diff > limit:
            print("FAIL %s: max|diff| %.3e > %.3e" % (name, diff, limit))
            bad += 1
    if bad:
        return 1
    print("ok %d tensors" % len(a))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
