// BUG: the canonicalizer's constant uniquing (OperationFolder) merges
// graph.constant ops that have the same value and type, ignoring `name`:
// two parameters holding equal values become one, and an anonymous constant
// equal to a parameter absorbs it (the parameter loses its name, and then
// folders do fold through it). graph.constant is ConstantLike and its folder
// returns the value even when `name` is set (lib/Dialect/Graph/IR/GraphOps.cpp,
// ConstantOp::fold). `pcc compile` runs the canonicalizer, so a model with
// two LayerNorm weights initialized to ones keeps only one of them.
// RUN: pcc-opt %s --canonicalize --split-input-file | FileCheck %s

// Two parameters with equal values stay two parameters.
// CHECK-LABEL: func.func @equal_parameters
// CHECK-DAG: %[[A:.*]] = graph.weight "ln1.weight"
// CHECK-DAG: %[[B:.*]] = graph.weight "ln2.weight"
// CHECK: return %[[A]], %[[B]]
func.func @equal_parameters() -> (tensor<4xf32>, tensor<4xf32>) {
  %a = graph.weight "ln1.weight" dense<1.0> : tensor<4xf32>
  %b = graph.weight "ln2.weight" dense<1.0> : tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// An anonymous constant equal to a parameter must not replace it: the
// transpose of the parameter stays.
// CHECK-LABEL: func.func @anonymous_equal_to_parameter
// CHECK-DAG: %[[W:.*]] = graph.weight "w"
// CHECK-DAG: %[[T:.*]] = graph.transpose %[[W]]
// CHECK: graph.matmul %arg0, %[[T]]
func.func @anonymous_equal_to_parameter(%x: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>) {
  %c = graph.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %w = graph.weight "w" dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %t = graph.transpose %w {perm = array<i64: 1, 0>} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %m = graph.matmul %x, %t : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %a = graph.add %x, %c : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %m, %a : tensor<2x2xf32>, tensor<2x2xf32>
}
