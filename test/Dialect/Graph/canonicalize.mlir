// RUN: pcc-opt %s --canonicalize --split-input-file | FileCheck %s

// Shape arithmetic on anonymous constants folds away.
// CHECK-LABEL: func.func @fold_shape_arith
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<[2, 4, 6]> : tensor<3xi64>
// CHECK-NEXT: return %[[C]]
func.func @fold_shape_arith() -> tensor<3xi64> {
  %a = graph.constant dense<[1, 2, 3]> : tensor<3xi64>
  %b = graph.add %a, %a : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %b : tensor<3xi64>
}

// -----

// Named constants are parameters: never folded through.
// CHECK-LABEL: func.func @keep_parameters
// CHECK: graph.weight "w"
// CHECK: graph.transpose
func.func @keep_parameters() -> tensor<3x2xf32> {
  %w = graph.weight "w" dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %t = graph.transpose %w {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %t : tensor<3x2xf32>
}

// -----

// CHECK-LABEL: func.func @identity_movement
// CHECK-NEXT: return %arg0
func.func @identity_movement(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = graph.transpose %x {perm = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = graph.reshape %0 : tensor<2x3xf32> to tensor<2x3xf32>
  %2 = graph.expand %1 : tensor<2x3xf32> to tensor<2x3xf32>
  return %2 : tensor<2x3xf32>
}

// -----

// A transpose of a transpose composes into one, or into none when the two
// undo each other (the backward of a product with a transposed weight).
// CHECK-LABEL: func.func @transpose_of_transpose
// CHECK-NEXT: %[[T:.*]] = graph.transpose %arg0 {perm = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
// CHECK-NEXT: return %arg0, %[[T]]
func.func @transpose_of_transpose(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<3x4x2xf32>) {
  %0 = graph.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  %1 = graph.transpose %0 {perm = array<i64: 0, 2, 1>} : (tensor<2x4x3xf32>) -> tensor<2x3x4xf32>
  %2 = graph.transpose %0 {perm = array<i64: 2, 1, 0>} : (tensor<2x4x3xf32>) -> tensor<3x4x2xf32>
  return %1, %2 : tensor<2x3x4xf32>, tensor<3x4x2xf32>
}

// -----

// (A B)^T becomes B^T A^T, whose transposes a GEMM reads in place; a
// transposed operand's transposes cancel. Not where the product has other
// readers, nor for a transpose that moves batch dimensions, nor for a
// vector operand.
// CHECK-LABEL: func.func @transpose_of_matmul
// CHECK-NEXT: %[[BT:.*]] = graph.transpose %arg1 {graph.backward, perm = array<i64: 1, 0>} : (tensor<4x5xf32>) -> tensor<5x4xf32>
// CHECK-NEXT: %[[P:.*]] = graph.matmul %[[BT]], %arg0 {graph.backward} : (tensor<5x4xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
// CHECK-NEXT: %[[Q:.*]] = graph.matmul %arg2, %arg1 : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
// CHECK-NEXT: %[[QT:.*]] = graph.transpose %[[Q]]
// CHECK-NEXT: %[[B:.*]] = graph.matmul %arg2, %arg1
// CHECK-NEXT: %[[BT2:.*]] = graph.transpose %[[B]] {perm = array<i64: 2, 1, 0>}
// CHECK-NEXT: %[[V:.*]] = graph.matmul %arg3, %arg4
// CHECK-NEXT: %[[VT:.*]] = graph.transpose %[[V]]
// CHECK-NEXT: return %[[P]], %[[QT]], %[[Q]], %[[BT2]], %[[VT]]
func.func @transpose_of_matmul(%a: tensor<4x3xf32>, %b: tensor<4x5xf32>, %c: tensor<2x3x4xf32>, %u: tensor<4xf32>, %w: tensor<2x4x5xf32>) -> (tensor<5x3xf32>, tensor<2x5x3xf32>, tensor<2x3x5xf32>, tensor<5x3x2xf32>, tensor<5x2xf32>) {
  %at = graph.transpose %a {graph.backward, perm = array<i64: 1, 0>} : (tensor<4x3xf32>) -> tensor<3x4xf32>
  %0 = graph.matmul %at, %b {graph.backward} : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  %1 = graph.transpose %0 {perm = array<i64: 1, 0>} : (tensor<3x5xf32>) -> tensor<5x3xf32>
  %2 = graph.matmul %c, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %3 = graph.transpose %2 {perm = array<i64: 0, 2, 1>} : (tensor<2x3x5xf32>) -> tensor<2x5x3xf32>
  %4 = graph.matmul %c, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %5 = graph.transpose %4 {perm = array<i64: 2, 1, 0>} : (tensor<2x3x5xf32>) -> tensor<5x3x2xf32>
  %6 = graph.matmul %u, %w : (tensor<4xf32>, tensor<2x4x5xf32>) -> tensor<2x5xf32>
  %7 = graph.transpose %6 {perm = array<i64: 1, 0>} : (tensor<2x5xf32>) -> tensor<5x2xf32>
  return %1, %3, %2, %5, %7 : tensor<5x3xf32>, tensor<2x5x3xf32>, tensor<2x3x5xf32>, tensor<5x3x2xf32>, tensor<5x2xf32>
}

// -----

// (A B + C D)^T becomes B^T A^T + D^T C^T where every term is a product
// only the sum reads (a tied LM head's weight gradient summed over the
// pieces of a pipeline's head): no copy of the transposed sum. Not where a
// term is not a product (its transpose would be a copy), nor where the sum
// has other readers.
// CHECK-LABEL: func.func @transpose_of_sum
// CHECK-NEXT: %[[P0:.*]] = graph.matmul %arg2, %arg0 : (tensor<5x4xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
// CHECK-NEXT: %[[P1:.*]] = graph.matmul %arg3, %arg1 : (tensor<5x2xf32>, tensor<2x3xf32>) -> tensor<5x3xf32>
// CHECK-NEXT: %[[S:.*]] = graph.add %[[P0]], %[[P1]] {graph.backward}
// CHECK-NEXT: %[[Q:.*]] = graph.matmul %arg0, %arg4
// CHECK-NEXT: %[[R:.*]] = graph.add %[[Q]], %arg5
// CHECK-NEXT: %[[RT:.*]] = graph.transpose %[[R]]
// CHECK-NEXT: return %[[S]], %[[RT]]
func.func @transpose_of_sum(%a: tensor<4x3xf32>, %c: tensor<2x3xf32>, %bt: tensor<5x4xf32>, %dt: tensor<5x2xf32>, %b: tensor<3x5xf32>, %e: tensor<4x5xf32>) -> (tensor<5x3xf32>, tensor<5x4xf32>) {
  %b0 = graph.transpose %bt {perm = array<i64: 1, 0>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
  %at = graph.transpose %a {perm = array<i64: 1, 0>} : (tensor<4x3xf32>) -> tensor<3x4xf32>
  %0 = graph.matmul %at, %b0 : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  %d0 = graph.transpose %dt {perm = array<i64: 1, 0>} : (tensor<5x2xf32>) -> tensor<2x5xf32>
  %ct = graph.transpose %c {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = graph.matmul %ct, %d0 : (tensor<3x2xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
  %2 = graph.add %0, %1 {graph.backward} : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %3 = graph.transpose %2 {perm = array<i64: 1, 0>} : (tensor<3x5xf32>) -> tensor<5x3xf32>
  %4 = graph.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %5 = graph.add %4, %e : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %6 = graph.transpose %5 {perm = array<i64: 1, 0>} : (tensor<4x5xf32>) -> tensor<5x4xf32>
  return %3, %6 : tensor<5x3xf32>, tensor<5x4xf32>
}

// -----

// The backward of a tied LM head over a batch of one: the sum over the
// batch adds nothing, the transpose moves above the reshape that drops the
// batch, and the product computes the transposed gradient directly.
// CHECK-LABEL: func.func @transpose_of_batch_gradient
// CHECK-NEXT: %[[DT:.*]] = graph.transpose %arg1 {perm = array<i64: 0, 2, 1>} : (tensor<1x4x6xf32>) -> tensor<1x6x4xf32>
// CHECK-NEXT: %[[P:.*]] = graph.matmul %[[DT]], %arg0 : (tensor<1x6x4xf32>, tensor<1x4x3xf32>) -> tensor<1x6x3xf32>
// CHECK-NEXT: %[[R:.*]] = graph.reshape %[[P]] : tensor<1x6x3xf32> to tensor<6x3xf32>
// CHECK-NEXT: return %[[R]]
func.func @transpose_of_batch_gradient(%h: tensor<1x4x3xf32>, %d: tensor<1x4x6xf32>) -> tensor<6x3xf32> {
  %ht = graph.transpose %h {perm = array<i64: 0, 2, 1>} : (tensor<1x4x3xf32>) -> tensor<1x3x4xf32>
  %0 = graph.matmul %ht, %d : (tensor<1x3x4xf32>, tensor<1x4x6xf32>) -> tensor<1x3x6xf32>
  %1 = graph.reduce_sum %0 {axes = array<i64: 0>} : (tensor<1x3x6xf32>) -> tensor<1x3x6xf32>
  %2 = graph.reshape %1 : tensor<1x3x6xf32> to tensor<3x6xf32>
  %3 = graph.transpose %2 {perm = array<i64: 1, 0>} : (tensor<3x6xf32>) -> tensor<6x3xf32>
  return %3 : tensor<6x3xf32>
}

// -----

// A reshape that changes the last two dimensions keeps the transpose after
// it.
// CHECK-LABEL: func.func @transpose_after_reshape
// CHECK-NEXT: graph.reshape
// CHECK-NEXT: graph.transpose
func.func @transpose_after_reshape(%x: tensor<2x6xf32>) -> tensor<4x3xf32> {
  %0 = graph.reshape %x : tensor<2x6xf32> to tensor<3x4xf32>
  %1 = graph.transpose %0 {perm = array<i64: 1, 0>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  return %1 : tensor<4x3xf32>
}

// -----

// CHECK-LABEL: func.func @fold_gather_concat
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<[32, 2, 7]> : tensor<3xi64>
// CHECK-NEXT: return %[[C]]
func.func @fold_gather_concat() -> tensor<3xi64> {
  %shape = graph.constant dense<[2, 32]> : tensor<2xi64>
  %i = graph.constant dense<[1, 0]> : tensor<2xi64>
  %g = graph.gather %shape[%i] {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %seven = graph.constant dense<7> : tensor<1xi64>
  %c = graph.concat %g, %seven {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  return %c : tensor<3xi64>
}

// -----

// An empty past's keys before the new ones (a with-past export given no
// past) add nothing: the concatenation is the new keys.
// CHECK-LABEL: func.func @fold_concat_empty
// CHECK-SAME: (%[[K:.*]]: tensor<1x2x5x4xf32>)
// CHECK-NEXT: return %[[K]]
func.func @fold_concat_empty(%k: tensor<1x2x5x4xf32>) -> tensor<1x2x5x4xf32> {
  %past = graph.constant dense<> : tensor<1x2x0x4xf32>
  %c = graph.concat %past, %k {axis = 2 : i64} : (tensor<1x2x0x4xf32>, tensor<1x2x5x4xf32>) -> tensor<1x2x5x4xf32>
  return %c : tensor<1x2x5x4xf32>
}

// -----

// CHECK-LABEL: func.func @fold_where_equal_cast
// CHECK-NEXT: graph.constant dense<[1.000000e+00, 0xFF800000]> : tensor<2xf32>
func.func @fold_where_equal_cast() -> tensor<2xf32> {
  %m = graph.constant dense<[1, 0]> : tensor<2xi64>
  %z = graph.constant dense<0> : tensor<i64>
  %eq = graph.equal %m, %z : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
  %one = graph.constant dense<1.0> : tensor<f32>
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %w = graph.where %eq, %ninf, %one : (tensor<2xi1>, tensor<f32>, tensor<f32>) -> tensor<2xf32>
  return %w : tensor<2xf32>
}
