// RUN: pcc-opt %s --pcc-derive-evaluation --split-input-file --verify-diagnostics | FileCheck %s

// A training step as pcc-optimizer leaves it (SGD): the loss, the
// gradient (backward ops), the update. The evaluation step is the loss's
// part alone: the forward ops, the inputs the loss reads (the labels, not
// the unused mask), and the parameter as a state argument that it only
// reads. The training step becomes entry "train", the new one "eval", and
// the step's own attributes (its microbatches) carry over.

// CHECK-LABEL: func.func @step(
// CHECK-SAME:  pcc.entry = "train"
// CHECK:       graph.reduce_sum {{.*}}graph.backward
// CHECK-LABEL: func.func @eval(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3xf32> {onnx.name = "x"},
// CHECK-SAME:      %[[P:[^:]*]]: tensor<3xf32> {graph.init = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>, graph.state = "w"})
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"})
// CHECK-SAME:      attributes {dist.microbatches = 2 : i64, pcc.entry = "eval"}
// CHECK-NEXT:    %[[Y:.*]] = graph.mul %[[X]], %[[P]]
// CHECK-NEXT:    %[[L:.*]] = graph.reduce_sum %[[Y]]
// CHECK-NEXT:    return %[[L]] : tensor<f32>
// CHECK-NEXT:  }
func.func @step(%x: tensor<2x3xf32> {onnx.name = "x"}, %mask: tensor<2x3xf32> {onnx.name = "mask"},
                %p: tensor<3xf32> {graph.init = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>, graph.state = "w"})
    -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {graph.grad = 2 : i64}, tensor<3xf32> {graph.update = 2 : i64})
    attributes {dist.microbatches = 2 : i64} {
  %y = graph.mul %x, %p : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  %xm = graph.mul %x, %mask : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %g = graph.reduce_sum %xm {axes = array<i64: 0>, graph.backward, keepdims = false} : (tensor<2x3xf32>) -> tensor<3xf32>
  %lr = graph.constant dense<0.5> : tensor<f32>
  %d = graph.mul %g, %lr : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %q = graph.sub %p, %d : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %l, %g, %q : tensor<f32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// A module without a training step has nothing to evaluate.

// expected-error @+1 {{an evaluation step is derived from a training step: no public function returns a loss}}
module {
  func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}
