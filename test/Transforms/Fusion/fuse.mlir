// RUN: pcc-opt %s --pcc-fuse --split-input-file | FileCheck %s

// GPT-2's tanh GELU: one loop nest. The exporter's scalars (one-element
// initializers that are not trained) and splat constants become literals in
// the body; the bias, of another shape, is read broadcast. 1 + tanh(z)
// becomes 2 sigmoid(2z), one exponential and no branch.

// CHECK-LABEL: func.func @gelu
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK:         %[[R:.*]] = graph.fusion %[[X]], %[[B]] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    ^bb0(%[[A0:.*]]: tensor<4x8xf32>, %[[A1:.*]]: tensor<8xf32>):
// CHECK-DAG:       graph.constant dense<5.000000e-01> : tensor<f32>
// CHECK-DAG:       %[[THREE:.*]] = graph.constant dense<3.000000e+00> : tensor<f32>
// CHECK-DAG:       %[[TWO:.*]] = graph.constant dense<2.000000e+00> : tensor<f32>
// CHECK-DAG:       %[[K:.*]] = graph.constant dense<0.797884583> : tensor<f32>
// CHECK:           %[[Y:.*]] = graph.add %[[A0]], %[[A1]]
// CHECK:           graph.pow %[[Y]], %[[THREE]]
// CHECK:           %[[Z:.*]] = graph.mul %{{.*}}, %[[K]]
// CHECK-NEXT:      %[[Z2:.*]] = graph.mul %[[Z]], %[[TWO]]
// CHECK-NEXT:      %[[S:.*]] = graph.sigmoid %[[Z2]]
// CHECK-NEXT:      %[[S2:.*]] = graph.mul %[[S]], %[[TWO]]
// CHECK-NEXT:      %[[OUT:.*]] = graph.mul %{{.*}}, %[[S2]]
// CHECK-NEXT:      graph.yield %[[OUT]] : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[R]]
func.func @gelu(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %half = graph.weight "half" dense<0.5> : tensor<f32>
  %three = graph.weight "three" dense<3.0> : tensor<f32>
  %c = graph.constant dense<0.044715> : tensor<f32>
  %k = graph.constant dense<0.7978846> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %y = graph.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %0 = graph.mul %y, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %1 = graph.pow %y, %three : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = graph.mul %1, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %3 = graph.add %y, %2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = graph.mul %3, %k : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %5 = graph.tanh %4 : tensor<4x8xf32>
  %6 = graph.add %5, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %7 = graph.mul %0, %6 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %7 : tensor<4x8xf32>
}

// -----

// A tanh that something else reads too (a training step's backward reads
// it for 1 - tanh^2) stays, and so does 1 + tanh of anything but 1.

// CHECK-LABEL: func.func @tanh_kept
// CHECK:         graph.fusion
// CHECK-NOT:       graph.sigmoid
// CHECK:           %[[T:.*]] = graph.tanh %arg1
// CHECK-NEXT:      %[[A:.*]] = graph.add %[[T]]
// CHECK-NEXT:      %[[U:.*]] = graph.tanh %[[A]]
// CHECK-NEXT:      graph.add %[[U]]
// CHECK-NEXT:      graph.yield
func.func @tanh_kept(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %one = graph.constant dense<1.0> : tensor<f32>
  %two = graph.constant dense<2.0> : tensor<f32>
  %t = graph.tanh %x : tensor<16xf32>
  %a = graph.add %t, %one : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %u = graph.tanh %a : tensor<16xf32>
  %b = graph.add %u, %two : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  return %a, %t, %b : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// A value that is also read after the group (a training step saves it for
// the backward) is a further result of the fusion. A trained scalar stays
// an operand: its value changes from step to step.

// CHECK-LABEL: func.func @saved
// CHECK:         %[[F:.*]]:2 = graph.fusion %{{.*}}, %[[S:.*]] : (tensor<16xf32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>)
// CHECK:           %[[E:.*]] = graph.exp
// CHECK-NEXT:      %[[M:.*]] = graph.mul %[[E]]
// CHECK-NEXT:      graph.yield %[[E]], %[[M]]
// CHECK:         graph.reduce_sum %[[F]]#1
// CHECK:         graph.reduce_sum %[[F]]#0
func.func @saved(%x: tensor<16xf32>) -> (tensor<1xf32>, tensor<1xf32>) {
  %s = graph.weight "scale" trainable dense<2.0> : tensor<f32>
  %e = graph.exp %x : tensor<16xf32>
  %m = graph.mul %e, %s : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %r = graph.reduce_sum %m {axes = array<i64: 0>, keepdims = true} : (tensor<16xf32>) -> tensor<1xf32>
  %t = graph.reduce_sum %e {axes = array<i64: 0>, keepdims = true} : (tensor<16xf32>) -> tensor<1xf32>
  return %r, %t : tensor<1xf32>, tensor<1xf32>
}

// -----

// A producer read by another op before the group's last op stays out: the
// fusion takes that last op's place and moves nothing else. So does a
// producer of another shape (it would run once per element of the group).

// CHECK-LABEL: func.func @order
// CHECK:         %[[E:.*]] = graph.exp %{{.*}} : tensor<4x8xf32>
// CHECK-NEXT:    %[[R:.*]] = graph.reduce_sum %[[E]]
// CHECK-NEXT:    %[[N:.*]] = graph.neg %{{.*}} : tensor<8xf32>
// CHECK-NEXT:    %[[F:.*]] = graph.fusion %[[E]], %[[R]], %[[N]]
// CHECK:           graph.sub
// CHECK-NEXT:      graph.add
// CHECK-NEXT:      graph.yield
func.func @order(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %e = graph.exp %x : tensor<4x8xf32>
  %r = graph.reduce_sum %e {axes = array<i64: 1>, keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %n = graph.neg %b : tensor<8xf32>
  %d = graph.sub %e, %r : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %y = graph.add %d, %n : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A lone element-wise op is left as it is.

// CHECK-LABEL: func.func @single
// CHECK-NOT:     graph.fusion
// CHECK:         graph.relu
func.func @single(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.relu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
