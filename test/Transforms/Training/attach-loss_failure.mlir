// RUN: pcc-opt %s --pcc-attach-loss --split-input-file -verify-diagnostics
// RUN: not pcc-opt %s --pcc-attach-loss="labels=ids logits=out" --split-input-file 2>&1 | FileCheck %s --check-prefix=NAMED

// The expected-error lines are for the search by type (first RUN); the
// NAMED lines for the selection by name, which fails on every function too.

// No int64 [B, T] argument: a float [B, T], an int64 of rank 1 and one of
// rank 3 do not count. By name, `ids` is found but is no integer tensor.
// NAMED: error: training needs integer labels [batch, seq] and float logits [batch, seq, vocab]
// expected-error @+1 {{training needs the labels: the model has no int64 [batch, seq] input (--labels NAME)}}
func.func @no_int_labels(%a: tensor<2x4xf32> {onnx.name = "ids"}, %b: tensor<8xi64>, %c: tensor<2x4x1xi64>, %x: tensor<2x4x8xf32>)
    -> (tensor<2x4x8xf32> {onnx.name = "out"}) {
  %z = graph.relu %x : tensor<2x4x8xf32>
  return %z : tensor<2x4x8xf32>
}

// -----

// No float [B, T, V] result: an integer rank-3 result, a float rank-2 and a
// float rank-4 one do not count. By name, there is no input `ids`.
// NAMED: error: training needs the labels: no graph input named 'ids' (--labels NAME)
// expected-error @+1 {{training needs the logits: the model has no float [batch, seq, vocab] output (--logits NAME)}}
func.func @no_float_logits(%labels: tensor<2x4xi64> {onnx.name = "labels"}, %x: tensor<2x4x8xf32>)
    -> (tensor<2x4x8xi64>, tensor<2x4xf32>, tensor<2x4x8x1xf32>) {
  %i = graph.cast %x : tensor<2x4x8xf32> to tensor<2x4x8xi64>
  %s = graph.reduce_sum %x {axes = array<i64: 2>, keepdims = false} : (tensor<2x4x8xf32>) -> tensor<2x4xf32>
  %r = graph.reshape %x : tensor<2x4x8xf32> to tensor<2x4x8x1xf32>
  return %i, %s, %r : tensor<2x4x8xi64>, tensor<2x4xf32>, tensor<2x4x8x1xf32>
}

// -----

// The batch sizes differ. By name, there is no output `out`.
// NAMED: error: training needs the logits: no graph output named 'out' (--logits NAME)
// expected-error @+1 {{labels 'tensor<3x4xi64>' and logits 'tensor<2x4x8xf32>' disagree on [batch, seq] (or seq < 2)}}
func.func @batch_mismatch(%ids: tensor<3x4xi64> {onnx.name = "ids"}, %x: tensor<2x4x8xf32>)
    -> (tensor<2x4x8xf32> {onnx.name = "logits"}) {
  %z = graph.relu %x : tensor<2x4x8xf32>
  return %z : tensor<2x4x8xf32>
}

// -----

// The sequence lengths differ.
// NAMED: error: labels 'tensor<2x5xi64>' and logits 'tensor<2x4x8xf32>' disagree on [batch, seq] (or seq < 2)
// expected-error @+1 {{labels 'tensor<2x5xi64>' and logits 'tensor<2x4x8xf32>' disagree on [batch, seq] (or seq < 2)}}
func.func @seq_mismatch(%ids: tensor<2x5xi64> {onnx.name = "ids"}, %x: tensor<2x4x8xf32>)
    -> (tensor<2x4x8xf32> {onnx.name = "out"}) {
  %z = graph.relu %x : tensor<2x4x8xf32>
  return %z : tensor<2x4x8xf32>
}

// -----

// A single token has no next token to predict: T < 2.
// NAMED: error: labels 'tensor<2x1xi64>' and logits 'tensor<2x1x8xf32>' disagree on [batch, seq] (or seq < 2)
// expected-error @+1 {{labels 'tensor<2x1xi64>' and logits 'tensor<2x1x8xf32>' disagree on [batch, seq] (or seq < 2)}}
func.func @seq_too_short(%ids: tensor<2x1xi64> {onnx.name = "ids"}, %x: tensor<2x1x8xf32>)
    -> (tensor<2x1x8xf32> {onnx.name = "out"}) {
  %z = graph.relu %x : tensor<2x1x8xf32>
  return %z : tensor<2x1x8xf32>
}

// -----

// A named output that is not float [B, T, V] (by type, there is none).
// NAMED: error: training needs integer labels [batch, seq] and float logits [batch, seq, vocab]
// expected-error @+1 {{training needs the logits: the model has no float [batch, seq, vocab] output (--logits NAME)}}
func.func @named_logits_wrong_type(%ids: tensor<2x4xi64> {onnx.name = "ids"}, %x: tensor<2x4x8xf32>)
    -> (tensor<2x4x8xi64> {onnx.name = "out"}) {
  %i = graph.cast %x : tensor<2x4x8xf32> to tensor<2x4x8xi64>
  return %i : tensor<2x4x8xi64>
}
