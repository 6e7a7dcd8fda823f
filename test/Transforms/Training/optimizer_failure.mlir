// RUN: pcc-opt %s --pcc-optimizer --split-input-file -verify-diagnostics
// RUN: not pcc-opt %s --pcc-optimizer="kind=adam" --split-input-file 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not pcc-opt %s --pcc-optimizer="kind=SGD" --split-input-file 2>&1 | FileCheck %s --check-prefix=CASE

// An unknown optimizer is rejected for every function, before anything
// else; the names are case-sensitive.
// KIND-COUNT-2: error: unknown optimizer 'adam' (adamw or sgd)
// CASE:         error: unknown optimizer 'SGD' (adamw or sgd)

// No gradient results: pcc-autodiff has not run.
// expected-error @+1 {{pcc-optimizer: no gradients (run pcc-autodiff first)}}
func.func @no_gradients(%x: tensor<3xf32>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" dense<1.0> : tensor<3xf32>
  %y = graph.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Once the optimizer has run, every parameter has its update: running it
// again is refused, naming the parameter.
// expected-error @+1 {{pcc-optimizer: parameter 'w' already has an update (the optimizer ran before)}}
func.func @already_applied(%x: tensor<3xf32>, %w: tensor<3xf32> {graph.init = dense<1.0> : tensor<3xf32>, graph.state = "w"})
    -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {graph.grad = 1 : i64}, tensor<3xf32> {graph.update = 1 : i64}) {
  %y = graph.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l, %x, %w : tensor<f32>, tensor<3xf32>, tensor<3xf32>
}
