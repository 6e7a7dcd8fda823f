// RUN: pcc-opt %s --pcc-attention-layout --split-input-file | FileCheck %s

// GPT-2's attention as exported: queries, keys and values [B, T, H, D]
// transposed for the op, its output transposed back. Sequence-first, no
// transposes left; the log-sum-exp stays [B, H, T].

// CHECK-LABEL: func.func @gpt2
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x4x2x8xf32>, %[[K:.*]]: tensor<1x4x2x8xf32>, %[[V:.*]]: tensor<1x4x2x8xf32>)
// CHECK-NOT:     graph.transpose
// CHECK:         %[[O:.*]], %[[LSE:.*]] = graph.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 0.353553385 : f32, sequence_first} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>)
// CHECK-NOT:     graph.transpose
// CHECK:         return %[[O]], %[[LSE]]
func.func @gpt2(%q: tensor<1x4x2x8xf32>, %k: tensor<1x4x2x8xf32>, %v: tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>) {
  %qt = graph.transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %vt = graph.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %o, %lse = graph.attention %qt, %kt, %vt {causal, scale = 0.353553385 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  %ot = graph.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x4x8xf32>) -> tensor<1x4x2x8xf32>
  return %ot, %lse : tensor<1x4x2x8xf32>, tensor<1x2x4xf32>
}

// -----

// Grouped-query attention whose queries are made in [B, H, T, D] (a
// rotary embedding's product, say): the transposes of the keys, the values
// and the output go, and the queries get one (which attention reads in
// place). Keys and values of 2 groups, queries of 4 heads.

// CHECK-LABEL: func.func @three_of_four
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x4x3x8xf32>, %[[K:.*]]: tensor<1x3x2x8xf32>, %[[V:.*]]: tensor<1x3x2x8xf32>)
// CHECK:         %[[R:.*]] = graph.mul %[[Q]], %[[Q]]
// CHECK:         %[[RT:.*]] = graph.transpose %[[R]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x3x8xf32>) -> tensor<1x3x4x8xf32>
// CHECK:         %[[O:.*]], %{{.*}} = graph.attention %[[RT]], %[[K]], %[[V]] {scale = 5.000000e-01 : f32, sequence_first} : (tensor<1x3x4x8xf32>, tensor<1x3x2x8xf32>, tensor<1x3x2x8xf32>) -> (tensor<1x3x4x8xf32>, tensor<1x4x3xf32>)
// CHECK-NOT:     graph.transpose
// CHECK:         return %[[O]]
func.func @three_of_four(%q: tensor<1x4x3x8xf32>, %k: tensor<1x3x2x8xf32>, %v: tensor<1x3x2x8xf32>) -> tensor<1x3x4x8xf32> {
  %r = graph.mul %q, %q : (tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>) -> tensor<1x4x3x8xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x8xf32>) -> tensor<1x2x3x8xf32>
  %vt = graph.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x8xf32>) -> tensor<1x2x3x8xf32>
  %o, %lse = graph.attention %r, %kt, %vt {scale = 0.5 : f32} : (tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) -> (tensor<1x4x3x8xf32>, tensor<1x4x3xf32>)
  %ot = graph.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x3x8xf32>) -> tensor<1x3x4x8xf32>
  return %ot : tensor<1x3x4x8xf32>
}

// -----

// Queries and keys rotated in [B, H, T, D], the values transposed: still
// the output's transpose goes, and the queries and keys get one each.

// CHECK-LABEL: func.func @two_of_four
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x2x3x8xf32>, %[[K:.*]]: tensor<1x2x3x8xf32>, %[[V:.*]]: tensor<1x3x2x8xf32>)
// CHECK:         %[[QT:.*]] = graph.transpose %[[Q]]
// CHECK:         %[[KT:.*]] = graph.transpose %[[K]]
// CHECK:         %[[O:.*]], %{{.*}} = graph.attention %[[QT]], %[[KT]], %[[V]] {scale = 5.000000e-01 : f32, sequence_first} :
// CHECK-NOT:     graph.transpose
// CHECK:         return %[[O]]
func.func @two_of_four(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x3x2x8xf32>) -> tensor<1x3x2x8xf32> {
  %vt = graph.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x8xf32>) -> tensor<1x2x3x8xf32>
  %o, %lse = graph.attention %q, %k, %vt {scale = 0.5 : f32} : (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) -> (tensor<1x2x3x8xf32>, tensor<1x2x3xf32>)
  %ot = graph.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x3x8xf32>) -> tensor<1x3x2x8xf32>
  return %ot : tensor<1x3x2x8xf32>
}

// -----

// Nothing but attention reads the output as [B, H, T, E] (it is
// returned): the op keeps its layout, and the operands' transposes stay
// (views of their inputs to the kernels).

// CHECK-LABEL: func.func @returned
// CHECK-COUNT-3: graph.transpose
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 5.000000e-01 : f32} :
// CHECK-NOT:     graph.transpose
func.func @returned(%q: tensor<1x3x2x8xf32>, %k: tensor<1x3x2x8xf32>, %v: tensor<1x3x2x8xf32>) -> tensor<1x2x3x8xf32> {
  %qt = graph.transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x8xf32>) -> tensor<1x2x3x8xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x8xf32>) -> tensor<1x2x3x8xf32>
  %vt = graph.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x8xf32>) -> tensor<1x2x3x8xf32>
  %o, %lse = graph.attention %qt, %kt, %vt {scale = 0.5 : f32} : (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) -> (tensor<1x2x3x8xf32>, tensor<1x2x3xf32>)
  return %o : tensor<1x2x3x8xf32>
}

// -----

// A training step's attention: attention_grad reads the output too, so
// its transpose is not the output's only reader and nothing changes.

// CHECK-LABEL: func.func @shared
// CHECK-COUNT-3: graph.transpose
// CHECK:         graph.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 5.000000e-01 : f32} :
// CHECK:         graph.transpose
// CHECK:         graph.attention_grad
func.func @shared(%q: tensor<1x3x2x8xf32>, %k: tensor<1x3x2x8xf32>, %v: tensor<1x3x2x8xf32>, %g: tensor<1x2x3x8xf32>) -> (tensor<1x3x2x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) {
  %qt = graph.transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x8xf32>) -> tensor<1x2x3x8xf32>
  %kt = graph.transpose %k {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x8xf32>) -> tensor<1x2x3x8xf32>
  %vt = graph.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x8xf32>) -> tensor<1x2x3x8xf32>
  %o, %lse = graph.attention %qt, %kt, %vt {causal, scale = 0.5 : f32} : (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) -> (tensor<1x2x3x8xf32>, tensor<1x2x3xf32>)
  %ot = graph.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x3x8xf32>) -> tensor<1x3x2x8xf32>
  %dq, %dk, %dv = graph.attention_grad %qt, %kt, %vt, %o, %lse, %g {causal, scale = 0.5 : f32} : (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3xf32>, tensor<1x2x3x8xf32>) -> (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>)
  return %ot, %dq, %dk, %dv : tensor<1x3x2x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
}
