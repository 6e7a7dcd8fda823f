// RUN: pcc-opt %s --pcc-delay-weights --split-input-file --verify-diagnostics

// expected-error @below {{pcc-delay-weights: no gradients (run pcc-autodiff first)}}
func.func @forward(%x: tensor<3xf32> {onnx.name = "x"}) -> tensor<3xf32> {
  return %x : tensor<3xf32>
}

// -----

// expected-error @below {{pcc-delay-weights: parameter 'w' already has an update: the weights are delayed before the optimizer runs}}
func.func @updated(%x: tensor<3xf32> {onnx.name = "x"},
                   %w: tensor<3xf32> {graph.init = dense<1.0> : tensor<3xf32>, graph.state = "w"})
    -> (tensor<3xf32> {graph.grad = 1 : i64}, tensor<3xf32> {graph.update = 1 : i64}) {
  return %x, %x : tensor<3xf32>, tensor<3xf32>
}
