// A frozen weight with the name of a trained parameter (hand-written IR: the
// importer rejects duplicate initializer names) is refused with a
// diagnostic naming it.
// RUN: not pcc-opt %s --pcc-optimizer 2>&1 | FileCheck %s

// CHECK: error: {{.*}}'w'
func.func @same_name_twice(%x: tensor<3xf32>, %w1: tensor<3xf32> {graph.init = dense<1.0> : tensor<3xf32>, graph.state = "w"})
    -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {graph.grad = 1 : i64}) {
  %w2 = graph.weight "w" dense<1.0> : tensor<3xf32>
  %y = graph.mul %w1, %w2 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  %g1 = graph.mul %x, %w2 {graph.backward} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %l, %g1 : tensor<f32>, tensor<3xf32>
}
