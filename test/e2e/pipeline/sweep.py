#!/usr/bin/env python3
"""Plans a GPT over a sweep of layer counts, pipeline degrees and schedules
with `pcc plan` and checks what every plan must hold:

  plan        the plan is made (exit 0, a plan.json)
  balance     the slowest stage (or interleaved chunk), forward and backward
              together, is within --balance (1.10) x the least that any cut
              can give, wherever every stage or chunk gets at least two
              layers: the larger of the mean stage and the heaviest single
              op (an LM head over a large vocabulary can outweigh a mean
              stage; no cut splits an op). Where the planner took another
              count of the LM head's pieces than pcc-attach-loss's own
              (plan.json's head_pieces_choice), for a shorter planned step
              with coarser pieces: that count's step is the least of the
              counts planned, or within 1% of it
  interleaved its bubble is below 1F1B's wherever every chunk gets a layer
  zb-h1       its bubble is below 1F1B's
  2bw         its bubble (a step once full) is below 1F1B's, and every
              rank's parameter bytes are at least 1.8 x its gradient bytes
              (the weights one update old beside the newest)
  chimera     (an even pipeline degree) its bubble is not above 1F1B's,
              and each stage is on two ranks: ranks r and p - 1 - r hold
              the same parameter bytes

usage: sweep.py PCC OUTDIR [--layers 1-64,96] [--pp 2-16] [--jobs 2]
                [--model gpt:hidden=...] [--microbatches-per-rank 2]
                [--checks plan,balance,interleaved,zb-h1,2bw,chimera]

Prints one line per failure and a summary line `N passed, N failed`; exits
1 when anything failed.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys


def ranges(text):
    out = []
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def plan(args, layers, pp, kind, v):
    m = args.microbatches_per_rank * pp
    name = f"L{layers}-pp{pp}-{kind}" + (f"-v{v}" if v > 1 else "")
    out = os.path.join(args.outdir, name)
    shutil.rmtree(out, ignore_errors=True)
    model = f"{args.model},layers={layers},batch={m}"
    cmd = [args.pcc, "plan", "--model", model, "--train", "--pp", str(pp),
           "--microbatches", str(m), "--schedule", kind, "-o", out]
    if v > 1:
        cmd += ["--virtual-stages", str(v)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return name, None, r.stderr.strip().splitlines()[-1:] or ["no output"]
    with open(os.path.join(out, "plan.json")) as f:
        result = json.load(f)
    shutil.rmtree(out, ignore_errors=True)
    return name, result, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pcc")
    ap.add_argument("outdir")
    ap.add_argument("--layers", default="1-64,96")
    ap.add_argument("--pp", default="2-16")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--model",
                    default="gpt:hidden=1024,heads=16,vocab=50304,seq=1024")
    ap.add_argument("--microbatches-per-rank", type=int, default=2)
    ap.add_argument("--balance", type=float, default=1.10)
    ap.add_argument("--checks",
                    default="plan,balance,interleaved,zb-h1,2bw,chimera")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)

    jobs = []
    for layers in ranges(args.layers):
        for pp in ranges(args.pp):
            if pp > layers:
                continue
            for kind in ("gpipe", "1f1b", "zb-h1", "2bw"):
                jobs.append((layers, pp, kind, 1))
            if pp % 2 == 0:
                jobs.append((layers, pp, "chimera", 1))
            for v in (2, 3):
                if pp * v <= layers:
                    jobs.append((layers, pp, "interleaved", v))

    results = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(plan, args, *job): job for job in jobs}
        for fut in concurrent.futures.as_completed(futures):
            results[futures[fut]] = fut.result()

    passed = failed = 0
    failures = []

    checks = set(args.checks.split(","))

    def check(ok, what, kind="plan"):
        nonlocal passed, failed
        if kind not in checks:
            return
        if ok:
            passed += 1
        else:
            failed += 1
            failures.append(what)

    for job in jobs:
        layers, pp, kind, v = job
        name, p, error = results[job]
        check(p is not None, f"{name}: plan failed: {' '.join(error or [])}")
        if p is None:
            continue
        stages = p["stages"]
        times = [s["time"] for s in stages]
        mean = sum(times) / len(times)
        slowest = max(times)
        heaviest_op = p.get("balance", {}).get("heaviest_op_time", 0)
        choice = p.get("head_pieces_choice")
        if choice and choice["chosen"] != choice["pass"]:
            steps = choice["step_seconds"]
            best = min(steps.values())
            check(steps[str(choice["chosen"])] <= 1.01 * best,
                  f"{name}: {choice['chosen']} head pieces planned at "
                  f"{steps[str(choice['chosen'])]:.4g} s, the least {best:.4g}",
                  "balance")
        elif layers >= 2 * len(stages):
            least = max(mean, heaviest_op)
            check(slowest <= args.balance * least,
                  f"{name}: slowest stage {slowest:.4g} is "
                  f"{slowest / least:.3f} x the least possible {least:.4g} "
                  f"(mean {mean:.4g}, heaviest op {heaviest_op:.4g})",
                  "balance")
        bubble = p["schedule"]["bubble_fraction"]
        base = results.get((layers, pp, "1f1b", 1))
        if kind in ("interleaved", "zb-h1") and base and base[1]:
            ref = base[1]["schedule"]["bubble_fraction"]
            if kind == "zb-h1" or layers >= len(stages):
                check(bubble < ref,
                      f"{name}: bubble {bubble:.4f} not below 1F1B's "
                      f"{ref:.4f}", kind)
        if kind == "chimera" and base and base[1]:
            ref = base[1]["schedule"]["bubble_fraction"]
            check(bubble <= ref + 1e-9,
                  f"{name}: bubble {bubble:.4f} above 1F1B's {ref:.4f}", kind)
            held = [r["parameter_bytes"] for r in p["ranks"]]
            check(held == held[::-1],
                  f"{name}: ranks r and p - 1 - r hold other parameter "
                  f"bytes: {held}", kind)
        if kind == "2bw" and base and base[1]:
            ref = base[1]["schedule"]["bubble_fraction"]
            check(bubble < ref,
                  f"{name}: bubble {bubble:.4f} not below 1F1B's {ref:.4f}",
                  kind)
            # Each rank's parameters in two versions, against the one
            # version its gradients have (stages may be cut otherwise than
            # 1F1B's, so the ranks are compared with themselves).
            for r in p["ranks"]:
                check(r["parameter_bytes"] >= 1.8 * r["gradient_bytes"],
                      f"{name}: rank {r['rank']} holds parameter bytes "
                      f"{r['parameter_bytes']}, below 1.8 x its gradient "
                      f"bytes {r['gradient_bytes']}", kind)

    for f in failures:
        print("FAIL " + f)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
