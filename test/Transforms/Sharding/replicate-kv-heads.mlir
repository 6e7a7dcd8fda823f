// RUN: pcc-opt %s --split-input-file --pcc-replicate-kv-heads="tp=4" | FileCheck %s

// Grouped-query attention of 8 query heads over 2 key/value heads at tp 4:
// each rank's 2 query heads read one key/value head, so each of the 2 is
// repeated twice (heads 0, 0, 1, 1) and the 4 split one per rank.

// CHECK-LABEL: func.func @gqa(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<1x8x5x16xf32>, %[[K:[^:]*]]: tensor<1x2x5x16xf32>, %[[V:[^:]*]]: tensor<1x2x5x8xf32>
// CHECK:      %[[IK:.*]] = graph.constant dense<[0, 0, 1, 1]> : tensor<4xi64>
// CHECK:      %[[K4:.*]] = graph.gather %[[K]][%[[IK]]] {axis = 1 : i64} : (tensor<1x2x5x16xf32>, tensor<4xi64>) -> tensor<1x4x5x16xf32>
// CHECK:      %[[IV:.*]] = graph.constant dense<[0, 0, 1, 1]> : tensor<4xi64>
// CHECK:      %[[V4:.*]] = graph.gather %[[V]][%[[IV]]] {axis = 1 : i64} : (tensor<1x2x5x8xf32>, tensor<4xi64>) -> tensor<1x4x5x8xf32>
// CHECK:      graph.attention %[[Q]], %[[K4]], %[[V4]] {causal, scale = 2.500000e-01 : f32} : (tensor<1x8x5x16xf32>, tensor<1x4x5x16xf32>, tensor<1x4x5x8xf32>) -> (tensor<1x8x5x8xf32>, tensor<1x8x5xf32>)
func.func @gqa(%q: tensor<1x8x5x16xf32>, %k: tensor<1x2x5x16xf32>, %v: tensor<1x2x5x8xf32>) -> tensor<1x8x5x8xf32> {
  %o:2 = graph.attention %q, %k, %v {causal, scale = 0.25 : f32} : (tensor<1x8x5x16xf32>, tensor<1x2x5x16xf32>, tensor<1x2x5x8xf32>) -> (tensor<1x8x5x8xf32>, tensor<1x8x5xf32>)
  return %o#0 : tensor<1x8x5x8xf32>
}

// -----

// Multi-query attention (one key/value head) at tp 4: four copies.

// CHECK-LABEL: func.func @mqa(
// CHECK:      graph.constant dense<0> : tensor<4xi64>
// CHECK:      graph.attention {{.*}} : (tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>)
func.func @mqa(%q: tensor<1x4x3x8xf32>, %k: tensor<1x1x3x8xf32>, %v: tensor<1x1x3x8xf32>) -> tensor<1x4x3x8xf32> {
  %o:2 = graph.attention %q, %k, %v {causal, scale = 0.25 : f32} : (tensor<1x4x3x8xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>) -> (tensor<1x4x3x8xf32>, tensor<1x4x3xf32>)
  return %o#0 : tensor<1x4x3x8xf32>
}

// -----

// Key/value heads that tp divides (8 of them) split as they are, and heads
// that tp cannot split at all (6 query heads at tp 4) are left for the
// sharding strategy to refuse: neither attention changes.

// CHECK-LABEL: func.func @untouched(
// CHECK-NOT:  graph.gather
// CHECK:      graph.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f32} : (tensor<1x8x3x8xf32>, tensor<1x8x3x8xf32>, tensor<1x8x3x8xf32>)
// CHECK:      graph.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f32} : (tensor<1x6x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>)
func.func @untouched(%q: tensor<1x8x3x8xf32>, %k: tensor<1x8x3x8xf32>, %q6: tensor<1x6x3x8xf32>, %k2: tensor<1x2x3x8xf32>) -> (tensor<1x8x3x8xf32>, tensor<1x6x3x8xf32>) {
  %o:2 = graph.attention %q, %k, %k {causal, scale = 0.25 : f32} : (tensor<1x8x3x8xf32>, tensor<1x8x3x8xf32>, tensor<1x8x3x8xf32>) -> (tensor<1x8x3x8xf32>, tensor<1x8x3xf32>)
  %p:2 = graph.attention %q6, %k2, %k2 {causal, scale = 0.25 : f32} : (tensor<1x6x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) -> (tensor<1x6x3x8xf32>, tensor<1x6x3xf32>)
  return %o#0, %p#0 : tensor<1x8x3x8xf32>, tensor<1x6x3x8xf32>
}

// -----

// The same, sequence-first: the heads are axis 2.

// CHECK-LABEL: func.func @gqa_sequence_first(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<1x5x8x16xf32>, %[[K:[^:]*]]: tensor<1x5x2x16xf32>, %[[V:[^:]*]]: tensor<1x5x2x8xf32>
// CHECK:      %[[K4:.*]] = graph.gather %[[K]][%{{.*}}] {axis = 2 : i64} : (tensor<1x5x2x16xf32>, tensor<4xi64>) -> tensor<1x5x4x16xf32>
// CHECK:      %[[V4:.*]] = graph.gather %[[V]][%{{.*}}] {axis = 2 : i64} : (tensor<1x5x2x8xf32>, tensor<4xi64>) -> tensor<1x5x4x8xf32>
// CHECK:      graph.attention %[[Q]], %[[K4]], %[[V4]] {causal, scale = 2.500000e-01 : f32, sequence_first} : (tensor<1x5x8x16xf32>, tensor<1x5x4x16xf32>, tensor<1x5x4x8xf32>) -> (tensor<1x5x8x8xf32>, tensor<1x8x5xf32>)
func.func @gqa_sequence_first(%q: tensor<1x5x8x16xf32>, %k: tensor<1x5x2x16xf32>, %v: tensor<1x5x2x8xf32>) -> tensor<1x5x8x8xf32> {
  %o:2 = graph.attention %q, %k, %v {causal, scale = 0.25 : f32, sequence_first} : (tensor<1x5x8x16xf32>, tensor<1x5x2x16xf32>, tensor<1x5x2x8xf32>) -> (tensor<1x5x8x8xf32>, tensor<1x8x5xf32>)
  return %o#0 : tensor<1x5x8x8xf32>
}
