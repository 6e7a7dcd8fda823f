// RUN: pcc-opt %s --split-input-file --pcc-bound-indices -verify-diagnostics

// A position table of 4 rows read at the constant positions 0..5 (a
// sequence longer than the model allows) can never run.

func.func @positions() -> tensor<6x2xf32> {
  %table = graph.constant dense<1.0> : tensor<4x2xf32>
  %at = graph.constant dense<[0, 1, 2, 3, 4, 5]> : tensor<6xi64>
  // expected-error @+1 {{constant index 4 is out of range of the 4 positions it reads (valid: -4 to 3)}}
  %rows = graph.gather %table[%at] {axis = 0 : i64} : (tensor<4x2xf32>, tensor<6xi64>) -> tensor<6x2xf32>
  return %rows : tensor<6x2xf32>
}

// -----

// Negative positions count from the end, as ONNX's Gather has them: -4 is
// the first row, -5 is out of range.

func.func @negative() -> (tensor<2x2xf32>, tensor<1x2xf32>) {
  %table = graph.constant dense<1.0> : tensor<4x2xf32>
  %ok = graph.constant dense<[-4, -1]> : tensor<2xi64>
  %rows = graph.gather %table[%ok] {axis = 0 : i64} : (tensor<4x2xf32>, tensor<2xi64>) -> tensor<2x2xf32>
  %bad = graph.constant dense<[-5]> : tensor<1xi64>
  // expected-error @+1 {{constant index -5 is out of range of the 4 positions it reads}}
  %row = graph.gather %table[%bad] {axis = 0 : i64} : (tensor<4x2xf32>, tensor<1xi64>) -> tensor<1x2xf32>
  return %rows, %row : tensor<2x2xf32>, tensor<1x2xf32>
}
