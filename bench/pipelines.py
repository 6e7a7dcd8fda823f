#!/usr/bin/env python3
"""Pipeline schedules side by side on this machine: 1F1B against the
schedules that change what a step does (issue 51: 2bw), each predicted
beside measured.

usage: python3 bench/pipelines.py WORK --model MODEL.onnx --input INPUT.pb
                                  [--pcc build/bin/pcc] [--machine M.json]
                                  [--pp 2,4] [--microbatches 4,8]
                                  [--schedules 1f1b,2bw] [--steps K]
                                  [--rounds R]

For every pipeline degree, microbatch count and schedule: `pcc plan` at that
layout on --machine (`pcc calibrate -o M.json` makes one; without it, the
plan uses the default CPU model) gives the predicted step and the bubble;
`pcc compile` and `pcc run --steps K` on the model's input (AdamW) give the
measured step, the median of the steps after the first two. With --rounds
R, every layout runs R times round after round and keeps its fastest
median. A 2bw step is measured once the pipeline is full: each call ends a
step and starts the next. Prints one line per layout and, per degree and
microbatch count, each schedule's measured time against 1F1B's.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s failed:\n%s%s" % (" ".join(cmd), p.stdout,
                                                 p.stderr))
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--pcc", default="build/bin/pcc")
    ap.add_argument("--machine", default="")
    ap.add_argument("--pp", default="2,4")
    ap.add_argument("--microbatches", default="4,8")
    ap.add_argument("--schedules", default="1f1b,2bw")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    machine = ["--machine", a.machine] if a.machine else []
    train = ["--train", "--optimizer", "adamw", "--lr", "1e-4"]
    built = []
    for pp in [int(x) for x in a.pp.split(",")]:
        for m in [int(x) for x in a.microbatches.split(",")]:
            for schedule in a.schedules.split(","):
                flags = ["--pp", str(pp), "--microbatches", str(m),
                         "--schedule", schedule]
                name = "pp %d, %d microbatches, %s" % (pp, m, schedule)
                tag = "pp%d-m%d-%s" % (pp, m, schedule)
                plan = os.path.join(a.work, "plan-" + tag)
                out = os.path.join(a.work, "out-" + tag)
                run(["rm", "-rf", plan, out])
                try:
                    run([a.pcc, "plan", a.model, "-o", plan] + train +
                        machine + flags)
                except RuntimeError as e:
                    reason = [l for l in str(e).splitlines() if "error:" in l]
                    print("%-34s refused: %s" % (name, reason[-1] if reason
                                                 else e), flush=True)
                    continue
                p = json.load(open(os.path.join(plan, "plan.json")))
                predicted = p["prediction"]["step_seconds"] * 1e3
                bubble = p["schedule"]["bubble_fraction"]
                run([a.pcc, "compile", a.model, "-o", out] + train +
                    machine + flags)
                built.append((pp, m, schedule, name, predicted, bubble, out))
    measured = {}
    for r in range(a.rounds):
        for pp, m, schedule, name, predicted, bubble, out in built:
            text = run([a.pcc, "run", out, "--input", a.input, "--steps",
                        str(a.steps)])
            times = [float(t) for t in re.findall(
                r"^step \d+: .*?([0-9.]+) ms$", text, re.M)]
            measured.setdefault(name, []).append(
                statistics.median(times[2:]))
    best = {}
    for pp, m, schedule, name, predicted, bubble, out in built:
        t = min(measured[name])
        best[(pp, m, schedule)] = t
        print("%-34s bubble %5.1f%%  predicted %9.2f ms  measured %9.2f ms%s"
              % (name, 100 * bubble, predicted, t,
                 "" if a.rounds == 1 else "  (rounds: %s)" % ", ".join(
                     "%.2f" % x for x in measured[name])), flush=True)
        run(["rm", "-rf", out])
    for (pp, m, schedule), t in best.items():
        base = best.get((pp, m, "1f1b"))
        if schedule != "1f1b" and base:
            print("pp %d, %d microbatches: %s measured %.3f x 1F1B's" %
                  (pp, m, schedule, t / base))


if __name__ == "__main__":
    sys.exit(main())
