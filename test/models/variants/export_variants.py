#!/usr/bin/env python3
"""Exports small variant fixtures: the reference architectures, and others,
exported with other exporters, opsets, constant-folding and optimizer
settings, attention implementations, head layouts, weight tying and batch
shapes than the five models in test/models/*.tar.gz.

usage: python export_variants.py [NAME,NAME,...]

Needs PyTorch (with the TorchScript and dynamo ONNX exporters, onnxscript),
transformers and onnx; made with torch 2.15, transformers 5.23, onnx 1.23,
onnxscript 0.7. Each variant NAME (see VARIANTS) is exported into WORK/NAME
(WORK is $WORK or /tmp/pcc-variants) with the same layout and meta.json keys as
the reference models (see test/models/README.md):

  NAME/model.onnx        one input input_ids (int64), one output logits (f32)
                         (the plain user exports keep the exporter's names,
                         recorded in meta.json as input_name / output_name)
  NAME/ref/input_0.pb    input_ids
  NAME/ref/output_0.pb   eval-mode logits
  NAME/ref/loss.pb       mean cross-entropy of logits[:, :-1] vs input_ids[:, 1:]
  NAME/ref/grads/*.pb    d loss / d parameter (not for the masked LMs)
  NAME/ref/adamw.json    (variants with schedule=True) AdamW steps with
                         clip_grad_norm_ and a warmup + cosine LambdaLR
                         (see ADAMW): losses, gradient norms and learning rates
  NAME/ref/sgd.json      {"optimizer": "sgd", "lr": 0.1, "losses": [l1, l2, l3]}:
                         the loss before each of 3 plain SGD steps (no momentum,
                         no weight decay, train mode) on input_0.pb, from the
                         exported weights (not for the masked LMs)
  NAME/meta.json         exporter, opset, folding, optimize, perturbed,
                         attention, ops, gradients' initializers, sgd_losses

and then packed as NAME.tar.gz beside this script. Unless a variant says
perturb=False, every parameter is perturbed with small noise before export so
that no two are equal and none is all zeros or all ones (exporters fold or
merge such constants); the fresh ones are exported as initialized, as a user
exports them. Seeds are fixed and the references are computed on one thread:
the same packages give the same files.
"""
import contextlib
import copy
import gzip
import json
import os
import shutil
import sys
import tarfile
import traceback
import zlib
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.environ.get("WORK", "/tmp/pcc-variants")
SGD_STEPS, SGD_LR = 3, 0.1  # ref/sgd.json: plain SGD, no momentum or weight decay
# ref/adamw.json: AdamW with clip_grad_norm_ and LambdaLR (linear warmup over
# WARMUP steps, then cosine from LR to MIN_LR until step DECAY); the clip is
# below every step's norm, so it always acts.
ADAMW = dict(steps=6, lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
             clip=0.5, warmup=2, decay=5, min_lr=0.001)


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
# Each maker returns build(attn) -> model: attn is "eager" (forced, as the
# first variants did) or "sdpa" (transformers' default implementation, left
# unset in the config as a user's model has it).

def hf(arch, **config):
    """A Hugging Face model class (by name) built from its config class."""
    def build(attn):
        import transformers
        cls = getattr(transformers, arch)
        c = cls.config_class(**config)
        if attn == "eager":
            c._attn_implementation = "eager"
        return cls(c)
    return build


def gpt2(n_layer, n_embd, n_head, vocab, npos, inner=None):
    return hf("GPT2LMHeadModel", n_layer=n_layer, n_embd=n_embd, n_head=n_head,
              vocab_size=vocab, n_positions=npos, n_inner=inner, resid_pdrop=0.0,
              embd_pdrop=0.0, attn_pdrop=0.0)


def llama(n_layer, hidden, heads, kv_heads, inter, vocab, tied, arch="LlamaForCausalLM",
          **extra):
    """Llama and the architectures configured like it (Mistral, Qwen2, ...)."""
    return hf(arch, num_hidden_layers=n_layer, hidden_size=hidden,
              num_attention_heads=heads, num_key_value_heads=kv_heads,
              intermediate_size=inter, vocab_size=vocab,
              max_position_embeddings=64, tie_word_embeddings=tied, **extra)


def bert(n_layer, hidden, heads, inter, vocab, arch="BertForMaskedLM", npos=32, **extra):
    return hf(arch, num_hidden_layers=n_layer, hidden_size=hidden, num_attention_heads=heads,
              intermediate_size=inter, vocab_size=vocab, max_position_embeddings=npos,
              hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **extra)


def native(cls, *args):
    """A plain torch model (no attention implementation to choose)."""
    return lambda attn: cls(*args)


