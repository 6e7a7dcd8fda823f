// RUN: pcc-opt %s --pcc-microbatch=microbatches=2 --split-input-file | FileCheck %s

// The batch follows each op's sharding rule: reshape targets, the
// attention mask the exporter expanded to the batch (equal blocks, cut to
// the first), and a slice along the batch all become one microbatch's.

// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[IDS:.*]]: tensor<2x8xi64> {dist.batch_dim = 0 : i64, onnx.name = "input_ids"})
// CHECK-SAME: -> (tensor<2x8x40xf32> {dist.batch_dim = 0 : i64, onnx.name = "logits"}, tensor<2x8x16xf32> {dist.batch_dim = 0 : i64, onnx.name = "hidden"})
// CHECK-SAME: attributes {dist.microbatches = 2 : i64}
// CHECK: graph.gather %{{.*}}[%[[IDS]]] {{.*}} -> tensor<2x8x16xf32>
// CHECK: graph.reshape %{{.*}} : tensor<2x8x16xf32> to tensor<16x16xf32>
// CHECK: graph.constant dense<0.000000e+00> : tensor<2x1x8x8xf32>
// CHECK: graph.add {{.*}} -> tensor<2x4x8x8xf32>
// CHECK: graph.slice {{.*}}sizes = array<i64: 2, 8, 16>{{.*}} -> tensor<2x8x16xf32>
func.func @main(%ids: tensor<4x8xi64> {onnx.name = "input_ids"}) -> (tensor<4x8x40xf32> {onnx.name = "logits"}, tensor<4x8x16xf32> {onnx.name = "hidden"}) {
  %wte = graph.weight "wte" dense<0.01> : tensor<40x16xf32>
  %w = graph.weight "w" dense<0.02> : tensor<16x40xf32>
  %mask = graph.constant dense<0.0> : tensor<4x1x8x8xf32>
  %x = graph.gather %wte[%ids] {axis = 0 : i64} : (tensor<40x16xf32>, tensor<4x8xi64>) -> tensor<4x8x16xf32>
  %flat = graph.reshape %x : tensor<4x8x16xf32> to tensor<32x16xf32>
  %y = graph.matmul %flat, %w : (tensor<32x16xf32>, tensor<16x40xf32>) -> tensor<32x40xf32>
  %logits = graph.reshape %y : tensor<32x40xf32> to tensor<4x8x40xf32>
  %x4 = graph.reshape %x : tensor<4x8x16xf32> to tensor<4x8x4x4xf32>
  %xt = graph.transpose %x4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<4x8x4x4xf32>) -> tensor<4x4x8x4xf32>
  %kt = graph.transpose %x4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<4x8x4x4xf32>) -> tensor<4x4x4x8xf32>
  %s = graph.matmul %xt, %kt : (tensor<4x4x8x4xf32>, tensor<4x4x4x8xf32>) -> tensor<4x4x8x8xf32>
  %sm = graph.add %s, %mask : (tensor<4x4x8x8xf32>, tensor<4x1x8x8xf32>) -> tensor<4x4x8x8xf32>
  %h = graph.slice %x {starts = array<i64: 0, 0, 0>, sizes = array<i64: 4, 8, 16>, steps = array<i64: 1, 1, 1>} : (tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  return %logits, %h : tensor<4x8x40xf32>, tensor<4x8x16xf32>
}

// -----

// A padding mask looked up through its flattened batch (mask [B, L] as
// [B*L, 1], at indices b*L + k), as Optimum's exports of Hugging Face's
// mask functions do: the gather becomes a gather_elements along the mask's
// second dimension with the indices made relative to each example's row,
// the same for every example, so the batch splits.

// CHECK-LABEL: func.func @flat_mask
// CHECK-SAME: (%[[M:.*]]: tensor<2x3xi1> {dist.batch_dim = 0 : i64, onnx.name = "attention_mask"})
// CHECK: %[[X:.*]] = graph.reshape %[[M]] : tensor<2x3xi1> to tensor<2x3x1xi1>
// CHECK: %[[AT:.*]] = graph.constant dense<{{\[\[}}[2], [0]], {{\[\[}}2], [0]]]> : tensor<2x2x1xi64>
// CHECK: %[[P:.*]] = graph.gather_elements %[[X]][%[[AT]]] {axis = 1 : i64} : (tensor<2x3x1xi1>, tensor<2x2x1xi64>) -> tensor<2x2x1xi1>
// CHECK: graph.reshape %[[P]] : tensor<2x2x1xi1> to tensor<2x2xi1>
func.func @flat_mask(%mask: tensor<4x3xi1> {onnx.name = "attention_mask"}) -> (tensor<4x2xi1> {onnx.name = "picked"}) {
  %flat = graph.reshape %mask : tensor<4x3xi1> to tensor<12x1xi1>
  %at = graph.constant dense<[[2, 0], [5, 3], [8, 6], [11, 9]]> : tensor<4x2xi64>
  %g = graph.gather %flat[%at] {axis = 0 : i64} : (tensor<12x1xi1>, tensor<4x2xi64>) -> tensor<4x2x1xi1>
  %r = graph.reshape %g : tensor<4x2x1xi1> to tensor<4x2xi1>
  return %r : tensor<4x2xi1>
}
