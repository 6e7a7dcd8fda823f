#!/usr/bin/env python3
"""Exports greedy text-generation fixtures of the project's reference models:
gpt2-tiny, llama-tiny and nanogpt-tiny of the shared reference archives
(README.md there), the same architectures with the same weights, re-exported
to ONNX with a dynamic batch and sequence, and the new tokens of greedy
decoding for a few prompts.

usage: python export_reference.py [NAME,NAME,...]   (NAME: gpt2-tiny,
       llama-tiny, nanogpt-tiny; default all)

The reference archives (static [2, 32] exports) are read from $REF_MODELS
(default /work/shared/models). For each NAME the script

  1. unpacks REF_MODELS/NAME.tar.gz into WORK/NAME-src (WORK is $WORK or
     /tmp/pcc-generation),
  2. rebuilds the PyTorch model of export_models.py (the configs and the
     NanoGPT code below are that script's; GPT-2 with n_positions 32, see
     gpt2_tiny) and loads every parameter from the
     reference model.onnx: the initializer that meta.json names for it, as is
     or transposed, or, for GPT-2's position table, which the exporter stored
     already sliced to the 32 positions of the reference input, the constant
     that the graph adds to the token embedding's Gather (found in the graph,
     see gpt2_position_table),
  3. checks that the rebuilt model's logits on ref/input_0.pb equal
     ref/output_0.pb within MAX_REF_DIFF (x max(1, max |logit|), see there):
     the weights are the reference's,
  4. draws prompts and decodes them greedily, as export_generation.py does
     (the min-margin and distinct-token redraw; nanogpt-tiny: the margin
     only, see MODELS), the GPT-2 and Llama tokens
     with transformers' generate(), checked against the plain greedy loop;
     nanogpt-tiny is plain torch without generate(): its tokens are the plain
     greedy loop (whole sequence each step, no cache) over the PyTorch model,
  5. exports forward(input_ids) -> logits with torch.onnx.export(dynamo=True,
     optimize=False), batch and seq dynamic, into WORK/NAME-ref/model.onnx,
     checks it with onnxruntime (if installed) and packs WORK/NAME-ref as
     NAME-ref.tar.gz beside this script.

The position tables of GPT-2 (as exported) and nanogpt-tiny hold 32 rows, so
prompt + new tokens stay within MAX_SEQ = 32 positions: prompts of
PROMPT_LENS (at most 20) tokens and 12 new tokens; generate.json records
"max_seq": 32. Fixed seeds, one thread: the same packages give the same files.
"""
import json
import os
import shutil
import sys
import tarfile
import types
import zlib

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from export_generation import (MAX_NEW, MIN_DISTINCT, MIN_MARGIN, Logits,  # noqa: E402
                               _all_nodes, describe, greedy, pack)

REF_MODELS = os.environ.get("REF_MODELS", "/work/shared/models")
WORK = os.environ.get("WORK", "/tmp/pcc-generation")
MAX_SEQ = 32                  # the reference position tables' rows
PROMPT_LENS = (1, 3, 8, 12, 20)
VOCAB = 512                   # all three reference models
# Rebuilt PyTorch model against ref/output_0.pb: max |diff| below
# MAX_REF_DIFF x max(1, max |logit|). That is 1e-5 absolute for gpt2-tiny and
# llama-tiny (logits below 1); nanogpt-tiny's logits reach 106 (its
# embeddings are N(0, 1)), where float32 rounding alone differs by more: the
# same weights on the same input give max |diff| 1.9e-5 (5 ulps at 64) between
# this PyTorch (2.15) and the reference's (2.11), whose own logits are 4.4e-5
# from a float64 run of the same model; a weight that is not the reference's
# changes the logits by orders of magnitude more.
MAX_REF_DIFF = 1e-5
MAX_PROMPT_DRAWS = 1000


# ---- the reference models (export_models.py's configs and code)

def gpt2_tiny():
    # export_models.py: gpt2(2, 128, 4, 512, 64), i.e. n_positions=64; its
    # ONNX holds only the first 32 rows of the position table (see
    # gpt2_position_table), so the rebuilt model has n_positions=32.
    from transformers import GPT2Config, GPT2LMHeadModel
    # (bos / eos: export_models.py kept GPT-2's 50256, outside this vocabulary;
    # they do not enter the logits, and generation runs without them.)
    c = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=VOCAB, n_positions=MAX_SEQ,
                   resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                   bos_token_id=None, eos_token_id=None)
    c._attn_implementation = "eager"
    return GPT2LMHeadModel(c)


