#!/usr/bin/env python3
"""Times the peers on the benchmark model: onnxruntime and PyTorch (eager and
torch.compile), forward and one AdamW training step. bench/run.sh calls it.

usage: python peers.py DIR --threads N [--steps K] [--warmup W] [--which LIST]
                       [--rounds R --pcc PCC --pcc-forward OUT --pcc-train OUT]

DIR is what export_gpt2.py wrote. Prints one line per measurement:
  RESULT <name> <median ms> <min ms>

With --pcc-forward (a folder made by `pcc compile`), pcc's forward and
onnxruntime's take turns: R rounds, each K steps of one then K of the other
(which goes first alternates), and each system's median is over all its
rounds' steps. The machine's slower and faster minutes (a virtual machine's
neighbours) then fall on both alike. With --pcc-train (a `pcc compile
--train` folder), pcc's training step and PyTorch eager's take turns the
same way, over half as many rounds (R / 2, rounded up): a step is seconds
long.
"""
import argparse
import os
import re
import statistics
import subprocess
import time

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from export_gpt2 import build


def step_times(fn, steps, warmup):
    """The times (ms) of `steps` calls of fn after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return times


def summary(times):
    return statistics.median(times), min(times)


def timed(fn, steps, warmup):
    return summary(step_times(fn, steps, warmup))


def pcc_steps(pcc, out, input_file, steps, warmup):
    """Step times (ms) of `pcc run`, as it prints them, after warm-up."""
    run = subprocess.run([pcc, "run", out, "--input", input_file, "--steps",
                          str(steps + warmup)], check=True,
                         capture_output=True, text=True)
    times = [float(m.group(1)) for m in
             re.finditer(r"^step \d+: (?:.*, )?([0-9.]+) ms$", run.stdout,
                         re.MULTILINE)]
    if len(times) != steps + warmup:
        raise SystemExit(f"peers.py: cannot read pcc's step times:\n{run.stdout}")
    return times[warmup:]


def in_turns(rounds, first, second):
    """Runs first(r) and second(r) in turns for `rounds` rounds, which goes
    first alternating; each returns its round's step times. Returns the two
    lists of all their times."""
    times = ([], [])
    for r in range(rounds):
        for who in ((0, 1) if r % 2 == 0 else (1, 0)):
            times[who].extend((first, second)[who](r))
    return times


def report(name, res):
    print(f"RESULT {name} {res[0]:.1f} {res[1]:.1f}", flush=True)


def lm_loss(logits, ids):
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def torch_model(d, vocab):
    model = build(vocab)
    model.load_state_dict(torch.load(os.path.join(d, "state.pt")))
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--which", default="ort,eager,compile")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--pcc", default="pcc")
    ap.add_argument("--pcc-forward")
    ap.add_argument("--pcc-train")
    a = ap.parse_args()
    which = a.which.split(",")
    torch.set_num_threads(a.threads)
    with open(os.path.join(a.dir, "input_0.pb"), "rb") as f:
        t = onnx.TensorProto()
        t.ParseFromString(f.read())
    ids_np = numpy_helper.to_array(t)
    ids = torch.from_numpy(ids_np)
    input_file = os.path.join(a.dir, "input_0.pb")
    vocab = int(onnx.load(os.path.join(a.dir, "model.onnx"), load_external_data=False)
                .graph.output[0].type.tensor_type.shape.dim[2].dim_value)

    if "ort" in which:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(os.path.join(a.dir, "model.onnx"), so,
                                    providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name

        def ort_forward():
            sess.run(None, {name: ids_np})

        ort_times, pcc_times = in_turns(
            a.rounds, lambda r: step_times(ort_forward, a.steps, a.warmup),
            lambda r: pcc_steps(a.pcc, a.pcc_forward, input_file, a.steps, 2)
            if a.pcc_forward else [])
        report("ort-forward", summary(ort_times))
        if pcc_times:
            report("pcc-forward", summary(pcc_times))
        del sess

    for mode in ("eager", "compile"):
        if mode not in which:
            continue
        model = torch_model(a.dir, vocab)
        fwd = model
        if mode == "compile":
            fwd = torch.compile(model)

        def forward():
            with torch.inference_mode():
                fwd(ids)
        report(f"torch-{mode}-forward", timed(forward, a.steps, a.warmup))

        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

        def loss_of():
            return lm_loss(model(ids).logits, ids)
        if mode == "compile":
            loss_of = torch.compile(loss_of)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = loss_of()
            loss.backward()
            opt.step()
        if mode == "eager" and a.pcc_train:
            eager_times, pcc_times = in_turns(
                (a.rounds + 1) // 2,
                lambda r: step_times(step, a.steps, a.warmup if r == 0 else 1),
                lambda r: pcc_steps(a.pcc, a.pcc_train, input_file, a.steps, 2))
            report("torch-eager-train", summary(eager_times))
            report("pcc-train", summary(pcc_times))
        else:
            report(f"torch-{mode}-train", timed(step, a.steps, a.warmup))
        del model, opt


if __name__ == "__main__":
    main()
