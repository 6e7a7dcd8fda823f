#!/usr/bin/env python3
"""Writes a program whose products read their operands through chains of
data movement, for strided-operands-run.test, and what it must compute.

usage: strided_operands_program.py OUTDIR

Writes OUTDIR/program.mlir (Graph dialect IR), OUTDIR/x.pb (its input) and
one OUTDIR/NAME.pb per result, computed with numpy:
  attention  a fused QKV row split into q, k, v, each viewed as heads and
             transposed (k to [heads, dim, seq]), two batched products;
  rows       a slice of every other row and some columns, times a weight
             through gemm's transB, and again through its transpose with
             transA (gemm's flags and the layout's transposition combine);
  vector     a column of x as a vector times a block of x (a strided row
             vector, read as a transposed 1 x n matrix);
  shared     one head of k broadcast to every head of q (expand: batch
             stride 0);
  copied     a transpose that an element-wise op also reads (it stays a
             copy) times x;
  merged     the transpose of a slice, reshaped so that dimensions that
             are not evenly spaced merge (both stay copies), times a
             weight.
"""
import os
import sys

import numpy as np
from onnx import numpy_helper

rng = np.random.default_rng(11)
S, H, D = 6, 2, 3
W = H * D
x = rng.standard_normal((S, 3 * W)).astype(np.float32)
w = rng.standard_normal((5, 4)).astype(np.float32)
w2 = rng.standard_normal((9, 2)).astype(np.float32)

q, k, v = np.split(x, 3, axis=1)
heads = lambda t: t.reshape(1, S, H, D).transpose(0, 2, 1, 3)
qt, vt = heads(q), heads(v)
kt = k.reshape(1, S, H, D).transpose(0, 2, 3, 1)
attention = (qt @ kt) @ vt
a = x[1::2, 2:6]
rows = a @ w.T
vector = x[:, 7] @ x[:, 10:14]
shared = qt @ np.broadcast_to(kt[:, :1], (1, H, D, S))
t = x.T
copied_sum = t + t
copied = t @ x
merged = x[:, :W].T.reshape(4, 9) @ w2


def attr(value):
    text = np.array2string(value, separator=", ", floatmode="unique",
                           threshold=1 << 20, max_line_width=1 << 20)
    return f"dense<{text}> : {ty(value.shape)}"


def ty(shape):
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


X, Q = ty(x.shape), ty(q.shape)
Q4, QT, KT = ty((1, S, H, D)), ty(qt.shape), ty(kt.shape)
results = {"attention": attention, "rows": rows, "rows_t": rows,
           "vector": vector, "shared": shared, "copied": copied,
           "copied_sum": copied_sum, "merged": merged}
signature = ", ".join(f'{ty(r.shape)} {{onnx.name = "{n}"}}'
                      for n, r in results.items())
ir = f"""
func.func @main(%x: {X} {{onnx.name = "x"}}) -> ({signature}) {{
  %w = graph.weight "w" {attr(w)}
  %w2 = graph.weight "w2" {attr(w2)}
  %q, %k, %v = graph.split %x {{axis = 1 : i64, sizes = array<i64: {W}, {W}, {W}>}} : ({X}) -> ({Q}, {Q}, {Q})
  %q4 = graph.reshape %q : {Q} to {Q4}
  %k4 = graph.reshape %k : {Q} to {Q4}
  %v4 = graph.reshape %v : {Q} to {Q4}
  %qt = graph.transpose %q4 {{perm = array<i64: 0, 2, 1, 3>}} : ({Q4}) -> {QT}
  %kt = graph.transpose %k4 {{perm = array<i64: 0, 2, 3, 1>}} : ({Q4}) -> {KT}
  %vt = graph.transpose %v4 {{perm = array<i64: 0, 2, 1, 3>}} : ({Q4}) -> {QT}
  %s = graph.matmul %qt, %kt : ({QT}, {KT}) -> {ty((1, H, S, S))}
  %attention = graph.matmul %s, %vt : ({ty((1, H, S, S))}, {QT}) -> {QT}
  %a = graph.slice %x {{starts = array<i64: 1, 2>, sizes = array<i64: 3, 4>, steps = array<i64: 2, 1>}} : ({X}) -> {ty((3, 4))}
  %rows = graph.gemm %a, %w {{transB = true}} : ({ty((3, 4))}, {ty((5, 4))}) -> {ty((3, 5))}
  %at = graph.transpose %a {{perm = array<i64: 1, 0>}} : ({ty((3, 4))}) -> {ty((4, 3))}
  %rows_t = graph.gemm %at, %w {{transA = true, transB = true}} : ({ty((4, 3))}, {ty((5, 4))}) -> {ty((3, 5))}
  %col = graph.slice %x {{starts = array<i64: 0, 7>, sizes = array<i64: {S}, 1>, steps = array<i64: 1, 1>}} : ({X}) -> {ty((S, 1))}
  %vec = graph.reshape %col : {ty((S, 1))} to {ty((S,))}
  %blk = graph.slice %x {{starts = array<i64: 0, 10>, sizes = array<i64: {S}, 4>, steps = array<i64: 1, 1>}} : ({X}) -> {ty((S, 4))}
  %vector = graph.matmul %vec, %blk : ({ty((S,))}, {ty((S, 4))}) -> {ty((4,))}
  %k0 = graph.slice %kt {{starts = array<i64: 0, 0, 0, 0>, sizes = array<i64: 1, 1, {D}, {S}>, steps = array<i64: 1, 1, 1, 1>}} : ({KT}) -> {ty((1, 1, D, S))}
  %ke = graph.expand %k0 : {ty((1, 1, D, S))} to {KT}
  %shared = graph.matmul %qt, %ke : ({QT}, {KT}) -> {ty((1, H, S, S))}
  %t = graph.transpose %x {{perm = array<i64: 1, 0>}} : ({X}) -> {ty(t.shape)}
  %copied = graph.matmul %t, %x : ({ty(t.shape)}, {X}) -> {ty(copied.shape)}
  %copied_sum = graph.add %t, %t : ({ty(t.shape)}, {ty(t.shape)}) -> {ty(t.shape)}
  %first = graph.slice %x {{starts = array<i64: 0, 0>, sizes = array<i64: {S}, {W}>, steps = array<i64: 1, 1>}} : ({X}) -> {Q}
  %qtr = graph.transpose %first {{perm = array<i64: 1, 0>}} : ({Q}) -> {Q}
  %qm = graph.reshape %qtr : {Q} to {ty((4, 9))}
  %merged = graph.matmul %qm, %w2 : ({ty((4, 9))}, {ty(w2.shape)}) -> {ty(merged.shape)}
  return {", ".join("%" + n for n in results)} : {", ".join(ty(r.shape) for r in results.values())}
}}
"""

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "program.mlir"), "w") as f:
    f.write(ir)
with open(os.path.join(out, "x.pb"), "wb") as f:
    f.write(numpy_helper.from_array(x, "x").SerializeToString())
for name, value in results.items():
    with open(os.path.join(out, name + ".pb"), "wb") as f:
        f.write(numpy_helper.from_array(
            np.ascontiguousarray(value, dtype=np.float32), name)
            .SerializeToString())
