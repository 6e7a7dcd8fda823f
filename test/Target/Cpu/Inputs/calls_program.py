#!/usr/bin/env python3
"""Writes a program of several functions for calls-run.test, and what it
must compute.

usage: calls_program.py OUTDIR

Writes OUTDIR/program.mlir (Graph dialect IR: an entry that embeds token ids
through @embed, applies @dense twice with two layers' weights passed as
arguments, and ends in @head, two results), OUTDIR/ids.pb (the input) and
OUTDIR/score.pb and OUTDIR/probs.pb, the outputs computed with numpy. The
weights are random (seeded) and written into the IR.
"""
import os
import sys

import numpy as np
from onnx import numpy_helper

rng = np.random.default_rng(7)
VOCAB, BATCH, WIDTH = 5, 3, 4
table = rng.standard_normal((VOCAB, WIDTH)).astype(np.float32)
layers = [(rng.standard_normal((WIDTH, WIDTH)).astype(np.float32),
           rng.standard_normal(WIDTH).astype(np.float32)) for _ in range(2)]
ids = np.array([4, 0, 2], dtype=np.int64)


def dense(x, w, b):
    return np.maximum(x @ w + b, 0)


h = table[ids]
for w, b in layers:
    h = dense(h, w, b)
score = h.sum(axis=1)
e = np.exp(h - h.max(axis=1, keepdims=True))
probs = e / e.sum(axis=1, keepdims=True)


def attr(a):
    text = np.array2string(a, separator=", ", floatmode="unique",
                           threshold=1 << 20, max_line_width=1 << 20)
    return f"dense<{text}> : tensor<{'x'.join(map(str, a.shape))}xf32>"


X, W, B = (f"tensor<{BATCH}x{WIDTH}xf32>", f"tensor<{WIDTH}x{WIDTH}xf32>",
           f"tensor<{WIDTH}xf32>")
ir = f"""
func.func private @embed(%ids: tensor<{BATCH}xi64>) -> {X} {{
  %table = graph.weight "table" {attr(table)}
  %e = graph.gather %table[%ids] {{axis = 0 : i64}} : (tensor<{VOCAB}x{WIDTH}xf32>, tensor<{BATCH}xi64>) -> {X}
  return %e : {X}
}}

func.func private @dense(%x: {X}, %w: {W}, %b: {B}) -> {X} {{
  %m = graph.matmul %x, %w : ({X}, {W}) -> {X}
  %a = graph.add %m, %b : ({X}, {B}) -> {X}
  %r = graph.relu %a : {X}
  return %r : {X}
}}

func.func private @head(%h: {X}) -> (tensor<{BATCH}xf32>, {X}) {{
  %s = graph.reduce_sum %h {{axes = array<i64: 1>, keepdims = false}} : ({X}) -> tensor<{BATCH}xf32>
  %p = graph.softmax %h {{axis = 1 : i64}} : {X}
  return %s, %p : tensor<{BATCH}xf32>, {X}
}}

func.func @main(%ids: tensor<{BATCH}xi64> {{onnx.name = "ids"}})
    -> (tensor<{BATCH}xf32> {{onnx.name = "score"}}, {X} {{onnx.name = "probs"}}) {{
  %w1 = graph.weight "w1" {attr(layers[0][0])}
  %b1 = graph.weight "b1" {attr(layers[0][1])}
  %w2 = graph.weight "w2" {attr(layers[1][0])}
  %b2 = graph.weight "b2" {attr(layers[1][1])}
  %e = call @embed(%ids) : (tensor<{BATCH}xi64>) -> {X}
  %h1 = call @dense(%e, %w1, %b1) : ({X}, {W}, {B}) -> {X}
  %h2 = call @dense(%h1, %w2, %b2) : ({X}, {W}, {B}) -> {X}
  %s, %p = call @head(%h2) : ({X}) -> (tensor<{BATCH}xf32>, {X})
  return %s, %p : tensor<{BATCH}xf32>, {X}
}}
"""

out = sys.argv[1]
with open(os.path.join(out, "program.mlir"), "w") as f:
    f.write(ir)
for name, array in [("ids", ids), ("score", score), ("probs", probs)]:
    with open(os.path.join(out, name + ".pb"), "wb") as f:
        f.write(numpy_helper.from_array(array, name).SerializeToString())
