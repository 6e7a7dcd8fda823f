"""pcc's predicted throughput for the layouts of Narayanan et al. 2021
("Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC21, Table 1: GPT models of 1.7B to 1T parameters on up to
3072 A100 80 GB GPUs of NVIDIA's Selene, DGX A100 nodes), against the
throughput the paper measured.

Each row is planned with `pcc plan --machine a100-80gb` at the paper's tensor
and pipeline sizes, data parallelism for the rest of the GPUs, the paper's
global batch in microbatches of one sequence, its sequence length (2048) and
vocabulary (51200), 16-bit products and full activation recomputation (as
the paper trained). The paper reports teraFLOP/s per GPU counted with its
formula (its eq. 3, recomputation included): F = 96 B s l h^2 (1 + s / 6h +
V / 16 l h) per iteration, so its iteration time is F / (rate x GPUs) and its
throughput B s over that.

usage: python3 megatron.py [--pcc PCC] [--rows N,N,...] [--schedule S]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# Params (B), heads, hidden, layers, tp, pp, GPUs, batch, TFLOP/s per GPU.
ROWS = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163),
]
SEQ, VOCAB = 2048, 51200


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pcc", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "build", "bin", "pcc"))
    ap.add_argument("--rows", default=",".join(str(i) for i in range(len(ROWS))))
    ap.add_argument("--schedule", default="1f1b")
    a = ap.parse_args()
    print("| params | tp | pp | dp | GPUs | batch | paper tokens/s | pcc tokens/s"
          " | pcc / paper | pcc MFU | plan s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for i in (int(r) for r in a.rows.split(",")):
            p, heads, h, l, tp, pp, gpus, batch, rate = ROWS[i]
            dp = gpus // (tp * pp)
            flops = 96 * batch * SEQ * l * h * h * (
                1 + SEQ / (6 * h) + VOCAB / (16 * l * h))
            paper = batch * SEQ / (flops / (rate * 1e12 * gpus))
            out = os.path.join(tmp, f"row{i}")
            cmd = [a.pcc, "plan", "--model",
                   f"gpt:layers={l},hidden={h},heads={heads},vocab={VOCAB},"
                   f"seq={SEQ},batch={batch}", "--train", "--tp", str(tp),
                   "--pp", str(pp), "--dp", str(dp), "--microbatches",
                   str(batch // dp), "--dtype", "bf16", "--recompute", "full",
                   "--machine", "a100-80gb", "-o", out]
            if pp > 1:
                cmd += ["--schedule", a.schedule]
            start = time.time()
            r = subprocess.run(cmd, capture_output=True, text=True)
            took = time.time() - start
            if r.returncode != 0:
                print(f"| {p}B | {tp} | {pp} | {dp} | {gpus} | {batch} | "
                      f"{paper:.0f} | failed: {r.stderr.strip()[:80]} | | | |")
                continue
            pred = json.load(open(os.path.join(out, "plan.json")))["prediction"]
            ratio = pred["tokens_per_second"] / paper
            worst = max(worst, abs(ratio - 1))
            print(f"| {p}B | {tp} | {pp} | {dp} | {gpus} | {batch} | {paper:.0f}"
                  f" | {pred['tokens_per_second']:.0f} | {ratio:.2f} | "
                  f"{100 * pred['mfu']:.1f}% | {took:.1f} |", flush=True)
    print(f"\nlargest gap: {100 * worst:.0f}%")


if __name__ == "__main__":
    sys.exit(main())
