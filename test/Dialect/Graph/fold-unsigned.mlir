// XFAIL: *
// BUG: the folders read integer constants through scalarsOf()
// (lib/Dialect/Graph/IR/GraphOps.cpp), which stores unsigned values with
// getZExtValue() in an int64_t: ui64 values of 2^63 and above become
// negative. Cast of ui64 18446744073709551615 to f32 folds to -1.0, and
// 9223372036854775808 < 5 folds to true.
// Remove the XFAIL line once fixed.
// RUN: pcc-opt %s --canonicalize --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @cast_ui64_max
// CHECK-NEXT: graph.constant dense<[1.84467441E+19, 1.000000e+00]> : tensor<2xf32>
func.func @cast_ui64_max() -> tensor<2xf32> {
  %a = graph.constant dense<[18446744073709551615, 1]> : tensor<2xui64>
  %0 = graph.cast %a : tensor<2xui64> to tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// CHECK-LABEL: func.func @less_ui64
// CHECK-NEXT: graph.constant dense<[false, true]> : tensor<2xi1>
func.func @less_ui64() -> tensor<2xi1> {
  %b = graph.constant dense<[9223372036854775808, 1]> : tensor<2xui64>
  %c = graph.constant dense<5> : tensor<ui64>
  %0 = graph.less %b, %c : (tensor<2xui64>, tensor<ui64>) -> tensor<2xi1>
  return %0 : tensor<2xi1>
}
