"""PyTorch eager's training step on the benchmark model, for its peak
memory: loads DIR's model (bench/export_gpt2.py) and runs STEPS AdamW steps
on DIR/input_0.pb with the causal-LM loss, as pcc's training step does.
Run under `/usr/bin/time -f %M` (bench/memory.sh).

usage: python memory_torch.py DIR --threads N [--steps K]
"""

import argparse
import os

import onnx
import torch
from onnx import numpy_helper

from peers import lm_loss, torch_model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--steps", type=int, default=4)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    t = onnx.TensorProto()
    with open(os.path.join(a.dir, "input_0.pb"), "rb") as f:
        t.ParseFromString(f.read())
    ids = torch.from_numpy(numpy_helper.to_array(t).copy()).long()
    graph = onnx.load(os.path.join(a.dir, "model.onnx"),
                      load_external_data=False).graph
    vocab = int(graph.output[0].type.tensor_type.shape.dim[2].dim_value)
    model = torch_model(a.dir, vocab)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    for step in range(a.steps):
        opt.zero_grad(set_to_none=True)
        loss = lm_loss(model(ids).logits, ids)
        loss.backward()
        opt.step()
        print(f"step {step + 1}: loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
