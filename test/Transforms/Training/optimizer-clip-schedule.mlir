// RUN: pcc-opt %s --pcc-optimizer="kind=sgd lr=0.1 clip-grad=0.5" | FileCheck %s --check-prefix=CLIP
// RUN: pcc-opt %s --pcc-optimizer="kind=sgd lr=0.1 lr-schedule=cosine warmup-steps=2 decay-steps=5 min-lr=0.01" | FileCheck %s --check-prefix=COS
// RUN: not pcc-opt %s --pcc-optimizer="lr-schedule=cosine warmup-steps=3 decay-steps=3" 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: not pcc-opt %s --pcc-optimizer="decay-steps=3" 2>&1 | FileCheck %s --check-prefix=CONST

func.func @two(%x: tensor<2x3xf32> {onnx.name = "x"},
               %a: tensor<3xf32> {graph.state = "a", graph.init = dense<1.0> : tensor<3xf32>},
               %b: tensor<2x3xf32> {graph.state = "b", graph.init = dense<2.0> : tensor<2x3xf32>})
    -> (tensor<f32> {graph.loss, onnx.name = "loss"}, tensor<3xf32> {graph.grad = 1 : i64}, tensor<2x3xf32> {graph.grad = 2 : i64}) {
  %y = graph.mul %x, %a : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l, %a, %b : tensor<f32>, tensor<3xf32>, tensor<2x3xf32>
}

// Clipping: the sums of squares of every gradient, their square root (the
// global norm), one scale min(1, 0.5 / (norm + 1e-6)), and each update reads
// its gradient times the scale; the gradients returned are unscaled.
// CLIP-LABEL: func.func @two
// CLIP:       %[[QA:.*]] = graph.mul %arg1, %arg1
// CLIP-NEXT:  %[[SA:.*]] = graph.reduce_sum %[[QA]] {axes = array<i64: 0>, keepdims = false}
// CLIP-NEXT:  %[[QB:.*]] = graph.mul %arg2, %arg2
// CLIP-NEXT:  %[[SB:.*]] = graph.reduce_sum %[[QB]] {axes = array<i64: 0, 1>, keepdims = false}
// CLIP-NEXT:  %[[T:.*]] = graph.add %[[SA]], %[[SB]]
// CLIP:       %[[N:.*]] = graph.sqrt %[[T]]
// CLIP:       %[[D:.*]] = graph.add %[[N]], %{{.*}}
// CLIP:       %[[Q:.*]] = graph.div %{{.*}}, %[[D]]
// CLIP:       %[[S:.*]] = graph.min %{{.*}}, %[[Q]]
// CLIP:       graph.mul %arg1, %[[S]]
// CLIP:       graph.mul %arg2, %[[S]]
// CLIP:       return %{{[0-9]+}}, %arg1, %arg2,

// The schedule: SGD gains the step counter and the rate's values as state
// (which `pcc run` may change when it resumes), the rate is computed from
// them (cosine of the clamped progress, the warmup's where) and returned as
// `learning_rate`.
// COS-LABEL: func.func @two
// COS-SAME:  %[[STEP:[^:]*]]: tensor<f32> {graph.init = dense<0.000000e+00> : tensor<f32>, graph.state = "pcc.step"}
// COS-SAME:  %[[LR:[^:]*]]: tensor<f32> {graph.init = dense<1.000000e-01> : tensor<f32>, graph.state = "pcc.lr"}
// COS-SAME:  %[[WARM:[^:]*]]: tensor<f32> {graph.init = dense<2.000000e+00> : tensor<f32>, graph.state = "pcc.warmup_steps"}
// COS-SAME:  %[[MIN:[^:]*]]: tensor<f32> {graph.init = dense<0.00999999977> : tensor<f32>, graph.state = "pcc.min_lr"}
// COS-SAME:  %[[DECAY:[^:]*]]: tensor<f32> {graph.init = dense<5.000000e+00> : tensor<f32>, graph.state = "pcc.decay_steps"}
// COS-SAME:  {onnx.name = "learning_rate"}
// COS-DAG:   graph.sub %[[STEP]], %[[WARM]]
// COS-DAG:   graph.sub %[[DECAY]], %[[WARM]]
// COS:       graph.max
// COS:       graph.min
// COS:       graph.cos
// COS:       graph.sub %[[LR]], %[[MIN]]
// COS:       %[[W:.*]] = graph.less %[[STEP]], %[[WARM]]
// COS:       graph.where %[[W]]

// ORDER: error: --decay-steps (3) must be above --warmup-steps (3)
// CONST: error: --decay-steps and --min-lr need --lr-schedule linear or cosine
