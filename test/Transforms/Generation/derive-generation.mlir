// RUN: pcc-opt %s --split-input-file --pcc-derive-generation="max-batch=2 max-tokens=4 kv-block=4" --verify-diagnostics | FileCheck %s

// A causal LM of one attention over a sequence of 8: the token ids look up
// an embedding, a position table (no token input: a positional operand)
// is added, and the logits come from a head over the attention's output.
// Two steps replace it: prefill of 4 tokens and decode of 2, each with the
// cache's write of the keys and values and the paged attention; the
// position table is taken at the tokens' positions and the head runs on
// the logits' rows alone.

func.func @lm(%ids: tensor<1x8xi64> {onnx.name = "input_ids"}) -> (tensor<1x8x16xf32> {onnx.name = "logits"}) {
  %emb = graph.weight "emb" dense<0.5> : tensor<16x4xf32>
  %pos = graph.weight "pos" dense<0.25> : tensor<8x4xf32>
  %wq = graph.weight "wq" dense<0.125> : tensor<4x4xf32>
  %head = graph.weight "head" dense<0.75> : tensor<4x16xf32>
  %x0 = graph.gather %emb[%ids] {axis = 0 : i64} : (tensor<16x4xf32>, tensor<1x8xi64>) -> tensor<1x8x4xf32>
  %x = graph.add %x0, %pos : (tensor<1x8x4xf32>, tensor<8x4xf32>) -> tensor<1x8x4xf32>
  %q0 = graph.matmul %x, %wq : (tensor<1x8x4xf32>, tensor<4x4xf32>) -> tensor<1x8x4xf32>
  %q = graph.reshape %q0 : tensor<1x8x4xf32> to tensor<1x1x8x4xf32>
  %kv = graph.reshape %x : tensor<1x8x4xf32> to tensor<1x1x8x4xf32>
  %o:2 = graph.attention %q, %kv, %kv {causal, scale = 0.5 : f32} : (tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) -> (tensor<1x1x8x4xf32>, tensor<1x1x8xf32>)
  %y0 = graph.reshape %o#0 : tensor<1x1x8x4xf32> to tensor<1x8x4xf32>
  %y = graph.add %y0, %x : (tensor<1x8x4xf32>, tensor<1x8x4xf32>) -> tensor<1x8x4xf32>
  %logits = graph.matmul %y, %head : (tensor<1x8x4xf32>, tensor<4x16xf32>) -> tensor<1x8x16xf32>
  return %logits : tensor<1x8x16xf32>
}

// CHECK-NOT: func.func @lm
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME: %[[IDS:[^:]*]]: tensor<1x4xi64> {onnx.name = "tokens"}
// CHECK-SAME: %[[POS:[^:]*]]: tensor<4xi64> {onnx.name = "positions"}
// CHECK-SAME: %[[SLOTS:[^:]*]]: tensor<4xi64> {onnx.name = "slots"}
// CHECK-SAME: %[[TABLE:[^:]*]]: tensor<2x2xi64> {onnx.name = "block_tables"}
// CHECK-SAME: %[[ROWS:[^:]*]]: tensor<2xi64> {onnx.name = "logit_indices"}
// CHECK-SAME: %[[KEYS:[^:]*]]: tensor<4x1x4x4xf32> {graph.cache, graph.init = dense<0.000000e+00> : tensor<4x1x4x4xf32>, graph.state = "kv_cache.0.key"}
// CHECK-SAME: %[[VALUES:[^:]*]]: tensor<4x1x4x4xf32> {graph.cache, graph.init = dense<0.000000e+00> : tensor<4x1x4x4xf32>, graph.state = "kv_cache.0.value"}
// CHECK-SAME: -> (tensor<2x16xf32> {onnx.name = "logits"}, tensor<4x1x4x4xf32> {graph.update = 5 : i64}, tensor<4x1x4x4xf32> {graph.update = 6 : i64})
// CHECK-SAME: attributes {pcc.entry = "prefill"}
// CHECK:      %[[X0:.*]] = graph.gather %{{.*}}[%[[IDS]]] {axis = 0 : i64} : (tensor<16x4xf32>, tensor<1x4xi64>) -> tensor<1x4x4xf32>
// CHECK:      %[[P:.*]] = graph.gather %{{.*}}[%[[POS]]] {axis = 0 : i64} : (tensor<8x4xf32>, tensor<4xi64>) -> tensor<4x4xf32>
// CHECK:      %[[X:.*]] = graph.add %[[X0]], %[[P]] : (tensor<1x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4xf32>
// CHECK:      %[[K:.*]] = graph.cache_write %[[KEYS]], %[[KV:.*]], %[[SLOTS]], %[[POS]], %[[TABLE]]
// CHECK:      %[[V:.*]] = graph.cache_write %[[VALUES]], %[[KV]], %[[SLOTS]], %[[POS]], %[[TABLE]]
// CHECK:      %[[O:.*]] = graph.paged_attention %{{.*}}, %[[K]], %[[V]], %[[SLOTS]], %[[POS]], %[[TABLE]] {scale = 5.000000e-01 : f32} : {{.*}} -> tensor<1x1x4x4xf32>
// The residual add and the head on the logits' rows: the attention's
// output and its input picked first.
// CHECK:      graph.gather %[[O]][%[[ROWS]]] {axis = 2 : i64} : (tensor<1x1x4x4xf32>, tensor<2xi64>) -> tensor<1x1x2x4xf32>
// CHECK:      graph.gather %[[X]][%[[ROWS]]] {axis = 1 : i64} : (tensor<1x4x4xf32>, tensor<2xi64>) -> tensor<1x2x4xf32>
// CHECK:      graph.add {{.*}} -> tensor<1x2x4xf32>
// CHECK:      graph.matmul {{.*}} -> tensor<1x2x16xf32>
// CHECK:      return %{{.*}}, %[[K]], %[[V]]
// CHECK-LABEL: func.func @decode(
// CHECK-SAME: tensor<1x2xi64> {onnx.name = "tokens"}
// CHECK-SAME: graph.state = "kv_cache.0.key"
// CHECK-SAME: attributes {pcc.entry = "decode"}
// CHECK:      graph.paged_attention {{.*}} -> tensor<1x1x2x4xf32>

