// RUN: pcc-opt %s --pcc-overlap-collectives | FileCheck %s

// A parameter held split (ZeRO 3) is gathered where the step needs it:
// the all-gather of an argument, with what is computed from it alone (a
// transposed weight), moves down to just before its first other reader,
// and is not hoisted, so that the gathered copy lives only while it is
// read. Each gather but the first then starts one reader early (a
// prefetch of one, as FSDP's): the second weight's gather starts once the
// first weight's completes, and travels while the first layer (%h, %a)
// computes; its transpose stays with its reader.

dist.mesh @mesh(dp = 2)

func.func @step(%x: tensor<4x8xf32> {onnx.name = "x"}, %w1: tensor<4x8xf32> {onnx.name = "w1"},
                %w2: tensor<4x8xf32> {onnx.name = "w2"}) -> (tensor<4x8xf32> {onnx.name = "y"}) {
  %g1 = dist.all_gather %w1 on @mesh axes ["dp"] dim 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %g2 = dist.all_gather %w2 on @mesh axes ["dp"] dim 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %t2 = graph.transpose %g2 {perm = array<i64: 1, 0>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h = graph.matmul %x, %g1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a = graph.tanh %h : tensor<4x8xf32>
  %y = graph.matmul %a, %t2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @step
// CHECK:         %[[G1:.*]] = dist.all_gather %arg1
// CHECK-NEXT:    %[[W1:.*]] = dist.wait %[[G1]]
// CHECK-NEXT:    %[[G2:.*]] = dist.all_gather %arg2
// CHECK-NEXT:    %[[H:.*]] = graph.matmul %arg0, %[[W1]]
// CHECK-NEXT:    %[[A:.*]] = graph.tanh %[[H]]
// CHECK-NEXT:    %[[W2:.*]] = dist.wait %[[G2]]
// CHECK-NEXT:    %[[T2:.*]] = graph.transpose %[[W2]]
// CHECK-NEXT:    graph.matmul %[[A]], %[[T2]]
