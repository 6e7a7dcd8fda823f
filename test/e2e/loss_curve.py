#!/usr/bin/env python3
"""Checks the loss curve that `pcc run --steps K` prints.

usage: loss_curve.py LOG --max-ratio R      last loss <= R x first loss
       loss_curve.py LOG --same OTHER_LOG   the steps both logs print have
                                            equal losses (a run resumed from
                                            a checkpoint continues the curve)
"""
import re
import sys


def losses(path):
    out = {}
    for line in open(path):
        m = re.match(r"step (\d+): loss (\S+),", line)
        if m:
            out[int(m.group(1))] = float(m.group(2))
    return out


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    curve = losses(argv[0])
    if not curve:
        print("FAIL: no 'step N: loss X' lines")
        return 1
    if argv[1] == "--max-ratio":
        first, last = curve[min(curve)], curve[max(curve)]
        ok = last <= float(argv[2]) * first
        print(f"{'ok' if ok else 'FAIL'}: loss {first:.6f} -> {last:.6f} "
              f"over {len(curve)} steps")
        return 0 if ok else 1
    other = losses(argv[2])
    common = sorted(set(curve) & set(other))
    bad = [s for s in common if curve[s] != other[s]]
    ok = bool(common) and not bad
    print(f"{'ok' if ok else 'FAIL'}: {len(common)} common steps, "
          f"{len(bad)} differ")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