class MLP(torch.nn.Module):
    """Embedding, residual LayerNorm-Linear-GELU(exact)-Linear blocks, untied head."""

    def __init__(self, vocab, d, layers):
        super().__init__()
        self.vocab = vocab
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
        self.vocab = vocab
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

@dataclass(frozen=True)
class Variant:
    make: Callable[[str], torch.nn.Module]  # make(attn) -> model
    shape: Tuple[int, int]  # input_ids [batch, seq]
    exporter: str           # "dynamo" or "torchscript"
    opset: Optional[int]    # None: the exporter's default
    desc: str
    fold: bool = False      # TorchScript's do_constant_folding
    optimize: bool = True   # dynamo's optimize (it folds constants, merges
                            # equal initializers, drops zero biases)
    perturb: bool = True    # add 0.02 * randn to every parameter before export;
                            # False: the freshly initialized model, as a user has it
    attn: str = "eager"     # "eager", or "sdpa": transformers' default
    train: bool = True      # loss, gradient and SGD references
    schedule: bool = False  # also ref/adamw.json: AdamW steps with gradient
                            # clipping and a warmup + cosine schedule
    twobw: bool = False     # also ref/2bw-sgd.json and ref/2bw-adamw.json:
                            # PipeDream-2BW's rule (gradients at the weights
                            # one update old) over 6 SGD and 6 AdamW steps
    plain: bool = False     # torch.onnx.export(model, (ids,), dynamo=True) and
                            # nothing else: a new user's export (default opset,
                            # optimize and names)


def dyn(make, shape, desc, opset=18, **kw):
    return Variant(make, shape, "dynamo", opset, desc, **kw)


def ts(make, shape, opset, desc, **kw):
    return Variant(make, shape, "torchscript", opset, desc, **kw)


def user(make, shape, desc, **kw):
    return Variant(make, shape, "dynamo", None, desc, perturb=False, attn="sdpa",
                   plain=True, **kw)


NO_DROPOUT = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)