def llama_tiny():
    # export_models.py: llama(2, 128, 4, 2, 344, 512); rotary embeddings have
    # no weights (computed from the config).
    from transformers import LlamaConfig, LlamaForCausalLM
    c = LlamaConfig(num_hidden_layers=2, hidden_size=128, num_attention_heads=4,
                    num_key_value_heads=2, intermediate_size=344, vocab_size=VOCAB,
                    max_position_embeddings=256, tie_word_embeddings=False)
    c._attn_implementation = "eager"
    return LlamaForCausalLM(c)


class NanoGPT(torch.nn.Module):
    # export_models.py's NanoGPT, as is (that script exports every model when
    # imported, so the class is repeated here): plain GPT written in torch ops
    # (nanoGPT style), tied embeddings.
    def __init__(s, vocab, d, heads, layers, T):
        super().__init__()
        s.h, s.T = heads, T
        s.wte = torch.nn.Embedding(vocab, d)
        s.wpe = torch.nn.Embedding(T, d)
        s.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            b = torch.nn.Module()
            b.ln1, b.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            b.qkv, b.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
            b.fc1, b.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
            s.blocks.append(b)
        s.lnf = torch.nn.LayerNorm(d)
        s.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(s, ids):
        B, T = ids.shape
        x = s.wte(ids) + s.wpe(torch.arange(T))
        for b in s.blocks:
            q, k, v = b.qkv(b.ln1(x)).split(x.shape[-1], dim=2)
            q, k, v = [t.view(B, T, s.h, -1).transpose(1, 2) for t in (q, k, v)]
            a = (q @ k.transpose(-2, -1)) * (1.0 / (q.shape[-1] ** 0.5))
            a = a.masked_fill(s.mask[:, :, :T, :T] == 0, float("-inf")).softmax(-1)
            x = x + b.proj((a @ v).transpose(1, 2).reshape(B, T, -1))
            x = x + b.fc2(torch.nn.functional.gelu(b.fc1(b.ln2(x)), approximate="tanh"))
        return (s.lnf(x) @ s.wte.weight.t(),)


class CausalLM(torch.nn.Module):
    """NanoGPT with a causal LM's call: forward(input_ids, use_cache) -> an
    object with .logits, so that export_generation's Logits wrapper and
    greedy loop take it. use_cache is ignored (NanoGPT has no cache)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, input_ids, use_cache=False):
        return types.SimpleNamespace(logits=self.net(input_ids)[0])


def nanogpt_tiny():
    # export_models.py: NanoGPT(512, 128, 4, 2, 32), exported without a
    # wrapper (its parameters are named wte.weight, ...).
    return NanoGPT(VOCAB, 128, 4, 2, MAX_SEQ)


# name: (builder, prefix of the reference's parameter names (the HF models
# were wrapped in a module whose attribute is m, as Logits is), HF generate(),
# the least number of different new tokens a prompt must get).
# nanogpt-tiny's greedy steps repeat the prompt's last token, for every prompt
# (1500 random prompts of lengths 1 to 20 tried, top-1 / top-2 margins of 5.7
# and more): its embeddings are N(0, 1), larger than what the blocks add, and
# the head is the embedding transposed, so the input token wins. That is what
# the reference weights compute; its prompts are drawn for the margin only.
MODELS = {"gpt2-tiny": (gpt2_tiny, "m.", True, MIN_DISTINCT),
          "llama-tiny": (llama_tiny, "m.", True, MIN_DISTINCT),
          "nanogpt-tiny": (nanogpt_tiny, "", False, 1)}


# ---- the reference weights

def gpt2_position_table(graph, inits, wte_name):
    """GPT-2's wpe as the reference ONNX holds it: the exporter folded
    wpe(arange(32)) into one constant [1, 32, d] that the graph adds to the
    token embedding (the Gather of the token table by the input ids). Found
    by that role, not by name: returns its initializer's name and rows."""
    found = []
    for n in graph.node:
        if n.op_type != "Gather" or n.input[0] != wte_name:
            continue
        for c in graph.node:
            if c.op_type != "Add" or n.output[0] not in c.input:
                continue
            other = [i for i in c.input if i != n.output[0]]
            if len(other) == 1 and other[0] in inits:
                found.append(other[0])
    assert len(found) == 1, ("position table", found)
    table = inits[found[0]]
    assert table.ndim == 3 and table.shape[0] == 1, table.shape
    return found[0], table[0]


def load_reference(name):
    """Unpacks the reference archive; returns its folder, meta.json, the
    ONNX model and its initializers as arrays."""
    src = os.path.join(WORK, name + "-src")
    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(src)
    with tarfile.open(os.path.join(REF_MODELS, name + ".tar.gz")) as t:
        t.extractall(src, filter="data")
    d = os.path.join(src, name)
    meta = json.load(open(os.path.join(d, "meta.json")))
    m = onnx.load(os.path.join(d, "model.onnx"))
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    return d, meta, m, inits


