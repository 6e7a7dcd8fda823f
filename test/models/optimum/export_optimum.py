#!/usr/bin/env python3
"""Exports small fixtures with Hugging Face Optimum, as users get ONNX files:
symbolic batch and sequence dimensions, the inputs each task has, and the
references onnxruntime computes on the same file.

usage: python export_optimum.py [NAME,NAME,...]

Needs PyTorch, transformers, optimum-onnx, onnx and onnxruntime; made with
torch 2.15, transformers 4.57, optimum-onnx 0.1, onnx 1.23, onnxruntime 1.23.
Each fixture NAME (see FIXTURES) is a model of random weights from a small
config (fixed seed; every parameter perturbed, see make_model), exported
with
`optimum.exporters.onnx.onnx_export_from_model` into WORK/NAME (WORK is
$WORK or /tmp/pcc-optimum), then:

  NAME/model.onnx          Optimum's export, as written
  NAME/dims                the --dim (and --shape) flags that fix its
                           symbolic dimensions for the inputs below
  NAME/ref/input_*.pb      one TensorProto per graph input, named as it:
                           token ids, an attention mask whose last row is
                           left-padded by 2, position ids as Hugging Face
                           derives them from the mask, zero token types,
                           random past keys and values
  NAME/ref/output_*.pb     onnxruntime's outputs on those inputs, named as
                           the graph's outputs
  NAME/ref/sgd.json        (text-generation) {"optimizer": "sgd", "lr": 0.1,
                           "losses": [l1, l2, l3]}: PyTorch's causal-LM loss
                           before each of 3 plain SGD steps on those inputs

packed as NAME.tar.gz beside this script.
"""
import gzip
import io
import json
import os
import shutil
import sys
import tarfile

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.environ.get("WORK", "/tmp/pcc-optimum")
BATCH, SEQ, PAST = 4, 9, 5
SGD_STEPS, SGD_LR = 3, 0.1  # ref/sgd.json of the text-generation fixtures


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=4,
                                      vocab_size=101, n_positions=64))


# The decoders of the Llama family, each at this size plus what it needs.
LLAMA_LIKE = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=64, vocab_size=101,
                  max_position_embeddings=64)


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM(LlamaConfig(**LLAMA_LIKE))


def qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM
    return Qwen2ForCausalLM(Qwen2Config(**LLAMA_LIKE, tie_word_embeddings=True))


# Phi-3 and Gemma default to a padding token, whose embedding row PyTorch
# never updates (padding_idx) and ONNX keeps no trace of: none here, so that
# training compares as for the others.
def mistral():
    from transformers import MistralConfig, MistralForCausalLM
    return MistralForCausalLM(MistralConfig(**LLAMA_LIKE, sliding_window=None))


def phi3():
    from transformers import Phi3Config, Phi3ForCausalLM
    return Phi3ForCausalLM(Phi3Config(**LLAMA_LIKE, pad_token_id=None))


def gemma():
    from transformers import GemmaConfig, GemmaForCausalLM
    return GemmaForCausalLM(GemmaConfig(**LLAMA_LIKE, head_dim=8,
                                        pad_token_id=None))


def neox():
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    return GPTNeoXForCausalLM(GPTNeoXConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
        intermediate_size=64, vocab_size=101, max_position_embeddings=64))


def bert():
    from transformers import BertConfig, BertModel
    return BertModel(BertConfig(num_hidden_layers=2, hidden_size=32,
                                num_attention_heads=4, intermediate_size=64,
                                vocab_size=101, max_position_embeddings=64))


# name -> (model maker, Optimum task, sequence length of the inputs, past)
FIXTURES = {
    "gpt2-text-generation": (gpt2, "text-generation", SEQ, 0),
    "gpt2-text-generation-with-past": (gpt2, "text-generation-with-past", 1,
                                       PAST),
    "llama-text-generation": (llama, "text-generation", SEQ, 0),
    "llama-text-generation-with-past": (llama, "text-generation-with-past", 1,
                                        PAST),
    "qwen2-text-generation": (qwen2, "text-generation", SEQ, 0),
    "mistral-text-generation": (mistral, "text-generation", SEQ, 0),
    "phi3-text-generation": (phi3, "text-generation", SEQ, 0),
    "gemma-text-generation": (gemma, "text-generation", SEQ, 0),
    "neox-text-generation": (neox, "text-generation", SEQ, 0),
    "bert-feature-extraction": (bert, "feature-extraction", SEQ, 0),
}


