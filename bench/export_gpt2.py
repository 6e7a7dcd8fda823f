#!/usr/bin/env python3
"""Exports GPT-2 124M for the benchmark: bench/run.sh calls it.

usage: python export_gpt2.py OUT_DIR [--batch B] [--seq T] [--vocab V]
                                    [--size small|medium|large|xl|LxHxN]

A size LxHxN is a GPT-2 of L layers, hidden size H and N heads.

Writes OUT_DIR/model.onnx (torch's dynamo exporter, its default optimization),
OUT_DIR/input_0.pb (int64 token ids [B, T]) and OUT_DIR/state.pt (the same
weights, for the PyTorch runs). Sizes above small (124M) keep their weights
in one external data file, OUT_DIR/model.onnx.data, as exporters do for
models near or above protobuf's 2 GB limit. The weights are GPT-2's initialization with a
small fixed perturbation, as a pretrained checkpoint's are: no two parameters
are equal, so the exporter merges none (see docs/UserGuide.md, "Exporting a
model for training", for what it does to a fresh model).
"""
import argparse
import os

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from transformers import GPT2Config, GPT2LMHeadModel


class LogitsOnly(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids):
        return self.m(ids).logits


# GPT-2's published sizes: layers, hidden size, heads.
SIZES = {"small": (12, 768, 12), "medium": (24, 1024, 16),
         "large": (36, 1280, 20), "xl": (48, 1600, 25)}


def build(vocab, size="small"):
    torch.manual_seed(0)
    layers, hidden, heads = (SIZES[size] if size in SIZES else
                             tuple(int(x) for x in size.split("x")))
    cfg = GPT2Config(n_layer=layers, n_embd=hidden, n_head=heads,
                     vocab_size=vocab,
                     n_positions=1024, attn_pdrop=0.0, embd_pdrop=0.0,
                     resid_pdrop=0.0)
    cfg._attn_implementation = "eager"
    model = GPT2LMHeadModel(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    return model.eval()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--size", default="small",
                    help="small, medium, large, xl or LAYERSxHIDDENxHEADS")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    model = build(a.vocab, a.size)
    torch.save(model.state_dict(), os.path.join(a.out, "state.pt"))
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
    with open(os.path.join(a.out, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(ids.numpy(), "input_ids").SerializeToString())
    path = os.path.join(a.out, "model.onnx")
    torch.onnx.export(LogitsOnly(model), (ids,), path, dynamo=True,
                      input_names=["input_ids"], output_names=["logits"],
                      external_data=a.size in SIZES and a.size != "small")
    m = onnx.load(path, load_external_data=False)
    print(f"exported {path}: {len(m.graph.node)} nodes, "
          f"{sum(np.prod(i.dims) for i in m.graph.initializer) / 1e6:.1f} M parameters")


if __name__ == "__main__":
    main()
