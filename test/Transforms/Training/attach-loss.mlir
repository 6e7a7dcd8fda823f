// RUN: pcc-opt %s --pcc-attach-loss --split-input-file | FileCheck %s
// RUN: pcc-opt %s --pcc-attach-loss="labels=ids logits=out" --split-input-file | FileCheck %s --check-prefix=NAMED
// RUN: pcc-opt %s --pcc-attach-loss --split-input-file --mlir-print-debuginfo | FileCheck %s --check-prefix=LOC

// Every function names its labels `ids` and its logits `out`, so that both
// the search by type (default) and the selection by name (NAMED) apply.

// The causal-LM cross-entropy: logits[:, :-1] against labels[:, 1:], as
// log_softmax over the vocabulary, the label's log-probability picked with
// gather_elements, and the negated mean, appended as a rank-0 result named
// `loss`. Found by type: the first int64 [B, T] argument and the first float
// [B, T, V] result. Every op the pass builds is located at "loss".

// CHECK-LABEL: func.func @by_type(
// CHECK-SAME:      %[[IDS:[^:]+]]: tensor<2x4xi64> {graph.index_bound = 8 : i64, graph.index_node = "loss", onnx.name = "ids"}, %[[X:[^:]+]]: tensor<2x4x8xf32>)
// CHECK-SAME:      -> (tensor<2x4x8xf32> {onnx.name = "out"}, tensor<f32> {graph.loss, onnx.name = "loss"})
// CHECK-NEXT:    %[[Z:.*]] = graph.relu %[[X]]
// CHECK-NEXT:    %[[ZS:.*]] = graph.slice %[[Z]] {sizes = array<i64: 2, 3, 8>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x4x8xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT:    %[[YS:.*]] = graph.slice %[[IDS]] {sizes = array<i64: 2, 3>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x4xi64>) -> tensor<2x3xi64>
// CHECK-NEXT:    %[[IDX:.*]] = graph.reshape %[[YS]] : tensor<2x3xi64> to tensor<2x3x1xi64>
// CHECK-NEXT:    %[[LOGP:.*]] = graph.log_softmax %[[ZS]] {axis = 2 : i64} : tensor<2x3x8xf32>
// CHECK-NEXT:    %[[PICK:.*]] = graph.gather_elements %[[LOGP]][%[[IDX]]] {axis = 2 : i64} : (tensor<2x3x8xf32>, tensor<2x3x1xi64>) -> tensor<2x3x1xf32>
// CHECK-NEXT:    %[[MEAN:.*]] = graph.reduce_mean %[[PICK]] {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x1xf32>) -> tensor<f32>
// CHECK-NEXT:    %[[LOSS:.*]] = graph.neg %[[MEAN]] : tensor<f32>
// CHECK-NEXT:    return %[[Z]], %[[LOSS]] : tensor<2x4x8xf32>, tensor<f32>

// NAMED-LABEL: func.func @by_type(
// NAMED:         graph.neg
// NAMED-NEXT:    return

// LOC-LABEL: func.func @by_type(
// LOC:         graph.relu {{.*}} loc(#[[RELU:loc[0-9]*]])
// LOC-NEXT:    graph.slice {{.*}} loc(#[[LOSS:loc[0-9]*]])
// LOC-NEXT:    graph.slice {{.*}} loc(#[[LOSS]])
// LOC-NEXT:    graph.reshape {{.*}} loc(#[[LOSS]])
// LOC-NEXT:    graph.log_softmax {{.*}} loc(#[[LOSS]])
// LOC-NEXT:    graph.gather_elements {{.*}} loc(#[[LOSS]])
// LOC-NEXT:    graph.reduce_mean {{.*}} loc(#[[LOSS]])
// LOC-NEXT:    graph.neg {{.*}} loc(#[[LOSS]])
// LOC:       #[[LOSS]] = loc("loss")
func.func @by_type(%ids: tensor<2x4xi64> {onnx.name = "ids"}, %x: tensor<2x4x8xf32>)
    -> (tensor<2x4x8xf32> {onnx.name = "out"}) {
  %z = graph.relu %x : tensor<2x4x8xf32>
  return %z : tensor<2x4x8xf32>
}

// -----

