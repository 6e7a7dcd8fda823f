// RUN: pcc-opt %s --pcc-microbatch=microbatches=3 --split-input-file -verify-diagnostics

// expected-error @+1 {{--microbatches 3 does not divide the batch (4) of input 'input_ids'}}
func.func @main(%ids: tensor<4x8xi64> {onnx.name = "input_ids"}) -> tensor<4x8xi64> {
  return %ids : tensor<4x8xi64>
}

// -----

// An op that mixes the examples of the batch cannot be split in time.
func.func @main(%x: tensor<6x8xf32> {onnx.name = "x"}) -> tensor<1x8xf32> {
  // expected-error @+1 {{microbatching: the op combines the examples of the batch, so --microbatches cannot split it}}
  %m = graph.reduce_mean %x {axes = array<i64: 0>} : (tensor<6x8xf32>) -> tensor<1x8xf32>
  return %m : tensor<1x8xf32>
}

// -----

// A constant spanning the batch whose blocks differ.
func.func @main(%x: tensor<6x2xf32> {onnx.name = "x"}) -> tensor<6x2xf32> {
  %c = graph.constant dense<[[1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [5.0, 6.0], [5.0, 6.0]]> : tensor<6x2xf32>
  // expected-error @+1 {{microbatching: operand 1 spans the batch but is not the same for every example}}
  %y = graph.add %x, %c : (tensor<6x2xf32>, tensor<6x2xf32>) -> tensor<6x2xf32>
  return %y : tensor<6x2xf32>
}
