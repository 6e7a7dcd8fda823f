#!/usr/bin/env python3
"""Writes a two-rank pipeline-parallel training step for pipeline-run.test,
and what it must compute.

usage: pipeline_program.py OUTDIR

The model: y = (tanh(x @ w0 + b) + b) @ w1, loss = mean((y - t)^2), plain
SGD (lr 0.1) on the parameters w0 and w1; b is a constant weight. Pipeline
rank 0 holds w0 and runs the first stage, rank 1 holds w1 and runs the
second; both read b. The batch of 4 rows is split into 2 microbatches: rank
0 runs both forwards (F0, F1) and sends each activation to rank 1, which
runs each microbatch's forward and backward and sends the activation's
gradient back; rank 0 then runs both backwards (B0, B1), and each rank
updates its parameter (O). Backward functions recompute their forward
through a call. The entries are written as pcc-lower-schedule writes them
(dist.rank, dist.result_index, dist.action).

Writes OUTDIR/program.mlir, the inputs OUTDIR/x.pb and OUTDIR/t.pb, the
first step's outputs OUTDIR/y.pb and OUTDIR/loss.pb and gradients
OUTDIR/w0.pb and OUTDIR/w1.pb computed with numpy, and OUTDIR/sgd.json, the
losses of three SGD steps (for check_sgd.py).
"""
import json
import os
import sys

import numpy as np
from onnx import numpy_helper

rng = np.random.default_rng(11)
BATCH, IN, HID, OUT, LR = 4, 3, 4, 2, 0.1
MB = BATCH // 2
f32 = np.float32
x = rng.standard_normal((BATCH, IN)).astype(f32)
t = rng.standard_normal((BATCH, OUT)).astype(f32)
w0 = (0.5 * rng.standard_normal((IN, HID))).astype(f32)
w1 = (0.5 * rng.standard_normal((HID, OUT))).astype(f32)
b = (0.1 * rng.standard_normal(HID)).astype(f32)


def step(w0, w1):
    """The loss, the outputs and the gradients of one step."""
    h = np.tanh(x @ w0 + b)
    a = h + b
    y = a @ w1
    d = y - t
    loss = (d * d).sum() / d.size
    dy = 2 * d / d.size
    gw1 = a.T @ dy
    gw0 = x.T @ ((dy @ w1.T) * (1 - h * h))
    return loss, y, gw0, gw1


loss, y, gw0, gw1 = step(w0, w1)
losses, p0, p1 = [], w0.astype(np.float64), w1.astype(np.float64)
for _ in range(3):
    l, _, g0, g1 = step(p0, p1)
    losses.append(float(l))
    p0, p1 = p0 - LR * g0, p1 - LR * g1


def attr(a):
    text = np.array2string(a, separator=", ", floatmode="unique",
                           threshold=1 << 20, max_line_width=1 << 20)
    return f"dense<{text}> : {ty(*a.shape)}"


def ty(*shape):
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


X, T, W0, W1, B = ty(BATCH, IN), ty(BATCH, OUT), ty(IN, HID), ty(HID, OUT), ty(HID)
XM, TM, H, Y, S = ty(MB, IN), ty(MB, OUT), ty(MB, HID), ty(MB, OUT), "tensor<f32>"


def rows(value, src, dst, start, width):
    return (f"%{value} = graph.slice %{src} {{sizes = array<i64: {MB}, {width}>, "
            f"starts = array<i64: {start}, 0>, steps = array<i64: 1, 1>}} : "
            f"({ty(BATCH, width)}) -> {dst}")