// -----

// An op that reduces over the tokens (outside attention) cannot run on a
// step's tokens.
func.func @mixing(%ids: tensor<1x8xi64>) -> tensor<1x8x16xf32> {
  %emb = graph.weight "emb" dense<0.5> : tensor<16x4xf32>
  %x = graph.gather %emb[%ids] {axis = 0 : i64} : (tensor<16x4xf32>, tensor<1x8xi64>) -> tensor<1x8x4xf32>
  // expected-error @+1 {{--generate: graph.reduce_sum mixes the tokens of the sequence (attention is the only op that may)}}
  %m = graph.reduce_sum %x {axes = array<i64: 1>} : (tensor<1x8x4xf32>) -> tensor<1x1x4xf32>
  %y = graph.add %x, %m : (tensor<1x8x4xf32>, tensor<1x1x4xf32>) -> tensor<1x8x4xf32>
  %head = graph.weight "head" dense<0.75> : tensor<4x16xf32>
  %logits = graph.matmul %y, %head : (tensor<1x8x4xf32>, tensor<4x16xf32>) -> tensor<1x8x16xf32>
  return %logits : tensor<1x8x16xf32>
}

// -----

// A forward with attention that is not causal.
func.func @bidirectional(%ids: tensor<1x8xi64>) -> tensor<1x8x4xf32> {
  %emb = graph.weight "emb" dense<0.5> : tensor<16x4xf32>
  %x = graph.gather %emb[%ids] {axis = 0 : i64} : (tensor<16x4xf32>, tensor<1x8xi64>) -> tensor<1x8x4xf32>
  %q = graph.reshape %x : tensor<1x8x4xf32> to tensor<1x1x8x4xf32>
  // expected-error @+1 {{--generate: attention that is not causal cannot be served from a KV cache}}
  %o:2 = graph.attention %q, %q, %q {scale = 0.5 : f32} : (tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) -> (tensor<1x1x8x4xf32>, tensor<1x1x8xf32>)
  %y = graph.reshape %o#0 : tensor<1x1x8x4xf32> to tensor<1x8x4xf32>
  return %y : tensor<1x8x4xf32>
}

// -----

// ALiBi (BLOOM's): a constant bias of slope h times the key's position per
// head, made as [heads, 1, keys] and reshaped. The paged attention gets the
// slopes, one per head.

