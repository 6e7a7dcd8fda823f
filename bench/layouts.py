#!/usr/bin/env python3
"""Does pcc's layout search choose well on this machine? (issue 34)

usage: python3 bench/layouts.py WORK [--pcc build/bin/pcc] [--venv VENV]
                                [--steps K] [--size LxHxN]
                                [--batch B --seq T] [--rounds R]
                                [--microbatches M,...]
                                [--model MODEL.onnx --vocab V]

1. Exports a small GPT-2 (default 4 layers, hidden 256, 8 heads, vocabulary
   8192, batch 8 x 128 tokens) with torch's exporter (VENV's python, which
   needs torch, transformers and onnx), and writes random training tokens;
   or takes MODEL.onnx as it is (--model, its vocabulary V: the bundled
   gpt2-tiny is --model gpt2-tiny/model.onnx --vocab 512).
2. Calibrates this machine: `pcc calibrate -o WORK/cpu.json` (2 ranks).
3. Searches: `pcc plan MODEL --train --devices 2 --machine WORK/cpu.json`.
4. Compiles and runs every layout of 2 devices (dp 2 with each ZeRO stage;
   tp 2 with and without sequence parallelism; pp 2 with each schedule and
   2, 4 or 8 microbatches; and the search's choice, where it is none of
   these), K training steps each on MPI ranks, and takes
   the median step time after the first two; beside it, each layout's
   prediction (`pcc plan` at that layout on WORK/cpu.json). With
   --rounds R every layout runs R times, round after round, and keeps its
   fastest median: this machine's steps vary 10-40% from run to run, and a
   slow spell then lands on one round of each layout rather than on a few
   layouts. --microbatches limits the pipelines' microbatch counts (a large
   model's 2-rank steps take seconds).
5. Prints the table, the rank correlation (Spearman) of predicted and
   measured times, and the search's choice against the best measured.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s failed:\n%s%s" % (" ".join(cmd), p.stdout,
                                                 p.stderr))
    return p.stdout


def layouts(microbatches=(2, 4, 8)):
    for zero in range(4):
        yield ["--dp", "2"] + (["--zero", str(zero)] if zero else [])
    yield ["--tp", "2"]
    yield ["--tp", "2", "--sequence-parallel"]
    for schedule in ("1f1b", "gpipe", "zb-h1", "interleaved"):
        for m in microbatches:
            extra = ["--virtual-stages", "2"] if schedule == "interleaved" else []
            yield ["--pp", "2", "--microbatches", str(m), "--schedule",
                   schedule] + extra


def key(flags):
    return " ".join(flags)


def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.mean(ra), statistics.mean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb)


def search_flags(best):
    """The pcc flags of search.json's best layout."""
    flags = []
    if best["dp"] > 1:
        flags += ["--dp", str(best["dp"])]
        if best["zero"]:
            flags += ["--zero", str(best["zero"])]
    if best["tp"] > 1:
        flags += ["--tp", str(best["tp"])]
        if best["sequence_parallel"]:
            flags += ["--sequence-parallel"]
    if best["pp"] > 1:
        flags += ["--pp", str(best["pp"]), "--microbatches",
                  str(best["microbatches"]), "--schedule", best["schedule"]]
        if best["virtual_stages"] > 1:
            flags += ["--virtual-stages", str(best["virtual_stages"])]
    elif best["microbatches"] > 1:
        flags += ["--microbatches", str(best["microbatches"])]
    if best["recompute"] != "none":
        flags += ["--recompute", best["recompute"]]
    return flags


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--pcc", default="build/bin/pcc")
    ap.add_argument("--venv", default=os.environ.get("PCC_BENCH_VENV", ""))
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--size", default="4x256x8")
    ap.add_argument("--model", default="")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--microbatches", default="2,4,8")
    a = ap.parse_args()
    pcc = os.path.abspath(a.pcc)
    os.makedirs(a.work, exist_ok=True)
    model = os.path.abspath(a.model) if a.model else os.path.join(
        a.work, "model", "model.onnx")
    if not os.path.exists(model):
        python = os.path.join(a.venv, "bin", "python") if a.venv else "python3"
        here = os.path.dirname(os.path.abspath(__file__))
        run([python, os.path.join(here, "export_gpt2.py"),
             os.path.join(a.work, "model"), "--batch", str(a.batch),
             "--seq", str(a.seq),
             "--vocab", str(a.vocab), "--size", a.size])
    tokens = os.path.join(a.work, "tokens.bin")
    if not os.path.exists(tokens):
        import random
        random.seed(0)
        with open(tokens, "wb") as f:
            f.write(bytes(b for _ in range(100000)
                          for b in random.randrange(a.vocab).to_bytes(
                              2, "little")))
    machine = os.path.join(a.work, "cpu.json")
    print(run([pcc, "calibrate", "-o", machine]), end="")
    search = os.path.join(a.work, "search")
    run(["rm", "-rf", search])
    print(run([pcc, "plan", model, "--train", "--devices", "2", "--machine",
               machine, "-o", search]).split("  best:")[0], end="")
    best = json.load(open(os.path.join(search, "search.json")))["best"]
    chosen = key(search_flags(best))

    # Every 2-device layout, and the search's choice where it is none of
    # them (more virtual stages, say): it is measured too.
    candidates = list(layouts([int(m) for m in a.microbatches.split(",")]))
    if chosen not in [key(f) for f in candidates]:
        candidates.append(search_flags(best))
    built = []
    for flags in candidates:
        name = key(flags)
        plan = os.path.join(a.work, "plan-" + name.replace(" ", "_"))
        out = os.path.join(a.work, "out-" + name.replace(" ", "_"))
        run(["rm", "-rf", plan, out])
        try:
            run([pcc, "plan", model, "--train", "--machine", machine, "-o",
                 plan] + flags)
        except RuntimeError as e:
            # A layout the model refuses (microbatches that do not divide
            # its batch), in the one line pcc gives.
            reason = [l for l in str(e).splitlines() if "error:" in l]
            print("%-58s refused: %s" % (name, reason[-1] if reason else e))
            continue
        predicted = json.load(open(os.path.join(plan, "plan.json")))[
            "prediction"]["step_seconds"] * 1e3
        run([pcc, "compile", model, "--train", "--machine", machine, "-o",
             out] + flags)
        built.append((name, predicted, out))
    measured = {}
    for r in range(a.rounds):
        for name, predicted, out in built:
            text = run([pcc, "run", out, "--data", tokens, "--data-dtype",
                        "uint16", "--steps", str(a.steps)])
            times = [float(t) for t in re.findall(
                r"^step \d+: .*?([0-9.]+) ms$", text, re.M)]
            m = statistics.median(times[2:])
            measured.setdefault(name, []).append(m)
            if r + 1 == a.rounds:
                print("%-58s predicted %8.2f ms  measured %8.2f ms%s" %
                      (name, predicted, min(measured[name]),
                       "" if a.rounds == 1 else " (rounds: %s)" % ", ".join(
                           "%.2f" % x for x in measured[name])), flush=True)
    for name, predicted, out in built:
        run(["rm", "-rf", out])
    rows = [(name, predicted, min(measured[name]))
            for name, predicted, out in built]

    rho = spearman([r[1] for r in rows], [r[2] for r in rows])
    fastest = min(rows, key=lambda r: r[2])
    mine = [r for r in rows if r[0] == chosen]
    print("rank correlation (Spearman) of predicted and measured: %.3f" % rho)
    print("fastest measured: %s (%.2f ms)" % (fastest[0], fastest[2]))
    if mine:
        print("the search's choice: %s, measured %.2f ms = %.3f x the fastest"
              % (chosen, mine[0][2], mine[0][2] / fastest[2]))
    else:
        print("the search's choice (%s) is not among the layouts run" % chosen)


if __name__ == "__main__":
    sys.exit(main())
