// The folders compute integers in int64, so ui64 constants at or above 2^63
// are not folded (folding them would wrap to negative values); the ops stay
// and the target evaluates them with unsigned arithmetic.
// RUN: pcc-opt %s --canonicalize --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @cast_ui64_max
// CHECK: graph.cast
func.func @cast_ui64_max() -> tensor<2xf32> {
  %a = graph.constant dense<[18446744073709551615, 1]> : tensor<2xui64>
  %0 = graph.cast %a : tensor<2xui64> to tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// CHECK-LABEL: func.func @less_ui64
// CHECK: graph.less
func.func @less_ui64() -> tensor<2xi1> {
  %b = graph.constant dense<[9223372036854775808, 1]> : tensor<2xui64>
  %c = graph.constant dense<5> : tensor<ui64>
  %0 = graph.less %b, %c : (tensor<2xui64>, tensor<ui64>) -> tensor<2xi1>
  return %0 : tensor<2xi1>
}

// -----

// Below 2^63, unsigned values fold.
// CHECK-LABEL: func.func @less_ui64_small
// CHECK-NEXT: graph.constant dense<[false, true]> : tensor<2xi1>
func.func @less_ui64_small() -> tensor<2xi1> {
  %b = graph.constant dense<[9223372036854775807, 1]> : tensor<2xui64>
  %c = graph.constant dense<5> : tensor<ui64>
  %0 = graph.less %b, %c : (tensor<2xui64>, tensor<ui64>) -> tensor<2xi1>
  return %0 : tensor<2xi1>
}
