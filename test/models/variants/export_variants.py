#!/usr/bin/env python3
"""Exports small variant fixtures: the reference architectures exported with
other exporters, opsets, constant-folding settings, head layouts, weight tying
and batch shapes than the five models in test/models/*.tar.gz.

usage: python export_variants.py [NAME,NAME,...]

Needs PyTorch (with the TorchScript and dynamo ONNX exporters, onnxscript),
transformers and onnx; made with torch 2.15, transformers 5.23, onnx 1.23,
onnxscript 0.7. Each variant NAME is exported into WORK/NAME (WORK is $WORK or
/tmp/pcc-variants) with the same layout and meta.json keys as the reference
models (see test/models/README.md):

  NAME/model.onnx        one input input_ids (int64), one output logits (f32)
  NAME/ref/input_0.pb    input_ids
  NAME/ref/output_0.pb   eval-mode logits
  NAME/ref/loss.pb       mean cross-entropy of logits[:, :-1] vs input_ids[:, 1:]
  NAME/ref/grads/*.pb    d loss / d parameter (not for the BERT variants)
  NAME/meta.json         exporter, opset, folding, ops, gradients' initializers

and then packed as NAME.tar.gz beside this script. Every parameter is
perturbed with small noise before export so that no two are equal and none is
all zeros or all ones (exporters fold or merge such constants). Seeds are
fixed: the same packages give the same files.
"""
import contextlib
import gzip
import json
import os
import shutil
import sys
import tarfile
import traceback
import zlib

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.environ.get("WORK", "/tmp/pcc-variants")


def save_pb(arr, name, path):
    t = numpy_helper.from_array(np.ascontiguousarray(arr), name)
    with open(path, "wb") as f:
        f.write(t.SerializeToString())


def logits_of(out):
    if torch.is_tensor(out):
        return out
    return out.logits if hasattr(out, "logits") else out[0]


