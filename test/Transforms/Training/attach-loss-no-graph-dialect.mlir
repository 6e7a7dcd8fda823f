// The training passes declare the Graph dialect as a dependency, so they
// work on input that holds no Graph op yet.
// RUN: pcc-opt %s --pcc-attach-loss | FileCheck %s

// CHECK-LABEL: func.func @logits_are_an_argument(
// CHECK:         graph.log_softmax
// CHECK:         return %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<f32>
func.func @logits_are_an_argument(%ids: tensor<2x4xi64>, %x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  return %x : tensor<2x4x8xf32>
}
