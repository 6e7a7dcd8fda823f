"""Checks a learning rate that `pcc run --lr` gave a resumed SGD step.

    check_rate.py BEFORE.safetensors GRADS.safetensors AFTER.safetensors LR

BEFORE is the checkpoint the step resumed from, GRADS the step's gradients
(`--dump`), AFTER the checkpoint it saved: each trained parameter must be
BEFORE - LR * GRADS (plain SGD), and the checkpoint must keep LR.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from compare_outputs import read_safetensors  # noqa: E402


def main(argv):
    before = dict(read_safetensors(argv[1]))
    grads = dict(read_safetensors(argv[2]))
    after = dict(read_safetensors(argv[3]))
    lr = float(argv[4])
    if not grads:
        print("FAIL: no gradients")
        return 1
    worst = 0.0
    for name, g in grads.items():
        want = before[name] - np.float32(lr) * g
        scale = float(np.abs(want).max()) or 1.0
        worst = max(worst, float(np.abs(after[name] - want).max()) / scale)
    kept = float(after["pcc.lr"])
    if worst > 1e-6 or abs(kept - lr) > 1e-9 * max(1.0, lr) + 1e-7 * lr:
        print("FAIL: worst relative error %g, checkpoint keeps lr %g" %
              (worst, kept))
        return 1
    print("ok %d parameters stepped at lr %g" % (len(grads), lr))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