// The first candidates win: a float rank-2 argument, a rank-3 integer
// result and a rank-2 float result are skipped; of two matches, the first
// is taken. The existing results and their attributes stay in front of the
// loss.

// CHECK-LABEL: func.func @first_match(
// CHECK-SAME:      %[[F:[^:]+]]: tensor<2x5xf32>, %[[IDS:[^:]+]]: tensor<2x5xi64> {graph.index_bound = 3 : i64, graph.index_node = "loss", onnx.name = "ids"}, %[[MASK:[^:]+]]: tensor<2x5xi64>, %[[X:[^:]+]]: tensor<2x5x3xf32>)
// CHECK-SAME:      -> (tensor<2x5x3xi64>, tensor<2x5xf32>, tensor<2x5x3xf32> {onnx.name = "out"}, tensor<2x5x3xf32> {onnx.name = "b"}, tensor<f32> {graph.loss, onnx.name = "loss"})
// CHECK:         %[[I:.*]] = graph.cast %[[X]]
// CHECK-NEXT:    %[[A:.*]] = graph.exp %[[X]]
// CHECK-NEXT:    %[[B:.*]] = graph.neg %[[X]]
// CHECK-NEXT:    graph.slice %[[A]] {sizes = array<i64: 2, 4, 3>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>}
// CHECK-NEXT:    graph.slice %[[IDS]] {sizes = array<i64: 2, 4>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>}
// CHECK-NOT:     %[[MASK]]
// CHECK:         %[[LOSS:.*]] = graph.neg %{{.*}} : tensor<f32>
// CHECK-NEXT:    return %[[I]], %[[F]], %[[A]], %[[B]], %[[LOSS]] :
func.func @first_match(%f: tensor<2x5xf32>, %ids: tensor<2x5xi64> {onnx.name = "ids"}, %mask: tensor<2x5xi64>, %x: tensor<2x5x3xf32>)
    -> (tensor<2x5x3xi64>, tensor<2x5xf32>, tensor<2x5x3xf32> {onnx.name = "out"}, tensor<2x5x3xf32> {onnx.name = "b"}) {
  %i = graph.cast %x : tensor<2x5x3xf32> to tensor<2x5x3xi64>
  %a = graph.exp %x : tensor<2x5x3xf32>
  %b = graph.neg %x : tensor<2x5x3xf32>
  return %i, %f, %a, %b : tensor<2x5x3xi64>, tensor<2x5xf32>, tensor<2x5x3xf32>, tensor<2x5x3xf32>
}

// -----

// Selection by ONNX name (`onnx.name` argument and result attributes)
// overrides the search by type, which takes `mask` and `first` here.

// CHECK-LABEL: func.func @by_name(
// CHECK-SAME:      %[[MASK:[^:]*]]: tensor<2x4xi64> {graph.index_bound = 8 : i64, graph.index_node = "loss", onnx.name = "mask"}
// CHECK:         %[[FIRST:.*]] = graph.relu
// CHECK-NEXT:    graph.sigmoid
// CHECK-NEXT:    graph.slice %[[FIRST]] {{.*}} : (tensor<2x4x8xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT:    graph.slice %[[MASK]] {{.*}} : (tensor<2x4xi64>) -> tensor<2x3xi64>