VARIANTS = {
    # ---- the first variants
    "gpt2-ts13-fold": ts(
        gpt2(2, 32, 4, 96, 32), (3, 16), 13, fold=True,
        desc="HF GPT-2, 2 layers, d=32, 4 heads; the folded tied LM head may be a "
        "transposed copy of wte"),
    "gpt2-dyn18-3heads": dyn(
        gpt2(1, 48, 3, 96, 32, inner=96), (1, 24),
        "HF GPT-2, 1 layer, d=48, 3 heads, MLP 96 wide, batch 1"),
    # Vocabularies that tensor parallelism does not divide (padded to a
    # multiple of tp).
    "gpt2-dyn18-vocab509": dyn(
        gpt2(2, 32, 4, 509, 32), (2, 16),
        "HF GPT-2, 2 layers, d=32, 4 heads, a vocabulary of 509 (odd), tied "
        "head"),
    "llama-dyn18-vocab101": dyn(
        llama(2, 32, 4, 2, 64, 101, False), (2, 16),
        "HF Llama, 2 layers, d=32, 4 query / 2 KV heads, a vocabulary of 101 "
        "(odd), untied head"),
    "llama-dyn18-gqa4": dyn(
        llama(1, 32, 4, 1, 64, 128, False), (2, 16),
        "HF Llama, 1 layer, d=32, 4 query heads / 1 KV head (GQA 4:1), untied head"),
    "llama-ts17-tied": ts(
        llama(1, 32, 4, 4, 64, 80, True), (1, 12), 17,
        "HF Llama, 1 layer, d=32, 4 heads / 4 KV heads (no GQA), LM head tied to "
        "the embedding"),
    # Data parallelism splits the batch: a batch of 4 with grouped-query
    # attention, a tied head and a vocabulary that tensor parallelism pads.
    "llama-dyn18-gqa-tied-b4": dyn(
        llama(2, 32, 4, 2, 64, 101, True), (4, 16),
        "HF Llama, 2 layers, d=32, 4 query / 2 KV heads (GQA 2:1), LM head tied "
        "to the embedding, a vocabulary of 101 (odd), batch 4", schedule=True),
    "llama-ts13-fold-gqa": ts(
        llama(2, 32, 8, 2, 48, 96, False), (2, 8), 13, fold=True,
        desc="HF Llama, 2 layers, d=32, 8 query heads / 2 KV heads, untied head"),
    "nanogpt-ts17-fold": ts(
        native(NanoGPT, 64, 32, 2, 2, 8), (4, 8), 17, fold=True,
        desc="nanoGPT-style plain torch GPT, 2 layers, d=32, 2 heads, head tied as "
        "wte.weight.t()"),
    "mlp-dyn18": dyn(
        native(MLP, 100, 32, 2), (3, 5),
        "embedding + 2 residual LayerNorm/Linear/GELU/Linear blocks, untied head"),
    "bert-dyn18": dyn(
        bert(1, 32, 2, 64, 120), (1, 16),
        "HF BERT masked LM, 1 layer, d=32, 2 heads; forward only", train=False),
    "bert-ts13": ts(
        bert(2, 32, 4, 64, 96), (2, 12), 13,
        "HF BERT masked LM, 2 layers, d=32, 4 heads; forward only", train=False),

    # ---- the exports users make: fresh weights, optimizer on or off
    "gpt2-dyn18-fresh-noopt": dyn(
        gpt2(2, 32, 4, 96, 32), (2, 16), optimize=False, perturb=False,
        desc="HF GPT-2, 2 layers, d=32, 4 heads, freshly initialized (LayerNorm "
        "1/0, zero biases), dynamo without the optimizer"),
    "llama-dyn18-fresh-noopt": dyn(
        llama(2, 32, 4, 2, 64, 96, False), (2, 16), optimize=False, perturb=False,
        desc="HF Llama, 2 layers, d=32, 4 query / 2 KV heads (GQA 2:1), freshly "
        "initialized (RMSNorm weights 1), dynamo without the optimizer"),
    "gpt2-dyn18-fresh": dyn(
        gpt2(2, 32, 4, 96, 32), (2, 16), perturb=False,
        desc="HF GPT-2, 2 layers, d=32, 4 heads, freshly initialized; the "
        "optimizer merges the equal LayerNorm weights and drops zero biases"),
    "gpt2-dyn20-sdpa": user(
        gpt2(2, 32, 4, 96, 32), (2, 16),
        "HF GPT-2, 2 layers, d=32, 4 heads, default (sdpa) attention, fresh, "
        "torch.onnx.export(model, (ids,), dynamo=True) with no other argument"),
    "llama-dyn20-sdpa": user(
        llama(2, 32, 4, 2, 64, 96, False), (2, 16),
        "HF Llama, 2 layers, d=32, 4 query / 2 KV heads, default (sdpa) "
        "attention, fresh, torch.onnx.export(model, (ids,), dynamo=True)"),

    "gemma-dyn20-sdpa": user(
        llama(2, 32, 4, 1, 64, 96, True, arch="GemmaForCausalLM", head_dim=8,
              pad_token_id=None),
        (2, 16),
        "HF Gemma, 2 layers, d=32, 4 query heads / 1 KV head, default (sdpa) "
        "attention, fresh, default export: opset 20's Gelu (tanh)"),
    "neox-dyn20-sdpa": user(
        hf("GPTNeoXForCausalLM", num_hidden_layers=2, hidden_size=32,
           num_attention_heads=4, intermediate_size=64, vocab_size=96,
           max_position_embeddings=64),
        (2, 16),
        "HF GPT-NeoX, 2 layers, d=32, 4 heads, parallel residual, partial "
        "rotary, default (sdpa) attention, fresh, default export: opset 20's "
        "Gelu (exact)"),

    # ---- depth, tying, folding
    "gpt2-dyn18-deep-b4": dyn(
        gpt2(4, 32, 4, 96, 32), (4, 16),
        "HF GPT-2, 4 layers, d=32, 4 heads, tied head, batch 4: pipeline "
        "stages with a tied embedding and LM head, 4 microbatches"),
    "gpt2-dyn18-deep12-b8": dyn(
        gpt2(12, 32, 4, 96, 32), (8, 16),
        "HF GPT-2, 12 layers, d=32, 4 heads, tied head, batch 8: 12 layers "
        "over 4 and 8 pipeline stages with a tied embedding and LM head, 8 "
        "microbatches"),
    # PipeDream-2BW's rule (ref/2bw-*.json).
    "gpt2-dyn18-2bw-b4": dyn(
        gpt2(4, 32, 4, 96, 32), (4, 16),
        "HF GPT-2, 4 layers, d=32, 4 heads, batch 4: PipeDream-2BW's "
        "delayed weights", twobw=True),
    "llama-dyn18-deep-2bw-b8": dyn(
        llama(8, 32, 4, 2, 32, 96, False), (8, 16),
        "HF Llama, 8 layers, d=32, 4 query / 2 KV heads, MLP 32 wide, vocab 96, "
        "batch 8: PipeDream-2BW's delayed weights over 4 pipeline stages, 8 "
        "microbatches", twobw=True),
    "qwen2-dyn18-tied-2bw-b4": dyn(
        llama(2, 32, 4, 2, 64, 96, True, arch="Qwen2ForCausalLM"), (4, 16),
        "HF Qwen2, 2 layers, d=32, 4 query / 2 KV heads, QKV biases, LM head "
        "tied to the embedding, batch 4: PipeDream-2BW's delayed weights over "
        "pipeline stages with a tied head", twobw=True),
    "neox-dyn18-2bw-b4": dyn(
        hf("GPTNeoXForCausalLM", num_hidden_layers=2, hidden_size=32,
           num_attention_heads=4, intermediate_size=64, vocab_size=96,
           max_position_embeddings=64),
        (4, 16),
        "HF GPT-NeoX, 2 layers, d=32, 4 heads, parallel residual, partial "
        "rotary, untied head, batch 4: PipeDream-2BW's delayed weights at "
        "tp 2 x pp 2", twobw=True),
    "gpt2-dyn18-bighead-b4": dyn(
        gpt2(4, 32, 4, 2048, 32), (4, 16),
        "HF GPT-2, 4 layers, d=32, 4 heads, a vocabulary of 2048 (the tied "
        "LM head weighs about five layers), batch 4: the head and the loss "
        "in pieces over pipeline stages"),
    "llama-dyn18-deep": dyn(
        llama(8, 32, 4, 2, 32, 96, False), (8, 16),
        "HF Llama, 8 layers, d=32, 4 query / 2 KV heads, MLP 32 wide, vocab 96, "
        "batch 8"),
    "qwen2-dyn18-tied": dyn(
        llama(2, 32, 4, 2, 64, 96, True, arch="Qwen2ForCausalLM"), (2, 16),
        "HF Qwen2, 2 layers, d=32, 4 query / 2 KV heads, QKV biases, LM head "
        "tied to the embedding"),
    "llama-ts17-nofold": ts(
        llama(2, 32, 4, 2, 64, 96, False), (2, 16), 17,
        "HF Llama, 2 layers, d=32, 4 query / 2 KV heads (GQA 2:1), untied head, "
        "TorchScript without constant folding"),

    # ---- other architectures. The decoders have no padding_idx
    # (pad_token_id=None where the config sets one): PyTorch zeroes the
    # gradient of that embedding row, which an ONNX graph cannot express.
    "falcon-dyn18": dyn(
        hf("FalconForCausalLM", hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
           vocab_size=96, new_decoder_architecture=False, multi_query=True,
           parallel_attn=True, bias=False, alibi=False, max_position_embeddings=64,
           hidden_dropout=0.0, attention_dropout=0.0), (2, 16),
        "HF Falcon, Falcon-7B layout: 2 layers, d=32, 4 query heads sharing one "
        "KV head in the fused query_key_value (sliced apart), parallel "
        "attention/MLP, rotary, no biases, exact GELU, tied head"),
    "falcon-dyn18-newdec": dyn(
        hf("FalconForCausalLM", hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
           num_kv_heads=2, vocab_size=96, new_decoder_architecture=True,
           bias=False, alibi=False, max_position_embeddings=64,
           hidden_dropout=0.0, attention_dropout=0.0), (2, 16),
        "HF Falcon, Falcon-40B layout (new_decoder_architecture): 2 layers, d=32, "
        "4 query / 2 KV heads grouped in the fused query_key_value, two "
        "LayerNorms per block, parallel attention/MLP, tied head"),
    "bloom-ts17": ts(
        hf("BloomForCausalLM", hidden_size=32, n_layer=2, n_head=4, vocab_size=96,
           hidden_dropout=0.0, attention_dropout=0.0), (2, 16), 17,
        "HF Bloom, 2 layers, d=32, 4 heads: ALiBi, fused QKV, embedding "
        "LayerNorm, tied head"),
    "bloom-dyn18": dyn(
        hf("BloomForCausalLM", hidden_size=32, n_layer=2, n_head=4, vocab_size=96,
           hidden_dropout=0.0, attention_dropout=0.0), (2, 16),
        "HF Bloom, 2 layers, d=32, 4 heads: ALiBi, fused QKV, embedding "
        "LayerNorm, tied head"),
    "gptj-ts17": ts(
        hf("GPTJForCausalLM", n_embd=32, n_layer=2, n_head=4, rotary_dim=4, vocab_size=96,
           n_positions=64, **NO_DROPOUT), (2, 16), 17,
        "HF GPT-J, 2 layers, d=32, 4 heads: partial interleaved rotary (4 of 8 "
        "dims), parallel attention/MLP, untied head with bias"),
    "gptj-dyn18": dyn(
        hf("GPTJForCausalLM", n_embd=32, n_layer=2, n_head=4, rotary_dim=4, vocab_size=96,
           n_positions=64, **NO_DROPOUT), (2, 16),
        "HF GPT-J, 2 layers, d=32, 4 heads: partial interleaved rotary, "
        "parallel attention/MLP, untied head with bias"),
    "codegen-ts17": ts(
        hf("CodeGenForCausalLM", n_embd=32, n_layer=2, n_head=4, rotary_dim=4,
           vocab_size=96, n_positions=64, n_ctx=64, **NO_DROPOUT), (2, 16), 17,
        "HF CodeGen, 2 layers, d=32, 4 heads: fused qkv_proj in 4 model-parallel "
        "groups, partial rotary, parallel attention/MLP"),
    "codegen-dyn18": dyn(
        hf("CodeGenForCausalLM", n_embd=32, n_layer=2, n_head=4, rotary_dim=4,
           vocab_size=96, n_positions=64, n_ctx=64, **NO_DROPOUT), (2, 16),
        "HF CodeGen, 2 layers, d=32, 4 heads: fused qkv_proj in 4 model-parallel "
        "groups, partial rotary, parallel attention/MLP"),
    "opt-ts17": ts(
        hf("OPTForCausalLM", hidden_size=32, num_hidden_layers=2, ffn_dim=64,
           num_attention_heads=4, vocab_size=96, max_position_embeddings=64,
           word_embed_proj_dim=32, dropout=0.0, attention_dropout=0.0,
           activation_dropout=0.0, layerdrop=0.0, pad_token_id=None), (2, 16), 17,
        "HF OPT, 2 layers, d=32, 4 heads: learned positions offset by 2, ReLU "
        "MLP, pre-LayerNorm, tied head"),
    "opt-dyn18": dyn(
        hf("OPTForCausalLM", hidden_size=32, num_hidden_layers=2, ffn_dim=64,
           num_attention_heads=4, vocab_size=96, max_position_embeddings=64,
           word_embed_proj_dim=32, dropout=0.0, attention_dropout=0.0,
           activation_dropout=0.0, layerdrop=0.0, pad_token_id=None), (2, 16),
        "HF OPT, 2 layers, d=32, 4 heads: learned positions offset by 2, ReLU "
        "MLP, pre-LayerNorm, tied head"),
    "roberta-ts17": ts(
        bert(2, 32, 4, 64, 96, arch="RobertaForMaskedLM", npos=40), (2, 16), 17,
        "HF RoBERTa masked LM, 2 layers, d=32, 4 heads: position ids from the "
        "padding mask (cumsum); forward only", train=False),
    "roberta-dyn18": dyn(
        bert(2, 32, 4, 64, 96, arch="RobertaForMaskedLM", npos=40), (2, 16),
        "HF RoBERTa masked LM, 2 layers, d=32, 4 heads: position ids from the "
        "padding mask (cumsum); forward only", train=False),
    "mistral-dyn18": dyn(
        llama(2, 32, 4, 2, 64, 96, False, arch="MistralForCausalLM", sliding_window=None),
        (2, 16),
        "HF Mistral, 2 layers, d=32, 4 query / 2 KV heads, untied head"),
    "phi3-dyn18": dyn(
        llama(2, 32, 4, 2, 64, 96, False, arch="Phi3ForCausalLM", pad_token_id=None,
              bos_token_id=1, eos_token_id=2, resid_pdrop=0.0, embd_pdrop=0.0,
              attention_dropout=0.0), (2, 16),
        "HF Phi-3, 2 layers, d=32, 4 query / 2 KV heads: fused qkv_proj and "
        "gate_up_proj, untied head"),
    "gemma-dyn18": dyn(
        llama(2, 32, 4, 1, 64, 96, True, arch="GemmaForCausalLM", head_dim=8,
              pad_token_id=None),
        (2, 16),
        "HF Gemma, 2 layers, d=32, 4 query heads / 1 KV head: embedding scaled "
        "by sqrt(d), RMSNorm with 1 + w, tanh-GELU gated MLP, tied head"),
    "gemma2-dyn18": dyn(
        llama(2, 32, 4, 2, 64, 96, True, arch="Gemma2ForCausalLM", head_dim=8,
              pad_token_id=None, attn_logit_softcapping=1.5,
              final_logit_softcapping=8.0, initializer_range=0.3),
        (2, 16),
        "HF Gemma 2, 2 layers, d=32, 4 query / 2 KV heads: the attention "
        "scores soft-capped (tanh, cap 1.5) and the logits (cap 8), pre- and "
        "post-norms, tied head"),
    "gemma3-dyn18-sw": dyn(
        llama(2, 32, 4, 2, 64, 96, True, arch="Gemma3ForCausalLM", head_dim=8,
              pad_token_id=None, sliding_window=5,
              layer_types=["sliding_attention", "full_attention"],
              initializer_range=0.3),
        (2, 16),
        "HF Gemma 3, 2 layers, d=32, 4 query / 2 KV heads: the first layer's "
        "attention in a sliding window of 5 keys, the second's causal over "
        "the whole sequence; q/k norms, tied head"),
    "mixtral-dyn18-moe": dyn(
        llama(2, 32, 4, 2, 48, 96, False, arch="MixtralForCausalLM",
              sliding_window=None, num_local_experts=4, num_experts_per_tok=2,
              router_jitter_noise=0.0, experts_implementation="batched_mm"),
        (2, 16),
        "HF Mixtral, 2 layers, d=32, 4 query / 2 KV heads, a sparse mixture "
        "of 4 experts, the top 2 per token (TopK; transformers' exportable "
        "batched_mm experts: each token-expert pair's weights gathered), "
        "untied head"),
    "gptoss-dyn18-noopt-sinks": dyn(
        llama(2, 32, 4, 2, 48, 96, False, arch="GptOssForCausalLM", head_dim=8,
              sliding_window=5, layer_types=["sliding_attention", "full_attention"],
              num_local_experts=4, num_experts_per_tok=2, initializer_range=0.3,
              experts_implementation="batched_mm"),
        (2, 16),
        "HF GPT-OSS, 2 layers, d=32, 4 query / 2 KV heads, exported without "
        "the optimizer (which folds the sinks' expand into a constant): "
        "attention sinks (a "
        "learned logit per head concatenated to the scores, the row's maximum "
        "subtracted, the sink's probability sliced off), the first layer's "
        "attention in a sliding window of 5, a mixture of 4 clamped SwiGLU "
        "experts (top 2), YaRN rotary scaling, untied head", optimize=False),
    "openai-gpt-dyn18": dyn(
        hf("OpenAIGPTLMHeadModel", n_layer=2, n_embd=32, n_head=4,
           vocab_size=96, n_positions=32, **NO_DROPOUT), (2, 16),
        "HF OpenAI GPT (GPT-1), 2 layers, d=32, 4 heads: post-LayerNorm, "
        "the scores masked by its triangle buffer b as s * b + -1e4 * (1 - b), "
        "tied head"),
    "ctrl-dyn18": dyn(
        hf("CTRLLMHeadModel", n_layer=2, n_embd=32, n_head=4, dff=64,
           vocab_size=96, n_positions=64, **NO_DROPOUT), (2, 16),
        "HF CTRL, 2 layers, d=32, 4 heads, MLP 64: a fixed sinusoidal "
        "position table (a buffer the optimizer folds into an initializer "
        "without a record), embeddings scaled by sqrt(d), pre-LayerNorm, "
        "head tied to the embedding, with a bias"),
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


def _all_nodes(g):
    """The nodes of a graph or function and of their subgraphs."""
    for n in g.node:
        yield n
        for a in n.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _all_nodes(sub)


def lm_loss(model, input_ids):
    logits = logits_of(model(input_ids))
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
        input_ids[:, 1:].reshape(-1))


