// RUN: pcc-opt %s --pcc-autodiff --split-input-file -verify-diagnostics

// No result is marked graph.loss.
// expected-error @+1 {{pcc-autodiff: no result marked graph.loss (run pcc-attach-loss first)}}
func.func @no_loss() -> (tensor<f32> {onnx.name = "logits"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<3xf32>
  %l = graph.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The loss depends on no parameter.
// expected-error @+1 {{nothing to train: no trainable parameter reaches the loss}}
func.func @loss_of_inputs(%x: tensor<3xf32>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {onnx.name = "y"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<3xf32>
  %y = graph.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l, %y : tensor<f32>, tensor<3xf32>
}

// -----

// The parameter reaches the loss only through an integer value.
// expected-error @+1 {{nothing to train: no trainable parameter reaches the loss}}
func.func @only_integer_path(%x: tensor<3xf32>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<3xf32>
  %i = graph.cast %w : tensor<3xf32> to tensor<3xi64>
  %f = graph.cast %i : tensor<3xi64> to tensor<3xf32>
  %y = graph.mul %x, %f : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The parameter reaches the loss only through ops of zero derivative.
// expected-error @+1 {{nothing to train: no trainable parameter reaches the loss}}
func.func @only_zero_derivative() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<3xf32>
  %f = graph.floor %w : tensor<3xf32>
  %l = graph.reduce_sum %f {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A rank-1 matmul operand (a vector-matrix product) has no VJP.
func.func @matmul_rank1(%x: tensor<3xf32>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<3x2xf32>
  // expected-error @+1 {{'graph.matmul' op reverse mode needs operands of rank >= 2}}
  %y = graph.matmul %x, %w : (tensor<3xf32>, tensor<3x2xf32>) -> tensor<2xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// layer_norm's mean and inverse standard deviation results are not
// differentiated.
func.func @layer_norm_mean(%x: tensor<2x4xf32>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %s = graph.weight "s" trainable dense<1.0> : tensor<4xf32>
  %w = graph.weight "w" trainable dense<1.0> : tensor<2x4xf32>
  %a = graph.add %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  // expected-error @+1 {{'graph.layer_norm' op reverse mode through the mean and inverse standard deviation results is not supported}}
  %y, %m, %i = graph.layer_norm %a, %s {axis = 1 : i64} : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %l = graph.reduce_sum %m {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x1xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The ops that reverse mode introduces have no derivative themselves.
func.func @no_derivative() -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %w = graph.weight "w" trainable dense<1.0> : tensor<2xf32>
  // expected-error @+1 {{reverse mode: 'graph.insert_slice' has no derivative}}
  %p = graph.insert_slice %w {starts = array<i64: 1>, steps = array<i64: 1>} : tensor<2xf32> to tensor<4xf32>
  %l = graph.reduce_sum %p {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Integer weights are not parameters: with no float one, there is nothing
// to train.
// expected-error @+1 {{nothing to train: no trainable parameter reaches the loss}}
func.func @all_integer_weights(%x: tensor<3xf32>) -> (tensor<f32> {graph.loss, onnx.name = "loss"}) {
  %idx = graph.weight "idx" dense<[0, 1, 2]> : tensor<3xi64>
  %g = graph.gather %x[%idx] {axis = 0 : i64} : (tensor<3xf32>, tensor<3xi64>) -> tensor<3xf32>
  %l = graph.reduce_sum %g {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
