// RUN: pcc-opt %s --pcc-overlap-collectives | FileCheck %s
// RUN: pcc-translate --graph-to-cpp %s | FileCheck %s --check-prefix=CODE

// Each collective moves up, with the ops it depends on, above the ops it
// does not depend on (here %w2 and %w3, a weight gradient's work), but not
// above an earlier collective: every rank keeps one order of them. The
// code starts a collective where it stands and waits for it just before
// the first op that reads its result, so %w2 and %w3 run while it travels.

dist.mesh @mesh(tp = 2)

func.func @step(%x: tensor<64xf32> {onnx.name = "x"}, %w: tensor<64xf32> {onnx.name = "w"})
    -> (tensor<64xf32> {onnx.name = "y"}, tensor<64xf32> {onnx.name = "g"}) {
  %first = dist.all_reduce %x on @mesh axes ["tp"] sum : tensor<64xf32>
  %w2 = graph.mul %w, %w : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %p = graph.add %first, %first : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %w3 = graph.mul %w2, %w : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %r = dist.all_reduce %p on @mesh axes ["tp"] sum : tensor<64xf32>
  %y = graph.add %r, %w3 : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  return %y, %w3 : tensor<64xf32>, tensor<64xf32>
}

// CHECK-LABEL: func.func @step
// CHECK:         %[[FIRST:.*]] = dist.all_reduce %arg0
// CHECK-NEXT:    %[[P:.*]] = graph.add %[[FIRST]], %[[FIRST]]
// CHECK-NEXT:    %[[R:.*]] = dist.all_reduce %[[P]]
// CHECK-NEXT:    %[[W2:.*]] = graph.mul %arg1, %arg1
// CHECK-NEXT:    %[[W3:.*]] = graph.mul %[[W2]], %arg1
// CHECK-NEXT:    graph.add %[[R]], %[[W3]]

// Without the pass (pcc-translate prints the module as it is): the first
// collective is waited for where %p reads it, after %w2 ran meanwhile.
// CODE:       int32_t [[Q0:q[0-9]+]] = -1;
// CODE:       ops->start_all_reduce({{.*}}&[[Q0]]))
// CODE:       // graph.mul
// CODE:       ops->wait(ctx->comm, [[Q0]], nullptr)
// CODE-NEXT:  // graph.add
// CODE:       int32_t [[Q1:q[0-9]+]] = -1;
// CODE:       ops->start_all_reduce({{.*}}&[[Q1]]))
// CODE-NEXT:  ops->wait(ctx->comm, [[Q1]], nullptr)