def sgd_losses(model, input_ids, steps=SGD_STEPS, lr=SGD_LR):
    """The losses of `steps` plain SGD steps (no momentum, no weight decay) on
    one batch, in train mode, on a copy of model: losses[0] is the loss before
    the first update."""
    model = copy.deepcopy(model)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.0, weight_decay=0.0)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = lm_loss(model, input_ids)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    return losses


def schedule_factor(s, a=ADAMW):
    """LambdaLR's factor after s completed steps: (s + 1) / W during the
    warmup, then a cosine from 1 to min_lr / lr over steps W..N, then
    min_lr / lr."""
    import math
    if s < a["warmup"]:
        return (s + 1) / a["warmup"]
    p = min(1.0, (s - a["warmup"]) / (a["decay"] - a["warmup"]))
    m = a["min_lr"] / a["lr"]
    return m + (1 - m) * (1 + math.cos(math.pi * p)) / 2


def adamw_losses(model, input_ids, a=ADAMW):
    """The losses, gradient norms (before clipping) and learning rates of
    a["steps"] AdamW steps with gradient clipping and the schedule, on one
    batch, in train mode, on a copy of model."""
    model = copy.deepcopy(model)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=a["lr"], betas=a["betas"],
                            eps=a["eps"], weight_decay=a["weight_decay"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule_factor)
    losses, norms, lrs = [], [], []
    for _ in range(a["steps"]):
        opt.zero_grad()
        loss = lm_loss(model, input_ids)
        losses.append(loss.item())
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(),
                                                    a["clip"]).item())
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return losses, norms, lrs