def load_weights(name, net, prefix, meta, m, inits):
    """Sets every parameter of net to the reference's; returns how each was
    found (for the log)."""
    params = dict(net.named_parameters())  # a tied parameter is listed once
    grads = meta["grads"]
    assert set(prefix + k for k in params) == set(grads), (
        sorted(set(prefix + k for k in params) ^ set(grads)))
    how = {}
    with torch.no_grad():
        for k, p in params.items():
            e = grads[prefix + k]
            if e["onnx_initializer"]:
                w, how[k] = inits[e["onnx_initializer"][0]], "as is"
            elif e["onnx_initializer_transposed"]:
                w, how[k] = inits[e["onnx_initializer_transposed"][0]].T, "transposed"
            elif name == "gpt2-tiny" and k == "transformer.wpe.weight":
                wte = grads[prefix + "transformer.wte.weight"]["onnx_initializer"][0]
                init, w = gpt2_position_table(m.graph, inits, wte)
                how[k] = "folded: %s rows of %s, the constant added to Gather(%s)" % (
                    w.shape[0], init, wte)
            else:
                raise SystemExit("%s: %s has no initializer in the reference ONNX" % (name, k))
            assert tuple(w.shape) == tuple(p.shape), (k, w.shape, p.shape)
            p.copy_(torch.from_numpy(np.array(w)))
    return how


def check_reference_logits(d, lm):
    """The rebuilt model's logits on ref/input_0.pb against ref/output_0.pb."""
    def pb(f):
        t = onnx.TensorProto()
        with open(os.path.join(d, "ref", f), "rb") as fh:
            t.ParseFromString(fh.read())
        return numpy_helper.to_array(t)
    x, want = pb("input_0.pb"), pb("output_0.pb")
    with torch.no_grad():
        got = lm(input_ids=torch.from_numpy(np.array(x)), use_cache=False).logits.numpy()
    assert got.shape == want.shape, (got.shape, want.shape)
    diff = float(np.abs(got - want).max())
    amax = float(np.abs(want).max())
    assert diff < MAX_REF_DIFF * max(1.0, amax), (
        "rebuilt model's logits differ from ref/output_0.pb", diff, amax)
    return x, want, diff, amax


# ---- prompts, tokens, export (export_generation.py's conventions)

def draw_prompts(name, lm, min_distinct):
    """export_generation.make's redraw: the first seed from the name's up
    whose greedy steps all have a top-1 / top-2 margin of MIN_MARGIN and
    whose prompts each get min_distinct different new tokens."""
    seed = zlib.crc32((name + "-prompts").encode())
    for _ in range(MAX_PROMPT_DRAWS):
        g = torch.Generator().manual_seed(seed)
        prompts = [torch.randint(0, VOCAB, (n,), generator=g).tolist() for n in PROMPT_LENS]
        runs = [greedy(lm, p) for p in prompts]
        margin = min(mg for _, mg in runs)
        distinct = min(len(set(t)) for t, _ in runs)
        if margin >= MIN_MARGIN and distinct >= min_distinct:
            return prompts, [t for t, _ in runs], margin, seed
        print(name, "prompt seed", seed, "margin %.3g, distinct %d: next" % (margin, distinct),
              flush=True)
        seed += 1
    raise SystemExit("%s: no prompts in %d draws" % (name, MAX_PROMPT_DRAWS))


def hf_tokens(model, prompts, plain):
    """transformers' generate(), batch 1, all-ones mask, as make() does; each
    equal to the plain greedy loop's."""
    tokens = []
    for p, want in zip(prompts, plain):
        x = torch.tensor([p])
        with torch.no_grad():
            out = model.generate(x, attention_mask=torch.ones_like(x),
                                 max_new_tokens=MAX_NEW, do_sample=False, use_cache=True,
                                 pad_token_id=0, eos_token_id=None, min_new_tokens=MAX_NEW)
        assert out.shape == (1, len(p) + MAX_NEW), out.shape
        assert out[0, :len(p)].tolist() == p
        new = out[0, len(p):].tolist()
        assert new == want, (p, new, want)
        tokens.append(new)
    return tokens


