// RUN: pcc-opt %s --pcc-overlap-collectives | FileCheck %s
// RUN: pcc-opt %s --pcc-overlap-collectives | pcc-translate --graph-to-cpp | FileCheck %s --check-prefix=CODE
// RUN: pcc-translate --graph-to-cpp %s | FileCheck %s --check-prefix=SYNC

// Each collective moves up, with the ops it depends on, above the ops it
// does not depend on (here %w2 and %w3, a weight gradient's work), but not
// above an earlier collective: every rank keeps one order of them. A
// collective starts where it stands and completes at its dist.wait, which
// the pass places just before the first op that reads its result, so %w2
// and %w3 run while %r travels.

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
// CHECK-NEXT:    %[[F:.*]] = dist.wait %[[FIRST]] : tensor<64xf32>
// CHECK-NEXT:    %[[P:.*]] = graph.add %[[F]], %[[F]]
// CHECK-NEXT:    %[[R:.*]] = dist.all_reduce %[[P]]
// CHECK-NEXT:    %[[W2:.*]] = graph.mul %arg1, %arg1
// CHECK-NEXT:    %[[W3:.*]] = graph.mul %[[W2]], %arg1
// CHECK-NEXT:    %[[RW:.*]] = dist.wait %[[R]] : tensor<64xf32>
// CHECK-NEXT:    graph.add %[[RW]], %[[W3]]

// The code prints the waits where the IR has them.
// CODE-LABEL: int pcc_model_run(const pccrt_context *ctx) {
// CODE:       int32_t [[Q0:q[0-9]+]] = -1;
// CODE:       ops->start_all_reduce({{.*}}&[[Q0]]))
// CODE-NEXT:  // dist.wait
// CODE-NEXT:  ops->wait(ctx->comm, [[Q0]], nullptr)
// CODE-NEXT:  // graph.add
// CODE:       int32_t [[Q1:q[0-9]+]] = -1;
// CODE:       ops->start_all_reduce({{.*}}&[[Q1]]))
// CODE-NEXT:  // graph.mul
// CODE:       // graph.mul
// CODE:       // dist.wait
// CODE-NEXT:  ops->wait(ctx->comm, [[Q1]], nullptr)
// CODE-NEXT:  // graph.add

// Without waits in the IR, a collective completes where it starts.
// SYNC-LABEL: int pcc_model_run(const pccrt_context *ctx) {
// SYNC:       int32_t [[Q0:q[0-9]+]] = -1;
// SYNC:       ops->start_all_reduce({{.*}}&[[Q0]]))
// SYNC-NEXT:  ops->wait(ctx->comm, [[Q0]], nullptr)
// SYNC-NEXT:  // graph.mul

// Views of a collective's result compute nothing: they follow the wait,
// which goes before the first op that computes with the result.
func.func private @views(%x: tensor<2x32xf32> {onnx.name = "x"}, %w: tensor<64xf32> {onnx.name = "w"})
    -> (tensor<64xf32> {onnx.name = "y"}) {
  %s = dist.all_reduce %x on @mesh axes ["tp"] sum : tensor<2x32xf32>
  %v = graph.reshape %s : tensor<2x32xf32> to tensor<64xf32>
  %w2 = graph.mul %w, %w : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %y = graph.add %v, %w2 : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  return %y : tensor<64xf32>
}

// CHECK-LABEL: func.func private @views
// CHECK:         %[[S:.*]] = dist.all_reduce %arg0
// CHECK-NEXT:    %[[W2:.*]] = graph.mul %arg1, %arg1
// CHECK-NEXT:    %[[SW:.*]] = dist.wait %[[S]] : tensor<2x32xf32>
// CHECK-NEXT:    %[[V:.*]] = graph.reshape %[[SW]]
// CHECK-NEXT:    graph.add %[[V]], %[[W2]]
