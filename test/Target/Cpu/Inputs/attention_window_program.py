#!/usr/bin/env python3
"""Writes a program of graph.attention and graph.attention_grad under a
sliding window, for attention-window-run.test, and what it must compute.

usage: attention_window_program.py OUTDIR

Sequences long enough for several blocks of rows and keys in the kernels
(200 queries and keys; the CPU's blocks are 32 rows by 64 keys, CUDA's 16
by 32): under a window of 34 the forward skips the key blocks before a row
block's window, and the last row that a key block reaches, j0 + 64 + 32
(CPU) or j0 + 32 + 32 (CUDA), is the first of its block of rows, so that
the backward's bound is checked exactly; windows of 2 and 150. Grouped-query heads (4 query heads, 2 key/value
heads), causal.
Writes OUTDIR/program.mlir (Graph dialect IR), OUTDIR/{q,k,v,g}.pb (its
inputs: the queries, keys, values and the output's gradient) and, per
window W, OUTDIR/{o,dq,dk,dv}_W.pb computed with numpy in float64.
"""
import os
import sys

import numpy as np
from onnx import numpy_helper

rng = np.random.default_rng(5)
B, H, G, T, D = 1, 4, 2, 200, 16
SCALE = 0.25
WINDOWS = (34, 2, 150)
q = rng.standard_normal((B, H, T, D)).astype(np.float32)
k = rng.standard_normal((B, G, T, D)).astype(np.float32)
v = rng.standard_normal((B, G, T, D)).astype(np.float32)
g = rng.standard_normal((B, H, T, D)).astype(np.float32)


def reference(window):
    """The windowed attention and its gradients, in float64."""
    rep = H // G
    kr = np.repeat(k.astype(np.float64), rep, axis=1)
    vr = np.repeat(v.astype(np.float64), rep, axis=1)
    qd, gd = q.astype(np.float64), g.astype(np.float64)
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    keep = (j <= i) & (j > i - window)
    s = np.where(keep, SCALE * qd @ kr.transpose(0, 1, 3, 2), -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = p @ vr
    dvr = p.transpose(0, 1, 3, 2) @ gd
    dp = gd @ vr.transpose(0, 1, 3, 2)
    ds = p * (dp - (gd * o).sum(-1, keepdims=True))
    dq = SCALE * ds @ kr
    dkr = SCALE * ds.transpose(0, 1, 3, 2) @ qd
    group = lambda t: t.reshape(B, G, rep, T, D).sum(2)
    return {"o": o, "dq": dq, "dk": group(dkr), "dv": group(dvr)}


def ty(shape, element="f32"):
    return f"tensor<{'x'.join(map(str, shape))}x{element}>"


QT, KT, LT = ty(q.shape), ty(k.shape), ty((B, H, T))
results = {}
body = []
for w in WINDOWS:
    attrs = f"{{causal, scale = {SCALE} : f32, window = {w} : i64}}"
    body.append(
        f"  %o_{w}, %lse_{w} = graph.attention %q, %k, %v {attrs} : "
        f"({QT}, {KT}, {KT}) -> ({QT}, {LT})")
    body.append(
        f"  %dq_{w}, %dk_{w}, %dv_{w} = graph.attention_grad %q, %k, %v, "
        f"%o_{w}, %lse_{w}, %g {attrs} : ({QT}, {KT}, {KT}, {QT}, {LT}, "
        f"{QT}) -> ({QT}, {KT}, {KT})")
    for name, value in reference(w).items():
        results[f"{name}_{w}"] = value
signature = ", ".join(f'{ty(r.shape)} {{onnx.name = "{n}"}}'
                      for n, r in results.items())
inputs = ", ".join(f'%{n}: {ty(t.shape)} {{onnx.name = "{n}"}}'
                   for n, t in (("q", q), ("k", k), ("v", v), ("g", g)))
ir = "\n".join([
    f"func.func @main({inputs}) -> ({signature}) {{",
    *body,
    f"  return {', '.join('%' + n for n in results)} : "
    f"{', '.join(ty(r.shape) for r in results.values())}",
    "}", ""])

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "program.mlir"), "w") as f:
    f.write(ir)
for name, value in list({"q": q, "k": k, "v": v, "g": g}.items()) + \
        list(results.items()):
    with open(os.path.join(out, name + ".pb"), "wb") as f:
        f.write(numpy_helper.from_array(
            np.ascontiguousarray(value, dtype=np.float32), name)
            .SerializeToString())
