// RUN: pcc-opt %s --pcc-attach-loss=pieces=3 --split-input-file | FileCheck %s
// RUN: pcc-opt %s --pcc-attach-loss="pieces=0 chunks=8" --split-input-file | FileCheck %s --check-prefix=AUTO
// RUN: pcc-opt %s --pcc-attach-loss="pieces=0 chunks=1" --split-input-file | FileCheck %s --check-prefix=WHOLE

// The loss in pieces of the sequence: the 7 predicted positions of 8 in runs
// of 3, 2 and 2 (the last position predicts nothing), each piece through its
// own copy of the ops that make the logits row by row (the LM head: an
// element-wise op, a reshape to rows, a product with weights, a reshape
// back), and the logits leave the results. The pieces start from the
// first [batch, seq, features] value of that chain; the whole-sequence head
// is gone.

// CHECK-LABEL: func.func @head(
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"})
// CHECK-SAME:      attributes {graph.loss_pieces = 3 : i64}
// CHECK:         %[[X:.*]]:4 = graph.split %arg1 {axis = 1 : i64, sizes = array<i64: 3, 2, 2, 1>} : (tensor<2x8x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<2x1x4xf32>)
// CHECK-NEXT:    %[[Y:.*]] = graph.slice %arg0 {sizes = array<i64: 2, 7>, starts = array<i64: 0, 1>
// CHECK-NEXT:    %[[IDS:.*]]:3 = graph.split %[[Y]] {axis = 1 : i64, sizes = array<i64: 3, 2, 2>} : (tensor<2x7xi64>) -> (tensor<2x3xi64>, tensor<2x2xi64>, tensor<2x2xi64>)
// CHECK-NEXT:    %[[H0:.*]] = graph.tanh %[[X]]#0 : tensor<2x3x4xf32>
// CHECK-NEXT:    %[[R0:.*]] = graph.reshape %[[H0]] : tensor<2x3x4xf32> to tensor<6x4xf32>
// CHECK-NEXT:    %[[P0:.*]] = graph.gemm %[[R0]], %[[W:.*]], %[[B:.*]] : (tensor<6x4xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<6x16xf32>
// CHECK-NEXT:    %[[Z0:.*]] = graph.reshape %[[P0]] : tensor<6x16xf32> to tensor<2x3x16xf32>
// CHECK-NEXT:    %[[I0:.*]] = graph.reshape %[[IDS]]#0 : tensor<2x3xi64> to tensor<2x3x1xi64>
// CHECK-NEXT:    %[[L0:.*]] = graph.log_softmax %[[Z0]] {axis = 2 : i64} : tensor<2x3x16xf32>
// CHECK-NEXT:    %[[G0:.*]] = graph.gather_elements %[[L0]][%[[I0]]]
// CHECK-NEXT:    %[[S0:.*]] = graph.reduce_sum %[[G0]] {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x1xf32>) -> tensor<f32>
// CHECK-NEXT:    %[[H1:.*]] = graph.tanh %[[X]]#1 : tensor<2x2x4xf32>
// CHECK-NEXT:    %[[R1:.*]] = graph.reshape %[[H1]] : tensor<2x2x4xf32> to tensor<4x4xf32>
// CHECK-NEXT:    graph.gemm %[[R1]], %[[W]], %[[B]] : (tensor<4x4xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK:         %[[S1:.*]] = graph.reduce_sum {{.*}} : (tensor<2x2x1xf32>) -> tensor<f32>
// CHECK-NEXT:    %[[A1:.*]] = graph.add %[[S0]], %[[S1]]
// CHECK:         graph.gemm {{.*}} : (tensor<4x4xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK:         %[[S2:.*]] = graph.reduce_sum
// CHECK-NEXT:    %[[A2:.*]] = graph.add %[[A1]], %[[S2]]
// CHECK-NEXT:    %[[N:.*]] = graph.constant dense<1.400000e+01> : tensor<f32>
// CHECK-NEXT:    %[[MEAN:.*]] = graph.div %[[A2]], %[[N]]
// CHECK-NEXT:    %[[LOSS:.*]] = graph.neg %[[MEAN]]
// CHECK-NEXT:    return %[[LOSS]] : tensor<f32>

// With pieces=0 the count follows the chunks: here the head is nearly the
// whole forward, so over 8 chunks every predicted position is a piece (7),
// and with no pipeline (1 chunk) the head stays whole.
// AUTO-LABEL: func.func @head(
// AUTO-SAME:      attributes {graph.loss_pieces = 7 : i64}
// WHOLE-LABEL: func.func @head(
// WHOLE-SAME:      -> (tensor<2x8x16xf32> {onnx.name = "logits"}, tensor<f32> {graph.loss, onnx.name = "loss"})
// WHOLE-NOT:     graph.split
// WHOLE:         graph.reduce_mean
func.func @head(%ids: tensor<2x8xi64> {onnx.name = "ids"}, %x: tensor<2x8x4xf32>) -> (tensor<2x8x16xf32> {onnx.name = "logits"}) {
  %w = graph.weight "w" trainable dense<0.5> : tensor<4x16xf32>
  %b = graph.weight "b" trainable dense<0.1> : tensor<16xf32>
  %h = graph.tanh %x : tensor<2x8x4xf32>
  %r = graph.reshape %h : tensor<2x8x4xf32> to tensor<16x4xf32>
  %p = graph.gemm %r, %w, %b : (tensor<16x4xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<16x16xf32>
  %z = graph.reshape %p : tensor<16x16xf32> to tensor<2x8x16xf32>
  return %z : tensor<2x8x16xf32>
}

// -----

// Logits that no chain makes row by row (here a softmax over the sequence
// mixes positions) are split themselves: the loss is still in pieces, the
// op before them whole.

// CHECK-LABEL: func.func @mixed(
// CHECK:         %[[S:.*]] = graph.softmax %arg1 {axis = 1 : i64}
// CHECK-NEXT:    graph.split %[[S]] {axis = 1 : i64, sizes = array<i64: 2, 1, 1, 1>}
// CHECK-NOT:     graph.softmax
// CHECK:         return
func.func @mixed(%ids: tensor<1x5xi64>, %x: tensor<1x5x6xf32>) -> tensor<1x5x6xf32> {
  %s = graph.softmax %x {axis = 1 : i64} : tensor<1x5x6xf32>
  return %s : tensor<1x5x6xf32>
}
