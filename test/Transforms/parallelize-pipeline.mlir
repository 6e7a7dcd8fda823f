// The named pipeline that `pcc compile` runs: with train=true it decides the
// trainable set, attaches the loss, differentiates and applies the
// optimizer, then folds and checks static shapes; without it, only the
// cleanup and the check.
// RUN: pcc-opt %s --pcc-parallelize | FileCheck %s --check-prefix=INFER
// RUN: pcc-opt %s --pcc-parallelize="train=true optimizer=sgd lr=0.5" | FileCheck %s --check-prefix=TRAIN

// INFER-LABEL: func.func @main
// INFER-NOT: graph.grad
// INFER: return

// TRAIN-LABEL: func.func @main
// TRAIN-SAME: %[[W:arg[0-9]+]]: tensor<4x4xf32> {graph.init = dense<5.000000e-01> : tensor<4x4xf32>, graph.state = "w"}
// TRAIN-SAME: %[[LR:arg[0-9]+]]: tensor<f32> {graph.init = dense<5.000000e-01> : tensor<f32>, graph.state = "pcc.lr"}
// TRAIN-SAME: {graph.loss, onnx.name = "loss"}
// TRAIN-SAME: {graph.grad = 1 : i64}
// TRAIN-SAME: {graph.update = 1 : i64}
// TRAIN-NOT: adamw
// TRAIN: graph.mul %[[LR]],
func.func @main(%ids: tensor<2x3xi64> {onnx.name = "ids"}) -> (tensor<2x3x4xf32> {onnx.name = "logits"}) {
  %w = graph.weight "w" {exported_as = "parameter"} dense<0.5> : tensor<4x4xf32>
  %h = graph.gather %w[%ids] {axis = 0 : i64} : (tensor<4x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %t = graph.tanh %h : tensor<2x3x4xf32>
  return %t : tensor<2x3x4xf32>
}