def inputs_for(model, seq, past, rng):
    names = [i.name for i in model.graph.input]
    feeds = {}
    for i in model.graph.input:
        n = i.name
        if n == "input_ids":
            feeds[n] = rng.integers(0, 101, (BATCH, seq)).astype(np.int64)
        elif n == "attention_mask":
            mask = np.ones((BATCH, seq + past), np.int64)
            mask[BATCH - 1, :2] = 0  # the last row is left-padded
            feeds[n] = mask
        elif n == "token_type_ids":
            feeds[n] = np.zeros((BATCH, seq), np.int64)
        elif n.startswith("past_key_values"):
            dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
            shape = [BATCH, dims[1], past, dims[3]]
            feeds[n] = rng.standard_normal(shape).astype(np.float32)
    if "position_ids" in names:
        pos = np.cumsum(feeds["attention_mask"], 1) - 1
        pos[pos < 0] = 1
        feeds["position_ids"] = pos[:, -seq:].astype(np.int64)
    return {n: feeds[n] for n in names}


def dims_for(model, feeds):
    """--dim for each named symbolic dimension, and --shape for an input
    whose dimension is named by an expression (the with-past export's mask:
    'past_sequence_length + sequence_length')."""
    flags = []
    for i in model.graph.input:
        names = [d.dim_param for d in i.type.tensor_type.shape.dim]
        if any(" " in n for n in names):
            flags.append(f"--shape {i.name}=" +
                         "x".join(str(e) for e in feeds[i.name].shape))
            continue
        for n, e in zip(names, feeds[i.name].shape):
            flag = f"--dim {n}={e}"
            if n and flag not in flags:
                flags.append(flag)
    return flags


def pack(name):
    """A byte-reproducible NAME.tar.gz of WORK/NAME."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        root = os.path.join(WORK, name)
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel = os.path.relpath(dirpath, WORK)
            info = tarfile.TarInfo(rel)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            t.addfile(info)
            for f in sorted(filenames):
                path = os.path.join(dirpath, f)
                info = tarfile.TarInfo(os.path.join(rel, f))
                info.size, info.mode, info.mtime = os.path.getsize(path), 0o644, 0
                with open(path, "rb") as fh:
                    t.addfile(info, fh)
    with open(os.path.join(HERE, name + ".tar.gz"), "wb") as out:
        with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as g:
            g.write(buf.getvalue())


def make_model(name):
    """The fixture's model: its config's random weights, each parameter
    then perturbed by 0.02 x randn so that none are equal (exporters merge
    equal initializers, which training would then update as one), as a
    trained checkpoint's are."""
    make = FIXTURES[name][0]
    torch.manual_seed(0)
    model = make().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    return model


def sgd_losses(name, feeds):
    """The causal-LM loss (mean cross-entropy of logits[:, :-1] against
    input_ids[:, 1:]) before each of SGD_STEPS plain SGD steps (no momentum
    or weight decay, dropout off) on the fixture's inputs, mask and
    positions included, from the exported weights."""
    model = make_model(name).train()
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    args = {n: torch.from_numpy(a) for n, a in feeds.items()}
    opt = torch.optim.SGD(model.parameters(), lr=SGD_LR)
    losses = []
    for _ in range(SGD_STEPS):
        logits = model(**args).logits
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]),
            args["input_ids"][:, 1:].reshape(-1))
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return losses


def export(name):
    from optimum.exporters.onnx import onnx_export_from_model
    make, task, seq, past = FIXTURES[name]
    model = make_model(name)
    out = os.path.join(WORK, name)
    shutil.rmtree(out, ignore_errors=True)
    tmp = out + ".export"
    shutil.rmtree(tmp, ignore_errors=True)
    onnx_export_from_model(model, tmp, task=task)
    os.makedirs(os.path.join(out, "ref"))
    shutil.copy(os.path.join(tmp, "model.onnx"), os.path.join(out, "model.onnx"))
    shutil.rmtree(tmp)
    m = onnx.load(os.path.join(out, "model.onnx"))
    feeds = inputs_for(m, seq, past, np.random.default_rng(0))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    sess = ort.InferenceSession(os.path.join(out, "model.onnx"), options)
    results = sess.run(None, feeds)
    for k, (n, a) in enumerate(feeds.items()):
        with open(os.path.join(out, "ref", f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
    for k, (o, a) in enumerate(zip(sess.get_outputs(), results)):
        with open(os.path.join(out, "ref", f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, o.name).SerializeToString())
    if task == "text-generation":
        losses = sgd_losses(name, feeds)
        with open(os.path.join(out, "ref", "sgd.json"), "w") as f:
            json.dump({"optimizer": "sgd", "lr": SGD_LR, "losses": losses}, f)
    with open(os.path.join(out, "dims"), "w") as f:
        f.write(" ".join(dims_for(m, feeds)) + "\n")
    pack(name)
    print(f"{name}: {len(feeds)} inputs, {len(results)} outputs")


def main():
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else list(FIXTURES)
    for n in names:
        export(n)


if __name__ == "__main__":
    main()