def twobw_losses(model, input_ids, kind, a=ADAMW, steps=6):
    """PipeDream-2BW's rule with a delay of one step, on a copy of model:
    each step's loss and gradients are taken at the weights one update old,
    W(t-1), and applied to the newest, W(t+1) = W(t) - lr * grad f_t(W(t-1)),
    with W(-1) = W(0). kind "sgd" (lr SGD_LR) or "adamw" (a's clipping and
    schedule; its moments see the delayed gradients). Returns the losses,
    and for AdamW the gradient norms and rates."""
    model = copy.deepcopy(model)
    model.train()
    params = [p for p in model.parameters()]
    if kind == "sgd":
        opt = torch.optim.SGD(params, lr=SGD_LR, momentum=0.0, weight_decay=0.0)
        sched = None
    else:
        opt = torch.optim.AdamW(params, lr=a["lr"], betas=a["betas"],
                                eps=a["eps"], weight_decay=a["weight_decay"])
        sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule_factor)
    previous = [p.detach().clone() for p in params]
    losses, norms, lrs = [], [], []
    for _ in range(steps):
        current = [p.detach().clone() for p in params]
        with torch.no_grad():
            for p, w in zip(params, previous):
                p.copy_(w)
        opt.zero_grad()
        loss = lm_loss(model, input_ids)
        losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            for p, w in zip(params, current):
                p.copy_(w)
        if sched:
            norms.append(torch.nn.utils.clip_grad_norm_(params, a["clip"]).item())
            lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        if sched:
            sched.step()
        previous = current
    return losses, norms, lrs