class LogitsOnly(torch.nn.Module):
    """Wraps a Hugging Face model so that it returns the logits tensor only."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids):
        return logits_of(self.m(ids))


# ---------------------------------------------------------------- models

def gpt2(n_layer, n_embd, n_head, vocab, npos, inner=None):
    from transformers import GPT2Config, GPT2LMHeadModel
    c = GPT2Config(n_layer=n_layer, n_embd=n_embd, n_head=n_head, vocab_size=vocab,
                   n_positions=npos, n_inner=inner, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    c._attn_implementation = "eager"
    return GPT2LMHeadModel(c)


def llama(n_layer, hidden, heads, kv_heads, inter, vocab, tied):
    from transformers import LlamaConfig, LlamaForCausalLM
    c = LlamaConfig(num_hidden_layers=n_layer, hidden_size=hidden,
                    num_attention_heads=heads, num_key_value_heads=kv_heads,
                    intermediate_size=inter, vocab_size=vocab,
                    max_position_embeddings=64, tie_word_embeddings=tied)
    c._attn_implementation = "eager"
    return LlamaForCausalLM(c)


def bert(n_layer, hidden, heads, inter, vocab):
    from transformers import BertConfig, BertForMaskedLM
    c = BertConfig(num_hidden_layers=n_layer, hidden_size=hidden, num_attention_heads=heads,
                   intermediate_size=inter, vocab_size=vocab, max_position_embeddings=32,
                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    c._attn_implementation = "eager"
    return BertForMaskedLM(c)


class MLP(torch.nn.Module):
    """Embedding, residual LayerNorm-Linear-GELU(exact)-Linear blocks, untied head."""

    def __init__(self, vocab, d, layers):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.blocks = torch.nn.ModuleList([torch.nn.Sequential(
            torch.nn.LayerNorm(d), torch.nn.Linear(d, 4 * d), torch.nn.GELU(),
            torch.nn.Linear(4 * d, d)) for _ in range(layers)])
        self.head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        h = self.emb(ids)
        for b in self.blocks:
            h = h + b(h)
        return (self.head(h),)


class NanoGPT(torch.nn.Module):
    """A GPT in plain torch ops (nanoGPT style): fused QKV + split, causal mask
    by masked_fill, tanh GELU, LM head tied to wte as wte.weight.t()."""

    def __init__(self, vocab, d, heads, layers, T):
        super().__init__()
        self.h = heads
        self.wte = torch.nn.Embedding(vocab, d)
        self.wpe = torch.nn.Embedding(T, d)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            b = torch.nn.Module()
            b.ln1, b.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            b.qkv, b.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
            b.fc1, b.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
            self.blocks.append(b)
        self.lnf = torch.nn.LayerNorm(d)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, ids):
        B, T = ids.shape
        x = self.wte(ids) + self.wpe(torch.arange(T))
        for b in self.blocks:
            q, k, v = b.qkv(b.ln1(x)).split(x.shape[-1], dim=2)
            q, k, v = [t.view(B, T, self.h, -1).transpose(1, 2) for t in (q, k, v)]
            a = (q @ k.transpose(-2, -1)) * (1.0 / (q.shape[-1] ** 0.5))
            a = a.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf")).softmax(-1)
            x = x + b.proj((a @ v).transpose(1, 2).reshape(B, T, -1))
            x = x + b.fc2(torch.nn.functional.gelu(b.fc1(b.ln2(x)), approximate="tanh"))
        return (self.lnf(x) @ self.wte.weight.t(),)


# -------------------------------------------------------------- variants
# name: (make model, vocab, batch shape, opset, exporter, constant folding,
#        training reference, description)
VARIANTS = {
    "gpt2-ts13-fold": (
        lambda: gpt2(2, 32, 4, 96, 32), 96, (3, 16), 13, "torchscript", True, True,
        "HF GPT-2, 2 layers, d=32, 4 heads; the folded tied LM head may be a "
        "transposed copy of wte"),
    "gpt2-dyn18-3heads": (
        lambda: gpt2(1, 48, 3, 96, 32, inner=96), 96, (1, 24), 18, "dynamo", False, True,
        "HF GPT-2, 1 layer, d=48, 3 heads, MLP 96 wide, batch 1"),
    "llama-dyn18-gqa4": (
        lambda: llama(1, 32, 4, 1, 64, 128, False), 128, (2, 16), 18, "dynamo", False, True,
        "HF Llama, 1 layer, d=32, 4 query heads / 1 KV head (GQA 4:1), untied head"),
    "llama-ts17-tied": (
        lambda: llama(1, 32, 4, 4, 64, 80, True), 80, (1, 12), 17, "torchscript", False, True,
        "HF Llama, 1 layer, d=32, 4 heads / 4 KV heads (no GQA), LM head tied to "
        "the embedding"),
    "llama-ts13-fold-gqa": (
        lambda: llama(2, 32, 8, 2, 48, 96, False), 96, (2, 8), 13, "torchscript", True, True,
        "HF Llama, 2 layers, d=32, 8 query heads / 2 KV heads, untied head"),
    "nanogpt-ts17-fold": (
        lambda: NanoGPT(64, 32, 2, 2, 8), 64, (4, 8), 17, "torchscript", True, True,
        "nanoGPT-style plain torch GPT, 2 layers, d=32, 2 heads, head tied as "
        "wte.weight.t()"),
    "mlp-dyn18": (
        lambda: MLP(100, 32, 2), 100, (3, 5), 18, "dynamo", False, True,
        "embedding + 2 residual LayerNorm/Linear/GELU/Linear blocks, untied head"),
    "bert-dyn18": (
        lambda: bert(1, 32, 2, 64, 120), 120, (1, 16), 18, "dynamo", False, False,
        "HF BERT masked LM, 1 layer, d=32, 2 heads; forward only"),
    "bert-ts13": (
        lambda: bert(2, 32, 4, 64, 96), 96, (2, 12), 13, "torchscript", False, False,
        "HF BERT masked LM, 2 layers, d=32, 4 heads; forward only"),
}


@contextlib.contextmanager
def _no_packed_sequences():
    """transformers' masks look for packed sequences in position_ids with
    torch.diff whenever no attention mask is given; while tracing it cannot
    skip that, and the TorchScript exporter has no symbolic for aten::diff.
    Our position ids are a plain arange, for which the check finds nothing
    (returns None) when run eagerly, so skip it while tracing too."""
    try:
        import transformers.masking_utils as mu
    except ImportError:
        yield
        return
    saved = mu.find_packed_sequence_indices
    mu.find_packed_sequence_indices = lambda position_ids: None
    try:
        yield
    finally:
        mu.find_packed_sequence_indices = saved


def export(name, model, input_ids, opset, exporter, fold, train_ref, desc):
    if hasattr(model, "config"):
        model.config.use_cache = False
        model = LogitsOnly(model)
    with torch.no_grad():
        for p in model.parameters():  # tied parameters are listed once
            p.add_(0.02 * torch.randn_like(p))
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "ref"))
    model.eval()
    path = os.path.join(d, "model.onnx")
    kw = dict(input_names=["input_ids"], output_names=["logits"], opset_version=opset)
    if exporter == "dynamo":
        prog = torch.onnx.export(model, (input_ids,), dynamo=True, optimize=True, **kw)
        prog.save(path)
    else:
        with _no_packed_sequences():
            torch.onnx.export(model, (input_ids,), path, dynamo=False,
                              do_constant_folding=fold, **kw)
    # Everything inline: a fixture is one model.onnx, no external data.
    m = onnx.load(path)
    onnx.save(m, path)
    extra = sorted(set(os.listdir(d)) - {"model.onnx", "ref"})
    for f in extra:
        os.remove(os.path.join(d, f))
    with torch.no_grad():
        logits = logits_of(model(input_ids))
    save_pb(input_ids.numpy(), "input_ids", os.path.join(d, "ref", "input_0.pb"))
    save_pb(logits.float().numpy(), "logits", os.path.join(d, "ref", "output_0.pb"))
    meta = {"tag": name, "opset": opset, "exporter": exporter,
            "constant_folding": fold, "input_shape": list(input_ids.shape),
            "ops": sorted({n.op_type for n in m.graph.node}),
            "num_nodes": len(m.graph.node),
            "initializers": len(m.graph.initializer),
            "description": desc,
            "versions": {"torch": torch.__version__, "onnx": onnx.__version__}}
    try:
        import transformers
        meta["versions"]["transformers"] = transformers.__version__
    except ImportError:
        pass
    if train_ref:
        model.train()
        model.zero_grad()
        logits = logits_of(model(input_ids))
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
            input_ids[:, 1:].reshape(-1))
        loss.backward()
        gd = os.path.join(d, "ref", "grads")
        os.makedirs(gd)
        inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
        names = {}
        for i, (n, p) in enumerate(model.named_parameters()):
            if p.grad is None:
                continue
            fn = "grad_%03d.pb" % i
            save_pb(p.grad.numpy(), n, os.path.join(gd, fn))
            pv = p.detach().numpy()
            same = [k for k, v in inits.items()
                    if v.shape == pv.shape and np.array_equal(v, pv)]
            trans = [k for k, v in inits.items()
                     if pv.ndim == 2 and v.shape == pv.T.shape and np.array_equal(v, pv.T)]
            names[n] = {"file": fn, "onnx_initializer": same,
                        "onnx_initializer_transposed": trans}
        save_pb(np.array(loss.item(), dtype=np.float32), "loss",
                os.path.join(d, "ref", "loss.pb"))
        meta["loss"] = loss.item()
        meta["grads"] = names
        meta["loss_def"] = "mean cross-entropy of logits[:, :-1] against input_ids[:, 1:]"
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    tgz = os.path.join(HERE, name + ".tar.gz")
    with open(tgz, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w") as t:
        t.add(d, arcname=name, filter=_reproducible)
    print(name, "ok", meta["num_nodes"], "nodes,", os.path.getsize(tgz), "bytes,",
          meta["ops"], flush=True)


def _reproducible(info):
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def main(argv):
    only = argv[1].split(",") if len(argv) > 1 else list(VARIANTS)
    failed = []
    for name in only:
        mk, vocab, shape, opset, exporter, fold, train_ref, desc = VARIANTS[name]
        torch.manual_seed(zlib.crc32(name.encode()) % 1000)
        try:
            model = mk()
            input_ids = torch.randint(0, vocab, shape)
            export(name, model, input_ids, opset, exporter, fold, train_ref, desc)
        except Exception:
            print(name, "FAILED", flush=True)
            traceback.print_exc()
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
