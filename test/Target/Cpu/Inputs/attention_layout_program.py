#!/usr/bin/env python3
"""Writes a program of sequence-first graph.attention, for
attention-layout-run.test, and what it must compute.

usage: attention_layout_program.py OUTDIR

Queries, keys and values [B, T, H, D] as a projection's rows make them
(grouped-query: 4 query heads over 2 key/value heads; 200 tokens, several
of the kernels' blocks of rows and keys), causal:
- `o_direct`: an op given `sequence_first` in the IR, at a scale that is
  not a power of two (0.3: the kernels scale the scores);
- `o_relaid`: the heads-first op between the exporters' transposes of
  dimensions 1 and 2, at 0.25 (a power of two: the CPU kernel scales the
  queries as it copies them), which pcc-attention-layout gives
  `sequence_first` when the program is compiled;
- `o_split`: the same of the three split from one fused projection's rows
  `qkv` [B, T, (H + 2 G) D], as GPT-2's are: the op reads them in that
  buffer, at their offsets, and the split has no code.
Writes OUTDIR/program.mlir (Graph dialect IR), OUTDIR/{q,k,v,qkv}.pb (its
inputs) and OUTDIR/{o_direct,o_relaid,o_split}.pb computed with numpy in
float64, [B, T, H, D] as the program returns them.
"""
import os
import sys

import numpy as np
from onnx import numpy_helper

rng = np.random.default_rng(7)
B, T, H, G, D = 2, 200, 4, 2, 16
q = rng.standard_normal((B, T, H, D)).astype(np.float32)
k = rng.standard_normal((B, T, G, D)).astype(np.float32)
v = rng.standard_normal((B, T, G, D)).astype(np.float32)
qkv = np.concatenate([q.reshape(B, T, H * D), k.reshape(B, T, G * D),
                      v.reshape(B, T, G * D)], axis=-1)


def reference(scale):
    """Causal attention of the sequence-first operands, in float64."""
    rep = H // G
    qd = q.astype(np.float64).transpose(0, 2, 1, 3)
    kd = np.repeat(k.astype(np.float64).transpose(0, 2, 1, 3), rep, axis=1)
    vd = np.repeat(v.astype(np.float64).transpose(0, 2, 1, 3), rep, axis=1)
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    s = np.where(j <= i, scale * qd @ kd.transpose(0, 1, 3, 2), -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ vd).transpose(0, 2, 1, 3)


def ty(shape, element="f32"):
    return f"tensor<{'x'.join(map(str, shape))}x{element}>"


QS, KS = ty(q.shape), ty(k.shape)
QH, KH = ty((B, H, T, D)), ty((B, G, T, D))
LT = ty((B, H, T))
swap = "{perm = array<i64: 0, 2, 1, 3>}"
body = [
    f"  %o_direct, %lse_direct = graph.attention %q, %k, %v "
    f"{{causal, scale = 0.3 : f32, sequence_first}} : ({QS}, {KS}, {KS}) "
    f"-> ({QS}, {LT})",
    f"  %qt = graph.transpose %q {swap} : ({QS}) -> {QH}",
    f"  %kt = graph.transpose %k {swap} : ({KS}) -> {KH}",
    f"  %vt = graph.transpose %v {swap} : ({KS}) -> {KH}",
    f"  %oh, %lse = graph.attention %qt, %kt, %vt "
    f"{{causal, scale = 0.25 : f32}} : ({QH}, {KH}, {KH}) -> ({QH}, {LT})",
    f"  %o_relaid = graph.transpose %oh {swap} : ({QH}) -> {QS}",
    f"  %sq, %sk, %sv = graph.split %qkv {{axis = 2 : i64, "
    f"sizes = array<i64: {H * D}, {G * D}, {G * D}>}} : "
    f"({ty(qkv.shape)}) -> ({ty((B, T, H * D))}, {ty((B, T, G * D))}, "
    f"{ty((B, T, G * D))})",
    f"  %rq = graph.reshape %sq : {ty((B, T, H * D))} to {QS}",
    f"  %rk = graph.reshape %sk : {ty((B, T, G * D))} to {KS}",
    f"  %rv = graph.reshape %sv : {ty((B, T, G * D))} to {KS}",
    f"  %sqt = graph.transpose %rq {swap} : ({QS}) -> {QH}",
    f"  %skt = graph.transpose %rk {swap} : ({KS}) -> {KH}",
    f"  %svt = graph.transpose %rv {swap} : ({KS}) -> {KH}",
    f"  %os, %lses = graph.attention %sqt, %skt, %svt "
    f"{{causal, scale = 0.25 : f32}} : ({QH}, {KH}, {KH}) -> ({QH}, {LT})",
    f"  %o_split = graph.transpose %os {swap} : ({QH}) -> {QS}",
]
results = {"o_direct": reference(0.3), "o_relaid": reference(0.25),
           "o_split": reference(0.25)}
signature = ", ".join(f'{QS} {{onnx.name = "{n}"}}' for n in results)
inputs = ", ".join(f'%{n}: {ty(t.shape)} {{onnx.name = "{n}"}}'
                   for n, t in (("q", q), ("k", k), ("v", v),
                                ("qkv", qkv)))
ir = "\n".join([
    f"func.func @main({inputs}) -> ({signature}) {{",
    *body,
    f"  return {', '.join('%' + n for n in results)} : "
    f"{', '.join(QS for _ in results)}",
    "}", ""])

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "program.mlir"), "w") as f:
    f.write(ir)
for name, value in list({"q": q, "k": k, "v": v, "qkv": qkv}.items()) + \
        list(results.items()):
    with open(os.path.join(out, name + ".pb"), "wb") as f:
        f.write(numpy_helper.from_array(
            np.ascontiguousarray(value, dtype=np.float32), name)
            .SerializeToString())
