// RUN: pcc-opt %s --split-input-file --pcc-bound-indices | FileCheck %s

// Token ids reach an embedding through a reshape and a widening cast, and a
// loss's gather of 5 positions too: the tighter bound and its node are
// kept. The float input and the ids that only a slice reads (it drops
// elements, so not every id is a position) get nothing.

// CHECK-LABEL: func.func @embedding(
// CHECK-SAME: %{{[^:]*}}: tensor<2x3xi32> {graph.index_bound = 5 : i64, graph.index_node = "head", onnx.name = "ids"}
// CHECK-SAME: %{{[^:]*}}: tensor<2x3xf32>, %{{[^:]*}}: tensor<2x3xi64>) ->
func.func @embedding(%ids: tensor<2x3xi32> {onnx.name = "ids"}, %x: tensor<2x3xf32>, %other: tensor<2x3xi64>) -> (tensor<6x4xf32>, tensor<2x3xf32>, tensor<2x2x4xf32>) {
  %table = graph.constant dense<1.0> : tensor<7x4xf32>
  %flat = graph.reshape %ids : tensor<2x3xi32> to tensor<6xi32>
  %wide = graph.cast %flat : tensor<6xi32> to tensor<6xi64>
  %rows = graph.gather %table[%wide] {axis = 0 : i64} : (tensor<7x4xf32>, tensor<6xi64>) -> tensor<6x4xf32> loc("embedding")
  %scores = graph.constant dense<0.0> : tensor<2x5xf32>
  %picked = graph.gather_elements %scores[%ids] {axis = 1 : i64} : (tensor<2x5xf32>, tensor<2x3xi32>) -> tensor<2x3xf32> loc("head")
  %some = graph.slice %other {starts = array<i64: 0, 1>, sizes = array<i64: 2, 2>, steps = array<i64: 1, 1>} : (tensor<2x3xi64>) -> tensor<2x2xi64>
  %rows2 = graph.gather %table[%some] {axis = 0 : i64} : (tensor<7x4xf32>, tensor<2x2xi64>) -> tensor<2x2x4xf32>
  return %rows, %picked, %rows2 : tensor<6x4xf32>, tensor<2x3xf32>, tensor<2x2x4xf32>
}