def default_opset(m):
    return next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))


def map_initializers(model, inits):
    """For every parameter with a gradient: the initializers holding it as is
    and transposed (when several hold an equal value, those named after the
    parameter), and the other parameters that one initializer holds too (the
    optimizer merges equal initializers: its gradient is their sum)."""
    names = {}
    for i, (n, p) in enumerate(model.named_parameters()):
        if p.grad is None:
            continue
        pv = p.detach().numpy()
        same = [k for k, v in inits.items()
                if v.shape == pv.shape and np.array_equal(v, pv)]
        trans = [k for k, v in inits.items()
                 if pv.ndim == 2 and v.shape == pv.T.shape and np.array_equal(v, pv.T)]
        if len(same) > 1 and n in same:
            same = [n]
        names[n] = {"file": "grad_%03d.pb" % i, "onnx_initializer": same,
                    "onnx_initializer_transposed": trans}
    holders = {}
    for n, info in names.items():
        held = info["onnx_initializer"] + info["onnx_initializer_transposed"]
        if len(held) == 1:
            holders.setdefault(held[0], []).append(n)
    for n, info in names.items():
        held = info["onnx_initializer"] + info["onnx_initializer_transposed"]
        if len(held) == 1 and len(holders[held[0]]) > 1:
            info["shared_with"] = [o for o in holders[held[0]] if o != n]
    return names


