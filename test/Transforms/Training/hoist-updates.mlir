// RUN: pcc-opt %s --pcc-hoist-updates --split-input-file | FileCheck %s

// Each update moves to just after what it reads: w2's right after its
// gradient; w1's, whose gradient is ready as early, only after the last
// reader of w1, which reads it through a transpose (a view): so that the
// update stays w1's last reader and is computed in its buffer. The scalar
// that both read, which only they read, moves to the top. What is not an
// update (%e, returned as an output) stays where it was.

// CHECK-LABEL: func.func @updates(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x3xf32>
// CHECK-SAME:      %[[W1:[^:]*]]: tensor<3x3xf32>
// CHECK-SAME:      %[[W2:[^:]*]]: tensor<3x3xf32>
// CHECK:         %[[S:.*]] = graph.constant
// CHECK-NEXT:    %[[H:.*]] = graph.matmul %[[X]], %[[W1]]
// CHECK-NEXT:    %[[G1:.*]] = graph.mul %[[H]], %[[X]]
// CHECK-NEXT:    %[[STEP1:.*]] = graph.mul %[[G1]], %[[S]]
// CHECK-NEXT:    %[[Y:.*]] = graph.matmul %[[H]], %[[W2]]
// CHECK-NEXT:    %[[G2:.*]] = graph.mul %[[Y]], %[[H]]
// CHECK-NEXT:    %[[STEP2:.*]] = graph.mul %[[G2]], %[[S]]
// CHECK-NEXT:    %[[U2:.*]] = graph.sub %[[W2]], %[[STEP2]]
// CHECK-NEXT:    %[[WT:.*]] = graph.transpose %[[W1]]
// CHECK-NEXT:    %[[Z:.*]] = graph.matmul %[[Y]], %[[WT]]
// CHECK-NEXT:    %[[U1:.*]] = graph.sub %[[W1]], %[[STEP1]]
// CHECK-NEXT:    %[[E:.*]] = graph.mul %[[Z]], %[[Z]]
// CHECK-NEXT:    return %[[E]], %[[U1]], %[[U2]]
func.func @updates(%x: tensor<3x3xf32> {onnx.name = "x"},
                   %w1: tensor<3x3xf32> {graph.init = dense<1.0> : tensor<3x3xf32>, graph.state = "w1"},
                   %w2: tensor<3x3xf32> {graph.init = dense<2.0> : tensor<3x3xf32>, graph.state = "w2"})
    -> (tensor<3x3xf32> {onnx.name = "e"}, tensor<3x3xf32> {graph.update = 1 : i64}, tensor<3x3xf32> {graph.update = 2 : i64}) {
  %h = graph.matmul %x, %w1 : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %g1 = graph.mul %h, %x : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %y = graph.matmul %h, %w2 : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %g2 = graph.mul %y, %h : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %wt = graph.transpose %w1 {perm = array<i64: 1, 0>} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %z = graph.matmul %y, %wt : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %e = graph.mul %z, %z : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %s = graph.constant dense<1.000000e-01> : tensor<f32>
  %step1 = graph.mul %g1, %s : (tensor<3x3xf32>, tensor<f32>) -> tensor<3x3xf32>
  %u1 = graph.sub %w1, %step1 : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %step2 = graph.mul %g2, %s : (tensor<3x3xf32>, tensor<f32>) -> tensor<3x3xf32>
  %u2 = graph.sub %w2, %step2 : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  return %e, %u1, %u2 : tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3xf32>
}

// -----

// An op that also feeds what is no update (the gradient %g, which %k
// reads too) stays where it is; the update that reads it moves up to
// just after it. A function without updates is left alone.

// CHECK-LABEL: func.func @shared(
// CHECK:         graph.matmul
// CHECK-NEXT:    graph.exp
// CHECK-NEXT:    %[[G:.*]] = graph.mul
// CHECK-NEXT:    %[[U:.*]] = graph.sub %{{.*}}, %[[G]]
// CHECK-NEXT:    %[[K:.*]] = graph.mul %[[G]], %[[G]]
// CHECK-NEXT:    return
func.func @shared(%x: tensor<3x3xf32> {onnx.name = "x"},
                  %w: tensor<3x3xf32> {graph.init = dense<1.0> : tensor<3x3xf32>, graph.state = "w"})
    -> (tensor<3x3xf32> {onnx.name = "y"}, tensor<3x3xf32> {onnx.name = "k"}, tensor<3x3xf32> {graph.update = 1 : i64}) {
  %h = graph.matmul %x, %w : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %y = graph.exp %h : tensor<3x3xf32>
  %g = graph.mul %h, %x : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %k = graph.mul %g, %g : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %u = graph.sub %w, %g : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  return %y, %k, %u : tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3xf32>
}

// CHECK-LABEL: func.func @inference(
// CHECK:         graph.constant
// CHECK-NEXT:    graph.mul
func.func @inference(%x: tensor<3xf32> {onnx.name = "x"}) -> (tensor<3xf32> {onnx.name = "y"}) {
  %c = graph.constant dense<2.000000e+00> : tensor<f32>
  %y = graph.mul %x, %c : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}
