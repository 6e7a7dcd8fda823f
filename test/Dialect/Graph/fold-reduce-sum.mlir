// RUN: pcc-opt %s --canonicalize | FileCheck %s

// Integer sums of constants fold (exporters compute gather indices so);
// float sums do not (the target's rounding order decides them).
// CHECK-LABEL: func.func @ints
// CHECK: %[[C:.*]] = graph.constant dense<{{\[\[}}3, 7], [11, 15]]> : tensor<2x2xi64>
// CHECK: return %[[C]]
func.func @ints() -> tensor<2x2xi64> {
  %c = graph.constant dense<[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]> : tensor<2x2x2xi64>
  %s = graph.reduce_sum %c {axes = array<i64: 2>, keepdims = false} : (tensor<2x2x2xi64>) -> tensor<2x2xi64>
  return %s : tensor<2x2xi64>
}

// CHECK-LABEL: func.func @keep
// CHECK: graph.constant dense<{{\[\[\[}}6, 8], [10, 12]]]> : tensor<1x2x2xi64>
func.func @keep() -> tensor<1x2x2xi64> {
  %c = graph.constant dense<[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]> : tensor<2x2x2xi64>
  %s = graph.reduce_sum %c {axes = array<i64: 0>, keepdims = true} : (tensor<2x2x2xi64>) -> tensor<1x2x2xi64>
  return %s : tensor<1x2x2xi64>
}

// CHECK-LABEL: func.func @floats
// CHECK: graph.reduce_sum
func.func @floats() -> tensor<2xf32> {
  %c = graph.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %s = graph.reduce_sum %c {axes = array<i64: 1>, keepdims = false} : (tensor<2x2xf32>) -> tensor<2xf32>
  return %s : tensor<2xf32>
}
