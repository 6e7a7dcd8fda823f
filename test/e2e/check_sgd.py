#!/usr/bin/env python3
"""Compares the per-step losses that `pcc run OUT --input ... --steps K`
prints with PyTorch's losses over the same steps (plain SGD, or the
optimizer the JSON names).

usage: check_sgd.py LOG SGD_JSON [--rtol R]   (R defaults to 1e-5)

SGD_JSON is a fixture's ref/sgd.json: {"optimizer": "sgd", "lr": ...,
"losses": [l1, l2, ...]}, l1 being the loss before the first update. Step N of
LOG ("step N: loss X, ...") is compared with losses[N-1] for every N the JSON
has; all of them must be in LOG. pcc prints 6 decimals, so half a unit of the
last printed digit is allowed on top of R x |expected|. Prints
"ok OPTIMIZER N steps", or one line naming the first mismatch (step, got, expected,
relative error) and exits 1; a NaN or infinite loss is a mismatch too.
Standard library only.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loss_curve import losses  # noqa: E402  (the "step N: loss X," parser)

PRINT_ROUNDING = 5e-7  # pcc prints losses with {:F6}


def main(argv):
    args = list(argv)
    rtol = 1e-5
    if "--rtol" in args:
        i = args.index("--rtol")
        if i + 1 >= len(args):
            print(__doc__)
            return 2
        rtol = float(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__)
        return 2
    got = losses(args[0])
    with open(args[1]) as f:
        ref = json.load(f)
    expected = ref["losses"]
    name = ref.get("optimizer", "sgd")
    if not expected:
        print("FAIL: %s has no losses" % args[1])
        return 1
    for step, want in enumerate(expected, start=1):
        if step not in got:
            print("FAIL %s step %d: no 'step %d: loss X' line in %s"
                  % (name, step, step, args[0]))
            return 1
        have = got[step]
        err = abs(have - want)
        rel = err / abs(want) if want else math.inf
        if not math.isfinite(have) or err > rtol * abs(want) + PRINT_ROUNDING:
            print("FAIL %s step %d: got %r, expected %r, relative error %.3g"
                  % (name, step, have, want, rel))
            return 1
    print("ok %s %d steps" % (name, len(expected)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
