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

// The sum along its axis of a scatter into zeros of one update a row (a
// cross-entropy's gradient) is its updates, where something else reads
// the scatter (which keeps its check of the indices).
// CHECK-LABEL: func.func @scattered_rows
// CHECK-SAME:      %[[U:[^:]*]]: tensor<4x1xf32>
// CHECK-NOT:     graph.reduce_sum
// CHECK:         return %{{.*}}, %[[U]]
func.func @scattered_rows(%i: tensor<4x1xi64>, %u: tensor<4x1xf32>) -> (tensor<4x16xf32>, tensor<4x1xf32>) {
  %s = graph.scatter_elements_add %u[%i] {axis = 1 : i64} : (tensor<4x1xf32>, tensor<4x1xi64>) -> tensor<4x16xf32>
  %r = graph.reduce_sum %s {axes = array<i64: 1>} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  return %s, %r : tensor<4x16xf32>, tensor<4x1xf32>
}

// Not where the sum alone reads the scatter (its check of the indices
// would go with it), nor along another axis, nor with two updates a row.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: graph.reduce_sum
func.func @kept(%i: tensor<4x1xi64>, %u: tensor<4x1xf32>,
                %j: tensor<4x2xi64>, %v: tensor<4x2xf32>) -> (tensor<4x1xf32>, tensor<1x16xf32>, tensor<4x1xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %s = graph.scatter_elements_add %u[%i] {axis = 1 : i64} : (tensor<4x1xf32>, tensor<4x1xi64>) -> tensor<4x16xf32>
  %r = graph.reduce_sum %s {axes = array<i64: 1>} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %t = graph.scatter_elements_add %u[%i] {axis = 1 : i64} : (tensor<4x1xf32>, tensor<4x1xi64>) -> tensor<4x16xf32>
  %q = graph.reduce_sum %t {axes = array<i64: 0>} : (tensor<4x16xf32>) -> tensor<1x16xf32>
  %w = graph.scatter_elements_add %v[%j] {axis = 1 : i64} : (tensor<4x2xf32>, tensor<4x2xi64>) -> tensor<4x16xf32>
  %p = graph.reduce_sum %w {axes = array<i64: 1>} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  return %r, %q, %p, %t, %w : tensor<4x1xf32>, tensor<1x16xf32>, tensor<4x1xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}
