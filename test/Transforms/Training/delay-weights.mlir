// RUN: pcc-opt %s --pcc-delay-weights --split-input-file | FileCheck %s
// RUN: pcc-opt %s --pcc-delay-weights --pcc-optimizer="kind=sgd lr=0.1" --split-input-file | FileCheck %s --check-prefix=SGD

// PipeDream-2BW's weights: the forward and the backward read the parameter's
// previous version, a new state argument "w.2bw.previous" that starts at the
// parameter's initial value (W(-1) = W(0)) and is marked `graph.state_of`
// it; the step returns the parameter, as it was before this step's update,
// as that version's next value.

// CHECK-LABEL: func.func @one_param(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3xf32> {onnx.name = "x"},
// CHECK-SAME:      %[[P:[^:]*]]: tensor<3xf32> {graph.init = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>, graph.state = "w"},
// CHECK-SAME:      %[[Q:[^:]*]]: tensor<3xf32> {graph.init = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>, graph.previous_version, graph.state = "w.2bw.previous", graph.state_of = 1 : i64})
// CHECK-SAME:      -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {graph.grad = 1 : i64}, tensor<3xf32> {graph.update = 2 : i64})
// CHECK:         %[[Y:.*]] = graph.mul %[[X]], %[[Q]]
// CHECK:         return %{{.*}}, %{{.*}}, %[[P]]

// The optimizer, after it, updates the parameter itself (W(t) - lr * g)
// with the gradient taken at the previous version.
// SGD-LABEL: func.func @one_param(
// SGD-SAME:      %[[X:[^:]*]]: tensor<2x3xf32> {onnx.name = "x"},
// SGD-SAME:      %[[P:[^:]*]]: tensor<3xf32> {{.*}}graph.state = "w"},
// SGD-SAME:      %[[Q:[^:]*]]: tensor<3xf32> {{.*}}graph.state = "w.2bw.previous", graph.state_of = 1 : i64}
// SGD:           graph.mul %[[X]], %[[Q]]
// SGD:           %[[G:.*]] = graph.reduce_sum %[[X]]
// SGD:           %[[STEP:.*]] = graph.mul %{{.*}}, %[[G]]
// SGD:           %[[NEW:.*]] = graph.sub %[[P]], %[[STEP]]
// SGD:           return %{{.*}}, %[[G]], %[[P]], %[[NEW]]
func.func @one_param(%x: tensor<2x3xf32> {onnx.name = "x"},
                     %w: tensor<3xf32> {graph.init = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>, graph.state = "w"})
    -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {graph.grad = 1 : i64}) {
  %y = graph.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  %g = graph.reduce_sum %x {axes = array<i64: 0>, graph.backward, keepdims = false} : (tensor<2x3xf32>) -> tensor<3xf32>
  return %l, %g : tensor<f32>, tensor<3xf32>
}
