#!/usr/bin/env python3
"""Where a step's time goes, op kind by op kind, against the cost model.

usage: python3 bench/op_profile.py TRACE.json [--skip N] [--top K]

TRACE.json is `pcc run OUT --trace TRACE.json` of a build compiled with
`pcc compile --profile-ops` (with --machine M, the predictions are M's):
each op's event is named "<kind> <ONNX node>|<predicted microseconds>|
<flops>|<bytes>". Steps
1..N (default 2) are left out as warm-up. Prints, per rank and op kind, the
ops per step, the measured and predicted microseconds per step and their
ratio, then the ops that the cost model misses the most, and the part of the
step no op accounts for (the runtime, the pipeline's waits).
"""
import argparse
import collections
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args()
    data = json.load(open(a.trace))
    events = data["traceEvents"] if isinstance(data, dict) else data
    ranks = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("args", {}).get("step", 0) > a.skip:
            ranks[e.get("pid", 0)].append(e)
    if not ranks:
        print("no events after step %d (compile with --profile-ops, run "
              "more steps)" % a.skip)
        return 1
    for rank, evs in sorted(ranks.items()):
        steps = sorted({e["args"]["step"] for e in evs})
        n = len(steps)
        kinds = collections.defaultdict(lambda: [0, 0.0, 0.0])
        ops = collections.defaultdict(lambda: [0.0, 0.0])
        span = collections.defaultdict(lambda: [float("inf"), 0.0])
        for e in evs:
            name = e["name"]
            s = span[e["args"]["step"]]
            s[0] = min(s[0], e["ts"])
            s[1] = max(s[1], e["ts"] + e["dur"])
            label, _, rest = name.partition("|")
            if not rest:
                continue  # a pipeline action, not an op
            predicted = rest.split("|")[0]
            kind = label.split(" ")[0]
            k = kinds[kind]
            k[0] += 1
            k[1] += e["dur"]
            k[2] += float(predicted)
            o = ops[label]
            o[0] += e["dur"]
            o[1] += float(predicted)
        total_measured = sum(k[1] for k in kinds.values()) / n
        total_predicted = sum(k[2] for k in kinds.values()) / n
        step_span = sum(s[1] - s[0] for s in span.values()) / n
        print("rank %d, %d steps: ops %.1f us measured, %.1f us predicted "
              "(%.2f x); first to last op %.1f us per step" %
              (rank, n, total_measured, total_predicted,
               total_measured / max(total_predicted, 1e-9), step_span))
        print("  %-28s %7s %12s %12s %7s" % ("kind", "ops", "measured us",
                                             "predicted us", "ratio"))
        for kind, (count, measured, predicted) in sorted(
                kinds.items(), key=lambda kv: -kv[1][1]):
            print("  %-28s %7d %12.1f %12.1f %7.2f" %
                  (kind, count // n, measured / n, predicted / n,
                   measured / max(predicted, 1e-9)))
        print("  most underpredicted ops (measured - predicted per step):")
        worst = sorted(ops.items(), key=lambda kv: -(kv[1][0] - kv[1][1]))
        for label, (measured, predicted) in worst[:a.top]:
            print("    %-50s %9.1f us, predicted %9.1f" %
                  (label[:50], measured / n, predicted / n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