ir = f"""
dist.mesh @mesh(pp = 2)

func.func private @stage0_forward(%x: {XM}, %w0: {W0}) -> {H} {{
  %b = graph.weight "b" {attr(b)}
  %m = graph.matmul %x, %w0 : ({XM}, {W0}) -> {H}
  %p = graph.add %m, %b : ({H}, {B}) -> {H}
  %h = graph.tanh %p : {H}
  return %h : {H}
}}

func.func private @stage0_backward(%dh: {H}, %x: {XM}, %w0: {W0}) -> {W0} {{
  %h = call @stage0_forward(%x, %w0) : ({XM}, {W0}) -> {H}
  %hh = graph.mul %h, %h : ({H}, {H}) -> {H}
  %one = graph.constant dense<1.0> : {S}
  %d = graph.sub %one, %hh : ({S}, {H}) -> {H}
  %dp = graph.mul %dh, %d : ({H}, {H}) -> {H}
  %xt = graph.transpose %x {{perm = array<i64: 1, 0>}} : ({XM}) -> {ty(IN, MB)}
  %g = graph.matmul %xt, %dp : ({ty(IN, MB)}, {H}) -> {W0}
  return %g : {W0}
}}

func.func private @stage1_forward(%h: {H}, %t: {TM}, %w1: {W1}) -> ({Y}, {S}) {{
  %b = graph.weight "b" {attr(b)}
  %a = graph.add %h, %b : ({H}, {B}) -> {H}
  %y = graph.matmul %a, %w1 : ({H}, {W1}) -> {Y}
  %d = graph.sub %y, %t : ({Y}, {TM}) -> {Y}
  %sq = graph.mul %d, %d : ({Y}, {Y}) -> {Y}
  %s = graph.reduce_sum %sq {{axes = array<i64: 0, 1>, keepdims = false}} : ({Y}) -> {S}
  %k = graph.constant dense<{1 / (BATCH * OUT)}> : {S}
  %l = graph.mul %s, %k : ({S}, {S}) -> {S}
  return %y, %l : {Y}, {S}
}}

func.func private @stage1_backward(%h: {H}, %t: {TM}, %w1: {W1}) -> ({H}, {W1}) {{
  %y, %l = call @stage1_forward(%h, %t, %w1) : ({H}, {TM}, {W1}) -> ({Y}, {S})
  %b = graph.weight "b" {attr(b)}
  %a = graph.add %h, %b : ({H}, {B}) -> {H}
  %d = graph.sub %y, %t : ({Y}, {TM}) -> {Y}
  %k = graph.constant dense<{2 / (BATCH * OUT)}> : {S}
  %dy = graph.mul %d, %k : ({Y}, {S}) -> {Y}
  %at = graph.transpose %a {{perm = array<i64: 1, 0>}} : ({H}) -> {ty(HID, MB)}
  %gw = graph.matmul %at, %dy : ({ty(HID, MB)}, {Y}) -> {W1}
  %w1t = graph.transpose %w1 {{perm = array<i64: 1, 0>}} : ({W1}) -> {ty(OUT, HID)}
  %dh = graph.matmul %dy, %w1t : ({Y}, {ty(OUT, HID)}) -> {H}
  return %dh, %gw : {H}, {W1}
}}

func.func private @sgd0(%w: {W0}, %g: {W0}) -> {W0} {{
  %lr = graph.constant dense<{LR}> : {S}
  %s = graph.mul %g, %lr : ({W0}, {S}) -> {W0}
  %n = graph.sub %w, %s : ({W0}, {W0}) -> {W0}
  return %n : {W0}
}}

func.func private @sgd1(%w: {W1}, %g: {W1}) -> {W1} {{
  %lr = graph.constant dense<{LR}> : {S}
  %s = graph.mul %g, %lr : ({W1}, {S}) -> {W1}
  %n = graph.sub %w, %s : ({W1}, {W1}) -> {W1}
  return %n : {W1}
}}

func.func @main_rank0(%x: {X} {{onnx.name = "x"}}, %t: {T} {{onnx.name = "t"}},
                      %w0: {W0} {{graph.state = "w0", graph.init = {attr(w0)}}})
    -> ({W0} {{graph.grad = 2 : i64, dist.result_index = 2 : i64}},
        {W0} {{graph.update = 2 : i64, dist.result_index = 4 : i64}})
    attributes {{dist.rank = 0 : i64}} {{
  {rows("x0", "x", XM, 0, IN)}
  %h0 = call @stage0_forward(%x0, %w0) {{dist.action = "F0"}} : ({XM}, {W0}) -> {H}
  dist.send %h0 on @mesh axes ["pp"] to 1 tag 0 : {H}
  {rows("x1", "x", XM, MB, IN)}
  %h1 = call @stage0_forward(%x1, %w0) {{dist.action = "F1"}} : ({XM}, {W0}) -> {H}
  dist.send %h1 on @mesh axes ["pp"] to 1 tag 0 : {H}
  %dh0 = dist.recv on @mesh axes ["pp"] from 1 tag 1 : {H}
  %g0 = call @stage0_backward(%dh0, %x0, %w0) {{dist.action = "B0"}} : ({H}, {XM}, {W0}) -> {W0}
  %dh1 = dist.recv on @mesh axes ["pp"] from 1 tag 1 : {H}
  %g1 = call @stage0_backward(%dh1, %x1, %w0) {{dist.action = "B1"}} : ({H}, {XM}, {W0}) -> {W0}
  %g = graph.add %g0, %g1 : ({W0}, {W0}) -> {W0}
  %n = call @sgd0(%w0, %g) {{dist.action = "O"}} : ({W0}, {W0}) -> {W0}
  return %g, %n : {W0}, {W0}
}}

func.func @main_rank1(%x: {X} {{onnx.name = "x"}}, %t: {T} {{onnx.name = "t"}},
                      %w1: {W1} {{graph.state = "w1", graph.init = {attr(w1)}}})
    -> ({S} {{graph.loss, onnx.name = "loss", dist.result_index = 1 : i64}},
        {ty(BATCH, OUT)} {{onnx.name = "y", dist.result_index = 0 : i64}},
        {W1} {{graph.grad = 2 : i64, dist.result_index = 3 : i64}},
        {W1} {{graph.update = 2 : i64, dist.result_index = 5 : i64}})
    attributes {{dist.rank = 1 : i64}} {{
  %h0 = dist.recv on @mesh axes ["pp"] from 0 tag 0 : {H}
  {rows("t0", "t", TM, 0, OUT)}
  %y0, %l0 = call @stage1_forward(%h0, %t0, %w1) {{dist.action = "F0"}} : ({H}, {TM}, {W1}) -> ({Y}, {S})
  %dh0, %gw0 = call @stage1_backward(%h0, %t0, %w1) {{dist.action = "B0"}} : ({H}, {TM}, {W1}) -> ({H}, {W1})
  dist.send %dh0 on @mesh axes ["pp"] to 0 tag 1 : {H}
  %h1 = dist.recv on @mesh axes ["pp"] from 0 tag 0 : {H}
  {rows("t1", "t", TM, MB, OUT)}
  %y1, %l1 = call @stage1_forward(%h1, %t1, %w1) {{dist.action = "F1"}} : ({H}, {TM}, {W1}) -> ({Y}, {S})
  %dh1, %gw1 = call @stage1_backward(%h1, %t1, %w1) {{dist.action = "B1"}} : ({H}, {TM}, {W1}) -> ({H}, {W1})
  dist.send %dh1 on @mesh axes ["pp"] to 0 tag 1 : {H}
  %y = graph.concat %y0, %y1 {{axis = 0 : i64}} : ({Y}, {Y}) -> {ty(BATCH, OUT)}
  %l = graph.add %l0, %l1 : ({S}, {S}) -> {S}
  %gw = graph.add %gw0, %gw1 : ({W1}, {W1}) -> {W1}
  %n = call @sgd1(%w1, %gw) {{dist.action = "O"}} : ({W1}, {W1}) -> {W1}
  return %l, %y, %gw, %n : {S}, {ty(BATCH, OUT)}, {W1}, {W1}
}}
"""

out = sys.argv[1]
with open(os.path.join(out, "program.mlir"), "w") as f:
    f.write(ir)
for name, array in [("x", x), ("t", t), ("y", y), ("loss", np.array(loss, f32)),
                    ("w0", gw0), ("w1", gw1)]:
    with open(os.path.join(out, name + ".pb"), "wb") as f:
        f.write(numpy_helper.from_array(np.asarray(array, f32), name)
                .SerializeToString())
with open(os.path.join(out, "sgd.json"), "w") as f:
    json.dump({"optimizer": "sgd", "lr": LR, "losses": losses}, f)
