#!/usr/bin/env python3
"""PyTorch on the GPU beside pcc's CUDA build: bench/gpu.sh calls it.

usage: python gpu_peers.py DIR [--steps K] [--warmup W] [--which eager,compile]

DIR is what export_gpt2.py wrote. Runs GPT-2 124M in bf16 autocast (f32
master weights, as pcc --dtype bf16) on cuda:0: the forward (inference mode)
and one training step (zero_grad, forward, cross-entropy, backward, AdamW
with lr 1e-3 and weight decay 0.01, pcc's defaults), eager and with
torch.compile. Prints one line per measurement:
  RESULT <name> <median ms> <min ms>
"""
import argparse
import os
import time

import onnx
import torch
from onnx import numpy_helper

from export_gpt2 import build


def timed(fn, steps, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    return times[len(times) // 2], times[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--which", default="eager,compile")
    a = ap.parse_args()
    with open(os.path.join(a.dir, "input_0.pb"), "rb") as f:
        t = onnx.TensorProto()
        t.ParseFromString(f.read())
    ids = torch.from_numpy(numpy_helper.to_array(t)).cuda()
    vocab = int(onnx.load(os.path.join(a.dir, "model.onnx"), load_external_data=False)
                .graph.output[0].type.tensor_type.shape.dim[2].dim_value)
    print(f"DEVICE {torch.cuda.get_device_name(0)}", flush=True)
    for mode in a.which.split(","):
        model = build(vocab)
        model.load_state_dict(torch.load(os.path.join(a.dir, "state.pt")))
        model = model.cuda()
        run = torch.compile(model) if mode == "compile" else model

        def forward():
            with torch.inference_mode(), torch.autocast("cuda", torch.bfloat16):
                run(ids)
        res = timed(forward, a.steps, a.warmup)
        print(f"RESULT torch-{mode}-forward {res[0]:.2f} {res[1]:.2f}", flush=True)

        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", torch.bfloat16):
                logits = run(ids).logits
                loss = torch.nn.functional.cross_entropy(
                    logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                    ids[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
        res = timed(step, a.steps, a.warmup)
        print(f"RESULT torch-{mode}-train {res[0]:.2f} {res[1]:.2f}", flush=True)
        del model, opt, run
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
