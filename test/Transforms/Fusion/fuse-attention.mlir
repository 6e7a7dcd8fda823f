// RUN: pcc-opt %s --pcc-fuse-attention --split-input-file | FileCheck %s

// GPT-2 as torch's exporters write it: the keys transposed from
// [B, T, H, D], the scale a one-element initializer, a constant causal mask
// added. One graph.attention, causal, no bias; the keys' transpose becomes
// the [B, H, T, D] one.

// CHECK-LABEL: func.func @gpt2
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x2x4x8xf32>, %[[K:.*]]: tensor<1x4x2x8xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK:         %[[KT:.*]] = graph.transpose %[[K]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK:         %[[O:.*]], %[[LSE:.*]] = graph.attention %[[Q]], %[[KT]], %[[V]] {causal, scale = 0.353553385 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
// CHECK-NOT:     graph.softmax
// CHECK:         return %[[O]]
func.func @gpt2(%q: tensor<1x2x4x8xf32>, %k: tensor<1x4x2x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %scale = graph.weight "val_118" dense<0.353553385> : tensor<f32>
  %mask = graph.constant dense<[[[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x4x2x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s1 = graph.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s2 = graph.add %s1, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %s2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// PyTorch's scaled_dot_product_attention decomposed (the default export):
// the square root of the scale on the queries and on the transposed keys,
// a padding mask added (an input: it stays the bias), the NaN guard on the
// probabilities.

// CHECK-LABEL: func.func @sdpa
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x2x4x8xf32>, %[[K:.*]]: tensor<2x2x4x8xf32>, %[[V:.*]]: tensor<2x2x4x8xf32>, %[[M:.*]]: tensor<2x1x1x4xf32>)
// CHECK:         %[[O:.*]], %{{.*}} = graph.attention %[[Q]], %[[K]], %[[V]], %[[M]] {scale = 0.353553{{[0-9]*}} : f32}
// CHECK-NOT:     graph.is_nan
// CHECK:         return %[[O]]
func.func @sdpa(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>, %m: tensor<2x1x1x4xf32>) -> tensor<2x2x4x8xf32> {
  %root = graph.constant dense<0.594603539> : tensor<f32>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %qs = graph.mul %q, %root : (tensor<2x2x4x8xf32>, tensor<f32>) -> tensor<2x2x4x8xf32>
  %ks = graph.mul %kt, %root : (tensor<2x2x8x4xf32>, tensor<f32>) -> tensor<2x2x8x4xf32>
  %s = graph.matmul %qs, %ks : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %s1 = graph.add %s, %m : (tensor<2x2x4x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x2x4x4xf32>
  %p = graph.softmax %s1 {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %nan = graph.is_nan %p : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xi1>
  %g = graph.where %nan, %zero, %p : (tensor<2x2x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = graph.matmul %g, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// Grouped-query attention (4 query heads, 2 key/value heads) repeated by an
// expand between two reshapes, a boolean causal mask through where, the
// scale divided: the op reads the unrepeated keys and values.

// CHECK-LABEL: func.func @gqa
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x4x4x8xf32>, %[[K:.*]]: tensor<1x2x4x8xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK:         %[[O:.*]], %{{.*}} = graph.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 2.500000e-01 : f32} : (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
// CHECK-NOT:     graph.expand
// CHECK:         return %[[O]]
func.func @gqa(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %four = graph.constant dense<4.0> : tensor<f32>
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %tril = graph.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %k5 = graph.reshape %k : tensor<1x2x4x8xf32> to tensor<1x2x1x4x8xf32>
  %ke = graph.expand %k5 : tensor<1x2x1x4x8xf32> to tensor<1x2x2x4x8xf32>
  %kr = graph.reshape %ke : tensor<1x2x2x4x8xf32> to tensor<1x4x4x8xf32>
  %v5 = graph.reshape %v : tensor<1x2x4x8xf32> to tensor<1x2x1x4x8xf32>
  %ve = graph.expand %v5 : tensor<1x2x1x4x8xf32> to tensor<1x2x2x4x8xf32>
  %vr = graph.reshape %ve : tensor<1x2x2x4x8xf32> to tensor<1x4x4x8xf32>
  %kt = graph.transpose %kr {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x4x8xf32>) -> tensor<1x4x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x4x4x8xf32>, tensor<1x4x8x4xf32>) -> tensor<1x4x4x4xf32>
  %s1 = graph.div %s, %four : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %s2 = graph.where %tril, %s1, %ninf : (tensor<4x4xi1>, tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %p = graph.softmax %s2 {axis = 3 : i64} : tensor<1x4x4x4xf32>
  %o = graph.matmul %p, %vr : (tensor<1x4x4x4xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %o : tensor<1x4x4x8xf32>
}

// -----

// ALiBi: a per-head bias added after the scale, then the causal mask; the
// bias stays, the mask becomes the flag.

// CHECK-LABEL: func.func @alibi
// CHECK:         %[[O:.*]], %{{.*}} = graph.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 1.250000e-01 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x1x4xf32>)
func.func @alibi(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %slopes: tensor<1x2x1x4xf32>) -> tensor<1x2x4x8xf32> {
  %scale = graph.constant dense<0.125> : tensor<f32>
  %mask = graph.constant dense<[[0.0, -1.0e9, -1.0e9, -1.0e9], [0.0, 0.0, -1.0e9, -1.0e9], [0.0, 0.0, 0.0, -1.0e9], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s1 = graph.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s2 = graph.add %s1, %slopes : (tensor<1x2x4x4xf32>, tensor<1x2x1x4xf32>) -> tensor<1x2x4x4xf32>
  %s3 = graph.add %s2, %mask : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %s3 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// A model that returns its attention probabilities keeps them: nothing is
// fused.

// CHECK-LABEL: func.func @returned
// CHECK-NOT:     graph.attention
// CHECK:         graph.softmax
func.func @returned(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) {
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %s {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o, %p : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>
}

// -----

// nanoGPT: masked_fill(tril == 0, -inf) on a registered buffer, the scale
// multiplied; a folded mask of a batch without padding (all zeros) is no
// bias at all.

// CHECK-LABEL: func.func @nanogpt
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 0.353553385 : f32} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) ->
// CHECK-NOT:     graph.where
func.func @nanogpt(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %tril = graph.weight "bias" dense<[[[[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]]]]> : tensor<1x1x4x4xf32>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %scale = graph.constant dense<0.353553385> : tensor<f32>
  %nopad = graph.constant dense<0.0> : tensor<2x1x4x4xf32>
  %masked = graph.equal %tril, %zero : (tensor<1x1x4x4xf32>, tensor<f32>) -> tensor<1x1x4x4xi1>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %s1 = graph.mul %s, %scale : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %s2 = graph.where %masked, %ninf, %s1 : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %s3 = graph.add %s2, %nopad : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = graph.softmax %s3 {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// BLOOM: the scores of every batch entry and head made together
// ([B * H, Tq, Tk], baddbmm with ALiBi's [B * H, 1, Tk] slopes), reshaped
// to [B, H, Tq, Tk] before the causal mask; Falcon-style multi-query keys
// and values (one head, broadcast by the products).

// CHECK-LABEL: func.func @bloom
// CHECK:         %[[A:.*]] = graph.reshape %{{.*}} : tensor<4x1x4xf32> to tensor<2x2x1x4xf32>
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[A]] {causal, scale = 1.250000e-01 : f32} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x1x4xf32>)
func.func @bloom(%q: tensor<4x4x8xf32>, %k: tensor<4x4x8xf32>, %v: tensor<2x2x4x8xf32>, %alibi: tensor<4x1x4xf32>) -> tensor<2x2x4x8xf32> {
  %scale = graph.constant dense<0.125> : tensor<f32>
  %mask = graph.constant dense<[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 2, 1>} : (tensor<4x4x8xf32>) -> tensor<4x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<4x4x8xf32>, tensor<4x8x4xf32>) -> tensor<4x4x4xf32>
  %s1 = graph.mul %s, %scale : (tensor<4x4x4xf32>, tensor<f32>) -> tensor<4x4x4xf32>
  %s2 = graph.add %s1, %alibi : (tensor<4x4x4xf32>, tensor<4x1x4xf32>) -> tensor<4x4x4xf32>
  %s3 = graph.reshape %s2 : tensor<4x4x4xf32> to tensor<2x2x4x4xf32>
  %s4 = graph.add %s3, %mask : (tensor<2x2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = graph.softmax %s4 {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// CHECK-LABEL: func.func @falcon
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = {{.*}}} : (tensor<1x4x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>)
func.func @falcon(%q: tensor<1x4x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %root8 = graph.constant dense<2.82842708> : tensor<f32>
  %mask = graph.constant dense<[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x1x4x8xf32>) -> tensor<1x1x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x4x4x8xf32>, tensor<1x1x8x4xf32>) -> tensor<1x4x4x4xf32>
  %s1 = graph.div %s, %root8 : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %s2 = graph.add %s1, %mask : (tensor<1x4x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4x4xf32>
  %p = graph.softmax %s2 {axis = 3 : i64} : tensor<1x4x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x4x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %o : tensor<1x4x4x8xf32>
}

// -----

// HuggingFace's causal mask as torch's dynamo exporter writes it: a
// comparison of the key and query positions (constants, broadcast against
// each other), made a float bias by a `where` of two scalars. Causal, no
// bias. With `<` instead of `<=` the diagonal is masked too: not causal,
// and the mask stays the bias.

// CHECK-LABEL: func.func @hf_positions
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 1.250000e-01 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) ->
// CHECK-NOT:     graph.where
// CHECK:         return
func.func @hf_positions(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %keys = graph.weight "unsqueeze_12" dense<[[[[0, 1, 2, 3]]]]> : tensor<1x1x1x4xi64>
  %queries = graph.weight "unsqueeze_9" dense<[[[[0], [1], [2], [3]]]]> : tensor<1x1x4x1xi64>
  %zero = graph.weight "zeros" dense<0.0> : tensor<f32>
  %lowest = graph.weight "val_26" dense<-3.40282347e+38> : tensor<f32>
  %scale = graph.constant dense<0.125> : tensor<f32>
  %visible = graph.less_or_equal %keys, %queries : (tensor<1x1x1x4xi64>, tensor<1x1x4x1xi64>) -> tensor<1x1x4x4xi1>
  %mask = graph.where %visible, %zero, %lowest : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x4x4xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s1 = graph.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s2 = graph.add %s1, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %s2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// CHECK-LABEL: func.func @hf_positions_strict
// CHECK:         %[[M:.*]] = graph.where
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[M]] {scale = 1.250000e-01 : f32}
func.func @hf_positions_strict(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %keys = graph.weight "unsqueeze_12" dense<[[[[0, 1, 2, 3]]]]> : tensor<1x1x1x4xi64>
  %queries = graph.weight "unsqueeze_9" dense<[[[[0], [1], [2], [3]]]]> : tensor<1x1x4x1xi64>
  %zero = graph.weight "zeros" dense<0.0> : tensor<f32>
  %lowest = graph.weight "val_26" dense<-3.40282347e+38> : tensor<f32>
  %scale = graph.constant dense<0.125> : tensor<f32>
  %visible = graph.less %keys, %queries : (tensor<1x1x1x4xi64>, tensor<1x1x4x1xi64>) -> tensor<1x1x4x4xi1>
  %mask = graph.where %visible, %zero, %lowest : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x4x4xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s1 = graph.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s2 = graph.add %s1, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %s2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Gemma 2's soft-capped scores: scaled, divided by the cap, tanh, times
// the cap, then the causal mask. The op's scale is the product's factor
// below the cap times the cap (0.25 / 50 * 50), its softcap the factor
// above the tanh.

// CHECK-LABEL: func.func @softcap
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f32, softcap = 5.000000e+01 : f32}
// CHECK-NOT:     graph.tanh
func.func @softcap(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %scale = graph.constant dense<0.25> : tensor<f32>
  %cap = graph.constant dense<50.0> : tensor<f32>
  %mask = graph.constant dense<[[[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s1 = graph.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s2 = graph.div %s1, %cap : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s3 = graph.tanh %s2 : tensor<1x2x4x4xf32>
  %s4 = graph.mul %s3, %cap : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s5 = graph.add %s4, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %s5 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// A bias added inside the cap is not attention's: left as it is.

// CHECK-LABEL: func.func @bias_under_cap
// CHECK-NOT:     graph.attention
// CHECK:         graph.tanh
func.func @bias_under_cap(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %b: tensor<1x1x4x4xf32>) -> tensor<1x2x4x8xf32> {
  %cap = graph.constant dense<50.0> : tensor<f32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s1 = graph.add %s, %b : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %s2 = graph.div %s1, %cap : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s3 = graph.tanh %s2 : tensor<1x2x4x4xf32>
  %s4 = graph.mul %s3, %cap : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %s4 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// A sliding window (Mistral's, Gemma's): a causal mask that also hides the
// keys two or more behind each query becomes the op's `window`, and no bias;
// a boolean one (kept where true) the same.

// CHECK-LABEL: func.func @sliding_window
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f32, window = 2 : i64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) ->
func.func @sliding_window(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %scale = graph.constant dense<0.25> : tensor<f32>
  %mask = graph.constant dense<[[[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [-3.4e38, 0.0, 0.0, -3.4e38], [-3.4e38, -3.4e38, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s1 = graph.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s2 = graph.add %s1, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %s2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @sliding_window_where
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f32, window = 3 : i64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) ->
func.func @sliding_window_where(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %scale = graph.constant dense<0.25> : tensor<f32>
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %keep = graph.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [false, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s1 = graph.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s2 = graph.where %keep, %s1, %ninf : (tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %s2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// GPT-Neo's local layers: the model's own band of 3 keys (a boolean mask)
// and transformers' causal mask added too intersect to one window of 3, and
// no bias; a causal mask added to a causal one (its global layers) is the
// causal flag alone.

// CHECK-LABEL: func.func @two_causal_masks
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f32, window = 3 : i64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) ->
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) ->
func.func @two_causal_masks(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) {
  %scale = graph.constant dense<0.25> : tensor<f32>
  %min = graph.constant dense<-3.4e38> : tensor<f32>
  %band = graph.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [false, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %tril = graph.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %causal = graph.constant dense<[[[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s1 = graph.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %w = graph.where %band, %s1, %min : (tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s2 = graph.add %w, %causal : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %s2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %t = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %t1 = graph.mul %t, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %g = graph.where %tril, %t1, %min : (tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %t2 = graph.add %g, %causal : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p2 = graph.softmax %t2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o2 = graph.matmul %p2, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o, %o2 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
}

// -----

// A mask that is neither causal nor a window (a key hidden in the middle of
// a row) stays a bias.

// CHECK-LABEL: func.func @not_a_window
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {scale = 2.500000e-01 : f32} :
func.func @not_a_window(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %scale = graph.constant dense<0.25> : tensor<f32>
  %mask = graph.constant dense<[[[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [-3.4e38, 0.0, 0.0, -3.4e38], [0.0, -3.4e38, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s1 = graph.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s2 = graph.add %s1, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %s2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// BLOOM as the dynamo exporter writes it without the optimizer: scores made
// per batch entry and head together ([B * H, Tq, Tk], ALiBi's bias added),
// reshaped for the softmax, and the probabilities reshaped back for the
// product with the values [B * H, Tk, E]. One graph.attention over the
// split query, keys and values; its output reshaped to the product's.

// CHECK-LABEL: func.func @merged_probabilities
// CHECK:         %[[A:.*]], %{{.*}} = graph.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x1x4xf32>) ->
// CHECK-NEXT:    %[[R:.*]] = graph.reshape %[[A]] : tensor<1x2x4x8xf32> to tensor<2x4x8xf32>
// CHECK-NEXT:    return %[[R]]
func.func @merged_probabilities(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %scale = graph.constant dense<0.25> : tensor<f32>
  %alibi = graph.constant dense<[[[0.0, 0.5, 1.0, 1.5]], [[0.0, 0.25, 0.5, 0.75]]]> : tensor<2x1x4xf32>
  %mask = graph.constant dense<[[[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %s1 = graph.mul %s, %scale : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %s2 = graph.add %s1, %alibi : (tensor<2x4x4xf32>, tensor<2x1x4xf32>) -> tensor<2x4x4xf32>
  %s3 = graph.reshape %s2 : tensor<2x4x4xf32> to tensor<1x2x4x4xf32>
  %s4 = graph.add %s3, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %s4 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %p3 = graph.reshape %p : tensor<1x2x4x4xf32> to tensor<2x4x4xf32>
  %o = graph.matmul %p3, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// XGLM (BART's decoders): scores made per batch entry and head together,
// split to [B, H, Tq, Tk] for the causal mask, clamped from below to the
// lowest float (max(s, finfo.min): the identity where no row is masked
// whole, as under a causal mask), merged again for a softmax of rank 3,
// whose probabilities meet the values [B * H, Tk, E]. One graph.attention.

// CHECK-LABEL: func.func @clamped_merged_softmax
// CHECK:         %[[A:.*]], %{{.*}} = graph.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) ->
// CHECK-NEXT:    %[[R:.*]] = graph.reshape %[[A]] : tensor<1x2x4x8xf32> to tensor<2x4x8xf32>
// CHECK-NOT:     graph.softmax
// CHECK-NOT:     graph.max
// CHECK:         return %[[R]]
func.func @clamped_merged_softmax(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %scale = graph.constant dense<0.25> : tensor<f32>
  %lowest = graph.constant dense<-3.40282347e+38> : tensor<1x2x4x4xf32>
  %mask = graph.constant dense<[[[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %qs = graph.mul %q, %scale : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %s = graph.matmul %qs, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %s4 = graph.reshape %s : tensor<2x4x4xf32> to tensor<1x2x4x4xf32>
  %m = graph.add %s4, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c = graph.max %m, %lowest : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c3 = graph.reshape %c : tensor<1x2x4x4xf32> to tensor<2x4x4xf32>
  %p = graph.softmax %c3 {axis = 2 : i64} : tensor<2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// The same clamp under a mask that is not causal (here it masks the whole
// first row): the clamp makes that row's probabilities uniform where
// graph.attention would not, so nothing is fused.

// CHECK-LABEL: func.func @clamped_not_causal
// CHECK-NOT:     graph.attention
// CHECK:         graph.max
// CHECK:         graph.softmax
func.func @clamped_not_causal(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %lowest = graph.constant dense<-3.40282347e+38> : tensor<1x2x4x4xf32>
  %mask = graph.constant dense<[[[[-3.4e38, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %s4 = graph.reshape %s : tensor<2x4x4xf32> to tensor<1x2x4x4xf32>
  %m = graph.add %s4, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c = graph.max %m, %lowest : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c3 = graph.reshape %c : tensor<1x2x4x4xf32> to tensor<2x4x4xf32>
  %p = graph.softmax %c3 {axis = 2 : i64} : tensor<2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// GPT-OSS's attention sinks: a learned logit per head, reshaped to
// [1, H, 1, 1] and expanded to a column concatenated to the masked scores,
// the row's maximum subtracted, the softmax, the column's probability
// sliced off. The op takes the logits as its sinks ([H]); the expand, the
// concat, the maximum and the slice go.

// CHECK-LABEL: func.func @sinks
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x2x4x8xf32>, %[[K:.*]]: tensor<1x2x4x8xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK:         %[[W:.*]] = graph.weight "sinks" {{.*}} : tensor<2xf32>
// CHECK:         %[[O:.*]], %{{.*}} = graph.attention %[[Q]], %[[K]], %[[V]] sinks %[[W]] {causal, scale = 0.353553385 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<2xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
// CHECK-NOT:     graph.concat
// CHECK-NOT:     graph.reduce_max
// CHECK-NOT:     graph.slice
// CHECK:         return %[[O]]
func.func @sinks(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %scale = graph.constant dense<0.353553385> : tensor<f32>
  %mask = graph.constant dense<[[[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %w = graph.weight "sinks" dense<[0.5, -1.5]> : tensor<2xf32>
  %w4 = graph.reshape %w : tensor<2xf32> to tensor<1x2x1x1xf32>
  %col = graph.expand %w4 : tensor<1x2x1x1xf32> to tensor<1x2x4x1xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s1 = graph.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s2 = graph.add %s1, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c = graph.concat %s2, %col {axis = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x1xf32>) -> tensor<1x2x4x5xf32>
  %m = graph.reduce_max %c {axes = array<i64: 3>} : (tensor<1x2x4x5xf32>) -> tensor<1x2x4x1xf32>
  %d = graph.sub %c, %m : (tensor<1x2x4x5xf32>, tensor<1x2x4x1xf32>) -> tensor<1x2x4x5xf32>
  %p = graph.softmax %d {axis = 3 : i64} : tensor<1x2x4x5xf32>
  %p1 = graph.slice %p {sizes = array<i64: 1, 2, 4, 4>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x2x4x5xf32>) -> tensor<1x2x4x4xf32>
  %o = graph.matmul %p1, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// One sink for every head ([1, 1, 1, 1]), the column first and sliced from
// 1, no maximum subtracted: the sinks are that logit expanded to [H].

// CHECK-LABEL: func.func @sink_first
// CHECK:         %[[E:.*]] = graph.expand %{{.*}} : tensor<1xf32> to tensor<2xf32>
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}} sinks %[[E]] {causal
func.func @sink_first(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %scale = graph.constant dense<0.353553385> : tensor<f32>
  %mask = graph.constant dense<[[[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %w = graph.weight "sink" dense<0.25> : tensor<1x1x1x1xf32>
  %col = graph.expand %w : tensor<1x1x1x1xf32> to tensor<1x2x4x1xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s1 = graph.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s2 = graph.add %s1, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c = graph.concat %col, %s2 {axis = 3 : i64} : (tensor<1x2x4x1xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x5xf32>
  %p = graph.softmax %c {axis = 3 : i64} : tensor<1x2x4x5xf32>
  %p1 = graph.slice %p {sizes = array<i64: 1, 2, 4, 4>, starts = array<i64: 0, 0, 0, 1>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x2x4x5xf32>) -> tensor<1x2x4x4xf32>
  %o = graph.matmul %p1, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// The sink's column sliced off the wrong end (the probabilities of the
// sink and three keys): not attention with sinks; nothing is fused.

// CHECK-LABEL: func.func @sink_kept
// CHECK-NOT:     graph.attention
// CHECK:         graph.softmax
func.func @sink_kept(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %scale = graph.constant dense<0.353553385> : tensor<f32>
  %w = graph.weight "sinks" dense<[0.5, -1.5]> : tensor<2xf32>
  %w4 = graph.reshape %w : tensor<2xf32> to tensor<1x2x1x1xf32>
  %col = graph.expand %w4 : tensor<1x2x1x1xf32> to tensor<1x2x4x1xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s1 = graph.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %c = graph.concat %s1, %col {axis = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x1xf32>) -> tensor<1x2x4x5xf32>
  %p = graph.softmax %c {axis = 3 : i64} : tensor<1x2x4x5xf32>
  %p1 = graph.slice %p {sizes = array<i64: 1, 2, 4, 4>, starts = array<i64: 0, 0, 0, 1>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x2x4x5xf32>) -> tensor<1x2x4x4xf32>
  %o = graph.matmul %p1, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// The row's maximum subtracted before the softmax, with no sinks: read
// through (the softmax subtracts it again).

// CHECK-LABEL: func.func @max_subtracted
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 0.353553385 : f32}
// CHECK-NOT:     graph.reduce_max
func.func @max_subtracted(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %scale = graph.constant dense<0.353553385> : tensor<f32>
  %mask = graph.constant dense<[[[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s1 = graph.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s2 = graph.add %s1, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %m = graph.reduce_max %s2 {axes = array<i64: 3>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x1xf32>
  %d = graph.sub %s2, %m : (tensor<1x2x4x4xf32>, tensor<1x2x4x1xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %d {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// A static-shape export with its optimizer folds the sinks' expand into a
// constant column [B, H, Tq, 1]: one value per head throughout, which
// become the op's sinks as a constant [H].

// CHECK-LABEL: func.func @sinks_folded
// CHECK:         %[[S:.*]] = graph.constant dense<[5.000000e-01, -1.500000e+00]> : tensor<2xf32>
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}} sinks %[[S]] {causal
func.func @sinks_folded(%q: tensor<2x2x2x8xf32>, %k: tensor<2x2x2x8xf32>, %v: tensor<2x2x2x8xf32>) -> tensor<2x2x2x8xf32> {
  %scale = graph.constant dense<0.353553385> : tensor<f32>
  %mask = graph.constant dense<[[[[0.0, -3.4e38], [0.0, 0.0]]]]> : tensor<1x1x2x2xf32>
  %col = graph.weight "expand_4" dense<[[[[0.5], [0.5]], [[-1.5], [-1.5]]], [[[0.5], [0.5]], [[-1.5], [-1.5]]]]> : tensor<2x2x2x1xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x2x8xf32>) -> tensor<2x2x8x2xf32>
  %s = graph.matmul %q, %kt : (tensor<2x2x2x8xf32>, tensor<2x2x8x2xf32>) -> tensor<2x2x2x2xf32>
  %s1 = graph.mul %s, %scale : (tensor<2x2x2x2xf32>, tensor<f32>) -> tensor<2x2x2x2xf32>
  %s2 = graph.add %s1, %mask : (tensor<2x2x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<2x2x2x2xf32>
  %c = graph.concat %s2, %col {axis = 3 : i64} : (tensor<2x2x2x2xf32>, tensor<2x2x2x1xf32>) -> tensor<2x2x2x3xf32>
  %p = graph.softmax %c {axis = 3 : i64} : tensor<2x2x2x3xf32>
  %p1 = graph.slice %p {sizes = array<i64: 2, 2, 2, 2>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x2x2x3xf32>) -> tensor<2x2x2x2xf32>
  %o = graph.matmul %p1, %v : (tensor<2x2x2x2xf32>, tensor<2x2x2x8xf32>) -> tensor<2x2x2x8xf32>
  return %o : tensor<2x2x2x8xf32>
}

// -----

// A constant column that differs along the queries is not sinks: nothing
// is fused.

// CHECK-LABEL: func.func @column_varies
// CHECK-NOT:     graph.attention
func.func @column_varies(%q: tensor<1x2x2x8xf32>, %k: tensor<1x2x2x8xf32>, %v: tensor<1x2x2x8xf32>) -> tensor<1x2x2x8xf32> {
  %scale = graph.constant dense<0.353553385> : tensor<f32>
  %col = graph.constant dense<[[[[0.5], [0.25]], [[-1.5], [-1.5]]]]> : tensor<1x2x2x1xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x2x8xf32>) -> tensor<1x2x8x2xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x2x8xf32>, tensor<1x2x8x2xf32>) -> tensor<1x2x2x2xf32>
  %s1 = graph.mul %s, %scale : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %c = graph.concat %s1, %col {axis = 3 : i64} : (tensor<1x2x2x2xf32>, tensor<1x2x2x1xf32>) -> tensor<1x2x2x3xf32>
  %p = graph.softmax %c {axis = 3 : i64} : tensor<1x2x2x3xf32>
  %p1 = graph.slice %p {sizes = array<i64: 1, 2, 2, 2>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x2x2x3xf32>) -> tensor<1x2x2x2xf32>
  %o = graph.matmul %p1, %v : (tensor<1x2x2x2xf32>, tensor<1x2x2x8xf32>) -> tensor<1x2x2x8xf32>
  return %o : tensor<1x2x2x8xf32>
}

// -----

// The same column annotated as a parameter: its gradient would be lost as a
// constant, so nothing is fused (the ops train it).

// CHECK-LABEL: func.func @column_parameter
// CHECK-NOT:     graph.attention
func.func @column_parameter(%q: tensor<1x2x2x8xf32>, %k: tensor<1x2x2x8xf32>, %v: tensor<1x2x2x8xf32>) -> tensor<1x2x2x8xf32> {
  %scale = graph.constant dense<0.353553385> : tensor<f32>
  %col = graph.weight "sinks_column" {exported_as = "parameter"} dense<[[[[0.5], [0.5]], [[-1.5], [-1.5]]]]> : tensor<1x2x2x1xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x2x8xf32>) -> tensor<1x2x8x2xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x2x8xf32>, tensor<1x2x8x2xf32>) -> tensor<1x2x2x2xf32>
  %s1 = graph.mul %s, %scale : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %c = graph.concat %s1, %col {axis = 3 : i64} : (tensor<1x2x2x2xf32>, tensor<1x2x2x1xf32>) -> tensor<1x2x2x3xf32>
  %p = graph.softmax %c {axis = 3 : i64} : tensor<1x2x2x3xf32>
  %p1 = graph.slice %p {sizes = array<i64: 1, 2, 2, 2>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x2x2x3xf32>) -> tensor<1x2x2x2xf32>
  %o = graph.matmul %p1, %v : (tensor<1x2x2x2xf32>, tensor<1x2x2x8xf32>) -> tensor<1x2x2x8xf32>
  return %o : tensor<1x2x2x8xf32>
}

// -----

// GPT-1 as the dynamo exporter writes it without its optimizer: the scores
// times b plus -1e4 * (1 - b), b sliced from the layer's triangle buffer
// (a [1, 1, 8, 8] buffer, the first 4 x 4). The product zeros only scores
// that the added term masks: one causal graph.attention, no bias.

// CHECK-LABEL: func.func @gpt1_buffer
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f32}
// CHECK-NOT:     graph.softmax
func.func @gpt1_buffer(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %buffer = graph.weight "h.0.attn.bias" {exported_as = "buffer"} dense<[[[[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]]]]> : tensor<1x1x8x8xf32>
  %four = graph.constant dense<4.0> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %low = graph.constant dense<-1.0e+04> : tensor<f32>
  %rows = graph.slice %buffer {sizes = array<i64: 1, 1, 4, 8>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x4x8xf32>
  %b = graph.slice %rows {sizes = array<i64: 1, 1, 4, 4>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x1x4x8xf32>) -> tensor<1x1x4x4xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s1 = graph.div %s, %four : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %kept = graph.mul %s1, %b : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %hidden = graph.sub %one, %b : (tensor<f32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %masked = graph.mul %hidden, %low : (tensor<1x1x4x4xf32>, tensor<f32>) -> tensor<1x1x4x4xf32>
  %s2 = graph.add %kept, %masked : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %s2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// A product with a triangle alone zeros the scores above the diagonal,
// which still weigh exp(0) in the softmax: not a causal mask, not fused.

// CHECK-LABEL: func.func @product_mask_alone
// CHECK-NOT:     graph.attention
func.func @product_mask_alone(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %b = graph.constant dense<[[[[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]]]]> : tensor<1x1x4x4xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %kept = graph.mul %s, %b : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %kept {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// The product's mask zeros a score on the diagonal that the added causal
// mask keeps (it would weigh exp(0), not exp(s)): not fused.

// CHECK-LABEL: func.func @product_mask_wider
// CHECK-NOT:     graph.attention
func.func @product_mask_wider(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %b = graph.constant dense<[[[[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]]]]> : tensor<1x1x4x4xf32>
  %mask = graph.constant dense<[[[[0.0, -1.0e+04, -1.0e+04, -1.0e+04], [0.0, 0.0, -1.0e+04, -1.0e+04], [0.0, 0.0, 0.0, -1.0e+04], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %kept = graph.mul %s, %b : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %s2 = graph.add %kept, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %s2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Falcon-RW's export: ALiBi (a slope per head times the key's position)
// and the causal mask folded into one constant, added to the scores before
// they are scaled. It is both: the causal flag, and the bias with zeros
// where it masked, scaled as the scores are.

// CHECK-LABEL: func.func @alibi_and_mask_folded
// CHECK:         %[[B:.*]] = graph.constant dense<{{\[\[\[\[}}0.000000e+00, 0.000000e+00, 0.000000e+00], [0.000000e+00, 5.000000e-01, 0.000000e+00], [0.000000e+00, 5.000000e-01, 1.000000e+00]], {{\[\[}}0.000000e+00, 0.000000e+00, 0.000000e+00], [0.000000e+00, 2.500000e-01, 0.000000e+00], [0.000000e+00, 2.500000e-01, 5.000000e-01]]]]> : tensor<1x2x3x3xf32>
// CHECK:         %[[SCALED:.*]] = graph.mul %[[B]], %{{.*}}
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[SCALED]] {causal, scale = 2.500000e-01 : f32}
// CHECK-NOT:     graph.softmax
func.func @alibi_and_mask_folded(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32> {
  %bias = graph.constant dense<[[[[0.0, -3.4e38, -3.4e38], [0.0, 0.5, -3.4e38], [0.0, 0.5, 1.0]], [[0.0, -3.4e38, -3.4e38], [0.0, 0.25, -3.4e38], [0.0, 0.25, 0.5]]]]> : tensor<1x2x3x3xf32>
  %c = graph.constant dense<0.25> : tensor<f32>
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x3x8xf32>) -> tensor<1x2x8x3xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x3x8xf32>, tensor<1x2x8x3xf32>) -> tensor<1x2x3x3xf32>
  %s1 = graph.add %s, %bias : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %s2 = graph.mul %s1, %c : (tensor<1x2x3x3xf32>, tensor<f32>) -> tensor<1x2x3x3xf32>
  %p = graph.softmax %s2 {axis = 3 : i64} : tensor<1x2x3x3xf32>
  %o = graph.matmul %p, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32>
  return %o : tensor<1x2x3x8xf32>
}
