// The factor-based sharding rule of each op family (ShardingRuleOpInterface).
// RUN: pcc-opt %s --pcc-print-sharding-rules -split-input-file -verify-diagnostics

func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<2x1xf32>) -> tensor<2x3xf32> {
  // expected-remark @+1 {{sharding rule: ([i, j], [j]) -> ([i, j]) {i=2, j=3}}}
  %0 = graph.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // expected-remark @+1 {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=2, j=3}}}
  %m = graph.greater %0, %0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  // Broadcast dimensions of extent 1 get no factor.
  // expected-remark @+1 {{sharding rule: ([i, j], [j], [i, _]) -> ([i, j]) {i=2, j=3}}}
  %1 = graph.where %m, %b, %c : (tensor<2x3xi1>, tensor<3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

// The contraction dimension is a reduction factor: sharding it leaves
// partial sums. A 2-D weight does not take part in the batch factors.
func.func @matmul(%x: tensor<4x2x3xf32>, %w: tensor<3x5xf32>) -> tensor<4x2x5xf32> {
  // expected-remark @+1 {{sharding rule: ([l, j, i], [i, k]) -> ([l, j, k]) {i=3, j=2, k=5, l=4} reduction={i}}}
  %0 = graph.matmul %x, %w : (tensor<4x2x3xf32>, tensor<3x5xf32>) -> tensor<4x2x5xf32>
  return %0 : tensor<4x2x5xf32>
}

// -----

func.func @gemm(%a: tensor<3x2xf32>, %b: tensor<5x3xf32>, %c: tensor<5xf32>) -> tensor<2x5xf32> {
  // expected-remark @+1 {{sharding rule: ([k, i], [j, k], [j]) -> ([i, j]) {i=2, j=5, k=3} reduction={k}}}
  %0 = graph.gemm %a, %b, %c {transA = true, transB = true} : (tensor<3x2xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

// Normalized dimensions stay whole; reduced dimensions are reductions.
func.func @normalizations(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x1x4xf32>) {
  // expected-remark @+1 {{sharding rule: ([i, _, k]) -> ([i, _, k]) {i=2, j=3, k=4}}}
  %0 = graph.softmax %x {axis = 1 : i64} : tensor<2x3x4xf32>
  // expected-remark @+1 {{sharding rule: ([i, j, _], [_]) -> ([i, j, _], [i, j, _], [i, j, _]) {i=2, j=3, k=4}}}
  %1, %m, %r = graph.layer_norm %x, %s {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  // expected-remark @+1 {{sharding rule: ([i, j, k]) -> ([i, _, k]) {i=2, j=3, k=4} reduction={j}}}
  %2 = graph.reduce_sum %x {axes = array<i64: 1>} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  return %0, %1, %2 : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x1x4xf32>
}

// -----

func.func @transpose(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  // expected-remark @+1 {{sharding rule: ([i, j, k]) -> ([k, i, j]) {i=2, j=3, k=4}}}
  %0 = graph.transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  return %0 : tensor<4x2x3xf32>
}