def export(name, v, model, input_ids):
    if hasattr(model, "config"):
        model.config.use_cache = False
        attn = model.config._attn_implementation
        model = LogitsOnly(model)
    else:
        attn = None
    if v.perturb:
        with torch.no_grad():
            for p in model.parameters():  # tied parameters are listed once
                p.add_(0.02 * torch.randn_like(p))
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "ref"))
    model.eval()
    path = os.path.join(d, "model.onnx")
    kw = dict(input_names=["input_ids"], output_names=["logits"], opset_version=v.opset)
    if v.plain:
        prog = torch.onnx.export(model, (input_ids,), dynamo=True)
        prog.save(path)
    elif v.exporter == "dynamo":
        prog = torch.onnx.export(model, (input_ids,), dynamo=True, optimize=v.optimize, **kw)
        prog.save(path)
    else:
        with _no_packed_sequences():
            torch.onnx.export(model, (input_ids,), path, dynamo=False,
                              do_constant_folding=v.fold, **kw)
    # Everything inline: a fixture is one model.onnx, no external data. The
    # dynamo exporter's per-node stack traces name this script's lines and the
    # exporting Python's paths: dropped, so that the files depend on the
    # packages only.
    m = onnx.load(path)
    for g in [m.graph] + list(m.functions):
        for n in _all_nodes(g):
            keep = [p for p in n.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
            del n.metadata_props[:]
            n.metadata_props.extend(keep)
    onnx.save(m, path)
    extra = sorted(set(os.listdir(d)) - {"model.onnx", "ref"})
    for f in extra:
        os.remove(os.path.join(d, f))
    init_names = {i.name for i in m.graph.initializer}
    in_name = [i.name for i in m.graph.input if i.name not in init_names][0]
    out_name = m.graph.output[0].name
    with torch.no_grad():
        logits = logits_of(model(input_ids))
    save_pb(input_ids.numpy(), in_name, os.path.join(d, "ref", "input_0.pb"))
    save_pb(logits.float().numpy(), out_name, os.path.join(d, "ref", "output_0.pb"))
    opset = default_opset(m)
    if v.opset is not None and opset != v.opset:
        print(name, "note: asked for opset", v.opset, "got", opset, flush=True)
    meta = {"tag": name, "opset": opset, "exporter": v.exporter,
            "constant_folding": v.fold, "input_shape": list(input_ids.shape),
            "ops": sorted({n.op_type for n in m.graph.node}),
            "num_nodes": len(m.graph.node),
            "initializers": len(m.graph.initializer),
            "description": v.desc,
            "versions": {"torch": torch.__version__, "onnx": onnx.__version__}}
    if v.exporter == "dynamo":
        meta["optimize"] = v.optimize
    meta["perturbed"] = v.perturb
    if attn is not None:
        meta["attn_implementation"] = attn
    if v.plain:
        meta["export_call"] = "torch.onnx.export(model, (input_ids,), dynamo=True)"
    if in_name != "input_ids" or out_name != "logits":
        meta["input_name"], meta["output_name"] = in_name, out_name
    if m.functions:
        meta["functions"] = sorted({f.name for f in m.functions})
        meta["function_ops"] = sorted({n.op_type for f in m.functions for n in f.node})
    try:
        import transformers
        meta["versions"]["transformers"] = transformers.__version__
    except ImportError:
        pass
    if v.train:
        model.train()
        model.zero_grad()
        loss = lm_loss(model, input_ids)
        loss.backward()
        gd = os.path.join(d, "ref", "grads")
        os.makedirs(gd)
        names = map_initializers(
            model, {i.name: numpy_helper.to_array(i) for i in m.graph.initializer})
        params = dict(model.named_parameters())
        for n, info in names.items():
            save_pb(params[n].grad.numpy(), n, os.path.join(gd, info["file"]))
        save_pb(np.array(loss.item(), dtype=np.float32), "loss",
                os.path.join(d, "ref", "loss.pb"))
        meta["loss"] = loss.item()
        meta["grads"] = names
        # Exported graphs that may not be the PyTorch model as a trainable
        # model: the optimizer merged equal parameters, dropped all-zero ones
        # or folded some into derived constants (see README.md).
        merged = sorted(n for n, i in names.items() if i.get("shared_with"))
        dropped = sorted(n for n, i in names.items()
                         if not i["onnx_initializer"] and not i["onnx_initializer_transposed"]
                         and not params[n].detach().any())
        folded = sorted(n for n, i in names.items()
                        if not i["onnx_initializer"] and not i["onnx_initializer_transposed"]
                        and n not in dropped)
        if merged:
            meta["params_merged"] = merged
        if dropped:
            meta["params_dropped_zero"] = dropped
        if folded:
            meta["params_folded"] = folded
        meta["loss_def"] = "mean cross-entropy of logits[:, :-1] against input_ids[:, 1:]"
        # After the gradient reference, on a copy: the references above stay
        # those of the exported weights.
        losses = sgd_losses(model, input_ids)
        with open(os.path.join(d, "ref", "sgd.json"), "w") as f:
            json.dump({"optimizer": "sgd", "lr": SGD_LR, "losses": losses}, f, indent=1)
        meta["sgd_losses"] = losses
        if v.schedule:
            losses, norms, lrs = adamw_losses(model, input_ids)
            assert all(n > ADAMW["clip"] for n in norms), norms
            ref = dict(ADAMW, optimizer="adamw", losses=losses,
                       grad_norms=norms, lrs=lrs)
            with open(os.path.join(d, "ref", "adamw.json"), "w") as f:
                json.dump(ref, f, indent=1)
        if v.twobw:
            losses, _, _ = twobw_losses(model, input_ids, "sgd")
            with open(os.path.join(d, "ref", "2bw-sgd.json"), "w") as f:
                json.dump({"optimizer": "sgd", "lr": SGD_LR, "rule": "2bw",
                           "losses": losses}, f, indent=1)
            losses, norms, lrs = twobw_losses(model, input_ids, "adamw")
            with open(os.path.join(d, "ref", "2bw-adamw.json"), "w") as f:
                json.dump(dict(ADAMW, optimizer="adamw", rule="2bw",
                               losses=losses, grad_norms=norms, lrs=lrs),
                          f, indent=1)
        meta["sgd"] = {"optimizer": "sgd", "lr": SGD_LR, "momentum": 0.0,
                       "weight_decay": 0.0, "steps": SGD_STEPS,
                       "batch": "ref/input_0.pb every step", "mode": "train"}
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
    # One thread: the references' float rounding does not depend on the
    # machine's core count.
    torch.set_num_threads(1)
    failed = []
    for name in only:
        v = VARIANTS[name]
        torch.manual_seed(zlib.crc32(name.encode()) % 1000)
        try:
            model = v.make(v.attn)
            vocab = model.config.vocab_size if hasattr(model, "config") else model.vocab
            input_ids = torch.randint(0, vocab, v.shape)
            export(name, v, model, input_ids)
        except Exception:
            print(name, "FAILED", flush=True)
            traceback.print_exc()
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