// NAMED-LABEL: func.func @by_name(
// NAMED-SAME:      %[[MASK:[^:]+]]: tensor<2x4xi64> {onnx.name = "mask"}, %[[IDS:[^:]+]]: tensor<2x4xi64> {graph.index_bound = 8 : i64, graph.index_node = "loss", onnx.name = "ids"}, %[[X:[^:]+]]: tensor<2x4x8xf32> {onnx.name = "x"})
// NAMED-SAME:      -> (tensor<2x4x8xf32> {onnx.name = "first"}, tensor<2x4x8xf32> {onnx.name = "out"}, tensor<f32> {graph.loss, onnx.name = "loss"})
// NAMED-NEXT:    %[[FIRST:.*]] = graph.relu %[[X]]
// NAMED-NEXT:    %[[OUT:.*]] = graph.sigmoid %[[X]]
// NAMED-NEXT:    graph.slice %[[OUT]] {sizes = array<i64: 2, 3, 8>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x4x8xf32>) -> tensor<2x3x8xf32>
// NAMED-NEXT:    graph.slice %[[IDS]] {sizes = array<i64: 2, 3>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x4xi64>) -> tensor<2x3xi64>
// NAMED-NOT:     %[[MASK]]
// NAMED:         %[[LOSS:.*]] = graph.neg
// NAMED-NEXT:    return %[[FIRST]], %[[OUT]], %[[LOSS]]
func.func @by_name(%mask: tensor<2x4xi64> {onnx.name = "mask"}, %ids: tensor<2x4xi64> {onnx.name = "ids"},
                   %x: tensor<2x4x8xf32> {onnx.name = "x"})
    -> (tensor<2x4x8xf32> {onnx.name = "first"}, tensor<2x4x8xf32> {onnx.name = "out"}) {
  %first = graph.relu %x : tensor<2x4x8xf32>
  %out = graph.sigmoid %x : tensor<2x4x8xf32>
  return %first, %out : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Narrower integer labels, when named, are cast to i64 after the slice.
// (`pos` gives the search by type its int64 [B, T] argument.)

// NAMED-LABEL: func.func @int32_labels(
// NAMED-SAME:      %[[IDS:[^:]*]]: tensor<3x6xi32> {graph.index_bound = 5 : i64, graph.index_node = "loss", onnx.name = "ids"}
// NAMED:         %[[ZS:.*]] = graph.slice %{{.*}} : (tensor<3x6x5xf32>) -> tensor<3x5x5xf32>
// NAMED-NEXT:    %[[YS:.*]] = graph.slice %[[IDS]] {sizes = array<i64: 3, 5>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<3x6xi32>) -> tensor<3x5xi32>
// NAMED-NEXT:    %[[Y64:.*]] = graph.cast %[[YS]] : tensor<3x5xi32> to tensor<3x5xi64>
// NAMED-NEXT:    %[[IDX:.*]] = graph.reshape %[[Y64]] : tensor<3x5xi64> to tensor<3x5x1xi64>
// NAMED-NEXT:    %[[LOGP:.*]] = graph.log_softmax %[[ZS]] {axis = 2 : i64} : tensor<3x5x5xf32>
// NAMED-NEXT:    graph.gather_elements %[[LOGP]][%[[IDX]]] {axis = 2 : i64} : (tensor<3x5x5xf32>, tensor<3x5x1xi64>) -> tensor<3x5x1xf32>
func.func @int32_labels(%ids: tensor<3x6xi32> {onnx.name = "ids"}, %pos: tensor<3x6xi64> {onnx.name = "pos"}, %x: tensor<3x6x5xf32>)
    -> (tensor<3x6x5xf32> {onnx.name = "out"}) {
  %z = graph.relu %x : tensor<3x6x5xf32>
  return %z : tensor<3x6x5xf32>
}

// -----

// Logits of another float type: the loss is computed in that type and
// returned as f32. The shortest sequence that has a next token is T = 2.

// CHECK-LABEL: func.func @f16_logits(
// CHECK-SAME:      -> (tensor<1x2x4xf16> {onnx.name = "out"}, tensor<f32> {graph.loss, onnx.name = "loss"})
// CHECK:         graph.slice %{{.*}} {sizes = array<i64: 1, 1, 4>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<1x2x4xf16>) -> tensor<1x1x4xf16>
// CHECK:         graph.log_softmax %{{.*}} {axis = 2 : i64} : tensor<1x1x4xf16>
// CHECK:         %[[MEAN:.*]] = graph.reduce_mean %{{.*}} : (tensor<1x1x1xf16>) -> tensor<f16>
// CHECK-NEXT:    %[[NEG:.*]] = graph.neg %[[MEAN]] : tensor<f16>
// CHECK-NEXT:    %[[LOSS:.*]] = graph.cast %[[NEG]] : tensor<f16> to tensor<f32>
// CHECK-NEXT:    return %{{.*}}, %[[LOSS]] : tensor<1x2x4xf16>, tensor<f32>
func.func @f16_logits(%ids: tensor<1x2xi64> {onnx.name = "ids"}, %x: tensor<1x2x4xf16>)
    -> (tensor<1x2x4xf16> {onnx.name = "out"}) {
  %z = graph.relu %x : tensor<1x2x4xf16>
  return %z : tensor<1x2x4xf16>
}