// CHECK-LABEL: func.func @prefill(
// CHECK:      %[[S:.*]] = graph.constant dense<[5.000000e-01, 2.500000e-01]> : tensor<2xf32>
// CHECK:      graph.paged_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[S]] {scale = 5.000000e-01 : f32} : {{.*}} -> tensor<1x2x4x2xf32>
func.func @alibi(%ids: tensor<1x8xi64> {onnx.name = "input_ids"}) -> (tensor<1x8x4xf32> {onnx.name = "logits"}) {
  %emb = graph.weight "emb" dense<0.5> : tensor<16x4xf32>
  %x = graph.gather %emb[%ids] {axis = 0 : i64} : (tensor<16x4xf32>, tensor<1x8xi64>) -> tensor<1x8x4xf32>
  %q0 = graph.reshape %x : tensor<1x8x4xf32> to tensor<1x8x2x2xf32>
  %q = graph.transpose %q0 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x2x2xf32>) -> tensor<1x2x8x2xf32>
  %b0 = graph.constant dense<[[[0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]], [[0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]]]> : tensor<2x1x8xf32>
  %b = graph.reshape %b0 : tensor<2x1x8xf32> to tensor<1x2x1x8xf32>
  %o:2 = graph.attention %q, %q, %q, %b {causal, scale = 0.5 : f32} : (tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>, tensor<1x2x1x8xf32>) -> (tensor<1x2x8x2xf32>, tensor<1x2x8xf32>)
  %t = graph.transpose %o#0 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x8x2xf32>) -> tensor<1x8x2x2xf32>
  %y = graph.reshape %t : tensor<1x8x2x2xf32> to tensor<1x8x4xf32>
  return %y : tensor<1x8x4xf32>
}

// -----

// A bias that is not linear in the key's position (here a padding mask's
// -inf) has no slopes: refused.
func.func @padding_bias(%ids: tensor<1x8xi64>) -> tensor<1x8x4xf32> {
  %emb = graph.weight "emb" dense<0.5> : tensor<16x4xf32>
  %x = graph.gather %emb[%ids] {axis = 0 : i64} : (tensor<16x4xf32>, tensor<1x8xi64>) -> tensor<1x8x4xf32>
  %q = graph.reshape %x : tensor<1x8x4xf32> to tensor<1x1x8x4xf32>
  %b = graph.constant dense<[[[[0xFF800000, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x1x8xf32>
  // expected-error @+1 {{--generate: attention that adds a mask or a bias other than ALiBi's (a constant slope per head times the key's position) cannot be served from a KV cache}}
  %o:2 = graph.attention %q, %q, %q, %b {causal, scale = 0.5 : f32} : (tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x1x8xf32>) -> (tensor<1x1x8x4xf32>, tensor<1x1x8xf32>)
  %y = graph.reshape %o#0 : tensor<1x1x8x4xf32> to tensor<1x8x4xf32>
  return %y : tensor<1x8x4xf32>
}

// -----

// A learned position table of 6 positions read at positions 0 .. 7: the
// sequence is longer than the model holds.
func.func @short_table(%ids: tensor<1x8xi64>) -> tensor<1x8x16xf32> {
  %emb = graph.weight "emb" dense<0.5> : tensor<16x4xf32>
  %table = graph.weight "pos" dense<0.25> : tensor<6x4xf32>
  %positions = graph.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
  %x0 = graph.gather %emb[%ids] {axis = 0 : i64} : (tensor<16x4xf32>, tensor<1x8xi64>) -> tensor<1x8x4xf32>
  // expected-error @+1 {{--generate at --max-seq 8: this gather reads index 6 of a dimension of 6 (the model holds fewer positions); give --max-seq 6 or less}}
  %pos = graph.gather %table[%positions] {axis = 0 : i64} : (tensor<6x4xf32>, tensor<8xi64>) -> tensor<8x4xf32>
  %x = graph.add %x0, %pos : (tensor<1x8x4xf32>, tensor<8x4xf32>) -> tensor<1x8x4xf32>
  %q = graph.reshape %x : tensor<1x8x4xf32> to tensor<1x1x8x4xf32>
  %o:2 = graph.attention %q, %q, %q {causal, scale = 0.5 : f32} : (tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) -> (tensor<1x1x8x4xf32>, tensor<1x1x8xf32>)
  %y = graph.reshape %o#0 : tensor<1x1x8x4xf32> to tensor<1x8x4xf32>
  %head = graph.weight "head" dense<0.75> : tensor<4x16xf32>
  %logits = graph.matmul %y, %head : (tensor<1x8x4xf32>, tensor<4x16xf32>) -> tensor<1x8x16xf32>
  return %logits : tensor<1x8x16xf32>
}