def export_dyn(wrapper, path):
    """export_generation.export's dynamo export, with the sequence bounded by
    the position table (MAX_SEQ rather than 128) and this vocabulary."""
    example = torch.randint(0, VOCAB, (2, 20), generator=torch.Generator().manual_seed(1))
    Dim = torch.export.Dim
    shapes = {"input_ids": {0: Dim("batch", min=1, max=64), 1: Dim("seq", min=1, max=MAX_SEQ)}}
    prog = torch.onnx.export(wrapper, (example,), dynamo=True, optimize=False,
                             dynamic_shapes=shapes, input_names=["input_ids"],
                             output_names=["logits"])
    prog.save(path)
    m = onnx.load(path)
    for g in [m.graph] + list(m.functions):
        for n in _all_nodes(g):
            keep = [p for p in n.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
            del n.metadata_props[:]
            n.metadata_props.extend(keep)
    onnx.save(m, path)
    for f in set(os.listdir(os.path.dirname(path))) - {"model.onnx"}:
        os.remove(os.path.join(os.path.dirname(path), f))
    return m


def ort_check(path, wrapper, ref_x, ref_y, prompts, tokens):
    """export_generation.ort_check within MAX_SEQ positions, plus the
    reference's own input and logits."""
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime not installed"
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    got = s.run(["logits"], {"input_ids": ref_x})[0]
    dref = float(np.abs(got - ref_y).max())
    assert got.shape == ref_y.shape and dref < 1e-4, (got.shape, dref)
    diff = 0.0
    for i, shape in enumerate([(1, 20), (3, 7), (1, 1), (4, MAX_SEQ)]):
        x = torch.randint(0, VOCAB, shape, generator=torch.Generator().manual_seed(2 + i))
        with torch.no_grad():
            want = wrapper(x).numpy()
        got = s.run(["logits"], {"input_ids": x.numpy()})[0]
        dx = float(np.abs(got - want).max())
        assert got.shape == want.shape and dx < 1e-4, (shape, got.shape, dx)
        diff = max(diff, dx)
    for p, t in zip(prompts, tokens):
        lg = s.run(["logits"], {"input_ids": np.array([p + t], dtype=np.int64)})[0][0]
        picks = lg[len(p) - 1:-1].argmax(-1).tolist()
        assert picks == t, (p, t, picks)
    return ("ok: max |diff| %.2e against ref/output_0.pb, %.2e against PyTorch at "
            "[1, 20], [3, 7], [1, 1], [4, %d]; greedy tokens match" % (dref, diff, MAX_SEQ))


def make(name):
    build, prefix, hf, min_distinct = MODELS[name]
    torch.manual_seed(zlib.crc32(name.encode()) % 1000)  # the init, overwritten
    net = build()
    d, meta, ref_onnx, inits = load_reference(name)
    how = load_weights(name, net, prefix, meta, ref_onnx, inits)
    for k, h in how.items():
        if h not in ("as is", "transposed"):
            print(name, k, h, flush=True)
    net.eval()
    lm = net if hf else CausalLM(net).eval()
    ref_x, ref_y, diff, amax = check_reference_logits(d, lm)
    print(name, "rebuilt PyTorch logits on ref/input_0.pb: max |diff| %.3g against "
          "ref/output_0.pb (max |logit| %.3g; %d parameters: %d as is, %d transposed, "
          "%d folded)" % (diff, amax, len(how), sum(h == "as is" for h in how.values()),
              sum(h == "transposed" for h in how.values()),
              sum(h.startswith("folded") for h in how.values())), flush=True)
    if hf:
        for c in (net.config, net.generation_config):
            c.eos_token_id = c.bos_token_id = None
        net.generation_config.pad_token_id = 0

    prompts, plain, margin, seed = draw_prompts(name, lm, min_distinct)
    tokens = hf_tokens(net, prompts, plain) if hf else plain
    ref = {"max_new_tokens": MAX_NEW, "max_seq": MAX_SEQ, "prompts": prompts,
           "tokens": tokens, "min_margin": margin, "prompt_seed": seed,
           "reference": ("transformers generate()" if hf else
                         "plain greedy loop over the PyTorch model (no generate(), no cache)")}
    print(name, "min top-1/top-2 logit margin %.3g, prompt seed %d" % (margin, seed), flush=True)

    tag = name + "-ref"
    out = os.path.join(WORK, tag)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    path = os.path.join(out, "model.onnx")
    wrapper = Logits(lm).eval()
    m = export_dyn(wrapper, path)
    onnx.checker.check_model(m)
    ins, outs, opset = describe(m)
    print(tag, "opset", opset, "inputs", ins, "outputs", outs, flush=True)
    assert isinstance(ins[0][1][0], str) and isinstance(ins[0][1][1], str), ins
    assert isinstance(outs[0][1][1], str), outs
    print(tag, "onnxruntime", ort_check(path, wrapper, ref_x, ref_y, prompts, tokens), flush=True)
    with open(os.path.join(out, "generate.json"), "w") as f:
        json.dump(ref, f, indent=1)
    tgz = pack(out, tag)
    print(tag, os.path.getsize(tgz), "bytes,", len(m.graph.node), "nodes", flush=True)


def main(argv):
    torch.set_num_threads(1)
    for name in (argv[1].split(",") if len(argv) > 1 else list(MODELS)):
        make(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
